"""The old name of :mod:`daskpd.data.atomic`'s file writer: the same object."""

from daskpd.data.atomic import write_text_atomic

__all__ = ["write_text_atomic"]
