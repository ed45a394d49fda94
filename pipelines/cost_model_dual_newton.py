"""``solver="dual_newton"`` (the hinge dual's projected Newton method) across network
namespaces: the parts of ``bench_cost_model.py`` that time its rounds and read their bytes,
against the terms of tron's cost model (``daskpd.bench.costmodel_tron``, fitted by
``tron-report``; the measuring pieces are tron's, ``cost_model_tron.py``).

``dn-netns``
    Dual_newton hinge on a :class:`daskpd._netns.NetnsCluster` (TLS, every link shaped to
    ``--rate``), ``K`` of ``--grids``, run through :class:`DualNewton` directly to the
    certified line (the first certificate with ``gap <= 1e-3 * dual``); every graph timed in
    the driver (:class:`GraphClock`) and the bridge ports' byte counters read after it. One
    JSON file, then the table of ``dn-netns-report``.
``dn-netns-report``
    The table: rounds by kind (:func:`classify`), their seconds, bytes and nonzeros, against
    what tron's fitted terms predict from each round's own measured bytes and nonzeros
    (:func:`model_round`).

A round is one graph whose results the driver waits for. Kinds (the graph's prefix, and for
``dual-newton-line`` which tasks it holds):

``start``
    ``dual-newton-start``: the groups' local passes and the image round (from a cold start;
    a solver round) and the gradient round at the start point (a round).
``cg``
    ``dual-newton-cg``: a CG step. The home's image ``u`` of the direction (on the Newton
    step's free columns) to every owner, each group's ``X_F^T (c y z)`` on its free rows up
    the tree to the home (one reduction).
``line``
    ``dual-newton-line`` with a gradient round: the trial step at ``t = 1`` (the groups'
    ``X_F^T (c y delta)`` up the tree), the trial point ``w`` to every owner, the gradient
    round there (margins, free rows, the next CG's first share up the tree): two reductions,
    two solver rounds.
``refused``
    A ``line`` graph whose trial at ``t = 1`` failed Armijo's test: the driver reads its
    verdict only (the trial's reduction); its gradient round's tasks, dropped, may still run
    and move their bytes in the next round's time (two solver rounds: the solver counts the
    spent gradient round).
``home``
    ``dual-newton-home``: a Newton step on few free rows (at most ``home_cg_nnz``
    nonzeros): the free rows to the home, its whole CG and line search there, the new ``w``
    and each group's change of ``a`` back, the gradient round at the new point: two solver
    rounds.
``pass``
    ``dual-newton-pass``: after a Newton step that freed many rows (``burst``), a local pass
    of every group, their changes of ``w`` summed on the home, the gradient round there: two
    solver rounds.
``shorter``
    ``dual-newton-line`` of a halved step length (after a refused ``t = 1``): a trial, no
    gradient round (one solver round).
``gradient``
    ``dual-newton-gradient``: the gradient round at an accepted shorter step (one round).
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import sys
import time

import numpy as np
from cost_model_tron import (
    _commit,
    _cpu_seconds,
    _others_cores,
    _reached,
    _write_json,
    netns_session,
)

#: the ``tron-runs`` records whose fit (``tron-report``'s) gives the model's terms
TRON_RUNS = [
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "cost_model", name)
    for name in ("tron_runs.json", "tron_runs_more.json")
]
#: the kinds of round, in the order a run first meets them (module docstring)
KINDS = ("start", "cg", "line", "refused", "home", "pass", "shorter", "gradient")
#: the solver's rounds (``counters(state)["rounds"]``) a graph of each kind counts; a start
#: counts one more when it ran an image round (any start but ``a = 0``'s)
SOLVER_ROUNDS = {"start": 1, "cg": 1, "line": 2, "refused": 2, "home": 2, "pass": 2,
                 "shorter": 1, "gradient": 1}  # fmt: skip
#: reductions up the tree (or gathers to the home: hops between dependent tasks across
#: workers) a graph runs: the start's image and gradient rounds; a CG round's; the trial's
#: and the gradient round's (a refused trial's only); the free rows to the home and the
#: gradient round's; the local pass's changes and the gradient round's
TREES = {"start": 2, "cg": 1, "line": 2, "refused": 1, "home": 2, "pass": 2, "shorter": 1,
         "gradient": 1}  # fmt: skip
#: the tron round whose fitted fixed cost (graph, driver, scheduler) a kind's graph is
#: charged: one reduction as a CG round's, two as a step round's
TRON_FIXED = {"start": "step", "cg": "hessian", "line": "step", "refused": "hessian",
              "home": "step", "pass": "step", "shorter": "numbers",
              "gradient": "gradient"}  # fmt: skip


def _numbers_with_columns(cg):
    """The CG numbers the driver reads (``_tasks._cg_numbers``), with the free columns the
    Newton step's images live on (the length of the vector a CG round sends)."""
    from daskpd.solvers.dual_newton._tasks import _cg_numbers

    return {**_cg_numbers(cg), "columns": int(cg.columns.shape[0])}


