"""Rows read again by every round, a chunk of row blocks at a time: what a method needs to
train on row groups larger than their owners' memory (CoCoA+ and ``tron``).

A method's options say where a group's rows are between rounds (``rows``: ``"memory"``,
``"stream"`` or ``"auto"``, :func:`check_rows`); :func:`streams` applies the ``"auto"``
rule, :func:`chunk_nnz` sizes a chunk from the owner's memory limit once the method has
counted what else its round holds, :func:`block_bounds` and :func:`block_chunks` cut a
group's rows into chunks of whole row blocks (one contiguous read each), and
:func:`prefetched` reads the next chunk in a thread while the kernels work on this one.
"""

from __future__ import annotations

import numpy as np

from daskpd.solvers.common.groups import is_on_disk

__all__ = [
    "MIN_STREAM_NNZ",
    "ROWS",
    "STREAM_CHUNK_NNZ",
    "STREAM_MEMORY_SHARE",
    "STREAM_SHARE",
    "WORKER_BASE_BYTES",
    "block_bounds",
    "block_chunks",
    "bytes_per_nnz",
    "check_rows",
    "chunk_nnz",
    "kept_bytes",
    "memory_limits",
    "prefetched",
    "streams",
]

#: the values of a method's ``rows`` option
ROWS = ("auto", "memory", "stream")

#: ``rows="auto"`` streams a group whose kept rows would take more than this share of its
#: owner's memory limit: the rest is for the run's vectors, the round's buffers and Dask
#: (spilling starts at 60%, pausing at 80%).
STREAM_SHARE = 0.4

#: Share of the owner's memory limit a streamed round may fill in all: below Dask's pause
#: threshold (0.8), which CoCoA+'s first version crossed at 5e9 nonzeros (BENCHMARKS.md).
STREAM_MEMORY_SHARE = 0.6

#: What a worker process holds before any data: Python, NumPy, Dask and the loaded kernels
#: (an idle worker's, as measured in BENCHMARKS.md).
WORKER_BASE_BYTES = 400 << 20

#: Nonzeros of a chunk of streamed rows when the owner has no memory limit, and the least
#: a chunk gets when the limit leaves no room (the run may then exceed the limit).
STREAM_CHUNK_NNZ = 1 << 25
MIN_STREAM_NNZ = 1 << 20


def check_rows(rows, stream_nnz):
    """Raise ``ValueError`` unless ``rows`` is one of :data:`ROWS` and ``stream_nnz`` a
    positive integer or None (a method's options' check)."""
    if stream_nnz is not None and (
        isinstance(stream_nnz, bool)
        or not isinstance(stream_nnz, int | np.integer)
        or stream_nnz < 1
    ):
        raise ValueError(f"stream_nnz must be a positive integer or None, got {stream_nnz!r}")
    if rows not in ROWS:
        raise ValueError(f"rows must be 'auto', 'memory' or 'stream', got {rows!r}")


def bytes_per_nnz(data):
    """Bytes of a nonzero as the kernels read it: its int32 column id and its value (none
    for binary data)."""
    values = 0 if getattr(data, "binary", False) else np.dtype(data.dtype).itemsize
    return 4 + values


def kept_bytes(data, start, stop):
    """Bytes of rows ``start:stop`` as a kept group holds them (ids, values, per-row arrays)."""
    n = int(data.n_samples)
    nnz = int(data.nnz) * (stop - start) // max(n, 1)
    return nnz * bytes_per_nnz(data) + (stop - start) * (8 + 3 * 8)


def memory_limits(client, rows):
    """The workers' memory limits by address when ``rows`` may stream on ``client`` (else
    none: nothing to decide)."""
    if client is None or rows == "memory":
        return {}
    from daskpd._cluster import worker_memory_limits

    return worker_memory_limits(client)


def streams(rows, data, client, owners, ranges, limits):
    """Whether the groups' rows are read by every round: ``rows`` (a method's option) unless
    ``"auto"``, which streams when, on a cluster and for data on disk, the rows of some group
    (rows ``ranges[k]`` on ``owners[k]``), as the kernels keep them, would take more than
    :data:`STREAM_SHARE` of its owner's memory limit (``limits``: by address; 0 or missing:
    no limit)."""
    if rows != "auto":
        return rows == "stream"
    if client is None or not is_on_disk(data):
        return False
    for owner, (start, stop) in zip(owners, ranges, strict=True):
        limit = limits.get(owner, 0)
        if limit and kept_bytes(data, start, stop) > STREAM_SHARE * limit:
            return True
    return False


def chunk_nnz(limit, fixed_bytes, nnz_bytes):
    """Nonzeros of a chunk of streamed rows for an owner of memory limit ``limit`` bytes (0:
    none, :data:`STREAM_CHUNK_NNZ`): what :data:`STREAM_MEMORY_SHARE` of the limit leaves
    after ``fixed_bytes`` (the worker and the round's other arrays, as the method counts
    them), at ``nnz_bytes`` a nonzero (every chunk it holds at once), at least
    :data:`MIN_STREAM_NNZ`."""
    if not limit:
        return STREAM_CHUNK_NNZ
    room = STREAM_MEMORY_SHARE * limit - fixed_bytes
    return max(MIN_STREAM_NNZ, int(room) // int(nnz_bytes))


def block_bounds(source, start, stop):
    """The bounds of ``source``'s row blocks cut to rows ``start:stop`` (absolute row
    numbers, int64, from ``start`` to ``stop``): a chunk is a run of these, one contiguous
    read."""
    edges = np.asarray(source.row_block_bounds, dtype=np.int64)
    inner = edges[(edges > start) & (edges < stop)]
    return np.concatenate([[start], inner, [stop]]).astype(np.int64)


def block_chunks(order, bounds, nnz, stream_nnz):
    """``order``'s row blocks (indices into ``bounds``' blocks) in consecutive lists of about
    ``stream_nnz`` nonzeros, by the mean of the ``nnz`` nonzeros of the blocks; at least one
    block a list."""
    n_blocks = len(bounds) - 1
    per_block = max(1, int(nnz) // max(1, n_blocks))
    size = max(1, int(stream_nnz) // per_block)
    return [order[k : k + size] for k in range(0, len(order), size)]


def prefetched(read, items):
    """``read(item)`` for each of ``items`` in order, the next one read in a thread while
    the caller works on this one (the kernels and zarr's decompression release the GIL):
    two chunks in memory at a time, the read hidden behind the work where it is shorter."""
    from concurrent.futures import ThreadPoolExecutor

    items = list(items)
    if not items:
        return
    with ThreadPoolExecutor(1) as reader:
        pending = reader.submit(read, items[0])
        for j in range(len(items)):
            result = pending.result()
            if j + 1 < len(items):
                pending = reader.submit(read, items[j + 1])
            yield result
