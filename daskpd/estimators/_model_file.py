"""Model files of the estimators: ``estimator.save(path)``, :func:`load_estimator`.

A model file is a zarr group written atomically: ``coef_`` and every other array are chunked
zarr arrays with checksums, parameters and fitted attributes are JSON attributes
(:mod:`daskpd._codec`), so loading a file never runs code from it. The file names its
estimator ``daskpd.estimators.<class name>``, the public home of the classes (which are
defined in private modules), and loading looks that name up in a table of daskpd's estimators.
"""

from __future__ import annotations

import json
import os

import numpy as np
from sklearn.utils.validation import check_is_fitted

#: 2: JSON attributes and zarr arrays (1, withdrawn: pickled metadata)
_MODEL_FORMAT_VERSION = 2

#: The module a model file names for daskpd's estimators (it re-exports them all).
_PUBLIC_MODULE = "daskpd.estimators"

#: The estimators a model file may name (looked up here, never imported by name); each public
#: estimator enters it with :func:`_model_class` where it is defined.
_ESTIMATORS = {}


def _model_class(cls):
    """Class decorator: let model files name ``cls`` (as ``daskpd.estimators.<name>``)."""
    _ESTIMATORS[cls.__name__] = cls
    return cls


def _estimator_name(cls) -> str:
    """The name a model file gives the class of the saved estimator."""
    if _ESTIMATORS.get(cls.__name__) is cls:
        return f"{_PUBLIC_MODULE}.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


class _ModelFileMixin:
    """``save`` and ``load`` of every estimator (mixed into ``_SaddlePointBase``)."""

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
                    "estimator": _estimator_name(type(self)),
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
    if module_name != _PUBLIC_MODULE or estimator_class is None:
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
