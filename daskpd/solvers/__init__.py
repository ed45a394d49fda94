"""Primal-dual solvers over Dask blocks: the driver, the pieces methods share, one package a method.

The entry point is :func:`solve`; methods register themselves with :func:`register_solver`
(see :class:`daskpd.solvers.driver.types.Solver` for the protocol a method implements) and
are found by name with :func:`get_solver`. ``driver/`` runs a plan and imports no method;
``common/`` holds what several methods share; every other package is one method. Method
packages are imported on first lookup, so importing this package stays cheap.
"""

from daskpd.solvers.driver import (
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
    "make_options",
    "register_solver",
    "solve",
]
