"""Numba kernels of the dataset layer: row statistics, validation, row-block cutting, tiling.

Every offset is int64 (a terascale dataset has ~1e11 nonzeros); column ids are int32. The
kernels work on one row chunk at a time so that the writer and the partitioner stay in bounded
memory; none of them allocates anything of the size of the whole dataset.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels._config import njit


@njit
def row_dot(indptr, indices, data, has_data, row, v):
    """``x_row . v`` for one CSR row (``data`` unread without ``has_data``: ones)."""
    acc = 0.0
    for p in range(indptr[row], indptr[row + 1]):
        if has_data:
            acc += data[p] * v[indices[p]]
        else:
            acc += v[indices[p]]
    return acc


@njit
def block_matvec(indptr, indices, data, has_data, w):
    """``X_b w`` for one CSR block."""
    n_rows = indptr.shape[0] - 1
    out = np.empty(n_rows)
    for row in range(n_rows):
        out[row] = row_dot(indptr, indices, data, has_data, row, w)
    return out


@njit
def add_scaled_row(indptr, indices, data, has_data, row, scale, out):
    """``out += scale * x_row`` for one CSR row, in place (the solvers' ``X^T v`` sums).

    Parameters
    ----------
    indptr, indices, data
        The CSR block (``data`` unread without ``has_data``: binary rows are ones).
    has_data : bool
    row : int
        Local row id.
    scale : float
    out : ndarray of shape (n_features,)
    """
    for p in range(indptr[row], indptr[row + 1]):
        if has_data:
            out[indices[p]] += scale * data[p]
        else:
            out[indices[p]] += scale


@njit
def row_norms_sq(indptr, data):
    """Squared Euclidean norm of each CSR row.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,), int64
        Row offsets into ``data`` (need not start at 0).
    data : ndarray of shape (nnz,), float32 or float64
        Stored values.

    Returns
    -------
    ndarray of shape (n_rows,), float64
    """
    n_rows = indptr.shape[0] - 1
    out = np.zeros(n_rows, dtype=np.float64)
    for i in range(n_rows):
        acc = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            value = np.float64(data[k])
            acc += value * value
        out[i] = acc
    return out


@njit
def add_column_counts(col_nnz, indices):
    """Add the occurrences of each column id of ``indices`` to ``col_nnz`` in place.

    Parameters
    ----------
    col_nnz : ndarray of shape (n_features,), int64
        Running per-column nonzero counts, updated in place.
    indices : ndarray of shape (nnz,), int32
        Column ids (already checked to lie in range).
    """
    for k in range(indices.shape[0]):
        col_nnz[indices[k]] += 1


@njit
def check_csr(indptr, indices, n_features):
    """Find the first row of a CSR chunk that is not canonical.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,), int64
    indices : ndarray of shape (nnz,), int32 or int64
    n_features : int

    Returns
    -------
    row : int
        Local index of the first bad row, or -1 when every row is valid.
    reason : int
        0 valid, 1 column id out of ``[0, n_features)``, 2 column ids not strictly increasing
        (unsorted or duplicate), 3 ``indptr`` decreasing.
    column : int
        The offending column id (for reasons 1 and 2).
    """
    n_rows = indptr.shape[0] - 1
    for i in range(n_rows):
        start = indptr[i]
        stop = indptr[i + 1]
        if stop < start:
            return i, 3, -1
        previous = -1
        for k in range(start, stop):
            column = np.int64(indices[k])
            if column < 0 or column >= n_features:
                return i, 1, column
            if column <= previous:
                return i, 2, column
            previous = column
    return -1, 0, -1


@njit
def cut_row_blocks(row_nnz, rows_in_block, nnz_in_block, max_rows, max_nnz):
    """Greedy cut of a stream of rows into row blocks.

    A block ends before a row when it already holds ``max_rows`` rows or when the row would
    push its nonzeros above ``max_nnz``; a single row larger than ``max_nnz`` forms its own block.
    The state ``(rows_in_block, nnz_in_block)`` carries over between chunks of the stream, so
    cutting row by row or chunk by chunk gives the same blocks.

    Parameters
    ----------
    row_nnz : ndarray of shape (n_rows,), int64
        Nonzeros of the incoming rows.
    rows_in_block, nnz_in_block : int
        Size of the open block before these rows.
    max_rows, max_nnz : int
        Block limits (use a huge value to disable one of them).

    Returns
    -------
    cuts : ndarray of int64
        Local row indices before which a new block starts.
    rows_in_block, nnz_in_block : int
        State after the chunk.
    """
    cuts = np.empty(row_nnz.shape[0], dtype=np.int64)
    n_cuts = 0
    for i in range(row_nnz.shape[0]):
        size = row_nnz[i]
        if rows_in_block > 0 and (rows_in_block >= max_rows or nnz_in_block + size > max_nnz):
            cuts[n_cuts] = i
            n_cuts += 1
            rows_in_block = 0
            nnz_in_block = 0
        rows_in_block += 1
        nnz_in_block += size
    return cuts[:n_cuts].copy(), rows_in_block, nnz_in_block


@njit
def _column_block(col_bounds, column):
    # binary search: the r with col_bounds[r] <= column < col_bounds[r + 1]
    lo = 0
    hi = col_bounds.shape[0] - 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if col_bounds[mid] <= column:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit
def count_tile_nnz(indptr, indices, col_bounds, position, counts):
    """Add the nonzeros of a CSR chunk to per-column-block counts.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,), int64
    indices : ndarray of shape (nnz,), int32
    col_bounds : ndarray of shape (n_col_blocks + 1,), int64
        Bounds in the grid's column order.
    position : ndarray of shape (n_features,), int64
        Position of every column in the grid's column order.
    counts : ndarray of shape (n_col_blocks,), int64
        Updated in place.
    """
    for k in range(indptr[0], indptr[indptr.shape[0] - 1]):
        counts[_column_block(col_bounds, position[indices[k]])] += 1


@njit
def split_by_column_block(indptr, indices, data, has_data, col_bounds, position, row_offset):
    """Split a CSR chunk into per-column-block COO pieces sorted by (row, local column).

    Columns are placed by their position in the grid's column order; inside a row, the
    entries of a block are sorted by position (the local column id), so appending the pieces
    of successive chunks to a tile keeps the tile sorted by (row, column).

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,), int64
        Offsets into ``indices``/``data`` (need not start at 0).
    indices : ndarray of shape (nnz,), int32
        Global column ids.
    data : ndarray of shape (nnz,)
        Values (ignored when ``has_data`` is False; pass any 1-element array).
    has_data : bool
    col_bounds : ndarray of shape (n_col_blocks + 1,), int64
        Bounds in the grid's column order.
    position : ndarray of shape (n_features,), int64
        Position of every column in the grid's column order.
    row_offset : int
        Local row id (within the row group) of the first row of the chunk.

    Returns
    -------
    block_ptr : ndarray of shape (n_col_blocks + 1,), int64
        Piece r is ``[block_ptr[r], block_ptr[r + 1])`` of the outputs.
    rows : ndarray of int32
        Local row ids within the row group.
    cols : ndarray of int32
        Local column ids within the column block.
    vals : ndarray
        Values (length 0 when ``has_data`` is False).
    """
    n_blocks = col_bounds.shape[0] - 1
    n_rows = indptr.shape[0] - 1
    first = indptr[0]
    nnz = indptr[n_rows] - first
    block_ptr = np.zeros(n_blocks + 1, dtype=np.int64)
    for k in range(first, first + nnz):
        block_ptr[_column_block(col_bounds, position[indices[k]]) + 1] += 1
    for r in range(n_blocks):
        block_ptr[r + 1] += block_ptr[r]
    fill = block_ptr[:n_blocks].copy()
    rows = np.empty(nnz, dtype=np.int32)
    cols = np.empty(nnz, dtype=np.int32)
    vals = np.empty(nnz if has_data else 0, dtype=data.dtype)
    for i in range(n_rows):
        lo, hi = indptr[i], indptr[i + 1]
        places = np.empty(hi - lo, dtype=np.int64)
        for k in range(lo, hi):
            places[k - lo] = position[indices[k]]
        # ascending positions visit the blocks in order and each block's columns sorted
        for t in np.argsort(places, kind="mergesort"):
            place = places[t]
            r = _column_block(col_bounds, place)
            slot = fill[r]
            fill[r] += 1
            rows[slot] = row_offset + i
            cols[slot] = place - col_bounds[r]
            if has_data:
                vals[slot] = data[lo + t]
    return block_ptr, rows, cols, vals


@njit
def append_constant_column(indptr, indices, data, column, value):
    """Append one stored entry ``value`` at column id ``column`` to every CSR row.

    ``column`` must be larger than every existing column id, so rows stay sorted.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,), int64
        Local offsets starting at 0.
    indices : ndarray of shape (nnz,), int32
    data : ndarray of shape (nnz,), float
    column : int
    value : float

    Returns
    -------
    indptr, indices, data : ndarrays
        The widened chunk (``nnz + n_rows`` entries).
    """
    n_rows = indptr.shape[0] - 1
    nnz = indptr[n_rows]
    new_indptr = np.empty(n_rows + 1, dtype=np.int64)
    new_indices = np.empty(nnz + n_rows, dtype=np.int32)
    new_data = np.empty(nnz + n_rows, dtype=data.dtype)
    new_indptr[0] = 0
    position = 0
    for i in range(n_rows):
        for k in range(indptr[i], indptr[i + 1]):
            new_indices[position] = indices[k]
            new_data[position] = data[k]
            position += 1
        new_indices[position] = column
        new_data[position] = value
        position += 1
        new_indptr[i + 1] = position
    return new_indptr, new_indices, new_data


@njit
def append_tile_column(rows, cols, vals, n_rows, column, value):
    """Append the entry ``(row, column, value)`` to every row of a (row, col)-sorted COO tile.

    Parameters
    ----------
    rows, cols : ndarray of shape (nnz,), int32
        Sorted by (row, col); local ids.
    vals : ndarray of shape (nnz,), float
    n_rows : int
        Rows of the tile's row group.
    column : int
        Local column id larger than every id in ``cols``.
    value : float

    Returns
    -------
    rows, cols, vals : ndarrays of length ``nnz + n_rows``
    """
    nnz = rows.shape[0]
    out_rows = np.empty(nnz + n_rows, dtype=np.int32)
    out_cols = np.empty(nnz + n_rows, dtype=np.int32)
    out_vals = np.empty(nnz + n_rows, dtype=vals.dtype)
    k = 0
    position = 0
    for i in range(n_rows):
        while k < nnz and rows[k] == i:
            out_rows[position] = i
            out_cols[position] = cols[k]
            out_vals[position] = vals[k]
            position += 1
            k += 1
        out_rows[position] = i
        out_cols[position] = column
        out_vals[position] = value
        position += 1
    return out_rows, out_cols, out_vals


@njit
def mark_columns(indices, lo, hi, seen):
    """``seen[j] = 1`` for the column id ``j`` of every nonzero of ``indices[lo:hi]``.

    Threads marking their own ranges of one ``seen`` write the same value where they
    meet, so they need no lock (:func:`daskpd.solvers.common.groups.renumbered`)."""
    for e in range(lo, hi):
        seen[indices[e]] = 1


@njit
def ranked_columns(seen, positions, has_positions):
    """The marked columns (``seen``, by column id) and the table of their ranks.

    Returns
    -------
    columns : ndarray of shape (n_marked,), int32
        The marked column ids, increasing, each as ``positions[j]`` (with
        ``has_positions``: an increasing numbering of the run's used columns) or as ``j``.
    table : ndarray of shape (seen.shape[0],), int32
        ``table[j]``: the rank of column ``j`` among the marked ones (-1: not marked).
    """
    n_marked = 0
    for j in range(seen.shape[0]):
        n_marked += seen[j]
    columns = np.empty(n_marked, dtype=np.int32)
    table = np.full(seen.shape[0], -1, dtype=np.int32)
    rank = 0
    for j in range(seen.shape[0]):
        if seen[j]:
            table[j] = rank
            columns[rank] = positions[j] if has_positions else j
            rank += 1
    return columns, table


@njit
def map_columns(indices, table, lo, hi, out):
    """``out[e] = table[indices[e]]`` for ``e`` in ``lo:hi`` (column ids renumbered)."""
    for e in range(lo, hi):
        out[e] = table[indices[e]]


@njit
def local_columns(indices, n_features):
    """The columns a group uses, increasing, and its indices renumbered into them.

    A row group's kernels then read and write vectors of its own columns only (on wide
    sparse data a fraction of ``n_features``), and only that part travels (CoCoA+'s ``w``,
    tron's products).

    Parameters
    ----------
    indices : ndarray of shape (nnz,), int32
        Column ids of the group's nonzeros.
    n_features : int

    Returns
    -------
    columns : ndarray of shape (n_columns,), int32
    local : ndarray of shape (nnz,), int32
        ``columns[local[e]] == indices[e]``.
    """
    position = np.full(n_features, -1, dtype=np.int64)
    for e in range(indices.shape[0]):
        position[indices[e]] = 0
    n_columns = 0
    for j in range(n_features):
        if position[j] == 0:
            position[j] = n_columns
            n_columns += 1
    columns = np.empty(n_columns, dtype=np.int32)
    for j in range(n_features):
        if position[j] >= 0:
            columns[position[j]] = j
    local = np.empty(indices.shape[0], dtype=np.int32)
    for e in range(indices.shape[0]):
        local[e] = position[indices[e]]
    return columns, local
