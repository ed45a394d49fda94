"""The cost model of the hinge dual's projected Newton method (``solver="dual_newton"``), for
planning the hinge job on many machines (issue 49).

A run of :mod:`daskpd.solvers.dual_newton` is graphs whose results the driver waits for, of
the kinds below (:data:`KINDS`; ``pipelines/cost_model_dual_newton.py`` classifies measured
ones). Unlike tron's, its rounds do not all read every nonzero: a CG round reads the free
rows only (those strictly inside the box after the gradient round), whose share of the
nonzeros falls as the run goes on. A round is therefore priced from what it reads:

``start``
    A local pass of dual coordinate descent on every group, their images summed into
    ``w(a)`` on the home (one d-vector up the tree), ``w`` to every owner and the gradient
    round there (margins, the free rows, the first CG share up the tree).
``cg``
    A CG step: the direction's image ``u`` (on the step's free columns) to every owner, each
    group's product on its free rows, their share up the tree.
``line``
    The trial at ``t = 1`` (each group's ``X_F^T (c y delta)`` up the tree), the trial ``w``
    to every owner, the gradient round there: two reductions.
``refused``, ``shorter``, ``gradient``
    A refused trial, a shorter one, the gradient round at an accepted shorter one.
``home``
    A Newton step whole on the home (few free rows: ``home_cg_nnz``): the free rows gathered
    there, its CG and line search on one core, the changes of ``a`` back, the gradient round.
    At the splice-site job's scale the free rows are billions of nonzeros, and every CG step
    is a ``cg`` round.
``pass``
    After a step that freed many rows: a local pass of every group, their changes of ``w``
    summed on the home, the gradient round.

A round of ``kind`` on ``P`` workers of ``T`` threads (``g = ceil(K / P)`` groups a worker),
reading ``r`` nonzeros over all groups and ``h`` on the home's one core, costs

    ``round = fixed[kind] + (r / P) * read_ns[kind] / T ** b + h * home_read_ns``
    ``      + g * (T + [K > 1]) * c_reduced * share_ns[kind] + c_home * home_ns[kind]``
    ``      + network``

``c_reduced``: the columns of the vectors the round sums up the tree (:data:`REDUCED`; the
start's and the pass's first on the groups' columns, the others on the free ones), each a
thread's output row on a worker and a merge with several groups (a dual_newton share is
made as tron's); ``c_home``: the columns of the home's algebra (a CG round's on the free
columns, the others' on ``w``); ``b`` tron's fitted thread exponent (at most 1);
``network`` tron's :class:`~daskpd.bench.costmodel_tron.Network` terms for the vectors
summed and those the home sends every owner (:data:`SENT`). :func:`fit_rates` fits the
rates by kind on measured rounds; a whole run is its rounds plus the reading of the groups
(tron's ``init`` terms: the same reading).

For the job, :class:`Counts` gives the rounds by kind and what they read, from laws fitted
on measured runs (:func:`fit_counts`): Newton steps, CG steps and local passes as power laws
of ``alpha`` and the rows ``n``; the free rows' share of the nonzeros (their mean over the
Newton steps) likewise; what a kind reads as ``nnz * (full + free_factor * free)``, fitted on
the measured rounds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import scipy.optimize

from daskpd.bench import costmodel_tron as ct

__all__ = [
    "KINDS",
    "Counts",
    "CountLaw",
    "DualNewtonRates",
    "MeasuredRound",
    "fit_counts",
    "fit_rates",
    "plan_dual_newton",
    "round_parts",
    "round_seconds",
]

#: the kinds of graph (module docstring), in the order a run first meets them
KINDS = ("start", "cg", "line", "refused", "home", "pass", "shorter", "gradient")
#: vectors a graph of each kind sums up the tree (the start's image of ``a`` and the
#: pass's change of ``w`` are on the groups' columns; the CG shares on the free columns)
REDUCED = {"start": 2, "cg": 1, "line": 2, "refused": 1, "home": 1, "pass": 2, "shorter": 1,
           "gradient": 1}  # fmt: skip
#: vectors the home sends every owner a graph (``w``, or the direction's image ``u``)
SENT = {"start": 1, "cg": 1, "line": 1, "refused": 0, "home": 1, "pass": 2, "shorter": 0,
        "gradient": 1}  # fmt: skip
#: the tron round whose threads' gain a kind takes: a CG round's for a CG round, a step
#: round's otherwise
TRON_KIND = {"cg": "hessian"}
#: kinds whose rounds exist at the job's scale (no ``home`` step: its free rows are too
#: many for one machine)
AT_SCALE = ("cg", "line", "refused", "shorter", "gradient", "pass")
#: the kinds that follow a refused trial at ``t = 1``, counted as shares of the Newton steps
AFTER_REFUSED = ("refused", "shorter", "gradient")


@dataclass(frozen=True)
class MeasuredRound:
    """One measured round: its ``kind``, ``seconds``, the nonzeros its groups read (``read``)
    and the home read (``home_read``), the columns its vectors cover (``columns``: the run's
    used ones, ``free``: the CG's), its layout (``groups`` on ``workers`` of ``threads``)."""

    kind: str
    seconds: float
    read: float
    home_read: float
    used: float
    free: float
    groups: int
    workers: int
    threads: int

    @property
    def layout(self) -> ct.Layout:
        return ct.Layout(self.groups, self.workers, self.threads)


@dataclass(frozen=True)
class DualNewtonRates:
    """Fitted parameters (module docstring), dicts by kind: ``fixed`` seconds a round,
    ``read_ns`` core-ns a nonzero read, ``share_ns`` ns a column of a share, a thread's
    output row (or a merge) and a vector, ``home_ns`` ns a column of the home's algebra; and
    ``home_read_ns``, a nonzero the home's Newton step reads (one core). ``tron``: tron's
    fitted :class:`~daskpd.bench.costmodel_tron.TronRates`, for the threads' gain (its
    exponent) and the reading of the groups (its ``init`` terms)."""

    fixed: dict
    read_ns: dict
    share_ns: dict
    home_ns: dict
    home_read_ns: float
    tron: ct.TronRates


def _exponent(tron, kind):
    return min(1.0, tron.thread_exponent.get(TRON_KIND.get(kind, "step"), 1.0))


def _vectors(kind, used, free):
    """The columns of each vector a round of ``kind`` reduces and sends: the start's and
    the pass's first reduced vector is on the groups' columns, the rest on the free ones; a
    CG round sends the direction's image (free columns), the others ``w``."""
    first = kind in ("start", "pass")
    reduced = [used] * first + [free] * (REDUCED[kind] - first)
    sent = [free] if kind == "cg" else [used] * SENT[kind]
    return reduced, sent


def _loads(kind, used, free, layout):
    """A round's per-column loads: ``share`` (columns of the reduced vectors a worker's
    groups fill, times their threads' output rows and a merge with several groups) and
    ``home`` (the home's algebra: on the direction's image in a CG round, on ``w`` in the
    others)."""
    reduced, _ = _vectors(kind, used, free)
    rows = layout.threads + (layout.groups > 1)
    return {"share": layout.per_worker * rows * sum(reduced),
            "home": free if kind == "cg" else used}  # fmt: skip


def _network(kind, used, free, layout, network):
    reduced, sent = _vectors(kind, used, free)
    return sum(network.reduce_seconds(layout, c, 1) for c in reduced) + sum(
        network.send_seconds(layout, c, 1) for c in sent
    )


def round_parts(rates, kind, read, home_read, used, free, layout, network) -> dict:
    """A round's seconds by term: ``graph`` (fixed), ``passes`` (the groups' reads),
    ``home_passes`` (the home's Newton step), ``shares`` (the groups' output rows and their
    merging), ``home`` (its algebra), ``network`` (the tree's levels and bytes, the home's
    vectors out)."""
    speedup = float(layout.threads) ** _exponent(rates.tron, kind)
    loads = _loads(kind, used, free, layout)
    return {
        "graph": rates.fixed.get(kind, 0.0),
        "passes": read / layout.owners * rates.read_ns.get(kind, 0.0) * 1e-9 / speedup,
        "home_passes": home_read * rates.home_read_ns * 1e-9,
        "shares": loads["share"] * rates.share_ns.get(kind, 0.0) * 1e-9,
        "home": loads["home"] * rates.home_ns.get(kind, 0.0) * 1e-9,
        "network": _network(kind, used, free, layout, network),
    }


def round_seconds(rates, kind, read, home_read, used, free, layout, network) -> float:
    """Seconds of one round (module docstring)."""
    return sum(round_parts(rates, kind, read, home_read, used, free, layout, network).values())


def fit_rates(rounds, tron: ct.TronRates, network: ct.Network) -> DualNewtonRates:
    """Fit the rates by kind: non-negative least squares of what a round takes beyond its
    network terms against a constant, its nonzeros a worker reads over ``T ** b`` (tron's
    ``b``, at most 1), its share load and its home load (:func:`round_parts`), and the home's
    reads for the ``home`` kind. A term the rounds of a kind cannot tell apart from the
    others (no variation) is fitted as 0 and named.

    Raises
    ------
    ValueError
        A kind's rounds do not vary in what they read.
    """
    fitted = {name: {} for name in ("fixed", "read_ns", "share_ns", "home_ns")}
    home_reads = []
    by_kind = {}
    for r in rounds:
        by_kind.setdefault(r.kind, []).append(r)
    for kind, mine in by_kind.items():
        rest = np.array([r.seconds - _network(kind, r.used, r.free, r.layout, network)
                         for r in mine])  # fmt: skip
        loads = [_loads(kind, r.used, r.free, r.layout) for r in mine]
        columns = [
            np.ones(len(mine)),
            np.array([r.read / r.layout.owners / float(r.threads) ** _exponent(tron, kind)
                      for r in mine]) * 1e-9,
            np.array([x["share"] for x in loads]) * 1e-9,
            np.array([x["home"] for x in loads]) * 1e-9,
        ]  # fmt: skip
        if kind == "home":
            columns.append(np.array([r.home_read for r in mine]) * 1e-9)
        if np.ptp(columns[1]) == 0:
            raise ValueError(f"the {kind!r} rounds do not vary in what they read")
        design = np.column_stack(columns)
        # non-negative: a term below zero would be another term's error, not a cost
        solution = scipy.optimize.nnls(design, rest)[0]
        for name, v in zip(("fixed", "read_ns", "share_ns", "home_ns"), solution, strict=False):
            fitted[name][kind] = float(v)
        if kind == "home":
            home_reads.append(float(solution[4]))
    return DualNewtonRates(**fitted, home_read_ns=home_reads[0] if home_reads else 0.0,
                           tron=tron)  # fmt: skip


@dataclass(frozen=True)
class Counts:
    """A run's rounds by kind at the job's scale and what they read.

    Parameters
    ----------
    newton, cg, passes : float
        Newton steps (each a ``line`` or a ``refused`` round), CG steps (each a ``cg``
        round), local passes after a burst (each a ``pass`` round); the start is one more.
    free : float
        The free rows' share of the nonzeros (mean over the Newton steps).
    reads : dict
        Kind -> ``(full, free_factor)``: a round reads ``nnz * (full + free_factor * free)``.
    shares : dict
        Kind of :data:`AFTER_REFUSED` -> its rounds a Newton step.
    """

    newton: float
    cg: float
    passes: float
    free: float
    reads: dict
    shares: dict = dataclasses.field(default_factory=dict)

    def count(self, kind: str) -> float:
        refused = self.shares.get("refused", 0.0) * self.newton
        return {"cg": self.cg, "line": self.newton - refused, "pass": self.passes,
                **{k: self.shares.get(k, 0.0) * self.newton for k in AFTER_REFUSED}}.get(
            kind, 0.0)  # fmt: skip

    def read(self, kind: str, nnz: float) -> float:
        full, factor = self.reads[kind]
        return nnz * (full + factor * self.free)


@dataclass(frozen=True)
class CountLaw:
    """Power laws in ``alpha`` and ``n`` for one ``K`` (module docstring):
    ``coefficients[field] = (a, b, c)`` for ``exp(a) alpha^b n^c``, fields ``newton``, ``cg``,
    ``passes`` (plus one: a run with none has the law of ``passes + 1``) and ``free``; and
    the reads by kind and the rounds after refused trials a Newton step (``shares``)."""

    coefficients: dict
    reads: dict
    shares: dict = dataclasses.field(default_factory=dict)

    def at(self, alpha: float, n_samples: float) -> Counts:
        value = {
            field: math.exp(a + b * math.log(alpha) + c * math.log(n_samples))
            for field, (a, b, c) in self.coefficients.items()
        }
        return Counts(value["newton"], value["cg"], max(0.0, value["passes"] - 1.0),
                      min(1.0, value["free"]), self.reads, self.shares)  # fmt: skip


def fit_counts(points, read_points, shares=None) -> CountLaw:
    """Fit :class:`CountLaw` by least squares in logs on ``points`` (dicts with ``alpha``,
    ``n_samples``, ``newton``, ``cg``, ``passes``, ``free``) and the reads by kind on
    ``read_points`` (``(kind, read / nnz, free / nnz)``: a round's nonzeros read, and the
    free rows' before it, over the set's); ``shares`` (kind of :data:`AFTER_REFUSED` ->
    rounds a Newton step, measured where every trial is a round) is kept as given.

    Raises
    ------
    ValueError
        Fewer than two alphas or two row counts.
    """
    points = list(points)
    if len({p["alpha"] for p in points}) < 2 or len({p["n_samples"] for p in points}) < 2:
        raise ValueError("the count law needs measured counts at two alphas and two row counts")
    design = np.array([[1.0, math.log(p["alpha"]), math.log(p["n_samples"])] for p in points])
    coefficients = {}
    for field in ("newton", "cg", "passes", "free"):
        shift = 1.0 if field == "passes" else 0.0
        target = np.array([math.log(p[field] + shift) for p in points])
        coefficients[field] = tuple(float(v) for v in np.linalg.lstsq(design, target)[0])
    reads = {}
    for kind in AT_SCALE:
        mine = [(r, f) for k, r, f in read_points if k == kind]
        if not mine:
            continue
        full, factor = np.linalg.lstsq(
            np.array([[1.0, f] for _, f in mine]), np.array([r for r, _ in mine])
        )[0]
        reads[kind] = (max(0.0, float(full)), max(0.0, float(factor)))
    return CountLaw(coefficients, reads, dict(shares or {}))


def plan_dual_newton(rates, counts: Counts, job, machines, network, *, start_read=2.0,
                     kept_rows=False, max_cg=None) -> dict:  # fmt: skip
    """The hinge job on ``machines``: one row group a machine, all its cores the group's
    threads, every vector on all the job's features (the free rows' columns too: billions
    of free nonzeros cover them).

    ``start_read``: the start's nonzeros read over all (its local pass and gradient round).
    ``kept_rows``: the groups' threads' output rows kept between rounds (one row's cost,
    not ``T``) and the rows read at the start by every core, as tron's plan's changes
    (neither built). ``max_cg``: the solver's cap on a Newton step's CG steps
    (``DualNewtonOptions.max_cg``), which the count law does not know.

    Returns a dict: ``layout``, ``round`` (seconds by kind), ``parts`` (a CG round's by
    term), ``init`` (reading the groups and the start), ``seconds`` to the line and its
    ``passes`` part, ``resident`` bytes of a machine's rows.
    """
    layout = ct.Layout(machines.count, machines.count, machines.cores)
    tron = rates.tron
    if max_cg is not None:
        counts = dataclasses.replace(counts, cg=min(counts.cg, max_cg * counts.newton))
    if kept_rows:
        # one output row's cost a column, not T rows'
        rates = dataclasses.replace(rates, share_ns={
            k: v / machines.cores for k, v in rates.share_ns.items()})  # fmt: skip
    d = job.n_features

    def parts(kind, read):
        return round_parts(rates, kind, read, 0.0, d, d, layout, network)

    kinds = [k for k in AT_SCALE if k in counts.reads]
    by_kind = {k: parts(k, counts.read(k, job.nnz)) for k in kinds}
    per_kind = {k: sum(p.values()) for k, p in by_kind.items()}
    start_parts = parts("start", start_read * job.nnz)
    readers = machines.cores if kept_rows else 1
    reading = tron.init_fixed + job.nnz / machines.count * tron.init_ns * 1e-9 / readers
    init = reading + sum(start_parts.values())
    total = init + sum(counts.count(k) * per_kind[k] for k in kinds)
    passes = start_parts["passes"] + sum(counts.count(k) * by_kind[k]["passes"] for k in kinds)
    return {
        "layout": layout,
        "round": per_kind,
        "parts": parts("cg", counts.read("cg", job.nnz)),
        "line_parts": parts("line", counts.read("line", job.nnz)),
        "init": init,
        "seconds": total,
        "passes": passes,
        "resident": job.nnz / machines.count * (job.nnz_bytes or 4),
        "counts": counts,
    }

