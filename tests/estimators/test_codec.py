"""The model metadata codec: exact round trips of the types it stores, clear refusals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from daskpd.model_file import _codec


def _round_trip(value):
    arrays = []
    document = json.loads(json.dumps(_codec.encode(value, arrays)))
    return _codec.decode(document, arrays), arrays


def test_values_come_back_with_their_types():
    value = {
        -1: 1.0, 1: (2, "a", None), "nan": math.nan, "inf": -math.inf, "flag": np.bool_(True),
        "n": np.int64(7), "nested": [{"k": (1.5,)}], "labels": np.array(["b", "a"]),
        "objects": np.array(["x", "y"], dtype=object), "w": np.arange(3.0),
    }  # fmt: skip
    back, arrays = _round_trip(value)
    assert len(arrays) == 1 and back["w"] is arrays[0]
    assert back[-1] == 1.0 and back[1] == (2, "a", None)
    assert math.isnan(back["nan"]) and back["inf"] == -math.inf
    assert back["flag"] is True and type(back["n"]) is int and back["nested"] == [{"k": (1.5,)}]
    assert back["labels"].dtype.kind == "U" and list(back["labels"]) == ["b", "a"]
    assert back["objects"].dtype == object and list(back["objects"]) == ["x", "y"]


@pytest.mark.parametrize("name", ["PCG64", "MT19937"])
def test_random_states_continue_where_they_were(name):
    generator = np.random.Generator(getattr(np.random, name)(3))
    generator.random(5)
    legacy = np.random.RandomState(5)
    legacy.standard_normal()  # leaves a cached Gaussian in the state
    (g, r), _ = _round_trip((generator, legacy))
    assert g.random() == generator.random()
    assert r.standard_normal() == legacy.standard_normal()


def test_refusals_name_the_place():
    with pytest.raises(TypeError, match=r"parameter\['f'\]: .* type builtin_function"):
        _codec.encode({"f": print}, [], "parameter")
    with pytest.raises(TypeError, match="dtype complex128"):
        _codec.encode(np.zeros(2, dtype=complex), [])
    with pytest.raises(ValueError, match="unknown tag '__import__'"):
        _codec.decode({"__import__": "os"}, [])
    with pytest.raises(ValueError, match="array 3, which is not stored"):
        _codec.decode({"__array__": 3}, [])
    with pytest.raises(ValueError, match="unknown bit generator 'Evil'"):
        _codec.decode({"__generator__": {"__dict__": [["bit_generator", "Evil"]]}}, [])
