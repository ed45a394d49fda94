"""scikit-learn estimators over :func:`daskpd.solve`.

Every estimator minimizes

    P(w) = (1 / n) sum_i c_i loss(x_i . w, y_i) + alpha R(w)

with the same meaning of ``alpha`` as in :class:`sklearn.linear_model.SGDClassifier` (for
the L2 penalty ``R(w) = ||w||^2 / 2``) and certifies the result with the duality gap
``P(w) - D(z)`` (``gap_``). The row weights ``c_i`` are ``sample_weight_i * class_weight[y_i]``;
a ``sample_weight`` given to ``fit`` is first rescaled to mean 1, so that an integer weight is
the same as repeating the row (the convention of :class:`sklearn.linear_model.ElasticNet`).

Translations to other libraries' parameters (same minimizer, without intercept):

=========================================================  ==================================
scikit-learn estimator and its objective                   parameter in terms of ``alpha``
=========================================================  ==================================
``SGDClassifier`` / ``SGDRegressor``                       ``alpha`` (same meaning)
``LinearSVC``, ``LogisticRegression``:                     ``C = 1 / (alpha n)``
``C sum_i loss_i + ||w||^2 / 2``
``Ridge``: ``||y - Xw||^2 + a ||w||^2``                    ``a = alpha n``
``Lasso`` / ``ElasticNet``: ``(1/2n) ||y - Xw||^2 + ...``  ``alpha`` (same meaning)
=========================================================  ==================================

Intercept (``fit_intercept=True``) is fitted liblinear-style: a constant feature of value
``intercept_scaling`` is appended to every row (:meth:`Dataset.with_bias`) and its weight is
regularized like the others; ``intercept_ = intercept_scaling * w[-1]``. A larger
``intercept_scaling`` weakens the regularization of the intercept.

Inputs: NumPy arrays, scipy.sparse matrices, Dask arrays (dense or with scipy.sparse chunks),
or an on-disk dataset from :func:`daskpd.open_dataset` (then ``y`` is read from the dataset and
must not be passed). Where the work runs:

* ``cluster=None`` (default): the active ``distributed.Client`` when there is one, else the
  in-process threaded scheduler (no cluster start-up for small in-memory data);
* ``cluster="local"``: a ``LocalCluster`` started for the fit and closed after it;
* ``cluster="tcp://host:8786"``: that scheduler.

``predict`` and ``decision_function`` return lazy Dask arrays for Dask or dataset input and
NumPy arrays for NumPy / scipy.sparse input.

The package, by job: ``_base`` (what to minimize, parameter checks, the solve call),
``_inputs`` (any supported input made into a dataset; scores), ``_model_file`` (``save``,
:func:`load_estimator`), ``_saddle_point`` (:class:`SaddlePointEstimator`), ``_classifiers``
and ``_regressors`` (the estimators named after scikit-learn's).
"""

from daskpd.estimators._classifiers import LinearSVC, LogisticRegression
from daskpd.estimators._model_file import load_estimator
from daskpd.estimators._regressors import (
    ElasticNet,
    LADRegression,
    Lasso,
    LinearSVR,
    Ridge,
)
from daskpd.estimators._saddle_point import SaddlePointEstimator
from daskpd.solvers.driver.auto import auto_solver

__all__ = [
    "SaddlePointEstimator",
    "LinearSVC",
    "LogisticRegression",
    "Ridge",
    "Lasso",
    "ElasticNet",
    "LinearSVR",
    "LADRegression",
    "auto_solver",
    "load_estimator",
]
