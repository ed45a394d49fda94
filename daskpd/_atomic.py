"""Writing a file so that readers see the old content or the new one, never a part.

The text goes to a temporary name in the same directory (same file system, so the rename is
atomic) and replaces the target only when it is complete and flushed to disk.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


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
