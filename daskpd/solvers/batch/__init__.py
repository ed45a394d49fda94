"""The batch baseline: accelerated proximal gradient (FISTA) over row blocks.

Full-gradient method for smooth losses with any regularizer that has a prox; it stands in for
the batch solver (BMRM) of the DSO paper's comparisons. One epoch is one map-reduce pass over
the row blocks (one Dask compute): every block returns its partial loss sums and partial
gradients ``X_b^T (c_b * loss'(X_b v, y_b))`` and a fixed binary tree adds them, so the sum
order, and hence every bit of the result, is independent of which worker ran which block.

Method. With ``f(w) = (1/n) sum_i c_i loss(x_i . w, y_i)`` (gradient Lipschitz constant
``L <= smoothness * lambda_max(X^T C X) / n``) and ``g = alpha * R``::

    x_{k+1} = prox_{g / L}(y_k - grad f(y_k) / L)
    y_{k+1} = x_{k+1} + beta_k (x_{k+1} - x_k)

with FISTA's ``beta_k = (t_k - 1) / t_{k+1}`` (Beck & Teboulle 2009), or, when ``g`` is
``mu``-strongly convex, ``beta = (1 - sqrt(q)) / (1 + sqrt(q))``, ``q = (mu / L) / (1 + mu / L)``
(Chambolle & Pock 2016, Alg. 5), plus the adaptive restart of O'Donoghue & Candes (2015):
momentum is reset when ``(y_k - x_{k+1}) . (x_{k+1} - x_k) > 0``.

``L`` starts from a power-iteration estimate and is checked by backtracking without extra
passes: each pass evaluates, besides the gradient at the next extrapolated point, the loss at
the pending candidate ``x_{k+1}``; when the sufficient-decrease condition
``f(x_{k+1}) <= f(y_k) + grad f(y_k) . (x_{k+1} - y_k) + L/2 |x_{k+1} - y_k|^2`` fails, the
candidate is rejected, ``L`` grows by ``backtrack_factor`` and the candidate is recomputed
(that pass is spent, which happens a handful of times at most).

The code lives in private modules by job: ``_options`` (:class:`BatchOptions`), ``_tasks``
(the map-reduce pass) and ``_solver`` (:class:`Batch`, registered as ``"batch"``).
"""

from __future__ import annotations

from daskpd.solvers.batch._options import BatchOptions
from daskpd.solvers.batch._solver import Batch

#: The class's name before the method packages had one shape.
BatchGradient = Batch

__all__ = ["Batch", "BatchGradient", "BatchOptions"]
