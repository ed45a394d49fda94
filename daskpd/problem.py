"""Primal, dual and duality gap of a regularized linear model over an out-of-core dataset.

Objective (weighted, ``c_i = sample_weight_i * class_weight[y_i]``, both optional)::

    P(w) = (1/n) sum_i c_i loss(x_i . w, y_i) + alpha R(w)

Dual (SPDC's sign convention, ``loss(u) = sup_z z u - loss*(z)``)::

    D(z) = -(1/n) sum_i c_i loss*(z_i / c_i, y_i) - alpha R*(-X^T z / (n alpha))

Weak duality ``D(z) <= P(w)`` holds for every ``w`` and ``z``, so ``P(w) - D(z)`` bounds the
suboptimality of ``w``. For constraint sets (``R`` an indicator, ``alpha R = R``) the last term is
the support function ``R*(-X^T z / n)`` and ``alpha`` has no effect.

**The dual point actually used.** Given ``z`` (or, when none is given, ``z_i = c_i
loss'(x_i . w, y_i)``, which is dual-optimal when ``w`` is primal-optimal), the reported dual is
``s A - alpha R*(s v)`` with ``A = -(1/n) sum_i c_i loss*(z_i / c_i)``, ``v = -X^T z / (n alpha)``
and ``s = R.feasible_scale(v)`` in [0, 1]: 1 when ``R*`` is finite (L2, elastic net with
``l1_ratio < 1``, constraint sets), and ``min(1, 1 / ||v||_*)`` for norms whose conjugate is the
indicator of the dual-norm ball (L1, group lasso, l1/l-inf, trace norm). Every loss domain is an
interval containing 0 and every ``loss*(0) = 0``, so ``s z`` stays feasible and, by convexity,
``loss*(s z_i) <= s loss*(z_i)``; the reported value is therefore a lower bound on ``D(s z)``, hence
on the optimum, and equals ``D(z)`` when ``s = 1``. The gap is ``>= 0`` always, and tends to 0 at
an optimum when the loss is smooth (``z`` built from ``w`` converges to the dual optimum).

For non-smooth losses (hinge, absolute, epsilon-insensitive) the dual built from ``w`` alone is
valid but not tight: at the optimum, rows exactly on a kink need a fraction of the subgradient
interval that ``w`` does not determine. Solvers that maintain a dual iterate pass it as ``z`` and
get a gap that vanishes; from ``w`` alone the gap stays positive.

Evaluation is one Dask compute: one task per row block runs the numba kernel of
:mod:`daskpd.kernels.objective` (loss sum, conjugate sum and the n_features-sized partial
``X^T z``), a tree reduction sums them, and a last task adds the regularizer terms, so that
the client receives five numbers, not a vector of n_features floats. A solver that keeps
``X^T z`` as it goes (SPDC's ``u``) passes it as ``xtz``: the blocks then return their two
sums only. ``w`` and ``xtz`` can be futures on the cluster (a solver's state where it is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from daskpd._cluster import block_worker, worker_addresses
from daskpd.data.conversion import as_data
from daskpd.data.format import NO_VALUES
from daskpd.data.resident import resident_rows_arrays
from daskpd.kernels.objective import BlockRows, csr_block_partial, dense_block_partial
from daskpd.losses import Loss, get_loss
from daskpd.regularizers import Regularizer, Zero, get_regularizer

__all__ = ["Evaluation", "Problem"]

#: Number of partial results summed by one task of the tree reduction.
_FAN_IN = 8
#: Relative size below which a negative primal - dual difference is rounding (see _evaluation).
_ROUNDING = 1e-12


class Evaluation(NamedTuple):
    """Result of :meth:`Problem.evaluate`.

    Attributes
    ----------
    primal : float
        ``P(w)``.
    dual : float
        The certified lower bound on the optimum (see :mod:`daskpd.problem`).
    gap : float
        ``primal - dual`` (``>= 0``; ``inf`` when ``w`` or ``z`` is infeasible).
    loss : float
        ``(1/n) sum_i c_i loss(x_i . w, y_i)``.
    regularization : float
        ``alpha R(w)`` (``R(w)`` for constraint sets).
    dual_scale : float
        Factor ``s`` applied to ``z`` to make the regularizer conjugate finite.
    n_samples : int
    """

    primal: float
    dual: float
    gap: float
    loss: float
    regularization: float
    dual_scale: float
    n_samples: int


def _plain(value):
    """A NumPy scalar as the Python number (or string) it holds, for messages: ``0.0``, not
    ``np.float64(0.0)``."""
    return value.item() if isinstance(value, np.generic) else value


# ----------------------------------------------------------------------------------------------
# block tasks
# ----------------------------------------------------------------------------------------------
def _row_weights(data, start, stop, y, class_weight):
    weight = data.sample_weight_rows(start, stop)
    if class_weight is not None:
        negative, positive = class_weight
        per_class = np.where(y > 0, positive, negative)
        weight = per_class if weight is None else weight * per_class
    return weight


def _z_rows(start, stop, pieces, offsets):
    """Rows ``start:stop`` of a dual vector stored as pieces starting at ``offsets``."""
    parts = []
    for piece, offset in zip(pieces, offsets, strict=True):
        piece = np.asarray(piece, dtype=np.float64).ravel()
        lo, hi = max(start, offset), min(stop, offset + piece.shape[0])
        if lo < hi:
            parts.append(piece[lo - offset : hi - offset])
    z = np.concatenate(parts) if parts else np.empty(0)
    if z.shape[0] != stop - start:
        raise ValueError(f"z pieces cover {z.shape[0]} of the rows [{start}, {stop})")
    return np.ascontiguousarray(z)


def _block_partial(*args):
    """Task: ``(loss_sum, conj_sum, X_block^T z)`` of one row block (arguments as below)."""
    return _block_partial_into(None, *args)


def _block_partial_into(
    before, data, start, stop, w, code, params, class_weight, pieces, offsets, with_xtz=True
):
    """Task: ``before`` (a partial of earlier blocks, or None) plus rows ``start:stop``'s.

    The ``X^T z`` vector of ``before`` is added to in place: it is the result of the task
    before this one in a chain, which no other task reads (see :meth:`Problem._graph`).
    Without ``with_xtz`` the vector is empty and stays so (the caller has ``X^T z``).
    """
    if before is None:
        g = np.zeros(w.shape[0] if with_xtz else 0)
        loss_before = conj_before = 0.0
    else:
        loss_before, conj_before, g = before
    loss_sum, conj_sum = _rows_partial(data, start, stop, w, code, params, class_weight,
                                       pieces, offsets, g)  # fmt: skip
    return loss_before + loss_sum, conj_before + conj_sum, g


def _rows_partial(data, start, stop, w, code, params, class_weight, pieces, offsets, g):
    """``(loss_sum, conj_sum)`` of rows ``start:stop``; their ``X^T z`` is added to ``g``."""
    has_z = pieces is not None
    z = _z_rows(start, stop, pieces, offsets) if has_z else np.empty(0)
    if data.layout == "dense":
        X, y = data.read_rows(start, stop)
        X = np.ascontiguousarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        weight = _row_weights(data, start, stop, y, class_weight)
        weighted = weight is not None
        weight = np.ascontiguousarray(weight, dtype=np.float64) if weighted else np.empty(0)
        y = np.ascontiguousarray(y, dtype=np.float64)
        return dense_block_partial(X, y, weight, weighted, w, code, params, z, has_z, g)
    indptr, indices, values, y = resident_rows_arrays(data, start, stop)
    binary = values is None
    values = NO_VALUES if binary else np.ascontiguousarray(values)
    if values.dtype not in (np.float32, np.float64):
        values = values.astype(np.float64)
    weight = _row_weights(data, start, stop, y, class_weight)
    weighted = weight is not None
    weight = np.ascontiguousarray(weight, dtype=np.float64) if weighted else np.empty(0)
    block = BlockRows(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(indices, dtype=np.int32),
        values,
        binary,
        np.ascontiguousarray(y, dtype=np.float64),
        weight,
        weighted,
    )
    return csr_block_partial(block, w, code, params, z, has_z, g)


def _regularizer_terms(regularizer, alpha, w, g, n_samples):
    """``(reg_term, scale, conj_term)`` of ``P`` and ``D`` at ``w`` and ``X^T z = g``.

    ``reg_term`` is ``alpha R(w)``; the dual's regularizer term is ``conj_term`` at the dual
    scale ``scale`` (module docstring; ``conj_term = 0`` when ``scale = 0``).
    """
    alpha_free = regularizer.is_indicator or isinstance(regularizer, Zero)
    reg_term = regularizer.value(w) if alpha_free else alpha * regularizer.value(w)
    # v = -X^T z / n; the conjugate term is alpha R*(v / alpha), or R*(v) when R is
    # positively homogeneous of degree one in that role (indicators, Zero).
    # in place, the same numbers as -g / n / alpha: at millions of features each fresh
    # temporary is page faults in a worker (two fewer here, and none for scale = 1)
    u = np.negative(np.asarray(g, dtype=np.float64))
    u /= n_samples
    if not alpha_free:
        u /= alpha
    scale = float(regularizer.feasible_scale(u))
    if scale == 0.0:
        return float(reg_term), 0.0, 0.0
    conj_term = regularizer.conjugate(u if scale == 1.0 else scale * u)
    if not alpha_free:
        conj_term = alpha * conj_term
    return float(reg_term), scale, float(conj_term)


def _finish_task(partials, w, xtz, regularizer, alpha, n_samples):
    """Task: the blocks' sums and the regularizer terms (``xtz``, when given, for ``X^T z``)."""
    loss_sum, conj_sum, g = partials
    g = g if xtz is None else xtz
    return (loss_sum, conj_sum, *_regularizer_terms(regularizer, alpha, w, g, n_samples))


