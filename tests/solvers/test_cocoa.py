"""CoCoA+ (solver="cocoa"): kernel and rounds against slow references, optimum against
liblinear and closed forms, the certificate, checkpoints, and real multi-process clusters."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pytest
import scipy.optimize
from _synthetic import sparse_problem

from daskpd.data import MemoryDataset, partition_dataset, write_dataset
from daskpd.kernels import cocoa as kernels
from daskpd.kernels import scalar
from daskpd.problem import Problem
from daskpd.solvers import Iterate, block_seeds, epoch_seed, solve
from daskpd.solvers.cocoa import Cocoa, CocoaOptions
from daskpd.solvers.common.groups import row_group_bounds as _row_bounds

LOSSES = ["hinge", "squared_hinge", "smooth_hinge", "logistic", "squared"]


def _data(n=240, **kwargs):
    return sparse_problem(n=n, **kwargs)


def _loss_data(loss, **kwargs):
    return _data(regression=loss == "squared", **kwargs)


# --------------------------------------------------------------------------------------------
# slow references


def _row(X, i):
    lo, hi = X.indptr[i], X.indptr[i + 1]
    return X.indices[lo:hi], X.data[lo:hi].astype(np.float64)


def _reference_step(loss, gamma, z, u, kappa, c, y):
    """Maximizer of -c loss*((z + d)/c) + d u - kappa d^2 / 2 over d, from the module's
    derivation, written independently (logistic: bisection, not Newton)."""
    if loss == "squared":
        return z + (u - y - z / c) / (1.0 / c + kappa)
    a, t = -y * z, y * u
    if loss == "hinge":
        new = c if kappa == 0 else min(max(a + (1.0 - t) / kappa, 0.0), c)
    elif loss == "squared_hinge":
        new = max(a + (1.0 - t - a / (2.0 * c)) / (kappa + 1.0 / (2.0 * c)), 0.0)
    elif loss == "smooth_hinge":
        new = min(max(a + (1.0 - t - gamma * a / c) / (kappa + gamma / c), 0.0), c)
    else:
        lo, hi = 0.0, c
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if math.log((c - mid) / mid) - t - kappa * (mid - a) > 0:
                lo = mid
            else:
                hi = mid
        new = 0.5 * (lo + hi)
    return -y * new


#: the curvature ``D`` of the folded box duals' gradient ``G = t - 1 + D a``, per loss
_BOX_CURVATURE = {
    "hinge": lambda gamma, c: 0.0,
    "smooth_hinge": lambda gamma, c: gamma / c,
    "squared_hinge": lambda gamma, c: 1.0 / (2.0 * c),
}


def _v(pack):
    """``v`` of every record of a pack: thread 0's ``v`` plus the other threads' slots."""
    return pack[:, kernels.PACK_V] + pack[:, kernels.PACK_SLOT :].sum(axis=1)


def _reference_pass(X, y, c, z, w, order, loss, gamma, sigma, n_total, alpha, held=None):
    """One CoCoA+ local pass in plain Python: returns (z, v, loss_sum, conj_sum).

    ``held`` (box losses): filled with each visited row's gradient ``G`` before its step
    where the step is 0, else NaN."""
    z, v = z.copy(), w.copy()
    loss_obj = Problem(loss, "l2", alpha).loss
    loss_sum = conj_sum = 0.0
    for i in order:
        if c[i] == 0:
            continue
        cols, vals = _row(X, i)
        u = sum(float(x) * v[j] for j, x in zip(cols, vals, strict=True))
        u0 = sum(float(x) * w[j] for j, x in zip(cols, vals, strict=True))
        loss_sum += c[i] * float(loss_obj.value(np.array([u0]), np.array([y[i]]))[0])
        conj_sum += c[i] * float(loss_obj.conjugate(np.array([z[i] / c[i]]), np.array([y[i]]))[0])
        # the kernel's operations in its order (so one group gives the same bits)
        inv_alpha_n = 1.0 / (alpha * n_total)
        kappa = sigma * inv_alpha_n * sum(float(x) * float(x) for x in vals)
        new = _reference_step(loss, gamma, z[i], u, kappa, c[i], y[i])
        delta = new - z[i]
        if held is not None:
            a = -y[i] * z[i]
            gradient = y[i] * u - 1.0 + _BOX_CURVATURE[loss](gamma, c[i]) * a
            held[i] = gradient if delta == 0.0 else math.nan
        z[i] = new
        v[cols] += -(sigma * delta) * inv_alpha_n * vals
    return z, v, loss_sum, conj_sum


def _reference_rounds(X, y, c, alpha, loss, grid, n_rounds, seed, gamma=1.0, sigma=None):
    """CoCoA+ rounds on one process: every group's pass from the same w, the updates added."""
    data = MemoryDataset(X, y)
    bounds = _row_bounds(data, grid)
    sigma = float(grid) if sigma is None else sigma
    n, d = X.shape
    w, z = np.zeros(d), np.zeros(n)
    for t in range(1, n_rounds + 1):
        seeds = block_seeds(epoch_seed(np.random.SeedSequence(seed), t), grid)
        new_w = w.copy()
        for k in range(grid):
            lo, hi = bounds[k], bounds[k + 1]
            order = np.random.default_rng(seeds[k]).permutation(hi - lo)
            zk, v, _, _ = _reference_pass(
                X[lo:hi], y[lo:hi], c[lo:hi], z[lo:hi], w, order, loss, gamma, sigma, n, alpha
            )
            z[lo:hi] = zk
            new_w += (v - w) / sigma
        # one group: serial dual coordinate ascent, whose w is the pass's v itself
        w = v if grid == 1 and sigma == 1.0 else new_w
    return w, z


def _run(data, problem, grid, n_rounds, seed=0, client=None, **options):
    solver = Cocoa()
    options = CocoaOptions(grid=grid, **options)
    solver.check(problem, data, options)
    state = solver.init(
        problem, data, seed=np.random.SeedSequence(seed), client=client, options=options
    )
    for epoch in range(1, n_rounds + 1):
        state = solver.run_epoch(state, epoch)
    return solver, state


# --------------------------------------------------------------------------------------------
# kernel and rounds against the references


