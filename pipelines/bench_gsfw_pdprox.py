"""Benchmarks of GSFW and Pdprox; writes the ``## GSFW and Pdprox`` section of BENCHMARKS.md.

Three experiments (issue 6):

1. L1-ball logistic regression, radius 5 (GSFW paper, eq. (25) and Table 3): sample-gradient
   counts, LMO calls and seconds to an optimality gap ``P(w) - P* <= 1e-5`` for GSFW (batch
   ``round(0.01 n)``, Theorem 3.1 steps with ``n -> n/b``), deterministic Frank-Wolfe (step
   ``2/(k+2)``) and SFW (batch ``min(k^2, n/2)``). Data: generated stand-ins with the shapes
   and densities of a9a, w8a, mushrooms, gisette, and the real StatLog DNA windows (donor vs
   rest, one-hot). ``P*`` comes from an accelerated projected-gradient run certified by its
   Frank-Wolfe (duality) gap.
2. Pdprox against subgradient descent and FOBOS (Pdprox paper, Figure 2): hinge + group lasso
   and absolute + group lasso on MEMset-like group features built from the DNA windows
   (1-, 2-, 3-position one-hot subsets of a 7-nucleotide window at the junction: 2,604
   features in 63 groups, unit rows). Objective against time.
3. Label noise (Pdprox paper, Table 1): a9a-shaped stand-in with 20% of the training labels
   flipped; Pdprox (hinge, ``R = ||w||^2/2``, ``alpha = 1/n``, dual budget ``m = 200``,
   stopped at duality gap 1e-3) against liblinear (``C = 1``, tol 1e-3): test accuracy, time.

Run::

    python pipelines/bench_gsfw_pdprox.py --write-markdown BENCHMARKS.md

``--quick`` shrinks every budget (a smoke run; its numbers are not the reported ones).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import sys
import time

import numpy as np
import scipy.sparse as sp

from daskpd.data import MemoryDataset
from daskpd.data.atomic import write_text_atomic
from daskpd.losses import Absolute, Hinge, Logistic
from daskpd.problem import Problem
from daskpd.regularizers import L2, GroupLasso, L1Ball, project_l1_ball
from daskpd.solvers.gsfw import GSFW, GSFWOptions, frank_wolfe, stochastic_frank_wolfe
from daskpd.solvers.pdprox import (
    Pdprox,
    PdproxOptions,
    fobos,
    pdprox_objective,
    subgradient_descent,
)

RADIUS = 5.0
TARGET = 1e-5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ----------------------------------------------------------------------------------------------
# data


def planted_binary(rng, n, p, nnz_per_row, *, flip=0.0):
    """Binary sparse rows (``nnz_per_row`` ones at random columns), labels of a planted model."""
    rows = np.repeat(np.arange(n), nnz_per_row)
    popularity = rng.dirichlet(np.full(p, 0.5))
    cols = np.concatenate([rng.choice(p, size=nnz_per_row, replace=False, p=popularity)
                           for _ in range(n)])  # fmt: skip
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, p))
    X.sum_duplicates()
    X.data[:] = 1.0
    truth = rng.standard_normal(p) * (rng.random(p) < 0.3)
    margin = X @ truth
    margin = (margin - margin.mean()) / (margin.std() + 1e-12)
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-3 * margin)), 1.0, -1.0)
    return X, y


def planted_dense(rng, n, p):
    """Dense features in [-1, 1] (gisette-like), labels of a planted sparse model."""
    X = np.clip(rng.standard_normal((n, p)) * 0.4, -1, 1)
    truth = rng.standard_normal(p) * (rng.random(p) < 0.02)
    margin = X @ truth
    margin = (margin - margin.mean()) / margin.std()
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-3 * margin)), 1.0, -1.0)
    return sp.csr_matrix(X), y


def dna_windows():
    from daskpd.generators import load_statlog_dna

    sequences, classes = load_statlog_dna(os.path.join(ROOT, "data", "statlog_dna.csv"))
    y = np.where(classes == "ei", 1.0, -1.0)
    return sequences, y


def dna_onehot():
    """StatLog DNA, donor (EI) vs rest, one-hot: 60 positions x 4 letters = 240 features."""
    sequences, y = dna_windows()
    letters = {c: k for k, c in enumerate("ACGT")}
    rows, cols = [], []
    for i, seq in enumerate(sequences):
        for pos, ch in enumerate(seq):
            if ch in letters:
                rows.append(i)
                cols.append(4 * pos + letters[ch])
    X = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sequences), 240))
    return X, y


def dna_memset_groups(start=27, width=7):
    """MEMset-like group features: one-hot of every 1-, 2-, 3-subset of a 7-letter window.

    7 x 4 + 21 x 16 + 35 x 64 = 2,604 features in 7 + 21 + 35 = 63 groups; rows are scaled to
    unit length (as the Pdprox paper does).
    """
    sequences, y = dna_windows()
    letters = {c: k for k, c in enumerate("ACGT")}
    subsets = [s for r in (1, 2, 3) for s in itertools.combinations(range(width), r)]
    offsets, groups, total = [], [], 0
    for subset in subsets:
        size = 4 ** len(subset)
        offsets.append(total)
        groups.append(list(range(total, total + size)))
        total += size
    rows, cols = [], []
    for i, seq in enumerate(sequences):
        window = seq[start : start + width]
        for offset, subset in zip(offsets, subsets, strict=True):
            if all(window[k] in letters for k in subset):
                code = 0
                for k in subset:
                    code = 4 * code + letters[window[k]]
                rows.append(i)
                cols.append(offset + code)
    X = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sequences), total))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1 / np.maximum(norms, 1e-12)) @ X
    return sp.csr_matrix(X), y, groups


GSFW_DATA = {
    # name: (builder, description)
    "a9a-like": (lambda rng: planted_binary(rng, 32561, 123, 14), "binary, 14 nnz/row"),
    "w8a-like": (lambda rng: planted_binary(rng, 49749, 300, 12), "binary, 12 nnz/row"),
    "mushrooms-like": (lambda rng: planted_binary(rng, 8124, 112, 21), "binary, 21 nnz/row"),
    "gisette-like": (lambda rng: planted_dense(rng, 6000, 5000), "dense in [-1, 1]"),
    "dna (real)": (lambda rng: dna_onehot(), "one-hot, donor vs rest"),
}


# ----------------------------------------------------------------------------------------------
# experiment 1: L1-ball logistic regression


def logistic_objective(X, y, w):
    return float(np.mean(np.logaddexp(0.0, -y * (X @ w))))


def logistic_gradient(X, y, w):
    return X.T @ (-y / (1.0 + np.exp(y * (X @ w)))) / X.shape[0]


def reference_optimum(X, y, max_iterations, tol=1e-10, time_limit=None):
    """``P*`` by FISTA with projection onto the L1 ball and restarts; certified by the FW gap.

    Returns (P(w_ref), certificate) with ``P* in [P(w_ref) - certificate, P(w_ref)]``.
    """
    n = X.shape[0]
    v = np.random.default_rng(0).standard_normal(X.shape[1])
    for _ in range(30):
        v = X.T @ (X @ v)
        v /= np.linalg.norm(v)
    lipschitz = float(np.linalg.norm(X.T @ (X @ v))) / (4 * n) * 1.05
    w = np.zeros(X.shape[1])
    z, t, best = w.copy(), 1.0, math.inf
    certificate = math.inf
    start = time.perf_counter()
    for k in range(max_iterations):
        if time_limit is not None and time.perf_counter() - start > time_limit:
            break
        w_next = project_l1_ball(z - logistic_gradient(X, y, z) / lipschitz, RADIUS)
        value = logistic_objective(X, y, w_next)
        if value > best:  # adaptive restart keeps FISTA monotone
            z, t = w.copy(), 1.0
            continue
        best = value
        t_next = (1 + math.sqrt(1 + 4 * t * t)) / 2
        z = w_next + (t - 1) / t_next * (w_next - w)
        w, t = w_next, t_next
        if k % 25 == 0:
            g = logistic_gradient(X, y, w)
            certificate = float(g @ w + RADIUS * np.abs(g).max())
            if certificate <= tol:
                break
    g = logistic_gradient(X, y, w)
    certificate = float(g @ w + RADIUS * np.abs(g).max())
    return logistic_objective(X, y, w), certificate


def run_gsfw(X, y, p_star, time_limit, seed, evals_per_pass=4):
    data = MemoryDataset(X, y, rows_per_block=X.shape[0])
    problem = Problem(Logistic(), L1Ball(radius=RADIUS), 1.0)
    b = max(1, round(0.01 * X.shape[0]))
    options = GSFWOptions(
        batch_size=b, iterations_per_epoch=max(1, round(X.shape[0] / b / evals_per_pass)),
        refresh_every=0,
    )  # fmt: skip
    method = GSFW()
    start = time.perf_counter()
    state = method.init(
        problem, data, seed=np.random.SeedSequence(seed), client=None, options=options
    )
    seconds = time.perf_counter() - start
    epoch = 0
    while seconds < time_limit:
        epoch += 1
        tick = time.perf_counter()
        state = method.run_epoch(state, epoch)
        seconds += time.perf_counter() - tick
        gap = logistic_objective(X, y, method.averaged_w(state)) - p_star
        if gap <= TARGET:
            counts = method.counters(state)
            return {"reached": True, "seconds": seconds, "grads": counts["sample_gradients"],
                    "lmo": counts["lmo_calls"], "gap": gap}  # fmt: skip
    counts = method.counters(state)
    return {"reached": False, "seconds": seconds, "grads": counts["sample_gradients"],
            "lmo": counts["lmo_calls"], "gap": gap}  # fmt: skip


def first_below(records, X, y, p_star):
    gap = math.inf
    for record in records:
        gap = logistic_objective(X, y, record["w"]) - p_star
        if gap <= TARGET:
            return {
                "reached": True,
                "seconds": record["seconds"],
                "grads": record["sample_gradients"],
                "lmo": record["lmo_calls"],
                "gap": gap,
            }
    last = records[-1]
    return {"reached": False, "seconds": last["seconds"], "grads": last["sample_gradients"],
            "lmo": last["lmo_calls"], "gap": gap}  # fmt: skip


def experiment_gsfw(quick, repeats, seconds):
    out = {}
    for name, (builder, description) in GSFW_DATA.items():
        if quick and name in ("gisette-like", "w8a-like"):
            continue
        X, y = builder(np.random.default_rng(0))
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sort_indices()
        n = X.shape[0]
        budget = 10 if quick else seconds
        p_star, certificate = reference_optimum(X, y, 200 if quick else 4000, time_limit=90)
        # Keep P* as low as any method gets (the paper's "best solution" rule), certified.
        rows = {"description": description, "n": n, "p": X.shape[1], "p_star": p_star,
                "p_star_certificate": certificate}  # fmt: skip
        # gisette-like is 30M nonzeros: one GSFW seed only, to fit the machine's time.
        seeds = range(1 if name == "gisette-like" else repeats)
        runs = [run_gsfw(X, y, p_star, budget, seed) for seed in seeds]
        rows["gsfw"] = _median_run(runs)
        fw_every = 1
        fw = frank_wolfe(X, y, Logistic(), RADIUS, max_iterations=100000,
                         record_every=fw_every, time_limit=budget)  # fmt: skip
        rows["fw"] = first_below(fw, X, y, p_star)
        sfw = stochastic_frank_wolfe(X, y, Logistic(), RADIUS, max_iterations=10**7,
                                     record_every=25, time_limit=budget)  # fmt: skip
        rows["sfw"] = first_below(sfw, X, y, p_star)
        out[name] = rows
        print(name, json.dumps({k: v for k, v in rows.items()}, default=float), flush=True)
    return out


def _median_run(runs):
    reached = [r for r in runs if r["reached"]]
    pool = reached if len(reached) == len(runs) else runs
    order = sorted(pool, key=lambda r: r["seconds"])
    mid = order[len(order) // 2]
    return {**mid, "repeats": len(runs), "reached_count": len(reached),
            "seconds_all": [round(r["seconds"], 3) for r in runs]}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# experiment 2: Pdprox vs subgradient descent and FOBOS (group lasso)


def run_pdprox_timed(X, y, loss, regularizer, alpha, n_iterations, per_epoch=20):
    data = MemoryDataset(X, y)
    problem = Problem(loss, regularizer, alpha)
    options = PdproxOptions(iterations_per_epoch=per_epoch)
    method = Pdprox()
    tick = time.perf_counter()
    state = method.init(problem, data, seed=np.random.SeedSequence(0), client=None,
                        options=options)  # fmt: skip
    seconds = time.perf_counter() - tick
    trace = [(0.0, pdprox_objective(X, y, loss, regularizer, alpha, np.zeros(X.shape[1])))]
    for epoch in range(1, n_iterations // per_epoch + 1):
        tick = time.perf_counter()
        state = method.run_epoch(state, epoch)
        seconds += time.perf_counter() - tick
        it = method.iterate(state)
        trace.append((seconds, pdprox_objective(X, y, loss, regularizer, alpha, it.w)))
    return trace


def run_baseline_timed(method, X, y, loss, regularizer, alpha, n_iterations, step):
    trace = [(0.0, pdprox_objective(X, y, loss, regularizer, alpha, np.zeros(X.shape[1])))]
    clock = {"seconds": 0.0, "tick": time.perf_counter()}

    def record(t, w):
        clock["seconds"] += time.perf_counter() - clock["tick"]
        if t % 20 == 0:
            trace.append((clock["seconds"], pdprox_objective(X, y, loss, regularizer, alpha, w)))
        clock["tick"] = time.perf_counter()

    method(X, y, loss, regularizer, alpha, n_iterations=n_iterations, step=step, record=record)
    return trace


def experiment_group_lasso(quick):
    X, y, groups = dna_memset_groups()
    reg = GroupLasso(groups=groups)
    n_iterations = 200 if quick else 2000
    out = {"n": X.shape[0], "p": X.shape[1], "groups": len(groups)}
    for loss_name, loss in (("hinge", Hinge()), ("absolute", Absolute())):
        for alpha in (1e-3, 1e-5):
            key = f"{loss_name}, alpha={alpha:g}"
            row = {"pdprox": run_pdprox_timed(X, y, loss, reg, alpha, n_iterations)}
            for name, method in (("gd", subgradient_descent), ("fobos", fobos)):
                # Step tuned over a grid (the paper tunes over 2^[-10:10] x a base value),
                # by the final objective of a short run; then the full run is timed.
                best_step, best_value = None, math.inf
                for step in 2.0 ** np.arange(-4, 9):
                    w = method(X, y, loss, reg, alpha, n_iterations=100, step=float(step))
                    value = pdprox_objective(X, y, loss, reg, alpha, w)
                    if value < best_value:
                        best_step, best_value = float(step), value
                row[name] = run_baseline_timed(method, X, y, loss, reg, alpha, n_iterations,
                                               best_step)  # fmt: skip
                row[f"{name}_step"] = best_step
            out[key] = row
            print(key, {k: (v[-1] if isinstance(v, list) else v) for k, v in row.items()},
                  flush=True)  # fmt: skip
    return out


# ----------------------------------------------------------------------------------------------
# experiment 3: 20% label noise, Pdprox with a dual budget vs liblinear


def budget_gap(X, y, w, dual, alpha, budget):
    n = X.shape[0]
    hinge = np.maximum(0.0, 1.0 - y * (X @ w))
    m = int(budget)
    top = np.sort(hinge)[::-1]
    primal = (top[:m].sum() + (budget - m) * (top[m] if m < n else 0)) / n
    primal += alpha / 2 * w @ w
    v = X.T @ (dual * y)
    dual_value = dual.sum() / n - v @ v / (2 * alpha * n**2)
    return primal - dual_value


def run_pdprox_budget(X, y, budget, tol=1e-3, per_epoch=10, max_seconds=120):
    n = X.shape[0]
    alpha = 1.0 / n
    data = MemoryDataset(X, y)
    problem = Problem(Hinge(), L2(), alpha)
    options = PdproxOptions(iterations_per_epoch=per_epoch, budget=budget, report="average")
    method = Pdprox()
    tick = time.perf_counter()
    state = method.init(problem, data, seed=np.random.SeedSequence(0), client=None,
                        options=options)  # fmt: skip
    seconds = time.perf_counter() - tick
    epoch, gap = 0, math.inf
    while seconds < max_seconds:
        epoch += 1
        tick = time.perf_counter()
        state = method.run_epoch(state, epoch)
        seconds += time.perf_counter() - tick
        it = method.iterate(state)
        dual = -y * np.concatenate(it.z)  # hinge: z = -y a, so a = -y z (averaged)
        gap = budget_gap(X, y, it.w, dual, alpha, budget)
        if gap <= tol:
            break
    return it.w, seconds, gap, epoch * per_epoch


def experiment_label_noise(quick, trials):
    from daskpd.bench.peers import fit_liblinear

    rows = []
    for trial in range(trials):
        rng = np.random.default_rng(100 + trial)
        n_train, n_test = (8000, 4000) if quick else (32561, 16281)
        X, y = planted_binary(rng, n_train + n_test, 123, 14)
        X_train, y_train = X[:n_train], y[:n_train].copy()
        X_test, y_test = X[n_train:], y[n_train:]
        flip = rng.random(n_train) < 0.2
        y_train[flip] *= -1
        limit = 20 if quick else 60
        w, seconds, gap, iterations = run_pdprox_budget(X_train, y_train, 200.0, max_seconds=limit)
        acc = float(np.mean(np.sign(X_test @ w) == y_test))
        w4, seconds4, gap4, iterations4 = run_pdprox_budget(
            X_train, y_train, 200.0, tol=1e-4, max_seconds=limit
        )
        acc4 = float(np.mean(np.sign(X_test @ w4) == y_test))
        lib = fit_liblinear(X_train, y_train, 1.0 / n_train, loss="hinge", tol=1e-3)
        lib_acc = float(np.mean(np.sign(X_test @ lib.coef) == y_test))
        clean = fit_liblinear(X_train, y[:n_train], 1.0 / n_train, loss="hinge", tol=1e-3)
        clean_acc = float(np.mean(np.sign(X_test @ clean.coef) == y_test))
        rows.append({"pdprox_seconds": seconds, "pdprox_acc": acc, "pdprox_gap": gap,
                     "pdprox4_seconds": seconds4, "pdprox4_acc": acc4, "pdprox4_gap": gap4,
                     "pdprox4_iterations": iterations4,
                     "pdprox_iterations": iterations, "liblinear_seconds": lib.seconds,
                     "liblinear_acc": lib_acc, "clean_liblinear_acc": clean_acc})  # fmt: skip
        print("label noise trial", trial, rows[-1], flush=True)
    return rows


# ----------------------------------------------------------------------------------------------
# markdown


def _fmt_time(run):
    return (
        f"{run['seconds']:.2f}"
        if run["reached"]
        else f"> {run['seconds']:.0f} (gap {run['gap']:.1e})"
    )


def reaches_with_fewer(first, second, key):
    """Whether ``first`` reached the target with fewer ``key`` (sample gradients, LMO calls)
    than ``second``: ``True``, ``False``, or ``None`` when the data do not decide (the one that
    missed the target stopped having spent fewer than the other used, so how many it needs
    is not known)."""
    if first["reached"] and second["reached"]:
        return first[key] < second[key]
    if first["reached"]:  # second missed: decided only if it spent at least first's count
        return True if second[key] >= first[key] else None
    if second["reached"] and first[key] >= second[key]:
        return False
    return None


def fewer_gradients(gsfw, fw):
    """GSFW reached the target with fewer sample gradients than FW (:func:`reaches_with_fewer`)."""
    return reaches_with_fewer(gsfw, fw, "grads")


def fewer_lmo_calls(gsfw, fw):
    """FW reached the target with fewer LMO calls than GSFW (:func:`reaches_with_fewer`)."""
    return reaches_with_fewer(fw, gsfw, "lmo")


def _findings(results):
    """Findings computed from the rows: counts of the data sets where each relation holds,
    where it does not, and where the data do not decide it."""
    gs = results["gsfw"]

    def count(relation):
        verdicts = {name: relation(row["gsfw"], row["fw"]) for name, row in gs.items()}
        held = [name for name, v in verdicts.items() if v is True]
        undecided = [name for name, v in verdicts.items() if v is None]
        text = f"{len(held)} of {len(gs)} data sets ({', '.join(held) or 'none'})"
        if undecided:
            names = ", ".join(undecided)
            text += f", undecided on {len(undecided)} ({names}: a method missed the target)"
        return text

    sfw = [n for n, r in gs.items() if r["sfw"]["reached"]]
    return [
        "",
        "Findings (computed from the rows above): GSFW reached 1e-5 with fewer sample "
        f"gradients than deterministic FW on {count(fewer_gradients)} (the paper's Table 3 "
        f"relation); FW reached it with fewer LMO calls than GSFW on {count(fewer_lmo_calls)}; "
        f"SFW reached 1e-5 within the time cap on {len(sfw)} of {len(gs)}"
        + (f" ({', '.join(sfw)})" if sfw else "")
        + ".",
    ]


def markdown(results, command, contention):
    lines = [
        "Measured on the shared 2-core machine"
        + (
            " **under contention** (other engineers' jobs were running; load average "
            f"{contention}); seconds are indicative only."
            if contention
            else "."
        ),
        "",
        "Commands (the JSON file collects the experiments; the last one writes this section):",
        "",
        *[f"    {c}" for c in command],
        "",
        "### L1-ball logistic regression (radius 5): work to reach P(w) - P* <= 1e-5",
        "",
        "Data: **generated stand-ins** with the shapes and densities of a9a, w8a, mushrooms and "
        "gisette (planted sparse logistic model; the LIBSVM files cannot be downloaded here), "
        "and the **real** StatLog DNA windows (`data/statlog_dna.csv`, donor (EI) vs rest, "
        "one-hot). P* from projected FISTA, certified by its Frank-Wolfe gap (column `cert.`: "
        "P* is within that of the value used). GSFW: batch round(0.01 n), Theorem 3.1 steps "
        "with n -> n/b, one row block (the exact Algorithm 1), gap checked every quarter pass, "
        "median of the runs over seeds (seconds of every run in brackets). FW: step 2/(k+2), "
        "n sample gradients per LMO call. SFW: batch min(k^2, n/2) without replacement, step "
        "2/(k+1), the same time cap as the others. Sample gradients count d^0 for GSFW. "
        "Seconds exclude the objective evaluations used to detect the target; GSFW seconds "
        "include one Dask compute per quarter pass (the driver-protocol path), FW and SFW are "
        "plain in-memory numba loops.",
        "",
        "| data | n x p | cert. | GSFW grads (x1e6) | GSFW LMO | GSFW s | FW grads (x1e6) "
        "| FW LMO | FW s | SFW grads (x1e6) | SFW s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in results["gsfw"].items():
        g, f, s = row["gsfw"], row["fw"], row["sfw"]
        lines.append(
            f"| {name} | {row['n']} x {row['p']} | {row['p_star_certificate']:.0e} "
            f"| {g['grads'] / 1e6:.2f}{'' if g['reached'] else ' (not reached)'} | {g['lmo']} "
            f"| {_fmt_time(g)} {g['seconds_all']} "
            f"| {f['grads'] / 1e6:.2f}{'' if f['reached'] else ' (not reached)'} | {f['lmo']} "
            f"| {_fmt_time(f)} | {s['grads'] / 1e6:.2f}{'' if s['reached'] else ' (not reached)'} "
            f"| {_fmt_time(s)} |"
        )
    lines += _findings(results)
    gl = results["group_lasso"]
    lines += [
        "",
        "### Pdprox vs subgradient descent (gd) and FOBOS: group lasso, objective against time",
        "",
        f"Data: MEMset-like group features from the real DNA windows ({gl['n']} rows, "
        f"{gl['p']} features in {gl['groups']} groups: one-hot of every 1-, 2-, 3-position subset "
        "of the 7 nucleotides at the junction, rows scaled to unit length), donor vs rest. "
        "Pdprox: Algorithm 1, double-dual, gamma = 1/sqrt(2c) from the power-iteration ||X|| "
        "(no tuning), through the Dask solver (20 iterations per compute), last iterate. gd and "
        "FOBOS: deterministic full-batch, step s/sqrt(t) with s tuned over 2^-4..2^8 on "
        "100-iteration runs. 2,000 iterations each; objective P(w) at the given seconds.",
        "",
        "| problem | method | P at ~10% of the run | P at ~50% | P at end | seconds |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key, row in gl.items():
        if not isinstance(row, dict):
            continue
        for name in ("pdprox", "gd", "fobos"):
            trace = row[name]
            pick = [trace[max(1, len(trace) // 10)], trace[len(trace) // 2], trace[-1]]
            step = f" (s={row[name + '_step']:g})" if name != "pdprox" else ""
            lines.append(
                f"| {key} | {name}{step} | {pick[0][1]:.6f} @ {pick[0][0]:.2f}s "
                f"| {pick[1][1]:.6f} @ {pick[1][0]:.2f}s | {pick[2][1]:.6f} | {pick[2][0]:.2f} |"
            )
    problems = {k: row for k, row in gl.items() if isinstance(row, dict)}
    best = [
        k
        for k, row in problems.items()
        if row["pdprox"][-1][1] <= min(row["gd"][-1][1], row["fobos"][-1][1])
    ]
    # Pdprox's margin: how far below the better of the other two it ends, relative
    margins = {
        k: (min(row["gd"][-1][1], row["fobos"][-1][1]) - row["pdprox"][-1][1])
        / abs(min(row["gd"][-1][1], row["fobos"][-1][1]))
        for k, row in problems.items()
    }
    widest = max(margins, key=margins.get) if margins else None
    # every method runs the same iterations: its end time is its cost of them
    run_seconds = {
        name: float(np.median([row[name][-1][0] for row in problems.values()]))
        for name in ("pdprox", "gd", "fobos")
        if problems
    }
    lines += [
        "",
        f"Findings (computed from the rows above): Pdprox (untuned step) ends lowest on "
        f"{len(best)} of {len(problems)} problems after the same number of iterations"
        + (
            f"; its margin over the better of gd and FOBOS is widest on {widest} "
            f"({margins[widest]:+.2%}; the paper's Figure 2 has it on the absolute loss)"
            if widest is not None
            else ""
        )
        + (
            "; median seconds of the same iterations: "
            + ", ".join(f"{name} {value:.3g}" for name, value in run_seconds.items())
            if run_seconds
            else ""
        )
        + ".",
    ]
    noise = results["label_noise"]
    med = {k: float(np.median([r[k] for r in noise])) for k in noise[0]}
    lines += [
        "",
        "### 20% label noise: Pdprox (dual budget) vs liblinear",
        "",
        "Data: a9a-shaped stand-in (32,561 training rows, 16,281 test rows, 123 binary "
        "features, planted model), 20% of the training labels flipped, clean test labels. "
        "Pdprox: hinge + ||w||^2/2, alpha = 1/n, dual budget m = 200 (Section 5.5), Algorithm 1 "
        "through the Dask solver (10 iterations per compute), averaged iterates, stopped at "
        "duality gap <= 1e-3 of the budget problem (the paper's rule; the objective is only "
        "about 1e-2 here, so this is loose) and, second row, at 1e-4 (60 s cap). liblinear: "
        "LinearSVC (dual CD, hinge), C = 1, tol 1e-3, no intercept. "
        f"Median over {len(noise)} trials (different flips).",
        "",
        "| method | test accuracy | seconds |",
        "| --- | --- | --- |",
        f"| Pdprox (m = 200) | {med['pdprox_acc']:.4f} | {med['pdprox_seconds']:.2f} "
        f"({med['pdprox_iterations']:.0f} iterations, final gap {med['pdprox_gap']:.1e}) |",
        f"| Pdprox (m = 200), gap <= 1e-4 | {med['pdprox4_acc']:.4f} "
        f"| {med['pdprox4_seconds']:.2f} ({med['pdprox4_iterations']:.0f} iterations, final gap "
        f"{med['pdprox4_gap']:.1e}) |",
        f"| liblinear (C = 1) | {med['liblinear_acc']:.4f} | {med['liblinear_seconds']:.2f} |",
        f"| liblinear on clean labels (reference) | {med['clean_liblinear_acc']:.4f} | |",
        "",
        "Finding (computed from the medians above): on this stand-in the paper's Table 1 "
        "relation (Pdprox with a dual budget more accurate than liblinear under label noise) "
        "is "
        + ("reproduced" if med["pdprox4_acc"] > med["liblinear_acc"] else "**not** reproduced")
        + f": {med['pdprox4_acc']:.4f} vs {med['liblinear_acc']:.4f} (median). Observation "
        "(not measured here): the flips are uniform over a planted linear model, which a hinge "
        "SVM may tolerate better than the paper's real a9a/rcv1/covtype, which cannot be "
        "downloaded here.",
    ]
    return "\n".join(lines)


def write_section(path, text):
    with open(path) as handle:
        content = handle.read()
    pattern = re.compile(r"(## GSFW and Pdprox\n)(.*?)(<!-- end: gsfw-pdprox -->)", re.S)
    if not pattern.search(content):
        raise SystemExit(f"markers of the GSFW and Pdprox section not found in {path}")
    content = pattern.sub(lambda m: m.group(1) + "\n" + text + "\n" + m.group(3), content)
    write_text_atomic(path, content)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small budgets (smoke run)")
    parser.add_argument("--repeats", type=int, default=3, help="GSFW seeds per data set")
    parser.add_argument("--trials", type=int, default=3, help="label-noise trials")
    parser.add_argument("--seconds", type=float, default=60.0, help="time cap per GSFW/FW run")
    parser.add_argument("--json", default=None, help="raw results (read, merged, written)")
    parser.add_argument("--write-markdown", default=None, help="BENCHMARKS.md to update")
    parser.add_argument(
        "--only",
        choices=["gsfw", "group_lasso", "label_noise", "none"],
        default=None,
        help="run one experiment (results merge into --json); none: only rewrite the markdown",
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    results = {}
    if args.json and os.path.exists(args.json):
        with open(args.json) as handle:
            results = json.load(handle)
    if args.only in (None, "gsfw"):
        results["gsfw"] = experiment_gsfw(args.quick, args.repeats, args.seconds)
    if args.only in (None, "group_lasso"):
        results["group_lasso"] = experiment_group_lasso(args.quick)
    if args.only in (None, "label_noise"):
        results["label_noise"] = experiment_label_noise(args.quick, args.trials)
    if args.only != "none":
        results.setdefault("load", []).append(load)
    invocation = "python pipelines/bench_gsfw_pdprox.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    if args.only != "none":
        results.setdefault("commands", []).append(invocation.strip())
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, default=float)
    if args.write_markdown and all(k in results for k in ("gsfw", "group_lasso", "label_noise")):
        command = results.get("commands") or [invocation.strip()]
        loads = results["load"]
        contention = f"{min(loads):.1f}-{max(loads):.1f} at start" if max(loads) > 2.5 else ""
        write_section(args.write_markdown, markdown(results, command, contention))


if __name__ == "__main__":
    main()
