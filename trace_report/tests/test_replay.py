"""--replay's script: an op rebuilt from what its trace recorded (shapes, strides, types, scalar values)."""

from __future__ import annotations

import ast

import pytest

from trace_report.errors import UsageError
from trace_report.replay import RecordedOp, compare_line, recorded_op, replay_script
from trace_report.tests.support import FIXTURES, run_report

SHAPES = FIXTURES / "h200" / "traces" / "03_simple_mlp" / "64_128_768_3072_shapes_eager.json.gz"


def test_the_gate_gemm_is_rebuilt_with_its_transposed_weight():
    op = recorded_op(SHAPES, "aten::mm")
    assert op.dims == ((8192, 768), (768, 3072)) and op.strides == ((768, 1), (1, 768))
    script = replay_script(op, 50.0, SHAPES.name)
    ast.parse(script)
    assert "torch.ops.aten.mm" in script
    # nn.Linear's weight is [3072, 768]; the GEMM reads its transpose: the replay keeps that layout
    assert "torch.empty_strided([768, 3072], [1, 768], dtype=torch.bfloat16, device='cuda')" in script
    assert "# In the trace: 50.00 µs" in script


def test_scalars_and_lists_keep_their_recorded_values():
    op = recorded_op(SHAPES, "aten::transpose")
    script = replay_script(op)
    assert "torch.empty_strided([3072, 768], [768, 1]" in script and "\n    0,\n    1,\n)" in script
    view = recorded_op(SHAPES, "aten::view", dims=((64, 128, 768), ()))
    assert "\n    [8192, 768],\n)" in replay_script(view)


def test_what_cannot_be_rebuilt_is_one_line():
    unknown = RecordedOp("aten::cat", ((),), ((),), ("TensorList",), ("",))
    with pytest.raises(UsageError, match="TensorList"):
        replay_script(unknown)
    with pytest.raises(UsageError, match="record_shapes=True"):
        recorded_op(SHAPES, "aten::mm", dims=((1, 2), (2, 3)))
    with pytest.raises(UsageError, match="not an op the dispatcher knows"):
        replay_script(RecordedOp("my_label", (), (), (), ()))


def test_the_comparison_says_what_a_difference_means():
    alone = {"device": "NVIDIA H200", "torch": "2.11.0", "flushed_us": 50.0, "warm_us": 48.0}
    assert "as alone" in compare_line(51.0, alone)
    assert "slower in the trace" in compare_line(60.0, alone) and "1.20×" in compare_line(60.0, alone)
    assert "faster in the trace" in compare_line(40.0, alone) and "default" not in compare_line(40.0, alone)
    # the post's GELU on an H200: the trace ran gelu(approximate="tanh"), the replay the default, erf
    gelu = compare_line(30.59, {**alone, "flushed_us": 37.89, "warm_us": 35.78}, unrecorded=1)
    assert "faster in the trace" in gelu and "1 argument the trace does not record took the default" in gelu
    tiny = compare_line(3.51, {**alone, "flushed_us": 10.62, "warm_us": 7.46})
    assert "a kernel of a few µs" in tiny


def test_the_command_writes_the_script_of_a_row(tmp_path):
    script = tmp_path / "gate.py"
    run = run_report(SHAPES, "--replay", "1", "--replay_script", script)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert run.stdout.startswith(f"replay script: {script} (aten::mm(c10::BFloat16[8192, 768], c10::BFloat16[768, 3072])")
    text = script.read_text()
    ast.parse(text)
    assert "[768, 3072], [1, 768]" in text and "In the trace: 57.41 µs of GPU time per call" in text


def test_a_row_that_is_not_there_is_one_line(tmp_path):
    for flags, says in ((("--replay", "99"), "rows 1 to 4"), (("--replay", "softmax"), "no op of that name"),
                        (("--replay_script", str(tmp_path / "x.py")), "--replay ROW")):
        run = run_report(SHAPES, *flags)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and len(lines) == 1 and says in lines[0], run.stderr
    run = run_report(FIXTURES / "h200" / "mlp_eager.json.gz", "--replay", "1")
    assert run.returncode == 2 and "record_shapes=True" in run.stderr
    assert not (tmp_path / "x.py").exists()
