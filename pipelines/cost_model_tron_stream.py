"""``solver="tron"`` on rows streamed from the store: the parts of ``bench_cost_model.py``
that measure a streamed run and check tron's cost model against it
(``daskpd.bench.costmodel_tron``'s ``stream_ns``).

``tron-stream``
    One tron logistic run to the certified line (the first history row with ``gap <= 1e-3 *
    dual``) on a fresh LocalCluster of ``--workers`` one-thread processes of
    ``--memory-limit`` each, ``TronOptions.rows`` as ``--rows`` (``auto``: streamed when a
    group does not fit its owner's share). Every round is timed in the driver (its kind, as
    ``tron-runs`` does); after the run, each worker's peak resident memory (``VmHWM``),
    how often Dask paused a worker (its log's "Pausing worker" lines) and whether one was
    restarted (the workers' addresses changed). One JSON record.
``tron-stream-report``
    Fits tron's model on ``tron-runs`` records (rows kept) as ``tron-report`` does, fits
    ``stream_ns`` on the rounds of the ``--fit`` streamed runs, and prints every streamed
    run's rounds by kind and its whole time against the model (with its own counts, and
    with the counts' law of ``--counts`` where given).

Reproduce (BENCHMARKS.md, "Many machines: the cost model of tron", "Streamed rows")::

    python pipelines/bench_cost_model.py tron-stream bench-data/splice-1e08-train.zarr \\
        --rows stream --memory-limit 1.5GiB --out pipelines/cost_model/tron_stream_1e8.json
    daskpd generate splice bench-data/splice-1e09-train.zarr --n-samples 2250000 \\
        --binary --positive-rate 0.01 --seed 0 --workers 2 --memory-limit 2GiB
    python pipelines/bench_cost_model.py tron-stream bench-data/splice-1e09-train.zarr \\
        --rows auto --memory-limit 1.5GiB --out pipelines/cost_model/tron_stream_1e9.json
    python pipelines/bench_cost_model.py tron-stream-report \\
        --runs pipelines/cost_model/tron_runs.json \\
        --runs pipelines/cost_model/tron_runs_more.json \\
        --fit pipelines/cost_model/tron_stream_1e8.json \\
        --check pipelines/cost_model/tron_stream_1e9.json \\
        --counts pipelines/cost_model/tron_rounds.json
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time

import numpy as np
from cost_model_tron import (
    RoundClock,
    _commit,
    _counts,
    _cpu_seconds,
    _others_cores,
    _owners_threads,
    _reached,
    _tron_rounds,
    _write_json,
)


def _stored_bytes(path):
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


@contextlib.contextmanager
def _read_fields(seen):
    """Records in ``seen`` the state fields :meth:`Tron.read_rows` returns in this process
    (``stream_nnz``: 0 for kept rows)."""
    from daskpd.solvers.tron import Tron

    saved = Tron.read_rows

    def read_rows(self, *args, **kwargs):
        groups, fields = saved(self, *args, **kwargs)
        seen.update({"stream_nnz": 0, **fields})
        return groups, fields

    Tron.read_rows = read_rows
    try:
        yield seen
    finally:
        Tron.read_rows = saved


def _pauses(client):
    """Lines of the workers' logs that say Dask paused the worker (memory above its pause
    threshold), by worker address."""
    logs = client.get_worker_logs()
    return {
        address: sum("Pausing worker" in message for _, message in lines)
        for address, lines in logs.items()
    }


def tron_stream(args):
    from daskpd._cluster import ClusterOptions, cluster_client, peak_rss_mib, worker_addresses
    from daskpd.data import open_dataset
    from daskpd.solvers import solve

    data = open_dataset(args.data)
    kernel_bytes = data.nnz * (4 + (0 if data.binary else data.dtype.itemsize)) + 8 * (
        data.n_samples + 1
    )
    stored = _stored_bytes(args.data)
    print(f"{args.data}: {data.n_samples} x {data.n_features}, {data.nnz:.4e} nonzeros, "
          f"{stored / 2**30:.2f} GiB stored, {kernel_bytes / 2**30:.2f} GiB as the kernels "
          "read it", flush=True)  # fmt: skip
    options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
    hit, seen = {}, {}
    started = time.strftime("%Y-%m-%d %H:%M")
    with (
        cluster_client(options, start=True) as client,
        RoundClock() as clock,
        _read_fields(seen),
    ):
        limits = client.run_on_scheduler(
            lambda dask_scheduler: [ws.memory_limit for ws in dask_scheduler.workers.values()]
        )
        print(f"{args.workers} workers, limits {sum(limits) / 2**30:.2f} GiB in all "
              f"({sum(limits) / kernel_bytes:.3f} of the data as read)", flush=True)  # fmt: skip
        grid = args.grid or args.workers
        threads = _owners_threads(client, grid)
        before = set(worker_addresses(client))
        cpu, tick = _cpu_seconds(), time.perf_counter()

        def stop(info):
            row = info.row
            if row is None or "dual" not in row:
                return False
            print(f"epoch {row['epoch']}: wall {row['wall_seconds']:.1f} s, primal "
                  f"{row['primal']:.8g}, gap/dual {(row['primal'] - row['dual']) / row['dual']:.2e}"
                  f", rounds {len(clock.stamps)}", flush=True)  # fmt: skip
            if _reached(row["primal"], row["dual"]):
                hit.update(epoch=row["epoch"], wall=row["wall_seconds"], at=len(clock.stamps),
                           gap=(row["primal"] - row["dual"]) / row["dual"],
                           others=_others_cores(cpu, _cpu_seconds(),
                                                time.perf_counter() - tick))  # fmt: skip
                return True
            return False

        result = solve(
            data, loss="logistic", alpha=args.alpha, solver="tron", grid=grid, client=client,
            tol=0.0, max_epochs=args.cap, eval_every=args.cap, callbacks=[stop],
            rows=args.rows, stream_nnz=args.stream_nnz,
        )  # fmt: skip
        call = time.perf_counter() - tick
        restarted = set(worker_addresses(client)) != before
        peaks = client.run(peak_rss_mib)
        pauses = _pauses(client)
    rounds = clock.rounds(hit.get("at"))
    by_kind = {}
    for kind, seconds, *_ in rounds:
        by_kind.setdefault(kind, []).append(seconds)
    record = {
        "command": "bench_cost_model.py tron-stream", "date": started, "commit": _commit(),
        "set": os.path.basename(os.path.normpath(args.data)), "nnz": data.nnz,
        "n_samples": data.n_samples, "n_features": data.n_features,
        "n_used": int(np.count_nonzero(np.asarray(data.col_nnz))),
        "kernel_bytes": kernel_bytes, "stored_bytes": stored, "alpha": args.alpha,
        "grid": grid, "workers": args.workers, "threads": threads,
        "memory_limit": args.memory_limit, "limits": limits, "rows": args.rows,
        "stream_nnz": seen.get("stream_nnz"), "streamed": bool(seen.get("stream_nnz")),
        "init_seconds": result.timings["init"], "wall_to": hit.get("wall"),
        "epochs_to": hit.get("epoch"), "gap_to": hit.get("gap"), "call_seconds": call,
        "others_cores": hit.get("others"), "counts_to": _counts(rounds),
        "rounds": [(kind, round(seconds, 5)) for kind, seconds, *_ in rounds],
        "median_seconds": {k: statistics.median(v) for k, v in by_kind.items()},
        "peak_rss_mib": peaks, "pauses": pauses, "restarted": restarted,
    }  # fmt: skip
    _write_json(args.out, record)
    print(f"streamed: {record['streamed']} (chunks of {record['stream_nnz']} nonzeros); line "
          f"at {record['wall_to']} s, epoch {record['epochs_to']}, {record['counts_to']}; "
          f"start {record['init_seconds']:.1f} s", flush=True)  # fmt: skip
    for kind, seconds in record["median_seconds"].items():
        print(f"{kind}: {len(by_kind[kind])} rounds, median {seconds:.3f} s, "
              f"{seconds / data.nnz * 1e9:.2f} ns a nonzero of the data")  # fmt: skip
    for address, peak in sorted(peaks.items()):
        print(f"peak RSS {address}: {peak:.0f} MiB; paused {pauses.get(address, 0)} times")
    print(f"restarted: {'yes' if restarted else 'no'}; others kept "
          f"{record['others_cores']} cores busy; wrote {args.out}")  # fmt: skip


# -- tron-stream-report -----------------------------------------------------------------------


def _streamed_times(ct, rec):
    """The record's median rounds by kind as streamed :class:`RoundTime` rows (a streamed
    group's share is on every used column)."""
    by_kind = {}
    for kind, seconds in rec["rounds"]:
        by_kind.setdefault(kind, []).append(seconds)
    return [
        ct.RoundTime(
            label=rec["set"], kind=kind, nnz=rec["nnz"], columns=ct.Columns(rec["n_used"]),
            groups=rec["grid"], workers=rec["workers"], threads=rec["threads"],
            seconds=statistics.median(seconds), streamed=rec["streamed"],
        )  # fmt: skip
        for kind, seconds in by_kind.items()
    ]


