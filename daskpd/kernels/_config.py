"""The one place where numba compilation options are set.

Every kernel in :mod:`daskpd.kernels` is compiled with :func:`njit` from this module so that
caching, GIL release and floating-point strictness are uniform. ``fastmath`` stays off: the
DSO serializability test compares a parallel epoch with a serial replay bit for bit, and
fastmath would let LLVM reassociate sums differently in different call sites.
"""

from __future__ import annotations

import numba

#: Options shared by every kernel. ``cache=True`` keeps compiled code on disk so worker
#: processes do not recompile; ``nogil=True`` lets Dask's threaded workers run kernels in
#: parallel; ``fastmath=False`` keeps results bit-reproducible.
JIT_OPTIONS = {"cache": True, "nogil": True, "fastmath": False}


def njit(*args, **kwargs):
    """Compile a kernel with the project-wide options (see :data:`JIT_OPTIONS`).

    Used exactly like :func:`numba.njit`, with or without an explicit signature.
    """
    options = {**JIT_OPTIONS, **kwargs}
    if args and callable(args[0]) and not kwargs:
        return numba.njit(**options)(args[0])
    return numba.njit(*args, **options)
