"""Every numba kernel lives in daskpd.kernels, uses the project options and compiles once.

"Compiles once": after a workload has run, running it again adds no signature to any
dispatcher (no recompilation from unstable argument types, literal dispatch or kernels
re-created per call). The walk covers every submodule of ``daskpd.kernels``, present and future,
and every dispatcher in them must have been compiled by the workload: a kernel the workload
never reaches would pass the comparison without saying anything.
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
    scalar.clip(0.3, 0.0, 1.0)
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
    from daskpd.data import MemoryDataset
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
    _scalar_workload()
    _objective_workload()
    with dask.config.set(scheduler="sync"):
        ran = _run_workload(tmp_path, tag, solvers)
        _coverage_workload(tmp_path, tag)
    _direct_workload()
    return ran


def _run_workload(tmp_path, tag, solvers):
    from daskpd.data import partition_dataset, write_dataset
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


def _coverage_workload(tmp_path, tag):
    """Reach, through the public APIs, the kernels the solver runs above leave out.

    svmlight export, FASTA ingestion, generated data, the bias view, DSO's DCD start, SVRG
    snapshots and every visit order, SPDC's warm-started dual, GSFW's dense LMO and its
    baselines, Pdprox's other algorithms and objective, DSPDC on factorized and matrix data.
    """
    from daskpd.data import MemoryDataset
    from daskpd.generators import make_classification
    from daskpd.io import dump_svmlight, ingest_sequences
    from daskpd.losses import Hinge, Logistic
    from daskpd.problem import Problem
    from daskpd.regularizers import L1, GroupLasso, L1Ball, L2Ball
    from daskpd.solvers import Iterate, solve
    from daskpd.solvers.dso import DSOOptions, serial_replay
    from daskpd.solvers.dspdc import solve_factorized, solve_matrix_risk
    from daskpd.solvers.gsfw import frank_wolfe, gsfw_dual_mirror_descent, stochastic_frank_wolfe
    from daskpd.solvers.pdprox import (
        estimate_spectral_norm,
        fobos,
        pdprox,
        pdprox_objective,
        subgradient_descent,
    )

    rng = np.random.default_rng(5)
    X = sp.random(40, 6, density=0.5, random_state=6, format="csr")
    y = np.where(X @ rng.normal(size=6) > 0, 1.0, -1.0)
    dump_svmlight(X, y, tmp_path / f"dump-{tag}.svm")
    fasta = "".join(f">s{k} label={1 if k % 2 else -1}\nACGTAC\nGTACGT\n" for k in range(10))
    (tmp_path / f"windows-{tag}.fa").write_text(fasta)
    ingest_sequences(tmp_path / f"windows-{tag}.fa", tmp_path / f"fa-{tag}", degree=2, client=False)
    make_classification(tmp_path / f"planted-{tag}", 20, 6, density=0.5, client=False)
    data = MemoryDataset(X, y, rows_per_block=16)
    problem = Problem("hinge", "l2", 0.1)
    problem.evaluate(np.ones(7), data.with_bias(1.0))
    # the zero start: plain epochs (a start turns SVRG on)
    serial_replay(problem, data.with_bias(1.0), n_epochs=1, options=DSOOptions(grid=2, init="zero"))
    for order in ("shuffled", "blocked", "rows", "random", "storage"):
        options = DSOOptions(grid=2, visit_order=order, init="dcd", dcd_passes=1, svrg_every=1)
        serial_replay(problem, data, n_epochs=1, options=options)
    # A warm start with a dual point computes u = X^T z / n.
    common = dict(max_epochs=1, tol=0.0, client=False)
    start = Iterate(w=np.zeros(6), z=-0.5 * y)
    solve(data, "smooth_hinge", "l2", 0.1, solver="spdc", warm_start=start, **common)
    # three classes: one-vs-rest CoCoA+ (the multiclass pass)
    classes = MemoryDataset(X, np.arange(40) % 3.0, rows_per_block=16)
    solve(classes, "hinge", "l2", 0.1, solver="cocoa", **common)
    for regularizer in (L1Ball(radius=2.0), L2Ball(radius=2.0)):  # kernel and dense LMO
        solve(data, "logistic", regularizer, 1.0, solver="gsfw", batch_size=2, **common)
    batches = np.array([[0, 1], [2, 3]], dtype=np.int64)
    gsfw_dual_mirror_descent(X, y, Logistic(), 2.0, batches)
    frank_wolfe(X, y, Logistic(), 2.0, max_iterations=2)
    stochastic_frank_wolfe(X, y, Logistic(), 2.0, max_iterations=2)
    dense = X.toarray()
    for algorithm, form in (("dual", None), ("dual-simplified", "double-dual")):
        result = pdprox(dense, y, Hinge(), L1(), 0.01, n_iterations=2, algorithm=algorithm,
                        form=form, rows_per_block=20)  # fmt: skip
    pdprox_objective(dense, y, Hinge(), L1(), 0.01, result.w)
    pdprox(dense, y, Hinge(), L1(), 0.01, n_iterations=2, budget=4.0, rows_per_block=20)
    estimate_spectral_norm(data, n_iterations=2)
    for method in (subgradient_descent, fobos):
        method(dense, y, Hinge(), GroupLasso(groups=[[0, 1, 2], [3, 4, 5]]), 0.01,
               n_iterations=2, step=1.0)  # fmt: skip
    U, V = rng.normal(size=(20, 2)), rng.normal(size=(2, 6))
    solve_factorized(U, V, y[:20], "smooth_hinge", "l2", 0.05, n_coords=3, max_epochs=1, tol=0.0)
    D = rng.normal(size=(10, 2, 2, 2))
    solve_matrix_risk(D, y[:10], "smooth_hinge", 0.05, max_epochs=1, tol=0.0)


def _direct_workload():
    """Call the kernels that no entry point compiles in this process.

    A kernel called only by other kernels is compiled with its caller; when the caller is
    loaded from numba's on-disk cache, the callee is not compiled again and its dispatcher
    shows no signature. Those are called here with the argument types their callers pass
    (float64 / int64 scalars, uint8 text). So is the benchmark baseline ``tile_read_only``
    and the kernels nothing calls yet (``find_*_newline``, ``_is_end``, ``in_domain``,
    ``row_dots``), and DSO's ``unpack_columns``, which runs only when a ``w`` block is made
    plain for another machine or pickled (never on the in-process scheduler).
    """
    from daskpd.kernels import (
        cocoa,
        dataset,
        dso,
        dspdc,
        dual_newton,
        features,
        gsfw,
        parsing,
        pdprox,
        spdc,
        tron,
    )

    p = np.array([0.5])
    indptr = np.array([0, 2, 3], dtype=np.int64)
    indices = np.array([0, 2, 1], dtype=np.int32)
    data = np.array([1.0, 2.0, 3.0])
    w = np.ones(3)
    # parsing: text is uint8
    text = np.frombuffer(b"12.5 nan\n", dtype=np.uint8)
    parsing._is_space(text[4])
    parsing._is_end(text[4])
    parsing._lower(text[5])
    parsing._matches_word(text, 5, 8, parsing._NAN_WORD)
    parsing._parse_number(text, 0, 4, parsing._POW10, parsing._NAN_WORD, parsing._INF_WORD,
                          parsing._INFINITY_WORD)  # fmt: skip
    slow = np.zeros(0, dtype=np.int64)
    parsing._push_slow(slow, slow.copy(), slow.copy(), 0, 0, 4, 1)
    parsing._write_int(np.zeros(20, dtype=np.uint8), 0, np.int64(125))
    parsing.find_first_newline(text, 0)
    parsing.find_last_newline(text)
    parsing._number_error(parsing._NUM_OK, parsing.ERR_NON_NUMERIC_VALUE, parsing.ERR_NAN_INF_VALUE)
    parsing._feature_index(np.frombuffer(b"3:1", dtype=np.uint8), 0, 1, 0, False)
    dataset._column_block(np.array([0, 2, 4], dtype=np.int64), indices[1])
    features.splitmix64(np.uint64(7))
    # scalar ops and their users
    scalar._soft(0.3, 0.1)
    scalar._sign(-0.3)
    scalar._sigmoid(0.3)
    scalar._log1pexp(0.3)
    scalar._xlogx(0.3)
    scalar._solve_sigmoid_equation(1.0, 0.5, 0.2)
    objective._weighted_conjugate(scalar.LOGISTIC, p, -0.2, 1.0, 2.0)
    objective._row_terms(scalar.LOGISTIC, p, 0.3, 1.0, 2.0, w, False, 0)
    dso.conjugate_slope(scalar.LOGISTIC, p, -0.5, 1.0)
    dso.logistic_dual_newton(0.5, 0.3, 1.0, 1.0, 25)
    rows = np.array([0, 0, 1], dtype=np.int32)
    segment_ptr = np.array([0, 2, 3], dtype=np.int64)
    order = np.array([1, 0], dtype=np.int64)
    dso.tile_read_only(rows, indices, data, False, segment_ptr, order, w, np.ones(2))
    dso.visit_span(segment_ptr, order, 0)
    dspdc.psd_projection(np.eye(2))
    # GSFW helpers (logistic dual domain of y = 1: [-1, 0])
    gsfw.row_dot(indptr, indices, data, True, 0, w)
    dataset.add_scaled_row(indptr, indices, data, True, 0, 0.5, np.zeros(3))
    gsfw.row_entry(indptr, indices, data, True, 0, 2)
    gsfw.block_matvec(indptr, indices, data, True, w)
    gsfw.step_sizes(3, 10.0, False, 1.0)
    gsfw.lmo_dense(gsfw.LMO_L1_BALL, np.array([2.0]), w - 2.0, np.zeros(3))
    gsfw.conjugate_derivative(scalar.LOGISTIC, p, -0.5, 1.0, -1.0, 1.0)
    gsfw.mirror_coordinate_step(scalar.LOGISTIC, p, 1.0, -0.5, 0.3, 0.5, -1.0, 0.0)
    # Pdprox row ops
    pdprox._budget_sum(np.array([0.2, 1.5]), 0.1)
    pdprox.loss_value(pdprox.PD_HINGE, p, 0.3, 1.0)
    pdprox.grad_dual(pdprox.PD_HINGE, p, 0.3, 1.0)
    pdprox.coef(pdprox.PD_HINGE, p, 0.5, 0.0, 1.0)
    pdprox.project_row(pdprox.PD_HINGE, 1.5, 0.0)
    pdprox.in_domain(pdprox.PD_HINGE, 0.5, 0.0, 1e-12)
    # SPDC steps
    spdc.geometric_factor(3, 0.1, 0.5)
    spdc.primal_step(1.0, 0.2, 0.1, 0.05, 0.5)
    spdc._branch(1.0, 0.2, 3, 0.1, 0.5)
    spdc._positive_run(1.0, 0.2, 3, 0.1, 0.5)
    spdc.lazy_steps(1.0, 0.2, 3, 0.1, 0.05, 0.5)
    spdc.catch_up(0, 3, spdc.lazy_state(w, w, w, 0), 0.1, 0.05, 0.5, np.ones((4, 2)))
    spdc.skip_factors(5, 0.1, 0.5, np.ones((4, 2)))
    spdc.lazy_l2(1.0, 0.2, 3, 0.1, 0.5, np.ones((4, 2)))
    spdc.scalar_values(spdc.step_scalars(0.1, 0.2, 0.5, 0.0, 0.5, 0.0, 2))
    # spdc_rows's two loops (compiled into it, their own dispatchers called here)
    lazy = spdc.LazyPrimal(spdc.lazy_state(w, w, w, 0), np.full(3, -1, dtype=np.int64),
                           np.zeros(3), spdc.geometric_table(0.1, 0.5, 4))  # fmt: skip
    rows = spdc.BlockRows(indptr, indices.astype(np.int64), data, False, np.ones(2), np.empty(0))
    sample = spdc.RowSample(np.array([0, 1], dtype=np.int64), 1, np.ones(2))
    scalars = spdc.step_scalars(0.1, 0.2, 0.5, 0.0, 0.5, 0.0, 2)
    spdc._batch_rows(rows, np.zeros(2), sample, lazy, 0, scalar.LOGISTIC, p, scalars)
    spdc._single_rows(rows, np.zeros(2), sample.order, sample.inv_npi, lazy.state, lazy.factors,
                      2, scalar.LOGISTIC, p, scalars, 0, 1)  # fmt: skip
    spdc.dual_step(scalar.SMOOTH_HINGE, p, 0.0, 0.3, 0.5, 0.0, 1.0)
    spdc.weighted_dual_step(scalar.SMOOTH_HINGE, p, 0.0, 0.3, 0.5, 0.0, 1.0, 2.0)
    spdc.row_dots(indptr, indices, data, False, w)
    # CoCoA's coordinate step and the helpers its passes call (a pass loaded from numba's
    # disk cache does not compile them in this process), its renumbering of a group's
    # columns (several groups)
    cocoa.dual_step(scalar.LOGISTIC, p, -0.2, 0.3, 0.5, 1.0, 1.0)
    gradient, upper = cocoa.box_gradient(scalar.HINGE, p, 0.5, 0.3, 1.0)
    cocoa.projected_gradient(gradient, 0.5, upper)
    old_max, old_min = cocoa.shrink_thresholds(0.2, -0.1)
    cocoa.shrinks(0.0, gradient, upper, old_max, old_min)
    z = np.zeros(2)
    pack = np.zeros((3, 2))
    cocoa.step_row(scalar.HINGE, p, z, 0, 0.3, 0.5, 1.0, 1.0)
    cocoa.add_row(pack, 1, indices, data, False, 0, 2, 0.1)
    cocoa.column_value(pack, 0, 2)
    cocoa.row_dots(pack, indices, data, False, 0, 2, 0, 2)
    cocoa.row_dot(pack, indices, data, False, 0, 2, 0, 2)
    cocoa.local_columns(indices, 3)
    # the sum of added steps (several groups; one group on every column hands its step on)
    cocoa.add_step(w.copy(), np.arange(3, dtype=np.int32), w, False)
    # the screened groups' bound shift (several groups)
    cocoa.column_shift(w, w.copy(), np.arange(3, dtype=np.int32))
    # tron: the curvature its gradient rows call, and the sum of several groups' shares
    tron.loss_curvature(scalar.LOGISTIC, p, 0.3, 1.0)
    tron.merge_columns(np.array([0, 2], dtype=np.int32), np.ones((2, 2)),
                       np.array([1, 2], dtype=np.int32), np.ones((2, 2)))  # fmt: skip
    packed = dso.pack_columns(w, w.copy(), w.copy())
    dso.unpack_columns(packed, np.empty(3), np.empty(3))
    # dual_newton's Woodbury matrix (its preconditioner is off by default)
    dual_newton.rows_gram(indptr, indices, data, np.ones(2), np.zeros((3, 3)))


def test_all_kernels_compile_once(tmp_path, builtin_solvers):
    dispatchers = kernel_dispatchers()
    ran = _solver_workload(tmp_path, "first", builtin_solvers)
    first = signature_counts(dispatchers)
    assert _solver_workload(tmp_path, "second", builtin_solvers) == ran
    assert ran == builtin_solvers
    assert signature_counts(dispatchers) == first
    # DSO's tile loop is compiled per configuration (closure constants), once each
    from daskpd.kernels import dso

    tile_counts = signature_counts(dso.TILE_KERNELS)
    assert len(tile_counts) >= 2  # with and without SVRG
    _solver_workload(tmp_path, "third", builtin_solvers)
    assert signature_counts(dso.TILE_KERNELS) == tile_counts
    # The first run compiled every dispatcher, so the comparison above covers each of them.
    assert sorted(name for name, count in first.items() if count == 0) == []
