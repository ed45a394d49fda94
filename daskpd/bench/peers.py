"""The peers daskpd is measured against, run on the same data and the same objective.

Our objective is ``P(w) = (1/n) sum_i loss(x_i.w, y_i) + alpha R(w)`` with
``R(w) = ||w||^2 / 2`` for the L2 penalty. Each peer states its regularization differently; the
translations below are exact (same minimizer) and ``tests/bench/test_peers.py`` checks them by
solving the same problem with each peer and with our objective:

=====================================================  =============================================
peer and its objective                                 its parameter in terms of our ``alpha``
=====================================================  =============================================
liblinear (``LinearSVC``, ``LogisticRegression``):     ``C = 1 / (alpha n)``
``C sum_i loss_i + ||w||^2 / 2``
scikit-learn ``LogisticRegression(solver="saga")``     ``C = 1 / (alpha n)``
scikit-learn ``SGDClassifier``:                        ``alpha`` (the same meaning)
``(1/n) sum_i loss_i + alpha ||w||^2 / 2``
dask-ml ``LogisticRegression`` (dask-glm):             ``C = 1 / (alpha n)``, and
``sum_i loss_i + (1/C) ||w||^2 / 2``                   ``solver_kwargs={"normalize": False}``
                                                       (it standardizes columns by default)
Vowpal Wabbit, ``--bfgs`` (batch):                     ``--l2 = alpha n``
``sum_i loss_i + (l2/2) ||w||^2``
Vowpal Wabbit, online SGD (default):                   ``--l2 = alpha`` (nominal: the
per-example ``loss_i + (l2/2) ||w||^2``                adaptive, normalized updates regularize
                                                       more strongly; not an exact match, so
                                                       online VW is judged by test AUPRC only)
=====================================================  =============================================

For the squared loss, ours is ``(x_i.w - y_i)^2 / 2`` and every peer's is the square without the
half, so the peers' summed objective is twice ours times ``n`` and the translations become:

=====================================================  =============================================
peer (regression) and its objective                    its parameter in terms of our ``alpha``
=====================================================  =============================================
liblinear (``LinearSVR``, squared epsilon-insensitive  ``C = 1 / (2 alpha n)``
loss with ``epsilon = 0``): ``C sum_i r_i^2 +
||w||^2 / 2``
scikit-learn ``Ridge(solver="saga")``:                 ``alpha_ridge = alpha n``
``sum_i r_i^2 + alpha_ridge ||w||^2``
scikit-learn ``SGDRegressor`` (``squared_error`` is    ``alpha`` (the same meaning)
``r^2 / 2``): ``(1/n) sum_i r_i^2 / 2 + alpha
||w||^2 / 2``
dask-ml ``LinearRegression`` (dask-glm's Normal        ``C = 1 / (2 alpha n)``
family): ``sum_i r_i^2 + (1/C) ||w||^2 / 2``
Vowpal Wabbit ``--bfgs``, ``--loss_function squared``: ``--l2 = 2 alpha n``
``sum_i r_i^2 + (l2/2) ||w||^2``
Vowpal Wabbit online                                   ``--l2 = alpha`` (nominal, as above)
=====================================================  =============================================

Intercepts are left out (``fit_intercept=False`` / ``--noconstant``) so every peer solves exactly
the objective above; benchmarks that want an intercept add a constant feature to the data for
everyone.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from daskpd.bench._translation import (
    _check_alpha,
    _data_doc,
    alpha_to_c,
    alpha_to_ridge_alpha,
    alpha_to_vw_l2,
)


@dataclass(frozen=True)
class PeerFit:
    """A peer's trained linear model and the wall time its training took.

    Attributes
    ----------
    name : str
        Peer name, e.g. ``"liblinear"``.
    coef : ndarray of shape (n_features,) or None
        Weights in our feature order (``None`` where the peer's weights are not readable).
    seconds : float
        Training wall time (data conversion excluded where the peer needs its own format).
    test_scores : ndarray of shape (n_test,) or None
        Scores the peer itself gave to held-out data, when asked for.
    """

    name: str
    coef: np.ndarray | None
    seconds: float
    test_scores: np.ndarray | None = None


def _targets(y):
    y = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(y)):
        raise ValueError("peer regressors expect finite targets, got NaN or inf")
    return y


def _labels_for(loss, y):
    """Real targets for the squared loss, labels in {-1, +1} for the classification losses."""
    return _targets(y) if loss == "squared" else _labels_pm1(y)


def _labels_pm1(y):
    y = np.asarray(y, dtype=np.float64)
    bad = ~np.isin(y, (-1.0, 1.0))
    if bad.any():
        raise ValueError(f"peer classifiers expect labels in {{-1, +1}}, got {y[bad][0].item()!r}")
    return y


def _timed_fit(model, X, y):
    """Fit a scikit-learn-like ``model``: its flat ``coef_`` as float64, and the seconds of
    ``fit`` alone."""
    start = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - start
    return np.asarray(model.coef_, dtype=np.float64).ravel(), seconds


#: liblinear's solvers (``-s``) by loss, the first the default of :func:`fit_liblinear`.
LIBLINEAR_SOLVERS = {"hinge": (3,), "squared_hinge": (1,), "logistic": (0, 7), "squared": (12,)}


@_data_doc("targets")
def fit_liblinear(
    X, y, alpha, *, loss="hinge", tol=1e-6, max_iter=100_000, random_state=0, solver=None
):
    """Train liblinear (through scikit-learn) on our objective.

    Parameters
    ----------
    {data}
    loss : {"hinge", "logistic", "squared_hinge", "squared"}
        Loss; hinge runs the dual coordinate descent solver (``liblinear -s 3``); squared
        liblinear's dual solver of L2-loss support vector regression with ``epsilon = 0``
        (``-s 12``), which is ridge regression.
    tol : float
        liblinear's stopping tolerance.
    max_iter : int
        Iteration cap of liblinear.
    random_state : int
        Seed of liblinear's coordinate order (unseeded, it comes from numpy's global
        generator, and a run could not be repeated).
    solver : int, optional
        liblinear's ``-s`` (:data:`LIBLINEAR_SOLVERS` of the loss; default its first). The
        logistic loss has two: ``0``, the primal trust-region Newton method
        (``LogisticRegression(solver="liblinear")``, scikit-learn's default ``dual=False``),
        and ``7``, the dual coordinate descent (``dual=True``).

    Returns
    -------
    PeerFit
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC, LinearSVR

    if loss in LIBLINEAR_SOLVERS:
        solver = LIBLINEAR_SOLVERS[loss][0] if solver is None else solver
        if solver not in LIBLINEAR_SOLVERS[loss]:
            raise ValueError(
                f"liblinear's solvers for loss {loss!r} are -s "
                f"{', '.join(map(str, LIBLINEAR_SOLVERS[loss]))}; got {solver!r}"
            )
    y = _labels_for(loss, y)
    c = alpha_to_c(alpha, X.shape[0], loss=loss)
    if loss == "squared":
        model = LinearSVR(
            loss="squared_epsilon_insensitive", epsilon=0.0, dual=True, C=c,
            fit_intercept=False, tol=tol, max_iter=max_iter, random_state=random_state,
        )  # fmt: skip
    elif loss == "logistic":
        model = LogisticRegression(
            solver="liblinear", dual=solver == 7, C=c, fit_intercept=False, tol=tol,
            max_iter=max_iter, random_state=random_state,
        )  # fmt: skip
    elif loss in ("hinge", "squared_hinge"):
        model = LinearSVC(
            loss=loss, dual=True, C=c, fit_intercept=False, tol=tol, max_iter=max_iter,
            random_state=random_state,
        )  # fmt: skip
    else:
        raise ValueError(
            f"loss must be 'hinge', 'squared_hinge', 'logistic' or 'squared', got {loss!r}"
        )
    return PeerFit("liblinear", *_timed_fit(model, X, y))


@_data_doc("labels")
def fit_liblinear_multicore(X, y, alpha, *, loss="hinge", tol=0.1, threads=2, convert_seconds=None):
    """Train multi-core LIBLINEAR (the ``liblinear-multicore`` package) on our objective.

    Hinge runs its parallel dual coordinate descent (``-s 3``), logistic its parallel primal
    trust-region Newton method (``-s 0``; its dual solver ``-s 7`` has no parallel version).
    ``C = 1 / (alpha n)`` as for liblinear.

    Parameters
    ----------
    {data}
    loss : {"hinge", "logistic"}
    tol : float
        LIBLINEAR's ``-e`` (its command line's default is 0.1 for ``-s 3``, 0.01 for ``-s 0``).
    threads : int
        ``-m``: threads of the parallel solver.
    convert_seconds : list, optional
        When given, the seconds spent converting ``X`` into LIBLINEAR's row format are appended
        (they are not part of ``seconds``: a LIBLINEAR user loads data in that format).

    Returns
    -------
    PeerFit
        ``seconds`` is the time of ``train`` alone.
    """
    from liblinear.liblinearutil import parameter, problem, train

    solvers = {"hinge": 3, "logistic": 0}
    if loss not in solvers:
        raise ValueError(f"loss must be 'hinge' or 'logistic', got {loss!r}")
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads!r}")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol!r}")
    y = _labels_pm1(y)
    c = alpha_to_c(alpha, X.shape[0], loss=loss)
    start = time.perf_counter()
    data = problem(y, sp.csr_matrix(X))
    if convert_seconds is not None:
        convert_seconds.append(time.perf_counter() - start)
    options = parameter(f"-s {solvers[loss]} -c {c:.17g} -e {tol:.17g} -m {int(threads)} -B -1 -q")
    start = time.perf_counter()
    model = train(data, options)
    seconds = time.perf_counter() - start
    coef = np.array([model.get_decfun_coef(j + 1) for j in range(X.shape[1])])
    # LIBLINEAR orients w towards its first label seen; ours is +1
    if model.get_labels()[0] != 1:
        coef = -coef
    return PeerFit("liblinear-mc", coef, seconds)


