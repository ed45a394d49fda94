"""The model file: one format for solve results and fitted estimators, read without pickle.

A model file is a zarr v3 group, written at once through :func:`daskpd.data.atomic.atomic_group`
(a temporary sibling renamed into place when complete, so a reader finds a whole file or
none). :func:`save_model` writes a solve result or a fitted estimator and :func:`load_model`
reads either back, as what the file holds; :meth:`SolveResult.save <daskpd.SolveResult.save>`,
the estimators' ``save`` / ``load`` and :func:`load_estimator` are these two, typed. Below
them, :func:`write_model_file` writes a document and :func:`read_model_file` reads and checks
one.

The package, by job: ``_store`` (the zarr group: arrays with checksums, the document, the
checks of reading), ``_codec`` (the tagged JSON of the document), ``_kinds`` (what a solve
result's and an estimator's document hold, and the objects they become).

Layout (``format_version`` 3)::

    model.zarr/
        zarr.json        group attributes:
            format          "daskpd-model"
            format_version  3
            kind            "solve_result" or "estimator"
            document        a JSON string: the content of the kind in the form of
                            daskpd.model_file._codec (None, bool, int, float with NaN, str, list,
                            tagged tuple / dict / random state), each array replaced by
                            {"__array__": k}
            checksums       {array name: CRC-32 of the array's dtype, shape and bytes}
            arrays          the names of the arrays, in the order the document numbers
                            them (k in {"__array__": k})
        w/, state.coef_/, ...     the arrays, one zarr array each, numeric or boolean,
                                  chunked by at most 2,000,000 elements; named after their
                                  place in the content (``array-<k>`` where that makes no
                                  valid name)

The content of a ``"solve_result"`` is a dict: ``solver``, ``options`` (field -> value),
``objective``, ``history``, ``n_epochs``, ``gap``, ``converged``, ``stop_reason``,
``seed_entropy``, ``recoveries``, and the arrays ``w``, ``w_avg`` and ``z`` (or None). The
content of an ``"estimator"`` is a dict: ``estimator`` (``daskpd.estimators.<class>``, looked
up in a table of daskpd's estimators, never imported by name), ``params`` (the constructor's
parameters) and ``state`` (the fitted attributes, ``coef_`` included).

A model file says what the model is (its class, hyper-parameters, solver and solver options,
coefficients), never where or how to run: no scheduler address, callback, checkpoint
directory or other path is written, and a document that names one is refused when read
(:mod:`daskpd.model_file._kinds`); a solver is named by its registered name, which
imports nothing but daskpd's own solver modules (:func:`daskpd.solvers.get_solver`).

Reading never runs code from the file: the attributes are JSON, the document is JSON decoded
into a closed set of types, an array must be numeric or boolean with codecs from
:data:`ARRAY_CODECS` (a codec outside it, such as a pickle codec, is refused before any
chunk is read), and every array must match its checksum. Files of the two formats this one
replaces are still read: the solve results of ``format_version`` 1 (``format`` "daskpd-model",
named arrays ``w``, ``w_avg``, ``z``) and the estimator files of ``format_version`` 2 (no
``format`` attribute). The estimator files of ``format_version`` 1, whose metadata was
pickled, are refused.
"""

from daskpd.model_file._kinds import (
    load_estimator,
    load_model,
    model_class,
    save_model,
    use_solver_registry,
)
from daskpd.model_file._store import (
    ARRAY_CODECS,
    FORMAT,
    FORMAT_VERSION,
    KINDS,
    CorruptStoreError,
    ModelFile,
    check_array_metadata,
    checksum,
    read_array,
    read_model_file,
    write_array,
    write_model_file,
)

__all__ = [
    "ARRAY_CODECS",
    "FORMAT",
    "FORMAT_VERSION",
    "KINDS",
    "CorruptStoreError",
    "ModelFile",
    "check_array_metadata",
    "checksum",
    "load_estimator",
    "load_model",
    "model_class",
    "read_array",
    "read_model_file",
    "save_model",
    "use_solver_registry",
    "write_array",
    "write_model_file",
]
