"""What a run's processes listen on: only the loopback, on a LocalCluster that daskpd starts.

``daskpd train`` runs in a subprocess; while it trains, its process and every child
(scheduler, nannies and the dashboard live in the first, each worker in its own) are polled
for listening TCP sockets, IPv4 and IPv6. The dashboard's port, printed by the command, must
be among those seen, so the check cannot pass without having looked at a live cluster.
Beside it, every ``LocalCluster`` and Dask server the package, its pipelines and tests start
is checked in the source: it names a loopback dashboard and host.
"""

from __future__ import annotations

import ast
import ipaddress
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import scipy.sparse as sp

from daskpd._cluster import ClusterOptions, cluster_client
from daskpd.cli import main
from daskpd.data import write_dataset

pytestmark = pytest.mark.cluster

CLI = [sys.executable, "-m", "daskpd.cli"]
ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"^Dask dashboard: http://(\[[^\]]+\]|[^:/]+):(\d+)/status", re.MULTILINE)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X = sp.random(3000, 40, density=0.2, random_state=11, format="csr")
    y = np.where(X @ np.random.default_rng(11).standard_normal(40) > 0, 1.0, -1.0)
    path = tmp_path_factory.mktemp("listeners") / "train.zarr"
    write_dataset(X, y, path, rows_per_block=500)
    return path


def _is_loopback(host) -> bool:
    address = ipaddress.ip_address(host.split("%")[0])
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _listeners(pid):
    """``(pid, host, port)`` of each listening TCP socket of ``pid`` and its descendants."""
    found = set()
    try:
        processes = [psutil.Process(pid)]
        processes += processes[0].children(recursive=True)
    except psutil.NoSuchProcess:
        return found
    for process in processes:
        try:
            connections = process.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # it ended between the listing and the look
        for connection in connections:
            if connection.status == psutil.CONN_LISTEN:
                found.add((process.pid, connection.laddr.ip, connection.laddr.port))
    return found


def _watch(argv, timeout=180):
    """Run the command; return its exit code, stdout, stderr and every listener seen."""
    process = subprocess.Popen(
        CLI + [str(arg) for arg in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen = set()
    deadline = time.monotonic() + timeout
    try:
        while process.poll() is None and time.monotonic() < deadline:
            seen |= _listeners(process.pid)
            time.sleep(0.05)
        out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, out, err, seen


def _train(store, workers, *extra):
    return (
        "train", store, "--workers", workers, "--solver", "batch", "--loss", "logistic",
        "--alpha", "1e-3", "--epochs", "2", "--tol", "0", "--no-progress", *extra,
    )  # fmt: skip


@pytest.mark.long  # a training subprocess watched: CI's second call (-m long, issue 49)
def test_a_training_run_listens_on_the_loopback_only(store):
    code, out, err, seen = _watch(_train(store, 2))
    assert code == 0, err
    (host, port), *_ = LINK.findall(err)
    assert host == "127.0.0.1", err
    # the dashboard was seen listening: the polls looked at the live cluster
    assert ("127.0.0.1", int(port)) in {(ip, p) for _, ip, p in seen}, (err, seen)
    # the first process (scheduler, nannies, dashboard) and both workers
    assert len({pid for pid, _, _ in seen}) >= 3, seen
    outside = sorted(item for item in seen if not _is_loopback(item[1]))
    assert not outside, f"listening outside the loopback: {outside}"


@pytest.mark.long  # a training subprocess watched: CI's second call (-m long, issue 49)
def test_the_dashboard_listens_where_asked_and_the_link_says_where(store):
    # 127.0.0.2 is on the loopback (127.0.0.0/8) without being the default address
    code, out, err, seen = _watch(_train(store, 1, "--dashboard-address", "127.0.0.2:0"))
    assert code == 0, err
    (host, port), *_ = LINK.findall(err)
    assert host == "127.0.0.2", err
    assert ("127.0.0.2", int(port)) in {(ip, p) for _, ip, p in seen}, (err, seen)
    assert not [item for item in seen if not _is_loopback(item[1])]


def test_a_dashboard_address_is_checked(store, capsys, tmp_path):
    for argv, message in (
        (("--dashboard-address", "nowhere"), "must be HOST:PORT"),
        (("--dashboard-address", "127.0.0.1:99999"), "must be HOST:PORT"),
        (("--dashboard-address", "127.0.0.1:0", "--in-process"), "--in-process cannot"),
        (
            ("--dashboard-address", "127.0.0.1:0", "--scheduler", "tcp://127.0.0.1:9"),
            "has its own dashboard",
        ),
    ):
        code = main([str(a) for a in ("train", store, "--no-progress", *argv)])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(ValueError, match="none is started"):
        with cluster_client(ClusterOptions(dashboard_address="127.0.0.1:0"), start=False):
            pass


def _loopback_literal(node, *, host=False) -> bool:
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    text = node.value
    if not host:
        text = text.rpartition(":")[0].strip("[]")
    return text == "localhost" or (bool(text) and _is_loopback(text))


def _call_name(node) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _dict_items(node):
    return {
        key.value: value
        for key, value in zip(node.keys, node.values, strict=True)
        if isinstance(key, ast.Constant)
    }


def test_every_cluster_in_the_source_listens_on_the_loopback():
    """Each ``LocalCluster(...)`` names a loopback dashboard; each scheduler or worker spec
    of a ``SpecCluster`` (``{"cls": Scheduler, "options": {...}}``) a loopback host too.
    ``daskpd/_cluster.py`` passes its options' address (tested above)."""
    problems, clusters = [], 0
    files = [*ROOT.glob("daskpd/**/*.py"), *ROOT.glob("pipelines/**/*.py")]
    files += ROOT.glob("tests/**/*.py")
    for path in sorted(files):
        where = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and _call_name(node) == "LocalCluster":
                clusters += 1
                keywords = {keyword.arg: keyword.value for keyword in node.keywords}
                dashboard = keywords.get("dashboard_address")
                if str(where) == "daskpd/_cluster.py" and dashboard is not None:
                    continue
                if dashboard is None or not _loopback_literal(dashboard):
                    problems.append(f"{where}:{node.lineno}: LocalCluster dashboard_address")
                if "host" in keywords and not _loopback_literal(keywords["host"], host=True):
                    problems.append(f"{where}:{node.lineno}: LocalCluster host")
            elif isinstance(node, ast.Dict):
                items = _dict_items(node)
                kind = items.get("cls")
                if not (isinstance(kind, ast.Name) and kind.id in ("Scheduler", "Nanny", "Worker")):
                    continue
                clusters += 1
                options = items.get("options")
                options = _dict_items(options) if isinstance(options, ast.Dict) else {}
                if not _loopback_literal(options.get("host"), host=True):
                    problems.append(f"{where}:{node.lineno}: {kind.id} host")
                if kind.id == "Scheduler" and not _loopback_literal(
                    options.get("dashboard_address")
                ):
                    problems.append(f"{where}:{node.lineno}: Scheduler dashboard_address")
    assert clusters >= 8  # the check found the clusters it is about
    assert not problems, problems
