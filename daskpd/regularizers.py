"""Regularizers and constraint sets: value, prox, conjugate, LMO.

The objective is ``P(w) = (1/n) sum_i loss(x_i . w, y_i) + alpha R(w)``; every method here is
about ``R`` alone. For ``alpha R`` use ``prox(v, step * alpha)``, ``alpha * conjugate(v / alpha)``
and ``lmo(c / alpha)`` (``argmin_w c.w + alpha R(w) = argmin_w (c / alpha).w + R(w)``).

Separable regularizers (:class:`L2`, :class:`L1`, :class:`ElasticNet`, :class:`Zero`) carry the
``code`` and ``params`` by which kernels reach the same scalar ops in
:mod:`daskpd.kernels.scalar`; their methods are vectorized wrappers over those ops. The others
(:class:`GroupLasso`, :class:`L1Inf`, :class:`TraceNorm`, :class:`L1Ball`, :class:`L2Ball`,
:class:`Box`) act on the whole vector in NumPy and have ``code = -1``.

Constraint sets are indicators (``R = 0`` on the set, ``+inf`` outside), so ``alpha R = R`` for
every ``alpha > 0``. Membership is tested with a relative tolerance of ``1e-9`` so that points a
solver has just projected are not rejected for rounding; indicator conjugates (the dual-norm balls
of :class:`L1`, :class:`GroupLasso`, :class:`L1Inf`, :class:`TraceNorm`) use ``1e-12``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np

from daskpd.kernels import scalar as _scalar

__all__ = [
    "L1",
    "L2",
    "Box",
    "ElasticNet",
    "GroupLasso",
    "L1Ball",
    "L1Inf",
    "L2Ball",
    "Regularizer",
    "TraceNorm",
    "Zero",
    "get_regularizer",
    "project_l1_ball",
]

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
class Regularizer:
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
    def params(self) -> np.ndarray:
        """Parameters as the float64 array kernels receive (length >= 1)."""
        return np.zeros(1)

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


# ----------------------------------------------------------------------------------------------
# separable regularizers (scalar ops in daskpd.kernels.scalar)
# ----------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------
# group norms
# ----------------------------------------------------------------------------------------------
def _normalize_groups(groups):
    """Validate a partition of ``0..d-1``; return it as a tuple of sorted index tuples.

    ``groups`` is either a sequence of index sequences or a 1-D array of one group label per
    feature.
    """
    if (
        isinstance(groups, np.ndarray)
        and groups.ndim == 1
        or (isinstance(groups, (list, tuple)) and groups and all(np.ndim(g) == 0 for g in groups))
    ):
        labels = np.asarray(groups)
        if labels.size == 0 or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"groups must be integer labels or index lists, got groups={groups!r}")
        groups = [np.flatnonzero(labels == label) for label in np.unique(labels)]
    try:
        parts = [tuple(int(i) for i in np.asarray(g).ravel()) for g in groups]
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"groups must be a sequence of index lists, got groups={groups!r}"
        ) from exc
    if not parts or any(len(p) == 0 for p in parts):
        raise ValueError(f"groups must be non-empty index lists, got groups={groups!r}")
    flat = np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])
    if np.unique(flat).size != flat.size:
        raise ValueError(f"groups must not overlap (a feature is in two groups): groups={groups!r}")
    if flat.min() != 0 or flat.max() != flat.size - 1:
        raise ValueError(
            f"groups must partition the features 0..d-1 (no gaps), got groups={groups!r}"
        )
    return tuple(tuple(sorted(p)) for p in parts)


@dataclass(frozen=True)
class _Grouped(Regularizer):
    groups: tuple = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "groups", _normalize_groups(self.groups))

    @property
    def n_features(self):
        """Total number of features in the groups."""
        return sum(len(g) for g in self.groups)

    @cached_property
    def _labels(self):
        labels = np.empty(self.n_features, dtype=np.int64)
        for k, group in enumerate(self.groups):
            labels[list(group)] = k
        return labels

    def _group_sums(self, values):
        return np.bincount(self._labels, weights=values, minlength=len(self.groups))

    def dual_norm(self, v) -> float:
        """Dual norm of ``v`` (its unit ball is the domain of the conjugate)."""
        v = _vec(v)
        self._check_size(v)
        return self._dual_norm_value(v)

    def conjugate(self, v) -> float:
        """Indicator of the dual-norm unit ball (relative tolerance ``DUAL_TOL``)."""
        return 0.0 if self.dual_norm(v) <= 1.0 + DUAL_TOL else math.inf

    def feasible_scale(self, v) -> float:
        """``min(1, 1 / dual_norm(v))``."""
        norm = self.dual_norm(v)
        return 1.0 if norm <= 1.0 else 1.0 / norm


@dataclass(frozen=True)
class GroupLasso(_Grouped):
    """Group lasso ``R(w) = sum_g weight_g ||w_g||_2`` over non-overlapping groups.

    Conjugate: indicator of ``{max_g ||v_g||_2 / weight_g <= 1}``; prox: group soft threshold
    ``w_g = max(0, 1 - step weight_g / ||v_g||_2) v_g``. No LMO (unbounded).

    Parameters
    ----------
    groups : sequence of sequences of int, or 1-D int array
        A partition of the feature indices ``0..d-1``: index lists, or one group label per
        feature.
    weights : sequence of float, optional
        Positive weight per group (in the order of ``groups``); default ``sqrt(group size)``.
    """

    name: ClassVar[str] = "group_lasso"
    weights: tuple | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.weights is None:
            weights = tuple(math.sqrt(len(g)) for g in self.groups)
        else:
            weights = tuple(float(x) for x in np.asarray(self.weights, dtype=np.float64).ravel())
            if len(weights) != len(self.groups):
                raise ValueError(
                    f"weights must have one entry per group ({len(self.groups)}), "
                    f"got weights={self.weights!r}"
                )
            if not all(math.isfinite(x) and x > 0 for x in weights):
                raise ValueError(f"weights must be finite and > 0, got weights={self.weights!r}")
        object.__setattr__(self, "weights", weights)

    @cached_property
    def _weight_array(self):
        return np.asarray(self.weights)

    def _norms(self, v):
        return np.sqrt(self._group_sums(v * v))

    def value(self, w) -> float:
        """``sum_g weight_g ||w_g||_2``."""
        w = _vec(w)
        self._check_size(w)
        return float(self._weight_array @ self._norms(w))

    def prox(self, v, step):
        """Group soft threshold at ``step * weight_g``."""
        v = _vec(v)
        self._check_size(v)
        norms = self._norms(v)
        threshold = float(step) * self._weight_array
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(norms > threshold, 1.0 - threshold / norms, 0.0)
        return v * scale[self._labels]

    def _dual_norm_value(self, v):
        return float(np.max(self._norms(v) / self._weight_array))


@dataclass(frozen=True)
class L1Inf(_Grouped):
    """l1/l-infinity norm ``R(w) = sum_g ||w_g||_inf`` over non-overlapping groups.

    (With the rows of a weight matrix as groups this is Pdprox's ``l_{1,inf}``.)
    Conjugate: indicator of ``{max_g ||v_g||_1 <= 1}``; prox (Moreau, per group):
    ``w_g = v_g - P_{||.||_1 <= step}(v_g)``. No LMO (unbounded).

    Parameters
    ----------
    groups : sequence of sequences of int, or 1-D int array
        A partition of the feature indices ``0..d-1``.
    """

    name: ClassVar[str] = "l1inf"

    def value(self, w) -> float:
        """``sum_g max_{j in g} |w_j|``."""
        w = _vec(w)
        self._check_size(w)
        out = np.zeros(len(self.groups))
        np.maximum.at(out, self._labels, np.abs(w))
        return float(out.sum())

    def prox(self, v, step):
        """Per group ``v_g - P_{||.||_1 <= step}(v_g)``."""
        v = _vec(v)
        self._check_size(v)
        out = np.empty_like(v)
        for group in self.groups:
            index = list(group)
            out[index] = v[index] - project_l1_ball(v[index], float(step))
        return out

    def _dual_norm_value(self, v):
        return float(np.max(self._group_sums(np.abs(v))))


@dataclass(frozen=True)
class TraceNorm(Regularizer):
    """Trace (nuclear) norm of ``w`` reshaped (C order) to a matrix: sum of singular values.

    Conjugate: indicator of ``{spectral norm of v <= 1}``; prox: singular value soft threshold
    ``U diag(max(s - step, 0)) V^T``. No LMO (unbounded).

    Parameters
    ----------
    shape : tuple of int
        ``(n_rows, n_cols)`` of the matrix; ``w`` has ``n_rows * n_cols`` entries.
    """

    name: ClassVar[str] = "trace_norm"
    shape: tuple = (1, 1)

    def __post_init__(self):
        try:
            shape = tuple(int(s) for s in self.shape)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"shape must be two positive ints, got shape={self.shape!r}") from exc
        if len(shape) != 2 or min(shape) < 1:
            raise ValueError(f"shape must be two positive ints, got shape={self.shape!r}")
        object.__setattr__(self, "shape", shape)

    @property
    def n_features(self):
        """``n_rows * n_cols``."""
        return self.shape[0] * self.shape[1]

    def _matrix(self, w):
        w = _vec(w)
        self._check_size(w)
        return w.reshape(self.shape)

    def value(self, w) -> float:
        """Sum of the singular values."""
        return float(np.linalg.svd(self._matrix(w), compute_uv=False).sum())

    def prox(self, v, step):
        """Singular value soft threshold at ``step``."""
        u, s, vt = np.linalg.svd(self._matrix(v), full_matrices=False)
        return ((u * np.maximum(s - float(step), 0.0)) @ vt).ravel()

    def dual_norm(self, v) -> float:
        """Spectral norm (largest singular value)."""
        return float(np.linalg.svd(self._matrix(v), compute_uv=False).max())

    def conjugate(self, v) -> float:
        """Indicator of the unit spectral-norm ball (relative tolerance ``DUAL_TOL``)."""
        return 0.0 if self.dual_norm(v) <= 1.0 + DUAL_TOL else math.inf

    def feasible_scale(self, v) -> float:
        """``min(1, 1 / spectral norm)``."""
        norm = self.dual_norm(v)
        return 1.0 if norm <= 1.0 else 1.0 / norm


# ----------------------------------------------------------------------------------------------
# constraint sets
# ----------------------------------------------------------------------------------------------
def _check_radius(radius):
    value = float(radius)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"radius must be finite and > 0, got radius={radius!r}")
    return value


@dataclass(frozen=True)
class L1Ball(Regularizer):
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
    is_indicator: ClassVar[bool] = True
    radius: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "radius", _check_radius(self.radius))

    @property
    def params(self) -> np.ndarray:
        """``[radius]``."""
        return np.array([self.radius])

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
class L2Ball(Regularizer):
    """Indicator of the Euclidean ball ``{||w||_2 <= radius}``.

    Conjugate: ``radius ||v||_2``; prox: ``v min(1, radius / ||v||_2)``; LMO:
    ``-radius c / ||c||_2`` (0 when ``c = 0``).

    Parameters
    ----------
    radius : float
        Radius, > 0.
    """

    name: ClassVar[str] = "l2_ball"
    is_indicator: ClassVar[bool] = True
    radius: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "radius", _check_radius(self.radius))

    @property
    def params(self) -> np.ndarray:
        """``[radius]``."""
        return np.array([self.radius])

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


_REGULARIZERS = {
    "l2": L2,
    "ridge": L2,
    "l1": L1,
    "lasso": L1,
    "elasticnet": ElasticNet,
    "elastic_net": ElasticNet,
    "zero": Zero,
    "none": Zero,
}


def get_regularizer(name_or_obj) -> Regularizer:
    """Resolve a regularizer name or pass a regularizer instance through.

    Names: ``"l2"`` (``"ridge"``), ``"l1"`` (``"lasso"``), ``"elasticnet"``, ``"zero"``
    (``"none"``); case-insensitive, ``-`` or spaces may replace ``_``. Regularizers that need
    parameters (groups, shape, radius, bounds) must be passed as
    instances.

    Raises
    ------
    ValueError
        If the name is unknown or the argument is neither a string nor a regularizer.
    """
    if isinstance(name_or_obj, Regularizer):
        return name_or_obj
    if isinstance(name_or_obj, str):
        key = name_or_obj.strip().lower().replace("-", "_").replace(" ", "_")
        if key in _REGULARIZERS:
            return _REGULARIZERS[key]()
        raise ValueError(
            f"unknown regularizer={name_or_obj!r}; expected one of {sorted(_REGULARIZERS)} "
            "or a Regularizer instance (GroupLasso, L1Inf, TraceNorm, L1Ball, L2Ball, Box)"
        )
    raise ValueError(
        f"regularizer must be a name or a Regularizer instance, got regularizer={name_or_obj!r}"
    )
