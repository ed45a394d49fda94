"""The projected Newton method on the hinge loss's dual over row groups: the
:class:`DualNewton` class that the driver runs."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.kernels import scalar
from daskpd.solvers.common.resident import (
    ExactMethod,
    ResidentState,
    bundles,
    ranges,
    relay,
    root_inputs,
    run_graph,
    value,
)
from daskpd.solvers.driver.registry import register_solver
from daskpd.solvers.driver.types import Capabilities, Iterate
from daskpd.solvers.dual_newton._options import DualNewtonOptions, _Settings
from daskpd.solvers.dual_newton._tasks import (
    MAX_HALVINGS,
    _add_totals,
    _bundle_a,
    _bundle_free,
    _bundle_image,
    _bundle_local_pass,
    _bundle_moves,
    _bundle_restore,
    _bundle_start,
    _bundle_step,
    _bundle_z,
    _cg_first,
    _cg_next,
    _cg_numbers,
    _cg_task,
    _direction,
    _first,
    _first_direction,
    _gradient_task,
    _home_newton,
    _moved_w,
    _point_scalars,
    _point_task,
    _point_w,
    _precondition_task,
    _second,
    _start_read,
    _start_w,
    _third,
    _trial_home,
    _trial_task,
    _woodbury_solve,
    _woodbury_start,
)


@dataclasses.dataclass(frozen=True)
class _State(ResidentState):
    """A run's state between Newton steps: the groups and their dual values (futures on a
    client), the point ``w(a)`` and the first CG direction on ``w``'s home.

    A round runs one task a bundle (:func:`~daskpd.solvers.common.resident.bundles`: the
    groups of one owner); ``locals`` holds each bundle's groups' dual values and CG vectors.
    """

    n_features: int = 0
    nnz: int = 1
    #: the groups of each round's tasks, as tuples of group indices
    bundles: tuple = ()
    locals: tuple = ()
    point: Any = None
    cg: Any = None
    scalars: dict | None = None
    cg_done: bool = True
    #: rounds (graphs with one reduction of d-vectors each) and passes (nonzeros read over
    #: all nonzeros: a CG round reads the free rows only)
    rounds: int = 0
    passes: float = 0.0
    #: whether the last Newton step found no decrease (at the optimum, to rounding)
    stalled: bool = False
    #: the fewest free nonzeros after a Newton step so far, and whether the last epoch was
    #: a local pass (see ``DualNewtonOptions.burst``)
    fewest_free: float = float("inf")
    passed: bool = False
    #: whether the gradient round at ``point`` prepared the Woodbury preconditioner
    preconditioned: bool = False

    def tasks(self):
        """``(b, groups, owner)`` of each bundle: its index, its groups' references and
        where it runs."""
        return [
            (b, [self.groups[k] for k in bundle], self.owners[bundle[0]])
            for b, bundle in enumerate(self.bundles)
        ]

    @property
    def task_owners(self):
        """Where each bundle's task runs."""
        return [self.owners[bundle[0]] for bundle in self.bundles]

    @property
    def task_bounds(self):
        """The bundles' row bounds."""
        return np.asarray(
            [int(self.bounds[bundle[0]]) for bundle in self.bundles] + [int(self.bounds[-1])],
            dtype=np.int64,
        )


