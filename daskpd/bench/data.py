"""The benchmark's data: training, validation and test sets per scale, made once and reused.

Generated splice-site-like windows (the default), text-like documents, the SPDC paper's ridge
data (one set per target nonzero count), or the real StatLog DNA windows (one size). The
validation set (its own seed, a quarter of the training rows, like the test set) is what
chooses ``alpha`` and the stopping rules that need one; the test set is only scored.
"""

from __future__ import annotations

import os

import numpy as np

#: The data sets ``daskpd bench`` knows.
DATASETS = ("splice", "text", "dna", "ridge")

#: Test metric of each data set: test AUPRC for the classification sets, R^2 for ridge.
METRICS = {"splice": "auprc", "text": "auprc", "dna": "auprc", "ridge": "r2"}

#: How the tables name the metrics.
METRIC_LABELS = {"auprc": "AUPRC", "r2": "R^2"}

#: Columns of the SPDC ridge data (the paper's d = 500; rows grow with the scale).
RIDGE_FEATURES = 500

#: Vocabulary of the text-like sets (about the size of a large news corpus's).
TEXT_FEATURES = 2**20

#: Test and validation fractions of the real DNA windows (stratified splits).
DNA_TEST_FRACTION = 0.25

#: Seed offsets of the three sets of a scale.
KINDS = {"train": 0, "test": 1, "valid": 2}


def nnz_per_row(degree=8, length=60):
    """Nonzeros of one explicit weighted-degree window (every k-mer of every order)."""
    return sum(length - k + 1 for k in range(1, degree + 1))


def datasets(config, nnz):
    """``(train, valid, test)`` of a scale, each made once in ``config.workdir``."""
    if config.dataset == "dna":
        return _dna_sets(config)
    return tuple(_dataset(config, nnz, kind) for kind in ("train", "valid", "test"))


def _dataset(config, nnz, kind):
    """Generate (once) and open one set of a scale."""
    from daskpd.data import open_dataset
    from daskpd.generators import (
        make_spdc_ridge,
        make_splice_like,
        make_text_like,
        text_like_row_nnz,
    )

    if config.dataset == "text":
        per_row = text_like_row_nnz(TEXT_FEATURES)
    elif config.dataset == "ridge":
        per_row = RIDGE_FEATURES
    else:
        per_row = nnz_per_row()
    n_train = max(1000, int(nnz / per_row))
    n_rows = n_train if kind == "train" else max(1000, n_train // 4)
    hashed = f"-h{config.hash_bits}" if config.dataset == "splice" and config.hash_bits else ""
    name = f"{config.dataset}-{int(nnz):.0e}{hashed}-{kind}.zarr".replace("+", "")
    path = os.path.join(config.workdir, name)
    if os.path.exists(path):
        return open_dataset(path)
    seed = config.seed + KINDS[kind]
    if config.dataset == "ridge":
        # the planted coefficients are fixed (all ones): every set shares the model
        ridge = make_spdc_ridge(path, n_rows, RIDGE_FEATURES, layout="csr", random_state=seed)
        return ridge.dataset
    if config.dataset == "text":
        # one vocabulary and topic (model_state) for every set, different documents
        return make_text_like(
            path, n_rows, TEXT_FEATURES, positive_rate=config.positive_rate,
            random_state=seed, model_state=config.seed,
        )  # fmt: skip
    return make_splice_like(
        path, n_rows, positive_rate=config.positive_rate, random_state=seed, binary=True,
        hash_bits=config.hash_bits,
    )  # fmt: skip


def _dna_sets(config):
    """The real StatLog DNA windows, donor sites against the rest, split and featurized."""
    from sklearn.model_selection import train_test_split

    from daskpd.data import open_dataset, write_dataset
    from daskpd.generators import load_statlog_dna
    from daskpd.io.sequences import WDOptions, encode, wd_transform

    kinds = ("train", "valid", "test")
    paths = [os.path.join(config.workdir, f"dna-donor-{kind}.zarr") for kind in kinds]
    if all(os.path.exists(path) for path in paths):
        return tuple(open_dataset(path) for path in paths)
    sequences, classes = load_statlog_dna()
    y = np.where(classes == "ei", 1.0, -1.0)
    index = np.arange(len(sequences))
    rest, test = train_test_split(
        index, test_size=DNA_TEST_FRACTION, stratify=y, random_state=config.seed
    )
    train, valid = train_test_split(
        rest, test_size=DNA_TEST_FRACTION, stratify=y[rest], random_state=config.seed
    )
    options = WDOptions(degree=8, binary=True)
    # Each store is written atomically; one alone is what an interrupted run of this
    # function left in the bench's own work directory, so it is replaced.
    sets = []
    for path, rows in zip(paths, (train, valid, test), strict=True):
        rows = np.sort(rows)
        X = wd_transform(encode([sequences[i] for i in rows]), options)
        sets.append(write_dataset(X, y[rows], path, binary=True, overwrite=True))
    return tuple(sets)


def data_label(dataset):
    """How the tables describe a data set."""
    return {
        "splice": "splice-site-like (generated)",
        "text": "text-like (generated tf-idf documents)",
        "dna": "real DNA: StatLog primate windows, donor sites against the rest",
        "ridge": (
            f"SPDC paper's ridge data (Section 7.1: x_ij = N(0, 1) / j, j = 1..{RIDGE_FEATURES}, "
            "y = x . 1 + N(0, 1); dense rows)"
        ),
    }[dataset]


def in_memory(dataset):
    """``(X, y)`` of a whole set as float64 CSR and labels, for the in-memory peers."""
    X, y = dataset.read_rows(0, dataset.n_samples)
    return X.tocsr().astype(np.float64), np.asarray(y, dtype=np.float64)


def score(metric, y, scores):
    """The test metric (AUPRC or R^2) of ``scores`` against ``y``."""
    from daskpd.metrics import auprc, r2

    return {"auprc": auprc, "r2": r2}[metric](y, scores)


def peer_feasibility(nnz, n_samples, peer_memory_bytes):
    """Whether the in-memory peers can run a scale, and if not, why.

    Parameters
    ----------
    nnz, n_samples : int
        Size of the training set.
    peer_memory_bytes : int
        Memory one peer process may use.

    Returns
    -------
    ok : bool
    reason : str
        Why not (empty when ``ok``).
    """
    if nnz >= 2**31:
        return False, f"{nnz} nonzeros overflow scipy/liblinear int32 indices"
    csr_bytes = nnz * (8 + 4) + (n_samples + 1) * 8
    if 2 * csr_bytes > peer_memory_bytes:
        return False, (
            f"in-memory CSR copy needs {2 * csr_bytes / 2**30:.1f} GiB (data + the peer's own "
            f"copy) > {peer_memory_bytes / 2**30:.1f} GiB given to one process"
        )
    return True, ""
