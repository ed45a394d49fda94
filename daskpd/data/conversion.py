"""Any supported input as a dataset: on-disk and in-memory datasets, paths, arrays, Dask.

:func:`as_data` is the one coercion of what a caller passes as ``data`` (to
:func:`daskpd.solve`, :meth:`daskpd.problem.Problem.evaluate`, a result's scoring);
:func:`as_dataset` turns arrays into a dataset.
"""

from __future__ import annotations

import os
import tempfile
import weakref

import numpy as np

from daskpd.data.atomic import remove_tree
from daskpd.data.base import BaseDataset
from daskpd.data.memory import MemoryDataset
from daskpd.data.ondisk import open_dataset
from daskpd.data.writer import compute_slice, is_dask_array, write_dataset

# numba and scipy are imported in the functions that use them: opening a dataset and reading
# its rows needs neither (daskpd/data/base.py, test_dataset's import test).

#: Dense Dask arrays up to this many bytes are computed into memory by :func:`as_dataset`.
IN_MEMORY_BYTES = 256 * 2**20


def as_data(data, *, name="data"):
    """The dataset-like object for what a caller passes as ``data``.

    Parameters
    ----------
    data : Dataset-like, str, os.PathLike, or (X, y) / (X, y, sample_weight) pair
        A dataset (anything with ``n_row_blocks`` and ``row_block_bounds``: an on-disk or
        in-memory dataset, or a view of one) is returned as is; a path is opened; a pair goes
        through :func:`as_dataset`.
    name : str, default="data"
        The parameter's name, for the messages.

    Returns
    -------
    Dataset-like

    Raises
    ------
    ValueError
        For ``None`` or anything else, naming the parameter.
    """
    if hasattr(data, "n_row_blocks") and hasattr(data, "row_block_bounds"):
        return data
    if isinstance(data, (tuple, list)) and len(data) in (2, 3):
        return as_dataset(*data)
    if isinstance(data, (str, os.PathLike)):
        return as_dataset(data)
    if data is None:
        raise ValueError(f"{name} is None")
    raise ValueError(
        f"{name} must be a Dataset, a MemoryDataset, a path or an (X, y) pair, got "
        f"{name} of type {type(data).__name__}"
    )


def as_dataset(X, y=None, sample_weight=None, *, temporary_dir=None, **options):
    """Turn any supported input into a dataset object.

    Parameters
    ----------
    X : BaseDataset, str, os.PathLike, ndarray, scipy.sparse matrix or dask.array.Array
        A dataset is returned as is (``y``/``sample_weight`` must then be None); a path is
        opened; NumPy and scipy.sparse input becomes a :class:`MemoryDataset`; a Dask array
        larger than :data:`IN_MEMORY_BYTES` (or of sparse chunks) is written chunk by chunk to a
        temporary on-disk dataset, removed when the returned object is garbage collected.
    y : array-like or dask.array.Array of shape (n_samples,), optional
    sample_weight : array-like of shape (n_samples,), optional
    temporary_dir : str, optional
        Where temporary datasets go (default: the system's temporary directory).
    **options
        Passed to :class:`MemoryDataset` or :func:`write_dataset` (``rows_per_block``,
        ``block_nnz``, ``dtype``, ``binary``, ``task``, ``layout``).

    Returns
    -------
    BaseDataset
    """
    if isinstance(X, BaseDataset):
        if y is not None or sample_weight is not None:
            raise ValueError(
                "y and sample_weight come from the dataset; do not pass them with a dataset"
            )
        return X
    if isinstance(X, (str, os.PathLike)):
        if y is not None or sample_weight is not None:
            raise ValueError("y and sample_weight come from the dataset at the given path")
        return open_dataset(X)
    if is_dask_array(X):
        if len(X.shape) != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        import scipy.sparse as sp

        sparse_chunks = sp.issparse(getattr(X, "_meta", None))
        if not sparse_chunks and X.nbytes <= IN_MEMORY_BYTES:
            return MemoryDataset(
                X.compute(),
                None if y is None else compute_slice(y, 0, X.shape[0]),
                None if sample_weight is None else compute_slice(sample_weight, 0, X.shape[0]),
                **options,
            )
        directory = tempfile.mkdtemp(prefix="daskpd-", dir=temporary_dir)
        if y is None:
            y = np.zeros(X.shape[0])
        dataset = write_dataset(
            X, y, os.path.join(directory, "data.zarr"), sample_weight=sample_weight, **options
        )
        weakref.finalize(dataset, remove_tree, directory)
        return dataset
    return MemoryDataset(X, y, sample_weight, **options)
