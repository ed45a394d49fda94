"""Connecting to, or starting, the Dask cluster a run uses.

Policy (the same for the CLI and the estimators):

* ``scheduler`` given: connect to that scheduler and fail fast, with the address in the
  message, if it does not answer. A ``tls://`` address is reached with a
  ``distributed.Security``: given, built from certificate files, or read from Dask's
  configuration (``distributed.comm.tls.*``); without one it is an error before any
  connection is tried.
* otherwise, an active ``distributed.Client`` is reused when one exists;
* otherwise a ``LocalCluster`` is started only when the caller asks for one
  (``start=True``), with one single-threaded worker process per core by default, so numba
  kernels of different tasks never share a GIL or a cache line, and the memory settings of
  :data:`WORKER_ENVIRON`.

What a ``LocalCluster`` started here listens on: its scheduler, nannies and workers (and
the workers' HTTP servers) on :data:`LOOPBACK` only, and its dashboard on
:data:`LOOPBACK_DASHBOARD` unless ``ClusterOptions.dashboard_address`` (``daskpd
--dashboard-address``) names another address. Dask's own default for a dashboard given as a
bare port (``":0"``, ``":8787"``) is every interface. With a ``scheduler`` address, where
things listen is the user's cluster's business.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from dataclasses import dataclass
from typing import Any

# dask and distributed (0.4 s and 1-1.7 s to import, measured here) load in the functions
# that start or reach a cluster, not when this module is imported (data/resident imports it).

#: Where a LocalCluster started here listens: its scheduler, nannies and workers.
LOOPBACK = "127.0.0.1"
#: Where its dashboard listens by default: the loopback, on a port the system chooses.
LOOPBACK_DASHBOARD = f"{LOOPBACK}:0"

#: The module each worker of a LocalCluster started here runs at its start (Dask's preload):
#: it keeps the worker from logging again, as a traceback, the input errors that the client
#: reports in one line.
WORKER_PRELOAD = "daskpd._worker_logging"

#: Dask configuration keys of a client's TLS settings (``distributed.Security()`` reads them).
TLS_CONFIG_KEYS = {
    "tls_ca_file": "distributed.comm.tls.ca-file",
    "tls_client_cert": "distributed.comm.tls.client.cert",
    "tls_client_key": "distributed.comm.tls.client.key",
}

#: Environment of the worker processes of a ``LocalCluster`` started here, over
#: distributed's ``distributed.nanny.pre-spawn-environ`` (both take effect only when a
#: process starts). A value set in the shell before this module was imported wins. Measured
#: on the first read of a worker's rows at 1e8 nonzeros (400 MB of new arrays), BENCHMARKS.md
#: "Worker memory settings".
WORKER_ENVIRON = {
    # numpy asks for transparent huge pages on large arrays; with the kernel's THP defrag
    # at "madvise" (the usual default) such a fault may first compact memory. The read took
    # 0.4-1.0 s with them, by how fragmented memory was (worse after other big processes),
    # and a steady 0.42-0.44 s without; the kernels' passes took the same time.
    "NUMPY_MADVISE_HUGEPAGE": "0",
    # distributed sets MALLOC_TRIM_THRESHOLD_=65536, which also freezes glibc's mmap
    # threshold at 128 KiB: every decoded zarr chunk (4 MB) became new mmapped memory,
    # faulted in page by page (0.53-0.58 s against 0.42-0.44 s for the read). These are the
    # largest values glibc's own dynamic thresholds reach, fixed.
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(64 << 20),
}
# read before any nanny of this process writes its pre-spawn values into os.environ
_SHELL_ENVIRON = {name: os.environ.get(name) for name in WORKER_ENVIRON}


@contextlib.contextmanager
def _worker_environ():
    """Dask configuration and ``os.environ`` under which a nanny spawns with
    :data:`WORKER_ENVIRON` (``os.environ`` restored after; the nanny keeps the values for
    the workers it restarts)."""
    import dask

    values = {
        name: _SHELL_ENVIRON[name] if _SHELL_ENVIRON[name] is not None else value
        for name, value in WORKER_ENVIRON.items()
    }
    # distributed takes a variable from os.environ over its configuration: an earlier
    # nanny of this process may have left its own value there
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        with dask.config.set(
            {f"distributed.nanny.pre-spawn-environ.{name}": v for name, v in values.items()}
        ):
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass(frozen=True)
class ClusterOptions:
    """How to reach or build the cluster of a run.

    Parameters
    ----------
    scheduler : str or None
        Address of an existing scheduler (``tcp://host:8786``). ``None`` means local.
    n_workers : int or None
        Worker processes of a local cluster; ``None`` means one per core.
    memory_limit : str or int or None
        Memory limit per worker of a local cluster (``"2GiB"``, bytes); ``None`` is Dask's
        default share of the machine.
    threads_per_worker : int
        Threads per local worker process.
    timeout : float
        Seconds to wait for a given scheduler before giving up.
    profile : bool
        Whether the workers of a local cluster run Dask's statistical profiler (the
        dashboard's profile page). Off by default: it samples every thread's stack 100
        times a second, and on a machine whose cores all run kernels that time comes out
        of the kernels (DSO's epochs measurably slower, BENCHMARKS.md).
    tls_ca_file : str or None
        PEM file of the certificate authority that signed the scheduler's certificate (the
        ``--tls-ca-file`` of ``dask scheduler``). With ``tls_cert``, the run connects to a
        ``tls://`` scheduler with ``distributed.Security(tls_ca_file=..., tls_client_cert=...,
        tls_client_key=..., require_encryption=True)``.
    tls_cert : str or None
        PEM file of this client's certificate, signed by a CA the cluster trusts (Dask's TLS is
        mutual: the scheduler checks the client too).
    tls_key : str or None
        PEM file of the key of ``tls_cert``; ``None`` when the key is inside ``tls_cert``.
    security : distributed.Security or None
        A ready security object instead of the three files. With neither, a ``tls://``
        scheduler is reached with the settings of Dask's configuration
        (``distributed.comm.tls.ca-file``, ``distributed.comm.tls.client.cert`` and ``.key``),
        and is an error when those are not set.
    dashboard_address : str or None
        ``HOST:PORT`` where the dashboard of a local cluster listens (port 0: one the system
        chooses; an empty host, ``:8787``, is every interface, as in Dask). ``None`` means
        :data:`LOOPBACK_DASHBOARD`, reachable from this machine only.

    Raises
    ------
    ValueError
        When TLS settings come without a ``tls://`` scheduler address, or as both files and
        a ``security`` object, or as a certificate without a CA (or the reverse); when
        ``dashboard_address`` is not ``HOST:PORT`` or comes with a ``scheduler``; when a TLS
        file holds no PEM certificate or a key that is not its certificate's (named).
    FileNotFoundError
        When a TLS file does not exist (the message names the parameter and the file).
    """

    scheduler: str | None = None
    n_workers: int | None = None
    memory_limit: str | int | None = None
    threads_per_worker: int = 1
    timeout: float = 10.0
    profile: bool = False
    tls_ca_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    security: Any = None
    dashboard_address: str | None = None

    def __post_init__(self):
        if self.n_workers is not None and int(self.n_workers) < 1:
            raise ValueError(f"n_workers must be >= 1, got {self.n_workers!r}")
        if int(self.threads_per_worker) < 1:
            raise ValueError(f"threads_per_worker must be >= 1, got {self.threads_per_worker!r}")
        if self.dashboard_address is not None:
            if self.scheduler:
                # no parameter is accepted and then ignored
                raise ValueError(
                    f"dashboard_address (--dashboard-address) applies to a LocalCluster started "
                    f"here; the scheduler {self.scheduler!r} has its own dashboard"
                )
            _split_address(self.dashboard_address)
        files = {
            name: getattr(self, name)
            for name in ("tls_ca_file", "tls_cert", "tls_key")
            if getattr(self, name) is not None
        }
        if not files and self.security is None:
            return
        given = ", ".join([*files, *(["security"] if self.security is not None else [])])
        if not str(self.scheduler or "").startswith("tls://"):
            # a LocalCluster started here speaks TCP, and a tcp:// scheduler has no use for
            # certificates: accepting them would silently leave the run unencrypted
            raise ValueError(
                f"{given} apply to a tls:// scheduler address, got scheduler={self.scheduler!r}"
            )
        if files and self.security is not None:
            raise ValueError(f"give either security or the TLS files ({given}), not both")
        if files and (self.tls_ca_file is None or self.tls_cert is None):
            raise ValueError(
                "TLS needs both tls_ca_file (--tls-ca-file) and tls_cert (--tls-cert), got "
                f"only {given}"
            )
        for name, path in files.items():
            _check_tls_file(path, f"{name} (--{_FLAGS[name]})")
        if files:
            _check_tls_contents(
                {
                    name: (os.fspath(path), f"{name} (--{_FLAGS[name]})")
                    for name, path in files.items()
                }
            )

    def client_security(self):
        """The ``distributed.Security`` the client connects with, or ``None`` for Dask's default.

        Returns
        -------
        distributed.Security or None
            ``security``, or one built from the TLS files, or (for a ``tls://`` scheduler
            without either) one read from Dask's configuration; ``None`` otherwise.

        Raises
        ------
        ValueError
            When the scheduler is ``tls://`` and no TLS settings are given or configured, or
            a configured file holds no PEM certificate or key (named).
        FileNotFoundError
            When a file named in Dask's TLS configuration does not exist.
        """
        if self.security is not None:
            return self.security
        from distributed import Security

        if self.tls_ca_file is not None:
            return Security(
                tls_ca_file=os.fspath(self.tls_ca_file),
                tls_client_cert=os.fspath(self.tls_cert),
                tls_client_key=None if self.tls_key is None else os.fspath(self.tls_key),
                require_encryption=True,
            )
        if not str(self.scheduler or "").startswith("tls://"):
            return None
        import dask

        configured = {name: dask.config.get(key, None) for name, key in TLS_CONFIG_KEYS.items()}
        if configured["tls_ca_file"] is None or configured["tls_client_cert"] is None:
            raise ValueError(
                f"scheduler {self.scheduler!r} uses TLS but no certificates are given: pass "
                "--tls-ca-file, --tls-cert and --tls-key (ClusterOptions tls_ca_file, tls_cert, "
                f"tls_key), or set {TLS_CONFIG_KEYS['tls_ca_file']}, "
                f"{TLS_CONFIG_KEYS['tls_client_cert']} and {TLS_CONFIG_KEYS['tls_client_key']} "
                "in Dask's configuration"
            )
        files = {
            name: (value, f"{TLS_CONFIG_KEYS[name]} (Dask configuration)")
            for name, value in configured.items()
            if value is not None and not _is_pem_text(value)
        }
        for value, what in files.values():
            _check_tls_file(value, what)
        if len(files) == sum(value is not None for value in configured.values()):
            # files only (PEM text in the configuration is Dask's to read)
            renamed = {"tls_client_cert": "tls_cert", "tls_client_key": "tls_key"}
            _check_tls_contents({renamed.get(name, name): item for name, item in files.items()})
        return Security(require_encryption=True)


_FLAGS = {"tls_ca_file": "tls-ca-file", "tls_cert": "tls-cert", "tls_key": "tls-key"}


def _is_pem_text(value) -> bool:
    """Whether a TLS setting holds the certificate itself (Dask accepts PEM text there)."""
    return isinstance(value, str) and "-----BEGIN" in value


def _split_address(address):
    """``(host, port)`` of a ``HOST:PORT`` text (``[::1]:0`` for IPv6; an empty host is every
    interface); a ``ValueError`` naming the option otherwise."""
    host, sep, port = str(address).rpartition(":") if isinstance(address, str) else ("", "", "")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not port.isdigit() or int(port) > 65535 or any(c.isspace() for c in host):
        raise ValueError(
            "dashboard_address (--dashboard-address) must be HOST:PORT, e.g. 127.0.0.1:8787 "
            f"(port 0: any free port; ':8787': every interface), got {address!r}"
        )
    return host, int(port)


def dashboard_link(client):
    """The link to the dashboard of ``client``'s cluster, where it really listens, or None.

    For a ``LocalCluster`` started in this process, the address its HTTP server is bound to
    (distributed's own ``dashboard_link`` puts the dashboard's port on the scheduler's host,
    which is another address when the dashboard listens elsewhere); a dashboard on every
    interface is shown on the loopback, saying so. For another cluster, the link its
    scheduler gives.
    """
    cluster = getattr(client, "cluster", None)
    server = getattr(getattr(cluster, "scheduler", None), "http_server", None)
    host, port = getattr(server, "address", None), getattr(server, "port", None)
    if host is None or not port:
        return getattr(client, "dashboard_link", None) or None
    every = host in ("", "0.0.0.0", "::")
    shown = LOOPBACK if every else host
    if ":" in shown:
        shown = f"[{shown}]"
    link = f"http://{shown}:{port}/status"
    return f"{link} (listening on every interface)" if every else link


def _check_tls_file(path, what) -> None:
    if not os.path.isfile(os.fspath(path)):
        raise FileNotFoundError(f"{what}: no such file {os.fspath(path)!r}")


class _EncryptedKey(Exception):
    """Raised by the password callback: the key needs a passphrase (Dask will ask for it)."""


def _no_passphrase():
    raise _EncryptedKey


def _check_tls_contents(files) -> None:
    """Load the client's TLS files as its connection will, naming the file that fails.

    Without this, a file that is not a PEM certificate (or a key that does not match its
    certificate) failed inside the connection attempt, as an ``ssl.SSLError`` (an
    ``OSError``), and was reported as a scheduler that did not answer.

    Parameters
    ----------
    files : dict of str to (str, str)
        ``tls_ca_file``, ``tls_cert`` and optionally ``tls_key`` (as named in
        :data:`TLS_CONFIG_KEYS`): each file's path and how a message names it.

    Raises
    ------
    ValueError
        Naming the file and what is wrong with it.
    """

    def refused(name, problem, exc):
        path, what = files[name]
        reason = getattr(exc, "reason", None) or exc
        return ValueError(f"{what} {path!r} {problem} ({reason})")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca_path, _ = files["tls_ca_file"]
    try:
        context.load_verify_locations(cafile=ca_path)
    except (ssl.SSLError, ValueError, OSError) as exc:
        raise refused("tls_ca_file", "holds no PEM certificate", exc) from None
    cert_path, _ = files["tls_cert"]
    try:
        # its certificates alone (a key beside them is passed over)
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=cert_path)
    except (ssl.SSLError, ValueError, OSError) as exc:
        raise refused("tls_cert", "holds no PEM certificate", exc) from None
    key_path = files["tls_key"][0] if "tls_key" in files else None
    try:
        context.load_cert_chain(cert_path, key_path, password=_no_passphrase)
    except _EncryptedKey:
        return  # a passphrase: OpenSSL asks for it when the connection loads the key
    except (ssl.SSLError, ValueError, OSError) as exc:
        if key_path is None:
            raise refused(
                "tls_cert", "holds no PEM key for its certificate (give --tls-key)", exc
            ) from None
        raise refused(
            "tls_key", f"is not the PEM key of the certificate {cert_path!r}", exc
        ) from None


class SchedulerUnreachable(RuntimeError):
    """The scheduler address given by the user did not answer."""


def active_client():
    """Return the current ``distributed.Client`` or ``None`` when there is none."""
    try:
        from distributed import get_client

        return get_client()
    except (ValueError, ImportError):
        return None


@contextlib.contextmanager
def cluster_client(options: ClusterOptions | None = None, *, start: bool = True):
    """Yield a ``distributed.Client`` according to the policy of this module.

    A client or cluster created here is closed on exit; a reused one is left alone.

    Parameters
    ----------
    options : ClusterOptions, optional
        Where to connect, or what to start.
    start : bool, default=True
        Start a ``LocalCluster`` when no scheduler is given and no client is active. With
        ``False`` the context yields ``None`` instead (in-process, threaded scheduler).

    Yields
    ------
    client : distributed.Client or None
    """
    import dask
    from distributed import Client, LocalCluster
    from distributed.comm.core import FatalCommClosedError

    options = options or ClusterOptions()
    if options.scheduler:
        security = options.client_security()
        try:
            client = Client(options.scheduler, timeout=options.timeout, security=security)
        except FatalCommClosedError as exc:
            # the scheduler answered and the TLS handshake failed: say so, not "no answer"
            raise SchedulerUnreachable(
                f"the Dask scheduler at {options.scheduler!r} refused the connection ({exc})"
            ) from None
        except (OSError, TimeoutError) as exc:
            raise SchedulerUnreachable(
                f"no Dask scheduler answered at {options.scheduler!r} within "
                f"{options.timeout:g} s ({exc.__class__.__name__})"
            ) from None
        with client:
            yield client
        return
    existing = active_client()
    if (existing is not None or not start) and options.dashboard_address is not None:
        raise ValueError(
            "dashboard_address (--dashboard-address) applies to a LocalCluster started here, "
            "and none is started: "
            + ("an active client is used" if existing is not None else "start=False")
        )
    if existing is not None:
        yield existing
        return
    if not start:
        yield None
        return
    n_workers = options.n_workers or os.cpu_count() or 1
    kwargs = {}
    if options.memory_limit is not None:
        kwargs["memory_limit"] = options.memory_limit
    # One single-threaded process per core: the numba loops are memory-bound, and a
    # process per worker isolates a crashing task and gives each worker its own memory cap.
    # the workers take their configuration from this process when they start
    profile = {"distributed.worker.profile.enabled": bool(options.profile)}
    with dask.config.set(profile), _worker_environ():
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=options.threads_per_worker,
            processes=True,
            # Dask's default, but stated: the scheduler, nannies and workers on the loopback
            host=LOOPBACK,
            dashboard_address=options.dashboard_address or LOOPBACK_DASHBOARD,
            # a task failing on damaged input is reported by the client, in one line
            preload=[WORKER_PRELOAD],
            **kwargs,
        )
    # this process reaches the workers it started: gathers and scatters go straight to them,
    # not through the scheduler (a model's w of 37 MB: about 0.02 s against 0.04-0.18 s)
    client = Client(cluster, direct_to_workers=True)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def worker_addresses(client):
    """The addresses of the cluster's workers, sorted, as the scheduler knows them now.

    Not ``client.scheduler_info()["workers"]``: that returns the client's cached identity,
    which the client's periodic refresh can replace, between the fetch and the return, with
    one that lists no workers (distributed 2026.8).
    """
    return tuple(sorted(client.nthreads()))


def worker_memory_limits(client):
    """Each worker's memory limit in bytes (0: none), by address, as the scheduler knows it."""

    def limits(dask_scheduler):
        return {a: int(ws.memory_limit or 0) for a, ws in dask_scheduler.workers.items()}

    return client.run_on_scheduler(limits)


