"""Text-like bag-of-words documents: Zipf vocabulary, a planted topic, unit-norm tf-idf rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from daskpd.generators._chunks import CHUNK_NNZ, _check_common, _generate


@dataclass(frozen=True)
class TextModel:
    """Vocabulary and planted topic of :func:`make_text_like` (drawn from ``model_state``).

    Attributes
    ----------
    term_of_rank : ndarray of shape (n_features,), int64
        Column id of the ``r``-th most frequent term (a random permutation, so frequency
        is not ordered by column id).
    background_cdf : ndarray of shape (n_features,)
        Cumulative Zipf-Mandelbrot probabilities of the ranks.
    topic_ranks : ndarray of shape (topic_terms,), int64
        Ranks of the topic's terms (mid-frequency words).
    topic_cdf : ndarray of shape (topic_terms,)
        Cumulative probabilities of the topic's terms.
    idf : ndarray of shape (n_features,)
        ``1 + log(1 / df)`` of each rank, ``df`` the expected fraction of documents that
        hold the term.
    mean_tokens : float
    """

    term_of_rank: np.ndarray
    background_cdf: np.ndarray
    topic_ranks: np.ndarray
    topic_cdf: np.ndarray
    idf: np.ndarray
    mean_tokens: float


def _zipf_probabilities(n_features, exponent):
    # Zipf-Mandelbrot with the offset 2.7 fitted to English word counts
    weights = (np.arange(1, n_features + 1) + 2.7) ** -float(exponent)
    return weights / weights.sum()


def text_like_model(n_features, *, mean_tokens=150, zipf_exponent=1.05, topic_terms=300,
                    model_state=0) -> TextModel:  # fmt: skip
    """The vocabulary and topic of :func:`make_text_like` (see there for the parameters)."""
    n_features = int(n_features)
    if n_features < 2 * int(topic_terms) or int(topic_terms) < 1:
        raise ValueError(
            f"need n_features >= 2 * topic_terms >= 2, got {n_features} and {topic_terms}"
        )
    if not float(mean_tokens) >= 1:
        raise ValueError(f"mean_tokens must be >= 1, got {mean_tokens}")
    if not float(zipf_exponent) > 0:
        raise ValueError(f"zipf_exponent must be > 0, got {zipf_exponent}")
    rng = np.random.default_rng(model_state)
    p = _zipf_probabilities(n_features, zipf_exponent)
    # topic words: neither stop words (the first 100 ranks) nor hapaxes
    lo = min(100, n_features // 4)
    hi = max(lo + int(topic_terms), min(n_features, 50 * int(topic_terms)))
    topic_ranks = np.sort(rng.choice(np.arange(lo, hi), size=int(topic_terms), replace=False))
    topic_weights = rng.dirichlet(np.ones(int(topic_terms)))
    df = -np.expm1(-float(mean_tokens) * p)  # P(term in a document), Poisson tokens
    return TextModel(
        term_of_rank=rng.permutation(n_features).astype(np.int64),
        background_cdf=np.cumsum(p),
        topic_ranks=topic_ranks.astype(np.int64),
        topic_cdf=np.cumsum(topic_weights),
        idf=1.0 + np.log(1.0 / df),
        mean_tokens=float(mean_tokens),
    )


def text_like_row_nnz(n_features, *, mean_tokens=150, zipf_exponent=1.05) -> float:
    """Expected distinct terms of a :func:`make_text_like` document (its nonzeros)."""
    p = _zipf_probabilities(int(n_features), zipf_exponent)
    return float(np.sum(-np.expm1(-float(mean_tokens) * p)))


def _draw(cdf, uniform):
    return np.minimum(np.searchsorted(cdf, uniform * cdf[-1], side="right"), cdf.shape[0] - 1)


def _text_chunk(params, n_rows, rng):
    model, positive_rate, topic_share, noise_share, dtype = params
    is_positive = rng.random(n_rows) < positive_rate
    # document lengths: log-normal with mean ``mean_tokens``
    sigma = 0.6
    lengths = np.maximum(
        5, rng.lognormal(np.log(model.mean_tokens) - sigma**2 / 2, sigma, n_rows).astype(np.int64)
    )
    share = np.where(is_positive, topic_share, noise_share)
    n_topic = rng.binomial(lengths, share)
    row_of = np.repeat(np.arange(n_rows, dtype=np.int64), lengths)
    ranks = _draw(model.background_cdf, rng.random(row_of.shape[0]))
    # the first n_topic tokens of each document come from the topic
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    from_topic = (np.arange(row_of.shape[0]) - first) < np.repeat(n_topic, lengths)
    ranks[from_topic] = model.topic_ranks[_draw(model.topic_cdf, rng.random(int(from_topic.sum())))]
    n_features = model.term_of_rank.shape[0]
    keys, counts = np.unique(row_of * n_features + ranks, return_counts=True)
    rows, ranks = np.divmod(keys, n_features)
    columns = model.term_of_rank[ranks]
    # sublinear tf-idf, each row scaled to unit length (as text pipelines do)
    values = (1.0 + np.log(counts)) * model.idf[ranks]
    norms = np.sqrt(np.bincount(rows, weights=values**2, minlength=n_rows))
    values = values / norms[rows]
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    # column ids ascending within each row (keys were sorted by rank)
    order = np.lexsort((columns, rows))
    return {
        "y": np.where(is_positive, 1.0, -1.0),
        "indptr": indptr,
        "indices": columns[order].astype(np.int32),
        "data": values[order].astype(dtype),
    }


def make_text_like(
    dest,
    n_samples,
    n_features=2**20,
    *,
    positive_rate=0.05,
    mean_tokens=150,
    zipf_exponent=1.05,
    topic_terms=300,
    topic_share=0.05,
    noise_share=0.01,
    dtype=np.float32,
    chunk_rows=None,
    random_state=0,
    model_state=0,
    overwrite=False,
    client=None,
    writer_options=None,
):
    """Bag-of-words documents with a planted topic, as sparse tf-idf rows of unit norm.

    Term frequencies follow a Zipf-Mandelbrot law over a vocabulary of ``n_features``
    terms, whose column ids are a random permutation of the ranks. A document has a
    log-normal number of tokens (mean ``mean_tokens``); a positive document (probability
    ``positive_rate``) draws a ``topic_share`` of its tokens from a planted topic of
    ``topic_terms`` mid-frequency words, a negative one ``noise_share`` (so the classes
    overlap). Values are sublinear tf-idf, ``(1 + log tf) idf``, each row scaled to unit
    Euclidean norm. The vocabulary and topic come from ``model_state``, the documents from
    ``random_state``: a test set shares its training set's ``model_state``.

    Parameters
    ----------
    dest : str or path-like
    n_samples : int
    n_features : int, default=2**20
    positive_rate : float, default=0.05
    mean_tokens : float, default=150
    zipf_exponent : float, default=1.05
    topic_terms : int, default=300
    topic_share, noise_share : float, default=0.05, 0.01
        Fraction of a positive / negative document's tokens drawn from the topic.
    dtype : {float32, float64}, default=float32
    model_state : int, default=0
    chunk_rows, random_state, overwrite, client, writer_options
        As every generator takes them (:mod:`daskpd.generators`).

    Returns
    -------
    dataset : daskpd.data.Dataset
    """
    n_samples = _check_common(dest, n_samples, chunk_rows, overwrite, positive_rate)
    for name, value in (("topic_share", topic_share), ("noise_share", noise_share)):
        if not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    model = text_like_model(
        n_features, mean_tokens=mean_tokens, zipf_exponent=zipf_exponent,
        topic_terms=topic_terms, model_state=model_state,
    )  # fmt: skip
    per_row = text_like_row_nnz(n_features, mean_tokens=mean_tokens, zipf_exponent=zipf_exponent)
    chunk_rows = int(chunk_rows or max(1, int(CHUNK_NNZ // max(per_row, 1.0))))
    seeds = np.random.SeedSequence(random_state).spawn(1 + -(-n_samples // chunk_rows))
    params = (model, float(positive_rate), float(topic_share), float(noise_share), np.dtype(dtype))
    return _generate(
        dest, n_samples, chunk_rows, _text_chunk, params, seeds, n_features=int(n_features),
        binary=False, dtype=np.dtype(dtype), task="binary", layout="csr", overwrite=overwrite,
        client=client, writer_options=writer_options,
    )  # fmt: skip
