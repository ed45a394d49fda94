"""What a model file can make daskpd do: nothing beyond building the model it describes.

A model file says what the model is (class, hyper-parameters, solver and its options,
coefficients), never where or how to run: a file that names a scheduler, a callback, a
checkpoint directory, a solver that is not registered, or that is malformed in any way (an
unknown tag, a value of the wrong type, nesting 100,000 deep) is refused with one
``ValueError`` naming the file, and the command line prints it on one line with exit code 2.
"""

from __future__ import annotations

import importlib
import json
import sys

import dask
import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from _cli import run_cli

import daskpd
from daskpd.data import write_dataset
from daskpd.estimators import LinearSVC, load_estimator
from daskpd.solvers import get_solver, solve

#: Far deeper than Python's recursion limit (the JSON parser gave a RecursionError).
DEEP = 100_000


@pytest.fixture(autouse=True)
def _in_process():
    """Run in this process even when an earlier test left a distributed client active."""
    with dask.config.set(scheduler="threads"):
        yield


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    rng = np.random.default_rng(5)
    X = sp.random(120, 10, density=0.4, random_state=5, format="csr")
    y = np.where(X @ rng.standard_normal(10) > 0, 1.0, -1.0)
    path = tmp_path_factory.mktemp("safety") / "train.zarr"
    write_dataset(X, y, path, rows_per_block=60)
    return X, y, path


