"""Where CoCoA+ runs: the row groups, the state between rounds, one round as one graph on a
client, and the helpers that place blocks on their owners.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.solvers.cocoa._tasks import (
    PASSED_STATS,
    _column_shift,
    _columns_of,
    _copy,
    _pass_task,
    _shifted_bounds,
    _shrunk_task,
    _sum_task,
)
from daskpd.solvers.common.groups import GroupRunState

# --------------------------------------------------------------------------------------------
# one round on a distributed client: one graph of tasks pinned to the groups' owners


class _ClientRound:
    """Builds one round's tasks, each pinned to a worker, and runs them as one graph."""

    def __init__(self, client, token):
        self.client = client
        self.token = token
        self._graph = TaskGraph("cocoa", token)

    def add(self, name, fn, *args, worker, priority=None):
        return self._graph.task(name, fn, *args, worker=worker, priority=priority)

    def run(self, outputs, n_waited, release=()):
        """Submit the graph; wait for the first ``n_waited`` ``outputs``; return futures.

        ``release``: futures (or anything else, skipped) to release once the graph is
        submitted; the scheduler keeps what the graph still needs.
        """
        from distributed import Future, wait

        futures = self._graph.submit(self.client, outputs)
        for value in release:
            if isinstance(value, Future):
                value.release()
        waited = futures[:n_waited]
        with self.client.as_current():
            wait(waited)
        for future in waited:
            if future.status in ("error", "cancelled"):
                future.result()
        return futures


# --------------------------------------------------------------------------------------------
# state


@dataclass(frozen=True)
class _State(GroupRunState):
    """A run between rounds: arrays in-process, futures on a client (``settings``: a
    :class:`_Settings`)."""

    #: worker of each group (None in-process)
    owners: tuple
    #: workers holding a copy of w, one per distinct owner (``(None,)`` in-process)
    homes: tuple
    groups: tuple
    #: the groups' columns where each home's sum task reads them: ``columns[h][k]``
    columns: tuple
    #: where the next round takes the dual blocks: arrays, or (``z_pick = 0``) the tuples
    #: of the last round's tasks (no split task between two rounds)
    z: tuple
    z_pick: int | None
    #: the dual blocks as arrays (futures on a client)
    z_blocks: tuple
    #: one copy of w per home
    w: tuple
    epoch: int
    #: the start point of the last round, its dual blocks and its groups' certificate sums
    #: (one row per group)
    certified_w: Any = None
    certified_z: tuple | None = None
    stats: Any = None
    #: whether a round task's whole tuple may travel to the sums (its z block is small)
    whole: bool = True
    #: the groups' margin bounds (screening) where the ``z`` source does not carry them
    #: (in-process runs, a restored checkpoint); empty: none, or in the ``z`` tuples
    bounds: tuple = ()

    def home_of(self, k):
        return self.homes.index(self.owners[k])


def _spread_columns(client, groups, owners, homes, token):
    """Copy every group's columns to every home once; return them and their sizes."""
    graph = TaskGraph("cocoa", token)
    columns = [
        graph.task(f"columns-{k}", _columns_of, group, worker=owners[k])
        for k, group in enumerate(groups)
    ]
    copies = [
        [
            columns[k]
            if owners[k] == home
            else graph.task(f"columns-{k}-{h}", _copy, columns[k], worker=home)
            for k in range(len(groups))
        ]
        for h, home in enumerate(homes)
    ]
    sizes = [
        graph.task(f"n-columns-{k}", len, part, worker=owners[k]) for k, part in enumerate(columns)
    ]
    futures = iter(graph.submit(client, [*sizes, *(ref for row in copies for ref in row)]))
    sizes = client.gather([next(futures) for _ in sizes])
    return tuple(tuple(next(futures) for _ in row) for row in copies), sizes


def _run_tasks(state, calls, name):
    """Run ``calls`` (one ``(fn, group, *args)`` per group) where the groups live; gather."""
    client = state.client
    if client is None:
        graph = TaskGraph(f"cocoa-{name}")
        return graph.compute([graph.task(k, fn, *args) for k, (fn, *args) in enumerate(calls)])
    graph = TaskGraph("cocoa", state.token)
    tasks = [
        graph.task(f"{name}-{k}", fn, *args, worker=state.owners[k])
        for k, (fn, *args) in enumerate(calls)
    ]
    return client.gather(graph.submit(client, tasks))


def _references(values):
    """New references to the same data: futures of their own (else the values themselves).

    :meth:`Cocoa.run_epoch` releases the futures a state no longer needs; an iterate keeps
    its own references, so it outlives the rounds after it.
    """
    from distributed import Future

    return [Future(v.key, v.client) if isinstance(v, Future) else v for v in values]


def _scatter_to(client, value, worker):
    # A one-element list keeps a tuple as one future.
    return client.scatter([value], workers=[worker], hash=False)[0]


