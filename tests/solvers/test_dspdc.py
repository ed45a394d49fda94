"""DSPDC: kernels against a naive NumPy reference, factorized = explicit, q = p = SPDC,
step-size identities, convergence, PSD blocks (Section 5.2)."""

from __future__ import annotations

import math

import dask
import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

from daskpd.data import as_dataset
from daskpd.kernels import dspdc as K
from daskpd.kernels import scalar
from daskpd.kernels import spdc as spdc_kernels
from daskpd.problem import Problem
from daskpd.solvers.driver import get_solver, solve
from daskpd.solvers.dspdc import (
    DSPDCSolver,
    dspdc_step_sizes,
    solve_factorized,
    solve_matrix_risk,
)
from daskpd.solvers.spdc import SPDCSolver


@pytest.fixture(autouse=True)
def _in_process_scheduler(request):
    # With a session LocalCluster alive, plain dask.compute would go to it; these tests are
    # about the in-process path (the cluster test passes its client explicitly).
    if "local_cluster" in request.fixturenames:
        yield
        return
    with dask.config.set(scheduler="threads"):
        yield


def soft(v, t):
    return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


def dual_step(code, z, c, step, label):
    if code == scalar.SQUARED:
        return (z + step * (c - label)) / (1.0 + step)
    s = (label * z + step * (label * c - 1.0)) / (1.0 + step)  # smoothed hinge, gamma = 1
    return label * np.clip(s, -1.0, 0.0)


