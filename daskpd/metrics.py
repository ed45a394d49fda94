"""Evaluation metrics on decision scores ``s_i = x_i . w``.

Binary labels are {-1, +1} (or {0, 1}; a row is positive when ``y > 0``); a row is predicted
positive when its score is ``> 0``.

:func:`auprc` is the area under the precision-recall curve by the trapezoid rule, as LIBSVM's
datasets page computes it with MATLAB ``perfcurve(labels, scores, 1, 'xCrit', 'reca', 'yCrit',
'prec')``: one curve point per distinct score (ties form one point), taken in decreasing order of
score, and the undefined point with no predicted positive (precision 0/0) is dropped, so the
curve starts at the recall of the highest score rather than at (0, 1).
:func:`average_precision` is the step sum ``sum_k (R_k - R_{k-1}) P_k`` of scikit-learn's
``average_precision_score``; the two differ slightly and both are reported.

Multiclass (one-vs-rest scores of shape (n_samples, n_classes), :func:`multiclass_metrics`):
a row is predicted the class of its largest score (the first on ties, as scikit-learn's
``argmax``); :func:`accuracy`, :func:`macro_f1`, and each class's :func:`auprc` of its
column against "this class or not".
"""

from __future__ import annotations

import numpy as np

# scikit-learn (about 3 s to import, measured here) only for r2.

__all__ = [
    "accuracy",
    "auprc",
    "average_precision",
    "error_rate",
    "log_loss",
    "macro_f1",
    "multiclass_metrics",
    "precision_recall_curve",
    "r2",
    "rmse",
    "roc_auc",
]


def _scores_labels(y_true, scores, *, binary=True):
    y = np.asarray(y_true, dtype=np.float64).ravel()
    s = np.asarray(scores, dtype=np.float64).ravel()
    if y.shape != s.shape:
        raise ValueError(
            f"y_true and scores must have the same length, got {y.shape[0]} and {s.shape[0]}"
        )
    if y.size == 0:
        raise ValueError("y_true is empty")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite, got NaN or inf")
    if binary:
        ok = (y == 1) | (y == -1) | (y == 0)
        if not np.all(ok):
            raise ValueError(
                f"y_true must hold labels in {{-1, +1}} or {{0, 1}}, got {y[~ok][0].item()!r}"
            )
    return y, s


def _counts(y_true, scores):
    """Cumulative (true positives, false positives) at each distinct score, decreasing."""
    y, s = _scores_labels(y_true, scores)
    positive = y > 0
    n_positive = int(positive.sum())
    if n_positive == 0 or n_positive == y.size:
        raise ValueError(
            f"the metric needs both positive and negative rows, got {n_positive} positives "
            f"out of {y.size}"
        )
    order = np.argsort(-s, kind="mergesort")
    s, positive = s[order], positive[order]
    # The last row of each run of equal scores closes one threshold.
    last = np.r_[np.nonzero(np.diff(s))[0], s.size - 1]
    tp = np.cumsum(positive)[last].astype(np.float64)
    fp = (last + 1) - tp
    return tp, fp, n_positive, y.size - n_positive, s[last]


def precision_recall_curve(y_true, scores):
    """Precision and recall at each distinct score threshold (decreasing thresholds).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    scores : array-like of shape (n_samples,)

    Returns
    -------
    recall, precision, thresholds : ndarray of shape (n_thresholds,)
        Row ``k`` predicts positive every row with ``score >= thresholds[k]``.
    """
    tp, fp, n_positive, _, thresholds = _counts(y_true, scores)
    return tp / n_positive, tp / (tp + fp), thresholds


def auprc(y_true, scores) -> float:
    """Area under the precision-recall curve by the trapezoid rule (MATLAB ``perfcurve``);
    the arguments are those of :func:`precision_recall_curve`."""
    recall, precision, _ = precision_recall_curve(y_true, scores)
    return float(np.sum(np.diff(recall) * (precision[1:] + precision[:-1]) / 2.0))


def average_precision(y_true, scores) -> float:
    """Average precision ``sum_k (R_k - R_{k-1}) P_k`` with ``R_0 = 0`` (scikit-learn's)."""
    recall, precision, _ = precision_recall_curve(y_true, scores)
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def roc_auc(y_true, scores) -> float:
    """Area under the ROC curve (trapezoid over distinct thresholds; ties count one half)."""
    tp, fp, n_positive, n_negative, _ = _counts(y_true, scores)
    tpr = np.r_[0.0, tp / n_positive]
    fpr = np.r_[0.0, fp / n_negative]
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))


def error_rate(y_true, scores) -> float:
    """Fraction of rows whose predicted sign (``+1`` iff ``score > 0``) differs from the label."""
    y, s = _scores_labels(y_true, scores)
    return float(np.mean((s > 0) != (y > 0)))


