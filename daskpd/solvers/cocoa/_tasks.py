"""The tasks of CoCoA+, one row group each: reading it, its start, its round, the sums.

Tasks are pure: they copy what they mutate, but for :func:`_shrunk_task`, the one reader
of its round's :class:`_Passed`, which it continues in place. Symbols as in the
paper-to-code table of :mod:`daskpd.solvers.cocoa`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from daskpd.data.format import NO_VALUES
from daskpd.kernels import cocoa as kernels
from daskpd.kernels import scalar
from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers.cocoa._options import CACHE_CHUNKS
from daskpd.solvers.common.groups import in_threads, row_weights
from daskpd.solvers.common.stream import block_bounds, block_chunks, prefetched


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
    #: a resident group's spare ``pack`` (:func:`_records`), else None
    spare: list | None = None


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
# tasks (pure: they copy what they mutate; _shrunk_task continues its _Passed in place
# and hands the round's records on to the next round, _records)


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
    group = group._replace(spare=[])
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
    bounds = block_bounds(source, start, stop)
    columns = np.arange(int(source.n_features), dtype=np.int32)
    return _StreamedGroup(source, int(start), int(stop), class_pair, columns, bounds)


def _streamed_chunks(group, chunks):
    """The rows of a streamed group, a chunk at a time: ``(rows, index)`` for each list of
    row blocks in ``chunks``, the blocks' rows as one :class:`_Group` and their row numbers
    in the group. The next chunk is read in a thread while the caller works on this one
    (the kernels release the GIL: :func:`daskpd.solvers.common.stream.prefetched`)."""

    def read(blocks):
        parts, index = [], []
        for b in blocks:
            lo, hi = int(group.bounds[b]), int(group.bounds[b + 1])
            parts.append(_read_rows(group.source, lo, hi, group.class_pair, group.columns))
            index.append(np.arange(lo - group.start, hi - group.start, dtype=np.int64))
        return _concatenated(parts, group.columns), np.concatenate(index)

    return prefetched(read, chunks)


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
    source = group.source
    nnz = int(source.nnz) * (group.stop - group.start) // max(1, int(source.n_samples))
    return block_chunks(order, group.bounds, nnz, stream_nnz)


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

    A worker's first call of each compiled kernel loads it from numba's cache, which made a
    fresh run's first round much longer than a later one doing the same work
    (BENCHMARKS.md, CoCoA+). Run by :func:`_load_group` in a thread while the owner reads
    its rows, the loading is done before the first round and mostly hidden behind the read.
    """
    indptr = np.arange(4, dtype=np.int64)
    columns = np.arange(3, dtype=np.int32)
    vals = _kernel_values(None if binary else np.ones(3, dtype=dtype))
    ones = np.ones(3)
    group = _Group(indptr, columns, columns, vals, binary, np.array([1.0, -1.0, 1.0]), ones, ones)
    first = _round_task(group, np.zeros(3), None, np.zeros(3), 0, settings, True)
    # and a round from w != 0 with the bounds the later rounds screen with (and refresh)
    _, step, _, _ = _round_task(group, np.zeros(3), None, np.ones(3), 0, settings, True, first[3])
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


class _Passed(NamedTuple):
    """A round after its certifying full passes, handed to its shrunk passes.

    The output of :func:`_pass_task` and the input of :func:`_shrunk_task`, which runs on
    the same worker and is its only reader: it continues the round in place on ``z`` and
    ``pack`` (they are this round's own copies, made by the pass task), so the round's
    second half costs no copy of ``n_features`` values, and then hands ``pack`` on to the
    next round (:func:`_records`). Only ``stats`` leaves the worker.
    """

    #: the group's dual block after the full passes
    z: np.ndarray
    #: ``[pack]``: ``w`` and the threads' slots per column the group uses
    #: (:mod:`daskpd.kernels.cocoa`), emptied by the shrunk task that takes it
    pack: list
    #: per thread: loss sum, conjugate sum, shrunk passes, nonzeros they read, nonzeros the
    #: screened full pass left out, nonzeros the refresh of the bounds read
    sums: np.ndarray
    #: the spread of the full passes' projected gradients (:data:`kernels.PG_MAX`, ``PG_MIN``)
    pg_range: np.ndarray
    #: the certificate sums of the round's start: loss sum, conjugate sum, ``||w||^2``
    stats: np.ndarray
    #: the rows the shrunk passes may visit (:func:`daskpd.kernels.cocoa.shrink_candidates`,
    #: in the last full pass's order; without shrinking, its first order; None: streamed)
    visit: np.ndarray | None
    shrink_seed: np.uint64
    #: streamed groups: ``(rows, index)`` of the active rows kept for the shrunk passes
    cache: tuple | None
    #: screening (``settings.screening``): lower bounds of the rows' margins at the round's
    #: start, exact for the rows the full pass visited (None: no screening)
    bounds: np.ndarray | None


