"""The tasks of the Newton-CG method: a group's share of a product, the sums, and
the step's vector algebra on ``w``'s home.

Tasks are pure (they return new arrays). Per round, each group's task runs on its owner;
the groups' d-vectors are summed up a tree (:mod:`daskpd.solvers.common.resident`); the Newton
and conjugate-gradient vectors (``w``, the gradient, the preconditioner, the CG state) live on one
worker, ``w``'s home, and only scalars reach the driver.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from daskpd.kernels import tron as kernels
from daskpd.solvers.common.groups import even_cuts, in_threads
from daskpd.solvers.common.resident import (
    Share,
    dense,
    group_products,
    group_threads,
    keep_rows,
    on_own_columns,
    row_pieces,
    summed_rows,
    thread_rows,
    zeroed_rows,
)
from daskpd.solvers.tron._options import PCG_MIX


class _Point(NamedTuple):
    """A Newton iterate on ``w``'s home: ``w``, the gradient, the preconditioner, the sums."""

    w: np.ndarray
    gradient: np.ndarray
    #: the preconditioner's diagonal (ones without one)
    m_diag: np.ndarray
    #: P_inner(w), P(w), D_inner(z), D(z), ||g||, ||g||_{M^-1}
    scalars: dict


class _Cg(NamedTuple):
    """The conjugate-gradient state of one Newton step (on ``w``'s home)."""

    step: np.ndarray
    residual: np.ndarray
    direction: np.ndarray
    #: ``r^T M^-1 r``
    z_dot_r: float
    #: the quadratic model's value at ``step``
    model: float
    tolerance: float
    iterations: int
    done: bool


# --------------------------------------------------------------------------------------------
# on the groups' owners


def _margins_task(group, w):
    """A group's margins ``X_k w`` (kept on the owner; a warm start's)."""
    return group_products(group, on_own_columns(group, w))


def _step_margins_task(group, step):
    """A group's ``X_k s`` for a Newton step ``s`` (kept on the owner for the line search)."""
    return group_products(group, on_own_columns(group, step))


def _line_task(group, margins, step_margins, step_length, settings):
    """A group's ``sum_i c_i loss(u_i + t (X s)_i)`` (a number: no pass over the rows)."""
    return kernels.line_sum(
        margins, step_margins, float(step_length), group.y, group.weight,
        settings.inner_code, settings.inner_params,
    )  # fmt: skip


def _gradient_task(group, margins, step_margins, step_length, settings):
    """A group's share at the margins ``u + t X s`` (``u`` alone without a step):
    ``(xtz, diag, sums, z, curv, margins)`` (:func:`kernels.gradient_rows`).

    ``z``, ``curv`` and the margins stay on the owner (the dual point, the Hessian's row
    weights, the next line search's start); ``xtz``, ``diag`` and ``sums`` are summed over
    the groups. The margins move with the step, so the pass reads each nonzero once (for
    ``X^T z``): ``X w`` is never formed again. A streamed group's chunks add into the same
    threads' output rows, one after the other.
    """
    if step_margins is not None:
        margins = margins + step_length * step_margins
    m = group.y.shape[0]
    d = settings.n_columns if group.columns is None else group.columns.shape[0]
    n_threads = group_threads(group)
    z = np.empty(m)
    curv = np.empty(m)
    # a thread's X^T z and the diagonal's share, a column's two in one record; the kernel
    # writes the diagonal whether or not the run uses it (the group's kept rows, zeroed and
    # summed in its threads)
    packs = zeroed_rows(thread_rows(group, (n_threads, d, 2)), n_threads)
    sums = np.zeros((n_threads, 4))
    for rows, first in row_pieces(group):
        last = first + rows.y.shape[0]
        _gradient_piece(
            rows, margins[first:last], z[first:last], curv[first:last], packs, sums, settings
        )
    total = summed_rows(packs, n_threads)
    # (a copy: the rows go back to the group)
    vectors = np.ascontiguousarray(total.T if settings.precondition else total[:, :1].T)
    keep_rows(group, packs)
    return (Share(group.columns, vectors), sums.sum(axis=0), z, curv, margins)


def _gradient_piece(rows, margins, z, curv, packs, sums, settings):
    """:func:`kernels.gradient_rows` over ``rows`` (a group or a chunk of it, its per-row
    vectors the given views), its threads each on its rows, into their ``packs`` and
    ``sums``."""

    def work(t):
        kernels.gradient_rows(
            rows.indptr, rows.indices, rows.vals, rows.binary, rows.y, rows.weight,
            margins, rows.cuts[t], rows.cuts[t + 1], settings.inner_code,
            settings.inner_params, settings.outer_code, settings.outer_params, z, curv,
            packs[t], sums[t],
        )  # fmt: skip

    in_threads(rows.cuts.shape[0] - 1, work)


def _hessian_task(group, curv, v):
    """A group's share of a Hessian-vector product: ``X_k^T (curv * (X_k v))`` (a streamed
    group's chunks whose rows all have curvature 0 not read)."""
    n_threads = group_threads(group)
    v = on_own_columns(group, v)
    # each thread's record a column: v to read, its share of the product to add to (the
    # group's kept rows, written and summed in its threads)
    packs = thread_rows(group, (n_threads, v.shape[0], 2))
    cuts = even_cuts(v.shape[0], n_threads)

    def prepare(t):
        lo, hi = cuts[t], cuts[t + 1]
        packs[:, lo:hi, 0] = v[lo:hi]
        packs[:, lo:hi, 1] = 0.0

    in_threads(n_threads, prepare)
    for rows, first in row_pieces(group, curv):
        _hessian_piece(rows, curv[first : first + rows.y.shape[0]], packs)
    product = summed_rows(packs[:, :, 1], n_threads).copy()
    keep_rows(group, packs)
    return Share(group.columns, product[None, :])


