"""The chained pass of SPDC and DSPDC (DESIGN.md's "chained pass" graph shape).

One epoch is one Dask graph: the row blocks are visited in :func:`block_order`, a task per
block takes the primal carry from the task before and returns it with its new dual block
(:func:`run_chain`); the dual blocks stay where they were computed. Also the state between
epochs (:class:`ChainState`), the blocks in the kernels' types, kept in the workers
(:func:`_block_csr`), and the starting dual (:func:`initial_dual`). The solvers' own block
tasks are in :mod:`daskpd.solvers.spdc` and :mod:`daskpd.solvers.dspdc`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers.driver.seeds import block_seeds, epoch_seed


class Carry(NamedTuple):
    """Primal state flowing through the row blocks: all coordinates at time ``t``."""

    w: np.ndarray
    w_prev: np.ndarray
    u: np.ndarray
    t: int


def _block_csr(data, block):
    """Block ``block`` in the types of the SPDC kernels, from the rows the worker keeps.

    The rows as the evaluation keeps them (:func:`daskpd.data.resident.resident_block_arrays`,
    the same key): one read and one copy in the worker for both, so the first certificate
    does not read the data again (BENCHMARKS.md, SPDC). Indices stay int32 and float
    values as stored, so this view copies nothing (kept apart, it counted the indices twice
    against the worker's share for kept rows).
    """
    from daskpd.data.resident import resident_block_arrays

    indptr, indices, values, labels = resident_block_arrays(data, block)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    binary = values is None
    if binary:
        values = np.empty(0, dtype=np.float64)
    elif values.dtype not in (np.float32, np.float64):
        values = values.astype(np.float64)
    else:
        values = np.ascontiguousarray(values)
    return indptr, indices, values, binary, np.ascontiguousarray(labels, dtype=np.float64)


def _transpose_task(data, block, z_block):
    indptr, indices, values, binary, _ = _block_csr(data, block)
    return spdc_kernels.transpose_dot(
        indptr, indices, values, binary, np.asarray(z_block, dtype=np.float64), data.shape[1]
    )


def _sum_arrays(*arrays):
    return np.sum(arrays, axis=0)


# --------------------------------------------------------------------------------------------
# chain machinery shared with DSPDC
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ChainState:
    """State of a chained-pass solver between epochs."""

    spec: Any  # daskpd.solvers.common.coordinate.ProblemSpec
    steps: Any  # daskpd.solvers.common.coordinate.StepSizes
    carry: Carry
    z_blocks: tuple  # per row block: ndarray or Future
    block_iters: tuple  # iterations per row block per epoch
    seed: np.random.SeedSequence
    epoch: int
    opts: dict
    data: Any
    client: Any
    #: low-priority reads of the blocks into their workers (futures held for the run;
    #: None: not asked yet, so a run whose blocks are not kept asks once)
    reads: tuple | None = None
    #: the Problem, for the certificate
    #: (:meth:`daskpd.solvers.common.coordinate.CoordinateSolver.certificate`)
    problem: Any = None
    #: the run's shared-memory files (:class:`daskpd.solvers.common.shared.SharedRun`; None: the
    #: carry travels by Dask), for a ``handoff`` of :func:`run_chain`
    shared: Any = None


def block_seed(seed, epoch, block, n_blocks):
    """Seed of a block task: child ``block`` of the driver's ``epoch_seed(seed, epoch)``."""
    return block_seeds(epoch_seed(seed, epoch), n_blocks)[block]


def block_order(seed, epoch, n_blocks):
    """Shuffled visiting order of the row blocks in ``epoch``: a random recursive bisection.

    The range of blocks is cut into two halves that come in a random order, each half
    ordered the same way, down to single blocks. A worker keeps a range of consecutive
    blocks (:func:`daskpd._cluster.block_worker`), so with 2, 4, ... workers each worker's
    blocks come in one run and the carry changes worker once per worker and epoch (a random
    order of the blocks moved it about once a block, and a move costs a large part of a
    block's time). Cyclic runs from a random block keep the moves as few but shift every
    block's time between two visits together, and SPDC's primal then oscillates
    (BENCHMARKS.md, SPDC). The order depends on the seed and the blocks only, so a run gives
    the same bits on any cluster and in-process.
    """
    rng = np.random.default_rng(block_seeds(epoch_seed(seed, epoch), n_blocks + 1)[n_blocks])
    order = []
    pending = [(0, n_blocks)]  # ranges still to order, the next one last
    while pending:
        lo, hi = pending.pop()
        if hi - lo <= 1:
            order.extend(range(lo, hi))
            continue
        # rounded up, as block_worker's ranges are: with 2, 4, ... workers the cuts agree
        mid = (lo + hi + 1) // 2
        halves = [(lo, mid), (mid, hi)]
        if rng.random() < 0.5:
            halves.reverse()
        pending.extend(reversed(halves))
    return np.array(order, dtype=np.int64)


def _runs(order, workers, n_blocks):
    """``[(worker, blocks), ...]``: the order cut where the worker of its blocks changes.

    In-process (no workers) the whole order is one run.
    """
    from daskpd._cluster import block_worker

    runs = []
    for b in order:
        worker = block_worker(workers, b, n_blocks) if workers else None
        if runs and runs[-1][0] == worker:
            runs[-1][1].append(b)
        else:
            runs.append((worker, [b]))
    return runs


def _run_blocks(task, finish, carry, z_blocks, data, blocks, seeds, n_iters, spec, steps, opts,
                handoff=None, share=None):  # fmt: skip
    """Task: one worker's run of the chain, ``task`` on each of ``blocks`` in turn.

    Returns ``(carry, z_1, ..., z_k)``; with ``finish`` (the epoch's last run) the carry is
    finished here too, otherwise, with ``handoff``, the carry is ``handoff(carry, share)``
    (:func:`run_chain`). One task a run, not one a block: each task of a chain waits for
    the scheduler to hear of the one before (BENCHMARKS.md, SPDC).
    """
    new_z = []
    for z_block, block, seed, n_iter in zip(z_blocks, blocks, seeds, n_iters, strict=True):
        carry, z = task(carry, z_block, data, block, seed, n_iter, spec, steps, opts)
        new_z.append(z)
    if finish is not None:
        carry = finish(carry, steps, spec)
    elif handoff is not None:
        carry = handoff(carry, share)
    return (carry, *new_z)


def run_chain(state, epoch, task, finish=None, handoff=None):
    """Run one epoch of a chained pass as ONE Dask compute (or one wave of futures).

    ``task(carry, z_block, data, block, seed, n_iter, spec, steps, opts) -> (carry, z)``;
    ``finish(carry, steps, spec) -> Carry``, when given, ends the epoch. On a client, block
    ``b`` runs on :func:`daskpd._cluster.block_worker`'s worker (which keeps its rows from
    one epoch to the next); the blocks of a worker that come in a row are one task
    (:func:`_run_blocks`). ``handoff(carry, share) -> carry``, when given, is what a run
    that is not the epoch's last hands to the next: ``share`` is the name of the run's
    shared-memory files (``state.shared``) when the next run's worker maps the same ones
    (the same machine), else None.
    """
    from daskpd._cluster import block_worker, worker_addresses

    n_blocks = len(state.z_blocks)
    if state.client is not None and state.reads is None:
        # The chain runs on one worker at a time: the others read their blocks meanwhile,
        # so the first epoch does not wait for each block's read (DSO's tiles alike).
        from daskpd.solvers.common.scores import prefetch_rows

        state = dataclasses.replace(state, reads=tuple(prefetch_rows(state.data, state.client,
                                                                     arrays=True)))  # fmt: skip
    order = block_order(state.seed, epoch, n_blocks)
    graph = TaskGraph(f"spdc-e{epoch}")
    workers = worker_addresses(state.client) if state.client is not None else ()
    carry = state.carry
    if workers and not hasattr(carry, "key"):
        # the first epoch's carry (n_features floats three times) straight to the worker of
        # the first block: inside the graph it would go through the scheduler
        first = block_worker(workers, int(order[0]), n_blocks)
        # (in a list: scatter would take the NamedTuple for a collection of arrays)
        carry = state.client.scatter([carry], workers=[first], hash=False)[0]
    # held until the graph is submitted (a released future is lost to the tasks that read it)
    held = carry
    # a future (the last epoch's carry, on its worker) is a reference the scheduler resolves
    carry = carry if hasattr(carry, "key") else graph.data("carry", carry)
    new_z = list(state.z_blocks)
    # One graph node for the data handle: an in-memory dataset is shipped once per epoch.
    data = graph.data("data", state.data)
    runs = _runs([int(b) for b in order], workers, n_blocks)
    for k, (worker, blocks) in enumerate(runs):
        last = k == len(runs) - 1
        share = None
        if not last and state.shared is not None and state.shared.same(worker, runs[k + 1][0]):
            share = state.shared.name
        out = graph.task(
            f"run-{k}", _run_blocks, task, finish if last else None, carry,
            [state.z_blocks[b] for b in blocks], data, blocks,
            [block_seed(state.seed, epoch, b, n_blocks) for b in blocks],
            [state.block_iters[b] for b in blocks], state.spec, state.steps, state.opts,
            None if last else handoff, share, worker=worker, allow_other_workers=True,
        )  # fmt: skip
        carry, *z_parts = graph.parts(out, len(blocks) + 1, f"run-{k}")
        for b, z_part in zip(blocks, z_parts, strict=True):
            new_z[b] = z_part
    if state.client is not None:
        from distributed import wait

        futures = graph.submit(state.client, [carry, *new_z])
        del held
        # the carry (n_features floats a few times) stays on its worker: the next epoch's
        # first task reads it there, the client fetches it only for an iterate or checkpoint
        wait(futures[0])
        carry_value = futures[0]
        z_blocks = tuple(futures[1:])
    else:
        carry_value, *z_values = graph.compute([carry, *new_z])
        z_blocks = tuple(z_values)
    return dataclasses.replace(state, carry=carry_value, z_blocks=z_blocks, epoch=epoch)


def carry_of(state):
    """The state's :class:`Carry` as NumPy arrays (fetched when it is a future)."""
    carry = state.carry
    return carry.result() if hasattr(carry, "result") else carry


def gather_dual(state):
    """The dual blocks as NumPy arrays (fetched from workers when they are futures)."""
    if state.client is not None and any(hasattr(z, "key") for z in state.z_blocks):
        return [np.asarray(z) for z in state.client.gather(list(state.z_blocks))]
    return [np.asarray(z) for z in state.z_blocks]


def initial_dual(data, client, z=None):
    """Per-block dual arrays (zeros, or slices of ``z``) and ``u = X^T z / n`` (one compute)."""
    bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
    n, d = data.shape
    if z is None:
        blocks = [np.zeros(int(bounds[b + 1] - bounds[b])) for b in range(len(bounds) - 1)]
        u = np.zeros(d)
    else:
        z = np.asarray(z, dtype=np.float64)
        if z.shape != (n,):
            raise ValueError(f"warm-start z must have shape ({n},), got {z.shape}")
        blocks = [z[bounds[b] : bounds[b + 1]].copy() for b in range(len(bounds) - 1)]
        graph = TaskGraph("spdc-start")
        data_ref = graph.data("data", data)
        parts = [graph.task(b, _transpose_task, data_ref, b, blocks[b]) for b in range(len(blocks))]
        (total,) = graph.compute([graph.task("sum", _sum_arrays, *parts)])
        u = total / n
    if client is not None:
        blocks = client.scatter(blocks)
    return blocks, u


def _carry_w(carry):
    return carry.w


def _carry_xtz(carry, n):
    """``X^T z`` of the carry's dual: ``u = X^T z / n`` times ``n`` (a task, or in-process)."""
    return carry.u * n


def carry_point(state):
    """``(w, X^T z)`` of the state's carry: futures on the carry's worker when it is one there
    (nothing gathered), else the in-process arrays (``w`` the carry's own)."""
    n = int(state.data.shape[0])
    carry, client = state.carry, state.client
    if client is not None and hasattr(carry, "key"):
        return client.submit(_carry_w, carry), client.submit(_carry_xtz, carry, n)
    carry = carry_of(state)
    return _carry_w(carry), _carry_xtz(carry, n)
