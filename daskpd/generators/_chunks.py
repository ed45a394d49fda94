"""What every generator shares: its chunks as Dask tasks, their parts assembled, the planted model.

Each chunk of ``chunk_rows`` rows is one task with its own seed; the task saves its rows as a
part on disk and one task then appends the parts in order (:mod:`daskpd.io._parts`).
"""

from __future__ import annotations

import os
import shutil
from typing import NamedTuple

import numpy as np
import zarr

from daskpd._graphs import TaskGraph
from daskpd.data import open_dataset
from daskpd.io import _parts

#: Target stored entries per generated chunk (about 50 MB of CSR in float64).
CHUNK_NNZ = 2**22


class Generated(NamedTuple):
    """A generated dataset and its planted model.

    Attributes
    ----------
    dataset : daskpd.data.Dataset
    coef : ndarray of shape (n_features,) or None
        Planted coefficients.
    U : zarr.Array of shape (n_samples, rank) or None
        Left factor (:func:`make_factorized`), on disk.
    V : ndarray of shape (rank, n_features) or None
        Right factor (:func:`make_factorized`).
    """

    dataset: object
    coef: np.ndarray | None = None
    U: object = None
    V: np.ndarray | None = None


def planted_path(dest) -> str:
    """Path of the zarr group that holds the planted model of the dataset at ``dest``."""
    return os.fspath(dest).rstrip(os.sep) + ".planted"


def _check_common(dest, n_samples, chunk_rows, overwrite, positive_rate=None):
    n_samples = int(n_samples)
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    if positive_rate is not None and not 0.0 < float(positive_rate) < 1.0:
        raise ValueError(f"positive_rate must be in (0, 1), got {positive_rate}")
    if chunk_rows is not None and int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    for path in (os.fspath(dest),):
        if os.path.lexists(path) and not overwrite:
            raise FileExistsError(
                f"destination {path} exists; pass overwrite=True (--overwrite) to replace it"
            )
    return n_samples


def _chunk_bounds(n_samples, chunk_rows):
    n_chunks = -(-n_samples // chunk_rows)
    return [(c * chunk_rows, min(n_samples, (c + 1) * chunk_rows)) for c in range(n_chunks)]


def _generate(dest, n_samples, chunk_rows, chunk_function, params, seeds, *, n_features, binary,
              dtype, task, layout, overwrite, client, writer_options, planted_u=None):  # fmt: skip
    """Run ``chunk_function`` per chunk as Dask tasks, then assemble the parts at ``dest``."""
    bounds = _chunk_bounds(n_samples, chunk_rows)
    parts_dir = _parts.new_parts_dir(dest)
    completed = False
    # One graph node for the model every chunk reads: passed inline, a cluster ships a
    # copy with each task (the text-like vocabulary is 25 MB, 120 chunks at 5e8 nonzeros).
    graph = TaskGraph("daskpd-generate")
    shared = graph.data("params", params)
    try:
        tasks = [
            graph.task(
                c,
                _run_chunk,
                chunk_function,
                shared,
                start,
                stop,
                seeds[1 + c],
                parts_dir,
                c,
                planted_u,
            )  # fmt: skip
            for c, (start, stop) in enumerate(bounds)
        ]
        infos = _parts.run_tasks(graph, tasks, client)
        options = dict(writer_options or {})
        if layout == "dense":
            options["layout"] = "dense"
        _parts.run_one(
            _parts.assemble,
            infos,
            os.fspath(dest),
            n_features=n_features,
            dtype=dtype,
            binary=binary,
            task=task,
            overwrite=overwrite,
            writer_options=options,
            client=client,
        )
        completed = True
    finally:
        _parts.remove_parts_dir(parts_dir)
        if not completed:
            # a failed generation leaves neither the dataset nor its planted model behind
            _parts.remove_parts_dir(planted_path(dest))
    return open_dataset(dest)


def _run_chunk(chunk_function, params, start, stop, seed, parts_dir, chunk_id, planted_u):
    """Dask task: draw one chunk of rows and save it as a part."""
    rng = np.random.default_rng(seed)
    result = chunk_function(params, stop - start, rng)
    name = f"c{chunk_id:09d}"
    if "U" in result and planted_u is not None:
        # chunk-aligned region of a preallocated array: tasks never write the same zarr chunk
        zarr.open_array(planted_u, mode="r+")[start:stop] = result["U"]
    if "dense" in result:
        return _parts.save_part(parts_dir, name, result["y"], dense=result["dense"])
    return _parts.save_part(
        parts_dir,
        name,
        result["y"],
        indptr=result["indptr"],
        indices=result["indices"],
        data=result.get("data"),
    )


def _write_planted(dest, overwrite, arrays, attrs):
    """Write the planted-model group; return its path."""
    path = planted_path(dest)
    if os.path.lexists(path):
        if not overwrite:
            raise FileExistsError(f"{path} exists; pass overwrite=True (--overwrite) to replace it")
        shutil.rmtree(path)
    group = zarr.open_group(path, mode="w-", zarr_format=3)
    group.attrs.update(attrs)
    for name, value in arrays.items():
        group.create_array(name, data=value)
    return path


def _planted_coef(rng, n_features, n_informative):
    coef = np.zeros(n_features)
    if n_informative is None or n_informative >= n_features:
        coef[:] = rng.standard_normal(n_features)
    else:
        support = np.sort(rng.choice(n_features, size=int(n_informative), replace=False))
        coef[support] = rng.standard_normal(len(support))
    return coef
