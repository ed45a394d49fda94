"""Writing a dataset: rows streamed into the zarr format in bounded memory, committed atomically.

:class:`DatasetWriter` takes rows in any number of appends and cuts row blocks itself;
:func:`write_dataset` feeds it a whole matrix (NumPy, scipy.sparse or Dask). The format is in
the docstring of :mod:`daskpd.data.format`.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import zarr

from daskpd.data.atomic import claimed_sibling, publish, remove_tree
from daskpd.data.format import (
    CHUNK_BYTES,
    FORMAT_VERSION,
    Appender,
    create_1d,
    create_dense,
    manifest_entry,
)
from daskpd.data.ondisk import Dataset, open_dataset
from daskpd.data.store import is_url, normalize_path
from daskpd.data.validation import (
    LAYOUTS,
    TASKS,
    LabelCounter,
    block_limits,
    check_labels,
    check_weights,
    csr_chunk,
    csr_row_stats,
    dense_chunk,
    dense_stats,
)

# numba and scipy are imported in the functions that use them: opening a dataset and reading
# its rows needs neither (daskpd/data/base.py, test_dataset's import test).


class DatasetWriter:
    """Stream rows into a new dataset, in bounded memory, atomically.

    Rows are appended in any number of calls; the writer keeps at most one chunk per array in
    memory (plus the per-column counts, ``n_features`` int64) and cuts row blocks itself. Data
    goes to ``<path>.tmp-<uuid>``, locked by this process while it writes (the next writer to
    ``path`` removes a dead writer's, :func:`daskpd.data.atomic.claimed_sibling`); :meth:`close`
    writes the statistics and the manifest and renames it to ``path``. As a context manager it
    commits on normal exit and aborts (removes the temporary directory) on an exception.

    Parameters
    ----------
    path : str or os.PathLike
        Destination directory; must not exist unless ``overwrite=True``.
    n_features : int
        Number of columns.
    binary : bool, default=False
        Features are 0/1: stored without values (appending any other value is an error).
    dtype : {numpy.float32, numpy.float64}, default=numpy.float64
        Dtype of stored values.
    task : {"binary", "multiclass", "regression"} or None, default=None
        "binary" requires labels in {-1, +1}, "multiclass" integer class labels; None infers
        it at close (:meth:`daskpd.data.validation.LabelCounter.task_and_counts`: "binary"
        when every label is -1 or +1, "multiclass" for 3 to
        :data:`~daskpd.data.validation.MAX_INFERRED_CLASSES` distinct integer labels).
    layout : {"csr", "dense"}, default="csr"
    rows_per_block : int, optional
        Rows per row block.
    block_nnz : int, optional
        Target stored entries per row block (default :data:`DEFAULT_BLOCK_NNZ` when
        ``rows_per_block`` is not given). A block ends at whichever limit comes first.
    overwrite : bool, default=False
        Replace an existing dataset at ``path`` (atomically, at close).
    chunk_bytes : int, default=4 MiB
        Uncompressed bytes per chunk.

    Raises
    ------
    FileExistsError
        When ``path`` exists and ``overwrite`` is False.
    """

    def __init__(
        self,
        path,
        n_features,
        *,
        binary=False,
        dtype=np.float64,
        task=None,
        layout="csr",
        rows_per_block=None,
        block_nnz=None,
        overwrite=False,
        chunk_bytes=CHUNK_BYTES,
    ):
        self.path = normalize_path(path)
        if is_url(self.path):
            raise ValueError(
                f"{self.path}: datasets are written to a local or shared directory (the "
                "temporary-name-and-rename commit needs a file system); copy it to object "
                "storage afterwards and open the URL"
            )
        n_features = int(n_features)
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        if n_features > np.iinfo(np.int32).max:
            raise ValueError(f"n_features must fit int32 column ids, got {n_features}")
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if task is not None and task not in TASKS:
            raise ValueError(f"task must be one of {TASKS} or None, got {task!r}")
        if layout == "dense" and binary:
            raise ValueError("binary=True needs layout='csr' (dense data stores every value)")
        if int(chunk_bytes) < 8:
            raise ValueError(f"chunk_bytes must be >= 8, got {chunk_bytes}")
        if os.path.exists(self.path) and not overwrite:
            raise FileExistsError(
                f"{self.path} already exists; pass overwrite=True (--overwrite) to replace it"
            )
        self.n_features = n_features
        self.binary = bool(binary)
        self.task = task
        self.layout = layout
        self.overwrite = bool(overwrite)
        self.chunk_bytes = int(chunk_bytes)
        self._max_rows, self._max_nnz = block_limits(rows_per_block, block_nnz, layout, n_features)

        self.n_samples = 0
        self.nnz = 0
        self._block_rows = 0
        self._block_nnz = 0
        self._cuts = [np.zeros(1, dtype=np.int64)]
        self._col_nnz = np.zeros(n_features, dtype=np.int64)
        self._labels = LabelCounter(task)
        self._has_weight = None
        self._closed = False

        parent = os.path.dirname(self.path)
        os.makedirs(parent, exist_ok=True)
        self.temporary_path = claimed_sibling(self.path)
        try:
            self._group = zarr.open_group(self.temporary_path, mode="w-", zarr_format=3)
            self._appenders = {}
            if layout == "csr":
                self._add("indptr", np.int64)
                self._appenders["indptr"].append(np.zeros(1, dtype=np.int64))
                self._add("indices", np.int32)
                if not self.binary:
                    self._add("data", self.dtype)
            else:
                array = create_dense(self._group, "X", n_features, self.dtype, chunk_bytes)
                self._appenders["X"] = Appender(array)
            for name, dtype in (
                ("y", np.float64),
                ("row_nnz", np.int64),
                ("row_norm_sq", np.float64),
            ):
                self._add(name, dtype)
        except BaseException:
            remove_tree(self.temporary_path)
            raise

    def _add(self, name, dtype):
        array = create_1d(self._group, name, dtype, self.chunk_bytes)
        self._appenders[name] = Appender(array)

    # ---- context manager

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            if not self._closed:
                self.close()
        else:
            self.abort()
        return False

    # ---- appending

    def append(self, X_rows, y_rows, sample_weight=None) -> None:
        """Append rows.

        Parameters
        ----------
        X_rows : scipy.sparse matrix or ndarray of shape (n_rows, n_features)
            Sparse rows must be canonical (sorted, no duplicate column ids).
        y_rows : array-like of shape (n_rows,)
        sample_weight : array-like of shape (n_rows,), optional
            Given for every append or for none.

        Raises
        ------
        ValueError
            Naming the (global) row of any invalid value; nothing is appended then.
        """
        from daskpd.kernels import dataset as kernels

        if self._closed:
            raise ValueError(f"the writer of {self.path} is closed")
        n_rows = X_rows.shape[0] if hasattr(X_rows, "shape") else len(X_rows)
        first_row = self.n_samples
        y_rows = check_labels(y_rows, n_rows, first_row, self.task)
        has_weight = sample_weight is not None
        if self._has_weight is not None and has_weight != self._has_weight:
            raise ValueError(
                "sample_weight must be given for every append or for none "
                f"(rows from {first_row} {'have' if has_weight else 'lack'} it)"
            )
        if has_weight:
            sample_weight = check_weights(sample_weight, n_rows, first_row)
        if self.layout == "csr":
            indptr, indices, data = csr_chunk(
                X_rows, self.n_features, self.binary, self.dtype, first_row
            )
            row_nnz, row_norm_sq = csr_row_stats(indptr, data)
            kernels.add_column_counts(self._col_nnz, indices)
            offset = self.nnz
            self._appenders["indptr"].append(indptr[1:] + offset)
            self._appenders["indices"].append(indices)
            if not self.binary:
                self._appenders["data"].append(data)
            chunk_nnz = int(indptr[-1])
        else:
            block = dense_chunk(X_rows, self.n_features, self.dtype, first_row)
            row_nnz, row_norm_sq, col_nnz = dense_stats(block)
            self._col_nnz += col_nnz
            self._appenders["X"].append(block)
            chunk_nnz = int(row_nnz.sum())

        cuts, self._block_rows, self._block_nnz = kernels.cut_row_blocks(
            row_nnz, self._block_rows, self._block_nnz, self._max_rows, self._max_nnz
        )
        self._cuts.append(cuts + first_row)
        self._appenders["y"].append(y_rows)
        self._appenders["row_nnz"].append(row_nnz)
        self._appenders["row_norm_sq"].append(row_norm_sq)
        if has_weight:
            if self._has_weight is None:
                self._add("sample_weight", np.float64)
            self._appenders["sample_weight"].append(sample_weight)
        self._has_weight = has_weight
        self._labels.add(y_rows)
        self.n_samples += n_rows
        self.nnz += chunk_nnz

    # ---- closing

    def abort(self) -> None:
        """Discard everything written; nothing appears at ``path``."""
        self._closed = True
        remove_tree(self.temporary_path)

    def close(self) -> Dataset:
        """Write statistics and manifest, rename into place and return the opened dataset.

        Raises
        ------
        ValueError
            When no row was appended (the writer is aborted).
        FileExistsError
            When ``path`` appeared meanwhile and ``overwrite`` is False (the writer is aborted).
        """
        if self._closed:
            raise ValueError(f"the writer of {self.path} is already closed")
        try:
            return self._commit()
        except BaseException:
            self.abort()
            raise

    def _commit(self) -> Dataset:
        if self.n_samples == 0:
            raise ValueError(f"no rows were written; nothing created at {self.path}")
        task, label_counts, classes = self._labels.task_and_counts()
        bounds = np.concatenate([*self._cuts, np.array([self.n_samples], dtype=np.int64)])
        for name, values in (("col_nnz", self._col_nnz), ("row_block_bounds", bounds)):
            self._add(name, np.int64)
            self._appenders[name].append(values)
        manifest = {}
        for name, appender in self._appenders.items():
            appender.finish()
            manifest[name] = manifest_entry(
                appender.array, os.path.join(self.temporary_path, name), appender.crc32
            )
        self._group.attrs.update(
            {
                "format_version": FORMAT_VERSION,
                "shape": [self.n_samples, self.n_features],
                "nnz": int(self.nnz),
                "binary": self.binary,
                "layout": self.layout,
                "task": task,
                "label_counts": label_counts,
                **({"classes": classes} if classes is not None else {}),
                "dtype": self.dtype.name,
                "has_sample_weight": bool(self._has_weight),
                "n_row_blocks": int(bounds.shape[0] - 1),
                "write_id": uuid.uuid4().hex,
                "manifest": manifest,
            }
        )
        publish(self.temporary_path, self.path, self.overwrite)
        self._closed = True
        return open_dataset(self.path)


def _iter_row_chunks(X, y, sample_weight, rows_per_chunk):
    """Yield ``(X_rows, y_rows, weight_rows)`` in row order; Dask arrays chunk by chunk."""
    if is_dask_array(X):
        X = X.rechunk({1: -1}) if len(X.chunks) == 2 else X
        start = 0
        for size in X.chunks[0]:
            stop = start + size
            yield (
                X[start:stop].compute(),
                compute_slice(y, start, stop),
                None if sample_weight is None else compute_slice(sample_weight, start, stop),
            )
            start = stop
        return
    n_rows = X.shape[0]
    for start in range(0, n_rows, rows_per_chunk):
        stop = min(start + rows_per_chunk, n_rows)
        yield (
            X[start:stop],
            compute_slice(y, start, stop),
            None if sample_weight is None else compute_slice(sample_weight, start, stop),
        )


def is_dask_array(value) -> bool:
    """Whether ``value`` is a Dask array (told by its type's module, without importing Dask)."""
    return type(value).__module__.startswith("dask.") and hasattr(value, "chunks")


def compute_slice(values, start, stop):
    """Entries ``start:stop`` of ``values`` as a NumPy array (a Dask slice is computed)."""
    piece = values[start:stop]
    return piece.compute() if is_dask_array(piece) else np.asarray(piece)


def write_dataset(
    X,
    y,
    path,
    *,
    sample_weight=None,
    rows_per_block=None,
    block_nnz=None,
    dtype=None,
    binary=None,
    task=None,
    layout=None,
    overwrite=False,
    chunk_bytes=CHUNK_BYTES,
) -> Dataset:
    """Write a matrix and its labels as a dataset.

    Parameters
    ----------
    X : ndarray, scipy.sparse matrix or dask.array.Array of shape (n_samples, n_features)
        Dask arrays (of ndarray or scipy.sparse chunks) are computed one row chunk at a time.
    y : array-like or dask.array.Array of shape (n_samples,)
    path : str or os.PathLike
        Destination directory.
    sample_weight : array-like of shape (n_samples,), optional
    rows_per_block, block_nnz : int, optional
        Row-block limits (see :class:`DatasetWriter`).
    dtype : {numpy.float32, numpy.float64}, optional
        Stored value dtype; default: float32 for float32 input, else float64.
    binary : bool, optional
        Store without values; default: True when every stored value of a sparse ``X`` is 1.
    task : {"binary", "multiclass", "regression"}, optional
        Default: inferred from the labels (see :class:`DatasetWriter`).
    layout : {"csr", "dense"}, optional
        Default: "dense" for ndarray input (or Dask arrays of ndarrays), "csr" for sparse input.
    overwrite : bool, default=False
    chunk_bytes : int, default=4 MiB

    Returns
    -------
    Dataset
    """
    import scipy.sparse as sp

    if len(getattr(X, "shape", ())) != 2:
        raise ValueError(f"X must be 2-D, got shape {getattr(X, 'shape', None)}")
    n_samples, n_features = (int(s) for s in X.shape)
    if y is None:
        raise ValueError("y is required (use as_dataset(X) for unlabeled in-memory data)")
    if len(y) != n_samples:
        raise ValueError(f"y has {len(y)} entries, X has {n_samples} rows")
    if sample_weight is not None and len(sample_weight) != n_samples:
        raise ValueError(f"sample_weight has {len(sample_weight)} entries, X has {n_samples} rows")
    if is_dask_array(X):
        chunk_is_sparse = sp.issparse(getattr(X, "_meta", None))
    else:
        chunk_is_sparse = sp.issparse(X)
        if chunk_is_sparse:
            X = sp.csr_matrix(X)
            if not X.has_canonical_format:
                X = X.copy()
                X.sum_duplicates()
        else:
            X = np.asarray(X)
    if layout is None:
        layout = "csr" if chunk_is_sparse else "dense"
    if dtype is None:
        dtype = np.float32 if np.dtype(X.dtype) == np.float32 else np.float64
    if binary is None:
        binary = False
        if layout == "csr" and chunk_is_sparse and not is_dask_array(X):
            binary = bool(X.nnz > 0 and np.all(X.data == 1))
    # In-memory input is fed to the writer in slices of about 16 chunks, so the converted
    # copies made by `append` stay small.
    if hasattr(X, "nnz"):
        row_bytes = 12 * max(1, X.nnz // max(1, n_samples))
    else:
        row_bytes = 8 * n_features
    rows_per_chunk = max(1, 16 * int(chunk_bytes) // row_bytes)
    with DatasetWriter(
        path,
        n_features,
        binary=binary,
        dtype=dtype,
        task=task,
        layout=layout,
        rows_per_block=rows_per_block,
        block_nnz=block_nnz,
        overwrite=overwrite,
        chunk_bytes=chunk_bytes,
    ) as writer:
        for X_rows, y_rows, weight_rows in _iter_row_chunks(X, y, sample_weight, rows_per_chunk):
            writer.append(X_rows, y_rows, weight_rows)
        return writer.close()
