"""Many machines: rounds and passes to a certified ``(1 + 1e-3) P*`` as the row groups grow,
and the wall time of the default solver on several groups against one.

Two parts, both on the splice-like sets of ``daskpd bench`` (made once in ``--workdir``):

``rounds``
    For each loss, alpha and ``K`` in ``--grids``: the new method (``tron``) and CoCoA+
    (``cocoa``, the safe ``sigma' = K``) on ``K`` row groups, in this process (rounds and
    passes do not depend on the number of machines, only on ``K``). A run has reached the
    line at its first certificate with ``gap <= 1e-3 * dual`` (so ``P(w) <= (1 + 1e-3) D <=
    (1 + 1e-3) P*``). Rounds are reductions of d-vectors (CoCoA+: one a round; tron: one a CG
    step, one for the gradient, plus the line search's rounds of numbers, counted too);
    passes are reads of every row's nonzeros (CoCoA+'s shrunk passes over the active rows
    are not counted).

``wall``
    On a fresh 2-worker LocalCluster per run (``--repeats`` runs in turn): the default solver
    on ``--groups`` row groups (``solver="auto", grid=K``), the same method on one group, and
    the one-group default (CoCoA+); the wall time of the user's call (the data on disk, the
    cluster up), stopped by a callback at its first certificate within the line, until it
    returns with w gathered.

Usage::

    python pipelines/bench_many_machines.py rounds --nnz 1e8 --grids 1 2 4 8 16
    python pipelines/bench_many_machines.py wall --nnz 1e8 --groups 8 --repeats 3

Prints a Markdown table; ``--json PATH`` also writes the rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

LINE = 1e-3
#: the validated alphas of the peers tables (BENCHMARKS.md), by loss and scale
VALIDATED = {("hinge", 1e7): 1e-2, ("hinge", 1e8): 1e-3,
             ("logistic", 1e7): 1e-3, ("logistic", 1e8): 1e-4}  # fmt: skip


def _data(workdir, nnz):
    from daskpd.bench import BenchConfig
    from daskpd.bench.data import datasets

    return datasets(BenchConfig(workdir=workdir), nnz)[0]


def _reached(primal, dual):
    return dual > 0 and primal - dual <= LINE * dual


def _exact_rounds(name, data, loss, alpha, grid, max_epochs):
    """Rounds and passes of an exact-product method (``tron`` or ``dual_newton``) to the
    line, stepping it epoch by epoch in this process."""
    from daskpd.problem import Problem
    from daskpd.solvers.driver.registry import get_solver

    solver = get_solver(name)
    method, problem = solver, Problem(loss, "l2", alpha)
    started = time.perf_counter()
    state = method.init(
        problem, data, seed=np.random.SeedSequence(0), client=None,
        options=solver.Options(grid=grid),
    )  # fmt: skip
    for epoch in range(1, max_epochs + 1):
        if _reached(*method.certificate(state)):
            counts = method.counters(state)
            return {"epochs": epoch - 1, **counts, "seconds": time.perf_counter() - started}
        state = method.run_epoch(state, epoch)
    counts = method.counters(state)
    primal, dual = method.certificate(state)
    return {"epochs": None, **counts, **_left(primal, dual),
            "seconds": time.perf_counter() - started}  # fmt: skip


def _cocoa_rounds(data, loss, alpha, grid, max_rounds):
    from daskpd.solvers import solve

    started = time.perf_counter()
    result = solve(
        data, loss=loss, alpha=alpha, solver="cocoa", grid=grid, tol=0.0,
        max_epochs=max_rounds, eval_every=max_rounds, client=False,
    )  # fmt: skip
    for row in result.history:
        if _reached(row["primal"], row["dual"]):
            # the certificate of round t's start comes with round t's pass: t - 1 rounds
            # moved w, and t passes were read
            return {"epochs": row["epoch"], "rounds": row["epoch"], "passes": row["epoch"],
                    "seconds": row["wall_seconds"]}  # fmt: skip
    last = result.history[-1]
    return {"epochs": None, "rounds": last["epoch"], "passes": last["epoch"],
            **_left(last["primal"], last["dual"]),
            "seconds": time.perf_counter() - started}  # fmt: skip


#: the losses each exact-product method supports (its Capabilities)
_EXACT_LOSSES = {
    "tron": ("logistic", "squared", "squared_hinge", "smooth_hinge"),
    "dual_newton": ("hinge",),
}


def _left(primal, dual):
    """A run short of the line: its last certified gap, as a share of its dual (of its
    primal where the dual is not positive)."""
    if dual > 0:
        return {"left": (primal - dual) / dual, "left_of": "D", "primal": primal, "dual": dual}
    return {"left": (primal - dual) / primal, "left_of": "P, D <= 0", "primal": primal,
            "dual": dual}  # fmt: skip


def _cell(row):
    if row is None:
        return "not supported"
    if row["epochs"] is None:
        return f"not in {row['rounds']} (gap {row['left']:.1%} of {row['left_of']})"
    passes = row["passes"]
    passes = f"{passes:.3g}" if isinstance(passes, float) else passes
    return f"{row['rounds']} / {passes}"


def _alphas(args, loss):
    """``--alphas``, else alpha 1e-5 and the peers tables' validated alpha."""
    return tuple(args.alphas) if args.alphas else (1e-5, VALIDATED[(loss, args.nnz)])


