"""What the stochastic primal-dual coordinate methods share (SPDC and DSPDC).

A problem in the kernels' scalars (:func:`problem_spec`, with the Section 3 perturbation of
SPDC for a loss that is not smooth or a regularizer that is not strongly convex), the step
sizes' container, the rows a block task draws (:func:`draw_rows`), the row weights, and the
solver class whose state is the chained pass's (:class:`CoordinateSolver`: its start,
iterate, certificate, checkpoint and restore; a method adds its options, step sizes and block
task).

Translation (paper -> code): ``x`` -> ``w``, ``y`` -> ``z``, ``b`` -> ``y``, ``lambda`` ->
``alpha`` (times the strong convexity of R), rows ``a_i`` of ``A`` -> rows of ``X``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from daskpd.kernels import scalar
from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers.common.chain import (
    Carry,
    ChainState,
    carry_of,
    carry_point,
    gather_dual,
    initial_dual,
)
from daskpd.solvers.driver.types import BUILTIN_LOSSES, Capabilities, Iterate, Solver

__all__ = [
    "CAPABILITIES",
    "CoordinateSolver",
    "ProblemArgs",
    "ProblemSpec",
    "StepSizes",
    "block_weights",
    "check_common",
    "draw_rows",
    "kernel_scalars",
    "problem_spec",
    "row_weight_info",
    "with_overrides",
]


#: What SPDC and DSPDC support (every loss, through the Section 3 perturbation when it is not
#: smooth; a separable regularizer, perturbed when it is not strongly convex).
CAPABILITIES = Capabilities(
    losses=frozenset(BUILTIN_LOSSES),
    regularizers=frozenset({"l2", "l1", "elasticnet", "zero"}),
    regularizer_rule="a separable regularizer",
    notes="non-smooth losses and regularizers that are not strongly convex need the `delta` option",
)


class StepSizes(NamedTuple):
    """Primal step ``tau``, dual step ``sigma`` and extrapolation ``theta``."""

    tau: float
    sigma: float
    theta: float


def with_overrides(steps, options):
    """``steps`` with the options' ``tau``, ``sigma`` and ``theta`` where they are given."""
    return StepSizes(
        options.tau if options.tau is not None else steps.tau,
        options.sigma if options.sigma is not None else steps.sigma,
        options.theta if options.theta is not None else steps.theta,
    )


class ProblemArgs(NamedTuple):
    """Loss, regularizer and ``alpha`` for :func:`problem_spec` (a subset of ``Problem``)."""

    loss: Any
    regularizer: Any
    alpha: float


class ProblemSpec(NamedTuple):
    """A problem as the kernels see it (after the Section 3 perturbation)."""

    loss_code: int
    loss_params: np.ndarray
    gamma: float  # strong convexity of the (perturbed) conjugate loss
    dual_delta: float  # perturbation added to phi^* (0 for smooth losses)
    l1: float
    l2: float  # includes the primal perturbation
    lam: float  # strong convexity of the (perturbed) regularizer


def _objects(problem):
    from daskpd.losses import get_loss
    from daskpd.regularizers import get_regularizer

    return get_loss(problem.loss), get_regularizer(problem.regularizer)