#: Snap ML's formulations by loss (``dual`` of :func:`fit_snapml`), each a row of its own in
#: the bench: its SVM has only the dual; its logistic regression also a primal solver.
SNAPML_FORMULATIONS = {"hinge": (True,), "logistic": (True, False)}


@_data_doc("labels")
def fit_snapml(
    X, y, alpha, *, loss="hinge", tol=1e-3, n_jobs=2, max_iter=1000, random_state=0,
    isolate=True, dual=True,
):  # fmt: skip
    """Train Snap ML (``snapml``, its CPU solver) on our objective, in a process of its own.

    Snap ML minimizes ``sum_i loss_i + (regularizer / 2) ||w||^2`` (checked against liblinear
    in ``tests/bench/test_peers.py``), so ``regularizer = alpha n``. Hinge runs
    ``SupportVectorMachine``, logistic ``LogisticRegression``; by default both run its
    stochastic dual coordinate ascent. On the splice-like sets its logistic dual settles about
    0.9% above P* at any ``tol`` (1e-6 to 1e-10, one thread or two), where its primal solver
    (``dual=False``) reaches P*; so the bench runs both on the logistic loss.

    Loading Snap ML's library switches the processor to flush subnormal floats to zero for
    the whole process (it is built with fast-math), which would change every later float
    computation here; so the fit runs in a spawned child process, which times the fit itself.

    Parameters
    ----------
    {data}
    loss : {"hinge", "logistic"}
    tol : float
        Snap ML's stopping tolerance (on the change of the coefficients).
    n_jobs : int
        Threads.
    max_iter : int
        Epochs at most.
    random_state : int
    isolate : bool, default=True
        Fit in a spawned child process (above); ``False``: in this process, for a process
        that does nothing else afterwards (the bench's from-files clock).
    dual : bool, default=True
        Snap ML's ``dual``: its dual coordinate ascent, or (``False``, logistic only) its
        primal solver (:data:`SNAPML_FORMULATIONS`).

    Returns
    -------
    PeerFit
        ``seconds`` is the time of Snap ML's ``fit`` in the child (the transfer of the data to
        the child is not counted).
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if loss not in ("hinge", "logistic"):
        raise ValueError(f"loss must be 'hinge' or 'logistic', got {loss!r}")
    if bool(dual) not in SNAPML_FORMULATIONS[loss]:
        raise ValueError(f"Snap ML has no dual={dual!r} solver for loss={loss!r}")
    _check_alpha(alpha)
    y = _labels_pm1(y)
    settings = {
        "regularizer": alpha * X.shape[0], "fit_intercept": False, "tol": tol,
        "max_iter": int(max_iter), "n_jobs": int(n_jobs), "random_state": random_state,
    }  # fmt: skip
    if loss == "logistic":
        settings["dual"] = bool(dual)
    if not isolate:
        return PeerFit("snapml", *_snapml_fit(sp.csr_matrix(X), y, loss, settings))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        coef, seconds = pool.submit(_snapml_fit, sp.csr_matrix(X), y, loss, settings).result()
    return PeerFit("snapml", coef, seconds)


def _snapml_fit(X, y, loss, settings):
    """Snap ML's fit (in the child process of :func:`fit_snapml`): ``(coef, seconds)``."""
    import snapml

    estimators = {"hinge": snapml.SupportVectorMachine, "logistic": snapml.LogisticRegression}
    return _timed_fit(estimators[loss](**settings), X, y)


