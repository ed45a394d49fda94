"""Newton with conjugate gradients, data-parallel over row groups (``solver="tron"``).

Lin, Weng and Keerthi, "Trust Region Newton Method for Large-Scale Logistic Regression",
JMLR 2008, and liblinear's later Newton method with a line search (``-s 0``, ``-s 2``);
distributed as in MPI-LIBLINEAR and Spark LIBLINEAR (Zhuang, Chin, Juan and Lin, PAKDD 2015);
the diagonal preconditioner of Hsia, Chiang and Lin (ACML 2018). Translation (paper ->
code): ``C`` -> ``1 / (alpha n)`` (the objective is ours times ``1 / alpha``: the same
steps), ``s`` -> the step, ``D`` -> the rows' curvatures ``c_i loss''``.

Problem: ``P(w) = (1/n) sum_i c_i loss(x_i . w, y_i) + (alpha/2) ||w||^2`` with a loss that
has a (generalized) second derivative: logistic, squared hinge, smoothed hinge, squared.

Why this method for several row groups. Every iterate is an exact global quantity: the
gradient and each Hessian-vector product are sums over the groups, so the iterates do not
depend on the number of groups ``K`` (up to the rounding of those sums), and neither do the
rounds. A data-parallel dual method (CoCoA+) adds ``K`` local steps that, on data whose rows
share many features, point nearly the same way, and must scale them down by ``K``
(``shared/notes/many-machines.md``).

Graph shape (DESIGN.md's map-reduce). The groups are read once, each by its owner, and kept
there with their margins ``X_k w``; a group larger than its share of the owner's memory is
streamed instead (``TronOptions.rows``): the owner keeps its per-row vectors and every pass
reads its rows again from the store, a chunk of row blocks at a time
(:func:`daskpd.solvers.common.resident.row_pieces`), the same sums in the same row order.
A round is one graph: each group's task on its owner
computes its share (the gradient's ``X_k^T z_k`` with the preconditioner's diagonal, or a
Hessian-vector product ``X_k^T (curv_k * (X_k v))``), the shares are summed pairwise up a
tree whose nodes run where their first group lives (groups on one worker are summed before
anything moves), and one task on ``w``'s home (the worker of group 0) does the vector
algebra. Only scalars reach the driver. An epoch is one Newton step:

- its CG steps, one round each (liblinear's stopping rule on the quadratic model);
- the line search: one round computes ``X_k s`` on every group (kept there), then each step
  length tried is a round of numbers only (``sum_i c_i loss(u_i + t (X s)_i)``; the
  regularizer's part from ``w.w``, ``w.s`` and ``s.s``), Armijo's rule with halving;
- the gradient round at ``w + t s``, from the margins ``u + t X s`` (one read of the
  nonzeros, for ``X^T z``).

The certificate comes with the gradient round: the dual point read off the margins,
``z_i = c_i loss'(x_i . w)``, has ``w(z) = w - grad P(w) / alpha``, so ``P(w)`` and ``D(z)``
need scalar sums only.

The hinge loss is not supported: its smoothing with continuation was tried (a quadratic and a
softplus smoothing) and, on the splice-like sets, needed hundreds of rounds without reaching
``(1 + 1e-3) P*`` (BENCHMARKS.md, "Many machines").

The code lives in private modules by job: ``_options`` (:class:`TronOptions` and the run's
constants), ``_tasks`` (the pure tasks on the owners and on the home) and ``_solver``
(:class:`Tron`, registered as ``"tron"``, and its graphs).
"""

from __future__ import annotations

from daskpd.solvers.tron._options import TronOptions
from daskpd.solvers.tron._solver import Tron

__all__ = ["Tron", "TronOptions"]
