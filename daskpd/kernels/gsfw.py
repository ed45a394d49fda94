"""Numba kernels of GSFW (Lu & Freund): the substitute-gradient Frank-Wolfe method.

The method minimizes ``(1/n) sum_j loss(x_j . w, y_j) + R(w)`` over a bounded ``dom R`` using
predicted values ``s`` that are refreshed one mini-batch at a time; ``d = (1/n) X^T loss'(s)``
is the "substitute gradient" handed to the (generalized) linear minimization oracle.

Translation between the paper and this code (once for the module):

============================  ===========================================================
paper (GSFW)                  code
============================  ===========================================================
``beta`` (primal)             ``w``; ``beta~`` is the LMO answer, ``beta_bar`` = ``w_bar``
``w`` (dual, data weights)    ``z`` (``z_j = loss'(s_j, y_j)``); ``w_bar`` = ``z_bar``
``s`` (predicted values)      ``s`` (a substitute for ``Xw``, not equal to it)
``d`` (substitute gradient)   ``d``
``eta_i``, ``alpha_i``        ``eta``, ``avg_step``
``gamma_i = 2n + i``          ``weight(i) = 2m + i`` with ``m = n / b``
``lambda``                    ``alpha`` (in LMO parameters: ``lam``)
``delta`` (L1 radius)         ``radius``
============================  ===========================================================

All kernels work on one CSR row block given as ``(indptr, indices, data, y)`` with local row
ids (the iteration kernels take it as one :class:`BlockRows` record, and their state as
:class:`PrimalCarry` and :class:`RowState`); ``data`` is an empty array for binary data
(``has_data=False``). Kernels copy nothing they do not return: callers pass copies of the
arrays they want mutated (tasks stay pure).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from daskpd.kernels._config import njit
from daskpd.kernels.dataset import add_scaled_row, block_matvec, row_dot
from daskpd.kernels.scalar import loss_conjugate, loss_derivative

#: LMO codes understood by the kernels (other regularizers use a dense LMO computed outside).
LMO_L1_BALL = 0  # params = [radius]:  R = indicator(||w||_1 <= radius)
LMO_L1_PENALTY_BALL = 1  # params = [lam, radius]: R = lam ||w||_1 + indicator(||w||_1 <= radius)
LMO_L2SQ_BALL = 2  # params = [lam, radius]: R = lam/2 ||w||^2 + indicator(||w||_2 <= radius)
LMO_DENSE = -1  # the direction is computed by the caller (generalized LMO in Python)


class BlockRows(NamedTuple):
    """A CSR row block and its labels (the tuple ``block_csr`` of the solvers returns).

    Attributes
    ----------
    indptr : ndarray of shape (n_block_rows + 1,), int64
    indices : ndarray of shape (nnz,), int32 or int64
    data : ndarray of shape (nnz,) or (0,)
        Stored values; empty for binary data.
    has_data : bool
        Whether ``data`` holds the values (False: every stored value is 1).
    y : ndarray of shape (n_block_rows,), float64
        Labels.
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    has_data: bool
    y: np.ndarray


class Schedule(NamedTuple):
    """The step sizes of a run of :func:`gsfw_iterations`.

    Attributes
    ----------
    n_total : int
        Number of rows of the whole data set (the ``1/n`` of ``d``).
    m : float
        ``n_total / batch_size`` (the ``n`` of the step sizes).
    it0 : int
        Global index of the first iteration.
    strong : bool
        Use the Theorem 3.2 step sizes (``R`` strongly convex).
    sigma : float
        Relative smoothness constant of Prop. 3.7 (used when ``strong``).
    """

    n_total: int
    m: float
    it0: int
    strong: bool
    sigma: float


class PrimalCarry(NamedTuple):
    """The primal state that flows from row block to row block, each of shape (n_features,).

    Attributes
    ----------
    d : ndarray
        Substitute gradient ``(1/n) X^T loss'(s)``.
    w_acc : ndarray
        ``sum_i weight(i) w~^i`` (the L1-ball average of Prop. 3.6).
    w_bar : ndarray
        The averaged iterate of the recursion ``w_bar <- (1 - avg_step) w_bar + avg_step w~``.
    """

    d: np.ndarray
    w_acc: np.ndarray
    w_bar: np.ndarray


