"""One-vs-rest CoCoA+ for multiclass data: every class's problem in one visit of each row.

A dataset of task ``"multiclass"`` (classes ``c_0 < ... < c_{K-1}``, :mod:`daskpd.data`)
trained with a classification loss is ``K`` binary problems, problem ``k`` with labels ``+1``
for the rows of class ``c_k`` and ``-1`` for the others, each the CoCoA+ problem of
:mod:`daskpd.solvers.cocoa` with its own ``w_k`` and dual block ``z[:, k]``. They share the
rows, so a round runs them together: one group (``grid`` 1, ``sigma`` 1: serial dual
coordinate ascent, liblinear's method), one random order a round (``local_passes`` passes,
each in its own order, with that option), and for each row visited
the kernel :func:`daskpd.kernels.cocoa_multiclass.one_vs_rest_pass` takes the step of every
class. Out of core the rows are read once a round for all ``K`` problems, where ``K`` binary
runs would read them ``K`` times.

Shrinking (the box losses: hinge, squared hinge, smoothed hinge; ``CocoaOptions.shrinking``,
on by default for them, as for binary data). After the full pass, each class runs the binary
solver's shrunk passes (liblinear's heuristic, :func:`daskpd.kernels.cocoa.shrunk_passes`)
on its own active rows: the rows the full pass left at a bound with a gradient pushing them
out are dropped, and the rest (near a solution of a near-separable set, a small share of the
rows) are visited again until the spread of the class's projected gradients has fallen by
``shrink_ratio``. A round then does many cheap passes for one full one, as liblinear's loop
does; one plain pass a round is far too little work for the hinge (a 3-class 2000 x 50 set
at ``alpha = 1e-4``: class gaps 0.53-0.57 at primals 0.54-0.59 after 50 plain rounds,
0.003-0.007 with shrinking, which also does better per nonzero read; docs/multiclass.md).
The certificate does not depend on the shrinking: the full pass certifies the round's
start, and a round whose full pass shows the run's stop (``tol``) skips its shrunk passes,
as the binary solver's does.

Certificates: as in the binary solver, the pass computes each class's primal and dual
sums at the round's start ``(w_t, z_t)``, so every round certifies the point it started
from, class by class: ``P_k(w_k) - D_k(z_k)`` bounds how far ``w_k`` is from its problem's
optimum. The run's ``gap`` is their sum, the gap of the joint problem
``sum_k P_k``; it stops once that sum is within ``tol`` (so is every class's gap) and
returns the certified start of its last round, one round behind the newest weights.

Graph shape: in-process, the rows are read here and the rounds run here. With a client,
one task reads the rows on a worker, where they stay (a future) with the duals; a round is
one task there, and only the round's sums (3 numbers a class) and, at the end, the weights
come back.

Not here (refused with a message naming the option): several row groups, threads, streamed
rows, screening (the binary solver's exact leaving out of inactive rows), class weights on a
store (in one-vs-rest they weigh the rows of each problem differently) and checkpoints.
Multinomial logistic regression is not one-vs-rest: its per-row dual lives on a simplex
over the ``K`` classes, a ``K``-dimensional subproblem per visit (Yu, Huang and Lin, Machine
Learning 2011), so it needs its own kernel; none is written yet.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from daskpd.kernels import cocoa as binary_kernels
from daskpd.kernels import cocoa_multiclass as kernels
from daskpd.kernels.cocoa import row_norms
from daskpd.solvers.driver.seeds import epoch_seed

__all__ = ["OneVsRestResult", "one_vs_rest", "run_multiclass"]

#: The losses of one-vs-rest CoCoA+ by name (the classification losses of CoCoA+).
LOSSES = ("hinge", "smooth_hinge", "squared_hinge", "logistic")


class _Rows(NamedTuple):
    """All rows as the kernel reads them, with each row's class index."""

    indptr: np.ndarray
    indices: np.ndarray
    vals: np.ndarray
    binary: bool
    label: np.ndarray
    weight: np.ndarray
    norm_sq: np.ndarray


