"""Checkpoints, resume (bit for bit), crash safety of checkpoint writes, model save/load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import dask
import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.checkpoint import CheckpointStore, atomic_group
from daskpd.data import MemoryDataset
from daskpd.model_file import load_model, save_model
from daskpd.solvers import solve


@pytest.fixture(autouse=True)
def _in_process():
    """Run in this process even when an earlier test left a distributed client active."""
    with dask.config.set(scheduler="threads"):
        yield


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = sp.random(200, 16, density=0.4, random_state=7, format="csr")
    y = np.where(X @ rng.standard_normal(16) > 0, 1.0, -1.0)
    return MemoryDataset(X, y, rows_per_block=60)


BATCH = {"loss": "logistic", "alpha": 1e-2, "solver": "batch", "tol": 0.0, "eval_every": 2}


class _Crash(Exception):
    """Stands for the process dying after a given epoch."""


def _crash_after(epoch):
    def callback(info):
        if info.epoch == epoch:
            raise _Crash(epoch)

    return callback


CLOCKS = ("seconds", "wall_seconds", "eval_seconds")


def _assert_same_run(a, b):
    assert np.array_equal(a.w, b.w)
    assert a.n_epochs == b.n_epochs
    strip = [{k: v for k, v in row.items() if k not in CLOCKS} for row in a.history]
    assert strip == [{k: v for k, v in row.items() if k not in CLOCKS} for row in b.history]


def test_resume_after_crash_is_bit_identical(data, tmp_path):
    straight = solve(data, max_epochs=11, **BATCH)
    with pytest.raises(_Crash):
        solve(
            data, max_epochs=11, checkpoint_dir=tmp_path, checkpoint_every=3,
            callbacks=_crash_after(8), **BATCH,
        )  # fmt: skip
    assert CheckpointStore(tmp_path).latest_epoch() == 6
    resumed = solve(data, max_epochs=11, checkpoint_dir=tmp_path, resume=True, **BATCH)
    _assert_same_run(straight, resumed)


def test_resume_continues_the_clocks(data, tmp_path):
    with pytest.raises(_Crash):
        solve(
            data, max_epochs=8, checkpoint_dir=tmp_path, checkpoint_every=3,
            callbacks=_crash_after(5), **BATCH,
        )  # fmt: skip
    saved = CheckpointStore(tmp_path).latest().meta
    assert saved["wall_seconds"] >= saved["seconds"] + saved["eval_seconds"] > 0
    resumed = solve(data, max_epochs=8, checkpoint_dir=tmp_path, resume=True, **BATCH)
    # The rows before the checkpoint come back as they were; the later ones count on.
    assert list(resumed.history[:1]) == saved["history"]
    later = resumed.history[1]
    assert later["epoch"] == 4
    for clock in CLOCKS:
        assert later[clock] > saved[clock]
    # The result's timings are of this call only.
    this_call = resumed.history[-1]["eval_seconds"] - saved["eval_seconds"]
    assert resumed.timings["evaluation"] == pytest.approx(this_call, rel=1e-9)
    assert resumed.timings["checkpoint"] > 0


def test_resume_extends_a_finished_run(data, tmp_path):
    straight = solve(data, max_epochs=9, **BATCH)
    first = solve(data, max_epochs=4, checkpoint_dir=tmp_path, checkpoint_every=10, **BATCH)
    # The final epoch is always checkpointed, whatever checkpoint_every says.
    assert first.n_epochs == 4 and CheckpointStore(tmp_path).latest_epoch() == 4
    longer = solve(data, max_epochs=9, checkpoint_dir=tmp_path, resume=True, **BATCH)
    _assert_same_run(straight, longer)
    # Resuming a finished run evaluates and returns it unchanged.
    again = solve(data, max_epochs=9, checkpoint_dir=tmp_path, resume=True, **BATCH)
    assert np.array_equal(again.w, straight.w) and again.n_epochs == 9
    assert [row["epoch"] for row in again.history] == [2, 4, 6, 8, 9]


def test_resume_without_checkpoint_starts_fresh(data, tmp_path):
    straight = solve(data, max_epochs=3, **BATCH)
    fresh = solve(data, max_epochs=3, checkpoint_dir=tmp_path / "new", resume=True, **BATCH)
    _assert_same_run(straight, fresh)


def test_random_seed_none_resumes_with_the_saved_entropy(data, tmp_path):
    options = {**BATCH, "random_state": None}
    with pytest.raises(_Crash):
        solve(data, max_epochs=6, checkpoint_dir=tmp_path, callbacks=_crash_after(3), **options)
    resumed = solve(data, max_epochs=6, checkpoint_dir=tmp_path, resume=True, **options)
    saved = CheckpointStore(tmp_path).latest()
    assert resumed.seed_entropy == saved.seed_state["entropy"]
    again = solve(data, max_epochs=6, **{**BATCH, "random_state": resumed.seed_entropy})
    assert np.array_equal(again.w, resumed.w)


def test_resume_refuses_a_different_run(data, tmp_path):
    solve(data, max_epochs=2, checkpoint_dir=tmp_path, **BATCH)
    with pytest.raises(ValueError, match=r"already holds a checkpoint \(epoch 2\); pass resume"):
        solve(data, max_epochs=4, checkpoint_dir=tmp_path, **BATCH)
    with pytest.raises(ValueError, match=r"different run \(objective.alpha: checkpoint 0.01"):
        solve(data, max_epochs=4, checkpoint_dir=tmp_path, resume=True, **{**BATCH, "alpha": 0.1})
    with pytest.raises(ValueError, match="options.power_iterations"):
        solve(data, max_epochs=4, checkpoint_dir=tmp_path, resume=True, power_iterations=3, **BATCH)
    other = MemoryDataset(data.read_rows(0, 150)[0], data.y_rows(0, 150))
    with pytest.raises(ValueError, match="data shape"):
        solve(other, max_epochs=4, checkpoint_dir=tmp_path, resume=True, **BATCH)


@pytest.mark.parametrize("init", ["zero", "dcd"])
def test_dso_resume_is_bit_identical(data, tmp_path, init):
    # with "dcd" the default steps depend on the start, which a resume must remember
    dso = {"loss": "hinge", "alpha": 1e-2, "solver": "dso", "grid": 2, "tol": 0.0, "init": init}
    dso["eval_every"] = 1  # the same evaluated epochs in both runs
    straight = solve(data, max_epochs=6, **dso)
    with pytest.raises(_Crash):
        solve(
            data, max_epochs=6, checkpoint_dir=tmp_path, checkpoint_every=2,
            callbacks=_crash_after(5), **dso,
        )  # fmt: skip
    assert CheckpointStore(tmp_path).latest_epoch() == 4
    resumed = solve(data, max_epochs=6, checkpoint_dir=tmp_path, resume=True, **dso)
    _assert_same_run(straight, resumed)


# --------------------------------------------------------------------------------------------
# crash safety of the writes


def test_failed_checkpoint_write_leaves_previous_valid(tmp_path):
    store = CheckpointStore(tmp_path)
    seed = np.random.SeedSequence(5)
    store.save(1, {"w": np.arange(4.0)}, seed=seed, meta={"history": []})

    class Unwritable:
        def __array__(self, dtype=None, copy=None):
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        store.save(2, {"w": np.ones(4), "z": Unwritable()}, seed=seed, meta={})
    latest = store.latest()
    assert latest.epoch == 1 and np.array_equal(latest.arrays["w"], np.arange(4.0))
    assert sorted(os.listdir(tmp_path)) == ["epoch-00000001.zarr"]


_WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from daskpd.checkpoint import CheckpointStore
    store = CheckpointStore(sys.argv[1])
    seed = np.random.SeedSequence(5)
    store.save(1, {"w": np.arange(4.0)}, seed=seed, meta={"history": []})
    print("saved", flush=True)
    big = {f"a{k}": np.random.default_rng(k).random(4_000_000) for k in range(40)}
    store.save(2, big, seed=seed, meta={"history": []})
    print("finished", flush=True)
    """
)


