"""The tasks of CoCoA+, one row group each: reading it, its start, its round, the sums.

Tasks are pure: they copy what they mutate. Symbols as in the paper-to-code table of
:mod:`daskpd.solvers.cocoa`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import numpy as np

from daskpd.data.format import NO_VALUES
from daskpd.kernels import cocoa as kernels
from daskpd.kernels import dso as dso_kernels
from daskpd.kernels import scalar
from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers._groups import row_weights
from daskpd.solvers.cocoa._options import CACHE_CHUNKS


class _Group(NamedTuple):
    """The rows of one group as the kernel reads them (resident on the owner)."""

    indptr: np.ndarray
    #: column ids into ``columns`` (the group's own columns)
    indices: np.ndarray
    #: the columns the group uses, increasing (int32)
    columns: np.ndarray
    vals: np.ndarray
    binary: bool
    y: np.ndarray
    weight: np.ndarray
    norm_sq: np.ndarray


class _StreamedGroup(NamedTuple):
    """A group whose rows are read again, a chunk of row blocks at a time, by every round
    (rows that do not fit the owner's memory: ``CocoaOptions(rows="stream")``)."""

    source: object
    start: int
    stop: int
    class_pair: object
    #: every column (global ids, int32): the group's ``w`` is the whole of it
    columns: np.ndarray
    #: the dataset's row-block bounds inside ``start:stop`` (absolute row numbers)
    bounds: np.ndarray


# --------------------------------------------------------------------------------------------
# tasks (pure: they copy what they mutate)


def _load_group(source, start, stop, class_pair, renumber, rehearse=None):
    """Task: rows ``start:stop`` as a :class:`_Group` (read by the owner, kept there).

    ``renumber``: the group's columns are renumbered into the ones it uses (several groups,
    each a part of the rows); one group keeps the global column ids (it uses about every
    column, and renumbering 1e8 nonzeros costs about a second of random writes).
    ``rehearse``: the run's settings, to run :func:`_rehearse` beside the read (on-disk data,
    whose kernel types are known before the read).
    """
    rehearsal = None
    if rehearse is not None:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(1)
        rehearsal = pool.submit(_rehearse, rehearse, bool(source.binary), source.dtype)
        pool.shutdown(wait=False)
    group = _read_rows(source, start, stop, class_pair, None)
    if renumber:
        columns, indices = kernels.local_columns(group.indices, int(source.n_features))
        group = group._replace(columns=columns, indices=indices)
    else:
        group = group._replace(columns=np.arange(int(source.n_features), dtype=np.int32))
    if rehearsal is not None:
        rehearsal.result()
    return group


def _read_rows(source, start, stop, class_pair, columns):
    """Rows ``start:stop`` as a :class:`_Group` on global column ids (``columns`` as given)."""
    indptr, indices, vals, y = source.read_rows_arrays(start, stop)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    binary = vals is None
    vals = _kernel_values(vals)
    y = np.ascontiguousarray(y, dtype=np.float64)
    weight = row_weights(source, y, start, stop, class_pair)
    norm_sq = np.empty(y.shape[0])
    kernels.row_norms(indptr, vals, binary, norm_sq)
    return _Group(indptr, indices, columns, vals, binary, y, weight, norm_sq)


def _open_streamed(source, start, stop, class_pair, rehearse=None):
    """Task: a :class:`_StreamedGroup` of rows ``start:stop`` (nothing read), after the
    rehearsal of :func:`_rehearse` (``rehearse``: the run's settings)."""
    if rehearse is not None:
        _rehearse(rehearse, bool(source.binary), source.dtype)
    edges = np.asarray(source.row_block_bounds, dtype=np.int64)
    inner = edges[(edges > start) & (edges < stop)]
    bounds = np.concatenate([[start], inner, [stop]]).astype(np.int64)
    columns = np.arange(int(source.n_features), dtype=np.int32)
    return _StreamedGroup(source, int(start), int(stop), class_pair, columns, bounds)


def _streamed_chunks(group, chunks):
    """The rows of a streamed group, a chunk at a time: ``(rows, index)`` for each list of
    row blocks in ``chunks``, the blocks' rows as one :class:`_Group` and their row numbers
    in the group. The next chunk is read in a thread while the caller works on this one
    (the kernels release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    def read(blocks):
        parts, index = [], []
        for b in blocks:
            lo, hi = int(group.bounds[b]), int(group.bounds[b + 1])
            parts.append(_read_rows(group.source, lo, hi, group.class_pair, group.columns))
            index.append(np.arange(lo - group.start, hi - group.start, dtype=np.int64))
        return _concatenated(parts, group.columns), np.concatenate(index)

    if len(chunks) == 0:
        return
    with ThreadPoolExecutor(1) as reader:
        pending = reader.submit(read, chunks[0])
        for j in range(len(chunks)):
            rows, index = pending.result()
            if j + 1 < len(chunks):
                pending = reader.submit(read, chunks[j + 1])
            yield rows, index


def _concatenated(parts, columns):
    """One :class:`_Group` of the rows of ``parts``, in order."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    offsets = np.cumsum([0] + [int(part.indptr[-1]) for part in parts])
    indptr = np.concatenate(
        [first.indptr[:1]] + [part.indptr[1:] + offsets[k] for k, part in enumerate(parts)]
    )
    vals = first.vals if first.binary else np.concatenate([part.vals for part in parts])

    def joined(name):
        return np.concatenate([getattr(part, name) for part in parts])

    return _Group(
        indptr, joined("indices"), columns, vals, first.binary, joined("y"), joined("weight"),
        joined("norm_sq"),
    )  # fmt: skip


def _chunks(order, group, stream_nnz):
    """``order``'s row blocks in consecutive lists of about ``stream_nnz`` nonzeros (by the
    group's mean per block). Rows read together are visited in one random order: fewer,
    longer kernel calls, and an order closer to one permutation of the group's rows (on a
    2,000-row logistic set of 14 blocks, block after block left the gap at 1.9e-5 after 8
    rounds against 4.6e-7 in one order; on a 20,000-row set of 100 blocks the two matched).
    """
    n_blocks = len(group.bounds) - 1
    per_block = max(1, int(group.source.nnz) * (group.stop - group.start)
                    // max(1, int(group.source.n_samples)) // max(1, n_blocks))  # fmt: skip
    size = max(1, int(stream_nnz) // per_block)
    return [order[k : k + size] for k in range(0, n_blocks, size)]


def _kernel_values(vals):
    """A group's values as the kernels take them: binary data's empty array, float32 and
    float64 as stored (no 8-byte copy of every float32 value), other types as float64."""
    if vals is None:
        return NO_VALUES
    vals = np.ascontiguousarray(vals)
    if vals.dtype not in (np.float32, np.float64):
        vals = vals.astype(np.float64)
    return vals


def _rehearse(settings, binary, dtype):
    """A round and its sum on three made-up rows, with the real rows' types and the run's
    settings (threads, loss, shrinking).

    A worker's first call of each compiled kernel loads it from numba's cache: 0.1-0.2 s for
    some, about 0.45 s for a round's kernels together at 1e8 nonzeros on this machine, which
    made a fresh run's first round 1.7x a later one with every round doing the same work.
    Run by :func:`_load_group` in a thread while the owner reads its rows, the loading is
    done before the first round and mostly hidden behind the read.
    """
    indptr = np.arange(4, dtype=np.int64)
    columns = np.arange(3, dtype=np.int32)
    vals = _kernel_values(None if binary else np.ones(3, dtype=dtype))
    ones = np.ones(3)
    group = _Group(indptr, columns, columns, vals, binary, np.array([1.0, -1.0, 1.0]), ones, ones)
    _, step, _ = _round_task(group, np.zeros(3), None, np.zeros(3), 0, settings, True)
    _sum_task(np.zeros(3), settings.direct, None, step, columns)


def _dual_box(settings, group):
    """Bounds of every row's dual value: ``c_i`` times the loss's dual domain."""
    lo = np.empty(group.y.shape[0])
    hi = np.empty(group.y.shape[0])
    scalar.loss_dual_bounds_array(settings.loss_code, settings.loss_params, group.y, lo, hi)
    weight = group.weight
    with np.errstate(invalid="ignore"):
        lo, hi = lo * weight, hi * weight
    # weight 0: the box is {0} (0 * inf is not)
    lo[weight == 0] = 0.0
    hi[weight == 0] = 0.0
    return lo, hi


def _start_task(group, settings, z_start, w_start):
    """Task: a group's starting dual block, its columns and ``X_k^T z_k`` on them (warm
    starts only).

    From ``z_start`` (projected on the dual box) or, without one, from the primal start:
    ``z_i = c_i loss'(x_i . w_start, y_i)``, the dual point that matches ``w_start``.
    """
    if isinstance(group, _StreamedGroup):
        return _streamed_start(group, settings, z_start, w_start)
    lo, hi = _dual_box(settings, group)
    if z_start is not None:
        z = np.asarray(z_start, dtype=np.float64)
    else:
        # every column (a streamed group's blocks): w itself, not a copy through the ids
        full = group.columns.shape[0] == w_start.shape[0]
        scores = spdc_kernels.row_dots(
            group.indptr, group.indices, group.vals, group.binary,
            w_start if full else w_start[group.columns],
        )  # fmt: skip
        slopes = np.empty_like(scores)
        scalar.loss_derivative_array(
            settings.loss_code, settings.loss_params, scores, group.y, slopes
        )
        z = group.weight * slopes
    z = np.clip(z, lo, hi)
    xt_z = spdc_kernels.transpose_dot(
        group.indptr, group.indices, group.vals, group.binary, z, group.columns.shape[0]
    )
    return z, group.columns, xt_z


def _streamed_start(group, settings, z_start, w_start):
    """:func:`_start_task` of a streamed group, a chunk of row blocks at a time."""
    z = np.empty(group.stop - group.start)
    xt_z = np.zeros(group.columns.shape[0])
    chunks = _chunks(np.arange(len(group.bounds) - 1), group, settings.stream_nnz)
    for rows, index in _streamed_chunks(group, chunks):
        z[index], _, part = _start_task(
            rows, settings, None if z_start is None else z_start[index], w_start
        )
        xt_z += part
    return z, group.columns, xt_z


def _picked(source, pick):
    return source if pick is None else source[pick]


def _round_task(group, zsrc, zpick, w, seed, settings, with_norm):
    """Task ``(round, k)``: the local passes of group ``k`` from ``(w, z_k)``.

    ``z_k`` is ``zsrc``, or ``zsrc[zpick]`` (the tuple of the group's previous round).
    Returns ``(z_k new, step_k, stats_k)``: ``step_k`` is ``dw_k`` on the group's columns
    (or, ``direct``, the next ``w`` there) and ``stats_k = (loss sum at w, conj sum
    at z_k, ||w||^2 if with_norm else 0, shrunk passes, nonzeros they read)``.

    A streamed group (:class:`_StreamedGroup`): see :func:`_streamed_round`.
    """
    z = np.array(_picked(zsrc, zpick), dtype=np.float64, copy=True)
    rng = np.random.default_rng(seed)
    n_columns = group.columns.shape[0]
    width = kernels.PACK_WIDTH
    pack = dso_kernels.thread_scratch("cocoa_pack", width * n_columns)
    pack = pack[: width * n_columns].reshape(n_columns, width)
    kernels.start_pack(w, group.columns, pack)
    threaded = settings.threads > 1 and z.shape[0] > 1
    n_threads = min(int(settings.threads), z.shape[0]) if threaded else 1
    # (loss sum, conjugate sum, shrunk passes, nonzeros they read), per thread
    sums = np.zeros((n_threads, 4))
    partial = np.zeros((n_threads, n_columns)) if threaded else None
    passes = _threaded_passes if threaded else _serial_passes
    w_norm_sq = kernels.squared_norm(w) if with_norm else 0.0
    settled = None
    if settings.stop_gap > 0.0 and settings.grid == 1 and with_norm:
        settled = functools.partial(_start_certified, settings, w_norm_sq)
    if isinstance(group, _StreamedGroup):
        _streamed_round(group, z, rng, pack, settings, partial, sums, passes, settled)
    else:
        orders = _orders(rng, settings, z.shape[0])
        shrink_seed = rng.integers(2**63, dtype=np.uint64)
        passes(group, z, orders, shrink_seed, pack, settings, partial, sums, np.zeros(2),
               settled)  # fmt: skip
    if threaded:
        # the exact -X^T dz / (alpha n) of the threads' rows, summed in thread order
        dw = partial.sum(axis=0) * -settings.inv_alpha_n
        step = w[group.columns] + dw if settings.direct else dw
    else:
        step = np.empty(n_columns)
        kernels.finish_pack(pack, settings.sigma, settings.direct, step)
    loss_sum = conj_sum = 0.0
    for t in range(n_threads):
        loss_sum += sums[t, 0]
        conj_sum += sums[t, 1]
    stats = [loss_sum, conj_sum, w_norm_sq, sums[:, 2].sum(), sums[:, 3].sum()]
    return z, step, np.array(stats)


def _start_certified(settings, w_norm_sq, sums):
    """Whether the full passes' sums certify the round's start within the run's ``tol``.

    One group's full passes sum the whole problem's certificate of the round's start; when
    its gap is at most ``tol`` the driver stops after this round and returns that start, so
    the round's shrunk passes would change nothing the user gets (at 1e8 nonzeros, hinge,
    about half of a round): they are skipped.
    """
    loss_sum = conj_sum = 0.0
    for t in range(sums.shape[0]):  # in thread order, as the round's own stats
        loss_sum += sums[t, 0]
        conj_sum += sums[t, 1]
    primal, dual = _certificate(settings, [(loss_sum, conj_sum, w_norm_sq)])
    return primal - dual <= settings.stop_gap


def _orders(rng, settings, m):
    """The visiting orders of a round's full passes over ``m`` rows."""
    orders = np.empty((settings.local_passes, m), dtype=np.int64)
    for p in range(settings.local_passes):
        orders[p] = rng.permutation(m)
    return orders


def _streamed_round(group, z, rng, pack, settings, partial, sums, passes, settled=None):
    """The passes of a round over a streamed group, in place on ``z`` and ``v``.

    The group is read in chunks of row blocks (blocks in a random order, about
    ``settings.stream_nnz`` nonzeros a chunk); each chunk's full passes, in one random
    order over its rows, run before the next chunk's. With shrinking (the box losses),
    liblinear's many cheap passes over the rows still active are what makes a round
    effective, and they need those rows together: shrunk passes within one chunk at a
    time, tried first, left the hinge gap 350x above the kept rows' after 8 rounds (a
    20,000-row test set, chunks of a fifth of it; 1.8e-2 against 5.2e-5), and at 0.19
    after 5 rounds on the 5e9 splice-like set. So each chunk's rows whose dual value is
    not 0 after its full pass (for the hinge losses, the rows on or inside the margin;
    the others sit at the bound ``a = 0``) are kept, up to :data:`CACHE_CHUNKS` chunks'
    nonzeros in all, and the shrunk passes run over them once every chunk has had its
    full pass, from the spread of projected gradients of all the full passes: the cached
    active set of selective block minimization (Chang and Roth, KDD 2011) with
    liblinear's shrinking over it (on the same test set: 2.1e-4 after 8 rounds). The
    certificate sums are the full passes' own; ``settled`` (:func:`_start_certified`), when
    given, can skip the shrunk passes once every chunk has had its full pass.
    """
    order = rng.permutation(len(group.bounds) - 1)
    shrinking = settings.max_shrunk_passes > 0
    full_only = dataclasses.replace(settings, max_shrunk_passes=0)
    spread = np.array([-np.inf, np.inf])
    kept, kept_index, kept_nnz = [], [], 0
    for rows, index in _streamed_chunks(group, _chunks(order, group, settings.stream_nnz)):
        part = z[index]  # the chunk's dual block: a copy, written back after its passes
        orders = _orders(rng, settings, part.shape[0])
        pg_range = np.zeros(2)
        passes(rows, part, orders, np.uint64(0), pack, full_only, partial, sums, pg_range)
        z[index] = part
        if not shrinking:
            continue
        spread[kernels.PG_MAX] = max(spread[kernels.PG_MAX], pg_range[kernels.PG_MAX])
        spread[kernels.PG_MIN] = min(spread[kernels.PG_MIN], pg_range[kernels.PG_MIN])
        active = np.flatnonzero(part != 0.0)
        if active.shape[0] and kept_nnz < CACHE_CHUNKS * settings.stream_nnz:
            chosen = _row_subset(rows, active)
            kept.append(chosen)
            kept_index.append(index[active])
            kept_nnz += int(chosen.indptr[-1])
    shrink_seed = rng.integers(2**63, dtype=np.uint64)
    if kept and not (settled is not None and settled(sums)):
        cache, index = _concatenated(kept, group.columns), np.concatenate(kept_index)
        part = z[index]
        passes(cache, part, None, shrink_seed, pack, settings, partial, sums, spread)
        z[index] = part


def _row_subset(rows, chosen):
    """The rows ``chosen`` (increasing positions) of ``rows`` as a :class:`_Group`."""
    starts, stops = rows.indptr[chosen], rows.indptr[chosen + 1]
    lengths = stops - starts
    indptr = np.zeros(chosen.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    # position of every kept nonzero in the rows' arrays
    where = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])
    vals = rows.vals if rows.binary else rows.vals[where]
    return _Group(
        indptr, rows.indices[where], rows.columns, vals, rows.binary, rows.y[chosen],
        rows.weight[chosen], rows.norm_sq[chosen],
    )  # fmt: skip


def _group_rows(group):
    """The group's rows as the kernels take them (:class:`daskpd.kernels.cocoa.GroupRows`)."""
    return kernels.GroupRows(
        group.indptr, group.indices, group.vals, group.binary, group.y, group.weight,
        group.norm_sq,
    )  # fmt: skip


def _pass_steps(settings):
    return kernels.PassSteps(settings.sigma, settings.inv_alpha_n)


def _serial_passes(group, z, orders, shrink_seed, pack, settings, partial, sums, pg_range,
                   settled=None):  # fmt: skip
    """The full and shrunk passes over ``group``'s rows, in place on ``z`` (its rows' block)
    and ``v``; their sums added to ``sums[0]``. ``partial`` (a threaded round's block of
    one row) gets ``X^T dz`` of these rows added, else ``v`` carries the round's step.

    ``orders``: the full passes' visiting orders; their spread of projected gradients is
    written to ``pg_range``. ``None``: no full pass, the shrunk passes start from the
    spread given in ``pg_range`` (:func:`_streamed_round`). ``settled(sums)`` (optional,
    :func:`_start_certified`) true after the full passes: no shrunk passes.
    """
    rows, steps = _group_rows(group), _pass_steps(settings)
    z_start = z.copy() if partial is not None else None
    if orders is not None:
        loss_sum, conj_sum = kernels.cocoa_pass(
            rows, z, pack, orders, settings.loss_code, settings.loss_params, steps, pg_range
        )
        sums[0, 0] += loss_sum
        sums[0, 1] += conj_sum
    if settings.max_shrunk_passes > 0 and not (settled is not None and settled(sums)):
        shrunk, visited = kernels.shrunk_passes(
            rows, z, pack, settings.loss_code, settings.loss_params, steps, pg_range,
            settings.shrink_ratio, settings.max_shrunk_passes, shrink_seed,
            np.arange(z.shape[0], dtype=np.int64),
        )  # fmt: skip
        sums[0, 2] += shrunk
        sums[0, 3] += visited
    if partial is not None:
        kernels.add_transpose_dot(
            group.indptr, group.indices, group.vals, group.binary, z - z_start,
            0, z.shape[0], partial[0],
        )  # fmt: skip


def _threaded_passes(group, z, orders, shrink_seed, pack, settings, partial, sums, pg_range,
                     settled=None):  # fmt: skip
    """The passes of :func:`_serial_passes` in ``partial.shape[0]`` threads (PASSCoDe-wild).

    Thread ``t`` takes the ``t``-th share of every pass's order, then its shrunk passes
    over those rows (its own visiting seed); all add to the one ``v`` without locks (the
    kernels release the GIL). The round's step is then ``-X^T dz / (alpha n)`` computed
    exactly (each thread a contiguous range of rows into its own row of ``partial``, summed
    in thread order by the caller), not the raced ``v``: the next ``w`` is ``w(z)`` to
    rounding, so the next round's certificate is exact. The sums are per thread (row
    ``t`` of ``sums``), added in order by the caller. ``orders``, ``pg_range`` and
    ``settled`` as for :func:`_serial_passes`.
    """
    from concurrent.futures import ThreadPoolExecutor

    m = z.shape[0]
    n_threads = min(partial.shape[0], m)
    cuts = [t * m // n_threads for t in range(n_threads + 1)]
    z_start = z.copy()
    pg = np.zeros((n_threads, 2))
    # One stream of visiting orders per thread; thread 0's is the serial run's.
    golden = np.uint64(0x9E3779B97F4A7C15)
    rows, steps = _group_rows(group), _pass_steps(settings)

    def passes(t):
        share = np.ascontiguousarray(orders[:, cuts[t] : cuts[t + 1]])
        loss_sum, conj_sum = kernels.cocoa_pass(
            rows, z, pack, share, settings.loss_code, settings.loss_params, steps, pg[t]
        )
        sums[t, 0] += loss_sum
        sums[t, 1] += conj_sum

    # a thread's shrunk passes visit its share of the rows (of the first full pass's order)
    visit = orders[0] if orders is not None else np.random.default_rng(shrink_seed).permutation(m)

    def shrunk(t, pg_range):
        share = np.ascontiguousarray(visit[cuts[t] : cuts[t + 1]])
        with np.errstate(over="ignore"):
            seed = np.uint64(shrink_seed) + np.uint64(t) * golden
        passes_run, visited = kernels.shrunk_passes(
            rows, z, pack, settings.loss_code, settings.loss_params, steps, pg_range.copy(),
            settings.shrink_ratio, settings.max_shrunk_passes, seed, share,
        )  # fmt: skip
        sums[t, 2] += passes_run
        sums[t, 3] += visited

    def exact_step(t):
        kernels.add_transpose_dot(
            group.indptr, group.indices, group.vals, group.binary, dz,
            cuts[t], cuts[t + 1], partial[t],
        )  # fmt: skip

    with ThreadPoolExecutor(n_threads) as pool:
        if orders is not None:
            list(pool.map(passes, range(n_threads)))
            # the full pass's spread over all threads' rows, as the serial pass has it
            pg_range[kernels.PG_MAX] = pg[:, kernels.PG_MAX].max()
            pg_range[kernels.PG_MIN] = pg[:, kernels.PG_MIN].min()
        if settings.max_shrunk_passes > 0 and not (settled is not None and settled(sums)):
            list(pool.map(lambda t: shrunk(t, pg_range), range(n_threads)))
        # the change of the dual, once for all threads
        dz = z - z_start
        list(pool.map(exact_step, range(n_threads)))


def _sum_task(w, direct, pick, *parts):
    """Task: the next ``w``: ``w + dw_0 + dw_1 + ...`` in group order (``direct``: ``v``).

    ``parts`` are the groups' steps (or, with an integer ``pick``, the round tasks'
    tuples) followed by the groups' columns.
    """
    n_groups = len(parts) // 2
    total = np.array(w, dtype=np.float64, copy=True)
    for k in range(n_groups):
        kernels.add_step(total, parts[n_groups + k], _picked(parts[k], pick), direct)
    return total


def _stats_task(pick, *parts):
    """Task: the groups' certificate sums, one row per group."""
    return np.stack([_picked(part, pick) for part in parts])


def _columns_of(group):
    """Task: the group's columns (a copy of them where a sum task reads them)."""
    return group.columns


def _copy(value):
    return value


def _certificate(settings, stats):
    """``(primal, dual)`` of a round's start point from its groups' sums (rows of ``stats``)."""
    loss_sum = 0.0
    conj_sum = 0.0
    for part in stats:
        loss_sum += float(part[0])
        conj_sum += float(part[1])
    n = settings.n_samples
    regularization = settings.alpha * 0.5 * float(stats[0][2])
    return loss_sum / n + regularization, -conj_sum / n - regularization
