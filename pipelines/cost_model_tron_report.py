"""``bench_cost_model.py tron-report``: fit the model of ``solver="tron"``
(``daskpd.bench.costmodel_tron``) on the records of ``tron-runs``, check it against every
measured round and run, and against the rounds across network namespaces (``tron-netns``),
show the rounds by conditioning (``tron-rounds``) and plan the splice-site job."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

from cost_model_tron import _through_origin, _tron_rounds

#: the fitted reductions of BENCHMARKS.md, "Many machines: reductions across network
#: namespaces": 1gbit links, K = 2 and 4 together (latency s a level, bytes/s)
NETNS_1GBIT = (12.8e-3, 111.8e6)
#: the same section's 10gbit rows, CPU-bound here: what one TLS worker process moved
NETNS_10GBIT_HOST = (10.6e-3, 434e6)


def _load(path):
    with open(path) as f:
        return json.load(f)


def _columns(ct, rec):
    return ct.Columns(rec["n_used"], rec["n_share"], rec["n_cross"])


def _merged_records(files, max_others):
    """Records of ``tron-runs`` files merged by set, alpha and ``K``, keeping the runs during
    which other processes kept at most ``max_others`` cores busy on average."""
    merged = {}
    for measured in files:
        for rec in measured["records"]:
            key = (rec["set"], rec["alpha"], rec["grid"])
            if key not in merged:
                merged[key] = {**rec, "runs": [], "disturbed": 0}
            for run in rec["runs"]:
                if run.get("others_cores", 0.0) <= max_others:
                    merged[key]["runs"].append(run)
                else:
                    merged[key]["disturbed"] += 1
    return list(merged.values())


def _fit_inputs(files, max_others=0.15):
    """RoundTime and TronRun records and what :func:`fit_tron` takes besides them (the
    microbenchmarks' rates and the bandwidth, from the first file) from ``tron-runs`` files."""
    from daskpd.bench import costmodel_tron as ct

    measured = files[0]
    home = {int(d): s for d, s in measured["home_seconds"].items()}
    ds = sorted(home)
    home_ns = {k: _through_origin(ds, [home[d][k] for d in ds]) * 1e9 for k in ct.KINDS}
    group = [(int(key.split()[0]) * int(key.split()[1]), s)
             for key, s in measured["group_seconds"].items()]  # fmt: skip
    group_ns = _through_origin([x for x, _ in group], [s for _, s in group]) * 1e9
    merge = [(2 * int(d), s) for d, s in measured["merge_seconds"].items()]
    merge_ns = _through_origin([x for x, _ in merge], [s for _, s in merge]) * 1e9
    scatter = [(int(d), s) for d, s in measured.get("scatter_seconds", {"1": 0.0}).items()]
    scatter_ns = _through_origin([x for x, _ in scatter], [s for _, s in scatter]) * 1e9
    times, runs = [], []
    by_layout = {}
    for rec in _merged_records(files, max_others):
        by_layout.setdefault((rec["set"], rec["grid"]), []).append(rec)
        reached = [r for r in rec["runs"] if r["wall_to"] is not None]
        if not reached or len(reached) < len(rec["runs"]):
            continue
        runs.append(ct.TronRun(
            label=f"{rec['set']} a{rec['alpha']:g} K{rec['grid']} ({len(reached)} runs"
            + (f"; {rec['disturbed']} disturbed left out)" if rec["disturbed"] else ")"),
            nnz=rec["nnz"], columns=_columns(ct, rec), groups=rec["grid"],
            workers=rec["workers"], threads=reached[0]["threads"],
            rounds=_tron_rounds(reached[0]["counts_to"]),
            init_seconds=statistics.median(r["init_seconds"] for r in reached),
            wall_to=statistics.median(r["wall_to"] for r in reached),
        ))  # fmt: skip
    for (name, grid), recs in sorted(by_layout.items(), key=lambda kv: (kv[1][0]["nnz"],
                                                                      kv[0][1])):  # fmt: skip
        first = recs[0]
        for kind in ct.KINDS:
            seconds = [s for rec in recs for run in rec["runs"] for k, s in run["rounds"]
                       if k == kind]  # fmt: skip
            if seconds:
                times.append(ct.RoundTime(
                    label=f"{name} K{grid}", kind=kind, nnz=first["nnz"],
                    columns=_columns(ct, first), groups=grid, workers=first["workers"],
                    threads=first["runs"][0]["threads"], seconds=statistics.median(seconds),
                ))  # fmt: skip
    apart = {
        "home_ns": home_ns,
        "group_ns": group_ns,
        "merge_ns": merge_ns,
        "scatter_ns": scatter_ns,
        "bandwidth": measured["loopback"]["bandwidth"],
    }
    return times, runs, apart


def _pct(x):
    return f"{100 * x:+.0f}%"


def _netns_table(ct, rates, rows, network):
    """The namespace runs' rounds: seconds and bytes a round by kind, against the model."""
    print("| K | workers | kind | rounds | measured s (median) | model s | error "
          "| MB received (median) | model MB | model: reduction + send s |")  # fmt: skip
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        layout = ct.Layout(row["grid"], row["workers"], row["threads"])
        columns = _columns(ct, row)
        for kind in ct.KINDS:
            mine = [r for r in row["rounds"] if r["kind"] == kind]
            if not mine:
                continue
            seconds = statistics.median(r["seconds"] for r in mine)
            moved = statistics.median(sum(r["received"].values()) for r in mine)
            model = ct.round_seconds(rates, kind, row["nnz"], columns, layout, network)
            # every crossing level moves a share, every other owner gets the sent vector
            # every crossing moves a share (its columns' ids with it), every other owner
            # gets the home's vector
            model_bytes = (layout.owners - 1) * (
                ct.share_bytes(columns.crossing, ct.REDUCED[kind])
                + ct.SENT[kind] * ct.VECTOR_BYTES * columns.used
            )
            comm = network.reduce_seconds(
                layout, columns.crossing, ct.REDUCED[kind]
            ) + network.send_seconds(layout, columns.used, ct.SENT[kind])
            print(f"| {row['grid']} | {row['workers']} | {kind} | {len(mine)} | {seconds:.3f} "
                  f"| {model:.3f} | {_pct(model / seconds - 1)} | {moved / 1e6:.1f} "
                  f"| {model_bytes / 1e6:.1f} | {comm:.3f} |")  # fmt: skip
        rounds = _tron_rounds(row["kinds"])
        model = ct.seconds_to_line(rates, rounds, row["nnz"], columns, layout, network)
        print(f"| {row['grid']} | {row['workers']} | whole run, alpha {row['alpha']:g} "
              f"| {row['counters']['rounds']} | {row['wall_to']:.2f} | {model:.2f} "
              f"| {_pct(model / row['wall_to'] - 1)} | | | |")  # fmt: skip


def _scales(row):
    """The conditionings a count may follow: ``kappa = alpha n / R^2`` (CoCoA+'s) and
    ``alpha / R^2`` (the Hessian's: its spectrum spans alpha to about R^2 / 4)."""
    r2 = row["nnz"] / row["n_samples"]
    return {"kappa": row["alpha"] * row["n_samples"] / r2, "alpha/R2": row["alpha"] / r2}


def _count_law(ct, count_rows):
    """The counts' power law in alpha and the rows, fitted on the runs that reached the
    line."""
    return ct.fit_count_law(
        (r["alpha"], r["n_samples"], _tron_rounds(r["kinds"])) for r in count_rows if r["reached"]
    )


def tron_report(args):
    from daskpd.bench import costmodel as cm
    from daskpd.bench import costmodel_tron as ct

    files = [_load(path) for path in args.runs]
    measured = files[0]
    times, runs, apart = _fit_inputs(files, args.max_others)
    rates = ct.fit_tron(times, runs, **apart)
    loop = ct.Network(rates.hop, apart["bandwidth"])
    print(f"## Fitted parameters (records of {measured['date']}, commit {measured['commit']})\n")
    tree = measured["loopback"]
    print(f"- LocalCluster: a tree level {rates.hop * 1e3:.1f} ms and a task "
          f"{rates.task_seconds * 1e3:.2f} ms (fitted on the small set's rounds); bandwidth "
          f"{loop.bandwidth / 1e6:.0f} MB/s (measured: a tree-sum of d-vectors from the "
          f"client, whose fit also gives {tree['latency'] * 1e3:.1f} ms a level)")  # fmt: skip
    for kind in ct.KINDS:
        ns = rates.nnz_ns.get(kind)
        b = rates.thread_exponent.get(kind, 0.0)
        print(f"- {kind}: " + (f"{ns:.2f} core-ns a nonzero, threads gain T^{b:.2f} "
              f"(2: {2**b:.2f}x, 32: {32**b:.1f}x); " if ns is not None else "")
              + f"fixed {rates.fixed[kind] * 1e3:.1f} ms; home {rates.home_ns[kind]:.2f} ns "
              "a used column")  # fmt: skip
    print(f"- measured apart: a group's share {rates.group_ns:.3f} ns a column, thread and "
          f"vector; merged up the tree {rates.merge_ns:.2f} ns a column and vector; made "
          f"dense on the home {rates.scatter_ns:.2f} ns a column and vector")  # fmt: skip
    print(f"- start: {rates.init_fixed:.2f} s + {rates.init_ns:.2f} ns a nonzero a worker "
          "reads, + a gradient round")  # fmt: skip
    round_rows, run_rows = ct.check_table(rates, times, runs, loop)
    print("\n## Rounds: measured medians against the model\n")
    print("| set, K | kind | measured s | model s | error |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in round_rows:
        print(f"| {r['label']} | {r['kind']} | {r['measured']:.4f} | {r['model']:.4f} "
              f"| {_pct(r['error'])} |")  # fmt: skip
    print("\n## Runs to the certified line: measured medians against the model\n")
    print("| run | rounds: CG / step / shorter steps / gradient | start s | start, model "
          "| to the line s | model | error |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r, row in zip(runs, run_rows, strict=True):
        c = r.rounds
        print(f"| {r.label} | {c.hessian:.0f} / {c.newton:.0f} / {c.numbers:.0f} / "
              f"{c.gradient:.0f} | {row['init']:.2f} | {row['init_model']:.2f} "
              f"| {row['measured']:.2f} | {row['model']:.2f} | {_pct(row['error'])} |")  # fmt: skip
    big = [row["error"] for r, row in zip(runs, run_rows, strict=True) if r.nnz > ct.SMALL_NNZ]
    if big:
        print(f"\nlarge sets: errors {_pct(min(big))} to {_pct(max(big))}, median |error| "
              f"{100 * statistics.median(abs(e) for e in big):.0f}%")  # fmt: skip
    if args.netns:
        print("\n## Namespace cluster (TLS, shaped links) against the model\n")
        rows = [row for path in args.netns for row in _load(path)["rows"]]
        _netns_table(ct, rates, rows, ct.Network(*NETNS_1GBIT))
    if args.counts:
        count_rows = _load(args.counts)["rows"]
        print("\n## Rounds to the line by conditioning (in-process, K = 1)\n")
        print("| set | alpha | kappa = alpha n / R^2 | alpha / R^2 | Newton steps | CG "
              "| shorter steps / gradient | rounds | passes |")  # fmt: skip
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in sorted(count_rows, key=lambda r: (r["nnz"], -r["alpha"])):
            s = _scales(r)
            c = _tron_rounds(r["kinds"])
            reached = "" if r["reached"] else f" (not reached: gap {r['gap']:.1e})"
            print(f"| {r['set']} | {r['alpha']:g} | {s['kappa']:.2g} | {s['alpha/R2']:.2g} "
                  f"| {c.newton:.0f} | {c.hessian:.0f} | {c.numbers:.0f} / {c.gradient:.0f} "
                  f"| {r['rounds']}{reached} | {r['passes']} |")  # fmt: skip
        _plan(args, cm, ct, rates, count_rows)


def _plan(args, cm, ct, rates, count_rows):
    """The splice-site job with tron: logistic on ``--machines``, at ``--job-alphas``."""
    law = _count_law(ct, count_rows)
    print("\nFitted counts (least squares in logs over the rows above that reached the line): "
          + "; ".join(f"{field} = {math.exp(a):.3g} alpha^{b:.3f} n^{c:.3f}"
                      for field, (a, b, c) in law.coefficients.items())
          + f"; shorter steps {law.shares['numbers']:.3f} and gradient rounds "
          f"{law.shares['gradient']:.3f} a Newton step")  # fmt: skip
    for r in sorted(count_rows, key=lambda r: (r["nnz"], -r["alpha"])):
        if r["reached"]:
            at = law.at(r["alpha"], r["n_samples"])
            measured = _tron_rounds(r["kinds"])
            print(f"- {r['set']} alpha {r['alpha']:g}: Newton {measured.newton} (law "
                  f"{at.newton:.1f}), CG {measured.hessian} (law {at.hessian:.1f})")  # fmt: skip
    bandwidth = args.bandwidth_gbit * 1e9 / 8 * args.link_share
    flat = ct.Network(NETNS_1GBIT[0], bandwidth)
    tree = ct.Network(NETNS_1GBIT[0], bandwidth, broadcast="tree")
    # the threads' gain, measured at two threads only: at most linear beyond; the slow case
    # is an assumption (a memory-bound machine), not a measurement
    capped = {k: min(b, 1.0) for k, b in rates.thread_exponent.items()}
    low = args.slow_threads
    central = dataclasses.replace(rates, thread_exponent=capped)
    slow = dataclasses.replace(rates, thread_exponent=dict.fromkeys(capped, low))
    # what three changes would give: the home's vector relayed down a tree, a group's
    # threads' output rows kept between rounds (one row's cost), its rows read by every core
    mended = dataclasses.replace(central, group_ns=central.group_ns / args.cores,
                                 init_ns=central.init_ns / args.cores)  # fmt: skip
    print(f"\nLinks: {args.bandwidth_gbit:g} Gbit/s x {args.link_share:.3f} (the share of the "
          f"rate a transfer got at 1gbit) = {bandwidth * 8 / 1e9:.2f} Gbit/s; latency "
          f"{NETNS_1GBIT[0] * 1e3:.1f} ms a level. Threads: "
          + ", ".join(f"{k} T^{b:.2f}" for k, b in capped.items())
          + f" ({args.cores}: " + ", ".join(f"{args.cores**b:.0f}x" for b in capped.values())
          + f"); the slow case (assumed) T^{low:.2f} ({args.cores**low:.1f}x) for every "
          "kind")  # fmt: skip
    for alpha in args.job_alphas:
        job = cm.Job(nnz=1.6e11, n_samples=5e7, n_features=11_725_480, loss="logistic",
                     alpha=alpha)  # fmt: skip
        rounds = law.at(alpha, job.n_samples)
        print(f"\n### Logistic, alpha {alpha:g}: {rounds.newton:.1f} Newton steps, "
              f"{rounds.hessian:.0f} CG rounds, {rounds.numbers:.1f} shorter steps "
              "(extrapolated by the law)\n")  # fmt: skip
        print("| machines x cores | start s | CG round s = passes + shares + home + graph + "
              "network | step round s | minutes to the line, as implemented | of them, "
              "passes | minutes, the home's vector sent down a tree | minutes, three changes "
              "| minutes as implemented, slow threads | GB of rows a machine |")  # fmt: skip
        print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for count in args.machines:
            machines = cm.Machines(count, args.cores, args.memory_gib * 2**30,
                                   args.bandwidth_gbit * 1e9 / 8)  # fmt: skip
            as_is = ct.plan_tron(central, rounds, job, machines, flat)
            relayed = ct.plan_tron(central, rounds, job, machines, tree)
            slowly = ct.plan_tron(slow, rounds, job, machines, flat)
            changed = ct.plan_tron(mended, rounds, job, machines, tree)
            parts = ct.round_parts(central, "hessian", job.nnz, ct.Columns(job.n_features),
                                   as_is["layout"], flat)  # fmt: skip
            cells = " + ".join(f"{parts[k]:.2f}" for k in parts)
            print(f"| {count} x {args.cores} | {as_is['init']:.0f} "
                  f"| {as_is['round']['hessian']:.2f} = {cells} "
                  f"| {as_is['round']['step']:.2f} | {as_is['seconds'] / 60:.1f} "
                  f"| {as_is['passes'] / 60:.1f} | {relayed['seconds'] / 60:.1f} "
                  f"| {changed['seconds'] / 60:.1f} | {slowly['seconds'] / 60:.1f} "
                  f"| {as_is['resident'] / 1e9:.0f} |")  # fmt: skip
