"""Writing so that readers see the old content or the new one, never a part.

Everything goes to a temporary name on the same file system (so the rename is atomic) and
replaces the target only when it is complete: a file's text flushed to disk
(:func:`write_text_atomic`), a directory (a dataset, a grid, a stored layout) with every array
written (:func:`publish`). A killed writer leaves only its temporary name behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid


def write_text_atomic(path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename.

    Parameters
    ----------
    path : str or path-like
    text : str
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(
        dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    try:
        # mkstemp's file is private (0600); the result gets the mode a plain open would give
        # it, or the replaced file's own
        try:
            mode = os.stat(path).st_mode & 0o777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temporary, mode)
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        # nothing half-written stays behind under either name
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def temporary_sibling(path: str, tag: str = "tmp") -> str:
    """A fresh name ``<path>.<tag>-<uuid>`` next to ``path`` (same file system, so renames
    are atomic)."""
    return f"{path}.{tag}-{uuid.uuid4().hex}"


def remove_tree(path: str) -> None:
    """Remove a directory tree if it exists."""
    shutil.rmtree(path, ignore_errors=True)


def publish(temporary, path, overwrite):
    """Rename a complete temporary directory to ``path`` (replacing it only if allowed)."""
    if os.path.exists(path):
        if not overwrite:
            raise FileExistsError(
                f"{path} already exists; pass overwrite=True (--overwrite) to replace it"
            )
        # Move the old dataset aside first: both renames are atomic, so a reader sees the old
        # dataset, or no dataset for an instant, or the new one, never a mixture.
        old = temporary_sibling(path, "old")
        os.rename(path, old)
        os.rename(temporary, path)
        remove_tree(old)
    else:
        os.rename(temporary, path)
