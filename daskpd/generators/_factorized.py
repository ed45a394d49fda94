"""Factorized data (DSPDC) and the SPDC ridge data: dense rows with a planted linear model."""

from __future__ import annotations

import os

import numpy as np
import zarr

from daskpd.generators._chunks import (
    CHUNK_NNZ,
    Generated,
    _check_common,
    _generate,
    _planted_coef,
    _write_planted,
)


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
    chunk_rows, random_state, overwrite, client, writer_options
        As every generator takes them (:mod:`daskpd.generators`).

    Returns
    -------
    Generated
        ``dataset``, ``coef``, ``U`` (a zarr array in :func:`planted_path`, read lazily) and
        ``V``.
    """
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
    chunk_rows, random_state, overwrite, client, writer_options
        As every generator takes them (:mod:`daskpd.generators`).

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
