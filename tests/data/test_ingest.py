"""svmlight / libsvm ingestion: exact equality with scikit-learn, bad input, CLI behaviour."""

from __future__ import annotations

import bz2
import glob
import gzip
import lzma
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_files

from daskpd.cli import main as cli_main
from daskpd.data import open_dataset
from daskpd.io.svmlight import SvmlightFormatError, dump_svmlight, ingest_svmlight

# Numbers that exercise both the kernel's fast path and the NumPy fallback: 17 significant
# digits, subnormals, huge exponents, signs, leading/trailing points, long mantissas.
TRICKY_VALUES = [
    "1e5", "-.5", "+3", "1.", "0.30000000000000004", "123456789012345678901234",
    "1e-320", "4.9e-324", "1.7976931348623157e308", "-0", "2.5E-3", "0.1", "7",
    "0.000000000000000000000000000001", "9007199254740993", "1.00000000000000011102230246251565404",
]  # fmt: skip


def _random_csr(rng, n_rows, n_features, density):
    X = sp.random(n_rows, n_features, density=density, format="csr", random_state=rng)
    X.data = rng.standard_normal(X.nnz) * 10.0 ** rng.integers(-5, 5, X.nnz)
    return X


def _write(path, text: bytes, compression=None):
    opener = {None: open, "gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}[compression]
    with opener(path, "wb") as handle:
        handle.write(text)
    return str(path)


def _sklearn_file(tmp_path, name, rng, *, zero_based, n_rows=300, n_features=50, comment=True,
                  density=0.1, labels=(-1.0, 1.0)):  # fmt: skip
    X = _random_csr(rng, n_rows, n_features, density)
    y = rng.choice(labels, n_rows)
    path = tmp_path / name
    dump_svmlight_file(X, y, str(path), zero_based=zero_based)
    text = path.read_bytes()
    if comment:
        # comments, blank lines and CRLF-free trailing spaces, as hand-edited files have
        lines = text.split(b"\n")
        lines.insert(len(lines) // 2, b"# a comment line")
        lines.insert(1, b"   ")
        lines[3] = lines[3] + b"  # trailing comment 5:7"
        text = b"\n".join(lines)
    path.write_bytes(text)
    return path


def _assert_same_as_sklearn(dataset, sources, dtype=np.float64, zero_based="auto", **kwargs):
    loaded = load_svmlight_files([str(s) for s in sources], dtype=dtype, zero_based=zero_based,
                                 **kwargs)  # fmt: skip
    matrices, labels = loaded[0::2], loaded[1::2]
    expected_X = sp.vstack([sp.csr_matrix(m) for m in matrices], format="csr")
    expected_y = np.concatenate(labels)
    X, y = dataset.read_rows(0, dataset.n_samples)
    X = sp.csr_matrix(X)
    assert X.shape == expected_X.shape
    np.testing.assert_array_equal(X.indptr, expected_X.indptr)
    np.testing.assert_array_equal(X.indices, expected_X.indices)
    assert X.data.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(X.data, expected_X.data)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, expected_y)


@pytest.mark.parametrize("compression", [None, "gz", "bz2", "xz"])
@pytest.mark.parametrize("zero_based_file", [False, True])
def test_equals_sklearn_plain_and_compressed(tmp_path, rng, compression, zero_based_file):
    source = reference = _sklearn_file(tmp_path, "a.svm", rng, zero_based=zero_based_file)
    if compression:
        # scikit-learn reads .gz and .bz2 itself but not .xz: compare with the plain text
        packed = tmp_path / f"a.svm.{compression}"
        _write(packed, source.read_bytes(), compression)
        source = packed
        reference = packed if compression != "xz" else reference
    dataset = ingest_svmlight(source, tmp_path / "out", chunk_bytes=2048, range_bytes=5000)
    _assert_same_as_sklearn(dataset, [reference])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tricky_numbers_exact(tmp_path, rng, dtype):
    lines = []
    for row in range(40):
        # the largest double overflows float32 (a separate bad-input case)
        usable = [v for v in TRICKY_VALUES if dtype == np.float64 or "e308" not in v]
        picks = rng.choice(len(usable), size=5, replace=False)
        columns = np.sort(rng.choice(30, size=5, replace=False)) + 1
        feats = " ".join(f"{c}:{usable[p]}" for c, p in zip(columns, picks, strict=True))
        label = TRICKY_VALUES[row % len(TRICKY_VALUES)]
        lines.append(f"{label} {feats}")
    source = _write(tmp_path / "t.svm", ("\n".join(lines)).encode())
    dataset = ingest_svmlight(source, tmp_path / "out", dtype=dtype, task="regression")
    _assert_same_as_sklearn(dataset, [source], dtype=dtype)


@pytest.mark.parametrize("zero_based", [True, False])
def test_explicit_index_base(tmp_path, rng, zero_based):
    source = _sklearn_file(tmp_path, "a.svm", rng, zero_based=False)
    dataset = ingest_svmlight(source, tmp_path / "out", zero_based=zero_based)
    _assert_same_as_sklearn(dataset, [source], zero_based=zero_based)


def test_many_files_and_byte_ranges(tmp_path, rng):
    # one-based files of different compressions, one of them split into many byte ranges
    sources, references = [], []
    for k, compression in enumerate([None, "gz", None, "xz"]):
        path = _sklearn_file(tmp_path, f"p{k}.svm", rng, zero_based=False, n_rows=150 + 37 * k)
        references.append(path)
        if compression:
            packed = tmp_path / f"p{k}.svm.{compression}"
            _write(packed, path.read_bytes(), compression)
            path = packed
        sources.append(path)
    dataset = ingest_svmlight(sources, tmp_path / "out", chunk_bytes=1000, range_bytes=1500)
    _assert_same_as_sklearn(dataset, references)
    assert dataset.task == "binary"


def test_every_range_size_gives_the_same_rows(tmp_path, rng):
    # lines owned by exactly one range whatever the cut points (ranges of 1 byte included)
    source = _sklearn_file(tmp_path, "a.svm", rng, zero_based=False, n_rows=6, comment=False)
    for range_bytes in (1, 17, 100, 10**6):
        out = tmp_path / f"out{range_bytes}"
        dataset = ingest_svmlight(source, out, chunk_bytes=50, range_bytes=range_bytes)
        _assert_same_as_sklearn(dataset, [source])


def test_no_trailing_newline_and_crlf(tmp_path):
    source = _write(tmp_path / "a.svm", b"1 1:0.5 3:2\r\n-1 2:1.25\r\n1 4:3")
    dataset = ingest_svmlight(source, tmp_path / "out")
    _assert_same_as_sklearn(dataset, [source])


def test_binary_autodetect_and_override(tmp_path):
    text = b"1 1:1 4:1\n-1 2:1\n1 3:1 5:1\n"
    source = _write(tmp_path / "b.svm", text)
    dataset = ingest_svmlight(source, tmp_path / "auto")
    assert dataset.binary
    _assert_same_as_sklearn(dataset, [source])
    stored = ingest_svmlight(source, tmp_path / "values", binary=False)
    assert not stored.binary
    _assert_same_as_sklearn(stored, [source])


def test_qid_ignored_when_asked(tmp_path):
    source = _write(tmp_path / "q.svm", b"1 qid:3 1:0.5 2:1\n-1 qid:3 2:2\n")
    dataset = ingest_svmlight(source, tmp_path / "out", qid="ignore")
    _assert_same_as_sklearn(dataset, [source])


def test_regression_task_and_n_features(tmp_path):
    source = _write(tmp_path / "r.svm", b"0.5 1:1\n2.25 3:2\n-7 2:1\n")
    dataset = ingest_svmlight(source, tmp_path / "out", n_features=10)
    assert dataset.task == "regression"
    assert dataset.shape == (3, 10)
    with pytest.raises(ValueError, match="n_features=2"):
        ingest_svmlight(source, tmp_path / "small", n_features=2)


def test_fast_writer_round_trip(tmp_path, rng):
    X = _random_csr(rng, 500, 80, 0.1)
    X.data = np.round(X.data, 4)
    y = rng.choice([-1.0, 1.0], 500)
    path = tmp_path / "fast.svm"
    dump_svmlight(X, y, path, decimals=6, chunk_rows=77)
    dataset = ingest_svmlight(path, tmp_path / "out", n_features=80, zero_based=False)
    got, labels = dataset.read_rows(0, 500)
    np.testing.assert_allclose(got.toarray(), X.toarray(), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(labels, y)
    _assert_same_as_sklearn(dataset, [path], zero_based=False, n_features=80)


@pytest.mark.cluster
def test_equals_sklearn_on_local_cluster(tmp_path, rng, local_cluster):
    sources = [
        _sklearn_file(tmp_path, f"c{k}.svm", rng, zero_based=True, n_rows=200) for k in range(2)
    ]
    dataset = ingest_svmlight(
        sources, tmp_path / "out", chunk_bytes=3000, range_bytes=4000, client=local_cluster
    )
    _assert_same_as_sklearn(dataset, sources)


# --------------------------------------------------------------------------------------------
# bad input: the error names file and line, nothing is left at the destination

BAD_INPUTS = [
    # (content, 1-based line of the error, words expected in the message, options)
    (b"1 1:0.5\n1 a:1\n", 2, "unparsable token", {}),
    (b"1 1:0.5\n-1 7\n", 2, "unparsable token", {}),
    (b"1 1:0.5\n1 2:abc\n", 2, "non-numeric feature value", {}),
    (b"1 1:0.5\n1 2:1:3\n", 2, "non-numeric feature value", {}),
    (b"1 1:0.5\n1 0:1\n", 2, "invalid feature index", {"zero_based": False}),
    (b"1 1:0.5\n1 -3:1\n", 2, "invalid feature index", {}),
    (b"1 1:0.5\n\n1 5:1 3:1\n", 3, "not sorted and unique", {}),
    (b"1 1:0.5\n1 2:1 2:1\n", 2, "not sorted and unique", {}),
    (b"1 1:0.5\n1 2:nan\n", 2, "NaN or infinite feature value", {}),
    (b"1 1:0.5\n1 2:-inf\n", 2, "NaN or infinite feature value", {}),
    (b"1 1:0.5\n1 2:1e999\n", 2, "NaN or infinite feature value", {}),
    (b"1 1:0.5\nnan 2:1\n", 2, "NaN or infinite label", {}),
    (b"1 1:0.5\n# c\n1:2 3:4\n", 3, "missing label", {}),
    (b"1 1:0.5\nyes 3:4\n", 2, "non-numeric label", {}),
    (b"1 1:0.5\n1,2 3:4\n", 2, "multilabel", {}),
    (b"1 qid:1 1:0.5\n", 1, "qid", {}),
    (b"1 1:0.5\n1 4294967296:1\n", 2, "int32", {}),
    (b"1 1:0.5\n1 2:1e300\n", 2, "overflows float32", {"dtype": np.float32}),
    (b"1 1:0.5\n2 3:4\n", 2, "does not fit task='binary'", {"task": "binary"}),
    (b"1 1:1\n-1 3:2.5\n", 2, "binary=True", {"binary": True}),
]


def _leftovers(dest):
    return [p for p in glob.glob(f"{dest}*")]


@pytest.mark.parametrize("content,line,words,options", BAD_INPUTS)
def test_bad_input_names_file_and_line(tmp_path, content, line, words, options):
    source = _write(tmp_path / "bad.svm", content)
    dest = tmp_path / "out"
    with pytest.raises(SvmlightFormatError) as info:
        ingest_svmlight(source, dest, **options)
    message = str(info.value)
    assert f"{source}:{line}:" in message
    assert words in message
    assert _leftovers(dest) == []


@pytest.mark.parametrize("content", [b"", b"# only a comment\n\n   \n"])
def test_empty_file(tmp_path, content):
    source = _write(tmp_path / "empty.svm", content)
    dest = tmp_path / "out"
    with pytest.raises(SvmlightFormatError, match=r"empty\.svm: empty file"):
        ingest_svmlight(source, dest)
    assert _leftovers(dest) == []


def test_error_line_counts_across_ranges_and_files(tmp_path, rng):
    good = _sklearn_file(tmp_path, "good.svm", rng, zero_based=False, n_rows=120, comment=False)
    lines = good.read_bytes().split(b"\n")
    lines[97] = b"1 3:oops"
    bad = _write(tmp_path / "bad.svm.gz", b"\n".join(lines), "gz")
    plain_bad = _write(tmp_path / "bad.svm", b"\n".join(lines))
    dest = tmp_path / "out"
    for sources in ([good, bad], [plain_bad]):
        with pytest.raises(SvmlightFormatError) as info:
            ingest_svmlight(sources, dest, chunk_bytes=700, range_bytes=900)
        assert f"{sources[-1]}:98:" in str(info.value)
        assert _leftovers(dest) == []


def test_existing_destination_needs_overwrite(tmp_path):
    source = _write(tmp_path / "a.svm", b"1 1:0.5\n-1 2:1\n")
    dest = tmp_path / "out"
    ingest_svmlight(source, dest)
    other = _write(tmp_path / "b.svm", b"1 1:2\n")
    with pytest.raises(FileExistsError, match="--overwrite"):
        ingest_svmlight(other, dest)
    assert open_dataset(dest).n_samples == 2
    assert ingest_svmlight(other, dest, overwrite=True).n_samples == 1


def test_cli_ingest_and_bad_input(tmp_path, capsys):
    source = _write(tmp_path / "a.svm", b"1 1:0.5 2:1\n-1 2:1\n")
    dest = tmp_path / "out"
    assert cli_main(["ingest", str(source), str(dest), "--dtype", "float32"]) == 0
    assert open_dataset(dest).shape == (2, 2)
    capsys.readouterr()
    assert cli_main(["ingest", str(source), str(dest)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    bad = _write(tmp_path / "bad.svm", b"1 1:0.5\n1 2:x\n")
    result = subprocess.run(
        [sys.executable, "-m", "daskpd.cli", "ingest", bad, str(tmp_path / "bad_out")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert f"{bad}:2:" in result.stderr
    assert _leftovers(tmp_path / "bad_out") == []


@pytest.mark.parametrize(
    "zero_based_file,options,zero_based",
    [(False, [], "auto"), (True, [], "auto"), (False, ["--zero-based", "yes"], True),
     (False, ["--zero-based", "no", "--dtype", "float32"], False)],
)  # fmt: skip
def test_cli_ingest_equals_sklearn(tmp_path, rng, capsys, zero_based_file, options, zero_based):
    # ``daskpd ingest`` itself (not only the Python function), over a plain and a gzip file
    plain = _sklearn_file(tmp_path, "a.svm", rng, zero_based=zero_based_file)
    second = _sklearn_file(tmp_path, "b.svm", rng, zero_based=zero_based_file, n_rows=170)
    packed = _write(tmp_path / "b.svm.gz", second.read_bytes(), "gz")
    dest = tmp_path / "out"
    argv = ["ingest", str(plain), packed, str(dest), "--chunk-bytes", "2048", "--range-bytes",
            "5000", *options]  # fmt: skip
    assert cli_main(argv) == 0, capsys.readouterr().err
    dtype = np.float32 if "float32" in options else np.float64
    _assert_same_as_sklearn(open_dataset(dest), [plain, packed], dtype=dtype, zero_based=zero_based)


# --------------------------------------------------------------------------------------------
# bounded memory

_MEMORY_SCRIPT = r"""
import json, os, resource, sys
import dask
import numpy as np
from daskpd.io.svmlight import ingest_svmlight

source, small, dest, warm = sys.argv[1:5]
# warm up: numba kernels loaded, zarr and the writer imported, before measuring
ingest_svmlight(small, warm)

def rss():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False

def peak():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

before = rss()
exact = reset_peak()
with dask.config.set(scheduler="sync"):
    dataset = ingest_svmlight(
        source, dest, chunk_bytes=2**18, range_bytes=4 * 2**20,
        writer_options={"block_nnz": 2**16, "chunk_bytes": 2**18},
    )
print(json.dumps({"before": before, "peak": peak(), "exact": exact,
                  "n_samples": dataset.n_samples, "nnz": dataset.nnz}))
"""


MEMORY_CAP = 16 * 2**20  # bytes of peak RSS growth allowed to an ingesting process


@pytest.fixture(scope="module")
def big_svmlight(tmp_path_factory):
    """A one-based svmlight file (~55 MiB) several times larger than :data:`MEMORY_CAP`."""
    rng = np.random.default_rng(2024)
    n_rows, per_row = 150_000, 25
    indptr = np.arange(n_rows + 1, dtype=np.int64) * per_row
    indices = np.sort(rng.integers(0, 4_000, size=(n_rows, per_row)), axis=1).ravel()
    indices = indices + np.tile(np.arange(per_row) * 4_000, n_rows)  # unique within rows
    X = sp.csr_matrix((rng.standard_normal(len(indices)), indices, indptr))
    y = rng.choice([-1.0, 1.0], n_rows)
    source = tmp_path_factory.mktemp("big") / "big.svm"
    dump_svmlight(X, y, source, decimals=6)
    assert os.path.getsize(source) > 3 * MEMORY_CAP
    return source, n_rows, X.nnz


def test_ingestion_memory_is_bounded(tmp_path, big_svmlight):
    """A file several times larger than the cap ingests with peak RSS growth under the cap."""
    import json

    source, n_rows, nnz = big_svmlight
    size = os.path.getsize(source)
    small = _write(tmp_path / "small.svm", b"1 1:0.5\n-1 2:1\n")
    result = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(source), small, str(tmp_path / "out"),
         str(tmp_path / "warm")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["n_samples"] == n_rows and report["nnz"] == nnz
    growth = report["peak"] - report["before"]
    print(f"peak RSS growth {growth / 2**20:.1f} MiB, file {size / 2**20:.0f} MiB")
    assert growth < MEMORY_CAP, (
        f"peak RSS grew by {growth / 2**20:.1f} MiB for a {size / 2**20:.0f} MiB file"
    )


def _reset_peak_rss():
    """Reset this process's peak RSS (VmHWM) to its current RSS; return the current RSS."""
    from daskpd._cluster import reset_peak_rss

    assert reset_peak_rss(), "this kernel does not reset VmHWM"
    return _status_bytes("VmRSS:")


def _status_bytes(field):
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _peak_rss():
    return _status_bytes("VmHWM:")


def _warm_up_worker(small, dest):
    # numba kernels loaded, zarr and the writer imported, zarr's IO thread started
    import dask

    with dask.config.set(scheduler="sync"):
        ingest_svmlight(small, f"{dest}-{os.getpid()}")
    return os.getpid()


def _cap_worker_memory(dask_worker, cap):
    """Run on a nanny: terminate its worker when its RSS grows more than ``cap`` from now."""
    import psutil

    manager = dask_worker.memory_manager
    rss = psutil.Process(dask_worker.process.process.pid).memory_info().rss
    manager.memory_limit = int((rss + cap) / manager.memory_terminate_fraction)
    return manager.memory_limit


@pytest.mark.cluster
@pytest.mark.long  # a fresh capped LocalCluster: CI's second call (-m long)
def test_ingestion_memory_is_bounded_on_capped_workers(tmp_path, big_svmlight):
    """Ingestion on a 2-worker LocalCluster whose nannies kill a worker growing more than the
    cap: no worker is killed, each worker's peak RSS growth stays under the cap, and the client
    (which only gathers small task descriptions) stays under it too."""
    import dask
    from distributed import Client, LocalCluster

    source, n_rows, nnz = big_svmlight
    small = _write(tmp_path / "small.svm", b"1 1:0.5\n-1 2:1\n")
    # Only the nanny's terminate threshold applies: no pausing or spilling at fractions of a
    # limit that is set relative to the warmed-up RSS.
    config = {"distributed.worker.memory." + key: False for key in ("target", "spill", "pause")}
    with dask.config.set(config):
        cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, memory_limit="4GiB",
            dashboard_address="127.0.0.1:0",
        )  # fmt: skip
    with cluster, Client(cluster, set_as_default=False) as client:
        pids = client.run(_warm_up_worker, small, str(tmp_path / "warm"))
        limits = client.run(_cap_worker_memory, cap=MEMORY_CAP, nanny=True)
        assert len(pids) == len(limits) == 2
        before = client.run(_reset_peak_rss)
        client_before = _reset_peak_rss()
        dataset = ingest_svmlight(
            source, tmp_path / "out", chunk_bytes=2**18, range_bytes=4 * 2**20, client=client,
            writer_options={"block_nnz": 2**16, "chunk_bytes": 2**18},
        )  # fmt: skip
        client_growth = _peak_rss() - client_before
        peaks = client.run(_peak_rss)
        assert client.run(os.getpid) == pids, "a worker was killed (memory cap exceeded?)"
    assert dataset.n_samples == n_rows and dataset.nnz == nnz
    growth = {address: peaks[address] - before[address] for address in pids}
    print({a: f"{g / 2**20:.1f} MiB" for a, g in growth.items()},
          f"client {client_growth / 2**20:.1f} MiB")  # fmt: skip
    for address, grown in growth.items():
        assert grown < MEMORY_CAP, f"worker {address} grew by {grown / 2**20:.1f} MiB"
    assert client_growth < MEMORY_CAP, f"client grew by {client_growth / 2**20:.1f} MiB"


@pytest.mark.long  # a killed ingestion process: CI's second call (-m long)
@pytest.mark.parametrize("stage", ["parse", "write"])
def test_killed_ingestion_leaves_no_dataset(tmp_path, big_svmlight, stage):
    """``daskpd ingest`` killed (SIGKILL) while parsing or while writing the dataset leaves
    nothing at the destination; the debris does not block the next ingestion."""
    source = big_svmlight[0]
    dest = tmp_path / "out"
    command = [sys.executable, "-m", "daskpd.cli", "ingest", str(source), str(dest),
               "--chunk-bytes", str(2**18), "--range-bytes", str(2**21)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def started():
        if stage == "write":  # the writer's temporary dataset exists: a partial dataset
            return bool(glob.glob(f"{dest}.tmp-*"))
        parts = glob.glob(f"{dest}.parts-*/*")  # some byte ranges parsed, none written
        return bool(parts) and not glob.glob(f"{dest}.tmp-*")

    try:
        deadline = time.monotonic() + 300
        while not started():
            if process.poll() is not None:
                pytest.fail(f"ingestion ended first: {process.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"ingestion did not reach the {stage} stage in 5 minutes")
            time.sleep(0.01)
        if stage == "write":
            time.sleep(0.3)  # let it write some chunks
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    assert not dest.exists()
    with pytest.raises(FileNotFoundError):
        open_dataset(dest)
    debris = [os.path.basename(p) for p in _leftovers(dest)]
    assert debris and all(name.startswith(("out.tmp-", "out.parts-")) for name in debris), debris
    small = _write(tmp_path / "small.svm", b"1 1:0.5\n-1 2:1\n")
    assert ingest_svmlight(small, dest).shape == (2, 2)


def test_random_number_formats_parse_like_python_float(tmp_path, rng):
    # magnitudes from subnormal to huge, in the formats people and libraries write
    values = rng.standard_normal(3000) * 10.0 ** rng.integers(-320, 300, 3000)
    formats = ["%r", "%.17g", "%.16g", "%.6e", "%.3f", "%.20f", "%g", "%.1E"]
    tokens = [formats[i % len(formats)] % float(v) for i, v in enumerate(values)]
    lines = [
        f"{tokens[i]} " + " ".join(f"{j + 1}:{tokens[i + j]}" for j in range(6))
        for i in range(0, len(tokens) - 6, 6)
    ]
    source = _write(tmp_path / "n.svm", "\n".join(lines).encode())
    dataset = ingest_svmlight(source, tmp_path / "out", task="regression", chunk_bytes=4096)
    X, y = dataset.read_rows(0, dataset.n_samples)
    expected = np.array([[float(t.split(":")[1]) for t in line.split()[1:]] for line in lines])
    np.testing.assert_array_equal(X.toarray(), expected)
    np.testing.assert_array_equal(y, [float(line.split()[0]) for line in lines])
