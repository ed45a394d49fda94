"""The on-disk dataset: a read-only handle on a dataset stored in the daskpd zarr format.

:func:`open_dataset` checks the attributes and the chunk files against the manifest (format in
the docstring of :mod:`daskpd.data.format`); :meth:`Dataset.verify` re-reads everything. A
handle pickles as its path (or URL), and Dask tasks reopen it on the workers, once per process.
"""

from __future__ import annotations

import os
import threading
from functools import cached_property

import numpy as np

from daskpd.data.base import BaseDataset
from daskpd.data.format import (
    GRID_FORMAT_VERSION,
    READABLE_FORMAT_VERSIONS,
    DatasetIntegrityError,
    check_group_files,
    verify_arrays,
)
from daskpd.data.grid import TILE_ARRAYS, GridInfo
from daskpd.data.layout import crc32
from daskpd.data.layout_reader import StoredLayoutsMixin, open_layout_group
from daskpd.data.store import (
    check_storage_options,
    group_stamp,
    is_url,
    normalize_path,
    open_group_readonly,
    remote_exists,
)
from daskpd.data.validation import dense_to_csr

# dask (0.3 s to import, measured here) only when a handle is unpickled on a worker, where
# it is loaded already: opening a dataset does not import it.

# One handle per dataset and process for unpickled datasets: every Dask task that reads the
# dataset shares it (and its grid tables, n_features int64 for the column order). A handle per
# task would also live as long as the worker remembers the task, which made DSO's workers grow
# by a column order per tile read (1.2 GB an epoch at 5e8 nonzeros).
_OPEN_LOCK = threading.Lock()
_OPEN_HANDLES: dict = {}


def _whole_array(name, doc):
    """A cached property of :class:`Dataset`: the stored array ``name``, read whole once."""

    def read(self) -> np.ndarray:
        return self._read(name)

    read.__doc__ = doc
    return cached_property(read)


class Dataset(StoredLayoutsMixin, BaseDataset):
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
        When ``path`` is not a daskpd dataset (a file, say), or is truncated or altered.
    """

    def __init__(self, path, *, verify=False, storage_options=None, _reopened=False):
        self.path = normalize_path(path)
        self._storage_options = check_storage_options(self.path, storage_options)
        self._reopened = bool(_reopened)
        if is_url(self.path):
            found = remote_exists(self.path, self._storage_options)
        else:
            found = os.path.isdir(self.path)
        if not found:
            if not is_url(self.path) and os.path.exists(self.path):
                raise DatasetIntegrityError(
                    f"{self.path}: not a daskpd store (a file; a daskpd dataset is a zarr "
                    "directory)"
                )
            raise FileNotFoundError(f"no dataset at {self.path}")
        try:
            self._group = open_group_readonly(self.path, self._storage_options)
            attrs = dict(self._group.attrs)
        except Exception as exc:
            raise DatasetIntegrityError(
                f"{self.path}: not a readable daskpd dataset (zarr group metadata: {exc})"
            ) from None
        version = attrs.get("format_version")
        if version not in READABLE_FORMAT_VERSIONS:
            raise DatasetIntegrityError(
                f"{self.path}: format_version is {version!r}, this daskpd reads "
                f"{', '.join(str(known) for known in READABLE_FORMAT_VERSIONS)}"
            )
        self._format_version = int(version)
        try:
            self.shape = (int(attrs["shape"][0]), int(attrs["shape"][1]))
            self.nnz = int(attrs["nnz"])
            self.binary = bool(attrs["binary"])
            self.layout = str(attrs["layout"])
            self.task = str(attrs["task"])
            self.label_counts = attrs["label_counts"]
            if self.task == "multiclass" and (
                self._format_version < 2
                or [int(label) for label in attrs["classes"]]
                != sorted(int(label) for label in self.label_counts)
            ):
                raise ValueError("the classes disagree with the label counts")
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
        arrays = check_group_files(
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
        verify_arrays(self._group, self.path, self._manifest)
        for n_blocks in self.grids:
            group, directory, attrs = self._grid_group(n_blocks)
            verify_arrays(group, directory, attrs["manifest"])
            tile_ptr = self._read("tile_ptr", group=group, where=directory)
            starts = tile_ptr[:, :-1].ravel()
            tiles = np.stack([starts, np.append(starts[1:], tile_ptr[-1, -1])], axis=1)
            table = self._read("tile_crc32", group=group, where=directory)
            ranges = dict.fromkeys(TILE_ARRAYS, tiles)
            self._verify_tiles(group, directory, attrs["manifest"], table, ranges, n_blocks)
            for name in self.layouts(n_blocks):
                where = os.path.join(directory, "layouts", name)
                layout_group, manifest = open_layout_group(where)
                verify_arrays(layout_group, where, manifest)
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
                if crc32(values) != table[tile, column]:
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
        """Version of the stored format (1 or 2; 2 added the task "multiclass")."""
        return self._format_version

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

    row_nnz = _whole_array("row_nnz", "Stored entries per row, int64 (n_samples,).")
    row_norm_sq = _whole_array("row_norm_sq", "Squared Euclidean row norms, float64 (n_samples,).")
    col_nnz = _whole_array("col_nnz", "Stored entries per column, int64 (n_features,).")
    y = _whole_array("y", "All labels, float64 (n_samples,).")

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
            group = open_group_readonly(directory)
            attrs = dict(group.attrs)
            attrs["manifest"] = dict(attrs["manifest"])
            write_id = str(attrs["write_id"])
            if (
                int(attrs["grid"]) != int(n_blocks)
                or attrs["format_version"] != GRID_FORMAT_VERSION
            ):
                raise ValueError("grid attributes disagree with the directory name")
            if attrs.get("dataset_write_id", self._write_id) != self._write_id:
                raise ValueError("the grid was derived from another write of the dataset")
        except Exception as exc:
            raise DatasetIntegrityError(f"{directory}: unreadable grid ({exc})") from None
        arrays = check_group_files(group, directory, attrs["manifest"], write_id, self._reopened)
        self._arrays.update({(directory, name): array for name, array in arrays.items()})
        return group, directory, attrs

    @cached_property
    def _grid_cache(self) -> dict:
        return {}

    def _grid_info(self, n_blocks):
        stamp = group_stamp(os.path.join(self.path, "grids", str(int(n_blocks))))
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


def _reopen(path, write_id=None, storage_options=None) -> Dataset:
    """The handle of a dataset that was pickled (in a Dask task, on a worker).

    Handles are shared per process while the dataset's metadata file is unchanged. A dataset
    replaced since it was pickled (another ``write_id``) is an error: the task was built for
    the old data. A dataset at a URL is opened again at that URL: every worker must reach it.
    """
    stamp = group_stamp(path, storage_options)
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
