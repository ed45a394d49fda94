"""Issue 49's cost model of ``solver="tron"``: the parts of ``bench_cost_model.py`` that
measure, fit and plan it (``daskpd.bench.costmodel_tron`` has the model).

``tron-runs``
    On a fresh LocalCluster of ``--workers`` one-thread processes per run: tron logistic
    runs to the certified line (the first history row with ``gap <= 1e-3 * dual``; the
    call stops there) for every set of ``--data`` (and ``--tiny``: sets of few nonzeros,
    whose rounds are the fixed cost), alpha of ``--alphas`` and ``K`` of ``--grids``,
    ``--repeats`` times interleaved; every round of the solver is timed in the driver (its
    kind, the seconds until the driver had its result). Before them: a tree-sum of
    d-vectors on a LocalCluster (the loopback's latency and bandwidth), and in this process
    the home's vector algebra a round (``home_ns``) and a group's output rows
    (``group_ns``). One JSON file.
``tron-rounds``
    Newton steps, rounds and passes to the line in this process (they do not depend on
    ``K``) for each set and alpha: the counts the plan extrapolates.
``tron-netns``
    Tron logistic on a :class:`daskpd._netns.NetnsCluster` (TLS, every link shaped to
    ``--rate``), ``K`` of ``--grids``, run through :class:`Tron` directly to the line; every
    round timed, and the bridge ports' byte counters read after it.
``tron-report``
    Fits the model, prints the parameters, the rounds and runs measured against it, the
    namespace rounds against it, and the plan of the splice-site job.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

LINE = 1e-3


def _write_json(path, value):
    from daskpd.data.atomic import write_text_atomic

    write_text_atomic(path, json.dumps(value, indent=1) + "\n")


def _reached(primal, dual):
    return dual > 0 and primal - dual <= LINE * dual


class RoundClock:
    """Stamps every round of :mod:`daskpd.solvers.tron` run in this process: when the
    driver had each result it waited for (the solver's ``value``), with the graph's kind
    and which ``_run`` sent it. ``sample`` (a callable) runs after each stamp, outside the
    rounds' time."""

    def __init__(self, sample=None):
        self.sample = sample
        self.stamps = []

    def __enter__(self):
        from daskpd.solvers.tron import _solver

        self._solver, self._saved = _solver, (_solver._run, _solver.value)
        run, value = self._saved
        current = {"run": 0, "prefix": None}

        def timed_run(state, graph, outputs):
            current["run"] += 1
            current["prefix"] = graph.prefix
            return run(state, graph, outputs)

        def timed_value(ref, owners=()):
            out = value(ref, owners)
            done = time.perf_counter()
            sampled = self.sample() if self.sample is not None else None
            self.stamps.append(
                (current["prefix"], current["run"], done, time.perf_counter(), sampled)
            )
            return out

        _solver._run, _solver.value = timed_run, timed_value
        return self

    def __exit__(self, *exc):
        self._solver._run, self._solver.value = self._saved

    def rounds(self, upto=None):
        """``(kind, seconds, sample before, sample after)`` of every round after the start,
        in daskpd.bench.costmodel_tron's kinds: ``hessian`` (a CG graph), ``step`` (the line
        graph's first run: its three results, ``s``'s scalars, the loss at ``t = 1`` and,
        when accepted, the point), ``numbers`` (a later line graph), ``gradient``."""
        stamps = self.stamps[: len(self.stamps) if upto is None else upto]
        out, previous, open_step = [], None, None

        def close_step():
            out.append(("step", open_step["seconds"], open_step["before"], open_step["after"]))

        for prefix, run, done, resumed, sampled in stamps:
            if prefix == "tron-start":
                previous = (resumed, sampled)
                continue
            seconds = done - previous[0]
            if open_step is not None and run == open_step["run"]:
                open_step["seconds"] += seconds
                open_step["after"] = sampled
                previous = (resumed, sampled)
                continue
            if open_step is not None:
                close_step()
                open_step = None
            if prefix == "tron-line" and out and out[-1][0] == "hessian":
                open_step = {"run": run, "seconds": seconds, "before": previous[1],
                             "after": sampled}  # fmt: skip
            else:
                kind = {"tron-cg": "hessian", "tron-line": "numbers",
                        "tron-gradient": "gradient"}[prefix]  # fmt: skip
                out.append((kind, seconds, previous[1], sampled))
            previous = (resumed, sampled)
        if open_step is not None:
            close_step()
        return out


def _counts(rounds):
    """Rounds of each kind among ``RoundClock.rounds`` rows (``newton``: the step rounds)."""
    counts = dict.fromkeys(("hessian", "step", "numbers", "gradient"), 0)
    for kind, *_ in rounds:
        counts[kind] += 1
    return counts


def _tron_rounds(counts):
    from daskpd.bench.costmodel_tron import TronRounds

    return TronRounds(counts["step"], counts["hessian"], counts["numbers"], counts["gradient"])


def _check_counters(counts, counters):
    """The kinds counted add up to the solver's own counters."""
    rounds = _tron_rounds(counts)
    if (rounds.rounds, rounds.passes) != (counters["rounds"], counters["passes"]):
        raise AssertionError(f"kinds {counts} do not add up to the counters {counters}")


# -- microbenchmarks --------------------------------------------------------------------------


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        tick = time.perf_counter()
        fn()
        times.append(time.perf_counter() - tick)
    return statistics.median(times)


def home_seconds(d, repeats=9):
    """Seconds of the home's tasks a round of each kind, on vectors of ``d`` floats, with one
    group (dense shares; :func:`scatter_seconds` is what several groups' merged share costs
    more). The CG start, once a Newton step, is charged to the step round."""
    from types import SimpleNamespace

    from daskpd.solvers.common import resident
    from daskpd.solvers.tron import _tasks as tasks

    rng = np.random.default_rng(0)
    settings = SimpleNamespace(n_samples=200_000, alpha=1e-5, eps_cg=0.5, max_cg=250,
                               precondition=True)  # fmt: skip
    w = rng.standard_normal(d) * 1e-3
    shares = (resident.Share(None, np.stack([rng.standard_normal(d), rng.random(d) + 1.0])),
              np.ones(4))  # fmt: skip
    point = tasks._point_task(w, shares, settings)
    cg = tasks._cg_start(point, settings)
    products = resident.Share(None, 50.0 * cg.direction[None, :])
    moved = tasks._cg_step(cg, products, point, settings)

    def hessian():
        tasks._cg_direction(cg)
        tasks._cg_scalars(tasks._cg_step(cg, products, point, settings))

    def step():
        tasks._cg_step_vector(moved)
        tasks._line_scalars(point, moved)
        new = tasks._point_task(tasks._moved_w(point, moved, 1.0), shares, settings)
        tasks._point_scalars(new)
        tasks._cg_start(new, settings)

    def gradient():
        new = tasks._point_task(tasks._moved_w(point, moved, 0.5), shares, settings)
        tasks._point_scalars(new)

    for fn in (hessian, step, gradient):
        fn()  # compiled and warm
    return {"hessian": _best(hessian, repeats), "step": _best(step, repeats),
            "numbers": 0.0, "gradient": _best(gradient, repeats)}  # fmt: skip


def scatter_seconds(d, repeats=7):
    """Seconds the home takes to make a merged share of one vector on all ``d`` columns
    dense (with several groups, before its algebra)."""
    from daskpd.solvers.common import resident

    share = resident.Share(np.arange(d, dtype=np.int32), np.ones((1, d)))
    resident.dense(share, d)
    return _best(lambda: resident.dense(share, d), repeats)


def group_seconds(d, threads, repeats=7):
    """Seconds a group's task spends on one vector of its share beyond its kernel: its
    threads' output rows (the group's kept ones) zeroed, written (every page) and summed in
    its threads, the sum copied out of them, as tron's tasks do."""
    from daskpd.solvers.common import resident

    group = resident.RowGroup(None, None, None, True, None, None, None, None, [])

    def work():
        rows = resident.zeroed_rows(resident.thread_rows(group, (threads, d)), threads)
        rows[:, ::512] = 1.0
        resident.summed_rows(rows, threads)[None, :].copy()
        resident.keep_rows(group, rows)

    work()
    return _best(work, repeats)


def merge_seconds(d, repeats=7):
    """Seconds of merging two shares of ``d`` columns each (a quarter not in common) up the
    tree: what a share of ``2 d`` columns costs merged, for one vector."""
    from daskpd.solvers.common import resident

    rng = np.random.default_rng(1)
    pool = np.arange(int(1.25 * d), dtype=np.int32)
    a = np.sort(rng.choice(pool, d, replace=False)).astype(np.int32)
    b = np.sort(rng.choice(pool, d, replace=False)).astype(np.int32)
    left, right = (resident.Share(c, rng.random((1, d))) for c in (a, b))
    resident.add(left, right)
    return _best(lambda: resident.add(left, right), repeats)


def _through_origin(xs, ys):
    return sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)


