"""The shared solver driver: protocol, options, registry, and the training loop.

Every method (DSO, SPDC, DSPDC, GSFW, Pdprox, the batch baseline) is a class that follows the
:class:`Solver` protocol below and registers itself under a name with :func:`register_solver`.
:func:`solve` owns everything around a run: the choice of Dask client, the loop over epochs,
evaluation of the duality gap (through :meth:`daskpd.problem.Problem.evaluate`), test metrics,
history, callbacks, stop rules, divergence detection, checkpoints and resume, and recovery
after a lost worker.

Solver protocol
---------------
A solver is a class with a ``name`` and an ``Options`` frozen dataclass, and these methods::

    check(problem, data, options) -> None
        Raise ValueError (naming the parameter and its value) for anything the method cannot
        do with this problem and data, before any Dask work.
    init(problem, data, *, seed, client, options, warm_start=None) -> state
        Build the state of epoch 0. ``seed`` is the root ``np.random.SeedSequence`` of the run;
        keep it in the state and draw the randomness of epoch ``e`` from
        ``epoch_seed(seed, e)`` (and per block from ``block_seeds(epoch_seed(seed, e), n)``),
        so that a run is a function of (seed, epoch) only and resumes bit for bit.
        ``warm_start`` is ``None`` or an :class:`Iterate` (``w`` ndarray, ``z`` ndarray or
        ``None``). ``client`` is a ``distributed.Client`` or ``None`` (in-process: use plain
        ``dask.compute``, which then runs on the threaded or configured scheduler).
    run_epoch(state, epoch) -> state
        One epoch (epoch = 1, 2, ...), ONE Dask compute or one wave of futures. Tasks are
        pure: they copy what they mutate, so a retried task gives the same bits. The one
        exception is a block that a single task reads, updated in place only after
        everything in the task that can fail (DSO's ``w`` blocks); the state given to such
        a ``run_epoch`` is spent, and the driver uses only the state it returns.
    iterate(state) -> Iterate
        The current answer: ``w`` (and ``w_avg``) as ndarray (n_features,); ``z`` an ndarray
        (n_samples,), or a list of per-range arrays / futures with ``z_bounds``, or ``None``
        (then the driver's evaluation builds the dual point from ``w``).
    state_arrays(state) -> dict[str, np.ndarray]
        Everything needed to resume exactly (w, z, accumulators, step counters as 0-d
        arrays, ...). Written to the checkpoint as zarr arrays.
    restore(problem, data, arrays, *, seed, client, options) -> state
        Inverse of ``state_arrays``: the state after the checkpointed epoch. ``seed`` is the
        same root SeedSequence that ``init`` received.
    close(state) -> None   (optional)
        Release what the run holds outside Dask (DSO: its shared-memory files). Called
        once when the run ends, and on a state given up for a replay after a lost worker.
    certificate(state) -> (primal, dual) or None   (optional)
        The exact primal and dual of the point :meth:`iterate` would return, when the
        epoch's own work produced them (the dual solver's pass sees every margin) and
        reading them costs a few numbers, not a pass or a gather of ``w``. The driver asks
        for it after every epoch that the ``eval_every`` cadence skips, so that a run stops
        by ``tol`` at the first certified epoch and the history has a row per epoch.

The solver never prints, never evaluates the objective for the driver's sake, and never
calls ``compute`` inside an inner loop.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import json
import math
import os
import pkgutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from daskpd.checkpoint import options_to_dict

__all__ = [
    "DivergenceError",
    "EpochInfo",
    "Iterate",
    "SolveResult",
    "Solver",
    "TrainingFailed",
    "available_solvers",
    "block_seeds",
    "epoch_seed",
    "get_solver",
    "make_options",
    "register_solver",
    "solve",
]


# --------------------------------------------------------------------------------------------
# protocol objects


@dataclass(frozen=True)
class Iterate:
    """The current answer of a solver.

    Parameters
    ----------
    w : ndarray of shape (n_features,)
        Primal iterate (the one the solver reports as its answer).
    z : ndarray of shape (n_samples,), list, or None
        Dual iterate; a list of per-range arrays or Dask futures when ``z_bounds`` is given,
        or ``None`` when the solver keeps no dual variable.
    z_bounds : ndarray of shape (n_ranges + 1,) or None
        int64 row bounds of the ranges of a list-valued ``z``.
    w_avg : ndarray of shape (n_features,) or None
        Averaged primal iterate, when the method keeps one.
    z_avg : ndarray, list, or None
        Averaged dual iterate, when the method keeps one (same layout as ``z``).
    primal, dual : float or None
        ``P(w)`` and ``D(z)``, when the solver computed them exactly on the way (CoCoA's
        pass); with both given the driver does not evaluate them again.
    """

    w: np.ndarray
    z: Any = None
    z_bounds: np.ndarray | None = None
    w_avg: np.ndarray | None = None
    z_avg: Any = None
    primal: float | None = None
    dual: float | None = None


@runtime_checkable
class Solver(Protocol):
    """What a method implements to run under :func:`solve` (see the module docstring)."""

    name: str
    Options: type

    def check(self, problem, data, options) -> None:
        """Raise ``ValueError`` for an unsupported problem, data or options."""

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Return the state of epoch 0."""

    def run_epoch(self, state, epoch):
        """Return the state after one more epoch (one Dask compute)."""

    def iterate(self, state) -> Iterate:
        """Return the current :class:`Iterate`."""

    def state_arrays(self, state) -> dict:
        """Return the arrays from which :meth:`restore` rebuilds ``state`` exactly."""

    def restore(self, problem, data, arrays, *, seed, client, options):
        """Rebuild the state saved by :meth:`state_arrays`."""


