"""Kernels of the projected Newton method on the hinge loss's dual
(:mod:`daskpd.solvers.dual_newton`): a block's transpose product.

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

__all__ = ["rows_transpose"]


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
