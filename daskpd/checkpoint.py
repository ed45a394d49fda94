"""Checkpoints of training runs and saved models, as zarr groups written atomically.

Every group is first written under a temporary sibling name and renamed into place only when
complete, so a reader (or a resumed run) never sees a half-written one: a crash during a
checkpoint leaves the previous checkpoint as the latest valid one, and the temporary
directory is removed by the next write.

Checkpoint directory layout (one run per directory)::

    <checkpoint_dir>/epoch-00000005.zarr     # group: arrays state/<name>; attrs below
    <checkpoint_dir>/epoch-00000006.zarr
    <checkpoint_dir>/.tmp-epoch-00000007-<uuid>   # only while (or if killed while) writing

Attributes of a checkpoint: ``format`` ("daskpd-checkpoint"), ``format_version``, ``epoch``,
``seed`` (entropy as a decimal string, spawn key, pool size, children spawned), ``meta`` (a
JSON string: solver, options, objective, data identity, seconds, history, divergence
reference) and ``complete`` (set last).

A model group holds arrays ``w`` (and ``w_avg``, ``z`` when they are plain arrays) and the
attributes of a :class:`daskpd.solvers._driver.SolveResult`, so models too large for pickle
save and load without ever being pickled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "Checkpoint",
    "CheckpointStore",
    "CorruptStoreError",
    "atomic_group",
    "options_to_dict",
    "read_model",
    "save_model",
]

CHECKPOINT_FORMAT = "daskpd-checkpoint"
MODEL_FORMAT = "daskpd-model"
FORMAT_VERSION = 1
_NAME = re.compile(r"^epoch-(\d{8})\.zarr$")
#: Arrays are chunked so that no chunk is far above ~16 MB of float64.
_CHUNK = 2_000_000


@contextlib.contextmanager
def atomic_group(path, *, overwrite=False):
    """Yield a zarr group written under a temporary name and renamed to ``path`` on success.

    Parameters
    ----------
    path : str or Path
        Final location of the group (a directory store).
    overwrite : bool, default=False
        Replace an existing ``path``; otherwise an existing path is a ``FileExistsError``
        raised before anything is written.

    Yields
    ------
    zarr.Group
        Open for writing at the temporary location. On an exception the temporary
        directory is removed and ``path`` is left untouched.
    """
    import zarr

    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{str(path)!r} already exists (use overwrite to replace it)")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"directory {str(path.parent)!r} does not exist")
    tmp = path.parent / f".tmp-{path.name}-{uuid.uuid4().hex}"
    try:
        group = zarr.open_group(store=str(tmp), mode="w")
        yield group
        _replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace(tmp: Path, path: Path) -> None:
    # rename() of a directory cannot replace a non-empty one: move the old one aside first,
    # so that at every instant either the old or the new complete group is at ``path``
    # (apart from the instant between the two renames).
    if path.exists():
        old = path.parent / f".old-{path.name}-{uuid.uuid4().hex}"
        os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, path)
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _checksum(array: np.ndarray) -> str:
    """CRC-32 of the array's bytes with its dtype and shape (detects altered chunk files)."""
    header = f"{array.dtype.str}{array.shape}".encode()
    return f"{zlib.crc32(np.ascontiguousarray(array).tobytes(), zlib.crc32(header)):08x}"


def _write_array(group, name, array) -> str:
    """Write ``array`` as ``group[name]``; return its checksum."""
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
    return _checksum(array)


def _read_array(array, name=None, checksums=None, where=""):
    """Read a zarr array fully; verify it against ``checksums[name]`` when given."""
    try:
        value = np.asarray(array[()] if array.ndim == 0 else array[...])
    except Exception as exc:  # codecs raise many types on damaged chunks
        raise CorruptStoreError(f"{where}array {name!r} cannot be read ({exc})") from None
    if checksums is not None and name in checksums and _checksum(value) != checksums[name]:
        raise CorruptStoreError(f"{where}array {name!r} does not match its checksum")
    return value


class CorruptStoreError(ValueError):
    """A checkpoint or model array was truncated or altered after it was written."""


# --------------------------------------------------------------------------------------------
# checkpoints


