"""The "from files" clock: each method in a fresh process, from its data on disk to its model.

What a user at scale lives with: nothing is warm. daskpd's row is a fresh ``daskpd train``
process on the zarr store (its imports, its LocalCluster's start, the read, the training to a
certified ``(1 + 1e-3) P*`` and the model written, all in); a peer's row is a fresh Python
process that loads the training set from disk in the peer's own format and fits it at the
cheapest rung of its ladder that reached ``(1 + 1e-3) P*`` in the warm runs, then writes its
weights. The peers' input is a ``.npz`` of the CSR arrays (uncompressed: ``np.load`` reads it at
disk speed, where scikit-learn's svmlight loader parses text at a few tens of MB/s). The
peer's process (:mod:`daskpd.bench._peer_process`) loads ``peers.py`` by its path and not
the ``daskpd`` package, so a peer pays for its own imports only.

Both clocks are wall seconds of the whole process, measured by the bench around it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp

#: The fits a peer's process can run (functions of :mod:`daskpd.bench.peers`).
PEER_FUNCTIONS = {
    "liblinear": "fit_liblinear",
    "liblinear-mc": "fit_liblinear_multicore",
    "snapml": "fit_snapml",
    "sgd": "fit_sgd",
    "saga": "fit_saga",
}


def write_npz(X, y, path) -> None:
    """Write ``(X, y)`` as a ``.npz`` of the CSR arrays (``data``, ``indices``, ``indptr``,
    ``shape``, ``y``), uncompressed, atomically."""
    from daskpd.data.atomic import atomic_file

    X = sp.csr_matrix(X)
    with atomic_file(path) as temporary, open(temporary, "wb") as handle:
        np.savez(
            handle, data=X.data, indices=X.indices, indptr=X.indptr,
            shape=np.asarray(X.shape, dtype=np.int64), y=np.asarray(y, dtype=np.float64),
        )  # fmt: skip


def read_npz(path):
    """``(X, y)`` of :func:`write_npz`'s file: float64 CSR and labels."""
    with np.load(path) as arrays:
        X = sp.csr_matrix(
            (arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"])
        )
        return X, arrays["y"]


def peer_input(workdir, name, X, y) -> str:
    """The peers' input file of a training set (written once, untimed), its path."""
    path = os.path.join(workdir, f"{name}-peers.npz")
    if not os.path.exists(path):
        write_npz(X, y, path)
    return path


def time_peer(peer, npz, alpha, kwargs) -> float:
    """Wall seconds of a fresh process that loads ``npz`` and fits ``peer`` with ``kwargs``.

    Parameters
    ----------
    peer : str
        A key of :data:`PEER_FUNCTIONS`.
    npz : str
        The training set (:func:`write_npz`).
    alpha : float
    kwargs : dict
        Keywords of the peer's fit function (JSON types).

    Returns
    -------
    float
    """
    if peer not in PEER_FUNCTIONS:
        raise ValueError(f"no from-files run for peer {peer!r}; known: {sorted(PEER_FUNCTIONS)}")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_peer_process.py")
    with tempfile.TemporaryDirectory(prefix="daskpd-files-") as tmp:
        spec = {
            "function": PEER_FUNCTIONS[peer], "npz": os.path.abspath(npz), "alpha": alpha,
            "kwargs": kwargs, "out": os.path.join(tmp, "w.npy"),
        }  # fmt: skip
        start = time.perf_counter()
        _run([sys.executable, script, json.dumps(spec)], f"{peer}'s from-files process")
        seconds = time.perf_counter() - start
        if not os.path.exists(spec["out"]):
            raise RuntimeError(f"{peer}'s from-files process wrote no weights")
    return seconds


def time_daskpd(store, *, loss, alpha, solver, tol, workers, memory_limit, max_epochs,
                budget, seed) -> float:  # fmt: skip
    """Wall seconds of a fresh ``daskpd train`` process on ``store``, to a model certified
    within ``tol`` (an absolute duality gap) and written; ``inf`` when it stopped uncertified
    (its epochs or its time limit ran out)."""
    with tempfile.TemporaryDirectory(prefix="daskpd-files-") as tmp:
        argv = [
            sys.executable, "-m", "daskpd.cli", "train", os.fspath(store), "--loss", loss,
            "--alpha", repr(float(alpha)), "--solver", solver, "--tol", repr(float(tol)),
            "--epochs", str(int(max_epochs)), "--time-limit", repr(float(budget)),
            "--workers", str(int(workers)), "--memory-limit", memory_limit,
            "--seed", str(int(seed)), "--no-progress", "--out", os.path.join(tmp, "model.zarr"),
        ]  # fmt: skip
        start = time.perf_counter()
        output = _run(argv, "daskpd train")
        seconds = time.perf_counter() - start
    summary = json.loads(output[output.index("{") :])
    return seconds if summary.get("converged") else math.inf


def _run(argv, what) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{what} failed ({done.returncode}): {tail[0][:200]}")
    return done.stdout