@dataclass(frozen=True)
class SolveResult:
    """The outcome of :func:`solve`.

    Attributes
    ----------
    w : ndarray of shape (n_features,)
        Primal solution (the last evaluated iterate).
    z : ndarray of shape (n_samples,), list, or None
        Dual iterate as the solver holds it (may be a list of distributed handles).
    w_avg : ndarray of shape (n_features,) or None
        Averaged primal iterate, when the method keeps one.
    history : tuple of dict
        One row per evaluation: ``epoch``, ``seconds`` (training time so far: the
        solver's initialization and its epochs, evaluation excluded), ``primal``, ``dual``,
        ``gap``, test metrics (``test_auprc``, ...), ``wall_seconds`` (wall time so far, this
        evaluation included: everything :func:`solve` did after the cluster it started, if
        any, was up) and ``eval_seconds`` (the part of it spent in evaluations). All three
        clocks continue across a resume. A solver with a certificate of its own (cocoa) also
        has a row for each epoch between evaluations, from that certificate:
        ``certificate_only=True``, the same keys but no test metrics.
    n_epochs : int
        Epochs run in total (including those before a resume).
    gap : float
        Duality gap of ``w`` at the last evaluation.
    converged : bool
        Whether ``gap <= tol``.
    stop_reason : str
        ``"tol"``, ``"max_epochs"``, ``"time_limit"`` or ``"callback"``.
    solver : str
        Registered name of the method.
    options : Options dataclass
        The solver's options.
    objective : dict
        Description of the problem: ``loss``, ``loss_params``, ``regularizer``,
        ``regularizer_params``, ``alpha``, ``class_weight``, ``n_features``, ``task``.
    seed_entropy : int
        Entropy of the root ``SeedSequence`` (reproduces the run, also when
        ``random_state=None``).
    recoveries : int
        Times an epoch was replayed from the last checkpoint (or from the start) because a
        worker and data that Dask could not recompute were lost.
    timings : dict of str to float
        Where the seconds of this call went: ``wall`` (all of it, from the moment the
        cluster :func:`solve` started, if any, was up), ``init`` (the solver's
        initialization, or its restore from a checkpoint on resume and after a lost worker),
        ``epochs``, ``evaluation`` (gap and test metrics) and ``checkpoint`` (writing
        checkpoints); the rest of ``wall`` is callbacks and the driver's own work. A resumed
        run counts only this call (the history's clocks count the whole run). Empty for a
        model read by :func:`load_model`.
    """

    w: np.ndarray
    z: Any
    w_avg: np.ndarray | None
    history: tuple
    n_epochs: int
    gap: float
    converged: bool
    stop_reason: str
    solver: str
    options: Any
    objective: dict = field(default_factory=dict)
    seed_entropy: int = 0
    recoveries: int = 0
    timings: dict = field(default_factory=dict)

    @property
    def primal(self) -> float:
        """Primal objective at the last evaluation."""
        return float(self.history[-1]["primal"]) if self.history else math.nan

    @property
    def dual(self) -> float:
        """Dual objective at the last evaluation."""
        return float(self.history[-1]["dual"]) if self.history else math.nan

    def decision_function(self, data, *, client=None) -> np.ndarray:
        """Return ``X @ w`` for every row of ``data`` (one Dask compute).

        Parameters
        ----------
        data : Dataset, MemoryDataset or (X, y) pair
            Rows to score; ``n_features`` must match ``w``.
        client : distributed.Client, optional
            Where to run; default: in-process for in-memory data, the active client otherwise.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
        """
        data = _as_data(data, name="data")
        _check_n_features(data, self.w.shape[0], "data")
        return score_rows(self.w, data, client=client)

    def save(self, path, *, overwrite=False):
        """Save to a zarr group (see :func:`daskpd.checkpoint.save_model`)."""
        from daskpd.checkpoint import save_model

        return save_model(self, path, overwrite=overwrite)


def load_model(path) -> SolveResult:
    """Load a model saved by :meth:`SolveResult.save` (:func:`daskpd.checkpoint.save_model`).

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    SolveResult
        ``options`` is the solver's ``Options`` dataclass when that solver is registered,
        else a dict.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When ``path`` is not a daskpd model.
    CorruptStoreError
        When an array is missing, unreadable or fails its checksum (a ``ValueError``).
    """
    from daskpd.checkpoint import read_model

    attrs, read = read_model(path)
    options = json.loads(attrs["options"])
    try:
        solver = get_solver(attrs["solver"])
        options = make_options(
            solver, {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
        )
    except ValueError:
        pass
    return SolveResult(
        w=read("w"),
        z=read("z"),
        w_avg=read("w_avg"),
        history=tuple(json.loads(attrs["history"])),
        n_epochs=int(attrs["n_epochs"]),
        gap=float(json.loads(attrs["gap"])),
        converged=bool(attrs["converged"]),
        stop_reason=attrs["stop_reason"],
        solver=attrs["solver"],
        options=options,
        objective=json.loads(attrs["objective"]),
        seed_entropy=int(attrs["seed_entropy"]),
    )


@dataclass(frozen=True)
class EpochInfo:
    """What a callback sees after each epoch.

    Attributes
    ----------
    epoch : int
        Epoch just finished (1, 2, ...).
    max_epochs : int
        Epoch budget of the run.
    seconds : float
        Training time so far (the solver's initialization and its epochs; evaluation
        excluded).
    wall_seconds : float
        Wall time so far (evaluation, checkpoints and data reads included; the start of a
        cluster that :func:`solve` started excluded).
    row : dict or None
        History row of this epoch, or ``None`` when this epoch was not evaluated.
    history : tuple of dict
        All history rows so far.
    iterate : Iterate or None
        The solver's iterate, when this epoch was evaluated (:meth:`current_iterate`
        fetches it otherwise).
    solver : str
        Name of the method.

    Notes
    -----
    After a replay (a lost worker took data Dask could not recompute) the replayed epochs are
    reported again, with the same numbers.
    """

    epoch: int
    max_epochs: int
    seconds: float
    wall_seconds: float
    row: dict | None
    history: tuple
    iterate: Iterate | None
    solver: str
    fetch: Any = field(default=None, repr=False, compare=False)

    def current_iterate(self) -> Iterate:
        """The iterate after this epoch, gathered now if the epoch was not evaluated.

        Valid during the callback (the solver's state moves on with the next epoch).

        Returns
        -------
        Iterate
        """
        if self.iterate is None and self.fetch is not None:
            # Frozen for the callbacks; the fetched iterate is a cache of the same epoch.
            object.__setattr__(self, "iterate", self.fetch())
        return self.iterate


class DivergenceError(FloatingPointError):
    """Training produced NaN/inf iterates or an exploding objective."""


class TrainingFailed(RuntimeError):
    """An epoch failed repeatedly (for example every retry after lost workers)."""


# --------------------------------------------------------------------------------------------
# randomness


def epoch_seed(seed: np.random.SeedSequence, epoch: int) -> np.random.SeedSequence:
    """Return the ``SeedSequence`` of one epoch.

    It is the ``epoch``-th child that ``seed.spawn`` would return on a fresh ``seed``
    (epoch 1 is child 0), computed without touching ``seed``'s spawn counter, so the
    randomness of an epoch depends only on the root entropy and the epoch number (which is
    what makes a resumed run equal an uninterrupted one).

    Parameters
    ----------
    seed : numpy.random.SeedSequence
        Root seed of the run.
    epoch : int
        Epoch number, >= 1.

    Returns
    -------
    numpy.random.SeedSequence
    """
    if epoch < 1:
        raise ValueError(f"epoch must be >= 1, got {epoch}")
    return np.random.SeedSequence(
        seed.entropy, spawn_key=tuple(seed.spawn_key) + (epoch - 1,), pool_size=seed.pool_size
    )


def block_seeds(seed: np.random.SeedSequence, n_blocks: int) -> list:
    """Return ``n_blocks`` child seeds of ``seed`` (child b for block b), without spawning.

    Parameters
    ----------
    seed : numpy.random.SeedSequence
        Usually an :func:`epoch_seed`.
    n_blocks : int
        Number of blocks (or tiles).

    Returns
    -------
    list of numpy.random.SeedSequence
    """
    return [
        np.random.SeedSequence(
            seed.entropy, spawn_key=tuple(seed.spawn_key) + (b,), pool_size=seed.pool_size
        )
        for b in range(int(n_blocks))
    ]


def _root_seed(random_state) -> np.random.SeedSequence:
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.Generator | np.random.RandomState):
        raise ValueError(
            "random_state must be an int, None or a numpy.random.SeedSequence, not a "
            f"{type(random_state).__name__} (a generator has no reproducible entropy to "
            "checkpoint)"
        )
    if isinstance(random_state, bool) or not isinstance(random_state, int | np.integer):
        raise ValueError(
            f"random_state must be an int, None or a SeedSequence, got {random_state!r}"
        )
    if random_state < 0:
        raise ValueError(f"random_state must be >= 0, got {random_state}")
    return np.random.SeedSequence(int(random_state))


