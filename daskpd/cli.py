"""The ``daskpd`` command.

Each subcommand is one ``_add_<name>`` (arguments) and one ``_run_<name>`` (work) pair. User
mistakes (bad paths, bad option values, malformed input files) raise :class:`UsageError` or a
``ValueError`` / ``OSError`` from the library; :func:`main` turns them into a one-line message on
stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
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
    group.add_argument(
        "--threads-per-worker",
        type=_positive_int("--threads-per-worker"),
        default=None,
        help="threads of each LocalCluster worker process (default: 1)",
    )
    # the names of `dask scheduler` / `dask worker`'s own TLS flags
    group.add_argument(
        "--tls-ca-file",
        metavar="PEM",
        default=None,
        help="CA certificate for a tls:// --scheduler (default: Dask's distributed.comm.tls "
        "configuration)",
    )
    group.add_argument(
        "--tls-cert",
        metavar="PEM",
        default=None,
        help="client certificate (signed by a CA the cluster trusts) for a tls:// --scheduler",
    )
    group.add_argument(
        "--tls-key",
        metavar="PEM",
        default=None,
        help="key of --tls-cert (default: the key inside --tls-cert)",
    )


def _cluster_asked(args):
    """Whether the command line asks for Dask workers (a scheduler, a LocalCluster shape or
    TLS settings, which are an error without a tls:// scheduler)."""
    tls = args.tls_ca_file or args.tls_cert or args.tls_key
    return bool(args.scheduler or args.workers or args.threads_per_worker or tls)


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
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_partition)


def _run_partition(args) -> int:
    from daskpd._cluster import cluster_client
    from daskpd.dataset import partition_dataset

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
# ingest, generate (owner: ingestion and generators)

_SEQUENCE_SUFFIXES = (".csv", ".tsv", ".fa", ".fasta", ".fna")


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
        choices=("auto", "binary", "regression"),
        default="auto",
        help="binary needs labels -1/+1 (auto: binary when they are)",
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
    seq.add_argument(
        "--degree",
        type=_positive_int("--degree"),
        default=None,
        help="weighted-degree order K (default 8)",
    )
    seq.add_argument(
        "--hash-bits",
        type=_positive_int("--hash-bits"),
        default=None,
        help="hash WD features into 2^b columns",
    )
    seq.add_argument("--sequence-format", choices=("auto", "csv", "fasta"), default=None)
    seq.add_argument("--sequence-column", default=None, help="CSV column (default sequence)")
    seq.add_argument("--label-column", default=None, help="CSV column (default label)")
    seq.add_argument(
        "--positive",
        action="append",
        default=None,
        metavar="LABEL",
        help="label value(s) mapped to +1, others to -1 (repeatable)",
    )
    seq.add_argument("--delimiter", default=None, help="CSV field separator (default ,)")
    seq.add_argument("--allow-n", action="store_true", help="accept N letters")
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
    # Before any parsing: a mistyped DEST must not become a tree of new directories.
    _check_out(dest, args.overwrite, "DEST")
    kind = args.format
    if kind == "auto":
        kind = "sequences" if all(_looks_like_sequences(p) for p in sources) else "svmlight"
    svm_only = {
        "--zero-based": args.zero_based != "auto",
        "--ignore-qid": args.ignore_qid,
        "--n-features": args.n_features is not None,
    }
    seq_only = {
        "--degree": args.degree is not None,
        "--hash-bits": args.hash_bits is not None,
        "--sequence-format": args.sequence_format is not None,
        "--sequence-column": args.sequence_column is not None,
        "--label-column": args.label_column is not None,
        "--positive": args.positive is not None,
        "--delimiter": args.delimiter is not None,
        "--allow-n": args.allow_n,
    }
    unused = [
        name for name, given in (seq_only if kind == "svmlight" else svm_only).items() if given
    ]
    if unused:
        raise UsageError(f"{', '.join(unused)} do(es) not apply to --format {kind}")
    writer_options = {"rows_per_block": args.rows_per_block} if args.rows_per_block else None
    sizes = {}
    if args.chunk_bytes:
        sizes["chunk_bytes"] = args.chunk_bytes
    if args.range_bytes:
        sizes["range_bytes"] = args.range_bytes
    with _ingest_client(args) as client:
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
    from daskpd import datasets

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
    with _ingest_client(args) as client:
        if client is not None and _cluster_asked(args):
            _print_dashboard(client)
        common["client"] = client
        if args.kind == "splice":
            dataset = datasets.make_splice_like(
                args.dest, args.n_samples or 10000, **given, **common
            )
            planted = None
        elif args.kind == "text":
            dataset = datasets.make_text_like(
                args.dest, args.n_samples or 10000, given.pop("n_features", 2**20), **given,
                **common,
            )  # fmt: skip
            planted = None
        elif args.kind in ("classification", "regression"):
            make = getattr(datasets, f"make_{args.kind}")
            generated = make(
                args.dest, args.n_samples or 10000, given.pop("n_features", 1000), **given, **common
            )
            dataset, planted = generated.dataset, datasets.planted_path(args.dest)
        elif args.kind == "factorized":
            if "factorized_task" in given:
                given["task"] = given.pop("factorized_task")
            generated = datasets.make_factorized(
                args.dest,
                args.n_samples or 10000,
                given.pop("n_features", 1000),
                given.pop("rank", 10),
                **given,
                **common,
            )
            dataset, planted = generated.dataset, datasets.planted_path(args.dest)
        else:
            generated = datasets.make_spdc_ridge(
                args.dest, args.n_samples or 500, given.pop("n_features", 500), **given, **common
            )
            dataset, planted = generated.dataset, datasets.planted_path(args.dest)
    summary = {"path": dataset.path, "planted": planted}
    summary.update(dataset.summary())
    _print_json(summary)
    return 0