class RowState(NamedTuple):
    """The per-row state of a row block, each of shape (n_block_rows,).

    Attributes
    ----------
    s : ndarray
        Predicted values.
    z_acc : ndarray
        ``sum_{l < t_last[j]} weight(l) z_j^l``, the lazy dual average of Theorem 3.1.
    t_last : ndarray of int64
        The first iteration not yet summed in ``z_acc``.
    """

    s: np.ndarray
    z_acc: np.ndarray
    t_last: np.ndarray


@njit
def lmo_vertex(d):
    """Signed vertex of the L1 ball minimizing ``d . v``: index and sign of ``-sign(d_i*)``.

    Ties go to the lowest index and ``d_i* = 0`` gives the vertex ``-e_i*`` (a fixed rule, so
    runs reproduce and Algorithms 1 and 2 can be compared).

    Parameters
    ----------
    d : ndarray of shape (n_features,)

    Returns
    -------
    index : int
    sign : float
        ``+1.0`` or ``-1.0``; the vertex is ``sign * radius * e_index``.
    """
    best = 0
    best_abs = -1.0
    for k in range(d.shape[0]):
        a = abs(d[k])
        if a > best_abs:
            best_abs = a
            best = k
    sign = -1.0
    if d[best] < 0.0:
        sign = 1.0
    return best, sign


@njit
def lmo_dense(lmo_code, lmo_params, d, out):
    """Closed-form generalized LMO ``argmin_v d . v + R(v)`` written into ``out``.

    Parameters
    ----------
    lmo_code : int
        One of ``LMO_L1_BALL``, ``LMO_L1_PENALTY_BALL``, ``LMO_L2SQ_BALL``.
    lmo_params : ndarray of float64
    d : ndarray of shape (n_features,)
    out : ndarray of shape (n_features,)
        Overwritten with the minimizer.
    """
    out[:] = 0.0
    if lmo_code == LMO_L1_BALL:
        k, sign = lmo_vertex(d)
        out[k] = sign * lmo_params[0]
    elif lmo_code == LMO_L1_PENALTY_BALL:
        k, sign = lmo_vertex(d)
        if abs(d[k]) > lmo_params[0]:
            out[k] = sign * lmo_params[1]
    elif lmo_code == LMO_L2SQ_BALL:
        lam = lmo_params[0]
        radius = lmo_params[1]
        norm = math.sqrt(np.sum(d * d))
        if norm <= lam * radius:
            for k in range(d.shape[0]):
                out[k] = -d[k] / lam
        else:
            for k in range(d.shape[0]):
                out[k] = -radius * d[k] / norm


@njit
def row_entry(indptr, indices, data, has_data, row, col):
    """``X[row, col]`` for one CSR row (a scan: the row is read anyway by the d update)."""
    for p in range(indptr[row], indptr[row + 1]):
        if indices[p] == col:
            if has_data:
                return float(data[p])
            return 1.0
    return 0.0


@njit
def weight_sum(m, first, last):
    """``sum_{l=first}^{last} (2m + l)``, the arithmetic weights of Theorem 3.1 (0 if empty)."""
    if last < first:
        return 0.0
    count = last - first + 1.0
    return count * 2.0 * m + (first + last) * count / 2.0


@njit
def step_sizes(i, m, strong, sigma):
    """``(eta_i, avg_step_i)`` of Theorem 3.1 (``strong=False``) or Theorem 3.2.

    ``m = n / b`` replaces ``n`` for mini-batches (Remark 3.4). The Theorem 3.2 averaging step
    uses the overflow-free form ``(1/(m sigma)) / (1 - (1 - 1/(m sigma))^(i+1))``.
    """
    if strong:
        q = 1.0 / (m * sigma)
        return 1.0 / sigma, q / (1.0 - (1.0 - q) ** (i + 1))
    eta = 2.0 * m / (2.0 * m + i + 1.0)
    avg = 2.0 * (2.0 * m + i) / ((i + 1.0) * (4.0 * m + i))
    return eta, avg


