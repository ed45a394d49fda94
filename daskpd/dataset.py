"""The old name of :mod:`daskpd.data`: the same public names, the same objects.

The data layer is the package :mod:`daskpd.data`, one module per job; the storage format is
specified in the docstring of :mod:`daskpd.data.format`.
"""

from daskpd.data import (
    DEFAULT_LAYOUTS,
    FORMAT_VERSION,
    IN_MEMORY_BYTES,
    BaseDataset,
    BiasDataset,
    Dataset,
    DatasetIntegrityError,
    DatasetWriter,
    GridInfo,
    MemoryDataset,
    TileLayout,
    as_dataset,
    open_dataset,
    partition_dataset,
    write_dataset,
    write_layouts,
)
from daskpd.data.ondisk import _OPEN_HANDLES as _OPEN_HANDLES

__all__ = [
    "DEFAULT_LAYOUTS",
    "FORMAT_VERSION",
    "IN_MEMORY_BYTES",
    "BaseDataset",
    "BiasDataset",
    "Dataset",
    "DatasetIntegrityError",
    "DatasetWriter",
    "GridInfo",
    "MemoryDataset",
    "TileLayout",
    "as_dataset",
    "open_dataset",
    "partition_dataset",
    "write_dataset",
    "write_layouts",
]
