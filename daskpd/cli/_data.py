"""The data commands of ``daskpd``: partition, info, ingest, generate."""

from __future__ import annotations

import argparse
import contextlib

from daskpd import _sidefiles
from daskpd.cli._inputs import SEQUENCE_FLAGS, SVMLIGHT_FLAGS, add_sequence_options
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
    subcommand,
)

# The commands import the layers they run in their functions: `daskpd --help` loads 95
# modules, not the ~850 of numba, SciPy, zarr and Dask (measured here).

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
    parser.add_argument("data", metavar="DATA", help="dataset directory")
    parser.add_argument(
        "--verify", action="store_true", help="also re-read every array and check checksums"
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
    parser.add_argument("paths", nargs="+", metavar="SOURCE... DEST", help="inputs, then output")
    parser.add_argument(
        "--format",
        choices=("auto", "svmlight", "sequences"),
        default="auto",
        help="input kind (auto: sequences for .csv/.tsv/.fa/.fasta[.gz|.bz2|.xz], else svmlight)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing DEST")
    parser.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default=None,
        help="stored values (default float64 for svmlight, float32 for sequences)",
    )
    parser.add_argument(
        "--task",
        choices=("auto", "binary", "multiclass", "regression"),
        default="auto",
        help="binary needs labels -1/+1, multiclass integer class labels (auto: binary when "
        "every label is -1/+1, multiclass for 3 to 1000 distinct integer labels, else "
        "regression)",
    )
    parser.add_argument(
        "--chunk-bytes",
        type=_positive_int("--chunk-bytes"),
        default=None,
        help="bytes of text parsed at a time by one task",
    )
    parser.add_argument(
        "--range-bytes",
        type=_positive_int("--range-bytes"),
        default=None,
        help="bytes of a plain file per task",
    )
    parser.add_argument(
        "--rows-per-block",
        type=_positive_int("--rows-per-block"),
        default=None,
        help="rows per row block of the dataset",
    )
    svm = parser.add_argument_group("svmlight")
    svm.add_argument(
        "--zero-based",
        choices=("auto", "yes", "no"),
        default="auto",
        help="column ids start at 0 (yes) or 1 (no); auto as scikit-learn",
    )
    svm.add_argument(
        "--binary",
        choices=("auto", "yes", "no"),
        default=None,
        help="store no values (svmlight auto: when all values are 1; "
        "sequences: yes = 0/1 WD indicators)",
    )
    svm.add_argument("--ignore-qid", action="store_true", help="drop qid:N tokens")
    svm.add_argument("--n-features", type=_positive_int("--n-features"), default=None)
    seq = parser.add_argument_group("sequences")
    add_sequence_options(seq)
    seq.add_argument("--sequence-format", choices=("auto", "csv", "fasta"), default=None)
    seq.add_argument("--delimiter", default=None, help="CSV field separator (default ,)")
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_ingest)


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
    parser.add_argument(
        "kind",
        choices=("splice", "text", "classification", "regression", "factorized", "spdc-ridge"),
        metavar="KIND",
        help="splice | text | classification | regression | factorized | spdc-ridge",
    )
    parser.add_argument("dest", metavar="DEST", help="output dataset directory")
    parser.add_argument(
        "--n-samples",
        type=_positive_int("--n-samples"),
        default=None,
        help="rows (default 10000; spdc-ridge 500)",
    )
    parser.add_argument(
        "--n-features",
        type=_positive_int("--n-features"),
        default=None,
        help="columns (default 1000; spdc-ridge 500; text 2**20)",
    )
    parser.add_argument(
        "--density",
        type=_positive_float("--density"),
        default=None,
        help="expected fraction of nonzeros per row; 1 = dense",
    )
    parser.add_argument(
        "--n-informative",
        type=_positive_int("--n-informative"),
        default=None,
        help="nonzeros of the planted model (default: all)",
    )
    parser.add_argument("--noise", type=float, default=None, help="noise standard deviation")
    parser.add_argument("--flip-y", type=float, default=None, help="fraction of flipped labels")
    parser.add_argument(
        "--binary-features", action="store_true", default=None, help="0/1 sparse features"
    )
    parser.add_argument("--rank", type=_positive_int("--rank"), default=None)
    parser.add_argument("--factorized-task", choices=("regression", "classification"), default=None)
    parser.add_argument(
        "--positive-rate",
        type=_positive_float("--positive-rate"),
        default=None,
        help="splice, text: fraction of positives (default 0.01; text 0.05)",
    )
    parser.add_argument(
        "--mean-tokens",
        type=_positive_float("--mean-tokens"),
        default=None,
        help="text: mean tokens per document (default 150)",
    )
    parser.add_argument("--site", choices=("acceptor", "donor"), default=None)
    parser.add_argument(
        "--length",
        type=_positive_int("--length"),
        default=None,
        help="splice: window length (default 60)",
    )
    parser.add_argument("--degree", type=_positive_int("--degree"), default=None)
    parser.add_argument("--hash-bits", type=_positive_int("--hash-bits"), default=None)
    parser.add_argument(
        "--binary", action="store_true", default=None, help="splice: 0/1 WD indicators"
    )
    parser.add_argument(
        "--order",
        type=int,
        choices=(0, 1),
        default=None,
        help="splice: Markov order of the window model (default 1)",
    )
    parser.add_argument("--dtype", choices=("float32", "float64"), default=None)
    parser.add_argument("--chunk-rows", type=_positive_int("--chunk-rows"), default=None)
    parser.add_argument("--seed", type=int, default=0, help="random_state (default 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing DEST")
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_generate)


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
