"""``daskpd train/evaluate/predict FILE``: svmlight and DNA sequence files straight in, their
stores cached by file and options and reused; errors as ``daskpd ingest``'s."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file, make_classification

from daskpd import _sidefiles
from daskpd.data import open_dataset
from daskpd.io import _cache
from tests._cli import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DNA = os.path.join(ROOT, "data", "statlog_dna.csv")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("DASKPD_CACHE", str(root))
    return root


@pytest.fixture
def svm_files(tmp_path):
    X, y = make_classification(240, 15, n_informative=5, random_state=0)
    X[np.abs(X) < 0.5] = 0.0
    y = 2 * y - 1
    train, test = tmp_path / "train.svm", tmp_path / "test.svm"
    dump_svmlight_file(X[:180], y[:180], str(train))
    dump_svmlight_file(X[180:], y[180:], str(test))
    return train, test


def _stores(root):
    return sorted(name for name in os.listdir(root) if name.endswith(".zarr"))


def _train(capsys, *args):
    return run_cli(capsys, "train", *args, "--alpha", "1e-2", "--in-process", "--no-progress")


def test_train_on_an_svmlight_file_then_reuse_its_store(cache, svm_files, tmp_path, capsys,
                                                        monkeypatch):  # fmt: skip
    train, test = svm_files
    model = tmp_path / "model.zarr"
    code, out, err = _train(capsys, train, "--test", test, "--out", model)
    assert code == 0, err
    first = json.loads(out)
    assert first["converged"] and "test_auprc" in first
    stores = _stores(cache)
    assert len(stores) == 2
    assert f"DATA {train}: ingested into {cache}{os.sep}train_svm-" in err
    assert f"--test {test}: ingested into {cache}{os.sep}test_svm-" in err
    # the same model as from `daskpd ingest` and the store
    run_cli(capsys, "ingest", train, tmp_path / "ingested.zarr")
    code, out, _ = _train(capsys, tmp_path / "ingested.zarr")
    assert json.loads(out)["primal"] == pytest.approx(first["primal"], rel=1e-12)

    # the second run reuses both stores: an ingestion would fail now
    def no_ingestion(*args, **kwargs):
        raise AssertionError("ingested again")

    monkeypatch.setattr("daskpd.io.svmlight.ingest_svmlight", no_ingestion)
    code, out, err = _train(capsys, train, "--test", test)
    assert code == 0, err
    assert "reusing" in err and "ingested into" not in err
    assert json.loads(out)["primal"] == first["primal"]
    # evaluate and predict take the file too (its store, made with the model's columns)
    code, out, err = run_cli(capsys, "evaluate", model, test)
    assert code == 0, err
    assert json.loads(out)["auprc"] == pytest.approx(first["test_auprc"])
    # the training file scored by its model: the store made for training has the model's
    # columns, and serves
    code, out, err = run_cli(capsys, "evaluate", model, train)
    assert code == 0 and "reusing" in err, err
    code, out, err = run_cli(capsys, "predict", model, test, tmp_path / "scores.zarr")
    assert code == 0, err
    assert json.loads(out)["n_samples"] == 60
    assert _stores(cache) == stores


def test_a_changed_file_or_changed_options_ingest_again(cache, svm_files, capsys):
    train, _ = svm_files
    assert _train(capsys, train)[0] == 0
    assert len(_stores(cache)) == 1
    # same options: reused
    assert "reusing" in _train(capsys, train)[2]
    # another ingest option: another store
    code, _, err = _train(capsys, train, "--dtype", "float32")
    assert code == 0 and "ingested into" in err
    assert len(_stores(cache)) == 2
    # the file changed (its modification time): ingested again
    info = os.stat(train)
    os.utime(train, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    code, _, err = _train(capsys, train)
    assert code == 0 and "ingested into" in err
    assert len(_stores(cache)) == 3
    # rows appended: ingested again
    with open(train, "ab") as handle:
        handle.write(b"1 1:0.5\n")
    code, _, err = _train(capsys, train)
    assert code == 0 and "ingested into" in err
    assert len(_stores(cache)) == 4


def test_a_malformed_file_is_ingest_s_one_line_error_and_leaves_nothing(cache, tmp_path, capsys):
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5 2:1\n-1 3:x\n")
    code, out, err = _train(capsys, bad)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    code_ingest, _, err_ingest = run_cli(capsys, "ingest", bad, tmp_path / "bad.zarr")
    assert code_ingest == 2
    assert err.removeprefix("daskpd train: ") == err_ingest.removeprefix("daskpd ingest: ")
    assert ":2:" in err
    assert os.listdir(cache) == []  # no store, no lock, no temporary
    assert sorted(os.listdir(tmp_path)) == ["bad.svm", "cache"]


def test_a_remote_scheduler_needs_store(cache, svm_files, capsys):
    train, _ = svm_files
    code, out, err = run_cli(capsys, "train", train, "--scheduler", "tcp://127.0.0.1:9")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--store DIR" in err
    assert not os.path.exists(cache)


@pytest.mark.cluster
def test_a_remote_scheduler_trains_on_the_store_in_store_dir(
    local_cluster, cache, svm_files, tmp_path, capsys
):
    train, test = svm_files
    shared = tmp_path / "shared"
    code, out, err = run_cli(
        capsys, "train", train, "--test", test, "--store", shared, "--alpha", "1e-2",
        "--no-progress", "--scheduler", local_cluster.scheduler.address,
        # every epoch certified, so that the stop by tol does not depend on the time a
        # check takes (the default cadence is timed: 34-41 epochs here, past 50 once in a
        # loaded run)
        "--eval-every", "1", "--epochs", "200",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["converged"], out
    assert len(_stores(shared)) == 2 and not os.path.exists(cache)


def test_store_dir_holds_the_stores(cache, svm_files, tmp_path, capsys):
    train, _ = svm_files
    stores = tmp_path / "shared"
    code, _, err = _train(capsys, train, "--store", stores)
    assert code == 0, err
    assert len(_stores(stores)) == 1 and not os.path.exists(cache)
    assert str(stores) in err


def test_file_options_without_a_file_are_refused(cache, svm_files, tmp_path, capsys):
    train, _ = svm_files
    run_cli(capsys, "ingest", train, tmp_path / "train.zarr")
    code, _, err = _train(capsys, tmp_path / "train.zarr", "--degree", "3")
    assert code == 2 and "--degree apply only to a file given as data" in err
    code, _, err = _train(capsys, train, "--degree", "3")
    assert code == 2 and "--degree do(es) not apply to --format svmlight" in err


def test_dna_sequences_straight_into_train_and_evaluate(cache, tmp_path, capsys):
    with open(DNA) as handle:
        lines = handle.readlines()[:301]  # the header and 300 windows
    dna = tmp_path / "dna.csv"
    dna.write_text("".join(lines))
    options = ["--format", "sequences", "--label-column", "class", "--positive", "ie"]
    options += ["--degree", "2"]
    model = tmp_path / "model.zarr"
    code, out, err = _train(capsys, dna, *options, "--out", model)
    assert code == 0, err
    assert "ingested into" in err
    store = open_dataset(os.path.join(cache, _stores(cache)[0]))
    assert store.n_samples == 300
    code, out, err = run_cli(capsys, "evaluate", model, dna, *options)
    assert code == 0, err
    assert "reusing" in err
    assert json.loads(out)["n_samples"] == 300


def test_concurrent_builders_make_one_store(tmp_path, svm_files):
    train, _ = svm_files
    results, errors = [], []
    barrier = threading.Barrier(3)

    def build():
        barrier.wait()
        try:
            results.append(_cache.ingest_cached(train, root=tmp_path / "stores"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len({path for _, path, _ in results}) == 1
    assert sorted(ingested for _, _, ingested in results) == [False, False, True]
    assert _stores(tmp_path / "stores") == [os.path.basename(results[0][1])]
    assert sorted(os.listdir(tmp_path / "stores")) == sorted(
        [os.path.basename(results[0][1]), os.path.basename(results[0][1])[:-5] + ".json"]
    )


def test_the_cache_is_exempt_from_side_file_clean_up(tmp_path, svm_files, monkeypatch):
    train, _ = svm_files
    root = tmp_path / "stores"
    _, path, _ = _cache.ingest_cached(train, root=root)
    # whatever sweeps the directory (a write next to a store, the shared-memory sweep with
    # the root as its directory, a lockless grace of zero) leaves the store
    monkeypatch.setattr(_sidefiles, "LOCKLESS_GRACE", 0.0)
    monkeypatch.setenv(_sidefiles.SHM_ROOT_VARIABLE, str(root))
    _sidefiles.sweep(path)
    _sidefiles.sweep_shared_memory()
    assert _sidefiles.sweep_in(root, lambda name: ".tmp-" in name or ".parts-" in name) == []
    assert os.path.isdir(path)
    assert _cache.ingest_cached(train, root=root)[2] is False


def test_a_file_changed_while_it_is_ingested_leaves_no_store(tmp_path, svm_files, monkeypatch):
    import daskpd.io.svmlight as svmlight

    train, _ = svm_files
    real = svmlight.ingest_svmlight

    def ingest_then_change(*args, **kwargs):
        dataset = real(*args, **kwargs)
        with open(train, "ab") as handle:  # another program appends while we ingested
            handle.write(b"1 2:0.5\n")
        return dataset

    monkeypatch.setattr(svmlight, "ingest_svmlight", ingest_then_change)
    with pytest.raises(ValueError, match="changed while it was being ingested"):
        _cache.ingest_cached(train, root=tmp_path / "stores")
    assert os.listdir(tmp_path / "stores") == []


def test_the_default_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("DASKPD_CACHE", str(tmp_path / "mine"))
    assert _cache.cache_root() == str(tmp_path / "mine")
    monkeypatch.delenv("DASKPD_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if os.name == "posix" and not _cache.sys.platform == "darwin":
        assert _cache.cache_root() == str(tmp_path / "xdg" / "daskpd")


_BUILDER = """
import sys
from daskpd.io._cache import ingest_cached
_, path, ingested = ingest_cached(sys.argv[1], root=sys.argv[2])
print(path, ingested)
"""


@pytest.mark.slow  # two interpreters importing daskpd (the threads' test runs always)
def test_two_processes_on_one_file_make_one_store(tmp_path, svm_files):
    """A second run while the first ingests waits for it, then reuses its store."""
    import subprocess
    import sys

    train, _ = svm_files
    root = tmp_path / "stores"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILDER, str(train), str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )  # fmt: skip
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert all(process.returncode == 0 for process in processes), outputs
    lines = sorted(out.split() for out, _ in outputs)
    assert lines[0][0] == lines[1][0] and [line[1] for line in lines] == ["False", "True"]
    assert _stores(root) == [os.path.basename(lines[0][0])]
    assert open_dataset(lines[0][0]).n_samples == 180
