"""Options of SPDC and the step sizes they lead to (Theorems 1 and 6 of Zhang & Xiao).

Symbols as in the translation table of :mod:`daskpd.solvers.spdc`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from daskpd.solvers.common.coordinate import StepSizes
from daskpd.solvers.common.groups import machine_threads

__all__ = [
    "SPDCOptions",
    "optimal_mixing",
    "sampling_probabilities",
    "spdc_step_sizes",
    "weighted_step_sizes",
]


@dataclasses.dataclass(frozen=True)
class SPDCOptions:
    """Options of :class:`~daskpd.solvers.spdc.SPDC`.

    Parameters
    ----------
    batch_size : int, default=1
        ``m``: rows per iteration (Algorithm 2). Passes per epoch stay 1.
    sampling : {"shuffle", "uniform", "weighted"}, default="shuffle"
        ``"shuffle"``: each epoch visits a block's rows in a fresh random permutation
        (sampling without replacement, as liblinear's and SDCA's passes do), with the
        steps of (12). ``"uniform"``: the paper's i.i.d. sampling (Algorithms 1 and 2).
        The analysis is for the latter, but shuffled passes converge faster
        (BENCHMARKS.md, SPDC). ``"weighted"``:
        Algorithm 3, eq. (20); needs ``batch_size=1``.
    mixing : float or None, default=None
        ``alpha`` of (20); None picks ``alpha*`` of (25).
    delta : float or None, default=None
        Section 3 perturbation (required for non-smooth losses or regularizers that
        are not strongly convex).
    tau, sigma, theta : float or None, default=None
        Overrides of the theoretical step sizes.
    threads : int or None, default=None
        Threads that run a block's iterations together (one row an iteration and
        shuffled passes only). They share ``w`` without locks, as asynchronous
        coordinate methods do, and add to ``u = X^T z / n`` atomically
        (:func:`daskpd.kernels.spdc.spdc_rows`), so the iterates depend on the threads'
        timing: not reproducible bit for bit with more than 1. None: on a cluster, the
        worker threads of a machine (the chain runs one block at a time, so the other
        workers' cores would idle; a LocalCluster of two 1-thread workers gets 2), 1 with
        mini-batches or i.i.d. sampling, and 1 in-process. Two threads make an epoch
        faster with the same progress an epoch (BENCHMARKS.md, SPDC).
    shared_memory : bool, default=True
        Hand the epoch's carry between the worker processes of one machine through
        shared memory (``/dev/shm``, or ``$DASKPD_SHM_DIR``): the next run maps the
        same pages (:class:`SharedLazyCarry`). Between machines, with mini-batches,
        and everywhere with ``False``, it travels by Dask. The same bits either way.
    """

    batch_size: int = 1
    sampling: str = "shuffle"
    mixing: float | None = None
    delta: float | None = None
    tau: float | None = None
    sigma: float | None = None
    theta: float | None = None
    threads: int | None = None
    shared_memory: bool = True


def spdc_step_sizes(max_row_norm, gamma, lam, n, batch_size=1):
    """Step sizes of Theorem 1, eq. (12), for uniform (mini-batch) sampling.

    ``tau = sqrt(m gamma / (n lambda)) / (2R)``, ``sigma = sqrt(n lambda / (m gamma)) / (2R)``,
    ``theta = 1 - 1 / (n/m + 2R sqrt(n / (m lambda gamma)))``.

    Parameters
    ----------
    max_row_norm : float
        ``R = max_i ||x_i||``.
    gamma : float
        Strong convexity of the conjugate loss (the loss is ``1/gamma``-smooth).
    lam : float
        Strong convexity of ``alpha R`` (``lambda``).
    n : int
        Number of samples.
    batch_size : int, default=1
        ``m``.

    Returns
    -------
    StepSizes
    """
    _check_positive(max_row_norm=max_row_norm, gamma=gamma, lam=lam)
    m = float(batch_size)
    r = float(max_row_norm)
    tau = math.sqrt(m * gamma / (n * lam)) / (2.0 * r)
    sigma = math.sqrt(n * lam / (m * gamma)) / (2.0 * r)
    theta = 1.0 - 1.0 / (n / m + 2.0 * r * math.sqrt(n / (m * lam * gamma)))
    return StepSizes(tau, sigma, theta)


def weighted_step_sizes(max_row_norm, mean_row_norm, gamma, lam, n, mixing):
    """Step sizes of Theorem 6, eq. (24), for weighted sampling (batch size 1).

    With ``R_mix = ((1 - mixing) / R + mixing / Rbar)^-1``: ``tau = sqrt(gamma / (n lambda)) /
    (2 R_mix)``, ``sigma = sqrt(n lambda / gamma) / (2 R_mix)``, ``theta = 1 - 1 / (n / (1 -
    mixing) + R_mix sqrt(n / (lambda gamma)))`` (no factor 2 in ``theta``, unlike (12)).

    Parameters
    ----------
    max_row_norm, mean_row_norm : float
        ``R`` and ``Rbar`` (mean of the row norms).
    gamma, lam : float
        See :func:`spdc_step_sizes`.
    n : int
        Number of samples.
    mixing : float
        ``alpha`` of eq. (20), in ``[0, 1)``.

    Returns
    -------
    StepSizes
    """
    _check_positive(max_row_norm=max_row_norm, mean_row_norm=mean_row_norm, gamma=gamma, lam=lam)
    if not 0.0 <= mixing < 1.0:
        raise ValueError(f"mixing must be in [0, 1), got {mixing!r}")
    r_mix = 1.0 / ((1.0 - mixing) / max_row_norm + mixing / mean_row_norm)
    tau = math.sqrt(gamma / (n * lam)) / (2.0 * r_mix)
    sigma = math.sqrt(n * lam / gamma) / (2.0 * r_mix)
    theta = 1.0 - 1.0 / (n / (1.0 - mixing) + r_mix * math.sqrt(n / (lam * gamma)))
    return StepSizes(tau, sigma, theta)


def optimal_mixing(max_row_norm, mean_row_norm, gamma, lam, n):
    """The mixing ``alpha*`` of eq. (25) that minimizes the rate of (24).

    With ``rho = R / Rbar - 1`` and ``kappa = R^2 / (lambda gamma)``: 0 when ``rho <=
    sqrt(n / kappa)``, else ``(sqrt(rho) (kappa/n)^(1/4) - 1) / (sqrt(rho) (kappa/n)^(1/4) +
    rho)``. Uniform sampling is optimal for well-conditioned problems and the weighting
    grows with the condition number (the paper's prose after (25) says the opposite; the
    formula is right, see the digest).

    Returns
    -------
    float
    """
    _check_positive(max_row_norm=max_row_norm, mean_row_norm=mean_row_norm, gamma=gamma, lam=lam)
    rho = max_row_norm / mean_row_norm - 1.0
    kappa = max_row_norm**2 / (lam * gamma)
    if rho <= math.sqrt(n / kappa):
        return 0.0
    s = math.sqrt(rho) * (kappa / n) ** 0.25
    return (s - 1.0) / (s + rho)


def sampling_probabilities(row_norms, mixing):
    """Sampling probabilities of eq. (20): ``(1 - mixing)/n + mixing ||x_k|| / sum_i ||x_i||``.

    Parameters
    ----------
    row_norms : array-like of shape (n_samples,)
        Row norms ``||x_k||``.
    mixing : float
        In ``[0, 1]``.

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    norms = np.asarray(row_norms, dtype=np.float64)
    return (1.0 - mixing) / norms.shape[0] + mixing * norms / norms.sum()


def _check_positive(**values):
    for name, value in values.items():
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be finite and > 0, got {value!r}")


def run_threads(options, client):
    """Threads of a block task (``SPDCOptions.threads``; None resolved, see there)."""
    if options.threads is not None:
        return int(options.threads)
    if client is None or options.batch_size != 1 or options.sampling != "shuffle":
        return 1
    return machine_threads(client)
