"""Benchmark DSO on a splice-site-like dataset (BENCHMARKS.md, section DSO).

Parts (``--parts``, default all):

* ``kernel``: nonzero-updates per second of the DSO tile kernel (AdaGrad) on every tile of
  the grid, against a bare numba loop that only reads the same tile in the same order.
* ``ablation`` (not in the default): the same kernel measurement without the AdaGrad
  arithmetic (``step="sqrt"``) and with smaller or larger chunks, to see where its time goes.
* ``epochs``: wall time of an epoch on a LocalCluster: 1 single-threaded worker process,
  2 of them (``w`` blocks handed over in shared memory, then sent by Dask), 1 process of 2
  threads, taking turns for ``--rounds`` rounds of ``--epochs`` epochs each; its overhead
  over the sum of its tasks' kernel times, and the speed-up over 1 process round by round.
* ``race``: wall time until DSO's test AUPRC reaches liblinear's minus 0.005, against
  liblinear's and SGDClassifier's own training times on the same objective.

Reproduce (the data is generated when missing)::

    python pipelines/bench_dso.py --data bench_dso/splice_train.zarr \\
        --test bench_dso/splice_test.zarr --grid 2 --repeats 3 \\
        --out bench_dso/results.json

Timings are medians over ``--repeats`` runs; the JSON holds every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np


def _log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def ensure_data(path, n_samples, seed, grids, hash_bits=0):
    """Open (or generate, then partition) a splice-like dataset.

    With ``hash_bits``, a generated dataset has its WD features hashed into
    ``2**hash_bits`` columns.
    """
    from daskpd.data import open_dataset, partition_dataset
    from daskpd.generators import make_splice_like

    if not os.path.isdir(path):
        _log(f"generating {path} ({n_samples} rows)")
        make_splice_like(
            path, n_samples, positive_rate=0.01, degree=8, hash_bits=hash_bits, random_state=seed
        )
    data = open_dataset(path)
    if hash_bits and data.shape[1] != 2**hash_bits:
        raise SystemExit(
            f"{path} exists with {data.shape[1]} columns, not 2**{hash_bits}: --hash-bits only "
            "applies when generating; give a new path"
        )
    for grid in grids:
        if grid not in data.grids:
            _log(f"partitioning {path} for grid {grid}")
            partition_dataset(path, grid=grid)
    return open_dataset(path)


# --------------------------------------------------------------------------------------------
# kernel throughput


def bench_kernel(data, problem, grid, repeats, options):
    """Time the tile kernel and the bare read loop over one epoch's tiles, in this process."""
    from daskpd.kernels import dso as kernels
    from daskpd.solvers import dso

    solver = dso.DSO()
    options = dso.DSOOptions(grid=grid, **options)
    seed = np.random.SeedSequence(0)
    state = solver.init(problem, data, seed=seed, client=None, options=options)
    settings = state.settings
    tiles = {
        (q, r): dso._load_tile(state.tile_sources[q][r], settings, q, r)
        for q in range(grid)
        for r in range(grid)
    }
    orders = {key: dso._visit_order(tile, settings, seed, 1, *key) for key, tile in tiles.items()}
    nnz = sum(tile[0].shape[0] for tile in tiles.values())
    empty = np.zeros(0)
    update = settings.tile_update(*settings.steps(1), False)
    kernel_runs, bare_runs = [], []
    for _ in range(repeats + 1):  # the first round compiles
        z_blocks = [zs[0].copy() for zs in state.zstates]
        w_blocks = [np.asarray(ws[0]).copy() for ws in state.wstates]
        z_acc = [np.zeros_like(b) for b in z_blocks]
        w_acc = [np.zeros_like(b) for b in w_blocks]
        kernel_seconds = bare_seconds = 0.0
        for rnd in range(grid):
            for q in range(grid):
                r = (q + rnd) % grid
                rows, cols, vals = tiles[q, r][:3]
                segment_ptr = dso._kernel_segments(tiles[q, r], settings)
                rowc = state.row_consts[q]
                columns = kernels.pack_columns(w_blocks[r], w_acc[r], state.col_consts[r])
                tick = time.perf_counter()
                kernels.dso_tile(
                    kernels.TileData(
                        rows, cols, vals, settings.binary, segment_ptr, orders[q, r],
                        settings.interleave,
                    ),
                    kernels.DualBlock(
                        z_blocks[q], z_acc[q], rowc["z_lo"], rowc["z_hi"], rowc["y"],
                        rowc["inv_weight"], rowc["inv_row_nnz"], empty, empty,
                    ),
                    columns,
                    update,
                )  # fmt: skip
                kernel_seconds += time.perf_counter() - tick
                tick = time.perf_counter()
                kernels.tile_read_only(
                    rows, cols, vals, settings.binary, segment_ptr, orders[q, r],
                    w_blocks[r], z_blocks[q],
                )  # fmt: skip
                bare_seconds += time.perf_counter() - tick
                w_blocks[r] = columns[:, kernels.COL_W].copy()
                w_acc[r] = columns[:, kernels.COL_W_ACC].copy()
        kernel_runs.append(kernel_seconds)
        bare_runs.append(bare_seconds)
    kernel_runs, bare_runs = kernel_runs[1:], bare_runs[1:]
    kernel_median = statistics.median(kernel_runs)
    bare_median = statistics.median(bare_runs)
    return {
        "nnz": int(nnz),
        "grid": grid,
        "options": {k: v for k, v in options.__dict__.items()},
        "kernel_seconds": kernel_runs,
        "bare_seconds": bare_runs,
        "kernel_updates_per_s": nnz / kernel_median,
        "bare_reads_per_s": nnz / bare_median,
    }


