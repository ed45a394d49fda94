"""DSO on real multi-process dask.distributed clusters."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import scipy.sparse as sp

from daskpd._cluster import peak_rss_mib, worker_addresses
from daskpd.data import MemoryDataset, partition_dataset, write_dataset
from daskpd.problem import Problem
from daskpd.solvers.driver import solve
from daskpd.solvers.dso import DSO, DSOOptions, serial_replay
from daskpd.solvers.dso._start import _start_method

pytestmark = pytest.mark.cluster

#: The tests that look into /dev/shm (where the workers of a LocalCluster share blocks).
needs_dev_shm = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")


def _data(n=320, d=90, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.1, random_state=seed, format="csr", dtype=np.float32)
    X.data = rng.uniform(0.1, 1.0, X.nnz).astype(np.float32)
    y = np.sign(X @ rng.normal(size=d) + 0.2 * rng.normal(size=n))
    y[y == 0] = 1.0
    return X, y


@pytest.fixture(scope="module")
def disk_data(tmp_path_factory):
    X, y = _data()
    path = tmp_path_factory.mktemp("dso") / "train.zarr"
    write_dataset(X, y, path, rows_per_block=50)
    partition_dataset(path, grid=2)
    return partition_dataset(path, grid=4)


def _epochs(client, problem, data, options, n_epochs, seed):
    solver = DSO()
    solver.check(problem, data, options)
    state = solver.init(
        problem, data, seed=np.random.SeedSequence(seed), client=client, options=options
    )
    for epoch in range(1, n_epochs + 1):
        state = solver.run_epoch(state, epoch)
    return solver, state


def _check_equal(client, solver, state, reference):
    it = solver.iterate(state)
    assert np.array_equal(it.w, reference["w"])
    assert np.array_equal(np.concatenate(client.gather(it.z)), reference["z"])
    assert np.array_equal(it.w_avg, reference["w_avg"])
    assert np.array_equal(np.concatenate(client.gather(it.z_avg)), reference["z_avg"])
    arrays = solver.state_arrays(state)
    assert np.array_equal(arrays["w_acc"], reference["w_acc"])
    assert np.array_equal(arrays["z_acc"], reference["z_acc"])


@pytest.mark.parametrize(
    "options",
    [
        DSOOptions(grid=4, step="adagrad"),
        DSOOptions(grid=2, step="adagrad", svrg_every=2, visit_order="random"),
        # 256-byte sub-blocks: 8 columns each (4 with SVRG), many sub-blocks per tile
        DSOOptions(grid=2, step="adagrad", svrg_every=2, visit_order="blocked", block_bytes=256),
        DSOOptions(grid=4, step="adagrad", visit_order="rows"),
    ],
    ids=["adagrad-grid4", "adagrad-svrg-grid2", "blocked-svrg-grid2", "rows-grid4"],
)
def test_two_workers_equal_serial_replay(local_cluster, disk_data, options):
    problem = Problem("logistic", "l2", 1e-2)
    solver, state = _epochs(local_cluster, problem, disk_data, options, n_epochs=3, seed=9)
    reference = serial_replay(problem, disk_data, n_epochs=3, seed=9, options=options)
    _check_equal(local_cluster, solver, state, reference)
    # the dual blocks never left the worker that owns their row group
    workers = worker_addresses(local_cluster)
    p = options.grid
    for q, future in enumerate(state.zstates):
        owner = workers[q * len(workers) // p]
        assert set(local_cluster.who_has([future])[future.key]) == {owner}


@pytest.mark.parametrize("whole", [True, False], ids=["tuples-whole", "blocks-split-off"])
def test_two_workers_equal_serial_replay_either_way_blocks_travel(
    local_cluster, disk_data, monkeypatch, whole
):
    # A task's (z, w, ...) tuple goes whole to the next task of its w block while it is
    # small; above the size, the block is split off by a task of its own. The same updates
    # either way, and the dual blocks stay where they live.
    from daskpd.solvers import dso
    from daskpd.solvers.dso import _epoch

    monkeypatch.setattr(_epoch, "WHOLE_TUPLE_BYTES", 1 << 30 if whole else 0)
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=2)
    solver, state = _epochs(local_cluster, problem, disk_data, options, n_epochs=3, seed=4)
    assert dso._whole(state, *worker_addresses(local_cluster)) == whole
    _check_equal(
        local_cluster, solver, state,
        serial_replay(problem, disk_data, n_epochs=3, seed=4, options=options),
    )  # fmt: skip


def test_an_iterate_outlives_the_epochs_after_it(local_cluster, disk_data):
    # run_epoch releases the blocks of the state it spends as soon as the next epoch is
    # submitted; an iterate taken before holds references of its own
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=2)
    solver, state = _epochs(local_cluster, problem, disk_data, options, n_epochs=2, seed=3)
    it = solver.iterate(state)
    z, z_avg = local_cluster.gather(it.z), local_cluster.gather(it.z_avg)
    spent = {f.key for f in (*state.zstates, *state.wstates, *(t for t, _ in state.handoff))}
    assert len(spent) == 3 * options.grid  # the last round's tuples hand the blocks over
    w_avg = state.w_avg
    for epoch in (3, 4):
        state = solver.run_epoch(state, epoch)
    # the average of w goes on in place (one array per block for the whole run)
    assert [f.key for f in state.w_avg] == [f.key for f in w_avg]

    def known(dask_scheduler, keys):
        return sorted(key for key in keys if key in dask_scheduler.tasks)

    deadline = time.monotonic() + 10
    while local_cluster.run_on_scheduler(known, keys=spent) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert local_cluster.run_on_scheduler(known, keys=spent) == []
    for got, want in ((it.z, z), (it.z_avg, z_avg)):
        for a, b in zip(local_cluster.gather(got), want, strict=True):
            assert np.array_equal(a, b)
    # and the run went on as the serial replay of the same updates
    _check_equal(
        local_cluster, solver, state,
        serial_replay(problem, disk_data, n_epochs=4, seed=3, options=options),
    )  # fmt: skip


def _shared_files(dask_worker):
    """``(key, shared file)`` of the DSO w blocks in a worker's memory."""
    from daskpd.solvers.dso._blocks import _ColumnBlock

    return [
        (key, value.shared)
        for key, value in dask_worker.data.items()
        if isinstance(value, _ColumnBlock)
    ]


