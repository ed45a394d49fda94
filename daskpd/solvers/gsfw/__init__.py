"""GSFW: generalized stochastic Frank-Wolfe with a kept substitute gradient (Lu & Freund).

Solves ``min_w (1/n) sum_j loss(x_j . w, y_j) + alpha R(w)`` over a bounded ``dom R`` with
one linear minimization oracle (LMO) call per iteration and ``b`` sample gradients per
iteration. The predicted values ``s`` (one per row) replace ``Xw``; the substitute gradient
``d = (1/n) X^T loss'(s)`` is kept and updated in O(nnz of the mini-batch).

Translation between the paper and this code (once for the module):

=========================  ===============================================================
paper (GSFW)               code
=========================  ===============================================================
``beta``                   ``w`` (``beta_bar``: ``w_bar``, the answer; ``beta~``: LMO)
``w`` (dual weights)       ``z = loss'(s)``; ``w_bar`` (Theorem 3.1 certificate): ``z_bar``
``s``, ``d``               ``s``, ``d``
``eta_i``, ``alpha_i``     ``eta``, averaging step (see :mod:`daskpd.kernels.gsfw`)
``lambda``                 ``alpha``
``delta``                  ``radius``
``n`` in the step sizes    ``m = n / batch_size`` (Remark 3.4)
=========================  ===============================================================

Dask shape: a chained pass. Each epoch visits the row blocks in a shuffled order; the carry
``(d, averaged-iterate accumulator)`` flows from block task to block task, and each block
keeps its own ``s`` and lazy dual-average accumulators. A block task runs
``ceil(n_block / b)`` iterations whose mini-batches are drawn from that block's rows. With
one row block this is Algorithm 1 exactly (uniform ``b``-subsets of all rows); with several
it is the same update with block-stratified sampling (each row is still visited at the
expected rate once per epoch). The step sizes always use the global iteration count.

Regularizers: the L1 ball (vertex LMO, O(1) averaged-iterate update), ``l1`` and ``l2``
penalties (closed-form LMOs after adding the redundant ball of the paper's Example 1.1,
``||w|| <= P(0) / alpha`` resp. ``sqrt(2 P(0) / alpha)``; ``l2`` runs the strongly convex
variant of Theorem 3.2 with its linear rate), and any regularizer with an ``lmo`` method
(generalized LMO called between kernel iterations).

The code lives in private modules by job: ``_options`` (:class:`GSFWOptions`), ``_tasks``
(the Dask tasks of an epoch), ``_solver`` (:class:`GSFW`, registered as ``"gsfw"``) and
``_in_memory`` (references and baselines); the row-block reader is
:mod:`daskpd.solvers.common.blocks`.
"""

from __future__ import annotations

from daskpd.solvers.gsfw._in_memory import (
    frank_wolfe,
    gsfw_dual_mirror_descent,
    stochastic_frank_wolfe,
    theorem31_bound,
)
from daskpd.solvers.gsfw._options import GSFWOptions
from daskpd.solvers.gsfw._solver import GSFW

__all__ = [
    "GSFW",
    "GSFWOptions",
    "frank_wolfe",
    "gsfw_dual_mirror_descent",
    "stochastic_frank_wolfe",
    "theorem31_bound",
]