# --------------------------------------------------------------------------------------------
# train, evaluate, predict, demo (owner: solver driver)


def _parse_option_value(text: str):
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    return text


def _resolved_solver(args) -> str:
    """The solver a run uses: ``--solver``, with ``auto`` resolved for its loss and penalty."""
    if args.solver != "auto":
        return args.solver
    from daskpd.solvers._auto import auto_solver

    return auto_solver(args.loss, args.reg, weighted=args.class_weight is not None)


def _solver_options(args) -> dict:
    from daskpd.solvers import get_solver

    method = get_solver(_resolved_solver(args))
    valid = set(method.Options.__dataclass_fields__)
    options = {}
    for item in args.option or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--option must look like NAME=VALUE, got {item!r}")
        options[name.strip().replace("-", "_")] = _parse_option_value(value.strip())
    if args.grid is not None:
        if "grid" not in valid:
            raise UsageError(f"--grid does not apply to solver {_resolved_solver(args)!r}")
        options["grid"] = args.grid
    return options


def _check_solver_options(args) -> None:
    """Build the solver's options once, so that a bad value fails before any work."""
    import dataclasses

    from daskpd.solvers import get_solver, make_options

    method = get_solver(_resolved_solver(args))
    options = _solver_options(args)
    try:
        make_options(method, options)
    except ValueError as exc:
        if args.option:
            raise UsageError(f"--option {' '.join(args.option)}: {_one_line(exc)}") from None
        raise
    # Some solvers convert numeric options only when they check them, with Python's own
    # message ("invalid literal for int()"), which names neither the option nor the value.
    declared = {field.name: str(field.type) for field in dataclasses.fields(method.Options)}
    for name, value in options.items():
        kind = declared.get(name, "")
        numeric = ("int" in kind or "float" in kind) and "str" not in kind
        if numeric and isinstance(value, str):
            raise UsageError(f"--option {name}={value}: {name} must be a number ({kind})")


def _check_problem(args, data) -> None:
    """Run the checks ``solve`` starts with (labels, loss / solver pairs, the DSO grid); they
    read metadata and per-row statistics only, no Dask work."""
    from daskpd.problem import Problem
    from daskpd.solvers import get_solver, make_options

    method = get_solver(_resolved_solver(args))
    problem = Problem(
        args.loss, args.reg, args.alpha, class_weight=_class_weight_arg(args.class_weight)
    )
    problem.check(data)
    method.check(problem, data, make_options(method, _solver_options(args)))