@dataclass(frozen=True)
class OneVsRestResult:
    """The outcome of a one-vs-rest run.

    Attributes
    ----------
    classes : ndarray of shape (n_classes,)
        The class labels, increasing; problem ``k`` is "class ``classes[k]`` or not".
    w : ndarray of shape (n_classes, n_features)
        The certified weights of each class's problem (the start of the last round).
    z : ndarray of shape (n_samples, n_classes)
        The dual iterate paired with ``w``.
    primal, dual, gaps : ndarray of shape (n_classes,)
        Each class's ``P_k(w_k)``, ``D_k(z_k)`` and their difference.
    gap : float
        ``sum(gaps)``, the duality gap of the joint problem.
    n_epochs : int
        Rounds run (each one pass over the rows for every class).
    converged : bool
        Whether ``gap <= tol``.
    stop_reason : str
        ``"tol"``, ``"max_epochs"``, ``"time_limit"`` or ``"callback"``.
    history : tuple of dict
        One row per round: ``epoch``, ``seconds``, ``primal``, ``dual``, ``gap`` (sums over
        the classes), ``class_primal``, ``class_dual``, ``class_gap``, ``shrunk_passes``
        (lists, one entry per class), ``shrunk_nonzeros`` (the nonzeros the round's shrunk
        passes read, all classes) and, with test data, its
        :func:`daskpd.metrics.multiclass_metrics` as ``test_accuracy``, ``test_macro_f1``,
        ``test_auprc`` (per class).
    row_visits : ndarray of shape (n_samples,), int64
        How many times the full passes visited each row (all classes together):
        ``n_epochs`` times ``local_passes`` for every row of weight > 0. The shrunk passes'
        visits, class by class to the rows still active, are counted in nonzeros in the
        history (``shrunk_nonzeros``).
    solver : str
        ``"cocoa"``.
    """

    classes: np.ndarray
    w: np.ndarray
    z: np.ndarray
    primal: np.ndarray
    dual: np.ndarray
    gaps: np.ndarray
    gap: float
    n_epochs: int
    converged: bool
    stop_reason: str
    history: tuple
    row_visits: np.ndarray
    solver: str = "cocoa"
    objective: dict = field(default_factory=dict)


def check_one_vs_rest(problem, data, options=None) -> None:
    """Raise ValueError, naming the parameter, for what one-vs-rest CoCoA+ does not run.

    Parameters
    ----------
    problem : daskpd.problem.Problem
    data : Dataset-like
        Of task ``"multiclass"``.
    options : CocoaOptions, optional
    """
    loss = str(problem.loss.name)
    if loss not in LOSSES:
        raise ValueError(
            f"multiclass data trains one-vs-rest with a classification loss ({', '.join(LOSSES)})"
            f"; got loss={loss!r}"
        )
    if str(problem.regularizer.name) != "l2":
        raise ValueError(
            f"one-vs-rest CoCoA+ needs regularizer='l2', got {problem.regularizer.name!r}"
        )
    if getattr(problem, "class_weight", None) is not None:
        raise ValueError(
            "class_weight is not supported on multiclass data (one-vs-rest would weigh each "
            "class's problem differently); store sample weights instead"
        )
    classes = data.classes
    if classes is None or classes.shape[0] < 2:
        raise ValueError(
            f"multiclass training needs at least 2 classes, got {0 if classes is None else 1}"
        )
    if options is None:
        return
    unsupported = {
        "grid": options.grid not in (None, 1),
        "sigma": options.sigma not in (None, 1, 1.0),
        "threads": options.threads not in (None, 1),
        "rows": options.rows == "stream",
        "screening": options.screening is True,
    }
    for name, refused in unsupported.items():
        if refused:
            raise ValueError(
                f"solver 'cocoa' on multiclass data runs one row group in one thread with its "
                f"rows in memory, without screening; got {name}={getattr(options, name)!r}"
            )
    if options.shrinking and int(problem.loss.code) not in binary_kernels.BOX_LOSSES:
        raise ValueError(
            f"shrinking=True needs a loss whose dual lives on a box (hinge, squared_hinge, "
            f"smooth_hinge), not loss={loss!r}"
        )


