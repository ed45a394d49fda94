"""The data commands of ``daskpd``: partition, info, ingest, generate."""

from __future__ import annotations

import argparse
import contextlib

from daskpd import _sidefiles
from daskpd.cli._inputs import DTYPE_OPTION, SEQUENCE_FLAGS, SVMLIGHT_FLAGS, sequence_options
from daskpd.cli._options import (
    UsageError,
    _add_cluster_options,
    _check_format_flags,
    _check_not_input,
    _check_out,
    _cluster_asked,
    _cluster_options,
    _positive_float,
    _positive_int,
    _print_dashboard,
    _print_json,
    add_options,
    option,
    subcommand,
)

# The commands import the layers they run in their functions: `daskpd --help` loads 95
# modules, not the ~850 of numba, SciPy, zarr and Dask (measured here).

# --------------------------------------------------------------------------------------------
# partition, info (owner: dataset format)


@subcommand("partition", "derive the tiled layout of a P x P grid of a dataset (streamed)")
def _add_partition(parser: argparse.ArgumentParser) -> None:
    add_options(
        parser,
        (
            option("data", "dataset directory", metavar="DATA"),
            option("--grid", "grid size P", _positive_int, required=True, metavar="P"),
            option("--overwrite", "rebuild the grid if it already exists", action="store_true"),
        ),
    )
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_partition)


def _run_partition(args) -> int:
    from daskpd._cluster import cluster_client
    from daskpd.data import partition_dataset

    # --scheduler / --workers: one task per row group on Dask workers; else one streaming pass
    start = _cluster_asked(args)
    with cluster_client(_cluster_options(args), start=start) as client:
        if client is not None:
            _print_dashboard(client)
        dataset = partition_dataset(args.data, args.grid, overwrite=args.overwrite, client=client)
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
    add_options(
        parser,
        (
            option("data", "dataset directory", metavar="DATA"),
            option("--verify", "also re-read every array and check checksums", action="store_true"),
        ),
    )
    parser.set_defaults(run=_run_info)


def _run_info(args) -> int:
    from daskpd.data import open_dataset

    dataset = open_dataset(args.data, verify=args.verify)
    summary = {"path": dataset.path, "format_version": dataset.format_version}
    summary.update(dataset.summary())
    summary["stored_bytes"] = dataset.stored_bytes
    if args.verify:
        summary["verified"] = True
    _print_json(summary)
    return 0


# --------------------------------------------------------------------------------------------
# ingest, generate (owner: ingestion and generators)

_SEQUENCE_SUFFIXES = (".csv", ".tsv", ".fa", ".fasta", ".fna")


@contextlib.contextmanager
def _sweeping(dest):
    """Remove ``DEST``'s leftovers at the end of the block, after the cluster inside it has
    closed: what its workers were writing when the run stopped (their locks gone with them),
    now rather than at the next write to ``DEST``."""
    try:
        yield
    finally:
        _sidefiles.sweep(dest)


def _ingest_client(args):
    """Cluster of an ingest/generate run: a scheduler or ``--workers`` asks for Dask workers;
    otherwise local threads (the numba kernels release the GIL)."""
    from daskpd._cluster import cluster_client

    start = _cluster_asked(args)
    return cluster_client(_cluster_options(args), start=start)


@subcommand("ingest", "convert svmlight/libsvm text or DNA sequences into a dataset")
def _add_ingest(parser: argparse.ArgumentParser) -> None:
    add_options(parser, _INGEST_OPTIONS)
    add_options(parser, _INGEST_SVMLIGHT_OPTIONS, "svmlight")
    add_options(parser, sequence_options() + _INGEST_SEQUENCE_OPTIONS, "sequences")
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_ingest)


