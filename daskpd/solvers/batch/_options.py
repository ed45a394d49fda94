"""Options of the batch baseline (their names are recorded in checkpoints and saved models)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["BatchOptions"]


@dataclass(frozen=True)
class BatchOptions:
    """Options of the batch baseline.

    Parameters
    ----------
    power_iterations : int, default=10
        Passes of power iteration that estimate ``lambda_max(X^T C X)`` at start-up.
    lipschitz : float or None, default=None
        Known Lipschitz constant of ``grad f`` (skips the power iteration).
    backtrack_factor : float, default=2.0
        Growth of ``L`` when a candidate fails the sufficient-decrease test.
    restart : bool, default=True
        Adaptive momentum restart.
    """

    power_iterations: int = 10
    lipschitz: float | None = None
    backtrack_factor: float = 2.0
    restart: bool = True

    def __post_init__(self):
        if (
            isinstance(self.power_iterations, bool)
            or not isinstance(self.power_iterations, int | np.integer)
            or self.power_iterations < 1
        ):
            raise ValueError(
                f"power_iterations must be a positive integer, got {self.power_iterations!r}"
            )
        if self.lipschitz is not None and not (
            isinstance(self.lipschitz, int | float) and 0 < self.lipschitz < math.inf
        ):
            raise ValueError(f"lipschitz must be a finite number > 0, got {self.lipschitz!r}")
        if not (isinstance(self.backtrack_factor, int | float) and self.backtrack_factor > 1):
            raise ValueError(f"backtrack_factor must be > 1, got {self.backtrack_factor!r}")
        if not isinstance(self.restart, bool | np.bool_):
            raise ValueError(f"restart must be True or False, got {self.restart!r}")
