"""A certified regularization path: one model per alpha, warm-started, each stopped by its gap.

Choosing ``alpha`` is the first thing a user of a linear model does, and at scale it is most
of the compute. :func:`regularization_path` trains the models of a decreasing sequence of
alphas on one Dask cluster, each from the previous one's answer (its primal point, and its
dual point rescaled to the new alpha where the method keeps one: :func:`_next_start`), each
run stopped by its own duality gap (``tol``), and picks the alpha whose model scores best on
validation data, the near-ties re-solved to tighter gaps first (:func:`_refine`), so that a
path warm-started and one from cold starts choose alike.

The default grid starts at :func:`alpha_max`, ``||X^T z0||_inf / n`` with ``z0_i = c_i
loss'(0, y_i)`` (``c_i`` the row weights): the smallest alpha at which ``w = 0`` is optimal
for the L1 penalty (divided by ``l1_ratio`` for the elastic net). With the L2 penalty no
alpha makes ``w = 0`` optimal; the same number is where its solution is already small, so the
grid has the same scale for every penalty.

This module sits beside the estimators, above the solvers: it calls :func:`daskpd.solve` once
per alpha and uses :class:`daskpd.problem.Problem` for ``alpha_max``.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import numpy as np

__all__ = ["RegularizationPath", "alpha_max", "regularization_path"]

#: Points of the default grid, log-spaced from alpha_max down over ``DEFAULT_DECADES``.
DEFAULT_N_ALPHAS = 12
DEFAULT_DECADES = 4.0
#: The alpha of the L1 problem whose certificate at w = 0 measures ``||X^T z0||_inf / n``: the
#: dual scale there is ``min(1, alpha / alpha_max)``, so any alpha below alpha_max recovers it;
#: this one is below every alpha_max of a real problem and far from overflowing ``X^T z0 / alpha``.
_PROBE_ALPHA = 1e-200
#: The penalties whose alpha_max is defined here (their L1 part's dual norm is the max norm).
_GRID_REGULARIZERS = ("l2", "l1", "elasticnet")
_SCORINGS = ("average_precision", "auprc", "roc_auc", "r2")
#: Two best scores within this are re-solved before the choice (:func:`_refine`): two
#: certified models of one alpha score up to this far apart on a validation set with a few
#: dozen positives (BENCHMARKS.md, the path).
REFINE_MARGIN = 5e-3
#: The smallest gap a refinement asks for, relative to ``max(1, |P|)`` (float64's sums of
#: a gap stop shrinking near 1e-13 of the primal).
REFINE_FLOOR = 1e-12


@dataclass(frozen=True)
class RegularizationPath:
    """The outcome of :func:`regularization_path`.

    Attributes
    ----------
    alphas : ndarray of shape (n_alphas,)
        The path's alphas, largest first (the order in which they ran).
    results : tuple of SolveResult
        One run per alpha, in the order of ``alphas``; each certified by its ``gap`` (its
        ``converged`` says whether the gap reached ``tol`` within the budget).
    scores : ndarray of shape (n_alphas,) or None
        The validation score of each model (higher is better); None without validation data.
    best_alpha : float or None
        The alpha of the highest score, the larger alpha on a tie; None without validation
        data (or when every score is NaN, as average precision is for one-class data).
    best_result : SolveResult or None
        The run of ``best_alpha``.
    scoring : str or callable or None
        The score used (None without validation data).
    alpha_max : float or None
        :func:`alpha_max` of the problem when the grid was the default one, else None.
    seconds : ndarray of shape (n_alphas,)
        Wall seconds of each point's run (its :func:`daskpd.solve` call), scoring excluded.
    epochs : ndarray of shape (n_alphas,), int
        The epochs (rounds) each point ran, its refinement's included.
    total_seconds : float
        Wall seconds of the whole path: ``alpha_max``, every run and every score (not the
        start of a cluster, when the path started one).
    warm_start : bool
        Whether each point started from the previous one.
    refined : ndarray of shape (n_refined,), int
        The indices of the points whose scores were near the best and were re-solved to
        tighter gaps before the choice (``refine``); ``best_alpha`` is the best of them. Their
        ``results``, ``scores`` and ``seconds`` are the re-solved ones (seconds added).
    """

    alphas: np.ndarray
    results: tuple
    scores: np.ndarray | None
    best_alpha: float | None
    best_result: object
    scoring: object
    alpha_max: float | None
    seconds: np.ndarray
    epochs: np.ndarray
    total_seconds: float
    warm_start: bool
    refined: np.ndarray

    @property
    def converged(self) -> bool:
        """Whether every point's gap reached its ``tol``."""
        return all(result.converged for result in self.results)

    @property
    def gaps(self) -> np.ndarray:
        """The duality gap of each point, in the order of ``alphas``."""
        return np.array([result.gap for result in self.results], dtype=np.float64)


