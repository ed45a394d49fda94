"""Row groups resident on their owners, and the sums of their shares up a tree: the shape of
the exact-gradient methods (``tron`` in the primal, ``dual_newton`` in the dual).

A run cuts the rows into ``K`` groups; each is read once by its owner (a worker) and kept
there. A round is one graph: every group computes its share of a product on its owner, the
shares (d-vectors on the group's own columns) are summed pairwise up a tree whose nodes run
where their first group lives, and the sum lands on one worker, the home of the run's
d-vectors. Only numbers reach the driver.

A group too large for its owner's memory can instead be streamed (:class:`StreamedGroup`,
``tron``'s ``rows="stream"``): its owner keeps its per-row vectors only and every pass reads
its rows again, a chunk of row blocks at a time (:func:`row_pieces`); its shares are on all
the run's columns. A task written over :func:`row_pieces` runs on either kind of group.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, NamedTuple

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.data.format import NO_VALUES
from daskpd.kernels import scalar
from daskpd.kernels.tron import merge_columns, row_products, thread_cuts
from daskpd.solvers.common.groups import (
    check_grid_rows,
    class_weight_pair,
    even_cuts,
    idle_cores,
    in_threads,
    is_on_disk,
    renumbered,
    row_group_bounds,
    row_weights,
    worker_list,
)
from daskpd.solvers.common.stream import block_bounds, block_chunks, prefetched
from daskpd.solvers.driver.types import Solver

__all__ = [
    "ExactMethod",
    "Layout",
    "OwnerLost",
    "ResidentState",
    "RowGroup",
    "Share",
    "StreamedGroup",
    "add",
    "bundles",
    "dense",
    "group_layout",
    "group_products",
    "group_threads",
    "load_group",
    "on_own_columns",
    "open_group",
    "local_sum",
    "ranges",
    "read_groups",
    "relay",
    "root_inputs",
    "row_pieces",
    "run_graph",
    "thread_sum",
    "thread_rows",
    "keep_rows",
    "zeroed_rows",
    "summed_rows",
    "tree",
    "value",
]


class RowGroup(NamedTuple):
    """One row group's rows as the kernels read them (resident on its owner)."""

    indptr: np.ndarray
    indices: np.ndarray
    vals: np.ndarray
    binary: bool
    y: np.ndarray
    weight: np.ndarray
    #: thread cuts by nonzeros, for the run's thread count
    cuts: np.ndarray
    #: the group's own columns (increasing, into the run's used columns) that ``indices``
    #: number; None: the group's indices are the run's columns (one group)
    columns: np.ndarray | None = None
    #: the threads' output rows its last task handed back (:func:`thread_rows`); None: a
    #: group that keeps none (a Newton step's free rows)
    spare: list | None = None


class Share(NamedTuple):
    """A group's (or a sum of groups') d-vectors on its own columns."""

    #: increasing int32 positions into the run's columns; None: all of them, in order
    columns: np.ndarray | None
    #: shape (n_vectors, n_columns of the share)
    values: np.ndarray


def _kernel_rows(source, start, stop, positions, threads):
    """Rows ``start:stop`` of ``source`` as the kernels read them: ``(indptr, indices,
    vals, binary, y)``, the offsets from 0 (int64), the column ids (int32) renumbered by
    ``positions`` (None: as stored) in ``threads`` threads, the values float
    (:data:`NO_VALUES` for binary rows)."""
    indptr, indices, vals, y = source.read_rows_arrays(start, stop)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indptr = indptr - indptr[0]
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    _, indices = renumbered(indices, int(source.n_features), positions, False, threads)
    binary = vals is None
    if binary:
        vals = NO_VALUES
    else:
        vals = np.ascontiguousarray(vals)
        if vals.dtype not in (np.float32, np.float64):
            vals = vals.astype(np.float64)
    return indptr, indices, vals, binary, y


