"""The data layer: the on-disk zarr format, its writer and read-only handles, in-memory datasets.

One module per job, lowest first (each imports only the ones above it):

* :mod:`~daskpd.data.store`: where a dataset lives (local paths, fsspec URLs, read-only);
* :mod:`~daskpd.data.format`: the format's specification (its docstring), codecs, chunk
  sizes, streaming appenders, the manifest and its checksums;
* :mod:`~daskpd.data.atomic`: write to a temporary name, rename when complete;
* :mod:`~daskpd.data.validation`: the rows every writer takes, checked and counted;
* :mod:`~daskpd.data.grid`: a P x P grid's tables (:class:`GridInfo`) and its derivation;
* :mod:`~daskpd.data.base`: the read API every dataset shares (:class:`BaseDataset`), and the
  bias-feature view (:class:`BiasDataset`);
* :mod:`~daskpd.data.memory`: :class:`MemoryDataset`;
* :mod:`~daskpd.data.layout`: DSO's visit layout of a tile (:class:`TileLayout`), built;
* :mod:`~daskpd.data.layout_reader`: stored layouts, read and checked;
* :mod:`~daskpd.data.ondisk`: :class:`Dataset`, :func:`open_dataset`, verification;
* :mod:`~daskpd.data.writer`: :class:`DatasetWriter`, :func:`write_dataset`;
* :mod:`~daskpd.data.partition`: :func:`partition_dataset`, :func:`write_layouts`;
* :mod:`~daskpd.data.conversion`: :func:`as_data`, :func:`as_dataset`.

The numba kernels these use are in :mod:`daskpd.kernels.dataset` (and
:mod:`daskpd.kernels.dso` for the layouts), imported, as scipy is, by the functions that use
them: opening a dataset and reading its rows imports neither.
"""

from daskpd.data.base import BaseDataset, BiasDataset
from daskpd.data.conversion import IN_MEMORY_BYTES, as_data, as_dataset
from daskpd.data.format import FORMAT_VERSION, DatasetIntegrityError
from daskpd.data.grid import GridInfo
from daskpd.data.layout import DEFAULT_LAYOUTS, TileLayout
from daskpd.data.memory import MemoryDataset
from daskpd.data.ondisk import Dataset, open_dataset
from daskpd.data.partition import partition_dataset, write_layouts
from daskpd.data.writer import DatasetWriter, write_dataset

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
    "as_data",
    "as_dataset",
    "open_dataset",
    "partition_dataset",
    "write_dataset",
    "write_layouts",
]
