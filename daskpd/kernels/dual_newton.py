"""Kernels of the projected Newton method on the hinge loss's dual
(:mod:`daskpd.solvers.dual_newton`): a block's transpose product, the Gram matrix of its
rows on a few columns (the Woodbury preconditioner's), and the local passes of dual
coordinate descent that give the method its start.

The dual's Hessian is ``diag(c y) X X^T diag(c y) / (alpha n)``; a Newton step solves it on
the free rows only (those not held at a bound of the box ``0 <= a_i <= 1``), which on
nearly separable data are a few percent of the rows. The solver copies them out once a
Newton step into a block of their own, on the columns they touch, so the products here walk
a range of that block's rows: ``X_F^T coef`` (``X_F v`` is tron's row kernel).

Threads: each thread takes a range of about equal nonzeros and writes its own output (a row
of ``out``); the caller sums them.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels._config import njit

__all__ = ["box_pass", "rows_gram", "rows_transpose"]


@njit
def rows_transpose(indptr, indices, vals, binary, coef, lo, hi, out):
    """``out += sum_{i in lo:hi} coef[i] x_i`` (rows of coefficient 0 are skipped); returns
    the nonzeros read."""
    read = 0
    for i in range(lo, hi):
        c = coef[i]
        if c == 0.0:
            continue
        if binary:
            for e in range(indptr[i], indptr[i + 1]):
                out[indices[e]] += c
        else:
            for e in range(indptr[i], indptr[i + 1]):
                out[indices[e]] += c * np.float64(vals[e])
        read += indptr[i + 1] - indptr[i]
    return read


@njit
def box_pass(indptr, indices, vals, binary, y, c, norm_sq, scale, a, u):
    """One pass of dual coordinate descent over a group's rows, in order, on the box
    ``0 <= a_i <= 1``: ``u`` is the group's ``X_k^T (c y a) / scale`` (its own columns),
    kept up to date; returns the nonzeros read.

    Row ``i`` minimizes ``(scale / 2) ||u||^2 - sum c a`` in ``a_i`` alone: its gradient is
    ``c_i (y_i x_i . u - 1)`` and its curvature ``c_i^2 ||x_i||^2 / scale``, so the step is
    exact (clipped to the box). With ``scale = alpha n / K`` this is CoCoA+'s local problem
    with the safe ``sigma' = K`` from ``w = 0``: the groups' points added make a dual point
    whose objective is at least the start's. Rows of weight 0 or without nonzeros are
    skipped (the caller holds them)."""
    read = 0
    for i in range(y.shape[0]):
        ci = c[i]
        if ci <= 0.0 or norm_sq[i] == 0.0:
            continue
        start, stop = indptr[i], indptr[i + 1]
        m = 0.0
        if binary:
            for e in range(start, stop):
                m += u[indices[e]]
        else:
            for e in range(start, stop):
                m += np.float64(vals[e]) * u[indices[e]]
        read += stop - start
        m *= y[i]
        new = a[i] - (m - 1.0) * scale / (ci * norm_sq[i])
        new = min(1.0, max(0.0, new))
        delta = new - a[i]
        if delta == 0.0:
            continue
        a[i] = new
        coef = ci * y[i] * delta / scale
        if binary:
            for e in range(start, stop):
                u[indices[e]] += coef
        else:
            for e in range(start, stop):
                u[indices[e]] += coef * np.float64(vals[e])
    return read


@njit
def rows_gram(indptr, indices, values, weight, out):
    """``out += sum_i weight[i] b_i b_i^T`` over the rows of a CSR matrix ``B`` (``indices``
    into ``out``'s columns, unique within a row; ``out`` square, symmetric): each pair of a
    row's nonzeros once, into the upper triangle, then mirrored (``out`` being symmetric,
    its lower triangle becomes its upper one). The Woodbury preconditioner's
    ``B^T Delta^-1 B``: a row's cost is its nonzeros on the dense columns squared, where a
    sparse product would build the matrix as a sparse one first."""
    n = out.shape[0]
    upper = out
    for i in range(indptr.shape[0] - 1):
        w = weight[i]
        start, stop = indptr[i], indptr[i + 1]
        for p in range(start, stop):
            vp = values[p] * w
            kp = indices[p]
            for q in range(p, stop):
                kq = indices[q]
                if kp <= kq:
                    upper[kp, kq] += vp * values[q]
                else:
                    upper[kq, kp] += vp * values[q]
    for k in range(n):
        for m in range(k + 1, n):
            out[m, k] = out[k, m]
