"""DSO: distributed stochastic saddle-point optimization on a p x p grid of tiles.

Matsushima, Yun, Zhang and Vishwanathan, "Distributed Stochastic Optimization of the
Regularized Risk". The objective is written as a saddle function that is a sum over the
nonzeros of ``X``; one update touches one primal and one dual coordinate
(:func:`daskpd.kernels.dso.dso_tile`). Rows are cut into ``p`` row groups ``I_q`` (their data
and dual block ``z_q`` stay on one worker) and columns into ``p`` blocks ``J_r`` (the primal
blocks ``w_r`` travel around a ring). In round ``r`` of an epoch, task ``q`` updates tile
``(q, sigma_r(q))`` with ``sigma_r(q) = (q + r) mod p`` (0-based).

Translation table (paper -> code): ``m`` -> ``n_samples``, ``lambda`` -> ``alpha``,
``alpha_i`` -> ``-z_i``, ``w^{(r)}`` -> ``w`` block ``r``, ``Omega^{(q,r)}`` -> tile
``(q, r)``, ``|Omega_i|`` / ``|Omegabar_j|`` -> ``row_nnz`` / ``col_nnz``, ``eta_t`` ->
``eta0 / sqrt(epoch)``, ``t`` -> ``epoch``, ``p`` -> ``grid``.

The Dask graph of an epoch is a dataflow, not a sequence of barriers: task ``(r, q)`` depends
only on ``z`` block ``q`` (from task ``(r - 1, q)``) and on ``w`` block ``sigma_r(q)`` (from task
``(r - 1, q + 1)``). Lemma 2 of the paper makes any such execution equal, bit for bit, to the
serial replay :func:`serial_replay` in the order (epoch, round, row group, visit order).

A ``w`` block that moves between two worker processes of one machine goes through shared
memory (:mod:`daskpd.solvers._shared`): the next task maps and updates the same pages. Between
machines it travels as plain arrays through Dask.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import operator
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from daskpd import _layout
from daskpd._cluster import worker_memory_limit
from daskpd.kernels import dso as kernels
from daskpd.kernels import scalar
from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers import _shared
from daskpd.solvers._driver import Iterate, block_seeds, epoch_seed, register_solver
from daskpd.solvers._groups import (
    class_weight_pair,
    group_owner,
    has_grid,
    is_on_disk,
    row_weights,
    worker_list,
)

__all__ = ["DSO", "DSOOptions", "serial_replay"]

_LOG = logging.getLogger(__name__)

_STEPS = ("adagrad", "sqrt")
_ORDERS = ("shuffled", "blocked", "rows", "random", "storage")
#: Orders whose visit unit is a segment of the cached layout (not a single nonzero).
_SEGMENT_ORDERS = ("shuffled", "blocked", "rows")
#: Orders that cut a tile's columns into cache-sized sub-blocks.
_SUB_BLOCK_ORDERS = ("shuffled", "blocked")
_INITS = ("auto", "cocoa", "zero", "dcd")
_REG_STEPS = ("auto", "gradient", "prox")
_REPORTS = ("last", "average")


@dataclass(frozen=True)
class DSOOptions:
    """Options of :class:`DSO`.

    Parameters
    ----------
    grid : int or None, default=None
        ``p``: the data is cut into ``p`` row groups and ``p`` column blocks (``p * p``
        tiles). Must be a multiple of the number of Dask workers. ``None``: the number of
        workers for in-memory data, else the smallest grid stored with the dataset that is a
        multiple of the number of workers.
    step : {"adagrad", "sqrt"}, default="adagrad"
        ``"sqrt"``: ``eta_t = eta0 / sqrt(epoch)`` as in Algorithm 1; ``"adagrad"``: per
        coordinate ``eta0 / sqrt(sum of squared partial gradients + adagrad_eps)`` (the
        accumulators of ``w`` travel with the ``w`` blocks, those of ``z`` stay).
    eta0 : float or None, default=None
        Primal step. ``None``: for AdaGrad 0.5 from zero and 0.005 from a start
        (``init="dcd"`` or a warm start), see :data:`START_ETA`; ``min(1 / alpha, n_samples)``
        for ``"sqrt"``.
    dual_eta0 : float or None, default=None
        Dual step; ``None``: as ``eta0`` for AdaGrad, ``eta0`` for ``"sqrt"`` (the paper's
        single step).
    adagrad_eps : float, default=1e-12
        Added to the AdaGrad accumulators.
    visit_order : {"shuffled", "blocked", "rows", "random", "storage"}, default="shuffled"
        Order of the nonzeros inside a tile, drawn per (epoch, row group, column block).
        ``"shuffled"``: the tile's columns are cut into sub-blocks whose slice of ``w``
        fits in a core's cache (``block_bytes``); each sub-block's nonzeros are stored once
        in a pseudo-random order (a function of the tile's place in the grid) and cut into
        chunks of ``chunk_nnz``; every epoch visits the sub-blocks in a random order and the
        chunks of each in a random order, a chunk's nonzeros one after the other. That
        layout is read as stored with the grid when it was stored for the run's
        ``block_bytes``, ``chunk_nnz`` and SVRG setting (``partition_dataset`` stores those
        of the defaults), else built in the first epoch (:mod:`daskpd._layout`). The
        kernel then runs a straight loop: 2.1x the updates a second of ``"rows"`` and 2.4x
        those of ``"blocked"`` on splice-like tiles (BENCHMARKS.md, DSO section).
        ``"blocked"``: the same sub-blocks, inside each the rows in a random permutation,
        each row's nonzeros of the sub-block in storage order. ``"rows"``: a random
        permutation of the tile's rows, each row's nonzeros in storage order.
        ``"random"``: a random permutation of the nonzeros. ``"storage"``: storage order.
        Every order is a serial order of DSO's updates (Lemma 2 holds for each); they
        differ in how often consecutive updates miss the cache on ``w``.
    interleave : int, default=4
        With ``"blocked"`` and ``"rows"`` (ignored by the others): visit this many segments
        of the order round-robin (one nonzero of each in turn), so consecutive updates touch
        different rows and the CPU overlaps their dependency chains. 1 visits one after the
        other.
    chunk_nnz : int, default=1024
        With ``"shuffled"``: nonzeros per chunk, the unit the epoch's random order moves
        (sub-blocks of fewer than :data:`MIN_CHUNKS` times this many nonzeros get smaller
        chunks).
    block_bytes : int, default=524288
        With ``"shuffled"`` and ``"blocked"``: bytes of the packed ``w`` columns of one
        sub-block (32 bytes a column, 64 with SVRG). The default, half a MiB, stays inside a
        1 MiB L2 cache.
    init : {"auto", "cocoa", "zero", "dcd"}, default="auto"
        ``"cocoa"``: rounds of the data-parallel dual solver (:mod:`daskpd.solvers.cocoa`,
        its default options) until its certified gap is at most ``start_gap`` times its
        primal or ``start_rounds`` rounds ran; DSO's epochs continue from its ``(w, z)``
        with the start's step (:data:`START_ETA`) and SVRG. Its rounds are DSO's
        initialization (they count in the run's training seconds). ``"auto"``: ``"cocoa"``
        for the problems that solver takes (L2 with hinge, squared hinge, smoothed hinge,
        logistic or squared loss), else ``"zero"``. A warm start replaces either.
        ``"zero"``: ``w = 0`` and ``z_i = c_i loss'(0, y_i)`` projected on the dual box;
        ``"dcd"``: ``dcd_passes`` passes of local dual coordinate ascent on every row group,
        then ``w`` = the row-count-weighted average of the local ``w`` (App. A; hinge,
        logistic or squared with L2).
    dcd_passes : int, default=20
        Passes of the local dual coordinate ascent of ``init="dcd"``.
    start_gap : float, default=1e-3
        With ``init="cocoa"``: the relative duality gap at which the start's rounds stop.
    start_rounds : int, default=20
        With ``init="cocoa"``: the most rounds the start runs.
    svrg_every : int or None, default=None
        Take an SVRG snapshot at the start of every ``svrg_every``-th epoch and use
        variance-reduced coupling terms (0: off). ``None``: every epoch (1) from a start
        (``init="dcd"`` or a warm start), off from zero. From the DCD start on splice-like
        data the plain updates leave a gap 23-32x larger after 10 epochs (1e7 and 1e8
        nonzeros) at a higher cost per epoch (BENCHMARKS.md, DSO section). From zero it
        stays off by default: not measured at those scales (``pipelines/splice_site.py``
        turns it on from zero, where its small real data set needs it).
    regularizer_step : {"auto", "gradient", "prox"}, default="auto"
        How the regularizer enters the primal step: its (sub)gradient as in update (8), or
        a proximal step; ``"auto"``: gradient for L2, prox for L1 and elastic net.
    w_box : bool, default=True
        Project every primal coordinate on ``[-B, B]``, a box known to contain the
        solution (App. A: ``B = 1/sqrt(alpha)`` for hinge and ``sqrt(log 2 / alpha)`` for
        logistic with L2; otherwise from ``alpha R(w*) <= P(0)``).
    report : {"last", "average"}, default="last"
        Which iterate :meth:`DSO.iterate` reports as ``w``/``z`` (both are always kept).
    tile_cache_bytes : int or None, default=None
        Bytes of tiles each worker process keeps in memory between epochs (tiles that fit
        are kept, the rest re-read from zarr every epoch). ``None``: a quarter of the
        worker's memory limit (of the machine's memory without a worker). On a worker with
        a memory limit, a tile is also only kept while the process stays under half the
        limit, below Dask's spill and pause thresholds.
    shared_memory : bool, default=True
        Hand ``w`` blocks between the worker processes of one machine through shared
        memory (``/dev/shm``, or ``$DASKPD_SHM_DIR``): a block that changes worker is its
        file's name, not 16 bytes a column over TCP (:mod:`daskpd.solvers._shared`).
        Between machines, and everywhere with ``False``, blocks travel by Dask. The
        result is the same bits either way.
    """

    grid: int | None = None
    step: str = "adagrad"
    eta0: float | None = None
    dual_eta0: float | None = None
    adagrad_eps: float = 1e-12
    visit_order: str = "shuffled"
    interleave: int = 4
    chunk_nnz: int = 1024
    block_bytes: int = 1 << 19
    init: str = "auto"
    dcd_passes: int = 20
    start_gap: float = 1e-3
    start_rounds: int = 20
    svrg_every: int | None = None
    regularizer_step: str = "auto"
    w_box: bool = True
    report: str = "last"
    tile_cache_bytes: int | None = None
    shared_memory: bool = True

    def __post_init__(self):
        for name, value, valid in (
            ("step", self.step, _STEPS),
            ("visit_order", self.visit_order, _ORDERS),
            ("init", self.init, _INITS),
            ("regularizer_step", self.regularizer_step, _REG_STEPS),
            ("report", self.report, _REPORTS),
        ):
            if value not in valid:
                raise ValueError(f"{name} must be one of {', '.join(valid)}; got {value!r}")
        if self.grid is not None and (
            isinstance(self.grid, bool)
            or not isinstance(self.grid, int | np.integer)
            or self.grid < 1
        ):
            raise ValueError(f"grid must be a positive integer, got {self.grid!r}")
        for name in ("eta0", "dual_eta0"):
            value = getattr(self, name)
            if value is not None and not (float(value) > 0 and math.isfinite(float(value))):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not float(self.adagrad_eps) >= 0:
            raise ValueError(f"adagrad_eps must be >= 0, got {self.adagrad_eps!r}")
        if int(self.block_bytes) < 64:
            raise ValueError(f"block_bytes must be >= 64, got {self.block_bytes!r}")
        if int(self.interleave) < 1:
            raise ValueError(f"interleave must be >= 1, got {self.interleave!r}")
        if int(self.chunk_nnz) < 1:
            raise ValueError(f"chunk_nnz must be >= 1, got {self.chunk_nnz!r}")
        if int(self.dcd_passes) < 1:
            raise ValueError(f"dcd_passes must be >= 1, got {self.dcd_passes!r}")
        if not (float(self.start_gap) >= 0 and math.isfinite(float(self.start_gap))):
            raise ValueError(f"start_gap must be a finite number >= 0, got {self.start_gap!r}")
        if isinstance(self.start_rounds, bool) or int(self.start_rounds) < 1:
            raise ValueError(f"start_rounds must be >= 1, got {self.start_rounds!r}")
        if self.svrg_every is not None and int(self.svrg_every) < 0:
            raise ValueError(f"svrg_every must be >= 0 or None, got {self.svrg_every!r}")
        if not isinstance(self.shared_memory, bool | np.bool_):
            raise ValueError(f"shared_memory must be True or False, got {self.shared_memory!r}")
        if self.tile_cache_bytes is not None and int(self.tile_cache_bytes) < 0:
            raise ValueError(f"tile_cache_bytes must be >= 0, got {self.tile_cache_bytes!r}")


#: Default AdaGrad step from zero.
ZERO_ETA = 0.5
#: Default AdaGrad step from a start (``init="dcd"`` or a warm start). AdaGrad's first step
#: on a coordinate has size ``eta0`` whatever the gradient's scale, so from a point near the
#: optimum a zero-start step throws the start away: on splice-like data (1e7 and 5.2e7
#: nonzeros, alpha 1e-5) 0.5 raised the primal of the DCD start 50-fold, 0.005 kept its test
#: AUPRC and made the duality gap fall (BENCHMARKS.md, DSO section, step table).
START_ETA = 0.005

# --------------------------------------------------------------------------------------------
# settings shared by every task of a run


@dataclass(frozen=True)
class _Settings:
    """Constants of a run that every task needs (small; shipped with each task)."""

    grid: int
    n_samples: int
    n_features: int
    binary: bool
    loss_code: int
    loss_params: np.ndarray
    reg_code: int
    reg_params: np.ndarray
    alpha: float
    w_bound: float
    adagrad: bool
    eps: float
    eta0: float
    dual_eta0: float
    reg_step: int
    visit_order: str
    interleave: int
    chunk_nnz: int
    block_cols: int
    svrg_every: int
    cache_bytes: int | None
    report_average: bool
    #: name of the run's shared-memory directories (None: blocks travel by Dask)
    shared_run: str | None = None
    #: tasks read the tiles' layout stored with the grid (see _load_tile)
    stored_layout: bool = False

    def steps(self, epoch):
        """Primal and dual steps of an epoch."""
        if self.adagrad:
            return self.eta0, self.dual_eta0
        root = math.sqrt(epoch)
        return self.eta0 / root, self.dual_eta0 / root

    def snapshot_epoch(self, epoch):
        """Whether an SVRG snapshot is taken at the start of ``epoch``."""
        return self.svrg_every > 0 and (epoch - 1) % self.svrg_every == 0


def _settings(problem, data, options, grid, started=False):
    loss, reg = problem.loss, problem.regularizer
    alpha = float(problem.alpha)
    n = int(data.n_samples)
    if options.step == "adagrad":
        default = START_ETA if started else ZERO_ETA
        eta0 = default if options.eta0 is None else float(options.eta0)
        dual_eta0 = default if options.dual_eta0 is None else float(options.dual_eta0)
    else:
        eta0 = min(1.0 / alpha, float(n)) if options.eta0 is None else float(options.eta0)
        dual_eta0 = eta0 if options.dual_eta0 is None else float(options.dual_eta0)
    reg_step = options.regularizer_step
    if reg_step == "auto":
        reg_step = "gradient" if reg.code == scalar.L2 else "prox"
    svrg_every = (1 if started else 0) if options.svrg_every is None else int(options.svrg_every)
    return _Settings(
        grid=int(grid),
        n_samples=n,
        n_features=int(data.n_features),
        binary=bool(data.binary),
        loss_code=int(loss.code),
        loss_params=np.asarray(loss.params, dtype=np.float64),
        reg_code=int(reg.code),
        reg_params=np.asarray(reg.params, dtype=np.float64),
        alpha=alpha,
        w_bound=_w_bound(problem, data) if options.w_box else math.inf,
        adagrad=options.step == "adagrad",
        eps=float(options.adagrad_eps),
        eta0=eta0,
        dual_eta0=dual_eta0,
        reg_step=kernels.REG_GRADIENT if reg_step == "gradient" else kernels.REG_PROX,
        visit_order=options.visit_order,
        # a shuffled chunk is visited on its own: its nonzeros already mix rows
        interleave=int(options.interleave) if options.visit_order in ("blocked", "rows") else 1,
        chunk_nnz=int(options.chunk_nnz),
        block_cols=_layout.sub_block_columns(options.block_bytes, svrg_every > 0),
        svrg_every=svrg_every,
        cache_bytes=None if options.tile_cache_bytes is None else int(options.tile_cache_bytes),
        report_average=options.report == "average",
    )


def _cocoa_start_solver():
    # Imported here: the start is one use of the dual solver, which DSO's other paths skip.
    from daskpd.solvers.cocoa import Cocoa

    return Cocoa()


def _cocoa_start_options():
    from daskpd.solvers.cocoa import CocoaOptions

    return CocoaOptions()


def _start_method(problem, data, options):
    """The start ``init`` resolves to (``"auto"``: the dual solver's when it takes the problem)."""
    if options.init != "auto":
        return options.init
    try:
        _cocoa_start_solver().check(problem, data, _cocoa_start_options())
    except ValueError:
        return "zero"
    return "cocoa"


def _cocoa_start(problem, data, seed, client, options):
    """DSO's start from the data-parallel dual solver: its rounds until a certified gap.

    Each round's certificate is of the round's start point (one round behind), so at most
    ``start_rounds`` rounds run and the iterate returned is the last certified one. The
    rounds draw from a child of the run's seed, so DSO's epochs keep their own streams.

    Returns
    -------
    Iterate
        ``w`` and the whole dual ``z`` (gathered in row order).
    """
    solver, cocoa_options = _cocoa_start_solver(), _cocoa_start_options()
    start_seed = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 1 << 30))
    state = solver.init(problem, data, seed=start_seed, client=client, options=cocoa_options)
    for rnd in range(1, int(options.start_rounds) + 1):
        state = solver.run_epoch(state, rnd)
        primal, dual = solver.certificate(state)
        if primal - dual <= float(options.start_gap) * abs(primal):
            break
    point = solver.iterate(state)
    z = point.z if client is None else client.gather(list(point.z))
    return Iterate(
        w=np.asarray(point.w, dtype=np.float64),
        z=np.concatenate([np.asarray(part, dtype=np.float64) for part in z]),
    )


