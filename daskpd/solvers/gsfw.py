"""GSFW: generalized stochastic Frank-Wolfe with a kept substitute gradient (Lu & Freund).

Solves ``min_w (1/n) sum_j loss(x_j . w, y_j) + alpha R(w)`` over a bounded ``dom R`` with
one linear minimization oracle (LMO) call per iteration and ``b`` sample gradients per
iteration. The predicted values ``s`` (one per row) replace ``Xw``; the substitute gradient
``d = (1/n) X^T loss'(s)`` is kept and updated in O(nnz of the mini-batch).

Translation between the paper and this code (once for the module):

=========================  ===============================================================
paper (GSFW)               code
=========================  ===============================================================
``beta``                   ``w`` (``beta_bar``: ``w_bar``, the answer; ``beta~``: LMO)
``w`` (dual weights)       ``z = loss'(s)``; ``w_bar`` (Theorem 3.1 certificate): ``z_bar``
``s``, ``d``               ``s``, ``d``
``eta_i``, ``alpha_i``     ``eta``, averaging step (see :mod:`daskpd.kernels.gsfw`)
``lambda``                 ``alpha``
``delta``                  ``radius``
``n`` in the step sizes    ``m = n / batch_size`` (Remark 3.4)
=========================  ===============================================================

Dask shape: a chained pass. Each epoch visits the row blocks in a shuffled order; the carry
``(d, averaged-iterate accumulator)`` flows from block task to block task, and each block
keeps its own ``s`` and lazy dual-average accumulators. A block task runs
``ceil(n_block / b)`` iterations whose mini-batches are drawn from that block's rows. With
one row block this is Algorithm 1 exactly (uniform ``b``-subsets of all rows); with several
it is the same update with block-stratified sampling (each row is still visited at the
expected rate once per epoch). The step sizes always use the global iteration count.

Regularizers: the L1 ball (vertex LMO, O(1) averaged-iterate update), ``l1`` and ``l2``
penalties (closed-form LMOs after adding the redundant ball of the paper's Example 1.1,
``||w|| <= P(0) / alpha`` resp. ``sqrt(2 P(0) / alpha)``; ``l2`` runs the strongly convex
variant of Theorem 3.2 with its linear rate), and any regularizer with an ``lmo`` method
(generalized LMO called between kernel iterations).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import weakref
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from daskpd.kernels import gsfw as kernels
from daskpd.solvers._driver import Iterate, block_seeds, epoch_seed, register_solver

__all__ = [
    "GSFW",
    "GSFWOptions",
    "frank_wolfe",
    "gsfw_dual_mirror_descent",
    "stochastic_frank_wolfe",
    "theorem31_bound",
]


# --------------------------------------------------------------------------------------------
# blocks


def block_csr(data, block):
    """CSR arrays of one row block in the form kernels take.

    Parameters
    ----------
    data : Dataset-like
        Has ``block_arrays(i)``.
    block : int

    Returns
    -------
    indptr : ndarray of int64
    indices : ndarray of int32/int64
    values : ndarray of float (empty when binary)
    has_values : bool
    y : ndarray of float64
    """
    path = getattr(data, "path", None)
    if path is not None:
        return _cached_block(data, str(path), int(block))
    try:
        per_data = _MEMORY_BLOCKS.setdefault(data, {})
    except TypeError:
        return _read_block(data, block)
    # In-memory datasets convert dense rows to CSR on every read; keep the converted block
    # for as long as the dataset object lives.
    if block not in per_data:
        per_data[block] = _read_block(data, block)
    return per_data[block]


_MEMORY_BLOCKS = weakref.WeakKeyDictionary()


def _read_block(data, block):
    indptr, indices, values, labels = data.block_arrays(block)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices)
    has_values = values is not None
    values = np.ascontiguousarray(values) if has_values else np.empty(0, dtype=np.float64)
    return indptr, indices, values, has_values, np.ascontiguousarray(labels, dtype=np.float64)


@functools.lru_cache(maxsize=16)
def _cached_block_impl(key, data_ref):
    return _read_block(data_ref.data, key[1])


class _Ref:
    """Hashable wrapper so the LRU cache keys on the store path, not on the Dataset object."""

    def __init__(self, path, data):
        self.path = path
        self.data = data

    def __hash__(self):
        return hash(self.path)

    def __eq__(self, other):
        return isinstance(other, _Ref) and other.path == self.path


def _cached_block(data, path, block):
    # Solvers touch the same block every iteration; reading and decompressing zarr chunks
    # each time would dominate. The cache lives in the worker process, keyed by store path.
    return _cached_block_impl((path, block), _Ref(path, data))


def _sum_arrays(*arrays):
    out = np.array(arrays[0], dtype=np.float64, copy=True)
    for a in arrays[1:]:
        out += a
    return out


def tree_sum(parts, fan_in=8):
    """Sum delayed arrays with a tree of ``fan_in``-ary tasks (a map-reduce's reduce)."""
    parts = list(parts)
    while len(parts) > 1:
        parts = [
            dask.delayed(_sum_arrays, pure=False)(*parts[k : k + fan_in])
            for k in range(0, len(parts), fan_in)
        ]
    return parts[0]


def compute(client, *objects):
    """One Dask compute on ``client`` (or the current scheduler); results as a tuple."""
    if client is not None:
        return tuple(client.gather(client.compute(list(objects))))
    return dask.compute(*objects, scheduler=_in_process_scheduler())


def _in_process_scheduler():
    # Without a client the run is in-process: a scheduler set in dask.config is used, but not
    # a distributed client that merely happens to be the default one.
    return dask.config.get("scheduler", None) or "threads"


# --------------------------------------------------------------------------------------------
# problem translation


@dataclass(frozen=True)
class _Spec:
    """What the kernels need about the problem (picklable, small)."""

    loss_code: int
    loss_params: np.ndarray
    lmo_code: int  # kernels.LMO_* ; LMO_DENSE for the Python generalized LMO
    lmo_params: np.ndarray
    strong: bool
    sigma: float
    n: int
    n_features: int
    batch_size: int
    m: float


def _regularizer_kind(problem):
    """Classify the regularizer: ('l1_ball', radius) | ('l1', None) | ('l2', None) |
    ('lmo', None) | (None, reason)."""
    reg = problem.regularizer
    name = str(getattr(reg, "name", type(reg).__name__)).lower()
    radius = getattr(reg, "radius", None)
    if name in ("l1_ball", "l1ball") and radius is not None:
        return "l1_ball", float(radius)
    if getattr(reg, "separable", False):
        from daskpd.kernels import scalar

        if reg.code == scalar.L1:
            return "l1", None
        if reg.code == scalar.L2:
            return "l2", None
        return None, f"separable regularizer {name!r} has no GSFW LMO (use l1, l2 or a ball)"
    if callable(getattr(reg, "lmo", None)):
        return "lmo", None
    return None, f"regularizer {name!r} has no linear minimization oracle (lmo)"


def _zero_loss(problem, data):
    y = np.asarray(data.y, dtype=np.float64)
    return float(np.mean(problem.loss.value(np.zeros_like(y), y)))


# --------------------------------------------------------------------------------------------
# block task of the chained pass


def _draw_batches(seed, n_rows, batch_size, n_iterations):
    rng = np.random.default_rng(seed)
    out = np.empty((n_iterations, batch_size), dtype=np.int64)
    for k in range(n_iterations):
        out[k] = rng.choice(n_rows, size=batch_size, replace=False)
    return out


def _gsfw_block_task(carry, block_state, data, block, seed, n_iterations, spec, lmo_fn):
    """Run the iterations of one block on copies of the carry and the block state."""
    indptr, indices, values, has_values, y = block_csr(data, block)
    d = carry["d"].copy()
    w_acc = carry["w_acc"].copy()
    w_bar = carry["w_bar"].copy()
    it = int(carry["it"])
    s = block_state["s"].copy()
    z_acc = block_state["z_acc"].copy()
    t_last = block_state["t_last"].copy()
    n_rows = s.shape[0]
    b = min(spec.batch_size, n_rows)
    batches = _draw_batches(seed, n_rows, b, n_iterations)
    if spec.lmo_code == kernels.LMO_DENSE:
        for k in range(n_iterations):
            direction = np.ascontiguousarray(lmo_fn(d), dtype=np.float64).ravel()
            kernels.gsfw_apply_direction(
                indptr, indices, values, has_values, y, spec.loss_code, spec.loss_params,
                batches[k], direction, spec.n, spec.m, it + k, s, d, w_bar, z_acc, t_last,
            )  # fmt: skip
    else:
        kernels.gsfw_iterations(
            indptr, indices, values, has_values, y, spec.loss_code, spec.loss_params, batches,
            spec.lmo_code, spec.lmo_params, spec.n, spec.m, it, spec.strong, spec.sigma,
            s, d, w_acc, w_bar, z_acc, t_last,
        )  # fmt: skip
    new_carry = {
        "d": d,
        "w_acc": w_acc,
        "w_bar": w_bar,
        "it": it + n_iterations,
        "grads": int(carry["grads"]) + b * n_iterations,
    }
    return new_carry, {"s": s, "z_acc": z_acc, "t_last": t_last}


def _refresh_task(data, block, block_state, spec):
    indptr, indices, values, has_values, y = block_csr(data, block)
    return kernels.block_xt_derivative(
        indptr, indices, values, has_values, y, spec.loss_code, spec.loss_params,
        block_state["s"], spec.n_features, 1.0 / spec.n,
    )  # fmt: skip


def _start_task(data, block, w, spec):
    """Warm start of one block: ``s = X_b w`` and its partial ``(1/n) X_b^T loss'(s)``."""
    indptr, indices, values, has_values, y = block_csr(data, block)
    s = kernels.block_matvec(indptr, indices, values, has_values, w)
    state = {"s": s, "z_acc": np.zeros(s.shape[0]), "t_last": np.zeros(s.shape[0], np.int64)}
    partial = kernels.block_xt_derivative(
        indptr, indices, values, has_values, y, spec.loss_code, spec.loss_params, s,
        spec.n_features, 1.0 / spec.n,
    )  # fmt: skip
    return state, partial


def _with_d(carry, d, n):
    return {**carry, "d": d, "grads": int(carry["grads"]) + n}


class _DenseLMO:
    """Picklable ``d -> argmin_v d . v + alpha R(v)`` through ``regularizer.lmo``."""

    def __init__(self, regularizer, alpha):
        self.regularizer = regularizer
        self.alpha = alpha

    def __call__(self, d):
        return self.regularizer.lmo(d / self.alpha)


# --------------------------------------------------------------------------------------------
# the solver


@dataclass(frozen=True)
class GSFWOptions:
    """Options of :class:`GSFW`.

    Parameters
    ----------
    batch_size : int or None, default=None
        Rows per iteration ``b``. None: ``max(1, round(0.01 n))``, the paper's experiments.
    iterations_per_epoch : int or None, default=None
        None: ``ceil(n_block / b)`` per block, one pass of sample gradients per epoch. An
        integer ``k`` spreads ``k`` iterations over the blocks in proportion to their rows
        (at least one per block).
    refresh_every : int, default=20
        Every this many epochs, ``d`` is recomputed from ``s`` (a map-reduce in the same
        compute) to stop floating-point drift of the incremental updates.
    """

    batch_size: int | None = None
    iterations_per_epoch: int | None = None
    refresh_every: int = 20

    def __post_init__(self):
        if self.batch_size is not None and (
            isinstance(self.batch_size, bool) or int(self.batch_size) < 1
        ):
            raise ValueError(f"batch_size must be an integer >= 1, got {self.batch_size!r}")
        if self.iterations_per_epoch is not None and int(self.iterations_per_epoch) < 1:
            raise ValueError(
                f"iterations_per_epoch must be an integer >= 1, got {self.iterations_per_epoch!r}"
            )
        if int(self.refresh_every) < 0:
            raise ValueError(f"refresh_every must be >= 0, got {self.refresh_every!r}")


@dataclass(frozen=True)
class _State:
    spec: _Spec
    data: Any
    client: Any
    seed: Any
    carry: dict
    blocks: tuple  # per block: dict(s, z_acc, t_last), or futures of them
    block_iterations: tuple
    epoch: int
    lmo_fn: Any
    options: GSFWOptions
    start_iteration: int = 0  # iterations credited to a warm start (not counted as work)


@register_solver
class GSFW:
    """Generalized stochastic Frank-Wolfe with stochastic substitute gradient (Algorithm 1).

    Registered as ``solver="gsfw"``. The reported ``w`` is the weighted average
    ``beta_bar`` of Prop. 3.6; ``z`` is the dual average ``w_bar`` of Theorem 3.1 (general
    ``R``) or the last ``loss'(s)`` (strongly convex ``R``, Theorem 3.2), so the driver's
    duality gap is the paper's certificate.

    References
    ----------
    H. Lu and R. M. Freund, "Generalized stochastic Frank-Wolfe algorithm with stochastic
    'substitute' gradient for structured convex optimization", Math. Programming, 2020.
    """

    name = "gsfw"
    Options = GSFWOptions

    def check(self, problem, data, options):
        """Reject non-smooth losses, unbounded regularizers and row weights (no Dask work)."""
        loss = problem.loss
        if not math.isfinite(float(getattr(loss, "smoothness", math.inf))):
            raise ValueError(
                f"solver 'gsfw' needs a smooth loss (logistic, squared, ...), got "
                f"loss={getattr(loss, 'name', loss)!r}"
            )
        kind, info = _regularizer_kind(problem)
        if kind is None:
            raise ValueError(f"solver 'gsfw': {info}")
        if kind == "lmo":
            try:
                problem.regularizer.lmo(np.zeros(int(data.n_features)))
            except ValueError as exc:
                raise ValueError(f"solver 'gsfw': {exc}") from None
        if kind in ("l1", "l2", "lmo") and not problem.alpha > 0:
            raise ValueError(
                f"solver 'gsfw' with regularizer {kind!r} needs alpha > 0, got {problem.alpha}"
            )
        if getattr(problem, "class_weight", None) is not None:
            raise ValueError("solver 'gsfw' does not support class_weight")
        if getattr(data, "has_sample_weight", False):
            raise ValueError("solver 'gsfw' does not support sample weights")
        if options.batch_size is not None and int(options.batch_size) > data.n_samples:
            raise ValueError(
                f"batch_size={options.batch_size} exceeds the {data.n_samples} rows of the data"
            )

    def _spec(self, problem, data, options):
        n, n_features = int(data.n_samples), int(data.n_features)
        b = options.batch_size
        b = max(1, int(round(0.01 * n))) if b is None else int(b)
        m = n / b
        kind, radius = _regularizer_kind(problem)
        alpha = float(problem.alpha)
        strong = False
        sigma = 1.0
        lmo_params = np.zeros(2)
        if kind == "l1_ball":
            lmo_code, lmo_params = kernels.LMO_L1_BALL, np.array([radius])
        elif kind == "l1":
            lmo_code = kernels.LMO_L1_PENALTY_BALL
            lmo_params = np.array([alpha, max(_zero_loss(problem, data), 1e-300) / alpha])
        elif kind == "l2":
            lmo_code = kernels.LMO_L2SQ_BALL
            p0 = max(_zero_loss(problem, data), 1e-300)
            lmo_params = np.array([alpha, math.sqrt(2.0 * p0 / alpha)])
            strong = True
            gamma = float(problem.loss.smoothness)
            max_norm_sq = float(np.max(np.asarray(data.row_norm_sq, dtype=np.float64)))
            # Prop. 3.7 with n replaced by m = n / b (Remark 3.4).
            sigma = gamma * max_norm_sq / (m * alpha) + 1.0
        else:
            lmo_code = kernels.LMO_DENSE
        return _Spec(
            loss_code=int(problem.loss.code),
            loss_params=np.asarray(problem.loss.params, dtype=np.float64),
            lmo_code=int(lmo_code),
            lmo_params=np.asarray(lmo_params, dtype=np.float64),
            strong=strong,
            sigma=float(sigma),
            n=n,
            n_features=n_features,
            batch_size=b,
            m=float(m),
        )

    def _block_iterations(self, data, spec, options):
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        sizes = np.diff(bounds)
        if options.iterations_per_epoch is None:
            return tuple(int(math.ceil(s / min(spec.batch_size, s))) if s else 0 for s in sizes)
        total = int(options.iterations_per_epoch)
        return tuple(max(1, int(round(total * s / spec.n))) if s else 0 for s in sizes)

    def _feasible_start(self, problem, spec, w):
        """The warm start as a point of ``dom R`` the kernels can start from.

        Constraint sets of the problem (the L1 ball, any regularizer with an LMO) are the
        user's: a start outside them is an error. The balls added to the ``l1`` / ``l2``
        penalties (Example 1.1) are the method's own and hold every point better than
        ``w = 0``, so a start outside them is projected onto them.
        """
        w = np.array(w, dtype=np.float64, copy=True)
        kind, _ = _regularizer_kind(problem)
        if kind == "l1":
            from daskpd.regularizers import project_l1_ball

            return np.asarray(project_l1_ball(w, float(spec.lmo_params[1])), dtype=np.float64)
        if kind == "l2":
            norm, radius = float(np.linalg.norm(w)), float(spec.lmo_params[1])
            return w * (radius / norm) if norm > radius else w
        if not math.isfinite(float(problem.regularizer.value(w))):
            name = getattr(problem.regularizer, "name", type(problem.regularizer).__name__)
            if kind == "l1_ball":
                where = (
                    f"||warm_start||_1 = {np.abs(w).sum():.6g} exceeds the L1-ball radius "
                    f"{float(spec.lmo_params[0]):.6g}"
                )
            else:
                where = f"it lies outside the set of the regularizer {name!r}"
            raise ValueError(
                f"solver 'gsfw' needs a feasible warm_start: {where} (Frank-Wolfe iterates "
                "stay in the constraint set; project the start onto it or start from zero)"
            )
        return w

    def init(self, problem, data, *, seed, client, options, warm_start=None):
        """``s = X w^0``, ``d = (1/n) X^T loss'(s)`` (one compute: n sample gradients).

        ``w^0 = 0`` (the paper's start), or the warm start's ``w`` (checked or projected by
        :meth:`_feasible_start`). A warm start counts as the average of one epoch of
        iterations: the step sizes start at ``i0`` = the iterations of one epoch and the
        averages (``w_bar`` and the dual ``z_bar``) hold ``w^0`` and ``loss'(X w^0)`` with
        the weight of iterations ``0 .. i0 - 1``. Restarting at ``i = 0`` instead gives
        ``w^0`` weight 0 (``alpha_0 = 1``) and overwrites ``s`` (``eta_0 ~ 1``), which throws
        the start away within an epoch. The dual of the start is not used: ``s = X w^0`` is
        GSFW's dual state.
        """
        spec = self._spec(problem, data, options)
        block_iterations = self._block_iterations(data, spec, options)
        n_blocks = int(data.n_row_blocks)
        w0 = None
        if warm_start is not None:
            w0 = self._feasible_start(problem, spec, warm_start.w)
        if w0 is None:
            bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
            blocks = [
                {
                    "s": np.zeros(int(bounds[q + 1] - bounds[q])),
                    "z_acc": np.zeros(int(bounds[q + 1] - bounds[q])),
                    "t_last": np.zeros(int(bounds[q + 1] - bounds[q]), dtype=np.int64),
                }
                for q in range(n_blocks)
            ]
            parts = [
                dask.delayed(_refresh_task, pure=False)(data, q, blocks[q], spec)
                for q in range(n_blocks)
            ]
            (d,) = compute(client, tree_sum(parts))
            if client is not None:
                blocks = client.scatter(blocks)
            start_iteration = 0
        else:
            tasks = [
                dask.delayed(_start_task, nout=2, pure=False)(data, q, w0, spec)
                for q in range(n_blocks)
            ]
            lazy_d = tree_sum([task[1] for task in tasks])
            lazy_blocks = [task[0] for task in tasks]
            if client is not None:
                # The block states stay on the workers, as after an epoch.
                futures = client.compute([lazy_d, *lazy_blocks])
                d, blocks = futures[0].result(), futures[1:]
            else:
                d, *blocks = dask.compute(lazy_d, *lazy_blocks, scheduler=_in_process_scheduler())
            start_iteration = max(1, sum(block_iterations))
        carry = {
            "d": np.array(d, dtype=np.float64),
            "w_acc": np.zeros(spec.n_features),
            "w_bar": np.zeros(spec.n_features),
            "it": start_iteration,
            "grads": spec.n,
        }
        if w0 is not None:
            carry["w_acc"] = kernels.weight_sum(spec.m, 0, start_iteration - 1) * w0
            carry["w_bar"] = w0.copy()
        lmo_fn = (
            _DenseLMO(problem.regularizer, float(problem.alpha))
            if spec.lmo_code == kernels.LMO_DENSE
            else None
        )
        return _State(
            spec=spec,
            data=data,
            client=client,
            seed=seed,
            carry=carry,
            blocks=tuple(blocks),
            block_iterations=block_iterations,
            epoch=0,
            lmo_fn=lmo_fn,
            options=options,
            start_iteration=start_iteration,
        )

    def run_epoch(self, state, epoch):
        """One chained pass over the shuffled row blocks, as one Dask compute."""
        es = epoch_seed(state.seed, epoch)
        n_blocks = len(state.blocks)
        order = np.random.default_rng(es).permutation(n_blocks)
        seeds = block_seeds(es, n_blocks)
        carry = dask.delayed(state.carry, traverse=False)
        blocks = list(state.blocks)
        refresh = state.options.refresh_every
        if refresh and epoch % refresh == 0:
            parts = [
                dask.delayed(_refresh_task, pure=False)(state.data, q, blocks[q], state.spec)
                for q in range(n_blocks)
            ]
            carry = dask.delayed(_with_d, pure=False)(carry, tree_sum(parts), state.spec.n)
        for q in order:
            q = int(q)
            if state.block_iterations[q] == 0:
                continue
            out = dask.delayed(_gsfw_block_task, nout=2, pure=False)(
                carry, blocks[q], state.data, q, seeds[q], state.block_iterations[q],
                state.spec, state.lmo_fn,
            )  # fmt: skip
            carry, blocks[q] = out[0], out[1]
        if state.client is not None:
            futures = state.client.compute([carry, *blocks])
            carry_value = futures[0].result()
            new_blocks = tuple(futures[1:])
        else:
            carry_value, *values = dask.compute(carry, *blocks, scheduler=_in_process_scheduler())
            new_blocks = tuple(values)
        return dataclasses.replace(state, carry=carry_value, blocks=new_blocks, epoch=epoch)

    # ---------------------------------------------------------------------------------------

    def _gather_blocks(self, state):
        if state.client is not None and any(hasattr(b, "key") for b in state.blocks):
            return list(state.client.gather(list(state.blocks)))
        return list(state.blocks)

    def averaged_w(self, state):
        """``beta_bar`` after the last iteration (``w_acc / Gamma_k`` in vertex mode)."""
        spec, carry = state.spec, state.carry
        k = int(carry["it"])
        if k == 0:
            return np.zeros(spec.n_features)
        if spec.lmo_code == kernels.LMO_L1_BALL and not spec.strong:
            return carry["w_acc"] / kernels.weight_sum(spec.m, 0, k - 1)
        return np.array(carry["w_bar"], dtype=np.float64)

    def dual_blocks(self, state):
        """Per-block dual certificate: ``z_bar`` (Theorem 3.1) or last ``loss'(s)`` (3.2)."""
        from daskpd.kernels.scalar import loss_derivative_array

        spec = state.spec
        k = int(state.carry["it"])
        out = []
        for q, block in enumerate(self._gather_blocks(state)):
            y = block_csr(state.data, q)[4]
            if spec.strong or k == 0:
                z = np.empty(block["s"].shape[0])
                loss_derivative_array(spec.loss_code, spec.loss_params, block["s"], y, z)
            else:
                z = kernels.flush_dual_average(
                    spec.loss_code, spec.loss_params, y, block["s"], block["z_acc"],
                    block["t_last"], spec.m, k - 1,
                )  # fmt: skip
            out.append(z)
        return out

    def iterate(self, state):
        """``w = beta_bar``, ``z`` = the dual certificate, per row block."""
        w = self.averaged_w(state)
        return Iterate(
            w=w,
            z=self.dual_blocks(state),
            z_bounds=np.asarray(state.data.row_block_bounds, dtype=np.int64),
            w_avg=w,
        )

    def counters(self, state):
        """Work so far, counted as in Sec. 2.5 of the paper.

        Returns
        -------
        dict
            ``iterations`` (= LMO calls) and ``sample_gradients`` (``n`` for ``d^0``, ``b``
            per iteration, ``n`` per exact refresh of ``d``). The iterations credited to a
            warm start are not counted.
        """
        k = int(state.carry["it"]) - state.start_iteration
        return {"iterations": k, "lmo_calls": k, "sample_gradients": int(state.carry["grads"])}

    def state_arrays(self, state):
        """Carry and block states as flat arrays (blocks concatenated in row order)."""
        blocks = self._gather_blocks(state)
        return {
            "d": np.asarray(state.carry["d"]),
            "w_acc": np.asarray(state.carry["w_acc"]),
            "w_bar": np.asarray(state.carry["w_bar"]),
            "it": np.asarray(int(state.carry["it"]), dtype=np.int64),
            "grads": np.asarray(int(state.carry["grads"]), dtype=np.int64),
            "epoch": np.asarray(state.epoch, dtype=np.int64),
            "start_iteration": np.asarray(state.start_iteration, dtype=np.int64),
            "s": np.concatenate([b["s"] for b in blocks]),
            "z_acc": np.concatenate([b["z_acc"] for b in blocks]),
            "t_last": np.concatenate([b["t_last"] for b in blocks]),
        }

    def restore(self, problem, data, arrays, *, seed, client, options):
        """Rebuild the state saved by :meth:`state_arrays`."""
        spec = self._spec(problem, data, options)
        bounds = np.asarray(data.row_block_bounds, dtype=np.int64)
        blocks = [
            {
                "s": np.array(arrays["s"][bounds[q] : bounds[q + 1]], dtype=np.float64),
                "z_acc": np.array(arrays["z_acc"][bounds[q] : bounds[q + 1]], dtype=np.float64),
                "t_last": np.array(arrays["t_last"][bounds[q] : bounds[q + 1]], dtype=np.int64),
            }
            for q in range(len(bounds) - 1)
        ]
        if client is not None:
            blocks = client.scatter(blocks)
        carry = {
            "d": np.array(arrays["d"], dtype=np.float64),
            "w_acc": np.array(arrays["w_acc"], dtype=np.float64),
            "w_bar": np.array(arrays["w_bar"], dtype=np.float64),
            "it": int(arrays["it"]),
            "grads": int(arrays["grads"]),
        }
        lmo_fn = (
            _DenseLMO(problem.regularizer, float(problem.alpha))
            if spec.lmo_code == kernels.LMO_DENSE
            else None
        )
        return _State(
            spec=spec,
            data=data,
            client=client,
            seed=seed,
            carry=carry,
            blocks=tuple(blocks),
            block_iterations=self._block_iterations(data, spec, options),
            epoch=int(arrays["epoch"]),
            lmo_fn=lmo_fn,
            options=options,
            start_iteration=int(arrays.get("start_iteration", 0)),
        )


# --------------------------------------------------------------------------------------------
# in-memory references and baselines (tests and benchmarks)


def _csr_arrays(X):
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    X.sort_indices()
    return (
        np.ascontiguousarray(X.indptr, dtype=np.int64),
        np.ascontiguousarray(X.indices, dtype=np.int32),
        np.ascontiguousarray(X.data, dtype=np.float64),
    )


def _l1_ball_lmo(radius):
    def lmo(g):
        out = np.zeros_like(g)
        index, sign = kernels.lmo_vertex(g)
        out[index] = sign * radius
        return out

    return lmo


def gsfw_dual_mirror_descent(X, y, loss, radius, batches, z=None):
    """Algorithm 2 (randomized coordinate mirror descent on the dual) on the L1 ball.

    An independent code path used to verify Lemma 2.1: it recomputes ``(1/n) X^T z`` every
    iteration and solves each coordinate's Bregman step (26) by bisection.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : Loss
        Smooth loss with a ``code`` and ``params``.
    radius : float
        L1-ball radius ``delta``.
    batches : ndarray of shape (n_iterations, batch_size), int
        The row sequence (``j_i``, or mini-batches ``B_i``).
    z : ndarray of shape (n_samples,), optional
        Starting dual point; default ``argmin h = loss'(0)``.

    Returns
    -------
    z : ndarray of shape (n_samples,)
        Dual iterate after the last iteration.
    w_bar : ndarray of shape (n_features,)
        The averaged primal (optional accounting of Algorithm 2).
    """
    indptr, indices, values = _csr_arrays(X)
    y = np.asarray(y, dtype=np.float64)
    n, n_features = X.shape
    if z is None:
        z = np.asarray(loss.gradient(np.zeros(n), y), dtype=np.float64)
    z = np.array(z, dtype=np.float64)
    lo, hi = loss.dual_bounds(y)
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (n,)).copy()
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (n,)).copy()
    batches = np.atleast_2d(np.asarray(batches, dtype=np.int64))
    w_bar = np.zeros(n_features)
    m = n / batches.shape[1]
    kernels.dual_mirror_descent_iterations(
        indptr, indices, values, True, y, int(loss.code), np.asarray(loss.params, float),
        batches, kernels.LMO_L1_BALL, np.array([float(radius)]), m, 0, z, lo, hi, w_bar,
    )  # fmt: skip
    return z, w_bar


