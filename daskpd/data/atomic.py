"""Writing so that readers see the old content or the new one, never a part.

This module is the one place of daskpd that writes to a temporary name and renames into
place. Everything goes to a temporary name on the same file system (so the rename is atomic)
and replaces the target only when it is complete:

- a file: :func:`atomic_file` (a path to write to), :func:`write_text_atomic` (a text);
- a directory: :func:`atomic_directory` (a path), :func:`atomic_group` (a zarr group), or,
  for writers whose temporary directory outlives one ``with`` block (the dataset writer, the
  grids and layouts written by tasks on workers), :func:`temporary_sibling` +
  :func:`publish` + :func:`remove_tree`.

Users: datasets, grids and layouts (:mod:`daskpd.data.writer`, :mod:`daskpd.data.partition`),
checkpoints (:mod:`daskpd.checkpoint`), model files (:mod:`daskpd.model_file`), the
``predict`` command's scores, the benchmark results and the peers' input files. A killed
writer leaves only its temporary name behind, which no reader opens. The ``<path>.tmp-*``
and ``<path>.old-*`` names of :func:`claimed_sibling` carry a lock their writer holds
(:mod:`daskpd._sidefiles`): the next write to ``path`` removes those whose writer is dead.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid

import zarr

from daskpd import _sidefiles


@contextlib.contextmanager
def atomic_file(path):
    """Yield a temporary path to write; it replaces ``path`` when the block ends normally.

    The file is flushed to disk before the rename; on an exception it is removed and
    ``path`` is left as it was. The new file gets the mode a plain ``open`` would give it, or
    the replaced file's own.

    Parameters
    ----------
    path : str or path-like
        Final location (an existing file there is replaced).

    Yields
    ------
    str
        The temporary file (created empty, in the directory of ``path``).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(
        dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    os.close(handle)
    try:
        # mkstemp's file is private (0600)
        try:
            mode = os.stat(path).st_mode & 0o777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temporary, mode)
        yield temporary
        _fsync(temporary)
        os.replace(temporary, path)
        _fsync(directory)
    except BaseException:
        # nothing half-written stays behind under either name
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def write_text_atomic(path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (:func:`atomic_file`).

    Parameters
    ----------
    path : str or path-like
    text : str
    """
    with atomic_file(path) as temporary, open(temporary, "w") as stream:
        stream.write(text)


def temporary_sibling(path: str, tag: str = "tmp") -> str:
    """A fresh name ``<path>.<tag>-<uuid>`` next to ``path`` (same file system, so renames
    are atomic)."""
    return f"{os.fspath(path)}.{tag}-{uuid.uuid4().hex}"


def claimed_sibling(path, tag: str = "tmp") -> str:
    """A fresh name ``<path>.<tag>-<uuid>`` (:func:`temporary_sibling`), locked for this
    process until :func:`remove_tree` or :func:`publish` lets it go; the dead writers'
    leftovers beside ``path`` are removed first (:func:`daskpd._sidefiles.sweep`)."""
    _sidefiles.sweep(path)
    name = temporary_sibling(path, tag)
    _sidefiles.claim(name)
    return name


def remove_tree(path: str) -> None:
    """Remove a directory tree (or a file) if it exists, and let go of this process's lock
    on the name (:func:`claimed_sibling`)."""
    _sidefiles.remove(path)


def publish(temporary, path, overwrite):
    """Rename a complete temporary directory to ``path`` (replacing it only if allowed).

    Parameters
    ----------
    temporary : str or path-like
        The complete directory, on the file system of ``path``.
    path : str or path-like
        Final location.
    overwrite : bool
        Replace an existing ``path``; otherwise an existing path is a ``FileExistsError``.
    """
    temporary, path = os.fspath(temporary), os.fspath(path)
    if os.path.exists(path):
        if not overwrite:
            raise FileExistsError(
                f"{path} already exists; pass overwrite=True (--overwrite) to replace it"
            )
        # rename() cannot replace a non-empty directory. Moving the old one aside first keeps
        # both renames atomic: a reader sees the old content, or nothing for an instant, or
        # the new content, never a mixture.
        old = claimed_sibling(path, "old")
        try:
            os.rename(path, old)
        except BaseException:
            _sidefiles.release(old)
            raise
        try:
            os.rename(temporary, path)
        except BaseException:
            os.rename(old, path)
            _sidefiles.release(old)
            raise
        remove_tree(old)
    else:
        os.rename(temporary, path)
    _sidefiles.release(temporary)
    _fsync(os.path.dirname(os.path.abspath(path)))


@contextlib.contextmanager
def atomic_directory(path, *, overwrite=False):
    """Yield a temporary directory name that is renamed to ``path`` when the block ends.

    Parameters
    ----------
    path : str or path-like
        Final location; its parent directory must exist.
    overwrite : bool, default=False
        Replace an existing ``path``; otherwise an existing path is a ``FileExistsError``,
        raised before anything is written.

    Yields
    ------
    str
        ``<path>.tmp-<uuid>``, not yet created. On an exception it is removed and ``path``
        is left as it was.
    """
    path = os.fspath(path)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(
            f"{path} already exists; pass overwrite=True (--overwrite) to replace it"
        )
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"directory {parent} does not exist")
    temporary = claimed_sibling(path)
    try:
        yield temporary
        publish(temporary, path, overwrite)
    except BaseException:
        remove_tree(temporary)
        raise


@contextlib.contextmanager
def atomic_group(path, *, overwrite=False):
    """Yield a zarr v3 group written at a temporary name and renamed to ``path`` on success.

    Parameters
    ----------
    path : str or path-like
        Final location of the group (a directory store); its parent must exist.
    overwrite : bool, default=False
        Replace an existing ``path``; otherwise an existing path is a ``FileExistsError``,
        raised before anything is written.

    Yields
    ------
    zarr.Group
        Open for writing at the temporary location (:func:`atomic_directory`).
    """
    with atomic_directory(path, overwrite=overwrite) as temporary:
        yield zarr.open_group(store=temporary, mode="w-", zarr_format=3)


def _fsync(path) -> None:
    """Flush a file's or a directory's entry to disk, where the file system allows it."""
    try:
        handle = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)
