"""The batch baseline: accelerated proximal gradient (FISTA) over row blocks.

Full-gradient method for smooth losses with any regularizer that has a prox; it stands in for
the batch solver (BMRM) of the DSO paper's comparisons. One epoch is one map-reduce pass over
the row blocks (one Dask compute): every block returns its partial loss sums and partial
gradients ``X_b^T (c_b * loss'(X_b v, y_b))`` and a fixed binary tree adds them, so the sum
order, and hence every bit of the result, is independent of which worker ran which block.

Method. With ``f(w) = (1/n) sum_i c_i loss(x_i . w, y_i)`` (gradient Lipschitz constant
``L <= smoothness * lambda_max(X^T C X) / n``) and ``g = alpha * R``::

    x_{k+1} = prox_{g / L}(y_k - grad f(y_k) / L)
    y_{k+1} = x_{k+1} + beta_k (x_{k+1} - x_k)

with FISTA's ``beta_k = (t_k - 1) / t_{k+1}`` (Beck & Teboulle 2009), or, when ``g`` is
``mu``-strongly convex, ``beta = (1 - sqrt(q)) / (1 + sqrt(q))``, ``q = (mu / L) / (1 + mu / L)``
(Chambolle & Pock 2016, Alg. 5), plus the adaptive restart of O'Donoghue & Candes (2015):
momentum is reset when ``(y_k - x_{k+1}) . (x_{k+1} - x_k) > 0``.

``L`` starts from a power-iteration estimate and is checked by backtracking without extra
passes: each pass evaluates, besides the gradient at the next extrapolated point, the loss at
the pending candidate ``x_{k+1}``; when the sufficient-decrease condition
``f(x_{k+1}) <= f(y_k) + grad f(y_k) . (x_{k+1} - y_k) + L/2 |x_{k+1} - y_k|^2`` fails, the
candidate is rejected, ``L`` grows by ``backtrack_factor`` and the candidate is recomputed
(that pass is spent, which happens a handful of times at most).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.solvers._capabilities import BUILTIN_REGULARIZERS, Capabilities
from daskpd.solvers._driver import Iterate, register_solver

__all__ = ["BatchGradient", "BatchOptions"]


@dataclass(frozen=True)
class BatchOptions:
    """Options of the batch baseline.

    Parameters
    ----------
    power_iterations : int, default=10
        Passes of power iteration that estimate ``lambda_max(X^T C X)`` at start-up.
    lipschitz : float or None, default=None
        Known Lipschitz constant of ``grad f`` (skips the power iteration).
    backtrack_factor : float, default=2.0
        Growth of ``L`` when a candidate fails the sufficient-decrease test.
    restart : bool, default=True
        Adaptive momentum restart.
    """

    power_iterations: int = 10
    lipschitz: float | None = None
    backtrack_factor: float = 2.0
    restart: bool = True

    def __post_init__(self):
        if (
            isinstance(self.power_iterations, bool)
            or not isinstance(self.power_iterations, int | np.integer)
            or self.power_iterations < 1
        ):
            raise ValueError(
                f"power_iterations must be a positive integer, got {self.power_iterations!r}"
            )
        if self.lipschitz is not None and not (
            isinstance(self.lipschitz, int | float) and 0 < self.lipschitz < math.inf
        ):
            raise ValueError(f"lipschitz must be a finite number > 0, got {self.lipschitz!r}")
        if not (isinstance(self.backtrack_factor, int | float) and self.backtrack_factor > 1):
            raise ValueError(f"backtrack_factor must be > 1, got {self.backtrack_factor!r}")
        if not isinstance(self.restart, bool | np.bool_):
            raise ValueError(f"restart must be True or False, got {self.restart!r}")


@dataclass(frozen=True)
class _State:
    x: np.ndarray  # accepted iterate
    y: np.ndarray  # point of the last gradient
    f_y: float
    g_y: np.ndarray  # grad f(y)
    candidate: np.ndarray  # prox-gradient step from y, awaiting the decrease test
    t: float  # FISTA sequence
    lipschitz: float
    n_rejected: int
    class_weight: tuple | None = None
    seed: object = None
    problem: object = None
    data: object = None
    options: object = None


# --------------------------------------------------------------------------------------------
# block tasks (pure: read a block, return new arrays)


def _row_weights(class_weight, y, sample_weight):
    """``c_i = sample_weight_i * class_weight[y_i]``; ``class_weight`` is (negative, positive)."""
    weights = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, float)
    if class_weight is not None:
        negative, positive = class_weight
        weights = weights * np.where(y > 0, positive, negative)
    return weights


def _block_pass(data, i, loss, class_weight, points, gradient_rows):
    """Loss sums at every row of ``points`` and gradients at the rows in ``gradient_rows``."""
    X_block, y = data.block(i)
    start, stop = int(data.row_block_bounds[i]), int(data.row_block_bounds[i + 1])
    weights = _row_weights(class_weight, y, data.sample_weight_rows(start, stop))
    # One row per point, C-contiguous: the loss kernels then see the array layout they were
    # compiled (and cached) for.
    predictions = np.ascontiguousarray(
        np.asarray(X_block @ points.T, dtype=np.float64).reshape(y.shape[0], -1).T
    )
    values = np.empty(points.shape[0])
    grads = np.zeros((len(gradient_rows), points.shape[1]))
    for k in range(points.shape[0]):
        values[k] = float(weights @ np.asarray(loss.value(predictions[k], y)))
    for slot, k in enumerate(gradient_rows):
        residual = weights * np.asarray(loss.gradient(predictions[k], y))
        grads[slot] = np.asarray(X_block.T @ residual).ravel()
    return values, grads


def _block_power(data, i, class_weight, vector):
    X_block, y = data.block(i)
    start, stop = int(data.row_block_bounds[i]), int(data.row_block_bounds[i + 1])
    weights = _row_weights(class_weight, y, data.sample_weight_rows(start, stop))
    projected = np.asarray(X_block @ vector, dtype=np.float64).ravel()
    return (np.asarray(X_block.T @ (weights * projected)).ravel(), float(weights.max(initial=0)))


def _add_pass(a, b):
    return a[0] + b[0], a[1] + b[1]


def _add_power(a, b):
    return a[0] + b[0], max(a[1], b[1])


def _class_weight(problem, data):
    """The (negative, positive) class weights of the problem, resolved on ``data``, or None."""
    if getattr(problem, "class_weight", None) is None:
        return None
    # Problem resolves "balanced" from the label counts; reuse it so that the solver and the
    # evaluation weigh rows identically.
    negative, positive = problem._class_weight_pair(data)
    return float(negative), float(positive)


def _run_pass(problem, data, class_weight, points, gradient_rows):
    """One compute: (loss sums / n at each point, gradients / n at the chosen points)."""
    points = np.ascontiguousarray(points, dtype=np.float64)
    graph = TaskGraph("batch-pass")
    shared, data_ref = graph.data("points", points), graph.data("data", data)
    parts = [
        graph.task(i, _block_pass, data_ref, i, problem.loss, class_weight, shared,
                   tuple(gradient_rows))
        for i in range(data.n_row_blocks)
    ]  # fmt: skip
    ((values, grads),) = graph.compute([graph.tree("sum", _add_pass, parts)])
    n = float(data.n_samples)
    return values / n, grads / n


# --------------------------------------------------------------------------------------------
# the solver


@register_solver
class BatchGradient:
    """Accelerated proximal gradient over row blocks (registered as ``"batch"``).

    Needs a smooth loss (logistic, squared, squared hinge, smoothed hinge, Huber) and a
    regularizer with a prox (every regularizer of :mod:`daskpd.regularizers`).
    """

    name = "batch"
    capabilities = Capabilities(
        losses=frozenset({"smooth_hinge", "squared_hinge", "logistic", "squared", "huber"}),
        regularizers=frozenset(BUILTIN_REGULARIZERS),
        loss_rule="a smooth loss",
        regularizer_rule="a regularizer with a prox",
    )
    Options = BatchOptions

    def check(self, problem, data, options) -> None:
        """Reject non-smooth losses and empty data before any Dask work."""
        smoothness = float(getattr(problem.loss, "smoothness", math.inf))
        if not math.isfinite(smoothness):
            raise ValueError(
                f"solver 'batch' needs a smooth loss; {problem.loss.name!r} is not smooth "
                "(use 'smooth_hinge', 'squared_hinge', 'logistic', 'squared' or 'huber', or "
                "another solver)"
            )
        if data.n_samples < 1:
            raise ValueError("solver 'batch' got an empty dataset (0 rows)")
        if not callable(getattr(problem.regularizer, "prox", None)):
            raise ValueError(f"regularizer {problem.regularizer!r} has no prox")

    def _mu(self, problem) -> float:
        strong = float(getattr(problem.regularizer, "strong_convexity", 0.0) or 0.0)
        return float(problem.alpha) * strong

    def _lipschitz(self, problem, data, seed, options) -> float:
        if options.lipschitz is not None:
            return float(options.lipschitz)
        smoothness = float(problem.loss.smoothness)
        # The start vector has its own stream (spawn key 2**32 - 1, never an epoch's), so
        # the epochs' randomness is untouched.
        rng = np.random.default_rng(
            np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 2**32 - 1))
        )
        vector = rng.standard_normal(data.n_features)
        vector /= np.linalg.norm(vector) or 1.0
        class_weight = _class_weight(problem, data)
        estimate = 0.0
        for _ in range(options.power_iterations):
            graph = TaskGraph("batch-power")
            shared, data_ref = graph.data("vector", vector), graph.data("data", data)
            parts = [
                graph.task(i, _block_power, data_ref, i, class_weight, shared)
                for i in range(data.n_row_blocks)
            ]
            ((product, _),) = graph.compute([graph.tree("sum", _add_power, parts)])
            estimate = float(vector @ product) / data.n_samples
            norm = np.linalg.norm(product)
            if norm == 0:
                break
            vector = product / norm
        # Power iteration approaches lambda_max from below; the margin saves most rejected
        # candidates, and backtracking handles the rest.
        return max(1.1 * smoothness * estimate, 1e-12)

    def _step(self, problem, point, gradient, lipschitz):
        return problem.regularizer.prox(point - gradient / lipschitz, problem.alpha / lipschitz)

    def _beta(self, state_t, lipschitz, mu):
        if mu > 0:
            q = (mu / lipschitz) / (1.0 + mu / lipschitz)
            return (1.0 - math.sqrt(q)) / (1.0 + math.sqrt(q)), state_t
        t_next = (1.0 + math.sqrt(1.0 + 4.0 * state_t * state_t)) / 2.0
        return (state_t - 1.0) / t_next, t_next

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Estimate ``L``, evaluate at the start point, prepare the first candidate."""
        x = np.zeros(data.n_features) if warm_start is None else warm_start.w.copy()
        lipschitz = self._lipschitz(problem, data, seed, options)
        values, grads = _run_pass(problem, data, _class_weight(problem, data), x[None, :], (0,))
        f_y, g_y = float(values[0]), grads[0]
        return _State(
            x=x,
            y=x.copy(),
            f_y=f_y,
            g_y=g_y,
            candidate=self._step(problem, x, g_y, lipschitz),
            t=1.0,
            lipschitz=lipschitz,
            n_rejected=0,
            class_weight=_class_weight(problem, data),
            seed=seed,
            problem=problem,
            data=data,
            options=options,
        )

    def run_epoch(self, state, epoch):
        """One pass: test the candidate, take the step, extrapolate."""
        problem, data, options = state.problem, state.data, state.options
        mu = self._mu(problem)
        candidate = state.candidate
        beta, t_next = self._beta(state.t, state.lipschitz, mu)
        extrapolated = candidate + beta * (candidate - state.x)
        values, grads = _run_pass(
            problem, data, state.class_weight, np.stack([candidate, extrapolated]), (0, 1)
        )
        step = candidate - state.y
        bound = (
            state.f_y
            + float(state.g_y @ step)
            + 0.5 * state.lipschitz * float(step @ step)
            # Rounding slack: equality holds at convergence and must not trigger backtracking.
            + 1e-12 * max(1.0, abs(state.f_y))
        )
        if not values[0] <= bound:
            lipschitz = state.lipschitz * options.backtrack_factor
            return replace(
                state,
                candidate=self._step(problem, state.y, state.g_y, lipschitz),
                lipschitz=lipschitz,
                n_rejected=state.n_rejected + 1,
            )
        restart = options.restart and float((state.y - candidate) @ (candidate - state.x)) > 0
        if restart:
            y, f_y, g_y, t = candidate, float(values[0]), grads[0], 1.0
        else:
            y, f_y, g_y, t = extrapolated, float(values[1]), grads[1], t_next
        return replace(
            state,
            x=candidate,
            y=y,
            f_y=f_y,
            g_y=g_y,
            candidate=self._step(problem, y, g_y, state.lipschitz),
            t=t,
        )

    def iterate(self, state) -> Iterate:
        """The accepted iterate (no dual variable: the driver builds it from ``w``)."""
        return Iterate(w=state.x.copy())

    def state_arrays(self, state) -> dict:
        """Arrays that rebuild the state exactly."""
        return {
            "x": state.x,
            "y": state.y,
            "f_y": np.float64(state.f_y),
            "g_y": state.g_y,
            "candidate": state.candidate,
            "t": np.float64(state.t),
            "lipschitz": np.float64(state.lipschitz),
            "n_rejected": np.int64(state.n_rejected),
        }

    def restore(self, problem, data, arrays, *, seed, client, options):
        """Rebuild the state from :meth:`state_arrays`."""
        return _State(
            x=np.array(arrays["x"], dtype=np.float64),
            y=np.array(arrays["y"], dtype=np.float64),
            f_y=float(arrays["f_y"]),
            g_y=np.array(arrays["g_y"], dtype=np.float64),
            candidate=np.array(arrays["candidate"], dtype=np.float64),
            t=float(arrays["t"]),
            lipschitz=float(arrays["lipschitz"]),
            n_rejected=int(arrays["n_rejected"]),
            class_weight=_class_weight(problem, data),
            seed=seed,
            problem=problem,
            data=data,
            options=options,
        )
