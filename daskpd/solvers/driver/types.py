"""The objects a solver and the driver exchange: the protocol, its iterate, the result.

Every method (CoCoA+, DSO, SPDC, DSPDC, GSFW, Pdprox, Newton-CG, the batch baseline) is a
subclass of :class:`Solver` registered under a name with
:func:`daskpd.solvers.driver.registry.register_solver`; :func:`daskpd.solvers.driver.run.solve`
runs it. This module also holds what a run hands back (:class:`SolveResult`, read back by
:func:`load_model`), what a callback sees (:class:`EpochInfo`) and the errors of a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import numpy as np

from daskpd.data.conversion import as_data
from daskpd.solvers.common.scores import score_rows
from daskpd.solvers.driver.capabilities import BUILTIN_LOSSES, BUILTIN_REGULARIZERS, Capabilities
from daskpd.solvers.driver.data import _check_n_features
from daskpd.solvers.driver.protocol import Solver
from daskpd.solvers.driver.registry import get_solver, make_options

__all__ = [
    "BUILTIN_LOSSES",
    "BUILTIN_REGULARIZERS",
    "Capabilities",
    "DivergenceError",
    "EpochInfo",
    "Iterate",
    "SolveResult",
    "Solver",
    "TrainingFailed",
    "load_model",
    "result_from_model_file",
]


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
    xtz : ndarray of shape (n_features,), Future or None
        ``X^T z`` for the dual iterate ``z``, when the solver keeps it as it goes (SPDC's
        ``n u``, a future on its worker on a cluster): the evaluation then reads ``X`` for
        the margins only (see :meth:`daskpd.problem.Problem.evaluate`).
    """

    w: np.ndarray
    z: Any = None
    z_bounds: np.ndarray | None = None
    w_avg: np.ndarray | None = None
    z_avg: Any = None
    primal: float | None = None
    dual: float | None = None
    xtz: np.ndarray | None = None


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
        ``certificate_only=True``, the same keys but no test metrics (SPDC and DSPDC: such
        rows in place of the evaluations before the last, without test data).
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
        data : Dataset, MemoryDataset, path or (X, y) pair
            Rows to score; ``n_features`` must match ``w``.
        client : distributed.Client, optional
            Where to run; default: in-process for in-memory data, the active client otherwise.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
        """
        data = as_data(data, name="data")
        _check_n_features(data, self.w.shape[0], "data")
        return score_rows(self.w, data, client=client)

    def save(self, path, *, overwrite=False):
        """Save as a model file of kind ``"solve_result"`` (:mod:`daskpd.model_file`).

        ``w``, and ``w_avg`` and ``z`` when they are in-memory arrays, are zarr arrays with
        checksums; the rest is a JSON document. The file is written at a temporary name and
        renamed into place when complete. :func:`daskpd.load_model` reads it back.

        Parameters
        ----------
        path : str or Path
            Destination directory store (e.g. ``model.zarr``); its parent must exist.
        overwrite : bool, default=False
            Replace an existing model at ``path``.

        Returns
        -------
        Path

        Raises
        ------
        FileExistsError
            When ``path`` exists and ``overwrite`` is false (nothing is written).
        """
        from daskpd.model_file import write_model_file

        options = self.options
        if is_dataclass(options):
            # field by field, not asdict: the stored tuples stay tuples
            options = {f.name: getattr(options, f.name) for f in fields(options)}
        content = {
            "solver": self.solver,
            "options": dict(options) if isinstance(options, dict) else {},
            "objective": self.objective,
            "history": tuple(self.history),
            "n_epochs": int(self.n_epochs),
            "gap": float(self.gap),
            "converged": bool(self.converged),
            "stop_reason": self.stop_reason,
            "seed_entropy": int(self.seed_entropy),
            "recoveries": int(self.recoveries),
            # z (and w_avg) may be distributed handles; only in-memory arrays are stored.
            "w": np.asarray(self.w, dtype=np.float64),
            "w_avg": self.w_avg if isinstance(self.w_avg, np.ndarray) else None,
            "z": self.z if isinstance(self.z, np.ndarray) else None,
        }
        return write_model_file(path, "solve_result", content, overwrite=overwrite)


def load_model(path) -> SolveResult:
    """Load a solve result saved by :meth:`SolveResult.save`.

    :func:`daskpd.load_model` reads estimator files too; this one reads solve results only
    (it is the layer below the estimators).

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    SolveResult
        ``options`` is the solver's ``Options`` dataclass when that solver is registered,
        else a dict; ``timings`` is empty.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When ``path`` is not a daskpd model file, or holds an estimator.
    CorruptStoreError
        When an array is missing, unreadable or fails its checksum (a ``ValueError``).
    """
    from daskpd.model_file import read_model_file

    return result_from_model_file(read_model_file(path, kind="solve_result"))


def result_from_model_file(model_file) -> SolveResult:
    """Build the :class:`SolveResult` of a model file of kind ``"solve_result"``.

    Parameters
    ----------
    model_file : daskpd.model_file.ModelFile

    Returns
    -------
    SolveResult
    """
    content = model_file.content
    where = f"model {str(model_file.path)!r}"
    solver, options = content.get("solver"), content.get("options")
    if not isinstance(solver, str) or not isinstance(options, dict):
        raise ValueError(f"{where}: its document is not a solve result's (solver and options)")
    plain = all(isinstance(key, str) and _is_plain_option(value) for key, value in options.items())
    if not plain:
        raise ValueError(f"{where}: its solver options are not names with plain values")
    vectors = [content.get(name) for name in ("w", "z", "w_avg")]
    if not isinstance(vectors[0], np.ndarray) or not all(
        vector is None or (isinstance(vector, np.ndarray) and vector.dtype.kind in "fiub")
        for vector in vectors
    ):
        raise ValueError(f"{where}: its document is not a solve result's (w, z, w_avg)")
    history = content.get("history")
    if not isinstance(content.get("objective"), dict) or not (
        isinstance(history, list | tuple) and all(isinstance(row, dict) for row in history)
    ):
        raise ValueError(f"{where}: its document is not a solve result's (objective, history)")
    try:
        try:
            # a registered name (get_solver imports daskpd's own solver modules only)
            options = make_options(get_solver(solver), options)
        except ValueError:
            # a method this process has not registered, or options it no longer has: they
            # stay a dict of plain values
            pass
        return SolveResult(
            w=np.asarray(content["w"], dtype=np.float64),
            z=content["z"],
            w_avg=content["w_avg"],
            history=tuple(content["history"]),
            n_epochs=int(content["n_epochs"]),
            gap=float(content["gap"]),
            converged=bool(content["converged"]),
            stop_reason=str(content["stop_reason"]),
            solver=str(content["solver"]),
            options=options,
            objective=content["objective"],
            seed_entropy=int(content["seed_entropy"]),
            recoveries=int(content["recoveries"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: its document is not a solve result's ({exc!r})") from None


def _is_plain_option(value) -> bool:
    if isinstance(value, tuple):
        return all(_is_plain_option(item) for item in value)
    return value is None or isinstance(value, bool | int | float | str)


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