def read_rows(data, classes) -> _Rows:
    """Every row of ``data`` as :func:`one_vs_rest_pass` reads them (a task on a worker)."""
    n = int(data.n_samples)
    indptr, indices, vals, y = data.read_rows_arrays(0, n)
    binary = vals is None
    vals = np.zeros(0, dtype=np.float32) if binary else np.ascontiguousarray(vals)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    y = np.asarray(y, dtype=np.float64)
    known = np.isin(y, classes)
    if not known.all():
        raise ValueError(
            f"label {y[~known][0]:g} is not one of the data's classes {classes.tolist()}"
        )
    label = np.searchsorted(classes, y).astype(np.int64)
    sample = data.sample_weight_rows(0, n)
    weight = np.ones(n) if sample is None else np.asarray(sample, dtype=np.float64).copy()
    norm_sq = np.empty(n)
    row_norms(indptr, vals, binary, norm_sq)
    return _Rows(indptr, indices, vals, binary, label, weight, norm_sq)


def _round(rows, z, w, orders, settings, shrink_seeds):
    """One round from ``(w, z)``: a pass per order, the shrunk passes, the start's sums.

    Returns new arrays ``(z_next, w_next, sums, visits, shrunk)``: ``sums`` of shape (3, K)
    holds the loss sums and the conjugate sums at ``(w, z)`` (the first pass's; later passes'
    sums are of points no certificate reports) and ``||w_k||^2``; ``visits`` counts each
    row's visits by the full passes; ``shrunk`` of shape (2, K) each class's shrunk passes and
    the nonzeros they read (zeros without shrinking, or when the full pass certified the
    start within ``settings.stop_gap``: the run stops there and returns that start).
    """
    n_classes = w.shape[1]
    z_next = z.copy()
    v = w.copy()
    sums = np.zeros((3, n_classes))
    sums[2] = np.einsum("jk,jk->k", w, w)
    visits = np.zeros(z.shape[0], dtype=np.int64)
    pg_range = np.zeros((2, n_classes))
    shrinks = settings.max_shrunk_passes > 0
    held = np.empty((z.shape[0] if shrinks else 0, n_classes))
    last = orders.shape[0] - 1
    for p in range(orders.shape[0]):
        # the first pass starts at v = w: its margins at w are the certificate's
        start = w if p == 0 else v.copy()
        found = sums[:2] if p == 0 else np.zeros((2, n_classes))
        kernels.one_vs_rest_pass(
            rows.indptr, rows.indices, rows.vals, rows.binary, rows.label, rows.weight,
            rows.norm_sq, z_next, v, start, orders[p], settings.loss_code,
            settings.loss_params, 1.0, settings.inv_alpha_n, found, visits, pg_range,
            held if p == last else _NOT_HELD,
        )  # fmt: skip
    shrunk = np.zeros((2, n_classes))
    if shrinks and not _start_certified(sums, settings):
        _shrunk_passes(rows, z_next, v, held, pg_range, orders[last], settings, shrink_seeds,
                       shrunk)  # fmt: skip
    return z_next, v, sums, visits, shrunk


#: ``held`` of a full pass whose gradients no shrunk pass reads
_NOT_HELD = np.empty((0, 1))


def _start_certified(sums, settings):
    """Whether the full pass's sums certify the round's start within the run's stop."""
    if settings.stop_gap <= 0.0:
        return False
    primal, dual = _certificate(sums, settings)
    return float((primal - dual).sum()) <= settings.stop_gap


