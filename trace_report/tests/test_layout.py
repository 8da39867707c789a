"""trace-report's layering: its modules import one way (no cycles, the data model and the file source below
everything that reads them)."""

from __future__ import annotations

import ast
from pathlib import Path

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
        # A notebook's view of an object (`_repr_html_`: a Report, a TraceDiff) draws it with the command that prints
        # it, imported when a notebook shows one: the one import allowed to go up.
        views = {id(node) for view in ast.walk(tree) if isinstance(view, ast.FunctionDef) and
                 view.name == "_repr_html_" for node in ast.walk(view)}
        for node in ast.walk(tree):
            if id(node) in views:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
                base = node.module.removeprefix(PACKAGE).lstrip(".")
                for alias in node.names:
                    inner = f"{base}.{alias.name}".lstrip(".")
                    found.add(inner if inner in modules else base)
        graph[name] = found - {name}
    return graph


def test_traces_imports_go_one_way():
    graph = traces_imports()
    assert {"model", "source", "reader", "pace", "api", "report"} <= set(graph)
    foundation = FOUNDATION | {name for name in graph if name.startswith("kernels.")}
    for name in foundation:
        assert graph[name] <= foundation, (name, graph[name])
    # no cycles: repeatedly drop the modules that import nothing left
    left = dict(graph)
    while left:
        leaves = {name for name, deps in left.items() if not deps & set(left)}
        assert leaves, f"import cycle among {sorted(left)}"
        left = {name: deps for name, deps in left.items() if name not in leaves}
