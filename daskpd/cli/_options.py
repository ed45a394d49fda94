"""What the subcommands of the ``daskpd`` command share: the :class:`UsageError` of the
person at the keyboard, the cluster options and the client of a run, the option value types,
JSON output, and the ``subcommand`` registry that :func:`daskpd.cli.build_parser` reads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

# daskpd._cluster in the functions that use it: `daskpd --help` does not load it (cli/_data).


class UsageError(Exception):
    """A mistake of the person at the keyboard: printed as one line, exit code 2."""


# --------------------------------------------------------------------------------------------
# cluster options shared by every subcommand that runs Dask work


def option(flag, help_text=None, parse=None, **keywords):
    """One entry of an option table (see :func:`add_options`).

    Parameters
    ----------
    flag : str
        The option's flag, or a positional argument's name.
    help_text : str, optional
    parse : callable, optional
        A rule such as :func:`_positive_int`, called with ``flag``: the value's type, whose
        errors name the flag.
    **keywords
        argparse's other keywords (``default``, ``choices``, ``metavar``, ``action``).

    Returns
    -------
    tuple of (str, dict)
    """
    if parse is not None:
        keywords["type"] = parse(flag)
    return flag, {"help": help_text, **keywords}


def add_options(parser, options, title=None, description=None):
    """Add a table of :func:`option` entries to ``parser``, in its group ``title`` if given.

    Returns
    -------
    argparse.ArgumentParser or argument group
        Where the options went.
    """
    target = parser if title is None else parser.add_argument_group(title, description)
    for flag, keywords in options:
        target.add_argument(flag, **keywords)
    return target


def _add_cluster_options(parser: argparse.ArgumentParser) -> None:
    add_options(parser, CLUSTER_OPTIONS, "cluster")


def _cluster_asked(args):
    """Whether the command line asks for Dask workers (a scheduler, a LocalCluster shape or
    dashboard, or TLS settings, which are an error without a tls:// scheduler)."""
    tls = args.tls_ca_file or args.tls_cert or args.tls_key
    local = args.workers or args.threads_per_worker or args.dashboard_address
    return bool(args.scheduler or local or tls)


def _cluster_options(args):
    from daskpd._cluster import ClusterOptions

    return ClusterOptions(
        scheduler=args.scheduler,
        n_workers=args.workers,
        memory_limit=args.memory_limit,
        threads_per_worker=args.threads_per_worker or 1,
        tls_ca_file=args.tls_ca_file,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        timeout=args.connect_timeout,
        dashboard_address=args.dashboard_address,
    )


def _print_dashboard(client) -> None:
    from daskpd._cluster import dashboard_link

    link = dashboard_link(client)
    if link:
        print(f"Dask dashboard: {link}", file=sys.stderr)


def _bounded(name, convert, lowest, *, strict=False):
    """A parser of one number of the type ``convert`` (int or float), at least ``lowest``
    (above it when ``strict``); its errors name the flag ``name``."""
    kind = "an integer" if convert is int else "a number"
    relation = ">" if strict else ">="

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be {kind}, got {text!r}") from None
        # written as "not in range" so that a float NaN is refused too
        if not (value > lowest if strict else value >= lowest):
            raise argparse.ArgumentTypeError(f"{name} must be {relation} {lowest}, got {value}")
        return value

    return parse


def _positive_int(name):
    return _bounded(name, int, 1)


def _nonnegative_int(name):
    return _bounded(name, int, 0)


def _positive_float(name):
    return _bounded(name, float, 0, strict=True)


def _nonnegative_float(name):
    return _bounded(name, float, 0)


#: The options of the cluster a command runs its Dask work on (:func:`add_options`); the TLS
#: flags have the names of `dask scheduler` / `dask worker`'s own.
CLUSTER_OPTIONS = (
    option(
        "--scheduler",
        "address of an existing Dask scheduler (default: start a LocalCluster)",
        metavar="ADDRESS",
    ),
    option(
        "--workers",
        "worker processes of the LocalCluster (default: one per core)",
        _positive_int,
    ),
    option(
        "--memory-limit",
        "memory limit per LocalCluster worker, e.g. 2GiB (default: Dask's share)",
    ),
    option(
        "--threads-per-worker",
        "threads of each LocalCluster worker process (default: 1)",
        _positive_int,
    ),
    option(
        "--dashboard-address",
        "where the LocalCluster's dashboard listens (default: 127.0.0.1:0, this machine "
        "only, any free port; ':8787' is every interface)",
        metavar="HOST:PORT",
    ),
    option(
        "--connect-timeout",
        "how long to wait for the --scheduler to answer (default: 10)",
        _positive_float,
        default=10.0,
        metavar="SECONDS",
    ),
    option(
        "--tls-ca-file",
        "CA certificate for a tls:// --scheduler (default: Dask's distributed.comm.tls "
        "configuration)",
        metavar="PEM",
    ),
    option(
        "--tls-cert",
        "client certificate (signed by a CA the cluster trusts) for a tls:// --scheduler",
        metavar="PEM",
    ),
    option("--tls-key", "key of --tls-cert (default: the key inside --tls-cert)", metavar="PEM"),
)


def _flags_given(args, flags) -> list[str]:
    """The flags of ``flags`` (flag -> its default) whose value in ``args`` is not the
    default, in the table's order."""
    return [
        flag
        for flag, default in flags.items()
        if getattr(args, flag[2:].replace("-", "_")) != default
    ]


def _check_format_flags(args, kind, svmlight_flags, sequence_flags) -> None:
    """Refuse the flags of one input format given with the other (UsageError naming them).

    Parameters
    ----------
    args : argparse.Namespace
    kind : {"svmlight", "sequences"}
    svmlight_flags, sequence_flags : dict
        Each format's own flags and their defaults (see :func:`_flags_given`).
    """
    unused = _flags_given(args, sequence_flags if kind == "svmlight" else svmlight_flags)
    if unused:
        raise UsageError(f"{', '.join(unused)} do(es) not apply to --format {kind}")


def _number(name):
    """A float; its range is the library's rule (e.g. ``alpha``'s, checked by the plan)."""

    def parse(text):
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None

    return parse


def _print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=float)
    sys.stdout.write("\n")


