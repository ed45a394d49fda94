"""Intermediate parts on disk, shared by ingestion and the generators.

Ingestion and generation run in two stages so that nothing big passes through the client:

1. Dask tasks (one per byte range, file or chunk of rows) produce their rows in pieces of
   bounded size and save each piece as a *part*: a directory of ``.npy`` files next to the
   destination (``y``, ``indptr``, ``indices``, ``data`` for CSR rows, or ``X`` for dense
   rows, plus ``row_line``, the 0-based line of each row in its text block, when the rows come
   from text). A task returns only a small description of its parts.
2. One task appends the parts, in order, to a :class:`daskpd.data.DatasetWriter`, one part
   at a time, so memory stays bounded by a part plus a block of the writer.

The parts directory is a sibling of the destination (``<dest>.parts-<uuid>``): workers and the
process that assembles must share that filesystem, as they share the dataset itself. The
process that makes it holds its lock (:mod:`daskpd._sidefiles`) until it is removed; making
one first removes the destination's leftovers whose owner is dead (a killed ingestion's).
A part is made with ``mkdir``, never ``makedirs``: a task still running when its run was
interrupted fails instead of making the removed parts directory again.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import scipy.sparse as sp

from daskpd import _sidefiles
from daskpd.data import DatasetWriter


def new_parts_dir(dest) -> str:
    """Create and return an empty parts directory next to ``dest``, locked by this process
    (after removing the leftovers of ``dest``'s dead ingestions and writers)."""
    dest = os.path.abspath(os.fspath(dest)).rstrip(os.sep)
    _sidefiles.sweep(dest)
    return _sidefiles.create_directory(f"{dest}.parts-{uuid.uuid4().hex[:12]}")


def remove_parts_dir(path) -> None:
    """Remove a parts directory and everything in it (no error when it is already gone), and
    let go of its lock."""
    _sidefiles.remove(path)


def save_part(parts_dir, name, y, *, indptr=None, indices=None, data=None, dense=None,
              row_line=None, extra=None) -> dict:  # fmt: skip
    """Save one part and return its description.

    Parameters
    ----------
    parts_dir : str
        Directory returned by :func:`new_parts_dir`.
    name : str
        Unique name of the part; parts are assembled in the order the caller lists them.
    y : ndarray of shape (n_rows,)
    indptr, indices, data : ndarray, optional
        CSR rows (``indptr`` starting at 0; ``data`` ``None`` for binary rows).
    dense : ndarray of shape (n_rows, n_features), optional
        Dense rows, instead of CSR.
    row_line : ndarray of int64, optional
        0-based line of each row in its text block (for error messages).
    extra : dict of str to ndarray, optional
        Other per-row arrays saved with the part (for example a factor ``U``).

    Returns
    -------
    info : dict
        ``path``, ``n_rows``, ``nnz`` and whether the part is dense or has values.
    """
    path = os.path.join(parts_dir, name)
    os.mkdir(path)
    np.save(os.path.join(path, "y.npy"), np.asarray(y, dtype=np.float64))
    if dense is not None:
        np.save(os.path.join(path, "X.npy"), dense)
        nnz = int(dense.size)
    else:
        np.save(os.path.join(path, "indptr.npy"), np.asarray(indptr, dtype=np.int64))
        np.save(os.path.join(path, "indices.npy"), np.asarray(indices, dtype=np.int32))
        if data is not None:
            np.save(os.path.join(path, "data.npy"), data)
        nnz = int(indptr[-1])
    if row_line is not None:
        np.save(os.path.join(path, "row_line.npy"), np.asarray(row_line, dtype=np.int64))
    for key, value in (extra or {}).items():
        np.save(os.path.join(path, f"extra_{key}.npy"), value)
    return {
        "path": path,
        "n_rows": int(len(y)),
        "nnz": nnz,
        "dense": dense is not None,
        "has_data": dense is not None or data is not None,
    }


def load_array(info, key):
    """Load one array (``y``, ``row_line``, ``data``, ``extra_U``, ...) of a part."""
    return np.load(os.path.join(info["path"], f"{key}.npy"))


def load_rows(info, *, n_features, index_shift=0, dtype=np.float64, binary=False):
    """Load the rows of a part as a CSR matrix or a dense array.

    Parameters
    ----------
    info : dict
        Description returned by :func:`save_part`.
    n_features : int
    index_shift : int, default=0
        Subtracted from every column index (1 for one-based text).
    dtype : dtype, default=float64
        Value type of the rows.
    binary : bool, default=False
        Rows carry no values: every stored entry is 1.

    Returns
    -------
    X : scipy.sparse.csr_matrix or ndarray
    y : ndarray of float64
    """
    y = load_array(info, "y")
    if info["dense"]:
        return load_array(info, "X").astype(dtype, copy=False), y
    indptr = load_array(info, "indptr")
    indices = load_array(info, "indices")
    if index_shift:
        indices -= np.int32(index_shift)
    if binary or not info["has_data"]:
        data = np.ones(len(indices), dtype=dtype)
    else:
        data = load_array(info, "data").astype(dtype, copy=False)
    X = sp.csr_matrix((data, indices, indptr), shape=(len(y), int(n_features)))
    return X, y


def assemble(parts, dest, *, n_features, index_shift=0, dtype=np.float64, binary=False,
             task="binary", overwrite=False, writer_options=None) -> dict:  # fmt: skip
    """Append parts, in order, to a new dataset at ``dest``.

    Runs where it is called (a Dask task, or the client process for small data); holds one
    part in memory at a time. On any error the partial dataset is removed by the writer.

    Parameters
    ----------
    parts : list of dict
        Part descriptions in row order.
    dest : str
    n_features : int
    index_shift : int, default=0
    dtype : dtype, default=float64
    binary : bool, default=False
    task : {"binary", "regression"}
    overwrite : bool, default=False
    writer_options : dict, optional
        Extra keyword arguments of :class:`daskpd.data.DatasetWriter`.

    Returns
    -------
    summary : dict
        ``n_samples`` and ``nnz`` written.
    """
    n_samples = 0
    nnz = 0
    with DatasetWriter(
        os.fspath(dest),
        int(n_features),
        binary=bool(binary),
        dtype=np.dtype(dtype),
        task=task,
        overwrite=overwrite,
        **(writer_options or {}),
    ) as writer:
        for info in parts:
            if info["n_rows"] == 0:
                continue
            X, y = load_rows(
                info, n_features=n_features, index_shift=index_shift, dtype=dtype, binary=binary
            )
            writer.append(X, y)
            n_samples += X.shape[0]
            nnz += info["nnz"]
    return {"n_samples": n_samples, "nnz": nnz}


def run_tasks(graph, tasks, client=None):
    """Run ``tasks`` of ``graph`` (a :class:`~daskpd._graphs.TaskGraph`); their (small) results."""
    if not tasks:
        return []
    if client is not None and client is not False:
        return client.gather(graph.submit(client, tasks))
    return graph.compute(tasks)


def run_one(function, *args, client=None, **kwargs):
    """Run ``function`` as one task on the cluster when a client is given, else here."""
    if client is not None and client is not False:
        return client.submit(function, *args, pure=False, **kwargs).result()
    return function(*args, **kwargs)
