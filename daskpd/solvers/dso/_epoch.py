"""One DSO epoch as one Dask graph: the two back ends (local ``dask.compute``, or tasks pinned
to workers on a client), the state between epochs, the placement of blocks (owners, ``w``
homes, what goes through shared memory) and the rounds' dataflow.

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.dso`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.solvers.common.groups import GroupRunState, group_owner
from daskpd.solvers.dso._tasks import (
    _plain_task,
    _products_task,
    _snapshot_w_task,
    _snapshot_z_task,
    _tile_task,
)

# --------------------------------------------------------------------------------------------
# execution backends: one TaskGraph, run with dask.compute (in-process) or submitted to a client


class _LocalGraph:
    """Builds one epoch as a :class:`~daskpd._graphs.TaskGraph`, run by one ``dask.compute``."""

    def __init__(self, token=None):
        self._graph = TaskGraph("dso", token)

    def call(self, fn, *args, nout=None, worker=None, name=None):
        ref = self._graph.task(name, fn, *args)
        return ref if nout is None else self._graph.parts(ref, nout, name)

    def part(self, pair, k, worker=None, name=None):
        return self._graph.part(pair, k, name)

    def run(self, outputs, done_with=(), wait_for=()):
        """Compute ``outputs`` in this process.

        ``done_with`` and ``wait_for`` are :class:`_ClientGraph`'s: here the blocks are
        arrays (nothing to release) and one compute runs every task before it returns.
        """
        return self._graph.compute(outputs)


class _ClientGraph:
    """Builds one epoch as tasks pinned to the worker owning each row group; runs it as one graph.

    The epoch goes to the scheduler in one message. Submitted one by one, its tasks reached
    the scheduler in batches (the client sends at most one message per 10 ms), so the
    first round could wait for the rest of the epoch to arrive.
    """

    def __init__(self, client, token):
        self.client = client
        self.token = token
        self._graph = TaskGraph("dso", token)

    def call(self, fn, *args, nout=None, worker=None, name=None):
        ref = self._graph.task(name, fn, *args, worker=worker, retries=2)
        if nout is None:
            return ref
        # Split on the same worker, so each part travels (or stays) on its own.
        return self._graph.parts(ref, nout, name, worker)

    def part(self, pair, k, worker=None, name=None):
        """Task: ``pair[k]`` on ``worker`` (where ``pair`` was made: nothing moves)."""
        return self._graph.part(pair, k, name, worker)

    def run(self, outputs, done_with=(), wait_for=()):
        """Submit the graph; wait for ``outputs`` (its tasks, or futures); return futures.

        ``done_with``: futures to release once the graph is submitted (the scheduler keeps
        what the graph needs). Released at the end of an epoch instead, their message would
        hold up the next epoch's graph: the client sends at most one message per 10 ms.
        ``wait_for``: wait for these tasks of the graph instead of ``outputs``.
        """
        from distributed import wait

        futures = self._graph.submit(self.client, [*outputs, *wait_for])
        for future in done_with:
            future.release()
        results, waited = futures[: len(outputs)], futures[len(outputs) :] or futures
        with self.client.as_current():
            wait(waited)
        failed = [f for f in waited if f.status == "error"]
        if failed:
            failed[0].result()
        return results


# --------------------------------------------------------------------------------------------
# state


@dataclass(frozen=True)
class _State(GroupRunState):
    """Everything of a run between epochs (arrays or futures, by block; ``settings``: a
    :class:`_Settings`)."""

    workers: tuple
    block_cols: tuple  # column ids of each column block (the grid's column order)
    row_consts: tuple
    col_consts: tuple
    tile_sources: tuple
    zstates: tuple
    wstates: tuple
    z_avg: tuple
    #: made once and updated in place by every epoch's last round (see _tile_task)
    w_avg: tuple
    epoch: int
    #: the run's SharedRun (every state of the run holds it) or None
    shared: Any = None
    #: ``(tuple, k)`` of the last round's tasks, where the next epoch takes ``z_q`` (the
    #: first ``grid``) and ``w_r`` (the rest) without a split task; empty: take the parts
    handoff: tuple = ()
    #: bytes of the largest ``z`` arrays a task's tuple holds (see _whole)
    tuple_bytes: int = 0
    #: ``(primal, dual)`` of the epoch-0 iterate, certified by the dual solver's start
    #: (None: another start, or one whose ``w`` the box of the saddle point clipped)
    start_certificate: tuple | None = None
    #: set by run_epoch: the epoch's tasks update this state's w blocks in place
    spent: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)


def _fresh(state):
    """``state``, unless :meth:`DSO.run_epoch` has already run from it."""
    if state.spent:
        raise ValueError(
            f"this DSO state (epoch {state.epoch}) was given to run_epoch, whose tasks update "
            "its w blocks in place; use the state that run_epoch returned"
        )
    return state


def _w_home(settings, workers, r):
    """Where ``w`` block ``r`` and its average live between epochs.

    The worker of the last round's task on block ``r`` (row group ``r + 1``): averaging
    there keeps the block's move to row group ``r`` (round 0 of the next epoch) off the end
    of the epoch, which waits for the averages.
    """
    return group_owner(settings, workers, (r + 1) % settings.grid)


def _graph(state_or_client, token):
    if state_or_client is None:
        return _LocalGraph(token)
    return _ClientGraph(state_or_client, token)


def _epoch_graph(state, epoch, graph):
    """Add the tasks of one epoch to ``graph``.

    Returns the new block states and averages, and the last round's tasks: once those are
    done, so is every update of the epoch (what is left, splitting their results, moves
    nothing and runs while the next epoch is submitted).
    """
    settings = state.settings
    p = settings.grid
    zstates = list(state.zstates)
    wstates = list(state.wstates)
    owner = [group_owner(settings, state.workers, q) for q in range(p)]
    home = [_w_home(settings, state.workers, r) for r in range(p)]
    # a block made by row group q's task next goes to row group q - 1
    share = [_shares(state, owner[q], owner[(q - 1) % p]) for q in range(p)]
    if settings.snapshot_epoch(epoch):
        # z and w taken out of their block states where those live (_w_home for w), once
        # each: only w travels, not its accumulator
        z_now = [_first(graph, zstates[q], owner[q], f"e{epoch}-zs{q}") for q in range(p)]
        w_now = [_first(graph, wstates[r], home[r], f"e{epoch}-ws{r}") for r in range(p)]
        products = [
            [
                graph.call(
                    _products_task,
                    state.tile_sources[q][r],
                    settings,
                    q,
                    r,
                    z_now[q],
                    w_now[r],
                    nout=2,
                    worker=owner[q],
                    name=f"e{epoch}-prod-{q}-{r}",
                )  # fmt: skip
                for r in range(p)
            ]
            for q in range(p)
        ]
        # z_q's snapshot takes X_qr w_r of its row of tiles, w_r's X_qr^T z_q of its column
        z_parts = [[products[q][r][1] for r in range(p)] for q in range(p)]
        w_parts = [[products[q][r][0] for q in range(p)] for r in range(p)]
        zstates = _snapshots(graph, _snapshot_z_task, zstates, z_parts, owner, f"e{epoch}-zsnap")
        wstates = _snapshots(graph, _snapshot_w_task, wstates, w_parts, home, f"e{epoch}-wsnap")
    # A task's (z, w, ...) tuple goes straight to the next tasks of its blocks, which pick
    # their part: on the same worker, or on another one of this machine while the tuple is
    # small (_whole). One scheduler round trip fewer than a split task in between. A part
    # bound elsewhere, and the epoch's final states, are split off where the tuple was made.
    if state.handoff and not settings.snapshot_epoch(epoch):
        zref, tuples = list(state.handoff[:p]), state.handoff[p:]
        wref = [
            tuples[r] if _whole(state, home[r], owner[r]) else (wstates[r], None) for r in range(p)
        ]
    else:
        zref = [(zs, None) for zs in zstates]
        wref = [(ws, None) for ws in wstates]
    # round 0 takes block r from its home to row group r
    wref = [
        (_handed(graph, *wref[r], home[r], owner[r], state, f"e{epoch}-w{r}"), None)
        if wref[r][1] is None
        else wref[r]
        for r in range(p)
    ]
    z_avg, finals, handoff = list(state.z_avg), [], [None] * (2 * p)
    for rnd in range(p):
        last = rnd == p - 1
        for q in range(p):
            r = (q + rnd) % p
            name = f"e{epoch}-r{rnd}-q{q}"
            # the last round's task on (q, r) also averages z_q and w_r (r's home is there)
            averages = (z_avg[q], state.w_avg[r]) if last else ()
            pair = graph.call(
                _tile_task, state.tile_sources[q][r], settings, state.seed, epoch, q, r,
                *zref[q], *wref[r], state.row_consts[q], state.col_consts[r], share[q],
                *averages, worker=owner[q], name=name,
            )  # fmt: skip
            if last:
                zstates[q], wstates[r], z_avg[q] = (
                    graph.part(pair, k, owner[q], name) for k in range(3)
                )
                finals.append(pair)
                handoff[q], handoff[p + r] = (pair, 0), (pair, 1)
                continue
            zref[q] = (pair, 0)
            # next round, w block r goes to row group q - 1
            nxt = owner[(q - 1) % p]
            if _whole(state, owner[q], nxt):
                wref[r] = (pair, 1)
            else:
                wref[r] = (_handed(graph, pair, 1, owner[q], nxt, state, name), None)
    return zstates, wstates, z_avg, finals, tuple(handoff)


def _shares(state, a, b):
    """Whether a ``w`` block made on worker ``a``, bound for worker ``b``, goes in shared memory."""
    return state.shared is not None and state.shared.same(a, b)


#: Largest ``(z state, w block, ...)`` tuple of a task (w as a shared-memory handle) that
#: goes whole to the next task of its ``w`` block on another worker of the machine. Its
#: ``z`` arrays go along unused, which costs less below this size than a task splitting the
#: ``w`` block off first, a scheduler round trip (BENCHMARKS.md).
WHOLE_TUPLE_BYTES = 2 << 20


def _whole(state, a, b):
    """Whether a task's tuple made on worker ``a`` goes whole to worker ``b`` (or stays)."""
    return a == b or (_shares(state, a, b) and state.tuple_bytes <= WHOLE_TUPLE_BYTES)


