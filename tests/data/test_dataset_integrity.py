"""Dataset reliability: atomic writes, overwrite refusal, corruption detection, bounded memory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from daskpd.data import (
    DatasetIntegrityError,
    DatasetWriter,
    open_dataset,
    partition_dataset,
    write_dataset,
)


def make_data(seed=0, n=400, d=30, density=0.2):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed)
    return X, rng.choice([-1.0, 1.0], size=n)


def chunk_files(path, name):
    directory = os.path.join(path, name)
    return sorted(
        (os.path.join(directory, f) for f in os.listdir(directory) if f.startswith("c.")),
        key=lambda f: int(f.rsplit(".", 1)[1]),
    )


# ------------------------------------------------------------------------------------------
# atomic writes


def test_exception_mid_write_leaves_nothing(tmp_path):
    X, y = make_data()
    path = tmp_path / "d"
    with pytest.raises(RuntimeError, match="source failed"):
        with DatasetWriter(path, 30, rows_per_block=50, chunk_bytes=256) as writer:
            writer.append(X[:200], y[:200])
            assert any(p.name.startswith("d.tmp-") for p in tmp_path.iterdir())
            with pytest.raises(FileNotFoundError):
                open_dataset(path)  # a reader never sees the half-written dataset
            raise RuntimeError("source failed")
    assert list(tmp_path.iterdir()) == []


def test_bad_row_in_a_late_chunk_leaves_nothing(tmp_path):
    X, y = make_data()
    X = X.tolil()
    X[350, 3] = np.nan
    with pytest.raises(ValueError, match="row 350"):
        write_dataset(X.tocsr(), y, tmp_path / "d", chunk_bytes=256)
    assert list(tmp_path.iterdir()) == []


def test_killed_writer_leaves_nothing_at_the_destination(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys, time
        import numpy as np, scipy.sparse as sp
        from daskpd.data import DatasetWriter
        X = sp.random(100, 20, density=0.2, format="csr", random_state=0)
        with DatasetWriter({str(tmp_path / "d")!r}, 20, chunk_bytes=256) as writer:
            for _ in range(10000):
                writer.append(X, np.ones(100))
                print("appended", flush=True)
                time.sleep(0.01)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(3):
            assert child.stdout.readline().strip() == "appended"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
        child.stdout.close()
    assert not (tmp_path / "d").exists()
    # only the writer's private temporary directory remains, under another name
    assert all(p.name.startswith("d.tmp-") for p in tmp_path.iterdir())


def test_existing_destination_is_never_overwritten_silently(tmp_path):
    X, y = make_data()
    first = write_dataset(X, y, tmp_path / "d")
    with pytest.raises(FileExistsError, match=str(tmp_path / "d")):
        write_dataset(X[:10], y[:10], tmp_path / "d")
    with pytest.raises(FileExistsError, match="overwrite"):
        DatasetWriter(tmp_path / "d", 30)
    (tmp_path / "other").mkdir()
    with pytest.raises(FileExistsError, match=str(tmp_path / "other")):
        write_dataset(X, y, tmp_path / "other")
    assert open_dataset(first.path).shape == (400, 30)
    replaced = write_dataset(X[:10], y[:10], tmp_path / "d", overwrite=True)
    assert replaced.shape == (10, 30) and open_dataset(tmp_path / "d").shape == (10, 30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "other"]


def test_two_processes_read_one_dataset_at_once(tmp_path):
    X, y = make_data(n=2000)
    write_dataset(X, y, tmp_path / "d", rows_per_block=100, chunk_bytes=1024)
    script = textwrap.dedent(
        f"""
        import numpy as np
        from daskpd.data import open_dataset
        ds = open_dataset({str(tmp_path / "d")!r})
        total = 0.0
        for _ in range(3):
            for i in range(ds.n_row_blocks):
                X, y = ds.block(i)
                total += float(X.sum()) + float(y.sum())
        print(repr(total))
        """
    )
    children = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=120)[0] for child in children]
    assert all(child.returncode == 0 for child in children)
    expected = 3 * (X.sum() + y.sum())
    assert all(abs(float(out) - expected) < 1e-6 * abs(expected) for out in outputs)


# ------------------------------------------------------------------------------------------
# corruption


@pytest.fixture
def stored(tmp_path):
    X, y = make_data()
    write_dataset(X, y, tmp_path / "d", rows_per_block=64, chunk_bytes=512)
    return str(tmp_path / "d")


def test_flipped_byte_in_a_chunk_fails_clearly_on_read_and_verify(stored):
    victim = chunk_files(stored, "indices")[1]
    payload = bytearray(open(victim, "rb").read())
    payload[len(payload) // 2] ^= 0xFF
    open(victim, "wb").write(bytes(payload))
    ds = open_dataset(stored)  # same size: the fast checks cannot see it
    with pytest.raises(DatasetIntegrityError, match="array 'indices'"):
        for i in range(ds.n_row_blocks):
            ds.block(i)
    with pytest.raises(DatasetIntegrityError, match="'indices'"):
        ds.verify()
    with pytest.raises(DatasetIntegrityError, match="'indices'"):
        open_dataset(stored, verify=True)


def test_truncated_chunk_file_fails_at_open(stored):
    victim = chunk_files(stored, "data")[0]
    size = os.path.getsize(victim)
    with open(victim, "r+b") as handle:
        handle.truncate(size - 7)
    with pytest.raises(DatasetIntegrityError, match="array 'data'.*truncated or altered"):
        open_dataset(stored)


def test_deleted_chunk_file_fails_at_open(stored):
    os.remove(chunk_files(stored, "y")[-1])
    with pytest.raises(DatasetIntegrityError, match="array 'y' has .* chunk files"):
        open_dataset(stored)


def test_missing_array_fails_at_open(stored):
    import shutil

    shutil.rmtree(os.path.join(stored, "row_nnz"))
    with pytest.raises(DatasetIntegrityError, match="array 'row_nnz' is missing"):
        open_dataset(stored)


def test_altered_array_metadata_fails_at_open(stored):
    meta_path = os.path.join(stored, "indptr", "zarr.json")
    meta = json.load(open(meta_path))
    meta["shape"] = [meta["shape"][0] - 10]
    json.dump(meta, open(meta_path, "w"))
    with pytest.raises(DatasetIntegrityError, match="array 'indptr' has shape"):
        open_dataset(stored)


def test_rewritten_values_are_caught_by_verify(stored):
    # a validly encoded chunk with other values: only the whole-array checksum sees it
    array = zarr.open_array(os.path.join(stored, "y"), mode="r+")
    array[5] = -array[5]
    with pytest.raises(DatasetIntegrityError, match="'y'"):
        open_dataset(stored, verify=True)


def test_altered_grid_tile_is_caught_by_verify(stored):
    partition_dataset(stored, 3, chunk_bytes=512)
    grid_dir = os.path.join(stored, "grids", "3")
    array = zarr.open_array(os.path.join(grid_dir, "cols"), mode="r+")
    array[0] = array[0] + 1
    ds = open_dataset(stored)
    with pytest.raises(DatasetIntegrityError, match=r"grids/3.*'cols'"):
        ds.verify()


def test_not_a_dataset(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetIntegrityError, match="not a readable daskpd dataset"):
        open_dataset(tmp_path / "empty")
    zarr.open_group(tmp_path / "other", mode="w").attrs["format_version"] = 99
    with pytest.raises(DatasetIntegrityError, match="format_version is 99"):
        open_dataset(tmp_path / "other")


def test_cli_reports_corruption_without_traceback(stored, capsys):
    from daskpd.cli import main

    os.remove(chunk_files(stored, "indices")[0])
    assert main(["info", stored]) == 2
    err = capsys.readouterr().err
    assert "'indices'" in err and "Traceback" not in err


# ------------------------------------------------------------------------------------------
# bounded memory

MEMORY_SCRIPT = """
import resource, sys
import numpy as np, scipy.sparse as sp
from daskpd.data import DatasetWriter, partition_dataset, write_dataset