def load_group(source, start, stop, class_pair, threads, used, own_columns):
    """Task: rows ``start:stop`` of ``source`` as a :class:`RowGroup` (kept by the owner), its
    column ids renumbered into the data's used columns (``used``: positions by column id, or
    None when every column is used) and, with ``own_columns`` (several groups), into the
    group's own columns, so that its shares of a product are as long as those."""
    indptr, indices, vals, binary, y = _kernel_rows(source, start, stop, None, threads)
    # one renumbering into the run's columns and the group's own (two reads of the ids)
    columns, indices = renumbered(
        indices, int(source.n_features), used, own_columns, int(threads)
    )
    y = np.ascontiguousarray(y, dtype=np.float64)
    weight = row_weights(source, y, start, stop, class_pair)
    cuts = thread_cuts(indptr, int(threads))
    return RowGroup(indptr, indices, vals, binary, y, weight, cuts, columns, [])


class StreamedGroup(NamedTuple):
    """A row group whose rows are read again by every pass, a chunk of row blocks at a time
    (rows that do not fit the owner's memory); the owner keeps its per-row vectors only.

    Its column ids are renumbered into the run's used columns as each chunk is read, and its
    shares of a product are on all of those (``columns`` is None): a group of many rows
    touches most of them, and renumbering into its own would need the whole group's ids.
    """

    source: object
    start: int
    stop: int
    #: the chunks' row bounds (absolute, from ``start`` to ``stop``), each a run of whole
    #: row blocks: one contiguous read
    chunks: np.ndarray
    #: the run's used columns' positions by column id (None: every column is used)
    positions: np.ndarray | None
    #: threads that compute a chunk's share, each over its own rows
    threads: int
    binary: bool
    y: np.ndarray
    weight: np.ndarray
    columns: None = None
    #: as :attr:`RowGroup.spare`
    spare: list | None = None


def open_group(source, start, stop, class_pair, threads, used, stream_nnz):
    """Task: a :class:`StreamedGroup` of rows ``start:stop`` of ``source`` (its labels and
    weights read, its rows not), in chunks of about ``stream_nnz`` nonzeros; ``used`` as
    :func:`load_group`'s."""
    bounds = block_bounds(source, start, stop)
    nnz = int(source.nnz) * (stop - start) // max(1, int(source.n_samples))
    blocks = block_chunks(np.arange(bounds.shape[0] - 1), bounds, nnz, int(stream_nnz))
    chunks = np.array([bounds[0]] + [bounds[run[-1] + 1] for run in blocks], dtype=np.int64)
    y = np.ascontiguousarray(source.y_rows(start, stop), dtype=np.float64)
    weight = row_weights(source, y, start, stop, class_pair)
    binary = bool(getattr(source, "binary", False))
    return StreamedGroup(
        source, int(start), int(stop), chunks, used, int(threads), binary, y, weight, None, []
    )


def _read_chunk(group, lo, hi):
    """Rows ``lo:hi`` (absolute) of a streamed group as a :class:`RowGroup` on the run's
    columns (its per-row vectors views of the group's), and their first row in the group."""
    indptr, indices, vals, binary, _ = _kernel_rows(
        group.source, lo, hi, group.positions, group.threads
    )
    first, last = lo - group.start, hi - group.start
    rows = RowGroup(
        indptr, indices, vals, binary, group.y[first:last],
        group.weight[first:last], thread_cuts(indptr, group.threads),
    )  # fmt: skip
    return rows, first


def row_pieces(group, curv=None):
    """The rows of ``group`` as ``(rows, first)`` pieces: a :class:`RowGroup` and the
    group's row at which its rows start. A kept group is one piece, itself; a streamed one
    its chunks, read as they are needed, the next one in a thread while the caller works on
    this one (:func:`~daskpd.solvers.common.stream.prefetched`).

    ``curv`` (of shape (n_rows,)): the chunks whose rows all have curvature 0 are not read
    (a Hessian-vector pass skips those rows)."""
    if not isinstance(group, StreamedGroup):
        return [(group, 0)]
    spans = [
        (int(lo), int(hi))
        for lo, hi in zip(group.chunks[:-1], group.chunks[1:], strict=True)
        if curv is None or np.any(curv[lo - group.start : hi - group.start])
    ]
    return prefetched(lambda span: _read_chunk(group, *span), spans)


def group_threads(group):
    """The threads of a group's task."""
    if isinstance(group, StreamedGroup):
        return group.threads
    return group.cuts.shape[0] - 1


