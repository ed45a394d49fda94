"""The options of the Newton-CG method (:class:`TronOptions`) and the constants every
task of a run needs (:class:`_Settings`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from daskpd.solvers.common.groups import check_group_options


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
    """

    grid: int | None = None
    threads: int | None = None
    eps_cg: float = 0.5
    max_cg: int = 250
    preconditioner: str = "diagonal"

    def __post_init__(self):
        check_group_options(self.grid, self.threads)
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
