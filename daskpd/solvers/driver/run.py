"""A run from the caller's arguments: :func:`solve` (a plan, then its run) and :func:`run_plan`.

:func:`solve` owns everything around a run through the modules beside this one: the plan
(:mod:`~daskpd.solvers.driver.plan`, every check, no Dask work), the choice of Dask client
(:func:`run_plan`, here) and the loop over epochs (:mod:`~daskpd.solvers.driver.loop`:
evaluation, history, callbacks, stop rules, divergence, checkpoints, resume, recovery after a
lost worker).
"""

from __future__ import annotations

import inspect

from daskpd.solvers.common.scores import _is_in_memory
from daskpd.solvers.driver.plan import Plan, make_plan
from daskpd.solvers.driver.types import SolveResult

__all__ = ["run_plan", "solve"]


def solve(data, *args, client=None, **kwargs) -> SolveResult:
    """Train a regularized linear model with a registered primal-dual method.

    Minimizes ``P(w) = (1/n) sum_i c_i loss(x_i . w, y_i) + alpha * R(w)`` (``c_i`` the row
    weights from ``sample_weight`` and ``class_weight``) and reports the duality gap.

    Parameters
    ----------
    data : Dataset, MemoryDataset, path or (X, y) pair
        Training rows, through :func:`daskpd.data.as_data` (a path is opened; an (X, y)
        pair of NumPy, scipy.sparse or Dask arrays becomes a dataset).
    loss : str or Loss, default="hinge"
    regularizer : str or Regularizer, default="l2"
    alpha : float, default=1e-4
        Regularization strength (as in ``SGDClassifier``).
    solver : str, default="auto"
        Registered method (see :func:`available_solvers`), or ``"auto"``: the method that
        reaches a certified model first for the loss and regularizer
        (:func:`daskpd.solvers.driver.auto.auto_solver`; dual coordinate ascent, ``"cocoa"``, for
        L2 with the hinge, squared hinge, smoothed hinge, logistic and squared losses).
    max_epochs : int, default=100
        Epoch budget (total, counting epochs before a resume).
    tol : float, default=1e-4
        Stop when the duality gap is at most ``tol`` (checked at evaluations).
    time_limit : float, optional
        Stop after this many seconds of training (evaluation excluded).
    eval_every : int or "auto", default="auto"
        When to evaluate the gap (and test metrics), a pass over the data that can cost
        more than an epoch: every this many epochs, or with ``"auto"`` as often as keeps
        evaluation within 10% of the run's wall time (the rule:
        :func:`daskpd.solvers.driver.loop._should_evaluate`). The last epoch is evaluated,
        and so is the epoch where a callback stops the run. ``tol`` is checked at
        evaluations, or at every epoch for a solver that certifies its epochs from their own
        pass (``"cocoa"``); so with ``"auto"`` the epoch where a run stops by ``tol`` may
        depend on timing: pass an int for a reproducible stop. With ``"auto"`` and no
        ``test_data``, a solver whose epochs certify themselves from their own sums
        (``"cocoa"``, ``"tron"``, ``"dual_newton"``) reports those certificates and gathers
        the model once, at the epoch that ends the run (an evaluation would add nothing but
        moving ``w``).
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
    test_data : Dataset, MemoryDataset, path or (X, y) pair, optional
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
    return run_plan(make_plan(data, *args, **kwargs), client)


def _signature_with_client(function):
    """``function``'s signature with ``client=None`` among its keyword-only parameters."""
    parameters = list(inspect.signature(function).parameters.values())
    client = inspect.Parameter("client", inspect.Parameter.KEYWORD_ONLY, default=None)
    parameters.insert(len(parameters) - 1, client)  # before **solver_options
    return inspect.signature(function).replace(
        parameters=parameters, return_annotation="SolveResult"
    )


# The run's parameters and their defaults are written once, in make_plan's signature; solve
# shows them (and ``client``) to help() and the documentation.
solve.__signature__ = _signature_with_client(make_plan)


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
        return _in_process(plan)
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


def _in_process(plan: Plan):
    """``client=False``: the run in this process (:func:`in_this_process`)."""
    with in_this_process():
        return _execute(plan, None)


def in_this_process():
    """A context in which every ``dask.compute`` runs in this process: on the local
    scheduler named in ``dask.config``, else on the threaded one, even where a distributed
    client exists (it would otherwise be dask's default and receive a run's graphs, the rows
    in them). ``client=False`` of :func:`solve` and of the path."""
    import contextlib

    import dask

    if _local_scheduler_configured():
        return contextlib.nullcontext()
    return dask.config.set(scheduler="threads")


def _execute(plan: Plan, client):
    from daskpd.solvers.driver.capabilities import is_multiclass
    from daskpd.solvers.driver.loop import loop

    if is_multiclass(plan.problem, plan.data):
        # one-vs-rest: the solver's own run (its rounds serve every class), declared in its
        # capabilities; a solver without the declaration was refused by the plan, or is
        # refused here when it declares nothing
        if not getattr(plan.capabilities, "multiclass", False):
            raise ValueError(f"solver {plan.solver!r} does not train multiclass data")
        return plan.method.run_multiclass(plan, client)
    # what depends on the client (DSO's grid follows the number of workers)
    plan.method.prepare(plan.data, plan.options, client)
    return loop(plan, client)


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
