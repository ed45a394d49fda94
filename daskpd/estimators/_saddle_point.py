"""SaddlePointEstimator: any supported (loss, regularizer) pair, a classifier or a regressor.

The loss decides which: the classification losses make a binary classifier with
``classes_``, the others a regressor.
"""

from __future__ import annotations

from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils._tags import ClassifierTags, RegressorTags
from sklearn.utils.metaestimators import available_if

from daskpd.estimators._base import (
    _COMMON_PARAMS_DOC,
    _FITTED_DOC,
    _keyword_init,
    _labels_from_scores,
    _loss_name,
    _SaddlePointBase,
    _samples_method_doc,
)
from daskpd.estimators._model_file import _model_class


def _has_classification_loss(estimator):
    # Regressors must not expose decision_function (scikit-learn's contract).
    return estimator._is_classification()


@_model_class
class SaddlePointEstimator(_SaddlePointBase):
    """Any supported (loss, regularizer) pair, trained by a primal-dual solver.

    Classifier or regressor according to the loss: ``"hinge"``, ``"smooth_hinge"``,
    ``"squared_hinge"`` and ``"logistic"`` make a binary classifier (any two labels, mapped
    to -1/+1; ``classes_``), the other losses a regressor.

    Parameters
    ----------
    loss : str or daskpd.losses object, default="hinge"
        ``"hinge"``, ``"smooth_hinge"``, ``"squared_hinge"``, ``"logistic"``, ``"squared"``,
        ``"absolute"``, ``"epsilon_insensitive"``, ``"huber"``, or an object from
        :mod:`daskpd.losses` (e.g. ``EpsilonInsensitive(0.5)``).
    regularizer : str or daskpd.regularizers object, default="l2"
        ``"l2"`` (``||w||^2 / 2``), ``"l1"``, ``"elasticnet"``, or an object from
        :mod:`daskpd.regularizers`.
    alpha : float, default=1e-4
        Regularization strength, as in ``SGDClassifier``.
    solver : str, default="auto"
        One of ``"dso"``, ``"spdc"``, ``"dspdc"``, ``"gsfw"``, ``"pdprox"``, ``"batch"``,
        ``"cocoa"``; ``"auto"``: see :func:`auto_solver`. A solver that does not support the
        pair raises ValueError.
    class_weight : dict, "balanced" or None, default=None
        Weights per class (classification losses only); ``"balanced"`` uses
        ``n_samples / (2 * count(label))``.
    """

    __doc__ += _COMMON_PARAMS_DOC + _FITTED_DOC

    __init__ = _keyword_init(
        (("loss", "hinge"), ("regularizer", "l2"), ("alpha", 1e-4)), class_weight=True
    )

    def _check_params(self):
        super()._check_params()
        if self.class_weight is not None and not self._is_classification():
            raise ValueError(
                f"class_weight is for classification losses; loss={_loss_name(self.loss)!r} "
                "is a regression loss"
            )

    @_samples_method_doc
    def predict(self, X):
        """Predicted labels (classification losses) or values (regression losses).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), or a lazy Dask array for Dask / dataset input
        """
        scores = self._scores(X)
        if hasattr(self, "classes_"):
            return _labels_from_scores(scores, self.classes_)
        return scores

    @available_if(_has_classification_loss)
    @_samples_method_doc
    def decision_function(self, X):
        """Signed scores ``X @ coef_ + intercept_`` (classification losses only).

        Returns
        -------
        scores : ndarray of shape (n_samples,), or a lazy Dask array for Dask / dataset input
            Positive means ``classes_[1]``.
        """
        return self._scores(X)

    def score(self, X, y, sample_weight=None):
        """Accuracy (classification losses) or R^2 (regression losses).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Test samples.
        y : array-like of shape (n_samples,)
            True labels or values.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
        """
        if hasattr(self, "classes_"):
            return accuracy_score(y, self.predict(X), sample_weight=sample_weight)
        return r2_score(y, self.predict(X), sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self._is_classification():
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags(multi_class=False)
            tags.regressor_tags = None
        else:
            tags.estimator_type = "regressor"
            tags.classifier_tags = None
            tags.regressor_tags = RegressorTags()
        return tags
