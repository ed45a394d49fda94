"""What the estimators take: any supported input, made a dataset to fit, scored to predict.

NumPy arrays and scipy.sparse matrices are validated as scikit-learn validates them; Dask
arrays and daskpd datasets are checked without loading them, and their scores stay lazy.
Classifier labels become -1/+1, and sample and class weights become row weights. The
classifiers whose solver trains multiclass data one-vs-rest (``_trains_multiclass()``) take
three or more labels of any type: they become the class indexes 0, 1, ... of a dataset of task
"multiclass", and ``classes_`` maps the indexes back. Their scores then have one column per
class.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)


def _plain(value):
    """A NumPy scalar as the Python number (or string) it holds, for messages: ``0.0``, not
    ``np.float64(0.0)``."""
    return value.item() if isinstance(value, np.generic) else value


def _is_dask_collection(obj) -> bool:
    try:
        import dask
    except ImportError:  # dask is a hard dependency; keep the check cheap anyway
        return False
    return dask.is_dask_collection(obj)


def _is_dataset(obj) -> bool:
    """True for an on-disk or in-memory daskpd dataset (anything with the block read API)."""
    return hasattr(obj, "n_row_blocks") and hasattr(obj, "read_rows") and hasattr(obj, "shape")


def _block_scores(X_block, coef, intercept):
    """Scores ``X_block @ coef + intercept`` of one block, dense or sparse.

    ``coef`` of shape (n_classes, n_features) (a multiclass model) gives scores of shape
    (n_rows, n_classes), ``X_block @ coef.T + intercept``, as scikit-learn's.
    """
    if np.ndim(coef) == 2:
        return np.asarray(X_block @ coef.T, dtype=np.float64).reshape(-1, coef.shape[0]) + intercept
    scores = X_block @ coef
    return np.asarray(scores, dtype=np.float64).reshape(-1) + intercept


def _class_indexes(y_block, labels):
    """The index in ``labels`` (sorted) of each label of ``y_block``, as float64."""
    return np.searchsorted(labels, y_block).astype(np.float64)


def _dataset_block_scores(dataset, index, coef, intercept):
    X_block, _ = dataset.block(index)
    return _block_scores(X_block, coef, intercept)


class _InputsMixin:
    """Input handling of every estimator (mixed into ``_SaddlePointBase``).

    Uses the estimator's ``_is_classification()``, its ``class_weight`` when it has one, and
    the fitted ``coef_`` and ``intercept_``.
    """

    # ---------------------------------------------------------------- input

    def _trains_multiclass(self) -> bool:
        """Whether ``fit`` takes more than two classes (the linear classifiers say)."""
        return False

    def _prepare_fit_data(self, X, y, sample_weight):
        """Turn any supported input into a daskpd dataset with labels in {-1, +1} (classifiers).

        Returns
        -------
        data : Dataset-like
            Without the bias column.
        labels : ndarray
            The distinct labels (classifiers) or None.
        """
        from daskpd.data import as_dataset

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
        # a regressor's integer targets are numbers, never taken for classes
        task = None if classification else "regression"
        if classification:
            labels, y_signed = self._encode_labels(y)
            if labels.shape[0] > 2:
                weights = self._multiclass_row_weights(weights, y_signed, labels)
                task = "multiclass"
            else:
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
        return as_dataset(X, y, sample_weight=weights, layout="csr", task=task), labels

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
                f"contains only one class: {labels[0].item()!r}"
            )
        if y_type == "multiclass" and self._trains_multiclass():
            # one-vs-rest: the class indexes, stored as the labels of a multiclass dataset
            return labels, np.searchsorted(labels, y).astype(np.float64)
        if y_type != "binary":
            raise ValueError(
                f"Only binary classification is supported. The type of the target is {y_type}."
            )
        return labels, np.where(y == labels[1], 1.0, -1.0)

    def _multiclass_row_weights(self, weights, codes, labels):
        """Row weights of multiclass rows (``codes``: class indexes): the sample weights
        times the class weight of each row's class, in every one-vs-rest problem (the
        objective's ``c_i = sample_weight_i * class_weight[y_i]``; liblinear instead weighs
        only the positive rows of each class's problem). ``"balanced"``:
        ``n_samples / (n_classes * count(label))``, as scikit-learn's."""
        counts = np.bincount(np.asarray(codes, dtype=np.intp), minlength=labels.shape[0])
        class_weight = self._class_weight_dict(labels, counts)
        if class_weight is None:
            return weights
        per_class = np.array([class_weight[label] for label in labels.tolist()])
        row_weight = per_class[np.asarray(codes, dtype=np.intp)]
        weights = row_weight if weights is None else weights * row_weight
        if not weights.sum() > 0:
            raise ValueError("class_weight and sample_weight give every row zero weight")
        return weights

    def _refuse_multiclass_class_weight(self):
        if getattr(self, "class_weight", None) is not None:
            raise ValueError(
                "class_weight on a multiclass dataset is not supported (its row weights are "
                "stored in it: store them as sample weights); got "
                f"class_weight={self.class_weight!r}"
            )

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
                f"class_weight names labels {sorted(repr(_plain(key)) for key in unknown)} "
                "that are not in "
                f"the data (labels: {labels.tolist()})"
            )
        for label, weight in class_weight.items():
            if not isinstance(weight, numbers.Real) or not weight >= 0:
                raise ValueError(
                    f"class_weight[{_plain(label)!r}] must be >= 0; got {_plain(weight)!r}"
                )
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

        from daskpd.data import as_dataset

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
            if labels.shape[0] > 2:
                codes = y.map_blocks(_class_indexes, labels, dtype=np.float64)
                if getattr(self, "class_weight", None) is not None:
                    weights = self._multiclass_row_weights(
                        weights, codes.compute().astype(np.intp), labels
                    )
                return as_dataset(
                    X, codes, sample_weight=weights, layout="csr", task="multiclass"
                ), labels
            y_signed = da.where(y == labels[1], 1.0, -1.0)
            counts = da.compute((y_signed < 0).sum(), (y_signed > 0).sum())
            class_weight = self._class_weight_dict(labels, counts)
            if class_weight is not None:
                low, high = class_weight[labels[0].item()], class_weight[labels[1].item()]
                row_weight = da.where(y_signed > 0, high, low)
                weights = row_weight if weights is None else row_weight * weights
            y = y_signed
        task = None if classification else "regression"
        return as_dataset(X, y, sample_weight=weights, layout="csr", task=task), labels

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
        if classification and dataset.classes is not None and self._trains_multiclass():
            self._refuse_multiclass_class_weight()
            return dataset, dataset.classes
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
        if np.ndim(self.coef_) == 2:
            return X.map_blocks(
                _block_scores,
                self.coef_,
                self.intercept_,
                chunks=(X.chunks[0], (self.coef_.shape[0],)),
                dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            )
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
        # one column per class for a multiclass model
        columns = (self.coef_.shape[0],) if np.ndim(self.coef_) == 2 else ()
        blocks = [
            da.from_delayed(
                dask.delayed(_dataset_block_scores)(dataset, index, coef, self.intercept_),
                shape=(int(bounds[index + 1] - bounds[index]), *columns),
                dtype=np.float64,
            )
            for index in range(dataset.n_row_blocks)
        ]
        return da.concatenate(blocks)
