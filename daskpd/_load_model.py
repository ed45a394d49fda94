"""``daskpd.load_model``: read a model file of either kind.

It sits above the solvers and the estimators, whose model files it reads (:mod:`daskpd.model_file`
is the format, below both); the estimators, and with them scikit-learn, are imported only
for an estimator's file.
"""

from __future__ import annotations

from daskpd.model_file import read_model_file

__all__ = ["load_model"]


def load_model(path):
    """Load a model file: a solve result or a fitted estimator.

    Parameters
    ----------
    path : str or path-like
        Written by :meth:`SolveResult.save` (or :func:`daskpd.save_model`, or ``daskpd train
        --out``), or by an estimator's ``save``.

    Returns
    -------
    SolveResult or estimator
        A :class:`~daskpd.SolveResult` for a solve result's file (``options`` is the solver's
        ``Options`` dataclass when that solver is registered, else a dict; ``timings`` is
        empty); the fitted estimator, of the class that saved it, for an estimator's file.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When ``path`` is not a daskpd model file, is of a newer or withdrawn (pickled)
        version, or fails a check of :func:`daskpd.model_file.read_model_file`.
    CorruptStoreError
        When an array is missing, unreadable or fails its checksum (a ``ValueError``).

    See Also
    --------
    daskpd.solvers.load_model : reads solve results only.
    load_estimator : reads estimators only.
    """
    model_file = read_model_file(path)
    if model_file.kind == "estimator":
        from daskpd.estimators._model_file import estimator_from_model_file

        return estimator_from_model_file(model_file)
    from daskpd.solvers.driver.types import result_from_model_file

    return result_from_model_file(model_file)