def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

tmp, n_rows = sys.argv[1], int(sys.argv[2])
n_features, row_nnz, chunk_bytes = 50_000, 20, 256 * 1024
# warm up (imports, kernel compilation, zarr's thread pool) before the baseline
small = sp.random(50, 30, density=0.2, format="csr", random_state=0)
partition_dataset(write_dataset(small, np.ones(50), tmp + "/warm").path, 2)
baseline = peak_mib()
rng = np.random.default_rng(0)
stride = n_features // row_nnz
with DatasetWriter(tmp + "/big", n_features, block_nnz=2**16, chunk_bytes=chunk_bytes) as writer:
    for start in range(0, n_rows, 5000):
        m = min(5000, n_rows - start)
        offsets = rng.integers(0, stride, size=(m, row_nnz)) + np.arange(row_nnz) * stride
        indptr = np.arange(m + 1, dtype=np.int64) * row_nnz
        rows = sp.csr_matrix(
            (rng.random(m * row_nnz), offsets.ravel().astype(np.int32), indptr),
            shape=(m, n_features),
        )
        writer.append(rows, rng.choice([-1.0, 1.0], size=m))
write_peak = peak_mib() - baseline
dataset = partition_dataset(tmp + "/big", 4, memory_budget=2**20, chunk_bytes=chunk_bytes)
partition_peak = peak_mib() - baseline
decoded = dataset.nnz * 12 + dataset.n_samples * 40  # indices + data + per-row arrays
print(dataset.nnz, decoded / 2**20, write_peak, partition_peak)
"""


@pytest.mark.slow  # a scale run: 14 s of a fresh clone's suite
def test_write_and_partition_run_in_bounded_memory(tmp_path):
    """Peak RSS growth of a child process that streams ~107 MiB of decoded CSR to disk and
    partitions it 4 x 4 stays under a 32 MiB cap (a third of the data)."""
    cap_mib = 32
    started = time.time()
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(tmp_path), "400000"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    nnz, decoded_mib, write_peak, partition_peak = (float(v) for v in out.stdout.split())
    assert nnz == 8_000_000
    assert decoded_mib > 3 * cap_mib
    assert write_peak < cap_mib, f"writer grew RSS by {write_peak:.1f} MiB"
    assert partition_peak < cap_mib, f"partition grew RSS by {partition_peak:.1f} MiB"
    assert time.time() - started < 600