def on_own_columns(group, v):
    """``v`` (on the run's columns) on the group's own columns."""
    return v if group.columns is None else v[group.columns]


def group_products(group, v):
    """``X_k v`` for ``v`` on the group's own columns, the group's threads each on its rows
    (a streamed group's chunk by chunk)."""
    out = np.empty(group.y.shape[0])
    for rows, first in row_pieces(group):
        _piece_products(rows, v, out[first : first + rows.y.shape[0]])
    return out


def _piece_products(rows, v, out):
    def work(t):
        row_products(
            rows.indptr, rows.indices, rows.vals, rows.binary, v,
            rows.cuts[t], rows.cuts[t + 1], out,
        )  # fmt: skip

    in_threads(rows.cuts.shape[0] - 1, work)


def thread_sum(rows):
    """The sum of the threads' output rows (the first row, reused, when there is one)."""
    total = rows[0]
    for t in range(1, rows.shape[0]):
        total += rows[t]
    return total


def thread_rows(group, shape):
    """Output rows of ``shape`` (threads first) for a task of ``group``, not zeroed.

    The group's spare rows of that shape when its last task handed them back
    (:func:`keep_rows`): their pages are mapped already. New rows of a wide share are above
    glibc's mmap threshold, so every task used to fault in (and zero) fresh pages for each
    of its threads, and sum the rows in one thread: about 3 ns a column, thread and vector
    (BENCHMARKS.md, tron's cost model), most of a round's cost beyond its passes at the
    job's scale. A task zeroes the rows in its threads and sums them the same way
    (:func:`summed_rows`).
    """
    spare = getattr(group, "spare", None)
    if spare:
        rows = spare.pop()
        if rows.shape == tuple(shape):
            return rows
    return np.empty(shape)


def keep_rows(group, rows):
    """Hand a task's output rows back to ``group`` for its next task (one set kept; a group
    without a ``spare`` list keeps none)."""
    spare = getattr(group, "spare", None)
    if spare is not None and not spare:
        spare.append(rows)


def zeroed_rows(rows, n_threads):
    """``rows`` (threads first) set to 0, each thread a range of the columns (numpy's fill
    releases the GIL), so that the pages are written by as many cores as the task has."""
    cuts = even_cuts(rows.shape[1], n_threads)

    def work(t):
        rows[:, cuts[t] : cuts[t + 1]] = 0.0

    in_threads(n_threads, work)
    return rows


def summed_rows(rows, n_threads):
    """The sum over the first axis of ``rows``, added into ``rows[0]`` (returned: a caller
    that keeps the rows copies it first), each of ``n_threads`` threads summing a range of
    the columns, the rows added in order (:func:`thread_sum`'s bits)."""
    total = rows[0]
    cuts = even_cuts(rows.shape[1], n_threads)

    def work(t):
        lo, hi = cuts[t], cuts[t + 1]
        block = total[lo:hi]
        for k in range(1, rows.shape[0]):
            block += rows[k, lo:hi]

    in_threads(n_threads, work)
    return total


def add(*parts):
    """Sum of the groups' shares (:class:`Share`, arrays, or tuples of them), in the order
    given."""
    first = parts[0]
    if isinstance(first, Share):
        total = first
        for part in parts[1:]:
            total = _add_shares(total, part)
        return total
    if isinstance(first, tuple):
        return tuple(add(*(part[k] for part in parts)) for k in range(len(first)))
    total = first.copy()
    for part in parts[1:]:
        total += part
    return total


def _add_shares(a, b):
    if a.columns is not None and b.columns is not None:
        return Share(*merge_columns(a.columns, a.values, b.columns, b.values))
    if a.columns is None and b.columns is None:
        return Share(None, a.values + b.values)
    full, part = (a, b) if a.columns is None else (b, a)
    values = full.values.copy()
    values[:, part.columns] += part.values
    return Share(None, values)


def dense(share, n_columns):
    """A share's vectors on every one of the run's columns (on the home)."""
    if share.columns is None:
        return share.values
    values = np.zeros((share.values.shape[0], n_columns))
    values[:, share.columns] = share.values
    return values


