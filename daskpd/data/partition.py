"""Storing grids on disk: the tiled layout of a P x P grid, and DSO's tile layouts with it.

:func:`partition_dataset` derives a grid (:mod:`daskpd.data.grid`) and stores it under
``grids/<P>/`` with the DSO layouts asked for (:mod:`daskpd.data.layout`);
:func:`write_layouts` adds layouts to a stored grid. Both write to a temporary subgroup and
rename it when complete, in-process or as one task per row group on a Dask client. The format
is in the docstring of :mod:`daskpd.data.format`.
"""

from __future__ import annotations

import contextlib
import os
import uuid

import numpy as np
import zarr

from daskpd.data.atomic import publish, remove_tree
from daskpd.data.base import BaseDataset
from daskpd.data.format import (
    ARRAY_CONFIG,
    CHUNK_BYTES,
    GRID_FORMAT_VERSION,
    Appender,
    chunk_length,
    create_1d,
    manifest_entry,
    write_small,
)
from daskpd.data.grid import (
    TILE_ARRAYS,
    ZarrSink,
    build_grid,
    count_group,
    grid_bounds,
    grid_info,
    inverse_order,
    pieces_by_group,
    place_group,
)
from daskpd.data.layout import (
    DEFAULT_LAYOUTS,
    LAYOUT_ARRAYS,
    check_layouts,
    crc32,
    layout_group,
    open_tile_arrays,
)
from daskpd.data.ondisk import Dataset, open_dataset
from daskpd.data.store import is_url
from daskpd.data.validation import check_grid

# distributed (about 1 s to import, measured here) only in the tasks, which run on its workers.


def partition_dataset(
    path,
    grid,
    *,
    overwrite=False,
    memory_budget=256 * 2**20,
    chunk_bytes=CHUNK_BYTES,
    client=None,
    layouts=DEFAULT_LAYOUTS,
) -> Dataset:
    """Derive and store the tiled layout of a ``grid`` x ``grid`` grid (subgroup ``grids/P``).

    Streams the row blocks twice (count per tile, then place) and never holds more than one
    row block plus one write buffer per tile of the current row group. The grid is written to a
    temporary subgroup and renamed when complete. With a Dask ``client``, each pass runs one
    task per row group on the workers (each task holds the memory above; the few chunks shared
    by two row groups are written under a ``distributed.Lock``); the result is identical.

    The grid's DSO tile layouts (``layouts``, see :func:`write_layouts`) are then built from
    the new tiles and stored in the temporary subgroup too, so the grid appears with them.

    Parameters
    ----------
    path : str, os.PathLike or Dataset
        An on-disk dataset.
    grid : int
        P >= 1.
    overwrite : bool, default=False
        Replace an existing grid of the same size.
    memory_budget : int, default=256 MiB
        Bytes for the per-tile write buffers of one row group (larger buffers mean fewer
        partial-chunk rewrites).
    chunk_bytes : int, default=4 MiB
        Uncompressed bytes per chunk of the tile arrays.
    client : distributed.Client, optional
        Run the two passes as tasks on this client's workers (which must see ``path``).
    layouts : sequence of TileLayout, default=DEFAULT_LAYOUTS
        DSO tile layouts to store with the grid (see :func:`write_layouts`); by default those
        of DSO's default options from zero and from a start (``TileLayout.for_dso()`` and
        ``TileLayout.for_dso(svrg=True)``). Each takes about twice the grid's space on disk
        (its shuffled entries compress less well: 36 MB against the grid's 19 MB on binary
        splice-like data of 1e7 nonzeros) and adds about a quarter of the grid's time to
        the partition. ``()``: none (DSO then builds its layout in the first epoch of every
        run).

    Returns
    -------
    Dataset
        The dataset, reopened, with ``grid`` in :attr:`Dataset.grids`.

    Raises
    ------
    FileExistsError
        When the grid exists and ``overwrite`` is False.
    """
    layouts = check_layouts(layouts)
    if isinstance(path, BaseDataset) and not isinstance(path, Dataset):
        raise TypeError(
            f"partition_dataset needs an on-disk dataset, got {path!r}; in-memory datasets "
            "have .partition(grid)"
        )
    dataset = path if isinstance(path, Dataset) else open_dataset(path)
    if is_url(dataset.path):
        raise ValueError(
            f"{dataset.path}: grids are written to and read from a local or shared directory, "
            "not a URL; partition a copy there"
        )
    n_blocks = check_grid(grid)
    if int(memory_budget) < 1:
        raise ValueError(f"memory_budget must be >= 1 byte, got {memory_budget}")
    grids_directory = os.path.join(dataset.path, "grids")
    again = "(--overwrite) to rebuild it"
    with _new_group(grids_directory, str(n_blocks), overwrite, again) as (group, temporary, target):
        entry_bytes = 8 + (0 if dataset.binary else dataset.dtype.itemsize)
        buffer_entries = int(memory_budget) // (n_blocks * entry_bytes)
        buffer_entries = max(1024, min(buffer_entries, chunk_length(4, chunk_bytes)))
        sink = ZarrSink.create(
            group,
            dataset.nnz,
            None if dataset.binary else dataset.dtype,
            buffer_entries,
            chunk_bytes,
        )
        if client is None:
            info = build_grid(dataset, n_blocks, sink)
        else:
            info = _partition_on_client(client, dataset, n_blocks, temporary, sink)
        manifest = sink.finish(temporary)
        for name in ("row_bounds", "col_bounds", "tile_ptr", "col_order"):
            array, crc = write_small(group, name, getattr(info, name))
            manifest[name] = manifest_entry(array, os.path.join(temporary, name), crc)
        write_id = uuid.uuid4().hex
        group.attrs.update(
            {
                "format_version": GRID_FORMAT_VERSION,
                "grid": n_blocks,
                "nnz": int(dataset.nnz),
                "binary": bool(dataset.binary),
                "dataset_write_id": dataset._write_id,
                "write_id": write_id,
                "manifest": manifest,
            }
        )
        grid_crc = sink.crc.reshape(-1, len(TILE_ARRAYS))
        for layout in layouts:
            _store_layout(
                dataset, temporary, info, grid_crc, write_id, layout, chunk_bytes, False, client
            )
        try:
            publish(temporary, target, overwrite)
        except OSError as exc:
            if os.path.exists(target) and not overwrite:
                raise FileExistsError(f"{target} was created meanwhile ({exc})") from None
            raise
    return open_dataset(dataset.path)


