"""Numba kernels of DSPDC (Yu, Lin & Yang, "Doubly Stochastic Primal-Dual Coordinate Method
for Bilinear Saddle-Point Problem").

Translation table (paper -> code), used in every docstring of this module:

==========================  =========================================
paper                       code
==========================  =========================================
``x`` (primal, ``p``)       ``w`` (``n_features``)
``y`` (dual, ``n``)         ``z`` (``n_samples``)
``b`` (label)               ``labels``
``lambda`` (``lambda_2``)   ``l2`` (and ``l1`` for ``lambda_1``)
``A = U V``                 ``X`` (explicit CSR) or ``(U, V)`` (factorized)
``I`` (``m`` rows)          ``rows`` (``batch_size`` per iteration)
``J`` (``q`` coordinates)   ``cols`` (``n_coords`` per iteration)
``tau, sigma, theta``       ``tau, sigma, theta``
==========================  =========================================

Conventions. The paper's dual step (15) carries a ``1/n`` factor; it equals the SPDC dual
step with ``sigma_SPDC = sigma / n``, which is what :func:`daskpd.kernels.spdc.dual_step`
receives here. ``theta`` is the paper's (it is about ``p/q``, not clipped to [0, 1]); the
primal extrapolation (20) ``xbar = x^(t) + (theta + 1)(x^(t+1) - x^(t))`` touches only the
sampled coordinates, so ``xbar = w + theta (w - w_prev)`` with ``w_prev = w`` outside the
last sample. The primal step (19) uses ``A^T ybar / n = u + (1/m) A_I^T dz`` with
``u = A^T z / n``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from daskpd.kernels._config import njit
from daskpd.kernels.spdc import (
    dual_step,
    primal_step,
    scalar_values,
    weighted_dual_step,
)


class CoordinateSample(NamedTuple):
    """The rows and primal coordinates (or blocks) sampled by each iteration.

    Attributes
    ----------
    rows : ndarray of int64
        ``batch_size`` local row ids per iteration.
    batch_size : int
        ``m``.
    cols : ndarray of int64
        ``n_coords`` coordinates per iteration; :func:`dspdc_rows` and
        :func:`dspdc_factorized` take it empty when ``n_coords == n_features`` (every
        coordinate each iteration: SPDC).
    n_coords : int
        ``q``.
    """

    rows: np.ndarray
    batch_size: int
    cols: np.ndarray
    n_coords: int


class PrimalState(NamedTuple):
    """The primal state of :func:`dspdc_rows`.

    Attributes
    ----------
    w, w_prev : ndarray of shape (n_features,)
        Primal point and its value one iteration earlier.
    u : ndarray of shape (n_features,)
        ``A^T z / n``.
    acc : ndarray of shape (n_features,)
        Zeroed scratch; returned zeroed.
    """

    w: np.ndarray
    w_prev: np.ndarray
    u: np.ndarray
    acc: np.ndarray


class FactorProducts(NamedTuple):
    """The products :func:`dspdc_factorized` maintains, each of shape (rank,).

    Attributes
    ----------
    u : ndarray
        ``U^T z``.
    v : ndarray
        ``V w``.
    vbar : ndarray
        ``V xbar``.
    """

    u: np.ndarray
    v: np.ndarray
    vbar: np.ndarray


@njit
def draw_subsets(uniforms, n_items, size, perm):
    """Uniform ``size``-subsets of ``range(n_items)`` by partial Fisher-Yates, O(size) each.

    Parameters
    ----------
    uniforms : ndarray of shape (n_draws * size,)
        Uniform numbers in [0, 1) (drawn by NumPy from the task's seed).
    n_items, size : int
    perm : ndarray of int64, shape (n_items,)
        A permutation of ``range(n_items)``, updated in place (any permutation works: a
        partial shuffle of it is a uniform subset).

    Returns
    -------
    ndarray of int64, shape (n_draws * size,)
    """
    n_draws = uniforms.shape[0] // size
    out = np.empty(n_draws * size, dtype=np.int64)
    for t in range(n_draws):
        for k in range(size):
            r = k + int(uniforms[t * size + k] * (n_items - k))
            if r >= n_items:
                r = n_items - 1
            tmp = perm[k]
            perm[k] = perm[r]
            perm[r] = tmp
            out[t * size + k] = perm[k]
    return out


@njit
def dspdc_rows(block, z, sample, primal, code, params, scalars):
    """DSPDC (Algorithm 1) iterations on one explicit CSR row block.

    Each iteration: dual steps (15) at ``xbar`` for the ``batch_size`` rows, primal steps
    (19) on the ``n_coords`` sampled coordinates with ``A^T ybar / n``, extrapolation (20)
    and the update of ``u = A^T z / n``. Maintains ``A^T ybar`` (the ``n/m >= p/q`` branch
    of Section 4.1); cost O(nnz of the rows + n_coords) per iteration.

    Parameters
    ----------
    block : daskpd.kernels.spdc.BlockRows
        Local CSR block, its labels and row weights.
    z : ndarray of shape (n_block_rows,)
        Dual block, updated in place.
    sample : CoordinateSample
        Rows and coordinates of each iteration.
    primal : PrimalState
        ``w``, ``w_prev``, ``u = A^T z / n`` (in place) and the zeroed scratch ``acc``.
    code, params : int, ndarray
        Loss.
    scalars : ndarray of shape (daskpd.kernels.spdc.N_SCALARS,)
        The paper's step sizes ``tau``, ``sigma`` (with the paper's ``1/n`` convention),
        ``theta``, the regularizer ``l1 |w| + (l2/2) w^2``, the dual perturbation ``delta``
        and ``n``, indexed by the ``SCALAR_*`` constants of :mod:`daskpd.kernels.spdc`.

    Returns
    -------
    int
        Number of iterations run.
    """
    # plain arrays and numbers from here on, for the per-row helpers (see spdc_rows)
    indptr, indices, data, binary, labels, weights = block
    rows, batch_size, cols, n_coords = sample
    w, w_prev, u, acc = primal
    tau, sigma, theta, l1, l2, delta, n_total = scalar_values(scalars)
    d = w.shape[0]
    n_iter = rows.shape[0] // batch_size
    all_cols = n_coords == d
    # Coordinates changed by the previous iteration (w_prev != w) must be reset once used.
    last = np.empty(d, dtype=np.int64)
    n_last = 0
    for j in range(d):
        if w_prev[j] != w[j]:
            last[n_last] = j
            n_last += 1
    touched = np.empty(d, dtype=np.int64)
    is_touched = np.zeros(d, dtype=np.bool_)
    dz = np.empty(batch_size, dtype=np.float64)
    sigma_n = sigma / n_total
    inv_m = 1.0 / batch_size
    inv_n = 1.0 / n_total
    for it in range(n_iter):
        n_touched = 0
        for b in range(batch_size):
            k = rows[it * batch_size + b]
            c = 0.0
            for p in range(indptr[k], indptr[k + 1]):
                j = indices[p]
                xbar = w[j] + theta * (w[j] - w_prev[j])
                c += xbar if binary else data[p] * xbar
            weight = weights[k] if weights.shape[0] > 0 else 1.0
            new = weighted_dual_step(code, params, z[k], c, sigma_n, delta, labels[k], weight)
            dz[b] = new - z[k]
            z[k] = new
            if dz[b] != 0.0:
                for p in range(indptr[k], indptr[k + 1]):
                    j = indices[p]
                    if not is_touched[j]:
                        is_touched[j] = True
                        touched[n_touched] = j
                        n_touched += 1
                    acc[j] += dz[b] if binary else dz[b] * data[p]
        # The extrapolation of the previous iteration is undone outside the new sample.
        for r in range(n_last):
            w_prev[last[r]] = w[last[r]]
        if all_cols:
            for j in range(d):
                w_prev[j] = w[j]
                w[j] = primal_step(w[j], u[j] + acc[j] * inv_m, tau, l1, l2)
                last[j] = j
            n_last = d
        else:
            for r in range(n_coords):
                j = cols[it * n_coords + r]
                w_prev[j] = w[j]
                w[j] = primal_step(w[j], u[j] + acc[j] * inv_m, tau, l1, l2)
                last[r] = j
            n_last = n_coords
        for r in range(n_touched):
            j = touched[r]
            u[j] += acc[j] * inv_n
            acc[j] = 0.0
            is_touched[j] = False
    return n_iter


@njit
def dspdc_factorized(U, V, labels, z, w, products, sample, code, params, scalars):
    """DSPDC on factorized data ``A = U V`` (Algorithm 2): cost O(d (m + q)) per iteration.

    Parameters
    ----------
    U : ndarray of shape (n_samples, rank)
    V : ndarray of shape (rank, n_features)
    labels, z : ndarray of shape (n_samples,)
        Labels and dual point (updated in place).
    w : ndarray of shape (n_features,)
        Primal point (updated in place).
    products : FactorProducts
        ``U^T z``, ``V w`` and ``V xbar`` (updated in place).
    sample : CoordinateSample
        ``batch_size`` rows and ``n_coords`` coordinates per iteration (``cols`` may be
        empty when ``n_coords == n_features``).
    code, params, scalars
        As in :func:`dspdc_rows`; ``n`` is the number of rows of ``U`` (``SCALAR_N`` is
        not used).

    Returns
    -------
    int
        Number of iterations run.
    """
    u, v, vbar = products
    rows, batch_size, cols, n_coords = sample
    tau, sigma, theta, l1, l2, delta, _ = scalar_values(scalars)
    n = U.shape[0]
    d = V.shape[1]
    rank = U.shape[1]
    n_iter = rows.shape[0] // batch_size
    all_cols = n_coords == d
    du = np.zeros(rank)
    dv = np.zeros(rank)
    ubar = np.zeros(rank)
    sigma_n = sigma / n
    scale = n / batch_size
    for it in range(n_iter):
        du[:] = 0.0
        for b in range(batch_size):
            i = rows[it * batch_size + b]
            c = 0.0
            for r in range(rank):
                c += U[i, r] * vbar[r]
            new = dual_step(code, params, z[i], c, sigma_n, delta, labels[i])
            diff = new - z[i]
            z[i] = new
            for r in range(rank):
                du[r] += U[i, r] * diff
        for r in range(rank):
            ubar[r] = u[r] + scale * du[r]
            u[r] += du[r]
        dv[:] = 0.0
        n_j = d if all_cols else n_coords
        for s in range(n_j):
            j = s if all_cols else cols[it * n_coords + s]
            g = 0.0
            for r in range(rank):
                g += V[r, j] * ubar[r]
            new = primal_step(w[j], g / n, tau, l1, l2)
            diff = new - w[j]
            w[j] = new
            if diff != 0.0:
                for r in range(rank):
                    dv[r] += V[r, j] * diff
        for r in range(rank):
            vbar[r] = v[r] + (theta + 1.0) * dv[r]
            v[r] += dv[r]
    return n_iter


@njit
def psd_projection(M):
    """Projection of ``sym(M)`` onto the PSD cone by symmetric eigendecomposition."""
    S = 0.5 * (M + M.T)
    mu, Q = np.linalg.eigh(S)
    for k in range(mu.shape[0]):
        mu[k] = max(mu[k], 0.0)
    return (Q * mu) @ Q.T


@njit
def dspdc_matrix(D, labels, z, Xs, Xs_prev, S, sample, code, params, scalars):
    """Block DSPDC for matrix risk minimization (Section 5.2) with PSD blocks.

    Problem: ``min_{X_j PSD} (1/n) sum_i loss(sum_j <D_i^j, X_j>, b_i) + (lambda/2) sum_j
    ||X_j||_F^2``. The primal block step (44) is ``Proj_PSD((X_j / tau - sym(W_j) / n) /
    (lambda + 1/tau))`` with ``W_j`` block ``j`` of ``A^T ybar``: one eigendecomposition per
    sampled block. Maintains ``S = A^T z`` (blocks ``sum_i z_i D_i^j``).

    Parameters
    ----------
    D : ndarray of shape (n_samples, n_blocks, k, k)
        Data matrices ``D_i^j``.
    labels, z : ndarray of shape (n_samples,)
    Xs, Xs_prev : ndarray of shape (n_blocks, k, k)
        Primal blocks and their values one iteration earlier (in place).
    S : ndarray of shape (n_blocks, k, k)
        ``sum_i z_i D_i^j`` (in place).
    sample : CoordinateSample
        Sampled rows (``m`` per iteration) and blocks (``q`` per iteration).
    code, params, scalars
        As in :func:`dspdc_rows` (``sigma`` with the paper's ``1/n`` convention);
        ``SCALAR_L2`` is ``lambda``. The problem has no L1 term and ``n`` is the number of
        data matrices: ``SCALAR_L1`` and ``SCALAR_N`` are not used.

    Returns
    -------
    int
        Number of iterations run.
    """
    rows, batch_size, cols, n_coords = sample
    tau, sigma, theta, _, lam, delta, _ = scalar_values(scalars)
    n = D.shape[0]
    n_blocks = D.shape[1]
    k = D.shape[2]
    n_iter = rows.shape[0] // batch_size
    dz = np.empty(batch_size)
    sigma_n = sigma / n
    scale = n / batch_size
    last = np.empty(n_blocks, dtype=np.int64)
    n_last = 0
    for j in range(n_blocks):
        if np.any(Xs_prev[j] != Xs[j]):
            last[n_last] = j
            n_last += 1
    for it in range(n_iter):
        for b in range(batch_size):
            i = rows[it * batch_size + b]
            c = 0.0
            for j in range(n_blocks):
                for a in range(k):
                    for e in range(k):
                        xbar = Xs[j, a, e] + theta * (Xs[j, a, e] - Xs_prev[j, a, e])
                        c += D[i, j, a, e] * xbar
            new = dual_step(code, params, z[i], c, sigma_n, delta, labels[i])
            dz[b] = new - z[i]
            z[i] = new
        for r in range(n_last):
            Xs_prev[last[r]] = Xs[last[r]]
        for s in range(n_coords):
            j = cols[it * n_coords + s]
            W = S[j].copy()
            for b in range(batch_size):
                i = rows[it * batch_size + b]
                W += scale * dz[b] * D[i, j]
            M = (Xs[j] / tau - 0.5 * (W + W.T) / n) / (lam + 1.0 / tau)
            Xs_prev[j] = Xs[j]
            Xs[j] = psd_projection(M)
            last[s] = j
        n_last = n_coords
        for b in range(batch_size):
            i = rows[it * batch_size + b]
            for j in range(n_blocks):
                S[j] += dz[b] * D[i, j]
    return n_iter
