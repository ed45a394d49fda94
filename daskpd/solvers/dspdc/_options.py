"""Options of DSPDC and the step sizes they lead to (Theorem 1 of Yu, Lin & Yang).

Symbols as in the translation table of :mod:`daskpd.solvers.dspdc`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.solvers.common.chain import _block_csr
from daskpd.solvers.common.coordinate import StepSizes

__all__ = ["DSPDCOptions", "dspdc_step_sizes", "lipschitz_constant"]


@dataclasses.dataclass(frozen=True)
class DSPDCOptions:
    """Options of :class:`~daskpd.solvers.dspdc.DSPDC`.

    Parameters
    ----------
    batch_size : int, default=1
        ``m``: dual coordinates per iteration.
    n_coords : int or None, default=None
        ``q``: primal coordinates per iteration; None means all (``q = p``: SPDC).
    lipschitz : {"safe", "heuristic"} or float, default="safe"
        The paper's ``Lambda``; see :func:`lipschitz_constant`.
    lipschitz_factor : float, default=1.0
        Factor on ``Lambda``.
    theta_rule : {"distance", "gap"}, default="distance"
        ``theta`` of (21) or (25).
    delta : float or None, default=None
        Section 3 perturbation (as in SPDC) for non-smooth losses or regularizers that
        are not strongly convex.
    tau, sigma, theta : float or None, default=None
        Overrides (``sigma`` in the paper's ``1/n`` convention).
    """

    batch_size: int = 1
    n_coords: int | None = None
    lipschitz: object = "safe"
    lipschitz_factor: float = 1.0
    theta_rule: str = "distance"
    delta: float | None = None
    tau: float | None = None
    sigma: float | None = None
    theta: float | None = None


def dspdc_step_sizes(n, p, batch_size, n_coords, lipschitz, lam, gamma, theta_rule="distance"):
    """Step sizes of Theorem 1 (eqs. (21)-(23)) and ``theta`` of (21) or (25).

    With ``K = sqrt(Lambda / (lambda gamma n)) n p / (m q) + max(n/m, p/q)`` and
    ``S = sqrt((n/m - p/q)^2 + 4 (n p)^2 Lambda / ((m q)^2 n lambda gamma))``:
    ``tau = (p / (q lambda)) / ((n/m - p/q) + S)``, ``sigma = (n^2 / (m gamma)) / ((p/q - n/m)
    + S)``, ``theta = p/q - (p/q) / K`` (rule ``"distance"``, (21)) or ``p/q - (p/q) / (2K)``
    (rule ``"gap"``, (25)). ``theta`` is about ``p/q`` and is not clipped to [0, 1].

    Parameters
    ----------
    n, p : int
        Numbers of samples and features (or blocks).
    batch_size, n_coords : int
        ``m`` and ``q``.
    lipschitz : float
        ``Lambda >= Lambda_{q,m}``.
    lam, gamma : float
        Strong convexity of the regularizer and of the conjugate loss.
    theta_rule : {"distance", "gap"}, default="distance"

    Returns
    -------
    StepSizes
        ``sigma`` in the paper's convention (dual step (15) with its ``1/n`` factor).
    """
    for name, value in (("lipschitz", lipschitz), ("lam", lam), ("gamma", gamma)):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    if theta_rule not in ("distance", "gap"):
        raise ValueError(f"theta_rule must be 'distance' or 'gap', got {theta_rule!r}")
    nm = n / batch_size
    pq = p / n_coords
    big_k = math.sqrt(lipschitz / (lam * gamma * n)) * n * p / (batch_size * n_coords) + max(nm, pq)
    s = math.sqrt(
        (nm - pq) ** 2
        + 4.0 * (n * p) ** 2 * lipschitz / ((batch_size * n_coords) ** 2 * n * lam * gamma)
    )
    tau = (pq / lam) / ((nm - pq) + s)
    sigma = (n * n / (batch_size * gamma)) / ((pq - nm) + s)
    theta = pq - pq / (big_k if theta_rule == "distance" else 2.0 * big_k)
    return StepSizes(tau, sigma, theta)


def _block_lambda_stats(data, block, n_coords):
    indptr, _, values, binary, _ = _block_csr(data, block)
    if binary:
        counts = np.diff(indptr)
        return float(min(n_coords, counts.max(initial=0))), float(counts.any())
    sq = values * values
    counts = np.diff(indptr)
    if counts.size and n_coords >= counts.max():
        # Every row has at most q nonzeros: Lambda_{q,1} is the largest squared row norm.
        sums = np.bincount(np.repeat(np.arange(counts.size), counts), sq, counts.size)
        return float(sums.max()), float(sq.max(initial=0.0))
    top = 0.0
    for i in range(len(indptr) - 1):
        row = sq[indptr[i] : indptr[i + 1]]
        if row.size:
            part = np.partition(row, row.size - min(n_coords, row.size))[-min(n_coords, row.size) :]
            top = max(top, float(part.sum()))
    return top, float(sq.max(initial=0.0))


def lipschitz_constant(data, batch_size, n_coords, rule="safe", factor=1.0):
    """The paper's ``Lambda`` for data ``X`` (one Dask compute for the ``"safe"`` rule).

    Parameters
    ----------
    data : Dataset
    batch_size, n_coords : int
        ``m`` and ``q``.
    rule : {"safe", "heuristic"} or float, default="safe"
        ``"safe"``: ``min(m Lambda_{q,1}, m q max_ij X_ij^2)`` with ``Lambda_{q,1}`` the largest
        sum of the ``q`` largest squared entries of a row (a bound on ``Lambda_{q,m}``).
        ``"heuristic"``: ``m q R^2 / p``. A float is returned as given (times ``factor``).
    factor : float, default=1.0
        Multiplies the result.

    Returns
    -------
    float
    """
    if not (np.isfinite(factor) and factor > 0):
        raise ValueError(f"lipschitz_factor must be > 0, got {factor!r}")
    if not isinstance(rule, str):
        value = float(rule)
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"lipschitz must be > 0, got {rule!r}")
        return value * factor
    n, p = data.shape
    if rule == "heuristic":
        big_r2 = float(np.max(data.row_norm_sq))
        return factor * batch_size * n_coords * big_r2 / p
    if rule != "safe":
        raise ValueError(f"lipschitz must be 'safe', 'heuristic' or a float, got {rule!r}")
    graph = TaskGraph("dspdc-lambda")
    data_ref = graph.data("data", data)
    stats = graph.compute(
        [
            graph.task(b, _block_lambda_stats, data_ref, b, n_coords)
            for b in range(len(data.row_block_bounds) - 1)
        ]
    )
    top = max(s[0] for s in stats)
    entry = max(s[1] for s in stats)
    return factor * min(batch_size * top, batch_size * n_coords * entry)
