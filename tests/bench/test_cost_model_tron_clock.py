"""``pipelines/cost_model_tron.py``'s round clock on an in-process tron run: the rounds it
tells apart by kind add up to the solver's own counters (the ``tron-runs`` and
``tron-netns`` parts stop on this check; the clock wraps the solver's ``_run`` and
``value``, which a refactoring of the solver can rename under it)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from _synthetic import sparse_problem

from daskpd.data import MemoryDataset
from daskpd.problem import Problem
from daskpd.solvers.tron import Tron, TronOptions

PIPELINES = os.path.join(os.path.dirname(__file__), "..", "..", "pipelines")


@pytest.mark.parametrize("grid", [1, 3])
def test_the_round_clock_counts_every_round_of_tron(monkeypatch, grid):
    monkeypatch.syspath_prepend(PIPELINES)
    import cost_model_tron

    X, y = sparse_problem(n=300, d=200, seed=4)
    method = Tron()
    with cost_model_tron.RoundClock() as clock:
        state = method.init(
            Problem("logistic", "l2", 1e-3), MemoryDataset(X, y), client=None,
            seed=np.random.SeedSequence(0), options=TronOptions(grid=grid),
        )  # fmt: skip
        for epoch in range(1, 5):
            state = method.run_epoch(state, epoch)
    rounds = clock.rounds()
    counts = cost_model_tron._counts(rounds)
    assert counts["hessian"] > 0 and counts["step"] == 4
    cost_model_tron._check_counters(counts, method.counters(state))
    assert all(seconds >= 0 for _, seconds, *_ in rounds)
