"""DSPDC in memory: factorized data ``X = U V`` (Algorithm 2) and matrix risk minimization
(Section 5.2), each one numba loop (the factors are small by construction, and the method
is sequential).

Symbols as in the translation table of :mod:`daskpd.solvers.dspdc`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from daskpd.kernels import dspdc as dspdc_kernels
from daskpd.kernels import scalar
from daskpd.solvers.common.coordinate import (
    ProblemArgs,
    StepSizes,
    draw_rows,
    kernel_scalars,
    problem_spec,
)
from daskpd.solvers.driver.seeds import epoch_seed
from daskpd.solvers.dspdc._options import dspdc_step_sizes

__all__ = [
    "FactorizedResult",
    "MatrixResult",
    "factorized_gap",
    "matrix_gap",
    "solve_factorized",
    "solve_matrix_risk",
]


class FactorizedResult(NamedTuple):
    """Result of :func:`solve_factorized`.

    Attributes
    ----------
    w : ndarray of shape (n_features,)
    z : ndarray of shape (n_samples,)
    history : list of dict
        Rows ``epoch, iterations, seconds, primal, dual, gap`` (seconds exclude evaluation).
    steps : StepSizes
    lipschitz : float
    """

    w: np.ndarray
    z: np.ndarray
    history: list
    steps: StepSizes
    lipschitz: float


def _require_smooth(spec):
    # The reported gap uses the loss itself, so the dual perturbation of a non-smooth loss
    # (whose primal is a Moreau envelope) is not offered on these in-memory paths.
    if spec.dual_delta > 0:
        raise ValueError(
            "this DSPDC path needs a smooth loss (e.g. smooth_hinge, squared, logistic)"
        )


def _separable_conjugate_sum(v, l1, l2):
    # g^*(v) for g = l1 |w| + (l2/2) w^2, summed over coordinates.
    return float(np.sum(np.maximum(np.abs(v) - l1, 0.0) ** 2) / (2.0 * l2))


def _loss_sums(spec, scores, z, y):
    n = len(y)
    values = np.empty(n)
    conj = np.empty(n)
    scalar.loss_value_array(spec.loss_code, spec.loss_params, scores, y, values)
    scalar.loss_conjugate_array(spec.loss_code, spec.loss_params, z, y, conj)
    return float(values.mean()), float(conj.mean())


def factorized_gap(U, V, y, w, z, spec):
    """``(primal, dual, gap)`` of the (perturbed) problem on ``X = U V`` in O((n + p) rank)."""
    n = len(y)
    loss_mean, conj_mean = _loss_sums(spec, U @ (V @ w), z, y)
    primal = loss_mean + spec.l1 * np.abs(w).sum() + 0.5 * spec.l2 * (w @ w)
    dual = -conj_mean - _separable_conjugate_sum(-(V.T @ (U.T @ z)) / n, spec.l1, spec.l2)
    return primal, dual, primal - dual


def _factorized_lipschitz(U, V, batch_size, n_coords, rule, factor):
    n, p = U.shape[0], V.shape[1]
    if not isinstance(rule, str):
        return float(rule) * factor
    if rule == "heuristic":
        big_r2 = float(np.max(np.einsum("ij,jk,ik->i", U, V @ V.T, U)))
        return factor * batch_size * n_coords * big_r2 / p
    if rule != "safe":
        raise ValueError(f"lipschitz must be 'safe', 'heuristic' or a float, got {rule!r}")
    top = 0.0
    entry = 0.0
    # Row blocks of X = U V keep memory at O(block * p).
    for lo in range(0, n, 1024):
        sq = (U[lo : lo + 1024] @ V) ** 2
        k = min(n_coords, p)
        top = max(top, float(np.partition(sq, p - k, axis=1)[:, p - k :].sum(axis=1).max()))
        entry = max(entry, float(sq.max()))
    return factor * min(batch_size * top, batch_size * n_coords * entry)


class _EpochPlan(NamedTuple):
    """The sizes and stop rules of an in-memory run (:func:`_epochs`): ``n`` rows drawn
    ``batch_size`` at a time, ``n_coords`` of ``n_columns`` coordinate blocks a step."""

    n: int
    batch_size: int
    n_columns: int
    n_coords: int
    max_epochs: int
    eval_every: int
    tol: float
    random_state: object


def _epochs(
    plan, run, evaluate, *, time_limit=None, all_columns_unsampled=False, count_iterations=False
):
    """The epochs of an in-memory DSPDC run; returns the history rows.

    An epoch is ``n / batch_size`` iterations; its rows (and coordinate subsets) are drawn
    from the epoch's seed and handed to ``run(sample)`` as one
    :class:`~daskpd.kernels.dspdc.CoordinateSample`. Every ``eval_every`` epochs (and the
    last) ``evaluate()`` gives ``(primal, dual, gap)``; the run stops once the gap is below
    ``tol`` or the solver time (evaluation excluded) reaches ``time_limit``.

    Parameters
    ----------
    plan : _EpochPlan
    run, evaluate : callable
    time_limit : float or None, default=None
    all_columns_unsampled : bool, default=False
        With ``n_coords == n_columns``, pass no subsets (the kernel then updates every
        coordinate) instead of drawn permutations.
    count_iterations : bool, default=False
        Put the iterations so far in each history row.
    """
    import time

    n, batch_size, n_columns, n_coords = plan.n, plan.batch_size, plan.n_columns, plan.n_coords
    perm = np.arange(n_columns, dtype=np.int64)
    n_iter = max(1, int(round(n / batch_size)))
    history = []
    elapsed = 0.0
    root = np.random.SeedSequence(plan.random_state)
    for epoch in range(1, plan.max_epochs + 1):
        rng = np.random.default_rng(epoch_seed(root, epoch))
        start = time.perf_counter()
        rows = draw_rows(rng, n, n_iter, batch_size)
        if all_columns_unsampled and n_coords == n_columns:
            cols = np.empty(0, dtype=np.int64)
        else:
            cols = dspdc_kernels.draw_subsets(
                rng.random(n_iter * n_coords), n_columns, n_coords, perm
            )
        run(dspdc_kernels.CoordinateSample(rows, batch_size, cols, n_coords))
        elapsed += time.perf_counter() - start
        if epoch % plan.eval_every == 0 or epoch == plan.max_epochs:
            primal, dual, gap = evaluate()
            row = {"epoch": epoch}
            if count_iterations:
                row["iterations"] = epoch * n_iter
            row.update(seconds=elapsed, primal=primal, dual=dual, gap=gap)
            history.append(row)
            if not np.isfinite(gap):
                raise FloatingPointError(f"DSPDC diverged at epoch {epoch} (gap {gap})")
            if gap <= plan.tol or (time_limit is not None and elapsed >= time_limit):
                break
    return history


def solve_factorized(
    U, V, y, loss="smooth_hinge", regularizer="l2", alpha=1e-4, *, batch_size=1,
    n_coords=None, max_epochs=100, tol=1e-6, time_limit=None, random_state=0,
    lipschitz="safe", lipschitz_factor=1.0, theta_rule="distance", delta=None,
    tau=None, sigma=None, theta=None, eval_every=1,
):  # fmt: skip
    """DSPDC on factorized data ``X = U V`` (Algorithm 2), in memory.

    Parameters
    ----------
    U : ndarray of shape (n_samples, rank)
    V : ndarray of shape (rank, n_features)
    y : ndarray of shape (n_samples,)
    loss, regularizer, alpha
        As in :func:`daskpd.solve` (separable regularizers only).
    batch_size, n_coords : int
        ``m`` and ``q`` (``n_coords=None`` means all features: SPDC on ``U V``).
    max_epochs : int
        One epoch is ``n / batch_size`` iterations.
    tol : float
        Stop when the duality gap of the (perturbed) problem is below ``tol``.
    time_limit : float or None
        Seconds of solver time (evaluation excluded).
    random_state : int
    lipschitz, lipschitz_factor, theta_rule, delta, tau, sigma, theta
        As in :class:`DSPDCOptions`.
    eval_every : int
        Epochs between gap evaluations.

    Returns
    -------
    FactorizedResult
    """
    U = np.ascontiguousarray(U, dtype=np.float64)
    V = np.ascontiguousarray(V, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    n, rank = U.shape
    if V.shape[0] != rank or y.shape != (n,):
        raise ValueError(f"shapes do not match: U {U.shape}, V {V.shape}, y {y.shape}")
    p = V.shape[1]
    q = p if n_coords is None else int(n_coords)
    if not 1 <= q <= p or not 1 <= batch_size <= n:
        raise ValueError(f"need 1 <= n_coords <= {p} and 1 <= batch_size <= {n}")
    spec = problem_spec(ProblemArgs(loss, regularizer, alpha), delta)
    _require_smooth(spec)
    lip = _factorized_lipschitz(U, V, batch_size, q, lipschitz, lipschitz_factor)
    steps = dspdc_step_sizes(n, p, batch_size, q, lip, spec.lam, spec.gamma, theta_rule)
    steps = StepSizes(
        tau if tau is not None else steps.tau,
        sigma if sigma is not None else steps.sigma,
        theta if theta is not None else steps.theta,
    )
    w = np.zeros(p)
    z = np.zeros(n)
    u = np.zeros(rank)
    v = np.zeros(rank)
    vbar = np.zeros(rank)
    products = dspdc_kernels.FactorProducts(u, v, vbar)
    scalars = kernel_scalars(spec, steps, n)

    def run(sample):
        dspdc_kernels.dspdc_factorized(
            U, V, y, z, w, products, sample, spec.loss_code, spec.loss_params, scalars
        )

    def evaluate():
        # Re-synchronise the maintained products to bound floating-point drift.
        u[:] = U.T @ z
        v[:] = V @ w
        return factorized_gap(U, V, y, w, z, spec)

    history = _epochs(
        _EpochPlan(n, batch_size, p, q, max_epochs, eval_every, tol, random_state),
        run,
        evaluate,
        time_limit=time_limit,
        all_columns_unsampled=True,
        count_iterations=True,
    )
    return FactorizedResult(w, z, history, steps, lip)


# --------------------------------------------------------------------------------------------
# matrix risk minimization (Section 5.2), in memory
# --------------------------------------------------------------------------------------------
class MatrixResult(NamedTuple):
    """Result of :func:`solve_matrix_risk`: PSD blocks ``Xs`` (n_blocks, k, k), dual ``z``,
    history rows ``epoch, seconds, primal, dual, gap``, step sizes."""

    Xs: np.ndarray
    z: np.ndarray
    history: list
    steps: StepSizes


def _psd_part(M):
    mu, Q = np.linalg.eigh(0.5 * (M + M.T))
    return (Q * np.maximum(mu, 0.0)) @ Q.T


def matrix_gap(D, y, Xs, z, spec, lam):
    """``(primal, dual, gap)`` of matrix risk minimization (eq. (45)/(46))."""
    n = len(y)
    scores = np.einsum("ijab,jab->i", D, Xs)
    loss_mean, conj_mean = _loss_sums(spec, scores, z, y)
    primal = loss_mean + 0.5 * lam * float(np.sum(Xs * Xs))
    W = np.einsum("i,ijab->jab", z, D)
    dual = -conj_mean - sum(
        float(np.sum(_psd_part(-W[j] / n) ** 2)) / (2.0 * lam) for j in range(W.shape[0])
    )
    return primal, dual, primal - dual


def solve_matrix_risk(
    D, y, loss="smooth_hinge", alpha=1e-2, *, batch_size=1, n_coords=1, max_epochs=50,
    tol=1e-6, random_state=0, lipschitz="safe", lipschitz_factor=1.0, theta_rule="distance",
    eval_every=1,
):  # fmt: skip
    """Block DSPDC for ``min_{X_j PSD} (1/n) sum_i loss(sum_j <D_i^j, X_j>, y_i) + (alpha/2)
    sum_j ||X_j||_F^2`` (Section 5.2 of the paper).

    Parameters
    ----------
    D : ndarray of shape (n_samples, n_blocks, k, k)
        Data matrices (need not be symmetric; the prox symmetrises).
    y : ndarray of shape (n_samples,)
    loss : str or Loss
    alpha : float
        ``lambda`` (> 0).
    batch_size, n_coords : int
        ``m`` rows and ``q`` blocks per iteration.
    max_epochs, tol, random_state, lipschitz, lipschitz_factor, theta_rule, eval_every
        As in :func:`solve_factorized`; ``lipschitz="safe"`` uses the block bound
        ``min(m Lambda_{q,1}, m q max_ij ||D_i^j||_F^2)``.

    Returns
    -------
    MatrixResult
    """
    D = np.ascontiguousarray(D, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    n, n_blocks, k, _ = D.shape
    if not 1 <= n_coords <= n_blocks or not 1 <= batch_size <= n:
        raise ValueError(f"need 1 <= n_coords <= {n_blocks} and 1 <= batch_size <= {n}")
    spec = problem_spec(ProblemArgs(loss, "l2", alpha), None)
    _require_smooth(spec)
    norms = np.sum(D * D, axis=(2, 3))  # (n, n_blocks): ||D_i^j||_F^2
    if isinstance(lipschitz, str):
        if lipschitz == "heuristic":
            lip = batch_size * n_coords * float(norms.sum(axis=1).max()) / n_blocks
        elif lipschitz == "safe":
            top = float(np.sort(norms, axis=1)[:, n_blocks - n_coords :].sum(axis=1).max())
            lip = min(batch_size * top, batch_size * n_coords * float(norms.max()))
        else:
            raise ValueError(f"lipschitz must be 'safe', 'heuristic' or a float, got {lipschitz!r}")
        lip *= lipschitz_factor
    else:
        lip = float(lipschitz) * lipschitz_factor
    steps = dspdc_step_sizes(
        n, n_blocks, batch_size, n_coords, lip, spec.lam, spec.gamma, theta_rule
    )
    Xs = np.zeros((n_blocks, k, k))
    Xs_prev = np.zeros((n_blocks, k, k))
    S = np.zeros((n_blocks, k, k))
    z = np.zeros(n)
    # the kernel reads spec.l2 as lambda (the problem has no L1 term)
    scalars = kernel_scalars(spec, steps, n)

    def run(sample):
        dspdc_kernels.dspdc_matrix(
            D, y, z, Xs, Xs_prev, S, sample, spec.loss_code, spec.loss_params, scalars
        )

    def evaluate():
        S[:] = np.einsum("i,ijab->jab", z, D)
        return matrix_gap(D, y, Xs, z, spec, spec.l2)

    history = _epochs(
        _EpochPlan(n, batch_size, n_blocks, n_coords, max_epochs, eval_every, tol, random_state),
        run,
        evaluate,
    )
    return MatrixResult(Xs, z, history, steps)