# --------------------------------------------------------------------------------------------
# registry and options

_REGISTRY: dict[str, Any] = {}


def register_solver(solver=None, *, name: str | None = None):
    """Register a solver class (or instance) under its ``name``.

    Usable as a decorator (``@register_solver``) or a call. Registering a second class under a
    taken name replaces the first (so reloading a module in a session works).

    Parameters
    ----------
    solver : class or object
        Implements :class:`Solver`; a class is instantiated without arguments.
    name : str, optional
        Overrides ``solver.name``.

    Returns
    -------
    solver : the argument, unchanged (so it works as a class decorator)
    """

    def register(obj):
        instance = obj() if isinstance(obj, type) else obj
        key = name or getattr(instance, "name", None)
        if not key or not isinstance(key, str):
            raise ValueError(f"solver {obj!r} has no name")
        missing = [
            method
            for method in ("check", "init", "run_epoch", "iterate", "state_arrays", "restore")
            if not callable(getattr(instance, method, None))
        ]
        options = getattr(instance, "Options", None)
        if missing or not (isinstance(options, type) and dataclasses.is_dataclass(options)):
            raise TypeError(
                f"solver {key!r} does not follow the Solver protocol: missing "
                f"{', '.join(missing) or 'an Options dataclass'}"
            )
        _REGISTRY[key.lower()] = instance
        return obj

    if solver is None:
        return register
    return register(solver)


def _import_solver_modules() -> None:
    # the solver modules beside this one (importing the package from here would be a cycle)
    for module in pkgutil.iter_modules([os.path.dirname(__file__)]):
        if module.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"daskpd.solvers.{module.name}")
        except ImportError:
            # A module that cannot import (a missing optional dependency) registers nothing;
            # asking for its solver by name reports the import error itself.
            continue


def available_solvers() -> list[str]:
    """Return the sorted names of every registered solver.

    Returns
    -------
    list of str
    """
    _import_solver_modules()
    return sorted(_REGISTRY)


def get_solver(name) -> Any:
    """Return the registered solver called ``name`` (case-insensitive).

    Parameters
    ----------
    name : str or Solver
        A registered name, or a solver object (returned as is).

    Returns
    -------
    Solver

    Raises
    ------
    ValueError
        If no solver has that name; the message lists the valid names.
    """
    if not isinstance(name, str):
        if all(hasattr(name, m) for m in ("init", "run_epoch", "iterate", "Options")):
            return name
        raise ValueError(f"solver must be a name or a Solver object, got {name!r}")
    key = name.lower()
    if key not in _REGISTRY:
        try:
            importlib.import_module(f"daskpd.solvers.{key}")
        except ModuleNotFoundError as exc:
            if exc.name != f"daskpd.solvers.{key}":
                raise
    if key not in _REGISTRY:
        valid = ", ".join(available_solvers()) or "none registered"
        raise ValueError(f"unknown solver {name!r}; valid solvers: {valid}")
    return _REGISTRY[key]


def make_options(solver, solver_options: Mapping | None = None):
    """Build ``solver.Options`` from keyword options.

    Parameters
    ----------
    solver : Solver
        The method (its ``Options`` frozen dataclass lists the valid names).
    solver_options : mapping or Options instance, optional
        Option values by name. An ``Options`` instance is returned unchanged.

    Returns
    -------
    options : solver.Options

    Raises
    ------
    ValueError
        Naming every unknown option and listing the valid ones (also when the ``Options``
        dataclass rejects a value).
    """
    options_cls = solver.Options
    if isinstance(solver_options, options_cls):
        return solver_options
    solver_options = dict(solver_options or {})
    valid = [f.name for f in dataclasses.fields(options_cls)]
    unknown = sorted(set(solver_options) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown option{'s' if len(unknown) > 1 else ''} for solver {solver.name!r}: "
            f"{', '.join(unknown)}; valid options: {', '.join(valid) or 'none'}"
        )
    try:
        return options_cls(**solver_options)
    except TypeError as exc:
        raise ValueError(f"invalid options for solver {solver.name!r}: {exc}") from None


