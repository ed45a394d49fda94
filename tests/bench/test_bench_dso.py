"""pipelines/bench_dso.py end to end on a small generated set (its numbers go to BENCHMARKS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# eight LocalClusters started in a subprocess: CI's second call (-m long, issue 49)
pytestmark = [pytest.mark.cluster, pytest.mark.long]

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "pipelines", "bench_dso.py")


def test_bench_dso_runs_every_part(tmp_path):
    out = tmp_path / "results.json"
    command = [
        sys.executable, SCRIPT, "--data", str(tmp_path / "train.zarr"),
        "--test", str(tmp_path / "test.zarr"), "--n-train", "2000", "--n-test", "500",
        "--hash-bits", "16", "--grid", "2", "--repeats", "1", "--epochs", "2", "--rounds", "2",
        "--warmup", "1",
        "--parts", "kernel,epochs,race",
        "--race-epochs", "1", "--race-dcd-passes", "1", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    results = json.loads(out.read_text())
    assert results["data"]["shape"] == [2000, 2**16]
    for row in results["kernel"]:
        assert row["nnz"] == results["data"]["nnz"] > 0
        assert row["kernel_updates_per_s"] > 0 and row["bare_reads_per_s"] > 0
    layouts = [
        (row["n_workers"], row["threads_per_worker"], row["shared_memory"])
        for row in results["epochs"]
    ]
    shm = os.path.isdir("/dev/shm")
    assert layouts == [(1, 1, shm), (2, 1, shm), (2, 1, False), (1, 2, shm)]
    for row in results["epochs"]:
        # 2 rounds of 2 epochs each, after 1 epoch timed apart
        assert len(row["epoch_seconds"]) == len(row["epoch_kernel_seconds"]) == 4
        assert row["epoch_round"] == [0, 0, 1, 1] and len(row["init_seconds"]) == 2
        assert [len(warm) for warm in row["warmup_seconds"]] == [1, 1]
        assert all(seconds > 0 for seconds in row["epoch_kernel_seconds"])
        assert len(row["speedup_by_round"]) == 2 and row["median_speedup"] > 0
    assert results["epochs"][0]["speedup_by_round"] == [1.0, 1.0]
    # 1% positives: a random ranking scores about 0.01
    race = results["race"]
    assert race["liblinear"]["auprc"] > 0.1
    assert race["dso_curve"] and race["dso_curve"][-1]["auprc"] > 0.1
