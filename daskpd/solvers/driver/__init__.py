"""The solvers' driver: everything around a method's epochs, and nothing of any method.

Modules by job (none imports a method; a method imports :mod:`.types`, :mod:`.registry` and
:mod:`.seeds` only):

- :mod:`.run`: :func:`solve` (a plan, then its run) and :func:`run_plan` (the choice of client);
- :mod:`.plan`: :class:`Plan` and :func:`make_plan`, the one setup path (every check of a
  run, without Dask work) and :func:`resolve_solver`;
- :mod:`.loop`: :func:`loop`, the epochs of a plan: evaluation, history, callbacks, stop
  rules, checkpoints and resume, divergence checks, recovery after a lost worker;
- :mod:`.types`: the :class:`Solver` base class (the protocol a method implements, its
  optional hooks with their defaults), :class:`Iterate`, :class:`SolveResult`,
  :class:`EpochInfo` and the errors of a run;
- :mod:`.registry`: :func:`register_solver`, :func:`get_solver`, :func:`available_solvers`,
  :func:`make_options`;
- :mod:`.capabilities`: :class:`Capabilities`, what a method declares it supports;
- :mod:`.checks`: checks of single arguments; :mod:`.seeds`: the run's randomness;
  :mod:`.auto`: ``solver="auto"``; :mod:`.data`: the run's data as the driver sees it.
"""

from daskpd.solvers.driver.plan import Plan, make_plan, resolve_solver
from daskpd.solvers.driver.registry import (
    available_solvers,
    get_solver,
    make_options,
    register_solver,
)
from daskpd.solvers.driver.run import run_plan, solve
from daskpd.solvers.driver.seeds import block_seeds, epoch_seed
from daskpd.solvers.driver.types import (
    DivergenceError,
    EpochInfo,
    Iterate,
    Solver,
    SolveResult,
    TrainingFailed,
)

__all__ = [
    "DivergenceError",
    "EpochInfo",
    "Iterate",
    "Plan",
    "SolveResult",
    "Solver",
    "TrainingFailed",
    "available_solvers",
    "block_seeds",
    "epoch_seed",
    "get_solver",
    "make_options",
    "make_plan",
    "register_solver",
    "resolve_solver",
    "run_plan",
    "solve",
]
