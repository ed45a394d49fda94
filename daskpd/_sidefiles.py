"""Side names: what a run or an ingest makes beside its real output while it works, each
with a lock its owner holds for as long as it lives.

The side names of daskpd:

- ``DEST.parts-<hex>``: ingestion's and the generators' parts (:mod:`daskpd.io._parts`);
- ``DEST.tmp-<hex>``: a dataset, model, checkpoint or scores group being written, and
  ``DEST.old-<hex>``: the one it replaces, for an instant (:mod:`daskpd.data.atomic`);
- ``<root>/daskpd-<token>``: a run's shared-memory directory, ``<root>`` being ``/dev/shm``
  or ``$DASKPD_SHM_DIR`` (:mod:`daskpd.solvers.common.shared`).

A side name ``P`` has a lock file ``P.lock`` beside it, locked with ``flock(LOCK_EX)`` by the
process that made ``P`` (the *owner*) until ``P`` is gone. The kernel lets go of a flock when
the last descriptor of its open file closes, so also when its owner is killed with SIGKILL:
a side name whose lock can be taken (``LOCK_EX | LOCK_NB``) is a dead owner's leftover, and
:func:`sweep` / :func:`sweep_shared_memory` remove those. A PID in a file would not do: PIDs
are reused, and a LocalCluster's workers can outlive their killed client.

The order that keeps a live owner's names safe: the owner locks ``P.lock`` before ``P``
exists and unlinks it only after ``P`` is gone; whoever takes a lock checks afterwards that
the file it locked is still the one named ``P.lock`` (another may have unlinked it between
the open and the lock). So a ``P`` without ``P.lock`` has no owner: it was left by a daskpd
before these locks, which may still be running, so it is removed only once unchanged for
:data:`LOCKLESS_GRACE` seconds. Lock descriptors are not inherited across ``exec``
(``O_CLOEXEC``), so a worker process a client starts never keeps the client's names alive.

Only stdlib here: the ``daskpd`` command sweeps at every start and stays light to import.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
import threading
import time

#: Suffix of a side name's lock file.
LOCK_SUFFIX = ".lock"

#: Tags of the side names beside a destination ``DEST.<tag>-<hex>``.
TAGS = ("parts", "tmp", "old")

#: Environment variable naming the RAM-backed directory to use instead of ``/dev/shm``.
SHM_ROOT_VARIABLE = "DASKPD_SHM_DIR"

#: Prefix of a run's shared-memory directory in the shared-memory root.
SHM_PREFIX = "daskpd-"

#: Seconds a side name without a lock file must stay unchanged before it is removed.
LOCKLESS_GRACE = 600.0

#: The lock descriptors this process holds: side name -> descriptor.
_HELD: dict[str, int] = {}
_HELD_LOCK = threading.Lock()


def lock_path(path) -> str:
    """The lock file of side name ``path``."""
    return os.fspath(path) + LOCK_SUFFIX


def claim(path, *, wait=True) -> bool:
    """Lock side name ``path`` for this process, before it is made; ``True`` when locked.

    The lock is held until :func:`release` (or :func:`remove`), or until the process ends.

    Parameters
    ----------
    path : str or path-like
        The side name (it need not exist yet).
    wait : bool, default=True
        Wait for the lock; ``False``: return ``False`` at once when another process (or
        another claim of this one) holds it.
    """
    path = os.fspath(path)
    with _HELD_LOCK:
        if path in _HELD:
            return False
    fd = _lock(lock_path(path), create=True, wait=wait)
    if fd is None:
        return False
    with _HELD_LOCK:
        _HELD[path] = fd
    return True


def release(path) -> None:
    """Let go of this process's lock on side name ``path`` and unlink its lock file (a no-op
    when this process holds none: the name was made by another process)."""
    path = os.fspath(path)
    with _HELD_LOCK:
        fd = _HELD.pop(path, None)
    if fd is None:
        return
    try:
        # unlinked while still locked: nobody can take a lock on the file any more
        if same_file(fd, lock_path(path)):
            os.unlink(lock_path(path))
    finally:
        os.close(fd)


def holds(path) -> bool:
    """Whether this process holds the lock of side name ``path``."""
    with _HELD_LOCK:
        return os.fspath(path) in _HELD


def create_directory(path, mode=0o777) -> str:
    """Lock side name ``path`` (:func:`claim`), then make it as a directory; return it."""
    path = os.fspath(path)
    claim(path)
    try:
        os.mkdir(path, mode)
    except BaseException:
        release(path)
        raise
    return path


def remove(path) -> None:
    """Remove ``path`` (a directory tree or a file; no error when it is gone) and let go of
    this process's lock on it, if any."""
    path = os.fspath(path)
    try:
        remove_path(path)
    finally:
        release(path)


