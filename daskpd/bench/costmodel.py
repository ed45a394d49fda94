"""A cost model of training runs, fitted on runs measured here, for planning larger ones.

The default solver (CoCoA+, :mod:`daskpd.solvers.cocoa`) runs rounds; a round of ``K`` row
groups, one a machine, each run by ``T`` threads, costs

    ``round = nnz_g * pass_ns / S(T) + streamed * nnz_g * read_ns + fixed + d * feature_ns
    + comm / B``

with ``nnz_g = nnz / K`` the nonzeros of one group, ``pass_ns`` the core-nanoseconds a
nonzero costs a round (the full pass with its certificate, the exact change of ``w``, and
for the hinge losses the shrunk passes), ``S(T) = T ** b`` what ``T`` threads of one group
gain (PASSCoDe; measured at 1 and 2 threads, by loss: the threads write to the same hot
columns), ``read_ns`` what a streamed nonzero costs a round beyond its passes (its read and
decompression in one reader thread, which shares the machine's cores with the passes),
``fixed`` the round's fixed cost (its graph), ``feature_ns`` what a round costs a feature
(``w``'s sums, copies and norm: vectors of ``d``) and ``comm`` the bytes one machine
receives a round: each group's change of ``w`` goes to every other group's home, on the
group's columns, charged as ``(K - 1) * d * 8`` bytes (an all-gather, as implemented; every
column at the job's group sizes, 0.6-0.8 of them at 1e8 as measured; a tree all-reduce would
move ``2 * d * 8``).
Every term is by loss where the losses differ. All of them are fitted on this machine's 2
cores: ``S(T)`` beyond 2 threads and a reader that gets a core of its own are outside what
was measured, and the plan says so.

A run to a target costs ``init + first + rounds * round``, ``first`` what the first round
costs beyond a later one (for kept rows, their read). The rounds to ``(1 + 1e-3) P*`` come
from measured runs (:class:`RoundCounts`), not from a formula: with one group they hardly
change with the scale (3 to 15 over 1e5 to 5e9 nonzeros here); with two or more groups
(``sigma' = K``) they grow 1.2-26x for the logistic loss and 240-6,600x for the hinge loss
on splice-like data (``K`` = 2 to 16), whose rows share their low-order k-mers.

DSO's epoch (Section 5.5 of the paper): ``P`` workers in a ring, each epoch ``P`` hops, so
``epoch = nnz * update_ns / P + P * (hop + (d / P) * COLUMN_BYTES / B)``.

Fitting (:func:`fit_rates`) takes the parameters from the measured runs one term at a time,
and :func:`fit_table` compares every measured run with its prediction: the fit error on the
measured scales, before the model extrapolates (:func:`plan_cocoa`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field

#: Bytes of one column of ``w`` a DSO hop carries between machines (``w``, its AdaGrad
#: accumulator and the two SVRG snapshots, as :mod:`daskpd.solvers.dso._blocks` sends them).
COLUMN_BYTES = 32

#: Alternations of :func:`fit_rates` between the fixed terms and the passes.
ROUNDS_OF_FIT = 30

#: Bytes of one entry of a group's change of ``w`` (float64).
DW_BYTES = 8

#: Bytes a nonzero takes as the kernels read it (int32 column id; binary values are implied).
BINARY_NNZ_BYTES = 4

#: Share of a worker's memory limit that kept rows may take before ``rows="auto"`` streams
#: them (``daskpd.solvers.common.stream.STREAM_SHARE``, repeated here so that planning
#: imports no solver).
STREAM_SHARE = 0.4


@dataclass(frozen=True)
class MeasuredRun:
    """One measured run of the default solver (a record of ``bench_cost_model.py measure``).

    Parameters
    ----------
    label : str
        What was run, for the tables.
    nnz, n_samples, n_features : int
        The training set.
    loss : str
    alpha : float
    grid : int
        Row groups ``K``.
    threads : int
        Threads of one group.
    rows : {"memory", "stream"}
    round_seconds : float
        Median seconds of the rounds after the first.
    first_round_seconds : float
        The first round (for kept rows: their read, the rehearsal, the first pass).
    init_seconds : float
        Seconds of the call before the first round.
    rounds_to : int or None
        Rounds to a certified ``(1 + 1e-3) P*`` (the gap at most ``1e-3`` of the primal).
    wall_to : float or None
        Wall seconds of the ``solve`` call at that round.
    source : str
        The command, commit or log it came from.
    """

    label: str
    nnz: int
    n_samples: int
    n_features: int
    loss: str
    alpha: float
    grid: int
    threads: int
    rows: str
    round_seconds: float
    first_round_seconds: float
    init_seconds: float
    rounds_to: int | None
    wall_to: float | None
    source: str = ""

    @property
    def group_nnz(self) -> float:
        """Nonzeros of one row group."""
        return self.nnz / self.grid

    @property
    def kappa(self) -> float:
        """The run's :func:`conditioning`."""
        return conditioning(self.alpha, self.n_samples, self.nnz)


