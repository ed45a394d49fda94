"""One-vs-rest CoCoA+ (issue 51): the kernel against the binary pass, the run against liblinear."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.svm import LinearSVC as SkLinearSVC

from daskpd import LinearSVC, metrics
from daskpd.data import MemoryDataset
from daskpd.kernels import cocoa as binary_kernels
from daskpd.kernels import cocoa_multiclass as kernels
from daskpd.problem import Problem
from daskpd.solvers.cocoa import CocoaOptions
from daskpd.solvers.cocoa._multiclass import one_vs_rest, read_rows


def _blobs(n_classes, n_samples, seed=0):
    X, y = make_classification(
        n_samples=n_samples, n_features=20, n_informative=10, n_classes=n_classes,
        n_clusters_per_class=1, class_sep=2.0, random_state=seed,
    )  # fmt: skip
    return X, y


@pytest.mark.parametrize("loss", ["hinge", "logistic", "squared_hinge", "smooth_hinge"])
@pytest.mark.parametrize("binary", [False, True])
def test_a_pass_steps_every_class_as_its_binary_pass_does(loss, binary):
    # a visit of a row takes each class's step of the binary kernel on the same order:
    # class k's duals, weights and certificate sums are the binary pass's on labels +-1, and
    # so are the projected gradients' spread and held gradients liblinear's shrinking reads
    rng = np.random.default_rng(3)
    X = sp.random(40, 12, density=0.4, format="csr", random_state=4, dtype=np.float64)
    if binary:
        X.data[:] = 1.0
    labels = rng.integers(0, 3, 40).astype(np.float64)
    data = MemoryDataset(X, labels)
    problem = Problem(loss, "l2", 0.05)
    rows = read_rows(data, np.array([0.0, 1.0, 2.0]))
    n, d = X.shape
    inv_alpha_n = 1.0 / (0.05 * n)
    z = rng.uniform(0, 0.5, (n, 3)) * np.where(rows.label[:, None] == np.arange(3), -1.0, 1.0)
    z[: n // 2] = 0.0  # rows at the bound: those of margin above 1 take no step (held)
    w_start = 3.0 * rng.normal(size=(d, 3))
    v = w_start.copy()
    z_multi = z.copy()
    sums = np.zeros((2, 3))
    visits = np.zeros(n, dtype=np.int64)
    pg_range = np.full((2, 3), np.nan)
    held = np.full((n, 3), -7.0)
    order = rng.permutation(n).astype(np.int64)
    kernels.one_vs_rest_pass(
        rows.indptr, rows.indices, rows.vals, rows.binary, rows.label, rows.weight,
        rows.norm_sq, z_multi, v, w_start, order, problem.loss.code, problem.loss.params,
        1.0, inv_alpha_n, sums, visits, pg_range, held,
    )  # fmt: skip
    np.testing.assert_array_equal(visits, np.ones(n))
    boxed = loss != "logistic"
    for k in range(3):
        group = binary_kernels.GroupRows(
            rows.indptr, rows.indices, rows.vals, rows.binary,
            np.where(rows.label == k, 1.0, -1.0), rows.weight, rows.norm_sq,
        )  # fmt: skip
        pack = np.zeros((d, 2))
        binary_kernels.start_pack(w_start[:, k].copy(), np.arange(d, dtype=np.int32), pack)
        z_k = z[:, k].copy()
        spread = np.zeros(2)
        held_k = np.full(n, -7.0) if boxed else np.zeros(0)
        loss_sum, conj_sum, _ = binary_kernels.cocoa_pass(
            group, z_k, pack, order[None, :], problem.loss.code, problem.loss.params,
            binary_kernels.PassSteps(1.0, inv_alpha_n), spread, held_k, 0,
            binary_kernels.NO_BOUNDS,
        )  # fmt: skip
        np.testing.assert_array_equal(z_multi[:, k], z_k)
        np.testing.assert_array_equal(v[:, k], pack[:, binary_kernels.PACK_V])
        assert sums[0, k] == loss_sum and sums[1, k] == conj_sum
        np.testing.assert_array_equal(pg_range[:, k], spread)
        if boxed:
            assert spread[0] > spread[1]  # a real spread, not the empty pass's zeros
            np.testing.assert_array_equal(held[:, k], held_k)  # NaN where a row stepped
            assert np.isnan(held_k).any() and not np.isnan(held_k).all()


@pytest.mark.parametrize("shrinking", [False, True])
def test_a_round_visits_each_row_once_for_all_classes(shrinking):
    # row_visits is the kernel's own count: the full pass visits a row once for all 10
    # classes. With shrinking, each class's shrunk passes then read its active rows only:
    # the nonzeros they read (the binary kernel's own count) are far fewer than full passes'.
    X, y = _blobs(10, 200)
    weights = np.ones(200)
    weights[:5] = 0.0  # rows of weight 0 are not visited
    data = MemoryDataset(X, y.astype(float), sample_weight=weights)
    nnz = 195 * 20
    options = CocoaOptions(shrinking=shrinking)
    problem = Problem("hinge", "l2", 0.1)
    result = one_vs_rest(data, problem, max_epochs=7, tol=0.0, options=options)
    assert result.n_epochs == 7 and result.w.shape == (10, 20)
    np.testing.assert_array_equal(result.row_visits, np.r_[np.zeros(5), np.full(195, 7)])
    passes = np.array([row["shrunk_passes"] for row in result.history])
    read = np.array([row["shrunk_nonzeros"] for row in result.history])
    if shrinking:
        assert passes.shape == (7, 10) and np.all(passes >= 1)
        assert np.all(read < passes.sum(axis=1) * nnz / 4)  # a shrunk pass: < 1/4 of the rows
    else:
        assert not passes.any() and not read.any()
    twice = one_vs_rest(
        data, problem, max_epochs=3, tol=0.0,
        options=CocoaOptions(shrinking=shrinking, local_passes=2),
    )  # fmt: skip
    np.testing.assert_array_equal(twice.row_visits, np.r_[np.zeros(5), np.full(195, 6)])
    assert twice.history[-1]["gap"] < result.history[2]["gap"]  # more steps a round


def _liblinear_objectives(X, y, loss, alpha):
    n = X.shape[0]
    C = 1.0 / (alpha * n)
    if loss == "hinge":
        model = SkLinearSVC(C=C, loss="hinge", dual=True, tol=1e-10, max_iter=10**6,
                            fit_intercept=False, random_state=0)  # fmt: skip
    else:
        model = SkLogisticRegression(C=C, solver="liblinear", tol=1e-10, max_iter=10**5,
                                     fit_intercept=False, random_state=0)  # fmt: skip
    ovr = OneVsRestClassifier(model).fit(X, y)
    primal = []
    for k, estimator in enumerate(ovr.estimators_):
        w = estimator.coef_.ravel()
        margins = np.where(y == ovr.classes_[k], 1.0, -1.0) * (X @ w)
        losses = np.maximum(0.0, 1.0 - margins) if loss == "hinge" else np.logaddexp(0, -margins)
        primal.append(losses.mean() + 0.5 * alpha * w @ w)
    return ovr, np.array(primal)


@pytest.mark.parametrize(
    ("n_classes", "n_samples", "loss", "alpha"),
    [
        (3, 300, "hinge", 0.03),
        (3, 300, "logistic", 0.01),
        (10, 200, "hinge", 0.1),
        (10, 300, "logistic", 0.01),
    ],
)
def test_one_vs_rest_matches_liblinear(n_classes, n_samples, loss, alpha):
    # liblinear's objective with the bias column as daskpd writes it (a regularized constant
    # feature): C = 1 / (alpha n), no separate intercept. Accuracy on held-out rows: on the
    # training rows, which sit on the margins, near-ties of the classes' scores make it
    # differ between liblinear's own runs (random_state) by more than 0.01.
    X, y = _blobs(n_classes, n_samples + 200)
    X = np.hstack([X, np.ones((n_samples + 200, 1))])
    X_test, y_test, X, y = X[n_samples:], y[n_samples:], X[:n_samples], y[:n_samples]
    ovr, reference = _liblinear_objectives(X, y, loss, alpha)
    result = one_vs_rest(
        MemoryDataset(X, y.astype(float)), Problem(loss, "l2", alpha), max_epochs=5000,
        tol=1e-7 * reference.min(), seed=np.random.SeedSequence(1),
    )  # fmt: skip
    assert result.converged
    assert np.all(result.gaps <= 1e-6 * result.primal)
    np.testing.assert_allclose(result.primal, reference, rtol=1e-6)
    predicted = result.classes[np.argmax(X_test @ result.w.T, axis=1)]
    assert abs(np.mean(predicted == y_test) - ovr.score(X_test, y_test)) <= 0.01


def test_shrinking_certifies_the_hinge_where_plain_rounds_stall():
    # issue 51's defect: a round was one plain pass of dual coordinate ascent, which moves a
    # dual variable on its way to the box's end by at most 1 / kappa a visit, where
    # liblinear spends its passes on the rows still moving (shrinking). 3 classes, 2000 x 50
    # (not separable): plain rounds stall; with the binary solver's shrunk passes, the
    # default, every class's objective is certified and within 1e-6 of liblinear's.
    X, y = make_classification(
        n_samples=2500, n_features=50, n_informative=25, n_classes=3, n_clusters_per_class=1,
        class_sep=1.0, random_state=0,
    )  # fmt: skip
    X_test, y_test, X, y = X[2000:], y[2000:], X[:2000], y[:2000]
    alpha = 0.03
    ovr, reference = _liblinear_objectives(X, y, "hinge", alpha)
    data, problem = MemoryDataset(X, y.astype(float)), Problem("hinge", "l2", alpha)
    tol = 1e-7 * reference.min()
    plain = one_vs_rest(
        data, problem, max_epochs=60, tol=tol, options=CocoaOptions(shrinking=False)
    )
    assert not plain.converged and plain.stop_reason == "max_epochs"
    assert np.all(plain.gaps > 1e-4 * plain.primal)
    result = one_vs_rest(data, problem, max_epochs=60, tol=tol)
    assert result.converged and result.stop_reason == "tol"
    assert np.all(result.gaps <= 1e-6 * result.primal)
    np.testing.assert_allclose(result.primal, reference, rtol=1e-6)
    predicted = result.classes[np.argmax(X_test @ result.w.T, axis=1)]
    assert abs(np.mean(predicted == y_test) - ovr.score(X_test, y_test)) <= 0.01


def test_a_run_stops_only_when_every_class_gap_is_within_tol():
    # the stop: the sum of the classes' gaps within tol (so is each), not before; the
    # returned point is the one certified (its primal and dual recomputed here from w and z);
    # a run cut short says it is not certified, and the estimator warns
    X, y = _blobs(3, 300)
    alpha, tol = 0.03, 1e-5
    data, problem = MemoryDataset(X, y.astype(float)), Problem("hinge", "l2", alpha)
    result = one_vs_rest(data, problem, max_epochs=500, tol=tol)
    class_gaps = np.array([row["class_gap"] for row in result.history])
    assert result.converged and result.stop_reason == "tol" and result.n_epochs > 2
    assert np.all(result.gaps <= tol) and result.gap <= tol
    assert np.all(class_gaps[:-1].sum(axis=1) > tol)
    np.testing.assert_array_equal(result.gaps, class_gaps[-1])
    signs = np.where(y[:, None] == np.arange(3), 1.0, -1.0)
    folded = -signs * result.z  # the hinge's dual in [0, 1]
    assert folded.min() >= 0.0 and folded.max() <= 1.0
    np.testing.assert_allclose(result.w, -(X.T @ result.z).T / (alpha * 300), atol=1e-10)
    half = 0.5 * alpha * np.sum(result.w**2, axis=1)
    losses = np.maximum(0.0, 1.0 - signs * (X @ result.w.T)).mean(axis=0)
    np.testing.assert_allclose(result.primal, losses + half, rtol=1e-10)
    np.testing.assert_allclose(result.dual, folded.mean(axis=0) - half, rtol=1e-10)
    short = one_vs_rest(data, problem, max_epochs=result.n_epochs - 1, tol=tol)
    assert not short.converged and short.stop_reason == "max_epochs" and short.gap > tol
    with pytest.warns(ConvergenceWarning, match="stopped after 2 epochs"):
        model = LinearSVC(alpha=alpha, tol=tol, max_iter=2, random_state=0).fit(X, y)
    assert model.gap_ > tol and len(model.history_[-1]["class_gap"]) == 3


def test_one_vs_rest_refuses_what_it_does_not_run_naming_it():
    X, y = _blobs(3, 60)
    data, problem = MemoryDataset(X, y.astype(float)), Problem("hinge", "l2", 0.1)
    refused = {"screening=True": {"screening": True}, "grid=2": {"grid": 2},
               "threads=2": {"threads": 2}}  # fmt: skip
    for name, option in refused.items():
        with pytest.raises(ValueError, match=name):
            one_vs_rest(data, problem, max_epochs=1, options=CocoaOptions(**option))
    with pytest.raises(ValueError, match="shrinking=True needs a loss whose dual lives on a box"):
        one_vs_rest(
            data, Problem("logistic", "l2", 0.1), max_epochs=1,
            options=CocoaOptions(shrinking=True),
        )  # fmt: skip


def test_multiclass_metrics_against_scikit_learn():
    from sklearn.metrics import average_precision_score, f1_score

    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 100) * 2.0
    scores = rng.normal(size=(100, 4)) + np.eye(4)[(y / 2).astype(int)]
    classes = np.array([0.0, 2.0, 4.0, 6.0])
    found = metrics.multiclass_metrics(y, scores, classes)
    predicted = classes[np.argmax(scores, axis=1)]
    assert found["accuracy"] == np.mean(predicted == y)
    assert found["macro_f1"] == pytest.approx(f1_score(y, predicted, average="macro"))
    for k, label in enumerate(classes):
        expected = average_precision_score(y == label, scores[:, k])
        assert found["average_precision"][str(int(label))] == pytest.approx(expected)
        assert 0 < found["auprc"][str(int(label))] <= 1