def rounds(args):
    data = _data(args.workdir, args.nnz)
    rows = []
    print(f"Splice-like, {data.n_samples} x {data.n_features}, {data.nnz:.3g} nonzeros; "
          "rounds / passes to a certified (1 + 1e-3) P*; in-process, measured\n")  # fmt: skip
    for loss in args.losses:
        for alpha in _alphas(args, loss):
            print(f"### {loss}, alpha = {alpha:g}\n")
            print("| method | " + " | ".join(f"K = {k}" for k in args.grids) + " |")
            print("| --- |" + " --- |" * len(args.grids))
            for method in args.methods:
                cells = []
                for grid in args.grids:
                    if method != "cocoa" and loss not in _EXACT_LOSSES[method]:
                        row = None
                    elif method != "cocoa":
                        row = _exact_rounds(method, data, loss, alpha, grid, args.max_epochs)
                    else:
                        row = _cocoa_rounds(data, loss, alpha, grid, args.max_rounds)
                    rows.append({"loss": loss, "alpha": alpha, "method": method, "grid": grid,
                                 "row": row})  # fmt: skip
                    cells.append(_cell(row))
                print(f"| {method} | " + " | ".join(cells) + " |", flush=True)
            print()
    return rows


def _stop_at_the_line(info):
    """Stop the run at its first certificate within the line (the call then gathers w)."""
    row = info.row
    return row is not None and _reached(row["primal"], row["dual"])


def _first_line_seconds(result):
    for row in result.history:
        if _reached(row["primal"], row["dual"]):
            return row["wall_seconds"]
    return None


def wall(args):
    from distributed import Client, LocalCluster

    from daskpd.solvers import solve
    from daskpd.solvers.driver.auto import auto_solver

    data = _data(args.workdir, args.nnz)
    rows = []
    for loss in args.losses:
        many = auto_solver(loss, "l2", grid=args.groups)
        # the default on K groups, the same method on one, the one-group default
        cases = list(dict.fromkeys([(many, args.groups), (many, 1), ("auto", None)]))
        for alpha in _alphas(args, loss):
            times = {case: [] for case in cases}
            solvers = {}
            for _ in range(args.repeats):
                for solver, grid in cases:
                    options = {} if grid is None else {"grid": grid}
                    with LocalCluster(n_workers=2, threads_per_worker=1,
                                      dashboard_address="127.0.0.1:0") as cluster, \
                            Client(cluster) as client:  # fmt: skip
                        started = time.perf_counter()
                        result = solve(
                            data, loss=loss, alpha=alpha, solver=solver, client=client,
                            tol=0.0, max_epochs=args.max_epochs, eval_every=args.max_epochs,
                            callbacks=[_stop_at_the_line], **options,
                        )  # fmt: skip
                        # the user's call: it returns once w is gathered
                        whole = time.perf_counter() - started
                    solvers[(solver, grid)] = result.solver
                    reached = _first_line_seconds(result) is not None
                    times[(solver, grid)].append(whole if reached else None)
                    print(f"  {loss} {alpha:g} {solver} grid={grid}: {result.solver}, "
                          f"{result.n_epochs} epochs, reached={reached}, call {whole:.2f} s",
                          file=sys.stderr)  # fmt: skip
            for case in cases:
                reached = [t for t in times[case] if t is not None]
                median = statistics.median(reached) if len(reached) == len(times[case]) else None
                rows.append({"loss": loss, "alpha": alpha, "solver": case[0],
                             "grid": case[1], "ran": solvers[case], "seconds": times[case],
                             "median": median})  # fmt: skip
    print("| loss | alpha | call | method run | seconds of the call (runs) | median |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        runs = ", ".join("-" if t is None else f"{t:.2f}" for t in row["seconds"])
        median = "not reached" if row["median"] is None else f"{row['median']:.2f}"
        grid = "one group" if row["grid"] is None else f"grid={row['grid']}"
        print(f"| {row['loss']} | {row['alpha']:g} | {row['solver']}, {grid} | {row['ran']} "
              f"| {runs} | {median} |")  # fmt: skip
    ratios = {}
    for row in rows:
        ratios.setdefault((row["loss"], row["alpha"]), {})[(row["solver"], row["grid"])] = row
    print()
    for (loss, alpha), group in ratios.items():
        method = auto_solver(loss, "l2", grid=args.groups)
        many, one = group[(method, args.groups)], group[(method, 1)]
        if many["median"] is None or one["median"] is None:
            print(f"- {loss}, alpha {alpha:g}: {method} on {args.groups} groups against one: "
                  "not computed (a run did not reach the line)")  # fmt: skip
            continue
        ratio = many["median"] / one["median"]
        print(f"- {loss}, alpha {alpha:g}: {method} on {args.groups} groups takes {ratio:.2f}x "
              f"its time on one group (line: at most 2x: "
              f"{'met' if many['median'] <= 2 * one['median'] else 'not met'})")  # fmt: skip
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("rounds", "wall"))
    parser.add_argument("--nnz", type=float, default=1e8)
    parser.add_argument("--workdir", default="bench-data")
    parser.add_argument("--losses", nargs="+", default=["hinge", "logistic"])
    parser.add_argument("--alphas", nargs="+", type=float)
    parser.add_argument("--grids", nargs="+", type=int, default=[1, 2, 4, 8, 16])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--max-rounds", type=int, default=100)
    parser.add_argument("--max-epochs", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--methods", nargs="+", default=["tron", "dual_newton", "cocoa"],
                        choices=("tron", "dual_newton", "cocoa"))
    args = parser.parse_args(argv)
    rows = rounds(args) if args.part == "rounds" else wall(args)
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(rows, stream, indent=1, default=str)


if __name__ == "__main__":
    main()
