"""The two kinds of model file: their documents (:mod:`daskpd.model_file` says what each
holds), and the objects they become; :func:`save_model` and :func:`load_model`.

The classes a file becomes sit above this module (:class:`~daskpd.SolveResult` in the
solvers, the estimators above them), so they enter a table here where they are defined
(:func:`model_class`) and a file names its class by the table's key: nothing is ever imported
by a name read from a file. A file loaded before its classes' package was imported imports
that package, by the constant name in :data:`_HOMES`. Solvers and their options are looked up
in the solver registry, which enters itself here (:func:`use_solver_registry`) for the same
reason.

An estimator's file says what the model is, never where or how to run it: ``cluster`` and
``callback`` are written as None, ``solver_options`` keeps only the solver's own options (not
the run settings that ``fit`` also passes on, such as ``checkpoint_dir``), and loading refuses
a document that names a cluster, a callback, an option that is not the solver's, a solver that
is not registered, a fitted attribute not listed in :data:`_FITTED`, or a value of the wrong
type; every refusal is one ``ValueError`` naming the file. A solver is named by its registered
name, which imports nothing but daskpd's own solver modules
(:func:`daskpd.solvers.get_solver`).
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import numpy as np

from daskpd.model_file._store import KINDS, read_model_file, write_model_file

#: The classes model files may name, by kind and class name; each enters with
#: :func:`model_class` where it is defined.
_CLASSES = {kind: {} for kind in KINDS}
_ESTIMATORS = _CLASSES["estimator"]

#: The public package of each kind's classes: an estimator's file names its class
#: ``daskpd.estimators.<name>``, and loading a kind imports its package if nothing did yet.
_HOMES = {"solve_result": "daskpd.solvers", "estimator": "daskpd.estimators"}

#: Parameters that say where or how a fit runs (a scheduler address, functions called after
#: each epoch): they belong to the run, and a model file holds None.
_RUN_PARAMS = ("callback", "cluster")


def model_class(kind):
    """Class decorator: let model files of ``kind`` become ``cls`` (named by its class name).

    Parameters
    ----------
    kind : {"solve_result", "estimator"}

    Returns
    -------
    callable
        The decorator; it returns the class unchanged.
    """

    def enter(cls):
        _CLASSES[kind][cls.__name__] = cls
        return cls

    return enter


def use_solver_registry(registry) -> None:
    """Let model files look solvers up in ``registry`` (:mod:`daskpd.solvers.driver.registry`,
    which calls this when imported): its ``get_solver``, ``available_solvers`` and
    ``make_options``."""
    _SOLVER_REGISTRY[:] = [registry]


#: The solver registry, once it entered itself.
_SOLVER_REGISTRY = []


def _classes(kind) -> dict:
    if not _CLASSES[kind]:
        importlib.import_module(_HOMES[kind])
    return _CLASSES[kind]


def _registry():
    if not _SOLVER_REGISTRY:
        importlib.import_module(_HOMES["solve_result"])
    return _SOLVER_REGISTRY[0]


# --------------------------------------------------------------------------------------------
# saving and loading


def save_model(model, path, *, overwrite=False) -> Path:
    """Write a solve result or a fitted estimator as a model file at ``path``, atomically.

    ``w`` (or ``coef_``) and every other numeric array are zarr arrays with checksums; the
    rest is a JSON document (:mod:`daskpd.model_file._codec`), so loading the file never runs
    code from it. :func:`load_model` reads it back.

    Parameters
    ----------
    model : SolveResult or fitted estimator
    path : str or os.PathLike
        Destination directory store (e.g. ``model.zarr``); its parent must exist.
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
        When a value is of a type the format cannot store (named; nothing is written).
    sklearn.exceptions.NotFittedError
        When ``model`` is an estimator that was not fitted.
    """
    if isinstance(model, tuple(_CLASSES["solve_result"].values())):
        kind, content = "solve_result", _result_content(model)
    else:
        kind, content = "estimator", _estimator_content(model)
    return write_model_file(path, kind, content, overwrite=overwrite)


def load_model(path, *, kind=None):
    """Load a model file: a solve result or a fitted estimator, whichever it holds.

    Parameters
    ----------
    path : str or os.PathLike
        Written by :func:`save_model` (``result.save``, ``estimator.save``, ``daskpd train
        --out``).
    kind : {"solve_result", "estimator"}, optional
        The kind the caller needs; a file of the other kind is refused, naming its reader.

    Returns
    -------
    SolveResult or estimator
        A :class:`~daskpd.SolveResult` for a solve result's file (``options`` is the solver's
        ``Options`` dataclass when that solver is registered, else a dict; ``timings`` is
        empty); the fitted estimator, of the class that saved it, for an estimator's file.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When ``path`` is not a daskpd model file, is of a newer or withdrawn (pickled)
        version or of another ``kind``, names a class that is not daskpd's, or fails a check
        of :func:`daskpd.model_file.read_model_file`.
    CorruptStoreError
        When an array is missing, unreadable or fails its checksum (a ``ValueError``).

    See Also
    --------
    load_estimator : reads estimators only.
    """
    model_file = read_model_file(path, kind=kind)
    if model_file.kind == "estimator":
        return _estimator_from(model_file)
    return _result_from(model_file)


def load_estimator(path):
    """Read an estimator written by ``estimator.save(path)``: ``load_model(path,
    kind="estimator")``.

    Parameters
    ----------
    path : str or os.PathLike

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
        :func:`load_model`), names a class that is not daskpd's, or fails a check of
        :func:`daskpd.model_file.read_model_file` (``CorruptStoreError`` for an array).
    """
    return load_model(path, kind="estimator")


# --------------------------------------------------------------------------------------------
# solve results


def _result_content(result) -> dict:
    options = result.options
    if dataclasses.is_dataclass(options):
        # field by field, not asdict: the stored tuples stay tuples
        options = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    return {
        "solver": result.solver,
        "options": dict(options) if isinstance(options, dict) else {},
        "objective": result.objective,
        "history": tuple(result.history),
        "n_epochs": int(result.n_epochs),
        "gap": float(result.gap),
        "converged": bool(result.converged),
        "stop_reason": result.stop_reason,
        "seed_entropy": int(result.seed_entropy),
        "recoveries": int(result.recoveries),
        # z (and w_avg) may be distributed handles; only in-memory arrays are stored.
        "w": np.asarray(result.w, dtype=np.float64),
        "w_avg": result.w_avg if isinstance(result.w_avg, np.ndarray) else None,
        "z": result.z if isinstance(result.z, np.ndarray) else None,
    }


def _result_from(model_file):
    """The :class:`~daskpd.SolveResult` of a model file of kind ``"solve_result"``."""
    content = model_file.content
    where = f"model {str(model_file.path)!r}"
    solver, options = content.get("solver"), content.get("options")
    if not isinstance(solver, str) or not isinstance(options, dict):
        raise ValueError(f"{where}: its document is not a solve result's (solver and options)")
    plain = all(isinstance(key, str) and _is_plain_option(value) for key, value in options.items())
    if not plain:
        raise ValueError(f"{where}: its solver options are not names with plain values")
    vectors = [content.get(name) for name in ("w", "z", "w_avg")]
    if not isinstance(vectors[0], np.ndarray) or not all(
        vector is None or (isinstance(vector, np.ndarray) and vector.dtype.kind in "fiub")
        for vector in vectors
    ):
        raise ValueError(f"{where}: its document is not a solve result's (w, z, w_avg)")
    history = content.get("history")
    if not isinstance(content.get("objective"), dict) or not (
        isinstance(history, list | tuple) and all(isinstance(row, dict) for row in history)
    ):
        raise ValueError(f"{where}: its document is not a solve result's (objective, history)")
    result_class = _classes("solve_result")["SolveResult"]
    registry = _registry()
    try:
        try:
            # a registered name (get_solver imports daskpd's own solver modules only)
            options = registry.make_options(registry.get_solver(solver), options)
        except ValueError:
            # a method this process has not registered, or options it no longer has: they
            # stay a dict of plain values
            pass
        return result_class(
            w=np.asarray(content["w"], dtype=np.float64),
            z=content["z"],
            w_avg=content["w_avg"],
            history=tuple(content["history"]),
            n_epochs=int(content["n_epochs"]),
            gap=float(content["gap"]),
            converged=bool(content["converged"]),
            stop_reason=str(content["stop_reason"]),
            solver=str(content["solver"]),
            options=options,
            objective=content["objective"],
            seed_entropy=int(content["seed_entropy"]),
            recoveries=int(content["recoveries"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: its document is not a solve result's ({exc!r})") from None


def _is_plain_option(value) -> bool:
    if isinstance(value, tuple):
        return all(_is_plain_option(item) for item in value)
    return value is None or isinstance(value, bool | int | float | str)


# --------------------------------------------------------------------------------------------
# estimators


def _is_scalar(value) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_vector(value, kinds) -> bool:
    return isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in kinds


def _is_coef(value) -> bool:
    """``coef_``: a vector, or one row per class (a one-vs-rest model)."""
    return _is_vector(value, "fiub") or (
        isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype.kind in "fiub"
    )


def _is_history(value) -> bool:
    # a one-vs-rest row also holds one number per class (class_gap, ...)
    return isinstance(value, list) and all(
        isinstance(row, dict)
        and all(
            isinstance(key, str)
            and (_is_scalar(item) or (isinstance(item, list) and all(map(_is_number, item))))
            for key, item in row.items()
        )
        for row in value
    )


#: The fitted attributes a model file may set, each with the check of its value (the
#: document decodes to the types of :mod:`daskpd.model_file._codec` only).
_FITTED = {
    "coef_": _is_coef,
    "intercept_": lambda value: _is_number(value) or _is_vector(value, "fiub"),
    "classes_": lambda value: _is_vector(value, "fiubUO"),
    "n_iter_": _is_int,
    "gap_": _is_number,
    "history_": _is_history,
    "solver_": lambda value: isinstance(value, str),
    "n_features_in_": _is_int,
    "feature_names_in_": lambda value: _is_vector(value, "UO"),
    "_fit_intercept_used": lambda value: isinstance(value, bool),
}


def _estimator_content(estimator) -> dict:
    # scikit-learn (and with it SciPy's stats and pandas) only for an estimator
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(estimator, "coef_")
    params = estimator.get_params(deep=False)
    for name in _RUN_PARAMS:
        params[name] = None
    params["solver_options"] = _model_solver_options(
        params.get("solver"), params.get("solver_options")
    )
    state = {
        key: value
        for key, value in estimator.__dict__.items()
        if key.endswith("_") and not key.startswith("_")
    }
    state["coef_"] = np.asarray(estimator.coef_, dtype=np.float64)
    state["_fit_intercept_used"] = estimator._fit_intercept_used
    return {"estimator": _estimator_name(type(estimator)), "params": params, "state": state}


def _estimator_name(cls) -> str:
    """The name a model file gives the class of the saved estimator."""
    if _ESTIMATORS.get(cls.__name__) is cls:
        return f"{_HOMES['estimator']}.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _solver_fields(solver) -> frozenset:
    """The option names of ``solver`` (a registered name), or of every registered solver for
    ``"auto"`` (which one a fit takes depends on the data)."""
    registry = _registry()
    names = registry.available_solvers() if solver == "auto" else [solver]
    return frozenset(
        field.name
        for name in names
        for field in dataclasses.fields(registry.get_solver(name).Options)
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
            _registry().get_solver(solver)  # a registered name; nothing else is ever imported
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


def _estimator_from(model_file):
    """The fitted estimator of a model file of kind ``"estimator"``."""
    where = f"model {str(model_file.path)!r}"
    content = model_file.content
    name = content.get("estimator", "")
    module_name, _, class_name = str(name).rpartition(".")
    estimator_class = _classes("estimator").get(class_name)
    if module_name != _HOMES["estimator"] or estimator_class is None:
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
    if "n_features_in_" in state and state["n_features_in_"] != state["coef_"].shape[-1]:
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