# --------------------------------------------------------------------------------------------
# data, client and scoring helpers


def _as_data(data, *, name: str):
    """Turn a Dataset-like object or an (X, y) pair into a Dataset-like object."""
    if hasattr(data, "n_row_blocks") and hasattr(data, "block"):
        return data
    if isinstance(data, tuple | list) and len(data) == 2:
        from daskpd.dataset import as_dataset

        return as_dataset(data[0], data[1])
    if data is None:
        raise ValueError(f"{name} is None")
    raise ValueError(
        f"{name} must be a Dataset, a MemoryDataset or an (X, y) pair, got {type(data).__name__}"
    )


def _check_n_features(data, n_features: int, name: str) -> None:
    if int(data.n_features) != int(n_features):
        raise ValueError(f"{name} has {data.n_features} features but the model has {n_features}")


def _is_in_memory(data) -> bool:
    # Anything that is not backed by a store path is an in-memory dataset.
    return getattr(data, "path", None) is None


def score_rows(w, data, *, client=None) -> np.ndarray:
    """Return ``X @ w`` for all rows of ``data`` in one Dask compute.

    Parameters
    ----------
    w : ndarray of shape (n_features,)
    data : Dataset-like
        Has ``n_row_blocks`` and ``block(i)``.
    client : distributed.Client, optional
        Runs the compute on this client; otherwise the current Dask scheduler.

    Returns
    -------
    scores : ndarray of shape (n_samples,)
    """
    import dask

    w = np.asarray(w, dtype=np.float64)
    w_key = dask.delayed(w, pure=True)
    parts = [
        dask.delayed(_score_block, pure=True)(data, i, w_key) for i in range(data.n_row_blocks)
    ]
    if not parts:
        return np.zeros(0)
    if client is not None:
        futures = client.compute(parts)
        pieces = client.gather(futures)
    else:
        pieces = dask.compute(*parts)
    return np.concatenate(pieces) if pieces else np.zeros(0)


def _score_block(data, i, w):
    X_block, _ = data.block(i)
    return np.asarray(X_block @ w, dtype=np.float64).ravel()