def write_layouts(
    path,
    grid,
    layouts=DEFAULT_LAYOUTS,
    *,
    overwrite=False,
    chunk_bytes=CHUNK_BYTES,
    client=None,
) -> Dataset:
    """Build DSO's tile layouts of a stored grid and store them (``grids/P/layouts/<name>``).

    DSO's default ``visit_order="shuffled"`` visits each tile in a layout built from it: its
    nonzeros regrouped by column sub-block, shuffled inside each sub-block by a function of
    the tile's place in the grid, and cut into chunks (:mod:`daskpd.data.layout`). A run whose
    options give a stored :class:`TileLayout` reads it instead of building it in its first
    epoch; the bits are the same. :func:`partition_dataset` stores ``layouts`` already; this
    adds layouts to a grid stored before, or for other DSO options
    (``TileLayout.for_dso(block_bytes=..., chunk_nnz=..., svrg=...)``).

    Each layout is built tile by tile from the grid (each tile checked against the grid's
    ``tile_crc32`` first), written to a temporary subgroup and renamed when complete; it
    records the grid's ``write_id``, so that a grid stored again makes it stale.

    Parameters
    ----------
    path : str, os.PathLike or Dataset
        An on-disk dataset with the grid ``grid``.
    grid : int
    layouts : sequence of TileLayout, default=DEFAULT_LAYOUTS
    overwrite : bool, default=False
        Replace stored layouts of the same name.
    chunk_bytes : int, default=4 MiB
        Uncompressed bytes per chunk of the layout's arrays.
    client : distributed.Client, optional
        Build the layouts of each row group as a task on this client's workers (which must
        see ``path``); the result is identical.

    Returns
    -------
    Dataset
        The dataset, reopened.

    Raises
    ------
    FileExistsError
        When a layout is stored already and ``overwrite`` is False.
    KeyError
        When the dataset has no grid ``grid``.
    """
    dataset = path if isinstance(path, Dataset) else open_dataset(path)
    n_blocks = check_grid(grid)
    layouts = check_layouts(layouts)
    info = dataset.grid(n_blocks)
    group, directory, attrs = dataset._grid_group(n_blocks)
    grid_crc = dataset._read("tile_crc32", group=group, where=directory)
    for layout in layouts:
        _store_layout(
            dataset, directory, info, grid_crc, str(attrs["write_id"]), layout, chunk_bytes,
            overwrite, client,
        )  # fmt: skip
    return open_dataset(dataset.path)


