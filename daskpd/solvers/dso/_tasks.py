"""DSO's Dask tasks (pure: they copy what they mutate): a row group's constants, the tile
update of a round, the SVRG snapshot terms, and the clock of the tile kernel.

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.dso`.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from daskpd.kernels import dso as kernels
from daskpd.solvers.common.groups import row_weights
from daskpd.solvers.dso._blocks import _OUTPUTS, _ColumnBlock
from daskpd.solvers.dso._tiles import _kernel_segments, _load_tile, _visit_order


def _row_constants_task(source, class_pair, settings, start, stop):
    """Per-row constants of one row group and its starting dual block."""
    y = np.asarray(source.y_rows(start, stop), dtype=np.float64)
    weights = row_weights(source, y, start, stop, class_pair)
    row_nnz = np.asarray(source.row_nnz[start:stop], dtype=np.float64)
    inv_row_nnz = np.divide(1.0, row_nnz, out=np.zeros_like(row_nnz), where=row_nnz > 0)
    inv_weight = np.divide(1.0, weights, out=np.zeros_like(weights), where=weights > 0)
    z_lo = np.empty_like(y)
    z_hi = np.empty_like(y)
    z0 = np.empty_like(y)
    kernels.dual_boxes(settings.loss_code, settings.loss_params, y, weights, z_lo, z_hi, z0)
    return {
        "y": y,
        "weight": weights,
        "inv_weight": inv_weight,
        "inv_row_nnz": inv_row_nnz,
        "z_lo": z_lo,
        "z_hi": z_hi,
        "z0": z0,
    }


def _tile_task(
    source, settings, seed, epoch, q, r, zsrc, zpick, wsrc, wpick, rowc, inv_col_nnz, share,
    z_avg=None, w_avg=None,
):  # fmt: skip
    """Task ``(epoch, round, q)``: update (8) over tile ``(q, r)``; returns new z and w states.

    ``zsrc``/``wsrc`` are block states, or with an integer ``zpick``/``wpick`` the
    ``(z state, w block, ...)`` tuple of the task that made them (no split task between
    the two). The task is the only reader of its ``w`` block, which it updates in place
    when the block is packed (see :class:`_ColumnBlock`), and a state given to
    :meth:`DSO.run_epoch` is spent. ``share``: a block packed here goes into shared memory
    (its next worker is on this machine). In the epoch's last round, ``z_avg`` and
    ``w_avg`` are the averages of the epochs before: the task returns ``z_avg`` updated
    with this epoch's ``z_q``, and updates ``w_avg`` in place with ``w_r`` (Theorem 1).
    The average so reads ``w_r`` before the next epoch's first task updates it, and costs
    no task and no scheduler round trip of its own at the end of every epoch; ``w_avg``,
    the size of a ``w`` block, is neither returned (the tuple stays small enough to travel
    whole, :func:`_whole`) nor made anew every epoch (a new one is fresh memory whose page
    faults cost as much as the average itself).
    """
    tile = _load_tile(source, settings, q, r)
    rows, cols, vals = tile[:3]
    segment_ptr = _kernel_segments(tile, settings)
    z, z_acc, z_snap, v_snap = _picked(zsrc, zpick)
    block = _picked(wsrc, wpick)
    z, z_acc = z.copy(), z_acc.copy()
    order = _visit_order(tile, settings, seed, epoch, q, r)
    eta_w, eta_z = settings.steps(epoch)
    # nothing after this line raises: a retried task must find its w block as it was
    block = block.packed(inv_col_nnz, (settings.shared_run, f"w{r}") if share else None)
    columns = block.records
    tick = time.perf_counter()
    kernels.dso_tile(
        kernels.TileData(
            rows, cols, vals, settings.binary, segment_ptr, order, settings.interleave
        ),
        kernels.DualBlock(
            z, z_acc, rowc["z_lo"], rowc["z_hi"], rowc["y"], rowc["inv_weight"],
            rowc["inv_row_nnz"], z_snap, v_snap,
        ),
        columns,
        settings.tile_update(eta_w, eta_z, settings.svrg_every > 0),
    )  # fmt: skip
    _KERNEL_CLOCK.add(time.perf_counter() - tick)
    zstate, block = (z, z_acc, z_snap, v_snap), _ColumnBlock.of_records(columns, block.shared)
    if z_avg is None:
        return zstate, block
    kernels.running_mean(w_avg, block[0], float(epoch), w_avg)
    return zstate, block, _running_mean(z_avg, z, epoch)


class _Clock:
    """Seconds summed over the threads of a process (lock: tasks may run in parallel)."""

    def __init__(self):
        self.seconds = 0.0
        self.lock = threading.Lock()

    def add(self, seconds):
        with self.lock:
            self.seconds += seconds


_KERNEL_CLOCK = _Clock()


def kernel_seconds():
    """Seconds this process's DSO tasks have spent in the tile kernel so far.

    What the Dask overhead of an epoch is measured against: read it on every worker
    (``client.run(kernel_seconds)``) before and after the epoch and sum the differences.
    """
    return _KERNEL_CLOCK.seconds


def _picked(source, pick):
    """``source`` itself, or ``source[pick]`` when it is a task's ``(z, w)`` pair."""
    return source if pick is None else source[pick]


def _plain_task(source, pick):
    """Task: the ``w`` block ``source`` (or ``source[pick]``) as plain arrays."""
    return _picked(source, pick).plain()


def _products_task(source, settings, q, r, z, w):
    """``(X_qr^T z_q, X_qr w_r)`` of tile ``(q, r)`` (an SVRG snapshot term)."""
    rows, cols, vals = _load_tile(source, settings, q, r)[:3]
    xt_z = np.zeros(w.shape[0])
    x_w = np.zeros(z.shape[0])
    kernels.tile_products(rows, cols, vals, settings.binary, z, w, xt_z, x_w)
    return xt_z, x_w


def _sum_task(*parts):
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total


def _snapshot_z_task(zstate, *x_w_parts):
    z, z_acc, _, _ = zstate
    return z, z_acc, z.copy(), _sum_task(*x_w_parts)


def _snapshot_w_task(wstate, *xt_z_parts):
    w, w_acc = np.ascontiguousarray(wstate[0]), np.ascontiguousarray(wstate[1])
    return _ColumnBlock(w, w_acc, w.copy(), _sum_task(*xt_z_parts))


def _running_mean(average, x, count):
    """``average + (x - average) / count``, in a recycled buffer."""
    out = _OUTPUTS.empty(average.shape[0])
    kernels.running_mean(average, x, float(count), out)
    return out