@_data_doc("targets")
def fit_sgd(X, y, alpha, *, loss="hinge", max_iter=20, tol=None, random_state=0):
    """Train scikit-learn's ``SGDClassifier`` (``SGDRegressor`` for the squared loss).

    Its ``alpha`` is ours.

    Parameters
    ----------
    {data}
    loss : {"hinge", "logistic", "squared"}
    max_iter : int
        Epochs.
    tol : float or None
        scikit-learn's stopping tolerance (``None``: run all epochs).
    random_state : int

    Returns
    -------
    PeerFit
    """
    from sklearn.linear_model import SGDClassifier, SGDRegressor

    _check_alpha(alpha)
    sk_loss = {"hinge": "hinge", "logistic": "log_loss", "squared": "squared_error"}.get(loss)
    if sk_loss is None:
        raise ValueError(f"loss must be 'hinge', 'logistic' or 'squared', got {loss!r}")
    y = _labels_for(loss, y)
    estimator = SGDRegressor if loss == "squared" else SGDClassifier
    model = estimator(
        loss=sk_loss,
        penalty="l2",
        alpha=alpha,
        fit_intercept=False,
        max_iter=max_iter,
        tol=tol,
        random_state=random_state,
    )
    return PeerFit("sgd", *_timed_fit(model, X, y))


