"""``pipelines/cost_model_dual_newton.py``: the rounds of ``solver="dual_newton"`` told apart
by kind on an in-process run, adding up to the solver's own counters, and the model's terms
by hand. (The namespace cluster the ``dn-netns`` part runs on is tested in
``tests/cluster/test_netns_cluster.py``.)"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from _synthetic import sparse_problem

from daskpd.data import MemoryDataset
from daskpd.problem import Problem
from daskpd.solvers.dual_newton import DualNewton, DualNewtonOptions

PIPELINES = os.path.join(os.path.dirname(__file__), "..", "..", "pipelines")


@pytest.fixture
def dn(monkeypatch):
    """The pipeline module (it imports tron's beside it)."""
    monkeypatch.syspath_prepend(PIPELINES)
    import cost_model_dual_newton

    return cost_model_dual_newton


def _clocked(dn, X, y, alpha, epochs, **options):
    """``epochs`` Newton steps under the clock (in-process): its rows, the solver's counters,
    the seconds of the whole."""
    data = MemoryDataset(X, y)
    method = DualNewton()
    tick = time.perf_counter()
    with dn.GraphClock() as clock:
        state = method.init(
            Problem("hinge", "l2", alpha), data, seed=np.random.SeedSequence(0), client=None,
            options=DualNewtonOptions(**options),
        )  # fmt: skip
        for epoch in range(1, epochs + 1):
            state = method.run_epoch(state, epoch)
    return clock.rounds(), method.counters(state), time.perf_counter() - tick


def _check_rows(dn, rows, counters, nnz, seconds):
    """What every run's rounds must hold, whatever their kinds."""
    graphs, rounds = dn.classify(rows)
    assert sum(rounds.values()) == counters["rounds"]
    for kind in ("cg", "line", "refused", "home", "pass", "shorter", "gradient"):
        assert rounds[kind] == dn.SOLVER_ROUNDS[kind] * graphs[kind]
    # a cold start: the local passes' image round and the gradient round
    assert rows[0]["kind"] == "start" and rows[0]["solver_rounds"] == 2 and graphs["start"] == 1
    dn.check_counters(rows, counters, nnz)
    for k, row in enumerate(rows):
        assert row["read"] > 0
        assert (row["home_read"] > 0) == (row["kind"] == "home")
        assert (row["cg_steps"] >= 1) == (row["kind"] == "home")
        if row["kind"] == "cg":
            # a CG round reads its free rows twice (X_F u, then X_F^T): at most two passes
            assert 0 < row["read"] <= 2 * nnz and 0 < row["columns"] <= 60
        # a refused t = 1 is followed by shorter steps, then the gradient round at the
        # accepted one; the new point's free rows are read where a gradient round's result
        # is, not after a refused t = 1
        if row["kind"] == "refused":
            assert rows[k + 1]["kind"] == "shorter" and row["free_nnz"] is None
        if row["kind"] == "shorter":
            assert rows[k - 1]["kind"] in ("refused", "shorter")
            assert rows[k + 1]["kind"] in ("shorter", "gradient")
        if row["kind"] in ("start", "line", "home", "pass", "gradient"):
            assert row["free_nnz"] is not None
    assert 0 < sum(r["seconds"] for r in rows) <= seconds
    return graphs


def test_every_kind_of_round_and_they_add_up_to_the_counters(dn):
    from daskpd.solvers.dual_newton import _solver

    saved = (_solver._run, _solver.value, _solver._cg_numbers)
    # more rows than features: early Newton steps free many rows (CG rounds), later ones
    # few (a Newton step on the home); burst < 1 makes every second epoch a local pass
    X, y = sparse_problem(n=400, d=60, seed=1)
    rows, counters, seconds = _clocked(dn, X, y, 1e-2, 6, grid=2, home_cg_nnz=1500, burst=0.5)
    assert (_solver._run, _solver.value, _solver._cg_numbers) == saved  # restored
    graphs = _check_rows(dn, rows, counters, X.nnz, seconds)
    assert all(graphs[kind] > 0 for kind in ("start", "cg", "line", "home", "pass")), graphs
    # six epochs: each one line, home or pass graph (no step refused t = 1 here)
    assert graphs["line"] + graphs["home"] + graphs["pass"] == 6
    assert graphs["refused"] == graphs["shorter"] == graphs["gradient"] == 0
    # with every CG step a round, some Newton steps refuse t = 1: shorter steps, then the
    # gradient round at the accepted one (the reads of a refused step's gradient round are
    # not read by the driver: only the rounds are checked then)
    rows, counters, seconds = _clocked(dn, X, y, 1e-2, 6, grid=2, home_cg_nnz=0, burst=0.5)
    graphs = _check_rows(dn, rows, counters, X.nnz, seconds)
    assert graphs["shorter"] > 0 and graphs["gradient"] == graphs["refused"] > 0
    assert graphs["home"] == 0 and graphs["line"] + graphs["refused"] + graphs["pass"] == 6


def test_without_refused_steps_the_reads_are_the_counters_passes(dn):
    # more features than rows: every t = 1 accepted; the reads add up to the passes
    X, y = sparse_problem(n=150, d=300, seed=1)
    rows, counters, _ = _clocked(dn, X, y, 1e-3, 4, grid=3, home_cg_nnz=0, burst=0.0)
    graphs, rounds = dn.classify(rows)
    assert graphs["line"] == 4 and graphs["cg"] > 4
    assert graphs["home"] == graphs["pass"] == graphs["refused"] == graphs["shorter"] == 0
    dn.check_counters(rows, counters, X.nnz)  # rounds, and nonzeros to passes
    with pytest.raises(AssertionError, match="do not add up"):
        dn.check_counters(rows, {**counters, "rounds": counters["rounds"] + 1}, X.nnz)
    with pytest.raises(AssertionError, match="nonzeros read"):
        dn.check_counters(rows, {**counters, "passes": counters["passes"] + 0.5}, X.nnz)


def test_the_model_of_a_round_by_hand(dn):
    from daskpd.bench import costmodel_tron as ct

    rates = ct.TronRates(nnz_ns={"hessian": 8.0}, thread_exponent={},
                         fixed={"hessian": 0.03, "step": 0.04, "numbers": 0.03,
                                "gradient": 0.04}, home_ns={})  # fmt: skip
    network = ct.Network(0.0125, 1e8)
    row = {"kind": "home", "received": {"scheduler": 1e5, "w0": 3e6, "w1": 1.9e6},
           "read": 2e6, "home_read": 1e6}  # fmt: skip
    terms = dn.model_round(rates, network, row, owners=2)
    # tron's step round's fixed cost; two reductions (the free rows in, the gradient round's)
    # of one level; 5 MB at 100 MB/s; the groups' reads halved over two owners and the
    # home's in full, at 4 ns a read
    assert terms == pytest.approx(
        {"fixed": 0.04, "levels": 2 * 0.0125, "bytes": 0.05, "nonzeros": 2e6 * 4e-9}
    )
    assert dn.model_round(rates, network, {**row, "kind": "cg"}, owners=1)["levels"] == 0.0
