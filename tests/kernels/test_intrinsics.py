"""The LLVM intrinsics of the DSO loop: same bits as the scalar code, prefetch changes nothing."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

from daskpd.kernels.intrinsics import div_sqrt_pair, prefetch_record


@numba.njit
def _pairs(a, b, c, d, out):
    for k in range(a.shape[0]):
        out[k, 0], out[k, 1] = div_sqrt_pair(a[k], b[k], c[k], d[k])


@numba.njit
def _sum_with_prefetch(records, order, distance):
    total = 0.0
    for k in range(order.shape[0]):
        if k + distance < order.shape[0]:
            prefetch_record(records, order[k + distance])
        total += records[order[k], 0] * records[order[k], 1]
    return total


def test_div_sqrt_pair_equals_the_scalar_operations_bit_for_bit():
    rng = np.random.default_rng(0)
    n = 20_000
    # steps and accumulators over the whole range AdaGrad meets, and the edge values
    a = rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-12, 3, n)
    b = rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-12, 3, n)
    c = 10.0 ** rng.uniform(-300, 300, n)
    d = 10.0 ** rng.uniform(-300, 300, n)
    c[:4] = [0.0, np.inf, 5e-324, 1.0]
    d[:4] = [1.0, 0.0, np.inf, 5e-324]
    out = np.empty((n, 2))
    with np.errstate(divide="ignore"):
        _pairs(a, b, c, d, out)
        # IEEE 754 rounds sqrt and division exactly, one element at a time
        expected_w = np.array([x / np.sqrt(y) for x, y in zip(a, c, strict=True)])
        expected_z = np.array([x / np.sqrt(y) for x, y in zip(b, d, strict=True)])
    assert np.array_equal(out[:, 0].view(np.int64), expected_w.view(np.int64))
    assert np.array_equal(out[:, 1].view(np.int64), expected_z.view(np.int64))


def test_div_sqrt_pair_nan_for_a_negative_root():
    out = np.empty((1, 2))
    _pairs(np.array([1.0]), np.array([1.0]), np.array([-1.0]), np.array([4.0]), out)
    assert math.isnan(out[0, 0]) and out[0, 1] == 0.5


@pytest.mark.parametrize("distance", [0, 1, 12, 10_000])
def test_prefetch_changes_no_result(distance):
    rng = np.random.default_rng(1)
    records = rng.standard_normal((5_000, 4))
    before = records.copy()
    order = rng.integers(0, records.shape[0], 50_000).astype(np.int64)
    expected = 0.0
    for k in order:  # the same sum, in the same order, in Python
        expected += records[k, 0] * records[k, 1]
    assert _sum_with_prefetch(records, order, distance) == expected
    assert np.array_equal(records, before)


def test_prefetch_rejects_what_is_not_a_record_array():
    @numba.njit
    def flat(values):
        prefetch_record(values, 0)

    with pytest.raises(numba.core.errors.TypingError):
        flat(np.zeros(3))


def test_div_sqrt_pair_rejects_other_than_float64():
    @numba.njit
    def single(x):
        return div_sqrt_pair(x, x, x, x)

    with pytest.raises(numba.core.errors.TypingError):
        single(np.float32(2.0))
