"""Training on a cluster that speaks only TLS, with certificates made here by ``openssl``."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess

import dask
import numpy as np
import pytest
import scipy.sparse as sp

import daskpd
from daskpd._cluster import ClusterOptions, SchedulerUnreachable, cluster_client
from daskpd.cli import main
from daskpd.data import write_dataset
from daskpd.problem import Problem

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]

TOL = 1e-6
ALPHA = 1e-2


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _authority(directory, name):
    """A self-signed CA ``name`` and one certificate it signed for this machine.

    One certificate serves the scheduler, the workers and the client, as in distributed's own
    TLS tests; its names (localhost, 127.0.0.1) match where the cluster listens.
    """
    ca, ca_key = directory / f"{name}-ca.pem", directory / f"{name}-ca-key.pem"
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    request, extensions = directory / f"{name}.csr", directory / f"{name}.ext"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", f"/CN=daskpd test CA {name}", "-keyout", str(ca_key), "-out", str(ca),
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", str(key), "-out", str(request),
    )  # fmt: skip
    extensions.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "2", "-extfile", str(extensions), "-out", str(cert),
    )  # fmt: skip
    return {"ca": str(ca), "cert": str(cert), "key": str(key)}


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    return {"trusted": _authority(directory, "trusted"), "other": _authority(directory, "other")}


def _client_security(files):
    from distributed import Security

    return Security(
        tls_ca_file=files["ca"],
        tls_client_cert=files["cert"],
        tls_client_key=files["key"],
        require_encryption=True,
    )


@pytest.fixture(scope="module")
def tls_scheduler(certificates):
    """The address of a 2-worker LocalCluster whose scheduler and workers speak only TLS."""
    from distributed import LocalCluster, Security

    files = certificates["trusted"]
    security = Security(
        tls_ca_file=files["ca"],
        tls_scheduler_cert=files["cert"],
        tls_scheduler_key=files["key"],
        tls_worker_cert=files["cert"],
        tls_worker_key=files["key"],
        tls_client_cert=files["cert"],
        tls_client_key=files["key"],
        require_encryption=True,
    )
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        protocol="tls://",
        security=security,
        dashboard_address="127.0.0.1:0",
    )
    yield cluster.scheduler_address
    cluster.close()


@pytest.fixture(scope="module")
def data_path(tmp_path_factory):
    rng = np.random.default_rng(3)
    n, d = 300, 20
    X = sp.random(n, d, density=0.3, random_state=3, format="csr")
    y = np.where(X @ rng.standard_normal(d) + 0.2 * rng.standard_normal(n) > 0, 1.0, -1.0)
    path = tmp_path_factory.mktemp("tls-data") / "train.zarr"
    write_dataset(X, y, path, rows_per_block=100)
    return path


def test_solve_over_tls(tls_scheduler, certificates, data_path):
    from distributed import Client

    data = daskpd.open_dataset(data_path)
    with Client(tls_scheduler, security=_client_security(certificates["trusted"])) as client:
        workers = sorted(client.nthreads())
        result = daskpd.solve(
            data, loss="hinge", alpha=ALPHA, tol=TOL, max_epochs=200, eval_every=1, client=client
        )
    # nothing in this cluster listens in clear text
    assert tls_scheduler.startswith("tls://")
    assert len(workers) == 2 and all(address.startswith("tls://") for address in workers)
    assert result.converged and 0 <= result.gap <= TOL
    # the certificate is the model's: its primal, recomputed here without Dask, agrees
    primal = Problem("hinge", "l2", ALPHA).primal(result.w, data)
    assert primal == pytest.approx(result.primal, rel=1e-9)
    assert result.primal - result.dual == pytest.approx(result.gap, abs=1e-12)


def _train_argv(data_path, scheduler, *extra):
    return [
        "train", str(data_path), "--scheduler", scheduler, "--loss", "hinge",
        "--alpha", str(ALPHA), "--tol", str(TOL), "--epochs", "200", "--eval-every", "1",
        "--no-progress", "--option", "threads=1", *extra,
    ]  # fmt: skip


def _run(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_train_over_tls(tls_scheduler, certificates, data_path, capsys, tmp_path):
    from distributed import Client

    files = certificates["trusted"]
    model = tmp_path / "model.zarr"
    argv = _train_argv(
        data_path, tls_scheduler,
        "--tls-ca-file", files["ca"], "--tls-cert", files["cert"], "--tls-key", files["key"],
        "--out", str(model),
    )  # fmt: skip
    code, out, err = _run(capsys, argv)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["converged"] and 0 <= summary["gap"] <= TOL
    # the same run through the Python API: same seed and grid, so the same bits (one
    # thread in the dual solver's group: more threads are not bit-reproducible)
    data = daskpd.open_dataset(data_path)
    with Client(tls_scheduler, security=_client_security(files)) as client:
        reference = daskpd.solve(
            data, loss="hinge", alpha=ALPHA, tol=TOL, max_epochs=200, eval_every=1,
            client=client, threads=1,
        )  # fmt: skip
    assert np.array_equal(daskpd.load_model(model).w, reference.w)


def test_tls_settings_from_dask_config(tls_scheduler, certificates):
    files = certificates["trusted"]
    config = {
        "distributed.comm.tls.ca-file": files["ca"],
        "distributed.comm.tls.client.cert": files["cert"],
        "distributed.comm.tls.client.key": files["key"],
    }
    with dask.config.set(config):
        with cluster_client(ClusterOptions(scheduler=tls_scheduler)) as client:
            assert len(client.nthreads()) == 2
            assert client.submit(sum, [1, 2]).result() == 3


def test_scheduler_refuses_a_client_without_certificate(tls_scheduler, certificates):
    # A client that trusts the CA but shows no certificate of its own: the TLS handshake
    # completes on its side, and the scheduler, which requires client certificates, drops
    # the connection instead of answering.
    host, port = tls_scheduler.removeprefix("tls://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=certificates["trusted"]["ca"])
    context.check_hostname = False
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with context.wrap_socket(raw) as tls:
                tls.sendall(b"\0" * 64)
                if tls.recv(1) == b"":
                    raise ConnectionResetError("closed by the scheduler")


def test_scheduler_refuses_an_untrusted_certificate(tls_scheduler, certificates):
    other = certificates["other"]
    options = ClusterOptions(
        scheduler=tls_scheduler, tls_ca_file=other["ca"], tls_cert=other["cert"],
        tls_key=other["key"], timeout=5,
    )  # fmt: skip
    with pytest.raises(SchedulerUnreachable, match="refused the connection"):
        with cluster_client(options):
            pass


def test_tls_scheduler_without_certificates_is_a_clear_error(tls_scheduler, data_path, capsys):
    with dask.config.set({"distributed.comm.tls.ca-file": None}):
        with pytest.raises(ValueError, match="uses TLS but no certificates"):
            with cluster_client(ClusterOptions(scheduler=tls_scheduler)):
                pass
        code, out, err = _run(capsys, _train_argv(data_path, tls_scheduler))
    assert code == 2 and out == ""
    assert "uses TLS but no certificates" in err and "--tls-ca-file" in err
    assert len(err.strip().splitlines()) == 1


def test_missing_tls_file_is_named(tls_scheduler, certificates, data_path, capsys, tmp_path):
    files = certificates["trusted"]
    missing = str(tmp_path / "no-such-ca.pem")
    with pytest.raises(FileNotFoundError, match="tls_ca_file.*no-such-ca.pem"):
        ClusterOptions(scheduler=tls_scheduler, tls_ca_file=missing, tls_cert=files["cert"])
    argv = _train_argv(
        data_path, tls_scheduler, "--tls-ca-file", missing, "--tls-cert", files["cert"]
    )
    code, out, err = _run(capsys, argv)
    assert code == 2 and "--tls-ca-file" in err and missing in err
    config = {
        "distributed.comm.tls.ca-file": missing,
        "distributed.comm.tls.client.cert": files["cert"],
    }
    with dask.config.set(config):
        with pytest.raises(FileNotFoundError, match="distributed.comm.tls.ca-file"):
            ClusterOptions(scheduler=tls_scheduler).client_security()


def test_tls_settings_need_a_tls_scheduler(certificates):
    files = certificates["trusted"]
    for scheduler in (None, "tcp://127.0.0.1:8786"):
        with pytest.raises(ValueError, match="apply to a tls:// scheduler"):
            ClusterOptions(scheduler=scheduler, tls_ca_file=files["ca"], tls_cert=files["cert"])
    with pytest.raises(ValueError, match="needs both tls_ca_file"):
        ClusterOptions(scheduler="tls://127.0.0.1:8786", tls_cert=files["cert"])


def test_an_invalid_certificate_file_is_named(certificates, data_path, capsys, tmp_path):
    # not "no Dask scheduler answered": the file is read before any connection is tried
    files = certificates["trusted"]
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    other_key = certificates["other"]["key"]
    for flags, named in (
        (("--tls-ca-file", garbage, "--tls-cert", files["cert"]), f"--tls-ca-file) '{garbage}'"),
        (("--tls-ca-file", files["ca"], "--tls-cert", garbage), f"--tls-cert) '{garbage}'"),
        (("--tls-ca-file", files["ca"], "--tls-cert", files["key"]), "holds no PEM certificate"),
        (
            ("--tls-ca-file", files["ca"], "--tls-cert", files["cert"], "--tls-key", garbage),
            f"--tls-key) '{garbage}' is not the PEM key",
        ),
        (
            ("--tls-ca-file", files["ca"], "--tls-cert", files["cert"], "--tls-key", other_key),
            f"--tls-key) '{other_key}' is not the PEM key",
        ),
        (("--tls-ca-file", files["ca"], "--tls-cert", files["cert"]), "holds no PEM key"),
    ):
        argv = _train_argv(data_path, "tls://127.0.0.1:9", "--connect-timeout", "2")
        code, out, err = _run(capsys, argv + [str(flag) for flag in flags])
        assert code == 2 and out == "" and named in err, err
        assert len(err.strip().splitlines()) == 1 and "no Dask scheduler answered" not in err
    config = {
        "distributed.comm.tls.ca-file": str(garbage),
        "distributed.comm.tls.client.cert": files["cert"],
        "distributed.comm.tls.client.key": files["key"],
    }
    with dask.config.set(config):
        with pytest.raises(ValueError, match="distributed.comm.tls.ca-file.*no PEM certificate"):
            ClusterOptions(scheduler="tls://127.0.0.1:9").client_security()