def theorem31_bound(n, batch_size, k, gamma, big_m, d_max=None):
    """Right-hand side of Theorem 3.1 (mini-batch form, ``n -> n/b``) at iteration ``k``.

    Parameters
    ----------
    n, batch_size, k : int
    gamma : float
        Smoothness of the loss (1/4 for logistic).
    big_m : float
        ``M = max_j max_{w in dom R} |x_j . w|`` (L1 ball: ``radius * max |X_jk|``).
    d_max : float, optional
        Bound on ``D_h(z, z^0)``; default ``gamma M^2`` (Prop. 3.1).

    Returns
    -------
    float
    """
    m = n / batch_size
    d_max = gamma * big_m**2 if d_max is None else d_max
    return 8 * m * gamma * big_m**2 / (4 * m + k) + 2 * m * (2 * m - 1) * d_max / (
        (4 * m + k) * (k + 1)
    )


def frank_wolfe(X, y, loss, radius, *, max_iterations, record_every=1, time_limit=None):
    """Deterministic Frank-Wolfe on the L1 ball (baseline, eqs. (6)-(7), step ``2/(k+2)``).

    Every iteration costs ``n`` sample gradients and one LMO call.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : Loss
    radius : float
    max_iterations : int
    record_every : int, default=1
    time_limit : float, optional
        Stop after this many seconds of iterations.

    Returns
    -------
    list of dict
        Records with ``iteration``, ``sample_gradients``, ``lmo_calls``, ``seconds``,
        ``w`` (a copy) and ``fw_gap`` (the Frank-Wolfe gap at the previous iterate, which is
        the duality gap there).
    """
    import time

    indptr, indices, values = _csr_arrays(X)
    y = np.asarray(y, dtype=np.float64)
    n, n_features = X.shape
    code, params = int(loss.code), np.asarray(loss.params, dtype=np.float64)
    w = np.zeros(n_features)
    records = []
    seconds = 0.0
    for k in range(max_iterations):
        tick = time.perf_counter()
        grad = kernels.full_gradient(indptr, indices, values, True, y, code, params, w, n_features)
        index, sign = kernels.lmo_vertex(grad)
        vertex = np.zeros(n_features)
        vertex[index] = sign * radius
        fw_gap = float(grad @ (w - vertex))
        step = 2.0 / (k + 2.0)
        w = (1.0 - step) * w + step * vertex
        seconds += time.perf_counter() - tick
        if (k + 1) % record_every == 0 or k + 1 == max_iterations:
            records.append(
                {
                    "iteration": k + 1,
                    "sample_gradients": n * (k + 1),
                    "lmo_calls": k + 1,
                    "seconds": seconds,
                    "w": w.copy(),
                    "fw_gap": fw_gap,
                }
            )
        if time_limit is not None and seconds >= time_limit:
            break
    return records


