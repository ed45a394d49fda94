"""Fault injection shared by the lost-worker tests (tests/cluster/test_faults.py and
tests/solvers/: cocoa, tron, dual_newton): kill a worker process of a real LocalCluster while
an epoch runs."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np

from daskpd.solvers import solve


class WorkerKiller:
    """Kill one worker process (SIGKILL; its nanny starts a new one) ``delay`` seconds after
    epoch ``after`` ends, i.e. while the next epoch runs."""

    def __init__(self, client, after, delay):
        self.client, self.after, self.delay = client, after, delay
        self.epoch_ends: dict[int, float] = {}
        self.killed_at = None
        self.killed_pid = None
        self.timer = None

    def _kill(self):
        pids = self.client.run(os.getpid)
        self.killed_pid = sorted(pids.values())[0]
        self.killed_at = time.monotonic()
        os.kill(self.killed_pid, signal.SIGKILL)

    def __call__(self, info):
        # First end only: epochs replayed after a recovery report again.
        self.epoch_ends.setdefault(info.epoch, time.monotonic())
        if info.epoch == self.after and self.timer is None:
            self.timer = threading.Timer(self.delay, self._kill)
            self.timer.start()
        return None

    def check_mid_epoch(self):
        self.timer.join()
        assert self.killed_at is not None
        assert self.epoch_ends[self.after] < self.killed_at < self.epoch_ends[self.after + 1]


def wait_for_two_workers(client):
    client.wait_for_workers(2, timeout=60)
    deadline = time.monotonic() + 60
    while len(client.run(os.getpid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)


def straight_and_killed(client, data, tmp_path, delay, **kwargs):
    """Six epochs of ``solve(data, **kwargs)`` twice: untouched, and with a worker killed
    while epoch 4 runs (checkpoints every 2 epochs in ``tmp_path``). Returns both results
    after checking that the kill came mid-epoch; the caller compares them."""
    wait_for_two_workers(client)
    straight = solve(data, client=client, max_epochs=6, **kwargs)
    killer = WorkerKiller(client, after=3, delay=delay)
    survived = solve(
        data, client=client, max_epochs=6, callbacks=killer,
        checkpoint_dir=tmp_path / "ck", checkpoint_every=2, **kwargs,
    )  # fmt: skip
    killer.check_mid_epoch()
    return straight, survived


def assert_same_run(straight, survived):
    """The run that lost a worker returned the untouched run's ``w`` and gaps, bit for bit."""
    assert np.array_equal(survived.w, straight.w)
    assert [r["gap"] for r in survived.history] == [r["gap"] for r in straight.history]


def assert_cluster_run_equals_in_process(on_cluster, in_process, problem, data):
    """A run on a real cluster and the same run in-process: both certified, the same epochs,
    the same ``w`` up to the sums' rounding, and the cluster run's primal what
    ``problem.evaluate`` gives at its ``w``."""
    assert on_cluster.converged and in_process.converged
    assert on_cluster.n_epochs == in_process.n_epochs
    np.testing.assert_allclose(on_cluster.w, in_process.w, rtol=1e-9, atol=1e-12)
    evaluation = problem.evaluate(on_cluster.w, data)
    assert abs(on_cluster.primal - evaluation.primal) <= 1e-10 * abs(evaluation.primal)