def _store_layout(
    dataset, grid_directory, info, grid_crc, grid_write_id, layout, chunk_bytes, overwrite, client
):  # fmt: skip
    """Build ``layout`` from the grid in ``grid_directory`` and store it there, atomically.

    Holds one tile and its layout at a time (per task with a ``client``), and the per-tile
    sub-block and chunk offsets, a few bytes per ``chunk_nnz`` nonzeros.
    """
    n_blocks = info.n_blocks
    binary = bool(dataset.binary)
    layouts_directory = os.path.join(grid_directory, "layouts")
    again = "to store the layout again"
    with _new_group(layouts_directory, layout.name, overwrite, again) as (group, temporary, target):
        # a tile's layout arrives whole: write it at once rather than hold it in a buffer
        sink = ZarrSink.create(
            group, dataset.nnz, None if binary else dataset.dtype, 1, chunk_bytes
        )
        sink.start(info)
        if client is None:
            arrays = open_tile_arrays(grid_directory, binary)
            groups = (
                layout_group(arrays, grid_directory, info, grid_crc, binary, layout, q, sink)
                for q in range(n_blocks)
            )
        else:
            groups = _layouts_on_client(
                client, grid_directory, temporary, info, grid_crc, binary, layout
            )
        pointers = {
            name: Appender(create_1d(group, name, np.int64, chunk_bytes))
            for name in ("chunk_ptr", "block_ptr")
        }
        offsets = {name: np.zeros(n_blocks * n_blocks + 1, dtype=np.int64) for name in pointers}
        table = np.zeros((n_blocks * n_blocks, len(LAYOUT_ARRAYS)), dtype=np.int64)
        for q, (crc, *tile_pointers) in enumerate(groups):
            table[q * n_blocks : (q + 1) * n_blocks, : len(TILE_ARRAYS)] = crc
            for name, per_tile in zip(pointers, tile_pointers, strict=True):
                column = LAYOUT_ARRAYS.index(name)
                for r, values in enumerate(per_tile):
                    tile = q * n_blocks + r
                    pointers[name].append(values)
                    offsets[name][tile + 1] = offsets[name][tile] + values.shape[0]
                    table[tile, column] = crc32(values)
        manifest = {}
        for name, array in sink.arrays.items():
            manifest[name] = manifest_entry(array, os.path.join(temporary, name), None)
        for name, appender in pointers.items():
            appender.finish()
            manifest[name] = manifest_entry(appender.array, os.path.join(temporary, name), None)
        for name, values in (
            ("tile_crc32", table),
            ("tile_chunks", offsets["chunk_ptr"]),
            ("tile_blocks", offsets["block_ptr"]),
        ):
            array, crc = write_small(group, name, values)
            manifest[name] = manifest_entry(array, os.path.join(temporary, name), crc)
        group.attrs.update(
            {
                "format_version": GRID_FORMAT_VERSION,
                "grid": n_blocks,
                "layout": layout.name,
                **layout.attributes(),
                "nnz": int(dataset.nnz),
                "binary": binary,
                "dataset_write_id": dataset._write_id,
                "grid_write_id": grid_write_id,
                "write_id": uuid.uuid4().hex,
                "manifest": manifest,
            }
        )
        publish(temporary, target, overwrite)