@njit
def gsfw_iterations(
    block, loss_code, loss_params, batches, lmo_code, lmo_params, schedule, carry, state
):
    """Run ``len(batches)`` iterations of GSFW (Algorithm 1, mini-batch form) on one row block.

    Per iteration ``i = it0 + k``: the LMO on ``d``; then for every row ``j`` of
    ``batches[k]``: ``s_j <- (1 - eta_i) s_j + eta_i x_j . w~`` and
    ``d += (loss'(s_j new) - loss'(s_j old)) x_j / n``; then the averaged iterate. With
    the L1-ball LMO (and not ``strong``) the average is kept as
    ``w_acc = sum_i weight(i) w~^i`` with one O(1) update per iteration (Prop. 3.6); otherwise
    ``w_bar`` follows the recursion ``w_bar <- (1 - avg_step) w_bar + avg_step w~``.
    The dual average of Theorem 3.1 is accumulated lazily: ``z_acc[j]`` holds
    ``sum_{l < t_last[j]} weight(l) z_j^l``.

    Parameters
    ----------
    block : BlockRows
        The CSR block (local rows) and labels.
    loss_code : int
    loss_params : ndarray of float64
    batches : ndarray of shape (n_iterations, batch_size), int64
        Local row ids, distinct within a batch.
    lmo_code : int
        ``LMO_L1_BALL``, ``LMO_L1_PENALTY_BALL`` or ``LMO_L2SQ_BALL``.
    lmo_params : ndarray of float64
    schedule : Schedule
        ``n``, ``m = n / b``, the first iteration's index and the step-size rule.
    carry : PrimalCarry
        ``d``, ``w_acc`` and ``w_bar``, updated in place.
    state : RowState
        ``s``, ``z_acc`` and ``t_last`` of the block, updated in place.
    """
    # plain arrays and numbers from here on: row_dot and row_entry run once per row, and a
    # record passed to a call LLVM does not inline is copied at each call
    indptr, indices, data, has_data, y = block
    n_total, m, it0, strong, sigma = schedule
    d, w_acc, w_bar = carry
    s, z_acc, t_last = state
    n_features = d.shape[0]
    direction = np.zeros(n_features)
    vertex_mode = lmo_code == LMO_L1_BALL and not strong
    inv_n = 1.0 / n_total
    for k in range(batches.shape[0]):
        i = it0 + k
        eta, avg = step_sizes(i, m, strong, sigma)
        col = 0
        sign = 1.0
        if vertex_mode:
            col, sign = lmo_vertex(d)
        else:
            lmo_dense(lmo_code, lmo_params, d, direction)
        for b in range(batches.shape[1]):
            row = batches[k, b]
            if vertex_mode:
                pred = sign * lmo_params[0] * row_entry(indptr, indices, data, has_data, row, col)
            else:
                pred = row_dot(indptr, indices, data, has_data, row, direction)
            s_old = s[row]
            z_old = loss_derivative(loss_code, loss_params, s_old, y[row])
            s_new = (1.0 - eta) * s_old + eta * pred
            z_new = loss_derivative(loss_code, loss_params, s_new, y[row])
            if not strong:
                z_acc[row] += z_old * weight_sum(m, t_last[row], i)
                t_last[row] = i + 1
            s[row] = s_new
            delta = (z_new - z_old) * inv_n
            add_scaled_row(indptr, indices, data, has_data, row, delta, d)
        if vertex_mode:
            w_acc[col] += (2.0 * m + i) * sign * lmo_params[0]
        else:
            for c in range(n_features):
                w_bar[c] = (1.0 - avg) * w_bar[c] + avg * direction[c]