class _ByValue:
    """``fn`` as a task function that travels by value (a graph is pickled by reference,
    and the workers do not import this script)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)

    def __reduce__(self):
        import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        return cloudpickle.loads, (cloudpickle.dumps(self.fn),)


def _graph_kind(graph):
    """The kind of round ``graph`` is (module docstring); None for a graph that is not a
    round (``iterate``'s ``z``, a checkpoint's ``a``)."""
    prefix = graph.prefix
    if prefix == "dual-newton-line":
        return "line" if graph.key("point") in graph._tasks else "shorter"
    return {"dual-newton-start": "start", "dual-newton-cg": "cg", "dual-newton-home": "home",
            "dual-newton-pass": "pass", "dual-newton-gradient": "gradient"}.get(prefix)  # fmt: skip


class GraphClock:
    """Stamps every graph :mod:`daskpd.solvers.dual_newton` runs in this process while the
    clock is entered (``init`` and ``run_epoch``; not ``iterate``): when the driver had each
    result it waited for (the solver's ``value``) and what it was. ``sample`` (a callable)
    runs after each stamp, outside the rounds' time (tron's ``RoundClock``, for this
    solver). The CG numbers the driver reads carry the free columns' count
    (:func:`_numbers_with_columns`, sent by value: some bytes more a graph)."""

    def __init__(self, sample=None):
        self.sample = sample
        self.graphs = []
        self.stamps = []
        self.base = None

    def __enter__(self):
        from daskpd.solvers.dual_newton import _solver

        self._solver = _solver
        self._saved = (_solver._run, _solver.value, _solver._cg_numbers)
        run, value, _ = self._saved

        def timed_run(state, graph, outputs):
            kind = _graph_kind(graph)
            tick = time.perf_counter()
            if not self.stamps:
                self.base = (tick, self.sample() if self.sample is not None else None)
                tick = time.perf_counter()
            self.graphs.append({"kind": kind, "prefix": graph.prefix,
                                "image": graph.key("image-sum") in graph._tasks,
                                "submitted": tick})  # fmt: skip
            return run(state, graph, outputs)

        def timed_value(ref, owners=()):
            out = value(ref, owners)
            done = time.perf_counter()
            sampled = self.sample() if self.sample is not None else None
            self.stamps.append((len(self.graphs) - 1, done, time.perf_counter(), sampled, out))
            return out

        _solver._run, _solver.value = timed_run, timed_value
        _solver._cg_numbers = _ByValue(_numbers_with_columns)
        return self

    def __exit__(self, *exc):
        self._solver._run, self._solver.value, self._solver._cg_numbers = self._saved

    def rounds(self):
        """One dict a round (graph with a kind), in order: ``kind``, ``solver_rounds``,
        ``seconds`` (from the previous round's last result, or the start's submission,
        to its own last result: the rounds add up to the run's wall time after its groups
        were read), ``before`` and ``after`` (the samples), ``read`` (nonzeros the groups
        read, the solver's counts), ``home_read`` (those the home's Newton step read),
        ``cg_steps`` (the home's), ``columns`` (the free columns of the last CG numbers read: a CG
        round's own, a line round's next Newton step's) and ``free_nnz`` (the free rows'
        nonzeros at the round's new point)."""
        by_graph = {}
        for index, done, resumed, sampled, out in self.stamps:
            by_graph.setdefault(index, []).append((done, resumed, sampled, out))
        rows = []
        previous = self.base
        for index, graph in enumerate(self.graphs):
            stamps = by_graph.get(index)
            if graph["kind"] is None or not stamps:
                continue
            start = graph["submitted"] if graph["kind"] == "start" else previous[0]
            row = {"kind": graph["kind"],
                   "solver_rounds": SOLVER_ROUNDS[graph["kind"]] + graph["image"],
                   "seconds": stamps[-1][0] - start, "before": previous[1],
                   "after": stamps[-1][2], "read": 0.0, "home_read": 0.0, "cg_steps": 0,
                   "columns": None, "free_nnz": None}  # fmt: skip
            for _, _, _, out in stamps:
                _note(row, out)
                if isinstance(out, dict) and out.get("accepted") is False and row["kind"] == "line":
                    row["kind"] = "refused"
            rows.append(row)
            previous = (stamps[-1][1], stamps[-1][2])
        return rows


def _note(row, out):
    """Add what the driver read (``out``) to a round's ``row``."""
    if isinstance(out, float):  # the start's image round: the nonzeros it read
        row["read"] += out
    elif isinstance(out, dict):
        if "columns" in out:  # CG numbers
            row["read"] += out["read"]
            row["columns"] = out["columns"]
        elif "iterations" in out:  # the home's Newton step (its CG and trials)
            row["home_read"] += out["read"]
            row["cg_steps"] = out["iterations"]
        elif "read" in out:  # a trial's verdict, a point's scalars, a local pass
            row["read"] += out["read"]
            if "free_nnz" in out:
                row["free_nnz"] = out["free_nnz"]


def classify(rows):
    """Graphs and solver rounds of each kind among :meth:`GraphClock.rounds` rows."""
    graphs = dict.fromkeys(KINDS, 0)
    rounds = dict.fromkeys(KINDS, 0)
    for row in rows:
        graphs[row["kind"]] += 1
        rounds[row["kind"]] += row["solver_rounds"]
    return graphs, rounds


def check_counters(rows, counters, nnz):
    """The kinds' rounds add up to the solver's own counters, and (with no refused step,
    whose spent gradient round the driver never reads) the nonzeros read to its passes."""
    _, rounds = classify(rows)
    if sum(rounds.values()) != counters["rounds"]:
        raise AssertionError(f"kinds {rounds} do not add up to the counters {counters}")
    if not any(row["kind"] == "shorter" for row in rows):
        read = sum(row["read"] + row["home_read"] for row in rows)
        if not math.isclose(read / nnz, counters["passes"], rel_tol=1e-9):
            raise AssertionError(f"{read} nonzeros read are not the counters' {counters}")


# -- the model ---------------------------------------------------------------------------------


def tron_terms(runs_files):
    """Tron's fitted rates (``tron-report``'s fit of the ``tron-runs`` files)."""
    from cost_model_tron_report import _fit_inputs, _load

    from daskpd.bench import costmodel_tron as ct

    times, runs, apart = _fit_inputs([_load(path) for path in runs_files])
    return ct.fit_tron(times, runs, **apart)


def model_round(rates, network, row, owners):
    """What tron's terms predict for a measured round ``row`` from its own bytes and
    nonzeros, by term (seconds): ``fixed`` (tron's fitted fixed cost of the round it
    resembles, :data:`TRON_FIXED`), ``levels`` (its reductions' tree levels across the
    ``owners`` workers, at the network's latency a level), ``bytes`` (all bytes the hosts
    received, measured, at the link's bandwidth: one after another on the critical path)
    and ``nonzeros`` (the groups' reads over the owners and the home's Newton step's reads
    on one core, at tron's CG round's nanoseconds a read nonzero, one thread)."""
    from daskpd.bench import costmodel_tron as ct

    per_read = rates.nnz_ns["hessian"] / ct.READS["hessian"] * 1e-9
    levels = math.ceil(math.log2(owners)) if owners > 1 else 0
    return {
        "fixed": rates.fixed[TRON_FIXED[row["kind"]]],
        "levels": TREES[row["kind"]] * levels * network.latency,
        "bytes": sum(row["received"].values()) / network.bandwidth,
        "nonzeros": (row["read"] / owners + row["home_read"]) * per_read,
    }


# -- dn-netns ----------------------------------------------------------------------------------


def _netns_run(path, alpha, grid, home_cg_nnz, args):
    import cloudpickle

    from daskpd.data import open_dataset
    from daskpd.problem import Problem
    from daskpd.solvers.dual_newton import DualNewton, DualNewtonOptions

    # the workers do not import this script: the CG numbers' task travels by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    data = open_dataset(path) if isinstance(path, str) else path
    with netns_session(args, grid) as (cluster, client, threads, sample):
        method, problem = DualNewton(), Problem("hinge", "l2", alpha)
        with GraphClock(sample) as clock:
            cpu, tick = _cpu_seconds(), time.perf_counter()
            options = DualNewtonOptions(grid=grid) if home_cg_nnz is None else (
                DualNewtonOptions(grid=grid, home_cg_nnz=home_cg_nnz))  # fmt: skip
            state = method.init(problem, data, seed=np.random.SeedSequence(0), client=client,
                                options=options)  # fmt: skip
            init = time.perf_counter() - tick
            home = f"worker-{cluster.worker_addresses.index(state.home)}"
            epoch = 0
            while not _reached(*method.certificate(state)) and epoch < args.cap:
                epoch += 1
                state = method.run_epoch(state, epoch)
                if state.stalled:
                    break
            wall = time.perf_counter() - tick
            others = _others_cores(cpu, _cpu_seconds(), wall)
            counters = method.counters(state)
            reached = _reached(*method.certificate(state))
        rows = clock.rounds()
    nnz = max(1, int(np.asarray(data.col_nnz).sum()))
    check_counters(rows, counters, nnz)
    per_round = []
    for row in rows:
        before, after = row.pop("before"), row.pop("after")
        row["received"] = {role: after[role][1] - before[role][1] for role in after}
        row["seconds"] = round(row["seconds"], 5)
        per_round.append(row)
    graphs, rounds = classify(rows)
    return {"set": os.path.basename(path) if isinstance(path, str) else type(data).__name__,
            "nnz": nnz, "n_samples": int(data.n_samples),
            "n_used": int(np.count_nonzero(np.asarray(data.col_nnz))), "alpha": alpha,
            "grid": grid, "home_cg_nnz": options.home_cg_nnz, "workers": args.workers,
            "rate": args.rate, "threads": threads,
            "home": home, "graphs": graphs, "kinds": rounds, "init_seconds": init, "wall_to": wall,
            "epochs": epoch, "counters": counters, "others_cores": others,
            "reached": reached, "rounds": per_round}  # fmt: skip


def dn_netns(args):
    rows = []
    for alpha in args.alphas:
        for home_cg_nnz, grid in itertools.product(args.home_cg_nnz or [None], args.grids):
            tick = time.perf_counter()
            row = _netns_run(args.data[0], alpha, grid, home_cg_nnz, args)
            rows.append(row)
            print(f"alpha {alpha:g} K {grid} home_cg_nnz {row['home_cg_nnz']:g}: "
                  f"{row['counters']} ({row['graphs']}) to the line "
                  f"in {row['wall_to']:.2f} s (reached {row['reached']}), others "
                  f"{row['others_cores']:.2f} cores; call {time.perf_counter() - tick:.1f} s",
                  flush=True)  # fmt: skip
            # after every run: an interrupted measurement keeps what it measured
            _write_json(args.out, {"command": "bench_cost_model.py dn-netns",
                                   "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M"),
                                   "rows": rows})  # fmt: skip
    print(f"wrote {args.out}\n")
    args.netns = [args.out]
    dn_netns_report(args)