def problem_spec(problem, delta=None):
    """Translate a :class:`daskpd.problem.Problem` into the kernels' scalars.

    Parameters
    ----------
    problem : Problem
        Loss, separable regularizer and ``alpha``.
    delta : float or None
        Section 3 perturbation: added as ``(delta/2) beta^2`` to the conjugate of a
        non-smooth loss and as ``(delta/2) ||w||^2`` to a regularizer that is not strongly
        convex. Required exactly when one of the two is needed.

    Returns
    -------
    ProblemSpec

    Raises
    ------
    ValueError
        For a non-separable regularizer, a loss without scalar code, a missing ``delta`` or
        a non-positive ``alpha``.
    """
    loss, reg = _objects(problem)
    alpha = float(problem.alpha)
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be finite and >= 0, got {alpha!r}")
    if loss.code < 0:
        raise ValueError(f"loss {loss.name!r} has no scalar code (its conjugate's prox)")
    if reg.code < 0 or not getattr(reg, "separable", True):
        raise ValueError(
            f"regularizer {reg.name!r} is not of the separable form l1 |w| + (l2 / 2) w^2"
        )
    ratio = float(reg.params[0]) if reg.code == scalar.ELASTIC_NET else 0.0
    l1 = {scalar.L2: 0.0, scalar.L1: alpha, scalar.ELASTIC_NET: alpha * ratio, scalar.ZERO: 0.0}[
        reg.code
    ]
    l2 = {
        scalar.L2: alpha,
        scalar.L1: 0.0,
        scalar.ELASTIC_NET: alpha * (1 - ratio),
        scalar.ZERO: 0,
    }[reg.code]
    smooth = float(loss.smoothness)
    needs_dual = not np.isfinite(smooth) or smooth <= 0
    needs_primal = l2 <= 0
    if delta is not None and not (np.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be finite and > 0, got {delta!r}")
    if (needs_dual or needs_primal) and delta is None:
        what = []
        if needs_dual:
            what.append(f"loss {loss.name!r} is not smooth")
        if needs_primal:
            what.append(f"regularizer {reg.name!r} with alpha={alpha} is not strongly convex")
        raise ValueError(
            " and ".join(what) + "; pass delta=<float> (Section 3 perturbation of SPDC: the "
            "solution is then within O(delta) of the original optimum)"
        )
    gamma = float(delta) if needs_dual else 1.0 / smooth
    dual_delta = float(delta) if needs_dual else 0.0
    if needs_primal:
        l2 = l2 + float(delta)
    return ProblemSpec(
        int(loss.code), np.asarray(loss.params, dtype=np.float64), gamma, dual_delta, l1, l2, l2
    )


def draw_rows(rng, n_rows, n_iter, batch_size, probs=None, shuffle=False):
    """Draw the row sequence of one block: ``batch_size`` distinct rows per iteration.

    Uniform (``probs`` None): the paper's partition sampler -- the rows are split at random
    into ``batch_size`` groups and each iteration takes one row uniformly from each group, so
    each row is in the batch with probability ``batch_size / n_rows`` (with ``batch_size = 1``
    this is i.i.d. uniform sampling). Weighted: i.i.d. draws with probabilities ``probs``
    (batch size 1 only). Shuffled (``shuffle``): the rows in a random permutation, taken
    ``batch_size`` at a time, so an epoch visits every row once (sampling without
    replacement). When ``n_iter * batch_size`` exceeds ``n_rows`` (the rounding of a block's
    iterations to whole batches) the sequence goes on into a second permutation, and a batch
    across the seam can hold a row twice: the kernel then takes its two steps in turn.

    Returns
    -------
    ndarray of int64, shape (n_iter * batch_size,)
    """
    if shuffle:
        total = n_iter * batch_size
        parts = [rng.permutation(n_rows) for _ in range(-(-total // n_rows))]
        return np.concatenate(parts)[:total].astype(np.int64)
    if probs is not None:
        return rng.choice(n_rows, size=n_iter, p=probs).astype(np.int64)
    if batch_size == 1:
        return rng.integers(0, n_rows, size=n_iter, dtype=np.int64)
    groups = np.array_split(rng.permutation(n_rows), batch_size)
    out = np.empty((n_iter, batch_size), dtype=np.int64)
    for g, members in enumerate(groups):
        out[:, g] = members[rng.integers(0, len(members), size=n_iter)]
    return out.ravel()


def row_weight_info(problem, data):
    """``(class_pair, max_weight)`` of the row weights ``c_i = sample_weight_i * class_weight``.

    ``class_pair`` is ``(c_negative, c_positive)`` or None; ``max_weight`` is 1 without weights.
    """
    pair = problem._class_weight_pair(data) if getattr(problem, "class_weight", None) else None
    max_weight = 1.0
    if getattr(data, "has_sample_weight", False):
        weights = np.asarray(data.sample_weight_rows(0, int(data.shape[0])), dtype=np.float64)
        max_weight = float(weights.max()) if weights.size else 0.0
    if pair is not None:
        max_weight *= max(float(pair[0]), float(pair[1]))
    if not max_weight > 0:
        raise ValueError("every row weight (sample_weight * class_weight) is 0")
    return pair, max_weight


def block_weights(data, block, pair, labels):
    """Row weights of one row block, or an empty array when all are 1."""
    lo, hi = (int(v) for v in np.asarray(data.row_block_bounds)[block : block + 2])
    weights = data.sample_weight_rows(lo, hi) if getattr(data, "has_sample_weight", False) else None
    if pair is not None:
        per_class = np.where(labels > 0, float(pair[1]), float(pair[0]))
        weights = per_class if weights is None else np.asarray(weights) * per_class
    if weights is None:
        return np.empty(0)
    return np.ascontiguousarray(weights, dtype=np.float64)


def kernel_scalars(spec, steps, n_total):
    """The kernels' scalar array (:func:`daskpd.kernels.spdc.step_scalars`) of a problem.

    Parameters
    ----------
    spec : ProblemSpec
    steps : StepSizes
    n_total : int
        Rows of the whole data set.

    Returns
    -------
    ndarray of shape (daskpd.kernels.spdc.N_SCALARS,)
    """
    return spdc_kernels.step_scalars(
        steps.tau, steps.sigma, steps.theta, spec.l1, spec.l2, spec.dual_delta, n_total
    )


def check_common(problem, data, options):
    """``(spec, n_samples, row_norms, class_pair)`` of a run, or ValueError: the checks SPDC
    and DSPDC share (the problem's translation, the row weights, a row that is not zero)."""
    spec = problem_spec(problem, options.delta)
    pair, max_weight = row_weight_info(problem, data)
    if max_weight != 1.0 and spec.dual_delta == 0.0:
        # phi_i = c_i loss is (c_i / gamma_loss)-smooth: the conjugates are gamma / max c convex.
        spec = spec._replace(gamma=spec.gamma / max_weight)
    n = int(data.shape[0])
    norms = np.sqrt(np.maximum(np.asarray(data.row_norm_sq, dtype=np.float64), 0.0))
    if not np.any(norms > 0):
        raise ValueError("every row of X is zero; the steps need max row norm > 0")
    return spec, n, norms, pair


class CoordinateSolver(Solver):
    """The driver's side of SPDC and DSPDC: a chained-pass state, started, read and saved.

    A subclass sets ``name``, ``Options``, ``capabilities`` and implements ``check``,
    :meth:`parameters` and ``run_epoch``; :meth:`run_resources` adds what its block tasks
    need from the client (SPDC: threads and a shared-memory carry).
    """

    #: The certificate is an evaluation pass (the margins; ``w`` and ``X^T z`` stay where
    #: the chain left them): the driver takes it at the epochs its evaluation cadence picks.
    has_certificate = True
    certificate_reads_data = True

    def parameters(self, problem, data, options):
        """Return ``(spec, steps, opts, block_iters)`` for this problem, data and options."""
        raise NotImplementedError

    def run_resources(self, opts, options, client):
        """What the block tasks need from the run's client, added to ``opts``; returns the
        run's shared-memory files or None (the default: nothing)."""
        return None

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """The initial state: ``w = 0`` and ``z = 0``, or the warm start's."""
        spec, steps, opts, block_iters = self.parameters(problem, data, options)
        d = int(data.shape[1])
        w0 = None if warm_start is None else getattr(warm_start, "w", None)
        z0 = None if warm_start is None else getattr(warm_start, "z", None)
        if z0 is not None and not isinstance(z0, np.ndarray):
            z0 = None
        w = np.zeros(d) if w0 is None else np.asarray(w0, dtype=np.float64).copy()
        z_blocks, u = initial_dual(data, client, z0)
        shared = self.run_resources(opts, options, client)
        return ChainState(
            spec, steps, Carry(w, w.copy(), u, 0), tuple(z_blocks), block_iters,
            seed, 0, opts, data, client, problem=problem, shared=shared,
        )  # fmt: skip

    def iterate(self, state):
        """The current ``(w, z)``; ``z`` stays per row block (``z_bounds``).

        ``X^T z = n u`` comes along: the chain adds every change of ``z`` into ``u``, so the
        evaluation need not recompute it from the rows. On a cluster only ``w`` is gathered
        and ``xtz`` is a future on the carry's worker.
        """
        bounds = np.asarray(state.data.row_block_bounds, dtype=np.int64)
        w, xtz = carry_point(state)
        # the client's own copy (the carry's w is updated in place by the next epoch)
        w = np.array(w.result() if hasattr(w, "key") else w, dtype=np.float64)
        return Iterate(
            w=w, z=list(state.z_blocks), z_bounds=bounds, w_avg=None, z_avg=None, xtz=xtz
        )

    def certificate(self, state):
        """``(primal, dual)`` of :meth:`iterate`'s point, evaluated where the state is.

        The evaluation reads ``w`` and ``X^T z = n u`` from the last epoch's carry on its
        worker and the dual blocks on theirs: the client receives a few numbers, where
        :meth:`iterate` gathers ``n_features`` floats three times and an evaluation from the
        client sends ``w`` back.

        Returns
        -------
        tuple of float or None
            None when the state has no problem (built by hand) or at epoch 0.
        """
        if state.problem is None or state.epoch == 0:
            return None
        w, xtz = carry_point(state)
        evaluation = state.problem.evaluate(
            w, state.data, z=list(state.z_blocks), xtz=xtz, client=state.client,
            z_bounds=np.asarray(state.data.row_block_bounds, dtype=np.int64),
        )  # fmt: skip
        return evaluation.primal, evaluation.dual

    def state_arrays(self, state):
        """Arrays that resume the run exactly."""
        carry = carry_of(state)
        return {
            "w": carry.w,
            "w_prev": carry.w_prev,
            "u": carry.u,
            "t": np.array(carry.t, dtype=np.int64),
            "z": np.concatenate(gather_dual(state)),
            "epoch": np.array(state.epoch, dtype=np.int64),
        }

    def restore(self, problem, data, arrays, *, seed, client, options):
        """Rebuild a state saved by :meth:`state_arrays`."""
        spec, steps, opts, block_iters = self.parameters(problem, data, options)
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        z = np.asarray(arrays["z"], dtype=np.float64)
        blocks = [z[bounds[b] : bounds[b + 1]].copy() for b in range(len(bounds) - 1)]
        if client is not None:
            blocks = client.scatter(blocks)
        carry = Carry(
            np.asarray(arrays["w"], dtype=np.float64).copy(),
            np.asarray(arrays["w_prev"], dtype=np.float64).copy(),
            np.asarray(arrays["u"], dtype=np.float64).copy(),
            int(np.asarray(arrays["t"])),
        )
        shared = self.run_resources(opts, options, client)
        return ChainState(
            spec, steps, carry, tuple(blocks), block_iters,
            seed, int(np.asarray(arrays["epoch"])),
            opts, data, client, problem=problem, shared=shared,
        )  # fmt: skip

    def close(self, state):
        """Remove the run's shared-memory files on every machine, if it has any."""
        if getattr(state, "shared", None) is not None:
            state.shared.close()
