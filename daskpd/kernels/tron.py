"""Kernels of the trust-region Newton method (:mod:`daskpd.solvers.tron`): one row group's
share of a gradient and of a Hessian-vector product.

Problem: ``P(w) = (1/n) sum_i c_i loss(x_i . w, y_i) + (alpha/2) ||w||^2``. A group's
gradient pass returns the unscaled sums ``X_k^T z_k`` (``z_i = c_i loss'(x_i . w, y_i)``, the
dual point the certificate uses), ``sum_i c_i loss''(x_i . w) x_ij^2`` (the diagonal
preconditioner's share) and the curvature ``c_i loss''`` of every row, kept by the group for
the Hessian products of the Newton step: ``X_k^T (curv * (X_k v))``. Rows of curvature 0 (the
squared and smoothed hinge's rows beyond the margin, rows of weight 0) are not read by a
Hessian product at all.

The loss the Newton steps minimize (``inner``) and the loss of the certificate (``outer``)
are passed apart, so that a smoothed loss can certify the non-smooth problem from the same
margins (``shared/notes/many-machines.md``); today they are the same loss.

Threads: a group's rows are cut into ``n_threads`` ranges of about equal nonzeros; each
thread adds into its own output rows (``out[t]``), and the caller sums them.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels import scalar
from daskpd.kernels._config import njit

__all__ = [
    "TRON_LOSSES",
    "cg_curvature",
    "cg_direction",
    "cg_update",
    "gradient_rows",
    "hessian_rows",
    "line_sum",
    "loss_curvature",
    "merge_columns",
    "point_vectors",
    "row_products",
    "thread_cuts",
]

#: Loss codes the Newton steps can minimize (twice differentiable almost everywhere, with a
#: generalized Hessian where they are not): logistic, squared, squared hinge, smoothed hinge.
TRON_LOSSES = (scalar.LOGISTIC, scalar.SQUARED, scalar.SQUARED_HINGE, scalar.SMOOTH_HINGE)


@njit
def loss_curvature(code, params, u, y):
    """Second derivative of ``loss(., y)`` at ``u`` (the generalized one at kinks).

    Logistic ``s (1 - s)`` with ``s = sigmoid(y u)``; squared 1; squared hinge 2 where
    ``y u < 1``; smoothed hinge of width ``gamma`` ``1 / gamma`` where ``1 - gamma < y u < 1``;
    0 elsewhere (labels in {-1, +1}).
    """
    if code == scalar.LOGISTIC:
        s = scalar._sigmoid(y * u)
        return s * (1.0 - s)
    if code == scalar.SQUARED:
        return 1.0
    if code == scalar.SQUARED_HINGE:
        if y * u < 1.0:
            return 2.0
        return 0.0
    if code == scalar.SMOOTH_HINGE:
        t = y * u
        if t < 1.0 and t > 1.0 - params[0]:
            return 1.0 / params[0]
        return 0.0
    return np.nan


@njit
def gradient_rows(
    indptr,
    indices,
    vals,
    binary,
    y,
    weight,
    margins,
    lo,
    hi,
    inner_code,
    inner_params,
    outer_code,
    outer_params,
    z,
    curv,
    pack,
    sums,
):
    """Rows ``lo:hi`` of a group at the margins ``u = X w``: dual values, curvatures, sums.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,), int64
    indices : ndarray of shape (nnz,), int32
        Column ids into ``xtz``.
    vals : ndarray of shape (nnz,)
        Ignored when ``binary``.
    binary : bool
    y, weight : ndarray of shape (n_rows,)
        Labels and row weights ``c_i``.
    margins : ndarray of shape (n_rows,)
        ``x_i . w``.
    lo, hi : int
        The rows to read.
    inner_code, inner_params : int, ndarray
        The loss the Newton steps minimize.
    outer_code, outer_params : int, ndarray
        The loss of the certificate (the user's).
    z, curv : ndarray of shape (n_rows,)
        Output on ``lo:hi``: ``z_i = c_i inner'(u_i)``, ``curv_i = c_i inner''(u_i)``.
    pack : ndarray of shape (n_columns, 2)
        Added to: ``sum_i z_i x_i`` (column 0) and ``sum_i curv_i x_ij^2`` (column 1), a
        column's two in one record (one cache miss a nonzero, not two).
    sums : ndarray of shape (4,)
        Added to: ``sum c_i outer(u_i)``, ``sum c_i inner(u_i)``,
        ``sum c_i outer*(z_i / c_i)``, ``sum c_i inner*(z_i / c_i)``.
    """
    for i in range(lo, hi):
        c = weight[i]
        if c == 0.0:
            z[i] = 0.0
            curv[i] = 0.0
            continue
        u = margins[i]
        yi = y[i]
        derivative = scalar.loss_derivative(inner_code, inner_params, u, yi)
        h = c * loss_curvature(inner_code, inner_params, u, yi)
        g = c * derivative
        z[i] = g
        curv[i] = h
        sums[0] += c * scalar.loss_value(outer_code, outer_params, u, yi)
        sums[1] += c * scalar.loss_value(inner_code, inner_params, u, yi)
        sums[2] += c * scalar.loss_conjugate(outer_code, outer_params, derivative, yi)
        sums[3] += c * scalar.loss_conjugate(inner_code, inner_params, derivative, yi)
        if g == 0.0 and h == 0.0:
            continue
        if binary:
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                pack[j, 0] += g
                pack[j, 1] += h
        else:
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                x = np.float64(vals[e])
                pack[j, 0] += g * x
                pack[j, 1] += h * x * x


@njit
def row_products(indptr, indices, vals, binary, v, lo, hi, out):
    """``out[i] = x_i . v`` for the rows ``lo:hi`` (margins, or a step's ``X s``)."""
    for i in range(lo, hi):
        t = 0.0
        if binary:
            for e in range(indptr[i], indptr[i + 1]):
                t += v[indices[e]]
        else:
            for e in range(indptr[i], indptr[i + 1]):
                t += np.float64(vals[e]) * v[indices[e]]
        out[i] = t


@njit
def line_sum(margins, step_margins, step_length, y, weight, code, params):
    """``sum_i c_i loss(u_i + t (X s)_i)``: the loss part of the objective along a step."""
    total = 0.0
    for i in range(margins.shape[0]):
        c = weight[i]
        if c != 0.0:
            total += c * scalar.loss_value(
                code, params, margins[i] + step_length * step_margins[i], y[i]
            )
    return total


@njit
def hessian_rows(indptr, indices, vals, binary, curv, pack, lo, hi):
    """``pack[:, 1] += sum_{i in lo:hi} curv_i (x_i . v) x_i`` with ``v = pack[:, 0]``,
    skipping rows of curvature 0.

    ``v`` and the output share a record a column (16 bytes, one cache line), so a nonzero's
    read of ``v`` and its write of the output miss the cache once, not twice: on millions of
    columns the product is bound by those misses.

    Parameters
    ----------
    indptr, indices, vals, binary
        The group's rows (as :func:`gradient_rows`).
    curv : ndarray of shape (n_rows,)
        ``c_i loss''(x_i . w)`` from the gradient pass at the Newton step's ``w``.
    pack : ndarray of shape (n_columns, 2)
        ``v`` in column 0 (read); the product added to column 1.
    lo, hi : int
    """
    for i in range(lo, hi):
        h = curv[i]
        if h == 0.0:
            continue
        start, stop = indptr[i], indptr[i + 1]
        t = 0.0
        if binary:
            for e in range(start, stop):
                t += pack[indices[e], 0]
            t *= h
            for e in range(start, stop):
                pack[indices[e], 1] += t
        else:
            for e in range(start, stop):
                t += np.float64(vals[e]) * pack[indices[e], 0]
            t *= h
            for e in range(start, stop):
                pack[indices[e], 1] += t * np.float64(vals[e])


@njit
def thread_cuts(indptr, n_threads):
    """Row bounds of ``n_threads`` ranges of about equal nonzeros (int64, ``n_threads + 1``)."""
    n_rows = indptr.shape[0] - 1
    cuts = np.empty(n_threads + 1, dtype=np.int64)
    cuts[0] = 0
    total = indptr[n_rows] - indptr[0]
    row = 0
    for t in range(1, n_threads):
        target = indptr[0] + (total * t) // n_threads
        while row < n_rows and indptr[row] < target:
            row += 1
        cuts[t] = row
    cuts[n_threads] = n_rows
    return cuts


# --------------------------------------------------------------------------------------------
# the step's vector algebra on w's home, fused: one or two reads of each d-vector, not one a
# NumPy operation (at millions of columns these loops were half of a round)


@njit
def point_vectors(w, xtz, diag, alpha, n, pcg_mix, precondition, gradient, m_diag):
    """``gradient = alpha w + xtz / n`` and the preconditioner
    ``m = (1 - mix) + mix (1 + diag / (alpha n))`` (ones without one), written into the
    outputs; returns ``(w.w, g.g, g.M^-1 g, ||w - g / alpha||^2)``."""
    w_w = 0.0
    g_g = 0.0
    g_mg = 0.0
    dual_sq = 0.0
    for j in range(w.shape[0]):
        g = alpha * w[j] + xtz[j] / n
        gradient[j] = g
        if precondition:
            m = (1.0 - pcg_mix) + pcg_mix * (1.0 + diag[j] / (alpha * n))
        else:
            m = 1.0
        m_diag[j] = m
        w_w += w[j] * w[j]
        g_g += g * g
        g_mg += g * g / m
        dual = w[j] - g / alpha
        dual_sq += dual * dual
    return w_w, g_g, g_mg, dual_sq


@njit
def cg_curvature(direction, products, alpha, n, hessian_direction):
    """``H d = alpha d + products / n`` into ``hessian_direction``; returns ``d.Hd``."""
    total = 0.0
    for j in range(direction.shape[0]):
        h = alpha * direction[j] + products[j] / n
        hessian_direction[j] = h
        total += direction[j] * h
    return total


@njit
def cg_update(step, residual, direction, hessian_direction, gradient, m_diag, length):
    """One CG update in place on fresh copies: ``s += a d``, ``r -= a Hd``, ``z = r / M``
    (into ``direction``'s place once ``beta`` is known: see :func:`cg_direction`); returns
    ``(s.r, s.g, z.r)``."""
    s_r = 0.0
    s_g = 0.0
    z_r = 0.0
    for j in range(step.shape[0]):
        s = step[j] + length * direction[j]
        r = residual[j] - length * hessian_direction[j]
        step[j] = s
        residual[j] = r
        s_r += s * r
        s_g += s * gradient[j]
        z_r += r * r / m_diag[j]
    return s_r, s_g, z_r


@njit
def cg_direction(residual, m_diag, beta, direction):
    """The next direction ``d = r / M + beta d``, in place."""
    for j in range(direction.shape[0]):
        direction[j] = residual[j] / m_diag[j] + beta * direction[j]


@njit
def merge_columns(columns_a, values_a, columns_b, values_b):
    """The sum of two groups' shares on their own columns: ``(columns, values)`` on the
    union of the increasing ``columns_a`` and ``columns_b`` (int32), ``values`` of shape
    (n_vectors, n_columns), each a vector of the share (a gradient's ``X^T z`` and diagonal,
    or a Hessian-vector product)."""
    n_a, n_b = columns_a.shape[0], columns_b.shape[0]
    n_vectors = values_a.shape[0]
    columns = np.empty(n_a + n_b, dtype=np.int32)
    values = np.empty((n_vectors, n_a + n_b))
    a = b = out = 0
    while a < n_a or b < n_b:
        if b == n_b or (a < n_a and columns_a[a] < columns_b[b]):
            columns[out] = columns_a[a]
            for v in range(n_vectors):
                values[v, out] = values_a[v, a]
            a += 1
        elif a == n_a or columns_b[b] < columns_a[a]:
            columns[out] = columns_b[b]
            for v in range(n_vectors):
                values[v, out] = values_b[v, b]
            b += 1
        else:
            columns[out] = columns_a[a]
            for v in range(n_vectors):
                values[v, out] = values_a[v, a] + values_b[v, b]
            a += 1
            b += 1
        out += 1
    return columns[:out].copy(), values[:, :out].copy()
