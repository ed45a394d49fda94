"""Synthetic data generators, written to the zarr format chunk by chunk.

Every generator cuts its rows into chunks of ``chunk_rows``; each chunk is one Dask task with
its own seed, ``SeedSequence(random_state).spawn(...)`` (child 0 draws the planted model, child
``1 + c`` draws chunk ``c``), and saves its rows as a part on disk; one task then appends the
parts in order (see :mod:`daskpd.io._parts`). Memory is bounded by a chunk, so datasets of
1e9+ nonzeros need no more memory than a chunk, and the same ``random_state`` and
``chunk_rows`` give the same bits whatever the number of workers.

Planted models that do not fit the dataset (coefficients, factors ``U`` and ``V``) are stored
in a zarr group next to it, ``<dest>.planted`` (:func:`planted_path`), and returned.

Every generator also takes these parameters:

chunk_rows : int, optional
    Rows per chunk (a task); default: about 4M nonzeros per chunk.
random_state : int, default=0
    Root of the seeds (the rows and the planted model).
overwrite : bool, default=False
    Replace a dataset at ``dest``; otherwise an existing one is a ``FileExistsError`` before
    any work.
client : distributed.Client, optional
    Where the chunks run; default: Dask's current scheduler (an active client's cluster, else
    threads in this process).
writer_options : dict, optional
    Extra keyword arguments of :class:`daskpd.data.DatasetWriter`.

Generators
----------
make_splice_like
    DNA windows from position-dependent Markov chains fitted on the real splice-junction
    windows of ``data/statlog_dna.csv`` (positives and negatives separately), then
    weighted-degree features; rare positives (default 1%).
make_classification, make_regression
    Sparse or dense rows with a planted sparse or dense linear model.
make_factorized
    Dense ``X = U V`` of low rank (for DSPDC), ``U`` and ``V`` stored.
make_spdc_ridge
    The synthetic ridge data of the SPDC paper (Zhang & Xiao, Section 7.1).
make_text_like
    Bag-of-words documents: Zipf vocabulary, a planted topic for the positives, sublinear
    tf-idf rows of unit norm.

The package, by kind: ``_chunks`` (what every generator shares: chunks as Dask tasks, the
parts assembled, the planted model stored), ``_splice`` (DNA windows), ``_linear`` (planted
linear models), ``_factorized`` (low-rank and the SPDC paper's data), ``_text`` (documents).
"""

from daskpd.generators._chunks import Generated, planted_path
from daskpd.generators._factorized import make_factorized, make_spdc_ridge
from daskpd.generators._linear import make_classification, make_regression
from daskpd.generators._splice import (
    SpliceModel,
    fit_splice_model,
    load_statlog_dna,
    make_splice_like,
    sample_windows,
)
from daskpd.generators._text import (
    TextModel,
    make_text_like,
    text_like_model,
    text_like_row_nnz,
)

__all__ = [
    "Generated",
    "SpliceModel",
    "TextModel",
    "fit_splice_model",
    "load_statlog_dna",
    "make_classification",
    "make_factorized",
    "make_regression",
    "make_splice_like",
    "make_spdc_ridge",
    "make_text_like",
    "planted_path",
    "sample_windows",
    "text_like_model",
    "text_like_row_nnz",
]
