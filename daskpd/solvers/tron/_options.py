"""The options of the Newton-CG method (:class:`TronOptions`) and the constants every
task of a run needs (:class:`_Settings`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from daskpd.solvers.common.groups import check_group_options
from daskpd.solvers.common.stream import (
    WORKER_BASE_BYTES,
    bytes_per_nnz,
    check_rows,
    chunk_nnz,
)


@dataclass(frozen=True)
class TronOptions:
    """Options of :class:`Tron`.

    Parameters
    ----------
    grid : int or None, default=None
        ``K``, the number of row groups; each is read once by its worker and kept there.
        ``None``: one group per worker (one in-process). The iterates do not depend on
        ``K``: every gradient and Hessian-vector product is the exact sum over the groups,
        so ``K`` changes only the rounding of those sums.
    threads : int or None, default=None
        Threads that compute one group's share of a product (each over its own rows, into
        its own output, summed after). ``None``: on a cluster the owner's idle cores, one
        in-process.
    eps_cg : float, default=0.5
        The conjugate gradient of a Newton step stops once the quadratic model's last
        decrease, times the steps so far, is at most ``min(eps_cg, ||g||_{M^-1}^(1/2))`` of
        the model's value (liblinear's rule, after Nash and Sofer).
    max_cg : int, default=250
        At most this many conjugate-gradient steps (rounds) per Newton step.
    preconditioner : {"diagonal", "none"}, default="diagonal"
        ``"diagonal"``: the Hessian's diagonal mixed with the identity,
        ``M = (1 - 0.01) + 0.01 diag(H) / alpha`` (Hsia, Chiang and Lin, ACML 2018), its
        share summed with the gradient in the same round.
    rows : {"auto", "memory", "stream"}, default="auto"
        Where a group's rows are between rounds. ``"memory"``: read once by the owner and
        kept there. ``"stream"``: read again by every pass (the gradient round, each CG
        round, the step's ``X s``), in chunks of row blocks, the next chunk read in a thread
        while the kernels work on one; the owner keeps only the rows' labels, weights,
        margins, curvatures and dual values, and the group's shares are on all the run's
        used columns. A CG round does not read the chunks whose rows all have curvature 0.
        The iterates are the same as with the rows kept, up to the sums' rounding.
        ``"auto"``: streamed when the rows of a group, as the kernels keep them, would take
        more than :data:`~daskpd.solvers.common.stream.STREAM_SHARE` of the owner's memory
        limit (on a cluster, data on disk), else kept: CoCoA+'s rule
        (:func:`daskpd.solvers.common.stream.streams`). (``dual_newton`` keeps its rows:
        it has no such option.)
    stream_nnz : int or None, default=None
        Streamed rows: about the nonzeros read together (whole row blocks, at least one).
        ``None``: what the owner's memory limit leaves after the run's other arrays
        (:func:`stream_nnz`), or
        :data:`~daskpd.solvers.common.stream.STREAM_CHUNK_NNZ` without a limit.
    """

    grid: int | None = None
    threads: int | None = None
    eps_cg: float = 0.5
    max_cg: int = 250
    preconditioner: str = "diagonal"
    rows: str = "auto"
    stream_nnz: int | None = None

    def __post_init__(self):
        check_group_options(self.grid, self.threads)
        check_rows(self.rows, self.stream_nnz)
        if not 0.0 < float(self.eps_cg) < 1.0:
            raise ValueError(f"eps_cg must be in (0, 1), got eps_cg={self.eps_cg!r}")
        if isinstance(self.max_cg, bool) or int(self.max_cg) < 1:
            raise ValueError(f"max_cg must be a positive int, got max_cg={self.max_cg!r}")
        if self.preconditioner not in ("diagonal", "none"):
            raise ValueError(
                f"preconditioner must be 'diagonal' or 'none', got {self.preconditioner!r}"
            )


#: liblinear's mix of the Hessian's diagonal with the identity in the preconditioner
PCG_MIX = 0.01

#: Per-row vectors of a streamed group on its owner: its labels, weights, margins, dual
#: values, curvatures and ``X s``, and a gradient round's new margins, dual values and
#: curvatures before the old ones are released.
ROW_VECTORS = 9

#: Vectors on the run's used columns that ``w``'s home may hold at once: the point's ``w``,
#: gradient and preconditioner (and the previous point's while the next is made), the CG
#: state's step, residual and direction (and the next step's), ``H d`` and the summed
#: product, a gradient round's summed ``X^T z`` and diagonal, and the next ``w``.
HOME_VECTORS = 16


def stream_nnz(options, data, limit, rows, threads, n_columns):
    """Nonzeros of a chunk of streamed rows (``TronOptions.stream_nnz``) for an owner of
    memory limit ``limit`` bytes (0: none) whose group has ``rows`` rows, in a run of
    ``n_columns`` used columns and ``threads`` threads a group.

    What the run holds besides the chunks comes first: the worker itself, the group's
    per-row vectors (:data:`ROW_VECTORS`), the used columns' positions (4 bytes a feature)
    and, of ``n_columns`` each, the threads' two output values a column, the task's summed
    share (two) and the tree's sum of two shares (six), and what ``w``'s home holds
    (:data:`HOME_VECTORS`; every owner is counted as the home, the smallest chunk is the
    run's). Two chunks share what is left of
    :data:`~daskpd.solvers.common.stream.STREAM_MEMORY_SHARE` of the limit, a nonzero's
    column id read and renumbered (two ids) and its value.
    """
    if options.stream_nnz is not None:
        return int(options.stream_nnz)
    per_column = 8 * (2 * int(threads) + 2 + 6 + HOME_VECTORS)
    fixed = (
        WORKER_BASE_BYTES + 8 * ROW_VECTORS * int(rows) + 4 * int(data.n_features)
        + per_column * int(n_columns)
    )  # fmt: skip
    # a row's offset (8 bytes) spread over its nonzeros: about 1 byte
    return chunk_nnz(limit, fixed, 2 * (bytes_per_nnz(data) + 4 + 1))


@dataclass(frozen=True)
class _Settings:
    """What every task of a run needs (small, pickled into each graph)."""

    n_samples: int
    n_features: int
    #: columns with a nonzero in the data (w is 0 on the others at the optimum, and the
    #: vectors of a run are this long)
    n_columns: int
    alpha: float
    #: the loss the Newton steps minimize
    inner_code: int
    inner_params: np.ndarray
    #: the loss of the certificate (the same one: kept apart for a smoothed loss whose
    #: certificate is the non-smooth problem's, which the hinge would need)
    outer_code: int
    outer_params: np.ndarray
    threads: int
    eps_cg: float
    max_cg: int
    precondition: bool


def _settings(problem, data, options, threads, n_columns):
    """The run's :class:`_Settings`."""
    code = int(problem.loss.code)
    params = np.asarray(problem.loss.params, dtype=np.float64)
    return _Settings(
        n_samples=int(data.n_samples),
        n_features=int(data.n_features),
        n_columns=int(n_columns),
        alpha=float(problem.alpha),
        inner_code=code,
        inner_params=params,
        outer_code=code,
        outer_params=params,
        threads=int(threads),
        eps_cg=float(options.eps_cg),
        max_cg=int(options.max_cg),
        precondition=options.preconditioner == "diagonal",
    )