@needs_dev_shm
@pytest.mark.parametrize("shared_memory", [True, False])
def test_w_blocks_change_worker_through_shared_memory(local_cluster, disk_data, shared_memory):
    import gc

    from daskpd.solvers.common import shared as _shared

    problem = Problem("logistic", "l2", 1e-2)
    options = DSOOptions(grid=2, shared_memory=shared_memory, svrg_every=2)
    solver, state = _epochs(local_cluster, problem, disk_data, options, n_epochs=3, seed=4)
    reference = serial_replay(problem, disk_data, n_epochs=3, seed=4, options=options)
    _check_equal(local_cluster, solver, state, reference)
    run = state.settings.shared_run
    held = local_cluster.run(_shared_files)
    keys = {future.key for future in state.wstates}
    found = {key: shared for blocks in held.values() for key, shared in blocks if key in keys}
    assert set(found) == keys
    if not shared_memory:
        assert run is None
        assert all(shared is None for shared in found.values())
        return
    # every w block has been on both workers (grid 2: each round it changes worker) and is
    # still the file its first task made, or the one the SVRG snapshot of epoch 3 made
    directory = _shared.run_dir(run)
    assert sorted(os.listdir(directory)) == ["domain", "w0", "w1"]
    assert {shared[:2] for shared in found.values()} == {(run, "w0"), (run, "w1")}
    for _, name, _, inode in found.values():
        assert os.stat(os.path.join(directory, name)).st_ino == inode
    # the run's files go with its last state
    del state, solver
    gc.collect()
    assert not os.path.exists(directory)


def _run_dirs():
    import glob

    # the directories: each has a lock file beside it, daskpd-<token>.lock, while it lives
    return set(glob.glob("/dev/shm/daskpd-*/"))


def _new_runs(before):
    return _run_dirs() - before


@needs_dev_shm
def test_solve_removes_its_shared_memory_files(local_cluster, disk_data):
    before = _run_dirs()
    seen = []

    def during(info):
        seen.append(_new_runs(before))

    result = solve(
        disk_data, "hinge", "l2", 1e-2, "dso", max_epochs=2, client=local_cluster, grid=2,
        callbacks=[during],
    )  # fmt: skip
    assert result.n_epochs == 2
    assert all(len(runs) == 1 for runs in seen)  # used while training
    assert _new_runs(before) == set()  # and removed at the end


