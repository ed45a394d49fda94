"""The Newton-CG solver over row groups: the :class:`Tron` class that the driver runs."""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.kernels import tron as kernels
from daskpd.solvers.common.resident import (
    ExactMethod,
    ResidentState,
    ranges,
    read_groups,
    relay,
    run_graph,
    tree,
    value,
)
from daskpd.solvers.common.stream import memory_limits, streams
from daskpd.solvers.driver.registry import register_solver
from daskpd.solvers.driver.types import Capabilities, Iterate
from daskpd.solvers.tron._options import TronOptions, _settings, stream_nnz
from daskpd.solvers.tron._tasks import (
    _cg_direction,
    _cg_scalars,
    _cg_start,
    _cg_step,
    _cg_step_vector,
    _gradient_task,
    _hessian_task,
    _line_scalars,
    _line_task,
    _margins_task,
    _moved_w,
    _point_scalars,
    _point_task,
    _point_w,
    _shares,
    _step_margins_task,
    _sum_numbers,
)

# liblinear's line search (NEWTON::linesearch_and_update): Armijo's constant, halvings
_ARMIJO = 0.01
_MAX_HALVINGS = 20


@dataclasses.dataclass(frozen=True)
class _State(ResidentState):
    """A run's state between epochs: the groups (futures on a client), the accepted point
    on ``w``'s home, and per group the rows' margins, curvatures and dual values."""

    point: Any = None
    scalars: dict | None = None
    margins: tuple = ()
    z: tuple = ()
    curv: tuple = ()
    #: rounds (graphs with one reduction each: d-vectors, or a number for a line search's
    #: further points) and passes over the rows' nonzeros
    rounds: int = 0
    passes: int = 0
    #: whether the last epoch's line search found no decrease (at the optimum, to rounding)
    stalled: bool = False
    #: nonzeros of a chunk of streamed rows (``TronOptions.rows``); 0: the rows are kept
    stream_nnz: int = 0


