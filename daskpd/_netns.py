"""A Dask cluster of several hosts on one machine: Linux network namespaces, shaped TCP links.

Each Dask process (the scheduler, every worker) runs in a network namespace of its own, so
whatever moves between two of them crosses a real TCP connection over a veth link, which the
``tc`` token bucket (``tbf``) of both ends holds to the rate asked for. Measuring what a
reduction costs across machines needs exactly that; a ``LocalCluster`` talks over loopback.

Topology of a run ``dpd-<id>`` (``<id>`` six random hex digits)::

    namespace dpd-<id>-s   eth0 10.213.X.2   the scheduler (tls://10.213.X.2:8786)
    namespace dpd-<id>-wK  eth0 10.213.X.(10+K)   worker K
    root namespace         dpd-<id> 10.213.X.1   the client (this process)
                 \\ veth pairs: each eth0 is paired with a port p-<host> of
    namespace dpd-<id>-br  bridge br0: the switch, no address

The bridge sits in a namespace of its own rather than in the root namespace: the root
namespace gains one interface only, the root's bridge and firewall settings play no part, and
deleting the run's namespaces destroys the bridge and every veth pair with them (a veth dies
with either end), the root's one included. The client stays in the root namespace, as the
calling process (a test, a benchmark) is there: a :class:`distributed.Client` made by
:meth:`NetnsCluster.client` reaches the scheduler over its own shaped link.

TLS only (``require_encryption``): a throwaway CA and one certificate, made with the
``openssl`` command in the run's temporary directory; the certificate names every address of
the run (distributed does not check host names, but its peers' certificates must be signed by
the CA, and a client must show one). Nothing else listens beyond the namespace: the
dashboards are off, and the HTTP server that a scheduler and a worker start anyway (health
and metrics routes) is bound to the loopback of the process's own namespace, which nothing
outside it reaches; the workers run without a nanny.

Teardown (:meth:`NetnsCluster.close`, run on leaving the ``with`` block however it is left,
Ctrl-C included, and at interpreter exit) stops the processes, deletes the namespaces and
removes the temporary directory and the run's record. A run whose process died without its
teardown (``kill -9``) leaves its namespaces behind: its record in :data:`REGISTRY` names a
process that is gone, and :func:`cleanup_stale_runs`, which every new run calls first,
removes them. The processes of such a run were started with a parent-death signal and do
not outlive it.

Needs root, ``ip`` and ``tc`` (iproute2) and ``openssl``; :func:`unavailable_reason` says
what is missing. This module imports nothing of the solvers: it is a layer under the tests,
pipelines and benchmarks that use it.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from distributed import Client, Security

from daskpd._cluster import WORKER_ENVIRON

#: prefix of every name a run creates (namespaces, the root's veth, temporary directories)
PREFIX = "dpd-"
#: one JSON record per live run: the owning process, its temporary directory, its subnet
REGISTRY = Path("/run/dpd-netns")
#: a run's addresses are 10.213.X.0/24, X chosen per run among the subnets not in use
SUBNET = "10.213"
SCHEDULER_PORT = 8786
_RUN_ID = re.compile(r"^dpd-([0-9a-f]{6})(?:-(?:br|s|w\d+))?$")
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g|t)?bit$")


class NetnsError(RuntimeError):
    """A command of the namespace setup failed, or a process did not start."""


@dataclass(frozen=True)
class Host:
    """One end of the switch: a namespace (``None`` for the root) and its link.

    Attributes
    ----------
    role : str
        ``"client"``, ``"scheduler"`` or ``"worker-K"``.
    namespace : str or None
    interface : str
        The link's name inside ``namespace``.
    port : str
        The other end, a port of the bridge in the bridge namespace.
    ip : str
    """

    role: str
    namespace: str | None
    interface: str
    port: str
    ip: str


@dataclass(frozen=True)
class LinkBytes:
    """Bytes a host sent into its link and received from it (the bridge port's counters)."""

    sent: int
    received: int


def unavailable_reason() -> str | None:
    """Why a :class:`NetnsCluster` cannot start here, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for command in ("ip", "tc", "openssl"):
        if shutil.which(command) is None:
            return f"the {command!r} command is missing"
    return None


def parse_rate(rate: str) -> float:
    """Bits per second of a ``tc`` rate such as ``"100mbit"``, ``"1gbit"``, ``"2.5gbit"``."""
    match = _RATE.match(rate.strip().lower())
    if match is None:
        raise ValueError(f"rate must look like '100mbit', '1gbit' or '10gbit', got {rate!r}")
    scale = {None: 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[match.group(2)]
    return float(match.group(1)) * scale


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(argv)} failed: {done.stderr.strip() or done.returncode}")
    return done


def _namespaces() -> list[str]:
    # lines are "NAME" or "NAME (id: N)"
    lines = _run("ip", "netns", "list").stdout.splitlines()
    return [line.split()[0] for line in lines if line.strip()]


def _root_links() -> list[str]:
    listed = json.loads(_run("ip", "-j", "link", "show").stdout or "[]")
    return [link["ifname"] for link in listed]


def _namespace_pids(namespace: str) -> list[int]:
    done = _run("ip", "netns", "pids", namespace, check=False)
    return [int(pid) for pid in done.stdout.split()]


def _process_alive(pid: int, started: float | None) -> bool:
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(process.create_time() - started) < 1e-3
    except psutil.NoSuchProcess:
        return False


def _end_processes(pids, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, to the given processes (ours)."""
    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            process.send_signal(signal.SIGTERM)
            processes.append(process)
    _, alive = psutil.wait_procs(processes, timeout=grace)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=5)


