"""GSFW's in-memory references and baselines (tests and benchmarks).

Algorithm 2 (the dual mirror descent of Lemma 2.1), the bound of Theorem 3.1, and the
deterministic and stochastic Frank-Wolfe baselines, all eager on an in-memory ``X``. Symbols
as in the paper-to-code table of :mod:`daskpd.solvers.gsfw`.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels import gsfw as kernels


def _csr_arrays(X):
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    X.sort_indices()
    return (
        np.ascontiguousarray(X.indptr, dtype=np.int64),
        np.ascontiguousarray(X.indices, dtype=np.int32),
        np.ascontiguousarray(X.data, dtype=np.float64),
    )


def _l1_ball_lmo(radius):
    def lmo(g):
        out = np.zeros_like(g)
        index, sign = kernels.lmo_vertex(g)
        out[index] = sign * radius
        return out

    return lmo


def gsfw_dual_mirror_descent(X, y, loss, radius, batches, z=None):
    """Algorithm 2 (randomized coordinate mirror descent on the dual) on the L1 ball.

    An independent code path used to verify Lemma 2.1: it recomputes ``(1/n) X^T z`` every
    iteration and solves each coordinate's Bregman step (26) by bisection.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : Loss
        Smooth loss with a ``code`` and ``params``.
    radius : float
        L1-ball radius ``delta``.
    batches : ndarray of shape (n_iterations, batch_size), int
        The row sequence (``j_i``, or mini-batches ``B_i``).
    z : ndarray of shape (n_samples,), optional
        Starting dual point; default ``argmin h = loss'(0)``.

    Returns
    -------
    z : ndarray of shape (n_samples,)
        Dual iterate after the last iteration.
    w_bar : ndarray of shape (n_features,)
        The averaged primal (optional accounting of Algorithm 2).
    """
    indptr, indices, values = _csr_arrays(X)
    y = np.asarray(y, dtype=np.float64)
    n, n_features = X.shape
    if z is None:
        z = np.asarray(loss.gradient(np.zeros(n), y), dtype=np.float64)
    z = np.array(z, dtype=np.float64)
    lo, hi = loss.dual_bounds(y)
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (n,)).copy()
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (n,)).copy()
    batches = np.atleast_2d(np.asarray(batches, dtype=np.int64))
    w_bar = np.zeros(n_features)
    m = n / batches.shape[1]
    kernels.dual_mirror_descent_iterations(
        kernels.BlockRows(indptr, indices, values, True, y), int(loss.code),
        np.asarray(loss.params, float), batches, kernels.LMO_L1_BALL, np.array([float(radius)]),
        m, 0, z, lo, hi, w_bar,
    )  # fmt: skip
    return z, w_bar


def theorem31_bound(n, batch_size, k, gamma, big_m, d_max=None):
    """Right-hand side of Theorem 3.1 (mini-batch form, ``n -> n/b``) at iteration ``k``.

    Parameters
    ----------
    n, batch_size, k : int
    gamma : float
        Smoothness of the loss (1/4 for logistic).
    big_m : float
        ``M = max_j max_{w in dom R} |x_j . w|`` (L1 ball: ``radius * max |X_jk|``).
    d_max : float, optional
        Bound on ``D_h(z, z^0)``; default ``gamma M^2`` (Prop. 3.1).

    Returns
    -------
    float
    """
    m = n / batch_size
    d_max = gamma * big_m**2 if d_max is None else d_max
    return 8 * m * gamma * big_m**2 / (4 * m + k) + 2 * m * (2 * m - 1) * d_max / (
        (4 * m + k) * (k + 1)
    )


def frank_wolfe(X, y, loss, radius, *, max_iterations, record_every=1, time_limit=None):
    """Deterministic Frank-Wolfe on the L1 ball (baseline, eqs. (6)-(7), step ``2/(k+2)``).

    Every iteration costs ``n`` sample gradients and one LMO call.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : Loss
    radius : float
    max_iterations : int
    record_every : int, default=1
    time_limit : float, optional
        Stop after this many seconds of iterations.

    Returns
    -------
    list of dict
        Records with ``iteration``, ``sample_gradients``, ``lmo_calls``, ``seconds``,
        ``w`` (a copy) and ``fw_gap`` (the Frank-Wolfe gap at the previous iterate, which is
        the duality gap there).
    """
    import time

    indptr, indices, values = _csr_arrays(X)
    y = np.asarray(y, dtype=np.float64)
    n, n_features = X.shape
    code, params = int(loss.code), np.asarray(loss.params, dtype=np.float64)
    w = np.zeros(n_features)
    records = []
    seconds = 0.0
    for k in range(max_iterations):
        tick = time.perf_counter()
        grad = kernels.full_gradient(indptr, indices, values, True, y, code, params, w, n_features)
        index, sign = kernels.lmo_vertex(grad)
        vertex = np.zeros(n_features)
        vertex[index] = sign * radius
        fw_gap = float(grad @ (w - vertex))
        step = 2.0 / (k + 2.0)
        w = (1.0 - step) * w + step * vertex
        seconds += time.perf_counter() - tick
        if (k + 1) % record_every == 0 or k + 1 == max_iterations:
            records.append(
                {
                    "iteration": k + 1,
                    "sample_gradients": n * (k + 1),
                    "lmo_calls": k + 1,
                    "seconds": seconds,
                    "w": w.copy(),
                    "fw_gap": fw_gap,
                }
            )
        if time_limit is not None and seconds >= time_limit:
            break
    return records


def stochastic_frank_wolfe(
    X, y, loss, radius, *, max_iterations, record_every=1, random_state=0, time_limit=None
):
    """SFW of Hazan & Luo (baseline): batch ``min(k^2, n/2)`` without replacement, ``2/(k+1)``.

    The batch rule is the one of the GSFW paper's Table 2.

    Parameters
    ----------
    X, y, loss, radius, max_iterations, record_every, time_limit
        As in :func:`frank_wolfe`.
    random_state : int, default=0

    Returns
    -------
    list of dict
        Records with ``iteration``, ``sample_gradients``, ``lmo_calls``, ``seconds``, ``w``.
    """
    import time

    indptr, indices, values = _csr_arrays(X)
    y = np.asarray(y, dtype=np.float64)
    n, n_features = X.shape
    code, params = int(loss.code), np.asarray(loss.params, dtype=np.float64)
    rng = np.random.default_rng(random_state)
    w = np.zeros(n_features)
    grads = 0
    records = []
    seconds = 0.0
    for k in range(1, max_iterations + 1):
        tick = time.perf_counter()
        size = int(min(k * k, n // 2))
        rows = rng.choice(n, size=max(size, 1), replace=False).astype(np.int64)
        grad = kernels.rows_gradient(
            indptr, indices, values, True, y, code, params, w, rows, n_features
        )
        grads += rows.shape[0]
        index, sign = kernels.lmo_vertex(grad)
        step = 2.0 / (k + 1.0)
        w *= 1.0 - step
        w[index] += step * sign * radius
        seconds += time.perf_counter() - tick
        if k % record_every == 0 or k == max_iterations:
            records.append(
                {
                    "iteration": k,
                    "sample_gradients": grads,
                    "lmo_calls": k,
                    "seconds": seconds,
                    "w": w.copy(),
                }
            )
        if time_limit is not None and seconds >= time_limit:
            break
    return records
