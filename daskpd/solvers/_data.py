"""Data, scoring and run-description helpers of the driver.

Turning what a caller passes into a Dataset-like object, scoring rows with ``w`` in one Dask
compute, the test metrics of a task, and the descriptions of a run's objective and data that
checkpoints record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from daskpd.data.resident import resident_block, resident_block_arrays

__all__ = ["metrics_for", "prefetch_rows", "score_rows"]


def _as_data(data, *, name: str):
    """Turn a Dataset-like object or an (X, y) pair into a Dataset-like object."""
    if hasattr(data, "n_row_blocks") and hasattr(data, "block"):
        return data
    if isinstance(data, tuple | list) and len(data) == 2:
        from daskpd.data import as_dataset

        return as_dataset(data[0], data[1])
    if data is None:
        raise ValueError(f"{name} is None")
    raise ValueError(
        f"{name} must be a Dataset, a MemoryDataset or an (X, y) pair, got {type(data).__name__}"
    )


def _check_n_features(data, n_features: int, name: str) -> None:
    if int(data.n_features) != int(n_features):
        raise ValueError(f"{name} has {data.n_features} features but the model has {n_features}")


def _is_in_memory(data) -> bool:
    # Anything that is not backed by a store path is an in-memory dataset.
    return getattr(data, "path", None) is None


def score_rows(w, data, *, client=None) -> np.ndarray:
    """Return ``X @ w`` for all rows of ``data``, a task per row block.

    On a client, block ``i`` is scored by the same worker in every call (while the workers
    stay), which keeps the block after its first read (:mod:`daskpd.data.resident`).

    Parameters
    ----------
    w : ndarray of shape (n_features,)
    data : Dataset-like
        Has ``n_row_blocks`` and ``block(i)``.
    client : distributed.Client, optional
        Runs the compute on this client; otherwise the current Dask scheduler.

    Returns
    -------
    scores : ndarray of shape (n_samples,)
    """
    from daskpd._graphs import TaskGraph

    w = np.asarray(w, dtype=np.float64)
    n_blocks = int(data.n_row_blocks)
    if n_blocks == 0:
        return np.zeros(0)
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
    return np.concatenate(pieces) if pieces else np.zeros(0)


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
    return np.asarray(X_block @ w, dtype=np.float64).ravel()


def metrics_for(scores: np.ndarray, y: np.ndarray, task: str, loss_name: str = "") -> dict:
    """Return the metrics that fit a task (see :mod:`daskpd.metrics`), as floats.

    Binary task: ``auprc`` (trapezoid), ``average_precision``, ``roc_auc``, ``error_rate``,
    and ``log_loss`` when the loss is logistic (scores are then log-odds). Regression:
    ``rmse``, ``mae`` and ``r2``. AUPRC and ROC AUC are NaN when only one class is present.

    Parameters
    ----------
    scores : ndarray of shape (n_samples,)
        Decision values ``X @ w``.
    y : ndarray of shape (n_samples,)
        Labels (+-1 or 0/1 for binary tasks).
    task : {"binary", "regression"}
    loss_name : str, optional
        Name of the training loss (decides whether log-loss is meaningful).

    Returns
    -------
    dict of str to float
    """
    from daskpd import metrics

    scores = np.asarray(scores, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        return {}
    if task == "regression":
        return {
            "rmse": metrics.rmse(y, scores),
            "mae": float(np.mean(np.abs(scores - y))),
            "r2": metrics.r2(y, scores),
        }
    positive = y > 0
    out = {"error_rate": metrics.error_rate(y, scores)}
    if positive.any() and (~positive).any():
        out["auprc"] = metrics.auprc(y, scores)
        out["average_precision"] = metrics.average_precision(y, scores)
        out["roc_auc"] = metrics.roc_auc(y, scores)
    else:
        out["auprc"] = out["average_precision"] = out["roc_auc"] = math.nan
    if loss_name == "logistic":
        out["log_loss"] = metrics.log_loss(y, scores)
    return out


def _objective_description(problem, data) -> dict:
    loss, reg = problem.loss, problem.regularizer
    class_weight = getattr(problem, "class_weight", None)
    if isinstance(class_weight, Mapping):
        class_weight = {str(k): float(v) for k, v in class_weight.items()}
    return {
        "loss": getattr(loss, "name", type(loss).__name__),
        "loss_params": [float(p) for p in np.atleast_1d(getattr(loss, "params", []))],
        "regularizer": getattr(reg, "name", type(reg).__name__),
        "regularizer_params": [float(p) for p in np.atleast_1d(getattr(reg, "params", []))],
        "alpha": float(problem.alpha),
        "class_weight": class_weight,
        "n_features": int(data.n_features),
        "task": str(getattr(data, "task", "binary")),
    }


def _data_identity(data) -> dict:
    return {
        "path": str(getattr(data, "path", None)),
        "shape": [int(s) for s in data.shape],
        "nnz": int(getattr(data, "nnz", -1)),
    }