# -- tron-runs --------------------------------------------------------------------------------


def _loopback(args, used):
    """On a LocalCluster like the runs': tree-sums of d-vectors (the loopback's latency and
    bandwidth, as ``netns_cluster.py`` measures and fits them across namespaces), and on its
    first worker (its environment: one BLAS thread, the malloc settings) the microbenchmarks
    of the home's algebra and a group's output rows for every ``d`` of ``used``."""
    import sys

    import cloudpickle
    from distributed import wait
    from netns_cluster import _tree_sum, fit

    from daskpd._cluster import ClusterOptions, cluster_client

    # the workers do not import this script: its functions travel by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rows = []
    options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
    with cluster_client(options, start=True) as client:
        workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
        home = {
            str(d): client.submit(home_seconds, d, workers=[workers[0]], pure=False).result()
            for d in used
        }
        group = {
            f"{d} {t}": client.submit(group_seconds, d, t, workers=[workers[0]],
                                      pure=False).result()
            for d in used for t in (1, 2, 4)
        }  # fmt: skip
        merge = {
            str(d): client.submit(merge_seconds, d, workers=[workers[0]], pure=False).result()
            for d in used
        }
        scatter = {
            str(d): client.submit(scatter_seconds, d, workers=[workers[0]], pure=False).result()
            for d in used
        }
        for d in [1, 1] + [int(float(s)) for s in args.loopback_sizes.split(",")]:
            times = []
            for _ in range(5):
                parts = [client.submit(np.ones, d, workers=[w], pure=False) for w in workers]
                wait(parts)
                tick = time.perf_counter()
                root, levels = _tree_sum(client, parts, workers)
                wait(root)
                times.append(time.perf_counter() - tick)
                del root, parts
            rows.append({"d": d, "levels": levels, "reduce": statistics.median(times)})
    rows = rows[1:]  # the first opened the connections
    latency, bandwidth = fit(rows)
    micro = {"home_seconds": home, "group_seconds": group, "merge_seconds": merge,
             "scatter_seconds": scatter}  # fmt: skip
    return {"rows": rows, "latency": latency, "bandwidth": bandwidth}, micro


