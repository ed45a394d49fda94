"""A Dask cluster of several hosts on this machine (network namespaces, shaped TLS links).

Needs root, iproute2 (``ip``, ``tc``) and ``openssl``; ``daskpd._netns`` builds the cluster.
Three commands:

``start``
    Start a scheduler and ``--workers`` workers, each in its own namespace, every link
    shaped to ``--rate``; print the scheduler's address and the client's TLS files, and
    hold until Ctrl-C (or SIGTERM), which tears everything down.
``measure``
    For each rate of ``--rates`` and worker count of ``--workers``: the median round trip
    of a trivial task (client -> scheduler -> worker -> client), and for each length ``d``
    of ``--sizes`` the median wall time of a tree-sum of K float64 vectors of length ``d``
    made on the K workers (one per worker; pairwise sums pinned to the left operand's
    worker, ``ceil(log2 K)`` levels), from submitting the sums until the scheduler reports
    the root done; then of fetching the root to the client (``Future.result``: through the
    scheduler), and again straight from its worker (``gather(direct=True)``); the bytes
    each step moved, from the bridge ports' counters. A rate ``none`` leaves the links
    unshaped. The byte columns: what the workers received during the reduction, the
    scheduler during the reduction and the fetch through it, the client during that fetch;
    "MB/s a level" is the vector's size times the levels over the reduction's time. Prints
    markdown tables and the fit of
    ``reduction_time(d, K) = latency * ceil(log2 K) + 8 d * ceil(log2 K) / bandwidth``.
``cleanup``
    Remove what runs killed without their teardown left behind (namespaces, links,
    processes, temporary directories); live runs are left alone.

Reproduce (BENCHMARKS.md, "Many machines: reductions across network namespaces")::

    python pipelines/netns_cluster.py measure --rates 100mbit,1gbit,10gbit,none \\
        --workers 2 --sizes 1,1e4,1e5,1e6,4e6 --repeats 5
    python pipelines/netns_cluster.py measure --rates 100mbit,1gbit --workers 4 \\
        --sizes 1,1e4,1e5,1e6,4e6 --repeats 5

``start`` holds a cluster for other programs, e.g. ``daskpd train --scheduler ADDRESS`` with
the printed ``--tls-*`` options::

    python pipelines/netns_cluster.py start --workers 2 --rate 1gbit
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from daskpd._netns import NetnsCluster, cleanup_stale_runs, unavailable_reason

MB = 1e6


def _tree_sum(client, parts, owners):
    """Sum ``parts`` (futures, ``parts[k]`` on ``owners[k]``) pairwise, level by level, each
    sum on its left operand's worker; returns the root's future and the number of levels."""
    level = list(zip(parts, owners, strict=True))
    levels = 0
    while len(level) > 1:
        summed = []
        for index in range(0, len(level) - 1, 2):
            (left, owner), (right, _) = level[index], level[index + 1]
            future = client.submit(
                np.add, left, right, workers=[owner], allow_other_workers=False, pure=False
            )
            summed.append((future, owner))
        if len(level) % 2:
            summed.append(level[-1])
        level = summed
        levels += 1
    return level[0][0], levels


def _received(before, after, roles):
    return sum(after[role].received - before[role].received for role in roles)


def _one_reduction(cluster, client, d):
    """Times and bytes of one tree-sum of length-``d`` vectors made on every worker."""
    from distributed import wait

    workers = cluster.worker_addresses
    parts = [
        client.submit(np.ones, d, workers=[worker], allow_other_workers=False, pure=False)
        for worker in workers
    ]
    wait(parts)
    before = cluster.link_bytes()
    start = time.perf_counter()
    root, levels = _tree_sum(client, parts, workers)
    wait(root)
    reduced = time.perf_counter()
    middle = cluster.link_bytes()
    value = root.result()
    fetched = time.perf_counter()
    after = cluster.link_bytes()
    # the same result again, straight from its worker (Client.gather's direct=True)
    client.gather(root, direct=True)
    direct = time.perf_counter() - fetched
    if value.shape != (d,) or value[0] != len(workers):
        raise AssertionError(f"wrong sum: {value[:3]}")
    worker_roles = [role for role in before if role.startswith("worker-")]
    return {
        "levels": levels,
        "reduce": reduced - start,
        "fetch": fetched - reduced,
        "fetch_direct": direct,
        "workers_received": _received(before, middle, worker_roles),
        "scheduler_received": _received(before, after, ["scheduler"]),
        "client_received": _received(middle, after, ["client"]),
    }


def _round_trip(client, worker, repeats):
    times = []
    for index in range(repeats):
        start = time.perf_counter()
        client.submit(int, index, workers=[worker], pure=False).result()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_one(rate, n_workers, sizes, repeats, trips=50):
    """Round trip and reduction rows on a fresh cluster of ``n_workers`` at ``rate``."""
    rows = []
    cluster = NetnsCluster(n_workers=n_workers, rate=rate)
    # the default client: distributed.wait finds it
    with cluster, cluster.client(set_as_default=True) as client:
        # the first transfers open (and TLS-handshake) the connections: not timed
        _one_reduction(cluster, client, 1)
        _round_trip(client, cluster.worker_addresses[-1], 5)
        trip = _round_trip(client, cluster.worker_addresses[-1], trips)
        for d in sizes:
            runs = [_one_reduction(cluster, client, d) for _ in range(repeats)]
            row = {"rate": rate, "K": n_workers, "d": d, "levels": runs[0]["levels"]}
            for key in runs[0]:
                if key != "levels":
                    row[key] = statistics.median(run[key] for run in runs)
            rows.append(row)
    return trip, rows


def fit(rows):
    """Least squares of ``reduce = latency * levels + 8 d levels / bandwidth``: returns
    (latency s, bandwidth bytes/s)."""
    design = np.array([[row["levels"], 8.0 * row["d"] * row["levels"]] for row in rows])
    times = np.array([row["reduce"] for row in rows])
    # relative errors: the small rows (the latency) weigh as much as the large ones
    weights = 1.0 / times
    (latency, per_byte), *_ = np.linalg.lstsq(design * weights[:, None], times * weights)
    return latency, 1.0 / per_byte


def _commit():
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, cwd=Path(__file__).parent,
    )  # fmt: skip
    return done.stdout.strip() or "unknown"


def _table(trips, rows):
    lines = [
        "| rate | K | d | vector MB | reduce s | fetch s | fetch direct s | workers received MB "
        "| scheduler received MB | client received MB | MB/s a level |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        size = 8 * row["d"] / MB
        cells = [
            row["rate"] or "none", row["K"], f"{row['d']:.0e}", f"{size:.3g}",
            f"{row['reduce']:.4f}", f"{row['fetch']:.4f}", f"{row['fetch_direct']:.4f}",
            f"{row['workers_received'] / MB:.3f}", f"{row['scheduler_received'] / MB:.3f}",
            f"{row['client_received'] / MB:.3f}", f"{size * row['levels'] / row['reduce']:.1f}",
        ]  # fmt: skip
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    lines += ["", "| rate | K | trivial task round trip ms |", "| --- | ---: | ---: |"]
    lines += [f"| {rate or 'none'} | {k} | {trip * 1e3:.2f} |" for (rate, k), trip in trips.items()]
    return "\n".join(lines)


def _measure(args):
    rates = [None if rate == "none" else rate for rate in args.rates.split(",")]
    counts = [int(k) for k in args.workers.split(",")]
    sizes = [int(float(d)) for d in args.sizes.split(",")]
    trips, rows = {}, []
    for rate in rates:
        for k in counts:
            trips[rate, k], measured = measure_one(rate, k, sizes, args.repeats)
            rows += measured
    print(f"commit {_commit()}, {time.strftime('%Y-%m-%d')}, medians of {args.repeats} runs\n")
    print(_table(trips, rows))
    print()
    for rate in rates:
        latency, bandwidth = fit([row for row in rows if row["rate"] == rate])
        print(
            f"fit at {rate or 'none'}: latency {latency * 1e3:.2f} ms a level, bandwidth "
            f"{bandwidth / MB:.1f} MB/s ({bandwidth * 8 / 1e9:.3f} Gbit/s)"
        )
        for row in rows:
            if row["rate"] == rate:
                model = row["levels"] * (latency + 8 * row["d"] / bandwidth)
                print(f"  d={row['d']:.0e} K={row['K']}: {row['reduce']:.4f} s, fit {model:.4f} s")
    return 0


def _start(args):
    rate = None if args.rate == "none" else args.rate
    with NetnsCluster(n_workers=args.workers, rate=rate) as cluster:
        security = cluster.security
        print(f"scheduler {cluster.address}")
        print(f"workers {' '.join(cluster.worker_addresses)}")
        print(
            f"--tls-ca-file {security.tls_ca_file} --tls-cert {security.tls_client_cert} "
            f"--tls-key {security.tls_client_key}"
        )
        print("Ctrl-C to stop", flush=True)
        while True:
            time.sleep(3600)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a cluster and hold it until Ctrl-C")
    start.add_argument("--workers", type=int, default=2)
    start.add_argument("--rate", default="1gbit", help="tc rate of every link; none: not shaped")
    measure = commands.add_parser("measure", help="round trips and reductions, a markdown table")
    measure.add_argument(
        "--rates", default="100mbit,1gbit,10gbit", help="tc rates; none: links not shaped"
    )
    measure.add_argument("--workers", default="2", help="worker counts K, comma-separated")
    measure.add_argument("--sizes", default="1,1e4,1e5,1e6,4e6", help="vector lengths d")
    measure.add_argument("--repeats", type=int, default=5)
    commands.add_parser("cleanup", help="remove what dead runs left behind")
    args = parser.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        print(f"netns_cluster: {reason}", file=sys.stderr)
        return 2
    # SIGTERM unwinds like Ctrl-C: the clusters' teardown runs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    if args.command == "cleanup":
        removed = cleanup_stale_runs()
        print(f"removed {len(removed)} dead run(s): {' '.join(removed)}".rstrip(": "))
        return 0
    try:
        return _start(args) if args.command == "start" else _measure(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
