"""Linear regressors: Ridge, Lasso, ElasticNet, LADRegression and LinearSVR."""

from __future__ import annotations

import numbers

from sklearn.base import RegressorMixin

from daskpd.estimators._base import (
    _COMMON_PARAMS_DOC,
    _FITTED_DOC,
    _penalty,
    _SaddlePointBase,
)
from daskpd.estimators._model_file import _model_class


class _Regressor(RegressorMixin, _SaddlePointBase):
    """Linear regressor: ``predict`` is the score."""

    def predict(self, X):
        """Predicted values ``X @ coef_ + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), or a lazy Dask array for Dask / dataset input
        """
        return self._scores(X)


class _FixedRegressor(_Regressor):
    """Regressor whose loss and regularizer are fixed by the class (plus a few parameters)."""

    def __init__(
        self,
        *,
        alpha=1e-4,
        solver="auto",
        fit_intercept=True,
        intercept_scaling=1.0,
        tol=1e-4,
        max_iter=100,
        warm_start=False,
        random_state=None,
        callback=None,
        verbose=False,
        cluster=None,
        solver_options=None,
    ):
        self.alpha = alpha
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.random_state = random_state
        self.callback = callback
        self.verbose = verbose
        self.cluster = cluster
        self.solver_options = solver_options


_REGRESSOR_ALPHA_DOC = """
    alpha : float, default=1e-4
        Regularization strength, as in ``SGDRegressor``.
    solver : {"dso", "spdc", "dspdc", "gsfw", "pdprox", "batch", "cocoa", "auto"}, default="auto"
        ``"auto"`` picks the default of the class (see above); a solver that does not
        support the pair raises ValueError.
"""


@_model_class
class Ridge(_FixedRegressor):
    """Ridge regression: ``(1/n) sum (x_i.w - y_i)^2 / 2 + alpha ||w||^2 / 2``.

    scikit-learn's ``Ridge(alpha=a)`` (unnormalized sum) is ``Ridge(alpha=a / n)`` here.
    ``solver="auto"`` is CoCoA (dual coordinate ascent; see :func:`auto_solver`).

    Parameters
    ----------
    """

    __doc__ += _REGRESSOR_ALPHA_DOC + _COMMON_PARAMS_DOC + _FITTED_DOC

    def _loss_spec(self):
        return "squared"

    def _regularizer_spec(self):
        return "l2"


@_model_class
class Lasso(_FixedRegressor):
    """Lasso: ``(1/n) sum (x_i.w - y_i)^2 / 2 + alpha ||w||_1`` (scikit-learn's ``alpha``).

    ``solver="auto"`` is the full-gradient ``"batch"`` solver (FISTA): SPDC and DSPDC need
    a strongly convex regularizer (they would solve a perturbed problem), and DSO's squared
    loss is not competitive here.

    Parameters
    ----------
    """

    __doc__ += _REGRESSOR_ALPHA_DOC + _COMMON_PARAMS_DOC + _FITTED_DOC

    def _loss_spec(self):
        return "squared"

    def _regularizer_spec(self):
        return "l1"


@_model_class
class LADRegression(_FixedRegressor):
    """Least absolute deviation: ``(1/n) sum |x_i.w - y_i| + alpha ||w||^2 / 2``.

    ``solver="auto"`` is Pdprox (made for non-smooth losses), or DSO for weighted rows
    (Pdprox has no row weights).

    Parameters
    ----------
    """

    __doc__ += _REGRESSOR_ALPHA_DOC + _COMMON_PARAMS_DOC + _FITTED_DOC

    def _loss_spec(self):
        return "absolute"

    def _regularizer_spec(self):
        return "l2"


@_model_class
class ElasticNet(_Regressor):
    """Elastic net: squared loss with ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) ||w||^2 / 2)``.

    The same objective as scikit-learn's ``ElasticNet(alpha, l1_ratio)``.
    ``solver="auto"`` is SPDC (see :func:`auto_solver`).

    Parameters
    ----------
    l1_ratio : float, default=0.5
        Mixing between the L1 and L2 parts.
    """

    __doc__ += _REGRESSOR_ALPHA_DOC + _COMMON_PARAMS_DOC + _FITTED_DOC

    def __init__(
        self,
        *,
        alpha=1e-4,
        l1_ratio=0.5,
        solver="auto",
        fit_intercept=True,
        intercept_scaling=1.0,
        tol=1e-4,
        max_iter=100,
        warm_start=False,
        random_state=None,
        callback=None,
        verbose=False,
        cluster=None,
        solver_options=None,
    ):
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.random_state = random_state
        self.callback = callback
        self.verbose = verbose
        self.cluster = cluster
        self.solver_options = solver_options

    def _loss_spec(self):
        return "squared"

    def _regularizer_spec(self):
        return _penalty("elasticnet", self.l1_ratio)


@_model_class
class LinearSVR(_Regressor):
    """Linear support vector regression: epsilon-insensitive loss ``max(0, |x.w - y| - eps)``.

    ``solver="auto"`` is Pdprox, the only solver for this loss; it has no row weights, so
    :meth:`fit` takes no ``sample_weight``.

    Parameters
    ----------
    epsilon : float, default=0.1
        Width of the insensitive zone (SGDRegressor's default; scikit-learn's ``LinearSVR``
        uses 0.0, which is :class:`LADRegression`).
    """

    __doc__ += _REGRESSOR_ALPHA_DOC + _COMMON_PARAMS_DOC + _FITTED_DOC

    def __init__(
        self,
        *,
        epsilon=0.1,
        alpha=1e-4,
        solver="auto",
        fit_intercept=True,
        intercept_scaling=1.0,
        tol=1e-4,
        max_iter=100,
        warm_start=False,
        random_state=None,
        callback=None,
        verbose=False,
        cluster=None,
        solver_options=None,
    ):
        self.epsilon = epsilon
        self.alpha = alpha
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.random_state = random_state
        self.callback = callback
        self.verbose = verbose
        self.cluster = cluster
        self.solver_options = solver_options

    def _loss_spec(self):
        from daskpd.losses import EpsilonInsensitive

        if not isinstance(self.epsilon, numbers.Real) or not self.epsilon >= 0:
            raise ValueError(f"epsilon must be >= 0; got {self.epsilon!r}")
        return EpsilonInsensitive(float(self.epsilon))

    def _regularizer_spec(self):
        return "l2"

    def fit(self, X, y=None):
        """Train the model; stop at a duality gap of ``tol`` or after ``max_iter`` epochs.

        Pdprox, the only solver of the epsilon-insensitive loss, has no row weights, so this
        estimator takes no ``sample_weight`` (nor weights stored in a dataset).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Training data; a daskpd dataset carries its targets.
        y : array-like of shape (n_samples,) or Dask array, default=None
            Targets; must be None for a dataset.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return super().fit(X, y)
