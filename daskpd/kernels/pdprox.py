"""Numba kernels of Pdprox (Yang, Mahdavi, Jin, Zhu): per-block pieces of one iteration.

Pdprox solves ``min_w max_{a in Q} (1/n) sum_i f(x_i . w, a_i; y_i) + alpha R(w)`` where each
loss is written as a maximum of a function bilinear in ``(w, a_i)`` over a small domain.
Every loss here has a dual of (at most) two components per row, stored as an array of shape
``(n_rows, DUAL_WIDTH)`` with fields ``DUAL_A1`` and ``DUAL_A2``; the second is unused (kept
at 0) for one-component losses.

Translation between the paper and this code (once for the module):

==========================  =============================================================
paper (Pdprox)              code
==========================  =============================================================
``alpha`` (dual, bilinear)  ``dual`` (shape (n, DUAL_WIDTH)); its image ``coef(dual)`` is
                            the contract dual ``z`` (hinge: ``z = -y a``)
``beta`` (second dual)      ``dual_aux``
``u`` (second primal)       ``w_aux``
``lambda``                  ``alpha``
``gamma`` / ``tau, sigma``  ``tau`` (primal step), ``sigma`` (dual step)
``G_alpha(w)``              ``(1/n) grad_dual(x_i . w)`` per row
``G_w(alpha)``              ``(1/n) X^T coef(dual)``
``m`` (dual budget)         ``budget``
==========================  =============================================================

Losses (``u = x_i . w``), their bilinear forms and per-row domains:

- ``PD_HINGE``: ``a (1 - y u)``, ``a in [0, 1]``; ``coef = -y a``.
- ``PD_ABSOLUTE``: ``a (u - y)``, ``a in [-1, 1]``; ``coef = a``.
- ``PD_EPSILON_INSENSITIVE`` (params[0] = epsilon): ``a1 (u - y - eps) + a2 (y - u - eps)``,
  ``(a1, a2) in [0, 1]^2`` (equivalent to the printed triangle for ``eps >= 0``);
  ``coef = a1 - a2``.
- ``PD_GENERALIZED_HINGE`` (params[0] = a > 1): ``a1 (1 - a y u) + a2 (1 - y u)`` on the
  triangle ``a1, a2 >= 0, a1 + a2 <= 1``; ``coef = -y (a a1 + a2)``.
- ``PD_QUANTILE`` (params[0] = q in [0, 1]): ``a1 q (y - u) + a2 (1 - q)(u - y)`` on the
  triangle; ``coef = -q a1 + (1 - q) a2``.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels._config import njit
from daskpd.kernels.dataset import add_scaled_row, block_matvec
from daskpd.kernels.scalar import clip

PD_HINGE = 0
PD_ABSOLUTE = 1
PD_EPSILON_INSENSITIVE = 2
PD_GENERALIZED_HINGE = 3
PD_QUANTILE = 4

# Fields of a dual record: one row of a dual array of shape (n_rows, DUAL_WIDTH) per row of
# the block. The layout is defined here once, for the kernels and for the solver code that
# makes and reads dual arrays.
#: first component ``a1`` (``a`` of the one-component losses)
DUAL_A1 = 0
#: second component ``a2`` (kept at 0 for the one-component losses)
DUAL_A2 = 1
DUAL_WIDTH = 2


@njit
def loss_value(code, params, u, y):
    """Primal loss ``max_{a in domain} f(u, a; y)`` in closed form."""
    if code == PD_HINGE:
        return max(0.0, 1.0 - y * u)
    if code == PD_ABSOLUTE:
        return abs(u - y)
    if code == PD_EPSILON_INSENSITIVE:
        return max(0.0, abs(u - y) - params[0])
    if code == PD_GENERALIZED_HINGE:
        t = y * u
        if t <= 0.0:
            return 1.0 - params[0] * t
        return max(0.0, 1.0 - t)
    q = params[0]
    r = y - u
    if r >= 0.0:
        return q * r
    return -(1.0 - q) * r


@njit
def grad_dual(code, params, u, y):
    """``n G_alpha`` for one row: the gradient of ``f(u, .; y)`` in the dual, two components."""
    if code == PD_HINGE:
        return 1.0 - y * u, 0.0
    if code == PD_ABSOLUTE:
        return u - y, 0.0
    if code == PD_EPSILON_INSENSITIVE:
        return u - y - params[0], y - u - params[0]
    if code == PD_GENERALIZED_HINGE:
        return 1.0 - params[0] * y * u, 1.0 - y * u
    q = params[0]
    return q * (y - u), (1.0 - q) * (u - y)


@njit
def coef(code, params, a1, a2, y):
    """Coefficient of ``x_i`` in ``n G_w`` (``G_w = (1/n) sum_i coef_i x_i``); the contract z."""
    if code == PD_HINGE:
        return -y * a1
    if code == PD_ABSOLUTE:
        return a1
    if code == PD_EPSILON_INSENSITIVE:
        return a1 - a2
    if code == PD_GENERALIZED_HINGE:
        return -y * (params[0] * a1 + a2)
    return -params[0] * a1 + (1.0 - params[0]) * a2


@njit
def project_row(code, a1, a2):
    """Euclidean projection of one row's dual onto its domain (box or triangle).

    The triangle ``{a1, a2 >= 0, a1 + a2 <= 1}`` uses the closed form: clip both; if the sum
    exceeds one, project onto the edge ``a1 + a2 = 1``.
    """
    if code == PD_HINGE:
        return clip(a1, 0.0, 1.0), 0.0
    if code == PD_ABSOLUTE:
        return clip(a1, -1.0, 1.0), 0.0
    if code == PD_EPSILON_INSENSITIVE:
        return clip(a1, 0.0, 1.0), clip(a2, 0.0, 1.0)
    p = clip(a1, 0.0, 1.0)
    q = clip(a2, 0.0, 1.0)
    if p + q <= 1.0:
        return p, q
    x = clip(0.5 * (a1 - a2 + 1.0), 0.0, 1.0)
    return x, 1.0 - x


@njit
def in_domain(code, a1, a2, tol):
    """Whether one row's dual lies in its domain (up to ``tol``)."""
    if code == PD_HINGE:
        return -tol <= a1 <= 1.0 + tol and a2 == 0.0
    if code == PD_ABSOLUTE:
        return -1.0 - tol <= a1 <= 1.0 + tol and a2 == 0.0
    if code == PD_EPSILON_INSENSITIVE:
        return -tol <= a1 <= 1.0 + tol and -tol <= a2 <= 1.0 + tol
    return a1 >= -tol and a2 >= -tol and a1 + a2 <= 1.0 + tol


