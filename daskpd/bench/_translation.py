"""Our ``alpha`` in each peer's terms (the tables of :mod:`daskpd.bench.peers`), and the
parameter entries the peers' docstrings share."""

from __future__ import annotations

# The parameter entries of the peers' docstrings: sparse data with -1/+1 labels, any data
# with labels or (squared loss) real targets, or alpha and n_samples of a translation.
_DATA_DOCS = {
    "alpha": """alpha : float
    Our regularization strength (> 0).
n_samples : int
    Number of training examples.""",
    "labels": """X : sparse matrix of shape (n_samples, n_features)
y : ndarray of shape (n_samples,)
    Labels in {-1, +1}.
alpha : float
    Our regularization strength.""",
    "targets": """X : {ndarray, sparse matrix} of shape (n_samples, n_features)
y : ndarray of shape (n_samples,)
    Labels in {-1, +1}; real targets for ``loss="squared"``.
alpha : float
    Our regularization strength.""",
}


def _data_doc(kind):
    """Put the ``kind`` entries of :data:`_DATA_DOCS` at the ``{data}`` line of a peer's
    docstring (the one place they are written)."""

    def decorate(function):
        entries = _DATA_DOCS[kind].replace("\n", "\n    ")
        function.__doc__ = function.__doc__.replace("{data}", entries)
        return function

    return decorate


@_data_doc("alpha")
def alpha_to_c(alpha: float, n_samples: int, *, loss: str = "hinge") -> float:
    """Return the ``C`` of liblinear / scikit-learn / dask-ml equal to our ``alpha``.

    Parameters
    ----------
    {data}
    loss : str, default="hinge"
        Our loss. ``"squared"``: the peers' squared loss has no half, so ``C`` is halved.

    Returns
    -------
    C : float
    """
    _check_alpha(alpha)
    return 1.0 / (_loss_factor(loss) * alpha * n_samples)


@_data_doc("alpha")
def alpha_to_ridge_alpha(alpha: float, n_samples: int) -> float:
    """Return scikit-learn ``Ridge``'s ``alpha`` equal to our ``alpha`` (squared loss + L2).

    Parameters
    ----------
    {data}

    Returns
    -------
    alpha_ridge : float
    """
    _check_alpha(alpha)
    return alpha * n_samples


def _loss_factor(loss):
    """The peers' loss over ours: 2 for the squared loss (no half), 1 otherwise."""
    return 2.0 if loss == "squared" else 1.0


@_data_doc("alpha")
def alpha_to_vw_l2(alpha: float, n_samples: int, *, batch: bool, loss: str = "logistic") -> float:
    """Return Vowpal Wabbit's ``--l2`` equal to our ``alpha`` for the L2 penalty.

    Parameters
    ----------
    {data}
    batch : bool
        ``True`` for ``--bfgs`` (a summed objective), ``False`` for online SGD (the
        penalty is applied per example).
    loss : str, default="logistic"
        Our loss; VW's squared loss has no half, which doubles the batch ``--l2``.

    Returns
    -------
    l2 : float
    """
    _check_alpha(alpha)
    return _loss_factor(loss) * alpha * n_samples if batch else alpha


def _check_alpha(alpha):
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
