"""The zarr group of a model file: written at once, read and checked before anything is built.

The layout, what the document of each kind holds and the rules of reading are in the
docstring of :mod:`daskpd.model_file`.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from daskpd.data.atomic import atomic_group
from daskpd.model_file import _codec

FORMAT = "daskpd-model"
#: 3: one layout for both kinds. 2: estimator files (no ``format`` attribute). 1: solve
#: results (``format`` "daskpd-model"), or estimator files with pickled metadata (withdrawn).
FORMAT_VERSION = 3

#: The kinds of model: what each holds, and what reads it (for the message of a wrong kind).
KINDS = {
    "solve_result": ("a solve result", "daskpd.load_model"),
    "estimator": ("a fitted estimator", "daskpd.load_model or daskpd.load_estimator"),
}

#: Codecs an array of a model file may use: daskpd writes "bytes" and "zstd"; the others
#: are zarr's own byte-level codecs. None of them builds Python objects from the file.
ARRAY_CODECS = frozenset({"bytes", "zstd", "blosc", "gzip", "crc32c", "transpose"})

#: The zarr v3 data types of the arrays: numbers and booleans.
_DATA_TYPES = frozenset(
    ["bool", "float32", "float64"]
    + [f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)]
)

#: Arrays are chunked so that no chunk is far above ~16 MB of float64.
_CHUNK = 2_000_000
#: A zarr node name that needs no quoting (and not one of zarr's reserved "__" names).
_ARRAY_NAME = re.compile(r"^(?!__)[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class CorruptStoreError(ValueError):
    """A checkpoint or model array was truncated or altered after it was written."""


@dataclass(frozen=True)
class ModelFile:
    """A model file read and checked by :func:`read_model_file`.

    Attributes
    ----------
    path : Path
    kind : str
        ``"solve_result"`` or ``"estimator"``.
    format_version : int
        The version the file was written in (older versions are read too).
    content : dict
        The decoded document, its arrays in place (see the module docstring).
    """

    path: Path
    kind: str
    format_version: int
    content: dict


# --------------------------------------------------------------------------------------------
# checksummed arrays (also the arrays of checkpoints)


def checksum(array: np.ndarray) -> str:
    """CRC-32 of the array's bytes with its dtype and shape (detects altered chunk files).

    Parameters
    ----------
    array : ndarray

    Returns
    -------
    str
        Eight hexadecimal digits.
    """
    header = f"{array.dtype.str}{array.shape}".encode()
    return f"{zlib.crc32(np.ascontiguousarray(array).tobytes(), zlib.crc32(header)):08x}"


def write_array(group, name, array) -> str:
    """Write ``array`` as ``group[name]`` (chunked); return its :func:`checksum`.

    Parameters
    ----------
    group : zarr.Group
    name : str
    array : array-like

    Returns
    -------
    str
    """
    # np.ascontiguousarray would turn 0-d arrays (step counters, scalars) into 1-d ones.
    array = np.array(array, order="C", copy=None)
    chunks = (
        array.shape
        if array.ndim == 0
        else (min(max(array.shape[0], 1), _CHUNK),) + tuple(array.shape[1:])
    )
    if array.ndim > 0 and array.shape[0] == 0:
        chunks = (1,) + tuple(array.shape[1:])
    group.create_array(name, data=array, chunks=chunks)
    return checksum(array)


def read_array(array, name=None, checksums=None, where=""):
    """Read a zarr array fully; verify it against ``checksums[name]`` when given.

    Parameters
    ----------
    array : zarr.Array
    name : str, optional
        Its name in ``checksums`` and in messages.
    checksums : dict of str to str, optional
    where : str
        Prefix of messages (naming the file).

    Returns
    -------
    ndarray

    Raises
    ------
    CorruptStoreError
        When the array cannot be read or does not match its checksum.
    """
    try:
        value = np.asarray(array[()] if array.ndim == 0 else array[...])
    except Exception as exc:  # codecs raise many types on damaged chunks
        raise CorruptStoreError(f"{where}array {name!r} cannot be read ({exc})") from None
    if checksums is not None and name in checksums and checksum(value) != checksums[name]:
        raise CorruptStoreError(f"{where}array {name!r} does not match its checksum")
    return value


# --------------------------------------------------------------------------------------------
# writing


def write_model_file(path, kind, content, *, overwrite=False) -> Path:
    """Write a model file of ``kind`` holding ``content`` at ``path``, atomically.

    ``content`` is a dict of the types of :mod:`daskpd.model_file._codec`; its numeric and
    boolean arrays become zarr arrays. ``path``, ``overwrite``, the result and the errors are
    those of :func:`daskpd.model_file.save_model`, which builds ``content`` from a model.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    path = Path(path)
    arrays = []
    # Encoded before anything is written, so a value the format cannot store leaves no file.
    encoded = _codec.encode(content, arrays, kind)
    document = json.dumps(encoded)
    names = _array_names(encoded, len(arrays))
    with atomic_group(path, overwrite=overwrite) as group:
        checksums = {
            name: write_array(group, name, array) for name, array in zip(names, arrays, strict=True)
        }
        group.attrs.update(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "kind": kind,
                "document": document,
                "arrays": names,
                "checksums": checksums,
            }
        )
    return path