@dataclass(frozen=True)
class Rates:
    """The fitted parameters of the round model (module docstring).

    Parameters
    ----------
    pass_ns : dict
        Loss -> core-nanoseconds a nonzero costs a round with rows kept, one thread.
    thread_exponent : dict
        Loss -> ``b`` in ``S(T) = T ** b``, what ``T`` threads of a group gain.
    read_ns : dict
        Loss -> nanoseconds a streamed nonzero costs a round beyond its passes (the read
        and decompression in one reader thread, and what it takes from the passes' cores).
    fixed : float
        Seconds a round costs whatever the data.
    feature_ns : float
        Nanoseconds a round costs a feature (``w``'s vector work).
    first_fixed, first_ns : float
        What the first round costs beyond a later one: ``first_fixed`` seconds (the
        rehearsal, the first pass's extra work) and, for kept rows, ``first_ns`` a nonzero
        (their read).
    init_seconds : float
        Seconds of a call before its first round.
    """

    pass_ns: dict
    thread_exponent: dict
    read_ns: dict
    fixed: float
    feature_ns: float
    first_fixed: float = 0.0
    first_ns: float = 0.0
    init_seconds: float = 0.0

    def latency(self, n_features: float) -> float:
        """Seconds a round costs beyond its nonzeros, on ``n_features`` features."""
        return self.fixed + self.feature_ns * n_features * 1e-9

    def speedup(self, loss: str, threads: int) -> float:
        """What ``threads`` threads of one group gain over one, on ``loss``."""
        return float(threads) ** self.thread_exponent.get(loss, 0.0)


def conditioning(alpha: float, n_samples: float, nnz: float) -> float:
    """``kappa = alpha * n / R^2``, with ``R^2`` the mean squared row norm (binary rows: their
    nonzeros, ``nnz / n``): what CoCoA+'s rates depend on besides ``K``, comparable across
    scales (the same ``alpha`` is a better conditioned problem with more rows)."""
    return alpha * n_samples * n_samples / nnz


def _interpolate(points, x) -> tuple[float, float, float]:
    """``(value, low, high)`` at ``x`` from ``(x_i, y_i)`` points, linear in ``log x, log y``.

    Points at one ``x`` are merged into their median. Outside the points' range the
    nearest end's value holds (never extrapolated).
    """
    merged = {}
    for px, py in points:
        merged.setdefault(px, []).append(py)
    xs = sorted(merged)
    ys = [statistics.median(merged[px]) for px in xs]
    if x <= xs[0]:
        return ys[0], min(merged[xs[0]]), max(merged[xs[0]])
    if x >= xs[-1]:
        return ys[-1], min(merged[xs[-1]]), max(merged[xs[-1]])
    i = next(j for j in range(1, len(xs)) if xs[j] >= x)
    t = math.log(x / xs[i - 1]) / math.log(xs[i] / xs[i - 1])
    value = math.exp((1 - t) * math.log(ys[i - 1]) + t * math.log(ys[i]))
    return value, min(ys[i - 1], ys[i]), max(ys[i - 1], ys[i])


