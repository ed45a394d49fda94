"""Every numba kernel lives in daskpd.kernels, uses the project options and compiles once.

"Compiles once": after a workload has run, running it again adds no signature to any
dispatcher (no recompilation from unstable argument types, literal dispatch or kernels
re-created per call). The walk covers every submodule of ``daskpd.kernels``, present and future.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import dask
import numpy as np
import scipy.sparse as sp
from numba.core.caching import NullCache
from numba.core.dispatcher import Dispatcher

import daskpd
import daskpd.kernels
from daskpd.kernels import objective, scalar


def _modules(package):
    """Import and return ``package`` and all its submodules."""
    modules = [package]
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        modules.append(importlib.import_module(info.name))
    return modules


def _dispatchers_in(namespace):
    """Numba dispatchers among the values of ``namespace`` and the attributes of its classes."""
    found = []
    for value in list(vars(namespace).values()):
        if isinstance(value, Dispatcher):
            found.append(value)
        elif inspect.isclass(value):
            found.extend(v for v in vars(value).values() if isinstance(v, Dispatcher))
    return found


def kernel_dispatchers():
    """``{qualified name: dispatcher}`` of every dispatcher defined in daskpd.kernels."""
    found = {}
    for module in _modules(daskpd.kernels):
        for dispatcher in _dispatchers_in(module):
            home = dispatcher.py_func.__module__
            if home == module.__name__:
                found[f"{home}.{dispatcher.py_func.__qualname__}"] = dispatcher
    return found


def signature_counts(dispatchers):
    return {name: len(d.overloads) for name, d in dispatchers.items()}


def test_every_dispatcher_lives_in_daskpd_kernels():
    outside = []
    for module in _modules(daskpd):
        for dispatcher in _dispatchers_in(module):
            home = dispatcher.py_func.__module__
            if not home.startswith("daskpd.kernels."):
                outside.append(f"{home}.{dispatcher.py_func.__qualname__} (in {module.__name__})")
    assert outside == []
    assert len(kernel_dispatchers()) > 10


def test_kernels_use_the_project_options():
    for name, dispatcher in kernel_dispatchers().items():
        assert not isinstance(dispatcher._cache, NullCache), f"{name} is not cached"
        assert dispatcher.targetoptions.get("nogil") is True, f"{name} holds the GIL"
        assert not dispatcher.targetoptions.get("fastmath"), f"{name} uses fastmath"


def _scalar_workload():
    params = np.array([0.5])
    for code in range(scalar.N_LOSSES):
        for y in (-1.0, 1.0):
            scalar.loss_value(code, params, 0.3, y)
            scalar.loss_derivative(code, params, 0.3, y)
            scalar.loss_conjugate(code, params, -0.2 * y, y)
            scalar.loss_prox(code, params, 0.3, 0.7, y)
            scalar.loss_prox_conjugate(code, params, 0.3, 0.7, y)
            scalar.loss_dual_bounds(code, params, y)
    for code in range(scalar.N_REGULARIZERS):
        scalar.reg_value(code, params, 0.3)
        scalar.reg_prox(code, params, 0.3, 0.7)
        scalar.reg_subgradient(code, params, 0.3)
        scalar.reg_conjugate(code, params, 0.3)
    # The Python wrappers reach the array kernels (and through them the scalar helpers).
    from daskpd.losses import Logistic, SmoothHinge
    from daskpd.regularizers import L1, ElasticNet

    y = np.array([1.0, -1.0, 1.0])
    for loss in (Logistic(), SmoothHinge(0.5)):
        loss.value(y, y)
        loss.gradient(y, y)
        loss.conjugate(-0.5 * y, y)
        loss.prox(y, 0.5, y)
        loss.prox_conjugate(y, 0.5, y)
        loss.dual_bounds(y)
    for reg in (L1(), ElasticNet(0.5)):
        reg.value(y)
        reg.prox(y, 0.5)
        reg.subgradient(y)
        reg.conjugate(y)


def _objective_workload():
    from daskpd.dataset import MemoryDataset
    from daskpd.problem import Problem

    rng = np.random.default_rng(0)
    X = sp.random(40, 5, density=0.5, random_state=1, format="csr")
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    binary = X.copy()
    binary.data[:] = 1.0
    problem = Problem("logistic", "l2", 0.1, class_weight={-1: 2.0, 1: 1.0})
    with dask.config.set(scheduler="sync"):
        for matrix in (X, X.astype(np.float32), binary, X.toarray()):
            data = MemoryDataset(matrix, y, rows_per_block=15)
            problem.evaluate(np.ones(5), data)
            problem.evaluate(np.ones(5), data, z=-0.5 * y)


def test_scalar_and_objective_kernels_compile_once():
    dispatchers = {
        name: d
        for name, d in kernel_dispatchers().items()
        if d.py_func.__module__ in (scalar.__name__, objective.__name__)
    }
    _scalar_workload()
    _objective_workload()
    first = signature_counts(dispatchers)
    _scalar_workload()
    _objective_workload()
    assert signature_counts(dispatchers) == first
    # Every entry point was compiled. (Private helpers may show none: when a caller is loaded
    # from numba's on-disk cache, its callees are not compiled again.)
    public = {n: c for n, c in first.items() if not n.rsplit(".", 1)[1].startswith("_")}
    assert all(count >= 1 for count in public.values()), public
    # Scalar ops see one type combination (int code, float64 array, float64 scalars).
    scalar_counts = {n: c for n, c in public.items() if n.startswith(scalar.__name__ + ".")}
    assert set(scalar_counts.values()) == {1}, scalar_counts


# Each solver runs a tiny problem it accepts: the first configuration its check() allows.
SOLVER_CONFIGS = [
    {"loss": "hinge", "regularizer": "l2", "alpha": 0.1},
    {"loss": "smooth_hinge", "regularizer": "l2", "alpha": 0.1},
    {"loss": "logistic", "regularizer": "l2", "alpha": 0.1},
    {"loss": "squared", "regularizer": "l1", "alpha": 0.1},
]


def _solver_workload(tmp_path, tag, solvers):
    # The synchronous scheduler keeps every task in this process, where the dispatchers are
    # inspected, even when a distributed client is active in the test session.
    with dask.config.set(scheduler="sync"):
        return _run_workload(tmp_path, tag, solvers)


def _run_workload(tmp_path, tag, solvers):
    from daskpd.dataset import partition_dataset, write_dataset
    from daskpd.io import ingest_sequences, ingest_svmlight
    from daskpd.regularizers import L1Ball
    from daskpd.solvers import solve

    rng = np.random.default_rng(3)
    X = sp.random(64, 8, density=0.5, random_state=4, format="csr")
    y = np.where(X @ rng.normal(size=8) > 0, 1.0, -1.0)
    dataset = write_dataset(X, y, tmp_path / f"data-{tag}", rows_per_block=16)
    partition_dataset(dataset.path, grid=2)
    # Ingestion kernels: svmlight parsing and weighted-degree features.
    lines = [f"{int(label)} 1:0.5 3:{k % 5 + 1} 7:1" for k, label in enumerate(y)]
    (tmp_path / f"rows-{tag}.svm").write_text("\n".join(lines) + "\n")
    ingest_svmlight(tmp_path / f"rows-{tag}.svm", tmp_path / f"svm-{tag}", client=False)
    windows = ["".join(rng.choice(list("ACGT"), 12)) for _ in range(20)]
    csv = "sequence,label\n" + "".join(f"{w},{1 if k % 2 else -1}\n" for k, w in enumerate(windows))
    (tmp_path / f"windows-{tag}.csv").write_text(csv)
    ingest_sequences(
        tmp_path / f"windows-{tag}.csv", tmp_path / f"wd-{tag}", degree=3, client=False
    )
    configs = [*SOLVER_CONFIGS, {"loss": "logistic", "regularizer": L1Ball(1.0), "alpha": 0.0}]
    ran = []
    for name in solvers:
        for config in configs:
            try:
                # client=False: in this process, where the dispatchers are inspected.
                solve(dataset, solver=name, max_epochs=2, tol=0.0, client=False, **config)
            except ValueError:
                continue
            ran.append(name)
            break
    return ran


def test_all_kernels_compile_once(tmp_path, builtin_solvers):
    dispatchers = kernel_dispatchers()
    ran = _solver_workload(tmp_path, "first", builtin_solvers)
    first = signature_counts(dispatchers)
    assert _solver_workload(tmp_path, "second", builtin_solvers) == ran
    assert ran == builtin_solvers
    assert signature_counts(dispatchers) == first
    # The workloads reach every kernel module, so the comparison above covers each of them.
    modules = {name.rsplit(".", 1)[0] for name in first}
    exercised = {name.rsplit(".", 1)[0] for name, count in first.items() if count > 0}
    assert exercised == modules, sorted(modules - exercised)
