"""The training commands of ``daskpd``: train, evaluate, predict, demo."""

from __future__ import annotations

import argparse
import sys

from daskpd.cli._inputs import add_input_options, check_file_inputs, open_input
from daskpd.cli._options import (
    UsageError,
    _add_cluster_options,
    _check_not_input,
    _check_out,
    _cluster_asked,
    _nonnegative_float,
    _nonnegative_int,
    _number,
    _positive_float,
    _positive_int,
    _print_json,
    _run_client,
    add_options,
    option,
    subcommand,
)
from daskpd.cli._path import alpha_or_auto, check_path_arguments, run_train_path

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


def _option_values(args) -> dict:
    """The solver options of the command line (``--option NAME=VALUE`` and ``--grid``)."""
    options = {}
    for item in args.option or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--option must look like NAME=VALUE, got {item!r}")
        options[name.strip().replace("-", "_")] = _parse_option_value(value.strip())
    if args.grid is not None:
        options["grid"] = args.grid
    return options


def _make_plan(args, data, test=None, *, checkpoint_dir=None, checkpoint_every=1, resume=False):
    """The run's plan (:func:`daskpd.solvers.driver.plan.make_plan`, as ``solve`` and the estimators
    build it): every check, with no Dask work, before a cluster starts (its dashboard line
    would come first and the error would no longer be one line)."""
    from daskpd.callbacks import ProgressBar
    from daskpd.solvers.driver.plan import make_plan
    from daskpd.solvers.driver.registry import UnknownOptionsError

    try:
        return make_plan(
            data,
            loss=args.loss,
            regularizer=args.reg,
            alpha=args.alpha,
            solver=args.solver,
            max_epochs=args.epochs,
            tol=args.tol,
            time_limit=args.time_limit,
            eval_every=args.eval_every,
            random_state=args.seed,
            callbacks=[ProgressBar(disable=args.no_progress)],
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=checkpoint_every,
            resume=resume,
            test_data=test,
            class_weight=_class_weight_arg(getattr(args, "class_weight", None)),
            **_option_values(args),
        )
    except UnknownOptionsError as exc:
        if args.grid is not None and "grid" in exc.unknown:
            raise UsageError(f"--grid does not apply to solver {exc.solver!r}") from None
        raise


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
    from daskpd.data import open_dataset

    try:
        return open_dataset(path)
    except FileNotFoundError:
        raise UsageError(f"{what} {path!r} does not exist") from None


def _add_training_options(parser, *, defaults, alpha_auto=False) -> None:
    alpha_help = (
        f"regularization strength: > 0, or >= 0 for --reg zero (default {defaults['alpha']:g})"
    )
    if alpha_auto:
        alpha_help += (
            "; 'auto': the best on --validation of a certified, warm-started path of 12 "
            "alphas (daskpd.regularization_path)"
        )
    model_and_solver = (
        option(
            "--solver",
            f"registered solver, or 'auto': the fastest to a certified model for the loss and "
            f"penalty (default {defaults['solver']}; `daskpd solvers` lists what each supports)",
            default=defaults["solver"],
        ),
        option("--loss", f"loss name (default {defaults['loss']})", default=defaults["loss"]),
        option("--reg", "regularizer name (default l2)", default="l2"),
        option(
            "--alpha",
            alpha_help,
            type=alpha_or_auto if alpha_auto else _number("--alpha"),
            default=defaults["alpha"],
        ),
        option(
            "--epochs",
            f"epoch budget (default {defaults['epochs']})",
            _positive_int,
            default=defaults["epochs"],
        ),
        option(
            "--tol",
            f"stop at this duality gap (default {defaults['tol']:g})",
            _nonnegative_float,
            default=defaults["tol"],
        ),
        option(
            "--time-limit", "stop after this much training time", _positive_float, metavar="SECONDS"
        ),
        option(
            "--eval-every",
            "evaluate the gap (and test metrics) every K epochs, or 'auto': as often as keeps "
            "evaluation within 10%% of the wall time (default auto; the last epoch always)",
            type=_eval_every,
            default="auto",
            metavar="K",
        ),
        option(
            "--grid",
            "row groups K (cocoa, tron; with the default solver, K > 1 and the logistic or "
            "squared loss: tron, whose rounds do not grow with K) or DSO's grid size (the "
            "dataset needs `daskpd partition --grid K`)",
            _positive_int,
            metavar="K",
        ),
        option(
            "--option",
            "solver option, repeatable (e.g. --option step=sqrt)",
            action="append",
            metavar="NAME=VALUE",
        ),
        option("--seed", "random_state (default 0)", _nonnegative_int, default=0),
        option("--no-progress", "no progress bar", action="store_true"),
        option(
            "--in-process",
            "run in this process on Dask's threaded scheduler (no cluster)",
            action="store_true",
        ),
    )
    add_options(parser, model_and_solver, "model and solver")


