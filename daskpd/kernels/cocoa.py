"""Numba kernels of CoCoA+ (data-parallel dual coordinate ascent with added updates).

Ma, Smith, Jaggi, Jordan, Richtarik and Takac, "Adding vs. Averaging in Distributed
Primal-Dual Optimization", ICML 2015; Smith, Forte, Ma, Takac, Jordan and Jaggi, "CoCoA: A
General Framework for Communication-Efficient Distributed Optimization", JMLR 2018. The
schedule lives in :mod:`daskpd.solvers.cocoa`; here is one row group's local pass.

Translation table (paper -> code): ``lambda`` -> ``alpha``, ``alpha_i`` -> ``-z[i]`` (the
project's dual sign, DESIGN.md), ``A`` -> ``X^T``, ``sigma'`` -> ``sigma``, ``P_k`` -> row
group ``k``, ``v`` (the local copy of ``w``) -> :func:`column_value` of ``pack``, ``H`` -> one
pass (or ``local_passes``) over the group's rows, ``K`` -> ``grid``.

Derivation of the coordinate step (project conventions, row weights ``c_i``)::

    P(w) = (1/n) sum_i c_i loss(x_i.w, y_i) + (alpha/2) ||w||^2
    D(z) = -(1/n) sum_i c_i loss*(z_i / c_i, y_i) - (alpha/2) ||w(z)||^2,
    w(z) = -X^T z / (alpha n)

The local subproblem of group ``k`` (CoCoA+, eq. (10) of the ICML paper, ``gamma = 1``),
as a function of the change ``dz`` of the group's dual block, is
``-(1/n) sum_{i in k} c_i loss*((z_i + dz_i)/c_i) + (1/n) w.X_k^T dz
- (alpha sigma / 2) ||X_k^T dz / (alpha n)||^2`` plus constants. Writing the local change of
``w`` as ``dw = -X_k^T dz / (alpha n)`` and ``v = w + sigma dw`` (so ``v = w`` at the start
of the pass), a step ``delta`` on coordinate ``i`` maximizes (times ``n``)::

    phi(delta) = -c_i loss*((z_i + delta)/c_i, y_i) + delta u - (kappa/2) delta^2,
    u = x_i.v,   kappa = sigma ||x_i||^2 / (alpha n),

then ``z_i += delta`` and ``v -= sigma delta x_i / (alpha n)``. ``kappa`` is the global
problem's ``1/(alpha n)`` (``n`` all rows, not the group's) times ``sigma``; DSO's local start
(:func:`daskpd.kernels.dso.dcd_local`) solves a different problem, scaled ``1/(alpha m_q)``.
For the classification losses, in the folded variable ``a = -y_i z_i`` and the margin
``t = y_i u``, ``phi'(a_new - a) = 0`` reads:

- hinge: ``1 - t - kappa (a_new - a) = 0``, clipped to ``[0, c]``:
  ``a_new = clip(a + (1 - t) / kappa, 0, c)`` (``kappa = 0``, an empty row: ``c``);
- squared hinge (``-c loss*(-a/c) = a - a^2/(4c)``):
  ``a_new = max(0, a + (1 - t - a/(2c)) / (kappa + 1/(2c)))``;
- smoothed hinge (``-c loss* = a - gamma a^2/(2c)``):
  ``a_new = clip(a + (1 - t - gamma a/c) / (kappa + gamma/c), 0, c)``;
- logistic (``-c loss* = -a log(a/c) - (c-a) log((c-a)/c)``):
  ``log((c - a_new)/a_new) - t - kappa (a_new - a) = 0``, by safeguarded Newton steps on
  ``[c e, c (1 - e)]`` (``e`` = :data:`daskpd.kernels.dso.LOGISTIC_MARGIN`), as in
  :func:`daskpd.kernels.dso.dcd_local`;
- squared loss (real targets, not folded; ``-c loss*(z/c) = -z^2/(2c) - z y``):
  ``delta = (u - y - z/c) / (1/c + kappa)``.

Shrinking (the hinge losses, whose dual variables sit on a box). In the folded variable
the local problem is minimized over ``a`` in ``[0, U]`` (``U = c`` for the hinge and the
smoothed hinge, no upper bound for the squared hinge) with gradient
``G = t - 1 + D a`` (``D`` = 0, ``gamma/c``, ``1/(2c)``). After the certifying pass,
:func:`shrunk_passes` runs liblinear's shrinking heuristic (Hsieh et al., "A Dual Coordinate
Descent Method for Large-scale Linear SVM", ICML 2008, Algorithm 3): a row at a bound whose
gradient pushes it further out than the largest projected gradient of the previous pass is
dropped from the round's later passes, which visit the remaining rows in a new random order
each until the spread of their projected gradients falls below a fraction of the spread the
full pass saw. Near the optimum most rows of a near-separable set sit at ``a = 0`` with a
margin above 1: the later passes touch few of them. Every round starts with a full pass, so
a row dropped wrongly is visited again by the next round, and every step is still the exact
maximizer of the local problem along its coordinate.

Safe screening (the hinge losses, one group). The loss of every box loss is 0 at a margin
``y_i x_i . w >= 1``, and there a row at ``a = 0`` takes no step and adds 0 to both sums of
the certificate. With ``b_i`` a lower bound of row ``i``'s margin at the round's start
``w``, a row with ``z_i = 0`` and ``b_i >`` :data:`SCREEN_MARGIN` is left out of the first
pass: nothing it would add to the certificate is lost, so the certificate stays exact. The
pass sets ``b_i`` to the exact margin of every row it visits (the ``x_i . w`` it computes
anyway), and between rounds ``b_i -= ||x_i|| ||w_next - w||`` (Cauchy-Schwarz;
:func:`shift_norm`). Before the pass, :func:`start_margins` reads the rows at ``z_i = 0``
whose bound does not leave them out and sets it to their margin at ``w`` (less the
rounding of ``w`` to float32): after a round from ``w = 0``, whose bounds prove nothing,
this read-only pass lets the next one leave out the rows inactive there. Unlike
liblinear's shrinking this is exact, not a heuristic: about 95% of the splice-like rows
are left out of each round's certifying pass from the second round on.
A row left out is also no candidate of the round's shrunk passes (its ``held`` gradient is
``inf``). The same test at the pass's ``v`` rather than its start would need a bound on
``||v - w||`` per visit; the passes do not keep one.

Rows of weight 0 keep ``z_i = 0``. The same loop that computes ``u = x_i.v`` also computes
``x_i.w`` (``w`` the round's start, ``pack[:, PACK_W]``, read only): in the first pass it adds
``c_i loss(x_i.w)`` and ``c_i loss*(z_i/c_i)`` (``z_i`` before its step) to the round's sums,
which with ``||w||^2`` give the exact ``P(w)`` and ``D(z)`` of the round's start.

``pack`` holds one record per column the group uses (``j`` the ``l``-th of them):
``pack[l] = (v_0, w_j, d_1, ..., d_{T-1}, 0, ...)`` for a round in ``T`` threads, where ``w_j``
is the round's start (read only), ``v_0`` is ``w_j`` plus the changes
``-sigma delta x_ij / (alpha n)`` of the steps thread 0 took, and slot ``d_t`` sums those of
thread ``t``; so ``v_j = v_0 + (d_1 + ...)`` (:func:`column_value`), and one thread's record
is ``(v_j, w_j)``, serial dual coordinate ascent's own numbers. Each field has one writer:
threads that share ``v`` (PASSCoDe) read each other's steps, perhaps late, but lose none of
them, as they would adding to one ``v_j`` without locks (a lost addend made a round's steps
worse and ``v`` no longer ``w(z)``), and atomic additions cost more than the second thread
gains (BENCHMARKS.md, "Tried first and not kept"). So ``v`` at the end of a round is its exact
``w + sigma dw``, ``dw = -X_k^T dz / (alpha n)``, to rounding, with no second read of the
nonzeros. A record is :func:`pack_width` values wide (2, 4 or 8; zeros past the last
slot): it fills at most one cache line (:data:`MAX_THREADS`), so one line brings all of a
column's values for each nonzero. The O(columns) work of a round (``w`` in, the update out)
covers the group's columns only.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from daskpd.kernels import scalar
from daskpd.kernels._config import njit
from daskpd.kernels.dataset import local_columns  # noqa: F401  (the groups' columns)
from daskpd.kernels.dso import logistic_dual_newton
from daskpd.kernels.features import splitmix64
from daskpd.kernels.intrinsics import prefetch_record
from daskpd.kernels.scalar import HINGE, LOGISTIC, SMOOTH_HINGE, SQUARED, SQUARED_HINGE

#: How many nonzeros ahead the passes prefetch the ``pack`` record of a column. A pass reads
#: one record of a random column per nonzero (4.66M columns, 75 MB of records on the
#: splice-like sets: most reads miss every cache) and the out-of-order window keeps too few
#: of those misses in flight; 32 is the fastest of the distances tried (BENCHMARKS.md, "The
#: passes prefetch the column 32 nonzeros ahead"). The hint continues into the next rows'
#: nonzeros (the ``indices`` that
#: follow), which is where the pass goes next in the array but not in its random order:
#: those prefetches are wasted, a few per row.
PREFETCH_AHEAD = 32

#: Losses whose coordinate step :func:`dual_step` knows.
COCOA_LOSSES = (HINGE, SMOOTH_HINGE, SQUARED_HINGE, LOGISTIC, SQUARED)

#: Newton iterations allowed for one logistic step (it stops when the step is below
#: ``1e-15 c``; from the interval's end, the first visit, about ten are needed).
NEWTON_STEPS = 60

# Fields of a ``pack`` record, one per column the group uses (the layout is defined here
# once, for the kernels and for the tasks that make and read packs; module docstring).
#: ``w_j`` plus thread 0's steps (one thread: ``v_j`` itself)
PACK_V = 0
#: ``w_j``, the round's start (read only)
PACK_W = 1
#: thread ``t >= 1``'s slot is field ``PACK_SLOT + t - 1``: the sum of its steps' changes
PACK_SLOT = 2

#: Threads a round of one group may run: a record of ``w_j``, ``v_0`` and the other threads'
#: slots then fits in one 64-byte cache line.
MAX_THREADS = 7


def pack_width(n_threads):
    """Values in a ``pack`` record for a round in ``n_threads`` threads (at most
    :data:`MAX_THREADS`): 2 for one thread, 4 for two or three, 8 for up to seven."""
    if not 1 <= n_threads <= MAX_THREADS:
        raise ValueError(f"a round runs 1 to {MAX_THREADS} threads, got {n_threads}")
    width = 2
    while width < n_threads + 1:
        width *= 2
    return width


def slot_field(thread):
    """The field of ``pack`` that thread ``thread`` of a round adds its steps to."""
    return PACK_V if thread == 0 else PACK_SLOT + thread - 1


# Fields of ``pg_range``, the spread of the projected gradients of a pass.
PG_MAX = 0
PG_MIN = 1

#: A row at ``z_i = 0`` whose margin bound is above this is left out of a screened first pass
#: (module docstring): the losses' zero region starts at margin 1, and the bound is computed
#: in floating point (the slack covers its rounding, about 1e-15 relative).
SCREEN_MARGIN = 1.0 + 1e-9

#: ``bounds`` of a pass that does not screen
NO_BOUNDS = np.empty(0)


class GroupRows(NamedTuple):
    """A row group's rows as the passes read them (CSR on the group's own columns).

    Attributes
    ----------
    indptr : ndarray of shape (m + 1,), int64
    indices : ndarray of shape (nnz,), int32
        Column ids into ``pack`` (the group's own columns, :func:`local_columns`).
    vals : ndarray of shape (nnz,), float32 or float64
        Ignored (may be empty) when ``binary``.
    binary : bool
    y, weight, norm_sq : ndarray of shape (m,), float64
        Labels (targets), row weights ``c_i`` and ``||x_i||^2``.
    """

    indptr: np.ndarray
    indices: np.ndarray
    vals: np.ndarray
    binary: bool
    y: np.ndarray
    weight: np.ndarray
    norm_sq: np.ndarray


class PassSteps(NamedTuple):
    """The scaling of a pass's steps.

    Attributes
    ----------
    sigma : float
        ``sigma'`` of CoCoA+ (``K`` is safe).
    inv_alpha_n : float
        ``1 / (alpha n)``, ``n`` the number of rows of the whole problem.
    """

    sigma: float
    inv_alpha_n: float


@njit
def dual_step(code, params, z, u, kappa, c, y):
    """Exact maximizer of the 1-D local subproblem of one row (see the module docstring).

    Parameters
    ----------
    code : int
        Loss code (:data:`COCOA_LOSSES`).
    params : ndarray of float64
        Loss parameters (``params[0] = gamma`` of the smoothed hinge).
    z : float
        Current dual value of the row (project sign).
    u : float
        ``x_i . v``.
    kappa : float
        ``sigma ||x_i||^2 / (alpha n)`` (>= 0).
    c : float
        Row weight (> 0).
    y : float
        Label or target.

    Returns
    -------
    z_new : float
    """
    if code == SQUARED:
        return z + (u - y - z / c) / (1.0 / c + kappa)
    a = -y * z
    t = y * u
    if code == HINGE:
        if kappa > 0.0:
            new_a = a + (1.0 - t) / kappa
        elif t < 1.0:
            new_a = c
        else:
            new_a = 0.0 if t > 1.0 else a
        new_a = min(max(new_a, 0.0), c)
    elif code == SQUARED_HINGE:
        new_a = max(a + (1.0 - t - a / (2.0 * c)) / (kappa + 1.0 / (2.0 * c)), 0.0)
    elif code == SMOOTH_HINGE:
        gamma = params[0]
        new_a = a + (1.0 - t - gamma * a / c) / (kappa + gamma / c)
        new_a = min(max(new_a, 0.0), c)
    else:
        # maximize -a log(a/c) - (c-a) log((c-a)/c) - (a - a0) t - kappa (a - a0)^2 / 2
        new_a = logistic_dual_newton(a, t, kappa, c, NEWTON_STEPS)
    return -y * new_a


#: Losses whose folded dual variable lives on a box (``a >= 0``, ``a <= U``): shrinking applies.
BOX_LOSSES = (HINGE, SMOOTH_HINGE, SQUARED_HINGE)


@njit
def box_gradient(code, params, a, t, c):
    """Gradient and upper bound of one row's folded dual (module docstring, "Shrinking").

    Parameters
    ----------
    code : int
        One of :data:`BOX_LOSSES`.
    params : ndarray of float64
    a : float
        ``-y_i z_i``.
    t : float
        ``y_i x_i . v``.
    c : float
        Row weight.

    Returns
    -------
    gradient : float
        ``t - 1 + D a``, the derivative of the minimized local problem in ``a``.
    upper : float
        ``U`` (``inf`` for the squared hinge).
    """
    if code == SQUARED_HINGE:
        return t - 1.0 + a / (2.0 * c), math.inf
    if code == SMOOTH_HINGE:
        return t - 1.0 + params[0] * a / c, c
    return t - 1.0, c


@njit
def projected_gradient(gradient, a, upper):
    """The gradient projected on the box ``[0, upper]`` at ``a``."""
    if a <= 0.0:
        return min(gradient, 0.0)
    if a >= upper:
        return max(gradient, 0.0)
    return gradient


@njit
def step_row(code, params, z, i, u, kappa, c, y):
    """Take row ``i``'s exact step (:func:`dual_step`) in place; return its change ``delta``."""
    zi = z[i]
    new_z = dual_step(code, params, zi, u, kappa, c, y)
    z[i] = new_z
    return new_z - zi


@njit(inline="always")
def column_value(pack, local, width):
    """``v`` of record ``local``: ``v_0`` plus the other threads' slots (module docstring).

    ``width`` is ``pack.shape[1]``, read once by the caller: the tests on it are the same
    for every nonzero of a pass (a width of 2, one thread, adds nothing). Inlined by numba:
    a call per nonzero costs the pass more than the sum (BENCHMARKS.md, "Kernel choices").
    """
    value = pack[local, PACK_V]
    if width >= 4:
        value += pack[local, PACK_SLOT] + pack[local, PACK_SLOT + 1]
        if width == 8:
            value += (pack[local, PACK_SLOT + 2] + pack[local, PACK_SLOT + 3]) + (
                pack[local, PACK_SLOT + 4] + pack[local, PACK_SLOT + 5]
            )
    return value


@njit(inline="always")
def row_dots(pack, indices, vals, binary, start, stop, last_ahead, width):
    """``(x_i . v, x_i . w)`` over the row's nonzeros ``start:stop``, prefetching the record
    :data:`PREFETCH_AHEAD` nonzeros on (up to the nonzero ``last_ahead``).

    Inlined by numba; a caller passes ``width`` as a constant (2, 4 or 8), so each copy is
    the loop of one record width, without the per-nonzero tests of :func:`column_value`
    (left in the loop, they slowed a serial round: BENCHMARKS.md).
    """
    u = 0.0
    u_start = 0.0
    if binary:
        for e in range(start, stop):
            if e < last_ahead:
                prefetch_record(pack, indices[e + PREFETCH_AHEAD])
            j = indices[e]
            u += column_value(pack, j, width)
            u_start += pack[j, PACK_W]
    else:
        for e in range(start, stop):
            if e < last_ahead:
                prefetch_record(pack, indices[e + PREFETCH_AHEAD])
            j = indices[e]
            x = np.float64(vals[e])
            u += x * column_value(pack, j, width)
            u_start += x * pack[j, PACK_W]
    return u, u_start


@njit(inline="always")
def row_dot(pack, indices, vals, binary, start, stop, last_ahead, width):
    """``x_i . v`` over the row's nonzeros ``start:stop`` (as :func:`row_dots`; ``width`` 1:
    records of one value, ``v`` itself, as :func:`start_margins` reads them)."""
    u = 0.0
    if binary:
        for e in range(start, stop):
            if e < last_ahead:
                prefetch_record(pack, indices[e + PREFETCH_AHEAD])
            u += column_value(pack, indices[e], width)
    else:
        for e in range(start, stop):
            if e < last_ahead:
                prefetch_record(pack, indices[e + PREFETCH_AHEAD])
            u += np.float64(vals[e]) * column_value(pack, indices[e], width)
    return u


@njit
def add_row(pack, slot, indices, vals, binary, start, stop, coef):
    """``pack[:, slot] += coef x_i`` over the row's nonzeros ``start:stop`` (``slot``: the
    calling thread's field, :func:`slot_field`).

    Arrays, not a :class:`GroupRows`: this runs once per row, and a record passed to a call
    LLVM does not inline is copied at each call.
    """
    if binary:
        for e in range(start, stop):
            pack[indices[e], slot] += coef
    else:
        for e in range(start, stop):
            pack[indices[e], slot] += coef * np.float64(vals[e])


@njit
def start_pack(w, columns, pack):
    """``pack[l] = (w_j, w_j, 0, ..., 0)`` for ``j = columns[l]``: the group's columns of
    ``w``.

    Parameters
    ----------
    w : ndarray of shape (n_features,)
    columns : ndarray of shape (n_columns,), int32
        The columns the group's rows use, increasing.
    pack : ndarray of shape (n_columns, width)
        Output (:func:`pack_width`).
    """
    for local in range(columns.shape[0]):
        value = w[columns[local]]
        pack[local, PACK_V] = value
        pack[local, PACK_W] = value
        for field in range(PACK_SLOT, pack.shape[1]):
            pack[local, field] = 0.0


@njit
def squared_norm(w):
    """``||w||^2``, summed in index order."""
    total = 0.0
    for j in range(w.shape[0]):
        total += w[j] * w[j]
    return total


@njit
def finish_pack(pack, sigma, direct, out):
    """The group's contribution to the next ``w``: ``(v - w) / sigma``, or ``v`` if ``direct``.

    ``direct`` (one group, ``sigma = 1``): ``v``, the point the passes ended at, is the next
    ``w`` itself, so one group in one thread is serial dual coordinate ascent bit for bit.

    Parameters
    ----------
    pack : ndarray of shape (n_columns, width)
    sigma : float
    direct : bool
    out : ndarray of shape (n_columns,)
        Output.
    """
    width = pack.shape[1]
    if direct:
        for local in range(out.shape[0]):
            out[local] = column_value(pack, local, width)
        return
    for local in range(out.shape[0]):
        out[local] = (column_value(pack, local, width) - pack[local, PACK_W]) / sigma


@njit
def shift_norm(pack, new_w):
    """``||new_w - w||``, ``w`` the round's start in ``pack[:, PACK_W]``: how far a row's
    margin may move between two rounds' starts, per unit of ``||x_i||`` (screening)."""
    total = 0.0
    for local in range(new_w.shape[0]):
        change = new_w[local] - pack[local, PACK_W]
        total += change * change
    return math.sqrt(total)


@njit
def column_shift(w, w_next, columns):
    """``||w_next[columns] - w[columns]||``: :func:`shift_norm` on a group's columns, from
    two whole ``w`` vectors (several groups, where the next ``w`` is summed elsewhere)."""
    total = 0.0
    for local in range(columns.shape[0]):
        change = w_next[columns[local]] - w[columns[local]]
        total += change * change
    return math.sqrt(total)


@njit
def rounded_start(w, columns, out):
    """``out[l, 0] = float32(w_j)`` for ``j = columns[l]``, and ``||w[columns] - out||``
    (float64): the values and the slack of :func:`start_margins`.

    Parameters
    ----------
    w : ndarray of shape (n_features,)
    columns : ndarray of shape (n_columns,), int32
    out : ndarray of shape (n_columns, 1), float32
        Output.
    """
    total = 0.0
    for local in range(columns.shape[0]):
        value = w[columns[local]]
        rounded = np.float32(value)
        out[local, 0] = rounded
        # exact: a float64 less its nearest float32 is a float64
        change = value - np.float64(rounded)
        total += change * change
    return math.sqrt(total)


@njit
def start_margins(rows, z, values, slack, bounds, lo, hi):
    """Refresh the margin bounds of rows ``lo:hi`` that screening could leave out: for each
    row of weight > 0 at ``z_i = 0`` whose bound is not above :data:`SCREEN_MARGIN`,
    ``bounds[i] = y_i x_i . values - slack ||x_i||``.

    A read-only pass, about half a step pass's time per nonzero (a gather from a compact
    array, no write to the records), so that the round after one from ``w = 0``, whose
    bounds say nothing, can leave out the rows proven inactive too.

    Parameters
    ----------
    rows : GroupRows
    z : ndarray of shape (m,)
    values : ndarray of shape (n_columns, 1), float32
        The round's start ``w`` on the group's columns, rounded to float32: half the bytes
        of float64 (more of it stays in the last-level cache), one record each for
        :func:`prefetch_record`.
    slack : float
        An upper bound of ``||w - values||`` (the rounding), so that each bound stays a
        lower bound of the margin at ``w`` (Cauchy-Schwarz).
    bounds : ndarray of shape (m,)
        Updated in place.
    lo, hi : int
        The rows of this call (a thread's share).

    Returns
    -------
    int
        Nonzeros read.
    """
    indptr, indices, vals, binary, y, weight, norm_sq = rows
    last_ahead = indices.shape[0] - PREFETCH_AHEAD
    read = 0
    for i in range(lo, hi):
        if weight[i] == 0.0 or z[i] != 0.0 or bounds[i] > SCREEN_MARGIN:
            continue
        start = indptr[i]
        stop = indptr[i + 1]
        # records one value wide: the passes' own dot (its slot sums fold away)
        u = row_dot(values, indices, vals, binary, start, stop, last_ahead, 1)
        bounds[i] = y[i] * u - slack * math.sqrt(norm_sq[i])
        read += stop - start
    return read


@njit
def add_step(w, columns, step, direct):
    """``w[columns] += step`` in place, or ``w[columns] = step`` when ``direct``.

    Parameters
    ----------
    w : ndarray of shape (n_features,)
    columns : ndarray of shape (n_columns,), int32
    step : ndarray of shape (n_columns,)
    direct : bool
    """
    if direct:
        for local in range(columns.shape[0]):
            w[columns[local]] = step[local]
        return
    for local in range(columns.shape[0]):
        w[columns[local]] += step[local]


@njit
def row_norms(indptr, vals, binary, out):
    """``out[i] = ||x_i||^2`` of the CSR rows (float64 sums of the stored values).

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,), int64
    vals : ndarray of shape (nnz,)
        Ignored when ``binary``.
    binary : bool
    out : ndarray of shape (n_rows,)
        Output.
    """
    for i in range(indptr.shape[0] - 1):
        if binary:
            out[i] = float(indptr[i + 1] - indptr[i])
            continue
        total = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            x = np.float64(vals[e])
            total += x * x
        out[i] = total


@njit
def cocoa_pass(rows, z, pack, orders, loss_code, loss_params, steps, pg_range, held, slot, bounds):
    """CoCoA+ local passes over one row group, in place on ``z`` and ``pack[:, slot]``.

    Pass ``p`` visits the rows in the order ``orders[p]``; each visit takes the exact step
    of :func:`dual_step` and adds ``-sigma delta x_i / (alpha n)`` to ``v`` (to its slot
    ``slot``; the steps read ``v``, every thread's slots). The first pass also sums the
    certificate terms of the start point (module docstring).

    Parameters
    ----------
    rows : GroupRows
        The group's rows.
    z : ndarray of shape (m,)
        The group's dual block, updated in place.
    pack : ndarray of shape (n_columns, width)
        The group's columns' records (module docstring): field ``slot`` updated in place,
        the others read only here.
    orders : ndarray of shape (n_passes, m), int64
    loss_code : int
    loss_params : ndarray of float64
    steps : PassSteps
        ``sigma`` and ``1 / (alpha n)``.
    pg_range : ndarray of shape (2,)
        Output (``PG_MAX``, ``PG_MIN``): the largest and the smallest projected gradient
        of the last pass, taken
        before each row's step (:data:`BOX_LOSSES`; ``(0, 0)`` for the other losses and
        for a group without rows of weight > 0).
    held : ndarray of shape (m,) or (0,)
        Output, unless empty (box losses): for each row the last pass visits, its gradient
        ``G`` where the pass left it at a bound without a step, else NaN; what
        :func:`shrink_candidates` reads.
    slot : int
        The field this call adds its steps to (:func:`slot_field` of its thread).
    bounds : ndarray of shape (m,) or (0,)
        Unless empty (:data:`NO_BOUNDS`; box losses only): lower bounds of the rows'
        margins ``y_i x_i . w`` at the round's start. The first pass leaves out the rows at
        ``z_i = 0`` whose bound is above :data:`SCREEN_MARGIN` (module docstring) and sets
        the bound of every row it visits to its exact margin.

    Returns
    -------
    loss_sum : float
        ``sum_i c_i loss(x_i . w, y_i)`` over the group.
    conj_sum : float
        ``sum_i c_i loss*(z_i / c_i, y_i)`` at the entry ``z``.
    skipped : int
        Nonzeros of the rows the first pass left out.
    """
    indptr, indices, vals, binary, y, weight, norm_sq = rows
    # the last nonzero whose successor PREFETCH_AHEAD on is still in the array
    last_ahead = indices.shape[0] - PREFETCH_AHEAD
    width = pack.shape[1]
    loss_sum = 0.0
    conj_sum = 0.0
    sigma, inv_alpha_n = steps
    curvature = sigma * inv_alpha_n
    boxed = loss_code == HINGE or loss_code == SMOOTH_HINGE or loss_code == SQUARED_HINGE
    pg_max = -math.inf
    pg_min = math.inf
    record = boxed and held.shape[0] > 0
    screen = boxed and bounds.shape[0] > 0
    skipped = 0
    for p in range(orders.shape[0]):
        first = p == 0
        last = p == orders.shape[0] - 1
        pg_max = -math.inf
        pg_min = math.inf
        for k in range(orders.shape[1]):
            i = orders[p, k]
            c = weight[i]
            if c == 0.0:
                continue
            start = indptr[i]
            stop = indptr[i + 1]
            if first and screen and z[i] == 0.0 and bounds[i] > SCREEN_MARGIN:
                # inactive at the round's start: no step, 0 to both sums; its projected
                # gradient (a = 0, G > 0) is 0, which the spread takes in below
                skipped += stop - start
                if record and last:
                    held[i] = math.inf
                continue
            # the widths as constants, so that the inlined tests on them fold away
            if width == 2:
                u, u_start = row_dots(pack, indices, vals, binary, start, stop, last_ahead, 2)
            elif width == 4:
                u, u_start = row_dots(pack, indices, vals, binary, start, stop, last_ahead, 4)
            else:
                u, u_start = row_dots(pack, indices, vals, binary, start, stop, last_ahead, 8)
            yi = y[i]
            zi = z[i]
            if first:
                loss_sum += c * scalar.loss_value(loss_code, loss_params, u_start, yi)
                conj_sum += c * scalar.loss_conjugate(loss_code, loss_params, zi / c, yi)
                if screen:
                    bounds[i] = yi * u_start
            gradient = 0.0
            if boxed:
                a = -yi * zi
                gradient, upper = box_gradient(loss_code, loss_params, a, yi * u, c)
                pg = projected_gradient(gradient, a, upper)
                pg_max = max(pg_max, pg)
                pg_min = min(pg_min, pg)
            delta = step_row(loss_code, loss_params, z, i, u, curvature * norm_sq[i], c, yi)
            if delta != 0.0:
                coef = -(sigma * delta) * inv_alpha_n
                add_row(pack, slot, indices, vals, binary, start, stop, coef)
            if record and last:
                held[i] = gradient if delta == 0.0 else math.nan
    if skipped > 0 and orders.shape[0] == 1:
        # the rows left out, at projected gradient 0, in the (last) pass's spread
        pg_max = max(pg_max, 0.0)
        pg_min = min(pg_min, 0.0)
    if pg_max < pg_min:
        # not a box loss, or no row of weight > 0
        pg_max = 0.0
        pg_min = 0.0
    pg_range[PG_MAX] = pg_max
    pg_range[PG_MIN] = pg_min
    return loss_sum, conj_sum, skipped


@njit
def shrink_thresholds(pg_max, pg_min):
    """liblinear's shrinking thresholds from a pass's spread of projected gradients: a side
    with no violation (``pg_max <= 0``, ``pg_min >= 0``) does not shrink."""
    return (pg_max if pg_max > 0.0 else math.inf), (pg_min if pg_min < 0.0 else -math.inf)


@njit
def shrinks(a, gradient, upper, old_max, old_min):
    """liblinear's shrinking test: a row at ``a = 0`` whose gradient is above ``old_max``, or
    at ``a = upper`` with it below ``old_min`` (a NaN gradient never)."""
    return (a <= 0.0 and gradient > old_max) or (a >= upper and gradient < old_min)


@njit
def shrunk_passes(
    rows, z, pack, loss_code, loss_params, steps, pg_range, ratio, max_passes, seed, visit, slot
):
    """Passes with shrinking after a full pass, in place on ``z`` and ``pack[:, slot]``.

    liblinear's heuristic (module docstring, "Shrinking"): a row with ``a = 0`` and
    ``G`` above the previous pass's largest projected gradient, or with ``a = U`` and ``G``
    below its smallest, leaves the active set for the rest of the call. Each pass visits
    the active rows in a new random order; the passes end when the spread of the projected
    gradients they saw is at most ``ratio`` times the spread of the full pass
    (``pg_range``), when no row is left, or after ``max_passes``.

    Parameters
    ----------
    rows, z, pack, loss_code, loss_params, steps
        As for :func:`cocoa_pass` (``loss_code`` one of :data:`BOX_LOSSES`).
    pg_range : ndarray of shape (2,)
        Largest and smallest projected gradient of the full pass before (its output).
    ratio : float
        The passes stop once their spread is at most ``ratio`` times the full pass's.
    max_passes : int
    seed : uint64
        Seed of the visiting orders (Fisher-Yates with splitmix64 of ``seed`` + a counter,
        as :func:`daskpd.kernels.dso.shuffle_runs`: a function of ``seed`` alone).
    visit : ndarray of int64
        The rows these passes may visit (those of weight 0 are skipped): all of the
        group's, or one thread's share of them.
    slot : int
        The field the steps are added to (as for :func:`cocoa_pass`).

    Returns
    -------
    passes : int
        Passes run.
    visited : int
        Nonzeros read (of the rows visited, kept or dropped).
    """
    indptr, indices, vals, binary, y, weight, norm_sq = rows
    last_ahead = indices.shape[0] - PREFETCH_AHEAD
    width = pack.shape[1]
    active = np.empty(visit.shape[0], dtype=np.int64)
    n_active = 0
    for k in range(visit.shape[0]):
        i = visit[k]
        if weight[i] != 0.0:
            active[n_active] = i
            n_active += 1
    old_max, old_min = shrink_thresholds(pg_range[PG_MAX], pg_range[PG_MIN])
    target = ratio * (pg_range[PG_MAX] - pg_range[PG_MIN])
    sigma, inv_alpha_n = steps
    curvature = sigma * inv_alpha_n
    counter = np.uint64(seed)
    passes = 0
    visited = 0
    while passes < max_passes and n_active > 0:
        for k in range(n_active - 1, 0, -1):
            counter += np.uint64(1)
            r = np.int64(splitmix64(counter) % np.uint64(k + 1))
            held = active[k]
            active[k] = active[r]
            active[r] = held
        pg_max = -math.inf
        pg_min = math.inf
        k = 0
        while k < n_active:
            i = active[k]
            start = indptr[i]
            stop = indptr[i + 1]
            visited += stop - start
            if width == 2:
                u = row_dot(pack, indices, vals, binary, start, stop, last_ahead, 2)
            elif width == 4:
                u = row_dot(pack, indices, vals, binary, start, stop, last_ahead, 4)
            else:
                u = row_dot(pack, indices, vals, binary, start, stop, last_ahead, 8)
            yi = y[i]
            zi = z[i]
            c = weight[i]
            a = -yi * zi
            gradient, upper = box_gradient(loss_code, loss_params, a, yi * u, c)
            if shrinks(a, gradient, upper, old_max, old_min):
                # dropped: the last active row takes its place and is visited next
                n_active -= 1
                active[k] = active[n_active]
                active[n_active] = i
                continue
            k += 1
            pg = projected_gradient(gradient, a, upper)
            pg_max = max(pg_max, pg)
            pg_min = min(pg_min, pg)
            if pg == 0.0:
                continue
            delta = step_row(loss_code, loss_params, z, i, u, curvature * norm_sq[i], c, yi)
            if delta != 0.0:
                coef = -(sigma * delta) * inv_alpha_n
                add_row(pack, slot, indices, vals, binary, start, stop, coef)
        passes += 1
        if pg_max - pg_min <= target:
            break
        old_max, old_min = shrink_thresholds(pg_max, pg_min)
    return passes, visited


@njit
def shrink_candidates(rows, z, held, loss_code, loss_params, pg_range, visit, cold_gradient):
    """The rows of ``visit`` (in its order) that the first shrunk pass would not drop at
    once, judged by the full pass's gradients ``held`` (:func:`cocoa_pass`).

    A row the full pass left at a bound without a step, its gradient pushing it further
    out than the pass's spread (``pg_range``: liblinear's test, as in
    :func:`shrunk_passes`), is not handed to the shrunk passes: they would read its
    nonzeros only to drop it. Near a solution that is most rows (about 97% on the
    splice-like sets), whose reads were most of a round's shrunk passes. The gradient is
    the one of the row's visit in the full pass, not of the state after it: the same age
    liblinear's own test uses within a pass. A row dropped wrongly is visited by the next
    round's full pass, and the certificate does not depend on the shrinking.

    A pass that saw no positive projected gradient (``pg_range[PG_MAX] <= 0``: every row
    at ``a = 0`` before its step, as in a round from ``z = 0``) gives liblinear's test no
    threshold on that side, and its first shrunk pass then reads every row again. Here a
    row at ``a = 0`` is left out when its gradient was above ``cold_gradient`` instead
    (``G = y_i x_i . w - 1`` at ``a = 0`` for every box loss: a margin above
    ``1 + cold_gradient``; ``inf``: liblinear's rule).
    """
    indptr, indices, vals, binary, y, weight, norm_sq = rows
    old_max, old_min = shrink_thresholds(pg_range[PG_MAX], pg_range[PG_MIN])
    if old_max == math.inf:
        old_max = cold_gradient
    kept = np.empty(visit.shape[0], dtype=np.int64)
    n_kept = 0
    for k in range(visit.shape[0]):
        i = visit[k]
        c = weight[i]
        if c == 0.0:
            continue
        gradient = held[i]
        if not math.isnan(gradient):
            a = -y[i] * z[i]
            upper = box_gradient(loss_code, loss_params, a, 0.0, c)[1]
            if shrinks(a, gradient, upper, old_max, old_min):
                continue
        kept[n_kept] = i
        n_kept += 1
    return kept[:n_kept].copy()
