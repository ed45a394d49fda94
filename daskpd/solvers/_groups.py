"""Row groups and their workers: what the grid-based solvers (DSO, cocoa) share.

A row group ``q`` of a ``grid``-group layout lives on one worker for the whole run
(:func:`group_owner`); its rows are weighted as :class:`daskpd.problem.Problem` weighs them
(:func:`row_weights`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "class_weight_pair",
    "group_owner",
    "has_grid",
    "is_on_disk",
    "row_weights",
    "worker_list",
]


def row_weights(data, y, start, stop, class_pair):
    """Row weights ``c_i = sample_weight_i * class_weight[y_i]`` of rows ``start:stop``.

    ``class_pair`` is ``(c_negative, c_positive)`` or ``None``, as
    :class:`daskpd.problem.Problem` resolves it, so training and evaluation weigh rows alike.
    """
    weights = np.ones(stop - start, dtype=np.float64)
    sample = data.sample_weight_rows(start, stop)
    if sample is not None:
        weights *= np.asarray(sample, dtype=np.float64)
    if class_pair is not None:
        weights *= np.where(y > 0, float(class_pair[1]), float(class_pair[0]))
    return weights


def class_weight_pair(problem, data):
    """``(c_negative, c_positive)`` of ``problem``'s class weights on ``data``, or None."""
    if getattr(problem, "class_weight", None) is None:
        return None
    return problem._class_weight_pair(data)


def group_owner(settings, workers, q):
    """The worker that keeps row group ``q`` of ``settings.grid`` (None in-process)."""
    if not workers:
        return None
    # Contiguous row groups per worker: the ring step q + 1 -> q stays inside one worker
    # for all but one row group of each worker.
    return workers[q * len(workers) // settings.grid]


def has_grid(data, grid):
    """Whether ``data`` has a stored layout for ``grid`` row groups."""
    try:
        return int(grid) in [int(g) for g in data.grids]
    except (AttributeError, KeyError, TypeError):
        return False


def is_on_disk(data):
    """Whether ``data`` is a dataset on disk (its workers read their own rows)."""
    return getattr(data, "path", None) is not None


def worker_list(client):
    """The cluster's worker addresses, sorted (empty in-process); no workers is an error."""
    if client is None:
        return ()
    from daskpd._cluster import worker_addresses

    workers = worker_addresses(client)
    if not workers:
        raise ValueError(f"the Dask cluster at {client.scheduler.address} has no workers")
    return workers
