"""Sphinx configuration of daskpd's documentation site.

Build it (``.ci/run`` does, warnings as errors)::

    python -m pip install -e ".[docs]"
    python -m sphinx -W -b html docs docs/_build/html

Pages are Markdown (myst-parser); the API reference is generated from the numpydoc docstrings
(autodoc + napoleon). RELIABILITY.md and BENCHMARKS.md stay at the top of the repository and
are included by ``reliability.md`` and ``benchmarks.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[1]
# the checkout's package, also when it is not the installed one
sys.path.insert(0, str(ROOT))

import daskpd  # noqa: E402

project = "daskpd"
author = "the daskpd developers"
copyright = "the daskpd developers"  # noqa: A001
release = version = daskpd.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# no stub pages: the API pages name every object themselves (autosummary makes the tables)
autosummary_generate = False

# Markdown: "#section" links resolve to headings (docs/deploy.md links to its "Data" section)
myst_heading_anchors = 3

# numpydoc docstrings
napoleon_google_docstring = False
napoleon_numpy_docstring = True
# "Attributes" as fields of their class, not a second description of a documented member
napoleon_use_ivar = True
# A type's words become cross-references, and the words of a shape ("of shape (n_samples,)")
# find several objects of that name (every dataset's ``n_samples``): the link goes to one of
# them, and the warning that there were several is not an error in these pages.
suppress_warnings = ["ref.python"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"

html_theme = "alabaster"
html_title = f"daskpd {release}"
html_theme_options = {"description": "Certified linear models out of core on Dask"}


class SolverOptions(SphinxDirective):
    """``solver-options`` (inside an ``eval-rst`` block): every registered solver's options
    class, found through the registry, so that the page follows the solvers wherever their
    code lives."""

    has_content = False

    def run(self):
        from daskpd.solvers import available_solvers, get_solver

        lines = []
        for name in available_solvers():
            options = get_solver(name).Options
            lines += [
                f'.. rubric:: ``solver="{name}"``: ``{options.__qualname__}``',
                "",
                f".. autoclass:: {_public_path(options)}",
                "",
            ]
        return self.parse_text_to_nodes("\n".join(lines))


def _public_path(cls) -> str:
    """``cls``'s dotted path, through the solver's package when it exports the class
    (``daskpd.solvers.cocoa.CocoaOptions``, not ``daskpd.solvers.cocoa._options...``)."""
    import importlib

    package = ".".join(cls.__module__.split(".")[:3])
    head, _, rest = cls.__qualname__.partition(".")
    found = getattr(importlib.import_module(package), head, None)
    if found is not None and (found is cls or rest):
        return f"{package}.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _room(module: str) -> str:
    """The room of a module: ``daskpd.<x>``; inside the solvers a method's package
    (``daskpd.solvers.<method>``) or a module of the driver or of the shared pieces
    (``daskpd.solvers.driver.<x>``, ``daskpd.solvers.common.<x>``)."""
    parts = module.split(".")
    if parts[1:2] != ["solvers"] or len(parts) < 3:
        return ".".join(parts[:2])
    if parts[2] in ("driver", "common") and len(parts) > 3:
        return ".".join(parts[:4])
    return ".".join(parts[:3])


def room_graph() -> dict:
    """Room -> the rooms it imports, from the walk of ``tests/solvers/test_layering.py`` (every
    import, at module level or inside a function)."""
    import importlib.util

    # wherever the tests' folders put it
    (path,) = ROOT.glob("tests/**/test_layering.py")
    spec = importlib.util.spec_from_file_location("_layering_walk", path)
    walk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(walk)
    rooms: dict = {}
    for module, targets in walk._graph().items():
        imports = rooms.setdefault(_room(module), set())
        imports.update(_room(target) for target in targets)
    return {room: imports - {room} for room, imports in rooms.items()}


def floors(graph: dict) -> dict:
    """A room's floor: 0 when it imports no other room, else one above the highest it
    imports (the graph has no cycle: test_layering)."""
    found: dict = {}

    def floor(room):
        if room not in found:
            found[room] = 1 + max((floor(t) for t in graph[room]), default=-1)
        return found[room]

    for room in graph:
        floor(room)
    return found


class RoomImports(SphinxDirective):
    """``room-imports`` (inside an ``eval-rst`` block): the rooms of the package by floor and
    what each imports today, computed at build time."""

    has_content = False

    def run(self):
        graph = room_graph()
        floor = floors(graph)
        arrows = sum(len(targets) for targets in graph.values())

        def short(room):
            return room.removeprefix("daskpd.") if room != "daskpd" else "daskpd (root)"

        lines = [
            f".. list-table:: {len(graph)} rooms on {max(floor.values()) + 1} floors, "
            f"{arrows} arrows (computed when this page was built)",
            "   :header-rows: 1",
            "   :widths: 8 30 62",
            "",
            "   * - floor",
            "     - room",
            "     - imports",
        ]
        for room in sorted(graph, key=lambda room: (-floor[room], room)):
            imports = ", ".join(f"``{short(t)}``" for t in sorted(graph[room])) or "(none)"
            lines += [f"   * - {floor[room]}", f"     - ``{short(room)}``", f"     - {imports}"]
        return self.parse_text_to_nodes("\n".join(lines))


def setup(app):
    app.add_directive("solver-options", SolverOptions)
    app.add_directive("room-imports", RoomImports)