def block_worker(workers, block, n_blocks):
    """The worker of ``workers`` (sorted addresses) that row block ``block`` goes to.

    Consecutive blocks on one worker, the same one in every graph of a run: evaluations,
    scoring and SPDC's epochs pin a block there, so the rows a worker keeps
    (:mod:`daskpd.data.resident`) are the ones it is given again.
    """
    return workers[block * len(workers) // n_blocks]


def worker_memory_limit():
    """The memory limit of the Dask worker running this code, in bytes (0: none, or no worker)."""
    try:
        from distributed import get_worker

        return int(get_worker().memory_manager.memory_limit or 0)
    except (ImportError, ValueError, AttributeError):
        return 0


def reset_peak_rss():
    """Reset this process's peak resident memory (``VmHWM``) to its current RSS (run on
    workers by ``client.run``); False where the kernel does not allow it (not Linux).

    So that :func:`peak_rss_mib` measures from here: a run's peak, not the process's.
    """
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def peak_rss_mib():
    """This process's peak resident memory in MiB (``VmHWM``; run on workers by
    ``client.run``), NaN where ``/proc`` has none.

    Not ``getrusage``'s ``ru_maxrss``: that also counts the parent's peak, which survives
    the exec that starts a worker process.
    """
    try:
        with open("/proc/self/status") as status:
            lines = [line for line in status if line.startswith("VmHWM:")]
    except OSError:  # no /proc (not Linux)
        return float("nan")
    return int(lines[0].split()[1]) / 1024 if lines else float("nan")