def _hessian_piece(rows, curv, packs):
    def work(t):
        kernels.hessian_rows(
            rows.indptr, rows.indices, rows.vals, rows.binary, curv, packs[t],
            rows.cuts[t], rows.cuts[t + 1],
        )  # fmt: skip

    in_threads(rows.cuts.shape[0] - 1, work)


def _shares(part):
    """The part of a gradient task's output that is summed over the groups."""
    return part[0], part[1]


# --------------------------------------------------------------------------------------------
# on w's home


def _point_task(w, shares, settings):
    """The :class:`_Point` at ``w`` from the summed shares of its gradient pass."""
    share, sums = shares
    vectors = dense(share, w.shape[0])
    xtz, diag = vectors[0], vectors[1] if settings.precondition else None
    n, alpha = settings.n_samples, settings.alpha
    gradient, m_diag = np.empty_like(w), np.empty_like(w)
    w_w, g_g, g_mg, dual_sq = kernels.point_vectors(
        w, xtz, xtz if diag is None else diag, alpha, float(n), PCG_MIX,
        settings.precondition, gradient, m_diag,
    )  # fmt: skip
    # w(z) = -X^T z / (alpha n) = w - gradient / alpha
    half_w, half_dual = 0.5 * alpha * w_w, 0.5 * alpha * dual_sq
    scalars = {
        "inner_primal": float(sums[1]) / n + half_w,
        "primal": float(sums[0]) / n + half_w,
        "inner_dual": -float(sums[3]) / n - half_dual,
        "dual": -float(sums[2]) / n - half_dual,
        "gradient_norm": float(np.sqrt(g_g)),
        "gradient_mnorm": float(np.sqrt(g_mg)),
    }
    return _Point(w, gradient, m_diag, scalars)


def _point_scalars(point):
    return point.scalars


def _point_w(point):
    return point.w


def _cg_start(point, settings):
    """The CG state at ``s = 0``: ``r = -g``, direction ``M^-1 r``."""
    residual = -point.gradient
    z = residual / point.m_diag
    z_dot_r = float(z @ residual)
    return _Cg(
        step=np.zeros_like(residual),
        residual=residual,
        direction=z,
        z_dot_r=z_dot_r,
        model=0.0,
        # liblinear's rule on its objective, ours divided by alpha (so the rule does not
        # depend on alpha's scale): min(eps_cg, sqrt(||g / alpha||_{M^-1}))
        tolerance=min(settings.eps_cg, float(np.sqrt(np.sqrt(max(z_dot_r, 0.0)) / settings.alpha))),
        iterations=0,
        done=not z_dot_r > 0.0,
    )


def _cg_direction(cg):
    return cg.direction


def _cg_step(cg, products, point, settings):
    """One preconditioned CG step (liblinear's ``NEWTON::pcg``).

    ``products``: the groups' summed ``X^T (curv * (X d))``, so ``H d = alpha d +
    products / n``. CG stops once the quadratic model's last decrease, times the steps so
    far, is at most ``tolerance`` of its value (Nash and Sofer's rule, as liblinear).
    """
    if cg.done:
        return cg
    d = cg.direction
    hd = np.empty_like(d)
    products = dense(products, d.shape[0])[0]
    curvature = kernels.cg_curvature(d, products, settings.alpha, float(settings.n_samples), hd)
    iterations = cg.iterations + 1
    if not curvature > 1e-16 * float(d @ d) * settings.alpha:
        # no curvature left along d (rounding at the optimum): stop where we are
        return cg._replace(iterations=iterations, done=True)
    step_length = cg.z_dot_r / curvature
    step, residual, direction = cg.step.copy(), cg.residual.copy(), d.copy()
    s_r, s_g, z_dot_r = kernels.cg_update(
        step, residual, direction, hd, point.gradient, point.m_diag, step_length
    )
    model = -0.5 * (s_r - s_g)
    change = model - cg.model
    done = iterations >= settings.max_cg
    if model <= 0 and change <= 0:
        done = done or iterations * change >= cg.tolerance * model
    else:
        done = True
    kernels.cg_direction(residual, point.m_diag, z_dot_r / cg.z_dot_r, direction)
    return cg._replace(
        step=step,
        residual=residual,
        direction=direction,
        z_dot_r=z_dot_r,
        model=model,
        iterations=iterations,
        done=bool(done or not z_dot_r > 0.0),
    )


def _cg_scalars(cg):
    return {"done": bool(cg.done), "iterations": cg.iterations}


def _cg_step_vector(cg):
    return cg.step


def _line_scalars(point, cg):
    """The quadratic regularizer along the step: ``w.w``, ``w.s``, ``s.s``, and ``g.s``."""
    w, step = point.w, cg.step
    return {
        "w_w": float(w @ w),
        "w_s": float(w @ step),
        "s_s": float(step @ step),
        "g_s": float(point.gradient @ step),
    }


def _moved_w(point, cg, step_length):
    """The next ``w = w + t s``."""
    return point.w + step_length * cg.step


def _sum_numbers(*numbers):
    return float(sum(numbers))
