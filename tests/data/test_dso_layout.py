"""DSO's tile layouts stored with a grid: used when they fit the run, the same bits as built,
stale or other-parameter layouts built at run time with a warning, damaged ones refused."""

from __future__ import annotations

import dataclasses
import os
import shutil
import warnings

import numpy as np
import pytest
import zarr

from daskpd.data import (
    DEFAULT_LAYOUTS,
    DatasetIntegrityError,
    TileLayout,
    open_dataset,
    partition_dataset,
    write_layouts,
)
from daskpd.generators import make_splice_like
from daskpd.kernels import dso as dso_kernels
from daskpd.problem import Problem
from daskpd.solvers import dso
from daskpd.solvers.driver import solve

GRID = 2
#: The layout of the runs below (DSO's default options, no SVRG).
PLAIN = TileLayout.for_dso()
#: Small chunks: every layout array has several chunk files (the damage tests need two).
CHUNK_BYTES = 8192
#: hinge + L1 is a problem `solver="auto"` gives to DSO; it starts from zero (no SVRG).
RUN = dict(
    loss="hinge", regularizer="l1", alpha=1e-3, solver="dso", max_epochs=3, tol=0.0,
    eval_every=1, random_state=7, client=False, grid=GRID, tile_cache_bytes=0,
)  # fmt: skip


def _splice(path, binary=False, layouts=DEFAULT_LAYOUTS, grid=GRID):
    # 2**16 hashed columns: several sub-blocks per column block with either default width
    make_splice_like(path, 400, degree=4, hash_bits=16, binary=binary, random_state=3)
    return partition_dataset(path, grid, chunk_bytes=CHUNK_BYTES, layouts=layouts)


class BuildCounter:
    """Counts the calls of the layout kernels DSO builds a tile's layout with."""

    def __init__(self, monkeypatch, forbid=False):
        self.calls = 0
        for name in ("block_layout", "shuffle_runs"):
            real = getattr(dso_kernels, name)
            monkeypatch.setattr(dso_kernels, name, self._wrap(name, real, forbid))

    def _wrap(self, name, real, forbid):
        def counted(*args):
            if forbid:
                raise AssertionError(f"{name} ran: the layout was built, not read")
            self.calls += 1
            return real(*args)

        return counted


def _solve(path, **options):
    # a fresh handle, as a new run would open
    return solve(open_dataset(path), **options)


def _layout_directory(data, layout, grid=GRID):
    return os.path.join(data.path, "grids", str(grid), "layouts", layout.name)


def _same_bits(a, b):
    assert np.array_equal(a.w, b.w)
    assert [row["primal"] for row in a.history] == [row["primal"] for row in b.history]
    assert [row["gap"] for row in a.history] == [row["gap"] for row in b.history]


# --------------------------------------------------------------------------------------------
# what is stored


def test_default_layouts_are_those_of_dsos_default_options(tmp_path):
    problem = Problem("hinge", "l2", 1e-3)
    data = _splice(tmp_path / "d.zarr")
    layouts = set()
    for started in (False, True):
        settings = dso._settings(problem, data, dso.DSOOptions(grid=GRID), GRID, started)
        layouts.add(dso._tile_layout(settings))
    # from zero (no SVRG) and from a start (SVRG: twice the bytes a column), both stored
    assert layouts == set(DEFAULT_LAYOUTS) and len(layouts) == 2
    assert data.layouts(GRID) == sorted(layout.name for layout in layouts)
    assert all(data.stored_layout(GRID, layout) for layout in layouts)
    # the attributes record the parameters and the grid the layout was derived from
    group = zarr.open_group(_layout_directory(data, PLAIN), mode="r")
    grid_group = zarr.open_group(os.path.join(data.path, "grids", str(GRID)), mode="r")
    assert group.attrs["grid_write_id"] == grid_group.attrs["write_id"]
    assert group.attrs["block_cols"] == 16384 and group.attrs["chunk_nnz"] == 1024
    assert group.attrs["min_chunks"] == dso.MIN_CHUNKS
    data.verify()
    bare = _splice(tmp_path / "bare.zarr", layouts=())
    assert bare.layouts(GRID) == []
    assert not bare.stored_layout(GRID, PLAIN)


def test_write_layouts_adds_a_layout_to_a_stored_grid(tmp_path):
    data = _splice(tmp_path / "d.zarr", layouts=())
    other = TileLayout.for_dso(block_bytes=1 << 16, chunk_nnz=64)
    data = write_layouts(data, GRID, [other], chunk_bytes=CHUNK_BYTES)
    assert data.layouts(GRID) == [other.name] and data.stored_layout(GRID, other)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_layouts(data, GRID, [other])
    with pytest.raises(TypeError, match="sequence"):
        write_layouts(data, GRID, other)
    assert not any(name.startswith(".tmp") for name in os.listdir(os.path.dirname(
        _layout_directory(data, other))))  # fmt: skip