def kind_table(rates, network, row):
    """Per kind of ``row`` (a ``dn-netns`` run): the measured medians and means, and the
    modelled mean seconds by term (means add up; the error is the kind's modelled total
    against its measured total)."""
    owners = min(row["grid"], row["workers"])
    out = []
    for kind in KINDS:
        mine = [r for r in row["rounds"] if r["kind"] == kind]
        if not mine:
            continue
        parts = [model_round(rates, network, r, owners) for r in mine]
        terms = {t: statistics.fmean(p[t] for p in parts) for t in parts[0]}
        measured = statistics.fmean(r["seconds"] for r in mine)
        model = sum(terms.values())
        columns = [r["columns"] for r in mine if r["columns"] is not None]
        out.append({
            "kind": kind, "graphs": len(mine), "rounds": sum(r["solver_rounds"] for r in mine),
            "median_s": statistics.median(r["seconds"] for r in mine), "mean_s": measured,
            "model_s": model, "terms": terms, "error": model / measured - 1,
            "network_share": (terms["levels"] + terms["bytes"]) / measured,
            "median_mb": statistics.median(sum(r["received"].values()) for r in mine) / 1e6,
            "median_mb_home": statistics.median(r["received"][row["home"]] for r in mine) / 1e6,
            "median_read": statistics.median(r["read"] + r["home_read"] for r in mine),
            "median_columns": statistics.median(columns) if columns else None,
        })  # fmt: skip
    return out


