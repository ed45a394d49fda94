"""daskpd: out-of-core primal-dual training of regularized linear models on Dask.

The public API, by layer:

* data (:mod:`daskpd.data`): :func:`write_dataset`, :func:`open_dataset`,
  :func:`partition_dataset`, :func:`as_dataset`, ingestion (:func:`ingest_svmlight`,
  :func:`ingest_sequences`) and the generators of :mod:`daskpd.generators` (old name:
  :mod:`daskpd.datasets`);
* objectives: the losses and regularizers, :class:`Problem` (primal, dual and duality gap over
  a dataset in one Dask compute), :mod:`daskpd.metrics`;
* training: :func:`solve` with the registered methods ``"dso"``, ``"spdc"``, ``"dspdc"``,
  ``"gsfw"``, ``"pdprox"``, ``"cocoa"`` and the ``"batch"`` baseline; callbacks, checkpoints,
  models;
* scikit-learn estimators (:mod:`daskpd.estimators`).
"""

__version__ = "0.1.0"

from daskpd import datasets, generators, metrics
from daskpd._load_model import load_model
from daskpd.callbacks import Callback, EarlyStopping, HistoryRecorder, ProgressBar
from daskpd.checkpoint import CorruptStoreError, save_model
from daskpd.data import (
    Dataset,
    DatasetIntegrityError,
    DatasetWriter,
    MemoryDataset,
    as_dataset,
    open_dataset,
    partition_dataset,
    write_dataset,
)
from daskpd.io import ingest_sequences, ingest_svmlight
from daskpd.losses import get_loss
from daskpd.problem import Evaluation, Problem
from daskpd.regularizers import get_regularizer
from daskpd.solvers import (
    DivergenceError,
    Iterate,
    SolveResult,
    TrainingFailed,
    available_solvers,
    get_solver,
    register_solver,
    solve,
)

# The estimators import scikit-learn (and through it SciPy's stats and pandas: ~150 MB of
# resident memory). Every Dask worker imports this package to run a task, and needs none of
# that, so the estimators load on first use (PEP 562).
_ESTIMATORS = (
    "ElasticNet",
    "LADRegression",
    "Lasso",
    "LinearSVC",
    "LinearSVR",
    "LogisticRegression",
    "Ridge",
    "SaddlePointEstimator",
    "load_estimator",
)


def __getattr__(name):
    if name in _ESTIMATORS:
        from daskpd import estimators

        return getattr(estimators, name)
    raise AttributeError(f"module 'daskpd' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_ESTIMATORS))


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
    "Ridge",
    "SaddlePointEstimator",
    "SolveResult",
    "TrainingFailed",
    "__version__",
    "as_dataset",
    "available_solvers",
    "datasets",
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
    "save_model",
    "solve",
    "write_dataset",
]
