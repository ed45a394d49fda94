"""Multiclass stores (format version 2): the task inferred or forced, the classes recorded."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from daskpd.data import FORMAT_VERSION, MemoryDataset, open_dataset, write_dataset
from daskpd.io.svmlight import SvmlightFormatError, ingest_svmlight


def _rows(n_samples=30, n_features=5, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n_samples, n_features, density=0.5, format="csr", random_state=seed)
    return X, rng


def test_three_integer_labels_make_a_multiclass_store(tmp_path):
    X, rng = _rows()
    y = np.array([0, 3, 7] * 10, dtype=np.float64)
    for layout, data in (("csr", X), ("dense", X.toarray())):
        dataset = write_dataset(data, y, tmp_path / layout, rows_per_block=7)
        assert dataset.format_version == FORMAT_VERSION == 2
        assert dataset.task == "multiclass"
        assert dataset.label_counts == {"0": 10, "3": 10, "7": 10}
        np.testing.assert_array_equal(dataset.classes, [0.0, 3.0, 7.0])
        np.testing.assert_array_equal(dataset.y, y)  # the labels are kept
        assert zarr.open_group(tmp_path / layout, mode="r").attrs["classes"] == [0, 3, 7]
        assert dataset.with_bias(1.0).classes.tolist() == [0.0, 3.0, 7.0]
    memory = MemoryDataset(X, y)
    assert memory.task == "multiclass" and memory.label_counts == {"0": 10, "3": 10, "7": 10}


@pytest.mark.parametrize(
    ("y", "task"),
    [
        (np.tile([-1.0, 1.0], 15), "binary"),
        (np.tile([0.0, 1.0], 15), "regression"),  # two values: as before, the user says
        (np.linspace(0, 1, 30), "regression"),
        (np.tile([0.0, 1.0, 2.5], 10), "regression"),
    ],
)
def test_other_labels_keep_their_task(tmp_path, y, task):
    X, _ = _rows()
    dataset = write_dataset(X, y, tmp_path / "d")
    assert dataset.task == task and dataset.classes is None


def test_the_task_can_be_forced(tmp_path):
    X, _ = _rows()
    y = np.tile([0.0, 1.0], 15)
    dataset = write_dataset(X, y, tmp_path / "two", task="multiclass")
    assert dataset.task == "multiclass" and dataset.classes.tolist() == [0.0, 1.0]
    three = np.tile([1.0, 2.0, 3.0], 10)
    assert write_dataset(X, three, tmp_path / "r", task="regression").task == "regression"
    with pytest.raises(ValueError, match="row 2 .*integer class labels"):
        write_dataset(X, np.tile([1.0, 2.0, 2.5], 10), tmp_path / "bad", task="multiclass")


def test_many_integer_values_are_not_taken_for_classes(tmp_path):
    X = sp.random(1200, 3, density=0.5, format="csr", random_state=1)
    dataset = write_dataset(X, np.arange(1200.0), tmp_path / "d")
    assert dataset.task == "regression"


def test_a_version_1_store_reads_as_before(tmp_path):
    X, _ = _rows()
    write_dataset(X, np.tile([-1.0, 1.0], 15), tmp_path / "d")
    zarr.open_group(tmp_path / "d", mode="r+").attrs["format_version"] = 1
    dataset = open_dataset(tmp_path / "d", verify=True)
    assert dataset.format_version == 1 and dataset.task == "binary"


def test_svmlight_ingestion_detects_and_forces_classes(tmp_path):
    text = "".join(f"{label} 1:{i + 1} 3:0.5\n" for i, label in enumerate([1, 2, 3, 2, 1, 3]))
    source = tmp_path / "train.svm"
    source.write_text(text)
    dataset = ingest_svmlight(source, tmp_path / "auto")
    assert dataset.task == "multiclass" and dataset.classes.tolist() == [1.0, 2.0, 3.0]
    forced = ingest_svmlight(source, tmp_path / "regression", task="regression")
    assert forced.task == "regression"
    (tmp_path / "bad.svm").write_text("1 1:1\n2.5 2:1\n")
    with pytest.raises(SvmlightFormatError, match=r"bad.svm:2: label 2.5 .*task='multiclass'"):
        ingest_svmlight(tmp_path / "bad.svm", tmp_path / "bad", task="multiclass")


def test_the_ingest_command_takes_the_task(tmp_path, capsys):
    import json

    from tests._cli import run_cli

    source = tmp_path / "ratings.svm"
    source.write_text("".join(f"{label} 1:{i + 1}\n" for i, label in enumerate([1, 2, 3, 4])))
    code, out, err = run_cli(capsys, "ingest", source, tmp_path / "auto.zarr")
    assert code == 0, err
    found = json.loads(out)
    assert found["task"] == "multiclass" and found["label_counts"] == dict.fromkeys("1234", 1)
    code, out, err = run_cli(
        capsys, "ingest", source, tmp_path / "told.zarr", "--task", "regression"
    )
    assert code == 0, err
    assert json.loads(out)["task"] == "regression"
