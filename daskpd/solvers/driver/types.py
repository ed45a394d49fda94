"""The objects a solver and the driver exchange: the protocol, its iterate, the result.

Every method (CoCoA+, DSO, SPDC, DSPDC, GSFW, Pdprox, Newton-CG, the batch baseline) is a
subclass of :class:`Solver` registered under a name with
:func:`daskpd.solvers.driver.registry.register_solver`; :func:`daskpd.solvers.driver.run.solve`
runs it. This module also holds what a run hands back (:class:`SolveResult`, read back by
:func:`daskpd.load_model`), what a callback sees (:class:`EpochInfo`) and the errors of a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from daskpd.data.conversion import as_data
from daskpd.model_file import model_class, save_model
from daskpd.solvers.common.scores import score_rows
from daskpd.solvers.driver.capabilities import BUILTIN_LOSSES, BUILTIN_REGULARIZERS, Capabilities
from daskpd.solvers.driver.data import _check_n_features
from daskpd.solvers.driver.protocol import Solver

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


@model_class("solve_result")
@dataclass(frozen=True)
class SolveResult:
    """The outcome of :func:`solve`.

    Attributes
    ----------
    w : ndarray of shape (n_features,)
        Primal solution (the last evaluated iterate). On multiclass data (one-vs-rest,
        :mod:`daskpd.solvers.cocoa._multiclass`) of shape (n_classes, n_features), ``z`` of
        shape (n_samples, n_classes), ``gap`` the sum of the classes' gaps.
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
        model read by :func:`daskpd.load_model`.
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
        scores : ndarray of shape (n_samples,), or (n_samples, n_classes) for a one-vs-rest
            result (``w`` of shape (n_classes, n_features))
        """
        data = as_data(data, name="data")
        _check_n_features(data, self.w.shape[-1], "data")
        return score_rows(self.w, data, client=client)

    def save(self, path, *, overwrite=False):
        """Save as a model file of kind ``"solve_result"`` (:mod:`daskpd.model_file`).

        ``w``, and ``w_avg`` and ``z`` when they are in-memory arrays, are zarr arrays with
        checksums; the rest is a JSON document. The file is written at a temporary name and
        renamed into place when complete. :func:`daskpd.load_model` reads it back.
        Parameters, result and errors: :func:`daskpd.save_model`.
        """
        return save_model(self, path, overwrite=overwrite)


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