def alpha_max(data, loss="hinge", regularizer="l2", *, class_weight=None, client=None) -> float:
    """The alpha above which ``w = 0`` is optimal for the L1 (or elastic-net) penalty.

    ``alpha_max = ||X^T z0||_inf / (n l1_ratio)`` with ``z0_i = c_i loss'(0, y_i)``
    (``l1_ratio = 1`` for L1; for L2 and ``l1_ratio = 0`` the same number without the
    division, where the L2 solution is already small). It is the start of the default grid of
    :func:`regularization_path`. One Dask compute: the certificate of
    :class:`daskpd.problem.Problem` at ``w = 0`` for the L1 penalty, whose dual scale is
    ``min(1, alpha / alpha_max)`` (the module docstring of :mod:`daskpd.problem`), at an
    alpha far below any real ``alpha_max``.

    Parameters
    ----------
    data : Dataset, MemoryDataset or (X, y) pair
    loss : str or Loss, default="hinge"
    regularizer : {"l2", "l1", "elasticnet"} or Regularizer, default="l2"
    class_weight : dict or "balanced", optional
        Row weights per class (with the stored sample weights, the ``c_i``).
    client : distributed.Client, optional
        Where the pass runs; default: Dask's current scheduler.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        A regularizer other than L2, L1 and elastic net; a problem the data does not fit; a
        zero ``X^T z0`` (every regression label 0, say), where no grid can start.
    """
    from daskpd.problem import Problem
    from daskpd.regularizers import get_regularizer

    penalty = get_regularizer(regularizer)
    if penalty.name not in _GRID_REGULARIZERS:
        raise ValueError(
            f"alpha_max is defined for regularizer in {_GRID_REGULARIZERS}, got "
            f"regularizer={penalty.name!r}; pass alphas"
        )
    data = _as_data(data, "data")
    probe = Problem(loss, "l1", _PROBE_ALPHA, class_weight=class_weight)
    evaluation = probe.evaluate(np.zeros(int(data.n_features)), data, client=client or None)
    if not evaluation.dual_scale < 1.0:
        raise ValueError(
            "alpha_max is 0: X^T loss'(0, y) vanishes (all labels 0?), so no alpha makes a "
            "nonzero model; pass alphas"
        )
    value = _PROBE_ALPHA / evaluation.dual_scale
    l1_ratio = float(getattr(penalty, "l1_ratio", 0.0 if penalty.name == "l2" else 1.0))
    return value / l1_ratio if l1_ratio > 0 else value


