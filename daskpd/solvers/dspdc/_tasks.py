"""The block task of a DSPDC epoch (Algorithm 1 on a row block of explicit data).

Symbols as in the translation table of :mod:`daskpd.solvers.dspdc`.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels import dspdc as dspdc_kernels
from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers.common.chain import Carry, _block_csr
from daskpd.solvers.common.coordinate import block_weights, draw_rows, kernel_scalars


def _dspdc_block_task(carry, z_block, data, block, seed, n_iter, spec, steps, opts):
    indptr, indices, values, binary, labels = _block_csr(data, block)
    rng = np.random.default_rng(seed)
    m, q = opts["batch_size"], opts["n_coords"]
    d = int(data.shape[1])
    rows = draw_rows(rng, len(labels), n_iter, m)
    if q == d:
        cols = np.empty(0, dtype=np.int64)
    else:
        perm = np.arange(d, dtype=np.int64)
        cols = dspdc_kernels.draw_subsets(rng.random(n_iter * q), d, q, perm)
    w = carry.w.copy()
    w_prev = carry.w_prev.copy()
    u = carry.u.copy()
    z = np.array(z_block, dtype=np.float64, copy=True)
    weights = block_weights(data, block, opts["class_pair"], labels)
    done = dspdc_kernels.dspdc_rows(
        spdc_kernels.BlockRows(indptr, indices, values, binary, labels, weights),
        z,
        dspdc_kernels.CoordinateSample(rows, m, cols, q),
        dspdc_kernels.PrimalState(w, w_prev, u, np.zeros(d)),
        spec.loss_code,
        spec.loss_params,
        kernel_scalars(spec, steps, int(data.shape[0])),
    )
    return Carry(w, w_prev, u, carry.t + int(done)), z
