"""Where CoCoA+ runs: the row groups, the state between rounds, one round as one graph on a
client, and the helpers that place blocks on their owners.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.solvers.cocoa._options import _Settings
from daskpd.solvers.cocoa._tasks import _columns_of, _copy

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
class _State:
    """A run between rounds: arrays in-process, futures on a client."""

    problem: Any
    source: Any
    settings: _Settings
    seed: Any
    client: Any
    token: str
    row_bounds: np.ndarray
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
