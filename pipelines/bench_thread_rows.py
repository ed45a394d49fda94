"""A group's threads' output rows: new rows summed in one thread against kept rows zeroed and
summed in the threads (``daskpd.solvers.common.resident``), the part of a resident group's
task beyond its kernel.

For each number of columns and threads, best of ``--repeats`` of each way, in one process:
the rows (threads x columns x ``--vectors``) made ready, every page written (as a kernel
writes them), summed over the threads and the sum copied out (the share a task returns).
"before" is the way the tasks had until the change: ``np.zeros`` (fresh pages, above glibc's
mmap threshold, on every task) and the rows added into the first in one thread. "now" is
:func:`~daskpd.solvers.common.resident.thread_rows` (the group's kept rows),
:func:`~daskpd.solvers.common.resident.zeroed_rows` and
:func:`~daskpd.solvers.common.resident.summed_rows`.

Reproduce (BENCHMARKS.md, "A group's threads' output rows kept")::

    python pipelines/bench_thread_rows.py --columns 1720000 4050000 --threads 1 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from daskpd.solvers.common import resident


def _best(work, repeats):
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def before(threads, columns, vectors):
    """The tasks' way until the change: new zeroed rows, summed in one thread."""

    def work():
        rows = np.zeros((threads, columns, vectors))
        rows[:, ::256] = 1.0
        total = rows[0]
        for t in range(1, threads):
            total += rows[t]
        np.ascontiguousarray(total.T)

    return work


def now(threads, columns, vectors):
    """The group's kept rows, zeroed and summed in its threads."""
    group = resident.RowGroup(None, None, None, True, None, None, None, None, [])

    def work():
        rows = resident.zeroed_rows(
            resident.thread_rows(group, (threads, columns, vectors)), threads
        )
        rows[:, ::256] = 1.0
        total = resident.summed_rows(rows, threads)
        np.ascontiguousarray(total.T)
        resident.keep_rows(group, rows)

    return work


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--columns", type=int, nargs="+", default=[1_720_000, 4_050_000])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--vectors", type=int, default=2, help="vectors a column (default 2)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    print("| columns | threads | before: ms (ns a column, thread, vector) | now: ms (ns) |")
    print("| ---: | ---: | ---: | ---: |")
    for columns in args.columns:
        for threads in args.threads:
            units = columns * threads * args.vectors / 1e9
            old = _best(before(threads, columns, args.vectors), args.repeats)
            new = _best(now(threads, columns, args.vectors), args.repeats)
            print(
                f"| {columns:,} | {threads} | {old * 1e3:.1f} ({old / units:.2f}) | "
                f"{new * 1e3:.1f} ({new / units:.2f}) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