def _processes_naming(run_id: str) -> list[int]:
    """The run's Dask processes, by their command line (``python -m dask scheduler|worker``
    with the run's name in an argument: a worker's name, the scheduler's file), wherever
    they are: another process that merely mentions the run is not one of them."""
    found = []
    marker = f"{PREFIX}{run_id}"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if argv[1:4] in (["-m", "dask", "scheduler"], ["-m", "dask", "worker"]) and any(
                marker in argument for argument in argv
            ):
                found.append(int(entry.name))
    return [pid for pid in found if _process_alive(pid, None)]


@contextlib.contextmanager
def _registry_lock():
    REGISTRY.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(REGISTRY / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _records() -> dict[str, dict]:
    records = {}
    for path in REGISTRY.glob(f"{PREFIX}*.json"):
        with contextlib.suppress(OSError, ValueError):
            records[path.stem.removeprefix(PREFIX)] = json.loads(path.read_text())
    return records


def run_leftovers(run_id: str) -> list[str]:
    """What of run ``run_id`` still exists: namespaces, the root's link, processes naming
    the run, its temporary directory, its record (empty once the run is torn down)."""
    name = f"{PREFIX}{run_id}"
    found = [f"namespace {ns}" for ns in _namespaces() if _RUN_ID.match(ns) and ns.startswith(name)]
    found += [f"link {link}" for link in _root_links() if link == name]
    found += [f"process {pid}" for pid in _processes_naming(run_id)]
    record_path = REGISTRY / f"{name}.json"
    if record_path.exists():
        found.append(f"record {record_path}")
        with contextlib.suppress(OSError, ValueError):
            directory = json.loads(record_path.read_text()).get("tempdir")
            if directory and Path(directory).exists():
                found.append(f"directory {directory}")
    found += [f"directory {path}" for path in Path(tempfile.gettempdir()).glob(f"{name}-*")]
    return sorted(set(found))


def _teardown(run_id: str, pids=(), grace: float = 5.0) -> list[str]:
    """Remove everything of run ``run_id``; returns the errors met (every step is tried)."""
    name = f"{PREFIX}{run_id}"
    errors = []
    namespaces = [ns for ns in _namespaces() if _RUN_ID.match(ns) and ns.startswith(name)]
    # the processes started, then anything else living in the run's namespaces
    targets = set(pids) | {pid for ns in namespaces for pid in _namespace_pids(ns)}
    targets |= set(_processes_naming(run_id))
    _end_processes(sorted(targets), grace)
    # the bridge namespace last: its veth ends hold the others' pairs
    for namespace in sorted(namespaces, key=lambda ns: ns.endswith("-br")):
        done = _run("ip", "netns", "delete", namespace, check=False)
        if done.returncode != 0:
            errors.append(f"ip netns delete {namespace}: {done.stderr.strip()}")
    if name in _root_links():
        done = _run("ip", "link", "delete", name, check=False)
        if done.returncode != 0 and name in _root_links():
            errors.append(f"ip link delete {name}: {done.stderr.strip()}")
    record_path = REGISTRY / f"{name}.json"
    directories = list(Path(tempfile.gettempdir()).glob(f"{name}-*"))
    with contextlib.suppress(OSError, ValueError):
        directory = json.loads(record_path.read_text()).get("tempdir")
        if directory and Path(directory).name.startswith(f"{name}-"):
            directories.append(Path(directory))
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        record_path.unlink()
    return errors


def cleanup_stale_runs() -> list[str]:
    """Tear down every run whose owning process is gone; returns their ids.

    A run is found by its names (``dpd-<id>`` namespaces, root links and temporary
    directories) or its record; it is stale when its record is missing or names a process
    that no longer exists (same pid and start time). Live runs are left alone.
    """
    with _registry_lock():
        records = _records()
        ids = set(records)
        for name in _namespaces() + _root_links():
            match = _RUN_ID.match(name)
            if match:
                ids.add(match.group(1))
        for path in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
            match = re.match(r"^dpd-([0-9a-f]{6})-", path.name)
            if match and path.is_dir():
                ids.add(match.group(1))
        # a run writes its record, under this lock, before it creates anything, and its
        # teardown removes the record last: a name without a record is a dead run's
        stale = []
        for run_id in sorted(ids):
            record = records.get(run_id)
            if record and _process_alive(record["pid"], record["started"]):
                continue
            _teardown(run_id, grace=2.0)
            stale.append(run_id)
        return stale


def _openssl(*args: str) -> None:
    _run("openssl", *args)


def _certificates(directory: Path, addresses) -> dict[str, str]:
    """A throwaway CA and one certificate (for every process of the run) naming ``addresses``."""
    ca, ca_key = directory / "ca.pem", directory / "ca-key.pem"
    cert, key = directory / "cert.pem", directory / "key.pem"
    request, extensions = directory / "cert.csr", directory / "cert.ext"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", f"/CN=daskpd netns CA {directory.name}", "-keyout", str(ca_key), "-out", str(ca),
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=daskpd netns cluster",
        "-keyout", str(key), "-out", str(request),
    )  # fmt: skip
    names = ",".join(["DNS:localhost", "IP:127.0.0.1", *(f"IP:{ip}" for ip in addresses)])
    extensions.write_text(f"subjectAltName={names}\n")
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "2", "-extfile", str(extensions), "-out", str(cert),
    )  # fmt: skip
    ca_key.unlink()
    return {"ca": str(ca), "cert": str(cert), "key": str(key)}


