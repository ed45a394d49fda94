"""The machinery every estimator shares: what to minimize, parameter checks, the solve call.

Also the translation of the classifiers' ``penalty`` / ``l1_ratio`` into a regularizer, and
the parts of the estimators' docstrings they all share.
"""

from __future__ import annotations

import inspect
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from daskpd.estimators._inputs import _InputsMixin, _is_dask_collection
from daskpd.estimators._model_file import _ModelFileMixin
from daskpd.solvers.driver.auto import loss_name

_CLASSIFICATION_LOSSES = frozenset({"hinge", "smooth_hinge", "squared_hinge", "logistic"})

# --------------------------------------------------------------------------------------------
# helpers


_loss_name = loss_name

# The parameters every estimator takes after its own leading ones, in signature order, with
# their defaults; ``class_weight`` (classifiers only) goes after ``intercept_scaling``.
_SHARED_PARAMS = (
    ("solver", "auto"),
    ("fit_intercept", True),
    ("intercept_scaling", 1.0),
    ("tol", 1e-4),
    ("max_iter", 100),
    ("warm_start", False),
    ("random_state", None),
    ("callback", None),
    ("verbose", False),
    ("cluster", None),
    ("solver_options", None),
)


def _keyword_init(leading, *, class_weight=False):
    """An ``__init__`` of keyword-only parameters that only stores them.

    scikit-learn reads an estimator's parameters from the signature of its ``__init__``;
    the function made here carries that signature explicitly (``leading``, then the shared
    parameters), so ``get_params``, ``clone`` and the estimator checks see what a written-out
    ``__init__`` would show, while the list of shared parameters exists once.

    Parameters
    ----------
    leading : tuple of (str, object)
        The class's own parameters and defaults, before the shared ones.
    class_weight : bool, default=False
        Whether the class takes ``class_weight`` (default None).

    Returns
    -------
    function
        The ``__init__`` to assign in the class body.
    """
    table = list(leading) + list(_SHARED_PARAMS)
    if class_weight:
        table.insert(
            [name for name, _ in table].index("intercept_scaling") + 1, ("class_weight", None)
        )
    defaults = dict(table)
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
            for name, default in table
        ]
    )

    def __init__(self, **params):
        unknown = sorted(set(params) - set(defaults))
        if unknown:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                f"{unknown[0]!r}"
            )
        for name, default in defaults.items():
            setattr(self, name, params.get(name, default))

    __init__.__signature__ = signature
    return __init__


def _samples_method_doc(method):
    """Complete the docstring of a method of ``X`` alone with the shared ``X`` entry.

    The method's docstring is its summary and its ``Returns`` section; the ``Parameters``
    section, the same for every prediction method, is put in between.
    """
    summary, returns = inspect.cleandoc(method.__doc__).split("\nReturns\n", 1)
    method.__doc__ = f"{summary}\n{_SAMPLES_DOC}\nReturns\n{returns}"
    return method


_SAMPLES_DOC = """Parameters
----------
X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
    Samples.
"""


# --------------------------------------------------------------------------------------------
# the shared machinery


