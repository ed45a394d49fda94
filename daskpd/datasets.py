"""Synthetic data generators, written to the zarr format chunk by chunk.

Every generator cuts its rows into chunks of ``chunk_rows``; each chunk is one Dask task with
its own seed, ``SeedSequence(random_state).spawn(...)`` (child 0 draws the planted model, child
``1 + c`` draws chunk ``c``), and saves its rows as a part on disk; one task then appends the
parts in order (see :mod:`daskpd.io._parts`). Memory is bounded by a chunk, so datasets of
1e9+ nonzeros need no more memory than a chunk, and the same ``random_state`` and
``chunk_rows`` give the same bits whatever the number of workers.

Planted models that do not fit the dataset (coefficients, factors ``U`` and ``V``) are stored
in a zarr group next to it, ``<dest>.planted`` (:func:`planted_path`), and returned.

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
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from daskpd.io import _parts
from daskpd.io.sequences import WDOptions, wd_transform
from daskpd.kernels import features as feature_kernels

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

#: Target stored entries per generated chunk (about 50 MB of CSR in float64).
CHUNK_NNZ = 2**22

_LETTERS = np.frombuffer(b"ACGT", dtype=np.uint8)


class Generated(NamedTuple):
    """A generated dataset and its planted model.

    Attributes
    ----------
    dataset : daskpd.dataset.Dataset
    coef : ndarray of shape (n_features,) or None
        Planted coefficients.
    U : zarr.Array of shape (n_samples, rank) or None
        Left factor (:func:`make_factorized`), on disk.
    V : ndarray of shape (rank, n_features) or None
        Right factor (:func:`make_factorized`).
    """

    dataset: object
    coef: np.ndarray | None = None
    U: object = None
    V: np.ndarray | None = None


def planted_path(dest) -> str:
    """Path of the zarr group that holds the planted model of the dataset at ``dest``."""
    return os.fspath(dest).rstrip(os.sep) + ".planted"


def _default_data_path() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(os.path.dirname(here), "data", "statlog_dna.csv")


def _check_common(dest, n_samples, chunk_rows, overwrite):
    n_samples = int(n_samples)
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    if chunk_rows is not None and int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    for path in (os.fspath(dest),):
        if os.path.lexists(path) and not overwrite:
            raise FileExistsError(
                f"destination {path} exists; pass overwrite=True (--overwrite) to replace it"
            )
    return n_samples


def _chunk_bounds(n_samples, chunk_rows):
    n_chunks = -(-n_samples // chunk_rows)
    return [(c * chunk_rows, min(n_samples, (c + 1) * chunk_rows)) for c in range(n_chunks)]


def _generate(dest, n_samples, chunk_rows, chunk_function, params, seeds, *, n_features, binary,
              dtype, task, layout, overwrite, client, writer_options, planted_u=None):  # fmt: skip
    """Run ``chunk_function`` per chunk as Dask tasks, then assemble the parts at ``dest``."""
    import dask

    from daskpd.dataset import open_dataset

    bounds = _chunk_bounds(n_samples, chunk_rows)
    parts_dir = _parts.new_parts_dir(dest)
    completed = False
    # One graph node for the model every chunk reads: passed inline, a cluster ships a
    # copy with each task (the text-like vocabulary is 25 MB, 120 chunks at 5e8 nonzeros).
    shared = dask.delayed(params, pure=True, traverse=False)
    try:
        tasks = [
            dask.delayed(_run_chunk, pure=False)(
                chunk_function, shared, start, stop, seeds[1 + c], parts_dir, c, planted_u
            )
            for c, (start, stop) in enumerate(bounds)
        ]
        infos = _parts.run_tasks(tasks, client)
        options = dict(writer_options or {})
        if layout == "dense":
            options["layout"] = "dense"
        _parts.run_one(
            _parts.assemble,
            infos,
            os.fspath(dest),
            n_features=n_features,
            dtype=dtype,
            binary=binary,
            task=task,
            overwrite=overwrite,
            writer_options=options,
            client=client,
        )
        completed = True
    finally:
        _parts.remove_parts_dir(parts_dir)
        if not completed:
            # a failed generation leaves neither the dataset nor its planted model behind
            _parts.remove_parts_dir(planted_path(dest))
    return open_dataset(dest)


def _run_chunk(chunk_function, params, start, stop, seed, parts_dir, chunk_id, planted_u):
    """Dask task: draw one chunk of rows and save it as a part."""
    rng = np.random.default_rng(seed)
    result = chunk_function(params, stop - start, rng)
    name = f"c{chunk_id:09d}"
    if "U" in result and planted_u is not None:
        import zarr

        # chunk-aligned region of a preallocated array: tasks never write the same zarr chunk
        zarr.open_array(planted_u, mode="r+")[start:stop] = result["U"]
    if "dense" in result:
        return _parts.save_part(parts_dir, name, result["y"], dense=result["dense"])
    return _parts.save_part(
        parts_dir,
        name,
        result["y"],
        indptr=result["indptr"],
        indices=result["indices"],
        data=result.get("data"),
    )


def _write_planted(dest, overwrite, arrays, attrs):
    """Write the planted-model group; return its path."""
    import shutil

    import zarr

    path = planted_path(dest)
    if os.path.lexists(path):
        if not overwrite:
            raise FileExistsError(f"{path} exists; pass overwrite=True (--overwrite) to replace it")
        shutil.rmtree(path)
    group = zarr.open_group(path, mode="w-", zarr_format=3)
    group.attrs.update(attrs)
    for name, value in arrays.items():
        group.create_array(name, data=value)
    return path


# --------------------------------------------------------------------------------------------
# splice-site-like DNA windows


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
    import csv

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
    from daskpd.io.sequences import encode

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
    chunk_rows : int, optional
        Rows per chunk (task); default about 4M nonzeros per chunk.
    random_state : int, default=0
    overwrite : bool, default=False
    client : distributed.Client, optional
    writer_options : dict, optional
        Extra keyword arguments of :class:`daskpd.dataset.DatasetWriter`.
    data_path : str, optional
        Another copy of the calibration CSV.

    Returns
    -------
    dataset : daskpd.dataset.Dataset
    """
    n_samples = _check_common(dest, n_samples, chunk_rows, overwrite)
    if not 0.0 < float(positive_rate) < 1.0:
        raise ValueError(f"positive_rate must be in (0, 1), got {positive_rate}")
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


