"""SPDC solver: oracles of the digest (closed form, linear rate, sklearn optima), step-size
rules, sampling, Dask integration (one compute per epoch, LocalCluster, resume)."""

from __future__ import annotations

import dataclasses
import os

import dask
import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

from daskpd.data import as_dataset
from daskpd.problem import Problem
from daskpd.solvers import spdc
from daskpd.solvers.driver import get_solver, solve
from daskpd.solvers.spdc import (
    SPDCSolver,
    draw_rows,
    optimal_mixing,
    spdc_step_sizes,
    weighted_step_sizes,
)


@pytest.fixture(autouse=True)
def _in_process_scheduler(request):
    # With a session LocalCluster alive, plain dask.compute would go to it; these tests are
    # about the in-process path (the cluster test passes its client explicitly).
    if "local_cluster" in request.fixturenames:
        yield
        return
    with dask.config.set(scheduler="threads"):
        yield


def paper_ridge(n=500, d=500, seed=0):
    """Section 7.1 of the SPDC paper: a ~ N(0, diag(j^-2)), b = a.1 + N(0, 1)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.arange(1, d + 1)
    y = X @ np.ones(d) + rng.normal(size=n)
    return X, y


def ridge_solution(X, y, alpha):
    n, d = X.shape
    return np.linalg.solve(X.T @ X / n + alpha * np.eye(d), X.T @ y / n)


def run_solver(solver, problem, data, epochs, seed=0, client=None, **options):
    opts = solver.Options(**options)
    solver.check(problem, data, opts)
    state = solver.init(
        problem, data, seed=np.random.SeedSequence(seed), client=client, options=opts
    )
    for epoch in range(1, epochs + 1):
        state = solver.run_epoch(state, epoch)
    return state


# --------------------------------------------------------------------------------------------
# oracles
# --------------------------------------------------------------------------------------------
def _ridge_oracle(alpha, epochs, rel_tol):
    X, y = paper_ridge()
    w_star = ridge_solution(X, y, alpha)
    problem = Problem("squared", "l2", alpha)
    state = run_solver(SPDCSolver(), problem, as_dataset(X, y), epochs)
    rel = np.linalg.norm(state.carry.w - w_star) / np.linalg.norm(w_star)
    assert rel <= rel_tol
    # The driver's history (same seed, same iterates) for the rate; it stops once the gap
    # reaches the rounding floor.
    result = solve(
        (X, y), "squared", "l2", alpha, solver="spdc", max_epochs=epochs, tol=1e-300,
        eval_every=2, client=False,
    )  # fmt: skip
    gaps = np.array([row["gap"] for row in result.history])
    assert np.all(gaps >= -1e-12)  # weak duality
    # Linear rate: fit log(gap) over the range above the rounding floor.
    window = (gaps < 1e-2) & (gaps > 1e-11)
    epochs_used = np.array([row["epoch"] for row in result.history])[window]
    logs = np.log(gaps[window])
    slope, intercept = np.polyfit(epochs_used, logs, 1)
    residual = logs - (slope * epochs_used + intercept)
    n = X.shape[0]
    big_r = np.linalg.norm(X, axis=1).max()
    theta = spdc_step_sizes(big_r, 1.0, alpha, n).theta
    bound_slope = n * np.log(theta)  # per pass, Corollary 4
    assert slope <= bound_slope  # at least as steep as the bound (observed ~2x steeper)
    assert np.max(np.abs(residual)) < 2.0  # a straight line in log scale
    return slope, bound_slope


def test_ridge_oracle_well_conditioned():
    _ridge_oracle(alpha=1e-2, epochs=100, rel_tol=1e-8)


@pytest.mark.slow
def test_ridge_oracle_paper_lambda():
    # The digest's Oracle A setting (lambda = 1e-3): needs ~250 passes for 1e-8.
    _ridge_oracle(alpha=1e-3, epochs=300, rel_tol=1e-8)


def test_matches_sklearn_elastic_net(rng):
    from sklearn.linear_model import ElasticNet

    X = rng.normal(size=(200, 20))
    y = X @ rng.normal(size=20) + 0.5 * rng.normal(size=200)
    alpha, ratio = 0.4, 0.9
    ref = ElasticNet(alpha=alpha, l1_ratio=ratio, fit_intercept=False, tol=1e-14, max_iter=10**6)
    ref.fit(X, y)
    from daskpd.regularizers import ElasticNet as EN

    result = solve(
        (X, y), "squared", EN(l1_ratio=ratio), alpha, solver="spdc", max_epochs=150, tol=0.0,
        eval_every=50, client=False, random_state=3,
    )  # fmt: skip
    np.testing.assert_allclose(result.w, ref.coef_, rtol=1e-6, atol=1e-9)
    assert np.sum(ref.coef_ == 0) >= 3 and np.array_equal(result.w == 0, ref.coef_ == 0)


def test_matches_sklearn_logistic(rng):
    from sklearn.linear_model import LogisticRegression

    n = 200
    X = rng.normal(size=(n, 10))
    y = np.where(X @ rng.normal(size=10) + rng.normal(size=n) > 0, 1.0, -1.0)
    alpha = 0.01
    ref = LogisticRegression(
        C=1.0 / (n * alpha), fit_intercept=False, tol=1e-14, max_iter=10**4, solver="newton-cg"
    ).fit(X, y)
    result = solve(
        (X, y), "logistic", "l2", alpha, solver="spdc", max_epochs=150, tol=0.0,
        eval_every=50, client=False,
    )  # fmt: skip
    np.testing.assert_allclose(result.w, ref.coef_.ravel(), rtol=1e-6)


def test_matches_reference_smooth_hinge(rng):
    # scikit-learn has no smoothed hinge: a high-precision L-BFGS solve of the same primal.
    n, d = 200, 10
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    alpha = 0.01

    def objective(w):
        m = y * (X @ w)
        loss = np.where(m >= 1, 0.0, np.where(m <= 0, 0.5 - m, 0.5 * (1 - m) ** 2))
        dloss = np.where(m >= 1, 0.0, np.where(m <= 0, -1.0, m - 1.0))
        return loss.mean() + 0.5 * alpha * w @ w, X.T @ (dloss * y) / n + alpha * w

    ref = scipy.optimize.minimize(
        objective, np.zeros(d), jac=True, method="L-BFGS-B",
        options={"gtol": 1e-14, "ftol": 1e-16, "maxiter": 10**5, "maxcor": 50},
    ).x  # fmt: skip
    result = solve(
        (X, y), "smooth_hinge", "l2", alpha, solver="spdc", max_epochs=150, tol=0.0,
        eval_every=50, client=False,
    )  # fmt: skip
    np.testing.assert_allclose(result.w, ref, rtol=1e-6)
    assert result.gap < 1e-10


def test_hinge_with_perturbation_is_delta_close(rng):
    from sklearn.svm import LinearSVC

    n, d = 200, 10
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    alpha = 0.01
    ref = LinearSVC(C=1.0 / (n * alpha), loss="hinge", dual=True, fit_intercept=False,
                    tol=1e-12, max_iter=10**6, random_state=0).fit(X, y)  # fmt: skip
    problem = Problem("hinge", "l2", alpha)
    p_star = problem.evaluate(ref.coef_.ravel(), (X, y)).primal
    delta = 1e-3
    result = solve(
        (X, y), "hinge", "l2", alpha, solver="spdc", max_epochs=200, tol=0.0, eval_every=50,
        client=False, delta=delta,
    )  # fmt: skip
    excess = problem.evaluate(result.w, (X, y)).primal - p_star
    # Corollary 5: P(w_delta) - P* <= delta C1 / 2, C1 = ||w*||^2 + G_phi^2 (G_phi = 1).
    c1 = float(ref.coef_.ravel() @ ref.coef_.ravel()) + 1.0
    assert -1e-9 <= excess <= delta * c1 / 2


# --------------------------------------------------------------------------------------------
# parameters and sampling
# --------------------------------------------------------------------------------------------
def test_step_sizes_identities():
    steps = spdc_step_sizes(3.0, 1.0, 1e-4, 1000, batch_size=10)
    assert steps.tau * steps.sigma == pytest.approx(1.0 / (4 * 9.0), rel=1e-14)
    assert steps.sigma / steps.tau == pytest.approx(1000 * 1e-4 / 10, rel=1e-14)
    assert 0 < steps.theta < 1


def test_optimal_mixing_minimizes_rate():
    for big_r, mean_r, lam, n in [(5.0, 1.0, 1e-8, 20242), (2.0, 1.0, 1e-8, 581012),
                                  (3.2, 1.0, 1e-4, 500), (1.0, 1.0, 1e-6, 1000)]:  # fmt: skip
        best = optimal_mixing(big_r, mean_r, 1.0, lam, n)

        def rate(mix, big_r=big_r, mean_r=mean_r, lam=lam, n=n):
            return 1.0 / (1.0 - weighted_step_sizes(big_r, mean_r, 1.0, lam, n, mix).theta)

        grid = np.linspace(0, 0.999, 2000)
        assert rate(best) <= min(rate(m) for m in grid) * (1 + 1e-9)
        if big_r == mean_r:
            assert best == 0.0
    # digest's examples
    assert optimal_mixing(5.0, 1.0, 1.0, 1e-8, 20242) == pytest.approx(0.88, abs=0.01)
    assert optimal_mixing(2.0, 1.0, 1.0, 1e-8, 581012) == pytest.approx(0.67, abs=0.01)


def test_weighted_mixing_zero_equals_uniform(rng):
    X = rng.normal(size=(120, 15)) * rng.uniform(0.2, 3.0, size=(120, 1))
    y = rng.normal(size=120)
    data = as_dataset(X, y, rows_per_block=40)
    problem = Problem("squared", "l2", 1e-2)
    norms = np.linalg.norm(X, axis=1)
    uni = spdc_step_sizes(norms.max(), 1.0, 1e-2, 120)
    wei = weighted_step_sizes(norms.max(), norms.mean(), 1.0, 1e-2, 120, 0.0)
    assert wei.tau == pytest.approx(uni.tau, rel=1e-15)
    assert wei.sigma == pytest.approx(uni.sigma, rel=1e-15)
    solver = SPDCSolver()
    a = run_solver(solver, problem, data, 4, seed=5, theta=uni.theta, sampling="uniform")
    b = run_solver(solver, problem, data, 4, seed=5, theta=uni.theta, sampling="weighted",
                   mixing=0.0)  # fmt: skip
    np.testing.assert_allclose(b.carry.w, a.carry.w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.concatenate(b.z_blocks), np.concatenate(a.z_blocks),
                               rtol=1e-12, atol=1e-14)  # fmt: skip


def test_weighted_beats_uniform_on_skewed_rows():
    X, y = paper_ridge(n=300, d=100, seed=2)
    X[:3] *= 30.0
    alpha = 1e-3
    w_star = ridge_solution(X, y, alpha)
    problem = Problem("squared", "l2", alpha)
    p_star = problem.evaluate(w_star, (X, y)).primal
    data = as_dataset(X, y)
    errors = {}
    for sampling in ("uniform", "weighted"):
        runs = []
        for seed in range(3):
            state = run_solver(SPDCSolver(), problem, data, 40, seed=seed, sampling=sampling)
            runs.append(problem.evaluate(state.carry.w, data).primal - p_star)
        errors[sampling] = np.median(runs)
    assert errors["weighted"] < 0.1 * errors["uniform"]


def test_partition_sampler_marginals():
    rng = np.random.default_rng(0)
    n, m, n_iter = 30, 5, 20000
    order = draw_rows(rng, n, n_iter, m).reshape(n_iter, m)
    assert all(len(set(row)) == m for row in order[:500])
    freq = np.bincount(order.ravel(), minlength=n) / n_iter
    np.testing.assert_allclose(freq, m / n, atol=0.02)


def test_shuffle_sampler_visits_every_row_once():
    rng = np.random.default_rng(0)
    order = draw_rows(rng, 37, 37, 1, shuffle=True)
    np.testing.assert_array_equal(np.sort(order), np.arange(37))
    # batches of 4 taken in turn from the permutation: distinct rows in each
    batches = draw_rows(rng, 36, 9, 4, shuffle=True)
    np.testing.assert_array_equal(np.sort(batches), np.arange(36))
    assert all(len(set(b)) == 4 for b in batches.reshape(9, 4))
    # rounded up to whole batches: the second permutation supplies the rest
    longer = draw_rows(rng, 10, 4, 3, shuffle=True)
    assert longer.shape == (12,)
    np.testing.assert_array_equal(np.sort(longer[:10]), np.arange(10))


@pytest.mark.parametrize("sampling", ["shuffle", "uniform"])
def test_sampling_option_reaches_the_blocks(rng, sampling):
    # one epoch: shuffled passes step every row's dual (each is visited once), i.i.d. draws
    # leave about e^-1 of them untouched at z = 0
    X = rng.normal(size=(300, 8))
    y = X @ rng.normal(size=8) + rng.normal(size=300)
    data = as_dataset(X, y, rows_per_block=100)
    state = run_solver(SPDCSolver(), Problem("squared", "l2", 0.1), data, 1, sampling=sampling)
    untouched = np.mean(np.concatenate(state.z_blocks) == 0.0)
    if sampling == "shuffle":
        assert untouched == 0.0
    else:
        assert 0.25 < untouched < 0.5


def test_minibatch_converges(rng):
    X = rng.normal(size=(200, 10))
    y = X @ rng.normal(size=10)
    result = solve((X, y), "squared", "l2", 0.1, solver="spdc", max_epochs=150, tol=1e-10,
                   client=False, batch_size=8, eval_every=10)  # fmt: skip
    assert result.converged and result.gap <= 1e-10


# --------------------------------------------------------------------------------------------
# errors before Dask work
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "loss,reg,options,match",
    [
        ("hinge", "l2", {}, "delta"),
        ("squared", "l1", {}, "delta"),
        ("squared", "group_lasso", {}, "separable"),
        ("squared", "l2", {"batch_size": 0}, "batch_size"),
        ("squared", "l2", {"sampling": "weighted", "batch_size": 2}, "weighted"),
        ("squared", "l2", {"sampling": "stratified"}, "sampling"),
        ("squared", "l2", {"mixing": 1.0, "sampling": "weighted"}, "mixing"),
    ],
)
def test_unsupported_raise_before_dask(counting_scheduler, rng, loss, reg, options, match):
    X = rng.normal(size=(20, 4))
    y = np.sign(rng.normal(size=20))
    if reg == "group_lasso":
        from daskpd.regularizers import GroupLasso

        reg = GroupLasso(groups=((0, 1), (2, 3)))
    with pytest.raises(ValueError, match=match):
        solve((X, y), loss, reg, 0.1, solver="spdc", client=False, max_epochs=1, **options)
    assert counting_scheduler.calls == 0


def test_unknown_option_is_an_error(rng):
    X = rng.normal(size=(20, 4))
    with pytest.raises(ValueError, match="unknown option"):
        solve((X, X[:, 0]), "squared", "l2", 0.1, solver="spdc", client=False, gamma=2.0)


# --------------------------------------------------------------------------------------------
# Dask
# --------------------------------------------------------------------------------------------
def test_one_compute_per_epoch(counting_scheduler, rng):
    X = rng.normal(size=(90, 6))
    data = as_dataset(X, X[:, 0], rows_per_block=20)
    assert data.n_row_blocks > 2
    solver = SPDCSolver()
    problem = Problem("squared", "l2", 0.1)
    opts = solver.Options()
    state = solver.init(problem, data, seed=np.random.SeedSequence(0), client=None, options=opts)
    before = counting_scheduler.calls
    for epoch in (1, 2, 3):
        state = solver.run_epoch(state, epoch)
    assert counting_scheduler.calls - before == 3
    assert state.carry.t == 90 * 3


def test_an_epoch_keeps_one_lazy_carry_and_brings_it_up_to_date_once(rng, monkeypatch):
    from daskpd.solvers import spdc

    # O(nnz) an epoch: the carry is copied by the epoch's first block, updated in place by
    # the others (no coordinate caught up that their rows do not touch), flushed once at the
    # end; and the order visits runs of consecutive blocks (one worker each) whole.
    X = rng.normal(size=(200, 6)) * (rng.random((200, 6)) < 0.3)
    data = as_dataset(X, X[:, 0], rows_per_block=10)
    solver = SPDCSolver()
    problem = Problem("squared", "l2", 0.1)
    state = solver.init(
        problem, data, seed=np.random.SeedSequence(0), client=None, options=solver.Options()
    )
    lazy = spdc._lazy(state.carry, 1)
    w = lazy.state[:, spdc.spdc_kernels.LAZY_W]
    assert not np.shares_memory(w, state.carry.w) and np.array_equal(w, state.carry.w)
    assert spdc._lazy(lazy, 1) is lazy
    assert lazy.mark.size == 0  # one row an iteration: no scratch of the mini-batch loop
    assert spdc._lazy(state.carry, 2).mark.shape == w.shape
    flushes = []
    real_flush = spdc.spdc_kernels.flush
    monkeypatch.setattr(
        spdc.spdc_kernels, "flush", lambda *args: (flushes.append(args[0]), real_flush(*args))
    )
    for epoch in (1, 2):
        state = solver.run_epoch(state, epoch)
    assert flushes == [200, 400]  # once an epoch, at its last iteration
    for n_blocks in (1, 2, 7, 20, 24):
        order = spdc.block_order(state.seed, 3, n_blocks)
        assert sorted(order) == list(range(n_blocks))
        # each half of every bisection comes in one run: with 2 or 4 workers (consecutive
        # ranges of blocks) each worker's blocks are visited together
        for workers in (2, 4):
            owner = [b * workers // n_blocks for b in order]
            runs = 1 + sum(a != b for a, b in zip(owner[:-1], owner[1:], strict=True))
            assert runs == min(workers, n_blocks), (n_blocks, workers, order)
    # one task a run of a worker's blocks (the order cut where the worker changes)
    from daskpd._cluster import block_worker
    from daskpd.solvers.common.chain import _runs

    workers = ("tcp://a:1", "tcp://b:2")
    order = [int(b) for b in spdc.block_order(state.seed, 3, 24)]
    runs = _runs(order, workers, 24)
    assert len(runs) == 2 and [b for _, blocks in runs for b in blocks] == order
    for worker, blocks in runs:
        assert {block_worker(workers, b, 24) for b in blocks} == {worker}
    assert _runs(order, (), 24) == [(None, order)]
    orders = {tuple(spdc.block_order(state.seed, epoch, 24)) for epoch in range(1, 30)}
    assert len(orders) > 20  # a new order each epoch, from 2^23 bisection orders
    first = [spdc.block_order(state.seed, epoch, 24)[0] for epoch in range(1, 200)]
    assert set(first) == set(range(24))  # any block can come first


def test_resume_is_exact(rng):
    X = rng.normal(size=(60, 8))
    y = rng.normal(size=60)
    data = as_dataset(X, y, rows_per_block=25)
    problem = Problem("squared", "elasticnet", 0.05)
    solver = SPDCSolver()
    opts = solver.Options(batch_size=2)
    seed = np.random.SeedSequence(11)
    state = solver.init(problem, data, seed=seed, client=None, options=opts)
    for epoch in (1, 2):
        state = solver.run_epoch(state, epoch)
    saved = solver.state_arrays(state)
    full = solver.run_epoch(state, 3)
    again = solver.restore(problem, data, saved, seed=seed, client=None, options=opts)
    resumed = solver.run_epoch(again, 3)
    np.testing.assert_array_equal(resumed.carry.w, full.carry.w)
    np.testing.assert_array_equal(np.concatenate(resumed.z_blocks), np.concatenate(full.z_blocks))


@pytest.mark.cluster
def test_local_cluster_equals_in_process(local_cluster, rng, tmp_path):
    from daskpd.data import write_dataset

    X = rng.normal(size=(150, 12))
    X[np.abs(X) < 0.8] = 0.0
    y = np.where(rng.normal(size=150) > 0, 1.0, -1.0)
    import scipy.sparse as sp

    data = write_dataset(sp.csr_matrix(X), y, tmp_path / "d.zarr", rows_per_block=40)
    # one thread a block (the cluster's default is its machine's 2): the same bits
    kwargs = dict(max_epochs=4, tol=0.0, random_state=4, eval_every=2, threads=1)
    on_cluster = solve(data, "smooth_hinge", "l2", 0.05, solver="spdc", client=local_cluster,
                       **kwargs)  # fmt: skip
    local = solve(data, "smooth_hinge", "l2", 0.05, solver="spdc", client=False, **kwargs)
    np.testing.assert_array_equal(on_cluster.w, local.w)
    assert on_cluster.history[-1]["gap"] == pytest.approx(local.history[-1]["gap"], rel=1e-12)


@pytest.mark.cluster
def test_carry_through_shared_memory_on_one_machine(local_cluster, rng, tmp_path):
    # Two worker processes of one machine hand the epoch's carry over as a shared-memory
    # file: the same bits as through Dask (shared_memory=False) and as in-process; the file
    # of the last epoch was handed over once and consumed by the epoch's flush.
    from daskpd.data import write_dataset
    from daskpd.solvers.common import shared as _shared

    X = sp.random(120, 30, density=0.3, random_state=rng, format="csr")
    y = np.where(rng.normal(size=120) > 0, 1.0, -1.0)
    data = write_dataset(X, y, tmp_path / "d.zarr", rows_per_block=30)
    problem = Problem("logistic", "l2", 0.05)
    solver = SPDCSolver()
    finals = []
    for shared_memory in (True, False):
        options = solver.Options(threads=1, shared_memory=shared_memory)
        state = solver.init(problem, data, seed=np.random.SeedSequence(2), client=local_cluster,
                            options=options)  # fmt: skip
        assert (state.shared is not None) == shared_memory
        with local_cluster.as_current():
            for epoch in (1, 2, 3):
                state = solver.run_epoch(state, epoch)
        if shared_memory:
            d = data.shape[1]
            path = f"{_shared.run_dir(state.shared.name)}/{spdc.SHARED_CARRY}"
            header = np.fromfile(path, dtype=np.float64)[-4:]
            assert np.fromfile(path).size == (d + 1) * 4
            assert header[0] == 1.0 and header[1] == 1.0  # one hand-over; the flush holds it
        finals.append(spdc.carry_of(state))
        solver.close(state)
        if shared_memory:
            assert not os.path.exists(_shared.run_dir(state.shared.name))
    local = solver.init(problem, data, seed=np.random.SeedSequence(2), client=None,
                        options=solver.Options(threads=1))  # fmt: skip
    for epoch in (1, 2, 3):
        local = solver.run_epoch(local, epoch)
    for final in finals:
        for name in ("w", "w_prev", "u"):
            np.testing.assert_array_equal(getattr(final, name), getattr(local.carry, name))


def test_shared_carry_is_handed_over_once(rng, tmp_path, monkeypatch):
    # The hand-over's header: a shared carry maps once per hand-over; a second claim (a
    # retry of a task whose worker died half-way) or a stale one raises SharedStateLost,
    # which the driver replays like a lost worker. To another machine it goes as bytes.
    from daskpd.solvers.common import shared as _shared
    from daskpd.solvers.driver import loop as _loop

    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(tmp_path))
    run = "daskpd-test-handover"
    assert _shared.join(run) is not None
    w = rng.normal(size=9)
    lazy = spdc._lazy(spdc.Carry(w, w + 1.0, w - 1.0, 7), 1)
    expected = lazy.state.copy()
    handed = spdc._hand_over(lazy, run)
    assert isinstance(handed, spdc.SharedLazyCarry) and handed.generation == 1
    mapped = spdc._lazy(handed, 1)
    np.testing.assert_array_equal(mapped.state, expected)
    assert mapped.t == 7 and mapped.shared is not None
    with pytest.raises(_shared.SharedStateLost, match="busy: 1"):
        spdc._lazy(handed, 1)
    mapped.state[0, 0] = 42.0
    again = spdc._hand_over(mapped, run)
    assert again.generation == 2 and again.handle == handed.handle
    with pytest.raises(_shared.SharedStateLost, match="expected 1"):
        spdc._lazy(handed, 1)
    plain = spdc._hand_over(spdc._lazy(again, 1), None)
    assert isinstance(plain, spdc.LazyCarry) and plain.shared is None
    assert plain.state[0, 0] == 42.0
    # the next epoch's first task fills the same file again (made in place, claimed)
    nxt = spdc._lazy(spdc.Carry(w, w, w, 70), 1, share=run)
    assert nxt.shared == (handed.handle, 0)
    np.testing.assert_array_equal(nxt.state[:, spdc.spdc_kernels.LAZY_W], w)
    later = spdc._hand_over(nxt._replace(t=80), run)
    assert later.generation == 1 and later.handle == handed.handle
    with pytest.raises(_shared.SharedStateLost, match="another epoch's"):
        spdc._lazy(handed, 1)  # the first epoch's hand-over 1, iteration 7
    assert spdc._lazy(later, 1).t == 80
    assert _shared.SharedStateLost in _loop._lost_worker_errors()
    # where the run has no directory (a worker that did not join, a full /dev/shm), the
    # carry stays plain: made in process memory, handed over as bytes
    alone = spdc._lazy(spdc.Carry(w, w, w, 90), 1, share="daskpd-test-no-such-run")
    assert alone.shared is None
    assert spdc._hand_over(alone, "daskpd-test-no-such-run") is alone
    _shared.remove(run)
    with pytest.raises(_shared.SharedStateLost, match="cannot be mapped"):
        spdc._lazy(later, 1)


def test_threads_default_on_a_cluster_and_the_optimum(local_cluster, rng, tmp_path):
    # two 1-thread workers on one machine: a block runs in 2 threads by default; the run
    # still reaches liblinear's optimum (its certificate and the primal against it)
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    from daskpd.data import write_dataset

    n, d = 400, 60
    X = sp.random(n, d, density=0.3, random_state=rng, format="csr")
    X.data[:] = 1.0
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    data = write_dataset(X, y, tmp_path / "d.zarr", rows_per_block=100)
    alpha = 0.01
    solver = SPDCSolver()
    options = solver.Options()
    assert spdc.run_threads(options, local_cluster) == 2
    assert spdc.run_threads(options, None) == 1
    assert spdc.run_threads(solver.Options(sampling="uniform"), local_cluster) == 1
    result = solve(data, "logistic", "l2", alpha, solver="spdc", client=local_cluster,
                   max_epochs=300, tol=1e-9, random_state=1)  # fmt: skip
    assert result.history[-1]["gap"] <= 1e-9
    reference = LogisticRegression(C=1.0 / (alpha * n), fit_intercept=False, tol=1e-12,
                                   max_iter=10_000).fit(X, y)  # fmt: skip
    problem = Problem("logistic", "l2", alpha)
    p_star = problem.evaluate(reference.coef_.ravel(), (X, y)).primal
    assert result.history[-1]["primal"] == pytest.approx(p_star, rel=1e-7)


@pytest.mark.parametrize("binary", [True, False])
def test_threaded_block_keeps_u_exact_and_converges(rng, binary):
    # 2 threads on one block, in-process: u = X^T z / n after every epoch (the atomic adds),
    # and the run's gap falls as a serial run's does
    import scipy.sparse as sp

    # every row touches half of the 50 columns: without atomic adds the threads lose some
    n, d = 20_000, 50
    X = sp.random(n, d, density=0.5, random_state=rng, format="csr")
    if binary:
        X.data[:] = 1.0
    scores = X @ rng.normal(size=d)
    y = np.where(scores > np.median(scores), 1.0, -1.0)
    data = as_dataset(X, y, rows_per_block=n)
    problem = Problem("logistic", "l2", 0.01)
    state = run_solver(SPDCSolver(), problem, data, 1, seed=3, threads=2)
    assert state.opts["threads"] == 2
    solver = SPDCSolver()
    for epoch in range(2, 40):
        state = solver.run_epoch(state, epoch)
        z = np.concatenate(state.z_blocks)
        np.testing.assert_allclose(state.carry.u, X.T @ z / n, rtol=1e-10, atol=1e-14)
    ev = problem.evaluate(state.carry.w, data)
    assert ev.gap <= 1e-8 * ev.primal


def test_block_task_realigns_a_carry_from_another_worker(rng):
    # a carry deserialized on another worker can start at any byte of the message; its
    # records would straddle cache lines, so the task copies such a state
    X = rng.normal(size=(60, 7))
    data = as_dataset(X, np.sign(X[:, 0]), rows_per_block=30)
    problem = Problem("logistic", "l2", 0.1)
    solver = SPDCSolver()
    options = solver.Options(threads=2)
    state = solver.init(problem, data, seed=np.random.SeedSequence(0), client=None,
                        options=options)  # fmt: skip
    aligned = spdc._lazy(state.carry, 1)
    raw = np.zeros(aligned.state.nbytes + 1, dtype=np.uint8)
    shifted = raw[1:].view(np.float64).reshape(aligned.state.shape)
    shifted[:] = aligned.state
    assert not shifted.flags.aligned
    args = (state.z_blocks[0], data, 0, np.random.SeedSequence(5), 30, state.spec, state.steps,
            {**state.opts, "threads": 1})  # fmt: skip
    expected, z_expected = spdc._spdc_block_task(aligned, *args)
    got, z_got = spdc._spdc_block_task(aligned._replace(state=shifted), *args)
    assert spdc.spdc_kernels.is_record_aligned(got.state)
    assert spdc.spdc_kernels.is_record_aligned(aligned.state)  # made so
    np.testing.assert_array_equal(got.state, expected.state)
    np.testing.assert_array_equal(z_got, z_expected)


@pytest.mark.parametrize(
    "options,match",
    [
        ({"threads": 0}, "threads must be a positive integer"),
        ({"threads": True}, "threads must be a positive integer"),
        ({"threads": 2, "batch_size": 2}, "needs batch_size=1 and sampling='shuffle'"),
        ({"threads": 2, "sampling": "uniform"}, "needs batch_size=1 and sampling='shuffle'"),
        ({"shared_memory": "yes"}, "shared_memory must be True or False, got 'yes'"),
    ],
)
def test_threads_option_checked(rng, options, match):
    X = rng.normal(size=(40, 5))
    with pytest.raises(ValueError, match=match):
        solve((X, np.sign(X[:, 0])), "logistic", "l2", 0.1, solver="spdc", client=False,
              **options)  # fmt: skip


def test_registered():
    assert isinstance(get_solver("spdc"), SPDCSolver)
    assert dataclasses.is_dataclass(SPDCSolver.Options)
    assert "SPDCSolver" in spdc.__all__


def test_empty_rows_weighted_and_dspdc(rng):
    X = rng.normal(size=(40, 6))
    X[np.abs(X) < 0.7] = 0.0
    X[[9, 19, 39]] = 0.0  # empty rows, also last in their blocks
    import scipy.sparse as sp

    data = as_dataset(sp.csr_matrix(X), rng.normal(size=40), rows_per_block=10)
    for solver, options in (("spdc", {"sampling": "weighted"}), ("dspdc", {"n_coords": 2})):
        result = solve(data, "squared", "l2", 0.1, solver=solver, max_epochs=200, tol=1e-8,
                       client=False, eval_every=20, **options)  # fmt: skip
        assert result.gap <= 1e-8


@pytest.mark.parametrize("solver", ["spdc", "dspdc"])
def test_row_weights_match_sklearn(rng, solver):
    from sklearn.linear_model import LogisticRegression

    n = 150
    X = rng.normal(size=(n, 6))
    y = np.where(X @ rng.normal(size=6) + rng.normal(size=n) > 0, 1.0, -1.0)
    sample_weight = rng.uniform(0.2, 2.0, size=n)
    class_weight = {-1: 1.0, 1: 3.0}
    alpha = 0.02
    ref = LogisticRegression(
        C=1.0 / (n * alpha), fit_intercept=False, tol=1e-14, max_iter=10**4,
        solver="newton-cg", class_weight=class_weight,
    ).fit(X, y, sample_weight=sample_weight)  # fmt: skip
    data = as_dataset(X, y, sample_weight=sample_weight, rows_per_block=50)
    result = solve(data, "logistic", "l2", alpha, solver=solver, class_weight=class_weight,
                   max_epochs=300, tol=1e-13, eval_every=10, client=False)  # fmt: skip
    assert result.gap <= 1e-13
    np.testing.assert_allclose(result.w, ref.coef_.ravel(), rtol=1e-6)


@pytest.mark.parametrize("solver", [SPDCSolver(), get_solver("dspdc")], ids=["spdc", "dspdc"])
def test_iterate_carries_x_transpose_z(rng, solver):
    # the evaluation reads X^T z from the iterate instead of the rows: it has to be the
    # X^T z of the iterate's z (row and class weights included), and the evaluation with it
    # has to give the values of the full pass
    n, d = 300, 20
    X = sp.random(n, d, density=0.4, random_state=rng, format="csr")
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    data = as_dataset(X, y, sample_weight=rng.uniform(0.2, 2.0, size=n), rows_per_block=70)
    problem = Problem("logistic", "l2", 0.02, class_weight={-1: 1.0, 1: 3.0})
    state = run_solver(solver, problem, data, 3, seed=5)
    iterate = solver.iterate(state)
    z = np.concatenate(iterate.z)
    np.testing.assert_allclose(iterate.xtz, X.T @ z, rtol=1e-12, atol=1e-12)
    full = problem.evaluate(iterate.w, data, z=z)
    given = problem.evaluate(iterate.w, data, z=iterate.z, z_bounds=iterate.z_bounds,
                             xtz=iterate.xtz)  # fmt: skip
    assert 0.0 < given.gap == pytest.approx(full.gap, rel=1e-9)
    assert given.dual == pytest.approx(full.dual, rel=1e-12)


def test_certificate_is_the_evaluation_of_the_iterate(local_cluster, rng, tmp_path):
    # on a cluster the certificate reads w and X^T z where the chain left them: the same
    # numbers as the client's evaluation of the gathered iterate (which recomputes X^T z)
    from daskpd.data import write_dataset

    n, d = 240, 30
    X = sp.random(n, d, density=0.3, random_state=rng, format="csr")
    y = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)
    data = write_dataset(X, y, tmp_path / "d.zarr", rows_per_block=60)
    problem = Problem("logistic", "l2", 0.01)
    solver = SPDCSolver()
    for client in (local_cluster, None):
        # in-process: the local scheduler, not the session's cluster (as solve does)
        context = dask.config.set(scheduler="threads") if client is None else client.as_current()
        with context:
            state = run_solver(solver, problem, data, 3, seed=2, client=client, threads=1)
            assert hasattr(state.carry, "key") == (client is not None)
            primal, dual = solver.certificate(state)
            iterate = solver.iterate(state)
            # on the cluster only w comes to the client; X^T z stays a future on its worker
            assert hasattr(iterate.xtz, "key") == (client is not None)
            xtz = iterate.xtz.result() if client is not None else iterate.xtz
            given = problem.evaluate(iterate.w, data, z=iterate.z, z_bounds=iterate.z_bounds,
                                     xtz=iterate.xtz, client=client)  # fmt: skip
        z = np.concatenate(solver_dual(state))
        np.testing.assert_allclose(xtz, X.T @ z, rtol=1e-12, atol=1e-12)
        full = problem.evaluate(iterate.w, (X, y), z=z)
        assert primal == pytest.approx(full.primal, rel=1e-12)
        assert dual == pytest.approx(full.dual, rel=1e-12)
        assert given.dual == pytest.approx(full.dual, rel=1e-12)
        assert 0.0 < primal - dual < primal


def solver_dual(state):
    from daskpd.solvers.common.chain import gather_dual

    return gather_dual(state)


def test_driver_certifies_at_the_cadence_and_evaluates_at_the_end(rng, monkeypatch):
    # SPDC's certificate stands in for the cadence's evaluations; the run's last epoch, a
    # stop by tol and test metrics get the full evaluation of the gathered iterate
    n, d = 300, 12
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)
    data = as_dataset(X, y, rows_per_block=100)
    result = solve(data, "logistic", "l2", 0.05, solver="spdc", max_epochs=6, tol=0.0,
                   eval_every=2, client=False)  # fmt: skip
    rows = [(r["epoch"], r.get("certificate_only", False)) for r in result.history]
    assert rows == [(2, True), (4, True), (6, False)]
    # a stop by tol: the first certificate within tol becomes the full row of that epoch,
    # with w gathered and no second pass (one evaluation a row, counted by a spy)
    calls = []
    evaluate = Problem.evaluate

    def counted(self, *args, **kwargs):
        calls.append(1)
        return evaluate(self, *args, **kwargs)

    monkeypatch.setattr(Problem, "evaluate", counted)
    result = solve(data, "logistic", "l2", 0.05, solver="spdc", max_epochs=200, tol=1e-6,
                   eval_every=1, client=False)  # fmt: skip
    monkeypatch.setattr(Problem, "evaluate", evaluate)
    assert result.stop_reason == "tol" and result.converged
    last = result.history[-1]
    assert not last.get("certificate_only", False) and last["gap"] <= 1e-6
    assert all(r["gap"] > 1e-6 for r in result.history[:-1])
    assert all(r.get("certificate_only", False) for r in result.history[:-1])
    assert len(calls) == len(result.history) == result.n_epochs
    # the row's numbers are those of the returned (w, z), evaluated independently
    full = Problem("logistic", "l2", 0.05).evaluate(result.w, (X, y), z=np.concatenate(result.z))
    assert last["primal"] == pytest.approx(full.primal, rel=1e-12)
    assert last["dual"] == pytest.approx(full.dual, rel=1e-12)
    # with test data every evaluation is a full one (the metrics need w)
    result = solve(data, "logistic", "l2", 0.05, solver="spdc", max_epochs=4, tol=0.0,
                   eval_every=2, client=False, test_data=(X, y))  # fmt: skip
    assert [r.get("certificate_only", False) for r in result.history] == [False, False]
    assert all(any(key.startswith("test_") for key in r) for r in result.history)