def _array_names(encoded, n_arrays) -> list:
    """A name for each array of an encoded document: where it sits (``w``, ``state.coef_``).

    The names are for people looking at the file and for messages; the document refers to
    the arrays by number. A place that does not make a valid, unique name gives
    ``array-<k>``.
    """
    places = [None] * n_arrays

    def visit(node, place):
        if isinstance(node, list):
            for index, item in enumerate(node):
                visit(item, [*place, str(index)])
            return
        if not isinstance(node, dict) or len(node) != 1:
            return
        ((tag, body),) = node.items()
        if tag == "__array__":
            places[body] = ".".join(place)
        elif tag == "__dict__":
            for key, value in body:
                visit(value, [*place, str(key) if isinstance(key, str | int) else "key"])
        elif tag == "__tuple__":
            visit(body, place)
        elif tag in ("__generator__", "__random_state__"):
            visit(body, [*place, "state"])

    visit(encoded, [])
    names = []
    for index, place in enumerate(places):
        name = place if place and _ARRAY_NAME.match(place) else f"array-{index}"
        while name in names:
            name += "_"
        names.append(name)
    return names


# --------------------------------------------------------------------------------------------
# reading


def read_model_file(path, *, kind=None) -> ModelFile:
    """Read and check the model file at ``path``.

    Parameters
    ----------
    path : str or path-like
    kind : {"solve_result", "estimator"}, optional
        The kind the caller needs; a file of another kind is refused.

    Returns
    -------
    ModelFile

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When ``path`` is not a daskpd model file, is of a newer or withdrawn version, of
        another ``kind`` than asked, or its document is not one this format writes.
    CorruptStoreError
        When an array is missing, unexpected, unreadable or fails its checksum (a
        ``ValueError`` too).
    """
    path = Path(path)
    where = f"model {str(path)!r}"
    if not path.exists():
        raise FileNotFoundError(f"no model at {str(path)!r}")
    try:
        group = zarr.open_group(store=str(path), mode="r")
        attrs = dict(group.attrs)
    except Exception as exc:  # a missing or unparsable zarr.json raises many types
        raise ValueError(f"{str(path)!r} is not a daskpd model ({exc})") from None
    version = attrs.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        version = repr(version)  # never equal to a known version (JSON true == 1 in Python)
    if attrs.get("format") is None and version == 1 and "meta" in attrs:
        raise ValueError(
            f"{where} was saved by an older daskpd whose model files hold pickled "
            "metadata; daskpd no longer reads them, because unpickling a file runs code from "
            "it. Fit and save the model again with this version."
        )
    if attrs.get("format") is None and version == 2 and "estimator" in attrs:
        found_kind, document = "estimator", attrs.get("document")
    elif attrs.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a daskpd model (format {attrs.get('format')!r})")
    elif version == 1:
        found_kind, document = "solve_result", None
    elif version == FORMAT_VERSION:
        found_kind, document = attrs.get("kind"), attrs.get("document")
    elif isinstance(version, int) and version > FORMAT_VERSION:
        raise ValueError(
            f"{where} has format_version {version}, newer than this daskpd reads "
            f"({FORMAT_VERSION}); upgrade daskpd"
        )
    else:
        raise ValueError(f"{where} has an unknown format_version {attrs.get('format_version')!r}")
    if found_kind not in KINDS:
        raise ValueError(f"{where} holds an unknown kind of model {found_kind!r}")
    if kind is not None and found_kind != kind:
        (found, reader), (asked, _) = KINDS[found_kind], KINDS[kind]
        raise ValueError(f"{where} holds {found}, not {asked}; read it with {reader}")

    arrays = _read_arrays(group, path, attrs.get("checksums"), where)
    if version == 1:
        content = _legacy_result(attrs, arrays, where)
    else:
        if not isinstance(document, str):
            raise ValueError(f"{where}: its document is not a JSON string")
        parsed = _parse_document(document, where)
        # format_version 2 numbered its arrays; 3 lists their names in document order
        names = attrs.get("arrays") if version == FORMAT_VERSION else None
        if names is None and version == 2:
            names = [f"array-{k}" for k in range(len(arrays))]
        if (
            not isinstance(names, list)
            or not all(isinstance(name, str) for name in names)
            or sorted(names) != sorted(arrays)
        ):
            raise CorruptStoreError(f"{where}: its list of arrays does not match its arrays")
        ordered = [arrays[name] for name in names]
        try:
            if version == 2:
                content = _legacy_estimator(attrs, parsed, ordered, where)
            else:
                content = _codec.decode(parsed, ordered, "document")
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError) as exc:
            # the codec's own refusals say where in the document; anything else failed deeper
            detail = str(exc) if type(exc) is ValueError else repr(exc)
            if isinstance(exc, ValueError) and str(exc).startswith(where):
                raise
            raise ValueError(f"{where}: its document is not one daskpd writes ({detail})") from None
        if not isinstance(content, dict):
            raise ValueError(f"{where}: its document is not a dict")
    return ModelFile(path=path, kind=found_kind, format_version=version, content=content)


