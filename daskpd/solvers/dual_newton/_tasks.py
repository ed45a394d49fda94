"""The tasks of the hinge dual's projected Newton method: a group's share of a product on
its free rows, and the conjugate-gradient and line-search algebra on ``w``'s home.

Notation (``shared/notes/many-machines.md``): the dual point ``a`` in the box ``[0, 1]^n``,
``w(a) = X^T (c y a) / (alpha n)``, the dual objective scaled by ``n`` and negated,
``F(a) = (alpha n / 2) ||w(a)||^2 - sum_i c_i a_i``, its gradient ``g_i = c_i (m_i - 1)``
with the margins ``m_i = y_i x_i . w(a)``, and its Hessian
``diag(c y) X X^T diag(c y) / (alpha n)``, whose diagonal ``h_i = c_i^2 ||x_i||^2 / (alpha n)``
preconditions the conjugate gradient. A Hessian-vector product ``H p`` is
``c y (X u)`` with ``u = X^T (c y p) / (alpha n)``: the image ``u`` of a direction is the
d-vector a round sums over the groups; the n-vectors (``a``, the CG's ``p``, ``r``, ``z``
and the step ``d``) stay with their group.

Tasks are pure (they return new arrays).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import scipy.linalg
import scipy.sparse
from scipy.linalg import blas

from daskpd.kernels import dual_newton as kernels
from daskpd.kernels.cocoa import row_norms
from daskpd.kernels.tron import thread_cuts
from daskpd.solvers.common.groups import in_threads, renumbered
from daskpd.solvers.common.resident import (
    RowGroup,
    Share,
    add,
    dense,
    group_products,
    keep_rows,
    local_sum,
    on_own_columns,
    summed_rows,
    thread_rows,
    zeroed_rows,
)

#: Armijo's constant of the projected line search
ARMIJO = 1e-4
#: halvings of the projected step before a Newton step gives up (at the optimum, to rounding)
MAX_HALVINGS = 30

_EMPTY = np.zeros(0)
_NO_ROWS = np.zeros(0, dtype=np.int64)


class _Local(NamedTuple):
    """A group's dual values and, within a Newton step, its free rows' CG vectors."""

    a: np.ndarray
    norm_sq: np.ndarray
    #: the free rows (ids into the group)
    free: np.ndarray = _NO_ROWS
    #: the free rows on their own: a :class:`RowGroup` on the columns they touch, so that a
    #: CG round costs their nonzeros and columns, not the group's columns
    rows: RowGroup | None = None
    #: on the free rows: ``c y``, the preconditioner ``h``, the gradient ``g``
    cy: np.ndarray = _EMPTY
    h: np.ndarray = _EMPTY
    g: np.ndarray = _EMPTY
    #: on the free rows: the CG's residual, preconditioned residual, direction and step
    r: np.ndarray = _EMPTY
    z: np.ndarray = _EMPTY
    p: np.ndarray = _EMPTY
    d: np.ndarray = _EMPTY
    #: where the free rows' columns are in the Newton step's free columns (the CG's ``u``
    #: is on those), found at the first CG round
    positions: np.ndarray | None = None
    #: the Woodbury preconditioner's parts on the free rows (when the gradient round made
    #: them): ``B``
    #: (the rows on the dense columns, scaled as the Hessian: scipy CSR) and ``Delta``
    dense: Any = None
    delta: np.ndarray = _EMPTY
    #: the nonzeros a round's first half read (counted with its second half's sums)
    read: float = 0.0


class _Cg(NamedTuple):
    """The conjugate gradient's state on ``w``'s home: the image of the next direction and
    the numbers its step needs.

    The images live on the Newton step's free columns (those of the free rows, over all
    groups: the columns of every share of the step's rounds), not on all of the run's:
    what the home computes and sends a round is as long as those.
    """

    #: the free columns (increasing, into the run's used columns)
    columns: np.ndarray
    #: ``u = X^T (c y p) / (alpha n)`` of the direction ``p = z + beta p_previous``, on
    #: ``columns``
    u: np.ndarray
    step: float
    beta: float
    #: ``r^T z``, the first ``||r||^2``, steps taken
    rz: float
    rr0: float
    iterations: int
    done: bool
    #: ``p^T D p`` of the direction (the damping's share of its curvature)
    p_dp: float = 0.0
    #: the nonzeros the round that made it read (a CG round's; 0 for the first)
    read: float = 0.0
    #: the Woodbury preconditioner's factored ``I + B^T Delta^-1 B`` (a Newton step's; on
    #: the home only: never sent to the owners)
    factor: Any = None


class _Point(NamedTuple):
    """An iterate on ``w``'s home: ``w(a)`` and its certificate's numbers."""

    w: np.ndarray
    scalars: dict


# --------------------------------------------------------------------------------------------
# a round runs one task a worker over the groups it holds (a bundle); the task's output is
# ``(locals, total)``: the next round's task reads the locals where they are, the tree sums the
# totals (no task of its own to split them where the partner is on the same worker)


def _locals_of(previous):
    """The groups' :class:`_Local` of a bundle task's output ``(locals, total)``, or the
    locals themselves."""
    return previous if previous and isinstance(previous[0], _Local) else previous[0]


def _as_total(x):
    """The ``(share, sums)`` of a bundle task's output (or a total itself)."""
    return x if isinstance(x[0], Share) else x[1]


