"""The training loop of :func:`daskpd.solvers.driver.solve`.

Epochs, the evaluation cadence (``eval_every``) and the solver's own certificates, history
and its clocks, callbacks, stop rules, checkpoints and resume, divergence checks, and the
replay of epochs after a lost worker.
"""

from __future__ import annotations

import functools
import inspect
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from daskpd.checkpoint import options_to_dict
from daskpd.solvers.common.scores import prefetch_rows, score_rows
from daskpd.solvers.driver.data import (
    _data_identity,
    _objective_description,
    metrics_for,
)
from daskpd.solvers.driver.types import DivergenceError, EpochInfo, SolveResult, TrainingFailed


def _lost_worker_errors() -> tuple:
    """Exceptions meaning "a worker or its data was lost" (the epoch is then replayed)."""
    import asyncio
    import concurrent.futures

    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    from daskpd.solvers.common.resident import OwnerLost
    from daskpd.solvers.common.shared import SharedStateLost

    return (
        KilledWorker,
        SharedStateLost,
        OwnerLost,
        CommClosedError,
        FutureCancelledError,
        asyncio.CancelledError,
        concurrent.futures.CancelledError,
    )


def loop(plan, client) -> SolveResult:
    """Run ``plan`` on ``client`` (a ``distributed.Client``, or None for in-process work).

    Parameters
    ----------
    plan : daskpd.solvers.driver.plan.Plan
        The checked run (:func:`daskpd.solvers.driver.plan.make_plan`).
    client : distributed.Client or None

    Returns
    -------
    SolveResult
    """
    method, problem, data, test_data = plan.method, plan.problem, plan.data, plan.test_data
    store = plan.store
    # a resumed run takes its checkpoint's seed
    seed = plan.seed
    # The wall clock of the call starts here: a cluster that solve() started is already up.
    progress = _Progress(started=time.perf_counter())
    spent = dict.fromkeys(("init", "epochs", "checkpoint"), 0.0)
    objective = _objective_description(problem, data)
    run_meta = {
        "solver": method.name,
        "options": options_to_dict(plan.options),
        "objective": objective,
        "data": _data_identity(data),
    }
    state = None
    if plan.resume:
        tick = time.perf_counter()
        saved = store.latest()
        if saved is not None:
            saved.check_compatible(run_meta)
            seed = saved.seed()
            state = _restore(method, problem, data, saved.arrays, seed, client, plan.options)
            state = _with_tol(method, state, plan.tol)
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
    # the test rows read by idle workers meanwhile, for the evaluations (held to the end)
    prefetched = prefetch_rows(test_data, client)
    fresh = state is None
    if state is None:
        tick = time.perf_counter()
        state = method.init(
            problem, data, seed=seed, client=client, options=plan.options, warm_start=plan.start
        )
        state = _with_tol(method, state, plan.tol)
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
            restored = _restore(method, problem, data, saved.arrays, seed, client, plan.options)
            return _with_tol(method, restored, plan.tol), saved.epoch
        fresh = method.init(
            problem, data, seed=seed, client=client, options=plan.options, warm_start=plan.start
        )
        return _with_tol(method, fresh, plan.tol), 0

    for callback in plan.callbacks:
        callback.on_train_begin(
            {
                "solver": method.name,
                "epoch": progress.epoch,
                "max_epochs": plan.max_epochs,
                "history": tuple(progress.history),
            }
        )
    lost = _lost_worker_errors()
    certify = method.certificate if method.has_certificate else None
    # a certificate that reads the data is taken in place of the cadence's evaluations; one
    # that the epoch computed anyway (CoCoA's), after every epoch that is not evaluated
    certificate_is_pass = bool(method.certificate_reads_data)
    stop_reason = "max_epochs"
    converged = False
    last_iterate = None
    retries = 0
    try:
        try:
            opening = _start_row(
                method, problem, data, state, progress, fresh, plan.max_epochs, test_data, client,
                store, plan.divergence_factor, plan.callbacks,
            )  # fmt: skip
        except lost:
            # a worker lost while the start's model was gathered: no row; the first epoch
            # meets the loss and replays as any epoch does
            opening = None
        if opening is not None:
            last_iterate, stop_reason = opening
        while opening is None and progress.epoch < plan.max_epochs:
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
                out_of_time = plan.time_limit is not None and progress.seconds >= plan.time_limit
                last_epoch = epoch >= plan.max_epochs or out_of_time
                if last_epoch:
                    # the epoch's tasks that run on after it (the run's end waits for them)
                    # are training, not the final evaluation's wait
                    settled = _settle(method, state)
                    progress.seconds += settled
                    spent["epochs"] += settled
                row = iterate = None
                evaluate = _should_evaluate(
                    plan.eval_every, epoch, progress.wall_seconds(), progress.eval_seconds,
                    progress.last_eval_cost, last_epoch, elapsed,
                    _wall_to_come(elapsed, plan.max_epochs - epoch, plan.time_limit,
                                  progress.seconds),
                    stops_at_evaluations=plan.tol > 0 and (certify is None or certificate_is_pass),
                )  # fmt: skip
                if certificate_is_pass:
                    # the run's last evaluation and test metrics need the gathered iterate
                    by_certificate = evaluate and not last_epoch and test_data is None
                else:
                    # the epoch's own certificate, read where the cadence does not evaluate;
                    # with "auto" where it does too, unless test metrics need the model: the
                    # evaluation would only gather w (37 MB at 4.7M features, a tenth of a
                    # second or more on a cluster), which the first certificate within tol
                    # does below
                    by_certificate = certify is not None and (
                        not evaluate
                        or (plan.eval_every == "auto" and test_data is None and not last_epoch)
                    )
                certified = None
                if by_certificate:
                    row = _certified_row(
                        certify, state, progress, plan.divergence_factor, store, certificate_is_pass
                    )
                    if row is not None:
                        # The first certified epoch gets the full row (the gathered w) that
                        # a stop by ``tol`` reports.
                        evaluate = row["gap"] <= plan.tol
                        if evaluate:
                            progress.history.pop()
                            # a pass certificate is of iterate()'s very point: its numbers
                            # stand, only w is gathered (not a second pass over the rows)
                            certified = row if certificate_is_pass else None
                            row = None
                if evaluate:
                    evaluation_started = time.perf_counter()
                    iterate = method.iterate(state)
                    if certified is not None:
                        iterate = replace(
                            iterate, primal=certified["primal"], dual=certified["dual"]
                        )
                    row = _checked_row(
                        problem, iterate, data, test_data, client, progress, store,
                        plan.divergence_factor, evaluation_started,
                    )  # fmt: skip
                    last_iterate = iterate
                    converged = row["gap"] <= plan.tol
                if store is not None and (
                    epoch % plan.checkpoint_every == 0 or last_epoch or converged
                ):
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
                    recover, retries, plan.max_retries, epoch, exc
                )
                spent["init"] += time.perf_counter() - rebuilding
                progress.rewind(back_to)
                converged = False
                last_iterate = None
                continue
            asked_stop = _tell_callbacks(
                plan.callbacks, method, state, progress, epoch, plan.max_epochs, row, iterate
            )
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
            # the last epoch's tasks first (training, not the evaluation's wait)
            settled = _settle(method, state)
            progress.seconds += settled
            spent["epochs"] += settled
            evaluation_started = time.perf_counter()
            last_iterate = method.iterate(state)
            _checked_row(
                problem, last_iterate, data, test_data, client, progress, store,
                plan.divergence_factor, evaluation_started,
            )  # fmt: skip
        elif last_iterate is None:
            last_iterate = method.iterate(state)
        # (Also right when resuming from the final checkpoint, whose last row is this epoch.)
        converged = progress.history[-1]["gap"] <= plan.tol
        # a run stopped at an evaluated epoch (tol with several row groups, a callback):
        # the workers idle when the call returns (a no-op when settled above)
        _settle(method, state)
    finally:
        _close(method, state)
        prefetched.clear()
        for callback in plan.callbacks:
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
        options=plan.options,
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


