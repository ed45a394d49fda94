"""Numba kernels of DSO (distributed stochastic saddle-point optimization).

DSO (Matsushima, Yun, Zhang, Vishwanathan) writes regularized risk minimization as a saddle
problem whose objective is a sum over the nonzeros of ``X`` and updates one primal and one
dual coordinate per nonzero. The kernels here run those updates over one tile of the grid;
the schedule lives in :mod:`daskpd.solvers.dso`.

Translation table (paper symbol -> name in this module):

===========================  =============================================================
paper                        code
===========================  =============================================================
``m``, ``d``                 ``n`` (``inv_n = 1/n``), number of columns of the tile block
``lambda``                   ``alpha`` (regularization strength)
``alpha_i``                  ``-z[i]`` (dual variable; the sign is flipped, see below)
``w_j``                      ``w[j]`` (primal variable)
``|Omega_i|``                ``row_nnz`` of row i (the kernel receives ``inv_row_nnz``)
``|Omegabar_j|``             ``col_nnz`` of column j (the kernel receives ``inv_col_nnz``)
``phi_j``                    the separable regularizer ``R_j`` given by ``(reg_code, reg_params)``
``ell_i^*``                  the loss conjugate ``loss*(z, y_i)`` given by ``(loss_code, ...)``
``eta_t``                    ``eta_w`` (primal step) and ``eta_z`` (dual step)
``hat w``, ``hat alpha``     ``w_snap``, ``-z_snap`` (SVRG snapshot)
``Xt^T hat alpha``, ``Xt w``  ``-u_snap`` (``u_snap = X^T z_snap``), ``v_snap = X w_snap``
===========================  =============================================================

Sign convention. With ``z = -alpha`` the saddle function of the paper becomes

    f(w, z) = alpha R(w) + (1/n) sum_i z_i x_i.w - (1/n) sum_i c_i loss*(z_i / c_i, y_i)

(``c_i`` the row weight) and its decomposition over nonzeros (6) gives the per-nonzero
update (8), in the order descent in ``w``, ascent in ``z``:

    g_w = alpha R'(w_j) / |Omegabar_j| + z_i x_ij / n
    g_z = w_j x_ij / n - (loss*)'(z_i / c_i, y_i) / (n |Omega_i|)
    w_j <- clip(w_j - eta_w g_w, -w_bound, w_bound)
    z_i <- clip(z_i + eta_z g_z, z_lo[i], z_hi[i])

Both increments are computed from the old ``(w_j, z_i)`` (simultaneous semantics, which
Lemma 2 needs for an exact serial replay). Labels: the paper folds ``y_i`` into the data
(``x~ = y x``) for classification losses; here the label enters through the conjugate,
``loss*(z, y) = loss*_folded(y z)``. Since ``y`` is +-1 both forms multiply by exactly the
same magnitudes, so this is the folded update with every dual value negated exactly.
"""

from __future__ import annotations

import math
import threading
from typing import NamedTuple

import numpy as np

from daskpd.kernels import scalar
from daskpd.kernels._config import njit
from daskpd.kernels.features import splitmix64
from daskpd.kernels.intrinsics import div_sqrt_pair, prefetch_record
from daskpd.kernels.scalar import ABSOLUTE, HINGE, LOGISTIC, SMOOTH_HINGE, SQUARED

#: Losses whose conjugate slope DSO's dual step knows (see :func:`conjugate_slope`).
DSO_LOSSES = (HINGE, SMOOTH_HINGE, LOGISTIC, SQUARED, ABSOLUTE)
#: Separable regularizers DSO supports.
DSO_REGULARIZERS = (scalar.L2, scalar.L1, scalar.ELASTIC_NET)

#: Distance kept from the ends of the logistic dual interval (App. A of the paper): the
#: conjugate slope ``log((1-a)/a)`` stays below about 32.2 in magnitude.
LOGISTIC_MARGIN = 1e-14

#: How many nonzeros ahead the tile loop prefetches the column and row records. The
#: update's chain (load both records, two square roots and divisions, store) is long and
#: the row records miss the core's caches on splice-like tiles; 8-12 ahead keeps enough
#: misses in flight (grid-2 splice tiles, one core, scratch harness: 7.1e7 updates/s
#: without, 9.8e7 to 1.04e8 at 8-12, 8.5e7 at 64).
PREFETCH_DISTANCE = 12

#: Ways to take the regularizer part of the primal step.
REG_GRADIENT = 0
REG_PROX = 1

# Fields of a dual record (one row of :func:`pack_rows`'s array per row of the group): the
# layout is defined here once, for the kernels and for the Python code that packs and reads.
#: dual value ``z_i``
DUAL_Z = 0
#: its AdaGrad accumulator
DUAL_Z_ACC = 1
#: the dual box ``[z_lo, z_hi]`` (scaled by the row weight)
DUAL_Z_LO = 2
DUAL_Z_HI = 3
#: label
DUAL_Y = 4
#: ``1 / c_i`` (0 for rows of weight 0)
DUAL_INV_WEIGHT = 5
#: ``1 / |Omega_i|``
DUAL_INV_ROW_NNZ = 6
#: SVRG snapshot ``z`` and ``X w_snap`` (records of width :data:`DUAL_WIDTH_SVRG` only)
DUAL_Z_SNAP = 8
DUAL_V_SNAP = 9
#: record widths: 64 bytes, 128 with SVRG (padded to whole cache lines)
DUAL_WIDTH = 8
DUAL_WIDTH_SVRG = 16