@dataclass(frozen=True)
class RoundCounts:
    """Rounds to ``(1 + 1e-3) P*`` as measured, by loss, row groups and conditioning.

    Parameters
    ----------
    counts : dict
        Loss -> {K: list of ``(kappa, rounds)``}, ``kappa`` from :func:`conditioning`.
        A count read off a run stopped before the target (:func:`rounds_from_rate`) is
        given like a measured one; the tables mark which is which.
    """

    counts: dict = field(default_factory=dict)

    def rounds(self, loss: str, grid: int, kappa: float) -> tuple[float, float, float]:
        """``(median, low, high)`` rounds for ``loss`` with ``grid`` groups at ``kappa``.

        At a measured ``K``: interpolated in ``log kappa`` between the measured
        conditionings (outside them, the nearest one's count). Between measured ``K``:
        interpolated in ``log K``; beyond the largest, growing as the measured ``K >= 2``
        counts do (a power of ``K`` fitted on them, never falling).

        Raises
        ------
        KeyError
            No measurement for ``loss``.
        ValueError
            No measurement for one group (``grid == 1``), or none with several groups.
        """
        by_grid = self.counts[loss]
        if grid == 1:
            if 1 not in by_grid:
                raise ValueError(f"no one-group round counts for loss {loss!r}")
            return _interpolate(by_grid[1], kappa)
        measured = sorted(k for k in by_grid if k >= 2)
        if not measured:
            raise ValueError(f"no round counts with several groups for loss {loss!r}")
        at = {k: _interpolate(by_grid[k], kappa) for k in measured}
        if grid in at:
            return at[grid]
        if grid < measured[-1]:
            lo = max(k for k in measured if k < grid)
            hi = min(k for k in measured if k > grid)
            value = _interpolate([(lo, at[lo][0]), (hi, at[hi][0])], grid)[0]
            return value, min(at[lo][0], at[hi][0]), max(at[lo][0], at[hi][0])
        logs = [math.log(k) for k in measured]
        slope = max(0.0, _line(logs, [math.log(at[k][0]) for k in measured])[1])
        last = measured[-1]
        value = at[last][0] * (grid / last) ** slope
        return value, at[last][0], value


def rounds_from_rate(relative_gaps, target: float = 1e-3, tail: int = 20) -> float:
    """Rounds until the relative gap reaches ``target``, extrapolated from a stopped run.

    The last ``tail`` rounds' gaps are fitted by a line in ``log gap`` (linear convergence,
    what CoCoA+ proves and what its long runs show); the round at which that line crosses
    ``target``. A run that reached ``target`` returns its first such round exactly.

    Parameters
    ----------
    relative_gaps : sequence of float
        Gap over primal after each round.
    target : float
    tail : int

    Returns
    -------
    float
        ``inf`` when the tail does not fall.
    """
    gaps = [float(g) for g in relative_gaps]
    for i, g in enumerate(gaps):
        if g <= target:
            return float(i + 1)
    start = len(gaps) - min(tail, len(gaps))
    intercept, slope = _line(
        [float(i + 1) for i in range(start, len(gaps))], [math.log(g) for g in gaps[start:]]
    )
    if slope >= 0:
        return math.inf
    return (math.log(target) - intercept) / slope