def _pct(x):
    return f"{100 * x:+.0f}%"


def tron_stream_report(args):
    from cost_model_tron_report import _count_law, _fit_inputs, _load

    from daskpd.bench import costmodel_tron as ct

    files = [_load(path) for path in args.runs]
    times, runs, apart = _fit_inputs(files, args.max_others)
    rates = ct.fit_tron(times, runs, **apart)
    network = ct.Network(rates.hop, apart["bandwidth"])
    fits = [_load(path) for path in args.fit]
    rates = ct.fit_stream_ns(
        rates, [t for rec in fits for t in _streamed_times(ct, rec)], network
    )
    print(f"- kept rows' fit: records of {files[0]['date']} (commit {files[0]['commit']})")
    fitted_on = ", ".join(f"{r['set']} ({r['commit']})" for r in fits)
    print(f"- stream_ns = {rates.stream_ns:.2f} ns a nonzero a worker reads from the store, "
          f"fitted on {fitted_on}")  # fmt: skip
    law = None
    if args.counts:
        law = _count_law(ct, _load(args.counts)["rows"])
    print("\n| run | kind | rounds | measured s (median) | model s | error |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    checks = [(rec, "fit") for rec in fits] + [(_load(p), "check") for p in args.check or ()]
    wholes = []
    for rec, role in checks:
        label = f"{rec['set']} ({role})"
        layout = ct.Layout(rec["grid"], rec["workers"], rec["threads"], rec["streamed"])
        columns = ct.Columns(rec["n_used"])
        for t in _streamed_times(ct, rec):
            model = ct.round_seconds(rates, t.kind, t.nnz, t.columns, t.layout, network)
            count = rec["counts_to"][t.kind]
            print(f"| {label} | {t.kind} | {count} | {t.seconds:.3f} | {model:.3f} "
                  f"| {_pct(model / t.seconds - 1)} |")  # fmt: skip
        counts = _tron_rounds(rec["counts_to"])
        start = ct.init_seconds(rates, rec["nnz"], columns, layout, network)
        whole = ct.seconds_to_line(rates, counts, rec["nnz"], columns, layout, network)
        projected = None
        if law is not None:
            projected = ct.seconds_to_line(
                rates, law.at(rec["alpha"], rec["n_samples"]), rec["nnz"], columns, layout,
                network,
            )  # fmt: skip
        wholes.append((label, rec, start, whole, projected))
    print("\n| run | rounds: CG / step / shorter / gradient | start s | start, model "
          "| to the line s (measured) | model, its own counts | error "
          "| model, the counts' law | error |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, rec, start, whole, projected in wholes:
        c = rec["counts_to"]
        law_cells = (f"{projected:.1f} | {_pct(projected / rec['wall_to'] - 1)}"
                     if projected is not None else "- | -")  # fmt: skip
        print(f"| {label} | {c['hessian']} / {c['step']} / {c['numbers']} / {c['gradient']} "
              f"| {rec['init_seconds']:.1f} | {start:.1f} | {rec['wall_to']:.1f} "
              f"| {whole:.1f} | {_pct(whole / rec['wall_to'] - 1)} | {law_cells} |")  # fmt: skip
    if law is not None:
        for label, rec, *_ in wholes:
            r = law.at(rec["alpha"], rec["n_samples"])
            print(f"- the counts' law at {label}: {r.hessian:.1f} CG rounds, {r.newton:.1f} "
                  "Newton steps")  # fmt: skip


def add_parsers(parts):
    """The streamed tron subcommands of ``bench_cost_model.py``."""
    run = parts.add_parser("tron-stream", help="a tron run on streamed rows, to the line")
    run.add_argument("data")
    run.add_argument("--rows", default="auto", choices=("auto", "memory", "stream"))
    run.add_argument("--stream-nnz", type=int, default=None)
    run.add_argument("--alpha", type=float, default=1e-5)
    run.add_argument("--grid", type=int, default=None, help="row groups (one a worker)")
    run.add_argument("--workers", type=int, default=2)
    run.add_argument("--memory-limit", default="1.5GiB")
    run.add_argument("--cap", type=int, default=60, help="at most this many Newton steps")
    run.add_argument("--out", required=True)
    report = parts.add_parser("tron-stream-report", help="stream_ns fitted and checked")
    report.add_argument("--runs", action="append", required=True, help="tron-runs files")
    report.add_argument("--fit", action="append", required=True, help="tron-stream files")
    report.add_argument("--check", action="append", help="tron-stream files, repeatable")
    report.add_argument("--counts", help="a tron-rounds file (the counts' law)")
    report.add_argument("--max-others", type=float, default=0.15)
    return {"tron-stream": tron_stream, "tron-stream-report": tron_stream_report}
