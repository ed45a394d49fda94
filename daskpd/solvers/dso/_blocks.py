"""DSO's ``w`` blocks between tasks: packed column records (:class:`_ColumnBlock`), handed
between the worker processes of one machine through shared memory
(:mod:`daskpd.solvers.common.shared`), and the pool of recycled output buffers.
"""

from __future__ import annotations

import logging
import threading
import weakref

import numpy as np

from daskpd._cluster import worker_memory_limit
from daskpd.kernels import dso as kernels
from daskpd.solvers.common import shared as _shared

# the package's logger, as before it was cut into modules
_LOG = logging.getLogger(__package__)


class _ColumnBlock:
    """The state of a ``w`` block between tasks: ``(w, w_acc, w_snap, u_snap)``.

    The kernel works on packed records, one cache line per column
    (:func:`daskpd.kernels.dso.pack_columns`). Packing a large block and unpacking it again
    costs a noticeable share of an epoch (BENCHMARKS.md), so a block stays packed, and the
    next task, its last reader, updates those records in place.

    Records in a process's own memory travel as the four plain arrays when pickled (sent to
    another worker or the client, spilled): half the bytes of the records, which carry
    ``1 / |Omegabar_j|`` and padding; the receiving task packs them into new records.
    Records in a shared-memory file of the run (:mod:`daskpd.solvers.common.shared`) travel as
    the file's handle, and the receiver maps the same pages: every process of one machine
    updates the block where it is. Such a block is sent to another machine (or a client
    there) only as :meth:`plain` arrays.

    Indexing and iteration give the four arrays (views into the records when packed), like
    the tuple this replaces.
    """

    __slots__ = ("_arrays", "_records", "_shared", "__weakref__")

    def __init__(self, w, w_acc, w_snap, u_snap):
        self._arrays = (w, w_acc, w_snap, u_snap)
        self._records = None
        self._shared = None

    @classmethod
    def of_records(cls, records, shared=None):
        """A block held as packed records (``pack_columns``'s layout).

        ``shared``: the handle of the shared file the records are mapped from, if they are.
        """
        block = cls.__new__(cls)
        block._arrays = None
        block._records = records
        block._shared = shared
        return block

    def parts(self):
        """``(w, w_acc, w_snap, u_snap)``; the snapshots are empty when not taken."""
        if self._records is None:
            return self._arrays
        records, empty = self._records, np.zeros(0)
        snapshots = records.shape[1] == kernels.COL_WIDTH_SVRG
        return (
            records[:, kernels.COL_W],
            records[:, kernels.COL_W_ACC],
            records[:, kernels.COL_W_SNAP] if snapshots else empty,
            records[:, kernels.COL_U_SNAP] if snapshots else empty,
        )

    @property
    def records(self):
        """The packed records (``None`` for a block of plain arrays)."""
        return self._records

    def packed(self, inv_col_nnz, share=None):
        """This block if packed, else its arrays packed into new records.

        ``share``: ``(run, file name)`` of the shared file to put new records in (see
        :mod:`daskpd.solvers.common.shared`); ``None`` for this process's memory.
        """
        if self._records is not None:
            return self
        w, w_acc, w_snap, u_snap = self._arrays
        svrg = w_snap.shape[0] == w.shape[0] > 0
        width = kernels.COL_WIDTH_SVRG if svrg else kernels.COL_WIDTH
        n = w.shape[0] * width
        shared = None
        out = None
        if share is not None and n > 0:
            try:
                out, shared = _shared.create(*share, (n,))
            except OSError as exc:
                # /dev/shm full: the block stays in this process and travels by Dask
                _LOG.warning("w block kept in process memory: %s", exc)
        if out is None:
            out = _OUTPUTS.empty(n)
        records = kernels.pack_columns(w, w_acc, inv_col_nnz, w_snap, u_snap, out=out)
        return _ColumnBlock.of_records(records, shared)

    @property
    def shared(self):
        """The handle of the shared file holding the records, or ``None``."""
        return self._shared

    def plain(self):
        """This block as four plain arrays in this process (what goes to another machine)."""
        if self._records is None:
            return self
        return _ColumnBlock(*self._plain_arrays())

    def _plain_arrays(self):
        n = self._records.shape[0]
        w, w_acc = np.empty(n), np.empty(n)
        kernels.unpack_columns(self._records, w, w_acc)
        _, _, w_snap, u_snap = self.parts()
        return w, w_acc, np.ascontiguousarray(w_snap), np.ascontiguousarray(u_snap)

    @property
    def nbytes(self):
        """Bytes held (Dask's memory accounting)."""
        if self._records is not None:
            return self._records.nbytes
        return sum(part.nbytes for part in self._arrays)

    def __getitem__(self, k):
        return self.parts()[k]

    def __iter__(self):
        return iter(self.parts())

    def __len__(self):
        return 4

    def __reduce__(self):
        if self._shared is not None:
            return _attached_block, (self._shared, self._records.shape)
        if self._records is None:
            return _ColumnBlock, self._arrays
        return _ColumnBlock, self._plain_arrays()


def _attached_block(handle, shape):
    """Unpickle a block whose records are in a shared file: map them."""
    return _ColumnBlock.of_records(_shared.attach(handle, shape), handle)


def _register_sizeof():
    from dask.sizeof import sizeof

    sizeof.register(_ColumnBlock)(lambda block: block.nbytes)


_register_sizeof()


class _Lease:
    """Exposes a pooled buffer as an array; collected when the last view of it dies."""

    def __init__(self, raw):
        self.raw = raw
        self.__array_interface__ = raw.__array_interface__


class _OutputPool:
    """Float64 buffers for the ``w`` blocks that tasks return, recycled within a process.

    A task that may not update a ``w`` block in place packs it into new records (see
    :class:`_ColumnBlock`), and the averages are new arrays every epoch. On a Dask worker
    every large allocation is new memory (the nanny sets ``MALLOC_TRIM_THRESHOLD_``), and
    its page faults (numpy asks for huge pages, whose compaction stalls) cost as much as
    the kernel's own work on a block of sparse columns. A buffer handed
    out is exposed through a :class:`_Lease`; numpy keeps the lease alive while any view of
    the array lives, and when it is collected the buffer comes back here, at most
    ``per_size`` of a length and ``max_bytes`` in all.
    """

    def __init__(self, per_size=4):
        self.per_size = per_size
        self.free = {}
        self.held = 0
        # re-entrant: a lease may be collected, and give its buffer back, while the pool's
        # lock is held by the same thread
        self.lock = threading.RLock()

    def empty(self, n):
        """A float64 array of length ``n`` (contents undefined)."""
        with self.lock:
            stack = self.free.get(n)
            raw = stack.pop() if stack else None
            if raw is not None:
                self.held -= raw.nbytes
        if raw is None:
            raw = np.empty(n)
        lease = _Lease(raw)
        weakref.finalize(lease, self._give_back, raw).atexit = False
        return np.asarray(lease)

    def _give_back(self, raw):
        limit = worker_memory_limit()
        max_bytes = limit // 16 if limit else 1 << 30
        with self.lock:
            stack = self.free.setdefault(raw.shape[0], [])
            if len(stack) < self.per_size and self.held + raw.nbytes <= max_bytes:
                stack.append(raw)
                self.held += raw.nbytes


_OUTPUTS = _OutputPool()