def _w_bound(problem, data):
    """Half-width of a box that contains the primal solution."""
    loss, reg, alpha = problem.loss, problem.regularizer, float(problem.alpha)
    y = np.asarray(data.y, dtype=np.float64)
    weights = row_weights(data, y, 0, y.shape[0], class_weight_pair(problem, data))
    mean_weight = float(weights.mean()) if weights.size else 0.0
    if reg.code == scalar.L2 and loss.code == scalar.HINGE:
        return math.sqrt(mean_weight / alpha)
    if reg.code == scalar.L2 and loss.code == scalar.LOGISTIC:
        return math.sqrt(mean_weight * math.log(2.0) / alpha)
    # alpha R(w*) <= P(w*) <= P(0) and R_j(w_j) <= R(w) bound every coordinate.
    p0 = float(np.mean(weights * _loss_at_zero(loss, y))) if y.size else 0.0
    budget = p0 / alpha
    if reg.code == scalar.L2:
        return math.sqrt(2.0 * budget)
    if reg.code == scalar.L1:
        return budget
    ratio = float(reg.params[0])
    if ratio >= 1.0:
        return budget
    quad = 0.5 * (1.0 - ratio)
    # largest |w| with ratio |w| + quad w^2 <= budget
    return (-ratio + math.sqrt(ratio * ratio + 4.0 * quad * budget)) / (2.0 * quad)


