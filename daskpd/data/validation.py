"""The rows every writer takes: validated, converted to the stored layout, counted.

:class:`~daskpd.data.DatasetWriter` and :class:`~daskpd.data.MemoryDataset` check rows here
(errors name the global row), so both store the same arrays and statistics for the same data.
The values they share (layouts, tasks, row-block limits, the grid size) are checked here too.
"""

from __future__ import annotations

import numpy as np

# numba and scipy are imported in the functions that use them: opening a dataset and reading
# its rows needs neither (daskpd/data/base.py, test_dataset's import test).

#: Default target of stored entries per row block when ``rows_per_block`` is not given:
#: 4 Mi nonzeros (about 48 MB decoded) amortize a task's overhead and fit any worker.
DEFAULT_BLOCK_NNZ = 2**22

NO_LIMIT = int(np.iinfo(np.int64).max)
LAYOUTS = ("csr", "dense")
TASKS = ("binary", "multiclass", "regression")

#: Most distinct integer labels a store is taken to be multiclass for without being told
#: (``task=None``). Integer targets with more values are more likely counts or years than
#: classes; the label values are stored either way, so a regression loss still reads them
#: as numbers, and ``task=`` settles what a guess cannot.
MAX_INFERRED_CLASSES = 1000


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
    import scipy.sparse as sp

    from daskpd.kernels import dataset as kernels

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
    import scipy.sparse as sp

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
    elif task == "multiclass":
        valid = y_rows == np.rint(y_rows)
        if not valid.all():
            row = first_bad(~valid)
            raise ValueError(
                f"label of row {first_row + row} is {y_rows[row]}; task 'multiclass' needs "
                "integer class labels"
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


class LabelCounter:
    """Counts of the label values of rows appended in any number of pieces.

    What decides the stored ``task`` (:meth:`task_and_counts`). Counting stops (and the
    counter forgets its counts) at the first label that is not an integer or once there are
    more than :data:`MAX_INFERRED_CLASSES` distinct values: such labels are classes only when
    the writer is told so, and then every value is an integer (:func:`check_labels`) and is
    counted. Memory: one entry per distinct label.

    Parameters
    ----------
    task : {"binary", "multiclass", "regression"} or None
        The task asked for (None: inferred).
    """

    def __init__(self, task=None):
        self.task = task
        self.counts: dict | None = {}

    def add(self, y_rows) -> None:
        """Count the labels ``y_rows`` (float64, already checked by :func:`check_labels`)."""
        if self.counts is None or self.task == "regression":
            return
        values, counts = np.unique(y_rows, return_counts=True)
        if self.task is None and values.size and not np.all(values == np.rint(values)):
            self.counts = None
            return
        for value, count in zip(values.tolist(), counts.tolist(), strict=True):
            self.counts[value] = self.counts.get(value, 0) + int(count)
        if self.task is None and len(self.counts) > MAX_INFERRED_CLASSES:
            self.counts = None

    def task_and_counts(self):
        """The stored ``(task, label_counts, classes)``.

        ``"binary"`` when asked or when every label is -1 or +1 (``label_counts`` keyed "-1"
        and "1"); ``"multiclass"`` when asked or, when not told, for at least 3 and at most
        :data:`MAX_INFERRED_CLASSES` distinct integer labels (``label_counts`` keyed by the
        integer labels, ``classes`` those labels in increasing order); else ``"regression"``
        (``label_counts`` and ``classes`` None).
        """
        counts = self.counts if self.counts is not None else {}
        if self.task == "binary" or (
            self.task is None and self.counts is not None and set(counts) <= {-1.0, 1.0}
        ):
            return (
                "binary",
                {"-1": int(counts.get(-1.0, 0)), "1": int(counts.get(1.0, 0))},
                None,
            )
        if self.task == "multiclass" or (
            self.task is None and self.counts is not None and len(counts) >= 3
        ):
            classes = sorted(counts)
            label_counts = {str(int(value)): int(counts[value]) for value in classes}
            return "multiclass", label_counts, [int(value) for value in classes]
        return "regression", None, None


def csr_row_stats(indptr, data):
    """``(row_nnz int64, row_norm_sq float64)`` of CSR rows (``data`` None: binary)."""
    row_nnz = np.diff(indptr)
    if data is None:
        return row_nnz, row_nnz.astype(np.float64)
    from daskpd.kernels import dataset as kernels

    return row_nnz, kernels.row_norms_sq(indptr, data)


def dense_stats(block):
    """``(row_nnz, row_norm_sq, col_nnz)`` of a dense block."""
    nonzero = block != 0
    row_nnz = np.count_nonzero(nonzero, axis=1).astype(np.int64)
    col_nnz = np.count_nonzero(nonzero, axis=0).astype(np.int64)
    wide = block.astype(np.float64, copy=False)
    return row_nnz, np.einsum("ij,ij->i", wide, wide), col_nnz


def check_grid(grid) -> int:
    """The grid size P as an int; ValueError unless it is an integer >= 1."""
    if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)):
        raise ValueError(f"grid must be a positive integer, got {grid!r}")
    if grid < 1:
        raise ValueError(f"grid must be >= 1, got {grid}")
    return int(grid)
