"""The regularization path's cost: warm-started against cold starts, and liblinear's ``-C``.

For each loss of ``--losses``, on one fresh LocalCluster of ``--workers`` processes per run
(its start timed apart, as ``daskpd train`` starts one), this runs
:func:`daskpd.regularization_path` on the default grid (12 alphas over 4 decades from
``alpha_max``) warm-started, then the same call from cold starts (``warm_start=False``:
the same ``alpha_max`` pass and grid, the same choice with its refinement), alternating,
``--repeats`` times, and prints one JSON line per run: the path's total seconds
(``alpha_max``, every run, every validation score and the refinement's re-solves), each
point's alpha, epochs, gap, validation score, whether it was refined and seconds, and the
chosen alpha.
``--liblinear`` also times LIBLINEAR's own warm-started search over C (``train -C``: its
``-s 0`` logistic and ``-s 2`` squared-hinge primal solvers, 5-fold cross-validation,
``-m`` threads) on the training set in memory (conversion not timed), ``--repeats`` times.

Reproduce (BENCHMARKS.md, "The regularization path"; the data sets are the ones ``daskpd
bench --scales 1e7`` made, ``daskpd.bench.data.datasets(BenchConfig(workdir=...), 1e7)``)::

    python pipelines/bench_path.py bench-data/splice-1e07-train.zarr \\
        bench-data/splice-1e07-valid.zarr --losses hinge,logistic,squared_hinge \\
        --repeats 3 --workers 2 --tol 1e-6 --liblinear 1 > path-runs.jsonl
    python pipelines/bench_path.py --summarize path-runs.jsonl

``--summarize`` prints the table of BENCHMARKS.md from those lines: per loss, the median of
the repeats (the first included) of the warm path, the cold starts and liblinear's search,
the epochs of every point summed, and the alphas each chose.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

#: LIBLINEAR solvers that its -C search supports, by our loss name.
LIBLINEAR_SOLVERS = {"logistic": 0, "squared_hinge": 2}


def path_run(train, valid, loss, args, *, warm, alphas=None):
    """One path on a fresh cluster; returns its JSON record."""
    from daskpd._cluster import ClusterOptions, cluster_client
    from daskpd.path import regularization_path

    begin = time.perf_counter()
    options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
    with cluster_client(options, start=True) as client:
        cluster_seconds = time.perf_counter() - begin
        path = regularization_path(
            train, loss=loss, validation_data=valid, alphas=alphas, warm_start=warm,
            tol=args.tol, max_epochs=args.max_epochs, client=client,
        )  # fmt: skip
    return path, {
        "loss": loss,
        "warm_start": warm,
        "cluster_start_seconds": round(cluster_seconds, 3),
        "total_seconds": round(path.total_seconds, 3),
        "alpha_max": path.alpha_max,
        "best_alpha": path.best_alpha,
        "converged": path.converged,
        "points": [
            {
                "alpha": float(alpha),
                "solver": result.solver,
                "epochs": int(epochs),
                "refined": k in path.refined,
                "gap": float(result.gap),
                "primal": float(result.primal),
                "score": float(score),
                "seconds": round(float(seconds), 3),
                # the solver's start: from zero, or from the previous point (cocoa: a pass)
                "init_seconds": round(float(result.timings.get("init", float("nan"))), 3),
            }
            for k, (alpha, result, score, seconds, epochs) in enumerate(
                zip(path.alphas, path.results, path.scores, path.seconds, path.epochs, strict=True)
            )
        ],
    }


def liblinear_search(X, y, loss, threads):
    """LIBLINEAR's ``train -C`` (its warm-started search over C); returns its JSON record."""
    from liblinear.liblinearutil import parameter, problem, train

    data = problem(y, X)
    options = parameter(f"-s {LIBLINEAR_SOLVERS[loss]} -C -m {int(threads)} -B -1 -q")
    begin = time.perf_counter()
    best_c, _, best_accuracy = train(data, options)
    seconds = time.perf_counter() - begin
    return {
        "peer": "liblinear -C",
        "loss": loss,
        "threads": int(threads),
        "seconds": round(seconds, 3),
        "best_C": best_c,
        "best_alpha": 1.0 / (best_c * X.shape[0]),
        "cv_accuracy": best_accuracy,
    }


