"""Row blocks as the CSR arrays kernels take, read once per process (GSFW and Pdprox).

A solver touches the same row block in every iteration: :func:`block_csr` keeps what it read,
per store path in the worker process (an LRU cache) or per in-memory dataset object.
"""

from __future__ import annotations

import functools
import weakref

import numpy as np


def block_csr(data, block):
    """CSR arrays of one row block in the form kernels take.

    Parameters
    ----------
    data : Dataset-like
        Has ``block_arrays(i)``.
    block : int

    Returns
    -------
    indptr : ndarray of int64
    indices : ndarray of int32/int64
    values : ndarray of float (empty when binary)
    has_values : bool
    y : ndarray of float64
    """
    path = getattr(data, "path", None)
    if path is not None:
        return _cached_block(data, str(path), int(block))
    try:
        per_data = _MEMORY_BLOCKS.setdefault(data, {})
    except TypeError:
        return _read_block(data, block)
    # In-memory datasets convert dense rows to CSR on every read; keep the converted block
    # for as long as the dataset object lives.
    if block not in per_data:
        per_data[block] = _read_block(data, block)
    return per_data[block]


_MEMORY_BLOCKS = weakref.WeakKeyDictionary()


def _read_block(data, block):
    indptr, indices, values, labels = data.block_arrays(block)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices)
    has_values = values is not None
    values = np.ascontiguousarray(values) if has_values else np.empty(0, dtype=np.float64)
    return indptr, indices, values, has_values, np.ascontiguousarray(labels, dtype=np.float64)


@functools.lru_cache(maxsize=16)
def _cached_block_impl(key, data_ref):
    return _read_block(data_ref.data, key[1])


class _Ref:
    """Hashable wrapper so the LRU cache keys on the store path, not on the Dataset object."""

    def __init__(self, path, data):
        self.path = path
        self.data = data

    def __hash__(self):
        return hash(self.path)

    def __eq__(self, other):
        return isinstance(other, _Ref) and other.path == self.path


def _cached_block(data, path, block):
    # Solvers touch the same block every iteration; reading and decompressing zarr chunks
    # each time would dominate. The cache lives in the worker process, keyed by store path.
    return _cached_block_impl((path, block), _Ref(path, data))