def log_loss(y_true, scores) -> float:
    """Mean logistic loss ``log(1 + exp(-y s))`` of scores (logits).

    Labels in {-1, +1} or {0, 1}; equals the cross-entropy of the probabilities ``sigmoid(s)``.
    """
    y, s = _scores_labels(y_true, scores)
    margin = np.where(y > 0, s, -s)
    return float(np.mean(np.logaddexp(0.0, -margin)))


def rmse(y_true, predictions) -> float:
    """Root mean squared error ``sqrt(mean((predictions - y)^2))`` (regression)."""
    y, s = _scores_labels(y_true, predictions, binary=False)
    if not np.all(np.isfinite(y)):
        raise ValueError("y_true must be finite, got NaN or inf")
    return float(np.sqrt(np.mean((s - y) ** 2)))


def r2(y_true, predictions) -> float:
    """Coefficient of determination ``1 - sum (y - s)^2 / sum (y - mean y)^2`` (regression).

    scikit-learn's ``r2_score`` on finite targets: 1 for a perfect fit, 0 for the mean, below
    0 for worse than the mean.
    """
    from sklearn.metrics import r2_score

    y, s = _scores_labels(y_true, predictions, binary=False)
    if not np.all(np.isfinite(y)):
        raise ValueError("y_true must be finite, got NaN or inf")
    return float(r2_score(y, s))


def accuracy(y_true, y_pred) -> float:
    """Fraction of rows whose predicted label equals the true one."""
    y_true = np.asarray(y_true).ravel()
    y_pred = np.asarray(y_pred).ravel()
    if y_true.shape != y_pred.shape or y_true.size == 0:
        raise ValueError(
            f"y_true and y_pred must be non-empty and of the same length, got {y_true.shape[0]} "
            f"and {y_pred.shape[0]}"
        )
    return float(np.mean(y_true == y_pred))


def macro_f1(y_true, y_pred, classes) -> float:
    """Mean over ``classes`` of each class's F1 score ``2 TP / (2 TP + FP + FN)``.

    scikit-learn's ``f1_score(average="macro", labels=classes)``: a class that is neither in
    ``y_true`` nor predicted scores 0 (scikit-learn's ``zero_division=0``).
    """
    y_true = np.asarray(y_true).ravel()
    y_pred = np.asarray(y_pred).ravel()
    scores = []
    for label in np.asarray(classes).ravel():
        true = y_true == label
        predicted = y_pred == label
        hits = np.count_nonzero(true & predicted)
        total = np.count_nonzero(true) + np.count_nonzero(predicted)
        scores.append(2.0 * hits / total if total else 0.0)
    return float(np.mean(scores))


def multiclass_metrics(y_true, scores, classes) -> dict:
    """Accuracy, macro F1 and per-class AUPRC of one-vs-rest scores.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Labels, values of ``classes``.
    scores : array-like of shape (n_samples, n_classes)
        Column ``k``: the score of ``classes[k]`` (its binary problem's ``x . w_k``).
    classes : array-like of shape (n_classes,)

    Returns
    -------
    dict
        ``accuracy``, ``macro_f1`` (floats), ``auprc`` and ``average_precision`` (dicts from
        each class label, as a string, to its one-vs-rest value; NaN for a class absent from
        ``y_true`` or present in every row).
    """
    classes = np.asarray(classes).ravel()
    scores = np.asarray(scores, dtype=np.float64)
    y_true = np.asarray(y_true).ravel()
    if scores.ndim != 2 or scores.shape != (y_true.shape[0], classes.shape[0]):
        raise ValueError(
            f"scores must have shape (n_samples, n_classes) = ({y_true.shape[0]}, "
            f"{classes.shape[0]}), got {scores.shape}"
        )
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite, got NaN or inf")
    y_pred = classes[np.argmax(scores, axis=1)]
    per_class_auprc = {}
    per_class_ap = {}
    for k, label in enumerate(classes):
        positive = np.where(y_true == label, 1.0, -1.0)
        key = _label_key(label)
        if positive.min() < 0 < positive.max():
            per_class_auprc[key] = auprc(positive, scores[:, k])
            per_class_ap[key] = average_precision(positive, scores[:, k])
        else:
            per_class_auprc[key] = per_class_ap[key] = float("nan")
    return {
        "accuracy": accuracy(y_true, y_pred),
        "macro_f1": macro_f1(y_true, y_pred, classes),
        "auprc": per_class_auprc,
        "average_precision": per_class_ap,
    }


def _label_key(label) -> str:
    """A class label as a JSON key: integers without a decimal point (3.0 -> "3")."""
    if isinstance(label, float | np.floating) and float(label).is_integer():
        return str(int(label))
    return str(label)
