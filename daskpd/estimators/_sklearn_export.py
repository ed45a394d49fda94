"""Export of a fitted estimator to plain scikit-learn: :func:`to_sklearn`.

A model trained with daskpd is a linear function ``X @ coef_ + intercept_`` (per class, for a
multiclass model). Its export is a fitted scikit-learn estimator with the same coefficients,
so that a service with scikit-learn and without daskpd can load it (pickle, joblib, skops)
and predict. The contract is equal predictions: ``predict`` and ``decision_function`` of the
export give what daskpd's give on the same NumPy or scipy.sparse input (the same products,
in the same dtype; a scipy.sparse format other than CSR may add rounding in the last bits).

The class chosen is the nearest scikit-learn one, with the hyper-parameters that define the
same minimizer where scikit-learn has them, so that refitting the export trains a comparable
model (daskpd's translations, see :mod:`daskpd.estimators`):

===========================================  ================================================
daskpd loss and penalty                       exported as
===========================================  ================================================
hinge or squared hinge, L2                    ``LinearSVC(loss=..., C=1 / (alpha n))``
squared hinge, L1                             ``LinearSVC(penalty="l1", dual=False, C=...)``
logistic, L2 / L1 / elastic net               ``LogisticRegression(C=1 / (alpha n), ...)``
                                              (liblinear for L2 and L1: the same regularized
                                              intercept; saga for the elastic net)
squared, L2 / L1 / elastic net / none         ``Ridge(alpha=alpha n)`` / ``Lasso(alpha)`` /
                                              ``ElasticNet(alpha, l1_ratio)`` /
                                              ``LinearRegression()``
absolute / epsilon-insensitive, L2            ``LinearSVR(epsilon=0 / epsilon, C=...)``
any other pair (smoothed hinge, Huber,        ``SGDClassifier`` / ``SGDRegressor`` with the
constraint sets, group penalties...)          nearest loss and penalty (``alpha`` has
                                              daskpd's meaning); ``penalty=None`` for a
                                              regularizer scikit-learn does not have
multiclass (``coef_`` of shape                ``OneVsRestClassifier`` of the binary exports,
(n_classes, n_features))                      one per class
===========================================  ================================================

``n`` is the number of training rows; a parameter that needs it (``C``, Ridge's ``alpha``) is
set from the estimator's last fit, or from ``n_samples=`` (a model loaded from a file does not
record it), and otherwise left at scikit-learn's default: it matters for a refit only, never
for predictions.

The export holds only NumPy arrays, Python values and scikit-learn objects: nothing of daskpd,
so its pickle loads where daskpd is not installed.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted

#: daskpd loss name -> SGDClassifier / SGDRegressor loss, for the fallback of a pair that has
#: no nearer scikit-learn class (the smoothed hinge has no scikit-learn twin: ``hinge`` is the
#: nearest loss without probabilities, as daskpd's smoothed-hinge model has none).
_SGD_CLASSIFIER_LOSS = {
    "hinge": "hinge",
    "smooth_hinge": "hinge",
    "squared_hinge": "squared_hinge",
    "logistic": "log_loss",
}
_SGD_REGRESSOR_LOSS = {
    "squared": "squared_error",
    "huber": "huber",
    "absolute": "epsilon_insensitive",
    "epsilon_insensitive": "epsilon_insensitive",
}


def to_sklearn(estimator, *, n_samples=None):
    """A fitted scikit-learn estimator that predicts as the fitted daskpd ``estimator`` does.

    Parameters
    ----------
    estimator : daskpd estimator
        Fitted (``coef_``, ``intercept_``; ``classes_`` for a classifier).
    n_samples : int, optional
        Training rows, for the hyper-parameters that scale with them (``C = 1 / (alpha n)``,
        Ridge's ``alpha n``). Default: the rows of the estimator's last fit, when it records
        them.

    Returns
    -------
    exported : sklearn.base.BaseEstimator
        Fitted: ``coef_``, ``intercept_``, ``n_features_in_`` (``feature_names_in_`` when
        the daskpd estimator has it) and ``classes_`` for a classifier. Its ``predict`` and
        ``decision_function`` equal the daskpd estimator's on NumPy and scipy.sparse input.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        When ``estimator`` is not fitted.
    """
    check_is_fitted(estimator, "coef_")
    if n_samples is None:
        n_samples = getattr(estimator, "_n_samples_fit", None)
    if n_samples is not None and (
        not isinstance(n_samples, numbers.Integral) or isinstance(n_samples, bool) or n_samples < 1
    ):
        raise ValueError(f"n_samples must be a positive integer or None; got {n_samples!r}")
    coef = np.asarray(estimator.coef_, dtype=np.float64)
    if coef.ndim == 2:
        return _one_vs_rest(estimator, coef, n_samples)
    if estimator._is_classification():
        exported = _classifier(estimator, n_samples)
        _set_linear(exported, estimator, coef.reshape(1, -1), np.array([_intercept(estimator)]))
        exported.classes_ = np.asarray(estimator.classes_).copy()
        return exported
    exported, intercept_as_array = _regressor(estimator, n_samples)
    intercept = _intercept(estimator)
    _set_linear(
        exported, estimator, coef.copy(), np.array([intercept]) if intercept_as_array else intercept
    )
    return exported


def _intercept(estimator) -> float:
    return float(np.asarray(estimator.intercept_, dtype=np.float64).reshape(-1)[0])


def _set_linear(exported, estimator, coef, intercept) -> None:
    """The fitted attributes every exported linear model has."""
    exported.coef_ = coef
    exported.intercept_ = intercept
    exported.n_features_in_ = int(estimator.n_features_in_)
    if hasattr(estimator, "feature_names_in_"):
        exported.feature_names_in_ = np.asarray(estimator.feature_names_in_, dtype=object).copy()
    if hasattr(estimator, "n_iter_"):
        exported.n_iter_ = int(np.max(estimator.n_iter_))


def _objective(estimator):
    """The loss and regularizer objects of ``estimator`` (its name -> object resolution)."""
    from daskpd.losses import get_loss
    from daskpd.regularizers import get_regularizer

    return get_loss(estimator._loss_spec()), get_regularizer(estimator._regularizer_spec())


def _inverse_c(estimator, n_samples) -> dict:
    """``{"C": 1 / (alpha n)}``, or nothing when ``n`` is unknown (scikit-learn's default)."""
    if n_samples is None:
        return {}
    return {"C": 1.0 / (float(estimator.alpha) * int(n_samples))}


def _intercept_params(estimator) -> dict:
    return {
        "fit_intercept": bool(estimator.fit_intercept),
        "intercept_scaling": float(estimator.intercept_scaling),
    }


def _class_weight(estimator):
    class_weight = getattr(estimator, "class_weight", None)
    return dict(class_weight) if isinstance(class_weight, dict) else class_weight


def _classifier(estimator, n_samples):
    """An unfitted scikit-learn binary classifier of the nearest kind, with its parameters."""
    from sklearn.linear_model import LogisticRegression, SGDClassifier
    from sklearn.svm import LinearSVC

    loss, regularizer = _objective(estimator)
    penalty = regularizer.name
    common = {"class_weight": _class_weight(estimator)}
    if loss.name in ("hinge", "squared_hinge") and penalty == "l2":
        return LinearSVC(
            loss=loss.name, penalty="l2", **_inverse_c(estimator, n_samples),
            **_intercept_params(estimator), **common,
        )  # fmt: skip
    if loss.name == "squared_hinge" and penalty == "l1":
        return LinearSVC(
            loss="squared_hinge", penalty="l1", dual=False, **_inverse_c(estimator, n_samples),
            **_intercept_params(estimator), **common,
        )  # fmt: skip
    if loss.name == "logistic" and penalty in ("l2", "l1", "elasticnet"):
        l1_ratio = {"l2": 0.0, "l1": 1.0}.get(penalty, getattr(regularizer, "l1_ratio", 0.0))
        params = {"l1_ratio": float(l1_ratio)}
        if _logistic_has_penalty_parameter():
            params["penalty"] = penalty
            if penalty != "elasticnet":
                params["l1_ratio"] = None
        if penalty == "elasticnet":
            params["solver"] = "saga"
            params["fit_intercept"] = bool(estimator.fit_intercept)
        else:
            params["solver"] = "liblinear"
            params.update(_intercept_params(estimator))
        return LogisticRegression(**params, **_inverse_c(estimator, n_samples), **common)
    return SGDClassifier(
        loss=_SGD_CLASSIFIER_LOSS[loss.name], **_sgd_penalty(estimator, regularizer),
        fit_intercept=bool(estimator.fit_intercept), **common,
    )  # fmt: skip


def _logistic_has_penalty_parameter() -> bool:
    """Whether this scikit-learn's LogisticRegression still takes ``penalty`` (1.8 deprecated
    it for ``l1_ratio`` alone)."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression().get_params().get("penalty") != "deprecated"


def _sgd_penalty(estimator, regularizer) -> dict:
    name = regularizer.name
    if name in ("l2", "l1"):
        return {"penalty": name, "alpha": float(estimator.alpha)}
    if name == "elasticnet":
        return {
            "penalty": "elasticnet",
            "alpha": float(estimator.alpha),
            "l1_ratio": float(regularizer.l1_ratio),
        }
    return {"penalty": None}  # zero, constraint sets, group and trace penalties


def _regressor(estimator, n_samples):
    """An unfitted scikit-learn regressor of the nearest kind, and whether its ``intercept_``
    is an array of shape (1,) (LinearSVR, SGDRegressor) rather than a float."""
    from sklearn.linear_model import ElasticNet, Lasso, LinearRegression, Ridge, SGDRegressor
    from sklearn.svm import LinearSVR

    loss, regularizer = _objective(estimator)
    penalty = regularizer.name
    fit_intercept = bool(estimator.fit_intercept)
    if loss.name == "squared":
        if penalty == "l2":
            params = {} if n_samples is None else {"alpha": float(estimator.alpha) * n_samples}
            return Ridge(fit_intercept=fit_intercept, **params), False
        if penalty == "l1":
            return Lasso(alpha=float(estimator.alpha), fit_intercept=fit_intercept), False
        if penalty == "elasticnet":
            return ElasticNet(
                alpha=float(estimator.alpha), l1_ratio=float(regularizer.l1_ratio),
                fit_intercept=fit_intercept,
            ), False  # fmt: skip
        if penalty == "zero":
            return LinearRegression(fit_intercept=fit_intercept), False
    if loss.name in ("absolute", "epsilon_insensitive") and penalty == "l2":
        return LinearSVR(
            epsilon=float(getattr(loss, "epsilon", 0.0)), loss="epsilon_insensitive",
            **_inverse_c(estimator, n_samples), **_intercept_params(estimator),
        ), True  # fmt: skip
    params = {"loss": _SGD_REGRESSOR_LOSS[loss.name]}
    if loss.name == "huber":
        params["epsilon"] = float(loss.delta)
    elif loss.name in ("absolute", "epsilon_insensitive"):
        params["epsilon"] = float(getattr(loss, "epsilon", 0.0))
    return SGDRegressor(
        **params, **_sgd_penalty(estimator, regularizer), fit_intercept=fit_intercept
    ), True


def _one_vs_rest(estimator, coef, n_samples):
    """A multiclass model (``coef_`` of shape (n_classes, n_features)) as scikit-learn's
    ``OneVsRestClassifier`` of one binary export per class (class k against the rest, labels
    0/1 as the meta-estimator fits them).

    The hook of multiclass models: it needs ``classes_`` (n_classes,), ``coef_`` (n_classes,
    n_features) and ``intercept_`` (n_classes,), as scikit-learn's linear classifiers have
    them. ``OneVsRestClassifier.predict`` takes the first class of largest score, as
    ``argmax`` does.
    """
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.preprocessing import LabelBinarizer

    classes = np.asarray(estimator.classes_).copy()
    intercepts = np.broadcast_to(
        np.asarray(estimator.intercept_, dtype=np.float64), (coef.shape[0],)
    )
    if classes.shape[0] != coef.shape[0]:
        raise ValueError(
            f"a multiclass model needs one row of coef_ per class; got {coef.shape[0]} rows "
            f"for {classes.shape[0]} classes"
        )
    template = _classifier(estimator, n_samples)
    template.set_params(class_weight=None)  # class weights are the meta-estimator's classes'
    binaries = []
    for row, intercept in zip(coef, intercepts, strict=True):
        binary = _clone(template)
        _set_linear(binary, estimator, row.reshape(1, -1).copy(), np.array([float(intercept)]))
        binary.classes_ = np.array([0, 1])
        binaries.append(binary)
    exported = OneVsRestClassifier(_clone(template))
    exported.label_binarizer_ = LabelBinarizer(sparse_output=True).fit(classes)
    exported.classes_ = exported.label_binarizer_.classes_
    # the meta-estimator's class k is its binarizer's (sorted) k-th class
    row_of = {label: index for index, label in enumerate(classes.tolist())}
    exported.estimators_ = [binaries[row_of[label]] for label in exported.classes_.tolist()]
    exported.n_features_in_ = int(estimator.n_features_in_)
    if hasattr(estimator, "feature_names_in_"):
        exported.feature_names_in_ = np.asarray(estimator.feature_names_in_, dtype=object).copy()
    return exported


def _clone(estimator):
    from sklearn.base import clone

    return clone(estimator)