# --------------------------------------------------------------------------------------------
# planted linear models


def _planted_coef(rng, n_features, n_informative):
    coef = np.zeros(n_features)
    if n_informative is None or n_informative >= n_features:
        coef[:] = rng.standard_normal(n_features)
    else:
        support = np.sort(rng.choice(n_features, size=int(n_informative), replace=False))
        coef[support] = rng.standard_normal(len(support))
    return coef


def _linear_chunk(params, n_rows, rng):
    coef, density, binary_features, noise, flip_y, kind, dtype = params
    n_features = len(coef)
    if density >= 1.0:
        dense = rng.standard_normal((n_rows, n_features)).astype(dtype)
        margin = dense.astype(np.float64) @ coef
        result = {"dense": dense}
    else:
        counts = rng.binomial(n_features, density, size=n_rows).astype(np.int64)
        indptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        drawn = rng.integers(0, n_features, size=int(indptr[-1]), dtype=np.int64)
        indptr, indices = feature_kernels.canonical_rows(indptr, drawn)
        if binary_features:
            data = None
            values = np.ones(len(indices))
        else:
            data = rng.standard_normal(len(indices)).astype(dtype)
            values = data.astype(np.float64)
        row_of = np.repeat(np.arange(n_rows), np.diff(indptr))
        margin = np.bincount(row_of, weights=values * coef[indices], minlength=n_rows)
        result = {"indptr": indptr, "indices": indices, "data": data}
    if noise:
        margin = margin + noise * rng.standard_normal(n_rows)
    if kind == "classification":
        y = np.where(margin >= 0.0, 1.0, -1.0)
        if flip_y:
            flips = rng.random(n_rows) < flip_y
            y[flips] = -y[flips]
    else:
        y = margin
    result["y"] = y
    return result


