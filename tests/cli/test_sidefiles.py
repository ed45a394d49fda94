"""What a run or an ingestion writes on the side (parts, temporary and old names, shared
memory) goes when it fails, is interrupted or killed, and never while its owner lives."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import scipy.sparse as sp

from daskpd import _sidefiles
from daskpd.data import open_dataset, partition_dataset, write_dataset

CLI = [sys.executable, "-m", "daskpd.cli"]

#: Holds the lock of each side name given (made as a directory) until its stdin closes: a
#: live owner, in another process.
_HOLDER = textwrap.dedent(
    """
    import sys
    from daskpd import _sidefiles
    for path in sys.argv[1:]:
        _sidefiles.create_directory(path)
    print("holding", flush=True)
    sys.stdin.read()
    """
)


class _Holder:
    def __init__(self, *paths):
        self.process = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, *map(str, paths)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout.readline().strip() == "holding"

    def kill(self):
        self.process.kill()
        self.process.wait(timeout=30)

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=30)
        self.process.stdout.close()


def _svmlight(path, megabytes):
    """A one-based svmlight file of about ``megabytes`` MB (one random block repeated)."""
    rng = np.random.default_rng(7)
    lines = []
    for _ in range(1000):
        columns = np.sort(rng.choice(2000, 30, replace=False)) + 1
        values = rng.integers(1, 1000, 30) / 100
        tokens = " ".join(f"{c}:{v:g}" for c, v in zip(columns, values, strict=True))
        lines.append(f"{rng.choice([-1, 1])} {tokens}\n")
    block = "".join(lines).encode()
    with open(path, "wb") as handle:
        for _ in range(max(1, int(megabytes * 1e6) // len(block))):
            handle.write(block)
    return path


def _side_names(dest):
    return sorted(
        os.path.basename(p)
        for tag in _sidefiles.TAGS
        for p in glob.glob(f"{glob.escape(str(dest))}.{tag}-*")
    )


def _start_ingest(source, dest, **popen):
    command = [*CLI, "ingest", str(source), str(dest),
               "--chunk-bytes", str(2**16), "--range-bytes", str(2**18)]  # fmt: skip
    # Ctrl-C as a terminal delivers it: a test run started in the background by a shell
    # without job control ignores SIGINT, and its children (Python included) would inherit that
    popen.setdefault("preexec_fn", _default_sigint)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(process, condition, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the process ended before {what}: {process.stderr.read()[-2000:]!r}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} in {timeout} s")
        time.sleep(0.005)


def _parts_started(dest):
    # a part written: the ingestion is half-way through its parsing
    return lambda: bool(glob.glob(f"{glob.escape(str(dest))}.parts-*/*"))


@pytest.fixture(scope="module")
def svm_file(tmp_path_factory):
    return _svmlight(tmp_path_factory.mktemp("svm") / "big.svm", 12)


@pytest.mark.long  # a killed run: CI's second call (-m long, issue 49)
def test_killed_ingestion_leftovers_go_at_the_next_ingestion(tmp_path, svm_file):
    """``daskpd ingest`` killed (SIGKILL) half-way leaves its parts; the next ingestion to the
    same destination removes them, and leaves a live ingestion's parts alone."""
    dest = tmp_path / "out.zarr"
    process = _start_ingest(svm_file, dest)
    try:
        _wait_for(process, _parts_started(dest), "parts directory")
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    killed = _side_names(dest)
    assert any(".parts-" in name for name in killed), killed
    # another ingestion to the same destination, alive (it holds its parts' lock)
    live = tmp_path / "out.zarr.parts-live0000000"
    holder = _Holder(live)
    try:
        small = tmp_path / "small.svm"
        small.write_bytes(b"1 1:0.5\n-1 2:1\n")
        done = subprocess.run(
            [*CLI, "ingest", str(small), str(dest)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert open_dataset(dest).shape == (2, 2)
        assert _side_names(dest) == [live.name, live.name + ".lock"]
    finally:
        holder.close()
    # its owner gone (here: ended without removing it), the next one removes it too
    assert subprocess.run([*CLI, "ingest", str(small), str(dest), "--overwrite"]).returncode == 0
    assert _side_names(dest) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_ingestion_removes_what_it_wrote(tmp_path, svm_file, sig):
    """Ctrl-C (SIGINT) or SIGTERM half-way: exit 130 / 143, nothing left beside DEST."""
    dest = tmp_path / "out.zarr"
    process = _start_ingest(svm_file, dest)
    try:
        _wait_for(process, _parts_started(dest), "parts directory")
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig], err
    assert err.decode().strip().splitlines()[-1] in ("daskpd: interrupted", "daskpd: terminated")
    assert not os.path.lexists(dest)
    assert _side_names(dest) == []


def test_sweep_removes_only_dead_owners_names(tmp_path):
    """The lock rules, one by one: held (another process, or this one) stays; the lock taken
    (owner killed) goes with its lock file; a lone lock file of a dead owner goes; a name
    without a lock file goes only when unchanged for the grace period."""
    dest = tmp_path / "d.zarr"
    dead, live = tmp_path / "d.zarr.parts-dead", tmp_path / "d.zarr.tmp-live"
    killed = _Holder(dead)
    killed.kill()
    killed.close()
    holder = _Holder(live)
    try:
        mine = tmp_path / "d.zarr.old-mine"
        _sidefiles.create_directory(mine)
        lone = tmp_path / "d.zarr.tmp-lone.lock"
        lone.write_text("")
        lockless_old, lockless_new = tmp_path / "d.zarr.tmp-old", tmp_path / "d.zarr.tmp-new"
        lockless_old.mkdir(), lockless_new.mkdir()
        past = time.time() - _sidefiles.LOCKLESS_GRACE - 10
        os.utime(lockless_old, (past, past))
        other = tmp_path / "e.zarr.parts-dead"  # another destination's
        other.mkdir()
        removed = _sidefiles.sweep(dest)
        assert sorted(map(os.path.basename, removed)) == ["d.zarr.parts-dead", "d.zarr.tmp-old"]
        left = sorted(os.listdir(tmp_path))
        assert left == [
            "d.zarr.old-mine", "d.zarr.old-mine.lock", "d.zarr.tmp-live", "d.zarr.tmp-live.lock",
            "d.zarr.tmp-new", "e.zarr.parts-dead",
        ]  # fmt: skip
        _sidefiles.remove(mine)
        assert not mine.exists() and not os.path.lexists(f"{mine}.lock")
    finally:
        holder.close()


def test_shared_memory_setup_sweeps_dead_runs(tmp_path, monkeypatch):
    """A run's shared-memory setup (on the client and on each worker) removes the
    directories of dead runs, keeps a live run's, and holds the lock of the one it makes."""
    from daskpd.solvers.common import shared as _shared

    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(tmp_path))
    dead, live = tmp_path / "daskpd-dead", tmp_path / "daskpd-live"
    killed = _Holder(dead)
    killed.kill()
    killed.close()
    holder = _Holder(live)
    try:
        assert _shared.sweep_and_join("daskpd-new") is not None
        assert not dead.exists() and not os.path.lexists(f"{dead}.lock")
        assert live.is_dir() and _sidefiles.holds(tmp_path / "daskpd-new")
        # a second process of the run joins it: the lock stays with its maker
        assert _sidefiles.remove_dead(tmp_path / "daskpd-new") is False
        _shared.remove("daskpd-new")
        assert sorted(os.listdir(tmp_path)) == ["daskpd-live", "daskpd-live.lock"]
    finally:
        holder.close()


