"""Issue 28's cost model: measure runs here, fit the model, check it, plan the splice-site job.

Five parts for the default solver (``daskpd.bench.costmodel`` has the model and its
fitting), four for tron:

``runs``
    The default solver (``cocoa``, one row group) on fresh LocalClusters of ``--workers``
    one-thread processes: for each training set of ``--data``, each loss of ``--losses``
    and alpha of ``--alphas``, with 1 and 2 threads, rows kept; on the last set also with
    the rows streamed; and on ``--tiny`` (a set of few nonzeros, whose rounds are the fixed
    cost). Each run goes until the certified gap is at most 1e-3 of the primal and at least
    ``--min-rounds`` rounds; ``--repeats`` times, interleaved. Writes one JSON record a
    configuration (medians over the repeats) to ``--out``.
``groups``
    Rounds to ``(1 + 1e-3) P*`` with ``K`` row groups (``sigma' = K``), in this process and
    one thread (the counts depend on the grid and the seed, not on the workers), up to
    ``--cap`` rounds; a run stopped by the cap gets the round its last 20 rounds' linear rate
    reaches 1e-3 (marked extrapolated). JSON lines to ``--out``.
``dso``
    DSO's median epoch on ``--workers`` processes for each grid of ``--grids`` (from zero,
    the layout of a grid not stored built in the first epoch, which is not counted).
``bytes``
    What each worker receives a round with ``--grid`` row groups (Dask's transfer log),
    against the model's ``(K - 1) * d * 8``.
``report``
    Fits the model on the records (plus the out-of-core runs given with ``--runs``), prints
    the parameters, every measured run against its prediction, and the plan for the
    1.6e11-nonzero splice-site job on N machines.
``tron-runs``, ``tron-rounds``, ``tron-netns``, ``tron-report``
    The same for ``solver="tron"`` (issue 49; ``cost_model_tron.py`` beside this script,
    ``daskpd.bench.costmodel_tron`` the model): runs to the line with every round timed, the
    rounds by alpha, rounds across network namespaces, and the fit, check and plan.
``tron-stream``, ``tron-stream-report``
    A tron run on rows streamed from the store (``TronOptions.rows``), to the line, with
    its rounds, the workers' peak memory, Dask's pauses and restarts; the model's
    ``stream_ns`` fitted on such runs and checked against them
    (``cost_model_tron_stream.py``).
``dn-netns``, ``dn-netns-report``
    ``solver="dual_newton"``'s rounds across network namespaces, by kind, against tron's
    fitted terms (``cost_model_dual_newton.py`` beside this script).

Reproduce (BENCHMARKS.md, "Cost model"; sets from ``daskpd bench``, the tiny one from
``daskpd generate splice tiny.zarr --n-samples 400 --binary --seed 3``, and the same with
``--hash-bits 13`` into ``tiny-h13.zarr``: the rounds' cost that grows with the features)::

    python pipelines/bench_cost_model.py runs --data bench-work/splice-1e07-train.zarr \\
        --data bench-work/splice-1e08-train.zarr --tiny tiny.zarr --tiny tiny-h13.zarr \\
        --out pipelines/cost_model/runs.json
    python pipelines/bench_cost_model.py groups bench-work/splice-1e07-train.zarr \\
        --grids 1,2,4,8 --out pipelines/cost_model/groups.jsonl
    python pipelines/bench_cost_model.py dso bench-work/splice-1e08-train.zarr \\
        --grids 2,4,8 --out pipelines/cost_model/dso.json
    python pipelines/bench_cost_model.py bytes bench-work/splice-1e08-train.zarr --grid 2
    python pipelines/bench_cost_model.py report --runs pipelines/cost_model/runs.json \\
        --runs pipelines/cost_model/out_of_core.json \\
        --groups pipelines/cost_model/groups.jsonl --dso pipelines/cost_model/dso.json
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import statistics
import time

TARGET = 1e-3


def _write_json(path, value):
    """Write ``value`` to ``path`` through a temporary name (never a half-written file)."""
    from daskpd.data.atomic import write_text_atomic

    write_text_atomic(path, json.dumps(value, indent=1) + "\n")


def _stop_at(target, min_rounds):
    """A callback that stops once the gap is certified below ``target`` after ``min_rounds``."""

    def stop(info):
        row = info.row
        if row is None or row["epoch"] < min_rounds:
            return False
        return row["gap"] <= target * row["primal"]

    return stop


def _one_run(path, loss, alpha, threads, rows, args):
    """One ``solve`` call on a fresh cluster; its round times and where it reached 1e-3."""
    from daskpd._cluster import ClusterOptions, cluster_client
    from daskpd.data import open_dataset
    from daskpd.solvers import solve

    data = open_dataset(path)
    options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
    with cluster_client(options, start=True) as client:
        result = solve(
            data, client=client, loss=loss, alpha=alpha, solver="cocoa", tol=0.0,
            max_epochs=args.cap, threads=threads, rows=rows, eval_every=1,
            callbacks=[_stop_at(TARGET, args.min_rounds)],
        )  # fmt: skip
    history = result.history
    walls = [row["wall_seconds"] for row in history]
    init = result.timings["init"]
    hit = next((row for row in history if row["gap"] <= TARGET * row["primal"]), None)
    return {
        "nnz": data.nnz,
        "n_samples": data.n_samples,
        "n_features": data.n_features,
        "rounds": [b - a for a, b in itertools.pairwise(walls)],
        "first_round_seconds": walls[0] - init,
        "init_seconds": init,
        "rounds_to": None if hit is None else hit["epoch"],
        "wall_to": None if hit is None else hit["wall_seconds"],
    }


def _runs(args):
    from daskpd.data import open_dataset

    configs = []
    sets = list(args.data)
    for path in sets:
        for loss in args.losses.split(","):
            for alpha in (float(a) for a in args.alphas.split(",")):
                for threads in (1, 2):
                    configs.append((path, loss, alpha, threads, "memory"))
                if path == sets[-1]:
                    configs.append((path, loss, alpha, 2, "stream"))
    for tiny in args.tiny or ():
        for loss in args.losses.split(","):
            configs.append((tiny, loss, float(args.alphas.split(",")[0]), 1, "memory"))
    measured = {config: [] for config in configs}
    for repeat in range(args.repeats):
        for config in configs:
            tick = time.perf_counter()
            measured[config].append(_one_run(*config, args))
            path, loss, alpha, threads, rows = config
            print(
                f"repeat {repeat + 1}: {os.path.basename(path)} {loss} alpha {alpha:g} "
                f"threads {threads} rows {rows}: {time.perf_counter() - tick:.1f} s",
                flush=True,
            )
    records = []
    for (path, loss, alpha, threads, rows), runs in measured.items():
        data = open_dataset(path)
        reached = [r for r in runs if r["rounds_to"] is not None]
        records.append(
            {
                "label": f"{os.path.basename(path)} {loss} a{alpha:g} T{threads} {rows}",
                "nnz": data.nnz,
                "n_samples": data.n_samples,
                "n_features": data.n_features,
                "loss": loss,
                "alpha": alpha,
                "grid": 1,
                "threads": threads,
                "rows": rows,
                "round_seconds": statistics.median(s for r in runs for s in r["rounds"]),
                "first_round_seconds": statistics.median(r["first_round_seconds"] for r in runs),
                "init_seconds": statistics.median(r["init_seconds"] for r in runs),
                "rounds_to": (
                    round(statistics.median(r["rounds_to"] for r in reached))
                    if 2 * len(reached) > len(runs)
                    else None
                ),  # fmt: skip
                "wall_to": (
                    statistics.median(r["wall_to"] for r in reached)
                    if 2 * len(reached) > len(runs)
                    else None
                ),  # fmt: skip
                "source": (
                    f"bench_cost_model.py runs, {len(runs)} runs, {args.workers} workers of "
                    f"{args.memory_limit}"
                ),
                "repeats": runs,
            }
        )
    _write_json(args.out, records)
    print(f"wrote {len(records)} records to {args.out}")


def _groups(args):
    from daskpd.bench.costmodel import rounds_from_rate
    from daskpd.data import open_dataset
    from daskpd.solvers import solve

    data = open_dataset(args.data)
    with open(args.out, "a") as out:
        for loss in args.losses.split(","):
            for alpha in (float(a) for a in args.alphas.split(",")):
                for grid in (int(k) for k in args.grids.split(",")):
                    tick = time.perf_counter()
                    history = solve(
                        data, client=False, loss=loss, alpha=alpha, solver="cocoa",
                        tol=0.0, max_epochs=args.cap, threads=1,
                        grid=None if grid == 1 else grid, eval_every=1,
                        callbacks=[_stop_at(TARGET, 1)],
                    ).history  # fmt: skip
                    gaps = [row["gap"] / row["primal"] for row in history]
                    reached = gaps[-1] <= TARGET
                    record = {
                        "nnz": data.nnz,
                        "n_samples": data.n_samples,
                        "loss": loss,
                        "alpha": alpha,
                        "grid": grid,
                        "rounds_to": rounds_from_rate(gaps, TARGET),
                        "extrapolated": not reached,
                        "rounds_run": len(gaps),
                        "relative_gaps": [float(f"{g:.4g}") for g in gaps],
                        "seconds": round(time.perf_counter() - tick, 2),
                    }
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                    print(
                        f"{data.nnz:.0e} {loss} alpha {alpha:g} K {grid}: "
                        f"{record['rounds_to']:.0f} rounds"
                        + (" (extrapolated)" if not reached else ""),
                        flush=True,
                    )


def _dso(args):
    from daskpd._cluster import ClusterOptions, cluster_client
    from daskpd.data import open_dataset
    from daskpd.solvers import solve

    data = open_dataset(args.data)
    records = []
    for grid in (int(p) for p in args.grids.split(",")):
        epochs = []
        for _ in range(args.repeats):
            options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
            with cluster_client(options, start=True) as client:
                history = solve(
                    data, client=client, loss="hinge", alpha=1e-5, solver="dso",
                    grid=grid, init="zero", tol=0.0, max_epochs=args.epochs, eval_every=1,
                ).history  # fmt: skip
            # the training clock (evaluations not in it); the first epoch builds the layout
            clocks = [row["seconds"] for row in history]
            epochs.append(statistics.median(b - a for a, b in itertools.pairwise(clocks)))
        records.append(
            {"nnz": data.nnz, "grid": grid, "parallel": args.workers,
             "epoch_seconds": statistics.median(epochs), "runs": epochs}
        )  # fmt: skip
        print(f"DSO grid {grid}: {records[-1]['epoch_seconds']:.3f} s an epoch", flush=True)
    _write_json(args.out, records)


def _incoming_bytes(dask_worker):
    """Bytes this worker has received from other workers (Dask's transfer log)."""
    return sum(entry["total"] for entry in dask_worker.transfer_incoming_log)


def _bytes(args):
    """Bytes into each worker a round with ``--grid`` groups, against the model's count."""
    from daskpd._cluster import ClusterOptions, cluster_client
    from daskpd.data import open_dataset
    from daskpd.solvers import solve

    data = open_dataset(args.data)
    options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
    with cluster_client(options, start=True) as client:
        marks = []

        def mark(info):
            marks.append(client.run(_incoming_bytes))
            return False

        solve(
            data, client=client, loss="logistic", alpha=1e-3, solver="cocoa", grid=args.grid,
            threads=1, tol=0.0, max_epochs=args.rounds, eval_every=1, callbacks=[mark],
        )  # fmt: skip
    per_round = {
        worker: statistics.median(b[worker] - a[worker] for a, b in itertools.pairwise(marks))
        for worker in marks[0]
    }
    # a worker receives the change of w of every group it does not own, on that group's
    # columns; the model charges d columns a group (every column, at the job's group sizes)
    charged = (args.grid - args.grid // args.workers) * data.n_features * 8
    for worker, value in sorted(per_round.items()):
        print(
            f"{worker}: {value / 1e6:.1f} MB a round; the model charges {charged / 1e6:.1f} MB "
            f"({value / charged:.2f} of it: the groups' columns are that share of d)"
        )


def _load_runs(paths):
    from daskpd.bench.costmodel import MeasuredRun

    fields = MeasuredRun.__dataclass_fields__
    runs = []
    for path in paths:
        with open(path) as f:
            for record in json.load(f):
                runs.append(MeasuredRun(**{k: v for k, v in record.items() if k in fields}))
    return runs


def _load_rounds(runs, groups_path):
    """RoundCounts: one-group counts of the measured runs, ``K >= 2`` of the groups file."""
    from daskpd.bench.costmodel import RoundCounts, conditioning

    counts = {}
    for r in runs:
        if r.rounds_to is not None and r.group_nnz > 1e6:
            counts.setdefault(r.loss, {}).setdefault(r.grid, []).append((r.kappa, r.rounds_to))
    if groups_path:
        with open(groups_path) as f:
            for line in f:
                g = json.loads(line)
                if g["grid"] >= 2 and math.isfinite(g["rounds_to"]):
                    kappa = conditioning(g["alpha"], g["n_samples"], g["nnz"])
                    counts.setdefault(g["loss"], {}).setdefault(g["grid"], []).append(
                        (kappa, g["rounds_to"])
                    )
    return RoundCounts(counts)


def _pct(x):
    return "-" if x is None else f"{100 * x:+.0f}%"


def _s(x):
    if x is None:
        return "-"
    if x >= 7200:
        return f"{x / 3600:.1f} h"
    return f"{x:.3g} s"


def _report(args):
    from daskpd.bench import costmodel as cm

    runs = _load_runs(args.runs)
    rates = cm.fit_rates(runs)
    rounds = _load_rounds(runs, args.groups)
    print("## Fitted parameters\n")
    for loss, ns in sorted(rates.pass_ns.items()):
        b = rates.thread_exponent.get(loss, 0.0)
        print(
            f"- {loss}: pass_ns {ns:.1f} core-ns a nonzero a round (kept rows, 1 thread); "
            f"threads gain T^{b:.2f} (2: {2**b:.2f}x, 32: {32**b:.2f}x); streamed rows "
            f"{rates.read_ns.get(loss, math.nan):.1f} ns a nonzero more"
        )
    print(
        f"- a round's fixed cost = {rates.fixed * 1e3:.0f} ms + {rates.feature_ns:.1f} ns a "
        f"feature; the first round {rates.first_fixed:.2f} s + {rates.first_ns:.1f} ns a kept "
        f"nonzero more; init {rates.init_seconds:.2f} s"
    )
    for loss, by_grid in sorted(rounds.counts.items()):
        for k, points in sorted(by_grid.items()):
            cells = ", ".join(f"{c:.0f} at {kappa:.2g}" for kappa, c in sorted(points))
            print(f"- rounds to 1e-3, {loss}, K={k} (count at kappa): {cells}")
    dso = None
    if args.dso:
        with open(args.dso) as f:
            records = json.load(f)
        epochs = [(e["nnz"], e["grid"], e["parallel"], e["epoch_seconds"]) for e in records]
        dso = cm.fit_dso(epochs)
        print(f"- DSO: {dso.update_ns:.1f} core-ns an update, {dso.hop * 1e3:.1f} ms a hop")
        for nnz, grid, parallel, s in epochs:
            p = nnz * dso.update_ns * 1e-9 / parallel + grid * dso.hop
            print(f"  - grid {grid}: {s:.3f} s an epoch, model {p:.3f} s ({_pct(p / s - 1)})")
    print("\n## Measured runs against the model\n")
    print(
        "| run | round s | model | error | to 1e-3 (rounds) | model, its rounds | error "
        "| model, median rounds | error |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    by_label = {r.label: r for r in runs}
    for row in cm.fit_table(rates, runs, rounds):
        run = by_label[row["label"]]
        to = "-" if row["to"] is None else f"{_s(row['to'])} ({run.rounds_to})"
        print(
            f"| {row['label']} | {_s(row['round'])} | {_s(row['round_predicted'])} "
            f"| {_pct(row['round_error'])} | {to} | {_s(row['to_predicted'])} "
            f"| {_pct(row['to_error'])} | {_s(row['to_model'])} | {_pct(row['to_model_error'])} |"
        )
    for loss in args.losses.split(","):
        for alpha in (float(a) for a in args.job_alphas.split(",")):
            _plan_table(args, cm, rates, rounds, dso, loss, alpha)


def _plan_table(args, cm, rates, rounds, dso, loss, alpha):
    """One table of the plan: the splice-site job on 1, 2, ... machines."""
    job = cm.Job(nnz=1.6e11, n_samples=5e7, n_features=11_725_480, loss=loss, alpha=alpha)
    kappa = cm.conditioning(alpha, job.n_samples, job.nnz)
    print(
        f"\n### The splice-site job: {job.nnz:.2g} nonzeros, {job.n_features} features, "
        f"{loss}, alpha {alpha:g} (kappa {kappa:.2g}), to (1 + 1e-3) P*\n"
    )
    print(
        "| machines x cores | rows | threads | round | rounds (median, low-high) "
        "| hours (median, low-high) | hours if threads scaled linearly "
        "| GB into a machine a round | DSO epoch |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    linear = dataclasses.replace(rates, thread_exponent={k: 1.0 for k in rates.pass_ns})
    for count in (int(n) for n in args.machines.split(",")):
        machines = cm.Machines(
            count=count, cores=args.cores, memory=args.memory_gib * 2**30,
            bandwidth=args.bandwidth_gbit * 1e9 / 8,
        )  # fmt: skip
        plan = cm.plan_cocoa(rates, rounds, job, machines)
        ideal = cm.plan_cocoa(linear, rounds, job, machines)
        r_med, r_lo, r_hi = plan["rounds"]
        h = [s / 3600 for s in plan["seconds"]]
        dso_cell = "-"
        if dso is not None:
            dso_cell = _s(cm.dso_epoch(dso, job, count * args.cores, machines.bandwidth)["seconds"])
        print(
            f"| {count} x {args.cores} | {'streamed' if plan['streamed'] else 'kept'} "
            f"| {plan['threads']} | {_s(plan['round'])} | {r_med:.0f} ({r_lo:.0f}-{r_hi:.0f}) "
            f"| {h[0]:.2g} ({h[1]:.2g}-{h[2]:.2g}) | {ideal['seconds'][0] / 3600:.2g} "
            f"| {plan['comm_bytes'] / 1e9:.2g} | {dso_cell} |"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = parser.add_subparsers(dest="part", required=True)
    runs = parts.add_parser("runs", help="the default solver's rounds on fresh clusters")
    runs.add_argument("--data", action="append", required=True, help="training sets, small first")
    runs.add_argument(
        "--tiny", action="append", help="sets of few nonzeros (the rounds' fixed cost), repeatable"
    )
    groups = parts.add_parser("groups", help="rounds to 1e-3 with K row groups")
    groups.add_argument("data")
    groups.add_argument("--grids", default="1,2,4,8")
    groups.add_argument("--cap", type=int, default=300)
    dso = parts.add_parser("dso", help="DSO's epoch on several grids")
    dso.add_argument("data")
    dso.add_argument("--grids", default="2,4,8")
    dso.add_argument("--epochs", type=int, default=4)
    for part in (runs, groups):
        part.add_argument("--losses", default="hinge,logistic")
        part.add_argument("--alphas", default="1e-3,1e-5")
    for part in (runs, dso):
        part.add_argument("--workers", type=int, default=2)
        part.add_argument("--memory-limit", default="2GiB")
        part.add_argument("--repeats", type=int, default=3)
    runs.add_argument("--cap", type=int, default=40)
    runs.add_argument("--min-rounds", type=int, default=5)
    for part in (runs, groups, dso):
        part.add_argument("--out", required=True)
    moved = parts.add_parser("bytes", help="bytes into each worker a round, K row groups")
    moved.add_argument("data")
    moved.add_argument("--grid", type=int, default=2)
    moved.add_argument("--rounds", type=int, default=6)
    moved.add_argument("--workers", type=int, default=2)
    moved.add_argument("--memory-limit", default="3GiB")
    report = parts.add_parser("report", help="fit, check and plan")
    report.add_argument("--runs", action="append", required=True)
    report.add_argument("--groups")
    report.add_argument("--dso")
    report.add_argument("--losses", default="hinge,logistic")
    report.add_argument(
        "--job-alphas",
        default="3e-8,3e-6",
        help="the job's alphas (3e-8: kappa 5e-4, about liblinear's C = 1; 3e-6: kappa 0.05)",
    )
    report.add_argument("--machines", default="1,2,4,8,16,32,64")
    report.add_argument("--cores", type=int, default=32)
    report.add_argument("--memory-gib", type=float, default=256)
    report.add_argument("--bandwidth-gbit", type=float, default=10)
    # tron's parts (issue 49) live in cost_model_tron.py beside this script
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cost_model_dual_newton
    import cost_model_tron
    import cost_model_tron_stream

    tron_parts = cost_model_tron.add_parsers(parts)
    tron_parts.update(cost_model_tron_stream.add_parsers(parts))
    # dual_newton's rounds across network namespaces, against tron's terms
    tron_parts.update(cost_model_dual_newton.add_parsers(parts))
    args = parser.parse_args(argv)
    parts = {"runs": _runs, "groups": _groups, "dso": _dso, "bytes": _bytes, "report": _report}
    parts.update(tron_parts)
    parts[args.part](args)


if __name__ == "__main__":
    main()
