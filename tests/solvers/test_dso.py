"""DSO solver: serial replay (Lemma 2), one compute per epoch, convergence, bad input."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.data import MemoryDataset, partition_dataset, write_dataset
from daskpd.problem import Problem
from daskpd.solvers.driver import solve
from daskpd.solvers.dso import DSO, DSOOptions, serial_replay


def _classification(n=240, d=50, density=0.12, seed=0, empty=False):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=seed, format="csr")
    X.data = rng.uniform(0.2, 1.0, X.nnz)
    if empty:
        # an empty row and an empty column (digest 1.3)
        X = X.tolil()
        X[3, :] = 0
        X[:, 7] = 0
        X = X.tocsr()
        X.eliminate_zeros()
    w_true = rng.normal(size=d)
    y = np.sign(X @ w_true + 0.3 * rng.normal(size=n))
    y[y == 0] = 1.0
    return X, y


def _regression(n=200, d=30, seed=1):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, random_state=seed, format="csr")
    X.data = rng.normal(size=X.nnz)
    y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
    return X, y


def _run(problem, data, options, n_epochs, seed=0, client=None):
    solver = DSO()
    solver.check(problem, data, options)
    state = solver.init(
        problem, data, seed=np.random.SeedSequence(seed), client=client, options=options
    )
    for epoch in range(1, n_epochs + 1):
        state = solver.run_epoch(state, epoch)
    return solver, state


def _assert_equal_to_replay(solver, state, reference, client=None):
    it = solver.iterate(state)
    z = client.gather(it.z) if client is not None else it.z
    z_avg = client.gather(it.z_avg) if client is not None else it.z_avg
    assert np.array_equal(it.w, reference["w"])
    assert np.array_equal(np.concatenate(z), reference["z"])
    assert np.array_equal(it.w_avg, reference["w_avg"])
    assert np.array_equal(np.concatenate(z_avg), reference["z_avg"])
    arrays = solver.state_arrays(state)
    assert np.array_equal(arrays["w_acc"], reference["w_acc"])
    assert np.array_equal(arrays["z_acc"], reference["z_acc"])


# --------------------------------------------------------------------------------------------
# Lemma 2: the scheduled epochs equal the serial replay bit for bit


@pytest.mark.parametrize("scheduler", ["threads", "synchronous"])
@pytest.mark.parametrize(
    "options",
    [
        DSOOptions(grid=3, step="adagrad"),
        # 4 columns a sub-block, chunks of 3 nonzeros: many of both per tile
        DSOOptions(grid=3, step="adagrad", block_bytes=128, chunk_nnz=3, svrg_every=2),
        DSOOptions(grid=4, step="adagrad", visit_order="random", svrg_every=2),
        DSOOptions(grid=2, step="sqrt", visit_order="storage"),
        DSOOptions(grid=2, step="adagrad", visit_order="rows", interleave=1),
        DSOOptions(grid=3, step="adagrad", visit_order="blocked", block_bytes=128, interleave=3),
    ],
    ids=[
        "adagrad-shuffled",
        "adagrad-shuffled-small-svrg",
        "adagrad-random-svrg",
        "sqrt-storage",
        "adagrad-rows",
        "adagrad-blocked-small",
    ],
)
def test_local_schedulers_equal_serial_replay(scheduler, options):
    X, y = _classification(empty=True)
    data = MemoryDataset(X, y)
    problem = Problem("logistic", "l2", 1e-2)
    with dask.config.set(scheduler=scheduler):
        solver, state = _run(problem, data, options, n_epochs=3, seed=11)
    reference = serial_replay(problem, data, n_epochs=3, seed=11, options=options)
    _assert_equal_to_replay(solver, state, reference)


def test_on_disk_dataset_equals_serial_replay(tmp_path):
    X, y = _classification(n=300, d=60)
    write_dataset(X.astype(np.float32), y, tmp_path / "d.zarr", rows_per_block=70)
    data = partition_dataset(tmp_path / "d.zarr", grid=3)
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=3, init="dcd", dcd_passes=3, svrg_every=1)
    with dask.config.set(scheduler="threads"):
        solver, state = _run(problem, data, options, n_epochs=2, seed=4)
    reference = serial_replay(problem, data, n_epochs=2, seed=4, options=options)
    _assert_equal_to_replay(solver, state, reference)


def test_tile_cache_stays_under_half_the_worker_limit(tmp_path, monkeypatch):
    import psutil

    from daskpd.solvers import dso
    from daskpd.solvers.dso import _tiles

    X, y = _classification(n=200, d=40)
    data = partition_dataset(write_dataset(X, y, tmp_path / "d.zarr").path, grid=2)
    problem = Problem("hinge", "l2", 1e-2)
    settings = dso._settings(problem, data, DSOOptions(grid=2), 2)
    monkeypatch.setattr(_tiles, "_TILE_CACHE", {})
    monkeypatch.setattr(_tiles, "_CACHE_USED", [0])
    rss = psutil.Process().memory_info().rss
    # a worker already at 60% of its limit: no tile is kept, however large the budget
    monkeypatch.setattr(_tiles, "worker_memory_limit", lambda: int(rss / 0.6))
    dso._load_tile(data, settings, 0, 0)
    assert _tiles._TILE_CACHE == {} and _tiles._CACHE_USED == [0]
    # far below half of it: the tile is kept, and a second load is the same object
    monkeypatch.setattr(_tiles, "worker_memory_limit", lambda: 8 * rss)
    tile = dso._load_tile(data, settings, 0, 0)
    assert len(_tiles._TILE_CACHE) == 1 and _tiles._CACHE_USED[0] == sum(a.nbytes for a in tile)
    assert dso._load_tile(data, settings, 0, 0) is tile


def test_same_seed_same_bits_other_seed_other_bits():
    X, y = _classification()
    data = MemoryDataset(X, y)
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=2)
    first = serial_replay(problem, data, n_epochs=2, seed=1, options=options)
    again = serial_replay(problem, data, n_epochs=2, seed=1, options=options)
    other = serial_replay(problem, data, n_epochs=2, seed=2, options=options)
    assert np.array_equal(first["w"], again["w"])
    assert not np.array_equal(first["w"], other["w"])


def test_one_compute_per_epoch(counting_scheduler):
    X, y = _classification()
    data = MemoryDataset(X, y)
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=3, svrg_every=1)
    solver = DSO()
    state = solver.init(problem, data, seed=np.random.SeedSequence(0), client=None, options=options)
    before = counting_scheduler.calls
    for epoch in range(1, 4):
        state = solver.run_epoch(state, epoch)
        assert counting_scheduler.calls == before + epoch
    # the whole epoch is in that one graph: 9 tile tasks at least
    assert counting_scheduler.tasks >= 3 * 9


@pytest.mark.parametrize(
    "options",
    [
        DSOOptions(grid=2, svrg_every=2),
        # the default SVRG period depends on the start; restore rebuilds from zero, so the
        # checkpoint must carry the period the run resolved (1 here)
        DSOOptions(grid=2, init="dcd", dcd_passes=2),
    ],
    ids=["svrg-2", "dcd-default-svrg"],
)
def test_resume_from_state_arrays_equals_uninterrupted_run(options):
    X, y = _classification()
    data = MemoryDataset(X, y)
    problem = Problem("logistic", "l2", 1e-2)
    solver, state = _run(problem, data, options, n_epochs=3, seed=5)
    assert state.settings.svrg_every in (1, 2)
    arrays = solver.state_arrays(state)
    restored = solver.restore(
        problem, data, arrays, seed=np.random.SeedSequence(5), client=None, options=options
    )
    for epoch in (4, 5):
        state = solver.run_epoch(state, epoch)
        restored = solver.run_epoch(restored, epoch)
    assert np.array_equal(solver.iterate(state).w, solver.iterate(restored).w)
    assert np.array_equal(
        np.concatenate(solver.iterate(state).z), np.concatenate(solver.iterate(restored).z)
    )


# --------------------------------------------------------------------------------------------
# boxes and edge cases


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_box_invariants_under_large_steps(loss):
    X, y = _classification(empty=True)
    data = MemoryDataset(X, y)
    alpha = 1e-2
    problem = Problem(loss, "l2", alpha)
    options = DSOOptions(grid=2, step="sqrt", eta0=1e4, dual_eta0=1e4)
    result = serial_replay(problem, data, n_epochs=3, seed=0, options=options)
    bound = 1 / np.sqrt(alpha) if loss == "hinge" else np.sqrt(np.log(2) / alpha)
    assert np.all(np.isfinite(result["w"])) and np.all(np.isfinite(result["z"]))
    assert np.max(np.abs(result["w"])) <= bound
    # huge steps push coordinates onto the box
    assert np.isclose(np.max(np.abs(result["w"])), bound)
    a = -y * result["z"]  # DSO's alpha in [0, 1] (logistic: [1e-14, 1 - 1e-14])
    lo, hi = (0.0, 1.0) if loss == "hinge" else (1e-14, 1 - 1e-14)
    assert np.all((a >= lo) & (a <= hi))
    # the empty column never moves from 0; the empty row keeps the optimal z = loss'(0, y)
    assert result["w"][7] == 0.0
    assert result["z"][3] == pytest.approx(-y[3] * (1.0 if loss == "hinge" else 0.5))


def test_row_weights_scale_the_dual_box():
    X, y = _classification()
    weights = np.linspace(0.5, 2.0, y.shape[0])
    data = MemoryDataset(X, y, sample_weight=weights)
    problem = Problem("hinge", "l2", 1e-2, class_weight={1: 3.0})
    options = DSOOptions(grid=2, step="sqrt", eta0=1e4, dual_eta0=1e4)
    result = serial_replay(problem, data, n_epochs=2, seed=0, options=options)
    c = weights * np.where(y > 0, 3.0, 1.0)
    a = -y * result["z"]
    assert np.all(a >= 0) and np.all(a <= c * (1 + 1e-15))
    assert np.any(a > 1.0)  # rows of weight > 1 use their larger box


# --------------------------------------------------------------------------------------------
# convergence against independent solvers


def _relative(value, reference):
    return (value - reference) / abs(reference)


def test_hinge_l2_reaches_liblinear_objective_and_gap_falls():
    from sklearn.svm import LinearSVC

    X, y = _classification(n=300, d=40, seed=3)
    alpha = 1e-2
    n = X.shape[0]
    problem = Problem("hinge", "l2", alpha)
    data = MemoryDataset(X, y)
    svc = LinearSVC(
        loss="hinge",
        C=1 / (alpha * n),
        fit_intercept=False,
        tol=1e-10,
        max_iter=200000,
        random_state=0,
    )
    svc.fit(X, y)
    optimum = problem.evaluate(svc.coef_.ravel(), data).primal
    result = solve(
        data, "hinge", "l2", alpha, "dso", max_epochs=150, tol=1e-7, client=False,
        eval_every=10, grid=2, svrg_every=1, init="zero",
    )  # fmt: skip
    # DSO's own convergence, from zero (the default start is the dual solver's, certified)
    gaps = [row["gap"] for row in result.history]
    assert gaps[-1] < 1e-3 and gaps[-1] < gaps[0] / 100
    assert _relative(result.primal, optimum) < 1e-3


def test_logistic_l2_reaches_sklearn_objective():
    from sklearn.linear_model import LogisticRegression

    X, y = _classification(n=300, d=40, seed=4)
    alpha = 1e-2
    n = X.shape[0]
    problem = Problem("logistic", "l2", alpha)
    data = MemoryDataset(X, y)
    reference = LogisticRegression(C=1 / (alpha * n), fit_intercept=False, tol=1e-12)
    reference.fit(X, y)
    optimum = problem.evaluate(reference.coef_.ravel(), data).primal
    result = solve(
        data, "logistic", "l2", alpha, "dso", max_epochs=100, tol=1e-9, client=False,
        eval_every=10, grid=3, svrg_every=1,
    )  # fmt: skip
    assert result.gap < 1e-4
    assert abs(_relative(result.primal, optimum)) < 1e-3


@pytest.mark.parametrize("regularizer", ["l1", "elasticnet"])
def test_sparse_regularizers_reach_coordinate_descent_objective(regularizer):
    from sklearn.linear_model import ElasticNet, Lasso

    X, y = _regression()
    alpha = 0.05
    data = MemoryDataset(X, y)
    problem = Problem("squared", regularizer, alpha)
    if regularizer == "l1":
        reference = Lasso(alpha=alpha, fit_intercept=False, tol=1e-14, max_iter=100000)
    else:
        ratio = float(problem.regularizer.params[0])
        reference = ElasticNet(
            alpha=alpha, l1_ratio=ratio, fit_intercept=False, tol=1e-14, max_iter=100000
        )
    reference.fit(X.toarray(), y)
    optimum = problem.evaluate(reference.coef_, data).primal
    # the replay is the scheduled run bit for bit (tests above) and avoids per-epoch overhead
    options = DSOOptions(grid=2, svrg_every=1)
    result = serial_replay(problem, data, n_epochs=200, seed=0, options=options)
    evaluation = problem.evaluate(result["w"], data, z=result["z"])
    assert abs(_relative(evaluation.primal, optimum)) < 1e-3


# --------------------------------------------------------------------------------------------
# bad input: clear errors before any Dask work


def test_on_disk_dataset_without_grid_says_how_to_partition(tmp_path):
    X, y = _classification()
    data = write_dataset(X, y, tmp_path / "plain.zarr")
    problem = Problem("hinge", "l2", 1e-2)
    with pytest.raises(ValueError, match="daskpd partition .*--grid 4"):
        DSO().check(problem, data, DSOOptions(grid=4))


def test_grid_too_large():
    X, y = _classification(n=30, d=6)
    problem = Problem("hinge", "l2", 1e-2)
    with pytest.raises(ValueError, match="grid=7 is too large"):
        DSO().check(problem, MemoryDataset(X, y), DSOOptions(grid=7))


@pytest.mark.parametrize(
    ("loss", "regularizer", "message"),
    [
        ("squared_hinge", "l2", "does not support loss='squared_hinge'"),
        ("huber", "l2", "does not support loss='huber'"),
        ("hinge", "zero", "does not support regularizer='zero'"),
    ],
)
def test_unsupported_pairs(loss, regularizer, message):
    X, y = _classification()
    with pytest.raises(ValueError, match=message):
        solve(MemoryDataset(X, y), loss, regularizer, 1e-2, "dso", max_epochs=1, client=False)


@pytest.mark.parametrize(("loss", "regularizer"), [("absolute", "l2"), ("squared", "l1")])
def test_dcd_init_needs_l2_with_hinge_logistic_or_squared(loss, regularizer):
    X, y = _regression()
    problem = Problem(loss, regularizer, 1e-2)
    with pytest.raises(ValueError, match="init='dcd' needs"):
        DSO().check(problem, MemoryDataset(X, y), DSOOptions(init="dcd"))


def test_dcd_start_on_the_squared_loss_is_the_ridge_solution():
    X, y = _regression()
    alpha = 1e-2
    n, d = X.shape
    dense = X.toarray()
    exact = np.linalg.solve(dense.T @ dense / n + alpha * np.eye(d), dense.T @ y / n)
    problem = Problem("squared", "l2", alpha)
    data = MemoryDataset(X, y)
    solver = DSO()
    # one row group: the local ascent is dual coordinate ascent on the whole problem
    options = DSOOptions(grid=1, init="dcd", dcd_passes=200)
    state = solver.init(problem, data, seed=np.random.SeedSequence(0), client=None, options=options)
    it = solver.iterate(state)
    np.testing.assert_allclose(it.w, exact, atol=1e-9)
    # the dual block is the residual, z_i = x_i.w - y_i: the gap closes with w
    np.testing.assert_allclose(np.concatenate(it.z), X @ exact - y, atol=1e-8)
    assert problem.evaluate(it.w, data).gap < 1e-12
    # two row groups: an average of two local ridge solutions, which DSO's epochs improve
    options = DSOOptions(grid=2, init="dcd", dcd_passes=20)
    state = solver.init(problem, data, seed=np.random.SeedSequence(0), client=None, options=options)
    start = problem.evaluate(solver.iterate(state).w, data)
    zero = problem.evaluate(np.zeros(d), data)
    assert start.primal < zero.primal / 2
    fit = solve(data, "squared", "l2", alpha, "dso", max_epochs=20, tol=0.0, client=False,
                grid=2, init="dcd", dcd_passes=20, svrg_every=1)  # fmt: skip
    assert fit.history[-1]["gap"] < start.gap / 10


def test_bad_option_values():
    with pytest.raises(ValueError, match="visit_order must be one of"):
        DSOOptions(visit_order="diagonal")
    with pytest.raises(ValueError, match="grid must be a positive integer"):
        DSOOptions(grid=0)
    with pytest.raises(ValueError, match="unknown option"):
        X, y = _classification()
        solve(MemoryDataset(X, y), "hinge", "l2", 1e-2, "dso", client=False, gird=2)


def test_blocked_order_visits_every_segment_once_sub_block_by_sub_block():
    from daskpd.solvers import dso

    X, y = _classification(empty=True)
    data = MemoryDataset(X, y)
    data.partition(2)
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=2, visit_order="blocked", block_bytes=128)  # 4 columns a sub-block
    settings = dso._settings(problem, data, options, 2)
    rows, cols, vals = data.tile(2, 0, 1)
    tile = dso._load_tile((rows, cols, vals), settings, 0, 1)
    segment_ptr, block_ptr = tile[3], tile[4]
    assert block_ptr.shape[0] > 3  # several sub-blocks, or the check below says little
    order = dso._visit_order(tile, settings, np.random.SeedSequence(5), 1, 0, 1)
    assert np.array_equal(np.sort(order), np.arange(segment_ptr.shape[0] - 1))
    block_of = np.searchsorted(block_ptr, order, side="right") - 1
    # each sub-block's segments come together, and the sub-blocks are not in storage order
    changes = np.flatnonzero(np.diff(block_of)) + 1
    visited = block_of[np.r_[0, changes]]
    assert np.array_equal(np.sort(visited), np.arange(block_ptr.shape[0] - 1))
    other = dso._visit_order(tile, settings, np.random.SeedSequence(5), 2, 0, 1)
    assert not np.array_equal(order, other)  # a new order every epoch


def test_shuffled_layout_is_a_permutation_chunked_inside_sub_blocks():
    from daskpd.solvers import dso

    X, y = _classification(n=400, d=60)
    data = MemoryDataset(X, y)
    data.partition(2)
    problem = Problem("hinge", "l2", 1e-2)
    options = DSOOptions(grid=2, block_bytes=256, chunk_nnz=5)  # 8 columns a sub-block
    settings = dso._settings(problem, data, options, 2)
    rows, cols, vals = data.tile(2, 1, 0)
    tile = dso._load_tile((rows, cols, vals), settings, 1, 0)
    s_rows, s_cols, s_vals, chunk_ptr, block_ptr = tile
    # the same nonzeros, not in storage order
    before = sorted(zip(rows.tolist(), cols.tolist(), vals.tolist(), strict=True))
    after = sorted(zip(s_rows.tolist(), s_cols.tolist(), s_vals.tolist(), strict=True))
    assert before == after
    assert not np.array_equal(s_rows, np.sort(s_rows))
    assert block_ptr.shape[0] > 3
    for b in range(block_ptr.shape[0] - 1):
        lo, hi = chunk_ptr[block_ptr[b]], chunk_ptr[block_ptr[b + 1]]
        assert np.unique(s_cols[lo:hi] // settings.block_cols).shape[0] <= 1
        sizes = np.diff(chunk_ptr[block_ptr[b] : block_ptr[b + 1] + 1])
        assert sizes.max(initial=0) <= 5 and sizes.min(initial=1) >= 1
        # below MIN_CHUNKS * chunk_nnz nonzeros the chunks shrink: one or two each here
        assert sizes.shape[0] >= min(hi - lo, dso.MIN_CHUNKS) // 2
    # the layout is a function of the tile's place, not of the run's seed
    again = dso._load_tile((rows, cols, vals), settings, 1, 0)
    assert all(np.array_equal(a, b) for a, b in zip(tile, again, strict=True))

    def order(seed, epoch):
        return dso._visit_order(tile, settings, np.random.SeedSequence(seed), epoch, 1, 0)

    assert np.array_equal(np.sort(order(5, 1)), np.arange(chunk_ptr.shape[0] - 1))
    assert not np.array_equal(order(5, 1), order(5, 2))  # a new order every epoch
    assert not np.array_equal(order(5, 1), order(6, 1))  # and with every seed


def test_output_pool_reuses_a_buffer_only_when_no_view_of_it_is_left():
    import gc
    import pickle

    from daskpd.solvers import dso

    def address(array):
        return array.__array_interface__["data"][0]

    pool = dso._OutputPool()
    first = pool.empty(1000)
    first[:] = 1.0
    view = first[10:20]
    where = address(first)
    del first
    gc.collect()
    second = pool.empty(1000)
    assert address(second) != where  # the view still holds the buffer
    second[:] = 2.0
    assert np.all(view == 1.0)
    del view
    gc.collect()
    third = pool.empty(1000)
    assert address(third) == where  # given back once nothing viewed it
    assert address(pool.empty(999)) != where  # only a buffer of the same length is reused
    third[:] = 3.0
    assert np.array_equal(pickle.loads(pickle.dumps(third)), np.full(1000, 3.0))


def test_epochs_after_the_dcd_start_keep_improving_it(tmp_path):
    from daskpd.generators import make_splice_like

    path = tmp_path / "splice.zarr"
    make_splice_like(path, 3000, degree=6, hash_bits=16, random_state=0)
    data = partition_dataset(path, grid=2)
    problem = Problem("hinge", "l2", 1e-4)
    solver = DSO()
    options = DSOOptions(grid=2, init="dcd", dcd_passes=3)
    state = solver.init(problem, data, seed=np.random.SeedSequence(0), client=None, options=options)
    start = problem.evaluate(solver.iterate(state).w, data)
    common = dict(
        max_epochs=3, tol=0.0, client=False, eval_every=1, grid=2, init="dcd", dcd_passes=3
    )
    kept = solve(data, "hinge", "l2", 1e-4, "dso", **common)
    assert all(row["primal"] <= start.primal for row in kept.history)
    assert kept.history[-1]["gap"] < start.gap / 10
    # from a start, SVRG is on by default; the plain updates close the gap far less
    plain = solve(data, "hinge", "l2", 1e-4, "dso", svrg_every=0, **common)
    # measured: 0.0046 against 0.011 after 3 epochs, the plain gap rising from epoch 1
    assert kept.history[-1]["gap"] < plain.history[-1]["gap"] / 2
    # the zero-start step throws the start away: why a start gets its own default step
    thrown = solve(data, "hinge", "l2", 1e-4, "dso", eta0=0.5, dual_eta0=0.5, **common)
    assert thrown.history[0]["primal"] > 2 * start.primal


def test_cocoa_start_is_certified_and_the_epochs_keep_it(tmp_path):
    from daskpd.generators import make_splice_like

    path = tmp_path / "splice.zarr"
    make_splice_like(path, 3000, degree=6, hash_bits=16, random_state=0)
    data = partition_dataset(path, grid=2)
    problem = Problem("hinge", "l2", 1e-4)
    optimum = solve(data, "hinge", "l2", 1e-4, "cocoa", tol=1e-12, max_epochs=200, client=False)
    assert optimum.converged
    solver = DSO()
    options = DSOOptions(grid=2, init="cocoa", start_gap=1e-3)
    state = solver.init(problem, data, seed=np.random.SeedSequence(0), client=None, options=options)
    start = problem.evaluate(solver.iterate(state).w, data)
    # the start stopped at a certified 1e-3 gap, so its primal is that close to P*
    assert optimum.primal <= start.primal <= (1 + 1e-3) * optimum.primal
    assert start.primal > optimum.primal  # a start, not the optimum
    common = dict(max_epochs=4, tol=0.0, client=False, grid=2, eval_every=1)
    kept = solve(data, "hinge", "l2", 1e-4, "dso", init="cocoa", **common)
    # the start's dual came along (from w alone the dual would start far below) and the
    # epochs, with the start's step and SVRG, stay near the optimum
    assert kept.history[0]["gap"] < 2e-3 * optimum.primal
    assert all(row["primal"] <= (1 + 2e-3) * optimum.primal for row in kept.history)
    # "auto" is that start for a problem the dual solver takes, the zero start otherwise
    auto = solve(data, "hinge", "l2", 1e-4, "dso", **common)
    assert np.array_equal(auto.w, kept.w)
    zero = solve(data, "hinge", "l2", 1e-4, "dso", init="zero", **common)
    assert not np.array_equal(zero.w, kept.w)
    lasso = dict(common, max_epochs=2)
    auto_l1 = solve(data, "hinge", "l1", 1e-4, "dso", **lasso)
    zero_l1 = solve(data, "hinge", "l1", 1e-4, "dso", init="zero", **lasso)
    assert np.array_equal(auto_l1.w, zero_l1.w)
    with pytest.raises(ValueError, match="cocoa"):
        solve(data, "hinge", "l1", 1e-4, "dso", init="cocoa", **lasso)
    with pytest.raises(ValueError, match="start_rounds"):
        DSOOptions(start_rounds=0)


def test_cocoa_start_is_the_runs_epoch_0_row_and_dso_still_runs(tmp_path):
    # the start's certificate is reported (epoch 0) without a pass, equal to an independent
    # evaluation of the start's point; a tol it meets does not end the run before DSO's
    # first epoch, a callback's stop does
    from daskpd.generators import make_splice_like

    path = tmp_path / "splice.zarr"
    make_splice_like(path, 3000, degree=6, hash_bits=16, random_state=0)
    data = partition_dataset(path, grid=2)
    problem = Problem("hinge", "l2", 1e-4)
    seen = []
    common = dict(client=False, grid=2, eval_every=1, init="cocoa", start_gap=1e-3)
    run = solve(data, "hinge", "l2", 1e-4, "dso", max_epochs=2, tol=0.0,
                callbacks=[lambda info: seen.append(info.epoch)], **common)  # fmt: skip
    first = run.history[0]
    assert [r["epoch"] for r in run.history] == [0, 1, 2] and seen == [0, 1, 2]
    assert first["certificate_only"] and first["gap"] <= 1e-3 * first["primal"]
    solver = DSO()
    options = DSOOptions(grid=2, init="cocoa", start_gap=1e-3)
    state = solver.init(problem, data, seed=np.random.SeedSequence(0), client=None, options=options)
    start = solver.iterate(state)
    assert solver.start_certificate(state) == (first["primal"], first["dual"])
    evaluated = problem.evaluate(start.w, data, z=start.z, z_bounds=start.z_bounds)
    assert first["primal"] == pytest.approx(evaluated.primal, rel=1e-12)
    # the dual of the start's z (DSO keeps it clipped to its box: the same z here)
    assert first["dual"] == pytest.approx(evaluated.dual, rel=1e-9)
    met = solve(data, "hinge", "l2", 1e-4, "dso", max_epochs=3, tol=1.01 * first["gap"],
                **common)  # fmt: skip
    assert met.n_epochs >= 1 and met.history[-1]["epoch"] == met.n_epochs
    assert met.history[0]["epoch"] == 0
    stopped = solve(data, "hinge", "l2", 1e-4, "dso", max_epochs=3, tol=0.0,
                    callbacks=[lambda info: True], **common)  # fmt: skip
    assert stopped.stop_reason == "callback" and stopped.n_epochs == 0
    assert [r["epoch"] for r in stopped.history] == [0]
    assert not stopped.history[0].get("certificate_only", False)
    assert np.array_equal(stopped.w, start.w)
    assert stopped.history[0]["primal"] == pytest.approx(evaluated.primal, rel=1e-12)
    # other starts have no epoch-0 row
    zero = solve(data, "hinge", "l2", 1e-4, "dso", max_epochs=1, tol=0.0, client=False, grid=2,
                 init="zero")  # fmt: skip
    assert [r["epoch"] for r in zero.history] == [1]


@pytest.mark.parametrize("snapshots", [False, True])
def test_column_block_is_packed_at_home_and_plain_in_transit(snapshots):
    import pickle

    from dask.sizeof import sizeof

    from daskpd.solvers.dso._blocks import _ColumnBlock

    rng = np.random.default_rng(0)
    n = 1000
    w, w_acc, inv = rng.normal(size=n), rng.uniform(size=n), rng.uniform(size=n)
    w_snap, u_snap = (rng.normal(size=n), rng.normal(size=n)) if snapshots else (w[:0], w[:0])
    block = _ColumnBlock(w, w_acc, w_snap, u_snap)
    assert block.records is None
    packed = block.packed(inv)
    records = packed.records
    assert records.shape == (n, 8 if snapshots else 4)
    assert np.array_equal(records[:, 2], inv)
    records[:, 0] += 1.0  # a task's update
    # the next task on this worker updates these same records
    assert packed.packed(inv) is packed and packed.shared is None
    assert np.array_equal(packed[0], w + 1.0) and np.array_equal(packed[1], w_acc)
    assert sizeof(packed) == records.nbytes
    # pickled (to another worker, the client or disk): the four arrays, contiguous
    sent = pickle.loads(pickle.dumps(packed, protocol=5))
    for got, want in zip(sent, (w + 1.0, w_acc, w_snap, u_snap), strict=True):
        assert got.flags.c_contiguous and np.array_equal(got, want)
    assert sizeof(sent) == (4 if snapshots else 2) * n * 8
    # and packed again on arrival, into new records
    assert np.array_equal(sent.packed(inv).records, records)


def test_a_shared_column_block_travels_as_its_file_name(tmp_path, monkeypatch):
    import pickle

    from daskpd.solvers.common import shared as _shared
    from daskpd.solvers.dso._blocks import _ColumnBlock

    # any directory serves for the test (a machine's is /dev/shm); a second one stands for
    # another machine's
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(there))
    other_domain = _shared.join("daskpd-run")
    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(here))
    domain = _shared.join("daskpd-run")
    assert domain is not None and _shared.join("daskpd-run") == domain != other_domain

    rng = np.random.default_rng(1)
    n = 100_000
    w, w_acc, inv = rng.normal(size=n), rng.uniform(size=n), rng.uniform(size=n)
    block = _ColumnBlock(w, w_acc, w[:0], w[:0]).packed(inv, share=("daskpd-run", "w0"))
    assert block.shared[:3] == ("daskpd-run", "w0", domain)
    assert np.array_equal(block[0], w) and np.array_equal(block[1], w_acc)
    # a handle, not the 1.6 MB of arrays
    message = pickle.dumps(block, protocol=5)
    assert len(message) < 1000
    other = pickle.loads(message)
    # the same pages: an update through one is seen through the other, in place
    other.records[:, 0] += 1.0
    assert np.array_equal(block[0], w + 1.0)
    assert other.shared == block.shared and other.packed(inv) is other
    # plain: what goes to another machine
    plain = block.plain()
    assert plain.records is None and plain.shared is None
    for got, want in zip(plain, (w + 1.0, w_acc, w[:0], w[:0]), strict=True):
        assert np.array_equal(got, want)
    # another machine does not map it, even where a run of the same name exists
    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(there))
    with pytest.raises(RuntimeError, match="another machine"):
        pickle.loads(message)
    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(here))
    # a handle never maps a newer file that replaced its own
    newer = _ColumnBlock(w, w_acc, w[:0], w[:0]).packed(inv, share=("daskpd-run", "w0"))
    assert newer.shared[3] != block.shared[3]
    with pytest.raises(RuntimeError, match="replaced"):
        pickle.loads(message)
    assert np.array_equal(block[0], w + 1.0)  # mapped pages outlive their file's name
    # the run's files go with remove(); mapped arrays stay readable
    _shared.remove("daskpd-run")
    assert not (here / "daskpd-run").exists()
    with pytest.raises(FileNotFoundError, match="gone"):
        pickle.loads(pickle.dumps(newer, protocol=5))
    assert np.array_equal(newer[0], w)


def test_a_process_keeps_its_shared_arrays_mapped(tmp_path, monkeypatch):
    from daskpd.solvers.common import shared as _shared

    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(tmp_path))
    _shared.join("daskpd-run")
    made, handle = _shared.create("daskpd-run", "w0", (1000, 4))
    again, other = _shared.attach(handle, (1000, 4)), _shared.attach(handle, (1000, 4))
    # the same addresses: no new mapping (and no page faults) when a block comes back
    assert np.shares_memory(made, again) and np.shares_memory(again, other)
    assert again is not other and again is not made
    # a newer file of the same name is mapped afresh; the old handle is refused
    newer, newer_handle = _shared.create("daskpd-run", "w0", (1000, 4))
    assert not np.shares_memory(_shared.attach(newer_handle, (1000, 4)), made)
    with pytest.raises(RuntimeError, match="replaced"):
        _shared.attach(handle, (1000, 4))
    # another shape of the same file is mapped afresh, not served from the kept mapping
    assert _shared.attach(newer_handle, (4000,)).shape == (4000,)
    # removing the run lets this process's mappings go (the arrays held stay readable)
    _shared.remove("daskpd-run")
    assert not [p for p in _shared._MAPPED if p.startswith(str(tmp_path))]
    newer[0, 0] = 1.0
    assert again[0, 0] == 0.0 and newer[0, 0] == 1.0


def test_kept_mappings_stay_within_a_share_of_the_worker_limit(tmp_path, monkeypatch):
    import daskpd._cluster
    from daskpd.solvers.common import shared as _shared

    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(tmp_path))
    _shared.join("daskpd-run")
    nbytes = 1000 * 4 * 8
    # room for one block's mapping: the first stays kept, the second is mapped per use
    limit = int(1.5 * nbytes / _shared.KEEP_FRACTION)
    monkeypatch.setattr(daskpd._cluster, "worker_memory_limit", lambda: limit)
    first, first_handle = _shared.create("daskpd-run", "w0", (1000, 4))
    second, second_handle = _shared.create("daskpd-run", "w1", (1000, 4))
    assert np.shares_memory(_shared.attach(first_handle, (1000, 4)), first)
    assert not np.shares_memory(_shared.attach(second_handle, (1000, 4)), second)
    # still the same pages: a write through one mapping shows through the other
    _shared.attach(second_handle, (1000, 4))[0, 0] = 2.0
    assert second[0, 0] == 2.0
    _shared.remove("daskpd-run")


def test_no_shared_memory_where_the_directory_is_missing(tmp_path, monkeypatch):
    from daskpd.solvers.common import shared as _shared

    monkeypatch.setenv(_shared.ROOT_VARIABLE, str(tmp_path / "missing"))
    assert _shared.root() is None and _shared.join("daskpd-run") is None
    with pytest.raises(OSError, match="no shared-memory directory"):
        _shared.create("daskpd-run", "w0", (8,))


def test_a_state_is_spent_by_run_epoch():
    # run_epoch updates the w blocks of the state it was given in place; that state's w no
    # longer is its epoch's, so reading it or running from it again is refused
    X, y = _classification()
    problem = Problem("hinge", "l2", 1e-2)
    solver, state = _run(problem, MemoryDataset(X, y), DSOOptions(grid=2), n_epochs=1)
    w_before = solver.iterate(state).w
    after = solver.run_epoch(state, 2)
    for use in (
        lambda: solver.run_epoch(state, 2),
        lambda: solver.iterate(state),
        lambda: solver.state_arrays(state),
    ):
        with pytest.raises(ValueError, match="was given to run_epoch"):
            use()
    assert not np.array_equal(solver.iterate(after).w, w_before)