def _handed(graph, source, pick, src, dst, state, name):
    """``source`` (``source[pick]``), split off on worker ``src``, as it may travel to ``dst``.

    A block in shared memory travels as its handle to a worker of its machine, as plain
    arrays to any other (``dst`` ``None``: this process); one in process memory is pickled
    as plain arrays anyway. Nothing is split when ``src`` is ``dst``.
    """
    if src == dst or state.shared is None or _shares(state, src, dst):
        return source if pick is None else graph.part(source, pick, src, name)
    return graph.call(_plain_task, source, pick, worker=src, name=f"{name}-plain")


def _snapshots(graph, task, block_states, parts, workers, name):
    """Tasks: ``task(block_states[b], *parts[b])`` on ``workers[b]`` for every block ``b``
    (a snapshot epoch's new z or w block states, from their tiles' products)."""
    return [
        graph.call(task, block_states[b], *parts[b], worker=workers[b], name=f"{name}-{b}")
        for b in range(len(block_states))
    ]


def _first(graph, block_state, worker, name):
    """Task: ``block_state[0]`` (the ``z`` or ``w`` of a block state), run on ``worker``."""
    return graph.call(_first_part, block_state, worker=worker, name=name)


def _first_part(block_state):
    # contiguous: a w block's records hold w as a strided column
    return np.ascontiguousarray(block_state[0])