def _loss_at_zero(loss, y):
    return np.array(
        [scalar.loss_value(int(loss.code), np.asarray(loss.params, np.float64), 0.0, v) for v in y]
    )


# --------------------------------------------------------------------------------------------
# tiles: read by the task on the worker that owns the row group


_CACHE_LOCK = threading.Lock()
_TILE_CACHE: dict = {}
_CACHE_USED = [0]


# The cache never takes a worker's memory above this fraction of its limit, below Dask's
# spill target (0.6): the cache cannot be spilled, so a worker it pushed past the pause
# threshold (0.8) would wait for memory that is never freed.
CACHE_RSS_FRACTION = 0.5


def _cache_budget(requested, limit):
    """Bytes of tiles a process may cache: ``requested``, else a quarter of its memory."""
    if requested is not None:
        return requested
    if limit:
        return limit // 4
    try:
        import psutil

        return int(psutil.virtual_memory().total) // 4
    except ImportError:
        return 0


def _cache_admits(size, requested):
    """Whether a tile of ``size`` bytes may join the cache (lock held)."""
    limit = worker_memory_limit()
    if _CACHE_USED[0] + size > _cache_budget(requested, limit):
        return False
    if not limit:
        return True
    import psutil

    return psutil.Process().memory_info().rss + size <= CACHE_RSS_FRACTION * limit


def _segments(rows):
    """Start offsets of the runs of equal row ids of a tile (its rows), plus the end."""
    if rows.shape[0] == 0:
        return np.zeros(1, dtype=np.int64)
    starts = np.flatnonzero(rows[1:] != rows[:-1]) + 1
    return np.concatenate(([0], starts, [rows.shape[0]])).astype(np.int64)


def _layout_cols(settings):
    """Columns per sub-block of the cached tile layout (0: one block, row-major)."""
    return settings.block_cols if settings.visit_order in _SUB_BLOCK_ORDERS else 0


def _tile_layout(settings):
    """The :class:`~daskpd._layout.TileLayout` of a run's tiles; None unless ``"shuffled"``."""
    if settings.visit_order != _layout.VISIT_ORDER:
        return None
    return _layout.TileLayout(settings.block_cols, settings.chunk_nnz)


def _stored_layout(data, settings):
    """Whether the run's tile layout is stored with the grid of ``data``, usable.

    Asked once per run, where the run starts: a stored layout that is stale (a grid stored
    again since) or records other parameters is reported there, by a warning naming it.
    Only a stored dataset's own tiles have one (not those of a view such as ``with_bias``).
    """
    layout = _tile_layout(settings)
    stored = getattr(data, "stored_layout", None)
    return layout is not None and stored is not None and stored(settings.grid, layout)


def _load_tile(source, settings, q, r):
    """Return ``(rows, cols, vals, segment_ptr, block_ptr)`` of tile ``(q, r)``.

    ``source`` is a dataset (``tile(P, q, r)``) or the tile's ``(rows, cols, vals)``. With
    ``visit_order="blocked"`` the nonzeros are regrouped by column sub-block
    (:func:`daskpd.kernels.dso.block_layout`), with ``"shuffled"`` also shuffled inside each
    sub-block and cut into chunks (:func:`daskpd._layout.build_tile_layout`); otherwise they
    stay in storage order as one block. With ``settings.stored_layout`` the ``"shuffled"``
    layout is read as stored with the grid (checked against its per-tile CRC32), the same
    bits without the building. Tiles of on-disk datasets are memoized per process within
    ``settings.cache_bytes``.
    """
    path = getattr(source, "path", None)
    block_cols = _layout_cols(settings)
    key = None
    if path is not None:
        key = (
            str(path), int(getattr(source, "nnz", -1)), settings.grid, q, r, block_cols,
            settings.visit_order == "shuffled" and settings.chunk_nnz,
        )  # fmt: skip
        with _CACHE_LOCK:
            hit = _TILE_CACHE.get(key)
        if hit is not None:
            return hit
    tile = None
    if settings.stored_layout and not isinstance(source, tuple):
        # None when the layout went stale since the run started (the dataset warns): built
        tile = source.layout_tile(settings.grid, _tile_layout(settings), q, r)
    if tile is None:
        tile = _build_tile(source, settings, q, r, block_cols)
    if key is not None:
        size = sum(part.nbytes for part in tile)
        with _CACHE_LOCK:
            # Keep, never evict: the access pattern is cyclic, where LRU eviction would
            # throw away exactly the tile needed next.
            if _cache_admits(size, settings.cache_bytes):
                _TILE_CACHE[key] = tile
                _CACHE_USED[0] += size
    return tile


def _build_tile(source, settings, q, r, block_cols):
    """The layout of tile ``(q, r)`` built from its stored order (see :func:`_load_tile`)."""
    if isinstance(source, tuple):
        rows, cols, vals = source
    else:
        rows, cols, vals = source.tile(settings.grid, q, r)
    parts = list(_layout.tile_arrays(rows, cols, vals, settings.binary))
    # only the list holds the storage-order copy now: the shuffled layout's building drops it
    # before its own copy is made (two copies of the tile at a time, not three; out of core,
    # tiles are read again every epoch)
    del rows, cols, vals
    if settings.visit_order == "shuffled":
        place = (settings.grid, q, r)
        return _layout.build_tile_layout(parts, settings.binary, _tile_layout(settings), place)
    rows, cols, vals = parts
    if block_cols:
        return kernels.block_layout(rows, cols, vals, settings.binary, block_cols)
    segment_ptr = _segments(rows)
    block_ptr = np.array([0, segment_ptr.shape[0] - 1], dtype=np.int64)
    return rows, cols, vals, segment_ptr, block_ptr


#: Fewest chunks a sub-block of the ``"shuffled"`` layout is cut into (defined with the
#: layout, :mod:`daskpd._layout`).
MIN_CHUNKS = _layout.MIN_CHUNKS


def _visit_order(tile, settings, seed, epoch, q, r):
    """The visit order of tile ``(q, r)`` in ``epoch`` (a function of the seed only).

    Indices of segments for ``"shuffled"``, ``"blocked"`` and ``"rows"``, of nonzeros
    otherwise.
    """
    rows, _, _, segment_ptr, block_ptr = tile
    if settings.visit_order in _SEGMENT_ORDERS:
        n_items = segment_ptr.shape[0] - 1
    else:
        n_items = rows.shape[0]
    if settings.visit_order == "storage":
        return np.arange(n_items, dtype=np.int64)
    tile_seed = block_seeds(epoch_seed(seed, epoch), settings.grid * settings.grid)[
        q * settings.grid + r
    ]
    rng = np.random.default_rng(tile_seed)
    if settings.visit_order not in _SUB_BLOCK_ORDERS:
        return rng.permutation(n_items).astype(np.int64)
    # sub-blocks in a random order, the segments (chunks or rows) of each in a random order
    parts = [
        block_ptr[b] + rng.permutation(int(block_ptr[b + 1] - block_ptr[b]))
        for b in rng.permutation(block_ptr.shape[0] - 1)
    ]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def _kernel_segments(tile, settings):
    """``segment_ptr`` for :func:`daskpd.kernels.dso.dso_tile`: empty for nonzero orders."""
    if settings.visit_order in _SEGMENT_ORDERS:
        return tile[3]
    return np.zeros(0, np.int64)


