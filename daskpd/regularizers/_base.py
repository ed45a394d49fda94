"""What every regularizer shares: the base class, the tolerances, the L1-ball projection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from daskpd._by_name import KernelObject

#: Relative tolerance for membership in a constraint set (primal indicators).
SET_TOL = 1e-9
#: Relative tolerance for membership in a dual-norm ball (indicator conjugates).
DUAL_TOL = 1e-12


def _vec(w):
    return np.ascontiguousarray(np.asarray(w, dtype=np.float64)).ravel()


def _steps(step, size):
    step = np.asarray(step, dtype=np.float64)
    return np.ascontiguousarray(np.broadcast_to(step, (size,)))


def project_l1_ball(v, radius):
    """Euclidean projection of ``v`` onto ``{w : ||w||_1 <= radius}`` (Duchi et al. 2008).

    Parameters
    ----------
    v : array-like of shape (n_features,)
    radius : float
        Radius, >= 0.

    Returns
    -------
    ndarray of shape (n_features,)
    """
    v = _vec(v)
    if np.abs(v).sum() <= radius:
        return v.copy()
    if radius <= 0:
        return np.zeros_like(v)
    u = np.sort(np.abs(v))[::-1]
    cumsum = np.cumsum(u)
    ranks = np.arange(1, u.size + 1)
    rho = np.nonzero(u - (cumsum - radius) / ranks > 0)[0][-1]
    theta = (cumsum[rho] - radius) / (rho + 1)
    return np.sign(v) * np.maximum(np.abs(v) - theta, 0.0)


@dataclass(frozen=True)
class Regularizer(KernelObject):
    """Base class. Subclasses set ``name`` and implement the methods they support.

    Attributes
    ----------
    code : int
        Scalar-op code of :mod:`daskpd.kernels.scalar` for separable regularizers, -1 otherwise.
    separable : bool
        Whether ``R(w) = sum_j R_j(w_j)`` with the scalar ops of ``code``.
    is_indicator : bool
        Whether ``R`` is the indicator of a constraint set (then ``alpha R = R``).
    """

    name: ClassVar[str]
    code: ClassVar[int] = -1
    separable: ClassVar[bool] = False
    is_indicator: ClassVar[bool] = False

    @property
    def strong_convexity(self) -> float:
        """Modulus ``mu`` of strong convexity of ``R`` in the Euclidean norm (0 if none)."""
        return 0.0

    @property
    def n_features(self):
        """Number of features the regularizer is defined for, or None when any size works."""
        return None

    def lmo(self, c):
        """Generalized linear minimization oracle ``argmin_w c.w + R(w)``.

        Only defined where the minimum is attained for every ``c`` (strongly convex ``R`` or
        bounded constraint sets); norms such as L1 have none, because the problem is unbounded
        once the dual norm of ``c`` exceeds 1.

        Raises
        ------
        ValueError
            If this regularizer has no LMO.
        """
        raise ValueError(
            f"regularizer={self.name!r} has no linear minimization oracle: "
            "argmin_w c.w + R(w) is unbounded for large c"
        )

    def feasible_scale(self, v) -> float:
        """Largest ``s`` in [0, 1] with ``conjugate(s v) < inf``.

        :class:`daskpd.problem.Problem` multiplies a dual point by this factor so that the dual
        value is finite (the regularizer conjugate is an indicator for norms).
        """
        return 1.0

    def _check_size(self, w):
        size = self.n_features
        if size is not None and w.size != size:
            raise ValueError(
                f"regularizer={self.name!r} is defined for n_features={size}, "
                f"got a vector of size {w.size}"
            )
