"""Stores made from svmlight or sequence files, kept and reused: :func:`ingest_cached`.

``daskpd train data.svm`` ingests the file into a store once and trains on the store; the next
run on the same file finds the store and skips the ingestion. A store is named by a key of
everything its content depends on:

- the file: its real path, size and modification time (in nanoseconds), so an edited or
  replaced file gives another key;
- the ingestion: the kind (``"svmlight"``, ``"sequences"``) and the options passed on to
  :func:`~daskpd.io.ingest_svmlight` / :func:`~daskpd.io.ingest_sequences` (not the ones that
  only change how the work is cut, such as ``chunk_bytes``);
- the store format version (:data:`daskpd.data.format.FORMAT_VERSION`) and this cache's
  :data:`CACHE_VERSION`.

A file read against a known number of columns (a test file, a file a model scores) is keyed
with that number too (``n_features``); its store made without it serves when it has that many
columns (a model scoring its own training file reads the training store).

The stores live in a directory of stores: ``--store DIR`` of the command, or the user's cache,
:func:`cache_root` (``$DASKPD_CACHE``, else ``$XDG_CACHE_HOME/daskpd`` or ``~/.cache/daskpd``
on Linux, ``~/Library/Caches/daskpd`` on macOS, ``%LOCALAPPDATA%\\daskpd\\Cache`` on
Windows). Each is ``<stem>-<key>.zarr``, with ``<stem>-<key>.json`` beside it saying what it
was made from. An old store (of a file since changed) stays until removed by hand: a run may
still read it. Deleting the directory at a time when no run uses it is always safe.

Concurrency: a store is built under the ingestion's temporary name and renamed when complete
(:mod:`daskpd.data.atomic`), so a store at its name is always whole; and one process at a
time builds a given key, holding ``<store>.ingest.lock`` with ``flock`` (another run waits,
then finds the store made). A killed ingestion leaves its temporaries, removed at the next
write of that store (:mod:`daskpd._sidefiles`), and lets go of the lock with its death.

The stores are not side names: no clean-up of side files removes them (their names carry no
``.tmp-``, ``.parts-``, ``.old-`` tag, and none starts with ``daskpd-`` as a run's shared
memory does), and their lock file is removed by the process that held it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import sys

import numpy as np

#: Version of the cache's naming and keying; a change makes every key new.
CACHE_VERSION = 1

#: Environment variable naming the cache directory.
CACHE_VARIABLE = "DASKPD_CACHE"

#: Suffix of the lock file beside a store being built.
LOCK_SUFFIX = ".ingest.lock"

#: The kinds of file a store is made from.
KINDS = ("svmlight", "sequences")


def cache_root() -> str:
    """The user's directory of cached stores (it need not exist yet).

    ``$DASKPD_CACHE`` when set, else the platform's user cache directory plus ``daskpd``.
    """
    configured = os.environ.get(CACHE_VARIABLE)
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/daskpd")
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~/AppData/Local")
        return os.path.join(local, "daskpd", "Cache")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(os.path.abspath(base), "daskpd")


def cache_key(source, kind, options) -> dict:
    """What a store of ``source`` depends on, as a JSON-able dict (hashed into its name).

    Parameters
    ----------
    source : str or path-like
        An existing file.
    kind : {"svmlight", "sequences"}
    options : dict
        Keyword arguments of the ingest function that change the stored data.
    """
    from daskpd.data.format import FORMAT_VERSION

    path = os.path.realpath(os.fspath(source))
    info = os.stat(path)
    return {
        "cache_version": CACHE_VERSION,
        "format_version": FORMAT_VERSION,
        "source": path,
        "size": int(info.st_size),
        "mtime_ns": int(info.st_mtime_ns),
        "kind": kind,
        "options": {name: _plain(value) for name, value in sorted(options.items())},
    }


def store_path(root, key) -> str:
    """The store of ``key`` in directory ``root``: ``<root>/<stem>-<hash>.zarr``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", os.path.basename(key["source"]))[:48].strip("_")
    return os.path.join(os.fspath(root), f"{stem or 'data'}-{digest}.zarr")