def regularization_path(
    data,
    loss="hinge",
    regularizer="l2",
    alphas=None,
    validation_data=None,
    scoring=None,
    *,
    n_alphas=DEFAULT_N_ALPHAS,
    decades=DEFAULT_DECADES,
    warm_start=True,
    refine=2,
    solver="auto",
    tol=1e-4,
    max_epochs=100,
    eval_every="auto",
    random_state=0,
    class_weight=None,
    callbacks=(),
    client=None,
    **solver_options,
) -> RegularizationPath:
    """Train one certified model per alpha, warm-started, and pick alpha on validation data.

    The alphas run from the largest down; each run starts from the previous one's
    :class:`~daskpd.solvers.SolveResult` (its ``w``, and its dual ``z`` rescaled to the new
    alpha for the methods that keep one and take it: the classification losses keep ``w``
    and scale ``z`` by the ratio of the alphas, the regression losses keep ``z``) and stops
    when its duality gap is at most ``tol``. When the two best validation scores are within
    :data:`REFINE_MARGIN`, the near-ties are then re-solved to tighter gaps (``refine``)
    and the best of them is chosen. The whole path runs on one Dask client.

    Parameters
    ----------
    data : Dataset, MemoryDataset or (X, y) pair
        Training rows.
    loss : str or Loss, default="hinge"
    regularizer : str or Regularizer, default="l2"
    alphas : array-like of float, optional
        The alphas (> 0; run largest first). Default: ``n_alphas`` values log-spaced over
        ``decades`` decades from :func:`alpha_max` down.
    validation_data : Dataset, MemoryDataset or (X, y) pair, optional
        Rows that score each model. Without them the path is computed and ``scores``,
        ``best_alpha`` and ``best_result`` are None.
    scoring : {"average_precision", "auprc", "roc_auc", "r2"} or callable, optional
        The validation score, higher is better; a callable takes ``(y_true, decision)`` and
        returns a float. Default: ``"average_precision"`` for classification losses, ``"r2"``
        for regression.
    n_alphas : int, default=12
        Points of the default grid (refused with ``alphas``).
    decades : float, default=4.0
        Span of the default grid: its smallest alpha is ``alpha_max * 10**-decades``
        (refused with ``alphas``).
    warm_start : bool, default=True
        Start each point from the previous one; False runs every point from zero (the cold
        starts the path is measured against).
    refine : int, default=2
        The most steps of the choice's refinement: when the two best scores are within
        :data:`REFINE_MARGIN`, they are re-solved, each from its own result, to a gap 100
        times smaller a step, with every point whose score is within twice what the step
        moved the scores (the tolerance's effect on them) of the best, until the best leads
        by more than that; the best of them wins. 0: the choice is made on the path's own
        scores. The same choice, warm or cold: the points compared at the end are
        certified to the same tighter gaps.
    solver : str, default="auto"
    tol, max_epochs, eval_every, random_state, class_weight, callbacks
        As :func:`daskpd.solve` takes them, for every point.
    client : distributed.Client, False or None, default=None
        As :func:`daskpd.solve` takes it, chosen once for the whole path: ``None`` uses the
        active client, or runs in-process for in-memory data, or starts one LocalCluster
        for the whole path (closed at the end).
    **solver_options
        Options of the method, for every point.

    Returns
    -------
    RegularizationPath

    Raises
    ------
    ValueError
        Bad alphas or grid parameters, an unknown scoring, validation data that does not match
        the training data, and whatever :func:`daskpd.solve` refuses (at the first point).
    """
    from daskpd.problem import Problem

    data = _as_data(data, "data")
    if getattr(data, "task", None) == "multiclass":
        raise ValueError("regularization_path takes binary or regression data, not multiclass")
    if validation_data is not None:
        validation_data = _as_data(validation_data, "validation_data")
        if int(validation_data.n_features) != int(data.n_features):
            raise ValueError(
                f"validation_data has {validation_data.n_features} features but data has "
                f"{data.n_features}"
            )
    if alphas is not None and (n_alphas != DEFAULT_N_ALPHAS or decades != DEFAULT_DECADES):
        raise ValueError("n_alphas and decades set the default grid; they do not go with alphas")
    grid = _check_alphas(alphas) if alphas is not None else None
    if isinstance(refine, bool) or not isinstance(refine, int | np.integer) or refine < 0:
        raise ValueError(f"refine must be an integer >= 0, got {refine!r}")
    if grid is None:
        _check_grid(n_alphas, decades)
    # the checks of solve that need no Dask work, before a cluster starts
    problem = Problem(
        loss, regularizer, 1.0 if grid is None else grid[0], class_weight=class_weight
    )
    problem.check(data)
    if problem.regularizer.is_indicator or problem.regularizer.name == "zero":
        raise ValueError(
            f"regularizer={problem.regularizer.name!r} does not depend on alpha: no path"
        )
    if grid is None and problem.regularizer.name not in _GRID_REGULARIZERS:
        raise ValueError(
            f"the default alphas need regularizer in {_GRID_REGULARIZERS}, got "
            f"regularizer={problem.regularizer.name!r}; pass alphas"
        )
    score = None
    if validation_data is not None:
        scoring, score = _scorer(scoring, problem.loss.classification)
    elif scoring is not None:
        raise ValueError("scoring needs validation_data")

    with _path_client(client, data) as run_client:
        started = time.perf_counter()
        top = None
        if grid is None:
            top = alpha_max(data, loss, regularizer, class_weight=class_weight,
                            client=run_client)  # fmt: skip
            grid = top * np.logspace(0.0, -float(decades), int(n_alphas))
        results, seconds, scores, epochs = [], [], [], []
        previous = None
        y_valid = None if validation_data is None else np.asarray(validation_data.y, np.float64)

        def run(alpha, point_tol, start):
            begin = time.perf_counter()
            result = _solve(
                data, loss, regularizer, float(alpha), solver,
                tol=point_tol, max_epochs=max_epochs, eval_every=eval_every,
                random_state=random_state, class_weight=class_weight, callbacks=callbacks,
                warm_start=start, client=run_client, **solver_options,
            )  # fmt: skip
            return result, time.perf_counter() - begin

        def validate(result):
            decision = result.decision_function(validation_data, client=run_client or None)
            return float(score(y_valid, decision))

        for k, alpha in enumerate(grid):
            start = None
            if warm_start and previous is not None:
                start = _next_start(
                    previous, float(grid[k - 1]), float(alpha), problem.loss.classification
                )
            result, spent = run(alpha, tol, start)
            seconds.append(spent)
            epochs.append(int(result.n_epochs))
            results.append(result)
            previous = result
            if score is not None:
                scores.append(validate(result))
        refined = ()
        if score is not None and refine:
            refined = _refine(grid, results, scores, (seconds, epochs), tol, refine, run, validate)
        total = time.perf_counter() - started

    best_alpha = best_result = None
    score_array = None
    if score is not None:
        score_array = np.array(scores, dtype=np.float64)
        best = _best_index(score_array, refined)
        if best is not None:
            best_alpha, best_result = float(grid[best]), results[best]
    return RegularizationPath(
        alphas=np.asarray(grid, dtype=np.float64),
        results=tuple(results),
        scores=score_array,
        best_alpha=best_alpha,
        best_result=best_result,
        scoring=scoring if score is not None else None,
        alpha_max=top,
        seconds=np.array(seconds, dtype=np.float64),
        epochs=np.array(epochs, dtype=np.int64),
        total_seconds=float(total),
        warm_start=bool(warm_start),
        refined=np.asarray(refined, dtype=np.int64),
    )