@contextlib.contextmanager
def _new_group(directory, name, overwrite, again):
    """A zarr group to fill under a temporary name in ``directory``, for ``directory/name``.

    Yields ``(group, temporary, target)``; the caller publishes ``temporary`` as ``target``
    when complete. An error inside the block removes the temporary group.

    Raises
    ------
    FileExistsError
        If ``target`` exists and not ``overwrite`` (the message ends with ``again``: how
        to replace it).
    """
    target = os.path.join(directory, name)
    if os.path.exists(target) and not overwrite:
        raise FileExistsError(f"{target} already exists; pass overwrite=True {again}")
    zarr.open_group(directory, mode="a", zarr_format=3)
    temporary = os.path.join(directory, f".tmp-{name}-{uuid.uuid4().hex}")
    try:
        yield zarr.open_group(temporary, mode="w-", zarr_format=3), temporary, target
    except BaseException:
        remove_tree(temporary)
        raise


def _layouts_on_client(client, grid_directory, temporary, info, grid_crc, binary, layout):
    """Yield each row group's ``(crc, chunk_ptrs, block_ptrs)``, built by a task on a worker."""
    lock_prefix = f"daskpd-layout-{uuid.uuid4().hex}"
    futures = [
        client.submit(
            _layout_group_task,
            grid_directory,
            temporary,
            info,
            grid_crc,
            binary,
            layout,
            q,
            lock_prefix,
            pure=False,
        )  # fmt: skip
        for q in range(info.n_blocks)
    ]
    for k, future in enumerate(futures):
        # in row-group order (the offsets are appended in that order), releasing as we go
        yield future.result()
        futures[k] = None


def _layout_group_task(grid_directory, temporary, info, grid_crc, binary, layout, q, lock_prefix):
    """Task: build and write the layouts of row group ``q``'s tiles (see layout_group)."""
    from distributed import Lock

    arrays = {
        name: array.with_config(ARRAY_CONFIG)
        for name, array in open_tile_arrays(temporary, binary, mode="r+").items()
    }

    def lock(name, chunk):
        return Lock(f"{lock_prefix}-{name}-{chunk}")

    sink = ZarrSink(arrays, 1, lock=lock)
    sink.start(info)
    grid_arrays = open_tile_arrays(grid_directory, binary)
    return layout_group(grid_arrays, grid_directory, info, grid_crc, binary, layout, q, sink)


def _partition_on_client(client, dataset, n_blocks, temporary, sink):
    """Both partition passes as one task per row group; fills ``sink``'s CRC table."""
    row_bounds, col_bounds, col_order, pieces = grid_bounds(dataset, n_blocks)
    groups = pieces_by_group(pieces, n_blocks)
    [position] = client.scatter([inverse_order(col_order)], broadcast=True)
    counts = client.gather(
        [
            client.submit(count_group, dataset, group, col_bounds, position, pure=False)
            for group in groups
        ]
    )
    info = grid_info(row_bounds, col_bounds, col_order, np.stack(counts), int(dataset.nnz), dataset)
    lock_prefix = f"daskpd-partition-{uuid.uuid4().hex}"
    crcs = client.gather(
        [
            client.submit(
                _place_group_task,
                dataset,
                temporary,
                q,
                group,
                info,
                sink.buffer_entries,
                lock_prefix,
                pure=False,
            )
            for q, group in enumerate(groups)
        ]
    )
    sink.start(info)
    sink.crc[...] = np.stack(crcs)
    return info


def _place_group_task(dataset, temporary, q, group, info, buffer_entries, lock_prefix):
    """Task: place the tiles of row group ``q``; return their CRC32s, (P, 3)."""
    from distributed import Lock

    arrays = {}
    for name in TILE_ARRAYS:
        directory = os.path.join(temporary, name)
        if os.path.isdir(directory):
            array = zarr.open_array(directory, mode="r+", zarr_format=3)
            arrays[name] = array.with_config(ARRAY_CONFIG)

    def lock(name, chunk):
        return Lock(f"{lock_prefix}-{name}-{chunk}")

    sink = ZarrSink(arrays, buffer_entries, lock=lock)
    sink.start(info)
    place_group(dataset, q, group, info, sink)
    return sink.crc[q]
