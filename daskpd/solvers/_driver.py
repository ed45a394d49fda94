"""The shared solver driver: :func:`solve`, and the names of the driver's modules.

Every method (DSO, SPDC, DSPDC, GSFW, Pdprox, the batch baseline) is a class that follows the
:class:`Solver` protocol and registers itself under a name with :func:`register_solver`.
:func:`solve` owns everything around a run: the choice of Dask client, the loop over epochs,
evaluation of the duality gap (through :meth:`daskpd.problem.Problem.evaluate`), test metrics,
history, callbacks, stop rules, divergence detection, checkpoints and resume, and recovery
after a lost worker.

The driver is split by job; this module checks the arguments, picks the client and re-exports
the names of the others, so that ``from daskpd.solvers._driver import ...`` keeps working:

- :mod:`daskpd.solvers._types`: the :class:`Solver` protocol (its contract in full),
  :class:`Iterate`, :class:`SolveResult` and :func:`load_model`, :class:`EpochInfo`, the
  errors :class:`DivergenceError` and :class:`TrainingFailed`;
- :mod:`daskpd.solvers._registry`: :func:`register_solver`, :func:`get_solver`,
  :func:`available_solvers`, :func:`make_options`;
- :mod:`daskpd.solvers._seeds`: :func:`epoch_seed`, :func:`block_seeds`, the root seed;
- :mod:`daskpd.solvers._checks`: checks and coercion of :func:`solve`'s arguments;
- :mod:`daskpd.solvers._data`: data, scoring (:func:`score_rows`, :func:`metrics_for`) and
  run descriptions;
- :mod:`daskpd.solvers._loop`: the loop over epochs, evaluation, checkpoints, divergence
  checks and recovery.
"""

from __future__ import annotations

import numpy as np

from daskpd.solvers._checks import (
    _check_eval_every,
    _check_nonnegative_float,
    _check_positive_int,
    _coerce_warm_start,
)
from daskpd.solvers._data import (
    _as_data,
    _check_n_features,
    _is_in_memory,
    metrics_for,  # noqa: F401 (imported from here by daskpd.cli)
    score_rows,  # noqa: F401 (imported from here by daskpd.cli)
)
from daskpd.solvers._loop import _loop
from daskpd.solvers._registry import (
    available_solvers,
    get_solver,
    make_options,
    register_solver,
)
from daskpd.solvers._seeds import _root_seed, block_seeds, epoch_seed
from daskpd.solvers._types import (
    DivergenceError,
    EpochInfo,
    Iterate,
    Solver,
    SolveResult,
    TrainingFailed,
    load_model,  # noqa: F401 (imported from here by daskpd.cli)
)

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
        :func:`daskpd.data.as_dataset`.
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
