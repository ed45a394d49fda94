"""``solver="auto"``: the method that reaches a certified model first for a problem.

The choice, from the measurements in BENCHMARKS.md (time to ``(1 + 1e-3) P*`` on the user's
wall clock), and the reasons where nothing was measured:

* L2 with the hinge, squared hinge, smoothed hinge, logistic or squared loss: ``cocoa``
  (dual coordinate ascent with its certificate from the same pass);
* absolute and epsilon-insensitive losses: Pdprox (made for a non-smooth loss with a
  non-smooth regularizer); for weighted rows with the absolute loss, DSO (Pdprox has no row
  weights);
* hinge with another regularizer: DSO (the saddle-point method built for it);
* other smooth losses with a strongly convex regularizer (elastic net with ``l1_ratio < 1``):
  SPDC (linear convergence);
* smooth losses with a regularizer that is not strongly convex (L1): ``batch``, because SPDC
  and DSPDC solve those only after a perturbation (an approximate answer).
"""

from __future__ import annotations

#: Losses the dual coordinate solver takes (with the L2 regularizer).
COCOA_LOSSES = frozenset({"hinge", "squared_hinge", "smooth_hinge", "logistic", "squared"})


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


def auto_solver(loss, regularizer, *, weighted=False) -> str:
    """The solver ``solver="auto"`` picks for a (loss, regularizer) pair (module docstring).

    Parameters
    ----------
    loss : str or daskpd.losses object
    regularizer : str or daskpd.regularizers object
    weighted : bool, default=False
        Whether the rows carry weights (``sample_weight`` or ``class_weight``).

    Returns
    -------
    solver : str
    """
    name = loss_name(loss)
    if name in COCOA_LOSSES and _is_l2(regularizer):
        return "cocoa"
    if name == "hinge":
        return "dso"
    if name == "absolute":
        return "dso" if weighted else "pdprox"
    if name == "epsilon_insensitive":
        return "pdprox"
    if float(getattr(regularizer, "strong_convexity", 0.0)) > 0:
        return "spdc"
    return "batch"