@pytest.mark.long  # a killed training process: CI's second call (-m long)
def test_killed_during_checkpoint_leaves_previous_valid(tmp_path):
    directory = tmp_path / "ck"
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(directory)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline().strip() == "saved"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(".tmp-" in name for name in os.listdir(directory)):
                break
            time.sleep(0.01)
        else:
            pytest.fail("the second checkpoint never started")
        time.sleep(0.3)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    names = os.listdir(directory)
    assert any(".tmp-" in name for name in names), names
    store = CheckpointStore(directory)
    latest = store.latest()
    assert latest.epoch == 1 and np.array_equal(latest.arrays["w"], np.arange(4.0))
    # The next write removes the debris of the killed one.
    store.save(2, {"w": np.ones(4)}, seed=np.random.SeedSequence(5), meta={})
    assert sorted(os.listdir(directory)) == ["epoch-00000001.zarr", "epoch-00000002.zarr"]


def test_store_keeps_the_last_two(tmp_path):
    store = CheckpointStore(tmp_path)
    for epoch in range(1, 6):
        store.save(epoch, {"w": np.full(3, float(epoch))}, seed=np.random.SeedSequence(0), meta={})
    assert sorted(os.listdir(tmp_path)) == ["epoch-00000004.zarr", "epoch-00000005.zarr"]
    assert store.latest().arrays["w"][0] == 5.0