@njit
def gsfw_apply_direction(
    block, loss_code, loss_params, batch, direction, n_total, m, i, state, d, w_bar
):
    """One GSFW iteration with a dense LMO answer ``direction`` computed by the caller.

    This is the path of the generalized LMO for regularizers without a kernel LMO (nuclear
    ball, group balls, ...): the caller calls ``regularizer.lmo(d)`` in Python between kernel
    calls. Step sizes are those of Theorem 3.1 with ``m = n / b``.

    Parameters
    ----------
    block : BlockRows
    loss_code : int
    loss_params : ndarray of float64
    batch : ndarray of shape (batch_size,), int64
        Local row ids, distinct.
    direction : ndarray of shape (n_features,)
        The LMO answer ``w~`` at ``d``.
    n_total : int
        Number of rows of the whole data set.
    m : float
        ``n_total / batch_size``.
    i : int
        Global index of the iteration.
    state : RowState
        Updated in place.
    d, w_bar : ndarray of shape (n_features,)
        Substitute gradient and averaged iterate, updated in place (``w_acc``, the L1
        ball's average, is not kept on this path).
    """
    indptr, indices, data, has_data, y = block
    s, z_acc, t_last = state
    eta, avg = step_sizes(i, m, False, 1.0)
    inv_n = 1.0 / n_total
    for b in range(batch.shape[0]):
        row = batch[b]
        pred = row_dot(indptr, indices, data, has_data, row, direction)
        s_old = s[row]
        z_old = loss_derivative(loss_code, loss_params, s_old, y[row])
        s_new = (1.0 - eta) * s_old + eta * pred
        z_new = loss_derivative(loss_code, loss_params, s_new, y[row])
        z_acc[row] += z_old * weight_sum(m, t_last[row], i)
        t_last[row] = i + 1
        s[row] = s_new
        delta = (z_new - z_old) * inv_n
        add_scaled_row(indptr, indices, data, has_data, row, delta, d)
    for c in range(w_bar.shape[0]):
        w_bar[c] = (1.0 - avg) * w_bar[c] + avg * direction[c]


@njit
def flush_dual_average(loss_code, loss_params, y, s, z_acc, t_last, m, k_last):
    """Dual average ``z_bar^k`` of Theorem 3.1 for the rows of a block (``k = k_last``).

    Returns ``(sum_{i=0}^k weight(i) z^i) / (sum_{i=0}^k weight(i))`` per row, completing the
    lazy sums with the current ``z_j = loss'(s_j)`` held since ``t_last[j]``. The state is not
    modified.
    """
    out = np.empty(s.shape[0])
    total = weight_sum(m, 0, k_last)
    for row in range(s.shape[0]):
        z_now = loss_derivative(loss_code, loss_params, s[row], y[row])
        out[row] = (z_acc[row] + z_now * weight_sum(m, t_last[row], k_last)) / total
    return out


@njit
def block_xt_derivative(
    indptr, indices, data, has_data, y, loss_code, loss_params, s, n_features, inv_n
):
    """``inv_n * X_b^T loss'(s_b, y_b)`` for one CSR block.

    Parameters
    ----------
    s : ndarray of shape (n_rows_block,)
        Predicted values of the block rows.

    Returns
    -------
    ndarray of shape (n_features,)
    """
    out = np.zeros(n_features)
    for row in range(s.shape[0]):
        g = loss_derivative(loss_code, loss_params, s[row], y[row]) * inv_n
        add_scaled_row(indptr, indices, data, has_data, row, g, out)
    return out


@njit
def conjugate_derivative(loss_code, loss_params, z, y, lo, hi):
    """``(loss*)'(z)`` by bisection on ``loss'(u) = z`` (``loss'`` is increasing).

    Used by Algorithm 2 only, so that it shares no closed form with Algorithm 1. ``[lo, hi]``
    is the search interval for ``u``; it is widened until it brackets the root.
    """
    while loss_derivative(loss_code, loss_params, lo, y) > z:
        lo = 2.0 * lo - 1.0
    while loss_derivative(loss_code, loss_params, hi, y) < z:
        hi = 2.0 * hi + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if loss_derivative(loss_code, loss_params, mid, y) < z:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@njit
