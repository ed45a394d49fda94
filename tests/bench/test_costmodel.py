"""The cost model (``daskpd.bench.costmodel``): its fits recover the parameters that made
their data, its round counts interpolate and extrapolate as documented, and its plan adds
up by hand."""

from __future__ import annotations

import dataclasses
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

    root = os.path.join(os.path.dirname(__file__), "..", "..", "pipelines")
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
    from daskpd.solvers.common.stream import STREAM_SHARE

    assert cm.STREAM_SHARE == STREAM_SHARE


# -- tron's model (daskpd.bench.costmodel_tron) -----------------------------------------------


def _tron_true():
    from daskpd.bench import costmodel_tron as ct

    return ct.TronRates(
        nnz_ns={"hessian": 4.0, "step": 4.5, "gradient": 2.5},
        thread_exponent={"hessian": 0.8, "step": 0.6, "gradient": 0.7},
        fixed={"hessian": 0.02, "step": 0.035, "numbers": 0.008, "gradient": 0.03},
        home_ns={"hessian": 3.0, "step": 9.0, "numbers": 0.0, "gradient": 6.0},
        group_ns=0.4,
        merge_ns=2.0,
        scatter_ns=1.5,
        task_seconds=0.0008,
        hop=0.004,
        init_fixed=0.9,
        init_ns=7.0,
    )


def _tron_records(kinds=None):
    """Rounds and runs on 2 workers, made by the true rates: a tiny set, two large ones,
    K = 1 (two threads), 2 and 8 (one thread)."""
    from daskpd.bench import costmodel_tron as ct

    true = _tron_true()
    net = ct.Network(true.hop, 1e9)
    times, runs = [], []
    sets = [("tiny", 1.8e5, 9.5e4), ("1e7", 1e7, 1.72e6), ("1e8", 1e8, 4.05e6)]
    for name, nnz, used in sets:
        for grid, threads in ((1, 2), (2, 1), (8, 1)):
            layout = ct.Layout(grid, 2, threads)
            columns = ct.Columns(used, used * 0.9 ** math.log2(grid), used * 0.95 ** (grid > 1))
            for kind in kinds or ct.KINDS:
                seconds = ct.round_seconds(true, kind, nnz, columns, layout, net)
                times.append(ct.RoundTime(f"{name} K{grid}", kind, nnz, columns, grid, 2,
                                          threads, seconds))  # fmt: skip
            rounds = ct.TronRounds(newton=6, hessian=25, numbers=2, gradient=1)
            runs.append(ct.TronRun(
                f"{name} K{grid}", nnz, columns, grid, 2, threads, rounds,
                ct.init_seconds(true, nnz, columns, layout, net),
                ct.seconds_to_line(true, rounds, nnz, columns, layout, net),
            ))  # fmt: skip
    return times, runs, net


def _apart():
    true = _tron_true()
    return {"home_ns": true.home_ns, "group_ns": true.group_ns, "merge_ns": true.merge_ns,
            "scatter_ns": true.scatter_ns, "bandwidth": 1e9}  # fmt: skip


def test_tron_rounds_add_up_to_the_solvers_counters():
    from daskpd.bench import costmodel_tron as ct

    # 9 accepted Newton steps with 19 CG steps in all: 1 + 19 + 9 rounds, 1 + 19 + 18 passes
    rounds = ct.TronRounds(newton=9, hessian=19)
    assert (rounds.rounds, rounds.passes) == (29, 38)
    # a refused t = 1 with 3 halvings: 4 rounds more (the numbers, the gradient), 1 pass
    refused = ct.TronRounds(newton=9, hessian=19, numbers=3, gradient=1)
    assert (refused.rounds, refused.passes) == (33, 39)
    assert [refused.count(k) for k in ct.KINDS] == [19, 9, 3, 1]


