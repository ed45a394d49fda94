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
    col_bounds  int64 (P + 1,)     column block r = columns [col_bounds[r], col_bounds[r+1])
    tile_ptr    int64 (P, P + 1)   tile (q, r) = [tile_ptr[q, r], tile_ptr[q, r+1]); rows of
                                   the grid are consecutive: tile_ptr[q, P] = tile_ptr[q+1, 0]
    rows        int32 (nnz,)       row id local to the row group
    cols        int32 (nnz,)       column id local to the column block
    vals        float (nnz,)       values; ABSENT when binary

Entries of a tile are sorted by (row, col). Row and column bounds balance nonzeros: bound k is
the first row (column) whose cumulative count reaches ceil(k * nnz / P). The subgroup has its
own ``manifest``, ``P`` and ``write_id`` attributes.

Atomicity: a dataset is written to ``<path>.tmp-<uuid>`` and renamed when complete; a grid to
``grids/.tmp-<P>-<uuid>`` and renamed. Readers therefore never see half-written data.

Integrity: :func:`open_dataset` checks the attributes, every array's shape and dtype against the
manifest and the number and total size of chunk files (truncated, deleted or added files);
every chunk read checks its CRC32C; :meth:`Dataset.verify` (or ``open_dataset(path,
verify=True)``) re-reads every array and compares its CRC32 with the manifest. Errors are
:class:`DatasetIntegrityError` naming the path and the array.
"""

from __future__ import annotations

import os
import uuid
from functools import cached_property
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import zarr

from daskpd import _format
from daskpd._format import FORMAT_VERSION, DatasetIntegrityError
from daskpd.kernels import dataset as kernels

__all__ = [
    "BaseDataset",
    "Dataset",
    "DatasetIntegrityError",
    "DatasetWriter",
    "GridInfo",
    "open_dataset",
    "write_dataset",
]

#: Default target of stored entries per row block when ``rows_per_block`` is not given:
#: 4 Mi nonzeros (about 48 MB decoded) amortize a task's overhead and fit any worker.
DEFAULT_BLOCK_NNZ = 2**22

_NO_LIMIT = np.iinfo(np.int64).max
_LAYOUTS = ("csr", "dense")
_TASKS = ("binary", "regression")


class GridInfo(NamedTuple):
    """Bounds and tile offsets of a P x P grid.

    Attributes
    ----------
    row_bounds : ndarray of shape (P + 1,), int64
    col_bounds : ndarray of shape (P + 1,), int64
    tile_ptr : ndarray of shape (P, P + 1), int64
    """

    row_bounds: np.ndarray
    col_bounds: np.ndarray
    tile_ptr: np.ndarray

    @property
    def n_blocks(self) -> int:
        """P, the number of row groups (and of column blocks)."""
        return int(self.row_bounds.shape[0] - 1)


# --------------------------------------------------------------------------------------------
# shared read API


class BaseDataset:
    """Read API shared by :class:`Dataset`, ``MemoryDataset`` and the bias view.

    Subclasses provide metadata attributes and the primitives ``_csr_rows``, ``_dense_rows``
    (dense layout), ``_y_rows``, ``_weight_rows``, ``_grid_info`` and ``_tile``.
    """

    shape: tuple[int, int]
    nnz: int
    binary: bool
    layout: str
    task: str
    label_counts: dict | None
    dtype: np.dtype
    has_sample_weight: bool
    row_block_bounds: np.ndarray

    # ---- sizes

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns."""
        return int(self.shape[1])

    @property
    def n_row_blocks(self) -> int:
        """Number of row blocks."""
        return int(self.row_block_bounds.shape[0] - 1)

    # ---- rows and blocks

    def _check_range(self, start, stop) -> tuple[int, int]:
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= self.n_samples:
            raise IndexError(
                f"row range [{start}, {stop}) is outside [0, {self.n_samples}) of {self!r}"
            )
        return start, stop

    def _block_range(self, i) -> tuple[int, int]:
        i = int(i)
        if not 0 <= i < self.n_row_blocks:
            raise IndexError(f"row block {i} is outside [0, {self.n_row_blocks}) of {self!r}")
        return int(self.row_block_bounds[i]), int(self.row_block_bounds[i + 1])

    def read_rows(self, start, stop):
        """Rows ``start:stop`` as ``(X, y)``.

        Parameters
        ----------
        start, stop : int
            Row range, ``0 <= start <= stop <= n_samples``.

        Returns
        -------
        X : scipy.sparse.csr_matrix of shape (stop - start, n_features), or ndarray (dense layout)
        y : ndarray of shape (stop - start,), float64
        """
        start, stop = self._check_range(start, stop)
        y = self._y_rows(start, stop)
        if self.layout == "dense":
            return self._dense_rows(start, stop), y
        indptr, indices, data = self._csr_rows(start, stop)
        if data is None:
            data = np.ones(indices.shape[0], dtype=self.dtype)
        matrix = sp.csr_matrix((data, indices, indptr), shape=(stop - start, self.n_features))
        return matrix, y

    def read_rows_arrays(self, start, stop):
        """Rows ``start:stop`` as raw CSR arrays for kernels.

        Returns
        -------
        indptr : ndarray of shape (stop - start + 1,), int64, starting at 0
        indices : ndarray of shape (nnz_rows,), int32
        data : ndarray of shape (nnz_rows,) or None
            None when the dataset is binary (every stored value is 1).
        y : ndarray of shape (stop - start,), float64
        """
        start, stop = self._check_range(start, stop)
        indptr, indices, data = self._csr_rows(start, stop)
        return indptr, indices, data, self._y_rows(start, stop)

    def y_rows(self, start, stop) -> np.ndarray:
        """Labels of rows ``start:stop`` (float64)."""
        return self._y_rows(*self._check_range(start, stop))

    def sample_weight_rows(self, start, stop):
        """Sample weights of rows ``start:stop`` (float64), or None when there are none."""
        start, stop = self._check_range(start, stop)
        if not self.has_sample_weight:
            return None
        return self._weight_rows(start, stop)

    def block(self, i):
        """Row block ``i`` as ``(X_block, y_block)`` (see :meth:`read_rows`)."""
        return self.read_rows(*self._block_range(i))

    def block_arrays(self, i):
        """Row block ``i`` as ``(indptr, indices, data or None, y)`` (see
        :meth:`read_rows_arrays`); dense datasets are converted to CSR."""
        return self.read_rows_arrays(*self._block_range(i))

    def to_delayed(self):
        """One ``dask.delayed`` ``(X_block, y_block)`` per row block.

        Each task reads only its block on the worker (the graph holds the dataset handle, which
        pickles as its path for on-disk datasets).

        Returns
        -------
        list of dask.delayed.Delayed
        """
        from dask import delayed
        from dask.base import tokenize

        token = tokenize(self._token())
        load = delayed(_load_block, pure=True)
        return [
            load(self, i, dask_key_name=f"daskpd-block-{token}-{i}")
            for i in range(self.n_row_blocks)
        ]

    def _token(self):
        return id(self)

    # ---- grids

    @property
    def grids(self) -> list[int]:
        """Grid sizes P whose tiled layout is available."""
        return []

    def grid(self, n_blocks) -> GridInfo:
        """Bounds and tile offsets of the ``n_blocks`` x ``n_blocks`` grid."""
        n_blocks = int(n_blocks)
        if n_blocks not in self.grids:
            raise KeyError(
                f"{self!r} has no {n_blocks} x {n_blocks} grid (available: {self.grids}); "
                f"run partition_dataset(path, grid={n_blocks})"
            )
        return self._grid_info(n_blocks)

    def tile(self, n_blocks, q, r):
        """Tile ``(q, r)`` of the ``n_blocks`` x ``n_blocks`` grid.

        Returns
        -------
        rows : ndarray of int32
            Row ids local to row group ``q``.
        cols : ndarray of int32
            Column ids local to column block ``r``.
        vals : ndarray or None
            None when binary.
        """
        info = self.grid(n_blocks)
        q, r = int(q), int(r)
        if not (0 <= q < n_blocks and 0 <= r < n_blocks):
            raise IndexError(f"tile ({q}, {r}) is outside the {n_blocks} x {n_blocks} grid")
        return self._tile(n_blocks, info, q, r)

    # ---- statistics helpers

    @property
    def density(self) -> float:
        """``nnz / (n_samples * n_features)``."""
        return self.nnz / max(1, self.n_samples * self.n_features)

    def summary(self) -> dict:
        """A JSON-serializable summary of the dataset."""
        return {
            "shape": [self.n_samples, self.n_features],
            "nnz": int(self.nnz),
            "density": float(self.density),
            "layout": self.layout,
            "binary": bool(self.binary),
            "dtype": np.dtype(self.dtype).name,
            "task": self.task,
            "label_counts": self.label_counts,
            "has_sample_weight": bool(self.has_sample_weight),
            "n_row_blocks": self.n_row_blocks,
            "grids": list(self.grids),
        }