def _add_totals(*parts):
    """The sum of bundle tasks' totals (or of sums of them), in the order given."""
    return add(*(_as_total(part) for part in parts))


def _bundle_step(step, groups, previous, *args):
    """``step(group, local, *args)`` on each of a task's groups, in order: their locals and
    the sum of their totals."""
    outputs = [
        step(group, local, *args) for group, local in zip(groups, _locals_of(previous), strict=True)
    ]
    return tuple(output[0] for output in outputs), local_sum(output[1] for output in outputs)


def _bundle_start(groups, pieces, w, scale):
    """The groups' start (:func:`_start_task`), each from its piece of the dual point."""
    return tuple(
        _start_task(group, piece, w, scale) for group, piece in zip(groups, pieces, strict=True)
    )


def _bundle_restore(previous, pieces):
    """The groups' start at a saved dual point (a piece a group)."""
    return tuple(
        local._replace(a=np.array(piece, dtype=np.float64))
        for local, piece in zip(_locals_of(previous), pieces, strict=True)
    )


def _bundle_image(groups, previous, settings):
    """The groups' locals and the sum of their images (:func:`_image_task`)."""
    locals_ = _locals_of(previous)
    return locals_, local_sum(
        _image_task(group, local, settings) for group, local in zip(groups, locals_, strict=True)
    )


def _bundle_z(groups, previous):
    """The dual point of a task's groups in the driver's convention, ``z_i = -c_i y_i a_i``
    (their rows are consecutive)."""
    return np.concatenate(
        [
            -group.weight * group.y * local.a
            for group, local in zip(groups, _locals_of(previous), strict=True)
        ]
    )


def _bundle_a(previous):
    """The dual values ``a`` of a task's groups, in row order."""
    return np.concatenate([local.a for local in _locals_of(previous)])


# --------------------------------------------------------------------------------------------
# on the groups' owners


def _start_task(group, z, w, scale):
    """A group's :class:`_Local` at its start: the rows' squared norms, and ``a`` from a dual
    point ``z`` (``z_i = -c_i y_i a_i``, the driver's convention), else from a primal point
    ``w`` (on the run's columns: the hinge's subgradient there, ``a_i = 1`` where the margin
    is below 1, else 0; a pass), else 0. A row with no nonzero and a weight starts (and
    stays) at 1, its optimum: it does not move ``w``."""
    m = group.y.shape[0]
    norm_sq = np.empty(m)
    row_norms(group.indptr, group.vals, group.binary, norm_sq)
    c = group.weight
    a = np.zeros(m)
    moving = c > 0
    if z is not None:
        a[moving] = np.clip(-np.asarray(z, dtype=np.float64)[moving] / (c * group.y)[moving], 0, 1)
    elif w is not None:
        margins = group.y * group_products(group, on_own_columns(group, w))
        a[moving & (margins < 1.0)] = 1.0
    a[(norm_sq == 0) & moving] = 1.0
    return _Local(a, norm_sq)