@register_solver
class DualNewton(ExactMethod):
    """Projected Newton-CG on the hinge loss's dual (``solver="dual_newton"``), data-parallel.

    Solves ``min (1/n) sum_i c_i max(0, 1 - y_i x_i . w) + (alpha/2) ||w||^2`` through its
    dual, a quadratic over the box ``0 <= a_i <= 1``. See :mod:`daskpd.solvers.dual_newton`
    for the method and its schedule, :class:`DualNewtonOptions` for the options.
    """

    name = "dual_newton"
    capabilities = Capabilities(
        losses=frozenset({"hinge"}),
        loss_rule="the hinge loss (its dual is a quadratic over a box)",
        regularizers=frozenset({"l2"}),
        regularizer_rule="the l2 regularizer (its dual is then a quadratic)",
    )
    Options = DualNewtonOptions
    kernel_losses = (scalar.HINGE,)
    State = _State

    # -- protocol ---------------------------------------------------------------------------

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Read every group on its owner and run the gradient round at the start point
        (:meth:`Solver.init <daskpd.solvers.driver.protocol.Solver.init>`): a warm start's
        dual point ``z`` (``z_i = -c_i y_i a_i``, one value a row), else the dual point read
        off its ``w`` (``a_i = 1`` on the rows whose margin is below 1, else 0: a pass more),
        else ``a = 0``. The seed is unused: the method draws nothing at random."""
        z = w = None
        if warm_start is not None:
            z = getattr(warm_start, "z", None)
            if isinstance(z, list | tuple):
                z = np.concatenate([np.asarray(piece) for piece in z]) if z else None
            if z is not None:
                z = np.asarray(z, dtype=np.float64)
                if z.shape != (int(data.n_samples),):
                    raise ValueError(
                        f"warm start z must have shape ({data.n_samples},), got {z.shape}"
                    )
            elif getattr(warm_start, "w", None) is not None:
                w = np.asarray(warm_start.w, dtype=np.float64)
                if w.shape != (int(data.n_features),):
                    raise ValueError(
                        f"warm start w must have shape ({data.n_features},), got {w.shape}"
                    )
        state = self._setup(problem, data, client, options)
        if w is not None:
            w = np.ascontiguousarray(w[state.used])
        return self._start(state, z=z, w=w)

    def settings(self, problem, data, options, layout):
        """The run's constants (:class:`_Settings`)."""
        return _Settings(
            n_samples=int(data.n_samples),
            n_columns=int(layout.used.shape[0]),
            alpha=float(problem.alpha),
            threads=int(layout.threads),
            eta=float(options.eta),
            max_cg=int(options.max_cg),
            damping=float(options.damping),
            start_passes=int(options.start_passes),
            home_cg_nnz=int(options.home_cg_nnz),
            burst=float(options.burst),
            dense=_dense_columns(data, layout.used, int(options.dense_columns)),
        )

    def state_fields(self, data, layout) -> dict:
        """The data's shape the counters and ``w`` need, and the bundles of groups."""
        return {
            "n_features": int(data.n_features),
            "nnz": max(1, int(np.asarray(data.col_nnz).sum())),
            "bundles": bundles(layout.owners),
        }

    def _start(self, state, z=None, a=None, w=None):
        """The state at the dual point ``z`` (or ``a``, or the one read off the margins at
        ``w``; 0 when none): ``w(a)`` (a round unless ``a = 0``), then the gradient round."""
        settings = state.settings
        graph = TaskGraph("dual-newton-start", state.token)
        group_rows = ranges(state.bounds)
        locals_ = []
        for b, groups, owner in state.tasks():
            rows = [group_rows[k] for k in state.bundles[b]]
            pieces = [None if z is None else z[start:stop] for start, stop in rows]
            local = graph.task(
                f"start-{b}", _bundle_start, groups, pieces, w, settings.scale, worker=owner
            )
            if a is not None:
                pieces = [a[start:stop] for start, stop in rows]
                local = graph.task(f"restore-{b}", _bundle_restore, local, pieces, worker=owner)
            locals_.append(local)
        cold = z is None and a is None and w is None
        extra = []
        if cold and settings.start_passes == 0:
            w = graph.task("w", np.zeros, settings.n_columns, worker=state.home)
        else:
            if cold:
                # the groups' local passes (their images come with them)
                images = [
                    graph.task(
                        f"local-{b}", _bundle_local_pass, groups, locals_[b], None, settings,
                        len(state.bundles), settings.start_passes, worker=owner,
                    )  # fmt: skip
                    for b, groups, owner in state.tasks()
                ]
            else:
                images = [
                    graph.task(
                        f"image-{b}", _bundle_image, groups, locals_[b], settings, worker=owner
                    )
                    for b, groups, owner in state.tasks()
                ]
            locals_ = images
            totals = _sum_totals(graph, "image-sum", images, state)
            total = graph.task("image-sum", _add_totals, *totals, worker=state.home)
            w = graph.task("w", _start_w, total, settings, worker=state.home)
            extra = [graph.task("start-read", _start_read, total, worker=state.home)]
        refs = _gradient_round(graph, state, w, locals_)
        outputs = _run(state, graph, refs + extra)
        read = value(outputs[-1], state.owners) if extra else 0.0
        state = dataclasses.replace(
            state, rounds=state.rounds + bool(extra), passes=state.passes + read / state.nnz
        )
        return _at_point(state, outputs[: len(refs)])

    def run_epoch(self, state, epoch):
        """One Newton step: CG rounds on the free rows, a projected line search (its first
        trial and the gradient round at it in one graph), the gradient round at the new
        point; or, on few free rows, the step whole on the home (two rounds); or, after a
        step that freed ``burst`` times the fewest free nonzeros so far, a local pass of
        every group instead (see :class:`DualNewtonOptions`)."""
        settings, free = state.settings, state.scalars["free_nnz"]
        if (
            settings.burst > 0
            and not state.passed
            and free > settings.home_cg_nnz
            and free > settings.burst * state.fewest_free
        ):
            return dataclasses.replace(_local_round(state), passed=True)
        state = _newton_step(state)
        fewest = min(state.fewest_free, state.scalars["free_nnz"])
        return dataclasses.replace(state, fewest_free=fewest, passed=False)

    def iterate(self, state) -> Iterate:
        """The point ``w(a)`` (gathered), its dual point ``z = -c y a`` (per group, where it
        is) and their exact primal and dual."""
        if state.client is None:
            w = state.point.w
        else:
            w = state.client.submit(_point_w, state.point, workers=[state.home], pure=False)
            w = value(w, state.owners)
        full = np.zeros(state.n_features)
        full[state.used] = w
        graph = TaskGraph("dual-newton-z", f"{state.token}-{state.rounds}")
        z = [
            graph.task(f"z-{b}", _bundle_z, groups, state.locals[b], worker=owner)
            for b, groups, owner in state.tasks()
        ]
        z = _run(state, graph, z)
        return Iterate(
            w=full,
            z=list(z),
            z_bounds=state.task_bounds,
            primal=state.scalars["primal"],
            dual=state.scalars["dual"],
        )

    def saved_rows(self, state):
        """The dual point ``a`` (``w`` is ``w(a)``), per bundle of groups."""
        graph = TaskGraph("dual-newton-a", f"{state.token}-{state.rounds}")
        pieces = [
            graph.task(f"a-{b}", _bundle_a, local, worker=owner)
            for b, (local, owner) in enumerate(zip(state.locals, state.task_owners, strict=True))
        ]
        return "a", _run(state, graph, pieces)

    def restore(self, problem, data, arrays, *, seed, client, options):
        """The state saved by :meth:`state_arrays` (``w`` is computed again from ``a``)."""
        state = self._setup(problem, data, client, options)
        state = self._start(state, a=np.asarray(arrays["a"], dtype=np.float64))
        # the counters go on from the saved run's (the restart's rounds are not its)
        return dataclasses.replace(
            state, rounds=int(arrays["rounds"]), passes=float(arrays["passes"])
        )



