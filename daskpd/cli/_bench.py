"""The ``daskpd bench`` command: daskpd against its peers."""

from __future__ import annotations

import sys

from daskpd.cli._options import UsageError, _positive_float, _positive_int, subcommand

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
        "--hash-bits",
        type=int,
        default=0,
        help="splice: hash the features into 2**BITS columns (default 0: the explicit 4.66M)",
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
    parser.add_argument(
        "--no-from-files",
        action="store_true",
        help="skip the from-files clock (fresh `daskpd train` and peer processes from disk)",
    )
    parser.add_argument(
        "--readme",
        default=None,
        help="README.md whose generated results (between <!-- results: NAME --> and "
        "<!-- end results: NAME -->, NAME the --section) this run rewrites",
    )
    parser.add_argument(
        "--note",
        default=None,
        help="a sentence printed with the machine (e.g. that it was shared by other jobs)",
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


def _check_readme(path, name):
    from daskpd.bench.report import README_MARKERS

    try:
        with open(path) as handle:
            content = handle.read()
    except OSError as exc:
        raise UsageError(f"--readme {path}: {exc.strerror}") from None
    for marker in README_MARKERS:
        if marker.format(name=name) not in content:
            raise UsageError(f"--readme {path} has no {marker.format(name=name)!r} marker")


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
        hash_bits=args.hash_bits,
        from_files=not args.no_from_files,
    )
    section = args.section or f"peers-{args.loss}"
    title = args.title or f"Against peers: {args.dataset}, {args.loss}"
    if args.markdown:
        # fail now, not after an hour of measurements
        _check_section(args.markdown, section)
    if args.readme:
        _check_readme(args.readme, section)
    _check_bench_extra()
    if args.from_results:
        import json

        from daskpd.bench import rescore

        with open(args.from_results) as handle:
            results = rescore(json.load(handle))
    else:
        results = run_benchmarks(config, progress=lambda line: print(line, file=sys.stderr))
    if args.note:
        results["note"] = args.note
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
    if args.readme:
        from daskpd.bench import readme_results, replace_readme_results

        replace_readme_results(args.readme, section, readme_results(results))
        print(f"updated {args.readme}", file=sys.stderr)
    return 0
