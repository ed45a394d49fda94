"""Dataset format: write/open round trips, writer behaviour, in-memory datasets, bias view, CLI."""

from __future__ import annotations

import json
import pickle
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daskpd.data import (
    BaseDataset,
    Dataset,
    DatasetIntegrityError,
    DatasetWriter,
    MemoryDataset,
    as_dataset,
    open_dataset,
    write_dataset,
)

# ------------------------------------------------------------------------------------------
# helpers


def random_problem(seed, n, d, density, binary, dense, dtype, empty_rows=0.0, zeros=False):
    """A random matrix (with empty rows/columns) and +-1 or real labels."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n, d)) < density
    mask[rng.random(n) < empty_rows] = False
    if binary:
        values = mask.astype(dtype)
    else:
        values = np.where(mask, rng.normal(size=(n, d)), 0.0).astype(dtype)
    if dense:
        X = values
    else:
        X = sp.csr_matrix(values)
        if zeros and X.nnz:
            # an explicit stored zero must survive the round trip as a stored entry
            X.data[rng.integers(X.nnz)] = 0.0
    y = rng.choice([-1.0, 1.0], size=n) if seed % 2 else rng.normal(size=n)
    return X, y


def concat_blocks(dataset):
    parts = [dataset.block(i) for i in range(dataset.n_row_blocks)]
    Xs = [p[0] for p in parts]
    X = np.vstack(Xs) if dataset.layout == "dense" else sp.vstack(Xs, format="csr")
    return X, np.concatenate([p[1] for p in parts])


def concat_block_arrays(dataset):
    """Global CSR arrays rebuilt from ``block_arrays`` (int64 offsets)."""
    indptrs, indices, data = [np.zeros(1, dtype=np.int64)], [], []
    offset = 0
    for i in range(dataset.n_row_blocks):
        ip, ix, dt, _ = dataset.block_arrays(i)
        assert ip.dtype == np.int64 and ix.dtype == np.int32 and ip[0] == 0
        indptrs.append(ip[1:] + offset)
        offset += int(ip[-1])
        indices.append(ix)
        if dt is not None:
            data.append(dt)
    return (
        np.concatenate(indptrs),
        np.concatenate(indices),
        np.concatenate(data) if data else None,
    )


problems = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 2**31),
        "n": st.integers(1, 40),
        "d": st.integers(1, 25),
        "density": st.sampled_from([0.0, 0.05, 0.3, 1.0]),
        "binary": st.booleans(),
        "dense": st.booleans(),
        "dtype": st.sampled_from([np.float32, np.float64]),
        "empty_rows": st.sampled_from([0.0, 0.3]),
        "zeros": st.booleans(),
    }
)


# ------------------------------------------------------------------------------------------
# round trips


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    problem=problems,
    rows_per_block=st.integers(1, 45),
    chunk_bytes=st.sampled_from([96, 4096]),
    with_weight=st.booleans(),
)
def test_write_open_reassembles_input(problem, rows_per_block, chunk_bytes, with_weight):
    X, y = random_problem(**problem)
    n, d = X.shape
    dense = problem["dense"]
    weight = np.random.default_rng(problem["seed"]).random(n) if with_weight else None
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/data.zarr"
        ds = write_dataset(
            X, y, path, sample_weight=weight, rows_per_block=rows_per_block, chunk_bytes=chunk_bytes
        )
        ds = open_dataset(path)
        expected_dense = np.asarray(X.toarray() if sp.issparse(X) else X)
        assert ds.shape == (n, d)
        assert ds.layout == ("dense" if dense else "csr")
        assert ds.dtype == np.dtype(problem["dtype"])
        assert ds.row_block_bounds.dtype == np.int64
        assert np.array_equal(ds.row_block_bounds, np.append(np.arange(0, n, rows_per_block), n))
        X_back, y_back = concat_blocks(ds)
        assert np.array_equal(y_back, y) and np.array_equal(ds.y, y)
        if dense:
            assert isinstance(X_back, np.ndarray) and X_back.dtype == ds.dtype
            assert np.array_equal(X_back, expected_dense)
            assert ds.nnz == np.count_nonzero(expected_dense)
        else:
            assert sp.isspmatrix_csr(X_back)
            assert np.array_equal(X_back.toarray(), expected_dense)
            indptr, indices, data = concat_block_arrays(ds)
            assert np.array_equal(indptr, X.indptr) and np.array_equal(indices, X.indices)
            assert ds.nnz == X.nnz
            binary = bool(X.nnz and np.all(X.data == 1))
            assert ds.binary == binary
            assert (data is None) == binary
            if not binary:
                assert np.array_equal(data, X.data) and data.dtype == ds.dtype
        nonzero = expected_dense != 0 if dense else sp.csr_matrix(X, copy=True)
        if not dense:
            nonzero.data[:] = 1
        assert np.array_equal(ds.row_nnz, np.asarray((nonzero != 0).sum(axis=1)).ravel())
        assert np.array_equal(ds.col_nnz, np.asarray((nonzero != 0).sum(axis=0)).ravel())
        wide = expected_dense.astype(np.float64)
        assert np.allclose(ds.row_norm_sq, (wide * wide).sum(axis=1), rtol=1e-12, atol=0)
        if ds.task == "binary":
            assert ds.label_counts == {
                "-1": int((y == -1).sum()),
                "1": int((y == 1).sum()),
            }
        else:
            assert ds.label_counts is None and not np.all(np.isin(y, [-1.0, 1.0]))
        assert ds.has_sample_weight == with_weight
        if with_weight:
            assert np.array_equal(ds.sample_weight_rows(0, n), weight)
        else:
            assert ds.sample_weight_rows(0, n) is None
        start = problem["seed"] % n
        stop = min(n, start + rows_per_block + 3)
        X_rows, y_rows = ds.read_rows(start, stop)
        rows_dense = X_rows if dense else X_rows.toarray()
        assert np.array_equal(rows_dense, expected_dense[start:stop])
        assert np.array_equal(y_rows, y[start:stop])

        memory = MemoryDataset(X, y, weight, rows_per_block=rows_per_block)
        assert np.array_equal(memory.row_block_bounds, ds.row_block_bounds)
        for name in ("row_nnz", "col_nnz", "row_norm_sq"):
            assert np.array_equal(getattr(memory, name), getattr(ds, name)), name
        for attr in ("shape", "nnz", "binary", "layout", "task", "label_counts", "dtype"):
            assert getattr(memory, attr) == getattr(ds, attr), attr
        for i in range(ds.n_row_blocks):
            for a, b in zip(memory.block_arrays(i), ds.block_arrays(i), strict=True):
                assert (a is None and b is None) or np.array_equal(a, b)
        ds.verify()


def test_block_nnz_cuts_blocks_by_nonzeros(tmp_path):
    X, y = random_problem(3, 200, 30, 0.2, False, False, np.float64)
    ds = write_dataset(X, y, tmp_path / "d", block_nnz=100)
    row_nnz = np.diff(X.indptr)
    bounds = ds.row_block_bounds
    for b in range(ds.n_row_blocks):
        block_nnz = row_nnz[bounds[b] : bounds[b + 1]].sum()
        assert block_nnz <= 100 or bounds[b + 1] - bounds[b] == 1
        if b + 1 < ds.n_row_blocks:  # greedy: the next row did not fit
            assert block_nnz + row_nnz[bounds[b + 1]] > 100
    assert np.array_equal(concat_blocks(ds)[0].toarray(), X.toarray())


def test_default_blocks_and_chunks_are_sized_for_scale(tmp_path):
    X, y = random_problem(4, 300, 40, 0.1, False, False, np.float64)
    ds = write_dataset(X, y, tmp_path / "d")
    assert ds.n_row_blocks == 1
    group = ds._group
    assert group["indices"].chunks == (2**20,)  # 4 MiB of int32
    assert group["indptr"].chunks == (2**19,)
    assert group["indptr"].dtype == np.int64 and group["indices"].dtype == np.int32
    codecs = [type(c).__name__ for c in group["indices"].metadata.codecs]
    assert "BloscCodec" in codecs and "Crc32cCodec" in codecs


def test_writer_streams_rows_in_any_split(tmp_path):
    X, y = random_problem(5, 100, 20, 0.2, False, False, np.float32)
    writer = DatasetWriter(tmp_path / "d", 20, dtype=np.float32, rows_per_block=7, chunk_bytes=64)
    with writer:
        for start, stop in [(0, 1), (1, 1), (1, 40), (40, 41), (41, 100)]:
            writer.append(X[start:stop], y[start:stop])
        assert not (tmp_path / "d").exists()  # nothing visible until close
    ds = open_dataset(tmp_path / "d")
    assert np.array_equal(concat_blocks(ds)[0].toarray(), X.toarray())
    assert np.array_equal(ds.row_block_bounds, np.append(np.arange(0, 100, 7), 100))


def test_writer_accepts_dense_rows_for_csr_and_sparse_rows_for_dense(tmp_path):
    X, y = random_problem(6, 30, 8, 0.3, False, True, np.float64)
    with DatasetWriter(tmp_path / "a", 8) as writer:
        writer.append(X, y)
    with DatasetWriter(tmp_path / "b", 8, layout="dense") as writer:
        writer.append(sp.csr_matrix(X), y)
    assert np.array_equal(open_dataset(tmp_path / "a").read_rows(0, 30)[0].toarray(), X)
    assert np.array_equal(open_dataset(tmp_path / "b").read_rows(0, 30)[0], X)


@pytest.mark.parametrize(
    ("rows", "labels", "options", "message"),
    [
        (sp.csr_matrix(([1.0, 2.0], [3, 1], [0, 0, 2]), shape=(2, 5)), [1, 1], {}, "row 2: column"),
        (sp.csr_matrix(([1.0], [7], [0, 1]), shape=(1, 9)), [1], {}, "9 features"),
        (sp.csr_matrix(([np.nan], [1], [0, 1]), shape=(1, 5)), [1], {}, "row 1 has a non-f"),
        (sp.csr_matrix(([2.0], [1], [0, 1]), shape=(1, 5)), [1], {"binary": True}, "binary"),
        (np.ones((2, 5)), [1, np.inf], {}, "label of row 2"),
        (np.ones((2, 5)), [1, 0.5], {"task": "binary"}, r"-1 or \+1"),
        (np.ones((2, 5)), [1], {}, "expected 2"),
    ],
)
def test_writer_rejects_bad_rows_naming_the_row(tmp_path, rows, labels, options, message):
    path = tmp_path / "d"
    with pytest.raises(ValueError, match=message):
        with DatasetWriter(path, 5, **options) as writer:
            writer.append(sp.csr_matrix((1, 5)), [1.0])  # a valid first row
            writer.append(rows, labels)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_writer_rejects_bad_options(tmp_path):
    with pytest.raises(ValueError, match="n_features"):
        DatasetWriter(tmp_path / "d", 0)
    with pytest.raises(ValueError, match="dtype"):
        DatasetWriter(tmp_path / "d", 3, dtype=np.int32)
    with pytest.raises(ValueError, match="rows_per_block"):
        DatasetWriter(tmp_path / "d", 3, rows_per_block=0)
    with pytest.raises(ValueError, match="layout"):
        DatasetWriter(tmp_path / "d", 3, layout="coo")
    with pytest.raises(ValueError, match="no rows"):
        DatasetWriter(tmp_path / "d", 3).close()
    with pytest.raises(ValueError, match="sample_weight"):
        with DatasetWriter(tmp_path / "d", 3) as writer:
            writer.append(np.ones((1, 3)), [1.0], sample_weight=[-1.0])
    assert list(tmp_path.iterdir()) == []


def test_write_dataset_from_dask_arrays_chunk_by_chunk(tmp_path):
    import dask.array as da

    X, y = random_problem(7, 90, 12, 0.3, False, True, np.float64)
    dx = da.from_array(X, chunks=(25, 5))
    ds = write_dataset(dx, da.from_array(y, chunks=40), tmp_path / "dense", rows_per_block=10)
    assert ds.layout == "dense" and np.array_equal(concat_blocks(ds)[0], X)
    sparse_chunks = dx.map_blocks(sp.csr_matrix, dtype=np.float64, meta=sp.csr_matrix((0, 0)))
    ds = write_dataset(sparse_chunks, y, tmp_path / "sparse")
    assert ds.layout == "csr" and np.array_equal(concat_blocks(ds)[0].toarray(), X)
    converted = as_dataset(sparse_chunks, da.from_array(y, chunks=40))
    assert isinstance(converted, Dataset) and converted.shape == X.shape
    assert np.array_equal(concat_blocks(converted)[0].toarray(), X)
    small = as_dataset(dx, y)
    assert isinstance(small, MemoryDataset) and np.array_equal(small.read_rows(0, 90)[0], X)


def test_as_dataset_inputs(tmp_path):
    X, y = random_problem(9, 20, 6, 0.4, False, False, np.float64)
    memory = as_dataset(X, y)
    assert isinstance(memory, MemoryDataset) and isinstance(memory, BaseDataset)
    assert as_dataset(memory) is memory
    stored = write_dataset(X, y, tmp_path / "d")
    assert isinstance(as_dataset(str(tmp_path / "d")), Dataset)
    assert as_dataset(stored) is stored
    with pytest.raises(ValueError, match="come from the dataset"):
        as_dataset(stored, y)
    unlabeled = as_dataset(X.toarray())
    assert unlabeled.layout == "dense" and unlabeled.task == "regression"
    assert np.array_equal(unlabeled.y, np.zeros(20))


def test_dataset_pickles_as_its_path_and_reads_on_workers(tmp_path, local_cluster):
    X, y = random_problem(11, 60, 10, 0.3, False, False, np.float64)
    ds = write_dataset(X, y, tmp_path / "d", rows_per_block=16)
    payload = pickle.dumps(ds)
    assert len(payload) < 400 and b"indices" not in payload
    assert pickle.loads(payload).path == ds.path
    delayed_blocks = ds.to_delayed()
    assert len(delayed_blocks) == ds.n_row_blocks == 4
    futures = local_cluster.compute(delayed_blocks)
    blocks = local_cluster.gather(futures)
    assert np.array_equal(sp.vstack([b[0] for b in blocks]).toarray(), X.toarray())
    assert np.array_equal(np.concatenate([b[1] for b in blocks]), y)


def test_unpickled_handles_are_shared_until_the_dataset_is_rewritten(tmp_path):
    X, y = random_problem(12, 40, 8, 0.3, False, False, np.float64)
    ds = write_dataset(X, y, tmp_path / "d", rows_per_block=16)
    payload = pickle.dumps(ds)
    first = pickle.loads(payload)
    assert pickle.loads(payload) is first and first is not ds
    assert np.array_equal(concat_blocks(first)[0].toarray(), X.toarray())
    replaced = write_dataset(X[:20], y[:20], tmp_path / "d", overwrite=True)
    # a task built for the old write must not read the new one
    with pytest.raises(DatasetIntegrityError, match="rewritten after this task was created"):
        pickle.loads(payload)
    again = pickle.loads(pickle.dumps(replaced))
    assert again is not first and again.shape == (20, 8)
    assert pickle.loads(pickle.dumps(replaced)) is again


def test_concurrent_readers_in_threads(tmp_path):
    X, y = random_problem(13, 200, 15, 0.2, False, False, np.float64)
    write_dataset(X, y, tmp_path / "d", rows_per_block=10, chunk_bytes=256)

    def read_all(_):
        ds = open_dataset(tmp_path / "d")
        return concat_blocks(ds)[0].toarray()

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(read_all, range(8)))
    assert all(np.array_equal(r, X.toarray()) for r in results)


def test_index_errors(tmp_path):
    X, y = random_problem(15, 10, 4, 0.5, False, False, np.float64)
    ds = write_dataset(X, y, tmp_path / "d", rows_per_block=4)
    with pytest.raises(IndexError, match="row block 3"):
        ds.block(3)
    with pytest.raises(IndexError, match="row range"):
        ds.read_rows(5, 11)
    with pytest.raises(FileNotFoundError, match="no dataset"):
        open_dataset(tmp_path / "missing")


# ------------------------------------------------------------------------------------------
# bias view


@pytest.mark.parametrize("flavour", ["disk", "memory"])
@pytest.mark.parametrize("kind", ["valued", "binary", "dense"])
def test_with_bias_appends_a_constant_last_feature(tmp_path, flavour, kind):
    X, y = random_problem(17, 45, 9, 0.3, kind == "binary", kind == "dense", np.float64, 0.2)
    if flavour == "disk":
        base = write_dataset(X, y, tmp_path / "d", rows_per_block=8)
    else:
        base = MemoryDataset(X, y, rows_per_block=8)
    for scale in (1.0, 2.5):
        view = base.with_bias(scale)
        expected = np.hstack(
            [np.asarray(X.toarray() if sp.issparse(X) else X), np.full((45, 1), scale)]
        )
        assert view.shape == (45, 10) and view.nnz == base.nnz + 45
        assert view.binary == (base.binary and scale == 1.0)
        got = concat_blocks(view)[0]
        assert np.array_equal(got if kind == "dense" else got.toarray(), expected)
        indptr, indices, data = concat_block_arrays(view)
        rebuilt = sp.csr_matrix(
            (np.ones(indices.shape[0]) if data is None else data, indices, indptr), shape=(45, 10)
        )
        assert np.array_equal(rebuilt.toarray(), expected)
        assert np.array_equal(view.row_nnz, base.row_nnz + 1)
        assert np.array_equal(view.col_nnz, np.append(base.col_nnz, 45))
        assert np.allclose(view.row_norm_sq, base.row_norm_sq + scale**2)
        assert np.array_equal(view.y, y)
        again = pickle.loads(pickle.dumps(view))
        assert again.shape == view.shape and again.scale == scale
    with pytest.raises(ValueError, match="finite and > 0"):
        base.with_bias(0.0)


# ------------------------------------------------------------------------------------------
# CLI


def test_cli_info_prints_a_json_summary(tmp_path, capsys):
    from daskpd.cli import main

    X, y = random_problem(19, 30, 7, 0.3, False, False, np.float64)
    ds = write_dataset(X, y, tmp_path / "d")
    assert main(["info", str(tmp_path / "d"), "--verify"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["shape"] == [30, 7] and summary["nnz"] == ds.nnz
    assert summary["format_version"] == 2 and summary["verified"] is True
    assert summary["stored_bytes"] > 0
    assert main(["info", str(tmp_path / "missing")]) == 2
    assert "no dataset" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# module names


def test_the_old_module_names_are_gone():
    # the package was never released: the data layer has one name, daskpd.data
    import importlib

    for old_name in ("dataset", "_atomic", "_base", "_format", "_layout", "_memory", "_partition"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"daskpd.{old_name}")


def test_opening_and_reading_a_dataset_imports_neither_numba_nor_scipy(tmp_path):
    """The data layer imports numba and scipy in the functions that use them: a new process
    that opens a stored dataset and reads its rows (a worker unpickling a dataset, or
    ``daskpd info``) does not pay for them; the rows it reads are the written ones."""
    import subprocess
    import sys

    X = sp.random(40, 12, density=0.3, format="csr", random_state=3)
    y = np.where(np.arange(40) % 2 == 0, 1.0, -1.0)
    path = write_dataset(X, y, tmp_path / "d.zarr", rows_per_block=10).path
    script = (
        "import sys, numpy as np\n"
        "from daskpd.data import open_dataset\n"
        f"indptr, indices, data, y = open_dataset({str(path)!r}).read_rows_arrays(5, 30)\n"
        "print(sorted(m for m in ('numba', 'scipy') if m in sys.modules))\n"
        "np.save(sys.stdout.buffer, np.concatenate([indptr, indices, data, y]))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    first, _, rest = run.stdout.partition(b"\n")
    assert first.decode() == "[]"
    import io

    rows = X[5:30]
    expected = np.concatenate([rows.indptr, rows.indices, rows.data.astype(np.float32), y[5:30]])
    np.testing.assert_allclose(np.load(io.BytesIO(rest)), expected, rtol=1e-6)