# Fields of a column record (one row of :func:`pack_columns`'s array per column of a block).
#: primal value ``w_j``
COL_W = 0
#: its AdaGrad accumulator
COL_W_ACC = 1
#: ``1 / |Omegabar_j|``
COL_INV_COL_NNZ = 2
#: SVRG snapshot ``w`` and ``X^T z_snap`` (records of width :data:`COL_WIDTH_SVRG` only)
COL_W_SNAP = 3
COL_U_SNAP = 4
#: record widths: 32 bytes, 64 with SVRG
COL_WIDTH = 4
COL_WIDTH_SVRG = 8

# The scalar parameters of a tile update, packed into one float64 array (see
# :func:`tile_scalars`): read once at the start of a tile, so the loop is as before.
#: box ``[-w_bound, w_bound]`` on every primal coordinate
SCALAR_W_BOUND = 0
#: regularization strength
SCALAR_ALPHA = 1
#: ``1 / n_samples``
SCALAR_INV_N = 2
#: primal and dual steps (AdaGrad's base steps)
SCALAR_ETA_W = 3
SCALAR_ETA_Z = 4
#: AdaGrad's regularizer
SCALAR_EPS = 5
N_SCALARS = 6


class TileData(NamedTuple):
    """The nonzeros of one tile and the order :func:`dso_tile` visits them in.

    Attributes
    ----------
    rows, cols : ndarray of shape (tile_nnz,), int32
        Local row id (within the row group) and local column id (within the column block).
    vals : ndarray of shape (tile_nnz,) or (0,)
        Values; ignored when ``binary`` (every value is 1).
    binary : bool
        Whether the data is binary.
    segment_ptr : ndarray of shape (n_segments + 1,) or (0,), int64
        When empty, ``order`` is a permutation of the nonzeros. Otherwise ``order`` is a
        permutation of segments ``segment_ptr[s]:segment_ptr[s + 1]`` visited in storage
        order inside each segment.
    order : ndarray, int64
        Visit order (nonzeros or segments).
    interleave : int
        With segments: visit ``interleave`` consecutive segments of ``order`` round-robin
        (one nonzero of each in turn), so that consecutive updates touch different rows
        and the CPU overlaps their dependency chains. 1: one segment after the other.
    """

    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    binary: bool
    segment_ptr: np.ndarray
    order: np.ndarray
    interleave: int


class DualBlock(NamedTuple):
    """The per-row arrays of a dual block (what :func:`pack_rows` interleaves).

    Attributes
    ----------
    z, z_acc : ndarray of shape (n_rows_group,)
        Dual block and its AdaGrad accumulators (updated in place by :func:`dso_tile`).
    z_lo, z_hi : ndarray of shape (n_rows_group,)
        Dual box per row (already scaled by the row weight).
    y : ndarray of shape (n_rows_group,)
        Labels.
    inv_weight : ndarray of shape (n_rows_group,)
        ``1 / c_i`` (0 for rows of weight 0, whose box is ``[0, 0]``).
    inv_row_nnz : ndarray of shape (n_rows_group,)
        ``1 / |Omega_i|`` over the whole dataset.
    z_snap, v_snap : ndarray of shape (n_rows_group,) or (0,)
        SVRG snapshot ``z`` and ``X w_snap`` (unused unless the update's ``svrg``).
    """

    z: np.ndarray
    z_acc: np.ndarray
    z_lo: np.ndarray
    z_hi: np.ndarray
    y: np.ndarray
    inv_weight: np.ndarray
    inv_row_nnz: np.ndarray
    z_snap: np.ndarray
    v_snap: np.ndarray


class TileUpdate(NamedTuple):
    """The update rule of :func:`dso_tile`: loss, regularizer, steps and switches.

    Attributes
    ----------
    loss_code, loss_params, reg_code, reg_params
        Loss and separable regularizer as scalar-op codes.
    alpha : float
        Regularization strength.
    inv_n : float
        ``1 / n_samples`` over the whole dataset.
    eta_w, eta_z : float
        Primal and dual steps (the AdaGrad base step when ``adagrad``).
    w_bound : float
        Box ``[-w_bound, w_bound]`` on every primal coordinate (``inf`` for none).
    eps : float
        AdaGrad regularizer.
    adagrad : bool
        Per-coordinate AdaGrad steps ``eta / sqrt(acc + eps)``.
    svrg : bool
        Use the variance-reduced coupling terms.
    reg_step : int
        :data:`REG_GRADIENT` (subgradient of ``R`` inside the step, as in (8)) or
        :data:`REG_PROX` (proximal step on ``R``).
    """

    loss_code: int
    loss_params: np.ndarray
    reg_code: int
    reg_params: np.ndarray
    alpha: float
    inv_n: float
    eta_w: float
    eta_z: float
    w_bound: float
    eps: float
    adagrad: bool
    svrg: bool
    reg_step: int


