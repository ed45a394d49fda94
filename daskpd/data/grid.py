"""The tiled layout of a P x P grid: its tables, and how it is derived from a dataset.

:class:`GridInfo` holds a grid's bounds, tile offsets and column order. The grid is built in
two streaming passes over the row blocks, the same for on-disk and in-memory datasets: the
first counts the nonzeros of every tile, which fixes ``tile_ptr``; the second splits each row
block by column block and appends the pieces to their tiles. Both passes hold one row block
at a time; the on-disk sink adds one bounded write buffer per tile of the current row group.
Storing a grid (the temporary group, the rename, tasks on a client) is
:mod:`daskpd.data.partition`.
"""

from __future__ import annotations

import os
import zlib
from typing import NamedTuple

import numpy as np

from daskpd.data.format import create_1d, manifest_entry, write_small

# numba and scipy are imported in the functions that use them: opening a dataset and reading
# its rows needs neither (daskpd/data/base.py, test_dataset's import test).

#: Names of the per-tile checksum columns, in the order of the last axis of ``tile_crc32``.
TILE_ARRAYS = ("rows", "cols", "vals")


def inverse_order(order):
    """The inverse permutation: ``inverse[order[k]] = k`` (int64)."""
    inverse = np.empty(order.shape[0], dtype=np.int64)
    inverse[order] = np.arange(order.shape[0], dtype=np.int64)
    return inverse


class GridInfo(NamedTuple):
    """Bounds and tile offsets of a P x P grid.

    Attributes
    ----------
    row_bounds : ndarray of shape (P + 1,), int64
    col_bounds : ndarray of shape (P + 1,), int64
        Bounds of the column blocks in the grid's column order.
    tile_ptr : ndarray of shape (P, P + 1), int64
    col_order : ndarray of shape (n_features,), int64, or None
        The grid's column order: position ``k`` holds column ``col_order[k]``, so column
        block ``r`` is ``col_order[col_bounds[r]:col_bounds[r + 1]]`` and a tile's local
        column id ``c`` is column ``col_order[col_bounds[r] + c]``. None: the identity
        (grids written before the column order was stored).
    """

    row_bounds: np.ndarray
    col_bounds: np.ndarray
    tile_ptr: np.ndarray
    col_order: np.ndarray | None = None

    def block_columns(self, r) -> np.ndarray:
        """Column ids of column block ``r``, in local-id order (int64)."""
        lo, hi = int(self.col_bounds[r]), int(self.col_bounds[r + 1])
        if self.col_order is None:
            return np.arange(lo, hi, dtype=np.int64)
        return np.asarray(self.col_order[lo:hi], dtype=np.int64)

    def column_position(self) -> np.ndarray:
        """Inverse of ``col_order``: the position of every column in the grid order (int64)."""
        if self.col_order is None:
            return np.arange(int(self.col_bounds[-1]), dtype=np.int64)
        return inverse_order(self.col_order)

    @property
    def n_blocks(self) -> int:
        """P, the number of row groups (and of column blocks)."""
        return int(self.row_bounds.shape[0] - 1)


def cumulative_chunks(count_chunks):
    """Turn consecutive pieces of a count array into pieces of its cumulative sum.

    The output starts with the 0 entry, so its total length is one more than the input's.
    Offsets are accumulated in int64.
    """
    carry = np.int64(0)
    yield np.zeros(1, dtype=np.int64)
    for counts in count_chunks:
        cumulative = np.cumsum(counts, dtype=np.int64) + carry
        if cumulative.shape[0]:
            carry = cumulative[-1]
        yield cumulative


