"""The old name of :mod:`daskpd.generators`, the synthetic data generators, kept for users' code."""

from daskpd.generators import *  # noqa: F403
from daskpd.generators import __all__  # noqa: F401
