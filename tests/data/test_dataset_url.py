"""Datasets read through fsspec URLs: an HTTP server in this process stands for object storage.

Every process of the cluster reaches the server (127.0.0.1), as every worker of a real cluster
reaches its bucket; the server refuses requests without the token header that the storage
options carry, so a worker that did not get them cannot read.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import daskpd
from daskpd.cli import main
from daskpd.data import (
    DatasetIntegrityError,
    ondisk,
    open_dataset,
    partition_dataset,
    write_dataset,
)

pytest.importorskip("aiohttp")  # fsspec's HTTP file system

TOKEN = "Bearer daskpd-test"
OPTIONS = {"headers": {"Authorization": TOKEN}}
ALPHA = 1e-1
TOL = 1e-6


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a directory (with listings) to requests that carry the token; logs the paths."""

    requests: list

    def send_head(self):
        if self.headers.get("Authorization") != TOKEN:
            self.send_error(403, "no token")
            return None
        self.requests.append((self.command, self.path))
        return super().send_head()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A dataset written locally and the URL of the same directory served over HTTP."""
    root = tmp_path_factory.mktemp("served")
    rng = np.random.default_rng(11)
    n, d = 600, 25
    X = sp.random(n, d, density=0.3, random_state=11, format="csr")
    y = np.where(X @ rng.standard_normal(d) + 0.2 * rng.standard_normal(n) > 0, 1.0, -1.0)
    write_dataset(X, y, root / "train.zarr", rows_per_block=100)
    requests = []
    handler = type("Handler", (_Handler,), {"requests": requests})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    yield {"root": root, "local": root / "train.zarr", "url": f"{base}/train.zarr",
           "base": base, "requests": requests}  # fmt: skip
    server.shutdown()
    server.server_close()
    thread.join()


def _solve(data, client):
    return daskpd.solve(
        data, loss="hinge", alpha=ALPHA, tol=TOL, max_epochs=200, eval_every=1, grid=2,
        client=client, solver="cocoa",
    )  # fmt: skip


@pytest.mark.cluster
def test_training_through_a_url_equals_training_on_the_path(served, local_cluster):
    remote = open_dataset(served["url"], storage_options=OPTIONS)
    local = open_dataset(served["local"])
    assert remote.shape == local.shape and remote.nnz == local.nnz
    served["requests"].clear()
    from_url = _solve(remote, local_cluster)
    from_path = _solve(local, local_cluster)
    assert from_url.solver == "cocoa"
    assert from_url.converged and 0 <= from_url.gap <= TOL
    assert np.array_equal(from_url.w, from_path.w)
    assert (from_url.primal, from_url.dual, from_url.n_epochs) == (
        from_path.primal,
        from_path.dual,
        from_path.n_epochs,
    )
    # the row blocks came over HTTP, and each worker opened the URL itself, with the storage
    # options the tasks carried (the server refuses requests without them)
    assert any("/indices/c." in path for command, path in served["requests"] if command == "GET")

    def opened_urls():
        return [str(key) for key in ondisk._OPEN_HANDLES if served["url"] in str(key)]

    opened = local_cluster.run(opened_urls)
    assert len(opened) == 2 and all(opened.values()), opened


@pytest.mark.cluster
def test_cli_trains_on_a_url(served, local_cluster, monkeypatch, capsys, tmp_path):
    import fsspec.config

    # The command line takes storage options from fsspec's configuration, as a user sets it
    # on every machine: FSSPEC_HTTP for the worker processes `daskpd train --workers 2` starts
    # (they read it when they import fsspec), the same dict in this process, which read its
    # environment long ago.
    monkeypatch.setenv("FSSPEC_HTTP", json.dumps(OPTIONS))
    monkeypatch.setitem(fsspec.config.conf, "http", dict(OPTIONS))
    model = tmp_path / "model.zarr"
    argv = [
        "train", served["url"], "--workers", "2", "--solver", "cocoa", "--alpha", str(ALPHA),
        "--tol", str(TOL), "--epochs", "200", "--eval-every", "1", "--option", "grid=2",
        "--no-progress", "--out", str(model),
    ]  # fmt: skip
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["solver"] == "cocoa" and summary["converged"] and summary["gap"] <= TOL
    # same seed and grid: the same bits as on the local path, whatever the cluster
    reference = _solve(open_dataset(served["local"]), local_cluster)
    assert np.array_equal(daskpd.load_model(model).w, reference.w)


def test_a_missing_chunk_file_is_found_over_http(served):
    chunk = served["local"] / "indices" / "c.0"
    aside = served["root"] / "c.0.aside"
    os.rename(chunk, aside)
    try:
        with pytest.raises(DatasetIntegrityError, match="'indices' has 0 chunk files"):
            open_dataset(served["url"], storage_options=OPTIONS)
    finally:
        os.rename(aside, chunk)
    open_dataset(served["url"], storage_options=OPTIONS)


class _NoListingHandler(_Handler):
    """A static file server that does not list directories, as many do."""

    def list_directory(self, path):
        self.send_error(404, "no listings")
        return None


def test_a_server_without_listings_serves_the_same_rows(served):
    requests = []
    handler = type("Handler", (_NoListingHandler,), {"requests": requests})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(served["root"]))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/train.zarr"
        remote = open_dataset(url, storage_options=OPTIONS, verify=True)
        local = open_dataset(served["local"])
        (X_local, y_local), (X_remote, y_remote) = local.block(2), remote.block(2)
        assert (X_local != X_remote).nnz == 0 and np.array_equal(y_local, y_remote)
        # no listing to find the chunk files in: each was asked for by a request of its own
        assert ("HEAD", "/train.zarr/indices/c.0") in requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_file_url_reads_the_same_rows(served):
    local = open_dataset(served["local"])
    remote = open_dataset(served["local"].as_uri())
    assert remote.path.startswith("file://")
    for block in range(local.n_row_blocks):
        (X_local, y_local), (X_remote, y_remote) = local.block(block), remote.block(block)
        assert (X_local != X_remote).nnz == 0 and np.array_equal(y_local, y_remote)


def test_bad_urls_are_clear_errors(served):
    missing = f"{served['base']}/nothing.zarr"
    with pytest.raises(FileNotFoundError, match=f"no dataset at {missing}"):
        open_dataset(missing, storage_options=OPTIONS)
    with pytest.raises(OSError, match=f"{served['url']}: cannot read the store.*403"):
        open_dataset(served["url"])  # no token
    with pytest.raises(ValueError, match="unknown-protocol://x/y.zarr: Protocol not known"):
        open_dataset("unknown-protocol://x/y.zarr")
    with pytest.raises(OSError, match="http://127.0.0.1:9/x.zarr: cannot read the store"):
        open_dataset("http://127.0.0.1:9/x.zarr")
    with pytest.raises(ValueError, match="storage_options apply to a URL"):
        open_dataset(served["local"], storage_options=OPTIONS)
    with pytest.raises(ValueError, match="written to a local or shared directory"):
        write_dataset(np.eye(3), np.ones(3), f"{served['base']}/new.zarr")
    with pytest.raises(ValueError, match="not a URL"):
        partition_dataset(open_dataset(served["url"], storage_options=OPTIONS), grid=2)
    assert not os.path.exists("http:")  # no local directory named after the URL


def test_cli_names_a_missing_url(served, monkeypatch, capsys):
    import fsspec.config

    monkeypatch.setitem(fsspec.config.conf, "http", dict(OPTIONS))
    missing = f"{served['base']}/nothing.zarr"
    code = main(["train", missing, "--in-process"])
    err = capsys.readouterr().err
    assert code == 2 and f"DATA {missing!r} does not exist" in err
    code = main(["info", "unknown-protocol://x/y.zarr"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown-protocol://x/y.zarr: Protocol not known" in err
