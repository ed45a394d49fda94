"""A cluster of several hosts on this machine: the scheduler and the workers in network
namespaces of their own, TLS over veth links shaped by ``tc``; training across it to a
certificate, and nothing of a run left behind however it ends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import daskpd
from daskpd import _netns
from daskpd._netns import NetnsCluster, cleanup_stale_runs, run_leftovers, unavailable_reason

REASON = unavailable_reason()

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.netns,
    # processes in network namespaces: CI's second call (-m long, issue 49)
    pytest.mark.long,
    pytest.mark.skipif(REASON is not None, reason=f"no namespace cluster here: {REASON}"),
]

ALPHA = 0.1
TOL = 1e-6


def _listeners(namespace):
    """(ip, port) of every listening TCP socket in ``namespace`` (IPv6 ones as ``"v6"``)."""
    found = []
    for table in ("tcp", "tcp6"):
        done = subprocess.run(
            ["ip", "netns", "exec", namespace, "cat", f"/proc/net/{table}"],
            capture_output=True, text=True,
        )  # fmt: skip
        for line in done.stdout.splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            address, port = fields[1].split(":")
            ip = socket.inet_ntoa(bytes.fromhex(address)[::-1]) if table == "tcp" else "v6"
            found.append((ip, int(port, 16)))
    return found


def _qdisc(namespace, device):
    where = ["-n", namespace] if namespace else []
    done = subprocess.run(
        ["tc", *where, "qdisc", "show", "dev", device], capture_output=True, text=True
    )
    return done.stdout


def _gone(pids):
    import psutil

    def alive(pid):
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    return not any(alive(pid) for pid in pids)


@pytest.fixture(scope="module")
def splice_data(tmp_path_factory):
    from daskpd.generators import make_splice_like

    path = tmp_path_factory.mktemp("netns") / "splice.zarr"
    return make_splice_like(
        path, 2000, degree=3, hash_bits=10, binary=True, positive_rate=0.1, random_state=3
    )


def test_training_across_namespaces_to_a_certificate(splice_data):
    # the many-machine method: its iterates do not depend on where the groups live
    common = {"loss": "logistic", "alpha": ALPHA, "solver": "tron", "grid": 2, "tol": TOL,
              "max_epochs": 200, "eval_every": 1, "threads": 1}  # fmt: skip
    reference = daskpd.solve(splice_data, client=False, **common)
    with NetnsCluster(n_workers=2, rate="1gbit") as cluster:
        run_id, pids = cluster.run_id, list(cluster.pids.values())
        subnet = cluster.hosts[0].ip.rsplit(".", 1)[0]
        with cluster.client() as client:
            workers = sorted(client.scheduler_info()["workers"])
            namespaces = client.run(os.readlink, "/proc/self/ns/net")
            before = cluster.link_bytes()
            result = daskpd.solve(splice_data, client=client, **common)
            after = cluster.link_bytes()
        # the workers are other hosts: their addresses are on the run's subnet, each in a
        # network namespace of its own, neither this process's nor the other's
        assert workers == sorted(cluster.worker_addresses)
        assert all(address.startswith(f"tls://{subnet}.") for address in workers)
        assert subnet.startswith("10.213.")
        assert len({*namespaces.values(), os.readlink("/proc/self/ns/net")}) == 3
        # the rounds' vectors crossed the links
        for role in ("worker-0", "worker-1"):
            assert after[role].received - before[role].received > 8 * splice_data.n_features
        # nothing listens beyond its namespace but the Dask addresses themselves
        for host in cluster.hosts[1:]:
            listening = _listeners(host.namespace)
            outside = [(ip, port) for ip, port in listening if ip != "127.0.0.1"]
            assert len(outside) == 1 and outside[0][0] == host.ip, listening
            dask_address = cluster.address if host.role == "scheduler" else None
            if dask_address:
                assert dask_address == f"tls://{host.ip}:{outside[0][1]}"
        # every link is shaped at both ends
        bridge = f"{cluster.name}-br"
        for host in cluster.hosts:
            for shaped in (_qdisc(host.namespace, host.interface), _qdisc(bridge, host.port)):
                assert "tbf" in shaped and "rate 1Gbit" in shaped, shaped
        assert run_leftovers(run_id)
    assert result.solver == "tron"
    assert result.converged and 0 <= result.gap <= TOL
    assert reference.converged and 0 <= reference.gap <= TOL
    # the same rounds in the same order of sums: the same bits as in one process
    assert result.n_epochs == reference.n_epochs
    assert np.array_equal(result.w, reference.w)
    assert [r["gap"] for r in result.history] == [r["gap"] for r in reference.history]
    assert run_leftovers(run_id) == [] and _gone(pids)


def test_nothing_is_left_when_the_body_raises():
    with pytest.raises(RuntimeError, match="inside the block"):
        with NetnsCluster(n_workers=1, rate="100mbit") as cluster:
            run_id, pids = cluster.run_id, list(cluster.pids.values())
            left = run_leftovers(run_id)
            assert {f"namespace {cluster.name}-{end}" for end in ("br", "s", "w0")} <= set(left)
            assert f"link {cluster.name}" in left
            raise RuntimeError("inside the block")
    assert run_leftovers(run_id) == [] and _gone(pids)


def test_nothing_is_left_when_the_start_is_interrupted(monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    # after the namespaces and links exist, before any process starts
    monkeypatch.setattr(_netns, "_certificates", interrupted)
    cluster = NetnsCluster(n_workers=2, rate="1gbit")
    with pytest.raises(KeyboardInterrupt):
        with cluster:
            pass
    assert cluster.run_id is not None
    assert run_leftovers(cluster.run_id) == []


def test_a_killed_run_is_removed_by_the_cleanup():
    code = (
        "import time\n"
        "from daskpd._netns import NetnsCluster\n"
        "cluster = NetnsCluster(n_workers=1, rate=None).start()\n"
        "print(cluster.run_id, *cluster.pids.values(), flush=True)\n"
        "time.sleep(120)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        run_id, *pids = child.stdout.readline().split()
    finally:
        child.kill()
        child.wait()
    # its processes die with it (a parent-death signal); its namespaces stay
    deadline = time.monotonic() + 10
    while not _gone([int(pid) for pid in pids]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone([int(pid) for pid in pids])
    assert f"namespace dpd-{run_id}-br" in run_leftovers(run_id)
    assert run_id in cleanup_stale_runs()
    assert run_leftovers(run_id) == []