def _image_task(group, local, settings):
    """A group's ``X_k^T (c y a)`` (a warm start's ``w``) and the nonzeros read."""
    share, read = _transpose(group, group.weight * group.y * local.a, settings.n_columns)
    return share, np.array([0.0, 0.0, 0.0, 0.0, float(read), 0.0, 0.0])


def _bundle_local_pass(groups, previous, w, settings, n_tasks, passes=1):
    """``passes`` passes of dual coordinate descent over the rows of a task's groups (one
    worker's rows, one local problem) from the point ``w`` (None: ``a = 0``, ``w = 0``):
    CoCoA+'s local problem with the safe ``sigma'`` = the round's tasks (the workers
    holding groups, :func:`~daskpd.kernels.dual_newton.box_pass`), so that the groups of one
    worker do not pay the ``1 / K`` of groups on different machines.

    Returns ``(locals, (X^T (c y delta), sums))`` with ``delta`` the change of the groups'
    ``a`` and ``sums[4]`` the nonzeros read. From ``a = 0`` every row is free and the first
    Newton steps would read all of them, many times; a pass puts most rows at the bound
    where they end.
    """
    locals_ = _locals_of(previous)
    scale = settings.scale / n_tasks
    start = np.zeros(settings.n_columns) if w is None else w
    u = start.copy()
    points = [local.a.copy() for local in locals_]
    read = 0
    for _ in range(passes):
        for group, local, a in zip(groups, locals_, points, strict=True):
            own = u if group.columns is None else u[group.columns]
            read += kernels.box_pass(
                group.indptr, group.indices, group.vals, group.binary, group.y, group.weight,
                local.norm_sq, scale, a, own,
            )  # fmt: skip
            if group.columns is not None:
                u[group.columns] = own
    change = (u - start) * scale
    touched = np.flatnonzero(change).astype(np.int32)
    share = Share(touched, change[touched][None, :])
    sums = np.array([0.0, 0.0, 0.0, 0.0, float(read), 0.0, 0.0])
    moved = tuple(_Local(a, local.norm_sq) for local, a in zip(locals_, points, strict=True))
    return moved, (share, sums)


def _start_read(total):
    """The nonzeros a start's round read (its sums' fifth entry)."""
    return float(_as_total(total)[1][4])