def tile_scalars(update):
    """The float parameters of ``update`` (a :class:`TileUpdate`) as the kernels' array.

    Returns
    -------
    scalars : ndarray of shape (N_SCALARS,)
        Indexed by the ``SCALAR_*`` constants.
    """
    scalars = np.empty(N_SCALARS)
    scalars[SCALAR_W_BOUND] = update.w_bound
    scalars[SCALAR_ALPHA] = update.alpha
    scalars[SCALAR_INV_N] = update.inv_n
    scalars[SCALAR_ETA_W] = update.eta_w
    scalars[SCALAR_ETA_Z] = update.eta_z
    scalars[SCALAR_EPS] = update.eps
    return scalars


@njit
def conjugate_slope(code, params, z, y):
    """Derivative of ``z -> loss*(z, y)`` at an interior point of the dual domain.

    Parameters
    ----------
    code : int
        Loss code (:data:`DSO_LOSSES`).
    params : ndarray of shape (n_params,)
        Loss parameters (``params[0] = gamma`` for the smoothed hinge).
    z : float
        Dual value (``-alpha_i`` of the paper), already divided by the row weight.
    y : float
        Label of the row.

    Returns
    -------
    slope : float
        ``(loss*)'(z, y)``: hinge and absolute ``y``; smoothed hinge ``y + gamma z``;
        squared ``y + z``; logistic ``y log((1 - a) / a)`` with ``a = -y z``.
    """
    if code == LOGISTIC:
        a = -y * z
        return y * (math.log1p(-a) - math.log(a))
    if code == SMOOTH_HINGE:
        return y + params[0] * z
    if code == SQUARED:
        return y + z
    return y


def dso_tile(tile, dual_block, columns, update):
    """Run update (8) over every nonzero of one tile, in the given visit order, in place.

    Parameters
    ----------
    tile : TileData
        The tile's nonzeros and visit order.
    dual_block : DualBlock
        The row group's dual arrays; ``z`` and ``z_acc`` are updated in place.
    columns : ndarray of shape (n_cols_block, COL_WIDTH) or (n_cols_block, COL_WIDTH_SVRG)
        Everything the update reads or writes about column ``j``, in one row so that a
        random column costs one cache miss, not five (see :func:`pack_columns` and the
        ``COL_*`` fields): ``w`` (updated), its AdaGrad accumulator (updated),
        ``1 / |Omegabar_j|`` over the whole dataset, and with ``svrg`` the snapshot ``w``
        and ``X^T z_snap``.
    update : TileUpdate
        Loss, regularizer, steps and switches.

    Notes
    -----
    The dual block is packed into one record per row (:func:`pack_rows`) for the loop
    compiled for this loss, regularizer and switches (:func:`_tile_kernel`); ``z`` and
    ``z_acc`` are written back at the end.
    """
    order, segment_ptr = tile.order, tile.segment_ptr
    if segment_ptr.shape[0] > 0 and tile.interleave > 1:
        # the round-robin visit, spelled out once so the kernel's loop stays straight
        order = expand_order(segment_ptr, order, tile.interleave)
        segment_ptr = segment_ptr[:0]
    kernel = _tile_kernel(
        int(update.loss_code), int(update.reg_code), bool(tile.binary), bool(update.adagrad),
        bool(update.svrg), int(update.reg_step),
    )  # fmt: skip
    z = dual_block.z
    # the records go into this thread's scratch: a fresh array per task would cost page
    # faults on every call (as it did for the w block, see pack_columns)
    width = DUAL_WIDTH_SVRG if update.svrg else DUAL_WIDTH
    scratch = thread_scratch("rows", z.shape[0] * width)
    dual = pack_rows(dual_block, update.svrg, out=scratch)
    kernel(
        tile.rows, tile.cols, tile.vals, segment_ptr, order, dual, columns, update.loss_params,
        update.reg_params, tile_scalars(update),
    )  # fmt: skip
    z[:] = dual[:, DUAL_Z]
    dual_block.z_acc[:] = dual[:, DUAL_Z_ACC]


#: The compiled loops of :func:`dso_tile`, one per configuration (see :func:`_tile_kernel`).
TILE_KERNELS = {}
_TILE_KERNELS_LOCK = threading.Lock()
_SCRATCH = threading.local()


def thread_scratch(name, size):
    """This thread's float64 scratch ``name`` of at least ``size`` entries.

    Grown, never shrunk, and reused by every later call with that name in the thread: for
    the dual records of a task, which live only during the call.
    """
    buffer = getattr(_SCRATCH, name, None)
    if buffer is None or buffer.shape[0] < size:
        buffer = np.empty(size)
        setattr(_SCRATCH, name, buffer)
    return buffer


