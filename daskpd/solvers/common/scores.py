"""Rows scored with ``w``, and rows read ahead into the workers that will score them.

:func:`score_rows` is ``X @ w`` a task per row block, each block on the worker that keeps it
(:mod:`daskpd.data.resident`); :func:`prefetch_rows` has idle workers read those blocks early.
The driver's evaluation and test metrics use both; the chained pass
(:mod:`daskpd.solvers.common.chain`) reads its blocks ahead with :func:`prefetch_rows`.
"""

from __future__ import annotations

import numpy as np

from daskpd.data.resident import resident_block, resident_block_arrays

__all__ = ["prefetch_rows", "score_rows"]


def _is_in_memory(data) -> bool:
    # Anything that is not backed by a store path is an in-memory dataset.
    return getattr(data, "path", None) is None


def score_rows(w, data, *, client=None) -> np.ndarray:
    """Return ``X @ w`` for all rows of ``data``, a task per row block.

    On a client, block ``i`` is scored by the same worker in every call (while the workers
    stay), which keeps the block after its first read (:mod:`daskpd.data.resident`).

    Parameters
    ----------
    w : ndarray of shape (n_features,) or (n_classes, n_features)
        One weight vector, or one per class of a one-vs-rest model (each block is then read
        once for all the classes).
    data : Dataset-like
        Has ``n_row_blocks`` and ``block(i)``.
    client : distributed.Client, optional
        Runs the compute on this client; otherwise the current Dask scheduler.

    Returns
    -------
    scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
    """
    from daskpd._graphs import TaskGraph

    w = np.asarray(w, dtype=np.float64)
    n_blocks = int(data.n_row_blocks)
    if n_blocks == 0:
        return np.zeros((0, *w.shape[:-1]))
    graph = TaskGraph("daskpd-scores")
    if client is not None:
        from daskpd._cluster import block_worker, worker_addresses

        # w to every worker once, not through the scheduler inside the graph; block i is
        # scored by the same worker in every evaluation of a run, which keeps it after its
        # first read (daskpd.data.resident)
        w_future = client.scatter(w, broadcast=True, hash=False)
        workers = worker_addresses(client)
        parts = [
            graph.task(
                i,
                _score_block,
                data,
                i,
                w_future,
                allow_other_workers=True,
                worker=block_worker(workers, i, n_blocks) if workers else None,
            )  # fmt: skip
            for i in range(n_blocks)
        ]
        pieces = client.gather(graph.submit(client, parts))
    else:
        # one node for w and the data handle, so no task holds a copy of its own
        w_ref, data_ref = graph.data("w", w), graph.data("data", data)
        parts = [graph.task(i, _score_block, data_ref, i, w_ref) for i in range(n_blocks)]
        pieces = graph.compute(parts)
    return np.concatenate(pieces) if pieces else np.zeros((0, *w.shape[:-1]))


def prefetch_rows(data, client, arrays=False):
    """Read ``data``'s row blocks into the workers that :func:`score_rows` will ask, at low
    priority, while the solver starts and trains.

    Every run with a test set ends with its test metrics; the blocks read then (0.3-0.5 s
    for 25M nonzeros on this machine) are read here by workers the solver leaves idle
    (CoCoA+'s one group keeps one worker busy reading its rows at the start), and later
    evaluations find them kept (:mod:`daskpd.data.resident`). The solver's own tasks come
    first on a worker: these have a lower priority and last a block's read each.

    Parameters
    ----------
    data : Dataset-like or None
        Only an on-disk dataset is read (nothing is kept for in-memory data).
    client : distributed.Client or None
        Nothing is done without one.
    arrays : bool, default=False
        Keep the blocks as the kernels' CSR arrays (:func:`resident_block_arrays`, what the
        chained pass of SPDC and DSPDC and the evaluation read: a training set) instead of
        the scoring's matrices (a test set).

    Returns
    -------
    list of distributed.Future
        The reads, to hold until the run ends (released futures are cancelled).
    """
    if client is None or data is None or _is_in_memory(data):
        return []
    import uuid

    from daskpd._cluster import block_worker, worker_addresses, worker_memory_limits
    from daskpd.data.resident import RESIDENT_SHARE

    workers = worker_addresses(client)
    n_blocks = int(data.n_row_blocks)
    # kept as CSR with values in the stored type (binary data: ones), int32 indices
    needed = int(data.nnz) * (4 + np.dtype(data.dtype).itemsize) + 8 * int(data.n_samples)
    limits = list(worker_memory_limits(client).values())
    if not limits or min(limits) == 0 or needed > RESIDENT_SHARE * sum(limits):
        return []  # the workers would not keep them (no memory limit, or too large): read later
    token = uuid.uuid4().hex[:12]
    return [
        client.submit(
            _keep_arrays if arrays else _keep_block,
            data,
            i,
            key=f"daskpd-prefetch-{token}-{i}",
            workers=[block_worker(workers, i, n_blocks)] if workers else None,
            allow_other_workers=True,
            priority=-10,
            pure=False,
        )
        for i in range(n_blocks)
    ]


def _keep_block(data, i):
    resident_block(data, i)


def _keep_arrays(data, i):
    resident_block_arrays(data, i)


def _score_block(data, i, w):
    # the test blocks stay in the worker for the run's later evaluations
    X_block, _ = resident_block(data, i)
    if w.ndim == 2:
        return np.asarray(X_block @ w.T, dtype=np.float64).reshape(-1, w.shape[0])
    return np.asarray(X_block @ w, dtype=np.float64).ravel()
