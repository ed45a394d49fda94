"""The DSO solver: the :class:`DSO` class that the driver runs (registered as ``"dso"``).

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.dso`.
"""

from __future__ import annotations

import dataclasses
import operator

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.kernels import dso as kernels
from daskpd.kernels import scalar
from daskpd.solvers.common import shared as _shared
from daskpd.solvers.common.groups import (
    class_weight_pair,
    group_owner,
    has_grid,
    is_on_disk,
    saved_grid,
    worker_list,
    worker_memory,
)
from daskpd.solvers.driver.registry import register_solver
from daskpd.solvers.driver.seeds import epoch_seed
from daskpd.solvers.driver.types import Capabilities, Iterate, Solver
from daskpd.solvers.dso._blocks import _ColumnBlock
from daskpd.solvers.dso._epoch import _epoch_graph, _fresh, _graph, _handed, _State, _w_home
from daskpd.solvers.dso._options import WARM_ETA, DSOOptions, _settings
from daskpd.solvers.dso._start import (
    _cocoa_start,
    _cocoa_start_options,
    _cocoa_start_solver,
    _dcd_task,
    _initial_zstate,
    _start_method,
    _zeros_of_first,
)
from daskpd.solvers.dso._tasks import _row_constants_task, _sum_task
from daskpd.solvers.dso._tiles import _cache_budget, _plain_tile, _stored_layout, prefetch_tiles


def _grid_info(data, grid):
    info = data.grid(grid)
    return (
        np.asarray(info.row_bounds, dtype=np.int64),
        tuple(info.block_columns(r) for r in range(info.n_blocks)),
    )


def _assemble(blocks, block_cols, n_features):
    """The full vector of per-column-block parts (inverse of ``v[block_cols[r]]``)."""
    full = np.zeros(n_features)
    for part, columns in zip(blocks, block_cols, strict=True):
        full[columns] = part
    return full


def _choose_grid(data, options, n_workers):
    if options.grid is not None:
        return int(options.grid)
    if not is_on_disk(data):
        return max(1, n_workers)
    grids = sorted(int(g) for g in getattr(data, "grids", []))
    for g in grids:
        if g % max(1, n_workers) == 0:
            return g
    return max(1, n_workers)


def _ensure_grid(data, grid):
    """Make sure ``data`` has the tiled layout of ``grid`` (made in memory for in-memory data)."""
    if has_grid(data, grid):
        return data
    if not is_on_disk(data) and hasattr(data, "partition"):
        data.partition(grid)
        return data
    where = getattr(data, "path", "DATA")
    raise ValueError(
        f"dataset {where} has no tiled layout for grid {grid}; run "
        f"`daskpd partition {where} --grid {grid}` first"
    )


