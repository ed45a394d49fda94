"""GSFW's Dask tasks: the block task of the chained pass, the refresh and start tasks.

Every task is pure (it copies what it mutates). Symbols as in the paper-to-code table of
:mod:`daskpd.solvers.gsfw`.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import numpy as np

from daskpd.kernels import gsfw as kernels
from daskpd.solvers.common.blocks import block_csr


def _sum_arrays(*arrays):
    out = np.array(arrays[0], dtype=np.float64, copy=True)
    for a in arrays[1:]:
        out += a
    return out


def tree_sum(graph, name, parts, fan_in=8):
    """Sum arrays of ``graph`` with a tree of ``fan_in``-ary tasks (a map-reduce's reduce).

    Every group is a task, a group of one too: the sum is a fresh float64 array.
    """
    return graph.tree(name, _sum_arrays, parts, fan_in=fan_in, lone_task=True)


def compute(graph, client, outputs):
    """Run ``graph`` once on ``client`` (futures) or in process (values); a list of ``outputs``."""
    if client is not None:
        return graph.submit(client, outputs)
    return graph.compute(outputs, scheduler=_in_process_scheduler())


def _in_process_scheduler():
    # Without a client the run is in-process: a scheduler set in dask.config is used, but not
    # a distributed client that merely happens to be the default one.
    return dask.config.get("scheduler", None) or "threads"


@dataclass(frozen=True)
class _Spec:
    """What the kernels need about the problem (picklable, small)."""

    loss_code: int
    loss_params: np.ndarray
    lmo_code: int  # kernels.LMO_* ; LMO_DENSE for the Python generalized LMO
    lmo_params: np.ndarray
    strong: bool
    sigma: float
    n: int
    n_features: int
    batch_size: int
    m: float


def _draw_batches(seed, n_rows, batch_size, n_iterations):
    rng = np.random.default_rng(seed)
    out = np.empty((n_iterations, batch_size), dtype=np.int64)
    for k in range(n_iterations):
        out[k] = rng.choice(n_rows, size=batch_size, replace=False)
    return out


def _gsfw_block_task(carry, block_state, data, block, seed, n_iterations, spec, lmo_fn):
    """Run the iterations of one block on copies of the carry and the block state."""
    rows = kernels.BlockRows(*block_csr(data, block))
    primal = kernels.PrimalCarry(carry["d"].copy(), carry["w_acc"].copy(), carry["w_bar"].copy())
    it = int(carry["it"])
    state = kernels.RowState(
        block_state["s"].copy(), block_state["z_acc"].copy(), block_state["t_last"].copy()
    )
    n_rows = state.s.shape[0]
    b = min(spec.batch_size, n_rows)
    batches = _draw_batches(seed, n_rows, b, n_iterations)
    if spec.lmo_code == kernels.LMO_DENSE:
        for k in range(n_iterations):
            direction = np.ascontiguousarray(lmo_fn(primal.d), dtype=np.float64).ravel()
            kernels.gsfw_apply_direction(
                rows, spec.loss_code, spec.loss_params, batches[k], direction, spec.n, spec.m,
                it + k, state, primal.d, primal.w_bar,
            )  # fmt: skip
    else:
        schedule = kernels.Schedule(spec.n, spec.m, it, spec.strong, spec.sigma)
        kernels.gsfw_iterations(
            rows, spec.loss_code, spec.loss_params, batches, spec.lmo_code, spec.lmo_params,
            schedule, primal, state,
        )  # fmt: skip
    new_carry = {
        "d": primal.d,
        "w_acc": primal.w_acc,
        "w_bar": primal.w_bar,
        "it": it + n_iterations,
        "grads": int(carry["grads"]) + b * n_iterations,
    }
    return new_carry, state._asdict()


def _refresh_task(data, block, block_state, spec):
    indptr, indices, values, has_values, y = block_csr(data, block)
    return kernels.block_xt_derivative(
        indptr, indices, values, has_values, y, spec.loss_code, spec.loss_params,
        block_state["s"], spec.n_features, 1.0 / spec.n,
    )  # fmt: skip


def _start_task(data, block, w, spec):
    """Warm start of one block: ``s = X_b w`` and its partial ``(1/n) X_b^T loss'(s)``."""
    indptr, indices, values, has_values, y = block_csr(data, block)
    s = kernels.block_matvec(indptr, indices, values, has_values, w)
    state = {"s": s, "z_acc": np.zeros(s.shape[0]), "t_last": np.zeros(s.shape[0], np.int64)}
    partial = kernels.block_xt_derivative(
        indptr, indices, values, has_values, y, spec.loss_code, spec.loss_params, s,
        spec.n_features, 1.0 / spec.n,
    )  # fmt: skip
    return state, partial


def _with_d(carry, d, n):
    return {**carry, "d": d, "grads": int(carry["grads"]) + n}


class _DenseLMO:
    """Picklable ``d -> argmin_v d . v + alpha R(v)`` through ``regularizer.lmo``."""

    def __init__(self, regularizer, alpha):
        self.regularizer = regularizer
        self.alpha = alpha

    def __call__(self, d):
        return self.regularizer.lmo(d / self.alpha)