# --------------------------------------------------------------------------------------------
# the same bits


@pytest.mark.parametrize("binary", [False, True], ids=["float32", "binary"])
@pytest.mark.parametrize("svrg", [False, True], ids=["plain", "svrg"])
def test_stored_tiles_are_the_bits_dso_builds(tmp_path, binary, svrg):
    data = _splice(tmp_path / "d.zarr", binary=binary, grid=3)
    problem = Problem("hinge", "l2", 1e-3)
    options = dso.DSOOptions(grid=3, svrg_every=int(svrg), tile_cache_bytes=0)
    settings = dso._settings(problem, data, options, 3)
    stored = dataclasses.replace(settings, stored_layout=True)
    layout = dso._tile_layout(settings)
    assert data.stored_layout(3, layout)
    for q in range(3):
        for r in range(3):
            built = dso._load_tile(data, settings, q, r)
            with pytest.MonkeyPatch.context() as patch:
                BuildCounter(patch, forbid=True)
                read = dso._load_tile(data, stored, q, r)
            assert len(built) == len(read) == 5
            for a, b in zip(built, read, strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b)
            assert read[4].shape[0] > 2  # several sub-blocks: the layout is not trivial


def test_solve_reads_the_stored_layout_and_builds_nothing(tmp_path, monkeypatch):
    stored = _splice(tmp_path / "stored.zarr")
    bare = _splice(tmp_path / "bare.zarr", layouts=())
    counter = BuildCounter(monkeypatch)
    without = _solve(bare.path, **RUN)
    # the counter sees the building (else "no call" below would prove nothing): every tile,
    # every epoch (no tile cache here)
    assert counter.calls == 2 * GRID * GRID * RUN["max_epochs"]
    BuildCounter(monkeypatch, forbid=True)
    with_layout = _solve(stored.path, **RUN)
    _same_bits(with_layout, without)
    # a start with SVRG (wider packed columns) reads the other default layout
    started = dict(RUN, regularizer="l2", init="dcd", dcd_passes=2, max_epochs=2)
    with_start = _solve(stored.path, **started)
    monkeypatch.undo()
    _same_bits(with_start, _solve(bare.path, **started))


# --------------------------------------------------------------------------------------------
# layouts that do not fit the run: built at run time


def test_options_other_than_the_stored_ones_build_at_run_time(tmp_path, monkeypatch):
    data = _splice(tmp_path / "d.zarr")
    counter = BuildCounter(monkeypatch)
    for options, stored in (
        ({"chunk_nnz": 512}, False),
        ({"block_bytes": 1 << 17}, False),
        # half the default bytes without SVRG: the columns of the stored SVRG layout, read
        ({"block_bytes": 1 << 18}, True),
    ):
        calls = counter.calls
        settings = dso._settings(
            Problem("hinge", "l1", 1e-3), data, dso.DSOOptions(grid=GRID, **options), GRID
        )
        assert (dso._tile_layout(settings).name in data.layouts(GRID)) == stored
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _solve(data.path, **dict(RUN, max_epochs=1), **options)
        assert counter.calls - calls == (0 if stored else 2 * GRID * GRID)
        # a layout stored for other options is no reason to warn: built as before
        assert not [w for w in caught if "layout" in str(w.message)]


def test_a_stale_layout_is_built_at_run_time_with_one_warning(tmp_path, monkeypatch):
    data = _splice(tmp_path / "d.zarr")
    reference = _solve(data.path, **RUN)
    layout = PLAIN
    old = _layout_directory(data, layout)
    kept = tmp_path / "kept"
    shutil.copytree(old, kept)
    # the grid stored again (a new write id), and the old layout put back into it
    data = partition_dataset(data.path, GRID, overwrite=True, chunk_bytes=CHUNK_BYTES, layouts=())
    os.makedirs(os.path.dirname(old))
    shutil.copytree(kept, old)
    assert data.layouts(GRID) == [layout.name]
    counter = BuildCounter(monkeypatch)
    with pytest.warns(UserWarning, match="another write of the grid") as caught:
        result = _solve(data.path, **RUN)
    said = [w for w in caught if str(old) in str(w.message)]
    assert len(said) == 1
    assert counter.calls == 2 * GRID * GRID * RUN["max_epochs"]
    _same_bits(result, reference)  # the same grid's tiles: the same layout, built
    assert not open_dataset(data.path).stored_layout(GRID, TileLayout(7, 7))