def _make_linear(kind, dest, n_samples, n_features, *, density, n_informative, noise, flip_y,
                 binary_features, dtype, chunk_rows, random_state, overwrite, client,
                 writer_options):  # fmt: skip
    n_samples = _check_common(dest, n_samples, chunk_rows, overwrite)
    n_features = int(n_features)
    if n_features < 1:
        raise ValueError(f"n_features must be >= 1, got {n_features}")
    density = float(density)
    if not 0.0 < density <= 1.0:
        raise ValueError(f"density must be in (0, 1], got {density}")
    if n_informative is not None and int(n_informative) < 1:
        raise ValueError(f"n_informative must be >= 1, got {n_informative}")
    if noise < 0 or not 0.0 <= flip_y < 1.0:
        raise ValueError(f"need noise >= 0 and 0 <= flip_y < 1, got {noise}, {flip_y}")
    if binary_features and density >= 1.0:
        raise ValueError("binary_features needs density < 1 (sparse rows)")
    dtype = np.dtype(dtype)
    per_row = max(1.0, density * n_features)
    chunk_rows = int(chunk_rows or max(1, int(CHUNK_NNZ // per_row)))
    seeds = np.random.SeedSequence(random_state).spawn(1 + -(-n_samples // chunk_rows))
    coef = _planted_coef(np.random.default_rng(seeds[0]), n_features, n_informative)
    _write_planted(dest, overwrite, {"coef": coef}, {"generator": f"make_{kind}"})
    params = (coef, density, bool(binary_features), float(noise), float(flip_y), kind, dtype)
    dataset = _generate(
        dest, n_samples, chunk_rows, _linear_chunk, params, seeds, n_features=n_features,
        binary=bool(binary_features), dtype=dtype,
        task="binary" if kind == "classification" else "regression",
        layout="dense" if density >= 1.0 else "csr", overwrite=overwrite, client=client,
        writer_options=writer_options,
    )  # fmt: skip
    return Generated(dataset=dataset, coef=coef)


def make_classification(
    dest,
    n_samples,
    n_features,
    *,
    density=0.01,
    n_informative=None,
    noise=0.0,
    flip_y=0.0,
    binary_features=False,
    dtype=np.float64,
    chunk_rows=None,
    random_state=0,
    overwrite=False,
    client=None,
    writer_options=None,
):
    """Binary classification with a planted linear model.

    Rows have ``Binomial(n_features, density)`` column ids drawn uniformly (repeats merged)
    with standard normal values (or 1 with ``binary_features``); ``density=1`` gives dense
    Gaussian rows. ``y = sign(x . coef + noise * N(0, 1))`` in {-1, +1}, then a fraction
    ``flip_y`` of labels is flipped.

    Parameters
    ----------
    dest : str or path-like
    n_samples, n_features : int
    density : float, default=0.01
        Expected fraction of nonzeros per row; 1 means dense layout.
    n_informative : int, optional
        Nonzeros of the planted ``coef`` (default: all, a dense model).
    noise : float, default=0.0
    flip_y : float, default=0.0
    binary_features : bool, default=False
    dtype : {float32, float64}, default=float64
    chunk_rows : int, optional
        Rows per chunk (task); default about 4M nonzeros per chunk.
    random_state : int, default=0
    overwrite : bool, default=False
    client : distributed.Client, optional
    writer_options : dict, optional

    Returns
    -------
    Generated
        ``dataset`` and ``coef`` (also stored in :func:`planted_path`).
    """
    return _make_linear(
        "classification", dest, n_samples, n_features, density=density,
        n_informative=n_informative, noise=noise, flip_y=flip_y,
        binary_features=binary_features, dtype=dtype, chunk_rows=chunk_rows,
        random_state=random_state, overwrite=overwrite, client=client,
        writer_options=writer_options,
    )  # fmt: skip


def make_regression(
    dest,
    n_samples,
    n_features,
    *,
    density=0.01,
    n_informative=None,
    noise=0.1,
    binary_features=False,
    dtype=np.float64,
    chunk_rows=None,
    random_state=0,
    overwrite=False,
    client=None,
    writer_options=None,
):
    """Regression with a planted linear model: ``y = x . coef + noise * N(0, 1)``.

    Rows are drawn as in :func:`make_classification`.

    Parameters
    ----------
    dest : str or path-like
    n_samples, n_features : int
    density : float, default=0.01
    n_informative : int, optional
    noise : float, default=0.1
    binary_features : bool, default=False
    dtype : {float32, float64}, default=float64
    chunk_rows : int, optional
    random_state : int, default=0
    overwrite : bool, default=False
    client : distributed.Client, optional
    writer_options : dict, optional

    Returns
    -------
    Generated
        ``dataset`` and ``coef`` (also stored in :func:`planted_path`).
    """
    return _make_linear(
        "regression", dest, n_samples, n_features, density=density,
        n_informative=n_informative, noise=noise, flip_y=0.0,
        binary_features=binary_features, dtype=dtype, chunk_rows=chunk_rows,
        random_state=random_state, overwrite=overwrite, client=client,
        writer_options=writer_options,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# factorized data (DSPDC) and the SPDC ridge data


def _factorized_chunk(params, n_rows, rng):
    V, coef, noise, kind, dtype = params
    U = rng.standard_normal((n_rows, V.shape[0]))
    X = (U @ V).astype(dtype)
    margin = X.astype(np.float64) @ coef
    if noise:
        margin = margin + noise * rng.standard_normal(n_rows)
    y = np.where(margin >= 0.0, 1.0, -1.0) if kind == "classification" else margin
    return {"dense": X, "y": y, "U": U}


def make_factorized(
    dest,
    n_samples,
    n_features,
    rank,
    *,
    task="regression",
    noise=0.1,
    n_informative=None,
    dtype=np.float64,
    chunk_rows=None,
    random_state=0,
    overwrite=False,
    client=None,
    writer_options=None,
):
    """Low-rank dense data ``X = U V`` with a planted linear model (for DSPDC).

    ``U`` has i.i.d. N(0, 1) entries, ``V`` i.i.d. N(0, 1/rank), so entries of ``X`` have unit
    variance. ``y = X coef + noise * N(0, 1)`` (``task="regression"``) or its sign.

    Parameters
    ----------
    dest : str or path-like
    n_samples, n_features, rank : int
    task : {"regression", "classification"}, default="regression"
    noise : float, default=0.1
    n_informative : int, optional
        Nonzeros of the planted ``coef`` (default: all).
    dtype : {float32, float64}, default=float64
    chunk_rows : int, optional
    random_state : int, default=0
    overwrite : bool, default=False
    client : distributed.Client, optional
    writer_options : dict, optional

    Returns
    -------
    Generated
        ``dataset``, ``coef``, ``U`` (a zarr array in :func:`planted_path`, read lazily) and
        ``V``.
    """
    import zarr

    n_samples = _check_common(dest, n_samples, chunk_rows, overwrite)
    n_features, rank = int(n_features), int(rank)
    if n_features < 1 or rank < 1:
        raise ValueError(f"n_features and rank must be >= 1, got {n_features}, {rank}")
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    dtype = np.dtype(dtype)
    chunk_rows = int(chunk_rows or max(1, CHUNK_NNZ // n_features))
    seeds = np.random.SeedSequence(random_state).spawn(1 + -(-n_samples // chunk_rows))
    model_rng = np.random.default_rng(seeds[0])
    V = model_rng.standard_normal((rank, n_features)) / np.sqrt(rank)
    coef = _planted_coef(model_rng, n_features, n_informative)
    path = _write_planted(
        dest, overwrite, {"coef": coef, "V": V}, {"generator": "make_factorized", "rank": rank}
    )
    group = zarr.open_group(path, mode="r+")
    group.create_array("U", shape=(n_samples, rank), chunks=(chunk_rows, rank), dtype="float64")
    dataset = _generate(
        dest, n_samples, chunk_rows, _factorized_chunk, (V, coef, float(noise), task, dtype),
        seeds, n_features=n_features, binary=False, dtype=dtype,
        task="binary" if task == "classification" else "regression", layout="dense",
        overwrite=overwrite, client=client, writer_options=writer_options,
        planted_u=os.path.join(path, "U"),
    )  # fmt: skip
    U = zarr.open_array(os.path.join(path, "U"), mode="r")
    return Generated(dataset=dataset, coef=coef, U=U, V=V)


def _spdc_chunk(params, n_rows, rng):
    n_features, noise, dtype = params
    scale = 1.0 / np.arange(1, n_features + 1)
    X = rng.standard_normal((n_rows, n_features)) * scale
    y = X.sum(axis=1) + noise * rng.standard_normal(n_rows)
    return {"dense": X.astype(dtype), "y": y}


def make_spdc_ridge(
    dest,
    n_samples=500,
    n_features=500,
    *,
    noise=1.0,
    dtype=np.float64,
    layout="dense",
    chunk_rows=None,
    random_state=0,
    overwrite=False,
    client=None,
    writer_options=None,
):
    """Synthetic ridge data of the SPDC paper (Zhang & Xiao 2015, Section 7.1).

    ``x_i ~ N(0, diag(j**-2))`` (``x_ij = z_ij / j``, ``j = 1..n_features``), planted
    ``coef`` = all ones, ``y_i = x_i . coef + noise * N(0, 1)``; the paper uses
    ``n = d = 500`` and unit noise.

    Parameters
    ----------
    dest : str or path-like
    n_samples, n_features : int, default=500
    noise : float, default=1.0
    dtype : {float32, float64}, default=float64
    layout : {"dense", "csr"}, default="dense"
        Storage of the rows. Every entry is nonzero either way; ``"csr"`` is for the solvers
        that read sparse tiles (DSO) and for comparing them on the same bytes.
    chunk_rows : int, optional
    random_state : int, default=0
    overwrite : bool, default=False
    client : distributed.Client, optional
    writer_options : dict, optional

    Returns
    -------
    Generated
        ``dataset`` and ``coef`` (ones).
    """
    n_samples = _check_common(dest, n_samples, chunk_rows, overwrite)
    n_features = int(n_features)
    if n_features < 1:
        raise ValueError(f"n_features must be >= 1, got {n_features}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    if layout not in ("dense", "csr"):
        raise ValueError(f"layout must be 'dense' or 'csr', got {layout!r}")
    chunk_rows = int(chunk_rows or max(1, CHUNK_NNZ // n_features))
    seeds = np.random.SeedSequence(random_state).spawn(1 + -(-n_samples // chunk_rows))
    coef = np.ones(n_features)
    _write_planted(dest, overwrite, {"coef": coef}, {"generator": "make_spdc_ridge"})
    dataset = _generate(
        dest, n_samples, chunk_rows, _spdc_chunk, (n_features, float(noise), np.dtype(dtype)),
        seeds, n_features=n_features, binary=False, dtype=np.dtype(dtype), task="regression",
        layout=layout, overwrite=overwrite, client=client, writer_options=writer_options,
    )  # fmt: skip
    return Generated(dataset=dataset, coef=coef)


# --------------------------------------------------------------------------------------------
# text-like bag-of-words documents


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
    chunk_rows : int, optional
        Rows per chunk (task); default about 4M nonzeros per chunk.
    random_state : int, default=0
    model_state : int, default=0
    overwrite : bool, default=False
    client : distributed.Client, optional
    writer_options : dict, optional

    Returns
    -------
    dataset : daskpd.dataset.Dataset
    """
    n_samples = _check_common(dest, n_samples, chunk_rows, overwrite)
    if not 0.0 < float(positive_rate) < 1.0:
        raise ValueError(f"positive_rate must be in (0, 1), got {positive_rate}")
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
