"""Bad input met by the command line: one line on stderr naming what is wrong, exit code 2.

Each case here printed a traceback, or a wrong or unreadable message, before issue 47: a
truncated compressed input to ``daskpd ingest`` (a traceback ending in ``EOFError``), a
damaged chunk read by a LocalCluster's worker (the worker's "Compute Failed" record before
the one line), a regular file given as a store ("does not exist"), labels printed as
``np.float64(0.0)``. (A solver outside the registry and a model file nested 100,000 deep are
in ``test_model_file_safety.py``; an invalid TLS file in ``test_tls.py``.)
"""

from __future__ import annotations

import bz2
import gzip
import lzma

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from daskpd.cli import main
from daskpd.data import write_dataset


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("one-line")
    X = sp.random(300, 12, density=0.4, random_state=4, format="csr")
    y = np.where(X @ np.random.default_rng(4).standard_normal(12) > 0, 1.0, -1.0)
    write_dataset(X, y, root / "train.zarr", rows_per_block=100)
    write_dataset(X, (y > 0).astype(float), root / "zero-one.zarr", rows_per_block=100)
    dump_svmlight_file(X, y, str(root / "train.svm"))
    text = (root / "train.svm").read_bytes()
    assert len(text) > 4000
    for suffix, compress in (("gz", gzip.compress), ("bz2", bz2.compress), ("xz", lzma.compress)):
        (root / f"cut.svm.{suffix}").write_bytes(compress(text)[:-200])
    damaged = bytearray(gzip.compress(text))
    damaged[len(damaged) // 2 : len(damaged) // 2 + 8] = b"\xff" * 8
    (root / "damaged.svm.gz").write_bytes(bytes(damaged))
    sequences = b"sequence,label\n" + b"".join(b"ACGTACGTAC,1\nTTGCAACGTA,-1\n" for _ in range(400))
    (root / "cut.csv.gz").write_bytes(gzip.compress(sequences)[:-40])
    (root / "regular").write_text("not a store\n")
    return root


def _run(capsys, *argv):
    try:
        code = main([str(arg) for arg in argv])
    except SystemExit as exit_info:
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line(code, err):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    "name, kind",
    [
        ("cut.svm.gz", "gzip"),
        ("cut.svm.bz2", "bz2"),
        ("cut.svm.xz", "xz"),
        ("damaged.svm.gz", "gzip"),
        ("cut.csv.gz", "gzip"),
    ],
)
def test_a_truncated_or_damaged_compressed_input_is_one_line_naming_it(inputs, capsys, name, kind):
    dest = inputs / f"{name}.zarr"
    line = _one_line(*_run(capsys, "ingest", inputs / name, dest)[::2])
    assert line.startswith(f"daskpd ingest: error: {inputs / name}"), line
    assert f"the {kind} data ends early or is damaged" in line
    assert not dest.exists()
