"""Reading DSO's stored tile layouts: the :class:`~daskpd.data.Dataset` methods that do it.

A grid's layouts are stored under ``grids/<P>/layouts/<name>/`` (format in the docstring of
:mod:`daskpd.data.format`, built by :mod:`daskpd.data.layout`, written by
:mod:`daskpd.data.partition`). A stored layout is used only when it was derived from the
grid's current write and records the run's parameters; each tile read is checked against the
layout's ``tile_crc32``.
"""

from __future__ import annotations

import os
import threading
import warnings
from functools import cached_property
from typing import NamedTuple

import numpy as np

from daskpd.data.format import (
    GRID_FORMAT_VERSION,
    NO_VALUES,
    DatasetIntegrityError,
    check_group_files,
)
from daskpd.data.layout import LAYOUT_ARRAYS, crc32
from daskpd.data.store import group_stamp, open_group_readonly


class StoredLayoutsMixin:
    """The methods of :class:`~daskpd.data.Dataset` that read stored DSO tile layouts.

    They use the dataset's ``path``, ``nnz``, ``binary``, ``dtype``, grid tables
    (``_grid_info``, ``_grid_cache``) and checked reads (``_read``, ``_arrays``,
    ``_reopened``).
    """

    def layouts(self, n_blocks) -> list[str]:
        """Names of the DSO tile layouts stored with the grid ``n_blocks`` (``grids/P/layouts``).

        Parameters
        ----------
        n_blocks : int

        Returns
        -------
        list of str
            :attr:`TileLayout.name` of each stored layout, usable or not.
        """
        directory = os.path.join(self.path, "grids", str(int(n_blocks)), "layouts")
        if not os.path.isdir(directory):
            return []
        return sorted(
            name
            for name in os.listdir(directory)
            if not name.startswith(".") and os.path.isdir(os.path.join(directory, name))
        )

    def stored_layout(self, n_blocks, layout) -> bool:
        """Whether the layout ``layout`` of the grid ``n_blocks`` is stored and usable.

        A stored layout derived from another write of the grid, or recording parameters other
        than ``layout``'s, is not used: a warning naming its path says so (once per process).

        Parameters
        ----------
        n_blocks : int
        layout : TileLayout

        Returns
        -------
        bool

        Raises
        ------
        DatasetIntegrityError
            When the stored layout is unreadable, its chunk files are missing or truncated, or
            its tables disagree with the grid.
        """
        return self._usable_layout(int(n_blocks), layout) is not None

    def layout_tile(self, n_blocks, layout, q, r):
        """Tile ``(q, r)`` in the stored layout ``layout``, checked; None when none is usable.

        Parameters
        ----------
        n_blocks : int
        layout : TileLayout
        q, r : int

        Returns
        -------
        tuple or None
            ``(rows, cols, vals, chunk_ptr, block_ptr)`` as
            :func:`daskpd.data.layout.build_tile_layout` builds them from :meth:`tile` (``vals``
            ``NO_VALUES`` when binary), or None (see :meth:`stored_layout`).

        Raises
        ------
        DatasetIntegrityError
            Naming the layout's path, the array and the tile, when a chunk of the tile
            cannot be read or the tile's checksum differs from the layout's ``tile_crc32``.
        """
        n_blocks, q, r = int(n_blocks), int(q), int(r)
        entry = self._usable_layout(n_blocks, layout)
        if entry is None:
            return None
        info = self._grid_info(n_blocks)
        tile = q * n_blocks + r
        bounds = {
            "chunk_ptr": entry.tile_chunks[tile : tile + 2],
            "block_ptr": entry.tile_blocks[tile : tile + 2],
        }
        parts = []
        for column, name in enumerate(LAYOUT_ARRAYS):
            if name == "vals" and self.binary:
                parts.append(NO_VALUES)
                continue
            lo, hi = bounds.get(name, info.tile_ptr[q, r : r + 2])
            try:
                values = self._read(name, slice(int(lo), int(hi)), entry.group, entry.directory)
            except DatasetIntegrityError as exc:
                raise DatasetIntegrityError(f"{exc} (tile ({q}, {r}))") from None
            if crc32(values) != entry.tile_crc32[tile, column]:
                raise DatasetIntegrityError(
                    f"{entry.directory}: array {name!r} checksum of tile ({q}, {r}) differs "
                    "from the manifest (altered data)"
                )
            parts.append(values)
        return tuple(parts)

    @cached_property
    def _layout_cache(self) -> dict:
        return {}

    def _usable_layout(self, n_blocks, layout):
        """The :class:`_StoredLayout` of ``layout``, or None (absent, or not usable: warned)."""
        self._grid_info(n_blocks)
        grid_stamp = self._grid_cache[n_blocks][3]
        directory = os.path.join(self.path, "grids", str(n_blocks), "layouts", layout.name)
        stamp = (group_stamp(directory), grid_stamp)
        cached = self._layout_cache.get((n_blocks, layout))
        if cached is None or cached[0] != stamp:
            # the stamps: a layout or grid stored again is looked at again
            cached = (stamp, *self._open_layout(n_blocks, layout, directory))
            self._layout_cache[n_blocks, layout] = cached
        _, entry, reason = cached
        if reason is not None:
            _warn_layout_once(directory, reason)
        return entry

    def _open_layout(self, n_blocks, layout, directory):
        """``(entry, None)``, ``(None, why it is not used)`` or ``(None, None)`` when absent."""
        if not os.path.isdir(directory):
            return None, None
        group, manifest = open_layout_group(directory)
        attrs = dict(group.attrs)
        grid_attrs = self._grid_cache[n_blocks][4]
        try:
            write_id = str(attrs["write_id"])
            grid_write_id = str(attrs["grid_write_id"])
            recorded = {key: attrs.get(key) for key in layout.attributes()}
            recorded["format_version"] = attrs.get("format_version")
            same_place = (
                int(attrs["grid"]) == n_blocks
                and int(attrs["nnz"]) == self.nnz
                and bool(attrs["binary"]) == self.binary
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DatasetIntegrityError(
                f"{directory}: stored layout attributes are incomplete or altered ({exc!r})"
            ) from None
        if grid_write_id != str(grid_attrs["write_id"]):
            return None, (
                f"it was derived from another write of the grid (grid write id {grid_write_id}, "
                f"the grid's is {grid_attrs['write_id']})"
            )
        expected = {**layout.attributes(), "format_version": GRID_FORMAT_VERSION}
        if recorded != expected:
            return None, f"it records the parameters {recorded}, the run needs {expected}"
        if not same_place:
            raise DatasetIntegrityError(
                f"{directory}: stored layout attributes disagree with the grid (altered layout)"
            )
        n_tiles = n_blocks * n_blocks
        expected_arrays = {
            "rows": ((self.nnz,), "<i4"),
            "cols": ((self.nnz,), "<i4"),
            "tile_crc32": ((n_tiles, len(LAYOUT_ARRAYS)), "<i8"),
            "tile_chunks": ((n_tiles + 1,), "<i8"),
            "tile_blocks": ((n_tiles + 1,), "<i8"),
            # lengths checked against the tile offsets below
            "chunk_ptr": (None, "<i8"),
            "block_ptr": (None, "<i8"),
        }
        if not self.binary:
            expected_arrays["vals"] = ((self.nnz,), self.dtype.str)
        for name, (shape, dtype) in expected_arrays.items():
            entry = manifest.get(name)
            if (
                entry is None
                or entry["dtype"] != dtype
                or (shape is not None and tuple(entry["shape"]) != shape)
            ):
                raise DatasetIntegrityError(
                    f"{directory}: array {name!r} of the stored layout is missing from the "
                    f"manifest or not {shape} {dtype} (altered layout)"
                )
        arrays = check_group_files(group, directory, manifest, write_id, self._reopened)
        self._arrays.update({(directory, name): array for name, array in arrays.items()})
        stored = _StoredLayout(
            group=group,
            directory=directory,
            tile_crc32=self._read("tile_crc32", group=group, where=directory),
            tile_chunks=self._read("tile_chunks", group=group, where=directory),
            tile_blocks=self._read("tile_blocks", group=group, where=directory),
        )
        for name, offsets in (("chunk_ptr", stored.tile_chunks), ("block_ptr", stored.tile_blocks)):
            length = manifest[name]["shape"][0]
            if offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != length:
                raise DatasetIntegrityError(
                    f"{directory}: array {name!r} of the stored layout disagrees with its "
                    "tile offsets (altered layout)"
                )
        return stored, None


class _StoredLayout(NamedTuple):
    """A usable stored layout of a grid: its group and per-tile tables."""

    group: object
    directory: str
    tile_crc32: np.ndarray
    tile_chunks: np.ndarray
    tile_blocks: np.ndarray


def open_layout_group(directory):
    """The zarr group of a stored layout and its manifest."""
    try:
        group = open_group_readonly(directory)
        manifest = dict(group.attrs["manifest"])
    except Exception as exc:
        raise DatasetIntegrityError(f"{directory}: unreadable stored layout ({exc})") from None
    return group, manifest


_LAYOUT_WARNED: set = set()
_LAYOUT_WARNED_LOCK = threading.Lock()


def _warn_layout_once(directory, reason) -> None:
    """Say once per process that a stored layout is not used, and why."""
    with _LAYOUT_WARNED_LOCK:
        if (directory, reason) in _LAYOUT_WARNED:
            return
        _LAYOUT_WARNED.add((directory, reason))
    warnings.warn(
        f"{directory}: stored DSO tile layout not used, {reason}; the layout is built at run "
        "time instead (store it again: daskpd.data.write_layouts(..., overwrite=True))",
        UserWarning,
        stacklevel=4,
    )