def _worker_name(dask_worker):
    return dask_worker.name


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory):
    """A cluster whose two workers stand for two machines: each has its own shared root."""
    from distributed import Client, Nanny, Scheduler, SpecCluster

    from daskpd.solvers.common.shared import ROOT_VARIABLE

    roots = [tmp_path_factory.mktemp(f"shm-{k}") for k in "ab"]
    workers = {
        f"w{k}": {
            "cls": Nanny,
            "options": {"nthreads": 1, "host": "127.0.0.1", "env": {ROOT_VARIABLE: str(root)}},
        }
        for k, root in enumerate(roots)
    }
    scheduler = {
        "cls": Scheduler,
        "options": {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"},
    }
    cluster = SpecCluster(workers=workers, scheduler=scheduler)
    client = Client(cluster, set_as_default=False)
    yield client, roots
    client.close()
    cluster.close()


@pytest.mark.parametrize("client_on", ["a third machine", "the first worker's machine"])
def test_w_blocks_cross_machines_as_plain_arrays(two_machines, disk_data, monkeypatch, client_on):
    from daskpd.solvers.common import shared as _shared

    client, roots = two_machines
    here = roots[0] if client_on == "the first worker's machine" else roots[0].parent / "client"
    here.mkdir(exist_ok=True)
    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(here))
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=4, svrg_every=2)
    solver, state = _epochs(client, problem, disk_data, options, n_epochs=3, seed=6)
    shared = state.shared
    if client_on == "a third machine":
        # no two processes share memory: nothing to hand over
        assert shared is None
    else:
        # each worker made its row groups' blocks in its own machine's memory; a block
        # crossed to the other worker as plain arrays, and came to the client through its
        # machine's memory or as plain arrays
        assert shared is not None
        name = {name: address for address, name in client.run(_worker_name).items()}
        assert shared.same(name["w0"], None) and not shared.same(name["w1"], None)
        assert not shared.same(name["w0"], name["w1"])
        for root in roots:
            assert any(name.startswith("w") for name in os.listdir(root / shared.name))
    reference = serial_replay(problem, disk_data, n_epochs=3, seed=6, options=options)
    _check_equal(client, solver, state, reference)
    solver.close(state)
    assert all(not (root / f"daskpd-{state.token}").exists() for root in [*roots, here])


def test_in_memory_data_on_two_workers_equals_serial_replay(local_cluster):
    X, y = _data(seed=3)
    data = MemoryDataset(X, y)
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=2, init="dcd", dcd_passes=2)
    solver, state = _epochs(local_cluster, problem, data, options, n_epochs=2, seed=1)
    reference = serial_replay(problem, data, n_epochs=2, seed=1, options=options)
    _check_equal(local_cluster, solver, state, reference)


@pytest.mark.parametrize("threads", [1, 2])
def test_one_worker_equals_serial_replay(disk_data, threads):
    from daskpd._cluster import ClusterOptions, cluster_client

    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=4)
    # the CLI's LocalCluster (--workers 1 --threads-per-worker N); with 2 threads the tasks
    # of a round run at once and update the w blocks they were handed in place
    with cluster_client(ClusterOptions(n_workers=1, threads_per_worker=threads)) as client:
        assert list(client.nthreads().values()) == [threads]
        solver, state = _epochs(client, problem, disk_data, options, n_epochs=3, seed=2)
        reference = serial_replay(problem, disk_data, n_epochs=3, seed=2, options=options)
        _check_equal(client, solver, state, reference)


@pytest.mark.parametrize("profile", [False, True])
def test_started_cluster_profiles_its_workers_only_when_asked(profile):
    from daskpd._cluster import ClusterOptions, cluster_client

    def profiling(dask_worker):
        return "profile" in dask_worker.periodic_callbacks

    with cluster_client(ClusterOptions(n_workers=1, profile=profile)) as client:
        assert list(client.run(profiling).values()) == [profile]