@_data_doc("targets")
def fit_saga(X, y, alpha, *, loss="logistic", tol=1e-6, max_iter=1000, random_state=0):
    """Train scikit-learn's SAGA on our objective: logistic regression or ridge.

    Parameters
    ----------
    {data}
    loss : {"logistic", "squared"}
        ``LogisticRegression(solver="saga")`` or ``Ridge(solver="saga")``.
    tol : float
    max_iter : int
        Passes over the data.
    random_state : int
        Seed of SAGA's sampling (unseeded, it comes from numpy's global generator).

    Returns
    -------
    PeerFit
    """
    from sklearn.linear_model import LogisticRegression, Ridge

    y = _labels_for(loss, y)
    if loss == "squared":
        model = Ridge(
            solver="saga", alpha=alpha_to_ridge_alpha(alpha, X.shape[0]),
            fit_intercept=False, tol=tol, max_iter=max_iter, random_state=random_state,
        )  # fmt: skip
    elif loss == "logistic":
        model = LogisticRegression(
            solver="saga", C=alpha_to_c(alpha, X.shape[0]),
            fit_intercept=False, tol=tol, max_iter=max_iter, random_state=random_state,
        )  # fmt: skip
    else:
        raise ValueError(f"loss must be 'logistic' or 'squared', got {loss!r}")
    return PeerFit("saga", *_timed_fit(model, X, y))


