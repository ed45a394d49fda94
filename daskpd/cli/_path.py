"""``daskpd train --alpha auto --validation DATA``: alpha chosen by a certified path.

The command runs :func:`daskpd.regularization_path` on one cluster (the default grid: 12
alphas over 4 decades from ``alpha_max``, each point warm-started and stopped by its gap),
keeps the model of the alpha that scores best on the validation set (near-ties re-solved
to tighter gaps first: ``refine`` of :func:`daskpd.regularization_path`), and reports the
path: alpha, epochs, gap, validation score, whether it was refined, and seconds per point.
"""

from __future__ import annotations

import argparse
import sys

from daskpd.cli._options import UsageError


def alpha_or_auto(text):
    """``--alpha``'s value for ``train``: a number (its range is the plan's rule) or ``auto``."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--alpha must be a number or 'auto', got {text!r}"
        ) from None


def check_path_arguments(args) -> None:
    """Refuse, before any work, the combinations a path cannot honour."""
    auto = args.alpha == "auto"
    if auto and not args.validation:
        raise UsageError("--alpha auto needs --validation DATA (the rows that choose alpha)")
    if args.validation and not auto:
        raise UsageError("--validation goes with --alpha auto")
    if auto and (args.checkpoint_dir or args.resume):
        raise UsageError("--alpha auto runs a path of models: no --checkpoint-dir or --resume")


def run_train_path(
    args, data, test, validation, *, make_plan, client_context, summary, options, class_weight
):
    """Run the path of ``train --alpha auto``; returns the exit code.

    Parameters
    ----------
    args : argparse.Namespace
    data, test, validation : Dataset-like (``test`` may be None)
    make_plan : callable
        ``train``'s plan builder, called once at an alpha of 1 to check every other argument
        (solver, options, loss, penalty) before a cluster starts.
    client_context : callable
        ``train``'s ``_run_client``.
    summary : callable
        ``train``'s summary of one result.
    options : dict
        The solver options of the command line.
    class_weight : dict, "balanced" or None
    """
    from daskpd.callbacks import ProgressBar
    from daskpd.model_file import save_model
    from daskpd.path import regularization_path
    from daskpd.solvers import DivergenceError, TrainingFailed

    make_plan(_with_alpha(args, 1.0), data, None)
    with client_context(args, start=True) as client:
        try:
            path = regularization_path(
                data, loss=args.loss, regularizer=args.reg, validation_data=validation,
                solver=args.solver, tol=args.tol, max_epochs=args.epochs,
                eval_every=args.eval_every, random_state=args.seed,
                class_weight=class_weight, time_limit=args.time_limit,
                callbacks=[ProgressBar(disable=args.no_progress)],
                client=False if client is None else client, **options,
            )  # fmt: skip
        except (DivergenceError, TrainingFailed) as exc:
            print(f"daskpd train: error: {exc}", file=sys.stderr)
            return 1
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        test_metrics = {}
        if test is not None and path.best_result is not None:
            test_metrics = _test_metrics(path.best_result, test, args, client)
    if path.best_result is None:
        print(
            "daskpd train: error: no validation score is a number (one class in --validation?)",
            file=sys.stderr,
        )
        return 1
    out = {"alpha": path.best_alpha, **summary(path.best_result), **test_metrics}
    out["path"] = [
        {
            "alpha": float(alpha),
            "epochs": int(epochs),
            "gap": float(result.gap),
            "converged": bool(result.converged),
            "score": float(score),
            "refined": k in path.refined,
            "seconds": round(float(seconds), 3),
        }
        for k, (alpha, result, score, seconds, epochs) in enumerate(
            zip(path.alphas, path.results, path.scores, path.seconds, path.epochs, strict=True)
        )
    ]
    out["scoring"] = path.scoring
    out["path_seconds"] = round(path.total_seconds, 3)
    if args.out:
        save_model(path.best_result, args.out, overwrite=args.overwrite)
        out["model"] = str(args.out)
    from daskpd.cli._options import _print_json

    _print_json(out)
    return 0


def _with_alpha(args, alpha):
    copy = argparse.Namespace(**vars(args))
    copy.alpha = alpha
    return copy


def _test_metrics(result, test, args, client):
    """``test_<metric>`` of the chosen model on ``--test``, as ``train`` reports them."""
    from daskpd.solvers.driver.data import metrics_for

    scores = result.decision_function(test, client=client)
    metrics = metrics_for(scores, test.y, getattr(test, "task", "binary"), args.loss)
    return {f"test_{name}": value for name, value in metrics.items()}
