"""trace-report stands alone: no module of it imports torch, triton, transformers or the suite above it, and it
reads a trace, prints its report and its JSON in a process that has only rich and this package on its path."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from trace_report.tests.support import H200_EAGER, PACKAGE_PARENT

PACKAGE = Path(__file__).resolve().parent.parent
FORBIDDEN = ("torch", "triton", "transformers", "profiling_in_pytorch", "numpy")

# Only what trace-report installs: rich and what rich imports, and msgspec (the reader's parser), linked into a folder
# that a `python -S` process (no site-packages, so no torch, no matplotlib) takes as its whole path besides this
# checkout.
RICH_AND_ITS_IMPORTS = ("rich", "markdown_it", "mdurl", "pygments", "msgspec")


def _bare_python(tmp_path: Path, code: str, **kwargs) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    site.mkdir()
    for name in RICH_AND_ITS_IMPORTS:
        (site / name).symlink_to(Path(importlib.import_module(name).__file__).parent)
    env = {"PYTHONPATH": f"{site}{os.pathsep}{PACKAGE_PARENT}", "COLUMNS": "120", "PATH": os.environ["PATH"]}
    return subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env, **kwargs)


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "tests" not in p.relative_to(PACKAGE).parts)


def test_no_module_imports_torch_or_the_suite():
    offending = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            offending += [f"{path.relative_to(PACKAGE)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert len(_modules()) > 40 and offending == []


def test_every_module_imports_and_reports_without_torch(tmp_path):
    modules = [".".join(("trace_report", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
               for p in _modules()]
    code = f"""
import importlib, json, sys
for name in {modules!r}:
    importlib.import_module(name)
import trace_report
from trace_report.report import main
report = trace_report.read({str(H200_EAGER)!r})
print(json.dumps({{"kind": report.verdict.kind, "keys": sorted(report.to_json())}}))
assert main([{str(H200_EAGER)!r}]) == 0
assert not [m for m in sys.modules if m.split(".")[0] in {FORBIDDEN!r}]
"""
    run = _bare_python(tmp_path, code)
    assert run.returncode == 0, run.stderr
    first = json.loads(run.stdout.splitlines()[0])
    assert first["kind"] == "compute-bound" and {"steps", "summary", "memory", "observer_effect"} <= set(first["keys"])
    assert "Who sets the pace" in run.stdout and run.stderr == ""


def test_png_without_matplotlib_says_how_to_add_it(tmp_path):
    code = f"""
import sys
from trace_report.report import main
sys.exit(main([{str(H200_EAGER)!r}, "--png", {str(tmp_path / "step.png")!r}]))
"""
    run = _bare_python(tmp_path, code)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and len(lines) == 1 and "trace-report[png]" in lines[0], run.stderr
    assert not (tmp_path / "step.png").exists()