# --------------------------------------------------------------------------------------------
# tasks (pure: they copy what they mutate)


def _row_constants_task(source, class_pair, settings, start, stop):
    """Per-row constants of one row group and its starting dual block."""
    y = np.asarray(source.y_rows(start, stop), dtype=np.float64)
    weights = row_weights(source, y, start, stop, class_pair)
    row_nnz = np.asarray(source.row_nnz[start:stop], dtype=np.float64)
    inv_row_nnz = np.divide(1.0, row_nnz, out=np.zeros_like(row_nnz), where=row_nnz > 0)
    inv_weight = np.divide(1.0, weights, out=np.zeros_like(weights), where=weights > 0)
    z_lo = np.empty_like(y)
    z_hi = np.empty_like(y)
    z0 = np.empty_like(y)
    kernels.dual_boxes(settings.loss_code, settings.loss_params, y, weights, z_lo, z_hi, z0)
    return {
        "y": y,
        "weight": weights,
        "inv_weight": inv_weight,
        "inv_row_nnz": inv_row_nnz,
        "z_lo": z_lo,
        "z_hi": z_hi,
        "z0": z0,
    }


def _tile_task(
    source, settings, seed, epoch, q, r, zsrc, zpick, wsrc, wpick, rowc, inv_col_nnz, share,
    z_avg=None, w_avg=None,
):  # fmt: skip
    """Task ``(epoch, round, q)``: update (8) over tile ``(q, r)``; returns new z and w states.

    ``zsrc``/``wsrc`` are block states, or with an integer ``zpick``/``wpick`` the
    ``(z state, w block, ...)`` tuple of the task that made them (no split task between
    the two). The task is the only reader of its ``w`` block, which it updates in place
    when the block is packed (see :class:`_ColumnBlock`), and a state given to
    :meth:`DSO.run_epoch` is spent. ``share``: a block packed here goes into shared memory
    (its next worker is on this machine). In the epoch's last round, ``z_avg`` and
    ``w_avg`` are the averages of the epochs before: the task returns ``z_avg`` updated
    with this epoch's ``z_q``, and updates ``w_avg`` in place with ``w_r`` (Theorem 1).
    The average so reads ``w_r`` before the next epoch's first task updates it, and costs
    no task and no scheduler round trip of its own at the end of every epoch; ``w_avg``,
    the size of a ``w`` block, is neither returned (the tuple stays small enough to travel
    whole, :func:`_whole`) nor made anew every epoch (a new one is fresh memory whose page
    faults cost as much as the average itself).
    """
    tile = _load_tile(source, settings, q, r)
    rows, cols, vals = tile[:3]
    segment_ptr = _kernel_segments(tile, settings)
    z, z_acc, z_snap, v_snap = _picked(zsrc, zpick)
    block = _picked(wsrc, wpick)
    z, z_acc = z.copy(), z_acc.copy()
    order = _visit_order(tile, settings, seed, epoch, q, r)
    eta_w, eta_z = settings.steps(epoch)
    # nothing after this line raises: a retried task must find its w block as it was
    block = block.packed(inv_col_nnz, (settings.shared_run, f"w{r}") if share else None)
    columns = block.records
    tick = time.perf_counter()
    kernels.dso_tile(
        rows, cols, vals, settings.binary, segment_ptr, order, settings.interleave,
        z, z_acc, rowc["z_lo"], rowc["z_hi"], rowc["y"], rowc["inv_weight"],
        rowc["inv_row_nnz"], z_snap, v_snap, columns, settings.w_bound,
        settings.loss_code, settings.loss_params, settings.reg_code, settings.reg_params,
        settings.alpha, 1.0 / settings.n_samples, eta_w, eta_z, settings.adagrad,
        settings.eps, settings.svrg_every > 0, settings.reg_step,
    )  # fmt: skip
    _KERNEL_CLOCK.add(time.perf_counter() - tick)
    zstate, block = (z, z_acc, z_snap, v_snap), _ColumnBlock.of_records(columns, block.shared)
    if z_avg is None:
        return zstate, block
    kernels.running_mean(w_avg, block[0], float(epoch), w_avg)
    return zstate, block, _running_mean(z_avg, z, epoch)


class _Clock:
    """Seconds summed over the threads of a process (lock: tasks may run in parallel)."""

    def __init__(self):
        self.seconds = 0.0
        self.lock = threading.Lock()

    def add(self, seconds):
        with self.lock:
            self.seconds += seconds


_KERNEL_CLOCK = _Clock()


def kernel_seconds():
    """Seconds this process's DSO tasks have spent in the tile kernel so far.

    What the Dask overhead of an epoch is measured against: read it on every worker
    (``client.run(kernel_seconds)``) before and after the epoch and sum the differences.
    """
    return _KERNEL_CLOCK.seconds


def _picked(source, pick):
    """``source`` itself, or ``source[pick]`` when it is a task's ``(z, w)`` pair."""
    return source if pick is None else source[pick]


class _ColumnBlock:
    """The state of a ``w`` block between tasks: ``(w, w_acc, w_snap, u_snap)``.

    The kernel works on packed records, one cache line per column
    (:func:`daskpd.kernels.dso.pack_columns`). Packing a 2.3M-column block and unpacking it
    again cost 11 ms a task, 8% of an epoch on one worker, so a block stays packed, and the
    next task, its last reader, updates those records in place.

    Records in a process's own memory travel as the four plain arrays when pickled (sent to
    another worker or the client, spilled): half the bytes of the records, which carry
    ``1 / |Omegabar_j|`` and padding; the receiving task packs them into new records.
    Records in a shared-memory file of the run (:mod:`daskpd.solvers._shared`) travel as
    the file's handle, and the receiver maps the same pages: every process of one machine
    updates the block where it is. Such a block is sent to another machine (or a client
    there) only as :meth:`plain` arrays.

    Indexing and iteration give the four arrays (views into the records when packed), like
    the tuple this replaces.
    """

    __slots__ = ("_arrays", "_records", "_shared", "__weakref__")

    def __init__(self, w, w_acc, w_snap, u_snap):
        self._arrays = (w, w_acc, w_snap, u_snap)
        self._records = None
        self._shared = None

    @classmethod
    def of_records(cls, records, shared=None):
        """A block held as packed records (``pack_columns``'s layout).

        ``shared``: the handle of the shared file the records are mapped from, if they are.
        """
        block = cls.__new__(cls)
        block._arrays = None
        block._records = records
        block._shared = shared
        return block

    def parts(self):
        """``(w, w_acc, w_snap, u_snap)``; the snapshots are empty when not taken."""
        if self._records is None:
            return self._arrays
        records, empty = self._records, np.zeros(0)
        snapshots = records.shape[1] == 8
        return (
            records[:, 0],
            records[:, 1],
            records[:, 3] if snapshots else empty,
            records[:, 4] if snapshots else empty,
        )

    @property
    def records(self):
        """The packed records (``None`` for a block of plain arrays)."""
        return self._records

    def packed(self, inv_col_nnz, share=None):
        """This block if packed, else its arrays packed into new records.

        ``share``: ``(run, file name)`` of the shared file to put new records in (see
        :mod:`daskpd.solvers._shared`); ``None`` for this process's memory.
        """
        if self._records is not None:
            return self
        w, w_acc, w_snap, u_snap = self._arrays
        width = 8 if w_snap.shape[0] == w.shape[0] > 0 else 4
        n = w.shape[0] * width
        shared = None
        out = None
        if share is not None and n > 0:
            try:
                out, shared = _shared.create(*share, (n,))
            except OSError as exc:
                # /dev/shm full: the block stays in this process and travels by Dask
                _LOG.warning("w block kept in process memory: %s", exc)
        if out is None:
            out = _OUTPUTS.empty(n)
        records = kernels.pack_columns(w, w_acc, inv_col_nnz, w_snap, u_snap, out=out)
        return _ColumnBlock.of_records(records, shared)

    @property
    def shared(self):
        """The handle of the shared file holding the records, or ``None``."""
        return self._shared

    def plain(self):
        """This block as four plain arrays in this process (what goes to another machine)."""
        if self._records is None:
            return self
        return _ColumnBlock(*self._plain_arrays())

    def _plain_arrays(self):
        n = self._records.shape[0]
        w, w_acc = np.empty(n), np.empty(n)
        kernels.unpack_columns(self._records, w, w_acc)
        _, _, w_snap, u_snap = self.parts()
        return w, w_acc, np.ascontiguousarray(w_snap), np.ascontiguousarray(u_snap)

    @property
    def nbytes(self):
        """Bytes held (Dask's memory accounting)."""
        if self._records is not None:
            return self._records.nbytes
        return sum(part.nbytes for part in self._arrays)

    def __getitem__(self, k):
        return self.parts()[k]

    def __iter__(self):
        return iter(self.parts())

    def __len__(self):
        return 4

    def __reduce__(self):
        if self._shared is not None:
            return _attached_block, (self._shared, self._records.shape)
        if self._records is None:
            return _ColumnBlock, self._arrays
        return _ColumnBlock, self._plain_arrays()