def test_tron_layout_and_network_by_hand():
    from daskpd.bench import costmodel_tron as ct

    layout = ct.Layout(groups=8, workers=2, threads=1)
    assert (layout.per_worker, layout.owners, layout.levels, layout.network_levels) == (
        4, 2, 3, 1)  # fmt: skip
    assert ct.Layout(1, 2).levels == 0 and ct.Layout(1, 2).network_levels == 0
    job = ct.Layout(groups=64, workers=64, threads=32)
    assert (job.levels, job.network_levels, job.owners) == (6, 6, 64)
    flat, tree = ct.Network(0.01, 1e9), ct.Network(0.01, 1e9, broadcast="tree")
    d = 1e7  # 80 MB a vector
    # two vectors and the columns' int32 ids: 20 bytes a column
    assert flat.reduce_seconds(job, d, 2) == pytest.approx(6 * 0.01 + 6 * 0.2)
    assert ct.share_bytes(d, 1) == 1.2e8 and ct.share_bytes(d, 0) == 0
    assert flat.reduce_seconds(job, d, 0) == pytest.approx(0.06)
    assert flat.send_seconds(job, d, 1) == pytest.approx(63 * 0.08)
    assert tree.send_seconds(job, d, 1) == pytest.approx(6 * 0.08)
    with pytest.raises(ValueError, match="broadcast"):
        ct.Network(0.01, 1e9, broadcast="ring")
    columns = ct.Columns(100.0)
    assert (columns.of_share, columns.crossing) == (100.0, 100.0)
    assert ct.Columns(100.0, 40.0, 70.0).crossing == 70.0


def test_tron_fit_recovers_the_parameters_that_made_the_records():
    from daskpd.bench import costmodel_tron as ct

    true = _tron_true()
    times, runs, net = _tron_records()
    fitted = ct.fit_tron(times, runs, **_apart())
    for kind in ("hessian", "step", "gradient"):
        assert fitted.nnz_ns[kind] == pytest.approx(true.nnz_ns[kind], rel=1e-9)
        assert fitted.thread_exponent[kind] == pytest.approx(true.thread_exponent[kind])
    for kind in ct.KINDS:
        assert fitted.fixed[kind] == pytest.approx(true.fixed[kind], rel=1e-9)
    assert fitted.task_seconds == pytest.approx(true.task_seconds, rel=1e-9)
    assert fitted.hop == pytest.approx(true.hop, rel=1e-9)
    assert fitted.init_fixed == pytest.approx(true.init_fixed, rel=1e-9)
    assert fitted.init_ns == pytest.approx(true.init_ns, rel=1e-9)
    round_rows, run_rows = ct.check_table(fitted, times, runs, net)
    assert max(abs(r["error"]) for r in round_rows + run_rows) < 1e-9
    # a run 20% slower than the model shows as -17%
    slow = dataclasses.replace(runs[-1], wall_to=runs[-1].wall_to * 1.2)
    (row,) = ct.check_table(fitted, [], [slow], net)[1]
    assert row["error"] == pytest.approx(1 / 1.2 - 1)


def test_tron_streamed_rounds_add_the_store_reads_and_the_fit_recovers_stream_ns():
    import dataclasses

    from daskpd.bench import costmodel_tron as ct

    kept_rates = _tron_true()
    true = dataclasses.replace(kept_rates, stream_ns=11.0)
    network = ct.Network(true.hop, 2e9)
    nnz, columns = 4e8, ct.Columns(3e6)
    kept, streamed = ct.Layout(2, 2, 1), ct.Layout(2, 2, 1, streamed=True)
    # a worker reads its 2e8 nonzeros from the store once a CG round, twice a step round
    for kind, reads in (("hessian", 1), ("step", 2), ("numbers", 0), ("gradient", 1)):
        extra = ct.round_seconds(true, kind, nnz, columns, streamed, network) - ct.round_seconds(
            true, kind, nnz, columns, kept, network
        )
        assert extra == pytest.approx(reads * 2e8 * 11e-9)
    # a streamed start reads the labels only: no init_ns term
    assert ct.init_seconds(true, nnz, columns, streamed, network) == pytest.approx(
        true.init_fixed + ct.round_seconds(true, "gradient", nnz, columns, streamed, network)
    )
    times = [
        ct.RoundTime("big", kind, nnz, columns, 2, 2, 1,
                     ct.round_seconds(true, kind, nnz, columns, streamed, network), streamed=True)
        for kind in ("hessian", "step")
    ]  # fmt: skip
    assert ct.fit_stream_ns(kept_rates, times, network).stream_ns == pytest.approx(11.0)
    with pytest.raises(ValueError, match="streamed"):
        ct.fit_stream_ns(kept_rates, [dataclasses.replace(t, streamed=False) for t in times],
                         network)  # fmt: skip


