"""DSO's serial replay, the reference of Lemma 2: every update of a run, one by one, in one
process (:func:`serial_replay`).

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.dso`.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels import dso as kernels
from daskpd.solvers.dso._options import _SEGMENT_ORDERS, DSOOptions
from daskpd.solvers.dso._solver import DSO, _assemble, _ensure_grid
from daskpd.solvers.dso._tiles import _load_tile, _visit_order


def _seed_sequence(seed):
    if isinstance(seed, np.random.SeedSequence):
        return seed
    return np.random.SeedSequence(int(seed))


def serial_replay(problem, data, *, n_epochs, seed=0, options=None):
    """Replay DSO's updates one by one on a single process, in the order of Lemma 2.

    For each epoch, each round ``r`` and each row group ``q = 0 .. p - 1``, the nonzeros of
    tile ``(q, (q + r) mod p)`` are appended in their visit order to one global sequence,
    which a single kernel call then runs on the full ``w`` and ``z``. No blocks, no Dask: a
    distributed run must equal this bit for bit.

    Parameters
    ----------
    problem : daskpd.problem.Problem
    data : Dataset or MemoryDataset
        With the tiled layout of ``options.grid`` (made in memory for in-memory data).
    n_epochs : int
        Epochs to replay.
    seed : int or numpy.random.SeedSequence, default=0
        Root seed, as given to :meth:`DSO.init`.
    options : DSOOptions, optional

    Returns
    -------
    result : dict of str to ndarray
        ``w``, ``z``, ``w_acc``, ``z_acc``, ``w_avg``, ``z_avg`` after ``n_epochs``.
    """
    options = options or DSOOptions()
    seed = _seed_sequence(seed)
    solver = DSO()
    solver.check(problem, data, options)
    state = solver.init(problem, data, seed=seed, client=None, options=options)
    settings = state.settings
    p = settings.grid
    rb, block_cols = state.row_bounds, state.block_cols
    data = _ensure_grid(data, p)
    arrays = solver.state_arrays(state)
    w, w_acc, z, z_acc = arrays["w"], arrays["w_acc"], arrays["z"], arrays["z_acc"]
    w_avg, z_avg = arrays["w_avg"], arrays["z_avg"]
    consts = {
        key: np.concatenate([c[key] for c in state.row_consts])
        for key in ("z_lo", "z_hi", "y", "inv_weight", "inv_row_nnz")
    }
    inv_col_nnz = _assemble(state.col_consts, block_cols, settings.n_features)
    tiles = {}
    for q in range(p):
        for r in range(p):
            source = state.tile_sources[q][r]
            tiles[q, r] = _load_tile(source, settings, q, r)
    svrg = settings.svrg_every > 0
    w_snap = u_snap = z_snap = v_snap = np.zeros(0)
    for epoch in range(1, int(n_epochs) + 1):
        if settings.snapshot_epoch(epoch):
            w_snap, z_snap = w.copy(), z.copy()
            u_snap = np.zeros_like(w)
            v_snap = np.zeros_like(z)
            for (q, r), (rows, cols, vals, *_) in tiles.items():
                block = block_cols[r]
                xt_z = np.zeros(block.shape[0])
                x_w = np.zeros(int(rb[q + 1] - rb[q]))
                kernels.tile_products(
                    rows, cols, vals, settings.binary, z[rb[q] : rb[q + 1]], w[block], xt_z, x_w
                )
                # Same summation order as the distributed snapshot tasks: over q, then r.
                u_snap[block] = _ordered_add(u_snap[block], xt_z, q)
                v_snap[rb[q] : rb[q + 1]] = _ordered_add(v_snap[rb[q] : rb[q + 1]], x_w, r)
        sequence_rows, sequence_cols, sequence_vals = [], [], []
        for rnd in range(p):
            for q in range(p):
                r = (q + rnd) % p
                tile = tiles[q, r]
                rows, cols, vals = tile[:3]
                order = _visit_order(tile, settings, seed, epoch, q, r)
                if settings.visit_order in _SEGMENT_ORDERS:
                    order = kernels.expand_order(tile[3], order, settings.interleave)
                sequence_rows.append(rows[order].astype(np.int64) + rb[q])
                sequence_cols.append(block_cols[r][cols[order]])
                if not settings.binary:
                    sequence_vals.append(vals[order])
        rows = np.concatenate(sequence_rows)
        cols = np.concatenate(sequence_cols)
        vals = np.concatenate(sequence_vals) if sequence_vals else np.zeros(0)
        eta_w, eta_z = settings.steps(epoch)
        columns = kernels.pack_columns(w, w_acc, inv_col_nnz, w_snap, u_snap)
        kernels.dso_tile(
            kernels.TileData(
                rows, cols, vals, settings.binary, np.zeros(0, np.int64),
                np.arange(rows.shape[0], dtype=np.int64), 1,
            ),
            kernels.DualBlock(
                z, z_acc, consts["z_lo"], consts["z_hi"], consts["y"], consts["inv_weight"],
                consts["inv_row_nnz"], z_snap, v_snap,
            ),
            columns,
            settings.tile_update(eta_w, eta_z, svrg),
        )  # fmt: skip
        w = columns[:, kernels.COL_W].copy()
        w_acc = columns[:, kernels.COL_W_ACC].copy()
        w_avg = w_avg + (w - w_avg) / epoch
        z_avg = z_avg + (z - z_avg) / epoch
    return {"w": w, "z": z, "w_acc": w_acc, "z_acc": z_acc, "w_avg": w_avg, "z_avg": z_avg}


def _ordered_add(total, part, index):
    # The distributed snapshot sums parts starting from a copy of the first one.
    return part.copy() if index == 0 else total + part
