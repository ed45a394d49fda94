"""Pdprox: the primal-dual prox method for non-smooth losses with non-smooth regularizers.

Solves ``min_w max_{a in Q} (1/n) sum_i f(x_i . w, a_i; y_i) + alpha R(w)`` (Yang, Mahdavi,
Jin, Zhu) where each loss is the maximum of a bilinear function over a small dual domain
(see :mod:`daskpd.kernels.pdprox`) and ``R`` only needs a prox: group lasso, l1/l-inf, trace
norm, L1, L2^2, ... (``regularizer.prox``). The rate is O(1/T) for the averaged iterates.

Translation between the paper and this code (once for the module):

========================  ====================================================================
paper (Pdprox)            code
========================  ====================================================================
``alpha_t``               ``dual`` (shape (n, DUAL_WIDTH)); contract dual ``z = coef(dual)``
``beta_t``                ``aux`` of Algorithm 1 (the second dual copy)
``u_t``                   ``w_aux`` of Algorithm 2 (the second primal copy)
``lambda``                ``alpha``
``gamma``                 ``tau = sigma = gamma`` (single step); ``tau``, ``sigma`` (two steps)
``c``                     ``lipschitz_sq = kappa ||X||_2^2 / n^2``
``m`` (budget)            ``budget``
Algorithm 1 / 2 / 3       ``algorithm="dual" / "primal" / "dual-simplified"``
double-dual / -primal     ``form="double-dual" / "double-primal"`` (Section 4.4, Appendix C)
========================  ====================================================================

Implementation forms (the digest's corrected Section 4.4 formulas):

- ``dual`` (Algorithm 1), double-dual: ``a_t = P[b_{t-1} + s G_a(w_{t-1})]``,
  ``w_t = prox(w_{t-1} - t G_w(a_t))``, ``b_t = P[b_{t-1} + s G_a(w_t)]``.
- ``dual-simplified`` (Algorithm 3), double-dual: the same ``a_t``, ``w_t`` with the
  unprojected ``b_t = a_t + s (G_a(w_t) - G_a(w_{t-1}))``; double-primal (eq. 22):
  ``a_t = P[a_{t-1} + s G_a(2 w_{t-1} - w_{t-2})]``, ``w_t = prox(w_{t-1} - t G_w(a_t))``.
- ``primal`` (Algorithm 2), double-primal: ``w_t = prox(u_{t-1} - t G_w(a_{t-1}))``,
  ``a_t = P[a_{t-1} + s G_a(w_t)]``, ``u_t = w_t + t (G_w(a_{t-1}) - G_w(a_t))``; double-dual
  (eq. 21): ``w_t = prox(w_{t-1} - t G_w(2 a_{t-1} - a_{t-2}))``.

Dask shape: a map-reduce over row blocks per iteration. A block task computes ``X_b w``, the
dual update of its rows and its partial ``X_b^T coef(dual)``; a tree reduction sums the
partials and one task applies the prox. An epoch chains ``iterations_per_epoch`` iterations
in one low-level graph and is one Dask compute; within it the dual blocks pass from task to
task, and the epoch's result brings them back (7 floats per row) for the next epoch and for
checkpoints. The dual budget
(Section 5.5) needs a global threshold per projection: the block tasks are split at that point
and a threshold task (Lemma 13) sits between them.

The code lives in private modules by job: ``_options`` (:class:`PdproxOptions`,
:func:`loss_spec`, the step sizes), ``_tasks`` (the block primitives), ``_graph`` (the state
and the iteration builder, :func:`estimate_spectral_norm`), ``_solver`` (:class:`Pdprox`,
registered as ``"pdprox"``) and ``_in_memory`` (:func:`pdprox` and the baselines).
"""

from __future__ import annotations

from daskpd.solvers.pdprox._graph import estimate_spectral_norm
from daskpd.solvers.pdprox._in_memory import (
    PdproxResult,
    fobos,
    pdprox,
    pdprox_objective,
    subgradient_descent,
)
from daskpd.solvers.pdprox._options import PdproxOptions
from daskpd.solvers.pdprox._options import loss_spec as loss_spec
from daskpd.solvers.pdprox._solver import Pdprox

__all__ = [
    "Pdprox",
    "PdproxOptions",
    "PdproxResult",
    "estimate_spectral_norm",
    "fobos",
    "pdprox",
    "pdprox_objective",
    "subgradient_descent",
]
