"""Numba kernels of SPDC (Zhang & Xiao, "Stochastic Primal-Dual Coordinate Method for
Regularized Empirical Risk Minimization", JMLR) over one CSR row block.

Translation table (paper -> code), used in every docstring of this module:

==========================  =========================================
paper                       code
==========================  =========================================
``x`` (primal)              ``w``
``y`` (dual)                ``z``
``b`` (label)               ``labels``
``lambda``                  ``alpha`` (here split into ``l1``, ``l2``)
``a_k`` (row k of ``A``)    row ``k`` of the CSR block
``u = A^T y / n``           ``u``
``xbar``                    ``w + theta (w - w_prev)``
``tau, sigma, theta``       ``tau, sigma, theta``
==========================  =========================================

The regularizer reaches the kernels as ``g(w) = l1 ||w||_1 + (l2 / 2) ||w||^2`` (Section 6
of the paper); L2, L1, elastic net and the zero regularizer are all of this form, and the
Section 3 perturbation adds ``delta`` to ``l2``. The loss reaches them as ``(code, params)``
and its dual step is :func:`daskpd.kernels.scalar.loss_prox_conjugate`; the Section 3
perturbation ``phi^* + (delta / 2) beta^2`` is folded into that prox by rescaling.

Lazy updates (Section 6, digest Section 5): a coordinate ``j`` untouched by the sampled rows
evolves by a fixed 1-D map while ``u_j`` is frozen, so its catch-up has a closed form. Per
coordinate we keep ``w[j]`` (value at time ``stamp[j]``), ``w_prev[j]`` (value at time
``stamp[j] - 1``) and ``stamp[j]``; ``u`` is always current. The closed forms use the
numerically stable ``expm1`` / ``log1p`` form of the digest, not the paper's (36); without an
L1 term the factors of the usual skips come from a table of the same numbers
(:func:`geometric_table`). The four values of a coordinate sit side by side in one row of
``state`` (:data:`LAZY_W`, ...): a sampled row's nonzero costs one random cache line, not
four (at 1e7 splice-like nonzeros 28 ns a nonzero against 119 ns with four arrays, and 159 ns
with the mini-batch loop's scratch as well).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from daskpd.kernels._config import njit
from daskpd.kernels.intrinsics import atomic_add_record, prefetch_record
from daskpd.kernels.scalar import loss_prox_conjugate

#: How many nonzeros of a row ahead the row loops prefetch a coordinate's ``state`` row. A
#: sampled row's columns are random rows of ``state`` (150 MB at 4.66M features), so the
#: catch-up loop waited on memory at every nonzero; 16 is the fastest of the distances
#: tried, with the same iterates bit for bit (BENCHMARKS.md, "Kernel choices").
PREFETCH_AHEAD = 16

# The scalar parameters of an update, packed into one float64 array (see
# :func:`step_scalars`); DSPDC's kernels read the same layout.
#: primal step, dual step and extrapolation
SCALAR_TAU = 0
SCALAR_SIGMA = 1
SCALAR_THETA = 2
#: regularizer ``l1 ||w||_1 + (l2 / 2) ||w||^2`` (already multiplied by ``alpha``)
SCALAR_L1 = 3
SCALAR_L2 = 4
#: Section 3 perturbation of the dual (0 for smooth losses)
SCALAR_DELTA = 5
#: number of rows ``n`` of the whole data set, as a float
SCALAR_N = 6
N_SCALARS = 7


def step_scalars(tau, sigma, theta, l1, l2, delta, n_total):
    """The float parameters of an update as the kernels' array.

    Parameters
    ----------
    tau, sigma, theta : float
        Step sizes and extrapolation.
    l1, l2 : float
        Regularizer ``l1 ||w||_1 + (l2 / 2) ||w||^2``.
    delta : float
        Section 3 perturbation of the dual.
    n_total : int
        Number of rows of the whole data set (exact in a float64 below ``2**53``, so the
        kernels' ``1 / n`` is the same number as with an integer).

    Returns
    -------
    scalars : ndarray of shape (N_SCALARS,)
        Indexed by the ``SCALAR_*`` constants.
    """
    scalars = np.empty(N_SCALARS)
    scalars[SCALAR_TAU] = tau
    scalars[SCALAR_SIGMA] = sigma
    scalars[SCALAR_THETA] = theta
    scalars[SCALAR_L1] = l1
    scalars[SCALAR_L2] = l2
    scalars[SCALAR_DELTA] = delta
    scalars[SCALAR_N] = n_total
    return scalars


@njit
def scalar_values(scalars):
    """The kernels' scalar array as ``(tau, sigma, theta, l1, l2, delta, n)`` (floats)."""
    return (
        scalars[SCALAR_TAU], scalars[SCALAR_SIGMA], scalars[SCALAR_THETA], scalars[SCALAR_L1],
        scalars[SCALAR_L2], scalars[SCALAR_DELTA], scalars[SCALAR_N],
    )  # fmt: skip


class BlockRows(NamedTuple):
    """A CSR row block as :func:`spdc_rows` (and DSPDC's ``dspdc_rows``) read it.

    Attributes
    ----------
    indptr : ndarray of shape (n_block_rows + 1,), int64
    indices : ndarray of shape (nnz,), int32 or int64
    data : ndarray of shape (nnz,) or (0,), float32 or float64
        Stored values; ignored (may be empty) when ``binary``.
    binary : bool
        Whether all stored values are 1.
    labels : ndarray of shape (n_block_rows,)
        Labels (``b``) of the block.
    weights : ndarray of shape (n_block_rows,) or (0,)
        Row weights ``c_k`` of the loss (empty: all 1).
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    binary: bool
    labels: np.ndarray
    weights: np.ndarray


class RowSample(NamedTuple):
    """The rows :func:`spdc_rows` visits and their inclusion probabilities.

    Attributes
    ----------
    order : ndarray of int64
        Local row ids, ``batch_size`` per iteration (length a multiple of ``batch_size``).
    batch_size : int
        ``m`` of the paper.
    inv_npi : ndarray of shape (n_block_rows,)
        ``1 / (n pi_k)`` with ``pi_k`` the inclusion probability of row ``k`` per
        iteration: ``1 / m`` for uniform sampling, ``1 / (n p_k)`` for weighted.
        The dual step of row ``k`` is ``sigma m inv_npi[k]``.
    """

    order: np.ndarray
    batch_size: int
    inv_npi: np.ndarray


# Fields of a row of the lazy primal state (one row a coordinate, one cache line).
#: ``w_j`` at time ``stamp_j``
LAZY_W = 0
#: ``w_j`` at time ``stamp_j - 1``
LAZY_W_PREV = 1
#: ``u_j = (A^T y / n)_j``, always current
LAZY_U = 2
#: ``stamp_j``, the last update time (an integer held in a float64: exact below ``2**53``)
LAZY_STAMP = 3
LAZY_WIDTH = 4


class LazyPrimal(NamedTuple):
    """The lazy primal state of :func:`spdc_rows` and its scratch (module docstring).

    Attributes
    ----------
    state : ndarray of shape (n_features, LAZY_WIDTH)
        ``w``, ``w_prev``, ``u`` and the last update time of each coordinate, side by side
        (:data:`LAZY_W`, :data:`LAZY_W_PREV`, :data:`LAZY_U`, :data:`LAZY_STAMP`).
    mark : ndarray of shape (n_features,), int64
        Scratch of the mini-batch loop: the last iteration that touched each coordinate;
        must hold values below the kernel's ``t_start``.
    acc : ndarray of shape (n_features,)
        Scratch of the mini-batch loop: the primal correction of the iteration.
    factors : ndarray of shape (size, 2)
        :func:`geometric_table` of the run's ``tau`` and ``l2`` (any ``size``, 0 included;
        read only when ``l1 = 0``).
    """

    state: np.ndarray
    mark: np.ndarray
    acc: np.ndarray
    factors: np.ndarray


#: Bytes a state's first record is aligned to (a cache line): each 32-byte record then sits
#: in one line. NumPy's large arrays start 16 bytes past a page (glibc's mmap chunks), where
#: every other record straddles two lines, which costs the row loop a tenth of its epoch
#: (BENCHMARKS.md, "Kernel choices").
RECORD_ALIGN = 64


def aligned_records(n, width=LAZY_WIDTH):
    """An uninitialized ``(n, width)`` float64 array starting at a :data:`RECORD_ALIGN` byte.

    Returns
    -------
    ndarray of shape (n, width)
    """
    per = RECORD_ALIGN // 8
    raw = np.empty(n * width + per, dtype=np.float64)
    shift = (-raw.ctypes.data % RECORD_ALIGN) // 8
    return raw[shift : shift + n * width].reshape(n, width)


def is_record_aligned(state):
    """Whether ``state``'s first record starts at a :data:`RECORD_ALIGN` byte."""
    return state.ctypes.data % RECORD_ALIGN == 0


