"""Ingestion throughput of ``ingest_svmlight`` against scikit-learn's ``load_svmlight_file``.

Writes a random svmlight file (or uses ``--file``), then times, on the same file, the median of
``--repeats`` runs of

* scikit-learn's ``load_svmlight_file`` (in memory, single thread);
* daskpd's parser alone (the numba kernel over 16 MiB byte buffers, in memory, one thread);
* daskpd ingestion into the zarr format (parse + write + statistics, on disk) with the local
  threaded scheduler, with the single-threaded ``sync`` scheduler, and optionally on a
  LocalCluster (``--workers N``);
* daskpd ingestion of the same text gzip-compressed (one task: gzip streams cannot be split).

Each daskpd result is checked equal to scikit-learn's matrix and labels. Prints a Markdown
table (MB/s of uncompressed text, million nonzeros/s) and a JSON line.

Example::

    python pipelines/bench_ingest.py --rows 200000 --features 100000 --nnz-per-row 30
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import scipy.sparse as sp


def make_file(path, n_rows, n_features, nnz_per_row, seed):
    """Write a random one-based svmlight file with 6-decimal values; return its nonzeros."""
    from daskpd.io.svmlight import dump_svmlight
    from daskpd.kernels.features import canonical_rows

    rng = np.random.default_rng(seed)
    indptr = np.arange(n_rows + 1, dtype=np.int64) * nnz_per_row
    indptr, indices = canonical_rows(indptr, rng.integers(0, n_features, n_rows * nnz_per_row))
    X = sp.csr_matrix(
        (rng.standard_normal(len(indices)), indices, indptr), shape=(n_rows, n_features)
    )
    dump_svmlight(X, rng.choice([-1.0, 1.0], n_rows), path, decimals=6)
    return X.nnz


def timed(function, repeats):
    """Median wall time and median CPU time of this process over ``repeats`` calls.

    Returns ``(wall, wall_times, cpu, result)``; ``cpu`` counts only this process (not the
    workers of a LocalCluster), which makes it a fairer speed measure on a shared machine.
    """
    times, cpu_times = [], []
    result = None
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        result = function()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    return statistics.median(times), times, statistics.median(cpu_times), result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=100_000)
    parser.add_argument("--nnz-per-row", type=int, default=30)
    parser.add_argument("--file", help="existing svmlight file to use instead")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0, help="also run on a LocalCluster")
    parser.add_argument("--workdir", default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import dask
    from sklearn.datasets import load_svmlight_file

    from daskpd.io.svmlight import ingest_svmlight

    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_ingest_")
    os.makedirs(workdir, exist_ok=True)
    source = args.file or os.path.join(workdir, "bench.svm")
    if not args.file:
        make_file(source, args.rows, args.features, args.nnz_per_row, args.seed)
    size = os.path.getsize(source)
    packed = os.path.join(workdir, "bench.svm.gz")
    with open(source, "rb") as plain, gzip.open(packed, "wb", compresslevel=1) as out:
        shutil.copyfileobj(plain, out, 2**24)

    expected_X, expected_y = load_svmlight_file(source)  # also warms the page cache
    nnz = expected_X.nnz
    # warm up numba's on-disk cache outside the timings
    ingest_svmlight(source, os.path.join(workdir, "warm"), overwrite=True)

    def ours(path, dest, client=None):
        def run():
            dataset = ingest_svmlight(path, dest, overwrite=True, client=client)
            return dataset

        return run

    rows = []

    def record(name, seconds, times, text_bytes, cpu=None):
        rows.append(
            {
                "method": name,
                "seconds": seconds,
                "cpu_seconds": cpu,
                "runs": [round(t, 3) for t in times],
                "MB_per_s": text_bytes / 1e6 / seconds,
                "Mnnz_per_s": nnz / 1e6 / seconds,
            }
        )

    seconds, times, cpu, _ = timed(lambda: load_svmlight_file(source), args.repeats)
    record("sklearn load_svmlight_file (in memory)", seconds, times, size, cpu)

    def parse_only():
        from daskpd.io.svmlight import _line_blocks, _parse_block, _ParseOptions

        options = _ParseOptions(True, False, "<f8", 2**24)
        total = 0
        with open(source, "rb") as handle:
            for block in _line_blocks(handle, 0, None, options.chunk_bytes):
                total += len(_parse_block(block, options)[0]["values"])
        assert total == nnz

    seconds, times, cpu, _ = timed(parse_only, args.repeats)
    record("daskpd parser only (in memory)", seconds, times, size, cpu)
    dest = os.path.join(workdir, "out")
    seconds, times, cpu, dataset = timed(ours(source, dest), args.repeats)
    record("daskpd ingest, threads (to zarr)", seconds, times, size, cpu)
    check(dataset, expected_X, expected_y)
    with dask.config.set(scheduler="sync"):
        seconds, times, cpu, dataset = timed(ours(source, dest), args.repeats)
    record("daskpd ingest, 1 thread (to zarr)", seconds, times, size, cpu)
    check(dataset, expected_X, expected_y)
    seconds, times, cpu, dataset = timed(ours(packed, dest), args.repeats)
    record("daskpd ingest of .gz, 1 task (to zarr)", seconds, times, size, cpu)
    check(dataset, expected_X, expected_y)
    if args.workers:
        from distributed import Client, LocalCluster

        with LocalCluster(
            n_workers=args.workers, threads_per_worker=1, dashboard_address="127.0.0.1:0"
        ) as cluster:
            with Client(cluster) as client:
                ingest_svmlight(source, os.path.join(workdir, "warm"), overwrite=True,
                                client=client)  # fmt: skip
                seconds, times, _, dataset = timed(ours(source, dest, client), args.repeats)
        record(f"daskpd ingest, LocalCluster {args.workers} workers", seconds, times, size)
        check(dataset, expected_X, expected_y)

    print(f"file: {size / 1e6:.1f} MB, {expected_X.shape[0]} rows, {nnz} nonzeros; "
          f"median of {args.repeats}; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print()
    print("| method | median wall s | MB/s of text | M nonzeros/s | median CPU s | MB/CPU-s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        cpu = row["cpu_seconds"]
        cpu_text = f"{cpu:.2f} | {size / 1e6 / cpu:.1f}" if cpu else "n/a | n/a"
        print(f"| {row['method']} | {row['seconds']:.2f} | {row['MB_per_s']:.1f} | "
              f"{row['Mnnz_per_s']:.2f} | {cpu_text} |")  # fmt: skip
    print()
    print(json.dumps({"bytes": size, "nnz": nnz, "rows": rows}))
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


def check(dataset, expected_X, expected_y):
    """Fail loudly when the ingested dataset differs from scikit-learn's result."""
    X, y = dataset.read_rows(0, dataset.n_samples)
    X = sp.csr_matrix(X)
    if X.shape != expected_X.shape or (X != expected_X).nnz or not np.array_equal(y, expected_y):
        raise SystemExit("ingested data differ from load_svmlight_file")


if __name__ == "__main__":
    main()
