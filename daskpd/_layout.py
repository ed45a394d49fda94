"""The old name of :mod:`daskpd.data.layout` (DSO's visit layout of a tile): the same objects."""

from daskpd.data.layout import (
    DEFAULT_LAYOUTS,
    LAYOUT_ARRAYS,
    LAYOUT_VERSION,
    MIN_CHUNKS,
    PACKED_COLUMN_BYTES,
    VISIT_ORDER,
    TileLayout,
    build_tile_layout,
    check_layouts,
    crc32,
    layout_group,
    open_tile_arrays,
    shuffled_layout,
    sub_block_columns,
    tile_arrays,
)

__all__ = [
    "DEFAULT_LAYOUTS",
    "LAYOUT_ARRAYS",
    "LAYOUT_VERSION",
    "MIN_CHUNKS",
    "PACKED_COLUMN_BYTES",
    "VISIT_ORDER",
    "TileLayout",
    "build_tile_layout",
    "check_layouts",
    "crc32",
    "layout_group",
    "open_tile_arrays",
    "shuffled_layout",
    "sub_block_columns",
    "tile_arrays",
]
