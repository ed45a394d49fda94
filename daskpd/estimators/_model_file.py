"""Model files of the estimators: ``estimator.save``, ``Estimator.load``, :func:`load_estimator`.

An estimator is saved as a model file of kind ``"estimator"`` (:mod:`daskpd.model_file`, the
one format of saved models): ``coef_`` and every other array are zarr arrays with checksums,
parameters and fitted attributes are a JSON document (:mod:`daskpd._codec`), so loading a
file never runs code from it. The file names its estimator ``daskpd.estimators.<class
name>``, the public home of the classes (which are defined in private modules), and loading
looks that name up in a table of daskpd's estimators. A solve result's file (``result.save``)
is refused here, with a message pointing to :func:`daskpd.load_model`: which estimator, with
which parameters, a bare solve result stands for is not written in it.

A file says what the model is, never where or how to run it: ``cluster`` and ``callback``
are written as None, ``solver_options`` keeps only the solver's own options (not the run
settings that ``fit`` also passes on, such as ``checkpoint_dir``), and loading refuses a
document that names a cluster, a callback, an option that is not the solver's, a solver
that is not registered, a fitted attribute this module does not list, or a value of the
wrong type; every refusal is one ``ValueError`` naming the file.
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


#: Parameters that say where or how a fit runs (a scheduler address, functions called after
#: each epoch): they belong to the run, and a model file holds None.
_RUN_PARAMS = ("callback", "cluster")


def _is_scalar(value) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_vector(value, kinds) -> bool:
    return isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in kinds


def _is_history(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(row, dict)
        and all(isinstance(key, str) and _is_scalar(item) for key, item in row.items())
        for row in value
    )


#: The fitted attributes a model file may set, each with the check of its value (the
#: document decodes to the types of :mod:`daskpd._codec` only).
_FITTED = {
    "coef_": lambda value: _is_vector(value, "fiub"),
    "intercept_": _is_number,
    "classes_": lambda value: _is_vector(value, "fiubUO"),
    "n_iter_": _is_int,
    "gap_": _is_number,
    "history_": _is_history,
    "solver_": lambda value: isinstance(value, str),
    "n_features_in_": _is_int,
    "feature_names_in_": lambda value: _is_vector(value, "UO"),
    "_fit_intercept_used": lambda value: isinstance(value, bool),
}


def _solver_fields(solver) -> frozenset:
    """The option names of ``solver`` (a registered name), or of every registered solver for
    ``"auto"`` (which one a fit takes depends on the data)."""
    import dataclasses

    from daskpd.solvers.driver.registry import available_solvers, get_solver

    names = available_solvers() if solver == "auto" else [solver]
    return frozenset(
        field.name for name in names for field in dataclasses.fields(get_solver(name).Options)
    )


def _model_solver_options(solver, solver_options):
    """The solver options a model file keeps: the solver's own, without the run settings
    (``checkpoint_dir``, ``resume``, ...) that ``fit`` passes on to the run with them."""
    if not isinstance(solver_options, dict) or not isinstance(solver, str):
        return solver_options
    known = _solver_fields(solver)
    return {key: value for key, value in solver_options.items() if key in known}


def _check_model_params(params, where) -> None:
    """Refuse parameters that say where or how to run, or name what daskpd does not have."""
    from daskpd.solvers.driver.registry import get_solver

    for name in _RUN_PARAMS:
        if params.get(name) is not None:
            raise ValueError(
                f"{where} names {name}={params[name]!r}: a model file says what the model is, "
                "never where or how to run it (set it on the loaded estimator)"
            )
    solver = params.get("solver", "auto")
    if not isinstance(solver, str):
        raise ValueError(f"{where}: its solver is not a name: {solver!r}")
    if solver != "auto":
        try:
            get_solver(solver)  # a registered name; nothing else is ever imported
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    options = params.get("solver_options")
    if options is None:
        return
    if not isinstance(options, dict) or not all(isinstance(key, str) for key in options):
        raise ValueError(f"{where}: its solver_options are not a dict of names")
    unknown = sorted(set(options) - _solver_fields(solver))
    if unknown:
        raise ValueError(
            f"{where}: its solver_options name {unknown}, which are not options of solver "
            f"{solver!r} (a model file holds the solver's options, never where or how to run)"
        )
    odd = sorted(key for key, value in options.items() if not _is_scalar(value))
    if odd:
        raise ValueError(f"{where}: its solver_options {odd} are not plain values")


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
        (:mod:`daskpd._codec`), so loading the file never runs code from it. The file says
        what the model is, never where or how to run: ``callback`` and ``cluster`` are
        stored as None, and ``solver_options`` without the run settings that ``fit`` passes
        on with them (``checkpoint_dir``, ``resume``, ...).

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
        for name in _RUN_PARAMS:
            params[name] = None
        params["solver_options"] = _model_solver_options(
            params.get("solver"), params.get("solver_options")
        )
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
    # Only the fitted attributes the estimators set, each of its type; never a dunder or a
    # method's name, which would change the object itself.
    unexpected = [key for key in state if key not in _FITTED]
    if unexpected or not all(isinstance(key, str) for key in params):
        raise ValueError(f"{where}: its document is not an estimator's ({unexpected})")
    wrong = sorted(key for key, value in state.items() if not _FITTED[key](value))
    if wrong:
        raise ValueError(f"{where}: its fitted attributes {wrong} are not of their types")
    if "n_features_in_" in state and state["n_features_in_"] != state["coef_"].shape[0]:
        raise ValueError(f"{where}: n_features_in_ does not match the length of coef_")
    _check_model_params(params, where)
    try:
        estimator = estimator_class(**params)
        # the checks of fit, on the parameters as the file gives them
        estimator._validate_params()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: its parameters do not fit {class_name} ({exc})") from None
    for key, value in state.items():
        setattr(estimator, key, value)
    estimator.coef_ = np.asarray(state["coef_"], dtype=np.float64)
    return estimator