def _solve(data, loss, regularizer, alpha, solver, *, client, **kwargs):
    from daskpd.solvers import solve

    return solve(data, loss, regularizer, alpha, solver, client=client, **kwargs)


def _next_start(result, alpha_before, alpha, classification=True):
    """The start of the point at ``alpha`` from the result at ``alpha_before``.

    With the L2 penalty a dual point ``z`` stands for ``w = -X^T z / (alpha n)``, so the
    previous ``(w, z)`` cannot be kept both: keeping ``z`` starts the next point at ``w``
    times ``alpha_before / alpha`` (a model the grid's step larger), keeping ``w`` needs
    ``z`` times ``alpha / alpha_before``. Either stays feasible (every dual domain is an
    interval containing 0, and the ratio is below 1). Classification losses keep ``w``:
    as alpha falls on nearly separated data (most of a grid on wide sparse data) the
    margins settle and the dual shrinks with alpha (it is LIBLINEAR's warm start over a
    growing ``C``, whose dual ``a_i = -y_i z_i / (alpha n)`` in ``[0, C]`` it keeps). The
    regression losses keep ``z``: their dual is the residuals, which settle as alpha falls.
    Each choice took the fewer rounds on the sets of ``tests/solvers/test_path.py`` and on
    the splice-site-like set (BENCHMARKS.md, the path). A result without a dual is the start
    as it is (its ``w``).
    """
    z = result.z
    if z is None:
        return result
    if isinstance(z, list | tuple):
        z = np.concatenate(
            [np.asarray(part.result() if hasattr(part, "result") else part, np.float64).ravel()
             for part in z]
        )  # fmt: skip
    from daskpd.solvers.driver.types import Iterate

    z = np.asarray(z, dtype=np.float64)
    if not classification:
        return Iterate(w=result.w * (alpha_before / alpha), z=z)
    return Iterate(w=result.w, z=z * (alpha / alpha_before))


