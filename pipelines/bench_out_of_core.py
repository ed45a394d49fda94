"""Training on data far larger than the workers' memory: the default solver to a certified gap.

Starts a LocalCluster of ``--workers`` one-thread processes with ``--memory-limit`` each and
calls ``daskpd.solve`` with the default solver (``solver="auto"``: for an L2 loss, CoCoA+,
which streams a row group whose rows would not fit its owner, ``CocoaOptions.rows``) on the
on-disk training set, with the test set, until the certified gap is at most ``--rel-tol`` of
the primal (checked after every round: the solver's certificate comes from its own pass).
It prints one line per round (wall seconds, primal, gap / primal), then:

- the data's size on disk and as the kernels read it (int32 ids, values) against the sum of
  the workers' memory limits;
- whether the rows were streamed, and whether any worker was restarted (its address changed);
- each worker's peak resident memory (``VmHWM``) against its limit;
- seconds per round per nonzero (the median round), for comparing with a run whose rows are
  kept (``--rows memory`` on a set that fits);
- the final gap, the test AUPRC of the certified model.

Reproduce (BENCHMARKS.md, "Out of core: 5e9 nonzeros on 3-4 GiB of workers": the runs of its
table, alpha 1e-5; the logistic and the first hinge run on workers of 1.5 GiB, the last hinge
run on workers of 2 GiB)::

    daskpd generate splice big/splice-5e9-train.zarr --n-samples 11100000 --binary \\
        --positive-rate 0.01 --seed 0 --workers 2 --memory-limit 2GiB
    daskpd generate splice big/splice-5e9-test.zarr --n-samples 200000 --binary \\
        --positive-rate 0.01 --seed 1 --workers 2 --memory-limit 2GiB
    python pipelines/bench_out_of_core.py big/splice-5e9-train.zarr \\
        --test big/splice-5e9-test.zarr --memory-limit 1.5GiB --alpha 1e-5 --loss logistic
    python pipelines/bench_out_of_core.py big/splice-5e9-train.zarr \\
        --test big/splice-5e9-test.zarr --memory-limit 2GiB --alpha 1e-5 --loss hinge
"""

from __future__ import annotations

import argparse
import statistics
import time


def _stored_bytes(path):
    import os

    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="training set (a daskpd zarr dataset)")
    parser.add_argument("--test", help="test set (a daskpd zarr dataset)")
    parser.add_argument("--loss", default="hinge")
    parser.add_argument("--alpha", type=float, default=1e-4)
    parser.add_argument("--rel-tol", type=float, default=1e-3)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="1.5GiB")
    parser.add_argument("--rows", default="auto", choices=("auto", "memory", "stream"))
    args = parser.parse_args(argv)

    from daskpd._cluster import (
        ClusterOptions,
        cluster_client,
        peak_rss_mib,
        worker_addresses,
    )
    from daskpd.data import open_dataset
    from daskpd.solvers import solve

    data = open_dataset(args.data)
    test = open_dataset(args.test) if args.test else None
    kernel_bytes = data.nnz * (4 + (0 if data.binary else data.dtype.itemsize))
    print(
        f"{args.data}: {data.n_samples} x {data.n_features}, {data.nnz:.3e} nonzeros, "
        f"{_stored_bytes(args.data) / 2**30:.1f} GiB on disk, "
        f"{kernel_bytes / 2**30:.1f} GiB as the kernels read it"
    )
    rounds = []
    started = time.perf_counter()

    def note(info):
        row = info.row
        if row is None:
            return False
        rounds.append((info.wall_seconds, float(row["primal"]), float(row["gap"])))
        print(
            f"round {info.epoch}: wall {info.wall_seconds:.1f} s, primal {row['primal']:.6g}, "
            f"gap/primal {row['gap'] / row['primal']:.2e}",
            flush=True,
        )
        return row["gap"] <= args.rel_tol * row["primal"]

    options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
    with cluster_client(options, start=True) as client:
        limits = client.run_on_scheduler(
            lambda dask_scheduler: [ws.memory_limit for ws in dask_scheduler.workers.values()]
        )
        print(
            f"{args.workers} workers, memory limits {sum(limits) / 2**30:.2f} GiB in all "
            f"({sum(limits) / kernel_bytes:.3f} of the data as read, "
            f"{sum(limits) / _stored_bytes(args.data):.3f} of its stored bytes)",
            flush=True,
        )
        before = set(worker_addresses(client))
        result = solve(
            data, loss=args.loss, alpha=args.alpha, client=client, test_data=test,
            tol=0.0, max_epochs=args.epochs, callbacks=[note], rows=args.rows,
        )  # fmt: skip
        restarted = set(worker_addresses(client)) != before
        peaks = client.run(peak_rss_mib)
    wall = time.perf_counter() - started
    steps = [b[0] - a[0] for a, b in zip(rounds, rounds[1:], strict=False)]
    final = result.history[-1]
    print(f"solver {result.solver}, stop: {result.stop_reason}, {result.n_epochs} rounds")
    print(f"workers restarted: {'yes' if restarted else 'no'}")
    for (address, peak), limit in zip(sorted(peaks.items()), limits, strict=False):
        print(f"peak RSS {address}: {peak:.0f} MiB of {limit / 2**20:.0f} MiB")
    if steps:
        per = statistics.median(steps)
        print(f"median round {per:.2f} s: {per / data.nnz * 1e9:.2f} ns per nonzero")
    print(f"timings: {result.timings}")
    print(
        f"final: gap/primal {final['gap'] / final['primal']:.2e}, "
        f"test AUPRC {final.get('test_auprc', float('nan')):.4f}, wall {wall:.1f} s"
    )


if __name__ == "__main__":
    main()