_INGEST_OPTIONS = (
    option("paths", "inputs, then output", nargs="+", metavar="SOURCE... DEST"),
    option(
        "--format",
        "input kind (auto: sequences for .csv/.tsv/.fa/.fasta[.gz|.bz2|.xz], else svmlight)",
        choices=("auto", "svmlight", "sequences"),
        default="auto",
    ),
    option("--overwrite", "replace an existing DEST", action="store_true"),
    DTYPE_OPTION,
    option(
        "--task",
        "binary needs labels -1/+1, multiclass integer class labels (auto: binary when every "
        "label is -1/+1, multiclass for 3 to 1000 distinct integer labels, else regression)",
        choices=("auto", "binary", "multiclass", "regression"),
        default="auto",
    ),
    option("--chunk-bytes", "bytes of text parsed at a time by one task", _positive_int),
    option("--range-bytes", "bytes of a plain file per task", _positive_int),
    option("--rows-per-block", "rows per row block of the dataset", _positive_int),
)
_INGEST_SVMLIGHT_OPTIONS = (
    option(
        "--zero-based",
        "column ids start at 0 (yes) or 1 (no); auto as scikit-learn",
        choices=("auto", "yes", "no"),
        default="auto",
    ),
    option(
        "--binary",
        "store no values (svmlight auto: when all values are 1; sequences: yes = 0/1 WD "
        "indicators)",
        choices=("auto", "yes", "no"),
    ),
    option("--ignore-qid", "drop qid:N tokens", action="store_true"),
    option("--n-features", parse=_positive_int),
)
_INGEST_SEQUENCE_OPTIONS = (
    option("--sequence-format", choices=("auto", "csv", "fasta")),
    option("--delimiter", "CSV field separator (default ,)"),
)


def _looks_like_sequences(path: str) -> bool:
    name = path.lower()
    for suffix in (".gz", ".bz2", ".xz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name.endswith(_SEQUENCE_SUFFIXES)


def _run_ingest(args) -> int:
    if len(args.paths) < 2:
        raise UsageError("need at least one SOURCE and a DEST")
    *sources, dest = args.paths
    # Before any parsing: a mistyped DEST must not become a tree of new directories, nor
    # replace a SOURCE.
    _check_not_input(dest, "DEST", [("SOURCE", source) for source in sources])
    _check_out(dest, args.overwrite, "DEST")
    kind = args.format
    if kind == "auto":
        kind = "sequences" if all(_looks_like_sequences(p) for p in sources) else "svmlight"
    _check_format_flags(
        args,
        kind,
        {**SVMLIGHT_FLAGS, "--ignore-qid": False, "--n-features": None},
        {**SEQUENCE_FLAGS, "--sequence-format": None, "--delimiter": None},
    )
    writer_options = {"rows_per_block": args.rows_per_block} if args.rows_per_block else None
    sizes = {}
    if args.chunk_bytes:
        sizes["chunk_bytes"] = args.chunk_bytes
    if args.range_bytes:
        sizes["range_bytes"] = args.range_bytes
    with _sweeping(dest), _ingest_client(args) as client:
        if client is not None and _cluster_asked(args):
            _print_dashboard(client)
        if kind == "svmlight":
            from daskpd.io.svmlight import ingest_svmlight

            if args.binary == "auto" or args.binary is None:
                binary = "auto"
            else:
                binary = args.binary == "yes"
            dataset = ingest_svmlight(
                sources,
                dest,
                zero_based={"auto": "auto", "yes": True, "no": False}[args.zero_based],
                dtype=args.dtype or "float64",
                binary=binary,
                task=args.task,
                qid="ignore" if args.ignore_qid else "error",
                n_features=args.n_features,
                overwrite=args.overwrite,
                client=client,
                writer_options=writer_options,
                **sizes,
            )
        else:
            from daskpd.io.sequences import ingest_sequences

            if args.binary == "auto":
                raise UsageError("--binary for sequences is yes or no")
            dataset = ingest_sequences(
                sources,
                dest,
                file_format=args.sequence_format or "auto",
                degree=args.degree or 8,
                hash_bits=args.hash_bits or 0,
                binary=args.binary == "yes",
                sequence_column=args.sequence_column or "sequence",
                label_column=args.label_column or "label",
                positive=args.positive,
                delimiter=args.delimiter or ",",
                allow_n=args.allow_n,
                task=args.task,
                dtype=args.dtype or "float32",
                overwrite=args.overwrite,
                client=client,
                writer_options=writer_options,
                **sizes,
            )
    summary = {"path": dataset.path}
    summary.update(dataset.summary())
    _print_json(summary)
    return 0


# options of `daskpd generate` and the kinds that accept each of them
_GENERATE_OPTIONS = {
    "n_features": ("classification", "regression", "factorized", "spdc-ridge", "text"),
    "density": ("classification", "regression"),
    "n_informative": ("classification", "regression", "factorized"),
    "noise": ("classification", "regression", "factorized", "spdc-ridge"),
    "flip_y": ("classification",),
    "binary_features": ("classification", "regression"),
    "rank": ("factorized",),
    "factorized_task": ("factorized",),
    "positive_rate": ("splice", "text"),
    "mean_tokens": ("text",),
    "site": ("splice",),
    "length": ("splice",),
    "degree": ("splice",),
    "hash_bits": ("splice",),
    "binary": ("splice",),
    "order": ("splice",),
}


@subcommand("generate", "write a synthetic dataset (splice, text, classification, ...)")
def _add_generate(parser: argparse.ArgumentParser) -> None:
    add_options(parser, _GENERATE_TABLE)
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_generate)


