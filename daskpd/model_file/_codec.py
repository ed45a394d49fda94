"""Plain values to JSON and back, with arrays set aside: the metadata of saved models.

A saved model is read by people other than the one who wrote it, so reading it must not run
code from the file (``pickle`` would). This codec writes a closed set of types, tagged where
JSON would lose them, and reads back exactly those types:

- ``None``, ``bool``, ``int``, ``float`` (NaN and infinities too), ``str``;
- ``list``; ``tuple`` as ``{"__tuple__": [...]}``; ``dict`` (any of these as keys) as
  ``{"__dict__": [[key, value], ...]}``, so integer keys (``class_weight={-1: 1, 1: 3}``)
  stay integers;
- NumPy scalars as Python numbers;
- ``numpy.ndarray`` (numeric or boolean) as ``{"__array__": k}``: the ``k``-th array the
  caller stores beside the JSON (a chunked zarr array for a model's); a 1-d array of strings
  (class labels) in the JSON itself;
- ``numpy.random.Generator`` and ``numpy.random.RandomState`` as their bit generator's state
  (a dict of integers), rebuilt on one of NumPy's own bit generators named in
  :data:`BIT_GENERATORS`.

Anything else is a ``TypeError`` that names where in the value it sits; a document with an
unknown tag or bit generator, a tag with a body of the wrong type, or nested deeper than
:data:`MAX_DEPTH` is a ``ValueError``.
"""

from __future__ import annotations

import numpy as np

#: Bit generators a saved random state may name (NumPy's own; nothing is imported by name).
BIT_GENERATORS = {
    "PCG64": np.random.PCG64,
    "PCG64DXSM": np.random.PCG64DXSM,
    "MT19937": np.random.MT19937,
    "Philox": np.random.Philox,
    "SFC64": np.random.SFC64,
}

#: How deep a stored value may nest (a model's deepest, a random state, nests 6 levels):
#: deeper documents are refused before Python's recursion limit is near.
MAX_DEPTH = 64

_TAGS = (
    "__tuple__", "__dict__", "__array__", "__strings__", "__generator__", "__random_state__",
)  # fmt: skip


def encode(value, arrays, where="value"):
    """Return a JSON-ready form of ``value``; its arrays are appended to ``arrays``.

    Parameters
    ----------
    value : object
        Of the types in the module docstring.
    arrays : list
        Receives the arrays found in ``value``, in order.
    where : str
        How error messages name ``value``.

    Returns
    -------
    object
        Made of ``None``, ``bool``, ``int``, ``float``, ``str``, ``list`` and ``dict`` with
        string keys.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic) and isinstance(value.item(), bool | int | float):
        return value.item()
    if isinstance(value, list):
        return [encode(item, arrays, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, tuple):
        items = [encode(item, arrays, f"{where}[{i}]") for i, item in enumerate(value)]
        return {"__tuple__": items}
    if isinstance(value, dict):
        return {
            "__dict__": [
                [encode(key, arrays, f"{where} key"), encode(item, arrays, f"{where}[{key!r}]")]
                for key, item in value.items()
            ]
        }
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "UO" and value.ndim == 1:
            # labels: a few strings, kept in the JSON
            items = value.tolist()
            if all(isinstance(item, str) for item in items):
                return {"__strings__": [items, value.dtype.kind == "O"]}
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{where}: cannot store an array of dtype {value.dtype}")
        arrays.append(value)
        return {"__array__": len(arrays) - 1}
    if isinstance(value, np.random.Generator):
        return {"__generator__": encode(value.bit_generator.state, arrays, where)}
    if isinstance(value, np.random.RandomState):
        return {"__random_state__": encode(value.get_state(legacy=False), arrays, where)}
    raise TypeError(f"{where}: cannot store a value of type {type(value).__name__}")


def decode(document, arrays, where="value", _depth=0):
    """Rebuild what :func:`encode` wrote.

    Parameters
    ----------
    document : object
        Parsed JSON.
    arrays : sequence of ndarray
        The arrays stored beside it, in :func:`encode`'s order.
    where : str
        How error messages name the document.

    Returns
    -------
    object

    Raises
    ------
    ValueError
        When ``document`` is not one :func:`encode` writes (an unknown tag, a tag's body of
        another type, nesting deeper than :data:`MAX_DEPTH`), the message starting with
        ``where``.
    """
    if document is None or isinstance(document, bool | int | float | str):
        return document
    if _depth >= MAX_DEPTH:
        raise ValueError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    depth = _depth + 1
    if isinstance(document, list):
        return [decode(item, arrays, where, depth) for item in document]
    if not isinstance(document, dict) or len(document) != 1:
        raise ValueError(f"{where}: not a stored value: {_shown(document)}")
    ((tag, body),) = document.items()
    if tag == "__tuple__":
        _check_body(tag, body, list, where)
        return tuple(decode(item, arrays, where, depth) for item in body)
    if tag == "__dict__":
        _check_body(tag, body, list, where)
        if not all(isinstance(pair, list) and len(pair) == 2 for pair in body):
            raise ValueError(f"{where}: a '__dict__' entry is not a [key, value] pair")
        out = {}
        for key, item in body:
            key = decode(key, arrays, where, depth)
            if not _is_key(key):
                raise ValueError(f"{where}: a '__dict__' key is a {type(key).__name__}")
            out[key] = decode(item, arrays, where, depth)
        return out
    if tag == "__array__":
        if isinstance(body, bool) or not isinstance(body, int) or not 0 <= body < len(arrays):
            raise ValueError(f"{where}: refers to array {body!r}, which is not stored")
        return arrays[body]
    if tag == "__strings__":
        _check_body(tag, body, list, where)
        if len(body) != 2 or not isinstance(body[0], list) or not isinstance(body[1], bool):
            raise ValueError(f"{where}: a '__strings__' body is not [strings, as_objects]")
        items, as_objects = body
        if not all(isinstance(item, str) for item in items):
            raise ValueError(f"{where}: a string array holds something else")
        return np.array(items, dtype=object if as_objects else None)
    if tag in ("__generator__", "__random_state__"):
        state = decode(body, arrays, where, depth)
        name = state.get("bit_generator") if isinstance(state, dict) else None
        if not isinstance(name, str) or name not in BIT_GENERATORS:
            raise ValueError(f"{where}: unknown bit generator {_shown(name)}")
        bit_generator = BIT_GENERATORS[name]()
        try:
            if tag == "__generator__":
                bit_generator.state = state
                return np.random.Generator(bit_generator)
            # a RandomState's state also holds its cached Gaussian
            random_state = np.random.RandomState(bit_generator)
            random_state.set_state(state)
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            raise ValueError(f"{where}: not a state of {name} ({exc!r})") from None
        return random_state
    raise ValueError(f"{where}: unknown tag {_shown(tag)} (known: {', '.join(_TAGS)})")


def _is_key(value) -> bool:
    """Whether ``value`` is a key :func:`encode` writes: a plain scalar or a tuple of keys."""
    if value is None or isinstance(value, bool | int | float | str):
        return True
    return isinstance(value, tuple) and all(_is_key(item) for item in value)


def _check_body(tag, body, kind, where) -> None:
    if not isinstance(body, kind):
        raise ValueError(f"{where}: a {tag!r} body is a {type(body).__name__}, not a list")


def _shown(value) -> str:
    """A short ``repr`` for a message (a forged document can be huge or deeply nested)."""
    try:
        text = repr(value)
    except RecursionError:
        text = f"<a deeply nested {type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."