def _evaluation(n_samples, loss_sum, conj_sum, reg_term, scale, conj_term) -> Evaluation:
    """The :class:`Evaluation` of the five numbers of :func:`_finish_task` (client side)."""
    loss_term = loss_sum / n_samples
    primal = loss_term + reg_term
    # z = 0 is always feasible with D(0) = 0 (every loss*(0) = 0, R*(0) = 0).
    dual = 0.0 if scale == 0.0 else -scale * conj_sum / n_samples - conj_term
    gap = primal - dual
    if math.isnan(gap) and not (math.isnan(primal) or math.isnan(dual)):
        gap = math.inf
    elif -_ROUNDING * max(1.0, abs(primal)) <= gap < 0.0:
        # Weak duality makes the true gap >= 0; a negative value this small is rounding in
        # the two sums (both are O(n) float additions), so it is reported as 0.
        gap = 0.0
    return Evaluation(
        primal=float(primal),
        dual=float(dual),
        gap=float(gap),
        loss=float(loss_term),
        regularization=float(reg_term),
        dual_scale=float(scale),
        n_samples=n_samples,
    )


def _is_future(value):
    return hasattr(value, "key") and hasattr(value, "result")


def _sum_partials(*parts):
    loss_sum = sum(p[0] for p in parts)
    conj_sum = sum(p[1] for p in parts)
    g = parts[0][2].copy()
    for p in parts[1:]:
        g += p[2]
    return loss_sum, conj_sum, g


