"""The solvers' declared capabilities are true, the README's table is theirs, and the plan is
the one setup path of solve(), the estimators and the ``daskpd`` command.

Truth both ways: every declared loss, regularizer, kind of row weights and kind of data runs
an epoch (real solvers on real data, in-process), and every built-in one that is not declared
is refused before any Dask work with a ValueError naming the parameter.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from daskpd.cli import main
from daskpd.data import MemoryDataset, as_dataset, partition_dataset, write_dataset
from daskpd.estimators import SaddlePointEstimator
from daskpd.regularizers import (
    Box,
    GroupLasso,
    L1Ball,
    L1Inf,
    L2Ball,
    TraceNorm,
    get_regularizer,
)
from daskpd.solvers import get_solver, solve
from daskpd.solvers.driver import Plan, make_plan, run_plan
from daskpd.solvers.driver.auto import auto_solver
from daskpd.solvers.driver.capabilities import (
    BUILTIN_LOSSES,
    BUILTIN_REGULARIZERS,
    Capabilities,
    markdown_table,
)

README = Path(__file__).resolve().parents[2] / "README.md"
N_SAMPLES, N_FEATURES = 40, 6
# Options a solver needs for some declared pairs (its notes say so): SPDC and DSPDC take a
# non-smooth loss or a regularizer that is not strongly convex through the perturbation delta.
ENABLING_OPTIONS = {"spdc": {"delta": 1e-2}, "dspdc": {"delta": 1e-2}}


def _regularizer(name):
    groups = [0, 0, 1, 1, 2, 2]
    made = {
        "l1_ball": lambda: L1Ball(1.0),
        "l2_ball": lambda: L2Ball(1.0),
        "box": lambda: Box(-1.0, 1.0),
        "group_lasso": lambda: GroupLasso(groups),
        "l1inf": lambda: L1Inf(groups),
        "trace_norm": lambda: TraceNorm((2, 3)),
    }
    return made[name]() if name in made else get_regularizer(name)


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_SAMPLES, N_FEATURES))
    y = np.where(
        X @ rng.standard_normal(N_FEATURES) + 0.3 * rng.standard_normal(N_SAMPLES) > 0, 1.0, -1.0
    )
    return X, y


def _data(layout="csr", sample_weight=None):
    X, y = _arrays()
    return as_dataset(
        sp.csr_matrix(X) if layout == "csr" else X, y, sample_weight=sample_weight, layout=layout
    )


def _declared(builtin_solvers):
    return [(name, get_solver(name).capabilities) for name in builtin_solvers]


def _one_epoch(name, data, loss, regularizer, **extra):
    """One epoch of the solver, in-process; the result's solver and a finite model."""
    options = {**ENABLING_OPTIONS.get(name, {}), **extra.pop("options", {})}
    result = solve(
        data, loss, regularizer, 1e-2, name, max_epochs=1, tol=0.0, client=False,
        random_state=0, **extra, **options,
    )  # fmt: skip
    assert result.solver == name
    assert np.all(np.isfinite(result.w))
    return result


def _first(order, values):
    return next(name for name in order if name in values)


# --------------------------------------------------------------------------------------------
# declarations


def test_every_builtin_solver_declares_capabilities(builtin_solvers):
    assert set(builtin_solvers) == {
        "batch",
        "cocoa",
        "dso",
        "dual_newton",
        "dspdc",
        "gsfw",
        "pdprox",
        "spdc",
        "tron",
    }
    for name, capabilities in _declared(builtin_solvers):
        assert isinstance(capabilities, Capabilities), name
        assert capabilities.losses and capabilities.regularizers, name
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_solver("dso").capabilities.warm_start = False
    with pytest.raises(ValueError, match="unknown entries"):
        Capabilities(losses={"hinge", "sinusoid"}, regularizers={"l2"})


def test_readme_table_is_the_declarations(builtin_solvers):
    """The README's solver table is generated from the declarations; regenerate it with
    ``python -c "from tests.solvers.test_capabilities import print_table; print_table()"``."""
    text = README.read_text()
    match = re.search(r"<!-- solver table: start -->\n(.*?)<!-- solver table: end -->", text, re.S)
    assert match, "README.md has no generated solver table"
    assert match.group(1) == markdown_table(_declared(builtin_solvers))


