"""The ``daskpd`` command.

Each subcommand is one ``_add_<name>`` (arguments) and one ``_run_<name>`` (work) pair. User
mistakes (bad paths, bad option values, malformed input files) raise :class:`UsageError` or a
``ValueError`` / ``OSError`` from the library; :func:`main` turns them into a one-line message on
stderr and exit code 2, never a traceback. SIGTERM stops a command as Ctrl-C does (exit code
143, Ctrl-C's 130), through its ``finally`` blocks, so that what it made on the side goes with
it; every command also removes the shared memory of dead runs (:mod:`daskpd._sidefiles`).

The code lives in private modules by command group: ``_data`` (partition, info, ingest,
generate), ``_training`` (train, evaluate, predict, solvers), ``_demo`` (demo) and ``_bench``
(bench), over ``_options`` (:class:`UsageError`, the cluster and value options, the
``subcommand`` registry) and ``_inputs`` (a store or a file given as data). This module builds
the parser and runs :func:`main`.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from daskpd import _sidefiles
from daskpd.cli._options import SUBCOMMANDS, UsageError, _one_line

# Importing a command group registers its subcommands, and ``daskpd --help`` lists them in
# registration order: this order, which the import sorter must leave alone.
from daskpd.cli import _data, _training, _demo, _bench  # noqa: F401  # isort: skip
from daskpd import __version__

__all__ = ["build_parser", "main"]


# --------------------------------------------------------------------------------------------
# entry point


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors: one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``daskpd`` command."""
    parser = _Parser(
        prog="daskpd",
        description="Out-of-core primal-dual training of regularized linear models on Dask.",
    )

    parser.add_argument("--version", action="version", version=f"daskpd {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name, (help_text, add_function) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        add_function(sub)
    return parser


def main(argv=None) -> int:
    """Run the ``daskpd`` command; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # a killed run's shared memory (RAM until a reboot) goes at the next command, any command
    _sidefiles.sweep_shared_memory()
    try:
        with _terminate_as_interrupt():
            result = args.run(args)
    except _Terminated:
        print("daskpd: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("daskpd: interrupted", file=sys.stderr)
        return 130
    except (UsageError, ValueError, OSError, KeyError) as exc:
        print(f"daskpd {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    finally:
        # and this run's own, if it stopped half-way: its cluster is closed by now, so what
        # its workers were still making has no live owner left
        _sidefiles.sweep_shared_memory()
    return int(result or 0)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that its cleanup (``finally`` blocks, the
    cluster's close) runs as after Ctrl-C."""


def _raise_terminated(signum, frame):
    raise _Terminated


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM raises :class:`_Terminated` inside the block (main thread only; the previous
    handler comes back after it, for callers of :func:`main` in a longer-lived process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