@dataclass(frozen=True)
class Checkpoint:
    """One complete checkpoint read back from disk.

    Attributes
    ----------
    path : Path
    epoch : int
        Epochs done when it was written.
    arrays : dict of str to ndarray
        The solver's ``state_arrays``.
    meta : dict
        Solver, options, objective, data identity, seconds, history, divergence reference.
    seed_state : dict
        Entropy (int), spawn_key, pool_size and n_children_spawned of the root seed.
    """

    path: Path
    epoch: int
    arrays: dict
    meta: dict
    seed_state: dict

    def seed(self) -> np.random.SeedSequence:
        """Return the run's root ``SeedSequence`` as it was when the checkpoint was written."""
        return np.random.SeedSequence(
            self.seed_state["entropy"],
            spawn_key=tuple(self.seed_state["spawn_key"]),
            pool_size=self.seed_state["pool_size"],
            n_children_spawned=self.seed_state["n_children_spawned"],
        )

    def check_compatible(self, run_meta: dict) -> None:
        """Raise ``ValueError`` when this checkpoint belongs to a different run.

        Compares the solver, its options, the objective and the data shape / nnz.

        Parameters
        ----------
        run_meta : dict
            ``solver``, ``options``, ``objective``, ``data`` of the run that wants to resume.
        """
        differences = []
        for key in ("solver", "options", "objective"):
            saved, now = self.meta.get(key), _json_roundtrip(run_meta.get(key))
            if isinstance(saved, dict) and isinstance(now, dict):
                for name in sorted(set(saved) | set(now)):
                    if saved.get(name) != now.get(name):
                        differences.append(
                            f"{key}.{name}: checkpoint {saved.get(name)!r}, now {now.get(name)!r}"
                        )
            elif saved != now:
                differences.append(f"{key}: checkpoint {saved!r}, now {now!r}")
        saved_data, now_data = self.meta.get("data", {}), _json_roundtrip(run_meta.get("data"))
        for name in ("shape", "nnz"):
            if saved_data.get(name) != now_data.get(name):
                differences.append(
                    f"data {name}: checkpoint {saved_data.get(name)!r}, now {now_data.get(name)!r}"
                )
        if differences:
            raise ValueError(
                f"cannot resume from {str(self.path)!r}: it belongs to a different run ("
                + "; ".join(differences)
                + ")"
            )


def _json_roundtrip(value):
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple | set):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class CheckpointStore:
    """The checkpoints of one run, in one directory.

    Parameters
    ----------
    path : str or Path
        Directory (created when missing; its parent must exist).
    keep : int, default=2
        Complete checkpoints kept; older ones are deleted after each successful write.
    """

    def __init__(self, path, *, keep=2):
        self.path = Path(path)
        if int(keep) < 1:
            raise ValueError(f"keep must be >= 1, got {keep!r}")
        self.keep = int(keep)
        if self.path.exists() and not self.path.is_dir():
            raise NotADirectoryError(f"checkpoint_dir {str(self.path)!r} is not a directory")
        if not self.path.parent.is_dir():
            raise FileNotFoundError(
                f"cannot create checkpoint_dir {str(self.path)!r}: its parent does not exist"
            )
        self.path.mkdir(exist_ok=True)

    def _epochs(self) -> list[int]:
        found = []
        for entry in self.path.iterdir():
            match = _NAME.match(entry.name)
            if match and (entry / "zarr.json").is_file():
                found.append(int(match.group(1)))
        return sorted(found)

    def _name(self, epoch: int) -> Path:
        return self.path / f"epoch-{epoch:08d}.zarr"

    def save(self, epoch: int, arrays: dict, *, seed: np.random.SeedSequence, meta: dict) -> Path:
        """Write a checkpoint atomically and prune old ones.

        Parameters
        ----------
        epoch : int
            Epochs done.
        arrays : dict of str to ndarray
            Solver state (names must be valid zarr array names).
        seed : numpy.random.SeedSequence
            Root seed of the run.
        meta : dict
            JSON-compatible run description (NaN allowed).

        Returns
        -------
        Path
            Location of the new checkpoint.
        """
        self._remove_temporaries()
        target = self._name(int(epoch))
        with atomic_group(target, overwrite=True) as group:
            state = group.create_group("state")
            checksums = {
                name: _write_array(state, name, np.asarray(array)) for name, array in arrays.items()
            }
            group.attrs.update(
                {
                    "format": CHECKPOINT_FORMAT,
                    "format_version": FORMAT_VERSION,
                    "epoch": int(epoch),
                    "seed": {
                        "entropy": str(seed.entropy),
                        "spawn_key": [int(k) for k in seed.spawn_key],
                        "pool_size": int(seed.pool_size),
                        "n_children_spawned": int(seed.n_children_spawned),
                    },
                    "meta": json.dumps(meta, default=_json_default),
                    "checksums": checksums,
                }
            )
            # Written last: a group without it was interrupted (possible on stores where the
            # rename is not atomic) and is never read.
            group.attrs["complete"] = True
        for old in self._epochs()[: -self.keep]:
            shutil.rmtree(self._name(old), ignore_errors=True)
        return target

    def _remove_temporaries(self) -> None:
        for entry in self.path.iterdir():
            if entry.name.startswith((".tmp-", ".old-")):
                shutil.rmtree(entry, ignore_errors=True)

    def latest_epoch(self) -> int | None:
        """Return the epoch of the latest complete checkpoint, or ``None``."""
        checkpoint = self.latest(load_arrays=False)
        return None if checkpoint is None else checkpoint.epoch

    def latest(self, *, load_arrays=True) -> Checkpoint | None:
        """Return the latest complete checkpoint, or ``None`` when there is none.

        Parameters
        ----------
        load_arrays : bool, default=True
            Read the state arrays (otherwise ``arrays`` is empty).

        Returns
        -------
        Checkpoint or None
            Checkpoints whose arrays fail their checksum are skipped (the previous one is
            returned).
        """
        for epoch in reversed(self._epochs()):
            try:
                checkpoint = self._read(self._name(epoch), load_arrays)
            except CorruptStoreError:
                # A damaged checkpoint is passed over: the previous one is still valid.
                continue
            if checkpoint is not None:
                return checkpoint
        return None

    def _read(self, path: Path, load_arrays: bool) -> Checkpoint | None:
        import zarr

        try:
            group = zarr.open_group(store=str(path), mode="r")
            attrs = dict(group.attrs)
        except (OSError, ValueError, KeyError):
            return None
        if attrs.get("format") != CHECKPOINT_FORMAT or not attrs.get("complete"):
            return None
        if int(attrs.get("format_version", 0)) > FORMAT_VERSION:
            raise ValueError(
                f"checkpoint {str(path)!r} has format_version {attrs['format_version']}, newer "
                f"than this daskpd understands ({FORMAT_VERSION})"
            )
        arrays = {}
        if load_arrays:
            state = group["state"]
            checksums = attrs.get("checksums", {})
            arrays = {
                name: _read_array(state[name], name, checksums, f"checkpoint {str(path)!r}: ")
                for name in state.array_keys()
            }
        seed = dict(attrs["seed"])
        seed["entropy"] = int(seed["entropy"])
        return Checkpoint(
            path=path,
            epoch=int(attrs["epoch"]),
            arrays=arrays,
            meta=json.loads(attrs["meta"]),
            seed_state=seed,
        )


