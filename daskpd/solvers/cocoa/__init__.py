"""CoCoA+: data-parallel dual coordinate ascent whose group updates are added.

Ma, Smith, Jaggi, Jordan, Richtarik and Takac, "Adding vs. Averaging in Distributed
Primal-Dual Optimization", ICML 2015; Smith, Forte, Ma, Takac, Jordan and Jaggi, "CoCoA: A
General Framework for Communication-Efficient Distributed Optimization", JMLR 2018.

Problem: ``P(w) = (1/n) sum_i c_i loss(x_i . w, y_i) + (alpha/2) ||w||^2`` (L2 only; ``c_i``
the row weights) and its dual in ``z`` (the project's sign, DESIGN.md), kept consistent with
``w = -X^T z / (alpha n)``. Translation table (paper -> code): ``lambda`` -> ``alpha``,
``alpha_i`` -> ``-z_i``, ``K`` -> ``grid``, ``sigma'`` -> ``sigma``, ``gamma`` -> 1 (added
updates), ``P_k`` -> row group ``k``, ``H`` -> ``local_passes`` passes over the group.

Row groups are the row groups of the dataset's ``grid x grid`` layout (the bounds DSO uses;
computed by the same function when the layout is not stored, since CoCoA needs no tiles).
Graph shape (DESIGN.md's map-reduce): round ``t`` (= epoch ``t``) is one graph. Task ``k``
(two tasks on a client, below), on the worker that owns group ``k``, runs one local pass of
:func:`daskpd.kernels.cocoa.cocoa_pass` over the group's rows in a random order (drawn in
the task from ``block_seeds(epoch_seed(seed, t), grid)[k]``), then, for the hinge losses,
passes with shrinking over the rows that have not settled at a bound
(:func:`daskpd.kernels.cocoa.shrunk_passes`), from a local copy of ``w``
on the columns the group uses, and returns the group's new dual block, its update ``dw_k``
(on those columns only: on wide sparse data a fraction of ``n_features``) and the
certificate sums. Then every worker that owns a group adds the ``dw_k`` (in group order, so
every copy is the same bits) to its own copy of ``w``: the next round's tasks read their
worker's copy, and ``w`` never passes through the client inside a round. The group's rows
are read once, by its owner, and stay there (a future) for the whole run; dual blocks never
leave their worker. Rows larger than the owner's memory are streamed instead
(``CocoaOptions.rows``): every round reads them again in chunks, and for the hinge losses
keeps the rows still active for its shrunk passes (``_tasks._streamed_round``).

The certificate comes out of the pass: while it computes ``x_i . v`` for the step, the
kernel also computes ``x_i . w_t`` (``w_t`` the round's start, read only) and sums
``c_i loss(x_i . w_t)`` and ``c_i loss*(z_i / c_i)`` at the round's start. With ``||w_t||^2``
these are the exact ``P(w_t)`` and ``D(z_t)``: after round ``t`` the solver reports the
start point of that round, ``(w_t, z_t)``, with its primal and dual, so the answer of a run
is always a certified point, one round behind the newest ``w``.

On a client a group's round is two tasks on its owner: the full passes
(:func:`_tasks._pass_task`, whose output stays there), then the shrunk passes and the step
(:func:`_tasks._shrunk_task`). The driver's round ends when the full passes' sums are in:
it reports the certificate of ``(w_t, z_t)`` while the shrunk passes and the sum of the
steps run on, and the next round's tasks wait for them on the workers. So a certificate
reaches the user a round's shrunk passes sooner (BENCHMARKS.md, CoCoA+), epoch 1 is the
first full pass, and each later epoch the previous round's
shrunk passes and this round's full pass. A run that ends at a round waits for that round's
shrunk passes (:meth:`Cocoa.settle`; their result is not used), so it leaves the workers
idle; a run stopped by ``tol`` skips them (:meth:`Cocoa.stop_at_gap`).

With one group and ``sigma = 1`` a round is one epoch of serial dual coordinate ascent
(liblinear's method) on the same bits, followed by its shrunk passes: liblinear's loop,
whose full passes (where it "unshrinks") here also certify the round's start. One change
to that loop: the full pass keeps the gradient of every row it leaves at a bound, and the
rows liblinear's test would drop at once are not handed to the shrunk passes
(:func:`daskpd.kernels.cocoa.shrink_candidates`). liblinear's first pass after unshrinking
reads every row again only to drop most of them (on the splice-like sets about 97% of the
rows settle at ``a = 0``): that read was most of a later round's shrunk passes
(BENCHMARKS.md, CoCoA+). In a round from ``z = 0`` that
test has no threshold (no row was above 0 before its step); there a row still at 0 whose
margin was at least ``CocoaOptions.cold_margin`` (2) at its visit is left out instead:
round 1's shrunk passes read a third of the nonzeros, and time to a certified ``1e-3`` fell
(BENCHMARKS.md).

Safe screening (the hinge losses, rows kept; ``CocoaOptions.screening``). The shrunk
passes are a heuristic and every round's full pass still reads every row, which from the
third round on was most of a round. But a row at ``z_i = 0`` whose margin at the round's
start is above 1 adds nothing to the certificate and takes no step there, and its margin
moves by at most ``||x_i|| ||w_{t+1} - w_t||`` a round. The group keeps a lower bound of
every row's margin (exact where the pass last read it, less those moves since), and the
full pass leaves out the rows proven inactive: the certificate is the same, to rounding.
Round 2's inherited bounds prove nothing (they are the margins at ``w_0 = 0`` less
``||x_i|| ||w_1||``), so before the pass a read-only pass refreshes the bounds of the rows
at ``z_i = 0`` that are not yet left out (``_tasks._refresh_margins``; about half a full
pass's time per nonzero). On splice-like sets most nonzeros are left out from round 2 on,
and the certificates of rounds 2 and 3 come sooner (BENCHMARKS.md). The bounds travel in the
round's output with ``z``, and in checkpoints, so that a resumed run leaves out the rows
the uninterrupted one does. With several groups the next ``w`` is summed on each group's
home, not by the group's task: there a small task takes ``||w_{t+1} - w_t||`` on the
group's columns (its rows use no others, so that bounds their margins' moves) and the
group's bounds are shifted by it on the owner (``_tasks._column_shift``,
``_tasks._shifted_bounds``); those bounds travel apart from the round's tuples (a hinge
round with two groups takes half the time it took without, BENCHMARKS.md, CoCoA+).

Convergence. The dual rises every round for ``sigma >= grid``; what the groups gain is
bought with the safe ``sigma = grid``, which halves (for two groups) every step in the
directions a group has to itself. Rounds therefore grow faster than ``grid``, slowly on
sparse data whose groups share few features, and far faster on data whose rows share many
features (splice-like windows, a bias column) with the hinge loss; the smooth logistic
loss fares better. Hence the default of one group, its passes in the machine's threads.
``sigma`` below ``grid`` is faster only where the groups are nearly orthogonal, and can
diverge elsewhere.

The code lives in private modules by job: ``_options`` (:class:`CocoaOptions` and the run's
constants), ``_tasks`` (the pure per-group tasks: reading a group, its start, its round,
the sums and the certificate), ``_graph`` (the row groups, the state, the one-graph round on
a client and the helpers that place blocks on their workers) and ``_solver``
(:class:`Cocoa`, registered as ``"cocoa"``).
"""

from __future__ import annotations

from daskpd.solvers.cocoa._options import CocoaOptions
from daskpd.solvers.cocoa._solver import Cocoa

__all__ = ["Cocoa", "CocoaOptions"]
