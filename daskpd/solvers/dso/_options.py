"""The options of DSO (:class:`DSOOptions`, the default steps) and the constants every task of
a run needs (:class:`_Settings`, with the box that holds the primal solution).

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.dso`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from daskpd.data import layout as _layout
from daskpd.kernels import dso as kernels
from daskpd.kernels import scalar
from daskpd.solvers.common.groups import class_weight_pair, row_weights

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
        Primal step. ``None``: for AdaGrad 0.5 from zero, 0.005 from the ``init="dcd"``
        start (:data:`START_ETA`) and, from a start whose ``w`` is known (``init="auto"`` or
        ``"cocoa"``, a warm start), 5e-4 (:data:`WARM_ETA`);
        ``min(1 / alpha, n_samples)`` for ``"sqrt"``.
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
        of the defaults), else built in the first epoch (:mod:`daskpd.data.layout`). The
        kernel then runs a straight loop, the fastest of these orders on splice-like tiles
        (measured in BENCHMARKS.md, DSO section).
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
        one thread, its other defaults) until its certified gap is at most ``start_gap`` times its
        primal or ``start_rounds`` rounds ran; DSO's epochs continue from its ``(w, z)``
        with the start's step (:data:`START_ETA`) and SVRG. Its rounds are DSO's
        initialization (they count in the run's training seconds). ``"auto"``: ``"cocoa"``
        for the problems that solver takes (L2 with hinge, squared hinge, smoothed hinge,
        logistic or squared loss) when its rows, kept in one worker, need at most half of
        that worker's memory; else ``"zero"``. A warm start replaces either.
        ``"zero"``: ``w = 0`` and ``z_i = c_i loss'(0, y_i)`` projected on the dual box;
        ``"dcd"``: ``dcd_passes`` passes of local dual coordinate ascent on every row group,
        then ``w`` = the row-count-weighted average of the local ``w`` (App. A; hinge,
        logistic or squared with L2).
    dcd_passes : int, default=20
        Passes of the local dual coordinate ascent of ``init="dcd"``.
    start_gap : float, default=1e-3
        With ``init="cocoa"``: the relative duality gap at which the start's rounds stop.
        The start's certificate is the run's epoch-0 row (no pass: the rounds computed it);
        ``tol`` is checked from the first DSO epoch on.
    start_rounds : int, default=20
        With ``init="cocoa"``: the most rounds the start runs.
    svrg_every : int or None, default=None
        Take an SVRG snapshot at the start of every ``svrg_every``-th epoch and use
        variance-reduced coupling terms (0: off). ``None``: every epoch (1) from a start
        (``init="dcd"`` or a warm start), off from zero. From a start on splice-like data
        the plain updates leave a far larger gap after the same epochs, and the snapshot
        costs a pass over the tiles (BENCHMARKS.md, DSO section). From zero it
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
        file's name, not 16 bytes a column over TCP (:mod:`daskpd.solvers.common.shared`).
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
#: Default AdaGrad step from a start whose ``w`` is known and close (``init="auto"`` or
#: ``"cocoa"``: the dual solver's certified rounds; a warm start). From the dual solver's start
#: (gap 1e-3 of the primal) on splice-like data, hinge, :data:`START_ETA` raised the certified
#: gap within 4 epochs: 4-fold on 3,000 rows of 2^16 hashed columns (alpha 1e-4), 100- to
#: 1000-fold and more on 1e7 nonzeros (alpha 1e-3 and 1e-5). This step made the gap fall on
#: all of them and at 1e8 nonzeros (1e-3 did too on the hashed set; 5e-5 let it creep up on
#: the 1e7 set). Neither the scale of ``w`` nor the row norms predicted the safe step across
#: those sets, so it is a constant.
WARM_ETA = 5e-4

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

    def tile_update(self, eta_w, eta_z, svrg):
        """The :class:`daskpd.kernels.dso.TileUpdate` of a tile task with these steps."""
        return kernels.TileUpdate(
            loss_code=self.loss_code,
            loss_params=self.loss_params,
            reg_code=self.reg_code,
            reg_params=self.reg_params,
            alpha=self.alpha,
            inv_n=1.0 / self.n_samples,
            eta_w=eta_w,
            eta_z=eta_z,
            w_bound=self.w_bound,
            eps=self.eps,
            adagrad=self.adagrad,
            svrg=svrg,
            reg_step=self.reg_step,
        )

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
