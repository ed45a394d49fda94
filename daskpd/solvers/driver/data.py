"""The data of a run as the driver sees it.

Turning what a caller passes into a Dataset-like object, the checks of its shape, the test
metrics of a task, and the descriptions of a run's objective and data that checkpoints
record. Scoring rows with ``w`` is :mod:`daskpd.solvers.common.scores` (the evaluation and
the chained pass read the same kept blocks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

__all__ = ["metrics_for"]


def _check_n_features(data, n_features: int, name: str) -> None:
    if int(data.n_features) != int(n_features):
        raise ValueError(f"{name} has {data.n_features} features but the model has {n_features}")


def metrics_for(scores: np.ndarray, y: np.ndarray, task: str, loss_name: str = "") -> dict:
    """Return the metrics that fit a task (see :mod:`daskpd.metrics`), as floats.

    Binary task: ``auprc`` (trapezoid), ``average_precision``, ``roc_auc``, ``error_rate``,
    and ``log_loss`` when the loss is logistic (scores are then log-odds). Regression:
    ``rmse``, ``mae`` and ``r2``. AUPRC and ROC AUC are NaN when only one class is present.
    A model with one score per row (a regression loss) on multiclass data reads its integer
    labels as numbers: the regression metrics (one-vs-rest scores, one column per class, have
    :func:`daskpd.metrics.multiclass_metrics`).

    Parameters
    ----------
    scores : ndarray of shape (n_samples,)
        Decision values ``X @ w``.
    y : ndarray of shape (n_samples,)
        Labels (+-1 or 0/1 for binary tasks).
    task : {"binary", "multiclass", "regression"}
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
    if task in ("regression", "multiclass"):
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