def lazy_state(w, w_prev, u, t, out=None):
    """A :class:`LazyPrimal` ``state`` of coordinates all current at time ``t``.

    Parameters
    ----------
    w, w_prev, u : ndarray of shape (n_features,)
    t : int
    out : ndarray of shape (n_features, LAZY_WIDTH), optional
        Where to write it; a new array (:func:`aligned_records`) when None.

    Returns
    -------
    state : ndarray of shape (n_features, LAZY_WIDTH)
    """
    state = aligned_records(np.shape(w)[0]) if out is None else out
    state[:, LAZY_W] = w
    state[:, LAZY_W_PREV] = w_prev
    state[:, LAZY_U] = u
    state[:, LAZY_STAMP] = float(t)
    return state


#: Skipped-step counts below this take their geometric factors from a table
#: (:func:`geometric_table`, 1 MiB): on splice-like data the coordinates of about two thirds
#: of the nonzeros are touched at least every 65,536 iterations.
FACTOR_TABLE = 1 << 16


@njit
def geometric_factor(k, tau, l2):
    """Return ``r^k`` and ``(1 - r^k) / l2`` with ``r = 1 / (1 + l2 tau)``, stably.

    Parameters
    ----------
    k : int
        Number of skipped steps (``k >= 0``).
    tau : float
        Primal step size.
    l2 : float
        Strong convexity of the regularizer (``lambda_2`` of the paper); may be 0, where
        the second value tends to ``k tau``.

    Returns
    -------
    rk : float
    one_minus_rk_over_l2 : float
    """
    if l2 == 0.0:
        return 1.0, k * tau
    log_r = -k * math.log1p(l2 * tau)
    return math.exp(log_r), -math.expm1(log_r) / l2


