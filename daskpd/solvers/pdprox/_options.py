"""Pdprox's options and its problem translation: losses to kernel codes, the step sizes.

:class:`PdproxOptions` (whose names checkpoints and saved models record), :func:`loss_spec`
and the ``_Spec`` that block tasks receive. Symbols as in the paper-to-code table of
:mod:`daskpd.solvers.pdprox`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from daskpd.kernels import pdprox as kernels

_ALGORITHMS = ("dual", "primal", "dual-simplified")
_FORMS = ("double-dual", "double-primal")
_LOSSES = {
    "hinge": kernels.PD_HINGE,
    "absolute": kernels.PD_ABSOLUTE,
    "epsilon_insensitive": kernels.PD_EPSILON_INSENSITIVE,
    "generalized_hinge": kernels.PD_GENERALIZED_HINGE,
    "quantile": kernels.PD_QUANTILE,
}


def loss_spec(loss):
    """``(code, params, kappa)`` of a loss for the Pdprox kernels.

    Parameters
    ----------
    loss : Loss or tuple
        A :mod:`daskpd.losses` object (``hinge``, ``absolute``, ``epsilon_insensitive``) or a
        pair ``("generalized_hinge", a)`` / ``("quantile", q)``.

    Returns
    -------
    code : int
    params : ndarray of float64
    kappa : float
        ``||H||^2 <= kappa ||X||^2 / n^2`` for this loss.

    Raises
    ------
    ValueError
        For a loss without a bilinear form here (smooth losses: use another solver).
    """
    if isinstance(loss, tuple):
        name, value = loss[0], float(loss[1])
        if name == "generalized_hinge":
            if not value > 1:
                raise ValueError(f"generalized_hinge needs a > 1, got a={value}")
            return kernels.PD_GENERALIZED_HINGE, np.array([value]), value * value + 1.0
        if name == "quantile":
            if not 0 <= value <= 1:
                raise ValueError(f"quantile needs q in [0, 1], got q={value}")
            return kernels.PD_QUANTILE, np.array([value]), value**2 + (1 - value) ** 2
        raise ValueError(f"unknown Pdprox loss {loss!r}")
    name = getattr(loss, "name", loss)
    if name == "hinge":
        return kernels.PD_HINGE, np.zeros(1), 1.0
    if name == "absolute":
        return kernels.PD_ABSOLUTE, np.zeros(1), 1.0
    if name == "epsilon_insensitive":
        return kernels.PD_EPSILON_INSENSITIVE, np.array([float(loss.params[0])]), 2.0
    raise ValueError(
        f"solver 'pdprox' needs a loss with a bilinear max-form (hinge, absolute, "
        f"epsilon_insensitive, generalized hinge, quantile), got loss={name!r}"
    )


@dataclass(frozen=True)
class _Spec:
    loss_code: int
    loss_params: np.ndarray
    algorithm: str
    form: str
    tau: float
    sigma: float
    n: int
    n_features: int
    budget: float  # 0: no budget constraint


@dataclass(frozen=True)
class PdproxOptions:
    """Options of :class:`Pdprox`.

    Parameters
    ----------
    algorithm : {"dual", "primal", "dual-simplified"}, default="dual"
        Algorithm 1 (two dual projections), 2 (extra primal copy) or 3 (one projection).
    form : {"double-dual", "double-primal"} or None, default=None
        Which two copies are kept (Section 4.4). None: ``double-dual`` for ``dual`` and
        ``dual-simplified``, ``double-primal`` for ``primal``. Algorithm 1 has only the
        double-dual form.
    iterations_per_epoch : int, default=10
        Iterations chained in one Dask compute.
    step_scale : float, default=1.0
        Factor on ``gamma = 1 / sqrt(2 c)`` (the paper tunes a factor > 1; below ``sqrt(2)``
        the method provably converges).
    step_ratio : float, default=1.0
        ``tau / sigma`` for the two-step variant (``sigma tau = gamma^2 step_scale^2``).
    spectral_norm : float or None, default=None
        ``||X||_2`` if known; None: estimated by power iteration (one compute) times 1.01.
    budget : float or None, default=None
        Dual sparsity constraint ``sum a <= budget`` (hinge only, Section 5.5).
    report : {"last", "average"}, default="last"
        Which iterate the driver evaluates as ``w`` / ``z``; the other is ``w_avg`` /
        ``z_avg`` (the paper's guarantees are for the average).
    """

    algorithm: str = "dual"
    form: str | None = None
    iterations_per_epoch: int = 10
    step_scale: float = 1.0
    step_ratio: float = 1.0
    spectral_norm: float | None = None
    budget: float | None = None
    report: str = "last"

    def __post_init__(self):
        if self.algorithm not in _ALGORITHMS:
            raise ValueError(f"algorithm must be one of {_ALGORITHMS}, got {self.algorithm!r}")
        if self.form is not None and self.form not in _FORMS:
            raise ValueError(f"form must be one of {_FORMS} or None, got {self.form!r}")
        if self.algorithm == "dual" and self.form == "double-primal":
            raise ValueError(
                "algorithm='dual' (Algorithm 1) has no double-primal form; use "
                "algorithm='dual-simplified' with form='double-primal' (eq. 22)"
            )
        if int(self.iterations_per_epoch) < 1:
            raise ValueError(
                f"iterations_per_epoch must be >= 1, got {self.iterations_per_epoch!r}"
            )
        for name in ("step_scale", "step_ratio"):
            value = float(getattr(self, name))
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and > 0, got {value!r}")
        if self.spectral_norm is not None and not float(self.spectral_norm) > 0:
            raise ValueError(f"spectral_norm must be > 0, got {self.spectral_norm!r}")
        if self.budget is not None and not float(self.budget) > 0:
            raise ValueError(f"budget must be > 0, got {self.budget!r}")
        if self.report not in ("last", "average"):
            raise ValueError(f"report must be 'last' or 'average', got {self.report!r}")


def _check_regularizer(regularizer):
    if not callable(getattr(regularizer, "prox", None)):
        raise ValueError(f"solver 'pdprox' needs a regularizer with a prox, got {regularizer!r}")


def _make_spec(loss, data, options, spectral_norm):
    code, params, kappa = loss_spec(loss)
    n = int(data.n_samples)
    lipschitz_sq = kappa * spectral_norm**2 / n**2
    gamma = float(options.step_scale) / math.sqrt(2.0 * lipschitz_sq) if lipschitz_sq > 0 else 1.0
    ratio = float(options.step_ratio)
    form = options.form or ("double-primal" if options.algorithm == "primal" else "double-dual")
    return _Spec(
        loss_code=code,
        loss_params=params,
        algorithm=options.algorithm,
        form=form,
        tau=gamma * math.sqrt(ratio),
        sigma=gamma / math.sqrt(ratio),
        n=n,
        n_features=int(data.n_features),
        budget=float(options.budget or 0.0),
    )