def tree(graph, name, parts, owners, combine=add):
    """Sum ``parts`` (in group order) pairwise, level by level; each sum runs where its first
    group lives, so that groups on one worker are summed there before anything moves."""
    nodes = root_inputs(graph, name, parts, owners, combine)
    if len(nodes) == 1:
        return nodes[0]
    return graph.task(f"{name}-root", combine, *nodes, worker=owners[0])


def root_inputs(graph, name, parts, owners, combine=add):
    """The tree of :func:`tree` without its root: the (at most two) references the root
    would sum, for a task on the first group's owner that sums them itself (a task less a
    round)."""
    level = 0
    nodes = list(zip(parts, owners, strict=True))
    while len(nodes) > 2:
        level += 1
        merged = []
        for k in range(0, len(nodes), 2):
            if k + 1 == len(nodes):
                merged.append(nodes[k])
                continue
            (left, where), (right, _) = nodes[k], nodes[k + 1]
            merged.append(
                (graph.task(f"{name}-{level}-{k // 2}", combine, left, right, worker=where), where)
            )
        nodes = merged
    return [node for node, _ in nodes]


#: workers (the home included) from which :func:`relay` sends the home's vector down a tree
RELAY_WORKERS = 9


def relay(graph, name, ref, owners, home):
    """``ref`` (made on ``home``) as each owner's tasks should read it: from
    :data:`RELAY_WORKERS` distinct workers on, sent down a binary tree of them, each
    passing it on to at most two more, so that the home's link carries it twice a round,
    not once for every other worker (on 64 machines the flat send is most of a round:
    BENCHMARKS.md, tron's plan). A level of the tree is two sends one after the other, so
    below that the flat send is no slower (measured on 4 namespaced workers: BENCHMARKS.md,
    "Across network namespaces"); there, and in-process, ``ref`` itself.

    Returns a reference for each entry of ``owners``."""
    workers = list(dict.fromkeys([home, *owners]))
    if len(workers) < RELAY_WORKERS:
        return [ref] * len(owners)
    at = {workers[0]: ref}
    for i in range(1, len(workers)):
        parent = at[workers[(i - 1) // 2]]
        at[workers[i]] = graph.task(f"{name}-relay-{i}", _same, parent, worker=workers[i])
    return [at[owner] for owner in owners]


def _same(x):
    return x


def run_graph(client, n_groups, graph, outputs):
    """Run ``graph``: in-process values (``client`` None), or futures on the client (one
    message)."""
    if client is None:
        return graph.compute(outputs, scheduler="sync" if n_groups == 1 else None)
    return graph.submit(client, outputs)


#: seconds between the checks that a run's owners are alive while it waits for a result
WATCH_SECONDS = 1.0


class OwnerLost(RuntimeError):
    """A row group's owner left the cluster while a run waited for a result.

    Its groups (and the dual values kept with them) are gone, and the tasks pinned to it
    would wait for it for ever: the driver treats this as a lost worker and replays the
    epochs from its recovery point, on the workers there are then.
    """


def value(ref, owners=()):
    """A small result: the value itself in-process, fetched from a future on a client.

    While it waits, every :data:`WATCH_SECONDS` it checks that ``owners`` (the run's group
    owners) are still workers of the cluster, and raises :class:`OwnerLost` when one is not:
    a task pinned to a worker that is gone never runs and never fails.
    """
    if not hasattr(ref, "result"):
        return ref
    while True:
        try:
            return ref.result(timeout=WATCH_SECONDS)
        except TimeoutError:
            check_owners(ref.client, owners)


def check_owners(client, owners):
    """Raise :class:`OwnerLost` when one of ``owners`` is not a worker of ``client``'s
    cluster now."""
    if not owners:
        return
    from daskpd._cluster import worker_addresses

    gone = set(owners) - set(worker_addresses(client))
    if gone:
        raise OwnerLost(f"the row groups' owner {sorted(gone)[0]} left the cluster")


def bundles(owners):
    """The groups each task of a round runs, as tuples of group indices: on a cluster, each
    run of consecutive groups with one owner (the groups are given to the workers in
    contiguous runs, so one run a worker), in-process one group each.

    A round then costs one task a worker whatever the number of groups: more groups than
    workers change the sums' order (a sum over a worker's groups, then the tree over the
    workers) but not the number of tasks the scheduler handles.
    """
    if not owners or owners[0] is None:
        return tuple((k,) for k in range(len(owners)))
    runs = [[0]]
    for k in range(1, len(owners)):
        if owners[k] == owners[k - 1]:
            runs[-1].append(k)
        else:
            runs.append([k])
    return tuple(tuple(run) for run in runs)


def local_sum(parts):
    """The sum of the shares of the groups one task holds (:class:`Share`, arrays, or tuples
    of them), pairwise in the order given: the order :func:`tree` sums groups in.

    Merging the shares' sorted column lists costs their lengths (the columns the groups'
    rows touch), not the run's columns: on a Dask worker a vector on all of those would be
    fresh memory every round (the nanny trims the allocator), whose page faults cost more
    than the merges.
    """
    parts = list(parts)
    while len(parts) > 1:
        parts = [
            add(parts[k], parts[k + 1]) if k + 1 < len(parts) else parts[k]
            for k in range(0, len(parts), 2)
        ]
    return parts[0]


def ranges(bounds):
    """``(start, stop)`` of each group's rows."""
    return [(int(bounds[k]), int(bounds[k + 1])) for k in range(len(bounds) - 1)]


def read_groups(
    data, problem, client, owners, bounds, threads, positions, token, name, stream_nnz=0
):
    """The row groups, read once each by its owner (futures), or in-process (values);
    ``positions`` renumbers their columns into the used ones (None: all are used); with
    several groups each keeps its own columns. ``stream_nnz`` above 0: each group is
    opened as a :class:`StreamedGroup` of chunks of about that many nonzeros instead."""
    own_columns = len(owners) > 1
    class_pair = class_weight_pair(problem, data)
    group_ranges = ranges(bounds)
    if stream_nnz:
        task, last = open_group, int(stream_nnz)
    else:
        task, last = load_group, own_columns
    if client is not None and is_on_disk(data):
        if positions is not None:
            # once to every owner, not once per task through the scheduler
            positions = client.scatter(positions, broadcast=True, hash=False)
        graph = TaskGraph(f"{name}-rows", token)
        groups = graph.submit(
            client,
            [
                graph.task(
                    k, task, data, start, stop, class_pair, threads, positions, last,
                    worker=owners[k],
                )  # fmt: skip
                for k, (start, stop) in enumerate(group_ranges)
            ],
        )
        # the positions are held until the groups are read (a graph sent does not hold them)
        from distributed import wait

        wait(groups)
        return groups
    loaded = (
        task(data, start, stop, class_pair, threads, positions, last)
        for start, stop in group_ranges
    )
    if client is not None:
        return [
            client.scatter([group], workers=[owners[k]], hash=False)[0]
            for k, group in enumerate(loaded)
        ]
    return list(loaded)


class Layout(NamedTuple):
    """Where a run's row groups live and what they read: the owners (one a group; None
    in-process), the threads of a group's task, the data's used columns and their positions
    (None when every column is used), the groups' row bounds, and the run's token."""

    owners: tuple
    threads: int
    used: np.ndarray
    positions: np.ndarray | None
    bounds: np.ndarray
    token: str


def group_layout(data, client, grid, threads):
    """The :class:`Layout` of a run on ``grid`` row groups (None: one per worker, one
    in-process), ``threads`` a group's task (None: the owner's idle cores on a cluster, one
    in-process). The run's vectors hold the columns with a nonzero only (on the splice-like
    sets about a third of ``n_features``; ``w`` is 0 on the others at the optimum)."""
    workers = worker_list(client)
    grid = int(grid) if grid is not None else max(1, len(workers))
    owners = tuple(workers[k * len(workers) // grid] if workers else None for k in range(grid))
    if threads is not None:
        threads = int(threads)
    elif client is not None:
        threads = min(idle_cores(client, owners), 64)
    else:
        threads = 1
    used = np.flatnonzero(np.asarray(data.col_nnz) > 0)
    positions = None
    if used.shape[0] < int(data.n_features):
        positions = np.full(int(data.n_features), -1, dtype=np.int32)
        positions[used] = np.arange(used.shape[0], dtype=np.int32)
    bounds = row_group_bounds(data, grid)
    return Layout(owners, threads, used, positions, bounds, uuid.uuid4().hex[:12])


@dataclasses.dataclass(frozen=True)
class ResidentState:
    """What an exact-product method's state holds from its start: the problem, the run's
    settings and options, the client (None in-process), the groups' owners, row bounds and
    references (futures on a client), the run's token and used columns. A method's state
    adds its iterate and counters."""

    problem: Any
    settings: Any
    options: Any
    client: Any
    owners: tuple
    bounds: np.ndarray
    groups: list
    token: str
    #: the data's columns with a nonzero, increasing: the run's d-vectors are on these
    used: np.ndarray

    @property
    def home(self):
        """The worker of the run's d-vectors (group 0's owner)."""
        return self.owners[0]


class ExactMethod(Solver):
    """What the exact-product methods (``tron``, ``dual_newton``) share of the solver
    protocol: every epoch (a Newton step) ends with a gradient round that certifies its
    point, whose sums ``state.scalars`` hold, and the run counts its rounds and passes.

    A subclass names the loss kernels it runs (``kernel_losses``); the regularizer is l2.
    """

    has_certificate = True
    #: the loss kernels' codes the method runs (``daskpd.kernels.scalar``)
    kernel_losses: tuple = ()
    #: the method's state: a frozen dataclass with the fields :meth:`_setup` fills
    State: type | None = None

    def _setup(self, problem, data, client, options):
        """The state without a point: the run's layout and settings, and its groups, read
        once each by its owner."""
        layout = group_layout(data, client, options.grid, options.threads)
        groups, fields = self.read_rows(problem, data, client, options, layout)
        return self.State(
            problem=problem,
            settings=self.settings(problem, data, options, layout),
            options=options,
            client=client,
            owners=layout.owners,
            bounds=layout.bounds,
            groups=groups,
            token=layout.token,
            used=layout.used,
            **self.state_fields(data, layout),
            **fields,
        )

    def read_rows(self, problem, data, client, options, layout):
        """The groups (futures on a client, else values) and the state fields that say how
        they were read: here each read once by its owner and kept (a method that can stream
        its rows overrides this)."""
        groups = read_groups(
            data, problem, client, layout.owners, layout.bounds, layout.threads,
            layout.positions, layout.token, self.name.replace("_", "-"),
        )  # fmt: skip
        return groups, {}

    def settings(self, problem, data, options, layout):
        """The run's constants the tasks read (the method's settings tuple)."""
        raise NotImplementedError

    def state_fields(self, data, layout) -> dict:
        """The method's own state fields known at the start (none by default)."""
        return {}

    def check(self, problem, data, options):
        """Raise ``ValueError`` for anything the method cannot do, before any Dask work."""
        self.capabilities.check_kernels(self.name, problem, self.kernel_losses, (scalar.L2,))
        check_grid_rows(options.grid, data)

    def certificate(self, state):
        """``(primal, dual)`` of :meth:`iterate`'s point, from its gradient round's sums."""
        return state.scalars["primal"], state.scalars["dual"]

    def start_certificate(self, state):
        """The certificate of the start point (its gradient round ran in :meth:`init`)."""
        return self.certificate(state)

    def counters(self, state) -> dict:
        """Rounds and passes over the rows so far: what the many-machine benchmark reports."""
        return {"rounds": state.rounds, "passes": state.passes}

    def state_arrays(self, state) -> dict:
        """``w``, the per-row vector :meth:`saved_rows` names (gathered) and the counters."""
        name, pieces = self.saved_rows(state)
        return {
            "w": self.iterate(state).w,
            name: np.concatenate([value(piece, state.owners) for piece in pieces]),
            "rounds": np.asarray(state.rounds),
            "passes": np.asarray(state.passes),
        }

    def saved_rows(self, state):
        """``(name, pieces)``: the per-row vector a checkpoint keeps beside ``w`` (the
        pieces in row order, values or futures), from which :meth:`restore` continues."""
        raise NotImplementedError
