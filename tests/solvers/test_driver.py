"""The shared driver (daskpd.solve) and the batch baseline solver.

Correctness of the batch solver is checked against scikit-learn and closed forms; the driver
is checked through real runs of real solvers (the batch baseline, and a fixed-step gradient
method defined here that can be made to diverge on purpose).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import dask
import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.callbacks import EarlyStopping, HistoryRecorder, ProgressBar
from daskpd.data import MemoryDataset, write_dataset
from daskpd.metrics import auprc
from daskpd.solvers import (
    DivergenceError,
    Iterate,
    available_solvers,
    epoch_seed,
    get_solver,
    make_options,
    register_solver,
    solve,
)


@pytest.fixture(autouse=True)
def _in_process():
    """Run in this process even when an earlier test left a distributed client active."""
    with dask.config.set(scheduler="threads"):
        yield


def _classification(n=240, d=12, seed=0, density=0.5):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=seed, format="csr")
    truth = rng.standard_normal(d)
    y = np.where(X @ truth + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


@pytest.fixture(scope="module")
def problem_data():
    X, y = _classification()
    return X, y, MemoryDataset(X, y, rows_per_block=70)


# --------------------------------------------------------------------------------------------
# a deliberately simple second solver: fixed-step proximal gradient (diverges when the step
# is too long), so that the driver's divergence handling is exercised by a real iteration


@dataclass(frozen=True)
class _FixedStepOptions:
    step: float = 0.1


@dataclass(frozen=True)
class _FixedStepState:
    w: np.ndarray
    problem: object
    data: object
    step: float


def _full_gradient(problem, data, w):
    total = np.zeros_like(w)
    for i in range(data.n_row_blocks):
        X_block, y = data.block(i)
        total += X_block.T @ problem.loss.gradient(X_block @ w, y)
    return total / data.n_samples


@register_solver
class FixedStepGradient:
    """Proximal gradient with a fixed step (test solver; in-process only)."""

    name = "test-fixed-step"
    Options = _FixedStepOptions

    def check(self, problem, data, options):
        if not options.step > 0:
            raise ValueError(f"step must be > 0, got {options.step}")

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        w = np.zeros(data.n_features) if warm_start is None else warm_start.w.copy()
        return _FixedStepState(w, problem, data, options.step)

    def run_epoch(self, state, epoch):
        gradient = _full_gradient(state.problem, state.data, state.w)
        w = state.problem.regularizer.prox(
            state.w - state.step * gradient, state.step * state.problem.alpha
        )
        return _FixedStepState(w, state.problem, state.data, state.step)

    def iterate(self, state):
        return Iterate(w=state.w.copy())

    def state_arrays(self, state):
        return {"w": state.w}

    def restore(self, problem, data, arrays, *, seed, client, options):
        return _FixedStepState(np.array(arrays["w"]), problem, data, options.step)


# --------------------------------------------------------------------------------------------
# registry and options


def test_registry_lists_batch_and_rejects_unknown_names():
    assert "batch" in available_solvers()
    assert get_solver("BATCH").name == "batch"
    with pytest.raises(ValueError, match=r"unknown solver 'nope'; valid solvers: .*batch"):
        get_solver("nope")


def test_unknown_options_are_named(problem_data):
    _, _, data = problem_data
    with pytest.raises(ValueError, match=r"unknown options for solver 'batch': bogus, other"):
        solve(data, loss="logistic", solver="batch", bogus=1, other=2)
    with pytest.raises(ValueError, match="valid options: power_iterations"):
        make_options(get_solver("batch"), {"bogus": 1})
    with pytest.raises(ValueError, match="backtrack_factor must be > 1"):
        solve(data, loss="logistic", solver="batch", backtrack_factor=0.5)


def test_bad_driver_parameters_fail_before_work(problem_data):
    X, y, data = problem_data
    cases = [
        ({"max_epochs": 0}, "max_epochs must be a positive integer"),
        ({"max_epochs": -3}, "max_epochs must be a positive integer"),
        ({"eval_every": 0}, "eval_every must be a positive integer or 'auto', got 0"),
        ({"eval_every": "sometimes"}, "eval_every must be a positive integer or 'auto'"),
        ({"eval_every": 1.5}, "eval_every must be a positive integer or 'auto'"),
        ({"eval_every": True}, "eval_every must be a positive integer or 'auto'"),
        ({"tol": -1.0}, "tol must be a number >= 0"),
        ({"random_state": -1}, "random_state must be >= 0"),
        ({"random_state": np.random.default_rng(0)}, "no reproducible entropy"),
        ({"resume": True}, "resume=True needs a checkpoint_dir"),
        ({"alpha": -1.0}, "alpha must be"),
        ({"warm_start": np.zeros(3)}, r"warm_start has shape \(3,\)"),
        ({"test_data": (X[:, :5], y)}, "test_data has 5 features but the model has 12"),
        ({"loss": "hinge"}, "solver 'batch' needs a smooth loss"),
    ]
    for kwargs, message in cases:
        arguments = {"loss": "logistic", "solver": "batch", **kwargs}
        with pytest.raises(ValueError, match=message):
            solve(data, **arguments)


def test_epoch_seed_is_the_spawned_child():
    root = np.random.SeedSequence(1234)
    children = np.random.SeedSequence(1234).spawn(5)
    for epoch in (1, 3, 5):
        assert np.array_equal(
            epoch_seed(root, epoch).generate_state(4), children[epoch - 1].generate_state(4)
        )
    assert root.n_children_spawned == 0


# --------------------------------------------------------------------------------------------
# the batch solver against independent solvers


def test_batch_logistic_l2_matches_sklearn(problem_data):
    from sklearn.linear_model import LogisticRegression

    X, y, data = problem_data
    alpha = 1e-2
    result = solve(
        data, loss="logistic", regularizer="l2", alpha=alpha, solver="batch", max_epochs=300,
        tol=1e-10,
    )  # fmt: skip
    reference = LogisticRegression(
        C=1.0 / (X.shape[0] * alpha), fit_intercept=False, tol=1e-12, max_iter=10000
    ).fit(X, y)
    w_ref = reference.coef_.ravel()
    primal_ref = np.mean(np.logaddexp(0, -y * (X @ w_ref))) + alpha * 0.5 * w_ref @ w_ref
    assert result.converged and result.stop_reason == "tol"
    assert result.gap <= 1e-10
    assert abs(result.primal - primal_ref) <= 1e-9 * primal_ref
    # Strong convexity (alpha) turns the gap into a distance: |w - w*|^2 <= 2 gap / alpha.
    assert np.linalg.norm(result.w - w_ref) <= 2 * math.sqrt(2 * 1e-9 / alpha)


def test_batch_ridge_matches_closed_form(problem_data):
    X, _, _ = problem_data
    rng = np.random.default_rng(3)
    target = X @ rng.standard_normal(X.shape[1]) + 0.1 * rng.standard_normal(X.shape[0])
    data = MemoryDataset(X, target, rows_per_block=50)
    alpha = 1e-3
    n = X.shape[0]
    dense = X.toarray()
    closed = np.linalg.solve(dense.T @ dense / n + alpha * np.eye(X.shape[1]), dense.T @ target / n)
    result = solve(
        data, loss="squared", regularizer="l2", alpha=alpha, solver="batch", max_epochs=500,
        tol=1e-12,
    )  # fmt: skip
    assert result.converged
    np.testing.assert_allclose(result.w, closed, atol=1e-6)


def test_batch_lasso_matches_sklearn(problem_data):
    from sklearn.linear_model import Lasso

    X, _, _ = problem_data
    rng = np.random.default_rng(4)
    truth = np.where(rng.random(X.shape[1]) < 0.4, rng.standard_normal(X.shape[1]), 0.0)
    target = X @ truth + 0.05 * rng.standard_normal(X.shape[0])
    data = MemoryDataset(X, target, rows_per_block=50)
    alpha = 2e-3
    result = solve(
        data, loss="squared", regularizer="l1", alpha=alpha, solver="batch", max_epochs=2000,
        tol=1e-11,
    )  # fmt: skip
    reference = Lasso(alpha=alpha, fit_intercept=False, tol=1e-14, max_iter=100000).fit(X, target)

    def objective(w):
        return 0.5 * np.mean((X @ w - target) ** 2) + alpha * np.abs(w).sum()

    assert result.converged
    assert abs(objective(result.w) - objective(reference.coef_)) <= 1e-9
    np.testing.assert_allclose(result.w, reference.coef_, atol=1e-5)
    assert np.array_equal(result.w == 0, reference.coef_ == 0)


def test_batch_epoch_is_one_compute(problem_data, counting_scheduler):
    _, _, data = problem_data
    method = get_solver("batch")
    options = make_options(method, {"power_iterations": 3})
    from daskpd.problem import Problem

    problem = Problem("logistic", "l2", 1e-2)
    state = method.init(problem, data, seed=np.random.SeedSequence(0), client=None, options=options)
    assert counting_scheduler.calls == 3 + 1  # power iterations + first gradient
    for epoch in range(1, 4):
        before = counting_scheduler.calls
        state = method.run_epoch(state, epoch)
        assert counting_scheduler.calls == before + 1


def test_solve_counts_computes(problem_data, counting_scheduler):
    _, _, data = problem_data
    result = solve(
        data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=6, tol=0, eval_every=3,
        power_iterations=2,
    )  # fmt: skip
    # init: 2 power iterations + 1 gradient; 6 epochs; evaluations at epochs 3 and 6.
    assert counting_scheduler.calls == 3 + 6 + 2
    assert [row["epoch"] for row in result.history] == [3, 6]


def test_batch_on_disk_equals_in_memory(problem_data, tmp_path):
    X, y, data = problem_data
    on_disk = write_dataset(X, y, tmp_path / "d.zarr", rows_per_block=70)
    kwargs = {"loss": "logistic", "alpha": 1e-2, "solver": "batch", "max_epochs": 8, "tol": 0}
    memory = solve(data, **kwargs)
    disk = solve(on_disk, client=False, **kwargs)
    np.testing.assert_allclose(disk.w, memory.w, rtol=1e-12, atol=1e-14)


def test_solve_reads_a_path_as_evaluate_does(problem_data, tmp_path):
    # one data coercion (daskpd.data.as_data): a path trains as the dataset it opens, and as
    # Problem.evaluate already read it
    X, y, _ = problem_data
    on_disk = write_dataset(X, y, tmp_path / "d.zarr", rows_per_block=70)
    kwargs = {"loss": "logistic", "alpha": 1e-2, "solver": "batch", "max_epochs": 4, "tol": 0}
    by_path = solve(str(tmp_path / "d.zarr"), client=False, **kwargs)
    by_dataset = solve(on_disk, client=False, **kwargs)
    np.testing.assert_array_equal(by_path.w, by_dataset.w)
    assert by_path.gap == by_dataset.gap
    from daskpd.problem import Problem

    evaluation = Problem("logistic", "l2", 1e-2).evaluate(by_path.w, tmp_path / "d.zarr")
    assert evaluation.primal == pytest.approx(by_path.primal, rel=1e-12)
    with pytest.raises(ValueError, match="data must be a Dataset, a MemoryDataset, a path"):
        solve(42, **kwargs)


def test_class_weight_changes_the_objective(problem_data):
    _, y, data = problem_data
    plain = solve(data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=200, tol=1e-9)
    weighted = solve(
        data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=200, tol=1e-9,
        class_weight={-1: 1.0, 1: 5.0},
    )  # fmt: skip
    assert weighted.converged and plain.converged
    # Up-weighting positives pushes their scores up.
    X = problem_data[0]
    assert np.mean(X[y > 0] @ weighted.w) > np.mean(X[y > 0] @ plain.w)


# --------------------------------------------------------------------------------------------
# stop rules, history, callbacks


def test_stop_rules(problem_data):
    _, _, data = problem_data
    kwargs = {"loss": "logistic", "alpha": 1e-2, "solver": "batch"}
    budget = solve(data, max_epochs=4, tol=0, eval_every=1, **kwargs)
    assert (budget.n_epochs, budget.stop_reason, budget.converged) == (4, "max_epochs", False)
    assert [row["epoch"] for row in budget.history] == [1, 2, 3, 4]
    for row in budget.history:
        assert set(row) >= {"epoch", "seconds", "wall_seconds", "eval_seconds", "primal", "gap"}
        assert row["dual"] <= row["primal"] + 1e-12
    timed = solve(data, max_epochs=1000, tol=0, time_limit=0.0, **kwargs)
    assert (timed.n_epochs, timed.stop_reason) == (1, "time_limit")
    loose = solve(data, max_epochs=1000, tol=1e-3, eval_every=1, **kwargs)
    assert loose.stop_reason == "tol" and loose.converged and loose.gap <= 1e-3
    assert loose.n_epochs < 1000
    sparse_eval = solve(data, max_epochs=7, tol=0, eval_every=3, **kwargs)
    assert [row["epoch"] for row in sparse_eval.history] == [3, 6, 7]


def test_callback_returning_true_stops_and_final_row_is_evaluated(problem_data):
    _, _, data = problem_data
    seen = []

    def stop_at_five(info):
        seen.append((info.epoch, info.row is not None))
        return info.epoch == 5

    result = solve(
        data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=50, tol=0, eval_every=4,
        callbacks=stop_at_five,
    )  # fmt: skip
    assert result.stop_reason == "callback" and result.n_epochs == 5
    assert seen == [(1, False), (2, False), (3, False), (4, True), (5, False)]
    assert [row["epoch"] for row in result.history] == [4, 5]


def test_early_stopping_and_recorder(problem_data):
    X, y, data = problem_data
    recorder = HistoryRecorder()
    stopper = EarlyStopping("gap", mode="min", patience=1, min_delta=1.0)
    result = solve(
        data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=50, tol=0, eval_every=1,
        callbacks=[recorder, stopper],
    )  # fmt: skip
    # No gap improves by more than 1.0, so the second evaluation stops the run.
    assert result.stop_reason == "callback" and result.n_epochs == 2
    assert [info.epoch for info in recorder.infos] == [1, 2]
    assert isinstance(recorder.infos[0].iterate, Iterate)
    first, second = recorder.infos
    assert first.wall_seconds >= first.seconds + first.row["eval_seconds"]
    assert second.wall_seconds > first.wall_seconds and second.seconds > first.seconds


def test_progress_bar_shows_primal_gap_and_test_auprc(problem_data):
    X, y, data = problem_data
    stream = io.StringIO()
    result = solve(
        data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=3, tol=0,
        test_data=MemoryDataset(X, y), callbacks=[ProgressBar(file=stream)],
    )  # fmt: skip
    text = stream.getvalue()
    assert "3/3" in text
    for key in ("primal=", "gap=", "test_auprc=", "wall=", "train="):
        assert key in text
    assert result.history[-1]["test_auprc"] == pytest.approx(auprc(y, X @ result.w), abs=1e-15)


def test_test_metrics_in_history(problem_data):
    X, y, data = problem_data
    X_test, y_test = _classification(n=100, seed=9)
    result = solve(
        data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=3, tol=0,
        test_data=(X_test, y_test),
    )  # fmt: skip
    row = result.history[-1]
    scores = X_test @ result.w
    assert row["test_auprc"] == pytest.approx(auprc(y_test, scores), abs=1e-15)
    assert row["test_error_rate"] == pytest.approx(np.mean((scores > 0) != (y_test > 0)))
    assert row["test_log_loss"] == pytest.approx(
        np.mean(np.logaddexp(0, -y_test * scores)), rel=1e-12
    )
    np.testing.assert_allclose(result.decision_function((X_test, y_test)), scores, rtol=1e-12)


# --------------------------------------------------------------------------------------------
# clocks and the evaluation cadence


def test_history_clocks_and_timings(problem_data):
    X, y, data = problem_data
    result = solve(
        data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=5, tol=0, eval_every=1,
        test_data=(X, y),
    )  # fmt: skip
    before = {"seconds": 0.0, "wall_seconds": 0.0, "eval_seconds": 0.0}
    for row in result.history:
        # Training and evaluation are disjoint stretches of the wall time.
        assert row["wall_seconds"] >= row["seconds"] + row["eval_seconds"]
        for clock, value in before.items():
            assert row[clock] > value
        before = {clock: row[clock] for clock in before}
    timings = result.timings
    assert set(timings) == {"wall", "init", "epochs", "evaluation", "checkpoint"}
    assert timings["init"] + timings["epochs"] == pytest.approx(before["seconds"], rel=1e-9)
    assert timings["evaluation"] == pytest.approx(before["eval_seconds"], rel=1e-9)
    assert timings["checkpoint"] == 0.0
    assert timings["wall"] >= before["wall_seconds"]
    assert timings["wall"] >= sum(value for key, value in timings.items() if key != "wall")


def test_should_evaluate_rule():
    from daskpd.solvers.driver.loop import _should_evaluate

    # An int: every eval_every epochs, and the last epoch.
    assert [_should_evaluate(3, e, 0.0, 0.0, None, False, 1.0) for e in (1, 2, 3, 6)] == [
        False, False, True, True,
    ]  # fmt: skip
    assert _should_evaluate(3, 7, 0.0, 0.0, None, True, 1.0)
    # "auto": the last epoch always...
    assert _should_evaluate("auto", 5, 100.0, 50.0, 10.0, True, 1.0)
    assert _should_evaluate("auto", 1, 1.0, 0.0, None, True, 1.0)
    # ...otherwise only while this evaluation and the final one (each costed as the last
    # one measured) stay within 10% of the wall time the run would then have
    assert _should_evaluate("auto", 5, 100.0, 8.0, 1.0, False, 0.1)  # 10 <= 0.1 * 102
    assert not _should_evaluate("auto", 5, 100.0, 8.5, 1.0, False, 0.1)  # 10.5 > 10.2
    assert not _should_evaluate("auto", 5, 100.0, 0.0, 6.0, False, 0.1)  # 12 > 11.2
    # before the first evaluation, one is costed as the epoch just run and weighed against
    # the time of the whole budget
    assert not _should_evaluate("auto", 1, 3.0, 0.0, None, False, 1.0)  # 2 > 0.5
    assert not _should_evaluate("auto", 1, 3.0, 0.0, None, False, 1.0, 7.0)  # 2 > 1.2
    assert _should_evaluate("auto", 1, 3.0, 0.0, None, False, 1.0, 15.0)  # 2 <= 2.0
    assert _should_evaluate("auto", 18, 18.0, 0.0, None, False, 1.0)  # 2 <= 2.0
    # an evaluation that can end the run (tol > 0, a solver without its own certificate):
    # the first one alone has to fit in a tenth of the budget
    assert _should_evaluate("auto", 1, 3.4, 0.0, None, False, 0.4, 3.6, True)  # 0.4 <= 0.74
    assert not _should_evaluate("auto", 1, 3.4, 0.0, None, False, 0.4, 3.6)  # 0.8 > 0.78
    assert not _should_evaluate("auto", 1, 3.0, 0.0, None, False, 1.0, 3.0, True)  # 1 > 0.7
    # ...but once measured, against the wall time so far
    assert not _should_evaluate("auto", 2, 4.0, 1.0, 1.0, False, 1.0, 100.0)


@pytest.mark.parametrize(
    "start_cost, epoch_cost, eval_cost",
    [(0.0, 1.0, 0.01), (10.0, 1.0, 0.5), (0.0, 1.0, 4.0), (10.0, 1.5, 1.7), (1.0, 0.1, 0.2)],
)
def test_auto_cadence_keeps_evaluation_within_a_tenth(start_cost, epoch_cost, eval_cost):
    from daskpd.solvers.driver.loop import _should_evaluate

    # The driver's rule replayed on a clock that advances by fixed costs, for runs of
    # every length: evaluation stays within 10% of the wall time at the run's end.
    for n_epochs in (1, 2, 8, 30, 200):
        wall, spent, last_cost, evaluated = start_cost, 0.0, None, []
        for epoch in range(1, n_epochs + 1):
            wall += epoch_cost
            last = epoch == n_epochs
            to_come = (n_epochs - epoch) * epoch_cost
            if _should_evaluate("auto", epoch, wall, spent, last_cost, last, epoch_cost, to_come):
                wall, spent, last_cost = wall + eval_cost, spent + eval_cost, eval_cost
                evaluated.append(epoch)
        assert evaluated[-1] == n_epochs
        if len(evaluated) > 1:  # more than the final evaluation: it fit in the tenth
            # (up to the misestimate of the first one, costed as an epoch)
            assert spent <= 0.1 * wall + 2 * max(0.0, eval_cost - epoch_cost) + 1e-12
        if eval_cost <= epoch_cost / 19 and n_epochs == 200:  # cheap: nearly every epoch
            assert len(evaluated) > 0.9 * n_epochs


def test_auto_cadence_on_a_run_with_a_slow_evaluation(problem_data):
    X, y, data = problem_data
    # Test metrics over 50 times the training rows: an evaluation costs several epochs.
    X_test, y_test = _classification(n=12_000, seed=5)
    # (alpha=1e-4: far from a zero gap after 60 epochs, so tol=0 does not stop the run.)
    result = solve(
        data, loss="logistic", alpha=1e-4, solver="batch", max_epochs=60, tol=0,
        test_data=MemoryDataset(X_test, y_test, rows_per_block=3000),
    )  # fmt: skip
    assert result.stop_reason == "max_epochs"
    epochs = [row["epoch"] for row in result.history]
    # the first epoch is evaluated: its evaluation (costed as an epoch) fits in the tenth
    # of the 60 epochs' time
    assert epochs[0] == 1 and epochs[-1] == 60 and len(epochs) < 60
    final = result.history[-1]
    costs = np.diff([0.0] + [row["eval_seconds"] for row in result.history])
    # The first evaluation and the last are made whatever they cost; the others keep the
    # evaluation time within 10% of the wall time, give or take one evaluation's error of
    # estimate (costed as the evaluation before it).
    assert (
        final["eval_seconds"] / final["wall_seconds"]
        <= 0.1 + 2 * costs.max() / final["wall_seconds"]
    )
    assert result.timings["evaluation"] == pytest.approx(final["eval_seconds"], rel=1e-9)


def test_warm_start_from_optimum_converges_at_once(problem_data):
    _, _, data = problem_data
    kwargs = {"loss": "logistic", "alpha": 1e-2, "solver": "batch", "tol": 1e-8}
    first = solve(data, max_epochs=300, **kwargs)
    again = solve(data, max_epochs=300, warm_start=first, **kwargs)
    assert again.n_epochs == 1 and again.converged


# --------------------------------------------------------------------------------------------
# divergence


def test_nan_iterate_is_a_divergence_error(problem_data, tmp_path):
    _, _, data = problem_data
    with pytest.raises(DivergenceError, match=r"diverged at epoch \d+: .*(NaN|inf|objective)"):
        solve(
            data, loss="squared", regularizer="l2", alpha=1e-3, solver="test-fixed-step",
            step=1e3, max_epochs=500, tol=0, divergence_factor=math.inf,
        )  # fmt: skip


def test_exploding_objective_keeps_last_good_checkpoint(problem_data, tmp_path):
    from daskpd.checkpoint import CheckpointStore

    X, y, _ = problem_data
    data = MemoryDataset(X, y, rows_per_block=70)
    with pytest.raises(DivergenceError) as caught:
        solve(
            data, loss="squared", regularizer="l2", alpha=1e-3, solver="test-fixed-step",
            step=200.0, max_epochs=200, tol=0, eval_every=1, checkpoint_dir=tmp_path / "ck",
        )  # fmt: skip
    message = str(caught.value)
    assert "exploded" in message
    epoch = int(message.split("diverged at epoch ")[1].split(":")[0])
    kept = CheckpointStore(tmp_path / "ck").latest()
    assert f"last good checkpoint (epoch {kept.epoch})" in message
    assert kept.epoch == epoch - 1
    assert np.all(np.isfinite(kept.arrays["w"]))
    # The good checkpoint resumes with a sane step.
    assert kept.meta["history"][-1]["epoch"] == kept.epoch


def test_fixed_step_solver_converges_with_a_short_step(problem_data):
    # The divergence tests above are meaningful only if the same solver converges when the
    # step is right.
    X, y, data = problem_data
    result = solve(
        data, loss="logistic", alpha=1e-2, solver="test-fixed-step", step=4.0,
        max_epochs=3000, tol=1e-6,
    )  # fmt: skip
    assert result.converged


def test_all_zero_rows_and_unused_columns_train(problem_data):
    X, y, _ = problem_data
    X = sp.lil_matrix(X)
    X[:10, :] = 0.0  # ten all-zero rows
    X[:, 4] = 0.0  # a column no row uses
    data = MemoryDataset(sp.csr_matrix(X), y, rows_per_block=70)
    result = solve(data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=300, tol=1e-9)
    assert result.converged and result.w[4] == 0.0


def test_empty_dataset_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one row"):
        solve((sp.csr_matrix((0, 5)), np.zeros(0)), loss="logistic", solver="batch")