def _tile_kernel(loss_code, reg_code, binary, adagrad, svrg, reg_step):
    """The loop of :func:`dso_tile` compiled for one loss, regularizer and set of switches.

    The switches are closure constants, so LLVM folds every branch on them out of the
    update (the generic loop, with run-time codes, was markedly slower on splice-like tiles).
    Numba keys its disk cache on the closure's values, so each configuration compiles once
    per machine; :data:`TILE_KERNELS` keeps one dispatcher per configuration per process.
    """
    key = (loss_code, reg_code, binary, adagrad, svrg, reg_step)
    with _TILE_KERNELS_LOCK:
        kernel = TILE_KERNELS.get(key)
        if kernel is None:
            kernel = TILE_KERNELS[key] = _make_tile_kernel(*key)
    return kernel


def _make_tile_kernel(loss_code, reg_code, binary, adagrad, svrg, reg_step):
    """Compile the loop of :func:`dso_tile` with the given switches as constants."""

    @njit
    def kernel(
        rows, cols, vals, segment_ptr, order, dual, columns, loss_params, reg_params, scalars
    ):
        w_bound = scalars[SCALAR_W_BOUND]
        alpha = scalars[SCALAR_ALPHA]
        inv_n = scalars[SCALAR_INV_N]
        eta_w = scalars[SCALAR_ETA_W]
        eta_z = scalars[SCALAR_ETA_Z]
        eps = scalars[SCALAR_EPS]
        # plain int64 codes for the scalar helpers: a literal would compile them a second
        # time for that literal type (LLVM still sees the constant once they are inlined)
        loss = np.int64(loss_code)
        reg = np.int64(reg_code)
        use_segments = segment_ptr.shape[0] > 0
        for item in range(order.shape[0]):
            start, end = visit_span(segment_ptr, order, item)
            if not use_segments:
                ahead = item + PREFETCH_DISTANCE
                if ahead < order.shape[0]:
                    prefetch_record(columns, cols[order[ahead]])
                    prefetch_record(dual, rows[order[ahead]])
            for e in range(start, end):
                # the records of a nonzero a few updates ahead (inside this segment: the
                # next segment's place is known only from the order), see PREFETCH_DISTANCE
                if use_segments and e + PREFETCH_DISTANCE < end:
                    prefetch_record(columns, cols[e + PREFETCH_DISTANCE])
                    prefetch_record(dual, rows[e + PREFETCH_DISTANCE])
                i = rows[e]
                j = cols[e]
                x = 1.0 if binary else np.float64(vals[e])
                wj = columns[j, COL_W]
                zi = dual[i, DUAL_Z]
                inv_cnt = columns[j, COL_INV_COL_NNZ]
                inv_row_nnz = dual[i, DUAL_INV_ROW_NNZ]
                # coupling terms of the w and z partial gradients
                if svrg:
                    z_snap = dual[i, DUAL_Z_SNAP]
                    v_snap = dual[i, DUAL_V_SNAP]
                    cw = ((zi - z_snap) * x + columns[j, COL_U_SNAP] * inv_cnt) * inv_n
                    cz = ((wj - columns[j, COL_W_SNAP]) * x + v_snap * inv_row_nnz) * inv_n
                else:
                    cw = zi * x * inv_n
                    cz = wj * x * inv_n
                slope = conjugate_slope(
                    loss, loss_params, zi * dual[i, DUAL_INV_WEIGHT], dual[i, DUAL_Y]
                )
                gz = cz - slope * (inv_n * inv_row_nnz)
                if reg_step == REG_GRADIENT:
                    gw = alpha * scalar.reg_subgradient(reg, reg_params, wj) * inv_cnt + cw
                else:
                    gw = cw
                if adagrad:
                    acc_w = columns[j, COL_W_ACC] + gw * gw
                    acc_z = dual[i, DUAL_Z_ACC] + gz * gz
                    columns[j, COL_W_ACC] = acc_w
                    dual[i, DUAL_Z_ACC] = acc_z
                    # eta_w / sqrt(acc_w + eps) and eta_z / sqrt(acc_z + eps) together:
                    # the same bits, half the divider time (see div_sqrt_pair)
                    step_w, step_z = div_sqrt_pair(eta_w, eta_z, acc_w + eps, acc_z + eps)
                else:
                    step_w = eta_w
                    step_z = eta_z
                new_w = wj - step_w * gw
                if reg_step == REG_PROX:
                    new_w = scalar.reg_prox(reg, reg_params, new_w, step_w * alpha * inv_cnt)
                # min/max, not branches: a hinge dual sits on either end of its box, so
                # a branch on the clip is mispredicted about every other update
                new_w = min(max(new_w, -w_bound), w_bound)
                new_z = min(max(zi + step_z * gz, dual[i, DUAL_Z_LO]), dual[i, DUAL_Z_HI])
                columns[j, COL_W] = new_w
                dual[i, DUAL_Z] = new_z

    return kernel


