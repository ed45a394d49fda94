"""The benchmark protocol (``daskpd bench``): P*, the ladder, true medians, computed targets."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest

from daskpd.bench import BenchConfig, Run, markdown, plot, run_benchmarks, summarize
from daskpd.bench.protocol import LADDER, seconds_to, target_lines, true_median

INF = math.inf


def test_true_medians_count_every_run_and_not_reached_is_infinite():
    assert true_median([3.0, 1.0, 2.0]) == 2.0
    assert true_median([4.0, 1.0, 2.0, 3.0]) == 2.5
    # the first (slow) run is a run like the others
    assert true_median([9.0, 1.0, 1.2]) == 1.2
    # a line most runs missed is not reached, whatever the others did
    assert true_median([1.0, INF, INF]) == INF
    assert true_median([1.0, 2.0, INF]) == 2.0
    assert math.isnan(true_median([]))


def test_seconds_to_a_line_is_the_first_point_below_it_on_either_clock():
    points = [(1.0, 0.5, 2.0), (2.0, 1.0, 1.05), (3.0, 1.5, 1.0005), (4.0, 2.0, 0.99)]
    assert seconds_to(points, 1.1) == 2.0
    assert seconds_to(points, 1.1, clock=1) == 1.0
    assert seconds_to(points, 1.001) == 3.0
    assert seconds_to(points, 0.5) == INF
    # a peer's ladder: its cheapest rung below the line (a first rung slowed by warm-up)
    ladder = [(2.1, 2.1, 1.05), (1.9, 1.9, 1.005), (2.2, 2.2, 1.0001)]
    assert seconds_to(ladder, 1.1) == 1.9 and seconds_to(ladder, 1.001) == 2.2
    # a point with no primal (a peer without readable weights) reaches nothing
    assert seconds_to([(1.0, 1.0, math.nan)], 10.0) == INF


def _run(points, metric=0.5, primal=None):
    last = points[-1]
    chosen = {"rule": "r", "wall_seconds": last[0], "primal": primal or last[2], "metric": metric}
    return Run(points=list(points), chosen=chosen)


def test_summary_medians_are_the_medians_of_the_runs():
    p_star = 1.0
    # daskpd points carry their epoch: the first run was evaluated 4 epochs apart
    runs = [
        _run([(5.0, 4.0, 1.2, 1), (9.0, 8.0, 1.0005, 5)], metric=0.80),
        _run([(1.0, 0.5, 1.05, 1), (2.0, 1.0, 1.0009, 2)], metric=0.90),
        _run([(2.0, 1.5, 1.2, 1), (3.0, 2.5, 1.02, 2)], metric=0.85),
    ]
    summary = summarize(runs, p_star)
    line = summary["lines"][repr(1e-3)]
    assert line["wall"] == [9.0, 2.0, INF]
    assert line["median_wall"] == 9.0 == statistics.median([9.0, 2.0, INF])
    assert line["median_epochs"] == 8.0
    # 1.2 is above (1 + 1e-1) P*: the first run reaches that line only at its second point
    assert summary["lines"][repr(1e-1)]["wall"] == [9.0, 1.0, 3.0]
    assert summary["lines"][repr(1e-1)]["median_wall"] == 3.0
    assert summary["chosen"]["metric"] == 0.85
    assert summary["chosen"]["metrics"] == [0.80, 0.90, 0.85]
    # seconds per epoch: each run's median step of the epoch clock over its epochs (1, 0.5,
    # 1), then the median over runs; peers' ladders have no epochs
    assert summary["epoch_seconds"] == 1.0
    assert math.isnan(summarize([_run([(1.0, 1.0, 1.5), (2.0, 2.0, 1.2)])], 1.0)["epoch_seconds"])


def _row(name, wall_by_eps, status="ok", reason="", epoch_seconds=1.0, missed=("budget 30 s",)):
    lines = {
        repr(eps): {
            "median_wall": wall_by_eps.get(eps, INF),
            "missed": [] if eps in wall_by_eps else list(missed),
        }
        for eps in LADDER
    }
    summary = {"lines": lines, "epoch_seconds": epoch_seconds}
    return {"method": name, "status": status, "reason": reason, "summary": summary}


def test_target_lines_are_computed_and_turn_not_met_when_a_method_misses():
    def table(ours, single, loss="hinge"):
        return {
            "default": "daskpd cocoa",
            "single_worker": "daskpd cocoa, 1 worker",
            "workers": 2,
            "loss": loss,
            "methods": [
                _row("daskpd cocoa", ours),
                _row("daskpd cocoa, 1 worker", single),
                _row("liblinear -s 3", {1e-2: 3.0, 1e-3: 4.0}),
                _row("snapml", {1e-2: 2.0, 1e-3: 2.5}),
            ],
        }

    fast = {1e-2: 1.5, 1e-3: 2.0}
    liblinear, multicore, snapml, fastest, half, workers = target_lines(table(fast, {1e-3: 3.6}))
    assert liblinear.endswith("**met**: daskpd cocoa 2 s; liblinear -s 3 4 s")
    assert multicore.endswith("not measured: liblinear-mc was not in this run")
    assert snapml.endswith("**met**: daskpd cocoa 2 s; snapml 2.5 s")
    assert "the fastest peer" in fastest
    assert fastest.endswith("**met**: daskpd cocoa 2 s; liblinear -s 3 4 s; snapml 2.5 s "
                            "(fastest: snapml)")  # fmt: skip
    assert half.endswith("**met**: daskpd cocoa 1.5 s; liblinear -s 3 4 s (x0.5: 2 s)")
    assert workers.endswith("**met**: 1.80x (3.6 s -> 2 s)")
    # slower than the peer, or never there: not met
    slow = {1e-2: 2.5, 1e-3: 3.0}
    liblinear, _, snapml, fastest, half, workers = target_lines(table(slow, {1e-3: 4.0}))
    assert "**met**: daskpd cocoa 3 s; liblinear -s 3 4 s" in liblinear
    assert "**not met**: daskpd cocoa 3 s; snapml 2.5 s" in snapml
    assert "**not met**" in fastest
    assert "**not met**" in half and "**not met**: 1.33x" in workers
    missed = target_lines(table({}, {}))
    assert all("**not met**" in line for line in missed if "not measured" not in line)
    assert "daskpd cocoa not reached (budget 30 s); liblinear -s 3 4 s" in missed[0]
    # a peer that is missing or failed is not measured, never a ratio
    broken = table(fast, {1e-3: 3.6})
    broken["methods"][3] = _row("snapml", {}, status="failed", reason="ImportError: snapml")
    assert target_lines(broken)[2].endswith("not measured: snapml failed (ImportError: snapml)")
    # logistic tables judge SPDC too
    logistic = table(fast, {1e-3: 3.6}, loss="logistic")
    logistic["methods"] += [
        _row("daskpd spdc", {1e-3: 9.0}, epoch_seconds=2.0),
        _row("daskpd dso", {}, epoch_seconds=0.5),
    ]
    spdc_epoch, spdc_time = target_lines(logistic)[6:]
    assert spdc_epoch.endswith("**not met**: 4.00x")
    assert spdc_time.endswith("**not met**: daskpd spdc 9 s; liblinear -s 3 4 s")
    # a run of one epoch has no epoch time: not measured, never "nanx"
    logistic["methods"][-2] = _row("daskpd spdc", {}, epoch_seconds=math.nan)
    spdc_epoch = target_lines(logistic)[6]
    assert spdc_epoch.endswith("not measured: daskpd spdc timed for fewer than two epochs in a run")


def test_epoch_seconds_come_from_every_epoch_not_only_the_evaluated_ones():
    # one evaluation, at the end of a 4-epoch run: its clock still times epochs 2-4 (the
    # first holds the start); saved results without a clock fall back to the points
    evaluated_once = Run(
        points=[(12.0, 11.0, 0.5, 4)], clock=[(5.0, 1), (7.0, 2), (9.5, 3), (11.0, 4)]
    )
    assert summarize([evaluated_once], 0.4)["epoch_seconds"] == 2.0
    saved_before = Run(points=[(6.0, 5.0, 0.6, 1), (12.0, 11.0, 0.5, 4)])
    assert summarize([saved_before], 0.4)["epoch_seconds"] == 2.0
    assert math.isnan(summarize([Run(points=[(12.0, 11.0, 0.5, 4)])], 0.4)["epoch_seconds"])


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="budget must be a finite number > 0"):
        BenchConfig(budget=0)
    with pytest.raises(ValueError, match="unknown peers"):
        BenchConfig(peers=("liblinear", "sparkml"))
    with pytest.raises(ValueError, match="solvers must name registered solvers"):
        BenchConfig(solvers=("nope",))
    with pytest.raises(ValueError, match="alpha_grid"):
        BenchConfig(alpha_grid=(1e-5, 0.0))
    with pytest.raises(ValueError, match="dataset 'ridge' is regression"):
        BenchConfig(dataset="ridge")
    with pytest.raises(ValueError, match="hash_bits must be 0 or 8..30, got 4"):
        BenchConfig(hash_bits=4)


def test_methods_take_turns_within_each_repeat():
    from daskpd.bench import _methods

    calls = []

    def method(label, fail_at=None):
        def run_once(repeat):
            calls.append((label, repeat))
            if repeat == fail_at:
                raise RuntimeError("out of memory")
            return Run(points=[(1.0 + repeat, 1.0, 2.0)])

        return run_once

    entries = [
        ("daskpd auto", "daskpd", method("daskpd auto")),
        ("liblinear", "peer", method("liblinear", fail_at=1)),
        ("vw", "peer", "vw has no hinge loss"),
        ("snapml", "peer", method("snapml")),
    ]
    said = []
    rows = _methods(entries, BenchConfig(repeats=3), said.append)
    # repeat-major: every method's first run before any second run; the failed method stops
    assert calls == [
        ("daskpd auto", 0), ("liblinear", 0), ("snapml", 0),
        ("daskpd auto", 1), ("liblinear", 1), ("snapml", 1),
        ("daskpd auto", 2), ("snapml", 2),
    ]  # fmt: skip
    assert [row["method"] for row in rows] == ["daskpd auto", "liblinear", "vw", "snapml"]
    assert [len(row["runs"]) for row in rows] == [3, 0, 0, 3]
    assert rows[0]["runs"][2]["points"] == [(3.0, 1.0, 2.0)]
    assert rows[1]["status"] == "failed" and "out of memory" in rows[1]["reason"]
    assert rows[2]["status"] == "not run" and rows[2]["reason"] == "vw has no hinge loss"
    assert said == ["daskpd auto: ok", "liblinear: failed RuntimeError: out of memory",
                    "snapml: ok"]  # fmt: skip


def test_bench_cli_checks_its_markdown_section_before_measuring(tmp_path, capsys):
    from daskpd.cli import main

    target = tmp_path / "BENCHMARKS.md"
    target.write_text("<!-- section: peers -->\n<!-- end: peers -->\n")
    work = tmp_path / "work"
    argv = ["bench", "--workdir", str(work), "--markdown", str(target)]
    assert main([*argv, "--section", "ooc"]) == 2
    assert "no '<!-- section: ooc -->' marker" in capsys.readouterr().err
    assert main([*argv, "--dask-ml-iters", "5,x"]) == 2
    assert "--dask-ml-iters" in capsys.readouterr().err
    assert not work.exists(), "nothing measured or written"


@pytest.mark.cluster
@pytest.mark.long  # four LocalClusters and a peer process a rung: CI's second call (-m long)
def test_protocol_end_to_end_on_a_tiny_set(tmp_path, monkeypatch, capsys):
    """P* from the tight peer, true medians over repeats, a target line that comes out not met."""
    from daskpd.bench import peers
    from daskpd.bench.data import in_memory
    from daskpd.data import open_dataset
    from daskpd.problem import Problem

    def out_of_luck(*args, **kwargs):
        raise RuntimeError("worker exceeded 95% memory budget")

    monkeypatch.setattr(peers, "fit_sgd", out_of_luck)
    work = tmp_path / "work"
    # one epoch of the full-gradient baseline from zero: far from the optimum, so its lines are
    # not reached (DSO starts from the dual solver's certified rounds and would reach them)
    config = BenchConfig(
        scales=(4 * 10**5,), workdir=str(work), repeats=2, loss="logistic", alpha=1e-3,
        alpha_grid=(), solvers=("batch",), max_epochs=1, budget=8, memory_limit="2GiB",
        peers=("liblinear", "snapml", "sgd"), hash_bits=16, from_files=False,
    )  # fmt: skip
    results = run_benchmarks(config)
    saved = json.loads((work / "results.json").read_text())
    assert saved["config"]["scales"] == [4 * 10**5]
    (table,) = results["tables"]
    rows = {row["method"]: row for row in table["methods"]}
    # liblinear offers both of its logistic solvers, Snap ML both formulations, a row each
    assert set(rows) == {
        "daskpd batch", "daskpd batch, 1 worker", "liblinear -s 0", "liblinear -s 7",
        "snapml dual", "snapml primal", "sgd",
    }  # fmt: skip
    # P* is the primal of an independent tight liblinear solve of the same objective
    X, y = in_memory(open_dataset(str(work / "splice-4e05-h16-train.zarr")))
    assert X.shape[1] == 2**16
    tight = peers.fit_liblinear(X, y, 1e-3, loss="logistic", tol=1e-6).coef
    p_ref = float(Problem("logistic", "l2", 1e-3).evaluate(tight, (X, y)).primal)
    assert table["p_star"] == pytest.approx(p_ref, rel=1e-12)
    assert "liblinear (scikit-learn) at tol 1e-06" in table["reference"]["source"]
    # weak duality: no certified dual of daskpd's runs lies above the reference primal
    assert table["reference"]["certified_within"] >= -1e-9
    # a failing peer is a row saying why; the others ran twice each
    assert rows["sgd"]["status"] == "failed" and "RuntimeError" in rows["sgd"]["reason"]
    for name in ("daskpd batch", "liblinear -s 0", "liblinear -s 7", "snapml dual",
                 "snapml primal"):  # fmt: skip
        assert rows[name]["status"] == "ok" and len(rows[name]["runs"]) == 2
    # medians are medians of the two runs (first run included)
    for row in (rows["liblinear -s 7"], rows["daskpd batch"]):
        for eps in LADDER:
            line = row["summary"]["lines"][repr(eps)]
            assert line["median_wall"] == statistics.median(line["wall"])
    # the peers' tight rungs reach 1e-3; one baseline epoch from zero does not
    for name in ("liblinear -s 0", "liblinear -s 7"):
        assert math.isfinite(rows[name]["summary"]["lines"][repr(1e-3)]["median_wall"])
    # the baseline's one epoch is its epoch cap: it missed the lines, and not by the budget
    assert rows["daskpd batch"]["summary"]["lines"][repr(1e-3)]["median_wall"] == INF
    assert rows["daskpd batch"]["summary"]["lines"][repr(1e-3)]["missed"] == ["epoch cap 1"]
    lines = table["lines"]
    assert lines[0].startswith("daskpd batch to (1+1e-3)P* no slower than liblinear (1 core")
    assert "**not met**: daskpd batch epoch cap 1;" in lines[0]
    # the chosen models were scored on the test set
    for name in ("daskpd batch", "liblinear -s 0", "snapml dual", "snapml primal"):
        assert 0.0 <= rows[name]["summary"]["chosen"]["metric"] <= 1.0
    assert rows["daskpd batch"]["runs"][0]["chosen"]["rule"] == "budget"
    text = markdown(results, "daskpd bench --scales 4e5")
    assert "| sgd | failed: RuntimeError" in text and "**not met**" in text
    assert "| liblinear -s 7 | ok |" in text and "its default tol = 0.0001" in text
    figures = plot(results, str(tmp_path))
    assert figures and all((tmp_path / name).stat().st_size > 5000 for name in figures)
    assert np.isfinite(table["p_star"])
    # the saved results render again without measuring, with the command that measures them
    from daskpd.cli import main

    capsys.readouterr()
    argv = ["bench", "--from-results", str(work / "results.json"), "--workdir", str(tmp_path)]
    assert main(argv) == 0
    again = capsys.readouterr().out
    assert "daskpd bench --dataset splice --scales 4e5 --loss logistic" in again
    assert "| sgd | failed: RuntimeError" in again and lines[0] in again


def test_recorder_gathers_w_for_the_chosen_model_only():
    # certificate-only rows move no w; the recorder gathers it once, for the first point
    # within the rule, and a stop by the budget at an epoch without a row needs none
    from daskpd.bench.runners import _Recorder
    from daskpd.solvers import EpochInfo, Iterate

    fetched = []

    def fetch():
        fetched.append(1)
        return Iterate(w=np.full(3, float(len(fetched))))

    def info(epoch, row):
        return EpochInfo(epoch=epoch, max_epochs=10, seconds=float(epoch), wall_seconds=0.0,
                         row=row, history=(), iterate=None, solver="spdc", fetch=fetch)  # fmt: skip

    recorder = _Recorder(start=0.0, p_star=1.0, rule_tol=1e-3, budget=1e9)
    row = {"epoch": 1, "seconds": 1.0, "primal": 2.0, "gap": 1.0, "certificate_only": True}
    assert recorder.on_epoch_end(info(1, row)) is False
    assert fetched == [] and recorder.chosen is None and len(recorder.points) == 1
    row = {"epoch": 2, "seconds": 2.0, "primal": 1.5, "gap": 1e-4, "certificate_only": True}
    assert recorder.on_epoch_end(info(2, row)) is False
    assert fetched == [1] and recorder.chosen["primal"] == 1.5
    np.testing.assert_array_equal(recorder.chosen["w"], np.ones(3))
    recorder.budget = 0.0  # spent: an epoch without a row stops the run, gathering nothing
    assert recorder.on_epoch_end(info(3, None)) is True
    assert fetched == [1]


def test_recorder_lets_the_epochs_after_a_certified_start_run():
    # a start's row (epoch 0) at the last line is chosen but does not stop the run: the
    # method's own epochs are timed too; the same primal at epoch 1 stops it
    from daskpd.bench.runners import _Recorder
    from daskpd.solvers import EpochInfo, Iterate

    def info(epoch, row):
        # each epoch's model is told apart by its w (all entries = the epoch)
        return EpochInfo(epoch=epoch, max_epochs=10, seconds=float(epoch), wall_seconds=0.0,
                         row=row, history=(), iterate=None, solver="dso",
                         fetch=lambda: Iterate(w=np.full(3, float(epoch))))  # fmt: skip

    recorder = _Recorder(start=0.0, p_star=1.0, rule_tol=1e-3, budget=1e9)
    row = {"epoch": 0, "seconds": 0.5, "primal": 1.0, "gap": 1e-5, "certificate_only": True}
    assert recorder.on_epoch_end(info(0, row)) is False
    # epoch 1 is certified too, with a primal still at the last line: it stops the run, and
    # the chosen model stays the first certified one, the start's
    later = dict(row, epoch=1, seconds=1.0, primal=1.00005, certificate_only=False)
    assert recorder.on_epoch_end(info(1, later)) is True
    assert recorder.chosen["primal"] == 1.0 and np.array_equal(recorder.chosen["w"], np.zeros(3))
    # the budget still ends a run at its start
    spent = _Recorder(start=0.0, p_star=1.0, rule_tol=1e-3, budget=0.0)
    assert spent.on_epoch_end(info(0, row)) is True


@pytest.mark.cluster
def test_a_run_without_a_certified_model_reports_the_model_it_returned(tmp_path):
    # the rule never met: the chosen model is the one solve returned, evaluated at its end
    # (SPDC's rows before the last are certificates that gather no w)
    import scipy.sparse as sp

    from daskpd.bench.runners import run_daskpd
    from daskpd.data import write_dataset

    rng = np.random.default_rng(0)
    X = sp.random(400, 30, density=0.3, random_state=rng, format="csr")
    y = np.where(X @ rng.normal(size=30) > 0, 1.0, -1.0)
    train = write_dataset(X, y, tmp_path / "t.zarr", rows_per_block=100)
    config = BenchConfig(workdir=str(tmp_path), loss="logistic", max_epochs=4, budget=60,
                         rule_tol=1e-15, memory_limit="1GiB")  # fmt: skip
    # (a P* far below: no line ends the run early)
    run = run_daskpd(config, "spdc", train, (X, y), "auprc", 1e-9, 0.01, workers=2, seed=0)
    assert run.chosen["rule"] == "budget"
    assert run.points[-1][3] == 4 and run.chosen["primal"] == run.points[-1][2]
    assert 0.5 < run.chosen["metric"] <= 1.0
    # the timed call was the cluster's second: the first ran on the warm-up set, the
    # training set's first rows in a store of the same kind
    assert run.warmup_seconds > 0
    from daskpd.bench.runners import WARMUP_ROWS, warmup_set
    from daskpd.data import open_dataset

    warm = warmup_set(config, train)
    assert warm.path != train.path and warm.n_features == train.n_features
    assert warm.n_samples == min(WARMUP_ROWS, train.n_samples) and warm.binary == train.binary
    Xw, yw = warm.read_rows(0, warm.n_samples)
    Xt, yt = train.read_rows(0, warm.n_samples)
    assert (Xw != Xt).nnz == 0 and np.array_equal(yw, yt)
    # DSO reads its grid's tiled layout: the warm-up set gets the grids the training set has
    from daskpd.data import partition_dataset

    partition_dataset(train.path, grid=2)
    assert warmup_set(config, open_dataset(train.path)).grids == [2]


def test_a_failed_row_prints_no_machine_path():
    # a failure's message names files under the bench's work directory: the table keeps
    # their names, not the machine's directories
    from daskpd.bench.report import _row

    reason = (
        "ValueError: dataset /tmp/x/bw/warmup-a.zarr has no tiled layout for grid 2; run "
        "`daskpd partition /tmp/x/bw/warmup-a.zarr --grid 2` first (1/2 of the rows)"
    )
    text = _row({"method": "daskpd dso", "status": "failed", "reason": reason})
    assert "/tmp" not in text and "dataset warmup-a.zarr has no" in text
    assert "partition warmup-a.zarr --grid 2" in text and "(1/2 of the rows)" in text
