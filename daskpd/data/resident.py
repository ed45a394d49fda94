"""Row blocks that evaluations read again and again, kept in the Dask worker that read them.

Each evaluation of a run (the gap's pass over the training rows, the test metrics' scores)
reads the same row blocks; read once and kept, later evaluations cost the arithmetic only.
Blocks are kept per worker process, keyed by the dataset's identity (its path and write id,
so a dataset written again under the same path is read again), within
:data:`RESIDENT_SHARE` of the worker's memory limit and while the worker stays under
:data:`RSS_SHARE` of it, never evicted (evaluations visit every
block, so an evicting cache would drop exactly the block needed next). Outside a Dask worker
(``client=None`` runs in the user's own process) and for in-memory datasets nothing is kept.
"""

from __future__ import annotations

import threading

from daskpd._cluster import worker_memory_limit

# psutil only to size the resident rows: opening a dataset does not import it.

#: Share of a worker's memory limit that kept row blocks may take.
RESIDENT_SHARE = 0.125

_LOCK = threading.Lock()
_KEPT: dict = {}
_USED = [0]


#: Blocks are kept only while the worker's memory stays under this share of its limit, below
#: Dask's spill target (0.6): kept blocks cannot be spilled, so a worker they pushed past the
#: pause threshold (0.8) would wait for memory that is never freed.
RSS_SHARE = 0.5


def _limit():
    """This worker's memory limit in bytes; 0 outside a worker (nothing is kept then)."""
    return int(worker_memory_limit())


def _admits(size, limit):
    """Whether a block of ``size`` bytes may be kept (lock held)."""
    if _USED[0] + size > RESIDENT_SHARE * limit:
        return False
    import psutil

    return psutil.Process().memory_info().rss + size <= RSS_SHARE * limit


def _nbytes(value):
    if isinstance(value, tuple | list):
        return sum(_nbytes(part) for part in value)
    if hasattr(value, "indptr"):  # scipy.sparse CSR
        return value.data.nbytes + value.indices.nbytes + value.indptr.nbytes
    return int(getattr(value, "nbytes", 0))


def _kept(data, what, args, read):
    token = getattr(data, "_token", None)
    limit = _limit() if token is not None else 0
    if not limit:
        return read()
    key = (token(), what, *args)
    with _LOCK:
        hit = _KEPT.get(key)
    if hit is not None:
        return hit
    value = read()
    size = _nbytes(value)
    with _LOCK:
        if key not in _KEPT and _admits(size, limit):
            _KEPT[key] = value
            _USED[0] += size
    return value


def resident_block(data, i):
    """``data.block(i)``, kept in this worker after the first read (see the module)."""
    return _kept(data, "block", (int(i),), lambda: data.block(i))


def resident_rows_arrays(data, start, stop):
    """``data.read_rows_arrays(start, stop)``, kept in this worker after the first read."""
    return _kept(
        data, "arrays", (int(start), int(stop)), lambda: data.read_rows_arrays(start, stop)
    )


def resident_block_arrays(data, i):
    """Row block ``i`` as :func:`resident_rows_arrays` keeps it (the evaluation's key)."""
    bounds = data.row_block_bounds
    return resident_rows_arrays(data, int(bounds[i]), int(bounds[i + 1]))
