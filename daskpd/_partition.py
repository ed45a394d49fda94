"""The old name of :mod:`daskpd.data.grid`: the same objects."""

from daskpd.data.grid import (
    TILE_ARRAYS,
    MemorySink,
    ZarrSink,
    balanced_bounds,
    build_grid,
    column_blocks,
    count_group,
    cumulative_chunks,
    grid_bounds,
    grid_info,
    pieces_by_group,
    place_group,
    row_pieces,
)

__all__ = [
    "TILE_ARRAYS",
    "MemorySink",
    "ZarrSink",
    "balanced_bounds",
    "build_grid",
    "column_blocks",
    "count_group",
    "cumulative_chunks",
    "grid_bounds",
    "grid_info",
    "pieces_by_group",
    "place_group",
    "row_pieces",
]
