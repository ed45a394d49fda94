"""GSFW (Lu & Freund): Algorithm 1 against Algorithm 2, invariants, certificates, Dask runs.

Oracles from ``shared/notes/paper-gsfw.md`` Sec. 6b (T1-T3, T5-T7, T9-T11, T14).
"""

from __future__ import annotations

import math

import dask
import numpy as np
import pytest
import scipy.sparse as sp

from daskpd.data import MemoryDataset, write_dataset
from daskpd.kernels import gsfw as kernels
from daskpd.kernels.scalar import LOGISTIC, SQUARED
from daskpd.losses import Hinge, Logistic, Squared
from daskpd.regularizers import GroupLasso, L1Ball
from daskpd.solvers.driver import Iterate, block_seeds, epoch_seed, solve
from daskpd.solvers.gsfw import (
    GSFW,
    GSFWOptions,
    frank_wolfe,
    gsfw_dual_mirror_descent,
    stochastic_frank_wolfe,
    theorem31_bound,
)

RADIUS = 5.0
NO_PARAMS = np.zeros(1)


def _problem(rng, n=120, p=20, density=0.3):
    X = sp.random(n, p, density=density, random_state=rng, format="csr")
    X.data = rng.standard_normal(X.nnz)
    X.sort_indices()
    y = np.where(X @ rng.standard_normal(p) + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def _logistic_grad(s, y):
    return -y / (1.0 + np.exp(y * s))


def _logistic_conj(z, y):
    u = np.clip(-y * z, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(u > 0, u * np.log(u), 0.0)
        b = np.where(u < 1, (1 - u) * np.log1p(-u), 0.0)
    return a + b


def _gap(X, y, w, z):
    """P(w) - D(z) for logistic + L1 ball (numpy reference)."""
    n = X.shape[0]
    primal = np.mean(np.logaddexp(0.0, -y * (X @ w)))
    dual = -RADIUS * np.abs(X.T @ z / n).max() - np.mean(_logistic_conj(z, y))
    return primal - dual


class _Run:
    """Algorithm 1 on one in-memory block, driven iteration by iteration through the kernel."""

    def __init__(self, X, y, batch_size, code=LOGISTIC, lmo=kernels.LMO_L1_BALL, strong=False):
        self.X, self.y = X, y
        self.n, self.p = X.shape
        self.code = code
        self.lmo = lmo
        self.strong = strong
        self.m = self.n / batch_size
        self.s = np.zeros(self.n)
        self.d = kernels.block_xt_derivative(
            X.indptr, X.indices, X.data, True, y, code, NO_PARAMS, self.s, self.p, 1.0 / self.n
        )
        self.w_acc = np.zeros(self.p)
        self.w_bar = np.zeros(self.p)
        self.z_acc = np.zeros(self.n)
        self.t_last = np.zeros(self.n, dtype=np.int64)
        self.k = 0

    def step(self, batches, lmo_params=None, sigma=1.0):
        lmo_params = np.array([RADIUS]) if lmo_params is None else lmo_params
        kernels.gsfw_iterations(
            kernels.BlockRows(self.X.indptr, self.X.indices, self.X.data, True, self.y),
            self.code, NO_PARAMS, batches, self.lmo, lmo_params,
            kernels.Schedule(self.n, self.m, self.k, self.strong, sigma),
            kernels.PrimalCarry(self.d, self.w_acc, self.w_bar),
            kernels.RowState(self.s, self.z_acc, self.t_last),
        )  # fmt: skip
        self.k += batches.shape[0]

    def averaged(self):
        return self.w_acc / kernels.weight_sum(self.m, 0, self.k - 1)

    def dual_average(self):
        return kernels.flush_dual_average(
            self.code, NO_PARAMS, self.y, self.s, self.z_acc, self.t_last, self.m, self.k - 1
        )


def _batches(rng, n, b, k):
    return np.array([rng.choice(n, size=b, replace=False) for _ in range(k)], dtype=np.int64)


@pytest.mark.parametrize("batch_size", [1, 4])
def test_algorithms_1_and_2_give_the_same_iterates(rng, batch_size):
    # T1 (Lemma 2.1): same rows, same tie rule; Algorithm 2 solves its Bregman step by
    # bisection and recomputes X^T z every iteration, so it shares no update with Alg. 1.
    X, y = _problem(rng, n=60, p=12)
    run = _Run(X, y, batch_size)
    batches = _batches(rng, X.shape[0], batch_size, 150)
    z = -y / 2.0
    worst_z = worst_w = 0.0
    for k in range(batches.shape[0]):
        run.step(batches[k : k + 1])
        z, _ = _alg2_step(X, y, z, batches, k, batch_size)
        worst_z = max(worst_z, np.abs(z - _logistic_grad(run.s, y)).max())
    # The primal averages, run in one go.
    z2, w_bar2 = gsfw_dual_mirror_descent(X, y, Logistic(), RADIUS, batches)
    worst_w = np.abs(run.averaged() - w_bar2).max()
    assert np.abs(z2 - z).max() <= 1e-12
    assert worst_z <= 1e-12
    assert worst_w <= 1e-12


def _alg2_step(X, y, z, batches, k, batch_size):
    # One Algorithm-2 iteration with the global step index k (m = n / b).
    indptr, indices, values = X.indptr, X.indices, X.data
    lo = np.where(y > 0, -1.0, 0.0)
    hi = np.where(y > 0, 0.0, 1.0)
    w_bar = np.zeros(X.shape[1])
    z = z.copy()
    kernels.dual_mirror_descent_iterations(
        kernels.BlockRows(indptr, indices, values, True, y), LOGISTIC, NO_PARAMS,
        batches[k : k + 1], kernels.LMO_L1_BALL, np.array([RADIUS]), X.shape[0] / batch_size, k,
        z, lo, hi, w_bar,
    )  # fmt: skip
    return z, w_bar


def test_iterates_stay_in_the_l1_ball_and_kept_d_matches_recomputation(rng):
    # T2, T3, T9: ||w~|| = radius, ||w_bar|| <= radius, d == (1/n) X^T loss'(s), and the
    # O(1) accumulator equals the alpha_i recursion of Algorithm 1.
    X, y = _problem(rng)
    n = X.shape[0]
    run = _Run(X, y, 3)
    recursion = np.zeros(X.shape[1])
    for k in range(400):
        before = run.d.copy()
        run.step(_batches(rng, n, 3, 1))
        vertex = np.zeros(X.shape[1])
        index, sign = kernels.lmo_vertex(before)
        vertex[index] = sign * RADIUS
        _, avg = kernels.step_sizes(k, run.m, False, 1.0)
        recursion = (1 - avg) * recursion + avg * vertex
        assert np.abs(run.averaged()).sum() <= RADIUS * (1 + 1e-12)
    assert kernels.step_sizes(0, run.m, False, 1.0)[1] == 1.0
    np.testing.assert_allclose(run.averaged(), recursion, rtol=0, atol=1e-12)
    exact = X.T @ _logistic_grad(run.s, y) / n
    assert np.abs(run.d - exact).max() <= 1e-12


def test_certificate_is_nonnegative_and_under_theorem_31_bound(rng):
    # T5, T6: the weighted dual average of Theorem 3.1 certifies beta_bar; each run is
    # compared with the bound (it holds in expectation; it is loose enough per run).
    X, y = _problem(rng)
    n, b = X.shape[0], 2
    run = _Run(X, y, b)
    big_m = RADIUS * np.abs(X.data).max()
    for checkpoint in [1, 10, 100, 1000, 3000]:
        run.step(_batches(rng, n, b, checkpoint - run.k))
        gap = _gap(X, y, run.averaged(), run.dual_average())
        bound = theorem31_bound(n, b, run.k - 1, 0.25, big_m, d_max=math.log(2))
        assert -1e-12 <= gap <= bound, (checkpoint, gap, bound)


def test_lazy_dual_average_matches_explicit_sum(rng):
    X, y = _problem(rng, n=40, p=8)
    run = _Run(X, y, 2)
    explicit = np.zeros(X.shape[0])
    for k in range(120):
        weight = 2 * run.m + k
        explicit += weight * _logistic_grad(run.s, y)
        run.step(_batches(rng, X.shape[0], 2, 1))
    explicit /= kernels.weight_sum(run.m, 0, run.k - 1)
    np.testing.assert_allclose(run.dual_average(), explicit, rtol=1e-13, atol=1e-15)


def test_gap_decays_like_one_over_k(rng):
    # T7: log-log slope of the duality gap against iterations, for k >> n / b.
    X, y = _problem(rng, n=100, p=15)
    b = 10
    run = _Run(X, y, b)
    ks, gaps = [], []
    for checkpoint in np.geomspace(200, 20000, 8).astype(int):
        run.step(_batches(rng, X.shape[0], b, int(checkpoint) - run.k))
        ks.append(run.k)
        gaps.append(_gap(X, y, run.averaged(), run.dual_average()))
    slope = np.polyfit(np.log(ks), np.log(gaps), 1)[0]
    assert -1.3 <= slope <= -0.7, slope


def test_full_batch_is_frank_wolfe_in_prediction_space(rng):
    # T10: b = n gives s^i = X beta_FW^i with the FW step 2/(i+3).
    X, y = _problem(rng, n=50, p=10)
    n = X.shape[0]
    run = _Run(X, y, n)
    beta = np.zeros(X.shape[1])
    for i in range(30):
        grad = X.T @ _logistic_grad(X @ beta, y) / n
        index, sign = kernels.lmo_vertex(grad)
        vertex = np.zeros(X.shape[1])
        vertex[index] = sign * RADIUS
        beta = (1 - 2 / (i + 3)) * beta + 2 / (i + 3) * vertex
        run.step(np.arange(n, dtype=np.int64)[None, :])
        np.testing.assert_allclose(run.s, X @ beta, rtol=0, atol=1e-12)


def test_kernel_matches_numpy_reference(rng):
    # A slow NumPy transcription of Algorithm 1 on the same index order.
    X, y = _problem(rng, n=50, p=10)
    n, p = X.shape
    dense = X.toarray()
    b = 5
    batches = _batches(rng, n, b, 60)
    run = _Run(X, y, b)
    run.step(batches)
    m = n / b
    s = np.zeros(n)
    d = dense.T @ _logistic_grad(s, y) / n
    beta_bar = np.zeros(p)
    for i, batch in enumerate(batches):
        k = int(np.argmax(np.abs(d)))
        vertex = np.zeros(p)
        vertex[k] = -RADIUS if d[k] >= 0 else RADIUS
        eta = 2 * m / (2 * m + i + 1)
        avg = 2 * (2 * m + i) / ((i + 1) * (4 * m + i))
        old = s[batch].copy()
        s[batch] = (1 - eta) * old + eta * dense[batch] @ vertex
        d += (
            dense[batch].T
            @ (_logistic_grad(s[batch], y[batch]) - _logistic_grad(old, y[batch]))
            / n
        )
        beta_bar = (1 - avg) * beta_bar + avg * vertex
    np.testing.assert_allclose(run.s, s, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.d, d, rtol=0, atol=1e-13)
    np.testing.assert_allclose(run.averaged(), beta_bar, rtol=0, atol=1e-12)


def test_strongly_convex_variant_converges_linearly(rng):
    # T11, T12: R = alpha/2 ||w||^2 (+ the redundant ball) with Theorem 3.2's steps; the
    # last-iterate dual value is non-decreasing and the gap falls geometrically.
    X, y = _problem(rng, n=80, p=10)
    data = MemoryDataset(X, y)
    result = solve(
        data, loss="logistic", regularizer="l2", alpha=0.05, solver="gsfw",
        max_epochs=30, tol=0.0, eval_every=5, batch_size=4, client=False,
    )  # fmt: skip
    duals = [row["dual"] for row in result.history]
    gaps = [row["gap"] for row in result.history]
    assert all(b >= a - 1e-12 for a, b in zip(duals, duals[1:], strict=False))
    assert min(gaps) >= -1e-12
    ratios = [b / a for a, b in zip(gaps, gaps[1:], strict=False)]
    assert max(ratios) <= 0.6, ratios  # geometric decay, every 5 epochs
    assert gaps[-1] <= 1e-4 * gaps[0]


@pytest.mark.parametrize(("m", "sigma"), [(20.0, 3.0), (500.0, 1.5)])
def test_stable_theorem_32_step_matches_closed_form(m, sigma):
    # T12: alpha_i = m^-1 sigma^i / (sigma^(i+1) - (sigma - 1/m)^(i+1)).
    for i in range(0, 200, 7):
        closed = sigma**i / m / (sigma ** (i + 1) - (sigma - 1 / m) ** (i + 1))
        assert math.isclose(kernels.step_sizes(i, m, True, sigma)[1], closed, rel_tol=1e-9)


def test_solver_on_zarr_one_compute_per_epoch(rng, tmp_path, counting_scheduler):
    X, y = _problem(rng, n=300, p=20)
    data = write_dataset(X, y, tmp_path / "train.zarr", rows_per_block=100)
    method = GSFW()
    from daskpd.problem import Problem

    problem = Problem(Logistic(), L1Ball(radius=RADIUS), 1.0)
    options = GSFWOptions(batch_size=5)
    state = method.init(problem, data, seed=np.random.SeedSequence(0), client=None, options=options)
    assert counting_scheduler.calls == 1  # d^0
    for epoch in (1, 2, 3):
        state = method.run_epoch(state, epoch)
    assert counting_scheduler.calls == 4
    assert method.counters(state) == {
        "iterations": 60 * 3,
        "lmo_calls": 60 * 3,
        "sample_gradients": 300 + 5 * 60 * 3,
    }
    it = method.iterate(state)
    assert np.abs(it.w).sum() <= RADIUS * (1 + 1e-12)
    assert sum(len(z) for z in it.z) == 300


def test_one_block_solver_is_algorithm_1(rng):
    # With one row block the Dask chain replays Algorithm 1 on uniform b-subsets; the
    # batches come from the driver's seed tree.
    X, y = _problem(rng, n=60, p=10)
    data = MemoryDataset(X, y)
    from daskpd.problem import Problem

    method = GSFW()
    problem = Problem(Logistic(), L1Ball(radius=RADIUS), 1.0)
    options = GSFWOptions(batch_size=3)
    seed = np.random.SeedSequence(7)
    with dask.config.set(scheduler="sync"):
        state = method.init(problem, data, seed=seed, client=None, options=options)
        state = method.run_epoch(state, 1)
    rng1 = np.random.default_rng(block_seeds(epoch_seed(seed, 1), 1)[0])
    batches = np.array([rng1.choice(60, size=3, replace=False) for _ in range(20)])
    run = _Run(X, y, 3)
    run.step(batches)
    np.testing.assert_allclose(method.averaged_w(state), run.averaged(), rtol=0, atol=1e-14)
    np.testing.assert_allclose(method.dual_blocks(state)[0], run.dual_average(), atol=1e-14)


def test_driver_run_checkpoint_resume(rng, tmp_path):
    X, y = _problem(rng, n=200, p=15)
    data = MemoryDataset(X, y, rows_per_block=70)
    kwargs = dict(
        loss="logistic", regularizer=L1Ball(radius=RADIUS), alpha=1.0, solver="gsfw",
        tol=0.0, batch_size=4, client=False,
    )  # fmt: skip
    full = solve(data, max_epochs=4, **kwargs)
    solve(data, max_epochs=2, checkpoint_dir=tmp_path / "ck", **kwargs)
    resumed = solve(data, max_epochs=4, checkpoint_dir=tmp_path / "ck", resume=True, **kwargs)
    np.testing.assert_array_equal(full.w, resumed.w)
    assert full.history[-1]["gap"] >= 0
    assert resumed.gap == full.gap


def test_warm_start_from_a_solution_starts_near_it(rng):
    # The start counts as one epoch of iterations: from a converged w the first evaluation is
    # far better than a cold one, and a run split in two beats the cold run of the same
    # length. On the L1 ball (O(1/k)) two halves can at best match one run of twice the
    # length; the strongly convex l2 variant (linear rate) shows the split run far ahead.
    X, y = _problem(rng, n=200, p=20)
    data = MemoryDataset(X, y, rows_per_block=70)
    common = dict(loss="logistic", solver="gsfw", tol=0.0, batch_size=4, client=False, eval_every=1)
    ball = dict(regularizer=L1Ball(radius=RADIUS), alpha=1.0, **common)
    solution = solve(data, max_epochs=60, random_state=0, **ball)
    cold = solve(data, max_epochs=5, random_state=1, **ball)
    warm = solve(data, max_epochs=5, random_state=1, warm_start=solution.w, **ball)
    assert warm.history[0]["gap"] < 0.3 * cold.history[0]["gap"]
    split = solve(data, max_epochs=5, random_state=2, warm_start=cold.w, **ball)
    assert split.gap < 0.8 * cold.gap
    assert split.gap >= -1e-12
    ridge = dict(regularizer="l2", alpha=0.05, **common)
    cold = solve(data, max_epochs=4, random_state=1, **ridge)
    split = solve(data, max_epochs=4, random_state=2, warm_start=cold.w, **ridge)
    assert 0 <= split.gap < 0.1 * cold.gap


def test_warm_start_outside_the_set_is_refused_and_penalty_balls_project(rng):
    X, y = _problem(rng, n=60, p=8)
    data = MemoryDataset(X, y)
    outside = np.full(8, RADIUS)  # ||w||_1 = 8 RADIUS
    with pytest.raises(ValueError, match=r"warm_start.*exceeds the L1-ball radius"):
        solve(data, loss="logistic", regularizer=L1Ball(radius=RADIUS), alpha=1.0,
              solver="gsfw", warm_start=outside, client=False)  # fmt: skip
    # The balls added to the l1 / l2 penalties are the method's own (they hold every w
    # better than 0): a start outside them is projected onto them.
    from daskpd.problem import Problem
    from daskpd.regularizers import L1, L2

    seed = np.random.SeedSequence(0)
    for regularizer, norm in ((L1(), 1), (L2(), 2)):
        problem = Problem(Logistic(), regularizer, 0.1)
        options = GSFWOptions(batch_size=3)
        state = GSFW().init(problem, data, seed=seed, client=None, options=options,
                            warm_start=Iterate(w=1e3 * np.ones(8)))  # fmt: skip
        radius = state.spec.lmo_params[1]
        start = GSFW().averaged_w(state)
        assert np.linalg.norm(start, norm) == pytest.approx(radius, rel=1e-9)
        assert np.allclose(start, start[0])  # projected, still along the given direction


def test_warm_start_is_one_compute_and_consistent(rng, tmp_path, counting_scheduler):
    # s = X w^0 and d = (1/n) X^T loss'(s) in one compute; the averages hold w^0 and the
    # credited iterations are not counted as work; a checkpoint resume is exact.
    X, y = _problem(rng, n=150, p=12)
    data = write_dataset(X, y, tmp_path / "train.zarr", rows_per_block=50)
    from daskpd.problem import Problem

    w0 = np.zeros(12)
    w0[[1, 4]] = [2.0, -1.5]
    problem = Problem(Logistic(), L1Ball(radius=RADIUS), 1.0)
    options = GSFWOptions(batch_size=5)
    method = GSFW()
    state = method.init(problem, data, seed=np.random.SeedSequence(0), client=None,
                        options=options, warm_start=Iterate(w=w0))  # fmt: skip
    assert counting_scheduler.calls == 1
    assert state.start_iteration == 30  # one epoch: 3 blocks x 50 rows / 5
    np.testing.assert_allclose(np.concatenate([b["s"] for b in state.blocks]), X @ w0, atol=1e-14)
    np.testing.assert_allclose(state.carry["d"], X.T @ _logistic_grad(X @ w0, y) / 150, atol=1e-14)
    np.testing.assert_allclose(method.averaged_w(state), w0, atol=1e-14)
    np.testing.assert_allclose(
        np.concatenate(method.dual_blocks(state)), _logistic_grad(X @ w0, y), atol=1e-14
    )
    state = method.run_epoch(state, 1)
    assert counting_scheduler.calls == 2
    assert method.counters(state) == {
        "iterations": 30,
        "lmo_calls": 30,
        "sample_gradients": 150 + 5 * 30,
    }
    kwargs = dict(loss="logistic", regularizer=L1Ball(radius=RADIUS), alpha=1.0, solver="gsfw",
                  tol=0.0, batch_size=5, client=False, warm_start=w0)  # fmt: skip
    full = solve(data, max_epochs=3, **kwargs)
    solve(data, max_epochs=1, checkpoint_dir=tmp_path / "ck", **kwargs)
    resumed = solve(data, max_epochs=3, checkpoint_dir=tmp_path / "ck", resume=True, **kwargs)
    np.testing.assert_array_equal(full.w, resumed.w)


def test_generalized_lmo_path(rng):
    # A regularizer with an lmo method but no kernel LMO (the L1 ball seen through a
    # wrapper) runs the Python LMO between kernel iterations and gives the same iterates.
    X, y = _problem(rng, n=60, p=8)
    data = MemoryDataset(X, y)

    class Wrapped(L1Ball):
        name = "wrapped_l1_ball"

    common = dict(loss="logistic", alpha=1.0, solver="gsfw", tol=0.0, batch_size=3,
                  max_epochs=2, client=False)  # fmt: skip
    fast = solve(data, regularizer=L1Ball(radius=RADIUS), **common)
    slow = solve(data, regularizer=Wrapped(radius=RADIUS), **common)
    np.testing.assert_allclose(fast.w, slow.w, rtol=0, atol=1e-12)


def test_unsupported_problems_fail_before_dask_work(rng, counting_scheduler):
    X, y = _problem(rng, n=30, p=6)
    data = MemoryDataset(X, y)
    with pytest.raises(ValueError, match="smooth loss"):
        solve(data, loss=Hinge(), regularizer=L1Ball(radius=1.0), alpha=1.0, solver="gsfw")
    with pytest.raises(ValueError, match="linear minimization oracle"):
        solve(
            data, loss="logistic", regularizer=GroupLasso(groups=[[0, 1, 2], [3, 4, 5]]),
            alpha=0.1, solver="gsfw",
        )  # fmt: skip
    with pytest.raises(ValueError, match="batch_size"):
        solve(data, loss="logistic", regularizer=L1Ball(radius=1.0), alpha=1.0, solver="gsfw",
              batch_size=31)  # fmt: skip
    assert counting_scheduler.calls == 0


def test_baselines_and_certificate_identity(rng):
    # T8 and T14: FW counts n gradients per LMO call; its FW gap equals the duality gap at
    # z = loss'(X beta); SFW uses min(k^2, n/2) rows per iteration.
    X, y = _problem(rng, n=80, p=10)
    records = frank_wolfe(X, y, Logistic(), RADIUS, max_iterations=50, record_every=10)
    assert [r["sample_gradients"] for r in records] == [800, 1600, 2400, 3200, 4000]
    w_prev = frank_wolfe(X, y, Logistic(), RADIUS, max_iterations=49)[-1]["w"]
    z = _logistic_grad(X @ w_prev, y)
    assert math.isclose(records[-1]["fw_gap"], _gap(X, y, w_prev, z), rel_tol=1e-10)
    sfw = stochastic_frank_wolfe(X, y, Logistic(), RADIUS, max_iterations=10)
    sizes = np.diff([0] + [r["sample_gradients"] for r in sfw])
    assert list(sizes) == [1, 4, 9, 16, 25, 36, 40, 40, 40, 40]
    assert np.abs(sfw[-1]["w"]).sum() <= RADIUS * (1 + 1e-12)


def test_squared_loss_runs_and_certifies(rng):
    X, y = _problem(rng, n=60, p=8)
    y = X @ rng.standard_normal(8) + 0.1 * rng.standard_normal(60)
    run = _Run(X, y, 2, code=SQUARED)
    run.step(_batches(rng, 60, 2, 500))
    exact = X.T @ (run.s - y) / 60
    assert np.abs(run.d - exact).max() <= 1e-12
    result = solve(
        MemoryDataset(X, y), loss=Squared(), regularizer=L1Ball(radius=RADIUS), alpha=1.0,
        solver="gsfw", max_epochs=20, tol=0.0, batch_size=2, client=False,
    )  # fmt: skip
    assert result.gap >= -1e-12
    assert result.history[-1]["gap"] < result.history[0]["gap"]
