"""One setup path for a run: :func:`make_plan` checks everything and returns a frozen :class:`Plan`.

:func:`daskpd.solve`, the estimators and the ``daskpd`` command all build their run here, so
they accept and refuse the same things with the same messages: one ``alpha`` rule (the one of
:class:`daskpd.problem.Problem`: > 0, or >= 0 for constraint sets and the zero regularizer),
one ``solver="auto"`` choice (:func:`daskpd.solvers._auto.auto_solver`, on the resolved loss
and regularizer), the solver's options built once, and the solver's declared
:class:`~daskpd.solvers._capabilities.Capabilities` checked before its own ``check``.

Making a plan does no Dask work: it reads metadata and per-row statistics (label counts, row
norms) only. :func:`run_plan` executes a plan: it picks the client, lets the solver prepare the
data for that client (DSO's grid) and runs the loop over epochs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from daskpd.solvers._checks import (
    _check_eval_every,
    _check_nonnegative_float,
    _check_positive_int,
    _coerce_warm_start,
)
from daskpd.solvers._data import _as_data, _check_n_features, _is_in_memory
from daskpd.solvers._registry import get_solver, make_options
from daskpd.solvers._seeds import _root_seed
from daskpd.solvers._types import Iterate

__all__ = ["Plan", "make_plan", "resolve_solver", "run_plan"]


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
        return getattr(self.method, "capabilities", None)

    def _loop_arguments(self) -> dict:
        return {
            "method": self.method,
            "options": self.options,
            "data": self.data,
            "problem": self.problem,
            "test_data": self.test_data,
            "start": self.start,
            "seed": self.seed,
            "callback_list": self.callbacks,
            "max_epochs": self.max_epochs,
            "tol": self.tol,
            "time_limit": self.time_limit,
            "eval_every": self.eval_every,
            "store": self.store,
            "checkpoint_every": self.checkpoint_every,
            "resume": self.resume,
            "max_retries": self.max_retries,
            "divergence_factor": self.divergence_factor,
        }


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

    data = _as_data(data, name="data")
    problem = Problem(loss, regularizer, alpha, class_weight=class_weight)
    if method is None:
        method = get_solver(resolve_solver(solver, problem, data, grid=solver_options.get("grid")))
        options = make_options(method, solver_options)
    name = str(getattr(method, "name", type(method).__name__))
    start = _coerce_warm_start(warm_start, data)
    capabilities = getattr(method, "capabilities", None)
    if capabilities is not None:
        capabilities.check(name, problem, data, warm_start=start is not None)
    problem.check(data)
    method.check(problem, data, options)
    if test_data is not None:
        test_data = _as_data(test_data, name="test_data")
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
    :func:`daskpd.solvers._auto.auto_solver` for the problem's loss and regularizer.

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
    from daskpd.solvers._auto import auto_solver

    weighted = problem.class_weight is not None or bool(getattr(data, "has_sample_weight", False))
    return auto_solver(problem.loss, problem.regularizer, weighted=weighted, grid=grid)


def run_plan(plan: Plan, client=None):
    """Execute a plan: the run of :func:`daskpd.solve` (see its ``client`` parameter).

    Parameters
    ----------
    plan : Plan
    client : distributed.Client, False or None, default=None
        A client is used as given; ``False`` runs in-process; ``None``: a local scheduler
        set with ``dask.config.set(scheduler=...)`` if any, else the active distributed
        client if any, else in-process for in-memory data, else a LocalCluster started for
        the run (closed at the end).

    Returns
    -------
    SolveResult
    """
    if client is False:
        return _execute(plan, None)
    if client is None and _local_scheduler_configured():
        return _execute(plan, None)
    if client is None:
        from daskpd._cluster import active_client

        client = active_client()
    if client is None and _is_in_memory(plan.data):
        return _execute(plan, None)
    if client is None:
        from daskpd._cluster import cluster_client

        with cluster_client(start=True) as started, started.as_current():
            return _execute(plan, started)
    # Route every plain dask.compute (Problem.evaluate, solvers) to this client, even when it
    # is not the process-wide default one.
    with client.as_current():
        return _execute(plan, client)


def _execute(plan: Plan, client):
    from daskpd.solvers._loop import _loop

    prepare = getattr(plan.method, "prepare", None)
    if callable(prepare):
        # What depends on the client (DSO's grid follows the number of workers).
        prepare(plan.data, plan.options, client)
    return _loop(client=client, **plan._loop_arguments())


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