@register_solver
class Tron(ExactMethod):
    """Newton with conjugate gradients and a line search (``solver="tron"``), data-parallel.

    Supports the logistic, squared hinge, smoothed hinge and squared losses with the L2
    regularizer, and row weights. See
    :mod:`daskpd.solvers.tron` for the schedule and :class:`TronOptions` for the options.
    """

    name = "tron"
    capabilities = Capabilities(
        losses=frozenset({"squared_hinge", "smooth_hinge", "logistic", "squared"}),
        loss_rule="a loss with a (generalized) second derivative",
        regularizers=frozenset({"l2"}),
        regularizer_rule="the l2 regularizer (Newton steps need a smooth objective)",
    )
    Options = TronOptions
    kernel_losses = kernels.TRON_LOSSES
    State = _State

    # -- protocol ---------------------------------------------------------------------------

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Read every group on its owner (or open it, streamed rows: :meth:`read_rows`) and
        compute the gradient at the start point
        (:meth:`Solver.init <daskpd.solvers.driver.protocol.Solver.init>`): a warm start's
        ``w`` (its dual point read off the margins), else 0. The seed is unused: the method
        draws nothing at random."""
        state = self._setup(problem, data, client, options)
        d = int(data.n_features)
        if warm_start is not None and getattr(warm_start, "w", None) is not None:
            w = np.array(warm_start.w, dtype=np.float64)
            if w.shape != (d,):
                raise ValueError(f"warm start w must have shape ({d},), got {w.shape}")
        else:
            w = np.zeros(d)
        return self._start(state, np.ascontiguousarray(w[state.used]))

    def read_rows(self, problem, data, client, options, layout):
        """The groups, kept (read once by each owner) or streamed (``TronOptions.rows``:
        opened, read again by every pass, in chunks of
        :func:`~daskpd.solvers.tron._options.stream_nnz` nonzeros, the smallest the owners'
        limits give), and the state's ``stream_nnz``."""
        group_ranges = ranges(layout.bounds)
        limits = memory_limits(client, options.rows)
        if not streams(options.rows, data, client, layout.owners, group_ranges, limits):
            return super().read_rows(problem, data, client, options, layout)
        chunk = min(
            stream_nnz(
                options, data, limits.get(owner, 0), stop - start, layout.threads,
                layout.used.shape[0],
            )  # fmt: skip
            for owner, (start, stop) in zip(layout.owners, group_ranges, strict=True)
        )
        groups = read_groups(
            data, problem, client, layout.owners, layout.bounds, layout.threads,
            layout.positions, layout.token, "tron", stream_nnz=chunk,
        )  # fmt: skip
        return groups, {"stream_nnz": chunk}

    def settings(self, problem, data, options, layout):
        """The run's constants (:func:`daskpd.solvers.tron._options._settings`)."""
        return _settings(problem, data, options, layout.threads, layout.used.shape[0])

    def run_epoch(self, state, epoch):
        """One Newton step: CG rounds to a direction, a line search along it (one pass for
        ``X s``, then numbers only), and the gradient round at the new point.

        Parameters
        ----------
        state
        epoch : int

        Returns
        -------
        state
        """
        return self._newton_step(state)

    def iterate(self, state) -> Iterate:
        """The point ``w`` (gathered), its dual point ``z`` (per group, where it is) and
        their exact primal and dual."""
        scalars = state.scalars
        if state.client is None:
            w = state.point.w
        else:
            w = state.client.submit(_point_w, state.point, workers=[state.home], pure=False)
            w = value(w, state.owners)
        full = np.zeros(state.settings.n_features)
        full[state.used] = w
        return Iterate(
            w=full,
            z=list(state.z),
            z_bounds=np.asarray(state.bounds, dtype=np.int64),
            primal=scalars["primal"],
            dual=scalars["dual"],
        )

    def saved_rows(self, state):
        """The margins ``X w``: the run moves them with each step, so computing them again
        from ``w`` would round differently."""
        return "margins", list(state.margins)

    def restore(self, problem, data, arrays, *, seed, client, options):
        """The state saved by :meth:`state_arrays`: the run continues on the same bits."""
        state = self._setup(problem, data, client, options)
        state = dataclasses.replace(
            state, rounds=int(arrays["rounds"]) - 1, passes=int(arrays["passes"]) - 1
        )
        w = np.ascontiguousarray(np.asarray(arrays["w"], dtype=np.float64)[state.used])
        # its gradient round is the one the saved state ended with (counted there)
        return self._start(state, w, margins=np.asarray(arrays["margins"], dtype=np.float64))


    # -- the rounds ---------------------------------------------------------------------------

    def _start(self, state, w, margins=None):
        """The state at ``w``: its margins (given, no pass when ``w = 0``, else one), then a
        gradient round."""
        client = state.client
        if client is not None:
            w_ref = client.scatter([w], workers=[state.home], hash=False)[0]
        else:
            w_ref = w
        graph = TaskGraph("tron-start", state.token)
        if margins is not None:
            pieces = [margins[start:stop] for start, stop in ranges(state.bounds)]
            if client is not None:
                pieces = [
                    client.scatter([piece], workers=[state.owners[k]], hash=False)[0]
                    for k, piece in enumerate(pieces)
                ]
            return self._gradient(state, graph, w_ref, pieces, None, 0.0)
        if np.any(w):
            margins = [
                graph.task(f"margins-{k}", _margins_task, group, w_ref, worker=state.owners[k])
                for k, group in enumerate(state.groups)
            ]
            passes = 1
        else:
            margins = [
                graph.task(f"margins-{k}", np.zeros, stop - start, worker=state.owners[k])
                for k, (start, stop) in enumerate(ranges(state.bounds))
            ]
            passes = 0
        state = dataclasses.replace(state, passes=state.passes + passes)
        return self._gradient(state, graph, w_ref, margins, None, 0.0)

    def _gradient(self, state, graph, w, margins, step_margins, step_length):
        """Add the gradient round at ``w`` (margins ``u + t X s``) to ``graph``, run it, and
        return the state there. One round, one pass."""
        refs = _gradient_round(graph, state, w, margins, step_margins, step_length)
        return _at_point(state, _run(state, graph, refs))

    def _newton_step(self, state):
        """CG to a direction ``s``, a backtracking line search, the gradient round at
        ``w + t s``."""
        settings = state.settings
        graph = TaskGraph("tron-cg", f"{state.token}-{state.rounds}")
        cg = graph.task("start", _cg_start, state.point, settings, worker=state.home)
        rounds = state.rounds
        while True:
            direction = graph.task("direction", _cg_direction, cg, worker=state.home)
            products = _hessian_round(graph, state, direction)
            cg = graph.task(
                "step", _cg_step, cg, products, state.point, settings, worker=state.home
            )
            done = graph.task("done", _cg_scalars, cg, worker=state.home)
            # the previous CG state is held until this round is done (a graph sent does not
            # hold the futures it reads)
            new_cg, done = _run(state, graph, [cg, done])
            rounds += 1
            done = value(done, state.owners)
            cg = new_cg
            if done["done"]:
                break
            graph = TaskGraph("tron-cg", f"{state.token}-{rounds}")
        passes = state.passes + (rounds - state.rounds)

        # the line search: X s once (a pass) and, in the same round, the loss and the
        # gradient at t = 1 (liblinear's steps nearly always take it); a shorter step length
        # is a round of numbers only, then a gradient round of its own
        n, alpha = settings.n_samples, settings.alpha
        graph = TaskGraph("tron-line", f"{state.token}-{rounds}")
        step = graph.task("s", _cg_step_vector, cg, worker=state.home)
        steps = relay(graph, "s", step, state.owners, state.home)
        step_margins = [
            graph.task(f"xs-{k}", _step_margins_task, group, steps[k], worker=state.owners[k])
            for k, group in enumerate(state.groups)
        ]
        quadratic = graph.task("quadratic", _line_scalars, state.point, cg, worker=state.home)
        total = _line_round(graph, state, step_margins, 1.0)
        w = graph.task("w", _moved_w, state.point, cg, 1.0, worker=state.home)
        refs = _gradient_round(graph, state, w, state.margins, step_margins, 1.0)
        grid = len(state.groups)
        outputs = _run(state, graph, [*step_margins, quadratic, total, *refs])
        step_margins, (quadratic, total), refs = (
            outputs[:grid],
            outputs[grid : grid + 2],
            outputs[grid + 2 :],
        )
        quadratic = value(quadratic, state.owners)
        # the X s pass; the round and the gradient's pass are counted with the point
        passes += 1
        f = state.scalars["inner_primal"]

        def accepted(step_length, loss_sum):
            f_new = loss_sum / n + 0.5 * alpha * (
                quadratic["w_w"]
                + step_length * (2.0 * quadratic["w_s"] + step_length * quadratic["s_s"])
            )
            return f_new - f <= _ARMIJO * step_length * quadratic["g_s"]

        moved = dataclasses.replace(state, rounds=rounds, passes=passes, stalled=False)
        if accepted(1.0, value(total, state.owners)):
            return _at_point(moved, refs)
        # t = 1 refused: its round and its gradient pass were spent
        rounds, passes = rounds + 1, passes + 1
        step_length = 1.0
        for _ in range(_MAX_HALVINGS):
            step_length *= 0.5
            graph = TaskGraph("tron-line", f"{state.token}-{rounds}")
            (total,) = _run(state, graph, [_line_round(graph, state, step_margins, step_length)])
            rounds += 1
            if accepted(step_length, value(total, state.owners)):
                break
        else:
            return dataclasses.replace(state, rounds=rounds, passes=passes, stalled=True)
        graph = TaskGraph("tron-gradient", f"{state.token}-{rounds}")
        w = graph.task("w", _moved_w, state.point, cg, step_length, worker=state.home)
        moved = dataclasses.replace(moved, rounds=rounds, passes=passes)
        return self._gradient(moved, graph, w, state.margins, step_margins, step_length)


