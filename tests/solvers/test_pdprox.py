"""Pdprox (Yang, Mahdavi, Jin, Zhu): LP optimum, Theorem 6, domains, forms, gaps, Dask runs.

Oracles from ``shared/notes/paper-pdprox.md`` Part 7 (A-F, H, I, K).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from daskpd.data import MemoryDataset, write_dataset
from daskpd.kernels import pdprox as kernels
from daskpd.losses import Absolute, EpsilonInsensitive, Hinge, Logistic
from daskpd.problem import Problem
from daskpd.regularizers import L1, L2, GroupLasso, L1Inf, TraceNorm
from daskpd.solvers.driver import Iterate, solve
from daskpd.solvers.pdprox import (
    Pdprox,
    PdproxOptions,
    estimate_spectral_norm,
    fobos,
    pdprox,
    pdprox_objective,
    subgradient_descent,
)

LAM = 0.02


def _classification(rng, n=80, d=30):
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.sign(X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n))
    y[y == 0] = 1.0
    return X, y


def _hinge_l1_lp(X, y, lam):
    """Exact optimum of hinge + L1 as an LP; returns (L*, w*, dual a* in [0, 1])."""
    n, d = X.shape
    cost = np.concatenate([np.ones(n) / n, lam * np.ones(2 * d)])
    A = np.hstack([-np.eye(n), -(y[:, None] * X), y[:, None] * X])
    res = linprog(cost, A_ub=A, b_ub=-np.ones(n), bounds=[(0, None)] * (n + 2 * d), method="highs")
    assert res.status == 0
    return res.fun, res.x[n : n + d] - res.x[n + d :], -n * res.ineqlin.marginals


@pytest.fixture(scope="module")
def lp_instance():
    rng = np.random.default_rng(3)
    X, y = _classification(rng)
    return X, y, *_hinge_l1_lp(X, y, LAM)


def test_hinge_l1_matches_linprog(lp_instance):
    X, y, l_star, _, _ = lp_instance
    result = pdprox(X, y, Hinge(), L1(), LAM, n_iterations=2000, rows_per_block=30)
    value = pdprox_objective(X, y, Hinge(), L1(), LAM, result.w)
    assert abs(value - l_star) <= 1e-4 * l_star
    assert pdprox_objective(X, y, Hinge(), L1(), LAM, result.w_avg) - l_star <= 1e-3 * l_star


@pytest.mark.parametrize(
    ("algorithm", "form"),
    [("dual", None), ("primal", None), ("dual-simplified", None)],
)
def test_theorem_6_bound_at_every_t(lp_instance, algorithm, form):
    X, y, l_star, w_star, _ = lp_instance
    n = X.shape[0]
    c = np.linalg.norm(X, 2) ** 2 / n**2
    failures = []

    def check(t, state):
        w_hat = state["w_avg"]
        gap = pdprox_objective(X, y, Hinge(), L1(), LAM, w_hat) - l_star
        violators = np.count_nonzero(1 - y * (X @ w_hat) > 0)
        bound = math.sqrt(c / 2) * (w_star @ w_star + violators) / t
        if not gap <= bound + 1e-12:
            failures.append((t, gap, bound))

    pdprox(X, y, Hinge(), L1(), LAM, n_iterations=600, algorithm=algorithm, form=form,
           callback=check)  # fmt: skip
    assert not failures, failures[:3]


def test_fejer_monotonicity_algorithm_1(lp_instance):
    # Part 7 D: ||w_t - w*||^2 + ||b_t - a*||^2 never increases (a wrong sign, step or
    # update order breaks this at once).
    X, y, _, w_star, a_star = lp_instance
    values = []

    def record(t, state):
        a = state["aux"][:, kernels.DUAL_A1]
        values.append(np.sum((state["w"] - w_star) ** 2) + np.sum((a - a_star) ** 2))

    pdprox(X, y, Hinge(), L1(), LAM, n_iterations=300, callback=record)
    assert all(b <= a + 1e-10 for a, b in zip(values, values[1:], strict=False))


LOSSES = [
    (Hinge(), "classification"),
    (Absolute(), "regression"),
    (EpsilonInsensitive(epsilon=0.1), "regression"),
    (("generalized_hinge", 2.0), "classification"),
    (("quantile", 0.3), "regression"),
]


def _labels(rng, X, kind):
    if kind == "classification":
        return np.where(X @ rng.standard_normal(X.shape[1]) > 0, 1.0, -1.0)
    return X @ rng.standard_normal(X.shape[1]) + 0.1 * rng.standard_normal(X.shape[0])


def _in_domain(dual, loss, tol=1e-12):
    code = kernels.PD_HINGE if isinstance(loss, Hinge) else None
    a1, a2 = dual[:, kernels.DUAL_A1], dual[:, kernels.DUAL_A2]
    if isinstance(loss, Hinge):
        return np.all((a1 >= -tol) & (a1 <= 1 + tol) & (a2 == 0))
    if isinstance(loss, Absolute):
        return np.all((np.abs(a1) <= 1 + tol) & (a2 == 0))
    if isinstance(loss, EpsilonInsensitive):
        return np.all((a1 >= -tol) & (a1 <= 1 + tol) & (a2 >= -tol) & (a2 <= 1 + tol))
    assert code is None
    return np.all((a1 >= -tol) & (a2 >= -tol) & (a1 + a2 <= 1 + tol))


@pytest.mark.parametrize(("loss", "kind"), LOSSES)
@pytest.mark.parametrize("algorithm", ["dual", "primal", "dual-simplified"])
def test_duals_stay_in_their_domains(rng, loss, kind, algorithm):
    X, _ = _classification(rng, n=40, d=8)
    y = _labels(rng, X, kind)
    bad = []

    def check(t, state):
        duals = [state["dual"], state["dual_avg"]]
        if algorithm == "dual":
            duals.append(state["aux"])  # Algorithm 1 projects both copies
        if not all(_in_domain(d, loss) for d in duals):
            bad.append(t)

    pdprox(X, y, loss, L1(), 0.01, n_iterations=150, algorithm=algorithm, rows_per_block=15,
           callback=check)  # fmt: skip
    assert not bad


def test_budget_domain_and_gap_certificate(rng):
    # Part 7 C and F: hinge + (1/2)||w||^2, lambda = 1/n, dual budget m; the gap of the
    # averages is >= 0 and under its Theorem 6 bound, and sum a <= m at every iteration.
    X, y = _classification(rng, n=200, d=10)
    y[rng.random(200) < 0.2] *= -1
    n, lam, budget, T = 200, 1 / 200, 10.0, 1000
    sums = []

    def check(t, state):
        sums.append(state["dual"][:, kernels.DUAL_A1].sum())
        assert _in_domain(state["dual"], Hinge()) and _in_domain(state["aux"], Hinge())
        assert state["aux"][:, kernels.DUAL_A1].sum() <= budget + 1e-9

    result = pdprox(X, y, Hinge(), L2(), lam, n_iterations=T, budget=budget, rows_per_block=70,
                    callback=check)  # fmt: skip
    assert max(sums) <= budget + 1e-9
    hinge = np.maximum(0, 1 - y * (X @ result.w_avg))
    top = np.sort(hinge)[::-1][: int(budget)]
    primal = top.sum() / n + lam / 2 * result.w_avg @ result.w_avg
    a = result.dual_avg[:, kernels.DUAL_A1]
    v = X.T @ (a * y)
    dual = a.sum() / n - v @ v / (2 * lam * n**2)
    gap = primal - dual
    w_tilde = v / (lam * n)
    c = np.linalg.norm(X, 2) ** 2 / n**2
    bound = math.sqrt(c / 2) * (w_tilde @ w_tilde + budget) / T
    assert -1e-12 <= gap <= bound


def _forms_trace(X, y, loss, algorithm, form, **kwargs):
    trace = []
    pdprox(X, y, loss, L1(), 0.01, n_iterations=200, algorithm=algorithm, form=form,
           rows_per_block=25, callback=lambda t, s: trace.append((s["w"], s["dual"])),
           **kwargs)  # fmt: skip
    return trace


FORM_CASES = [
    (loss, kind, algorithm, extra)
    for loss, kind in LOSSES[:4]
    for algorithm in ("primal", "dual-simplified")
    for extra in ({}, {"step_ratio": 0.01})
] + [(Hinge(), "classification", a, {"budget": 5.0}) for a in ("primal", "dual-simplified")]


@pytest.mark.parametrize(("loss", "kind", "algorithm", "extra"), FORM_CASES)
def test_two_implementation_forms_agree(rng, loss, kind, algorithm, extra):
    # Part 7 E: Algorithm 2 double-primal == eq. (21) double-dual; Algorithm 3 double-dual
    # == eq. (22) double-primal; also with two steps and with the dual budget (hinge).
    X, _ = _classification(rng, n=60, d=12)
    y = _labels(rng, X, kind)
    a = _forms_trace(X, y, loss, algorithm, "double-primal", **extra)
    b = _forms_trace(X, y, loss, algorithm, "double-dual", **extra)
    for (w1, d1), (w2, d2) in zip(a, b, strict=True):
        assert np.abs(w1 - w2).max() <= 1e-12
        assert np.abs(d1 - d2).max() <= 1e-12


GROUPS = [list(range(0, 4)), list(range(4, 8)), list(range(8, 12))]


@pytest.mark.parametrize(
    ("loss", "regularizer"),
    [("hinge", GroupLasso(groups=GROUPS)), ("absolute", GroupLasso(groups=GROUPS)),
     ("hinge", L1Inf(groups=GROUPS))],
)  # fmt: skip
def test_structured_problems_reach_small_gap(rng, loss, regularizer):
    X, y = _classification(rng, n=100, d=12)
    data = MemoryDataset(X, y, rows_per_block=40)
    result = solve(data, loss=loss, regularizer=regularizer, alpha=0.05, solver="pdprox",
                   max_epochs=60, tol=1e-4, eval_every=2, iterations_per_epoch=50,
                   client=False)  # fmt: skip
    assert result.converged and 0 <= result.gap <= 1e-4


@pytest.mark.parametrize("loss", ["absolute", "hinge"])
def test_trace_norm_matrix_completion_reaches_small_gap(rng, loss):
    # Observed entries of a low-rank 8 x 6 matrix: each observed (i, j) is a row with one
    # nonzero at column i * 6 + j. Absolute loss: matrix completion; hinge on the signs of
    # the entries: max-margin matrix factorization.
    shape = (8, 6)
    truth = rng.standard_normal((8, 2)) @ rng.standard_normal((2, 6))
    observed = rng.choice(48, size=30, replace=False)
    X = sp.csr_matrix((np.ones(30), (np.arange(30), observed)), shape=(30, 48))
    y = truth.ravel()[observed]
    if loss == "hinge":
        y = np.where(y > 0, 1.0, -1.0)
    task = "binary" if loss == "hinge" else "regression"
    data = MemoryDataset(X, y, binary=False, task=task)
    result = solve(data, loss=loss, regularizer=TraceNorm(shape=shape), alpha=0.02,
                   solver="pdprox", max_epochs=60, tol=1e-4, eval_every=2,
                   iterations_per_epoch=50, client=False)  # fmt: skip
    assert result.converged and 0 <= result.gap <= 1e-4


def test_projection_kernels_against_references(rng):
    # Triangle: optimality <v - p, q - p> <= 0 at the three vertices q; box: clip.
    vertices = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    for v in rng.normal(0.5, 1.5, size=(2000, 2)):
        p = np.array(kernels.project_row(kernels.PD_GENERALIZED_HINGE, v[0], v[1]))
        assert p.min() >= 0 and p.sum() <= 1 + 1e-15
        assert np.all((vertices - p) @ (v - p) <= 1e-12)
        box = kernels.project_row(kernels.PD_EPSILON_INSENSITIVE, v[0], v[1])
        np.testing.assert_array_equal(box, np.clip(v, 0, 1))
    # Budget (Lemma 13): exact threshold from sorted breakpoints.
    for _ in range(200):
        values = rng.normal(0.5, 1.0, size=50)
        budget = rng.uniform(0.5, 20)
        eta = kernels.budget_threshold(values, budget)
        clipped = np.clip(values - eta, 0, 1)
        if np.clip(values, 0, 1).sum() <= budget:
            assert eta == 0
        else:
            assert eta > 0 and math.isclose(clipped.sum(), budget, rel_tol=1e-12)


@pytest.mark.parametrize(("loss", "kind"), LOSSES)
def test_block_kernels_against_numpy(rng, loss, kind):
    from daskpd.solvers.pdprox import loss_spec

    code, params, _ = loss_spec(loss)
    X = sp.random(30, 7, density=0.4, random_state=rng, format="csr")
    y = _labels(rng, X.toarray(), kind)
    dual = rng.uniform(0, 0.5, size=(30, kernels.DUAL_WIDTH))
    if code in (kernels.PD_HINGE, kernels.PD_ABSOLUTE):
        dual[:, kernels.DUAL_A2] = 0
    z = kernels.block_coef(code, params, y, dual)
    got = kernels.rmatvec_coef(code, params, X.indptr, X.indices, X.data, True, y, dual, 7)
    np.testing.assert_allclose(got, X.T @ z, rtol=1e-13, atol=1e-14)
    # Part 7 I: the loss equals the max of the bilinear form over the domain's vertices.
    u = rng.normal(size=30) * 2
    verts = {
        kernels.PD_HINGE: [(0, 0), (1, 0)],
        kernels.PD_ABSOLUTE: [(-1, 0), (1, 0)],
        kernels.PD_EPSILON_INSENSITIVE: [(0, 0), (1, 0), (0, 1), (1, 1)],
    }.get(code, [(0, 0), (1, 0), (0, 1)])
    for i in range(30):
        g1, g2 = kernels.grad_dual(code, params, u[i], y[i])
        # f(u, a) = (g1, g2) . a for these losses (their G_a does not depend on a)
        best = max(g1 * a1 + g2 * a2 for a1, a2 in verts)
        assert math.isclose(kernels.loss_value(code, params, u[i], y[i]), best, abs_tol=1e-12)


def test_power_iteration_is_one_compute(rng, tmp_path, counting_scheduler):
    X, y = _classification(rng, n=90, d=15)
    data = write_dataset(X, y, tmp_path / "d.zarr", rows_per_block=30)
    estimate = estimate_spectral_norm(data, n_iterations=100)
    assert counting_scheduler.calls == 1
    assert math.isclose(estimate, np.linalg.norm(X, 2), rel_tol=1e-6)


def test_solver_epochs_are_one_compute_and_match_in_memory(rng, tmp_path, counting_scheduler):
    X, y = _classification(rng, n=90, d=15)
    data = write_dataset(X, y, tmp_path / "d.zarr", rows_per_block=30)
    norm = float(np.linalg.norm(X, 2))
    problem = Problem(Hinge(), L1(), LAM)
    method = Pdprox()
    options = PdproxOptions(iterations_per_epoch=7, spectral_norm=norm)
    state = method.init(problem, data, seed=np.random.SeedSequence(0), client=None,
                        options=options)  # fmt: skip
    for epoch in (1, 2, 3):
        state = method.run_epoch(state, epoch)
    assert counting_scheduler.calls == 3
    reference = pdprox(X, y, Hinge(), L1(), LAM, n_iterations=21, spectral_norm=norm)
    it = method.iterate(state)
    np.testing.assert_allclose(it.w, reference.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(it.w_avg, reference.w_avg, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.concatenate(it.z), reference.z, rtol=0, atol=1e-12)


@pytest.mark.cluster
def test_local_cluster_run_matches_in_memory(rng, tmp_path, local_cluster):
    X, y = _classification(rng, n=120, d=12)
    data = write_dataset(X, y, tmp_path / "d.zarr", rows_per_block=40)
    norm = float(np.linalg.norm(X, 2))
    result = solve(data, loss="absolute", regularizer=GroupLasso(groups=GROUPS), alpha=0.01,
                   solver="pdprox", max_epochs=3, tol=0.0, iterations_per_epoch=10,
                   spectral_norm=norm, client=local_cluster)  # fmt: skip
    reference = pdprox(X, y, Absolute(), GroupLasso(groups=GROUPS), 0.01, n_iterations=30,
                       spectral_norm=norm)  # fmt: skip
    np.testing.assert_allclose(result.w, reference.w, rtol=0, atol=1e-12)


def test_checkpoint_resume_is_exact(rng, tmp_path):
    X, y = _classification(rng, n=60, d=10)
    data = MemoryDataset(X, y, rows_per_block=25)
    kwargs = dict(loss="hinge", regularizer="l1", alpha=LAM, solver="pdprox", tol=0.0,
                  iterations_per_epoch=5, client=False, algorithm="primal")  # fmt: skip
    full = solve(data, max_epochs=3, **kwargs)
    solve(data, max_epochs=1, checkpoint_dir=tmp_path / "ck", **kwargs)
    resumed = solve(data, max_epochs=3, checkpoint_dir=tmp_path / "ck", resume=True, **kwargs)
    np.testing.assert_array_equal(full.w, resumed.w)
    np.testing.assert_array_equal(full.w_avg, resumed.w_avg)


def _full_start(result):
    """The warm start of a finished run: its w and its dual as one full-length array."""
    return Iterate(w=result.w, z=np.concatenate(result.z))


@pytest.mark.parametrize("algorithm", ["dual", "primal", "dual-simplified"])
def test_warm_start_from_a_solution_starts_near_it(rng, algorithm):
    # From a converged (w, z) the first evaluation is far better than a cold one. A run split
    # in two (k epochs, then a warm start for k more) tracks the uninterrupted 2k-epoch run,
    # well below the cold k-epoch run (the rate is O(1/T) and the last iterate oscillates, so
    # "far below" is a factor 2-3 here).
    X, y = _classification(rng, n=80, d=30)
    common = dict(regularizer="l1", alpha=LAM, solver="pdprox", tol=0.0, client=False,
                  iterations_per_epoch=10, algorithm=algorithm, eval_every=1)  # fmt: skip
    hinge = MemoryDataset(X, y, rows_per_block=30)
    solution = solve(hinge, loss="hinge", max_epochs=60, **common)
    cold = solve(hinge, loss="hinge", max_epochs=5, **common)
    warm = solve(hinge, loss="hinge", max_epochs=5, warm_start=_full_start(solution), **common)
    assert warm.history[0]["gap"] < 0.05 * cold.history[0]["gap"]
    regression = MemoryDataset(X, X @ np.full(30, 0.3), rows_per_block=30)
    for data, loss in ((hinge, "hinge"), (regression, "absolute")):
        cold = solve(data, loss=loss, max_epochs=10, **common)
        longer = solve(data, loss=loss, max_epochs=20, **common)
        split = solve(data, loss=loss, max_epochs=10, warm_start=_full_start(cold), **common)
        assert split.gap == pytest.approx(longer.gap, rel=0.1), loss
        assert 0 <= split.gap < 0.5 * cold.gap, loss


def test_warm_start_dual_is_used_only_in_its_domain(rng, counting_scheduler):
    # The contract dual z becomes Pdprox's dual (both copies); Algorithm 2 also needs
    # X^T coef(a_0), computed with the power iteration in ONE compute. A z outside the
    # loss's domain (or of the wrong length) leaves the usual zero dual.
    X, y = _classification(rng, n=60, d=10)
    data = MemoryDataset(X, X @ rng.standard_normal(10), rows_per_block=25)
    problem = Problem(EpsilonInsensitive(0.1), L1(), LAM)
    options = PdproxOptions(algorithm="primal")
    w0 = rng.standard_normal(10)
    z0 = rng.uniform(-1.0, 1.0, 60)
    seed = np.random.SeedSequence(0)
    state = Pdprox().init(problem, data, seed=seed, client=None, options=options,
                          warm_start=Iterate(w=w0, z=z0))["state"]  # fmt: skip
    assert counting_scheduler.calls == 1
    dual = np.concatenate([b["dual"] for b in state.blocks])
    np.testing.assert_array_equal(dual, np.concatenate([b["aux"] for b in state.blocks]))
    a1, a2 = dual[:, kernels.DUAL_A1], dual[:, kernels.DUAL_A2]
    np.testing.assert_allclose(a1 - a2, z0, rtol=0, atol=1e-15)
    assert np.all(np.minimum(a1, a2) == 0)
    np.testing.assert_allclose(state.gw, X.T @ z0, rtol=0, atol=1e-12)
    for vector in (state.w, state.w_prev, state.w_aux):
        np.testing.assert_array_equal(vector, w0)
    assert math.isclose(state.spec.tau * state.spec.sigma, state.spec.tau**2)
    for z in (np.full(60, 1.5), np.zeros(59)):
        state = Pdprox().init(problem, data, seed=seed, client=None, options=options,
                              warm_start=Iterate(w=w0, z=z))["state"]  # fmt: skip
        assert not any(b["dual"].any() or b["aux"].any() for b in state.blocks)
        assert not state.gw.any()
        np.testing.assert_array_equal(state.w, w0)


def test_unsupported_problems_fail_before_dask_work(rng, counting_scheduler):
    X, y = _classification(rng, n=30, d=6)
    data = MemoryDataset(X, y)
    with pytest.raises(ValueError, match="bilinear"):
        solve(data, loss=Logistic(), regularizer="l1", alpha=0.1, solver="pdprox")
    with pytest.raises(ValueError, match="hinge loss only"):
        solve(data, loss="absolute", regularizer="l1", alpha=0.1, solver="pdprox", budget=3.0)
    with pytest.raises(ValueError, match="double-primal"):
        solve(data, loss="hinge", regularizer="l1", alpha=0.1, solver="pdprox",
              algorithm="dual", form="double-primal")  # fmt: skip
    with pytest.raises(ValueError, match="features"):
        solve(data, loss="hinge", regularizer=TraceNorm(shape=(2, 2)), alpha=0.1,
              solver="pdprox")  # fmt: skip
    assert counting_scheduler.calls == 0


def test_baselines_decrease_the_objective(rng):
    X, y = _classification(rng, n=60, d=12)
    reg = GroupLasso(groups=GROUPS)
    start = pdprox_objective(X, y, Hinge(), reg, 0.01, np.zeros(12))
    for method in (subgradient_descent, fobos):
        w = method(X, y, Hinge(), reg, 0.01, n_iterations=200, step=1.0)
        assert pdprox_objective(X, y, Hinge(), reg, 0.01, w) < 0.9 * start
