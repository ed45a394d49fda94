"""The ``daskpd bench`` command: daskpd against its peers."""

from __future__ import annotations

import sys

from daskpd.cli._options import (
    UsageError,
    _positive_float,
    _positive_int,
    add_options,
    option,
    subcommand,
)

# --------------------------------------------------------------------------------------------
# bench: daskpd against its peers (issue 8)


#: The options of ``daskpd bench`` (:func:`~daskpd.cli._options.add_options`).
BENCH_OPTIONS = (
    option(
        "--dataset",
        "generated splice-site-like windows (default), generated text-like documents, the real "
        "DNA windows of data/ (donor sites against the rest; --scales ignored), or the SPDC "
        "paper's ridge data (needs --loss squared; test R^2 instead of AUPRC)",
        choices=("splice", "text", "dna", "ridge"),
        default="splice",
    ),
    option(
        "--hash-bits",
        "splice: hash the features into 2**BITS columns (default 0: the explicit 4.66M)",
        type=int,
        default=0,
    ),
    option(
        "--scales",
        "comma-separated target nonzero counts of the training sets (default: 1e7)",
        default="1e7",
    ),
    option("--workdir", "datasets and raw results", default="bench-work"),
    option("--repeats", parse=_positive_int, default=3),
    option(
        "--alpha",
        "the fixed alpha of the second table (default: %(default)s)",
        _positive_float,
        default=1e-5,
    ),
    option(
        "--alpha-grid",
        "alphas of the validation that picks the first table's alpha ('none': only --alpha; "
        "default: %(default)s)",
        default="1e-6,1e-5,1e-4,1e-3,1e-2",
    ),
    option(
        "--loss",
        "hinge (default) or logistic on the classification sets, squared on ridge",
        choices=("hinge", "logistic", "squared"),
        default="hinge",
    ),
    option(
        "--solvers",
        "comma-separated daskpd solvers, the judged one first (default: the default solver, "
        "dso, and spdc on the smooth losses)",
    ),
    option("--max-epochs", parse=_positive_int, default=500),
    option(
        "--budget",
        "wall seconds of one daskpd run, and the fit time that ends a peer's ladder",
        _positive_float,
        default=120.0,
    ),
    option(
        "--rule-tol",
        "daskpd's stopping rule: the first model with gap <= RULE_TOL x primal",
        _positive_float,
        default=1e-3,
    ),
    option("--positive-rate", parse=_positive_float, default=0.01),
    option(
        "--peers",
        "comma-separated subset of the peers (default: %(default)s; a peer without the "
        "table's loss gets a row saying so)",
        default="liblinear,liblinear-mc,snapml,sgd,saga,vw,dask-ml",
    ),
    option("--peer-memory", "GiB one in-memory peer may use", _positive_float, default=8.0),
    option("--markdown", "BENCHMARKS.md to update (its --section); default: print the tables"),
    option(
        "--section",
        "name of the BENCHMARKS.md section to replace (between <!-- section: NAME --> and "
        "<!-- end: NAME -->; default: peers-LOSS)",
    ),
    option("--title", "heading of that section (default: 'Against peers: DATASET, LOSS')"),
    option("--figures", "directory of the PNG plots (default: next to --markdown, or --workdir)"),
    option(
        "--dask-ml-iters",
        "dask-ml's ladder of L-BFGS iteration counts, one fit each (default: %(default)s)",
        default="5,20,50",
    ),
    option(
        "--workers",
        "LocalCluster worker processes (and the multi-core peers' threads)",
        _positive_int,
        default=2,
    ),
    option("--memory-limit", "memory limit per worker", default="4GiB"),
    option(
        "--from-results",
        "measure nothing: score and render the results.json of an earlier run again",
        metavar="JSON",
    ),
    option(
        "--dask-ml-memory-limit",
        "memory limit of each of dask-ml's workers (default: --memory-limit)",
    ),
    option(
        "--no-from-files",
        "skip the from-files clock (fresh `daskpd train` and peer processes from disk)",
        action="store_true",
    ),
    option(
        "--readme",
        "README.md whose generated results (between <!-- results: NAME --> and "
        "<!-- end results: NAME -->, NAME the --section) this run rewrites",
    ),
    option("--note", "a sentence printed with the machine (e.g. that it was shared by other jobs)"),
)


@subcommand("bench", "time daskpd's solvers and the peers to a certified optimum; write tables")
def _add_bench(parser):
    add_options(parser, BENCH_OPTIONS)
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
