"""The data arguments of ``train``, ``evaluate`` and ``predict``: a store, or a file to ingest.

A ``DATA`` (or ``--test``) argument is told by what it is: a directory is a store (a zarr
group, with its ``zarr.json``), opened as it is; a file is svmlight / libsvm text, or DNA
sequences with ``--format sequences``, ingested into a store once and reused while the file,
the ingest options and the store format stay the same (:mod:`daskpd.io._cache`). The stores go
under ``--store DIR``, by default the user's cache (``$DASKPD_CACHE``, else e.g.
``~/.cache/daskpd``); the command prints on stderr which store it uses. The ingestion runs in
this process's threads before any cluster starts (the file is this machine's); with
``--scheduler`` the workers must read the store, so ``--store`` on storage they share is
required. A malformed file is the one-line error of ``daskpd ingest`` (exit code 2), and
leaves no store.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from daskpd.cli._options import (
    UsageError,
    _check_format_flags,
    _flags_given,
    _positive_int,
    add_options,
    option,
)

#: Where a file's ingested values are stored (``ingest`` and the file inputs).
DTYPE_OPTION = option(
    "--dtype",
    "stored values (default float64 for svmlight, float32 for sequences)",
    choices=("float32", "float64"),
)


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """The options of a file given as data (ingest options, where its store goes)."""
    input_options = (
        option(
            "--format",
            "what a file given as data holds (default svmlight)",
            choices=("svmlight", "sequences"),
            default="svmlight",
        ),
        option(
            "--store",
            "put the stores made from files in DIR (default: the cache, $DASKPD_CACHE or "
            "~/.cache/daskpd); required with --scheduler, on storage the workers can read",
            metavar="DIR",
        ),
        option(
            "--zero-based",
            "svmlight column ids start at 0 (yes) or 1 (no); auto as scikit-learn, per file: "
            "say yes or no when a test file may lack the training file's column 0",
            choices=("auto", "yes", "no"),
            default="auto",
        ),
        DTYPE_OPTION,
    )
    add_options(
        parser,
        input_options + sequence_options(prefix="sequences: "),
        "file input",
        "DATA (and --test) may be an svmlight/libsvm file, or a DNA sequences file with "
        "--format sequences: ingested into a store once, reused while the file and these "
        "options are unchanged",
    )


# The flags of each input format, with their defaults: what is given when not the default.
SVMLIGHT_FLAGS = {"--zero-based": "auto"}
SEQUENCE_FLAGS = {
    "--degree": None,
    "--hash-bits": None,
    "--sequence-column": None,
    "--label-column": None,
    "--positive": None,
    "--allow-n": False,
}


def sequence_options(*, prefix=""):
    """The options of DNA sequences' features and labels (:data:`SEQUENCE_FLAGS`), shared by
    ``ingest`` and the file inputs of the training commands.

    Parameters
    ----------
    prefix : str, default=""
        Put before each help text (where the options stand among svmlight ones).

    Returns
    -------
    tuple
        :func:`~daskpd.cli._options.option` entries.
    """
    return (
        option("--degree", f"{prefix}weighted-degree order K (default 8)", _positive_int),
        option("--hash-bits", f"{prefix}hash WD features into 2^b columns", _positive_int),
        option("--sequence-column", f"{prefix}CSV sequence column (default sequence)"),
        option("--label-column", f"{prefix}CSV label column (default label)"),
        option(
            "--positive",
            f"{prefix}label value(s) mapped to +1, others to -1 (repeatable)",
            action="append",
            metavar="LABEL",
        ),
        option("--allow-n", f"{prefix}accept N letters", action="store_true"),
    )


def is_file_input(path) -> bool:
    """Whether ``path`` names a file to ingest (a local file, not a store directory)."""
    return path is not None and os.path.isfile(path)


def ingest_options(args, *, n_features=None) -> tuple[str, dict]:
    """The kind of a file input and the ingest function's options, from the command line.

    Parameters
    ----------
    args : argparse.Namespace
    n_features : int, optional
        Columns of the training data or model, for an svmlight file scored or tested
        against it (its own largest index may be smaller).
    """
    kind = args.format
    _check_format_flags(args, kind, SVMLIGHT_FLAGS, SEQUENCE_FLAGS)
    if kind == "svmlight":
        options = {
            "zero_based": {"auto": "auto", "yes": True, "no": False}[args.zero_based],
            "dtype": args.dtype or "float64",
        }
        if n_features is not None:
            options["n_features"] = int(n_features)
        return kind, options
    return kind, {
        "degree": args.degree or 8,
        "hash_bits": args.hash_bits or 0,
        "sequence_column": args.sequence_column or "sequence",
        "label_column": args.label_column or "label",
        "positive": None if args.positive is None else sorted(args.positive),
        "allow_n": bool(args.allow_n),
        "dtype": args.dtype or "float32",
    }


def check_file_inputs(args, paths) -> None:
    """Refuse, before any work, what cannot run or would be ignored: a file input with a
    remote scheduler and no ``--store`` (its workers could not read this machine's cache),
    and the file-input options when no argument is a file."""
    files = [path for path in paths if is_file_input(path)]
    if files and getattr(args, "scheduler", None) and not args.store:
        raise UsageError(
            f"{files[0]} is a file: with --scheduler, give --store DIR on storage the "
            "workers can read for the store made from it"
        )
    if not files:
        defaults = {"--format": "svmlight", "--store": None, **SVMLIGHT_FLAGS, "--dtype": None}
        unused = _flags_given(args, {**defaults, **SEQUENCE_FLAGS})
        if unused:
            raise UsageError(f"{', '.join(unused)} apply only to a file given as data")


def open_input(args, path, what, *, n_features=None):
    """The dataset of a ``DATA``-like argument: a store opened, or a file ingested (or its
    store reused); says on stderr which store a file's data is in.

    Parameters
    ----------
    args : argparse.Namespace
        With the options of :func:`add_input_options`.
    path : str
    what : str
        The argument's name, for messages (``"DATA"``, ``"--test"``).
    n_features : int, optional
        See :func:`ingest_options`.
    """
    from daskpd.data import open_dataset

    if not is_file_input(path):
        try:
            return open_dataset(path)
        except FileNotFoundError:
            raise UsageError(f"{what} {path!r} does not exist") from None
    import dask

    from daskpd.io._cache import cache_root, ingest_cached

    kind, options = ingest_options(args, n_features=n_features)
    root = args.store if args.store else cache_root()
    tick = time.perf_counter()
    # this machine's threads: the file is this machine's, and no cluster has started yet
    # no bar off a terminal (None: tqdm's test of the stream), so an error stays one line
    disable = True if getattr(args, "no_progress", False) else None
    with (
        dask.config.set(scheduler="threads"),
        _IngestProgress(f"ingesting {os.path.basename(path)}", disable=disable),
    ):
        dataset, store, ingested = ingest_cached(path, kind=kind, options=options, root=root)
    if ingested:
        print(
            f"{what} {path}: ingested into {store} ({time.perf_counter() - tick:.1f} s)",
            file=sys.stderr,
        )
    else:
        print(f"{what} {path}: reusing {store} (same file and options)", file=sys.stderr)
    return dataset


class _IngestProgress:
    """A tqdm bar on stderr over the ingestion's parse tasks (Dask's local-scheduler
    callbacks): nothing shows when the store is reused, as no task runs."""

    def __init__(self, description, *, disable=False):
        self.description = description
        self.disable = disable
        self._callback = None

    def __enter__(self):
        from dask.callbacks import Callback

        progress = self

        class _Bar(Callback):
            def _start_state(self, dsk, state):
                from tqdm.auto import tqdm

                total = sum(len(state.get(name, ())) for name in ("ready", "waiting", "running"))
                progress.bar = tqdm(
                    total=total,
                    desc=progress.description,
                    unit="task",
                    file=sys.stderr,
                    disable=progress.disable,
                    leave=False,
                )

            def _posttask(self, key, result, dsk, state, worker_id):
                progress.bar.update(1)

            def _finish(self, dsk, state, errored):
                progress.bar.close()

        self._callback = _Bar()
        self._callback.__enter__()
        return self

    def __exit__(self, *exc_info):
        self._callback.__exit__(*exc_info)
        return False
