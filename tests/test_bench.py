"""The peers benchmark suite (``daskpd bench``) end to end on a tiny scale."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import numpy as np
import pytest

from daskpd.bench import (
    BenchConfig,
    MethodResult,
    markdown,
    peer_feasibility,
    plot,
    run_benchmarks,
    score_methods,
)

pytestmark = pytest.mark.cluster


def test_bench_runs_daskpd_and_peers_on_the_same_data(tmp_path):
    config = BenchConfig(
        scales=(2 * 10**5,), workdir=str(tmp_path / "work"), repeats=1, epochs=2, grid=2,
        peers=("liblinear", "sgd", "saga", "dask-ml"), memory_limit="2GiB", dask_ml_iters=(2,),
    )  # fmt: skip
    results = run_benchmarks(config)
    # the raw results are saved beside the datasets
    saved = json.loads((tmp_path / "work" / "results.json").read_text())
    assert saved["config"]["scales"] == [2 * 10**5]
    (scale,) = results["scales"]
    methods = {m["method"]: m for m in scale["methods"]}
    assert set(methods) == {"daskpd DSO", "liblinear", "sgd", "saga", "dask-ml"}
    # SAGA solves logistic regression only: a hinge run says so instead of timing it
    assert methods["saga"]["status"] == "not run" and "logistic" in methods["saga"]["reason"]
    # dask-ml ran (on a cluster of its own) and its ladder has the one rung asked for
    assert methods["dask-ml"]["status"] == "ok" and methods["dask-ml"]["epochs"] == 2
    dso = methods["daskpd DSO"]
    # the DCD start heads the curve, then one point per epoch
    assert len(dso["curve"]) == 1 + config.epochs
    seconds = [point[0] for point in dso["curve"]]
    assert all(s > 0 for s in seconds) and seconds[1:] == sorted(seconds[1:])
    assert math.isfinite(dso["final_gap"]) and dso["final_gap"] >= -1e-9
    assert 0.0 <= dso["final_metric"] <= 1.0
    assert math.isfinite(scale["p_star"]) and scale["p_star"] > 0
    assert methods["liblinear"]["status"] == "ok" and methods["sgd"]["status"] == "ok"
    assert scale["dso_epoch_seconds_1_worker"] > 0 and scale["dso_epoch_seconds_2_workers"] > 0
    text = markdown(results, "daskpd bench --scales 2e5")
    assert "| daskpd DSO | ok |" in text and "| liblinear | ok |" in text
    figures = plot(results, str(tmp_path))
    assert figures and all((tmp_path / name).stat().st_size > 5000 for name in figures)


def test_logistic_run_times_saga_on_the_same_objective(tmp_path):
    config = BenchConfig(
        scales=(10**5,), workdir=str(tmp_path / "work"), repeats=1, epochs=2, grid=2,
        loss="logistic", peers=("liblinear", "saga"), memory_limit="2GiB",
    )  # fmt: skip
    (scale,) = run_benchmarks(config)["scales"]
    methods = {m["method"]: m for m in scale["methods"]}
    saga = methods["saga"]
    assert saga["status"] == "ok" and saga["epochs"] == 10
    # its primal is our logistic objective, at or above the best primal seen
    primals = [point[1] for point in saga["curve"]]
    assert all(math.isfinite(p) and p >= scale["p_star"] * (1 - 1e-9) for p in primals)
    # more SAGA epochs never end much worse than fewer
    assert primals[-1] <= primals[0] * (1 + 1e-6)


def test_p_star_and_auprc_target_come_from_every_point_seen_and_the_peers_only():
    nan = math.nan
    # DSO's start (first point) is better than its end, as at 5e8 nonzeros
    dso = MethodResult("daskpd DSO", curve=[(1.0, 0.50, 0.90), (3.0, 0.70, 0.80)])
    peer = MethodResult("liblinear", curve=[(2.0, 0.60, 0.86)], final_metric=0.86)
    p_star, target = score_methods([dso, peer], reference=nan)
    assert p_star == 0.50 and dso.seconds_to_primal == 1.0 and math.isnan(peer.seconds_to_primal)
    assert target == pytest.approx(0.855) and dso.seconds_to_metric == 1.0
    assert peer.seconds_to_metric == 2.0
    # a reference run below every curve: nobody reaches P* within 1e-3
    p_star, _ = score_methods([dso, peer], reference=0.40)
    assert p_star == 0.40 and math.isnan(dso.seconds_to_primal)
    # no peer ran: no AUPRC target, DSO is not timed against itself
    skipped = MethodResult("vw", status="not run", reason="out of memory")
    p_star, target = score_methods([dso, skipped], reference=nan)
    assert p_star == 0.50 and math.isnan(target) and math.isnan(dso.seconds_to_metric)


def test_target_lines_say_met_not_met_or_why_not_measured():
    from daskpd.bench import target_lines

    def method(name, curve=(), status="ok", reason="", **values):
        row = {"method": name, "status": status, "reason": reason, "curve": list(curve)}
        row.update({"seconds_to_metric": math.nan, "train_seconds": math.nan})
        row.update(values)
        return row

    scale = {
        "dso_epoch_seconds_1_worker": 3.4,
        "dso_epoch_seconds_2_workers": 2.0,
        "methods": [
            method("daskpd DSO", [(2.0, 0.1, 0.88), (5.0, 0.1, 0.90)], seconds_to_metric=2.0),
            method("liblinear", [(4.0, 0.1, 0.87)], final_metric=0.87, train_seconds=4.0),
            method("dask-ml", status="failed", reason="KilledWorker: ..."),
            method("vw", [(1.0, math.nan, 0.80), (9.0, math.nan, 0.89)]),
        ],
    }
    liblinear, dask_ml, vw, workers = target_lines(scale)
    assert "**met**: DSO 2 s, liblinear 4 s" in liblinear
    assert dask_ml.endswith("not measured: dask-ml failed (KilledWorker: ...)")
    # VW's best (0.89) is reached by DSO at 5 s, before VW's 9 s
    assert "**met**" in vw and "0.8900" in vw and "in 5 s" in vw
    assert workers.endswith("**met**: 1.70x")
    scale["methods"][1]["train_seconds"] = 1.0
    assert "**not met**: DSO 2 s, liblinear 1 s" in target_lines(scale)[0]
    # dask-ml ran but never reached the target: its whole run bounds the ratio from below
    scale["methods"][2] = method(
        "dask-ml", [(250.0, math.nan, 0.85)], train_seconds=250.0, final_metric=0.85
    )
    assert target_lines(scale)[1] == (
        "at least 3x faster than dask-ml: **met**: more than 125x (dask-ml does not reach "
        "the target in its 250 s, ending at AUPRC 0.8500; DSO 2 s)"
    )
    scale["methods"][2].update(seconds_to_metric=5.0)
    assert target_lines(scale)[1].endswith("**not met**: 2.5x (dask-ml 5 s, DSO 2 s)")


def test_peer_feasibility_says_why_a_scale_is_not_run():
    # 5e8 nonzeros: 6 GB of CSR, twice that with the peer's copy
    ok, reason = peer_feasibility(5 * 10**8, 10**6, 8 * 2**30)
    assert not ok and "11.2 GiB" in reason and "8.0 GiB" in reason
    assert peer_feasibility(5 * 10**8, 10**6, 16 * 2**30) == (True, "")
    ok, reason = peer_feasibility(3 * 10**9, 10**7, 2**50)
    assert not ok and "int32" in reason


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="dso_init"):
        BenchConfig(dso_init="warm")
    with pytest.raises(ValueError, match="grid"):
        BenchConfig(grid=3, workers=2)
    with pytest.raises(ValueError, match="dask_ml_iters"):
        BenchConfig(dask_ml_iters=(5, 0))
    with pytest.raises(ValueError, match="dask_ml_memory_limit must be a size"):
        BenchConfig(dask_ml_memory_limit="lots")
    with pytest.raises(ValueError, match="dso_eta0"):
        BenchConfig(dso_eta0=0.0)
    with pytest.raises(ValueError, match="dso_svrg_every"):
        BenchConfig(dso_svrg_every=-1)
    with pytest.raises(ValueError, match="dataset 'ridge' is regression"):
        BenchConfig(dataset="ridge", loss="hinge")
    with pytest.raises(ValueError, match="dataset 'ridge' is regression"):
        BenchConfig(dataset="splice", loss="squared")


def test_dso_options_carry_the_step():
    from daskpd.bench import _dso_options
    from daskpd.solvers.dso import DSOOptions

    options = DSOOptions(**_dso_options(BenchConfig(dso_eta0=0.25, dcd_passes=5)))
    assert options.eta0 == options.dual_eta0 == 0.25
    assert options.dcd_passes == 5 and options.init == "dcd"
    default = DSOOptions(**_dso_options(BenchConfig()))
    # the solver's default SVRG period (every epoch from the DCD start), unless asked
    assert default.eta0 is None and default.dual_eta0 is None and default.svrg_every is None
    assert DSOOptions(**_dso_options(BenchConfig(dso_svrg_every=1))).svrg_every == 1
    assert DSOOptions(**_dso_options(BenchConfig(dso_svrg_every=0))).svrg_every == 0
    plain = markdown(
        {"config": asdict(BenchConfig(dso_svrg_every=0)), "machine": {
            "cpus": 2, "memory_gib": 1.0, "python": "3"}, "scales": []},
        "daskpd bench",
    )  # fmt: skip
    assert "its defaults, plain (no SVRG);" in plain
    default_text = markdown(
        {"config": asdict(BenchConfig()), "machine": {
            "cpus": 2, "memory_gib": 1.0, "python": "3"}, "scales": []},
        "daskpd bench",
    )  # fmt: skip
    assert "its defaults, an SVRG snapshot every 1 epoch(s);" in default_text
    text = markdown(
        {"config": asdict(BenchConfig(dso_svrg_every=1, dso_eta0=0.25)), "machine": {
            "cpus": 2, "memory_gib": 1.0, "python": "3"}, "scales": []},
        "daskpd bench",
    )  # fmt: skip
    assert "eta0 = dual_eta0 = 0.25, an SVRG snapshot every 1 epoch(s)" in text


def _memory_limit(dask_worker):
    return dask_worker.memory_manager.memory_limit


def test_dask_ml_gets_workers_of_its_own_memory_limit():
    from dask.utils import parse_bytes

    from daskpd.bench import _peer_cluster

    config = BenchConfig(workers=2, memory_limit="1GiB", dask_ml_memory_limit="1536MiB")
    with _peer_cluster(config, "dask-ml") as client:
        limits = list(client.run(_memory_limit).values())
    assert limits == [parse_bytes("1536MiB")] * 2
    with _peer_cluster(config, "liblinear") as client:
        assert client is None


def test_bench_cli_checks_its_markdown_section_before_measuring(tmp_path, capsys):
    from daskpd.cli import main

    target = tmp_path / "BENCHMARKS.md"
    target.write_text("<!-- section: peers -->\n<!-- end: peers -->\n")
    work = tmp_path / "work"
    argv = ["bench", "--workdir", str(work), "--markdown", str(target)]
    assert main([*argv, "--section", "ooc"]) == 2
    assert "no '<!-- section: ooc -->' marker" in capsys.readouterr().err
    assert main([*argv, "--dask-ml-iters", "5,x"]) == 2
    assert "--dask-ml-iters" in capsys.readouterr().err
    assert not work.exists(), "nothing measured or written"


def test_a_failing_peer_is_reported_and_the_run_goes_on(tmp_path, monkeypatch):
    from daskpd import peers

    def out_of_luck(*args, **kwargs):
        raise RuntimeError("worker exceeded 95% memory budget")

    monkeypatch.setattr(peers, "fit_sgd", out_of_luck)
    config = BenchConfig(
        scales=(10**5,), workdir=str(tmp_path / "work"), repeats=1, epochs=1, grid=2,
        peers=("sgd", "liblinear"), memory_limit="2GiB",
    )  # fmt: skip
    results = run_benchmarks(config)
    (scale,) = results["scales"]
    methods = {m["method"]: m for m in scale["methods"]}
    assert methods["sgd"]["status"] == "failed"
    assert "RuntimeError: worker exceeded 95% memory budget" in methods["sgd"]["reason"]
    assert methods["liblinear"]["status"] == "ok"
    assert "| sgd | failed: RuntimeError" in markdown(results, "daskpd bench")


def test_bench_on_the_real_dna_windows(tmp_path):
    config = BenchConfig(
        dataset="dna", workdir=str(tmp_path / "work"), repeats=1, epochs=3, grid=2,
        peers=("liblinear", "vw"), memory_limit="2GiB", alpha=1e-4,
    )  # fmt: skip
    results = run_benchmarks(config)
    (scale,) = results["scales"]  # one size: the scales do not apply
    # StatLog DNA: 3,186 windows, 767 donor sites; a stratified quarter held out
    assert scale["n_samples"] + scale["n_test"] == 3186
    assert scale["n_test"] == math.ceil(0.25 * 3186)  # scikit-learn rounds the test part up
    assert abs(scale["positive_rate"] - 767 / 3186) < 0.01
    methods = {m["method"]: m for m in scale["methods"]}
    assert all(methods[name]["status"] == "ok" for name in ("daskpd DSO", "liblinear", "vw"))
    # the real donor sites are easy to tell apart (the GT consensus): every method ranks well
    assert methods["liblinear"]["final_metric"] > 0.9
    assert max(point[2] for point in methods["daskpd DSO"]["curve"]) > 0.9
    text = markdown(results, "daskpd bench --dataset dna")
    assert "Data: real DNA: StatLog primate windows, donor sites" in text
    figures = plot(results, str(tmp_path))
    assert [name.rsplit("/", 1)[-1] for name in figures] == ["bench-auprc-dna-1e06.png"]


def test_text_like_sets_share_their_vocabulary(tmp_path):
    from daskpd.bench import _datasets

    config = BenchConfig(dataset="text", workdir=str(tmp_path), positive_rate=0.1)
    train, test = _datasets(config, 2 * 10**5)
    assert train.n_features == test.n_features == 2**20
    assert abs(train.nnz - 2 * 10**5) < 0.1 * 2 * 10**5
    assert test.n_samples == max(1000, train.n_samples // 4)
    # different documents from the same vocabulary: the most frequent columns agree
    top = [np.argsort(np.asarray(s.col_nnz))[-20:] for s in (train, test)]
    assert len(set(top[0]) & set(top[1])) >= 15
    # made once: a second call opens the same stores
    again, _ = _datasets(config, 2 * 10**5)
    assert again.path == train.path and again.nnz == train.nnz


def test_bench_on_the_spdc_ridge_data(tmp_path):
    config = BenchConfig(
        dataset="ridge", loss="squared", scales=(10**6,), workdir=str(tmp_path / "work"),
        repeats=1, epochs=6, grid=2, alpha=1e-2, memory_limit="2GiB", dask_ml_iters=(20,),
        dcd_passes=5, peers=("liblinear", "sgd", "saga", "vw", "dask-ml"),
    )  # fmt: skip
    results = run_benchmarks(config)
    (scale,) = results["scales"]
    assert scale["metric"] == "r2" and scale["n_features"] == 500
    assert scale["n_samples"] == 2000 and scale["nnz"] == 2000 * 500
    methods = {m["method"]: m for m in scale["methods"]}
    # SPDC (the ridge data's own method) and DSO for daskpd; every peer has a regressor
    assert set(methods) == {
        "daskpd DSO",
        "daskpd SPDC",
        "liblinear",
        "sgd",
        "saga",
        "vw",
        "dask-ml",
    }
    assert all(m["status"] == "ok" for m in methods.values()), [
        (m["method"], m["reason"]) for m in methods.values() if m["status"] != "ok"
    ]
    # P* comes from LSQR (or a lower point seen): no method's primal is below it
    primals = [p for m in methods.values() for _, p, _ in m["curve"] if math.isfinite(p)]
    assert min(primals) >= scale["p_star"] * (1 - 1e-9)
    # dask-ml solves the same squared loss here, so its primal is ours and is reported
    assert math.isfinite(methods["dask-ml"]["final_primal"])
    # y = x . 1 + N(0, 1) with var(x . 1) = sum 1/j^2 ~ 1.64: the best R^2 is ~0.62
    for name in ("liblinear", "saga", "dask-ml", "daskpd SPDC"):
        assert 0.5 < methods[name]["final_metric"] < 0.7, (name, methods[name]["final_metric"])
    # SPDC converges linearly on ridge: its primal falls every epoch, to P* within 1e-3
    spdc = [p for _, p, _ in methods["daskpd SPDC"]["curve"]]
    assert len(spdc) == 6 and bool(np.all(np.diff(spdc) < 0))
    assert methods["daskpd SPDC"]["seconds_to_primal"] > 0
    assert "positives" not in markdown(results, "daskpd bench")  # no classes in regression
    text = markdown(results, "daskpd bench --dataset ridge --loss squared")
    assert "s to R^2 target | final R^2" in text and "SPDC paper's ridge data" in text
    assert "R^2 target (best peer - 0.005)" in text and "LSQR to 1e-14 included" in text
    figures = plot(results, str(tmp_path))
    assert [name.rsplit("/", 1)[-1] for name in figures] == ["bench-r2-ridge-1e06.png"]


def test_target_lines_time_the_best_of_daskpd_solvers():
    from daskpd.bench import target_lines

    def method(name, curve, seconds_to_metric, **values):
        row = {"method": name, "status": "ok", "reason": "", "curve": curve}
        row.update({"seconds_to_metric": seconds_to_metric, "train_seconds": math.nan, **values})
        return row

    scale = {
        "metric": "r2",
        "dso_epoch_seconds_1_worker": 1.0,
        "dso_epoch_seconds_2_workers": 1.0,
        "methods": [
            method("daskpd DSO", [(3.0, 0.1, 0.60)], 3.0),
            method("daskpd SPDC", [(1.0, 0.1, 0.61)], 1.0),
            method("liblinear", [(2.0, 0.1, 0.61)], 2.0, final_metric=0.61, train_seconds=2.0),
        ],
    }
    line = target_lines(scale)[0]
    assert (
        line
        == "to liblinear's R^2 - 0.005, no slower than liblinear: **met**: SPDC 1 s, liblinear 2 s"
    )
