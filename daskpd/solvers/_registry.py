"""The solver registry: methods by name, found by scanning this directory, and their options.

A solver module registers its class with :func:`register_solver` when it is imported;
:func:`get_solver` and :func:`available_solvers` import the solver modules on first lookup
(the modules whose names start with ``_``, such as this one, are not solvers).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
from collections.abc import Mapping
from typing import Any

__all__ = [
    "UnknownOptionsError",
    "available_solvers",
    "get_solver",
    "make_options",
    "register_solver",
]

_REGISTRY: dict[str, Any] = {}


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
        Implements :class:`Solver`; a class is instantiated without arguments.
    name : str, optional
        Overrides ``solver.name``.

    Returns
    -------
    solver : the argument, unchanged (so it works as a class decorator)
    """

    def register(obj):
        instance = obj() if isinstance(obj, type) else obj
        key = name or getattr(instance, "name", None)
        if not key or not isinstance(key, str):
            raise ValueError(f"solver {obj!r} has no name")
        missing = [
            method
            for method in ("check", "init", "run_epoch", "iterate", "state_arrays", "restore")
            if not callable(getattr(instance, method, None))
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


def _solver_module_names() -> frozenset:
    """The solver modules beside this one: the only names :func:`get_solver` imports.

    A name typed by a user or read from a model file is looked up in this set before anything
    is imported, so it can never reach another module (``os.system``, ``_registry``).
    """
    return frozenset(
        module.name
        for module in pkgutil.iter_modules([os.path.dirname(__file__)])
        if not module.name.startswith("_") and module.name.isidentifier()
    )


def _import_solver_modules() -> None:
    # the solver modules beside this one (importing the package from here would be a cycle)
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
            return name
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
