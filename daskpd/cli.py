"""The ``daskpd`` command.

Each subcommand is one ``_add_<name>`` (arguments) and one ``_run_<name>`` (work) pair. User
mistakes (bad paths, bad option values, malformed input files) raise :class:`UsageError` or a
``ValueError`` / ``OSError`` from the library; :func:`main` turns them into a one-line message on
stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys


class UsageError(Exception):
    """A mistake of the person at the keyboard: printed as one line, exit code 2."""


# --------------------------------------------------------------------------------------------
# cluster options shared by every subcommand that runs Dask work


def _add_cluster_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster")
    group.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="address of an existing Dask scheduler (default: start a LocalCluster)",
    )
    group.add_argument(
        "--workers",
        type=_positive_int("--workers"),
        default=None,
        help="worker processes of the LocalCluster (default: one per core)",
    )
    group.add_argument(
        "--memory-limit",
        default=None,
        help="memory limit per LocalCluster worker, e.g. 2GiB (default: Dask's share)",
    )


def _cluster_options(args):
    from daskpd._cluster import ClusterOptions

    return ClusterOptions(
        scheduler=args.scheduler, n_workers=args.workers, memory_limit=args.memory_limit
    )


def _print_dashboard(client) -> None:
    link = getattr(client, "dashboard_link", None)
    if link:
        print(f"Dask dashboard: {link}", file=sys.stderr)


def _positive_int(name):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {value}")
        return value

    return parse


def _positive_float(name):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{name} must be > 0, got {value}")
        return value

    return parse


def _print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=float)
    sys.stdout.write("\n")


# --------------------------------------------------------------------------------------------
# subcommands


SUBCOMMANDS: dict[str, tuple] = {}


def subcommand(name: str, help_text: str):
    """Register ``_add``/``_run`` functions of a subcommand under ``name``."""

    def decorate(add_function):
        SUBCOMMANDS[name] = (help_text, add_function)
        return add_function

    return decorate


# --------------------------------------------------------------------------------------------
# partition, info (owner: dataset format)


@subcommand("partition", "derive the tiled layout of a P x P grid of a dataset (streamed)")
def _add_partition(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", metavar="DATA", help="dataset directory")
    parser.add_argument(
        "--grid", required=True, type=_positive_int("--grid"), metavar="P", help="grid size P"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="rebuild the grid if it already exists"
    )
    parser.set_defaults(run=_run_partition)


def _run_partition(args) -> int:
    from daskpd.dataset import partition_dataset

    dataset = partition_dataset(args.data, args.grid, overwrite=args.overwrite)
    info = dataset.grid(args.grid)
    tile_nnz = info.tile_ptr[:, 1:] - info.tile_ptr[:, :-1]
    _print_json(
        {
            "path": dataset.path,
            "grid": args.grid,
            "row_bounds": info.row_bounds.tolist(),
            "col_bounds": info.col_bounds.tolist(),
            "tile_nnz_min": int(tile_nnz.min()),
            "tile_nnz_max": int(tile_nnz.max()),
        }
    )
    return 0


@subcommand("info", "print a JSON summary of a dataset")
def _add_info(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", metavar="DATA", help="dataset directory")
    parser.add_argument(
        "--verify", action="store_true", help="also re-read every array and check checksums"
    )
    parser.set_defaults(run=_run_info)


def _run_info(args) -> int:
    from daskpd.dataset import open_dataset

    dataset = open_dataset(args.data, verify=args.verify)
    summary = {"path": dataset.path, "format_version": dataset.format_version}
    summary.update(dataset.summary())
    summary["stored_bytes"] = dataset.stored_bytes
    if args.verify:
        summary["verified"] = True
    _print_json(summary)
    return 0


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
        message = exc.args[0] if exc.args else str(exc)
        print(f"daskpd {args.command}: error: {message}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