def dn_netns_report(args):
    import json

    from cost_model_tron_report import NETNS_1GBIT

    from daskpd.bench import costmodel_tron as ct

    rates = tron_terms(args.tron_runs or TRON_RUNS)
    network = ct.Network(*NETNS_1GBIT)
    per_read = rates.nnz_ns["hessian"] / ct.READS["hessian"]
    print(f"Tron's terms: fixed {rates.fixed['hessian'] * 1e3:.1f} ms (one reduction), "
          f"{rates.fixed['step'] * 1e3:.1f} ms (two); {per_read:.2f} ns a nonzero read; the "
          f"namespaces' 1gbit link {network.latency * 1e3:.1f} ms a level, "
          f"{network.bandwidth / 1e6:.1f} MB/s\n")  # fmt: skip
    print("| K | home_cg_nnz | kind | graphs | solver rounds | median s | mean s "
          "| model mean s = fixed + levels + bytes + nonzeros | error | median MB received "
          "| of them into w's home | median nonzeros read | median free columns "
          "| levels + bytes of the measured s |")  # fmt: skip
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: "
          "| ---: | ---: |")  # fmt: skip
    for path in args.netns:
        with open(path) as f:
            runs = json.load(f)["rows"]
        for row in runs:
            table = kind_table(rates, network, row)
            for k in table:
                t = k["terms"]
                cells = " + ".join(f"{t[x]:.3f}" for x in ("fixed", "levels", "bytes", "nonzeros"))
                columns = "-" if k["median_columns"] is None else f"{k['median_columns']:,.0f}"
                print(f"| {row['grid']} | {row['home_cg_nnz']:,} | {k['kind']} | {k['graphs']} "
                      f"| {k['rounds']} "
                      f"| {k['median_s']:.3f} | {k['mean_s']:.3f} | {k['model_s']:.3f} = {cells} "
                      f"| {100 * k['error']:+.0f}% | {k['median_mb']:.1f} "
                      f"| {k['median_mb_home']:.1f} "
                      f"| {k['median_read']:,.0f} | {columns} "
                      f"| {100 * k['network_share']:.0f}% |")  # fmt: skip
            measured = sum(r["seconds"] for r in row["rounds"])
            start = sum(r["seconds"] for r in row["rounds"] if r["kind"] == "start")
            reading = row["init_seconds"] - start
            model = sum(k["model_s"] * k["graphs"] for k in table)
            moved = sum(sum(r["received"].values()) for r in row["rounds"])
            print(f"| {row['grid']} | {row['home_cg_nnz']:,} | whole run, alpha "
                  f"{row['alpha']:g} | "
                  f"{sum(k['graphs'] for k in table)} | {row['counters']['rounds']} | | "
                  f"{measured:.2f} (the rounds; the call {row['wall_to']:.2f} with "
                  f"{reading:.2f} reading the groups) | {model:.2f} "
                  f"| {100 * (model / measured - 1):+.0f}% | {moved / 1e6:.0f} (sum) "
                  f"| | {row['counters']['passes']:.1f} passes | | |")  # fmt: skip


# -- dn-rounds and dn-runs ---------------------------------------------------------------------


def _summary(rows):
    """What a run's rounds (:meth:`GraphClock.rounds`) add up to, for the count law and the
    plan: graphs and solver rounds by kind, the Newton steps (``line`` and ``home`` graphs:
    each ends one; a ``pass`` graph is a local pass, not a step), the CG steps wherever
    they ran (``cg`` rounds and the home's), the nonzeros read by kind (the groups' and the
    home's), and the free rows' nonzeros after each step."""
    graphs, rounds = classify(rows)
    read = dict.fromkeys(KINDS, 0.0)
    for row in rows:
        read[row["kind"]] += row["read"] + row["home_read"]
    home_cg = sum(row["cg_steps"] for row in rows if row["kind"] == "home")
    return {
        "graphs": graphs, "kinds": rounds,
        "newton": graphs["line"] + graphs["refused"] + graphs["home"],
        "cg_steps": graphs["cg"] + home_cg, "cg_rounds": graphs["cg"], "home_cg": home_cg,
        "read": read,
        "free_nnz": [row["free_nnz"] for row in rows if row["free_nnz"] is not None],
    }  # fmt: skip


def _counts_run(data, alpha, grid, cap, options=None):
    """One in-process run of dual_newton hinge to the line, its rounds classified."""
    from daskpd.problem import Problem
    from daskpd.solvers.dual_newton import DualNewton, DualNewtonOptions

    method, problem = DualNewton(), Problem("hinge", "l2", alpha)
    options = options or DualNewtonOptions(grid=grid)
    tick = time.perf_counter()
    with GraphClock() as clock:
        state = method.init(problem, data, seed=np.random.SeedSequence(0), client=None,
                            options=options)  # fmt: skip
        epoch = 0
        while not _reached(*method.certificate(state)) and epoch < cap:
            epoch += 1
            state = method.run_epoch(state, epoch)
            if state.stalled:
                break
    rows = clock.rounds()
    counters = method.counters(state)
    nnz = max(1, int(np.asarray(data.col_nnz).sum()))
    check_counters(rows, counters, nnz)
    primal, dual = method.certificate(state)
    return {"alpha": alpha, "grid": grid, "reached": _reached(primal, dual), "epochs": epoch,
            **counters, **_summary(rows), "gap": (primal - dual) / dual,
            "seconds": round(time.perf_counter() - tick, 2)}  # fmt: skip


def dn_rounds(args):
    """Rounds by kind to the line, by set, alpha and K, in this process (the counts do not
    depend on the workers: :func:`daskpd.solvers.common.resident.bundles`' in-process
    groups are the K machines' local problems)."""
    import json

    from daskpd.data import open_dataset
    from daskpd.solvers.dual_newton import DualNewtonOptions

    rows = []
    for path in args.data:
        data = open_dataset(path)
        for alpha, grid, dense in itertools.product(args.alphas, args.grids,
                                                    args.dense_columns):  # fmt: skip
            extra = {} if args.home_cg_nnz is None else {"home_cg_nnz": args.home_cg_nnz}
            options = DualNewtonOptions(grid=grid, dense_columns=dense, **extra)
            row = {"set": os.path.basename(path), "nnz": int(data.nnz),
                   "n_samples": int(data.n_samples), "dense_columns": dense,
                   "home_cg_nnz": options.home_cg_nnz,
                   **_counts_run(data, alpha, grid, args.cap, options)}  # fmt: skip
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "free_nnz"}), flush=True)
            _write_json(args.out, {"command": "bench_cost_model.py dn-rounds",
                                   "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M"),
                                   "rows": rows})  # fmt: skip
    print(f"wrote {args.out}")