def metrics_for(scores: np.ndarray, y: np.ndarray, task: str, loss_name: str = "") -> dict:
    """Return the metrics that fit a task (see :mod:`daskpd.metrics`), as floats.

    Binary task: ``auprc`` (trapezoid), ``average_precision``, ``roc_auc``, ``error_rate``,
    and ``log_loss`` when the loss is logistic (scores are then log-odds). Regression:
    ``rmse``, ``mae`` and ``r2``. AUPRC and ROC AUC are NaN when only one class is present.

    Parameters
    ----------
    scores : ndarray of shape (n_samples,)
        Decision values ``X @ w``.
    y : ndarray of shape (n_samples,)
        Labels (+-1 or 0/1 for binary tasks).
    task : {"binary", "regression"}
    loss_name : str, optional
        Name of the training loss (decides whether log-loss is meaningful).

    Returns
    -------
    dict of str to float
    """
    from daskpd import metrics

    scores = np.asarray(scores, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        return {}
    if task == "regression":
        return {
            "rmse": metrics.rmse(y, scores),
            "mae": float(np.mean(np.abs(scores - y))),
            "r2": metrics.r2(y, scores),
        }
    positive = y > 0
    out = {"error_rate": metrics.error_rate(y, scores)}
    if positive.any() and (~positive).any():
        out["auprc"] = metrics.auprc(y, scores)
        out["average_precision"] = metrics.average_precision(y, scores)
        out["roc_auc"] = metrics.roc_auc(y, scores)
    else:
        out["auprc"] = out["average_precision"] = out["roc_auc"] = math.nan
    if loss_name == "logistic":
        out["log_loss"] = metrics.log_loss(y, scores)
    return out


def _finite_report(name: str, array) -> str | None:
    if array is None or not isinstance(array, np.ndarray):
        return None
    if array.dtype.kind not in "fc":
        return None
    bad = ~np.isfinite(array)
    if bad.any():
        n_nan = int(np.isnan(array).sum())
        return f"{name} has {n_nan} NaN and {int(bad.sum()) - n_nan} infinite entries"
    return None


def _objective_description(problem, data) -> dict:
    loss, reg = problem.loss, problem.regularizer
    class_weight = getattr(problem, "class_weight", None)
    if isinstance(class_weight, Mapping):
        class_weight = {str(k): float(v) for k, v in class_weight.items()}
    return {
        "loss": getattr(loss, "name", type(loss).__name__),
        "loss_params": [float(p) for p in np.atleast_1d(getattr(loss, "params", []))],
        "regularizer": getattr(reg, "name", type(reg).__name__),
        "regularizer_params": [float(p) for p in np.atleast_1d(getattr(reg, "params", []))],
        "alpha": float(problem.alpha),
        "class_weight": class_weight,
        "n_features": int(data.n_features),
        "task": str(getattr(data, "task", "binary")),
    }


def _data_identity(data) -> dict:
    return {
        "path": str(getattr(data, "path", None)),
        "shape": [int(s) for s in data.shape],
        "nnz": int(getattr(data, "nnz", -1)),
    }


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


# --------------------------------------------------------------------------------------------
# the loop


def _lost_worker_errors() -> tuple:
    """Exceptions meaning "a worker or its data was lost" (the epoch is then replayed)."""
    import asyncio
    import concurrent.futures

    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return (
        KilledWorker,
        CommClosedError,
        FutureCancelledError,
        asyncio.CancelledError,
        concurrent.futures.CancelledError,
    )


def solve(
    data,
    loss="hinge",
    regularizer="l2",
    alpha=1e-4,
    solver="auto",
    *,
    max_epochs=100,
    tol=1e-4,
    time_limit=None,
    eval_every="auto",
    random_state=0,
    callbacks=(),
    client=None,
    checkpoint_dir=None,
    checkpoint_every=1,
    resume=False,
    test_data=None,
    class_weight=None,
    warm_start=None,
    max_retries=3,
    divergence_factor=1e8,
    **solver_options,
) -> SolveResult:
    """Train a regularized linear model with a registered primal-dual method.

    Minimizes ``P(w) = (1/n) sum_i c_i loss(x_i . w, y_i) + alpha * R(w)`` (``c_i`` the row
    weights from ``sample_weight`` and ``class_weight``) and reports the duality gap.

    Parameters
    ----------
    data : Dataset, MemoryDataset or (X, y) pair
        Training rows. An (X, y) pair (NumPy, scipy.sparse, Dask) goes through
        :func:`daskpd.dataset.as_dataset`.
    loss : str or Loss, default="hinge"
    regularizer : str or Regularizer, default="l2"
    alpha : float, default=1e-4
        Regularization strength (as in ``SGDClassifier``).
    solver : str, default="auto"
        Registered method (see :func:`available_solvers`), or ``"auto"``: the method that
        reaches a certified model first for the loss and regularizer
        (:func:`daskpd.solvers._auto.auto_solver`; dual coordinate ascent, ``"cocoa"``, for
        L2 with the hinge, squared hinge, smoothed hinge, logistic and squared losses).
    max_epochs : int, default=100
        Epoch budget (total, counting epochs before a resume).
    tol : float, default=1e-4
        Stop when the duality gap is at most ``tol`` (checked at evaluations).
    time_limit : float, optional
        Stop after this many seconds of training (evaluation excluded).
    eval_every : int or "auto", default="auto"
        When to evaluate the gap (and test metrics): an evaluation is a pass over the
        training data (and the test data) that can cost more than an epoch. An int
        evaluates every this many epochs. ``"auto"`` evaluates the first epoch of the call,
        then after an epoch only if the evaluation time, this evaluation included (costed
        as the last one), stays at most 10% of the wall time the run would then have: every
        epoch when evaluation is cheap, rarely when it is not. Either way the last epoch
        (``max_epochs`` or ``time_limit``) is evaluated, and so is the epoch where a
        callback stops the run. As ``tol`` is checked at evaluations only, with ``"auto"``
        the epoch where a run stops by ``tol`` depends on timing; pass an int for a
        reproducible stop.
    random_state : int, None or numpy.random.SeedSequence, default=0
        Root of the run's randomness; epoch ``e`` uses :func:`epoch_seed` ``(root, e)``.
    callbacks : sequence of callables or Callback objects, default=()
        Called after every epoch with an :class:`EpochInfo`; returning True stops the run
        (see :mod:`daskpd.callbacks`).
    client : distributed.Client, False or None, default=None
        Where the work runs. A client is used as given; ``False`` forces in-process execution
        (threaded or configured Dask scheduler). ``None``: a local scheduler set with
        ``dask.config.set(scheduler=...)`` if any, else the active distributed client if any,
        else in-process for in-memory data, else a LocalCluster started for the run (closed
        at the end).
    checkpoint_dir : str or path, optional
        Directory of the run's checkpoints (zarr groups written atomically).
    checkpoint_every : int, default=1
        Checkpoint every this many epochs (and at the end), when ``checkpoint_dir`` is given.
    resume : bool, default=False
        Continue from the latest checkpoint in ``checkpoint_dir`` (a fresh start when there is
        none). The result equals an uninterrupted run with the same seed (and the same
        evaluated epochs, when ``tol`` stops it); the history's clocks continue.
    test_data : Dataset, MemoryDataset or (X, y) pair, optional
        Held-out rows; their metrics (``test_auprc``, ...) join the history.
    class_weight : dict or "balanced", optional
        Per-class row weights, passed to :class:`daskpd.problem.Problem`.
    warm_start : ndarray, Iterate or SolveResult, optional
        Initial primal (and dual, when it has the right shape) point.
    max_retries : int, default=3
        Replays from the last checkpoint (or from the start) allowed over the whole run when
        a lost worker took data that Dask cannot recompute (scattered inputs, futures).
    divergence_factor : float, default=1e8
        The run is declared divergent when the primal objective exceeds this factor times
        the largest of 1 and the first evaluated objective.
    **solver_options
        Options of the method (fields of its ``Options`` dataclass).

    Returns
    -------
    SolveResult
        Its history rows carry three clocks: ``seconds`` (training), ``wall_seconds`` and
        ``eval_seconds``; its ``timings`` split the wall time of the call.

    Raises
    ------
    ValueError
        Bad parameters, unknown solver or options, mismatched data (before any Dask work).
    DivergenceError
        NaN/inf iterates or an exploding objective; the last good checkpoint is kept.
    """
    from daskpd.callbacks import as_callbacks

    if isinstance(solver, str) and solver == "auto":
        from daskpd.solvers._auto import auto_solver

        weighted = class_weight is not None or bool(getattr(data, "has_sample_weight", False))
        solver = auto_solver(loss, regularizer, weighted=weighted)
    method = get_solver(solver)
    options = make_options(method, solver_options)
    max_epochs = _check_positive_int("max_epochs", max_epochs)
    eval_every = _check_eval_every(eval_every)
    checkpoint_every = _check_positive_int("checkpoint_every", checkpoint_every)
    if (
        isinstance(max_retries, bool)
        or not isinstance(max_retries, int | np.integer)
        or (max_retries < 0)
    ):
        raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
    tol = _check_nonnegative_float("tol", tol)
    time_limit = _check_nonnegative_float("time_limit", time_limit, allow_none=True)
    if not float(divergence_factor) > 1:
        raise ValueError(f"divergence_factor must be > 1, got {divergence_factor!r}")
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs a checkpoint_dir")
    seed = _root_seed(random_state)
    callback_list = as_callbacks(callbacks)

    data = _as_data(data, name="data")
    problem = _make_problem(loss, regularizer, alpha, class_weight)
    problem.check(data)
    method.check(problem, data, options)
    if test_data is not None:
        test_data = _as_data(test_data, name="test_data")
        _check_n_features(test_data, data.n_features, "test_data")
    start = _coerce_warm_start(warm_start, data)
    store = None
    if checkpoint_dir is not None:
        from daskpd.checkpoint import CheckpointStore

        store = CheckpointStore(checkpoint_dir)
        if not resume and store.latest_epoch() is not None:
            raise ValueError(
                f"checkpoint_dir {str(checkpoint_dir)!r} already holds a checkpoint (epoch "
                f"{store.latest_epoch()}); pass resume=True to continue that run, or use an "
                "empty directory"
            )

    run = {
        "method": method,
        "options": options,
        "data": data,
        "problem": problem,
        "test_data": test_data,
        "start": start,
        "seed": seed,
        "callback_list": callback_list,
        "max_epochs": max_epochs,
        "tol": tol,
        "time_limit": time_limit,
        "eval_every": eval_every,
        "store": store,
        "checkpoint_every": checkpoint_every,
        "resume": resume,
        "max_retries": int(max_retries),
        "divergence_factor": float(divergence_factor),
    }
    if client is False:
        return _loop(client=None, **run)
    if client is None and _local_scheduler_configured():
        return _loop(client=None, **run)
    if client is None:
        from daskpd._cluster import active_client

        client = active_client()
    if client is None and _is_in_memory(data):
        return _loop(client=None, **run)
    if client is None:
        from daskpd._cluster import cluster_client

        with cluster_client(start=True) as started, started.as_current():
            return _loop(client=started, **run)
    # Route every plain dask.compute (Problem.evaluate, solvers) to this client, even when it
    # is not the process-wide default one.
    with client.as_current():
        return _loop(client=client, **run)


def _local_scheduler_configured() -> bool:
    """Whether ``dask.config`` names a local scheduler ("threads", "sync", a callable...).

    An explicit ``dask.config.set(scheduler=...)`` is a request to run there, so it wins over
    a distributed client that merely happens to exist in the process.
    """
    import dask

    scheduler = dask.config.get("scheduler", None)
    if scheduler is None:
        return False
    if isinstance(scheduler, str):
        return scheduler.lower() not in ("distributed", "dask.distributed")
    return "Client" not in type(scheduler).__name__


def _make_problem(loss, regularizer, alpha, class_weight):
    from daskpd.problem import Problem

    return Problem(loss, regularizer, alpha, class_weight=class_weight)


def _loop(
    *,
    method,
    options,
    data,
    problem,
    test_data,
    start,
    seed,
    client,
    callback_list,
    max_epochs,
    tol,
    time_limit,
    eval_every,
    store,
    checkpoint_every,
    resume,
    max_retries,
    divergence_factor,
) -> SolveResult:
    # The wall clock of the call starts here: a cluster that solve() started is already up.
    progress = _Progress(started=time.perf_counter())
    spent = dict.fromkeys(("init", "epochs", "checkpoint"), 0.0)
    objective = _objective_description(problem, data)
    run_meta = {
        "solver": method.name,
        "options": options_to_dict(options),
        "objective": objective,
        "data": _data_identity(data),
    }
    state = None
    if resume:
        tick = time.perf_counter()
        saved = store.latest()
        if saved is not None:
            saved.check_compatible(run_meta)
            seed = saved.seed()
            state = _restore(method, problem, data, saved.arrays, seed, client, options)
            seconds = float(saved.meta["seconds"])
            progress = _Progress(
                started=progress.started,
                epoch=saved.epoch,
                seconds=seconds,
                # A checkpoint from before the wall clock existed: its training seconds are
                # the best lower bound of its wall time.
                wall_before=float(saved.meta.get("wall_seconds", seconds)),
                eval_seconds=float(saved.meta.get("eval_seconds", 0.0)),
                history=list(saved.meta["history"]),
                reference_primal=saved.meta.get("reference_primal"),
            )
        spent["init"] += time.perf_counter() - tick
    eval_seconds_before = progress.eval_seconds
    if state is None:
        tick = time.perf_counter()
        state = method.init(
            problem, data, seed=seed, client=client, options=options, warm_start=start
        )
        # Initialization is training work (DSO's local DCD start can be several passes), so
        # it counts in the seconds of the history, as it would in a peer's fit time.
        elapsed = time.perf_counter() - tick
        progress.seconds += elapsed
        spent["init"] += elapsed

    def recover():
        # The replay point: the latest checkpoint, else the initial state rebuilt from the
        # same seed. Epochs are functions of (state, seed, epoch), so the replay gives the
        # same bits as the lost attempt would have.
        saved = store.latest() if store is not None else None
        if saved is not None:
            restored = _restore(method, problem, data, saved.arrays, seed, client, options)
            return restored, saved.epoch
        fresh = method.init(
            problem, data, seed=seed, client=client, options=options, warm_start=start
        )
        return fresh, 0

    for callback in callback_list:
        callback.on_train_begin(
            {
                "solver": method.name,
                "epoch": progress.epoch,
                "max_epochs": max_epochs,
                "history": tuple(progress.history),
            }
        )
    lost = _lost_worker_errors()
    certify = getattr(method, "certificate", None)
    stop_reason = "max_epochs"
    converged = False
    last_iterate = None
    retries = 0
    try:
        while progress.epoch < max_epochs:
            epoch = progress.epoch + 1
            tick = time.perf_counter()
            try:
                # Everything that touches the cluster: a lost worker can surface in the epoch
                # itself, in gathering the iterate, in the evaluation or in the checkpoint.
                state = method.run_epoch(state, epoch)
                elapsed = time.perf_counter() - tick
                progress.seconds += elapsed
                spent["epochs"] += elapsed
                tick = None
                progress.epoch = epoch
                out_of_time = time_limit is not None and progress.seconds >= time_limit
                last_epoch = epoch >= max_epochs or out_of_time
                row = iterate = None
                evaluate = _should_evaluate(
                    eval_every, epoch, progress.wall_seconds(), progress.eval_seconds,
                    progress.last_eval_cost, last_epoch,
                )  # fmt: skip
                if not evaluate and certify is not None:
                    row = _certified_row(certify, state, progress, divergence_factor, store)
                    # The first certified epoch gets the full evaluation (test metrics, the
                    # gathered w) that a stop by ``tol`` reports.
                    evaluate = row is not None and row["gap"] <= tol
                    if evaluate:
                        progress.history.pop()
                        row = None
                if evaluate:
                    evaluation_started = time.perf_counter()
                    iterate = method.iterate(state)
                    row = _checked_row(
                        problem, iterate, data, test_data, client, progress, store,
                        divergence_factor, evaluation_started,
                    )  # fmt: skip
                    last_iterate = iterate
                    converged = row["gap"] <= tol
                if store is not None and (epoch % checkpoint_every == 0 or last_epoch or converged):
                    saving = time.perf_counter()
                    arrays = method.state_arrays(state)
                    _check_state_arrays(arrays, epoch, store)
                    store.save(
                        epoch,
                        arrays,
                        seed=seed,
                        meta={
                            **run_meta,
                            "seconds": progress.seconds,
                            "wall_seconds": progress.wall_seconds(),
                            "eval_seconds": progress.eval_seconds,
                            "history": progress.history,
                            "reference_primal": progress.reference_primal,
                        },
                    )
                    spent["checkpoint"] += time.perf_counter() - saving
            except lost as exc:
                if tick is not None:
                    elapsed = time.perf_counter() - tick
                    progress.seconds += elapsed
                    spent["epochs"] += elapsed
                _close(method, state)
                rebuilding = time.perf_counter()
                state, back_to, retries = _recover_with_retries(
                    recover, retries, max_retries, epoch, exc
                )
                spent["init"] += time.perf_counter() - rebuilding
                progress.rewind(back_to)
                converged = False
                last_iterate = None
                continue
            info = EpochInfo(
                epoch=epoch,
                max_epochs=max_epochs,
                seconds=progress.seconds,
                wall_seconds=progress.wall_seconds(),
                row=row,
                history=tuple(progress.history),
                iterate=iterate,
                solver=method.name,
                fetch=functools.partial(method.iterate, state),
            )
            asked_stop = False
            for callback in callback_list:
                # Every callback sees every epoch, even after an earlier one asked to stop.
                asked_stop = bool(callback.on_epoch_end(info)) or asked_stop
            if converged:
                stop_reason = "tol"
                break
            if asked_stop:
                stop_reason = "callback"
                break
            if out_of_time:
                stop_reason = "time_limit"
                break
        evaluated = (
            bool(progress.history)
            and progress.history[-1]["epoch"] == progress.epoch
            and not progress.history[-1].get("certificate_only", False)
        )
        if not evaluated:
            # Stopped by a callback between evaluations (or after a certificate-only row).
            if progress.history and progress.history[-1]["epoch"] == progress.epoch:
                progress.history.pop()
            evaluation_started = time.perf_counter()
            last_iterate = method.iterate(state)
            _checked_row(
                problem, last_iterate, data, test_data, client, progress, store,
                divergence_factor, evaluation_started,
            )  # fmt: skip
        elif last_iterate is None:
            last_iterate = method.iterate(state)
        # (Also right when resuming from the final checkpoint, whose last row is this epoch.)
        converged = progress.history[-1]["gap"] <= tol
    finally:
        _close(method, state)
        for callback in callback_list:
            callback.on_train_end()

    final = progress.history[-1]
    return SolveResult(
        w=np.asarray(last_iterate.w, dtype=np.float64),
        z=last_iterate.z,
        w_avg=None if last_iterate.w_avg is None else np.asarray(last_iterate.w_avg),
        history=tuple(progress.history),
        n_epochs=progress.epoch,
        gap=float(final["gap"]),
        converged=bool(converged),
        stop_reason=stop_reason,
        solver=method.name,
        options=options,
        objective=objective,
        seed_entropy=int(seed.entropy),
        recoveries=retries,
        timings={
            "wall": time.perf_counter() - progress.started,
            "init": spent["init"],
            "epochs": spent["epochs"],
            "evaluation": progress.eval_seconds - eval_seconds_before,
            "checkpoint": spent["checkpoint"],
        },
    )


def _close(method, state):
    """``method.close(state)``, for the solvers that hold something outside Dask."""
    close = getattr(method, "close", None)
    if close is not None and state is not None:
        close(state)


def _recover_with_retries(recover, retries, max_retries, epoch, error):
    """Rebuild the replay point, counting every attempt against ``max_retries``."""
    lost = _lost_worker_errors()
    while True:
        retries += 1
        if retries > max_retries:
            raise TrainingFailed(
                f"epoch {epoch} failed after {max_retries} replays from the last recovery "
                f"point ({error.__class__.__name__}: {error})"
            ) from error
        try:
            state, back_to = recover()
            return state, back_to, retries
        except lost as exc:
            # The replay point itself lost a worker (e.g. while scattering): try again.
            error = exc


@dataclass
class _Progress:
    """Where a run is: epochs done, its clocks, history, divergence reference.

    ``started`` is the ``time.perf_counter()`` at the top of this call's loop and
    ``wall_before`` the wall seconds of the run before this call (a resume); the
    ``last_eval_cost`` is of this call (None until its first evaluation).
    """

    started: float
    epoch: int = 0
    seconds: float = 0.0
    wall_before: float = 0.0
    eval_seconds: float = 0.0
    last_eval_cost: float | None = None
    history: list = field(default_factory=list)
    reference_primal: float | None = None

    def wall_seconds(self) -> float:
        return self.wall_before + time.perf_counter() - self.started

    def rewind(self, epoch: int) -> None:
        # The clocks keep counting (the lost attempt did cost time); rows of the epochs to be
        # replayed are dropped so that they are not reported twice.
        self.epoch = epoch
        self.history = [row for row in self.history if row["epoch"] <= epoch]


# With eval_every="auto", the share of the wall time that evaluation may take.
_AUTO_EVAL_SHARE = 0.1


def _should_evaluate(eval_every, epoch, wall_so_far, eval_so_far, last_eval_cost, last_epoch):
    """Whether to evaluate after ``epoch`` (see ``eval_every`` in :func:`solve`).

    Parameters
    ----------
    eval_every : int or "auto"
    epoch : int
        Epoch just run.
    wall_so_far, eval_so_far : float
        Wall seconds of the run so far, and the part of them spent in evaluations.
    last_eval_cost : float or None
        Seconds of the last evaluation measured in this call; None before the first.
    last_epoch : bool
        Whether the run ends after this epoch (``max_epochs`` or ``time_limit``).

    Returns
    -------
    bool
    """
    if last_epoch:
        return True
    if eval_every != "auto":
        return epoch % eval_every == 0
    if last_eval_cost is None:
        return True
    return eval_so_far + last_eval_cost <= _AUTO_EVAL_SHARE * (wall_so_far + last_eval_cost)


def _checked_row(
    problem, iterate, data, test_data, client, progress, store, factor, started
) -> dict:
    """Evaluate ``iterate``, check it for divergence, append its row to the history.

    ``started`` is the ``time.perf_counter()`` when the evaluation began (gathering the
    iterate is part of it); the row gets the clocks with this evaluation included.
    """
    epoch = progress.epoch
    _check_iterate(iterate, epoch, store)
    row = _evaluate(problem, iterate, data, test_data, client, epoch, progress.seconds)
    progress.last_eval_cost = time.perf_counter() - started
    progress.eval_seconds += progress.last_eval_cost
    row["wall_seconds"] = progress.wall_seconds()
    row["eval_seconds"] = progress.eval_seconds
    if progress.reference_primal is None and math.isfinite(row["primal"]):
        progress.reference_primal = float(row["primal"])
    _check_objective(row, progress.reference_primal, factor, store, progress.history)
    progress.history.append(row)
    return row


def _certified_row(certify, state, progress, factor, store) -> dict | None:
    """The history row of the solver's own certificate ``certify(state)``, or None without one.

    Rows from a certificate carry ``certificate_only=True`` and no test metrics; reading
    the certificate counts as evaluation time but does not set the cadence's cost of an
    evaluation (it is much cheaper than one).
    """
    started = time.perf_counter()
    certificate = certify(state)
    if certificate is None:
        progress.eval_seconds += time.perf_counter() - started
        return None
    primal, dual = (float(v) for v in certificate)
    row = {
        "epoch": int(progress.epoch),
        "seconds": float(progress.seconds),
        "primal": primal,
        "dual": dual,
        "gap": _rounded_gap(primal, dual),
        "certificate_only": True,
    }
    progress.eval_seconds += time.perf_counter() - started
    row["wall_seconds"] = progress.wall_seconds()
    row["eval_seconds"] = progress.eval_seconds
    if progress.reference_primal is None and math.isfinite(primal):
        progress.reference_primal = primal
    _check_objective(row, progress.reference_primal, factor, store, progress.history)
    progress.history.append(row)
    return row


def _rounded_gap(primal, dual) -> float:
    # A certificate computed in floating point can come out a hair negative at the optimum;
    # rounding as Problem.evaluate does.
    gap = primal - dual
    if -1e-12 * max(1.0, abs(primal)) <= gap < 0.0:
        gap = 0.0
    return gap


def _restore(method, problem, data, arrays, seed, client, options):
    parameters = inspect.signature(method.restore).parameters
    # Solvers written against the first draft of the protocol have no ``seed`` keyword.
    accepts_seed = "seed" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )
    kwargs = {"client": client, "options": options}
    if accepts_seed:
        kwargs["seed"] = seed
    return method.restore(problem, data, arrays, **kwargs)