def _dense_columns(data, used, count):
    """The ``count`` most frequent of the run's used columns (positions into ``used``,
    increasing; ties to the lower column), from the data's column counts: no pass."""
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    frequency = np.asarray(data.col_nnz)[used]
    order = np.argsort(-frequency, kind="stable")[:count]
    return np.sort(order).astype(np.int64)


# ------------------------------------------------------------------------------------------------
# the rounds


def _gradient_round(graph, state, w, locals_):
    """Add the gradient round at ``w = w(a)`` to ``graph``: each group's margins, free rows
    and CG start, their sums up the tree, the point and the first CG direction on the home.
    Returns the references of the point, the CG state, their numbers and the groups'
    locals."""
    settings = state.settings
    woodbury = _preconditioned(state)
    ws = relay(graph, "w", w, state.task_owners, state.home)
    parts = [
        graph.task(
            f"grad-{b}", _bundle_step, _gradient_task, groups, locals_[b], ws[b], settings,
            woodbury, worker=owner,
        )  # fmt: skip
        for b, groups, owner in state.tasks()
    ]
    totals = _sum_totals(graph, "grad-sum", parts, state)
    total = graph.task("grad-sum", _add_totals, *totals, worker=state.home)
    if not woodbury:
        point = graph.task("point", _point_task, w, total, settings, worker=state.home)
        cg = graph.task("cg", _cg_first, total, settings, worker=state.home)
    else:
        # the preconditioner's matrix summed and factored, the first residual's solution
        # back to the owners, their first direction's image up the tree
        started = graph.task("woodbury", _woodbury_start, settings, total, worker=state.home)
        factor = graph.task("woodbury-factor", _first, started, worker=state.home)
        solved = graph.task("woodbury-s", _second, started, worker=state.home)
        parts = _precondition_round(graph, "grad", state, parts, solved)
        seconds = _sum_totals(graph, "grad-pre-sum", parts, state)
        second = graph.task("grad-pre-sum", _add_totals, *seconds, worker=state.home)
        point = graph.task("point", _point_task, w, total, settings, second, worker=state.home)
        cg = graph.task("cg", _cg_first, second, settings, factor, worker=state.home)
    scalars = graph.task("scalars", _point_scalars, point, worker=state.home)
    numbers = graph.task("cg-numbers", _cg_numbers, cg, worker=state.home)
    return [point, cg, scalars, numbers, *parts]


