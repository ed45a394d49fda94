"""Pdprox: the primal-dual prox method for non-smooth losses with non-smooth regularizers.

Solves ``min_w max_{a in Q} (1/n) sum_i f(x_i . w, a_i; y_i) + alpha R(w)`` (Yang, Mahdavi,
Jin, Zhu) where each loss is the maximum of a bilinear function over a small dual domain
(see :mod:`daskpd.kernels.pdprox`) and ``R`` only needs a prox: group lasso, l1/l-inf, trace
norm, L1, L2^2, ... (``regularizer.prox``). The rate is O(1/T) for the averaged iterates.

Translation between the paper and this code (once for the module):

========================  ====================================================================
paper (Pdprox)            code
========================  ====================================================================
``alpha_t``               ``dual`` (shape (n, 2)); contract dual ``z = coef(dual)``
``beta_t``                ``aux`` of Algorithm 1 (the second dual copy)
``u_t``                   ``w_aux`` of Algorithm 2 (the second primal copy)
``lambda``                ``alpha``
``gamma``                 ``tau = sigma = gamma`` (single step); ``tau``, ``sigma`` (two steps)
``c``                     ``lipschitz_sq = kappa ||X||_2^2 / n^2``
``m`` (budget)            ``budget``
Algorithm 1 / 2 / 3       ``algorithm="dual" / "primal" / "dual-simplified"``
double-dual / -primal     ``form="double-dual" / "double-primal"`` (Section 4.4, Appendix C)
========================  ====================================================================

Implementation forms (the digest's corrected Section 4.4 formulas):

- ``dual`` (Algorithm 1), double-dual: ``a_t = P[b_{t-1} + s G_a(w_{t-1})]``,
  ``w_t = prox(w_{t-1} - t G_w(a_t))``, ``b_t = P[b_{t-1} + s G_a(w_t)]``.
- ``dual-simplified`` (Algorithm 3), double-dual: the same ``a_t``, ``w_t`` with the
  unprojected ``b_t = a_t + s (G_a(w_t) - G_a(w_{t-1}))``; double-primal (eq. 22):
  ``a_t = P[a_{t-1} + s G_a(2 w_{t-1} - w_{t-2})]``, ``w_t = prox(w_{t-1} - t G_w(a_t))``.
- ``primal`` (Algorithm 2), double-primal: ``w_t = prox(u_{t-1} - t G_w(a_{t-1}))``,
  ``a_t = P[a_{t-1} + s G_a(w_t)]``, ``u_t = w_t + t (G_w(a_{t-1}) - G_w(a_t))``; double-dual
  (eq. 21): ``w_t = prox(w_{t-1} - t G_w(2 a_{t-1} - a_{t-2}))``.

Dask shape: a map-reduce over row blocks per iteration. A block task computes ``X_b w``, the
dual update of its rows and its partial ``X_b^T coef(dual)``; a tree reduction sums the
partials and one task applies the prox. An epoch chains ``iterations_per_epoch`` iterations
in one low-level graph and is one Dask compute; within it the dual blocks pass from task to
task, and the epoch's result brings them back (7 floats per row) for the next epoch and for
checkpoints. The dual budget
(Section 5.5) needs a global threshold per projection: the block tasks are split at that point
and a threshold task (Lemma 13) sits between them.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import uuid
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from daskpd.kernels import pdprox as kernels
from daskpd.solvers._blocks import block_csr
from daskpd.solvers._driver import Iterate, register_solver

__all__ = [
    "Pdprox",
    "PdproxOptions",
    "PdproxResult",
    "estimate_spectral_norm",
    "fobos",
    "pdprox",
    "pdprox_objective",
    "subgradient_descent",
]

_ALGORITHMS = ("dual", "primal", "dual-simplified")
_VECTORS = ("w", "w_prev", "w_aux", "gw", "w_sum")
_FORMS = ("double-dual", "double-primal")
_LOSSES = {
    "hinge": kernels.PD_HINGE,
    "absolute": kernels.PD_ABSOLUTE,
    "epsilon_insensitive": kernels.PD_EPSILON_INSENSITIVE,
    "generalized_hinge": kernels.PD_GENERALIZED_HINGE,
    "quantile": kernels.PD_QUANTILE,
}


def loss_spec(loss):
    """``(code, params, kappa)`` of a loss for the Pdprox kernels.

    Parameters
    ----------
    loss : Loss or tuple
        A :mod:`daskpd.losses` object (``hinge``, ``absolute``, ``epsilon_insensitive``) or a
        pair ``("generalized_hinge", a)`` / ``("quantile", q)``.

    Returns
    -------
    code : int
    params : ndarray of float64
    kappa : float
        ``||H||^2 <= kappa ||X||^2 / n^2`` for this loss.

    Raises
    ------
    ValueError
        For a loss without a bilinear form here (smooth losses: use another solver).
    """
    if isinstance(loss, tuple):
        name, value = loss[0], float(loss[1])
        if name == "generalized_hinge":
            if not value > 1:
                raise ValueError(f"generalized_hinge needs a > 1, got a={value}")
            return kernels.PD_GENERALIZED_HINGE, np.array([value]), value * value + 1.0
        if name == "quantile":
            if not 0 <= value <= 1:
                raise ValueError(f"quantile needs q in [0, 1], got q={value}")
            return kernels.PD_QUANTILE, np.array([value]), value**2 + (1 - value) ** 2
        raise ValueError(f"unknown Pdprox loss {loss!r}")
    name = getattr(loss, "name", loss)
    if name == "hinge":
        return kernels.PD_HINGE, np.zeros(1), 1.0
    if name == "absolute":
        return kernels.PD_ABSOLUTE, np.zeros(1), 1.0
    if name == "epsilon_insensitive":
        return kernels.PD_EPSILON_INSENSITIVE, np.array([float(loss.params[0])]), 2.0
    raise ValueError(
        f"solver 'pdprox' needs a loss with a bilinear max-form (hinge, absolute, "
        f"epsilon_insensitive, generalized hinge, quantile), got loss={name!r}"
    )


# --------------------------------------------------------------------------------------------
# spectral norm by power iteration (a map-reduce over the blocks)


def _gram_task(data, block, v):
    indptr, indices, values, has_values, _ = block_csr(data, block)
    return kernels.block_gram(indptr, indices, values, has_values, v, v.shape[0])


def _normalize(v):
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _rayleigh(v, xtxv):
    return math.sqrt(max(float(v @ xtxv), 0.0))


def estimate_spectral_norm(data, *, n_iterations=50, random_state=0, client=None):
    """``||X||_2`` by power iteration on ``X^T X``, as ONE Dask compute.

    Each step is a map over row blocks (``X_b^T X_b v``) and a tree reduction; the steps are
    chained in one graph. Power iteration approaches the norm from below, so callers add a
    safety factor.

    Parameters
    ----------
    data : Dataset-like
    n_iterations : int, default=50
    random_state : int, default=0
    client : distributed.Client, optional

    Returns
    -------
    float
    """
    graph = _Graph(data)
    estimate = _spectral_norm_tasks(graph, data, n_iterations, random_state)
    (value,) = graph.run(client, [estimate])
    return float(value)


def _spectral_norm_tasks(graph, data, n_iterations, random_state):
    """Add the power iteration of :func:`estimate_spectral_norm` to ``graph``; its key."""
    n_features = int(data.n_features)
    v = _normalize(np.random.default_rng(random_state).standard_normal(n_features))
    estimate = None
    for _ in range(n_iterations):
        xtxv = graph.reduce([graph.call(_gram_task, data, q, v) for q in range(data.n_row_blocks)])
        estimate = graph.call(_rayleigh, v, xtxv)
        v = graph.call(_normalize, xtxv)
    return estimate


# --------------------------------------------------------------------------------------------
# block primitives (pure: inputs are never modified)


@dataclass(frozen=True)
class _Spec:
    loss_code: int
    loss_params: np.ndarray
    algorithm: str
    form: str
    tau: float
    sigma: float
    n: int
    n_features: int
    budget: float  # 0: no budget constraint


def _pred(data, block, w):
    indptr, indices, values, has_values, _ = block_csr(data, block)
    return kernels.matvec(indptr, indices, values, has_values, w)


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
    return kernels.budget_threshold(np.concatenate([h[:, 0] for h in hats]), budget)


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


# --------------------------------------------------------------------------------------------
# state and the iteration builder


@dataclass(frozen=True)
class _State:
    spec: _Spec
    data: Any
    client: Any
    regularizer: Any
    alpha: float
    t: int
    w: Any  # w_t
    w_prev: Any  # w_{t-1}
    w_aux: Any  # u_t (Algorithm 2, double-primal)
    gw: Any  # n G_w of the last reduce (Algorithm 2)
    w_sum: Any
    blocks: tuple  # per block dict(dual, dual_sum, aux, pred)


def _initial_blocks(data, dual=None):
    """Block states at ``t = 0``: both dual copies at ``dual`` (default 0), shape (n, 2)."""
    bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
    out = []
    for q in range(len(bounds) - 1):
        rows = int(bounds[q + 1] - bounds[q])
        start = np.zeros((rows, 2)) if dual is None else dual[bounds[q] : bounds[q + 1]]
        out.append(
            {
                "dual": np.array(start, dtype=np.float64),
                "dual_sum": np.zeros((rows, 2)),
                "aux": np.array(start, dtype=np.float64),
                "pred": np.zeros(rows),
            }
        )
    return out


def _dual_from_contract(spec, y, z, tol=1e-9):
    """The Pdprox dual (shape (n, 2)) whose ``coef`` is the contract dual ``z``, or None.

    None when some ``z_i`` lies outside its loss's domain (beyond ``tol``: e.g. the dual of
    another loss) or the duals break the budget. Hinge: ``a = -y z``; absolute: ``a = z``;
    epsilon-insensitive: ``(max(z, 0), max(-z, 0))`` (the complementary pair, as at a saddle
    point when ``epsilon > 0``).
    """
    z = np.asarray(z, dtype=np.float64)
    dual = np.zeros((z.shape[0], 2))
    if spec.loss_code == kernels.PD_HINGE:
        if not np.all(np.abs(y) == 1.0):
            return None
        dual[:, 0], lo = -y * z, 0.0
    elif spec.loss_code == kernels.PD_ABSOLUTE:
        dual[:, 0], lo = z, -1.0
    elif spec.loss_code == kernels.PD_EPSILON_INSENSITIVE:
        dual[:, 0], dual[:, 1], lo = np.maximum(z, 0.0), np.maximum(-z, 0.0), 0.0
    else:
        return None
    if not (np.all(dual >= lo - tol) and np.all(dual <= 1.0 + tol)):
        return None
    np.clip(dual, lo, 1.0, out=dual)
    if spec.budget and dual[:, 0].sum() > spec.budget * (1.0 + tol):
        return None
    return dual


class _Graph:
    """A low-level Dask graph under construction (one key per task).

    Building an epoch of many iterations with ``dask.delayed`` costs about a millisecond per
    call (high-level graph merging); a plain dict of tasks costs microseconds.
    """

    def __init__(self, data):
        self.dsk = {}
        self.prefix = f"pdprox-{uuid.uuid4().hex}"
        self.data = data

    def call(self, fn, *args, nout=None):
        key = f"{self.prefix}-{len(self.dsk)}"
        self.dsk[key] = (fn, *args)
        if nout is None:
            return key
        keys = []
        for i in range(nout):
            sub = f"{key}-{i}"
            self.dsk[sub] = (operator.getitem, key, i)
            keys.append(sub)
        return keys

    def reduce(self, parts, fan_in=8):
        parts = list(parts)
        if len(parts) == 1:
            # Still one task: a single part may be a block task's (state, partial) pair.
            return self.call(_sum_parts, parts[0])
        while len(parts) > 1:
            parts = [
                self.call(_sum_parts, *parts[k : k + fan_in]) for k in range(0, len(parts), fan_in)
            ]
        return parts[0]

    def run(self, client, outputs):
        """Compute ``outputs`` (keys or literal values) in ONE scheduler call."""
        keys = [o for o in outputs if isinstance(o, str) and o in self.dsk]
        if client is not None:
            values = client.get(self.dsk, keys, sync=True)
        else:
            # Without a client the run is in-process: a scheduler set in dask.config is used,
            # but not a distributed client that merely happens to be the default.
            scheduler = dask.config.get("scheduler", None)
            if isinstance(scheduler, str):
                scheduler = dask.base.get_scheduler(scheduler=scheduler)
            if scheduler is None:
                # Threads pay off only when a block task has real work: with small blocks
                # the thread hand-offs (~1 ms each on a busy machine) exceed the kernels.
                nnz_per_block = float(self.data.nnz) / max(int(self.data.n_row_blocks), 1)
                scheduler = dask.threaded.get if nnz_per_block > 2e5 else dask.get
            values = scheduler(self.dsk, keys)
        found = dict(zip(keys, values, strict=True))
        return [found[o] if isinstance(o, str) and o in found else o for o in outputs]


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


def _iterations(state, n_iterations, graph=None):
    """Run (``graph=None``) or add to ``graph`` ``n_iterations`` iterations; new state."""
    spec, data = state.spec, state.data

    def call(fn, *args, nout=None):
        if graph is not None:
            return graph.call(fn, *args, nout=nout)
        return fn(*args)

    def reduce(parts):
        if graph is not None:
            return graph.reduce(parts)
        return _sum_parts(*parts)

    blocks = list(state.blocks)
    n_blocks = len(blocks)
    w, w_prev, w_aux, gw, w_sum = state.w, state.w_prev, state.w_aux, state.gw, state.w_sum
    t = state.t
    for _ in range(n_iterations):
        t += 1
        first = t == 1
        primal_first = spec.algorithm == "primal"
        if primal_first:
            base = w_aux if spec.form == "double-primal" else w
            w_new = call(_prox, state.regularizer, state.alpha, base, gw, spec.tau, spec.n)
            point = w_new
        elif spec.algorithm == "dual-simplified" and spec.form == "double-primal":
            point = call(_extrapolate, w, w_prev)
        else:
            point = w
        outs = [None] * n_blocks
        if not spec.budget:
            for q in range(n_blocks):
                outs[q] = call(_block_iteration, data, q, spec, blocks[q], point, first)
        else:
            if spec.algorithm == "dual":
                firsts = [
                    call(_budget_beta_hat, data, q, spec, blocks[q], point, first, nout=2)
                    for q in range(n_blocks)
                ]
                eta = None if first else call(_threshold, spec.budget, *[f[1] for f in firsts])
                staged = [
                    call(_budget_phase_beta, data, q, spec, firsts[q][0], firsts[q][1], eta, nout=2)
                    for q in range(n_blocks)
                ]
                hats = [s[1] for s in staged]
                extras = [call(_as_extra, "aux", s[0]) for s in staged]
            else:
                pres = [
                    call(_pre, data, q, spec, blocks[q], point, first, nout=2)
                    for q in range(n_blocks)
                ]
                hats = [p[0] for p in pres]
                extras = [p[1] for p in pres]
            eta = call(_threshold, spec.budget, *hats)
            for q in range(n_blocks):
                dual = call(_clip, hats[q], eta)
                outs[q] = call(_finish, data, q, spec, blocks[q], dual, extras[q])
        blocks = outs
        gw_new = reduce(outs)
        if primal_first:
            if spec.form == "double-primal":
                w_aux = call(_primal_aux, w_new, gw, gw_new, spec.tau, spec.n)
            w_prev, w = w, w_new
        else:
            w_prev, w = w, call(_prox, state.regularizer, state.alpha, w, gw_new, spec.tau, spec.n)
        gw = gw_new
        w_sum = call(np.add, w_sum, w)
    if graph is None:
        blocks = [_unwrap(b) for b in blocks]
    return dataclasses.replace(
        state, t=t, w=w, w_prev=w_prev, w_aux=w_aux, gw=gw, w_sum=w_sum, blocks=tuple(blocks)
    )


def _as_extra(key, value):
    return {key: value}


# --------------------------------------------------------------------------------------------
# the solver


@dataclass(frozen=True)
class PdproxOptions:
    """Options of :class:`Pdprox`.

    Parameters
    ----------
    algorithm : {"dual", "primal", "dual-simplified"}, default="dual"
        Algorithm 1 (two dual projections), 2 (extra primal copy) or 3 (one projection).
    form : {"double-dual", "double-primal"} or None, default=None
        Which two copies are kept (Section 4.4). None: ``double-dual`` for ``dual`` and
        ``dual-simplified``, ``double-primal`` for ``primal``. Algorithm 1 has only the
        double-dual form.
    iterations_per_epoch : int, default=10
        Iterations chained in one Dask compute.
    step_scale : float, default=1.0
        Factor on ``gamma = 1 / sqrt(2 c)`` (the paper tunes a factor > 1; below ``sqrt(2)``
        the method provably converges).
    step_ratio : float, default=1.0
        ``tau / sigma`` for the two-step variant (``sigma tau = gamma^2 step_scale^2``).
    spectral_norm : float or None, default=None
        ``||X||_2`` if known; None: estimated by power iteration (one compute) times 1.01.
    budget : float or None, default=None
        Dual sparsity constraint ``sum a <= budget`` (hinge only, Section 5.5).
    report : {"last", "average"}, default="last"
        Which iterate the driver evaluates as ``w`` / ``z``; the other is ``w_avg`` /
        ``z_avg`` (the paper's guarantees are for the average).
    """

    algorithm: str = "dual"
    form: str | None = None
    iterations_per_epoch: int = 10
    step_scale: float = 1.0
    step_ratio: float = 1.0
    spectral_norm: float | None = None
    budget: float | None = None
    report: str = "last"

    def __post_init__(self):
        if self.algorithm not in _ALGORITHMS:
            raise ValueError(f"algorithm must be one of {_ALGORITHMS}, got {self.algorithm!r}")
        if self.form is not None and self.form not in _FORMS:
            raise ValueError(f"form must be one of {_FORMS} or None, got {self.form!r}")
        if self.algorithm == "dual" and self.form == "double-primal":
            raise ValueError(
                "algorithm='dual' (Algorithm 1) has no double-primal form; use "
                "algorithm='dual-simplified' with form='double-primal' (eq. 22)"
            )
        if int(self.iterations_per_epoch) < 1:
            raise ValueError(
                f"iterations_per_epoch must be >= 1, got {self.iterations_per_epoch!r}"
            )
        for name in ("step_scale", "step_ratio"):
            value = float(getattr(self, name))
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and > 0, got {value!r}")
        if self.spectral_norm is not None and not float(self.spectral_norm) > 0:
            raise ValueError(f"spectral_norm must be > 0, got {self.spectral_norm!r}")
        if self.budget is not None and not float(self.budget) > 0:
            raise ValueError(f"budget must be > 0, got {self.budget!r}")
        if self.report not in ("last", "average"):
            raise ValueError(f"report must be 'last' or 'average', got {self.report!r}")


def _check_regularizer(regularizer):
    if not callable(getattr(regularizer, "prox", None)):
        raise ValueError(f"solver 'pdprox' needs a regularizer with a prox, got {regularizer!r}")


def _make_spec(loss, data, options, spectral_norm):
    code, params, kappa = loss_spec(loss)
    n = int(data.n_samples)
    lipschitz_sq = kappa * spectral_norm**2 / n**2
    gamma = float(options.step_scale) / math.sqrt(2.0 * lipschitz_sq) if lipschitz_sq > 0 else 1.0
    ratio = float(options.step_ratio)
    form = options.form or ("double-primal" if options.algorithm == "primal" else "double-dual")
    return _Spec(
        loss_code=code,
        loss_params=params,
        algorithm=options.algorithm,
        form=form,
        tau=gamma * math.sqrt(ratio),
        sigma=gamma / math.sqrt(ratio),
        n=n,
        n_features=int(data.n_features),
        budget=float(options.budget or 0.0),
    )


def _new_state(spec, data, client, regularizer, alpha, blocks=None, **vectors):
    zeros = np.zeros(spec.n_features)
    if blocks is None:
        blocks = _initial_blocks(data)
    return _State(
        spec=spec,
        data=data,
        client=client,
        regularizer=regularizer,
        alpha=float(alpha),
        t=int(vectors.get("t", 0)),
        w=vectors.get("w", zeros),
        w_prev=vectors.get("w_prev", zeros),
        w_aux=vectors.get("w_aux", zeros),
        gw=vectors.get("gw", zeros),
        w_sum=vectors.get("w_sum", zeros),
        blocks=tuple(blocks),
    )


def _gather(state):
    return list(state.blocks)


@register_solver
class Pdprox:
    """Primal-dual prox method (Pdprox-dual / Pdprox-primal) over Dask row blocks.

    Registered as ``solver="pdprox"``. Losses: hinge, absolute, epsilon-insensitive (and, in
    the in-memory :func:`pdprox`, generalized hinge and quantile); any regularizer with a
    prox. Steps ``tau = sigma = 1 / sqrt(2 c)`` with ``c`` from ``||X||_2`` (power iteration).

    References
    ----------
    T. Yang, M. Mahdavi, R. Jin, S. Zhu, "An efficient primal dual prox method for non-smooth
    optimization", Machine Learning 98, 2015.
    """

    name = "pdprox"
    Options = PdproxOptions

    def check(self, problem, data, options):
        """Reject losses without a bilinear form, budgets off the hinge, row weights."""
        loss_spec(problem.loss)
        _check_regularizer(problem.regularizer)
        if options.budget is not None and getattr(problem.loss, "name", "") != "hinge":
            raise ValueError("budget (dual sparsity constraint) is defined for the hinge loss only")
        if getattr(problem, "class_weight", None) is not None:
            raise ValueError("solver 'pdprox' does not support class_weight")
        if getattr(data, "has_sample_weight", False):
            raise ValueError("solver 'pdprox' does not support sample weights")
        size = getattr(problem.regularizer, "n_features", None)
        if size is not None and int(size) != int(data.n_features):
            raise ValueError(
                f"regularizer {problem.regularizer.name!r} is defined for {size} features, "
                f"the data has {data.n_features}"
            )

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Zero iterates (the paper's initialization) or the warm start; ``||X||`` by power
        iteration.

        A warm start sets ``w_0`` (and the second primal copy) to its ``w``, and both dual
        copies to its ``z`` when that is a full-length contract dual in the loss's domain
        (else to 0, the usual start). Algorithm 2 then also needs ``X^T coef(a_0)``. The
        power iteration and that reduction are one Dask compute (none when both are
        unneeded).
        """
        cold = _make_spec(problem.loss, data, options, 1.0)
        w0 = dual0 = None
        if warm_start is not None:
            w0 = np.array(warm_start.w, dtype=np.float64, copy=True)
            z0 = getattr(warm_start, "z", None)
            if isinstance(z0, np.ndarray) and z0.shape == (cold.n,):
                dual0 = _dual_from_contract(cold, np.asarray(data.y, dtype=np.float64), z0)
        blocks = _initial_blocks(data, dual0)
        graph = _Graph(data)
        outputs = [options.spectral_norm, np.zeros(cold.n_features)]
        if options.spectral_norm is None:
            outputs[0] = _spectral_norm_tasks(graph, data, 50, 0)
        if dual0 is not None and cold.algorithm == "primal":
            parts = [
                graph.call(_partial, data, q, cold, blocks[q]["dual"]) for q in range(len(blocks))
            ]
            outputs[1] = graph.reduce(parts)
        if graph.dsk:
            outputs = graph.run(client, outputs)
        norm, gw = outputs
        if options.spectral_norm is None:
            norm = 1.01 * float(norm)
        spec = _make_spec(problem.loss, data, options, float(norm))
        vectors = {}
        if w0 is not None:
            vectors = {"w": w0, "w_prev": w0.copy(), "w_aux": w0.copy()}
        state = _new_state(
            spec, data, client, problem.regularizer, problem.alpha, blocks=blocks,
            gw=np.asarray(gw, dtype=np.float64), **vectors,
        )  # fmt: skip
        return {"state": state, "options": options}

    def run_epoch(self, state, epoch):
        """``iterations_per_epoch`` iterations as one Dask compute (a low-level graph)."""
        inner = state["state"]
        graph = _Graph(inner.data)
        lazy = _iterations(inner, int(state["options"].iterations_per_epoch), graph)
        vectors = [lazy.w, lazy.w_prev, lazy.w_aux, lazy.gw, lazy.w_sum]
        values = graph.run(inner.client, [*vectors, *lazy.blocks])
        w, w_prev, w_aux, gw, w_sum = (np.asarray(v, dtype=np.float64) for v in values[:5])
        new = dataclasses.replace(
            lazy,
            w=w,
            w_prev=w_prev,
            w_aux=w_aux,
            gw=gw,
            w_sum=w_sum,
            blocks=tuple(_unwrap(b) for b in values[5:]),
        )
        return {"state": new, "options": state["options"]}

    def iterate(self, state):
        """Last and averaged iterates; ``z = coef(dual)`` per block (the contract dual)."""
        inner, options = state["state"], state["options"]
        spec = inner.spec
        blocks = _gather(inner)
        t = max(inner.t, 1)
        z_last, z_avg = [], []
        for q, block in enumerate(blocks):
            y = block_csr(inner.data, q)[4]
            z_last.append(kernels.block_coef(spec.loss_code, spec.loss_params, y, block["dual"]))
            z_avg.append(
                kernels.block_coef(spec.loss_code, spec.loss_params, y, block["dual_sum"] / t)
            )
        w_avg = np.asarray(inner.w_sum, dtype=np.float64) / t
        w_last = np.asarray(inner.w, dtype=np.float64)
        bounds = np.asarray(inner.data.row_block_bounds, dtype=np.int64)
        if options.report == "average":
            return Iterate(w=w_avg, z=z_avg, z_bounds=bounds, w_avg=w_last, z_avg=z_last)
        return Iterate(w=w_last, z=z_last, z_bounds=bounds, w_avg=w_avg, z_avg=z_avg)

    def state_arrays(self, state):
        """Vectors, counters, steps and the per-block duals concatenated in row order."""
        inner = state["state"]
        blocks = _gather(inner)
        return {
            "t": np.asarray(inner.t, dtype=np.int64),
            "tau": np.asarray(inner.spec.tau),
            "sigma": np.asarray(inner.spec.sigma),
            "w": np.asarray(inner.w),
            "w_prev": np.asarray(inner.w_prev),
            "w_aux": np.asarray(inner.w_aux),
            "gw": np.asarray(inner.gw),
            "w_sum": np.asarray(inner.w_sum),
            **{
                key: np.concatenate([b[key] for b in blocks])
                for key in ("dual", "dual_sum", "aux", "pred")
            },
        }

    def restore(self, problem, data, arrays, *, seed=None, client, options):
        """Rebuild the state saved by :meth:`state_arrays` (steps reused, no re-estimate)."""
        spec = _make_spec(problem.loss, data, options, 1.0)
        spec = dataclasses.replace(spec, tau=float(arrays["tau"]), sigma=float(arrays["sigma"]))
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        blocks = [
            {
                key: np.array(arrays[key][bounds[q] : bounds[q + 1]], dtype=np.float64)
                for key in ("dual", "dual_sum", "aux", "pred")
            }
            for q in range(len(bounds) - 1)
        ]
        inner = _new_state(
            spec, data, client, problem.regularizer, problem.alpha, blocks=blocks,
            t=int(arrays["t"]),
            **{k: np.array(arrays[k], dtype=np.float64) for k in _VECTORS},
        )  # fmt: skip
        return {"state": inner, "options": options}


# --------------------------------------------------------------------------------------------
# in-memory API (tests, benchmarks) and baselines


@dataclass(frozen=True)
class PdproxResult:
    """Outcome of :func:`pdprox`.

    Attributes
    ----------
    w, w_avg : ndarray of shape (n_features,)
        Last and averaged primal iterates.
    dual, dual_avg : ndarray of shape (n_samples, 2)
        Last and averaged Pdprox duals (second column unused for one-component losses).
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
    from daskpd.dataset import MemoryDataset

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


def subgradient_descent(X, y, loss, regularizer, alpha, *, n_iterations, step, record=None):
    """Deterministic subgradient descent ``w -= (step / sqrt(t)) (g_loss + alpha g_R)``.

    Baseline ("gd") of the Pdprox paper; ``regularizer`` must be a group lasso (or have a
    ``subgradient`` method). ``record(t, w)`` is called after every iteration.

    Returns
    -------
    ndarray of shape (n_features,)
    """
    code, params, _ = loss_spec(loss)
    y = np.asarray(y, dtype=np.float64)
    w = np.zeros(X.shape[1])
    for t in range(1, n_iterations + 1):
        if hasattr(regularizer, "groups"):
            g_reg = _group_subgradient(regularizer, w)
        else:
            g_reg = np.asarray(regularizer.subgradient(w), dtype=np.float64)
        w = w - step / math.sqrt(t) * (_loss_subgradient(X, y, code, params, w) + alpha * g_reg)
        if record is not None:
            record(t, w)
    return w


def fobos(X, y, loss, regularizer, alpha, *, n_iterations, step, record=None):
    """FOBOS (forward-backward splitting): ``w = prox_{eta alpha R}(w - eta g_loss)``.

    Deterministic, full-batch, ``eta = step / sqrt(t)`` (Duchi & Singer 2009), a baseline of
    the Pdprox paper. ``record(t, w)`` is called after every iteration.

    Returns
    -------
    ndarray of shape (n_features,)
    """
    code, params, _ = loss_spec(loss)
    y = np.asarray(y, dtype=np.float64)
    w = np.zeros(X.shape[1])
    for t in range(1, n_iterations + 1):
        eta = step / math.sqrt(t)
        v = w - eta * _loss_subgradient(X, y, code, params, w)
        w = np.asarray(regularizer.prox(v, eta * alpha), dtype=np.float64)
        if record is not None:
            record(t, w)
    return w
