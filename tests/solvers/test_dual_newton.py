"""The hinge dual's projected Newton method over row groups (``solver="dual_newton"``):
kernels against NumPy, iterates that do not depend on the number of groups, the certificate,
liblinear's optimum with row and class weights, checkpoints, ``auto``'s choice, a real
multi-process cluster and a killed worker."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _synthetic import sparse_problem

from daskpd.data import MemoryDataset, write_dataset
from daskpd.kernels import dual_newton as kernels
from daskpd.problem import Problem
from daskpd.solvers import solve
from daskpd.solvers.driver.auto import auto_solver
from daskpd.solvers.dual_newton import DualNewton, DualNewtonOptions


def _run(data, alpha, grid, **kwargs):
    kwargs.setdefault("client", False)
    kwargs.setdefault("tol", 1e-10)
    kwargs.setdefault("max_epochs", 100)
    return solve(data, loss="hinge", alpha=alpha, solver="dual_newton", grid=grid, **kwargs)


# --------------------------------------------------------------------------------------------
# kernels against NumPy


@pytest.mark.parametrize("binary", [False, True], ids=["values", "binary"])
def test_kernels_and_the_free_rows_block_equal_numpy(binary):
    from daskpd.solvers.common.resident import load_group
    from daskpd.solvers.dual_newton._tasks import _free_rows, _transpose

    X, y = sparse_problem(n=200, d=40, seed=3, binary=binary, dtype=np.float64)
    X = X.tocsr()
    indptr, indices = X.indptr.astype(np.int64), X.indices.astype(np.int32)
    vals = np.zeros(1) if binary else X.data
    rng = np.random.default_rng(3)
    coef = rng.normal(size=200)
    coef[::5] = 0.0
    total = np.zeros(40)
    read = kernels.rows_transpose(indptr, indices, vals, binary, coef, 0, 200, total)
    np.testing.assert_allclose(total, X.T @ coef, rtol=1e-12, atol=1e-14)
    assert read == X[coef != 0].nnz
    # a group on its own columns (as with several groups), its free rows copied out
    data = MemoryDataset(X[50:150], y[50:150])
    used = np.flatnonzero(np.asarray(data.col_nnz) > 0)
    positions = np.full(40, -1, dtype=np.int32)
    positions[used] = np.arange(used.size, dtype=np.int32)
    group = load_group(data, 0, 100, None, 3, positions, True)
    free = np.sort(rng.choice(100, 37, replace=False)).astype(np.int64)
    rows = _free_rows(group, free)
    block = X[50:150][free][:, used]
    assert np.all(np.diff(rows.columns) > 0)
    dense = np.zeros((37, used.size))
    for i in range(37):
        for e in range(rows.indptr[i], rows.indptr[i + 1]):
            dense[i, rows.columns[rows.indices[e]]] = 1.0 if binary else rows.vals[e]
    np.testing.assert_array_equal(dense, block.toarray())
    np.testing.assert_array_equal(rows.y, y[50:150][free])
    share, read = _transpose(rows, coef[:37])
    product = np.zeros(used.size)
    product[share.columns] = share.values[0]
    np.testing.assert_allclose(product, block.T @ coef[:37], rtol=1e-12, atol=1e-14)
    assert read == block[coef[:37] != 0].nnz


def _box_pass_reference(X, y, c, scale, a, u):
    """One pass of exact coordinate minimization of ``(scale / 2) ||X^T (c y a) / scale||^2
    - sum c a`` over the box, row by row in order, with dense NumPy."""
    X = X.toarray()
    for i in range(X.shape[0]):
        norm = X[i] @ X[i]
        if c[i] <= 0 or norm == 0:
            continue
        gradient = c[i] * (y[i] * (X[i] @ u) - 1.0)
        new = np.clip(a[i] - gradient * scale / (c[i] ** 2 * norm), 0.0, 1.0)
        u += c[i] * y[i] * (new - a[i]) * X[i] / scale
        a[i] = new


@pytest.mark.parametrize("binary", [False, True], ids=["values", "binary"])
def test_the_local_start_pass_equals_numpy(binary):
    X, y = sparse_problem(n=120, d=30, seed=8, binary=binary, dtype=np.float64)
    X = X.tocsr()
    c = np.random.default_rng(8).uniform(0.5, 2.0, 120)
    c[:5] = 0.0
    norm_sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    a, u = np.zeros(120), np.zeros(30)
    a_ref, u_ref = np.zeros(120), np.zeros(30)
    vals = np.zeros(1) if binary else X.data
    for _ in range(2):
        read = kernels.box_pass(
            X.indptr.astype(np.int64), X.indices.astype(np.int32), vals, binary, y, c, norm_sq,
            0.37, a, u,
        )  # fmt: skip
        _box_pass_reference(X, y, c, 0.37, a_ref, u_ref)
    np.testing.assert_allclose(a, a_ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(u, u_ref, rtol=1e-12, atol=1e-14)
    # u is the image of the point it reached, and the pass read every row it could move
    np.testing.assert_allclose(u, X.T @ (c * y * a) / 0.37, rtol=1e-10, atol=1e-13)
    assert read == X[c > 0].nnz
    assert np.all((a >= 0) & (a <= 1)) and np.any((a > 0) & (a < 1))


@pytest.mark.parametrize("grid", [1, 3])
def test_the_local_start_raises_the_dual_and_reaches_the_same_optimum(grid):
    # CoCoA+'s safe sigma' = K: the groups' points added make a dual point above a = 0's (0),
    # and its certificate is the problem's own at the point it reports
    _, _, _, data = _weighted_wide(11)
    problem, method = Problem("hinge", "l2", 1e-3), DualNewton()
    started = {}
    for passes in (0, 1):
        state = method.init(
            problem, data, seed=np.random.SeedSequence(0), client=None,
            options=DualNewtonOptions(grid=grid, start_passes=passes),
        )  # fmt: skip
        started[passes] = state
    primal, dual = method.certificate(started[1])
    assert method.certificate(started[0])[1] == 0.0
    assert dual > 0.0
    iterate = method.iterate(started[1])
    evaluation = problem.evaluate(iterate.w, data, z=iterate.z, z_bounds=iterate.z_bounds)
    assert primal == pytest.approx(evaluation.primal, rel=1e-10)
    assert dual == pytest.approx(evaluation.dual, rel=1e-9)
    # a start's pass is counted (then the gradient round's read of every row), and its round
    # (the image of its point)
    assert method.counters(started[1])["rounds"] == 2
    assert method.counters(started[0])["rounds"] == 1
    assert method.counters(started[1])["passes"] >= 2.0
    results = {
        passes: _run(data, 1e-3, grid, tol=1e-8, start_passes=passes)
        for passes in (0, 1)
    }
    assert all(result.converged for result in results.values())
    # each primal is within its certified gap of P*
    assert abs(results[1].primal - results[0].primal) <= max(r.gap for r in results.values())


# --------------------------------------------------------------------------------------------
# the method


def _wide(n=150, d=300, seed=0, **kwargs):
    """More features than rows, as the splice-like sets (the dual's Hessian is then regular
    on the free rows)."""
    return sparse_problem(n=n, d=d, seed=seed, **kwargs)


def _weighted_wide(seed):
    """A wider problem (300 x 600) with row weights: ``(X, y, weight, data)``."""
    X, y = _wide(n=300, d=600, seed=seed)
    weight = np.random.default_rng(seed).uniform(0.5, 2.0, 300)
    return X, y, weight, MemoryDataset(X, y, sample_weight=weight)


def _steps(data, problem, epochs, **options):
    """Certificates after each of ``epochs`` Newton steps, the counters and ``w``."""
    method = DualNewton()
    state = method.init(
        problem, data, seed=np.random.SeedSequence(0), client=None,
        options=DualNewtonOptions(**options),
    )  # fmt: skip
    certificates = []
    for epoch in range(1, epochs + 1):
        state = method.run_epoch(state, epoch)
        certificates.append(method.certificate(state))
    return np.array(certificates), method.counters(state), method.iterate(state).w


@pytest.mark.parametrize("home_cg_nnz", [0, 10**9], ids=["cg-rounds", "cg-on-the-home"])
def test_iterates_and_rounds_do_not_depend_on_the_number_of_groups(home_cg_nnz):
    # from the same start (a = 0: the local start's passes depend on the groups)
    X, y = _wide(seed=1)
    data = MemoryDataset(X, y)
    problem = Problem("hinge", "l2", 1e-3)
    runs = [
        _steps(data, problem, 5, grid=grid, start_passes=0, home_cg_nnz=home_cg_nnz, burst=0)
        for grid in (1, 2, 4)
    ]
    (first, counts, w), others = runs[0], runs[1:]
    assert counts["rounds"] > (5 if home_cg_nnz == 0 else 2 * 5) and counts["passes"] > 1
    for certificates, other_counts, other_w in others:
        np.testing.assert_allclose(certificates, first, rtol=1e-9, atol=1e-13)
        assert other_counts["rounds"] == counts["rounds"]
        assert other_counts["passes"] == pytest.approx(counts["passes"], rel=1e-12)
        np.testing.assert_allclose(other_w, w, rtol=1e-8, atol=1e-12)


def test_the_newton_step_on_the_home_takes_the_steps_of_the_rounds():
    # the same Newton steps to rounding, in two rounds a step (the free rows' transfer with
    # the CG and the line search on the home, the gradient round) where the rounds take one
    # a CG step and a trial more
    X, y = _wide(seed=2)
    data = MemoryDataset(X, y, sample_weight=np.random.default_rng(2).uniform(0.5, 2.0, 150))
    problem = Problem("hinge", "l2", 1e-3, class_weight={-1: 1.0, 1: 2.0})
    rounds, rounds_counts, rounds_w = _steps(data, problem, 5, grid=3, home_cg_nnz=0, burst=0)
    home, home_counts, home_w = _steps(data, problem, 5, grid=3, home_cg_nnz=10**9, burst=0)
    np.testing.assert_allclose(home, rounds, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(home_w, rounds_w, rtol=1e-8, atol=1e-12)
    assert home_counts["passes"] == pytest.approx(rounds_counts["passes"], rel=1e-12)
    assert home_counts["rounds"] == 2 + 2 * 5 < rounds_counts["rounds"]


def test_the_woodbury_preconditioner_is_the_inverse_of_its_matrix():
    # M = Delta + B B^T on a block of free rows, applied through the Woodbury identity by
    # the two halves of a round (the groups' first halves summed and solved on the home),
    # against M built and solved densely; its diagonal is the diagonal preconditioner's
    from daskpd.solvers.dual_newton import _tasks
    from daskpd.solvers.dual_newton._options import _Settings

    X, y = _wide(n=60, d=80, seed=4)
    data = MemoryDataset(X, y)
    frequency = np.asarray((X != 0).sum(axis=0)).ravel()
    dense = np.sort(np.argsort(-frequency, kind="stable")[:12])
    settings = _Settings(n_samples=60, n_columns=80, alpha=1e-2, threads=1, eta=0.1,
                         max_cg=50, damping=1e-3, dense=dense)  # fmt: skip
    from daskpd.solvers.common.resident import load_group

    group = load_group(data, 0, 60, None, 1, None, False)
    free = np.arange(0, 60, 2)
    rows = _tasks._free_rows(group, free)
    cy = y[free]
    norms = np.asarray(X[free].multiply(X[free]).sum(axis=1)).ravel()
    h = norms / settings.scale
    b, delta = _tasks._dense_part(rows, cy, h, settings)
    full = np.asarray(X[free].todense()) * cy[:, None] / np.sqrt(settings.scale)
    np.testing.assert_allclose(b.toarray(), full[:, dense], rtol=1e-12)
    gram = np.zeros((12, 12))
    kernels.rows_gram(b.indptr, b.indices, b.data, 1.0 / delta, gram)
    np.testing.assert_allclose(gram, full[:, dense].T @ (full[:, dense] / delta[:, None]),
                               rtol=1e-10, atol=1e-14)  # fmt: skip
    matrix = np.diag(delta) + full[:, dense] @ full[:, dense].T
    np.testing.assert_allclose(np.diag(matrix), (1 + settings.damping) * h, rtol=1e-12)
    r = np.random.default_rng(4).standard_normal(free.size)
    # two groups' first halves, summed on the home
    halves = []
    for k in (slice(0, 15), slice(15, 30)):
        part = b[k].toarray()
        values = np.concatenate([(part.T @ (part / delta[k][:, None])).ravel(),
                                 part.T @ (r[k] / delta[k])])  # fmt: skip
        halves.append((_tasks.Share(np.arange(values.size, dtype=np.int32), values[None, :]),
                       np.zeros(8)))  # fmt: skip
    factor, solved = _tasks._woodbury_start(settings, *halves)
    local = _tasks._Local(np.zeros(60), norms, free, rows, cy, h, r, r, dense=b, delta=delta)
    local, (share, sums) = _tasks._precondition_task(None, local, solved, settings)
    np.testing.assert_allclose(local.z, np.linalg.solve(matrix, r), rtol=1e-9)
    assert sums[2] == pytest.approx(r @ local.z) and sums[3] == pytest.approx(r @ r)
    image = np.asarray(X[free].T @ (cy * local.z)).ravel()
    np.testing.assert_allclose(share.values[0], image[share.columns], rtol=1e-9, atol=1e-12)


def test_the_woodbury_preconditioner_takes_fewer_cg_rounds_to_the_same_optimum():
    # binary rows of one length (as k-mer windows): the diagonal preconditioner is a
    # constant; keeping the frequent columns exactly cuts the CG rounds. It is prepared
    # where a step is likely to run as rounds (and after the start); its iterates do not
    # depend on the groups, and a step on the home with it takes the step of the rounds.
    X, y = sparse_problem(n=200, d=400, seed=7, binary=True)
    data = MemoryDataset(X, y)
    problem = Problem("hinge", "l2", 1e-3)
    options = {"start_passes": 0, "burst": 0, "dense_columns": 40}
    plain = _steps(data, problem, 6, grid=2, start_passes=0, home_cg_nnz=0, burst=0)
    rounds = [_steps(data, problem, 6, grid=grid, home_cg_nnz=0, **options) for grid in (1, 2, 3)]
    home = [_steps(data, problem, 6, grid=grid, home_cg_nnz=10**9, **options) for grid in (1, 2)]
    for runs in (rounds, home):
        (first, counts, w), others = runs[0], runs[1:]
        for certificates, other_counts, other_w in others:
            np.testing.assert_allclose(certificates, first, rtol=1e-8, atol=1e-12)
            np.testing.assert_allclose(other_w, w, rtol=1e-7, atol=1e-11)
            assert other_counts["rounds"] == counts["rounds"]
    # fewer CG rounds than with the diagonal over the same Newton steps
    assert rounds[0][1]["rounds"] < plain[1]["rounds"]
    # the first step (after the start, preconditioned) is the same on the home
    np.testing.assert_allclose(home[0][0][0], rounds[0][0][0], rtol=1e-8, atol=1e-12)
    result = _run(data, 1e-3, 2, dense_columns=40, home_cg_nnz=0)
    reference = _run(data, 1e-3, 2)
    # both certified within tol = 1e-10 of P* (about 1e-3 here)
    assert result.converged and reference.converged and result.gap <= 1e-10
    assert result.primal == pytest.approx(reference.primal, abs=2e-10)


@pytest.mark.parametrize("grid", [1, 3])
def test_a_local_pass_after_a_burst_of_free_rows(grid):
    # burst=1: every Newton step that frees more rows than the fewest so far is followed by
    # a local pass (two rounds, a pass); the dual never falls, the certificate is the
    # problem's own, and the run reaches liblinear's optimum
    X, y, weight, data = _weighted_wide(12)
    problem, method = Problem("hinge", "l2", 1e-3), DualNewton()
    state = method.init(
        problem, data, seed=np.random.SeedSequence(0), client=None,
        options=DualNewtonOptions(grid=grid, home_cg_nnz=0, burst=1.0),
    )  # fmt: skip
    passes, dual = 0, method.certificate(state)[1]
    for epoch in range(1, 40):
        before = method.counters(state)
        state = method.run_epoch(state, epoch)
        after = method.counters(state)
        if state.passed:
            passes += 1
            assert after["rounds"] == before["rounds"] + 2
            assert after["passes"] >= before["passes"] + 1.0
        primal, new_dual = method.certificate(state)
        assert new_dual >= dual - 1e-15
        dual = new_dual
        if primal - dual <= 1e-10 * primal:
            break
    assert passes >= 1
    iterate = method.iterate(state)
    evaluation = problem.evaluate(iterate.w, data, z=iterate.z, z_bounds=iterate.z_bounds)
    assert primal == pytest.approx(evaluation.primal, rel=1e-10)
    assert dual == pytest.approx(evaluation.dual, rel=1e-9)
    reference = problem.evaluate(_liblinear(X, y, 1e-3, weight), data).primal
    assert primal == pytest.approx(reference, rel=1e-6)


def test_certificate_is_the_evaluation_of_the_point_and_dual_it_reports():
    X, y = _wide(seed=5)
    data = MemoryDataset(X, y, sample_weight=np.random.default_rng(5).uniform(0.5, 2.0, 150))
    problem, method = Problem("hinge", "l2", 1e-2, class_weight={-1: 1.0, 1: 2.5}), DualNewton()
    state = method.init(
        problem, data, seed=np.random.SeedSequence(0), client=None,
        options=DualNewtonOptions(grid=3),
    )  # fmt: skip
    for epoch in (1, 2, 3):
        state = method.run_epoch(state, epoch)
        iterate = method.iterate(state)
        evaluation = problem.evaluate(iterate.w, data, z=iterate.z, z_bounds=iterate.z_bounds)
        primal, dual = method.certificate(state)
        assert primal == pytest.approx(evaluation.primal, rel=1e-10)
        assert dual == pytest.approx(evaluation.dual, rel=1e-9, abs=1e-12)
        assert primal >= dual - 1e-12


def _liblinear(X, y, alpha, weight):
    from sklearn.svm import LinearSVC

    model = LinearSVC(
        loss="hinge", dual=True, C=1.0 / (alpha * X.shape[0]), fit_intercept=False,
        tol=1e-12, max_iter=10_000, random_state=0,
    )  # fmt: skip
    with warnings.catch_warnings():
        # liblinear may stop at its iteration cap within the tolerance asked here
        warnings.simplefilter("ignore")
        model.fit(X, y, sample_weight=weight)
    return model.coef_.ravel()


@pytest.mark.parametrize(
    "weighted,binary,shape",
    [(False, False, (150, 300)), (True, False, (150, 300)), (True, True, (150, 300)),
     (False, False, (300, 30))],
    ids=["plain", "weighted", "weighted-binary", "more-rows-than-features"],
)  # fmt: skip
def test_reaches_liblinears_optimum(weighted, binary, shape):
    # more rows than features: the Hessian of the free rows is singular, the damping holds
    X, y = sparse_problem(n=shape[0], d=shape[1], seed=6, binary=binary)
    alpha = 0.01
    rng = np.random.default_rng(6)
    sample_weight = rng.uniform(0.5, 2.0, X.shape[0]) if weighted else None
    class_weight = {-1: 1.0, 1: 3.0} if weighted else None
    data = MemoryDataset(X, y, sample_weight=sample_weight)
    result = _run(data, alpha, 3, class_weight=class_weight)
    assert result.converged and result.solver == "dual_newton"
    problem = Problem("hinge", "l2", alpha, class_weight=class_weight)
    weight = np.ones(X.shape[0]) if sample_weight is None else sample_weight.copy()
    if class_weight:
        weight *= np.where(y > 0, class_weight[1], class_weight[-1])
    reference = _liblinear(X, y, alpha, weight)
    p_ref = problem.evaluate(reference, data).primal
    # within 1e-6 of liblinear's primal, or below it where liblinear stopped at its iteration
    # cap short of the optimum (with more rows than features its coordinate descent is slow)
    assert result.primal <= p_ref * (1 + 1e-6)
    assert result.primal >= p_ref * (1 - 1e-6) or result.gap <= 1e-9 * result.primal
    # the certified dual bounds liblinear's primal from below
    assert result.dual <= p_ref + 1e-12


def test_rows_without_nonzeros_and_rows_of_weight_zero():
    X, y = _wide(seed=4)
    X = X.tolil()
    X[:10, :] = 0
    X = X.tocsr()
    weight = np.ones(150)
    weight[10:20] = 0.0
    data = MemoryDataset(X, y, sample_weight=weight)
    result = _run(data, 1e-2, 2)
    assert result.converged
    evaluation = Problem("hinge", "l2", 1e-2).evaluate(result.w, data)
    assert result.primal == pytest.approx(evaluation.primal, rel=1e-10)
    reference = _liblinear(X, y, 1e-2, weight)
    assert result.primal == pytest.approx(
        Problem("hinge", "l2", 1e-2).evaluate(reference, data).primal, rel=1e-6
    )


def test_checkpoint_resume_and_warm_start(tmp_path):
    X, y = _wide(seed=7)
    data = MemoryDataset(X, y)
    straight = _run(data, 1e-3, 2, tol=0.0, max_epochs=6)
    first = _run(data, 1e-3, 2, tol=0.0, max_epochs=3, checkpoint_dir=tmp_path / "ck")
    resumed = _run(data, 1e-3, 2, tol=0.0, max_epochs=6, checkpoint_dir=tmp_path / "ck",
                   resume=True)  # fmt: skip
    assert first.n_epochs == 3 and resumed.n_epochs == 6
    # w is computed again from the saved dual point: the same run to rounding
    np.testing.assert_allclose(
        [r["primal"] for r in resumed.history], [r["primal"] for r in straight.history],
        rtol=1e-7,
    )  # fmt: skip
    cold = _run(data, 1e-3, 2, tol=1e-9)
    warm = _run(data, 1e-3, 2, tol=1e-9, warm_start=first)
    assert warm.converged and cold.converged and warm.n_epochs < cold.n_epochs
    # from w alone: the dual point read off its margins (the hinge's subgradient at the
    # optimum, which is not the optimal dual on the margin's rows: used, not a shortcut)
    from_w = _run(data, 1e-3, 2, tol=1e-9, warm_start=cold.w)
    assert from_w.converged and from_w.primal == pytest.approx(cold.primal, rel=1e-7)
    assert from_w.history[0]["gap"] != cold.history[0]["gap"]


def test_refuses_what_it_cannot_do():
    X, y = sparse_problem()
    with pytest.raises(ValueError, match="hinge"):
        solve((X, y), loss="logistic", alpha=1e-3, solver="dual_newton", client=False)
    with pytest.raises(ValueError, match="l2"):
        solve((X, y), loss="hinge", regularizer="l1", alpha=1e-3, solver="dual_newton",
              client=False)  # fmt: skip
    with pytest.raises(ValueError, match="grid"):
        _run((X, y), 1e-3, 10_000)
    with pytest.raises(ValueError, match="eta"):
        DualNewtonOptions(eta=1.5)
    with pytest.raises(ValueError, match="max_cg"):
        DualNewtonOptions(max_cg=0)


def test_auto_takes_the_dual_newton_for_the_hinge_on_several_groups():
    assert auto_solver("hinge", "l2", grid=8) == "dual_newton"
    assert auto_solver("hinge", "l2", grid=1) == "cocoa"
    assert auto_solver("hinge", "l2") == "cocoa"
    X, y = _wide(seed=9)
    result = solve((X, y), loss="hinge", alpha=1e-2, grid=4, tol=1e-8, client=False)
    assert result.solver == "dual_newton" and result.converged


# --------------------------------------------------------------------------------------------
# a real multi-process cluster


@pytest.fixture(scope="module")
def disk_data(tmp_path_factory):
    X, y = sparse_problem(n=1000, d=1500, seed=17)
    path = tmp_path_factory.mktemp("dual_newton") / "train.zarr"
    return write_dataset(X, y, path, rows_per_block=500)


@pytest.mark.cluster
def test_cluster_run_equals_the_in_process_run(local_cluster, disk_data):
    from _faults import assert_cluster_run_equals_in_process

    # from the same start (a = 0): the local start's sigma' is the workers holding groups
    # (2 here), in-process the groups (4)
    kwargs = {"tol": 1e-9, "max_epochs": 60}
    on_cluster = _run(disk_data, 1e-3, 4, client=local_cluster, start_passes=0, **kwargs)
    in_process = _run(disk_data, 1e-3, 4, start_passes=0, **kwargs)
    problem = Problem("hinge", "l2", 1e-3)
    assert_cluster_run_equals_in_process(on_cluster, in_process, problem, disk_data)
    # the local start over each worker's two groups: certified, at the same optimum
    started = _run(disk_data, 1e-3, 4, client=local_cluster, **kwargs)
    assert started.converged and started.solver == "dual_newton"
    assert abs(started.primal - in_process.primal) <= max(started.gap, in_process.gap)
    evaluation = problem.evaluate(started.w, disk_data)
    assert started.primal == pytest.approx(evaluation.primal, rel=1e-10)
    # the Woodbury preconditioner's two-half rounds (its solution relayed to the owners,
    # its matrix summed over the workers): the same run as in this process
    kwargs.update(start_passes=0, dense_columns=30, home_cg_nnz=0)
    on_cluster = _run(disk_data, 1e-3, 4, client=local_cluster, **kwargs)
    in_process = _run(disk_data, 1e-3, 4, **kwargs)
    assert_cluster_run_equals_in_process(on_cluster, in_process, problem, disk_data)


@pytest.mark.cluster
@pytest.mark.long  # a killed worker: CI's second call (-m long, issue 49)
def test_survives_a_worker_killed_mid_epoch(local_cluster, disk_data, tmp_path):
    from _faults import straight_and_killed, wait_for_two_workers

    client = local_cluster
    kwargs = {"loss": "hinge", "alpha": 1e-5, "solver": "dual_newton", "grid": 4, "tol": 0.0,
              "eval_every": 1, "eta": 1e-2}  # fmt: skip
    straight, survived = straight_and_killed(client, disk_data, tmp_path, 0.05, **kwargs)
    # the tasks pinned to the dead worker never run: the wait notices that an owner left and
    # the driver replays from the last checkpoint's dual point, whose w is computed again
    # (the same run to rounding)
    assert survived.recoveries >= 1
    assert survived.n_epochs == straight.n_epochs
    np.testing.assert_allclose(
        [r["primal"] for r in survived.history], [r["primal"] for r in straight.history],
        rtol=1e-9,
    )  # fmt: skip
    np.testing.assert_allclose(survived.w, straight.w, rtol=1e-8, atol=1e-12)
    wait_for_two_workers(client)
