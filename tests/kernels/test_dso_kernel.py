"""DSO kernels against slow Python references on the same visit order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from daskpd.kernels import dso as kernels
from daskpd.kernels import scalar

LOSSES = {
    "hinge": (scalar.HINGE, np.zeros(1)),
    "smooth_hinge": (scalar.SMOOTH_HINGE, np.array([0.5])),
    "logistic": (scalar.LOGISTIC, np.zeros(1)),
    "squared": (scalar.SQUARED, np.zeros(1)),
    "absolute": (scalar.ABSOLUTE, np.zeros(1)),
}
REGULARIZERS = {
    "l2": (scalar.L2, np.zeros(1)),
    "l1": (scalar.L1, np.zeros(1)),
    "elasticnet": (scalar.ELASTIC_NET, np.array([0.3])),
}


def _reference_tile(tile, z, z_acc, rowc, w, w_acc, inv_col, snap, cfg):
    """Update (8) one nonzero at a time in plain Python (the kernel's specification)."""
    rows, cols, vals, order = tile
    z_snap, v_snap, w_snap, u_snap = snap
    inv_n = cfg["inv_n"]
    for e in order:
        i, j, x = int(rows[e]), int(cols[e]), float(vals[e])
        wj, zi = float(w[j]), float(z[i])
        if cfg["svrg"]:
            cw = ((zi - z_snap[i]) * x + u_snap[j] * inv_col[j]) * inv_n
            cz = ((wj - w_snap[j]) * x + v_snap[i] * rowc["inv_row_nnz"][i]) * inv_n
        else:
            cw, cz = zi * x * inv_n, wj * x * inv_n
        # derivative of loss*(z, y) from its closed form, independent of the kernel's helper
        zz, yi = zi * rowc["inv_weight"][i], rowc["y"][i]
        code = cfg["loss"][0]
        if code == scalar.LOGISTIC:
            a = -yi * zz
            slope = yi * math.log((1.0 - a) / a)
        elif code == scalar.SMOOTH_HINGE:
            slope = yi + cfg["loss"][1][0] * zz
        elif code == scalar.SQUARED:
            slope = yi + zz
        else:
            slope = yi
        gz = cz - slope * inv_n * rowc["inv_row_nnz"][i]
        reg_code, reg_params = cfg["reg"]
        if cfg["prox"]:
            gw = cw
        else:
            gw = cfg["alpha"] * scalar.reg_subgradient(reg_code, reg_params, wj) * inv_col[j] + cw
        if cfg["adagrad"]:
            w_acc[j] += gw * gw
            z_acc[i] += gz * gz
            step_w = cfg["eta_w"] / math.sqrt(w_acc[j] + cfg["eps"])
            step_z = cfg["eta_z"] / math.sqrt(z_acc[i] + cfg["eps"])
        else:
            step_w, step_z = cfg["eta_w"], cfg["eta_z"]
        new_w = wj - step_w * gw
        if cfg["prox"]:
            new_w = scalar.reg_prox(reg_code, reg_params, new_w, step_w * cfg["alpha"] * inv_col[j])
        w[j] = min(max(new_w, -cfg["w_bound"]), cfg["w_bound"])
        z[i] = min(max(zi + step_z * gz, rowc["z_lo"][i]), rowc["z_hi"][i])


def _random_tile(rng, n_rows=7, n_cols=9, nnz=40):
    flat = rng.choice(n_rows * n_cols, size=nnz, replace=False)
    flat.sort()
    rows = (flat // n_cols).astype(np.int32)
    cols = (flat % n_cols).astype(np.int32)
    vals = rng.normal(size=nnz)
    return rows, cols, vals


def _row_constants(rng, loss, n_rows, weighted):
    y = np.where(rng.random(n_rows) < 0.5, -1.0, 1.0)
    if loss[0] == scalar.SQUARED or loss[0] == scalar.ABSOLUTE:
        y = rng.normal(size=n_rows)
    weight = rng.uniform(0.5, 2.0, n_rows) if weighted else np.ones(n_rows)
    z_lo, z_hi, z0 = np.empty(n_rows), np.empty(n_rows), np.empty(n_rows)
    kernels.dual_boxes(loss[0], loss[1], y, weight, z_lo, z_hi, z0)
    return {
        "y": y,
        "inv_weight": 1.0 / weight,
        "inv_row_nnz": 1.0 / rng.integers(1, 6, n_rows),
        "z_lo": z_lo,
        "z_hi": z_hi,
        "z0": z0,
    }


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@pytest.mark.parametrize("reg_name", sorted(REGULARIZERS))
@pytest.mark.parametrize("adagrad", [False, True])
def test_kernel_matches_reference(loss_name, reg_name, adagrad):
    rng = np.random.default_rng(7)
    rows, cols, vals = _random_tile(rng)
    loss, reg = LOSSES[loss_name], REGULARIZERS[reg_name]
    for svrg in (False, True):
        for prox in (False, True):
            rowc = _row_constants(rng, loss, 7, weighted=True)
            # start inside the box (z0 may sit on its boundary)
            z = 0.5 * (rowc["z0"] + np.clip(0.0, rowc["z_lo"], rowc["z_hi"]))
            w = rng.normal(scale=0.3, size=9)
            z_acc, w_acc = rng.uniform(0, 1e-3, 7), rng.uniform(0, 1e-3, 9)
            inv_col = 1.0 / rng.integers(1, 5, 9)
            snap = (z + 0.01, rng.normal(size=7), w - 0.02, rng.normal(size=9))
            order = rng.permutation(rows.shape[0]).astype(np.int64)
            cfg = {
                "inv_n": 1.0 / 20,
                "loss": loss,
                "reg": reg,
                "alpha": 0.1,
                "eta_w": 0.7,
                "eta_z": 0.4,
                "adagrad": adagrad,
                "eps": 1e-12,
                "svrg": svrg,
                "prox": prox,
                "w_bound": 2.0,
            }
            expected = [z.copy(), z_acc.copy(), w.copy(), w_acc.copy()]
            _reference_tile(
                (rows, cols, vals, order), *expected[:2], rowc, *expected[2:], inv_col, snap, cfg
            )
            got = [z.copy(), z_acc.copy(), w.copy(), w_acc.copy()]
            columns = kernels.pack_columns(w, w_acc, inv_col, *(snap[2:] if svrg else ()))
            kernels.dso_tile(
                kernels.TileData(rows, cols, vals, False, np.zeros(0, np.int64), order, 1),
                kernels.DualBlock(
                    got[0], got[1], rowc["z_lo"], rowc["z_hi"], rowc["y"], rowc["inv_weight"],
                    rowc["inv_row_nnz"], snap[0], snap[1],
                ),
                columns,
                kernels.TileUpdate(
                    loss_code=loss[0], loss_params=loss[1], reg_code=reg[0], reg_params=reg[1],
                    alpha=cfg["alpha"], inv_n=cfg["inv_n"], eta_w=cfg["eta_w"],
                    eta_z=cfg["eta_z"], w_bound=cfg["w_bound"], eps=cfg["eps"],
                    adagrad=adagrad, svrg=svrg,
                    reg_step=kernels.REG_PROX if prox else kernels.REG_GRADIENT,
                ),
            )  # fmt: skip
            got[2], got[3] = columns[:, kernels.COL_W], columns[:, kernels.COL_W_ACC]
            for a, b in zip(got, expected, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
            # the update moved something, so the comparison is not vacuous
            assert not np.array_equal(got[2], w)


def test_segment_order_equals_expanded_nonzero_order():
    rng = np.random.default_rng(3)
    rows, cols, vals = _random_tile(rng, n_rows=6, n_cols=8, nnz=30)
    loss, reg = LOSSES["logistic"], REGULARIZERS["l2"]
    rowc = _row_constants(rng, loss, 6, weighted=False)
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    segment_ptr = np.r_[starts, rows.shape[0]].astype(np.int64)
    segment_order = rng.permutation(segment_ptr.shape[0] - 1).astype(np.int64)
    # interleave 2: one nonzero of each of two consecutive rows in turn
    expanded = []
    for first in range(0, segment_order.shape[0], 2):
        runs = [
            list(range(segment_ptr[s], segment_ptr[s + 1]))
            for s in segment_order[first : first + 2]
        ]
        for k in range(max(len(run) for run in runs)):
            expanded += [run[k] for run in runs if k < len(run)]
    expanded = np.array(expanded, dtype=np.int64)
    assert np.array_equal(kernels.expand_order(segment_ptr, segment_order, 2), expanded)
    assert np.array_equal(np.sort(expanded), np.arange(rows.shape[0]))
    results = []
    for ptr, order in ((segment_ptr, segment_order), (np.zeros(0, np.int64), expanded)):
        z, z_acc = rowc["z0"].copy(), np.zeros(6)
        columns = kernels.pack_columns(np.zeros(8), np.zeros(8), np.full(8, 0.25))
        kernels.dso_tile(
            kernels.TileData(rows, cols, vals, False, ptr, order, 2),
            kernels.DualBlock(
                z, z_acc, rowc["z_lo"], rowc["z_hi"], rowc["y"], rowc["inv_weight"],
                rowc["inv_row_nnz"], np.zeros(0), np.zeros(0),
            ),
            columns,
            kernels.TileUpdate(
                loss_code=loss[0], loss_params=loss[1], reg_code=reg[0], reg_params=reg[1],
                alpha=0.1, inv_n=0.05, eta_w=0.5, eta_z=0.5, w_bound=np.inf, eps=1e-12,
                adagrad=True, svrg=False, reg_step=kernels.REG_GRADIENT,
            ),
        )  # fmt: skip
        results.append((z, columns[:, kernels.COL_W]))
    assert np.array_equal(results[0][0], results[1][0])
    assert np.array_equal(results[0][1], results[1][1])


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_conjugate_slope_is_derivative_of_conjugate(loss_name):
    code, params = LOSSES[loss_name]
    rng = np.random.default_rng(1)
    for _ in range(20):
        y = float(rng.choice([-1.0, 1.0])) if code not in (scalar.SQUARED,) else rng.normal()
        lo, hi = scalar.loss_dual_bounds(code, params, y)
        lo, hi = max(lo, -3.0), min(hi, 3.0)
        z = rng.uniform(lo + 0.05 * (hi - lo), hi - 0.05 * (hi - lo))
        h = 1e-6
        numeric = (
            scalar.loss_conjugate(code, params, z + h, y)
            - scalar.loss_conjugate(code, params, z - h, y)
        ) / (2 * h)
        assert kernels.conjugate_slope(code, params, z, y) == pytest.approx(numeric, rel=1e-6)


def test_dual_boxes_logistic_margin_and_weights():
    y = np.array([1.0, -1.0, 1.0])
    weight = np.array([1.0, 2.0, 0.0])
    z_lo, z_hi, z0 = np.empty(3), np.empty(3), np.empty(3)
    kernels.dual_boxes(scalar.LOGISTIC, np.zeros(1), y, weight, z_lo, z_hi, z0)
    assert z_lo[0] == -1.0 + kernels.LOGISTIC_MARGIN and z_hi[0] == -kernels.LOGISTIC_MARGIN
    assert z_lo[1] == 2 * kernels.LOGISTIC_MARGIN and z_hi[1] == 2 * (1 - kernels.LOGISTIC_MARGIN)
    assert z_lo[2] == 0.0 and z_hi[2] == 0.0
    # the start is the dual point of w = 0: c loss'(0, y) = -c y / 2
    np.testing.assert_allclose(z0, [-0.5, 1.0, 0.0])
    assert np.all((z_lo <= z0) & (z0 <= z_hi))


def _local_dual(a, y, X, alpha, loss_code):
    m_q = y.shape[0]
    w = X.T @ (a * y) / (alpha * m_q)
    if loss_code == scalar.HINGE:
        conj = a.sum()
    else:
        b = np.clip(a, 1e-300, 1.0)
        conj = np.sum(-b * np.log(b) - (1 - b) * np.log1p(-np.minimum(b, 1 - 1e-16)))
    return conj / m_q - alpha / 2 * w @ w, w


@pytest.mark.parametrize("loss_code", [scalar.HINGE, scalar.LOGISTIC])
def test_dcd_local_increases_dual_and_keeps_w_consistent(loss_code):
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    X = sp.random(50, 12, density=0.3, random_state=2, format="csr")
    X.data = rng.normal(size=X.nnz)
    y = np.where(rng.random(50) < 0.5, -1.0, 1.0)
    alpha = 0.05
    a = np.zeros(50) if loss_code == scalar.HINGE else np.full(50, 0.5)
    w = X.T @ (a * y) / (alpha * 50)
    values = [_local_dual(a, y, X, alpha, loss_code)[0]]
    for _ in range(4):
        order = rng.permutation(50).astype(np.int64)[None, :]
        kernels.dcd_local(
            X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data, False, y,
            np.ones(50), loss_code, alpha, 1, order, a, w,
        )  # fmt: skip
        value, w_from_a = _local_dual(a, y, X, alpha, loss_code)
        np.testing.assert_allclose(w, w_from_a, atol=1e-12)
        assert value >= values[-1] - 1e-12
        values.append(value)
    assert values[-1] > values[0] + 1e-3
    assert np.all((a >= 0) & (a <= 1))


def test_tile_products_and_read_only_loop():
    rng = np.random.default_rng(2)
    rows, cols, vals = _random_tile(rng)
    z, w = rng.normal(size=7), rng.normal(size=9)
    xt_z, x_w = np.zeros(9), np.zeros(7)
    kernels.tile_products(rows, cols, vals, False, z, w, xt_z, x_w)
    dense = np.zeros((7, 9))
    dense[rows, cols] = vals
    np.testing.assert_allclose(xt_z, dense.T @ z, atol=1e-13)
    np.testing.assert_allclose(x_w, dense @ w, atol=1e-13)
    order = np.arange(rows.shape[0], dtype=np.int64)
    total = kernels.tile_read_only(rows, cols, vals, False, np.zeros(0, np.int64), order, w, z)
    assert total == pytest.approx(np.sum(w[cols] * vals + z[rows]))


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("block_cols", [1, 3, 8, 100])
def test_block_layout_matches_a_stable_sort_by_sub_block(binary, block_cols):
    rng = np.random.default_rng(block_cols)
    rows, cols, vals = _random_tile(rng, n_rows=9, n_cols=20, nnz=70)
    vals = np.zeros(0) if binary else vals
    out_rows, out_cols, out_vals, segment_ptr, block_ptr = kernels.block_layout(
        rows, cols, vals, binary, block_cols
    )
    # reference: a stable sort on the sub-block, so each sub-block keeps the row-major order
    perm = np.argsort(cols // block_cols, kind="stable")
    assert np.array_equal(out_rows, rows[perm]) and np.array_equal(out_cols, cols[perm])
    if not binary:
        assert np.array_equal(out_vals, vals[perm])
    n_blocks = -(-int(cols.max() + 1) // block_cols)
    assert block_ptr.shape[0] == n_blocks + 1 and block_ptr[0] == 0
    assert segment_ptr[0] == 0 and segment_ptr[-1] == rows.shape[0]
    for b in range(n_blocks):
        for s in range(block_ptr[b], block_ptr[b + 1]):
            run = slice(segment_ptr[s], segment_ptr[s + 1])
            # a segment is one row inside one sub-block ...
            assert np.all(out_rows[run] == out_rows[run][0])
            assert np.all(out_cols[run] // block_cols == b)
            # ... and maximal: the next segment of the same sub-block is another row
            if s + 1 < block_ptr[b + 1]:
                assert out_rows[segment_ptr[s + 1]] != out_rows[run][0]
    assert block_ptr[-1] == segment_ptr.shape[0] - 1


def test_shuffle_runs_permutes_inside_each_run_as_a_function_of_the_seed():
    rng = np.random.default_rng(4)
    n = 200
    rows = rng.integers(0, 30, n).astype(np.int32)
    cols = np.arange(n, dtype=np.int32)  # distinct: they identify each nonzero
    vals = rng.normal(size=n).astype(np.float32)
    bounds = np.array([0, 50, 51, 51, 200], dtype=np.int64)
    out = kernels.shuffle_runs(rows, cols, vals, False, bounds, np.uint64(9))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        # each run keeps its own nonzeros, whole (row, value) pairs moved together
        assert np.array_equal(np.sort(out[1][lo:hi]), cols[lo:hi])
        assert np.array_equal(out[0][lo:hi], rows[out[1][lo:hi]])
        assert np.array_equal(out[2][lo:hi], vals[out[1][lo:hi]])
    assert not np.array_equal(out[1], cols)
    again = kernels.shuffle_runs(rows, cols, vals, False, bounds, np.uint64(9))
    other = kernels.shuffle_runs(rows, cols, vals, False, bounds, np.uint64(10))
    assert np.array_equal(again[1], out[1])
    assert not np.array_equal(other[1], out[1])
    binary = kernels.shuffle_runs(rows, cols, np.zeros(0), True, bounds, np.uint64(9))
    assert np.array_equal(binary[1], out[1]) and binary[2].shape == (0,)


@pytest.mark.parametrize("count", [1, 2, 3, 7, 1000])
def test_running_mean_equals_numpy_bit_for_bit(count):
    rng = np.random.default_rng(count)
    records = rng.normal(size=(5000, 4)) * 10.0 ** rng.integers(-8, 8, size=(5000, 1))
    average = rng.normal(size=5000)
    out = np.empty(5000)
    kernels.running_mean(average, records[:, 0], float(count), out)  # a strided column
    assert np.array_equal(out, average + (records[:, 0] - average) / count)
    contiguous = records[:, 0].copy()
    again = np.empty(5000)
    kernels.running_mean(average, contiguous, float(count), again)
    assert np.array_equal(again, out)
