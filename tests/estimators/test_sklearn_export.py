"""``to_sklearn()``: every estimator exports to a fitted scikit-learn estimator that predicts as
it does (dense and sparse input), whose pickle loads and predicts where daskpd cannot be
imported, with hyper-parameters that mean the same objective."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet as SkElasticNet
from sklearn.linear_model import Lasso as SkLasso
from sklearn.linear_model import LinearRegression, SGDClassifier, SGDRegressor
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.linear_model import Ridge as SkRidge
from sklearn.multiclass import OneVsRestClassifier
from sklearn.svm import LinearSVC as SkLinearSVC
from sklearn.svm import LinearSVR as SkLinearSVR

import daskpd
from daskpd.losses import Huber
from daskpd.regularizers import L1Ball

N_SAMPLES, N_FEATURES = 150, 12


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_SAMPLES, N_FEATURES))
    X[rng.random(X.shape) < 0.5] = 0.0  # sparse-looking, so CSR differs from dense in layout
    w = rng.standard_normal(N_FEATURES)
    margin = X @ w + 0.3
    y_class = np.where(margin + 0.5 * rng.standard_normal(N_SAMPLES) > 0, "yes", "no")
    y_reg = margin + 0.1 * rng.standard_normal(N_SAMPLES)
    return X, y_class, y_reg


#: (estimator, classifier?, scikit-learn class of its export)
CASES = [
    (daskpd.LinearSVC(alpha=1e-2), True, SkLinearSVC),
    (daskpd.LinearSVC(alpha=1e-2, penalty="l1"), True, SGDClassifier),
    (daskpd.LinearSVC(alpha=1e-2, penalty="elasticnet", class_weight="balanced"), True,
     SGDClassifier),
    (daskpd.LogisticRegression(alpha=1e-2, class_weight={"yes": 2.0, "no": 1.0}), True,
     SkLogisticRegression),
    (daskpd.LogisticRegression(alpha=1e-2, penalty="l1"), True, SkLogisticRegression),
    (daskpd.LogisticRegression(alpha=1e-2, penalty="elasticnet", fit_intercept=False), True,
     SkLogisticRegression),
    (daskpd.SaddlePointEstimator(loss="squared_hinge", alpha=1e-2), True, SkLinearSVC),
    (daskpd.SaddlePointEstimator(loss="squared_hinge", regularizer="l1", alpha=1e-2), True,
     SkLinearSVC),
    (daskpd.SaddlePointEstimator(loss="smooth_hinge", alpha=1e-2), True, SGDClassifier),
    (daskpd.SaddlePointEstimator(loss="logistic", regularizer=L1Ball(2.0), alpha=1.0,
                                 fit_intercept=False), True, SGDClassifier),
    (daskpd.Ridge(alpha=1e-2), False, SkRidge),
    (daskpd.Lasso(alpha=1e-2), False, SkLasso),
    (daskpd.ElasticNet(alpha=1e-2, l1_ratio=0.3), False, SkElasticNet),
    (daskpd.LinearSVR(alpha=1e-2, epsilon=0.2), False, SkLinearSVR),
    (daskpd.LADRegression(alpha=1e-2), False, SkLinearSVR),
    (daskpd.SaddlePointEstimator(loss="squared", regularizer="zero", alpha=0.0), False,
     LinearRegression),
    (daskpd.SaddlePointEstimator(loss=Huber(0.5), alpha=1e-2), False, SGDRegressor),
]  # fmt: skip


def _fit(estimator, X, y_class, y_reg, classifier):
    estimator = clone(estimator).set_params(max_iter=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X, y_class if classifier else y_reg)


@pytest.fixture(scope="module")
def fitted():
    X, y_class, y_reg = _data()
    return [
        (_fit(estimator, X, y_class, y_reg, classifier), classifier, expected)
        for estimator, classifier, expected in CASES
    ]


def _inputs():
    X_new, _, _ = _data(seed=1)
    X_new[:3] = 0.0  # rows with only the intercept
    return {
        "dense": X_new,
        "csr": sp.csr_matrix(X_new),
        "csc": sp.csc_matrix(X_new),
        "float32": X_new.astype(np.float32),
    }


def test_every_estimator_exports_to_the_nearest_class_and_predicts_the_same(fitted):
    for estimator, classifier, expected_class in fitted:
        exported = estimator.to_sklearn()
        name = repr(estimator)
        assert type(exported) is expected_class, name
        assert exported.n_features_in_ == N_FEATURES
        # the hyper-parameters are valid for scikit-learn (a refit would run)
        exported._validate_params()
        for kind, X_new in _inputs().items():
            np.testing.assert_array_equal(exported.predict(X_new), estimator.predict(X_new))
            if classifier:
                np.testing.assert_allclose(
                    exported.decision_function(X_new),
                    estimator.decision_function(X_new),
                    rtol=1e-12,
                    atol=1e-13,
                    err_msg=f"{name} on {kind}",
                )
                np.testing.assert_array_equal(exported.classes_, estimator.classes_)
            if kind == "dense":  # the same products: bit for bit
                scores = estimator.decision_function if classifier else estimator.predict
                mine = exported.decision_function if classifier else exported.predict
                np.testing.assert_array_equal(mine(X_new), scores(X_new), err_msg=name)
        if hasattr(estimator, "predict_proba"):
            np.testing.assert_allclose(
                exported.predict_proba(_inputs()["csr"]), estimator.predict_proba(_inputs()["csr"])
            )


def test_the_parameters_define_the_same_objective():
    """Refitting the export with scikit-learn gives the same model (same minimizer, C from n)."""
    X, y_class, y_reg = _data()
    logistic = daskpd.LogisticRegression(alpha=1e-2, tol=1e-10, max_iter=200).fit(X, y_class)
    refit = clone(logistic.to_sklearn()).set_params(tol=1e-10, max_iter=10000).fit(X, y_class)
    np.testing.assert_allclose(refit.coef_.ravel(), logistic.coef_, atol=1e-4)
    np.testing.assert_allclose(refit.intercept_[0], logistic.intercept_, atol=1e-4)
    lasso = daskpd.Lasso(alpha=1e-2, fit_intercept=False, tol=1e-10, max_iter=500).fit(X, y_reg)
    refit = clone(lasso.to_sklearn()).set_params(tol=1e-12, max_iter=100000).fit(X, y_reg)
    np.testing.assert_allclose(refit.coef_, lasso.coef_, atol=1e-4)
    ridge = daskpd.Ridge(alpha=1e-1, fit_intercept=False, tol=1e-12, max_iter=200).fit(X, y_reg)
    refit = clone(ridge.to_sklearn()).fit(X, y_reg)
    np.testing.assert_allclose(refit.coef_, ridge.coef_, atol=1e-5)
    assert refit.alpha == pytest.approx(1e-1 * N_SAMPLES)
    # given explicitly, for a model that does not know its rows
    assert ridge.to_sklearn(n_samples=10).alpha == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n_samples"):
        ridge.to_sklearn(n_samples=0)


def test_a_loaded_model_exports_without_its_row_count(tmp_path):
    X, y_class, _ = _data()
    model = daskpd.LinearSVC(alpha=1e-2, max_iter=30).fit(X, y_class)
    model.save(tmp_path / "svc.zarr")
    loaded = daskpd.LinearSVC.load(tmp_path / "svc.zarr")
    exported = loaded.to_sklearn()
    assert exported.C == 1.0  # scikit-learn's default: the rows are not in the file
    np.testing.assert_array_equal(exported.predict(X), model.predict(X))


def test_unfitted_estimator_is_refused():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        daskpd.LinearSVC().to_sklearn()


def test_multiclass_model_exports_as_one_vs_rest():
    """The hook of multiclass models: coef_ (n_classes, n_features), intercept_ (n_classes,)
    and classes_ become a OneVsRestClassifier of binary exports, argmax as prediction."""
    X, y_class, _ = _data()
    estimator = daskpd.LogisticRegression(alpha=1e-2, max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        estimator.fit(X, y_class)
    rng = np.random.default_rng(3)
    coef = rng.standard_normal((3, N_FEATURES))
    intercept = rng.standard_normal(3)
    estimator.coef_, estimator.intercept_ = coef, intercept
    estimator.classes_ = np.array(["ant", "bee", "cat"])
    exported = estimator.to_sklearn()
    assert isinstance(exported, OneVsRestClassifier)
    assert all(type(binary) is SkLogisticRegression for binary in exported.estimators_)
    for X_new in _inputs().values():
        scores = np.asarray(X_new @ coef.T, dtype=np.float64) + intercept
        np.testing.assert_allclose(exported.decision_function(X_new), scores, rtol=1e-12)
        np.testing.assert_array_equal(exported.predict(X_new), estimator.classes_[scores.argmax(1)])


@pytest.fixture(scope="module")
def fitted_multiclass():
    """LinearSVC and LogisticRegression on 3 classes (one-vs-rest, one row of coef_ a class)."""
    from sklearn.datasets import make_classification

    X, y = make_classification(N_SAMPLES, N_FEATURES, n_informative=6, n_classes=3, random_state=0)
    labels = np.array(["ant", "bee", "cat"])[y]
    models = []
    for estimator in (
        daskpd.LinearSVC(alpha=1e-2, max_iter=30, random_state=0),
        daskpd.LogisticRegression(alpha=1e-2, max_iter=30, random_state=0, fit_intercept=False),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            models.append(estimator.fit(X, labels))
    return models


def test_a_trained_multiclass_model_exports_as_one_vs_rest(fitted_multiclass, tmp_path):
    # and the same model read back from its file
    fitted_multiclass[0].save(tmp_path / "svc.zarr")
    loaded = daskpd.LinearSVC.load(tmp_path / "svc.zarr")
    for estimator in [*fitted_multiclass, loaded]:
        assert estimator.coef_.shape == (3, N_FEATURES)
        exported = estimator.to_sklearn()
        assert isinstance(exported, OneVsRestClassifier)
        np.testing.assert_array_equal(exported.classes_, estimator.classes_)
        for kind, X_new in _inputs().items():
            np.testing.assert_array_equal(
                exported.predict(X_new), estimator.predict(X_new), err_msg=kind
            )
            np.testing.assert_allclose(
                exported.decision_function(X_new), estimator.decision_function(X_new),
                rtol=1e-12, atol=1e-13, err_msg=kind,
            )  # fmt: skip


_CHILD = r"""
import importlib.abc, json, pickle, sys

