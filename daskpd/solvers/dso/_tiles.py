"""DSO's tiles: read by the task on the worker that owns the row group, laid out for the visit
order (stored with the grid, else built), kept in a per-process cache, and the order each
epoch visits them in.

Symbols as in the paper-to-code table of :mod:`daskpd.solvers.dso`.
"""

from __future__ import annotations

import threading
import uuid

import numpy as np

from daskpd._cluster import worker_memory_limit
from daskpd.data import layout as _layout
from daskpd.kernels import dso as kernels
from daskpd.solvers.driver.seeds import block_seeds, epoch_seed
from daskpd.solvers.dso._options import _SEGMENT_ORDERS, _SUB_BLOCK_ORDERS

_CACHE_LOCK = threading.Lock()
_TILE_CACHE: dict = {}
_CACHE_USED = [0]


# The cache never takes a worker's memory above this fraction of its limit, below Dask's
# spill target (0.6): the cache cannot be spilled, so a worker it pushed past the pause
# threshold (0.8) would wait for memory that is never freed.
CACHE_RSS_FRACTION = 0.5


def _cache_budget(requested, limit):
    """Bytes of tiles a process may cache: ``requested``, else a quarter of its memory."""
    if requested is not None:
        return requested
    if limit:
        return limit // 4
    try:
        import psutil

        return int(psutil.virtual_memory().total) // 4
    except ImportError:
        return 0


def _cache_admits(size, requested):
    """Whether a tile of ``size`` bytes may join the cache (lock held)."""
    limit = worker_memory_limit()
    if _CACHE_USED[0] + size > _cache_budget(requested, limit):
        return False
    if not limit:
        return True
    import psutil

    return psutil.Process().memory_info().rss + size <= CACHE_RSS_FRACTION * limit


def _segments(rows):
    """Start offsets of the runs of equal row ids of a tile (its rows), plus the end."""
    if rows.shape[0] == 0:
        return np.zeros(1, dtype=np.int64)
    starts = np.flatnonzero(rows[1:] != rows[:-1]) + 1
    return np.concatenate(([0], starts, [rows.shape[0]])).astype(np.int64)


def _layout_cols(settings):
    """Columns per sub-block of the cached tile layout (0: one block, row-major)."""
    return settings.block_cols if settings.visit_order in _SUB_BLOCK_ORDERS else 0


def _tile_layout(settings):
    """The :class:`~daskpd.data.layout.TileLayout` of a run's tiles; None unless ``"shuffled"``."""
    if settings.visit_order != _layout.VISIT_ORDER:
        return None
    return _layout.TileLayout(settings.block_cols, settings.chunk_nnz)


def _stored_layout(data, settings):
    """Whether the run's tile layout is stored with the grid of ``data``, usable.

    Asked once per run, where the run starts: a stored layout that is stale (a grid stored
    again since) or records other parameters is reported there, by a warning naming it.
    Only a stored dataset's own tiles have one (not those of a view such as ``with_bias``).
    """
    layout = _tile_layout(settings)
    stored = getattr(data, "stored_layout", None)
    return layout is not None and stored is not None and stored(settings.grid, layout)


def _load_tile(source, settings, q, r):
    """Return ``(rows, cols, vals, segment_ptr, block_ptr)`` of tile ``(q, r)``.

    ``source`` is a dataset (``tile(P, q, r)``) or the tile's ``(rows, cols, vals)``. With
    ``visit_order="blocked"`` the nonzeros are regrouped by column sub-block
    (:func:`daskpd.kernels.dso.block_layout`), with ``"shuffled"`` also shuffled inside each
    sub-block and cut into chunks (:func:`daskpd.data.layout.build_tile_layout`); otherwise they
    stay in storage order as one block. With ``settings.stored_layout`` the ``"shuffled"``
    layout is read as stored with the grid (checked against its per-tile CRC32), the same
    bits without the building. Tiles of on-disk datasets are memoized per process within
    ``settings.cache_bytes``.
    """
    path = getattr(source, "path", None)
    block_cols = _layout_cols(settings)
    key = None
    if path is not None:
        key = (
            str(path), int(getattr(source, "nnz", -1)), settings.grid, q, r, block_cols,
            settings.visit_order == "shuffled" and settings.chunk_nnz,
        )  # fmt: skip
        with _CACHE_LOCK:
            hit = _TILE_CACHE.get(key)
        if hit is not None:
            return hit
    tile = None
    if settings.stored_layout and not isinstance(source, tuple):
        # None when the layout went stale since the run started (the dataset warns): built
        tile = source.layout_tile(settings.grid, _tile_layout(settings), q, r)
    if tile is None:
        tile = _build_tile(source, settings, q, r, block_cols)
    if key is not None:
        size = sum(part.nbytes for part in tile)
        with _CACHE_LOCK:
            # Keep, never evict: the access pattern is cyclic, where LRU eviction would
            # throw away exactly the tile needed next.
            if _cache_admits(size, settings.cache_bytes):
                _TILE_CACHE[key] = tile
                _CACHE_USED[0] += size
    return tile