def _free_subnet(records) -> int:
    """A third octet X whose 10.213.X.0/24 no live run and no root route or address uses."""
    used = {record.get("subnet") for record in records.values()}
    routes = _run("ip", "-4", "route", "show", "table", "all").stdout
    routes += _run("ip", "-4", "addr", "show").stdout
    used |= {int(octet) for octet in re.findall(rf"{re.escape(SUBNET)}\.(\d+)\.", routes)}
    free = [octet for octet in range(256) if octet not in used]
    if not free:
        raise NetnsError(f"no free {SUBNET}.X.0/24 subnet")
    return random.choice(free)


def _tbf(namespace: str | None, device: str, bits_per_second: float, rate: str) -> None:
    # the bucket holds 2 ms at the rate (at least 32 KB, well above a 1500-byte frame): a
    # short message is not held back by the timer's granularity, a long transfer runs at the
    # rate; queued packets wait at most 50 ms before tbf drops them and TCP backs off
    burst = max(32 * 1024, int(bits_per_second / 8 * 2e-3))
    where = ["-n", namespace] if namespace else []
    _run(
        "tc", *where, "qdisc", "replace", "dev", device, "root",
        "tbf", "rate", rate, "burst", str(burst), "latency", "50ms",
    )  # fmt: skip


def _disable_ipv6(namespace: str | None, device: str | None = None) -> None:
    # no router solicitations, neighbour discovery or multicast reports on the links: the
    # byte counters then show the cluster's traffic (and ARP) only
    if namespace is None:
        Path(f"/proc/sys/net/ipv6/conf/{device}/disable_ipv6").write_text("1\n")
        return
    _run(
        "ip", "netns", "exec", namespace, "sysctl", "-q", "-w",
        "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
    )  # fmt: skip


