"""In-memory datasets, with the read API of on-disk datasets."""

from __future__ import annotations

import uuid

import numpy as np

from daskpd.data.base import BaseDataset
from daskpd.data.grid import MemorySink, build_grid
from daskpd.data.validation import (
    LAYOUTS,
    TASKS,
    LabelCounter,
    block_limits,
    check_grid,
    check_labels,
    check_weights,
    csr_chunk,
    csr_row_stats,
    dense_chunk,
    dense_stats,
    dense_to_csr,
)

# numba and scipy are imported in the functions that use them: opening a dataset and reading
# its rows needs neither (daskpd/data/base.py, test_dataset's import test).


class MemoryDataset(BaseDataset):
    """A dataset held in memory, with the read API of :class:`daskpd.data.Dataset`.

    The matrix is validated and stored exactly as the on-disk format stores it (canonical CSR
    with int64 ``indptr`` and int32 ``indices``, no values when binary; or a dense array), with
    the same statistics and the same row-block cutting, so solvers treat both alike.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
    y : array-like of shape (n_samples,), optional
        Labels; None stores zeros (task "regression"), for prediction-only data.
    sample_weight : array-like of shape (n_samples,), optional
    rows_per_block, block_nnz : int, optional
        Row-block limits, as for :class:`daskpd.data.DatasetWriter`.
    dtype : {numpy.float32, numpy.float64}, optional
        Default: float32 for float32 input, else float64.
    binary : bool, optional
        Default: True for sparse input whose stored values are all 1.
    task : {"binary", "multiclass", "regression"}, optional
        Default: inferred from the labels, as :class:`~daskpd.data.DatasetWriter` does.
    layout : {"csr", "dense"}, optional
        Default: "csr" for sparse input, "dense" for arrays.
    """

    def __init__(
        self,
        X,
        y=None,
        sample_weight=None,
        *,
        rows_per_block=None,
        block_nnz=None,
        dtype=None,
        binary=None,
        task=None,
        layout=None,
    ):
        import scipy.sparse as sp

        from daskpd.kernels import dataset as kernels

        is_sparse = sp.issparse(X)
        if not is_sparse:
            X = np.asarray(X)
        if len(X.shape) != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        n_samples, n_features = (int(s) for s in X.shape)
        if n_samples < 1 or n_features < 1:
            raise ValueError(f"X must have at least one row and one column, got {X.shape}")
        layout = layout if layout is not None else ("csr" if is_sparse else "dense")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if task is not None and task not in TASKS:
            raise ValueError(f"task must be one of {TASKS} or None, got {task!r}")
        if dtype is None:
            dtype = np.float32 if np.dtype(X.dtype) == np.float32 else np.float64
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        if is_sparse:
            X = sp.csr_matrix(X)
            if not X.has_canonical_format:
                X = X.copy()
                X.sum_duplicates()
        if binary is None:
            binary = bool(layout == "csr" and is_sparse and X.nnz > 0 and np.all(X.data == 1))
        if binary and layout == "dense":
            raise ValueError("binary=True needs layout='csr' (dense data stores every value)")
        self.binary = bool(binary)
        self.layout = layout
        self.shape = (n_samples, n_features)

        y = np.zeros(n_samples) if y is None else y
        self._y = check_labels(y, n_samples, 0, task)
        self.has_sample_weight = sample_weight is not None
        self._weight = (
            check_weights(sample_weight, n_samples, 0) if self.has_sample_weight else None
        )
        labels = LabelCounter(task)
        labels.add(self._y)
        self.task, self.label_counts, _ = labels.task_and_counts()

        if layout == "csr":
            self._indptr, self._indices, self._data = csr_chunk(
                X, n_features, self.binary, self.dtype, 0
            )
            self._X = None
            self.row_nnz, self.row_norm_sq = csr_row_stats(self._indptr, self._data)
            self.col_nnz = np.zeros(n_features, dtype=np.int64)
            kernels.add_column_counts(self.col_nnz, self._indices)
        else:
            self._X = dense_chunk(X, n_features, self.dtype, 0)
            self.row_nnz, self.row_norm_sq, self.col_nnz = dense_stats(self._X)
        self.nnz = int(self.row_nnz.sum())
        max_rows, max_nnz = block_limits(rows_per_block, block_nnz, layout, n_features)
        cuts, _, _ = kernels.cut_row_blocks(self.row_nnz, 0, 0, max_rows, max_nnz)
        self.row_block_bounds = np.concatenate(
            [np.zeros(1, dtype=np.int64), cuts, np.array([n_samples], dtype=np.int64)]
        )
        self._grids = {}
        self._id = uuid.uuid4().hex

    def __repr__(self) -> str:
        return f"MemoryDataset(shape={self.shape}, nnz={self.nnz}, layout={self.layout!r})"

    def _token(self):
        return ("daskpd.MemoryDataset", self._id, tuple(self._grids))

    @property
    def y(self) -> np.ndarray:
        """All labels, float64 (n_samples,)."""
        return self._y

    @property
    def sample_weight(self):
        """All sample weights, float64 (n_samples,), or None."""
        return self._weight

    def _y_rows(self, start, stop):
        return self._y[start:stop].copy()

    def _weight_rows(self, start, stop):
        return self._weight[start:stop].copy()

    def _csr_rows(self, start, stop):
        if self.layout == "dense":
            return dense_to_csr(self._X[start:stop])
        lo, hi = int(self._indptr[start]), int(self._indptr[stop])
        indptr = self._indptr[start : stop + 1] - lo
        data = None if self._data is None else self._data[lo:hi].copy()
        return indptr, self._indices[lo:hi].copy(), data

    def _dense_rows(self, start, stop):
        return self._X[start:stop].copy()

    # ---- grids

    def partition(self, grid):
        """Build the tiled layout of a ``grid`` x ``grid`` grid in memory.

        Gives exactly the bounds and tiles that :func:`daskpd.data.partition_dataset`
        stores for the same data.

        Parameters
        ----------
        grid : int
            P >= 1.

        Returns
        -------
        GridInfo
        """
        n_blocks = check_grid(grid)
        if n_blocks not in self._grids:
            sink = MemorySink(self.nnz, None if self.binary else self.dtype)
            info = build_grid(self, n_blocks, sink)
            self._grids[n_blocks] = (info, sink.rows, sink.cols, sink.vals)
        return self._grids[n_blocks][0]

    @property
    def grids(self) -> list[int]:
        """Grid sizes P built by :meth:`partition`."""
        return sorted(self._grids)

    def _grid_info(self, n_blocks):
        return self._grids[n_blocks][0]

    def _tile(self, n_blocks, info, q, r):
        _, rows, cols, vals = self._grids[n_blocks]
        lo, hi = int(info.tile_ptr[q, r]), int(info.tile_ptr[q, r + 1])
        return (
            rows[lo:hi].copy(),
            cols[lo:hi].copy(),
            None if vals is None else vals[lo:hi].copy(),
        )
