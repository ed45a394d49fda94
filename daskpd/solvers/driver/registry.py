"""The solver registry: methods by name, found by scanning ``daskpd/solvers/``, and their options.

A method package registers its class with :func:`register_solver` when it is imported;
:func:`get_solver` and :func:`available_solvers` import the method packages on first lookup
(``driver``, ``common`` and the names that start with ``_`` are not methods).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
import sys
from collections.abc import Mapping
from typing import Any

from daskpd.model_file import use_solver_registry
from daskpd.solvers.driver.protocol import Solver

__all__ = [
    "UnknownOptionsError",
    "available_solvers",
    "get_solver",
    "make_options",
    "register_solver",
]

_REGISTRY: dict[str, Any] = {}
#: The methods of :class:`Solver` that every solver implements (the rest have defaults).
_REQUIRED = ("check", "init", "run_epoch", "iterate", "state_arrays", "restore")


class UnknownOptionsError(ValueError):
    """Options that the solver does not have (a ``ValueError`` naming them).

    Attributes
    ----------
    solver : str
        The solver's name.
    unknown : tuple of str
        The names it does not have.
    """

    def __init__(self, message, *, solver, unknown):
        super().__init__(message)
        self.solver = solver
        self.unknown = tuple(unknown)


def register_solver(solver=None, *, name: str | None = None):
    """Register a solver class (or instance) under its ``name``.

    Usable as a decorator (``@register_solver``) or a call. Registering a second class under a
    taken name replaces the first (so reloading a module in a session works).

    Parameters
    ----------
    solver : class or object
        Implements :class:`~daskpd.solvers.driver.protocol.Solver`; a class is instantiated
        without arguments. A class written without that base (a duck-typed solver) is
        registered as a subclass of it, so the hooks it lacks have their defaults.
    name : str, optional
        Overrides ``solver.name``.

    Returns
    -------
    solver : the argument, unchanged (so it works as a class decorator)
    """

    def register(obj):
        instance = _as_solver(obj() if isinstance(obj, type) else obj)
        key = name or getattr(instance, "name", None)
        if not key or not isinstance(key, str):
            raise ValueError(f"solver {obj!r} has no name")
        missing = [
            method
            for method in _REQUIRED
            if getattr(type(instance), method, None) is getattr(Solver, method)
            or not callable(getattr(instance, method, None))
        ]
        options = getattr(instance, "Options", None)
        if missing or not (isinstance(options, type) and dataclasses.is_dataclass(options)):
            raise TypeError(
                f"solver {key!r} does not follow the Solver protocol: missing "
                f"{', '.join(missing) or 'an Options dataclass'}"
            )
        _REGISTRY[key.lower()] = instance
        return obj

    if solver is None:
        return register
    return register(solver)


#: The packages of ``daskpd/solvers/`` that are not methods.
_NOT_METHODS = frozenset({"driver", "common"})


def _as_solver(instance):
    """``instance`` as a :class:`Solver`: its class becomes a subclass of :class:`Solver`
    (the hooks it lacks take the base's defaults), its methods and attributes unchanged."""
    if isinstance(instance, Solver):
        return instance
    cls = type(instance)
    cls = type(cls.__name__, (cls, Solver), {"__module__": cls.__module__, "__doc__": cls.__doc__})
    instance.__class__ = cls
    return instance


def _solver_module_names() -> frozenset:
    """The method packages of ``daskpd/solvers/``: the only names :func:`get_solver` imports.

    A name typed by a user or read from a model file is looked up in this set before anything
    is imported, so it can never reach another module (``os.system``, ``driver``).
    """
    solvers_dir = os.path.dirname(os.path.dirname(__file__))
    return frozenset(
        module.name
        for module in pkgutil.iter_modules([solvers_dir])
        if not module.name.startswith("_")
        and module.name.isidentifier()
        and module.name not in _NOT_METHODS
    )


def _import_solver_modules() -> None:
    # the method packages (importing daskpd.solvers from here would be a cycle)
    for name in sorted(_solver_module_names()):
        try:
            importlib.import_module(f"daskpd.solvers.{name}")
        except ImportError:
            # A module that cannot import (a missing optional dependency) registers nothing;
            # asking for its solver by name reports the import error itself.
            continue


def available_solvers() -> list[str]:
    """Return the sorted names of every registered solver.

    Returns
    -------
    list of str
    """
    _import_solver_modules()
    return sorted(_REGISTRY)


def get_solver(name) -> Any:
    """Return the registered solver called ``name`` (case-insensitive).

    Parameters
    ----------
    name : str or Solver
        A registered name, or a solver object (returned as is).

    Returns
    -------
    Solver

    Raises
    ------
    ValueError
        If no solver has that name; the message lists the valid names. A name is imported
        only when it is one of the solver modules of this directory (nothing else is ever
        imported by name).
    """
    if not isinstance(name, str):
        if all(hasattr(name, m) for m in ("init", "run_epoch", "iterate", "Options")):
            return _as_solver(name)
        raise ValueError(f"solver must be a name or a Solver object, got {name!r}")
    key = name.lower()
    if key not in _REGISTRY and key in _solver_module_names():
        # a solver module of this directory, and only one: a missing optional dependency
        # is reported as its ImportError
        importlib.import_module(f"daskpd.solvers.{key}")
    if key not in _REGISTRY:
        valid = ", ".join(available_solvers()) or "none registered"
        if key not in _REGISTRY:
            raise ValueError(f"unknown solver {name!r}; valid solvers: {valid}")
    return _REGISTRY[key]


def make_options(solver, solver_options: Mapping | None = None):
    """Build ``solver.Options`` from keyword options.

    Parameters
    ----------
    solver : Solver
        The method (its ``Options`` frozen dataclass lists the valid names).
    solver_options : mapping or Options instance, optional
        Option values by name. An ``Options`` instance is returned unchanged.

    Returns
    -------
    options : solver.Options

    Raises
    ------
    UnknownOptionsError
        Naming every unknown option and listing the valid ones.
    ValueError
        When the ``Options`` dataclass rejects a value, or a text is given for a numeric
        option (named with its value and type, not Python's "invalid literal for int()").
    """
    options_cls = solver.Options
    if isinstance(solver_options, options_cls):
        return solver_options
    solver_options = dict(solver_options or {})
    valid = [f.name for f in dataclasses.fields(options_cls)]
    unknown = sorted(set(solver_options) - set(valid))
    if unknown:
        raise UnknownOptionsError(
            f"unknown option{'s' if len(unknown) > 1 else ''} for solver {solver.name!r}: "
            f"{', '.join(unknown)}; valid options: {', '.join(valid) or 'none'}",
            solver=solver.name,
            unknown=unknown,
        )
    declared = {field.name: str(field.type) for field in dataclasses.fields(options_cls)}
    for name, value in solver_options.items():
        kind = declared[name]
        numeric = ("int" in kind or "float" in kind) and "str" not in kind
        if numeric and isinstance(value, str):
            raise ValueError(f"option {name}={value}: {name} must be a number ({kind})")
    try:
        return options_cls(**solver_options)
    except TypeError as exc:
        raise ValueError(f"invalid options for solver {solver.name!r}: {exc}") from None


# Model files name solvers and their options; they sit below the solvers and import none of
# them, so the registry enters itself there.
use_solver_registry(sys.modules[__name__])