class _SaddlePointBase(_InputsMixin, _ModelFileMixin, BaseEstimator):
    """Machinery shared by every estimator: validation, the solve call, prediction, storage.

    Subclasses define ``_loss_spec()`` and ``_regularizer_spec()``. The input handling
    (:mod:`daskpd.estimators._inputs`) and the model files
    (:mod:`daskpd.estimators._model_file`) come from the mixins.
    """

    # ---------------------------------------------------------------- what to minimize

    def _loss_spec(self):
        return self.loss

    def _regularizer_spec(self):
        return self.regularizer

    def _is_classification(self) -> bool:
        return _loss_name(self._loss_spec()) in _CLASSIFICATION_LOSSES

    # ---------------------------------------------------------------- parameters

    def _validate_params(self):
        """Check every hyper-parameter without data (a model file's, before it is read).

        ``fit`` checks only the estimator's own parameters (:meth:`_check_params`) and leaves
        ``max_iter``, ``tol``, ``alpha``, the loss, the regularizer and the solver to the one
        plan it builds (:func:`daskpd.solvers.driver.plan.make_plan`).

        Returns
        -------
        problem : daskpd.problem.Problem
            Without class weights (they depend on the data).
        """
        if not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer; got {self.max_iter!r}")
        if not isinstance(self.tol, numbers.Real) or not self.tol >= 0:
            raise ValueError(f"tol must be a non-negative number; got {self.tol!r}")
        self._check_params()
        from daskpd.problem import Problem
        from daskpd.solvers import get_solver

        if not (isinstance(self.solver, str) and self.solver == "auto"):
            get_solver(self.solver)  # an unknown name fails before the data is read
        return Problem(self._loss_spec(), self._regularizer_spec(), self.alpha)

    def _check_params(self):
        """Check the parameters the run's plan does not know; ValueError naming one."""
        if self.fit_intercept:
            scaling = self.intercept_scaling
            if not isinstance(scaling, numbers.Real) or not np.isfinite(scaling) or scaling <= 0:
                raise ValueError(
                    f"intercept_scaling must be a positive finite number; got {scaling!r}"
                )
        if self.solver_options is not None and not isinstance(self.solver_options, dict):
            raise ValueError(
                f"solver_options must be a dict or None; got {type(self.solver_options).__name__}"
            )
        callback = self.callback
        callbacks = callback if isinstance(callback, (list, tuple)) else [callback]
        for item in callbacks:
            if item is not None and not (callable(item) or hasattr(item, "on_epoch_end")):
                raise ValueError(
                    f"callback must be a callable, a daskpd.callbacks.Callback, or a list of "
                    f"them; got {item!r}"
                )
        if self.cluster is not None and not isinstance(self.cluster, str):
            raise ValueError(
                f"cluster must be None, 'local' or a scheduler address; got {self.cluster!r}"
            )
        if hasattr(self, "class_weight"):
            class_weight = self.class_weight
            if not (
                class_weight is None or class_weight == "balanced" or isinstance(class_weight, dict)
            ):
                raise ValueError(
                    f"class_weight must be None, 'balanced' or a dict; got {class_weight!r}"
                )

    # ---------------------------------------------------------------- fit

    def fit(self, X, y=None, sample_weight=None):
        """Train the model; stop at a duality gap of ``tol`` or after ``max_iter`` epochs.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Training data. A daskpd dataset (:func:`daskpd.open_dataset`) carries its labels
            and optional sample weights.
        y : array-like of shape (n_samples,) or Dask array, default=None
            Targets; must be None for a dataset. Classifiers accept any two labels; the
            L2 classifiers whose solver trains multiclass data (``LinearSVC`` and
            ``LogisticRegression`` with ``penalty="l2"``) also three or more, one-vs-rest.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, rescaled to mean 1 (an integer weight equals repeating the
            row). For a dataset, store the weights in it instead.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        from daskpd._cluster import ClusterOptions, cluster_client
        from daskpd.solvers.driver import make_plan, run_plan

        self._check_params()
        self._dataset_class_weight = None
        data, labels = self._prepare_fit_data(X, y, sample_weight)
        if (
            self.warm_start
            and self._is_classification()
            and getattr(data, "task", None) == "multiclass"
        ):
            raise ValueError(
                "warm_start=True is not supported on multiclass data yet (one-vs-rest runs "
                "start from zero); use warm_start=False"
            )
        if self.fit_intercept:
            data = data.with_bias(float(self.intercept_scaling))
        warm = None
        if (
            self.warm_start
            and hasattr(self, "coef_")
            and self.coef_.shape == (self.n_features_in_,)
        ):
            warm = self.coef_
            if self.fit_intercept:
                warm = np.append(warm, self.intercept_ / self.intercept_scaling)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        # the one setup path: max_iter, tol, alpha, the loss, the regularizer and the solver
        # are checked here, once
        plan = make_plan(
            data,
            loss=self._loss_spec(),
            regularizer=self._regularizer_spec(),
            alpha=self.alpha,
            solver=self.solver,
            max_epochs=self.max_iter,
            tol=self.tol,
            # Every epoch, not "auto": with "auto" the epoch where tol stops the fit
            # would depend on timing, and the same random_state must give the same model.
            eval_every=1,
            random_state=seed,
            callbacks=self._callbacks(),
            class_weight=self._dataset_class_weight,
            warm_start=warm,
            **dict(self.solver_options or {}),
        )
        capabilities = plan.capabilities
        if self.warm_start and capabilities is not None and not capabilities.warm_start:
            # refused at the first fit too, not only once there is a model to start from
            raise ValueError(
                f"warm_start=True needs a solver that starts from the previous model; solver "
                f"{plan.solver!r} always starts from zero: choose another solver or "
                "warm_start=False"
            )
        cluster = self.cluster
        if cluster is None:
            cluster_options, start = ClusterOptions(), False
        elif cluster == "local":
            cluster_options, start = ClusterOptions(), True
        else:
            cluster_options, start = ClusterOptions(scheduler=cluster), False
        with cluster_client(cluster_options, start=start) as client:
            # False: no active client and none asked for, so run in-process (the run would
            # otherwise start a LocalCluster for on-disk data).
            result = run_plan(plan, False if client is None else client)
        # w of shape (n_classes, n_features) for a one-vs-rest model, scikit-learn's coef_
        w = np.asarray(result.w, dtype=np.float64)
        if self.fit_intercept:
            self.coef_ = w[..., :-1].copy()
            intercept = w[..., -1] * self.intercept_scaling
            self.intercept_ = intercept if w.ndim == 2 else float(intercept)
        else:
            self.coef_ = w.copy()
            self.intercept_ = np.zeros(w.shape[0]) if w.ndim == 2 else 0.0
        self._fit_intercept_used = bool(self.fit_intercept)
        if labels is not None:
            self.classes_ = labels
        self.n_iter_ = int(result.n_epochs)
        self.gap_ = float(result.gap)
        self.history_ = list(result.history)
        self.solver_ = result.solver
        # for to_sklearn's C = 1 / (alpha n); private: a model file does not keep it
        self._n_samples_fit = int(data.n_samples)
        if not result.converged:
            warnings.warn(
                f"{type(self).__name__} stopped after {self.n_iter_} epochs with a duality gap "
                f"of {self.gap_:.3g} > tol={self.tol:g}; increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def to_sklearn(self, *, n_samples=None):
        """This fitted model as a fitted scikit-learn estimator, usable without daskpd.

        The nearest scikit-learn class (``LinearSVC``, ``LogisticRegression``, ``Ridge``,
        ``Lasso``, ``ElasticNet``, ``LinearRegression``, ``LinearSVR``; ``SGDClassifier`` /
        ``SGDRegressor`` for the other pairs; a ``OneVsRestClassifier`` of binary ones for a
        multiclass model) with this model's coefficients: its ``predict`` and
        ``decision_function`` equal this estimator's on NumPy and scipy.sparse input, and
        its pickle loads where daskpd is not installed (see
        :mod:`daskpd.estimators._sklearn_export`).

        Parameters
        ----------
        n_samples : int, optional
            Training rows, for the parameters that scale with them (``C = 1 / (alpha n)``);
            default: those of the last fit (a model loaded from a file does not record
            them, and ``C`` then stays at scikit-learn's default: it matters only to refit).

        Returns
        -------
        estimator : sklearn.base.BaseEstimator
            Fitted.
        """
        from daskpd.estimators._sklearn_export import to_sklearn

        return to_sklearn(self, n_samples=n_samples)

    def _callbacks(self):
        callbacks = []
        if self.callback is not None:
            if isinstance(self.callback, (list, tuple)):
                callbacks.extend(self.callback)
            else:
                callbacks.append(self.callback)
        if self.verbose:
            from daskpd.callbacks import ProgressBar

            callbacks.append(ProgressBar())
        return tuple(callbacks)

    # ---------------------------------------------------------------- tags

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        if tags.classifier_tags is not None:
            tags.classifier_tags.multi_class = False
        return tags


def _labels_from_scores(scores, classes):
    if _is_dask_collection(scores):
        import dask.array as da

        return da.where(scores > 0, classes[1], classes[0])
    return classes[(scores > 0).astype(np.intp)]


def _penalty(penalty, l1_ratio):
    from daskpd.regularizers import get_regularizer

    if penalty == "elasticnet":
        from daskpd.regularizers import ElasticNet as ElasticNetPenalty

        if not isinstance(l1_ratio, numbers.Real) or not 0 <= l1_ratio <= 1:
            raise ValueError(f"l1_ratio must be in [0, 1]; got {l1_ratio!r}")
        return ElasticNetPenalty(float(l1_ratio))
    if penalty not in ("l2", "l1"):
        raise ValueError(f"penalty must be 'l2', 'l1' or 'elasticnet'; got {penalty!r}")
    return get_regularizer(penalty)


# --------------------------------------------------------------------------------------------
# docstring parts of the public estimators

_COMMON_PARAMS_DOC = """
    fit_intercept : bool, default=True
        Fit an intercept, liblinear-style: a constant feature of value ``intercept_scaling``
        is appended and its weight is regularized like the others.
    intercept_scaling : float, default=1.0
        Value of the constant feature. Larger values regularize the intercept less.
    tol : float, default=1e-4
        Stop when the duality gap ``P(w) - D(z)`` falls below ``tol``.
    max_iter : int, default=100
        Maximum number of epochs (passes over the data).
    warm_start : bool, default=False
        Start from the previous ``coef_`` / ``intercept_`` when refitting (every built-in
        solver). ``"gsfw"`` raises ValueError when the previous model lies outside its
        constraint set (e.g. an L1 ball made smaller since). ``"pdprox"`` restarts its dual
        from zero: only the model's weights carry over.
    random_state : int, RandomState instance or None, default=None
        Seed of the solver's sampling orders (Pdprox is deterministic and does not use it).
        The same seed and data give the same model.
    callback : callable, daskpd.callbacks.Callback, or a list of them, default=None
        Called after every epoch with an ``EpochInfo`` (epoch, seconds, history row);
        returning True stops training (see :mod:`daskpd.callbacks`).
    verbose : bool, default=False
        Show a progress bar with the epoch, primal value and duality gap.
    cluster : str or None, default=None
        None: the active ``distributed.Client`` if any, else in-process. ``"local"``: start a
        ``LocalCluster`` for the fit. Otherwise a scheduler address.
    solver_options : dict or None, default=None
        Extra options of the solver (e.g. ``{"grid": 4}`` for DSO); see :func:`daskpd.solve`.
"""

_FITTED_DOC = """
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Weights.
    intercept_ : float
        Intercept (0.0 when ``fit_intercept=False``).
    n_iter_ : int
        Epochs run.
    gap_ : float
        Duality gap of the returned model (a bound on ``P(coef_) - min P``).
    history_ : list of dict
        One row per epoch: epoch, seconds (training), primal, dual, gap, wall_seconds,
        eval_seconds (see :func:`daskpd.solve`).
    solver_ : str
        The solver that ran.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when X had string column names.
"""