_GENERATE_TABLE = (
    option(
        "kind",
        "splice | text | classification | regression | factorized | spdc-ridge",
        choices=("splice", "text", "classification", "regression", "factorized", "spdc-ridge"),
        metavar="KIND",
    ),
    option("dest", "output dataset directory", metavar="DEST"),
    option("--n-samples", "rows (default 10000; spdc-ridge 500)", _positive_int),
    option("--n-features", "columns (default 1000; spdc-ridge 500; text 2**20)", _positive_int),
    option("--density", "expected fraction of nonzeros per row; 1 = dense", _positive_float),
    option("--n-informative", "nonzeros of the planted model (default: all)", _positive_int),
    option("--noise", "noise standard deviation", type=float),
    option("--flip-y", "fraction of flipped labels", type=float),
    option("--binary-features", "0/1 sparse features", action="store_true", default=None),
    option("--rank", parse=_positive_int),
    option("--factorized-task", choices=("regression", "classification")),
    option(
        "--positive-rate",
        "splice, text: fraction of positives (default 0.01; text 0.05)",
        _positive_float,
    ),
    option("--mean-tokens", "text: mean tokens per document (default 150)", _positive_float),
    option("--site", choices=("acceptor", "donor")),
    option("--length", "splice: window length (default 60)", _positive_int),
    option("--degree", parse=_positive_int),
    option("--hash-bits", parse=_positive_int),
    option("--binary", "splice: 0/1 WD indicators", action="store_true", default=None),
    option(
        "--order",
        "splice: Markov order of the window model (default 1)",
        type=int,
        choices=(0, 1),
    ),
    option("--dtype", choices=("float32", "float64")),
    option("--chunk-rows", parse=_positive_int),
    option("--seed", "random_state (default 0)", type=int, default=0),
    option("--overwrite", "replace an existing DEST", action="store_true"),
)


def _run_generate(args) -> int:
    from daskpd import generators

    given = {name: getattr(args, name) for name in _GENERATE_OPTIONS}
    given = {name: value for name, value in given.items() if value is not None}
    unused = [name for name in given if args.kind not in _GENERATE_OPTIONS[name]]
    if unused:
        flags = ", ".join("--" + name.replace("_", "-") for name in unused)
        raise UsageError(f"{flags} do(es) not apply to {args.kind}")
    _check_out(args.dest, args.overwrite, "DEST")
    common = {"random_state": args.seed, "overwrite": args.overwrite, "chunk_rows": args.chunk_rows}
    if args.dtype:
        common["dtype"] = args.dtype
    with _sweeping(args.dest), _ingest_client(args) as client:
        if client is not None and _cluster_asked(args):
            _print_dashboard(client)
        common["client"] = client
        if args.kind == "splice":
            dataset = generators.make_splice_like(
                args.dest, args.n_samples or 10000, **given, **common
            )
            planted = None
        elif args.kind == "text":
            dataset = generators.make_text_like(
                args.dest, args.n_samples or 10000, given.pop("n_features", 2**20), **given,
                **common,
            )  # fmt: skip
            planted = None
        elif args.kind in ("classification", "regression"):
            make = getattr(generators, f"make_{args.kind}")
            generated = make(
                args.dest, args.n_samples or 10000, given.pop("n_features", 1000), **given, **common
            )
            dataset, planted = generated.dataset, generators.planted_path(args.dest)
        elif args.kind == "factorized":
            if "factorized_task" in given:
                given["task"] = given.pop("factorized_task")
            generated = generators.make_factorized(
                args.dest,
                args.n_samples or 10000,
                given.pop("n_features", 1000),
                given.pop("rank", 10),
                **given,
                **common,
            )
            dataset, planted = generated.dataset, generators.planted_path(args.dest)
        else:
            generated = generators.make_spdc_ridge(
                args.dest, args.n_samples or 500, given.pop("n_features", 500), **given, **common
            )
            dataset, planted = generated.dataset, generators.planted_path(args.dest)
    summary = {"path": dataset.path, "planted": planted}
    summary.update(dataset.summary())
    _print_json(summary)
    return 0