def test_tron_fit_without_refused_steps_borrows_their_rounds_costs():
    from daskpd.bench import costmodel_tron as ct

    times, runs, net = _tron_records(kinds=("hessian", "step"))
    fitted = ct.fit_tron(times, runs, **_apart())
    # a gradient round reads once, the step round twice
    assert fitted.nnz_ns["gradient"] == pytest.approx(4.5 / 2)
    assert fitted.thread_exponent["gradient"] == pytest.approx(0.6)
    assert fitted.fixed["gradient"] == pytest.approx(fitted.fixed["step"])
    assert fitted.fixed["numbers"] == pytest.approx(fitted.fixed["hessian"])
    assert fitted.nnz_ns["hessian"] == pytest.approx(4.0)


@pytest.mark.parametrize(
    "drop, word",
    [
        (lambda r: r.kind == "hessian" and r.nnz < 1e6, "small set"),
        (lambda r: r.kind == "step" and r.nnz > 1e6 and r.threads == 1, "one-thread"),
        (lambda r: r.nnz < 1e6 and r.groups == 8, "two row-group counts"),
    ],
)
def test_tron_fit_names_the_term_it_has_no_record_for(drop, word):
    from daskpd.bench import costmodel_tron as ct

    times, runs, net = _tron_records()
    with pytest.raises(ValueError, match=word):
        ct.fit_tron([r for r in times if not drop(r)], runs, **_apart())
    with pytest.raises(ValueError, match="init"):
        ct.fit_tron(times, [], **_apart())