@njit
def expand_order(segment_ptr, order, interleave):
    """The nonzero sequence that :func:`dso_tile` visits for a segment order.

    Parameters
    ----------
    segment_ptr : ndarray of shape (n_segments + 1,), int64
    order : ndarray of shape (n_segments,), int64
    interleave : int

    Returns
    -------
    sequence : ndarray of shape (n_nonzeros,), int64
    """
    total = 0
    for item in range(order.shape[0]):
        total += segment_ptr[order[item] + 1] - segment_ptr[order[item]]
    out = np.empty(total, dtype=np.int64)
    width = max(interleave, 1)
    position = np.empty(width, dtype=np.int64)
    stop = np.empty(width, dtype=np.int64)
    k = 0
    for first in range(0, order.shape[0], width):
        count = min(width, order.shape[0] - first)
        for s in range(count):
            position[s] = segment_ptr[order[first + s]]
            stop[s] = segment_ptr[order[first + s] + 1]
        remaining = True
        while remaining:
            remaining = False
            for s in range(count):
                if position[s] < stop[s]:
                    out[k] = position[s]
                    k += 1
                    position[s] += 1
                    remaining = True
    return out


@njit
def block_layout(rows, cols, vals, binary, block_cols):
    """Regroup a tile's nonzeros by column sub-block, for the ``"blocked"`` visit order.

    A stable counting sort on ``cols // block_cols``: inside a sub-block the nonzeros keep
    their storage order, so a row-major tile stays row-major there, and each run of one row
    inside one sub-block becomes a segment.

    Parameters
    ----------
    rows, cols : ndarray of shape (tile_nnz,), int32
    vals : ndarray of shape (tile_nnz,) or (0,)
    binary : bool
    block_cols : int
        Columns per sub-block (> 0).

    Returns
    -------
    rows, cols, vals : ndarray
        The nonzeros regrouped (``vals`` stays empty when ``binary``).
    segment_ptr : ndarray of shape (n_segments + 1,), int64
        Runs of one row inside one sub-block.
    block_ptr : ndarray of shape (n_blocks + 1,), int64
        Segments ``block_ptr[b]:block_ptr[b + 1]`` make up sub-block ``b``.
    """
    nnz = rows.shape[0]
    n_cols = 0
    for e in range(nnz):
        if cols[e] + 1 > n_cols:
            n_cols = cols[e] + 1
    n_blocks = max(1, (n_cols + block_cols - 1) // block_cols)
    start = np.zeros(n_blocks + 1, dtype=np.int64)
    for e in range(nnz):
        start[cols[e] // block_cols + 1] += 1
    for b in range(n_blocks):
        start[b + 1] += start[b]
    fill = start[:-1].copy()
    out_rows = np.empty_like(rows)
    out_cols = np.empty_like(cols)
    out_vals = np.empty_like(vals)
    for e in range(nnz):
        b = cols[e] // block_cols
        k = fill[b]
        fill[b] = k + 1
        out_rows[k] = rows[e]
        out_cols[k] = cols[e]
        if not binary:
            out_vals[k] = vals[e]
    # segments: a new one wherever the row or the sub-block changes
    n_segments = 0
    for b in range(n_blocks):
        for k in range(start[b], start[b + 1]):
            if k == start[b] or out_rows[k] != out_rows[k - 1]:
                n_segments += 1
    segment_ptr = np.empty(n_segments + 1, dtype=np.int64)
    block_ptr = np.empty(n_blocks + 1, dtype=np.int64)
    s = 0
    for b in range(n_blocks):
        block_ptr[b] = s
        for k in range(start[b], start[b + 1]):
            if k == start[b] or out_rows[k] != out_rows[k - 1]:
                segment_ptr[s] = k
                s += 1
    block_ptr[n_blocks] = s
    segment_ptr[n_segments] = nnz
    return out_rows, out_cols, out_vals, segment_ptr, block_ptr


@njit
def shuffle_runs(rows, cols, vals, binary, bounds, seed):
    """Shuffle the nonzeros inside each run ``bounds[b]:bounds[b + 1]``; new arrays.

    Fisher-Yates with counter-based draws (splitmix64 of ``seed`` + a counter), so the
    result is a function of ``seed`` alone and no random state is shared with other code.

    Parameters
    ----------
    rows, cols : ndarray of shape (tile_nnz,), int32
    vals : ndarray of shape (tile_nnz,) or (0,)
    binary : bool
    bounds : ndarray of shape (n_runs + 1,), int64
        Nonzero offsets of the runs (sub-blocks), from 0 to ``tile_nnz``.
    seed : uint64

    Returns
    -------
    rows, cols, vals : ndarray
        The nonzeros, each run's in a pseudo-random order (``vals`` stays empty when binary).
    """
    nnz = rows.shape[0]
    perm = np.empty(nnz, dtype=np.int64)
    counter = seed
    for b in range(bounds.shape[0] - 1):
        lo = bounds[b]
        hi = bounds[b + 1]
        for k in range(lo, hi):
            perm[k] = k
        for k in range(hi - 1, lo, -1):
            counter += np.uint64(1)
            pick = lo + np.int64(splitmix64(counter) % np.uint64(k - lo + 1))
            held = perm[k]
            perm[k] = perm[pick]
            perm[pick] = held
    out_rows = np.empty_like(rows)
    out_cols = np.empty_like(cols)
    out_vals = np.empty_like(vals)
    for k in range(nnz):
        e = perm[k]
        out_rows[k] = rows[e]
        out_cols[k] = cols[e]
        if not binary:
            out_vals[k] = vals[e]
    return out_rows, out_cols, out_vals


def pack_rows(dual_block, svrg, out=None):
    """Interleave the per-row arrays of a dual block for :func:`dso_tile`.

    Parameters
    ----------
    dual_block : DualBlock
        ``z_snap`` and ``v_snap`` are read when ``svrg``.
    svrg : bool
    out : ndarray, optional
        Flat float64 scratch of at least ``n_rows_group * DUAL_WIDTH_SVRG`` entries
        (``DUAL_WIDTH`` without SVRG) to pack into (its start is returned, reshaped).

    Returns
    -------
    dual : ndarray of shape (n_rows_group, DUAL_WIDTH) or (n_rows_group, DUAL_WIDTH_SVRG)
        Rows of 64 bytes (128 with SVRG), fields ``DUAL_*``: ``z``, its accumulator, the
        box, ``y``, ``1 / c_i``, ``1 / |Omega_i|``, then ``z_snap`` and ``X w_snap``. In a
        random visit order every update reads a random row's state; one record costs one
        cache miss where seven arrays cost seven.
    """
    n_rows = dual_block.z.shape[0]
    width = DUAL_WIDTH_SVRG if svrg else DUAL_WIDTH
    if out is None:
        dual = np.empty((n_rows, width))
    else:
        dual = out[: n_rows * width].reshape(n_rows, width)
    _pack_rows_into(dual, *dual_block)
    return dual


@njit
def _pack_rows_into(dual, z, z_acc, z_lo, z_hi, y, inv_weight, inv_row_nnz, z_snap, v_snap):
    """One pass over ``dual`` (see :func:`pack_rows`): the fields, the rest zero."""
    svrg = dual.shape[1] > DUAL_WIDTH
    for i in range(dual.shape[0]):
        dual[i, :] = 0.0
        dual[i, DUAL_Z] = z[i]
        dual[i, DUAL_Z_ACC] = z_acc[i]
        dual[i, DUAL_Z_LO] = z_lo[i]
        dual[i, DUAL_Z_HI] = z_hi[i]
        dual[i, DUAL_Y] = y[i]
        dual[i, DUAL_INV_WEIGHT] = inv_weight[i]
        dual[i, DUAL_INV_ROW_NNZ] = inv_row_nnz[i]
        if svrg:
            dual[i, DUAL_Z_SNAP] = z_snap[i]
            dual[i, DUAL_V_SNAP] = v_snap[i]


def pack_columns(w, w_acc, inv_col_nnz, w_snap=None, u_snap=None, out=None):
    """Interleave the per-column arrays of a ``w`` block for :func:`dso_tile`.

    Parameters
    ----------
    w, w_acc, inv_col_nnz : ndarray of shape (n_cols_block,)
    w_snap, u_snap : ndarray of shape (n_cols_block,), optional
        SVRG snapshot vectors (both or neither).
    out : ndarray, optional
        Flat float64 scratch of at least ``n_cols_block * width`` entries to pack into (its
        start is returned, reshaped). DSO's tasks take recycled buffers: a fresh 74 MB
        block's page faults cost 20x the packing itself.

    Returns
    -------
    columns : ndarray of shape (n_cols_block, COL_WIDTH) or (n_cols_block, COL_WIDTH_SVRG)
        Rows of 32 or 64 bytes, fields ``COL_*``: one cache line holds everything of a column.
    """
    svrg = w_snap is not None and w_snap.shape[0] == w.shape[0] and w.shape[0] > 0
    width = COL_WIDTH_SVRG if svrg else COL_WIDTH
    if out is None:
        columns = np.empty((w.shape[0], width))
    else:
        columns = out[: w.shape[0] * width].reshape(w.shape[0], width)
    empty = np.zeros(0)
    _pack_into(columns, w, w_acc, inv_col_nnz, w_snap if svrg else empty, u_snap if svrg else empty)
    return columns


@njit
def _pack_into(columns, w, w_acc, inv_col_nnz, w_snap, u_snap):
    """One sequential pass over ``columns``: the fields, the rest zero."""
    svrg = w_snap.shape[0] > 0
    for j in range(columns.shape[0]):
        row = columns[j]
        row[:] = 0.0
        row[COL_W] = w[j]
        row[COL_W_ACC] = w_acc[j]
        row[COL_INV_COL_NNZ] = inv_col_nnz[j]
        if svrg:
            row[COL_W_SNAP] = w_snap[j]
            row[COL_U_SNAP] = u_snap[j]


@njit
def unpack_columns(columns, w, w_acc):
    """Copy ``w`` and its accumulator out of a packed block (:func:`pack_columns`), one pass.

    Parameters
    ----------
    columns : ndarray of shape (n_cols_block, COL_WIDTH) or (n_cols_block, COL_WIDTH_SVRG)
    w, w_acc : ndarray of shape (n_cols_block,)
        Outputs.
    """
    for j in range(columns.shape[0]):
        w[j] = columns[j, COL_W]
        w_acc[j] = columns[j, COL_W_ACC]


@njit
def running_mean(average, x, count, out):
    """``out = average + (x - average) / count``, one pass (``x`` may be strided).

    Parameters
    ----------
    average, x, out : ndarray of shape (n,)
        ``x`` may be a column of the packed records (:func:`pack_columns`).
    count : float
        Epochs averaged, including ``x``.

    Notes
    -----
    Each element is rounded as numpy's three whole-array steps round it (subtract, divide,
    add), so the result matches the serial replay's ``average + (x - average) / count``
    bit for bit; one pass reads ``x``'s cache lines once instead of three array passes.
    """
    for j in range(out.shape[0]):
        out[j] = (x[j] - average[j]) / count + average[j]


@njit
def visit_span(segment_ptr, order, item):
    """The nonzeros ``start:stop`` of a tile's ``item``-th visit in ``order``.

    A tile stored with segments (``segment_ptr`` not empty) is visited a segment at a time;
    otherwise ``order`` names single nonzeros.

    Parameters
    ----------
    segment_ptr : ndarray of shape (n_segments + 1,) or (0,), int64
    order : ndarray of shape (n_visits,), int64
    item : int

    Returns
    -------
    start, stop : int
    """
    if segment_ptr.shape[0] > 0:
        return segment_ptr[order[item]], segment_ptr[order[item] + 1]
    return order[item], order[item] + 1


@njit
def tile_read_only(rows, cols, vals, binary, segment_ptr, order, w, z):
    """Bare loop with the same memory traffic as :func:`dso_tile` and no arithmetic.

    Reads every nonzero, its ``w`` and ``z`` entries in the given order, and returns a sum
    (so that the reads cannot be optimized away). The benchmark's throughput baseline.

    Parameters
    ----------
    rows, cols, vals, binary, segment_ptr, order
        As in :func:`dso_tile`.
    w : ndarray of shape (n_cols_block,)
    z : ndarray of shape (n_rows_group,)

    Returns
    -------
    total : float
    """
    total = 0.0
    for item in range(order.shape[0]):
        start, stop = visit_span(segment_ptr, order, item)
        for e in range(start, stop):
            x = 1.0 if binary else np.float64(vals[e])
            total += w[cols[e]] * x + z[rows[e]]
    return total


@njit
def dual_boxes(loss_code, loss_params, y, weight, z_lo, z_hi, z0):
    """Dual box and starting point of every row, in place.

    The box is ``c_i`` times the loss's dual domain for the label (logistic: shrunk by
    :data:`LOGISTIC_MARGIN` at both ends, App. A). The start is ``c_i loss'(0, y_i)``
    projected onto the box: the dual point that matches ``w = 0``, optimal for empty rows.

    Parameters
    ----------
    loss_code, loss_params
        Loss as scalar-op code.
    y, weight : ndarray of shape (n_rows,)
        Labels and row weights.
    z_lo, z_hi, z0 : ndarray of shape (n_rows,)
        Outputs.
    """
    for i in range(y.shape[0]):
        lo, hi = scalar.loss_dual_bounds(loss_code, loss_params, y[i])
        if loss_code == LOGISTIC:
            lo = lo + LOGISTIC_MARGIN
            hi = hi - LOGISTIC_MARGIN
        lo = lo * weight[i]
        hi = hi * weight[i]
        z_lo[i] = lo
        z_hi[i] = hi
        start = weight[i] * scalar.loss_derivative(loss_code, loss_params, 0.0, y[i])
        z0[i] = min(max(start, lo), hi)


@njit
def tile_products(rows, cols, vals, binary, z, w, xt_z, x_w):
    """Add ``X_tile^T z`` to ``xt_z`` and ``X_tile w`` to ``x_w`` (SVRG snapshot vectors).

    Parameters
    ----------
    rows, cols, vals, binary
        As in :func:`dso_tile`.
    z : ndarray of shape (n_rows_group,)
    w : ndarray of shape (n_cols_block,)
    xt_z : ndarray of shape (n_cols_block,)
        Accumulated in place.
    x_w : ndarray of shape (n_rows_group,)
        Accumulated in place.
    """
    for e in range(rows.shape[0]):
        x = 1.0 if binary else np.float64(vals[e])
        xt_z[cols[e]] += x * z[rows[e]]
        x_w[rows[e]] += x * w[cols[e]]


@njit
def logistic_dual_newton(a, t, q, c, n_steps):
    """The logistic loss's folded dual coordinate step: safeguarded Newton (Yu, Huang and Lin).

    Maximizes ``-s log(s / c) - (c - s) log((c - s) / c) - s t - q (s - a)^2 / 2`` over ``s``
    inside ``[c e, c (1 - e)]`` (``e`` = :data:`LOGISTIC_MARGIN`, where the entropy's
    derivative stays finite), from ``a`` clipped into it. The coordinate steps of
    :func:`dcd_local` and of CoCoA+ (:mod:`daskpd.kernels.cocoa`) are this one.

    Parameters
    ----------
    a : float
        The coordinate's current value.
    t : float
        ``y x.w``, the row's signed margin at the current ``w``.
    q : float
        Curvature of the quadratic term (``||x||^2`` times the problem's scale, plus any
        proximal weight).
    c : float
        The coordinate's upper bound (the row weight), > 0.
    n_steps : int
        At most this many Newton steps.

    Returns
    -------
    s : float
    """
    lo = c * LOGISTIC_MARGIN
    hi = c * (1.0 - LOGISTIC_MARGIN)
    s = min(max(a, lo), hi)
    for _ in range(n_steps):
        grad = math.log((c - s) / s) - t - q * (s - a)
        hess = c / (s * (c - s)) + q
        step = s + grad / hess
        if step <= lo or step >= hi:
            # Newton left the interval: halfway towards the end it crossed
            step = 0.5 * (s + (lo if step <= lo else hi))
        if abs(step - s) <= 1e-15 * c:
            return step
        s = step
    return s


@njit
def dcd_local(
    indptr,
    indices,
    vals,
    binary,
    y,
    weight,
    loss_code,
    alpha,
    n_passes,
    orders,
    a,
    w,
):
    """Local dual coordinate ascent (Hsieh et al.) on one row group, in place.

    Solves ``min_w alpha/2 ||w||^2 + (1/m_q) sum_i c_i loss(x_i.w, y_i)`` over the rows of
    the group in DSO's folded convention: ``a_i in [0, c_i]`` and
    ``w = sum_i a_i y_i x_i / (alpha m_q)``. Hinge uses the exact coordinate maximizer;
    logistic a few safeguarded Newton steps (Yu, Huang and Lin) kept inside
    ``[c_i e, c_i (1 - e)]`` with ``e`` = :data:`LOGISTIC_MARGIN`. The squared loss has real
    targets, which do not fold: there ``a_i`` is unbounded, ``w = sum_i a_i x_i / (alpha m_q)``
    and the exact maximizer of the quadratic is taken (``a_i = c_i (y_i - x_i.w)`` at the
    optimum, so DSO's dual is ``z_i = -a_i``).

    Parameters
    ----------
    indptr, indices, vals, binary
        CSR rows of the group (``vals`` ignored when ``binary``).
    y, weight : ndarray of shape (m_q,)
    loss_code : int
        :data:`HINGE`, :data:`LOGISTIC` or :data:`SQUARED`.
    alpha : float
    n_passes : int
    orders : ndarray of shape (n_passes, m_q), int64
        Row order of each pass.
    a : ndarray of shape (m_q,)
        Dual start, updated in place.
    w : ndarray of shape (n_features,)
        Must equal ``sum_i a_i y_i x_i / (alpha m_q)`` on entry (squared: without ``y_i``);
        updated in place.
    """
    m_q = y.shape[0]
    scale = 1.0 / (alpha * m_q)
    for t in range(n_passes):
        for k in range(m_q):
            i = orders[t, k]
            c = weight[i]
            start = indptr[i]
            stop = indptr[i + 1]
            if stop == start or c == 0.0:
                continue
            margin = 0.0
            norm_sq = 0.0
            for e in range(start, stop):
                x = 1.0 if binary else np.float64(vals[e])
                margin += w[indices[e]] * x
                norm_sq += x * x
            ai = a[i]
            if loss_code == SQUARED:
                # maximize a y_i - a^2 / (2 c) - a (x.w - ai q) - a^2 q / 2, q = ||x||^2 scale
                new_a = ai + (y[i] - ai / c - margin) / (1.0 / c + norm_sq * scale)
                delta = (new_a - ai) * scale
                for e in range(start, stop):
                    x = 1.0 if binary else np.float64(vals[e])
                    w[indices[e]] += delta * x
                a[i] = new_a
                continue
            margin *= y[i]
            if loss_code == HINGE:
                new_a = ai + (1.0 - margin) / (norm_sq * scale)
                new_a = min(max(new_a, 0.0), c)
            else:
                # maximize c H(s / c) - s margin - q (s - ai)^2 / 2 over s, q = ||x||^2 scale
                new_a = logistic_dual_newton(ai, margin, norm_sq * scale, c, 25)
            delta = (new_a - ai) * y[i] * scale
            if delta != 0.0:
                for e in range(start, stop):
                    x = 1.0 if binary else np.float64(vals[e])
                    w[indices[e]] += delta * x
            a[i] = new_a