def _worker_memory_settings():
    import os

    from numpy._core import multiarray

    names = ("NUMPY_MADVISE_HUGEPAGE", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
    return {name: os.environ.get(name) for name in names}, multiarray._get_madvise_hugepage()


@pytest.mark.parametrize("shell_trim", [None, "131072"], ids=["defaults", "shell-value-wins"])
def test_started_cluster_spawns_workers_with_its_memory_settings(monkeypatch, shell_trim):
    import os

    from daskpd import _cluster
    from daskpd._cluster import ClusterOptions, cluster_client

    shell = dict.fromkeys(_cluster.WORKER_ENVIRON)
    shell["MALLOC_TRIM_THRESHOLD_"] = shell_trim
    monkeypatch.setattr(_cluster, "_SHELL_ENVIRON", shell)
    # what an earlier nanny of this process leaves behind, which distributed would prefer
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    expected = dict(_cluster.WORKER_ENVIRON)
    if shell_trim is not None:
        expected["MALLOC_TRIM_THRESHOLD_"] = shell_trim
    with cluster_client(ClusterOptions(n_workers=1)) as client:
        ((environ, huge_pages),) = client.run(_worker_memory_settings).values()
        # this process's environment is left as it was
        assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"
        assert "NUMPY_MADVISE_HUGEPAGE" not in os.environ
    assert environ == expected
    assert huge_pages is False


def test_grid_must_be_a_multiple_of_the_workers(local_cluster, tmp_path):
    X, y = _data()
    write_dataset(X, y, tmp_path / "d.zarr")
    data = partition_dataset(tmp_path / "d.zarr", grid=3)
    problem = Problem("hinge", "l2", 1e-2)
    with pytest.raises(ValueError, match="multiple of the number of Dask workers"):
        DSO().init(
            problem, data, seed=np.random.SeedSequence(0), client=local_cluster,
            options=DSOOptions(grid=3),
        )  # fmt: skip


def _cached_tiles(path):
    from daskpd.solvers.dso import _tiles

    return sorted((key[3], key[4]) for key in _tiles._TILE_CACHE if key[0] == path)


@pytest.mark.parametrize("cache_bytes", [None, 0], ids=["cache", "no-cache"])
def test_init_reads_each_workers_tiles_during_the_start(local_cluster, tmp_path, cache_bytes):
    # The first epoch then costs a steady one's time: each worker's tiles are in its cache
    # when init returns (read while the start ran). Without a cache nothing is read ahead,
    # as the epochs would read every tile again anyway.
    X, y = _data(seed=3)
    path = tmp_path / "warm.zarr"
    write_dataset(X, y, path, rows_per_block=50)
    data = partition_dataset(path, grid=2)
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=2, tile_cache_bytes=cache_bytes)
    assert _start_method(problem, data, options, local_cluster) == "cocoa"
    solver = DSO()
    solver.check(problem, data, options)
    seed = np.random.SeedSequence(5)
    state = solver.init(problem, data, seed=seed, client=local_cluster, options=options)
    cached = local_cluster.run(_cached_tiles, str(data.path))
    first, second = worker_addresses(local_cluster)
    if cache_bytes is None:
        assert cached == {first: [(0, 0), (0, 1)], second: [(1, 0), (1, 1)]}
    else:
        assert cached == {first: [], second: []}
    # what the epochs do with the tiles read ahead is what they do reading them themselves
    for epoch in (1, 2):
        state = solver.run_epoch(state, epoch)
    reference = serial_replay(problem, data, n_epochs=2, seed=5, options=options)
    assert np.array_equal(solver.iterate(state).w, reference["w"])


def test_solve_on_cluster_gap_falls(local_cluster, disk_data):
    result = solve(
        disk_data, "hinge", "l2", 1e-2, "dso", max_epochs=15, tol=0.0, eval_every=5,
        client=local_cluster, grid=2, svrg_every=1, init="zero",
    )  # fmt: skip
    gaps = [row["gap"] for row in result.history]
    assert len(gaps) == 3
    assert gaps[-1] < gaps[0] / 5
    assert gaps[-1] < 5e-3
    # Every tile task of the 15 epochs unpickled the dataset; the workers share one handle
    # (a handle per task, kept while the worker remembers the task, grew each worker by a
    # column order per tile read).
    handles = local_cluster.run(_live_handles, disk_data.path)
    assert all(count == 1 for count in handles.values()), handles


def _live_handles(path):
    import gc

    from daskpd.data import Dataset

    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, Dataset) and obj.path == path)


@pytest.mark.slow  # a scale run (58M nonzeros on 400 MiB workers): 27 s of a fresh clone's suite
def test_out_of_core_training_under_worker_memory_limit(tmp_path, capped_cluster):
    """Train on a dataset larger than each worker's memory limit: tiles stream from zarr."""

    from daskpd.generators import make_splice_like

    path = tmp_path / "splice.zarr"
    make_splice_like(path, 130_000, degree=8, hash_bits=18, binary=True, random_state=3)
    data = partition_dataset(path, grid=4)
    limit_mib = 400
    # The tiled copy alone (int32 row and column ids of every nonzero), not counting the
    # row-blocked copy, is larger than the memory a worker may use.
    tiled_mib = data.nnz * 8 / 2**20
    assert tiled_mib > 1.1 * limit_mib
    with capped_cluster(limit_mib) as client:
        workers_before = set(worker_addresses(client))
        # the dual solver's start would keep every row in one worker: "auto" starts from
        # zero here (with this machine's memory in-process, the same data gets that start)
        problem = Problem("hinge", "l2", 1e-4)
        assert _start_method(problem, data, DSOOptions(), client) == "zero"
        assert _start_method(problem, data, DSOOptions(), None) == "cocoa"
        # default tile cache: it keeps tiles only while a worker is under half its limit
        result = solve(
            data, "hinge", "l2", 1e-4, "dso", max_epochs=2, tol=0.0, client=client, grid=4,
            eval_every=1,
        )  # fmt: skip
        # no worker was restarted (a restarted worker comes back under a new address)
        assert set(worker_addresses(client)) == workers_before
        peaks = client.run(peak_rss_mib)
    assert max(peaks.values()) < limit_mib, peaks
    assert result.n_epochs == 2
    gaps = [row["gap"] for row in result.history]
    assert np.all(np.isfinite(gaps)) and gaps[-1] < gaps[0]
