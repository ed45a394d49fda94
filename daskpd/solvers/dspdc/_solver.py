"""The DSPDC solver: the :class:`DSPDC` class that the driver runs (``solver="dspdc"``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from daskpd.solvers.common.chain import run_chain
from daskpd.solvers.common.coordinate import (
    CAPABILITIES,
    CoordinateSolver,
    check_common,
    with_overrides,
)
from daskpd.solvers.driver.registry import register_solver
from daskpd.solvers.dspdc._options import DSPDCOptions, dspdc_step_sizes, lipschitz_constant
from daskpd.solvers.dspdc._tasks import _dspdc_block_task

__all__ = ["DSPDC"]


@register_solver
class DSPDC(CoordinateSolver):
    """DSPDC (Algorithm 1) for the driver (``solver="dspdc"``) on explicit data.

    One epoch = ``n / batch_size`` iterations (one pass over the rows) as a chained graph.
    Options: see :class:`DSPDCOptions`. The state (carry, per-block duals) has SPDC's shape:
    its start, iterate, certificate, checkpoint and restore are
    :class:`~daskpd.solvers.common.coordinate.CoordinateSolver`'s.
    """

    name = "dspdc"
    Options = DSPDCOptions
    capabilities = dataclasses.replace(
        CAPABILITIES,
        notes=f"{CAPABILITIES.notes}; `solve_factorized` (outside `solve`) takes X = U V in memory",
    )

    def check(self, problem, data, options):
        """Raise ValueError for an unsupported problem or option, before any Dask work."""
        spec = check_common(problem, data, options)[0]
        d = int(data.shape[1])
        q = d if options.n_coords is None else int(options.n_coords)
        if not 1 <= q <= d:
            raise ValueError(f"n_coords must be in [1, {d}], got {options.n_coords!r}")
        sizes = np.diff(np.asarray(data.row_block_bounds))
        if not 1 <= int(options.batch_size) <= sizes.min():
            raise ValueError(
                f"batch_size must be in [1, {sizes.min()}] (smallest row block), "
                f"got {options.batch_size!r}"
            )
        if options.theta_rule not in ("distance", "gap"):
            raise ValueError(f"theta_rule must be 'distance' or 'gap', got {options.theta_rule!r}")
        if isinstance(options.lipschitz, str) and options.lipschitz not in ("safe", "heuristic"):
            raise ValueError(
                f"lipschitz must be 'safe', 'heuristic' or a float, got {options.lipschitz!r}"
            )
        return spec

    def parameters(self, problem, data, options):
        """Return ``(spec, steps, opts, block_iters)``."""
        spec, _, _, pair = check_common(problem, data, options)
        n, d = (int(v) for v in data.shape)
        m = int(options.batch_size)
        q = d if options.n_coords is None else int(options.n_coords)
        lip = lipschitz_constant(data, m, q, options.lipschitz, options.lipschitz_factor)
        steps = dspdc_step_sizes(n, d, m, q, lip, spec.lam, spec.gamma, options.theta_rule)
        steps = with_overrides(steps, options)
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        block_iters = tuple(max(1, int(round(s / m))) for s in np.diff(bounds))
        opts = {"batch_size": m, "n_coords": q, "lipschitz": lip, "class_pair": pair}
        return spec, steps, opts, block_iters

    def run_epoch(self, state, epoch):
        """One pass over the rows as one Dask compute."""
        return run_chain(state, epoch, _dspdc_block_task)
