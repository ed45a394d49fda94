"""The GSFW solver: problem translation, state, and the :class:`GSFW` class of the driver.

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.gsfw`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.kernels import gsfw as kernels
from daskpd.solvers.common.blocks import block_csr
from daskpd.solvers.driver.registry import register_solver
from daskpd.solvers.driver.seeds import block_seeds, epoch_seed
from daskpd.solvers.driver.types import Capabilities, Iterate, Solver
from daskpd.solvers.gsfw._options import GSFWOptions
from daskpd.solvers.gsfw._tasks import (
    _DenseLMO,
    _gsfw_block_task,
    _refresh_task,
    _Spec,
    _start_task,
    _with_d,
    compute,
    tree_sum,
)


def _regularizer_kind(problem):
    """Classify the regularizer: ('l1_ball', radius) | ('l1', None) | ('l2', None) |
    ('lmo', None) | (None, reason)."""
    reg = problem.regularizer
    name = str(getattr(reg, "name", type(reg).__name__)).lower()
    radius = getattr(reg, "radius", None)
    if name in ("l1_ball", "l1ball") and radius is not None:
        return "l1_ball", float(radius)
    if getattr(reg, "separable", False):
        from daskpd.kernels import scalar

        if reg.code == scalar.L1:
            return "l1", None
        if reg.code == scalar.L2:
            return "l2", None
        return None, f"separable regularizer {name!r} has no GSFW LMO (use l1, l2 or a ball)"
    if callable(getattr(reg, "lmo", None)):
        return "lmo", None
    return None, f"regularizer {name!r} has no linear minimization oracle (lmo)"


def _zero_loss(problem, data):
    y = np.asarray(data.y, dtype=np.float64)
    return float(np.mean(problem.loss.value(np.zeros_like(y), y)))


@dataclass(frozen=True)
class _State:
    spec: _Spec
    data: Any
    client: Any
    seed: Any
    carry: dict
    blocks: tuple  # per block: dict(s, z_acc, t_last), or futures of them
    block_iterations: tuple
    epoch: int
    lmo_fn: Any
    options: GSFWOptions
    start_iteration: int = 0  # iterations credited to a warm start (not counted as work)


def _make_state(problem, spec, data, carry, blocks, **fields):
    """A run's state, started or restored: with the Python LMO of the regularizer when the
    kernels have none for it (``spec.lmo_code`` is ``LMO_DENSE``).

    ``fields`` are the remaining :class:`_State` fields (seed, client, options,
    block_iterations, epoch, start_iteration).
    """
    lmo_fn = None
    if spec.lmo_code == kernels.LMO_DENSE:
        lmo_fn = _DenseLMO(problem.regularizer, float(problem.alpha))
    return _State(spec=spec, data=data, carry=carry, blocks=tuple(blocks), lmo_fn=lmo_fn, **fields)


@register_solver
class GSFW(Solver):
    """Generalized stochastic Frank-Wolfe with stochastic substitute gradient (Algorithm 1).

    Registered as ``solver="gsfw"``. The reported ``w`` is the weighted average
    ``beta_bar`` of Prop. 3.6; ``z`` is the dual average ``w_bar`` of Theorem 3.1 (general
    ``R``) or the last ``loss'(s)`` (strongly convex ``R``, Theorem 3.2), so the driver's
    duality gap is the paper's certificate.

    References
    ----------
    H. Lu and R. M. Freund, "Generalized stochastic Frank-Wolfe algorithm with stochastic
    'substitute' gradient for structured convex optimization", Math. Programming, 2020.
    """

    name = "gsfw"
    capabilities = Capabilities(
        losses=frozenset({"smooth_hinge", "squared_hinge", "logistic", "squared", "huber"}),
        regularizers=frozenset({"l2", "l1", "l1_ball", "l2_ball", "box"}),
        loss_rule="a smooth loss",
        regularizer_rule="a regularizer with a linear minimization oracle (or l1, l2)",
        sample_weight=False,
        class_weight=False,
        notes="a warm start must lie in the constraint set",
    )
    Options = GSFWOptions

    def check(self, problem, data, options):
        """Reject non-smooth losses, unbounded regularizers and row weights (no Dask work)."""
        loss = problem.loss
        if not math.isfinite(float(getattr(loss, "smoothness", math.inf))):
            raise ValueError(
                f"solver 'gsfw' needs a smooth loss (logistic, squared, ...), got "
                f"loss={getattr(loss, 'name', loss)!r}"
            )
        kind, info = _regularizer_kind(problem)
        if kind is None:
            raise ValueError(f"solver 'gsfw': {info}")
        if kind == "lmo":
            try:
                problem.regularizer.lmo(np.zeros(int(data.n_features)))
            except ValueError as exc:
                raise ValueError(f"solver 'gsfw': {exc}") from None
        if kind in ("l1", "l2", "lmo") and not problem.alpha > 0:
            raise ValueError(
                f"solver 'gsfw' with regularizer {kind!r} needs alpha > 0, got {problem.alpha}"
            )
        if getattr(problem, "class_weight", None) is not None:
            raise ValueError("solver 'gsfw' does not support class_weight")
        if getattr(data, "has_sample_weight", False):
            raise ValueError("solver 'gsfw' does not support sample weights")
        if options.batch_size is not None and int(options.batch_size) > data.n_samples:
            raise ValueError(
                f"batch_size={options.batch_size} exceeds the {data.n_samples} rows of the data"
            )

    def _spec(self, problem, data, options):
        n, n_features = int(data.n_samples), int(data.n_features)
        b = options.batch_size
        b = max(1, int(round(0.01 * n))) if b is None else int(b)
        m = n / b
        kind, radius = _regularizer_kind(problem)
        alpha = float(problem.alpha)
        strong = False
        sigma = 1.0
        lmo_params = np.zeros(2)
        if kind == "l1_ball":
            lmo_code, lmo_params = kernels.LMO_L1_BALL, np.array([radius])
        elif kind == "l1":
            lmo_code = kernels.LMO_L1_PENALTY_BALL
            lmo_params = np.array([alpha, max(_zero_loss(problem, data), 1e-300) / alpha])
        elif kind == "l2":
            lmo_code = kernels.LMO_L2SQ_BALL
            p0 = max(_zero_loss(problem, data), 1e-300)
            lmo_params = np.array([alpha, math.sqrt(2.0 * p0 / alpha)])
            strong = True
            gamma = float(problem.loss.smoothness)
            max_norm_sq = float(np.max(np.asarray(data.row_norm_sq, dtype=np.float64)))
            # Prop. 3.7 with n replaced by m = n / b (Remark 3.4).
            sigma = gamma * max_norm_sq / (m * alpha) + 1.0
        else:
            lmo_code = kernels.LMO_DENSE
        return _Spec(
            loss_code=int(problem.loss.code),
            loss_params=np.asarray(problem.loss.params, dtype=np.float64),
            lmo_code=int(lmo_code),
            lmo_params=np.asarray(lmo_params, dtype=np.float64),
            strong=strong,
            sigma=float(sigma),
            n=n,
            n_features=n_features,
            batch_size=b,
            m=float(m),
        )

    def _block_iterations(self, data, spec, options):
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        sizes = np.diff(bounds)
        if options.iterations_per_epoch is None:
            return tuple(int(math.ceil(s / min(spec.batch_size, s))) if s else 0 for s in sizes)
        total = int(options.iterations_per_epoch)
        return tuple(max(1, int(round(total * s / spec.n))) if s else 0 for s in sizes)

    def _feasible_start(self, problem, spec, w):
        """The warm start as a point of ``dom R`` the kernels can start from.

        Constraint sets of the problem (the L1 ball, any regularizer with an LMO) are the
        user's: a start outside them is an error. The balls added to the ``l1`` / ``l2``
        penalties (Example 1.1) are the method's own and hold every point better than
        ``w = 0``, so a start outside them is projected onto them.
        """
        w = np.array(w, dtype=np.float64, copy=True)
        kind, _ = _regularizer_kind(problem)
        if kind == "l1":
            from daskpd.regularizers import project_l1_ball

            return np.asarray(project_l1_ball(w, float(spec.lmo_params[1])), dtype=np.float64)
        if kind == "l2":
            norm, radius = float(np.linalg.norm(w)), float(spec.lmo_params[1])
            return w * (radius / norm) if norm > radius else w
        if not math.isfinite(float(problem.regularizer.value(w))):
            name = getattr(problem.regularizer, "name", type(problem.regularizer).__name__)
            if kind == "l1_ball":
                where = (
                    f"||warm_start||_1 = {np.abs(w).sum():.6g} exceeds the L1-ball radius "
                    f"{float(spec.lmo_params[0]):.6g}"
                )
            else:
                where = f"it lies outside the set of the regularizer {name!r}"
            raise ValueError(
                f"solver 'gsfw' needs a feasible warm_start: {where} (Frank-Wolfe iterates "
                "stay in the constraint set; project the start onto it or start from zero)"
            )
        return w

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """``s = X w^0``, ``d = (1/n) X^T loss'(s)`` (one compute: n sample gradients).

        ``w^0 = 0`` (the paper's start), or the warm start's ``w`` (checked or projected by
        :meth:`_feasible_start`). A warm start counts as the average of one epoch of
        iterations: the step sizes start at ``i0`` = the iterations of one epoch and the
        averages (``w_bar`` and the dual ``z_bar``) hold ``w^0`` and ``loss'(X w^0)`` with
        the weight of iterations ``0 .. i0 - 1``. Restarting at ``i = 0`` instead gives
        ``w^0`` weight 0 (``alpha_0 = 1``) and overwrites ``s`` (``eta_0 ~ 1``), which throws
        the start away within an epoch. The dual of the start is not used: ``s = X w^0`` is
        GSFW's dual state.
        """
        spec = self._spec(problem, data, options)
        block_iterations = self._block_iterations(data, spec, options)
        n_blocks = int(data.n_row_blocks)
        w0 = None
        if warm_start is not None:
            w0 = self._feasible_start(problem, spec, warm_start.w)
        if w0 is None:
            bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
            blocks = [
                {
                    "s": np.zeros(int(bounds[q + 1] - bounds[q])),
                    "z_acc": np.zeros(int(bounds[q + 1] - bounds[q])),
                    "t_last": np.zeros(int(bounds[q + 1] - bounds[q]), dtype=np.int64),
                }
                for q in range(n_blocks)
            ]
            graph = TaskGraph("gsfw-start")
            parts = [
                graph.task(f"refresh-{q}", _refresh_task, data, q, blocks[q], spec)
                for q in range(n_blocks)
            ]
            (d,) = compute(graph, client, [tree_sum(graph, "d", parts)])
            if client is not None:
                d = d.result()
            if client is not None:
                blocks = client.scatter(blocks)
            start_iteration = 0
        else:
            graph = TaskGraph("gsfw-start")
            tasks = [
                graph.parts(
                    graph.task(f"start-{q}", _start_task, data, q, w0, spec), 2, f"start-{q}"
                )
                for q in range(n_blocks)
            ]
            lazy_d = tree_sum(graph, "d", [task[1] for task in tasks])
            lazy_blocks = [task[0] for task in tasks]
            # On a client the block states stay on the workers, as after an epoch.
            d, *blocks = compute(graph, client, [lazy_d, *lazy_blocks])
            if client is not None:
                d = d.result()
            start_iteration = max(1, sum(block_iterations))
        carry = {
            "d": np.array(d, dtype=np.float64),
            "w_acc": np.zeros(spec.n_features),
            "w_bar": np.zeros(spec.n_features),
            "it": start_iteration,
            "grads": spec.n,
        }
        if w0 is not None:
            carry["w_acc"] = kernels.weight_sum(spec.m, 0, start_iteration - 1) * w0
            carry["w_bar"] = w0.copy()
        return _make_state(
            problem, spec, data, carry, blocks, seed=seed, client=client, options=options,
            block_iterations=block_iterations, epoch=0, start_iteration=start_iteration,
        )  # fmt: skip

    def run_epoch(self, state, epoch):
        """One chained pass over the shuffled row blocks, as one Dask compute."""
        es = epoch_seed(state.seed, epoch)
        n_blocks = len(state.blocks)
        order = np.random.default_rng(es).permutation(n_blocks)
        seeds = block_seeds(es, n_blocks)
        graph = TaskGraph(f"gsfw-e{epoch}")
        carry = graph.data("carry", state.carry)
        blocks = list(state.blocks)
        refresh = state.options.refresh_every
        if refresh and epoch % refresh == 0:
            parts = [
                graph.task(f"refresh-{q}", _refresh_task, state.data, q, blocks[q], state.spec)
                for q in range(n_blocks)
            ]
            carry = graph.task("with-d", _with_d, carry, tree_sum(graph, "d", parts), state.spec.n)
        for q in order:
            q = int(q)
            if state.block_iterations[q] == 0:
                continue
            out = graph.task(
                f"block-{q}", _gsfw_block_task, carry, blocks[q], state.data, q, seeds[q],
                state.block_iterations[q], state.spec, state.lmo_fn,
            )  # fmt: skip
            carry, blocks[q] = graph.parts(out, 2, f"block-{q}")
        carry_value, *values = compute(graph, state.client, [carry, *blocks])
        if state.client is not None:
            carry_value = carry_value.result()
        new_blocks = tuple(values)
        return dataclasses.replace(state, carry=carry_value, blocks=new_blocks, epoch=epoch)

    # ---------------------------------------------------------------------------------------

    def _gather_blocks(self, state):
        if state.client is not None and any(hasattr(b, "key") for b in state.blocks):
            return list(state.client.gather(list(state.blocks)))
        return list(state.blocks)

    def averaged_w(self, state):
        """``beta_bar`` after the last iteration (``w_acc / Gamma_k`` in vertex mode)."""
        spec, carry = state.spec, state.carry
        k = int(carry["it"])
        if k == 0:
            return np.zeros(spec.n_features)
        if spec.lmo_code == kernels.LMO_L1_BALL and not spec.strong:
            return carry["w_acc"] / kernels.weight_sum(spec.m, 0, k - 1)
        return np.array(carry["w_bar"], dtype=np.float64)

    def dual_blocks(self, state):
        """Per-block dual certificate: ``z_bar`` (Theorem 3.1) or last ``loss'(s)`` (3.2)."""
        from daskpd.kernels.scalar import loss_derivative_array

        spec = state.spec
        k = int(state.carry["it"])
        out = []
        for q, block in enumerate(self._gather_blocks(state)):
            y = block_csr(state.data, q)[4]
            if spec.strong or k == 0:
                z = np.empty(block["s"].shape[0])
                loss_derivative_array(spec.loss_code, spec.loss_params, block["s"], y, z)
            else:
                z = kernels.flush_dual_average(
                    spec.loss_code, spec.loss_params, y, block["s"], block["z_acc"],
                    block["t_last"], spec.m, k - 1,
                )  # fmt: skip
            out.append(z)
        return out

    def iterate(self, state):
        """``w = beta_bar``, ``z`` = the dual certificate, per row block."""
        w = self.averaged_w(state)
        return Iterate(
            w=w,
            z=self.dual_blocks(state),
            z_bounds=np.asarray(state.data.row_block_bounds, dtype=np.int64),
            w_avg=w,
        )

    def counters(self, state):
        """Work so far, counted as in Sec. 2.5 of the paper.

        Returns
        -------
        dict
            ``iterations`` (= LMO calls) and ``sample_gradients`` (``n`` for ``d^0``, ``b``
            per iteration, ``n`` per exact refresh of ``d``). The iterations credited to a
            warm start are not counted.
        """
        k = int(state.carry["it"]) - state.start_iteration
        return {"iterations": k, "lmo_calls": k, "sample_gradients": int(state.carry["grads"])}

    def state_arrays(self, state):
        """Carry and block states as flat arrays (blocks concatenated in row order)."""
        blocks = self._gather_blocks(state)
        return {
            "d": np.asarray(state.carry["d"]),
            "w_acc": np.asarray(state.carry["w_acc"]),
            "w_bar": np.asarray(state.carry["w_bar"]),
            "it": np.asarray(int(state.carry["it"]), dtype=np.int64),
            "grads": np.asarray(int(state.carry["grads"]), dtype=np.int64),
            "epoch": np.asarray(state.epoch, dtype=np.int64),
            "start_iteration": np.asarray(state.start_iteration, dtype=np.int64),
            "s": np.concatenate([b["s"] for b in blocks]),
            "z_acc": np.concatenate([b["z_acc"] for b in blocks]),
            "t_last": np.concatenate([b["t_last"] for b in blocks]),
        }

    def restore(self, problem, data, arrays, *, seed, client, options):
        """Rebuild the state saved by :meth:`state_arrays`."""
        spec = self._spec(problem, data, options)
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        blocks = [
            {
                "s": np.array(arrays["s"][bounds[q] : bounds[q + 1]], dtype=np.float64),
                "z_acc": np.array(arrays["z_acc"][bounds[q] : bounds[q + 1]], dtype=np.float64),
                "t_last": np.array(arrays["t_last"][bounds[q] : bounds[q + 1]], dtype=np.int64),
            }
            for q in range(len(bounds) - 1)
        ]
        if client is not None:
            blocks = client.scatter(blocks)
        carry = {
            "d": np.array(arrays["d"], dtype=np.float64),
            "w_acc": np.array(arrays["w_acc"], dtype=np.float64),
            "w_bar": np.array(arrays["w_bar"], dtype=np.float64),
            "it": int(arrays["it"]),
            "grads": int(arrays["grads"]),
        }
        return _make_state(
            problem, spec, data, carry, blocks, seed=seed, client=client, options=options,
            block_iterations=self._block_iterations(data, spec, options),
            epoch=int(arrays["epoch"]), start_iteration=int(arrays.get("start_iteration", 0)),
        )  # fmt: skip
