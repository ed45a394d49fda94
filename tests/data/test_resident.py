"""Row blocks kept in the workers for the evaluations of a run (daskpd.data.resident)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.data import MemoryDataset, open_dataset, write_dataset
from daskpd.problem import Problem
from daskpd.solvers.common.scores import score_rows

pytestmark = pytest.mark.cluster


def _rows(seed, n=240, d=60):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, random_state=seed, format="csr", dtype=np.float32)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return X, y


def _kept_keys(what, path):
    from daskpd.data import resident

    return sorted(key[2:] for key in resident._KEPT if key[1] == what and key[0][1] == path)


def test_scores_come_from_kept_blocks_and_a_rewritten_dataset_is_read_again(
    local_cluster, tmp_path
):
    path = tmp_path / "test.zarr"
    X, y = _rows(1)
    write_dataset(X, y, path, rows_per_block=40)
    data = open_dataset(path)
    w = np.random.default_rng(2).normal(size=X.shape[1])
    expected = X.astype(np.float64) @ w
    for _ in range(2):
        assert np.allclose(score_rows(w, data, client=local_cluster), expected, rtol=1e-12)
    # every block read once and kept by the worker that scores it in every evaluation
    kept = local_cluster.run(_kept_keys, "block", data.path)
    blocks = sorted(i for keys in kept.values() for (i,) in keys)
    assert blocks == list(range(data.n_row_blocks))
    assert all(keys for keys in kept.values())  # both workers score

    # written again under the same path: a new write id, so no kept block is served
    shutil.rmtree(path)
    X2, y2 = _rows(3)
    write_dataset(X2, y2, path, rows_per_block=40)
    again = open_dataset(path)
    assert np.allclose(
        score_rows(w, again, client=local_cluster), X2.astype(np.float64) @ w, rtol=1e-12
    )


def test_evaluation_from_kept_rows_equals_a_direct_one(local_cluster, tmp_path):
    path = tmp_path / "train.zarr"
    X, y = _rows(4)
    write_dataset(X, y, path, rows_per_block=40)
    data = open_dataset(path)
    problem = Problem("logistic", "l2", 1e-2)
    w = np.random.default_rng(5).normal(size=X.shape[1]) * 0.1
    direct = problem.evaluate(w, data)  # in this process: nothing kept
    for _ in range(2):
        on_cluster = problem.evaluate(w, data, client=local_cluster)
        assert on_cluster.primal == pytest.approx(direct.primal, rel=1e-12)
    kept = local_cluster.run(_kept_keys, "arrays", data.path)
    ranges = sorted({key for keys in kept.values() for key in keys})
    bounds = [int(b) for b in data.row_block_bounds]
    assert ranges == list(zip(bounds[:-1], bounds[1:], strict=True))


def test_test_rows_are_prefetched_where_scoring_asks_for_them(local_cluster, tmp_path, monkeypatch):
    from daskpd._cluster import block_worker, worker_addresses
    from daskpd.data import resident
    from daskpd.solvers.common.scores import prefetch_rows

    path = tmp_path / "test.zarr"
    X, y = _rows(6)
    write_dataset(X, y, path, rows_per_block=30)
    data = open_dataset(path)
    reads = prefetch_rows(data, local_cluster)
    assert len(reads) == data.n_row_blocks
    local_cluster.gather(reads)
    kept = local_cluster.run(_kept_keys, "block", data.path)
    workers = worker_addresses(local_cluster)
    n = data.n_row_blocks
    # each block kept by the worker that score_rows pins it to, and by no other
    assert {a: sorted(i for (i,) in keys) for a, keys in kept.items()} == {
        a: [i for i in range(n) if block_worker(workers, i, n) == a] for a in workers
    }
    w = np.random.default_rng(7).normal(size=X.shape[1])
    assert np.allclose(score_rows(w, data, client=local_cluster), X @ w, rtol=1e-6)

    # nothing for in-memory data, without a client, or when the workers would not keep it
    assert prefetch_rows(data, None) == []
    assert prefetch_rows(MemoryDataset(X, y, rows_per_block=30), local_cluster) == []
    monkeypatch.setattr(resident, "RESIDENT_SHARE", 1e-12)
    assert prefetch_rows(data, local_cluster) == []