def _precondition_round(graph, name, state, parts, solved):
    """Add the second half of a round with the Woodbury preconditioner: the home's solution
    ``solved`` to every owner, each group's preconditioned residual and its image's share
    (:func:`_precondition_task`). Returns the bundle tasks."""
    solveds = relay(graph, f"{name}-s", solved, state.task_owners, state.home)
    return [
        graph.task(
            f"{name}-pre-{b}", _bundle_step, _precondition_task, groups, parts[b], solveds[b],
            state.settings, worker=owner,
        )  # fmt: skip
        for b, groups, owner in state.tasks()
    ]


def _preconditioned(state):
    """Whether the gradient round after ``state`` prepares the Woodbury preconditioner
    (``DualNewtonOptions.dense_columns``): where the Newton step at its point is likely to
    run as rounds, predicted from the free rows at ``state``'s point (any, at the start).
    Every quantity in it is global, so the choice does not depend on ``K``."""
    settings = state.settings
    if not settings.woodbury:
        return False
    return state.scalars is None or state.scalars["free_nnz"] > settings.home_cg_nnz


def _at_point(state, outputs):
    """The state at a gradient round's outputs (one round more); ``state`` is the one the
    round was built from (its preconditioner's choice)."""
    point, cg, scalars, numbers, *kept = outputs
    preconditioned = _preconditioned(state)
    scalars = value(scalars, state.owners)
    return dataclasses.replace(
        state,
        preconditioned=preconditioned,
        point=point,
        cg=cg,
        scalars=scalars,
        cg_done=bool(value(numbers, state.owners)["done"]),
        locals=tuple(kept),
        rounds=state.rounds + 1,
        passes=state.passes + scalars["read"] / state.nnz,
    )


