"""``solver="auto"``: the method that reaches a certified model first for a problem.

The choice, from the measurements in BENCHMARKS.md (time to ``(1 + 1e-3) P*`` on the user's
wall clock), and the reasons where nothing was measured:

* L2 with the hinge, squared hinge, smoothed hinge, logistic or squared loss: ``cocoa``
  (dual coordinate ascent with its certificate from the same pass) on one row group;
* the same with several row groups (``grid=K``, ``K > 1``) and a loss whose curvature
  never vanishes (logistic, squared): ``tron``, whose rounds do not grow with ``K`` where
  CoCoA+'s do (BENCHMARKS.md, "Many machines"); the hinge loss: ``dual_newton`` (projected
  Newton on its dual, whose rounds do not grow with ``K`` either); the squared and smoothed
  hinge (primal Newton steps crawl on them on nearly separable data, measured there) stay
  with ``cocoa``;
* absolute and epsilon-insensitive losses: Pdprox (made for a non-smooth loss with a
  non-smooth regularizer); for weighted rows with the absolute loss, DSO (Pdprox has no row
  weights);
* hinge with another regularizer: DSO (the saddle-point method built for it);
* other smooth losses with a strongly convex regularizer (elastic net with ``l1_ratio < 1``):
  SPDC (linear convergence);
* smooth losses with a regularizer that is not strongly convex (L1): ``batch``, because SPDC
  and DSPDC solve those only after a perturbation (an approximate answer).

Each rule names its solvers in order of preference; the first whose declared
:class:`~daskpd.solvers.driver.capabilities.Capabilities` cover the loss, the regularizer and
the row weights is taken (so weighted rows with the absolute loss go to DSO), and when none
does, the first, whose capabilities then refuse the run naming the parameter. The plan
(:mod:`daskpd.solvers.driver.plan`) calls this on the resolved loss and regularizer objects,
so a name and its object choose alike.
"""

from __future__ import annotations

from daskpd.solvers.driver.capabilities import BUILTIN_LOSSES, BUILTIN_REGULARIZERS


def loss_name(loss) -> str:
    """Canonical name of a loss given as a string or as a ``daskpd.losses`` object."""
    if isinstance(loss, str):
        return loss.lower().replace("-", "_")
    return str(getattr(loss, "name", type(loss).__name__)).lower()


def _is_l2(regularizer) -> bool:
    if isinstance(regularizer, str):
        return regularizer.lower() == "l2"
    from daskpd.regularizers import L2

    return type(regularizer) is L2


#: The losses ``auto`` runs with Newton steps on several row groups: their curvature never
#: vanishes, so a step's quadratic model holds on every row (BENCHMARKS.md, "Many machines")
_NEWTON_LOSSES = ("logistic", "squared")
#: ... and with Newton steps on the dual: the hinge, whose dual is a quadratic over a box
_DUAL_NEWTON_LOSSES = ("hinge",)


def auto_solver(loss, regularizer, *, weighted=False, grid=None) -> str:
    """The solver ``solver="auto"`` picks for a (loss, regularizer) pair (module docstring).

    Parameters
    ----------
    loss : str or daskpd.losses object
    regularizer : str or daskpd.regularizers object
    weighted : bool, default=False
        Whether the rows carry weights (``sample_weight`` or ``class_weight``).
    grid : int, optional
        The row groups asked for; more than one prefers a method whose rounds do not grow
        with them.

    Returns
    -------
    solver : str
    """
    name = loss_name(loss)
    regularizer_name = _regularizer_name(regularizer)
    if grid is not None and int(grid) > 1 and _is_l2(regularizer):
        if name in _NEWTON_LOSSES:
            return "tron"
        if name in _DUAL_NEWTON_LOSSES:
            return "dual_newton"
    for candidate in _preferences(name, regularizer, regularizer_name):
        if _covers(candidate, name, regularizer_name, weighted):
            return candidate
    # None covers the run: the first choice, whose capabilities then refuse it with the
    # parameter named (e.g. row weights with the epsilon-insensitive loss).
    return _preferences(name, regularizer, regularizer_name)[0]


def _preferences(name, regularizer, regularizer_name) -> tuple:
    """The solvers to try, fastest first (module docstring)."""
    if _is_l2(regularizer) and name in _declared("cocoa").losses:
        return ("cocoa",)
    if name == "hinge":
        return ("dso",)
    if name == "absolute":
        return ("pdprox", "dso")
    if name == "epsilon_insensitive":
        return ("pdprox",)
    if float(getattr(regularizer, "strong_convexity", 0.0)) > 0:
        return ("spdc",)
    return ("batch",)


def _declared(solver):
    from daskpd.solvers.driver.registry import get_solver

    return get_solver(solver).capabilities


def _covers(solver, loss, regularizer, weighted) -> bool:
    """Whether the solver's declared capabilities cover the run (a name not built in is
    left to the solver's own check)."""
    capabilities = _declared(solver)
    if weighted and not capabilities.weighted:
        return False
    return (loss not in BUILTIN_LOSSES or loss in capabilities.losses) and (
        regularizer not in BUILTIN_REGULARIZERS or regularizer in capabilities.regularizers
    )


def _regularizer_name(regularizer) -> str:
    if isinstance(regularizer, str):
        return regularizer.lower()
    return str(getattr(regularizer, "name", type(regularizer).__name__)).lower()
