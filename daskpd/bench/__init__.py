"""The benchmark suite: daskpd's solvers and the peers, timed to a certified optimum.

``daskpd bench`` and ``pipelines/benchmarks.py`` run :func:`run_benchmarks`. For each scale
(target nonzeros of the training set) it makes training, validation and test sets
(:mod:`daskpd.bench.data`, cached in the work directory), chooses ``alpha`` by validation
metric over :attr:`BenchConfig.alpha_grid`, and for that alpha and for ``config.alpha`` (one
table each, one when they coincide):

1. P* from an independent tight solve of the same objective (liblinear at tol 1e-6, or the
   closed form for ridge), its time reported;
2. daskpd's solvers, each on a fresh LocalCluster of ``workers`` processes, the timed call
   a notebook user's second one (the cluster's start and a first call on a small set of the
   same kind, :func:`daskpd.bench.runners.warmup_set`, are not timed; everything after them
   is, reads and evaluation included), and the default solver once more on 1 worker; every
   evaluated epoch is a point (wall seconds, epoch seconds, primal);
3. the peers on the same data in memory, each over a ladder of effort (tolerances, passes);
4. for every method, the wall seconds to ``P <= (1 + eps) P*`` for eps in 1e-1, 1e-2, 1e-3,
   1e-4, as true medians over ``repeats`` runs (first run included; the methods take turns
   within each repeat, :func:`_methods`) with their spread, and
   the test metric of the model its stopping rule chose without the test set;
5. the target lines, computed from those rows (:func:`daskpd.bench.protocol.target_lines`).

The scoring is :mod:`daskpd.bench.protocol`, the runs :mod:`daskpd.bench.runners`, the
tables and plots :mod:`daskpd.bench.report`. :mod:`daskpd.bench.costmodel` models the
default solver's time from measured runs, for planning runs larger than the measured ones.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass

from daskpd.bench.data import DATASETS, METRICS, datasets, in_memory, peer_feasibility
from daskpd.bench.protocol import (
    LADDER,
    Run,
    reference_check,
    summarize,
    target_lines,
    true_median,
)
from daskpd.bench.report import (
    markdown,
    plot,
    readme_results,
    replace_readme_results,
    replace_section,
    section_span,
)

__all__ = [
    "DATASETS",
    "LADDER",
    "PEERS",
    "BenchConfig",
    "Run",
    "markdown",
    "peer_feasibility",
    "peer_rows",
    "plot",
    "readme_results",
    "replace_readme_results",
    "replace_section",
    "rescore",
    "run_benchmarks",
    "section_span",
    "summarize",
    "target_lines",
    "true_median",
]

#: The peers ``daskpd bench`` knows.
PEERS = ("liblinear", "liblinear-mc", "snapml", "sgd", "saga", "vw", "dask-ml")

#: Losses each peer has (a peer without the table's loss gets a "not run" row saying so).
PEER_LOSSES = {
    "liblinear": ("hinge", "logistic", "squared"),
    "liblinear-mc": ("hinge", "logistic"),
    "snapml": ("hinge", "logistic"),
    "sgd": ("hinge", "logistic", "squared"),
    "saga": ("logistic", "squared"),
    "vw": ("hinge", "logistic", "squared"),
    "dask-ml": ("logistic", "squared"),
}


def default_solver() -> str:
    """The ``solver`` a user's :func:`daskpd.solve` call gets when it names none."""
    import inspect

    from daskpd.solvers import solve

    return inspect.signature(solve).parameters["solver"].default


