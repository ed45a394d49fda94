"""On-disk datasets: a versioned zarr v3 format, its streaming writer and read-only handles.

Format (``format_version`` 1)
-----------------------------
A dataset is a directory holding one zarr v3 group. Every array is 1-D (dense ``X`` is 2-D),
chunked to about 4 MiB uncompressed, compressed with Blosc zstd + byte shuffle and followed by a
CRC32C codec (zarr checks it on every chunk read). Chunk files are named ``c.<i>[.<j>]`` inside
the array's directory. The number of arrays is constant, whatever the data size.

Sparse layout ``"csr"`` (row-blocked CSR; n = n_samples, d = n_features)::

    indptr            int64   (n + 1,)   row offsets into indices/data; indptr[0] = 0
    indices           int32   (nnz,)     column ids, strictly increasing within each row
    data              float32 | float64 (nnz,)   values; ABSENT when the features are binary
    y                 float64 (n,)       labels
    sample_weight     float64 (n,)       optional per-row weights (absent when not given)
    row_nnz           int64   (n,)       stored entries per row
    row_norm_sq       float64 (n,)       squared Euclidean norm of each row
    col_nnz           int64   (d,)       stored entries per column
    row_block_bounds  int64   (n_row_blocks + 1,)   row block b = rows [bounds[b], bounds[b+1])

Row block b is the contiguous slice ``indptr[bounds[b]]:indptr[bounds[b+1]]`` of
``indices``/``data``. Dense layout ``"dense"`` stores ``X`` (n, d) float32/float64 chunked by
(rows, up to 65536 columns) instead of indptr/indices/data; the statistics count nonzero values.

Group attributes: ``format_version`` (int), ``shape`` [n, d], ``nnz`` (stored entries; for the
dense layout the nonzero values), ``binary`` (bool; all values 1, no ``data``), ``layout``,
``task`` ("binary" with labels in {-1, +1}, or "regression"), ``label_counts`` ({"-1": c, "1": c}
for binary, null for regression), ``dtype`` (value dtype, "float32" or "float64"),
``has_sample_weight``, ``n_row_blocks``, ``write_id`` (uuid of the write) and ``manifest``:
for every array its shape, dtype, chunk shape, number and total size of chunk files, and the
CRC32 of its logical little-endian bytes.

Tiled layout for a P x P grid (derived by :func:`partition_dataset`), subgroup ``grids/<P>/``::

    row_bounds  int64 (P + 1,)     row group q = rows [row_bounds[q], row_bounds[q+1])
    col_order   int64 (d,)         the grid's column order: position k holds column
                                   col_order[k]; columns ranked by nonzeros are dealt to the
                                   P blocks in turn (absent in older grids: the identity)
    col_bounds  int64 (P + 1,)     column block r = positions [col_bounds[r], col_bounds[r+1]),
                                   i.e. columns col_order[col_bounds[r]:col_bounds[r+1]]
    tile_ptr    int64 (P, P + 1)   tile (q, r) = [tile_ptr[q, r], tile_ptr[q, r+1]); rows of
                                   the grid are consecutive: tile_ptr[q, P] = tile_ptr[q+1, 0]
    rows        int32 (nnz,)       row id local to the row group
    cols        int32 (nnz,)       column id local to the column block (position - col_bounds[r])
    vals        float (nnz,)       values; ABSENT when binary
    tile_crc32  int64 (P * P, 3)   CRC32 of each tile's slice of rows, cols, vals (0 if absent)

Entries of a tile are sorted by (row, col). Row and column bounds balance nonzeros: bound k is
the first row (position) whose cumulative count, rows in order and columns in the grid's
order, reaches ceil(k * nnz / P). Subgroup attributes:
``format_version``, ``grid`` (P), ``nnz``, ``binary``, ``dataset_write_id`` (the ``write_id``
of the dataset it was derived from), ``write_id`` and ``manifest`` (as above; ``rows``,
``cols`` and ``vals`` have ``crc32`` null: they are checked tile by tile with ``tile_crc32``).

Stored DSO tile layouts (written by :func:`partition_dataset`, by default for DSO's default
options, and by :func:`write_layouts`), subgroup ``grids/<P>/layouts/<name>/``; ``name`` is
:attr:`TileLayout.name`, e.g. ``shuffled-v1-b16384-c1024-m256``, and spells every parameter
the layout depends on::

    rows, cols, vals   as in the grid (vals ABSENT when binary): tile (q, r) holds the same
                       entries at the same offsets [tile_ptr[q, r], tile_ptr[q, r+1]) of
                       the grid, in DSO's visit layout: grouped by column sub-block of
                       block_cols columns, shuffled inside each sub-block by a function of
                       (P, q, r) alone (daskpd._layout)
    chunk_ptr    int64 (sum over tiles of n_chunks + 1,)   each tile's chunk offsets, local
                       to the tile, from 0 to its nnz
    tile_chunks  int64 (P * P + 1,)   tile t = q * P + r owns chunk_ptr[tile_chunks[t]:
                       tile_chunks[t+1]]
    block_ptr    int64 (sum over tiles of n_sub_blocks + 1,)   each tile's sub-block offsets
                       into its chunks
    tile_blocks  int64 (P * P + 1,)   tile t owns block_ptr[tile_blocks[t]:tile_blocks[t+1]]
    tile_crc32   int64 (P * P, 5)   CRC32 of each tile's slice of rows, cols, vals,
                       chunk_ptr and block_ptr (0 for absent vals)

Attributes: ``format_version``, ``grid``, ``layout`` (the name), the parameters
``visit_order`` ("shuffled"), ``layout_version``, ``block_cols``, ``chunk_nnz`` and
``min_chunks``, ``nnz``, ``binary``, ``dataset_write_id``, ``grid_write_id`` (the ``write_id``
of the grid it was derived from), ``write_id`` and ``manifest`` (``rows``, ``cols``, ``vals``,
``chunk_ptr`` and ``block_ptr`` checked tile by tile). A DSO run whose options give a stored
name reads its tiles from there (each checked against ``tile_crc32``) instead of building
them: the same bits. A layout whose ``grid_write_id`` is not the grid's (the grid was stored
again) or whose parameters are not its name's is not used, with a warning naming it; damaged
files, tables or tiles are :class:`DatasetIntegrityError`.

Atomicity: a dataset is written to ``<path>.tmp-<uuid>`` and renamed when complete (replacing
an existing one only with ``overwrite=True``: the old one is renamed aside first, then
removed); a grid to ``grids/.tmp-<P>-<uuid>`` (with its layouts) and renamed; a layout added
later to ``grids/<P>/layouts/.tmp-<name>-<uuid>`` and renamed. Readers never see half-written
data; a killed writer leaves only its temporary directory.

Integrity: :func:`open_dataset` checks the attributes, every array's shape and dtype against the
manifest and the number and total size of chunk files (truncated, deleted or added files);
every chunk read checks its CRC32C; :meth:`Dataset.verify` (or ``open_dataset(path,
verify=True)``) re-reads every array (and every tile, of grids and stored layouts) and
compares CRC32s with the manifest.
Errors are :class:`DatasetIntegrityError` naming the path and the array. Handles unpickled in
Dask tasks list chunk files once per process and directory state, so reopening is cheap.

Offsets: every offset (``indptr``, ``row_block_bounds``, ``tile_ptr``, bounds, counts) is int64
on disk and in memory, and slices are computed from them as Python or int64 integers; column
ids and tile-local ids are int32.
"""

from __future__ import annotations

import os
import threading
import uuid
import warnings
from functools import cached_property
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import zarr

from daskpd import _format, _layout
from daskpd._base import (
    LAYOUTS,
    TASKS,
    BaseDataset,
    BiasDataset,
    GridInfo,
    block_limits,
    check_labels,
    check_weights,
    csr_chunk,
    csr_row_stats,
    dense_chunk,
    dense_stats,
    dense_to_csr,
    inverse_order,
    task_and_counts,
)
from daskpd._format import FORMAT_VERSION, DatasetIntegrityError
from daskpd._layout import DEFAULT_LAYOUTS, LAYOUT_ARRAYS, TileLayout
from daskpd._memory import MemoryDataset, _check_grid
from daskpd._partition import (
    TILE_ARRAYS,
    ZarrSink,
    build_grid,
    count_group,
    grid_bounds,
    grid_info,
    pieces_by_group,
    place_group,
)
from daskpd.kernels import dataset as kernels

