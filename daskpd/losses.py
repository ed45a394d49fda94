"""Loss functions: value, gradient, conjugate, proxes and dual domains.

Every loss is an immutable object carrying ``code`` and ``params``, the pair by which kernels
select the same mathematics in :mod:`daskpd.kernels.scalar`. The methods below are vectorized
wrappers over those scalar ops (NumPy broadcasting over the arguments), so the formulas exist
once.

Conventions: ``u`` (or ``Xw``) is a prediction ``x_i . w``, ``y`` its label and ``z`` the dual
variable, with ``loss(u, y) = sup_z [z u - loss*(z, y)]``; at an optimum ``z_i = loss'(x_i . w)``.
Classification losses take labels in {-1, +1}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from daskpd._by_name import KernelObject, resolve_by_name
from daskpd.kernels import scalar as _scalar

__all__ = [
    "Absolute",
    "EpsilonInsensitive",
    "Hinge",
    "Huber",
    "Logistic",
    "Loss",
    "SmoothHinge",
    "Squared",
    "SquaredHinge",
    "get_loss",
]


def _as_float_arrays(*args):
    """Broadcast the arguments to one shape; return (flat contiguous float64 arrays, shape)."""
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64) for a in args])
    shape = arrays[0].shape
    return [np.ascontiguousarray(a).ravel() for a in arrays], shape


def _shaped(out, shape):
    """Return ``out`` in ``shape``, as a Python float when the inputs were scalars."""
    if shape == ():
        return float(out[0])
    return out.reshape(shape)


@dataclass(frozen=True)
class Loss(KernelObject):
    """Base class of the losses: vectorized wrappers over :mod:`daskpd.kernels.scalar`.

    Subclasses set ``code`` (an integer code of :mod:`daskpd.kernels.scalar`), ``name`` and
    ``classification``, and provide ``params`` and ``smoothness``.
    """

    code: ClassVar[int]
    name: ClassVar[str]
    #: True when the loss expects labels in {-1, +1}.
    classification: ClassVar[bool] = False

    @property
    def smoothness(self) -> float:
        """Lipschitz constant of the derivative in ``u`` (``1/gamma``; ``inf`` if non-smooth)."""
        return math.inf

    def value(self, Xw, y):
        """Loss of predictions ``Xw`` for labels ``y`` (elementwise, broadcast).

        Parameters
        ----------
        Xw : array-like of shape (n_samples,)
            Predictions ``x_i . w``.
        y : array-like of shape (n_samples,)
            Labels.

        Returns
        -------
        ndarray of shape (n_samples,), or float for scalar inputs
        """
        (u, y), shape = _as_float_arrays(Xw, y)
        out = np.empty_like(u)
        _scalar.loss_value_array(self.code, self.params, u, y, out)
        return _shaped(out, shape)

    def gradient(self, Xw, y):
        """Derivative in ``u`` of the loss at ``Xw`` (a subgradient where it is not smooth)."""
        (u, y), shape = _as_float_arrays(Xw, y)
        out = np.empty_like(u)
        _scalar.loss_derivative_array(self.code, self.params, u, y, out)
        return _shaped(out, shape)

    def conjugate(self, z, y):
        """Conjugate ``loss*(z, y) = sup_u z u - loss(u, y)``; ``inf`` outside the domain."""
        (z, y), shape = _as_float_arrays(z, y)
        out = np.empty_like(z)
        _scalar.loss_conjugate_array(self.code, self.params, z, y, out)
        return _shaped(out, shape)

    def prox(self, v, step, y):
        """Proximal map ``argmin_u loss(u, y) + (u - v)^2 / (2 step)`` (``step > 0``)."""
        (v, step, y), shape = _as_float_arrays(v, step, y)
        out = np.empty_like(v)
        _scalar.loss_prox_array(self.code, self.params, v, step, y, out)
        return _shaped(out, shape)

    def prox_conjugate(self, z, step, y):
        """Proximal map of the conjugate ``argmin_s loss*(s, y) + (s - z)^2 / (2 step)``."""
        (z, step, y), shape = _as_float_arrays(z, step, y)
        out = np.empty_like(z)
        _scalar.loss_prox_conjugate_array(self.code, self.params, z, step, y, out)
        return _shaped(out, shape)

    def dual_bounds(self, y):
        """Interval holding the domain of ``loss*(., y)``.

        Returns
        -------
        lo, hi : ndarray of shape (n_samples,), or floats for a scalar ``y``
            Bounds of the domain (possibly infinite).
        """
        (y,), shape = _as_float_arrays(y)
        lo = np.empty_like(y)
        hi = np.empty_like(y)
        _scalar.loss_dual_bounds_array(self.code, self.params, y, lo, hi)
        return _shaped(lo, shape), _shaped(hi, shape)


def _check_positive(name, value, *, allow_zero=False):
    value = float(value)
    bad = not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero)
    if bad:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {name}={value!r}")
    return value


@dataclass(frozen=True)
class _OneParameterLoss(Loss):
    """A loss of one float parameter, the dataclass field named by ``parameter``: checked
    finite and positive (or >= 0 with ``zero_allowed``), and the kernels' ``params``."""

    parameter: ClassVar[str]
    zero_allowed: ClassVar[bool] = False

    def __post_init__(self):
        value = _check_positive(
            self.parameter, getattr(self, self.parameter), allow_zero=self.zero_allowed
        )
        object.__setattr__(self, self.parameter, value)

    @property
    def params(self) -> np.ndarray:
        """``[parameter]``."""
        return np.array([getattr(self, self.parameter)])


