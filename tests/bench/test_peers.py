"""The translation of our ``alpha`` into each peer's parameter gives the same minimizer."""

import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.bench import peers


def _problem(n=300, d=20, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr")
    w_true = rng.normal(size=d)
    y = np.where(X @ w_true + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _logistic_gradient(X, y, w, alpha):
    margins = y * (X @ w)
    return -(X.T @ (y / (1.0 + np.exp(margins)))) / X.shape[0] + alpha * w


def _logistic_objective(X, y, w, alpha):
    return np.mean(np.logaddexp(0.0, -y * (X @ w))) + 0.5 * alpha * w @ w


ALPHA = 1e-2
#: VW's hash table for these 20-feature problems: BFGS sweeps the whole table every pass, and
#: the default 2^24 slots made one fit take minutes (no two of the 20 names collide in 2^16)
VW_BITS = 16


@pytest.mark.parametrize(
    "fit",
    [
        lambda X, y: peers.fit_liblinear(X, y, ALPHA, loss="logistic", tol=1e-10),
        lambda X, y: peers.fit_saga(X, y, ALPHA, tol=1e-10, max_iter=100_000),
        lambda X, y: peers.fit_dask_ml(X, y, ALPHA, solver="lbfgs", tol=1e-12, max_iter=500),
        lambda X, y: peers.fit_vw(X, y, ALPHA, batch=True, passes=30, bits=VW_BITS),
        lambda X, y: peers.fit_liblinear_multicore(X, y, ALPHA, loss="logistic", tol=1e-10),
        lambda X, y: peers.fit_snapml(X, y, ALPHA, loss="logistic", tol=1e-12, max_iter=10**5),
        lambda X, y: peers.fit_snapml(
            X, y, ALPHA, loss="logistic", tol=1e-12, max_iter=10**5, dual=False
        ),
    ],
    ids=["liblinear", "saga", "dask-ml", "vw-bfgs", "liblinear-multicore", "snapml",
         "snapml-primal"],  # fmt: skip
)
def test_peer_solves_our_logistic_objective(fit):
    X, y = _problem()
    result = fit(X, y)
    gradient = _logistic_gradient(X, y, result.coef, ALPHA)
    # The stationarity of OUR objective at the peer's answer proves the mapping: a wrong
    # factor of n in C or l2 moves the minimizer far away (checked below).
    # VW keeps float32 weights, hence its looser floor; a wrong mapping gives > 1e-1.
    assert np.linalg.norm(gradient) < (1e-4 if result.name == "vw" else 1e-5)
    assert result.seconds > 0


@pytest.mark.parametrize("name", ["liblinear-multicore", "snapml"])
def test_multicore_peers_solve_our_svm(name):
    X, y = _problem()
    reference = peers.fit_liblinear(X, y, ALPHA, loss="hinge", tol=1e-10).coef
    if name == "snapml":
        result = peers.fit_snapml(X, y, ALPHA, loss="hinge", tol=1e-12, max_iter=10**5)
    else:
        result = peers.fit_liblinear_multicore(X, y, ALPHA, loss="hinge", tol=1e-10, threads=2)

    def primal(w):
        return np.mean(np.maximum(0.0, 1.0 - y * (X @ w))) + 0.5 * ALPHA * w @ w

    # the same optimum: equal objective values (the hinge optimum need not be unique in w)
    assert primal(result.coef) == pytest.approx(primal(reference), rel=1e-5)
    assert result.seconds > 0
    # Snap ML's library flushes subnormals to zero in the process that loads it: not here
    tiny = np.float64(np.finfo(np.float64).tiny)
    assert tiny / np.float64(4.0) > 0.0


def test_multicore_liblinear_reports_its_conversion_apart():
    X, y = _problem()
    convert = []
    peers.fit_liblinear_multicore(X, y, ALPHA, loss="hinge", convert_seconds=convert)
    assert len(convert) == 1 and convert[0] > 0
    with pytest.raises(ValueError, match="loss must be 'hinge' or 'logistic'"):
        peers.fit_liblinear_multicore(X, y, ALPHA, loss="squared")
    with pytest.raises(ValueError, match="threads must be >= 1"):
        peers.fit_liblinear_multicore(X, y, ALPHA, threads=0)


def test_wrong_mapping_would_be_detected():
    X, y = _problem()
    wrong = peers.fit_liblinear(X, y, ALPHA * X.shape[0], loss="logistic", tol=1e-10)
    assert np.linalg.norm(_logistic_gradient(X, y, wrong.coef, ALPHA)) > 1e-2


def test_liblinear_hinge_is_our_svm_optimum():
    X, y = _problem()
    result = peers.fit_liblinear(X, y, ALPHA, loss="hinge", tol=1e-10)
    w = result.coef

    def primal(v):
        return np.mean(np.maximum(0.0, 1.0 - y * (X @ v))) + 0.5 * ALPHA * v @ v

    # hinge is not differentiable: test optimality by the objective against perturbations
    rng = np.random.default_rng(1)
    for _ in range(20):
        direction = rng.normal(size=w.shape)
        assert primal(w) <= primal(w + 1e-3 * direction) + 1e-9


def test_sgd_alpha_has_our_meaning():
    X, y = _problem()
    exact = peers.fit_liblinear(X, y, ALPHA, loss="logistic", tol=1e-10).coef
    sgd = peers.fit_sgd(X, y, ALPHA, loss="logistic", max_iter=2000, tol=None).coef
    p_exact = _logistic_objective(X, y, exact, ALPHA)
    assert _logistic_objective(X, y, sgd, ALPHA) <= p_exact * (1 + 2e-3)
    # with alpha off by the factor n that C carries, SGD lands elsewhere
    far = peers.fit_sgd(X, y, ALPHA * X.shape[0], loss="logistic", max_iter=200, tol=None).coef
    assert _logistic_objective(X, y, far, ALPHA) > p_exact * 1.05


def test_online_vw_scores_held_out_data():
    X, y = _problem()
    result = peers.fit_vw(X, y, 1e-4, batch=False, passes=5, X_test=X[:50])
    assert result.coef is None
    assert result.test_scores.shape == (50,)
    # VW's own predictor reproduces the training labels far better than chance
    agreement = np.mean(np.sign(result.test_scores) == y[:50])
    assert agreement > 0.8


@pytest.mark.parametrize("alpha", [0.0, -1.0])
def test_alpha_must_be_positive(alpha):
    with pytest.raises(ValueError, match="alpha"):
        peers.alpha_to_c(alpha, 10)


def _regression(n=300, d=20, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr")
    X.data = rng.normal(size=X.nnz)
    y = X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    return X, y


def _ridge_optimum(X, y, alpha):
    """Closed form of our ridge objective (1/n) sum (x_i.w - y_i)^2 / 2 + alpha ||w||^2 / 2."""
    dense = X.toarray()
    n, d = dense.shape
    return np.linalg.solve(dense.T @ dense / n + alpha * np.eye(d), dense.T @ y / n)


@pytest.mark.parametrize(
    ("fit", "atol"),
    [
        (lambda X, y: peers.fit_liblinear(X, y, ALPHA, loss="squared", tol=1e-12), 1e-6),
        (
            lambda X, y: peers.fit_saga(X, y, ALPHA, loss="squared", tol=1e-12, max_iter=100_000),
            1e-6,
        ),
        # SGD's decaying steps end near the optimum, not on it
        (lambda X, y: peers.fit_sgd(X, y, ALPHA, loss="squared", max_iter=3000), 2e-3),
        (
            lambda X, y: peers.fit_dask_ml(
                X, y, ALPHA, loss="squared", solver="lbfgs", tol=1e-12, max_iter=500
            ),
            1e-4,
        ),
        # VW's BFGS stops at a 1e-3 relative loss change unless told otherwise
        (
            lambda X, y: peers.fit_vw(
                X,
                y,
                ALPHA,
                loss="squared",
                batch=True,
                passes=100,
                bits=VW_BITS,
                extra="--termination 0",
            ),
            1e-5,
        ),
    ],
    ids=["liblinear-svr", "ridge-saga", "sgd-regressor", "dask-ml", "vw-bfgs"],
)
def test_peer_solves_our_ridge_objective(fit, atol):
    X, y = _regression()
    exact = _ridge_optimum(X, y, ALPHA)
    result = fit(X, y)
    np.testing.assert_allclose(result.coef, exact, atol=atol)
    # the factor 2 between the peers' squared loss and ours is what the mapping carries:
    # without it the answer moves by far more than the tolerance
    assert np.max(np.abs(_ridge_optimum(X, y, 2 * ALPHA) - exact)) > 20 * atol


def test_regression_mappings():
    assert peers.alpha_to_c(1e-3, 100, loss="squared") == pytest.approx(1 / (2e-3 * 100))
    assert peers.alpha_to_c(1e-3, 100) == pytest.approx(1 / (1e-3 * 100))
    assert peers.alpha_to_ridge_alpha(1e-3, 100) == pytest.approx(0.1)
    assert peers.alpha_to_vw_l2(1e-3, 100, batch=True, loss="squared") == pytest.approx(0.2)
    assert peers.alpha_to_vw_l2(1e-3, 100, batch=False, loss="squared") == pytest.approx(1e-3)


def test_peer_regressors_refuse_non_finite_targets():
    X, y = _regression()
    y[4] = np.nan
    with pytest.raises(ValueError, match="finite targets"):
        peers.fit_liblinear(X, y, ALPHA, loss="squared")


@pytest.mark.parametrize(
    "fit",
    [
        lambda X, y, seed: peers.fit_liblinear(
            X, y, ALPHA, tol=1e-1, max_iter=3, random_state=seed
        ),
        lambda X, y, seed: peers.fit_saga(X, y, ALPHA, tol=1e-1, max_iter=2, random_state=seed),
    ],
    ids=["liblinear", "saga"],
)
def test_randomized_peers_repeat_with_their_seed(fit):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    X, y = _problem()
    with warnings.catch_warnings():
        # stopped after a few passes on purpose: there, the visiting order shows
        warnings.simplefilter("ignore", ConvergenceWarning)
        first, again, other = fit(X, y, 0), fit(X, y, 0), fit(X, y, 1)
    assert np.array_equal(first.coef, again.coef)
    assert not np.array_equal(first.coef, other.coef)
