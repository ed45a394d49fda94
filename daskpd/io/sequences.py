"""DNA sequences (CSV or FASTA) to weighted-degree features, stored in the zarr format.

Inputs
------
* CSV (or any single-byte delimiter), one window per line, with a header naming the columns;
  no quoting. ``sequence_column`` holds the letters, ``label_column`` the label: a number, or
  any text mapped to +1 / -1 by ``positive`` (e.g. ``positive="ie"``: acceptor vs rest).
* FASTA: ``>`` header lines followed by sequence lines (which may wrap). The label is the value
  of a ``label=VALUE`` word of the header when there is one, else the header's last word.

Letters are A, C, G, T in either case; ``N`` only with ``allow_n=True`` (k-mers that contain it
are left out). Every window must have the same length (the features are positional).

Features: :mod:`daskpd.kernels.features` (weighted degree, explicit or hashed into
``2**hash_bits`` columns, normalized to unit norm or binary).

Scaling: a plain CSV file is split into byte ranges parsed by parallel Dask tasks exactly as in
:mod:`daskpd.io.svmlight`; a FASTA or compressed file is one task streamed in pieces. Each
piece becomes a part on disk; the parts are appended in order to the dataset by one task.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from daskpd._graphs import TaskGraph
from daskpd.data import open_dataset
from daskpd.io import _parts
from daskpd.io.svmlight import (
    _check_dest,
    _global_line,
    _line_blocks,
    _locate_row,
    _open,
    _reported,
    _source_paths,
    compression_of,
)
from daskpd.kernels import features as wd
from daskpd.kernels import parsing

#: Default bytes of text featurized at a time by one task. Small, because the features are
#: much larger than the text: a 60-nt window gives 452 nonzeros at degree 8 (about 5 KB).
DEFAULT_CHUNK_BYTES = 2**19
#: Default bytes of a plain CSV file per task.
DEFAULT_RANGE_BYTES = 8 * 2**20


class SequenceFormatError(ValueError):
    """Malformed sequence input; the message names the file and line or record."""


@dataclass(frozen=True)
class WDOptions:
    """Weighted-degree feature map.

    Parameters
    ----------
    degree : int
        Largest k-mer order K.
    hash_bits : int
        0 for the explicit layout, else hash into ``2**hash_bits`` columns.
    binary : bool
        Indicators of value 1 instead of ``sqrt(beta_k)`` normalized to unit row norm.
    """

    degree: int = 8
    hash_bits: int = 0
    binary: bool = False

    def __post_init__(self):
        if not 1 <= int(self.degree):
            raise ValueError(f"degree must be >= 1, got {self.degree}")
        if self.hash_bits and not 1 <= int(self.hash_bits) <= 31:
            raise ValueError(f"hash_bits must be between 1 and 31, got {self.hash_bits}")
        if self.hash_bits and int(self.degree) > wd.MAX_HASHED_DEGREE:
            raise ValueError(
                f"degree must be <= {wd.MAX_HASHED_DEGREE} with hashing, got {self.degree}"
            )

    def n_features(self, length: int) -> int:
        """Number of columns for windows of ``length``."""
        n_features = wd.wd_n_features(length, int(self.degree), int(self.hash_bits))
        if n_features > np.iinfo(np.int32).max:
            raise ValueError(
                f"the explicit WD map of degree {self.degree} on windows of {length} has "
                f"{n_features} columns, more than int32 column ids allow; use hash_bits"
            )
        if self.hash_bits and length > wd.MAX_HASHED_LENGTH:
            raise ValueError(f"windows longer than {wd.MAX_HASHED_LENGTH} cannot be hashed")
        return n_features


def wd_transform(codes, options: WDOptions):
    """Weighted-degree features of encoded windows.

    Parameters
    ----------
    codes : ndarray of uint8 of shape (n_samples, length)
        Letters encoded 0..3 (A, C, G, T) and 4 (N), see :func:`encode`.
    options : WDOptions

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features)
    """
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    length = codes.shape[1]
    n_features = options.n_features(length)
    indptr, indices, data = wd.wd_features(
        codes,
        int(options.degree),
        wd.wd_offsets(length, int(options.degree)),
        np.sqrt(wd.wd_weights(int(options.degree))),
        int(options.hash_bits),
        bool(options.binary),
    )
    return sp.csr_matrix((data, indices, indptr), shape=(codes.shape[0], n_features))


def encode(sequences, *, allow_n=False):
    """Encode equal-length DNA strings as a ``(n, length)`` uint8 array (A=0, C=1, G=2, T=3, N=4).

    Parameters
    ----------
    sequences : list of str or bytes
    allow_n : bool, default=False

    Returns
    -------
    codes : ndarray of uint8 of shape (n_samples, length)
    """
    raw = [s.encode("ascii") if isinstance(s, str) else bytes(s) for s in sequences]
    letters = np.frombuffer(b"".join(raw), dtype=np.uint8)
    lengths = np.array([len(s) for s in raw], dtype=np.int64)
    stops = np.cumsum(lengths)
    starts = stops - lengths
    length = int(lengths[0]) if len(raw) else 0
    codes = np.empty((len(raw), length), dtype=np.uint8)
    status, row, position = parsing.encode_sequences(
        letters, starts, stops, length, bool(allow_n), codes
    )
    if status == 1:
        letter = chr(raw[row][position])
        raise SequenceFormatError(
            f"sequence {row}: letter {letter!r} at position {position + 1} is not A, C, G, T"
            + (" or N" if allow_n else "")
        )
    if status == 2:
        raise SequenceFormatError(
            f"sequence {row} has length {position}, expected {length} (windows must be equal)"
        )
    return codes


@dataclass(frozen=True)
class _SequenceOptions:
    file_format: str
    delimiter: int
    sequence_field: int
    label_field: int
    n_fields: int
    positive: tuple | None
    allow_n: bool
    length: int
    wd: WDOptions
    chunk_bytes: int


def _fasta_label(header: bytes) -> bytes:
    words = header.split()
    for word in words:
        if word.startswith(b"label="):
            return word[len(b"label=") :]
    return words[-1] if len(words) > 1 else b""


def _labels_to_y(raw_labels, options):
    """Map label bytes to float labels; return ``(y, None)`` or ``(None, (row, message))``."""
    if options.positive is not None:
        positive = np.array(options.positive, dtype=raw_labels.dtype)
        return np.where(np.isin(raw_labels, positive), 1.0, -1.0), None
    try:
        y = raw_labels.astype(np.float64)
    except ValueError:
        # only on the error path: find the first label that is not a number
        for row, value in enumerate(raw_labels):
            try:
                float(value)
            except ValueError:
                text = value.decode("utf-8", "replace")
                return None, (row, f"label {text!r} is not a number; give the positive "
                                   "class (positive=... / --positive)")  # fmt: skip
        raise
    bad = ~np.isfinite(y)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        return None, (row, f"label {y[row]} is not finite")
    return y, None


def _parse_csv_block(block, options, skip_header):
    buf = np.frombuffer(block, dtype=np.uint8)
    status, n_rows, seq_start, seq_stop, label_start, label_stop, row_line = (
        parsing.split_delimited(
            buf, options.delimiter, options.sequence_field, options.label_field,
            options.n_fields, skip_header,
        )
    )  # fmt: skip
    if status:
        return None, (int(row_line[n_rows]), f"expected {options.n_fields} fields")
    seq_start, seq_stop = seq_start[:n_rows], seq_stop[:n_rows]
    label_start, label_stop = label_start[:n_rows], label_stop[:n_rows]
    row_line = row_line[:n_rows]
    width = int((label_stop - label_start).max()) if n_rows else 1
    raw_labels = (
        parsing.gather_tokens(buf, label_start, label_stop, max(width, 1))
        .view(f"S{max(width, 1)}")
        .ravel()
    )
    return (buf, seq_start, seq_stop, raw_labels, row_line, None), None


def _parse_fasta_block(block):
    buf = np.frombuffer(block, dtype=np.uint8)
    (
        status, n_records, header_start, header_stop, header_line, letters, seq_start,
        seq_stop, error_line,
    ) = parsing.split_fasta(buf)  # fmt: skip
    if status:
        return None, (int(error_line), "sequence text before the first '>' header")
    headers = [bytes(block[header_start[i] : header_stop[i]]) for i in range(n_records)]
    labels = [_fasta_label(header) for header in headers]
    width = max([len(label) for label in labels] + [1])
    raw_labels = np.array(labels, dtype=f"S{width}")
    names = [header.split()[0].decode("utf-8", "replace") if header.split() else ""
             for header in headers]  # fmt: skip
    return (letters, seq_start, seq_stop, raw_labels, header_line, names), None


def _parse_sequence_range(path, compression, start, stop, parts_dir, range_id, options):
    """Dask task: parse, encode and featurize the windows of one byte range or file."""
    meta = {"path": path, "range_id": range_id, "n_lines": 0, "parts": [], "error": None}
    with _open(path, compression) as handle:
        if options.file_format == "fasta":
            blocks = _line_blocks(handle, 0, None, options.chunk_bytes, separator=b"\n>")
        else:
            blocks = _line_blocks(handle, start, stop, options.chunk_bytes)
        blocks = _reported(blocks, meta, lambda detail, line: (line, detail))
        for block_id, block in enumerate(blocks):
            if options.file_format == "fasta":
                parsed, error = _parse_fasta_block(block)
            else:
                parsed, error = _parse_csv_block(block, options, start == 0 and block_id == 0)
            n_lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
            if error is not None:
                meta["error"] = (meta["n_lines"] + error[0], error[1])
                return meta
            letters, seq_start, seq_stop, raw_labels, row_line, names = parsed
            line_offset = meta["n_lines"]
            codes = np.empty((len(seq_start), options.length), dtype=np.uint8)
            status, row, position = parsing.encode_sequences(
                letters, seq_start, seq_stop, options.length, options.allow_n, codes
            )
            if status:
                if status == 1:
                    letter = chr(letters[seq_start[row] + position])
                    allowed = "A, C, G, T" + (" or N" if options.allow_n else "")
                    text = f"letter {letter!r} at position {position + 1} is not {allowed}"
                else:
                    text = f"sequence has length {position}, expected {options.length}"
                if names is not None:
                    text = f"record {names[row]!r}: {text}"
                meta["error"] = (line_offset + int(row_line[row]), text)
                return meta
            y, error = _labels_to_y(raw_labels, options)
            if error is not None:
                text = error[1] if names is None else f"record {names[error[0]]!r}: {error[1]}"
                meta["error"] = (line_offset + int(row_line[error[0]]), text)
                return meta
            X = wd_transform(codes, options.wd)
            if len(y):
                info = _parts.save_part(
                    parts_dir,
                    f"r{range_id:08d}-b{block_id:08d}",
                    y,
                    indptr=X.indptr.astype(np.int64),
                    indices=X.indices,
                    data=None if options.wd.binary else X.data,
                    row_line=row_line,
                )
                info["line_offset"] = line_offset
                meta["parts"].append(info)
            meta["n_lines"] += n_lines
    meta["labels"] = sorted(
        {float(v) for info in meta["parts"] for v in np.unique(_parts.load_array(info, "y"))[:3]}
    )
    return meta


def _first_window_length(path, compression, file_format, options_without_length):
    """Length of the first window of a file (read from its first piece only)."""
    with _open(path, compression) as handle:
        if file_format == "fasta":
            blocks = _line_blocks(handle, 0, None, 2**20, separator=b"\n>")
        else:
            blocks = _line_blocks(handle, 0, None, 2**20)
        for block_id, block in enumerate(blocks):
            if file_format == "fasta":
                buf = np.frombuffer(block, dtype=np.uint8)
                status, n_rows, *_, starts, stops, error_line = parsing.split_fasta(buf)
                message = "sequence text before the first '>' header"
            else:
                buf = np.frombuffer(block, dtype=np.uint8)
                status, n_rows, starts, stops, _, _, row_line = parsing.split_delimited(
                    buf, options_without_length.delimiter, options_without_length.sequence_field,
                    options_without_length.label_field, options_without_length.n_fields,
                    block_id == 0,
                )  # fmt: skip
                error_line = row_line[n_rows] if status else -1
                message = f"expected {options_without_length.n_fields} fields"
            if n_rows:
                return int(stops[0] - starts[0])
            if status:
                raise SequenceFormatError(f"{path}:{int(error_line) + 1}: {message}")
        return None


def ingest_sequences(
    sources,
    dest,
    *,
    file_format="auto",
    degree=8,
    hash_bits=0,
    binary=False,
    sequence_column="sequence",
    label_column="label",
    positive=None,
    delimiter=",",
    allow_n=False,
    task="auto",
    dtype=np.float32,
    overwrite=False,
    chunk_bytes=DEFAULT_CHUNK_BYTES,
    range_bytes=DEFAULT_RANGE_BYTES,
    client=None,
    writer_options=None,
):
    """Convert DNA windows (CSV or FASTA) into a dataset of weighted-degree features.

    Parameters
    ----------
    sources : str or path-like or list of them
        Plain or compressed (gzip, bzip2, xz) files, all of the same format.
    dest : str or path-like
    file_format : {"auto", "csv", "fasta"}, default="auto"
        ``"auto"``: FASTA when the first file is named ``.fa``, ``.fasta``, ``.fna`` or ``.ffn``
        (before any compression suffix) or starts with ``>``; else CSV.
    degree : int, default=8
        Largest k-mer order K of the WD map.
    hash_bits : int, default=0
        Hash into ``2**hash_bits`` columns (0: explicit layout).
    binary : bool, default=False
        Store 0/1 indicators without values instead of normalized ``sqrt(beta_k)``.
    sequence_column, label_column : str, default="sequence", "label"
        CSV column names.
    positive : str or sequence of str, optional
        Label values mapped to +1 (all others to -1). Without it labels must be numbers.
    delimiter : str, default=","
    allow_n : bool, default=False
        Accept ``N`` letters.
    task : {"auto", "binary", "multiclass", "regression"}, default="auto"
        ``"binary"`` requires labels in {-1, +1} after mapping, ``"multiclass"`` integer
        class labels; ``"auto"`` infers it as :class:`daskpd.data.DatasetWriter` does.
    dtype : {float32, float64}, default=float32
        Stored value type (binary features store no values).
    overwrite : bool, default=False
    chunk_bytes, range_bytes : int, default=512 KiB, 8 MiB
        Bytes parsed at a time by a task (its memory is about ``chunk_bytes / (length + 3)``
        windows times 12 bytes per WD nonzero), and bytes of a plain CSV file per task.
    client : distributed.Client, optional
    writer_options : dict, optional
        Extra keyword arguments of :class:`daskpd.data.DatasetWriter`.

    Returns
    -------
    dataset : daskpd.data.Dataset

    Raises
    ------
    SequenceFormatError
        Naming the file and line of a bad letter, length, label or line.
    """
    sources, dest = _source_paths(sources), os.fspath(dest)
    if task not in ("auto", "binary", "multiclass", "regression"):
        raise ValueError(
            f"task must be 'auto', 'binary', 'multiclass' or 'regression', got {task!r}"
        )
    if len(delimiter) != 1:
        raise ValueError(f"delimiter must be one character, got {delimiter!r}")
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    wd_options = WDOptions(degree=int(degree), hash_bits=int(hash_bits or 0), binary=bool(binary))
    for path in sources:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")
    _check_dest(dest, overwrite)
    if isinstance(positive, str):
        positive = (positive,)
    positive = None if positive is None else tuple(p.encode() for p in positive)
    compressions = [compression_of(path) for path in sources]

    def head_of(path, compression):
        with _open(path, compression) as handle:
            return handle.read(65536)

    first = head_of(sources[0], compressions[0])
    if file_format == "auto":
        stem = sources[0].lower()
        for suffix in (".gz", ".bz2", ".xz"):
            stem = stem.removesuffix(suffix)
        fasta_name = stem.endswith((".fa", ".fasta", ".fna", ".ffn"))
        file_format = "fasta" if fasta_name or first.lstrip().startswith(b">") else "csv"
    if file_format not in ("csv", "fasta"):
        raise ValueError(f"file_format must be 'auto', 'csv' or 'fasta', got {file_format!r}")
    sequence_field = label_field = n_fields = 0
    if file_format == "csv":
        for path, compression in zip(sources, compressions, strict=True):
            header = head_of(path, compression).split(b"\n", 1)[0].rstrip(b"\r")
            names = [name.strip().decode("utf-8", "replace") for name in
                     header.split(delimiter.encode())]  # fmt: skip
            for column in (sequence_column, label_column):
                if column not in names:
                    raise SequenceFormatError(
                        f"{path}:1: no column {column!r} in the header (columns: {names})"
                    )
            if path == sources[0]:
                sequence_field = names.index(sequence_column)
                label_field = names.index(label_column)
                n_fields = len(names)
            elif (names.index(sequence_column), names.index(label_column), len(names)) != (
                sequence_field, label_field, n_fields,
            ):  # fmt: skip
                raise SequenceFormatError(f"{path}:1: header differs from {sources[0]}'s")
    options = _SequenceOptions(
        file_format=file_format,
        delimiter=ord(delimiter),
        sequence_field=sequence_field,
        label_field=label_field,
        n_fields=n_fields,
        positive=positive,
        allow_n=bool(allow_n),
        length=0,
        wd=wd_options,
        chunk_bytes=int(chunk_bytes),
    )
    length = _first_window_length(sources[0], compressions[0], file_format, options)
    if not length:
        raise SequenceFormatError(f"{sources[0]}: no sequence found (empty file?)")
    n_features = wd_options.n_features(length)
    options = _SequenceOptions(**{**options.__dict__, "length": length})

    parts_dir = _parts.new_parts_dir(dest)
    try:
        plan = []
        for path, compression in zip(sources, compressions, strict=True):
            if compression is not None or file_format == "fasta":
                plan.append((path, compression, 0, None))
                continue
            size = os.path.getsize(path)
            n_ranges = max(1, -(-size // int(range_bytes)))
            bounds = [size * k // n_ranges for k in range(n_ranges + 1)]
            for k in range(n_ranges):
                stop = bounds[k + 1] if k + 1 < n_ranges else None
                plan.append((path, None, bounds[k], stop))
        graph = TaskGraph("daskpd-sequences")
        tasks = [
            graph.task(
                range_id,
                _parse_sequence_range,
                path,
                compression,
                start,
                stop,
                parts_dir,
                range_id,
                options,
            )  # fmt: skip
            for range_id, (path, compression, start, stop) in enumerate(plan)
        ]
        metas = _parts.run_tasks(graph, tasks, client)
        for index, meta in enumerate(metas):
            if meta["error"] is not None:
                local_line, text = meta["error"]
                line = _global_line(metas, index, local_line)
                raise SequenceFormatError(f"{meta['path']}:{line}: {text}")
        per_file: dict[str, int] = {}
        for meta in metas:
            per_file[meta["path"]] = per_file.get(meta["path"], 0) + sum(
                info["n_rows"] for info in meta["parts"]
            )
        for path, n_rows in per_file.items():
            if n_rows == 0:
                raise SequenceFormatError(f"{path}: empty file (no sequence)")
        if task == "binary":
            labels = {value for meta in metas for value in meta["labels"]}
            if not labels <= {-1.0, 1.0}:

                def non_binary(info):
                    y = _parts.load_array(info, "y")
                    return (y != -1.0) & (y != 1.0)

                path, line, row, info = _locate_row(metas, non_binary)
                value = float(_parts.load_array(info, "y")[row])
                raise SequenceFormatError(
                    f"{path}:{line}: label {value:g} does not fit task='binary' "
                    "(labels must be -1 or +1; give positive=...)"
                )
        _parts.run_one(
            _parts.assemble,
            [info for meta in metas for info in meta["parts"]],
            dest,
            n_features=n_features,
            dtype=dtype,
            binary=wd_options.binary,
            task=None if task == "auto" else task,
            overwrite=overwrite,
            writer_options=writer_options,
            client=client,
        )
    finally:
        _parts.remove_parts_dir(parts_dir)
    return open_dataset(dest)