#: Position of ``stats`` in a :class:`_Passed` (the driver's certificate reads it alone).
PASSED_STATS = _Passed._fields.index("stats")

#: ``held`` of a full pass whose gradients nobody reads (no shrunk passes follow)
_NOT_HELD = np.empty(0)


def _round_task(group, zsrc, zpick, w, seed, settings, with_norm, bounds=None):
    """A whole round in one call: :func:`_shrunk_task` of :func:`_pass_task` (in-process
    runs, the rehearsal and the tests)."""
    passed = _pass_task(group, zsrc, zpick, w, seed, settings, with_norm, bounds)
    return _shrunk_task(group, passed, settings)


def _pass_task(group, zsrc, zpick, w, seed, settings, with_norm, bounds=None):
    """Task ``(round, k)``, first half: the certifying full passes of group ``k`` from
    ``(w, z_k)``.

    ``z_k`` is ``zsrc``, or ``zsrc[zpick]`` (the tuple of the group's previous round).
    Returns a :class:`_Passed`; its ``stats`` certify the round's start ``(w, z_k)`` and are
    known here, before the round's shrunk passes run (:func:`_shrunk_task`). ``with_norm``:
    whether this group adds ``||w||^2`` to the stats (one group does). ``bounds``: with
    ``settings.screening``, the margin bounds at ``w`` the previous round left (None: none
    known, every row is read).
    """
    z = np.array(_picked(zsrc, zpick), dtype=np.float64, copy=True)
    if bounds is None and zpick is not None:
        # the previous round's tuple: (z, step, stats, bounds)
        bounds = zsrc[3]
    rng = np.random.default_rng(seed)
    n_threads = _round_threads(settings, z.shape[0])
    # the round's own records: the shrunk passes continue on them after this task returns
    pack = _records(group, n_threads)
    kernels.start_pack(w, group.columns, pack)
    sums = np.zeros((n_threads, 6))
    w_norm_sq = kernels.squared_norm(w) if with_norm else 0.0
    pg_range = np.zeros(2)
    cache = visit = margins = None
    if isinstance(group, _StreamedGroup):
        cache = _streamed_full(group, z, rng, pack, settings, sums, pg_range)
    else:
        orders = _orders(rng, settings, z.shape[0])
        shrinks = settings.max_shrunk_passes > 0 and orders.shape[0] > 0
        held = np.empty(z.shape[0]) if shrinks else _NOT_HELD
        if settings.screening:
            # the previous round's bounds are its output: this round's own copy
            margins = (
                np.full(z.shape[0], -np.inf)
                if bounds is None
                else np.array(bounds, dtype=np.float64, copy=True)
            )
            # from w = 0 every margin is 0 and no row can be proven inactive
            if (w_norm_sq if with_norm else kernels.squared_norm(w)) > 0.0:
                _refresh_margins(group, z, w, margins, sums)
        _full_passes(group, z, orders, pack, settings, sums, pg_range, held, margins)
        if shrinks:
            # the rows the shrunk passes would drop at once, left out before they read them
            visit = kernels.shrink_candidates(
                _group_rows(group), z, held, settings.loss_code, settings.loss_params,
                pg_range, orders[-1], settings.cold_gradient,
            )  # fmt: skip
        else:
            visit = orders[0] if orders.shape[0] else np.arange(z.shape[0], dtype=np.int64)
    shrink_seed = rng.integers(2**63, dtype=np.uint64)
    stats = np.array([sums[:, 0].sum(), sums[:, 1].sum(), w_norm_sq])
    return _Passed(z, [pack], sums, pg_range, stats, visit, shrink_seed, cache, margins)