def _newton_step(state):
    settings = state.settings
    rounds, read = state.rounds, 0.0
    cg, locals_, done = state.cg, list(state.locals), state.cg_done
    home = not done and state.scalars["free_nnz"] <= settings.home_cg_nnz
    first = True
    while not done and not home:
        graph = TaskGraph("dual-newton-cg", f"{state.token}-{rounds}")
        # the step's first round gives the owners the free columns (to find their rows'
        # positions in them); later rounds send the image and the numbers only
        if first:
            sent = cg if not state.preconditioned else graph.task(
                "direction", _first_direction, cg, worker=state.home)  # fmt: skip
        else:
            sent = graph.task("direction", _direction, cg, worker=state.home)
        first = False
        sents = relay(graph, "direction", sent, state.task_owners, state.home)
        parts = [
            graph.task(
                f"cg-{b}", _bundle_step, _cg_task, groups, locals_[b], sents[b], settings,
                worker=owner,
            )  # fmt: skip
            for b, groups, owner in state.tasks()
        ]
        totals = _sum_totals(graph, "cg-sum", parts, state)
        if state.preconditioned:
            solved = graph.task("woodbury-s", _woodbury_solve, cg, *totals, worker=state.home)
            parts = _precondition_round(graph, "cg", state, parts, solved)
            totals = _sum_totals(graph, "cg-pre-sum", parts, state)
        new_cg = graph.task("cg", _cg_next, cg, settings, *totals, worker=state.home)
        numbers = graph.task("numbers", _cg_numbers, new_cg, worker=state.home)
        outputs = _run(state, graph, [new_cg, numbers, *parts])
        cg, numbers, locals_ = outputs[0], value(outputs[1], state.owners), list(outputs[2:])
        rounds += 1
        read += numbers["read"]
        done = numbers["done"]

    # the projected line search: the trial at t = 1 and the gradient round there in one
    # graph (Newton steps nearly always take t = 1); a shorter t is a round of its own, then
    # a gradient round at the accepted point
    if home:
        return _home_step(state, rounds)
    graph = TaskGraph("dual-newton-line", f"{state.token}-{rounds}")
    trial, moved = _trial_round(graph, state, locals_, 1.0)
    w = graph.task("w", _first, trial, worker=state.home)
    verdict = graph.task("verdict", _second, trial, worker=state.home)
    refs = _gradient_round(graph, state, w, moved)
    outputs = _run(state, graph, [verdict, *refs])
    verdict = value(outputs[0], state.owners)
    read += verdict["read"]
    base = dataclasses.replace(state, rounds=rounds + 1, passes=state.passes + read / state.nnz)
    if verdict["accepted"]:
        return dataclasses.replace(_at_point(base, outputs[1:]), stalled=False)
    # t = 1 refused: its gradient round was spent (a round and a pass)
    rounds, read = rounds + 2, read + float(state.nnz)
    step_length = 1.0
    for _ in range(MAX_HALVINGS):
        step_length *= 0.5
        graph = TaskGraph("dual-newton-line", f"{state.token}-{rounds}")
        trial, moved = _trial_round(graph, state, locals_, step_length)
        w = graph.task("w", _first, trial, worker=state.home)
        verdict = graph.task("verdict", _second, trial, worker=state.home)
        outputs = _run(state, graph, [verdict, w, *moved])
        rounds += 1
        verdict = value(outputs[0], state.owners)
        read += verdict["read"]
        if verdict["accepted"]:
            break
    else:
        return dataclasses.replace(
            state, rounds=rounds, passes=state.passes + read / state.nnz, stalled=True
        )
    base = dataclasses.replace(state, rounds=rounds, passes=state.passes + read / state.nnz)
    graph = TaskGraph("dual-newton-gradient", f"{state.token}-{rounds}")
    refs = _gradient_round(graph, state, outputs[1], list(outputs[2:]))
    return dataclasses.replace(_at_point(base, _run(state, graph, refs)), stalled=False)