def fit_dask_ml(
    X, y, alpha, *, loss="logistic", solver="lbfgs", max_iter=100, tol=1e-8, chunks=None
):
    """Train dask-ml's ``LogisticRegression`` (``LinearRegression``) on our objective.

    Parameters
    ----------
    X : {ndarray, sparse matrix, dask array} of shape (n_samples, n_features)
        scipy.sparse input becomes a Dask array of ``sparse.COO`` chunks (dask-glm's solvers
        accept those and stay sparse).
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1} (mapped to dask-ml's {0, 1}); real targets for the squared loss.
    alpha : float
        Our regularization strength.
    loss : {"logistic", "squared"}
    solver : {"lbfgs", "admm", "gradient_descent", "proximal_grad", "newton"}
    max_iter : int
    tol : float
    chunks : int or None
        Row chunk size when X is not already a Dask array.

    Returns
    -------
    PeerFit
    """
    import dask.array as da
    from dask_ml.linear_model import LinearRegression, LogisticRegression

    if loss not in ("logistic", "squared"):
        raise ValueError(f"loss must be 'logistic' or 'squared', got {loss!r}")
    target = _labels_for(loss, y)
    if loss == "squared":
        estimator = LinearRegression
    else:
        estimator, target = LogisticRegression, (target > 0).astype(np.float64)
    n = X.shape[0]
    if not isinstance(X, da.Array):
        rows = chunks or max(1, -(-n // 4))
        if sp.issparse(X):
            # pydata/sparse chunks keep the data sparse through dask-glm's dot products. One
            # array per chunk: a single array of the whole matrix is one graph key, which
            # persisting ships whole to one worker before slicing it (at 1e8 nonzeros, 2.4 GB
            # of COO on a 4 GiB worker).
            import sparse

            X = sp.csr_matrix(X)
            X = da.concatenate(
                [
                    da.from_array(
                        sparse.COO.from_scipy_sparse(X[start : start + rows]),
                        chunks=(min(rows, n - start), X.shape[1]),
                        asarray=False,
                    )
                    for start in range(0, n, rows)
                ],
                axis=0,
            )
        else:
            X = da.from_array(np.asarray(X), chunks=(rows, X.shape[1]))
    target = da.from_array(target, chunks=(X.chunks[0],))
    # dask-glm standardizes the columns by default, which regularizes other coefficients
    # than ours; normalize=False makes it solve our objective.
    model = estimator(
        penalty="l2",
        C=alpha_to_c(alpha, n, loss=loss),
        fit_intercept=False,
        solver=solver,
        max_iter=max_iter,
        tol=tol,
        solver_kwargs={"normalize": False},
    )
    X, target = _persist_on_cluster(X, target)
    start = time.perf_counter()
    model.fit(X, target)
    seconds = time.perf_counter() - start
    return PeerFit("dask-ml", np.asarray(model.coef_, dtype=np.float64).ravel(), seconds)


def _persist_on_cluster(*arrays):
    """Load Dask arrays into the workers' memory before the fit is timed.

    As a dask-ml user would with data that fits in the cluster's memory; otherwise every
    iteration of the solver ships the in-memory chunks inside its graph, which measures the
    network, not the solver (liblinear is timed on data already in memory too).
    """
    try:
        from distributed import default_client, wait
    except ImportError:
        return arrays
    try:
        client = default_client()
    except ValueError:  # no distributed client: the local schedulers hold nothing to persist
        return arrays
    persisted = client.persist(list(arrays))
    wait(persisted)
    return tuple(persisted)


def write_vw(X, y, path):
    """Write ``(X, y)`` in Vowpal Wabbit's text format with integer feature names.

    Feature ``j`` is written as name ``j`` in namespace ``f``; :func:`fit_vw` reads the
    weights back by hashing the same names, so no hash collision is assumed.

    Parameters
    ----------
    X : sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1} or real targets.
    path : str or path-like
    """
    X = sp.csr_matrix(X)
    y = _targets(y)
    with open(path, "w") as handle:
        for i in range(X.shape[0]):
            start, stop = X.indptr[i], X.indptr[i + 1]
            features = " ".join(
                f"{j}:{v:.9g}"
                for j, v in zip(X.indices[start:stop], X.data[start:stop], strict=True)
            )
            handle.write(f"{y[i]:.17g} |f {features}\n")


def _write_vw_once(X, y, path):
    """VW's text of ``(X, y)`` at ``path``, written (atomically) unless it is there."""
    from daskpd.data.atomic import atomic_file

    if os.path.exists(path):
        return
    with atomic_file(path) as temporary:
        write_vw(X, y, temporary)


def fit_vw(
    X,
    y,
    alpha,
    *,
    X_test=None,
    loss="logistic",
    passes=10,
    batch=True,
    bits=24,
    extra="",
    l2=None,
    text_files=None,
):
    """Train Vowpal Wabbit on our objective.

    Parameters
    ----------
    X : sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}; real targets for ``loss="squared"``.
    alpha : float
        Our regularization strength (translated by :func:`alpha_to_vw_l2`).
    X_test : sparse matrix of shape (n_test, n_features), optional
        When given, VW scores it with its own predictor (``-t -p``): the only faithful way to
        read an online VW model, whose stored weights are in its normalized coordinates.
    loss : {"logistic", "hinge", "squared"}
    passes : int
        Passes over the data (VW caches the parsed data after the first).
    batch : bool, default=True
        ``--bfgs``: VW's exact batch optimizer, whose objective matches ours under
        :func:`alpha_to_vw_l2`, so its weights are comparable with ours. ``False``: VW's
        default online learner (adaptive, normalized updates) as people run it; its ``coef``
        is then ``None`` and only ``test_scores`` is meaningful.
    bits : int
        Hash table bits (``-b``); must exceed ``log2(n_features)`` to avoid collisions.
    extra : str
        Further VW arguments.
    l2 : float, optional
        VW's ``--l2`` as given, instead of the translation of ``alpha`` (online VW's nominal
        translation over-regularizes; benchmarks choose it on a validation set).
    text_files : tuple of str, optional
        ``(train, test)`` paths of VW's text of ``X`` and ``X_test``: written there when
        missing and reused when present (a benchmark fits the same data many times; the text
        must be of the same ``X``). Default: written to a temporary directory per call.

    Returns
    -------
    PeerFit
        ``seconds`` counts VW's training including its parse of the text file (VW's normal
        use), not our conversion to text.
    """
    from vowpalwabbit import Workspace

    if loss not in ("logistic", "hinge", "squared"):
        raise ValueError(f"loss must be 'logistic', 'hinge' or 'squared', got {loss!r}")
    y = _labels_for(loss, y)
    if 2**bits <= X.shape[1]:
        raise ValueError(f"bits={bits} gives fewer hash slots than n_features={X.shape[1]}")
    if not batch and X_test is None:
        raise ValueError("online VW (batch=False) needs X_test: its weights are not readable")
    if l2 is None:
        l2 = alpha_to_vw_l2(alpha, X.shape[0], batch=batch, loss=loss)
    elif not float(l2) >= 0:
        raise ValueError(f"l2 must be >= 0, got {l2!r}")
    with tempfile.TemporaryDirectory(prefix="daskpd-vw-") as tmp:
        data, test_data = text_files or (
            os.path.join(tmp, "train.vw"),
            os.path.join(tmp, "test.vw"),
        )
        model_path = os.path.join(tmp, "model.vw")
        _write_vw_once(X, y, data)
        args = (
            f"-d {data} --loss_function {loss} --l2 {l2:.17g} --noconstant -b {bits} "
            f"--passes {passes} -c -k --holdout_off --quiet --cache_file {tmp}/cache "
            f"-f {model_path} " + ("--bfgs --predict_only_model " if batch else "") + extra
        )
        start = time.perf_counter()
        workspace = Workspace(args)
        seconds = time.perf_counter() - start
        coef = None
        if batch:
            namespace = workspace.hash_space("f")
            coef = np.array(
                [
                    workspace.get_weight(workspace.hash_feature(str(j), namespace))
                    for j in range(X.shape[1])
                ]
            )
        workspace.finish()  # writes the model file
        test_scores = None
        if X_test is not None:
            preds = os.path.join(tmp, "preds.txt")
            _write_vw_once(X_test, np.ones(X_test.shape[0]), test_data)
            scorer = Workspace(
                f"-d {test_data} -t -i {model_path} -p {preds} --quiet"
                + (" --predict_only_model" if batch else "")
            )
            scorer.finish()
            test_scores = np.loadtxt(preds, ndmin=1)
    return PeerFit("vw", coef, seconds, test_scores)
