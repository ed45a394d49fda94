"""DSO's visit layout of a tile: how it is built, and the pieces that store it with a grid.

With DSO's default ``visit_order="shuffled"`` a tile's nonzeros are regrouped by column
sub-block (``block_cols`` columns, so that the sub-block's slice of ``w`` stays in a core's
cache), shuffled inside each sub-block with a pseudo-random order that is a function of the
tile's place ``(P, q, r)`` in the grid only, and cut into chunks. Building this costs about as
much as a DSO epoch over the tile, so it is built once, not in each run's first epoch. It depends on
the tile's data and on :class:`TileLayout` (``block_cols``, ``chunk_nnz``,
:data:`MIN_CHUNKS`, :data:`LAYOUT_VERSION`), so :func:`daskpd.data.partition_dataset`
stores it under ``grids/<P>/layouts/<name>/`` for the layouts it is asked for (format in the
docstring of :mod:`daskpd.data.format`) and a run whose options give the same
:class:`TileLayout` reads it instead of building it.

Readers are in :mod:`daskpd.data.layout_reader` (``Dataset.stored_layout``, ``layout_tile``); the
solver (:mod:`daskpd.solvers.dso`) builds with :func:`build_tile_layout` when nothing usable
is stored, so a stored and a built layout are the same bits by construction.
"""

from __future__ import annotations

import os
import zlib
from typing import NamedTuple

import numpy as np
import zarr

from daskpd.data.format import NO_VALUES, DatasetIntegrityError
from daskpd.data.grid import TILE_ARRAYS

# numba and scipy are imported in the functions that use them: opening a dataset and reading
# its rows needs neither (daskpd/data/base.py, test_dataset's import test).

#: Version of the layout algorithm (sub-blocks, shuffle, chunking). Bumped whenever
#: :func:`build_tile_layout` would give other bits, so that layouts stored by an older daskpd
#: are recognised as built for other parameters and not used.
LAYOUT_VERSION = 1

#: Fewest chunks a sub-block of the ``"shuffled"`` layout is cut into (when it has that many
#: nonzeros): below ``MIN_CHUNKS * chunk_nnz`` nonzeros the chunks shrink.
MIN_CHUNKS = 256

#: The visit order whose layout can be stored.
VISIT_ORDER = "shuffled"

#: Arrays of a stored layout checked tile by tile, in the order of the columns of its
#: ``tile_crc32`` table.
LAYOUT_ARRAYS = (*TILE_ARRAYS, "chunk_ptr", "block_ptr")

#: Bytes of one packed ``w`` column in DSO's kernel: 4 float64, 8 with the SVRG snapshot terms.
PACKED_COLUMN_BYTES = {False: 32, True: 64}