def _parse_document(document, where):
    """The document's JSON, parsed; a ``ValueError`` naming the file for anything else.

    A document nested far deeper than any this format writes
    (:data:`~daskpd.model_file._codec.MAX_DEPTH`) makes the JSON parser recurse until Python's
    limit: refused as not JSON, like malformed text.
    """
    try:
        return json.loads(document)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: its document is not JSON ({exc})") from None
    except RecursionError:
        raise ValueError(
            f"{where}: its document is not one daskpd writes (nested far deeper than the "
            f"{_codec.MAX_DEPTH} levels a model may have)"
        ) from None


def _read_arrays(group, path, checksums, where) -> dict:
    """Every array of the group, its metadata checked before zarr parses it, then its values."""
    if not isinstance(checksums, dict):
        raise ValueError(f"{where}: its checksums are missing")
    names = set()
    for entry in sorted(path.iterdir()):
        if entry.is_dir():
            check_array_metadata(entry / "zarr.json", entry.name, where)
            names.add(entry.name)
    for name in sorted(set(checksums) - names):
        raise CorruptStoreError(f"{where}: array {name!r} is missing")
    for name in sorted(names - set(checksums)):
        raise CorruptStoreError(f"{where}: array {name!r} has no checksum")
    arrays = {}
    for name in sorted(names):
        try:
            array = group[name]
            # what zarr will decode with (a group's consolidated metadata could differ from
            # the array's own file)
            metadata = array.metadata.to_dict()
        except Exception as exc:  # zarr raises many types on bad metadata
            raise CorruptStoreError(f"{where}: array {name!r} cannot be opened ({exc})") from None
        _check_codecs(metadata, name, where)
        arrays[name] = read_array(array, name, checksums, f"{where}: ")
    return arrays