def _attached_block(handle, shape):
    """Unpickle a block whose records are in a shared file: map them."""
    return _ColumnBlock.of_records(_shared.attach(handle, shape), handle)


def _plain_task(source, pick):
    """Task: the ``w`` block ``source`` (or ``source[pick]``) as plain arrays."""
    return _picked(source, pick).plain()


def _register_sizeof():
    from dask.sizeof import sizeof

    sizeof.register(_ColumnBlock)(lambda block: block.nbytes)


_register_sizeof()


class _Lease:
    """Exposes a pooled buffer as an array; collected when the last view of it dies."""

    def __init__(self, raw):
        self.raw = raw
        self.__array_interface__ = raw.__array_interface__


class _OutputPool:
    """Float64 buffers for the ``w`` blocks that tasks return, recycled within a process.

    A task that may not update a ``w`` block in place packs it into new records (see
    :class:`_ColumnBlock`), and the averages are new arrays every epoch. On a Dask worker
    every large allocation is new memory (the nanny sets ``MALLOC_TRIM_THRESHOLD_``), and
    its page faults cost 1-2 ms a MB here (numpy asks for huge pages, whose compaction
    stalls): as much as the kernel's own work on a block of sparse columns. A buffer handed
    out is exposed through a :class:`_Lease`; numpy keeps the lease alive while any view of
    the array lives, and when it is collected the buffer comes back here, at most
    ``per_size`` of a length and ``max_bytes`` in all.
    """

    def __init__(self, per_size=4):
        self.per_size = per_size
        self.free = {}
        self.held = 0
        # re-entrant: a lease may be collected, and give its buffer back, while the pool's
        # lock is held by the same thread
        self.lock = threading.RLock()

    def empty(self, n):
        """A float64 array of length ``n`` (contents undefined)."""
        with self.lock:
            stack = self.free.get(n)
            raw = stack.pop() if stack else None
            if raw is not None:
                self.held -= raw.nbytes
        if raw is None:
            raw = np.empty(n)
        lease = _Lease(raw)
        weakref.finalize(lease, self._give_back, raw).atexit = False
        return np.asarray(lease)

    def _give_back(self, raw):
        limit = worker_memory_limit()
        max_bytes = limit // 16 if limit else 1 << 30
        with self.lock:
            stack = self.free.setdefault(raw.shape[0], [])
            if len(stack) < self.per_size and self.held + raw.nbytes <= max_bytes:
                stack.append(raw)
                self.held += raw.nbytes


_OUTPUTS = _OutputPool()


def _products_task(source, settings, q, r, z, w):
    """``(X_qr^T z_q, X_qr w_r)`` of tile ``(q, r)`` (an SVRG snapshot term)."""
    rows, cols, vals = _load_tile(source, settings, q, r)[:3]
    xt_z = np.zeros(w.shape[0])
    x_w = np.zeros(z.shape[0])
    kernels.tile_products(rows, cols, vals, settings.binary, z, w, xt_z, x_w)
    return xt_z, x_w


def _sum_task(*parts):
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total


def _snapshot_z_task(zstate, *x_w_parts):
    z, z_acc, _, _ = zstate
    return z, z_acc, z.copy(), _sum_task(*x_w_parts)


def _snapshot_w_task(wstate, *xt_z_parts):
    w, w_acc = np.ascontiguousarray(wstate[0]), np.ascontiguousarray(wstate[1])
    return _ColumnBlock(w, w_acc, w.copy(), _sum_task(*xt_z_parts))


def _running_mean(average, x, count):
    """``average + (x - average) / count``, in a recycled buffer."""
    out = _OUTPUTS.empty(average.shape[0])
    kernels.running_mean(average, x, float(count), out)
    return out


def _initial_zstate(rowc, start_z):
    """Dual block state at epoch 0: ``start_z`` (DCD or warm start) in the box, or ``z0``."""
    z = rowc["z0"].copy() if start_z is None else np.clip(start_z, rowc["z_lo"], rowc["z_hi"])
    empty = np.zeros(0)
    return z, np.zeros_like(z), empty, empty


def _zeros_of_first(block_state):
    return np.zeros_like(block_state[0])


def _dcd_task(source, settings, rowc, start, stop, n_passes, seed, q):
    """Local dual coordinate ascent on row group ``q``; returns ``(z_q, m_q/n * w_q)``."""
    import scipy.sparse as sp

    X, _ = source.read_rows(start, stop)
    if not sp.issparse(X) or X.format != "csr":
        X = sp.csr_matrix(X)
    # the stored arrays as they are (float32 data stays float32: no 8-byte copy per nonzero)
    indptr = np.asarray(X.indptr, dtype=np.int64)
    indices = np.asarray(X.indices, dtype=np.int32)
    vals = np.ascontiguousarray(X.data)
    y = rowc["y"]
    m_q = y.shape[0]
    rng = np.random.default_rng(block_seeds(seed, settings.grid)[q])
    orders = np.stack([rng.permutation(m_q) for _ in range(n_passes)]).astype(np.int64)
    if m_q == 0:
        return rowc["z0"].copy(), np.zeros(settings.n_features)
    a = np.zeros(m_q)
    if settings.loss_code == scalar.LOGISTIC:
        a = rowc["weight"] * 0.5
    scale = 1.0 / (settings.alpha * m_q)
    # w must start consistent with a: w = sum_i a_i y_i x_i / (alpha m_q) (0 for hinge)
    w = spdc_kernels.transpose_dot(indptr, indices, vals, False, a * y * scale, settings.n_features)
    kernels.dcd_local(
        indptr, indices, vals, False, y, rowc["weight"], settings.loss_code,
        settings.alpha, n_passes, orders, a, w,
    )  # fmt: skip
    row_nnz = np.diff(indptr)
    # the squared loss's a is not folded with the label (see dcd_local)
    folded = a if settings.loss_code == scalar.SQUARED else y * a
    z = np.where(row_nnz > 0, -folded, rowc["z0"])
    z = np.clip(z, rowc["z_lo"], rowc["z_hi"])
    return z, w * (m_q / settings.n_samples)


# --------------------------------------------------------------------------------------------
# execution backends: plain dask.compute (in-process) or futures on a distributed client


class _LocalGraph:
    """Builds one epoch as ``dask.delayed`` calls and runs it with a single ``dask.compute``."""

    def __init__(self):
        import dask

        self._delayed = dask.delayed

    def call(self, fn, *args, nout=None, worker=None, name=None):
        return self._delayed(fn, pure=False, nout=nout)(*args)

    def part(self, pair, k, worker=None, name=None):
        return self._delayed(operator.getitem, pure=True)(pair, k)

    def run(self, outputs, done_with=(), wait_for=()):
        """Compute ``outputs`` in this process.

        ``done_with`` and ``wait_for`` are :class:`_ClientGraph`'s: here the blocks are
        arrays (nothing to release) and one compute runs every task before it returns.
        """
        import dask

        return list(dask.compute(*outputs))


class _ClientGraph:
    """Builds one epoch as tasks pinned to the worker owning each row group; runs it as one graph.

    The epoch goes to the scheduler in one message. Submitted one by one, its tasks reached
    the scheduler in batches (the client sends at most one message per 10 ms), so the
    first round could wait for the rest of the epoch to arrive.
    """

    def __init__(self, client, token):
        self.client = client
        self.token = token
        self._layers = {}

    def call(self, fn, *args, nout=None, worker=None, name=None):
        from dask.task_spec import TaskRef

        key = f"dso-{name}-{self.token}"
        self._add(key, fn, args, worker, retries=2)
        if nout is None:
            return TaskRef(key)
        # Split on the same worker, so each part travels (or stays) on its own.
        return tuple(self.part(TaskRef(key), k, worker, name) for k in range(nout))

    def part(self, pair, k, worker=None, name=None):
        """Task: ``pair[k]`` on ``worker`` (where ``pair`` was made: nothing moves)."""
        from dask.task_spec import TaskRef

        key = f"dso-{name}-{self.token}-{k}"
        self._add(key, operator.getitem, (pair, k), worker)
        return TaskRef(key)

    def _add(self, key, fn, args, worker, retries=None):
        from dask.highlevelgraph import MaterializedLayer
        from dask.task_spec import Task, TaskRef

        # a task's inputs are arguments of their own (futures are TaskRefs): one nested in a
        # container would not be seen as an input
        for arg in args:
            if isinstance(arg, (tuple, list, dict)) and any(
                isinstance(x, TaskRef) for x in (arg.values() if isinstance(arg, dict) else arg)
            ):
                raise TypeError(f"task {key}: pass each input as an argument of its own")
        annotations = {}
        if worker is not None:
            annotations.update(workers=[worker], allow_other_workers=False)
        if retries:
            annotations["retries"] = retries
        self._layers[key] = MaterializedLayer(
            {key: Task(key, fn, *args)}, annotations=annotations or None
        )

    def run(self, outputs, done_with=(), wait_for=()):
        """Submit the graph; wait for ``outputs`` (its tasks, or futures); return futures.

        ``done_with``: futures to release once the graph is submitted (the scheduler keeps
        what the graph needs). Released at the end of an epoch instead, their message would
        hold up the next epoch's graph: the client sends at most one message per 10 ms.
        ``wait_for``: wait for these tasks of the graph instead of ``outputs``.
        """
        from dask.highlevelgraph import HighLevelGraph
        from distributed import wait

        layers, self._layers = self._layers, {}
        refs = [*outputs, *wait_for]
        keys = list(dict.fromkeys(ref.key for ref in refs if ref.key in layers))
        made = {}
        if keys:
            graph = HighLevelGraph(layers, {key: set() for key in layers})
            made = dict(zip(keys, self.client.get(graph, keys, sync=False), strict=True))
        for future in done_with:
            future.release()
        futures = [made.get(ref.key, ref) for ref in refs]
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
class _State:
    """Everything of a run between epochs (arrays or futures, by block)."""

    problem: Any
    source: Any
    settings: _Settings
    seed: Any
    client: Any
    workers: tuple
    token: str
    row_bounds: np.ndarray
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
        return _LocalGraph()
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
        zstates = [
            graph.call(
                _snapshot_z_task,
                zstates[q],
                *[products[q][r][1] for r in range(p)],
                worker=owner[q],
                name=f"e{epoch}-zsnap-{q}",
            )  # fmt: skip
            for q in range(p)
        ]
        wstates = [
            graph.call(
                _snapshot_w_task,
                wstates[r],
                *[products[q][r][0] for q in range(p)],
                worker=home[r],
                name=f"e{epoch}-wsnap-{r}",
            )  # fmt: skip
            for r in range(p)
        ]
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
#: ``z`` arrays go along unused, a millisecond a MiB between two processes here; a task
#: splitting the ``w`` block off first costs a scheduler round trip, 3-8 ms measured on
#: 2 busy cores (BENCHMARKS.md).
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


