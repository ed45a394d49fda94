"""Fault injection on a real 2-worker LocalCluster: lost workers, killed training processes,
unreachable schedulers. Every test compares against the uninterrupted run, bit for bit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
from _faults import WorkerKiller, assert_same_run, straight_and_killed, wait_for_two_workers

from daskpd._cluster import worker_addresses
from daskpd.checkpoint import CheckpointStore
from daskpd.cli import main
from daskpd.data import partition_dataset, write_dataset
from daskpd.model_file import load_model
from daskpd.solvers import Iterate, TrainingFailed, register_solver, solve

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def disk_data(tmp_path_factory):
    rng = np.random.default_rng(11)
    n, d = 3000, 40
    X = sp.random(n, d, density=0.3, random_state=11, format="csr")
    y = np.where(X @ rng.standard_normal(d) + 0.2 * rng.standard_normal(n) > 0, 1.0, -1.0)
    path = tmp_path_factory.mktemp("faults") / "train.zarr"
    write_dataset(X, y, path, rows_per_block=1000)
    return partition_dataset(path, 2)


@pytest.mark.long  # a killed worker: CI's second call (-m long, issue 49)
def test_batch_survives_worker_killed_mid_epoch(local_cluster, disk_data):
    client = local_cluster
    wait_for_two_workers(client)
    kwargs = {"loss": "logistic", "alpha": 1e-3, "solver": "batch", "tol": 0.0, "max_epochs": 5,
              "eval_every": 1}  # fmt: skip
    straight = solve(disk_data, client=client, **kwargs)
    killer = WorkerKiller(client, after=2, delay=0.05)
    survived = solve(disk_data, client=client, callbacks=killer, **kwargs)
    killer.check_mid_epoch()
    assert np.array_equal(survived.w, straight.w)
    assert [r["primal"] for r in survived.history] == [r["primal"] for r in straight.history]
    wait_for_two_workers(client)
    assert killer.killed_pid not in set(client.run(os.getpid).values())


@pytest.mark.long  # a killed worker: CI's second call (-m long, issue 49)
def test_dso_survives_worker_killed_mid_epoch(local_cluster, disk_data, tmp_path):
    client = local_cluster
    kwargs = {"loss": "hinge", "alpha": 1e-3, "solver": "dso", "grid": 2, "tol": 0.0,
              "eval_every": 1}  # fmt: skip
    straight, survived = straight_and_killed(client, disk_data, tmp_path, 0.05, **kwargs)
    assert_same_run(straight, survived)
    # DSO's dual blocks live on their workers, so losing one replays from the checkpoint.
    assert survived.recoveries <= 1
    wait_for_two_workers(client)


@pytest.mark.long  # a killed worker: CI's second call (-m long, issue 49)
def test_spdc_survives_worker_killed_mid_epoch(local_cluster, disk_data, tmp_path):
    # The carry goes between the two workers through shared memory; a worker lost while it
    # holds it (or the dual blocks) replays from the checkpoint: the same bits as a run
    # that lost nothing (one thread a block, so the iterates are reproducible).
    client = local_cluster
    kwargs = {"loss": "logistic", "alpha": 1e-3, "solver": "spdc", "threads": 1, "tol": 0.0,
              "eval_every": 1, "random_state": 5}  # fmt: skip
    straight, survived = straight_and_killed(client, disk_data, tmp_path, 0.02, **kwargs)
    assert_same_run(straight, survived)
    assert survived.recoveries >= 1
    wait_for_two_workers(client)


def _train_args(data, *extra):
    return [
        "train", str(data.path), "--solver", "batch", "--loss", "logistic", "--alpha", "1e-3",
        "--epochs", "12", "--eval-every", "3", "--tol", "0", "--no-progress", *extra,
    ]  # fmt: skip


@pytest.mark.long  # a killed training process: CI's second call (-m long, issue 49)
def test_killed_training_process_resumes_to_the_same_model(local_cluster, disk_data, tmp_path):
    address = local_cluster.scheduler.address
    wait_for_two_workers(local_cluster)
    checkpoints = tmp_path / "ck"
    command = [sys.executable, "-m", "daskpd.cli"] + _train_args(
        disk_data, "--scheduler", address, "--checkpoint-dir", str(checkpoints),
        "--checkpoint-every", "1", "--out", str(tmp_path / "never.zarr"),
    )  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if checkpoints.exists() and (CheckpointStore(checkpoints).latest_epoch() or 0) >= 3:
                break
            if process.poll() is not None:
                pytest.fail(f"training ended early: {process.stderr.read().decode()[-2000:]}")
            time.sleep(0.05)
        else:
            pytest.fail("no checkpoint of epoch 3 within two minutes")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    killed_at = CheckpointStore(checkpoints).latest_epoch()
    assert 3 <= killed_at < 12
    assert not (tmp_path / "never.zarr").exists()

    resumed_path, straight_path = tmp_path / "resumed.zarr", tmp_path / "straight.zarr"
    resume_args = _train_args(
        disk_data, "--scheduler", address, "--checkpoint-dir", str(checkpoints), "--resume",
        "--out", str(resumed_path),
    )  # fmt: skip
    assert main(resume_args) == 0
    assert main(_train_args(disk_data, "--scheduler", address, "--out", str(straight_path))) == 0
    resumed, straight = load_model(resumed_path), load_model(straight_path)
    assert resumed.n_epochs == straight.n_epochs == 12
    assert np.array_equal(resumed.w, straight.w)
    assert [r["primal"] for r in resumed.history] == [r["primal"] for r in straight.history]


def test_unreachable_scheduler_is_a_clear_error(disk_data, capsys):
    address = ("--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1.5")
    code = main(_train_args(disk_data, *address))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert "no Dask scheduler answered at 'tcp://127.0.0.1:9'" in err[0]
    assert "1.5 s" in err[0]  # the timeout asked for, not the default


# --------------------------------------------------------------------------------------------
# data Dask cannot recompute: the driver replays from the last checkpoint (or from the start)


@dataclass(frozen=True)
class _PinnedOptions:
    step: float = 1.0


@dataclass(frozen=True)
class _PinnedState:
    w: object  # a future scattered to one worker: lost for good when that worker dies
    client: object
    problem: object
    data: object
    options: object


def _gradient_step(w, X, y, alpha, step):
    margin = y * (X @ w)
    gradient = -(X.T @ (y / (1.0 + np.exp(margin)))) / X.shape[0] + alpha * w
    return w - step * gradient


@register_solver
class PinnedGradient:
    """Gradient descent whose iterate lives only on the first worker (test solver)."""

    name = "test-pinned-gd"
    Options = _PinnedOptions

    def check(self, problem, data, options):
        if problem.loss.name != "logistic":
            raise ValueError("test-pinned-gd handles logistic loss only")

    def _pin(self, w, client, problem, data, options):
        first = worker_addresses(client)[0]
        future = client.scatter(np.asarray(w), workers=[first], hash=False)
        return _PinnedState(future, client, problem, data, options)

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        return self._pin(np.zeros(data.n_features), client, problem, data, options)

    def run_epoch(self, state, epoch):
        X, y = state.data.read_rows(0, state.data.n_samples)
        new = state.client.submit(
            _gradient_step, state.w, X, y, state.problem.alpha, state.options.step
        ).result()
        return self._pin(new, state.client, state.problem, state.data, state.options)

    def iterate(self, state):
        return Iterate(w=state.w.result())

    def state_arrays(self, state):
        return {"w": state.w.result()}

    def restore(self, problem, data, arrays, *, seed, client, options):
        return self._pin(arrays["w"], client, problem, data, options)


def _kill_first_worker(client):
    first = worker_addresses(client)[0]
    pid = client.run(os.getpid, workers=[first])[first]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while first in worker_addresses(client) and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def own_cluster():
    """A 2-worker LocalCluster of one test's own: a worker killed here need not come back for
    the tests after it (under load its nanny's restart has taken over a minute)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client


@pytest.mark.long  # a killed worker: CI's second call (-m long, issue 49)
@pytest.mark.parametrize("with_checkpoints", [True, False])
def test_unrecoverable_data_loss_is_replayed(own_cluster, disk_data, tmp_path, with_checkpoints):
    client = own_cluster
    wait_for_two_workers(client)
    kwargs = {"loss": "logistic", "alpha": 1e-2, "solver": "test-pinned-gd", "tol": 0.0,
              "max_epochs": 6, "eval_every": 6, "client": client}  # fmt: skip
    straight = solve(disk_data, **kwargs)

    def kill_after_four(info):
        if info.epoch == 4 and not killed:
            killed.append(True)
            _kill_first_worker(client)

    killed = []
    extra = {"checkpoint_dir": tmp_path / "ck", "checkpoint_every": 2} if with_checkpoints else {}
    survived = solve(disk_data, callbacks=kill_after_four, **kwargs, **extra)
    assert killed and survived.recoveries == 1
    assert np.array_equal(survived.w, straight.w)
    assert survived.n_epochs == 6 and [r["epoch"] for r in survived.history] == [6]


@pytest.mark.slow  # kills a worker every epoch: each restart costs seconds
def test_replays_are_bounded(local_cluster, disk_data):
    client = local_cluster
    wait_for_two_workers(client)

    def kill_every_epoch(info):
        _kill_first_worker(client)
        client.wait_for_workers(2, timeout=60)

    with pytest.raises(TrainingFailed, match="failed after 1 replays"):
        solve(
            disk_data, loss="logistic", alpha=1e-2, solver="test-pinned-gd", max_epochs=50,
            tol=0.0, client=client, callbacks=kill_every_epoch, max_retries=1,
        )  # fmt: skip
    wait_for_two_workers(client)


def test_client_policy(local_cluster, counting_scheduler):
    from daskpd.data import MemoryDataset

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 4))
    data = MemoryDataset(X, np.where(X[:, 0] > 0, 1.0, -1.0))
    kwargs = {"loss": "logistic", "alpha": 1e-2, "solver": "batch", "tol": 0.0,
              "max_epochs": 2, "power_iterations": 1, "eval_every": 1}  # fmt: skip
    # A scheduler set in dask.config wins over the active distributed client...
    local = solve(data, **kwargs)
    assert counting_scheduler.calls == 1 + 1 + 2 + 2
    # ...and an explicit client wins over both.
    remote = solve(data, client=local_cluster, **kwargs)
    assert counting_scheduler.calls == 6
    np.testing.assert_allclose(remote.w, local.w, rtol=1e-13, atol=1e-15)


def test_client_false_stays_in_this_process_beside_an_active_client(local_cluster, tmp_path):
    """``client=False`` runs in this process even where a distributed client is dask's
    default: no task of the run reaches the cluster (before, its graphs went there, the
    rows in them), and the model is the in-process one."""
    from distributed import get_task_stream

    from daskpd.data import MemoryDataset

    rng = np.random.default_rng(1)
    X = rng.standard_normal((80, 5))
    data = MemoryDataset(X, np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1.0, -1.0))
    kwargs = {"loss": "hinge", "alpha": 1e-2, "solver": "cocoa", "tol": 0.0,
              "max_epochs": 3, "eval_every": 1}  # fmt: skip
    alone = solve(data, client=False, **kwargs)
    with local_cluster.as_current(), get_task_stream(local_cluster) as stream:
        beside = solve(data, client=False, **kwargs)
    assert stream.data == []
    np.testing.assert_array_equal(beside.w, alone.w)
