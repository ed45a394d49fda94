"""Small synthetic sparse problems shared by the row-group solvers' tests (cocoa, tron)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def sparse_problem(n=240, d=30, seed=0, binary=False, regression=False, dtype=np.float32):
    """``(X, y)``: a random CSR matrix of density 0.2 (values uniform in [-1, 1], or ones),
    labels from a noisy planted linear model (+-1, or the scores for regression)."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, random_state=seed, format="csr", dtype=dtype)
    if binary:
        X.data[:] = 1.0
    else:
        X.data = rng.uniform(-1.0, 1.0, X.nnz).astype(dtype)
    scores = X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    if regression:
        return X, scores
    return X, np.where(scores > 0, 1.0, -1.0)
