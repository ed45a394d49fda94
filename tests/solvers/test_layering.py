"""The package's import graph: no cycles, counting imports inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

import daskpd

PACKAGE = Path(daskpd.__file__).parent


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path, name, modules):
    """The daskpd modules that ``path`` imports anywhere (module level or in a function)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # "from package import module" imports the module; "from module import name",
            # the module (a package's __init__ runs for any of its modules: not an edge)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target != name:
                found.add(target)
    return found


def _graph():
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: _imports(path, name, paths) for name, path in paths.items()}


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return stack[stack.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_walk_sees_the_imports():
    graph = _graph()
    assert len(graph) > 40
    # module-level, function-level and relative imports all count
    assert "daskpd.kernels.cocoa" in graph["daskpd.solvers.cocoa._solver"]
    assert "daskpd.solvers.cocoa._solver" in graph["daskpd.solvers.cocoa"]
    assert "daskpd.checkpoint" in graph["daskpd.solvers.driver.plan"]
    assert "daskpd.solvers.driver.registry" in graph["daskpd.solvers.spdc._solver"]
    assert "daskpd.data.memory" in graph["daskpd.data.conversion"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycles():
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


SOLVERS = "daskpd.solvers"
#: What a method, and what the pieces methods share, may import from the driver.
DRIVER_FOR_METHODS = {f"{SOLVERS}.driver.{name}" for name in ("types", "registry", "seeds")}


def _room(module):
    """``driver``, ``common``, a method's package name, or None outside daskpd.solvers."""
    parts = module.split(".")
    if parts[:2] != ["daskpd", "solvers"] or len(parts) < 3:
        return None
    return parts[2]


def _solver_rooms(graph):
    return {_room(name) for name in graph} - {None, "driver", "common"}


def _wrong_imports(graph):
    """The imports that leave a solver room the wrong way, each with the rule it breaks."""
    methods = _solver_rooms(graph)
    wrong = []
    for name, targets in sorted(graph.items()):
        room = _room(name)
        if room is None:
            continue
        for target in sorted(targets):
            other = _room(target)
            if other is None or other == room or (other == "common" and room != "driver"):
                continue
            if room == "driver" and other in methods:
                wrong.append(f"{name} -> {target} (the driver imports no method)")
            elif room != "driver" and other == "driver" and target not in DRIVER_FOR_METHODS:
                wrong.append(f"{name} -> {target} (a method or common/ imports only "
                             "driver.types, driver.registry and driver.seeds)")  # fmt: skip
            elif room != "driver" and other in methods:
                wrong.append(f"{name} -> {target} (a method imports no other method)")
    return wrong


def test_the_rooms_of_the_solvers():
    graph = _graph()
    assert {"batch", "cocoa", "dso", "dspdc", "gsfw", "pdprox", "spdc", "tron"} <= _solver_rooms(
        graph
    )
    wrong = _wrong_imports(graph)
    assert not wrong, "\n".join(wrong)


def test_the_rooms_test_sees_a_wrong_import():
    graph = {
        "daskpd.solvers.driver.plan": {"daskpd.solvers.cocoa._solver"},
        "daskpd.solvers.spdc._solver": {
            "daskpd.solvers.driver.run",
            "daskpd.solvers.driver.types",
            "daskpd.solvers.common.chain",
        },
        "daskpd.solvers.dspdc._solver": {"daskpd.solvers.spdc._solver"},
        "daskpd.solvers.common.chain": {"daskpd.solvers.driver.seeds"},
        "daskpd.solvers.cocoa._solver": set(),
    }
    wrong = _wrong_imports(graph)
    assert len(wrong) == 3, wrong
    assert "driver.plan -> daskpd.solvers.cocoa._solver (the driver imports no method)" in wrong[0]
    assert "(a method imports no other method)" in wrong[1]
    assert "spdc._solver -> daskpd.solvers.driver.run" in wrong[2]


def test_the_path_sits_above_the_solvers():
    """``daskpd.path`` (the regularization path) calls ``solve``; nothing below it imports it."""
    graph = _graph()
    assert any(target.startswith(SOLVERS) for target in graph["daskpd.path"])
    below = ("daskpd.solvers", "daskpd.problem", "daskpd.data", "daskpd.kernels", "daskpd.losses")
    wrong = [name for name, targets in graph.items()
             if name.startswith(below) and "daskpd.path" in targets]  # fmt: skip
    assert not wrong, wrong
