"""SPDC: stochastic primal-dual coordinate method (Zhang & Xiao, JMLR), out of core on Dask.

Translation table (paper -> code), used in every docstring of this module:

==========================  =========================================
paper                       code
==========================  =========================================
``x`` (primal)              ``w``
``y`` (dual)                ``z``
``b`` (labels)              ``y``
``lambda``                  ``alpha`` (times the strong convexity of R)
``A`` rows ``a_i``          rows of ``X``
``m`` (batch size)          ``batch_size``
``alpha`` (sampling mix)    ``mixing``
``R``, ``Rbar``             ``max_row_norm``, ``mean_row_norm``
``tau, sigma, theta``       ``tau, sigma, theta``
==========================  =========================================

The objective is ``P(w) = (1/n) sum_i loss(x_i.w, y_i) + alpha R(w)`` with a separable
regularizer of the form ``l1 |w| + (l2 / 2) w^2`` (L2, L1, elastic net, zero), and the dual
variable follows the paper's ``y`` convention (``z_i = loss'(x_i.w*, y_i)`` at the optimum).

Graph shape (DESIGN.md, "chained pass"): one epoch is one pass over the data, ``n``
iterations of ``batch_size`` rows. The row blocks are visited in a shuffled order
(:func:`block_order`: a random recursive bisection of the range of blocks, so that a
worker's consecutive blocks come in one run); the primal carry flows from block to block,
each task runs the numba kernel :func:`daskpd.kernels.spdc.spdc_rows` on its block and
returns the carry and the new dual block. Dual blocks stay where they were computed
(futures on a distributed client). A block's iterations can run in several threads of its
worker (``threads``; on a cluster, by default, the cores of its machine).

The carry stays lazy through the epoch (``_tasks.LazyCarry``: the coordinates a block's rows
do not touch are not brought up to date, Section 6 of the paper). Block ``b`` runs on the
worker that keeps its rows between epochs (the placement of
:func:`daskpd.solvers.common.scores.score_rows`), and a worker's blocks come in one run of
the order, so the carry moves between workers about once per worker, not once per block;
between two workers of one machine it moves as a file of shared memory that both map
(``_tasks.SharedLazyCarry``), not through Dask.
Sampling is stratified by block: block ``b`` receives ``n_b / batch_size`` iterations
(``n P_b`` for weighted sampling, ``P_b`` the block's probability mass), and its rows are
drawn inside the task from a seed spawned per (epoch, block): by default a fresh random
permutation of the block's rows (``sampling="shuffle"``, every row once an epoch), with
``sampling="uniform"`` or ``"weighted"`` the i.i.d. draws of the analysis (with a single row
block exactly Algorithm 1/2/3 of the paper; with several, the usual stratified variant of
them). Mini-batches do not run across workers: every
iteration needs the primal point of the previous one, so a cross-worker mini-batch would
cost one round trip per iteration; the ``batch_size`` dual steps of an iteration run in one
task.

The code lives in private modules by job: ``_options`` (:class:`SPDCOptions` and the step
sizes of Theorems 1 and 6), ``_tasks`` (the block tasks and the lazy carry they hand on) and
``_solver`` (:class:`SPDC`, registered as ``"spdc"``); the problem's translation, the row
draws and the state handling it shares with DSPDC are
:mod:`daskpd.solvers.common.coordinate`, the chained pass :mod:`daskpd.solvers.common.chain`.
This package also re-exports the private names the tests use.
"""

from __future__ import annotations

from daskpd.kernels import spdc as spdc_kernels  # noqa: F401 (patched by the tests)
from daskpd.solvers.common.chain import Carry as Carry
from daskpd.solvers.common.chain import block_order as block_order
from daskpd.solvers.common.chain import carry_of as carry_of
from daskpd.solvers.common.coordinate import StepSizes, draw_rows
from daskpd.solvers.spdc._options import (
    SPDCOptions,
    optimal_mixing,
    sampling_probabilities,
    spdc_step_sizes,
    weighted_step_sizes,
)
from daskpd.solvers.spdc._options import run_threads as run_threads
from daskpd.solvers.spdc._solver import SPDC
from daskpd.solvers.spdc._tasks import SHARED_CARRY as SHARED_CARRY
from daskpd.solvers.spdc._tasks import LazyCarry as LazyCarry
from daskpd.solvers.spdc._tasks import SharedLazyCarry as SharedLazyCarry
from daskpd.solvers.spdc._tasks import _hand_over as _hand_over
from daskpd.solvers.spdc._tasks import _lazy as _lazy
from daskpd.solvers.spdc._tasks import _spdc_block_task as _spdc_block_task

#: The class's name before the method packages had one shape.
SPDCSolver = SPDC

__all__ = [
    "SPDC",
    "SPDCOptions",
    "SPDCSolver",
    "StepSizes",
    "draw_rows",
    "optimal_mixing",
    "sampling_probabilities",
    "spdc_step_sizes",
    "weighted_step_sizes",
]
