"""DSO: distributed stochastic saddle-point optimization on a p x p grid of tiles.

Matsushima, Yun, Zhang and Vishwanathan, "Distributed Stochastic Optimization of the
Regularized Risk". The objective is written as a saddle function that is a sum over the
nonzeros of ``X``; one update touches one primal and one dual coordinate
(:func:`daskpd.kernels.dso.dso_tile`). Rows are cut into ``p`` row groups ``I_q`` (their data
and dual block ``z_q`` stay on one worker) and columns into ``p`` blocks ``J_r`` (the primal
blocks ``w_r`` travel around a ring). In round ``r`` of an epoch, task ``q`` updates tile
``(q, sigma_r(q))`` with ``sigma_r(q) = (q + r) mod p`` (0-based).

Translation table (paper -> code): ``m`` -> ``n_samples``, ``lambda`` -> ``alpha``,
``alpha_i`` -> ``-z_i``, ``w^{(r)}`` -> ``w`` block ``r``, ``Omega^{(q,r)}`` -> tile
``(q, r)``, ``|Omega_i|`` / ``|Omegabar_j|`` -> ``row_nnz`` / ``col_nnz``, ``eta_t`` ->
``eta0 / sqrt(epoch)``, ``t`` -> ``epoch``, ``p`` -> ``grid``.

The Dask graph of an epoch is a dataflow, not a sequence of barriers: task ``(r, q)`` depends
only on ``z`` block ``q`` (from task ``(r - 1, q)``) and on ``w`` block ``sigma_r(q)`` (from task
``(r - 1, q + 1)``). Lemma 2 of the paper makes any such execution equal, bit for bit, to the
serial replay :func:`serial_replay` in the order (epoch, round, row group, visit order).

A ``w`` block that moves between two worker processes of one machine goes through shared
memory (:mod:`daskpd.solvers.common.shared`): the next task maps and updates the same pages. Between
machines it travels as plain arrays through Dask.

The code lives in private modules by job: ``_options`` (:class:`DSOOptions`, the default
steps :data:`ZERO_ETA` and :data:`START_ETA`, and the constants every task of a run needs),
``_tiles`` (a tile read where its row group lives, its layout read as stored or built, the
per-process tile cache, the visit orders), ``_blocks`` (the ``w`` blocks between tasks:
packed column records, shared memory, recycled buffers), ``_tasks`` (the pure tasks of an
epoch, and :func:`kernel_seconds`), ``_start`` (the starts: the dual solver's rounds, local
DCD, zero), ``_epoch`` (one epoch as one graph on either back end, the state between epochs,
where blocks live and how they travel), ``_solver`` (:class:`DSO`, registered as ``"dso"``)
and ``_replay`` (:func:`serial_replay`). This package re-exports their public names (and the
private ones the tests and ``pipelines/bench_dso.py`` use); a name is patched in the module
that looks it up (``WHOLE_TUPLE_BYTES`` in ``_epoch``, the tile cache in ``_tiles``).
"""

from __future__ import annotations

from daskpd.solvers.dso._blocks import _OutputPool as _OutputPool
from daskpd.solvers.dso._epoch import WHOLE_TUPLE_BYTES as WHOLE_TUPLE_BYTES
from daskpd.solvers.dso._epoch import _whole as _whole
from daskpd.solvers.dso._options import START_ETA as START_ETA
from daskpd.solvers.dso._options import ZERO_ETA as ZERO_ETA
from daskpd.solvers.dso._options import DSOOptions
from daskpd.solvers.dso._options import _settings as _settings
from daskpd.solvers.dso._replay import serial_replay
from daskpd.solvers.dso._solver import DSO
from daskpd.solvers.dso._tasks import kernel_seconds as kernel_seconds
from daskpd.solvers.dso._tiles import CACHE_RSS_FRACTION as CACHE_RSS_FRACTION
from daskpd.solvers.dso._tiles import MIN_CHUNKS as MIN_CHUNKS
from daskpd.solvers.dso._tiles import _kernel_segments as _kernel_segments
from daskpd.solvers.dso._tiles import _load_tile as _load_tile
from daskpd.solvers.dso._tiles import _tile_layout as _tile_layout
from daskpd.solvers.dso._tiles import _visit_order as _visit_order

__all__ = ["DSO", "DSOOptions", "serial_replay"]