def mirror_coordinate_step(loss_code, loss_params, y, z_old, pred, eta, z_lo, z_hi):
    """Solve the 1-D Bregman step (26) of Algorithm 2 by bisection.

    Minimizes ``c v + loss*(v)`` with ``c = -eta pred - (1 - eta) (loss*)'(z_old)`` over
    ``v`` in the dual domain ``(z_lo, z_hi)``; the optimality condition
    ``(loss*)'(v) = -c`` is solved for ``v`` by bisection, each ``(loss*)'`` itself found by
    bisection (:func:`conjugate_derivative`). ``loss*`` is only evaluated to keep the
    iterate inside its domain.
    """
    s_old = conjugate_derivative(loss_code, loss_params, z_old, y, -1.0, 1.0)
    target = (1.0 - eta) * s_old + eta * pred
    lo = z_lo
    hi = z_hi
    if not math.isfinite(lo):
        lo = z_old - 1.0
        while conjugate_derivative(loss_code, loss_params, lo, y, -1.0, 1.0) > target:
            lo = 2.0 * lo - 1.0
    if not math.isfinite(hi):
        hi = z_old + 1.0
        while conjugate_derivative(loss_code, loss_params, hi, y, -1.0, 1.0) < target:
            hi = 2.0 * hi + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if not math.isfinite(loss_conjugate(loss_code, loss_params, mid, y)):
            break
        if conjugate_derivative(loss_code, loss_params, mid, y, -1.0, 1.0) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@njit
def dual_mirror_descent_iterations(
    block, loss_code, loss_params, batches, lmo_code, lmo_params, m, it0, z, z_lo, z_hi, w_bar
):
    """Algorithm 2: randomized coordinate mirror descent on the dual, mini-batch form.

    Each iteration recomputes ``(1/n) X^T z`` from scratch (a full pass, no kept substitute
    gradient), calls the LMO there, and moves every sampled coordinate by the Bregman step
    (26) solved numerically (:func:`mirror_coordinate_step`). By Lemma 2.1 the iterates equal
    those of Algorithm 1 under ``z = loss'(s)``. The whole data set is one block here.

    Parameters
    ----------
    block : BlockRows
        The whole data set.
    loss_code, loss_params, batches, lmo_code, lmo_params
        As in :func:`gsfw_iterations`.
    m : float
        ``n / batch_size``.
    it0 : int
        Global index of the first iteration.
    z : ndarray of shape (n_samples,)
        Dual iterate, updated in place.
    z_lo, z_hi : ndarray of shape (n_samples,)
        Dual domain bounds per row (``loss_dual_bounds``).
    w_bar : ndarray of shape (n_features,)
        Primal average (optional accounting of Algorithm 2), updated in place.
    """
    indptr, indices, data, has_data, y = block
    n_rows = indptr.shape[0] - 1
    n_features = w_bar.shape[0]
    inv_n = 1.0 / n_rows
    direction = np.zeros(n_features)
    for k in range(batches.shape[0]):
        i = it0 + k
        eta, avg = step_sizes(i, m, False, 1.0)
        grad = np.zeros(n_features)
        for row in range(n_rows):
            for p in range(indptr[row], indptr[row + 1]):
                if has_data:
                    grad[indices[p]] += z[row] * data[p] * inv_n
                else:
                    grad[indices[p]] += z[row] * inv_n
        lmo_dense(lmo_code, lmo_params, grad, direction)
        for b in range(batches.shape[1]):
            row = batches[k, b]
            pred = row_dot(indptr, indices, data, has_data, row, direction)
            z[row] = mirror_coordinate_step(
                loss_code, loss_params, y[row], z[row], pred, eta, z_lo[row], z_hi[row]
            )
        for c in range(n_features):
            w_bar[c] = (1.0 - avg) * w_bar[c] + avg * direction[c]


@njit
def full_gradient(indptr, indices, data, has_data, y, loss_code, loss_params, w, n_features):
    """``(1/n) X^T loss'(X w)`` over one block (deterministic Frank-Wolfe baseline)."""
    pred = block_matvec(indptr, indices, data, has_data, w)
    inv_n = 1.0 / pred.shape[0]
    return block_xt_derivative(
        indptr, indices, data, has_data, y, loss_code, loss_params, pred, n_features, inv_n
    )


@njit
def rows_gradient(indptr, indices, data, has_data, y, loss_code, loss_params, w, rows, n_features):
    """``(1/|rows|) sum_{j in rows} loss'(x_j . w) x_j`` (stochastic Frank-Wolfe baseline)."""
    out = np.zeros(n_features)
    scale = 1.0 / rows.shape[0]
    for r in range(rows.shape[0]):
        row = rows[r]
        g = loss_derivative(
            loss_code, loss_params, row_dot(indptr, indices, data, has_data, row, w), y[row]
        )
        g *= scale
        add_scaled_row(indptr, indices, data, has_data, row, g, out)
    return out
