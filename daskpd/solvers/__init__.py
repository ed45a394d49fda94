"""Primal-dual solvers over Dask blocks: one module per method plus the shared driver.

The entry point is :func:`solve`; methods register themselves with :func:`register_solver`
(see :mod:`daskpd.solvers._driver` for the protocol a method implements) and are found by
name with :func:`get_solver`. Solver modules are imported on first lookup, so importing
this package stays cheap.
"""

from daskpd.solvers._driver import (
    DivergenceError,
    EpochInfo,
    Iterate,
    Solver,
    SolveResult,
    TrainingFailed,
    available_solvers,
    block_seeds,
    epoch_seed,
    get_solver,
    load_model,
    make_options,
    register_solver,
    solve,
)

__all__ = [
    "DivergenceError",
    "EpochInfo",
    "Iterate",
    "SolveResult",
    "Solver",
    "TrainingFailed",
    "available_solvers",
    "block_seeds",
    "epoch_seed",
    "get_solver",
    "load_model",
    "make_options",
    "register_solver",
    "solve",
]
