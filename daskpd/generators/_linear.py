"""Planted linear models: classification and regression rows, sparse or dense."""

from __future__ import annotations

import numpy as np

from daskpd.generators._chunks import (
    CHUNK_NNZ,
    Generated,
    _check_common,
    _generate,
    _planted_coef,
    _write_planted,
)
from daskpd.kernels import features as feature_kernels


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
    chunk_rows, random_state, overwrite, client, writer_options
        As every generator takes them (:mod:`daskpd.generators`).

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
    chunk_rows, random_state, overwrite, client, writer_options
        As every generator takes them (:mod:`daskpd.generators`).

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