def test_tron_plan_adds_up_by_hand():
    from daskpd.bench import costmodel_tron as ct

    rates = ct.TronRates(
        nnz_ns={"hessian": 4.0, "step": 5.0, "gradient": 3.0},
        thread_exponent={"hessian": 1.0, "step": 1.0, "gradient": 1.0},
        fixed={"hessian": 0.02, "step": 0.03, "numbers": 0.01, "gradient": 0.02},
        home_ns={"hessian": 2.0, "step": 8.0, "numbers": 0.0, "gradient": 5.0},
        group_ns=0.5, merge_ns=2.0, scatter_ns=1.0, task_seconds=0.001, init_fixed=1.0,
        init_ns=5.0,
    )  # fmt: skip
    job = cm.Job(nnz=1.6e11, n_samples=5e7, n_features=1e7, loss="logistic", alpha=1e-7)
    machines = cm.Machines(count=16, cores=32, memory=256 * 2**30, bandwidth=1.25e9)
    network = ct.Network(latency=0.01, bandwidth=1e9)
    rounds = ct.TronRounds(newton=10, hessian=100, numbers=2, gradient=1)
    plan = ct.plan_tron(rates, rounds, job, machines, network)
    # a group: 1e10 nonzeros, 32 threads; its share on all 1e7 columns (80 MB a vector),
    # made dense on the home (1 ns a column); 4 tree levels, every one crossing; 15 other
    # owners fetch the home's vector; 15 more groups' tasks: 2, 9, 2 and 6 each
    share = 1e7 * (32 * 0.5 + 2.0) * 1e-9 + 1e7 * 1e-9
    # (a share travels with its columns' int32 ids: 12 and 20 bytes a column)
    cg = (1e10 * 4e-9 / 32 + share + 0.02 + 1e7 * 2e-9 + 30 * 0.001
          + 4 * 0.01 + 4 * 1.2e8 / 1e9 + 15 * 8e7 / 1e9)  # fmt: skip
    step = (1e10 * 5e-9 / 32 + 2 * share + 0.03 + 1e7 * 8e-9 + 135 * 0.001
            + 4 * 0.01 + 4 * 2e8 / 1e9 + 15 * 8e7 / 1e9)  # fmt: skip
    numbers = 0.01 + 30 * 0.001 + 4 * 0.01
    gradient = (1e10 * 3e-9 / 32 + 2 * share + 0.02 + 1e7 * 5e-9 + 90 * 0.001
                + 4 * 0.01 + 4 * 2e8 / 1e9)  # fmt: skip
    assert plan["round"]["hessian"] == pytest.approx(cg)
    assert plan["round"]["step"] == pytest.approx(step)
    assert plan["round"]["numbers"] == pytest.approx(numbers)
    assert plan["round"]["gradient"] == pytest.approx(gradient)
    start = 1.0 + 1e10 * 5e-9 + gradient
    assert plan["init"] == pytest.approx(start)
    assert plan["seconds"] == pytest.approx(start + 100 * cg + 10 * step + 2 * numbers
                                            + gradient)  # fmt: skip
    assert plan["passes"] == pytest.approx((1e10 / 32) * 1e-9 * (100 * 4 + 10 * 5 + 2 * 3))
    assert plan["network"] == pytest.approx(
        100 * (0.04 + 0.48 + 1.2) + 10 * (0.04 + 0.8 + 1.2) + 2 * 0.04 + (0.04 + 0.8)
    )
    assert plan["resident"] == pytest.approx(4e10) and plan["fits"]
    assert plan["bytes_home"] == {"in": 4 * 1.2e8, "out": 15 * 8e7}
    tree = ct.plan_tron(rates, rounds, job, machines,
                        dataclasses.replace(network, broadcast="tree"))  # fmt: skip
    assert plan["round"]["hessian"] - tree["round"]["hessian"] == pytest.approx(11 * 8e7 / 1e9)
    assert tree["bytes_home"]["out"] == 4 * 8e7


def test_tron_count_law_recovers_its_exponents():
    from daskpd.bench import costmodel_tron as ct

    def law(alpha, n):
        newton = 3.0 * alpha**-0.1 * n**0.05
        return ct.TronRounds(newton, 0.5 * alpha**-0.2 * n**0.15, 0.1 * newton, 0.05 * newton)

    points = [(a, n, law(a, n)) for a in (1e-4, 1e-5, 1e-6) for n in (2e4, 2e5)]
    fitted = ct.fit_count_law(points)
    assert fitted.coefficients["newton"] == pytest.approx((math.log(3.0), -0.1, 0.05))
    assert fitted.coefficients["hessian"] == pytest.approx((math.log(0.5), -0.2, 0.15))
    assert fitted.shares == pytest.approx({"numbers": 0.1, "gradient": 0.05})
    at = fitted.at(1e-8, 5e7)
    assert at.hessian == pytest.approx(law(1e-8, 5e7).hessian)
    assert at.numbers == pytest.approx(0.1 * at.newton)
    with pytest.raises(ValueError, match="two alphas and two row counts"):
        ct.fit_count_law([p for p in points if p[1] == 2e4])


# -- dual_newton's model (daskpd.bench.costmodel_dual_newton) --------------------------------


def _dn_rates():
    from daskpd.bench import costmodel_dual_newton as cd

    tron = dataclasses.replace(_tron_true(), thread_exponent={"hessian": 1.0, "step": 1.0})
    return cd.DualNewtonRates(
        fixed={"start": 0.05, "cg": 0.02, "line": 0.04, "home": 0.03, "pass": 0.05},
        read_ns={"start": 9.0, "cg": 4.0, "line": 5.0, "home": 4.5, "pass": 10.0},
        share_ns={"start": 3.0, "cg": 2.0, "line": 2.5, "home": 1.0, "pass": 3.0},
        home_ns={"start": 5.0, "cg": 4.0, "line": 6.0, "home": 7.0, "pass": 5.0},
        home_read_ns=6.0,
        tron=tron,
    )