@njit
def dual_step(code, params, y, base, pred, step, inv_n, project):
    """``base + step * G_alpha`` per row, optionally projected (``G_alpha = inv_n grad_dual``).

    Parameters
    ----------
    base : ndarray of shape (n_rows, DUAL_WIDTH)
    pred : ndarray of shape (n_rows,)
        ``X_b w`` at the point where ``G_alpha`` is taken.
    project : bool
        Project each row onto its domain (box / triangle). The budget domain is not
        row-separable and is projected by :func:`budget_clip` with a global threshold.

    Returns
    -------
    ndarray of shape (n_rows, DUAL_WIDTH)
    """
    out = np.empty_like(base)
    for row in range(base.shape[0]):
        g1, g2 = grad_dual(code, params, pred[row], y[row])
        a1 = base[row, DUAL_A1] + step * inv_n * g1
        a2 = base[row, DUAL_A2] + step * inv_n * g2
        if code == PD_HINGE or code == PD_ABSOLUTE:
            a2 = 0.0
        if project:
            a1, a2 = project_row(code, a1, a2)
        out[row, DUAL_A1] = a1
        out[row, DUAL_A2] = a2
    return out


@njit
def dual_correction(code, params, y, dual, pred_new, pred_old, step, inv_n):
    """Algorithm 3's unprojected ``dual + step (G_alpha(w_t) - G_alpha(w_{t-1}))``."""
    out = np.empty_like(dual)
    for row in range(dual.shape[0]):
        g1, g2 = grad_dual(code, params, pred_new[row], y[row])
        h1, h2 = grad_dual(code, params, pred_old[row], y[row])
        out[row, DUAL_A1] = dual[row, DUAL_A1] + step * inv_n * (g1 - h1)
        out[row, DUAL_A2] = dual[row, DUAL_A2] + step * inv_n * (g2 - h2)
        if code == PD_HINGE or code == PD_ABSOLUTE:
            out[row, DUAL_A2] = 0.0
    return out