@njit
def geometric_table(tau, l2, size):
    """``table[k] = geometric_factor(k, tau, l2)`` for ``k < size`` (the same bits).

    Parameters
    ----------
    tau, l2 : float
        As for :func:`geometric_factor`.
    size : int
        Entries (:data:`FACTOR_TABLE` in the solver).

    Returns
    -------
    table : ndarray of shape (size, 2)
        ``r^k`` and ``(1 - r^k) / l2``.
    """
    table = np.empty((size, 2))
    for k in range(size):
        rk, s = geometric_factor(k, tau, l2)
        table[k, 0] = rk
        table[k, 1] = s
    return table


@njit
def skip_factors(skipped, tau, l2, factors):
    """``geometric_factor(skipped, tau, l2)``, from the table when it holds ``skipped``."""
    if skipped < factors.shape[0]:
        return factors[skipped, 0], factors[skipped, 1]
    return geometric_factor(skipped, tau, l2)


@njit
def lazy_l2(x0, u, skipped, tau, l2, factors):
    """:func:`lazy_steps` without an L1 term (``skipped >= 0`` steps), factors by
    :func:`skip_factors`: the same numbers."""
    if skipped <= 0:
        return x0
    rk, s = skip_factors(skipped, tau, l2, factors)
    return rk * x0 - u * s


@njit
def primal_step(v_in, u, tau, l1, l2):
    """One primal prox step ``prox_{tau g}(w - tau u)`` for one coordinate.

    Equations (34) and (37) of the paper: ``soft(w - tau u, tau l1) / (1 + l2 tau)``.
    """
    v = v_in - tau * u
    if l1 == 0.0:
        # The same number as the branches below with a zero threshold, without branching
        # on the sign of v: that sign is a coin toss, and its mispredictions cost SPDC's
        # row loops 11-12 ns of 31 a nonzero (1e8 splice-like, one thread).
        return v / (1.0 + l2 * tau)
    thr = tau * l1
    if v > thr:
        return (v - thr) / (1.0 + l2 * tau)
    if v < -thr:
        return (v + thr) / (1.0 + l2 * tau)
    return 0.0