def test_a_layout_recording_other_parameters_is_built_at_run_time(tmp_path, monkeypatch):
    data = _splice(tmp_path / "d.zarr")
    directory = _layout_directory(data, PLAIN)
    zarr.open_group(directory, mode="r+").attrs["chunk_nnz"] = 999
    counter = BuildCounter(monkeypatch)
    with pytest.warns(UserWarning, match="records the parameters") as caught:
        _solve(data.path, **dict(RUN, max_epochs=1))
    assert any(str(directory) in str(w.message) for w in caught)
    assert counter.calls == 2 * GRID * GRID


# --------------------------------------------------------------------------------------------
# damaged layouts: refused, naming the path, the array and the tile


def _chunk_files(directory, name):
    files = [f for f in os.listdir(os.path.join(directory, name)) if f.startswith("c.")]
    return [os.path.join(directory, name, f) for f in sorted(files, key=lambda f: int(f[2:]))]


def _tile_of(data, entry):
    tile_ptr = data.grid(GRID).tile_ptr
    starts = tile_ptr[:, :-1].ravel()
    tile = int(np.searchsorted(starts, entry, side="right")) - 1
    return divmod(tile, GRID)


def test_a_flipped_byte_in_a_stored_chunk_is_refused(tmp_path):
    data = _splice(tmp_path / "d.zarr")
    directory = _layout_directory(data, PLAIN)
    victim = _chunk_files(directory, "rows")[3]
    # chunk 3 of an int32 array: entries [3 * length, 4 * length), all inside one tile
    length = CHUNK_BYTES // 4
    q, r = _tile_of(data, 3 * length)
    assert _tile_of(data, 4 * length - 1) == (q, r)
    with open(victim, "r+b") as handle:
        handle.seek(os.path.getsize(victim) // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(DatasetIntegrityError) as error:
        _solve(data.path, **RUN)
    message = str(error.value)
    assert str(directory) in message and "'rows'" in message and f"tile ({q}, {r})" in message
    with pytest.raises(DatasetIntegrityError, match="'rows'"):
        open_dataset(data.path).verify()


def test_swapped_chunk_files_fail_the_tile_checksum(tmp_path):
    data = _splice(tmp_path / "d.zarr")
    directory = _layout_directory(data, PLAIN)
    # each file keeps a valid chunk checksum and the sizes add up: only the tile's CRC32
    # against tile_crc32 sees that the entries are not the ones stored there
    first, second = _chunk_files(directory, "cols")[:2]
    os.rename(first, first + ".x")
    os.rename(second, first)
    os.rename(first + ".x", second)
    q, r = _tile_of(data, 0)
    assert _tile_of(data, 2 * CHUNK_BYTES // 4 - 1) == (q, r)
    with pytest.raises(DatasetIntegrityError) as error:
        _solve(data.path, **RUN)
    message = str(error.value)
    assert str(directory) in message
    assert f"array 'cols' checksum of tile ({q}, {r}) differs" in message
    with pytest.raises(DatasetIntegrityError, match="'cols' checksum of tile"):
        open_dataset(data.path).verify()


def test_a_missing_layout_chunk_file_is_refused(tmp_path):
    data = _splice(tmp_path / "d.zarr")
    directory = _layout_directory(data, PLAIN)
    os.remove(_chunk_files(directory, "vals")[-1])
    with pytest.raises(DatasetIntegrityError, match="'vals' has .* chunk files"):
        _solve(data.path, **RUN)


# --------------------------------------------------------------------------------------------
# on a cluster


def test_layouts_written_by_a_cluster_are_the_same_and_its_workers_read_them(
    local_cluster, tmp_path
):
    here = _splice(tmp_path / "here.zarr")
    make_splice_like(tmp_path / "there.zarr", 400, degree=4, hash_bits=16, random_state=3)
    there = partition_dataset(
        tmp_path / "there.zarr", GRID, chunk_bytes=CHUNK_BYTES, client=local_cluster
    )
    for layout in DEFAULT_LAYOUTS:
        for q in range(GRID):
            for r in range(GRID):
                mine = here.layout_tile(GRID, layout, q, r)
                theirs = there.layout_tile(GRID, layout, q, r)
                assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))
    # the workers read the stored layout where the tiles live: the same bits as in-process
    on_cluster = _solve(there.path, **dict(RUN, client=local_cluster))
    assert np.array_equal(on_cluster.w, _solve(here.path, **RUN).w)