def _load_block(dataset, i):
    return dataset.block(i)


# --------------------------------------------------------------------------------------------
# on-disk dataset


def _normalize_path(path) -> str:
    path = os.path.abspath(os.fspath(path))
    return path.rstrip(os.sep) or os.sep


_FILES_CHECKED: set = set()


class Dataset(BaseDataset):
    """Read-only handle on a dataset stored in the daskpd zarr format.

    Opening is cheap (metadata and directory listings only); arrays are read on demand, slice
    by slice. The handle pickles as its path, so Dask tasks reopen it on workers and read only
    their block. Use :func:`open_dataset` to create one.

    Parameters
    ----------
    path : str or os.PathLike
        Dataset directory.
    verify : bool, default=False
        Also re-read every array and compare its checksum with the manifest.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    DatasetIntegrityError
        When the dataset is not a daskpd dataset, or is truncated or altered.
    """

    def __init__(self, path, *, verify=False):
        self.path = _normalize_path(path)
        if not os.path.isdir(self.path):
            raise FileNotFoundError(f"no dataset at {self.path}")
        try:
            self._group = _format.open_group_readonly(self.path)
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
        # Listing chunk files is cheap but not free on a terascale store, and tasks reopen the
        # dataset for every block: a process checks each (write, directory state) once. Deleted
        # or added files change the directory mtime and so trigger a new check; altered bytes
        # are caught by the per-chunk CRC32C when read.
        mtimes = []
        for name in sorted(self._manifest):
            directory = os.path.join(self.path, name)
            try:
                mtimes.append(os.stat(directory).st_mtime_ns)
            except FileNotFoundError:
                raise DatasetIntegrityError(f"{self.path}: array {name!r} is missing") from None
        key = (self.path, self._write_id, tuple(mtimes))
        check_files = key not in _FILES_CHECKED
        for name, entry in self._manifest.items():
            _format.check_array(
                self._group,
                name,
                entry,
                os.path.join(self.path, name),
                self.path,
                files=check_files,
            )
        _FILES_CHECKED.add(key)

    def verify(self) -> None:
        """Re-read every stored array (grids included) and compare it with the manifest.

        Raises
        ------
        DatasetIntegrityError
            Naming the first array whose size, chunk files or checksum differ.
        """
        groups = [(self._group, self.path, self._manifest)]
        for n_blocks in self.grids:
            subgroup, directory, manifest = self._grid_group(n_blocks)
            groups.append((subgroup, directory, manifest))
        for group, directory, manifest in groups:
            for name, entry in manifest.items():
                _format.check_array(
                    group, name, entry, os.path.join(directory, name), directory, files=True
                )
                try:
                    crc = _format.logical_crc32(group[name])
                except Exception as exc:
                    raise DatasetIntegrityError(
                        f"{directory}: array {name!r} cannot be read back ({exc})"
                    ) from None
                if crc != entry["crc32"]:
                    raise DatasetIntegrityError(
                        f"{directory}: array {name!r} checksum differs from the manifest "
                        "(altered data)"
                    )

    def _read(self, name, selection=slice(None), group=None, where=None):
        group = self._group if group is None else group
        try:
            return group[name][selection]
        except Exception as exc:
            raise DatasetIntegrityError(
                f"{where or self.path}: reading array {name!r} failed; the stored chunk is "
                f"truncated or altered ({type(exc).__name__}: {exc})"
            ) from None

    # ---- pickling and identity

    def __reduce__(self):
        return (open_dataset, (self.path,))

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
            return _dense_to_csr(self._dense_rows(start, stop))
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
            manifest = dict(attrs["manifest"])
        except Exception as exc:
            raise DatasetIntegrityError(f"{directory}: unreadable grid ({exc})") from None
        return group, directory, manifest

    @cached_property
    def _grid_cache(self) -> dict:
        return {}

    def _grid_info(self, n_blocks):
        if n_blocks not in self._grid_cache:
            group, directory, manifest = self._grid_group(n_blocks)
            for name, entry in manifest.items():
                _format.check_array(
                    group, name, entry, os.path.join(directory, name), directory, files=False
                )
            info = GridInfo(
                row_bounds=self._read("row_bounds", group=group, where=directory),
                col_bounds=self._read("col_bounds", group=group, where=directory),
                tile_ptr=self._read("tile_ptr", group=group, where=directory),
            )
            self._grid_cache[n_blocks] = (group, directory, info)
        return self._grid_cache[n_blocks][2]

    def _tile(self, n_blocks, info, q, r):
        group, directory, _ = self._grid_cache[n_blocks]
        lo, hi = int(info.tile_ptr[q, r]), int(info.tile_ptr[q, r + 1])
        rows = self._read("rows", slice(lo, hi), group, directory)
        cols = self._read("cols", slice(lo, hi), group, directory)
        vals = None if self.binary else self._read("vals", slice(lo, hi), group, directory)
        return rows, cols, vals


