"""Generators: determinism, planted models, calibration of the splice-site-like data."""

from __future__ import annotations

import json

import dask
import numpy as np
import pytest
import zarr

from daskpd import generators
from daskpd.cli import main as cli_main
from daskpd.io.sequences import encode


def _all_rows(dataset):
    X, y = dataset.read_rows(0, dataset.n_samples)
    return (X.toarray() if hasattr(X, "toarray") else np.asarray(X)), y


def test_same_seed_same_bits_whatever_the_scheduler(tmp_path, local_cluster):
    kwargs = {"density": 0.05, "chunk_rows": 130, "random_state": 7}
    first = generators.make_classification(tmp_path / "a", 500, 200, **kwargs)
    with dask.config.set(scheduler="sync"):
        second = generators.make_classification(tmp_path / "b", 500, 200, **kwargs)
    third = generators.make_classification(tmp_path / "c", 500, 200, client=local_cluster, **kwargs)
    other = generators.make_classification(
        tmp_path / "d", 500, 200, **{**kwargs, "random_state": 8}
    )
    X1, y1 = _all_rows(first.dataset)
    for generated in (second, third):
        X, y = _all_rows(generated.dataset)
        np.testing.assert_array_equal(X, X1)
        np.testing.assert_array_equal(y, y1)
        np.testing.assert_array_equal(generated.coef, first.coef)
    assert not np.array_equal(_all_rows(other.dataset)[0], X1)


def test_splice_like_deterministic(tmp_path):
    kwargs = {"degree": 3, "chunk_rows": 300, "random_state": 3, "positive_rate": 0.05}
    a = generators.make_splice_like(tmp_path / "a", 1000, **kwargs)
    b = generators.make_splice_like(tmp_path / "b", 1000, **kwargs)
    Xa, ya = a.read_rows(0, 1000)
    Xb, yb = b.read_rows(0, 1000)
    assert (Xa != Xb).nnz == 0
    np.testing.assert_array_equal(ya, yb)


@pytest.mark.parametrize("positive_rate", [0.01, 0.003])
def test_splice_like_positive_rate(tmp_path, positive_rate):
    n = 30_000
    dataset = generators.make_splice_like(
        tmp_path / "s", n, positive_rate=positive_rate, degree=2, chunk_rows=10_000
    )
    positives = dataset.label_counts["1"]
    sigma = np.sqrt(n * positive_rate * (1 - positive_rate))
    assert abs(positives - n * positive_rate) < 4 * sigma
    assert dataset.task == "binary" and dataset.shape == (n, 4 * 60 + 16 * 59)
    X, _ = dataset.read_rows(0, 100)
    np.testing.assert_allclose(np.asarray(X.multiply(X).sum(axis=1)).ravel(), 1.0, rtol=1e-6)


@pytest.mark.parametrize("site,label,dimer,position", [("acceptor", "ie", "AG", 28),
                                                        ("donor", "ei", "GT", 30)])  # fmt: skip
def test_splice_model_is_calibrated_on_the_real_windows(site, label, dimer, position):
    sequences, classes = generators.load_statlog_dna()
    assert len(sequences) == 3186 and (classes == "ie").sum() == 765
    is_positive = classes == label
    model = generators.fit_splice_model(sequences, is_positive, order=1)
    rng = np.random.default_rng(0)
    n = 20_000
    for positive in (True, False):
        real = encode([s for s, p in zip(sequences, is_positive, strict=True) if p == positive])
        drawn = generators.sample_windows(model, np.full(n, positive), rng)
        # per-position letter frequencies agree
        for letter in range(4):
            gap = np.abs((real == letter).mean(axis=0) - (drawn == letter).mean(axis=0)).max()
            assert gap < 0.06
        # the consensus dimer at the boundary keeps its real frequency
        codes = encode([dimer])[0]
        real_rate = np.mean((real[:, position] == codes[0]) & (real[:, position + 1] == codes[1]))
        drawn_rate = np.mean(
            (drawn[:, position] == codes[0]) & (drawn[:, position + 1] == codes[1])
        )
        assert abs(real_rate - drawn_rate) < 0.03
        if positive:
            assert drawn_rate > 0.9
    del site