@njit
def _branch(x0, c, k, tau, l2):
    # k steps of x <- (x - tau c) / (1 + l2 tau): r^k x0 - c (1 - r^k) / l2.
    rk, s = geometric_factor(k, tau, l2)
    return rk * x0 - c * s


@njit
def _positive_run(x0, c, k, tau, l2):
    # Number of steps (<= k) of the positive branch, started from x0 > 0 with c > 0, whose
    # result stays > 0 (each of those steps is then exactly the positive branch of (38)).
    if l2 == 0.0:
        limit = x0 / (tau * c)
    else:
        limit = math.log1p(l2 * x0 / c) / math.log1p(l2 * tau)
    if limit > k + 1.0:
        count = k
    else:
        count = int(math.ceil(limit)) - 1
        if count < 0:
            count = 0
        if count > k:
            count = k
    # Rounding guards: the closed-form bound may be off by one.
    while count > 0 and _branch(x0, c, count, tau, l2) <= 0.0:
        count -= 1
    while count < k and _branch(x0, c, count + 1, tau, l2) > 0.0:
        count += 1
    return count


@njit
def lazy_steps(x0, u, k, tau, l1, l2):
    """Apply ``k`` primal steps to one coordinate while ``u`` is frozen, in O(1).

    Closed form of the recurrence (38) (L1 + L2) or (35) (L2, ``l1 = 0``) of the paper,
    with the Case I/II/III sign-crossing logic and the stable form of the digest.

    Parameters
    ----------
    x0 : float
        Value of ``w_j`` (``x_j`` in the paper) before the skipped steps.
    u : float
        Frozen ``u_j``.
    k : int
        Number of steps.
    tau, l1, l2 : float
        Primal step and regularizer ``l1 |w| + (l2 / 2) w^2``.

    Returns
    -------
    float
        ``w_j`` after ``k`` steps; equals ``k`` applications of :func:`primal_step`.
    """
    if k <= 0:
        return x0
    if l1 == 0.0:
        return _branch(x0, u, k, tau, l2)
    # The map is odd in (x, u), so a negative start mirrors a positive one.
    sign = 1.0
    x = x0
    uu = u
    remaining = k
    while remaining > 0:
        if x < 0.0:
            sign = -sign
            x = -x
            uu = -uu
        if x == 0.0:
            if -uu > l1:
                x = _branch(0.0, uu + l1, remaining, tau, l2)
            elif -uu < -l1:
                x = _branch(0.0, uu - l1, remaining, tau, l2)
            return sign * x
        c = uu + l1
        if c <= 0.0:
            # Moving up towards the positive fixed point: never crosses zero.
            return sign * _branch(x, c, remaining, tau, l2)
        run = _positive_run(x, c, remaining, tau, l2)
        x = _branch(x, c, run, tau, l2)
        remaining -= run
        if remaining > 0:
            x = primal_step(x, uu, tau, l1, l2)
            remaining -= 1
    return sign * x


@njit
def dual_step(code, params, z, c, sigma_k, delta, label):
    """Dual prox step (5)/(9)/(21) of the paper.

    ``argmax_b  b c - phi^*(b) - (delta/2) b^2 - (b - z)^2 / (2 sigma_k)``.

    Parameters
    ----------
    code, params : int, ndarray
        Loss as scalar-op code and parameters.
    z : float
        Current dual coordinate (``y_k`` of the paper).
    c : float
        ``<a_k, xbar>``.
    sigma_k : float
        Effective dual step of this coordinate (``sigma``, or ``sigma m / (n p_k)``).
    delta : float
        Section 3 perturbation of ``phi^*`` (0 for smooth losses).
    label : float
        Label of the row (``b_k``).
    """
    v = z + sigma_k * c
    if delta == 0.0:
        return loss_prox_conjugate(code, params, v, sigma_k, label)
    # prox of sigma (phi^* + delta/2 b^2) at v is prox of sigma' phi^* at v / (1 + sigma delta).
    scale = 1.0 + sigma_k * delta
    return loss_prox_conjugate(code, params, v / scale, sigma_k / scale, label)


