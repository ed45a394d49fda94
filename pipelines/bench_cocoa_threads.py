"""The dual solver's threads and screening: time to a certified gap, settings in turn.

``cocoa`` keeps one row group by default; ``threads`` runs its passes in several threads that
read one shared ``w`` without locks (PASSCoDe), each adding its steps to its own slot of the
column records, whose sum is the round's exact change of ``w``. This runs
``solve(..., solver="cocoa", threads=T)`` for each ``T`` of ``--threads``, alternating,
``--repeats`` times, in this process (``--workers 0``) or on a fresh LocalCluster of
``--workers`` processes each run (its start not timed), with the gap checked after every
round, and prints for each run the wall seconds (of the ``solve`` call) at which the
certified relative gap first fell to 1e-2, 1e-3 and 1e-4, and the round. ``--screening
on,off`` also alternates ``CocoaOptions.screening`` (the certifying pass leaving out the rows
proven inactive; one group, the hinge losses) within each thread count.

Reproduce (BENCHMARKS.md, "The dual solver's threads"; the data set is the one ``daskpd
bench --scales 1e8`` made)::

    python pipelines/bench_cocoa_threads.py bench-work/splice-1e08-train.zarr \\
        --alpha 1e-3 --threads 1,2 --repeats 2 --rounds 4 --workers 0
    python pipelines/bench_cocoa_threads.py bench-work/splice-1e08-train.zarr \\
        --alpha 1e-3 --threads 2 --screening on,off --repeats 3 --rounds 5 --workers 2
"""

from __future__ import annotations

import argparse
import time


def _first_below(history, eps):
    """``(wall seconds, round)`` of the first row whose gap is at most ``eps`` times its primal."""
    for row in history:
        if row["gap"] <= eps * row["primal"]:
            return row["wall_seconds"], row["epoch"]
    return None


def one_run(data, args, threads, screening=None):
    """One ``solve`` call; returns its history."""
    from daskpd.solvers import solve

    common = {
        "loss": args.loss,
        "alpha": args.alpha,
        "solver": "cocoa",
        "tol": 0.0,
        "max_epochs": args.rounds,
        "threads": threads,
        "screening": screening,
    }
    if args.workers == 0:
        return solve(data, client=False, eval_every=1, **common).history
    from daskpd._cluster import ClusterOptions, cluster_client

    options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
    with cluster_client(options, start=True) as client:
        return solve(data, client=client, **common).history


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="training set (a daskpd zarr dataset)")
    parser.add_argument("--loss", default="hinge")
    parser.add_argument("--alpha", type=float, default=1e-3)
    parser.add_argument("--threads", default="1,2", help="thread counts, in turn")
    parser.add_argument(
        "--screening", default="default", help="'on', 'off' or 'default' (None), in turn"
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=0, help="0: in this process")
    parser.add_argument("--memory-limit", default="4GiB")
    args = parser.parse_args(argv)
    from daskpd.data import open_dataset

    data = open_dataset(args.data)
    print(f"{args.data}: {data.n_samples} x {data.n_features}, {data.nnz} nonzeros")
    choices = {"on": True, "off": False, "default": None}
    screenings = [name.strip() for name in args.screening.split(",")]
    unknown = [name for name in screenings if name not in choices]
    if unknown:
        parser.error(f"--screening takes on, off or default, not {', '.join(unknown)}")
    print("| threads | screening | run | wall s | to 1e-2 | to 1e-3 | to 1e-4 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for repeat in range(args.repeats):
        for threads in (int(t) for t in args.threads.split(",")):
            for name in screenings:
                tick = time.perf_counter()
                history = one_run(data, args, threads, choices[name])
                wall = time.perf_counter() - tick
                cells = []
                for eps in (1e-2, 1e-3, 1e-4):
                    hit = _first_below(history, eps)
                    cells.append("-" if hit is None else f"{hit[0]:.2f} (round {hit[1]})")
                print(
                    f"| {threads} | {name} | {repeat + 1} | {wall:.2f} | " + " | ".join(cells)
                    + " |"
                )  # fmt: skip


if __name__ == "__main__":
    main()