@njit
def budget_clip(hat, threshold):
    """``clip(hat - threshold, 0, 1)`` on field ``DUAL_A1`` (Lemma 13, ``s = 1``, ``v = 1``)."""
    out = np.zeros_like(hat)
    for row in range(hat.shape[0]):
        out[row, DUAL_A1] = clip(hat[row, DUAL_A1] - threshold, 0.0, 1.0)
    return out


@njit
def _budget_sum(values, eta):
    acc = 0.0
    for v in values:
        acc += clip(v - eta, 0.0, 1.0)
    return acc


@njit
def budget_threshold(values, budget):
    """Threshold ``eta >= 0`` of the projection onto ``{a in [0, 1]^n, sum a <= budget}``.

    Lemma 13: ``a_i = clip(v_i - eta, 0, 1)`` with ``eta = 0`` when the clipped sum is within
    the budget, else the root of ``sum_i clip(v_i - eta, 0, 1) = budget``. The sum is
    non-increasing and piecewise linear in ``eta``; bisection runs until the bracket cannot
    shrink, then the root is interpolated on the bracketing segment.

    Parameters
    ----------
    values : ndarray of shape (n_samples,)
    budget : float

    Returns
    -------
    float
    """
    f_lo = _budget_sum(values, 0.0)
    if f_lo <= budget:
        return 0.0
    lo = 0.0
    hi = 1.0
    for v in values:
        if v > hi:
            hi = v
    f_hi = _budget_sum(values, hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        f_mid = _budget_sum(values, mid)
        if f_mid > budget:
            lo = mid
            f_lo = f_mid
        else:
            hi = mid
            f_hi = f_mid
    if f_lo == f_hi:
        return hi
    return lo + (f_lo - budget) * (hi - lo) / (f_lo - f_hi)


@njit
def rmatvec_coef(code, params, indptr, indices, data, has_data, y, dual, n_features):
    """``sum_i coef(dual_i) x_i`` over one CSR block (``n`` times a partial ``G_w``).

    Returns
    -------
    ndarray of shape (n_features,)
    """
    out = np.zeros(n_features)
    for row in range(dual.shape[0]):
        c = coef(code, params, dual[row, DUAL_A1], dual[row, DUAL_A2], y[row])
        if c == 0.0:
            continue
        add_scaled_row(indptr, indices, data, has_data, row, c, out)
    return out


@njit
def block_coef(code, params, y, dual):
    """``coef(dual_i)`` per row: the contract dual ``z`` of a Pdprox dual block."""
    out = np.empty(dual.shape[0])
    for row in range(dual.shape[0]):
        out[row] = coef(code, params, dual[row, DUAL_A1], dual[row, DUAL_A2], y[row])
    return out


@njit
def block_loss_sum(code, params, y, pred):
    """``sum_i loss(pred_i, y_i)`` over one block."""
    acc = 0.0
    for row in range(pred.shape[0]):
        acc += loss_value(code, params, pred[row], y[row])
    return acc


@njit
def block_gram(indptr, indices, data, has_data, v, n_features):
    """``X_b^T X_b v`` for one CSR block (one power-iteration step, before the reduce)."""
    pred = block_matvec(indptr, indices, data, has_data, v)
    out = np.zeros(n_features)
    for row in range(pred.shape[0]):
        add_scaled_row(indptr, indices, data, has_data, row, pred[row], out)
    return out


@njit
def subgradient_coef(code, params, y, pred):
    """Per row, ``coef`` of the dual vertex maximizing ``f(pred_i, .)``: a loss subgradient.

    By Danskin's theorem the maximizer of the bilinear form is a subgradient of the loss in
    ``u``; used by the subgradient-descent and FOBOS baselines.
    """
    out = np.empty(pred.shape[0])
    for row in range(pred.shape[0]):
        g1, g2 = grad_dual(code, params, pred[row], y[row])
        # a far step along the dual gradient lands on the maximizing vertex
        a1, a2 = project_row(code, 1e12 * g1, 1e12 * g2)
        out[row] = coef(code, params, a1, a2, y[row])
    return out
