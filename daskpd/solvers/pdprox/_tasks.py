"""Pdprox's block primitives, the functions of its Dask tasks (pure: inputs are never modified).

The dual steps of a row block, its partial ``X_b^T coef(.)``, the budget threshold and clip,
the prox, and the power-iteration steps of :func:`estimate_spectral_norm`. Symbols as in the
paper-to-code table of :mod:`daskpd.solvers.pdprox`.
"""

from __future__ import annotations

import math

import numpy as np

from daskpd.kernels import pdprox as kernels
from daskpd.solvers.common.blocks import block_csr


def _gram_task(data, block, v):
    indptr, indices, values, has_values, _ = block_csr(data, block)
    return kernels.block_gram(indptr, indices, values, has_values, v, v.shape[0])


def _normalize(v):
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _rayleigh(v, xtxv):
    return math.sqrt(max(float(v @ xtxv), 0.0))


def _pred(data, block, w):
    indptr, indices, values, has_values, _ = block_csr(data, block)
    return kernels.block_matvec(indptr, indices, values, has_values, w)


def _ascent(data, block, spec, base, pred, project):
    y = block_csr(data, block)[4]
    return kernels.dual_step(
        spec.loss_code, spec.loss_params, y, base, pred, spec.sigma, 1.0 / spec.n, project
    )


def _partial(data, block, spec, dual):
    indptr, indices, values, has_values, y = block_csr(data, block)
    return kernels.rmatvec_coef(
        spec.loss_code, spec.loss_params, indptr, indices, values, has_values, y, dual,
        spec.n_features,
    )  # fmt: skip


def _threshold(budget, *hats):
    return kernels.budget_threshold(np.concatenate([h[:, kernels.DUAL_A1] for h in hats]), budget)


def _clip(hat, eta):
    return kernels.budget_clip(hat, eta)


def _finish(data, block, spec, state, dual, extra):
    """New block state and partial ``X_b^T coef(.)`` once the dual ``a_t`` is known."""
    state = _unwrap(state)
    partial_dual = dual
    if spec.algorithm == "primal" and spec.form == "double-dual":
        partial_dual = 2.0 * dual - state["dual"]
    new = {**state, **extra, "dual": dual, "dual_sum": state["dual_sum"] + dual}
    return new, _partial(data, block, spec, partial_dual)


def _pre(data, block, spec, state, w_point, first):
    """Everything before the (last) projection of the iteration; returns ``(hat, extra)``.

    ``w_point`` is ``w_{t-1}`` (Algorithms 1 and 3, double-dual), ``2 w_{t-1} - w_{t-2}``
    (Algorithm 3, double-primal) or ``w_t`` (Algorithm 2).
    """
    state = _unwrap(state)
    pred = _pred(data, block, w_point)
    if spec.algorithm == "dual-simplified" and spec.form == "double-dual":
        if first:
            base = state["aux"]
        else:
            y = block_csr(data, block)[4]
            base = kernels.dual_correction(
                spec.loss_code, spec.loss_params, y, state["dual"], pred, state["pred"],
                spec.sigma, 1.0 / spec.n,
            )  # fmt: skip
        return _ascent(data, block, spec, base, pred, not spec.budget), {"pred": pred}
    if spec.algorithm == "dual":
        return pred, {}
    return _ascent(data, block, spec, state["dual"], pred, not spec.budget), {}


def _block_iteration(data, block, spec, state, w_point, first):
    """One fused block task (no budget): dual update and partial ``X_b^T coef(a_t)``."""
    state = _unwrap(state)
    if spec.algorithm == "dual":
        pred = _pred(data, block, w_point)
        beta = state["aux"] if first else _ascent(data, block, spec, state["aux"], pred, True)
        dual = _ascent(data, block, spec, beta, pred, True)
        return _finish(data, block, spec, state, dual, {"aux": beta})
    hat, extra = _pre(data, block, spec, state, w_point, first)
    return _finish(data, block, spec, state, hat, extra)


def _budget_beta_hat(data, block, spec, state, w_point, first):
    """Algorithm 1 with a budget, first phase: ``X_b w_{t-1}`` and the unprojected ``b_t``."""
    state = _unwrap(state)
    pred = _pred(data, block, w_point)
    if first:
        return pred, state["aux"]
    return pred, _ascent(data, block, spec, state["aux"], pred, False)


def _budget_phase_beta(data, block, spec, pred, beta_hat, eta):
    """Second phase: project ``b_{t-1}`` with the global threshold, unprojected ``a_t``."""
    beta = beta_hat if eta is None else kernels.budget_clip(beta_hat, eta)
    return beta, _ascent(data, block, spec, beta, pred, False)


def _prox(regularizer, alpha, point, gw, tau, n):
    v = point - (tau / n) * gw
    if alpha == 0:
        return v
    return np.asarray(regularizer.prox(v, tau * alpha), dtype=np.float64)


def _extrapolate(w, w_prev):
    return 2.0 * w - w_prev


def _primal_aux(w, gw_prev, gw, tau, n):
    return w + (tau / n) * (gw_prev - gw)


def _sum_parts(*parts):
    # A part is an array, or a block task's (state, partial) pair.
    parts = [p[1] if isinstance(p, tuple) else p for p in parts]
    total = np.array(parts[0], dtype=np.float64, copy=True)
    for part in parts[1:]:
        total += part
    return total


def _unwrap(state):
    """A block state, from the state itself or a block task's (state, partial) pair."""
    return state[0] if isinstance(state, tuple) else state


def _as_extra(key, value):
    return {key: value}