def _gradient_task(group, local, w, settings, woodbury=False):
    """A group's margins at ``w``, its free rows, the CG's start on them, and its sums.

    Returns ``(local, (share, sums))``: ``share`` is ``X_F^T (c y z)`` (the first direction's
    image, unscaled), ``sums`` are ``sum c max(0, 1 - m)``, ``sum c a``, ``r^T z``,
    ``||r||^2`` and the nonzeros read.
    """
    margins = group.y * group_products(group, on_own_columns(group, w))
    read = float(group.indptr[-1])
    c, a = group.weight, local.a
    g = c * (margins - 1.0)
    held = ((a <= 0.0) & (g > 0.0)) | ((a >= 1.0) & (g < 0.0))
    free = np.flatnonzero((c > 0) & (local.norm_sq > 0) & ~held)
    rows = _free_rows(group, free)
    cy = (c * group.y)[free]
    h = c[free] ** 2 * local.norm_sq[free] / settings.scale
    r = -g[free]
    if woodbury:
        dense, delta = _dense_part(rows, cy, h, settings)
        t = dense.T @ (r / delta)
        gram = np.zeros((dense.shape[1], dense.shape[1]))
        kernels.rows_gram(dense.indptr, dense.indices, dense.data, 1.0 / delta, gram)
        size = gram.size + t.size
        share = Share(np.arange(size, dtype=np.int32), np.concatenate([gram.ravel(), t])[None, :])
        sums = np.array([
            float(c @ np.maximum(0.0, 1.0 - margins)), float(c @ a), 0.0, 0.0,
            read + 2.0 * float(rows.indptr[-1]), 0.0, 0.0, float(rows.indptr[-1]),
        ])  # fmt: skip
        new = _Local(a, local.norm_sq, free, rows, cy, h, g[free], r, _EMPTY, _EMPTY,
                     np.zeros(free.size), dense=dense, delta=delta)  # fmt: skip
        return new, (share, sums)
    z = r / ((1.0 + settings.damping) * h)
    share, transposed = _transpose(rows, cy * z)
    sums = np.array(
        [
            float(c @ np.maximum(0.0, 1.0 - margins)),
            float(c @ a),
            float(r @ z),
            float(r @ r),
            # the free rows read to copy them out, and to transpose
            read + float(rows.indptr[-1]) + transposed,
            float(z @ (h * z)),
            0.0,
            float(rows.indptr[-1]),
        ]
    )
    new = _Local(a, local.norm_sq, free, rows, cy, h, g[free], r, z, _EMPTY, np.zeros(free.size))
    return new, (share, sums)


def _cg_task(group, local, cg, settings):
    """One CG step on a group's free rows, with the direction's image ``cg.u`` from the
    home: ``p = z + beta p``, ``d += t p``, ``r -= t (H + mu D) p``, ``z = r / ((1 + mu)
    h)``; returns ``(local, (X_F^T (c y z), sums))``, the sums as :func:`_gradient_task`'s
    (``r^T z``, ``||r||^2``, the nonzeros read, ``z^T D z`` and ``z^T D p``; the damping's
    ``p^T D p`` follows from them on the home)."""
    p = local.z if local.p.size == 0 else local.z + cg.beta * local.p
    rows = local.rows
    positions = local.positions
    if positions is None:
        positions = np.searchsorted(cg.columns, rows.columns)
    hp = local.cy * group_products(rows, cg.u[positions])
    read = float(rows.indptr[-1])
    hp += settings.damping * local.h * p
    d = local.d + cg.step * p
    r = local.r - cg.step * hp
    if local.dense is not None:
        t = local.dense.T @ (r / local.delta)
        share = Share(np.arange(t.size, dtype=np.int32), t[None, :])
        moved = local._replace(r=r, p=p, d=d, positions=positions, read=read)
        return moved, (share, np.zeros(7))
    z = r / ((1.0 + settings.damping) * local.h)
    share, transposed = _transpose(rows, local.cy * z)
    hz = local.h * z
    sums = np.array(
        [0.0, 0.0, float(r @ z), float(r @ r), float(read + transposed), float(z @ hz),
         float(hz @ p)]
    )  # fmt: skip
    return local._replace(r=r, z=z, p=p, d=d, positions=positions), (share, sums)


def _dense_part(rows, cy, h, settings):
    """The Woodbury preconditioner's ``B`` and ``Delta`` on a block of free rows:
    ``B = diag(c y) X_F[:, dense] / sqrt(alpha n)`` (CSR, one column a dense column, those
    the block does not touch empty) and ``Delta = (1 + mu) h - ||b_i||^2``, the diagonal of
    the other columns' part of the Hessian plus the damping, so that ``M = Delta + B B^T``
    has the diagonal preconditioner's diagonal."""
    dense = settings.dense
    lookup = np.full(rows.columns.shape[0], -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(rows.columns, dense), rows.columns.shape[0] - 1)
    present = rows.columns.shape[0] > 0
    hit = (rows.columns[at] == dense) if present else np.zeros(dense.shape[0], dtype=bool)
    lookup[at[hit]] = np.flatnonzero(hit)
    which = lookup[rows.indices] if present else np.zeros(0, dtype=np.int64)
    keep = which >= 0
    row_of = np.repeat(np.arange(rows.y.shape[0]), np.diff(rows.indptr))
    values = np.ones(keep.sum()) if rows.binary else np.asarray(rows.vals, np.float64)[keep]
    values = values * (cy / np.sqrt(settings.scale))[row_of[keep]]
    b = scipy.sparse.csr_matrix((values, (row_of[keep], which[keep])),
                                shape=(rows.y.shape[0], dense.shape[0]))  # fmt: skip
    squares = np.asarray(b.multiply(b).sum(axis=1)).ravel()
    delta = (1.0 + settings.damping) * h - squares
    # the rest of a row's norm is never below the damping's share (rounding aside)
    return b, np.maximum(delta, settings.damping * h)