def _cluster_run(path, alpha, grid, home_cg_nnz, args, dense_columns=0):
    """One ``solve`` call of dual_newton (``home_cg_nnz`` None: the solver's) on a fresh
    LocalCluster, stopped at the line, every graph stamped."""
    from cost_model_tron import solve_to_line

    clock = GraphClock()
    extra = {} if home_cg_nnz is None else {"home_cg_nnz": home_cg_nnz}
    if dense_columns:
        extra["dense_columns"] = dense_columns
    result, hit, threads = solve_to_line(path, grid, args, clock, loss="hinge", alpha=alpha,
                                         solver="dual_newton", **extra)  # fmt: skip
    clock.stamps = clock.stamps[: hit.get("at", len(clock.stamps))]
    clock.graphs = clock.graphs[: hit.get("graphs", len(clock.graphs))]
    rows = clock.rounds()
    return {
        "threads": threads, "init_seconds": result.timings["init"],
        "wall_to": hit.get("wall"), "epochs_to": hit.get("epoch"),
        "others_cores": hit.get("others"), **_summary(rows),
        "rounds": [{"kind": r["kind"], "seconds": round(r["seconds"], 5), "read": r["read"],
                    "home_read": r["home_read"], "cg_steps": r["cg_steps"],
                    "columns": r["columns"], "free_nnz": r["free_nnz"]} for r in rows],
    }  # fmt: skip


def dn_runs(args):
    """Whole runs to the line on fresh clusters, ``--repeats`` times interleaved: the
    measured side of the model's check (``dn-report``)."""
    from daskpd.data import open_dataset

    configs = list(itertools.product(args.data, args.alphas, args.grids,
                                     args.home_cg_nnz or [None], args.dense_columns))  # fmt: skip
    records = {}
    for path, alpha, grid, home_cg_nnz, dense in configs:
        data = open_dataset(path)
        records[path, alpha, grid, home_cg_nnz, dense] = {
            "set": os.path.basename(path), "nnz": int(data.nnz),
            "n_samples": int(data.n_samples),
            "n_used": int(np.count_nonzero(np.asarray(data.col_nnz))), "alpha": alpha,
            "grid": grid, "home_cg_nnz": home_cg_nnz, "dense_columns": dense,
            "workers": args.workers, "runs": [],
        }  # fmt: skip
    started = time.strftime("%Y-%m-%d %H:%M")
    for repeat in range(args.repeats):
        for config in configs:
            tick = time.perf_counter()
            path, alpha, grid, home_cg_nnz, dense = config
            run = _cluster_run(path, alpha, grid, home_cg_nnz, args, dense)
            records[config]["runs"].append(run)
            print(f"repeat {repeat + 1}: {os.path.basename(path)} alpha {alpha:g} K {grid} "
                  f"home_cg_nnz {home_cg_nnz} dense_columns {dense}: "
                  f"line at {run['wall_to']} s ({run['kinds']}), others "
                  f"{run['others_cores']:.2f} cores, call "
                  f"{time.perf_counter() - tick:.1f} s", flush=True)  # fmt: skip
            _write_json(args.out, {"command": "bench_cost_model.py dn-runs", "date": started,
                                   "commit": _commit(), "workers": args.workers,
                                   "memory_limit": args.memory_limit,
                                   "records": list(records.values())})  # fmt: skip
    print(f"wrote {args.out}")


# -- dn-report ---------------------------------------------------------------------------------


def _measured_rounds(records, max_others, keep=lambda rec: True):
    """:class:`MeasuredRound` of every round of the ``dn-runs`` records kept (the runs with
    other processes below ``max_others`` cores; ``keep`` picks records)."""
    from daskpd.bench import costmodel_dual_newton as cd

    out = []
    for rec in records:
        if not keep(rec):
            continue
        for run in rec["runs"]:
            if run["others_cores"] is None or run["others_cores"] > max_others:
                continue
            for r in run["rounds"]:
                out.append(cd.MeasuredRound(
                    kind=r["kind"], seconds=r["seconds"], read=r["read"],
                    home_read=r["home_read"], used=rec["n_used"],
                    free=r["columns"] if r["columns"] is not None else rec["n_used"],
                    groups=rec["grid"], workers=rec["workers"], threads=run["threads"],
                ))  # fmt: skip
    return out


def _read_points(records):
    """``(kind, read / nnz, free / nnz)`` of every round at scale's kinds in the runs whose
    every CG step was a round (``home_cg_nnz`` 0): what it read, and the free rows' nonzeros
    at the gradient round before it."""
    from daskpd.bench import costmodel_dual_newton as cd

    points = []
    for rec in records:
        if rec.get("home_cg_nnz") != 0:
            continue
        for run in rec["runs"]:
            free = None
            for r in run["rounds"]:
                if r["kind"] in cd.AT_SCALE and free is not None:
                    points.append((r["kind"], r["read"] / rec["nnz"], free / rec["nnz"]))
                if r.get("free_nnz") is not None:
                    free = r["free_nnz"]
    return points


def _count_points(rows, grid):
    """The count law's points (:func:`daskpd.bench.costmodel_dual_newton.fit_counts`) of the
    ``dn-rounds`` rows at ``grid`` that reached the line."""
    return [
        {"alpha": r["alpha"], "n_samples": r["n_samples"], "newton": r["newton"],
         "cg": r["cg_steps"], "passes": r["graphs"]["pass"],
         "free": statistics.fmean(r["free_nnz"]) / r["nnz"]}
        for r in rows
        if r["grid"] == grid and r["reached"] and not r.get("dense_columns", 0)
    ]  # fmt: skip