def test_dual_newton_fit_recovers_the_rates_that_made_the_rounds():
    from daskpd.bench import costmodel_dual_newton as cd
    from daskpd.bench import costmodel_tron as ct

    true = _dn_rates()
    net = ct.Network(0.004, 1e9)
    rounds = []
    for nnz, used in ((1e7, 1.72e6), (1e8, 4.05e6)):
        for grid, threads in ((1, 2), (8, 1)):
            layout = ct.Layout(grid, 2, threads)
            for kind in ("start", "cg", "line", "home", "pass"):
                for share in (0.03, 0.2, 1.0):
                    read = nnz * share
                    home_read = 0.3 * nnz * share**2 if kind == "home" else 0.0
                    free = used * share**0.5
                    seconds = cd.round_seconds(true, kind, read, home_read, used, free,
                                               layout, net)  # fmt: skip
                    rounds.append(cd.MeasuredRound(kind, seconds, read, home_read, used, free,
                                                   grid, 2, threads))  # fmt: skip
    fitted = cd.fit_rates(rounds, true.tron, net)
    for name in ("fixed", "read_ns", "share_ns", "home_ns"):
        assert getattr(fitted, name) == pytest.approx(getattr(true, name)), name
    assert fitted.home_read_ns == pytest.approx(true.home_read_ns)
    one = [r for r in rounds if r.kind == "cg"][:1]
    with pytest.raises(ValueError, match="'cg' rounds do not vary"):
        cd.fit_rates(one, true.tron, net)


def test_dual_newton_round_by_hand():
    from daskpd.bench import costmodel_dual_newton as cd
    from daskpd.bench import costmodel_tron as ct

    rates = _dn_rates()
    net = ct.Network(0.01, 1e9, broadcast="tree")
    layout = ct.Layout(16, 16, 32)
    # a CG round reading 1e9 nonzeros over 16 owners, its vectors on 2e6 free columns
    parts = cd.round_parts(rates, "cg", 1e9, 0.0, 1e7, 2e6, layout, net)
    assert parts["passes"] == pytest.approx(1e9 / 16 * 4e-9 / 32)
    # 32 threads' output rows and a merge, on the free columns; the home's image on them
    assert parts["shares"] == pytest.approx(33 * 2e6 * 2e-9)
    assert parts["home"] == pytest.approx(2e6 * 4e-9)
    # one share up 4 crossing levels (12 bytes a column), u down a 4-level tree
    assert parts["network"] == pytest.approx(4 * 0.01 + 4 * 2.4e7 / 1e9 + 4 * 1.6e7 / 1e9)
    assert parts["graph"] == 0.02 and parts["home_passes"] == 0.0
    # a line round: the trial's share and the next CG's, w (all columns) sent; w's algebra
    line = cd.round_parts(rates, "line", 2e9, 0.0, 1e7, 2e6, layout, net)
    assert line["network"] == pytest.approx(2 * (4 * 0.01 + 4 * 2.4e7 / 1e9) + 4 * 8e7 / 1e9)
    assert line["home"] == pytest.approx(1e7 * 6e-9)
    # a pass: its change of w on all the columns, the gradient's share on the free ones
    assert cd.round_parts(rates, "pass", 2e9, 0.0, 1e7, 2e6, layout, net)["shares"] == (
        pytest.approx(33 * (1e7 + 2e6) * 3e-9))  # fmt: skip


