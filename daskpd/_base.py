"""The old name of :mod:`daskpd.data.base` (with the row checks of :mod:`daskpd.data.validation`
and the grid tables of :mod:`daskpd.data.grid`): the same objects."""

from daskpd.data.base import BaseDataset, BiasDataset
from daskpd.data.grid import GridInfo, inverse_order
from daskpd.data.validation import (
    DEFAULT_BLOCK_NNZ,
    LAYOUTS,
    NO_LIMIT,
    TASKS,
    as_float_array,
    block_limits,
    check_finite_dense,
    check_labels,
    check_weights,
    csr_chunk,
    csr_row_stats,
    dense_chunk,
    dense_stats,
    dense_to_csr,
    first_bad,
    task_and_counts,
)

__all__ = [
    "DEFAULT_BLOCK_NNZ",
    "LAYOUTS",
    "NO_LIMIT",
    "TASKS",
    "BaseDataset",
    "BiasDataset",
    "GridInfo",
    "as_float_array",
    "block_limits",
    "check_finite_dense",
    "check_labels",
    "check_weights",
    "csr_chunk",
    "csr_row_stats",
    "dense_chunk",
    "dense_stats",
    "dense_to_csr",
    "first_bad",
    "inverse_order",
    "task_and_counts",
]
