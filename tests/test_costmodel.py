"""The cost model (``daskpd.bench.costmodel``): its fits recover the parameters that made
their data, its round counts interpolate and extrapolate as documented, and its plan adds
up by hand."""

from __future__ import annotations

import math

import pytest

from daskpd.bench import costmodel as cm

TRUE = cm.Rates(
    pass_ns={"hinge": 18.0, "logistic": 25.0},
    read_ns=12.0,
    thread_exponent=0.35,
    fixed=0.05,
    feature_ns=30.0,
    init_seconds=1.2,
)


def _run(label, nnz, loss, threads, rows, n_features=4_660_256, rounds_to=6, grid=1):
    """A run whose times are what ``TRUE`` predicts."""
    streamed = rows == "stream"
    args = (TRUE, loss, nnz / grid, threads, streamed, n_features)
    return cm.MeasuredRun(
        label=label, nnz=nnz, n_samples=nnz // 450, n_features=n_features, loss=loss,
        alpha=1e-5, grid=grid, threads=threads, rows=rows,
        round_seconds=cm.round_seconds(*args),
        first_round_seconds=cm.round_seconds(*args) * 2,
        init_seconds=TRUE.init_seconds, rounds_to=rounds_to,
        wall_to=None if rounds_to is None else cm.seconds_to_target(*args, rounds_to),
    )  # fmt: skip


def _runs():
    runs = [
        _run("tiny", 180_000, "hinge", 1, "memory", rounds_to=None),
        _run("tiny-h13", 176_000, "logistic", 1, "memory", n_features=8192, rounds_to=None),
    ]
    for nnz in (1e7, 1e8):
        for loss in ("hinge", "logistic"):
            for threads in (1, 2):
                runs.append(_run(f"{nnz:g} {loss} {threads}", nnz, loss, threads, "memory"))
    runs.append(_run("stream", 1e8, "logistic", 2, "stream", rounds_to=7))
    return runs


def test_fit_recovers_the_parameters_that_made_the_runs():
    fitted = cm.fit_rates(_runs())
    for loss, ns in TRUE.pass_ns.items():
        assert fitted.pass_ns[loss] == pytest.approx(ns, rel=1e-9)
    assert fitted.read_ns == pytest.approx(TRUE.read_ns, rel=1e-9)
    assert fitted.thread_exponent == pytest.approx(TRUE.thread_exponent, rel=1e-9)
    assert fitted.fixed == pytest.approx(TRUE.fixed, rel=1e-9)
    assert fitted.feature_ns == pytest.approx(TRUE.feature_ns, rel=1e-9)
    assert fitted.init_seconds == pytest.approx(TRUE.init_seconds)
    table = cm.fit_table(fitted, _runs())
    assert len(table) == len(_runs())
    for row in table:
        assert abs(row["round_error"]) < 1e-9
        if row["to"] is not None:
            assert abs(row["to_error"]) < 1e-9


def test_fit_table_shows_a_run_the_model_misses():
    runs = _runs()
    slow = _run("slow", 1e8, "hinge", 2, "memory")
    slow = cm.MeasuredRun(**{**slow.__dict__, "round_seconds": slow.round_seconds * 1.5})
    fitted = cm.fit_rates(runs)
    (row,) = cm.fit_table(fitted, [slow])
    assert row["round_error"] == pytest.approx(1 / 1.5 - 1)


@pytest.mark.parametrize(
    "drop, word",
    [
        (lambda r: r.group_nnz <= 1e6, "fixed cost"),
        (lambda r: r.threads == 1 and r.group_nnz > 1e6, "pass_ns"),
        (lambda r: r.threads > 1 and r.rows == "memory", "thread exponent"),
        (lambda r: r.rows == "stream", "read_ns"),
    ],
)
def test_fit_names_the_term_it_has_no_run_for(drop, word):
    with pytest.raises(ValueError, match=word):
        cm.fit_rates([r for r in _runs() if not drop(r)])


