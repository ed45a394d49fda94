"""Problem: weak duality, gaps at independent optima, out-of-core equality, one compute, bad input.

Scaling between scikit-learn / liblinear and daskpd (n = number of rows, no intercept):

- LogisticRegression(C), LinearSVC(C, loss="hinge" | "squared_hinge"): sklearn minimizes
  ``C sum_i c_i loss_i + ||w||^2 / 2``; dividing by ``C n`` gives ours with L2 and
  ``alpha = 1 / (C n)``. Sample weights / class weights are our row weights ``c_i``.
- Lasso(alpha=a): ``(1/(2n)) ||y - Xw||^2 + a ||w||_1``, i.e. ours with Squared (``r^2/2``),
  L1 and ``alpha = a``.
- ElasticNet(alpha=a, l1_ratio=r): ours with Squared, ElasticNet(r) and ``alpha = a``.
- Ridge in closed form: ``w = (X^T X / n + alpha I)^{-1} X^T y / n``.
"""

from __future__ import annotations

import math

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import lsq_linear
from sklearn.linear_model import ElasticNet as SkElasticNet
from sklearn.linear_model import Lasso, LogisticRegression
from sklearn.svm import LinearSVC

from daskpd.data import MemoryDataset, write_dataset
from daskpd.losses import (
    Absolute,
    EpsilonInsensitive,
    Hinge,
    Huber,
    Logistic,
    SmoothHinge,
    Squared,
    SquaredHinge,
)
from daskpd.problem import Problem
from daskpd.regularizers import (
    L1,
    L2,
    Box,
    ElasticNet,
    GroupLasso,
    L1Ball,
    L1Inf,
    L2Ball,
    TraceNorm,
    Zero,
)

N, D = 60, 6
GROUPS = [[0, 3], [1, 2, 4], [5]]
LOSSES = [
    Hinge(),
    SmoothHinge(0.5),
    SquaredHinge(),
    Logistic(),
    Squared(),
    Absolute(),
    EpsilonInsensitive(0.2),
    Huber(0.5),
]
REGULARIZERS = [
    L2(),
    L1(),
    ElasticNet(0.4),
    ElasticNet(1.0),
    GroupLasso(GROUPS),
    L1Inf(GROUPS),
    TraceNorm((2, 3)),
    L1Ball(1.0),
    L2Ball(0.8),
    Box(-0.3, 0.5),
    Zero(),
]


