"""The read API shared by every dataset flavour, and the bias-feature view over any of them."""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from daskpd.data.grid import GridInfo

# numba and scipy are imported in the functions that use them: opening a dataset and reading
# its rows needs neither (open_dataset in a new process: 0.25-0.30 s instead of 0.53-0.62 s)

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

    @property
    def classes(self) -> np.ndarray | None:
        """The class labels of a ``"multiclass"`` dataset, increasing (float64); else None.

        Read from ``label_counts``, whose keys are the stored integer labels: every view of
        a dataset (the bias view, a reopened handle) has the same classes without a read.
        """
        if self.task != "multiclass" or not self.label_counts:
            return None
        return np.array(sorted(float(label) for label in self.label_counts), dtype=np.float64)

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
        import scipy.sparse as sp

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


# --------------------------------------------------------------------------------------------
# the bias-feature view


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
        """Verify the underlying dataset (see :meth:`daskpd.data.Dataset.verify`)."""
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
        from daskpd.kernels import dataset as kernels

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
        block. On-disk datasets are partitioned with :func:`daskpd.data.partition_dataset`.

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
        from daskpd.kernels import dataset as kernels

        rows, cols, vals = kernels.append_tile_column(
            rows, cols, _values(vals, rows, self.dtype), n_rows, local_column, self.scale
        )
        return rows, cols, (None if self.binary else vals)


def _values(vals, rows, dtype):
    return np.ones(rows.shape[0], dtype=dtype) if vals is None else vals