# --------------------------------------------------------------------------------------------
# models


def save_model(result, path, *, overwrite=False) -> Path:
    """Save a :class:`~daskpd.solvers._driver.SolveResult` to a zarr group, atomically.

    Arrays (``w``, and ``w_avg`` / ``z`` when they are in-memory arrays) are chunked zarr
    arrays, so the model never goes through pickle; everything else is JSON attributes.

    Parameters
    ----------
    result : SolveResult
    path : str or Path
        Destination directory store (e.g. ``model.zarr``).
    overwrite : bool, default=False
        Replace an existing model at ``path``.

    Returns
    -------
    Path
    """
    options = result.options
    options_dict = options_to_dict(options) if hasattr(options, "__dataclass_fields__") else {}
    path = Path(path)
    with atomic_group(path, overwrite=overwrite) as group:
        checksums = {"w": _write_array(group, "w", np.asarray(result.w, dtype=np.float64))}
        if isinstance(result.w_avg, np.ndarray):
            checksums["w_avg"] = _write_array(group, "w_avg", result.w_avg)
        if isinstance(result.z, np.ndarray):
            checksums["z"] = _write_array(group, "z", result.z)
        group.attrs.update(
            {
                "format": MODEL_FORMAT,
                "format_version": FORMAT_VERSION,
                "solver": result.solver,
                "options": json.dumps(options_dict, default=_json_default),
                "objective": json.dumps(result.objective, default=_json_default),
                "history": json.dumps(list(result.history), default=_json_default),
                "n_epochs": int(result.n_epochs),
                "gap": json.dumps(float(result.gap)),
                "converged": bool(result.converged),
                "stop_reason": result.stop_reason,
                "seed_entropy": str(result.seed_entropy),
                "checksums": checksums,
            }
        )
    return path


def read_model(path):
    """Open a model saved by :func:`save_model`: its attributes and a reader of its arrays.

    The :class:`~daskpd.solvers._driver.SolveResult` is built by
    :func:`daskpd.solvers._driver.load_model` (``daskpd.load_model``), one layer up.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    attrs : dict
        The group's JSON attributes.
    read : callable
        ``read(name)``: the array ``name`` verified against its checksum, or None when the
        model has no such array.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When ``path`` is not a daskpd model.
    CorruptStoreError
        When ``w`` is missing, or an array is unreadable or fails its checksum.
    """
    import zarr

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no model at {str(path)!r}")
    try:
        group = zarr.open_group(store=str(path), mode="r")
        attrs = dict(group.attrs)
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{str(path)!r} is not a daskpd model ({exc})") from None
    if attrs.get("format") != MODEL_FORMAT:
        raise ValueError(f"{str(path)!r} is not a daskpd model (format {attrs.get('format')!r})")
    arrays = set(group.array_keys())
    checksums = attrs.get("checksums", {})
    where = f"model {str(path)!r}: "

    def read(name):
        return _read_array(group[name], name, checksums, where) if name in arrays else None

    if "w" not in arrays:
        raise CorruptStoreError(f"{where}array 'w' is missing")
    return attrs, read


def options_to_dict(options) -> dict:
    """Return a solver's options dataclass as a JSON-compatible dict (tuples become lists)."""
    out = {}
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if isinstance(value, np.generic):
            value = value.item()
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out
