"""The SPDC solver: the :class:`SPDC` class that the driver runs (``solver="spdc"``)."""

from __future__ import annotations

import numpy as np

from daskpd.solvers.common.chain import run_chain
from daskpd.solvers.common.coordinate import (
    CAPABILITIES,
    CoordinateSolver,
    check_common,
    with_overrides,
)
from daskpd.solvers.driver.registry import register_solver
from daskpd.solvers.spdc._options import (
    SPDCOptions,
    optimal_mixing,
    run_threads,
    sampling_probabilities,
    spdc_step_sizes,
    weighted_step_sizes,
)
from daskpd.solvers.spdc._tasks import _flush_task, _hand_over, _open_shared, _spdc_block_task

__all__ = ["SPDC"]


@register_solver
class SPDC(CoordinateSolver):
    """SPDC for the driver (``solver="spdc"``): Algorithms 1-3 of Zhang & Xiao.

    Each epoch is one pass (``n`` sampled rows) as a chained graph over the row blocks.
    Step sizes follow (12) (uniform, mini-batch) or (24) with the mixing of (25)
    (weighted); non-smooth losses and non-strongly-convex regularizers need ``delta``
    (Section 3). Options: see :class:`SPDCOptions`.
    """

    name = "spdc"
    Options = SPDCOptions
    capabilities = CAPABILITIES

    def check(self, problem, data, options):
        """Raise ValueError for an unsupported problem or option, before any Dask work."""
        spec, n, norms, _ = check_common(problem, data, options)
        if int(options.batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {options.batch_size!r}")
        if options.sampling not in ("shuffle", "uniform", "weighted"):
            raise ValueError(
                f"sampling must be 'shuffle', 'uniform' or 'weighted', got {options.sampling!r}"
            )
        if options.sampling == "weighted" and options.batch_size != 1:
            raise ValueError("weighted sampling needs batch_size=1 (the paper gives no steps)")
        if options.mixing is not None and not 0.0 <= options.mixing < 1.0:
            raise ValueError(f"mixing must be in [0, 1), got {options.mixing!r}")
        sizes = np.diff(np.asarray(data.row_block_bounds))
        if options.batch_size > sizes.min():
            raise ValueError(
                f"batch_size={options.batch_size} exceeds the smallest row block ({sizes.min()})"
            )
        for name in ("tau", "sigma"):
            value = getattr(options, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if not isinstance(options.shared_memory, bool | np.bool_):
            raise ValueError(f"shared_memory must be True or False, got {options.shared_memory!r}")
        threads = options.threads
        if threads is not None:
            if isinstance(threads, bool) or not isinstance(threads, int | np.integer):
                raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
            if threads < 1:
                raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
            if threads > 1 and (options.batch_size != 1 or options.sampling != "shuffle"):
                raise ValueError(
                    f"threads={threads} needs batch_size=1 and sampling='shuffle' (each row "
                    f"once a pass, so that no two threads step one dual coordinate), got "
                    f"batch_size={options.batch_size}, sampling={options.sampling!r}"
                )
        return spec

    def parameters(self, problem, data, options):
        """Return ``(spec, steps, opts, block_iters)`` for this problem, data and options."""
        spec, n, norms, pair = check_common(problem, data, options)
        big_r = float(norms.max())
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        m = int(options.batch_size)
        opts = {
            "batch_size": m,
            "weighted": options.sampling == "weighted",
            "shuffle": options.sampling == "shuffle",
            "class_pair": pair,
        }
        if opts["weighted"]:
            mean_r = float(norms.mean())
            mixing = options.mixing
            if mixing is None:
                mixing = optimal_mixing(big_r, mean_r, spec.gamma, spec.lam, n)
            steps = weighted_step_sizes(big_r, mean_r, spec.gamma, spec.lam, n, mixing)
            probs = sampling_probabilities(norms, mixing)
            mass = np.add.reduceat(probs, bounds[:-1])
            iters = np.floor(n * np.cumsum(mass) + 0.5).astype(np.int64)
            block_iters = tuple(int(v) for v in np.diff(np.concatenate([[0], iters])))
            opts.update(mixing=float(mixing), norm_sum=float(norms.sum()))
        else:
            steps = spdc_step_sizes(big_r, spec.gamma, spec.lam, n, m)
            block_iters = tuple(max(1, int(round(s / m))) for s in np.diff(bounds))
        return spec, with_overrides(steps, options), opts, block_iters

    def run_epoch(self, state, epoch):
        """One pass over the data as one Dask compute."""
        return run_chain(state, epoch, _spdc_block_task, finish=_flush_task, handoff=_hand_over)

    def run_resources(self, opts, options, client):
        """The block tasks' threads, and the run's shared-memory files for the carry."""
        opts["threads"] = run_threads(options, client)
        shared = _open_shared(client, options)
        opts["shared_run"] = None if shared is None else shared.name
        return shared