def _shrunk_task(group, passed, settings):
    """Task ``(round, k)``, second half: the shrunk passes and the round's step.

    Continues :func:`_pass_task`'s round in place (see :class:`_Passed`); skips the shrunk
    passes when the full passes certified the start within the run's stop
    (:func:`_start_certified`). Returns ``(z_k new, step_k, stats_k, bounds_k)``:
    ``step_k`` is ``dw_k`` on the group's columns (or, ``direct``, the next ``w`` there),
    ``stats_k = (loss sum at w, conj sum at z_k, ||w||^2 if with_norm else 0, shrunk
    passes, nonzeros they read, nonzeros the screened full pass left out, nonzeros the
    refresh of the margin bounds read)`` and
    ``bounds_k`` the rows' margin bounds (screening; else None): at the next ``w`` with one
    group, at this round's start with several (:func:`_shifted_bounds` moves them).
    """
    if not passed.pack:
        raise RuntimeError(
            "this round's records were spent by its shrunk passes already: a round runs "
            "again from its full passes, not from their output"
        )
    pack = passed.pack.pop()
    z, sums = passed.z, passed.sums
    shrink = settings.max_shrunk_passes > 0 and not _start_certified(settings, passed.stats)
    if shrink and passed.cache is not None:
        rows, index = passed.cache
        part = z[index]
        _shrunk_passes(rows, part, None, passed.shrink_seed, pack, settings, sums,
                       passed.pg_range)  # fmt: skip
        z[index] = part
    elif shrink and not isinstance(group, _StreamedGroup):
        _shrunk_passes(group, z, passed.visit, passed.shrink_seed, pack, settings, sums,
                       passed.pg_range)  # fmt: skip
    # every step is in one thread's slot: their sum is the round's exact step, threaded or not
    step = np.empty(pack.shape[0])
    kernels.finish_pack(pack, settings.sigma, settings.direct, step)
    stats = [*passed.stats, *sums[:, 2:].sum(axis=0)]
    bounds = passed.bounds
    if bounds is not None and settings.direct:
        # one group: step is the next w; a row's margin moves by at most
        # ||x_i|| ||w_next - w||. With several groups the next w is known on w's home
        # only: the driver shifts them there (_column_shift, then _shifted_bounds)
        bounds = _shifted_bounds(bounds, None, kernels.shift_norm(pack, step), group)
    spare = getattr(group, "spare", None)
    if spare is not None and not spare:
        spare.append(pack)
    return z, step, np.array(stats), bounds


def _records(group, n_threads):
    """A round's ``pack`` for ``n_threads`` threads: the group's spare one where it has one
    of that width, else new memory, aligned so that no record of up to 7 threads' slots
    straddles two cache lines.

    A resident group's shrunk task hands its round's records back (``_Group.spare``; the
    round is done with them) and the next round's pass task takes them: the records are
    written into pages already mapped rather than new ones, a fifth of the time
    (BENCHMARKS.md, CoCoA+). The spare lives and dies with the group (the run).
    The round's ``_Passed`` gives its pack up (:func:`_shrunk_task`), so that a second run
    of a round's shrunk passes fails instead of reading the next round's records.
    """
    shape = (group.columns.shape[0], kernels.pack_width(n_threads))
    spare = getattr(group, "spare", None)
    if spare:
        pack = spare.pop()
        if pack.shape == shape:
            return pack
    return spdc_kernels.aligned_records(*shape)


def _round_threads(settings, m):
    """Threads of a round over ``m`` rows (1: serial)."""
    return min(int(settings.threads), m) if settings.threads > 1 and m > 1 else 1


def _start_certified(settings, stats):
    """Whether a round's full passes certify its start within the run's stop.

    One group's full passes sum the whole problem's certificate of the round's start; when
    its gap is at most ``stop_gap`` (the run's ``tol``) or ``stop_rel`` times the primal
    (DSO's start) the driver stops after this round and returns that start, so the round's
    shrunk passes would change nothing the user gets (about half of a hinge round): they
    are skipped. Several groups have only their share: never.
    """
    if settings.grid != 1 or not (settings.stop_gap > 0.0 or settings.stop_rel > 0.0):
        return False
    primal, dual = _certificate(settings, [stats])
    gap = primal - dual
    return gap <= settings.stop_gap or gap <= settings.stop_rel * abs(primal)


def _orders(rng, settings, m):
    """The visiting orders of a round's full passes over ``m`` rows."""
    orders = np.empty((settings.local_passes, m), dtype=np.int64)
    for p in range(settings.local_passes):
        orders[p] = rng.permutation(m)
    return orders


