"""trace-report's layering: its modules import one way (no cycles, the data model and the file source below
everything that reads them)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import trace_report

TRACES = Path(__file__).resolve().parent.parent
PACKAGE = "trace_report"
# What the readers stand on: none of these imports a module of trace_report outside this set.
FOUNDATION = {"model", "source", "timeline", "kernels", "errors"}  # and every module of the kernels package


def traces_imports() -> dict[str, set[str]]:
    """Module of trace_report (`model`, `kernels.name`, ...) -> the modules of trace_report it imports."""
    modules = {
        ".".join(path.relative_to(TRACES).with_suffix("").parts).removesuffix(".__init__").removesuffix("__init__"): path
        for path in TRACES.rglob("*.py") if "tests" not in path.relative_to(TRACES).parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
                base = node.module.removeprefix(PACKAGE).lstrip(".")
                for alias in node.names:
                    inner = f"{base}.{alias.name}".lstrip(".")
                    found.add(inner if inner in modules else base)
        graph[name] = found - {name}
    return graph


def test_traces_imports_go_one_way():
    graph = traces_imports()
    assert {"model", "source", "reader", "pace", "api", "text_report", "report"} <= set(graph)
    foundation = FOUNDATION | {name for name in graph if name.startswith("kernels.")}
    for name in foundation:
        assert graph[name] <= foundation, (name, graph[name])
    # no cycles: repeatedly drop the modules that import nothing left
    left = dict(graph)
    while left:
        leaves = {name for name, deps in left.items() if not deps & set(left)}
        assert leaves, f"import cycle among {sorted(left)}"
        left = {name: deps for name, deps in left.items() if name not in leaves}


def test_the_packages_list_of_modules_is_the_order_its_imports_go():
    """trace_report/__init__.py lists each module and says imports go down that list: each module of the package is
    listed (a package by its folder), and none imports one listed above it."""
    listed = [m.group(1) for line in trace_report.__doc__.splitlines()
              for m in re.finditer(r"(?:^    |, )(\w+)(?:\.py|/)", line)]
    place = {name: i for i, name in enumerate(listed)}
    graph = traces_imports()
    tops = {name.split(".")[0] for name in graph if name}
    assert tops <= set(place), sorted(tops - set(place))
    for name, deps in graph.items():
        for dep in deps:
            above, below = name.split(".")[0], dep.split(".")[0]
            if above and above != below:  # the package's own __init__ re-exports: it stands above every module
                assert place[above] < place[below], f"{name} imports {dep}, listed above it"