@contextlib.contextmanager
def _run_client(args, *, start):
    """The client of a run (or None for --in-process), with errors turned into one line."""
    from daskpd._cluster import SchedulerUnreachable, cluster_client

    if getattr(args, "in_process", False):
        if _cluster_asked(args) or args.memory_limit:
            raise UsageError("--in-process cannot be combined with cluster options")
        yield None
        return
    try:
        context = cluster_client(_cluster_options(args), start=start)
        client = context.__enter__()
    except SchedulerUnreachable as exc:
        raise UsageError(str(exc)) from None
    try:
        if client is not None:
            _print_dashboard(client)
        yield client
    except BaseException:
        if not context.__exit__(*sys.exc_info()):
            raise
    else:
        context.__exit__(None, None, None)


def _check_out(path, overwrite, what="--out") -> None:
    if path is None:
        return
    target = Path(path)
    if target.exists() and not overwrite:
        raise UsageError(f"{what} {path!r} already exists (pass --overwrite to replace it)")
    if not target.parent.is_dir():
        raise UsageError(f"{what} {path!r}: directory {str(target.parent)!r} does not exist")


def _check_not_input(out, what, inputs, *, holding=True) -> None:
    """Refuse an output that is one of the inputs or lies inside one, whatever --overwrite
    says: writing it would replace or alter that input.

    Parameters
    ----------
    out : str or None
        The output path (``None``: no output asked).
    what : str
        Its parameter, as the message names it (``--out``, ``OUT``, ``DEST``).
    inputs : iterable of (str, str or None)
        Each input's parameter and path (``None``: not given).
    holding : bool, default=True
        Also refuse an output that holds an input (replacing it removes the input).
    """
    if out is None:
        return
    out_real = os.path.realpath(out)
    for name, path in inputs:
        if path is None:
            continue
        real = os.path.realpath(path)
        # a symlink resolves to its target; a hard link (or a bind mount) only by its inode
        if out_real == real or _same_inode(out, path):
            found = "is"
        elif _lies_inside(out_real, real):
            found = "lies inside"
        elif holding and _lies_inside(real, out_real):
            found = "holds"
        else:
            continue
        raise UsageError(
            f"{what} {os.fspath(out)!r} {found} the input {name} {os.fspath(path)!r}; an "
            "output never replaces an input, even with --overwrite: choose another path"
        )


def _same_inode(a, b) -> bool:
    try:
        first, second = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _lies_inside(child, parent) -> bool:
    return child != parent and os.path.commonpath([child, parent]) == parent


def _one_line(exc: BaseException) -> str:
    """The message of a user-facing error, on one line.

    An ``OSError`` raised by the operating system carries ``(errno, strerror)`` as its
    arguments, so its first argument is a bare number; its text and file name are used
    instead.
    """
    if isinstance(exc, OSError) and exc.strerror:
        message = exc.strerror
        if exc.filename is not None:
            message = f"{exc.filename}: {message}"
    else:
        message = exc.args[0] if exc.args else str(exc)
    return " ".join(str(message).split())


# --------------------------------------------------------------------------------------------
# subcommands


SUBCOMMANDS: dict[str, tuple] = {}


def subcommand(name: str, help_text: str):
    """Register ``_add``/``_run`` functions of a subcommand under ``name``."""

    def decorate(add_function):
        SUBCOMMANDS[name] = (help_text, add_function)
        return add_function

    return decorate