@dataclass(frozen=True)
class Hinge(Loss):
    """Hinge loss ``max(0, 1 - y u)``, labels in {-1, +1}.

    Conjugate: ``loss*(z, y) = y z`` for ``y z in [-1, 0]``, ``+inf`` otherwise.
    Prox (``t = y v``): ``u = v`` if ``t >= 1``; ``y (t + step)`` if ``t <= 1 - step``; else ``y``.
    Prox of the conjugate: ``y clip(y z - step, -1, 0)``. Not smooth.
    """

    code: ClassVar[int] = _scalar.HINGE
    name: ClassVar[str] = "hinge"
    classification: ClassVar[bool] = True


@dataclass(frozen=True)
class SmoothHinge(_OneParameterLoss):
    """Smoothed hinge loss (Shalev-Shwartz & Zhang), labels in {-1, +1}, ``t = y u``.

    ``loss = 0`` if ``t >= 1``; ``1 - t - gamma/2`` if ``t <= 1 - gamma``;
    ``(1 - t)^2 / (2 gamma)`` otherwise. ``gamma = 1`` is the loss of the DSPDC experiments.

    Conjugate: ``s + gamma s^2 / 2`` with ``s = y z in [-1, 0]``, ``+inf`` otherwise.
    Prox (``t = y v``): ``v`` if ``t >= 1``; ``y (t + step)`` if ``t <= 1 - gamma - step``;
    else ``y (step + gamma t) / (step + gamma)``.
    Prox of the conjugate: ``y clip((y z - step) / (1 + gamma step), -1, 0)``.
    Smoothness ``1/gamma``.

    Parameters
    ----------
    gamma : float, default=1.0
        Width of the quadratic zone, > 0.
    """

    code: ClassVar[int] = _scalar.SMOOTH_HINGE
    name: ClassVar[str] = "smooth_hinge"
    classification: ClassVar[bool] = True
    parameter: ClassVar[str] = "gamma"
    gamma: float = 1.0

    @property
    def smoothness(self) -> float:
        """``1 / gamma``."""
        return 1.0 / self.gamma


@dataclass(frozen=True)
class SquaredHinge(Loss):
    """Squared hinge loss ``max(0, 1 - y u)^2`` (liblinear's L2-loss SVM), labels in {-1, +1}.

    Conjugate: ``s + s^2 / 4`` with ``s = y z <= 0``, ``+inf`` otherwise.
    Prox (``t = y v``): ``v`` if ``t >= 1``, else ``y (2 step + t) / (2 step + 1)``.
    Prox of the conjugate: ``y min((y z - step) / (1 + step / 2), 0)``. Smoothness 2.
    """

    code: ClassVar[int] = _scalar.SQUARED_HINGE
    name: ClassVar[str] = "squared_hinge"
    classification: ClassVar[bool] = True

    @property
    def smoothness(self) -> float:
        """2."""
        return 2.0


@dataclass(frozen=True)
class Logistic(Loss):
    """Logistic loss ``log(1 + exp(-y u))``, labels in {-1, +1}.

    Conjugate: ``(-s) log(-s) + (1 + s) log(1 + s)`` with ``s = y z in [-1, 0]`` (``0 log 0 = 0``),
    ``+inf`` otherwise.
    Prox: root of ``t - y v - step sigmoid(-t) = 0`` (``t = y u``); prox of the conjugate:
    ``-y sigmoid(r)`` with ``step r + sigmoid(r) + y z = 0``. Both are solved by Newton steps
    safeguarded by bisection inside a bracket of width ``step`` (resp. ``1/step``), to machine
    precision. Smoothness 1/4.
    """

    code: ClassVar[int] = _scalar.LOGISTIC
    name: ClassVar[str] = "logistic"
    classification: ClassVar[bool] = True

    @property
    def smoothness(self) -> float:
        """1/4."""
        return 0.25