def naive_dspdc(A, labels, rows, m, cols, q, steps, l1, l2, code):
    """Algorithm 1 exactly as printed, recomputing A xbar and A^T ybar from scratch."""
    tau, sigma, theta = steps
    n, p = A.shape
    x = np.zeros(p)
    xbar = x.copy()
    y = np.zeros(n)
    for t in range(len(rows) // m):
        batch = rows[t * m : (t + 1) * m]
        coords = np.arange(p) if q == p else cols[t * q : (t + 1) * q]
        y_new = y.copy()
        for i in batch:
            # (15): argmax (1/n)<A_i, xbar> b - phi^*(b)/n - (b - y_i)^2 / (2 sigma)
            y_new[i] = dual_step(code, y[i], A[i] @ xbar, sigma / n, labels[i])
        ybar = y + (n / m) * (y_new - y)
        grad = A.T @ ybar / n
        x_new = x.copy()
        x_new[coords] = soft(x[coords] - tau * grad[coords], tau * l1) / (1 + tau * l2)
        xbar = x + (theta + 1.0) * (x_new - x)
        x, y = x_new, y_new
    return x, y


def streams(rng, n, p, m, q, n_iter):
    rows = np.concatenate([rng.choice(n, m, replace=False) for _ in range(n_iter)])
    cols = np.concatenate([rng.choice(p, q, replace=False) for _ in range(n_iter)])
    return rows.astype(np.int64), cols.astype(np.int64)


def explicit_run(A, labels, rows, m, cols, q, steps, l1, l2, code):
    X = sp.csr_matrix(A)
    n, p = A.shape
    w, w_prev, u, z = np.zeros(p), np.zeros(p), np.zeros(p), np.zeros(n)
    K.dspdc_rows(
        spdc_kernels.BlockRows(X.indptr.astype(np.int64), X.indices.astype(np.int64),
                               X.data.astype(np.float64), False, labels, np.empty(0)),
        z, K.CoordinateSample(rows, m, cols if q < p else np.empty(0, np.int64), q),
        K.PrimalState(w, w_prev, u, np.zeros(p)), code, np.array([1.0]),
        spdc_kernels.step_scalars(*steps, l1, l2, 0.0, n),
    )  # fmt: skip
    return w, z, u


def factorized_run(U, V, labels, rows, m, cols, q, steps, l1, l2, code):
    n, rank = U.shape
    p = V.shape[1]
    w, z = np.zeros(p), np.zeros(n)
    u, v, vbar = np.zeros(rank), np.zeros(rank), np.zeros(rank)
    K.dspdc_factorized(
        U, V, labels, z, w, K.FactorProducts(u, v, vbar),
        K.CoordinateSample(rows, m, cols if q < p else np.empty(0, np.int64), q),
        code, np.array([1.0]), spdc_kernels.step_scalars(*steps, l1, l2, 0.0, n),
    )  # fmt: skip
    return w, z, u, v


def small_factorized(rng, n=80, p=30, rank=5):
    U = rng.normal(size=(n, rank))
    V = rng.normal(size=(rank, p)) / math.sqrt(rank)
    labels = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    return U, V, labels


def safe_steps(A, m, q, lam):
    n, p = A.shape
    sq = np.sort(A**2, axis=1)[:, ::-1]
    lip = min(m * sq[:, :q].sum(axis=1).max(), m * q * (A**2).max())
    return dspdc_step_sizes(n, p, m, q, lip, lam, 1.0)


@pytest.mark.parametrize("m,q", [(1, 3), (4, 7), (2, 30), (1, 1)])
@pytest.mark.parametrize("code", [scalar.SQUARED, scalar.SMOOTH_HINGE])
def test_kernels_match_naive_reference(rng, m, q, code):
    U, V, labels = small_factorized(rng)
    A = U @ V
    if code == scalar.SQUARED:
        labels = rng.normal(size=len(labels))
    n, p = A.shape
    rows, cols = streams(rng, n, p, m, q, 600)
    steps = safe_steps(A, m, q, 0.05)
    l1, l2 = 0.01, 0.05
    x_ref, y_ref = naive_dspdc(A, labels, rows, m, cols, q, steps, l1, l2, code)
    w, z, u = explicit_run(A, labels, rows, m, cols, q, steps, l1, l2, code)
    np.testing.assert_allclose(w, x_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(z, y_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(u, A.T @ z / n, rtol=1e-10, atol=1e-13)  # invariant
    wf, zf, uf, vf = factorized_run(U, V, labels, rows, m, cols, q, steps, l1, l2, code)
    # factorized (Algorithm 2) and explicit A: same iterates
    np.testing.assert_allclose(wf, w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(zf, z, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(uf, U.T @ zf, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(vf, V @ wf, rtol=1e-10, atol=1e-12)


def test_step_size_identities(rng):
    for _ in range(50):
        n, p = int(rng.integers(10, 5000)), int(rng.integers(2, 500))
        m, q = int(rng.integers(1, n + 1)), int(rng.integers(1, p + 1))
        lip, lam, gamma = rng.uniform(0.1, 10), 10 ** rng.uniform(-6, -1), rng.uniform(0.2, 4)
        tau, sigma, theta = dspdc_step_sizes(n, p, m, q, lip, lam, gamma)
        assert tau * sigma == pytest.approx(n * m * q / (4 * p * lip), rel=1e-10)
        lhs = p / (2 * q * lam * tau) + p / q
        rhs = n * n / (2 * m * gamma * sigma) + n / m
        assert lhs == pytest.approx(rhs, rel=1e-10)
        assert 0 < theta * q / p < 1
    # equal sampling ratios: (24)
    n, p, m, q, lip, lam, gamma = 1000, 100, 10, 1, 3.0, 1e-3, 1.0
    tau, sigma, _ = dspdc_step_sizes(n, p, m, q, lip, lam, gamma)
    assert tau == pytest.approx(m / 2 * math.sqrt(gamma / (lip * n * lam)), rel=1e-12)
    assert sigma == pytest.approx(m / 2 * math.sqrt(n * lam / (lip * gamma)), rel=1e-12)
    # q = p with Lambda = m R^2: SPDC's rate
    big_r, m = 2.0, 4
    theta = dspdc_step_sizes(n, p, m, p, m * big_r**2, lam, gamma).theta
    assert theta == pytest.approx(1 - 1 / (n / m + big_r * math.sqrt(n / (m * lam * gamma))))
    # theta ~ p/q, not clipped
    assert dspdc_step_sizes(n, p, 1, 1, 1.0, lam, gamma).theta > 1.0


def test_q_equals_p_is_spdc(rng):
    X = rng.normal(size=(120, 9))
    X[np.abs(X) < 0.5] = 0.0
    y = np.where(rng.normal(size=120) > 0, 1.0, -1.0)
    data = as_dataset(X, y, rows_per_block=50)
    problem = Problem("smooth_hinge", "elasticnet", 0.05)
    dspdc = DSPDCSolver()
    d_opts = dspdc.Options(batch_size=3)
    _, steps, _, _ = dspdc.parameters(problem, data, d_opts)
    spdc = SPDCSolver()
    # DSPDC's dual step has a 1/n factor: sigma_SPDC = sigma_DSPDC / n; DSPDC draws i.i.d.
    s_opts = spdc.Options(
        batch_size=3, sampling="uniform", tau=steps.tau, sigma=steps.sigma / 120, theta=steps.theta
    )
    seed = np.random.SeedSequence(9)
    a = dspdc.init(problem, data, seed=seed, client=None, options=d_opts)
    b = spdc.init(problem, data, seed=seed, client=None, options=s_opts)
    for epoch in (1, 2, 3):
        a = dspdc.run_epoch(a, epoch)
        b = spdc.run_epoch(b, epoch)
    np.testing.assert_allclose(a.carry.w, b.carry.w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        np.concatenate(a.z_blocks), np.concatenate(b.z_blocks), rtol=1e-12, atol=1e-14
    )


def test_dspdc_driver_converges_to_sklearn(rng):
    from sklearn.linear_model import ElasticNet

    X = rng.normal(size=(150, 12))
    y = X @ rng.normal(size=12) + 0.3 * rng.normal(size=150)
    alpha, ratio = 0.2, 0.5
    from daskpd.regularizers import ElasticNet as EN

    result = solve(
        (X, y), "squared", EN(l1_ratio=ratio), alpha, solver="dspdc", n_coords=4,
        max_epochs=400, tol=1e-12, eval_every=20, client=False,
    )  # fmt: skip
    assert result.gap <= 1e-12
    ref = ElasticNet(alpha=alpha, l1_ratio=ratio, fit_intercept=False, tol=1e-14,
                     max_iter=10**6).fit(X, y)  # fmt: skip
    np.testing.assert_allclose(result.w, ref.coef_, rtol=1e-5, atol=1e-7)


def test_solve_factorized_converges(rng):
    U, V, labels = small_factorized(rng, n=200, p=40, rank=6)
    res = solve_factorized(U, V, labels, "smooth_hinge", "l2", 0.05, n_coords=8,
                           max_epochs=600, tol=1e-13, lipschitz="heuristic")  # fmt: skip
    gaps = [row["gap"] for row in res.history]
    assert gaps[-1] <= 1e-13
    assert min(gaps) >= -1e-12
    # the optimum of the same primal by a high-precision L-BFGS on the explicit matrix
    A, n = U @ V, len(labels)

    def objective(w):
        m = labels * (A @ w)
        loss = np.where(m >= 1, 0.0, np.where(m <= 0, 0.5 - m, 0.5 * (1 - m) ** 2))
        dloss = np.where(m >= 1, 0.0, np.where(m <= 0, -1.0, m - 1.0))
        return loss.mean() + 0.025 * w @ w, A.T @ (dloss * labels) / n + 0.05 * w

    ref = scipy.optimize.minimize(objective, np.zeros(A.shape[1]), jac=True, method="L-BFGS-B",
                                  options={"gtol": 1e-14, "ftol": 1e-16, "maxiter": 10**5,
                                           "maxcor": 50}).x  # fmt: skip
    np.testing.assert_allclose(res.w, ref, rtol=1e-5, atol=3e-6)
    # deterministic given the seed
    again = solve_factorized(U, V, labels, "smooth_hinge", "l2", 0.05, n_coords=8,
                             max_epochs=3, tol=0.0, lipschitz="heuristic")  # fmt: skip
    first = solve_factorized(U, V, labels, "smooth_hinge", "l2", 0.05, n_coords=8,
                             max_epochs=3, tol=0.0, lipschitz="heuristic")  # fmt: skip
    np.testing.assert_array_equal(again.w, first.w)


def test_draw_subsets_uniform():
    rng = np.random.default_rng(1)
    p, q, n_draws = 12, 4, 20000
    out = K.draw_subsets(rng.random(n_draws * q), p, q, np.arange(p, dtype=np.int64))
    out = out.reshape(n_draws, q)
    assert all(len(set(row)) == q for row in out[:500])
    np.testing.assert_allclose(np.bincount(out.ravel(), minlength=p) / n_draws, q / p, atol=0.02)


def test_psd_blocks_scalar_case_matches_bounded_solver(rng):
    # k = 1: PSD means >= 0, so the problem is nonnegative least squares + ridge.
    n, blocks = 60, 5
    D = rng.normal(size=(n, blocks, 1, 1))
    y = D[:, :, 0, 0] @ rng.normal(size=blocks) + 0.1 * rng.normal(size=n)
    alpha = 0.05
    res = solve_matrix_risk(D, y, "squared", alpha, batch_size=1, n_coords=2, max_epochs=400,
                            tol=0.0, eval_every=100)  # fmt: skip
    A = D[:, :, 0, 0]
    # exact reference: nonnegative least squares on the ridge-augmented system
    stacked = np.vstack([A / math.sqrt(n), math.sqrt(alpha) * np.eye(blocks)])
    ref, _ = scipy.optimize.nnls(stacked, np.concatenate([y / math.sqrt(n), np.zeros(blocks)]))
    assert np.any(ref == 0.0)  # the constraint is active
    np.testing.assert_allclose(res.Xs[:, 0, 0], ref, rtol=1e-7, atol=1e-10)
    assert abs(res.history[-1]["gap"]) <= 1e-13


def test_psd_blocks_matrix_case(rng):
    n, blocks, k = 80, 4, 3
    D = rng.normal(size=(n, blocks, k, k))
    scores = np.einsum("ijab,jab->i", D, np.broadcast_to(np.eye(k), (blocks, k, k)))
    y = np.where(scores > 0, 1.0, -1.0)
    res = solve_matrix_risk(D, y, "smooth_hinge", 0.05, batch_size=2, n_coords=2,
                            max_epochs=300, tol=1e-8)  # fmt: skip
    gaps = [row["gap"] for row in res.history]
    assert gaps[-1] <= 1e-8 and min(gaps) >= -1e-12
    for X in res.Xs:
        np.testing.assert_allclose(X, X.T, atol=1e-12)
        assert np.linalg.eigvalsh(X).min() >= -1e-10
    assert np.all(y * res.z <= 0) and np.all(y * res.z >= -1)


@pytest.mark.parametrize(
    "options,match",
    [({"n_coords": 0}, "n_coords"), ({"n_coords": 99}, "n_coords"),
     ({"lipschitz": "exact"}, "lipschitz"), ({"theta_rule": "fast"}, "theta_rule"),
     ({"batch_size": 0}, "batch_size")],
)  # fmt: skip
def test_bad_options_raise_before_dask(counting_scheduler, rng, options, match):
    X = rng.normal(size=(20, 5))
    with pytest.raises(ValueError, match=match):
        solve((X, X[:, 0]), "squared", "l2", 0.1, solver="dspdc", client=False, **options)
    assert counting_scheduler.calls == 0


def test_registered():
    assert isinstance(get_solver("dspdc"), DSPDCSolver)


def test_matrix_kernel_matches_naive_reference(rng):
    n, blocks, k, m, q = 30, 4, 3, 2, 2
    D = rng.normal(size=(n, blocks, k, k))
    y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    rows, cols = streams(rng, n, blocks, m, q, 200)
    tau, sigma, theta, lam = 0.05, 3.0, 1.5, 0.1
    # Naive: recompute A^T ybar (the blocks W_j) from scratch every iteration.
    X = np.zeros((blocks, k, k))
    Xbar = X.copy()
    z = np.zeros(n)
    for t in range(200):
        batch, coords = rows[t * m : (t + 1) * m], cols[t * q : (t + 1) * q]
        z_new = z.copy()
        for i in batch:
            c = np.sum(D[i] * Xbar)
            z_new[i] = dual_step(scalar.SMOOTH_HINGE, z[i], c, sigma / n, y[i])
        zbar = z + (n / m) * (z_new - z)
        W = np.einsum("i,ijab->jab", zbar, D)
        X_new = X.copy()
        for j in coords:
            M = (X[j] / tau - 0.5 * (W[j] + W[j].T) / n) / (lam + 1 / tau)
            mu, Q = np.linalg.eigh(0.5 * (M + M.T))
            X_new[j] = (Q * np.maximum(mu, 0)) @ Q.T
        Xbar = X + (theta + 1) * (X_new - X)
        X, z = X_new, z_new
    Xs, Xs_prev, S, zk = (
        np.zeros((blocks, k, k)),
        np.zeros((blocks, k, k)),
        np.zeros((blocks, k, k)),
        np.zeros(n),
    )
    K.dspdc_matrix(D, y, zk, Xs, Xs_prev, S, K.CoordinateSample(rows, m, cols, q),
                   scalar.SMOOTH_HINGE, np.array([1.0]),
                   spdc_kernels.step_scalars(tau, sigma, theta, 0.0, lam, 0.0, n))  # fmt: skip
    np.testing.assert_allclose(Xs, X, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(zk, z, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(S, np.einsum("i,ijab->jab", zk, D), rtol=1e-10, atol=1e-12)


def test_driver_checkpoint_resume_is_exact(rng, tmp_path):
    X = rng.normal(size=(100, 8))
    y = X @ rng.normal(size=8)
    common = dict(tol=0.0, client=False, n_coords=3, batch_size=2)
    solve((X, y), "squared", "l2", 0.1, solver="dspdc", max_epochs=3,
          checkpoint_dir=tmp_path / "ck", **common)  # fmt: skip
    resumed = solve((X, y), "squared", "l2", 0.1, solver="dspdc", max_epochs=6,
                    checkpoint_dir=tmp_path / "ck", resume=True, **common)  # fmt: skip
    straight = solve((X, y), "squared", "l2", 0.1, solver="dspdc", max_epochs=6, **common)
    np.testing.assert_array_equal(resumed.w, straight.w)