def _first(graph, block_state, worker, name):
    """Task: ``block_state[0]`` (the ``z`` or ``w`` of a block state), run on ``worker``."""
    return graph.call(_first_part, block_state, worker=worker, name=name)


def _first_part(block_state):
    # contiguous: a w block's records hold w as a strided column
    return np.ascontiguousarray(block_state[0])


# --------------------------------------------------------------------------------------------
# the solver


def _grid_info(data, grid):
    info = data.grid(grid)
    return (
        np.asarray(info.row_bounds, dtype=np.int64),
        tuple(info.block_columns(r) for r in range(info.n_blocks)),
    )


def _assemble(blocks, block_cols, n_features):
    """The full vector of per-column-block parts (inverse of ``v[block_cols[r]]``)."""
    full = np.zeros(n_features)
    for part, columns in zip(blocks, block_cols, strict=True):
        full[columns] = part
    return full


def _choose_grid(data, options, n_workers):
    if options.grid is not None:
        return int(options.grid)
    if not is_on_disk(data):
        return max(1, n_workers)
    grids = sorted(int(g) for g in getattr(data, "grids", []))
    for g in grids:
        if g % max(1, n_workers) == 0:
            return g
    return max(1, n_workers)


def _ensure_grid(data, grid):
    """Make sure ``data`` has the tiled layout of ``grid`` (made in memory for in-memory data)."""
    if has_grid(data, grid):
        return data
    if not is_on_disk(data) and hasattr(data, "partition"):
        data.partition(grid)
        return data
    where = getattr(data, "path", "DATA")
    raise ValueError(
        f"dataset {where} has no tiled layout for grid {grid}; run "
        f"`daskpd partition {where} --grid {grid}` first"
    )


