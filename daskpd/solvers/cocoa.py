"""CoCoA+: data-parallel dual coordinate ascent whose group updates are added.

Ma, Smith, Jaggi, Jordan, Richtarik and Takac, "Adding vs. Averaging in Distributed
Primal-Dual Optimization", ICML 2015; Smith, Forte, Ma, Takac, Jordan and Jaggi, "CoCoA: A
General Framework for Communication-Efficient Distributed Optimization", JMLR 2018.

Problem: ``P(w) = (1/n) sum_i c_i loss(x_i . w, y_i) + (alpha/2) ||w||^2`` (L2 only; ``c_i``
the row weights) and its dual in ``z`` (the project's sign, DESIGN.md), kept consistent with
``w = -X^T z / (alpha n)``. Translation table (paper -> code): ``lambda`` -> ``alpha``,
``alpha_i`` -> ``-z_i``, ``K`` -> ``grid``, ``sigma'`` -> ``sigma``, ``gamma`` -> 1 (added
updates), ``P_k`` -> row group ``k``, ``H`` -> ``local_passes`` passes over the group.

Row groups are the row groups of the dataset's ``grid x grid`` layout (the bounds DSO uses;
computed by the same function when the layout is not stored, since CoCoA needs no tiles).
Graph shape (DESIGN.md's map-reduce): round ``t`` (= epoch ``t``) is one graph. Task ``k``,
on the worker that owns group ``k``, runs one local pass of
:func:`daskpd.kernels.cocoa.cocoa_pass` over the group's rows in a random order (drawn in
the task from ``block_seeds(epoch_seed(seed, t), grid)[k]``), then, for the hinge losses,
passes with shrinking over the rows that have not settled at a bound
(:func:`daskpd.kernels.cocoa.shrunk_passes`), from a local copy of ``w``
on the columns the group uses, and returns the group's new dual block, its update ``dw_k``
(on those columns only: on wide sparse data a fraction of ``n_features``) and the
certificate sums. Then every worker that owns a group adds the ``dw_k`` (in group order, so
every copy is the same bits) to its own copy of ``w``: the next round's tasks read their
worker's copy, and ``w`` never passes through the client inside a round. The group's rows
are read once, by its owner, and stay there (a future) for the whole run; dual blocks never
leave their worker.

The certificate comes out of the pass: while it computes ``x_i . v`` for the step, the
kernel also computes ``x_i . w_t`` (``w_t`` the round's start, read only) and sums
``c_i loss(x_i . w_t)`` and ``c_i loss*(z_i / c_i)`` at the round's start. With ``||w_t||^2``
these are the exact ``P(w_t)`` and ``D(z_t)``: after round ``t`` the solver reports the
start point of that round, ``(w_t, z_t)``, with its primal and dual, so the answer of a run
is always a certified point, one round behind the newest ``w``.

With one group and ``sigma = 1`` a round is one epoch of serial dual coordinate ascent
(liblinear's method) on the same bits, followed by its shrunk passes: liblinear's loop,
whose full passes (where it "unshrinks") here also certify the round's start.

Convergence. The dual rises every round for ``sigma >= grid``; what the groups gain is
bought with the safe ``sigma = grid``, which halves (for two groups) every step in the
directions a group has to itself. Rounds therefore grow faster than ``grid``: on a sparse
random set with rare shared features, two groups need about 3x the rounds of one, four
about 6.5x; on data whose rows share many features (splice-like windows, a bias column)
with the hinge loss, far more (splice-like, 20,000 rows, alpha 1e-5: one group reaches a
relative gap of 1e-3 in 19 rounds, two groups not in 200). The smooth logistic loss fares
better (5 and 13 rounds on the same data). ``sigma`` below ``grid`` is faster only where
the groups are nearly orthogonal, and can diverge elsewhere.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from daskpd.kernels import cocoa as kernels
from daskpd.kernels import dso as dso_kernels
from daskpd.kernels import scalar
from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers._driver import Iterate, block_seeds, epoch_seed, register_solver
from daskpd.solvers._groups import (
    class_weight_pair,
    group_owner,
    has_grid,
    is_on_disk,
    row_weights,
    worker_list,
)

__all__ = ["Cocoa", "CocoaOptions"]

_LOSS_NAMES = "hinge, squared_hinge, smooth_hinge, logistic, squared"


@dataclass(frozen=True)
class CocoaOptions:
    """Options of :class:`Cocoa`.

    Parameters
    ----------
    grid : int or None, default=None
        ``K``, the number of row groups (the row groups of the dataset's ``grid x grid``
        layout). ``None``: one group, serial dual coordinate ascent on the worker that
        holds the rows. Measured on the splice-like sets (BENCHMARKS.md), whose rows share
        many features, ``K = 2`` with the safe ``sigma = K`` needed far more rounds than
        ``K = 1`` (hinge, 1e7 nonzeros, alpha 1e-3: not within 1e-2 of P* in 300 rounds,
        against 25 rounds to 1e-4 for one group; logistic, alpha 1e-5: 175 against 11), so
        more rounds cost more than the second worker gains. Set ``grid`` for data-parallel
        rounds (rows that do not fit one worker, or nearly orthogonal groups). The result
        depends on the grid and the seed, never on the number of workers.
    sigma : float or None, default=None
        ``sigma'``, the local subproblem's curvature factor; ``None``: ``grid``, always safe.
        Smaller values take longer steps and can diverge when the groups are not nearly
        orthogonal.
    local_passes : int, default=1
        Full passes of the local solver over its group per round (each in its own random
        order); the first also computes the certificate of the round's start.
    shrinking : bool or None, default=None
        After the full passes, passes with liblinear's shrinking over the rows still active
        (:func:`daskpd.kernels.cocoa.shrunk_passes`). ``None``: on for the losses whose
        dual lives on a box (hinge, squared hinge, smoothed hinge), the only ones it
        applies to. Most rows of a near-separable set settle at a bound early; the shrunk
        passes skip them, so a round does many cheap passes for one full one.
    shrink_ratio : float, default=0.01
        The shrunk passes of a round stop once the spread of their projected gradients is
        at most this fraction of the full pass's. On the splice-like sets (1e7 and 1e8
        nonzeros, hinge, alpha 1e-2 to 1e-5) 0.01 and 0.001 reached ``(1 + 1e-3) P*`` in
        3-4 rounds, against 10-20 rounds without shrinking; 0.1 and 0.3 took a round or two
        more.
    max_shrunk_passes : int, default=100
        At most this many shrunk passes a round.
    threads : int, default=1
        Threads that run one group's passes together (PASSCoDe, Hsieh, Yu and Dhillon,
        ICML 2015, "wild": each thread steps its share of the rows and adds to the shared
        ``v`` without locks). The racing additions only steer the steps: each round then
        recomputes its change of ``w`` exactly from the change of ``z`` (one more read of
        the nonzeros, in the same threads), so ``w = w(z)`` to rounding and the certificate
        stays exact. With more than 1 the results depend on the threads' timing: not
        bit-reproducible, and a replay after a lost worker does not repeat the lost
        round's bits. 1: the serial passes, the same bits run to run. Give the group's
        owner the cores (e.g. one worker process per machine, or idle workers beside it).
    """

    grid: int | None = None
    sigma: float | None = None
    local_passes: int = 1
    shrinking: bool | None = None
    shrink_ratio: float = 0.01
    max_shrunk_passes: int = 100
    threads: int = 1

    def __post_init__(self):
        if self.grid is not None and (
            isinstance(self.grid, bool)
            or not isinstance(self.grid, int | np.integer)
            or self.grid < 1
        ):
            raise ValueError(f"grid must be a positive integer, got {self.grid!r}")
        if self.sigma is not None:
            try:
                sigma = float(self.sigma)
            except (TypeError, ValueError):
                raise ValueError(f"sigma must be a number > 0, got {self.sigma!r}") from None
            if not (sigma > 0 and math.isfinite(sigma)):
                raise ValueError(f"sigma must be a finite number > 0, got {self.sigma!r}")
        if (
            isinstance(self.local_passes, bool)
            or not isinstance(self.local_passes, int | np.integer)
            or self.local_passes < 1
        ):
            raise ValueError(f"local_passes must be a positive integer, got {self.local_passes!r}")
        if self.shrinking is not None and not isinstance(self.shrinking, bool | np.bool_):
            raise ValueError(f"shrinking must be True, False or None, got {self.shrinking!r}")
        try:
            ratio = float(self.shrink_ratio)
        except (TypeError, ValueError):
            ratio = math.nan
        if isinstance(self.shrink_ratio, bool) or not 0.0 <= ratio < 1.0:
            raise ValueError(f"shrink_ratio must be a number in [0, 1), got {self.shrink_ratio!r}")
        if (
            isinstance(self.max_shrunk_passes, bool)
            or not isinstance(self.max_shrunk_passes, int | np.integer)
            or self.max_shrunk_passes < 1
        ):
            raise ValueError(
                f"max_shrunk_passes must be a positive integer, got {self.max_shrunk_passes!r}"
            )
        if (
            isinstance(self.threads, bool)
            or not isinstance(self.threads, int | np.integer)
            or self.threads < 1
        ):
            raise ValueError(f"threads must be a positive integer, got {self.threads!r}")


@dataclass(frozen=True)
class _Settings:
    """Constants of a run that every task needs (small; shipped with each task)."""

    grid: int
    n_samples: int
    n_features: int
    loss_code: int
    loss_params: np.ndarray
    alpha: float
    sigma: float
    local_passes: int
    #: shrunk passes after the full ones (0: none)
    max_shrunk_passes: int
    shrink_ratio: float
    #: one group and sigma = 1: the pass's v is the next w (serial DCA, same bits)
    direct: bool
    #: threads of a group's passes (1: serial)
    threads: int = 1

    @property
    def inv_alpha_n(self):
        return 1.0 / (self.alpha * self.n_samples)


class _Group(NamedTuple):
    """The rows of one group as the kernel reads them (resident on the owner)."""

    indptr: np.ndarray
    #: column ids into ``columns`` (the group's own columns)
    indices: np.ndarray
    #: the columns the group uses, increasing (int32)
    columns: np.ndarray
    vals: np.ndarray
    binary: bool
    y: np.ndarray
    weight: np.ndarray
    norm_sq: np.ndarray


def _settings(problem, data, options, grid, threads=1):
    sigma = float(grid) if options.sigma is None else float(options.sigma)
    boxed = int(problem.loss.code) in kernels.BOX_LOSSES
    shrinking = boxed if options.shrinking is None else bool(options.shrinking)
    return _Settings(
        grid=int(grid),
        n_samples=int(data.n_samples),
        n_features=int(data.n_features),
        loss_code=int(problem.loss.code),
        loss_params=np.asarray(problem.loss.params, dtype=np.float64),
        alpha=float(problem.alpha),
        sigma=sigma,
        local_passes=int(options.local_passes),
        max_shrunk_passes=int(options.max_shrunk_passes) if shrinking else 0,
        shrink_ratio=float(options.shrink_ratio),
        direct=int(grid) == 1 and sigma == 1.0,
        threads=int(threads),
    )


def _row_bounds(data, grid):
    """Row bounds of the groups: the stored grid's, else the same cut computed here."""
    if has_grid(data, grid):
        return np.asarray(data.grid(grid).row_bounds, dtype=np.int64)
    from daskpd._partition import balanced_bounds, cumulative_chunks

    return balanced_bounds(
        cumulative_chunks(data._row_nnz_chunks()), int(data.nnz), int(grid), int(data.n_samples)
    )


