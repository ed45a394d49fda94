"""The Pdprox solver: the :class:`Pdprox` class that the driver runs, and its warm start.

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.pdprox`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from daskpd.kernels import pdprox as kernels
from daskpd.solvers.common.blocks import block_csr
from daskpd.solvers.driver.registry import register_solver
from daskpd.solvers.driver.types import BUILTIN_REGULARIZERS, Capabilities, Iterate, Solver
from daskpd.solvers.pdprox._graph import (
    _gather,
    _Graph,
    _initial_blocks,
    _iterations,
    _new_state,
    _spectral_norm_tasks,
)
from daskpd.solvers.pdprox._options import (
    PdproxOptions,
    _check_regularizer,
    _make_spec,
    loss_spec,
)
from daskpd.solvers.pdprox._tasks import _partial, _unwrap

_VECTORS = ("w", "w_prev", "w_aux", "gw", "w_sum")


def _dual_from_contract(spec, y, z, tol=1e-9):
    """The Pdprox dual (shape (n, DUAL_WIDTH)) whose ``coef`` is the contract ``z``, or None.

    None when some ``z_i`` lies outside its loss's domain (beyond ``tol``: e.g. the dual of
    another loss) or the duals break the budget. Hinge: ``a = -y z``; absolute: ``a = z``;
    epsilon-insensitive: ``(max(z, 0), max(-z, 0))`` (the complementary pair, as at a saddle
    point when ``epsilon > 0``).
    """
    z = np.asarray(z, dtype=np.float64)
    dual = np.zeros((z.shape[0], kernels.DUAL_WIDTH))
    a1, a2 = kernels.DUAL_A1, kernels.DUAL_A2
    if spec.loss_code == kernels.PD_HINGE:
        if not np.all(np.abs(y) == 1.0):
            return None
        dual[:, a1], lo = -y * z, 0.0
    elif spec.loss_code == kernels.PD_ABSOLUTE:
        dual[:, a1], lo = z, -1.0
    elif spec.loss_code == kernels.PD_EPSILON_INSENSITIVE:
        dual[:, a1], dual[:, a2], lo = np.maximum(z, 0.0), np.maximum(-z, 0.0), 0.0
    else:
        return None
    if not (np.all(dual >= lo - tol) and np.all(dual <= 1.0 + tol)):
        return None
    np.clip(dual, lo, 1.0, out=dual)
    if spec.budget and dual[:, a1].sum() > spec.budget * (1.0 + tol):
        return None
    return dual


@register_solver
class Pdprox(Solver):
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
    capabilities = Capabilities(
        losses=frozenset({"hinge", "absolute", "epsilon_insensitive"}),
        regularizers=frozenset(BUILTIN_REGULARIZERS),
        loss_rule="a loss with a bilinear max-form",
        regularizer_rule="a regularizer with a prox",
        sample_weight=False,
        class_weight=False,
        notes="a warm start's dual is used when it is a whole dual in the loss's domain",
    )
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
        if len(graph.graph):
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
