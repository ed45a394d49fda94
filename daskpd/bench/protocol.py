"""The benchmark protocol: P*, the suboptimality ladder, true medians, computed target lines.

Everything here is a pure function of measured runs; nothing runs a solver. What a run is:

* a method's **points** ``(wall_seconds, epoch_seconds, primal)``, in the order the user saw
  them. For daskpd's solvers, ``wall_seconds`` is the wall time of the user's ``solve`` call up
  to the moment the point was known (data reads, compilation, start, epochs and evaluation in;
  the start of a cluster out), ``epoch_seconds`` the solver's training clock (start and epochs).
  For a peer, each point is one fit of its effort ladder (a tolerance, a number of passes) and
  both clocks are that fit's time on data already in memory;
* the **chosen** model: the one a stopping rule picked without the test set (daskpd: the first
  point whose duality gap is at most ``rule_tol`` times its primal, the certificate; a peer:
  its own default stopping rule, or the validation-best rung), with its test metric.

The time of a method to the line ``P <= (1 + eps) P*`` is the wall time of the first point at
or below it (``inf``: not reached within the method's budget). Medians are true medians over
every repeat, the first one included; a line that more than half of the repeats missed has a
median of ``inf`` and reads "not reached", never a ratio.
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
    """

    points: list = field(default_factory=list)
    chosen: dict = field(default_factory=dict)
    peak_rss_bytes: int = 0
    best_dual: float = math.nan
    clock: list = field(default_factory=list)


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
        epoch seconds and their true medians; ``chosen``: medians of the chosen models' wall
        seconds, relative suboptimality and test metric, and their rule; ``epoch_seconds``:
        median of the per-run median seconds per epoch (NaN for the peers).
    """
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
        }
    chosen = [run.chosen for run in runs if run.chosen]
    suboptimality = [(c["primal"] - p_star) / abs(p_star) for c in chosen]
    return {
        "lines": lines,
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


def _fmt_s(seconds: float) -> str:
    return "not reached" if math.isinf(seconds) else f"{seconds:.3g} s"


def _line_time(row, eps) -> float:
    return row["summary"]["lines"][repr(eps)]["median_wall"]


def _no_slower(ours, theirs, eps, peer_label) -> str:
    """Verdict: ``ours`` reaches line ``eps`` no later than ``theirs`` (medians, wall)."""
    mine, other = _line_time(ours, eps), _line_time(theirs, eps)
    if math.isinf(mine):
        return f"**not met**: {ours['method']} not reached, {peer_label} {_fmt_s(other)}"
    verdict = _met(mine <= other)
    return f"{verdict}: {ours['method']} {_fmt_s(mine)}, {peer_label} {_fmt_s(other)}"


def target_lines(table: dict) -> list[str]:
    """The targets of one table, computed from its rows; each can come out "not met".

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
        One line per target: met, not met, or why not measured.
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

    lines = []
    default, why = ran(table["default"])
    liblinear, why_lib = ran("liblinear")
    snapml, why_snap = ran("snapml")
    single, why_single = ran(table["single_worker"])
    name = table["default"]
    head = f"{name} to (1+1e-3)P* no slower than liblinear (1 core)"
    if default is None or liblinear is None:
        lines.append(f"{head}: {why or why_lib}")
    else:
        lines.append(f"{head}: {_no_slower(default, liblinear, 1e-3, 'liblinear')}")
    head = f"{name} to (1+1e-3)P* no slower than Snap ML ({workers} threads)"
    if default is None or snapml is None:
        lines.append(f"{head}: {why or why_snap}")
    else:
        lines.append(f"{head}: {_no_slower(default, snapml, 1e-3, 'Snap ML')}")
    head = f"{name} to (1+1e-2)P* in at most half of liblinear's time to (1+1e-3)P*"
    if default is None or liblinear is None:
        lines.append(f"{head}: {why or why_lib}")
    else:
        mine, other = _line_time(default, 1e-2), _line_time(liblinear, 1e-3)
        if math.isinf(mine):
            lines.append(f"{head}: **not met**: {name} not reached")
        else:
            lines.append(
                f"{head}: {_met(mine <= other / 2)}: {name} {_fmt_s(mine)}, half of "
                f"liblinear's {_fmt_s(other)}"
            )
    head = f"{name}, 1 -> {workers} workers: time to (1+1e-3)P* at least 1.7x faster"
    if default is None or single is None:
        lines.append(f"{head}: {why or why_single}")
    else:
        one, many = _line_time(single, 1e-3), _line_time(default, 1e-3)
        if math.isinf(one) or math.isinf(many):
            lines.append(
                f"{head}: **not met**: 1 worker {_fmt_s(one)}, {workers} workers {_fmt_s(many)}"
            )
        else:
            ratio = one / many
            lines.append(
                f"{head}: {_met(ratio >= 1.7)}: {ratio:.2f}x ({_fmt_s(one)} -> {_fmt_s(many)})"
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
        head = "SPDC to (1+1e-3)P* no slower than liblinear (1 core)"
        if spdc is None or liblinear is None:
            lines.append(f"{head}: {why_spdc or why_lib}")
        else:
            lines.append(f"{head}: {_no_slower(spdc, liblinear, 1e-3, 'liblinear')}")
    return lines
