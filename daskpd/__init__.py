"""daskpd: out-of-core primal-dual training of regularized linear models on Dask.

The public API, by layer:

* data (:mod:`daskpd.data`): :func:`write_dataset`, :func:`open_dataset`,
  :func:`partition_dataset`, :func:`as_dataset`, ingestion (:func:`ingest_svmlight`,
  :func:`ingest_sequences`) and the generators of :mod:`daskpd.generators`;
* objectives: the losses and regularizers, :class:`Problem` (primal, dual and duality gap over
  a dataset in one Dask compute), :mod:`daskpd.metrics`;
* training: :func:`solve` with the registered methods ``"dso"``, ``"spdc"``, ``"dspdc"``,
  ``"gsfw"``, ``"pdprox"``, ``"cocoa"`` and the ``"batch"`` baseline; callbacks, checkpoints,
  models; :func:`regularization_path` (one certified model per alpha, warm-started, and
  the choice of alpha on validation data);
* scikit-learn estimators (:mod:`daskpd.estimators`).
"""

__version__ = "0.1.0"

# Every name loads on first use (PEP 562), so that importing the package costs nothing and a
# caller pays only for the layers it uses: `daskpd --help` took 0.69 s when this module
# imported every layer (the solvers, ingestion, generators, numba, zarr, SciPy), 0.07 s now;
# a Dask worker that runs a CoCoA+ task loads 42 of the package's modules, not 68. The
# estimators also import scikit-learn (and through it SciPy's stats and pandas: ~150 MB of
# resident memory), which no worker needs.
_SUBMODULES = ("generators", "metrics")
_LAZY = {
    "load_model": "daskpd.model_file",
    "Callback": "daskpd.callbacks",
    "EarlyStopping": "daskpd.callbacks",
    "HistoryRecorder": "daskpd.callbacks",
    "ProgressBar": "daskpd.callbacks",
    "CorruptStoreError": "daskpd.model_file",
    "save_model": "daskpd.model_file",
    "Dataset": "daskpd.data",
    "DatasetIntegrityError": "daskpd.data",
    "DatasetWriter": "daskpd.data",
    "MemoryDataset": "daskpd.data",
    "as_dataset": "daskpd.data",
    "open_dataset": "daskpd.data",
    "partition_dataset": "daskpd.data",
    "write_dataset": "daskpd.data",
    "ingest_sequences": "daskpd.io",
    "ingest_svmlight": "daskpd.io",
    "get_loss": "daskpd.losses",
    "Evaluation": "daskpd.problem",
    "Problem": "daskpd.problem",
    "get_regularizer": "daskpd.regularizers",
    "DivergenceError": "daskpd.solvers",
    "Iterate": "daskpd.solvers",
    "SolveResult": "daskpd.solvers",
    "TrainingFailed": "daskpd.solvers",
    "available_solvers": "daskpd.solvers",
    "get_solver": "daskpd.solvers",
    "register_solver": "daskpd.solvers",
    "solve": "daskpd.solvers",
    "RegularizationPath": "daskpd.path",
    "alpha_max": "daskpd.path",
    "regularization_path": "daskpd.path",
    "ElasticNet": "daskpd.estimators",
    "LADRegression": "daskpd.estimators",
    "Lasso": "daskpd.estimators",
    "LinearSVC": "daskpd.estimators",
    "LinearSVR": "daskpd.estimators",
    "LogisticRegression": "daskpd.estimators",
    "Ridge": "daskpd.estimators",
    "SaddlePointEstimator": "daskpd.estimators",
    "load_estimator": "daskpd.estimators",
}


def __getattr__(name):
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f"daskpd.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'daskpd' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    # later lookups find it without this function
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


__all__ = [
    "Callback",
    "CorruptStoreError",
    "Dataset",
    "DatasetIntegrityError",
    "DatasetWriter",
    "DivergenceError",
    "EarlyStopping",
    "ElasticNet",
    "Evaluation",
    "HistoryRecorder",
    "Iterate",
    "LADRegression",
    "Lasso",
    "LinearSVC",
    "LinearSVR",
    "LogisticRegression",
    "MemoryDataset",
    "Problem",
    "ProgressBar",
    "RegularizationPath",
    "Ridge",
    "SaddlePointEstimator",
    "SolveResult",
    "TrainingFailed",
    "__version__",
    "alpha_max",
    "as_dataset",
    "available_solvers",
    "generators",
    "get_loss",
    "get_regularizer",
    "get_solver",
    "ingest_sequences",
    "ingest_svmlight",
    "load_estimator",
    "load_model",
    "metrics",
    "open_dataset",
    "partition_dataset",
    "register_solver",
    "regularization_path",
    "save_model",
    "solve",
    "write_dataset",
]
