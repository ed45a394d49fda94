"""The ``daskpd demo`` command: what ``daskpd train`` runs by default, and DSO beside it.

The demo generates splice-site-like data (weighted-degree features of DNA windows, 5%
positives) into zarr stores, trains with the default solver (``solver="auto"``) on a
LocalCluster to a certified duality gap, and prints its test AUPRC, its gap and where the
time went. Then it runs DSO, the method of the DSO paper, on the same data, as
``daskpd train --solver dso`` would, and prints what it reached and what it cost (seconds,
epochs, its gap, the tiled layout its grid needs) beside the default's, so that the paper's
method is seen where it stands. Both runs' kernels are compiled (or loaded from numba's
cache) on a small set first, so neither run's seconds count compilation.
"""

from __future__ import annotations

import argparse
import sys

from daskpd.cli._options import (
    UsageError,
    _add_cluster_options,
    _nonnegative_int,
    _positive_int,
    _run_client,
    add_options,
    option,
    subcommand,
)
from daskpd.cli._training import (
    _add_training_options,
    _make_plan,
    _option_values,
    _RunFailed,
    _train,
)


@subcommand(
    "demo",
    "generate splice-site-like data, train as `daskpd train` does by default on a LocalCluster, "
    "run DSO beside it on the same data, report",
)
def _add_demo(parser: argparse.ArgumentParser) -> None:
    data_options = (
        option(
            "--dir",
            "keep the data and model in D (default: a temporary directory, removed at the end)",
            metavar="D",
        ),
        option(
            "--n-samples",
            "training rows (default 20000; a quarter more for testing)",
            _positive_int,
            default=20000,
        ),
    )
    add_options(parser, data_options)
    _add_training_options(
        parser,
        defaults={"solver": "auto", "loss": "hinge", "alpha": 1e-4, "epochs": 50, "tol": 1e-4},
    )
    dso_epochs = option(
        "--dso-epochs",
        "epoch budget of the DSO run shown beside the default one (default 10; 0: none)",
        _nonnegative_int,
        default=10,
        metavar="K",
    )
    add_options(parser, (dso_epochs,))
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_demo)


