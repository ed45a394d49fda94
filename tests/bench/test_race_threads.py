"""pipelines/bench_cocoa_threads.py --peer: the race of our threads against multi-core
LIBLINEAR's, its computed lines and its run end to end on a small store."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import scipy.sparse as sp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "pipelines", "bench_cocoa_threads.py")


def _pipeline():
    spec = importlib.util.spec_from_file_location("bench_cocoa_threads", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_race_lines_are_true_medians_and_gains_from_the_rows():
    race = _pipeline()
    lines = race.race_lines(
        {
            ("ours", 1): [3.0, 1.0, 2.0],
            ("ours", 2): [1.0, 1.5, None],  # one miss of three: the median counts it as inf
            ("peer", 1): [None, None, 4.0],  # missed by most runs: no time, no gain
            ("peer", 2): [2.0, 2.0, 2.0],
        }
    )
    assert "- ours, 1 thread(s): 2 s to (1+0.001)P* (true median of 3)" in lines
    assert "- ours, 2 thread(s): 1.5 s to (1+0.001)P* (true median of 3)" in lines
    assert "- peer, 1 thread(s): line missed in 2 of 3 runs" in lines
    assert "- ours: 1 -> 2 threads 1.33x" in lines
    assert not any(line.startswith("- peer: 1 -> 2") for line in lines)


def test_the_peer_ladder_is_multicore_liblinear_on_our_objective():
    from daskpd.problem import Problem

    race = _pipeline()
    rng = np.random.default_rng(3)
    X = sp.random(300, 40, density=0.2, random_state=rng, format="csr")
    y = np.where(X @ rng.normal(size=40) + 0.1 * rng.normal(size=300) > 0, 1.0, -1.0)
    problem = Problem("hinge", "l2", 1e-2)
    rungs = race.peer_rungs(X, y, 1e-2, 2, problem)
    stopped = race.peer_rungs(X, y, 1e-2, 1, problem, bound=float("inf"))
    assert len(stopped) == 1 and stopped[0][0] == race.PEER_TOLS[0]
    assert [tol for tol, _, _ in rungs] == list(race.PEER_TOLS)
    # tighter -e, no worse a primal (to rounding), and each a real fit that took time
    primals = [primal for _, _, primal in rungs]
    assert primals[-1] <= primals[0] * (1 + 1e-9)
    assert all(seconds > 0 for _, seconds, _ in rungs)


@pytest.mark.long
def test_the_race_runs_end_to_end_and_prints_its_computed_lines(tmp_path, capsys):
    from daskpd.data import write_dataset

    rng = np.random.default_rng(4)
    X = sp.random(2000, 300, density=0.05, random_state=rng, format="csr")
    y = np.where(X @ rng.normal(size=300) > 0, 1.0, -1.0)
    write_dataset(X, y, tmp_path / "t.zarr", rows_per_block=500)
    _pipeline().main(
        [str(tmp_path / "t.zarr"), "--alpha", "1e-3", "--threads", "1,2", "--repeats", "1",
         "--rounds", "30", "--workers", "0", "--peer"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "P* = " in out and "Computed from the rows above:" in out
    assert out.count("| daskpd cocoa |") == 2 and out.count("| liblinear-mc -s 3 |") == 2
    assert "- daskpd cocoa, 1 thread(s):" in out and "- liblinear-mc -s 3, 2 thread(s):" in out
