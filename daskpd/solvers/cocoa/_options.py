"""The options of CoCoA+ (:class:`CocoaOptions`) and the constants every task of a run needs.

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.cocoa`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from daskpd.kernels import cocoa as kernels
from daskpd.solvers.common.stream import (
    WORKER_BASE_BYTES,
    bytes_per_nnz,
    check_rows,
    chunk_nnz,
)


@dataclass(frozen=True)
class CocoaOptions:
    """Options of :class:`Cocoa`.

    Parameters
    ----------
    grid : int or None, default=None
        ``K``, the number of row groups (the row groups of the dataset's ``grid x grid``
        layout). ``None``: one group, serial dual coordinate ascent on the worker that
        holds the rows. On data whose rows share many features (the splice-like sets of
        BENCHMARKS.md), ``K = 2`` with the safe ``sigma = K`` needs far more rounds than
        ``K = 1``, which cost more than the second worker gains. Set ``grid`` for data-parallel
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
        at most this fraction of the full pass's. Smaller values do more cheap passes a
        round and need fewer rounds; larger ones the reverse (the default was chosen on the
        splice-like sets of BENCHMARKS.md).
    max_shrunk_passes : int, default=100
        At most this many shrunk passes a round.
    cold_margin : float, default=2.0
        For rows kept in memory, a round whose full pass saw no row with a positive
        projected gradient (every row at ``z_i = 0`` before its step: the first round from
        ``z = 0``): its shrunk passes leave out the rows still at 0 whose margin ``y_i x_i .
        w`` was at least this at their visit, where liblinear's rule, which has no threshold
        then, reads them all once more (:func:`daskpd.kernels.cocoa.shrink_candidates`). The
        first round is then much cheaper (splice-like, 1e8 nonzeros: its shrunk passes
        read 100M nonzeros instead of 335M) and a little less effective; the next full pass
        visits every row again. ``math.inf``: liblinear's rule. Must be above 1 (a row with
        a margin below 1 is not settled).
    screening : bool or None, default=None
        Leave out of a round's certifying pass the rows proven inactive at its start: a
        row at ``z_i = 0`` whose margin is bounded above 1 (the bound: its margin at its
        last visit, less ``||x_i||`` times how far ``w`` has moved since, or, where that
        bound proves nothing, its margin at the round's start from a read-only pass; the
        module docstring of :mod:`daskpd.kernels.cocoa`). The certificate stays exact: at
        the start ``w`` such a row adds 0 to both sums and takes no step. The round does
        not step it, where a visit at the pass's moving ``v`` could have; its bound decides
        again next round, and at a solution the rows left out are inactive. The
        splice-like sets leave out about 95% of the rows' nonzeros from the second round
        on. With several groups a group's bounds move by ``||x_i||`` times how far ``w``
        moved on the group's own columns (a small task on ``w``'s home each round).
        ``None``: on where it applies, rows kept in memory and a loss whose dual lives on
        a box (hinge, squared hinge, smoothed hinge); True elsewhere is an error.
    threads : int or None, default=None
        Threads that run one group's passes together (PASSCoDe, Hsieh, Yu and Dhillon,
        ICML 2015), at most :data:`daskpd.kernels.cocoa.MAX_THREADS` (7): each thread steps
        its share of the rows, reading the one shared ``v`` without locks, and adds its
        steps to its own slot of the column records (:mod:`daskpd.kernels.cocoa`). A
        thread may read another's steps late but none is lost, so ``v`` ends the round at
        its exact new ``w`` (``w = w(z)`` to rounding, the certificate exact) and a round is
        about as effective as a serial one.
        With more than 1 the results depend on the threads' timing: not bit-reproducible,
        and a replay after a lost worker does not repeat the lost round's bits. ``None``: on
        a cluster, the worker threads of the owner's machine shared among the groups it
        holds, at most 7 (one group on a machine of two 1-thread workers gets 2: the other
        worker's core would idle); in-process 1
        (:func:`daskpd.solvers.cocoa._solver.default_threads`). 1: the serial passes, the
        same bits run to run. Threads write to the same cache lines where rows share
        features, so a round gains less than the thread count (BENCHMARKS.md). A column's
        record holds ``w_j`` and one slot per thread,
        rounded up to a power of two: 16 bytes for one thread, 32 for two or three, 64 for
        up to seven.
    rows : {"auto", "memory", "stream"}, default="auto"
        Where a group's rows are between rounds. ``"memory"``: read once by the owner and
        kept there. ``"stream"``: read again by every round, in chunks of row blocks (the
        next chunk read in a thread while the kernels work on one), for rows larger than
        the owner's memory; each chunk's full passes run before the next chunk's, and for
        the hinge losses the rows still active are kept for shrunk passes over all of them
        at the end of the round (``_tasks._streamed_round``); the certificate comes from
        the same sums. ``"auto"``: streamed when the rows of a
        group, as the kernels keep them, would take more than
        :data:`~daskpd.solvers.common.stream.STREAM_SHARE` of the owner's memory limit (on
        a cluster, data on disk), else kept (:func:`daskpd.solvers.common.stream.streams`,
        the rule ``tron`` shares).
    stream_nnz : int or None, default=None
        Streamed rows: the nonzeros read and visited together (row blocks in a random
        order, their rows in one random order); with shrinking, also the size of the
        cache of active rows (:data:`CACHE_CHUNKS` chunks). ``None``: what the owner's
        memory limit leaves after the round's other arrays (:func:`stream_nnz`), or
        :data:`~daskpd.solvers.common.stream.STREAM_CHUNK_NNZ` without a limit.
    """

    grid: int | None = None
    sigma: float | None = None
    local_passes: int = 1
    shrinking: bool | None = None
    shrink_ratio: float = 0.01
    max_shrunk_passes: int = 100
    cold_margin: float = 2.0
    screening: bool | None = None
    threads: int | None = None
    rows: str = "auto"
    stream_nnz: int | None = None

    def __post_init__(self):
        check_rows(self.rows, self.stream_nnz)
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
        if self.screening is not None and not isinstance(self.screening, bool | np.bool_):
            raise ValueError(f"screening must be True, False or None, got {self.screening!r}")
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
        try:
            margin = float(self.cold_margin)
        except (TypeError, ValueError):
            margin = math.nan
        if isinstance(self.cold_margin, bool) or not margin > 1.0:
            raise ValueError(
                f"cold_margin must be a number > 1 (math.inf: liblinear's rule), "
                f"got {self.cold_margin!r}"
            )
        if self.threads is not None and (
            isinstance(self.threads, bool)
            or not isinstance(self.threads, int | np.integer)
            or self.threads < 1
        ):
            raise ValueError(f"threads must be a positive integer or None, got {self.threads!r}")
        if self.threads is not None and self.threads > kernels.MAX_THREADS:
            raise ValueError(
                f"threads must be at most {kernels.MAX_THREADS} (a column's record of w and "
                f"the threads' slots fills one cache line; more cores: more row groups, "
                f"grid), got {self.threads!r}"
            )


#: The active rows kept for a streamed round's shrunk passes: at most this many chunks'
#: nonzeros (two more chunks are in memory: the one visited and the one being read).
CACHE_CHUNKS = 2


def stream_nnz(options, data, limit, rows, threads):
    """Nonzeros of a chunk of streamed rows (``CocoaOptions.stream_nnz``) for an owner of
    memory limit ``limit`` bytes (0: none) whose group has ``rows`` rows.

    What the round holds besides the rows comes first: the worker itself, three copies of
    the group's dual block (the round's input, its output, the certified one) and, of
    ``n_features`` each, ``w``, the certified ``w``, the step and the sum, and the pack
    (``w`` and the threads' slots: :func:`daskpd.kernels.cocoa.pack_width` values a
    column). Two chunks and the cache of active rows (:data:`CACHE_CHUNKS` chunks) share
    what is left of :data:`~daskpd.solvers.common.stream.STREAM_MEMORY_SHARE` of the limit
    (:func:`daskpd.solvers.common.stream.chunk_nnz`).
    """
    if options.stream_nnz is not None:
        return int(options.stream_nnz)
    per_column = (4 + kernels.pack_width(int(threads))) * 8
    fixed = WORKER_BASE_BYTES + 3 * 8 * int(rows) + per_column * int(data.n_features)
    # a row's own arrays (offset, label, weight, norm) spread over its nonzeros: about 1 byte
    return chunk_nnz(limit, fixed, (2 + CACHE_CHUNKS) * (bytes_per_nnz(data) + 1))


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
    #: ``CocoaOptions.cold_margin - 1``: the gradient above which a row at 0 is left out of
    #: the shrunk passes after a full pass that gave liblinear's test no threshold
    cold_gradient: float
    #: one group and sigma = 1: the pass's v is the next w (serial DCA, same bits)
    direct: bool
    #: the certifying pass leaves out the rows proven inactive (``CocoaOptions.screening``)
    screening: bool = False
    #: threads of a group's passes (1: serial)
    threads: int = 1
    #: nonzeros of a chunk of streamed rows (``CocoaOptions.stream_nnz``; 0: kept rows)
    stream_nnz: int = 0
    #: the run's ``tol`` (0: none): a round whose certifying pass shows the start point's gap
    #: at most this skips its shrunk passes (one group only: its sums are the whole problem's)
    stop_gap: float = 0.0
    #: the same for a gap relative to the primal (DSO's start; 0: none)
    stop_rel: float = 0.0

    @property
    def inv_alpha_n(self):
        return 1.0 / (self.alpha * self.n_samples)


def _settings(problem, data, options, grid, threads=1):
    sigma = float(grid) if options.sigma is None else float(options.sigma)
    boxed = int(problem.loss.code) in kernels.BOX_LOSSES
    shrinking = boxed if options.shrinking is None else bool(options.shrinking)
    direct = int(grid) == 1 and sigma == 1.0
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
        cold_gradient=float(options.cold_margin) - 1.0,
        direct=direct,
        screening=boxed and options.screening is not False,
        threads=int(threads),
    )
