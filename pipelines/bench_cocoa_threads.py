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

``--peer`` adds the race of issue 50 beside it: multi-core LIBLINEAR (``-s 3``, Chiang, Lee
and Lin's parallel dual coordinate descent) with ``-m T`` for the same ``T``, in turn with
ours, on the same rows in memory, over its ladder ``-e`` 0.1 to 1e-6 (each a fit from zero,
up to the first within the line), with P* from liblinear at tol 1e-6; then each method's
time to ``P <= (1 + 1e-3) P*`` (ours: the ``solve`` call's wall seconds at the first round
whose primal is below it, in this process, the read of the rows included; the peer: the
first rung below it) and what its second thread gains, computed from the rows (true medians
over the repeats).

Reproduce (BENCHMARKS.md, "The dual solver's threads"; the data set is the one ``daskpd
bench --scales 1e8`` made)::

    python pipelines/bench_cocoa_threads.py bench-work/splice-1e08-train.zarr \\
        --alpha 1e-3 --threads 1,2 --repeats 2 --rounds 4 --workers 0
    python pipelines/bench_cocoa_threads.py bench-work/splice-1e08-train.zarr \\
        --alpha 1e-3 --threads 2 --screening on,off --repeats 3 --rounds 5 --workers 2
    python pipelines/bench_cocoa_threads.py bench-work/splice-1e08-train.zarr \\
        --alpha 1e-5 --threads 1,2 --repeats 3 --rounds 8 --workers 0 --peer
"""

from __future__ import annotations

import argparse
import statistics
import time

from daskpd.bench.runners import LIBLINEAR_MC_DEFAULT_TOL, LIBLINEAR_MC_TOLS

#: The line of the race: ``P <= (1 + LINE) P*``.
LINE = 1e-3
#: multi-core LIBLINEAR's ladder of ``-e``: the bench's, from its command line's default on
PEER_TOLS = tuple(tol for tol in LIBLINEAR_MC_TOLS if tol <= LIBLINEAR_MC_DEFAULT_TOL["hinge"])


def _first_below(history, eps):
    """``(wall seconds, round)`` of the first row whose gap is at most ``eps`` times its primal."""
    for row in history:
        if row["gap"] <= eps * row["primal"]:
            return row["wall_seconds"], row["epoch"]
    return None


def _first_primal_below(history, bound):
    """Wall seconds of the first row whose primal is at most ``bound`` (None: none)."""
    for row in history:
        if row["primal"] <= bound:
            return row["wall_seconds"]
    return None


def peer_rungs(X, y, alpha, threads, problem, bound=None):
    """multi-core LIBLINEAR ``-s 3 -m threads`` at each ``-e`` of :data:`PEER_TOLS`, each a
    fit from zero, up to the first whose primal is at most ``bound`` (None: every rung):
    ``[(tol, train seconds, primal)]``."""
    from daskpd.bench.peers import fit_liblinear_multicore

    rungs = []
    for tol in PEER_TOLS:
        fit = fit_liblinear_multicore(X, y, alpha, loss="hinge", tol=tol, threads=threads)
        primal = float(problem.evaluate(fit.coef, (X, y)).primal)
        rungs.append((tol, fit.seconds, primal))
        if bound is not None and primal <= bound:
            break
    return rungs


def race_lines(times):
    """The race's computed lines from ``{(method, threads): [seconds or None]}``: each
    method's true median to the line per thread count and its second thread's gain."""
    lines = []
    medians = {}
    for (method, threads), seconds in sorted(times.items()):
        missed = sum(1 for t in seconds if t is None)
        if 2 * missed >= len(seconds):
            medians[method, threads] = None
            lines.append(f"- {method}, {threads} thread(s): line missed in {missed} of "
                         f"{len(seconds)} runs")
            continue
        value = statistics.median(t if t is not None else float("inf") for t in seconds)
        medians[method, threads] = value
        lines.append(f"- {method}, {threads} thread(s): {value:.3g} s to (1+{LINE:g})P* "
                     f"(true median of {len(seconds)})")
    for method in sorted({m for m, _ in medians}):
        one, two = medians.get((method, 1)), medians.get((method, 2))
        if one and two:
            lines.append(f"- {method}: 1 -> 2 threads {one / two:.2f}x")
    return lines


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
    parser.add_argument(
        "--peer", action="store_true",
        help="race multi-core LIBLINEAR -s 3 with as many threads, in turn (hinge)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    from daskpd.data import open_dataset

    data = open_dataset(args.data)
    print(f"{args.data}: {data.n_samples} x {data.n_features}, {data.nnz} nonzeros")
    choices = {"on": True, "off": False, "default": None}
    screenings = [name.strip() for name in args.screening.split(",")]
    unknown = [name for name in screenings if name not in choices]
    if unknown:
        parser.error(f"--screening takes on, off or default, not {', '.join(unknown)}")
    bound = None
    if args.peer:
        if args.loss != "hinge":
            parser.error("--peer races multi-core LIBLINEAR's -s 3: the hinge loss only")
        from daskpd.bench.peers import fit_liblinear
        from daskpd.problem import Problem

        problem = Problem("hinge", "l2", args.alpha)
        X, y = data.read_rows(0, data.n_samples)
        tick = time.perf_counter()
        reference = fit_liblinear(X, y, args.alpha, loss="hinge", tol=1e-6).coef
        p_star = float(problem.evaluate(reference, (X, y)).primal)
        bound = (1.0 + LINE) * p_star
        print(f"P* = {p_star:.8g} (liblinear at tol 1e-6, {time.perf_counter() - tick:.3g} s)")
    times = {}
    print("| method | threads | screening | run | wall s | to 1e-2 gap | to 1e-3 gap | "
          "to 1e-4 gap | to (1+1e-3)P* |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
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
                line = "-"
                if bound is not None:
                    hit = _first_primal_below(history, bound)
                    times.setdefault(("daskpd cocoa", threads), []).append(hit)
                    line = "not reached" if hit is None else f"{hit:.3g}"
                print(
                    f"| daskpd cocoa | {threads} | {name} | {repeat + 1} | {wall:.2f} | "
                    + " | ".join(cells) + f" | {line} |"
                )  # fmt: skip
            if bound is not None:
                rungs = peer_rungs(X, y, args.alpha, threads, problem, bound)
                hit = next((sec for _, sec, primal in rungs if primal <= bound), None)
                times.setdefault(("liblinear-mc -s 3", threads), []).append(hit)
                ladder = ", ".join(
                    f"-e {tol:g}: {sec:.3g} s, P/P*-1 {primal / p_star - 1:.2g}"
                    for tol, sec, primal in rungs
                )
                print(
                    f"| liblinear-mc -s 3 | {threads} | - | {repeat + 1} | {ladder} | - | - "
                    f"| - | {'not reached' if hit is None else f'{hit:.3g}'} |"
                )
    if times:
        print()
        print("Computed from the rows above:")
        print("\n".join(race_lines(times)))


if __name__ == "__main__":
    main()