def test_dual_newton_counts_and_plan():
    from daskpd.bench import costmodel_dual_newton as cd
    from daskpd.bench import costmodel_tron as ct

    def truth(alpha, n):
        return {"alpha": alpha, "n_samples": n, "newton": 4.0 * alpha**-0.05 * n**0.1,
                "cg": 2.0 * alpha**-0.1 * n**0.2, "passes": 0.5 * alpha**-0.02 * n**0.1 - 1,
                "free": 0.3 * alpha**0.01 * n**-0.2}  # fmt: skip

    points = [truth(a, n) for a in (1e-3, 1e-5, 1e-7) for n in (2e4, 2e5)]
    reads = [("cg", 2.0 * f, f) for f in (0.01, 0.05)] + [
        ("line", 1.0 + 3.0 * f, f) for f in (0.01, 0.05)
    ] + [("pass", 2.0, f) for f in (0.01, 0.05)]  # fmt: skip
    law = cd.fit_counts(points, reads)
    assert law.coefficients["cg"] == pytest.approx((math.log(2.0), -0.1, 0.2))
    assert law.reads["cg"] == pytest.approx((0.0, 2.0), abs=1e-9)
    assert law.reads["line"] == pytest.approx((1.0, 3.0))
    counts = law.at(1e-7, 5e7)
    want = truth(1e-7, 5e7)
    assert counts.cg == pytest.approx(want["cg"]) and counts.passes == pytest.approx(
        want["passes"])  # fmt: skip
    assert counts.read("line", 1e11) == pytest.approx(1e11 * (1 + 3 * want["free"]))
    with pytest.raises(ValueError, match="two alphas and two row counts"):
        cd.fit_counts([p for p in points if p["n_samples"] == 2e4], reads)
    rates = _dn_rates()
    job = cm.Job(nnz=1.6e11, n_samples=5e7, n_features=1e7, loss="hinge", alpha=1e-7)
    machines = cm.Machines(count=16, cores=32, memory=256 * 2**30, bandwidth=1.25e9)
    net = ct.Network(0.01, 1e9, broadcast="tree")
    plan = cd.plan_dual_newton(rates, counts, job, machines, net)
    layout = ct.Layout(16, 16, 32)
    rounds = {k: cd.round_seconds(rates, k, counts.read(k, 1.6e11), 0.0, 1e7, 1e7, layout, net)
              for k in ("cg", "line", "pass")}  # fmt: skip
    reading = rates.tron.init_fixed + 1e10 * rates.tron.init_ns * 1e-9
    start = cd.round_seconds(rates, "start", 3.2e11, 0.0, 1e7, 1e7, layout, net)
    assert plan["init"] == pytest.approx(reading + start)
    assert plan["seconds"] == pytest.approx(
        reading + start + counts.cg * rounds["cg"] + counts.newton * rounds["line"]
        + counts.passes * rounds["pass"])  # fmt: skip
    kept = cd.plan_dual_newton(rates, counts, job, machines, net, kept_rows=True)
    assert kept["seconds"] < plan["seconds"]



def test_dual_newton_plan_caps_the_cg_steps_a_newton_step():
    from daskpd.bench import costmodel_dual_newton as cd
    from daskpd.bench import costmodel_tron as ct

    counts = cd.Counts(newton=10.0, cg=200.0, passes=0.0, free=0.01,
                       reads={"cg": (0.0, 2.0), "line": (1.0, 1.5)})  # fmt: skip
    job = cm.Job(nnz=1.6e11, n_samples=5e7, n_features=1e7, loss="hinge", alpha=1e-7)
    machines = cm.Machines(count=16, cores=32, memory=256 * 2**30, bandwidth=1.25e9)
    net = ct.Network(0.01, 1e9, broadcast="tree")
    plain = cd.plan_dual_newton(_dn_rates(), counts, job, machines, net)
    capped = cd.plan_dual_newton(_dn_rates(), counts, job, machines, net, max_cg=5)
    assert plain["counts"].cg == 200.0 and capped["counts"].cg == 50.0
    assert plain["seconds"] - capped["seconds"] == pytest.approx(150 * plain["round"]["cg"])