def _dense_to_csr(block):
    rows, cols = np.nonzero(block)
    indptr = np.zeros(block.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=block.shape[0]), out=indptr[1:])
    return indptr, cols.astype(np.int32), block[rows, cols]


def open_dataset(path, *, verify=False) -> Dataset:
    """Open a stored dataset read-only.

    Parameters
    ----------
    path : str or os.PathLike
        Dataset directory written by :func:`write_dataset` or :class:`DatasetWriter`.
    verify : bool, default=False
        Re-read every array and compare checksums (slow: reads the whole dataset).

    Returns
    -------
    Dataset
    """
    return Dataset(path, verify=verify)


# --------------------------------------------------------------------------------------------
# writing


def _as_float_array(values, name, length=None):
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        array = array.reshape(-1) if array.ndim == 2 and 1 in array.shape else array
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {np.shape(values)}")
    if length is not None and array.shape[0] != length:
        raise ValueError(f"{name} has {array.shape[0]} entries, expected {length} (one per row)")
    return array


def _first_bad(mask) -> int:
    return int(np.flatnonzero(mask)[0])


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
        n_features = int(n_features)
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        if n_features > np.iinfo(np.int32).max:
            raise ValueError(f"n_features must fit int32 column ids, got {n_features}")
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
        if task is not None and task not in _TASKS:
            raise ValueError(f"task must be one of {_TASKS} or None, got {task!r}")
        if layout == "dense" and binary:
            raise ValueError("binary=True needs layout='csr' (dense data stores every value)")
        for name, value in (("rows_per_block", rows_per_block), ("block_nnz", block_nnz)):
            if value is not None and int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
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
        if rows_per_block is None and block_nnz is None:
            block_nnz = DEFAULT_BLOCK_NNZ
            if layout == "dense":
                rows_per_block = max(1, DEFAULT_BLOCK_NNZ // n_features)
        self._max_rows = _NO_LIMIT if rows_per_block is None else int(rows_per_block)
        self._max_nnz = _NO_LIMIT if block_nnz is None else int(block_nnz)

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
        y_rows = _as_float_array(y_rows, "y", n_rows)
        first_row = self.n_samples
        if not np.all(np.isfinite(y_rows)):
            row = first_row + _first_bad(~np.isfinite(y_rows))
            raise ValueError(f"label of row {row} is {y_rows[row - first_row]}, not finite")
        has_weight = sample_weight is not None
        if self._has_weight is not None and has_weight != self._has_weight:
            raise ValueError(
                "sample_weight must be given for every append or for none "
                f"(rows from {first_row} {'have' if has_weight else 'lack'} it)"
            )
        if has_weight:
            sample_weight = _as_float_array(sample_weight, "sample_weight", n_rows)
            bad = ~(np.isfinite(sample_weight) & (sample_weight >= 0))
            if bad.any():
                row = _first_bad(bad)
                raise ValueError(
                    f"sample_weight of row {first_row + row} is {sample_weight[row]}; "
                    "weights must be finite and >= 0"
                )
        is_negative = y_rows == -1.0
        is_positive = y_rows == 1.0
        if self.task == "binary" and not np.all(is_negative | is_positive):
            row = _first_bad(~(is_negative | is_positive))
            raise ValueError(
                f"label of row {first_row + row} is {y_rows[row]}; task 'binary' needs -1 or +1"
            )

        if self.layout == "csr":
            indptr, indices, data = self._csr_chunk(X_rows, n_rows, first_row)
            row_nnz = np.diff(indptr)
            if self.binary:
                row_norm_sq = row_nnz.astype(np.float64)
            else:
                row_norm_sq = kernels.row_norms_sq(indptr, data)
            kernels.add_column_counts(self._col_nnz, indices)
            offset = self.nnz
            self._appenders["indptr"].append(indptr[1:] + offset)
            self._appenders["indices"].append(indices)
            if not self.binary:
                self._appenders["data"].append(data)
            chunk_nnz = int(indptr[-1])
        else:
            block = self._dense_chunk(X_rows, n_rows, first_row)
            nonzero = block != 0
            row_nnz = np.count_nonzero(nonzero, axis=1).astype(np.int64)
            self._col_nnz += np.count_nonzero(nonzero, axis=0)
            wide = block.astype(np.float64, copy=False)
            row_norm_sq = np.einsum("ij,ij->i", wide, wide)
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

    def _csr_chunk(self, X_rows, n_rows, first_row):
        if sp.issparse(X_rows):
            matrix = X_rows.tocsr()
            if matrix.shape[1] != self.n_features:
                raise ValueError(
                    f"rows from {first_row} have {matrix.shape[1]} features, "
                    f"expected {self.n_features}"
                )
            indptr = np.asarray(matrix.indptr, dtype=np.int64)
            indptr = indptr - indptr[0]
            indices = np.asarray(matrix.indices)[: indptr[-1]]
            data = np.asarray(matrix.data)[: indptr[-1]]
            row, reason, column = kernels.check_csr(indptr, indices, self.n_features)
            if row >= 0:
                what = {
                    1: f"column id {column} outside [0, {self.n_features})",
                    2: f"column ids unsorted or duplicated (at column {column})",
                    3: "decreasing indptr",
                }[reason]
                raise ValueError(f"row {first_row + row}: {what}")
            indices = indices.astype(np.int32, copy=False)
        else:
            dense = np.asarray(X_rows)
            if dense.ndim != 2 or dense.shape[1] != self.n_features:
                raise ValueError(
                    f"rows from {first_row} have shape {dense.shape}, "
                    f"expected (n_rows, {self.n_features})"
                )
            self._check_finite_dense(dense, first_row)
            indptr, indices, data = _dense_to_csr(dense)
        if data.shape[0] and not np.all(np.isfinite(data)):
            position = _first_bad(~np.isfinite(data))
            row = int(np.searchsorted(indptr, position, side="right")) - 1
            raise ValueError(f"row {first_row + row} has a non-finite value {data[position]}")
        if self.binary:
            if data.shape[0] and not np.all(data == 1):
                position = _first_bad(data != 1)
                row = int(np.searchsorted(indptr, position, side="right")) - 1
                raise ValueError(
                    f"row {first_row + row} has value {data[position]} in a binary dataset "
                    "(binary features are all 1)"
                )
            data = None
        else:
            data = np.asarray(data, dtype=self.dtype)
        return indptr, indices, data

    def _check_finite_dense(self, dense, first_row):
        finite = np.isfinite(dense)
        if not finite.all():
            row = _first_bad(~finite.all(axis=1))
            raise ValueError(f"row {first_row + row} has a non-finite value")

    def _dense_chunk(self, X_rows, n_rows, first_row):
        dense = X_rows.toarray() if sp.issparse(X_rows) else np.asarray(X_rows)
        if dense.ndim != 2 or dense.shape[1] != self.n_features:
            raise ValueError(
                f"rows from {first_row} have shape {dense.shape}, "
                f"expected (n_rows, {self.n_features})"
            )
        self._check_finite_dense(dense, first_row)
        return dense.astype(self.dtype, copy=False)

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
        if self.task == "binary" or (self.task is None and self._n_other == 0):
            task = "binary"
            label_counts = {"-1": self._n_negative, "1": self._n_positive}
        else:
            task = "regression"
            label_counts = None
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