def _settle(method, state):
    """``method.settle(state)``, for the solvers whose epochs end before all their tasks do
    (CoCoA+: a round's shrunk passes run on after its certificate is reported); returns
    the seconds it took."""
    started = time.perf_counter()
    if state is not None:
        method.settle(state)
    return time.perf_counter() - started


def _close(method, state):
    """``method.close(state)``, for the solvers that hold something outside Dask."""
    if state is not None:
        method.close(state)


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


def _wall_to_come(epoch_seconds, epochs_left, time_limit, seconds_so_far):
    """Training seconds the rest of the budget allows, at ``epoch_seconds`` an epoch."""
    to_come = epoch_seconds * epochs_left
    if time_limit is not None:
        to_come = min(to_come, max(0.0, time_limit - seconds_so_far))
    return to_come


# With eval_every="auto", the share of the wall time that evaluation may take.
_AUTO_EVAL_SHARE = 0.1


def _should_evaluate(
    eval_every, epoch, wall_so_far, eval_so_far, last_eval_cost, last_epoch, epoch_cost,
    wall_to_come=0.0, stops_at_evaluations=False,
):  # fmt: skip
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
    epoch_cost : float
        Seconds of the epoch just run: what an evaluation is taken to cost before one was
        measured (both read every row once).
    wall_to_come : float, default=0.0
        Training seconds the rest of the run's budget allows (``max_epochs``,
        ``time_limit``), at this epoch's pace.
    stops_at_evaluations : bool, default=False
        Whether an evaluation can end the run (``tol > 0`` and a solver that does not
        certify its own epochs): the call's first evaluation then needs to fit in a tenth of
        the budget's time alone, without the final one reserved, for a run that converged
        at once to stop at once.

    Returns
    -------
    bool

    Notes
    -----
    With ``"auto"``, an evaluation is taken when it and one more of the same cost (the
    evaluation at the run's end, which is always taken) fit in 10% of the wall time the
    run then has. After the last such evaluation at wall time ``W`` the run's evaluations
    sum to at most ``0.1 (W + 2 c) - c``; the run ends after at least ``W + 2 c`` (an
    epoch and the final evaluation), so the whole run stays within 10% while evaluations
    cost about the same. The first evaluation of a call is measured against the wall time
    of the whole budget instead: a long run evaluates its first epoch (and stops there if
    it converged at once, a warm start from an optimum), a run whose budget is a few
    epochs evaluates at its end only (and with ``stops_at_evaluations``, its first epoch
    too if that evaluation alone fits in a tenth of the budget's time).
    """
    if last_epoch:
        return True
    if eval_every != "auto":
        return epoch % eval_every == 0
    if last_eval_cost is None:
        cost, wall = epoch_cost, wall_so_far + wall_to_come
        if stops_at_evaluations:
            return cost <= _AUTO_EVAL_SHARE * (wall + cost)
    else:
        cost, wall = last_eval_cost, wall_so_far
    return eval_so_far + 2.0 * cost <= _AUTO_EVAL_SHARE * (wall + 2.0 * cost)


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


def _start_row(method, problem, data, state, progress, fresh, max_epochs, test_data, client,
               store, factor, callbacks):  # fmt: skip
    """The epoch-0 row of a solver whose start comes certified (DSO's from the dual solver).

    ``method.start_certificate(state)`` gives ``(primal, dual)`` of the epoch-0 iterate, or
    None. Its row is a certificate-only one, or with test data a full one (the iterate
    gathered for the metrics, its numbers kept: no pass); the callbacks see it as epoch 0.
    ``tol`` does not end the run here: the solver asked for runs at least one epoch (DSO's
    start meets the default ``tol`` on most problems, and a user who picks DSO wants its
    epochs). Returns ``(iterate, "callback")`` when a callback asks to stop, else None.
    """
    if not fresh:
        return None
    started = time.perf_counter()
    certificate = method.start_certificate(state)
    if certificate is None:
        return None
    primal, dual = (float(v) for v in certificate)
    iterate = None
    if test_data is not None:
        iterate = replace(method.iterate(state), primal=primal, dual=dual)
        row = _checked_row(problem, iterate, data, test_data, client, progress, store, factor,
                           started)  # fmt: skip
    else:
        row = _certified_row(lambda _: (primal, dual), state, progress, factor, store)
    asked_stop = _tell_callbacks(callbacks, method, state, progress, 0, max_epochs, row, iterate)
    return (iterate, "callback") if asked_stop else None


def _tell_callbacks(callbacks, method, state, progress, epoch, max_epochs, row, iterate) -> bool:
    """Give every callback the :class:`EpochInfo` of ``epoch``; whether one asked to stop."""
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
    for callback in callbacks:
        # Every callback sees every epoch, even after an earlier one asked to stop.
        asked_stop = bool(callback.on_epoch_end(info)) or asked_stop
    return asked_stop


def _certified_row(certify, state, progress, factor, store, is_pass=False) -> dict | None:
    """The history row of the solver's own certificate ``certify(state)``, or None without one.

    Rows from a certificate carry ``certificate_only=True`` and no test metrics; reading
    the certificate counts as evaluation time. It sets the cadence's cost of an evaluation
    only when it is a pass over the data (``is_pass``): one read from the epoch's sums is
    much cheaper than an evaluation.
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
    cost = time.perf_counter() - started
    progress.eval_seconds += cost
    if is_pass:
        progress.last_eval_cost = cost
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


def _with_tol(method, state, tol):
    """The state of a solver that can end an epoch early once ``tol`` is certified.

    A solver with a ``stop_at_gap(state, tol)`` method (CoCoA+: a round whose certifying
    pass already shows the gap within ``tol`` skips the rest of its passes, since the run
    then stops and returns that round's start) gets the run's ``tol``; others are as given.
    """
    return method.stop_at_gap(state, tol) if tol > 0 else state


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
            if iterate.xtz is not None:
                kwargs["xtz"] = iterate.xtz
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
