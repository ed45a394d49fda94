"""Scalar loss and regularizer operations shared by every kernel.

The mathematics of each loss and separable regularizer exists once, here. Kernels select an
operation by ``(code, params)``: an integer code (module constants below) and a float64
parameter array. Passing codes instead of functions keeps numba's on-disk cache valid and keeps
tasks picklable. The Python classes in :mod:`daskpd.losses` and :mod:`daskpd.regularizers` are
vectorized wrappers over the array functions at the end of this module.

Conventions (DESIGN.md): ``u`` is a prediction ``x_i . w``, ``y`` the label of the row, ``z``
the dual variable with ``loss(u, y) = sup_z [z u - loss*(z, y)]``. Classification losses
(hinge, smooth hinge, squared hinge, logistic) expect ``y`` in {-1, +1}; they are written in
terms of the margin ``t = y u`` and the scaled dual ``s = y z``.

Losses (``t = y u``, ``r = u - y``, ``s = y z``), as ``loss(u, y)`` ; ``loss*(z, y)``:

- ``HINGE = 0``: ``max(0, 1 - t)`` ; ``s`` on ``s in [-1, 0]``.
- ``SMOOTH_HINGE = 1`` (params[0] = gamma > 0): ``0`` if ``t >= 1``, ``1 - t - gamma/2`` if
  ``t <= 1 - gamma``, ``(1 - t)^2 / (2 gamma)`` otherwise ; ``s + gamma s^2 / 2`` on ``[-1, 0]``.
- ``SQUARED_HINGE = 2``: ``max(0, 1 - t)^2`` ; ``s + s^2 / 4`` on ``s <= 0``.
- ``LOGISTIC = 3``: ``log(1 + exp(-t))`` ; ``(-s) log(-s) + (1 + s) log(1 + s)`` on ``[-1, 0]``.
- ``SQUARED = 4``: ``r^2 / 2`` ; ``z^2 / 2 + z y``.
- ``ABSOLUTE = 5``: ``|r|`` ; ``z y`` on ``|z| <= 1``.
- ``EPSILON_INSENSITIVE = 6`` (params[0] = epsilon >= 0): ``max(0, |r| - epsilon)`` ;
  ``z y + epsilon |z|`` on ``|z| <= 1``.
- ``HUBER = 7`` (params[0] = delta > 0): ``r^2 / 2`` if ``|r| <= delta``, else
  ``delta (|r| - delta / 2)`` ; ``z y + z^2 / 2`` on ``|z| <= delta``.

Separable regularizers (per coordinate ``R_j(w_j)``): ``L2 = 0`` (w^2/2), ``L1 = 1`` (|w|),
``ELASTIC_NET = 2`` (params[0] = l1_ratio: l1_ratio |w| + (1 - l1_ratio)/2 w^2) and ``ZERO = 3``
(R = 0, for constraint-only problems; its conjugate is the indicator of {0}).
"""

from __future__ import annotations

import math

import numpy as np

from daskpd.kernels._config import njit

# Loss codes.
HINGE = 0
SMOOTH_HINGE = 1
SQUARED_HINGE = 2
LOGISTIC = 3
SQUARED = 4
ABSOLUTE = 5
EPSILON_INSENSITIVE = 6
HUBER = 7

# Separable regularizer codes.
L2 = 0
L1 = 1
ELASTIC_NET = 2
ZERO = 3

#: Number of codes: losses are ``0 .. N_LOSSES - 1``, regularizers ``0 .. N_REGULARIZERS - 1``.
N_LOSSES = 8
N_REGULARIZERS = 4

