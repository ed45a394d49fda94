"""Pdprox's state and its iteration builder: iterations as one low-level Dask graph.

:func:`_iterations` runs the iterations eagerly (the in-memory :func:`pdprox`) or adds them to
a :class:`_Graph`, which an epoch of the solver computes in one scheduler call; the power
iteration of :func:`estimate_spectral_norm` is built the same way. Symbols as in the
paper-to-code table of :mod:`daskpd.solvers.pdprox`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.kernels import pdprox as kernels
from daskpd.solvers.pdprox._options import _Spec
from daskpd.solvers.pdprox._tasks import (
    _as_extra,
    _block_iteration,
    _budget_beta_hat,
    _budget_phase_beta,
    _clip,
    _extrapolate,
    _finish,
    _gram_task,
    _normalize,
    _pre,
    _primal_aux,
    _prox,
    _rayleigh,
    _sum_parts,
    _threshold,
    _unwrap,
)


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
    """Block states at ``t = 0``: both dual copies at ``dual`` (default 0).

    ``dual`` has shape (n, DUAL_WIDTH) (:mod:`daskpd.kernels.pdprox`'s dual records).
    """
    bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
    out = []
    for q in range(len(bounds) - 1):
        rows = int(bounds[q + 1] - bounds[q])
        if dual is None:
            start = np.zeros((rows, kernels.DUAL_WIDTH))
        else:
            start = dual[bounds[q] : bounds[q + 1]]
        out.append(
            {
                "dual": np.array(start, dtype=np.float64),
                "dual_sum": np.zeros((rows, kernels.DUAL_WIDTH)),
                "aux": np.array(start, dtype=np.float64),
                "pred": np.zeros(rows),
            }
        )
    return out


class _Graph:
    """One epoch's :class:`~daskpd._graphs.TaskGraph` under construction (numbered tasks)."""

    def __init__(self, data):
        self.graph = TaskGraph("pdprox")
        self.data = data

    def call(self, fn, *args, nout=None):
        name = str(len(self.graph))
        ref = self.graph.task(name, fn, *args)
        if nout is None:
            return ref
        return list(self.graph.parts(ref, nout, name))

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
        """Compute ``outputs`` (references or literal values) in ONE scheduler call."""
        if client is not None:
            futures = self.graph.submit(client, outputs)
            return client.gather(futures)
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
        return self.graph.compute(outputs, scheduler=scheduler)


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