def _precondition_task(group, local, solved, settings):
    """The second half of a round with the Woodbury preconditioner: ``z = M^-1 r =
    Delta^-1 (r - B s)`` with ``s`` the home's solution of the summed first halves, and the
    group's ``X_F^T (c y z)``; returns ``(local, (share, sums))``, the sums as
    :func:`_cg_task`'s (the first half's reads with them)."""
    z = (local.r - local.dense @ solved) / local.delta
    share, transposed = _transpose(local.rows, local.cy * z)
    hz = local.h * z
    p_term = float(hz @ local.p) if local.p.size else 0.0
    sums = np.array([0.0, 0.0, float(local.r @ z), float(local.r @ local.r),
                     local.read + float(transposed), float(z @ hz), p_term])  # fmt: skip
    return local._replace(z=z, read=0.0), (share, sums)


def _trial_task(group, local, step_length, settings):
    """The projected step ``a_F <- clip(a_F + t d, 0, 1)`` of a group's free rows: returns
    ``(local at the new a, (X_F^T (c y delta), [sum c delta, g^T delta, 0, 0, read]))``."""
    free = local.free
    moved = np.clip(local.a[free] + step_length * local.d, 0.0, 1.0)
    delta = moved - local.a[free]
    share, read = _transpose(local.rows, local.cy * delta)
    a = local.a.copy()
    a[free] = moved
    c = group.weight[free]
    sums = np.array([float(c @ delta), float(local.g @ delta), 0.0, 0.0, float(read), 0.0, 0.0])
    return _Local(a, local.norm_sq), (share, sums)


def _free_rows(group, free):
    """The rows ``free`` of ``group`` as a :class:`RowGroup` of their own, numbered on the
    columns they touch (its ``columns``, into the run's), with thread cuts by nonzeros.

    Built once a Newton step (a copy of the free rows' nonzeros), it makes each CG round's
    products cost the free rows' nonzeros and columns: indexed by the group, the gather of
    the direction's image and the transpose's output would cost all of the group's columns
    every round, which on many groups of wide data is most of a round.
    """
    starts = group.indptr[free]
    lengths = group.indptr[free + 1] - starts
    indptr = np.zeros(free.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    positions = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])
    own = group.indices.shape[0] and int(group.indices.max()) + 1
    columns, indices = renumbered(
        group.indices[positions], own, None, True, group.cuts.shape[0] - 1
    )
    if group.columns is not None:
        columns = group.columns[columns]
    vals = group.vals if group.binary else np.ascontiguousarray(group.vals[positions])
    return RowGroup(
        indptr, indices, vals, group.binary, group.y[free], group.weight[free],
        thread_cuts(indptr, group.cuts.shape[0] - 1), columns.astype(np.int32),
    )  # fmt: skip


