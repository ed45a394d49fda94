"""Tiled P x P layout: exact partition of the nonzeros, streaming = in-memory, int64 offsets."""

from __future__ import annotations

import json
import os
import tempfile
import uuid

import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

from daskpd.data import MemoryDataset, open_dataset, partition_dataset, write_dataset
from daskpd.data.format import CHUNK_KEYS, compressors, manifest_entry, write_small
from daskpd.data.grid import balanced_bounds, cumulative_chunks
from daskpd.kernels import dataset as kernels


def random_matrix(seed, n, d, density, binary, dense):
    rng = np.random.default_rng(seed)
    mask = rng.random((n, d)) < density
    mask[rng.random(n) < 0.2] = False  # empty rows
    mask[:, rng.random(d) < 0.2] = False  # empty columns
    values = mask.astype(np.float64) if binary else np.where(mask, rng.normal(size=(n, d)), 0.0)
    y = rng.choice([-1.0, 1.0], size=n)
    return (values if dense else sp.csr_matrix(values)), y


def check_grid(dataset, n_blocks, X, balanced=True):
    """Tiles partition the nonzeros exactly, sorted, with consistent bounds and offsets."""
    dense = np.asarray(X.toarray() if sp.issparse(X) else X)
    n, d = dense.shape
    info = dataset.grid(n_blocks)
    rb, cb, tp, order = info
    assert rb.dtype == cb.dtype == tp.dtype == order.dtype == np.int64
    assert np.array_equal(np.sort(order), np.arange(d)), "the column order is a permutation"
    assert rb[0] == 0 and rb[-1] == n and np.all(np.diff(rb) >= 0)
    assert cb[0] == 0 and cb[-1] == d and np.all(np.diff(cb) >= 0)
    assert tp.shape == (n_blocks, n_blocks + 1) and tp[0, 0] == 0
    assert tp[-1, -1] == dataset.nnz
    assert np.array_equal(tp[1:, 0], tp[:-1, -1])  # row groups are consecutive
    rebuilt = np.zeros_like(dense)
    seen = np.zeros(dense.shape, dtype=np.int64)
    for q in range(n_blocks):
        for r in range(n_blocks):
            rows, cols, vals = dataset.tile(n_blocks, q, r)
            assert rows.dtype == cols.dtype == np.int32
            assert rows.shape[0] == tp[q, r + 1] - tp[q, r]
            assert (vals is None) == dataset.binary
            if rows.shape[0]:
                assert rows.min() >= 0 and rows.max() < rb[q + 1] - rb[q]
                assert cols.min() >= 0 and cols.max() < cb[r + 1] - cb[r]
                key = rows.astype(np.int64) * (d + 1) + cols
                assert np.all(np.diff(key) > 0), "tile not sorted by (row, col)"
            global_rows = rows + rb[q]
            global_cols = info.block_columns(r)[cols]
            seen[global_rows, global_cols] += 1
            rebuilt[global_rows, global_cols] = 1.0 if vals is None else vals
    stored = (dense != 0) if not sp.issparse(X) else (X != 0).toarray() | _explicit(X)
    assert np.array_equal(seen, stored.astype(np.int64)), "every nonzero in exactly one tile"
    assert np.array_equal(rebuilt, dense)
    # balance: row bound k is the first row whose cumulative count reaches ceil(k nnz / P)
    cumulative = np.concatenate([[0], np.cumsum(dataset.row_nnz)])
    if dataset.nnz and balanced:
        for k in range(1, n_blocks):
            target = -(-k * dataset.nnz // n_blocks)
            assert cumulative[rb[k]] >= target
            assert rb[k] == 0 or cumulative[rb[k] - 1] < target
    # columns are dealt: blocks differ by at most one column in size and, in nonzeros, by
    # at most the densest column's count from an even split
    if balanced:
        col_nnz = np.asarray(dataset.col_nnz)
        assert np.ptp(np.diff(cb)) <= 1
        for r in range(n_blocks):
            block_nnz = col_nnz[info.block_columns(r)].sum()
            assert abs(block_nnz - dataset.nnz / n_blocks) <= col_nnz.max(initial=0)
    return info


def _explicit(X):
    mask = np.zeros(X.shape, dtype=bool)
    coo = X.tocoo()
    mask[coo.row, coo.col] = True
    return mask


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 30),
    d=st.integers(1, 20),
    density=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    binary=st.booleans(),
    dense=st.booleans(),
    grid=st.integers(1, 5),
    rows_per_block=st.integers(1, 12),
)
def test_tiles_partition_the_nonzeros_exactly(
    seed, n, d, density, binary, dense, grid, rows_per_block
):
    X, y = random_matrix(seed, n, d, density, binary, dense)
    memory = MemoryDataset(X, y, rows_per_block=rows_per_block + 1)
    memory.partition(grid)
    memory_info = check_grid(memory, grid, X)
    with tempfile.TemporaryDirectory() as tmp:
        stored = write_dataset(X, y, f"{tmp}/d", rows_per_block=rows_per_block, chunk_bytes=256)
        partition_dataset(stored.path, grid, chunk_bytes=256, memory_budget=64)
        stored = open_dataset(stored.path)
        assert stored.grids == [grid]
        stored_info = check_grid(stored, grid, X)
        # streaming on disk and in memory give the same grid, whatever the row blocks
        for a, b in zip(memory_info, stored_info, strict=True):
            assert np.array_equal(a, b)
        for q in range(grid):
            for r in range(grid):
                for a, b in zip(memory.tile(grid, q, r), stored.tile(grid, q, r), strict=True):
                    assert (a is None and b is None) or np.array_equal(a, b)
        stored.verify()