def remove_path(path) -> None:
    """Remove a directory tree, a file or a link at ``path``; nothing if it is gone.

    Tasks of an interrupted run may still add files to a directory being removed (they
    finish their current piece): the removal is retried while the directory stays.
    """
    path = os.fspath(path)
    for _ in range(100):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        if not os.path.lexists(path):
            return
        time.sleep(0.01)


def remove_dead(path) -> bool:
    """Remove side name ``path`` (and its lock file) when its owner is dead; whether it was.

    Left alone: a name whose lock is held (by a live process, this one included), a name of
    another user, a name without a lock file changed less than :data:`LOCKLESS_GRACE`
    seconds ago.
    """
    path = os.fspath(path)
    lock = lock_path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and info.st_uid != os.getuid():
        return False
    fd = _lock(lock, create=False, wait=False)
    if fd is None:
        if os.path.lexists(lock):
            return False  # held: a live owner
        if info is None or time.time() - info.st_mtime < LOCKLESS_GRACE:
            return False
        remove_path(path)
        return True
    try:
        if os.fstat(fd).st_uid != os.getuid():
            return False
        if info is not None:
            remove_path(path)
        # last: while the lock file is there, nobody takes the name for a live one
        if same_file(fd, lock):
            os.unlink(lock)
    finally:
        os.close(fd)
    return info is not None


def sweep_in(directory, is_side) -> list[str]:
    """Remove the dead owners' side names among the entries of ``directory``.

    Parameters
    ----------
    directory : str or path-like
    is_side : callable
        ``is_side(name)``: whether an entry name (without :data:`LOCK_SUFFIX`) is a side name.

    Returns
    -------
    removed : list of str
        The side names removed (a lone lock file counts as its name).
    """
    directory = os.fspath(directory)
    try:
        names = set(os.listdir(directory))
    except OSError:
        return []
    sides = {name.removesuffix(LOCK_SUFFIX) for name in names}
    removed = []
    for name in sorted(sides):
        if not is_side(name):
            continue
        path = os.path.join(directory, name)
        if remove_dead(path):
            removed.append(path)
    return removed


def sweep(dest, tags=TAGS) -> list[str]:
    """Remove the dead owners' side names of destination ``dest`` (``DEST.<tag>-*``)."""
    dest = os.path.abspath(os.fspath(dest)).rstrip(os.sep)
    prefixes = tuple(f"{os.path.basename(dest)}.{tag}-" for tag in tags)
    return sweep_in(os.path.dirname(dest), lambda name: name.startswith(prefixes))


def shared_memory_root():
    """This process's directory for shared-memory files, or ``None`` where there is none."""
    configured = os.environ.get(SHM_ROOT_VARIABLE)
    if configured:
        return configured if os.path.isdir(configured) else None
    if sys.platform.startswith("linux") and os.path.isdir("/dev/shm"):
        return "/dev/shm"
    return None


def sweep_shared_memory() -> list[str]:
    """Remove the shared-memory directories of dead runs of this user (``<root>/daskpd-*``)."""
    root = shared_memory_root()
    if root is None:
        return []
    return sweep_in(root, lambda name: name.startswith(SHM_PREFIX))


def _lock(path, *, create, wait):
    """A descriptor of lock file ``path`` locked LOCK_EX, or ``None`` (held elsewhere with
    ``wait=False``, or no such file without ``create``)."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    while True:
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            return None
        except OSError:
            # not ours to open (another user's, a link): treated as held
            if not create:
                return None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if same_file(fd, path):
            return fd
        # unlinked by the one who held it before us: its name is free, or another's now
        os.close(fd)
        if not create:
            return None


def same_file(fd, path) -> bool:
    """Whether the open file ``fd`` is still the file named ``path`` (the lock protocol's
    test; also the store build lock's, :mod:`daskpd.io._cache`)."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
