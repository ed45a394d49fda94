"""Model files of the estimators: ``estimator.save``, ``Estimator.load``, :func:`load_estimator`.

An estimator is saved as a model file of kind ``"estimator"`` (:mod:`daskpd.model_file`, the
one format of saved models): ``coef_`` and every other array are zarr arrays with checksums,
parameters and fitted attributes are a JSON document (:mod:`daskpd._codec`), so loading a
file never runs code from it. The file names its estimator ``daskpd.estimators.<class
name>``, the public home of the classes (which are defined in private modules), and loading
looks that name up in a table of daskpd's estimators. A solve result's file (``result.save``)
is refused here, with a message pointing to :func:`daskpd.load_model`: which estimator, with
which parameters, a bare solve result stands for is not written in it.
"""

from __future__ import annotations

import os

import numpy as np
from sklearn.utils.validation import check_is_fitted

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

    def save(self, path, *, overwrite=False):
        """Write the fitted model as a model file at ``path`` (atomically).

        A model file of kind ``"estimator"`` (:mod:`daskpd.model_file`): ``coef_`` and
        every other array (``classes_``, a random state's key) are zarr arrays with
        checksums; parameters and fitted attributes are a JSON document
        (:mod:`daskpd._codec`), so loading the file never runs code from it. The
        ``callback`` and ``cluster`` parameters belong to the run (a function, a cluster
        object) and are stored as None unless ``cluster`` is a string.

        Parameters
        ----------
        path : str or os.PathLike
            Destination directory store; its parent must exist.
        overwrite : bool, default=False
            Replace an existing model at ``path``.

        Returns
        -------
        Path

        Raises
        ------
        FileExistsError
            When ``path`` exists and ``overwrite`` is false (nothing is written).
        TypeError
            When a parameter or attribute is of a type the format cannot store (named;
            nothing is written).
        """
        from daskpd.model_file import write_model_file

        check_is_fitted(self, "coef_")
        params = self.get_params(deep=False)
        params["callback"] = None
        if not isinstance(params.get("cluster"), str | None):
            params["cluster"] = None
        state = {
            key: value
            for key, value in self.__dict__.items()
            if key.endswith("_") and not key.startswith("_")
        }
        state["coef_"] = np.asarray(self.coef_, dtype=np.float64)
        state["_fit_intercept_used"] = self._fit_intercept_used
        content = {"estimator": _estimator_name(type(self)), "params": params, "state": state}
        return write_model_file(path, "estimator", content, overwrite=overwrite)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
            A model file of kind ``"estimator"``.

        Returns
        -------
        estimator : object
            The fitted estimator (of the class that saved it).

        Raises
        ------
        TypeError
            When the file holds another estimator class.
        ValueError
            When the file is not an estimator's (a solve result's file included), or fails
            a check of :func:`daskpd.model_file.read_model_file`.
        """
        estimator = load_estimator(path)
        if not isinstance(estimator, cls):
            raise TypeError(
                f"{os.fspath(path)} holds a {type(estimator).__name__}, not a {cls.__name__}"
            )
        return estimator


def load_estimator(path):
    """Read an estimator written by ``estimator.save(path)``.

    Parameters
    ----------
    path : str or os.PathLike
        A model file of kind ``"estimator"`` (:mod:`daskpd.model_file`).

    Returns
    -------
    estimator : SaddlePointEstimator or a subclass
        The fitted estimator.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When the file is not an estimator's (a solve result's file: read it with
        :func:`daskpd.load_model`), names a class that is not daskpd's, or fails a check of
        :func:`daskpd.model_file.read_model_file` (``CorruptStoreError`` for an array).
    """
    from daskpd.model_file import read_model_file

    return estimator_from_model_file(read_model_file(path, kind="estimator"))


def estimator_from_model_file(model_file):
    """Build the fitted estimator of a model file of kind ``"estimator"``.

    Parameters
    ----------
    model_file : daskpd.model_file.ModelFile

    Returns
    -------
    estimator : SaddlePointEstimator or a subclass
    """
    where = f"model {str(model_file.path)!r}"
    content = model_file.content
    name = content.get("estimator", "")
    module_name, _, class_name = str(name).rpartition(".")
    estimator_class = _ESTIMATORS.get(class_name)
    if module_name != _PUBLIC_MODULE or estimator_class is None:
        raise ValueError(f"{where} names an estimator that is not daskpd's: {name!r}")
    params, state = content.get("params"), content.get("state")
    if not isinstance(params, dict) or not isinstance(state, dict) or "coef_" not in state:
        raise ValueError(f"{where}: its document is not an estimator's")
    # Only fitted attributes (``name_``) and the one private flag the estimators keep; never
    # a dunder, which would change the object itself.
    unexpected = [
        key
        for key in state
        if not isinstance(key, str)
        or key.startswith("__")
        or not (key.endswith("_") or key == "_fit_intercept_used")
    ]
    if unexpected or not all(isinstance(key, str) for key in params):
        raise ValueError(f"{where}: its document is not an estimator's ({unexpected})")
    try:
        estimator = estimator_class(**params)
    except TypeError as exc:
        raise ValueError(f"{where}: its parameters do not fit {class_name} ({exc})") from None
    for key, value in state.items():
        setattr(estimator, key, value)
    estimator.coef_ = np.asarray(state["coef_"], dtype=np.float64)
    return estimator