# --------------------------------------------------------------------------------------------
# a DSO training's shared memory


@pytest.fixture(scope="module")
def grid_data(tmp_path_factory):
    path = tmp_path_factory.mktemp("dso") / "d.zarr"
    X = sp.random(2000, 50, density=0.2, format="csr", random_state=0)
    y = np.where(np.random.default_rng(0).random(2000) > 0.5, 1.0, -1.0)
    write_dataset(X, y, path, rows_per_block=500)
    partition_dataset(path, 2)
    return path


def _start_dso(data, shm_root):
    # epochs enough to outlast the test; from zero (no start rounds before the shared memory)
    command = [*CLI, "train", str(data), "--solver", "dso", "--grid", "2", "--workers", "2",
               "--epochs", "100000", "--tol", "0", "--eval-every", "1000", "--no-progress",
               "--option", "init=zero"]  # fmt: skip
    environ = {**os.environ, _sidefiles.SHM_ROOT_VARIABLE: str(shm_root)}
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ,
        start_new_session=True,
    )  # fmt: skip


def _run_dirs(root):
    return sorted(p.name for p in root.glob("daskpd-*") if p.is_dir())


@pytest.mark.cluster
@pytest.mark.long  # a killed run: CI's second call (-m long, issue 49)
def test_killed_training_shared_memory_goes_at_the_next_run(tmp_path, grid_data):
    """``daskpd train --solver dso`` killed with its workers (SIGKILL to the process group)
    leaves its shared-memory directory; the next ``daskpd`` run removes it, not a live one's.
    (The root is ``$DASKPD_SHM_DIR``, which stands for ``/dev/shm``.)"""
    root = tmp_path / "shm"
    root.mkdir()
    process = _start_dso(grid_data, root)
    try:
        _wait_for(process, lambda: _run_dirs(root), "shared-memory directory")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        process.stdout.close()
        process.stderr.close()
    assert len(_run_dirs(root)) == 1  # the killed run's
    holder = _Holder(root / "daskpd-live")
    try:
        environ = {**os.environ, _sidefiles.SHM_ROOT_VARIABLE: str(root)}
        done = subprocess.run(
            [*CLI, "train", str(grid_data), "--solver", "dso", "--grid", "2", "--epochs", "1",
             "--in-process", "--no-progress"],
            capture_output=True, text=True, env=environ,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert sorted(os.listdir(root)) == ["daskpd-live", "daskpd-live.lock"]
    finally:
        holder.close()


@pytest.mark.cluster
@pytest.mark.long  # a terminated run: CI's second call (-m long, issue 49)
def test_terminated_training_removes_its_shared_memory(tmp_path, grid_data):
    """SIGTERM to ``daskpd train --solver dso``: exit 143, its shared memory removed."""
    root = tmp_path / "shm"
    root.mkdir()
    process = _start_dso(grid_data, root)
    try:
        _wait_for(process, lambda: _run_dirs(root), "shared-memory directory")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 143, err
    assert os.listdir(root) == []