# --------------------------------------------------------------------------------------------
# epochs on a LocalCluster


def _local_client(n_workers, threads):
    """A client of a fresh LocalCluster of ``n_workers`` processes x ``threads`` threads.

    The cluster the CLI starts (:func:`daskpd._cluster.cluster_client`), as users get it.
    """
    from daskpd._cluster import ClusterOptions, cluster_client

    return cluster_client(ClusterOptions(n_workers=n_workers, threads_per_worker=threads))


#: Epochs a new cluster runs before the timed ones. The first reads the tiles; the second
#: was still 10-15% slower than the later ones with 2 worker processes (medians of the
#: epoch after the first, against the three after it, over 10 rounds: 0.353 / 0.362 s
#: against 0.314 / 0.324 s) and not with 1 (BENCHMARKS.md). Timed apart, not dropped.
WARMUP_EPOCHS = 2

#: (worker processes, threads each, shared_memory) of ``--parts epochs``
_EPOCH_LAYOUTS = ((1, 1, True), (2, 1, True), (2, 1, False), (1, 2, True))


def bench_epochs(
    data, problem, grid, layouts, n_rounds, epochs_per_round, options, warmup=WARMUP_EPOCHS
):
    """Wall time of epochs on a LocalCluster of each layout, the layouts taking turns.

    Every round starts a cluster of each layout in turn (the order rotating from round to
    round), runs its first ``warmup`` epochs (the first reads the tiles into the workers'
    caches; see :data:`WARMUP_EPOCHS`), timed apart, and times the next
    ``epochs_per_round``. This machine's speed drifts by a fifth within minutes:
    compared round by round, the layouts see the same drift. One cluster at a time: the idle
    processes of others (their event loops, heartbeats, profilers) took 15-25% off the
    2-process epochs of a first version that kept them all running.

    Returns one row per layout: every timed epoch with its round and its tasks' kernel
    time, the warm-up epochs' times (``warmup_seconds``, one list a round), and
    ``speedup_by_round``, the first layout's median epoch of the round over this layout's.
    """
    from daskpd.solvers import dso

    solver = dso.DSO()
    rows = [
        {
            "n_workers": n_workers,
            "threads_per_worker": threads,
            "shared_memory": shared,
            "grid": grid,
            "init_seconds": [],
            "warmup_seconds": [],
            "epoch_seconds": [],
            "epoch_kernel_seconds": [],
            "epoch_round": [],
        }
        for n_workers, threads, shared in layouts
    ]
    for rnd in range(n_rounds):
        for i in (np.arange(len(rows)) + rnd) % len(rows):
            row = rows[i]
            layout = dso.DSOOptions(grid=grid, shared_memory=row["shared_memory"], **options)
            with _local_client(row["n_workers"], row["threads_per_worker"]) as client:
                tick = time.perf_counter()
                state = solver.init(
                    problem, data, seed=np.random.SeedSequence(0), client=client, options=layout
                )
                row["init_seconds"].append(time.perf_counter() - tick)
                # shared memory asked for and found (not on a machine without /dev/shm)
                row["shared_memory"] = state.shared is not None
                warm = []
                for epoch in range(1, warmup + 1):
                    tick = time.perf_counter()
                    state = solver.run_epoch(state, epoch)
                    warm.append(time.perf_counter() - tick)
                row["warmup_seconds"].append(warm)
                for epoch in range(warmup + 1, warmup + epochs_per_round + 1):
                    # the kernel time of the epoch's tasks, read on the workers, untimed
                    before = sum(client.run(dso.kernel_seconds).values())
                    tick = time.perf_counter()
                    state = solver.run_epoch(state, epoch)
                    row["epoch_seconds"].append(time.perf_counter() - tick)
                    row["epoch_kernel_seconds"].append(
                        sum(client.run(dso.kernel_seconds).values()) - before
                    )
                    row["epoch_round"].append(rnd)
                solver.close(state)

    def round_median(row, rnd):
        pairs = zip(row["epoch_seconds"], row["epoch_round"], strict=True)
        return statistics.median(t for t, k in pairs if k == rnd)

    for row in rows:
        row["median_epoch_seconds"] = statistics.median(row["epoch_seconds"])
        # per epoch: wall time / sum of its tasks' kernel times - 1 (1 worker, 1 thread:
        # Dask's overhead; with more, the kernels overlap and this goes negative)
        row["median_overhead_in_epoch"] = statistics.median(
            e / k - 1.0
            for e, k in zip(row["epoch_seconds"], row["epoch_kernel_seconds"], strict=True)
        )
        row["speedup_by_round"] = [
            round_median(rows[0], rnd) / round_median(row, rnd) for rnd in range(n_rounds)
        ]
        row["median_speedup"] = statistics.median(row["speedup_by_round"])
    return rows


