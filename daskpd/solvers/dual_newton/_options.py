"""The options of the hinge dual's projected Newton method (:class:`DualNewtonOptions`) and
the constants every task of a run needs (:class:`_Settings`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from daskpd.solvers.common.groups import check_group_options


@dataclass(frozen=True)
class DualNewtonOptions:
    """Options of :class:`DualNewton`.

    Parameters
    ----------
    grid : int or None, default=None
        ``K``, the number of row groups; each is read once by its worker and kept there.
        ``None``: one group per worker (one in-process). The iterates do not depend on
        ``K``: every product with ``X^T`` is the exact sum over the groups, so ``K`` changes
        only the rounding of those sums.
    threads : int or None, default=None
        Threads that compute one group's share of a product. ``None``: on a cluster the
        owner's idle cores, one in-process.
    eta : float, default=0.1
        The conjugate gradient of a Newton step stops once the residual of the free rows'
        Newton system is at most ``eta`` times its first one.
    max_cg : int, default=50
        At most this many conjugate-gradient steps (rounds) per Newton step.
    damping : float, default=1e-6
        The Newton system of the free rows is ``(H_FF + damping D_FF) d = -g_F``, ``D`` the
        Hessian's diagonal: with more rows than features ``H_FF`` is singular, and along its
        null space (directions that do not move ``w``, where the dual is linear) the damped
        step runs to the box's bound, which the projection then holds.
    start_passes : int, default=1
        From a cold start, passes of dual coordinate descent each group makes over its own
        rows before the first Newton step, a worker's groups together (CoCoA+'s local
        problem with the safe ``sigma'`` = the workers holding groups; in-process, ``K``; no
        communication); 0 starts the Newton steps at ``a = 0``, where every row is free. The
        start then depends on the workers (the Newton steps from a given start do not).
    home_cg_nnz : int, default=16_000_000
        A Newton step whose free rows hold at most this many nonzeros (over all groups)
        sends them to ``w``'s home, which runs the step whole (its conjugate gradient and
        its line search, the same steps as on the rounds): two rounds (the transfer, the
        gradient round at the new point) instead of one a CG step and one a trial. Late
        Newton steps on nearly separable data have few free rows and many CG steps, each
        a reduction whose latency is most of its time. The price is the transfer (4 bytes
        a nonzero of binary rows, 8 of valued ones) and the step's products on one worker.
        0: every CG step and trial is a round.
    burst : float, default=4.0
        After a Newton step that frees rows holding more than ``burst`` times the fewest
        free nonzeros of the run so far (and more than ``home_cg_nnz``), the next epoch is a
        local pass of dual coordinate descent on every group (as ``start_passes``, from the
        current point: two rounds and a pass) instead of a Newton step: a step that moves
        ``w`` far frees many rows at once, most of which such a pass returns to their bound,
        where a Newton step on all of them would take many CG rounds. 0: never.
    dense_columns : int, default=0
        The CG's preconditioner keeps this many of the data's most frequent columns
        exactly: ``M = Delta + B B^T`` with ``B`` the free rows on those columns (scaled as
        the Hessian) and ``Delta`` the diagonal of the rest (and the damping), applied
        through the Woodbury identity (a ``dense_columns``-square matrix summed over the
        groups and factored on the home once a Newton step, one more small reduction a CG
        round), prepared at the start and where the next Newton step is likely to run as
        rounds (the free rows at the current point above ``home_cg_nnz``). On rows that
        all have the same norm (binary k-mer windows) the diagonal alone is a constant,
        and the rows' shared frequent columns make the free rows' Newton system
        ill-conditioned; keeping them cuts the CG steps, and the rounds when many groups
        make every CG step a round (BENCHMARKS.md, "A preconditioner that keeps the
        frequent columns"). Its matrix costs a product of the free rows' dense part a
        Newton step. 0: the diagonal ``h_i`` alone.
    """

    grid: int | None = None
    threads: int | None = None
    eta: float = 0.1
    max_cg: int = 50
    damping: float = 1e-6
    start_passes: int = 1
    home_cg_nnz: int = 16_000_000
    burst: float = 4.0
    dense_columns: int = 0

    def __post_init__(self):
        check_group_options(self.grid, self.threads)
        if not 0.0 < float(self.eta) < 1.0:
            raise ValueError(f"eta must be in (0, 1), got eta={self.eta!r}")
        if isinstance(self.max_cg, bool) or int(self.max_cg) < 1:
            raise ValueError(f"max_cg must be a positive int, got max_cg={self.max_cg!r}")
        if isinstance(self.start_passes, bool) or int(self.start_passes) < 0:
            raise ValueError(
                f"start_passes must be a non-negative int, got start_passes={self.start_passes!r}"
            )
        if isinstance(self.home_cg_nnz, bool) or int(self.home_cg_nnz) < 0:
            raise ValueError(
                f"home_cg_nnz must be a non-negative int, got home_cg_nnz={self.home_cg_nnz!r}"
            )
        if not float(self.burst) >= 0.0:
            raise ValueError(f"burst must be >= 0, got burst={self.burst!r}")
        if not 0.0 < float(self.damping) < 1.0:
            raise ValueError(f"damping must be in (0, 1), got damping={self.damping!r}")
        if isinstance(self.dense_columns, bool) or int(self.dense_columns) < 0:
            raise ValueError(
                "dense_columns must be a non-negative int, got "
                f"dense_columns={self.dense_columns!r}"
            )


@dataclass(frozen=True)
class _Settings:
    """What every task of a run needs (small, pickled into each graph)."""

    n_samples: int
    #: columns with a nonzero in the data (the run's vectors are this long)
    n_columns: int
    alpha: float
    threads: int
    eta: float
    max_cg: int
    damping: float
    start_passes: int = 0
    home_cg_nnz: int = 0
    burst: float = 0.0
    #: the preconditioner's exact columns (positions into the run's used columns,
    #: increasing; empty: the diagonal alone)
    dense: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def woodbury(self) -> bool:
        """Whether the CG's preconditioner keeps columns exactly (``dense_columns``)."""
        return self.dense.shape[0] > 0

    @property
    def scale(self) -> float:
        """``alpha n``: ``w(a) = X^T (c y a) / (alpha n)``."""
        return self.alpha * self.n_samples