def sub_block_columns(block_bytes, svrg) -> int:
    """Columns of a DSO sub-block whose packed ``w`` columns take ``block_bytes`` bytes."""
    return max(1, int(block_bytes) // PACKED_COLUMN_BYTES[bool(svrg)])


class TileLayout(NamedTuple):
    """Parameters of DSO's ``"shuffled"`` tile layout (what a stored one is keyed by).

    Attributes
    ----------
    block_cols : int
        Columns per sub-block (DSO: ``block_bytes`` over 32 bytes a column, 64 with SVRG).
    chunk_nnz : int
        Nonzeros per chunk.
    """

    block_cols: int
    chunk_nnz: int

    @classmethod
    def for_dso(cls, *, block_bytes=1 << 19, chunk_nnz=1024, svrg=False) -> TileLayout:
        """The layout of DSO runs with these options (defaults: :class:`DSOOptions`'s).

        Parameters
        ----------
        block_bytes : int, default=524288
        chunk_nnz : int, default=1024
        svrg : bool, default=False
            Whether the runs take SVRG snapshots (DSO does by default from ``init="dcd"``
            or a warm start): the packed columns are then twice as wide.

        Returns
        -------
        TileLayout
        """
        return cls(sub_block_columns(block_bytes, svrg), int(chunk_nnz))

    @property
    def name(self) -> str:
        """Directory name of the stored layout: every parameter it depends on."""
        return (
            f"{VISIT_ORDER}-v{LAYOUT_VERSION}-b{int(self.block_cols)}-c{int(self.chunk_nnz)}"
            f"-m{MIN_CHUNKS}"
        )

    def attributes(self) -> dict:
        """The parameters as recorded in a stored layout's attributes."""
        return {
            "visit_order": VISIT_ORDER,
            "layout_version": LAYOUT_VERSION,
            "block_cols": int(self.block_cols),
            "chunk_nnz": int(self.chunk_nnz),
            "min_chunks": MIN_CHUNKS,
        }


#: What :func:`daskpd.data.partition_dataset` stores by default: the layouts of DSO's
#: default options from zero (no SVRG) and from a start (``init`` "cocoa" or "dcd", or a
#: warm start, where SVRG is on by default and the packed columns are twice as wide).
#: ``tests/data/test_dso_layout.py`` checks that they still are.
DEFAULT_LAYOUTS = (TileLayout.for_dso(), TileLayout.for_dso(svrg=True))


def check_layouts(layouts) -> tuple:
    """Validate a sequence of :class:`TileLayout`; return it as a tuple without repeats."""
    if isinstance(layouts, TileLayout):
        raise TypeError("layouts must be a sequence of TileLayout, got a single TileLayout")
    checked = []
    for layout in layouts:
        if not isinstance(layout, TileLayout):
            raise TypeError(f"layouts must hold TileLayout values, got {layout!r}")
        if int(layout.block_cols) < 1 or int(layout.chunk_nnz) < 1:
            raise ValueError(f"block_cols and chunk_nnz must be >= 1, got {layout!r}")
        layout = TileLayout(int(layout.block_cols), int(layout.chunk_nnz))
        if layout not in checked:
            checked.append(layout)
    return tuple(checked)


# --------------------------------------------------------------------------------------------
# building


def tile_arrays(rows, cols, vals, binary):
    """A tile's arrays as the layout kernels take them (int32 ids, values or an empty array)."""
    rows = np.ascontiguousarray(rows, dtype=np.int32)
    cols = np.ascontiguousarray(cols, dtype=np.int32)
    if binary or vals is None:
        vals = NO_VALUES
    else:
        vals = np.ascontiguousarray(vals)
    return rows, cols, vals


def build_tile_layout(parts, binary, layout, place):
    """Build the ``"shuffled"`` layout of one tile.

    Parameters
    ----------
    parts : list
        ``[rows, cols, vals]`` as :func:`tile_arrays` gives them. The list is emptied once the
        sub-block copy is made, so that the caller holding only the list has two copies of
        the tile at a time, not three (out of core, tiles are read again every epoch).
    binary : bool
    layout : TileLayout
    place : tuple of int
        ``(P, q, r)``: the seed of the shuffle.

    Returns
    -------
    tile : tuple
        ``(rows, cols, vals, chunk_ptr, block_ptr)``: chunk ``c`` is
        ``chunk_ptr[c]:chunk_ptr[c + 1]``, sub-block ``b`` the chunks
        ``block_ptr[b]:block_ptr[b + 1]``.
    """
    rows, cols, vals = parts
    from daskpd.kernels import dso as kernels

    tile = kernels.block_layout(rows, cols, vals, binary, int(layout.block_cols))
    del rows, cols, vals
    parts.clear()
    return shuffled_layout(tile, int(layout.chunk_nnz), place)


def shuffled_layout(tile, chunk_nnz, place):
    """Shuffle a blocked tile inside each sub-block and cut it into chunks.

    Chunks hold ``chunk_nnz`` nonzeros, fewer in sub-blocks of less than
    ``MIN_CHUNKS * chunk_nnz`` nonzeros (at least one each).

    The shuffle's seed is the tile's place in the grid, not the run's seed: the layout is
    stored with the grid (or cached per process) and shared by every run on the dataset; each
    epoch's randomness is in the order of the sub-blocks and chunks
    (``daskpd.solvers.dso._visit_order``).

    Parameters
    ----------
    tile : tuple
        ``(rows, cols, vals, segment_ptr, block_ptr)`` of :func:`daskpd.kernels.dso.block_layout`.
    chunk_nnz : int
    place : tuple of int

    Returns
    -------
    tile : tuple
        As :func:`build_tile_layout`.
    """
    rows, cols, vals, segment_ptr, block_ptr = tile
    bounds = segment_ptr[block_ptr]  # nonzero offsets of the sub-blocks
    seed = np.random.SeedSequence(list(place)).generate_state(1, np.uint64)[0]
    from daskpd.kernels import dso as kernels

    rows, cols, vals = kernels.shuffle_runs(rows, cols, vals, vals.shape[0] == 0, bounds, seed)
    chunk_ptr, chunk_blocks = [np.zeros(1, np.int64)], [0]
    for b in range(bounds.shape[0] - 1):
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        # small sub-blocks get smaller chunks, so that the epoch's order still mixes them
        size = max(1, min(chunk_nnz, -(-(hi - lo) // MIN_CHUNKS)))
        chunk_ptr.append(np.minimum(np.arange(lo + size, hi + size, size), hi))
        chunk_blocks.append(chunk_blocks[-1] + chunk_ptr[-1].shape[0])
    return (
        rows,
        cols,
        vals,
        np.concatenate(chunk_ptr).astype(np.int64),
        np.array(chunk_blocks, dtype=np.int64),
    )


def crc32(values) -> int:
    """CRC32 of an array's C-order bytes (the ``tile_crc32`` convention)."""
    return zlib.crc32(memoryview(np.ascontiguousarray(values)).cast("B"))


def open_tile_arrays(grid_directory, binary, mode="r") -> dict:
    """The zarr arrays ``rows``, ``cols`` (and ``vals`` unless binary) of a grid directory."""
    names = TILE_ARRAYS[:2] if binary else TILE_ARRAYS
    return {
        name: zarr.open_array(os.path.join(grid_directory, name), mode=mode, zarr_format=3)
        for name in names
    }


def layout_group(grid_arrays, grid_directory, info, grid_crc, binary, layout, q, sink):
    """Build the layouts of the tiles of row group ``q`` and write their nonzeros into ``sink``.

    Each tile is read from the grid's arrays and checked against the grid's ``tile_crc32``
    before its layout is built from it: a layout derived from damaged tiles would pass its
    own checks.

    Parameters
    ----------
    grid_arrays : dict of zarr.Array
        The grid's tile arrays (:func:`open_tile_arrays`).
    grid_directory : str
        Named in errors.
    info : GridInfo
    grid_crc : ndarray of shape (P * P, 3), int64
        The grid's ``tile_crc32`` table.
    binary : bool
    layout : TileLayout
    q : int
    sink : daskpd.data.grid.ZarrSink
        Writes the layout's ``rows``/``cols``/``vals`` (started with ``info``: a tile's layout
        takes the place of the tile).

    Returns
    -------
    crc : ndarray of shape (P, 3), int64
        CRC32 of each tile's layout ``rows``, ``cols``, ``vals``.
    chunk_ptrs, block_ptrs : list of ndarray
        Each tile's ``chunk_ptr`` and ``block_ptr``.
    """
    n_blocks = info.n_blocks
    chunk_ptrs, block_ptrs = [], []
    for r in range(n_blocks):
        lo, hi = int(info.tile_ptr[q, r]), int(info.tile_ptr[q, r + 1])
        stored = [grid_arrays[name][lo:hi] if name in grid_arrays else None for name in TILE_ARRAYS]
        for column, values in enumerate(stored):
            expected = int(grid_crc[q * n_blocks + r, column])
            if values is not None and crc32(values) != expected:
                raise DatasetIntegrityError(
                    f"{grid_directory}: array {TILE_ARRAYS[column]!r} checksum of tile ({q}, {r}) "
                    "differs from the manifest (altered data)"
                )
        parts = list(tile_arrays(*stored, binary))
        del stored
        rows, cols, vals, chunk_ptr, block_ptr = build_tile_layout(
            parts, binary, layout, (n_blocks, q, r)
        )
        sink.add(q, r, rows, cols, None if binary else vals)
        del rows, cols, vals
        chunk_ptrs.append(chunk_ptr)
        block_ptrs.append(block_ptr)
    sink.end_group(q)
    return sink.crc[q].copy(), chunk_ptrs, block_ptrs