@njit
def weighted_dual_step(code, params, z, c, sigma_k, delta, label, weight):
    """Dual step of a row whose loss is scaled by ``weight`` (sample or class weight).

    ``phi = weight * loss`` has conjugate ``weight * loss^*(b / weight)``; in ``s = b / weight``
    the step is :func:`dual_step` with ``sigma_k / weight`` and ``delta * weight``, from
    ``z / weight``. A zero weight keeps the dual coordinate at 0.
    """
    if weight == 1.0:
        return dual_step(code, params, z, c, sigma_k, delta, label)
    if weight == 0.0:
        return 0.0
    return weight * dual_step(code, params, z / weight, c, sigma_k / weight, delta * weight, label)


@njit
def catch_up(j, t, state, tau, l1, l2, factors):
    """Bring coordinate ``j`` to time ``t``: ``w_j`` at ``t`` and ``w_prev_j`` at ``t - 1``.

    Without an L1 term :func:`lazy_steps` is :func:`_branch`, whose factors for a skip
    below ``factors.shape[0]`` come from the table (the same numbers).
    """
    k = t - np.int64(state[j, LAZY_STAMP])
    if k <= 0:
        return
    x0 = state[j, LAZY_W]
    uj = state[j, LAZY_U]
    if l1 != 0.0:
        prev = lazy_steps(x0, uj, k - 1, tau, l1, l2) if k > 1 else x0
    else:
        prev = lazy_l2(x0, uj, k - 1, tau, l2, factors)
    state[j, LAZY_W_PREV] = prev
    state[j, LAZY_W] = primal_step(prev, uj, tau, l1, l2)
    state[j, LAZY_STAMP] = t


#: The most factors :func:`flush` tabulates for itself (64 MiB).
FLUSH_TABLE = 1 << 22


@njit
def flush(t, state, tau, l1, l2, factors):
    """Bring every coordinate to time ``t`` (before evaluation, checkpoint or hand-over).

    Every coordinate is caught up here, with skips up to the iterations since the oldest
    stamp (an epoch's, as the flushes come once an epoch): without an L1 term, when ``factors``
    is shorter than that span, a table of the whole span is made first (one factor per
    possible skip, fewer than one per coordinate), so no coordinate pays for a ``log1p``,
    ``exp`` and ``expm1`` of its own.
    """
    d = state.shape[0]
    if l1 != 0.0:
        for j in range(d):
            catch_up(j, t, state, tau, l1, l2, factors)
        return
    oldest = t
    for j in range(d):
        oldest = min(oldest, np.int64(state[j, LAZY_STAMP]))
    if factors.shape[0] < t - oldest <= min(d, FLUSH_TABLE):
        factors = geometric_table(tau, l2, t - oldest)
    for j in range(d):
        # catch_up's L2 branch written out, as in _single_rows (called: 75 ns a coordinate)
        skipped = t - 1 - np.int64(state[j, LAZY_STAMP])
        if skipped < 0:
            continue
        uj = state[j, LAZY_U]
        prev = lazy_l2(state[j, LAZY_W], uj, skipped, tau, l2, factors)
        state[j, LAZY_W_PREV] = prev
        state[j, LAZY_W] = primal_step(prev, uj, tau, 0.0, l2)
        state[j, LAZY_STAMP] = t


