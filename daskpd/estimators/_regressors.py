"""Linear regressors: Ridge, Lasso, ElasticNet, LADRegression and LinearSVR."""

from __future__ import annotations

import numbers

from sklearn.base import RegressorMixin

from daskpd.estimators._base import (
    _COMMON_PARAMS_DOC,
    _FITTED_DOC,
    _keyword_init,
    _penalty,
    _SaddlePointBase,
    _samples_method_doc,
)
from daskpd.estimators._model_file import _model_class


class _Regressor(RegressorMixin, _SaddlePointBase):
    """Linear regressor: ``predict`` is the score."""

    @_samples_method_doc
    def predict(self, X):
        """Predicted values ``X @ coef_ + intercept_``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), or a lazy Dask array for Dask / dataset input
        """
        return self._scores(X)


class _FixedRegressor(_Regressor):
    """Regressor whose loss and regularizer are fixed by the class (plus a few parameters).

    A subclass names them in ``_loss_name`` and ``_regularizer_name``; its docstring is its
    summary, completed here with the parameters and attributes every fixed regressor has.
    """

    __init__ = _keyword_init((("alpha", 1e-4),))

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.__doc__ += (
            "\n    Parameters\n    ----------"
            + _REGRESSOR_ALPHA_DOC
            + _COMMON_PARAMS_DOC
            + _FITTED_DOC
        )

    def _loss_spec(self):
        return self._loss_name

    def _regularizer_spec(self):
        return self._regularizer_name


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
    """

    _loss_name = "squared"
    _regularizer_name = "l2"


@_model_class
class Lasso(_FixedRegressor):
    """Lasso: ``(1/n) sum (x_i.w - y_i)^2 / 2 + alpha ||w||_1`` (scikit-learn's ``alpha``).

    ``solver="auto"`` is the full-gradient ``"batch"`` solver (FISTA): SPDC and DSPDC need
    a strongly convex regularizer (they would solve a perturbed problem), and DSO's squared
    loss is not competitive here.
    """

    _loss_name = "squared"
    _regularizer_name = "l1"


@_model_class
class LADRegression(_FixedRegressor):
    """Least absolute deviation: ``(1/n) sum |x_i.w - y_i| + alpha ||w||^2 / 2``.

    ``solver="auto"`` is Pdprox (made for non-smooth losses), or DSO for weighted rows
    (Pdprox has no row weights).
    """

    _loss_name = "absolute"
    _regularizer_name = "l2"


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

    __init__ = _keyword_init((("alpha", 1e-4), ("l1_ratio", 0.5)))

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

    __init__ = _keyword_init((("epsilon", 0.1), ("alpha", 1e-4)))

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
