"""Property tests of the regularizers: conjugates, proxes (with subgradient certificates), LMOs."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import minimize, minimize_scalar

from daskpd.kernels import scalar
from daskpd.regularizers import (
    L1,
    L2,
    Box,
    ElasticNet,
    GroupLasso,
    L1Ball,
    L1Inf,
    L2Ball,
    TraceNorm,
    Zero,
    get_regularizer,
    project_l1_ball,
)

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
D = 6
vectors = arrays(np.float64, D, elements=st.floats(-3.0, 3.0, allow_nan=False))
steps = st.floats(0.05, 3.0)

SEPARABLE = [L2(), L1(), ElasticNet(0.3), ElasticNet(1.0), ElasticNet(0.0), Zero()]
SEP_IDS = [f"{r.name}-{r.params[0]:g}" for r in SEPARABLE]
GROUPS = [[0, 3], [1, 2, 4], [5]]
NORMS = [L1(), GroupLasso(GROUPS), GroupLasso(GROUPS, weights=[1.0, 0.5, 2.0]), L1Inf(GROUPS)]
NORMS += [TraceNorm((2, 3))]
NORM_IDS = ["l1", "group_lasso", "group_lasso_weighted", "l1inf", "trace"]
SETS = [L1Ball(1.5), L2Ball(0.7), Box(-0.5, 1.0), Box([-1, 0, -2, 0.5, -1, 0], [1, 0, 2, 1, 0, 3])]
SET_IDS = ["l1_ball", "l2_ball", "box", "box_vector"]


# ---- separable regularizers ------------------------------------------------------------------


@pytest.mark.parametrize("reg", SEPARABLE, ids=SEP_IDS)
@SETTINGS
@given(w=vectors)
def test_separable_fenchel_young_equality_at_subgradient(reg, w):
    g = reg.subgradient(w)
    if isinstance(reg, Zero):
        assert not g.any()
    assert reg.value(w) + reg.conjugate(g) == pytest.approx(float(g @ w), abs=1e-10)


@pytest.mark.parametrize("reg", SEPARABLE, ids=SEP_IDS)
@SETTINGS
@given(w=vectors, v=vectors)
def test_separable_fenchel_young_inequality(reg, w, v):
    assert reg.value(w) + reg.conjugate(v) >= float(v @ w) - 1e-12


@pytest.mark.parametrize("reg", SEPARABLE[:-1], ids=SEP_IDS[:-1])
@SETTINGS
@given(v=st.floats(-3.0, 3.0))
def test_separable_conjugate_is_numerical_sup(reg, v):
    params = reg.params
    conj = scalar.reg_conjugate(reg.code, params, v)
    if math.isinf(conj):
        # Unbounded: v w - |w| grows without limit along sign(v).
        far = [v * t - scalar.reg_value(reg.code, params, t) for t in (1e3 * v, 1e5 * v)]
        assert far[1] > far[0] > 0
        return
    result = minimize_scalar(
        lambda w: -(v * w - scalar.reg_value(reg.code, params, w)),
        bounds=(-50, 50),
        method="bounded",
        options={"xatol": 1e-11},
    )
    assert conj == pytest.approx(-result.fun, abs=1e-8)


@pytest.mark.parametrize("reg", SEPARABLE, ids=SEP_IDS)
@SETTINGS
@given(v=vectors, step=steps)
def test_separable_prox_matches_numerical_minimizer(reg, v, step):
    ours = reg.prox(v, step)
    for j in range(D):

        def objective(w, j=j):
            return scalar.reg_value(reg.code, reg.params, w) + (w - v[j]) ** 2 / (2 * step)

        result = minimize_scalar(
            objective, bounds=(v[j] - 10, v[j] + 10), method="bounded", options={"xatol": 1e-11}
        )
        assert objective(ours[j]) <= result.fun + 1e-10
        assert ours[j] == pytest.approx(result.x, abs=1e-4)


@pytest.mark.parametrize("reg", SEPARABLE[:-1], ids=SEP_IDS[:-1])
@SETTINGS
@given(v=vectors, step=steps)
def test_separable_moreau_identity(reg, v, step):
    # v = prox_{tR}(v) + t prox_{R*/t}(v/t), with prox_{R*/t} computed numerically per coordinate.
    p = reg.prox(v, step)
    for j in range(D):
        x = v[j] / step

        def objective(s, x=x):
            return scalar.reg_conjugate(reg.code, reg.params, s) + step * (s - x) ** 2 / 2

        lo, hi = -abs(x) - 5.0, abs(x) + 5.0
        if math.isinf(scalar.reg_conjugate(reg.code, reg.params, 2.0)):
            lo, hi = -1.0, 1.0  # the conjugate is the indicator of [-1, 1]
        result = minimize_scalar(
            objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}
        )
        assert p[j] + step * result.x == pytest.approx(v[j], abs=1e-6)


@pytest.mark.parametrize("reg", [L2(), ElasticNet(0.3), ElasticNet(0.0)], ids=str)
@SETTINGS
@given(w=vectors, other=vectors)
def test_strong_convexity(reg, w, other):
    mu = reg.strong_convexity
    lower = reg.value(w) + reg.subgradient(w) @ (other - w) + mu / 2 * np.sum((other - w) ** 2)
    assert reg.value(other) >= lower - 1e-10


@pytest.mark.parametrize("reg", [L2(), ElasticNet(0.3), ElasticNet(0.0)], ids=str)
@SETTINGS
@given(c=vectors)
def test_strongly_convex_lmo_is_the_minimizer(reg, c):
    ours = reg.lmo(c)
    # The objective is strongly convex and separable: minimize each coordinate numerically.
    for j in range(D):

        def objective(w, j=j):
            return c[j] * w + scalar.reg_value(reg.code, reg.params, w)

        result = minimize_scalar(objective, bounds=(-50, 50), method="bounded")
        assert objective(ours[j]) <= result.fun + 1e-9


def test_separable_codes():
    assert (L2().code, L1().code, ElasticNet().code, Zero().code) == (0, 1, 2, 3)
    assert all(r.separable for r in SEPARABLE)
    assert not any(r.separable for r in NORMS[1:] + SETS)
    assert all(r.code == -1 for r in NORMS[1:] + SETS)
    assert L2().strong_convexity == 1.0 and L1().strong_convexity == 0.0
    assert ElasticNet(0.25).strong_convexity == 0.75


def test_elastic_net_matches_sklearn_convention(rng):
    w = rng.normal(size=7)
    reg = ElasticNet(0.3)
    assert reg.value(w) == pytest.approx(0.3 * np.abs(w).sum() + 0.7 / 2 * w @ w)


# ---- norms: certificates ---------------------------------------------------------------------


@pytest.mark.parametrize("reg", NORMS, ids=NORM_IDS)
@SETTINGS
@given(v=vectors, step=steps)
def test_norm_prox_subgradient_certificate(reg, v, step):
    # w = prox_{tR}(v) iff g = (v - w)/t is a subgradient of the norm R at w: dual norm of g
    # <= 1 and <g, w> = R(w). This is also the Moreau identity with R* the dual-ball indicator.
    w = reg.prox(v, step)
    g = (v - w) / step
    assert reg.dual_norm(g) <= 1.0 + 1e-9
    assert float(g @ w) == pytest.approx(reg.value(w), abs=1e-9)


@pytest.mark.parametrize("reg", NORMS, ids=NORM_IDS)
@SETTINGS
@given(v=vectors, step=steps)
def test_norm_prox_beats_random_perturbations(reg, v, step):
    w = reg.prox(v, step)

    def objective(x):
        return reg.value(x) + np.sum((x - v) ** 2) / (2 * step)

    rng = np.random.default_rng(0)
    base = objective(w)
    for _ in range(50):
        assert objective(w + 1e-3 * rng.normal(size=D)) >= base - 1e-12


@pytest.mark.parametrize("reg", NORMS, ids=NORM_IDS)
@SETTINGS
@given(v=vectors, w=vectors)
def test_norm_conjugate_is_dual_ball_indicator(reg, v, w):
    # sup_w v.w - R(w) is 0 inside the dual ball (Hoelder) and +inf outside.
    norm = reg.dual_norm(v)
    if norm <= 1.0:
        assert reg.conjugate(v) == 0.0
        assert float(v @ w) - reg.value(w) <= 1e-12
    else:
        assert reg.conjugate(v) == math.inf
        # With w = prox_R(v) and g = v - w in dR(w): v.w - R(w) = ||w||^2 > 0, so the sup
        # along t w grows without bound.
        direction = reg.prox(v, 1.0)
        assert float(v @ direction) - reg.value(direction) > 0
    assert reg.feasible_scale(v) == pytest.approx(min(1.0, 1.0 / norm) if norm > 0 else 1.0)
    assert reg.conjugate(reg.feasible_scale(v) * v) == 0.0


def test_norm_values(rng):
    w = rng.normal(size=D)
    assert GroupLasso(GROUPS).value(w) == pytest.approx(
        sum(math.sqrt(len(g)) * np.linalg.norm(w[g]) for g in GROUPS)
    )
    assert L1Inf(GROUPS).value(w) == pytest.approx(sum(np.abs(w[g]).max() for g in GROUPS))
    assert TraceNorm((2, 3)).value(w) == pytest.approx(np.linalg.norm(w.reshape(2, 3), ord="nuc"))
    assert TraceNorm((2, 3)).dual_norm(w) == pytest.approx(np.linalg.norm(w.reshape(2, 3), 2))
    labels = np.array([0, 1, 1, 0, 1, 2])
    assert GroupLasso(labels).groups == GroupLasso(GROUPS).groups


# ---- constraint sets -------------------------------------------------------------------------


def _vertices(reg):
    """All vertices of a polytope constraint set (brute force, small D)."""
    if isinstance(reg, L1Ball):
        eye = np.eye(D) * reg.radius
        return np.vstack([eye, -eye])
    lower = np.broadcast_to(np.asarray(reg.lower, dtype=float), (D,))
    upper = np.broadcast_to(np.asarray(reg.upper, dtype=float), (D,))
    return np.array([np.where(bits, upper, lower) for bits in itertools.product([0, 1], repeat=D)])


@pytest.mark.parametrize("reg", SETS, ids=SET_IDS)
@SETTINGS
@given(c=vectors)
def test_lmo_against_brute_force(reg, c):
    ours = reg.lmo(c)
    assert reg.value(ours) == 0.0
    if isinstance(reg, L2Ball):
        rng = np.random.default_rng(1)
        points = rng.normal(size=(2000, D))
        points *= reg.radius / np.linalg.norm(points, axis=1, keepdims=True)
        best = (points @ c).min()
    else:
        best = (_vertices(reg) @ c).min()
    assert float(c @ ours) <= best + 1e-12
    # The support function is the conjugate: R*(v) = sup_{w in C} v.w = v . lmo(-v).
    assert reg.conjugate(-c) == pytest.approx(float(-c @ ours), abs=1e-12)


@pytest.mark.parametrize("reg", SETS, ids=SET_IDS)
@SETTINGS
@given(v=vectors)
def test_projection_variational_inequality(reg, v):
    # p = P_C(v) iff <v - p, x - p> <= 0 for every x in C; for polytopes checking the vertices
    # suffices, for the ball compare with the closed form and random points.
    p = reg.prox(v, 1.0)
    assert reg.value(p) == 0.0
    if isinstance(reg, L2Ball):
        rng = np.random.default_rng(2)
        points = rng.normal(size=(500, D))
        points *= reg.radius * rng.random((500, 1)) / np.linalg.norm(points, axis=1, keepdims=True)
    else:
        points = _vertices(reg)
    assert np.all((points - p) @ (v - p) <= 1e-9)
    # Moreau: v = P_C(v) + prox of the support function; sigma_C(v - p) = <v - p, p>.
    assert reg.conjugate(v - p) == pytest.approx(float((v - p) @ p), abs=1e-9)


@pytest.mark.parametrize("reg", SETS, ids=SET_IDS)
def test_projection_matches_numerical_minimizer(reg, rng):
    v = rng.normal(size=D) * 2
    ours = reg.prox(v, 1.0)
    if isinstance(reg, L1Ball):
        constraint = {"type": "ineq", "fun": lambda x: reg.radius - np.abs(x).sum()}
    elif isinstance(reg, L2Ball):
        constraint = {"type": "ineq", "fun": lambda x: reg.radius**2 - x @ x}
    else:
        constraint = None
    if constraint is None:
        lower = np.broadcast_to(np.asarray(reg.lower, dtype=float), (D,))
        upper = np.broadcast_to(np.asarray(reg.upper, dtype=float), (D,))
        result = minimize(
            lambda x: np.sum((x - v) ** 2),
            np.zeros(D) + (lower + upper) / 2,
            bounds=list(zip(lower, upper, strict=True)),
        )
    else:
        result = minimize(
            lambda x: np.sum((x - v) ** 2),
            np.zeros(D),
            constraints=[constraint],
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 500},
        )
    # SLSQP may end slightly outside the set (||x||_1 = r + 5e-8), hence the slack.
    assert np.sum((ours - v) ** 2) <= result.fun + 1e-5
    np.testing.assert_allclose(ours, result.x, atol=1e-3)


def test_l1_ball_lmo_tie_rule():
    reg = L1Ball(2.0)
    np.testing.assert_array_equal(reg.lmo(np.array([1.0, -3.0, 3.0])), [0, 2.0, 0])
    np.testing.assert_array_equal(reg.lmo(np.zeros(3)), [-2.0, 0, 0])


def test_project_l1_ball_inside_and_zero_radius():
    v = np.array([0.1, -0.2])
    np.testing.assert_array_equal(project_l1_ball(v, 1.0), v)
    assert np.abs(project_l1_ball(np.array([3.0, -1.0, 0.5]), 1.0)).sum() == pytest.approx(1.0)


def test_box_with_infinite_bounds():
    reg = Box(0.0, math.inf)
    np.testing.assert_array_equal(reg.prox(np.array([-1.0, 2.0]), 1.0), [0.0, 2.0])
    assert reg.conjugate(np.array([-1.0, 0.0])) == 0.0
    assert reg.conjugate(np.array([1.0, 0.0])) == math.inf
    with pytest.raises(ValueError, match="unbounded"):
        reg.lmo(np.array([-1.0, 0.0]))


def test_norms_have_no_lmo():
    for reg in [L1(), ElasticNet(1.0), Zero(), *NORMS]:
        with pytest.raises(ValueError, match="no linear minimization oracle"):
            reg.lmo(np.ones(D))


def test_regularizers_are_immutable():
    reg = L1Ball(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        reg.radius = 2.0
    assert GroupLasso(GROUPS) == GroupLasso([[3, 0], [4, 2, 1], [5]])
    assert hash(Box([0, 1], [2, 3])) == hash(Box([0, 1], [2, 3]))


def test_get_regularizer():
    assert type(get_regularizer("L2")) is L2
    assert type(get_regularizer("lasso")) is L1
    assert type(get_regularizer("elastic-net")) is ElasticNet
    assert type(get_regularizer("zero")) is Zero
    reg = GroupLasso(GROUPS)
    assert get_regularizer(reg) is reg


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: get_regularizer("l3"), "regularizer='l3'"),
        (lambda: get_regularizer(None), "regularizer=None"),
        (lambda: ElasticNet(1.5), "l1_ratio=1.5"),
        (lambda: ElasticNet(-0.1), "l1_ratio=-0.1"),
        (lambda: GroupLasso([[0, 1], [1, 2]]), r"overlap.*groups=\[\[0, 1\], \[1, 2\]\]"),
        (lambda: GroupLasso([[0, 1], [3]]), r"partition.*groups=\[\[0, 1\], \[3\]\]"),
        (lambda: GroupLasso([[0], []]), r"non-empty.*groups=\[\[0\], \[\]\]"),
        (lambda: GroupLasso([[0], [1]], weights=[1.0]), r"weights=\[1.0\]"),
        (lambda: GroupLasso([[0], [1]], weights=[1.0, -1.0]), r"weights=\[1.0, -1.0\]"),
        (lambda: L1Inf([[1, 2]]), r"partition.*groups=\[\[1, 2\]\]"),
        (lambda: TraceNorm((0, 3)), r"shape=\(0, 3\)"),
        (lambda: TraceNorm((2, 3, 4)), r"shape=\(2, 3, 4\)"),
        (lambda: L1Ball(0.0), "radius=0.0"),
        (lambda: L2Ball(-1), "radius=-1"),
        (lambda: L2Ball(math.inf), "radius=inf"),
        (lambda: Box(1.0, 0.0), "lower must be <= upper, got lower=1.0, upper=0.0"),
        (lambda: Box([0.0, 0.0], [1.0, 1.0, 1.0]), "same size"),
        (lambda: Box(math.nan, 1.0), "lower=nan"),
    ],
)
def test_bad_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_size_mismatch():
    with pytest.raises(ValueError, match="n_features=6"):
        GroupLasso(GROUPS).value(np.ones(5))
    with pytest.raises(ValueError, match="n_features=6"):
        TraceNorm((2, 3)).prox(np.ones(7), 1.0)
