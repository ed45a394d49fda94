"""Arrays handed between the processes of one machine through shared memory.

DSO's ``w`` blocks change worker every round. Between two worker processes, Dask sends a
block over TCP: pickled, copied through the kernel's socket buffers, unpickled into new
memory on the other side. On one machine that work runs on the cores the kernels need
(BENCHMARKS.md, DSO). Here an array lives in a file
of a RAM-backed file system (``/dev/shm``, or ``$DASKPD_SHM_DIR``), mapped by every process
that holds it: a block sent to another process of the same machine is the file's name, and
the receiver maps the same pages.

A run has one directory on every machine, ``<root>/daskpd-<token>``. The processes that see
the same directory (one machine, or containers sharing its ``/dev/shm``) form a *domain*,
named by a random id that the first of them writes into the directory. A handle carries its
domain; the caller sends shared arrays only inside their domain and plain arrays across
(:func:`join`, :class:`SharedRun`).

The process that makes a machine's directory (the client on its own machine, the first
worker to join on another) holds its lock until it removes it (:mod:`daskpd._sidefiles`): a
killed run's directory, whose lock nobody holds any more, is removed by the next run that
opens shared memory on that machine (:func:`open_run` sweeps there and on the workers), and
by every ``daskpd`` command, at its start and at its end.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import secrets
import threading
import weakref

import numpy as np

from daskpd import _sidefiles

_LOG = logging.getLogger(__name__)

#: Environment variable naming the RAM-backed directory to use instead of ``/dev/shm``.
ROOT_VARIABLE = _sidefiles.SHM_ROOT_VARIABLE

#: This process's mappings, file path -> (inode, array). A block comes back to a process
#: every epoch; mapped afresh, its first touches fault in every page again (MAP_POPULATE no
#: cheaper; BENCHMARKS.md), kept mapped they cost nothing. An entry goes
#: when its run is removed here, or its directory is found gone.
_MAPPED = {}
_MAPPED_LOCK = threading.Lock()

#: Fraction of a Dask worker's memory limit its kept mappings may take. Mapped pages count
#: in the process's resident memory, which Dask holds against the limit, although every
#: process of the machine maps the same pages: past this share, a block is mapped for its
#: task only (the first ones stay kept: the blocks come round in a cycle, where replacing
#: the oldest would drop the one needed next).
KEEP_FRACTION = 0.125


class SharedStateLost(RuntimeError):
    """A shared array is not in the state its handle promised (see its raiser).

    A task that updates a shared array in place and died half-way (its worker lost) leaves
    the array changed: a retry of that task, or of one before it, would start from it as if
    it were the handed-over state. The driver treats this as a lost worker and replays the
    epoch from its recovery point.
    """


def root():
    """This process's directory for shared files, or ``None`` where there is none."""
    return _sidefiles.shared_memory_root()


def run_dir(run):
    """This process's directory of the run called ``run`` (it may not exist)."""
    base = root()
    return None if base is None else os.path.join(base, run)


def join(run):
    """Make or join this machine's directory of ``run``; return its domain id.

    Runs in every process of a run (the client and, through ``client.run``, each worker).
    Processes that return the same id share the directory's files. ``None``: no shared
    memory here (no ``/dev/shm``, or it is not writable).
    """
    path = run_dir(run)
    if path is None:
        return None
    marker = os.path.join(path, "domain")
    try:
        if not os.path.isdir(path):
            # the first process here to make it owns it; the others (lock taken) join it
            _sidefiles.claim(path, wait=False)
        os.makedirs(path, mode=0o700, exist_ok=True)
        # The first process to link its id in place names the domain; a link is atomic, so
        # nobody reads a half-written id.
        proposal = f"{marker}.{os.getpid()}-{secrets.token_hex(4)}"
        with open(proposal, "w") as f:
            f.write(secrets.token_hex(16))
        try:
            with contextlib.suppress(FileExistsError):
                os.link(proposal, marker)
        finally:
            os.unlink(proposal)
        with open(marker) as f:
            return f.read()
    except OSError:
        return None


def remove(run):
    """Remove this machine's directory of ``run`` (mapped arrays stay valid until unmapped),
    and let go of its lock where this process made it."""
    path = run_dir(run)
    if path is not None:
        _sidefiles.remove(path)
    _forget_gone()


def sweep_and_join(run):
    """:func:`join`, after removing the directories of this machine's dead runs."""
    _sidefiles.sweep_shared_memory()
    return join(run)


class SharedRun:
    """The shared-memory directories of a run: where they are, who shares which.

    Parameters
    ----------
    name : str
        The directory's name on every machine.
    domains : dict
        Worker address -> domain id (``None``: that worker has no shared memory).
    client_domain : str or None
        The domain of the process that made this object.
    client : distributed.Client
        To remove the directories on the workers' machines.
    """

    def __init__(self, name, domains, client_domain, client):
        self.name = name
        self.domains = dict(domains)
        self.client_domain = client_domain
        self._client = client
        # the backstop when close() is never called: this machine's directory at least
        self._remove_here = weakref.finalize(self, remove, name)

    def same(self, a, b):
        """Whether workers ``a`` and ``b`` (``None``: this process) share their arrays."""
        da = self.client_domain if a is None else self.domains.get(a)
        db = self.client_domain if b is None else self.domains.get(b)
        return da is not None and da == db

    def close(self):
        """Remove the run's directory on every machine (best effort: a lost worker's stays)."""
        client, self._client = self._client, None
        if client is not None and client.status == "running":
            try:
                client.run(remove, self.name, on_error="ignore")
            except Exception as exc:  # noqa: BLE001
                # the run is over either way; what stays is in RAM-backed files that the
                # machine's own cleanup (or a reboot) removes
                _LOG.warning("shared-memory files of %s not removed: %s", self.name, exc)
        self._remove_here()