def _run_demo(args) -> int:
    import shutil
    import tempfile
    import time
    from pathlib import Path

    from daskpd._cluster import worker_addresses
    from daskpd.data import partition_dataset
    from daskpd.generators import make_splice_like
    from daskpd.model_file import save_model

    if args.dir:
        root = Path(args.dir)
        if not root.parent.is_dir():
            raise UsageError(f"--dir {args.dir!r}: directory {str(root.parent)!r} does not exist")
        root.mkdir(exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="daskpd-demo-"))
    try:
        tick = time.perf_counter()
        with _run_client(args, start=True) as client:
            cluster_seconds = time.perf_counter() - tick
            workers = len(worker_addresses(client)) if client is not None else 2
            dso_grid = args.grid or max(2, workers)
            solver = _demo_solver(args)
            if solver == "dso":
                args.grid = dso_grid  # DSO reads the tiled layout of its grid
            _option_values(args)  # a malformed --option fails before the data is made
            tick = time.perf_counter()
            # Degree-4 weighted-degree features keep the demo at about a minute on a laptop.
            train = make_splice_like(
                root / "train.zarr",
                args.n_samples,
                positive_rate=0.05,
                degree=4,
                random_state=args.seed,
                overwrite=True,
            )
            test = make_splice_like(
                root / "test.zarr",
                max(1, args.n_samples // 4),
                positive_rate=0.05,
                degree=4,
                random_state=args.seed + 1,
                overwrite=True,
            )
            if solver == "dso":
                train = partition_dataset(train.path, dso_grid, overwrite=True)
            data_seconds = time.perf_counter() - tick
            print(
                f"data: {train.n_samples} training rows x {train.n_features} features "
                f"({train.nnz} nonzeros), {test.n_samples} test rows, in {root} "
                f"({data_seconds:.1f} s)",
                file=sys.stderr,
            )
            plan = _make_plan(args, train, test)
            try:
                kernel_seconds = _warm_demo_kernels(args, root, client, solver, dso_grid)
                result = _train(plan, client)
                beside = None
                if solver != "dso" and args.dso_epochs:
                    beside = _demo_dso_run(args, train, test, dso_grid, client)
            except _RunFailed as exc:
                print(f"daskpd demo: error: {exc}", file=sys.stderr)
                return 1
        if args.dir:
            save_model(result, root / "model.zarr", overwrite=True)
        _print_demo_result(args, result)
        _print_demo_times(
            args, result, data_seconds, cluster_seconds, client is not None, kernel_seconds
        )
        if beside is not None:
            _print_dso_beside(result, *beside, grid=dso_grid)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def _warm_demo_kernels(args, root, client, solver, dso_grid) -> float:
    """Seconds to run the demo's solvers for one epoch each on a small set of the same kind.

    Their kernels are then compiled (a fresh install; numba keeps them on disk) or loaded
    from numba's cache into the workers before the timed runs, so that neither run's seconds
    count compilation: a first run's would dwarf its epochs, and the run that went second
    would look the cheaper.
    """
    import shutil
    import time

    from daskpd.data import partition_dataset
    from daskpd.generators import make_splice_like

    tick = time.perf_counter()
    warm = make_splice_like(
        root / "warm.zarr", 400, positive_rate=0.05, degree=4, random_state=args.seed + 2,
        overwrite=True,
    )  # fmt: skip
    runs = [(args.solver, args.grid, solver == "dso", args.option)]
    if solver != "dso" and args.dso_epochs:
        runs.append(("dso", dso_grid, True, None))
    try:
        for name, grid, tiled, options in runs:
            quiet = argparse.Namespace(**vars(args))
            quiet.solver, quiet.grid, quiet.option = name, grid, options
            quiet.epochs, quiet.tol, quiet.eval_every, quiet.time_limit = 1, 0.0, 1, None
            quiet.no_progress = True
            data = partition_dataset(warm.path, grid, overwrite=True) if tiled else warm
            try:
                plan = _make_plan(quiet, data, warm)
            except (UsageError, ValueError):
                continue  # DSO does not take the problem: its run beside says so
            _train(plan, client)
    finally:
        shutil.rmtree(root / "warm.zarr", ignore_errors=True)
    return time.perf_counter() - tick


def _demo_dso_run(args, train, test, grid, client):
    """DSO, the method of the DSO paper, on the demo's data with the same problem, tolerance
    and seed: ``(result, partition_seconds)``, or ``(reason, 0.0)`` when DSO does not take the
    problem. Its run as ``daskpd train --solver dso`` makes it (its own start included, which
    counts in its seconds); its grid's tiled layout is made first (``daskpd partition``)."""
    import time

    from daskpd.data import partition_dataset

    dso_args = argparse.Namespace(**vars(args))
    dso_args.solver, dso_args.grid, dso_args.epochs, dso_args.option = (
        "dso", grid, args.dso_epochs, None,
    )  # fmt: skip
    tick = time.perf_counter()
    partitioned = partition_dataset(train.path, grid, overwrite=True)
    partition_seconds = time.perf_counter() - tick
    try:
        plan = _make_plan(dso_args, partitioned, test)
    except (UsageError, ValueError) as exc:
        return str(exc), 0.0
    return _train(plan, client), partition_seconds


def _print_demo_result(args, result, indent="") -> None:
    """The first lines of a demo run: solver, epochs and seconds, test AUPRC, the gap."""
    if result.solver == "dso":
        grid_text = f", grid {args.grid}x{args.grid}" if args.grid else ""
    else:
        grid_text = f", {args.grid} row groups" if args.grid else ""
    default_text = " (the default: solver auto)" if args.solver == "auto" else ""
    epochs = f"{result.n_epochs} epoch{'' if result.n_epochs == 1 else 's'}"
    print(
        f"{indent}{result.solver}{grid_text}{default_text}: {epochs} in "
        f"{result.history[-1]['seconds']:.1f} s ({result.stop_reason})"
    )
    print(f"{indent}test AUPRC    {result.history[-1].get('test_auprc', float('nan')):.4f}")
    print(
        f"{indent}duality gap   {result.gap:.3g} (primal {result.primal:.6g}, "
        f"dual {result.dual:.6g})"
    )


def _print_dso_beside(default, dso, partition_seconds, *, grid) -> None:
    """DSO's run beside the default one: what it reached and what it cost."""
    print("beside it, DSO (the DSO paper's method) on the same data:")
    if isinstance(dso, str):
        print(f"  not run: {dso}")
        return
    seconds, default_seconds = dso.history[-1]["seconds"], default.history[-1]["seconds"]
    _print_demo_result(argparse.Namespace(grid=grid, solver="dso"), dso, "  ")
    epochs = f"{dso.n_epochs} epoch{'' if dso.n_epochs == 1 else 's'}"
    start = [row for row in dso.history if row["epoch"] == 0 and "gap" in row]
    if start:
        print(
            f"  its start, the dual solver's rounds (in its seconds), was certified at a gap "
            f"of {start[0]['gap']:.3g}; its {epochs} took it to {dso.gap:.3g}"
        )
    print(
        f"  cost: {seconds / max(default_seconds, 1e-9):.1f}x the default's training time "
        f"({seconds:.1f} s against {default_seconds:.1f} s), {epochs} against "
        f"{default.n_epochs}"
    )
    print(
        f"        and {partition_seconds:.1f} s before it for its grid's tiled layout "
        "(`daskpd partition`, once per dataset)"
    )


def _evaluation_note(result) -> str:
    # an epoch-0 row is the certified start's (DSO from the dual solver), not an epoch's
    rows = [row for row in result.history if row["epoch"] > 0]
    full = sum(1 for row in rows if not row.get("certificate_only", False))
    note = f"gap and test metrics at {full} of {result.n_epochs} epochs"
    certified = len(rows) - full
    if certified:
        note += f", the solver's own gap at {certified} more"
    if len(rows) < len(result.history):
        note += ", and the start's certificate"
    return note


def _print_demo_times(
    args, result, data_seconds, cluster_seconds, on_cluster, kernel_seconds
) -> None:
    timings = result.timings
    spent = timings["init"] + timings["epochs"] + timings["evaluation"]
    rows = [("data generation", data_seconds, "written to zarr")]
    if on_cluster:
        label = "cluster start" if args.scheduler is None else "cluster connect"
        rows.append((label, cluster_seconds, ""))
    rows.append(("kernels", kernel_seconds, "both runs' kernels, compiled or from numba's cache"))
    rows += [
        ("training", timings["wall"], "wall time of the solve, split below"),
        ("  init", timings["init"], "solver start: data reads, start rounds, first kernels"),
        ("  epochs", timings["epochs"], ""),
        (
            "  evaluation",
            timings["evaluation"],
            _evaluation_note(result),
        ),
        ("  other", timings["wall"] - spent, "checkpoints, progress bar, driver"),
    ]
    print("where the time went:")
    for label, seconds, note in rows:
        print(f"  {label:<16}{seconds:7.1f} s  {note}".rstrip())


def _demo_solver(args) -> str:
    """The solver the demo's main run takes, known before its data exists (the demo's data
    has no row weights, so ``auto`` resolves as the plan will)."""
    from daskpd.problem import Problem
    from daskpd.solvers.driver.plan import resolve_solver

    return resolve_solver(args.solver, Problem(args.loss, args.reg, args.alpha))