def dn_report(args):
    import dataclasses

    from cost_model_tron_report import NETNS_1GBIT, _fit_inputs, _load

    from daskpd.bench import costmodel as cm
    from daskpd.bench import costmodel_dual_newton as cd
    from daskpd.bench import costmodel_tron as ct
    from daskpd.solvers.dual_newton import DualNewtonOptions

    times, tron_runs, apart = _fit_inputs([_load(p) for p in args.tron_runs or TRON_RUNS])
    tron = ct.fit_tron(times, tron_runs, **apart)
    loopback = ct.Network(tron.hop, apart["bandwidth"])
    # the model's runs are the diagonal preconditioner's
    records = [rec for path in args.runs for rec in _load(path)["records"]
               if not rec.get("dense_columns", 0)]  # fmt: skip
    fit_alphas = set(args.fit_alphas)
    fitted_on = _measured_rounds(records, args.max_others, lambda r: r["alpha"] in fit_alphas)
    rates = cd.fit_rates(fitted_on, tron, loopback)
    print(f"Fitted on the rounds of the alpha {sorted(fit_alphas)} runs ({len(fitted_on)} "
          f"rounds; runs with more than {args.max_others} cores busy elsewhere left out), "
          "tron's terms given (its fit of the committed tron-runs records):\n")  # fmt: skip
    print("| kind | rounds | fixed s | core-ns a nonzero read | ns a share's column and row "
          "| ns a column of the home's algebra |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for kind in cd.KINDS:
        if kind in rates.fixed:
            n = sum(r.kind == kind for r in fitted_on)
            print(f"| {kind} | {n} | {rates.fixed[kind]:.4f} | {rates.read_ns[kind]:.2f} "
                  f"| {rates.share_ns[kind]:.2f} | {rates.home_ns[kind]:.2f} |")  # fmt: skip
    print(f"\nThe home's Newton step: {rates.home_read_ns:.2f} ns a nonzero it reads (one "
          "core).\n")  # fmt: skip

    print("| set | alpha | K | home_cg_nnz | runs kept | measured s to the line (median) "
          "| of it, reading the groups | model s | error | fitted on it |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    errors = {True: [], False: []}
    for rec in records:
        kept = [run for run in rec["runs"]
                if run["others_cores"] is not None and run["others_cores"] <= args.max_others
                and run["wall_to"] is not None]  # fmt: skip
        if not kept:
            continue
        run = min(kept, key=lambda r: abs(r["wall_to"] - statistics.median(
            x["wall_to"] for x in kept)))  # fmt: skip
        layout = ct.Layout(rec["grid"], rec["workers"], run["threads"])
        wall = statistics.median(r["wall_to"] for r in kept)
        reading = statistics.median(
            r["init_seconds"] - sum(x["seconds"] for x in r["rounds"] if x["kind"] == "start")
            for r in kept
        )
        model_reading = tron.init_fixed + layout.per_worker * rec["nnz"] / rec["grid"] * (
            tron.init_ns * 1e-9)
        model = model_reading + sum(
            cd.round_seconds(rates, r["kind"], r["read"], r["home_read"], rec["n_used"],
                             r["columns"] if r["columns"] is not None else rec["n_used"],
                             layout, loopback)
            for r in run["rounds"]
        )  # fmt: skip
        fitted = rec["alpha"] in fit_alphas
        errors[fitted].append(model / wall - 1)
        home_cg = "default" if rec["home_cg_nnz"] is None else f"{rec['home_cg_nnz']:,}"
        print(f"| {rec['set']} | {rec['alpha']:g} | {rec['grid']} | {home_cg} "
              f"| {len(kept)} | {wall:.2f} | {reading:.2f} | {model:.2f} "
              f"| {100 * (model / wall - 1):+.0f}% "
              f"| {'yes' if fitted else 'no (held out)'} |")  # fmt: skip
    for fitted, errs in errors.items():
        if errs:
            print(f"\n{'Fitted' if fitted else 'Held-out'} runs: errors {100 * min(errs):+.0f}% "
                  f"to {100 * max(errs):+.0f}%")  # fmt: skip

    rows = [row for path in args.rounds for row in _load(path)["rows"]]
    points = _read_points(records)
    # where every trial is a round (home_cg_nnz 0): the rounds after a refused t = 1 a step
    distributed = [run for rec in records if rec.get("home_cg_nnz") == 0 for run in rec["runs"]]
    steps = sum(run["newton"] for run in distributed)
    shares = {k: sum(run["graphs"][k] for run in distributed) / steps for k in cd.AFTER_REFUSED}
    print("\nEvery trial a round (the home_cg_nnz 0 runs): a Newton step has "
          + ", ".join(f"{v:.2f} {k}" for k, v in shares.items()) + " rounds")  # fmt: skip
    print("\nReads at scale's kinds (rounds of the home_cg_nnz 0 runs), nonzeros read over "
          "all = full + factor x the free rows' share:")  # fmt: skip
    plans = {}
    for grid in sorted({r["grid"] for r in rows}):
        mine = _count_points(rows, grid)
        if len({p["alpha"] for p in mine}) < 2 or len({p["n_samples"] for p in mine}) < 2:
            continue
        law = cd.fit_counts(mine, points, shares)
        plans[grid] = law
        laws = "; ".join(f"{field} = {math.exp(a):.3g} alpha^{b:.3f} n^{c:.3f}"
                         for field, (a, b, c) in law.coefficients.items())  # fmt: skip
        print(f"\nK = {grid}: {laws} (passes: the law of passes + 1)")
        print("; ".join(f"{k} reads {f:.2f} + {x:.2f} free" for k, (f, x) in law.reads.items()))
        for p in sorted(mine, key=lambda p: (p["n_samples"], -p["alpha"])):
            at = law.at(p["alpha"], p["n_samples"])
            print(f"- n {p['n_samples']:,} alpha {p['alpha']:g}: Newton {p['newton']} (law "
                  f"{at.newton:.1f}), CG {p['cg']} (law {at.cg:.1f}), passes {p['passes']} "
                  f"(law {at.passes:.1f}), free {p['free']:.4f} (law {at.free:.4f})")  # fmt: skip
    bandwidth = args.bandwidth_gbit * 1e9 / 8 * args.link_share
    network = ct.Network(NETNS_1GBIT[0], bandwidth, broadcast="tree")
    slow = dataclasses.replace(tron, thread_exponent=dict.fromkeys(tron.thread_exponent,
                                                                   args.slow_threads))  # fmt: skip
    for alpha in args.job_alphas:
        job = cm.Job(nnz=1.6e11, n_samples=5e7, n_features=11_725_480, loss="hinge",
                     alpha=alpha)  # fmt: skip
        print(f"\n#### Hinge, alpha {alpha:g} (counts extrapolated by the law of the K "
              "measured nearest the machines)\n")  # fmt: skip
        print("| machines x cores | law's K | Newton steps | CG rounds | local passes "
              "| free share | start s | CG round s = graph + passes + shares + home + network "
              "| line round s | minutes to the line | of them, passes | minutes, threads' "
              "rows kept | minutes, slow threads |")  # fmt: skip
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: "
              "| ---: | ---: |")  # fmt: skip
        for count in args.machines:
            grid = min(plans, key=lambda k: abs(math.log(k) - math.log(count)))
            counts = plans[grid].at(alpha, job.n_samples)
            machines = cm.Machines(count, args.cores, args.memory_gib * 2**30,
                                   args.bandwidth_gbit * 1e9 / 8)  # fmt: skip
            cap = DualNewtonOptions().max_cg
            plan = cd.plan_dual_newton(rates, counts, job, machines, network, max_cg=cap)
            kept = cd.plan_dual_newton(rates, counts, job, machines, network, kept_rows=True,
                                       max_cg=cap)  # fmt: skip
            slowly = cd.plan_dual_newton(dataclasses.replace(rates, tron=slow), counts, job,
                                         machines, network, max_cg=cap)  # fmt: skip
            counts = plan["counts"]
            parts = plan["parts"]
            cells = " + ".join(f"{parts[k]:.2f}" for k in ("graph", "passes", "shares", "home",
                                                            "network"))  # fmt: skip
            print(f"| {count} x {args.cores} | {grid} | {counts.newton:.1f} | {counts.cg:.0f} "
                  f"| {counts.passes:.1f} | {counts.free:.4f} | {plan['init']:.0f} "
                  f"| {plan['round']['cg']:.2f} = {cells} | {plan['round']['line']:.2f} "
                  f"| {plan['seconds'] / 60:.1f} | {plan['passes'] / 60:.1f} "
                  f"| {kept['seconds'] / 60:.1f} | {slowly['seconds'] / 60:.1f} |")  # fmt: skip


# -- dn-precond --------------------------------------------------------------------------------


def _pcg_steps(apply_h, b, solve_m, eta, max_steps=5000):
    """Preconditioned CG steps until ``||r||^2 <= eta^2 ||b||^2`` (the solver's rule)."""
    x, r = np.zeros_like(b), b.copy()
    z = solve_m(r)
    p, rz, rr0 = z.copy(), float(r @ z), float(r @ r)
    for step in range(1, max_steps + 1):
        hp = apply_h(p)
        length = rz / float(p @ hp)
        x += length * p
        r -= length * hp
        if float(r @ r) <= eta**2 * rr0:
            return step
        z = solve_m(r)
        rz_next = float(r @ z)
        p = z + (rz_next / rz) * p
        rz = rz_next
    return max_steps


def _free_rows(path, alpha):
    """The free rows (``0 < a_i < 1``) of dual_newton's point at the line (one group, in
    this process), as a binary CSR matrix on the columns they touch, and the run's rows."""
    import scipy.sparse as sparse

    from daskpd.data import open_dataset
    from daskpd.problem import Problem
    from daskpd.solvers.dual_newton import DualNewton, DualNewtonOptions

    data = open_dataset(path)
    method = DualNewton()
    state = method.init(Problem("hinge", "l2", alpha), data, seed=np.random.SeedSequence(0),
                        client=None, options=DualNewtonOptions(grid=1))  # fmt: skip
    epoch = 0
    while not _reached(*method.certificate(state)) and epoch < 500:
        epoch += 1
        state = method.run_epoch(state, epoch)
    z = method.iterate(state).z
    z = np.concatenate([np.asarray(piece) for piece in z]) if isinstance(z, list | tuple) else z
    indptr, indices, _, y = data.read_rows_arrays(0, data.n_samples)
    x = sparse.csr_matrix((np.ones(indices.shape[0]), indices, indptr),
                          shape=(data.n_samples, data.n_features))  # fmt: skip
    a = -np.asarray(z) * np.asarray(y)  # z = -c y a, c = 1 (no weights)
    free = (a > 1e-9) & (a < 1.0 - 1e-9)
    x_free = x[free]
    touched = np.flatnonzero(x_free.getnnz(axis=0) > 0)
    return x_free[:, touched].tocsr(), int(data.n_samples), epoch


def dn_precond(args):
    """CG steps on the free rows' Newton system at the line, ``(H_FF + damping D) d = b``
    (``H = X_F X_F^T / (alpha n)``, binary rows, ``b`` random), with the solver's row
    diagonal and with a Woodbury preconditioner: the columns in at least ``share`` of the
    free rows exactly (``B_d B_d^T``), the others' contribution as its diagonal."""
    import json

    import scipy.linalg as linalg

    from daskpd.solvers.dual_newton import DualNewtonOptions

    damping = DualNewtonOptions().damping
    rows = []
    for path in args.data:
        x_free, n, epochs = _free_rows(path, args.alpha)
        scale = 1.0 / (args.alpha * n)
        norms = np.asarray(x_free.multiply(x_free).sum(axis=1)).ravel()
        diag = scale * (1.0 + damping) * norms

        def apply_h(v, x_free=x_free, scale=scale, norms=norms):
            return scale * (x_free @ (x_free.T @ v)) + damping * scale * norms * v

        b = np.random.default_rng(0).standard_normal(x_free.shape[0])
        row = {"set": os.path.basename(path), "n_samples": n, "epochs": epochs,
               "free_rows": int(x_free.shape[0]), "free_columns": int(x_free.shape[1]),
               "free_nnz": int(x_free.nnz), "alpha": args.alpha, "steps": {}}  # fmt: skip
        for eta in args.etas:
            row["steps"][f"diagonal eta {eta:g}"] = _pcg_steps(
                apply_h, b, lambda r, diag=diag: r / diag, eta)  # fmt: skip
        frequency = x_free.getnnz(axis=0)
        for share in args.shares:
            dense = np.flatnonzero(frequency >= share * x_free.shape[0])
            rest = np.flatnonzero(frequency < share * x_free.shape[0])
            block = x_free[:, dense].toarray() * np.sqrt(scale)
            other = x_free[:, rest]
            delta = scale * np.asarray(other.multiply(other).sum(axis=1)).ravel() + (
                damping * scale * norms)  # fmt: skip
            tick = time.perf_counter()
            factor = linalg.cho_factor(np.eye(dense.size) + block.T @ (block / delta[:, None]))
            setup = time.perf_counter() - tick

            def solve_m(r, block=block, delta=delta, factor=factor):
                u = r / delta
                return u - (block @ linalg.cho_solve(factor, block.T @ u)) / delta

            for eta in args.etas:
                row["steps"][f"woodbury {share:g} ({dense.size} columns) eta {eta:g}"] = (
                    _pcg_steps(apply_h, b, solve_m, eta))  # fmt: skip
            row[f"setup {share:g}"] = round(setup, 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
        _write_json(args.out, {"command": "bench_cost_model.py dn-precond", "commit": _commit(),
                               "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows})  # fmt: skip


def _home_cg_option(parser):
    parser.add_argument("--home-cg-nnz", type=int, nargs="+",
                        help="runs with each of these home_cg_nnz (default: the solver's); 0: "
                        "every CG step a round")  # fmt: skip


def add_parsers(parts):
    """The dual_newton subcommands of ``bench_cost_model.py``."""
    netns = parts.add_parser("dn-netns", help="dual_newton on a namespace cluster")
    netns.add_argument("--data", action="append", required=True)
    netns.add_argument("--alphas", default=[1e-5], type=float, nargs="+")
    netns.add_argument("--grids", type=int, nargs="+", default=[2, 4])
    netns.add_argument("--workers", type=int, default=2)
    netns.add_argument("--rate", default="1gbit")
    _home_cg_option(netns)
    netns.add_argument("--cap", type=int, default=60, help="at most this many Newton steps")
    netns.add_argument("--out", required=True)
    report = parts.add_parser("dn-netns-report", help="dual_newton's namespace rounds, modelled")
    report.add_argument("--netns", action="append", required=True, help="dn-netns files")
    for part in (netns, report):
        part.add_argument("--tron-runs", action="append",
                          help="tron-runs files whose fit gives the terms (default: the "
                          "committed tron_runs.json and tron_runs_more.json)")  # fmt: skip
    counts = parts.add_parser("dn-rounds", help="dual_newton's rounds to the line by alpha")
    counts.add_argument("--data", action="append", required=True)
    counts.add_argument("--alphas", type=float, nargs="+", default=[1e-4, 1e-5, 1e-6, 1e-7])
    counts.add_argument("--grids", type=int, nargs="+", default=[1])
    counts.add_argument("--cap", type=int, default=200, help="at most this many epochs")
    counts.add_argument("--dense-columns", type=int, nargs="+", default=[0],
                        help="runs with each of these dense_columns (the Woodbury "
                        "preconditioner's; 0: the diagonal)")  # fmt: skip
    counts.add_argument("--home-cg-nnz", type=int, help="the solver's home_cg_nnz (default: "
                        "its default; 0: every CG step a round)")  # fmt: skip
    counts.add_argument("--out", required=True)
    runs = parts.add_parser("dn-runs", help="dual_newton runs to the line on fresh clusters")
    runs.add_argument("--data", action="append", required=True)
    runs.add_argument("--alphas", type=float, nargs="+", default=[1e-5])
    runs.add_argument("--grids", type=int, nargs="+", default=[2, 8])
    runs.add_argument("--workers", type=int, default=2)
    runs.add_argument("--memory-limit", default="5GiB")
    runs.add_argument("--repeats", type=int, default=3)
    _home_cg_option(runs)
    runs.add_argument("--dense-columns", type=int, nargs="+", default=[0],
                      help="runs with each of these dense_columns (0: the diagonal)")
    runs.add_argument("--cap", type=int, default=200, help="at most this many epochs")
    runs.add_argument("--out", required=True)
    rep = parts.add_parser("dn-report", help="fit, check and plan dual_newton")
    rep.add_argument("--runs", action="append", required=True, help="dn-runs files")
    rep.add_argument("--rounds", action="append", required=True, help="dn-rounds files")
    rep.add_argument("--tron-runs", action="append",
                     help="tron-runs files whose fit gives tron's terms (default: committed)")
    rep.add_argument("--fit-alphas", type=float, nargs="+", default=[1e-5],
                     help="the runs the rates are fitted on; the others are held out")
    rep.add_argument("--max-others", type=float, default=0.15,
                     help="leave out runs during which other processes kept more cores busy")
    rep.add_argument("--job-alphas", type=float, nargs="+", default=[1e-8, 1e-7, 1e-6])
    rep.add_argument("--machines", type=int, nargs="+", default=[16, 64])
    rep.add_argument("--cores", type=int, default=32)
    rep.add_argument("--memory-gib", type=float, default=256)
    rep.add_argument("--bandwidth-gbit", type=float, default=10)
    rep.add_argument("--link-share", type=float, default=0.894,
                     help="the share of a link's rate a transfer gets (as measured at 1gbit)")
    rep.add_argument("--slow-threads", type=float, default=0.5,
                     help="the exponent b of T^b for the slow-threads case (assumed)")
    pre = parts.add_parser("dn-precond", help="CG steps on the free rows by preconditioner")
    pre.add_argument("--data", action="append", required=True)
    pre.add_argument("--alpha", type=float, default=1e-5)
    pre.add_argument("--shares", type=float, nargs="+", default=[0.1, 0.02],
                     help="a column is kept exactly when in at least this share of free rows")
    pre.add_argument("--etas", type=float, nargs="+", default=[0.1, 1e-3])
    pre.add_argument("--out", required=True)
    return {"dn-netns": dn_netns, "dn-netns-report": dn_netns_report, "dn-rounds": dn_rounds,
            "dn-runs": dn_runs, "dn-report": dn_report, "dn-precond": dn_precond}
