"""Checkpoints of training runs, as zarr groups written atomically.

Every checkpoint is first written under a temporary sibling name and renamed into place only when
complete, so a reader (or a resumed run) never sees a half-written one: a crash during a
checkpoint leaves the previous checkpoint as the latest valid one, and the temporary
directory is removed by the next write.

Checkpoint directory layout (one run per directory)::

    <checkpoint_dir>/epoch-00000005.zarr     # group: arrays state/<name>; attrs below
    <checkpoint_dir>/epoch-00000006.zarr
    <checkpoint_dir>/epoch-00000007.zarr.tmp-<uuid>   # only while (or if killed while) writing

Attributes of a checkpoint: ``format`` ("daskpd-checkpoint"), ``format_version``, ``epoch``,
``seed`` (entropy as a decimal string, spawn key, pool size, children spawned), ``meta`` (a
JSON string: solver, options, objective, data identity, seconds, history, divergence
reference) and ``complete`` (set last).

Checkpoints are written through :func:`daskpd.data.atomic.atomic_group` (the temporary name
is ``epoch-00000007.zarr.tmp-<uuid>``) and store their arrays as model files do, with the
checksums of :mod:`daskpd.model_file`; saved models are model files (:mod:`daskpd.model_file`).
The run description ``meta`` is plain JSON, not the model files' tagged codec: a resumed run
compares it with its own, made JSON the same way (tuples as lists).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from daskpd import _sidefiles
from daskpd.data.atomic import atomic_group
from daskpd.model_file import CorruptStoreError, check_array_metadata, read_array, write_array

__all__ = [
    "Checkpoint",
    "CheckpointStore",
    "CorruptStoreError",
    "atomic_group",
    "options_to_dict",
]

CHECKPOINT_FORMAT = "daskpd-checkpoint"
FORMAT_VERSION = 1
_NAME = re.compile(r"^epoch-(\d{8})\.zarr$")


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
                name: write_array(state, name, np.asarray(array)) for name, array in arrays.items()
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
        # the debris of a killed write (older versions named it ".tmp-epoch-..."), whose
        # writer no longer holds its lock: another process writing here keeps its own
        _sidefiles.sweep_in(self.path, lambda name: ".tmp-" in name or ".old-" in name)

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
        where = f"checkpoint {str(path)!r}"
        arrays = {}
        if load_arrays:
            checksums = attrs.get("checksums", {})
            # a model file's rules (numbers only, no codec that builds objects), checked
            # before zarr parses an array: a checkpoint directory may come from elsewhere
            entries = sorted((path / "state").iterdir()) if (path / "state").is_dir() else []
            names = [entry.name for entry in entries if entry.is_dir()]
            for name in names:
                check_array_metadata(path / "state" / name / "zarr.json", name, where)
            state = group["state"]
            arrays = {
                name: read_array(state[name], name, checksums, f"{where}: ") for name in names
            }
        try:
            seed = dict(attrs["seed"])
            seed["entropy"] = int(seed["entropy"])
            epoch, meta = int(attrs["epoch"]), json.loads(attrs["meta"])
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"{where}: its attributes are unreadable ({exc!r})") from None
        return Checkpoint(path=path, epoch=epoch, arrays=arrays, meta=meta, seed_state=seed)


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
