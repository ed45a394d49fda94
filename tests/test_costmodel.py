"""The cost model (``daskpd.bench.costmodel``): its fits recover the parameters that made
their data, its round counts interpolate and extrapolate as documented, and its plan adds
up by hand."""

from __future__ import annotations

import math

import pytest

from daskpd.bench import costmodel as cm

TRUE = cm.Rates(
    pass_ns={"hinge": 18.0, "logistic": 25.0},
    thread_exponent={"hinge": 0.35, "logistic": -0.1},
    read_ns={"hinge": 12.0, "logistic": 20.0},
    fixed=0.05,
    feature_ns=30.0,
    first_fixed=0.4,
    first_ns=6.0,
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
        first_round_seconds=cm.round_seconds(*args)
        + TRUE.first_fixed
        + (0.0 if streamed else TRUE.first_ns * nnz / grid * 1e-9),
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
    for loss in ("hinge", "logistic"):
        runs.append(_run(f"stream {loss}", 1e8, loss, 2, "stream", rounds_to=7))
    return runs


def test_fit_recovers_the_parameters_that_made_the_runs():
    fitted = cm.fit_rates(_runs())
    for loss, ns in TRUE.pass_ns.items():
        assert fitted.pass_ns[loss] == pytest.approx(ns, rel=1e-9)
        assert fitted.read_ns[loss] == pytest.approx(TRUE.read_ns[loss], rel=1e-9)
        assert fitted.thread_exponent[loss] == pytest.approx(TRUE.thread_exponent[loss])
    assert fitted.first_fixed == pytest.approx(TRUE.first_fixed, rel=1e-9)
    assert fitted.first_ns == pytest.approx(TRUE.first_ns, rel=1e-9)
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


def test_round_counts_interpolate_in_kappa_and_in_groups():
    counts = cm.RoundCounts(
        {"logistic": {1: [(0.01, 5), (0.01, 7), (1.0, 4)], 2: [(0.01, 20.0)], 8: [(0.01, 80.0)]}}
    )
    assert counts.rounds("logistic", 1, 0.01) == (6, 5, 7)
    # between kappa 0.01 (median 6) and 1 (4): geometric interpolation at 0.1
    assert counts.rounds("logistic", 1, 0.1)[0] == pytest.approx(math.sqrt(6 * 4))
    # outside the measured kappas the nearest end holds
    assert counts.rounds("logistic", 1, 1e-6)[0] == 6
    assert counts.rounds("logistic", 2, 5.0) == (20.0, 20.0, 20.0)
    # between 2 and 8 groups, the geometric mean at 4 (linear in log K, log rounds)
    assert counts.rounds("logistic", 4, 0.01)[0] == pytest.approx(40.0)
    # beyond 8: the fitted power of K (here exactly 1) goes on
    median, low, high = counts.rounds("logistic", 32, 0.01)
    assert median == pytest.approx(320.0) and low == 80.0 and high == median
    with pytest.raises(KeyError):
        counts.rounds("hinge", 1, 0.01)
    with pytest.raises(ValueError, match="one-group"):
        cm.RoundCounts({"hinge": {2: [(0.1, 9)]}}).rounds("hinge", 1, 0.1)
    with pytest.raises(ValueError, match="several groups"):
        cm.RoundCounts({"hinge": {1: [(0.1, 9)]}}).rounds("hinge", 2, 0.1)


def test_round_counts_never_fall_beyond_the_measured_groups():
    counts = cm.RoundCounts({"hinge": {2: [(0.1, 100.0)], 4: [(0.1, 50.0)]}})
    assert counts.rounds("hinge", 16, 0.1)[0] == pytest.approx(50.0)


def test_conditioning_is_alpha_n_over_the_mean_row_norm():
    # binary rows of 450 nonzeros: R^2 = 450
    assert cm.conditioning(1e-3, 1e5, 450e5) == pytest.approx(1e-3 * 1e5 / 450)


def test_rounds_from_rate():
    gaps = [0.5**k for k in range(1, 8)]  # stopped at 2**-7 = 7.8e-3
    assert cm.rounds_from_rate(gaps, 1e-3) == pytest.approx(math.log2(1e3))
    assert cm.rounds_from_rate([0.5, 0.1, 5e-4, 1e-4], 1e-3) == 3.0
    assert cm.rounds_from_rate([0.9, 0.9, 0.91], 1e-3) == math.inf


def test_plan_adds_up_by_hand():
    rounds = cm.RoundCounts({"hinge": {1: [(0.1, 6)], 2: [(0.1, 60.0)], 4: [(0.1, 120.0)]}})
    job = cm.Job(nnz=1.6e11, n_samples=5e7, n_features=11_725_480, loss="hinge", alpha=1e-6)
    big = cm.Machines(count=1, cores=32, memory=2e12, bandwidth=1.25e9)
    plan = cm.plan_cocoa(TRUE, rounds, job, big)
    assert not plan["streamed"] and plan["comm_bytes"] == 0
    per_round = 18e-9 * 1.6e11 / 32**0.35 + TRUE.fixed + 30e-9 * 11_725_480
    assert plan["round"] == pytest.approx(per_round)
    start = TRUE.init_seconds + TRUE.first_fixed + 6e-9 * 1.6e11
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
    start = TRUE.init_seconds + TRUE.first_fixed  # streamed: no read before the rounds
    assert plan["seconds"][0] == pytest.approx(start + 120 * per_round)


def test_dso_fit_recovers_its_terms_and_needs_two_grids():
    true = cm.DSORates(update_ns=9.0, hop=0.02)
    epochs = [(1e8, p, 2, 1e8 * 9e-9 / 2 + p * 0.02) for p in (2, 4, 8)]
    fitted = cm.fit_dso(epochs)
    assert fitted.update_ns == pytest.approx(true.update_ns)
    assert fitted.hop == pytest.approx(true.hop)
    with pytest.raises(ValueError, match="two grids"):
        cm.fit_dso(epochs[:1])
    job = cm.Job(nnz=1e9, n_samples=1e6, n_features=1e6, loss="hinge", alpha=1e-5)
    epoch = cm.dso_epoch(true, job, 10, 1e9)
    assert epoch["bytes"] == pytest.approx(1e6 * cm.COLUMN_BYTES)
    assert epoch["seconds"] == pytest.approx(0.9 + 10 * (0.02 + 1e5 * cm.COLUMN_BYTES / 1e9))


def test_plan_runs_one_thread_where_threads_did_not_gain():
    rounds = cm.RoundCounts({"logistic": {1: [(0.1, 6)]}})
    job = cm.Job(nnz=1e10, n_samples=2e7, n_features=1e6, loss="logistic", alpha=1e-5)
    plan = cm.plan_cocoa(TRUE, rounds, job, cm.Machines(1, 32, 2e12, 1.25e9))
    assert plan["threads"] == 1  # TRUE's logistic exponent is negative
    assert plan["round"] == pytest.approx(25e-9 * 1e10 + TRUE.fixed + 30e-9 * 1e6)


def test_the_committed_measurements_give_the_readme_plan():
    """The records in pipelines/cost_model/ fit within the error BENCHMARKS.md states, and the
    plan the README quotes (one machine, hinge, 1.7-2.2 h) is what they give."""
    import importlib.util
    import os

    root = os.path.join(os.path.dirname(__file__), "..", "pipelines")
    spec = importlib.util.spec_from_file_location(
        "bench_cost_model", os.path.join(root, "bench_cost_model.py")
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    records = os.path.join(root, "cost_model")
    runs = script._load_runs(
        [os.path.join(records, "runs.json"), os.path.join(records, "out_of_core.json")]
    )
    assert max(r.nnz for r in runs) >= 5e9 and min(r.nnz for r in runs) <= 2e5
    rates = cm.fit_rates(runs)
    rounds = script._load_rounds(runs, os.path.join(records, "groups.jsonl"))
    errors = [row["round_error"] for row in cm.fit_table(rates, runs, rounds)]
    assert -0.19 <= min(errors) and max(errors) <= 0.41
    hours = []
    for alpha in (3e-8, 3e-6):
        job = cm.Job(nnz=1.6e11, n_samples=5e7, n_features=11_725_480, loss="hinge", alpha=alpha)
        plan = cm.plan_cocoa(rates, rounds, job, cm.Machines(1, 32, 256 * 2**30, 1.25e9))
        assert plan["streamed"] and plan["threads"] == 32
        hours.append(plan["seconds"][0] / 3600)
        # a second machine costs the hinge loss far more rounds than it saves a round
        two = cm.plan_cocoa(rates, rounds, job, cm.Machines(2, 32, 256 * 2**30, 1.25e9))
        assert two["seconds"][0] > 10 * plan["seconds"][0]
    assert min(hours) == pytest.approx(1.7, abs=0.05)
    assert max(hours) == pytest.approx(2.2, abs=0.05)


def test_the_stream_share_is_the_solvers():
    from daskpd.solvers.cocoa._options import STREAM_SHARE

    assert cm.STREAM_SHARE == STREAM_SHARE
