"""Property tests of the losses: conjugates, proxes, gradients, against numerical oracles."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from daskpd.kernels import scalar
from daskpd.losses import (
    Absolute,
    EpsilonInsensitive,
    Hinge,
    Huber,
    Logistic,
    SmoothHinge,
    Squared,
    SquaredHinge,
    get_loss,
)

LOSSES = [
    Hinge(),
    SmoothHinge(1.0),
    SmoothHinge(0.3),
    SquaredHinge(),
    Logistic(),
    Squared(),
    Absolute(),
    EpsilonInsensitive(0.3),
    EpsilonInsensitive(0.0),
    Huber(0.7),
]
IDS = [f"{loss.name}-{loss.params[0]:g}" for loss in LOSSES]
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)

reals = st.floats(-4.0, 4.0, allow_nan=False)
steps = st.floats(0.05, 5.0)
fractions = st.floats(0.001, 0.999)


def label(loss, draw_value):
    """A label of the right kind: {-1, +1} for classification, a real otherwise."""
    if loss.classification:
        return 1.0 if draw_value >= 0 else -1.0
    return draw_value


def interior_dual(loss, y, fraction, free):
    """A point strictly inside the dual domain of ``loss(., y)``."""
    lo, hi = loss.dual_bounds(y)
    if math.isinf(lo) and math.isinf(hi):
        return free
    if math.isinf(lo):
        return hi - 3.0 * fraction
    if math.isinf(hi):
        return lo + 3.0 * fraction
    return lo + fraction * (hi - lo)


def numerical_sup(loss, z, y):
    """``sup_u z u - loss(u, y)`` by bounded scalar minimization (finite sup)."""
    result = minimize_scalar(
        lambda u: -(z * u - loss.value(u, y)),
        bounds=(-60.0, 60.0),
        method="bounded",
        options={"xatol": 1e-11, "maxiter": 2000},
    )
    return -result.fun


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@SETTINGS
@given(u=reals, y_raw=reals)
def test_fenchel_young_equality_at_gradient(loss, u, y_raw):
    y = label(loss, y_raw)
    z = loss.gradient(u, y)
    assert loss.value(u, y) + loss.conjugate(z, y) == pytest.approx(z * u, abs=1e-10)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@SETTINGS
@given(u=reals, y_raw=reals, fraction=fractions, free=reals)
def test_fenchel_young_inequality(loss, u, y_raw, fraction, free):
    y = label(loss, y_raw)
    z = interior_dual(loss, y, fraction, free)
    assert loss.value(u, y) + loss.conjugate(z, y) >= z * u - 1e-12


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@SETTINGS
@given(y_raw=reals, fraction=fractions, free=reals)
def test_conjugate_is_numerical_sup(loss, y_raw, fraction, free):
    y = label(loss, y_raw)
    z = interior_dual(loss, y, fraction, free)
    assert loss.conjugate(z, y) == pytest.approx(numerical_sup(loss, z, y), abs=1e-7)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@pytest.mark.parametrize("y_raw", [-1.5, 1.0])
def test_conjugate_is_infinite_outside_the_domain(loss, y_raw):
    y = label(loss, y_raw)
    lo, hi = loss.dual_bounds(y)
    for z, direction in ((lo - 0.01, -1.0), (hi + 0.01, 1.0)):
        if math.isinf(z):
            continue
        assert loss.conjugate(z, y) == math.inf
        # The sup really is unbounded: z u - loss(u) grows along the direction.
        far = [z * u - loss.value(u, y) for u in (direction * 1e3, direction * 1e5)]
        assert far[1] > far[0] > 0
    if math.isfinite(lo):
        assert math.isfinite(loss.conjugate(lo, y))
    if math.isfinite(hi):
        assert math.isfinite(loss.conjugate(hi, y))


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@SETTINGS
@given(v=reals, step=steps, y_raw=reals)
def test_prox_matches_numerical_minimizer(loss, v, step, y_raw):
    y = label(loss, y_raw)

    def objective(u):
        return loss.value(u, y) + (u - v) ** 2 / (2 * step)

    ours = loss.prox(v, step, y)
    result = minimize_scalar(
        objective, bounds=(v - 30.0, v + 30.0), method="bounded", options={"xatol": 1e-11}
    )
    assert objective(ours) <= result.fun + 1e-10
    # The objective is (1/step)-strongly convex, so values pin the point down.
    assert ours == pytest.approx(result.x, abs=1e-4)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@SETTINGS
@given(z=reals, step=steps, y_raw=reals)
def test_prox_conjugate_matches_numerical_minimizer(loss, z, step, y_raw):
    y = label(loss, y_raw)
    lo, hi = loss.dual_bounds(y)
    lo, hi = max(lo, z - 40.0), min(hi, z + 40.0)

    def objective(s):
        return loss.conjugate(s, y) + (s - z) ** 2 / (2 * step)

    ours = loss.prox_conjugate(z, step, y)
    assert lo - 1e-15 <= ours <= hi + 1e-15
    result = minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    assert objective(ours) <= result.fun + 1e-10
    assert ours == pytest.approx(result.x, abs=1e-4)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@SETTINGS
@given(v=reals, step=steps, y_raw=reals)
def test_moreau_identity(loss, v, step, y_raw):
    # v = prox_{step f}(v) + step prox_{f*/step}(v / step); prox_{f*/step}(x) is
    # prox_conjugate(x, 1/step).
    y = label(loss, y_raw)
    recomposed = loss.prox(v, step, y) + step * loss.prox_conjugate(v / step, 1.0 / step, y)
    assert recomposed == pytest.approx(v, abs=1e-10)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@SETTINGS
@given(u=reals, other=reals, y_raw=reals)
def test_gradient_is_a_subgradient(loss, u, other, y_raw):
    y = label(loss, y_raw)
    g = loss.gradient(u, y)
    assert loss.value(other, y) >= loss.value(u, y) + g * (other - u) - 1e-12


@pytest.mark.parametrize("loss", [loss for loss in LOSSES if math.isfinite(loss.smoothness)])
@SETTINGS
@given(u=reals, other=reals, y_raw=reals)
def test_smoothness_constant(loss, u, other, y_raw):
    y = label(loss, y_raw)
    change = abs(loss.gradient(u, y) - loss.gradient(other, y))
    assert change <= loss.smoothness * abs(u - other) + 1e-12


@pytest.mark.parametrize("loss", [loss for loss in LOSSES if math.isfinite(loss.smoothness)])
def test_gradient_matches_finite_differences(loss, rng):
    u = rng.uniform(-3, 3, size=50)
    y = np.where(rng.random(50) < 0.5, -1.0, 1.0) if loss.classification else rng.normal(size=50)
    h = 1e-6
    numeric = (loss.value(u + h, y) - loss.value(u - h, y)) / (2 * h)
    np.testing.assert_allclose(loss.gradient(u, y), numeric, atol=1e-6)


def test_smoothness_values():
    assert Hinge().smoothness == math.inf
    assert SmoothHinge(0.25).smoothness == 4.0
    assert SquaredHinge().smoothness == 2.0
    assert Logistic().smoothness == 0.25
    assert Squared().smoothness == 1.0
    assert Absolute().smoothness == math.inf
    assert EpsilonInsensitive(0.1).smoothness == math.inf
    assert Huber(3.0).smoothness == 1.0


def test_logistic_proxes_stay_accurate_in_the_tails():
    loss = Logistic()
    # Far in the tails the dual optimum is exponentially close to the domain boundary; the
    # logit parametrization keeps it exact in relative terms.
    s = loss.prox_conjugate(40.0, 1.0, 1.0)
    assert -1e-15 < s < 0.0
    assert loss.prox_conjugate(-40.0, 1.0, 1.0) == pytest.approx(-1.0, abs=1e-15)
    assert loss.prox(-1e6, 1.0, 1.0) == pytest.approx(-1e6 + 1.0)
    assert loss.prox(1e6, 1.0, 1.0) == pytest.approx(1e6)


def test_vectorized_wrappers_equal_scalar_ops(rng):
    u = rng.normal(size=20)
    y = np.where(rng.random(20) < 0.5, -1.0, 1.0)
    step = rng.uniform(0.1, 2.0, size=20)
    for loss in LOSSES:
        params = loss.params
        expected = [scalar.loss_value(loss.code, params, a, b) for a, b in zip(u, y, strict=True)]
        np.testing.assert_array_equal(loss.value(u, y), expected)
        expected = [
            scalar.loss_prox(loss.code, params, a, s, b) for a, s, b in zip(u, step, y, strict=True)
        ]
        np.testing.assert_array_equal(loss.prox(u, step, y), expected)
        lo, hi = loss.dual_bounds(y)
        assert lo.shape == hi.shape == (20,)
    assert isinstance(Hinge().value(0.5, 1.0), float)
    assert Squared().value(np.zeros((2, 3)), 1.0).shape == (2, 3)


def test_codes_and_params():
    assert [loss.code for loss in (Hinge(), SmoothHinge(), SquaredHinge(), Logistic())] == [
        0,
        1,
        2,
        3,
    ]
    assert [loss.code for loss in (Squared(), Absolute(), EpsilonInsensitive(), Huber())] == [
        4,
        5,
        6,
        7,
    ]
    assert SmoothHinge(0.5).params.tolist() == [0.5]
    assert EpsilonInsensitive(0.2).params.tolist() == [0.2]
    assert Huber(2.0).params.tolist() == [2.0]
    assert Hinge().params.dtype == np.float64


def test_losses_are_immutable_and_hashable():
    loss = SmoothHinge(0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        loss.gamma = 1.0
    assert SmoothHinge(0.5) == loss and hash(SmoothHinge(0.5)) == hash(loss)


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("hinge", Hinge),
        ("Smooth-Hinge", SmoothHinge),
        ("squared_hinge", SquaredHinge),
        ("logistic", Logistic),
        ("log_loss", Logistic),
        ("squared", Squared),
        ("absolute", Absolute),
        ("epsilon_insensitive", EpsilonInsensitive),
        ("huber", Huber),
    ],
)
def test_get_loss_names(name, cls):
    assert type(get_loss(name)) is cls
    instance = cls()
    assert get_loss(instance) is instance


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: get_loss("hingee"), "loss='hingee'"),
        (lambda: get_loss(3), "loss=3"),
        (lambda: SmoothHinge(0.0), "gamma=0.0"),
        (lambda: SmoothHinge(-1.0), "gamma=-1.0"),
        (lambda: SmoothHinge(math.inf), "gamma=inf"),
        (lambda: EpsilonInsensitive(-0.1), "epsilon=-0.1"),
        (lambda: Huber(0.0), "delta=0.0"),
        (lambda: Huber(math.nan), "delta=nan"),
    ],
)
def test_bad_parameters(make, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make()
