"""Bad input met by the command line: one line on stderr naming what is wrong, exit code 2.

Each case here printed a traceback, or a wrong or unreadable message, before issue 47: a
truncated compressed input to ``daskpd ingest`` (a traceback ending in ``EOFError``), a
damaged chunk read by a LocalCluster's worker (the worker's "Compute Failed" record before
the one line), a regular file given as a store ("does not exist"), labels printed as
``np.float64(0.0)``. (A solver outside the registry and a model file nested 100,000 deep are
in ``test_model_file_safety.py``; an invalid TLS file in ``test_tls.py``.)
"""

from __future__ import annotations

import bz2
import gzip
import logging
import lzma
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from _cli import run_cli
from sklearn.datasets import dump_svmlight_file

from daskpd import _worker_logging, metrics
from daskpd.data import write_dataset
from daskpd.estimators import LinearSVC

CLI = [sys.executable, "-m", "daskpd.cli"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("one-line")
    X = sp.random(300, 12, density=0.4, random_state=4, format="csr")
    y = np.where(X @ np.random.default_rng(4).standard_normal(12) > 0, 1.0, -1.0)
    write_dataset(X, y, root / "train.zarr", rows_per_block=100)
    write_dataset(X, (y > 0).astype(float), root / "zero-one.zarr", rows_per_block=100)
    dump_svmlight_file(X, y, str(root / "train.svm"))
    text = (root / "train.svm").read_bytes()
    assert len(text) > 4000
    for suffix, compress in (("gz", gzip.compress), ("bz2", bz2.compress), ("xz", lzma.compress)):
        (root / f"cut.svm.{suffix}").write_bytes(compress(text)[:-200])
    damaged = bytearray(gzip.compress(text))
    damaged[len(damaged) // 2 : len(damaged) // 2 + 8] = b"\xff" * 8
    (root / "damaged.svm.gz").write_bytes(bytes(damaged))
    sequences = b"sequence,label\n" + b"".join(b"ACGTACGTAC,1\nTTGCAACGTA,-1\n" for _ in range(400))
    (root / "cut.csv.gz").write_bytes(gzip.compress(sequences)[:-40])
    (root / "regular").write_text("not a store\n")
    return root


def _one_line(code, err):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    "name, kind",
    [
        ("cut.svm.gz", "gzip"),
        ("cut.svm.bz2", "bz2"),
        ("cut.svm.xz", "xz"),
        ("damaged.svm.gz", "gzip"),
        ("cut.csv.gz", "gzip"),
    ],
)
def test_a_truncated_or_damaged_compressed_input_is_one_line_naming_it(inputs, capsys, name, kind):
    dest = inputs / f"{name}.zarr"
    line = _one_line(*run_cli(capsys, "ingest", inputs / name, dest)[::2])
    assert line.startswith(f"daskpd ingest: error: {inputs / name}"), line
    assert f"the {kind} data ends early or is damaged" in line
    assert not dest.exists()


def test_a_regular_file_is_not_a_store(inputs, capsys):
    regular = inputs / "regular"
    for argv in (
        ("train", regular, "--in-process", "--no-progress"),
        ("info", regular),
        ("evaluate", inputs / "train.zarr", regular),
    ):
        code, _, err = run_cli(capsys, *argv)
        if argv[0] == "evaluate":
            # the model argument comes first: a store is not a model
            assert code == 2 and "is not a daskpd model" in err
            continue
        line = _one_line(code, err)
        if argv[0] == "train":
            # a file given as data is svmlight text to ingest (issue 51): its first line's
            # error, as `daskpd ingest` gives it
            assert line.startswith(f"daskpd train: error: {regular}:1: "), line
            continue
        assert f"{regular}: not a daskpd store" in line and "does not exist" not in line
    line = _one_line(*run_cli(capsys, "train", inputs / "absent.zarr", "--in-process")[::2])
    assert "does not exist" in line


def test_label_errors_print_plain_numbers(inputs, capsys):
    for loss in ("logistic", "hinge"):
        argv = ("train", inputs / "zero-one.zarr", "--loss", loss, "--in-process", "--no-progress")
        line = _one_line(*run_cli(capsys, *argv)[::2])
        assert line.endswith("needs labels in {-1, +1}, got label 0.0"), line
    with pytest.raises(ValueError, match=r"got 2\.0$"):
        metrics.auprc(np.array([2.0, 1.0]), np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match=r"only one class: 1$"):
        LinearSVC().fit(np.eye(3), np.array([1, 1, 1]))
    with pytest.raises(ValueError, match=r"labels \['5'\] that are not in"):
        LinearSVC(class_weight={np.int64(5): 1.0}).fit(np.eye(3), np.array([0, 1, 1]))


def _flip_a_byte_in_each_chunk(array_dir):
    chunks = [p for p in array_dir.rglob("*") if p.is_file() and p.name != "zarr.json"]
    assert chunks
    for chunk in chunks:
        raw = bytearray(chunk.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        chunk.write_bytes(bytes(raw))


@pytest.mark.cluster
def test_a_damaged_chunk_on_a_local_cluster_is_one_line(inputs, tmp_path):
    damaged = tmp_path / "damaged.zarr"
    shutil.copytree(inputs / "train.zarr", damaged)
    _flip_a_byte_in_each_chunk(damaged / "indices")
    argv = ["train", str(damaged), "--workers", "1", "--solver", "batch", "--loss", "logistic",
            "--epochs", "2", "--no-progress"]  # fmt: skip
    process = subprocess.run(CLI + argv, capture_output=True, text=True, timeout=180)
    lines = process.stderr.strip().splitlines()
    assert process.returncode == 2, process.stderr
    # the dashboard's line, then the error's: no worker's "Compute Failed" record between
    assert len(lines) == 2 and lines[0].startswith("Dask dashboard: "), process.stderr
    assert lines[1].startswith(f"daskpd train: error: {damaged}: reading array 'indices'")


def _record(message, *args, name="distributed.worker"):
    return logging.LogRecord(name, logging.ERROR, __file__, 1, message, args, None)


def test_the_worker_log_keeps_everything_but_reported_input_errors():
    keep = _worker_logging.ReportedByTheClient()
    failed = "Compute Failed\nKey: %s\nState: %s\nTask: %s\nException: %r\nTraceback: %r\n"
    for name in _worker_logging.INPUT_ERRORS:
        record = _record(failed, "k", "executing", "<Task>", f"{name}('/d.zarr: ...')", "tb")
        assert not keep.filter(record)
    for other in ("ValueError('x')", "ZeroDivisionError('division by zero')", "KilledWorker()"):
        assert keep.filter(_record(failed, "k", "executing", "<Task>", other, "tb"))
    cancelled = "Async instruction for <Task cancelled> ended with CancelledError"
    assert not keep.filter(_record(cancelled, name="distributed.worker.state_machine"))
    assert keep.filter(_record("Unhandled exception in async instruction for <Task>"))
    # each name is one of daskpd's errors about its input (a ValueError)
    from daskpd.data.format import DatasetIntegrityError
    from daskpd.io.sequences import SequenceFormatError
    from daskpd.io.svmlight import CompressedInputError, SvmlightFormatError
    from daskpd.model_file import CorruptStoreError

    classes = (
        DatasetIntegrityError, SequenceFormatError, CompressedInputError, SvmlightFormatError,
        CorruptStoreError,
    )  # fmt: skip
    assert {cls.__name__ for cls in classes} == _worker_logging.INPUT_ERRORS
    assert all(issubclass(cls, ValueError) for cls in classes)