# --------------------------------------------------------------------------------------------
# AUPRC race against liblinear and SGDClassifier


def _read_all(data):
    import scipy.sparse as sp

    X, y = data.read_rows(0, data.n_samples)
    return sp.csr_matrix(X), np.asarray(y)


def bench_race(
    data, test, problem, grid, n_workers, max_epochs, max_seconds, options, alpha, threads=1
):
    """Time to reach liblinear's test AUPRC - 0.005; peers' times on the same objective."""
    from daskpd.bench import peers
    from daskpd.metrics import auprc
    from daskpd.solvers import dso

    X_test, y_test = _read_all(test)
    X, y = _read_all(data)
    liblinear = peers.fit_liblinear(X, y, alpha, loss="hinge", tol=1e-3)
    liblinear_auprc = auprc(y_test, X_test @ liblinear.coef)
    sgd = peers.fit_sgd(X, y, alpha, loss="hinge")
    sgd_auprc = auprc(y_test, X_test @ sgd.coef)
    del X
    target = liblinear_auprc - 0.005
    _log(f"liblinear {liblinear.seconds:.1f}s AUPRC {liblinear_auprc:.4f}; sgd {sgd.seconds:.1f}s")

    solver = dso.DSO()
    options = dso.DSOOptions(grid=grid, **options)
    curve = []
    reached = None
    with _local_client(n_workers, threads) as client:
        tick = time.perf_counter()
        state = solver.init(
            problem, data, seed=np.random.SeedSequence(0), client=client, options=options
        )
        it = solver.iterate(state)
        seconds = time.perf_counter() - tick
        # Epoch 0: the starting point (with init="dcd", the averaged local DCD solutions).
        start = auprc(y_test, X_test @ it.w)
        curve.append({"epoch": 0, "seconds": seconds, "auprc": start, "auprc_avg": start})
        _log(f"dso init: {seconds:.1f}s AUPRC {start:.4f}")
        if start >= target:
            reached = {"epoch": 0, "seconds": seconds}
        for epoch in range(1, max_epochs + 1):
            if reached is not None:
                break
            tick = time.perf_counter()
            state = solver.run_epoch(state, epoch)
            it = solver.iterate(state)
            seconds += time.perf_counter() - tick  # the model is ready to use: w gathered
            last = auprc(y_test, X_test @ it.w)
            average = auprc(y_test, X_test @ it.w_avg)
            curve.append({"epoch": epoch, "seconds": seconds, "auprc": last, "auprc_avg": average})
            _log(f"dso epoch {epoch}: {seconds:.1f}s AUPRC last {last:.4f} avg {average:.4f}")
            if max(last, average) >= target:
                reached = {"epoch": epoch, "seconds": seconds}
                break
            if seconds >= max_seconds:
                break
    return {
        "alpha": alpha,
        "liblinear": {"seconds": liblinear.seconds, "auprc": liblinear_auprc},
        "sgd": {"seconds": sgd.seconds, "auprc": sgd_auprc},
        "target_auprc": target,
        "dso_curve": curve,
        "dso_reached": reached,
        "dso_options": {k: v for k, v in options.__dict__.items()},
        "dso_init_included": True,
        "n_workers": n_workers,
        "threads_per_worker": threads,
        "grid": grid,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--n-train", type=int, default=115_000)
    parser.add_argument("--n-test", type=int, default=30_000)
    parser.add_argument("--grid", type=int, default=2)
    parser.add_argument(
        "--hash-bits",
        type=int,
        default=0,
        help="when generating: hash the WD features into 2**B columns (0: 4,660,256 explicit)",
    )
    parser.add_argument("--alpha", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5, help="epochs per layout and round")
    parser.add_argument(
        "--rounds", type=int, default=5, help="--parts epochs: turns of every layout"
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=WARMUP_EPOCHS,
        help="--parts epochs: epochs of a new cluster timed apart before --epochs",
    )
    parser.add_argument("--race-epochs", type=int, default=30)
    parser.add_argument("--race-seconds", type=float, default=900.0)
    parser.add_argument("--race-eta0", type=float, default=0.05)
    parser.add_argument("--race-svrg-every", type=int, default=1)
    parser.add_argument("--race-init", choices=("zero", "dcd"), default="dcd")
    parser.add_argument("--race-dcd-passes", type=int, default=5)
    parser.add_argument("--race-workers", type=int, default=2, help="worker processes")
    parser.add_argument("--race-threads", type=int, default=1, help="threads per worker")
    parser.add_argument("--parts", default="kernel,epochs,race")
    parser.add_argument("--svrg-every", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    from daskpd.problem import Problem

    data = ensure_data(args.data, args.n_train, 0, [args.grid], args.hash_bits)
    test = ensure_data(args.test, args.n_test, 1, [], args.hash_bits)
    problem = Problem("hinge", "l2", args.alpha)
    options = {"svrg_every": args.svrg_every}
    parts = set(args.parts.split(","))
    results = {
        "data": {"path": args.data, "shape": list(data.shape), "nnz": int(data.nnz)},
        "cpu_count": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    if "kernel" in parts:
        # the former defaults (rows, then blocked, interleave 4) against the shuffled default
        results["kernel"] = [
            bench_kernel(data, problem, args.grid, args.repeats, dict(options, **variant))
            for variant in (
                {"visit_order": "rows", "interleave": 4},
                {"visit_order": "blocked", "interleave": 4},
                {"visit_order": "shuffled"},
            )
        ]
        _log(json.dumps(results["kernel"], indent=1))
    if "ablation" in parts:
        # where the kernel's time goes: without the AdaGrad arithmetic (the "sqrt" step has
        # no square root or division per update), and with smaller or larger chunks
        results["ablation"] = [
            bench_kernel(data, problem, args.grid, args.repeats, dict(options, **variant))
            for variant in (
                {"visit_order": "shuffled"},
                {"visit_order": "shuffled", "step": "sqrt"},
                {"visit_order": "shuffled", "chunk_nnz": 256},
                {"visit_order": "shuffled", "chunk_nnz": 4096},
            )
        ]
        _log(json.dumps(results["ablation"], indent=1))
    if "epochs" in parts:
        # 2 cores as 2 processes (w blocks handed over in shared memory, or sent by Dask)
        # and as 2 threads of one process (handed over by reference), against 1 process
        results["epochs"] = bench_epochs(
            data, problem, args.grid, _EPOCH_LAYOUTS, args.rounds, args.epochs, options,
            warmup=args.warmup,
        )  # fmt: skip
        _log(json.dumps(results["epochs"], indent=1))
    if "race" in parts:
        race_options = {
            "svrg_every": args.race_svrg_every,
            "eta0": args.race_eta0,
            "init": args.race_init,
            "dcd_passes": args.race_dcd_passes,
        }
        results["race"] = bench_race(
            data, test, problem, args.grid, args.race_workers, args.race_epochs,
            args.race_seconds, race_options, args.alpha, args.race_threads,
        )  # fmt: skip
    results["load_average_end"] = os.getloadavg()
    text = json.dumps(results, indent=1)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text)
    print(text)


if __name__ == "__main__":
    main()
