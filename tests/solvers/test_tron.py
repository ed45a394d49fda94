"""Newton with conjugate gradients over row groups (``solver="tron"``): kernels against NumPy,
iterates that do not depend on the number of groups, the certificate, liblinear's optimum,
row weights, a real multi-process cluster and a killed worker."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from _synthetic import sparse_problem

from daskpd.data import MemoryDataset, write_dataset
from daskpd.kernels import scalar
from daskpd.kernels import tron as kernels
from daskpd.problem import Problem
from daskpd.solvers import solve
from daskpd.solvers.driver.auto import auto_solver
from daskpd.solvers.tron import Tron, TronOptions

LOSSES = ["logistic", "squared_hinge", "smooth_hinge", "squared"]


def _data(n=300, **kwargs):
    return sparse_problem(n=n, **kwargs)


def _loss_data(loss, **kwargs):
    return _data(regression=loss == "squared", **kwargs)


# --------------------------------------------------------------------------------------------
# kernels against NumPy, on the same rows


def _numpy_loss(loss, u, y):
    t = y * u
    if loss == "logistic":
        value, derivative = np.logaddexp(0, -t), -y / (1 + np.exp(t))
        s = 1 / (1 + np.exp(-t))
        return value, derivative, s * (1 - s)
    if loss == "squared_hinge":
        m = np.maximum(0, 1 - t)
        return m**2, -2 * y * m, np.where(t < 1, 2.0, 0.0)
    if loss == "smooth_hinge":
        value = np.where(t >= 1, 0, np.where(t <= 0, 0.5 - t, (1 - t) ** 2 / 2))
        return value, -y * np.clip(1 - t, 0, 1), np.where((t < 1) & (t > 0), 1.0, 0.0)
    return 0.5 * (u - y) ** 2, u - y, np.ones_like(u)


@pytest.mark.parametrize("binary", [False, True], ids=["values", "binary"])
@pytest.mark.parametrize("loss", LOSSES)
def test_gradient_and_hessian_rows_equal_numpy(loss, binary):
    X, y = _loss_data(loss, n=80, d=12, seed=3, binary=binary, dtype=np.float64)
    rng = np.random.default_rng(4)
    w, v = rng.normal(size=12), rng.normal(size=12)
    c = rng.uniform(0.0, 2.0, 80)
    c[::7] = 0.0
    problem = Problem(loss, "l2", 0.1)
    code, params = int(problem.loss.code), np.asarray(problem.loss.params, dtype=np.float64)
    indptr, indices = X.indptr.astype(np.int64), X.indices.astype(np.int32)
    vals = np.empty(0) if binary else X.data
    margins = np.empty(80)
    kernels.row_products(indptr, indices, vals, binary, w, 0, 80, margins)
    np.testing.assert_allclose(margins, X @ w, rtol=1e-12)

    z, curv = np.empty(80), np.empty(80)
    pack, sums = np.zeros((12, 2)), np.zeros(4)
    kernels.gradient_rows(
        indptr, indices, vals, binary, y, c, margins, 0, 80, code, params, code, params,
        z, curv, pack, sums,
    )  # fmt: skip
    xtz, diag = pack[:, 0], pack[:, 1]
    value, derivative, second = _numpy_loss(loss, X @ w, y)
    conjugate = np.array(
        [scalar.loss_conjugate(code, params, g, t) for g, t in zip(derivative, y, strict=True)]
    )
    np.testing.assert_allclose(z, c * derivative, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(curv, c * second, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(xtz, X.T @ (c * derivative), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(diag, X.multiply(X).T @ (c * second), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(
        sums, [c @ value, c @ value, c @ conjugate, c @ conjugate], rtol=1e-10, atol=1e-13
    )

    pack = np.zeros((12, 2))
    pack[:, 0] = v
    kernels.hessian_rows(indptr, indices, vals, binary, curv, pack, 0, 80)
    np.testing.assert_allclose(pack[:, 0], v)
    np.testing.assert_allclose(pack[:, 1], X.T @ (c * second * (X @ v)), rtol=1e-10, atol=1e-13)

    step_margins = X @ v
    total = kernels.line_sum(margins, step_margins, 0.3, y, c, code, params)
    assert total == pytest.approx(c @ _numpy_loss(loss, margins + 0.3 * step_margins, y)[0])


def test_shares_on_their_own_columns_sum_as_dense_vectors():
    from daskpd.solvers.common.resident import Share, add
    from daskpd.solvers.common.resident import dense as on_every_column

    rng = np.random.default_rng(11)
    n_columns, dense = 50, []
    shares = []
    for size in (7, 20, 0, 33):
        columns = np.sort(rng.choice(n_columns, size, replace=False)).astype(np.int32)
        values = rng.normal(size=(2, size))
        full = np.zeros((2, n_columns))
        full[:, columns] = values
        shares.append(Share(columns, values))
        dense.append(full)
    shares.append(Share(None, rng.normal(size=(2, n_columns))))
    dense.append(shares[-1].values)
    expected = np.sum(dense, axis=0)
    for order in (shares, shares[::-1], shares[1:] + shares[:1]):
        total = order[0]
        for share in order[1:]:
            total = add(total, share)
        np.testing.assert_allclose(on_every_column(total, n_columns), expected, rtol=1e-12)
    merged = add(*shares[:4])
    assert np.all(np.diff(merged.columns) > 0)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("with_positions", [False, True])
def test_a_groups_columns_renumbered_in_threads_as_numpy_does(threads, with_positions):
    # the run's used columns (positions) and the group's own, in two reads of the ids split
    # among the threads: the same as mapping through positions, then np.unique
    from daskpd.solvers.common.groups import renumbered

    rng = np.random.default_rng(5)
    n_features = 40
    used = np.sort(rng.choice(n_features, 25, replace=False))
    indices = rng.choice(used, 301).astype(np.int32)
    positions = None
    run = indices
    if with_positions:
        positions = np.full(n_features, -1, dtype=np.int32)
        positions[used] = np.arange(used.shape[0], dtype=np.int32)
        run = positions[indices]
    columns, local = renumbered(indices, n_features, positions, True, threads)
    expected, expected_local = np.unique(run, return_inverse=True)
    np.testing.assert_array_equal(columns, expected)
    np.testing.assert_array_equal(local, expected_local)
    assert columns.dtype == np.int32 and local.dtype == np.int32
    # the run's columns only: the mapped ids (the input itself when every column is used)
    none, mapped = renumbered(indices, n_features, positions, False, threads)
    assert none is None
    np.testing.assert_array_equal(mapped, run)
    assert (mapped is indices) == (positions is None)
    # no nonzero: nothing marked
    columns, local = renumbered(indices[:0], n_features, positions, True, threads)
    assert columns.shape == (0,) and local.shape == (0,)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_groups_kept_output_rows_are_zeroed_and_summed_in_threads(threads):
    # a task's threads' output rows: the group's kept ones on its next task (pages mapped),
    # zeroed and summed by column ranges in the threads, the rows added in order
    from daskpd.solvers.common.resident import (
        RowGroup,
        keep_rows,
        summed_rows,
        thread_rows,
        thread_sum,
        zeroed_rows,
    )

    group = RowGroup(None, None, None, True, None, None, None, None, [])
    rows = zeroed_rows(thread_rows(group, (threads, 11, 2)), threads)
    assert not rows.any()
    values = np.random.default_rng(2).normal(size=rows.shape)
    rows[...] = values
    total = summed_rows(rows, threads)
    np.testing.assert_array_equal(total, thread_sum(values.copy()))
    keep_rows(group, rows)
    again = thread_rows(group, (threads, 11, 2))
    assert again is rows and group.spare == []
    assert not zeroed_rows(again, threads).any()
    # another shape, or a group that keeps none: new rows
    keep_rows(group, again)
    assert thread_rows(group, (threads, 12, 2)) is not again
    none = group._replace(spare=None)
    keep_rows(none, again)
    assert none.spare is None and thread_rows(none, (threads, 11, 2)) is not again


def test_thread_cuts_balance_nonzeros_and_cover_every_row():
    indptr = np.cumsum([0, 5, 1, 1, 1, 8, 0, 2, 2]).astype(np.int64)
    cuts = kernels.thread_cuts(indptr, 3)
    assert cuts[0] == 0 and cuts[-1] == 8 and np.all(np.diff(cuts) >= 0)
    shares = np.diff(indptr[cuts])
    assert shares.sum() == 20 and shares.max() <= 10


# --------------------------------------------------------------------------------------------
# the method


def _tron(data, loss, alpha, grid, tol=1e-10, max_epochs=100, client=False, **options):
    return solve(
        data, loss=loss, alpha=alpha, solver="tron", grid=grid, tol=tol,
        max_epochs=max_epochs, client=client, eval_every=1, **options,
    )  # fmt: skip


@pytest.mark.parametrize("loss", LOSSES)
def test_iterates_do_not_depend_on_the_number_of_groups(loss):
    X, y = _loss_data(loss, n=400, d=40, seed=1)
    data = MemoryDataset(X, y)
    runs = [_tron(data, loss, 1e-3, grid, tol=0.0, max_epochs=5) for grid in (1, 2, 4)]
    primals = np.array([[row["primal"] for row in run.history] for run in runs])
    gaps = np.array([[row["gap"] for row in run.history] for run in runs])
    # the same epochs, each within rounding of the one-group run
    assert primals.shape == (3, 6)
    np.testing.assert_allclose(primals[1:], np.broadcast_to(primals[0], (2, 6)), rtol=1e-9)
    np.testing.assert_allclose(gaps[1:], np.broadcast_to(gaps[0], (2, 6)), rtol=1e-5, atol=1e-12)
    for run in runs[1:]:
        np.testing.assert_allclose(run.w, runs[0].w, rtol=1e-8, atol=1e-12)


def test_rounds_and_passes_do_not_depend_on_the_number_of_groups():
    X, y = _data(n=400, d=40, seed=2)
    data = MemoryDataset(X, y)
    problem, method = Problem("logistic", "l2", 1e-3), Tron()
    counts = []
    for grid in (1, 3, 8):
        state = method.init(
            problem, data, seed=np.random.SeedSequence(0), client=None,
            options=TronOptions(grid=grid),
        )  # fmt: skip
        for epoch in range(1, 5):
            state = method.run_epoch(state, epoch)
        counts.append(method.counters(state))
    assert counts[0]["rounds"] > 4 and counts[0]["passes"] > 4
    assert counts[1] == counts[0] and counts[2] == counts[0]


@pytest.mark.parametrize("loss", LOSSES)
def test_certificate_is_the_evaluation_of_the_point_and_dual_it_reports(loss):
    X, y = _loss_data(loss, n=300, d=30, seed=5)
    data = MemoryDataset(X, y)
    problem, method = Problem(loss, "l2", 1e-2), Tron()
    state = method.init(
        problem, data, seed=np.random.SeedSequence(0), client=None, options=TronOptions(grid=3)
    )
    for epoch in (1, 2):
        state = method.run_epoch(state, epoch)
        iterate = method.iterate(state)
        evaluation = problem.evaluate(iterate.w, data, z=iterate.z, z_bounds=iterate.z_bounds)
        primal, dual = method.certificate(state)
        assert primal == pytest.approx(evaluation.primal, rel=1e-10)
        assert dual == pytest.approx(evaluation.dual, rel=1e-9, abs=1e-12)
        assert primal >= dual - 1e-12


def _liblinear(loss, X, y, alpha, weight):
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    common = {"C": 1.0 / (alpha * X.shape[0]), "fit_intercept": False, "tol": 1e-12}
    if loss == "logistic":
        model = LogisticRegression(solver="liblinear", max_iter=100_000, **common)
    else:
        model = LinearSVC(loss=loss, dual=True, max_iter=100_000, **common)
    model.fit(X, y, sample_weight=weight)
    return model.coef_.ravel()


def _lbfgs(problem, data, d):
    def objective(w):
        return problem.primal(w, data)

    result = scipy.optimize.minimize(
        objective, np.zeros(d), method="L-BFGS-B", options={"maxiter": 20000, "ftol": 1e-15,
                                                             "gtol": 1e-12},
    )  # fmt: skip
    return result.x


@pytest.mark.parametrize(
    "loss,weighted",
    [("logistic", False), ("logistic", True), ("squared_hinge", False),
     ("squared_hinge", True), ("smooth_hinge", True), ("squared", False)],
)  # fmt: skip
def test_reaches_the_independent_optimum(loss, weighted):
    X, y = _loss_data(loss, n=300, d=30, seed=6)
    alpha = 0.01
    rng = np.random.default_rng(6)
    sample_weight = rng.uniform(0.5, 2.0, X.shape[0]) if weighted else None
    class_weight = {-1: 1.0, 1: 3.0} if weighted and loss != "squared" else None
    data = MemoryDataset(X, y, sample_weight=sample_weight)
    result = _tron(data, loss, alpha, grid=3, tol=1e-12, class_weight=class_weight)
    assert result.converged
    problem = Problem(loss, "l2", alpha, class_weight=class_weight)
    weight = np.ones(X.shape[0]) if sample_weight is None else sample_weight.copy()
    if class_weight:
        weight *= np.where(y > 0, class_weight[1], class_weight[-1])
    if loss in ("logistic", "squared_hinge"):
        reference = _liblinear(loss, X, y, alpha, weight)
    elif loss == "squared":
        # ridge's closed form: (X^T X / n + alpha I) w = X^T y / n
        n = X.shape[0]
        A = (X.T @ X).toarray() / n + alpha * np.eye(X.shape[1])
        reference = np.linalg.solve(A, X.T @ y / n)
    else:
        reference = _lbfgs(problem, data, X.shape[1])
    p_ref = problem.evaluate(reference, data).primal
    assert result.primal == pytest.approx(p_ref, rel=1e-6)
    assert result.dual <= p_ref + 1e-12
    np.testing.assert_allclose(result.w, reference, rtol=1e-3, atol=1e-4)


def test_warm_start_and_checkpoint_resume(tmp_path):
    X, y = _data(n=300, d=30, seed=7)
    data = MemoryDataset(X, y)
    straight = _tron(data, "logistic", 1e-3, 2, tol=0.0, max_epochs=6)
    first = _tron(data, "logistic", 1e-3, 2, tol=0.0, max_epochs=3,
                  checkpoint_dir=tmp_path / "ck")  # fmt: skip
    resumed = _tron(data, "logistic", 1e-3, 2, tol=0.0, max_epochs=6,
                    checkpoint_dir=tmp_path / "ck", resume=True)  # fmt: skip
    assert first.n_epochs == 3 and resumed.n_epochs == 6
    # the checkpoint keeps the margins the run moved: the same bits as the straight run
    assert np.array_equal(resumed.w, straight.w)
    assert [r["gap"] for r in resumed.history] == [r["gap"] for r in straight.history]
    warm = _tron(data, "logistic", 1e-3, 2, tol=1e-10, warm_start=straight.w)
    assert warm.converged and warm.n_epochs < straight.n_epochs


def test_refuses_what_it_cannot_do():
    X, y = _data()
    with pytest.raises(ValueError, match="hinge"):
        _tron((X, y), "hinge", 1e-3, 2)
    with pytest.raises(ValueError, match="l2"):
        solve((X, y), loss="logistic", regularizer="l1", alpha=1e-3, solver="tron", client=False)
    with pytest.raises(ValueError, match="grid"):
        _tron((X, y), "logistic", 1e-3, 10_000)
    with pytest.raises(ValueError, match="preconditioner"):
        TronOptions(preconditioner="cholesky")
    with pytest.raises(ValueError, match="eps_cg"):
        TronOptions(eps_cg=1.5)


def test_without_the_preconditioner_the_same_optimum():
    X, y = _data(n=300, d=30, seed=8)
    data = MemoryDataset(X, y)
    plain = _tron(data, "logistic", 1e-3, 2, preconditioner="none")
    diagonal = _tron(data, "logistic", 1e-3, 2)
    assert plain.converged and diagonal.converged
    assert plain.primal == pytest.approx(diagonal.primal, rel=1e-9)


def test_auto_takes_tron_for_several_groups_and_a_smooth_loss():
    assert auto_solver("logistic", "l2", grid=8) == "tron"
    assert auto_solver("squared", "l2", grid=2) == "tron"
    assert auto_solver("logistic", "l2", grid=1) == "cocoa"
    for loss in ("squared_hinge", "smooth_hinge"):
        assert auto_solver(loss, "l2", grid=8) == "cocoa"
    assert auto_solver("hinge", "l2", grid=8) == "dual_newton"
    assert auto_solver("logistic", "l1", grid=8) == "batch"
    X, y = _data(n=200, d=20, seed=9)
    result = solve((X, y), loss="logistic", alpha=1e-2, grid=4, tol=1e-8, client=False)
    assert result.solver == "tron" and result.converged


# --------------------------------------------------------------------------------------------
# a real multi-process cluster


@pytest.fixture(scope="module")
def disk_data(tmp_path_factory):
    X, y = _data(n=3000, d=40, seed=17)
    path = tmp_path_factory.mktemp("tron") / "train.zarr"
    return write_dataset(X, y, path, rows_per_block=500)


@pytest.mark.cluster
def test_cluster_run_equals_the_in_process_run(local_cluster, disk_data):
    from _faults import assert_cluster_run_equals_in_process

    kwargs = {"tol": 1e-10, "max_epochs": 50}
    on_cluster = _tron(disk_data, "logistic", 1e-3, 4, client=local_cluster, **kwargs)
    in_process = _tron(disk_data, "logistic", 1e-3, 4, **kwargs)
    problem = Problem("logistic", "l2", 1e-3)
    assert_cluster_run_equals_in_process(on_cluster, in_process, problem, disk_data)


@pytest.mark.cluster
@pytest.mark.long  # a killed worker: CI's second call (-m long, issue 49)
def test_survives_a_worker_killed_mid_epoch(local_cluster, disk_data, tmp_path):
    from _faults import assert_same_run, straight_and_killed, wait_for_two_workers

    client = local_cluster
    # many CG steps a Newton step (a tight eps_cg): an epoch long enough to be killed in
    kwargs = {"loss": "logistic", "alpha": 1e-5, "solver": "tron", "grid": 4, "tol": 0.0,
              "eval_every": 1, "eps_cg": 1e-6}  # fmt: skip
    straight, survived = straight_and_killed(client, disk_data, tmp_path, 0.05, **kwargs)
    # Newton steps are deterministic and the reduction tree sums in group order whichever
    # worker runs it: the replayed epochs give the untouched run's bits
    assert_same_run(straight, survived)
    assert 1 <= survived.recoveries <= 2
    wait_for_two_workers(client)


def test_the_home_vector_is_relayed_down_a_tree_of_the_workers(monkeypatch):
    # from RELAY_WORKERS workers on, each worker reads the vector from its parent in a
    # binary tree (the home sends it twice), not every worker from the home
    from daskpd._graphs import TaskGraph
    from daskpd.solvers.common import resident
    from daskpd.solvers.common.resident import relay

    graph = TaskGraph("relay-test")
    monkeypatch.setattr(resident, "RELAY_WORKERS", 4)
    home, workers = "w0", [f"w{k}" for k in range(7)]
    owners = [w for w in workers for _ in range(2)]  # two groups a worker
    refs = relay(graph, "v", "REF", owners, home)
    assert refs[0] == refs[1] == "REF"  # the home's own groups read it where it is
    worker_of = {refs[2 * k].key: workers[k] for k in range(1, 7)}
    parent_of = {}
    for k, worker in enumerate(workers[1:], start=1):
        (argument,) = graph._tasks[refs[2 * k].key].args
        parent_of[worker] = worker_of.get(getattr(argument, "key", None), "w0")
        assert graph._annotations[refs[2 * k].key]["workers"] == [worker]
        assert refs[2 * k] == refs[2 * k + 1]
    assert parent_of == {"w1": "w0", "w2": "w0", "w3": "w1", "w4": "w1", "w5": "w2",
                         "w6": "w2"}  # fmt: skip
    # fewer workers: the vector itself, no task
    small = TaskGraph("relay-small")
    assert relay(small, "v", "REF", ["a", "b", "c", "a"], "a") == ["REF"] * 4
    assert len(small) == 0
    monkeypatch.setattr(resident, "RELAY_WORKERS", 9)
    assert relay(small, "v", "REF", workers, home) == ["REF"] * 7
    assert len(small) == 0


@pytest.mark.cluster
@pytest.mark.long  # a 4-worker cluster: CI's second call
def test_on_four_workers_the_relayed_runs_equal_the_in_process_runs(tmp_path, monkeypatch):
    # tron's direction and step, dual_newton's direction and w: relayed (three workers
    # besides the home; the graphs are built here, so the threshold set here holds)
    from _faults import assert_cluster_run_equals_in_process
    from distributed import Client, LocalCluster

    from daskpd.solvers.common import resident

    monkeypatch.setattr(resident, "RELAY_WORKERS", 4)

    X, y = sparse_problem(n=1000, d=1500, seed=17)
    disk_data = write_dataset(X, y, tmp_path / "train.zarr", rows_per_block=500)
    cluster = LocalCluster(n_workers=4, threads_per_worker=1, dashboard_address="127.0.0.1:0")
    with cluster, Client(cluster, set_as_default=False) as client:
        for solver, loss in (("tron", "logistic"), ("dual_newton", "hinge")):
            kwargs = {"loss": loss, "alpha": 1e-3, "solver": solver, "grid": 8, "tol": 1e-9,
                      "max_epochs": 60}  # fmt: skip
            if solver == "dual_newton":
                # its local start's sigma' is the workers (4), in-process the groups (8)
                kwargs["start_passes"] = 0
            on_cluster = solve(disk_data, client=client, **kwargs)
            in_process = solve(disk_data, client=False, **kwargs)
            assert on_cluster.solver == solver
            problem = Problem(loss, "l2", 1e-3)
            assert_cluster_run_equals_in_process(on_cluster, in_process, problem, disk_data)


# --------------------------------------------------------------------------------------------
# streamed rows (rows="stream"): every pass reads the group's rows again, a chunk at a time


@pytest.fixture(scope="module")
def splice_store(tmp_path_factory):
    """A small splice-like binary store of 8 row blocks whose rows use about two thirds of
    the columns (the streamed chunks renumber their ids into the used ones)."""
    from daskpd.generators import make_splice_like

    path = tmp_path_factory.mktemp("tron-stream") / "splice.zarr"
    return make_splice_like(
        path, 2000, degree=6, hash_bits=17, binary=True, positive_rate=0.1,
        writer_options={"rows_per_block": 250}, random_state=4,
    )  # fmt: skip


def _epochs(data, options, loss="logistic", alpha=1e-3, epochs=5, client=None):
    """A run of ``epochs`` Newton steps through the method: its primal and dual after each,
    its counters and its state."""
    from contextlib import nullcontext

    problem, method = Problem(loss, "l2", alpha), Tron()
    # the driver's run makes its client the current one (the groups' read waits on it)
    with nullcontext() if client is None else client.as_current():
        state = method.init(
            problem, data, seed=np.random.SeedSequence(0), client=client,
            options=TronOptions(**options),
        )  # fmt: skip
        certificates = [method.certificate(state)]
        for epoch in range(1, epochs + 1):
            state = method.run_epoch(state, epoch)
            certificates.append(method.certificate(state))
        w = method.iterate(state).w
    return np.array(certificates), method.counters(state), w, state


@pytest.mark.parametrize(
    "loss, grid, threads",
    # the squared hinge's kinks amplify any rounding: its kept runs on 1 and 3 groups differ
    # by 3e-7 of the primal here, so it is compared on one thread a group, where the
    # streamed run adds the rows in the kept run's order
    [("logistic", 1, 1), ("logistic", 1, 2), ("logistic", 3, 2), ("squared_hinge", 1, 1),
     ("squared_hinge", 3, 1)],
)  # fmt: skip
def test_streamed_rows_give_the_kept_rows_iterates(splice_store, loss, grid, threads):
    data = splice_store
    per_block = int(data.nnz) // 8
    runs = [
        _epochs(data, {"grid": grid, "threads": threads, "rows": rows, **extra}, loss=loss)
        for rows, extra in (("memory", {}), ("stream", {"stream_nnz": 2 * per_block}))
    ]
    (kept, kept_counts, kept_w, kept_state), (streamed, counts, w, state) = runs
    assert kept_state.stream_nnz == 0 and state.stream_nnz == 2 * per_block
    # the same rounds and passes, the same objectives to the sums' rounding
    assert counts == kept_counts and counts["rounds"] > 10
    np.testing.assert_allclose(streamed, kept, rtol=1e-9)
    np.testing.assert_allclose(w, kept_w, rtol=1e-7, atol=1e-12)
    if threads == 1:
        # one thread: the chunks add the rows in the kept group's order, the same bits
        assert np.array_equal(streamed, kept) and np.array_equal(w, kept_w)


def test_a_streamed_hessian_round_skips_the_chunks_of_curvature_zero(splice_store, monkeypatch):
    from daskpd.solvers.common import resident
    from daskpd.solvers.tron._tasks import _hessian_task

    data, n = splice_store, splice_store.n_samples
    used = np.flatnonzero(np.asarray(data.col_nnz) > 0)
    positions = np.full(data.n_features, -1, dtype=np.int32)
    positions[used] = np.arange(used.shape[0], dtype=np.int32)
    kept = resident.load_group(data, 0, n, None, 2, positions, False)
    streamed = resident.open_group(data, 0, n, None, 2, positions, int(data.nnz) // 8)
    assert streamed.chunks.tolist() == np.asarray(data.row_block_bounds).tolist()
    rng = np.random.default_rng(0)
    curv = rng.random(n)
    curv[:500] = 0.0  # the first two chunks
    curv[900:1000] = 0.0  # a part of the fourth
    v = rng.standard_normal(used.shape[0])
    reads = []
    read_chunk = resident._read_chunk
    monkeypatch.setattr(
        resident, "_read_chunk", lambda group, lo, hi: reads.append(lo) or read_chunk(group, lo, hi)
    )
    product = _hessian_task(streamed, curv, v)
    assert reads == [500, 750, 1000, 1250, 1500, 1750]
    assert product.columns is None and product.values.shape == (1, used.shape[0])
    expected = _hessian_task(kept, curv, v)
    np.testing.assert_allclose(product.values, expected.values, rtol=1e-12, atol=1e-12)


def test_the_row_options_are_checked():
    with pytest.raises(ValueError, match="rows must be"):
        TronOptions(rows="disk")
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="stream_nnz"):
            TronOptions(stream_nnz=bad)
    assert TronOptions().rows == "auto"


def test_a_chunk_gets_what_the_memory_limit_leaves():
    from daskpd.solvers.common import stream
    from daskpd.solvers.tron._options import HOME_VECTORS, ROW_VECTORS, stream_nnz

    data = MemoryDataset(*_data(n=300, d=30, seed=1))
    options = TronOptions()
    rows, threads, n_columns, limit = 10**6, 2, 4 * 10**6, 4 << 30
    fixed = (stream.WORKER_BASE_BYTES + 8 * ROW_VECTORS * rows + 4 * data.n_features
             + 8 * (2 * threads + 8 + HOME_VECTORS) * n_columns)  # fmt: skip
    # two chunks of ids read and renumbered, and their values
    value_bytes = np.dtype(data.dtype).itemsize
    expected = int(stream.STREAM_MEMORY_SHARE * limit - fixed) // (2 * (4 + value_bytes + 4 + 1))
    assert stream_nnz(options, data, limit, rows, threads, n_columns) == expected
    assert stream_nnz(options, data, 1 << 30, rows, threads, n_columns) == stream.MIN_STREAM_NNZ
    assert stream_nnz(options, data, 0, rows, threads, n_columns) == stream.STREAM_CHUNK_NNZ
    assert stream_nnz(TronOptions(stream_nnz=7), data, limit, rows, threads, n_columns) == 7


@pytest.mark.cluster
def test_streamed_rows_on_a_cluster_equal_the_kept_rows(local_cluster, splice_store, monkeypatch):
    from daskpd.solvers.common import resident, stream

    per_block = int(splice_store.nnz) // 8
    kept, kept_counts, kept_w, state = _epochs(
        splice_store, {"grid": 2, "threads": 1, "rows": "auto"}, client=local_cluster
    )
    # "auto" keeps the rows that fit their owners' share
    assert state.stream_nnz == 0
    assert isinstance(local_cluster.gather(state.groups[0]), resident.RowGroup)
    # and streams them when they do not (here: a share of the limit made tiny)
    monkeypatch.setattr(stream, "STREAM_SHARE", 1e-9)
    streamed, counts, w, state = _epochs(
        splice_store, {"grid": 2, "threads": 1, "rows": "auto", "stream_nnz": per_block},
        client=local_cluster,
    )  # fmt: skip
    assert state.stream_nnz == per_block
    assert isinstance(local_cluster.gather(state.groups[1]), resident.StreamedGroup)
    assert counts == kept_counts
    np.testing.assert_allclose(streamed, kept, rtol=1e-9)
    np.testing.assert_allclose(w, kept_w, rtol=1e-7, atol=1e-12)