class _NoDaskpd(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "daskpd" or name.startswith("daskpd."):
            raise ImportError("daskpd is not installed here")
        return None

sys.meta_path.insert(0, _NoDaskpd())
try:
    import daskpd  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("daskpd was importable")
with open(sys.argv[1], "rb") as handle:
    exported, inputs = pickle.load(handle)
out = []
for model in exported:
    row = {}
    for kind, X in inputs.items():
        row[kind] = {"predict": model.predict(X).tolist()}
        if hasattr(model, "decision_function"):
            row[kind]["scores"] = model.decision_function(X).tolist()
    out.append(row)
assert "daskpd" not in sys.modules or sys.modules["daskpd"] is None
print(json.dumps(out))
"""


def test_pickled_exports_predict_where_daskpd_cannot_be_imported(
    fitted, fitted_multiclass, tmp_path
):
    inputs = _inputs()
    fitted = list(fitted) + [(estimator, True, None) for estimator in fitted_multiclass]
    exported = [estimator.to_sklearn() for estimator, _, _ in fitted]
    with open(tmp_path / "models.pkl", "wb") as handle:
        pickle.dump((exported, inputs), handle)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # -I: no PYTHONPATH, no current directory on sys.path; the hook refuses daskpd anyway
    # (an editable install would find it through site-packages)
    completed = subprocess.run(
        [sys.executable, "-I", "-c", _CHILD, str(tmp_path / "models.pkl")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    results = json.loads(completed.stdout)
    for (estimator, classifier, _), row in zip(fitted, results, strict=True):
        for kind, X_new in inputs.items():
            np.testing.assert_array_equal(
                np.asarray(row[kind]["predict"]), estimator.predict(X_new), err_msg=kind
            )
            if classifier:
                np.testing.assert_allclose(
                    row[kind]["scores"], estimator.decision_function(X_new), rtol=1e-12,
                    atol=1e-13,
                )  # fmt: skip