def test_splice_model_other_lengths():
    sequences, classes = generators.load_statlog_dna()
    short = generators.fit_splice_model(sequences, classes == "ie", length=20)
    long = generators.fit_splice_model(sequences, classes == "ie", length=100)
    full = generators.fit_splice_model(sequences, classes == "ie")
    assert short.length == 20 and long.length == 100
    # the central 20 positions of the short model are those of the full model
    np.testing.assert_allclose(short.transition[:, 0], full.transition[:, 20])
    np.testing.assert_allclose(long.transition[:, 20 + 1], full.transition[:, 1])
    drawn = generators.sample_windows(long, np.ones(5000, bool), np.random.default_rng(1))
    assert np.mean((drawn[:, 48] == 0) & (drawn[:, 49] == 2)) > 0.9  # AG moved by 20


def test_classification_planted_model(tmp_path):
    generated = generators.make_classification(
        tmp_path / "c", 2000, 300, density=0.05, n_informative=30, chunk_rows=450
    )
    X, y = _all_rows(generated.dataset)
    coef = generated.coef
    assert np.count_nonzero(coef) == 30
    margin = X @ coef
    np.testing.assert_array_equal(y, np.where(margin >= 0, 1.0, -1.0))
    assert abs(generated.dataset.nnz / X.size - 0.05) < 0.005
    stored = zarr.open_group(generators.planted_path(tmp_path / "c"), mode="r")
    np.testing.assert_array_equal(stored["coef"][:], coef)


def test_classification_flips_and_binary_features(tmp_path):
    generated = generators.make_classification(
        tmp_path / "c", 4000, 100, density=0.1, flip_y=0.2, binary_features=True
    )
    X, y = _all_rows(generated.dataset)
    assert generated.dataset.binary
    assert set(np.unique(X)) <= {0.0, 1.0}
    agreement = np.mean(y == np.where(X @ generated.coef >= 0, 1.0, -1.0))
    assert abs(agreement - 0.8) < 0.03


def test_regression_dense_and_sparse(tmp_path):
    dense = generators.make_regression(tmp_path / "d", 3000, 20, density=1.0, noise=0.5)
    X, y = _all_rows(dense.dataset)
    assert dense.dataset.layout == "dense" and dense.dataset.task == "regression"
    residual = y - X @ dense.coef
    assert abs(residual.std() - 0.5) < 0.03
    sparse = generators.make_regression(tmp_path / "s", 1000, 500, density=0.02, noise=0.0)
    X, y = _all_rows(sparse.dataset)
    np.testing.assert_allclose(y, X @ sparse.coef, rtol=1e-12, atol=1e-12)


def test_factorized_stores_its_factors(tmp_path):
    generated = generators.make_factorized(tmp_path / "f", 700, 60, 4, chunk_rows=128, noise=0.0)
    X, y = _all_rows(generated.dataset)
    U, V = generated.U[:], generated.V
    assert U.shape == (700, 4) and V.shape == (4, 60)
    np.testing.assert_allclose(X, U @ V, rtol=1e-12, atol=1e-12)
    assert np.linalg.matrix_rank(X) == 4
    np.testing.assert_allclose(y, X @ generated.coef, rtol=1e-10, atol=1e-10)


def test_spdc_ridge_recipe(tmp_path):
    generated = generators.make_spdc_ridge(tmp_path / "r", 4000, 50, chunk_rows=1000)
    X, y = _all_rows(generated.dataset)
    np.testing.assert_array_equal(generated.coef, np.ones(50))
    variance_ratio = X.var(axis=0) * np.arange(1, 51) ** 2
    assert np.all(np.abs(variance_ratio - 1.0) < 0.15)
    assert abs((y - X.sum(axis=1)).std() - 1.0) < 0.05
    default = generators.make_spdc_ridge(tmp_path / "paper")
    assert default.dataset.shape == (500, 500) and default.dataset.layout == "dense"
    # the same rows stored as CSR (for DSO's sparse tiles): every entry kept, equal values
    sparse = generators.make_spdc_ridge(tmp_path / "csr", 4000, 50, chunk_rows=1000, layout="csr")
    assert sparse.dataset.layout == "csr" and sparse.dataset.nnz == 4000 * 50
    X_csr, y_csr = sparse.dataset.read_rows(0, 4000)
    np.testing.assert_array_equal(X_csr.toarray(), X)
    np.testing.assert_array_equal(y_csr, y)
    with pytest.raises(ValueError, match="layout must be"):
        generators.make_spdc_ridge(tmp_path / "bad", 10, 5, layout="coo")