@dataclass(frozen=True)
class BenchConfig:
    """What :func:`run_benchmarks` measures.

    Parameters
    ----------
    scales : tuple of int
        Target nonzeros of the training sets.
    workdir : str
        Where datasets (reused across runs) and raw results go.
    repeats : int
        Runs of every method; the tables show true medians and the spread.
    alpha : float
        The fixed regularization strength of the second table (the first is at the validated
        alpha).
    alpha_grid : tuple of float
        Candidates of the validation; empty: only ``alpha``.
    loss : {"hinge", "logistic", "squared"}
    solvers : tuple of str or None
        daskpd's solvers (``None``: the default solver, DSO, and SPDC on the smooth losses);
        the first one is the one the target lines judge and the one also run on 1 worker.
    max_epochs : int
        Epoch cap of daskpd's runs.
    budget : float
        Wall seconds a daskpd run may take, and the fit time after which a peer's ladder stops.
    rule_tol : float
        daskpd's stopping rule: the first point whose duality gap is at most ``rule_tol``
        times its primal is the chosen model.
    workers : int
        Worker processes of daskpd's clusters; the multi-core peers get as many threads.
    memory_limit : str
        Memory limit of each worker.
    peer_memory_bytes : int
        Memory one peer process may use for its copy of the data.
    positive_rate : float
        Positive fraction of the generated classification data.
    peers : tuple of str
        Subset of :data:`PEERS`.
    seed : int
        Data seed; repeat ``r`` of a method uses seed ``seed + r``.
    dask_ml_iters : tuple of int
        dask-ml's ladder of L-BFGS iteration counts.
    dask_ml_memory_limit : str or None
        Memory limit of each of dask-ml's own workers (``None``: ``memory_limit``).
    dataset : {"splice", "text", "dna", "ridge"}
    hash_bits : int
        Splice sets: hash the weighted-degree features into ``2**hash_bits`` columns
        (0: the explicit 4.66M features).
    from_files : bool
        Also time the "from files" clock (:mod:`daskpd.bench.files`): the default solver's
        fresh ``daskpd train`` process on the store, and each peer's fresh process from its
        ``.npz`` input at its cheapest rung to ``(1 + 1e-3) P*``.
    """

    scales: tuple = (10**7,)
    workdir: str = "bench-work"
    repeats: int = 3
    alpha: float = 1e-5
    alpha_grid: tuple = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
    loss: str = "hinge"
    solvers: tuple | None = None
    max_epochs: int = 500
    budget: float = 120.0
    rule_tol: float = 1e-3
    workers: int = 2
    memory_limit: str = "4GiB"
    peer_memory_bytes: int = 8 * 2**30
    positive_rate: float = 0.01
    peers: tuple = PEERS
    seed: int = 0
    dask_ml_iters: tuple = (5, 20, 50)
    dask_ml_memory_limit: str | None = None
    dataset: str = "splice"
    hash_bits: int = 0
    from_files: bool = True

    def __post_init__(self):
        if isinstance(self.hash_bits, bool) or self.hash_bits not in (0, *range(8, 31)):
            raise ValueError(f"hash_bits must be 0 or 8..30, got {self.hash_bits!r}")
        if not self.scales or any(int(s) < 1000 for s in self.scales):
            raise ValueError(f"scales must be target nonzero counts >= 1000, got {self.scales!r}")
        if int(self.repeats) < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats!r}")
        for name in ("alpha", "budget", "rule_tol"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if any(not float(a) > 0 for a in self.alpha_grid):
            raise ValueError(f"alpha_grid must hold numbers > 0, got {self.alpha_grid!r}")
        if self.loss not in ("hinge", "logistic", "squared"):
            raise ValueError(f"loss must be 'hinge', 'logistic' or 'squared', got {self.loss!r}")
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {DATASETS}, got {self.dataset!r}")
        if (self.loss == "squared") != (self.dataset == "ridge"):
            raise ValueError(
                f"dataset 'ridge' is regression and needs loss 'squared', the classification "
                f"sets a classification loss; got dataset={self.dataset!r}, loss={self.loss!r}"
            )
        if int(self.workers) < 1 or int(self.max_epochs) < 1:
            raise ValueError(
                f"workers and max_epochs must be >= 1, got {self.workers!r}, {self.max_epochs!r}"
            )
        if not self.dask_ml_iters or any(int(k) < 1 for k in self.dask_ml_iters):
            raise ValueError(f"dask_ml_iters must be counts >= 1, got {self.dask_ml_iters!r}")
        from dask.utils import parse_bytes

        for name, value in (
            ("memory_limit", self.memory_limit),
            ("dask_ml_memory_limit", self.dask_ml_memory_limit or self.memory_limit),
        ):
            try:
                parse_bytes(value)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be a size like '4GiB', got {value!r}") from None
        unknown = set(self.peers) - set(PEERS)
        if unknown:
            raise ValueError(f"unknown peers {sorted(unknown)}; known: {', '.join(PEERS)}")
        if self.solvers is not None:
            from daskpd.solvers import available_solvers

            known = {*available_solvers(), default_solver()}
            unknown = set(self.solvers) - known
            if not self.solvers or unknown:
                raise ValueError(
                    f"solvers must name registered solvers, got {self.solvers!r}; "
                    f"known: {', '.join(sorted(known))}"
                )

    def daskpd_solvers(self) -> tuple:
        """daskpd's solvers of the tables, the judged (default) one first."""
        if self.solvers is not None:
            return tuple(self.solvers)
        chosen = [default_solver(), "dso"]
        if self.loss in ("logistic", "squared"):
            chosen.append("spdc")
        return tuple(dict.fromkeys(chosen))


def run_benchmarks(config: BenchConfig, progress=None) -> dict:
    """Run every table of ``config``; save the raw results in ``workdir/results.json``.

    Parameters
    ----------
    config : BenchConfig
    progress : callable, optional
        Called with a line of text as each method finishes.

    Returns
    -------
    dict
        ``config``, ``machine`` and ``tables`` (one per scale and alpha), ready for
        :func:`daskpd.bench.report.markdown`.
    """
    from daskpd.bench import runners

    say = progress or (lambda line: None)
    os.makedirs(config.workdir, exist_ok=True)
    results = {"config": asdict(config), "machine": _machine(), "tables": []}
    metric = METRICS[config.dataset]
    for nnz in config.scales:
        train, valid, test = datasets(config, nnz)
        train, prep_seconds = _partitioned(train, config.workers)
        ok, reason = peer_feasibility(train.nnz, train.n_samples, config.peer_memory_bytes)
        if not ok:
            raise ValueError(
                f"scale {nnz:.0e}: P* needs the in-memory reference solve, and {reason}"
            )
        data = {"train": in_memory(train), "valid": in_memory(valid), "test": in_memory(test)}
        alphas = [(config.alpha, "fixed")]
        validation = []
        if config.alpha_grid:
            chosen, validation = runners.choose_alpha(config, data, metric)
            say(f"{nnz:.0e}: validated alpha {chosen:g}")
            alphas = [(chosen, "validated")] + (
                [(config.alpha, "fixed")] if chosen != config.alpha else []
            )
        for alpha, source in alphas:
            table = _table(config, train, data, metric, alpha, say)
            table.update(
                nnz=int(train.nnz), n_samples=int(train.n_samples),
                n_features=int(train.n_features), n_valid=int(valid.n_samples),
                n_test=int(test.n_samples), positive_rate=_positive_rate(data["train"][1]),
                partition_seconds=prep_seconds,
                alpha=alpha, alpha_source=source if len(alphas) > 1 or not validation
                else "validated, and the fixed one", validation=validation,
            )  # fmt: skip
            results["tables"].append(table)
            _save(results, os.path.join(config.workdir, "results.json"))
    results["machine"]["load_average"].append(os.getloadavg()[0])
    _save(results, os.path.join(config.workdir, "results.json"))
    return results


def rescore(results: dict) -> dict:
    """Score saved results again (the runs' points are kept): summaries and target lines.

    Parameters
    ----------
    results : dict
        What :func:`run_benchmarks` returned or saved in ``results.json``.

    Returns
    -------
    dict
        The same results, rescored in place.
    """
    for table in results["tables"]:
        for row in table["methods"]:
            row["summary"] = summarize([Run(**run) for run in row["runs"]], table["p_star"])
        table["lines"] = target_lines(table)
    return results


def _table(config, train, data, metric, alpha, say):
    """Every method of one table, scored."""
    from daskpd.bench import files, runners
    from daskpd.problem import Problem

    problem = Problem(config.loss, "l2", alpha)
    reference = runners.reference_optimum(config, *data["train"], problem, alpha)
    p_star = reference["primal"]
    say(f"P* = {p_star:.8g} ({reference['source']}, {reference['seconds']:.3g} s)")
    solvers = config.daskpd_solvers()
    plan = [(f"daskpd {s}", s, config.workers) for s in solvers]
    plan.append((f"daskpd {solvers[0]}, 1 worker", solvers[0], 1))

    def daskpd_run(repeat, solver, workers, from_files):
        run = runners.run_daskpd(
            config, solver, train, data["test"], metric, p_star, alpha, workers=workers,
            seed=config.seed + repeat,
        )  # fmt: skip
        if from_files:
            # the certificate of the rule: gap <= rule_tol P* puts P within (1 + rule_tol) P*
            run.from_files = files.time_daskpd(
                train.path, loss=config.loss, alpha=alpha, solver=solver,
                tol=config.rule_tol * p_star, workers=workers, memory_limit=config.memory_limit,
                max_epochs=config.max_epochs, budget=config.budget, seed=config.seed + repeat,
            )  # fmt: skip
        return run

    entries = [
        (
            label, "daskpd",
            lambda r, s=solver, k=workers, f=index == 0 and config.from_files: daskpd_run(
                r, s, k, f
            ),
        )
        for index, (label, solver, workers) in enumerate(plan)
    ]  # fmt: skip
    npz = None
    if config.from_files and any(name in files.PEER_FUNCTIONS for name in config.peers):
        npz = files.peer_input(config.workdir, os.path.basename(train.path), *data["train"])
    vw_l2 = None
    for name in config.peers:
        if config.loss not in PEER_LOSSES[name]:
            entries.append((name, "peer", f"{name} has no {config.loss} loss"))
            continue
        if name == "vw":
            vw_l2 = runners.choose_vw_l2(config, data, metric, alpha)
        for label, solver in peer_rows(name, config.loss, config.workers):
            timer = None
            if npz is not None and name in files.PEER_FUNCTIONS:
                timer = lambda kwargs, n=name: files.time_peer(n, npz, alpha, kwargs)  # noqa: E731
            entries.append(
                (
                    label, "peer",
                    lambda r, n=name, l2=vw_l2, s=solver, t=timer: runners.run_peer(
                        n, config, data, problem, metric, p_star, alpha, seed=config.seed + r,
                        vw_l2=l2, solver=s, files=t,
                    ),
                )
            )  # fmt: skip
    rows = _methods(entries, config, say)
    for row in rows:
        row["summary"] = summarize([Run(**run) for run in row["runs"]], p_star)
    lowest = min((p[2] for row in rows for run in row["runs"] for p in run["points"]),
                 default=math.nan)  # fmt: skip
    duals = [run["best_dual"] for row in rows for run in row["runs"]]
    duals = [d for d in duals if math.isfinite(d)]
    table = {
        "loss": config.loss,
        "metric": metric,
        "workers": config.workers,
        "reference": {**reference, **reference_check(p_star, lowest, max(duals, default=math.nan))},
        "p_star": p_star,
        "default": f"daskpd {solvers[0]}",
        "single_worker": f"daskpd {solvers[0]}, 1 worker",
        "methods": rows,
    }
    table["lines"] = target_lines(table)
    return table


def peer_rows(name, loss, workers):
    """The rows of a peer in a table: ``(label, solver)``, one per solver it offers.

    liblinear gets a row per solver of the loss (the logistic loss: ``-s 0`` and ``-s 7``),
    Snap ML one per formulation (the logistic loss: ``snapml dual`` and ``snapml primal``),
    multi-core LIBLINEAR is labelled by its solver and threads, the others by their name.
    """
    from daskpd.bench.peers import SNAPML_FORMULATIONS
    from daskpd.bench.runners import LIBLINEAR_MC_SOLVERS, LIBLINEAR_SOLVERS

    if name == "liblinear":
        return [(f"liblinear -s {solver}", solver) for solver in LIBLINEAR_SOLVERS[loss]]
    if name == "liblinear-mc":
        return [(f"liblinear-mc -s {LIBLINEAR_MC_SOLVERS[loss]} -m {workers}", None)]
    if name == "snapml" and len(SNAPML_FORMULATIONS.get(loss, ())) > 1:
        return [
            (f"snapml {'dual' if dual else 'primal'}", dual) for dual in SNAPML_FORMULATIONS[loss]
        ]
    return [(name, None)]


def _partitioned(train, grid):
    """The training set with DSO's tiled layout of ``grid`` stored (once, as a user would
    run ``daskpd partition``), and the seconds that took (0 when it was there)."""
    import time

    from daskpd.data import open_dataset, partition_dataset

    if int(grid) in [int(g) for g in train.grids]:
        return train, 0.0
    start = time.perf_counter()
    partition_dataset(train.path, grid=int(grid))
    return open_dataset(train.path), time.perf_counter() - start


def _methods(entries, config, say):
    """``repeats`` runs of every method, in turns: repeat ``r`` of each method, in the
    table's order, before repeat ``r + 1`` of any.

    The methods a target line compares then run minutes apart, not a whole method's
    repeats apart: on a shared host the pace of two busy processes drifted by a third
    within an hour while single-threaded liblinear's did not (BENCHMARKS.md, the hinge 1e8
    runs), and a ratio is only as good as the pace its two sides ran at. ``entries``:
    ``(label, kind, run_once)``, or ``(name, "peer", reason)`` for a peer not run; a
    failure is reported in its method's row and ends that method's runs, not the table.
    """
    rows = []
    for label, kind, run_once in entries:
        if isinstance(run_once, str):
            rows.append(_not_run(label, run_once))
        else:
            rows.append({"method": label, "kind": kind, "status": "ok", "reason": "", "runs": []})
    for repeat in range(config.repeats):
        for row, (_, _, run_once) in zip(rows, entries, strict=True):
            if row["status"] != "ok":
                continue
            try:
                run = run_once(repeat)
            except Exception as exc:  # noqa: BLE001 - a failing method is a row, not the end
                row.update(status="failed", reason=f"{type(exc).__name__}: {exc}"[:300], runs=[])
                continue
            row["runs"].append(asdict(run))
    for row in rows:
        if row["status"] != "not run":
            say(f"{row['method']}: {row['status']} {row['reason']}".rstrip())
    return rows


def _not_run(name, reason):
    return {"method": name, "kind": "peer", "status": "not run", "reason": reason, "runs": []}


def _positive_rate(y):
    import numpy as np

    return float(np.mean(np.asarray(y) > 0))


def _save(results, path):
    from daskpd.data.atomic import write_text_atomic

    write_text_atomic(path, json.dumps(results, indent=1, default=_json_default))


def _json_default(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _machine():
    import platform

    import psutil

    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": [os.getloadavg()[0]],
        "commit": _commit(),
    }


def _commit():
    """The short commit of the daskpd checkout measured (``+`` when its tree has changes),
    or ``""`` outside a git checkout."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
            check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "daskpd"],
            cwd=here, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return commit + ("+" if dirty else "")
