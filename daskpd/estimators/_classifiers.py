"""Linear classifiers: LinearSVC (hinge loss) and LogisticRegression.

Two labels make one binary problem (``coef_`` of shape (n_features,)); three or more make
one problem per class, one-vs-rest (``coef_`` of shape (n_classes, n_features)), trained
together by CoCoA+ (:mod:`daskpd.solvers.cocoa._multiclass`), as scikit-learn's
``OneVsRestClassifier`` of liblinear models of the same objective would.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model._base import LinearClassifierMixin

from daskpd.estimators._base import (
    _COMMON_PARAMS_DOC,
    _FITTED_DOC,
    _keyword_init,
    _labels_from_scores,
    _penalty,
    _SaddlePointBase,
    _samples_method_doc,
)
from daskpd.estimators._inputs import _is_dask_collection
from daskpd.estimators._model_file import _model_class


class _LinearClassifier(LinearClassifierMixin, _SaddlePointBase):
    """Linear classifier: ``predict`` maps the sign of the score (two classes) or the class
    of the largest score (one-vs-rest) to ``classes_``."""

    __init__ = _keyword_init(
        (("penalty", "l2"), ("alpha", 1e-4), ("l1_ratio", 0.15)), class_weight=True
    )

    @_samples_method_doc
    def decision_function(self, X):
        """Scores ``X @ coef_.T + intercept_``.

        Two classes: one signed score per row, positive means ``classes_[1]``. More: one
        score per row and class (its one-vs-rest problem's), as scikit-learn's.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes), or a lazy Dask array
            for Dask / dataset input
        """
        return self._scores(X)

    @_samples_method_doc
    def predict(self, X):
        """Predicted labels.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), or a lazy Dask array for Dask / dataset input
            Labels from ``classes_``.
        """
        scores = self._scores(X)
        if scores.ndim == 2:
            return _labels_of_largest(scores, self.classes_)
        return _labels_from_scores(scores, self.classes_)

    def _loss_spec(self):
        return self._loss_name

    def _regularizer_spec(self):
        return _penalty(self.penalty, self.l1_ratio)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = self._trains_multiclass()
        return tags

    def _trains_multiclass(self) -> bool:
        """Whether ``fit`` takes more than two classes: the solver it runs (``"auto"``
        resolved) declares multiclass data (one-vs-rest CoCoA+ with ``penalty="l2"``)."""
        from daskpd.problem import Problem
        from daskpd.solvers import get_solver
        from daskpd.solvers.driver import resolve_solver

        try:
            problem = Problem(self._loss_spec(), self._regularizer_spec(), self.alpha)
            grid = dict(self.solver_options or {}).get("grid")
            name = resolve_solver(self.solver, problem, grid=grid)
            return bool(getattr(get_solver(name).capabilities, "multiclass", False))
        except (TypeError, ValueError):
            # parameters fit refuses anyway: no more than it can do
            return False


def _labels_of_largest(scores, classes):
    """``classes[argmax]`` of each row of one-vs-rest scores (lazy for Dask scores)."""
    if _is_dask_collection(scores):
        return scores.argmax(axis=1).map_blocks(lambda index: classes[index], dtype=classes.dtype)
    return classes[np.argmax(scores, axis=1)]


_CLASSIFIER_PARAMS_DOC = """
    penalty : {"l2", "l1", "elasticnet"}, default="l2"
        Regularizer ``R``: ``||w||^2 / 2``, ``||w||_1``, or
        ``l1_ratio ||w||_1 + (1 - l1_ratio) ||w||^2 / 2``.
    alpha : float, default=1e-4
        Regularization strength, as in ``SGDClassifier`` (``C = 1 / (alpha n)`` in liblinear).
    l1_ratio : float, default=0.15
        Mixing of the elastic-net penalty (only with ``penalty="elasticnet"``).
    class_weight : dict, "balanced" or None, default=None
        Weight of each class, multiplied into the row weights; ``"balanced"`` uses
        ``n_samples / (2 * count(label))``, useful for rare positives (splice sites: 0.3%).
"""

_CLASSES_DOC = """
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted. Two: ``classes_[1]`` is the positive class. More: the model is
        one-vs-rest, ``coef_`` of shape (n_classes, n_features) and ``intercept_`` of shape
        (n_classes,), row ``k`` the problem "``classes_[k]`` or not" (trained by CoCoA+ with
        ``penalty="l2"``; other solvers refuse multiclass data), and ``gap_`` the sum of the
        classes' duality gaps.
"""


@_model_class
class LinearSVC(_LinearClassifier):
    """Linear support vector classifier: hinge loss ``max(0, 1 - y x.w)``.

    Parameters
    ----------
    solver : {"dso", "spdc", "dspdc", "gsfw", "pdprox", "batch", "cocoa", "auto"}, default="auto"
        ``"auto"`` is CoCoA (dual coordinate ascent) with ``penalty="l2"``, DSO with the other
        penalties (see :func:`auto_solver`). Each solver checks that it supports the hinge
        loss with the chosen penalty and raises ValueError otherwise.
    """

    __doc__ += _CLASSIFIER_PARAMS_DOC + _COMMON_PARAMS_DOC + _FITTED_DOC + _CLASSES_DOC

    _loss_name = "hinge"


@_model_class
class LogisticRegression(_LinearClassifier):
    """Logistic regression: loss ``log(1 + exp(-y x.w))``.

    Parameters
    ----------
    solver : {"dso", "spdc", "dspdc", "gsfw", "pdprox", "batch", "cocoa", "auto"}, default="auto"
        ``"auto"`` is CoCoA (dual coordinate ascent) with ``penalty="l2"``, SPDC (linear
        convergence) with the elastic net, or the full-gradient ``"batch"`` solver with
        ``penalty="l1"`` (see :func:`auto_solver`).
    """

    __doc__ += _CLASSIFIER_PARAMS_DOC + _COMMON_PARAMS_DOC + _FITTED_DOC + _CLASSES_DOC

    _loss_name = "logistic"

    @_samples_method_doc
    def predict_proba(self, X):
        """Probabilities of each class of ``classes_``.

        Two classes: ``sigmoid(s)`` and its complement. More: each class's one-vs-rest
        ``sigmoid(s_k)``, normalized over the classes (scikit-learn's one-vs-rest rule).

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), or a lazy Dask array for Dask /
            dataset input
        """
        scores = self.decision_function(X)
        if scores.ndim == 2:
            if _is_dask_collection(scores):
                import dask.array as da

                each = 1.0 / (1.0 + da.exp(-scores))
            else:
                from scipy.special import expit

                each = expit(scores)
            return each / each.sum(axis=1, keepdims=True)
        if _is_dask_collection(scores):
            import dask.array as da

            positive = 1.0 / (1.0 + da.exp(-scores))
            return da.stack([1.0 - positive, positive], axis=1)
        from scipy.special import expit

        positive = expit(scores)
        return np.column_stack([1.0 - positive, positive])

    @_samples_method_doc
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes), or a lazy Dask array
        """
        scores = self.decision_function(X)
        if scores.ndim == 2:
            proba = self.predict_proba(X)
            if _is_dask_collection(proba):
                import dask.array as da

                return da.log(proba)
            return np.log(proba)
        if _is_dask_collection(scores):
            import dask.array as da

            return da.stack([-da.logaddexp(0.0, scores), -da.logaddexp(0.0, -scores)], axis=1)
        return np.column_stack([-np.logaddexp(0.0, scores), -np.logaddexp(0.0, -scores)])