def _refine(grid, results, scores, costs, tol, steps, run, validate):
    """Re-solve the near-ties of the validation scores to tighter gaps before the choice.

    A point's model is within ``tol`` of its optimum, not at it: two certified models of
    one alpha (a warm start's and a cold start's) score differently, and where two alphas'
    scores are closer than that, the order of the pair is the tolerance's, not the
    problem's. When the two best scores are within :data:`REFINE_MARGIN`, each step
    re-solves them, each from its own result, to a gap 100 times smaller (down to
    :data:`REFINE_FLOOR` times ``max(1, |P|)``) and re-scores them: the largest change of
    a score is what the step's tolerance moved the scores by, and every other point whose
    score is within twice that of the best joins them (re-solved in the same step). The
    steps end when the best of these contenders leads the next by more than twice that
    change (the next step, at a gap 100 times smaller still, moves the scores less), when
    no score moved, or after ``steps`` steps. ``results``, ``scores`` and ``costs`` (the
    points' seconds and epochs) are updated in place (a re-solve's cost added to its
    point's); a re-solve replaces its point's result only when it reached its own gap
    within the budget (``max_epochs``, ``time_limit``).

    Returns
    -------
    tuple of int
        The indices of the contenders (the ones :func:`_best_index` chooses among; empty:
        no refinement, the choice is among all points).
    """
    finite = [k for k in range(len(scores)) if np.isfinite(scores[k])]
    ranked = sorted(finite, key=lambda k: (-scores[k], k))
    if len(ranked) < 2 or scores[ranked[0]] - scores[ranked[1]] > REFINE_MARGIN:
        return ()

    def resolve(k, step_tol):
        """Re-solve point ``k`` to ``step_tol``; how far its score moved (0: not re-solved)."""
        floor = REFINE_FLOOR * max(1.0, abs(float(results[k].primal)))
        point_tol = max(step_tol, floor)
        if results[k].gap <= point_tol:
            return 0.0
        alpha = float(grid[k])
        result, spent = run(alpha, point_tol, _next_start(results[k], alpha, alpha))
        costs[0][k] += spent
        costs[1][k] += int(result.n_epochs)
        if not result.converged:
            return 0.0
        new = validate(result)
        moved = abs(new - scores[k])
        results[k], scores[k] = result, new
        return moved

    contenders = set(ranked[:2])
    step_tol = tol
    for _ in range(int(steps)):
        step_tol = step_tol / 100.0
        done, moved = set(), 0.0
        while contenders - done:
            for k in sorted(contenders - done):
                moved = max(moved, resolve(k, step_tol))
                done.add(k)
            best = max(scores[k] for k in contenders)
            contenders |= {k for k in finite if scores[k] >= best - 2.0 * moved}
        top = sorted((scores[k] for k in contenders), reverse=True)
        # no score moved: a tighter gap would not move them either (equal rankings)
        if moved == 0.0 or top[0] - top[1] > 2.0 * moved:
            break
    return tuple(sorted(int(k) for k in contenders))