def _streamed_full(group, z, rng, pack, settings, sums, pg_range):
    """The full passes of a round over a streamed group, in place on ``z`` and ``v``;
    returns the rows kept for its shrunk passes (``(rows, index)``, or None).

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
    nonzeros in all, and the shrunk passes (:func:`_shrunk_task`) run over them once every
    chunk has had its full pass, from the spread of projected gradients of all the full
    passes (written to ``pg_range``): the cached active set of selective block
    minimization (Chang and Roth, KDD 2011) with liblinear's shrinking over it (on the
    same test set: 2.1e-4 after 8 rounds). The certificate sums are the full passes' own.
    """
    order = rng.permutation(len(group.bounds) - 1)
    shrinking = settings.max_shrunk_passes > 0
    pg_range[:] = (-np.inf, np.inf)
    kept, kept_index, kept_nnz = [], [], 0
    for rows, index in _streamed_chunks(group, _chunks(order, group, settings.stream_nnz)):
        part = z[index]  # the chunk's dual block: a copy, written back after its passes
        orders = _orders(rng, settings, part.shape[0])
        spread = np.zeros(2)
        _full_passes(rows, part, orders, pack, settings, sums, spread, _NOT_HELD)
        z[index] = part
        if not shrinking:
            continue
        pg_range[kernels.PG_MAX] = max(pg_range[kernels.PG_MAX], spread[kernels.PG_MAX])
        pg_range[kernels.PG_MIN] = min(pg_range[kernels.PG_MIN], spread[kernels.PG_MIN])
        active = np.flatnonzero(part != 0.0)
        if active.shape[0] and kept_nnz < CACHE_CHUNKS * settings.stream_nnz:
            chosen = _row_subset(rows, active)
            kept.append(chosen)
            kept_index.append(index[active])
            kept_nnz += int(chosen.indptr[-1])
    if not kept:
        return None
    return _concatenated(kept, group.columns), np.concatenate(kept_index)


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