def balanced_bounds(cumulative_pieces, total, n_blocks, length):
    """Split ``length`` items into ``n_blocks`` ranges with about equal counts.

    Bound k (0 < k < n_blocks) is the first index i whose cumulative count ``c[i]`` (items
    before i) reaches ``ceil(k * total / n_blocks)``. Without any count, the items are split
    evenly.

    Parameters
    ----------
    cumulative_pieces : iterable of ndarray of int64
        Consecutive pieces of the cumulative count array ``c`` (``c[0] = 0``, length
        ``length + 1``), read one piece at a time.
    total : int
        ``c[-1]``.
    n_blocks : int
    length : int

    Returns
    -------
    ndarray of shape (n_blocks + 1,), int64
    """
    bounds = np.empty(n_blocks + 1, dtype=np.int64)
    if total == 0:
        bounds[:] = np.arange(n_blocks + 1, dtype=np.int64) * length // n_blocks
        return bounds
    # k * total stays far below 2**63 (total <= ~1e12, k <= n_blocks <= ~1e4).
    targets = -(-(np.arange(1, n_blocks, dtype=np.int64) * np.int64(total)) // n_blocks)
    found = np.full(n_blocks - 1, -1, dtype=np.int64)
    offset = 0
    for piece in cumulative_pieces:
        position = np.searchsorted(piece, targets, side="left")
        new = (found < 0) & (position < piece.shape[0])
        found[new] = offset + position[new]
        offset += piece.shape[0]
        if found.shape[0] == 0 or found[-1] >= 0:
            break
    bounds[0] = 0
    bounds[1:-1] = found
    bounds[-1] = length
    return bounds


def row_pieces(row_bounds, block_bounds):
    """Row ranges ``(q, start, stop)``: each row group cut at the dataset's row-block bounds.

    Every piece lies inside one row block, so reading it costs at most one block of memory.
    """
    pieces = []
    for q in range(row_bounds.shape[0] - 1):
        start, stop = int(row_bounds[q]), int(row_bounds[q + 1])
        inner = block_bounds[(block_bounds > start) & (block_bounds < stop)]
        cuts = [start, *(int(c) for c in inner), stop]
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            if b > a:
                pieces.append((q, a, b))
    return pieces


def column_blocks(col_nnz, n_blocks):
    """The grid's column order and column bounds: columns dealt to the blocks by nonzeros.

    Ranked by nonzeros (ties by column id), column ``k`` of the ranking goes to block
    ``k mod P``; the order is block 0, then block 1, and so on, each block in column-id
    order. Every column block then holds the same share of dense and of sparse columns
    (their nonzeros differ by at most one column's), and inside a block the columns keep
    their relative order.

    Returns
    -------
    order : ndarray of shape (n_features,), int64
    bounds : ndarray of shape (P + 1,), int64
        Block ``r`` is ``order[bounds[r]:bounds[r + 1]]``.

    Why: features are often grouped by kind (splice-site k-mers by length: a few thousand
    dense short k-mers, then millions of sparse long ones). Contiguous blocks cut by
    nonzeros alone put all dense columns in one block, whose tiles then cost a fraction of
    the others' per nonzero (its ``w`` block stays in cache, its rows' runs are long), and
    in a DSO round every worker waits for the slowest tile. A random shuffle balances the
    blocks too but scatters the dense columns, which made every tile about twice as slow
    on splice-like data. Piles kept in ranking order (densest first) balanced the blocks
    as well, but DSO's epochs after its DCD start then lowered the test AUPRC on
    splice-like data (0.76 -> 0.42 after one epoch, at 1e7 nonzeros and grid 4) where
    piles in column-id order keep improving it (0.770 -> 0.775 -> 0.783).
    """
    col_nnz = np.asarray(col_nnz, dtype=np.int64)
    ranked = np.argsort(-col_nnz, kind="stable")
    piles = [np.sort(ranked[r::n_blocks]) for r in range(n_blocks)]
    bounds = np.zeros(n_blocks + 1, dtype=np.int64)
    np.cumsum([pile.shape[0] for pile in piles], out=bounds[1:])
    return np.concatenate(piles).astype(np.int64), bounds


def grid_bounds(dataset, n_blocks):
    """Row bounds, column bounds, column order and row pieces ``(q, start, stop)`` of a grid."""
    n_samples, n_features = dataset.shape
    nnz = int(dataset.nnz)
    row_bounds = balanced_bounds(
        cumulative_chunks(dataset._row_nnz_chunks()), nnz, n_blocks, n_samples
    )
    col_order, col_bounds = column_blocks(np.asarray(dataset.col_nnz, dtype=np.int64), n_blocks)
    pieces = row_pieces(row_bounds, np.asarray(dataset.row_block_bounds, dtype=np.int64))
    return row_bounds, col_bounds, col_order, pieces


def count_group(dataset, group_pieces, col_bounds, position):
    """Nonzeros of each tile of one row group (first pass), int64 (P,).

    ``position`` is the inverse of the grid's column order (:func:`inverse_order`).
    """
    from daskpd.kernels import dataset as kernels

    counts = np.zeros(col_bounds.shape[0] - 1, dtype=np.int64)
    for _, start, stop in group_pieces:
        indptr, indices = dataset._csr_indices_rows(start, stop)
        kernels.count_tile_nnz(indptr, indices, col_bounds, position, counts)
    return counts


def grid_info(row_bounds, col_bounds, col_order, counts, nnz, where):
    """GridInfo from per-tile counts (P, P): tiles laid out row group by row group."""
    n_blocks = counts.shape[0]
    starts = np.zeros(n_blocks * n_blocks + 1, dtype=np.int64)
    np.cumsum(counts.ravel(), out=starts[1:])
    tile_ptr = np.empty((n_blocks, n_blocks + 1), dtype=np.int64)
    tile_ptr[:, :n_blocks] = starts[:-1].reshape(n_blocks, n_blocks)
    tile_ptr[:, n_blocks] = starts[n_blocks::n_blocks]
    if int(starts[-1]) != nnz:
        raise ValueError(f"{where!r}: counted {int(starts[-1])} nonzeros, expected {nnz}")
    return GridInfo(
        row_bounds=row_bounds, col_bounds=col_bounds, tile_ptr=tile_ptr, col_order=col_order
    )


def place_group(dataset, q, group_pieces, info, sink):
    """Second pass over one row group: split its pieces by column block into ``sink``."""
    from daskpd.kernels import dataset as kernels

    n_blocks = info.n_blocks
    no_values = np.zeros(1, dtype=np.float64)
    position = info.column_position()
    group_start = int(info.row_bounds[q])
    for _, start, stop in group_pieces:
        indptr, indices, data = dataset._csr_rows(start, stop)
        has_data = data is not None
        block_ptr, rows, cols, vals = kernels.split_by_column_block(
            indptr,
            indices,
            data if has_data else no_values,
            has_data,
            info.col_bounds,
            position,
            start - group_start,
        )
        for r in range(n_blocks):
            lo, hi = int(block_ptr[r]), int(block_ptr[r + 1])
            if hi > lo:
                sink.add(q, r, rows[lo:hi], cols[lo:hi], vals[lo:hi] if has_data else None)
    sink.end_group(q)


def pieces_by_group(pieces, n_blocks):
    """The row pieces of each row group."""
    groups = [[] for _ in range(n_blocks)]
    for piece in pieces:
        groups[piece[0]].append(piece)
    return groups


def build_grid(dataset, n_blocks, sink):
    """Compute the P x P grid of ``dataset`` and stream its tiles into ``sink``, in-process.

    Parameters
    ----------
    dataset : BaseDataset
        Provides ``_row_nnz_chunks()``, ``col_nnz``, ``row_block_bounds``, ``_csr_rows`` and
        ``_csr_indices_rows``.
    n_blocks : int
        P.
    sink : object
        ``start(info)``, ``add(q, r, rows, cols, vals)`` (pieces of a tile arrive in order),
        ``end_group(q)``.

    Returns
    -------
    GridInfo
    """
    row_bounds, col_bounds, col_order, pieces = grid_bounds(dataset, n_blocks)
    groups = pieces_by_group(pieces, n_blocks)
    position = inverse_order(col_order)
    counts = np.stack([count_group(dataset, group, col_bounds, position) for group in groups])
    info = grid_info(row_bounds, col_bounds, col_order, counts, int(dataset.nnz), dataset)
    sink.start(info)
    for q, group in enumerate(groups):
        place_group(dataset, q, group, info, sink)
    return info


class MemorySink:
    """Collect the tiles in NumPy arrays (used by ``MemoryDataset.partition``)."""

    def __init__(self, nnz, value_dtype):
        self.rows = np.empty(nnz, dtype=np.int32)
        self.cols = np.empty(nnz, dtype=np.int32)
        self.vals = None if value_dtype is None else np.empty(nnz, dtype=value_dtype)

    def start(self, info):
        self.position = info.tile_ptr[:, :-1].copy()

    def add(self, q, r, rows, cols, vals):
        lo = int(self.position[q, r])
        hi = lo + rows.shape[0]
        self.rows[lo:hi] = rows
        self.cols[lo:hi] = cols
        if self.vals is not None:
            self.vals[lo:hi] = vals
        self.position[q, r] = hi

    def end_group(self, q):
        return None


class ZarrSink:
    """Write the tiles into zarr arrays of a (temporary) grid group, in bounded memory.

    Each tile of the current row group has a write buffer of at most ``buffer_entries``
    entries; a full buffer is written to its region of ``rows``/``cols``/``vals`` (zarr merges
    the chunks shared with neighbouring tiles). A CRC32 per tile and array is kept for the
    ``tile_crc32`` table.

    When row groups are placed by concurrent tasks, a chunk straddling two row groups' regions
    is read-modified-written by both: ``lock(name, chunk)`` then returns a lock held around
    such writes (chunks inside one group's region need none).

    Parameters
    ----------
    arrays : dict of zarr.Array
        ``rows``, ``cols`` and (unless binary) ``vals``, of final length nnz.
    buffer_entries : int
    lock : callable, optional
        ``lock(name, chunk) -> context manager``; None when one process writes everything.
    """

    def __init__(self, arrays, buffer_entries, lock=None):
        self.arrays = arrays
        self.buffer_entries = int(buffer_entries)
        self.lock = lock
        self.pending = {}

    @classmethod
    def create(cls, group, nnz, value_dtype, buffer_entries, chunk_bytes):
        """Create the tile arrays in ``group`` and return a sink writing them."""
        arrays = {
            "rows": create_1d(group, "rows", np.int32, chunk_bytes, nnz),
            "cols": create_1d(group, "cols", np.int32, chunk_bytes, nnz),
        }
        if value_dtype is not None:
            arrays["vals"] = create_1d(group, "vals", value_dtype, chunk_bytes, nnz)
        sink = cls(arrays, buffer_entries)
        sink.group = group
        return sink

    def start(self, info):
        n_blocks = info.n_blocks
        self.info = info
        self.position = info.tile_ptr[:, :-1].copy()
        self.written = self.position.copy()
        self.crc = np.zeros((n_blocks, n_blocks, len(TILE_ARRAYS)), dtype=np.int64)

    def add(self, q, r, rows, cols, vals):
        pieces = self.pending.setdefault((q, r), [])
        pieces.append((rows, cols, vals))
        crc = self.crc[q, r]
        for k, values in enumerate((rows, cols, vals)):
            if values is not None:
                crc[k] = zlib.crc32(memoryview(np.ascontiguousarray(values)).cast("B"), crc[k])
        self.position[q, r] += rows.shape[0]
        if self.position[q, r] - self.written[q, r] >= self.buffer_entries:
            self._flush(q, r)

    def _flush(self, q, r):
        pieces = self.pending.pop((q, r), [])
        if not pieces:
            return
        lo, hi = int(self.written[q, r]), int(self.position[q, r])
        for k, name in enumerate(TILE_ARRAYS):
            if name in self.arrays:
                values = np.concatenate([piece[k] for piece in pieces])
                self._write(q, name, lo, hi, values)
        self.written[q, r] = hi

    def _write(self, q, name, lo, hi, values):
        array = self.arrays[name]
        if self.lock is None:
            array[lo:hi] = values
            return
        # chunks entirely inside this group's region belong to this task alone
        length = int(array.chunks[0])
        size = int(array.shape[0])
        region_lo = int(self.info.tile_ptr[q, 0])
        region_hi = int(self.info.tile_ptr[q, -1])
        position = lo
        while position < hi:
            chunk = position // length
            chunk_lo = chunk * length
            chunk_hi = min(chunk_lo + length, size)
            stop = min(hi, chunk_hi)
            private_lo, private_hi = position, stop
            # extend over following private chunks to write them in one call
            if chunk_lo >= region_lo and chunk_hi <= region_hi:
                while stop < hi and min(stop + length, size) <= region_hi:
                    stop = min(hi, stop + length)
                array[private_lo:stop] = values[private_lo - lo : stop - lo]
            else:
                with self.lock(name, chunk):
                    array[private_lo:private_hi] = values[private_lo - lo : private_hi - lo]
            position = stop

    def end_group(self, q):
        for key in sorted(k for k in self.pending if k[0] == q):
            self._flush(*key)

    def finish(self, directory):
        """Write the ``tile_crc32`` table; return the manifest entries of the grid's arrays.

        ``rows``/``cols``/``vals`` are checked tile by tile against the table (their entries
        carry ``crc32`` None); the table itself has an ordinary whole-array CRC32.
        """
        table, table_crc = write_small(
            self.group, "tile_crc32", self.crc.reshape(-1, len(TILE_ARRAYS))
        )
        manifest = {}
        for name, array in self.arrays.items():
            manifest[name] = manifest_entry(array, os.path.join(directory, name), None)
        manifest["tile_crc32"] = manifest_entry(
            table,
            os.path.join(directory, "tile_crc32"),
            table_crc,
        )
        return manifest