def open_run(client, token):
    """A :class:`SharedRun` for a new run on ``client``'s workers, or ``None``.

    ``None`` when no two of the workers share a domain, nor any worker with this process:
    there is nothing to hand over through shared memory (blocks travel by Dask).
    """
    if client is None:
        return None
    name = f"{_sidefiles.SHM_PREFIX}{token}"
    try:
        # the client's own join inside too: a signal after it made the directory, before
        # it returned, would leave the directory with this process's lock held until exit
        client_domain = sweep_and_join(name)
        domains = client.run(sweep_and_join, name)
    except BaseException:
        # interrupted before a SharedRun (whose close or collection removes it) exists
        remove(name)
        raise
    ids = [d for d in domains.values() if d is not None]
    if len(set(ids)) == len(ids) and client_domain not in ids:
        client.run(remove, name, on_error="ignore")
        remove(name)
        return None
    return SharedRun(name, domains, client_domain, client)


def create(run, name, shape):
    """A new float64 array of ``shape`` in file ``name`` of the run (replacing any there).

    The space is reserved before mapping: a full ``/dev/shm`` raises ``OSError`` here
    rather than killing the process with SIGBUS on a later write. A file already there is
    replaced by a rename, so processes still mapping it keep their pages.

    Returns
    -------
    array : ndarray
        Zero-filled, writable, mapped from the file.
    handle : tuple
        What :func:`attach` maps again, in this domain: ``(run, name, domain, inode)``.
        The inode makes sure a handle never maps a newer file that replaced its own.
    """
    directory = run_dir(run)
    if directory is None:
        raise OSError(f"no shared-memory directory in this process for run {run}")
    domain = _domain_of(directory)
    nbytes = int(np.prod(shape)) * 8
    path = os.path.join(directory, name)
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
    _remember(path, inode, array)
    return array, (run, name, domain, inode)


def reuse(run, name, shape):
    """The float64 array of file ``name`` of the run, as :func:`create` returns it, reusing
    the file this process made or mapped last when it is still there with ``shape``.

    A file made anew has pages that every process touches for the first time (reserving and
    filling them costs several times filling a mapped one, and the other processes fault
    them in again; BENCHMARKS.md). The contents of a reused file are what was left
    in it, not zeros: the caller writes every element.

    Returns
    -------
    array, handle
        As :func:`create`.
    """
    directory = run_dir(run)
    if directory is not None:
        path = os.path.join(directory, name)
        with _MAPPED_LOCK:
            known = _MAPPED.get(path)
        if known is not None and known[1].shape == tuple(shape):
            try:
                inode = os.stat(path).st_ino
            except FileNotFoundError:
                inode = None
            domain = _domain_of(directory)
            if inode == known[0] and domain is not None:
                return known[1].view(), (run, name, domain, inode)
    return create(run, name, shape)


def attach(handle, shape):
    """Map the array of ``handle`` (from :func:`create`): the same pages, writable.

    Raises
    ------
    RuntimeError
        The array is in another domain (another machine), or another file replaced it.
    FileNotFoundError
        Its run's directory is gone.
    """
    run, name, domain, inode = handle
    directory = run_dir(run)
    if directory is None or not os.path.isdir(directory):
        raise FileNotFoundError(f"shared array {name}: the directory of {run} is gone")
    if _domain_of(directory) != domain:
        raise RuntimeError(
            f"shared array {name} of {run} is in the memory of another machine; the caller "
            "must send it as plain arrays"
        )
    path = os.path.join(directory, name)
    shape = tuple(shape)
    if os.stat(path).st_ino == inode:
        with _MAPPED_LOCK:
            known = _MAPPED.get(path)
        if known is not None and known[0] == inode and known[1].shape == shape:
            return known[1].view()
    fd = os.open(path, os.O_RDWR)
    try:
        array, found = _map(fd, shape, int(np.prod(shape)) * 8)
    finally:
        os.close(fd)
    if found != inode:
        raise RuntimeError(f"shared array {path} was replaced by a newer one")
    _remember(path, inode, array)
    return array.view()


def _domain_of(directory):
    try:
        with open(os.path.join(directory, "domain")) as f:
            return f.read()
    except FileNotFoundError:
        return None


def _remember(path, inode, array):
    """Keep ``array`` mapped for the next :func:`attach` of ``path`` in this process."""
    from daskpd._cluster import worker_memory_limit

    _forget_gone()
    limit = worker_memory_limit()
    with _MAPPED_LOCK:
        # a newer file of the same name replaces its entry
        _MAPPED.pop(path, None)
        kept = sum(a.nbytes for _, a in _MAPPED.values())
        if not limit or kept + array.nbytes <= KEEP_FRACTION * limit:
            _MAPPED[path] = (inode, array)


def _forget_gone():
    """Unmap (once their last user lets go) the arrays of runs whose directory is gone."""
    with _MAPPED_LOCK:
        for path in [p for p in _MAPPED if not os.path.isdir(os.path.dirname(p))]:
            del _MAPPED[path]


def _map(fd, shape, nbytes):
    # the mapping outlives fd; the array keeps the mmap object, which unmaps when collected
    buffer = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED)
    return np.frombuffer(buffer, dtype=np.float64).reshape(shape), os.fstat(fd).st_ino
