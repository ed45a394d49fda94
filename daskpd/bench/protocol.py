"""The benchmark protocol: P*, the suboptimality ladder, true medians, computed target lines.

Everything here is a pure function of measured runs; nothing runs a solver. What a run is:

* a method's **points** ``(wall_seconds, epoch_seconds, primal)``, in the order the user saw
  them. For daskpd's solvers, ``wall_seconds`` is the wall time of the user's second ``solve``
  call on a fresh cluster up to the moment the point was known (data reads, start, epochs and
  evaluation in; the cluster's start and the first call, which loads the kernels, out),
  ``epoch_seconds`` the solver's training clock (start and epochs).
  For a peer, each point is one fit of its effort ladder (a tolerance, a number of passes) and
  both clocks are that fit's time on data already in memory;
* the **chosen** model: the one a stopping rule picked without the test set (daskpd: the first
  point whose duality gap is at most ``rule_tol`` times its primal, the certificate; a peer:
  its own default stopping rule, or the validation-best rung), with its test metric.

The time of a method to the line ``P <= (1 + eps) P*`` is the wall time of the first point at
or below it (``inf``: missed). Medians are true medians over every repeat, the first one
included; a line that more than half of the repeats missed has a median of ``inf``, never a
ratio. Why a run missed a line is its ``ended``: ``"budget S s"`` (the time budget ran out: the
only case a table calls "not reached"), ``"ladder ended at tol X"`` (a peer's ladder of
efforts ran out before its budget while its model still moved: more effort was not tried, so
nothing is decided against it), ``"settled at P/P* - 1 = E ..."`` (the ladder ran out with
its last two rungs' models the same to 1e-6, E above P*: the peer converged to a point of its
own, and missed every line below it for good), ``"epoch cap N"`` (daskpd's ``max_epochs``),
or ``""`` (results saved before runs said).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

#: The relative suboptimality ladder: the lines ``P <= (1 + eps) P*`` every method is timed to.
LADDER = (1e-1, 1e-2, 1e-3, 1e-4)

#: The clocks a point carries (index into a point).
WALL, EPOCHS = 0, 1


@dataclass
class Run:
    """One repeat of one method.

    Attributes
    ----------
    points : list of tuple
        ``(wall_seconds, epoch_seconds, primal)`` in the order the user saw them; daskpd's
        points add the epoch number as a fourth element.
    chosen : dict
        The model its stopping rule chose: ``rule`` (str), ``wall_seconds``, ``primal``,
        ``gap`` (NaN where the method has no certificate) and ``metric`` (its test metric).
    peak_rss_bytes : int
        Peak memory of the run (this process and its children), 0 when not measured.
    best_dual : float
        The highest certified dual value the run reported (NaN: no certificate).
    clock : list of tuple
        ``(epoch_seconds, epoch)`` at the end of every epoch, evaluated or not (daskpd's
        runs; empty for a peer, and in results saved before it existed).
    ended : str
        What ended the run (:func:`budget_end`, :func:`ladder_end`, ``"epoch cap N"``,
        ``"the last line"``; empty in results saved before runs said).
    from_files : float
        Wall seconds of the "from files" clock: a fresh process from the data on disk (the
        method's own format) to the model at ``(1 + 1e-3) P*`` (NaN: not measured).
    warmup_seconds : float
        daskpd's runs: wall seconds of the untimed first call on the same fresh cluster
        (:func:`daskpd.bench.runners.warmup_set`) that makes the timed call a second one
        (NaN: a peer, or results saved before the warm-up existed).
    """

    points: list = field(default_factory=list)
    chosen: dict = field(default_factory=dict)
    peak_rss_bytes: int = 0
    best_dual: float = math.nan
    clock: list = field(default_factory=list)
    ended: str = ""
    from_files: float = math.nan
    warmup_seconds: float = math.nan


def budget_end(budget: float) -> str:
    """``Run.ended`` of a run whose time budget ran out."""
    return f"budget {budget:g} s"


def ladder_end(rung) -> str:
    """``Run.ended`` of a peer whose ladder of efforts ran out before its budget.

    ``rung``: its last rung, a tolerance (float) or a described effort (``"20 epochs"``).
    """
    if isinstance(rung, float):
        return f"ladder ended at tol {rung:g}"
    return f"ladder ended at {rung}"


def settled_end(rung, excess: float) -> str:
    """``Run.ended`` of a peer whose ladder ended with its last two rungs' models the same
    (to 1e-6), ``excess = P / P* - 1`` above P*: it converged to a point of its own, and no
    line below it is reached by more effort of that kind."""
    rung = f"tol {rung:g}" if isinstance(rung, float) else rung
    return f"settled at P/P* - 1 = {excess:.2g} (its ladder to {rung})"


def ran_out_of_budget(ended: str) -> bool:
    """Whether ``Run.ended`` says the time budget ran out."""
    return ended.startswith("budget")


def settled_above(ended: str) -> bool:
    """Whether ``Run.ended`` says the run's ladder settled above P* (:func:`settled_end`)."""
    return ended.startswith("settled at")


def seconds_to(points, bound: float, clock: int = WALL) -> float:
    """Fewest seconds (on ``clock``) of a point whose primal is at most ``bound``; else inf.

    A daskpd run's points come in time order, so this is its first point below the line; a
    peer's points are the rungs of its effort ladder, and this is its cheapest rung that
    reaches the line (what a user who knew which tolerance to ask for would wait).

    Parameters
    ----------
    points : sequence of tuple
        ``(wall_seconds, epoch_seconds, primal[, epoch])``.
    bound : float
    clock : {WALL, EPOCHS}

    Returns
    -------
    float
    """
    reached = [
        float(point[clock]) for point in points if not math.isnan(point[2]) and point[2] <= bound
    ]
    return min(reached, default=math.inf)


def true_median(values) -> float:
    """The median of every value, ``inf`` (not reached) included; NaN for no values.

    Parameters
    ----------
    values : sequence of float

    Returns
    -------
    float
    """
    values = [float(v) for v in values]
    if not values or any(math.isnan(v) for v in values):
        return math.nan
    # statistics.median of an even count averages the middle two: inf when one of them is
    middle = statistics.median(values)
    return middle


def spread(values) -> tuple[float, float, int]:
    """``(min, max, count)`` of the finite values (the runs that reached a line)."""
    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, 0
    return min(finite), max(finite), len(finite)


def summarize(runs, p_star: float) -> dict:
    """A method's line times and chosen model over its repeats.

    Parameters
    ----------
    runs : list of Run
    p_star : float

    Returns
    -------
    dict
        ``lines``: for each ``eps`` of :data:`LADDER` (as a string key), the per-run wall and
        epoch seconds, their true medians and why the runs that missed it ended;
        ``chosen``: medians of the chosen models' wall seconds, relative suboptimality and
        test metric, and their rule; ``epoch_seconds``: median of the per-run median seconds
        per epoch (NaN for the peers); ``from_files``: median of the from-files clock;
        ``start``: where the runs have a start of their own (points at epoch 0: DSO's
        CoCoA+ start), the start alone (``lines``, ``seconds``: the median wall seconds at
        its end) and the method's own epochs timed from the start's end (``own_lines``).
    """
    chosen = [run.chosen for run in runs if run.chosen]
    suboptimality = [(c["primal"] - p_star) / abs(p_star) for c in chosen]
    summary = {
        "lines": _lines(runs, p_star),
        "chosen": {
            "rule": chosen[0]["rule"] if chosen else "",
            "wall_seconds": true_median([c["wall_seconds"] for c in chosen]),
            "suboptimality": true_median(suboptimality),
            "metric": true_median([c["metric"] for c in chosen]),
            "metrics": [c["metric"] for c in chosen],
            "gap": true_median([c.get("gap", math.nan) for c in chosen]),
        },
        "epoch_seconds": true_median(
            [
                step
                for step in map(_median_step, [run.clock or run.points for run in runs])
                if not math.isnan(step)
            ]
        ),
        "peak_rss_bytes": max((run.peak_rss_bytes for run in runs), default=0),
        "primal_known": any(not math.isnan(p[2]) for run in runs for p in run.points),
        "from_files": true_median([run.from_files for run in runs]),
        "from_files_runs": [run.from_files for run in runs],
    }
    start = start_apart(runs, p_star)
    if start is not None:
        summary["start"] = start
    return summary


def _lines(runs, p_star):
    lines = {}
    for eps in LADDER:
        bound = (1.0 + eps) * p_star
        wall = [seconds_to(run.points, bound, WALL) for run in runs]
        epochs = [seconds_to(run.points, bound, EPOCHS) for run in runs]
        lines[repr(eps)] = {
            "wall": wall,
            "epochs": epochs,
            "median_wall": true_median(wall),
            "median_epochs": true_median(epochs),
            # why the runs that missed the line ended (the budget, a ladder, an epoch cap)
            "missed": sorted(
                {run.ended for run, seconds in zip(runs, wall, strict=True) if math.isinf(seconds)}
            ),
        }
    return lines


def start_apart(runs, p_star: float) -> dict | None:
    """A method's own start (its points at epoch 0) apart from its own epochs.

    DSO's runs begin with CoCoA+ rounds (its ``init="auto"``), reported as epoch 0; the time
    to a line of the whole run then mostly times that start. This splits each run: the start
    alone (its epoch-0 points, as they came), and the epochs after it, each point's clocks
    counted from the start's last point (what DSO's own epochs add).

    Returns
    -------
    dict or None
        ``seconds`` (median wall seconds at the start's end), ``suboptimality`` (median
        ``P / P* - 1`` there), ``lines`` (the start alone) and ``own_lines`` (the epochs after
        it); ``None`` when no run has a point at epoch 0.
    """
    starts = [[p for p in run.points if len(p) > 3 and p[3] == 0] for run in runs]
    if not any(starts):
        return None
    alone, own = [], []
    for run, start in zip(runs, starts, strict=True):
        wall0, epochs0 = (start[-1][0], start[-1][1]) if start else (0.0, 0.0)
        alone.append(Run(points=start, ended="above it at the start's end"))
        after = [
            (p[0] - wall0, p[1] - epochs0, p[2], p[3])
            for p in run.points
            if len(p) > 3 and p[3] > 0
        ]
        own.append(Run(points=after, ended=run.ended))
    ends = [start[-1] for start in starts if start]
    return {
        "seconds": true_median([p[0] for p in ends]),
        "suboptimality": true_median([(p[2] - p_star) / abs(p_star) for p in ends]),
        "lines": _lines(alone, p_star),
        "own_lines": _lines(own, p_star),
    }


def _median_step(points) -> float:
    """Median seconds per epoch of one run, from its clock or its points.

    A run's clock is ``(epoch_seconds, epoch)`` at every epoch's end, so its steps are the
    epochs themselves (the first, which holds the start, is not a step). Without one (results
    saved before it), a daskpd point ``(wall, epoch_seconds, primal, epoch)``: with
    evaluations every few epochs consecutive points are several epochs apart, so each step
    of the epoch clock is divided by its number of epochs. A peer's points (rungs of a
    ladder, no epoch) give NaN.
    """
    timed = [
        (point[0], point[1]) if len(point) == 2 else (point[EPOCHS], point[3])
        for point in points
        if len(point) in (2, 4)
    ]
    steps = [
        (b_clock - a_clock) / (b_epoch - a_epoch)
        for (a_clock, a_epoch), (b_clock, b_epoch) in zip(timed[:-1], timed[1:], strict=True)
        if b_epoch > a_epoch
    ]
    return statistics.median(steps) if steps else math.nan


def reference_check(p_ref: float, lowest_primal: float, best_dual: float) -> dict:
    """How far the reference P* can be from the true optimum, from what the methods saw.

    Parameters
    ----------
    p_ref : float
        Primal value of the tight reference solve (liblinear, Snap ML or a closed form).
    lowest_primal : float
        The lowest primal value any method reached (NaN: none).
    best_dual : float
        The highest certified dual value any daskpd run reported (NaN: none); the optimum
        lies in ``[best_dual, p_ref]``.

    Returns
    -------
    dict
        ``p_star`` (always the reference), ``certified_within`` (``(p_ref - best_dual) /
        p_ref``, NaN without a dual), ``below`` (``(p_ref - lowest_primal) / p_ref`` when a
        method went below the reference, else 0).
    """
    within = (p_ref - best_dual) / abs(p_ref) if math.isfinite(best_dual) else math.nan
    below = 0.0
    if math.isfinite(lowest_primal) and lowest_primal < p_ref:
        below = (p_ref - lowest_primal) / abs(p_ref)
    return {"p_star": p_ref, "certified_within": within, "below": below}


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def missed_text(line: dict, primal_known: bool = True) -> str:
    """Why a line's median is ``inf``, from why its runs ended: "not reached (budget S s)"
    only when every run that missed it ran out of its time budget."""
    if not primal_known:
        return "no primal (its weights are not readable)"
    missed = line.get("missed")
    if missed is None or not any(missed):
        return "missed (the runs' stops not recorded)"
    if all(ran_out_of_budget(reason) for reason in missed):
        return f"not reached ({', '.join(missed)})"
    return "; ".join(reason or "stop not recorded" for reason in missed)


def time_text(row: dict, eps: float) -> str:
    """A row's median seconds to line ``eps``, or why it has none."""
    line = row["summary"]["lines"][repr(eps)]
    seconds = line["median_wall"]
    if math.isinf(seconds):
        return missed_text(line, row["summary"].get("primal_known", True))
    return f"{seconds:.3g} s"


def _line_time(row, eps) -> float:
    return row["summary"]["lines"][repr(eps)]["median_wall"]


def _missed_for_good(row, eps) -> bool:
    """Whether every run of ``row`` that missed line ``eps`` ran out of its budget or settled
    above the line (its model does not move with more effort): a miss that decides."""
    line = row["summary"]["lines"][repr(eps)]
    missed = line.get("missed") or []
    return (
        row["summary"].get("primal_known", True)
        and bool(missed)
        and all(ran_out_of_budget(reason) or settled_above(reason) for reason in missed)
    )


def compare(mine: float, ours_label: str, theirs: dict, eps_theirs: float, scale=1.0):
    """``(verdict, text)``: is ``mine`` at most ``scale`` times ``theirs``' time to its line?

    ``verdict`` is ``"met"``, ``"not met"`` or ``"not decided"`` (the peer missed the line
    for another reason than its budget or a model settled above the line: its ladder ended
    while its model still moved, or it has no primal).
    """
    other = _line_time(theirs, eps_theirs)
    said = f"{theirs['method']} {time_text(theirs, eps_theirs)}"
    if math.isinf(mine):
        return "not met", said
    if math.isinf(other):
        if _missed_for_good(theirs, eps_theirs):
            return "met", said
        return "not decided", said
    return ("met" if mine <= scale * other else "not met"), said


def _against(ours, rows, eps, *, eps_theirs=None, scale=1.0):
    """Verdict of ``ours`` against every row of ``rows`` (one peer's solvers, or every peer):
    met against all of them, not met against one, else not decided. The text names each."""
    eps_theirs = eps if eps_theirs is None else eps_theirs
    mine = _line_time(ours, eps)
    results = [compare(mine, ours["method"], row, eps_theirs, scale) for row in rows]
    verdicts = {verdict for verdict, _ in results}
    verdict = (
        "**not met**" if "not met" in verdicts
        else "**not decided**" if "not decided" in verdicts
        else "**met**"
    )  # fmt: skip
    finite = [row for row in rows if math.isfinite(_line_time(row, eps_theirs))]
    fastest = min(finite, key=lambda row: _line_time(row, eps_theirs), default=None)
    theirs = "; ".join(text for _, text in results)
    if fastest is not None and len(rows) > 1:
        theirs += f" (fastest: {fastest['method']})"
    scaled = (
        f" (x{scale:g}: {scale * _line_time(fastest, eps_theirs):.3g} s)"
        if (fastest is not None and scale != 1.0)
        else ""
    )
    return f"{verdict}: {ours['method']} {time_text(ours, eps)}; {theirs}{scaled}"


def peer_of(row: dict) -> str | None:
    """The peer a row belongs to (``None`` for daskpd's rows): rows of one peer's several
    solvers (``"liblinear -s 0"``, ``"liblinear -s 7"``) share it."""
    if row.get("kind") == "daskpd" or row["method"].startswith("daskpd"):
        return None
    return row.get("peer") or row["method"].split(" ", 1)[0]


def target_lines(table: dict) -> list[str]:
    """The targets of one table, computed from its rows; each can come out "not met".

    Against a peer with several solvers (liblinear's ``-s 0`` and ``-s 7`` on the logistic
    loss, Snap ML's dual and primal) a line is met when it is met against each of them, so
    against the faster one. Against a peer that missed the line because its ladder of
    efforts ended (not its budget) while its model still moved, nothing is decided; one
    whose ladder settled above the line (its last two rungs' models the same) missed it.

    Parameters
    ----------
    table : dict
        ``methods``: rows with ``method``, ``status``, ``reason`` and ``summary`` (from
        :func:`summarize`); ``default``: the name of daskpd's default solver's row;
        ``single_worker``: the name of that solver's 1-worker row; ``workers``: the worker
        count of the other rows; ``loss``.

    Returns
    -------
    list of str
        One line per target: met, not met, not decided, or why not measured.
    """
    rows = {row["method"]: row for row in table["methods"]}
    workers = table["workers"]

    def ran(name):
        row = rows.get(name)
        if row is None:
            return None, f"not measured: {name} was not in this run"
        if row["status"] != "ok":
            return None, f"not measured: {name} {row['status']} ({row['reason']})"
        return row, ""

    def peer_rows(peer):
        mine = [row for row in table["methods"] if peer_of(row) == peer]
        ok = [row for row in mine if row["status"] == "ok"]
        if not mine:
            return [], f"not measured: {peer} was not in this run"
        if not ok:
            return [], f"not measured: {peer} {mine[0]['status']} ({mine[0]['reason']})"
        return ok, ""

    lines = []
    default, why = ran(table["default"])
    single, why_single = ran(table["single_worker"])
    name = table["default"]
    peers = [
        ("liblinear", "liblinear (1 core, each of its solvers)"),
        ("liblinear-mc", f"multi-core LIBLINEAR ({workers} threads)"),
        ("snapml", f"Snap ML ({workers} threads)"),
    ]
    for peer, label in peers:
        theirs, why_peer = peer_rows(peer)
        head = f"{name} to (1+1e-3)P* no slower than {label}"
        if default is None or not theirs:
            lines.append(f"{head}: {why or why_peer}")
        else:
            lines.append(f"{head}: {_against(default, theirs, 1e-3)}")
    every = [
        row
        for row in table["methods"]
        if peer_of(row) is not None and row["status"] == "ok"
        and row["summary"].get("primal_known", True)
    ]  # fmt: skip
    head = f"{name} to (1+1e-3)P* no slower than the fastest peer (every peer with a primal)"
    if default is None or not every:
        lines.append(f"{head}: {why or 'not measured: no peer with a primal ran'}")
    else:
        lines.append(f"{head}: {_against(default, every, 1e-3)}")
    liblinear, why_lib = peer_rows("liblinear")
    head = f"{name} to (1+1e-2)P* in at most half of liblinear's time to (1+1e-3)P*"
    if default is None or not liblinear:
        lines.append(f"{head}: {why or why_lib}")
    else:
        lines.append(f"{head}: {_against(default, liblinear, 1e-2, eps_theirs=1e-3, scale=0.5)}")
    head = f"{name}, 1 -> {workers} workers: time to (1+1e-3)P* at least 1.7x faster"
    if default is None or single is None:
        lines.append(f"{head}: {why or why_single}")
    else:
        one, many = _line_time(single, 1e-3), _line_time(default, 1e-3)
        if math.isinf(one) or math.isinf(many):
            lines.append(
                f"{head}: **not met**: 1 worker {time_text(single, 1e-3)}, {workers} workers "
                f"{time_text(default, 1e-3)}"
            )
        else:
            ratio = one / many
            lines.append(
                f"{head}: {_met(ratio >= 1.7)}: {ratio:.2f}x ({one:.3g} s -> {many:.3g} s)"
            )
    if table.get("loss") == "logistic":
        spdc, why_spdc = ran("daskpd spdc")
        dso, why_dso = ran("daskpd dso")
        head = "SPDC epoch within 3x of DSO's"
        if spdc is None or dso is None:
            lines.append(f"{head}: {why_spdc or why_dso}")
        else:
            # an epoch time needs two epochs of a run (two evaluations in results saved
            # before the runs kept every epoch's clock): say so instead of a ratio of NaN
            untimed = [
                row["method"]
                for row in (spdc, dso)
                if not math.isfinite(row["summary"]["epoch_seconds"])
            ]
            if untimed:
                lines.append(
                    f"{head}: not measured: {' and '.join(untimed)} timed for fewer than "
                    "two epochs in a run"
                )
            else:
                ratio = spdc["summary"]["epoch_seconds"] / dso["summary"]["epoch_seconds"]
                lines.append(f"{head}: {_met(ratio <= 3)}: {ratio:.2f}x")
        head = "SPDC to (1+1e-3)P* no slower than liblinear (1 core, each of its solvers)"
        if spdc is None or not liblinear:
            lines.append(f"{head}: {why_spdc or why_lib}")
        else:
            lines.append(f"{head}: {_against(spdc, liblinear, 1e-3)}")
    return lines