def share_columns(data, grid, workers):
    """``(share, cross)``: the mean columns of a group's own share with ``grid`` groups
    (every used column with one group), and what the last worker's groups cover together
    (the share it sends up the tree; groups ``k * P // K`` on worker ``k``, as Tron places
    them)."""
    from daskpd.solvers.common.groups import row_group_bounds

    used = int(np.count_nonzero(np.asarray(data.col_nnz)))
    if grid == 1:
        return used, used
    bounds = row_group_bounds(data, grid)
    owners = min(grid, workers)
    own, union = [], np.zeros(int(data.n_features), dtype=bool)
    for k in range(grid):
        indices = data.read_rows_arrays(int(bounds[k]), int(bounds[k + 1]))[1]
        mask = np.zeros(int(data.n_features), dtype=bool)
        mask[indices] = True
        own.append(int(np.count_nonzero(mask)))
        if k * owners // grid == owners - 1:
            union |= mask
    return statistics.fmean(own), int(np.count_nonzero(union))


def _cpu_seconds():
    """``(busy, ours)``: CPU seconds every core has been busy (``/proc/stat``), and those of
    this process and its children (the cluster's processes). What others ran during a run
    is the difference of the two differences: the run's disturbance."""
    import psutil

    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]
    busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    ours = 0.0
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        ours += times.user + times.system
    return busy, ours