def _home_step(state, rounds):
    """A Newton step whose free rows go to ``w``'s home, which runs its CG and its line
    search (:func:`_home_newton`); the groups move their rows, and the gradient round at
    the new point follows in the same graph: two rounds."""
    settings = state.settings
    graph = TaskGraph("dual-newton-home", f"{state.token}-{rounds}")
    blocks = [
        graph.task(f"free-{b}", _bundle_free, state.locals[b], worker=owner)
        for b, _, owner in state.tasks()
    ]
    solved = graph.task(
        "home-newton", _home_newton, state.point, state.cg, settings, *blocks, worker=state.home
    )
    # the owners take their changes of a only (w goes to them with the gradient round)
    moves = graph.task("moves", _first, solved, worker=state.home)
    moved = [
        graph.task(f"moves-{b}", _bundle_moves, state.locals[b], moves, b, worker=owner)
        for b, _, owner in state.tasks()
    ]
    w = graph.task("w", _second, solved, worker=state.home)
    numbers = graph.task("home-numbers", _third, solved, worker=state.home)
    refs = _gradient_round(graph, state, w, moved)
    outputs = _run(state, graph, [numbers, *refs])
    numbers = value(outputs[0], state.owners)
    base = dataclasses.replace(
        state, rounds=rounds + 1, passes=state.passes + numbers["read"] / state.nnz
    )
    return dataclasses.replace(_at_point(base, outputs[1:]), stalled=not numbers["accepted"])


def _local_round(state):
    """A local pass of every group from the current point, ``w`` moved by their summed
    changes on the home, and the gradient round there: two rounds."""
    settings = state.settings
    graph = TaskGraph("dual-newton-pass", f"{state.token}-{state.rounds}")
    w = graph.task("w-before", _point_w, state.point, worker=state.home)
    parts = [
        graph.task(
            f"pass-{b}", _bundle_local_pass, groups, state.locals[b], w, settings,
            len(state.bundles), worker=owner,
        )  # fmt: skip
        for b, groups, owner in state.tasks()
    ]
    totals = _sum_totals(graph, "pass-sum", parts, state)
    moved = graph.task("moved", _moved_w, state.point, settings, *totals, worker=state.home)
    w = graph.task("w", _first, moved, worker=state.home)
    numbers = graph.task("pass-numbers", _second, moved, worker=state.home)
    refs = _gradient_round(graph, state, w, parts)
    outputs = _run(state, graph, [numbers, *refs])
    read = value(outputs[0], state.owners)["read"]
    base = dataclasses.replace(
        state, rounds=state.rounds + 1, passes=state.passes + read / state.nnz
    )
    return _at_point(base, outputs[1:])


def _trial_round(graph, state, locals_, step_length):
    """Add the projected step at ``step_length``: each group's moved dual values and its
    share, summed up the tree into the trial point and Armijo's verdict on the home."""
    settings = state.settings
    parts = [
        graph.task(
            f"trial-{b}", _bundle_step, _trial_task, groups, locals_[b], float(step_length),
            settings, worker=owner,
        )  # fmt: skip
        for b, groups, owner in state.tasks()
    ]
    totals = _sum_totals(graph, "trial-sum", parts, state)
    trial = graph.task("trial", _trial_home, state.point, settings, *totals, worker=state.home)
    return trial, parts


def _sum_totals(graph, name, parts, state):
    """The tree of the bundle tasks' totals up to its root's inputs (a task on the home sums
    them). A task's output goes into the tree as it is where the sum that reads it runs on
    its worker, and through a task that takes its total out where it would travel (its
    locals stay with their groups)."""
    owners = state.task_owners
    n = len(parts)
    leaves = []
    for k, part in enumerate(parts):
        # read where it is: by the root's task on the home (one task), or at the tree's
        # first level by the sum on its own owner (the first of a pair)
        stays = n == 1 or (n > 2 and k % 2 == 0 and k + 1 < n) or (n == 2 and k == 0)
        leaves.append(
            part if stays else graph.task(f"{name}-total-{k}", _second, part, worker=owners[k])
        )
    return root_inputs(graph, name, leaves, owners, _add_totals)


def _run(state, graph, outputs):
    """Run ``graph`` on the run's client (or in-process)."""
    return run_graph(state.client, len(state.bundles), graph, outputs)
