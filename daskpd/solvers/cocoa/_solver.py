"""The CoCoA+ solver: the :class:`Cocoa` class that the driver runs.

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.cocoa`.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import uuid

import numpy as np

from daskpd._graphs import TaskGraph
from daskpd.kernels import cocoa as kernels
from daskpd.kernels import scalar
from daskpd.solvers.cocoa._graph import (
    _references,
    _run_tasks,
    _scatter_to,
    _spread_columns,
    _State,
    client_round,
    client_start,
)
from daskpd.solvers.cocoa._multiclass import check_one_vs_rest, run_multiclass
from daskpd.solvers.cocoa._options import CocoaOptions, _settings, stream_nnz
from daskpd.solvers.cocoa._tasks import (
    _certificate,
    _column_shift,
    _load_group,
    _open_streamed,
    _round_task,
    _shifted_bounds,
    _start_task,
    _stats_task,
    _sum_task,
)
from daskpd.solvers.common.groups import (
    class_weight_pair,
    group_owner,
    idle_cores,
    is_on_disk,
    row_group_bounds,
    saved_grid,
    worker_list,
)
from daskpd.solvers.common.stream import memory_limits, streams
from daskpd.solvers.driver.registry import register_solver
from daskpd.solvers.driver.seeds import block_seeds, epoch_seed
from daskpd.solvers.driver.types import Capabilities, Iterate, Solver

_LOG = logging.getLogger(__name__)


#: The longest :meth:`Cocoa.settle` waits for a run's last shrunk passes (they take a fraction
#: of a round).
SETTLE_SECONDS = 120.0


def default_threads(settings, client, owners) -> int:
    """``CocoaOptions.threads=None``: on a cluster the owner's idle cores (at most
    :data:`daskpd.kernels.cocoa.MAX_THREADS`), in-process 1.

    Each thread adds its steps to its own slot of the column records
    (:mod:`daskpd.kernels.cocoa`), so a threaded round loses no step and needs no second read
    of the nonzeros: the threads gain on every loss (BENCHMARKS.md), where threads adding to
    one ``v`` without locks did not.
    """
    if client is None:
        return 1
    return min(idle_cores(client, owners), kernels.MAX_THREADS)


@register_solver
class Cocoa(Solver):
    """CoCoA+ (``solver="cocoa"``): data-parallel dual coordinate ascent, updates added.

    Supports the losses hinge, squared hinge, smoothed hinge, logistic and squared with the
    L2 regularizer, and row weights (``sample_weight`` times ``class_weight``). See
    :mod:`daskpd.solvers.cocoa` for the schedule and :class:`CocoaOptions` for the options.
    """

    name = "cocoa"
    #: every round certifies its start point from its own pass
    has_certificate = True
    capabilities = Capabilities(
        losses=frozenset({"hinge", "squared_hinge", "smooth_hinge", "logistic", "squared"}),
        regularizers=frozenset({"l2"}),
        regularizer_rule="the l2 regularizer (elastic net and l1 need another local subproblem)",
        multiclass=True,
    )
    Options = CocoaOptions

    # -- protocol (daskpd.solvers.driver.protocol.Solver) ------------------------------------

    def check(self, problem, data, options):
        """Raise ``ValueError`` for anything CoCoA cannot do, before any Dask work."""
        # (elastic net and l1 would need another local subproblem)
        self.capabilities.check_kernels(self.name, problem, kernels.COCOA_LOSSES, (scalar.L2,))
        loss = problem.loss
        if loss.classification and getattr(data, "task", None) == "multiclass":
            check_one_vs_rest(problem, data, options)
        if options.shrinking and int(loss.code) not in kernels.BOX_LOSSES:
            raise ValueError(
                f"shrinking=True needs a loss whose dual lives on a box (hinge, "
                f"squared_hinge, smooth_hinge), not loss={loss.name!r}"
            )
        if options.screening and int(loss.code) not in kernels.BOX_LOSSES:
            raise ValueError(
                "screening=True needs a loss whose dual lives on a box (hinge, "
                f"squared_hinge, smooth_hinge), not loss={loss.name!r}"
            )
        if options.grid is not None:
            self._check_grid(data, int(options.grid))

    def run_multiclass(self, plan, client):
        """One-vs-rest on multiclass data, every class in each visit of a row
        (:func:`daskpd.solvers.cocoa._multiclass.run_multiclass`)."""
        return run_multiclass(plan, client)

    def _check_grid(self, data, grid):
        n = int(data.n_samples)
        if grid > n:
            raise ValueError(f"grid={grid} is larger than the number of rows ({n})")

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """Read every group on its owner and build the state of epoch 0.

        Parameters
        ----------
        problem, data, client
            As :meth:`Solver.init <daskpd.solvers.driver.protocol.Solver.init>` takes them.
        seed : numpy.random.SeedSequence
            Root seed; round ``t``, group ``k`` draws its order from
            ``block_seeds(epoch_seed(seed, t), grid)[k]``.
        options : CocoaOptions
        warm_start : Iterate, optional
            With ``z`` (length ``n_samples``): that dual point, projected on the dual box,
            and ``w = -X^T z / (alpha n)``. With ``w`` only: the dual point
            ``z_i = c_i loss'(x_i . w, y_i)`` and its ``w``, a dual method's start.

        Returns
        -------
        state
        """
        state = self._setup(problem, data, seed, client, options)
        settings, n, d = state.settings, state.settings.n_samples, state.settings.n_features
        bounds = state.row_bounds
        sizes = np.diff(bounds)
        if warm_start is None:
            return self._placed_at_zero(state, [int(m) for m in sizes], d)
        else:
            warm_z = warm_start.z
            if not (isinstance(warm_z, np.ndarray) and warm_z.shape == (n,)):
                warm_z = None
            warm_w = None if warm_z is not None else np.asarray(warm_start.w, dtype=np.float64)
            if warm_w is not None and state.client is not None:
                # once to every home, not once per task through the scheduler
                warm_w = state.client.scatter(warm_w, broadcast=True, hash=False)
            parts = [
                (
                    _start_task,
                    group,
                    settings,
                    None if warm_z is None else warm_z[bounds[k] : bounds[k + 1]],
                    warm_w,
                )
                for k, group in enumerate(state.groups)
            ]
            if state.client is not None:
                z, w = client_start(state, parts, -settings.inv_alpha_n)
                return dataclasses.replace(
                    state, z=z, z_pick=None, z_blocks=z, w=w, epoch=0
                )  # fmt: skip
            results = _run_tasks(state, parts, "start")
            z = [part[0] for part in results]
            xt_z = np.zeros(d)
            for _, columns, part in results:
                xt_z[columns] += part
            w = xt_z * (-settings.inv_alpha_n)
        return self._placed(state, z, w, epoch=0)

    def run_epoch(self, state, epoch):
        """Run round ``epoch``: one local pass per group, then ``w += sum_k dw_k``.

        One ``dask.compute`` in-process, one graph on a client.

        Parameters
        ----------
        state
            From :meth:`init`, :meth:`run_epoch` or :meth:`restore`. On a client it is
            spent: the futures the returned state does not hold are released once the
            round is submitted (an iterate taken before holds references of its own).
        epoch : int
        """
        settings, grid = state.settings, state.settings.grid
        seeds = block_seeds(epoch_seed(state.seed, epoch), grid)
        if state.client is None:
            graph = TaskGraph("cocoa-round")
            parts = [
                graph.task(
                    k,
                    _round_task,
                    state.groups[k],
                    state.z[k],
                    state.z_pick,
                    state.w[0],
                    seeds[k],
                    settings,
                    k == 0,
                    state.bounds[k] if state.bounds else None,
                )  # fmt: skip
                for k in range(grid)
            ]
            results = graph.compute(parts)
            z = tuple(part[0] for part in results)
            w = _sum_task(state.w[0], settings.direct, 1, *results, *state.columns[0])
            bounds = tuple(part[3] for part in results) if settings.screening else ()
            if settings.screening and not settings.direct:
                bounds = tuple(
                    _shifted_bounds(
                        part,
                        3,
                        _column_shift(state.w[0], w, state.columns[0][k]),
                        state.groups[k],
                    )  # fmt: skip
                    for k, part in enumerate(results)
                )
            new = {
                "z": z,
                "z_pick": None,
                "z_blocks": z,
                "w": (w,),
                "stats": _stats_task(2, *results),
                "bounds": bounds,
            }
        else:
            new = client_round(state, epoch, seeds)
        return dataclasses.replace(
            state,
            epoch=epoch,
            certified_w=state.w[0],
            certified_z=state.z_blocks,
            **new,
        )

    def iterate(self, state):
        """Return the start point of the last round, with its exact primal and dual: ``w``
        (gathered), ``z`` by group (futures on a client) with ``z_bounds``, and
        ``primal``/``dual``. At epoch 0: the start point, without a certificate."""
        client = state.client
        if state.epoch == 0:
            w = state.w[0] if client is None else client.gather(state.w[0])
            z = _references(state.z_blocks)
            return Iterate(w=w, z=z, z_bounds=state.row_bounds)
        if client is None:
            w, stats = state.certified_w, state.stats
        else:
            w, stats = client.gather(state.certified_w), state.stats
        primal, dual = _certificate(state.settings, stats)
        z = _references(state.certified_z)
        return Iterate(w=w, z=z, z_bounds=state.row_bounds, primal=primal, dual=dual)

    def stop_at_gap(self, state, tol, relative=0.0):
        """``state`` whose rounds end after the certifying pass once it shows gap <= ``tol``
        (or <= ``relative`` times the primal).

        The driver stops at the first certificate within ``tol`` and returns that round's
        start point, so the round's later passes (liblinear's shrunk passes: about half of a
        hinge round at 1e8 nonzeros) would be wasted, and would hold the worker after the
        run has returned. With one row group the certifying pass sums the whole problem's
        certificate and the group's task checks it; with several each group has only its
        share, and the rounds are unchanged.

        Parameters
        ----------
        state
        tol : float
            The run's ``tol`` (absolute gap).
        relative : float, default=0.0
            A gap relative to the primal that ends the run as well (DSO's start).

        Returns
        -------
        state
        """
        settings = dataclasses.replace(
            state.settings, stop_gap=float(tol), stop_rel=float(relative)
        )
        return dataclasses.replace(state, settings=settings)

    def settle(self, state):
        """Wait for the last round's shrunk passes and sums, which run on after its epoch.

        The driver calls this when a run has ended normally: the workers are then idle when
        ``solve`` returns (a next call's tasks would queue behind them, and a cluster closed
        at once would cancel them mid-task). A run stopped by ``tol`` skipped them.

        Parameters
        ----------
        state
        """
        if state.client is None or state.epoch == 0:
            return
        from distributed import wait

        pending = [f for f in (*state.w, *state.z_blocks) if hasattr(f, "status")]
        try:
            with state.client.as_current():
                wait(pending, timeout=SETTLE_SECONDS)
        except TimeoutError:
            # the run's answer is already certified: the user gets it, the tasks run on
            _LOG.warning(
                "cocoa: the last round's shrunk passes still run after %.0f s", SETTLE_SECONDS
            )

    def certificate(self, state):
        """``(primal, dual)`` of :meth:`iterate`'s point, from the last round's sums.

        The round's certifying pass computed them; reading them moves a few numbers, not
        ``w``, so the driver can check the gap after every round.

        Parameters
        ----------
        state

        Returns
        -------
        tuple of float or None
            None at epoch 0 (the start point has no certificate).
        """
        if state.epoch == 0:
            return None
        # the round's sums are in this process already (the driver waited for them)
        return _certificate(state.settings, state.stats)

    def state_arrays(self, state):
        """Return every array needed to resume exactly (gathers ``w`` and ``z`` once)."""
        arrays = {
            "epoch": np.asarray(state.epoch, dtype=np.int64),
            "grid": np.asarray(state.settings.grid, dtype=np.int64),
            "sigma": np.asarray(state.settings.sigma, dtype=np.float64),
        }
        values = [state.w[0], list(state.z_blocks), list(self._bounds(state))]
        if state.epoch > 0:
            values += [state.certified_w, list(state.certified_z), state.stats]
        if state.client is not None:
            values = state.client.gather(values)
        arrays["w"] = np.asarray(values[0], dtype=np.float64)
        arrays["z"] = np.concatenate(values[1])
        if values[2] and all(part is not None for part in values[2]):
            # screening's margin bounds: a resumed run leaves out the rows this one would
            arrays["bounds"] = np.concatenate(values[2])
        if state.epoch > 0:
            arrays["certified_w"] = np.asarray(values[3], dtype=np.float64)
            arrays["certified_z"] = np.concatenate(values[4])
            arrays["stats"] = np.asarray(values[5], dtype=np.float64)
        return arrays

    def _bounds(self, state):
        """The groups' margin bounds (futures on a client, arrays or None in-process; empty
        when the rounds do not screen or none ran)."""
        if state.bounds or state.z_pick is None or not state.settings.screening:
            return state.bounds
        # in the last round's tuples, read where they live
        return tuple(
            state.client.submit(operator.getitem, part, 3, workers=[owner], pure=False)
            for part, owner in zip(state.z, state.owners, strict=True)
        )

    def restore(self, problem, data, arrays, *, seed, client, options):
        """Rebuild the state saved by :meth:`state_arrays` (the protocol's
        :meth:`~daskpd.solvers.driver.protocol.Solver.restore`)."""
        grid = saved_grid(arrays, options)
        options = dataclasses.replace(options, grid=grid)
        state = self._setup(problem, data, seed, client, options)
        if float(arrays["sigma"]) != state.settings.sigma:
            raise ValueError(
                f"checkpoint was made with sigma={float(arrays['sigma'])}, options give "
                f"{state.settings.sigma}"
            )
        bounds = state.row_bounds

        def blocks(name):
            return [arrays[name][bounds[k] : bounds[k + 1]].copy() for k in range(grid)]

        epoch = int(arrays["epoch"])
        state = self._placed(state, blocks("z"), np.array(arrays["w"]), epoch=epoch)
        if "bounds" in arrays and state.settings.screening:
            margins = blocks("bounds")
            if client is not None:
                margins = [
                    _scatter_to(client, part, state.owners[k]) for k, part in enumerate(margins)
                ]
            state = dataclasses.replace(state, bounds=tuple(margins))
        if epoch == 0:
            return state
        certified_z = blocks("certified_z")
        stats = np.array(arrays["stats"])
        certified_w = np.array(arrays["certified_w"])
        if client is not None:
            certified_z = [
                _scatter_to(client, part, state.owners[k]) for k, part in enumerate(certified_z)
            ]
            certified_w = _scatter_to(client, certified_w, state.homes[0])
        return dataclasses.replace(
            state, certified_w=certified_w, certified_z=tuple(certified_z), stats=stats
        )

    # -- helpers ----------------------------------------------------------------------------

    def _setup(self, problem, data, seed, client, options):
        """The state without a point: settings, row groups read on their owners."""
        workers = worker_list(client)
        grid = 1 if options.grid is None else int(options.grid)
        self._check_grid(data, grid)
        settings = _settings(problem, data, options, grid)
        bounds = row_group_bounds(data, grid)
        owners = tuple(group_owner(settings, workers, k) for k in range(grid))
        threads = (
            default_threads(settings, client, owners)
            if options.threads is None
            else options.threads
        )
        settings = dataclasses.replace(settings, threads=int(threads))

        homes = tuple(dict.fromkeys(owners))
        token = uuid.uuid4().hex[:12]
        class_pair = class_weight_pair(problem, data)
        ranges = [(int(bounds[k]), int(bounds[k + 1])) for k in range(grid)]
        limits = memory_limits(client, options.rows)
        if streams(options.rows, data, client, owners, ranges, limits):
            if options.screening:
                raise ValueError(
                    "screening=True needs the rows kept in memory; this run streams them "
                    "(rows='stream', or rows='auto' with a group larger than its share of "
                    "the owner's memory)"
                )
            settings = dataclasses.replace(settings, screening=False)
            chunk = min(
                stream_nnz(options, data, limits.get(owner, 0), stop - start, settings.threads)
                for owner, (start, stop) in zip(owners, ranges, strict=True)
            )
            settings = dataclasses.replace(settings, stream_nnz=chunk)
            groups, columns = self._streamed_groups(
                data, client, settings, owners, homes, token, class_pair, ranges
            )
            # a streamed group's z block is about a tenth of its rows' bytes: apart
            whole = False
        else:
            groups, columns, whole = self._read_groups(
                data, client, settings, owners, homes, token, class_pair, ranges
            )
        return _State(
            problem=problem,
            source=data,
            settings=settings,
            seed=seed,
            client=client,
            token=token,
            row_bounds=bounds,
            owners=owners,
            homes=homes,
            groups=tuple(groups),
            columns=columns,
            z=(),
            z_pick=None,
            z_blocks=(),
            w=(),
            epoch=0,
            whole=whole,
        )

    def _read_groups(self, data, client, settings, owners, homes, token, class_pair, ranges):
        """The row groups kept in memory by their owners (``rows="memory"``), their columns
        where each home reads them, and whether a z block may travel with its group's step."""
        grid = len(ranges)
        if client is not None and is_on_disk(data):
            # read by the owner straight from the store; the future stays for the run
            graph = TaskGraph("cocoa", token)
            groups = graph.submit(
                client,
                [
                    graph.task(
                        f"rows-{k}",
                        _load_group,
                        data,
                        start,
                        stop,
                        class_pair,
                        grid > 1,
                        settings,
                        worker=owners[k],
                    )  # fmt: skip
                    for k, (start, stop) in enumerate(ranges)
                ],
            )
        elif client is not None:
            # in-memory data is in this process already: each group goes to its owner once
            groups = [
                _scatter_to(client, _load_group(data, start, stop, class_pair, grid > 1), owners[k])
                for k, (start, stop) in enumerate(ranges)
            ]
        elif is_on_disk(data):
            graph = TaskGraph("cocoa-rows", token)
            groups = graph.compute(
                [
                    graph.task(k, _load_group, data, start, stop, class_pair, grid > 1)
                    for k, (start, stop) in enumerate(ranges)
                ]
            )
        else:
            groups = [
                _load_group(data, start, stop, class_pair, grid > 1) for start, stop in ranges
            ]
        if client is None:
            columns = (tuple(group.columns for group in groups),)
            sizes = [group.columns.shape[0] for group in groups]
        else:
            columns, sizes = _spread_columns(client, groups, owners, homes, token)
        # a z block may travel with its group's step when at most a quarter of its size
        # (or up to 1 MiB)
        whole = all(
            stop - start <= max(size // 4, 1 << 17)
            for (start, stop), size in zip(ranges, sizes, strict=True)
        )
        return groups, columns, whole

    def _streamed_groups(self, data, client, settings, owners, homes, token, class_pair, ranges):
        """The row groups read by every round (``rows="stream"``) and their columns where
        each home reads them."""
        calls = [
            (_open_streamed, data, start, stop, class_pair, settings if client else None)
            for start, stop in ranges
        ]
        if client is None:
            groups = [fn(*args) for fn, *args in calls]
            columns = (tuple(group.columns for group in groups),)
        else:
            graph = TaskGraph("cocoa", token)
            groups = graph.submit(
                client,
                [
                    graph.task(f"rows-{k}", fn, *args, worker=owners[k])
                    for k, (fn, *args) in enumerate(calls)
                ],
            )
            columns, _ = _spread_columns(client, groups, owners, homes, token)
        return groups, columns

    def _placed_at_zero(self, state, sizes, d):
        """``state`` at ``(w, z) = (0, 0)``: on a client, ``w``'s zeros made where they live
        (scattering ``n_features`` zeros cost about 0.25 s at 4.7M features), the dual
        blocks scattered as :meth:`_placed` does (every later block and ``w`` derives from
        them, so a lost worker still loses data Dask cannot recompute)."""
        z = [np.zeros(m) for m in sizes]
        if state.client is None:
            return self._placed(state, z, np.zeros(d), epoch=0)
        z = tuple(_scatter_to(state.client, part, state.owners[k]) for k, part in enumerate(z))
        graph = TaskGraph("cocoa", state.token)
        w = graph.submit(
            state.client,
            [
                graph.task(f"w0-{h}", np.zeros, d, worker=home, allow_other_workers=True)
                for h, home in enumerate(state.homes)
            ],
        )
        return dataclasses.replace(state, z=z, z_pick=None, z_blocks=z, w=tuple(w), epoch=0)

    def _placed(self, state, z, w, *, epoch):
        """``state`` at point ``(w, z)``: on a client, each block scattered where it lives.

        Scattered, not made by tasks: a lost worker then loses data Dask cannot recompute
        (rather than tasks pinned to a worker that is gone), and the driver replays the
        epoch from its last recovery point.
        """
        client = state.client
        if client is None:
            z = tuple(z)
        else:
            z = tuple(_scatter_to(client, part, state.owners[k]) for k, part in enumerate(z))
            w = [_scatter_to(client, w, home) for home in state.homes]
        w = (w,) if client is None else tuple(w)
        return dataclasses.replace(state, z=z, z_pick=None, z_blocks=z, w=w, epoch=epoch)