def _others_cores(before, after, seconds):
    """Cores that other processes kept busy on average between two :func:`_cpu_seconds`."""
    return ((after[0] - before[0]) - (after[1] - before[1])) / seconds


def _owners_threads(client, grid):
    from daskpd.solvers.common.groups import idle_cores, worker_list

    workers = worker_list(client)
    owners = tuple(workers[k * len(workers) // grid] for k in range(grid))
    return min(idle_cores(client, owners), 64)


def solve_to_line(path, grid, args, clock, **solve_kwargs):
    """One ``solve`` call on a fresh LocalCluster of ``args.workers`` (``args.memory_limit``
    each) with ``clock`` entered around it, stopped by a callback at the certified line
    (the first certificate with ``gap <= 1e-3 * dual``) or ``args.cap`` epochs.

    Returns ``(result, hit, threads)``: ``hit`` holds the line's epoch, its wall seconds, the
    clock's stamps (and graphs, for a clock that keeps them) when it was reached, and the
    cores other processes kept busy meanwhile (empty when the line was not reached);
    ``threads`` those of a group's owner."""
    from daskpd._cluster import ClusterOptions, cluster_client
    from daskpd.data import open_dataset
    from daskpd.solvers import solve

    data = open_dataset(path)
    options = ClusterOptions(n_workers=args.workers, memory_limit=args.memory_limit)
    hit = {}
    with cluster_client(options, start=True) as client, clock:
        threads = _owners_threads(client, grid)
        cpu, tick = _cpu_seconds(), time.perf_counter()

        def stop(info):
            row = info.row
            if row is not None and "dual" in row and _reached(row["primal"], row["dual"]):
                hit.update(epoch=row["epoch"], wall=row["wall_seconds"], at=len(clock.stamps),
                           graphs=len(getattr(clock, "graphs", ())),
                           others=_others_cores(cpu, _cpu_seconds(),
                                                time.perf_counter() - tick))  # fmt: skip
                return True
            return False

        result = solve(
            data, grid=grid, client=client, tol=0.0, max_epochs=args.cap, eval_every=args.cap,
            callbacks=[stop], **solve_kwargs,
        )  # fmt: skip
    return result, hit, threads


def _one_run(path, alpha, grid, args):
    """One solve call on a fresh cluster, every round stamped, stopped at the line."""
    clock = RoundClock()
    result, hit, threads = solve_to_line(path, grid, args, clock, loss="logistic", alpha=alpha,
                                         solver="tron")  # fmt: skip
    rounds = clock.rounds(hit.get("at"))
    return {
        "threads": threads,
        "init_seconds": result.timings["init"],
        "wall_to": hit.get("wall"),
        "epochs_to": hit.get("epoch"),
        "others_cores": hit.get("others"),
        "counts_to": _counts(rounds),
        "rounds": [(kind, round(seconds, 5)) for kind, seconds, *_ in rounds],
    }


def tron_runs(args):
    from daskpd.data import open_dataset

    started = time.strftime("%Y-%m-%d %H:%M")
    sets = list(args.data) + list(args.tiny or ())
    used = {p: int(np.count_nonzero(np.asarray(open_dataset(p).col_nnz))) for p in sets}
    loopback, micro = _loopback(args, sorted(set(used.values())))
    print(f"loopback: latency {loopback['latency'] * 1e3:.2f} ms a level, bandwidth "
          f"{loopback['bandwidth'] / 1e6:.0f} MB/s; {micro}", flush=True)  # fmt: skip
    configs = [(p, a, k) for p in sets for a in args.alphas for k in args.grids]
    records = {}
    for path, alpha, grid in configs:
        data = open_dataset(path)
        share, cross = share_columns(data, grid, args.workers)
        records[path, alpha, grid] = {
            "set": os.path.basename(path), "nnz": data.nnz, "n_samples": data.n_samples,
            "n_used": used[path], "n_share": share, "n_cross": cross, "alpha": alpha,
            "grid": grid, "workers": args.workers, "runs": [],
        }  # fmt: skip
    for repeat in range(args.repeats):
        for config in configs:
            tick = time.perf_counter()
            run = _one_run(*config, args)
            records[config]["runs"].append(run)
            path, alpha, grid = config
            print(f"repeat {repeat + 1}: {os.path.basename(path)} alpha {alpha:g} K {grid}: "
                  f"line at {run['wall_to']} s ({run['counts_to']}), others "
                  f"{run['others_cores']:.2f} cores, call "
                  f"{time.perf_counter() - tick:.1f} s", flush=True)  # fmt: skip
            # after every run: an interrupted measurement keeps what it measured
            _write_json(args.out, {
                "command": "bench_cost_model.py tron-runs", "date": started,
                "commit": _commit(), "workers": args.workers,
                "memory_limit": args.memory_limit, "loopback": loopback, **micro,
                "records": list(records.values()),
            })  # fmt: skip
    print(f"wrote {args.out}")


def _commit():
    import subprocess

    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=Path(__file__).parent)  # fmt: skip
    return done.stdout.strip() or "unknown"


# -- tron-rounds ------------------------------------------------------------------------------


def tron_rounds(args):
    from daskpd.data import open_dataset
    from daskpd.problem import Problem
    from daskpd.solvers.tron import Tron, TronOptions

    rows = []
    for path in args.data:
        data = open_dataset(path)
        for alpha in args.alphas:
            method, problem = Tron(), Problem("logistic", "l2", alpha)
            tick = time.perf_counter()
            with RoundClock() as clock:
                state = method.init(problem, data, seed=np.random.SeedSequence(0),
                                    client=None, options=TronOptions(grid=1))  # fmt: skip
                epoch = 0
                while not _reached(*method.certificate(state)) and epoch < args.cap:
                    epoch += 1
                    state = method.run_epoch(state, epoch)
            counts, counters = _counts(clock.rounds()), method.counters(state)
            _check_counters(counts, counters)
            primal, dual = method.certificate(state)
            row = {"set": os.path.basename(path), "nnz": data.nnz, "n_samples": data.n_samples,
                   "alpha": alpha, "reached": _reached(primal, dual), "epochs": epoch,
                   **counters, "kinds": counts, "gap": (primal - dual) / dual,
                   "seconds": round(time.perf_counter() - tick, 2)}  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    _write_json(args.out, {"command": "bench_cost_model.py tron-rounds", "commit": _commit(),
                           "rows": rows})  # fmt: skip


# -- tron-netns -------------------------------------------------------------------------------


@contextlib.contextmanager
def netns_session(args, grid):
    """A :class:`daskpd._netns.NetnsCluster` of ``args.workers`` shaped to ``args.rate`` for
    one run: ``(cluster, client, the owners' threads, sample)``, ``sample()`` reading every
    link's byte counters (``{role: [sent, received]}``)."""
    from daskpd._netns import NetnsCluster

    cluster = NetnsCluster(n_workers=args.workers, rate=args.rate)
    with cluster, cluster.client(set_as_default=True) as client:

        def sample():
            return {role: [b.sent, b.received] for role, b in cluster.link_bytes().items()}

        yield cluster, client, _owners_threads(client, grid), sample


def _netns_run(path, alpha, grid, args):
    from daskpd.data import open_dataset
    from daskpd.problem import Problem
    from daskpd.solvers.tron import Tron, TronOptions

    data = open_dataset(path)
    with netns_session(args, grid) as (_, client, threads, sample):
        method, problem = Tron(), Problem("logistic", "l2", alpha)
        with RoundClock(sample) as clock:
            cpu, tick = _cpu_seconds(), time.perf_counter()
            state = method.init(problem, data, seed=np.random.SeedSequence(0), client=client,
                                options=TronOptions(grid=grid))  # fmt: skip
            init = time.perf_counter() - tick
            epoch = 0
            while not _reached(*method.certificate(state)) and epoch < args.cap:
                epoch += 1
                state = method.run_epoch(state, epoch)
            wall = time.perf_counter() - tick
            others = _others_cores(cpu, _cpu_seconds(), wall)
            counters = method.counters(state)
        rounds = clock.rounds()
    _check_counters(_counts(rounds), counters)
    per_round = []
    for kind, seconds, before, after in rounds:
        moved = {role: after[role][1] - before[role][1] for role in after}
        per_round.append({"kind": kind, "seconds": round(seconds, 5), "received": moved})
    share, cross = share_columns(data, grid, args.workers)
    return {"set": os.path.basename(path), "nnz": data.nnz, "n_samples": data.n_samples,
            "n_used": int(np.count_nonzero(np.asarray(data.col_nnz))), "n_share": share,
            "n_cross": cross, "kinds": _counts(rounds), "alpha": alpha,
            "grid": grid, "workers": args.workers, "rate": args.rate, "threads": threads,
            "init_seconds": init, "wall_to": wall, "epochs": epoch, "counters": counters,
            "others_cores": others,
            "reached": _reached(*method.certificate(state)), "rounds": per_round}  # fmt: skip


def tron_netns(args):
    rows = []
    for alpha in args.alphas:
        for grid in args.grids:
            row = _netns_run(args.data[0], alpha, grid, args)
            rows.append(row)
            moved = statistics.median(sum(r["received"].values()) for r in row["rounds"])
            print(
                f"alpha {alpha:g} K {grid}: {row['counters']} to the line in "
                f"{row['wall_to']:.2f} s; median round {moved / 1e6:.1f} MB",
                flush=True,
            )
    _write_json(args.out, {"command": "bench_cost_model.py tron-netns", "commit": _commit(),
                           "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows})  # fmt: skip


def add_parsers(parts):
    """The tron subcommands of ``bench_cost_model.py``."""
    floats = {"type": float, "nargs": "+"}
    runs = parts.add_parser("tron-runs", help="tron runs to the line on fresh clusters")
    runs.add_argument("--data", action="append", required=True)
    runs.add_argument("--tiny", action="append", help="sets of few nonzeros (fixed costs)")
    runs.add_argument("--alphas", default=[1e-5, 1e-4], **floats)
    runs.add_argument("--grids", type=int, nargs="+", default=[1, 2, 8])
    runs.add_argument("--repeats", type=int, default=3)
    runs.add_argument("--workers", type=int, default=2)
    runs.add_argument("--memory-limit", default="5GiB")
    runs.add_argument("--loopback-sizes", default="1e4,1e5,1e6,4e6")
    counts = parts.add_parser("tron-rounds", help="tron's rounds to the line by alpha")
    counts.add_argument("--data", action="append", required=True)
    counts.add_argument("--alphas", default=[1e-4, 1e-5, 1e-6, 1e-7], **floats)
    netns = parts.add_parser("tron-netns", help="tron on a namespace cluster")
    netns.add_argument("--data", action="append", required=True)
    netns.add_argument("--alphas", default=[1e-4], **floats)
    netns.add_argument("--grids", type=int, nargs="+", default=[2, 4])
    netns.add_argument("--workers", type=int, default=2)
    netns.add_argument("--rate", default="1gbit")
    for part, cap in ((runs, 60), (counts, 200), (netns, 60)):
        part.add_argument("--cap", type=int, default=cap, help="at most this many Newton steps")
        part.add_argument("--out", required=True)
    from cost_model_tron_report import NETNS_1GBIT, tron_report

    report = parts.add_parser("tron-report", help="fit, check and plan tron")
    report.add_argument("--runs", action="append", required=True, help="repeatable")
    report.add_argument("--max-others", type=float, default=0.15,
                        help="leave out runs during which other processes kept more cores "
                        "busy on average")  # fmt: skip
    report.add_argument("--netns", action="append", help="tron-netns files, repeatable")
    report.add_argument("--counts")
    report.add_argument("--job-alphas", default=[1e-8, 1e-7, 1e-6], **floats)
    report.add_argument("--machines", type=int, nargs="+", default=[16, 64])
    report.add_argument("--cores", type=int, default=32)
    report.add_argument("--memory-gib", type=float, default=256)
    report.add_argument("--bandwidth-gbit", type=float, default=10)
    report.add_argument(
        "--slow-threads",
        type=float,
        default=0.5,
        help="the slow case's thread exponent (assumed: 32 threads 5.7x)",
    )
    report.add_argument(
        "--link-share",
        type=float,
        default=NETNS_1GBIT[1] * 8 / 1e9,
        help="share of the link's rate a transfer gets (fitted at 1gbit)",
    )
    return {"tron-runs": tron_runs, "tron-rounds": tron_rounds, "tron-netns": tron_netns,
            "tron-report": tron_report}  # fmt: skip
