"""Options of the GSFW solver (their names are recorded in checkpoints and saved models)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GSFWOptions:
    """Options of :class:`GSFW`.

    Parameters
    ----------
    batch_size : int or None, default=None
        Rows per iteration ``b``. None: ``max(1, round(0.01 n))``, the paper's experiments.
    iterations_per_epoch : int or None, default=None
        None: ``ceil(n_block / b)`` per block, one pass of sample gradients per epoch. An
        integer ``k`` spreads ``k`` iterations over the blocks in proportion to their rows
        (at least one per block).
    refresh_every : int, default=20
        Every this many epochs, ``d`` is recomputed from ``s`` (a map-reduce in the same
        compute) to stop floating-point drift of the incremental updates.
    """

    batch_size: int | None = None
    iterations_per_epoch: int | None = None
    refresh_every: int = 20

    def __post_init__(self):
        if self.batch_size is not None and (
            isinstance(self.batch_size, bool) or int(self.batch_size) < 1
        ):
            raise ValueError(f"batch_size must be an integer >= 1, got {self.batch_size!r}")
        if self.iterations_per_epoch is not None and int(self.iterations_per_epoch) < 1:
            raise ValueError(
                f"iterations_per_epoch must be an integer >= 1, got {self.iterations_per_epoch!r}"
            )
        if int(self.refresh_every) < 0:
            raise ValueError(f"refresh_every must be >= 0, got {self.refresh_every!r}")
