"""Ingestion of external formats (svmlight / libsvm text, DNA sequences) into the zarr format."""

from daskpd.io.sequences import (
    SequenceFormatError,
    WDOptions,
    encode,
    ingest_sequences,
    wd_transform,
)
from daskpd.io.svmlight import SvmlightFormatError, dump_svmlight, ingest_svmlight

__all__ = [
    "SequenceFormatError",
    "SvmlightFormatError",
    "WDOptions",
    "dump_svmlight",
    "encode",
    "ingest_sequences",
    "ingest_svmlight",
    "wd_transform",
]
