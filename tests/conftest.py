"""Shared fixtures: a real multi-process LocalCluster and a scheduler that counts computes."""

from __future__ import annotations

import dask
import numpy as np
import pytest


@pytest.fixture(scope="session")
def local_cluster():
    """A real ``dask.distributed`` LocalCluster with two single-threaded worker processes."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
    )
    # Not the default client: a session-wide default would silently send every later
    # in-process test's Dask work to this cluster. Tests pass it explicitly (client=...)
    # or enter it with ``local_cluster.as_current()``.
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture
def capped_cluster():
    """``with capped_cluster(limit_mib) as client``: a fresh LocalCluster of two one-thread
    worker processes of ``limit_mib`` MiB each (the scale runs' workers), and its client."""
    from contextlib import contextmanager

    @contextmanager
    def start(limit_mib):
        from distributed import Client, LocalCluster

        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True,
                memory_limit=f"{limit_mib}MiB", dashboard_address="127.0.0.1:0",
            ) as cluster,
            Client(cluster, set_as_default=False) as client,
        ):  # fmt: skip
            yield client

    return start


class CountingScheduler:
    """A synchronous scheduler that counts how many times ``compute`` reached it.

    Used as ``with dask.config.set(scheduler=counter): ...`` to prove that an operation is
    one Dask compute (``counter.calls == 1``) and not one per block.
    """

    def __init__(self):
        self.calls = 0
        self.tasks = 0

    def __call__(self, dsk, keys, **kwargs):
        self.calls += 1
        # dask >= 2025 hands schedulers an expression; its graph has the tasks
        graph = dsk.__dask_graph__() if hasattr(dsk, "__dask_graph__") else dsk
        self.tasks += len(graph)
        return dask.get(dsk, keys, **kwargs)


@pytest.fixture
def counting_scheduler():
    """A fresh :class:`CountingScheduler`, installed as the default scheduler for the test."""
    counter = CountingScheduler()
    with dask.config.set(scheduler=counter):
        yield counter


@pytest.fixture
def builtin_solvers():
    """Names of the solvers daskpd ships, without the test-only ones other modules register."""
    from daskpd.solvers import available_solvers, get_solver

    return [
        name
        for name in available_solvers()
        if type(get_solver(name)).__module__.startswith("daskpd.")
    ]


@pytest.fixture
def rng():
    """A seeded NumPy generator, so failures reproduce."""
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _input_cache_in_tmp(tmp_path_factory, monkeypatch):
    """Stores that a test's command makes from a file go to a temporary cache, never to the
    user's (``daskpd train FILE`` caches them; DASKPD_CACHE names the cache)."""
    monkeypatch.setenv("DASKPD_CACHE", str(tmp_path_factory.getbasetemp() / "daskpd-cache"))


@pytest.fixture(scope="session", autouse=True)
def _kernels_compiled_in_the_background():
    """DSO's tile loops compiled on the other core while the first tests run (see
    tests/_warm_kernels.py); waited for (or stopped) at the end of the session."""
    import os
    import subprocess
    import sys

    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        yield  # one compiling process per test run, started by the first test process
        return
    script = os.path.join(os.path.dirname(__file__), "_warm_kernels.py")
    process = subprocess.Popen(
        [sys.executable, script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    yield
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