def _warm_tile(source, settings, q, r):
    """Read tile ``(q, r)`` into this process's cache (:func:`_load_tile`); its nonzeros.

    Returns the count, not the tile: Dask would otherwise keep a second copy as the result.
    """
    return int(_load_tile(source, settings, q, r)[1].shape[0])


#: Bytes a cached tile takes per nonzero beyond its values: row and column ids (int32) and,
#: with room to spare, its segment and chunk offsets.
_TILE_BYTES_PER_NNZ = 10


def prefetch_tiles(client, data, settings, owner, budget):
    """Futures that read every worker's tiles into its cache while the run starts.

    The epochs read a tile where its row group lives and keep it (:func:`_load_tile`); read
    during the start instead, the first epoch costs what a steady one does, and the reads of
    a worker the start leaves idle overlap the start. The tasks run below the start's
    priority. Nothing is read when the tiles would not all fit the cache of their worker
    (``budget`` bytes; out of core each epoch reads them again anyway) or without a client.

    Parameters
    ----------
    client : distributed.Client or None
    data : Dataset
        On disk, with the grid of ``settings``.
    settings : _Settings
    owner : list of str
        The worker of each row group.
    budget : int
        Cache bytes of one worker.

    Returns
    -------
    list of distributed.Future
    """
    if client is None or not budget:
        return []
    p = settings.grid
    value_bytes = 0 if settings.binary else np.dtype(data.dtype).itemsize
    per_worker = {}
    for q in range(p):
        per_worker[owner[q]] = per_worker.get(owner[q], 0) + int(data.nnz) // p
    need = max(per_worker.values(), default=0) * (_TILE_BYTES_PER_NNZ + value_bytes)
    if need > budget:
        return []
    return [
        client.submit(
            _warm_tile,
            data,
            settings,
            q,
            r,
            workers=[owner[q]],
            allow_other_workers=False,
            pure=False,
            priority=-1,
            key=f"dso-warm-{q}-{r}-{uuid.uuid4().hex[:8]}",
        )  # fmt: skip
        for q in range(p)
        for r in range(p)
    ]


def _build_tile(source, settings, q, r, block_cols):
    """The layout of tile ``(q, r)`` built from its stored order (see :func:`_load_tile`)."""
    if isinstance(source, tuple):
        rows, cols, vals = source
    else:
        rows, cols, vals = source.tile(settings.grid, q, r)
    parts = list(_layout.tile_arrays(rows, cols, vals, settings.binary))
    # only the list holds the storage-order copy now: the shuffled layout's building drops it
    # before its own copy is made (two copies of the tile at a time, not three; out of core,
    # tiles are read again every epoch)
    del rows, cols, vals
    if settings.visit_order == "shuffled":
        place = (settings.grid, q, r)
        return _layout.build_tile_layout(parts, settings.binary, _tile_layout(settings), place)
    rows, cols, vals = parts
    if block_cols:
        return kernels.block_layout(rows, cols, vals, settings.binary, block_cols)
    segment_ptr = _segments(rows)
    block_ptr = np.array([0, segment_ptr.shape[0] - 1], dtype=np.int64)
    return rows, cols, vals, segment_ptr, block_ptr


#: Fewest chunks a sub-block of the ``"shuffled"`` layout is cut into (defined with the
#: layout, :mod:`daskpd.data.layout`).
MIN_CHUNKS = _layout.MIN_CHUNKS


def _visit_order(tile, settings, seed, epoch, q, r):
    """The visit order of tile ``(q, r)`` in ``epoch`` (a function of the seed only).

    Indices of segments for ``"shuffled"``, ``"blocked"`` and ``"rows"``, of nonzeros
    otherwise.
    """
    rows, _, _, segment_ptr, block_ptr = tile
    if settings.visit_order in _SEGMENT_ORDERS:
        n_items = segment_ptr.shape[0] - 1
    else:
        n_items = rows.shape[0]
    if settings.visit_order == "storage":
        return np.arange(n_items, dtype=np.int64)
    tile_seed = block_seeds(epoch_seed(seed, epoch), settings.grid * settings.grid)[
        q * settings.grid + r
    ]
    rng = np.random.default_rng(tile_seed)
    if settings.visit_order not in _SUB_BLOCK_ORDERS:
        return rng.permutation(n_items).astype(np.int64)
    # sub-blocks in a random order, the segments (chunks or rows) of each in a random order
    parts = [
        block_ptr[b] + rng.permutation(int(block_ptr[b + 1] - block_ptr[b]))
        for b in rng.permutation(block_ptr.shape[0] - 1)
    ]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def _kernel_segments(tile, settings):
    """``segment_ptr`` for :func:`daskpd.kernels.dso.dso_tile`: empty for nonzero orders."""
    if settings.visit_order in _SEGMENT_ORDERS:
        return tile[3]
    return np.zeros(0, np.int64)


def _plain_tile(data, grid, q, r):
    rows, cols, vals = data.tile(grid, q, r)
    return (np.asarray(rows), np.asarray(cols), None if vals is None else np.asarray(vals))