def _evaluate(problem, iterate, data, test_data, client, epoch, seconds) -> dict:
    if iterate.primal is not None and iterate.dual is not None:
        # certified by the solver itself (no evaluation pass); rounding as Problem.evaluate
        primal, dual = float(iterate.primal), float(iterate.dual)
        gap = _rounded_gap(primal, dual)
    else:
        kwargs = {}
        if iterate.z is not None:
            kwargs["z"] = iterate.z
            if iterate.z_bounds is not None:
                kwargs["z_bounds"] = iterate.z_bounds
        evaluation = problem.evaluate(
            np.asarray(iterate.w, dtype=np.float64), data, client=client, **kwargs
        )
        primal, dual, gap = evaluation.primal, evaluation.dual, evaluation.gap
    row = {
        "epoch": int(epoch),
        "seconds": float(seconds),
        "primal": float(primal),
        "dual": float(dual),
        "gap": float(gap),
    }
    if test_data is not None:
        scores = score_rows(iterate.w, test_data, client=client)
        metrics = metrics_for(
            scores,
            test_data.y,
            getattr(test_data, "task", "binary"),
            getattr(problem.loss, "name", ""),
        )
        row.update({f"test_{name}": value for name, value in metrics.items()})
    return row


def _kept_message(store) -> str:
    if store is None:
        return "no checkpoint directory was given"
    latest = store.latest_epoch()
    if latest is None:
        return f"no checkpoint was written yet in {store.path}"
    return f"last good checkpoint (epoch {latest}) kept in {store.path}"