@register_solver
class DSO(Solver):
    """Distributed stochastic saddle-point optimization (DSO) over a ``grid x grid`` tiling.

    Supports the losses hinge, smoothed hinge, logistic, squared and absolute and the
    regularizers L2, L1 and elastic net; row weights (``sample_weight`` times
    ``class_weight``) scale the dual box. See the package :mod:`daskpd.solvers.dso` for the
    schedule and :class:`DSOOptions` for the options.
    """

    name = "dso"
    capabilities = Capabilities(
        losses=frozenset({"hinge", "smooth_hinge", "logistic", "squared", "absolute"}),
        regularizers=frozenset({"l2", "l1", "elasticnet"}),
        layouts=frozenset({"csr"}),
        notes="on-disk data needs the tiled layout of its grid (`daskpd partition`)",
    )
    Options = DSOOptions

    # -- protocol (daskpd.solvers.driver.protocol.Solver) ------------------------------------

    def check(self, problem, data, options):
        """Raise ``ValueError`` for anything DSO cannot do, before any Dask work."""
        self.capabilities.check_kernels(
            self.name, problem, kernels.DSO_LOSSES, kernels.DSO_REGULARIZERS
        )
        loss, reg = problem.loss, problem.regularizer
        if getattr(data, "layout", "csr") != "csr":
            raise ValueError(f"DSO needs sparse (csr) data, got layout {data.layout!r}")
        if options.init == "cocoa":
            _cocoa_start_solver().check(problem, data, _cocoa_start_options())
        if options.init == "dcd" and not (
            reg.code == scalar.L2 and loss.code in (scalar.HINGE, scalar.LOGISTIC, scalar.SQUARED)
        ):
            raise ValueError(
                "init='dcd' needs the l2 regularizer with the hinge, logistic or squared loss, "
                "got "
                f"{getattr(loss, 'name', loss)!r} + {getattr(reg, 'name', reg)!r}"
            )
        if options.grid is not None:
            self._check_grid(data, int(options.grid))

    def prepare(self, data, options, client):
        """Build the tiled layout of in-memory data for the grid this run will use.

        Run by :func:`daskpd.solvers.driver.plan.run_plan` once the client is known (the grid
        follows the number of workers). The bias view of an in-memory dataset
        (``with_bias``) shows the grids of the dataset it wraps but cannot build one itself,
        so the grid is built on the wrapped dataset. On-disk data is left as it is (its
        layouts are written by ``daskpd partition``).

        Parameters
        ----------
        data : Dataset or MemoryDataset
        options : DSOOptions
        client : distributed.Client or None
        """
        base = getattr(data, "base", data)
        if is_on_disk(base) or not hasattr(base, "partition"):
            return
        grid = _choose_grid(base, options, len(worker_list(client)))
        # an impossible grid is left to init, which names it
        if 1 <= grid <= min(int(base.n_samples), int(base.n_features)):
            base.partition(grid)

    def _check_grid(self, data, grid):
        n, d = int(data.n_samples), int(data.n_features)
        if grid > min(n, d):
            raise ValueError(
                f"grid={grid} is too large for {n} rows and {d} columns (needs grid <= {min(n, d)})"
            )
        if is_on_disk(data) and not has_grid(data, grid):
            raise ValueError(
                f"dataset {data.path} has no tiled layout for grid {grid}; run "
                f"`daskpd partition {data.path} --grid {grid}` first"
            )

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Build the state of epoch 0 (one Dask compute or one wave of futures).

        Parameters
        ----------
        problem, data, client
            As :meth:`Solver.init <daskpd.solvers.driver.protocol.Solver.init>` takes them.
        seed : numpy.random.SeedSequence
            Root seed; epoch ``e``, tile ``(q, r)`` draws its order from
            ``block_seeds(epoch_seed(seed, e), grid**2)[q * grid + r]``.
        options : DSOOptions
        warm_start : Iterate, optional
            Starting ``w`` (and ``z`` when it is an ndarray of length ``n_samples``).

        Returns
        -------
        state
        """
        workers = worker_list(client)
        grid = _choose_grid(data, options, len(workers))
        self._check_grid(data, grid)
        if workers and grid % len(workers) != 0:
            raise ValueError(
                f"grid={grid} must be a multiple of the number of Dask workers ({len(workers)})"
            )
        start = None if warm_start is not None else _start_method(problem, data, options, client)
        given = data
        data = _ensure_grid(data, grid)
        started = warm_start is not None or start in ("cocoa", "dcd")
        settings = _settings(problem, data, options, grid, started=started)
        settings = dataclasses.replace(settings, stored_layout=_stored_layout(data, settings))
        owner = [group_owner(settings, workers, q) for q in range(grid)]
        prefetch = []
        if is_on_disk(data):
            budget = _cache_budget(settings.cache_bytes, worker_memory(client))
            prefetch = prefetch_tiles(client, data, settings, owner, budget)
        if start == "cocoa":
            warm_start = _cocoa_start(problem, given, seed, client, options)
        if warm_start is not None and settings.adagrad:
            settings = dataclasses.replace(
                settings,
                eta0=WARM_ETA if options.eta0 is None else settings.eta0,
                dual_eta0=WARM_ETA if options.dual_eta0 is None else settings.dual_eta0,
            )
        row_bounds, block_cols = _grid_info(data, grid)
        token = _token()
        shared = _shared.open_run(client, token) if options.shared_memory else None
        if shared is not None:
            settings = dataclasses.replace(settings, shared_run=shared.name)
        p = grid
        on_disk = is_on_disk(data)
        # On-disk rows are read by the worker owning the row group; in-memory data is
        # already in this process, so its setup runs here and only the blocks are shipped.
        graph = _graph(client if on_disk else None, token)
        class_pair = class_weight_pair(problem, data)
        row_consts = [
            graph.call(
                _row_constants_task,
                data,
                class_pair,
                settings,
                int(row_bounds[q]),
                int(row_bounds[q + 1]),
                worker=owner[q],
                name=f"rows-{q}",
            )  # fmt: skip
            for q in range(p)
        ]
        n = settings.n_samples
        use_dcd = options.init == "dcd" and warm_start is None
        warm_z = getattr(warm_start, "z", None) if warm_start is not None else None
        if not (isinstance(warm_z, np.ndarray) and warm_z.shape == (n,)):
            warm_z = None
        start_z = [None] * p
        w_parts = []
        if use_dcd:
            for q in range(p):
                start_z[q], w_part = graph.call(
                    _dcd_task, data, settings, row_consts[q], int(row_bounds[q]),
                    int(row_bounds[q + 1]), int(options.dcd_passes), epoch_seed(seed, 1), q,
                    nout=2, worker=owner[q], name=f"dcd-{q}",
                )  # fmt: skip
                w_parts.append(w_part)
        elif warm_z is not None:
            start_z = [warm_z[row_bounds[q] : row_bounds[q + 1]] for q in range(p)]
        # Dual blocks are built where they will live; only the d-sized w reaches the client.
        zstates = [
            graph.call(_initial_zstate, row_consts[q], start_z[q], worker=owner[q], name=f"z0-{q}")
            for q in range(p)
        ]
        z_avg = [
            graph.call(_zeros_of_first, zstates[q], worker=owner[q], name=f"zavg0-{q}")
            for q in range(p)
        ]
        outputs = [*row_consts, *zstates, *z_avg]
        if w_parts:
            outputs.append(graph.call(_sum_task, *w_parts, worker=owner[0], name="dcd-w"))
        results = graph.run(outputs)
        row_consts, zstates, z_avg = results[:p], results[p : 2 * p], results[2 * p : 3 * p]
        if warm_start is not None:
            w = np.asarray(warm_start.w, dtype=np.float64).copy()
        elif use_dcd:
            w = results[3 * p]
            w = client.gather(w) if client is not None and on_disk else w
        else:
            w = np.zeros(settings.n_features)
        unclipped = w
        w = np.clip(w, -settings.w_bound, settings.w_bound)
        start_certificate = None
        if start == "cocoa" and np.array_equal(w, unclipped):
            start_certificate = (float(warm_start.primal), float(warm_start.dual))
        empty = np.zeros(0)
        wstates = [
            _ColumnBlock(w[block_cols[r]], np.zeros(block_cols[r].shape[0]), empty, empty)
            for r in range(p)
        ]
        w_avg = [np.zeros_like(ws[0]) for ws in wstates]
        col_nnz = np.asarray(data.col_nnz, dtype=np.float64)
        inv_col = np.divide(1.0, col_nnz, out=np.zeros_like(col_nnz), where=col_nnz > 0)
        col_consts = [inv_col[block_cols[r]] for r in range(p)]
        if on_disk:
            sources = [[data] * p for _ in range(p)]
        else:
            sources = [[_plain_tile(data, grid, q, r) for r in range(p)] for q in range(p)]
        if client is not None:
            if not on_disk:
                # in-memory data was set up in this process: ship each block to its owner once
                sources = [
                    [_scatter_to(client, tile, owner[q]) for tile in row]
                    for q, row in enumerate(sources)
                ]
                row_consts = _scatter_each(client, row_consts, owner)
                zstates = _scatter_each(client, zstates, owner)
                z_avg = _scatter_each(client, z_avg, owner)
            col_consts = client.scatter(col_consts, broadcast=True, hash=False)
            home = [_w_home(settings, workers, r) for r in range(p)]
            wstates = _scatter_each(client, wstates, home)
            w_avg = _scatter_each(client, w_avg, home)
        if prefetch:
            # The reads belong to the start (they overlapped it); a tile that cannot be read
            # fails the run here, naming itself, rather than in the first epoch.
            client.gather(prefetch)
        return _State(
            problem=problem,
            source=data,
            settings=settings,
            seed=seed,
            client=client,
            workers=workers,
            token=token,
            row_bounds=row_bounds,
            block_cols=block_cols,
            row_consts=tuple(row_consts),
            col_consts=tuple(col_consts),
            tile_sources=tuple(tuple(row) for row in sources),
            zstates=tuple(zstates),
            wstates=tuple(wstates),
            z_avg=tuple(z_avg),
            w_avg=tuple(w_avg),
            epoch=0,
            shared=shared,
            # a tuple holds z, z_acc, (z_snap, v_snap,) and, the last round's, z_avg
            tuple_bytes=int(np.diff(row_bounds).max(initial=0))
            * 8
            * (5 if settings.svrg_every > 0 else 3),
            start_certificate=start_certificate,
        )

    def start_certificate(self, state):
        """``(primal, dual)`` of the epoch-0 iterate when the dual solver's start certified it.

        The start's rounds end with a certificate of the point they hand over
        (:func:`_start._cocoa_start`), so the driver reports it as the run's epoch-0 row
        without a pass (``tol`` is checked from the first DSO epoch on).

        Returns
        -------
        tuple of float or None
            None after epoch 0 and for the other starts.
        """
        return state.start_certificate if state.epoch == 0 else None

    def run_epoch(self, state, epoch):
        """Run one epoch: ``grid`` rounds of ``grid`` tile tasks, one compute or one wave.

        Parameters
        ----------
        state
            From :meth:`init`, :meth:`run_epoch` or :meth:`restore`. Spent: its ``w`` blocks
            are updated in place (no copy of every block per epoch), so this method,
            :meth:`iterate` and :meth:`state_arrays` refuse it afterwards.
        epoch : int
        """
        _fresh(state).spent["by_epoch"] = epoch
        graph = _graph(state.client, f"{state.token}-{epoch}")
        zstates, wstates, z_avg, finals, handoff = _epoch_graph(state, epoch, graph)
        p = state.settings.grid
        # the given state is spent: its blocks go once the scheduler has the new epoch
        # (not w_avg: the same arrays, updated in place, go on)
        # (the tuples of the handoff: each is there twice, for its z and for its w)
        spent = [*state.zstates, *state.wstates, *state.z_avg, *(t for t, _ in state.handoff[:p])]
        results = graph.run(
            [*zstates, *wstates, *z_avg, *finals], done_with=_futures(spent), wait_for=finals
        )
        made = {t.key: f for t, f in zip(finals, results[3 * p :], strict=True)}
        return dataclasses.replace(
            state,
            zstates=tuple(results[:p]),
            wstates=tuple(results[p : 2 * p]),
            z_avg=tuple(results[2 * p : 3 * p]),
            # in this process (no cluster) a task's tuple is no cheaper than its parts
            handoff=tuple((made[t.key], k) for t, k in handoff) if state.client else (),
            epoch=epoch,
        )

    def iterate(self, state):
        """Return the current iterate; ``z`` stays by row group (futures on a cluster).

        ``w``/``z`` are the last iterate (or the averaged one with ``report="average"``);
        ``w_avg``/``z_avg`` the other (``None`` at epoch 0).
        """
        client, p = _fresh(state).client, state.settings.grid
        owner = [group_owner(state.settings, state.workers, q) for q in range(p)]
        d, cols = state.settings.n_features, state.block_cols
        if client is None:
            w = _assemble([ws[0] for ws in state.wstates], cols, d)
            w_avg = _assemble(state.w_avg, cols, d)
            z = [zs[0] for zs in state.zstates]
        else:
            w = _assemble([ws[0] for ws in client.gather(_w_for_client(state))], cols, d)
            w_avg = _assemble(client.gather(list(state.w_avg)), cols, d)
            # z never leaves its worker: pick it out of the block state where it lives.
            graph = TaskGraph("dso", f"{state.token}-{state.epoch}")
            z = graph.submit(
                client,
                [
                    graph.task(
                        f"z-{q}", operator.getitem, zs, 0, worker=owner[q], allow_other_workers=True
                    )
                    for q, zs in enumerate(state.zstates)
                ],
            )
        # references of their own: run_epoch releases the state's when it has spent it
        z_avg = [_another_reference(f) for f in state.z_avg]
        if state.epoch == 0:
            return Iterate(w=w, z=z, z_bounds=state.row_bounds)
        if state.settings.report_average:
            return Iterate(w=w_avg, z=z_avg, z_bounds=state.row_bounds, w_avg=w, z_avg=z)
        return Iterate(w=w, z=z, z_bounds=state.row_bounds, w_avg=w_avg, z_avg=z_avg)

    def state_arrays(self, state):
        """Return every array needed to resume exactly (gathers the blocks once)."""
        zstates, wstates, z_avg, w_avg = _local_blocks(_fresh(state))

        def columns(parts):
            # w-sized arrays in the data's column order, whatever the grid's; SVRG snapshots
            # stay empty before the first one is taken
            if not any(part.shape[0] for part in parts):
                return np.zeros(0)
            return _assemble(parts, state.block_cols, state.settings.n_features)

        arrays = {
            "epoch": np.asarray(state.epoch, dtype=np.int64),
            "grid": np.asarray(state.settings.grid, dtype=np.int64),
            "w": columns([ws[0] for ws in wstates]),
            "w_acc": columns([ws[1] for ws in wstates]),
            "z": np.concatenate([zs[0] for zs in zstates]),
            "z_acc": np.concatenate([zs[1] for zs in zstates]),
            "w_avg": columns(w_avg),
            "z_avg": np.concatenate(z_avg),
            # the steps and the SVRG period as resolved at init (they depend on how the run
            # started, and restore re-runs init from zero)
            "steps": np.array([state.settings.eta0, state.settings.dual_eta0]),
            "svrg_every": np.asarray(state.settings.svrg_every, dtype=np.int64),
        }
        if state.settings.svrg_every > 0:
            arrays["w_snap"] = columns([ws[2] for ws in wstates])
            arrays["u_snap"] = columns([ws[3] for ws in wstates])
            arrays["z_snap"] = np.concatenate([zs[2] for zs in zstates])
            arrays["v_snap"] = np.concatenate([zs[3] for zs in zstates])
        return arrays

    def restore(self, problem, data, arrays, *, seed, client, options):
        """Rebuild the state saved by :meth:`state_arrays` (the protocol's
        :meth:`~daskpd.solvers.driver.protocol.Solver.restore`)."""
        grid = saved_grid(arrays, options)
        # checkpoints from before the key existed were made when the default was 0
        svrg_every = arrays.get("svrg_every", options.svrg_every or 0)
        # the saved blocks replace the start, which need not be run again
        options = dataclasses.replace(options, grid=grid, init="zero", svrg_every=int(svrg_every))
        state = self.init(problem, data, seed=seed, client=client, options=options)
        if "steps" in arrays:
            eta0, dual_eta0 = (float(v) for v in arrays["steps"])
            settings = dataclasses.replace(state.settings, eta0=eta0, dual_eta0=dual_eta0)
            state = dataclasses.replace(state, settings=settings)
        rb, cols = state.row_bounds, state.block_cols
        p = grid
        svrg = state.settings.svrg_every > 0
        empty = np.zeros(0)

        def zpart(name, q):
            return arrays[name][rb[q] : rb[q + 1]].copy() if svrg else empty

        def wpart(name, r):
            return arrays[name][cols[r]] if svrg and arrays[name].shape[0] else empty

        zstates = [
            (arrays["z"][rb[q] : rb[q + 1]].copy(), arrays["z_acc"][rb[q] : rb[q + 1]].copy(),
             zpart("z_snap", q), zpart("v_snap", q))
            for q in range(p)
        ]  # fmt: skip
        wstates = [
            _ColumnBlock(
                arrays["w"][cols[r]], arrays["w_acc"][cols[r]], wpart("w_snap", r),
                wpart("u_snap", r),
            )
            for r in range(p)
        ]  # fmt: skip
        z_avg = [arrays["z_avg"][rb[q] : rb[q + 1]].copy() for q in range(p)]
        w_avg = [arrays["w_avg"][cols[r]] for r in range(p)]
        if client is not None:
            owner = [group_owner(state.settings, state.workers, q) for q in range(p)]
            zstates = _scatter_each(client, zstates, owner)
            z_avg = _scatter_each(client, z_avg, owner)
            home = [_w_home(state.settings, state.workers, r) for r in range(p)]
            wstates = _scatter_each(client, wstates, home)
            w_avg = _scatter_each(client, w_avg, home)
        return dataclasses.replace(
            state,
            zstates=tuple(zstates),
            wstates=tuple(wstates),
            z_avg=tuple(z_avg),
            w_avg=tuple(w_avg),
            epoch=int(arrays["epoch"]),
        )

    def close(self, state):
        """Remove the run's shared-memory files on every machine.

        The driver calls this once when a run ends (or a state is given up for a replay).
        Every state of the run shares these files: none of them can run on afterwards.
        Without a call, the files on this machine go when the run's last state is collected
        (or at exit); on the workers' other machines they stay.

        Parameters
        ----------
        state
        """
        if state.shared is not None:
            state.shared.close()


def _w_for_client(state):
    """The ``w`` block states, as they can come to this process (futures)."""
    graph = _graph(state.client, f"{state.token}-{state.epoch}")
    home = [_w_home(state.settings, state.workers, r) for r in range(state.settings.grid)]
    return graph.run(
        [
            _handed(graph, ws, None, home[r], None, state, f"w{r}")
            for r, ws in enumerate(state.wstates)
        ]
    )


def _futures(values):
    """The Dask futures among ``values`` (block states of a run without a cluster are arrays)."""
    from distributed import Future

    return [v for v in values if isinstance(v, Future)]


def _another_reference(value):
    """A new future of the same key as future ``value`` (else ``value`` itself)."""
    if not _futures([value]):
        return value
    from distributed import Future

    return Future(value.key, value.client)


def _local_blocks(state):
    zstates, wstates = list(state.zstates), list(state.wstates)
    z_avg, w_avg = list(state.z_avg), list(state.w_avg)
    if state.client is not None:
        wstates = _w_for_client(state)
        zstates, wstates, z_avg, w_avg = state.client.gather([zstates, wstates, z_avg, w_avg])
    return zstates, wstates, z_avg, w_avg


def _scatter_each(client, blocks, owner):
    """Scatter block ``b`` to worker ``owner[b]`` (one future per block)."""
    return [_scatter_to(client, block, owner[b]) for b, block in enumerate(blocks)]


def _scatter_to(client, value, worker):
    # A one-element list keeps tuples (block states, tiles) as one future.
    return client.scatter([value], workers=[worker], hash=False)[0]


def _token():
    import uuid

    return uuid.uuid4().hex[:12]
