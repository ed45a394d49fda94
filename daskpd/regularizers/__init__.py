"""Regularizers and constraint sets: value, prox, conjugate, LMO.

The objective is ``P(w) = (1/n) sum_i loss(x_i . w, y_i) + alpha R(w)``; every method here is
about ``R`` alone. For ``alpha R`` use ``prox(v, step * alpha)``, ``alpha * conjugate(v / alpha)``
and ``lmo(c / alpha)`` (``argmin_w c.w + alpha R(w) = argmin_w (c / alpha).w + R(w)``).

Separable regularizers (:class:`L2`, :class:`L1`, :class:`ElasticNet`, :class:`Zero`) carry the
``code`` and ``params`` by which kernels reach the same scalar ops in
:mod:`daskpd.kernels.scalar`; their methods are vectorized wrappers over those ops. The others
(:class:`GroupLasso`, :class:`L1Inf`, :class:`TraceNorm`, :class:`L1Ball`, :class:`L2Ball`,
:class:`Box`) act on the whole vector in NumPy and have ``code = -1``.

Constraint sets are indicators (``R = 0`` on the set, ``+inf`` outside), so ``alpha R = R`` for
every ``alpha > 0``. Membership is tested with a relative tolerance of ``1e-9`` so that points a
solver has just projected are not rejected for rounding; indicator conjugates (the dual-norm balls
of :class:`L1`, :class:`GroupLasso`, :class:`L1Inf`, :class:`TraceNorm`) use ``1e-12``.

Every public name is imported from here. The code lives in private modules, one per kind:
``_base`` (:class:`Regularizer`, the tolerances, :func:`project_l1_ball`), ``_separable``,
``_structured`` (group norms and the trace norm) and ``_sets`` (constraint sets).
"""

from __future__ import annotations

from daskpd._by_name import resolve_by_name
from daskpd.regularizers._base import DUAL_TOL as DUAL_TOL
from daskpd.regularizers._base import SET_TOL as SET_TOL
from daskpd.regularizers._base import Regularizer, project_l1_ball
from daskpd.regularizers._separable import L1, L2, ElasticNet, Zero
from daskpd.regularizers._sets import Box, L1Ball, L2Ball
from daskpd.regularizers._structured import GroupLasso, L1Inf, TraceNorm

__all__ = [
    "L1",
    "L2",
    "Box",
    "ElasticNet",
    "GroupLasso",
    "L1Ball",
    "L1Inf",
    "L2Ball",
    "Regularizer",
    "TraceNorm",
    "Zero",
    "get_regularizer",
    "project_l1_ball",
]

_REGULARIZERS = {
    "l2": L2,
    "ridge": L2,
    "l1": L1,
    "lasso": L1,
    "elasticnet": ElasticNet,
    "elastic_net": ElasticNet,
    "zero": Zero,
    "none": Zero,
}


def get_regularizer(name_or_obj) -> Regularizer:
    """Resolve a regularizer name or pass a regularizer instance through.

    Names: ``"l2"`` (``"ridge"``), ``"l1"`` (``"lasso"``), ``"elasticnet"``, ``"zero"``
    (``"none"``); case-insensitive, ``-`` or spaces may replace ``_``. Regularizers that need
    parameters (groups, shape, radius, bounds) must be passed as
    instances.

    Raises
    ------
    ValueError
        If the name is unknown or the argument is neither a string nor a regularizer.
    """
    return resolve_by_name(
        name_or_obj,
        Regularizer,
        _REGULARIZERS,
        "regularizer",
        "a Regularizer instance (GroupLasso, L1Inf, TraceNorm, L1Ball, L2Ball, Box)",
    )
