"""The on-disk format: a versioned zarr v3 group, and the pieces that write and check it.

Codecs, chunk sizes, streaming appenders, the manifest and its checksums live here; the
dataset handle (:mod:`daskpd.data.ondisk`), the writer (:mod:`daskpd.data.writer`) and the
grids (:mod:`daskpd.data.partition`) use them. The functions and classes named below are
those of :mod:`daskpd.data`.

Format (``format_version`` 2)
-----------------------------
A dataset is a directory holding one zarr v3 group. Every array is 1-D (dense ``X`` is 2-D),
chunked to about 4 MiB uncompressed, compressed with Blosc zstd + byte shuffle and followed by a
CRC32C codec (zarr checks it on every chunk read). Chunk files are named ``c.<i>[.<j>]`` inside
the array's directory. The number of arrays is constant, whatever the data size.

Sparse layout ``"csr"`` (row-blocked CSR; n = n_samples, d = n_features)::

    indptr            int64   (n + 1,)   row offsets into indices/data; indptr[0] = 0
    indices           int32   (nnz,)     column ids, strictly increasing within each row
    data              float32 | float64 (nnz,)   values; ABSENT when the features are binary
    y                 float64 (n,)       labels
    sample_weight     float64 (n,)       optional per-row weights (absent when not given)
    row_nnz           int64   (n,)       stored entries per row
    row_norm_sq       float64 (n,)       squared Euclidean norm of each row
    col_nnz           int64   (d,)       stored entries per column
    row_block_bounds  int64   (n_row_blocks + 1,)   row block b = rows [bounds[b], bounds[b+1])

Row block b is the contiguous slice ``indptr[bounds[b]]:indptr[bounds[b+1]]`` of
``indices``/``data``. Dense layout ``"dense"`` stores ``X`` (n, d) float32/float64 chunked by
(rows, up to 65536 columns) instead of indptr/indices/data; the statistics count nonzero values.

Group attributes: ``format_version`` (int), ``shape`` [n, d], ``nnz`` (stored entries; for the
dense layout the nonzero values), ``binary`` (bool; all values 1, no ``data``), ``layout``,
``task`` ("binary" with labels in {-1, +1}, "multiclass" with integer class labels, or
"regression"), ``label_counts`` ({"-1": c, "1": c} for binary; for multiclass the count of
every class keyed by its integer label, {"0": c, "3": c, ...}; null for regression),
``classes`` (multiclass only: the integer labels, increasing), ``dtype`` (value dtype,
"float32" or "float64"), ``has_sample_weight``, ``n_row_blocks``, ``write_id`` (uuid of the
write) and ``manifest``: for every array its shape, dtype, chunk shape, number and total size
of chunk files, and the CRC32 of its logical little-endian bytes.

Tiled layout for a P x P grid (derived by :func:`partition_dataset`), subgroup ``grids/<P>/``::

    row_bounds  int64 (P + 1,)     row group q = rows [row_bounds[q], row_bounds[q+1])
    col_order   int64 (d,)         the grid's column order: position k holds column
                                   col_order[k]; columns ranked by nonzeros are dealt to the
                                   P blocks in turn (absent in older grids: the identity)
    col_bounds  int64 (P + 1,)     column block r = positions [col_bounds[r], col_bounds[r+1]),
                                   i.e. columns col_order[col_bounds[r]:col_bounds[r+1]]
    tile_ptr    int64 (P, P + 1)   tile (q, r) = [tile_ptr[q, r], tile_ptr[q, r+1]); rows of
                                   the grid are consecutive: tile_ptr[q, P] = tile_ptr[q+1, 0]
    rows        int32 (nnz,)       row id local to the row group
    cols        int32 (nnz,)       column id local to the column block (position - col_bounds[r])
    vals        float (nnz,)       values; ABSENT when binary
    tile_crc32  int64 (P * P, 3)   CRC32 of each tile's slice of rows, cols, vals (0 if absent)

Entries of a tile are sorted by (row, col). Row and column bounds balance nonzeros: bound k is
the first row (position) whose cumulative count, rows in order and columns in the grid's
order, reaches ceil(k * nnz / P). Subgroup attributes:
``format_version``, ``grid`` (P), ``nnz``, ``binary``, ``dataset_write_id`` (the ``write_id``
of the dataset it was derived from), ``write_id`` and ``manifest`` (as above; ``rows``,
``cols`` and ``vals`` have ``crc32`` null: they are checked tile by tile with ``tile_crc32``).

Stored DSO tile layouts (written by :func:`partition_dataset`, by default for DSO's default
options, and by :func:`write_layouts`), subgroup ``grids/<P>/layouts/<name>/``; ``name`` is
:attr:`TileLayout.name`, e.g. ``shuffled-v1-b16384-c1024-m256``, and spells every parameter
the layout depends on::

    rows, cols, vals   as in the grid (vals ABSENT when binary): tile (q, r) holds the same
                       entries at the same offsets [tile_ptr[q, r], tile_ptr[q, r+1]) of
                       the grid, in DSO's visit layout: grouped by column sub-block of
                       block_cols columns, shuffled inside each sub-block by a function of
                       (P, q, r) alone (daskpd.data.layout)
    chunk_ptr    int64 (sum over tiles of n_chunks + 1,)   each tile's chunk offsets, local
                       to the tile, from 0 to its nnz
    tile_chunks  int64 (P * P + 1,)   tile t = q * P + r owns chunk_ptr[tile_chunks[t]:
                       tile_chunks[t+1]]
    block_ptr    int64 (sum over tiles of n_sub_blocks + 1,)   each tile's sub-block offsets
                       into its chunks
    tile_blocks  int64 (P * P + 1,)   tile t owns block_ptr[tile_blocks[t]:tile_blocks[t+1]]
    tile_crc32   int64 (P * P, 5)   CRC32 of each tile's slice of rows, cols, vals,
                       chunk_ptr and block_ptr (0 for absent vals)

Attributes: ``format_version``, ``grid``, ``layout`` (the name), the parameters
``visit_order`` ("shuffled"), ``layout_version``, ``block_cols``, ``chunk_nnz`` and
``min_chunks``, ``nnz``, ``binary``, ``dataset_write_id``, ``grid_write_id`` (the ``write_id``
of the grid it was derived from), ``write_id`` and ``manifest`` (``rows``, ``cols``, ``vals``,
``chunk_ptr`` and ``block_ptr`` checked tile by tile). A DSO run whose options give a stored
name reads its tiles from there (each checked against ``tile_crc32``) instead of building
them: the same bits. A layout whose ``grid_write_id`` is not the grid's (the grid was stored
again) or whose parameters are not its name's is not used, with a warning naming it; damaged
files, tables or tiles are :class:`DatasetIntegrityError`.

Atomicity: a dataset is written to ``<path>.tmp-<uuid>`` and renamed when complete (replacing
an existing one only with ``overwrite=True``: the old one is renamed aside first, then
removed); a grid to ``grids/.tmp-<P>-<uuid>`` (with its layouts) and renamed; a layout added
later to ``grids/<P>/layouts/.tmp-<name>-<uuid>`` and renamed. Readers never see half-written
data; a killed writer leaves only its temporary directory.

Integrity: :func:`open_dataset` checks the attributes, every array's shape and dtype against the
manifest and the number and total size of chunk files (truncated, deleted or added files);
every chunk read checks its CRC32C; :meth:`Dataset.verify` (or ``open_dataset(path,
verify=True)``) re-reads every array (and every tile, of grids and stored layouts) and
compares CRC32s with the manifest.
Errors are :class:`DatasetIntegrityError` naming the path and the array. Handles unpickled in
Dask tasks list chunk files once per process and directory state, so reopening is cheap.

Versions: version 2 added the task "multiclass" and its ``classes`` attribute; nothing else
changed, so a version 1 dataset (task "binary" or "regression") is read as before. Grids and
stored layouts keep their own version (:data:`GRID_FORMAT_VERSION`, 1), unchanged by the
dataset's: a grid derived under version 1 stays valid.

Offsets: every offset (``indptr``, ``row_block_bounds``, ``tile_ptr``, bounds, counts) is int64
on disk and in memory, and slices are computed from them as Python or int64 integers; column
ids and tile-local ids are int32.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
from zarr.codecs import BloscCodec, Crc32cCodec

from daskpd.data.store import is_url, remote_files

#: Version written in the dataset group's ``format_version`` attribute.
FORMAT_VERSION = 2

#: Dataset versions this daskpd reads; others (newer ones) are refused. Version 1 is version 2
#: without the task "multiclass".
READABLE_FORMAT_VERSIONS = (1, 2)

#: Version of the grid and stored-layout subgroups (``grids/<P>/``, their ``layouts/``); apart
#: from the dataset's, which version 2 bumped for a new task without touching the grids.
GRID_FORMAT_VERSION = 1

# The empty values array that stands for binary features in the kernels' arguments. float32,
# the dtype the generators write: binary data and valued data then share one compiled kernel
# (numba compiles one per argument type), so a run on either finds it in the on-disk cache.
# (Not made read-only: numba types a read-only array apart, which would be a third kernel.)
NO_VALUES = np.zeros(0, dtype=np.float32)

#: Uncompressed bytes per chunk: a few MB, so that one chunk decodes fast and a terascale
#: array still has a manageable number of chunk files.
CHUNK_BYTES = 4 * 2**20

#: Chunk files sit flat in the array's directory (``c.0``, ``c.3.1``): one directory per array,
#: so one listing (and one directory mtime) covers every chunk file of the array.
CHUNK_KEYS = {"name": "default", "separator": "."}

#: Zarr config: chunks equal to the fill value are written anyway, so that every chunk file
#: exists and a deleted one is detected by the size check instead of reading back as zeros.
ARRAY_CONFIG = {"write_empty_chunks": True}


class DatasetIntegrityError(ValueError):
    """A stored dataset is truncated, altered or incomplete."""


def compressors(itemsize: int):
    """Blosc zstd with byte shuffle, then a CRC32C of the compressed chunk.

    The CRC32C codec is verified by zarr on every chunk read, so an altered chunk file is
    detected whenever it is read, not only by :meth:`Dataset.verify`.
    """
    return (
        BloscCodec(cname="zstd", clevel=3, shuffle="shuffle", typesize=itemsize),
        Crc32cCodec(),
    )


def chunk_length(itemsize: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Elements per chunk of a 1-D array of items of ``itemsize`` bytes."""
    return max(1, int(chunk_bytes) // int(itemsize))


def create_1d(group, name: str, dtype, chunk_bytes: int = CHUNK_BYTES, shape: int = 0):
    """Create an (initially empty or fixed-size) 1-D chunked compressed array in ``group``."""
    dtype = np.dtype(dtype)
    return group.create_array(
        name,
        shape=(int(shape),),
        dtype=dtype,
        chunks=(chunk_length(dtype.itemsize, chunk_bytes),),
        compressors=compressors(dtype.itemsize),
        fill_value=0,
        chunk_key_encoding=CHUNK_KEYS,
        config=ARRAY_CONFIG,
    )


def dense_chunks(n_features: int, itemsize: int, chunk_bytes: int = CHUNK_BYTES):
    """Chunk shape ``(rows, cols)`` of a dense ``X`` holding about ``chunk_bytes``."""
    cols = max(1, min(int(n_features), 2**16))
    rows = max(1, int(chunk_bytes) // (itemsize * cols))
    return rows, cols


def create_dense(group, name: str, n_features: int, dtype, chunk_bytes: int = CHUNK_BYTES):
    """Create an initially empty 2-D chunked array of ``n_features`` columns."""
    dtype = np.dtype(dtype)
    return group.create_array(
        name,
        shape=(0, int(n_features)),
        dtype=dtype,
        chunks=dense_chunks(n_features, dtype.itemsize, chunk_bytes),
        compressors=compressors(dtype.itemsize),
        fill_value=0,
        chunk_key_encoding=CHUNK_KEYS,
        config=ARRAY_CONFIG,
    )


class Appender:
    """Append rows to a zarr array in whole chunks, keeping at most one chunk in memory.

    Only chunk-aligned regions are written (each chunk exactly once), so no chunk is ever read
    back. A CRC32 of the logical little-endian bytes, in order, is kept for the manifest.

    Parameters
    ----------
    array : zarr.Array
        Empty 1-D array, or 2-D array with zero rows, chunked along axis 0.
    """

    def __init__(self, array):
        self.array = array
        self.chunk_rows = int(array.chunks[0])
        self.tail = tuple(array.shape[1:])
        self.buffer = np.empty((self.chunk_rows, *self.tail), dtype=array.dtype)
        self.fill = 0
        self.written = 0
        self.crc32 = 0

    @property
    def length(self) -> int:
        """Rows appended so far."""
        return self.written + self.fill

    def append(self, values) -> None:
        """Append ``values`` (rows of the array's shape and dtype) at the end."""
        values = np.ascontiguousarray(values, dtype=self.array.dtype)
        if values.shape[0] == 0:
            return
        self.crc32 = zlib.crc32(memoryview(values).cast("B"), self.crc32)
        start = 0
        total = values.shape[0]
        if self.fill:
            take = min(self.chunk_rows - self.fill, total)
            self.buffer[self.fill : self.fill + take] = values[:take]
            self.fill += take
            start = take
            if self.fill == self.chunk_rows:
                self._write(self.buffer)
                self.fill = 0
        whole = (total - start) // self.chunk_rows * self.chunk_rows
        if whole:
            self._write(values[start : start + whole])
            start += whole
        rest = total - start
        if rest:
            self.buffer[:rest] = values[start:]
            self.fill = rest

    def _write(self, values) -> None:
        stop = self.written + values.shape[0]
        if stop > self.array.shape[0]:
            # grow geometrically: resizing rewrites the array metadata
            self.array.resize((max(stop, 2 * self.array.shape[0]), *self.tail))
        self.array[self.written : stop] = values
        self.written = stop

    def finish(self) -> None:
        """Write the last partial chunk and trim the array to the rows appended."""
        if self.fill:
            self._write(self.buffer[: self.fill])
            self.fill = 0
        if self.array.shape[0] != self.written:
            self.array.resize((self.written, *self.tail))
        self.buffer = None


def write_small(group, name: str, values):
    """Write a whole (small) array of any rank at once; return ``(array, crc32)``.

    Chunked along axis 0 to about :data:`CHUNK_BYTES`.
    """
    values = np.ascontiguousarray(values)
    row_bytes = max(1, int(np.prod(values.shape[1:], dtype=np.int64)) * values.dtype.itemsize)
    chunks = (max(1, CHUNK_BYTES // row_bytes), *values.shape[1:])
    array = group.create_array(
        name,
        shape=values.shape,
        dtype=values.dtype,
        chunks=tuple(int(c) for c in chunks),
        compressors=compressors(values.dtype.itemsize),
        fill_value=0,
        chunk_key_encoding=CHUNK_KEYS,
        config=ARRAY_CONFIG,
    )
    array[...] = values
    return array, zlib.crc32(memoryview(values).cast("B"))


def logical_crc32(array, chunk_bytes: int = CHUNK_BYTES) -> int:
    """CRC32 of the logical C-order bytes of a stored zarr array, read in slabs of rows."""
    crc = 0
    length = array.shape[0]
    row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize)
    step = max(
        int(array.chunks[0]), int(chunk_bytes) // row_bytes // array.chunks[0] * array.chunks[0]
    )
    for start in range(0, length, step):
        values = np.ascontiguousarray(array[start : min(start + step, length)])
        crc = zlib.crc32(memoryview(values).cast("B"), crc)
    return crc


def stored_files(directory: str) -> tuple[int, int]:
    """Number and total size of the chunk files of the array stored in ``directory``."""
    count = 0
    size = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.startswith("c.") and entry.is_file():
                count += 1
                size += entry.stat().st_size
    return count, size


def expected_chunks(shape, chunks) -> int:
    """Number of chunk files of an array of ``shape`` chunked by ``chunks``."""
    total = 1
    for extent, chunk in zip(shape, chunks, strict=True):
        total *= -(-int(extent) // int(chunk))
    return total


def manifest_entry(array, directory: str, crc32: int) -> dict:
    """Manifest record of one stored array (shape, dtype, chunk files, bytes, CRC32)."""
    n_files, n_bytes = stored_files(directory)
    return {
        "shape": [int(s) for s in array.shape],
        "dtype": np.dtype(array.dtype).str,
        "chunks": [int(c) for c in array.chunks],
        "n_files": n_files,
        "stored_bytes": n_bytes,
        "crc32": None if crc32 is None else int(crc32),
    }


def check_array(group, name: str, entry: dict, directory: str, where: str, files: bool):
    """Fast check of one stored array against its manifest record; return the array.

    Raises
    ------
    DatasetIntegrityError
        Naming the dataset path and the array.
    """
    try:
        array = group[name]
    except KeyError:
        raise DatasetIntegrityError(f"{where}: array {name!r} is missing") from None
    except Exception as exc:  # unreadable metadata: report it as damage, not a crash
        raise DatasetIntegrityError(
            f"{where}: array {name!r} has unreadable metadata: {exc}"
        ) from None
    if [int(s) for s in array.shape] != entry["shape"]:
        raise DatasetIntegrityError(
            f"{where}: array {name!r} has shape {tuple(array.shape)}, "
            f"expected {tuple(entry['shape'])} (truncated or altered)"
        )
    if np.dtype(array.dtype).str != entry["dtype"]:
        raise DatasetIntegrityError(
            f"{where}: array {name!r} has dtype {array.dtype}, expected {entry['dtype']}"
        )
    if files:
        if is_url(directory):
            n_files, n_bytes = remote_files(group, name, entry)
        else:
            n_files, n_bytes = stored_files(directory)
        if n_files != entry["n_files"]:
            raise DatasetIntegrityError(
                f"{where}: array {name!r} has {n_files} chunk files, expected "
                f"{entry['n_files']} (chunk files missing or added)"
            )
        if n_bytes != entry["stored_bytes"]:
            raise DatasetIntegrityError(
                f"{where}: array {name!r} chunk files hold {n_bytes} bytes, expected "
                f"{entry['stored_bytes']} (truncated or altered)"
            )
    return array


# --------------------------------------------------------------------------------------------
# checking a stored group against its manifest

#: ``(directory, write_id, array directory mtimes)`` whose chunk files this process listed.
_FILES_CHECKED: set = set()


def check_group_files(group, directory, manifest, write_id, reopened) -> dict:
    """Fast checks of every array of a group against its manifest (shape, dtype, files).

    Returns the checked zarr arrays by name.

    An explicit open lists the chunk files of every array (count and total size). Listing is
    cheap but not free on a terascale store, and Dask tasks reopen the dataset (unpickling) for
    every block: a reopen lists each (write, directory state) once per process. Deleted or
    added chunk files change the array directory's mtime and so trigger a new listing; altered
    or truncated bytes are caught by the per-chunk CRC32C whenever they are read.
    """
    mtimes = []
    for name in sorted(manifest):
        if is_url(directory):
            # object stores keep no directory mtimes: a process lists a write's files once
            mtimes.append(None)
            continue
        try:
            mtimes.append(os.stat(os.path.join(directory, name)).st_mtime_ns)
        except FileNotFoundError:
            raise DatasetIntegrityError(f"{directory}: array {name!r} is missing") from None
    key = (directory, write_id, tuple(mtimes))
    check_files = not reopened or key not in _FILES_CHECKED
    arrays = {}
    for name, entry in manifest.items():
        arrays[name] = check_array(
            group, name, entry, os.path.join(directory, name), directory, files=check_files
        )
    _FILES_CHECKED.add(key)
    return arrays


def verify_arrays(group, directory, manifest) -> None:
    """Check every array of a group against its manifest, re-reading it for its CRC32.

    Arrays whose manifest ``crc32`` is null are checked tile by tile by the caller.
    """
    for name, entry in manifest.items():
        check_array(group, name, entry, os.path.join(directory, name), directory, True)
        if entry["crc32"] is None:  # checked tile by tile
            continue
        try:
            crc = logical_crc32(group[name])
        except Exception as exc:
            raise DatasetIntegrityError(
                f"{directory}: array {name!r} cannot be read back ({type(exc).__name__}: {exc})"
            ) from None
        if crc != entry["crc32"]:
            raise DatasetIntegrityError(
                f"{directory}: array {name!r} checksum differs from the manifest (altered data)"
            )
