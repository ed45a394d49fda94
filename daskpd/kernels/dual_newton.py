"""Kernels of the projected Newton method on the hinge loss's dual
(:mod:`daskpd.solvers.dual_newton`): a row group's products over a subset of its rows.

The dual's Hessian is ``diag(c y) X X^T diag(c y) / (alpha n)``; a Newton step solves it on
the free rows only (those not held at a bound of the box ``0 <= a_i <= 1``), which on
nearly separable data are a few percent of the rows. So every product here walks a list of
row ids (``rows``), not a range: ``X_F v`` and ``X_F^T coef``.

Threads: the subset is cut into ranges of about equal nonzeros (:func:`subset_cuts`); each
thread writes its own output (a row of ``out``), and the caller sums them.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels._config import njit

__all__ = ["row_norms_sq", "subset_cuts", "subset_products", "subset_transpose"]


@njit
def row_norms_sq(indptr, vals, binary, out):
    """``out[i] = ||x_i||^2`` for every row of the group."""
    for i in range(indptr.shape[0] - 1):
        if binary:
            out[i] = np.float64(indptr[i + 1] - indptr[i])
        else:
            t = 0.0
            for e in range(indptr[i], indptr[i + 1]):
                v = np.float64(vals[e])
                t += v * v
            out[i] = t


@njit
def subset_cuts(indptr, rows, n_threads):
    """Bounds into ``rows`` of ``n_threads`` ranges of about equal nonzeros (int64,
    ``n_threads + 1``)."""
    n = rows.shape[0]
    total = 0
    for k in range(n):
        total += indptr[rows[k] + 1] - indptr[rows[k]]
    cuts = np.empty(n_threads + 1, dtype=np.int64)
    cuts[0] = 0
    seen = 0
    k = 0
    for t in range(1, n_threads):
        target = (total * t) // n_threads
        while k < n and seen < target:
            seen += indptr[rows[k] + 1] - indptr[rows[k]]
            k += 1
        cuts[t] = k
    cuts[n_threads] = n
    return cuts


@njit
def subset_products(indptr, indices, vals, binary, rows, v, lo, hi, out):
    """``out[k] = x_{rows[k]} . v`` for ``k`` in ``lo:hi``; returns the nonzeros read."""
    read = 0
    for k in range(lo, hi):
        i = rows[k]
        t = 0.0
        if binary:
            for e in range(indptr[i], indptr[i + 1]):
                t += v[indices[e]]
        else:
            for e in range(indptr[i], indptr[i + 1]):
                t += np.float64(vals[e]) * v[indices[e]]
        out[k] = t
        read += indptr[i + 1] - indptr[i]
    return read


@njit
def subset_transpose(indptr, indices, vals, binary, rows, coef, lo, hi, out):
    """``out += sum_{k in lo:hi} coef[k] x_{rows[k]}`` (rows of coefficient 0 are skipped);
    returns the nonzeros read."""
    read = 0
    for k in range(lo, hi):
        c = coef[k]
        if c == 0.0:
            continue
        i = rows[k]
        if binary:
            for e in range(indptr[i], indptr[i + 1]):
                out[indices[e]] += c
        else:
            for e in range(indptr[i], indptr[i + 1]):
                out[indices[e]] += c * np.float64(vals[e])
        read += indptr[i + 1] - indptr[i]
    return read
