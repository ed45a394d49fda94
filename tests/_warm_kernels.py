"""Compile DSO's tile loops for the configurations the tests use, into numba's disk cache.

Started in the background by ``conftest.py`` at the start of a test session. Each (loss,
regularizer, switches) configuration of the tile loop is its own compiled function (the
switches are closure constants, see :func:`daskpd.kernels.dso._tile_kernel`): in a fresh
clone, compiling the 120 of them one after the other in the test process took about a minute.
Compiled here, on the other core, while the first tests run, the test process loads them from
the cache. A configuration the test process reaches first it compiles itself, as without this
script: the two only ever race to write the same cache entry, which numba allows.
"""

from __future__ import annotations

import itertools

import numpy as np

from daskpd.kernels import dso as kernels
from daskpd.kernels import scalar

# the types tests/kernels/test_dso_kernel.py calls the loop with (int32 ids, float64 values)
LOSSES = (
    (scalar.HINGE, np.zeros(1)),
    (scalar.SMOOTH_HINGE, np.array([0.5])),
    (scalar.LOGISTIC, np.zeros(1)),
    (scalar.SQUARED, np.zeros(1)),
    (scalar.ABSOLUTE, np.zeros(1)),
)
REGULARIZERS = (
    (scalar.L2, np.zeros(1)),
    (scalar.L1, np.zeros(1)),
    (scalar.ELASTIC_NET, np.array([0.3])),
)


def main():
    n_rows, n_cols = 3, 4
    rows = np.array([0, 1, 2], dtype=np.int32)
    cols = np.array([0, 2, 3], dtype=np.int32)
    vals = np.ones(3)
    order = np.arange(3, dtype=np.int64)
    for (loss, reg), adagrad, svrg, prox in itertools.product(
        itertools.product(LOSSES, REGULARIZERS), (False, True), (False, True), (False, True)
    ):
        ones = np.ones(n_rows)
        columns = kernels.pack_columns(
            np.zeros(n_cols), np.zeros(n_cols), np.ones(n_cols),
            *((np.zeros(n_cols), np.zeros(n_cols)) if svrg else ()),
        )  # fmt: skip
        kernels.dso_tile(
            kernels.TileData(rows, cols, vals, False, np.zeros(0, np.int64), order, 1),
            kernels.DualBlock(
                np.zeros(n_rows), np.zeros(n_rows), -ones, ones, ones, ones, ones,
                np.zeros(n_rows), np.zeros(n_rows),
            ),
            columns,
            kernels.TileUpdate(
                loss_code=loss[0], loss_params=loss[1], reg_code=reg[0], reg_params=reg[1],
                alpha=0.1, inv_n=0.05, eta_w=0.5, eta_z=0.5, w_bound=2.0, eps=1e-12,
                adagrad=adagrad, svrg=svrg,
                reg_step=kernels.REG_PROX if prox else kernels.REG_GRADIENT,
            ),
        )  # fmt: skip


if __name__ == "__main__":
    main()