@njit
def spdc_rows(block, z, sample, primal, t_start, code, params, scalars, share=0, shares=1):
    """Run SPDC iterations on the rows ``sample.order`` of one CSR block, with lazy updates.

    Iteration ``t`` takes the next ``batch_size`` entries of ``order`` as the sample ``K``
    and performs, in the paper's order: catch-up of the coordinates in the union ``J`` of
    the supports, dual steps at ``xbar^(t)`` for each ``k`` in ``K``, the primal step on
    ``J`` with the extrapolated dual average ``u + sum_k dz_k a_k / (n pi_k)``, then the
    update of ``u``. Coordinates outside ``J`` are left stale (Section 6). Cost per
    iteration is O(nnz of the sampled rows). One row an iteration (``batch_size = 1``, the
    default) takes :func:`_single_rows`, the same arithmetic in two loops a row.

    With ``shares > 1`` this call runs the iterations ``it = share, share + shares, ...`` of
    the block (at times ``t_start + it``), and ``shares`` calls from as many threads run the
    block together on the one ``state`` and ``z`` (one row an iteration only; each row once,
    as a shuffled pass has it, so that no two threads step one dual coordinate). They race
    on ``w`` of the columns their rows share, as asynchronous coordinate methods do
    (PASSCoDe, Hogwild); their additions to ``u`` are atomic, so ``u = X^T z / n`` holds to
    rounding. A coordinate another thread stamped later than an iteration's time is read
    as it is.

    Parameters
    ----------
    block : BlockRows
        The block's CSR arrays (canonical: no column twice in a row), labels and row
        weights.
    z : ndarray of shape (n_block_rows,)
        Dual block (``y``), updated in place.
    sample : RowSample
        Visit order, batch size and ``1 / (n pi_k)``.
    primal : LazyPrimal
        Lazy primal state (``x``, ``x^(t-1)``, ``u = A^T y / n``, last update time),
        updated in place, the scratch ``mark`` and ``acc``, and the geometric factors.
    t_start : int
        Global iteration counter at entry.
    code, params : int, ndarray
        Loss.
    scalars : ndarray of shape (N_SCALARS,)
        ``tau``, ``sigma``, ``theta``, ``l1``, ``l2``, ``delta`` and ``n`` (the rows of the
        whole data set), indexed by the ``SCALAR_*`` constants (:func:`step_scalars`).
    share, shares : int, default 0 and 1
        This call's thread and the number of threads (1: the whole block, serially).

    Returns
    -------
    int
        Global iteration counter at exit (``t_start`` plus the block's iterations).
    """
    if sample.batch_size == 1:
        return _single_rows(block, z, sample.order, sample.inv_npi, primal.state,
                            primal.factors, t_start, code, params, scalars, share,
                            shares)  # fmt: skip
    if shares != 1:
        raise ValueError("threaded SPDC rows need one row an iteration")
    return _batch_rows(block, z, sample, primal, t_start, code, params, scalars)


@njit
def _batch_rows(block, z, sample, primal, t_start, code, params, scalars):
    # plain arrays and numbers from here on: the per-row helpers below are called with
    # arrays, not records (a record passed to a call LLVM does not inline is copied per call)
    indptr, indices, data, binary, labels, weights = block
    order, batch_size, inv_npi = sample
    state, mark, acc, factors = primal
    tau, sigma, theta, l1, l2, delta, n_total = scalar_values(scalars)
    n_iter = order.shape[0] // batch_size
    touched = np.empty(state.shape[0], dtype=np.int64)
    dz = np.empty(batch_size, dtype=np.float64)
    inv_n = 1.0 / n_total
    has_weights = weights.shape[0] > 0
    t = t_start
    for it in range(n_iter):
        base = it * batch_size
        n_touched = 0
        # Catch up the support and form the dual steps at xbar^(t).
        for b in range(batch_size):
            k = order[base + b]
            stop = indptr[k + 1]
            for p in range(indptr[k], stop):
                if p + PREFETCH_AHEAD < stop:
                    prefetch_record(state, indices[p + PREFETCH_AHEAD])
                j = indices[p]
                if state[j, LAZY_STAMP] < t:
                    catch_up(j, t, state, tau, l1, l2, factors)
                if mark[j] != t:
                    mark[j] = t
                    touched[n_touched] = j
                    n_touched += 1
                    acc[j] = 0.0
        for b in range(batch_size):
            k = order[base + b]
            c = 0.0
            for p in range(indptr[k], indptr[k + 1]):
                j = indices[p]
                xbar = state[j, LAZY_W] + theta * (state[j, LAZY_W] - state[j, LAZY_W_PREV])
                c += xbar if binary else data[p] * xbar
            sigma_k = sigma * batch_size * inv_npi[k]
            weight = weights[k] if has_weights else 1.0
            new = weighted_dual_step(code, params, z[k], c, sigma_k, delta, labels[k], weight)
            dz[b] = new - z[k]
            z[k] = new
        # The primal correction uses the dual change weighted by 1 / (n pi_k).
        for b in range(batch_size):
            k = order[base + b]
            coef = dz[b] * inv_npi[k]
            if coef != 0.0:
                for p in range(indptr[k], indptr[k + 1]):
                    acc[indices[p]] += coef if binary else coef * data[p]
        for q in range(n_touched):
            j = touched[q]
            w_j = state[j, LAZY_W]
            state[j, LAZY_W_PREV] = w_j
            state[j, LAZY_W] = primal_step(w_j, state[j, LAZY_U] + acc[j], tau, l1, l2)
            state[j, LAZY_STAMP] = t + 1
        for b in range(batch_size):
            k = order[base + b]
            coef = dz[b] * inv_n
            if coef != 0.0:
                for p in range(indptr[k], indptr[k + 1]):
                    state[indices[p], LAZY_U] += coef if binary else coef * data[p]
        t += 1
    return t


