"""SPDC kernels against slow NumPy references on the same index order."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

from daskpd.kernels import scalar
from daskpd.kernels import spdc as K


def soft(v, t):
    return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


def reference_dual_step(code, params, z, c, sigma, delta, label):
    """argmax_b b c - phi^*(b) - (delta/2) b^2 - (b - z)^2 / (2 sigma), written independently."""
    if code == scalar.SQUARED:
        # phi^*(b) = b^2/2 + label b.
        return (z + sigma * (c - label)) / (1.0 + sigma * (1.0 + delta))
    if code in (scalar.SMOOTH_HINGE, scalar.HINGE):
        g = (params[0] if code == scalar.SMOOTH_HINGE else 0.0) + delta
        s = (label * z + sigma * (label * c - 1.0)) / (1.0 + sigma * g)
        return label * np.clip(s, -1.0, 0.0)
    if code == scalar.LOGISTIC:
        # s = -label b in (0, 1): log(s / (1 - s)) + label c + (s + label z) / sigma + delta s = 0.
        def f(s):
            return np.log(s / (1 - s)) + label * c + (s + label * z) / sigma + delta * s

        s = scipy.optimize.brentq(f, 1e-300, 1 - 1e-16, xtol=1e-300, rtol=1e-15, maxiter=500)
        return -label * s
    raise AssertionError(code)


def dense_reference(X, labels, z0, w0, w_prev0, order, m, inv_npi, steps, reg, loss, n_total):
    """Dense SPDC (Algorithm 1/2/3 of the paper) on every coordinate, in NumPy."""
    tau, sigma, theta = steps
    l1, l2 = reg
    code, params, delta = loss
    X = np.asarray(X.todense()) if sp.issparse(X) else X
    w, w_prev, z = w0.copy(), w_prev0.copy(), z0.copy()
    u = X.T @ z / n_total
    for it in range(len(order) // m):
        batch = order[it * m : (it + 1) * m]
        xbar = w + theta * (w - w_prev)
        dz = np.zeros(m)
        for b, k in enumerate(batch):
            c = X[k] @ xbar
            new = reference_dual_step(
                code, params, z[k], c, sigma * m * inv_npi[k], delta, labels[k]
            )
            dz[b] = new - z[k]
            z[k] = new
        corr = (dz * inv_npi[batch]) @ X[batch]
        w_new = soft(w - tau * (u + corr), tau * l1) / (1 + l2 * tau)
        u = u + dz @ X[batch] / n_total
        w_prev, w = w, w_new
    return w, w_prev, z, u


def run_kernel(X, labels, z0, w0, order, m, inv_npi, steps, reg, loss, n_total, binary=False,
               table=K.FACTOR_TABLE, loop=None, weights=None):  # fmt: skip
    """The kernel from ``(w0, z0)``; ``loop``: a private loop of :func:`K.spdc_rows` instead."""
    X = sp.csr_matrix(X)
    d = X.shape[1]
    z = z0.copy()
    state = K.lazy_state(w0, w0, X.T @ z / n_total, 0)
    values = np.empty(0) if binary else X.data.astype(np.float64)
    block = K.BlockRows(X.indptr.astype(np.int64), X.indices.astype(np.int64), values, binary,
                        labels, np.empty(0) if weights is None else weights)  # fmt: skip
    factors = K.geometric_table(steps[0], reg[1], table)
    primal = K.LazyPrimal(state, np.full(d, -1, dtype=np.int64), np.zeros(d), factors)
    scalars = K.step_scalars(*steps, reg[0], reg[1], loss[2], n_total)
    if loop is None:
        t = K.spdc_rows(block, z, K.RowSample(order, m, inv_npi), primal, 0, loss[0], loss[1],
                        scalars)  # fmt: skip
    else:
        t = loop(block, z, K.RowSample(order, m, inv_npi), primal, 0, loss[0], loss[1], scalars)
    K.flush(t, state, steps[0], reg[0], reg[1], factors)
    w, w_prev, u = (state[:, f].copy() for f in (K.LAZY_W, K.LAZY_W_PREV, K.LAZY_U))
    return w, w_prev, z, u, t


def theoretical_steps(X, lam, m, gamma=1.0):
    n = X.shape[0]
    big_r = np.sqrt(X.multiply(X).sum(axis=1).max())
    tau = np.sqrt(m * gamma / (n * lam)) / (2 * big_r)
    sigma = np.sqrt(n * lam / (m * gamma)) / (2 * big_r)
    theta = 1 - 1 / (n / m + 2 * big_r * np.sqrt(n / (m * lam * gamma)))
    return tau, sigma, theta


def sparse_problem(rng, n=60, d=40, density=0.08, binary=False):
    X = sp.random(n, d, density=density, random_state=rng, format="csr")
    if binary:
        X.data[:] = 1.0
    else:
        X.data = rng.normal(size=X.nnz) * rng.choice([0.3, 1.0, 4.0], size=X.nnz)
    return X


@pytest.mark.parametrize("reg", [(0.0, 0.05), (0.08, 0.02), (0.2, 1e-7), (0.05, 0.0)])
@pytest.mark.parametrize("scheme", ["uniform", "minibatch", "weighted"])
def test_lazy_equals_dense_squared(rng, reg, scheme):
    X = sparse_problem(rng)
    n, d = X.shape
    labels = rng.normal(size=n)
    z0 = rng.normal(size=n) * 0.5  # nonzero u: untouched coordinates drift
    w0 = rng.normal(size=d) * 0.3
    m = 3 if scheme == "minibatch" else 1
    n_iter = 400
    if scheme == "weighted":
        p = rng.uniform(0.2, 1.0, size=n)
        p /= p.sum()
        order = rng.choice(n, size=n_iter, p=p)
        inv_npi = 1.0 / (n * p)
    else:
        order = np.concatenate([rng.choice(n, m, replace=False) for _ in range(n_iter)])
        inv_npi = np.full(n, 1.0 / m)
    steps = theoretical_steps(X, max(reg[1], 0.01), m)
    loss = (scalar.SQUARED, np.zeros(1), 0.0)
    got = run_kernel(X, labels, z0, w0, order, m, inv_npi, steps, reg, loss, n)
    ref = dense_reference(X, labels, z0, w0, w0, order, m, inv_npi, steps, reg, loss, n)
    for a, b in zip(got[:4], ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert got[4] == n_iter
    # the L1 cases must actually exercise sign changes and exact zeros
    if reg[0] > 0:
        assert np.any(got[0] == 0.0) and np.any(np.sign(got[0]) != np.sign(w0))


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("reg", [(0.0, 0.05), (0.08, 0.02)])
def test_rows_longer_than_the_prefetch_distance(rng, m, reg):
    # the row loops prefetch PREFETCH_AHEAD nonzeros ahead inside a row: rows several times
    # that long, one row and three an iteration, against the dense reference
    X = sparse_problem(rng, n=40, d=300, density=0.25)
    n, d = X.shape
    assert np.diff(X.indptr).min() > 2 * K.PREFETCH_AHEAD
    labels = rng.normal(size=n)
    z0 = rng.normal(size=n) * 0.5
    w0 = rng.normal(size=d) * 0.3
    order = np.concatenate([rng.choice(n, m, replace=False) for _ in range(150)])
    inv_npi = np.full(n, 1.0 / m)
    steps = theoretical_steps(X, reg[1], m)
    loss = (scalar.SQUARED, np.zeros(1), 0.0)
    got = run_kernel(X, labels, z0, w0, order, m, inv_npi, steps, reg, loss, n)
    ref = dense_reference(X, labels, z0, w0, w0, order, m, inv_npi, steps, reg, loss, n)
    for a, b in zip(got[:4], ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize(
    "code,params,delta",
    [
        (scalar.SMOOTH_HINGE, np.array([1.0]), 0.0),
        (scalar.HINGE, np.zeros(1), 0.05),
        (scalar.LOGISTIC, np.zeros(1), 0.0),
        (scalar.SQUARED, np.zeros(1), 0.1),
    ],
)
def test_kernel_matches_reference_losses(rng, code, params, delta):
    X = sparse_problem(rng, n=50, d=30, density=0.15)
    n, d = X.shape
    labels = rng.choice([-1.0, 1.0], size=n)
    if code == scalar.SQUARED:
        labels = rng.normal(size=n)
    z0 = np.zeros(n)
    w0 = np.zeros(d)
    order = rng.integers(0, n, size=300)
    inv_npi = np.ones(n)
    reg = (0.01, 0.1)
    steps = theoretical_steps(X, reg[1], 1, gamma=max(delta, 0.25) if code != 4 else 1.0)
    got = run_kernel(X, labels, z0, w0, order, 1, inv_npi, steps, reg, (code, params, delta), n)
    ref = dense_reference(
        X, labels, z0, w0, w0, order, 1, inv_npi, steps, reg, (code, params, delta), n
    )
    for a, b in zip(got[:4], ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    if code != scalar.SQUARED:
        # dual feasibility of the classification losses: labels * z in [-1, 0]
        assert np.all(labels * got[2] <= 0.0) and np.all(labels * got[2] >= -1.0)


def test_binary_rows_equal_explicit_ones(rng):
    X = sparse_problem(rng, binary=True)
    n, d = X.shape
    labels = rng.normal(size=n)
    order = rng.integers(0, n, size=200)
    steps = theoretical_steps(X, 0.1, 1)
    args = (labels, rng.normal(size=n), np.zeros(d), order, 1, np.ones(n), steps)
    rest = ((0.01, 0.1), (scalar.SQUARED, np.zeros(1), 0.0), n)
    a = run_kernel(X, *args, *rest, binary=True)
    b = run_kernel(X, *args, *rest, binary=False)
    for x, y in zip(a[:4], b[:4], strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("reg", [(0.0, 0.05), (0.08, 0.02), (0.0, 0.0)])
@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("table", [0, 3, K.FACTOR_TABLE])
def test_one_row_loop_is_the_batch_loop_bit_for_bit(rng, reg, binary, table):
    # batch_size 1 takes the two-loop path; the mini-batch loop with one row an iteration
    # and no table (every factor computed) is the reference, bit for bit
    X = sparse_problem(rng, n=60, d=400, density=0.03, binary=binary)
    n, d = X.shape
    labels = rng.choice([-1.0, 1.0], size=n)
    weights = rng.choice([0.0, 0.5, 1.0, 3.0], size=n)
    order = rng.integers(0, n, size=700)
    steps = theoretical_steps(X, max(reg[1], 0.01), 1, gamma=4.0)
    loss = (scalar.LOGISTIC, np.zeros(1), 0.0)
    args = (X, labels, np.zeros(n), rng.normal(size=d) * 0.1, order, 1, np.ones(n), steps, reg,
            loss, n)  # fmt: skip
    got = run_kernel(*args, binary=binary, table=table, weights=weights)
    ref = run_kernel(*args, binary=binary, table=0, weights=weights, loop=K._batch_rows)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_array_equal(a, b)
    # the skips went beyond the small tables, and rows moved: not a vacuous comparison
    assert np.count_nonzero(got[2]) > n // 2


def test_geometric_table_is_the_formula(rng):
    table = K.geometric_table(0.3, 2e-3, 100)
    for k in (0, 1, 7, 99):
        assert tuple(table[k]) == K.geometric_factor(k, 0.3, 2e-3)
    # flush tabulates the span of its stamps for itself (here 500 skips for 1,000
    # coordinates): the same bits as catching up each coordinate with the formula
    d, t = 1000, 500
    state = K.lazy_state(rng.normal(size=d), rng.normal(size=d), rng.normal(size=d), 0)
    state[:, K.LAZY_STAMP] = rng.integers(0, t + 1, size=d)
    flushed = state.copy()
    K.flush(t, flushed, 0.3, 0.0, 2e-3, np.empty((0, 2)))
    for j in range(d):
        K.catch_up(j, t, state, 0.3, 0.0, 2e-3, np.empty((0, 2)))
    np.testing.assert_array_equal(flushed, state)
    assert np.all(flushed[:, K.LAZY_STAMP] == t)


def test_lazy_state_records_start_on_a_cache_line(rng):
    # each 32-byte record in one cache line, wherever NumPy's allocation starts
    for n in (1, 7, 1000, 300_000):
        w = rng.normal(size=n)
        state = K.lazy_state(w, 2 * w, 3 * w, 5)
        assert K.is_record_aligned(state) and state.flags.c_contiguous
        np.testing.assert_array_equal(state[:, K.LAZY_W_PREV], 2 * w)
        assert np.all(state[:, K.LAZY_STAMP] == 5.0)
    out = np.zeros((3, K.LAZY_WIDTH))
    assert K.lazy_state(np.ones(3), np.ones(3), np.ones(3), 2, out=out) is out
    assert np.all(out[:, K.LAZY_STAMP] == 2.0)


def test_primal_step_is_the_soft_threshold_prox(rng):
    # The prox of tau (l1 |w| + (l2 / 2) w^2) in NumPy, at both signs, a zero threshold
    # (the kernel's branch-free path) included: the same numbers (the sign of a zero apart).
    v_in = rng.normal(size=300) * rng.choice([0.0, 1e-3, 1.0, 10.0], size=300)
    u = rng.normal(size=300)
    for tau, l1, l2 in ((0.3, 0.0, 2e-3), (0.3, 0.0, 0.0), (0.05, 0.4, 1e-2), (2.0, 1e-3, 0.0)):
        v = v_in - tau * u
        want = np.sign(v) * np.maximum(np.abs(v) - tau * l1, 0.0) / (1.0 + l2 * tau)
        got = np.array([K.primal_step(a, b, tau, l1, l2) for a, b in zip(v_in, u, strict=True)])
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("l2", [1e-1, 1e-3, 1e-6, 1e-9, 0.0])
def test_lazy_steps_match_iteration(rng, l2):
    worst = 0.0
    for _ in range(400):
        x0 = rng.normal() * rng.choice([0.0, 1.0, 10.0])
        u = rng.normal() * rng.choice([0.01, 1.0])
        k = int(rng.integers(0, 200))
        tau = rng.uniform(0.01, 2.0)
        l1 = float(rng.choice([0.0, 0.1, 1.0]))
        x = x0
        for _ in range(k):
            x = K.primal_step(x, u, tau, l1, l2)
        got = K.lazy_steps(x0, u, k, tau, l1, l2)
        worst = max(worst, abs(got - x) / max(1.0, abs(x)))
    assert worst < 1e-12


def test_stable_form_at_tiny_l2():
    # The paper's (36) loses ~1e-8 relative here; the expm1/log1p form must not.
    x0, u, k, tau, l2 = 0.3, 2.0, 5000, 0.5, 1e-10
    x = x0
    for _ in range(k):
        x = K.primal_step(x, u, tau, 0.0, l2)
    assert abs(K.lazy_steps(x0, u, k, tau, 0.0, l2) - x) <= 1e-12 * abs(x)


def test_transpose_and_row_dots(rng):
    X = sparse_problem(rng)
    w = rng.normal(size=X.shape[1])
    z = rng.normal(size=X.shape[0])
    args = (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data, False)
    np.testing.assert_allclose(K.row_dots(*args, w), X @ w, rtol=1e-13)
    np.testing.assert_allclose(K.transpose_dot(*args, z, X.shape[1]), X.T @ z, rtol=1e-13)