def _eval_every(text):
    if text == "auto":
        return text
    try:
        return _positive_int("--eval-every")(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"--eval-every must be an integer >= 1 or 'auto', got {text!r}"
        ) from None


def _train(plan, client):
    from daskpd.solvers import DivergenceError, TrainingFailed
    from daskpd.solvers.driver.run import run_plan

    try:
        return run_plan(plan, False if client is None else client)
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
    if "class_gap" in result.history[-1]:
        # a one-vs-rest model: gap is the sum of its classes' gaps
        out["class_gap"] = result.history[-1]["class_gap"]
    return out


@subcommand("train", "train a model on a dataset (progress bar, checkpoints, resume)")
def _add_train(parser: argparse.ArgumentParser) -> None:
    data = "training data: a dataset directory, or an svmlight or sequences file (see below)"
    add_options(parser, (option("data", data, metavar="DATA"),))
    _add_training_options(
        parser,
        defaults={"solver": "auto", "loss": "hinge", "alpha": 1e-4, "epochs": 50, "tol": 1e-4},
        alpha_auto=True,
    )
    add_options(parser, _TRAIN_OPTIONS)
    add_input_options(parser)
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_train)


_TRAIN_OPTIONS = (
    option("--class-weight", "'balanced' or NEG:POS row weights, e.g. 1:10", metavar="W"),
    option("--test", "test dataset or file (AUPRC etc. in the history)", metavar="DATA"),
    option("--validation", "with --alpha auto: the rows that choose alpha", metavar="DATA"),
    option("--out", "write the model (zarr) here", metavar="MODEL"),
    option("--overwrite", "replace an existing MODEL", action="store_true"),
    option("--checkpoint-dir", "write checkpoints into D", metavar="D"),
    option(
        "--checkpoint-every",
        "checkpoint every K epochs (default 1)",
        _positive_int,
        default=1,
        metavar="K",
    ),
    option(
        "--resume", "continue from the latest checkpoint in --checkpoint-dir", action="store_true"
    ),
)


def _run_train(args) -> int:
    from daskpd.model_file import save_model

    if args.resume and not args.checkpoint_dir:
        raise UsageError("--resume needs --checkpoint-dir")
    check_path_arguments(args)
    inputs = [("DATA", args.data), ("--test", args.test), ("--validation", args.validation)]
    _check_not_input(args.out, "--out", inputs)
    # checkpoints are written beside each other in the directory, which may hold the data
    _check_not_input(args.checkpoint_dir, "--checkpoint-dir", inputs, holding=False)
    check_file_inputs(args, [args.data, args.test, args.validation])
    _check_out(args.out, args.overwrite)  # before a file's ingestion, which may take long
    data = open_input(args, args.data, "DATA")
    test = None
    if args.test:
        test = open_input(args, args.test, "--test", n_features=data.n_features)
    if test is not None and test.n_features != data.n_features:
        raise UsageError(f"--test has {test.n_features} features but DATA has {data.n_features}")
    if args.alpha == "auto":
        validation = open_input(args, args.validation, "--validation", n_features=data.n_features)
        return run_train_path(
            args, data, test, validation, make_plan=_make_plan, client_context=_run_client,
            summary=_summary, options=_option_values(args),
            class_weight=_class_weight_arg(getattr(args, "class_weight", None)),
        )  # fmt: skip
    plan = _make_plan(
        args,
        data,
        test,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
    )
    with _run_client(args, start=True) as client:
        try:
            result = _train(plan, client)
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
    from daskpd.model_file import load_model
    from daskpd.solvers.common.scores import score_rows

    model = load_model(args.model, kind="solve_result")
    check_file_inputs(args, [args.data])
    # w of shape (n_classes, n_features) for a one-vs-rest model: a score per class
    n_features = model.w.shape[-1]
    data = open_input(args, args.data, "DATA", n_features=n_features)
    if data.n_features != n_features:
        raise UsageError(f"DATA has {data.n_features} features but the model has {n_features}")
    start = bool(_cluster_asked(args) or args.memory_limit)
    with _run_client(args, start=start) as client:
        scores = score_rows(model.w, data, client=client)
    return model, data, scores