def test_existing_destination_and_cli(tmp_path, capsys):
    dest = tmp_path / "g"
    generators.make_regression(dest, 10, 5)
    with pytest.raises(FileExistsError, match="--overwrite"):
        generators.make_regression(dest, 10, 5)
    generators.make_regression(dest, 12, 5, overwrite=True)
    assert cli_main(["generate", "classification", str(tmp_path / "c"), "--n-samples", "50",
                     "--n-features", "20", "--density", "0.2"]) == 0  # fmt: skip
    assert '"planted"' in capsys.readouterr().out
    assert cli_main(["generate", "splice", str(tmp_path / "s"), "--rank", "3"]) == 2
    assert "--rank" in capsys.readouterr().err
    command = ["generate", "splice", str(tmp_path / "s"), "--n-samples", "300", "--degree", "2"]
    assert cli_main([*command, "--positive-rate", "0.1", "--hash-bits", "8"]) == 0


def test_text_like_documents(tmp_path):
    n, d = 6000, 2**14
    kwargs = {"positive_rate": 0.2, "mean_tokens": 60, "topic_terms": 50, "chunk_rows": 2500}
    dataset = generators.make_text_like(tmp_path / "t", n, d, random_state=1, **kwargs)
    assert dataset.shape == (n, d) and dataset.task == "binary" and not dataset.binary
    X, y = dataset.read_rows(0, n)
    X = X.tocsr()
    # unit-norm tf-idf rows with their column ids in order and no repeats
    np.testing.assert_allclose(np.asarray(X.multiply(X).sum(axis=1)).ravel(), 1.0, rtol=1e-5)
    assert X.data.min() > 0 and X.has_sorted_indices
    assert all(np.all(np.diff(X.indices[X.indptr[i] : X.indptr[i + 1]]) > 0) for i in range(50))
    # the expected row length is what the bench sizes its sets with
    expected = generators.text_like_row_nnz(d, mean_tokens=60)
    assert abs(X.nnz / n - expected) < 0.1 * expected
    sigma = np.sqrt(n * 0.2 * 0.8)
    assert abs((y > 0).sum() - 0.2 * n) < 4 * sigma
    # Zipf: the most frequent term is in most documents, half of the vocabulary in few
    model = generators.text_like_model(d, mean_tokens=60, topic_terms=50)
    df = np.asarray((X > 0).sum(axis=0)).ravel() / n
    assert df[model.term_of_rank[0]] > 0.5
    assert np.median(df) < 0.01
    # the planted topic: its words are far more frequent in positive documents
    topic = model.term_of_rank[model.topic_ranks]
    in_topic = np.asarray(X[:, topic].sum(axis=1)).ravel()
    assert in_topic[y > 0].mean() > 3 * in_topic[y < 0].mean()
    # a test set shares the vocabulary (model_state), not the documents (random_state)
    other = generators.make_text_like(tmp_path / "u", 500, d, random_state=2, **kwargs)
    X2, _ = other.read_rows(0, 500)
    df2 = np.asarray((X2.tocsr() > 0).sum(axis=0)).ravel() / 500
    assert df2[model.term_of_rank[0]] > 0.5
    again = generators.make_text_like(tmp_path / "v", n, d, random_state=1, **kwargs)
    assert (again.read_rows(0, n)[0] != X).nnz == 0


def test_text_like_bad_parameters(tmp_path):
    with pytest.raises(ValueError, match="positive_rate"):
        generators.make_text_like(tmp_path / "a", 10, 1000, positive_rate=1.5)
    with pytest.raises(ValueError, match="topic_terms"):
        generators.make_text_like(tmp_path / "b", 10, 100, topic_terms=300)
    with pytest.raises(ValueError, match="topic_share"):
        generators.make_text_like(tmp_path / "c", 10, 1000, topic_terms=10, topic_share=2.0)
    assert not (tmp_path / "a").exists()


def test_generate_text_from_the_command_line(tmp_path, capsys):
    from daskpd.data import open_dataset

    dest = tmp_path / "docs"
    command = ["generate", "text", str(dest), "--n-samples", "200", "--n-features", "5000"]
    assert cli_main([*command, "--mean-tokens", "40", "--positive-rate", "0.3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["shape"] == [200, 5000] and summary["task"] == "binary"
    X, _ = open_dataset(str(dest)).read_rows(0, 200)
    assert X.shape == (200, 5000) and 20 < X.nnz / 200 < 40
    assert cli_main([*command, "--overwrite", "--degree", "3"]) == 2
    assert "--degree" in capsys.readouterr().err


def test_the_generators_have_one_name():
    import daskpd

    assert daskpd.generators is generators
    assert "datasets" not in daskpd.__all__
    with pytest.raises(ModuleNotFoundError):
        import daskpd.datasets  # noqa: F401
