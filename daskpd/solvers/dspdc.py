"""DSPDC: doubly stochastic primal-dual coordinate method (Yu, Lin & Yang), on Dask and on
factorized or matrix data in memory.

Translation table (paper -> code), used in every docstring of this module:

==========================  =========================================
paper                       code
==========================  =========================================
``x`` (primal, ``p``)       ``w`` (``n_features``)
``y`` (dual, ``n``)         ``z`` (``n_samples``)
``b`` (labels)              ``y``
``lambda``                  ``alpha`` (times the strong convexity of R)
``m`` (dual sample size)    ``batch_size``
``q`` (primal sample size)  ``n_coords``
``Lambda`` (eq. (11))       ``lipschitz``
``A = U V``                 ``X`` or ``(U, V)``
``tau, sigma, theta``       ``tau, sigma, theta``
==========================  =========================================

Three entry points:

- :class:`DSPDCSolver` (``solver="dspdc"`` in :func:`daskpd.solve`): Algorithm 1 on explicit
  data, one epoch = one pass of ``n`` sampled rows as a chained graph over the row blocks
  (same shape as SPDC: the carry ``(w, w_prev, u)`` flows through the blocks, dual blocks
  stay on the workers). Rows are sampled within the current block (stratified, as for
  SPDC); the ``n_coords`` primal coordinates are sampled uniformly from all features.
- :func:`solve_factorized`: Algorithm 2 for ``X = U V`` in memory; the per-iteration cost
  is O(rank (m + q)), independent of ``n`` and ``p``. The factors are small by
  construction, and the method is sequential, so it runs as one numba loop.
- :func:`solve_matrix_risk`: the block version of Section 5.2 (PSD matrix blocks, one
  eigendecomposition per sampled block).

The paper's ``Lambda`` (a bound on ``max ||A_I^J||_2^2`` over ``m x q`` submatrices) sets the
step sizes. It is exposed as ``lipschitz``: ``"safe"`` (default) is the provable bound
``min(m Lambda_{q,1}, m q max A_ij^2)``; ``"heuristic"`` is the paper's practical suggestion
read as ``m q R^2 / p`` (the printed ``m q R^2 Lambda_{p,1} / p`` is dimensionally
inconsistent; see the digest), which can fall below the true constant; a float is used as
given. ``lipschitz_factor`` multiplies any of them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.kernels import dspdc as dspdc_kernels
from daskpd.kernels import scalar
from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers._capabilities import BUILTIN_LOSSES, Capabilities
from daskpd.solvers._driver import epoch_seed, register_solver
from daskpd.solvers.spdc import (
    Carry,
    ChainState,
    ProblemArgs,
    SPDCSolver,
    StepSizes,
    _block_csr,
    _check_common,
    block_weights,
    draw_rows,
    initial_dual,
    kernel_scalars,
    problem_spec,
    run_chain,
)

__all__ = [
    "DSPDCSolver",
    "FactorizedResult",
    "MatrixResult",
    "dspdc_step_sizes",
    "factorized_gap",
    "lipschitz_constant",
    "matrix_gap",
    "solve_factorized",
    "solve_matrix_risk",
]


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


# --------------------------------------------------------------------------------------------
# Lambda (the paper's scale constant)
# --------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------
# Dask solver (explicit data)
# --------------------------------------------------------------------------------------------
def _dspdc_block_task(carry, z_block, data, block, seed, n_iter, spec, steps, opts):
    indptr, indices, values, binary, labels = _block_csr(data, block)
    rng = np.random.default_rng(seed)
    m, q = opts["batch_size"], opts["n_coords"]
    d = int(data.shape[1])
    rows = draw_rows(rng, len(labels), n_iter, m)
    if q == d:
        cols = np.empty(0, dtype=np.int64)
    else:
        perm = np.arange(d, dtype=np.int64)
        cols = dspdc_kernels.draw_subsets(rng.random(n_iter * q), d, q, perm)
    w = carry.w.copy()
    w_prev = carry.w_prev.copy()
    u = carry.u.copy()
    z = np.array(z_block, dtype=np.float64, copy=True)
    weights = block_weights(data, block, opts["class_pair"], labels)
    done = dspdc_kernels.dspdc_rows(
        spdc_kernels.BlockRows(indptr, indices, values, binary, labels, weights),
        z,
        dspdc_kernels.CoordinateSample(rows, m, cols, q),
        dspdc_kernels.PrimalState(w, w_prev, u, np.zeros(d)),
        spec.loss_code,
        spec.loss_params,
        kernel_scalars(spec, steps, int(data.shape[0])),
    )
    return Carry(w, w_prev, u, carry.t + int(done)), z


@register_solver
class DSPDCSolver(SPDCSolver):
    """DSPDC (Algorithm 1) for the driver (``solver="dspdc"``) on explicit data.

    One epoch = ``n / batch_size`` iterations (one pass over the rows) as a chained graph.
    Options: see :class:`DSPDCSolver.Options`. The state (carry, per-block duals) has SPDC's
    shape, so ``iterate``, ``state_arrays`` and ``restore`` are SPDC's; ``restore`` calls this
    class's own :meth:`parameters`.
    """

    name = "dspdc"
    capabilities = Capabilities(
        losses=frozenset(BUILTIN_LOSSES),
        regularizers=frozenset({"l2", "l1", "elasticnet", "zero"}),
        regularizer_rule="a separable regularizer",
        notes="non-smooth losses and regularizers that are not strongly convex need the "
        "`delta` option; `solve_factorized` (outside `solve`) takes X = U V in memory",
    )

    @dataclasses.dataclass(frozen=True)
    class Options:
        """Options of DSPDC.

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

    def check(self, problem, data, options):
        """Raise ValueError for an unsupported problem or option, before any Dask work."""
        spec = _check_common(problem, data, options)[0]
        d = int(data.shape[1])
        q = d if options.n_coords is None else int(options.n_coords)
        if not 1 <= q <= d:
            raise ValueError(f"n_coords must be in [1, {d}], got {options.n_coords!r}")
        sizes = np.diff(np.asarray(data.row_block_bounds))
        if not 1 <= int(options.batch_size) <= sizes.min():
            raise ValueError(
                f"batch_size must be in [1, {sizes.min()}] (smallest row block), "
                f"got {options.batch_size!r}"
            )
        if options.theta_rule not in ("distance", "gap"):
            raise ValueError(f"theta_rule must be 'distance' or 'gap', got {options.theta_rule!r}")
        if isinstance(options.lipschitz, str) and options.lipschitz not in ("safe", "heuristic"):
            raise ValueError(
                f"lipschitz must be 'safe', 'heuristic' or a float, got {options.lipschitz!r}"
            )
        return spec

    def parameters(self, problem, data, options):
        """Return ``(spec, steps, opts, block_iters)``."""
        spec, _, _, pair = _check_common(problem, data, options)
        n, d = (int(v) for v in data.shape)
        m = int(options.batch_size)
        q = d if options.n_coords is None else int(options.n_coords)
        lip = lipschitz_constant(data, m, q, options.lipschitz, options.lipschitz_factor)
        steps = dspdc_step_sizes(n, d, m, q, lip, spec.lam, spec.gamma, options.theta_rule)
        steps = StepSizes(
            options.tau if options.tau is not None else steps.tau,
            options.sigma if options.sigma is not None else steps.sigma,
            options.theta if options.theta is not None else steps.theta,
        )
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        block_iters = tuple(max(1, int(round(s / m))) for s in np.diff(bounds))
        opts = {"batch_size": m, "n_coords": q, "lipschitz": lip, "class_pair": pair}
        return spec, steps, opts, block_iters

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Initial state: ``w = 0`` (or the warm start), ``z = 0`` (or the warm start)."""
        spec, steps, opts, block_iters = self.parameters(problem, data, options)
        d = int(data.shape[1])
        w0 = None if warm_start is None else getattr(warm_start, "w", None)
        z0 = None if warm_start is None else getattr(warm_start, "z", None)
        if z0 is not None and not isinstance(z0, np.ndarray):
            z0 = None
        w = np.zeros(d) if w0 is None else np.asarray(w0, dtype=np.float64).copy()
        z_blocks, u = initial_dual(data, client, z0)
        return ChainState(
            spec, steps, Carry(w, w.copy(), u, 0), tuple(z_blocks), block_iters,
            seed, 0, opts, data, client, problem=problem,
        )  # fmt: skip

    def run_epoch(self, state, epoch):
        """One pass over the rows as one Dask compute."""
        return run_chain(state, epoch, _dspdc_block_task)


# --------------------------------------------------------------------------------------------
# factorized data (Algorithm 2), in memory
# --------------------------------------------------------------------------------------------
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
        As in :class:`DSPDCSolver.Options`.
    eval_every : int
        Epochs between gap evaluations.

    Returns
    -------
    FactorizedResult
    """
    import time

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
    perm = np.arange(p, dtype=np.int64)
    n_iter = max(1, int(round(n / batch_size)))
    history = []
    elapsed = 0.0
    root = np.random.SeedSequence(random_state)
    for epoch in range(1, max_epochs + 1):
        rng = np.random.default_rng(epoch_seed(root, epoch))
        start = time.perf_counter()
        rows = draw_rows(rng, n, n_iter, batch_size)
        cols = (
            np.empty(0, dtype=np.int64)
            if q == p
            else dspdc_kernels.draw_subsets(rng.random(n_iter * q), p, q, perm)
        )
        dspdc_kernels.dspdc_factorized(
            U, V, y, z, w, products, dspdc_kernels.CoordinateSample(rows, batch_size, cols, q),
            spec.loss_code, spec.loss_params, scalars,
        )  # fmt: skip
        elapsed += time.perf_counter() - start
        if epoch % eval_every == 0 or epoch == max_epochs:
            # Re-synchronise the maintained products to bound floating-point drift.
            u[:] = U.T @ z
            v[:] = V @ w
            primal, dual, gap = factorized_gap(U, V, y, w, z, spec)
            history.append(
                {"epoch": epoch, "iterations": epoch * n_iter, "seconds": elapsed,
                 "primal": primal, "dual": dual, "gap": gap}
            )  # fmt: skip
            if not np.isfinite(gap):
                raise FloatingPointError(f"DSPDC diverged at epoch {epoch} (gap {gap})")
            if gap <= tol or (time_limit is not None and elapsed >= time_limit):
                break
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
    import time

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
    perm = np.arange(n_blocks, dtype=np.int64)
    n_iter = max(1, int(round(n / batch_size)))
    history = []
    elapsed = 0.0
    root = np.random.SeedSequence(random_state)
    for epoch in range(1, max_epochs + 1):
        rng = np.random.default_rng(epoch_seed(root, epoch))
        start = time.perf_counter()
        rows = draw_rows(rng, n, n_iter, batch_size)
        cols = dspdc_kernels.draw_subsets(rng.random(n_iter * n_coords), n_blocks, n_coords, perm)
        dspdc_kernels.dspdc_matrix(
            D, y, z, Xs, Xs_prev, S,
            dspdc_kernels.CoordinateSample(rows, batch_size, cols, n_coords),
            spec.loss_code, spec.loss_params, scalars,
        )  # fmt: skip
        elapsed += time.perf_counter() - start
        if epoch % eval_every == 0 or epoch == max_epochs:
            S[:] = np.einsum("i,ijab->jab", z, D)
            primal, dual, gap = matrix_gap(D, y, Xs, z, spec, spec.l2)
            history.append(
                {"epoch": epoch, "seconds": elapsed, "primal": primal, "dual": dual, "gap": gap}
            )
            if not np.isfinite(gap):
                raise FloatingPointError(f"DSPDC diverged at epoch {epoch} (gap {gap})")
            if gap <= tol:
                break
    return MatrixResult(Xs, z, history, steps)