@register_solver
class DSO:
    """Distributed stochastic saddle-point optimization (DSO) over a ``grid x grid`` tiling.

    Supports the losses hinge, smoothed hinge, logistic, squared and absolute and the
    regularizers L2, L1 and elastic net; row weights (``sample_weight`` times
    ``class_weight``) scale the dual box. See the module docstring for the schedule and
    :class:`DSOOptions` for the options.
    """

    name = "dso"
    Options = DSOOptions

    # -- protocol ---------------------------------------------------------------------------

    def check(self, problem, data, options):
        """Raise ``ValueError`` for anything DSO cannot do, before any Dask work.

        Parameters
        ----------
        problem : daskpd.problem.Problem
        data : Dataset or MemoryDataset
        options : DSOOptions
        """
        loss, reg = problem.loss, problem.regularizer
        if int(getattr(loss, "code", -1)) not in kernels.DSO_LOSSES:
            raise ValueError(
                f"DSO does not support loss {getattr(loss, 'name', loss)!r}; supported: "
                "hinge, smooth_hinge, logistic, squared, absolute"
            )
        if int(getattr(reg, "code", -1)) not in kernels.DSO_REGULARIZERS:
            raise ValueError(
                f"DSO does not support regularizer {getattr(reg, 'name', reg)!r}; supported: "
                "l2, l1, elasticnet"
            )
        if not float(problem.alpha) > 0:
            raise ValueError(f"DSO needs alpha > 0, got alpha={problem.alpha!r}")
        if getattr(data, "layout", "csr") != "csr":
            raise ValueError(f"DSO needs sparse (csr) data, got layout {data.layout!r}")
        if options.init == "cocoa":
            _cocoa_start_solver().check(problem, data, _cocoa_start_options())
        if options.init == "dcd" and not (
            reg.code == scalar.L2 and loss.code in (scalar.HINGE, scalar.LOGISTIC, scalar.SQUARED)
        ):
            raise ValueError(
                "init='dcd' needs the l2 regularizer with the hinge, logistic or squared loss, "
                "got "
                f"{getattr(loss, 'name', loss)!r} + {getattr(reg, 'name', reg)!r}"
            )
        if options.grid is not None:
            self._check_grid(data, int(options.grid))

    def _check_grid(self, data, grid):
        n, d = int(data.n_samples), int(data.n_features)
        if grid > min(n, d):
            raise ValueError(
                f"grid={grid} is too large for {n} rows and {d} columns (needs grid <= {min(n, d)})"
            )
        if is_on_disk(data) and not has_grid(data, grid):
            raise ValueError(
                f"dataset {data.path} has no tiled layout for grid {grid}; run "
                f"`daskpd partition {data.path} --grid {grid}` first"
            )

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Build the state of epoch 0 (one Dask compute or one wave of futures).

        Parameters
        ----------
        problem : daskpd.problem.Problem
        data : Dataset or MemoryDataset
        seed : numpy.random.SeedSequence
            Root seed; epoch ``e``, tile ``(q, r)`` draws its order from
            ``block_seeds(epoch_seed(seed, e), grid**2)[q * grid + r]``.
        client : distributed.Client or None
        options : DSOOptions
        warm_start : Iterate, optional
            Starting ``w`` (and ``z`` when it is an ndarray of length ``n_samples``).

        Returns
        -------
        state
        """
        workers = worker_list(client)
        grid = _choose_grid(data, options, len(workers))
        self._check_grid(data, grid)
        if workers and grid % len(workers) != 0:
            raise ValueError(
                f"grid={grid} must be a multiple of the number of Dask workers ({len(workers)})"
            )
        if warm_start is None and _start_method(problem, data, options) == "cocoa":
            warm_start = _cocoa_start(problem, data, seed, client, options)
        data = _ensure_grid(data, grid)
        started = warm_start is not None or options.init == "dcd"
        settings = _settings(problem, data, options, grid, started=started)
        settings = dataclasses.replace(settings, stored_layout=_stored_layout(data, settings))
        row_bounds, block_cols = _grid_info(data, grid)
        token = _token()
        shared = _shared.open_run(client, token) if options.shared_memory else None
        if shared is not None:
            settings = dataclasses.replace(settings, shared_run=shared.name)
        p = grid
        on_disk = is_on_disk(data)
        # On-disk rows are read by the worker owning the row group; in-memory data is
        # already in this process, so its setup runs here and only the blocks are shipped.
        graph = _graph(client if on_disk else None, token)
        owner = [group_owner(settings, workers, q) for q in range(p)]
        class_pair = class_weight_pair(problem, data)
        row_consts = [
            graph.call(
                _row_constants_task,
                data,
                class_pair,
                settings,
                int(row_bounds[q]),
                int(row_bounds[q + 1]),
                worker=owner[q],
                name=f"rows-{q}",
            )  # fmt: skip
            for q in range(p)
        ]
        n = settings.n_samples
        use_dcd = options.init == "dcd" and warm_start is None
        warm_z = getattr(warm_start, "z", None) if warm_start is not None else None
        if not (isinstance(warm_z, np.ndarray) and warm_z.shape == (n,)):
            warm_z = None
        start_z = [None] * p
        w_parts = []
        if use_dcd:
            for q in range(p):
                start_z[q], w_part = graph.call(
                    _dcd_task, data, settings, row_consts[q], int(row_bounds[q]),
                    int(row_bounds[q + 1]), int(options.dcd_passes), epoch_seed(seed, 1), q,
                    nout=2, worker=owner[q], name=f"dcd-{q}",
                )  # fmt: skip
                w_parts.append(w_part)
        elif warm_z is not None:
            start_z = [warm_z[row_bounds[q] : row_bounds[q + 1]] for q in range(p)]
        # Dual blocks are built where they will live; only the d-sized w reaches the client.
        zstates = [
            graph.call(_initial_zstate, row_consts[q], start_z[q], worker=owner[q], name=f"z0-{q}")
            for q in range(p)
        ]
        z_avg = [
            graph.call(_zeros_of_first, zstates[q], worker=owner[q], name=f"zavg0-{q}")
            for q in range(p)
        ]
        outputs = [*row_consts, *zstates, *z_avg]
        if w_parts:
            outputs.append(graph.call(_sum_task, *w_parts, worker=owner[0], name="dcd-w"))
        results = graph.run(outputs)
        row_consts, zstates, z_avg = results[:p], results[p : 2 * p], results[2 * p : 3 * p]
        if warm_start is not None:
            w = np.asarray(warm_start.w, dtype=np.float64).copy()
        elif use_dcd:
            w = results[3 * p]
            w = client.gather(w) if client is not None and on_disk else w
        else:
            w = np.zeros(settings.n_features)
        w = np.clip(w, -settings.w_bound, settings.w_bound)
        empty = np.zeros(0)
        wstates = [
            _ColumnBlock(w[block_cols[r]], np.zeros(block_cols[r].shape[0]), empty, empty)
            for r in range(p)
        ]
        w_avg = [np.zeros_like(ws[0]) for ws in wstates]
        col_nnz = np.asarray(data.col_nnz, dtype=np.float64)
        inv_col = np.divide(1.0, col_nnz, out=np.zeros_like(col_nnz), where=col_nnz > 0)
        col_consts = [inv_col[block_cols[r]] for r in range(p)]
        if on_disk:
            sources = [[data] * p for _ in range(p)]
        else:
            sources = [[_plain_tile(data, grid, q, r) for r in range(p)] for q in range(p)]
        if client is not None:
            if not on_disk:
                # in-memory data was set up in this process: ship each block to its owner once
                sources = [
                    [_scatter_to(client, tile, owner[q]) for tile in row]
                    for q, row in enumerate(sources)
                ]
                row_consts = _scatter_each(client, row_consts, owner)
                zstates = _scatter_each(client, zstates, owner)
                z_avg = _scatter_each(client, z_avg, owner)
            col_consts = client.scatter(col_consts, broadcast=True, hash=False)
            home = [_w_home(settings, workers, r) for r in range(p)]
            wstates = _scatter_each(client, wstates, home)
            w_avg = _scatter_each(client, w_avg, home)
        return _State(
            problem=problem,
            source=data,
            settings=settings,
            seed=seed,
            client=client,
            workers=workers,
            token=token,
            row_bounds=row_bounds,
            block_cols=block_cols,
            row_consts=tuple(row_consts),
            col_consts=tuple(col_consts),
            tile_sources=tuple(tuple(row) for row in sources),
            zstates=tuple(zstates),
            wstates=tuple(wstates),
            z_avg=tuple(z_avg),
            w_avg=tuple(w_avg),
            epoch=0,
            shared=shared,
            # a tuple holds z, z_acc, (z_snap, v_snap,) and, the last round's, z_avg
            tuple_bytes=int(np.diff(row_bounds).max(initial=0))
            * 8
            * (5 if settings.svrg_every > 0 else 3),
        )

    def run_epoch(self, state, epoch):
        """Run one epoch: ``grid`` rounds of ``grid`` tile tasks, one compute or one wave.

        Parameters
        ----------
        state
            From :meth:`init`, :meth:`run_epoch` or :meth:`restore`. Spent: its ``w`` blocks
            are updated in place (no copy of every block per epoch), so this method,
            :meth:`iterate` and :meth:`state_arrays` refuse it afterwards.
        epoch : int
            1, 2, ...

        Returns
        -------
        state
        """
        _fresh(state).spent["by_epoch"] = epoch
        graph = _graph(state.client, f"{state.token}-{epoch}")
        zstates, wstates, z_avg, finals, handoff = _epoch_graph(state, epoch, graph)
        p = state.settings.grid
        # the given state is spent: its blocks go once the scheduler has the new epoch
        # (not w_avg: the same arrays, updated in place, go on)
        # (the tuples of the handoff: each is there twice, for its z and for its w)
        spent = [*state.zstates, *state.wstates, *state.z_avg, *(t for t, _ in state.handoff[:p])]
        results = graph.run(
            [*zstates, *wstates, *z_avg, *finals], done_with=_futures(spent), wait_for=finals
        )
        made = {t.key: f for t, f in zip(finals, results[3 * p :], strict=True)}
        return dataclasses.replace(
            state,
            zstates=tuple(results[:p]),
            wstates=tuple(results[p : 2 * p]),
            z_avg=tuple(results[2 * p : 3 * p]),
            # in this process (no cluster) a task's tuple is no cheaper than its parts
            handoff=tuple((made[t.key], k) for t, k in handoff) if state.client else (),
            epoch=epoch,
        )

    def iterate(self, state):
        """Return the current iterate; ``z`` stays by row group (futures on a cluster).

        Parameters
        ----------
        state

        Returns
        -------
        Iterate
            ``w``/``z`` are the last iterate (or the averaged one with
            ``report="average"``); ``w_avg``/``z_avg`` the other (``None`` at epoch 0).
        """
        client, p = _fresh(state).client, state.settings.grid
        owner = [group_owner(state.settings, state.workers, q) for q in range(p)]
        d, cols = state.settings.n_features, state.block_cols
        if client is None:
            w = _assemble([ws[0] for ws in state.wstates], cols, d)
            w_avg = _assemble(state.w_avg, cols, d)
            z = [zs[0] for zs in state.zstates]
        else:
            w = _assemble([ws[0] for ws in client.gather(_w_for_client(state))], cols, d)
            w_avg = _assemble(client.gather(list(state.w_avg)), cols, d)
            # z never leaves its worker: pick it out of the block state where it lives.
            z = [
                client.submit(
                    operator.getitem,
                    zs,
                    0,
                    key=f"dso-z-{state.token}-{state.epoch}-{q}",
                    workers=[owner[q]],
                )
                for q, zs in enumerate(state.zstates)
            ]
        # references of their own: run_epoch releases the state's when it has spent it
        z_avg = [_another_reference(f) for f in state.z_avg]
        if state.epoch == 0:
            return Iterate(w=w, z=z, z_bounds=state.row_bounds)
        if state.settings.report_average:
            return Iterate(w=w_avg, z=z_avg, z_bounds=state.row_bounds, w_avg=w, z_avg=z)
        return Iterate(w=w, z=z, z_bounds=state.row_bounds, w_avg=w_avg, z_avg=z_avg)

    def state_arrays(self, state):
        """Return every array needed to resume exactly (gathers the blocks once).

        Parameters
        ----------
        state

        Returns
        -------
        dict of str to ndarray
        """
        zstates, wstates, z_avg, w_avg = _local_blocks(_fresh(state))

        def columns(parts):
            # w-sized arrays in the data's column order, whatever the grid's; SVRG snapshots
            # stay empty before the first one is taken
            if not any(part.shape[0] for part in parts):
                return np.zeros(0)
            return _assemble(parts, state.block_cols, state.settings.n_features)

        arrays = {
            "epoch": np.asarray(state.epoch, dtype=np.int64),
            "grid": np.asarray(state.settings.grid, dtype=np.int64),
            "w": columns([ws[0] for ws in wstates]),
            "w_acc": columns([ws[1] for ws in wstates]),
            "z": np.concatenate([zs[0] for zs in zstates]),
            "z_acc": np.concatenate([zs[1] for zs in zstates]),
            "w_avg": columns(w_avg),
            "z_avg": np.concatenate(z_avg),
            # the steps and the SVRG period as resolved at init (they depend on how the run
            # started, and restore re-runs init from zero)
            "steps": np.array([state.settings.eta0, state.settings.dual_eta0]),
            "svrg_every": np.asarray(state.settings.svrg_every, dtype=np.int64),
        }
        if state.settings.svrg_every > 0:
            arrays["w_snap"] = columns([ws[2] for ws in wstates])
            arrays["u_snap"] = columns([ws[3] for ws in wstates])
            arrays["z_snap"] = np.concatenate([zs[2] for zs in zstates])
            arrays["v_snap"] = np.concatenate([zs[3] for zs in zstates])
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
        # checkpoints from before the key existed were made when the default was 0
        svrg_every = arrays.get("svrg_every", options.svrg_every or 0)
        # the saved blocks replace the start, which need not be run again
        options = dataclasses.replace(options, grid=grid, init="zero", svrg_every=int(svrg_every))
        state = self.init(problem, data, seed=seed, client=client, options=options)
        if "steps" in arrays:
            eta0, dual_eta0 = (float(v) for v in arrays["steps"])
            settings = dataclasses.replace(state.settings, eta0=eta0, dual_eta0=dual_eta0)
            state = dataclasses.replace(state, settings=settings)
        rb, cols = state.row_bounds, state.block_cols
        p = grid
        svrg = state.settings.svrg_every > 0
        empty = np.zeros(0)

        def zpart(name, q):
            return arrays[name][rb[q] : rb[q + 1]].copy() if svrg else empty

        def wpart(name, r):
            return arrays[name][cols[r]] if svrg and arrays[name].shape[0] else empty

        zstates = [
            (arrays["z"][rb[q] : rb[q + 1]].copy(), arrays["z_acc"][rb[q] : rb[q + 1]].copy(),
             zpart("z_snap", q), zpart("v_snap", q))
            for q in range(p)
        ]  # fmt: skip
        wstates = [
            _ColumnBlock(
                arrays["w"][cols[r]], arrays["w_acc"][cols[r]], wpart("w_snap", r),
                wpart("u_snap", r),
            )
            for r in range(p)
        ]  # fmt: skip
        z_avg = [arrays["z_avg"][rb[q] : rb[q + 1]].copy() for q in range(p)]
        w_avg = [arrays["w_avg"][cols[r]] for r in range(p)]
        if client is not None:
            owner = [group_owner(state.settings, state.workers, q) for q in range(p)]
            zstates = _scatter_each(client, zstates, owner)
            z_avg = _scatter_each(client, z_avg, owner)
            home = [_w_home(state.settings, state.workers, r) for r in range(p)]
            wstates = _scatter_each(client, wstates, home)
            w_avg = _scatter_each(client, w_avg, home)
        return dataclasses.replace(
            state,
            zstates=tuple(zstates),
            wstates=tuple(wstates),
            z_avg=tuple(z_avg),
            w_avg=tuple(w_avg),
            epoch=int(arrays["epoch"]),
        )

    def close(self, state):
        """Remove the run's shared-memory files on every machine.

        The driver calls this once when a run ends (or a state is given up for a replay).
        Every state of the run shares these files: none of them can run on afterwards.
        Without a call, the files on this machine go when the run's last state is collected
        (or at exit); on the workers' other machines they stay.

        Parameters
        ----------
        state
        """
        if state.shared is not None:
            state.shared.close()


def _w_for_client(state):
    """The ``w`` block states, as they can come to this process (futures)."""
    graph = _graph(state.client, f"{state.token}-{state.epoch}")
    home = [_w_home(state.settings, state.workers, r) for r in range(state.settings.grid)]
    return graph.run(
        [
            _handed(graph, ws, None, home[r], None, state, f"w{r}")
            for r, ws in enumerate(state.wstates)
        ]
    )


def _futures(values):
    """The Dask futures among ``values`` (block states of a run without a cluster are arrays)."""
    from distributed import Future

    return [v for v in values if isinstance(v, Future)]


def _another_reference(value):
    """A new future of the same key as future ``value`` (else ``value`` itself)."""
    if not _futures([value]):
        return value
    from distributed import Future

    return Future(value.key, value.client)


def _local_blocks(state):
    zstates, wstates = list(state.zstates), list(state.wstates)
    z_avg, w_avg = list(state.z_avg), list(state.w_avg)
    if state.client is not None:
        wstates = _w_for_client(state)
        zstates, wstates, z_avg, w_avg = state.client.gather([zstates, wstates, z_avg, w_avg])
    return zstates, wstates, z_avg, w_avg


def _scatter_each(client, blocks, owner):
    """Scatter block ``b`` to worker ``owner[b]`` (one future per block)."""
    return [_scatter_to(client, block, owner[b]) for b, block in enumerate(blocks)]


def _scatter_to(client, value, worker):
    # A one-element list keeps tuples (block states, tiles) as one future.
    return client.scatter([value], workers=[worker], hash=False)[0]


def _token():
    import uuid

    return uuid.uuid4().hex[:12]


def _plain_tile(data, grid, q, r):
    rows, cols, vals = data.tile(grid, q, r)
    return (np.asarray(rows), np.asarray(cols), None if vals is None else np.asarray(vals))


# --------------------------------------------------------------------------------------------
# serial replay (the reference of Lemma 2)


def _seed_sequence(seed):
    if isinstance(seed, np.random.SeedSequence):
        return seed
    return np.random.SeedSequence(int(seed))


def serial_replay(problem, data, *, n_epochs, seed=0, options=None):
    """Replay DSO's updates one by one on a single process, in the order of Lemma 2.

    For each epoch, each round ``r`` and each row group ``q = 0 .. p - 1``, the nonzeros of
    tile ``(q, (q + r) mod p)`` are appended in their visit order to one global sequence,
    which a single kernel call then runs on the full ``w`` and ``z``. No blocks, no Dask: a
    distributed run must equal this bit for bit.

    Parameters
    ----------
    problem : daskpd.problem.Problem
    data : Dataset or MemoryDataset
        With the tiled layout of ``options.grid`` (made in memory for in-memory data).
    n_epochs : int
        Epochs to replay.
    seed : int or numpy.random.SeedSequence, default=0
        Root seed, as given to :meth:`DSO.init`.
    options : DSOOptions, optional

    Returns
    -------
    result : dict of str to ndarray
        ``w``, ``z``, ``w_acc``, ``z_acc``, ``w_avg``, ``z_avg`` after ``n_epochs``.
    """
    options = options or DSOOptions()
    seed = _seed_sequence(seed)
    solver = DSO()
    solver.check(problem, data, options)
    state = solver.init(problem, data, seed=seed, client=None, options=options)
    settings = state.settings
    p = settings.grid
    rb, block_cols = state.row_bounds, state.block_cols
    data = _ensure_grid(data, p)
    arrays = solver.state_arrays(state)
    w, w_acc, z, z_acc = arrays["w"], arrays["w_acc"], arrays["z"], arrays["z_acc"]
    w_avg, z_avg = arrays["w_avg"], arrays["z_avg"]
    consts = {
        key: np.concatenate([c[key] for c in state.row_consts])
        for key in ("z_lo", "z_hi", "y", "inv_weight", "inv_row_nnz")
    }
    inv_col_nnz = _assemble(state.col_consts, block_cols, settings.n_features)
    tiles = {}
    for q in range(p):
        for r in range(p):
            source = state.tile_sources[q][r]
            tiles[q, r] = _load_tile(source, settings, q, r)
    svrg = settings.svrg_every > 0
    w_snap = u_snap = z_snap = v_snap = np.zeros(0)
    for epoch in range(1, int(n_epochs) + 1):
        if settings.snapshot_epoch(epoch):
            w_snap, z_snap = w.copy(), z.copy()
            u_snap = np.zeros_like(w)
            v_snap = np.zeros_like(z)
            for (q, r), (rows, cols, vals, *_) in tiles.items():
                block = block_cols[r]
                xt_z = np.zeros(block.shape[0])
                x_w = np.zeros(int(rb[q + 1] - rb[q]))
                kernels.tile_products(
                    rows, cols, vals, settings.binary, z[rb[q] : rb[q + 1]], w[block], xt_z, x_w
                )
                # Same summation order as the distributed snapshot tasks: over q, then r.
                u_snap[block] = _ordered_add(u_snap[block], xt_z, q)
                v_snap[rb[q] : rb[q + 1]] = _ordered_add(v_snap[rb[q] : rb[q + 1]], x_w, r)
        sequence_rows, sequence_cols, sequence_vals = [], [], []
        for rnd in range(p):
            for q in range(p):
                r = (q + rnd) % p
                tile = tiles[q, r]
                rows, cols, vals = tile[:3]
                order = _visit_order(tile, settings, seed, epoch, q, r)
                if settings.visit_order in _SEGMENT_ORDERS:
                    order = kernels.expand_order(tile[3], order, settings.interleave)
                sequence_rows.append(rows[order].astype(np.int64) + rb[q])
                sequence_cols.append(block_cols[r][cols[order]])
                if not settings.binary:
                    sequence_vals.append(vals[order])
        rows = np.concatenate(sequence_rows)
        cols = np.concatenate(sequence_cols)
        vals = np.concatenate(sequence_vals) if sequence_vals else np.zeros(0)
        eta_w, eta_z = settings.steps(epoch)
        columns = kernels.pack_columns(w, w_acc, inv_col_nnz, w_snap, u_snap)
        kernels.dso_tile(
            rows, cols, vals, settings.binary, np.zeros(0, np.int64),
            np.arange(rows.shape[0], dtype=np.int64), 1,
            z, z_acc, consts["z_lo"], consts["z_hi"], consts["y"], consts["inv_weight"],
            consts["inv_row_nnz"], z_snap, v_snap, columns, settings.w_bound,
            settings.loss_code, settings.loss_params, settings.reg_code, settings.reg_params,
            settings.alpha, 1.0 / settings.n_samples, eta_w, eta_z, settings.adagrad,
            settings.eps, svrg, settings.reg_step,
        )  # fmt: skip
        w, w_acc = columns[:, 0].copy(), columns[:, 1].copy()
        w_avg = w_avg + (w - w_avg) / epoch
        z_avg = z_avg + (z - z_avg) / epoch
    return {"w": w, "z": z, "w_acc": w_acc, "z_acc": z_acc, "w_avg": w_avg, "z_avg": z_avg}


def _ordered_add(total, part, index):
    # The distributed snapshot sums parts starting from a copy of the first one.
    return part.copy() if index == 0 else total + part
