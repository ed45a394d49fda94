"""The map-reduce pass of the batch baseline: per-block loss sums and gradients, a fixed tree.

Tasks are pure: they read a block and return new arrays.
"""

from __future__ import annotations

import numpy as np

from daskpd._graphs import TaskGraph


def _row_weights(class_weight, y, sample_weight):
    """``c_i = sample_weight_i * class_weight[y_i]``; ``class_weight`` is (negative, positive)."""
    weights = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, float)
    if class_weight is not None:
        negative, positive = class_weight
        weights = weights * np.where(y > 0, positive, negative)
    return weights


def _block_pass(data, i, loss, class_weight, points, gradient_rows):
    """Loss sums at every row of ``points`` and gradients at the rows in ``gradient_rows``."""
    X_block, y = data.block(i)
    start, stop = int(data.row_block_bounds[i]), int(data.row_block_bounds[i + 1])
    weights = _row_weights(class_weight, y, data.sample_weight_rows(start, stop))
    # One row per point, C-contiguous: the loss kernels then see the array layout they were
    # compiled (and cached) for.
    predictions = np.ascontiguousarray(
        np.asarray(X_block @ points.T, dtype=np.float64).reshape(y.shape[0], -1).T
    )
    values = np.empty(points.shape[0])
    grads = np.zeros((len(gradient_rows), points.shape[1]))
    for k in range(points.shape[0]):
        values[k] = float(weights @ np.asarray(loss.value(predictions[k], y)))
    for slot, k in enumerate(gradient_rows):
        residual = weights * np.asarray(loss.gradient(predictions[k], y))
        grads[slot] = np.asarray(X_block.T @ residual).ravel()
    return values, grads


def _block_power(data, i, class_weight, vector):
    X_block, y = data.block(i)
    start, stop = int(data.row_block_bounds[i]), int(data.row_block_bounds[i + 1])
    weights = _row_weights(class_weight, y, data.sample_weight_rows(start, stop))
    projected = np.asarray(X_block @ vector, dtype=np.float64).ravel()
    return (np.asarray(X_block.T @ (weights * projected)).ravel(), float(weights.max(initial=0)))


def _add_pass(a, b):
    return a[0] + b[0], a[1] + b[1]


def _add_power(a, b):
    return a[0] + b[0], max(a[1], b[1])


def _class_weight(problem, data):
    """The (negative, positive) class weights of the problem, resolved on ``data``, or None."""
    if getattr(problem, "class_weight", None) is None:
        return None
    # Problem resolves "balanced" from the label counts; reuse it so that the solver and the
    # evaluation weigh rows identically.
    negative, positive = problem._class_weight_pair(data)
    return float(negative), float(positive)


def _run_pass(problem, data, class_weight, points, gradient_rows):
    """One compute: (loss sums / n at each point, gradients / n at the chosen points)."""
    points = np.ascontiguousarray(points, dtype=np.float64)
    graph = TaskGraph("batch-pass")
    shared, data_ref = graph.data("points", points), graph.data("data", data)
    parts = [
        graph.task(i, _block_pass, data_ref, i, problem.loss, class_weight, shared,
                   tuple(gradient_rows))
        for i in range(data.n_row_blocks)
    ]  # fmt: skip
    ((values, grads),) = graph.compute([graph.tree("sum", _add_pass, parts)])
    n = float(data.n_samples)
    return values / n, grads / n