def _transpose(group, coef, n_columns=None):
    """``sum_i coef[i] x_i`` over the group's rows as a :class:`Share`, and the nonzeros
    read (``n_columns``: the run's, for a group whose indices number them).

    On a block of free rows the share is on all of the block's columns (a value that
    cancels to 0 included), so that every share of a Newton step is on the same free
    columns; on a whole group, on the columns it touches.
    """
    cuts = group.cuts
    n_threads = cuts.shape[0] - 1
    width = n_columns if group.columns is None else group.columns.shape[0]
    # the group's kept rows (a whole group's; a Newton step's free rows keep none), zeroed
    # and summed in its threads
    out = zeroed_rows(thread_rows(group, (n_threads, width)), n_threads)
    read = np.zeros(n_threads, dtype=np.int64)

    def work(t):
        read[t] = kernels.rows_transpose(
            group.indptr, group.indices, group.vals, group.binary, coef, cuts[t], cuts[t + 1],
            out[t],
        )  # fmt: skip

    in_threads(n_threads, work)
    total = summed_rows(out, n_threads)
    if group.spare is not None:
        # the rows go back to the group
        total = total.copy()
        keep_rows(group, out)
    if group.columns is not None and n_columns is None:
        return Share(group.columns, total[None, :]), int(read.sum())
    touched = np.flatnonzero(total).astype(np.int32)
    columns = touched if group.columns is None else group.columns[touched]
    return Share(columns, total[touched][None, :]), int(read.sum())


def _bundle_free(previous):
    """The free rows of a task's groups and what a Newton step on ``w``'s home needs of
    them: ``(rows, cy, h, r, z, a_F, g_F)`` a group."""
    return tuple(
        (local.rows, local.cy, local.h, local.r, local.z, local.a[local.free], local.g,
         local.dense, local.delta)
        for local in _locals_of(previous)
    )  # fmt: skip


def _bundle_moves(previous, moves, b):
    """The groups' dual values moved by the step the home took (``moves``: the first of
    :func:`_home_newton`'s outputs, ``b`` this task's index in it)."""
    out = []
    for local, delta in zip(_locals_of(previous), moves[b], strict=True):
        a = local.a.copy()
        a[local.free] += delta
        out.append(_Local(a, local.norm_sq))
    return tuple(out)


def _stack_rows(blocks, columns, threads):
    """The groups' blocks of free rows as one :class:`RowGroup` on ``columns`` (the Newton
    step's free columns: the union of theirs)."""
    indptr = np.zeros(sum(block.y.shape[0] for block in blocks) + 1, dtype=np.int64)
    np.cumsum(np.concatenate([np.diff(block.indptr) for block in blocks]), out=indptr[1:])
    indices = np.concatenate(
        [np.searchsorted(columns, block.columns)[block.indices] for block in blocks]
    ).astype(np.int32)
    binary = blocks[0].binary
    vals = blocks[0].vals if binary else np.concatenate([block.vals for block in blocks])
    return RowGroup(
        indptr, indices, vals, binary, np.concatenate([block.y for block in blocks]),
        np.concatenate([block.weight for block in blocks]), thread_cuts(indptr, threads),
        columns,
    )  # fmt: skip


