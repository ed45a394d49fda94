"""Multiclass data through solve, the estimators, model files and the command line (issue 51)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.svm import LinearSVC as SkLinearSVC

import daskpd
from daskpd.data import MemoryDataset, write_dataset
from tests._cli import run_cli


def _blobs(n_classes=3, n_samples=300, seed=0):
    return make_classification(
        n_samples=n_samples, n_features=12, n_informative=8, n_classes=n_classes,
        n_clusters_per_class=1, class_sep=2.0, random_state=seed,
    )  # fmt: skip


def test_solve_returns_a_weight_row_and_a_certificate_per_class():
    X, y = _blobs()
    result = daskpd.solve(
        MemoryDataset(X, y.astype(float)), loss="logistic", alpha=1e-2, tol=1e-8, max_epochs=500
    )
    assert result.solver == "cocoa" and result.converged
    assert result.w.shape == (3, 12) and result.z.shape == (300, 3)
    row = result.history[-1]
    assert len(row["class_gap"]) == 3 and row["gap"] == pytest.approx(sum(row["class_gap"]))
    assert result.objective["classes"] == [0.0, 1.0, 2.0]
    np.testing.assert_allclose(result.decision_function((X, y.astype(float))), X @ result.w.T)


@pytest.mark.parametrize("solver", ["dso", "spdc", "dspdc", "batch", "tron", "gsfw", "pdprox"])
def test_other_solvers_refuse_multiclass_data_naming_themselves(solver):
    X, y = _blobs(n_samples=60)
    loss = "hinge" if solver in ("dso", "pdprox", "dspdc", "spdc") else "logistic"
    with pytest.raises(
        ValueError, match=f"solver '{solver}' does not train multiclass data"
    ) as info:
        daskpd.solve(MemoryDataset(X, y.astype(float)), loss=loss, solver=solver, max_epochs=1)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("estimator", "reference"),
    [
        (daskpd.LinearSVC, lambda C: SkLinearSVC(C=C, loss="hinge", dual=True, tol=1e-10,
                                                 max_iter=10**6)),
        (daskpd.LogisticRegression, lambda C: SkLogisticRegression(C=C, solver="liblinear",
                                                                   tol=1e-10, max_iter=10**5)),
    ],
)  # fmt: skip
def test_estimators_fit_string_labels_as_scikit_learn_one_vs_rest(estimator, reference):
    X, y = _blobs(n_classes=4, n_samples=400, seed=1)
    names = np.array(["ant", "bee", "cat", "dog"])[y]
    X_test, names_test, X, names = X[200:], names[200:], X[:200], names[:200]
    alpha = 0.05
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = estimator(alpha=alpha, tol=1e-7, max_iter=3000, random_state=0).fit(X, names)
    assert model.classes_.tolist() == ["ant", "bee", "cat", "dog"]
    assert model.coef_.shape == (4, 12) and model.intercept_.shape == (4,)
    scores = model.decision_function(X)
    assert scores.shape == (200, 4)
    np.testing.assert_allclose(scores, X @ model.coef_.T + model.intercept_)
    predicted = model.predict(X)
    assert predicted.dtype == names.dtype
    np.testing.assert_array_equal(predicted, model.classes_[np.argmax(scores, axis=1)])
    ovr = OneVsRestClassifier(reference(1.0 / (alpha * 200))).fit(X, names)
    assert abs(model.score(X_test, names_test) - ovr.score(X_test, names_test)) <= 0.01
    if hasattr(model, "predict_proba"):
        proba = model.predict_proba(X)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        np.testing.assert_allclose(proba, ovr.predict_proba(X), atol=1e-3)


def test_a_multiclass_estimator_saves_loads_and_scores_every_input(tmp_path):
    import dask.array as da

    X, y = _blobs(n_samples=120)
    model = daskpd.LinearSVC(alpha=0.05, max_iter=50, tol=1e-2, random_state=0).fit(X, y + 10)
    model.save(tmp_path / "model.zarr")
    loaded = daskpd.LinearSVC.load(tmp_path / "model.zarr")
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
    np.testing.assert_array_equal(loaded.intercept_, model.intercept_)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    expected = model.decision_function(X)
    lazy = model.decision_function(da.from_array(X, chunks=(50, 12)))
    np.testing.assert_allclose(lazy.compute(), expected)
    np.testing.assert_array_equal(
        model.predict(da.from_array(X, chunks=(50, 12))).compute(), model.predict(X)
    )
    stored = write_dataset(X, y + 10.0, tmp_path / "data.zarr", rows_per_block=40)
    np.testing.assert_allclose(np.asarray(model.decision_function(stored)), expected)
    # a multiclass store fits as the arrays it holds do
    from_store = daskpd.LinearSVC(alpha=0.05, max_iter=50, tol=1e-2, random_state=0).fit(stored)
    assert from_store.classes_.tolist() == [10.0, 11.0, 12.0]
    np.testing.assert_allclose(from_store.coef_, model.coef_, rtol=1e-10, atol=1e-12)


def test_class_weights_weigh_a_class_rows_in_every_problem(tmp_path):
    # c_i = class_weight[y_i] in each class's problem: the same as sample weights
    # (which the estimators rescale to mean 1, hence the class weights' mean 1 here)
    X, y = _blobs(n_samples=90)
    rows = np.array([2.0, 1.0, 0.5])[y]
    class_weight = {k: value / rows.mean() for k, value in enumerate([2.0, 1.0, 0.5])}
    options = {"alpha": 0.05, "tol": 1e-10, "max_iter": 1000, "random_state": 0}
    weighted = daskpd.LogisticRegression(class_weight=class_weight, **options).fit(X, y)
    same = daskpd.LogisticRegression(**options).fit(X, y, sample_weight=rows)
    np.testing.assert_allclose(weighted.coef_, same.coef_, rtol=1e-6, atol=1e-9)
    stored = write_dataset(X, y.astype(float), tmp_path / "data.zarr")
    with pytest.raises(ValueError, match="class_weight on a multiclass dataset"):
        daskpd.LinearSVC(class_weight="balanced").fit(stored)


def test_a_multiclass_store_trains_evaluates_and_predicts_from_the_command_line(tmp_path, capsys):
    X, y = _blobs(n_samples=200)
    X = sp.csr_matrix(np.where(np.abs(X) > 0.3, X, 0.0))
    write_dataset(X[:150], y[:150] * 3.0, tmp_path / "train.zarr")
    write_dataset(X[150:], y[150:] * 3.0, tmp_path / "test.zarr", task="multiclass")
    code, out, err = run_cli(
        capsys, "train", tmp_path / "train.zarr", "--loss", "hinge", "--alpha", "0.05",
        "--out", tmp_path / "model.zarr", "--in-process", "--no-progress", "--tol", "1e-3",
    )  # fmt: skip
    assert code == 0, err
    trained = json.loads(out)  # certified: every class's gap within tol, their sum too
    assert trained["converged"] and trained["stop_reason"] == "tol"
    assert len(trained["class_gap"]) == 3 and max(trained["class_gap"]) <= trained["gap"] <= 1e-3
    code, out, err = run_cli(capsys, "evaluate", tmp_path / "model.zarr", tmp_path / "test.zarr")
    assert code == 0, err
    found = json.loads(out)
    assert 0.7 < found["accuracy"] <= 1 and 0 < found["macro_f1"] <= 1
    assert sorted(found["auprc"]) == ["0", "3", "6"]
    code, out, err = run_cli(
        capsys, "predict", tmp_path / "model.zarr", tmp_path / "test.zarr",
        tmp_path / "out.zarr",
    )  # fmt: skip
    assert code == 0, err
    group = zarr.open_group(tmp_path / "out.zarr", mode="r")
    scores, labels = group["scores"][:], group["labels"][:]
    assert scores.shape == (50, 3)
    np.testing.assert_array_equal(labels, np.array([0.0, 3.0, 6.0])[np.argmax(scores, axis=1)])
    assert np.mean(labels == y[150:] * 3.0) == pytest.approx(found["accuracy"])


def test_on_a_cluster_the_rounds_give_the_in_process_bits(tmp_path, local_cluster):
    # the rows and duals stay on one worker, a task a round; the same seed, the same model
    X, y = _blobs(n_samples=150)
    stored = write_dataset(X, y.astype(float), tmp_path / "data.zarr", rows_per_block=50)
    options = {"loss": "hinge", "alpha": 0.05, "max_epochs": 5, "random_state": 3}
    here = daskpd.solve(stored, client=False, **options)
    there = daskpd.solve(stored, client=local_cluster, **options)
    np.testing.assert_array_equal(there.w, here.w)
    np.testing.assert_array_equal(there.z, here.z)
    assert [row["class_gap"] for row in there.history] == [row["class_gap"] for row in here.history]


def test_a_regression_loss_reads_multiclass_labels_as_numbers():
    # a store taken for multiclass costs a regression user nothing: the labels are kept
    X, y = _blobs(n_samples=80)
    options = {"loss": "squared", "alpha": 0.1, "tol": 1e-8, "random_state": 0}
    guessed = MemoryDataset(X, y.astype(float))
    told = MemoryDataset(X, y.astype(float), task="regression")
    assert guessed.task == "multiclass"
    found = daskpd.solve(guessed, test_data=guessed, **options)
    expected = daskpd.solve(told, test_data=told, **options)
    np.testing.assert_array_equal(found.w, expected.w)
    assert found.history[-1]["test_r2"] == expected.history[-1]["test_r2"]
