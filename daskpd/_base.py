"""Read API shared by every dataset flavour, and the row validation shared by every writer."""

from __future__ import annotations

import math
from functools import cached_property
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from daskpd.kernels import dataset as kernels

#: Default target of stored entries per row block when ``rows_per_block`` is not given:
#: 4 Mi nonzeros (about 48 MB decoded) amortize a task's overhead and fit any worker.
DEFAULT_BLOCK_NNZ = 2**22

NO_LIMIT = int(np.iinfo(np.int64).max)
LAYOUTS = ("csr", "dense")
TASKS = ("binary", "regression")


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


# --------------------------------------------------------------------------------------------
# shared read API


class BaseDataset:
    """Read API shared by :class:`Dataset`, ``MemoryDataset`` and the bias view.

    Subclasses provide metadata attributes and the primitives ``_csr_rows``, ``_dense_rows``
    (dense layout), ``_y_rows``, ``_weight_rows``, ``_grid_info`` and ``_tile``.
    """

    shape: tuple[int, int]
    nnz: int
    binary: bool
    layout: str
    task: str
    label_counts: dict | None
    dtype: np.dtype
    has_sample_weight: bool
    row_block_bounds: np.ndarray

    # ---- sizes

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns."""
        return int(self.shape[1])

    @property
    def n_row_blocks(self) -> int:
        """Number of row blocks."""
        return int(self.row_block_bounds.shape[0] - 1)

    # ---- rows and blocks

    def _check_range(self, start, stop) -> tuple[int, int]:
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= self.n_samples:
            raise IndexError(
                f"row range [{start}, {stop}) is outside [0, {self.n_samples}) of {self!r}"
            )
        return start, stop

    def _block_range(self, i) -> tuple[int, int]:
        i = int(i)
        if not 0 <= i < self.n_row_blocks:
            raise IndexError(f"row block {i} is outside [0, {self.n_row_blocks}) of {self!r}")
        return int(self.row_block_bounds[i]), int(self.row_block_bounds[i + 1])

    def read_rows(self, start, stop):
        """Rows ``start:stop`` as ``(X, y)``.

        Parameters
        ----------
        start, stop : int
            Row range, ``0 <= start <= stop <= n_samples``.

        Returns
        -------
        X : scipy.sparse.csr_matrix of shape (stop - start, n_features), or ndarray (dense layout)
        y : ndarray of shape (stop - start,), float64
        """
        start, stop = self._check_range(start, stop)
        y = self._y_rows(start, stop)
        if self.layout == "dense":
            return self._dense_rows(start, stop), y
        indptr, indices, data = self._csr_rows(start, stop)
        if data is None:
            data = np.ones(indices.shape[0], dtype=self.dtype)
        matrix = sp.csr_matrix((data, indices, indptr), shape=(stop - start, self.n_features))
        return matrix, y

    def read_rows_arrays(self, start, stop):
        """Rows ``start:stop`` as raw CSR arrays for kernels.

        Returns
        -------
        indptr : ndarray of shape (stop - start + 1,), int64, starting at 0
        indices : ndarray of shape (nnz_rows,), int32
        data : ndarray of shape (nnz_rows,) or None
            None when the dataset is binary (every stored value is 1).
        y : ndarray of shape (stop - start,), float64
        """
        start, stop = self._check_range(start, stop)
        indptr, indices, data = self._csr_rows(start, stop)
        return indptr, indices, data, self._y_rows(start, stop)

    def y_rows(self, start, stop) -> np.ndarray:
        """Labels of rows ``start:stop`` (float64)."""
        return self._y_rows(*self._check_range(start, stop))

    def sample_weight_rows(self, start, stop):
        """Sample weights of rows ``start:stop`` (float64), or None when there are none."""
        start, stop = self._check_range(start, stop)
        if not self.has_sample_weight:
            return None
        return self._weight_rows(start, stop)

    def block(self, i):
        """Row block ``i`` as ``(X_block, y_block)`` (see :meth:`read_rows`)."""
        return self.read_rows(*self._block_range(i))

    def block_arrays(self, i):
        """Row block ``i`` as ``(indptr, indices, data or None, y)`` (see
        :meth:`read_rows_arrays`); dense datasets are converted to CSR."""
        return self.read_rows_arrays(*self._block_range(i))

    def to_delayed(self):
        """One ``dask.delayed`` ``(X_block, y_block)`` per row block.

        Each task reads only its block on the worker (the graph holds the dataset handle, which
        pickles as its path for on-disk datasets).

        Returns
        -------
        list of dask.delayed.Delayed
        """
        from dask import delayed
        from dask.base import tokenize

        token = tokenize(self._token())
        load = delayed(_load_block, pure=True)
        return [
            load(self, i, dask_key_name=f"daskpd-block-{token}-{i}")
            for i in range(self.n_row_blocks)
        ]

    def _token(self):
        return id(self)

    def _row_nnz_chunks(self):
        # consecutive pieces of row_nnz; on-disk datasets read them slice by slice
        yield np.asarray(self.row_nnz, dtype=np.int64)

    def _csr_indices_rows(self, start, stop):
        indptr, indices, _ = self._csr_rows(start, stop)
        return indptr, indices

    def with_bias(self, scale=1.0):
        """A read-only view with one more feature, constant ``scale``, in every row.

        The extra column is the last one (index ``n_features``); in a grid it belongs to the
        last column block. Used for a regularized intercept (liblinear's bias feature).

        Parameters
        ----------
        scale : float, default=1.0
            Value of the constant feature; finite and > 0.

        Returns
        -------
        BiasDataset
        """
        return BiasDataset(self, scale)

    # ---- grids

    @property
    def grids(self) -> list[int]:
        """Grid sizes P whose tiled layout is available."""
        return []

    def grid(self, n_blocks) -> GridInfo:
        """Bounds and tile offsets of the ``n_blocks`` x ``n_blocks`` grid."""
        n_blocks = int(n_blocks)
        if n_blocks not in self.grids:
            raise KeyError(
                f"{self!r} has no {n_blocks} x {n_blocks} grid (available: {self.grids}); "
                f"run partition_dataset(path, grid={n_blocks})"
            )
        return self._grid_info(n_blocks)

    def tile(self, n_blocks, q, r):
        """Tile ``(q, r)`` of the ``n_blocks`` x ``n_blocks`` grid.

        Returns
        -------
        rows : ndarray of int32
            Row ids local to row group ``q``.
        cols : ndarray of int32
            Column ids local to column block ``r``.
        vals : ndarray or None
            None when binary.
        """
        info = self.grid(n_blocks)
        q, r = int(q), int(r)
        if not (0 <= q < n_blocks and 0 <= r < n_blocks):
            raise IndexError(f"tile ({q}, {r}) is outside the {n_blocks} x {n_blocks} grid")
        return self._tile(n_blocks, info, q, r)

    # ---- statistics helpers

    @property
    def density(self) -> float:
        """``nnz / (n_samples * n_features)``."""
        return self.nnz / max(1, self.n_samples * self.n_features)

    def summary(self) -> dict:
        """A JSON-serializable summary of the dataset."""
        return {
            "shape": [self.n_samples, self.n_features],
            "nnz": int(self.nnz),
            "density": float(self.density),
            "layout": self.layout,
            "binary": bool(self.binary),
            "dtype": np.dtype(self.dtype).name,
            "task": self.task,
            "label_counts": self.label_counts,
            "has_sample_weight": bool(self.has_sample_weight),
            "n_row_blocks": self.n_row_blocks,
            "grids": list(self.grids),
        }


def _load_block(dataset, i):
    return dataset.block(i)


def dense_to_csr(block):
    """Nonzeros of a dense block as CSR arrays (indptr int64 from 0, indices int32, data)."""
    rows, cols = np.nonzero(block)
    indptr = np.zeros(block.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=block.shape[0]), out=indptr[1:])
    return indptr, cols.astype(np.int32), block[rows, cols]


def as_float_array(values, name, length=None):
    """``values`` as a 1-D float64 array of ``length`` entries (ValueError naming ``name``)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        array = array.reshape(-1) if array.ndim == 2 and 1 in array.shape else array
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {np.shape(values)}")
    if length is not None and array.shape[0] != length:
        raise ValueError(f"{name} has {array.shape[0]} entries, expected {length} (one per row)")
    return array


def first_bad(mask) -> int:
    """Index of the first True entry of ``mask``."""
    return int(np.flatnonzero(mask)[0])


def csr_chunk(X_rows, n_features, binary, dtype, first_row):
    """Validate rows for the CSR layout.

    Returns ``(indptr int64 from 0, indices int32, data or None)``; ValueError names the row.
    """
    if sp.issparse(X_rows):
        matrix = X_rows.tocsr()
        if matrix.shape[1] != n_features:
            raise ValueError(
                f"rows from {first_row} have {matrix.shape[1]} features, expected {n_features}"
            )
        indptr = np.asarray(matrix.indptr, dtype=np.int64)
        indptr = indptr - indptr[0]
        indices = np.asarray(matrix.indices)[: indptr[-1]]
        data = np.asarray(matrix.data)[: indptr[-1]]
        row, reason, column = kernels.check_csr(indptr, indices, n_features)
        if row >= 0:
            what = {
                1: f"column id {column} outside [0, {n_features})",
                2: f"column ids unsorted or duplicated (at column {column})",
                3: "decreasing indptr",
            }[reason]
            raise ValueError(f"row {first_row + row}: {what}")
        indices = indices.astype(np.int32, copy=False)
    else:
        dense = np.asarray(X_rows)
        if dense.ndim != 2 or dense.shape[1] != n_features:
            raise ValueError(
                f"rows from {first_row} have shape {dense.shape}, expected (n_rows, {n_features})"
            )
        check_finite_dense(dense, first_row)
        indptr, indices, data = dense_to_csr(dense)
    if data.shape[0] and not np.all(np.isfinite(data)):
        position = first_bad(~np.isfinite(data))
        row = int(np.searchsorted(indptr, position, side="right")) - 1
        raise ValueError(f"row {first_row + row} has a non-finite value {data[position]}")
    if binary:
        if data.shape[0] and not np.all(data == 1):
            position = first_bad(data != 1)
            row = int(np.searchsorted(indptr, position, side="right")) - 1
            raise ValueError(
                f"row {first_row + row} has value {data[position]} in a binary dataset "
                "(binary features are all 1)"
            )
        data = None
    else:
        data = np.asarray(data, dtype=dtype)
    return indptr, indices, data


def check_finite_dense(dense, first_row):
    """Raise ValueError naming the first row holding NaN or inf."""
    finite = np.isfinite(dense)
    if not finite.all():
        row = first_bad(~finite.all(axis=1))
        raise ValueError(f"row {first_row + row} has a non-finite value")


def dense_chunk(X_rows, n_features, dtype, first_row):
    """Validate rows for the dense layout; return them as a C-ordered ``dtype`` array."""
    dense = X_rows.toarray() if sp.issparse(X_rows) else np.asarray(X_rows)
    if dense.ndim != 2 or dense.shape[1] != n_features:
        raise ValueError(
            f"rows from {first_row} have shape {dense.shape}, expected (n_rows, {n_features})"
        )
    check_finite_dense(dense, first_row)
    return dense.astype(dtype, copy=False)


def block_limits(rows_per_block, block_nnz, layout, n_features) -> tuple[int, int]:
    """``(max_rows, max_nnz)`` of a row block from the user's options (validated)."""
    for name, value in (("rows_per_block", rows_per_block), ("block_nnz", block_nnz)):
        if value is not None and int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if rows_per_block is None and block_nnz is None:
        block_nnz = DEFAULT_BLOCK_NNZ
        if layout == "dense":
            rows_per_block = max(1, DEFAULT_BLOCK_NNZ // int(n_features))
    max_rows = NO_LIMIT if rows_per_block is None else int(rows_per_block)
    max_nnz = NO_LIMIT if block_nnz is None else int(block_nnz)
    return max_rows, max_nnz


def check_labels(y_rows, n_rows, first_row, task):
    """``y_rows`` as float64 after checking length, finiteness and the task's label set."""
    y_rows = as_float_array(y_rows, "y", n_rows)
    finite = np.isfinite(y_rows)
    if not finite.all():
        row = first_bad(~finite)
        raise ValueError(f"label of row {first_row + row} is {y_rows[row]}, not finite")
    if task == "binary":
        valid = (y_rows == -1.0) | (y_rows == 1.0)
        if not valid.all():
            row = first_bad(~valid)
            raise ValueError(
                f"label of row {first_row + row} is {y_rows[row]}; task 'binary' needs -1 or +1"
            )
    return y_rows


def check_weights(sample_weight, n_rows, first_row):
    """``sample_weight`` as float64 after checking length, finiteness and sign."""
    sample_weight = as_float_array(sample_weight, "sample_weight", n_rows)
    bad = ~(np.isfinite(sample_weight) & (sample_weight >= 0))
    if bad.any():
        row = first_bad(bad)
        raise ValueError(
            f"sample_weight of row {first_row + row} is {sample_weight[row]}; "
            "weights must be finite and >= 0"
        )
    return sample_weight


def task_and_counts(task, n_negative, n_positive, n_other):
    """Stored ``task`` and ``label_counts``: "binary" when asked or when all labels are +-1."""
    if task == "binary" or (task is None and n_other == 0):
        return "binary", {"-1": int(n_negative), "1": int(n_positive)}
    return "regression", None


def csr_row_stats(indptr, data):
    """``(row_nnz int64, row_norm_sq float64)`` of CSR rows (``data`` None: binary)."""
    row_nnz = np.diff(indptr)
    if data is None:
        return row_nnz, row_nnz.astype(np.float64)
    return row_nnz, kernels.row_norms_sq(indptr, data)


def dense_stats(block):
    """``(row_nnz, row_norm_sq, col_nnz)`` of a dense block."""
    nonzero = block != 0
    row_nnz = np.count_nonzero(nonzero, axis=1).astype(np.int64)
    col_nnz = np.count_nonzero(nonzero, axis=0).astype(np.int64)
    wide = block.astype(np.float64, copy=False)
    return row_nnz, np.einsum("ij,ij->i", wide, wide), col_nnz


class BiasDataset(BaseDataset):
    """Read-only view of a dataset with one more constant feature ``scale`` per row.

    The extra feature is column ``base.n_features``; every row stores it (so ``nnz`` grows by
    ``n_samples``). In grids it belongs to the last column block; tile offsets shift
    accordingly. Created by :meth:`BaseDataset.with_bias`.

    Parameters
    ----------
    base : BaseDataset
    scale : float
        Finite and > 0.
    """

    def __init__(self, base, scale):
        scale = float(scale)
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale of the bias feature must be finite and > 0, got {scale}")
        if isinstance(base, BiasDataset):
            raise ValueError("the dataset already has a bias feature")
        self.base = base
        self.scale = scale
        self.shape = (base.n_samples, base.n_features + 1)
        self.nnz = int(base.nnz) + base.n_samples
        self.binary = bool(base.binary and scale == 1.0)
        self.layout = base.layout
        self.task = base.task
        self.label_counts = base.label_counts
        self.dtype = base.dtype
        self.has_sample_weight = base.has_sample_weight
        self.row_block_bounds = base.row_block_bounds

    def __reduce__(self):
        return (BiasDataset, (self.base, self.scale))

    def __repr__(self) -> str:
        return f"{self.base!r}.with_bias({self.scale!r})"

    def _token(self):
        return ("daskpd.BiasDataset", self.base._token(), self.scale)

    @property
    def path(self):
        """Path of the underlying on-disk dataset (AttributeError for in-memory data)."""
        return self.base.path

    @cached_property
    def row_nnz(self) -> np.ndarray:
        """Stored entries per row, int64 (n_samples,)."""
        return self.base.row_nnz + 1

    @cached_property
    def row_norm_sq(self) -> np.ndarray:
        """Squared row norms, float64 (n_samples,)."""
        return self.base.row_norm_sq + self.scale * self.scale

    @cached_property
    def col_nnz(self) -> np.ndarray:
        """Stored entries per column, int64 (n_features,)."""
        return np.append(self.base.col_nnz, np.int64(self.n_samples))

    @property
    def y(self) -> np.ndarray:
        """All labels, float64 (n_samples,)."""
        return self.base.y

    @property
    def sample_weight(self):
        """All sample weights, or None."""
        return self.base.sample_weight

    def verify(self) -> None:
        """Verify the underlying dataset (see :meth:`daskpd.dataset.Dataset.verify`)."""
        self.base.verify()

    def _row_nnz_chunks(self):
        for chunk in self.base._row_nnz_chunks():
            yield chunk + 1

    def _y_rows(self, start, stop):
        return self.base._y_rows(start, stop)

    def _weight_rows(self, start, stop):
        return self.base._weight_rows(start, stop)

    def _csr_rows(self, start, stop):
        indptr, indices, data = self.base._csr_rows(start, stop)
        if data is None:
            data = np.ones(indices.shape[0], dtype=self.dtype)
        indptr, indices, data = kernels.append_constant_column(
            indptr, indices, data, self.base.n_features, self.scale
        )
        return indptr, indices, (None if self.binary else data)

    def _dense_rows(self, start, stop):
        block = self.base._dense_rows(start, stop)
        column = np.full((block.shape[0], 1), self.scale, dtype=block.dtype)
        return np.hstack([block, column])

    @property
    def grids(self) -> list[int]:
        """Grid sizes available in the underlying dataset."""
        return self.base.grids

    def partition(self, grid):
        """Build the grid of the underlying in-memory dataset (see ``MemoryDataset.partition``).

        The view's tiles are the base's tiles, with the bias entries added to the last column
        block. On-disk datasets are partitioned with :func:`daskpd.dataset.partition_dataset`.

        Returns
        -------
        GridInfo
        """
        if not hasattr(self.base, "partition"):
            raise TypeError(
                f"{self.base!r} is stored on disk: run partition_dataset(path, grid={grid})"
            )
        self.base.partition(grid)
        return self.grid(grid)

    def _grid_info(self, n_blocks):
        info = self.base._grid_info(n_blocks)
        col_bounds = info.col_bounds.copy()
        col_bounds[-1] += 1
        group_rows = np.diff(info.row_bounds)
        # Each row of groups before q adds one entry before tile (q, .); the rows of group q
        # add theirs inside its last tile.
        tile_ptr = info.tile_ptr + info.row_bounds[:-1, None]
        tile_ptr[:, -1] += group_rows
        # the bias column is the last position of the grid's order (inside the last block)
        col_order = None
        if info.col_order is not None:
            col_order = np.append(info.col_order, np.int64(info.col_bounds[-1]))
        return GridInfo(
            row_bounds=info.row_bounds, col_bounds=col_bounds, tile_ptr=tile_ptr,
            col_order=col_order,
        )  # fmt: skip

    def _tile(self, n_blocks, info, q, r):
        base_info = self.base._grid_info(n_blocks)
        rows, cols, vals = self.base._tile(n_blocks, base_info, q, r)
        if r < n_blocks - 1:
            return rows, cols, (None if self.binary else _values(vals, rows, self.dtype))
        n_rows = int(base_info.row_bounds[q + 1] - base_info.row_bounds[q])
        local_column = int(base_info.col_bounds[-1] - base_info.col_bounds[-2])
        rows, cols, vals = kernels.append_tile_column(
            rows, cols, _values(vals, rows, self.dtype), n_rows, local_column, self.scale
        )
        return rows, cols, (None if self.binary else vals)


def _values(vals, rows, dtype):
    return np.ones(rows.shape[0], dtype=dtype) if vals is None else vals
