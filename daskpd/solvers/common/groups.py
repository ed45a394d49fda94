"""Row groups and their workers: what the grid-based solvers (DSO, cocoa) share, and the
threads a task may use (cocoa's rounds, SPDC's blocks).

A row group ``q`` of a ``grid``-group layout lives on one worker for the whole run
(:func:`group_owner`); its rows are weighted as :class:`daskpd.problem.Problem` weighs them
(:func:`row_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "GroupRunState",
    "class_weight_pair",
    "group_owner",
    "has_grid",
    "idle_cores",
    "in_threads",
    "is_on_disk",
    "machine_threads",
    "resident_bytes",
    "row_group_bounds",
    "row_weights",
    "worker_list",
    "worker_memory",
]


@dataclass(frozen=True)
class GroupRunState:
    """What a run over row groups (DSO, cocoa) keeps between epochs, whatever its graph.

    A method's state subclasses it with its blocks (arrays in-process, futures on a
    client).

    Attributes
    ----------
    problem : daskpd.problem.Problem
    source : Dataset-like
        The data the groups read.
    settings
        The method's settings of the run.
    seed : numpy.random.SeedSequence
        The root seed.
    client : distributed.Client or None
        None: in-process.
    token : str
        Names the run's task keys.
    row_bounds : ndarray of shape (grid + 1,), int64
        The row groups' bounds.
    """

    problem: Any
    source: Any
    settings: Any
    seed: Any
    client: Any
    token: str
    row_bounds: np.ndarray


def row_weights(data, y, start, stop, class_pair):
    """Row weights ``c_i = sample_weight_i * class_weight[y_i]`` of rows ``start:stop``.

    ``class_pair`` is ``(c_negative, c_positive)`` or ``None``, as
    :class:`daskpd.problem.Problem` resolves it, so training and evaluation weigh rows alike.
    """
    weights = np.ones(stop - start, dtype=np.float64)
    sample = data.sample_weight_rows(start, stop)
    if sample is not None:
        weights *= np.asarray(sample, dtype=np.float64)
    if class_pair is not None:
        weights *= np.where(y > 0, float(class_pair[1]), float(class_pair[0]))
    return weights


def class_weight_pair(problem, data):
    """``(c_negative, c_positive)`` of ``problem``'s class weights on ``data``, or None."""
    if getattr(problem, "class_weight", None) is None:
        return None
    return problem._class_weight_pair(data)