def check_array_metadata(metadata_path, name, where) -> None:
    """Refuse an array whose metadata is not a number or boolean array with known codecs.

    Read as JSON before zarr parses it (checkpoints use it for theirs).

    Parameters
    ----------
    metadata_path : Path
        The array's ``zarr.json``.
    name : str
        The array's name, for messages.
    where : str
        The file, for messages.

    Raises
    ------
    CorruptStoreError
        When the metadata is unreadable or not an array's.
    ValueError
        When the data type is not numeric or boolean, or a codec is not in
        :data:`ARRAY_CODECS`.
    """
    try:
        metadata = json.loads(metadata_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CorruptStoreError(
            f"{where}: array {name!r} has no readable metadata ({exc})"
        ) from None
    if not isinstance(metadata, dict) or metadata.get("node_type") != "array":
        raise CorruptStoreError(f"{where}: {name!r} is not an array")
    if metadata.get("data_type") not in _DATA_TYPES:
        raise ValueError(
            f"{where}: array {name!r} has data type {metadata.get('data_type')!r}, not a "
            "number or a boolean"
        )
    _check_codecs(metadata, name, where)


def _check_codecs(metadata, name, where) -> None:
    # A codec decides how chunk bytes become values: one outside the list (a pickle codec)
    # could run code from the file, so it is refused before a chunk is read.
    codecs = metadata.get("codecs")
    if not isinstance(codecs, list | tuple):
        raise CorruptStoreError(f"{where}: array {name!r} lists no codecs")
    found = [codec.get("name") if isinstance(codec, dict) else codec for codec in codecs]
    refused = [codec for codec in found if codec not in ARRAY_CODECS]
    if refused:
        raise ValueError(
            f"{where}: array {name!r} uses codecs {refused}; a model file may use only "
            f"{sorted(ARRAY_CODECS)}"
        )


def _json_attribute(attrs, name, where):
    try:
        return json.loads(attrs[name])
    except (KeyError, TypeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{where}: attribute {name!r} is unreadable ({exc!r})") from None


def _legacy_result(attrs, arrays, where) -> dict:
    """The content of a solve result of format_version 1 (named arrays, JSON attributes)."""
    if "w" not in arrays:
        raise CorruptStoreError(f"{where}: array 'w' is missing")
    options = _json_attribute(attrs, "options", where)
    try:
        return {
            "solver": str(attrs["solver"]),
            # JSON had turned the options' tuples into lists
            "options": {
                key: tuple(value) if isinstance(value, list) else value
                for key, value in options.items()
            },
            "objective": _json_attribute(attrs, "objective", where),
            "history": tuple(_json_attribute(attrs, "history", where)),
            "n_epochs": int(attrs["n_epochs"]),
            "gap": float(_json_attribute(attrs, "gap", where)),
            "converged": bool(attrs["converged"]),
            "stop_reason": str(attrs["stop_reason"]),
            "seed_entropy": int(attrs["seed_entropy"]),
            "recoveries": 0,
            "w": arrays["w"],
            "w_avg": arrays.get("w_avg"),
            "z": arrays.get("z"),
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{where}: its attributes are unreadable ({exc!r})") from None


def _legacy_estimator(attrs, parsed, arrays, where) -> dict:
    """The content of an estimator file of format_version 2 (``coef_`` was array 0)."""
    if not isinstance(parsed, dict) or not {"params", "state"} <= set(parsed) or not arrays:
        raise ValueError(f"{where}: its document is not an estimator's")
    state = _codec.decode(parsed["state"], arrays, "fitted attributes")
    if not isinstance(state, dict):
        raise ValueError(f"{where}: its document is not an estimator's")
    return {
        "estimator": attrs["estimator"],
        "params": _codec.decode(parsed["params"], arrays, "parameters"),
        "state": {**state, "coef_": arrays[0]},
    }