def stochastic_frank_wolfe(
    X, y, loss, radius, *, max_iterations, record_every=1, random_state=0, time_limit=None
):
    """SFW of Hazan & Luo (baseline): batch ``min(k^2, n/2)`` without replacement, ``2/(k+1)``.

    The batch rule is the one of the GSFW paper's Table 2.

    Parameters
    ----------
    X, y, loss, radius, max_iterations, record_every, time_limit
        As in :func:`frank_wolfe`.
    random_state : int, default=0

    Returns
    -------
    list of dict
        Records with ``iteration``, ``sample_gradients``, ``lmo_calls``, ``seconds``, ``w``.
    """
    import time

    indptr, indices, values = _csr_arrays(X)
    y = np.asarray(y, dtype=np.float64)
    n, n_features = X.shape
    code, params = int(loss.code), np.asarray(loss.params, dtype=np.float64)
    rng = np.random.default_rng(random_state)
    w = np.zeros(n_features)
    grads = 0
    records = []
    seconds = 0.0
    for k in range(1, max_iterations + 1):
        tick = time.perf_counter()
        size = int(min(k * k, n // 2))
        rows = rng.choice(n, size=max(size, 1), replace=False).astype(np.int64)
        grad = kernels.rows_gradient(
            indptr, indices, values, True, y, code, params, w, rows, n_features
        )
        grads += rows.shape[0]
        index, sign = kernels.lmo_vertex(grad)
        step = 2.0 / (k + 1.0)
        w *= 1.0 - step
        w[index] += step * sign * radius
        seconds += time.perf_counter() - tick
        if k % record_every == 0 or k == max_iterations:
            records.append(
                {
                    "iteration": k,
                    "sample_gradients": grads,
                    "lmo_calls": k,
                    "seconds": seconds,
                    "w": w.copy(),
                }
            )
        if time_limit is not None and seconds >= time_limit:
            break
    return records