def print_table():
    from daskpd.solvers import available_solvers

    print(markdown_table([(name, get_solver(name).capabilities) for name in available_solvers()]))


# --------------------------------------------------------------------------------------------
# declared means it runs; undeclared means a clear refusal before any Dask work


@pytest.mark.parametrize("name", ["batch", "cocoa", "dso", "dspdc", "gsfw", "pdprox", "spdc"])
def test_declared_losses_and_regularizers_run(name):
    capabilities = get_solver(name).capabilities
    data = _data()
    regularizer = _first(BUILTIN_REGULARIZERS, capabilities.regularizers)
    for loss in capabilities.losses:
        _one_epoch(name, data, loss, _regularizer(regularizer))
    loss = _first(BUILTIN_LOSSES, capabilities.losses)
    for regularizer in capabilities.regularizers:
        _one_epoch(name, data, loss, _regularizer(regularizer))


@pytest.mark.parametrize("name", ["batch", "cocoa", "dso", "dspdc", "gsfw", "pdprox", "spdc"])
def test_every_declared_pair_passes_the_solvers_own_check(name):
    """The whole loss x regularizer grid against the solver's own check (no Dask work)."""
    from daskpd.problem import Problem
    from daskpd.solvers import make_options

    method = get_solver(name)
    options = make_options(method, ENABLING_OPTIONS.get(name, {}))
    data = _data()
    for loss in method.capabilities.losses:
        for regularizer in method.capabilities.regularizers:
            method.check(Problem(loss, _regularizer(regularizer), 1e-2), data, options)


@pytest.mark.parametrize("name", ["batch", "cocoa", "dso", "dspdc", "gsfw", "pdprox", "spdc"])
def test_undeclared_losses_and_regularizers_are_refused_by_name(name, counting_scheduler):
    capabilities = get_solver(name).capabilities
    data = _data()
    regularizer = _first(BUILTIN_REGULARIZERS, capabilities.regularizers)
    loss = _first(BUILTIN_LOSSES, capabilities.losses)
    for other in sorted(set(BUILTIN_LOSSES) - capabilities.losses):
        with pytest.raises(ValueError, match=f"solver '{name}' .*loss='{other}'"):
            make_plan(data, other, _regularizer(regularizer), 1e-2, name)
    for other in sorted(set(BUILTIN_REGULARIZERS) - capabilities.regularizers):
        with pytest.raises(ValueError, match=f"solver '{name}' .*regularizer='{other}'"):
            make_plan(data, loss, _regularizer(other), 1e-2, name)
    assert counting_scheduler.calls == 0


@pytest.mark.parametrize("name", ["batch", "cocoa", "dso", "dspdc", "gsfw", "pdprox", "spdc"])
def test_row_weights_run_where_declared_and_are_refused_elsewhere(name):
    capabilities = get_solver(name).capabilities
    loss = _first(["logistic", "hinge", "squared"], capabilities.losses)
    regularizer = _regularizer(_first(BUILTIN_REGULARIZERS, capabilities.regularizers))
    weights = np.linspace(0.5, 2.0, N_SAMPLES)
    weighted = _data(sample_weight=weights)
    class_weight = {-1: 1.0, 1: 3.0}
    if capabilities.sample_weight:
        _one_epoch(name, weighted, loss, regularizer)
    else:
        with pytest.raises(ValueError, match=f"solver '{name}' does not support sample weights"):
            make_plan(weighted, loss, regularizer, 1e-2, name)
    if capabilities.class_weight:
        _one_epoch(name, _data(), loss, regularizer, class_weight=class_weight)
    else:
        with pytest.raises(ValueError, match=f"solver '{name}' does not support class_weight"):
            make_plan(_data(), loss, regularizer, 1e-2, name, class_weight=class_weight)


