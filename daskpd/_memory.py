"""The old name of :mod:`daskpd.data.memory`: the same objects."""

from daskpd.data.memory import MemoryDataset
from daskpd.data.validation import check_grid as _check_grid

__all__ = ["MemoryDataset", "_check_grid"]