# ----------------------------------------------------------------------------------------------
# the problem
# ----------------------------------------------------------------------------------------------
def _normalize_class_weight(class_weight):
    if class_weight is None or class_weight == "balanced":
        return class_weight
    if not isinstance(class_weight, dict):
        raise ValueError(
            f"class_weight must be None, 'balanced' or a dict, got class_weight={class_weight!r}"
        )
    items = {}
    for label, weight in class_weight.items():
        if float(label) not in (-1.0, 1.0):
            raise ValueError(f"class_weight labels must be -1 or +1, got label {_plain(label)!r}")
        weight = float(weight)
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(
                f"class_weight[{_plain(label)!r}] must be finite and >= 0, got {weight!r}"
            )
        items[float(label)] = weight
    return ((-1.0, items.get(-1.0, 1.0)), (1.0, items.get(1.0, 1.0)))


@dataclass(frozen=True)
class Problem:
    """A regularized linear model ``P(w) = (1/n) sum_i c_i loss(x_i . w, y_i) + alpha R(w)``.

    Parameters
    ----------
    loss : Loss or str
        A loss of :mod:`daskpd.losses` or its name.
    regularizer : Regularizer or str
        A regularizer of :mod:`daskpd.regularizers` or its name.
    alpha : float
        Regularization strength; > 0, or >= 0 for constraint sets and :class:`~daskpd.
        regularizers.Zero` (whose ``alpha R`` does not depend on alpha).
    class_weight : None, "balanced" or dict, default=None
        Row weight per label ({-1: c_neg, +1: c_pos}, missing labels weigh 1; "balanced" uses
        ``n / (2 n_label)``), multiplied with the dataset's sample weights. Classification
        losses only. A dict is stored as ``((-1.0, c_neg), (1.0, c_pos))``.

    Raises
    ------
    ValueError
        Unknown loss or regularizer, alpha out of range, malformed class_weight.
    """

    loss: Loss | str = "hinge"
    regularizer: Regularizer | str = "l2"
    alpha: float = 1e-4
    class_weight: object = None

    def __post_init__(self):
        loss = get_loss(self.loss)
        regularizer = get_regularizer(self.regularizer)
        try:
            alpha = float(self.alpha)
        except (TypeError, ValueError):
            raise ValueError(f"alpha must be a number, got alpha={self.alpha!r}") from None
        alpha_free = regularizer.is_indicator or isinstance(regularizer, Zero)
        if not math.isfinite(alpha) or alpha < 0 or (alpha == 0 and not alpha_free):
            bound = ">= 0" if alpha_free else "> 0"
            raise ValueError(
                f"alpha must be finite and {bound} for regularizer={regularizer.name!r}, "
                f"got alpha={self.alpha!r}"
            )
        class_weight = _normalize_class_weight(self.class_weight)
        if class_weight is not None and not loss.classification:
            raise ValueError(
                f"class_weight needs a classification loss, got loss={loss.name!r} with "
                f"class_weight={self.class_weight!r}"
            )
        object.__setattr__(self, "loss", loss)
        object.__setattr__(self, "regularizer", regularizer)
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "class_weight", class_weight)

    # ---- validation

    def check(self, data, w=None, z=None, z_bounds=None):
        """Validate ``data`` (and ``w``, ``z`` if given) against the problem, without Dask work.

        Parameters
        ----------
        data : Dataset, MemoryDataset or (X, y) pair
        w : array-like of shape (n_features,), optional
        z : ndarray of shape (n_samples,) or list of pieces, optional
        z_bounds : array-like of int, optional
            Row bounds of the pieces of ``z`` (``len(z) + 1`` entries from 0 to n_samples).

        Returns
        -------
        data
            The dataset-like object the evaluation reads (``data`` itself for datasets).

        Raises
        ------
        ValueError
            Naming the offending parameter and value: labels not in {-1, +1} (or a single
            class) for a classification loss, a regularizer defined for another number of
            features, shapes of ``w`` or ``z`` that do not match, an empty dataset. Data of
            task "multiclass" passes with at least two classes: a classification loss trains
            it one-vs-rest (:mod:`daskpd.solvers.cocoa._multiclass`), one problem per class.
        """
        data = as_data(data)
        n_samples, n_features = int(data.n_samples), int(data.n_features)
        if n_samples == 0:
            raise ValueError("data has no rows (n_samples=0)")
        size = self.regularizer.n_features
        if size is not None and size != n_features:
            raise ValueError(
                f"regularizer={self.regularizer.name!r} is defined for n_features={size}, "
                f"but the data has n_features={n_features}"
            )
        if self.loss.classification and getattr(data, "task", None) == "multiclass":
            classes = data.classes
            if classes is None or classes.shape[0] < 2:
                raise ValueError(
                    f"loss={self.loss.name!r} on multiclass data needs at least 2 classes, got "
                    f"label counts {data.label_counts}"
                )
        elif self.loss.classification:
            self._check_labels(data)
        if w is not None:
            w = np.asarray(w)
            if w.shape != (n_features,):
                raise ValueError(
                    f"w must have shape ({n_features},) to match the data, got w with shape "
                    f"{w.shape}"
                )
        if z is not None:
            self._z_layout(z, z_bounds, n_samples)
        return data

    def _check_labels(self, data):
        task = getattr(data, "task", None)
        counts = getattr(data, "label_counts", None)
        if task != "binary" or not counts:
            y = np.asarray(data.y)
            bad = y[(y != 1.0) & (y != -1.0)]
            if bad.size:
                raise ValueError(
                    f"loss={self.loss.name!r} needs labels in {{-1, +1}}, got label "
                    f"{_plain(bad[0])!r}"
                )
            counts = {"-1": int(np.sum(y == -1.0)), "1": int(np.sum(y == 1.0))}
        n_negative, n_positive = int(counts.get("-1", 0)), int(counts.get("1", 0))
        if n_negative == 0 or n_positive == 0:
            raise ValueError(
                f"loss={self.loss.name!r} needs both classes -1 and +1, got label counts "
                f"{{-1: {n_negative}, +1: {n_positive}}}"
            )
        return n_negative, n_positive

    @staticmethod
    def _z_layout(z, z_bounds, n_samples):
        """Return ``(pieces, bounds)``, or ``(None, z)`` for a whole ndarray, validating shapes.

        A Dask array becomes its chunks (delayed pieces), so it is never gathered on the client.
        """
        if z_bounds is None and hasattr(z, "to_delayed") and hasattr(z, "chunks"):
            if z.ndim != 1 or z.shape[0] != n_samples:
                raise ValueError(
                    f"z must have shape ({n_samples},) to match the data, got a Dask array "
                    f"with shape {z.shape}"
                )
            z_bounds = np.concatenate([[0], np.cumsum(z.chunks[0])])
            z = list(z.to_delayed().ravel())
        if z_bounds is None:
            if isinstance(z, (list, tuple)):
                raise ValueError("z given as a list of pieces needs z_bounds")
            z = np.asarray(z, dtype=np.float64)
            if z.shape != (n_samples,):
                raise ValueError(
                    f"z must have shape ({n_samples},) to match the data, got z with shape "
                    f"{z.shape}"
                )
            return None, z
        bounds = np.asarray(z_bounds, dtype=np.int64).ravel()
        pieces = list(z) if isinstance(z, (list, tuple)) else None
        if pieces is None:
            raise ValueError(f"z_bounds needs z as a list of pieces, got z of type {type(z)}")
        valid = (
            bounds.size == len(pieces) + 1
            and bounds[0] == 0
            and bounds[-1] == n_samples
            and np.all(np.diff(bounds) >= 0)
        )
        if not valid:
            raise ValueError(
                f"z_bounds must rise from 0 to n_samples={n_samples} with one more entry than "
                f"the {len(pieces)} pieces of z, got z_bounds={bounds.tolist()}"
            )
        for piece, lo, hi in zip(pieces, bounds[:-1], bounds[1:], strict=True):
            if isinstance(piece, np.ndarray) and piece.shape != (hi - lo,):
                raise ValueError(
                    f"z piece for rows [{lo}, {hi}) must have shape ({hi - lo},), got {piece.shape}"
                )
        return pieces, bounds

    def _class_weight_pair(self, data):
        if self.class_weight is None:
            return None
        if self.class_weight == "balanced":
            n_negative, n_positive = self._check_labels(data)
            n = n_negative + n_positive
            return (n / (2.0 * n_negative), n / (2.0 * n_positive))
        return (self.class_weight[0][1], self.class_weight[1][1])

    # ---- evaluation

    def _graph(self, w, data, z, z_bounds, workers=(), xtz=None):
        """``(graph, root)``: tasks of the five numbers of :func:`_finish_task`.

        One task per row block (a :class:`~daskpd._graphs.TaskGraph`, whose tasks cost
        microseconds each to add: datasets of thousands of blocks stay cheap), the sum of
        their ``(loss_sum, conj_sum, X^T z)`` and the regularizer terms. ``w`` and ``xtz``
        are ndarrays or futures.

        Without ``workers``, the blocks' partials are tree-reduced. With ``workers`` (the
        client's worker addresses, sorted), block ``i`` runs on the worker that keeps its
        rows between evaluations (:func:`daskpd._cluster.block_worker`),
        and the blocks form chains of ``_FAN_IN`` consecutive blocks whose tasks add into
        the ``X^T z`` vector of the task before: a dense vector of ``n_features`` floats
        per chain instead of one per block, to allocate, move between workers and sum (at
        4.66M features and 100 blocks, 3.7 GB before). The chains depend on the blocks
        only, not on the cluster: a run whose worker was replaced, or that sees one worker
        fewer for a moment, gets the same sums bit for bit. With ``xtz`` the blocks' vector
        is empty (the caller has ``X^T z``).
        """
        from dask.task_spec import TaskRef

        from daskpd._graphs import TaskGraph

        n_samples = int(data.n_samples)
        graph = TaskGraph("daskpd-objective")
        # One node each for the dataset handle and w, so neither is copied into every task.
        data_ref = graph.data("data", data)
        w_ref = w if isinstance(w, TaskRef) else graph.data("w", w)
        with_xtz = xtz is None
        if not with_xtz and not isinstance(xtz, TaskRef):
            xtz = graph.data("xtz", xtz)
        code = int(self.loss.code)
        params = np.asarray(self.loss.params, dtype=np.float64)
        class_weight = self._class_weight_pair(data)
        pieces = full = offsets = None
        if z is not None:
            pieces, layout = self._z_layout(z, z_bounds, n_samples)
            if pieces is None:
                full = layout
            else:
                offsets = [int(b) for b in layout[:-1]]
                ends = [int(b) for b in layout[1:]]
                refs = []
                for k, piece in enumerate(pieces):
                    if hasattr(piece, "__dask_graph__"):
                        refs.append(graph.collection(piece))
                    elif isinstance(piece, np.ndarray):
                        # Stored once under its own key; tasks reference it.
                        refs.append(graph.data(f"z-{k}", piece))
                    else:
                        # Dask futures are references the scheduler resolves.
                        refs.append(piece)
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        n_blocks = bounds.size - 1
        workers = tuple(sorted(workers))
        chains = {}
        keys = []
        for i in range(n_blocks):
            start, stop = int(bounds[i]), int(bounds[i + 1])
            if z is None:
                block_pieces, block_offsets = None, None
            elif full is not None:
                block_pieces, block_offsets = [full[start:stop]], [start]
            else:
                # Only the pieces overlapping this block become dependencies of its task.
                keep = [k for k in range(len(offsets)) if offsets[k] < stop and ends[k] > start]
                block_pieces = [refs[k] for k in keep]
                block_offsets = [offsets[k] for k in keep]
            args = (data_ref, start, stop, w_ref, code, params, class_weight, block_pieces,
                    block_offsets, with_xtz)  # fmt: skip
            if not workers:
                keys.append(graph.task(f"block-{i}", _block_partial, *args))
                continue
            chain = i // _FAN_IN
            chains[chain] = graph.task(
                f"block-{i}", _block_partial_into, chains.get(chain), *args,
                worker=block_worker(workers, i, n_blocks), allow_other_workers=True,
            )  # fmt: skip
        if workers:
            keys = [chains[c] for c in sorted(chains)]
        total = graph.tree("sum", _sum_partials, keys, fan_in=_FAN_IN, lone_task=True)
        root = graph.task("finish", _finish_task, total, w_ref, xtz, self.regularizer,
                          self.alpha, n_samples)  # fmt: skip
        return graph, root

    def evaluate(self, w, data, z=None, z_bounds=None, *, xtz=None, client=None) -> Evaluation:
        """Primal, dual and gap at ``w`` (and ``z``) in one Dask compute.

        Parameters
        ----------
        w : array-like of shape (n_features,), or a Dask future of one
            Primal point. A future (with ``client``) is read on the workers where it is,
            not gathered; its shape is the caller's to get right.
        data : Dataset, MemoryDataset or (X, y) pair
        z : ndarray or dask.array.Array of shape (n_samples,), or list of pieces, optional
            Dual point. Pieces (ndarrays, Dask futures or delayed objects holding consecutive
            row ranges) need ``z_bounds``; they are read by the block tasks, so ``z`` never has
            to reach the client (nor does a Dask array, whose chunks become the pieces).
            Default: ``z_i = c_i loss'(x_i . w, y_i)``.
        z_bounds : array-like of int, optional
            Row bounds of the pieces of ``z``.
        xtz : array-like of shape (n_features,), or a Dask future of one, optional
            ``X^T z`` (unweighted: ``sum_i z_i x_i``) as the caller already has it, e.g. a
            solver's running sum; needs ``z``. The pass then skips computing it. The dual is
            exactly as certified as ``xtz`` is equal to ``X^T z``: a running sum differs from
            the pass's by rounding only if the solver adds every change of ``z`` into it.
        client : distributed.Client, optional
            Compute on this client; default: Dask's current scheduler.

        Returns
        -------
        Evaluation
        """

        remote = client is not None and _is_future(w)
        data = self.check(data, w=None if remote else w, z=z, z_bounds=z_bounds)
        if not remote:
            w = np.ascontiguousarray(w, dtype=np.float64)
        if xtz is not None:
            if z is None:
                raise ValueError("xtz needs z: it is X^T z for the z given")
            if not (client is not None and _is_future(xtz)):
                xtz = np.asarray(xtz, dtype=np.float64)
                d = int(data.n_features)
                if xtz.shape != (d,):
                    raise ValueError(
                        f"xtz must have shape ({d},) (n_features,), got xtz with shape {xtz.shape}"
                    )
        n_samples = int(data.n_samples)
        if client is not None:
            # w to every worker once, not through the scheduler inside the graph (nor
            # fetched by every worker from one, which the scheduler would then prefer); a
            # future (a solver's state) is read where it is
            w_ref = w if remote else client.scatter(w, broadcast=True, hash=False)
            if isinstance(xtz, np.ndarray):
                # read by the last task only: to one worker, not inside the graph
                xtz = client.scatter(xtz, hash=False)
            graph, root = self._graph(
                w_ref, data, z, z_bounds, workers=worker_addresses(client), xtz=xtz
            )
            terms = graph.submit(client, [root])[0].result()
            # held until here: a graph sent by client.get does not hold the futures it reads,
            # and one released before the scheduler has the graph is lost to its tasks
            del w_ref, xtz
        else:
            graph, root = self._graph(w, data, z, z_bounds, xtz=xtz)
            (terms,) = graph.compute([root])
        return _evaluation(n_samples, *terms)

    def primal(self, w, data, *, client=None) -> float:
        """``P(w)`` (one Dask compute)."""
        return self.evaluate(w, data, client=client).primal

    def dual(self, z, data, *, client=None) -> float:
        """The certified dual value at ``z`` (ndarray of shape (n_samples,); one compute)."""
        data = as_data(data)
        return self.evaluate(np.zeros(data.n_features), data, z=z, client=client).dual

    def gap(self, w, data, z=None, z_bounds=None, *, client=None) -> float:
        """``P(w) - D(z)`` (``z`` built from ``w`` when None; one Dask compute)."""
        return self.evaluate(w, data, z=z, z_bounds=z_bounds, client=client).gap
