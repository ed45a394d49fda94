"""Where DSO's epochs start: the data-parallel dual solver's rounds (``init="cocoa"``), the
paper's local dual coordinate ascent (``init="dcd"``, App. A), or zero; and the dual blocks
of epoch 0.

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.dso`.
"""

from __future__ import annotations

import numpy as np

from daskpd.kernels import dso as kernels
from daskpd.kernels import scalar
from daskpd.kernels import spdc as spdc_kernels
from daskpd.solvers.common.groups import resident_bytes, worker_memory
from daskpd.solvers.driver.registry import get_solver, make_options
from daskpd.solvers.driver.seeds import block_seeds
from daskpd.solvers.driver.types import Iterate


def _cocoa_start_solver():
    # Found by name: a method imports no other method (the registry imports it on first use,
    # which DSO's other starts skip).
    return get_solver("cocoa")


def _cocoa_start_options():
    # One thread: DSO's runs are functions of their seed (a replay after a lost worker
    # repeats the bits), which the dual solver's threaded rounds are not.
    return make_options(_cocoa_start_solver(), {"threads": 1})


#: The dual solver's start keeps its rows in one worker's memory: ``"auto"`` takes it only
#: when they need at most this share of the smallest worker's memory (DSO itself streams
#: tiles and is the method for data that does not fit).
START_MEMORY_SHARE = 0.5


def _start_method(problem, data, options, client=None):
    """The start ``init`` resolves to.

    ``"auto"``: the dual solver's when it takes the problem and its resident rows fit
    (:data:`START_MEMORY_SHARE` of a worker's memory), else zero.
    """
    if options.init != "auto":
        return options.init
    try:
        _cocoa_start_solver().check(problem, data, _cocoa_start_options())
    except ValueError:
        return "zero"
    if resident_bytes(data) > START_MEMORY_SHARE * worker_memory(client):
        return "zero"
    return "cocoa"


def _cocoa_start(problem, data, seed, client, options):
    """DSO's start from the data-parallel dual solver: its rounds until a certified gap.

    Each round's certificate is of the round's start point (one round behind), so at most
    ``start_rounds`` rounds run and the iterate returned is the last certified one. The
    rounds draw from a child of the run's seed, so DSO's epochs keep their own streams.

    Returns
    -------
    Iterate
        ``w`` and the whole dual ``z`` (gathered in row order), with the last round's
        certificate of that point (``primal``, ``dual``).
    """
    solver, cocoa_options = _cocoa_start_solver(), _cocoa_start_options()
    start_seed = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 1 << 30))
    state = solver.init(problem, data, seed=start_seed, client=client, options=cocoa_options)
    # the round that certifies its start within start_gap skips its later passes
    state = solver.stop_at_gap(state, 0.0, relative=float(options.start_gap))
    for rnd in range(1, int(options.start_rounds) + 1):
        state = solver.run_epoch(state, rnd)
        primal, dual = solver.certificate(state)
        if primal - dual <= float(options.start_gap) * abs(primal):
            break
    point = solver.iterate(state)
    z = point.z if client is None else client.gather(list(point.z))
    solver.settle(state)  # the workers free for DSO's epochs
    return Iterate(
        w=np.asarray(point.w, dtype=np.float64),
        z=np.concatenate([np.asarray(part, dtype=np.float64) for part in z]),
        primal=float(primal),
        dual=float(dual),
    )


def _initial_zstate(rowc, start_z):
    """Dual block state at epoch 0: ``start_z`` (DCD or warm start) in the box, or ``z0``."""
    z = rowc["z0"].copy() if start_z is None else np.clip(start_z, rowc["z_lo"], rowc["z_hi"])
    empty = np.zeros(0)
    return z, np.zeros_like(z), empty, empty


def _zeros_of_first(block_state):
    return np.zeros_like(block_state[0])


def _dcd_task(source, settings, rowc, start, stop, n_passes, seed, q):
    """Local dual coordinate ascent on row group ``q``; returns ``(z_q, m_q/n * w_q)``."""
    import scipy.sparse as sp

    X, _ = source.read_rows(start, stop)
    if not sp.issparse(X) or X.format != "csr":
        X = sp.csr_matrix(X)
    # the stored arrays as they are (float32 data stays float32: no 8-byte copy per nonzero)
    indptr = np.asarray(X.indptr, dtype=np.int64)
    indices = np.asarray(X.indices, dtype=np.int32)
    vals = np.ascontiguousarray(X.data)
    y = rowc["y"]
    m_q = y.shape[0]
    rng = np.random.default_rng(block_seeds(seed, settings.grid)[q])
    orders = np.stack([rng.permutation(m_q) for _ in range(n_passes)]).astype(np.int64)
    if m_q == 0:
        return rowc["z0"].copy(), np.zeros(settings.n_features)
    a = np.zeros(m_q)
    if settings.loss_code == scalar.LOGISTIC:
        a = rowc["weight"] * 0.5
    scale = 1.0 / (settings.alpha * m_q)
    # w must start consistent with a: w = sum_i a_i y_i x_i / (alpha m_q) (0 for hinge)
    w = spdc_kernels.transpose_dot(indptr, indices, vals, False, a * y * scale, settings.n_features)
    kernels.dcd_local(
        indptr, indices, vals, False, y, rowc["weight"], settings.loss_code,
        settings.alpha, n_passes, orders, a, w,
    )  # fmt: skip
    row_nnz = np.diff(indptr)
    # the squared loss's a is not folded with the label (see dcd_local)
    folded = a if settings.loss_code == scalar.SQUARED else y * a
    z = np.where(row_nnz > 0, -folded, rowc["z0"])
    z = np.clip(z, rowc["z_lo"], rowc["z_hi"])
    return z, w * (m_q / settings.n_samples)
