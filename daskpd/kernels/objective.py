"""Per-block partial sums of the primal and dual objectives.

For a row block with rows ``x_i``, labels ``y_i``, row weights ``c_i`` and dual values ``z_i``
the kernels return

- ``loss_sum = sum_i c_i loss(x_i . w, y_i)``,
- ``conj_sum = sum_i (c_i loss)*(z_i) = sum_i c_i loss*(z_i / c_i, y_i)`` (``+inf`` if some z_i
  leaves the domain; for ``c_i = 0`` the conjugate is the indicator of ``{0}``),

and add ``X_block^T z`` into ``g_out`` (length n_features; an empty ``g_out`` skips this, for a
caller that keeps ``X^T z`` already: the pass then reads the rows once and writes nothing of
length n_features). When no dual values are given
(``has_z = False``) the kernels use ``z_i = c_i loss'(x_i . w, y_i)``, the dual point that is
optimal when ``w`` is. :class:`daskpd.problem.Problem` sums these over blocks and finishes the
dual with the regularizer conjugate.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from daskpd.kernels._config import njit
from daskpd.kernels.scalar import loss_conjugate, loss_derivative, loss_value


class BlockRows(NamedTuple):
    """A CSR row block, its labels and row weights, as :func:`csr_block_partial` reads it.

    Attributes
    ----------
    indptr : ndarray of shape (n_rows + 1,), int64, starting at 0
    indices : ndarray of shape (nnz,), int32
    data : ndarray of shape (nnz,)
        Stored values; ignored (may be empty) when ``binary``.
    binary : bool
        Every stored value is 1.
    y : ndarray of shape (n_rows,), float64
    weight : ndarray of shape (n_rows,), float64
        Row weights ``c_i``; ignored (may be empty) unless ``weighted``.
    weighted : bool
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    binary: bool
    y: np.ndarray
    weight: np.ndarray
    weighted: bool


@njit
def _weighted_conjugate(code, params, zi, yi, c):
    if c == 0.0:
        if zi == 0.0:
            return 0.0
        return np.inf
    return c * loss_conjugate(code, params, zi / c, yi)


@njit
def _row_terms(code, params, t, yi, c, z, has_z, i):
    """Row ``i``'s weighted loss at its margin ``t``, its dual (``z[i]``, else the weighted
    derivative at ``t``) and the weighted conjugate there."""
    zi = z[i] if has_z else c * loss_derivative(code, params, t, yi)
    return c * loss_value(code, params, t, yi), zi, _weighted_conjugate(code, params, zi, yi, c)


@njit
def csr_block_partial(block, w, code, params, z, has_z, g_out):
    """Partial sums over a CSR row block.

    Parameters
    ----------
    block : BlockRows
        The rows, their labels and weights.
    w : ndarray of shape (n_features,), float64
    code : int
        Loss code of :mod:`daskpd.kernels.scalar`.
    params : ndarray of float64
        Loss parameters.
    z : ndarray of shape (n_rows,), float64
        Dual values; ignored (may be empty) unless ``has_z``.
    has_z : bool
    g_out : ndarray of shape (n_features,) or (0,), float64
        Accumulator; ``X_block^T z`` is added to it in place (not when it is empty).

    Returns
    -------
    loss_sum, conj_sum : float
    """
    indptr, indices, data, binary, y, weight, weighted = block
    loss_sum = 0.0
    conj_sum = 0.0
    accumulate = g_out.shape[0] > 0
    for i in range(indptr.shape[0] - 1):
        start = indptr[i]
        stop = indptr[i + 1]
        t = 0.0
        if binary:
            for k in range(start, stop):
                t += w[indices[k]]
        else:
            for k in range(start, stop):
                t += data[k] * w[indices[k]]
        loss, zi, conj = _row_terms(
            code, params, t, y[i], weight[i] if weighted else 1.0, z, has_z, i
        )
        loss_sum += loss
        conj_sum += conj
        if accumulate and zi != 0.0:
            if binary:
                for k in range(start, stop):
                    g_out[indices[k]] += zi
            else:
                for k in range(start, stop):
                    g_out[indices[k]] += zi * data[k]
    return loss_sum, conj_sum


@njit
def dense_block_partial(X, y, weight, weighted, w, code, params, z, has_z, g_out):
    """Partial sums over a dense row block ``X`` of shape (n_rows, n_features).

    ``y``, ``weight`` and ``weighted`` as in :class:`BlockRows`; the rest, the outputs and the
    conventions as in :func:`csr_block_partial`.
    """
    loss_sum = 0.0
    conj_sum = 0.0
    n_features = X.shape[1]
    accumulate = g_out.shape[0] > 0
    for i in range(X.shape[0]):
        t = 0.0
        for j in range(n_features):
            t += X[i, j] * w[j]
        loss, zi, conj = _row_terms(
            code, params, t, y[i], weight[i] if weighted else 1.0, z, has_z, i
        )
        loss_sum += loss
        conj_sum += conj
        if accumulate and zi != 0.0:
            for j in range(n_features):
                g_out[j] += zi * X[i, j]
    return loss_sum, conj_sum
