"""Constraint sets: indicators of the L1 ball, the Euclidean ball and a box."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from daskpd.regularizers._base import SET_TOL, Regularizer, _vec, project_l1_ball


@dataclass(frozen=True)
class _Ball(Regularizer):
    """The indicator of a ball of ``radius``: what the L1 and Euclidean balls share."""

    is_indicator: ClassVar[bool] = True
    radius: float = 1.0

    def __post_init__(self):
        value = float(self.radius)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"radius must be finite and > 0, got radius={self.radius!r}")
        object.__setattr__(self, "radius", value)

    @property
    def params(self) -> np.ndarray:
        """``[radius]``."""
        return np.array([self.radius])


@dataclass(frozen=True)
class L1Ball(_Ball):
    """Indicator of the L1 ball ``{||w||_1 <= radius}``.

    Conjugate (support function): ``radius ||v||_inf``; prox: Euclidean projection (Duchi et
    al.); LMO: the signed vertex ``-radius sign(c_k) e_k`` with ``k`` the lowest index of
    ``argmax |c|`` (sign +1 when ``c = 0``), so runs are reproducible.

    Parameters
    ----------
    radius : float
        Radius, > 0.
    """

    name: ClassVar[str] = "l1_ball"

    def value(self, w) -> float:
        """0 if ``||w||_1 <= radius`` (relative tolerance ``SET_TOL``), else ``inf``."""
        return 0.0 if np.abs(_vec(w)).sum() <= self.radius * (1.0 + SET_TOL) else math.inf

    def prox(self, v, step=1.0):
        """Projection onto the ball (independent of ``step``)."""
        return project_l1_ball(v, self.radius)

    def conjugate(self, v) -> float:
        """``radius ||v||_inf``."""
        v = _vec(v)
        return self.radius * float(np.abs(v).max()) if v.size else 0.0

    def lmo(self, c):
        """Signed vertex ``-radius sign(c_k) e_k``, ``k`` = first index of ``max |c|``."""
        c = _vec(c)
        out = np.zeros_like(c)
        k = int(np.argmax(np.abs(c)))
        out[k] = -self.radius if c[k] >= 0 else self.radius
        return out


@dataclass(frozen=True)
class L2Ball(_Ball):
    """Indicator of the Euclidean ball ``{||w||_2 <= radius}``.

    Conjugate: ``radius ||v||_2``; prox: ``v min(1, radius / ||v||_2)``; LMO:
    ``-radius c / ||c||_2`` (0 when ``c = 0``).

    Parameters
    ----------
    radius : float
        Radius, > 0.
    """

    name: ClassVar[str] = "l2_ball"

    def value(self, w) -> float:
        """0 if ``||w||_2 <= radius`` (relative tolerance ``SET_TOL``), else ``inf``."""
        return 0.0 if np.linalg.norm(_vec(w)) <= self.radius * (1.0 + SET_TOL) else math.inf

    def prox(self, v, step=1.0):
        """Projection onto the ball (independent of ``step``)."""
        v = _vec(v)
        norm = np.linalg.norm(v)
        return v * (self.radius / norm) if norm > self.radius else v.copy()

    def conjugate(self, v) -> float:
        """``radius ||v||_2``."""
        return self.radius * float(np.linalg.norm(_vec(v)))

    def lmo(self, c):
        """``-radius c / ||c||_2``."""
        c = _vec(c)
        norm = np.linalg.norm(c)
        return -self.radius * c / norm if norm > 0 else np.zeros_like(c)


@dataclass(frozen=True)
class Box(Regularizer):
    """Indicator of the box ``{lower <= w <= upper}``.

    Bounds are scalars or one per feature, and may be infinite.
    Conjugate: ``sum_j max(lower_j v_j, upper_j v_j)`` (``0`` where ``v_j = 0``); prox:
    ``clip(v, lower, upper)``; LMO: ``lower_j`` where ``c_j > 0``, ``upper_j`` where ``c_j < 0``,
    ``clip(0, lower_j, upper_j)`` where ``c_j = 0`` (a ValueError if that picks an infinite bound).

    Parameters
    ----------
    lower, upper : float or array-like of shape (n_features,)
        Bounds with ``lower <= upper``.
    """

    name: ClassVar[str] = "box"
    is_indicator: ClassVar[bool] = True
    lower: float | tuple = -1.0
    upper: float | tuple = 1.0

    def __post_init__(self):
        for label in ("lower", "upper"):
            raw = getattr(self, label)
            array = np.asarray(raw, dtype=np.float64)
            if array.ndim > 1 or np.isnan(array).any():
                raise ValueError(f"{label} must be a number or a 1-D array, got {label}={raw!r}")
            object.__setattr__(
                self, label, float(array) if array.ndim == 0 else tuple(array.tolist())
            )
        lower, upper = self._bounds()
        if lower.shape != upper.shape and lower.size > 1 and upper.size > 1:
            raise ValueError(
                f"lower and upper must have the same size, got {lower.size} and {upper.size}"
            )
        if np.any(lower > upper):
            raise ValueError(
                f"lower must be <= upper, got lower={self.lower!r}, upper={self.upper!r}"
            )

    def _bounds(self):
        return np.asarray(self.lower, dtype=np.float64), np.asarray(self.upper, dtype=np.float64)

    @property
    def n_features(self):
        """Size of the per-feature bounds, or None for scalar bounds."""
        for bound in (self.lower, self.upper):
            if isinstance(bound, tuple):
                return len(bound)
        return None

    def value(self, w) -> float:
        """0 if ``lower <= w <= upper`` (relative tolerance ``SET_TOL``), else ``inf``."""
        w = _vec(w)
        self._check_size(w)
        lower, upper = self._bounds()
        slack_low = SET_TOL * (1.0 + np.abs(np.where(np.isfinite(lower), lower, 0.0)))
        slack_up = SET_TOL * (1.0 + np.abs(np.where(np.isfinite(upper), upper, 0.0)))
        inside = np.all(w >= lower - slack_low) and np.all(w <= upper + slack_up)
        return 0.0 if inside else math.inf

    def prox(self, v, step=1.0):
        """``clip(v, lower, upper)`` (independent of ``step``)."""
        v = _vec(v)
        self._check_size(v)
        lower, upper = self._bounds()
        return np.clip(v, lower, upper)

    def conjugate(self, v) -> float:
        """Support function ``sum_j max(lower_j v_j, upper_j v_j)``."""
        v = _vec(v)
        self._check_size(v)
        lower, upper = self._bounds()
        with np.errstate(invalid="ignore"):
            terms = np.where(v > 0, upper * v, np.where(v < 0, lower * v, 0.0))
        return float(terms.sum())

    def lmo(self, c):
        """Lowest-cost corner (``clip(0, lower, upper)`` on coordinates with ``c_j = 0``)."""
        c = _vec(c)
        self._check_size(c)
        lower, upper = self._bounds()
        lower = np.broadcast_to(lower, c.shape)
        upper = np.broadcast_to(upper, c.shape)
        out = np.where(c > 0, lower, np.where(c < 0, upper, np.clip(0.0, lower, upper)))
        if not np.all(np.isfinite(out)):
            raise ValueError("Box.lmo is unbounded: c points towards an infinite bound")
        return out