# ------------------------------------------------------------------------------------------------
# graphs


def _gradient_round(graph, state, w, margins, step_margins, step_length):
    """Add a gradient round at ``w`` (margins ``u + t X s``, or ``u`` without a step): each
    group's share on its owner, their sum up a tree, the point on the home. Returns the
    references of the point, its scalars, and each group's ``z``, curvatures and margins
    (which stay on the owners)."""
    parts = [
        graph.task(
            f"grad-{k}",
            _gradient_task,
            group,
            margins[k],
            None if step_margins is None else step_margins[k],
            step_length,
            state.settings,
            worker=state.owners[k],
        )  # fmt: skip
        for k, group in enumerate(state.groups)
    ]
    shares = [
        graph.task(f"shares-{k}", _shares, part, worker=state.owners[k])
        for k, part in enumerate(parts)
    ]
    total = tree(graph, "grad-sum", shares, state.owners)
    point = graph.task("point", _point_task, w, total, state.settings, worker=state.home)
    scalars = graph.task("scalars", _point_scalars, point, worker=state.home)
    kept = [
        graph.task(f"{name}-{k}", operator.getitem, part, index, worker=state.owners[k])
        for name, index in (("z", 2), ("curv", 3), ("u", 4))
        for k, part in enumerate(parts)
    ]
    return [point, scalars, *kept]


def _at_point(state, outputs):
    """The state at a gradient round's outputs (one round, one pass more)."""
    point, scalars, *kept = outputs
    grid = len(state.groups)
    return dataclasses.replace(
        state,
        point=point,
        scalars=value(scalars, state.owners),
        z=tuple(kept[:grid]),
        curv=tuple(kept[grid : 2 * grid]),
        margins=tuple(kept[2 * grid :]),
        rounds=state.rounds + 1,
        passes=state.passes + 1,
    )


def _line_round(graph, state, step_margins, step_length):
    """Add the loss sum at ``u + t X s`` over the groups (numbers: no pass)."""
    losses = [
        graph.task(
            f"loss-{k}",
            _line_task,
            group,
            state.margins[k],
            step_margins[k],
            step_length,
            state.settings,
            worker=state.owners[k],
        )  # fmt: skip
        for k, group in enumerate(state.groups)
    ]
    return tree(graph, "loss-sum", losses, state.owners, _sum_numbers)


def _hessian_round(graph, state, direction):
    """Add a Hessian-vector round: each group's share, summed up a tree."""
    directions = relay(graph, "direction", direction, state.owners, state.home)
    parts = [
        graph.task(
            f"hv-{k}", _hessian_task, group, state.curv[k], directions[k], worker=state.owners[k]
        )
        for k, group in enumerate(state.groups)
    ]
    return tree(graph, "hv-sum", parts, state.owners)


def _run(state, graph, outputs):
    """Run ``graph`` on the run's client (or in-process)."""
    return run_graph(state.client, len(state.groups), graph, outputs)
