"""Connecting to, or starting, the Dask cluster a run uses.

Policy (the same for the CLI and the estimators):

* ``scheduler`` given: connect to that scheduler and fail fast, with the address in the
  message, if it does not answer.
* otherwise, an active ``distributed.Client`` is reused when one exists;
* otherwise a ``LocalCluster`` is started only when the caller asks for one
  (``start=True``), with one single-threaded worker process per core by default, so numba
  kernels of different tasks never share a GIL or a cache line.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterOptions:
    """How to reach or build the cluster of a run.

    Parameters
    ----------
    scheduler : str or None
        Address of an existing scheduler (``tcp://host:8786``). ``None`` means local.
    n_workers : int or None
        Worker processes of a local cluster; ``None`` means one per core.
    memory_limit : str or int or None
        Memory limit per worker of a local cluster (``"2GiB"``, bytes); ``None`` is Dask's
        default share of the machine.
    threads_per_worker : int
        Threads per local worker process.
    timeout : float
        Seconds to wait for a given scheduler before giving up.
    profile : bool
        Whether the workers of a local cluster run Dask's statistical profiler (the
        dashboard's profile page). Off by default: it samples every thread's stack 100
        times a second, and on a machine whose cores all run kernels that time comes out
        of the kernels (2-process DSO epochs 3-7% slower here, BENCHMARKS.md).
    """

    scheduler: str | None = None
    n_workers: int | None = None
    memory_limit: str | int | None = None
    threads_per_worker: int = 1
    timeout: float = 10.0
    profile: bool = False

    def __post_init__(self):
        if self.n_workers is not None and int(self.n_workers) < 1:
            raise ValueError(f"n_workers must be >= 1, got {self.n_workers!r}")
        if int(self.threads_per_worker) < 1:
            raise ValueError(f"threads_per_worker must be >= 1, got {self.threads_per_worker!r}")


class SchedulerUnreachable(RuntimeError):
    """The scheduler address given by the user did not answer."""


def active_client():
    """Return the current ``distributed.Client`` or ``None`` when there is none."""
    try:
        from distributed import get_client

        return get_client()
    except (ValueError, ImportError):
        return None


@contextlib.contextmanager
def cluster_client(options: ClusterOptions | None = None, *, start: bool = True):
    """Yield a ``distributed.Client`` according to the policy of this module.

    A client or cluster created here is closed on exit; a reused one is left alone.

    Parameters
    ----------
    options : ClusterOptions, optional
        Where to connect, or what to start.
    start : bool, default=True
        Start a ``LocalCluster`` when no scheduler is given and no client is active. With
        ``False`` the context yields ``None`` instead (in-process, threaded scheduler).

    Yields
    ------
    client : distributed.Client or None
    """
    import dask
    from distributed import Client, LocalCluster

    options = options or ClusterOptions()
    if options.scheduler:
        try:
            client = Client(options.scheduler, timeout=options.timeout)
        except (OSError, TimeoutError) as exc:
            raise SchedulerUnreachable(
                f"no Dask scheduler answered at {options.scheduler!r} within "
                f"{options.timeout:g} s ({exc.__class__.__name__})"
            ) from None
        with client:
            yield client
        return
    existing = active_client()
    if existing is not None:
        yield existing
        return
    if not start:
        yield None
        return
    n_workers = options.n_workers or os.cpu_count() or 1
    kwargs = {}
    if options.memory_limit is not None:
        kwargs["memory_limit"] = options.memory_limit
    # One single-threaded process per core: the numba loops are memory-bound, and a
    # process per worker isolates a crashing task and gives each worker its own memory cap.
    # the workers take their configuration from this process when they start
    with dask.config.set({"distributed.worker.profile.enabled": bool(options.profile)}):
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=options.threads_per_worker,
            processes=True,
            dashboard_address=":0",
            **kwargs,
        )
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def worker_addresses(client):
    """The addresses of the cluster's workers, sorted, as the scheduler knows them now.

    Not ``client.scheduler_info()["workers"]``: that returns the client's cached identity,
    which the client's periodic refresh can replace, between the fetch and the return, with
    one that lists no workers (distributed 2026.8).
    """
    return tuple(sorted(client.nthreads()))


def worker_memory_limit():
    """The memory limit of the Dask worker running this code, in bytes (0: none, or no worker)."""
    try:
        from distributed import get_worker

        return int(get_worker().memory_manager.memory_limit or 0)
    except (ImportError, ValueError, AttributeError):
        return 0
