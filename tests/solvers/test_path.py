"""The regularization path: certified points, the same choice as cold starts, alpha_max."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.path import alpha_max, regularization_path
from daskpd.problem import Problem
from daskpd.solvers import solve
from tests._synthetic import sparse_problem


def _split(loss, n=600, d=40, seed=3):
    """Training and validation rows of one planted model."""
    X, y = sparse_problem(n=n, d=d, seed=seed, regression=loss == "squared")
    cut = 2 * n // 3
    return (X[:cut], y[:cut]), (X[cut:], y[cut:])


@pytest.mark.parametrize("loss", ["hinge", "logistic", "squared"])
def test_l2_path_every_point_within_its_tolerance(loss):
    train, valid = _split(loss)
    path = regularization_path(train, loss=loss, validation_data=valid, tol=1e-4, max_epochs=1000)
    assert path.alphas.shape == (12,)
    assert path.alphas[0] == pytest.approx(alpha_max(train, loss))
    np.testing.assert_allclose(path.alphas[-1] / path.alphas[0], 1e-4)
    assert np.all(np.diff(path.alphas) < 0)
    assert len(path.results) == 12 and path.converged
    for alpha, result in zip(path.alphas, path.results, strict=True):
        assert result.objective["alpha"] == alpha
        assert 0.0 <= result.gap <= 1e-4
    assert path.scores.shape == (12,) and np.all(np.isfinite(path.scores))
    assert path.scoring == ("r2" if loss == "squared" else "average_precision")
    best = int(np.argmax(path.scores))
    assert path.best_alpha == path.alphas[best] and path.best_result is path.results[best]


@pytest.mark.parametrize(("loss", "regularizer"), [("logistic", "l1"), ("squared", "elasticnet")])
def test_l1_and_elastic_net_paths_are_certified(loss, regularizer):
    train, _ = _split(loss)
    path = regularization_path(
        train, loss=loss, regularizer=regularizer, n_alphas=6, decades=2, solver="batch",
        tol=1e-6, max_epochs=3000, eval_every=1,
    )  # fmt: skip
    assert path.converged and np.all(path.gaps <= 1e-6)
    assert path.scores is None and path.best_alpha is None and path.best_result is None
    # the first point is alpha_max: w = 0; below it the model has nonzero weights
    assert np.abs(path.results[0].w).max() < 1e-12
    assert np.count_nonzero(path.results[-1].w) > 0


def _noisy(loss, noise, n=400, d=120, seed=0):
    """Training and validation halves of a noisy planted model: a validation score with a
    clear peak inside the grid (near-ties would let each point's tolerance decide)."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr")
    X.data = rng.normal(size=X.nnz)
    scores = X @ rng.normal(size=d) + noise * rng.normal(size=n)
    y = scores if loss == "squared" else np.where(scores > 0, 1.0, -1.0)
    return (X[: n // 2], y[: n // 2]), (X[n // 2 :], y[n // 2 :])


@pytest.mark.parametrize(
    ("loss", "noise", "epochs_ratio"),
    [("hinge", 1.5, 0.8), ("logistic", 6.0, 0.9), ("squared", 1.5, 0.6)],
)
def test_warm_start_picks_the_cold_starts_alpha_in_fewer_rounds(loss, noise, epochs_ratio):
    train, valid = _noisy(loss, noise)
    common = dict(loss=loss, validation_data=valid, tol=1e-5, max_epochs=1000, n_alphas=8,
                  decades=3)  # fmt: skip
    warm = regularization_path(train, **common)
    cold = regularization_path(train, warm_start=False, **common)
    np.testing.assert_array_equal(cold.alphas, warm.alphas)
    assert not cold.warm_start and cold.converged and warm.converged
    assert np.all(warm.gaps <= 1e-5) and np.all(cold.gaps <= 1e-5)
    assert warm.best_alpha == cold.best_alpha
    assert 0 < np.flatnonzero(warm.alphas == warm.best_alpha)[0] < 7
    # the start from the previous point (its w for classification, its dual for
    # regression) saves rounds at the smaller alphas; the refinements' rounds counted
    assert warm.epochs.sum() <= epochs_ratio * cold.epochs.sum()
    assert np.all(warm.epochs >= [result.n_epochs for result in warm.results])


@pytest.mark.parametrize(("loss", "noise"), [("hinge", 1.5), ("logistic", 6.0)])
def test_a_near_tie_is_refined_and_chosen_alike_warm_or_cold(loss, noise):
    # three alphas 2% apart around the best of the grid: their scores differ by less than
    # a gap of 1e-3 moves them (for logistic, on these rows, the warm path's and the cold
    # starts' best differ at that gap without refinement)
    train, valid = _noisy(loss, noise)
    top = regularization_path(train, loss=loss, validation_data=valid, tol=1e-5, n_alphas=8,
                              decades=3, max_epochs=1000).best_alpha  # fmt: skip
    common = dict(loss=loss, validation_data=valid, tol=1e-3, max_epochs=1000,
                  alphas=[top * 1.02, top, top / 1.02])  # fmt: skip
    warm = regularization_path(train, **common)
    cold = regularization_path(train, warm_start=False, **common)
    assert warm.best_alpha == cold.best_alpha
    for path in (warm, cold):
        assert path.refined.size >= 2 and path.converged
        best = int(np.flatnonzero(path.alphas == path.best_alpha)[0])
        assert best in path.refined and path.best_result is path.results[best]
        assert path.scores[best] == max(path.scores[k] for k in path.refined)
        # re-solved at least once: a gap 100 times smaller than the path's
        assert np.all(path.gaps[path.refined] <= 1e-5)
    np.testing.assert_allclose(warm.scores[warm.refined], cold.scores[cold.refined], atol=1e-4)
    unrefined = regularization_path(train, refine=0, **common)
    assert unrefined.refined.size == 0 and np.all(unrefined.gaps <= 1e-3)


@pytest.mark.parametrize("loss", ["hinge", "logistic", "squared"])
def test_alpha_max_by_hand_with_row_weights(loss):
    (X, y), _ = _split(loss, n=300)
    class_weight = None if loss == "squared" else {-1: 1.0, 1: 3.0}
    problem = Problem(loss, "l1", 1.0, class_weight=class_weight)
    weights = np.ones(X.shape[0]) if class_weight is None else np.where(y > 0, 3.0, 1.0)
    z0 = weights * problem.loss.gradient(np.zeros(X.shape[0]), y)
    expected = np.abs(X.T @ z0).max() / X.shape[0]
    got = alpha_max((X, y), loss, "l1", class_weight=class_weight)
    assert got == pytest.approx(expected, rel=1e-12)
    assert alpha_max((X, y), loss, "l2", class_weight=class_weight) == pytest.approx(got)
    elastic = alpha_max((X, y), loss, "elasticnet", class_weight=class_weight)
    assert elastic == pytest.approx(got / 0.5)


def test_at_alpha_max_zero_is_the_l1_solution_and_just_below_it_is_not():
    (X, y), _ = _split("logistic", n=300)
    top = alpha_max((X, y), "logistic", "l1")
    zero = np.zeros(X.shape[1])
    # w = 0 is certified optimal at alpha_max: the gap of the dual point it makes is 0
    at = Problem("logistic", "l1", top).evaluate(zero, (X, y))
    assert at.gap <= 1e-12 * at.primal and at.dual_scale == pytest.approx(1.0)
    below = Problem("logistic", "l1", 0.99 * top)
    assert below.evaluate(zero, (X, y)).gap > 1e-6
    fit = solve((X, y), "logistic", "l1", 0.99 * top, "batch", tol=1e-9, max_epochs=3000)
    assert np.count_nonzero(fit.w) > 0 and fit.primal < below.primal(zero, (X, y))
    fit = solve((X, y), "logistic", "l1", top, "batch", tol=1e-9, max_epochs=3000)
    assert np.abs(fit.w).max() < 1e-6


def test_ties_go_to_the_larger_alpha():
    train, valid = _split("hinge", n=300)
    path = regularization_path(
        train, validation_data=valid, alphas=[1e-3, 1e-1, 1e-2], scoring=lambda y, s: 0.5
    )
    np.testing.assert_array_equal(path.alphas, [1e-1, 1e-2, 1e-3])
    assert path.best_alpha == 1e-1 and path.best_result is path.results[0]
    assert path.alpha_max is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alphas": [1e-2, 0.0]}, "alphas must be finite and > 0"),
        ({"alphas": [1e-2, 1e-2]}, "repeated"),
        ({"alphas": [1e-2], "n_alphas": 5}, "do not go with alphas"),
        ({"n_alphas": 0}, "n_alphas must be a positive integer"),
        ({"decades": -1}, "decades must be finite and > 0"),
        ({"scoring": "r2"}, "scoring needs validation_data"),
        ({"regularizer": "zero"}, "does not depend on alpha"),
        ({"regularizer": "group_lasso"}, "pass alphas"),
    ],
)
def test_bad_arguments_are_refused_before_any_run(kwargs, message):
    train, _ = _split("hinge", n=90)
    if kwargs.get("regularizer") == "group_lasso":
        from daskpd.regularizers import GroupLasso

        kwargs["regularizer"] = GroupLasso(groups=np.arange(40) // 4)
    with pytest.raises(ValueError, match=message):
        regularization_path(train, **kwargs)


def test_a_scoring_that_does_not_fit_the_task_is_refused():
    train, valid = _split("hinge", n=90)
    with pytest.raises(ValueError, match="does not fit a classification loss"):
        regularization_path(train, validation_data=valid, scoring="r2")
    with pytest.raises(ValueError, match="scoring must be one of"):
        regularization_path(train, validation_data=valid, scoring="accuracy")


def test_one_cluster_serves_the_whole_path(tmp_path, monkeypatch):
    from distributed import Client, LocalCluster

    import daskpd._cluster
    from daskpd.data import write_dataset

    (X, y), (X_valid, y_valid) = _split("hinge", n=300)
    train = write_dataset(X, y, tmp_path / "train.zarr", rows_per_block=50)
    valid = write_dataset(X_valid, y_valid, tmp_path / "valid.zarr")
    started = []

    @contextlib.contextmanager
    def one_cluster(options=None, *, start=True):
        with (
            LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                         dashboard_address="127.0.0.1:0") as cluster,
            Client(cluster, set_as_default=False) as client,
        ):  # fmt: skip
            started.append(client)
            yield client

    monkeypatch.setattr(daskpd._cluster, "cluster_client", one_cluster)
    path = regularization_path(train, validation_data=valid, n_alphas=3, tol=1e-6)
    assert len(started) == 1
    assert path.converged and np.all(np.isfinite(path.scores))


def test_train_alpha_auto_through_the_cli(tmp_path, capsys):
    import json

    import daskpd
    from daskpd.data import write_dataset
    from tests._cli import run_cli

    (X, y), (X_valid, y_valid) = _noisy("hinge", 1.5)
    write_dataset(X, y, tmp_path / "train.zarr")
    write_dataset(X_valid, y_valid, tmp_path / "valid.zarr")
    base = ("train", tmp_path / "train.zarr", "--in-process", "--no-progress")
    code, out, err = run_cli(
        capsys, *base, "--alpha", "auto", "--validation", tmp_path / "valid.zarr",
        "--test", tmp_path / "valid.zarr", "--out", tmp_path / "model.zarr",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    path = regularization_path((X, y), validation_data=(X_valid, y_valid), tol=1e-4, max_epochs=50)
    assert summary["alpha"] == path.best_alpha
    assert [point["alpha"] for point in summary["path"]] == path.alphas.tolist()
    assert all(point["gap"] <= 1e-4 and point["converged"] for point in summary["path"])
    assert summary["scoring"] == "average_precision"
    assert summary["test_average_precision"] == max(point["score"] for point in summary["path"])
    assert daskpd.load_model(tmp_path / "model.zarr").objective["alpha"] == path.best_alpha
    for extra, message in [
        (("--alpha", "auto"), "--alpha auto needs --validation"),
        (("--validation", tmp_path / "valid.zarr"), "--validation goes with --alpha auto"),
        (("--alpha", "often"), "--alpha must be a number or 'auto'"),
    ]:
        code, out, err = run_cli(capsys, *base, *extra)
        assert code == 2 and message in err and not out