__all__ = [
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


# --------------------------------------------------------------------------------------------
# on-disk dataset


def _normalize_path(path) -> str:
    if _format.is_url(path):
        return path.rstrip("/")
    path = os.path.abspath(os.fspath(path))
    return path.rstrip(os.sep) or os.sep


def _check_storage_options(path, storage_options):
    if storage_options is None:
        return None
    if not _format.is_url(path):
        raise ValueError(
            f"storage_options apply to a URL (s3://, gs://, http://, file://...), got the local "
            f"path {path!r}"
        )
    return dict(storage_options)


_FILES_CHECKED: set = set()

# One handle per dataset and process for unpickled datasets: every Dask task that reads the
# dataset shares it (and its grid tables, n_features int64 for the column order). A handle per
# task would also live as long as the worker remembers the task, which made DSO's workers grow
# by a column order per tile read (1.2 GB an epoch at 5e8 nonzeros).
_OPEN_LOCK = threading.Lock()
_OPEN_HANDLES: dict = {}


def _stamp(path, storage_options=None):
    """Identity of a stored group's metadata file: replaced or rewritten means changed."""
    if _format.is_url(path):
        return _format.remote_stamp(path, storage_options)
    try:
        stat = os.stat(os.path.join(path, "zarr.json"))
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


class Dataset(BaseDataset):
    """Read-only handle on a dataset stored in the daskpd zarr format.

    Opening is cheap (metadata and directory listings only); arrays are read on demand, slice
    by slice. The handle pickles as its path (or URL and storage options), so Dask tasks reopen
    it on workers and read only their block. Use :func:`open_dataset` to create one.

    Parameters
    ----------
    path : str or os.PathLike
        Dataset directory, or its URL (see :func:`open_dataset`).
    verify : bool, default=False
        Also re-read every array and compare its checksum with the manifest.
    storage_options : dict, optional
        fsspec options of a URL (see :func:`open_dataset`).

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    DatasetIntegrityError
        When the dataset is not a daskpd dataset, or is truncated or altered.
    """

    def __init__(self, path, *, verify=False, storage_options=None, _reopened=False):
        self.path = _normalize_path(path)
        self._storage_options = _check_storage_options(self.path, storage_options)
        self._reopened = bool(_reopened)
        if _format.is_url(self.path):
            found = _format.remote_exists(self.path, self._storage_options)
        else:
            found = os.path.isdir(self.path)
        if not found:
            raise FileNotFoundError(f"no dataset at {self.path}")
        try:
            self._group = _format.open_group_readonly(self.path, self._storage_options)
            attrs = dict(self._group.attrs)
        except Exception as exc:
            raise DatasetIntegrityError(
                f"{self.path}: not a readable daskpd dataset (zarr group metadata: {exc})"
            ) from None
        version = attrs.get("format_version")
        if version != FORMAT_VERSION:
            raise DatasetIntegrityError(
                f"{self.path}: format_version is {version!r}, this daskpd reads {FORMAT_VERSION}"
            )
        try:
            self.shape = (int(attrs["shape"][0]), int(attrs["shape"][1]))
            self.nnz = int(attrs["nnz"])
            self.binary = bool(attrs["binary"])
            self.layout = str(attrs["layout"])
            self.task = str(attrs["task"])
            self.label_counts = attrs["label_counts"]
            self.dtype = np.dtype(attrs["dtype"])
            self.has_sample_weight = bool(attrs["has_sample_weight"])
            self._manifest = dict(attrs["manifest"])
            self._write_id = str(attrs["write_id"])
            n_row_blocks = int(attrs["n_row_blocks"])
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise DatasetIntegrityError(
                f"{self.path}: dataset attributes are incomplete or altered ({exc!r})"
            ) from None
        self._arrays = {}
        self._check_manifest_covers_format()
        self._check_files()
        self.row_block_bounds = self._read("row_block_bounds")
        if self.row_block_bounds.shape[0] != n_row_blocks + 1 or (
            self.row_block_bounds[0] != 0 or self.row_block_bounds[-1] != self.n_samples
        ):
            raise DatasetIntegrityError(
                f"{self.path}: array 'row_block_bounds' disagrees with the attributes"
            )
        if verify:
            self.verify()

    # ---- integrity

    def _expected_arrays(self) -> dict[str, tuple]:
        n, d = self.shape
        value_dtype = self.dtype.str
        expected = {
            "y": ((n,), "<f8"),
            "row_nnz": ((n,), "<i8"),
            "row_norm_sq": ((n,), "<f8"),
            "col_nnz": ((d,), "<i8"),
        }
        if self.layout == "csr":
            expected["indptr"] = ((n + 1,), "<i8")
            expected["indices"] = ((self.nnz,), "<i4")
            if not self.binary:
                expected["data"] = ((self.nnz,), value_dtype)
        elif self.layout == "dense":
            expected["X"] = ((n, d), value_dtype)
        else:
            raise DatasetIntegrityError(f"{self.path}: unknown layout {self.layout!r}")
        if self.has_sample_weight:
            expected["sample_weight"] = ((n,), "<f8")
        return expected

    def _check_manifest_covers_format(self) -> None:
        expected = self._expected_arrays()
        for name, (shape, dtype) in expected.items():
            entry = self._manifest.get(name)
            if entry is None:
                raise DatasetIntegrityError(f"{self.path}: manifest has no array {name!r}")
            if tuple(entry["shape"]) != shape or entry["dtype"] != dtype:
                raise DatasetIntegrityError(
                    f"{self.path}: array {name!r} is recorded as {tuple(entry['shape'])} "
                    f"{entry['dtype']}, the attributes imply {shape} {dtype} (altered metadata)"
                )

    def _check_files(self) -> None:
        arrays = _check_group_files(
            self._group, self.path, self._manifest, self._write_id, self._reopened
        )
        self._arrays.update({(None, name): array for name, array in arrays.items()})

    def verify(self) -> None:
        """Re-read every stored array (grids included) and compare it with the manifest.

        Raises
        ------
        DatasetIntegrityError
            Naming the first array whose size, chunk files or checksum differ.
        """
        _verify_arrays(self._group, self.path, self._manifest)
        for n_blocks in self.grids:
            group, directory, attrs = self._grid_group(n_blocks)
            _verify_arrays(group, directory, attrs["manifest"])
            tile_ptr = self._read("tile_ptr", group=group, where=directory)
            starts = tile_ptr[:, :-1].ravel()
            tiles = np.stack([starts, np.append(starts[1:], tile_ptr[-1, -1])], axis=1)
            table = self._read("tile_crc32", group=group, where=directory)
            ranges = dict.fromkeys(TILE_ARRAYS, tiles)
            self._verify_tiles(group, directory, attrs["manifest"], table, ranges, n_blocks)
            for name in self.layouts(n_blocks):
                where = os.path.join(directory, "layouts", name)
                layout_group, manifest = _open_layout_group(where)
                _verify_arrays(layout_group, where, manifest)
                # fresh handles: the layout may have been stored again since this handle read it
                self._arrays.update({(where, key): layout_group[key] for key in manifest})
                table = self._read("tile_crc32", group=layout_group, where=where)
                ranges = dict.fromkeys(TILE_ARRAYS, tiles)
                for array, offsets in (("chunk_ptr", "tile_chunks"), ("block_ptr", "tile_blocks")):
                    bounds = self._read(offsets, group=layout_group, where=where)
                    ranges[array] = np.stack([bounds[:-1], bounds[1:]], axis=1)
                self._verify_tiles(layout_group, where, manifest, table, ranges, n_blocks)

    def _verify_tiles(self, group, directory, manifest, table, ranges, n_blocks) -> None:
        """Compare the CRC32 of every tile's slice of the arrays in ``ranges`` with ``table``.

        ``ranges[name]`` holds the ``(start, stop)`` of each tile in array ``name``, whose
        column in ``table`` is its place in ``ranges``.
        """
        for column, (name, bounds) in enumerate(ranges.items()):
            if name not in manifest:
                continue
            for tile, (lo, hi) in enumerate(bounds):
                values = self._read(name, slice(int(lo), int(hi)), group, directory)
                if _layout.crc32(values) != table[tile, column]:
                    q, r = divmod(tile, n_blocks)
                    raise DatasetIntegrityError(
                        f"{directory}: array {name!r} checksum of tile ({q}, {r}) differs "
                        "from the manifest (altered data)"
                    )

    def _read(self, name, selection=slice(None), group=None, where=None):
        group = self._group if group is None else group
        key = (where, name)
        try:
            # zarr re-reads an array's metadata on every group lookup: keep the handles
            array = self._arrays.get(key)
            if array is None:
                array = self._arrays[key] = group[name]
            return array[selection]
        except Exception as exc:
            raise DatasetIntegrityError(
                f"{where or self.path}: reading array {name!r} failed; the stored chunk is "
                f"truncated or altered ({type(exc).__name__}: {exc})"
            ) from None

    @property
    def format_version(self) -> int:
        """Version of the stored format."""
        return FORMAT_VERSION

    @property
    def stored_bytes(self) -> int:
        """Bytes of the stored (compressed) chunk files of the dataset's arrays (grids excluded)."""
        return int(sum(entry["stored_bytes"] for entry in self._manifest.values()))

    # ---- pickling and identity

    def __reduce__(self):
        return (_reopen, (self.path, self._write_id, self._storage_options))

    def __repr__(self) -> str:
        return f"Dataset({self.path!r}, shape={self.shape}, nnz={self.nnz}, layout={self.layout!r})"

    def _token(self):
        return ("daskpd.Dataset", self.path, self._write_id)

    # ---- statistics, read lazily

    @cached_property
    def row_nnz(self) -> np.ndarray:
        """Stored entries per row, int64 (n_samples,)."""
        return self._read("row_nnz")

    @cached_property
    def row_norm_sq(self) -> np.ndarray:
        """Squared Euclidean row norms, float64 (n_samples,)."""
        return self._read("row_norm_sq")

    @cached_property
    def col_nnz(self) -> np.ndarray:
        """Stored entries per column, int64 (n_features,)."""
        return self._read("col_nnz")

    @cached_property
    def y(self) -> np.ndarray:
        """All labels, float64 (n_samples,)."""
        return self._read("y")

    @cached_property
    def sample_weight(self):
        """All sample weights, float64 (n_samples,), or None."""
        return self._read("sample_weight") if self.has_sample_weight else None

    # ---- primitives

    def _y_rows(self, start, stop):
        return self._read("y", slice(start, stop))

    def _weight_rows(self, start, stop):
        return self._read("sample_weight", slice(start, stop))

    def _csr_rows(self, start, stop):
        if self.layout == "dense":
            return dense_to_csr(self._dense_rows(start, stop))
        indptr = self._read("indptr", slice(start, stop + 1))
        lo, hi = int(indptr[0]), int(indptr[-1])
        indices = self._read("indices", slice(lo, hi))
        data = None if self.binary else self._read("data", slice(lo, hi))
        return indptr - indptr[0], indices, data

    def _dense_rows(self, start, stop):
        return self._read("X", (slice(start, stop), slice(None)))

    # ---- grids

    @property
    def grids(self) -> list[int]:
        """Grid sizes P whose tiled layout is stored under ``grids/P``."""
        directory = os.path.join(self.path, "grids")
        if not os.path.isdir(directory):
            return []
        return sorted(int(name) for name in os.listdir(directory) if name.isdigit())

    def _grid_group(self, n_blocks):
        directory = os.path.join(self.path, "grids", str(int(n_blocks)))
        try:
            group = _format.open_group_readonly(directory)
            attrs = dict(group.attrs)
            attrs["manifest"] = dict(attrs["manifest"])
            write_id = str(attrs["write_id"])
            if int(attrs["grid"]) != int(n_blocks) or attrs["format_version"] != FORMAT_VERSION:
                raise ValueError("grid attributes disagree with the directory name")
            if attrs.get("dataset_write_id", self._write_id) != self._write_id:
                raise ValueError("the grid was derived from another write of the dataset")
        except Exception as exc:
            raise DatasetIntegrityError(f"{directory}: unreadable grid ({exc})") from None
        arrays = _check_group_files(group, directory, attrs["manifest"], write_id, self._reopened)
        self._arrays.update({(directory, name): array for name, array in arrays.items()})
        return group, directory, attrs

    @cached_property
    def _grid_cache(self) -> dict:
        return {}

    def _grid_info(self, n_blocks):
        stamp = _stamp(os.path.join(self.path, "grids", str(int(n_blocks))))
        cached = self._grid_cache.get(n_blocks)
        if cached is None or cached[3] != stamp:
            group, directory, attrs = self._grid_group(n_blocks)
            info = GridInfo(
                row_bounds=self._read("row_bounds", group=group, where=directory),
                col_bounds=self._read("col_bounds", group=group, where=directory),
                tile_ptr=self._read("tile_ptr", group=group, where=directory),
                # absent from grids written before the column order was stored: the identity
                col_order=(
                    self._read("col_order", group=group, where=directory)
                    if "col_order" in attrs["manifest"]
                    else None
                ),
            )
            shapes_ok = (
                info.row_bounds.shape == (n_blocks + 1,)
                and info.col_bounds.shape == (n_blocks + 1,)
                and info.tile_ptr.shape == (n_blocks, n_blocks + 1)
                and (info.col_order is None or info.col_order.shape == (self.n_features,))
                and int(info.tile_ptr[-1, -1]) == self.nnz
                and int(attrs["nnz"]) == self.nnz
            )
            if not shapes_ok:
                raise DatasetIntegrityError(
                    f"{directory}: grid tables disagree with the dataset (altered grid)"
                )
            # the stamp: a grid written again (partition_dataset(..., overwrite)) is re-read
            self._grid_cache[n_blocks] = (group, directory, info, stamp, attrs)
        return self._grid_cache[n_blocks][2]

    def _row_nnz_chunks(self):
        step = int(self._manifest["row_nnz"]["chunks"][0])
        for start in range(0, self.n_samples, step):
            yield self._read("row_nnz", slice(start, min(start + step, self.n_samples)))

    def _csr_indices_rows(self, start, stop):
        if self.layout == "dense":
            indptr, indices, _ = self._csr_rows(start, stop)
            return indptr, indices
        indptr = self._read("indptr", slice(start, stop + 1))
        indices = self._read("indices", slice(int(indptr[0]), int(indptr[-1])))
        return indptr - indptr[0], indices

    def _tile(self, n_blocks, info, q, r):
        group, directory = self._grid_cache[n_blocks][:2]
        lo, hi = int(info.tile_ptr[q, r]), int(info.tile_ptr[q, r + 1])
        rows = self._read("rows", slice(lo, hi), group, directory)
        cols = self._read("cols", slice(lo, hi), group, directory)
        vals = None if self.binary else self._read("vals", slice(lo, hi), group, directory)
        return rows, cols, vals

    # ---- stored DSO tile layouts

    def layouts(self, n_blocks) -> list[str]:
        """Names of the DSO tile layouts stored with the grid ``n_blocks`` (``grids/P/layouts``).

        Parameters
        ----------
        n_blocks : int

        Returns
        -------
        list of str
            :attr:`TileLayout.name` of each stored layout, usable or not.
        """
        directory = os.path.join(self.path, "grids", str(int(n_blocks)), "layouts")
        if not os.path.isdir(directory):
            return []
        return sorted(
            name
            for name in os.listdir(directory)
            if not name.startswith(".") and os.path.isdir(os.path.join(directory, name))
        )

    def stored_layout(self, n_blocks, layout) -> bool:
        """Whether the layout ``layout`` of the grid ``n_blocks`` is stored and usable.

        A stored layout derived from another write of the grid, or recording parameters other
        than ``layout``'s, is not used: a warning naming its path says so (once per process).

        Parameters
        ----------
        n_blocks : int
        layout : TileLayout

        Returns
        -------
        bool

        Raises
        ------
        DatasetIntegrityError
            When the stored layout is unreadable, its chunk files are missing or truncated, or
            its tables disagree with the grid.
        """
        return self._usable_layout(int(n_blocks), layout) is not None

    def layout_tile(self, n_blocks, layout, q, r):
        """Tile ``(q, r)`` in the stored layout ``layout``, checked; None when none is usable.

        Parameters
        ----------
        n_blocks : int
        layout : TileLayout
        q, r : int

        Returns
        -------
        tuple or None
            ``(rows, cols, vals, chunk_ptr, block_ptr)`` as
            :func:`daskpd._layout.build_tile_layout` builds them from :meth:`tile` (``vals``
            empty float64 when binary), or None (see :meth:`stored_layout`).

        Raises
        ------
        DatasetIntegrityError
            Naming the layout's path, the array and the tile, when a chunk of the tile
            cannot be read or the tile's checksum differs from the layout's ``tile_crc32``.
        """
        n_blocks, q, r = int(n_blocks), int(q), int(r)
        entry = self._usable_layout(n_blocks, layout)
        if entry is None:
            return None
        info = self._grid_info(n_blocks)
        tile = q * n_blocks + r
        bounds = {
            "chunk_ptr": entry.tile_chunks[tile : tile + 2],
            "block_ptr": entry.tile_blocks[tile : tile + 2],
        }
        parts = []
        for column, name in enumerate(LAYOUT_ARRAYS):
            if name == "vals" and self.binary:
                parts.append(np.zeros(0, dtype=np.float64))
                continue
            lo, hi = bounds.get(name, info.tile_ptr[q, r : r + 2])
            try:
                values = self._read(name, slice(int(lo), int(hi)), entry.group, entry.directory)
            except DatasetIntegrityError as exc:
                raise DatasetIntegrityError(f"{exc} (tile ({q}, {r}))") from None
            if _layout.crc32(values) != entry.tile_crc32[tile, column]:
                raise DatasetIntegrityError(
                    f"{entry.directory}: array {name!r} checksum of tile ({q}, {r}) differs "
                    "from the manifest (altered data)"
                )
            parts.append(values)
        return tuple(parts)

    @cached_property
    def _layout_cache(self) -> dict:
        return {}

    def _usable_layout(self, n_blocks, layout):
        """The :class:`_StoredLayout` of ``layout``, or None (absent, or not usable: warned)."""
        self._grid_info(n_blocks)
        grid_stamp = self._grid_cache[n_blocks][3]
        directory = os.path.join(self.path, "grids", str(n_blocks), "layouts", layout.name)
        stamp = (_stamp(directory), grid_stamp)
        cached = self._layout_cache.get((n_blocks, layout))
        if cached is None or cached[0] != stamp:
            # the stamps: a layout or grid stored again is looked at again
            cached = (stamp, *self._open_layout(n_blocks, layout, directory))
            self._layout_cache[n_blocks, layout] = cached
        _, entry, reason = cached
        if reason is not None:
            _warn_layout_once(directory, reason)
        return entry

    def _open_layout(self, n_blocks, layout, directory):
        """``(entry, None)``, ``(None, why it is not used)`` or ``(None, None)`` when absent."""
        if not os.path.isdir(directory):
            return None, None
        group, manifest = _open_layout_group(directory)
        attrs = dict(group.attrs)
        grid_attrs = self._grid_cache[n_blocks][4]
        try:
            write_id = str(attrs["write_id"])
            grid_write_id = str(attrs["grid_write_id"])
            recorded = {key: attrs.get(key) for key in layout.attributes()}
            recorded["format_version"] = attrs.get("format_version")
            same_place = (
                int(attrs["grid"]) == n_blocks
                and int(attrs["nnz"]) == self.nnz
                and bool(attrs["binary"]) == self.binary
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DatasetIntegrityError(
                f"{directory}: stored layout attributes are incomplete or altered ({exc!r})"
            ) from None
        if grid_write_id != str(grid_attrs["write_id"]):
            return None, (
                f"it was derived from another write of the grid (grid write id {grid_write_id}, "
                f"the grid's is {grid_attrs['write_id']})"
            )
        expected = {**layout.attributes(), "format_version": FORMAT_VERSION}
        if recorded != expected:
            return None, f"it records the parameters {recorded}, the run needs {expected}"
        if not same_place:
            raise DatasetIntegrityError(
                f"{directory}: stored layout attributes disagree with the grid (altered layout)"
            )
        n_tiles = n_blocks * n_blocks
        expected_arrays = {
            "rows": ((self.nnz,), "<i4"),
            "cols": ((self.nnz,), "<i4"),
            "tile_crc32": ((n_tiles, len(LAYOUT_ARRAYS)), "<i8"),
            "tile_chunks": ((n_tiles + 1,), "<i8"),
            "tile_blocks": ((n_tiles + 1,), "<i8"),
            # lengths checked against the tile offsets below
            "chunk_ptr": (None, "<i8"),
            "block_ptr": (None, "<i8"),
        }
        if not self.binary:
            expected_arrays["vals"] = ((self.nnz,), self.dtype.str)
        for name, (shape, dtype) in expected_arrays.items():
            entry = manifest.get(name)
            if (
                entry is None
                or entry["dtype"] != dtype
                or (shape is not None and tuple(entry["shape"]) != shape)
            ):
                raise DatasetIntegrityError(
                    f"{directory}: array {name!r} of the stored layout is missing from the "
                    f"manifest or not {shape} {dtype} (altered layout)"
                )
        arrays = _check_group_files(group, directory, manifest, write_id, self._reopened)
        self._arrays.update({(directory, name): array for name, array in arrays.items()})
        stored = _StoredLayout(
            group=group,
            directory=directory,
            tile_crc32=self._read("tile_crc32", group=group, where=directory),
            tile_chunks=self._read("tile_chunks", group=group, where=directory),
            tile_blocks=self._read("tile_blocks", group=group, where=directory),
        )
        for name, offsets in (("chunk_ptr", stored.tile_chunks), ("block_ptr", stored.tile_blocks)):
            length = manifest[name]["shape"][0]
            if offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != length:
                raise DatasetIntegrityError(
                    f"{directory}: array {name!r} of the stored layout disagrees with its "
                    "tile offsets (altered layout)"
                )
        return stored, None


class _StoredLayout(NamedTuple):
    """A usable stored layout of a grid: its group and per-tile tables."""

    group: object
    directory: str
    tile_crc32: np.ndarray
    tile_chunks: np.ndarray
    tile_blocks: np.ndarray


def _open_layout_group(directory):
    """The zarr group of a stored layout and its manifest."""
    try:
        group = _format.open_group_readonly(directory)
        manifest = dict(group.attrs["manifest"])
    except Exception as exc:
        raise DatasetIntegrityError(f"{directory}: unreadable stored layout ({exc})") from None
    return group, manifest


_LAYOUT_WARNED: set = set()
_LAYOUT_WARNED_LOCK = threading.Lock()


def _warn_layout_once(directory, reason) -> None:
    """Say once per process that a stored layout is not used, and why."""
    with _LAYOUT_WARNED_LOCK:
        if (directory, reason) in _LAYOUT_WARNED:
            return
        _LAYOUT_WARNED.add((directory, reason))
    warnings.warn(
        f"{directory}: stored DSO tile layout not used, {reason}; the layout is built at run "
        "time instead (store it again: daskpd.dataset.write_layouts(..., overwrite=True))",
        UserWarning,
        stacklevel=4,
    )


def _check_group_files(group, directory, manifest, write_id, reopened) -> dict:
    """Fast checks of every array of a group against its manifest (shape, dtype, files).

    Returns the checked zarr arrays by name.

    An explicit open lists the chunk files of every array (count and total size). Listing is
    cheap but not free on a terascale store, and Dask tasks reopen the dataset (unpickling) for
    every block: a reopen lists each (write, directory state) once per process. Deleted or
    added chunk files change the array directory's mtime and so trigger a new listing; altered
    or truncated bytes are caught by the per-chunk CRC32C whenever they are read.
    """
    mtimes = []
    for name in sorted(manifest):
        if _format.is_url(directory):
            # object stores keep no directory mtimes: a process lists a write's files once
            mtimes.append(None)
            continue
        try:
            mtimes.append(os.stat(os.path.join(directory, name)).st_mtime_ns)
        except FileNotFoundError:
            raise DatasetIntegrityError(f"{directory}: array {name!r} is missing") from None
    key = (directory, write_id, tuple(mtimes))
    check_files = not reopened or key not in _FILES_CHECKED
    arrays = {}
    for name, entry in manifest.items():
        arrays[name] = _format.check_array(
            group, name, entry, os.path.join(directory, name), directory, files=check_files
        )
    _FILES_CHECKED.add(key)
    return arrays


def _verify_arrays(group, directory, manifest) -> None:
    for name, entry in manifest.items():
        _format.check_array(group, name, entry, os.path.join(directory, name), directory, True)
        if entry["crc32"] is None:  # checked tile by tile
            continue
        try:
            crc = _format.logical_crc32(group[name])
        except Exception as exc:
            raise DatasetIntegrityError(
                f"{directory}: array {name!r} cannot be read back ({type(exc).__name__}: {exc})"
            ) from None
        if crc != entry["crc32"]:
            raise DatasetIntegrityError(
                f"{directory}: array {name!r} checksum differs from the manifest (altered data)"
            )


def _reopen(path, write_id=None, storage_options=None) -> Dataset:
    """The handle of a dataset that was pickled (in a Dask task, on a worker).

    Handles are shared per process while the dataset's metadata file is unchanged. A dataset
    replaced since it was pickled (another ``write_id``) is an error: the task was built for
    the old data. A dataset at a URL is opened again at that URL: every worker must reach it.
    """
    stamp = _stamp(path, storage_options)
    key = path
    if storage_options is not None:
        from dask.base import tokenize

        key = (path, tokenize(storage_options))
    with _OPEN_LOCK:
        cached = _OPEN_HANDLES.get(key)
    if cached is not None and stamp is not None and cached[0] == stamp:
        handle = cached[1]
    else:
        handle = Dataset(path, storage_options=storage_options, _reopened=True)
        with _OPEN_LOCK:
            _OPEN_HANDLES[key] = (stamp, handle)
    if write_id is not None and handle._write_id != write_id:
        raise DatasetIntegrityError(
            f"{path}: the dataset was rewritten after this task was created (write id "
            f"{handle._write_id}, expected {write_id}); start the run again"
        )
    return handle


def open_dataset(path, *, verify=False, storage_options=None) -> Dataset:
    """Open a stored dataset read-only.

    Parameters
    ----------
    path : str or os.PathLike
        Dataset directory written by :func:`write_dataset` or :class:`DatasetWriter`, or its
        URL: ``s3://bucket/train.zarr``, ``gs://...``, ``http(s)://...``, ``file:///...`` or
        any protocol fsspec knows (its package installed: ``s3fs``, ``gcsfs``; ``aiohttp``
        for HTTP), read through zarr's ``FsspecStore``. Dask workers open the same URL
        to read their row blocks, so every worker must reach it. Datasets are written
        locally (or on a shared file system) and copied to object storage as they are:
        :func:`write_dataset` and :func:`partition_dataset` do not write to URLs, and DSO's
        grids are not read through URLs (DSO needs the dataset on a shared path). The open
        checks every chunk file the manifest lists (one listing, or one request per file
        over HTTP, whose listings carry no sizes).
    verify : bool, default=False
        Re-read every array and compare checksums (slow: reads the whole dataset).
    storage_options : dict, optional
        Options of the URL's fsspec file system (credentials, endpoint, ``anon``...), passed
        on to the workers with the tasks. Only for URLs.

    Returns
    -------
    Dataset

    Raises
    ------
    FileNotFoundError
        When there is no dataset at ``path``.
    ValueError
        When the URL's protocol is unknown to fsspec or its package is not installed.
    OSError
        When the store at the URL cannot be reached.
    """
    return Dataset(path, verify=verify, storage_options=storage_options)


# --------------------------------------------------------------------------------------------
# writing


class DatasetWriter:
    """Stream rows into a new dataset, in bounded memory, atomically.

    Rows are appended in any number of calls; the writer keeps at most one chunk per array in
    memory (plus the per-column counts, ``n_features`` int64) and cuts row blocks itself. Data
    goes to ``<path>.tmp-<uuid>``; :meth:`close` writes the statistics and the manifest and
    renames it to ``path``. As a context manager it commits on normal exit and aborts (removes
    the temporary directory) on an exception.

    Parameters
    ----------
    path : str or os.PathLike
        Destination directory; must not exist unless ``overwrite=True``.
    n_features : int
        Number of columns.
    binary : bool, default=False
        Features are 0/1: stored without values (appending any other value is an error).
    dtype : {numpy.float32, numpy.float64}, default=numpy.float64
        Dtype of stored values.
    task : {"binary", "regression"} or None, default=None
        "binary" requires labels in {-1, +1}; None infers it at close ("binary" when every
        label is -1 or +1).
    layout : {"csr", "dense"}, default="csr"
    rows_per_block : int, optional
        Rows per row block.
    block_nnz : int, optional
        Target stored entries per row block (default :data:`DEFAULT_BLOCK_NNZ` when
        ``rows_per_block`` is not given). A block ends at whichever limit comes first.
    overwrite : bool, default=False
        Replace an existing dataset at ``path`` (atomically, at close).
    chunk_bytes : int, default=4 MiB
        Uncompressed bytes per chunk.

    Raises
    ------
    FileExistsError
        When ``path`` exists and ``overwrite`` is False.
    """

    def __init__(
        self,
        path,
        n_features,
        *,
        binary=False,
        dtype=np.float64,
        task=None,
        layout="csr",
        rows_per_block=None,
        block_nnz=None,
        overwrite=False,
        chunk_bytes=_format.CHUNK_BYTES,
    ):
        self.path = _normalize_path(path)
        if _format.is_url(self.path):
            raise ValueError(
                f"{self.path}: datasets are written to a local or shared directory (the "
                "temporary-name-and-rename commit needs a file system); copy it to object "
                "storage afterwards and open the URL"
            )
        n_features = int(n_features)
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        if n_features > np.iinfo(np.int32).max:
            raise ValueError(f"n_features must fit int32 column ids, got {n_features}")
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if task is not None and task not in TASKS:
            raise ValueError(f"task must be one of {TASKS} or None, got {task!r}")
        if layout == "dense" and binary:
            raise ValueError("binary=True needs layout='csr' (dense data stores every value)")
        if int(chunk_bytes) < 8:
            raise ValueError(f"chunk_bytes must be >= 8, got {chunk_bytes}")
        if os.path.exists(self.path) and not overwrite:
            raise FileExistsError(
                f"{self.path} already exists; pass overwrite=True (--overwrite) to replace it"
            )
        self.n_features = n_features
        self.binary = bool(binary)
        self.task = task
        self.layout = layout
        self.overwrite = bool(overwrite)
        self.chunk_bytes = int(chunk_bytes)
        self._max_rows, self._max_nnz = block_limits(rows_per_block, block_nnz, layout, n_features)

        self.n_samples = 0
        self.nnz = 0
        self._block_rows = 0
        self._block_nnz = 0
        self._cuts = [np.zeros(1, dtype=np.int64)]
        self._col_nnz = np.zeros(n_features, dtype=np.int64)
        self._n_negative = 0
        self._n_positive = 0
        self._n_other = 0
        self._has_weight = None
        self._closed = False

        parent = os.path.dirname(self.path)
        os.makedirs(parent, exist_ok=True)
        self.temporary_path = _format.temporary_sibling(self.path)
        try:
            self._group = zarr.open_group(self.temporary_path, mode="w-", zarr_format=3)
            self._appenders = {}
            if layout == "csr":
                self._add("indptr", np.int64)
                self._appenders["indptr"].append(np.zeros(1, dtype=np.int64))
                self._add("indices", np.int32)
                if not self.binary:
                    self._add("data", self.dtype)
            else:
                array = _format.create_dense(self._group, "X", n_features, self.dtype, chunk_bytes)
                self._appenders["X"] = _format.Appender(array)
            for name, dtype in (
                ("y", np.float64),
                ("row_nnz", np.int64),
                ("row_norm_sq", np.float64),
            ):
                self._add(name, dtype)
        except BaseException:
            _format.remove_tree(self.temporary_path)
            raise

    def _add(self, name, dtype):
        array = _format.create_1d(self._group, name, dtype, self.chunk_bytes)
        self._appenders[name] = _format.Appender(array)

    # ---- context manager

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            if not self._closed:
                self.close()
        else:
            self.abort()
        return False

    # ---- appending

    def append(self, X_rows, y_rows, sample_weight=None) -> None:
        """Append rows.

        Parameters
        ----------
        X_rows : scipy.sparse matrix or ndarray of shape (n_rows, n_features)
            Sparse rows must be canonical (sorted, no duplicate column ids).
        y_rows : array-like of shape (n_rows,)
        sample_weight : array-like of shape (n_rows,), optional
            Given for every append or for none.

        Raises
        ------
        ValueError
            Naming the (global) row of any invalid value; nothing is appended then.
        """
        if self._closed:
            raise ValueError(f"the writer of {self.path} is closed")
        n_rows = X_rows.shape[0] if hasattr(X_rows, "shape") else len(X_rows)
        first_row = self.n_samples
        y_rows = check_labels(y_rows, n_rows, first_row, self.task)
        has_weight = sample_weight is not None
        if self._has_weight is not None and has_weight != self._has_weight:
            raise ValueError(
                "sample_weight must be given for every append or for none "
                f"(rows from {first_row} {'have' if has_weight else 'lack'} it)"
            )
        if has_weight:
            sample_weight = check_weights(sample_weight, n_rows, first_row)
        is_negative = y_rows == -1.0
        is_positive = y_rows == 1.0

        if self.layout == "csr":
            indptr, indices, data = csr_chunk(
                X_rows, self.n_features, self.binary, self.dtype, first_row
            )
            row_nnz, row_norm_sq = csr_row_stats(indptr, data)
            kernels.add_column_counts(self._col_nnz, indices)
            offset = self.nnz
            self._appenders["indptr"].append(indptr[1:] + offset)
            self._appenders["indices"].append(indices)
            if not self.binary:
                self._appenders["data"].append(data)
            chunk_nnz = int(indptr[-1])
        else:
            block = dense_chunk(X_rows, self.n_features, self.dtype, first_row)
            row_nnz, row_norm_sq, col_nnz = dense_stats(block)
            self._col_nnz += col_nnz
            self._appenders["X"].append(block)
            chunk_nnz = int(row_nnz.sum())

        cuts, self._block_rows, self._block_nnz = kernels.cut_row_blocks(
            row_nnz, self._block_rows, self._block_nnz, self._max_rows, self._max_nnz
        )
        self._cuts.append(cuts + first_row)
        self._appenders["y"].append(y_rows)
        self._appenders["row_nnz"].append(row_nnz)
        self._appenders["row_norm_sq"].append(row_norm_sq)
        if has_weight:
            if self._has_weight is None:
                self._add("sample_weight", np.float64)
            self._appenders["sample_weight"].append(sample_weight)
        self._has_weight = has_weight
        self._n_negative += int(np.count_nonzero(is_negative))
        self._n_positive += int(np.count_nonzero(is_positive))
        self._n_other += n_rows - int(np.count_nonzero(is_negative | is_positive))
        self.n_samples += n_rows
        self.nnz += chunk_nnz

    # ---- closing

    def abort(self) -> None:
        """Discard everything written; nothing appears at ``path``."""
        self._closed = True
        _format.remove_tree(self.temporary_path)

    def close(self) -> Dataset:
        """Write statistics and manifest, rename into place and return the opened dataset.

        Raises
        ------
        ValueError
            When no row was appended (the writer is aborted).
        FileExistsError
            When ``path`` appeared meanwhile and ``overwrite`` is False (the writer is aborted).
        """
        if self._closed:
            raise ValueError(f"the writer of {self.path} is already closed")
        try:
            return self._commit()
        except BaseException:
            self.abort()
            raise

    def _commit(self) -> Dataset:
        if self.n_samples == 0:
            raise ValueError(f"no rows were written; nothing created at {self.path}")
        task, label_counts = task_and_counts(
            self.task, self._n_negative, self._n_positive, self._n_other
        )
        bounds = np.concatenate([*self._cuts, np.array([self.n_samples], dtype=np.int64)])
        for name, values in (("col_nnz", self._col_nnz), ("row_block_bounds", bounds)):
            self._add(name, np.int64)
            self._appenders[name].append(values)
        manifest = {}
        for name, appender in self._appenders.items():
            appender.finish()
            manifest[name] = _format.manifest_entry(
                appender.array, os.path.join(self.temporary_path, name), appender.crc32
            )
        self._group.attrs.update(
            {
                "format_version": FORMAT_VERSION,
                "shape": [self.n_samples, self.n_features],
                "nnz": int(self.nnz),
                "binary": self.binary,
                "layout": self.layout,
                "task": task,
                "label_counts": label_counts,
                "dtype": self.dtype.name,
                "has_sample_weight": bool(self._has_weight),
                "n_row_blocks": int(bounds.shape[0] - 1),
                "write_id": uuid.uuid4().hex,
                "manifest": manifest,
            }
        )
        _publish(self.temporary_path, self.path, self.overwrite)
        self._closed = True
        return open_dataset(self.path)


def _publish(temporary, path, overwrite):
    """Rename a complete temporary directory to ``path`` (replacing it only if allowed)."""
    if os.path.exists(path):
        if not overwrite:
            raise FileExistsError(
                f"{path} already exists; pass overwrite=True (--overwrite) to replace it"
            )
        # Move the old dataset aside first: both renames are atomic, so a reader sees the old
        # dataset, or no dataset for an instant, or the new one, never a mixture.
        old = _format.temporary_sibling(path, "old")
        os.rename(path, old)
        os.rename(temporary, path)
        _format.remove_tree(old)
    else:
        os.rename(temporary, path)


def _iter_row_chunks(X, y, sample_weight, rows_per_chunk):
    """Yield ``(X_rows, y_rows, weight_rows)`` in row order; Dask arrays chunk by chunk."""
    if _is_dask_array(X):
        X = X.rechunk({1: -1}) if len(X.chunks) == 2 else X
        start = 0
        for size in X.chunks[0]:
            stop = start + size
            yield (
                X[start:stop].compute(),
                _compute_slice(y, start, stop),
                None if sample_weight is None else _compute_slice(sample_weight, start, stop),
            )
            start = stop
        return
    n_rows = X.shape[0]
    for start in range(0, n_rows, rows_per_chunk):
        stop = min(start + rows_per_chunk, n_rows)
        yield (
            X[start:stop],
            _compute_slice(y, start, stop),
            None if sample_weight is None else _compute_slice(sample_weight, start, stop),
        )


def _is_dask_array(value) -> bool:
    return type(value).__module__.startswith("dask.") and hasattr(value, "chunks")


def _compute_slice(values, start, stop):
    piece = values[start:stop]
    return piece.compute() if _is_dask_array(piece) else np.asarray(piece)


def write_dataset(
    X,
    y,
    path,
    *,
    sample_weight=None,
    rows_per_block=None,
    block_nnz=None,
    dtype=None,
    binary=None,
    task=None,
    layout=None,
    overwrite=False,
    chunk_bytes=_format.CHUNK_BYTES,
) -> Dataset:
    """Write a matrix and its labels as a dataset.

    Parameters
    ----------
    X : ndarray, scipy.sparse matrix or dask.array.Array of shape (n_samples, n_features)
        Dask arrays (of ndarray or scipy.sparse chunks) are computed one row chunk at a time.
    y : array-like or dask.array.Array of shape (n_samples,)
    path : str or os.PathLike
        Destination directory.
    sample_weight : array-like of shape (n_samples,), optional
    rows_per_block, block_nnz : int, optional
        Row-block limits (see :class:`DatasetWriter`).
    dtype : {numpy.float32, numpy.float64}, optional
        Stored value dtype; default: float32 for float32 input, else float64.
    binary : bool, optional
        Store without values; default: True when every stored value of a sparse ``X`` is 1.
    task : {"binary", "regression"}, optional
        Default: inferred from the labels.
    layout : {"csr", "dense"}, optional
        Default: "dense" for ndarray input (or Dask arrays of ndarrays), "csr" for sparse input.
    overwrite : bool, default=False
    chunk_bytes : int, default=4 MiB

    Returns
    -------
    Dataset
    """
    if len(getattr(X, "shape", ())) != 2:
        raise ValueError(f"X must be 2-D, got shape {getattr(X, 'shape', None)}")
    n_samples, n_features = (int(s) for s in X.shape)
    if y is None:
        raise ValueError("y is required (use as_dataset(X) for unlabeled in-memory data)")
    if len(y) != n_samples:
        raise ValueError(f"y has {len(y)} entries, X has {n_samples} rows")
    if sample_weight is not None and len(sample_weight) != n_samples:
        raise ValueError(f"sample_weight has {len(sample_weight)} entries, X has {n_samples} rows")
    if _is_dask_array(X):
        chunk_is_sparse = sp.issparse(getattr(X, "_meta", None))
    else:
        chunk_is_sparse = sp.issparse(X)
        if chunk_is_sparse:
            X = sp.csr_matrix(X)
            if not X.has_canonical_format:
                X = X.copy()
                X.sum_duplicates()
        else:
            X = np.asarray(X)
    if layout is None:
        layout = "csr" if chunk_is_sparse else "dense"
    if dtype is None:
        dtype = np.float32 if np.dtype(X.dtype) == np.float32 else np.float64
    if binary is None:
        binary = False
        if layout == "csr" and chunk_is_sparse and not _is_dask_array(X):
            binary = bool(X.nnz > 0 and np.all(X.data == 1))
    # In-memory input is fed to the writer in slices of about 16 chunks, so the converted
    # copies made by `append` stay small.
    if hasattr(X, "nnz"):
        row_bytes = 12 * max(1, X.nnz // max(1, n_samples))
    else:
        row_bytes = 8 * n_features
    rows_per_chunk = max(1, 16 * int(chunk_bytes) // row_bytes)
    with DatasetWriter(
        path,
        n_features,
        binary=binary,
        dtype=dtype,
        task=task,
        layout=layout,
        rows_per_block=rows_per_block,
        block_nnz=block_nnz,
        overwrite=overwrite,
        chunk_bytes=chunk_bytes,
    ) as writer:
        for X_rows, y_rows, weight_rows in _iter_row_chunks(X, y, sample_weight, rows_per_chunk):
            writer.append(X_rows, y_rows, weight_rows)
        return writer.close()


# --------------------------------------------------------------------------------------------
# tiled layout


def partition_dataset(
    path,
    grid,
    *,
    overwrite=False,
    memory_budget=256 * 2**20,
    chunk_bytes=_format.CHUNK_BYTES,
    client=None,
    layouts=DEFAULT_LAYOUTS,
) -> Dataset:
    """Derive and store the tiled layout of a ``grid`` x ``grid`` grid (subgroup ``grids/P``).

    Streams the row blocks twice (count per tile, then place) and never holds more than one
    row block plus one write buffer per tile of the current row group. The grid is written to a
    temporary subgroup and renamed when complete. With a Dask ``client``, each pass runs one
    task per row group on the workers (each task holds the memory above; the few chunks shared
    by two row groups are written under a ``distributed.Lock``); the result is identical.

    The grid's DSO tile layouts (``layouts``, see :func:`write_layouts`) are then built from
    the new tiles and stored in the temporary subgroup too, so the grid appears with them.

    Parameters
    ----------
    path : str, os.PathLike or Dataset
        An on-disk dataset.
    grid : int
        P >= 1.
    overwrite : bool, default=False
        Replace an existing grid of the same size.
    memory_budget : int, default=256 MiB
        Bytes for the per-tile write buffers of one row group (larger buffers mean fewer
        partial-chunk rewrites).
    chunk_bytes : int, default=4 MiB
        Uncompressed bytes per chunk of the tile arrays.
    client : distributed.Client, optional
        Run the two passes as tasks on this client's workers (which must see ``path``).
    layouts : sequence of TileLayout, default=DEFAULT_LAYOUTS
        DSO tile layouts to store with the grid (see :func:`write_layouts`); by default those
        of DSO's default options from zero and from a start (``TileLayout.for_dso()`` and
        ``TileLayout.for_dso(svrg=True)``). Each takes about twice the grid's space on disk
        (its shuffled entries compress less well: 36 MB against the grid's 19 MB on binary
        splice-like data of 1e7 nonzeros) and adds about a quarter of the grid's time to
        the partition. ``()``: none (DSO then builds its layout in the first epoch of every
        run).

    Returns
    -------
    Dataset
        The dataset, reopened, with ``grid`` in :attr:`Dataset.grids`.

    Raises
    ------
    FileExistsError
        When the grid exists and ``overwrite`` is False.
    """
    layouts = _layout.check_layouts(layouts)
    if isinstance(path, BaseDataset) and not isinstance(path, Dataset):
        raise TypeError(
            f"partition_dataset needs an on-disk dataset, got {path!r}; in-memory datasets "
            "have .partition(grid)"
        )
    dataset = path if isinstance(path, Dataset) else open_dataset(path)
    if _format.is_url(dataset.path):
        raise ValueError(
            f"{dataset.path}: grids are written to and read from a local or shared directory, "
            "not a URL; partition a copy there"
        )
    n_blocks = _check_grid(grid)
    if int(memory_budget) < 1:
        raise ValueError(f"memory_budget must be >= 1 byte, got {memory_budget}")
    grids_directory = os.path.join(dataset.path, "grids")
    target = os.path.join(grids_directory, str(n_blocks))
    if os.path.exists(target) and not overwrite:
        raise FileExistsError(
            f"{target} already exists; pass overwrite=True (--overwrite) to rebuild it"
        )
    zarr.open_group(grids_directory, mode="a", zarr_format=3)
    temporary = os.path.join(grids_directory, f".tmp-{n_blocks}-{uuid.uuid4().hex}")
    try:
        group = zarr.open_group(temporary, mode="w-", zarr_format=3)
        entry_bytes = 8 + (0 if dataset.binary else dataset.dtype.itemsize)
        buffer_entries = int(memory_budget) // (n_blocks * entry_bytes)
        buffer_entries = max(1024, min(buffer_entries, _format.chunk_length(4, chunk_bytes)))
        sink = ZarrSink.create(
            group,
            dataset.nnz,
            None if dataset.binary else dataset.dtype,
            buffer_entries,
            chunk_bytes,
        )
        if client is None:
            info = build_grid(dataset, n_blocks, sink)
        else:
            info = _partition_on_client(client, dataset, n_blocks, temporary, sink)
        manifest = sink.finish(temporary)
        for name in ("row_bounds", "col_bounds", "tile_ptr", "col_order"):
            array, crc = _format.write_small(group, name, getattr(info, name))
            manifest[name] = _format.manifest_entry(array, os.path.join(temporary, name), crc)
        write_id = uuid.uuid4().hex
        group.attrs.update(
            {
                "format_version": FORMAT_VERSION,
                "grid": n_blocks,
                "nnz": int(dataset.nnz),
                "binary": bool(dataset.binary),
                "dataset_write_id": dataset._write_id,
                "write_id": write_id,
                "manifest": manifest,
            }
        )
        grid_crc = sink.crc.reshape(-1, len(TILE_ARRAYS))
        for layout in layouts:
            _store_layout(
                dataset, temporary, info, grid_crc, write_id, layout, chunk_bytes, False, client
            )
        try:
            _publish(temporary, target, overwrite)
        except OSError as exc:
            if os.path.exists(target) and not overwrite:
                raise FileExistsError(f"{target} was created meanwhile ({exc})") from None
            raise
    except BaseException:
        _format.remove_tree(temporary)
        raise
    return open_dataset(dataset.path)


def write_layouts(
    path,
    grid,
    layouts=DEFAULT_LAYOUTS,
    *,
    overwrite=False,
    chunk_bytes=_format.CHUNK_BYTES,
    client=None,
) -> Dataset:
    """Build DSO's tile layouts of a stored grid and store them (``grids/P/layouts/<name>``).

    DSO's default ``visit_order="shuffled"`` visits each tile in a layout built from it: its
    nonzeros regrouped by column sub-block, shuffled inside each sub-block by a function of
    the tile's place in the grid, and cut into chunks (:mod:`daskpd._layout`). A run whose
    options give a stored :class:`TileLayout` reads it instead of building it in its first
    epoch; the bits are the same. :func:`partition_dataset` stores ``layouts`` already; this
    adds layouts to a grid stored before, or for other DSO options
    (``TileLayout.for_dso(block_bytes=..., chunk_nnz=..., svrg=...)``).

    Each layout is built tile by tile from the grid (each tile checked against the grid's
    ``tile_crc32`` first), written to a temporary subgroup and renamed when complete; it
    records the grid's ``write_id``, so that a grid stored again makes it stale.

    Parameters
    ----------
    path : str, os.PathLike or Dataset
        An on-disk dataset with the grid ``grid``.
    grid : int
    layouts : sequence of TileLayout, default=DEFAULT_LAYOUTS
    overwrite : bool, default=False
        Replace stored layouts of the same name.
    chunk_bytes : int, default=4 MiB
        Uncompressed bytes per chunk of the layout's arrays.
    client : distributed.Client, optional
        Build the layouts of each row group as a task on this client's workers (which must
        see ``path``); the result is identical.

    Returns
    -------
    Dataset
        The dataset, reopened.

    Raises
    ------
    FileExistsError
        When a layout is stored already and ``overwrite`` is False.
    KeyError
        When the dataset has no grid ``grid``.
    """
    dataset = path if isinstance(path, Dataset) else open_dataset(path)
    n_blocks = _check_grid(grid)
    layouts = _layout.check_layouts(layouts)
    info = dataset.grid(n_blocks)
    group, directory, attrs = dataset._grid_group(n_blocks)
    grid_crc = dataset._read("tile_crc32", group=group, where=directory)
    for layout in layouts:
        _store_layout(
            dataset, directory, info, grid_crc, str(attrs["write_id"]), layout, chunk_bytes,
            overwrite, client,
        )  # fmt: skip
    return open_dataset(dataset.path)


def _store_layout(
    dataset, grid_directory, info, grid_crc, grid_write_id, layout, chunk_bytes, overwrite, client
):  # fmt: skip
    """Build ``layout`` from the grid in ``grid_directory`` and store it there, atomically.

    Holds one tile and its layout at a time (per task with a ``client``), and the per-tile
    sub-block and chunk offsets, a few bytes per ``chunk_nnz`` nonzeros.
    """
    n_blocks = info.n_blocks
    binary = bool(dataset.binary)
    layouts_directory = os.path.join(grid_directory, "layouts")
    target = os.path.join(layouts_directory, layout.name)
    if os.path.exists(target) and not overwrite:
        raise FileExistsError(
            f"{target} already exists; pass overwrite=True to store the layout again"
        )
    zarr.open_group(layouts_directory, mode="a", zarr_format=3)
    temporary = os.path.join(layouts_directory, f".tmp-{layout.name}-{uuid.uuid4().hex}")
    try:
        group = zarr.open_group(temporary, mode="w-", zarr_format=3)
        # a tile's layout arrives whole: write it at once rather than hold it in a buffer
        sink = ZarrSink.create(
            group, dataset.nnz, None if binary else dataset.dtype, 1, chunk_bytes
        )
        sink.start(info)
        if client is None:
            arrays = _layout.open_tile_arrays(grid_directory, binary)
            groups = (
                _layout.layout_group(
                    arrays, grid_directory, info, grid_crc, binary, layout, q, sink
                )
                for q in range(n_blocks)
            )
        else:
            groups = _layouts_on_client(
                client, grid_directory, temporary, info, grid_crc, binary, layout
            )
        pointers = {
            name: _format.Appender(_format.create_1d(group, name, np.int64, chunk_bytes))
            for name in ("chunk_ptr", "block_ptr")
        }
        offsets = {name: np.zeros(n_blocks * n_blocks + 1, dtype=np.int64) for name in pointers}
        table = np.zeros((n_blocks * n_blocks, len(LAYOUT_ARRAYS)), dtype=np.int64)
        for q, (crc, *tile_pointers) in enumerate(groups):
            table[q * n_blocks : (q + 1) * n_blocks, : len(TILE_ARRAYS)] = crc
            for name, per_tile in zip(pointers, tile_pointers, strict=True):
                column = LAYOUT_ARRAYS.index(name)
                for r, values in enumerate(per_tile):
                    tile = q * n_blocks + r
                    pointers[name].append(values)
                    offsets[name][tile + 1] = offsets[name][tile] + values.shape[0]
                    table[tile, column] = _layout.crc32(values)
        manifest = {}
        for name, array in sink.arrays.items():
            manifest[name] = _format.manifest_entry(array, os.path.join(temporary, name), None)
        for name, appender in pointers.items():
            appender.finish()
            manifest[name] = _format.manifest_entry(
                appender.array, os.path.join(temporary, name), None
            )
        for name, values in (
            ("tile_crc32", table),
            ("tile_chunks", offsets["chunk_ptr"]),
            ("tile_blocks", offsets["block_ptr"]),
        ):
            array, crc = _format.write_small(group, name, values)
            manifest[name] = _format.manifest_entry(array, os.path.join(temporary, name), crc)
        group.attrs.update(
            {
                "format_version": FORMAT_VERSION,
                "grid": n_blocks,
                "layout": layout.name,
                **layout.attributes(),
                "nnz": int(dataset.nnz),
                "binary": binary,
                "dataset_write_id": dataset._write_id,
                "grid_write_id": grid_write_id,
                "write_id": uuid.uuid4().hex,
                "manifest": manifest,
            }
        )
        _publish(temporary, target, overwrite)
    except BaseException:
        _format.remove_tree(temporary)
        raise


def _layouts_on_client(client, grid_directory, temporary, info, grid_crc, binary, layout):
    """Yield each row group's ``(crc, chunk_ptrs, block_ptrs)``, built by a task on a worker."""
    lock_prefix = f"daskpd-layout-{uuid.uuid4().hex}"
    futures = [
        client.submit(
            _layout_group_task,
            grid_directory,
            temporary,
            info,
            grid_crc,
            binary,
            layout,
            q,
            lock_prefix,
            pure=False,
        )  # fmt: skip
        for q in range(info.n_blocks)
    ]
    for k, future in enumerate(futures):
        # in row-group order (the offsets are appended in that order), releasing as we go
        yield future.result()
        futures[k] = None


def _layout_group_task(grid_directory, temporary, info, grid_crc, binary, layout, q, lock_prefix):
    """Task: build and write the layouts of row group ``q``'s tiles (see layout_group)."""
    from distributed import Lock

    arrays = {
        name: array.with_config(_format.ARRAY_CONFIG)
        for name, array in _layout.open_tile_arrays(temporary, binary, mode="r+").items()
    }

    def lock(name, chunk):
        return Lock(f"{lock_prefix}-{name}-{chunk}")

    sink = ZarrSink(arrays, 1, lock=lock)
    sink.start(info)
    grid_arrays = _layout.open_tile_arrays(grid_directory, binary)
    return _layout.layout_group(
        grid_arrays, grid_directory, info, grid_crc, binary, layout, q, sink
    )


def _partition_on_client(client, dataset, n_blocks, temporary, sink):
    """Both partition passes as one task per row group; fills ``sink``'s CRC table."""
    row_bounds, col_bounds, col_order, pieces = grid_bounds(dataset, n_blocks)
    groups = pieces_by_group(pieces, n_blocks)
    [position] = client.scatter([inverse_order(col_order)], broadcast=True)
    counts = client.gather(
        [
            client.submit(count_group, dataset, group, col_bounds, position, pure=False)
            for group in groups
        ]
    )
    info = grid_info(row_bounds, col_bounds, col_order, np.stack(counts), int(dataset.nnz), dataset)
    lock_prefix = f"daskpd-partition-{uuid.uuid4().hex}"
    crcs = client.gather(
        [
            client.submit(
                _place_group_task,
                dataset,
                temporary,
                q,
                group,
                info,
                sink.buffer_entries,
                lock_prefix,
                pure=False,
            )
            for q, group in enumerate(groups)
        ]
    )
    sink.start(info)
    sink.crc[...] = np.stack(crcs)
    return info


def _place_group_task(dataset, temporary, q, group, info, buffer_entries, lock_prefix):
    """Task: place the tiles of row group ``q``; return their CRC32s, (P, 3)."""
    from distributed import Lock

    arrays = {}
    for name in TILE_ARRAYS:
        directory = os.path.join(temporary, name)
        if os.path.isdir(directory):
            array = zarr.open_array(directory, mode="r+", zarr_format=3)
            arrays[name] = array.with_config(_format.ARRAY_CONFIG)

    def lock(name, chunk):
        return Lock(f"{lock_prefix}-{name}-{chunk}")

    sink = ZarrSink(arrays, buffer_entries, lock=lock)
    sink.start(info)
    place_group(dataset, q, group, info, sink)
    return sink.crc[q]


# --------------------------------------------------------------------------------------------
# conversion


#: Dense Dask arrays up to this many bytes are computed into memory by :func:`as_dataset`.
IN_MEMORY_BYTES = 256 * 2**20


def as_dataset(X, y=None, sample_weight=None, *, temporary_dir=None, **options):
    """Turn any supported input into a dataset object.

    Parameters
    ----------
    X : BaseDataset, str, os.PathLike, ndarray, scipy.sparse matrix or dask.array.Array
        A dataset is returned as is (``y``/``sample_weight`` must then be None); a path is
        opened; NumPy and scipy.sparse input becomes a :class:`MemoryDataset`; a Dask array
        larger than :data:`IN_MEMORY_BYTES` (or of sparse chunks) is written chunk by chunk to a
        temporary on-disk dataset, removed when the returned object is garbage collected.
    y : array-like or dask.array.Array of shape (n_samples,), optional
    sample_weight : array-like of shape (n_samples,), optional
    temporary_dir : str, optional
        Where temporary datasets go (default: the system's temporary directory).
    **options
        Passed to :class:`MemoryDataset` or :func:`write_dataset` (``rows_per_block``,
        ``block_nnz``, ``dtype``, ``binary``, ``task``, ``layout``).

    Returns
    -------
    BaseDataset
    """
    if isinstance(X, BaseDataset):
        if y is not None or sample_weight is not None:
            raise ValueError(
                "y and sample_weight come from the dataset; do not pass them with a dataset"
            )
        return X
    if isinstance(X, (str, os.PathLike)):
        if y is not None or sample_weight is not None:
            raise ValueError("y and sample_weight come from the dataset at the given path")
        return open_dataset(X)
    if _is_dask_array(X):
        if len(X.shape) != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        sparse_chunks = sp.issparse(getattr(X, "_meta", None))
        if not sparse_chunks and X.nbytes <= IN_MEMORY_BYTES:
            return MemoryDataset(
                X.compute(),
                None if y is None else _compute_slice(y, 0, X.shape[0]),
                None if sample_weight is None else _compute_slice(sample_weight, 0, X.shape[0]),
                **options,
            )
        import tempfile
        import weakref

        directory = tempfile.mkdtemp(prefix="daskpd-", dir=temporary_dir)
        if y is None:
            y = np.zeros(X.shape[0])
        dataset = write_dataset(
            X, y, os.path.join(directory, "data.zarr"), sample_weight=sample_weight, **options
        )
        weakref.finalize(dataset, _format.remove_tree, directory)
        return dataset
    return MemoryDataset(X, y, sample_weight, **options)