def test_checkpoint_dir_errors(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        CheckpointStore(tmp_path / "file")
    with pytest.raises(FileNotFoundError, match="its parent does not exist"):
        CheckpointStore(tmp_path / "missing" / "ck")


# --------------------------------------------------------------------------------------------
# models


def test_model_round_trip(data, tmp_path):
    X, y = data.read_rows(0, data.n_samples)
    result = solve(data, max_epochs=5, test_data=(X, y), **BATCH)
    path = save_model(result, tmp_path / "model.zarr")
    loaded = load_model(path)
    assert np.array_equal(loaded.w, result.w)
    assert loaded.history == result.history
    assert loaded.options == result.options
    assert (loaded.n_epochs, loaded.gap, loaded.solver) == (5, result.gap, "batch")
    assert loaded.objective == result.objective
    assert loaded.seed_entropy == result.seed_entropy
    with pytest.raises(FileExistsError):
        save_model(result, path)
    better = solve(data, max_epochs=9, **BATCH)
    result_path = better.save(path, overwrite=True)
    assert np.array_equal(load_model(result_path).w, better.w)
    assert sorted(os.listdir(tmp_path)) == ["model.zarr"]


def test_failed_model_overwrite_keeps_the_old_model(data, tmp_path):
    result = solve(data, max_epochs=2, **BATCH)
    path = save_model(result, tmp_path / "model.zarr")
    with pytest.raises(RuntimeError, match="interrupted"):
        with atomic_group(path, overwrite=True) as group:
            group.create_array("w", data=np.zeros(3))
            raise RuntimeError("interrupted")
    assert np.array_equal(load_model(path).w, result.w)
    assert sorted(os.listdir(tmp_path)) == ["model.zarr"]


def test_load_model_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model at"):
        load_model(tmp_path / "absent.zarr")
    with atomic_group(tmp_path / "other.zarr") as group:
        group.attrs["format"] = "something-else"
    with pytest.raises(ValueError, match="is not a daskpd model"):
        load_model(tmp_path / "other.zarr")


def _damage_chunks(array_dir):
    chunks = [p for p in array_dir.rglob("*") if p.is_file() and p.name != "zarr.json"]
    assert chunks, f"no chunk files under {array_dir}"
    for chunk in chunks:
        raw = bytearray(chunk.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        chunk.write_bytes(bytes(raw))


def test_damaged_latest_checkpoint_falls_back_to_the_previous(data, tmp_path):
    straight = solve(data, max_epochs=8, **BATCH)
    solve(data, max_epochs=5, checkpoint_dir=tmp_path, checkpoint_every=2, **BATCH)
    store = CheckpointStore(tmp_path)
    assert store.latest().epoch == 5
    _damage_chunks(tmp_path / "epoch-00000005.zarr" / "state" / "x")
    assert store.latest().epoch == 4
    resumed = solve(data, max_epochs=8, checkpoint_dir=tmp_path, resume=True, **BATCH)
    _assert_same_run(straight, resumed)


def test_damaged_model_is_detected(data, tmp_path):
    from daskpd.checkpoint import CorruptStoreError

    path = save_model(solve(data, max_epochs=2, **BATCH), tmp_path / "model.zarr")
    _damage_chunks(path / "w")
    with pytest.raises(CorruptStoreError, match=r"array 'w' (does not match its checksum|cannot)"):
        load_model(path)
