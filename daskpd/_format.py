"""Low-level pieces of the on-disk format: codecs, chunk sizes, streaming appenders, manifest.

The format itself is specified in the docstring of :mod:`daskpd.dataset`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import uuid
import zlib

import numpy as np
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec

#: Version written in the ``format_version`` attribute; readers refuse other versions.
FORMAT_VERSION = 1

#: Uncompressed bytes per chunk: a few MB, so that one chunk decodes fast and a terascale
#: array still has a manageable number of chunk files.
CHUNK_BYTES = 4 * 2**20

#: Chunk files sit flat in the array's directory (``c.0``, ``c.3.1``): one directory per array,
#: so one listing (and one directory mtime) covers every chunk file of the array.
CHUNK_KEYS = {"name": "default", "separator": "."}

#: Zarr config: chunks equal to the fill value are written anyway, so that every chunk file
#: exists and a deleted one is detected by the size check instead of reading back as zeros.
ARRAY_CONFIG = {"write_empty_chunks": True}


class DatasetIntegrityError(ValueError):
    """A stored dataset is truncated, altered or incomplete."""


def compressors(itemsize: int):
    """Blosc zstd with byte shuffle, then a CRC32C of the compressed chunk.

    The CRC32C codec is verified by zarr on every chunk read, so an altered chunk file is
    detected whenever it is read, not only by :meth:`Dataset.verify`.
    """
    return (
        BloscCodec(cname="zstd", clevel=3, shuffle="shuffle", typesize=itemsize),
        Crc32cCodec(),
    )


def chunk_length(itemsize: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Elements per chunk of a 1-D array of items of ``itemsize`` bytes."""
    return max(1, int(chunk_bytes) // int(itemsize))


def create_1d(group, name: str, dtype, chunk_bytes: int = CHUNK_BYTES, shape: int = 0):
    """Create an (initially empty or fixed-size) 1-D chunked compressed array in ``group``."""
    dtype = np.dtype(dtype)
    return group.create_array(
        name,
        shape=(int(shape),),
        dtype=dtype,
        chunks=(chunk_length(dtype.itemsize, chunk_bytes),),
        compressors=compressors(dtype.itemsize),
        fill_value=0,
        chunk_key_encoding=CHUNK_KEYS,
        config=ARRAY_CONFIG,
    )


def dense_chunks(n_features: int, itemsize: int, chunk_bytes: int = CHUNK_BYTES):
    """Chunk shape ``(rows, cols)`` of a dense ``X`` holding about ``chunk_bytes``."""
    cols = max(1, min(int(n_features), 2**16))
    rows = max(1, int(chunk_bytes) // (itemsize * cols))
    return rows, cols


def create_dense(group, name: str, n_features: int, dtype, chunk_bytes: int = CHUNK_BYTES):
    """Create an initially empty 2-D chunked array of ``n_features`` columns."""
    dtype = np.dtype(dtype)
    return group.create_array(
        name,
        shape=(0, int(n_features)),
        dtype=dtype,
        chunks=dense_chunks(n_features, dtype.itemsize, chunk_bytes),
        compressors=compressors(dtype.itemsize),
        fill_value=0,
        chunk_key_encoding=CHUNK_KEYS,
        config=ARRAY_CONFIG,
    )


class Appender:
    """Append rows to a zarr array in whole chunks, keeping at most one chunk in memory.

    Only chunk-aligned regions are written (each chunk exactly once), so no chunk is ever read
    back. A CRC32 of the logical little-endian bytes, in order, is kept for the manifest.

    Parameters
    ----------
    array : zarr.Array
        Empty 1-D array, or 2-D array with zero rows, chunked along axis 0.
    """

    def __init__(self, array):
        self.array = array
        self.chunk_rows = int(array.chunks[0])
        self.tail = tuple(array.shape[1:])
        self.buffer = np.empty((self.chunk_rows, *self.tail), dtype=array.dtype)
        self.fill = 0
        self.written = 0
        self.crc32 = 0

    @property
    def length(self) -> int:
        """Rows appended so far."""
        return self.written + self.fill

    def append(self, values) -> None:
        """Append ``values`` (rows of the array's shape and dtype) at the end."""
        values = np.ascontiguousarray(values, dtype=self.array.dtype)
        if values.shape[0] == 0:
            return
        self.crc32 = zlib.crc32(memoryview(values).cast("B"), self.crc32)
        start = 0
        total = values.shape[0]
        if self.fill:
            take = min(self.chunk_rows - self.fill, total)
            self.buffer[self.fill : self.fill + take] = values[:take]
            self.fill += take
            start = take
            if self.fill == self.chunk_rows:
                self._write(self.buffer)
                self.fill = 0
        whole = (total - start) // self.chunk_rows * self.chunk_rows
        if whole:
            self._write(values[start : start + whole])
            start += whole
        rest = total - start
        if rest:
            self.buffer[:rest] = values[start:]
            self.fill = rest

    def _write(self, values) -> None:
        stop = self.written + values.shape[0]
        if stop > self.array.shape[0]:
            # grow geometrically: resizing rewrites the array metadata
            self.array.resize((max(stop, 2 * self.array.shape[0]), *self.tail))
        self.array[self.written : stop] = values
        self.written = stop

    def finish(self) -> None:
        """Write the last partial chunk and trim the array to the rows appended."""
        if self.fill:
            self._write(self.buffer[: self.fill])
            self.fill = 0
        if self.array.shape[0] != self.written:
            self.array.resize((self.written, *self.tail))
        self.buffer = None


def write_small(group, name: str, values):
    """Write a whole (small) array of any rank at once; return ``(array, crc32)``.

    Chunked along axis 0 to about :data:`CHUNK_BYTES`.
    """
    values = np.ascontiguousarray(values)
    row_bytes = max(1, int(np.prod(values.shape[1:], dtype=np.int64)) * values.dtype.itemsize)
    chunks = (max(1, CHUNK_BYTES // row_bytes), *values.shape[1:])
    array = group.create_array(
        name,
        shape=values.shape,
        dtype=values.dtype,
        chunks=tuple(int(c) for c in chunks),
        compressors=compressors(values.dtype.itemsize),
        fill_value=0,
        chunk_key_encoding=CHUNK_KEYS,
        config=ARRAY_CONFIG,
    )
    array[...] = values
    return array, zlib.crc32(memoryview(values).cast("B"))


def logical_crc32(array, chunk_bytes: int = CHUNK_BYTES) -> int:
    """CRC32 of the logical C-order bytes of a stored zarr array, read in slabs of rows."""
    crc = 0
    length = array.shape[0]
    row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize)
    step = max(
        int(array.chunks[0]), int(chunk_bytes) // row_bytes // array.chunks[0] * array.chunks[0]
    )
    for start in range(0, length, step):
        values = np.ascontiguousarray(array[start : min(start + step, length)])
        crc = zlib.crc32(memoryview(values).cast("B"), crc)
    return crc


def stored_files(directory: str) -> tuple[int, int]:
    """Number and total size of the chunk files of the array stored in ``directory``."""
    count = 0
    size = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.startswith("c.") and entry.is_file():
                count += 1
                size += entry.stat().st_size
    return count, size


def expected_chunks(shape, chunks) -> int:
    """Number of chunk files of an array of ``shape`` chunked by ``chunks``."""
    total = 1
    for extent, chunk in zip(shape, chunks, strict=True):
        total *= -(-int(extent) // int(chunk))
    return total


def manifest_entry(array, directory: str, crc32: int) -> dict:
    """Manifest record of one stored array (shape, dtype, chunk files, bytes, CRC32)."""
    n_files, n_bytes = stored_files(directory)
    return {
        "shape": [int(s) for s in array.shape],
        "dtype": np.dtype(array.dtype).str,
        "chunks": [int(c) for c in array.chunks],
        "n_files": n_files,
        "stored_bytes": n_bytes,
        "crc32": None if crc32 is None else int(crc32),
    }


def check_array(group, name: str, entry: dict, directory: str, where: str, files: bool):
    """Fast check of one stored array against its manifest record; return the array.

    Raises
    ------
    DatasetIntegrityError
        Naming the dataset path and the array.
    """
    try:
        array = group[name]
    except KeyError:
        raise DatasetIntegrityError(f"{where}: array {name!r} is missing") from None
    except Exception as exc:  # unreadable metadata: report it as damage, not a crash
        raise DatasetIntegrityError(
            f"{where}: array {name!r} has unreadable metadata: {exc}"
        ) from None
    if [int(s) for s in array.shape] != entry["shape"]:
        raise DatasetIntegrityError(
            f"{where}: array {name!r} has shape {tuple(array.shape)}, "
            f"expected {tuple(entry['shape'])} (truncated or altered)"
        )
    if np.dtype(array.dtype).str != entry["dtype"]:
        raise DatasetIntegrityError(
            f"{where}: array {name!r} has dtype {array.dtype}, expected {entry['dtype']}"
        )
    if files:
        if is_url(directory):
            n_files, n_bytes = remote_files(group, name, entry)
        else:
            n_files, n_bytes = stored_files(directory)
        if n_files != entry["n_files"]:
            raise DatasetIntegrityError(
                f"{where}: array {name!r} has {n_files} chunk files, expected "
                f"{entry['n_files']} (chunk files missing or added)"
            )
        if n_bytes != entry["stored_bytes"]:
            raise DatasetIntegrityError(
                f"{where}: array {name!r} chunk files hold {n_bytes} bytes, expected "
                f"{entry['stored_bytes']} (truncated or altered)"
            )
    return array


def temporary_sibling(path: str, tag: str = "tmp") -> str:
    """A fresh name ``<path>.<tag>-<uuid>`` next to ``path`` (same file system, so renames
    are atomic)."""
    return f"{path}.{tag}-{uuid.uuid4().hex}"


def remove_tree(path: str) -> None:
    """Remove a directory tree if it exists."""
    shutil.rmtree(path, ignore_errors=True)


def open_group_readonly(path: str, storage_options=None):
    """Open a zarr v3 group read-only: a local directory, or a URL through zarr's FsspecStore."""
    if not is_url(path):
        return zarr.open_group(path, mode="r", zarr_format=3)
    from zarr.storage import FsspecStore

    try:
        store = FsspecStore.from_url(path, storage_options=storage_options, read_only=True)
    except (ImportError, ValueError) as exc:  # no fsspec back end for the protocol
        raise ValueError(f"{path}: {exc}") from None
    return zarr.open_group(store, mode="r", zarr_format=3)


# --------------------------------------------------------------------------------------------
# datasets at URLs (s3://, gs://, http(s)://, file://: any protocol fsspec knows), read-only

#: Fields of an object's fsspec ``info`` that change when it is written again (whichever the
#: protocol reports: POSIX mtimes, HTTP ETag / Last-Modified, S3 ETag, GCS generation).
_STAMP_FIELDS = frozenset(
    ("size", "mtime", "ino", "etag", "last-modified", "lastmodified", "generation", "updated")
)

#: Concurrent HEAD requests while sizing chunk files a listing gave no size for.
_SIZE_BATCH = 64


def is_url(path) -> bool:
    """Whether ``path`` is a URL with a scheme (``s3://bucket/x.zarr``) and not a local path."""
    return isinstance(path, str) and "://" in path


def remote_filesystem(url: str, storage_options=None):
    """The (synchronous) fsspec file system and path of ``url``; errors name the URL."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (ImportError, ValueError) as exc:  # "Install s3fs to access S3", unknown protocol
        raise ValueError(f"{url}: {exc}") from None


def remote_exists(url: str, storage_options=None) -> bool:
    """Whether a zarr group's metadata (``zarr.json``) exists at ``url``.

    Raises
    ------
    OSError
        Naming the URL, when the store cannot be asked (unreachable host, refused access).
    """
    fs, path = remote_filesystem(url, storage_options)
    try:
        # a read (a small file), not fs.exists or fs.info: over HTTP those answer "not
        # found" for a server that cannot be reached too
        fs.cat_file(f"{path.rstrip('/')}/zarr.json")
        return True
    except FileNotFoundError:
        return False
    except Exception as exc:
        raise OSError(f"{url}: cannot read the store ({type(exc).__name__}: {exc})") from None


def remote_stamp(url: str, storage_options=None):
    """Identity of the ``zarr.json`` at ``url`` (size and version fields), or None if absent."""
    fs, path = remote_filesystem(url, storage_options)
    try:
        info = fs.info(f"{path.rstrip('/')}/zarr.json")
    except FileNotFoundError:
        return None
    return tuple(
        sorted((key, str(value)) for key, value in info.items() if key.lower() in _STAMP_FIELDS)
    )


def remote_files(group, name: str, entry: dict) -> tuple[int, int]:
    """Number and total size of the chunk files of array ``name`` of a group opened from a URL.

    The chunk files an array of the manifest's shape and chunks has are known by name; a
    listing of the array's prefix sizes those it finds (one request per thousand files on S3
    or GCS), and the rest are asked one by one (HTTP listings carry no sizes, and an HTTP
    server need not list at all). A missing file is not counted. Files the manifest does not
    expect are not seen; they are never read either.
    """
    from zarr.core.sync import sync

    store = group.store
    inner = [part.strip("/") for part in (group.path, name) if part]
    prefix = "/".join([store.path.rstrip("/"), *inner])
    grid = [
        range(-(-int(n) // int(c))) for n, c in zip(entry["shape"], entry["chunks"], strict=True)
    ]
    names = [f"{prefix}/c." + ".".join(map(str, index)) for index in itertools.product(*grid)]
    return sync(_remote_sizes(store.fs, prefix, names))


async def _remote_sizes(fs, prefix, names):
    import asyncio

    try:
        listing = await fs._ls(prefix, detail=True)
    except Exception:  # no listing (refused, or a server that does not list): ask each file
        listing = []
    sizes = {
        _strip(fs, item["name"]): item.get("size")
        for item in listing
        if item.get("type") != "directory"
    }
    found = {key: sizes.get(_strip(fs, key)) for key in names if _strip(fs, key) in sizes}
    unknown = [key for key in names if found.get(key) is None]

    async def size(key):
        try:
            return key, (await fs._info(key))["size"]
        except FileNotFoundError:
            return key, None

    for start in range(0, len(unknown), _SIZE_BATCH):
        batch = unknown[start : start + _SIZE_BATCH]
        found.update(await asyncio.gather(*(size(key) for key in batch)))
    present = [value for value in found.values() if value is not None]
    return len(present), int(sum(present))


def _strip(fs, path: str) -> str:
    return fs._strip_protocol(path).rstrip("/")
