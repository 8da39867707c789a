"""The suite stands above trace-report: the posts' claims (profiling_in_pytorch.checks) read traces through it, and
reading and checking a trace imports no torch (trace-report's own layering: trace_report/tests/test_layout.py)."""

from __future__ import annotations

from conftest import run_script


def test_reading_and_checking_a_trace_imports_no_torch():
    code = (
        "import sys; import trace_report.report, profiling_in_pytorch.checks; "
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    result = run_script("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
