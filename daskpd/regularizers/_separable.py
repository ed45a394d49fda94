"""Separable regularizers: their scalar ops live in :mod:`daskpd.kernels.scalar`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from daskpd.kernels import scalar as _scalar
from daskpd.regularizers._base import DUAL_TOL, Regularizer, _steps, _vec


@dataclass(frozen=True)
class _Separable(Regularizer):
    separable: ClassVar[bool] = True

    def value(self, w) -> float:
        """``R(w) = sum_j R_j(w_j)``."""
        w = _vec(w)
        out = np.empty_like(w)
        _scalar.reg_value_array(self.code, self.params, w, out)
        return float(out.sum())

    def prox(self, v, step):
        """Proximal map ``argmin_w R(w) + ||w - v||^2 / (2 step)``.

        ``step`` is a scalar or one value per coordinate.
        """
        v = _vec(v)
        out = np.empty_like(v)
        _scalar.reg_prox_array(self.code, self.params, v, _steps(step, v.size), out)
        return out

    def subgradient(self, w):
        """A subgradient of ``R`` at ``w`` (0 for the non-smooth part at ``w_j = 0``)."""
        w = _vec(w)
        out = np.empty_like(w)
        _scalar.reg_subgradient_array(self.code, self.params, w, out)
        return out

    def conjugate(self, v) -> float:
        """``R*(v) = sup_w v.w - R(w)``; ``inf`` outside the domain."""
        v = _vec(v)
        out = np.empty_like(v)
        _scalar.reg_conjugate_array(self.code, self.params, v, out)
        return float(out.sum())


@dataclass(frozen=True)
class L2(_Separable):
    """Squared Euclidean norm ``R(w) = ||w||^2 / 2``.

    Conjugate ``||v||^2 / 2``; prox ``v / (1 + step)``; LMO ``-c``; strongly convex with
    modulus 1.
    """

    name: ClassVar[str] = "l2"
    code: ClassVar[int] = _scalar.L2

    @property
    def strong_convexity(self) -> float:
        """1."""
        return 1.0

    def lmo(self, c):
        """``argmin_w c.w + ||w||^2 / 2 = -c``."""
        return -_vec(c)


@dataclass(frozen=True)
class L1(_Separable):
    """L1 norm ``R(w) = ||w||_1``.

    Conjugate: indicator of ``{||v||_inf <= 1}``; prox: soft threshold ``sign(v) max(|v| - step,
    0)``. No LMO (unbounded).
    """

    name: ClassVar[str] = "l1"
    code: ClassVar[int] = _scalar.L1

    def conjugate(self, v) -> float:
        """0 if ``||v||_inf <= 1`` (relative tolerance ``DUAL_TOL``), else ``inf``."""
        return 0.0 if self.dual_norm(v) <= 1.0 + DUAL_TOL else math.inf

    def dual_norm(self, v) -> float:
        """``||v||_inf``."""
        v = _vec(v)
        return float(np.abs(v).max()) if v.size else 0.0

    def feasible_scale(self, v) -> float:
        """``min(1, 1 / ||v||_inf)``."""
        norm = self.dual_norm(v)
        return 1.0 if norm <= 1.0 else 1.0 / norm


@dataclass(frozen=True)
class ElasticNet(_Separable):
    """Elastic net, scikit-learn's convention: ``l1_ratio ||w||_1 + (1 - l1_ratio) ||w||^2 / 2``.

    Conjugate: ``sum_j max(|v_j| - l1_ratio, 0)^2 / (2 (1 - l1_ratio))`` (for ``l1_ratio = 1``,
    the indicator of ``{||v||_inf <= 1}``); prox: ``soft(v, step l1_ratio) / (1 + step (1 -
    l1_ratio))``; LMO: ``-soft(c, l1_ratio) / (1 - l1_ratio)`` (``l1_ratio < 1``); strongly
    convex with modulus ``1 - l1_ratio``.

    Parameters
    ----------
    l1_ratio : float, default=0.5
        Weight of the L1 part, in [0, 1].
    """

    name: ClassVar[str] = "elasticnet"
    code: ClassVar[int] = _scalar.ELASTIC_NET
    l1_ratio: float = 0.5

    def __post_init__(self):
        ratio = float(self.l1_ratio)
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"l1_ratio must be in [0, 1], got l1_ratio={self.l1_ratio!r}")
        object.__setattr__(self, "l1_ratio", ratio)

    @property
    def params(self) -> np.ndarray:
        """``[l1_ratio]``."""
        return np.array([self.l1_ratio])

    @property
    def strong_convexity(self) -> float:
        """``1 - l1_ratio``."""
        return 1.0 - self.l1_ratio

    def conjugate(self, v) -> float:
        """Conjugate; for ``l1_ratio = 1`` the indicator of the unit L-inf ball (tolerant)."""
        if self.l1_ratio >= 1.0:
            return L1().conjugate(v)
        return super().conjugate(v)

    def feasible_scale(self, v) -> float:
        """1 when ``l1_ratio < 1`` (finite conjugate), else as :meth:`L1.feasible_scale`."""
        if self.l1_ratio >= 1.0:
            return L1().feasible_scale(v)
        return 1.0

    def lmo(self, c):
        """``argmin_w c.w + R(w) = -soft(c, l1_ratio) / (1 - l1_ratio)``."""
        if self.l1_ratio >= 1.0:
            return super().lmo(c)
        c = _vec(c)
        return -np.sign(c) * np.maximum(np.abs(c) - self.l1_ratio, 0.0) / (1.0 - self.l1_ratio)


@dataclass(frozen=True)
class Zero(_Separable):
    """No regularization, ``R = 0`` (for problems whose only structure is a constraint).

    Conjugate: indicator of ``{0}``; prox: identity. No LMO.
    """

    name: ClassVar[str] = "zero"
    code: ClassVar[int] = _scalar.ZERO

    def feasible_scale(self, v) -> float:
        """1 if ``v = 0``, else 0."""
        return 1.0 if not np.any(_vec(v)) else 0.0
