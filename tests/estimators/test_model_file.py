"""The one model file format (daskpd.model_file): both kinds, its checks, its atomic writes.

Every test writes and reads real zarr files on disk. The refusal tests alter a saved file the
way an attacker or a damaged disk would, and check both the error and, for pickle payloads,
that the payload never ran (it would create a witness file).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from dataclasses import fields
from functools import partial

import dask
import numpy as np
import pytest
import scipy.sparse as sp
import zarr

import daskpd
from daskpd.data import MemoryDataset
from daskpd.data.atomic import atomic_file, atomic_group, write_text_atomic
from daskpd.estimators import LinearSVC, LogisticRegression, Ridge, load_estimator
from daskpd.model_file import (
    FORMAT_VERSION,
    CorruptStoreError,
    read_model_file,
    write_model_file,
)
from daskpd.solvers import SolveResult, solve

#: daskpd.load_model asked for a solve result (as ``daskpd evaluate`` asks)
load_result = partial(daskpd.load_model, kind="solve_result")


@pytest.fixture(autouse=True)
def _in_process():
    """Run in this process even when an earlier test left a distributed client active."""
    with dask.config.set(scheduler="threads"):
        yield


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(3)
    X = sp.random(150, 12, density=0.4, random_state=3, format="csr")
    y = np.where(X @ rng.standard_normal(12) > 0, 1.0, -1.0)
    return X, y


@pytest.fixture(scope="module")
def result(problem):
    X, y = problem
    data = MemoryDataset(X, y, rows_per_block=50)
    return solve(data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=4, tol=0.0)


@pytest.fixture(scope="module")
def estimator(problem):
    X, y = problem
    return LinearSVC(alpha=1e-2, max_iter=4, random_state=np.random.RandomState(2)).fit(X, y)


def _payload(witness):
    """Pickled bytes that create ``witness`` when unpickled."""

    class Payload:
        def __reduce__(self):
            return (open, (str(witness), "w"))

    return pickle.dumps(Payload(), protocol=0)


#: The readers of each kind of model file.
LOADERS = {
    "result": (daskpd.load_model, load_result),
    "estimator": (daskpd.load_model, load_estimator, LinearSVC.load),
}


# --------------------------------------------------------------------------------------------
# round trips


def test_a_solve_result_round_trips(result, tmp_path):
    path = result.save(tmp_path / "model.zarr")
    for loaded in (daskpd.load_model(path), load_result(path)):
        assert isinstance(loaded, SolveResult)
        assert loaded.w.dtype == np.float64 and np.array_equal(loaded.w, result.w)
        assert loaded.history == result.history
        assert loaded.options == result.options
        assert loaded.objective == result.objective
        assert (loaded.n_epochs, loaded.gap, loaded.converged) == (
            result.n_epochs,
            result.gap,
            result.converged,
        )
        assert (loaded.solver, loaded.stop_reason) == (result.solver, result.stop_reason)
        assert loaded.seed_entropy == result.seed_entropy
        assert loaded.timings == {}
    attrs = zarr.open_group(path, mode="r").attrs
    assert (attrs["format"], attrs["format_version"], attrs["kind"]) == (
        "daskpd-model",
        FORMAT_VERSION,
        "solve_result",
    )
    # the arrays are named after their place, so a person can find w in the file
    assert "w" in attrs["arrays"] and (path / "w" / "zarr.json").is_file()


def test_an_estimator_round_trips(problem, estimator, tmp_path):
    X, _ = problem
    path = estimator.save(tmp_path / "model.zarr")
    for loaded in (
        daskpd.load_model(path),
        load_estimator(path),
        LinearSVC.load(path),
        daskpd.LinearSVC.load(path),
    ):
        assert type(loaded) is LinearSVC
        assert loaded.get_params().keys() == estimator.get_params().keys()
        np.testing.assert_array_equal(loaded.coef_, estimator.coef_)
        np.testing.assert_array_equal(loaded.decision_function(X), estimator.decision_function(X))
        assert loaded.history_ == estimator.history_
    assert zarr.open_group(path, mode="r").attrs["kind"] == "estimator"
    assert read_model_file(path).content["estimator"] == "daskpd.estimators.LinearSVC"


def test_arrays_of_every_dtype_and_shape_round_trip(tmp_path):
    content = {
        "empty": np.zeros(0),
        "scalar": np.array(3.5),
        "matrix": np.arange(12, dtype=np.int32).reshape(3, 4),
        "flags": np.array([True, False]),
        "nested": {1: (np.arange(3, dtype=np.uint8), float("nan"))},
    }
    write_model_file(tmp_path / "m.zarr", "solve_result", content)
    read = read_model_file(tmp_path / "m.zarr", kind="solve_result").content
    for name in ("empty", "scalar", "matrix", "flags"):
        assert read[name].dtype == content[name].dtype
        np.testing.assert_array_equal(read[name], content[name])
    assert list(read["nested"]) == [1] and np.isnan(read["nested"][1][1])


# --------------------------------------------------------------------------------------------
# never overwritten unless asked; interrupted writes


def test_an_existing_path_is_not_overwritten_without_overwrite(result, estimator, tmp_path):
    path = tmp_path / "model.zarr"
    estimator.save(path)
    before = sorted(str(p.relative_to(path)) for p in path.rglob("*"))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        result.save(path)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        estimator.save(path)
    with pytest.raises(FileExistsError):
        daskpd.save_model(result, path)
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*")) == before
    assert type(daskpd.load_model(path)) is LinearSVC
    result.save(path, overwrite=True)
    assert isinstance(daskpd.load_model(path), SolveResult)
    estimator.save(path, overwrite=True)
    assert type(daskpd.load_model(path)) is LinearSVC
    # no temporary or set-aside copy is left next to it
    assert os.listdir(tmp_path) == ["model.zarr"]


def test_a_content_the_format_cannot_store_leaves_no_file(tmp_path):
    with pytest.raises(TypeError, match=r"estimator\[.*'callback'\].*function"):
        write_model_file(tmp_path / "m.zarr", "estimator", {"w": np.ones(3), "callback": print})
    assert os.listdir(tmp_path) == []


def test_a_failed_overwrite_keeps_the_old_model(result, tmp_path):
    path = result.save(tmp_path / "model.zarr")
    with pytest.raises(RuntimeError, match="interrupted"):
        with atomic_group(path, overwrite=True) as group:
            group.create_array("w", data=np.zeros(3))
            raise RuntimeError("interrupted")
    assert np.array_equal(daskpd.load_model(path).w, result.w)
    assert os.listdir(tmp_path) == ["model.zarr"]


_KILLED_WRITER = textwrap.dedent(
    """
    import sys, time, numpy as np
    from daskpd.data.atomic import atomic_group
    from daskpd.model_file import write_array
    with atomic_group(sys.argv[1]) as group:
        write_array(group, "w", np.arange(1000.0))
        print("half written", flush=True)
        time.sleep(120)
    """
)


def test_a_killed_writer_leaves_no_file_at_the_destination(result, tmp_path):
    path = tmp_path / "model.zarr"
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline().strip() == "half written"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    assert not path.exists()
    # the temporary name and the lock file its dead writer held (daskpd/_sidefiles.py)
    debris, lock = sorted(os.listdir(tmp_path))
    assert debris.startswith("model.zarr.tmp-") and lock == f"{debris}.lock"
    with pytest.raises(FileNotFoundError, match="no model at"):
        daskpd.load_model(path)
    # the debris does not stand in the way of the next write, which removes it
    result.save(path)
    assert np.array_equal(daskpd.load_model(path).w, result.w)
    assert os.listdir(tmp_path) == ["model.zarr"]


def test_an_interrupted_file_write_keeps_the_old_text(tmp_path):
    path = tmp_path / "results.json"
    write_text_atomic(path, "old")
    with pytest.raises(RuntimeError, match="interrupted"):
        with atomic_file(path) as temporary:
            with open(temporary, "w") as stream:
                stream.write("half")
            raise RuntimeError("interrupted")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["results.json"]
    write_text_atomic(path, "new")
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["results.json"]


# --------------------------------------------------------------------------------------------
# what the reader refuses


def test_a_pickle_payload_is_refused_and_never_runs(result, estimator, tmp_path):
    live = tmp_path / "live"
    # the payload is real: unpickling it creates its witness
    pickle.loads(_payload(live)).close()
    assert live.exists()

    witness = tmp_path / "ran"
    payload = _payload(witness)
    encoded = base64.b64encode(payload).decode("ascii")
    cases = {
        "base64 document": ({"document": encoded}, "document is not JSON"),
        "raw document": ({"document": payload.decode("latin-1")}, "document is not JSON"),
        "tagged document": (
            {"document": json.dumps({"__pickle__": encoded})},
            "unknown tag '__pickle__'",
        ),
        "pickled metadata of old files": (
            {"format": None, "format_version": 1, "meta": encoded},
            "pickled metadata",
        ),
    }
    for kind, model in (("result", result), ("estimator", estimator)):
        for case, (attributes, message) in cases.items():
            path = model.save(tmp_path / f"{kind}-{case.replace(' ', '-')}.zarr")
            group = zarr.open_group(path, mode="r+")
            for key, value in attributes.items():
                if value is None:
                    del group.attrs[key]
                else:
                    group.attrs[key] = value
            for load in LOADERS[kind]:
                with pytest.raises(ValueError, match=message) as error:
                    load(path)
                assert str(path) in str(error.value), (case, load)
    # the group's metadata file itself replaced by the payload
    path = result.save(tmp_path / "replaced.zarr")
    (path / "zarr.json").write_bytes(payload)
    for load in {*LOADERS["result"], *LOADERS["estimator"]}:
        with pytest.raises(ValueError, match="is not a daskpd model"):
            load(path)
    assert not witness.exists()


def test_an_array_with_a_pickle_codec_is_refused_before_its_chunks_are_read(result, tmp_path):
    witness = tmp_path / "ran"
    path = result.save(tmp_path / "model.zarr")
    metadata_path = path / "w" / "zarr.json"
    metadata = json.loads(metadata_path.read_text())
    metadata["codecs"] = [{"name": "numcodecs.pickle", "configuration": {"protocol": 0}}]
    metadata_path.write_text(json.dumps(metadata))
    for chunk in (p for p in (path / "w").rglob("*") if p.is_file() and p != metadata_path):
        chunk.write_bytes(_payload(witness))
    for load in LOADERS["result"]:
        with pytest.raises(ValueError, match=r"array 'w' uses codecs \['numcodecs.pickle'\]"):
            load(path)
    metadata["data_type"] = "object"
    metadata_path.write_text(json.dumps(metadata))
    with pytest.raises(ValueError, match="array 'w' has data type 'object'"):
        daskpd.load_model(path)
    assert not witness.exists()


def _flip_a_byte_in_each_chunk(array_directory):
    chunks = [p for p in array_directory.rglob("*") if p.is_file() and p.name != "zarr.json"]
    assert chunks
    for chunk in chunks:
        raw = bytearray(chunk.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        chunk.write_bytes(bytes(raw))


def test_a_corrupt_array_is_refused(result, estimator, tmp_path):
    path = result.save(tmp_path / "result.zarr")
    _flip_a_byte_in_each_chunk(path / "w")
    for load in (daskpd.load_model, load_result):
        with pytest.raises(CorruptStoreError, match=r"array 'w' (does not match|cannot be read)"):
            load(path)

    path = estimator.save(tmp_path / "estimator.zarr")
    # a stored value changed and re-encoded: only the checksum can tell
    coef = zarr.open_array(path / "state.coef_", mode="r+")
    coef[0] = coef[0] + 1.0
    for load in (daskpd.load_model, load_estimator, LinearSVC.load):
        with pytest.raises(CorruptStoreError, match=r"array 'state.coef_' does not match its"):
            load(path)


def test_missing_and_unlisted_arrays_are_refused(result, tmp_path):
    import shutil

    path = result.save(tmp_path / "model.zarr")
    zarr.open_group(path, mode="r+").create_array("extra", data=np.zeros(2))
    with pytest.raises(CorruptStoreError, match="array 'extra' has no checksum"):
        daskpd.load_model(path)
    shutil.rmtree(path / "extra")
    shutil.rmtree(path / "w")
    with pytest.raises(CorruptStoreError, match="array 'w' is missing"):
        daskpd.load_model(path)


def test_a_file_of_the_wrong_kind_is_refused(result, estimator, tmp_path):
    result_path = result.save(tmp_path / "result.zarr")
    estimator_path = estimator.save(tmp_path / "estimator.zarr")
    for load in (load_estimator, LinearSVC.load, Ridge.load):
        with pytest.raises(
            ValueError,
            match=r"holds a solve result, not a fitted estimator; read it with daskpd.load_model",
        ):
            load(result_path)
    with pytest.raises(ValueError, match="holds a fitted estimator, not a solve result"):
        load_result(estimator_path)
    with pytest.raises(TypeError, match="holds a LinearSVC, not a LogisticRegression"):
        LogisticRegression.load(estimator_path)


def test_unknown_versions_kinds_and_formats_are_refused(result, tmp_path):
    path = result.save(tmp_path / "model.zarr")
    group = zarr.open_group(path, mode="r+")
    group.attrs["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(ValueError, match=f"format_version {FORMAT_VERSION + 1}, newer"):
        daskpd.load_model(path)
    group.attrs.update({"format_version": FORMAT_VERSION, "kind": "os.system"})
    with pytest.raises(ValueError, match="unknown kind of model 'os.system'"):
        daskpd.load_model(path)
    group.attrs.update({"kind": "solve_result", "format_version": True})
    with pytest.raises(ValueError, match="unknown format_version True"):
        daskpd.load_model(path)
    group.attrs.update({"format_version": FORMAT_VERSION, "format": "something-else"})
    with pytest.raises(ValueError, match="is not a daskpd model"):
        daskpd.load_model(path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is not a daskpd model"):
        daskpd.load_model(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no model at"):
        daskpd.load_model(tmp_path / "absent.zarr")


# --------------------------------------------------------------------------------------------
# files of the two formats this one replaced


def _write_version_1_result(result, path):
    """A solve result as daskpd.checkpoint.save_model wrote it before format_version 3."""
    from daskpd.model_file import write_array

    with atomic_group(path) as group:
        checksums = {"w": write_array(group, "w", result.w)}
        options = {
            field.name: list(value) if isinstance(value, tuple) else value
            for field in fields(result.options)
            for value in [getattr(result.options, field.name)]
        }
        group.attrs.update(
            {
                "format": "daskpd-model",
                "format_version": 1,
                "solver": result.solver,
                "options": json.dumps(options),
                "objective": json.dumps(result.objective),
                "history": json.dumps(list(result.history)),
                "n_epochs": result.n_epochs,
                "gap": json.dumps(result.gap),
                "converged": result.converged,
                "stop_reason": result.stop_reason,
                "seed_entropy": str(result.seed_entropy),
                "checksums": checksums,
            }
        )


def _write_version_2_estimator(estimator, path):
    """An estimator as daskpd.estimators wrote it before format_version 3."""
    from daskpd.model_file import _codec, write_array

    params = estimator.get_params(deep=False)
    state = {
        key: value
        for key, value in vars(estimator).items()
        if key.endswith("_") and not key.startswith("_") and key != "coef_"
    }
    state["_fit_intercept_used"] = estimator._fit_intercept_used
    arrays = [estimator.coef_]
    document = {
        "params": _codec.encode(params, arrays, "parameter"),
        "state": _codec.encode(state, arrays, "fitted attribute"),
    }
    with atomic_group(path) as group:
        checksums = {
            f"array-{k}": write_array(group, f"array-{k}", array) for k, array in enumerate(arrays)
        }
        group.attrs.update(
            {
                "format_version": 2,
                "estimator": "daskpd.estimators.LinearSVC",
                "document": json.dumps(document),
                "checksums": checksums,
            }
        )


def test_files_of_the_replaced_formats_are_still_read(problem, result, estimator, tmp_path):
    X, _ = problem
    _write_version_1_result(result, tmp_path / "result.zarr")
    loaded = daskpd.load_model(tmp_path / "result.zarr")
    assert np.array_equal(loaded.w, result.w) and loaded.options == result.options
    assert loaded.history == result.history and loaded.seed_entropy == result.seed_entropy
    assert read_model_file(tmp_path / "result.zarr").format_version == 1

    _write_version_2_estimator(estimator, tmp_path / "estimator.zarr")
    for loaded in (
        daskpd.load_model(tmp_path / "estimator.zarr"),
        load_estimator(tmp_path / "estimator.zarr"),
    ):
        assert type(loaded) is LinearSVC
        np.testing.assert_array_equal(loaded.decision_function(X), estimator.decision_function(X))
    with pytest.raises(ValueError, match="holds a fitted estimator"):
        load_result(tmp_path / "estimator.zarr")


def test_writing_a_model_is_atomic_even_when_the_destination_appears_meanwhile(result, tmp_path):
    """A file created at the destination after the check is not silently replaced."""
    path = tmp_path / "model.zarr"
    with pytest.raises((FileExistsError, OSError)):
        with atomic_group(path) as group:
            group.create_array("w", data=np.zeros(3))
            result.save(path)
    assert isinstance(daskpd.load_model(path), SolveResult)
    assert sorted(os.listdir(tmp_path)) == ["model.zarr"]


def test_a_malformed_document_is_refused_with_the_file_named(estimator, tmp_path):
    path = estimator.save(tmp_path / "model.zarr")
    group = zarr.open_group(path, mode="r+")
    document = group.attrs["document"]
    for forged, message in (
        ('{"__dict__": [[[1], 2]]}', "its document is not one daskpd writes"),
        ('{"__tuple__": 5}', "its document is not one daskpd writes"),
        ("[1, 2]", "its document is not a dict"),
        # a fitted attribute that would replace the object's class
        (document.replace('"n_iter_"', '"__class__"'), "not an estimator's"),
    ):
        group.attrs["document"] = forged
        with pytest.raises(ValueError, match=message) as error:
            daskpd.load_model(path)
        assert str(path) in str(error.value)
