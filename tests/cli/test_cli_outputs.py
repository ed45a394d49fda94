"""An output of a ``daskpd`` command never replaces nor enters one of its inputs, whatever
``--overwrite`` says: one line on stderr naming the parameter and the path, exit code 2,
nothing written."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.cli import main
from daskpd.data import open_dataset, write_dataset


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _snapshot(root):
    """Every path under ``root`` with its size and modification time."""
    found = {}
    for directory, names, files in os.walk(root):
        for name in names + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            found[path] = (info.st_size, info.st_mtime_ns, info.st_ino)
    return found


TRAIN = (
    "--solver",
    "batch",
    "--loss",
    "logistic",
    "--epochs",
    "1",
    "--in-process",
    "--no-progress",
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A dataset, a test set, a model trained on them, an svmlight file, and links to each."""
    tmp_path = tmp_path_factory.mktemp("io")
    X = sp.random(60, 5, density=0.5, format="csr", random_state=0)
    y = np.where(np.random.default_rng(0).random(60) > 0.5, 1.0, -1.0)
    data, test = tmp_path / "d.zarr", tmp_path / "t.zarr"
    write_dataset(X, y, data)
    write_dataset(X, y, test)
    model = tmp_path / "m.zarr"
    assert main([str(a) for a in ("train", data, *TRAIN, "--out", model)]) == 0
    source = tmp_path / "src" / "f.svm"
    source.parent.mkdir()
    source.write_bytes(b"1 1:0.5\n-1 2:1\n")
    links = tmp_path / "links"
    links.mkdir()
    for name, target in [("d", data), ("m", model), ("f", source)]:
        os.symlink(target, links / name)
    os.link(source, links / "f-hard")
    return {"tmp": tmp_path, "data": data, "test": test, "model": model, "source": source,
            "links": links}  # fmt: skip


# (command line, the parameter and path the message names, the input it names)
CASES = [
    (("train", "{data}", *TRAIN, "--out", "{data}", "--overwrite"), "--out '{data}' is", "DATA"),
    (("train", "{data}", *TRAIN, "--out", "{links}/d", "--overwrite"), "--out '{links}/d' is",
     "DATA"),
    (("train", "{data}", *TRAIN, "--out", "{data}/m"), "--out '{data}/m' lies inside", "DATA"),
    (("train", "{links}/d", *TRAIN, "--out", "{data}/sub/m"), "--out '{data}/sub/m' lies inside",
     "DATA"),
    (("train", "{data}", *TRAIN, "--out", "{tmp}", "--overwrite"), "--out '{tmp}' holds", "DATA"),
    (("train", "{data}", *TRAIN, "--test", "{test}", "--out", "{test}", "--overwrite"),
     "--out '{test}' is", "--test"),
    (("train", "{data}", *TRAIN, "--checkpoint-dir", "{data}"), "--checkpoint-dir '{data}' is",
     "DATA"),
    (("train", "{data}", *TRAIN, "--checkpoint-dir", "{data}/ck"),
     "--checkpoint-dir '{data}/ck' lies inside", "DATA"),
    (("predict", "{model}", "{data}", "{data}", "--overwrite"), "OUT '{data}' is", "DATA"),
    (("predict", "{model}", "{data}", "{model}", "--overwrite"), "OUT '{model}' is", "MODEL"),
    (("predict", "{model}", "{data}", "{links}/m", "--overwrite"), "OUT '{links}/m' is", "MODEL"),
    (("predict", "{model}", "{data}", "{data}/s"), "OUT '{data}/s' lies inside", "DATA"),
    (("predict", "{model}", "{data}", "{links}/d/s"), "OUT '{links}/d/s' lies inside", "DATA"),
    (("ingest", "{source}", "{source}", "--overwrite"), "DEST '{source}' is", "SOURCE"),
    (("ingest", "{source}", "{links}/f", "--overwrite"), "DEST '{links}/f' is", "SOURCE"),
    (("ingest", "{source}", "{links}/f-hard", "--overwrite"), "DEST '{links}/f-hard' is",
     "SOURCE"),
    (("ingest", "{links}/f", "{source}", "--overwrite"), "DEST '{source}' is", "SOURCE"),
    (("ingest", "{source}", "{tmp}/src", "--overwrite"), "DEST '{tmp}/src' holds", "SOURCE"),
]  # fmt: skip


@pytest.mark.parametrize("argv,named,input_name", CASES)
def test_an_output_never_replaces_or_enters_an_input(inputs, capsys, argv, named, input_name):
    argv = [part.format(**inputs) for part in argv]
    before = _snapshot(inputs["tmp"])
    code, out, err = _run(capsys, *argv)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert named.format(**inputs) in lines[0] and f"the input {input_name} " in lines[0]
    assert out == ""
    assert _snapshot(inputs["tmp"]) == before  # nothing written, nothing replaced
    assert open_dataset(inputs["data"]).shape == (60, 5)


def test_outputs_beside_the_inputs_are_written(inputs, capsys):
    """The check looks at paths, not at names that merely start alike."""
    data, model = inputs["data"], inputs["model"]
    code, _, err = _run(capsys, "train", data, *TRAIN, "--out", f"{data}-model")
    assert code == 0, err
    code, _, err = _run(capsys, "predict", model, data, f"{data}.scores")
    assert code == 0, err
    code, _, err = _run(capsys, "ingest", inputs["source"], f"{inputs['source']}.zarr")
    assert code == 0, err
    assert open_dataset(f"{inputs['source']}.zarr").shape == (2, 2)