def _class_weight_arg(text):
    if text is None:
        return None
    if text == "balanced":
        return "balanced"
    negative, sep, positive = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return {-1: float(negative), 1: float(positive)}
    except ValueError:
        raise UsageError(
            f"--class-weight must be 'balanced' or NEG:POS weights like 1:10, got {text!r}"
        ) from None


def _open_data(path, what):
    from daskpd.dataset import open_dataset

    try:
        return open_dataset(path)
    except FileNotFoundError:
        raise UsageError(f"{what} {path!r} does not exist") from None


def _check_out(path, overwrite, what="--out") -> None:
    from pathlib import Path

    if path is None:
        return
    target = Path(path)
    if target.exists() and not overwrite:
        raise UsageError(f"{what} {path!r} already exists (pass --overwrite to replace it)")
    if not target.parent.is_dir():
        raise UsageError(f"{what} {path!r}: directory {str(target.parent)!r} does not exist")


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


def _add_training_options(parser, *, defaults) -> None:
    group = parser.add_argument_group("model and solver")
    group.add_argument(
        "--solver",
        default=defaults["solver"],
        help=f"registered solver, or 'auto': the fastest to a certified model for the loss "
        f"and penalty (default {defaults['solver']})",
    )
    group.add_argument(
        "--loss", default=defaults["loss"], help=f"loss name (default {defaults['loss']})"
    )
    group.add_argument("--reg", default="l2", help="regularizer name (default l2)")
    group.add_argument(
        "--alpha",
        type=_positive_float("--alpha"),
        default=defaults["alpha"],
        help=f"regularization strength (default {defaults['alpha']:g})",
    )
    group.add_argument(
        "--epochs",
        type=_positive_int("--epochs"),
        default=defaults["epochs"],
        help=f"epoch budget (default {defaults['epochs']})",
    )
    group.add_argument(
        "--tol",
        type=_nonnegative_float("--tol"),
        default=defaults["tol"],
        help=f"stop at this duality gap (default {defaults['tol']:g})",
    )
    group.add_argument(
        "--time-limit",
        type=_positive_float("--time-limit"),
        default=None,
        metavar="SECONDS",
        help="stop after this much training time",
    )
    group.add_argument(
        "--eval-every",
        type=_eval_every,
        default="auto",
        metavar="K",
        help="evaluate the gap (and test metrics) every K epochs, or 'auto': as often as "
        "keeps evaluation within 10%% of the wall time (default auto; the last epoch always)",
    )
    group.add_argument(
        "--grid",
        type=_positive_int("--grid"),
        default=None,
        metavar="P",
        help="DSO grid size P (the dataset needs `daskpd partition --grid P`)",
    )
    group.add_argument(
        "--option",
        action="append",
        metavar="NAME=VALUE",
        help="solver option, repeatable (e.g. --option step=sqrt)",
    )
    group.add_argument(
        "--seed", type=_nonnegative_int("--seed"), default=0, help="random_state (default 0)"
    )
    group.add_argument("--no-progress", action="store_true", help="no progress bar")
    group.add_argument(
        "--in-process",
        action="store_true",
        help="run in this process on Dask's threaded scheduler (no cluster)",
    )


def _eval_every(text):
    if text == "auto":
        return text
    try:
        return _positive_int("--eval-every")(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"--eval-every must be an integer >= 1 or 'auto', got {text!r}"
        ) from None


def _nonnegative_float(name):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not value >= 0:
            raise argparse.ArgumentTypeError(f"{name} must be >= 0, got {value}")
        return value

    return parse


def _nonnegative_int(name):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{name} must be >= 0, got {value}")
        return value

    return parse


def _train(args, data, test, client, *, checkpoint_dir=None, checkpoint_every=1, resume=False):
    from daskpd.callbacks import ProgressBar
    from daskpd.solvers import DivergenceError, TrainingFailed, solve

    options = _solver_options(args)
    try:
        return solve(
            data,
            loss=args.loss,
            regularizer=args.reg,
            alpha=args.alpha,
            solver=_resolved_solver(args),
            max_epochs=args.epochs,
            tol=args.tol,
            time_limit=args.time_limit,
            eval_every=args.eval_every,
            random_state=args.seed,
            callbacks=[ProgressBar(disable=args.no_progress)],
            client=False if client is None else client,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=checkpoint_every,
            resume=resume,
            test_data=test,
            class_weight=_class_weight_arg(getattr(args, "class_weight", None)),
            **options,
        )
    except (DivergenceError, TrainingFailed) as exc:
        raise _RunFailed(str(exc)) from None