def test_round_counts_one_group_interpolation_and_extrapolation():
    counts = cm.RoundCounts({"logistic": {1: [5, 6, 7], 2: [20.0], 8: [80.0]}})
    assert counts.rounds("logistic", 1) == (6, 5, 7)
    assert counts.rounds("logistic", 2) == (20.0, 20.0, 20.0)
    # between 2 and 8, the geometric mean at 4 (linear in log K, log rounds)
    assert counts.rounds("logistic", 4)[0] == pytest.approx(40.0)
    # beyond 8: the fitted power of K (here exactly 1) goes on
    median, low, high = counts.rounds("logistic", 32)
    assert median == pytest.approx(320.0) and low == 80.0 and high == median
    with pytest.raises(KeyError):
        counts.rounds("hinge", 1)
    with pytest.raises(ValueError, match="one-group"):
        cm.RoundCounts({"hinge": {2: [9]}}).rounds("hinge", 1)
    with pytest.raises(ValueError, match="several groups"):
        cm.RoundCounts({"hinge": {1: [9]}}).rounds("hinge", 2)


def test_round_counts_never_fall_beyond_the_measured_groups():
    counts = cm.RoundCounts({"hinge": {2: [100.0], 4: [50.0]}})
    assert counts.rounds("hinge", 16)[0] == pytest.approx(50.0)


def test_rounds_from_rate():
    gaps = [0.5**k for k in range(1, 8)]  # stopped at 2**-7 = 7.8e-3
    assert cm.rounds_from_rate(gaps, 1e-3) == pytest.approx(math.log2(1e3))
    assert cm.rounds_from_rate([0.5, 0.1, 5e-4, 1e-4], 1e-3) == 3.0
    assert cm.rounds_from_rate([0.9, 0.9, 0.91], 1e-3) == math.inf


def test_plan_adds_up_by_hand():
    rounds = cm.RoundCounts({"hinge": {1: [6], 2: [60.0], 4: [120.0]}})
    job = cm.Job(nnz=1.6e11, n_samples=5e7, n_features=11_725_480, loss="hinge")
    big = cm.Machines(count=1, cores=32, memory=2e12, bandwidth=1.25e9)
    plan = cm.plan_cocoa(TRUE, rounds, job, big)
    assert not plan["streamed"] and plan["comm_bytes"] == 0
    per_round = 18e-9 * 1.6e11 / 32**0.35 + TRUE.fixed + 30e-9 * 11_725_480
    assert plan["round"] == pytest.approx(per_round)
    start = TRUE.init_seconds + 12e-9 * 1.6e11
    assert plan["seconds"][0] == pytest.approx(start + 6 * per_round)

    small = cm.Machines(count=4, cores=32, memory=256 * 2**30, bandwidth=1.25e9)
    plan = cm.plan_cocoa(TRUE, rounds, job, small)
    # 4e10 nonzeros a machine, 160 GB as read: more than 0.4 of 256 GiB
    assert plan["streamed"]
    assert plan["comm_bytes"] == 3 * 11_725_480 * 8
    per_round = (
        18e-9 * 4e10 / 32**0.35 + 12e-9 * 4e10 + TRUE.fixed + 30e-9 * 11_725_480
        + 3 * 11_725_480 * 8 / 1.25e9
    )  # fmt: skip
    assert plan["round"] == pytest.approx(per_round)
    assert plan["rounds"][0] == 120.0
    assert plan["seconds"][0] == pytest.approx(TRUE.init_seconds + 120 * per_round)


def test_dso_fit_recovers_its_terms_and_needs_two_grids():
    true = cm.DSORates(update_ns=9.0, hop=0.02)
    epochs = [(1e8, p, 2, 1e8 * 9e-9 / 2 + p * 0.02) for p in (2, 4, 8)]
    fitted = cm.fit_dso(epochs)
    assert fitted.update_ns == pytest.approx(true.update_ns)
    assert fitted.hop == pytest.approx(true.hop)
    with pytest.raises(ValueError, match="two grids"):
        cm.fit_dso(epochs[:1])
    job = cm.Job(nnz=1e9, n_samples=1e6, n_features=1e6, loss="hinge")
    epoch = cm.dso_epoch(true, job, 10, 1e9)
    assert epoch["bytes"] == pytest.approx(1e6 * cm.COLUMN_BYTES)
    assert epoch["seconds"] == pytest.approx(0.9 + 10 * (0.02 + 1e5 * cm.COLUMN_BYTES / 1e9))