def _cuts(m, n_threads):
    """Row ranges of ``n_threads`` threads over ``m`` rows (contiguous shares)."""
    n_threads = min(n_threads, m)
    return [t * m // n_threads for t in range(n_threads + 1)]


def _refresh_margins(group, z, w, bounds, sums):
    """The exact margins at ``w`` (less the float32 rounding's slack) of the rows at
    ``z_i = 0`` that ``bounds`` does not already leave out, in ``sums.shape[0]`` threads
    (:func:`daskpd.kernels.cocoa.start_margins`); thread ``t``'s nonzeros read go to
    ``sums[t, 5]``.

    The bounds a round inherits are the margins where the last pass read each row, less
    every move of ``w`` since. After a round from ``w = 0`` they prove nothing (``||w_1||``
    is about 3 on the splice-like sets, far above any margin's distance from 1), while
    about 97% of the rows are inactive at ``w_1``: this read-only pass costs about half
    the full pass it spares. In later rounds it reads the few rows whose bound fell below
    the margin, and most of them are left out again. A row at ``z_i = 0`` with a margin
    below 1 is read twice (here and by the pass); near a solution there are few.
    """
    values = np.empty((group.columns.shape[0], 1), dtype=np.float32)
    slack = kernels.rounded_start(w, group.columns, values) * (1.0 + 1e-12)
    rows = _group_rows(group)
    cuts = _cuts(z.shape[0], sums.shape[0])

    def refresh(t):
        sums[t, 5] += kernels.start_margins(rows, z, values, slack, bounds, cuts[t], cuts[t + 1])

    in_threads(len(cuts) - 1, refresh)


def _full_passes(group, z, orders, pack, settings, sums, pg_range, held, bounds=None):
    """The full passes over ``group``'s rows in ``orders``, in place on ``z`` (its rows'
    block) and ``v``, in ``sums.shape[0]`` threads (PASSCoDe-wild: thread ``t`` takes the
    ``t``-th share of every pass's order; all read the one ``v``, each adds its steps to
    its own slot of the records, :mod:`daskpd.kernels.cocoa`).
    Thread ``t``'s certificate sums go to ``sums[t]`` (added in order by the caller), the
    passes' spread of projected gradients to ``pg_range``, the last pass's gradients of
    the rows it left at a bound to ``held`` (unless empty; see
    :func:`daskpd.kernels.cocoa.cocoa_pass`), the nonzeros the first pass left out to
    ``sums[t, 4]`` (``bounds``: the rows' margin bounds, screening; None: none)."""
    rows, steps = _group_rows(group), _pass_steps(settings)
    cuts = _cuts(z.shape[0], sums.shape[0])
    pg = np.zeros((len(cuts) - 1, 2))
    bounds = kernels.NO_BOUNDS if bounds is None else bounds

    def passes(t):
        share = np.ascontiguousarray(orders[:, cuts[t] : cuts[t + 1]])
        loss_sum, conj_sum, skipped = kernels.cocoa_pass(
            rows, z, pack, share, settings.loss_code, settings.loss_params, steps, pg[t], held,
            kernels.slot_field(t), bounds,
        )  # fmt: skip
        sums[t, 0] += loss_sum
        sums[t, 1] += conj_sum
        sums[t, 4] += skipped

    in_threads(len(cuts) - 1, passes)
    # the spread over all threads' rows, as one pass has it
    pg_range[kernels.PG_MAX] = pg[:, kernels.PG_MAX].max()
    pg_range[kernels.PG_MIN] = pg[:, kernels.PG_MIN].min()


def _shrunk_passes(group, z, visit, shrink_seed, pack, settings, sums, pg_range):
    """liblinear's shrunk passes over ``group``'s rows after the full passes whose spread is
    ``pg_range``, in place on ``z`` and ``v``, in ``sums.shape[0]`` threads.

    The passes visit the rows of ``visit`` (the rows the full passes left as candidates,
    in the last full pass's order; None: every row, in row order for one thread, else in a
    permutation drawn from ``shrink_seed``); thread ``t`` of several visits its share of
    them with its own visiting seed. Passes and nonzeros read go to ``sums[t, 2:4]``.
    """
    rows, steps = _group_rows(group), _pass_steps(settings)
    m = z.shape[0]
    if visit is None:
        serial = len(_cuts(m, sums.shape[0])) == 2
        visit = (
            np.arange(m, dtype=np.int64)
            if serial
            else np.random.default_rng(shrink_seed).permutation(m)
        )
    if visit.shape[0] == 0:
        return
    cuts = _cuts(visit.shape[0], sums.shape[0])
    n_threads = len(cuts) - 1
    # one stream of visiting orders per thread; thread 0's is the serial run's
    golden = np.uint64(0x9E3779B97F4A7C15)

    def shrunk(t):
        share = np.ascontiguousarray(visit[cuts[t] : cuts[t + 1]])
        with np.errstate(over="ignore"):
            seed = np.uint64(shrink_seed) + np.uint64(t) * golden
        passes_run, visited = kernels.shrunk_passes(
            rows, z, pack, settings.loss_code, settings.loss_params, steps, pg_range.copy(),
            settings.shrink_ratio, settings.max_shrunk_passes, seed, share,
            kernels.slot_field(t),
        )  # fmt: skip
        sums[t, 2] += passes_run
        sums[t, 3] += visited

    in_threads(n_threads, shrunk)


def _sum_task(w, direct, pick, *parts):
    """Task: the next ``w``: ``w + dw_0 + dw_1 + ...`` in group order (``direct``: ``v``).

    ``parts`` are the groups' steps (or, with an integer ``pick``, the round tasks'
    tuples) followed by the groups' columns.
    """
    n_groups = len(parts) // 2
    if direct and n_groups == 1 and parts[1].shape[0] == np.shape(w)[0]:
        # one group on every column (increasing ids: all of them): its step is the next w
        # itself, the same bits as writing it into a copy; no reader writes to a w, so the
        # round's step is returned, not copied
        return _picked(parts[0], pick)
    total = np.array(w, dtype=np.float64, copy=True)
    for k in range(n_groups):
        kernels.add_step(total, parts[n_groups + k], _picked(parts[k], pick), direct)
    return total


def _column_shift(w, w_next, columns):
    """Task: ``||w_next - w||`` on ``columns`` (a group's, increasing): how far the
    margins of the group's rows may move between two rounds' starts, per unit of
    ``||x_i||`` (screening with several groups; runs on ``w``'s home, which holds both)."""
    return kernels.column_shift(w, w_next, columns)


def _shifted_bounds(passed, pick, shift, group):
    """Task: a group's margin bounds at the next ``w`` from the ones at its round's start
    (``passed[pick]``, or ``passed`` itself with ``pick`` None) and
    :func:`_column_shift`'s ``shift`` (its slack: the rounding of the norms)."""
    bounds = _picked(passed, pick)
    return bounds - np.sqrt(group.norm_sq) * (shift * (1.0 + 1e-12))


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