class _RunFailed(Exception):
    """Training ran and failed (divergence, repeated worker loss): exit code 1."""


def _summary(result) -> dict:
    out = {
        "solver": result.solver,
        "epochs": result.n_epochs,
        "stop_reason": result.stop_reason,
        "converged": result.converged,
        "seconds": result.history[-1]["seconds"],
        "primal": result.primal,
        "dual": result.dual,
        "gap": result.gap,
    }
    out.update({k: v for k, v in result.history[-1].items() if k.startswith("test_")})
    return out


@subcommand("train", "train a model on a dataset (progress bar, checkpoints, resume)")
def _add_train(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", metavar="DATA", help="training dataset directory")
    _add_training_options(
        parser,
        defaults={"solver": "auto", "loss": "hinge", "alpha": 1e-4, "epochs": 50, "tol": 1e-4},
    )
    parser.add_argument(
        "--class-weight",
        metavar="W",
        default=None,
        help="'balanced' or NEG:POS row weights, e.g. 1:10",
    )
    parser.add_argument("--test", metavar="DATA", help="test dataset (AUPRC etc. in the history)")
    parser.add_argument("--out", metavar="MODEL", help="write the model (zarr) here")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing MODEL")
    parser.add_argument("--checkpoint-dir", metavar="D", help="write checkpoints into D")
    parser.add_argument(
        "--checkpoint-every",
        type=_positive_int("--checkpoint-every"),
        default=1,
        metavar="K",
        help="checkpoint every K epochs (default 1)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the latest checkpoint in --checkpoint-dir",
    )
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_train)


def _run_train(args) -> int:
    from daskpd.checkpoint import save_model

    if args.resume and not args.checkpoint_dir:
        raise UsageError("--resume needs --checkpoint-dir")
    data = _open_data(args.data, "DATA")
    test = _open_data(args.test, "--test") if args.test else None
    if test is not None and test.n_features != data.n_features:
        raise UsageError(f"--test has {test.n_features} features but DATA has {data.n_features}")
    _check_out(args.out, args.overwrite)
    # Catch bad names, options and solver / problem mismatches before a cluster starts (its
    # dashboard line would come first and the error would no longer be one line).
    _check_solver_options(args)
    _check_problem(args, data)
    with _run_client(args, start=True) as client:
        try:
            result = _train(
                args,
                data,
                test,
                client,
                checkpoint_dir=args.checkpoint_dir,
                checkpoint_every=args.checkpoint_every,
                resume=args.resume,
            )
        except _RunFailed as exc:
            print(f"daskpd train: error: {exc}", file=sys.stderr)
            return 1
    summary = _summary(result)
    if args.out:
        save_model(result, args.out, overwrite=args.overwrite)
        summary["model"] = str(args.out)
    _print_json(summary)
    return 0


def _model_scores(args):
    from daskpd.solvers._driver import load_model, score_rows

    model = load_model(args.model)
    data = _open_data(args.data, "DATA")
    if data.n_features != model.w.shape[0]:
        raise UsageError(
            f"DATA has {data.n_features} features but the model has {model.w.shape[0]}"
        )
    start = bool(_cluster_asked(args) or args.memory_limit)
    with _run_client(args, start=start) as client:
        scores = score_rows(model.w, data, client=client)
    return model, data, scores


@subcommand("evaluate", "score a dataset with a model; metrics as JSON on stdout")
def _add_evaluate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model written by `daskpd train --out`")
    parser.add_argument("data", metavar="DATA", help="dataset directory")
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_evaluate)


def _run_evaluate(args) -> int:
    from daskpd.solvers._driver import metrics_for

    model, data, scores = _model_scores(args)
    task = getattr(data, "task", "binary")
    out = {"model": str(args.model), "data": str(args.data), "n_samples": int(data.n_samples)}
    out.update(metrics_for(scores, data.y, task, model.objective.get("loss", "")))
    _print_json(out)
    return 0