@dataclass(frozen=True)
class Squared(Loss):
    """Squared loss ``(u - y)^2 / 2``.

    Conjugate: ``z^2 / 2 + z y`` (all z). Prox: ``(v + step y) / (1 + step)``.
    Prox of the conjugate: ``(z - step y) / (1 + step)``. Smoothness 1.
    """

    code: ClassVar[int] = _scalar.SQUARED
    name: ClassVar[str] = "squared"

    @property
    def smoothness(self) -> float:
        """1."""
        return 1.0


@dataclass(frozen=True)
class Absolute(Loss):
    """Absolute loss ``|u - y|``.

    Conjugate: ``z y`` for ``|z| <= 1``, ``+inf`` otherwise. Prox: ``y + soft(v - y, step)``.
    Prox of the conjugate: ``clip(z - step y, -1, 1)``. Not smooth.
    """

    code: ClassVar[int] = _scalar.ABSOLUTE
    name: ClassVar[str] = "absolute"


@dataclass(frozen=True)
class EpsilonInsensitive(_OneParameterLoss):
    """Epsilon-insensitive loss ``max(0, |u - y| - epsilon)`` (support vector regression).

    Conjugate: ``z y + epsilon |z|`` for ``|z| <= 1``, ``+inf`` otherwise.
    Prox (``r = v - y``): ``v`` if ``|r| <= epsilon``; ``y + sign(r) epsilon`` if
    ``|r| <= epsilon + step``; else ``v - sign(r) step``.
    Prox of the conjugate: ``clip(soft(z - step y, step epsilon), -1, 1)``. Not smooth.

    Parameters
    ----------
    epsilon : float, default=0.1
        Half-width of the insensitive zone, >= 0.
    """

    code: ClassVar[int] = _scalar.EPSILON_INSENSITIVE
    name: ClassVar[str] = "epsilon_insensitive"
    parameter: ClassVar[str] = "epsilon"
    zero_allowed: ClassVar[bool] = True
    epsilon: float = 0.1


@dataclass(frozen=True)
class Huber(_OneParameterLoss):
    """Huber loss, ``r = u - y``: ``r^2 / 2`` if ``|r| <= delta``, else ``delta (|r| - delta/2)``.

    Conjugate: ``z y + z^2 / 2`` for ``|z| <= delta``, ``+inf`` otherwise.
    Prox (``r = v - y``): ``y + r / (1 + step)`` if ``|r| <= delta (1 + step)``, else
    ``v - sign(r) step delta``. Prox of the conjugate: ``clip((z - step y)/(1 + step), -delta,
    delta)``. Smoothness 1.

    Parameters
    ----------
    delta : float, default=1.0
        Threshold between the quadratic and the linear zone, > 0.
    """

    code: ClassVar[int] = _scalar.HUBER
    name: ClassVar[str] = "huber"
    parameter: ClassVar[str] = "delta"
    delta: float = 1.0

    @property
    def smoothness(self) -> float:
        """1."""
        return 1.0


_LOSSES = {
    "hinge": Hinge,
    "smooth_hinge": SmoothHinge,
    "squared_hinge": SquaredHinge,
    "logistic": Logistic,
    "log": Logistic,
    "log_loss": Logistic,
    "squared": Squared,
    "squared_error": Squared,
    "least_squares": Squared,
    "absolute": Absolute,
    "epsilon_insensitive": EpsilonInsensitive,
    "huber": Huber,
}


def get_loss(name_or_obj) -> Loss:
    """Resolve a loss name (``"hinge"``, ``"logistic"``, ...) or pass a loss instance through.

    Parameters
    ----------
    name_or_obj : str or Loss
        A :class:`Loss` instance (returned as is) or a name; names are case-insensitive and
        ``-`` or spaces may replace ``_``. Named losses get their default parameters.

    Returns
    -------
    Loss

    Raises
    ------
    ValueError
        If the name is unknown or the argument is neither a string nor a loss.
    """
    return resolve_by_name(name_or_obj, Loss, _LOSSES, "loss", "a Loss instance")