def _home_newton(point, cg, settings, *bundles_):
    """A Newton step run whole on ``w``'s home on the groups' free rows (``bundles_``:
    :func:`_bundle_free`'s outputs), from the CG's first direction ``cg``: the conjugate
    gradient (the same steps as the CG rounds: :func:`_cg_task` on the rows of all groups,
    :func:`_cg_next`), then the projected line search (halving ``t`` from 1 until Armijo's
    test holds, as :func:`_trial_home` on the rounds' path), each trial read off the free
    rows here. One round for all of it (the free rows' transfer) where the rounds would be
    one a CG step and one a trial.

    Returns ``(moves, w, numbers)``: each bundle's groups' changes of ``a`` on their free
    rows, the new ``w`` and the numbers of the step (CG steps, trials, whether a ``t``
    was accepted, nonzeros read)."""
    blocks = [block for bundle in bundles_ for block in bundle]
    rows = _stack_rows([block[0] for block in blocks], cg.columns, settings.threads)
    cy, h, r, z, a, g = (np.concatenate([b[k] for b in blocks]) for k in range(1, 7))
    local = _Local(_EMPTY, _EMPTY, _NO_ROWS, rows, cy, h, _EMPTY, r, z, _EMPTY,
                   np.zeros(rows.y.shape[0]))  # fmt: skip
    if cg.factor is not None:
        local = local._replace(dense=scipy.sparse.vstack([b[7] for b in blocks]).tocsr(),
                               delta=np.concatenate([b[8] for b in blocks]))  # fmt: skip
    read = 0.0
    while not cg.done:
        local, total = _cg_task(None, local, cg, settings)
        if cg.factor is not None:
            local, total = _precondition_task(None, local, _woodbury_solve(cg, total), settings)
        cg = _cg_next(cg, settings, total)
        read += cg.read
    step_length, accepted, trials = 1.0, False, 0
    while not accepted and trials < MAX_HALVINGS:
        trials += 1
        delta = np.clip(a + step_length * local.d, 0.0, 1.0) - a
        share, transposed = _transpose(rows, cy * delta)
        read += transposed
        _, accepted = _armijo(float(g @ delta), share.values[0], settings)
        step_length *= 0.5
    if accepted:
        w = _shifted(point.w, share, settings)
    else:
        w, delta = point.w.copy(), np.zeros_like(a)
    cuts = np.cumsum([block[0].y.shape[0] for block in blocks])[:-1]
    pieces = iter(np.split(delta, cuts))
    moves = tuple(tuple(next(pieces) for _ in bundle) for bundle in bundles_)
    numbers = {"iterations": cg.iterations, "trials": trials, "accepted": accepted,
               "read": read}  # fmt: skip
    return moves, w, numbers


# --------------------------------------------------------------------------------------------
# on w's home


def _start_w(total, settings):
    """``w(a)`` from the summed ``X^T (c y a)`` of a warm start."""
    share, _ = total
    return dense(share, settings.n_columns)[0] / settings.scale


def _point_task(w, total, settings, second=None):
    """The :class:`_Point` at ``w = w(a)`` from its gradient round's sums (``second``: the
    sums of its second half, with the Woodbury preconditioner: their reads count)."""
    _, sums = _as_total(total)
    more = 0.0 if second is None else float(_as_total(second)[1][4])
    n, alpha = settings.n_samples, settings.alpha
    w_w = float(w @ w)
    scalars = {
        "primal": float(sums[0]) / n + 0.5 * alpha * w_w,
        "dual": float(sums[1]) / n - 0.5 * alpha * w_w,
        "w_w": w_w,
        "read": float(sums[4]) + more,
        "free_nnz": float(sums[7]),
    }
    return _Point(w, scalars)


def _moved_w(point, settings, *totals):
    """``w + X^T (c y delta) / (alpha n)`` from a local pass's summed shares, and the
    nonzeros it read."""
    share, sums = _add_totals(*totals)
    return _shifted(point.w, share, settings), {"read": float(sums[4])}


def _cg_first(total, settings, factor=None):
    """The CG's first step from the gradient round: ``p = z`` (``factor``: the Woodbury
    preconditioner's, kept for the Newton step)."""
    share, sums = _as_total(total)
    return _next_direction(share, sums, None, settings)._replace(factor=factor)


def _woodbury_start(settings, *totals):
    """From the gradient round's first halves summed: the factored ``I + sum_k B_k^T
    Delta_k^-1 B_k`` and the solution ``s`` for the first residual (``sum_k B_k^T
    Delta_k^-1 r_k``)."""
    share, _ = _add_totals(*totals)
    r = settings.dense.shape[0]
    values = share.values[0]
    system = values[: r * r].reshape(r, r) + np.eye(r)
    factor = scipy.linalg.cho_factor(system, lower=True, check_finite=False)
    return factor, scipy.linalg.cho_solve(factor, values[r * r :], check_finite=False)


