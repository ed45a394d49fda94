"""Arrays handed between the processes of one machine through shared memory.

DSO's ``w`` blocks change worker every round. Between two worker processes, Dask sends a
block over TCP: pickled, copied through the kernel's socket buffers, unpickled into new
memory on the other side. On one machine that work runs on the cores the kernels need (a
37 MB block took 34-177 ms a round on 2 cores, BENCHMARKS.md). Here an array lives in a file
of a RAM-backed file system (``/dev/shm``), mapped by every process that holds it: a block
sent to another process is its file's name, and the receiver maps the same pages.

A run's files sit in one directory (:class:`SharedDir`), removed with the run's last
reference to it, or at exit. :func:`shared_dir` makes one only when the client and every
worker see the same ``/dev/shm`` (one machine, or containers sharing it); otherwise the
arrays stay private and travel by Dask as before.
"""

from __future__ import annotations

import mmap
import os
import secrets
import shutil
import sys
import weakref

import numpy as np

#: Where the shared files live: a RAM-backed file system on Linux.
ROOT = "/dev/shm"


class SharedDir:
    """A directory of shared arrays, removed when this object is collected (or at exit)."""

    def __init__(self, path):
        self.path = path
        self._remove = weakref.finalize(self, shutil.rmtree, path, True)

    def file(self, name):
        """Path of the array called ``name``."""
        return os.path.join(self.path, name)

    def remove(self):
        """Remove the directory now (mapped arrays stay valid until unmapped)."""
        self._remove()


def _sees(path, secret):
    """On a worker: whether ``path`` holds ``secret`` and this process may add files."""
    try:
        with open(path, "rb") as f:
            same = f.read() == secret
        probe = f"{path}.{os.getpid()}"
        with open(probe, "wb"):
            pass
        os.unlink(probe)
    except OSError:
        return False
    return same


def shared_dir(client, token):
    """A new :class:`SharedDir` for a run, or ``None`` when shared memory cannot be used.

    ``None`` off Linux, without a writable ``/dev/shm``, or when a worker does not see the
    file the client writes there (another machine, another container).
    """
    if client is None or not sys.platform.startswith("linux") or not os.path.isdir(ROOT):
        return None
    path = os.path.join(ROOT, f"daskpd-{os.getpid()}-{token}")
    try:
        os.mkdir(path, 0o700)
    except OSError:
        return None
    directory = SharedDir(path)
    secret = secrets.token_bytes(16)
    probe = directory.file("probe")
    with open(probe, "wb") as f:
        f.write(secret)
    try:
        seen = client.run(_sees, probe, secret)
    finally:
        os.unlink(probe)
    if not seen or not all(seen.values()):
        directory.remove()
        return None
    return directory


def create(path, shape):
    """A new float64 array of ``shape`` in the file ``path`` (replacing any file there).

    The space is reserved before mapping: a full ``/dev/shm`` raises ``OSError`` here
    rather than killing the process with SIGBUS on a later write. A file already at
    ``path`` is replaced by a rename, so processes still mapping it keep their pages.

    Returns
    -------
    array : ndarray
        Zero-filled, writable, mapped from ``path``.
    inode : int
        The file's inode: :func:`attach` checks it, so that a handle never maps a newer
        file that replaced the one it was made for.
    """
    nbytes = int(np.prod(shape)) * 8
    tmp = f"{path}.{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.posix_fallocate(fd, 0, nbytes)
        array, inode = _map(fd, shape, nbytes)
        os.rename(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    finally:
        os.close(fd)
    return array, inode


def attach(path, inode, shape):
    """Map the array that :func:`create` made at ``path`` (the same pages, writable).

    Raises
    ------
    FileNotFoundError
        The file is gone (its run ended).
    RuntimeError
        Another file replaced it.
    """
    fd = os.open(path, os.O_RDWR)
    try:
        array, found = _map(fd, shape, int(np.prod(shape)) * 8)
    finally:
        os.close(fd)
    if found != inode:
        raise RuntimeError(f"shared array {path} was replaced by a newer one")
    return array


def _map(fd, shape, nbytes):
    # the mapping outlives fd; the array keeps the mmap object, which unmaps when collected
    buffer = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED)
    return np.frombuffer(buffer, dtype=np.float64).reshape(shape), os.fstat(fd).st_ino
