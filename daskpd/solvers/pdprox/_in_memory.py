"""Pdprox in memory (tests, benchmarks) and the baselines of the paper: GD and FOBOS.

:func:`pdprox` runs the solver's own block code eagerly. Symbols as in the paper-to-code table of
:mod:`daskpd.solvers.pdprox`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from daskpd.kernels import pdprox as kernels
from daskpd.solvers.pdprox._graph import _iterations, _new_state
from daskpd.solvers.pdprox._options import PdproxOptions, _make_spec, loss_spec


@dataclass(frozen=True)
class PdproxResult:
    """Outcome of :func:`pdprox`.

    Attributes
    ----------
    w, w_avg : ndarray of shape (n_features,)
        Last and averaged primal iterates.
    dual, dual_avg : ndarray of shape (n_samples, DUAL_WIDTH)
        Last and averaged Pdprox duals, fields ``DUAL_A1`` and ``DUAL_A2`` of
        :mod:`daskpd.kernels.pdprox` (``DUAL_A2`` unused for one-component losses).
    z, z_avg : ndarray of shape (n_samples,)
        The same duals as contract duals ``z = coef(dual)``.
    n_iterations : int
    tau, sigma : float
        Primal and dual steps used.
    """

    w: np.ndarray
    w_avg: np.ndarray
    dual: np.ndarray
    dual_avg: np.ndarray
    z: np.ndarray
    z_avg: np.ndarray
    n_iterations: int
    tau: float
    sigma: float


def pdprox(
    X,
    y,
    loss,
    regularizer,
    alpha,
    *,
    n_iterations,
    algorithm="dual",
    form=None,
    step_scale=1.0,
    step_ratio=1.0,
    spectral_norm=None,
    budget=None,
    rows_per_block=None,
    callback=None,
):
    """Run Pdprox in memory (eagerly, same block code as the Dask solver).

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : Loss or tuple
        See :func:`loss_spec`.
    regularizer : Regularizer
        Anything with ``prox(v, step)`` (and ``value`` for objectives).
    alpha : float
        Regularization strength.
    n_iterations : int
    algorithm, form, step_scale, step_ratio, spectral_norm, budget
        As in :class:`PdproxOptions`; ``spectral_norm=None`` uses the exact ``||X||_2``.
    rows_per_block : int, optional
        Row-block size of the in-memory dataset (blocks change nothing but the task layout).
    callback : callable, optional
        ``callback(t, state)`` after every iteration, with ``state`` a dict of ``w``,
        ``w_avg``, ``dual``, ``dual_avg``, ``aux`` (the second dual copy, Algorithm 1/3)
        and ``w_aux`` (Algorithm 2).

    Returns
    -------
    PdproxResult
    """
    from daskpd.data import MemoryDataset

    y = np.asarray(y, dtype=np.float64)
    data = MemoryDataset(X, y, rows_per_block=rows_per_block)
    options = PdproxOptions(
        algorithm=algorithm,
        form=form,
        step_scale=step_scale,
        step_ratio=step_ratio,
        spectral_norm=spectral_norm,
        budget=budget,
    )
    if spectral_norm is None:
        import scipy.sparse as sp

        dense = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        spectral_norm = float(np.linalg.norm(dense, 2))
    spec = _make_spec(loss, data, options, spectral_norm)
    state = _new_state(spec, data, None, regularizer, alpha)
    for _ in range(int(n_iterations)):
        state = _iterations(state, 1)
        if callback is not None:
            callback(state.t, _view(state))
    view = _view(state)
    return PdproxResult(
        w=view["w"],
        w_avg=view["w_avg"],
        dual=view["dual"],
        dual_avg=view["dual_avg"],
        z=kernels.block_coef(spec.loss_code, spec.loss_params, y, view["dual"]),
        z_avg=kernels.block_coef(spec.loss_code, spec.loss_params, y, view["dual_avg"]),
        n_iterations=state.t,
        tau=spec.tau,
        sigma=spec.sigma,
    )


def _view(state):
    t = max(state.t, 1)
    blocks = list(state.blocks)
    return {
        "w": np.array(state.w, dtype=np.float64),
        "w_avg": np.asarray(state.w_sum, dtype=np.float64) / t,
        "w_aux": np.array(state.w_aux, dtype=np.float64),
        "dual": np.concatenate([b["dual"] for b in blocks]),
        "dual_avg": np.concatenate([b["dual_sum"] for b in blocks]) / t,
        "aux": np.concatenate([b["aux"] for b in blocks]),
    }


def pdprox_objective(X, y, loss, regularizer, alpha, w):
    """``(1/n) sum_i loss(x_i . w, y_i) + alpha R(w)`` for a Pdprox loss (see :func:`loss_spec`).

    Returns
    -------
    float
    """
    code, params, _ = loss_spec(loss)
    y = np.asarray(y, dtype=np.float64)
    pred = np.asarray(X @ w, dtype=np.float64).ravel()
    value = kernels.block_loss_sum(code, params, y, pred) / y.shape[0]
    return float(value + (alpha * regularizer.value(w) if alpha else 0.0))


def _loss_subgradient(X, y, code, params, w):
    """``(1/n) X^T g`` with ``g_i`` a subgradient of the loss at ``x_i . w`` (the dual vertex)."""
    pred = np.asarray(X @ w, dtype=np.float64).ravel()
    g = kernels.subgradient_coef(code, params, y, pred)
    return np.asarray(X.T @ g, dtype=np.float64).ravel() / pred.shape[0]


def _group_subgradient(regularizer, w):
    """A subgradient of a group lasso (``weight_g w_g / ||w_g||``, 0 on zero groups)."""
    out = np.zeros_like(w)
    for group, weight in zip(regularizer.groups, regularizer.weights, strict=True):
        index = list(group)
        norm = float(np.linalg.norm(w[index]))
        if norm > 0:
            out[index] = weight * w[index] / norm
    return out


def _full_batch_iterations(X, y, loss, n_iterations, update, record):
    """The loop of the full-batch baselines: from ``w = 0``, ``w = update(t, w, g_loss)`` for
    ``t = 1..n_iterations`` with ``g_loss`` the loss part's subgradient at ``w``
    (:func:`_loss_subgradient`), then ``record(t, w)`` if given."""
    code, params, _ = loss_spec(loss)
    y = np.asarray(y, dtype=np.float64)
    w = np.zeros(X.shape[1])
    for t in range(1, n_iterations + 1):
        w = update(t, w, _loss_subgradient(X, y, code, params, w))
        if record is not None:
            record(t, w)
    return w


def subgradient_descent(X, y, loss, regularizer, alpha, *, n_iterations, step, record=None):
    """Deterministic subgradient descent ``w -= (step / sqrt(t)) (g_loss + alpha g_R)``.

    Baseline ("gd") of the Pdprox paper; ``regularizer`` must be a group lasso (or have a
    ``subgradient`` method). ``record(t, w)`` is called after every iteration.

    Returns
    -------
    ndarray of shape (n_features,)
    """

    def update(t, w, g_loss):
        if hasattr(regularizer, "groups"):
            g_reg = _group_subgradient(regularizer, w)
        else:
            g_reg = np.asarray(regularizer.subgradient(w), dtype=np.float64)
        return w - step / math.sqrt(t) * (g_loss + alpha * g_reg)

    return _full_batch_iterations(X, y, loss, n_iterations, update, record)


def fobos(X, y, loss, regularizer, alpha, *, n_iterations, step, record=None):
    """FOBOS (forward-backward splitting): ``w = prox_{eta alpha R}(w - eta g_loss)``.

    Deterministic, full-batch, ``eta = step / sqrt(t)`` (Duchi & Singer 2009), a baseline of
    the Pdprox paper. ``record(t, w)`` is called after every iteration.

    Returns
    -------
    ndarray of shape (n_features,)
    """

    def update(t, w, g_loss):
        eta = step / math.sqrt(t)
        return np.asarray(regularizer.prox(w - eta * g_loss, eta * alpha), dtype=np.float64)

    return _full_batch_iterations(X, y, loss, n_iterations, update, record)
