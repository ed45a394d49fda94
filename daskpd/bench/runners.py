"""Running the methods of a benchmark table: daskpd's solvers, the peers, P* and alpha.

Each function returns :class:`daskpd.bench.protocol.Run` objects (or numbers); the scoring is
:mod:`daskpd.bench.protocol`'s.
"""

from __future__ import annotations

import contextlib
import math
import os
import time

import numpy as np

from daskpd.bench.data import score
from daskpd.bench.peers import LIBLINEAR_SOLVERS as PEER_SOLVERS
from daskpd.bench.protocol import LADDER, Run, budget_end, ladder_end, settled_end

#: Ladders of effort of the peers: (label of a rung, keyword arguments of its fit), and the
#: rung its own default stopping rule is (the model whose test metric the table reports).
#: Every tolerance ladder goes down to 1e-6 (P*'s own tolerance), so a peer that misses a line
#: ran out of its budget, not of rungs (a ladder that ends first says so: "ladder ended at").
LIBLINEAR_TOLS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
LIBLINEAR_DEFAULT_TOL = 1e-4  # scikit-learn's LinearSVC / LogisticRegression default
#: liblinear's solvers (``-s``) by loss, each a row of its own: on the logistic loss both its
#: primal trust-region Newton method (``-s 0``, scikit-learn's ``dual=False``) and its dual
#: coordinate descent (``-s 7``, ``dual=True``), the usual choice when columns outnumber rows.
LIBLINEAR_SOLVERS = {loss: PEER_SOLVERS[loss] for loss in ("hinge", "logistic", "squared")}
LIBLINEAR_MC_TOLS = (1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
LIBLINEAR_MC_DEFAULT_TOL = {"hinge": 0.1, "logistic": 0.01}  # LIBLINEAR's command line
#: multi-core LIBLINEAR's parallel solvers (it has none for ``-s 7``).
LIBLINEAR_MC_SOLVERS = {"hinge": 3, "logistic": 0}
SNAPML_TOLS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
SNAPML_DEFAULT_TOL = 1e-3
SGD_EPOCHS = (1, 2, 5, 10, 20, 50, 100)
SAGA_TOLS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
SAGA_DEFAULT_TOL = 1e-4
VW_PASSES = (1, 3, 10)
#: VW's online ``--l2`` candidates (its nominal translation of alpha over-regularizes: its
#: adaptive, normalized updates apply the penalty per example), chosen on the validation set.
VW_L2 = (0.0, 1e-8, 1e-6)


class PeakMemory:
    """Peak resident memory of a run: the sum of the peaks (``VmHWM``) of this process, the
    cluster's workers and their nannies, read once the run is over.

    Nothing runs beside the timed call: a thread that summed the process tree's RSS 20 times
    a second cost daskpd's runs 0.05-0.15 s of about 2 s on a 2-core machine (fresh
    2-worker clusters, hinge at 1e8 nonzeros, in turns with and without it). This process's
    peak is reset at the start (:func:`daskpd._cluster.reset_peak_rss`; where it cannot be,
    its RSS at the end counts instead of its lifetime's peak); the workers are new for the
    run. A sum of peaks is at least the peak of the sum. Where ``/proc`` has no peaks (not
    Linux), the current RSS of the process tree at the end.

    Parameters
    ----------
    client : distributed.Client
        The run's cluster.
    """

    def __init__(self, client):
        self._client = client
        self._reset = False
        self.peak = 0

    def __enter__(self):
        from daskpd._cluster import reset_peak_rss

        self._reset = reset_peak_rss()
        return self

    def __exit__(self, *exc):
        import os

        import psutil

        # by process: a LocalCluster's nannies live in this process
        peaks = dict([_process_peak()])
        if not self._reset:
            # this process's peak is its lifetime's, not the run's
            peaks[os.getpid()] = psutil.Process().memory_info().rss / 2**20
        for nanny in (False, True):
            try:
                peaks.update(self._client.run(_process_peak, nanny=nanny).values())
            except Exception:  # a cluster without nannies, or gone with the run's error
                continue
        mib = list(peaks.values())
        if any(math.isnan(value) for value in mib):
            process = psutil.Process()
            self.peak = sum(
                proc.memory_info().rss for proc in [process, *process.children(recursive=True)]
            )
            return
        self.peak = int(sum(mib) * 2**20)


def _process_peak():
    """``(pid, peak RSS in MiB)`` of the process that runs it."""
    import os

    from daskpd._cluster import peak_rss_mib

    return os.getpid(), peak_rss_mib()


@contextlib.contextmanager
def fresh_cluster(workers, memory_limit):
    """A new LocalCluster as ``daskpd train`` starts it (its start is not timed)."""
    from daskpd._cluster import ClusterOptions, cluster_client

    options = ClusterOptions(n_workers=int(workers), memory_limit=memory_limit)
    with cluster_client(options, start=True) as client:
        yield client


class _Recorder:
    """The bench's callback: the wall clock of every evaluated epoch, the chosen model, the stop.

    A point's wall time ends when the user holds its model: at the first point below each
    line of the ladder and at the chosen one, ``w`` is gathered to the client before the
    clock is read (the gathers done for other points are not counted in a point's time: a
    user who wants one model gathers one). ``chosen`` is the first evaluated point whose
    duality gap is at most ``rule_tol`` times its primal (the certificate; the test set plays
    no part); without one the run's returned model is (:func:`run_daskpd`). The run is
    stopped once the primal is at or below the last line of the ladder (nothing more to time,
    ``stopped = "the last line"``) or the wall budget is spent (``stopped = "budget"``).
    """

    def __init__(self, start, p_star, rule_tol, budget):
        self.start = start
        self.bounds = sorted((1.0 + eps) * p_star for eps in LADDER)
        self.bound = self.bounds[0]
        self.rule_tol = rule_tol
        self.budget = budget
        self.points = []
        #: (training seconds, epoch) at every epoch's end, evaluated or not
        self.clock = []
        self.chosen = None
        self.best_dual = -math.inf
        #: seconds spent gathering w for points (each point's own gather counts in its time)
        self.gathering = 0.0
        self.stopped = ""
        self._open = list(self.bounds)

    def on_train_begin(self, run):
        pass

    def on_train_end(self):
        pass

    def on_epoch_end(self, info):
        now = time.perf_counter()
        self.clock.append((float(info.seconds), int(info.epoch)))
        row = info.row
        if row is None:  # an epoch without evaluation: nothing known yet
            return self._stop(now - self.start - self.gathering >= self.budget, "budget")
        primal, gap = float(row["primal"]), float(row["gap"])
        crosses = any(primal <= bound for bound in self._open)
        chosen = self.chosen is None and gap <= self.rule_tol * abs(primal)
        w = None
        if crosses or chosen:
            # the user holds this model only once w is on the client (a certificate-only
            # row moves no w: it is gathered here)
            w = np.array(info.current_iterate().w, dtype=np.float64)
            self._open = [bound for bound in self._open if primal > bound]
        after = time.perf_counter()
        wall = after - self.start - self.gathering
        self.gathering += after - now
        self.points.append((wall, float(row["seconds"]), primal, int(row["epoch"])))
        self.best_dual = max(self.best_dual, primal - gap)
        if chosen:
            self.chosen = {
                "rule": f"gap <= {self.rule_tol:g} P",
                "wall_seconds": wall,
                "primal": primal,
                "gap": gap,
                "w": w,
            }
        # a certified start (epoch 0, DSO's) within the last line still lets the method's
        # own epochs run: their clock is what the epoch columns compare
        if primal <= self.bound and info.epoch > 0:
            return self._stop(True, "the last line")
        return self._stop(wall >= self.budget, "budget")

    def _stop(self, stop, why):
        if stop and not self.stopped:
            self.stopped = why
        return stop


#: Rows of the warm-up set (:func:`warmup_set`): enough for every kernel of a run to be
#: called, few enough that the warm-up call takes a fraction of a second.
WARMUP_ROWS = 2000


def warmup_set(config, train):
    """The set of the warm-up call: the first :data:`WARMUP_ROWS` rows of ``train``, as a
    store of the same kind (binary or valued, dtype, every column, the tiled layouts of the
    grids ``train`` has, which DSO reads) made once in ``config.workdir``, so that its
    kernels are the timed call's."""
    from daskpd.data import open_dataset, partition_dataset, write_dataset

    name = "warmup-" + os.path.basename(os.path.normpath(str(train.path)))
    path = os.path.join(config.workdir, name)
    if os.path.exists(path):
        warm = open_dataset(path)
    else:
        rows = min(int(train.n_samples), WARMUP_ROWS)
        X, y = train.read_rows(0, rows)
        warm = write_dataset(X, y, path, binary=bool(train.binary), dtype=train.dtype)
    missing = sorted({int(g) for g in train.grids} - {int(g) for g in warm.grids})
    for grid in missing:
        partition_dataset(path, grid=grid)
    return open_dataset(path) if missing else warm


def _solve(config, solver, data, alpha, seed, client, **kwargs):
    """``solve`` as :func:`run_daskpd` calls it (the table's loss, L2, ``tol=0``: the recorder
    or ``max_epochs`` ends the run), ``kwargs`` passed on."""
    from daskpd.solvers import solve

    return solve(
        data, loss=config.loss, regularizer="l2", alpha=alpha, solver=solver, tol=0.0,
        random_state=seed, client=client, **kwargs,
    )  # fmt: skip


def run_daskpd(config, solver, train, test_xy, metric, p_star, alpha, *, workers, seed):
    """One run of one of daskpd's solvers on a fresh cluster of ``workers`` processes: the
    timed call is the cluster's second, after an untimed one on :func:`warmup_set`.

    Parameters
    ----------
    config : BenchConfig
    solver : str
        Registered solver name (its options are its defaults, as a user's call has them).
    train : Dataset
    test_xy : tuple
        ``(X_test, y_test)`` in memory (the chosen model is scored after the run, untimed).
    metric : str
    p_star : float
    alpha : float
    workers : int
    seed : int

    Returns
    -------
    Run
    """
    warmup = warmup_set(config, train)
    with fresh_cluster(workers, config.memory_limit) as client:
        # a notebook user's second call: the first, on a small set of the same kind, has
        # imported the solver's modules and loaded (or compiled) its kernels in every worker
        warmed = time.perf_counter()
        _solve(config, solver, warmup, alpha, seed, client, max_epochs=2)
        warmed = time.perf_counter() - warmed
        with PeakMemory(client) as memory:
            recorder = _Recorder(time.perf_counter(), p_star, config.rule_tol, config.budget)
            result = _solve(
                config, solver, train, alpha, seed, client, max_epochs=config.max_epochs,
                time_limit=config.budget, callbacks=[recorder],
            )  # fmt: skip
            returned = time.perf_counter() - recorder.start - recorder.gathering
    if recorder.stopped == "the last line":
        ended = "the last line"
    elif result.stop_reason == "max_epochs":
        ended = f"epoch cap {config.max_epochs}"
    else:  # the solver's time limit or the recorder's budget stop
        ended = budget_end(config.budget)
    chosen = recorder.chosen
    if chosen is None:
        # no certificate within the rule: the model the call returned, evaluated at its end
        final = result.history[-1]
        chosen = {
            "rule": "budget",
            "wall_seconds": returned,
            "primal": float(final["primal"]),
            "gap": float(final["gap"]),
            "w": np.asarray(result.w, dtype=np.float64),
        }
    w = chosen.pop("w")
    X_test, y_test = test_xy
    chosen["metric"] = score(metric, y_test, X_test @ w)
    return Run(
        points=recorder.points,
        chosen=chosen,
        peak_rss_bytes=memory.peak,
        best_dual=recorder.best_dual if recorder.points else math.nan,
        clock=recorder.clock,
        ended=ended,
        warmup_seconds=warmed,
    )


def _primal(problem, w, xy):
    return float(problem.evaluate(np.asarray(w, dtype=np.float64), xy).primal)


def _ladder(rungs, fit, problem, xy, p_star, budget):
    """Fit each rung in turn; stop after the last ladder line is reached or the budget spent.

    Returns the points, the fits by rung label and what ended the ladder (``Run.ended``):
    ``"the last line"``, the budget (a rung's fit took at least ``budget`` seconds), or the
    ladder's last rung.
    """
    points, fits = [], {}
    bound = (1.0 + min(LADDER)) * p_star
    ended = ""
    for label, kwargs in rungs:
        result = fit(**kwargs)
        primal = _primal(problem, result.coef, xy) if result.coef is not None else math.nan
        points.append((result.seconds, result.seconds, primal))
        fits[label] = (result, primal)
        if primal <= bound:
            ended = "the last line"
            break
        if result.seconds >= budget:
            ended = budget_end(budget)
            break
    else:
        ended = ladder_end(_rung_text(*rungs[-1]))
        settled = _settled_above(points, p_star)
        if settled is not None:
            ended = settled_end(_rung_text(*rungs[-1]), settled)
    return points, fits, ended


#: A ladder's last two rungs whose primals agree within this (relative) have settled: more
#: effort of the same kind does not move the peer's model (:func:`_settled_above`).
SETTLED_RTOL = 1e-6


def _settled_above(points, p_star):
    """``P / P* - 1`` of a ladder that settled above its lines, else None.

    Its last two rungs (each a fit from zero, the second at a tenth of the first's tolerance)
    end within :data:`SETTLED_RTOL` of each other, and above ``P*``: the solver has converged
    to a point of its own, which no smaller tolerance moves (Snap ML's logistic dual on the
    splice-like sets: 0.9% above P* at tol 1e-6 to 1e-10).
    """
    if len(points) < 2:
        return None
    before, last = points[-2][2], points[-1][2]
    if not (math.isfinite(before) and math.isfinite(last)) or last <= p_star:
        return None
    if abs(last - before) > SETTLED_RTOL * abs(last):
        return None
    return last / p_star - 1.0


def _rung_text(label, kwargs):
    """A rung as "ladder ended at ..." names it: its tolerance, or its label and settings."""
    if isinstance(label, float):
        return label
    return f"{label} ({', '.join(f'{key}={value}' for key, value in kwargs.items())})"


def cheapest_rung(rungs, points, bound):
    """The keyword arguments of the cheapest rung whose point is at or below ``bound``."""
    reached = [
        (point[0], kwargs)
        for (_, kwargs), point in zip(rungs, points, strict=False)
        if not math.isnan(point[2]) and point[2] <= bound
    ]
    return min(reached, key=lambda pair: pair[0])[1] if reached else None


def run_peer(
    name, config, data, problem, metric, p_star, alpha, *, seed, vw_l2=None, solver=None,
    files=None,
):  # fmt: skip
    """One repeat of a peer's effort ladder and its default (chosen) model.

    Parameters
    ----------
    name : str
        One of :data:`daskpd.bench.PEERS`.
    config : BenchConfig
    data : dict
        ``train``, ``valid``, ``test``: ``(X, y)`` in memory.
    problem : Problem
    metric : str
    p_star, alpha : float
    seed : int
    vw_l2 : float, optional
        VW's ``--l2`` (chosen on the validation set by :func:`choose_vw_l2`).
    solver : int or bool, optional
        liblinear's ``-s`` (:data:`LIBLINEAR_SOLVERS`; default: the loss's first); Snap
        ML's ``dual`` (:data:`daskpd.bench.peers.SNAPML_FORMULATIONS`; default: its dual).
    files : callable, optional
        ``files(kwargs)``: the from-files clock (:func:`daskpd.bench.files.time_peer`) of
        the peer's fit with those keywords, run at the cheapest rung of this repeat's ladder
        that reached ``(1 + 1e-3) P*``; not measured when missing or when no rung reached it.

    Returns
    -------
    Run
    """
    from daskpd.bench import peers

    X, y = data["train"]
    X_test, y_test = data["test"]
    loss, workers = config.loss, config.workers
    if name == "liblinear":
        rungs = [(tol, {"tol": tol}) for tol in LIBLINEAR_TOLS]
        default = LIBLINEAR_DEFAULT_TOL
        solver = LIBLINEAR_SOLVERS[loss][0] if solver is None else solver
        fixed = {"loss": loss, "random_state": seed, "solver": solver}
        function = peers.fit_liblinear
        rule = f"its default tol = {default:g}"
    elif name == "liblinear-mc":
        rungs = [(tol, {"tol": tol}) for tol in LIBLINEAR_MC_TOLS]
        default = LIBLINEAR_MC_DEFAULT_TOL[loss]
        fixed = {"loss": loss, "threads": workers}
        function = peers.fit_liblinear_multicore
        rule = f"its default -e {default:g}"
    elif name == "snapml":
        rungs = [(tol, {"tol": tol}) for tol in SNAPML_TOLS]
        default = SNAPML_DEFAULT_TOL
        fixed = {"loss": loss, "n_jobs": workers, "random_state": seed, "max_iter": 10_000}
        if solver is not None:
            fixed["dual"] = bool(solver)
        function = peers.fit_snapml
        rule = f"its default tol = {default:g}"
    elif name == "sgd":
        rungs = [(k, {"max_iter": k, "tol": None}) for k in SGD_EPOCHS]
        default = "default"
        rungs.append((default, {"max_iter": 1000, "tol": 1e-3}))
        fixed = {"loss": loss, "random_state": seed}
        function = peers.fit_sgd
        rule = "its default (tol = 1e-3, 5 epochs without progress)"
    elif name == "saga":
        rungs = [(tol, {"tol": tol}) for tol in SAGA_TOLS]
        default = SAGA_DEFAULT_TOL
        fixed = {"loss": loss, "random_state": seed, "max_iter": 1000}
        function = peers.fit_saga
        rule = f"its default tol = {default:g}"
    elif name == "dask-ml":
        return _run_dask_ml(config, data, problem, metric, p_star, alpha)
    elif name == "vw":
        return _run_vw(config, data, metric, alpha, vw_l2)
    else:
        raise ValueError(f"unknown peer {name!r}")

    def fit(**kw):
        return function(X, y, alpha, **fixed, **kw)

    points, fits, ended = _ladder(rungs, fit, problem, (X, y), p_star, config.budget)
    from_files = math.nan
    chosen_rung = cheapest_rung(rungs, points, (1.0 + 1e-3) * p_star)
    if files is not None and chosen_rung is not None:
        from_files = files({**fixed, **chosen_rung})
    if default not in fits:
        result = fit(**dict(rungs)[default])
        fits[default] = (result, _primal(problem, result.coef, (X, y)))
    result, primal = fits[default]
    chosen = {
        "rule": rule,
        "wall_seconds": result.seconds,
        "primal": primal,
        "gap": math.nan,
        "metric": score(metric, y_test, X_test @ result.coef),
    }
    return Run(points=points, chosen=chosen, ended=ended, from_files=from_files)


def _run_dask_ml(config, data, problem, metric, p_star, alpha):
    """dask-ml's L-BFGS on a cluster of its own, a ladder of iteration counts."""
    from daskpd.bench import peers

    X, y = data["train"]
    X_test, y_test = data["test"]
    limit = config.dask_ml_memory_limit or config.memory_limit
    rungs = [(k, {"max_iter": k}) for k in config.dask_ml_iters]
    with fresh_cluster(config.workers, limit) as client, client.as_current():

        def fit(**kw):
            return peers.fit_dask_ml(X, y, alpha, loss=config.loss, **kw)

        points, fits, ended = _ladder(rungs, fit, problem, (X, y), p_star, config.budget)
    result, primal = fits[list(fits)[-1]]
    chosen = {
        "rule": f"the last rung run (max_iter = {list(fits)[-1]})",
        "wall_seconds": result.seconds,
        "primal": primal,
        "gap": math.nan,
        "metric": score(metric, y_test, X_test @ result.coef),
    }
    return Run(points=points, chosen=chosen, ended=ended)


def _vw_text(config, data, kind):
    """Paths of VW's text of the training set and of ``kind`` (written once per scale)."""
    import os

    n = data["train"][0].shape[0]
    stem = os.path.join(config.workdir, f"vw-{config.dataset}-{n}")
    label = "targets" if config.loss == "squared" else "labels"
    return f"{stem}-train-{label}.vw", f"{stem}-{kind}.vw"


def choose_vw_l2(config, data, metric, alpha):
    """VW's online ``--l2`` with the best validation metric (:data:`VW_L2`, 3 passes)."""
    from daskpd.bench import peers

    X, y = data["train"]
    X_valid, y_valid = data["valid"]
    best = None
    for l2 in VW_L2:
        fit = peers.fit_vw(
            X, y, alpha, loss=config.loss, passes=3, batch=False, X_test=X_valid, l2=l2,
            text_files=_vw_text(config, data, "valid"),
        )  # fmt: skip
        value = score(metric, y_valid, fit.test_scores)
        if best is None or value > best[1]:
            best = (l2, value)
    return best[0]


def _run_vw(config, data, metric, alpha, l2):
    """Online VW as people run it: a ladder of passes; chosen by the validation metric.

    Its weights live in VW's normalized coordinates (not readable as ours), so it has no
    primal value and reaches no line of the ladder; the table reports its test metric.
    """
    from daskpd.bench import peers

    X, y = data["train"]
    X_valid, y_valid = data["valid"]
    X_test, y_test = data["test"]
    points, by_valid = [], []
    for passes in VW_PASSES:
        fit = peers.fit_vw(
            X, y, alpha, loss=config.loss, passes=passes, batch=False, X_test=X_valid, l2=l2,
            text_files=_vw_text(config, data, "valid"),
        )  # fmt: skip
        points.append((fit.seconds, fit.seconds, math.nan))
        by_valid.append((score(metric, y_valid, fit.test_scores), passes, fit.seconds))
        if fit.seconds >= config.budget:
            break
    _, passes, seconds = max(by_valid)
    final = peers.fit_vw(
        X, y, alpha, loss=config.loss, passes=passes, batch=False, X_test=X_test, l2=l2,
        text_files=_vw_text(config, data, "test"),
    )  # fmt: skip
    chosen = {
        "rule": f"validation-best passes ({passes}) and --l2 ({l2:g})",
        "wall_seconds": seconds,
        "primal": math.nan,
        "gap": math.nan,
        "metric": score(metric, y_test, final.test_scores),
    }
    return Run(points=points, chosen=chosen, ended="no primal (its weights are not readable)")


def reference_optimum(config, X, y, problem, alpha):
    """P* of an independent tight solve, and how long it took.

    liblinear at tol :data:`REFERENCE_TOL` (hinge, logistic); LSQR to 1e-14 for ridge (the
    closed form of the damped least-squares problem).

    Returns
    -------
    dict
        ``primal``, ``seconds``, ``source``.
    """
    from daskpd.bench import peers

    start = time.perf_counter()
    if config.loss == "squared":
        from scipy.sparse.linalg import lsqr

        # (1/n) sum r_i^2 / 2 + alpha ||w||^2 / 2, times 2n: ||Xw - y||^2 + alpha n ||w||^2
        damp = math.sqrt(alpha * X.shape[0])
        w = lsqr(X, y, damp=damp, atol=1e-14, btol=1e-14, iter_lim=100_000)[0]
        source = "LSQR to 1e-14 (the closed form of ridge)"
    else:
        w = peers.fit_liblinear(X, y, alpha, loss=config.loss, tol=REFERENCE_TOL).coef
        source = f"liblinear (scikit-learn) at tol {REFERENCE_TOL:g}"
    seconds = time.perf_counter() - start
    return {"primal": _primal(problem, w, (X, y)), "seconds": seconds, "source": source}


#: Tolerance of the reference solve that gives P*.
REFERENCE_TOL = 1e-6


#: Tolerance of liblinear's fits in the validation of alpha.
VALIDATION_TOL = 1e-3


def choose_alpha(config, data, metric):
    """The alpha of :attr:`BenchConfig.alpha_grid` with the best validation metric.

    Each candidate is one liblinear fit at tol :data:`VALIDATION_TOL`. (At LIBLINEAR's
    command-line tolerance, 0.1, its dual coordinate descent stops after a pass or two on
    these sets, before the box ``C`` of small alphas binds: every small alpha gave the same
    model.)

    Returns
    -------
    alpha : float
    rows : list of dict
        ``alpha``, validation ``metric`` and fit ``seconds`` of every candidate.
    """
    from daskpd.bench import peers

    X, y = data["train"]
    X_valid, y_valid = data["valid"]
    rows = []
    for alpha in config.alpha_grid:
        fit = peers.fit_liblinear(
            X, y, alpha, loss=config.loss, tol=VALIDATION_TOL, random_state=config.seed
        )
        rows.append(
            {
                "alpha": alpha,
                "metric": score(metric, y_valid, X_valid @ fit.coef),
                "seconds": fit.seconds,
            }
        )
    best = max(rows, key=lambda row: (row["metric"], row["alpha"]))
    return best["alpha"], rows