def _check_iterate(iterate, epoch, store) -> None:
    for name, array in (("w", iterate.w), ("z", iterate.z), ("w_avg", iterate.w_avg)):
        report = _finite_report(name, array if isinstance(array, np.ndarray) else None)
        if report:
            raise DivergenceError(
                f"training diverged at epoch {epoch}: {report}; {_kept_message(store)}"
            )


def _check_state_arrays(arrays, epoch, store) -> None:
    # Only NaN: some solvers legitimately keep infinite bounds in their state.
    for name, array in arrays.items():
        array = np.asarray(array)
        if array.dtype.kind in "fc" and np.isnan(array).any():
            raise DivergenceError(
                f"training diverged at epoch {epoch}: solver state {name!r} has "
                f"{int(np.isnan(array).sum())} NaN entries; {_kept_message(store)}"
            )


def _check_objective(row, reference_primal, factor, store, history) -> None:
    primal = row["primal"]
    epoch = row["epoch"]
    if not math.isfinite(primal):
        last = next((r for r in reversed(history) if math.isfinite(r["primal"])), None)
        before = f" (last finite {last['primal']:.6g} at epoch {last['epoch']})" if last else ""
        raise DivergenceError(
            f"training diverged at epoch {epoch}: primal objective is {primal}{before}; "
            f"{_kept_message(store)}"
        )
    limit = float(factor) * max(1.0, abs(reference_primal or 0.0))
    if primal > limit:
        raise DivergenceError(
            f"training diverged at epoch {epoch}: primal objective {primal:.6g} exploded "
            f"(more than {float(factor):g} x max(1, first evaluated {reference_primal:.6g})); "
            f"{_kept_message(store)}"
        )
