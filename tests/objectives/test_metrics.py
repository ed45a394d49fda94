"""Metrics against scikit-learn and hand-computed curves."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from daskpd.metrics import (
    auprc,
    average_precision,
    error_rate,
    log_loss,
    precision_recall_curve,
    r2,
    rmse,
    roc_auc,
)


@st.composite
def scored_labels(draw):
    n = draw(st.integers(4, 60))
    labels = draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=n, max_size=n))
    labels[0], labels[1] = -1.0, 1.0  # both classes present
    # Few distinct values, so ties are common.
    scores = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    return np.array(labels), np.array(scores, dtype=float) / 2


@settings(max_examples=30, deadline=None, derandomize=True)
@given(data=scored_labels())
def test_against_sklearn(data):
    y, s = data
    assert average_precision(y, s) == pytest.approx(skm.average_precision_score(y, s))
    assert roc_auc(y, s) == pytest.approx(skm.roc_auc_score(y, s))
    precision, recall, _ = skm.precision_recall_curve(y, s)
    # sklearn's curve ends with the (recall 0, precision 1) point that perfcurve drops.
    expected = np.sum(
        np.diff(recall[:-1][::-1]) * (precision[:-1][::-1][1:] + precision[:-1][::-1][:-1]) / 2
    )
    assert auprc(y, s) == pytest.approx(expected, abs=1e-12)
    assert error_rate(y, s) == pytest.approx(np.mean(np.where(s > 0, 1.0, -1.0) != y))
    assert log_loss(y, s) == pytest.approx(skm.log_loss(y > 0, 1 / (1 + np.exp(-s))))


def test_auprc_by_hand():
    # Scores in decreasing order: +, -, +, + (no ties). Points (recall, precision):
    # (1/3, 1), (1/3, 1/2), (2/3, 2/3), (1, 3/4). Trapezoid from the first defined point.
    y = np.array([1, -1, 1, 1])
    s = np.array([4.0, 3.0, 2.0, 1.0])
    recall, precision, thresholds = precision_recall_curve(y, s)
    np.testing.assert_allclose(recall, [1 / 3, 1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(precision, [1, 1 / 2, 2 / 3, 3 / 4])
    np.testing.assert_array_equal(thresholds, [4, 3, 2, 1])
    expected = (1 / 3) * (1 / 2 + 2 / 3) / 2 + (1 / 3) * (2 / 3 + 3 / 4) / 2
    assert auprc(y, s) == pytest.approx(expected)
    # Average precision sums the step: 1/3 * 1 + 1/3 * 2/3 + 1/3 * 3/4.
    assert average_precision(y, s) == pytest.approx((1 + 2 / 3 + 3 / 4) / 3)


def test_ties_form_one_point():
    y = np.array([1, -1, 1, -1])
    s = np.array([1.0, 1.0, 0.0, 0.0])
    recall, precision, _ = precision_recall_curve(y, s)
    np.testing.assert_allclose(recall, [0.5, 1.0])
    np.testing.assert_allclose(precision, [0.5, 0.5])
    assert auprc(y, s) == pytest.approx(0.25)
    # ROC points (0, 0), (1/2, 1/2), (1, 1): every positive ties with a negative.
    assert roc_auc(y, s) == pytest.approx(0.5)


def test_perfect_ranking():
    y = np.array([-1, -1, 1, 1, 1])
    s = np.array([-2.0, -1.0, 1.0, 2.0, 3.0])
    # The curve starts at recall 1/3 with precision 1 and stays there: area 2/3.
    assert auprc(y, s) == pytest.approx(2 / 3)
    assert average_precision(y, s) == pytest.approx(1.0)
    assert roc_auc(y, s) == pytest.approx(1.0)
    assert error_rate(y, s) == 0.0


def test_zero_one_labels_and_zero_scores():
    y = np.array([0, 1, 1, 0])
    s = np.array([0.0, 0.5, -0.5, -1.0])
    assert error_rate(y, s) == pytest.approx(0.25)  # score 0 predicts the negative class
    assert roc_auc(y, s) == pytest.approx(skm.roc_auc_score(y, s))


def test_log_loss_is_stable_for_large_scores():
    assert log_loss([1, -1], [800.0, -800.0]) == pytest.approx(0.0, abs=1e-300)
    assert log_loss([1], [-800.0]) == pytest.approx(800.0)


def test_r2_against_its_definition():
    y = np.array([1.0, 2.0, 4.0, 7.0])
    s = np.array([1.5, 2.0, 3.0, 8.0])
    expected = 1 - np.sum((y - s) ** 2) / np.sum((y - y.mean()) ** 2)
    assert r2(y, s) == pytest.approx(expected)
    assert r2(y, y) == 1.0
    assert r2(y, np.full(4, y.mean())) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="finite"):
        r2([1.0, math.nan], [0.0, 0.0])


def test_rmse():
    y = np.array([1.0, 2.0, 3.0])
    assert rmse(y, [1.0, 2.0, 5.0]) == pytest.approx(math.sqrt(4 / 3))
    assert rmse(y, y) == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: auprc([1, 1, 1], [0.1, 0.2, 0.3]), "both positive and negative"),
        (lambda: roc_auc([-1, -1], [0.1, 0.2]), "both positive and negative"),
        (lambda: auprc([1, -1], [0.1]), "same length"),
        (lambda: auprc([1, 2], [0.1, 0.2]), "labels"),
        (lambda: auprc([1, -1], [0.1, math.nan]), "finite"),
        (lambda: error_rate([], []), "empty"),
        (lambda: rmse([1.0, math.inf], [0.0, 0.0]), "finite"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