def _line(xs, ys) -> tuple[float, float]:
    """Least-squares ``(intercept, slope)`` of ``y`` on ``x`` (slope 0 if ``x`` is constant)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0
    return my - slope * mx, slope


def fit_rates(runs) -> Rates:
    """Fit :class:`Rates` on measured runs, one term at a time.

    - ``fixed`` and ``feature_ns``: a line through the rounds of the runs with at most 1e6
      nonzeros a group, less their passes, against their number of features (alternating
      with the terms below, :data:`ROUNDS_OF_FIT` times);
    - ``pass_ns[loss]``: median over the one-thread kept runs of what a round costs beyond
      that, per nonzero of the group;
    - ``thread_exponent[loss]``: median of ``log(one-thread time / their time) /
      log(threads)`` over the kept runs with more threads at the largest such scale (at
      smaller ones the threads' start is a visible part of a round);
    - ``read_ns[loss]``: median over the streamed runs of what their round costs beyond
      the passes, per nonzero;
    - ``first_fixed`` and ``first_ns``: a line through the kept runs' first round less a
      later one, against their nonzeros;
    - ``init_seconds``: median over all runs.

    Parameters
    ----------
    runs : sequence of MeasuredRun

    Returns
    -------
    Rates

    Raises
    ------
    ValueError
        A term has no run to be fitted on (it names which).
    """
    runs = list(runs)
    small = [r for r in runs if r.group_nnz <= 1e6]
    if not small:
        raise ValueError("no run with at most 1e6 nonzeros a group to fit the round's fixed cost")
    big = [r for r in runs if r.group_nnz > 1e6]
    rates = Rates({}, {}, {}, 0.0, 0.0)
    # the small runs' own passes are a few percent of their rounds: fit the fixed terms
    # without them, then with the passes the big runs give, until the two agree
    for _ in range(ROUNDS_OF_FIT):
        fixed, per_feature = _line(
            [r.n_features for r in small],
            [r.round_seconds - _compute(rates, r) for r in small],
        )
        rates = _fit_work(big, fixed, per_feature * 1e9)
    kept = [r for r in big if r.rows == "memory"]
    first_fixed, first_per_nnz = _line(
        [r.group_nnz for r in kept], [r.first_round_seconds - r.round_seconds for r in kept]
    )
    return dataclasses.replace(
        rates,
        first_fixed=first_fixed,
        first_ns=first_per_nnz * 1e9,
        init_seconds=statistics.median(r.init_seconds for r in runs),
    )


def _compute(rates: Rates, run: MeasuredRun) -> float:
    """The passes' seconds of a round of ``run`` under ``rates`` (0 for a loss not fitted)."""
    if run.loss not in rates.pass_ns:
        return 0.0
    return rates.pass_ns[run.loss] * run.group_nnz * 1e-9 / rates.speedup(run.loss, run.threads)


def _fit_work(big, fixed, feature_ns) -> Rates:
    """``pass_ns``, the thread exponents and ``read_ns`` of the big runs, given the fixed terms."""
    base = Rates({}, {}, {}, fixed, feature_ns)

    def work(r):
        return r.round_seconds - base.latency(r.n_features)

    pass_ns, exponents, reads = {}, {}, {}
    for loss in sorted({r.loss for r in big}):
        mine = [r for r in big if r.loss == loss]
        ones = [work(r) / r.group_nnz * 1e9 for r in mine if r.threads == 1 and r.rows == "memory"]
        if not ones:
            continue
        pass_ns[loss] = statistics.median(ones)
        threaded = [r for r in mine if r.threads > 1 and r.rows == "memory"]
        if threaded:
            largest = max(r.group_nnz for r in threaded)
            exponents[loss] = statistics.median(
                math.log(pass_ns[loss] * r.group_nnz * 1e-9 / work(r)) / math.log(r.threads)
                for r in threaded
                if r.group_nnz == largest
            )
        streamed = [r for r in mine if r.rows == "stream"]
        if streamed:
            speed = Rates(pass_ns, exponents, {}, fixed, feature_ns)
            reads[loss] = statistics.median(
                (work(r) - _compute(speed, r)) / r.group_nnz * 1e9 for r in streamed
            )
    if not pass_ns:
        raise ValueError("no one-thread run with kept rows to fit pass_ns on")
    if not exponents:
        raise ValueError("no kept run with several threads to fit the thread exponent on")
    if not reads:
        raise ValueError("no streamed run to fit read_ns on")
    return Rates(pass_ns, exponents, reads, fixed, feature_ns)


def round_seconds(
    rates: Rates, loss: str, group_nnz: float, threads: int, streamed: bool,
    n_features: float, comm_bytes: float = 0.0, bandwidth: float = math.inf,
) -> float:  # fmt: skip
    """Seconds of one round (module docstring)."""
    compute = rates.pass_ns[loss] * group_nnz * 1e-9 / rates.speedup(loss, threads)
    read = rates.read_ns[loss] * group_nnz * 1e-9 if streamed else 0.0
    return compute + read + rates.latency(n_features) + comm_bytes / bandwidth


def seconds_to_target(
    rates: Rates, loss: str, group_nnz: float, threads: int, streamed: bool,
    n_features: float, rounds: float, comm_bytes: float = 0.0, bandwidth: float = math.inf,
) -> float:  # fmt: skip
    """Seconds of a call to the target: start, the first round's extra, ``rounds`` rounds."""
    first = rates.first_fixed + (0.0 if streamed else rates.first_ns * group_nnz * 1e-9)
    per_round = round_seconds(
        rates, loss, group_nnz, threads, streamed, n_features, comm_bytes, bandwidth
    )
    return rates.init_seconds + first + rounds * per_round


def fit_table(rates: Rates, runs, rounds: RoundCounts | None = None) -> list[dict]:
    """Every measured run against its prediction.

    Returns one dict per run: ``label``, measured and predicted round seconds and their
    relative error; measured and predicted seconds to ``(1 + 1e-3) P*`` with the run's own
    round count (the round model's error) and, when ``rounds`` is given, with the model's
    median count for its loss and grid (the whole model's error).
    """
    rows = []
    for r in runs:
        streamed = r.rows == "stream"
        predicted = round_seconds(rates, r.loss, r.group_nnz, r.threads, streamed, r.n_features)
        row = {
            "label": r.label,
            "round": r.round_seconds,
            "round_predicted": predicted,
            "round_error": predicted / r.round_seconds - 1,
            "to": r.wall_to,
            "to_predicted": None,
            "to_error": None,
            "to_model": None,
            "to_model_error": None,
        }
        if r.rounds_to is not None and r.wall_to is not None:
            args = (rates, r.loss, r.group_nnz, r.threads, streamed, r.n_features)
            t = seconds_to_target(*args, r.rounds_to)
            row["to_predicted"], row["to_error"] = t, t / r.wall_to - 1
            if rounds is not None and r.loss in rounds.counts:
                median = rounds.rounds(r.loss, r.grid, r.kappa)[0]
                t = seconds_to_target(*args, median)
                row["to_model"], row["to_model_error"] = t, t / r.wall_to - 1
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Job:
    """A training job to plan.

    Parameters
    ----------
    nnz, n_samples, n_features : int
    loss : str
    alpha : float
    nnz_bytes : int, default=BINARY_NNZ_BYTES
        Bytes a nonzero takes as the kernels read it (4 binary, 12 with float64 values).
    """

    nnz: float
    n_samples: float
    n_features: float
    loss: str
    alpha: float
    nnz_bytes: int = BINARY_NNZ_BYTES


@dataclass(frozen=True)
class Machines:
    """The machines of a plan: ``count`` of them, each one worker of ``cores`` threads.

    ``memory`` and ``bandwidth`` in bytes and bytes per second, per machine.
    """

    count: int
    cores: int
    memory: float
    bandwidth: float


def plan_cocoa(rates: Rates, rounds: RoundCounts, job: Job, machines: Machines) -> dict:
    """The default solver's predicted run: one row group a machine, its cores as threads.

    Returns a dict: ``streamed`` (a group's rows over :data:`STREAM_SHARE` of the machine's
    memory), ``threads`` (all the cores if threads gained on the loss, else 1), ``round``
    seconds, ``comm_bytes`` a machine receives a round, ``rounds`` (median, low, high) and
    ``seconds`` to ``(1 + 1e-3) P*`` at the median, low and high counts.
    """
    grid = machines.count
    group_nnz = job.nnz / grid
    streamed = group_nnz * job.nnz_bytes > STREAM_SHARE * machines.memory
    comm = (grid - 1) * job.n_features * DW_BYTES
    # a user runs the threads that help: all the cores when they gained, else one
    threads = machines.cores if rates.thread_exponent.get(job.loss, 0.0) > 0 else 1
    common = (rates, job.loss, group_nnz, threads, streamed, job.n_features)
    per_round = round_seconds(*common, comm, machines.bandwidth)
    counts = rounds.rounds(job.loss, grid, conditioning(job.alpha, job.n_samples, job.nnz))
    return {
        "streamed": streamed,
        "threads": threads,
        "round": per_round,
        "comm_bytes": comm,
        "rounds": counts,
        "seconds": tuple(seconds_to_target(*common, c, comm, machines.bandwidth) for c in counts),
    }


@dataclass(frozen=True)
class DSORates:
    """DSO's epoch model: ``update_ns`` core-ns a nonzero, ``hop`` seconds a ring step."""

    update_ns: float
    hop: float


def fit_dso(epochs) -> DSORates:
    """Fit :class:`DSORates` on measured epochs by least squares.

    Parameters
    ----------
    epochs : sequence of (nnz, grid, parallel, seconds)
        A measured median epoch: ``grid`` hops an epoch, ``parallel`` tasks at a time (the
        cores that worked), its seconds.

    Raises
    ------
    ValueError
        Fewer than two distinct grids (the two terms cannot be told apart).
    """
    epochs = list(epochs)
    if len({e[1] for e in epochs}) < 2:
        raise ValueError("DSO's epoch model needs epochs at two grids at least")
    # seconds = a * (nnz / parallel) + b * grid: normal equations of two unknowns
    rows = [(nnz / parallel, grid, s) for nnz, grid, parallel, s in epochs]
    saa = sum(a * a for a, _, _ in rows)
    sab = sum(a * b for a, b, _ in rows)
    sbb = sum(b * b for _, b, _ in rows)
    say = sum(a * y for a, _, y in rows)
    sby = sum(b * y for _, b, y in rows)
    det = saa * sbb - sab * sab
    a = (say * sbb - sby * sab) / det
    b = (saa * sby - sab * say) / det
    return DSORates(update_ns=a * 1e9, hop=b)


def dso_epoch(rates: DSORates, job: Job, workers: int, bandwidth: float) -> dict:
    """DSO's predicted epoch on ``workers`` ring workers: seconds and bytes a worker sends."""
    per_hop_bytes = job.n_features / workers * COLUMN_BYTES
    seconds = job.nnz * rates.update_ns * 1e-9 / workers + workers * (
        rates.hop + per_hop_bytes / bandwidth
    )
    return {"seconds": seconds, "bytes": workers * per_hop_bytes}
