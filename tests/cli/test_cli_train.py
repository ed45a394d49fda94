"""The train / evaluate / predict / demo subcommands, as a user meets them."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from daskpd import load_model, metrics
from daskpd.cli import main
from daskpd.data import write_dataset


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(21)
    d = 15
    truth = rng.standard_normal(d)

    def make(n, seed, name, n_features=d):
        X = sp.random(n, n_features, density=0.4, random_state=seed, format="csr")
        noise = 0.3 * np.random.default_rng(seed).standard_normal(n)
        y = np.where(X[:, :d] @ truth[:n_features] + noise > 0, 1.0, -1.0)
        write_dataset(X, y, root / name, rows_per_block=200)
        return root / name, X, y

    train = make(400, 1, "train.zarr")
    test = make(150, 2, "test.zarr")
    narrow = make(50, 3, "narrow.zarr", n_features=7)
    return {"root": root, "train": train, "test": test, "narrow": narrow}


def _run(capsys, *argv):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_info:  # argparse's own usage errors
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _train(stores, *extra):
    return (
        "train", stores["train"][0], "--solver", "batch", "--loss", "logistic", "--alpha",
        "1e-2", "--tol", "0", "--no-progress", "--in-process", *extra,
    )  # fmt: skip


def test_train_evaluate_predict(stores, capsys, tmp_path):
    model = tmp_path / "model.zarr"
    extra = ("--epochs", "12", "--eval-every", "1", "--test", stores["test"][0], "--out", model)
    code, out, err = _run(capsys, *_train(stores, *extra))
    assert code == 0, err
    summary = json.loads(out)
    assert summary["epochs"] == 12 and summary["stop_reason"] == "max_epochs"
    assert summary["model"] == str(model) and 0 < summary["test_auprc"] <= 1
    result = load_model(model)
    assert len(result.history) == 12 and result.history[-1]["gap"] == summary["gap"]
    assert "test_auprc" in result.history[0]

    path, X, y = stores["test"]
    scores = X @ result.w
    code, out, err = _run(capsys, "evaluate", model, path)
    assert code == 0, err
    report = json.loads(out)
    assert report["n_samples"] == 150
    assert report["auprc"] == pytest.approx(metrics.auprc(y, scores), abs=1e-12)
    assert report["roc_auc"] == pytest.approx(metrics.roc_auc(y, scores), abs=1e-12)
    assert report["error_rate"] == pytest.approx(metrics.error_rate(y, scores))
    assert report["log_loss"] == pytest.approx(metrics.log_loss(y, scores), rel=1e-12)
    assert report["auprc"] == pytest.approx(summary["test_auprc"], abs=1e-12)

    out_path = tmp_path / "scores.zarr"
    code, out, err = _run(capsys, "predict", model, path, out_path)
    assert code == 0, err
    written = zarr.open_group(str(out_path), mode="r")["scores"][:]
    np.testing.assert_allclose(written, scores, rtol=1e-12, atol=1e-12)
    code, out, err = _run(capsys, "predict", model, path, out_path)
    assert code == 2 and "already exists" in err and len(err.strip().splitlines()) == 1


def test_train_resume_through_the_cli(stores, capsys, tmp_path):
    checkpoints, first, straight = tmp_path / "ck", tmp_path / "a.zarr", tmp_path / "b.zarr"
    assert _run(capsys, *_train(stores, "--epochs", "3", "--checkpoint-dir", checkpoints))[0] == 0
    resume = _train(stores, "--epochs", "7", "--checkpoint-dir", checkpoints, "--resume")
    code, _, err = _run(capsys, *resume, "--out", first)
    assert code == 0, err
    assert _run(capsys, *_train(stores, "--epochs", "7", "--out", straight))[0] == 0
    assert np.array_equal(load_model(first).w, load_model(straight).w)


def test_regression_metrics(stores, capsys, tmp_path):
    path, X, y = stores["train"]
    target = X @ np.arange(X.shape[1], dtype=float)
    regression = tmp_path / "reg.zarr"
    write_dataset(X, target, regression, rows_per_block=200)
    model = tmp_path / "ridge.zarr"
    code, _, err = _run(
        capsys, "train", regression, "--solver", "batch", "--loss", "squared", "--alpha", "1e-4",
        "--epochs", "50", "--no-progress", "--in-process", "--out", model,
    )  # fmt: skip
    assert code == 0, err
    code, out, _ = _run(capsys, "evaluate", model, regression)
    report = json.loads(out)
    assert set(report) >= {"rmse", "mae"} and "auprc" not in report
    w = load_model(model).w
    assert report["rmse"] == pytest.approx(np.sqrt(np.mean((X @ w - target) ** 2)), rel=1e-12)


@pytest.mark.parametrize(
    "argv, message",
    [
        (("train", "/nonexistent/data.zarr"), "does not exist"),
        (("train", "{train}", "--alpha", "-1"), "alpha must be finite and > 0"),
        (("train", "{train}", "--alpha", "x"), "--alpha must be a number"),
        (("train", "{train}", "--epochs", "0"), "--epochs must be >= 1"),
        (("train", "{train}", "--eval-every", "0"), "--eval-every must be an integer >= 1 or"),
        (("train", "{train}", "--eval-every", "often"), "--eval-every must be an integer >= 1"),
        (("train", "{train}", "--solver", "nope"), "unknown solver 'nope'; valid solvers:"),
        (("train", "{train}", "--solver", "batch", "--option", "bogus=1"), "unknown option"),
        (("train", "{train}", "--solver", "batch", "--option", "novalue"), "NAME=VALUE"),
        (("train", "{train}", "--solver", "batch", "--grid", "2"), "--grid does not apply"),
        (("train", "{train}", "--resume"), "--resume needs --checkpoint-dir"),
        (("train", "{train}", "--test", "{narrow}"), "--test has 7 features but DATA has 15"),
        (("train", "{train}", "--class-weight", "lots"), "--class-weight must be"),
        (("train", "{train}", "--loss", "nosuchloss", "--in-process"), "nosuchloss"),
        (("train", "{train}", "--out", "/nonexistent/dir/m.zarr"), "does not exist"),
        (("train", "{train}", "--in-process", "--workers", "2"), "--in-process cannot"),
        (("train", "{train}", "--workers", "0"), "--workers must be >= 1"),
        (("train", "{train}", "--threads-per-worker", "0"), "--threads-per-worker must be >= 1"),
        (("train", "{train}", "--in-process", "--threads-per-worker", "2"), "--in-process cannot"),
        (("ingest", "{root}/a.svm", "{root}/i.zarr", "--workers", "0"), "--workers must be >= 1"),
        (("evaluate", "/nonexistent/model.zarr", "{train}"), "no model at"),
        (("evaluate", "{train}", "{train}"), "is not a daskpd model"),
        (("predict", "/nonexistent/model.zarr", "{train}", "{root}/s.zarr"), "no model at"),
        (("train", "{train}", "--solver", "spdc", "--option", "batch_size=x"), "batch_size=x: "),
        # checked before the cluster starts (whose dashboard line would come first)
        (("train", "{train}", "--solver", "gsfw", "--loss", "hinge"), "needs a smooth loss"),
        (("ingest", "{root}/a.svm", "{root}/no/such/dir/i.zarr"), "no/such/dir' does not exist"),
        (("ingest", "{root}/a.svm", "{train}"), "already exists (pass --overwrite"),
        (
            ("generate", "classification", "{root}/no/such/dir/g.zarr", "--n-samples", "20"),
            "no/such/dir' does not exist",
        ),
        (("generate", "regression", "{train}", "--n-samples", "20"), "already exists"),
    ],
)
def test_user_mistakes_are_one_line_exit_2(stores, capsys, argv, message):
    values = {"train": stores["train"][0], "narrow": stores["narrow"][0], "root": stores["root"]}
    argv = [str(a).format(**values) for a in argv]
    code, out, err = _run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2
    assert len(lines) == 1, err
    assert message in lines[0]


def test_eval_every_auto(stores, capsys, tmp_path):
    model = tmp_path / "m.zarr"
    code, _, err = _run(
        capsys, *_train(stores, "--epochs", "5", "--eval-every", "auto"), "--out", model
    )
    assert code == 0, err
    history = load_model(model).history
    epochs = [row["epoch"] for row in history]
    # the last epoch is always evaluated; the others as the time rule allows (by time, so
    # which ones depends on the machine): full evaluations are at most the 5 epochs
    assert epochs[-1] == 5 and epochs == sorted(set(epochs)) and len(epochs) <= 5
    assert history[-1]["eval_seconds"] <= history[-1]["wall_seconds"]


def test_feature_mismatch_at_evaluate(stores, capsys, tmp_path):
    model = tmp_path / "m.zarr"
    assert _run(capsys, *_train(stores, "--epochs", "2", "--out", model))[0] == 0
    code, _, err = _run(capsys, "evaluate", model, stores["narrow"][0])
    assert code == 2 and "DATA has 7 features but the model has 15" in err


def test_help_of_each_subcommand(capsys):
    from daskpd.cli._options import SUBCOMMANDS

    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    top = capsys.readouterr().out
    assert set(SUBCOMMANDS) >= {"ingest", "generate", "partition", "train", "evaluate"}
    for name in SUBCOMMANDS:
        assert name in top
        with pytest.raises(SystemExit) as exit_info:
            main([name, "--help"])
        assert exit_info.value.code == 0
        assert "usage: daskpd " + name in capsys.readouterr().out


def test_mistyped_destination_creates_no_directories(capsys, tmp_path):
    source = tmp_path / "a.svm"
    source.write_text("1 1:0.5\n-1 2:1\n")
    for argv in (
        ("ingest", source, tmp_path / "typo" / "deeper" / "i.zarr"),
        ("generate", "classification", tmp_path / "typo" / "g.zarr", "--n-samples", "20"),
    ):
        code, _, err = _run(capsys, *argv)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "typo").exists()


def test_operating_system_errors_print_their_text_not_errno():
    from daskpd.cli._options import _one_line

    error = NotADirectoryError(20, "Not a directory", "data/file.txt/out.zarr")
    assert _one_line(error) == "data/file.txt/out.zarr: Not a directory"
    assert _one_line(PermissionError(13, "Permission denied")) == "Permission denied"
    assert _one_line(FileNotFoundError("no dataset at x")) == "no dataset at x"
    assert _one_line(ValueError("first line\n  second line")) == "first line second line"


@pytest.mark.cluster
def test_demo_trains_the_default_and_dso_beside_it(local_cluster, capsys, tmp_path):
    code, out, err = _run(
        capsys, "demo", "--n-samples", "3000", "--dso-epochs", "3", "--no-progress",
        "--scheduler", local_cluster.scheduler.address, "--dir", tmp_path / "demo",
    )  # fmt: skip
    assert code == 0, err
    assert "Dask dashboard:" in err
    lines = out.strip().splitlines()
    # what `daskpd train` runs by default (solver auto: CoCoA+ for the hinge loss and L2),
    # certified within the demo's tol (1e-4) before its epoch budget
    head = re.fullmatch(
        r"cocoa \(the default: solver auto\): (\d+) epochs? in [\d.]+ s \(tol\)", lines[0]
    )
    assert head, lines[0]
    n_epochs = int(head.group(1))
    auprc = float(lines[1].split()[-1])
    gap = float(lines[2].split()[2])
    primal = float(lines[2].split("primal ")[1].split(",")[0])
    assert 0.3 < auprc <= 1.0
    assert 0 <= gap <= 1e-4 and gap <= 0.01 * primal
    # Where the time went, in seconds that add up: the training's wall time and its parts.
    assert lines[3] == "where the time went:"
    beside = lines.index("beside it, DSO (the DSO paper's method) on the same data:")
    seconds = {line[:18].strip(): float(line[18:].split()[0]) for line in lines[4:beside]}
    assert set(seconds) == {"data generation", "cluster connect", "kernels", "training", "init",
                            "epochs", "evaluation", "other"}  # fmt: skip
    parts = seconds["init"] + seconds["epochs"] + seconds["evaluation"] + seconds["other"]
    assert parts == pytest.approx(seconds["training"], abs=0.3)  # each rounded to 0.1 s
    assert f"of {n_epochs} epochs" in lines[beside - 2]
    assert not (tmp_path / "demo" / "warm.zarr").exists()
    # DSO on the same data, with its cost: epochs, seconds, its certified gap
    dso = lines[beside + 1 :]
    match = re.fullmatch(
        r"  dso, grid 2x2: (\d+) epochs? in ([\d.]+) s \((tol|max_epochs)\)", dso[0]
    )
    assert match, dso[0]
    assert int(match.group(1)) <= 3
    assert 0.3 < float(dso[1].split()[-1]) <= 1.0
    dso_gap = float(dso[2].split()[2])
    dso_primal = float(dso[2].split("primal ")[1].split(",")[0])
    assert 0 <= dso_gap and dso_primal == pytest.approx(primal, abs=gap + dso_gap)
    assert dso[3].startswith("  its start, the dual solver's rounds")
    assert dso[4].startswith("  cost: ") and "x the default's training time" in dso[4]
    assert "tiled layout" in dso[5]
    # the model kept is the default's
    model = load_model(tmp_path / "demo" / "model.zarr")
    assert model.solver == "cocoa" and model.history[-1]["test_auprc"] == pytest.approx(auprc, 1e-3)


def _flip_a_byte_in_each_chunk(array_dir):
    chunks = [p for p in array_dir.rglob("*") if p.is_file() and p.name != "zarr.json"]
    assert chunks
    for chunk in chunks:
        raw = bytearray(chunk.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        chunk.write_bytes(bytes(raw))


def test_damaged_inputs_are_one_line_errors(stores, capsys, tmp_path):
    import shutil

    model = tmp_path / "m.zarr"
    assert _run(capsys, *_train(stores, "--epochs", "2", "--out", model))[0] == 0
    _flip_a_byte_in_each_chunk(model / "w")
    code, _, err = _run(capsys, "evaluate", model, stores["test"][0])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "array 'w'" in err

    damaged = tmp_path / "damaged.zarr"
    shutil.copytree(stores["train"][0], damaged)
    _flip_a_byte_in_each_chunk(damaged / "indices")
    code, _, err = _run(capsys, "train", damaged, "--solver", "batch", "--loss", "logistic",
                        "--epochs", "2", "--no-progress", "--in-process")  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1 and "indices" in err
