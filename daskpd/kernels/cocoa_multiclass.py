"""Numba kernel of one-vs-rest CoCoA+: one visit of a row steps every class's dual.

A multiclass problem with ``K`` classes is, one-vs-rest, ``K`` binary problems on the same
rows: problem ``k`` labels row ``i`` ``+1`` when its class is ``k`` and ``-1`` otherwise, and
has its own weights ``w_k`` and dual block ``z[:, k]``. Each problem is the one of
:mod:`daskpd.kernels.cocoa` (same objective, dual and coordinate step,
:func:`daskpd.kernels.cocoa.dual_step`); what this kernel adds is the order of the work. A
visit of row ``i`` reads its nonzeros once, computes ``x_i . v_k`` and ``x_i . w_k`` for every
``k`` from them, takes the ``K`` steps and adds them to ``v`` in a second read of the same
nonzeros. So a round reads each row's nonzeros twice for all ``K`` problems, where ``K``
binary runs read them ``2 K`` times: out of core, one read of the data serves every class.

Layout: the kernel keeps the weights feature-major, ``v`` of shape (n_features, K), and the
duals row-major, ``z`` of shape (n_rows, K): the ``K`` values one nonzero (one row) needs are
adjacent, one cache line for up to 8 classes, where (K, n_features) would cost ``K`` cache
misses per nonzero. The solver hands out ``coef_`` as (K, n_features), scikit-learn's shape.

Per class, the steps and the sums are those of :func:`daskpd.kernels.cocoa.cocoa_pass` with
one thread and no screening, in the same row order and the same arithmetic order: class
``k``'s dual block, its ``v``, its certificate sums and, for the box losses, the spread of
its projected gradients and the gradients of the rows left at a bound (liblinear's shrinking
reads them) equal those of a binary pass over the labels ``+-1`` of class ``k``, bit for bit
(``tests/solvers/test_multiclass.py``). The shrunk passes that follow the pass for the box
losses are the binary kernels' own (:func:`daskpd.kernels.cocoa.shrink_candidates`,
:func:`daskpd.kernels.cocoa.shrunk_passes`), run class by class on the class's active rows
(:mod:`daskpd.solvers.cocoa._multiclass`): each class has its own active set, and the rows
they visit are few, in memory.
"""

from __future__ import annotations

import math

import numpy as np

from daskpd.kernels import scalar
from daskpd.kernels._config import njit
from daskpd.kernels.cocoa import PG_MAX, PG_MIN, box_gradient, dual_step, projected_gradient

#: The losses the one-vs-rest pass takes: the classification losses of CoCoA+.
MULTICLASS_LOSSES = (scalar.HINGE, scalar.SMOOTH_HINGE, scalar.SQUARED_HINGE, scalar.LOGISTIC)