def _shrunk_passes(rows, z, v, held, pg_range, order, settings, seeds, shrunk):
    """Each class's shrunk passes after the full pass, in place on ``z`` and ``v``.

    Class ``k`` runs the binary solver's: :func:`daskpd.kernels.cocoa.shrink_candidates`
    keeps the rows of ``order`` (the last full pass's) the pass did not leave at a bound
    pushed out, by its gradients ``held[:, k]`` and spread ``pg_range[:, k]``, and
    :func:`daskpd.kernels.cocoa.shrunk_passes` visits them, on the labels ``+-1`` of class
    ``k``, from a record of ``v[:, k]`` (one thread: the record's ``v`` field is ``v``
    itself) with the visiting seed ``seeds[k]``. Passes and nonzeros read go to
    ``shrunk[:, k]``.
    """
    steps = binary_kernels.PassSteps(1.0, settings.inv_alpha_n)
    pack = np.zeros((v.shape[0], binary_kernels.pack_width(1)))
    for cls in range(v.shape[1]):
        group = binary_kernels.GroupRows(
            rows.indptr, rows.indices, rows.vals, rows.binary,
            np.where(rows.label == cls, 1.0, -1.0), rows.weight, rows.norm_sq,
        )  # fmt: skip
        z_class = np.ascontiguousarray(z[:, cls])
        spread = np.ascontiguousarray(pg_range[:, cls])
        visit = binary_kernels.shrink_candidates(
            group, z_class, np.ascontiguousarray(held[:, cls]), settings.loss_code,
            settings.loss_params, spread, order, settings.cold_gradient,
        )  # fmt: skip
        if visit.shape[0] == 0:
            continue
        pack[:, binary_kernels.PACK_V] = v[:, cls]
        passes, read = binary_kernels.shrunk_passes(
            group, z_class, pack, settings.loss_code, settings.loss_params, steps, spread,
            settings.shrink_ratio, settings.max_shrunk_passes, seeds[cls], visit,
            binary_kernels.PACK_V,
        )  # fmt: skip
        z[:, cls] = z_class
        v[:, cls] = pack[:, binary_kernels.PACK_V]
        shrunk[:, cls] = passes, read


def _round_task(state, orders, settings, shrink_seeds):
    """Dask task: a round on the worker that keeps ``state = (rows, z, w, ...)``.

    Returns ``(rows, z_next, w_next, sums, visits, z, w, shrunk)``: the start ``(z, w)``
    stays beside the next point, since a run returns the start its last round certified.
    """
    rows, z, w = state[0], state[1], state[2]
    z_next, w_next, sums, visits, shrunk = _round(rows, z, w, orders, settings, shrink_seeds)
    return rows, z_next, w_next, sums, visits, z, w, shrunk


def _certificate(sums, settings):
    """Each class's ``(P_k, D_k)`` at the round's start from the pass's sums."""
    n = settings.n_samples
    half = 0.5 * settings.alpha * sums[2]
    return sums[0] / n + half, -sums[1] / n - half