def _alphas(runs):
    return ", ".join(f"{run['best_alpha']:.3g}" for run in runs)


def summarize(lines):
    """The Markdown table of BENCHMARKS.md from the JSON lines of a run of this script."""
    # liblinear prints its "Best C = ..." line on the same output
    records = [json.loads(line) for line in lines if line.startswith("{")]
    out = [
        "| loss | run | total seconds (median; the runs) | epochs, all points (median; the runs) "
        "| seconds a point (median of the runs' medians) | alpha chosen (each run) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    losses = list(dict.fromkeys(record["loss"] for record in records))
    for loss in losses:
        for warm in (True, False):
            runs = [r for r in records if r["loss"] == loss and r.get("warm_start") is warm]
            if not runs:
                continue
            totals = [r["total_seconds"] for r in runs]
            epochs = [sum(p["epochs"] for p in r["points"]) for r in runs]
            per_point = [statistics.median(p["seconds"] for p in r["points"]) for r in runs]
            out.append(
                f"| {loss} | {'path (warm)' if warm else 'cold starts'} "
                f"| {statistics.median(totals):.1f} ({', '.join(f'{t:.1f}' for t in totals)}) "
                f"| {statistics.median(epochs):g} ({', '.join(str(e) for e in epochs)}) "
                f"| {statistics.median(per_point):.2f} "
                f"| {_alphas(runs)} |"
            )
        peers = [r for r in records if r["loss"] == loss and r.get("peer")]
        if peers:
            seconds = [r["seconds"] for r in peers]
            out.append(
                f"| {loss} | liblinear -C, {peers[0]['threads']} thread(s), 5-fold CV "
                f"| {statistics.median(seconds):.1f} ({', '.join(f'{t:.1f}' for t in seconds)}) "
                f"| | | {_alphas(peers)} |"
            )
    return "\n".join(out)


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--summarize"]:
        with open(argv[1]) as lines:
            print(summarize(lines))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("train", help="training store")
    parser.add_argument("valid", help="validation store")
    parser.add_argument("--losses", default="hinge,logistic", help="comma-separated losses")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="auto")
    parser.add_argument("--tol", type=float, default=1e-4, help="each point's duality gap")
    parser.add_argument("--max-epochs", type=int, default=100)
    parser.add_argument(
        "--liblinear", type=int, default=0, metavar="THREADS",
        help="also time liblinear -C with this many threads (0: not)",
    )  # fmt: skip
    args = parser.parse_args(argv)

    from daskpd.data import open_dataset

    train, valid = open_dataset(args.train), open_dataset(args.valid)
    losses = [loss.strip() for loss in args.losses.split(",") if loss.strip()]
    for loss in losses:
        for repeat in range(args.repeats):
            warm_path, record = path_run(train, valid, loss, args, warm=True)
            print(json.dumps({"repeat": repeat, **record}), flush=True)
            cold_path, record = path_run(train, valid, loss, args, warm=False)
            if not np.array_equal(cold_path.alphas, warm_path.alphas):
                raise RuntimeError("the cold starts' grid is not the warm path's")
            print(json.dumps({"repeat": repeat, **record}), flush=True)
    if args.liblinear:
        from daskpd.bench.data import in_memory

        X, y = in_memory(train)
        for loss in losses:
            if loss not in LIBLINEAR_SOLVERS:
                continue
            for repeat in range(args.repeats):
                record = liblinear_search(X, y, loss, args.liblinear)
                print(json.dumps({"repeat": repeat, **record}), flush=True)


if __name__ == "__main__":
    main()