_INF = np.inf
_NAN = np.nan


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
@njit
def clip(x, lo, hi):
    """``x`` clipped to ``[lo, hi]``."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


@njit
def _soft(x, k):
    """Soft threshold ``sign(x) max(|x| - k, 0)``."""
    if x > k:
        return x - k
    if x < -k:
        return x + k
    return 0.0


@njit
def _sign(x):
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return 0.0


@njit
def _sigmoid(r):
    """``1 / (1 + exp(-r))`` without overflow."""
    if r >= 0.0:
        return 1.0 / (1.0 + math.exp(-r))
    e = math.exp(r)
    return e / (1.0 + e)


@njit
def _log1pexp(x):
    """``log(1 + exp(x))`` without overflow or loss of precision for large negative x."""
    if x > 0.0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


@njit
def _xlogx(x):
    if x <= 0.0:
        return 0.0
    return x * math.log(x)


@njit
def _solve_sigmoid_equation(a, b, c):
    """Root ``r`` of ``a r + b sigmoid(r) + c = 0`` for ``a > 0, b >= 0``.

    The left side increases strictly, and since ``0 <= sigmoid <= 1`` the root lies in
    ``[-(c + b)/a, -c/a]``. Newton steps are kept inside a shrinking bracket and replaced by
    bisection whenever they leave it, so the iteration always converges. Both logistic proxes
    reduce to this equation.
    """
    lo = -(c + b) / a
    hi = -c / a
    r = 0.5 * (lo + hi)
    for _ in range(200):
        p = _sigmoid(r)
        h = a * r + b * p + c
        if h == 0.0:
            return r
        if h > 0.0:
            hi = r
        else:
            lo = r
        dh = a + b * p * (1.0 - p)
        r_new = r - h / dh
        if not (lo < r_new < hi):
            r_new = 0.5 * (lo + hi)
        if abs(r_new - r) <= 1e-15 * (1.0 + abs(r)) or hi - lo <= 1e-15 * (1.0 + abs(r)):
            return r_new
        r = r_new
    return r


# --------------------------------------------------------------------------------------------
# losses
# --------------------------------------------------------------------------------------------
@njit
def loss_value(code, params, u, y):
    """Loss ``loss(u, y)`` of prediction ``u`` for label ``y``."""
    if code == HINGE:
        return max(0.0, 1.0 - y * u)
    if code == SMOOTH_HINGE:
        gamma = params[0]
        t = y * u
        if t >= 1.0:
            return 0.0
        if t <= 1.0 - gamma:
            return 1.0 - t - 0.5 * gamma
        return (1.0 - t) * (1.0 - t) / (2.0 * gamma)
    if code == SQUARED_HINGE:
        m = max(0.0, 1.0 - y * u)
        return m * m
    if code == LOGISTIC:
        return _log1pexp(-y * u)
    if code == SQUARED:
        r = u - y
        return 0.5 * r * r
    if code == ABSOLUTE:
        return abs(u - y)
    if code == EPSILON_INSENSITIVE:
        return max(0.0, abs(u - y) - params[0])
    if code == HUBER:
        delta = params[0]
        r = abs(u - y)
        if r <= delta:
            return 0.5 * r * r
        return delta * (r - 0.5 * delta)
    return _NAN


@njit
def loss_derivative(code, params, u, y):
    """Derivative of ``loss(., y)`` at ``u`` (a subgradient where the loss is not smooth)."""
    if code == HINGE:
        if y * u < 1.0:
            return -y
        return 0.0
    if code == SMOOTH_HINGE:
        gamma = params[0]
        return -y * clip((1.0 - y * u) / gamma, 0.0, 1.0)
    if code == SQUARED_HINGE:
        return -2.0 * y * max(0.0, 1.0 - y * u)
    if code == LOGISTIC:
        return -y * _sigmoid(-y * u)
    if code == SQUARED:
        return u - y
    if code == ABSOLUTE:
        return _sign(u - y)
    if code == EPSILON_INSENSITIVE:
        r = u - y
        if abs(r) > params[0]:
            return _sign(r)
        return 0.0
    if code == HUBER:
        delta = params[0]
        return clip(u - y, -delta, delta)
    return _NAN


@njit
def loss_conjugate(code, params, z, y):
    """Fenchel conjugate ``loss*(z, y) = sup_u z u - loss(u, y)``; ``+inf`` outside the domain."""
    if code == HINGE or code == SMOOTH_HINGE or code == LOGISTIC:
        s = y * z
        if s < -1.0 or s > 0.0:
            return _INF
        if code == HINGE:
            return s
        if code == SMOOTH_HINGE:
            return s + 0.5 * params[0] * s * s
        return _xlogx(-s) + _xlogx(1.0 + s)
    if code == SQUARED_HINGE:
        s = y * z
        if s > 0.0:
            return _INF
        return s + 0.25 * s * s
    if code == SQUARED:
        return 0.5 * z * z + z * y
    if code == ABSOLUTE:
        if abs(z) > 1.0:
            return _INF
        return z * y
    if code == EPSILON_INSENSITIVE:
        if abs(z) > 1.0:
            return _INF
        return z * y + params[0] * abs(z)
    if code == HUBER:
        if abs(z) > params[0]:
            return _INF
        return z * y + 0.5 * z * z
    return _NAN


@njit
def loss_prox(code, params, v, step, y):
    """Proximal map ``argmin_u loss(u, y) + (u - v)^2 / (2 step)``."""
    if code == HINGE:
        t = y * v
        if t >= 1.0:
            return v
        if t <= 1.0 - step:
            return y * (t + step)
        return y
    if code == SMOOTH_HINGE:
        gamma = params[0]
        t = y * v
        if t >= 1.0:
            return v
        if t <= 1.0 - gamma - step:
            return y * (t + step)
        return y * (step + gamma * t) / (step + gamma)
    if code == SQUARED_HINGE:
        t = y * v
        if t >= 1.0:
            return v
        return y * (2.0 * step + t) / (2.0 * step + 1.0)
    if code == LOGISTIC:
        # Optimality: t - y v - step sigmoid(-t) = 0 with t = y u; in r = -t this is
        # r + step sigmoid(r) + y v = 0.
        r = _solve_sigmoid_equation(1.0, step, y * v)
        return -y * r
    if code == SQUARED:
        return (v + step * y) / (1.0 + step)
    if code == ABSOLUTE:
        return y + _soft(v - y, step)
    if code == EPSILON_INSENSITIVE:
        eps = params[0]
        r = v - y
        a = abs(r)
        if a <= eps:
            return v
        if a <= eps + step:
            return y + _sign(r) * eps
        return v - _sign(r) * step
    if code == HUBER:
        delta = params[0]
        r = v - y
        if abs(r) <= delta * (1.0 + step):
            return y + r / (1.0 + step)
        return v - _sign(r) * step * delta
    return _NAN


@njit
def loss_prox_conjugate(code, params, z, step, y):
    """Proximal map of the conjugate ``argmin_s loss*(s, y) + (s - z)^2 / (2 step)``."""
    if code == HINGE:
        # loss*(s) = y s on y s in [-1, 0]; in a = y s: minimize a + (a - y z)^2 / (2 step).
        return y * clip(y * z - step, -1.0, 0.0)
    if code == SMOOTH_HINGE:
        gamma = params[0]
        return y * clip((y * z - step) / (1.0 + gamma * step), -1.0, 0.0)
    if code == SQUARED_HINGE:
        return y * min((y * z - step) / (1.0 + 0.5 * step), 0.0)
    if code == LOGISTIC:
        # With a = y s = -sigmoid(r): optimality log((1+a)/(-a)) + (a - y z)/step = 0 becomes
        # step r + sigmoid(r) + y z = 0. Solving for r keeps a accurate near 0 and -1.
        r = _solve_sigmoid_equation(step, 1.0, y * z)
        return -y * _sigmoid(r)
    if code == SQUARED:
        return (z - step * y) / (1.0 + step)
    if code == ABSOLUTE:
        return clip(z - step * y, -1.0, 1.0)
    if code == EPSILON_INSENSITIVE:
        return clip(_soft(z - step * y, step * params[0]), -1.0, 1.0)
    if code == HUBER:
        delta = params[0]
        return clip((z - step * y) / (1.0 + step), -delta, delta)
    return _NAN


@njit
def loss_dual_bounds(code, params, y):
    """Interval ``(lo, hi)`` holding the domain of ``loss*(., y)`` (bounds may be infinite)."""
    if code == HINGE or code == SMOOTH_HINGE or code == LOGISTIC:
        if y > 0.0:
            return -1.0 / y, 0.0
        return 0.0, -1.0 / y
    if code == SQUARED_HINGE:
        if y > 0.0:
            return -_INF, 0.0
        return 0.0, _INF
    if code == SQUARED:
        return -_INF, _INF
    if code == ABSOLUTE or code == EPSILON_INSENSITIVE:
        return -1.0, 1.0
    if code == HUBER:
        return -params[0], params[0]
    return _NAN, _NAN


# --------------------------------------------------------------------------------------------
# separable regularizers
# --------------------------------------------------------------------------------------------
@njit
def reg_value(code, params, w):
    """Per-coordinate regularizer ``R_j(w)``."""
    if code == L2:
        return 0.5 * w * w
    if code == L1:
        return abs(w)
    if code == ELASTIC_NET:
        ratio = params[0]
        return ratio * abs(w) + 0.5 * (1.0 - ratio) * w * w
    if code == ZERO:
        return 0.0
    return _NAN


@njit
def reg_prox(code, params, v, step):
    """Proximal map of ``step * R_j``: ``argmin_w R_j(w) + (w - v)^2 / (2 step)``."""
    if code == L2:
        return v / (1.0 + step)
    if code == L1:
        return _soft(v, step)
    if code == ELASTIC_NET:
        ratio = params[0]
        return _soft(v, step * ratio) / (1.0 + step * (1.0 - ratio))
    if code == ZERO:
        return v
    return _NAN


@njit
def reg_subgradient(code, params, w):
    """A subgradient of ``R_j`` at ``w`` (0 for the non-smooth part at ``w = 0``)."""
    if code == L2:
        return w
    if code == L1:
        return _sign(w)
    if code == ELASTIC_NET:
        ratio = params[0]
        return ratio * _sign(w) + (1.0 - ratio) * w
    if code == ZERO:
        return 0.0
    return _NAN


@njit
def reg_conjugate(code, params, v):
    """Conjugate ``R_j*(v) = sup_w v w - R_j(w)``; ``+inf`` outside the domain."""
    if code == L2:
        return 0.5 * v * v
    if code == L1:
        if abs(v) > 1.0:
            return _INF
        return 0.0
    if code == ELASTIC_NET:
        ratio = params[0]
        if ratio >= 1.0:
            if abs(v) > 1.0:
                return _INF
            return 0.0
        m = max(abs(v) - ratio, 0.0)
        return m * m / (2.0 * (1.0 - ratio))
    if code == ZERO:
        if v != 0.0:
            return _INF
        return 0.0
    return _NAN


# --------------------------------------------------------------------------------------------
# elementwise array versions (used by the Python wrappers; same scalar ops)
# --------------------------------------------------------------------------------------------
@njit
def loss_value_array(code, params, u, y, out):
    """``out[i] = loss_value(code, params, u[i], y[i])`` over 1-D float64 arrays."""
    for i in range(u.shape[0]):
        out[i] = loss_value(code, params, u[i], y[i])


@njit
def loss_derivative_array(code, params, u, y, out):
    """``out[i] = loss_derivative(code, params, u[i], y[i])``."""
    for i in range(u.shape[0]):
        out[i] = loss_derivative(code, params, u[i], y[i])


@njit
def loss_conjugate_array(code, params, z, y, out):
    """``out[i] = loss_conjugate(code, params, z[i], y[i])``."""
    for i in range(z.shape[0]):
        out[i] = loss_conjugate(code, params, z[i], y[i])


@njit
def loss_prox_array(code, params, v, step, y, out):
    """``out[i] = loss_prox(code, params, v[i], step[i], y[i])``."""
    for i in range(v.shape[0]):
        out[i] = loss_prox(code, params, v[i], step[i], y[i])


@njit
def loss_prox_conjugate_array(code, params, z, step, y, out):
    """``out[i] = loss_prox_conjugate(code, params, z[i], step[i], y[i])``."""
    for i in range(z.shape[0]):
        out[i] = loss_prox_conjugate(code, params, z[i], step[i], y[i])


@njit
def loss_dual_bounds_array(code, params, y, lo, hi):
    """``(lo[i], hi[i]) = loss_dual_bounds(code, params, y[i])``."""
    for i in range(y.shape[0]):
        a, b = loss_dual_bounds(code, params, y[i])
        lo[i] = a
        hi[i] = b


@njit
def reg_value_array(code, params, w, out):
    """``out[j] = reg_value(code, params, w[j])``."""
    for j in range(w.shape[0]):
        out[j] = reg_value(code, params, w[j])


@njit
def reg_prox_array(code, params, v, step, out):
    """``out[j] = reg_prox(code, params, v[j], step[j])``."""
    for j in range(v.shape[0]):
        out[j] = reg_prox(code, params, v[j], step[j])


@njit
def reg_subgradient_array(code, params, w, out):
    """``out[j] = reg_subgradient(code, params, w[j])``."""
    for j in range(w.shape[0]):
        out[j] = reg_subgradient(code, params, w[j])


@njit
def reg_conjugate_array(code, params, v, out):
    """``out[j] = reg_conjugate(code, params, v[j])``."""
    for j in range(v.shape[0]):
        out[j] = reg_conjugate(code, params, v[j])
