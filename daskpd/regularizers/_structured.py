"""Non-separable norms: group norms over a partition of the features, and the trace norm."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np

from daskpd.regularizers._base import DUAL_TOL, Regularizer, _vec, project_l1_ball


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