def _woodbury_solve(cg, *totals):
    """``s = (I + B^T Delta^-1 B)^-1 sum_k B_k^T Delta_k^-1 r_k`` on the home, from a CG
    round's first halves summed."""
    share, _ = _add_totals(*totals)
    return scipy.linalg.cho_solve(cg.factor, share.values[0], check_finite=False)


def _cg_next(cg, settings, *totals):
    """The CG's next step from a CG round's sums (the tree's last totals, summed here)."""
    share, sums = _add_totals(*totals)
    return _next_direction(share, sums, cg, settings)._replace(read=float(sums[4]))


def _next_direction(share, sums, cg, settings):
    """The image ``u`` of the next direction ``p = z + beta p`` (from the round's summed
    ``X_F^T (c y z)``, on the free columns), its curvature
    ``p^T (H + mu D) p = alpha n ||u||^2 + mu p^T D p`` and the step ``r^T z`` over it."""
    rz, rr, z_dz, z_dp = (float(sums[k]) for k in (2, 3, 5, 6))
    image = share.values[0] / settings.scale
    if cg is None:
        beta, u, rr0, iterations, p_dp = 0.0, image, rr, 0, z_dz
    else:
        beta = rz / cg.rz
        u = blas.daxpy(cg.u, image, a=beta)
        rr0, iterations = cg.rr0, cg.iterations + 1
        p_dp = z_dz + 2.0 * beta * z_dp + beta * beta * cg.p_dp
    curvature = settings.scale * float(u @ u) + settings.damping * p_dp
    done = (
        not rr > 0.0
        or not rz > 0.0
        or not curvature > 0.0
        or (cg is not None and rr <= settings.eta**2 * rr0)
        or iterations >= settings.max_cg
    )
    step = rz / curvature if curvature > 0.0 else 0.0
    factor = None if cg is None else cg.factor
    return _Cg(share.columns, u, step, beta, rz, rr0, iterations, bool(done), p_dp,
               factor=factor)  # fmt: skip


def _direction(cg):
    """What the owners need of the CG state after a step's first round: the image ``u`` and
    the numbers, not the free columns (they keep their positions in them from the first
    round), a third less to send a round."""
    return cg._replace(columns=None, factor=None)


def _first_direction(cg):
    """The CG state the owners need in a step's first round: all but the home's factor."""
    return cg._replace(factor=None)


def _cg_numbers(cg):
    """What the driver reads of a CG round: whether CG is done, and the nonzeros its round
    read."""
    return {"done": cg.done, "iterations": cg.iterations, "read": cg.read}


def _shifted(w, share, settings):
    """``w + X^T (c y delta) / (alpha n)`` from the summed share ``X^T (c y delta)``."""
    w = w.copy()
    w[share.columns] += share.values[0] / settings.scale
    return w


def _armijo(g_delta, step, settings):
    """The change of ``F`` along a projected step and whether it passes Armijo's test
    (:func:`_trial_home`), from ``g^T delta`` and the step's image ``X^T (c y delta)``."""
    change = g_delta + 0.5 * float(step @ step) / settings.scale
    return change, change <= ARMIJO * g_delta


def _trial_home(point, settings, *totals):
    """The trial point ``w + X^T (c y delta) / (alpha n)`` and whether it passes Armijo's
    test on ``F``: ``F(a + delta) - F(a) <= ARMIJO g^T delta``.

    The change is ``g^T delta + ||X^T (c y delta)||^2 / (2 alpha n)`` (``F`` is quadratic and
    ``w . X^T (c y delta) - sum c delta = g^T delta``): two sums that do not cancel, where
    the difference of ``F``'s values would, near the optimum, be below their rounding.
    """
    share, sums = _add_totals(*totals)
    change, accepted = _armijo(float(sums[1]), share.values[0], settings)
    return _shifted(point.w, share, settings), {
        "accepted": bool(accepted), "change": change, "read": float(sums[4])
    }


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1]


def _third(triple):
    return triple[2]


def _point_scalars(point):
    return point.scalars


def _point_w(point):
    return point.w