def make_data(seed=0, n=N, d=D, classification=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w_true = rng.normal(size=d)
    if classification:
        y = np.where(X @ w_true + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    else:
        y = X @ w_true + 0.3 * rng.normal(size=n)
    return X, y


def reference(problem, X, y, w, z=None, weight=None, xtz=None):
    """Slow NumPy evaluation of the same definitions (module docstring of daskpd.problem).

    ``xtz`` stands in for ``X^T z`` in the regularizer's conjugate, as ``Problem.evaluate``'s
    argument of that name does.
    """
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    n = y.shape[0]
    c = np.ones(n) if weight is None else weight
    t = X @ w
    loss, reg, alpha = problem.loss, problem.regularizer, problem.alpha
    primal_loss = np.sum(c * loss.value(t, y)) / n
    if z is None:
        z = c * loss.gradient(t, y)
    conj = np.sum(c * loss.conjugate(z / c, y))
    free = reg.is_indicator or isinstance(reg, Zero)
    regularization = reg.value(w) if free else alpha * reg.value(w)
    v = -(X.T @ z if xtz is None else xtz) / n
    u = v if free else v / alpha
    s = reg.feasible_scale(u)
    if s == 0:
        dual = 0.0
    else:
        term = reg.conjugate(s * u)
        dual = -s * conj / n - (term if free else alpha * term)
    return primal_loss + regularization, dual


def labels_for(loss, X, y_class, y_reg):
    return y_class if loss.classification else y_reg


def random_dual(loss, y, rng):
    lo, hi = loss.dual_bounds(y)
    lo = np.maximum(lo, -3.0)
    hi = np.minimum(hi, 3.0)
    return lo + rng.random(y.shape[0]) * (hi - lo)


# ---- weak duality on random points -----------------------------------------------------------


@pytest.mark.parametrize("loss", LOSSES, ids=lambda loss: loss.name)
def test_weak_duality_on_random_points(loss):
    rng = np.random.default_rng(7)
    X, y_class = make_data(1)
    _, y_reg = make_data(1, classification=False)
    y = labels_for(loss, X, y_class, y_reg)
    data = MemoryDataset(X, y, rows_per_block=16)
    with dask.config.set(scheduler="sync"):
        for reg in REGULARIZERS:
            problem = Problem(loss, reg, 0.05)
            for _ in range(3):
                w = rng.normal(size=D) * 0.4
                if reg.is_indicator:
                    w = reg.prox(w, 1.0)
                others = [rng.normal(size=D) for _ in range(5)]
                others = [reg.prox(o, 1.0) if reg.is_indicator else o for o in others]
                for z in (None, random_dual(loss, y, rng)):
                    result = problem.evaluate(w, data, z=z)
                    assert result.gap >= 0, (loss.name, reg.name)
                    assert result.dual <= result.primal
                    # D(z) is a lower bound on P everywhere, not only at this w.
                    for other in others:
                        assert result.dual <= reference(problem, X, y, other)[0] + 1e-12
                    expected = reference(problem, X, y, w, z)
                    assert result.primal == pytest.approx(expected[0], rel=1e-12, abs=1e-14)
                    assert result.dual == pytest.approx(expected[1], rel=1e-10, abs=1e-12)


def test_infeasible_dual_gives_infinite_gap():
    X, y = make_data(2)
    problem = Problem(Hinge(), L2(), 0.1)
    z = -y * 2.0  # outside [-1, 0] in y z
    with dask.config.set(scheduler="sync"):
        result = problem.evaluate(np.zeros(D), (X, y), z=z)
    assert result.dual == -math.inf and result.gap == math.inf
    with dask.config.set(scheduler="sync"):
        result = Problem(Squared(), L1Ball(0.1), 0.0).evaluate(np.ones(D), (X, y))
    assert result.primal == math.inf and result.gap == math.inf


# ---- gaps at independent optima --------------------------------------------------------------


def gap(problem, X, y, w, z=None, weight=None):
    data = (X, y) if weight is None else (X, y, weight)
    with dask.config.set(scheduler="sync"):
        return problem.evaluate(np.asarray(w, dtype=np.float64).ravel(), data, z=z)


def test_ridge_closed_form():
    X, y = make_data(3, classification=False)
    alpha = 0.1
    w = np.linalg.solve(X.T @ X / N + alpha * np.eye(D), X.T @ y / N)
    result = gap(Problem(Squared(), L2(), alpha), X, y, w)
    assert result.gap < 1e-12
    assert result.primal == pytest.approx(
        np.sum((X @ w - y) ** 2) / (2 * N) + alpha / 2 * w @ w, rel=1e-14
    )


@pytest.mark.parametrize("weighted", [False, True])
def test_sklearn_logistic_regression(weighted):
    X, y = make_data(4)
    alpha = 0.02
    C = 1.0 / (alpha * N)
    weight = np.random.default_rng(0).uniform(0.5, 2.0, N) if weighted else None
    model = LogisticRegression(C=C, fit_intercept=False, tol=1e-12, max_iter=100_000)
    model.fit(X, y, sample_weight=weight)
    result = gap(Problem(Logistic(), L2(), alpha), X, y, model.coef_, weight=weight)
    assert 0 <= result.gap < 1e-6


def test_sklearn_logistic_regression_class_weight():
    X, y = make_data(5)
    alpha = 0.02
    class_weight = {-1: 2.0, 1: 0.5}
    model = LogisticRegression(
        C=1.0 / (alpha * N),
        fit_intercept=False,
        tol=1e-12,
        max_iter=100_000,
        class_weight=class_weight,
    )
    model.fit(X, y)
    problem = Problem(Logistic(), L2(), alpha, class_weight=class_weight)
    assert 0 <= gap(problem, X, y, model.coef_).gap < 1e-6
    # The unweighted problem is a different one: its gap at this w is clearly positive.
    assert gap(Problem(Logistic(), L2(), alpha), X, y, model.coef_).gap > 1e-4


def test_sklearn_linear_svc_squared_hinge():
    X, y = make_data(6)
    alpha = 0.05
    model = LinearSVC(
        C=1.0 / (alpha * N),
        loss="squared_hinge",
        fit_intercept=False,
        tol=1e-12,
        max_iter=10**6,
        random_state=0,
    )
    model.fit(X, y)
    assert 0 <= gap(Problem(SquaredHinge(), L2(), alpha), X, y, model.coef_).gap < 1e-6


def hinge_dual_from_primal(X, y, w, alpha, tol=1e-5):
    """Independent dual optimum for hinge + L2 at a primal optimum ``w``.

    Rows off the margin have fixed duals (0 or -y); the margin rows' duals ``-y_i a_i``,
    ``a_i in [0, 1]``, solve ``X^T z = -n alpha w`` by bounded least squares.
    """
    n = y.shape[0]
    t = y * (X @ w)
    z = np.where(t < 1 - tol, -y, 0.0)
    margin = np.abs(t - 1) <= tol
    A = (-y[margin, None] * X[margin]).T
    b = -n * alpha * w - X.T @ z
    a = lsq_linear(A, b, bounds=(0, 1), tol=1e-14).x
    z[margin] = -y[margin] * a
    return z


def test_sklearn_linear_svc_hinge():
    X, y = make_data(7)
    alpha = 0.05
    model = LinearSVC(
        C=1.0 / (alpha * N),
        loss="hinge",
        fit_intercept=False,
        dual=True,
        tol=1e-12,
        max_iter=10**6,
        # seeded: liblinear's coordinate order comes from numpy's global generator otherwise,
        # and 1 order in 40 stalls at this tolerance (a CI run drew one)
        random_state=0,
    )
    model.fit(X, y)
    w = model.coef_.ravel()
    problem = Problem(Hinge(), L2(), alpha)
    z = hinge_dual_from_primal(X, y, w, alpha)
    assert 0 <= gap(problem, X, y, w, z=z).gap < 1e-6
    # From w alone the certificate is valid (>= 0) but not tight for the hinge loss.
    assert gap(problem, X, y, w).gap >= 0


def test_sklearn_lasso():
    X, y = make_data(8, classification=False)
    alpha = 0.3
    model = Lasso(alpha=alpha, fit_intercept=False, tol=1e-14, max_iter=10**6).fit(X, y)
    assert np.count_nonzero(model.coef_) < D  # the L1 part is active
    result = gap(Problem(Squared(), L1(), alpha), X, y, model.coef_)
    assert 0 <= result.gap < 1e-6


@pytest.mark.parametrize("l1_ratio", [0.3, 0.9])
def test_sklearn_elastic_net(l1_ratio):
    X, y = make_data(9, classification=False)
    alpha = 0.2
    model = SkElasticNet(
        alpha=alpha, l1_ratio=l1_ratio, fit_intercept=False, tol=1e-14, max_iter=10**6
    ).fit(X, y)
    result = gap(Problem(Squared(), ElasticNet(l1_ratio), alpha), X, y, model.coef_)
    assert 0 <= result.gap < 1e-6


def proximal_gradient(loss, reg, alpha, X, y, iterations=3000):
    """Accelerated proximal gradient (FISTA, step 1/L, with adaptive restart) in NumPy: an
    optimizer independent of Problem."""
    n = y.shape[0]
    lipschitz = loss.smoothness * np.linalg.norm(X, 2) ** 2 / n
    step = 1.0 / lipschitz
    prox_step = step if reg.is_indicator else step * alpha
    w = extrapolated = np.zeros(X.shape[1])
    momentum = 1.0
    for _ in range(iterations):
        grad = X.T @ loss.gradient(X @ extrapolated, y) / n
        w_next = reg.prox(extrapolated - step * grad, prox_step)
        if (extrapolated - w_next) @ (w_next - w) > 0:
            momentum = 1.0  # restart when the momentum points uphill
        momentum_next = (1 + math.sqrt(1 + 4 * momentum**2)) / 2
        extrapolated = w_next + (momentum - 1) / momentum_next * (w_next - w)
        w, momentum = w_next, momentum_next
    return w


@pytest.mark.parametrize(
    ("loss", "reg", "alpha"),
    [
        (Squared(), GroupLasso(GROUPS), 0.3),
        (Logistic(), GroupLasso(GROUPS), 0.05),
        (Squared(), L1Inf(GROUPS), 0.3),
        (Squared(), TraceNorm((2, 3)), 0.3),
        (Logistic(), L1Ball(0.5), 0.0),
        (Squared(), L2Ball(0.5), 1.0),
        (Huber(0.5), Box(-0.2, 0.3), 0.0),
    ],
    ids=lambda p: getattr(p, "name", str(p)),
)
def test_gap_vanishes_at_numerical_optima(loss, reg, alpha):
    X, y_class = make_data(10)
    _, y_reg = make_data(10, classification=False)
    y = labels_for(loss, X, y_class, y_reg)
    w = proximal_gradient(loss, reg, alpha, X, y)
    result = gap(Problem(loss, reg, alpha), X, y, w)
    assert 0 <= result.gap < 1e-6
    # The optimum is not trivial: the regularizer or constraint is active.
    assert result.regularization > 0 or reg.is_indicator


# ---- out of core: zarr blocks, one compute ---------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "loss", "reg"),
    [
        ("csr64", Logistic(), L2()),
        ("csr32", SquaredHinge(), L1()),
        ("binary", Hinge(), ElasticNet(0.5)),
        ("dense", Squared(), GroupLasso([[0, 1, 2], [3, 4, 5, 6, 7]])),
        ("weighted", SmoothHinge(1.0), L2()),
    ],
)
def test_zarr_dataset_equals_numpy_in_one_compute(tmp_path, counting_scheduler, kind, loss, reg):
    rng = np.random.default_rng(11)
    n, d = 203, 8
    X = sp.random(n, d, density=0.4, random_state=3, format="csr")
    if kind == "binary":
        X.data[:] = 1.0
    if kind == "csr32":
        X = X.astype(np.float32)
    if kind == "dense":
        X = X.toarray()
    y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    if not loss.classification:
        y = rng.normal(size=n)
    weight = rng.uniform(0.2, 3.0, n) if kind == "weighted" else None
    dataset = write_dataset(X, y, tmp_path / "data", rows_per_block=13, sample_weight=weight)
    assert dataset.n_row_blocks >= 15
    if kind == "binary":
        assert dataset.binary
    problem = Problem(loss, reg, 0.03)
    w = rng.normal(size=d)
    before = counting_scheduler.calls
    result = problem.evaluate(w, dataset)
    assert counting_scheduler.calls - before == 1
    X64 = X.astype(np.float64)
    expected = reference(problem, X64, y, w, weight=weight)
    assert result.primal == pytest.approx(expected[0], rel=1e-10)
    assert result.dual == pytest.approx(expected[1], rel=1e-10)
    # A given z, whole or as pieces (ndarrays and delayed objects) not aligned with the blocks.
    z = random_dual(loss, y, rng) * (1.0 if weight is None else weight)
    expected = reference(problem, X64, y, w, z=z, weight=weight)
    bounds = [0, 20, 21, 130, n]
    pieces = [z[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    delayed_pieces = [dask.delayed(np.copy)(p) for p in pieces]
    before = counting_scheduler.calls
    cases = [(z, None), (pieces, bounds), (delayed_pieces, bounds), (da.from_array(z, 37), None)]
    for given, given_bounds in cases:
        result = problem.evaluate(w, dataset, z=given, z_bounds=given_bounds)
        assert result.primal == pytest.approx(expected[0], rel=1e-10)
        assert result.dual == pytest.approx(expected[1], rel=1e-10)
    assert counting_scheduler.calls - before == len(cases)
    # X^T z given (a solver's running sum): the same values; and it is what the dual reads
    xtz = X64.T @ z
    for given, given_bounds in cases[:2]:
        result = problem.evaluate(w, dataset, z=given, z_bounds=given_bounds, xtz=xtz)
        assert result.primal == pytest.approx(expected[0], rel=1e-10)
        assert result.dual == pytest.approx(expected[1], rel=1e-10)
    other = 0.5 * xtz
    result = problem.evaluate(w, dataset, z=z, xtz=other)
    moved = reference(problem, X64, y, w, z=z, weight=weight, xtz=other)
    assert result.dual == pytest.approx(moved[1], rel=1e-10)
    assert result.dual != pytest.approx(expected[1], rel=1e-6)


def test_class_weight_balanced_on_a_dataset(tmp_path, counting_scheduler):
    X, y = make_data(12)
    dataset = write_dataset(X, y, tmp_path / "data", rows_per_block=9)
    problem = Problem(Logistic(), L2(), 0.1, class_weight="balanced")
    w = np.linspace(-1, 1, D)
    result = problem.evaluate(w, dataset)
    n_pos, n_neg = np.sum(y > 0), np.sum(y < 0)
    weight = np.where(y > 0, N / (2 * n_pos), N / (2 * n_neg))
    expected = reference(problem, X, y, w, weight=weight)
    assert result.primal == pytest.approx(expected[0], rel=1e-12)
    assert result.dual == pytest.approx(expected[1], rel=1e-12)
    assert counting_scheduler.calls == 1


@pytest.mark.cluster
def test_futures_on_a_local_cluster(tmp_path, local_cluster):
    X, y = make_data(13, n=120)
    dataset = write_dataset(X, y, tmp_path / "data", rows_per_block=25)
    problem = Problem(SmoothHinge(1.0), L1(), 0.05)
    w = np.linspace(-0.5, 0.5, D)
    z = -y * np.random.default_rng(1).random(120)
    bounds = [0, 40, 80, 120]
    futures = local_cluster.scatter([z[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    result = problem.evaluate(w, dataset, z=futures, z_bounds=bounds, client=local_cluster)
    expected = reference(problem, X, y, w, z=z)
    assert result.primal == pytest.approx(expected[0], rel=1e-12)
    assert result.dual == pytest.approx(expected[1], rel=1e-12)
    # with X^T z given, the chained blocks carry no vector and the values are the same; w and
    # X^T z can be futures (a solver's state on a worker), read there
    w_future, xtz_future = local_cluster.scatter([w, X.T @ z])
    for given_w, given_xtz in ((w, X.T @ z), (w_future, xtz_future)):
        result = problem.evaluate(
            given_w, dataset, z=futures, z_bounds=bounds, xtz=given_xtz, client=local_cluster
        )
        assert result.primal == pytest.approx(expected[0], rel=1e-12)
        assert result.dual == pytest.approx(expected[1], rel=1e-12)


def test_on_a_cluster_blocks_are_summed_in_chains_placed_where_their_rows_stay(tmp_path):
    from daskpd.problem import _FAN_IN, _block_partial_into

    X, y = make_data(14, n=200)
    dataset = write_dataset(X, y, tmp_path / "data", rows_per_block=10)
    problem = Problem("logistic", "l2", 0.1)
    w = np.linspace(-0.5, 0.5, D)
    z = -y * 0.5
    workers = ("tcp://b:2", "tcp://a:1")
    graph, root = problem._graph(w, dataset, z, None, workers=workers)
    tasks = graph._tasks.values()
    chained = [task for task in tasks if getattr(task, "func", None) is _block_partial_into]
    assert len(chained) == 20
    # block i on block_worker(sorted workers, i, 20), the worker that keeps its rows
    workers = [graph._annotations[key]["workers"][0] for key in sorted(graph._annotations)]
    assert sorted(workers) == ["tcp://a:1"] * 10 + ["tcp://b:2"] * 10
    heads = sorted(task.args[2] for task in chained if task.args[0] is None)
    assert heads == list(range(0, 200, 10 * _FAN_IN))  # chains of _FAN_IN blocks
    # the same chains on another cluster (a replaced worker, or one worker fewer)
    other, _ = problem._graph(w, dataset, z, None, workers=("tcp://c:3",))
    other = [t for t in other._tasks.values() if getattr(t, "func", 0) is _block_partial_into]
    assert sorted(task.args[2] for task in other if task.args[0] is None) == heads
    # the same numbers as the tree of one partial per block, in this process (the last two,
    # the dual's scale and alpha R*(-X^T z / (alpha n)), read the summed X^T z)
    (chained_terms,) = graph.compute([root])
    tree_graph, tree_root = problem._graph(w, dataset, z, None)
    (tree_terms,) = tree_graph.compute([tree_root])
    assert chained_terms == pytest.approx(tree_terms, rel=1e-13)
    loss_sum, _, reg_term, scale, conj_term = chained_terms
    assert loss_sum == pytest.approx(-np.sum(np.log(1 / (1 + np.exp(-y * (X @ w))))), rel=1e-12)
    assert reg_term == pytest.approx(0.1 * 0.5 * w @ w, rel=1e-13)
    assert scale == 1.0
    assert conj_term == pytest.approx(0.5 * np.sum((X.T @ z / (0.1 * 200)) ** 2) * 0.1, rel=1e-12)


# ---- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Problem("hingee", "l2", 0.1), "loss='hingee'"),
        (lambda: Problem("hinge", "l3", 0.1), "regularizer='l3'"),
        (lambda: Problem("hinge", "l2", 0.0), "alpha=0.0"),
        (lambda: Problem("hinge", "l1", -1.0), "alpha=-1.0"),
        (lambda: Problem("hinge", "l2", math.nan), "alpha=nan"),
        (lambda: Problem("hinge", "l2", "big"), "alpha='big'"),
        (lambda: Problem("hinge", L1Ball(1.0), -0.1), "alpha=-0.1"),
        (lambda: Problem("squared", "l2", 0.1, class_weight={1: 2.0}), "class_weight"),
        (lambda: Problem("hinge", "l2", 0.1, class_weight={2: 1.0}), "label 2"),
        (lambda: Problem("hinge", "l2", 0.1, class_weight={1: -1.0}), r"class_weight\[1\]"),
        (lambda: Problem("hinge", "l2", 0.1, class_weight="auto"), "class_weight='auto'"),
    ],
)
def test_bad_problem_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_alpha_zero_allowed_for_constraint_sets():
    assert Problem("squared", L1Ball(1.0), 0.0).alpha == 0.0
    assert Problem("squared", Zero(), 0).alpha == 0.0


def test_bad_data_raises_before_any_dask_work(counting_scheduler):
    X, y = make_data(14)
    y_reg = X[:, 0].copy()
    one_class = np.ones(N)
    problem = Problem("hinge", "l2", 0.1)
    cases = [
        (lambda: problem.evaluate(np.zeros(D), (X, y_reg)), "labels in"),
        (lambda: problem.evaluate(np.zeros(D), (X, one_class)), "both classes"),
        (lambda: problem.evaluate(np.zeros(D + 1), (X, y)), r"w must have shape \(6,\)"),
        (lambda: problem.evaluate(np.zeros(D), (X, y), z=np.zeros(N - 1)), "z must have shape"),
        (
            lambda: problem.evaluate(np.zeros(D), (X, y), z=[np.zeros(N)], z_bounds=[0, N - 1]),
            "z_bounds",
        ),
        (lambda: problem.evaluate(np.zeros(D), (X, y), z=[np.zeros(N)]), "needs z_bounds"),
        (lambda: problem.evaluate(np.zeros(D), (X, y), xtz=np.zeros(D)), "xtz needs z"),
        (
            lambda: problem.evaluate(np.zeros(D), (X, y), z=np.zeros(N), xtz=np.zeros(D - 1)),
            r"xtz must have shape \(6,\)",
        ),
        (
            lambda: Problem("squared", GroupLasso([[0, 1], [2]]), 0.1).evaluate(
                np.zeros(D), (X, y_reg)
            ),
            "n_features=3",
        ),
        (lambda: Problem("squared", TraceNorm((2, 2)), 0.1).check((X, y_reg)), "n_features=4"),
        (lambda: problem.evaluate(np.zeros(D), X), "data must be"),
        (lambda: problem.evaluate(np.zeros(D), (X, y[:-1])), "y has"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    assert counting_scheduler.calls == 0


def test_bad_labels_on_a_zarr_dataset_raise_before_any_dask_work(tmp_path, counting_scheduler):
    # The on-disk path: labels come from the dataset's metadata (or its y array), not from a
    # Dask compute, so bad labels fail before any block is read by Dask.
    X, y = make_data(16)
    regression = write_dataset(X, X[:, 0].copy(), tmp_path / "regression", rows_per_block=9)
    one_class = write_dataset(X, np.ones(N), tmp_path / "one_class", rows_per_block=9)
    problem = Problem("logistic", "l2", 0.1)
    with pytest.raises(ValueError, match=r"loss='logistic' needs labels in \{-1, \+1\}, got"):
        problem.evaluate(np.zeros(D), regression)
    with pytest.raises(ValueError, match=r"both classes -1 and \+1, got label counts"):
        problem.evaluate(np.zeros(D), one_class)
    with pytest.raises(ValueError, match=r"w must have shape \(6,\)"):
        Problem("squared", "l2", 0.1).evaluate(np.zeros(D - 1), regression)
    with pytest.raises(ValueError, match="n_features=6"):
        Problem("squared", TraceNorm((2, 2)), 0.1).evaluate(np.zeros(D), regression)
    assert counting_scheduler.calls == 0


def test_primal_dual_gap_shortcuts(counting_scheduler):
    X, y = make_data(15)
    problem = Problem(Logistic(), L2(), 0.1)
    w = np.full(D, 0.1)
    z = -y * 0.3
    evaluation = problem.evaluate(w, (X, y), z=z)
    assert problem.primal(w, (X, y)) == evaluation.primal
    assert problem.gap(w, (X, y), z=z) == evaluation.gap
    assert problem.dual(z, (X, y)) == evaluation.dual
    assert evaluation.loss + evaluation.regularization == evaluation.primal
    assert evaluation.n_samples == N and evaluation.dual_scale == 1.0