@pytest.fixture(scope="module")
def estimator(problem):
    X, y, _ = problem
    return LinearSVC(alpha=1e-2, max_iter=3, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def result(problem):
    _, _, path = problem
    data = daskpd.open_dataset(path)
    return solve(data, loss="logistic", alpha=1e-2, solver="batch", max_epochs=2, tol=0.0)


def _forge(path, edit):
    """Rewrite the document of the model file at ``path`` with ``edit(parsed) -> parsed``."""
    group = zarr.open_group(path, mode="r+")
    group.attrs["document"] = json.dumps(edit(json.loads(group.attrs["document"])))


def _set(document, place, name, value):
    """Set ``name`` of the tagged dict at ``place`` ("params" or "state") of a document."""
    (section,) = [pair[1] for pair in document["__dict__"] if pair[0] == place]
    pairs = [pair for pair in section["__dict__"] if pair[0] != name]
    section["__dict__"] = [*pairs, [name, value]]
    return document


def _refused(path, match):
    for load in (daskpd.load_model, load_estimator):
        with pytest.raises(ValueError, match=match) as error:
            load(path)
        message = str(error.value)
        assert str(path) in message and "\n" not in message, message


def test_a_saved_estimator_names_no_cluster_callback_or_place(estimator, tmp_path):
    # what a run was given (where it ran, what it called, where it checkpointed) stays out
    model = LinearSVC(**estimator.get_params())
    for key, value in vars(estimator).items():
        setattr(model, key, value)
    model.set_params(
        cluster="tcp://203.0.113.7:8786",
        callback=print,
        solver="batch",
        solver_options={"checkpoint_dir": str(tmp_path / "ck"), "resume": True, "restart": False},
    )
    path = model.save(tmp_path / "model.zarr")
    document = zarr.open_group(path, mode="r").attrs["document"]
    assert "203.0.113.7" not in document and "checkpoint_dir" not in document
    loaded = load_estimator(path)
    assert loaded.cluster is None and loaded.callback is None
    assert loaded.solver_options == {"restart": False}
    np.testing.assert_array_equal(loaded.coef_, estimator.coef_)


@pytest.mark.parametrize(
    "place, name, value, match",
    [
        ("params", "cluster", "tcp://203.0.113.7:8786", r"names cluster='tcp://203\.0\.113\.7"),
        ("params", "cluster", "local", "names cluster='local'"),
        ("params", "callback", "os.system", "names callback='os.system'"),
        (
            "params", "solver_options",
            {"__dict__": [["checkpoint_dir", "/etc"], ["resume", True]]},
            r"solver_options name \['checkpoint_dir', 'resume'\]",
        ),
        ("params", "solver", "os.system", "unknown solver 'os.system'"),
        ("params", "solver", "_registry", "unknown solver '_registry'"),
        ("params", "alpha", "a lot", "parameters do not fit LinearSVC"),
        ("params", "solver_options", [1, 2], "solver_options are not a dict"),
        ("state", "predict_", 1, r"not an estimator's \(\['predict_'\]\)"),
        ("state", "coef_", "0.5", r"fitted attributes \['coef_'\] are not of their types"),
        ("state", "n_iter_", {"__tuple__": [1]}, r"\['n_iter_'\] are not of their types"),
    ],
)  # fmt: skip
def test_a_document_naming_where_or_how_to_run_is_refused(
    estimator, tmp_path, place, name, value, match
):
    path = estimator.save(tmp_path / "model.zarr")
    _forge(path, lambda document: _set(document, place, name, value))
    _refused(path, match)


def test_loading_imports_no_module_a_file_names(estimator, tmp_path, monkeypatch):
    imported = []
    real = importlib.import_module

    def record(name, *args, **kwargs):
        imported.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", record)
    for name in ("os.system", "os", "_registry", "../os", "batch.os", "subprocess"):
        path = estimator.save(tmp_path / f"model-{len(imported)}-{abs(hash(name))}.zarr")
        _forge(path, lambda document, name=name: _set(document, "params", "solver", name))
        _refused(path, "unknown solver")
        with pytest.raises(ValueError, match="unknown solver"):
            get_solver(name)
    solvers = {f"daskpd.solvers.{name}" for name in daskpd.solvers.available_solvers()}
    assert set(imported) <= solvers, imported
    assert "daskpd.solvers.os" not in sys.modules


def test_malformed_documents_are_one_value_error_naming_the_file(result, estimator, tmp_path):
    cases = {
        "nested 100,000 deep": ("[" * DEEP + "]" * DEEP, "nested far deeper"),
        "nested past the codec's limit": ("[" * 500 + "]" * 500, "deeper than 64 levels"),
        "tagged nesting": ('{"__tuple__": [' * 200 + "]}" * 200, "deeper than 64 levels"),
        "unknown tag": ('{"__eval__": "1"}', "unknown tag '__eval__'"),
        "tuple of a number": ('{"__tuple__": 5}', "'__tuple__' body is a int"),
        "dict of a string": ('{"__dict__": "ab"}', "'__dict__' body is a str"),
        "dict of odd pairs": ('{"__dict__": [[1, 2, 3]]}', r"not a \[key, value\] pair"),
        "list as a key": ('{"__dict__": [[[1], 2]]}', "key is a list"),
        "array of a bool": ('{"__array__": true}', "array True, which is not stored"),
        "strings of numbers": ('{"__strings__": [[1], false]}', "holds something else"),
        "generator state": (
            '{"__generator__": {"__dict__": [["bit_generator", "PCG64"], ["state", 3]]}}',
            "not a state of PCG64",
        ),
    }
    for kind, model in (("result", result), ("estimator", estimator)):
        for case, (text, match) in cases.items():
            path = model.save(tmp_path / f"{kind}-{case.replace(' ', '-')}.zarr")
            zarr.open_group(path, mode="r+").attrs["document"] = text
            with pytest.raises(ValueError, match=match) as error:
                daskpd.load_model(path)
            message = str(error.value)
            assert str(path) in message and "\n" not in message, (case, message)
    # a solve result's parts of the wrong type
    for name, value in (("w", "abc"), ("options", [1]), ("history", 5), ("solver", 3)):
        path = result.save(tmp_path / f"result-{name}.zarr")

        def edit(document, name=name, value=value):
            for pair in document["__dict__"]:
                if pair[0] == name:
                    pair[1] = value
            return document

        _forge(path, edit)
        with pytest.raises(ValueError, match="not a solve result's|not names") as error:
            daskpd.load_model(path)
        assert str(path) in str(error.value)


def test_cli_deeply_nested_model_is_one_line_exit_2(result, problem, capsys, tmp_path):
    _, _, data = problem
    path = result.save(tmp_path / "model.zarr")
    zarr.open_group(path, mode="r+").attrs["document"] = "[" * DEEP + "]" * DEEP
    for argv in (("evaluate", path, data), ("predict", path, data, tmp_path / "scores.zarr")):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and out == "", err
        assert len(err.strip().splitlines()) == 1 and str(path) in err, err
        assert "nested far deeper" in err
    assert not (tmp_path / "scores.zarr").exists()


@pytest.mark.parametrize("name", ["os.system", "_registry", "os", "tron.os"])
def test_cli_solver_outside_the_registry_is_one_line_exit_2(problem, capsys, name):
    _, _, data = problem
    code, out, err = run_cli(
        capsys, "train", data, "--solver", name, "--in-process", "--no-progress"
    )
    assert code == 2 and out == "", err
    assert err.strip().splitlines() == [
        f"daskpd train: error: unknown solver {name!r}; valid solvers: "
        + ", ".join(daskpd.solvers.available_solvers())
    ]


def test_a_checkpoint_with_a_pickle_codec_is_refused_before_its_chunks_are_read(tmp_path):
    # a checkpoint directory may come from elsewhere too: its arrays follow a model's rules
    from daskpd.checkpoint import CheckpointStore

    store = CheckpointStore(tmp_path / "ck")
    seed = np.random.SeedSequence(3)
    path = store.save(1, {"w": np.arange(4.0)}, seed=seed, meta={"solver": "batch"})
    metadata_path = path / "state" / "w" / "zarr.json"
    metadata = json.loads(metadata_path.read_text())
    metadata["codecs"] = [{"name": "numcodecs.pickle", "configuration": {"protocol": 0}}]
    metadata_path.write_text(json.dumps(metadata))
    with pytest.raises(ValueError, match=r"array 'w' uses codecs \['numcodecs.pickle'\]") as error:
        store.latest()
    assert str(path) in str(error.value)
    assert store.latest(load_arrays=False).epoch == 1  # listing reads no array
    # nested metadata: refused naming the checkpoint, not a RecursionError
    path = store.save(2, {"w": np.arange(4.0)}, seed=seed, meta={"solver": "batch"})
    zarr.open_group(path, mode="r+").attrs["meta"] = "[" * DEEP + "]" * DEEP
    with pytest.raises(ValueError, match="attributes are unreadable") as error:
        store.latest()
    assert str(path) in str(error.value)
