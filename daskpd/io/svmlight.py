"""Ingestion of svmlight / libsvm text into the daskpd zarr format.

``ingest_svmlight`` reads plain, gzip, bzip2 and xz files (recognized by their magic bytes) and
reproduces :func:`sklearn.datasets.load_svmlight_files` exactly (same matrix, same labels,
same dtype), with these differences, all of them errors that name the file and line:
NaN or infinite values and labels, qid tokens unless ``qid="ignore"``, multilabel lines,
indices that do not fit int32 column ids, and files without any data line. Number syntax is
the decimal subset of Python's ``float`` (no ``_`` digit separators).

How it scales (see also :mod:`daskpd.io._parts`):

* a plain file is cut into byte ranges of ``range_bytes``; each range is one Dask task that
  owns the lines *starting* in it (a task skips the partial line at its start and finishes the
  line that crosses its end), so ranges parse in parallel without coordination;
* a compressed file cannot be split and is one task, decompressed as a stream;
* a task reads ``chunk_bytes`` at a time, parses the whole lines with a numba kernel over the
  byte buffer (no per-line Python) and saves each piece as a part on disk; it returns only
  counts, index bounds, label values and errors;
* the client then decides what needs every part (zero- or one-based indices, number of
  features, binary values, task) and one task appends the parts in order to the dataset.

Peak memory of a task is about ``chunk_bytes`` of text plus 12 bytes per nonzero of that
text, plus the writer's block when assembling.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from daskpd._graphs import TaskGraph
from daskpd.data import open_dataset
from daskpd.data.atomic import atomic_file
from daskpd.io import _parts
from daskpd.kernels import parsing

_MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bz2",
    b"\xfd7zXZ\x00": "xz",
}

#: Default bytes of text read and parsed at a time by one task.
DEFAULT_CHUNK_BYTES = 16 * 2**20
#: Default bytes of a plain file handled by one task.
DEFAULT_RANGE_BYTES = 64 * 2**20


class SvmlightFormatError(ValueError):
    """Malformed svmlight / libsvm input; the message names the file and line."""


@dataclass(frozen=True)
class _ParseOptions:
    allow_zero_index: bool
    ignore_qid: bool
    dtype: str
    chunk_bytes: int


def compression_of(path) -> str | None:
    """Return ``"gzip"``, ``"bz2"``, ``"xz"`` or ``None`` (plain text) from the magic bytes."""
    with open(path, "rb") as handle:
        head = handle.read(6)
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            return kind
    return None


class CompressedInputError(ValueError):
    """A compressed input that is truncated or damaged; the message names the file.

    Attributes
    ----------
    path : str
    compression : str
    reason : str
        What the decompressor said.
    """

    def __init__(self, path, compression, reason):
        super().__init__(f"{path}: {self.detail(compression, reason)}")
        self.path, self.compression, self.reason = path, compression, reason

    @staticmethod
    def detail(compression, reason, where=""):
        return (
            f"the {compression} data ends early or is damaged{where}: the file is truncated "
            f"or altered ({reason})"
        )


#: What the decompressors raise on a truncated or damaged stream (``gzip.BadGzipFile`` and
#: bz2's "Invalid data stream" are ``OSError``).
_STREAM_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)


class _CompressedReader:
    """A decompressing reader whose stream errors name the file (a ``ValueError``)."""

    def __init__(self, handle, path, compression):
        self._handle, self._path, self._compression = handle, path, compression

    def read(self, size=-1):
        try:
            return self._handle.read(size)
        except _STREAM_ERRORS as exc:
            raise CompressedInputError(os.fspath(self._path), self._compression, exc) from None

    def seek(self, offset):
        return self._handle.seek(offset)

    def close(self):
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _open(path, compression):
    if compression == "gzip":
        return _CompressedReader(gzip.open(path, "rb"), path, compression)
    if compression == "bz2":
        return _CompressedReader(bz2.open(path, "rb"), path, compression)
    if compression == "xz":
        return _CompressedReader(lzma.open(path, "rb"), path, compression)
    return open(path, "rb")


def _source_paths(sources) -> list:
    """The source files as a list of paths (a path given alone too); none is an error."""
    if isinstance(sources, str | os.PathLike):
        sources = [sources]
    sources = [os.fspath(path) for path in sources]
    if not sources:
        raise ValueError("no source file given")
    return sources


def _line_blocks(handle, start, stop, chunk_bytes, separator=b"\n"):
    """Yield buffers of whole lines: every line that starts in ``[start, stop)``.

    ``stop=None`` reads to the end of the stream. A line starts at offset 0 or right after a
    ``\\n``; the block that contains ``stop - 1`` is completed up to its ``\\n``. With
    another ``separator`` (FASTA's ``b"\\n>"``, from ``start=0`` to the end) a block ends
    after the first byte of a separator, so it holds whole records.
    """
    if start > 0:
        handle.seek(start - 1)
        offset = start - 1
        while True:
            piece = handle.read(chunk_bytes)
            if not piece:
                return
            newline = piece.find(b"\n")
            if newline >= 0:
                line_start = offset + newline + 1
                break
            offset += len(piece)
        handle.seek(line_start)
    else:
        line_start = 0
    if stop is not None and line_start >= stop:
        return
    position = line_start  # file offset of the first byte of ``carry``
    carry = b""
    while True:
        piece = handle.read(chunk_bytes)
        if not piece:
            if carry:
                yield carry
            return
        buffer = carry + piece if carry else piece
        if stop is not None and position + len(buffer) >= stop:
            newline = buffer.find(b"\n", max(stop - 1 - position, 0))
            if newline >= 0:
                yield buffer[: newline + 1]
                return
            carry = buffer
            continue
        cut = buffer.rfind(separator)
        if cut < 0:
            carry = buffer
            continue
        yield buffer[: cut + 1]
        carry = buffer[cut + 1 :]
        position += cut + 1


def _parse_block(block, options):
    """Parse one buffer of whole lines; return (arrays or None, error or None, n_lines)."""
    buf = np.frombuffer(block, dtype=np.uint8)
    n_lines, n_colons = parsing.count_svmlight_bounds(buf)
    labels = np.empty(n_lines, dtype=np.float64)
    row_line = np.empty(n_lines, dtype=np.int64)
    indptr = np.empty(n_lines + 1, dtype=np.int64)
    indices = np.empty(n_colons, dtype=np.int32)
    values = np.empty(n_colons, dtype=np.float64)
    (
        status, n_rows, nnz, lines_done, error_line, error_start, error_stop,
        min_index, max_index, _, slow_start, slow_stop, slow_target, n_slow,
    ) = parsing.parse_svmlight(
        buf, options.allow_zero_index, options.ignore_qid, labels, row_line, indptr, indices,
        values, parsing._POW10, parsing._NAN_WORD, parsing._INF_WORD, parsing._INFINITY_WORD,
    )  # fmt: skip
    if status != parsing.OK:
        token = bytes(block[error_start:error_stop])
        return None, (parsing.ERROR_MESSAGES[status], int(error_line), token), int(lines_done)
    bad = parsing.resolve_slow_numbers(
        buf, slow_start[:n_slow], slow_stop[:n_slow], slow_target[:n_slow], labels, values
    )
    if bad >= 0:
        target = int(slow_target[bad])
        if target < 0:
            what, row = "NaN or infinite label", -target - 1
        else:
            what = "NaN or infinite feature value"
            row = int(np.searchsorted(indptr[: n_rows + 1], target, side="right")) - 1
        token = bytes(block[slow_start[bad] : slow_stop[bad]])
        return None, (what, int(row_line[row]), token), int(lines_done)
    with np.errstate(over="ignore"):
        stored = values[:nnz].astype(options.dtype, copy=False)
    if stored.dtype != values.dtype:
        overflow = np.flatnonzero(~np.isfinite(stored))
        if len(overflow):
            row = int(np.searchsorted(indptr[: n_rows + 1], overflow[0], side="right")) - 1
            message = f"feature value {values[overflow[0]]!r} overflows {stored.dtype}"
            return None, (message, int(row_line[row]), b""), int(lines_done)
    arrays = {
        "y": labels[:n_rows],
        "row_line": row_line[:n_rows],
        "indptr": indptr[: n_rows + 1],
        "indices": indices[:nnz],
        "values": stored,
        "min_index": int(min_index),
        "max_index": int(max_index),
    }
    return arrays, None, int(lines_done)


def _parse_range(path, compression, start, stop, parts_dir, range_id, options):
    """Dask task: parse the lines of one byte range (or one compressed file) into parts."""
    meta = {
        "path": path,
        "range_id": range_id,
        "n_lines": 0,
        "n_rows": 0,
        "nnz": 0,
        "min_index": -1,
        "max_index": -1,
        "all_ones": True,
        "labels": [],
        "parts": [],
        "error": None,
    }
    labels_seen: set = set()
    with _open(path, compression) as handle:
        blocks = _line_blocks(handle, start, stop, options.chunk_bytes)
        for block_id, block in enumerate(_reported(blocks, meta)):
            arrays, error, n_lines = _parse_block(block, options)
            if error is not None:
                message, line, token = error
                meta["error"] = (message, meta["n_lines"] + line, token)
                return meta
            n_rows = len(arrays["y"])
            if n_rows:
                values = arrays["values"]
                part_ones = bool(np.all(values == 1))
                info = _parts.save_part(
                    parts_dir,
                    f"r{range_id:08d}-b{block_id:08d}",
                    arrays["y"],
                    indptr=arrays["indptr"],
                    indices=arrays["indices"],
                    data=None if part_ones else values,
                    row_line=arrays["row_line"],
                )
                info["line_offset"] = meta["n_lines"]
                info["source"] = path
                info["range_id"] = range_id
                meta["parts"].append(info)
                meta["n_rows"] += n_rows
                meta["nnz"] += len(values)
                meta["all_ones"] = meta["all_ones"] and part_ones
                if arrays["max_index"] >= 0:
                    if meta["min_index"] < 0 or arrays["min_index"] < meta["min_index"]:
                        meta["min_index"] = arrays["min_index"]
                    meta["max_index"] = max(meta["max_index"], arrays["max_index"])
                if len(labels_seen) <= 2:
                    # a third value already decides every question asked about labels
                    for value in np.unique(arrays["y"])[:3]:
                        labels_seen.add(float(value))
            meta["n_lines"] += n_lines
    meta["labels"] = sorted(labels_seen)
    return meta


def _reported(blocks, meta, error=lambda detail, line: (detail, line, b"")):
    """The blocks; a damaged compressed stream ends them with ``error(detail, line)`` in
    ``meta["error"]`` (the client reports it naming file and line), not a failed task."""
    try:
        yield from blocks
    except CompressedInputError as exc:
        detail = exc.detail(exc.compression, exc.reason, " at or after this line")
        meta["error"] = error(detail, meta["n_lines"])


def _plan(sources, range_bytes):
    """Return the task list ``(path, compression, start, stop)`` in row order."""
    plan = []
    for path in sources:
        compression = compression_of(path)
        if compression is not None:
            plan.append((path, compression, 0, None))
            continue
        size = os.path.getsize(path)
        n_ranges = max(1, -(-size // range_bytes))
        bounds = [size * k // n_ranges for k in range(n_ranges + 1)]
        for k in range(n_ranges):
            plan.append((path, None, bounds[k], bounds[k + 1] if k + 1 < n_ranges else None))
    return plan


def _global_line(metas, index, local_line):
    """1-based line in its file of ``local_line`` of range ``metas[index]``."""
    path = metas[index]["path"]
    before = 0
    for previous in metas[:index]:
        if previous["path"] == path:
            before += previous["n_lines"]
    return before + local_line + 1


def _locate_row(metas, predicate):
    """First (path, line, row value) of a row where ``predicate(part info) -> row mask``."""
    for index, meta in enumerate(metas):
        for info in meta["parts"]:
            mask = predicate(info)
            hits = np.flatnonzero(mask)
            if len(hits):
                row_line = _parts.load_array(info, "row_line")
                line = _global_line(metas, index, info["line_offset"] + int(row_line[hits[0]]))
                return meta["path"], line, hits[0], info
    return None


def _check_dest(dest, overwrite):
    if os.path.lexists(dest) and not overwrite:
        raise FileExistsError(
            f"destination {dest} exists; pass overwrite=True (--overwrite) to replace it"
        )


def ingest_svmlight(
    sources,
    dest,
    *,
    zero_based="auto",
    dtype=np.float64,
    binary="auto",
    task="auto",
    qid="error",
    n_features=None,
    overwrite=False,
    chunk_bytes=DEFAULT_CHUNK_BYTES,
    range_bytes=DEFAULT_RANGE_BYTES,
    client=None,
    writer_options=None,
):
    """Convert svmlight / libsvm text files into one dataset.

    Rows are taken in the order of ``sources``, and within a file in line order. The result
    equals ``scipy.sparse.vstack(load_svmlight_files(sources, dtype=dtype,
    zero_based=zero_based))`` and the concatenated labels.

    Parameters
    ----------
    sources : str or path-like or list of them
        Plain, gzip, bzip2 or xz files (recognized by content, not by name).
    dest : str or path-like
        Destination dataset; nothing is created there when the input is invalid.
    zero_based : bool or "auto", default="auto"
        Column indices of the text start at 0 (``True``) or 1 (``False``). ``"auto"``, as
        scikit-learn: one-based when every file has a nonzero and no index 0.
    dtype : {float64, float32}, default=float64
        Type of the stored values (parsed as float64, then rounded, as scikit-learn does).
    binary : bool or "auto", default="auto"
        Store no values. ``"auto"``: when every value is 1. ``True`` fails on a value
        other than 1.
    task : {"auto", "binary", "multiclass", "regression"}, default="auto"
        ``"binary"`` requires labels in {-1, +1} (the dataset convention), ``"multiclass"``
        integer class labels (kept as they are; the classes are recorded); ``"auto"`` stores
        ``"binary"`` when every label is -1 or +1, ``"multiclass"`` for 3 to
        :data:`daskpd.data.validation.MAX_INFERRED_CLASSES` distinct integer labels, else
        ``"regression"`` (integer targets such as counts or years: say ``"regression"``).
    qid : {"error", "ignore"}, default="error"
        What to do with a ``qid:N`` token after the label.
    n_features : int, optional
        Number of columns (at least the largest index + 1), e.g. to match a training set.
    overwrite : bool, default=False
        Replace an existing destination.
    chunk_bytes : int, default=16 MiB
        Text parsed at a time by one task (bounds its memory).
    range_bytes : int, default=64 MiB
        Bytes of a plain file per task.
    client : distributed.Client, optional
        Cluster to run on; default: the active client, else local threads.
    writer_options : dict, optional
        Extra keyword arguments of :class:`daskpd.data.DatasetWriter`
        (e.g. ``rows_per_block``).

    Returns
    -------
    dataset : daskpd.data.Dataset

    Raises
    ------
    SvmlightFormatError
        Malformed input, naming the file and line.
    FileExistsError
        ``dest`` exists and ``overwrite`` is false.
    """
    sources, dest = _source_paths(sources), os.fspath(dest)
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    if binary not in (True, False, "auto"):
        raise ValueError(f"binary must be True, False or 'auto', got {binary!r}")
    if task not in ("auto", "binary", "multiclass", "regression"):
        raise ValueError(
            f"task must be 'auto', 'binary', 'multiclass' or 'regression', got {task!r}"
        )
    if qid not in ("error", "ignore"):
        raise ValueError(f"qid must be 'error' or 'ignore', got {qid!r}")
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    if int(chunk_bytes) < 1 or int(range_bytes) < 1:
        raise ValueError("chunk_bytes and range_bytes must be >= 1")
    for path in sources:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")
    _check_dest(dest, overwrite)

    options = _ParseOptions(
        allow_zero_index=zero_based is not False,
        ignore_qid=qid == "ignore",
        dtype=dtype.str,
        chunk_bytes=int(chunk_bytes),
    )
    parts_dir = _parts.new_parts_dir(dest)
    try:
        plan = _plan(sources, int(range_bytes))
        graph = TaskGraph("daskpd-svmlight")
        tasks = [
            graph.task(
                range_id, _parse_range, path, compression, start, stop, parts_dir, range_id, options
            )
            for range_id, (path, compression, start, stop) in enumerate(plan)
        ]
        metas = _parts.run_tasks(graph, tasks, client)
        for index, meta in enumerate(metas):
            if meta["error"] is not None:
                message, local_line, token = meta["error"]
                line = _global_line(metas, index, local_line)
                shown = f": {token[:60].decode('utf-8', 'replace')!r}" if token else ""
                raise SvmlightFormatError(f"{meta['path']}:{line}: {message}{shown}")
        per_file: dict[str, dict] = {}
        for meta in metas:
            entry = per_file.setdefault(meta["path"], {"n_rows": 0, "nnz": 0, "min": -1})
            entry["n_rows"] += meta["n_rows"]
            entry["nnz"] += meta["nnz"]
            if meta["min_index"] >= 0 and (entry["min"] < 0 or meta["min_index"] < entry["min"]):
                entry["min"] = meta["min_index"]
        for path, entry in per_file.items():
            if entry["n_rows"] == 0:
                raise SvmlightFormatError(f"{path}: empty file (no data line)")
        if zero_based == "auto":
            one_based = all(entry["nnz"] > 0 and entry["min"] > 0 for entry in per_file.values())
        else:
            one_based = not zero_based
        shift = 1 if one_based else 0
        max_index = max(meta["max_index"] for meta in metas)
        found_features = (max_index - shift if max_index >= 0 else 0) + 1
        if n_features is None:
            n_features = found_features
        elif int(n_features) < found_features:
            raise ValueError(f"n_features={n_features} but the input has {found_features} features")
        total_nnz = sum(meta["nnz"] for meta in metas)
        all_ones = all(meta["all_ones"] for meta in metas)
        if binary == "auto":
            binary = bool(total_nnz > 0 and all_ones)
        elif binary and not all_ones:
            found = _locate_row(metas, _rows_with_non_unit_values)
            path, line = found[0], found[1]
            raise SvmlightFormatError(f"{path}:{line}: binary=True but a value is not 1")
        if task == "binary":
            labels = {value for meta in metas for value in meta["labels"]}
            if not labels <= {-1.0, 1.0}:
                _raise_non_binary_label(metas)
        if task == "multiclass":
            found = _locate_row(metas, _non_integer_labels)
            if found is not None:
                path, line, row, info = found
                value = float(_parts.load_array(info, "y")[row])
                raise SvmlightFormatError(
                    f"{path}:{line}: label {value:g} does not fit task='multiclass' (class "
                    "labels must be integers)"
                )
        summary = _parts.run_one(
            _parts.assemble,
            [info for meta in metas for info in meta["parts"]],
            dest,
            n_features=int(n_features),
            index_shift=shift,
            dtype=dtype,
            binary=bool(binary),
            task=None if task == "auto" else task,
            overwrite=overwrite,
            writer_options=writer_options,
            client=client,
        )
        del summary
    finally:
        _parts.remove_parts_dir(parts_dir)
    return open_dataset(dest)


def _rows_with_non_unit_values(info):
    if not info["has_data"]:
        return np.zeros(info["n_rows"], dtype=bool)
    indptr = _parts.load_array(info, "indptr")
    data = _parts.load_array(info, "data")
    bad = np.flatnonzero(data != 1)
    mask = np.zeros(info["n_rows"], dtype=bool)
    mask[np.searchsorted(indptr, bad, side="right") - 1] = True
    return mask


def _non_binary_labels(info):
    y = _parts.load_array(info, "y")
    return (y != -1.0) & (y != 1.0)


def _non_integer_labels(info):
    y = _parts.load_array(info, "y")
    return y != np.rint(y)


def _raise_non_binary_label(metas):
    path, line, row, info = _locate_row(metas, _non_binary_labels)
    value = float(_parts.load_array(info, "y")[row])
    raise SvmlightFormatError(
        f"{path}:{line}: label {value:g} does not fit task='binary' (labels must be -1 or +1)"
    )


def dump_svmlight(X, y, path, *, zero_based=False, decimals=6, chunk_rows=100000):
    """Write rows as svmlight text fast (numba), with fixed-point values.

    Values are rounded to ``decimals`` digits after the point (trailing zeros dropped), so the
    text is exact for data that has that precision; labels are written with ``repr``. Meant
    for test and benchmark files; :func:`sklearn.datasets.dump_svmlight_file` writes full
    precision.

    Parameters
    ----------
    X : scipy.sparse matrix of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    path : str or path-like
        Output file (plain text).
    zero_based : bool, default=False
    decimals : int, default=6
        At most 18.
    chunk_rows : int, default=100000
        Rows formatted at a time (bounds memory).
    """
    if not 0 <= int(decimals) <= 18:
        raise ValueError(f"decimals must be between 0 and 18, got {decimals}")
    X = sp.csr_matrix(X)
    y = np.asarray(y, dtype=np.float64)
    # A killed writer must not leave a truncated file that a later run takes for complete.
    with atomic_file(path) as temporary, open(temporary, "wb") as handle:
        for start in range(0, X.shape[0], chunk_rows):
            rows = X[start : start + chunk_rows]
            rows.sort_indices()
            labels = np.array(
                [repr(float(v)).removesuffix(".0") for v in y[start : start + chunk_rows]],
                dtype="S",
            )
            width = labels.dtype.itemsize
            table = np.frombuffer(labels.tobytes(), dtype=np.uint8).reshape(len(labels), width)
            fixed = np.rint(rows.data.astype(np.float64) * 10.0 ** int(decimals)).astype(np.int64)
            text = parsing.format_svmlight(
                rows.indptr.astype(np.int64), rows.indices, fixed, int(decimals), table, width,
                0 if zero_based else 1,
            )  # fmt: skip
            handle.write(text.tobytes())
