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
"""

from __future__ import annotations

import json
import numbers
import os
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import check_random_state
from sklearn.utils._tags import ClassifierTags, RegressorTags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from daskpd.solvers._auto import auto_solver, loss_name

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

SOLVERS = ("dso", "spdc", "dspdc", "gsfw", "pdprox", "batch", "cocoa")
_CLASSIFICATION_LOSSES = frozenset({"hinge", "smooth_hinge", "squared_hinge", "logistic"})
#: 2: JSON attributes and zarr arrays (1, withdrawn: pickled metadata)
_MODEL_FORMAT_VERSION = 2


# --------------------------------------------------------------------------------------------
# helpers


_loss_name = loss_name


def _is_dask_collection(obj) -> bool:
    try:
        import dask
    except ImportError:  # dask is a hard dependency; keep the check cheap anyway
        return False
    return dask.is_dask_collection(obj)


def _is_dataset(obj) -> bool:
    """True for an on-disk or in-memory daskpd dataset (anything with the block read API)."""
    return hasattr(obj, "n_row_blocks") and hasattr(obj, "read_rows") and hasattr(obj, "shape")


# Solvers that accept row weights (sample_weight, class_weight); the others raise ValueError
# for weighted data, so "auto" does not pick them then. tests/test_estimators.py checks this
# table against the solvers' own checks.
WEIGHTED_SOLVERS = frozenset({"dso", "spdc", "dspdc", "batch", "cocoa"})

# Solvers that start from a given model (solve(warm_start=...)); all built-in ones do. A
# solver missing here gets warm_start=True refused rather than silently ignored (GSFW refuses
# a start outside its constraint set itself). tests/test_estimators.py checks this table
# against what the solvers do with a start.
WARM_START_SOLVERS = frozenset({"dso", "spdc", "dspdc", "batch", "gsfw", "pdprox", "cocoa"})


def _partition_in_memory(data, grid, client):
    """Build DSO's tiled layout of in-memory data before the solver sees it.

    The bias view (``with_bias``) of an in-memory dataset shows the grids of the dataset it
    wraps but cannot build one itself, so the grid DSO will use (the ``grid`` option, else
    one row group per worker, as DSO chooses) is built on the wrapped dataset here.
    """
    base = getattr(data, "base", data)
    if getattr(base, "path", None) is not None or not hasattr(base, "partition"):
        return
    if grid is None:
        from daskpd._cluster import worker_addresses

        grid = len(worker_addresses(client)) if client is not None else 1
    grid = int(grid)
    if 1 <= grid <= min(base.n_samples, base.n_features):
        base.partition(grid)


def _block_scores(X_block, coef, intercept):
    """Scores ``X_block @ coef + intercept`` of one block, dense or sparse."""
    scores = X_block @ coef
    return np.asarray(scores, dtype=np.float64).reshape(-1) + intercept


def _dataset_block_scores(dataset, index, coef, intercept):
    X_block, _ = dataset.block(index)
    return _block_scores(X_block, coef, intercept)


# --------------------------------------------------------------------------------------------
# the shared machinery


class _SaddlePointBase(BaseEstimator):
    """Machinery shared by every estimator: validation, the solve call, prediction, storage.

    Subclasses define ``_loss_spec()`` and ``_regularizer_spec()``.
    """

    # ---------------------------------------------------------------- what to minimize

    def _loss_spec(self):
        return self.loss

    def _regularizer_spec(self):
        return self.regularizer

    def _solver_name(self, loss, regularizer, weighted=False):
        solver = self.solver
        if solver == "auto":
            solver = auto_solver(loss, regularizer, weighted=weighted)
        if solver not in SOLVERS:
            raise ValueError(
                f"solver must be 'auto' or one of {', '.join(map(repr, SOLVERS))}; got {solver!r}"
            )
        return solver

    def _is_classification(self) -> bool:
        return _loss_name(self._loss_spec()) in _CLASSIFICATION_LOSSES

    # ---------------------------------------------------------------- parameters

    def _validate_params(self):
        """Check the hyper-parameters; ValueError naming the parameter, before any work."""
        alpha = self.alpha
        if not isinstance(alpha, numbers.Real) or not np.isfinite(alpha) or alpha <= 0:
            raise ValueError(f"alpha must be a positive finite number; got {alpha!r}")
        if not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer; got {self.max_iter!r}")
        if not isinstance(self.tol, numbers.Real) or not self.tol >= 0:
            raise ValueError(f"tol must be a non-negative number; got {self.tol!r}")
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
        from daskpd.losses import get_loss
        from daskpd.regularizers import get_regularizer

        loss = get_loss(self._loss_spec())
        regularizer = get_regularizer(self._regularizer_spec())
        return loss, regularizer, self._solver_name(loss, regularizer)

    # ---------------------------------------------------------------- input

    def _prepare_fit_data(self, X, y, sample_weight):
        """Turn any supported input into a daskpd dataset with labels in {-1, +1} (classifiers).

        Returns
        -------
        data : Dataset-like
            Without the bias column.
        labels : ndarray
            The distinct labels (classifiers) or None.
        """
        from daskpd.dataset import as_dataset

        classification = self._is_classification()
        if _is_dataset(X):
            return self._prepare_dataset(X, y, sample_weight, classification)
        if _is_dask_collection(X) or _is_dask_collection(y):
            return self._prepare_dask(X, y, sample_weight, classification)
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse="csr",
            dtype=np.float64,
            y_numeric=not classification,
            reset=True,
        )
        weights = self._normalized_sample_weight(sample_weight, X)
        if classification:
            labels, y_signed = self._encode_labels(y)
            weights = self._apply_class_weight(weights, y_signed, labels)
            y = y_signed
        else:
            labels = None
            y = np.asarray(y, dtype=np.float64)
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            X.sort_indices()
        # Always the sparse layout: every solver (DSO needs it) then sees the same data,
        # so NumPy, scipy.sparse, Dask and on-disk input give the same model.
        return as_dataset(X, y, sample_weight=weights, layout="csr"), labels

    def _normalized_sample_weight(self, sample_weight, X):
        if sample_weight is None:
            return None
        weights = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        total = weights.sum()
        if not total > 0:
            raise ValueError("Sample weights must contain at least one non-zero weight.")
        # Mean 1: an integer weight k is then the same as repeating the row k times.
        return weights * (weights.shape[0] / total)

    def _encode_labels(self, y):
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        labels = np.unique(y)
        if labels.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of 2 classes in the data, but the data "
                f"contains only one class: {labels[0]!r}"
            )
        if y_type != "binary":
            raise ValueError(
                f"Only binary classification is supported. The type of the target is {y_type}."
            )
        return labels, np.where(y == labels[1], 1.0, -1.0)

    def _class_weight_dict(self, labels, counts):
        """Class weight per label, as {label: weight}; counts are the samples per label."""
        class_weight = getattr(self, "class_weight", None)
        if class_weight is None:
            return None
        if class_weight == "balanced":
            counts = np.asarray(counts, dtype=np.float64)
            if np.any(counts == 0):
                raise ValueError("class_weight='balanced' needs samples of every class")
            weights = counts.sum() / (labels.shape[0] * counts)
            return dict(zip(labels.tolist(), weights.tolist(), strict=True))
        unknown = set(class_weight) - set(labels.tolist())
        if unknown:
            raise ValueError(
                f"class_weight names labels {sorted(map(repr, unknown))} that are not in "
                f"the data (labels: {labels.tolist()})"
            )
        for label, weight in class_weight.items():
            if not isinstance(weight, numbers.Real) or not weight >= 0:
                raise ValueError(f"class_weight[{label!r}] must be >= 0; got {weight!r}")
        return {label: float(class_weight.get(label, 1.0)) for label in labels.tolist()}

    def _apply_class_weight(self, weights, y_signed, labels):
        counts = [np.sum(y_signed < 0), np.sum(y_signed > 0)]
        if weights is not None:
            counts_weighted = [weights[y_signed < 0].sum(), weights[y_signed > 0].sum()]
            if min(counts_weighted) == 0:
                raise ValueError(
                    "sample_weight leaves only one class with non-zero weight; "
                    "a classifier needs samples of 2 classes"
                )
        class_weight = self._class_weight_dict(labels, counts)
        if class_weight is None:
            return weights
        low, high = class_weight[labels[0].item()], class_weight[labels[1].item()]
        row_weight = np.where(y_signed > 0, high, low)
        if weights is None:
            weights = np.ones_like(y_signed)
        weights = weights * row_weight
        if not weights.sum() > 0:
            raise ValueError("class_weight and sample_weight give every row zero weight")
        return weights

    def _prepare_dask(self, X, y, sample_weight, classification):
        import dask
        import dask.array as da

        from daskpd.dataset import as_dataset

        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        X = da.asarray(X)
        y = da.asarray(y)
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D Dask array X; got {X.ndim} dimensions")
        if y.ndim != 1:
            raise ValueError(f"Expected a 1-D Dask array y; got shape {y.shape}")
        if X.shape[0] != y.shape[0]:
            raise ValueError(
                f"X and y have different numbers of samples: {X.shape[0]} and {y.shape[0]}"
            )
        if X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"Found array with shape {X.shape}; at least 1 row and column needed")
        self.n_features_in_ = int(X.shape[1])
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        X = X.astype(np.float64)
        y = y.astype(np.float64) if not classification else y
        # One compute over y for its labels and finite values; X is checked for finite values
        # where as_dataset loads or writes it.
        finite_y = da.isfinite(y.astype(np.float64)).all() if y.dtype.kind in "fiub" else True
        if classification:
            labels, finite_y = dask.compute(da.unique(y), finite_y)
        else:
            (finite_y,) = dask.compute(finite_y)
            labels = None
        if not finite_y:
            raise ValueError("Input y contains NaN or infinity.")
        weights = None
        if sample_weight is not None:
            weights = np.asarray(sample_weight, dtype=np.float64)
            if weights.shape != (X.shape[0],):
                raise ValueError(
                    f"sample_weight.shape == {weights.shape}, expected {(X.shape[0],)}!"
                )
            weights = self._normalized_sample_weight(weights, weights.reshape(-1, 1))
        if classification:
            labels = np.asarray(labels)
            if labels.shape[0] != 2:
                self._encode_labels(labels)  # raises the one-class / multiclass error
            y_signed = da.where(y == labels[1], 1.0, -1.0)
            counts = da.compute((y_signed < 0).sum(), (y_signed > 0).sum())
            class_weight = self._class_weight_dict(labels, counts)
            if class_weight is not None:
                low, high = class_weight[labels[0].item()], class_weight[labels[1].item()]
                row_weight = da.where(y_signed > 0, high, low)
                weights = row_weight if weights is None else row_weight * weights
            y = y_signed
        return as_dataset(X, y, sample_weight=weights, layout="csr"), labels

    def _prepare_dataset(self, dataset, y, sample_weight, classification):
        if y is not None:
            raise ValueError(
                "y must be None when X is a daskpd dataset: the labels are read from it"
            )
        if sample_weight is not None:
            raise ValueError(
                "sample_weight must be None when X is a daskpd dataset: store the weights "
                "in the dataset (write_dataset(..., sample_weight=...))"
            )
        n_samples, n_features = dataset.shape
        if n_samples < 1 or n_features < 1:
            raise ValueError(f"Found a dataset of shape {dataset.shape}; it is empty")
        self.n_features_in_ = int(n_features)
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        labels = None
        if classification:
            if getattr(dataset, "task", "binary") != "binary" or not dataset.label_counts:
                raise ValueError(
                    f"{type(self).__name__} needs a dataset with binary labels (-1/+1); this "
                    f"one has task={getattr(dataset, 'task', None)!r}"
                )
            label_counts = {float(k): int(v) for k, v in dict(dataset.label_counts).items()}
            labels = np.array(sorted(label_counts), dtype=np.float64)
            if labels.shape[0] < 2:
                raise ValueError(
                    f"the dataset has only one class ({labels.tolist()}); a classifier "
                    "needs samples of 2 classes"
                )
            if labels.shape[0] > 2:
                raise ValueError(
                    "Only binary classification is supported. The dataset has "
                    f"{labels.shape[0]} classes."
                )
            if labels.tolist() != [-1.0, 1.0]:
                raise ValueError(
                    f"a dataset for a classifier must store the labels -1 and +1; this one "
                    f"has {labels.tolist()} (write it with y mapped to -1/+1)"
                )
            counts = [label_counts[-1.0], label_counts[1.0]]
            class_weight = self._class_weight_dict(labels, counts)
            self._dataset_class_weight = (
                None if class_weight is None else {-1.0: class_weight[-1.0], 1.0: class_weight[1.0]}
            )
        return dataset, labels

    # ---------------------------------------------------------------- fit

    def fit(self, X, y=None, sample_weight=None):
        """Train the model; stop at a duality gap of ``tol`` or after ``max_iter`` epochs.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Training data. A daskpd dataset (:func:`daskpd.open_dataset`) carries its labels
            and optional sample weights.
        y : array-like of shape (n_samples,) or Dask array, default=None
            Targets; must be None for a dataset. Classifiers accept any two labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, rescaled to mean 1 (an integer weight equals repeating the
            row). For a dataset, store the weights in it instead.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        from daskpd._cluster import ClusterOptions, cluster_client
        from daskpd.solvers import solve

        loss, regularizer, _ = self._validate_params()
        self._dataset_class_weight = None
        data, labels = self._prepare_fit_data(X, y, sample_weight)
        weighted = bool(
            getattr(data, "has_sample_weight", False) or self._dataset_class_weight is not None
        )
        solver = self._solver_name(loss, regularizer, weighted=weighted)
        if self.warm_start and solver not in WARM_START_SOLVERS:
            raise ValueError(
                f"warm_start=True needs a solver that starts from the previous model "
                f"({', '.join(sorted(WARM_START_SOLVERS))}); solver {solver!r} always starts "
                "from zero: choose another solver or warm_start=False"
            )
        if self.fit_intercept:
            data = data.with_bias(float(self.intercept_scaling))
        warm = None
        if (
            self.warm_start
            and hasattr(self, "coef_")
            and self.coef_.shape[0] == self.n_features_in_
        ):
            warm = self.coef_
            if self.fit_intercept:
                warm = np.append(warm, self.intercept_ / self.intercept_scaling)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        callbacks = self._callbacks()
        options = dict(self.solver_options or {})
        solve_kwargs = {}
        if self._dataset_class_weight is not None:
            solve_kwargs["class_weight"] = self._dataset_class_weight
        if warm is not None:
            solve_kwargs["warm_start"] = warm
        cluster = self.cluster
        if cluster is None:
            cluster_options, start = ClusterOptions(), False
        elif cluster == "local":
            cluster_options, start = ClusterOptions(), True
        else:
            cluster_options, start = ClusterOptions(scheduler=cluster), False
        with cluster_client(cluster_options, start=start) as client:
            if solver == "dso":
                _partition_in_memory(data, options.get("grid"), client)
            # False: no active client and none asked for, so run in-process (solve() would
            # otherwise start a LocalCluster for on-disk data).
            result = solve(
                data,
                loss=loss,
                regularizer=regularizer,
                alpha=float(self.alpha),
                solver=solver,
                max_epochs=int(self.max_iter),
                tol=float(self.tol),
                # Every epoch, not "auto": with "auto" the epoch where tol stops the fit
                # would depend on timing, and the same random_state must give the same model.
                eval_every=1,
                random_state=seed,
                callbacks=callbacks,
                client=False if client is None else client,
                **solve_kwargs,
                **options,
            )
        w = np.asarray(result.w, dtype=np.float64)
        if self.fit_intercept:
            self.coef_ = w[:-1].copy()
            self.intercept_ = float(w[-1] * self.intercept_scaling)
        else:
            self.coef_ = w.copy()
            self.intercept_ = 0.0
        self._fit_intercept_used = bool(self.fit_intercept)
        if labels is not None:
            self.classes_ = labels
        self.n_iter_ = int(result.n_epochs)
        self.gap_ = float(result.gap)
        self.history_ = list(result.history)
        self.solver_ = result.solver
        if not result.converged:
            warnings.warn(
                f"{type(self).__name__} stopped after {self.n_iter_} epochs with a duality gap "
                f"of {self.gap_:.3g} > tol={self.tol:g}; increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

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

    # ---------------------------------------------------------------- predict

    def _scores(self, X):
        """``X @ coef_ + intercept_`` for any supported input (lazy for Dask / dataset input)."""
        check_is_fitted(self, "coef_")
        if _is_dataset(X):
            return self._dataset_scores(X)
        if _is_dask_collection(X):
            return self._dask_scores(X)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return _block_scores(X, self.coef_, self.intercept_)

    def _check_n_features(self, n_features):
        if n_features != self.n_features_in_:
            raise ValueError(
                f"X has {n_features} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )

    def _dask_scores(self, X):
        import dask.array as da

        X = da.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D Dask array X; got {X.ndim} dimensions")
        self._check_n_features(X.shape[1])
        if X.numblocks[1] > 1:
            X = X.rechunk({1: -1})
        # One key for the coefficients, shared by every block's task.
        coef = da.from_array(self.coef_, chunks=-1)
        return da.blockwise(
            _block_scores,
            "i",
            X,
            "ij",
            coef,
            "j",
            intercept=self.intercept_,
            concatenate=True,
            dtype=np.float64,
            meta=np.empty((0,), dtype=np.float64),
        )

    def _dataset_scores(self, dataset):
        import dask
        import dask.array as da

        self._check_n_features(dataset.shape[1])
        bounds = np.asarray(dataset.row_block_bounds)
        coef = dask.delayed(self.coef_)
        blocks = [
            da.from_delayed(
                dask.delayed(_dataset_block_scores)(dataset, index, coef, self.intercept_),
                shape=(int(bounds[index + 1] - bounds[index]),),
                dtype=np.float64,
            )
            for index in range(dataset.n_row_blocks)
        ]
        return da.concatenate(blocks)

    # ---------------------------------------------------------------- storage

    def save(self, path):
        """Write the fitted model to a zarr group at ``path`` (atomically).

        ``coef_`` and every other array (``classes_``, a random state's key) are chunked
        zarr arrays with checksums; parameters and fitted attributes are JSON attributes
        (:mod:`daskpd._codec`), so loading the file never runs code from it. The
        ``callback`` and ``cluster`` parameters belong to the run (a function, a cluster
        object) and are stored as None unless ``cluster`` is a string.

        Parameters
        ----------
        path : str or os.PathLike
            Destination; must not exist.

        Raises
        ------
        FileExistsError
            When ``path`` exists (nothing is written).
        TypeError
            When a parameter or attribute is of a type the format cannot store (named).
        """
        from daskpd import _codec
        from daskpd.checkpoint import _write_array, atomic_group

        check_is_fitted(self, "coef_")
        path = os.fspath(path)
        if os.path.exists(path):
            raise FileExistsError(f"{path} exists; remove it or choose another path")
        params = self.get_params(deep=False)
        params["callback"] = None
        if not isinstance(params.get("cluster"), str | None):
            params["cluster"] = None
        state = {
            key: value
            for key, value in self.__dict__.items()
            if key.endswith("_") and not key.startswith("_") and key != "coef_"
        }
        state["_fit_intercept_used"] = self._fit_intercept_used
        arrays = [np.asarray(self.coef_, dtype=np.float64)]
        document = {
            "params": _codec.encode(params, arrays, "parameter"),
            "state": _codec.encode(state, arrays, "fitted attribute"),
        }
        with atomic_group(path) as group:
            checksums = {
                f"array-{k}": _write_array(group, f"array-{k}", array)
                for k, array in enumerate(arrays)
            }
            group.attrs.update(
                {
                    "format_version": _MODEL_FORMAT_VERSION,
                    "estimator": f"{type(self).__module__}.{type(self).__qualname__}",
                    "document": json.dumps(document),
                    "checksums": checksums,
                }
            )

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
            A zarr group written by :meth:`save`.

        Returns
        -------
        estimator : object
            The fitted estimator (of the class that saved it).
        """
        estimator = load_estimator(path)
        if not isinstance(estimator, cls):
            raise TypeError(f"{path} holds a {type(estimator).__name__}, not a {cls.__name__}")
        return estimator

    # ---------------------------------------------------------------- tags

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        if tags.classifier_tags is not None:
            tags.classifier_tags.multi_class = False
        return tags


def load_estimator(path):
    """Read an estimator written by ``estimator.save(path)``.

    Parameters
    ----------
    path : str or os.PathLike
        A zarr group written by :meth:`SaddlePointEstimator.save`.

    Returns
    -------
    estimator : SaddlePointEstimator or a subclass
        The fitted estimator.
    """
    import zarr

    from daskpd import _codec
    from daskpd.checkpoint import _read_array

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no saved model at {path}")
    group = zarr.open_group(path, mode="r")
    version = group.attrs.get("format_version")
    if version == 1 and "meta" in group.attrs:
        raise ValueError(
            f"{path} was saved by an older daskpd whose model files hold pickled metadata; "
            "daskpd no longer reads them, because unpickling a file runs code from it. "
            "Fit and save the model again with this version."
        )
    if version != _MODEL_FORMAT_VERSION:
        raise ValueError(f"{path} is not a daskpd model (format_version={version!r})")
    name = group.attrs.get("estimator", "")
    module_name, _, class_name = str(name).rpartition(".")
    estimator_class = _ESTIMATORS.get(class_name)
    if module_name != __name__ or estimator_class is None:
        raise ValueError(f"{path} names an estimator that is not daskpd's: {name!r}")
    try:
        document = json.loads(group.attrs["document"])
        checksums = dict(group.attrs["checksums"])
        arrays = [
            _read_array(group[name], name, checksums, where=f"{path}: ")
            for name in (f"array-{k}" for k in range(len(checksums)))
        ]
    except (KeyError, TypeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: the model's attributes are unreadable ({error!r})") from None
    params = _codec.decode(document["params"], arrays, f"{path}: parameters")
    state = _codec.decode(document["state"], arrays, f"{path}: fitted attributes")
    estimator = estimator_class(**params)
    for key, value in state.items():
        setattr(estimator, key, value)
    estimator.coef_ = np.asarray(arrays[0], dtype=np.float64)
    return estimator


# --------------------------------------------------------------------------------------------
# public estimators

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
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names, when X had string column names.
"""


def _has_classification_loss(estimator):
    # Regressors must not expose decision_function (scikit-learn's contract).
    return estimator._is_classification()


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

    def __init__(
        self,
        *,
        loss="hinge",
        regularizer="l2",
        alpha=1e-4,
        solver="auto",
        fit_intercept=True,
        intercept_scaling=1.0,
        class_weight=None,
        tol=1e-4,
        max_iter=100,
        warm_start=False,
        random_state=None,
        callback=None,
        verbose=False,
        cluster=None,
        solver_options=None,
    ):
        self.loss = loss
        self.regularizer = regularizer
        self.alpha = alpha
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.random_state = random_state
        self.callback = callback
        self.verbose = verbose
        self.cluster = cluster
        self.solver_options = solver_options

    def _validate_params(self):
        result = super()._validate_params()
        if self.class_weight is not None and not self._is_classification():
            raise ValueError(
                f"class_weight is for classification losses; loss={_loss_name(self.loss)!r} "
                "is a regression loss"
            )
        return result

    def predict(self, X):
        """Predicted labels (classification losses) or values (regression losses).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), or a lazy Dask array for Dask / dataset input
        """
        scores = self._scores(X)
        if hasattr(self, "classes_"):
            return _labels_from_scores(scores, self.classes_)
        return scores

    @available_if(_has_classification_loss)
    def decision_function(self, X):
        """Signed scores ``X @ coef_ + intercept_`` (classification losses only).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Samples.

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


def _labels_from_scores(scores, classes):
    if _is_dask_collection(scores):
        import dask.array as da

        return da.where(scores > 0, classes[1], classes[0])
    return classes[(scores > 0).astype(np.intp)]


class _BinaryClassifier(LinearClassifierMixin, _SaddlePointBase):
    """Binary linear classifier: ``predict`` maps the sign of the score to ``classes_``."""

    def decision_function(self, X):
        """Signed scores ``X @ coef_ + intercept_``; positive means ``classes_[1]``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Samples.

        Returns
        -------
        scores : ndarray of shape (n_samples,), or a lazy Dask array for Dask / dataset input
        """
        return self._scores(X)

    def predict(self, X):
        """Predicted labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), or a lazy Dask array for Dask / dataset input
            Labels from ``classes_``.
        """
        return _labels_from_scores(self._scores(X), self.classes_)

    def _loss_spec(self):
        return self._loss_name

    def _regularizer_spec(self):
        return _penalty(self.penalty, self.l1_ratio)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


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


class LinearSVC(_BinaryClassifier):
    """Linear support vector classifier: hinge loss ``max(0, 1 - y x.w)``.

    Parameters
    ----------
    solver : {"dso", "spdc", "dspdc", "gsfw", "pdprox", "batch", "cocoa", "auto"}, default="auto"
        ``"auto"`` is CoCoA (dual coordinate ascent) with ``penalty="l2"``, DSO with the other
        penalties (see :func:`auto_solver`). Each solver checks that it supports the hinge
        loss with the chosen penalty and raises ValueError otherwise.
    """

    __doc__ += (
        _CLASSIFIER_PARAMS_DOC
        + _COMMON_PARAMS_DOC
        + _FITTED_DOC
        + """
    classes_ : ndarray of shape (2,)
        The two labels; ``classes_[1]`` is the positive class.
"""
    )

    _loss_name = "hinge"

    def __init__(
        self,
        *,
        penalty="l2",
        alpha=1e-4,
        l1_ratio=0.15,
        solver="auto",
        fit_intercept=True,
        intercept_scaling=1.0,
        class_weight=None,
        tol=1e-4,
        max_iter=100,
        warm_start=False,
        random_state=None,
        callback=None,
        verbose=False,
        cluster=None,
        solver_options=None,
    ):
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.random_state = random_state
        self.callback = callback
        self.verbose = verbose
        self.cluster = cluster
        self.solver_options = solver_options


class LogisticRegression(_BinaryClassifier):
    """Logistic regression: loss ``log(1 + exp(-y x.w))``.

    Parameters
    ----------
    solver : {"dso", "spdc", "dspdc", "gsfw", "pdprox", "batch", "cocoa", "auto"}, default="auto"
        ``"auto"`` is CoCoA (dual coordinate ascent) with ``penalty="l2"``, SPDC (linear
        convergence) with the elastic net, or the full-gradient ``"batch"`` solver with
        ``penalty="l1"`` (see :func:`auto_solver`).
    """

    __doc__ += (
        _CLASSIFIER_PARAMS_DOC
        + _COMMON_PARAMS_DOC
        + _FITTED_DOC
        + """
    classes_ : ndarray of shape (2,)
        The two labels; ``classes_[1]`` is the positive class.
"""
    )

    _loss_name = "logistic"

    def __init__(
        self,
        *,
        penalty="l2",
        alpha=1e-4,
        l1_ratio=0.15,
        solver="auto",
        fit_intercept=True,
        intercept_scaling=1.0,
        class_weight=None,
        tol=1e-4,
        max_iter=100,
        warm_start=False,
        random_state=None,
        callback=None,
        verbose=False,
        cluster=None,
        solver_options=None,
    ):
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.random_state = random_state
        self.callback = callback
        self.verbose = verbose
        self.cluster = cluster
        self.solver_options = solver_options

    def predict_proba(self, X):
        """Probabilities of ``classes_[0]`` and ``classes_[1]``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, 2), or a lazy Dask array for Dask / dataset input
        """
        scores = self.decision_function(X)
        if _is_dask_collection(scores):
            import dask.array as da

            positive = 1.0 / (1.0 + da.exp(-scores))
            return da.stack([1.0 - positive, positive], axis=1)
        from scipy.special import expit

        positive = expit(scores)
        return np.column_stack([1.0 - positive, positive])

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), Dask array, or Dataset
            Samples.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, 2), or a lazy Dask array
        """
        scores = self.decision_function(X)
        if _is_dask_collection(scores):
            import dask.array as da

            return da.stack([-da.logaddexp(0.0, scores), -da.logaddexp(0.0, -scores)], axis=1)
        return np.column_stack([-np.logaddexp(0.0, scores), -np.logaddexp(0.0, -scores)])


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


#: The estimators a model file may name (looked up here, never imported by name).
_ESTIMATORS = {
    cls.__name__: cls
    for cls in (
        SaddlePointEstimator, LinearSVC, LogisticRegression, Ridge, Lasso, ElasticNet,
        LinearSVR, LADRegression,
    )
}  # fmt: skip