@pytest.mark.parametrize("flavour", ["disk", "memory"])
def test_bias_view_tiles(tmp_path, flavour):
    X, y = random_matrix(3, 40, 12, 0.3, False, False)
    if flavour == "disk":
        base = partition_dataset(write_dataset(X, y, tmp_path / "d", rows_per_block=7).path, 3)
    else:
        base = MemoryDataset(X, y, rows_per_block=7)
    view = base.with_bias(0.5)
    if flavour == "memory":
        view.partition(3)
    else:
        with pytest.raises(TypeError, match="partition_dataset"):
            view.partition(3)
    expected = sp.hstack([X, np.full((40, 1), 0.5)], format="csr")
    # the view keeps the base's bounds (balanced without the bias column)
    info = check_grid(view, 3, expected, balanced=False)
    assert np.array_equal(info.row_bounds, base.grid(3).row_bounds)
    assert info.col_bounds[-1] == 13


def test_partition_refuses_to_overwrite_and_rebuilds_when_asked(tmp_path):
    X, y = random_matrix(5, 30, 10, 0.3, True, False)
    ds = write_dataset(X, y, tmp_path / "d")
    partition_dataset(ds.path, 2)
    with pytest.raises(FileExistsError, match=str(tmp_path / "d" / "grids" / "2")):
        partition_dataset(ds.path, 2)
    before = ds.grid(2)
    assert ds.grid(2) is before
    again = partition_dataset(ds.path, 2, overwrite=True)
    check_grid(again, 2, X)
    # a handle opened before re-reads the grid written again instead of its old tables
    assert ds.grid(2) is not before
    check_grid(ds, 2, X)
    assert sorted(os.listdir(tmp_path / "d" / "grids")) == ["2", "zarr.json"]
    with pytest.raises(ValueError, match="grid must be >= 1"):
        partition_dataset(ds.path, 0)
    with pytest.raises(KeyError, match="no 3 x 3 grid"):
        again.grid(3)


def test_failed_partition_leaves_no_grid(tmp_path, monkeypatch):
    from daskpd.data.grid import ZarrSink

    X, y = random_matrix(6, 30, 10, 0.3, False, False)
    ds = write_dataset(X, y, tmp_path / "d", rows_per_block=5)

    def failing_add(self, q, r, rows, cols, vals):
        raise RuntimeError("disk full")

    monkeypatch.setattr(ZarrSink, "add", failing_add)
    with pytest.raises(RuntimeError, match="disk full"):
        partition_dataset(ds.path, 2)
    assert open_dataset(ds.path).grids == []
    assert os.listdir(tmp_path / "d" / "grids") == ["zarr.json"]