@subcommand("predict", "write the decision scores X @ w of a dataset to a zarr array")
def _add_predict(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model written by `daskpd train --out`")
    parser.add_argument("data", metavar="DATA", help="dataset directory")
    parser.add_argument("out", metavar="OUT", help="output zarr group (array 'scores')")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_predict)


def _run_predict(args) -> int:
    from daskpd.checkpoint import atomic_group

    _check_out(args.out, args.overwrite, "OUT")
    _, data, scores = _model_scores(args)
    with atomic_group(args.out, overwrite=args.overwrite) as group:
        group.create_array("scores", data=scores, chunks=(min(max(len(scores), 1), 2_000_000),))
        group.attrs.update({"model": str(args.model), "data": str(args.data)})
    _print_json({"out": str(args.out), "n_samples": int(scores.shape[0])})
    return 0


@subcommand(
    "demo",
    "generate splice-site-like data, train DSO (started from the dual solver's rounds) on a "
    "LocalCluster, report",
)
def _add_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        metavar="D",
        help="keep the data and model in D (default: a temporary directory, removed at the end)",
    )
    parser.add_argument(
        "--n-samples",
        type=_positive_int("--n-samples"),
        default=20000,
        help="training rows (default 20000; a quarter more for testing)",
    )
    _add_training_options(
        parser,
        defaults={"solver": "dso", "loss": "hinge", "alpha": 1e-4, "epochs": 10, "tol": 1e-4},
    )
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_demo)