def client_round(state, epoch, seeds):
    """Submit one round as one graph, release what it spends, wait for the new ``w``."""
    settings, grid = state.settings, state.settings.grid
    graph = _ClientRound(state.client, f"{state.token}-{epoch}")
    owners = state.owners
    # each round in two tasks: the certifying full passes, then (their output stays on
    # the owner) the shrunk passes and the step. The round is over for the driver once
    # the first halves' certificate is in: the shrunk passes and the sums run on while
    # the driver reports it, and the next round's tasks wait for them on the workers.
    passed = [
        graph.add(
            f"pass-{k}",
            _pass_task,
            state.groups[k],
            state.z[k],
            state.z_pick,
            state.w[state.home_of(k)],
            seeds[k],
            settings,
            k == 0,
            state.bounds[k] if state.bounds else None,
            worker=owners[k],
        )  # fmt: skip
        for k in range(grid)
    ]
    tasks = [
        graph.add(
            f"round-{k}",
            _shrunk_task,
            state.groups[k],
            passed[k],
            settings,
            worker=owners[k],
        )  # fmt: skip
        for k in range(grid)
    ]
    # z blocks as arrays, for the iterate and checkpoints (off the round's path)
    z_blocks = [
        graph.add(f"z-{k}", operator.getitem, task, 0, worker=owners[k])
        for k, task in enumerate(tasks)
    ]
    if state.whole:
        # the tuples travel whole (their z blocks are small): one hop less a round
        steps, pick = tasks, 1
    else:
        steps = [
            graph.add(f"step-{k}", operator.getitem, task, 1, worker=owners[k])
            for k, task in enumerate(tasks)
        ]
        pick = None
    # the certificate sums leave the owner alone (the pass's output holds n_features),
    # ahead of the shrunk passes that are ready on the same worker at the same time
    stats_parts = [
        graph.add(
            f"stats-{k}",
            operator.getitem,
            part,
            PASSED_STATS,
            worker=owners[k],
            priority=1,
        )  # fmt: skip
        for k, part in enumerate(passed)
    ]
    sums = [
        graph.add(
            f"w-{h}",
            _sum_task,
            state.w[h],
            settings.direct,
            pick,
            *steps,
            *state.columns[h],
            worker=home,
        )  # fmt: skip
        for h, home in enumerate(state.homes)
    ]
    bounds = []
    if settings.screening and not settings.direct:
        # several groups: a group's bounds (at the round's start, in its tuple) move by
        # ||x_i|| times how far w moves on the group's columns, known once the home
        # (the owner itself) has summed the next w
        for k in range(grid):
            h = state.home_of(k)
            shift = graph.add(
                f"shift-{k}", _column_shift, state.w[h], sums[h], state.columns[h][k],
                worker=state.homes[h],
            )  # fmt: skip
            bounds.append(
                graph.add(
                    f"bounds-{k}",
                    _shifted_bounds,
                    tasks[k],
                    3,
                    shift,
                    state.groups[k],
                    worker=owners[k],
                )  # fmt: skip
            )
    # what the new state does not hold: released once the scheduler has the graph
    # (released later, their message would hold up the next round's graph)
    # (z sources that are the blocks themselves go on as the certified z)
    spent = [
        *(state.z if state.z_pick is not None else ()), *state.w[1:], state.certified_w,
        *(state.certified_z or ()), state.stats, *state.bounds,
    ]  # fmt: skip
    n = len(sums)
    futures = graph.run(
        [*stats_parts, *sums, *tasks, *z_blocks, *bounds], n_waited=grid, release=spent
    )
    # the sums themselves, a few numbers a group: the driver reads them every round
    stats = np.stack(state.client.gather(futures[:grid]))
    futures = futures[grid:]
    return {
        "w": tuple(futures[:n]),
        "stats": stats,
        # the next round's bounds travel in these tuples
        "z": tuple(futures[n : n + grid]),
        "z_pick": 0,
        "z_blocks": tuple(futures[n + grid : n + 2 * grid]),
        # several groups: shifted apart from the tuples (one group: in them)
        "bounds": tuple(futures[n + 2 * grid :]),
    }


def _start_w(n_features, scale, *starts):
    """Task: a warm start's ``w = scale * sum_k X_k^T z_k`` from the groups'
    :func:`~daskpd.solvers.cocoa._tasks._start_task` outputs ``(z_k, columns_k, X_k^T z_k)``."""
    w = np.zeros(n_features)
    for _, columns, part in starts:
        w[columns] += part
    w *= scale
    return w


def client_start(state, calls, scale):
    """A warm start's dual blocks and ``w`` on a client, ``w`` summed where it lives.

    ``calls``: one ``(_start_task, group, ...)`` per group; ``scale``: ``-1 / (alpha n)``.
    The groups' ``X_k^T z_k`` (``n_features`` values each) go from their owners to the homes
    of ``w``, not through this process: gathering them and scattering the sum back moved
    twice ``n_features`` floats through the client at every point of a path, most of what a
    warm start cost more than a start from zero (BENCHMARKS.md, the path). The dual
    blocks (``n_samples`` values in all) are gathered and scattered to their owners, as
    :meth:`~daskpd.solvers.cocoa.Cocoa._placed` places them (a lost worker then loses data
    Dask cannot recompute, and the driver replays from its recovery point).

    Returns
    -------
    z : tuple of Future
        The dual blocks, each on its group's owner.
    w : tuple of Future
        ``w``, one copy per home.
    """
    client, owners = state.client, state.owners
    graph = TaskGraph("cocoa", state.token)
    starts = [
        graph.task(f"start-{k}", fn, *args, worker=owners[k]) for k, (fn, *args) in enumerate(calls)
    ]
    blocks = [
        graph.task(f"start-z-{k}", operator.getitem, start, 0, worker=owners[k])
        for k, start in enumerate(starts)
    ]
    n_features = int(state.settings.n_features)
    homes = [
        graph.task(f"start-w-{h}", _start_w, n_features, float(scale), *starts, worker=home,
                   allow_other_workers=True)
        for h, home in enumerate(state.homes)
    ]  # fmt: skip
    futures = graph.submit(client, [*blocks, *homes])
    blocks, w = futures[: len(blocks)], tuple(futures[len(blocks) :])
    z = client.gather(blocks)
    for future in blocks:
        future.release()
    z = tuple(_scatter_to(client, part, owners[k]) for k, part in enumerate(z))
    return z, w