def one_vs_rest(
    data,
    problem,
    *,
    max_epochs=100,
    tol=1e-4,
    seed=None,
    test_data=None,
    callbacks=(),
    time_limit=None,
    warm_start=None,
    options=None,
    client=None,
) -> OneVsRestResult:
    """Train every class's one-vs-rest problem with CoCoA+, one visit of each row a round.

    Parameters
    ----------
    data : Dataset-like
        Of task ``"multiclass"``.
    problem : daskpd.problem.Problem
        Loss (:data:`LOSSES`), ``l2`` regularizer and ``alpha``, as for binary data.
    max_epochs : int, default=100
    tol : float, default=1e-4
        Stop once the sum of the classes' duality gaps is at most ``tol`` (so is every
        class's gap); a run that ends otherwise (``max_epochs``, ``time_limit``, a callback)
        says ``converged=False`` unless its last certificate is within ``tol``.
    seed : numpy.random.SeedSequence, optional
        Root seed; round ``t`` visits the rows in ``default_rng(epoch_seed(seed, t))``'s
        permutations (one a full pass) and draws each class's shrunk passes' seed after
        them.
    test_data : Dataset-like, optional
        Multiclass data whose metrics the last history row reports.
    callbacks : sequence of Callback
        As :func:`daskpd.callbacks.as_callbacks` returns them; ``on_epoch_end`` gets an
        :class:`~daskpd.solvers.driver.types.EpochInfo` each round.
    time_limit : float, optional
        Seconds after which no new round starts.
    warm_start : None
        Not supported yet (ValueError otherwise): a warm start's duals would have to be
        rebuilt for every class.
    options : CocoaOptions, optional
        ``local_passes`` (full passes over the rows a round, each in its own random order;
        the first certifies the round's start), ``shrinking``, ``shrink_ratio``,
        ``max_shrunk_passes`` and ``cold_margin``, as for binary data; the others must be
        their one-group defaults (:func:`check_one_vs_rest`). None: ``CocoaOptions()``.
    client : distributed.Client, False or None
        Where the rounds run: None or False in-process; a client on one of its workers.

    Returns
    -------
    OneVsRestResult
    """
    from daskpd.solvers.cocoa._options import CocoaOptions, _settings
    from daskpd.solvers.driver.types import EpochInfo

    options = CocoaOptions() if options is None else options
    check_one_vs_rest(problem, data, options)
    classes = np.asarray(data.classes, dtype=np.float64)
    n, d, n_classes = int(data.n_samples), int(data.n_features), int(classes.shape[0])
    seed = np.random.SeedSequence(0) if seed is None else seed
    # the binary run's settings of one group (what a class's passes read: the loss, the
    # step scaling and the shrinking), with the run's tol: a round whose full pass certifies
    # its start within it stops there
    settings = dataclasses.replace(
        _settings(problem, data, options, grid=1), stop_gap=max(float(tol), 0.0)
    )
    if warm_start is not None:
        raise ValueError(
            "warm_start is not supported on multiclass data yet (the duals of a warm start "
            "would have to be rebuilt for every class)"
        )
    started = time.perf_counter()
    z = np.zeros((n, n_classes))
    w = np.zeros((d, n_classes))
    use_client = client is not None and client is not False
    if use_client:
        worker = sorted(client.scheduler_info()["workers"])[0]
        rows = client.submit(read_rows, data, classes, workers=[worker], pure=False)
        state = client.submit(
            lambda r, z0, w0: (r, z0, w0), rows, z, w, workers=[worker], pure=False
        )
    else:
        state = (read_rows(data, classes), z, w)
    history = []
    visits_total = np.zeros(n, dtype=np.int64)
    stop_reason = "max_epochs"
    last = None
    for callback in callbacks:
        callback.on_train_begin(
            {"solver": "cocoa", "epoch": 0, "max_epochs": int(max_epochs), "history": ()}
        )
    try:
        for epoch in range(1, int(max_epochs) + 1):
            rng = np.random.default_rng(epoch_seed(seed, epoch))
            passes = int(options.local_passes)
            orders = np.stack([rng.permutation(n) for _ in range(passes)]).astype(np.int64)
            shrink_seeds = rng.integers(2**63, size=n_classes, dtype=np.uint64)
            if use_client:
                state = client.submit(
                    _round_task, state, orders, settings, shrink_seeds, workers=[worker],
                    pure=False,
                )  # fmt: skip
                sums, visits, shrunk = client.submit(
                    lambda s: (s[3], s[4], s[7]), state, pure=False
                ).result()
            else:
                state = _round_task(state, orders, settings, shrink_seeds)
                sums, visits, shrunk = state[3], state[4], state[7]
            visits_total += visits
            primal, dual = _certificate(sums, settings)
            gaps = primal - dual
            row = {
                "epoch": epoch,
                "seconds": time.perf_counter() - started,
                "primal": float(primal.sum()),
                "dual": float(dual.sum()),
                "gap": float(gaps.sum()),
                "class_primal": primal.tolist(),
                "class_dual": dual.tolist(),
                "class_gap": gaps.tolist(),
                "shrunk_passes": [int(count) for count in shrunk[0]],
                "shrunk_nonzeros": int(shrunk[1].sum()),
            }
            last = (primal, dual, gaps)
            history.append(row)
            converged = row["gap"] <= tol
            stop = False
            for callback in callbacks:
                info = EpochInfo(
                    epoch=epoch, max_epochs=int(max_epochs), seconds=row["seconds"],
                    wall_seconds=time.perf_counter() - started, row=row, history=tuple(history),
                    iterate=None, solver="cocoa",
                )  # fmt: skip
                stop = bool(callback.on_epoch_end(info)) or stop
            if converged:
                stop_reason = "tol"
                break
            if stop:
                stop_reason = "callback"
                break
            if time_limit is not None and time.perf_counter() - started >= time_limit:
                stop_reason = "time_limit"
                break
    finally:
        for callback in callbacks:
            callback.on_train_end()
    # the certified point is the last round's start, kept in the state beside the new one
    if use_client:
        z_start, w_start = client.submit(lambda s: (s[5], s[6]), state, pure=False).result()
    else:
        z_start, w_start = state[5], state[6]
    primal, dual, gaps = last
    coef = np.ascontiguousarray(np.asarray(w_start).T)
    if test_data is not None:
        from daskpd import metrics
        from daskpd.solvers.common.scores import score_rows

        scores = score_rows(coef, test_data, client=client if use_client else None)
        found = metrics.multiclass_metrics(test_data.y, scores, classes)
        history[-1].update({f"test_{key}": value for key, value in found.items()})
    return OneVsRestResult(
        classes=classes,
        w=coef,
        z=np.asarray(z_start),
        primal=primal,
        dual=dual,
        gaps=gaps,
        gap=float(gaps.sum()),
        n_epochs=len(history),
        converged=float(gaps.sum()) <= tol,
        stop_reason=stop_reason,
        history=tuple(history),
        row_visits=visits_total,
        objective={
            "loss": str(problem.loss.name),
            "regularizer": "l2",
            "alpha": float(problem.alpha),
            "n_features": d,
            "task": "multiclass",
            "classes": classes.tolist(),
        },
    )