def _run_demo(args) -> int:
    import shutil
    import tempfile
    import time
    from pathlib import Path

    from daskpd._cluster import worker_addresses
    from daskpd.checkpoint import save_model
    from daskpd.dataset import partition_dataset
    from daskpd.datasets import make_splice_like

    if args.dir:
        root = Path(args.dir)
        if not root.parent.is_dir():
            raise UsageError(f"--dir {args.dir!r}: directory {str(root.parent)!r} does not exist")
        root.mkdir(exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="daskpd-demo-"))
    try:
        tick = time.perf_counter()
        with _run_client(args, start=True) as client:
            cluster_seconds = time.perf_counter() - tick
            workers = len(worker_addresses(client)) if client is not None else 2
            grid = args.grid or max(2, workers)
            if "grid" in _solver_fields(_resolved_solver(args)) and args.grid is None:
                args.grid = grid
            _check_solver_options(args)
            tick = time.perf_counter()
            # Degree-4 weighted-degree features keep the demo at about a minute on a laptop.
            train = make_splice_like(
                root / "train.zarr",
                args.n_samples,
                positive_rate=0.05,
                degree=4,
                random_state=args.seed,
                overwrite=True,
            )
            test = make_splice_like(
                root / "test.zarr",
                max(1, args.n_samples // 4),
                positive_rate=0.05,
                degree=4,
                random_state=args.seed + 1,
                overwrite=True,
            )
            if args.grid is not None:
                train = partition_dataset(train.path, args.grid, overwrite=True)
            data_seconds = time.perf_counter() - tick
            print(
                f"data: {train.n_samples} training rows x {train.n_features} features "
                f"({train.nnz} nonzeros), {test.n_samples} test rows, in {root} "
                f"({data_seconds:.1f} s)",
                file=sys.stderr,
            )
            try:
                result = _train(args, train, test, client)
            except _RunFailed as exc:
                print(f"daskpd demo: error: {exc}", file=sys.stderr)
                return 1
        if args.dir:
            save_model(result, root / "model.zarr", overwrite=True)
        grid_text = f", grid {args.grid}x{args.grid}" if args.grid else ""
        print(
            f"{result.solver}{grid_text}: {result.n_epochs} epochs in "
            f"{result.history[-1]['seconds']:.1f} s ({result.stop_reason})"
        )
        print(f"test AUPRC    {result.history[-1].get('test_auprc', float('nan')):.4f}")
        print(
            f"duality gap   {result.gap:.3g} (primal {result.primal:.6g}, dual {result.dual:.6g})"
        )
        _print_demo_times(args, result, data_seconds, cluster_seconds, client is not None)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def _evaluation_note(result) -> str:
    full = sum(1 for row in result.history if not row.get("certificate_only", False))
    note = f"gap and test metrics at {full} of {result.n_epochs} epochs"
    certified = len(result.history) - full
    if certified:
        note += f", the solver's own gap at {certified} more"
    return note


def _print_demo_times(args, result, data_seconds, cluster_seconds, on_cluster) -> None:
    timings = result.timings
    spent = timings["init"] + timings["epochs"] + timings["evaluation"]
    rows = [("data generation", data_seconds, "written to zarr, partitioned")]
    if on_cluster:
        label = "cluster start" if args.scheduler is None else "cluster connect"
        rows.append((label, cluster_seconds, ""))
    rows += [
        ("training", timings["wall"], "wall time of the solve, split below"),
        ("  init", timings["init"], "solver start: data reads, start rounds, first kernels"),
        ("  epochs", timings["epochs"], ""),
        (
            "  evaluation",
            timings["evaluation"],
            _evaluation_note(result),
        ),
        ("  other", timings["wall"] - spent, "checkpoints, progress bar, driver"),
    ]
    print("where the time went:")
    for label, seconds, note in rows:
        print(f"  {label:<16}{seconds:7.1f} s  {note}".rstrip())


def _solver_fields(name) -> set:
    from daskpd.solvers import get_solver

    return set(get_solver(name).Options.__dataclass_fields__)


# --------------------------------------------------------------------------------------------
# bench: daskpd against its peers (issue 8)


@subcommand("bench", "time daskpd's solvers and the peers to a certified optimum; write tables")
def _add_bench(parser):
    parser.add_argument(
        "--dataset",
        choices=("splice", "text", "dna", "ridge"),
        default="splice",
        help="generated splice-site-like windows (default), generated text-like documents, "
        "the real DNA windows of data/ (donor sites against the rest; --scales ignored), or "
        "the SPDC paper's ridge data (needs --loss squared; test R^2 instead of AUPRC)",
    )
    parser.add_argument(
        "--scales",
        default="1e7",
        help="comma-separated target nonzero counts of the training sets (default: 1e7)",
    )
    parser.add_argument("--workdir", default="bench-work", help="datasets and raw results")
    parser.add_argument("--repeats", type=_positive_int("--repeats"), default=3)
    parser.add_argument(
        "--alpha",
        type=_positive_float("--alpha"),
        default=1e-5,
        help="the fixed alpha of the second table (default: %(default)s)",
    )
    parser.add_argument(
        "--alpha-grid",
        default="1e-6,1e-5,1e-4,1e-3,1e-2",
        help="alphas of the validation that picks the first table's alpha ('none': only "
        "--alpha; default: %(default)s)",
    )
    parser.add_argument(
        "--loss",
        choices=("hinge", "logistic", "squared"),
        default="hinge",
        help="hinge (default) or logistic on the classification sets, squared on ridge",
    )
    parser.add_argument(
        "--solvers",
        default=None,
        help="comma-separated daskpd solvers, the judged one first (default: the default "
        "solver, dso, and spdc on the smooth losses)",
    )
    parser.add_argument("--max-epochs", type=_positive_int("--max-epochs"), default=500)
    parser.add_argument(
        "--budget",
        type=_positive_float("--budget"),
        default=120.0,
        help="wall seconds of one daskpd run, and the fit time that ends a peer's ladder",
    )
    parser.add_argument(
        "--rule-tol",
        type=_positive_float("--rule-tol"),
        default=1e-3,
        help="daskpd's stopping rule: the first model with gap <= RULE_TOL x primal",
    )
    parser.add_argument("--positive-rate", type=_positive_float("--positive-rate"), default=0.01)
    parser.add_argument(
        "--peers",
        default="liblinear,liblinear-mc,snapml,sgd,saga,vw,dask-ml",
        help="comma-separated subset of the peers (default: %(default)s; a peer without the "
        "table's loss gets a row saying so)",
    )
    parser.add_argument(
        "--peer-memory",
        type=_positive_float("--peer-memory"),
        default=8.0,
        help="GiB one in-memory peer may use",
    )
    parser.add_argument(
        "--markdown",
        default=None,
        help="BENCHMARKS.md to update (its --section); default: print the tables",
    )
    parser.add_argument(
        "--section",
        default=None,
        help="name of the BENCHMARKS.md section to replace (between <!-- section: NAME --> "
        "and <!-- end: NAME -->; default: peers-LOSS)",
    )
    parser.add_argument(
        "--title",
        default=None,
        help="heading of that section (default: 'Against peers: DATASET, LOSS')",
    )
    parser.add_argument(
        "--figures",
        default=None,
        help="directory of the PNG plots (default: next to --markdown, or --workdir)",
    )
    parser.add_argument(
        "--dask-ml-iters",
        default="5,20,50",
        help="dask-ml's ladder of L-BFGS iteration counts, one fit each (default: %(default)s)",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int("--workers"),
        default=2,
        help="LocalCluster worker processes (and the multi-core peers' threads)",
    )
    parser.add_argument("--memory-limit", default="4GiB", help="memory limit per worker")
    parser.add_argument(
        "--from-results",
        default=None,
        metavar="JSON",
        help="measure nothing: score and render the results.json of an earlier run again",
    )
    parser.add_argument(
        "--dask-ml-memory-limit",
        default=None,
        help="memory limit of each of dask-ml's workers (default: --memory-limit)",
    )
    parser.set_defaults(run=_run_bench)


def _check_section(path, section):
    from daskpd.bench import section_span

    try:
        with open(path) as handle:
            section_span(handle.read(), section, f"--markdown {path}")
    except OSError as exc:
        raise UsageError(f"--markdown {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _check_bench_extra() -> None:
    # The figures need matplotlib, which only the bench extra installs: say so before the runs.
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(
            "daskpd bench draws its figures with matplotlib, which is not installed: "
            "pip install 'daskpd[bench]'"
        )


def _run_bench(args) -> int:
    import os

    from daskpd.bench import BenchConfig, markdown, plot, replace_section, run_benchmarks

    def numbers(option, text, kind):
        try:
            return tuple(kind(float(part)) for part in text.split(",") if part)
        except ValueError:
            raise UsageError(f"{option} must be numbers like 1e7,1e8, got {text!r}") from None

    alpha_grid = (
        () if args.alpha_grid == "none" else numbers("--alpha-grid", args.alpha_grid, float)
    )
    solvers = None
    if args.solvers:
        solvers = tuple(name for name in args.solvers.split(",") if name)
    config = BenchConfig(
        scales=numbers("--scales", args.scales, int),
        workdir=args.workdir,
        repeats=args.repeats,
        alpha=args.alpha,
        alpha_grid=alpha_grid,
        loss=args.loss,
        solvers=solvers,
        max_epochs=args.max_epochs,
        budget=args.budget,
        rule_tol=args.rule_tol,
        workers=args.workers,
        memory_limit=args.memory_limit,
        peer_memory_bytes=int(args.peer_memory * 2**30),
        positive_rate=args.positive_rate,
        peers=tuple(name for name in args.peers.split(",") if name),
        dask_ml_iters=numbers("--dask-ml-iters", args.dask_ml_iters, int),
        dask_ml_memory_limit=args.dask_ml_memory_limit,
        dataset=args.dataset,
    )
    section = args.section or f"peers-{args.loss}"
    title = args.title or f"Against peers: {args.dataset}, {args.loss}"
    if args.markdown:
        # fail now, not after an hour of measurements
        _check_section(args.markdown, section)
    _check_bench_extra()
    if args.from_results:
        import json

        from daskpd.bench import rescore

        with open(args.from_results) as handle:
            results = rescore(json.load(handle))
    else:
        results = run_benchmarks(config, progress=lambda line: print(line, file=sys.stderr))
    text = markdown(results, title=title)
    base = os.path.dirname(os.path.abspath(args.markdown)) if args.markdown else args.workdir
    directory = args.figures or base
    os.makedirs(directory, exist_ok=True)
    figures = plot(results, directory)
    text += "\n" + "\n".join(
        f"![{os.path.basename(f)}]({os.path.relpath(f, base)})" for f in figures
    )
    if args.markdown:
        replace_section(args.markdown, section, text)
        print(f"updated {args.markdown}", file=sys.stderr)
    else:
        print(text)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