class NetnsCluster:
    """A Dask scheduler and ``n_workers`` workers, each in a network namespace, over TLS.

    Use as a context manager::

        with NetnsCluster(n_workers=2, rate="1gbit") as cluster:
            with cluster.client() as client:
                ...

    Parameters
    ----------
    n_workers : int, default=2
        Worker processes, one single-threaded worker per namespace.
    rate : str or None, default="1gbit"
        Rate of every link, both directions (a ``tc`` rate: ``"100mbit"``, ``"10gbit"``);
        None leaves the links unshaped. The client's link is shaped too.
    memory_limit : int or str, optional
        Each worker's Dask memory limit; by default the machine's memory over
        ``n_workers + 1`` (the client's process counted).
    timeout : float, default=60
        Seconds for the scheduler and all workers to come up.

    Attributes (once started)
    -------------------------
    run_id : str
        The six hex digits in every name of the run (``dpd-<run_id>...``).
    address : str
        The scheduler's ``tls://`` address.
    security : distributed.Security
        The client's TLS settings (certificate files in the run's temporary directory).
    worker_addresses : list of str
        The workers' ``tls://`` addresses, worker 0 first.
    hosts : list of Host
        The client's, the scheduler's and the workers' ends of the switch.
    pids : dict of str to int
        Process id of the scheduler and of each worker, by role.

    Notes
    -----
    The processes die with the thread that started them (a parent-death signal, set only
    when that thread is the main thread): start a cluster from a thread that outlives it.
    """

    def __init__(self, n_workers=2, *, rate="1gbit", memory_limit=None, timeout=60.0):
        if int(n_workers) != n_workers or n_workers < 1:
            raise ValueError(f"n_workers must be a positive integer, got {n_workers!r}")
        if n_workers > 240:
            raise ValueError(f"at most 240 workers fit one subnet, got {n_workers}")
        self.n_workers = int(n_workers)
        self.rate = rate
        self.bits_per_second = None if rate is None else parse_rate(rate)
        if memory_limit is None:
            memory_limit = psutil.virtual_memory().total // (self.n_workers + 1)
        self.memory_limit = memory_limit
        self.timeout = float(timeout)
        self.run_id = None
        self.address = None
        self.security = None
        self.worker_addresses = []
        self.hosts = []
        self.pids = {}
        self._processes = {}
        self._directory = None
        self._logs = []
        self._closed = False

    # -- lifetime

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.close()

    def start(self):
        """Create the namespaces and links, then start the scheduler and the workers."""
        if self.run_id is not None:
            raise RuntimeError("a NetnsCluster starts once")
        reason = unavailable_reason()
        if reason:
            raise NetnsError(f"cannot start a namespace cluster: {reason}")
        cleanup_stale_runs()
        atexit.register(self.close)
        try:
            self._register()
            self._build_network()
            files = _certificates(self._directory, [host.ip for host in self.hosts])
            self._start_processes(files)
        except BaseException:
            # an error or Ctrl-C half way: nothing of the run stays
            self.close()
            raise
        return self

    def close(self):
        """Stop the processes, delete the namespaces (bridge and veths with them), remove the
        temporary directory and the run's record. Idempotent."""
        if self._closed or self.run_id is None:
            return
        self._closed = True
        atexit.unregister(self.close)
        pids = [process.pid for process in self._processes.values()]
        # workers first: a worker whose scheduler is gone would wait to reconnect
        workers = [p for role, p in self._processes.items() if role != "scheduler"]
        _end_processes([p.pid for p in workers], grace=3.0)
        with _registry_lock():
            errors = _teardown(self.run_id, pids)
        for process in self._processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        for handle in self._logs:
            handle.close()
        if errors:
            raise NetnsError(f"teardown of run {self.run_id} left: {'; '.join(errors)}")

    # -- use

    def client(self, **kwargs):
        """A :class:`distributed.Client` of this cluster (TLS settings given; not the default
        client unless ``set_as_default=True``). Close it before the cluster."""
        kwargs.setdefault("set_as_default", False)
        return Client(self.address, security=self.security, **kwargs)

    def link_bytes(self) -> dict[str, LinkBytes]:
        """Bytes each host (by role) has sent into and received from its link so far."""
        listed = json.loads(_run("ip", "-n", self._bridge, "-s", "-j", "link", "show").stdout)
        stats = {link["ifname"]: link["stats64"] for link in listed}
        # a bridge port receives what its host sends and transmits what its host receives
        return {
            host.role: LinkBytes(stats[host.port]["rx"]["bytes"], stats[host.port]["tx"]["bytes"])
            for host in self.hosts
        }

    def logs(self) -> dict[str, str]:
        """The scheduler's and workers' output so far, by role."""
        return {
            role: (self._directory / f"{role}.log").read_text(errors="replace")
            for role in self._processes
        }

    # -- setup steps

    def _register(self):
        with _registry_lock():
            records = _records()
            run_id = secrets.token_hex(3)
            while run_id in records:
                run_id = secrets.token_hex(3)
            self.run_id = run_id
            subnet = _free_subnet(records)
            self._directory = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
            record = {
                "pid": os.getpid(),
                "started": _process_start_time(),
                "tempdir": str(self._directory),
                "subnet": subnet,
            }
            (REGISTRY / f"{self.name}.json").write_text(json.dumps(record))
        base = f"{SUBNET}.{subnet}"
        self._bridge = f"{self.name}-br"
        self.hosts = [
            Host("client", None, self.name, "p-c", f"{base}.1"),
            Host("scheduler", f"{self.name}-s", "eth0", "p-s", f"{base}.2"),
            *(
                Host(f"worker-{k}", f"{self.name}-w{k}", "eth0", f"p-w{k}", f"{base}.{10 + k}")
                for k in range(self.n_workers)
            ),
        ]

    @property
    def name(self) -> str:
        """``dpd-<run_id>``: the root namespace's link, the prefix of every other name."""
        return f"{PREFIX}{self.run_id}"

    def _build_network(self):
        bridge = self._bridge
        for namespace in [bridge, *(host.namespace for host in self.hosts if host.namespace)]:
            _run("ip", "netns", "add", namespace)
            _disable_ipv6(namespace)
        _run("ip", "-n", bridge, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", bridge, "link", "set", "br0", "up")
        for host in self.hosts:
            inside = ["netns", host.namespace] if host.namespace else []
            _run(
                "ip", "link", "add", host.interface, *inside,
                "type", "veth", "peer", "name", host.port, "netns", bridge,
            )  # fmt: skip
            if host.namespace is None:
                _disable_ipv6(None, host.interface)
            where = ["-n", host.namespace] if host.namespace else []
            _run("ip", "-n", bridge, "link", "set", host.port, "master", "br0", "up")
            _run("ip", *where, "addr", "add", f"{host.ip}/24", "dev", host.interface)
            _run("ip", *where, "link", "set", host.interface, "up")
            if host.namespace:
                # a process reaching its own address goes through lo
                _run("ip", *where, "link", "set", "lo", "up")
            if self.rate is not None:
                _tbf(host.namespace, host.interface, self.bits_per_second, self.rate)
                _tbf(bridge, host.port, self.bits_per_second, self.rate)

    def _command(self, host: Host, *args: str) -> list[str]:
        command = ["ip", "netns", "exec", host.namespace]
        if threading.current_thread() is threading.main_thread() and shutil.which("setpriv"):
            # killed with this process even when it dies without its teardown
            command += ["setpriv", "--pdeathsig", "KILL"]
        return [*command, sys.executable, "-m", "dask", *args]

    def _spawn(self, host: Host, command, environ):
        log = open(self._directory / f"{host.role}.log", "wb")
        self._logs.append(log)
        # a session of its own: a Ctrl-C at the terminal reaches this process only, whose
        # teardown then stops them in order
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=self._directory, env=environ, start_new_session=True,
        )  # fmt: skip
        self._processes[host.role] = process
        self.pids[host.role] = process.pid

    def _start_processes(self, files):
        tls = ["--tls-ca-file", files["ca"], "--tls-cert", files["cert"], "--tls-key", files["key"]]
        environ = {
            **os.environ,
            "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
            "PYTHONUNBUFFERED": "1",
        }
        scheduler = self.hosts[1]
        scheduler_file = self._directory / "scheduler.json"
        self._spawn(
            scheduler,
            self._command(
                scheduler, "scheduler", "--protocol", "tls", "--host", scheduler.ip,
                "--port", str(SCHEDULER_PORT), "--no-dashboard", "--no-jupyter",
                "--dashboard-address", "127.0.0.1:0",
                "--scheduler-file", str(scheduler_file), *tls,
            ),
            environ,
        )  # fmt: skip
        self.address = f"tls://{scheduler.ip}:{SCHEDULER_PORT}"
        deadline = time.monotonic() + self.timeout
        while not scheduler_file.exists():
            self._check_alive(deadline, "the scheduler")
            time.sleep(0.05)
        worker_environ = {**environ, **WORKER_ENVIRON}
        for host in self.hosts[2:]:
            self._spawn(
                host,
                self._command(
                    host, "worker", self.address, "--name", f"{self.name}-{host.role}",
                    "--host", host.ip, "--nthreads", "1", "--nworkers", "1", "--no-nanny",
                    "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
                    "--memory-limit", str(self.memory_limit),
                    "--local-directory", str(self._directory / host.role),
                    "--death-timeout", str(int(self.timeout)), *tls,
                ),
                worker_environ,
            )  # fmt: skip

        self.security = Security(
            tls_ca_file=files["ca"],
            tls_client_cert=files["cert"],
            tls_client_key=files["key"],
            require_encryption=True,
        )
        with self.client(timeout=max(1.0, deadline - time.monotonic())) as client:
            while len(client.scheduler_info()["workers"]) < self.n_workers:
                self._check_alive(deadline, f"{self.n_workers} workers")
                time.sleep(0.05)
            names = {
                info["name"]: address
                for address, info in client.scheduler_info()["workers"].items()
            }
        self.worker_addresses = [names[f"{self.name}-{host.role}"] for host in self.hosts[2:]]

    def _check_alive(self, deadline, waiting_for):
        for role, process in self._processes.items():
            if process.poll() is not None:
                raise NetnsError(
                    f"the {role} of run {self.run_id} exited ({process.returncode}) while "
                    f"waiting for {waiting_for}:\n{self._log_tail(role)}"
                )
        if time.monotonic() > deadline:
            tails = "\n".join(self._log_tail(role) for role in self._processes)
            raise NetnsError(f"{waiting_for} not up after {self.timeout:g} s:\n{tails}")

    def _log_tail(self, role, lines=15):
        text = (self._directory / f"{role}.log").read_text(errors="replace")
        return f"--- {role}:\n" + "\n".join(text.splitlines()[-lines:])


def _process_start_time() -> float:
    return psutil.Process(os.getpid()).create_time()