@pytest.mark.parametrize("name", ["batch", "cocoa", "dso", "dspdc", "gsfw", "pdprox", "spdc"])
def test_kinds_of_data_run_where_declared_and_are_refused_elsewhere(name, tmp_path):
    capabilities = get_solver(name).capabilities
    loss = _first(["logistic", "hinge", "squared"], capabilities.losses)
    regularizer = _regularizer(_first(BUILTIN_REGULARIZERS, capabilities.regularizers))
    for layout in ("csr", "dense"):
        if layout in capabilities.layouts:
            _one_epoch(name, _data(layout), loss, regularizer)
        else:
            with pytest.raises(ValueError, match=f"solver '{name}' needs .*layout='{layout}'"):
                make_plan(_data(layout), loss, regularizer, 1e-2, name)
    assert capabilities.storage == {"memory", "disk"}
    X, y = _arrays()
    on_disk = write_dataset(sp.csr_matrix(X), y, tmp_path / "data.zarr", rows_per_block=16)
    if name == "dso":
        # its notes: on-disk data needs the tiled layout of its grid
        on_disk = partition_dataset(on_disk.path, 1)
    assert getattr(on_disk, "path", None) is not None
    _one_epoch(name, on_disk, loss, regularizer)


def test_warm_start_capability_is_checked(builtin_solvers):
    for name, capabilities in _declared(builtin_solvers):
        assert capabilities.warm_start, name  # every built-in solver starts from a model
    cold = dataclasses.replace(get_solver("batch").capabilities, warm_start=False)
    with pytest.raises(ValueError, match="solver 'batch' does not support warm_start"):
        cold.check("batch", _problem("logistic"), _data(), warm_start=True)
    cold.check("batch", _problem("logistic"), _data(), warm_start=False)


def _problem(loss, regularizer="l2", alpha=1e-2, **kwargs):
    from daskpd.problem import Problem

    return Problem(loss, regularizer, alpha, **kwargs)


def test_auto_picks_a_solver_whose_declarations_cover_the_run():
    """For every built-in loss with the named regularizers, weighted or not: "auto" picks a
    solver that declares the pair (and the weights), or the plan refuses naming what no
    choice covers."""
    for loss in BUILTIN_LOSSES:
        for regularizer in ("l2", "l1", "elasticnet", "zero"):
            for weighted in (False, True):
                problem = _problem(loss, regularizer, 1e-2)
                capabilities = get_solver(
                    auto_solver(problem.loss, problem.regularizer, weighted=weighted)
                ).capabilities
                covered = (
                    loss in capabilities.losses
                    and problem.regularizer.name in capabilities.regularizers
                    and (capabilities.weighted or not weighted)
                )
                if covered:
                    continue
                data = _data(sample_weight=np.ones(N_SAMPLES) if weighted else None)
                with pytest.raises(ValueError, match="loss=|regularizer=|weight"):
                    make_plan(data, loss, regularizer, 1e-2, "auto")


# --------------------------------------------------------------------------------------------
# the plan: one setup path


def test_plan_is_frozen_checked_and_does_no_dask_work(counting_scheduler, tmp_path):
    X, y = _arrays()
    on_disk = write_dataset(sp.csr_matrix(X), y, tmp_path / "data.zarr", rows_per_block=16)
    plan = make_plan(on_disk, "logistic", "l1", 1e-2, "auto", max_epochs=3, eval_every=1)
    assert isinstance(plan, Plan) and plan.solver == "batch"
    assert plan.options == get_solver("batch").Options()
    assert plan.capabilities is get_solver("batch").capabilities
    assert counting_scheduler.calls == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.max_epochs = 5
    result = run_plan(plan, client=False)
    again = solve(on_disk, "logistic", "l1", 1e-2, "auto", max_epochs=3, eval_every=1,
                  client=False)  # fmt: skip
    np.testing.assert_array_equal(result.w, again.w)


