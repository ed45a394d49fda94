"""Checks and coercion of :func:`daskpd.solvers.driver.solve`'s arguments.

Each check raises one ``ValueError`` naming the parameter and its value, before any Dask
work.
"""

from __future__ import annotations

import numpy as np

from daskpd.solvers.driver.types import Iterate, SolveResult


def _coerce_warm_start(warm_start, data) -> Iterate | None:
    if warm_start is None or warm_start is False:
        return None
    if isinstance(warm_start, SolveResult | Iterate):
        w, z = warm_start.w, warm_start.z
    else:
        w, z = warm_start, None
    w = np.array(w, dtype=np.float64, copy=True)
    if w.ndim != 1 or w.shape[0] != data.n_features:
        raise ValueError(
            f"warm_start has shape {w.shape}, expected ({data.n_features},) (n_features)"
        )
    if not np.all(np.isfinite(w)):
        raise ValueError("warm_start contains NaN or inf")
    z = _whole_dual(z)
    if not isinstance(z, np.ndarray) or z.shape != (data.n_samples,):
        z = None
    return Iterate(w=w, z=None if z is None else np.array(z, dtype=np.float64))


def _whole_dual(z):
    """A dual held by ranges (arrays or futures of consecutive row ranges) as one array.

    A solver that keeps its dual on the workers (cocoa, DSO) returns it as a list in row
    order; a warm start from that result needs the whole vector (the futures are read through
    the client that made them, which must still be up).
    """
    if not isinstance(z, list | tuple) or not z:
        return z
    parts = [part.result() if hasattr(part, "result") else part for part in z]
    return np.concatenate([np.asarray(part, dtype=np.float64).ravel() for part in parts])


def _check_positive_int(name, value, *, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_eval_every(value):
    if isinstance(value, str) and value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"eval_every must be a positive integer or 'auto', got {value!r}")
    return int(value)


def _check_nonnegative_float(name, value, *, allow_none=False):
    if value is None and allow_none:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not number >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    return number