def _best_index(scores, among=()):
    """The index of the highest score (among ``among`` when given), the first (largest
    alpha) on a tie; None if all NaN."""
    if np.all(np.isnan(scores)):
        return None
    finite = np.where(np.isnan(scores), -np.inf, scores)
    if len(among):
        keep = np.full(finite.shape, -np.inf)
        keep[list(among)] = finite[list(among)]
        finite = keep
    # argmax returns the first of equal maxima: the grid runs largest alpha first
    return int(np.argmax(finite))


def _scorer(scoring, classification):
    from daskpd import metrics

    if scoring is None:
        scoring = "average_precision" if classification else "r2"
    if callable(scoring):
        return scoring, scoring
    functions = {
        "average_precision": metrics.average_precision,
        "auprc": metrics.auprc,
        "roc_auc": metrics.roc_auc,
        "r2": metrics.r2,
    }
    if scoring not in functions:
        raise ValueError(f"scoring must be one of {_SCORINGS} or a callable, got {scoring!r}")
    if (scoring == "r2") == bool(classification):
        kind = "classification" if classification else "regression"
        raise ValueError(f"scoring={scoring!r} does not fit a {kind} loss")
    return scoring, functions[scoring]


def _check_alphas(alphas):
    try:
        grid = np.asarray(alphas, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"alphas must be numbers, got {alphas!r}") from None
    if grid.size == 0:
        raise ValueError("alphas is empty")
    if not np.all(np.isfinite(grid) & (grid > 0)):
        raise ValueError(f"alphas must be finite and > 0, got {grid.tolist()}")
    if np.unique(grid).size != grid.size:
        raise ValueError(f"alphas has repeated values: {grid.tolist()}")
    return np.sort(grid)[::-1].copy()


def _check_grid(n_alphas, decades):
    if isinstance(n_alphas, bool) or not isinstance(n_alphas, int | np.integer) or n_alphas < 1:
        raise ValueError(f"n_alphas must be a positive integer, got {n_alphas!r}")
    try:
        span = float(decades)
    except (TypeError, ValueError):
        raise ValueError(f"decades must be a number, got {decades!r}") from None
    if not (math.isfinite(span) and span > 0):
        raise ValueError(f"decades must be finite and > 0, got {decades!r}")


def _as_data(data, name):
    # once for the path, not once per point (an (X, y) pair is converted here)
    if hasattr(data, "n_row_blocks") and hasattr(data, "block"):
        return data
    if isinstance(data, tuple | list) and len(data) == 2:
        from daskpd.data import as_dataset

        return as_dataset(data[0], data[1])
    raise ValueError(
        f"{name} must be a Dataset, a MemoryDataset or an (X, y) pair, got {type(data).__name__}"
    )


@contextlib.contextmanager
def _path_client(client, data):
    """The one client of the whole path, chosen as :func:`daskpd.solve` chooses (``False``:
    in-process); a LocalCluster started here serves every point and closes at the end."""
    from daskpd.solvers.driver.run import _local_scheduler_configured, in_this_process

    if client is not None:
        if client is False:
            with in_this_process():
                yield False
            return
        with client.as_current():
            yield client
        return
    if _local_scheduler_configured():
        # a local scheduler named in dask.config wins, as in solve
        yield False
        return
    from daskpd._cluster import active_client, cluster_client

    active = active_client()
    if active is not None:
        yield active
        return
    if getattr(data, "path", None) is None:
        yield False
        return
    with cluster_client(start=True) as started, started.as_current():
        yield started
