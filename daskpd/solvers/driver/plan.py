"""One setup path for a run: :func:`make_plan` checks everything and returns a frozen :class:`Plan`.

:func:`daskpd.solve`, the estimators and the ``daskpd`` command all build their run here, so
they accept and refuse the same things with the same messages: one ``alpha`` rule (the one of
:class:`daskpd.problem.Problem`: > 0, or >= 0 for constraint sets and the zero regularizer),
one ``solver="auto"`` choice (:func:`daskpd.solvers.driver.auto.auto_solver`, on the resolved loss
and regularizer), the solver's options built once, and the solver's declared
:class:`~daskpd.solvers.driver.capabilities.Capabilities` checked before its own ``check``.

Making a plan does no Dask work: it reads metadata and per-row statistics (label counts, row
norms) only. :func:`run_plan` executes a plan: it picks the client, lets the solver prepare the
data for that client (DSO's grid) and runs the loop over epochs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from daskpd.data.conversion import as_data
from daskpd.solvers.driver.checks import (
    _check_eval_every,
    _check_nonnegative_float,
    _check_positive_int,
    _coerce_warm_start,
)
from daskpd.solvers.driver.data import _check_n_features
from daskpd.solvers.driver.registry import get_solver, make_options
from daskpd.solvers.driver.seeds import _root_seed
from daskpd.solvers.driver.types import Iterate

__all__ = ["Plan", "make_plan", "resolve_solver"]


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything a run needs, checked; built by :func:`make_plan`, executed by :func:`run_plan`.

    Attributes
    ----------
    solver : str
        Name of the solver that runs (``"auto"`` resolved).
    method : Solver
        The registered solver object.
    options : dataclass
        ``method.Options``, built once.
    problem : daskpd.problem.Problem
    data : Dataset-like
    test_data : Dataset-like or None
    start : Iterate or None
        The warm start, coerced.
    seed : numpy.random.SeedSequence
    callbacks : tuple
        As :func:`daskpd.callbacks.as_callbacks` returns them.
    max_epochs, tol, time_limit, eval_every, checkpoint_every, resume, max_retries, \
divergence_factor
        As :func:`daskpd.solve` takes them, checked.
    store : daskpd.checkpoint.CheckpointStore or None
        The checkpoint directory of the run.
    """

    solver: str
    method: Any
    options: Any
    problem: Any
    data: Any
    test_data: Any
    start: Iterate | None
    seed: np.random.SeedSequence
    callbacks: tuple
    max_epochs: int
    tol: float
    time_limit: float | None
    eval_every: int | str
    store: Any
    checkpoint_every: int
    resume: bool
    max_retries: int
    divergence_factor: float

    @property
    def capabilities(self):
        """The solver's declared :class:`Capabilities` (None for a solver without any)."""
        return self.method.capabilities


def make_plan(
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
    checkpoint_dir=None,
    checkpoint_every=1,
    resume=False,
    test_data=None,
    class_weight=None,
    warm_start=None,
    max_retries=3,
    divergence_factor=1e8,
    **solver_options,
) -> Plan:
    """Check every argument of a run and return its :class:`Plan`, without Dask work.

    Parameters are those of :func:`daskpd.solve` (without ``client``: where the plan runs is
    :func:`run_plan`'s choice).

    Returns
    -------
    Plan

    Raises
    ------
    ValueError
        Naming the parameter: bad values, unknown solver or options, a loss, regularizer,
        row weights, warm start or kind of data outside the solver's capabilities, or
        anything the problem's or the solver's own ``check`` refuses.
    """
    from daskpd.callbacks import as_callbacks
    from daskpd.problem import Problem

    method = options = None
    if not (isinstance(solver, str) and solver == "auto"):
        # an unknown name or option fails first, before the data is looked at
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

    data = as_data(data, name="data")
    problem = Problem(loss, regularizer, alpha, class_weight=class_weight)
    if method is None:
        method = get_solver(resolve_solver(solver, problem, data, grid=solver_options.get("grid")))
        options = make_options(method, solver_options)
    name = str(method.name)
    start = _coerce_warm_start(warm_start, data)
    if method.capabilities is not None:
        method.capabilities.check(name, problem, data, warm_start=start is not None)
    problem.check(data)
    method.check(problem, data, options)
    if test_data is not None:
        test_data = as_data(test_data, name="test_data")
        _check_n_features(test_data, data.n_features, "test_data")
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
    return Plan(
        solver=name,
        method=method,
        options=options,
        problem=problem,
        data=data,
        test_data=test_data,
        start=start,
        seed=seed,
        callbacks=tuple(callback_list),
        max_epochs=max_epochs,
        tol=tol,
        time_limit=time_limit,
        eval_every=eval_every,
        store=store,
        checkpoint_every=checkpoint_every,
        resume=bool(resume),
        max_retries=int(max_retries),
        divergence_factor=float(divergence_factor),
    )


def resolve_solver(solver, problem, data=None, grid=None):
    """The solver a run uses: ``solver``, or for ``"auto"`` the choice of
    :func:`daskpd.solvers.driver.auto.auto_solver` for the problem's loss and regularizer.

    Parameters
    ----------
    solver : str or Solver
    problem : daskpd.problem.Problem
    data : Dataset-like, optional
        Its stored sample weights count as row weights (as the problem's class weights do).
    grid : int, optional
        The row groups asked for (``solve(..., grid=K)``).

    Returns
    -------
    str or Solver
    """
    if not (isinstance(solver, str) and solver == "auto"):
        return solver
    from daskpd.solvers.driver.auto import auto_solver

    weighted = problem.class_weight is not None or bool(getattr(data, "has_sample_weight", False))
    return auto_solver(problem.loss, problem.regularizer, weighted=weighted, grid=grid)
