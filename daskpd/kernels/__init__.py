"""Every numba kernel of daskpd, and nothing else.

Kernels receive losses and regularizers as ``(code, params)`` pairs (an integer code and a
float64 parameter array), never as function objects, so the on-disk cache stays valid and
tasks stay picklable. Compilation options live in :mod:`daskpd.kernels._config`.
"""
