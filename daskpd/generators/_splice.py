"""Splice-site-like data: DNA windows from Markov chains fitted on real windows, WD features."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass

import numpy as np

from daskpd.generators._chunks import CHUNK_NNZ, _check_common, _generate
from daskpd.io.sequences import WDOptions, encode, wd_transform


def _default_data_path() -> str:
    # data/ sits next to the package: <root>/daskpd/generators/_splice.py
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(os.path.dirname(package), "data", "statlog_dna.csv")


def load_statlog_dna(path=None):
    """Read the StatLog DNA splice-junction windows shipped in ``data/statlog_dna.csv``.

    Parameters
    ----------
    path : str, optional
        Another copy of the CSV (columns ``sequence``, ``class``).

    Returns
    -------
    sequences : list of str
        3,186 windows of 60 nucleotides.
    classes : ndarray of str
        ``"ei"`` (donor), ``"ie"`` (acceptor) or ``"n"`` (neither).
    """
    path = path or _default_data_path()
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [row["sequence"].strip() for row in rows], np.array([row["class"] for row in rows])


@dataclass(frozen=True)
class SpliceModel:
    """Position-dependent Markov chains of positive and negative windows.

    Attributes
    ----------
    initial : ndarray of shape (2, 4)
        Distribution of the first letter for negatives (0) and positives (1).
    transition : ndarray of shape (2, length - 1, 4, 4)
        ``transition[c, l, a, b]`` = P(letter ``l + 1`` is ``b`` | letter ``l`` is ``a``, class).
        For ``order=0`` the rows do not depend on ``a`` (per-position frequencies).
    order : int
    """

    initial: np.ndarray
    transition: np.ndarray
    order: int

    @property
    def length(self) -> int:
        """Window length."""
        return self.transition.shape[1] + 1


def fit_splice_model(sequences, is_positive, *, order=1, length=None, pseudocount=1.0):
    """Fit position-dependent Markov chains to DNA windows of each class.

    Parameters
    ----------
    sequences : list of str
        Equal-length windows over A, C, G, T.
    is_positive : array-like of bool of shape (n_sequences,)
    order : {0, 1}, default=1
        0: independent positions (per-position frequencies); 1: first-order chain.
    length : int, optional
        Window length of the model. Shorter than the data: the central part; longer: the data
        window in the middle, flanked by a position-independent first-order chain fitted on
        all windows (a background model).
    pseudocount : float, default=1.0
        Added to every count (Laplace smoothing).

    Returns
    -------
    SpliceModel
    """
    if order not in (0, 1):
        raise ValueError(f"order must be 0 or 1, got {order}")
    codes = encode(sequences).astype(np.int64)
    is_positive = np.asarray(is_positive, dtype=bool)
    data_length = codes.shape[1]
    length = data_length if length is None else int(length)
    if length < 2:
        raise ValueError(f"length must be >= 2, got {length}")
    # background: homogeneous first-order chain over all windows
    pairs = np.zeros((4, 4))
    np.add.at(pairs, (codes[:, :-1].ravel(), codes[:, 1:].ravel()), 1.0)
    background = (pairs + pseudocount) / (pairs + pseudocount).sum(axis=1, keepdims=True)
    background_start = np.bincount(codes.ravel(), minlength=4) + pseudocount
    background_start = background_start / background_start.sum()
    # data position of each model position (-1: flank)
    left = (data_length - length) // 2
    source = np.arange(length) + left
    source[(source < 0) | (source >= data_length)] = -1
    initial = np.empty((2, 4))
    transition = np.empty((2, length - 1, 4, 4))
    for label in (0, 1):
        rows = codes[is_positive == bool(label)]
        if len(rows) == 0:
            raise ValueError("both classes need at least one window to fit the model")
        if source[0] >= 0:
            counts = np.bincount(rows[:, source[0]], minlength=4) + pseudocount
            initial[label] = counts / counts.sum()
        else:
            initial[label] = background_start
        for position in range(length - 1):
            current, following = source[position], source[position + 1]
            if following < 0:
                transition[label, position] = background
                continue
            if order == 0 or current < 0:
                counts = np.bincount(rows[:, following], minlength=4) + pseudocount
                transition[label, position] = counts / counts.sum()
                continue
            counts = np.zeros((4, 4))
            np.add.at(counts, (rows[:, current], rows[:, following]), 1.0)
            counts += pseudocount
            transition[label, position] = counts / counts.sum(axis=1, keepdims=True)
    return SpliceModel(initial=initial, transition=transition, order=order)


def sample_windows(model: SpliceModel, is_positive, rng):
    """Draw windows from a :class:`SpliceModel`.

    Parameters
    ----------
    model : SpliceModel
    is_positive : ndarray of bool of shape (n_samples,)
    rng : numpy.random.Generator

    Returns
    -------
    codes : ndarray of uint8 of shape (n_samples, model.length)
        Letters encoded A=0, C=1, G=2, T=3.
    """
    n = len(is_positive)
    label = np.asarray(is_positive, dtype=np.int64)
    codes = np.empty((n, model.length), dtype=np.uint8)
    uniform = rng.random((n, model.length))
    cumulative = np.cumsum(model.initial[label], axis=1)
    codes[:, 0] = np.minimum((uniform[:, :1] > cumulative).sum(axis=1), 3)
    for position in range(model.length - 1):
        rows = model.transition[label, position, codes[:, position]]
        cumulative = np.cumsum(rows, axis=1)
        draws = (uniform[:, position + 1 : position + 2] > cumulative).sum(axis=1)
        codes[:, position + 1] = np.minimum(draws, 3)
    return codes


def _splice_chunk(params, n_rows, rng):
    model, positive_rate, wd_options = params
    is_positive = rng.random(n_rows) < positive_rate
    codes = sample_windows(model, is_positive, rng)
    X = wd_transform(codes, wd_options)
    y = np.where(is_positive, 1.0, -1.0)
    return {
        "y": y,
        "indptr": X.indptr.astype(np.int64),
        "indices": X.indices,
        "data": None if wd_options.binary else X.data,
    }


def make_splice_like(
    dest,
    n_samples,
    *,
    positive_rate=0.01,
    site="acceptor",
    length=60,
    degree=8,
    hash_bits=0,
    binary=False,
    order=1,
    dtype=np.float32,
    chunk_rows=None,
    random_state=0,
    overwrite=False,
    client=None,
    writer_options=None,
    data_path=None,
):
    """Splice-site-like data: DNA windows from a calibrated model, weighted-degree features.

    A position-dependent Markov chain is fitted to the real windows of
    ``data/statlog_dna.csv`` for the positive class (``site``) and for the rest, separately;
    each row draws its label (positive with probability ``positive_rate``) and then its window
    from the chain of its class. Positives therefore carry the real consensus (AG at the
    acceptor boundary, GT at the donor), negatives the composition of the other windows.

    Parameters
    ----------
    dest : str or path-like
    n_samples : int
    positive_rate : float, default=0.01
        Probability of a positive row (the real human acceptor data has about 0.3%).
    site : {"acceptor", "donor"}, default="acceptor"
        Positive class: ``ie`` (acceptor) or ``ei`` (donor) windows.
    length : int, default=60
        Window length (see :func:`fit_splice_model` for lengths other than 60).
    degree : int, default=8
        WD degree.
    hash_bits : int, default=0
        Hash the WD features into ``2**hash_bits`` columns (0: explicit).
    binary : bool, default=False
        0/1 features without values.
    order : {0, 1}, default=1
        Markov order of the window model.
    dtype : {float32, float64}, default=float32
    chunk_rows, random_state, overwrite, client, writer_options
        As every generator takes them (:mod:`daskpd.generators`).
    data_path : str, optional
        Another copy of the calibration CSV.

    Returns
    -------
    dataset : daskpd.data.Dataset
    """
    n_samples = _check_common(dest, n_samples, chunk_rows, overwrite, positive_rate)
    classes = {"acceptor": "ie", "donor": "ei"}
    if site not in classes:
        raise ValueError(f"site must be 'acceptor' or 'donor', got {site!r}")
    wd_options = WDOptions(degree=int(degree), hash_bits=int(hash_bits or 0), binary=bool(binary))
    sequences, labels = load_statlog_dna(data_path)
    model = fit_splice_model(sequences, labels == classes[site], order=order, length=length)
    n_features = wd_options.n_features(model.length)
    per_row = sum(max(model.length - k + 1, 0) for k in range(1, int(degree) + 1))
    chunk_rows = int(chunk_rows or max(1, CHUNK_NNZ // max(per_row, 1)))
    seeds = np.random.SeedSequence(random_state).spawn(1 + -(-n_samples // chunk_rows))
    return _generate(
        dest, n_samples, chunk_rows, _splice_chunk, (model, float(positive_rate), wd_options),
        seeds, n_features=n_features, binary=wd_options.binary, dtype=dtype, task="binary",
        layout="csr", overwrite=overwrite, client=client, writer_options=writer_options,
    )  # fmt: skip
