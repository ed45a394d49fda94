"""The ``daskpd`` command.

Each subcommand is one ``_add_<name>`` (arguments) and one ``_run_<name>`` (work) pair. User
mistakes (bad paths, bad option values, malformed input files) raise :class:`UsageError` or a
``ValueError`` / ``OSError`` from the library; :func:`main` turns them into a one-line message on
stderr and exit code 2, never a traceback.

The code lives in private modules by command group: ``_data`` (partition, info, ingest,
generate), ``_training`` (train, evaluate, predict, demo) and ``_bench`` (bench), over
``_options`` (:class:`UsageError`, the cluster and value options, the ``subcommand``
registry). This module builds the parser and runs :func:`main`.
"""

from __future__ import annotations

import argparse
import sys

from daskpd.cli._options import SUBCOMMANDS, UsageError, _one_line

# Importing a command group registers its subcommands, and ``daskpd --help`` lists them in
# registration order: this order, which the import sorter must leave alone.
from daskpd.cli import _data, _training, _bench  # noqa: F401  # isort: skip

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
    from daskpd import __version__

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
    try:
        result = args.run(args)
    except KeyboardInterrupt:
        print("daskpd: interrupted", file=sys.stderr)
        return 130
    except (UsageError, ValueError, OSError, KeyError) as exc:
        print(f"daskpd {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    return int(result or 0)
