"""The old name of :mod:`daskpd.data.format` (with the URL helpers of :mod:`daskpd.data.store`
and the temporary names of :mod:`daskpd.data.atomic`): the same objects."""

from daskpd.data.atomic import remove_tree, temporary_sibling
from daskpd.data.format import (
    ARRAY_CONFIG,
    CHUNK_BYTES,
    CHUNK_KEYS,
    FORMAT_VERSION,
    Appender,
    DatasetIntegrityError,
    check_array,
    chunk_length,
    compressors,
    create_1d,
    create_dense,
    dense_chunks,
    expected_chunks,
    logical_crc32,
    manifest_entry,
    stored_files,
    write_small,
)
from daskpd.data.store import (
    is_url,
    open_group_readonly,
    remote_exists,
    remote_files,
    remote_filesystem,
    remote_stamp,
)

__all__ = [
    "ARRAY_CONFIG",
    "CHUNK_BYTES",
    "CHUNK_KEYS",
    "FORMAT_VERSION",
    "Appender",
    "DatasetIntegrityError",
    "check_array",
    "chunk_length",
    "compressors",
    "create_1d",
    "create_dense",
    "dense_chunks",
    "expected_chunks",
    "is_url",
    "logical_crc32",
    "manifest_entry",
    "open_group_readonly",
    "remote_exists",
    "remote_files",
    "remote_filesystem",
    "remote_stamp",
    "remove_tree",
    "stored_files",
    "temporary_sibling",
    "write_small",
]