@pytest.mark.parametrize("loss", LOSSES)
def test_kernel_pass_equals_reference_for_two_groups(loss):
    X, y = _loss_data(loss, n=60, d=12, seed=1)
    X = X.astype(np.float64)
    rng = np.random.default_rng(2)
    alpha, sigma, n_total = 0.05, 2.0, 120  # one group of two: the global n is twice m
    c = rng.uniform(0.5, 2.0, 60)
    c[3] = 0.0
    w = rng.normal(scale=0.3, size=12)
    problem = Problem(loss, "l2", alpha)
    lo = np.empty(60)
    hi = np.empty(60)
    scalar.loss_dual_bounds_array(problem.loss.code, problem.loss.params, y, lo, hi)
    with np.errstate(invalid="ignore"):  # inf * 0 of the weight-0 row, set below
        start = np.clip(rng.normal(scale=0.3, size=60) * c, lo * c, hi * c)
    if loss == "logistic":
        start = np.clip(start, lo * c * (1 - 1e-6), hi * c * (1 - 1e-6))
    start[3] = 0.0
    order = rng.permutation(60)
    z = start.copy()
    # the kernel works on the group's own columns
    columns, local = kernels.local_columns(X.indices, 12)
    assert np.array_equal(columns, np.unique(X.indices))
    assert np.array_equal(columns[local], X.indices)
    pack = np.empty((columns.shape[0], kernels.pack_width(1)))
    kernels.start_pack(w, columns, pack)
    norm_sq = np.empty(60)
    kernels.row_norms(X.indptr.astype(np.int64), X.data, False, norm_sq)
    pg_range = np.zeros(2)
    boxed = loss in _BOX_CURVATURE
    held = np.full(60, np.nan) if boxed else np.empty(0)
    loss_sum, conj_sum, skipped = kernels.cocoa_pass(
        kernels.GroupRows(X.indptr.astype(np.int64), local, X.data, False, y, c, norm_sq),
        z, pack, order[None, :], problem.loss.code, problem.loss.params,
        kernels.PassSteps(sigma, 1.0 / (alpha * n_total)), pg_range, held, kernels.PACK_V,
        kernels.NO_BOUNDS,
    )  # fmt: skip
    assert skipped == 0
    ref_held = np.full(60, np.nan) if boxed else None
    ref_z, ref_v, ref_loss, ref_conj = _reference_pass(
        X, y, c, start, w, order, loss, 1.0, sigma, n_total, alpha, ref_held
    )
    if boxed:
        # NaN where the row stepped (or has weight 0), in both
        np.testing.assert_allclose(held, ref_held, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(z, ref_z, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(_v(pack), ref_v[columns], rtol=1e-12, atol=1e-14)
    assert np.array_equal(pack[:, kernels.PACK_W], w[columns])
    # the group's update, added to w on its columns
    step = np.empty(columns.shape[0])
    kernels.finish_pack(pack, sigma, False, step)
    added = w.copy()
    kernels.add_step(added, columns, step, False)
    np.testing.assert_allclose(added, w + (ref_v - w) / sigma, rtol=1e-12, atol=1e-14)
    assert kernels.squared_norm(w) == pytest.approx(w @ w, rel=1e-14)
    assert loss_sum == pytest.approx(ref_loss, rel=1e-12)
    assert conj_sum == pytest.approx(ref_conj, rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("binary", [False, True], ids=["values", "binary"])
def test_one_group_is_serial_dual_coordinate_ascent(loss, binary):
    X, y = _loss_data(loss, seed=3, binary=binary)
    c = np.ones(X.shape[0])
    data = MemoryDataset(X, y)
    assert data.binary == binary
    problem = Problem(loss, "l2", 0.02)
    # the references run one pass a round: no shrunk passes after it, and no screening (a
    # row proven inactive at the round's start is left out where a serial pass could step
    # it at its moving v; the screened rounds are tested below, under "screening")
    solver, state = _run(
        data, problem, grid=1, n_rounds=3, seed=5, shrinking=False, screening=False
    )
    assert state.settings.direct
    w, z = _reference_rounds(X, y, c, 0.02, loss, grid=1, n_rounds=3, seed=5)
    if loss == "logistic":
        # bisection against Newton: the same root to ~1e-16 relative
        np.testing.assert_allclose(state.w[0], w, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(np.concatenate(state.z), z, rtol=1e-10, atol=1e-13)
    else:
        # the same operations in the same order: the same bits
        assert np.array_equal(state.w[0], w)
        assert np.array_equal(np.concatenate(state.z), z)


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_rounds_equal_reference_for_three_groups(loss):
    X, y = _loss_data(loss, seed=4)
    rng = np.random.default_rng(4)
    c = rng.uniform(0.5, 1.5, X.shape[0])
    data = MemoryDataset(X, y, sample_weight=c)
    problem = Problem(loss, "l2", 0.02)
    # the reference reads every row: no screening (tested under "screening")
    _, state = _run(data, problem, grid=3, n_rounds=3, seed=8, shrinking=False, screening=False)
    w, z = _reference_rounds(X, y, c, 0.02, loss, grid=3, n_rounds=3, seed=8)
    np.testing.assert_allclose(state.w[0], w, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(np.concatenate(state.z), z, rtol=1e-10, atol=1e-13)


# --------------------------------------------------------------------------------------------
# optimum against independent solvers


def _liblinear(loss, X, y, alpha, weight=None):
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    C = 1.0 / (alpha * X.shape[0])
    common = {"C": C, "fit_intercept": False, "tol": 1e-10, "max_iter": 1_000_000}
    if loss == "logistic":
        model = LogisticRegression(solver="liblinear", random_state=0, **common)
    else:
        model = LinearSVC(loss=loss, dual=True, random_state=0, **common)
    model.fit(X, y, sample_weight=weight)
    return model.coef_.ravel()


@pytest.mark.parametrize(
    "loss,weighted",
    [("hinge", False), ("hinge", True), ("squared_hinge", False), ("logistic", True)],
    ids=["hinge", "hinge-weighted", "squared_hinge", "logistic-weighted"],
)
def test_reaches_liblinear_optimum(loss, weighted):
    X, y = _data(n=300, d=30, seed=6)
    alpha = 0.01
    rng = np.random.default_rng(6)
    sample_weight = rng.uniform(0.5, 2.0, X.shape[0]) if weighted else None
    class_weight = {-1: 1.0, 1: 3.0} if weighted else None
    data = MemoryDataset(X, y, sample_weight=sample_weight)
    result = solve(
        data, loss=loss, alpha=alpha, solver="cocoa", grid=2, tol=1e-6, max_epochs=3000,
        class_weight=class_weight, client=False,
    )  # fmt: skip
    assert result.converged and result.gap <= 1e-6
    weight = np.ones(X.shape[0]) if sample_weight is None else sample_weight.copy()
    if class_weight:
        weight *= np.where(y > 0, class_weight[1], class_weight[-1])
    reference = _liblinear(loss, X, y, alpha, weight)
    problem = Problem(loss, "l2", alpha, class_weight=class_weight)
    p_ref = problem.evaluate(reference, data).primal
    # weak duality against the independent optimum, and ours within the certified gap
    assert result.dual <= p_ref + 1e-12
    assert result.primal <= p_ref + 1e-6
    # strong convexity: ||w - w*||^2 <= 2 gap / alpha
    assert np.linalg.norm(result.w - reference) <= math.sqrt(2 * 1e-6 / alpha) + 1e-6


@pytest.mark.parametrize("loss", ["hinge", "logistic", "squared_hinge"])
def test_threads_share_v_and_the_certificate_stays_exact(loss):
    # Two threads read one group's v without locks, each adding to its own slots; each
    # round's w is the slots' exact sum, so every reported (primal, dual) is the exact pair
    # of a point and the run still reaches liblinear's optimum.
    X, y = _data(n=400, d=30, seed=23)
    alpha = 0.01
    weight = np.random.default_rng(23).uniform(0.5, 2.0, X.shape[0])
    data = MemoryDataset(X, y, sample_weight=weight)
    problem = Problem(loss, "l2", alpha)
    checked = []

    def check(info):
        point = info.current_iterate()
        exact = problem.evaluate(np.asarray(point.w), data, z=point.z, z_bounds=point.z_bounds)
        checked.append((info.row["primal"], exact.primal, info.row["dual"], exact.dual))

    result = solve(
        data, loss=loss, alpha=alpha, solver="cocoa", threads=2, tol=1e-6, max_epochs=3000,
        eval_every=1, client=False, callbacks=[check],
    )  # fmt: skip
    assert result.converged and result.gap <= 1e-6
    for primal, exact_primal, dual, exact_dual in checked:
        assert primal == pytest.approx(exact_primal, rel=1e-10)
        # w = w(z) to rounding: the dual of the pair is the dual of z
        assert dual == pytest.approx(exact_dual, rel=1e-9, abs=1e-12)
    reference = _liblinear(loss, X, y, alpha, weight)
    p_ref = problem.evaluate(reference, data).primal
    assert result.dual <= p_ref + 1e-12 and result.primal <= p_ref + 1e-6
    with pytest.raises(ValueError, match="threads"):
        CocoaOptions(threads=0)
    # a record of w and the threads' slots fills at most one cache line
    with pytest.raises(ValueError, match="threads must be at most 7"):
        CocoaOptions(threads=8)


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_a_rounds_step_is_the_exact_change_of_w_in_any_number_of_threads(loss, threads):
    # each thread adds its steps to its own slot of the records: none is lost to a race, so
    # the slots' sum is -X^T dz / (alpha n) of the round's change of z, the certificate's w
    from daskpd.solvers.cocoa import _tasks
    from daskpd.solvers.cocoa._options import _settings

    X, y = _data(n=400, d=30, seed=31)
    data = MemoryDataset(X, y)
    problem = Problem(loss, "l2", 1e-3)
    settings = dataclasses.replace(_settings(problem, data, CocoaOptions(), 1), threads=threads)
    group = _tasks._load_group(data, 0, 400, None, False)
    z = np.zeros(400)
    w = np.zeros(30)
    for round_ in range(3):
        new_z, step, *_ = _tasks._round_task(group, z, None, w, round_, settings, True)
        exact = w - X.T.astype(np.float64) @ (new_z - z) / (problem.alpha * 400)
        # direct (one group): the step is the next w itself
        np.testing.assert_allclose(step, exact, rtol=1e-12, atol=1e-14)
        assert not np.array_equal(new_z, z)
        z, w = new_z, step


@pytest.mark.parametrize("threads", [1, 2])
def test_a_round_reuses_the_last_rounds_records_and_cannot_be_run_twice(threads):
    """A resident group's round writes into the records its previous round handed back:
    each round's certificate is still that of its start and its step the exact change of w
    (no field keeps a value of the round before), in one thread the same bits as rounds in
    new memory (threaded rounds are not bit-reproducible); a round's shrunk passes run
    once."""
    from daskpd.solvers.cocoa import _tasks
    from daskpd.solvers.cocoa._options import _settings

    X, y = _data(n=400, d=30, seed=32)
    data = MemoryDataset(X, y)
    problem = Problem("hinge", "l2", 1e-3)
    settings = dataclasses.replace(_settings(problem, data, CocoaOptions(), 1), threads=threads)
    group = _tasks._load_group(data, 0, 400, None, False)
    assert group.spare == []
    runs = []
    for kept in (group, group._replace(spare=None)):
        z, w, bounds, outs, packs = np.zeros(400), np.zeros(30), None, [], []
        for round_ in range(4):
            passed = _tasks._pass_task(kept, z, None, w, round_, settings, True, bounds)
            packs.append(passed.pack[0])
            new_z, step, stats, bounds = _tasks._shrunk_task(kept, passed, settings)
            # the certificate of the round's start, w in the records included
            hinge = np.maximum(0.0, 1.0 - y * (X.astype(np.float64) @ w)).sum()
            assert stats[0] == pytest.approx(hinge, rel=1e-10, abs=1e-12)
            assert stats[2] == pytest.approx(w @ w, rel=1e-12)
            exact = w - X.T.astype(np.float64) @ (new_z - z) / (problem.alpha * 400)
            assert np.all(np.isfinite(step)) and np.all(np.isfinite(new_z))
            np.testing.assert_allclose(step, exact, rtol=1e-12, atol=1e-14)
            z, w = new_z, step
            outs.append((z, w, stats, bounds))
            with pytest.raises(RuntimeError, match="spent by its shrunk passes"):
                _tasks._shrunk_task(kept, passed, settings)
        runs.append((outs, packs))
    (reused, packs), (fresh, fresh_packs) = runs
    assert all(pack is packs[0] for pack in packs[1:])
    pairs = zip(fresh_packs[:-1], fresh_packs[1:], strict=True)
    assert not any(np.shares_memory(a, b) for a, b in pairs)
    if threads == 1:
        for a, b in zip(reused, fresh, strict=True):
            for x, x_fresh in zip(a, b, strict=True):
                assert np.array_equal(x, x_fresh)


def test_the_sum_of_one_group_on_every_column_is_its_step():
    """Direct mode: one group on every column hands its step on as the next w (no copy);
    a group on some columns, or added steps, write into a copy of w."""
    from daskpd.solvers.cocoa import _tasks

    rng = np.random.default_rng(33)
    w, step = rng.normal(size=6), rng.normal(size=6)
    every = np.arange(6, dtype=np.int32)
    assert _tasks._sum_task(w, True, None, step, every) is step
    assert _tasks._sum_task(w, True, 1, (None, step), every) is step
    some = np.array([1, 4], dtype=np.int32)
    part = _tasks._sum_task(w, True, None, step[:2], some)
    expected = w.copy()
    expected[some] = step[:2]
    assert np.array_equal(part, expected) and not np.shares_memory(part, w)
    added = _tasks._sum_task(w, False, None, step, every)
    assert np.array_equal(added, w + step)


def test_smooth_hinge_reaches_the_lbfgs_optimum():
    X, y = _data(n=300, d=30, seed=7)
    alpha = 0.01
    problem = Problem("smooth_hinge", "l2", alpha)
    result = solve(
        (X, y), loss="smooth_hinge", alpha=alpha, solver="cocoa", grid=2, tol=1e-6,
        max_epochs=3000, client=False,
    )  # fmt: skip
    assert result.converged
    Xd = X.toarray().astype(np.float64)

    def objective(w):
        u = Xd @ w
        loss = problem.loss.value(u, y)
        grad = Xd.T @ problem.loss.gradient(u, y) / len(y) + alpha * w
        return loss.mean() + 0.5 * alpha * w @ w, grad

    optimum = scipy.optimize.minimize(
        objective, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B",
        options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000},
    )  # fmt: skip
    assert result.dual <= optimum.fun + 1e-12
    assert result.primal <= optimum.fun + 1e-6


def test_squared_loss_reaches_the_ridge_closed_form():
    X, y = _data(n=300, d=30, seed=8, regression=True)
    alpha = 0.01
    weight = np.random.default_rng(8).uniform(0.5, 2.0, 300)
    result = solve(
        MemoryDataset(X, y, sample_weight=weight), loss="squared", alpha=alpha, solver="cocoa",
        grid=2, tol=1e-6, max_epochs=3000, client=False,
    )  # fmt: skip
    assert result.converged
    Xd = X.toarray().astype(np.float64)
    n = X.shape[0]
    closed = np.linalg.solve(
        Xd.T @ (weight[:, None] * Xd) / n + alpha * np.eye(30), Xd.T @ (weight * y) / n
    )
    assert np.linalg.norm(result.w - closed) <= math.sqrt(2 * 1e-6 / alpha)
    p_star = (
        Problem("squared", "l2", alpha)
        .evaluate(closed, MemoryDataset(X, y, sample_weight=weight))
        .primal
    )
    assert result.dual <= p_star + 1e-12 and result.primal <= p_star + 1e-6


# --------------------------------------------------------------------------------------------
# the certificate and the rounds


def test_dual_rises_every_round():
    X, y = _data(seed=9)
    result = solve(
        (X, y), loss="hinge", alpha=0.01, solver="cocoa", grid=4, tol=0.0, max_epochs=40,
        eval_every=1, client=False,
    )  # fmt: skip
    duals = np.array([row["dual"] for row in result.history])
    assert np.all(np.diff(duals) >= -1e-14 * np.abs(duals[1:]))
    assert duals[-1] > duals[0]
    gaps = np.array([row["gap"] for row in result.history])
    assert gaps[-1] < gaps[0]


@pytest.mark.parametrize("loss", LOSSES)
def test_reported_certificate_is_the_evaluation_of_the_returned_point(loss):
    X, y = _loss_data(loss, seed=10)
    weight = np.random.default_rng(10).uniform(0.5, 2.0, X.shape[0])
    data = MemoryDataset(X, y, sample_weight=weight)
    result = solve(
        data, loss=loss, alpha=0.01, solver="cocoa", grid=3, tol=0.0, max_epochs=4,
        client=False,
    )  # fmt: skip
    evaluation = Problem(loss, "l2", 0.01).evaluate(
        result.w, data, z=result.z, z_bounds=_row_bounds(data, 3)
    )
    assert result.primal == pytest.approx(evaluation.primal, rel=1e-10)
    assert result.dual == pytest.approx(evaluation.dual, rel=1e-10)
    # one round behind: the returned w is the start of round 4
    solver, state = _run(data, Problem(loss, "l2", 0.01), grid=3, n_rounds=3)
    assert np.array_equal(result.w, state.w[0])


def test_one_compute_per_round_and_none_for_the_certificate(counting_scheduler):
    X, y = _data(seed=11)
    result = solve(
        (X, y),
        loss="logistic",
        alpha=0.01,
        solver="cocoa",
        grid=2,
        tol=0.0,
        max_epochs=5,
        eval_every=1,
    )
    assert result.n_epochs == 5 and len(result.history) == 5
    assert counting_scheduler.calls == 5


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_every_round_is_certified_without_an_evaluation(loss):
    # eval_every=1000 skips every evaluation but the last: the rows before it come from the
    # rounds' own sums, and each is the exact objective of the point the round started from.
    X, y = _loss_data(loss, seed=12)
    X_test, y_test = _loss_data(loss, seed=13)
    problem = Problem(loss, "l2", 1e-3)
    seen = []

    def check(info):
        if info.row is not None and info.row.get("certificate_only"):
            w = info.current_iterate().w
            seen.append((info.row, problem.evaluate(np.asarray(w), (X, y))))

    common = {"loss": loss, "alpha": 1e-3, "solver": "cocoa", "grid": 2, "client": False}
    tight = solve((X, y), tol=0.0, max_epochs=6, eval_every=1, **common)
    sparse = solve(
        (X, y), tol=0.0, max_epochs=6, eval_every=1000, callbacks=[check],
        test_data=(X_test, y_test), **common,
    )  # fmt: skip
    assert [row["epoch"] for row in sparse.history] == [1, 2, 3, 4, 5, 6]
    assert [row.get("certificate_only", False) for row in sparse.history] == [True] * 5 + [False]
    # the last row is a full evaluation, with the test metrics
    assert "test_auprc" in sparse.history[-1] and "test_auprc" not in sparse.history[0]
    for a, b in zip(sparse.history, tight.history, strict=True):
        assert (a["primal"], a["dual"], a["gap"]) == (b["primal"], b["dual"], b["gap"])
    assert len(seen) == 5
    for row, evaluation in seen:
        assert row["primal"] == pytest.approx(evaluation.primal, rel=1e-10)
        assert row["dual"] <= evaluation.primal
    # stopped by tol at the first certified round, with a full row
    target = tight.history[3]["gap"]
    stopped = solve((X, y), tol=target, max_epochs=50, eval_every=1000, **common)
    assert stopped.stop_reason == "tol" and stopped.n_epochs == 4
    assert not stopped.history[-1].get("certificate_only", False)
    assert stopped.gap == target


def test_auto_cadence_reads_the_certificate_and_gathers_w_once(monkeypatch):
    # eval_every="auto" and no test data: an evaluation would only gather w (the rounds
    # certify themselves), so every row before the stop is the certificate and w is
    # gathered once, at the first round within tol. With test data the cadence's first
    # evaluation still comes (its metrics need the model).
    from daskpd.solvers.cocoa import Cocoa

    X, y = _loss_data("hinge", seed=12)
    X_test, y_test = _loss_data("hinge", seed=13)
    fetched = []
    iterate = Cocoa.iterate

    def counted(self, state):
        fetched.append(state.epoch)
        return iterate(self, state)

    monkeypatch.setattr(Cocoa, "iterate", counted)
    common = {"loss": "hinge", "alpha": 1e-3, "solver": "cocoa", "client": False}
    exact = solve((X, y), tol=0.0, max_epochs=6, eval_every=1, **common)
    target = exact.history[3]["gap"]
    fetched.clear()
    auto = solve((X, y), tol=target, max_epochs=50, **common)
    assert auto.stop_reason == "tol" and auto.n_epochs == 4
    assert [row.get("certificate_only", False) for row in auto.history] == [True] * 3 + [False]
    assert fetched == [4]
    for a, b in zip(auto.history, exact.history, strict=False):
        assert (a["primal"], a["dual"]) == (b["primal"], b["dual"])
    np.testing.assert_array_equal(auto.w, solve((X, y), tol=0.0, max_epochs=4, **common).w)
    fetched.clear()
    tested = solve((X, y), tol=target, max_epochs=50, test_data=(X_test, y_test), **common)
    assert "test_auprc" in tested.history[0] and not tested.history[0].get("certificate_only")
    assert fetched[0] == 1 and tested.n_epochs == 4


@pytest.mark.parametrize("threads", [1, 2])
def test_a_round_certified_within_tol_skips_its_shrunk_passes(monkeypatch, threads):
    # The run stops at the first round whose certifying pass shows gap <= tol and returns
    # that round's start: its shrunk passes (one call a thread every other round) are
    # skipped. One thread (bit-reproducible): against a run stopped by a callback at the
    # same certificate (tol = 0: every pass runs), the same point and rows.
    X, y = _data(n=400, d=30, seed=31)
    calls = []
    real = kernels.shrunk_passes

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(kernels, "shrunk_passes", counted)
    common = {"loss": "hinge", "alpha": 1e-3, "solver": "cocoa", "client": False,
              "threads": threads, "eval_every": 1, "max_epochs": 50}  # fmt: skip
    full = solve((X, y), tol=0.0, **common)
    target = full.history[3]["gap"]
    calls.clear()
    by_callback = solve(
        (X, y), tol=0.0, callbacks=[lambda info: info.row["gap"] <= target], **common
    )
    assert len(calls) == threads * by_callback.n_epochs
    calls.clear()
    by_tol = solve((X, y), tol=target, **common)
    assert by_tol.stop_reason == "tol" and by_tol.gap <= target
    assert len(calls) == threads * (by_tol.n_epochs - 1)
    if threads == 1:
        assert by_tol.n_epochs == by_callback.n_epochs == 4
        np.testing.assert_array_equal(by_tol.w, by_callback.w)
        assert [r["gap"] for r in by_tol.history] == [r["gap"] for r in by_callback.history]
    # several row groups: each has only its share of the certificate, every pass runs
    one_thread = {**common, "threads": 1, "grid": 2}
    loose = solve((X, y), tol=0.0, **{**one_thread, "max_epochs": 4}).history[2]["gap"]
    calls.clear()
    grouped = solve((X, y), tol=loose, **one_thread)
    assert grouped.stop_reason == "tol" and grouped.n_epochs == 3
    assert len(calls) == 2 * grouped.n_epochs


@pytest.mark.parametrize("grid", [2, 1])
def test_checkpoint_resume_gives_the_same_bits(tmp_path, grid):
    """The rounds screen (hinge): the margin bounds are in the checkpoint, so the resumed
    rounds leave out the rows the straight run's do."""
    X, y = _data(seed=12)
    data = write_dataset(X, y, tmp_path / "train.zarr", rows_per_block=60)
    common = {"loss": "hinge", "alpha": 0.01, "solver": "cocoa", "grid": grid, "tol": 0.0,
              "eval_every": 1}  # fmt: skip
    problem = Problem("hinge", "l2", 0.01)
    solver, state = _run(data, problem, grid=grid, n_rounds=6)
    assert state.settings.screening and sum(part[5] for part in state.stats) > 0
    arrays = solver.state_arrays(state)
    assert np.array_equal(arrays["bounds"], np.concatenate(state.bounds))
    back = solver.restore(
        problem, data, arrays, seed=np.random.SeedSequence(0), client=None,
        options=CocoaOptions(grid=grid),
    )  # fmt: skip
    assert np.array_equal(np.concatenate(back.bounds), arrays["bounds"])
    straight = solve(data, max_epochs=8, client=False, **common)
    solve(data, max_epochs=5, client=False, checkpoint_dir=tmp_path / "ck", **common)
    resumed = solve(
        data, max_epochs=8, client=False, checkpoint_dir=tmp_path / "ck", resume=True, **common
    )
    assert np.array_equal(resumed.w, straight.w)
    assert [r["gap"] for r in resumed.history] == [r["gap"] for r in straight.history]
    # resuming from the final checkpoint reports the same point
    again = solve(
        data, max_epochs=8, client=False, checkpoint_dir=tmp_path / "ck", resume=True, **common
    )
    assert np.array_equal(again.w, straight.w) and again.gap == straight.gap


def test_row_groups_are_the_grid_row_groups(tmp_path):
    X, y = _data(n=400, seed=13)
    data = write_dataset(X, y, tmp_path / "train.zarr", rows_per_block=70)
    computed = _row_bounds(data, 3)
    stored = partition_dataset(data.path, grid=3)
    assert np.array_equal(computed, stored.grid(3).row_bounds)
    memory = MemoryDataset(X, y, rows_per_block=70)
    assert np.array_equal(_row_bounds(memory, 3), computed)
    # in memory and on disk, the same rounds
    common = {"loss": "hinge", "alpha": 0.01, "solver": "cocoa", "grid": 3, "tol": 0.0}
    a = solve(memory, max_epochs=3, client=False, **common)
    b = solve(stored, max_epochs=3, client=False, **common)
    assert np.array_equal(a.w, b.w)


def test_warm_start_from_a_dual_or_a_primal_point():
    X, y = _data(seed=14)
    data = MemoryDataset(X, y)
    common = {"loss": "logistic", "alpha": 0.01, "solver": "cocoa", "grid": 2, "client": False}
    first = solve(data, tol=1e-7, max_epochs=500, **common)
    z = np.concatenate(first.z)
    # from the dual point: w follows from z, and the run starts converged
    warm = solve(data, tol=1e-7, max_epochs=500, warm_start=Iterate(w=first.w, z=z), **common)
    assert warm.n_epochs == 1
    np.testing.assert_allclose(warm.w, first.w, rtol=1e-9, atol=1e-12)
    # from a primal point: its dual point z_i = c_i loss'(x_i . w)
    from_w = solve(data, tol=1e-7, max_epochs=500, warm_start=first.w, **common)
    assert from_w.n_epochs < first.n_epochs


def test_warm_start_on_a_cluster_sums_w_on_the_workers(local_cluster, disk_data):
    # the start's w is summed on its homes from the groups' X_k^T z_k (4 groups on 2
    # workers): the same point as in-process, and a start at an optimum stops at once
    common = {"loss": "hinge", "alpha": 1e-2, "solver": "cocoa", "grid": 4, "tol": 1e-6,
              "max_epochs": 500}  # fmt: skip
    first = solve(disk_data, client=False, **common)
    z = np.concatenate(first.z)
    scaled = Iterate(w=first.w, z=0.5 * z)
    problem = Problem("hinge", "l2", 1e-2)
    solver = Cocoa()
    options = CocoaOptions(grid=4)
    states = [
        solver.init(problem, disk_data, seed=np.random.SeedSequence(0), client=client,
                    options=options, warm_start=scaled)
        for client in (None, local_cluster)
    ]  # fmt: skip
    in_process, on_cluster = (solver.iterate(state) for state in states)
    np.testing.assert_allclose(on_cluster.w, in_process.w, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(on_cluster.w, 0.5 * first.w, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(
        np.concatenate(local_cluster.gather(on_cluster.z)), np.concatenate(in_process.z)
    )
    warm = solve(disk_data, client=local_cluster, warm_start=first, **common)
    assert warm.n_epochs == 1 and warm.gap <= 1e-6


def test_refuses_what_it_cannot_do():
    X, y = _data(n=40, seed=15)
    with pytest.raises(ValueError, match="regularizer='elasticnet'"):
        solve((X, y), loss="hinge", regularizer="elasticnet", solver="cocoa", client=False)
    with pytest.raises(ValueError, match="regularizer='l1'"):
        solve((X, y), loss="hinge", regularizer="l1", solver="cocoa", client=False)
    with pytest.raises(ValueError, match="loss='absolute'"):
        solve((X, y), loss="absolute", solver="cocoa", client=False)
    with pytest.raises(ValueError, match="sigma"):
        solve((X, y), solver="cocoa", sigma=0.0, client=False)
    with pytest.raises(ValueError, match="local_passes"):
        solve((X, y), solver="cocoa", local_passes=0, client=False)
    with pytest.raises(ValueError, match="shrinking=True .* loss='logistic'"):
        solve((X, y), loss="logistic", solver="cocoa", shrinking=True, client=False)
    with pytest.raises(ValueError, match="shrink_ratio"):
        solve((X, y), solver="cocoa", shrink_ratio=1.0, client=False)
    with pytest.raises(ValueError, match="max_shrunk_passes"):
        solve((X, y), solver="cocoa", max_shrunk_passes=0, client=False)
    for bad in (1.0, 0.5, "two", True):
        with pytest.raises(ValueError, match="cold_margin"):
            solve((X, y), solver="cocoa", cold_margin=bad, client=False)
    with pytest.raises(ValueError, match="screening=True .* loss='logistic'"):
        solve((X, y), loss="logistic", solver="cocoa", screening=True, client=False)
    with pytest.raises(ValueError, match="screening must be"):
        solve((X, y), solver="cocoa", screening="yes", client=False)
    with pytest.raises(ValueError, match="grid=41"):
        solve((X, y), solver="cocoa", grid=41, client=False)
    with pytest.raises(ValueError, match="unknown option"):
        solve((X, y), solver="cocoa", step="sqrt", client=False)


def test_local_passes_and_sigma_change_the_rounds():
    X, y = _data(seed=16)
    common = {
        "loss": "hinge", "alpha": 0.01, "solver": "cocoa", "grid": 2, "tol": 0.0,
        "shrinking": False,
    }  # fmt: skip
    base = solve((X, y), max_epochs=3, client=False, **common)
    more = solve((X, y), max_epochs=3, client=False, local_passes=3, **common)
    bold = solve((X, y), max_epochs=3, client=False, sigma=1.5, **common)
    assert not np.array_equal(base.w, more.w) and not np.array_equal(base.w, bold.w)
    assert more.history[-1]["dual"] > base.history[-1]["dual"]


def _dual_value(problem, X, y, c, z, alpha):
    """D(z) of the whole problem, from the loss's conjugate (independent of the kernels)."""
    n = X.shape[0]
    w = -(X.T @ z) / (alpha * n)
    conj = problem.loss.conjugate(z / c, y)
    return -(c * conj).sum() / n - 0.5 * alpha * (w @ w), w


def _box_group(loss, seed, zero_weights=0):
    """A 400-row group for the shrinking kernels: ``(X, y, c, problem, rows, columns,
    steps)``, alpha 0.01, weights in [0.5, 2] (the first ``zero_weights`` of them 0)."""
    X, y = _data(n=400, d=20, seed=seed)
    X = X.astype(np.float64)
    n = X.shape[0]
    c = np.random.default_rng(seed).uniform(0.5, 2.0, n)
    c[:zero_weights] = 0.0
    problem = Problem(loss, "l2", 0.01)
    indptr = X.indptr.astype(np.int64)
    columns, local = kernels.local_columns(X.indices, X.shape[1])
    norm_sq = np.empty(n)
    kernels.row_norms(indptr, X.data, False, norm_sq)
    rows = kernels.GroupRows(indptr, local, X.data, False, y, c, norm_sq)
    return X, y, c, problem, rows, columns, kernels.PassSteps(1.0, 1.0 / (0.01 * n))


def _serial_pass(rows, z, pack, orders, code, params, steps, pg_range, held=None):
    """One unscreened full pass in one thread (its steps in ``PACK_V``)."""
    held = np.empty(0) if held is None else held
    return kernels.cocoa_pass(
        rows, z, pack, orders, code, params, steps, pg_range, held, kernels.PACK_V,
        kernels.NO_BOUNDS,
    )  # fmt: skip


def _from_zero(columns, n, order_seed):
    """``(z, pack, pg_range, orders, held)`` of a group at ``z = 0`` and ``w = 0``, with one
    random order of its rows and no gradient held yet."""
    orders = np.random.default_rng(order_seed).permutation(n)[None, :]
    return np.zeros(n), np.zeros((columns.shape[0], 2)), np.zeros(2), orders, np.full(n, np.nan)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge", "smooth_hinge"])
def test_shrunk_passes_raise_the_dual_and_skip_settled_rows(loss):
    X, y, c, problem, rows, columns, steps = _box_group(loss, 21)
    n, alpha = X.shape[0], problem.alpha
    z = np.zeros(n)
    pack = np.zeros((columns.shape[0], 2))
    pg_range = np.zeros(2)
    code, params = problem.loss.code, problem.loss.params
    order = np.random.default_rng(0).permutation(n)[None, :]
    _serial_pass(rows, z, pack, order, code, params, steps, pg_range)
    # the full pass's projected gradients, recomputed from the rows as visited is not
    # possible afterwards; at least they straddle zero and are finite
    assert np.all(np.isfinite(pg_range)) and pg_range[0] >= 0.0 >= pg_range[1]
    before, _ = _dual_value(problem, X, y, c, z, alpha)
    passes, visited = kernels.shrunk_passes(
        rows,
        z,
        pack,
        code,
        params,
        steps,
        pg_range,
        0.0,
        25,
        7,
        np.arange(n, dtype=np.int64),
        kernels.PACK_V,
    )
    after, w = _dual_value(problem, X, y, c, z, alpha)
    assert passes == 25
    assert after > before
    # v is still w(z) of the dual point the passes reached
    np.testing.assert_allclose(_v(pack), w[columns], rtol=1e-10, atol=1e-13)
    # the dual stays in its box: a = -y z in [0, c] ([0, inf) for the squared hinge)
    a = -y * z
    assert np.all(a >= 0.0)
    if loss != "squared_hinge":
        assert np.all(a <= c * (1 + 1e-15))
    # rows left the active set: fewer nonzeros read than 25 full passes
    assert visited < 25 * X.nnz
    # and the point is near the optimum: the gap of w is small
    primal = problem.loss.value(X @ w, y) @ c / n + 0.5 * alpha * (w @ w)
    assert primal - after <= 1e-4 * primal


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge", "smooth_hinge"])
def test_shrink_candidates_leave_out_the_rows_the_full_pass_held_beyond_its_spread(loss):
    X, y, c, problem, rows, columns, steps = _box_group(loss, 23, zero_weights=5)
    n, alpha = X.shape[0], problem.alpha
    code, params = problem.loss.code, problem.loss.params
    z, pack, pg_range, orders, held = _from_zero(columns, n, 1)
    # a few rounds first, so that many rows sit at a bound
    for _ in range(3):
        _serial_pass(rows, z, pack, orders, code, params, steps, pg_range)
        kernels.shrunk_passes(
            rows, z, pack, code, params, steps, pg_range, 0.01, 20, 3, np.arange(n), kernels.PACK_V
        )
        pack[:, kernels.PACK_W] = pack[:, kernels.PACK_V]
    _serial_pass(rows, z, pack, orders, code, params, steps, pg_range, held)
    kept = kernels.shrink_candidates(rows, z, held, code, params, pg_range, orders[0], 1.0)
    assert pg_range[0] > 0  # the cold threshold plays no part
    # liblinear's test, written out
    old_max = pg_range[0] if pg_range[0] > 0 else np.inf
    old_min = pg_range[1] if pg_range[1] < 0 else -np.inf
    a = -y * z
    upper = np.inf if loss == "squared_hinge" else c
    dropped = ~np.isnan(held) & (((a <= 0) & (held > old_max)) | ((a >= upper) & (held < old_min)))
    expected = [i for i in orders[0] if c[i] != 0 and not dropped[i]]
    assert kept.tolist() == expected
    assert 0 < len(expected) < n - 5
    # the shrunk passes over the candidates alone still reach the optimum of the whole
    # (the rows of weight 0 keep z = 0 and add nothing)
    on = c > 0
    before, _ = _dual_value(problem, X, y, np.where(on, c, 1.0), z, alpha)
    kernels.shrunk_passes(
        rows, z, pack, code, params, steps, pg_range, 0.0, 50, 5, kept, kernels.PACK_V
    )
    assert np.all(z[~on] == 0.0)
    after, w = _dual_value(problem, X, y, np.where(on, c, 1.0), z, alpha)
    np.testing.assert_allclose(_v(pack), w[columns], rtol=1e-10, atol=1e-13)
    primal = problem.loss.value(X @ w, y) @ c / n + 0.5 * alpha * (w @ w)
    assert after >= before and primal - after <= 1e-4 * primal


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge", "smooth_hinge"])
def test_after_a_pass_from_zero_candidates_leave_out_the_rows_beyond_the_cold_margin(loss):
    X, y, c, problem, rows, columns, steps = _box_group(loss, 29, zero_weights=5)
    n, alpha = X.shape[0], problem.alpha
    code, params = problem.loss.code, problem.loss.params
    z, pack, pg_range, orders, held = _from_zero(columns, n, 2)
    _serial_pass(rows, z, pack, orders, code, params, steps, pg_range, held)
    # every row was at 0 before its step: no positive projected gradient, no threshold
    assert pg_range[0] <= 0
    everyone = [i for i in orders[0] if c[i] != 0]
    assert (
        kernels.shrink_candidates(rows, z, held, code, params, pg_range, orders[0], np.inf).tolist()
        == everyone
    )
    # margins at the visit: G = margin - 1 at a = 0 for every box loss
    for cold in (0.0, 0.5):
        kept = kernels.shrink_candidates(rows, z, held, code, params, pg_range, orders[0], cold)
        settled = (-y * z <= 0) & ~np.isnan(held) & (held > cold)
        assert kept.tolist() == [i for i in everyone if not settled[i]]
        assert 0 < len(kept) < len(everyone)
    # the shrunk passes over them, and a full pass after, still climb to the optimum
    on = c > 0
    before, _ = _dual_value(problem, X, y, np.where(on, c, 1.0), z, alpha)
    kernels.shrunk_passes(
        rows, z, pack, code, params, steps, pg_range, 0.0, 50, 5, kept, kernels.PACK_V
    )
    middle, _ = _dual_value(problem, X, y, np.where(on, c, 1.0), z, alpha)
    _serial_pass(rows, z, pack, orders, code, params, steps, pg_range, held)
    kept = kernels.shrink_candidates(rows, z, held, code, params, pg_range, orders[0], 0.5)
    kernels.shrunk_passes(
        rows, z, pack, code, params, steps, pg_range, 0.0, 200, 6, kept, kernels.PACK_V
    )
    after, w = _dual_value(problem, X, y, np.where(on, c, 1.0), z, alpha)
    assert before <= middle <= after
    np.testing.assert_allclose(_v(pack), w[columns], rtol=1e-10, atol=1e-13)
    primal = problem.loss.value(X @ w, y) @ c / n + 0.5 * alpha * (w @ w)
    assert primal - after <= 1e-4 * primal


def test_cold_margin_changes_the_first_round_only_and_not_the_optimum():
    X, y = _data(n=600, d=40, seed=22)
    common = {"loss": "hinge", "alpha": 0.001, "solver": "cocoa", "tol": 1e-6,
              "max_epochs": 5000, "eval_every": 1, "client": False}  # fmt: skip
    liblinear_rule = solve((X, y), cold_margin=np.inf, **common)
    default = solve((X, y), **common)
    assert liblinear_rule.converged and default.converged
    # the first certificate is of w = 0 either way; the first round's differ
    assert liblinear_rule.history[0]["gap"] == default.history[0]["gap"]
    assert liblinear_rule.history[1]["gap"] != default.history[1]["gap"]
    assert default.primal == pytest.approx(liblinear_rule.primal, rel=2e-6)


def test_shrinking_needs_fewer_rounds_to_the_same_optimum():
    X, y = _data(n=600, d=40, seed=22)
    common = {"loss": "hinge", "alpha": 0.001, "solver": "cocoa", "tol": 1e-6,
              "max_epochs": 5000, "eval_every": 1, "client": False}  # fmt: skip
    plain = solve((X, y), shrinking=False, **common)
    shrunk = solve((X, y), **common)
    assert plain.converged and shrunk.converged
    assert shrunk.n_epochs < plain.n_epochs / 2
    assert shrunk.primal == pytest.approx(plain.primal, rel=2e-6)
    np.testing.assert_allclose(shrunk.w, plain.w, rtol=0, atol=1e-2 * np.abs(plain.w).max())


# --------------------------------------------------------------------------------------------
# screening


def test_a_screened_pass_leaves_out_only_the_rows_proven_inactive():
    """Rows at z = 0 whose margin bound is above 1 are left out, and nothing else: the
    certificate sums are those of a pass that read every row, the visited rows' bounds
    become their exact margins, and the nonzeros left out are counted."""
    X, y = _data(n=200, d=20, seed=31, dtype=np.float64)
    n, d = X.shape
    rng = np.random.default_rng(31)
    w = rng.normal(size=d)
    margins = y * (X @ w)
    z = np.where(rng.uniform(size=n) < 0.3, -y * rng.uniform(0.1, 0.9, n), 0.0)
    bounds = margins - 0.05  # valid lower bounds
    c = np.ones(n)
    norm_sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    rows = kernels.GroupRows(X.indptr.astype(np.int64), X.indices, X.data, False, y, c, norm_sq)
    problem = Problem("hinge", "l2", 0.01)
    steps = kernels.PassSteps(1.0, 1.0 / (0.01 * n))
    order = rng.permutation(n)[None, :]
    results = []
    for given in (kernels.NO_BOUNDS, bounds.copy()):
        pack = np.empty((d, 2))
        kernels.start_pack(w, np.arange(d, dtype=np.int32), pack)
        zz, held, pg = z.copy(), np.full(n, np.nan), np.zeros(2)
        sums = kernels.cocoa_pass(
            rows, zz, pack, order, problem.loss.code, problem.loss.params, steps, pg, held,
            kernels.PACK_V, given,
        )  # fmt: skip
        results.append((sums, zz, held, given))
    (loss_all, conj_all, none_left), _, _, _ = results[0]
    (loss_sc, conj_sc, left), z_sc, held_sc, bounds_sc = results[1]
    out = (z == 0) & (bounds > kernels.SCREEN_MARGIN)
    assert 0 < out.sum() < n and none_left == 0
    assert left == int(np.diff(X.indptr)[out].sum())
    assert loss_sc == pytest.approx(loss_all, rel=1e-12)
    assert conj_sc == pytest.approx(conj_all, rel=1e-12)
    assert np.all(z_sc[out] == 0.0) and np.all(np.isinf(held_sc[out]))
    np.testing.assert_allclose(bounds_sc[~out], margins[~out], rtol=1e-12, atol=1e-12)
    assert np.array_equal(bounds_sc[out], bounds[out])


@pytest.mark.parametrize("binary", [False, True])
def test_refreshed_bounds_are_margins_less_the_rounding_and_only_where_they_can_screen(binary):
    """The refresh sets the bound of each row of weight > 0 at z = 0 whose bound does not
    already screen it to its margin at float32(w) less ||x_i|| ||w - float32(w)||, a lower
    bound of its exact margin; every other row keeps its bound; the nonzeros read are those
    rows'. Checked against NumPy on a thread's share of the rows."""
    X, y = _data(n=300, d=25, seed=41, dtype=np.float64)
    if binary:
        X.data[:] = 1.0
    n, d = X.shape
    rng = np.random.default_rng(41)
    w = rng.normal(scale=0.3, size=d)
    columns = np.arange(d, dtype=np.int32)
    values = np.empty((d, 1), dtype=np.float32)
    slack = kernels.rounded_start(w, columns, values)
    assert np.array_equal(values[:, 0], w.astype(np.float32))
    assert slack == pytest.approx(np.linalg.norm(w - w.astype(np.float32)), rel=1e-12)
    assert slack > 0
    z = np.where(rng.uniform(size=n) < 0.3, -y * 0.5, 0.0)
    c = np.where(rng.uniform(size=n) < 0.1, 0.0, 1.0)
    norm_sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    rows = kernels.GroupRows(
        X.indptr.astype(np.int64), X.indices, np.empty(0) if binary else X.data, binary, y, c,
        norm_sq,
    )  # fmt: skip
    bounds = np.where(rng.uniform(size=n) < 0.5, 5.0, -np.inf)
    before = bounds.copy()
    lo, hi = 40, 260
    read = kernels.start_margins(rows, z, values, slack, bounds, lo, hi)
    inside = np.zeros(n, dtype=bool)
    inside[lo:hi] = True
    fresh = inside & (c > 0) & (z == 0) & (before <= kernels.SCREEN_MARGIN)
    assert 0 < fresh.sum() < hi - lo
    margins = y * (X @ w)
    rounded = y * (X @ values[:, 0].astype(np.float64)) - slack * np.sqrt(norm_sq)
    np.testing.assert_allclose(bounds[fresh], rounded[fresh], rtol=1e-12, atol=1e-12)
    assert np.all(bounds[fresh] <= margins[fresh])
    assert np.array_equal(bounds[~fresh], before[~fresh])
    assert read == int(np.diff(X.indptr)[fresh].sum())


def _certified_rounds(solver, problem, data, state, n_rounds):
    """Rounds 1..``n_rounds`` from ``state``, each round's certificate checked against
    :meth:`Problem.evaluate` of its start point; yields the state after each round."""
    for epoch in range(1, n_rounds + 1):
        state = solver.run_epoch(state, epoch)
        point = solver.iterate(state)
        evaluation = problem.evaluate(point.w, data, z=point.z, z_bounds=point.z_bounds)
        assert point.primal == pytest.approx(evaluation.primal, rel=1e-10)
        assert point.dual == pytest.approx(evaluation.dual, rel=1e-10)
        yield state


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge", "smooth_hinge"])
def test_screened_rounds_certify_exactly_and_read_fewer_nonzeros(loss):
    """One group screens by default: from the second round on (its bounds refreshed at its
    start, the first round's say nothing) the certifying pass leaves out most nonzeros,
    every round's certificate is still the exact objective of its start, and the run ends
    where an unscreened one does."""
    X, y = _data(n=800, d=40, seed=30)
    data = MemoryDataset(X, y)
    problem = Problem(loss, "l2", 1e-3)
    solver = Cocoa()
    state = solver.init(
        problem, data, seed=np.random.SeedSequence(0), client=None, options=CocoaOptions()
    )
    assert state.settings.screening
    left, refreshed = [], []
    for after in _certified_rounds(solver, problem, data, state, 8):
        left.append(after.stats[0][5])
        refreshed.append(after.stats[0][6])
    assert left[0] == 0 and refreshed[0] == 0
    assert refreshed[1] > 0.5 * X.nnz and min(left[1:]) > 0.5 * X.nnz
    # the rows the refresh reads are nearly all left out (else it would cost, not save)
    assert left[1] >= 0.9 * refreshed[1]
    common = {"loss": loss, "alpha": 1e-3, "solver": "cocoa", "tol": 1e-9,
              "max_epochs": 500, "client": False}  # fmt: skip
    plain = solve(data, screening=False, **common)
    screened = solve(data, **common)
    assert plain.converged and screened.converged
    assert screened.primal == pytest.approx(plain.primal, rel=1e-8)


def test_column_shift_and_shifted_bounds_equal_numpy():
    """A group's shift is ``||w_next - w||`` on its columns only, and its bounds move by
    ``||x_i||`` times it (with a relative slack of 1e-12)."""
    from daskpd.solvers.cocoa import _tasks

    rng = np.random.default_rng(8)
    w, w_next = rng.normal(size=50), rng.normal(size=50)
    columns = np.array([1, 4, 7, 30, 49], dtype=np.int32)
    shift = _tasks._column_shift(w, w_next, columns)
    assert shift == pytest.approx(np.linalg.norm((w_next - w)[columns]), rel=1e-14)
    norm_sq = rng.uniform(0.5, 3.0, 6)
    group = _tasks._Group(None, None, columns, None, True, None, None, norm_sq)
    bounds = rng.normal(size=6)
    moved = _tasks._shifted_bounds((None, None, None, bounds), 3, shift, group)
    expected = bounds - np.sqrt(norm_sq) * shift
    assert np.all(moved <= expected) and np.allclose(moved, expected, rtol=0, atol=1e-11)
    assert np.array_equal(_tasks._shifted_bounds(bounds, None, 0.0, group), bounds)


@pytest.mark.parametrize(
    ("loss", "grid", "weighted", "alpha"),
    [("hinge", 2, False, 1e-3), ("squared_hinge", 3, False, 1e-3),
     ("smooth_hinge", 2, False, 1e-3), ("hinge", 2, True, 1e-2)],
)  # fmt: skip
def test_several_groups_screen_with_bounds_below_the_margins(loss, grid, weighted, alpha):
    """With several groups each group's bounds move by ``||x_i||`` times how far ``w``
    moved on the group's columns: after every round they are below the rows' exact margins
    at the next ``w`` (the safety of leaving a row out), the groups leave out most nonzeros
    from the third round on, every certificate is the exact objective of its start, and
    the run ends where an unscreened one does. Also with row and class weights, some rows
    of weight 0."""
    X, y = _data(n=800, d=40, seed=31)
    weight = None
    if weighted:
        weight = np.random.default_rng(32).uniform(0.2, 3.0, X.shape[0])
        weight[::50] = 0.0
    data = MemoryDataset(X, y, sample_weight=weight)
    class_weight = {1: 4.0} if weighted else None
    problem = Problem(loss, "l2", alpha, class_weight=class_weight)
    solver = Cocoa()
    state = solver.init(
        problem, data, seed=np.random.SeedSequence(1), client=None,
        options=CocoaOptions(grid=grid),
    )  # fmt: skip
    assert state.settings.screening and not state.settings.direct
    left = []
    for after in _certified_rounds(solver, problem, data, state, 8):
        margins_of = y * (X @ after.w[0])
        bounds = np.concatenate(after.bounds)
        assert bounds.shape == margins_of.shape
        assert np.all(bounds <= margins_of + 1e-12 * np.abs(margins_of))
        left.append(sum(part[5] for part in after.stats))
    assert left[0] == 0 and min(left[2:]) > 0.5 * X.nnz
    common = {"loss": loss, "alpha": alpha, "solver": "cocoa", "grid": grid, "tol": 1e-9,
              "max_epochs": 3000, "client": False, "class_weight": class_weight}  # fmt: skip
    plain = solve(data, screening=False, **common)
    screened = solve(data, **common)
    assert plain.converged and screened.converged
    assert screened.primal == pytest.approx(plain.primal, rel=1e-7)


# --------------------------------------------------------------------------------------------
# real multi-process clusters


@pytest.fixture(scope="module")
def disk_data(tmp_path_factory):
    X, y = _data(n=3000, d=40, seed=17)
    path = tmp_path_factory.mktemp("cocoa") / "train.zarr"
    return write_dataset(X, y, path, rows_per_block=500)


@pytest.fixture(scope="module")
def one_worker():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
    )
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.mark.cluster
def test_result_does_not_depend_on_the_number_of_workers(local_cluster, one_worker, disk_data):
    from daskpd._cluster import worker_addresses

    memory = MemoryDataset(*disk_data.read_rows(0, disk_data.n_samples))
    common = {"loss": "hinge", "alpha": 1e-3, "solver": "cocoa", "grid": 4, "tol": 0.0,
              "eval_every": 1}  # fmt: skip
    runs = [
        solve(data, max_epochs=6, client=client, **common)
        for client in (False, one_worker, local_cluster)
        for data in (disk_data, memory)
    ]
    for run in runs[1:]:
        assert np.array_equal(run.w, runs[0].w)
        assert [r["gap"] for r in run.history] == [r["gap"] for r in runs[0].history]
    # the dual blocks stay on the worker that owns their group
    problem = Problem("hinge", "l2", 1e-3)
    solver, state = _run(disk_data, problem, grid=4, n_rounds=2, client=local_cluster)
    workers = worker_addresses(local_cluster)
    # the driver's epoch ends at the round's certificate: the block may still be computing
    for future in state.z_blocks:
        future.result()
    for k, future in enumerate(state.z_blocks):
        assert set(local_cluster.who_has([future])[future.key]) == {workers[k * 2 // 4]}
    # an iterate outlives the rounds after it (run_epoch releases what it spends)
    early = solver.iterate(state)
    # large z blocks are split off their round's tuple before the steps travel: same bits
    assert state.whole
    state = dataclasses.replace(state, whole=False)
    for epoch in (3, 4, 5, 6):
        state = solver.run_epoch(state, epoch)
    # the groups screen on the cluster too (their bounds shifted on their homes): the
    # rounds' own stats, in their tuples, count the nonzeros left out
    stats = local_cluster.gather([local_cluster.submit(lambda t: t[2], part) for part in state.z])
    assert state.settings.screening and sum(part[5] for part in stats) > 0
    arrays = solver.state_arrays(state)
    _, local = _run(disk_data, problem, grid=4, n_rounds=6)
    assert np.array_equal(arrays["bounds"], np.concatenate(local.bounds))
    assert np.array_equal(arrays["w"], local.w[0])
    assert np.array_equal(arrays["z"], np.concatenate(local.z))
    assert np.array_equal(arrays["certified_w"], runs[0].w)
    assert np.concatenate(local_cluster.gather(early.z)).shape == (disk_data.n_samples,)


@pytest.mark.cluster
def test_a_round_reports_before_its_shrunk_passes_finish(local_cluster, disk_data):
    """On a client a round's certificate is gathered from its full passes, ahead of its
    shrunk passes (by priority on the owner's one thread), and the driver's epoch ends
    while they still run; ``solve`` returns with all of them done (``Cocoa.settle``)."""
    from distributed import get_task_stream

    # shrunk passes that run to their cap (spread 0 is never reached): 0.3-0.5 s a round;
    # alpha small enough that three rounds do not reach a gap of 0
    kwargs = {"loss": "hinge", "alpha": 1e-6, "solver": "cocoa", "tol": 0.0,
              "eval_every": 1000, "threads": 1, "max_epochs": 3,
              "max_shrunk_passes": 200_000, "shrink_ratio": 0.0}  # fmt: skip
    ends = {}

    def note(info):
        ends[info.epoch] = time.time()  # the workers' task stream is in time.time() too

    with get_task_stream(local_cluster) as stream:
        result = solve(disk_data, client=local_cluster, callbacks=note, **kwargs)
    done = list(stream.data)  # the tasks finished by the time solve returned
    assert result.n_epochs == 3

    def finished(kind):
        # round -> (start, stop) of the tasks "cocoa-{kind}-0-{token}-{round}"
        found = {}
        for task in done:
            name = str(task["key"])
            if name.startswith(f"cocoa-{kind}-0-"):
                span = next(s for s in task["startstops"] if s["action"] == "compute")
                found[int(name.rsplit("-", 1)[1])] = (span["start"], span["stop"])
        return found

    passes, stats, shrunk = finished("pass"), finished("stats"), finished("round")
    assert sorted(passes) == sorted(stats) == sorted(shrunk) == [1, 2, 3]
    for r in (1, 2, 3):
        # full passes, then the certificate's sums, then the shrunk passes
        assert passes[r][1] <= stats[r][0] <= stats[r][1] <= shrunk[r][0]
    for r in (1, 2):
        # the epoch (a certificate-only row) ended while its shrunk passes ran
        assert stats[r][1] <= ends[r] < shrunk[r][1]
    # in-process (one call a round): the same rows
    local = solve(disk_data, client=False, **kwargs)
    assert [r["gap"] for r in local.history] == [r["gap"] for r in result.history]


@pytest.mark.cluster
@pytest.mark.long  # a killed worker: CI's second call (-m long, issue 49)
def test_survives_a_worker_killed_mid_round(local_cluster, disk_data, tmp_path):
    from _faults import assert_same_run, straight_and_killed, wait_for_two_workers

    client = local_cluster
    # many local passes: a round long enough to be killed in
    kwargs = {"loss": "hinge", "alpha": 1e-3, "solver": "cocoa", "grid": 2, "tol": 0.0,
              "eval_every": 1, "local_passes": 1000}  # fmt: skip
    straight, survived = straight_and_killed(client, disk_data, tmp_path, 0.05, **kwargs)
    assert_same_run(straight, survived)
    assert survived.recoveries <= 1
    wait_for_two_workers(client)


_REHEARSAL_CHECK = """
import sys
import numpy as np
from daskpd.data import open_dataset
from daskpd.kernels import cocoa, dso, scalar
from daskpd.problem import Problem
from daskpd.solvers.cocoa import CocoaOptions, _tasks
from daskpd.solvers.common.groups import row_group_bounds as _row_bounds
from daskpd.solvers.cocoa._options import _settings

path, loss, threads, grid, rehearse = sys.argv[1:]
threads, grid = int(threads), int(grid)
data = open_dataset(path)
settings = _settings(Problem(loss=loss, alpha=0.01), data, CocoaOptions(grid=grid), grid, threads)
dispatchers = [
    f for m in (cocoa, dso, scalar) for f in vars(m).values()
    if hasattr(f, "signatures") and hasattr(f, "py_func")
]
stop = int(_row_bounds(data, grid)[1])
group = _tasks._load_group(data, 0, stop, None, grid > 1, settings if rehearse == "1" else None)
before = {id(f): set(f.signatures) for f in dispatchers}
z, step, *_ = _tasks._round_task(
    group, np.zeros(stop), None, np.zeros(data.n_features), 7, settings, True
)
_tasks._sum_task(np.zeros(data.n_features), settings.direct, None, step, group.columns)
assert np.any(z != 0.0)  # the round ran on the real rows
print(sorted(f.__name__ for f in dispatchers if set(f.signatures) - before[id(f)]))
"""


@pytest.mark.parametrize(
    ("loss", "binary", "dtype", "threads", "grid"),
    [
        ("hinge", True, np.float32, 2, 1),
        ("logistic", False, np.float32, 1, 3),
        ("squared", False, np.float64, 2, 3),
    ],
)
def test_the_rehearsal_loads_every_kernel_a_round_calls(
    tmp_path, loss, binary, dtype, threads, grid
):
    """The rehearsal beside the read must call the kernels with the real rows' types: in a
    fresh process, a real round after it loads no new specialization (which it would do
    inside the timed first round otherwise); without the rehearsal it does (the check can
    fail)."""
    import subprocess
    import sys

    X, y = _data(n=300, d=30, seed=5)
    if binary:
        X = (X != 0).astype(np.float64)
    if loss == "squared":
        y = np.linspace(-1.0, 1.0, y.shape[0])
    data = write_dataset(X.astype(dtype), y, tmp_path / "train.zarr", rows_per_block=100)
    assert data.binary == binary

    def new_specializations(rehearse):
        args = [str(data.path), loss, str(threads), str(grid), rehearse]
        run = subprocess.run(
            [sys.executable, "-c", _REHEARSAL_CHECK, *args], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.strip()

    assert new_specializations("1") == "[]"
    assert "cocoa_pass" in new_specializations("0")


# --------------------------------------------------------------------------------------------
# streamed rows (rows="stream"): read again by every round, a chunk of row blocks at a time


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_streamed_rounds_equal_the_reference_in_chunk_order(loss):
    """One group, serial: a streamed round is dual coordinate ascent over the rows in the
    chunk order (row blocks in a random order, two per chunk, each chunk's rows in one
    random order), drawn from the round's seed as the reference draws it."""
    X, y = _loss_data(loss, n=240, d=30, seed=21)
    data = MemoryDataset(X, y, rows_per_block=40)
    bounds = np.asarray(data.row_block_bounds)
    assert bounds.shape[0] - 1 == 6
    alpha, n_rounds = 0.01, 3
    problem = Problem(loss, "l2", alpha)
    chunk = 2 * (int(data.nnz) // 6)
    _, state = _run(data, problem, grid=1, n_rounds=n_rounds, rows="stream", stream_nnz=chunk)
    assert state.settings.stream_nnz == chunk
    n, d = X.shape
    w, z, c = np.zeros(d), np.zeros(n), np.ones(n)
    for t in range(1, n_rounds + 1):
        rng = np.random.default_rng(block_seeds(epoch_seed(np.random.SeedSequence(0), t), 1)[0])
        blocks = rng.permutation(6)
        order = []
        for k in range(0, 6, 2):
            rows = np.concatenate([np.arange(bounds[b], bounds[b + 1]) for b in blocks[k : k + 2]])
            order.extend(rows[rng.permutation(rows.shape[0])])
        z, w, _, _ = _reference_pass(X, y, c, z, w, order, loss, 1.0, 1.0, n, alpha)
    assert np.allclose(state.w[0], w, rtol=1e-9, atol=1e-12)
    assert np.allclose(np.concatenate(state.z), z, rtol=1e-9, atol=1e-12)


def test_streamed_row_options_are_checked():
    with pytest.raises(ValueError, match="rows must be"):
        CocoaOptions(rows="disk")
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="stream_nnz"):
            CocoaOptions(stream_nnz=bad)


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_streamed_rows_reach_liblinear_optimum_with_exact_certificates(loss):
    X, y = _data(n=300, d=30, seed=6)
    alpha = 0.01
    data = MemoryDataset(X, y, rows_per_block=25)
    per_block = int(data.nnz) // 12
    result = solve(
        data, loss=loss, alpha=alpha, solver="cocoa", grid=2, tol=1e-6, max_epochs=3000,
        client=False, rows="stream", stream_nnz=3 * per_block, eval_every=1,
    )  # fmt: skip
    assert result.converged and result.gap <= 1e-6
    # the hinge's shrunk passes run over the active rows of every chunk together: about as
    # few rounds as with the rows kept (shrunk passes within each chunk took many times more)
    kept = solve(
        data, loss=loss, alpha=alpha, solver="cocoa", grid=2, tol=1e-6, max_epochs=3000,
        client=False, rows="memory",
    )  # fmt: skip
    # (measured: 369 rounds streamed, 365 kept, 611 with shrunk passes within each chunk)
    assert result.n_epochs <= 1.3 * kept.n_epochs + 5, (result.n_epochs, kept.n_epochs)
    problem = Problem(loss, "l2", alpha)
    reference = _liblinear(loss, X, y, alpha, np.ones(X.shape[0]))
    p_ref = problem.evaluate(reference, data).primal
    assert result.dual <= p_ref + 1e-12 and result.primal <= p_ref + 1e-6
    # every reported primal is the objective of the point reported with it
    assert result.history[-1]["primal"] == pytest.approx(
        problem.evaluate(result.w, data).primal, rel=1e-12
    )


@pytest.mark.cluster
def test_streamed_rows_on_a_cluster_equal_the_in_process_run(local_cluster, disk_data, monkeypatch):
    from daskpd.solvers.cocoa._tasks import _StreamedGroup
    from daskpd.solvers.common import stream as _options

    common = {"loss": "hinge", "alpha": 1e-3, "solver": "cocoa", "grid": 2, "tol": 0.0,
              "eval_every": 1, "threads": 1, "stream_nnz": 4000}  # fmt: skip
    streamed = [
        solve(disk_data, max_epochs=4, client=client, rows="stream", **common)
        for client in (False, local_cluster)
    ]
    assert np.array_equal(streamed[0].w, streamed[1].w)
    assert [r["gap"] for r in streamed[0].history] == [r["gap"] for r in streamed[1].history]
    gaps = [r["gap"] for r in streamed[1].history]
    assert gaps[-1] < 0.1 * gaps[0]
    # "auto" streams the groups whose kept rows would not fit the owner's share
    problem = Problem("hinge", "l2", 1e-3)
    _, state = _run(disk_data, problem, grid=2, n_rounds=1, client=local_cluster)
    assert not isinstance(local_cluster.gather(state.groups[0]), _StreamedGroup)
    monkeypatch.setattr(_options, "STREAM_SHARE", 1e-9)
    _, state = _run(disk_data, problem, grid=2, n_rounds=1, client=local_cluster)
    assert isinstance(local_cluster.gather(state.groups[0]), _StreamedGroup)
    # a chunk gets what the owner's memory limit leaves after the round's other arrays
    limit = min(local_cluster.run_on_scheduler(
        lambda dask_scheduler: [ws.memory_limit for ws in dask_scheduler.workers.values()]
    ))  # fmt: skip
    rows = int(state.row_bounds[1] - state.row_bounds[0])
    # of n_features each: the pack's 2 values a column (one thread), w, the certified w,
    # the step and the sum
    fixed = _options.WORKER_BASE_BYTES + 24 * rows + 6 * 8 * disk_data.n_features
    expected = int(_options.STREAM_MEMORY_SHARE * limit - fixed) // (4 * (8 + 1))
    assert state.settings.stream_nnz == max(_options.MIN_STREAM_NNZ, expected)
    assert state.settings.stream_nnz > _options.MIN_STREAM_NNZ  # this machine has room


@pytest.mark.slow  # a scale run (58M nonzeros on 500 MiB workers): about 20 s
def test_streamed_rows_train_under_worker_memory_limits(tmp_path, capped_cluster):
    """Rows larger than the owner's memory: "auto" streams them, the run certifies its
    model, no worker is restarted and none goes past its limit."""

    from daskpd._cluster import peak_rss_mib, worker_addresses
    from daskpd.generators import make_splice_like
    from daskpd.solvers.common.stream import STREAM_SHARE, kept_bytes

    path = tmp_path / "splice.zarr"
    data = make_splice_like(path, 130_000, degree=8, hash_bits=18, binary=True, random_state=3)
    limit_mib = 500
    assert kept_bytes(data, 0, data.n_samples) > STREAM_SHARE * limit_mib * 2**20
    with capped_cluster(limit_mib) as client:
        before = set(worker_addresses(client))
        problem = Problem("logistic", "l2", 1e-4)
        _, state = _run(data, problem, grid=1, n_rounds=0, client=client)
        assert state.settings.stream_nnz >= 1 << 20
        result = solve(
            data, "logistic", "l2", 1e-4, "cocoa", max_epochs=12, tol=0.0, client=client,
            eval_every=1,
        )  # fmt: skip
        assert set(worker_addresses(client)) == before
        peaks = client.run(peak_rss_mib)
    assert max(peaks.values()) < limit_mib, peaks
    final = result.history[-1]
    assert final["gap"] <= 1e-2 * final["primal"], [r["gap"] for r in result.history]


@pytest.mark.cluster
def test_default_threads_are_the_idle_cores(local_cluster, disk_data):
    """threads=None: the two 1-thread workers' cores for every loss (the threads' slots lose
    no step, so they gain with and without shrunk passes; BENCHMARKS.md), and what the user
    asks for when they ask."""

    def threads_of(loss, **options):
        solver, problem = Cocoa(), Problem(loss, "l2", 1e-3)
        options = CocoaOptions(**options)
        solver.check(problem, disk_data, options)
        state = solver.init(
            problem, disk_data, seed=np.random.SeedSequence(0), client=local_cluster,
            options=options,
        )  # fmt: skip
        return state.settings.threads

    assert threads_of("hinge") == 2
    assert threads_of("squared_hinge") == 2
    assert threads_of("logistic") == 2
    assert threads_of("hinge", shrinking=False) == 2
    assert threads_of("logistic", threads=1) == 1
    assert threads_of("hinge", threads=3) == 3