#: The arguments of the commands that score a dataset with a model (evaluate, predict).
_SCORED = (
    option("model", "model written by `daskpd train --out`", metavar="MODEL"),
    option("data", "dataset directory, or a file to ingest", metavar="DATA"),
)


@subcommand("evaluate", "score a dataset with a model; metrics as JSON on stdout")
def _add_evaluate(parser: argparse.ArgumentParser) -> None:
    add_options(parser, _SCORED)
    add_input_options(parser)
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_evaluate)


def _run_evaluate(args) -> int:
    from daskpd.solvers.driver.data import metrics_for

    model, data, scores = _model_scores(args)
    task = getattr(data, "task", "binary")
    out = {"model": str(args.model), "data": str(args.data), "n_samples": int(data.n_samples)}
    if scores.ndim == 2:
        import numpy as np

        from daskpd.metrics import multiclass_metrics

        # accuracy, macro F1 and each class's AUPRC of its one-vs-rest scores
        out.update(multiclass_metrics(data.y, scores, np.asarray(model.objective["classes"])))
    else:
        out.update(metrics_for(scores, data.y, task, model.objective.get("loss", "")))
    _print_json(out)
    return 0


@subcommand(
    "predict",
    "write the decision scores X @ w of a dataset to a zarr array (a multiclass model: a "
    "score per class and the predicted labels)",
)
def _add_predict(parser: argparse.ArgumentParser) -> None:
    out = (
        "output zarr group (array 'scores'; a multiclass model: 'scores' of shape "
        "(n_samples, n_classes) and 'labels')"
    )
    add_options(
        parser,
        _SCORED
        + (
            option("out", out, metavar="OUT"),
            option("--overwrite", "replace an existing OUT", action="store_true"),
        ),
    )
    add_input_options(parser)
    _add_cluster_options(parser)
    parser.set_defaults(run=_run_predict)


def _run_predict(args) -> int:
    from daskpd.checkpoint import atomic_group

    _check_not_input(args.out, "OUT", [("MODEL", args.model), ("DATA", args.data)])
    _check_out(args.out, args.overwrite, "OUT")
    model, data, scores = _model_scores(args)
    rows = min(max(len(scores), 1), 2_000_000)
    with atomic_group(args.out, overwrite=args.overwrite) as group:
        group.create_array("scores", data=scores, chunks=(rows, *scores.shape[1:]))
        if scores.ndim == 2:
            import numpy as np

            # the class of the largest one-vs-rest score (the first on ties)
            classes = np.asarray(model.objective["classes"], dtype=np.float64)
            labels = classes[np.argmax(scores, axis=1)]
            group.create_array("labels", data=labels, chunks=(rows,))
            group.attrs["classes"] = classes.tolist()
        group.attrs.update({"model": str(args.model), "data": str(args.data)})
    _print_json({"out": str(args.out), "n_samples": int(scores.shape[0])})
    return 0


@subcommand("solvers", "list the solvers and what each supports (losses, regularizers, weights)")
def _add_solvers(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print the declarations as JSON, not a table"
    )
    parser.set_defaults(run=_run_solvers)


def _run_solvers(args) -> int:
    """Print every registered solver's declared capabilities (the README's solver table)."""
    import dataclasses

    from daskpd.solvers import available_solvers, get_solver
    from daskpd.solvers.driver.capabilities import markdown_table

    declared = [
        (name, getattr(get_solver(name), "capabilities", None)) for name in available_solvers()
    ]
    declared = [(name, caps) for name, caps in declared if caps is not None]
    if args.json:
        _print_json(
            {
                name: {
                    key: sorted(value) if isinstance(value, frozenset) else value
                    for key, value in dataclasses.asdict(caps).items()
                }
                for name, caps in declared
            }
        )
    else:
        sys.stdout.write(markdown_table(declared))
    return 0
