"""What a user waits for besides epochs: the first epoch against a steady one, and evaluation.

Each run starts a fresh LocalCluster (``--workers`` processes of one thread; its start is timed
but kept apart, as :func:`daskpd.solve` does not count it) and calls ``solve`` on the on-disk
training set with a test set, the default evaluation cadence (``eval_every="auto"``) and
``tol=0``, so that it runs ``--epochs`` epochs. A callback notes the training seconds after
every epoch (evaluation excluded), so each epoch's own time is the difference of two of them.
For every run it prints:

- ``init``: the solver's initialization (for the dual solver: reading every row group on its
  owner; for DSO: the tile reads of its start and the start's rounds);
- ``first`` and ``steady``: the first epoch, and the median of epochs 3 and later;
- ``first/steady``: their ratio (issue 26 asks at most 1.5);
- ``second/steady``: the second epoch's (the dual solver's epoch 2 carries its first
  round's shrunk passes from zero: more optimization work, no start-up);
- ``eval``: evaluation seconds (gap and test metrics) and their share of the run's wall time
  (issue 26 asks at most 10% at the default cadence);
- ``wall``: the ``solve`` call's wall seconds.

The solvers of ``--solvers`` take turns, ``--repeats`` times; the first run is reported like
the others (nothing is warmed up beyond numba's on-disk cache, which a user who ran the tests
or ``daskpd demo`` has).

Reproduce (BENCHMARKS.md, "First epoch and evaluation (issue 26)"; the data sets are those
``daskpd bench --scales 1e8`` made)::

    python pipelines/bench_startup.py bench-work/splice-1e08-train.zarr \\
        --test bench-work/splice-1e08-test.zarr --solvers auto,dso --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time


def _solver_and_options(spec):
    """``"cocoa:shrinking=False,grid=2"`` -> ``("cocoa", {"shrinking": False, "grid": 2})``."""
    import ast

    name, _, rest = spec.partition(":")
    options = {}
    for item in filter(None, rest.split(";")):
        key, _, value = item.partition("=")
        options[key.strip()] = ast.literal_eval(value.strip())
    return name, options


def one_run(data, test, args, spec):
    """One fresh cluster and one ``solve`` call; returns a dict of the measured seconds.

    ``spec``: a solver name, optionally with options after a colon, separated by ``;``
    (``cocoa:shrinking=False``: every round one full pass, so that its first round and its
    later ones do the same work).
    """
    solver, solver_options = _solver_and_options(spec)
    from daskpd._cluster import ClusterOptions, cluster_client
    from daskpd.solvers import solve

    marks = []

    def note(info):
        marks.append(info.seconds)

    options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
    tick = time.perf_counter()
    with cluster_client(options, start=True) as client:
        started = time.perf_counter() - tick
        tick = time.perf_counter()
        result = solve(
            data,
            loss=args.loss,
            alpha=args.alpha,
            solver=solver,
            client=client,
            test_data=test,
            tol=0.0,
            max_epochs=args.epochs,
            callbacks=[note],
            **solver_options,
        )
        wall = time.perf_counter() - tick
    init = result.timings["init"]
    epochs = [b - a for a, b in zip([init, *marks[:-1]], marks, strict=True)]
    steady = statistics.median(epochs[2:]) if len(epochs) > 2 else float("nan")
    return {
        "cluster": started,
        "init": init,
        "first": epochs[0],
        "second": epochs[1] if len(epochs) > 1 else float("nan"),
        "steady": steady,
        "eval": result.timings["evaluation"],
        "wall": wall,
        "evaluations": sum(1 for row in result.history if not row.get("certificate_only")),
        "gap": result.history[-1]["gap"] / result.history[-1]["primal"],
        "solver": result.solver,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="training set (a daskpd zarr dataset)")
    parser.add_argument("--test", help="test set (a daskpd zarr dataset)")
    parser.add_argument("--loss", default="hinge")
    parser.add_argument("--alpha", type=float, default=1e-5)
    parser.add_argument(
        "--solvers",
        default="auto,dso",
        help="solvers, in turn; options after a colon: cocoa:shrinking=False",
    )
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="6GiB")
    args = parser.parse_args(argv)
    from daskpd.data import open_dataset

    data = open_dataset(args.data)
    test = open_dataset(args.test) if args.test else None
    print(f"{args.data}: {data.n_samples} x {data.n_features}, {data.nnz} nonzeros")
    print(f"{args.loss}, alpha={args.alpha:g}, {args.epochs} epochs, {args.workers} workers")
    print(
        "| solver | run | cluster s | init s | first s | steady s | first/steady "
        "| second/steady | eval s (n) | eval share | wall s | final gap/primal |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for repeat in range(args.repeats):
        for solver in args.solvers.split(","):
            r = one_run(data, test, args, solver)
            print(
                f"| {solver} ({r['solver']}) | {repeat + 1} | {r['cluster']:.2f} "
                f"| {r['init']:.2f} | {r['first']:.3f} | {r['steady']:.3f} "
                f"| {r['first'] / r['steady']:.2f} | {r['second'] / r['steady']:.2f} "
                f"| {r['eval']:.2f} ({r['evaluations']}) "
                f"| {100 * r['eval'] / r['wall']:.1f}% | {r['wall']:.2f} | {r['gap']:.2e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
