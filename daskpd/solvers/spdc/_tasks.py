"""The block tasks of an SPDC epoch and the lazy carry they hand on.

The carry stays lazy through the epoch (:class:`LazyCarry`: the coordinates a block's rows do
not touch are not brought up to date, Section 6 of the paper); the first task of an epoch
copies it, the later ones update it in place (each is its only reader), so an epoch costs
O(nnz) plus O(n_features) once, at its end (:func:`_flush_task`). Between two workers of one
machine the carry moves as a file of shared memory that both map (:class:`SharedLazyCarry`),
not through Dask. Symbols as in the translation table of :mod:`daskpd.solvers.spdc`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers.common import shared as _shared
from daskpd.solvers.common.chain import Carry, _block_csr
from daskpd.solvers.common.coordinate import block_weights, draw_rows, kernel_scalars
from daskpd.solvers.common.groups import in_threads


class LazyCarry(NamedTuple):
    """The carry inside an epoch: :class:`Carry` as the lazy state of
    :class:`daskpd.kernels.spdc.LazyPrimal` (``w``, ``w_prev``, ``u`` and the last update
    times side by side; the mini-batch loop's scratch, empty with one row an iteration).

    ``shared``: ``(handle, generation)`` when ``state`` is mapped from the run's
    shared-memory file (:class:`SharedLazyCarry`), else None."""

    state: np.ndarray
    mark: np.ndarray
    acc: np.ndarray
    t: int
    shared: tuple | None = None


class SharedLazyCarry(NamedTuple):
    """A :class:`LazyCarry` handed to a worker of the same machine: its file, not its bytes.

    The lazy state (``n_features`` records of 32 bytes) sits in a
    file of the run's shared-memory directory (:mod:`daskpd.solvers.common.shared`), one record
    more at its end for a header: the hand-overs so far, the iteration of the last one and
    whether a task is updating it (``_HEADER_*``).
    The next run maps the same pages and updates them in place, as a run does with the
    carry it got from its own worker; through Dask the carry is pickled, sent over TCP and
    copied again for alignment (BENCHMARKS.md, SPDC).
    """

    handle: tuple
    n_features: int
    generation: int
    t: int


#: File of a run's shared lazy carry (one a run: each epoch's first task fills it again).
SHARED_CARRY = "spdc-carry"
#: Header fields of a shared lazy carry (its last record): hand-overs so far in the epoch, 1
#: while a task updates the state (0 when it is handed over), and the iteration counter at
#: the hand-over (it grows every epoch, so a hand-over of an earlier epoch never matches).
_HEADER_GENERATION = 0
_HEADER_BUSY = 1
_HEADER_T = 2


def _attach_carry(carry):
    """Map a :class:`SharedLazyCarry` and claim it for this task: a :class:`LazyCarry`.

    Raises
    ------
    daskpd.solvers.common.shared.SharedStateLost
        The file is gone, replaced or on another machine, or its header shows another
        hand-over or a task that stopped half-way (a retry after a lost worker).
    """
    d = carry.n_features
    try:
        full = _shared.attach(carry.handle, (d + 1, spdc_kernels.LAZY_WIDTH))
    except (OSError, RuntimeError) as exc:
        raise _shared.SharedStateLost(f"SPDC's shared carry cannot be mapped here: {exc}") from exc
    header = full[d]
    if (
        header[_HEADER_GENERATION] != carry.generation
        or header[_HEADER_T] != carry.t
        or header[_HEADER_BUSY] != 0
    ):
        raise _shared.SharedStateLost(
            f"SPDC's shared carry is at hand-over {header[_HEADER_GENERATION]:.0f}, "
            f"iteration {header[_HEADER_T]:.0f} (busy: {header[_HEADER_BUSY]:.0f}); this task "
            f"expected {carry.generation}, iteration {carry.t}: a task that updated it "
            "stopped half-way, or another epoch's filled it since"
        )
    header[_HEADER_BUSY] = 1.0
    empty = np.zeros(0)
    return LazyCarry(full[:d], np.full(0, -1, dtype=np.int64), empty, int(carry.t),
                     (carry.handle, carry.generation))  # fmt: skip


def _hand_over(carry, share):
    """What a run hands to the next (:func:`daskpd.solvers.common.chain.run_chain`'s ``handoff``).

    ``share``: the run's shared-memory name when the next run's worker maps the same files.
    Then the lazy carry goes into (or stays in) the run's file and travels as a
    :class:`SharedLazyCarry`; else as plain arrays. The mini-batch loop's carry (its
    scratch is ``n_features`` long) always travels plain.
    """
    if not isinstance(carry, LazyCarry) or carry.mark.shape[0] > 0:
        return carry
    if share is None:
        if carry.shared is None:
            return carry
        # the next worker is on another machine: the bytes (the file is not used again)
        return carry._replace(state=np.array(carry.state, copy=True), shared=None)
    d = carry.state.shape[0]
    shape = (d + 1, spdc_kernels.LAZY_WIDTH)
    if carry.shared is None:
        try:
            full, handle = _shared.reuse(share, SHARED_CARRY, shape)
        except OSError:
            return carry  # no shared directory here (or it is full): through Dask
        full[:d] = carry.state
        full[d] = 0.0
        generation = 0
    else:
        handle, generation = carry.shared
        full = _shared.attach(handle, shape)
    full[d, _HEADER_GENERATION] = generation + 1
    full[d, _HEADER_T] = float(carry.t)
    full[d, _HEADER_BUSY] = 0.0
    return SharedLazyCarry(handle, d, generation + 1, int(carry.t))


def _lazy(carry, batch_size, share=None):
    """The carry a block task updates: a copy of an epoch's start, or the lazy carry itself
    (mapped, when it came through shared memory).

    With ``share`` (the run's shared-memory name; one row an iteration) the copy is made
    in the run's file, claimed by this task, so that its hand-over copies nothing.
    """
    if isinstance(carry, LazyCarry):
        return carry
    if isinstance(carry, SharedLazyCarry):
        return _attach_carry(carry)
    d = carry.w.shape[0] if batch_size > 1 else 0
    scratch = (np.full(d, -1, dtype=np.int64), np.zeros(d), int(carry.t))
    if share is not None and batch_size == 1:
        n_features = carry.w.shape[0]
        try:
            full, handle = _shared.reuse(
                share, SHARED_CARRY, (n_features + 1, spdc_kernels.LAZY_WIDTH)
            )
        except OSError:
            pass  # no shared directory here (or it is full): the carry travels by Dask
        else:
            spdc_kernels.lazy_state(carry.w, carry.w_prev, carry.u, carry.t, full[:n_features])
            full[n_features, _HEADER_GENERATION] = 0.0
            full[n_features, _HEADER_T] = float(carry.t)
            full[n_features, _HEADER_BUSY] = 1.0
            return LazyCarry(full[:n_features], *scratch, shared=(handle, 0))
    return LazyCarry(spdc_kernels.lazy_state(carry.w, carry.w_prev, carry.u, carry.t), *scratch)


@functools.lru_cache(maxsize=4)
def _factors(tau, l2):
    """The run's table of geometric factors (built once a process, not once a task)."""
    return spdc_kernels.geometric_table(tau, l2, spdc_kernels.FACTOR_TABLE)


def _flush_task(carry, steps, spec):
    """Task at an epoch's end: every coordinate brought to the last time; a plain carry."""
    lazy = _lazy(carry, 1)
    state = lazy.state
    spdc_kernels.flush(lazy.t, state, steps.tau, spec.l1, spec.l2, _factors(steps.tau, spec.l2))
    return Carry(
        state[:, spdc_kernels.LAZY_W].copy(), state[:, spdc_kernels.LAZY_W_PREV].copy(),
        state[:, spdc_kernels.LAZY_U].copy(), int(lazy.t),
    )  # fmt: skip


def _row_norms(indptr, values, binary):
    counts = np.diff(indptr)
    if binary:
        return np.sqrt(counts.astype(np.float64))
    rows = np.repeat(np.arange(counts.size), counts)
    return np.sqrt(np.bincount(rows, values * values, counts.size))


def _spdc_block_task(carry, z_block, data, block, seed, n_iter, spec, steps, opts):
    """One block of an SPDC epoch: returns the new carry and the new dual block."""
    indptr, indices, values, binary, labels = _block_csr(data, block)
    n_rows = len(labels)
    rng = np.random.default_rng(seed)
    n_total = int(data.shape[0])
    batch = opts["batch_size"]
    if opts["weighted"]:
        norms = _row_norms(indptr, values, binary)
        p_global = (1.0 - opts["mixing"]) / n_total + opts["mixing"] * norms / opts["norm_sum"]
        # Mixing 0 is the uniform distribution: draw it with the uniform sampler.
        probs = None if opts["mixing"] == 0.0 else p_global / p_global.sum()
        inv_npi = 1.0 / (n_total * p_global)
    else:
        probs = None
        inv_npi = np.full(n_rows, 1.0 / batch)
    order = draw_rows(rng, n_rows, n_iter, batch, probs, shuffle=opts["shuffle"])
    z = np.array(z_block, dtype=np.float64, copy=True)
    weights = block_weights(data, block, opts["class_pair"], labels)
    threads = int(opts.get("threads", 1))
    # nothing after this line raises: the lazy carry is updated in place
    lazy = _lazy(carry, batch, opts.get("shared_run"))
    if not spdc_kernels.is_record_aligned(lazy.state):
        # a carry that came from another worker through Dask can sit at any offset of the
        # message's buffer: its records would straddle cache lines, and an atomic add on a
        # float64 across two lines is a split lock, which the processor throttles (an order
        # of magnitude slower, BENCHMARKS.md, SPDC). A mapped shared carry is page-aligned;
        # were it not, the copy is what goes on.
        state = spdc_kernels.aligned_records(lazy.state.shape[0])
        state[:] = lazy.state
        lazy = lazy._replace(state=state, shared=None)
    args = (
        spdc_kernels.BlockRows(indptr, indices, values, binary, labels, weights),
        z,
        spdc_kernels.RowSample(order, batch, inv_npi),
        spdc_kernels.LazyPrimal(lazy.state, lazy.mark, lazy.acc, _factors(steps.tau, spec.l2)),
        lazy.t,
        spec.loss_code,
        spec.loss_params,
        kernel_scalars(spec, steps, n_total),
    )
    in_threads(threads, lambda share: spdc_kernels.spdc_rows(*args, share, threads))
    return lazy._replace(t=lazy.t + n_iter), z


def _open_shared(client, options):
    """The run's shared-memory files for the carry's hand-overs, or None (see
    ``Options.shared_memory``)."""
    if client is None or not options.shared_memory or int(options.batch_size) != 1:
        return None
    import uuid

    return _shared.open_run(client, f"spdc-{uuid.uuid4().hex[:12]}")