def run_multiclass(plan, client=None):
    """Run a plan on multiclass data one-vs-rest: :func:`daskpd.solve`'s multiclass answer.

    Parameters
    ----------
    plan : daskpd.solvers.driver.plan.Plan
        Of solver ``"cocoa"`` with a classification loss on data of task ``"multiclass"``.
    client : distributed.Client or None
        None: in-process.

    Returns
    -------
    SolveResult
        ``w`` of shape (n_classes, n_features) and ``z`` of shape (n_samples, n_classes);
        ``gap``, ``primal`` and ``dual`` the sums over the classes, each class's in the
        history rows (``class_gap``, ``class_primal``, ``class_dual``); ``objective`` with
        ``task`` "multiclass" and ``classes``.
    """
    from daskpd.solvers.driver.types import SolveResult

    check_one_vs_rest(plan.problem, plan.data, plan.options)
    if plan.store is not None:
        raise ValueError("checkpoints are not supported on multiclass data yet")
    started = time.perf_counter()
    found = one_vs_rest(
        plan.data,
        plan.problem,
        max_epochs=plan.max_epochs,
        tol=plan.tol,
        seed=plan.seed,
        test_data=plan.test_data,
        callbacks=plan.callbacks,
        time_limit=plan.time_limit,
        warm_start=None if plan.start is None else plan.start.w,
        options=plan.options,
        client=client,
    )
    seconds = time.perf_counter() - started
    return SolveResult(
        w=found.w,
        z=found.z,
        w_avg=None,
        history=found.history,
        n_epochs=found.n_epochs,
        gap=found.gap,
        converged=found.converged,
        stop_reason=found.stop_reason,
        solver="cocoa",
        options=plan.options,
        objective={
            **found.objective,
            "loss_params": [float(value) for value in plan.problem.loss.params],
            "regularizer_params": [],
            "class_weight": None,
        },
        seed_entropy=int(plan.seed.entropy),
        timings={"wall": seconds, "epochs": found.history[-1]["seconds"]},
    )
