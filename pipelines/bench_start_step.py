"""DSO's AdaGrad step from the DCD start, swept on several data sets.

AdaGrad's first move on a coordinate is the step itself, so the right step from a start
depends on the scale of the solution, which differs between binary splice-site features
and unit-norm tf-idf rows. This runs DSO from the same start (same data, seed and grid, in
this process) with each step of ``--steps`` (``eta0 = dual_eta0``), plain or with SVRG
snapshots (``--svrg-every``), and prints a markdown table of the primal and the test AUPRC
after each epoch.

Reproduce (BENCHMARKS.md, DSO section; the data sets are those ``daskpd bench`` made)::

    python pipelines/bench_start_step.py --epochs 5 --steps 0.005,0.05,0.25 \\
        --set splice-1e7=bench-work/run13/splice-1e07-train.zarr,bench-work/run13/splice-1e07-test.zarr \\
        --set text-1e7=bench-work/text/text-1e07-train.zarr,bench-work/text/text-1e07-test.zarr
"""  # noqa: E501

from __future__ import annotations

import argparse
import time

import numpy as np


def run(name, train_path, test_path, args):
    """Rows of the table for one data set: the start, then one row per step."""
    from daskpd.data import open_dataset
    from daskpd.metrics import auprc
    from daskpd.problem import Problem
    from daskpd.solvers import solve
    from daskpd.solvers.dso import DSO, DSOOptions

    train, test = open_dataset(train_path), open_dataset(test_path)
    problem = Problem("hinge", "l2", args.alpha)
    options = {
        "grid": args.grid,
        "init": "dcd",
        "dcd_passes": args.dcd_passes,
        "visit_order": args.visit_order,
    }
    # the start alone (each run below computes the same one again)
    solver = DSO()
    state = solver.init(
        problem, train, seed=np.random.SeedSequence(args.seed), client=None,
        options=DSOOptions(**options),
    )  # fmt: skip
    w = solver.iterate(state).w
    X_test, y_test = test.read_rows(0, test.n_samples)
    start_auprc = auprc(np.asarray(y_test), np.asarray(X_test @ w).ravel())
    rms = np.sqrt(np.mean(w[np.asarray(train.col_nnz) > 0] ** 2))
    rows = [
        f"| {name} | (start: RMS of w over columns with data {rms:.3g}) "
        f"| {problem.evaluate(w, train).primal:.4g} | | {start_auprc:.4f} | |"
    ]
    print(rows[-1], flush=True)
    for svrg_every in args.svrg_every:
        for step in args.steps:
            tick = time.perf_counter()
            fit = solve(
                train, "hinge", "l2", args.alpha, "dso", client=False, random_state=args.seed,
                max_epochs=args.epochs, tol=0.0, eval_every=1, test_data=test, eta0=step,
                dual_eta0=step, svrg_every=svrg_every, **options,
            )  # fmt: skip
            seconds = time.perf_counter() - tick
            primal = ", ".join(f"{row['primal']:.4g}" for row in fit.history)
            scores = ", ".join(f"{row['test_auprc']:.4f}" for row in fit.history)
            label = f"{step:g}" + (f", svrg_every={svrg_every}" if svrg_every else "")
            rows.append(
                f"| {name} | {label} | {primal} | {fit.history[-1]['gap']:.3g} | {scores} | "
                f"{seconds:.0f} |"
            )
            print(rows[-1], flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--set",
        action="append",
        required=True,
        metavar="NAME=TRAIN,TEST",
        help="a data set: name, training and test dataset paths",
    )
    parser.add_argument("--steps", default="0.005,0.05,0.25", help="comma-separated eta0 values")
    parser.add_argument(
        "--svrg-every",
        default="0",
        help="comma-separated svrg_every values, each run with every step (0: plain DSO)",
    )
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--grid", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=1e-5)
    parser.add_argument("--dcd-passes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--visit-order",
        default="shuffled",
        help="DSO's visit order (tables before 2026-11-24 09:50 UTC: blocked)",
    )
    args = parser.parse_args(argv)
    try:
        args.steps = [float(text) for text in args.steps.split(",")]
    except ValueError:
        parser.error(f"--steps must be numbers like 0.005,0.25, got {args.steps!r}")
    try:
        args.svrg_every = [int(text) for text in args.svrg_every.split(",")]
    except ValueError:
        parser.error(f"--svrg-every must be integers like 0,1, got {args.svrg_every!r}")
    table = [
        "| data | eta0 = dual_eta0 (, SVRG) | primal after epochs 1.. | final gap | "
        "test AUPRC after epochs 1.. | seconds (with evaluations) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for item in args.set:
        name, _, paths = item.partition("=")
        train_path, _, test_path = paths.partition(",")
        if not (name and train_path and test_path):
            parser.error(f"--set must be NAME=TRAIN,TEST, got {item!r}")
        table += run(name, train_path, test_path, args)
    print("\n".join(table))


if __name__ == "__main__":
    main()
