"""The batch baseline's solver: the :class:`Batch` class that the driver runs (``"batch"``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.solvers.batch._options import BatchOptions
from daskpd.solvers.batch._tasks import _add_power, _block_power, _class_weight, _run_pass
from daskpd.solvers.driver.registry import register_solver
from daskpd.solvers.driver.types import BUILTIN_REGULARIZERS, Capabilities, Iterate, Solver

__all__ = ["Batch"]


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


@register_solver
class Batch(Solver):
    """Accelerated proximal gradient over row blocks (registered as ``"batch"``).

    Needs a smooth loss and a regularizer with a prox (its ``capabilities`` name them).
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
