"""The benchmark's protocol (issue 50): "not reached" only at the budget, the timed call ends
when the user holds ``w``, every peer at its strongest, DSO's start apart, two clocks, and the
documents that quote the runs (README.md, BENCHMARKS.md)."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.bench import peer_rows, peers, readme_results, replace_readme_results
from daskpd.bench.protocol import (
    Run,
    budget_end,
    ladder_end,
    settled_end,
    start_apart,
    summarize,
    target_lines,
)
from daskpd.bench.report import README_MARKERS, table_markdown
from daskpd.bench.runners import _ladder, _Recorder, cheapest_rung
from daskpd.problem import Problem

ROOT = Path(__file__).resolve().parents[2]
INF = math.inf


def _row(name, runs, kind="peer"):
    return {
        "method": name, "kind": kind, "status": "ok", "reason": "", "runs": [],
        "summary": summarize(runs, 1.0),
    }  # fmt: skip


def _table(rows):
    return {
        "default": "daskpd cocoa", "single_worker": "daskpd cocoa, 1 worker", "workers": 2,
        "loss": "hinge", "methods": rows,
    }  # fmt: skip


# "not reached" only when the budget ran out ---------------------------------------------------


def test_a_ladder_that_ends_reads_so_and_decides_nothing_against_its_peer():
    ours = _row("daskpd cocoa", [Run(points=[(2.0, 2.0, 1.0005)], ended="the last line")], "daskpd")
    # Snap ML's ladder ran out of rungs at P = 1.01 P*: more effort was not tried
    ladder = _row("snapml", [Run(points=[(1.0, 1.0, 1.01)], ended=ladder_end(1e-6))])
    # liblinear's ladder ran out of time at the same point
    budget = _row("liblinear -s 3", [Run(points=[(9.0, 9.0, 1.01)], ended=budget_end(9))])
    lines = target_lines(_table([ours, ladder, budget]))
    by_peer = {line.split(" no slower than ")[1].split(":")[0]: line for line in lines[:3]}
    assert "**not decided**" in by_peer["Snap ML (2 threads)"]
    assert "snapml ladder ended at tol 1e-06" in by_peer["Snap ML (2 threads)"]
    assert "not reached" not in by_peer["Snap ML (2 threads)"]
    assert "**met**" in by_peer["liblinear (1 core, each of its solvers)"]
    assert "liblinear -s 3 not reached (budget 9 s)" in lines[0]
    # the table's cells say the same
    text = "\n".join(
        table_markdown(
            {**_table([ours, ladder, budget]), "metric": "auprc", "reference": {
                "source": "test", "seconds": 0.0}, "nnz": 1, "n_samples": 1, "n_features": 1,
             "n_valid": 1, "n_test": 1, "positive_rate": 0.5, "alpha": 1.0,
             "alpha_source": "fixed", "p_star": 1.0, "lines": lines},
            {},
        )
    )  # fmt: skip
    snap = next(line for line in text.splitlines() if line.startswith("| snapml |"))
    assert "ladder ended at tol 1e-06 (0/1)" in snap and "not reached" not in snap
    lib = next(line for line in text.splitlines() if line.startswith("| liblinear -s 3 |"))
    assert "not reached (budget 9 s) (0/1)" in lib


def test_the_ladder_says_what_ended_it():
    problem = Problem("hinge", "l2", 1.0)
    X, y = sp.csr_matrix(np.eye(2)), np.array([1.0, -1.0])

    def fit(seconds, w):
        return lambda **kw: peers.PeerFit("p", np.asarray(w, dtype=float), seconds)

    best = np.array([0.5, -0.5])  # the minimizer of this problem
    p_star = float(problem.evaluate(best, (X, y)).primal)
    far = np.zeros(2)
    rungs = [(1e-1, {"tol": 1e-1}), (1e-6, {"tol": 1e-6})]
    # every rung run, none below the last line, the model still moving: the ladder ended
    moving = iter([far, 0.5 * best])

    def closer(**kw):
        return peers.PeerFit("p", next(moving), 0.1)

    *_, ended = _ladder(rungs, closer, problem, (X, y), p_star, budget=5.0)
    assert ended == "ladder ended at tol 1e-06"
    # the same model at the last two rungs, above P*: it settled there
    points, _, ended = _ladder(rungs, fit(0.1, far), problem, (X, y), p_star, budget=5.0)
    excess = points[-1][2] / p_star - 1.0
    assert ended == f"settled at P/P* - 1 = {excess:.2g} (its ladder to tol 1e-06)"
    # a rung that took the budget: the budget ended it
    points, _, ended = _ladder(rungs, fit(5.0, far), problem, (X, y), p_star, budget=5.0)
    assert ended == "budget 5 s" and len(points) == 1
    # the optimum: the last line ended it, and the cheapest rung at a line is the one run
    points, _, ended = _ladder(rungs, fit(0.1, best), problem, (X, y), p_star, 5.0)
    assert ended == "the last line" and len(points) == 1
    assert cheapest_rung(rungs, points, 1.001 * p_star) == {"tol": 1e-1}
    assert cheapest_rung(rungs, [(0.1, 0.1, 2 * p_star)], 1.001 * p_star) is None


def test_a_peer_settled_above_the_line_missed_it_for_good():
    # Snap ML's logistic dual: its last rungs end at the same model, 0.9% above P*; its
    # primal reaches the line. The line is decided against both, each row named.
    ours = _row("daskpd auto", [Run(points=[(2.0, 2.0, 1.0005)], ended="the last line")], "daskpd")
    settled = _row("snapml dual", [Run(points=[(1.0, 1.0, 1.009)], ended=settled_end(1e-6, 0.009))])
    primal = _row("snapml primal", [Run(points=[(5.0, 5.0, 1.0002)], ended="the last line")])
    table = {**_table([ours, settled, primal]), "default": "daskpd auto",
             "single_worker": "daskpd auto, 1 worker", "loss": "logistic"}  # fmt: skip
    snap = next(line for line in target_lines(table) if "Snap ML" in line)
    assert "**met**" in snap
    assert "snapml dual settled at P/P* - 1 = 0.009 (its ladder to tol 1e-06)" in snap
    assert "snapml primal 5 s" in snap
    # faster than ours: not met, whatever the other row
    quick = _row("snapml primal", [Run(points=[(1.5, 1.5, 1.0002)], ended="the last line")])
    table["methods"] = [ours, settled, quick]
    assert "**not met**" in next(line for line in target_lines(table) if "Snap ML" in line)
    # a ladder that ended while its model still moved decides nothing
    moving = _row("snapml dual", [Run(points=[(1.0, 1.0, 1.009)], ended=ladder_end(1e-6))])
    table["methods"] = [ours, moving, primal]
    assert "**not decided**" in next(line for line in target_lines(table) if "Snap ML" in line)


def test_snapml_has_a_row_per_formulation_of_the_loss():
    assert peer_rows("snapml", "hinge", 2) == [("snapml", None)]
    assert peer_rows("snapml", "logistic", 2) == [("snapml dual", True), ("snapml primal", False)]
    with pytest.raises(ValueError, match="no dual=False solver for loss='hinge'"):
        peers.fit_snapml(sp.csr_matrix(np.eye(2)), np.array([1.0, -1.0]), 1.0, dual=False)


# the timed call ends when the user holds w ----------------------------------------------------


def test_a_points_time_includes_gathering_w_and_no_other_points_gather():
    from daskpd.solvers import EpochInfo, Iterate

    def fetch():
        time.sleep(0.2)  # a slow gather of w to the client
        return Iterate(w=np.ones(3))

    def info(epoch, primal, gap):
        row = {"epoch": epoch, "seconds": 0.0, "primal": primal, "gap": gap,
               "certificate_only": True}  # fmt: skip
        return EpochInfo(epoch=epoch, max_epochs=10, seconds=0.0, wall_seconds=0.0, row=row,
                         history=(), iterate=None, solver="cocoa", fetch=fetch)  # fmt: skip

    recorder = _Recorder(start=time.perf_counter(), p_star=1.0, rule_tol=1e-3, budget=1e9)
    recorder.on_epoch_end(info(1, 2.0, 1.0))  # no line, no certificate: nothing gathered
    recorder.on_epoch_end(info(2, 1.05, 1.0))  # the first point below (1 + 1e-1) P*
    recorder.on_epoch_end(info(3, 1.0005, 1e-4))  # below (1 + 1e-3) P*, and certified
    (first, *_), crossing, certified = recorder.points
    assert first < 0.2
    # the point's clock was read after its own gather ...
    assert crossing[0] >= 0.2 and certified[0] >= 0.2
    # ... and not after the earlier point's (a user who wants this model gathers one w)
    assert certified[0] < crossing[0] + 0.2
    assert recorder.chosen["wall_seconds"] == certified[0] and recorder.chosen["w"].shape == (3,)


# every peer at its strongest ------------------------------------------------------------------


def test_the_logistic_peer_offers_both_liblinear_solvers():
    assert peer_rows("liblinear", "logistic", 2) == [("liblinear -s 0", 0), ("liblinear -s 7", 7)]
    assert peer_rows("liblinear", "hinge", 2) == [("liblinear -s 3", 3)]
    assert peer_rows("liblinear-mc", "logistic", 4) == [("liblinear-mc -s 0 -m 4", None)]
    assert peer_rows("liblinear-mc", "hinge", 2) == [("liblinear-mc -s 3 -m 2", None)]
    rng = np.random.default_rng(0)
    X = sp.random(300, 40, density=0.2, random_state=rng, format="csr")
    y = np.where(X @ rng.normal(size=40) > 0, 1.0, -1.0)
    problem = Problem("logistic", "l2", 1e-2)
    primal = peers.fit_liblinear(X, y, 1e-2, loss="logistic", solver=0, tol=1e-8).coef
    dual = peers.fit_liblinear(X, y, 1e-2, loss="logistic", solver=7, tol=1e-8).coef
    p0 = problem.evaluate(primal, (X, y)).primal
    p7 = problem.evaluate(dual, (X, y)).primal
    assert p7 == pytest.approx(p0, rel=1e-6)  # the same objective, by either solver
    with pytest.raises(ValueError, match="-s 0, 7"):
        peers.fit_liblinear(X, y, 1e-2, loss="logistic", solver=3)


def test_every_tolerance_ladder_goes_down_to_1e_6():
    from daskpd.bench import runners

    for ladder in (runners.LIBLINEAR_TOLS, runners.LIBLINEAR_MC_TOLS, runners.SNAPML_TOLS,
                   runners.SAGA_TOLS):  # fmt: skip
        assert min(ladder) == 1e-6


# DSO's own epochs apart from its start --------------------------------------------------------


def test_dso_rows_split_its_start_from_its_own_epochs():
    # epoch 0 (the CoCoA+ start) ends at 3 s at 1.05 P*; DSO's epochs reach 1.0005 P* 1.5 s later
    run = Run(points=[(2.0, 2.0, 1.2, 0), (3.0, 3.0, 1.05, 0), (4.0, 4.0, 1.005, 1),
                      (4.5, 4.5, 1.0005, 2)], ended="the last line")  # fmt: skip
    start = start_apart([run], 1.0)
    assert start["seconds"] == 3.0 and start["suboptimality"] == pytest.approx(0.05)
    assert start["lines"][repr(1e-1)]["median_wall"] == 3.0
    assert start["lines"][repr(1e-2)]["median_wall"] == INF
    assert start["own_lines"][repr(1e-2)]["median_wall"] == 1.0
    assert start["own_lines"][repr(1e-3)]["median_wall"] == 1.5
    assert start_apart([Run(points=[(1.0, 1.0, 1.0, 1)])], 1.0) is None
    row = {**_row("daskpd dso", [run], "daskpd"), "kind": "daskpd"}
    table = {**_table([row]), "metric": "auprc", "reference": {"source": "t", "seconds": 0.0},
             "nnz": 1, "n_samples": 1, "n_features": 1, "n_valid": 1, "n_test": 1,
             "positive_rate": 0.5, "alpha": 1.0, "alpha_source": "fixed", "p_star": 1.0,
             "lines": []}  # fmt: skip
    text = "\n".join(table_markdown(table, {}))
    assert "| daskpd dso: its start alone (epoch 0) | ok |" in text
    assert "| daskpd dso: its own epochs, s after the start | ok |" in text


# the from-files clock -------------------------------------------------------------------------


def test_the_from_files_clock_runs_a_peers_fresh_process(tmp_path):
    from daskpd.bench import files

    rng = np.random.default_rng(0)
    X = sp.random(400, 30, density=0.3, random_state=rng, format="csr")
    y = np.where(X @ rng.normal(size=30) > 0, 1.0, -1.0)
    npz = files.peer_input(str(tmp_path), "t", X, y)
    back, labels = files.read_npz(npz)
    assert (back != X).nnz == 0 and np.array_equal(labels, y)
    seconds = files.time_peer("liblinear", npz, 1e-2, {"loss": "hinge", "tol": 1e-3})
    assert 0 < seconds < 120
    with pytest.raises(ValueError, match="no from-files run"):
        files.time_peer("vw", npz, 1e-2, {})


@pytest.mark.slow
@pytest.mark.cluster
def test_the_from_files_clock_runs_a_fresh_daskpd_train(tmp_path):
    from daskpd.bench import files
    from daskpd.data import write_dataset

    rng = np.random.default_rng(0)
    X = sp.random(400, 30, density=0.3, random_state=rng, format="csr")
    y = np.where(X @ rng.normal(size=30) > 0, 1.0, -1.0)
    train = write_dataset(X, y, tmp_path / "t.zarr", rows_per_block=100)
    settings = {"loss": "hinge", "alpha": 1e-2, "solver": "cocoa", "workers": 2,
                "memory_limit": "1GiB", "max_epochs": 50, "budget": 120, "seed": 0}  # fmt: skip
    assert 0 < files.time_daskpd(train.path, tol=1e-3, **settings) < 120
    # a certificate it cannot reach in its epochs: no time
    assert files.time_daskpd(train.path, tol=1e-300, **{**settings, "max_epochs": 1}) == INF


# the documents that quote the runs ------------------------------------------------------------

#: Paths of one machine or one past run (a work directory, a temporary file, a home).
_MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|tmp|home|root|mnt|scratch|Users)/[\w./+-]*")
#: A script run by its path (``python some/path.py``), or one of the pipelines named.
_SCRIPT = re.compile(
    r"python3?\s+(?:-\S+\s+)*((?:[\w.-]+/)*[\w.-]+\.py)\b|\b(pipelines/[\w./-]+\.py)\b"
)


@pytest.mark.parametrize("name", ["README.md", "BENCHMARKS.md"])
def test_the_documents_name_no_machine_paths_and_no_scripts_outside_the_repository(name):
    text = (ROOT / name).read_text()
    paths = sorted(set(_MACHINE_PATH.findall(text)))
    assert not paths, f"{name} names paths of one machine: {paths[:10]}"
    scripts = {run or named for run, named in _SCRIPT.findall(text)}
    missing = sorted(script for script in scripts if not (ROOT / script).exists())
    assert not missing, f"{name} names scripts that are not in the repository: {missing}"
    assert "session script" not in text, f"{name} quotes a script that is not in the repository"


def test_the_readme_results_are_one_generated_block_per_run():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Results", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"<!-- results: ([\w-]+) -->", section)
    assert names, "README.md's results have no generated block"
    outside = section
    for name in names:
        start, end = (marker.format(name=name) for marker in README_MARKERS)
        assert section.count(start) == section.count(end) == 1
        block = section.split(start, 1)[1].split(end, 1)[0]
        assert "`daskpd bench " in block, f"the results block {name} names no command"
        outside = outside.replace(block, "")
    # every number of a time in the section comes from a generated block (one run each)
    timings = re.findall(r"\b\d+(?:\.\d+)?\s?s\b", outside)
    assert not timings, f"README.md's results quote times outside the generated blocks: {timings}"


def test_the_readme_block_is_rendered_from_the_results_and_replaced_in_place(tmp_path):
    def row(name, seconds, kind="peer", from_files=math.nan):
        points = [(seconds, seconds, 1.0)] if math.isfinite(seconds) else [(1.0, 1.0, 2.0)]
        run = Run(points=points, ended=budget_end(60), from_files=from_files)
        return {"method": name, "kind": kind, "status": "ok", "reason": "",
                "summary": summarize([run], 1.0), "runs": []}  # fmt: skip

    table = {
        "nnz": 10**8, "loss": "logistic", "alpha": 1e-4, "alpha_source": "validated",
        "default": "daskpd auto",
        "methods": [
            row("daskpd auto", 4.0, "daskpd", from_files=9.0), row("liblinear -s 0", 30.0),
            row("liblinear -s 7", 6.0, from_files=8.0), row("snapml", INF),
        ],
    }  # fmt: skip
    table["workers"], table["single_worker"] = 2, "daskpd auto, 1 worker"
    table["lines"] = target_lines(table)
    config = {"dataset": "splice", "scales": [10**8], "loss": "logistic", "alpha": 1e-5,
              "alpha_grid": [], "repeats": 1, "budget": 60, "rule_tol": 1e-3, "workers": 2,
              "memory_limit": "4GiB", "peers": ["liblinear", "snapml"]}  # fmt: skip
    results = {"config": config, "tables": [table],
               "machine": {"cpus": 2, "memory_gib": 23.5, "python": "3.11", "commit": "abc1234",
                           "load_average": [6.0, 7.5]},
               "note": "Taken on a loaded machine."}  # fmt: skip
    text = readme_results(results)
    assert "`daskpd bench --dataset splice --scales 1e8 --loss logistic" in text
    assert "commit abc1234" in text and "at its end: 7.5" in text and "loaded machine" in text
    (line,) = [line for line in text.splitlines() if line.startswith("| 1e+08")]
    assert "| 4 s |" in line and "6 s (liblinear -s 7)" in line
    assert "not reached (budget 60 s)" in line  # Snap ML
    assert "9 s / 8 s (liblinear -s 7)" in line and line.endswith("**met** |")
    readme = tmp_path / "README.md"
    before = "# x\n\n## Results\n\n<!-- results: peers-logistic -->\nold\n"
    readme.write_text(before + "<!-- end results: peers-logistic -->\n\nafter\n")
    replace_readme_results(str(readme), "peers-logistic", text)
    replace_readme_results(str(readme), "peers-logistic", text)  # idempotent
    content = readme.read_text()
    assert "old" not in content and content.count(text) == 1 and content.endswith("after\n")
    with pytest.raises(ValueError, match="no '<!-- results: peers-hinge -->' marker"):
        replace_readme_results(str(readme), "peers-hinge", text)
