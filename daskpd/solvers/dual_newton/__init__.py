"""Projected Newton-CG on the hinge loss's dual, data-parallel over row groups
(``solver="dual_newton"``).

Problem: ``P(w) = (1/n) sum_i c_i max(0, 1 - y_i x_i . w) + (alpha/2) ||w||^2`` (the linear
SVM), solved through its dual ``max_a D(a) = (1/n) sum_i c_i a_i - (alpha/2) ||w(a)||^2``
over the box ``0 <= a_i <= 1``, with ``w(a) = X^T (c y a) / (alpha n)``: a quadratic over a
box. The method is Bertsekas' projected Newton method ("Projected Newton methods for
optimization problems with simple constraints", SIAM J. Control Optim. 1982) with the
Newton system solved by preconditioned conjugate gradients on the free rows, as in the
bound-constrained TRON of Lin and More (SIAM J. Optim. 1999). Translation: the SVM dual's
``alpha`` (liblinear, Hsieh et al. 2008) -> ``a``, its ``C`` -> ``1 / (alpha n)`` with the
objective scaled by ``n``.

Why this method for several row groups. Every iterate is an exact global quantity: each
product with ``X^T`` is the sum of the groups' shares, so the iterates do not depend on the
number of groups ``K`` (up to the rounding of those sums), and neither do the rounds. The
dual coordinate method (CoCoA+) instead adds ``K`` local steps that, on rows sharing many
features, point nearly the same way and must be scaled down by ``K``; on the splice-like
sets it stalls on the hinge loss from ``K = 2`` (``shared/notes/many-machines.md``). The
hinge loss has no curvature for a primal Newton method (``tron``); its dual has a constant
Hessian, ``diag(c y) X X^T diag(c y) / (alpha n)``.

The start (a cold one): each worker makes a pass of dual coordinate descent on the rows of
its groups, one local problem (CoCoA+'s, with the safe ``sigma'`` = the workers holding
groups: a linear SVM on those rows alone; no communication), the workers' points make
``a``, and one round sums their images into ``w(a)``. From ``a = 0`` every row would be
free, and the first Newton steps would read all of them many times; after the pass most
rows are at the bound where they end. The start depends on the workers; the Newton steps
from a given start do not depend on ``K``.

An epoch is one Newton step:

- the gradient round at ``w(a)``: each group computes its margins (a pass), its gradient
  ``g_i = c_i (y_i x_i . w - 1)``, its free rows (those not held at a bound by the
  gradient) and the CG's first preconditioned residual on them, and its share of that
  direction's image ``X_F^T (c y z)``; the certificate's sums ride along: ``P(w(a))`` and
  ``D(a)`` are exact for the problem asked (``a`` is in the box), so the gap is certified;
- the CG rounds, one reduction each: the home (the worker of group 0) turns the summed share
  into the direction's image ``u`` and its step length, and sends ``u`` back; each group
  computes ``H p = c y (X_F u)`` on its free rows and updates its CG vectors, which never
  leave it. On nearly separable data the free rows are a few percent of all, so a CG round
  reads a few percent of the nonzeros (the diagonal ``c_i^2 ||x_i||^2 / (alpha n)``
  preconditions it). The gradient round copies each group's free rows out into a block of
  their own, numbered on the columns they touch, so that a CG round also costs only those
  columns (a group's own columns are most of the run's on the splice-like sets);
- the projected line search: ``a <- clip(a + t d, 0, 1)`` on the free rows and the sum of the
  groups' ``X^T (c y delta)``, Armijo's test on the home; the trial at ``t = 1`` and the
  gradient round at it run in one graph (two reductions).

Two exceptions. When the free rows are few (at most ``home_cg_nnz`` nonzeros over all
groups), the step runs whole on the home: the groups send it their free rows once, it runs
the CG and the line search on them (the same steps), sends each group its change of ``a``,
and the gradient round at the new point follows in the same graph: two rounds a step where
each CG step and trial would be one. And after a step that frees many rows at once (more
than ``burst`` times the fewest free nonzeros so far: a step that moved ``w`` far), the
next epoch is a local pass of every group from the current point, as at the start, which
returns most of them to their bound for two rounds and a pass.

A round runs one task a worker, over the groups it holds
(:func:`daskpd.solvers.common.resident.bundles`), their shares summed there into one; the
tree's last sum is the home's task that uses it. More groups than workers then change the
order of the sums, not the number of tasks the scheduler runs.

The code lives in private modules by job: ``_options`` (:class:`DualNewtonOptions` and the
run's constants), ``_tasks`` (the pure tasks on the owners and on the home) and ``_solver``
(:class:`DualNewton`, registered as ``"dual_newton"``, and its graphs). The kernels are in
:mod:`daskpd.kernels.dual_newton`; the resident groups and the tree are shared with
``tron`` (:mod:`daskpd.solvers.common.resident`).
"""

from __future__ import annotations

from daskpd.solvers.dual_newton._options import DualNewtonOptions
from daskpd.solvers.dual_newton._solver import DualNewton

__all__ = ["DualNewton", "DualNewtonOptions"]
