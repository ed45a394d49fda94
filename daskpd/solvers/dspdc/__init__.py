"""DSPDC: doubly stochastic primal-dual coordinate method (Yu, Lin & Yang), on Dask and on
factorized or matrix data in memory.

Translation table (paper -> code), used in every docstring of this module:

==========================  =========================================
paper                       code
==========================  =========================================
``x`` (primal, ``p``)       ``w`` (``n_features``)
``y`` (dual, ``n``)         ``z`` (``n_samples``)
``b`` (labels)              ``y``
``lambda``                  ``alpha`` (times the strong convexity of R)
``m`` (dual sample size)    ``batch_size``
``q`` (primal sample size)  ``n_coords``
``Lambda`` (eq. (11))       ``lipschitz``
``A = U V``                 ``X`` or ``(U, V)``
``tau, sigma, theta``       ``tau, sigma, theta``
==========================  =========================================

Three entry points:

- :class:`DSPDC` (``solver="dspdc"`` in :func:`daskpd.solve`): Algorithm 1 on explicit
  data, one epoch = one pass of ``n`` sampled rows as a chained graph over the row blocks
  (same shape as SPDC: the carry ``(w, w_prev, u)`` flows through the blocks, dual blocks
  stay on the workers). Rows are sampled within the current block (stratified, as for
  SPDC); the ``n_coords`` primal coordinates are sampled uniformly from all features.
- :func:`solve_factorized`: Algorithm 2 for ``X = U V`` in memory; the per-iteration cost
  is O(rank (m + q)), independent of ``n`` and ``p``. The factors are small by
  construction, and the method is sequential, so it runs as one numba loop.
- :func:`solve_matrix_risk`: the block version of Section 5.2 (PSD matrix blocks, one
  eigendecomposition per sampled block).

The paper's ``Lambda`` (a bound on ``max ||A_I^J||_2^2`` over ``m x q`` submatrices) sets the
step sizes. It is exposed as ``lipschitz``: ``"safe"`` (default) is the provable bound
``min(m Lambda_{q,1}, m q max A_ij^2)``; ``"heuristic"`` is the paper's practical suggestion
read as ``m q R^2 / p`` (the printed ``m q R^2 Lambda_{p,1} / p`` is dimensionally
inconsistent; see the digest), which can fall below the true constant; a float is used as
given. ``lipschitz_factor`` multiplies any of them.

The code lives in private modules by job: ``_options`` (:class:`DSPDCOptions`, the step sizes
and ``Lambda``), ``_tasks`` (the block task of an epoch), ``_solver`` (:class:`DSPDC`,
registered as ``"dspdc"``) and ``_in_memory`` (factorized data and matrix risk); what it
shares with SPDC is :mod:`daskpd.solvers.common.coordinate` and
:mod:`daskpd.solvers.common.chain`.
"""

from __future__ import annotations

from daskpd.solvers.dspdc._in_memory import (
    FactorizedResult,
    MatrixResult,
    factorized_gap,
    matrix_gap,
    solve_factorized,
    solve_matrix_risk,
)
from daskpd.solvers.dspdc._options import DSPDCOptions, dspdc_step_sizes, lipschitz_constant
from daskpd.solvers.dspdc._solver import DSPDC

#: The class's name before the method packages had one shape.
DSPDCSolver = DSPDC

__all__ = [
    "DSPDC",
    "DSPDCOptions",
    "DSPDCSolver",
    "FactorizedResult",
    "MatrixResult",
    "dspdc_step_sizes",
    "factorized_gap",
    "lipschitz_constant",
    "matrix_gap",
    "solve_factorized",
    "solve_matrix_risk",
]