@njit
def one_vs_rest_pass(
    indptr,
    indices,
    vals,
    binary,
    label,
    weight,
    norm_sq,
    z,
    v,
    w_start,
    order,
    loss_code,
    loss_params,
    sigma,
    inv_alpha_n,
    sums,
    visits,
    pg_range,
    held,
):
    """One pass of every class's CoCoA+ local solver over a row group, one visit per row.

    Parameters
    ----------
    indptr, indices, vals, binary
        The group's ``m`` rows in CSR, typed as in :class:`daskpd.kernels.cocoa.GroupRows`;
        ``indices`` are column ids into the rows of ``v``.
    label : ndarray of shape (m,), int64
        Each row's class index, in ``[0, K)``.
    weight : ndarray of shape (m,)
        Row weights ``c_i`` (rows of weight 0 are not visited and keep ``z = 0``).
    norm_sq : ndarray of shape (m,)
        ``||x_i||^2``.
    z : ndarray of shape (m, K)
        The dual blocks of the ``K`` problems (the project's sign), updated in place.
    v : ndarray of shape (n_features, K)
        The local copies of the ``K`` weight vectors, feature-major; updated in place by
        ``-sigma delta x_i / (alpha n)`` per step.
    w_start : ndarray of shape (n_features, K)
        The weights at the round's start, read only: the certificate's margins.
    order : ndarray of shape (m,), int64
        The rows' visiting order.
    loss_code : int
        One of :data:`MULTICLASS_LOSSES`.
    loss_params : ndarray of float64
    sigma : float
        ``sigma'`` of CoCoA+ (1 for one group).
    inv_alpha_n : float
        ``1 / (alpha n)``, ``n`` the rows of the whole problem.
    sums : ndarray of shape (2, K)
        Output, added to: row 0 ``sum_i c_i loss(x_i . w_k, y_ik)`` at ``w_start``, row 1
        ``sum_i c_i loss*(z_ik / c_i, y_ik)`` at the entry ``z``, per class.
    visits : ndarray of shape (m,), int64
        Incremented once per row visited (all classes together): what a test counts.
    pg_range : ndarray of shape (2, K)
        Output (rows :data:`~daskpd.kernels.cocoa.PG_MAX`, ``PG_MIN``): per class, the
        largest and the smallest projected gradient of the pass, taken before each row's
        step, as :func:`daskpd.kernels.cocoa.cocoa_pass` gives them (box losses; ``(0, 0)``
        for the logistic loss and for rows all of weight 0): the spread liblinear's
        shrinking compares with.
    held : ndarray of shape (m, K) or (0, K)
        Output, unless empty (box losses): per class, each visited row's gradient ``G``
        where the pass left it at a bound without a step, else NaN, as ``held`` of
        :func:`daskpd.kernels.cocoa.cocoa_pass`: what
        :func:`daskpd.kernels.cocoa.shrink_candidates` reads for the shrunk passes.
    """
    n_classes = v.shape[1]
    u = np.empty(n_classes)
    u_start = np.empty(n_classes)
    coef = np.empty(n_classes)
    curvature = sigma * inv_alpha_n
    boxed = loss_code == scalar.HINGE or loss_code == scalar.SMOOTH_HINGE
    boxed = boxed or loss_code == scalar.SQUARED_HINGE
    record = boxed and held.shape[0] > 0
    for cls in range(n_classes):
        pg_range[PG_MAX, cls] = -math.inf
        pg_range[PG_MIN, cls] = math.inf
    for k in range(order.shape[0]):
        i = order[k]
        c = weight[i]
        if c == 0.0:
            continue
        visits[i] += 1
        start = indptr[i]
        stop = indptr[i + 1]
        u[:] = 0.0
        u_start[:] = 0.0
        for e in range(start, stop):
            j = indices[e]
            if binary:
                for cls in range(n_classes):
                    u[cls] += v[j, cls]
                    u_start[cls] += w_start[j, cls]
            else:
                x = np.float64(vals[e])
                for cls in range(n_classes):
                    u[cls] += x * v[j, cls]
                    u_start[cls] += x * w_start[j, cls]
        kappa = curvature * norm_sq[i]
        moved = False
        for cls in range(n_classes):
            yi = 1.0 if label[i] == cls else -1.0
            zi = z[i, cls]
            gradient = 0.0
            if boxed:
                # liblinear's shrinking reads these (cocoa_pass's "Shrinking")
                a = -yi * zi
                gradient, upper = box_gradient(loss_code, loss_params, a, yi * u[cls], c)
                pg = projected_gradient(gradient, a, upper)
                pg_range[PG_MAX, cls] = max(pg_range[PG_MAX, cls], pg)
                pg_range[PG_MIN, cls] = min(pg_range[PG_MIN, cls], pg)
            sums[0, cls] += c * scalar.loss_value(loss_code, loss_params, u_start[cls], yi)
            sums[1, cls] += c * scalar.loss_conjugate(loss_code, loss_params, zi / c, yi)
            new_z = dual_step(loss_code, loss_params, zi, u[cls], kappa, c, yi)
            z[i, cls] = new_z
            delta = new_z - zi
            coef[cls] = -(sigma * delta) * inv_alpha_n
            if delta != 0.0:
                moved = True
            if record:
                held[i, cls] = gradient if delta == 0.0 else math.nan
        if moved:
            for e in range(start, stop):
                j = indices[e]
                if binary:
                    for cls in range(n_classes):
                        v[j, cls] += coef[cls]
                else:
                    x = np.float64(vals[e])
                    for cls in range(n_classes):
                        v[j, cls] += coef[cls] * x
    for cls in range(n_classes):
        if pg_range[PG_MAX, cls] < pg_range[PG_MIN, cls]:
            # not a box loss, or no row of weight > 0
            pg_range[PG_MAX, cls] = 0.0
            pg_range[PG_MIN, cls] = 0.0
