"""Where a dataset lives: a local directory, or a URL read through fsspec.

Datasets are written to local (or shared) directories only; a dataset at a URL (``s3://``,
``gs://``, ``http(s)://``, ``file://``: any protocol fsspec knows) is read-only, through
zarr's ``FsspecStore``.
"""

from __future__ import annotations

import asyncio
import itertools
import os

import zarr
from zarr.core.sync import sync
from zarr.storage import FsspecStore

# fsspec is optional (remote stores only: the ``http`` extra).


def is_url(path) -> bool:
    """Whether ``path`` is a URL with a scheme (``s3://bucket/x.zarr``) and not a local path."""
    return isinstance(path, str) and "://" in path


def normalize_path(path) -> str:
    """A dataset's path made absolute (a URL without its trailing slashes)."""
    if is_url(path):
        return path.rstrip("/")
    path = os.path.abspath(os.fspath(path))
    return path.rstrip(os.sep) or os.sep


def check_storage_options(path, storage_options):
    """``storage_options`` as a dict (or None); ValueError when given for a local path."""
    if storage_options is None:
        return None
    if not is_url(path):
        raise ValueError(
            f"storage_options apply to a URL (s3://, gs://, http://, file://...), got the local "
            f"path {path!r}"
        )
    return dict(storage_options)


def group_stamp(path, storage_options=None):
    """Identity of a stored group's metadata file: replaced or rewritten means changed."""
    if is_url(path):
        return remote_stamp(path, storage_options)
    try:
        stat = os.stat(os.path.join(path, "zarr.json"))
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def open_group_readonly(path: str, storage_options=None):
    """Open a zarr v3 group read-only: a local directory, or a URL through zarr's FsspecStore."""
    if not is_url(path):
        return zarr.open_group(path, mode="r", zarr_format=3)

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
    store = group.store
    inner = [part.strip("/") for part in (group.path, name) if part]
    prefix = "/".join([store.path.rstrip("/"), *inner])
    grid = [
        range(-(-int(n) // int(c))) for n, c in zip(entry["shape"], entry["chunks"], strict=True)
    ]
    names = [f"{prefix}/c." + ".".join(map(str, index)) for index in itertools.product(*grid)]
    return sync(_remote_sizes(store.fs, prefix, names))


async def _remote_sizes(fs, prefix, names):
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