@njit
def _single_rows(block, z, order, inv_npi, state, factors, t_start, code, params, scalars,
                 share, shares):  # fmt: skip
    # One row an iteration: the union J of the supports is the row (canonical CSR), so the
    # catch-up and <a_k, xbar> share a loop, and so do the primal step and the update of
    # u; no mark/acc scratch. The arithmetic is _batch_rows's operation for operation (the
    # correction 0 + coef x, skipped additions when a coefficient is 0, sigma * 1 == sigma),
    # so the iterates are the same bits (tests/kernels/test_spdc_kernels.py).
    indptr, indices, data, binary, labels, weights = block
    tau, sigma, theta, l1, l2, delta, n_total = scalar_values(scalars)
    inv_n = 1.0 / n_total
    has_weights = weights.shape[0] > 0
    threaded = shares > 1
    for it in range(share, order.shape[0], shares):
        t = t_start + it
        k = order[it]
        start = indptr[k]
        stop = indptr[k + 1]
        c = 0.0
        for p in range(start, stop):
            if p + PREFETCH_AHEAD < stop:
                prefetch_record(state, indices[p + PREFETCH_AHEAD])
            j = indices[p]
            stamp = state[j, LAZY_STAMP]
            if stamp < t:
                if l1 != 0.0:
                    catch_up(j, t, state, tau, l1, l2, factors)
                else:
                    # catch_up's L2 branch written out: called, it took twice this loop's
                    # time (61-73 against 34-40 ns a nonzero at 1e8, inline="always" or not)
                    uj = state[j, LAZY_U]
                    skipped = t - 1 - np.int64(stamp)
                    prev = lazy_l2(state[j, LAZY_W], uj, skipped, tau, l2, factors)
                    state[j, LAZY_W_PREV] = prev
                    state[j, LAZY_W] = primal_step(prev, uj, tau, 0.0, l2)
                    state[j, LAZY_STAMP] = t
            xbar = state[j, LAZY_W] + theta * (state[j, LAZY_W] - state[j, LAZY_W_PREV])
            c += xbar if binary else data[p] * xbar
        weight = weights[k] if has_weights else 1.0
        new = weighted_dual_step(code, params, z[k], c, sigma * inv_npi[k], delta, labels[k],
                                 weight)  # fmt: skip
        dz = new - z[k]
        z[k] = new
        coef = dz * inv_npi[k]
        u_coef = dz * inv_n
        for p in range(start, stop):
            j = indices[p]
            correction = 0.0
            if coef != 0.0:
                correction += coef if binary else coef * data[p]
            w_j = state[j, LAZY_W]
            state[j, LAZY_W_PREV] = w_j
            state[j, LAZY_W] = primal_step(w_j, state[j, LAZY_U] + correction, tau, l1, l2)
            if u_coef != 0.0:
                if threaded:
                    atomic_add_record(state, j, LAZY_U, u_coef if binary else u_coef * data[p])
                else:
                    state[j, LAZY_U] += u_coef if binary else u_coef * data[p]
            # (serially a stamp is never past t; a thread ahead may have stamped it later)
            if state[j, LAZY_STAMP] < t + 1:
                state[j, LAZY_STAMP] = t + 1
    return t_start + order.shape[0]


@njit
def row_dots(indptr, indices, data, binary, w):
    """Return ``X_block @ w`` for a CSR block."""
    n_rows = indptr.shape[0] - 1
    out = np.zeros(n_rows, dtype=np.float64)
    for i in range(n_rows):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            s += w[indices[p]] if binary else data[p] * w[indices[p]]
        out[i] = s
    return out


@njit
def transpose_dot(indptr, indices, data, binary, z, n_features):
    """Return ``X_block^T @ z`` for a CSR block."""
    out = np.zeros(n_features, dtype=np.float64)
    for i in range(indptr.shape[0] - 1):
        zi = z[i]
        if zi != 0.0:
            for p in range(indptr[i], indptr[i + 1]):
                out[indices[p]] += zi if binary else zi * data[p]
    return out