# --------------------------------------------------------------------------------------------
# tasks (pure: they copy what they mutate)


def _load_group(source, start, stop, class_pair, renumber):
    """Task: rows ``start:stop`` as a :class:`_Group` (read by the owner, kept there).

    ``renumber``: the group's columns are renumbered into the ones it uses (several groups,
    each a part of the rows); one group keeps the global column ids (it uses about every
    column, and renumbering 1e8 nonzeros costs about a second of random writes).
    """
    indptr, indices, vals, y = source.read_rows_arrays(start, stop)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    if renumber:
        columns, indices = kernels.local_columns(indices, int(source.n_features))
    else:
        columns = np.arange(int(source.n_features), dtype=np.int32)
    binary = vals is None
    if binary:
        vals = np.zeros(0)
    else:
        # as stored: float32 stays float32 (no 8-byte copy of every value)
        vals = np.ascontiguousarray(vals)
        if vals.dtype not in (np.float32, np.float64):
            vals = vals.astype(np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    weight = row_weights(source, y, start, stop, class_pair)
    norm_sq = np.empty(y.shape[0])
    kernels.row_norms(indptr, vals, binary, norm_sq)
    return _Group(indptr, indices, columns, vals, binary, y, weight, norm_sq)


def _dual_box(settings, group):
    """Bounds of every row's dual value: ``c_i`` times the loss's dual domain."""
    lo = np.empty(group.y.shape[0])
    hi = np.empty(group.y.shape[0])
    scalar.loss_dual_bounds_array(settings.loss_code, settings.loss_params, group.y, lo, hi)
    weight = group.weight
    with np.errstate(invalid="ignore"):
        lo, hi = lo * weight, hi * weight
    # weight 0: the box is {0} (0 * inf is not)
    lo[weight == 0] = 0.0
    hi[weight == 0] = 0.0
    return lo, hi


def _start_task(group, settings, z_start, w_start):
    """Task: a group's starting dual block, its columns and ``X_k^T z_k`` on them (warm
    starts only).

    From ``z_start`` (projected on the dual box) or, without one, from the primal start:
    ``z_i = c_i loss'(x_i . w_start, y_i)``, the dual point that matches ``w_start``.
    """
    lo, hi = _dual_box(settings, group)
    if z_start is not None:
        z = np.asarray(z_start, dtype=np.float64)
    else:
        scores = spdc_kernels.row_dots(
            group.indptr, group.indices, group.vals, group.binary, w_start[group.columns]
        )
        slopes = np.empty_like(scores)
        scalar.loss_derivative_array(
            settings.loss_code, settings.loss_params, scores, group.y, slopes
        )
        z = group.weight * slopes
    z = np.clip(z, lo, hi)
    xt_z = spdc_kernels.transpose_dot(
        group.indptr, group.indices, group.vals, group.binary, z, group.columns.shape[0]
    )
    return z, group.columns, xt_z


def _picked(source, pick):
    return source if pick is None else source[pick]


def _round_task(group, zsrc, zpick, w, seed, settings, with_norm):
    """Task ``(round, k)``: the local passes of group ``k`` from ``(w, z_k)``.

    ``z_k`` is ``zsrc``, or ``zsrc[zpick]`` (the tuple of the group's previous round).
    Returns ``(z_k new, step_k, stats_k)``: ``step_k`` is ``dw_k`` on the group's columns
    (or, ``direct``, the next ``w`` there) and ``stats_k = (loss sum at w, conjugate sum
    at z_k, ||w||^2 if with_norm else 0, shrunk passes, nonzeros they read)``.
    """
    z = _picked(zsrc, zpick)
    m = z.shape[0]
    rng = np.random.default_rng(seed)
    orders = np.empty((settings.local_passes, m), dtype=np.int64)
    for p in range(settings.local_passes):
        orders[p] = rng.permutation(m)
    shrink_seed = rng.integers(2**63, dtype=np.uint64)
    z = np.array(z, dtype=np.float64, copy=True)
    n_columns = group.columns.shape[0]
    pack = dso_kernels.thread_scratch("cocoa_pack", 2 * n_columns)
    pack = pack[: 2 * n_columns].reshape(n_columns, 2)
    kernels.start_pack(w, group.columns, pack)
    if settings.threads > 1 and m > 1:
        return _threaded_round(group, z, w, orders, shrink_seed, pack, settings, with_norm)
    pg_range = np.zeros(2)
    loss_sum, conj_sum = kernels.cocoa_pass(
        group.indptr, group.indices, group.vals, group.binary, group.y, group.weight,
        group.norm_sq, z, pack, orders, settings.loss_code, settings.loss_params,
        settings.sigma, settings.inv_alpha_n, pg_range,
    )  # fmt: skip
    shrunk, visited = 0, 0
    if settings.max_shrunk_passes > 0:
        shrunk, visited = kernels.shrunk_passes(
            group.indptr, group.indices, group.vals, group.binary, group.y, group.weight,
            group.norm_sq, z, pack, settings.loss_code, settings.loss_params,
            settings.sigma, settings.inv_alpha_n, pg_range, settings.shrink_ratio,
            settings.max_shrunk_passes, shrink_seed, np.arange(m, dtype=np.int64),
        )  # fmt: skip
    step = np.empty(n_columns)
    kernels.finish_pack(pack, settings.sigma, settings.direct, step)
    w_norm_sq = kernels.squared_norm(w) if with_norm else 0.0
    return z, step, np.array([loss_sum, conj_sum, w_norm_sq, shrunk, visited])


def _threaded_round(group, z, w, orders, shrink_seed, pack, settings, with_norm):
    """The passes of :func:`_round_task` in ``settings.threads`` threads (PASSCoDe-wild).

    Thread ``t`` takes the ``t``-th share of every pass's order, then its shrunk passes
    over those rows (its own visiting seed); all add to the one ``v`` without locks (the
    kernels release the GIL). The round's step is then ``-X^T dz / (alpha n)`` computed
    exactly (each thread a contiguous range of rows into its own buffer, summed in thread
    order), not the raced ``v``: the next ``w`` is ``w(z)`` to rounding, so the next
    round's certificate is exact. The certificate sums are per thread, added in order.
    """
    from concurrent.futures import ThreadPoolExecutor

    m = z.shape[0]
    n_threads = min(int(settings.threads), m)
    cuts = [t * m // n_threads for t in range(n_threads + 1)]
    z_start = z.copy()
    pg = np.zeros((n_threads, 2))
    sums = np.zeros((n_threads, 4))
    n_columns = group.columns.shape[0]
    partial = np.zeros((n_threads, n_columns))
    # One stream of visiting orders per thread; thread 0's is the serial run's.
    golden = np.uint64(0x9E3779B97F4A7C15)

    def passes(t):
        share = np.ascontiguousarray(orders[:, cuts[t] : cuts[t + 1]])
        sums[t, 0], sums[t, 1] = kernels.cocoa_pass(
            group.indptr, group.indices, group.vals, group.binary, group.y, group.weight,
            group.norm_sq, z, pack, share, settings.loss_code, settings.loss_params,
            settings.sigma, settings.inv_alpha_n, pg[t],
        )  # fmt: skip

    def shrunk(t, pg_range):
        share = np.ascontiguousarray(orders[0, cuts[t] : cuts[t + 1]])
        with np.errstate(over="ignore"):
            seed = np.uint64(shrink_seed) + np.uint64(t) * golden
        sums[t, 2], sums[t, 3] = kernels.shrunk_passes(
            group.indptr, group.indices, group.vals, group.binary, group.y, group.weight,
            group.norm_sq, z, pack, settings.loss_code, settings.loss_params,
            settings.sigma, settings.inv_alpha_n, pg_range.copy(), settings.shrink_ratio,
            settings.max_shrunk_passes, seed, share,
        )  # fmt: skip

    def exact_step(t):
        kernels.add_transpose_dot(
            group.indptr, group.indices, group.vals, group.binary, z - z_start,
            cuts[t], cuts[t + 1], partial[t],
        )  # fmt: skip

    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(passes, range(n_threads)))
        if settings.max_shrunk_passes > 0:
            # the full pass's spread over all threads' rows, as the serial pass has it
            pg_range = np.array([pg[:, 0].max(), pg[:, 1].min()])
            list(pool.map(lambda t: shrunk(t, pg_range), range(n_threads)))
        list(pool.map(exact_step, range(n_threads)))
    dw = partial.sum(axis=0) * -settings.inv_alpha_n
    step = w[group.columns] + dw if settings.direct else dw
    w_norm_sq = kernels.squared_norm(w) if with_norm else 0.0
    loss_sum = conj_sum = 0.0
    for t in range(n_threads):
        loss_sum += sums[t, 0]
        conj_sum += sums[t, 1]
    stats = [loss_sum, conj_sum, w_norm_sq, sums[:, 2].sum(), sums[:, 3].sum()]
    return z, step, np.array(stats)


def _sum_task(w, direct, pick, *parts):
    """Task: the next ``w``: ``w + dw_0 + dw_1 + ...`` in group order (``direct``: ``v``).

    ``parts`` are the groups' steps (or, with an integer ``pick``, the round tasks'
    tuples) followed by the groups' columns.
    """
    n_groups = len(parts) // 2
    total = np.array(w, dtype=np.float64, copy=True)
    for k in range(n_groups):
        kernels.add_step(total, parts[n_groups + k], _picked(parts[k], pick), direct)
    return total


def _stats_task(pick, *parts):
    """Task: the groups' certificate sums, one row per group."""
    return np.stack([_picked(part, pick) for part in parts])


def _columns_of(group):
    """Task: the group's columns (a copy of them where a sum task reads them)."""
    return group.columns


def _certificate(settings, stats):
    """``(primal, dual)`` of a round's start point from its groups' sums (rows of ``stats``)."""
    loss_sum = 0.0
    conj_sum = 0.0
    for part in stats:
        loss_sum += float(part[0])
        conj_sum += float(part[1])
    n = settings.n_samples
    regularization = settings.alpha * 0.5 * float(stats[0][2])
    return loss_sum / n + regularization, -conj_sum / n - regularization


# --------------------------------------------------------------------------------------------
# one round on a distributed client: one graph of tasks pinned to the groups' owners


class _ClientRound:
    """Builds one round's tasks, each pinned to a worker, and runs them as one graph."""

    def __init__(self, client, token):
        self.client = client
        self.token = token
        self._layers = {}

    def add(self, name, fn, *args, worker):
        from dask.highlevelgraph import MaterializedLayer
        from dask.task_spec import Task, TaskRef

        key = f"cocoa-{name}-{self.token}"
        annotations = {"workers": [worker], "allow_other_workers": False}
        self._layers[key] = MaterializedLayer({key: Task(key, fn, *args)}, annotations=annotations)
        return TaskRef(key)

    def run(self, outputs, n_waited, release=()):
        """Submit the graph; wait for the first ``n_waited`` ``outputs``; return futures.

        ``release``: futures (or anything else, skipped) to release once the graph is
        submitted; the scheduler keeps what the graph still needs.
        """
        from dask.highlevelgraph import HighLevelGraph
        from distributed import Future, wait

        layers, self._layers = self._layers, {}
        keys = [ref.key for ref in outputs]
        graph = HighLevelGraph(layers, {key: set() for key in layers})
        futures = self.client.get(graph, keys, sync=False)
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

    def home_of(self, k):
        return self.homes.index(self.owners[k])


@register_solver
class Cocoa:
    """CoCoA+ (``solver="cocoa"``): data-parallel dual coordinate ascent, updates added.

    Supports the losses hinge, squared hinge, smoothed hinge, logistic and squared with the
    L2 regularizer, and row weights (``sample_weight`` times ``class_weight``). See the
    module docstring for the schedule and :class:`CocoaOptions` for the options.
    """

    name = "cocoa"
    Options = CocoaOptions

    # -- protocol ---------------------------------------------------------------------------

    def check(self, problem, data, options):
        """Raise ``ValueError`` for anything CoCoA cannot do, before any Dask work.

        Parameters
        ----------
        problem : daskpd.problem.Problem
        data : Dataset or MemoryDataset
        options : CocoaOptions
        """
        loss, reg = problem.loss, problem.regularizer
        if int(getattr(loss, "code", -1)) not in kernels.COCOA_LOSSES:
            raise ValueError(
                f"solver 'cocoa' does not support loss={getattr(loss, 'name', loss)!r}; "
                f"supported: {_LOSS_NAMES}"
            )
        if int(getattr(reg, "code", -1)) != scalar.L2:
            raise ValueError(
                f"solver 'cocoa' does not support regularizer={getattr(reg, 'name', reg)!r}; "
                "it solves the l2-regularized problem only (elastic net and l1 need a "
                "different local subproblem); use solver='dso' or 'spdc'"
            )
        if not float(problem.alpha) > 0:
            raise ValueError(f"solver 'cocoa' needs alpha > 0, got alpha={problem.alpha!r}")
        if options.shrinking and int(loss.code) not in kernels.BOX_LOSSES:
            raise ValueError(
                f"shrinking=True needs a loss whose dual lives on a box (hinge, "
                f"squared_hinge, smooth_hinge), not loss={loss.name!r}"
            )
        if options.grid is not None:
            self._check_grid(data, int(options.grid))

    def _check_grid(self, data, grid):
        n = int(data.n_samples)
        if grid > n:
            raise ValueError(f"grid={grid} is larger than the number of rows ({n})")

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Read every group on its owner and build the state of epoch 0.

        Parameters
        ----------
        problem : daskpd.problem.Problem
        data : Dataset or MemoryDataset
        seed : numpy.random.SeedSequence
            Root seed; round ``t``, group ``k`` draws its order from
            ``block_seeds(epoch_seed(seed, t), grid)[k]``.
        client : distributed.Client or None
        options : CocoaOptions
        warm_start : Iterate, optional
            With ``z`` (length ``n_samples``): that dual point, projected on the dual box,
            and ``w = -X^T z / (alpha n)``. With ``w`` only: the dual point
            ``z_i = c_i loss'(x_i . w, y_i)`` and its ``w``, a dual method's start.

        Returns
        -------
        state
        """
        state = self._setup(problem, data, seed, client, options)
        settings, n, d = state.settings, state.settings.n_samples, state.settings.n_features
        bounds = state.row_bounds
        sizes = np.diff(bounds)
        if warm_start is None:
            z = [np.zeros(int(m)) for m in sizes]
            w = np.zeros(d)
        else:
            warm_z = warm_start.z
            if not (isinstance(warm_z, np.ndarray) and warm_z.shape == (n,)):
                warm_z = None
            warm_w = None if warm_z is not None else np.asarray(warm_start.w, dtype=np.float64)
            if warm_w is not None and state.client is not None:
                # once to every home, not once per task through the scheduler
                warm_w = state.client.scatter(warm_w, broadcast=True, hash=False)
            parts = [
                (
                    _start_task,
                    group,
                    settings,
                    None if warm_z is None else warm_z[bounds[k] : bounds[k + 1]],
                    warm_w,
                )
                for k, group in enumerate(state.groups)
            ]
            results = _run_tasks(state, parts, "start")
            z = [part[0] for part in results]
            xt_z = np.zeros(d)
            for _, columns, part in results:
                xt_z[columns] += part
            w = xt_z * (-settings.inv_alpha_n)
        return self._placed(state, z, w, epoch=0)

    def run_epoch(self, state, epoch):
        """Run round ``epoch``: one local pass per group, then ``w += sum_k dw_k``.

        One ``dask.compute`` in-process, one graph on a client.

        Parameters
        ----------
        state
            From :meth:`init`, :meth:`run_epoch` or :meth:`restore`. On a client it is
            spent: the futures the returned state does not hold are released once the
            round is submitted (an iterate taken before holds references of its own).
        epoch : int
            1, 2, ...

        Returns
        -------
        state
        """
        settings, grid = state.settings, state.settings.grid
        seeds = block_seeds(epoch_seed(state.seed, epoch), grid)
        if state.client is None:
            import dask

            parts = [
                dask.delayed(_round_task, pure=False)(
                    state.groups[k],
                    state.z[k],
                    state.z_pick,
                    state.w[0],
                    seeds[k],
                    settings,
                    k == 0,
                )  # fmt: skip
                for k in range(grid)
            ]
            results = dask.compute(*parts)
            z = tuple(part[0] for part in results)
            w = _sum_task(state.w[0], settings.direct, 1, *results, *state.columns[0])
            new = {
                "z": z,
                "z_pick": None,
                "z_blocks": z,
                "w": (w,),
                "stats": _stats_task(2, *results),
            }
        else:
            new = self._client_round(state, epoch, seeds)
        return dataclasses.replace(
            state,
            epoch=epoch,
            certified_w=state.w[0],
            certified_z=state.z_blocks,
            **new,
        )

    def _client_round(self, state, epoch, seeds):
        """Submit one round as one graph, release what it spends, wait for the new ``w``."""
        settings, grid = state.settings, state.settings.grid
        graph = _ClientRound(state.client, f"{state.token}-{epoch}")
        owners = state.owners
        tasks = [
            graph.add(
                f"round-{k}",
                _round_task,
                state.groups[k],
                state.z[k],
                state.z_pick,
                state.w[state.home_of(k)],
                seeds[k],
                settings,
                k == 0,
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
            steps, stats_parts, pick = tasks, tasks, 1
        else:
            steps = [
                graph.add(f"step-{k}", operator.getitem, task, 1, worker=owners[k])
                for k, task in enumerate(tasks)
            ]
            stats_parts = [
                graph.add(f"stats-{k}", operator.getitem, task, 2, worker=owners[k])
                for k, task in enumerate(tasks)
            ]
            pick = None
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
        stats = graph.add(
            "stats", _stats_task, None if pick is None else 2, *stats_parts,
            worker=state.homes[0],
        )  # fmt: skip
        # what the new state does not hold: released once the scheduler has the graph
        # (released later, their message would hold up the next round's graph)
        # (z sources that are the blocks themselves go on as the certified z)
        spent = [
            *(state.z if state.z_pick is not None else ()), *state.w[1:], state.certified_w,
            *(state.certified_z or ()), state.stats,
        ]  # fmt: skip
        n = len(sums)
        futures = graph.run([*sums, stats, *tasks, *z_blocks], n_waited=n, release=spent)
        return {
            "w": tuple(futures[:n]),
            "stats": futures[n],
            "z": tuple(futures[n + 1 : n + 1 + grid]),
            "z_pick": 0,
            "z_blocks": tuple(futures[n + 1 + grid :]),
        }

    def iterate(self, state):
        """Return the start point of the last round, with its exact primal and dual.

        Parameters
        ----------
        state

        Returns
        -------
        Iterate
            ``w`` (gathered), ``z`` by group (futures on a client) with ``z_bounds``, and
            ``primal``/``dual``. At epoch 0: the start point, without a certificate.
        """
        client = state.client
        if state.epoch == 0:
            w = state.w[0] if client is None else client.gather(state.w[0])
            z = _references(state.z_blocks)
            return Iterate(w=w, z=z, z_bounds=state.row_bounds)
        if client is None:
            w, stats = state.certified_w, state.stats
        else:
            w, stats = client.gather([state.certified_w, state.stats])
        primal, dual = _certificate(state.settings, stats)
        z = _references(state.certified_z)
        return Iterate(w=w, z=z, z_bounds=state.row_bounds, primal=primal, dual=dual)

    def certificate(self, state):
        """``(primal, dual)`` of :meth:`iterate`'s point, from the last round's sums.

        The round's certifying pass computed them; reading them moves a few numbers, not
        ``w``, so the driver can check the gap after every round.

        Parameters
        ----------
        state

        Returns
        -------
        tuple of float or None
            None at epoch 0 (the start point has no certificate).
        """
        if state.epoch == 0:
            return None
        stats = state.stats if state.client is None else state.client.gather(state.stats)
        return _certificate(state.settings, stats)

    def state_arrays(self, state):
        """Return every array needed to resume exactly (gathers ``w`` and ``z`` once).

        Parameters
        ----------
        state

        Returns
        -------
        dict of str to ndarray
        """
        arrays = {
            "epoch": np.asarray(state.epoch, dtype=np.int64),
            "grid": np.asarray(state.settings.grid, dtype=np.int64),
            "sigma": np.asarray(state.settings.sigma, dtype=np.float64),
        }
        values = [state.w[0], list(state.z_blocks)]
        if state.epoch > 0:
            values += [state.certified_w, list(state.certified_z), state.stats]
        if state.client is not None:
            values = state.client.gather(values)
        arrays["w"] = np.asarray(values[0], dtype=np.float64)
        arrays["z"] = np.concatenate(values[1])
        if state.epoch > 0:
            arrays["certified_w"] = np.asarray(values[2], dtype=np.float64)
            arrays["certified_z"] = np.concatenate(values[3])
            arrays["stats"] = np.asarray(values[4], dtype=np.float64)
        return arrays

    def restore(self, problem, data, arrays, *, seed, client, options):
        """Rebuild the state saved by :meth:`state_arrays`.

        Parameters
        ----------
        problem, data, seed, client, options
            As for :meth:`init`.
        arrays : dict of str to ndarray

        Returns
        -------
        state
        """
        grid = int(arrays["grid"])
        if options.grid is not None and int(options.grid) != grid:
            raise ValueError(f"checkpoint was made with grid={grid}, options ask {options.grid}")
        options = dataclasses.replace(options, grid=grid)
        state = self._setup(problem, data, seed, client, options)
        if float(arrays["sigma"]) != state.settings.sigma:
            raise ValueError(
                f"checkpoint was made with sigma={float(arrays['sigma'])}, options give "
                f"{state.settings.sigma}"
            )
        bounds = state.row_bounds

        def blocks(name):
            return [arrays[name][bounds[k] : bounds[k + 1]].copy() for k in range(grid)]

        epoch = int(arrays["epoch"])
        state = self._placed(state, blocks("z"), np.array(arrays["w"]), epoch=epoch)
        if epoch == 0:
            return state
        certified_z = blocks("certified_z")
        stats = np.array(arrays["stats"])
        certified_w = np.array(arrays["certified_w"])
        if client is not None:
            certified_z = [
                _scatter_to(client, part, state.owners[k]) for k, part in enumerate(certified_z)
            ]
            certified_w = _scatter_to(client, certified_w, state.homes[0])
            stats = _scatter_to(client, stats, state.homes[0])
        return dataclasses.replace(
            state, certified_w=certified_w, certified_z=tuple(certified_z), stats=stats
        )

    # -- helpers ----------------------------------------------------------------------------

    def _setup(self, problem, data, seed, client, options):
        """The state without a point: settings, row groups read on their owners."""
        workers = worker_list(client)
        grid = 1 if options.grid is None else int(options.grid)
        self._check_grid(data, grid)
        settings = _settings(problem, data, options, grid, threads=options.threads)
        bounds = _row_bounds(data, grid)
        owners = tuple(group_owner(settings, workers, k) for k in range(grid))

        homes = tuple(dict.fromkeys(owners))
        token = uuid.uuid4().hex[:12]
        class_pair = class_weight_pair(problem, data)
        ranges = [(int(bounds[k]), int(bounds[k + 1])) for k in range(grid)]
        if client is not None and is_on_disk(data):
            # read by the owner straight from the store; the future stays for the run
            groups = [
                client.submit(
                    _load_group,
                    data,
                    start,
                    stop,
                    class_pair,
                    grid > 1,
                    key=f"cocoa-rows-{k}-{token}",
                    workers=[owners[k]],
                    allow_other_workers=False,
                    pure=False,
                )  # fmt: skip
                for k, (start, stop) in enumerate(ranges)
            ]
        elif client is not None:
            # in-memory data is in this process already: each group goes to its owner once
            groups = [
                _scatter_to(client, _load_group(data, start, stop, class_pair, grid > 1), owners[k])
                for k, (start, stop) in enumerate(ranges)
            ]
        elif is_on_disk(data):
            import dask

            groups = dask.compute(
                *[
                    dask.delayed(_load_group, pure=False)(data, start, stop, class_pair, grid > 1)
                    for start, stop in ranges
                ]
            )
        else:
            groups = [
                _load_group(data, start, stop, class_pair, grid > 1) for start, stop in ranges
            ]
        if client is None:
            columns = (tuple(group.columns for group in groups),)
            sizes = [group.columns.shape[0] for group in groups]
        else:
            columns, sizes = _spread_columns(client, groups, owners, homes, token)
        # a z block may travel with its group's step when at most a quarter of its size
        # (or up to 1 MiB)
        whole = all(
            int(m) <= max(size // 4, 1 << 17)
            for m, size in zip(np.diff(bounds), sizes, strict=True)
        )
        return _State(
            problem=problem,
            source=data,
            settings=settings,
            seed=seed,
            client=client,
            token=token,
            row_bounds=bounds,
            owners=owners,
            homes=homes,
            groups=tuple(groups),
            columns=columns,
            z=(),
            z_pick=None,
            z_blocks=(),
            w=(),
            epoch=0,
            whole=whole,
        )

    def _placed(self, state, z, w, *, epoch):
        """``state`` at point ``(w, z)``: on a client, each block scattered where it lives.

        Scattered, not made by tasks: a lost worker then loses data Dask cannot recompute
        (rather than tasks pinned to a worker that is gone), and the driver replays the
        epoch from its last recovery point.
        """
        client = state.client
        if client is None:
            z = tuple(z)
        else:
            z = tuple(_scatter_to(client, part, state.owners[k]) for k, part in enumerate(z))
            w = [_scatter_to(client, w, home) for home in state.homes]
        w = (w,) if client is None else tuple(w)
        return dataclasses.replace(state, z=z, z_pick=None, z_blocks=z, w=w, epoch=epoch)


def _spread_columns(client, groups, owners, homes, token):
    """Copy every group's columns to every home once; return them and their sizes."""
    columns = [
        client.submit(
            _columns_of,
            group,
            key=f"cocoa-columns-{k}-{token}",
            workers=[owners[k]],
            allow_other_workers=False,
            pure=False,
        )  # fmt: skip
        for k, group in enumerate(groups)
    ]
    copies = tuple(
        tuple(
            columns[k]
            if owners[k] == home
            else client.submit(
                _copy,
                columns[k],
                key=f"cocoa-columns-{k}-{h}-{token}",
                workers=[home],
                allow_other_workers=False,
                pure=False,
            )  # fmt: skip
            for k in range(len(groups))
        )
        for h, home in enumerate(homes)
    )
    sizes = client.gather(
        [
            client.submit(
                len,
                part,
                key=f"cocoa-n-columns-{k}-{token}",
                workers=[owners[k]],
                allow_other_workers=False,
                pure=False,
            )  # fmt: skip
            for k, part in enumerate(columns)
        ]
    )
    return copies, sizes


def _copy(value):
    return value


def _run_tasks(state, calls, name):
    """Run ``calls`` (one ``(fn, group, *args)`` per group) where the groups live; gather."""
    client = state.client
    if client is None:
        import dask

        return list(dask.compute(*[dask.delayed(fn, pure=False)(*args) for fn, *args in calls]))
    futures = [
        client.submit(
            fn,
            *args,
            key=f"cocoa-{name}-{k}-{state.token}",
            workers=[state.owners[k]],
            allow_other_workers=False,
            pure=False,
        )  # fmt: skip
        for k, (fn, *args) in enumerate(calls)
    ]
    return client.gather(futures)


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
