"""The cost model of the trust-region Newton method (``solver="tron"``), for planning runs on
many machines (issue 49).

A run of :mod:`daskpd.solvers.tron` is rounds, each one graph whose result the driver waits
for. Four kinds (:class:`TronRounds`):

``hessian``
    A conjugate-gradient step: ``w``'s home sends the direction ``v`` (a d-vector) to every
    owner, every group computes ``X_k^T (curv_k * (X_k v))`` (each of its nonzeros read
    twice) on its own columns, the shares are merged up a tree, the CG step's vector algebra
    runs on the home.
``step``
    A Newton step's line search at ``t = 1`` with the gradient there, in one round: the
    home sends the step ``s``; every group computes ``X_k s`` (a read), its loss at ``u + X_k
    s`` (a number, summed up a tree) and its gradient share there (a second read: ``X_k^T
    z_k`` and the preconditioner's diagonal, two vectors merged up the tree); the home makes
    the new point and its certificate.
``numbers``
    A shorter step length, when ``t = 1`` was refused: a number from each group, no read.
``gradient``
    The gradient round at the accepted shorter step (one read, two vectors), after numbers.

A round of ``kind`` with ``K`` row groups on ``P`` workers (``g = ceil(K / P)`` groups a
worker, run one after another) of ``T`` threads a group, ``nnz`` nonzeros, ``d`` used
columns (the home's vectors), ``c`` columns of a group's share (its own columns; ``d`` with
one group) and ``x`` columns of the share a worker sends up the tree (its groups' union),
costs

    ``round = g * (nnz / K) * nnz_ns[kind] / T ** b[kind]``         the groups' passes
    ``      + g * vectors * c * (T * group_ns + [K > 1] * merge_ns)``  their shares
    ``      + fixed[kind] + d * home_ns[kind]``                       the graph; the home's algebra
    ``      + [K > 1] * vectors * d * scatter_ns``                    the merged share made dense
    ``      + (tasks(kind, K) - tasks(kind, 1)) * task_seconds``      the scheduler's tasks
    ``      + levels * latency + network_levels * x (8 vectors + 4) / B``  the reduction
    ``      + sent_seconds``                                          the home's d-vector out

with ``vectors`` the vectors the round reduces (hessian 1, step and gradient 2, numbers 0: a
number; a share carries its columns' int32 ids), ``tasks(kind, K)`` the tasks of its graph
(:data:`TASKS`), ``levels = ceil(log2 K)`` the tree's levels (each a hop between dependent
tasks), ``network_levels = ceil(log2 min(K, P))`` those that cross between workers, ``B`` a
link's bandwidth, and ``sent_seconds`` what the home's d-vector (hessian, step) takes to
reach the other ``min(K, P) - 1`` owners: ``(min(K, P) - 1) * 8 d / B`` as implemented
(every owner fetches it from the home, whose link carries them all: "flat"),
``network_levels * 8 d / B`` if it were relayed down a tree ("tree"). ``group_ns`` is what a
group's task pays a column of its share and a thread (the threads' output rows allocated,
written, summed: at ``T = 32`` and ``c = 12M`` 3 GB a vector a round), ``merge_ns`` what
merging it up the tree costs a column.

Streamed rows (``TronOptions.rows``: a group larger than its owner's memory is read again by
every pass, a chunk at a time, the next chunk in a thread beside the kernels) add to the
passes what reading them from the store costs, ``stream_ns`` a nonzero read:

    ``      + [streamed] * g * (nnz / K) * store_reads[kind] * stream_ns``

with ``store_reads`` (:data:`STORE_READS`) the reads of the rows from the store a round of
each kind makes (a CG round 1: its two passes over a chunk read once; a step round 2, ``X
s`` and the gradient; a gradient round 1). A streamed group's share is on all the used
columns (``c = x = d``), and its start reads its labels only: ``init = init_fixed +
round("gradient")``. ``stream_ns`` is fitted on a streamed run's rounds against the kept
rows' model (:func:`fit_stream_ns`).

The start (``init``) reads every group on its owner (``init_ns`` a nonzero a worker reads)
and runs the first gradient round: ``init = init_fixed + g * (nnz / K) * init_ns +
round("gradient")``. A run to a certified ``(1 + 1e-3) P*`` costs ``init + sum over kinds of
count * round``; the counts do not depend on ``K`` (the iterates are exact global
quantities, up to rounding) and come from measured runs.

:func:`fit_tron` takes ``fixed``, ``task_seconds`` and the latency of a level on the measured
cluster from rounds on a set of few nonzeros at several ``K`` (given the other terms),
``nnz_ns`` and ``b`` from the rounds of the large sets (one thread; two), ``home_ns``,
``scatter_ns``, ``group_ns`` and ``merge_ns`` as measured apart (microbenchmarks of the tasks'
vector work), the bandwidth as measured (a tree-sum of d-vectors on the cluster), and
``init_fixed``, ``init_ns`` from the runs' starts. :func:`plan_tron` prices a job on ``N``
machines, with the latency and bandwidth of links measured across network namespaces
(``BENCHMARKS.md``, "Many machines: reductions across network namespaces").
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

import numpy as np

from daskpd.bench.costmodel import BINARY_NNZ_BYTES, Job, Machines, _line

#: the kinds of round, in the order a Newton step runs them
KINDS = ("hessian", "step", "numbers", "gradient")
#: reads of every nonzero a round of each kind makes (none: its nnz term is 0)
READS = {"hessian": 2, "step": 2, "numbers": 0, "gradient": 1}
#: vectors a round reduces over the groups (0: a number)
REDUCED = {"hessian": 1, "step": 2, "numbers": 0, "gradient": 2}
#: d-vectors a round sends from w's home to the groups' owners (the CG direction, the step)
SENT = {"hessian": 1, "step": 1, "numbers": 0, "gradient": 0}
#: reads of a group's rows from the store a round of each kind makes when they are streamed
STORE_READS = {"hessian": 1, "step": 2, "numbers": 0, "gradient": 1}
#: tasks of a round's graph with K groups, ``(per group, more)``: a CG round's products and
#: their tree, the direction, the step and its scalars; a step round's X s, losses, gradients
#: and their shares, two trees, the three arrays each group keeps, and five tasks on the home
TASKS = {"hessian": (2, 2), "step": (9, 3), "numbers": (2, -1), "gradient": (6, 2)}
#: bytes of one entry of a d-vector (float64)
VECTOR_BYTES = 8
#: bytes of a column id that travels with a group's share of a product (int32)
INDEX_BYTES = 4
#: alternations of :func:`fit_tron` between the fixed terms and the passes
ROUNDS_OF_FIT = 30
#: at most this many nonzeros: a set whose rounds are the fixed cost
SMALL_NNZ = 1e6


@dataclass(frozen=True)
class TronRounds:
    """Rounds of a run by kind (module docstring), after its start's gradient round.

    Parameters
    ----------
    newton : float
        Newton steps (each one ``step`` round).
    hessian : float
        CG steps.
    numbers : float
        Shorter step lengths tried (after a refused ``t = 1``).
    gradient : float
        Gradient rounds of their own (one a refused ``t = 1``).
    """

    newton: float
    hessian: float
    numbers: float = 0.0
    gradient: float = 0.0

    def count(self, kind: str) -> float:
        """Rounds of ``kind``."""
        return {"hessian": self.hessian, "step": self.newton, "numbers": self.numbers,
                "gradient": self.gradient}[kind]  # fmt: skip

    @property
    def rounds(self) -> float:
        """Rounds as :meth:`Tron.counters` counts them (the start's included)."""
        return 1 + self.hessian + self.newton + self.numbers + self.gradient

    @property
    def passes(self) -> float:
        """Passes over the nonzeros as :meth:`Tron.counters` counts them (a CG step's
        counted once; a step round's two, ``X s`` and the gradient)."""
        return 1 + self.hessian + 2 * self.newton + self.gradient


@dataclass(frozen=True)
class Layout:
    """``groups`` row groups on ``workers`` workers (consecutive groups share a worker, as
    :class:`Tron` places them), ``threads`` threads a group; ``streamed``: the groups' rows
    are read from the store by every pass (``TronOptions.rows``)."""

    groups: int
    workers: int
    threads: int = 1
    streamed: bool = False

    @property
    def per_worker(self) -> int:
        """Groups on the busiest worker (they run one after another)."""
        return math.ceil(self.groups / self.workers)

    @property
    def owners(self) -> int:
        """Workers that hold a group."""
        return min(self.groups, self.workers)

    @property
    def levels(self) -> int:
        """Levels of the reduction tree."""
        return math.ceil(math.log2(self.groups)) if self.groups > 1 else 0

    @property
    def network_levels(self) -> int:
        """Levels whose sums cross between workers (the groups of a worker are summed there
        first)."""
        return math.ceil(math.log2(self.owners)) if self.owners > 1 else 0


@dataclass(frozen=True)
class Columns:
    """Vector lengths of a run: ``used`` (the home's vectors, the sent direction), ``share``
    (a group's own columns) and ``cross`` (what a worker's merged shares cover); the last
    two default to ``used`` (one group; or every group using every column, as at the job's
    group sizes)."""

    used: float
    share: float | None = None
    cross: float | None = None

    @property
    def of_share(self) -> float:
        return self.used if self.share is None else self.share

    @property
    def crossing(self) -> float:
        return self.used if self.cross is None else self.cross


def share_bytes(n_columns: float, vectors: int) -> float:
    """Bytes of a share of ``vectors`` vectors on ``n_columns`` columns, their ids with them
    (none for a number)."""
    return n_columns * (VECTOR_BYTES * vectors + INDEX_BYTES) if vectors else 0.0


@dataclass(frozen=True)
class Network:
    """The links between workers.

    Parameters
    ----------
    latency : float
        Seconds a level of a reduction costs beyond its bytes (a scheduler hop, a transfer's
        start): Dask's, measured as such.
    bandwidth : float
        Bytes a second one link carries.
    broadcast : {"flat", "tree"}, default="flat"
        How the home's d-vector reaches the owners: each fetches it from the home (as
        implemented), or relayed down a tree.
    """

    latency: float
    bandwidth: float
    broadcast: str = "flat"

    def __post_init__(self):
        if self.broadcast not in ("flat", "tree"):
            raise ValueError(f"broadcast must be 'flat' or 'tree', got {self.broadcast!r}")

    def reduce_seconds(self, layout: Layout, n_cross: float, vectors: int) -> float:
        """A tree-sum of ``vectors`` vectors of ``n_cross`` columns (0: a number)."""
        return (
            layout.levels * self.latency
            + layout.network_levels * share_bytes(n_cross, vectors) / self.bandwidth
        )

    def send_seconds(self, layout: Layout, n_used: float, vectors: int) -> float:
        """``vectors`` d-vectors from the home to every other owner."""
        bytes_ = VECTOR_BYTES * n_used * vectors
        hops = layout.owners - 1 if self.broadcast == "flat" else layout.network_levels
        return hops * bytes_ / self.bandwidth


@dataclass(frozen=True)
class TronRates:
    """The fitted parameters of a tron round (module docstring); dicts by kind.

    Parameters
    ----------
    nnz_ns : dict
        Core-nanoseconds a nonzero of a group costs a round, one thread (kinds that read).
    thread_exponent : dict
        ``b`` in ``T ** b``, what ``T`` threads of a group gain.
    fixed : dict
        Seconds a round costs whatever the data (its graph, the driver, the scheduler).
    home_ns : dict
        Nanoseconds a used column costs the home's vector algebra a round.
    group_ns : float
        Nanoseconds a group's task costs a column of its share, a thread and a vector.
    merge_ns : float
        Nanoseconds merging a share up the tree costs a column and a vector.
    scatter_ns : float
        Nanoseconds a used column and a reduced vector cost the home with several groups
        (the merged share made dense).
    task_seconds : float
        Seconds a task of a round's graph costs (the scheduler, the worker's dispatch),
        beyond those of one group's round.
    hop : float
        Seconds a level of the reduction tree costs on the measured cluster (the latency of
        its :class:`Network`).
    init_fixed, init_ns : float
        The start beyond its gradient round: seconds, and nanoseconds a nonzero a worker
        reads.
    stream_ns : float
        Nanoseconds a nonzero read from the store costs a streamed round beyond its passes
        (on its owner, a reader thread beside the kernels' threads).
    """

    nnz_ns: dict
    thread_exponent: dict
    fixed: dict
    home_ns: dict
    group_ns: float = 0.0
    merge_ns: float = 0.0
    scatter_ns: float = 0.0
    task_seconds: float = 0.0
    hop: float = 0.0
    init_fixed: float = 0.0
    init_ns: float = 0.0
    stream_ns: float = 0.0


def _passes_seconds(rates, kind, nnz, layout) -> float:
    if READS[kind] == 0 or kind not in rates.nnz_ns:
        return 0.0
    per_group = nnz / layout.groups
    speedup = float(layout.threads) ** rates.thread_exponent.get(kind, 0.0)
    passes = layout.per_worker * per_group * rates.nnz_ns[kind] * 1e-9 / speedup
    return passes + _store_seconds(rates, kind, nnz, layout)


def _store_seconds(rates, kind, nnz, layout) -> float:
    """What reading a streamed round's rows from the store adds to its passes."""
    if not layout.streamed:
        return 0.0
    return layout.per_worker * nnz / layout.groups * STORE_READS[kind] * rates.stream_ns * 1e-9


def _beyond_passes(rates, kind, columns, layout, network) -> float:
    """A round's seconds beyond its passes over the nonzeros."""
    parts = _parts_beyond(rates, kind, columns, layout, network)
    return sum(parts.values())


def _parts_beyond(rates, kind, columns, layout, network) -> dict:
    several = layout.groups > 1
    # one group's share is the sum itself: nothing to merge, nothing to make dense
    shares = (
        layout.per_worker * REDUCED[kind] * columns.of_share
        * (layout.threads * rates.group_ns + several * rates.merge_ns) * 1e-9
    )  # fmt: skip
    return {
        "shares": shares,
        "home": columns.used * rates.home_ns.get(kind, 0.0) * 1e-9
        + several * REDUCED[kind] * columns.used * rates.scatter_ns * 1e-9,
        "graph": rates.fixed[kind] + extra_tasks(kind, layout.groups) * rates.task_seconds,
        "network": network.reduce_seconds(layout, columns.crossing, REDUCED[kind])
        + network.send_seconds(layout, columns.used, SENT[kind]),
    }


def round_parts(rates, kind, nnz, columns, layout, network) -> dict:
    """A round's seconds by term: ``passes`` (the groups' nonzeros), ``shares`` (their
    output rows, merged), ``home`` (its algebra), ``graph`` (fixed and tasks) and
    ``network`` (the reduction and the home's vector out)."""
    return {
        "passes": _passes_seconds(rates, kind, nnz, layout),
        **_parts_beyond(rates, kind, columns, layout, network),
    }


def extra_tasks(kind: str, groups: int) -> int:
    """Tasks of a round of ``kind`` with ``groups`` groups beyond those with one."""
    return TASKS[kind][0] * (groups - 1)


def round_seconds(rates, kind, nnz, columns, layout, network) -> float:
    """Seconds of one round of ``kind`` (module docstring)."""
    return _passes_seconds(rates, kind, nnz, layout) + _beyond_passes(
        rates, kind, columns, layout, network
    )


def init_seconds(rates, nnz, columns, layout, network) -> float:
    """Seconds of the start: the groups read (streamed: their labels only), the first
    gradient round."""
    read = rates.init_fixed
    if not layout.streamed:
        read += layout.per_worker * nnz / layout.groups * rates.init_ns * 1e-9
    return read + round_seconds(rates, "gradient", nnz, columns, layout, network)


def seconds_to_line(rates, rounds: TronRounds, nnz, columns, layout, network) -> float:
    """Seconds of a call to the certified line: the start, then every round."""
    return init_seconds(rates, nnz, columns, layout, network) + sum(
        rounds.count(kind) * round_seconds(rates, kind, nnz, columns, layout, network)
        for kind in KINDS
    )


class _Measured:
    """What :class:`RoundTime` and :class:`TronRun` share: the :class:`Layout` of the
    measured configuration, from their ``groups``, ``workers`` and ``threads``."""

    @property
    def layout(self) -> Layout:
        return Layout(self.groups, self.workers, self.threads, self.streamed)


@dataclass(frozen=True)
class RoundTime(_Measured):
    """A measured round: the median seconds of the rounds of one ``kind`` of a
    configuration."""

    label: str
    kind: str
    nnz: float
    columns: Columns
    groups: int
    workers: int
    threads: int
    seconds: float
    streamed: bool = False


@dataclass(frozen=True)
class TronRun(_Measured):
    """A measured run to the certified line: its counts, its start and its wall seconds."""

    label: str
    nnz: float
    columns: Columns
    groups: int
    workers: int
    threads: int
    rounds: TronRounds
    init_seconds: float
    wall_to: float
    streamed: bool = False


def fit_tron(times, runs, *, home_ns, scatter_ns, group_ns, merge_ns, bandwidth) -> TronRates:
    """Fit :class:`TronRates` on measured rounds and runs of one kind of cluster.

    - ``fixed[kind]``, ``task_seconds`` and ``hop`` (the latency of a tree level there):
      least squares over the small sets' rounds (at most :data:`SMALL_NNZ` nonzeros) at
      several ``K``, of what is left beyond the other terms, against a constant by kind, the
      tasks beyond one group's round and the tree's levels;
    - ``nnz_ns[kind]``: the median over the one-thread rounds of the large sets of what is
      left per nonzero a worker passes over (alternating with the above,
      :data:`ROUNDS_OF_FIT` times);
    - ``thread_exponent[kind]``: the median of ``log(one thread's time / theirs) /
      log(threads)`` over the rounds with several threads on the largest set that has
      them (0 without any);
    - ``init_fixed``, ``init_ns``: a line through the runs' starts less their gradient
      round, against the nonzeros a worker reads.

    The kinds that follow a refused ``t = 1`` only may have no measured round: ``gradient``
    then takes half the step round's per-nonzero cost (it reads once, the step twice), its
    exponent and its fixed cost; ``numbers`` the CG round's fixed cost.

    Parameters
    ----------
    times : sequence of RoundTime
    runs : sequence of TronRun
    home_ns : dict
        Kind -> nanoseconds a used column costs the home (measured apart).
    scatter_ns, group_ns, merge_ns : float
        Measured apart: the home's dense copy of a merged share (a column and a vector), a
        group's share (a column, a thread and a vector), merging it (a column and a vector).
    bandwidth : float
        Bytes a second between the workers (measured apart).

    Raises
    ------
    ValueError
        A term has no record to be fitted on (it names which).
    """
    times, runs = list(times), list(runs)
    rates = TronRates({}, {}, dict.fromkeys(KINDS, 0.0), dict(home_ns), group_ns, merge_ns,
                      scatter_ns)  # fmt: skip
    reading = ("hessian", "step", "gradient")
    for kind in ("hessian", "step"):
        if not any(r.kind == kind and r.nnz <= SMALL_NNZ for r in times):
            raise ValueError(f"no round of kind {kind!r} on a small set to fit its fixed cost")
        if not any(r.kind == kind and r.nnz > SMALL_NNZ and r.threads == 1 for r in times):
            raise ValueError(f"no one-thread round of kind {kind!r} on a large set for nnz_ns")
    small = [r for r in times if r.kind in reading and r.nnz <= SMALL_NNZ]
    if len({r.groups for r in small if r.groups > 1}) < 2:
        raise ValueError(
            "no small set's rounds at two row-group counts above one, to fit the tasks' and "
            "the tree levels' costs apart"
        )
    kinds = sorted({r.kind for r in small}, key=KINDS.index)
    bytes_only = Network(0.0, bandwidth)

    def rest(rates, r):
        """Seconds of ``r`` beyond its fixed, task and level costs."""
        beyond = _beyond_passes(
            dataclasses.replace(rates, fixed=dict.fromkeys(KINDS, 0.0), task_seconds=0.0),
            r.kind, r.columns, r.layout, bytes_only,
        )  # fmt: skip
        return r.seconds - _passes_seconds(rates, r.kind, r.nnz, r.layout) - beyond

    for _ in range(ROUNDS_OF_FIT):
        design = np.array([
            [float(r.kind == k) for k in kinds] + [extra_tasks(r.kind, r.groups),
                                                   r.layout.levels]
            for r in small
        ])  # fmt: skip
        solution = np.linalg.lstsq(design, np.array([rest(rates, r) for r in small]))[0]
        fixed = dict(zip(kinds, (float(v) for v in solution[: len(kinds)]), strict=True))
        task_seconds, hop = float(solution[-2]), float(solution[-1])
        # a gradient round's graph is the step round's without the X s and the loss
        fixed.setdefault("gradient", fixed["step"])
        fitted = dataclasses.replace(rates, task_seconds=task_seconds, hop=hop,
                                     fixed={**fixed, "numbers": 0.0})  # fmt: skip
        numbers = [r for r in times if r.kind == "numbers"]
        net = Network(hop, bandwidth)
        fixed["numbers"] = (
            statistics.median(r.seconds - _beyond_passes(fitted, "numbers", r.columns, r.layout,
                                                         net) for r in numbers)
            if numbers
            else fixed["hessian"]  # a CG round's graph without its work
        )  # fmt: skip
        rates = dataclasses.replace(fitted, fixed=fixed)
        nnz_ns, exponents = {}, {}
        for kind in reading:
            big = [r for r in times if r.kind == kind and r.nnz > SMALL_NNZ]
            if not any(r.threads == 1 for r in big):
                continue
            work = {
                r: r.seconds - _beyond_passes(rates, kind, r.columns, r.layout, net) for r in big
            }
            nnz_ns[kind] = statistics.median(
                work[r] / (r.layout.per_worker * r.nnz / r.groups) * 1e9
                for r in big
                if r.threads == 1
            )
            threaded = [r for r in big if r.threads > 1]
            # at the largest scale only: at smaller ones the rest of a round is a visible
            # part of it, and its error lands in the exponent
            largest = max((r.nnz for r in threaded), default=0)
            threaded = [r for r in threaded if r.nnz == largest]
            exponents[kind] = (
                statistics.median(
                    math.log(nnz_ns[kind] * 1e-9 * r.layout.per_worker * r.nnz / r.groups / work[r])
                    / math.log(r.threads)
                    for r in threaded
                )
                if threaded
                else 0.0
            )
        if "gradient" not in nnz_ns:
            nnz_ns["gradient"] = nnz_ns["step"] * READS["gradient"] / READS["step"]
            exponents["gradient"] = exponents["step"]
        rates = dataclasses.replace(rates, nnz_ns=nnz_ns, thread_exponent=exponents)
    if not runs:
        raise ValueError("no run to fit the start (init) on")
    net = Network(rates.hop, bandwidth)
    starts = [
        (
            r.layout.per_worker * r.nnz / r.groups,
            r.init_seconds - round_seconds(rates, "gradient", r.nnz, r.columns, r.layout, net),
        )
        for r in runs
    ]
    init_fixed, per_nnz = _line([x for x, _ in starts], [y for _, y in starts])
    return dataclasses.replace(rates, init_fixed=init_fixed, init_ns=per_nnz * 1e9)


def fit_stream_ns(rates, times, network) -> TronRates:
    """``rates`` with ``stream_ns`` fitted on streamed rounds (:class:`RoundTime` whose
    ``streamed`` is set; kinds that read the store): least squares through the origin of
    what each round took beyond the kept rows' model of it, against the nonzeros its
    busiest worker read from the store (:data:`STORE_READS`).

    Raises
    ------
    ValueError
        No streamed round that reads the store.
    """
    kept = dataclasses.replace(rates, stream_ns=0.0)
    points = [
        (
            r.layout.per_worker * r.nnz / r.groups * STORE_READS[r.kind],
            r.seconds - round_seconds(kept, r.kind, r.nnz, r.columns, r.layout, network),
        )
        for r in times
        if r.layout.streamed and STORE_READS[r.kind]
    ]
    if not points:
        raise ValueError("no streamed round that reads the store to fit stream_ns on")
    reads = np.array([x for x, _ in points])
    extra = np.array([y for _, y in points])
    return dataclasses.replace(rates, stream_ns=float(reads @ extra / (reads @ reads)) * 1e9)


def check_table(rates, times, runs, network) -> tuple[list[dict], list[dict]]:
    """Every measured round and run against the model on ``network``: ``(rounds, runs)``,
    lists of dicts with ``label`` (and ``kind``), ``measured``, ``model`` and ``error``
    (relative)."""
    round_rows = []
    for r in times:
        model = round_seconds(rates, r.kind, r.nnz, r.columns, r.layout, network)
        round_rows.append({"label": r.label, "kind": r.kind, "measured": r.seconds,
                           "model": model, "error": model / r.seconds - 1})  # fmt: skip
    run_rows = []
    for r in runs:
        model = seconds_to_line(rates, r.rounds, r.nnz, r.columns, r.layout, network)
        start = init_seconds(rates, r.nnz, r.columns, r.layout, network)
        run_rows.append({"label": r.label, "measured": r.wall_to, "model": model,
                         "error": model / r.wall_to - 1, "init": r.init_seconds,
                         "init_model": start})  # fmt: skip
    return round_rows, run_rows


@dataclass(frozen=True)
class CountLaw:
    """Rounds to the line as a power law of ``alpha`` and the rows ``n``: for Newton steps
    and CG steps, ``count = exp(a) * alpha ** b * n ** c`` (``coefficients[field] = (a, b,
    c)``); shorter steps and their gradient rounds as a share of the Newton steps
    (``shares``)."""

    coefficients: dict
    shares: dict

    def at(self, alpha: float, n_samples: float) -> TronRounds:
        """The counts at ``alpha`` with ``n_samples`` rows."""
        counts = {
            field: math.exp(a + b * math.log(alpha) + c * math.log(n_samples))
            for field, (a, b, c) in self.coefficients.items()
        }
        return TronRounds(
            newton=counts["newton"],
            hessian=counts["hessian"],
            numbers=self.shares["numbers"] * counts["newton"],
            gradient=self.shares["gradient"] * counts["newton"],
        )


def fit_count_law(points) -> CountLaw:
    """Fit :class:`CountLaw` by least squares in logs on measured ``(alpha, n_samples,
    TronRounds)``.

    Raises
    ------
    ValueError
        Fewer than two alphas or two row counts (the exponents cannot be told apart).
    """
    points = list(points)
    if len({p[0] for p in points}) < 2 or len({p[1] for p in points}) < 2:
        raise ValueError("the count law needs measured counts at two alphas and two row counts")
    design = np.array([[1.0, math.log(a), math.log(n)] for a, n, _ in points])
    coefficients = {}
    for field in ("newton", "hessian"):
        target = np.array([math.log(getattr(c, field)) for _, _, c in points])
        coefficients[field] = tuple(float(v) for v in np.linalg.lstsq(design, target)[0])
    steps = sum(c.newton for _, _, c in points)
    shares = {f: sum(getattr(c, f) for _, _, c in points) / steps for f in ("numbers", "gradient")}
    return CountLaw(coefficients, shares)


def plan_tron(
    rates: TronRates, rounds: TronRounds, job: Job, machines: Machines, network: Network,
    n_used: float | None = None,
) -> dict:  # fmt: skip
    """A job on ``machines``: one row group a machine, all its cores the group's threads,
    every group's share on all ``n_used`` columns (default: the job's features).

    Returns a dict: ``layout``, ``round`` (seconds by kind), ``init``, ``seconds`` to the
    line, the ``passes`` part of it (the groups' nonzeros, the start's included),
    ``network`` (the rounds' reductions and sends), ``resident`` bytes of a machine's rows
    and ``fits`` (they take at most half its memory), and ``bytes_home``: what a CG round
    brings into and sends out of the home.
    """
    columns = Columns(job.n_features if n_used is None else n_used)
    layout = Layout(machines.count, machines.count, machines.cores)
    per_kind = {k: round_seconds(rates, k, job.nnz, columns, layout, network) for k in KINDS}
    passes = _passes_seconds(rates, "gradient", job.nnz, layout) + sum(
        rounds.count(k) * _passes_seconds(rates, k, job.nnz, layout) for k in KINDS
    )
    comm = sum(
        rounds.count(k)
        * (network.reduce_seconds(layout, columns.crossing, REDUCED[k])
           + network.send_seconds(layout, columns.used, SENT[k]))
        for k in KINDS
    )  # fmt: skip
    start = init_seconds(rates, job.nnz, columns, layout, network)
    total = start + sum(rounds.count(k) * per_kind[k] for k in KINDS)
    resident = job.nnz / machines.count * (job.nnz_bytes or BINARY_NNZ_BYTES)
    # a CG round: the home receives a share at every crossing level (it is every level's
    # left operand) and sends the direction to each owner (flat) or to one child a level
    sends = layout.owners - 1 if network.broadcast == "flat" else layout.network_levels
    bytes_home = {"in": layout.network_levels * share_bytes(columns.crossing, 1),
                  "out": sends * VECTOR_BYTES * columns.used}  # fmt: skip
    return {
        "layout": layout,
        "round": per_kind,
        "init": start,
        "seconds": total,
        "passes": passes,
        "network": comm,
        "resident": resident,
        "fits": resident <= 0.5 * machines.memory,
        "bytes_home": bytes_home,
    }