def group_owner(settings, workers, q):
    """The worker that keeps row group ``q`` of ``settings.grid`` (None in-process)."""
    if not workers:
        return None
    # Contiguous row groups per worker: the ring step q + 1 -> q stays inside one worker
    # for all but one row group of each worker.
    return workers[q * len(workers) // settings.grid]


def saved_grid(arrays, options) -> int:
    """The row groups a checkpoint was made with; ValueError when ``options.grid`` asks for
    another number (a run resumes on its own groups)."""
    grid = int(arrays["grid"])
    if options.grid is not None and int(options.grid) != grid:
        raise ValueError(f"checkpoint was made with grid={grid}, options ask {options.grid}")
    return grid


def has_grid(data, grid):
    """Whether ``data`` has a stored layout for ``grid`` row groups."""
    try:
        return int(grid) in [int(g) for g in data.grids]
    except (AttributeError, KeyError, TypeError):
        return False


def row_group_bounds(data, grid):
    """Row bounds of ``grid`` row groups of ``data`` (int64, ``grid + 1``): the stored
    grid's, else the same cut (balanced by nonzeros) computed here."""
    if has_grid(data, grid):
        return np.asarray(data.grid(grid).row_bounds, dtype=np.int64)
    from daskpd.data.grid import balanced_bounds, cumulative_chunks

    return balanced_bounds(
        cumulative_chunks(data._row_nnz_chunks()), int(data.nnz), int(grid), int(data.n_samples)
    )


def is_on_disk(data):
    """Whether ``data`` is a dataset on disk (its workers read their own rows)."""
    return getattr(data, "path", None) is not None


def worker_list(client):
    """The cluster's worker addresses, sorted (empty in-process); no workers is an error."""
    if client is None:
        return ()
    from daskpd._cluster import worker_addresses

    workers = worker_addresses(client)
    if not workers:
        raise ValueError(f"the Dask cluster at {client.scheduler.address} has no workers")
    return workers


def resident_bytes(data, n_groups=1):
    """Bytes the largest of ``n_groups`` row groups of ``data`` takes when kept in memory.

    As the dual solver keeps a group: per nonzero its column id and value (none when
    binary); per row its offsets, label, weight, norm and dual value; per column ``w``, its
    working copies and the round's step. Groups are cut to balance nonzeros, so each holds
    about a ``1 / n_groups`` share of the rows' part.
    """
    value_bytes = 0 if getattr(data, "binary", False) else np.dtype(data.dtype).itemsize
    rows = int(data.nnz) * (4 + value_bytes)
    rows += int(data.n_samples) * 48
    return rows // max(1, int(n_groups)) + int(data.n_features) * 48


def worker_memory(client):
    """The smallest memory one worker may use, in bytes (in-process: what is available now).

    A worker without a limit counts its machine's memory.
    """
    import psutil

    if client is None:
        return int(psutil.virtual_memory().available)
    limits = [
        int(info.get("memory_limit") or 0)
        for info in client.scheduler_info(n_workers=-1)["workers"].values()
    ]
    machine = int(psutil.virtual_memory().total)
    return min((limit or machine) for limit in limits) if limits else machine


def idle_cores(client, owners):
    """Threads a group's task may use: each machine's worker threads over the groups on it.

    Dask runs one task a thread and a group's round is one task, so with fewer groups than
    worker threads on a machine the other threads' cores would idle. The smallest share
    over the machines that hold groups (at least 1).
    """
    info = client.scheduler_info(n_workers=-1)["workers"]
    cores, groups = _host_cores(info), {}
    for owner in owners:
        host = info.get(owner, {}).get("host", owner)
        groups[host] = groups.get(host, 0) + 1
    return max(1, min(cores.get(host, 1) // count for host, count in groups.items()))


def machine_threads(client):
    """Worker threads of a machine, the fewest over the cluster's machines (at least 1).

    What a task may use when it is the only one running (a chained pass runs one block at a
    time), whichever machine runs it.
    """
    cores = _host_cores(client.scheduler_info(n_workers=-1)["workers"])
    return max(1, min(cores.values(), default=1))


def _host_cores(info):
    """Worker threads per machine, from the scheduler's ``workers`` info."""
    cores = {}
    for address, worker in info.items():
        host = worker.get("host", address)
        cores[host] = cores.get(host, 0) + int(worker.get("nthreads", 1))
    return cores


def in_threads(n_threads, work):
    """``work(t)`` for ``t`` in ``range(n_threads)``, in a pool of that many threads (the
    kernels release the GIL); inline for one."""
    if n_threads == 1:
        work(0)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(work, range(n_threads)))


def even_cuts(n, n_threads):
    """``n_threads + 1`` bounds cutting ``range(n)`` into nearly equal contiguous ranges."""
    return [t * n // n_threads for t in range(n_threads + 1)]


def renumbered(indices, n_features, positions, own_columns, threads):
    """A group's column ids renumbered as its kernels read them, in ``threads`` threads.

    Parameters
    ----------
    indices : ndarray of shape (nnz,), int32
        The column ids of the group's nonzeros as stored.
    n_features : int
        The stored column ids' range.
    positions : ndarray of shape (n_features,), int32, or None
        The run's used columns' positions by column id (increasing; -1: unused); None:
        every column is used, ids as stored.
    own_columns : bool
        Renumber into the group's own columns (several groups: its shares of a product are
        then as long as those) rather than the run's.
    threads : int

    Returns
    -------
    columns : ndarray of int32 or None
        With ``own_columns``: the group's columns in the run's numbering, increasing; else
        None.
    indices : ndarray of shape (nnz,), int32
        ``columns[indices[e]]`` (or, without ``own_columns``, ``indices[e]`` itself) is the
        run's number of nonzero ``e``'s column; the input itself when nothing changes.

    Notes
    -----
    Two reads of the ids, each split among the threads: one marks the columns used (a
    byte a column id), one maps every id through one table (the ranks, or ``positions``).
    Mapping through ``positions`` first and renumbering that into the group's columns read
    the ids three times in one thread, through tables of 4 and 8 bytes a column, most of a
    resident group's start on the splice-like sets (BENCHMARKS.md, issue 49).
    """
    from daskpd.kernels.dataset import map_columns, mark_columns, ranked_columns

    nnz = indices.shape[0]
    threads = max(1, min(int(threads), nnz))
    cuts = even_cuts(nnz, threads)
    columns, table = None, positions
    if own_columns:
        seen = np.zeros(int(n_features), dtype=np.uint8)
        in_threads(threads, lambda t: mark_columns(indices, cuts[t], cuts[t + 1], seen))
        has_positions = positions is not None
        columns, table = ranked_columns(
            seen, positions if has_positions else _NO_POSITIONS, has_positions
        )
    if table is None:
        return columns, indices
    out = np.empty(nnz, dtype=np.int32)
    in_threads(threads, lambda t: map_columns(indices, table, cuts[t], cuts[t + 1], out))
    return columns, out


#: ``positions`` of :func:`renumbered`'s kernels when every column is used (never read)
_NO_POSITIONS = np.empty(0, dtype=np.int32)


def check_group_options(grid, threads) -> None:
    """Raise ``ValueError`` for a resident-group run's ``grid`` (a positive int or None) or
    ``threads`` (1..64 or None) out of range (the options of ``tron`` and ``dual_newton``)."""
    if grid is not None and (isinstance(grid, bool) or int(grid) < 1):
        raise ValueError(f"grid must be a positive int or None, got grid={grid!r}")
    if threads is not None and (isinstance(threads, bool) or not 1 <= int(threads) <= 64):
        raise ValueError(f"threads must be in 1..64 or None, got threads={threads!r}")


def check_grid_rows(grid, data) -> None:
    """Raise ``ValueError`` when ``grid`` asks for more row groups than ``data`` has rows."""
    if grid is not None and int(grid) > int(data.n_samples):
        raise ValueError(f"grid={grid} is larger than the number of rows ({data.n_samples})")