def ingest_cached(source, *, kind="svmlight", options=None, root=None, client=None):
    """The store of ``source`` in ``root``: reused when its key matches, else ingested.

    Parameters
    ----------
    source : str or path-like
        An svmlight / libsvm file or a sequences file (CSV or FASTA, plain or compressed).
    kind : {"svmlight", "sequences"}, default="svmlight"
    options : dict, optional
        Keyword arguments of :func:`~daskpd.io.ingest_svmlight` or
        :func:`~daskpd.io.ingest_sequences` that change the stored data (part of the key).
    root : str or path-like, optional
        Directory of the stores (made if missing); default :func:`cache_root`.
    client : distributed.Client, optional
        Where the ingestion runs (default: the active client, else local threads).

    Returns
    -------
    dataset : daskpd.data.Dataset
    path : str
        The store's path.
    ingested : bool
        True when this call made the store, False when it reused one.

    Raises
    ------
    SvmlightFormatError, SequenceFormatError
        Malformed input (nothing is left in ``root``).
    ValueError
        The file changed while it was being ingested (the store made from it is removed).
    """
    from daskpd.data import open_dataset

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    source = os.fspath(source)
    if not os.path.isfile(source):
        raise FileNotFoundError(f"{source}: no such file")
    options = dict(options or {})
    root = os.path.abspath(os.fspath(root if root is not None else cache_root()))
    os.makedirs(root, exist_ok=True)
    if options.get("n_features") is not None:
        # the store of the file made without a column count serves when it has that many
        # (a model scored on its own training file)
        plain = {name: value for name, value in options.items() if name != "n_features"}
        path = store_path(root, cache_key(source, kind, plain))
        dataset = _open_whole(path, open_dataset)
        if dataset is not None and dataset.n_features == int(options["n_features"]):
            return dataset, path, False
    key = cache_key(source, kind, options)
    path = store_path(root, key)
    with _building(path):
        dataset = _open_whole(path, open_dataset)
        if dataset is not None:
            return dataset, path, False
        _ingest(source, path, kind, options, client)
        after = cache_key(source, kind, options)
        if (after["size"], after["mtime_ns"]) != (key["size"], key["mtime_ns"]):
            from daskpd import _sidefiles

            _sidefiles.remove_path(path)
            raise ValueError(f"{source} changed while it was being ingested; run again")
        _write_json(path[: -len(".zarr")] + ".json", key)
        return open_dataset(path), path, True


def _ingest(source, path, kind, options, client) -> None:
    overwrite = os.path.lexists(path)  # a damaged store of this key: replaced
    if kind == "svmlight":
        from daskpd.io.svmlight import ingest_svmlight

        ingest_svmlight(source, path, overwrite=overwrite, client=client, **options)
    else:
        from daskpd.io.sequences import ingest_sequences

        ingest_sequences(source, path, overwrite=overwrite, client=client, **options)


def _open_whole(path, open_dataset):
    """The dataset at ``path``, or None when there is none (or one that does not open)."""
    if not os.path.isdir(path):
        return None
    try:
        return open_dataset(path)
    except (OSError, ValueError, KeyError):
        return None


def _plain(value):
    """An option's value as JSON: dtypes by name, tuples as lists."""
    if isinstance(value, (np.dtype, type)):
        return np.dtype(value).name
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _write_json(path, content) -> None:
    temporary = f"{path}.{os.getpid()}.partial"
    with open(temporary, "w") as handle:
        json.dump(content, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(temporary, path)


@contextlib.contextmanager
def _building(path):
    """Hold the build lock of store ``path``: one builder at a time, across processes and
    threads (each holder has its own open file, so flock excludes threads too).

    The lock file is unlinked by its holder before it lets go; a waiter that then gets the
    lock of an unlinked file opens the name again (the protocol of :mod:`daskpd._sidefiles`),
    so no lock file outlives its last user.
    """
    from daskpd._sidefiles import same_file

    lock = path + LOCK_SUFFIX
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        if same_file(fd, lock):
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            if same_file(fd, lock):
                os.unlink(lock)
        except OSError as exc:  # pragma: no cover - a read-only directory after the build
            if exc.errno not in (errno.ENOENT, errno.EACCES, errno.EPERM):
                raise
        finally:
            os.close(fd)