def test_cli_partition(tmp_path, capsys):
    from daskpd.cli import main

    X, y = random_matrix(7, 50, 16, 0.3, False, False)
    write_dataset(X, y, tmp_path / "d", rows_per_block=9)
    assert main(["partition", str(tmp_path / "d"), "--grid", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["grid"] == 3 and len(report["row_bounds"]) == 4
    check_grid(open_dataset(tmp_path / "d"), 3, X)
    assert main(["partition", str(tmp_path / "d"), "--grid", "3"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["partition", str(tmp_path / "d"), "--grid", "3", "--overwrite"]) == 0


# ------------------------------------------------------------------------------------------
# int64 offsets beyond 2**31


BIG = 2**31 + 100  # stored entries: more than an int32 offset can address


def _sparse_array(group, name, dtype, length, pieces):
    """A zarr array of ``length`` entries of which only ``pieces`` {offset: values} are written.

    Unwritten chunks are absent on disk (they read as 0), so a > 2**31-entry array costs a few
    chunk files: the read path sees genuine > 2**31 offsets without 8 GB of data.
    """
    array = group.create_array(
        name,
        shape=(length,),
        dtype=dtype,
        chunks=(2**16,),
        compressors=compressors(np.dtype(dtype).itemsize),
        fill_value=0,
        chunk_key_encoding=CHUNK_KEYS,
    )
    for offset, values in pieces.items():
        array[offset : offset + len(values)] = values
    return array


def _manifest(group, directory, names):
    return {
        name: manifest_entry(group[name], os.path.join(directory, name), None) for name in names
    }


@pytest.fixture(scope="module")
def huge_offsets_dataset(tmp_path_factory):
    """3 rows x 100 columns whose last row starts beyond 2**31 stored entries, plus a 2 x 2
    grid whose last tile starts beyond 2**31."""
    path = str(tmp_path_factory.mktemp("huge") / "d")
    group = zarr.open_group(path, mode="w-", zarr_format=3)
    last_row_start = 2**31 + 50
    indices_last = (np.arange(50) * 2).astype(np.int32)
    values_last = np.arange(1, 51, dtype=np.float32)
    small = {
        "indptr": np.array([0, 5, last_row_start, BIG], dtype=np.int64),
        "y": np.array([1.0, -1.0, 1.0]),
        "row_nnz": np.array([5, last_row_start - 5, 50], dtype=np.int64),
        "row_norm_sq": np.zeros(3),
        "col_nnz": np.zeros(100, dtype=np.int64),
        "row_block_bounds": np.array([0, 1, 2, 3], dtype=np.int64),
    }
    for name, values in small.items():
        write_small(group, name, values)
    _sparse_array(
        group,
        "indices",
        np.int32,
        BIG,
        {0: np.array([0, 2, 4, 6, 8], np.int32), last_row_start: indices_last},
    )
    _sparse_array(
        group,
        "data",
        np.float32,
        BIG,
        {0: np.ones(5, np.float32), last_row_start: values_last},
    )
    group.attrs.update(
        {
            "format_version": 1,
            "shape": [3, 100],
            "nnz": BIG,
            "binary": False,
            "layout": "csr",
            "task": "binary",
            "label_counts": {"-1": 1, "1": 2},
            "dtype": "float32",
            "has_sample_weight": False,
            "n_row_blocks": 3,
            "write_id": uuid.uuid4().hex,
            "manifest": _manifest(group, path, [*small, "indices", "data"]),
        }
    )
    # a 2 x 2 grid: tile (1, 1) = the 40 last entries, at offsets beyond 2**31
    grid_path = os.path.join(path, "grids", "2")
    zarr.open_group(os.path.join(path, "grids"), mode="w-", zarr_format=3)
    grid = zarr.open_group(grid_path, mode="w-", zarr_format=3)
    tile_start = BIG - 40
    tables = {
        "row_bounds": np.array([0, 2, 3], dtype=np.int64),
        "col_bounds": np.array([0, 20, 100], dtype=np.int64),
        "tile_ptr": np.array([[0, 3, last_row_start], [last_row_start, tile_start, BIG]]),
        "tile_crc32": np.zeros((4, 3), dtype=np.int64),
    }
    for name, values in tables.items():
        write_small(grid, name, values.astype(np.int64))
    _sparse_array(grid, "rows", np.int32, BIG, {tile_start: np.zeros(40, np.int32)})
    _sparse_array(grid, "cols", np.int32, BIG, {tile_start: indices_last[10:] - 20})
    _sparse_array(grid, "vals", np.float32, BIG, {tile_start: values_last[10:]})
    grid.attrs.update(
        {
            "format_version": 1,
            "grid": 2,
            "nnz": BIG,
            "binary": False,
            "write_id": uuid.uuid4().hex,
            "manifest": _manifest(grid, grid_path, [*tables, "rows", "cols", "vals"]),
        }
    )
    return path


def test_row_reads_beyond_2_31_offsets(huge_offsets_dataset):
    ds = open_dataset(huge_offsets_dataset)
    assert ds.nnz == BIG > np.iinfo(np.int32).max
    X, y = ds.read_rows(2, 3)
    assert X.nnz == 50 and y.tolist() == [1.0]
    assert np.array_equal(X.indices, np.arange(50) * 2)
    assert np.array_equal(X.data, np.arange(1, 51, dtype=np.float32))
    indptr, indices, data, _ = ds.block_arrays(2)
    assert indptr.dtype == np.int64 and indptr.tolist() == [0, 50]
    assert np.array_equal(data, np.arange(1, 51, dtype=np.float32))
    X0, _ = ds.block(0)
    assert X0.indices.tolist() == [0, 2, 4, 6, 8]
    assert ds.row_nnz[1] == 2**31 + 45  # an int64 count


def test_tile_reads_beyond_2_31_offsets(huge_offsets_dataset):
    ds = open_dataset(huge_offsets_dataset)
    info = ds.grid(2)
    assert info.tile_ptr.dtype == np.int64 and info.tile_ptr[1, 1] > 2**31
    rows, cols, vals = ds.tile(2, 1, 1)
    assert rows.shape == (40,) and np.all(rows == 0)
    assert np.array_equal(cols + 20, np.arange(10, 50) * 2)
    assert np.array_equal(vals, np.arange(11, 51, dtype=np.float32))
    # the bias view shifts int64 offsets by row counts without overflow
    view_info = ds.with_bias(1.0).grid(2)
    assert view_info.tile_ptr[1, 2] == BIG + 3
    assert view_info.tile_ptr[1, 0] == info.tile_ptr[1, 0] + 2


def test_offset_arithmetic_of_kernels_is_int64():
    # row blocks whose nonzero counts overflow int32 (rows of 2**30 entries)
    row_nnz = np.full(6, 2**30, dtype=np.int64)
    cuts, rows, nnz = kernels.cut_row_blocks(row_nnz, 0, 0, 2**62, 3 * 2**30)
    assert cuts.tolist() == [3] and rows == 3 and nnz == 3 * 2**30
    # balanced bounds of cumulative counts beyond 2**31 (and 2**32)
    counts = np.full(8, 2**31, dtype=np.int64)
    cumulative = list(cumulative_chunks([counts[:3], counts[3:]]))
    assert cumulative[-1][-1] == 8 * 2**31
    bounds = balanced_bounds(iter(cumulative), 8 * 2**31, 4, 8)
    assert bounds.tolist() == [0, 2, 4, 6, 8]
    # per-tile counts accumulate in int64
    counts = np.full(2, 2**31 - 1, dtype=np.int64)
    kernels.count_tile_nnz(
        np.array([0, 3], np.int64), np.array([0, 1, 5], np.int32), np.array([0, 2, 6]),
        np.arange(6), counts,
    )  # fmt: skip
    assert counts.tolist() == [2**31 + 1, 2**31]


def test_partition_on_a_cluster_equals_the_streamed_one(tmp_path, local_cluster):
    X, y = random_matrix(8, 200, 40, 0.3, False, False)
    # tiny chunks: many chunks straddle two row groups and are written under locks
    options = {"rows_per_block": 16, "chunk_bytes": 512}
    serial = write_dataset(X, y, tmp_path / "serial", **options)
    parallel = write_dataset(X, y, tmp_path / "parallel", **options)
    serial = partition_dataset(serial.path, 4, chunk_bytes=512, memory_budget=64)
    parallel = partition_dataset(
        parallel.path, 4, chunk_bytes=512, memory_budget=64, client=local_cluster
    )
    for a, b in zip(serial.grid(4), parallel.grid(4), strict=True):
        assert np.array_equal(a, b)
    for q in range(4):
        for r in range(4):
            for a, b in zip(serial.tile(4, q, r), parallel.tile(4, q, r), strict=True):
                assert np.array_equal(a, b)
    check_grid(parallel, 4, X)
    parallel.verify()
    chunk = parallel._arrays[(os.path.join(parallel.path, "grids", "4"), "rows")].chunks[0]
    assert np.any(parallel.grid(4).tile_ptr[1:, 0] % chunk), "no chunk shared by two groups"


def test_column_order_deals_dense_and_sparse_columns_to_every_block():
    from daskpd.data import GridInfo
    from daskpd.data.grid import column_blocks

    # columns grouped by kind, as splice-site k-mers are: 6 dense columns, then 594 sparse
    rng = np.random.default_rng(0)
    col_nnz = np.concatenate([np.full(6, 1000), rng.integers(0, 5, size=594)])
    for n_blocks in (1, 2, 3):
        order, bounds = column_blocks(col_nnz, n_blocks)
        assert np.array_equal(np.sort(order), np.arange(600))
        info = GridInfo(np.zeros(2, np.int64), bounds, np.zeros((1, 2), np.int64), order)
        position = info.column_position()
        assert np.array_equal(order[position], np.arange(600))
        for r in range(n_blocks):
            columns = info.block_columns(r)
            # the same share of the dense columns in every block, and the block's columns
            # in their original relative order (here: its dense columns first)
            dense = np.flatnonzero(columns < 6)
            assert dense.shape[0] == 6 // n_blocks
            assert np.array_equal(dense, np.arange(6 // n_blocks))
            assert np.all(np.diff(columns) > 0)
            # and nonzeros within one column's worth of an even split
            assert abs(col_nnz[columns].sum() - col_nnz.sum() / n_blocks) <= 1000
            assert abs(columns.shape[0] - 600 / n_blocks) < 1
    # grids stored without an order read as the identity
    legacy = GridInfo(np.zeros(2, np.int64), np.array([0, 4, 9]), np.zeros((1, 3), np.int64))
    assert legacy.block_columns(1).tolist() == [4, 5, 6, 7, 8]
    assert np.array_equal(legacy.column_position(), np.arange(9))