def test_auto_resolves_names_and_objects_alike():
    """The plan resolves "auto" on the loss and regularizer objects, so a name and its
    object (or an alias) pick the same solver."""
    data = _data()
    assert make_plan(data, "squared", "ridge", 1e-2).solver == "cocoa"
    assert make_plan(data, "squared", "l2", 1e-2).solver == "cocoa"
    by_name = make_plan(data, "logistic", "elasticnet", 1e-2).solver
    by_object = make_plan(data, "logistic", get_regularizer("elasticnet"), 1e-2).solver
    assert by_name == by_object == "spdc"


def _cli_error(capsys, *argv):
    code = main([str(a) for a in argv])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    return lines[0]


def test_one_alpha_rule_for_solve_the_estimators_and_the_command(tmp_path, capsys):
    X, y = _arrays()
    path = write_dataset(sp.csr_matrix(X), y, tmp_path / "data.zarr", rows_per_block=16).path
    # alpha = 0 is allowed where alpha R does not depend on alpha (here R = 0) ...
    common = dict(max_epochs=2, tol=0.0, eval_every=1, client=False)
    # the seed the estimator draws from random_state=0
    seed = int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))
    solved = solve((sp.csr_matrix(X), y), "logistic", "zero", 0.0, "batch", random_state=seed,
                   **common)  # fmt: skip
    with pytest.warns(ConvergenceWarning):  # two epochs, tol=0
        model = SaddlePointEstimator(
            loss="logistic", regularizer="zero", alpha=0.0, solver="batch", max_iter=2, tol=0.0,
            fit_intercept=False, random_state=0,
        ).fit(X, y)  # fmt: skip
    np.testing.assert_array_equal(model.coef_, solved.w)
    out = tmp_path / "model.zarr"
    assert main([
        "train", str(path), "--solver", "batch", "--loss", "logistic", "--reg", "zero",
        "--alpha", "0", "--epochs", "2", "--tol", "0", "--no-progress", "--in-process",
        "--out", str(out),
    ]) == 0  # fmt: skip
    capsys.readouterr()
    # ... and refused, with the same message, where it does
    with pytest.raises(ValueError) as from_solve:
        solve((X, y), "logistic", "l2", 0.0, "batch", **common)
    message = str(from_solve.value)
    assert message.startswith("alpha must be finite and > 0")
    with pytest.raises(ValueError) as from_estimator:
        SaddlePointEstimator(loss="logistic", alpha=0.0, solver="batch").fit(X, y)
    assert str(from_estimator.value) == message
    line = _cli_error(
        capsys, "train", path, "--solver", "batch", "--loss", "logistic", "--alpha", "0",
        "--in-process",
    )  # fmt: skip
    assert line.endswith(message)


def test_solve_the_estimators_and_the_command_refuse_alike(tmp_path, capsys):
    X, y = _arrays()
    path = write_dataset(sp.csr_matrix(X), y, tmp_path / "data.zarr", rows_per_block=16).path
    with pytest.raises(ValueError) as from_solve:
        solve(MemoryDataset(X, y), "hinge", "l2", 1e-2, "gsfw", client=False)
    message = str(from_solve.value)
    assert message.startswith("solver 'gsfw' needs a smooth loss, got loss='hinge'")
    with pytest.raises(ValueError) as from_estimator:
        SaddlePointEstimator(loss="hinge", solver="gsfw").fit(X, y)
    assert str(from_estimator.value) == message
    line = _cli_error(capsys, "train", path, "--solver", "gsfw", "--loss", "hinge")
    assert line.endswith(message)
    # sample weights: the estimator's are stored in its dataset, the plan refuses them
    with pytest.raises(ValueError, match="solver 'pdprox' does not support sample weights"):
        SaddlePointEstimator(loss="hinge", solver="pdprox").fit(
            X, y, sample_weight=np.full(N_SAMPLES, 2.0)
        )


def test_the_command_lists_the_declarations(builtin_solvers, capsys):
    import json

    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    for name, capabilities in _declared(builtin_solvers):
        row = markdown_table([(name, capabilities)]).splitlines()[2]
        assert row in out.splitlines()
    assert main(["solvers", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    for name, capabilities in _declared(builtin_solvers):
        assert set(listed[name]["losses"]) == capabilities.losses
        assert listed[name]["sample_weight"] is capabilities.sample_weight
