"""The picture of a step: what is drawn (the layout: rows, boxes, arrows), read from real H200 traces, then drawn
once into a PNG; and `trace-report --png` as a user runs it."""

from __future__ import annotations

import struct
import zlib

import pytest
from trace_report.tests.support import FIXTURES, run_report

from trace_report.errors import UsageError
from trace_report import read_trace
from trace_report.picture import CHAR_PX, TEXT_PAD_PX, choose_step, layout, picture_path, render, step_flag

TRACES = FIXTURES / "h200" / "traces"
EAGER = TRACES / "03_simple_mlp" / "64_128_768_3072_eager.json.gz"
COMPILED = TRACES / "03_simple_mlp" / "64_128_768_3072_compile.json.gz"
TRAINING = TRACES / "06_train_mlp" / "64_128_768_3072_eager.json.gz"
ATTENTION = FIXTURES / "h200" / "part3_probe" / "math.json.gz"  # Part 3's probe: SDPA's math backend, fp32 inside
WIDE = 100_000  # pixels: a plot this wide merges nothing, so every item is its own box
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def drawn(path, step: int = 0, **kwargs):
    trace = read_trace(path)
    return trace, trace.steps[step], layout(trace, trace.steps[step], **kwargs)


def gpu_items(lay) -> list:
    return [item for box in lay.boxes_in("gpu") for item in box.items]


def arrow_to(lay, box_index: int):
    return next((a for a in lay.arrows if a.target == box_index), None)


def assert_every_launch_has_its_arrow(lay, step) -> None:
    """Each GPU box of one item launched in this step has one arrow, from the box that holds its launch call,
    starting where the call starts and ending where the work starts (µs from the step's start)."""
    calls = {id(call) for call in step.runtime}
    for i, box in enumerate(lay.boxes):
        if lay.rows[box.row].lane != "gpu" or box.merged:
            continue
        work = box.items[0]
        arrow = arrow_to(lay, i)
        if work.launch is None or id(work.launch) not in calls:
            assert arrow is None and box.faded, work.name
            continue
        assert arrow is not None, work.name
        source = lay.boxes[arrow.source]
        assert source.items == (work.launch,) and source.kind == "runtime" and lay.rows[source.row].lane == "cpu"
        assert arrow.start == pytest.approx(work.launch.ts - step.ts) and arrow.end == pytest.approx(work.ts - step.ts)
    assert len(lay.arrows) == len({a.target for a in lay.arrows})


def test_eager_mlp_step_is_the_posts_five_kernels_in_order_each_with_its_launch_arrow():
    _, step, lay = drawn(EAGER)
    assert [row.lane for row in lay.rows] == ["cpu", "gpu"]
    boxes = lay.boxes_in("gpu")
    assert gpu_items(lay) == step.gpu and not any(b.merged for b in boxes)  # every GPU item, in time order
    kernels = [b for b in boxes if b.items[0].kind == "kernel"]
    assert [b.items[0] for b in kernels] == step.kernels
    # P2-08: GEMM, GEMM, gelu, mul, GEMM; the names decoded as trace-report prints them
    assert [b.kind for b in kernels] == ["gemm", "gemm", "elementwise", "elementwise", "gemm"]
    assert [b.name for b in kernels][2:4] == ["vectorized_elementwise_kernel<gelu>", "vectorized_elementwise_kernel<mul>"]
    assert all(b.name.startswith("nvjet_sm90_") for b in kernels if b.kind == "gemm")
    assert [b.kind for b in boxes if b.items[0].kind == "memset"] == ["copy", "copy"]
    assert len(lay.arrows) == 7
    assert_every_launch_has_its_arrow(lay, step)
    assert [lay.boxes[a.source].name for a in lay.arrows] == [
        "cudaMemsetAsync", "cuLaunchKernelEx", "cudaMemsetAsync", "cuLaunchKernelEx",
        "cudaLaunchKernel", "cudaLaunchKernel", "cuLaunchKernelEx",
    ]


def test_the_cpu_thread_is_nested_as_perfetto_nests_it():
    _, step, lay = drawn(EAGER)
    cpu = lay.boxes_in("cpu")
    level = {b.name: b.level for b in cpu}
    assert (level["ProfilerStep#2"], level["mlp_fwd"], level["aten::linear"], level["aten::matmul"], level["aten::mm"]) == (0, 1, 2, 3, 4)
    assert {b.kind for b in cpu} == {"step", "label", "op", "runtime"}
    step_box = next(b for b in cpu if b.kind == "step")
    assert (step_box.start, step_box.end) == (0.0, pytest.approx(step.dur)) and lay.step_end == pytest.approx(step.dur)
    for arrow in lay.arrows:  # each launch call sits inside the aten::mm, gelu or mul that made it, one level down
        call = lay.boxes[arrow.source]
        holder = next(b for b in cpu if b.level == call.level - 1 and b.start <= call.start and call.end <= b.end)
        assert holder.name == call.items[0].launched_by
    # The GPU runs behind: the step ends on the CPU before its last kernel ends on the GPU (the posts' first lesson)
    assert lay.boxes_in("gpu")[-1].end > lay.step_end
    assert lay.x_range[0] == 0.0 and lay.x_range[1] >= lay.boxes_in("gpu")[-1].end


def test_compiled_step_shows_the_fused_triton_kernel_between_the_same_gemms():
    _, step, lay = drawn(COMPILED)
    kernels = [b for b in lay.boxes_in("gpu") if b.items[0].kind == "kernel"]
    assert [b.items[0] for b in kernels] == step.kernels
    assert [b.kind for b in kernels] == ["gemm", "gemm", "triton", "gemm"]
    assert kernels[2].name == "triton_poi_fused__unsafe_view_gelu_mul_0"
    assert_every_launch_has_its_arrow(lay, step)
    assert len(lay.arrows) == len(step.gpu) == 6
    names = {b.name for b in lay.boxes_in("cpu")}
    assert "Torch-Compiled Region: 0/0" in names and "aten::linear" not in names


def test_attention_step_draws_only_what_it_launched_and_merges_what_is_too_small_to_see():
    _, step, lay = drawn(ATTENTION)
    assert gpu_items(lay) == step.gpu  # merged or not, every kernel is drawn once, in time order
    # The GPU runs ~5x behind the CPU here: the previous step's last kernels run in this step's window, but they
    # belong to the step that launched them, so none is drawn here (and nothing is faded).
    assert len(step.gpu) == 20 and all(w.launch is not None for w in step.gpu)
    assert not any(box.faded for box in lay.boxes_in("gpu"))
    assert_every_launch_has_its_arrow(lay, step)
    merged = [b for b in lay.boxes_in("gpu") if b.merged]
    assert merged and all(b.name == f"{len(b.items)} kernels" for b in merged)
    assert {b.kind for b in lay.boxes_in("gpu")} >= {"gemm", "elementwise", "copy"}
    assert [b.items[0] for b in lay.boxes_in("gpu") if b.kind == "gemm"] == step.gemms  # the two bmm's

    # On a plot wide enough for everything, each of the step's 20 launches is a box with its arrow.
    _, step, wide = drawn(ATTENTION, width_px=WIDE)
    assert not any(b.merged for b in wide.boxes)
    assert [b.items[0] for b in wide.boxes_in("gpu")] == step.gpu
    assert len(wide.arrows) == 20
    assert_every_launch_has_its_arrow(wide, step)


def test_training_step_draws_autograds_thread_as_a_second_cpu_row():
    _, step, lay = drawn(TRAINING)
    assert [row.lane for row in lay.rows] == ["cpu", "cpu", "gpu"]
    main, backward = lay.rows[0], lay.rows[1]
    assert main.title.startswith("CPU thread") and backward.title.startswith("autograd thread")
    assert main.thread != backward.thread
    on_backward = [b for b in lay.boxes if b.row == 1]
    assert any(b.name.startswith("autograd::engine::evaluate_function") for b in on_backward)
    assert not any(b.kind in ("step", "label") for b in on_backward)  # the step and its labels belong to the main thread
    assert_every_launch_has_its_arrow(lay, step)
    assert len(lay.arrows) == len(step.gpu) == 24
    rows_of_launches = [lay.boxes[a.source].row for a in lay.arrows]
    backward_box = next(b for b in lay.boxes if b.name == "mlp_bwd")
    for arrow, row in zip(lay.arrows, rows_of_launches):
        work = lay.boxes[arrow.target].items[0]
        assert row == (1 if work.launch.tid == backward.thread[1] else 0)
    assert rows_of_launches.count(1) >= 12  # the backward's GEMMs and elementwise kernels come from autograd's thread
    assert any(row == 0 and lay.boxes[a.source].start >= backward_box.start for a, row in zip(lay.arrows, rows_of_launches))


def test_a_narrow_plot_merges_small_boxes_counts_them_and_writes_only_names_that_fit():
    _, step, lay = drawn(TRAINING, width_px=300)
    px_per_us = lay.width_px / (lay.x_range[1] - lay.x_range[0])
    merged = [b for b in lay.boxes if b.merged]
    assert len(merged) >= 10
    for box in merged:
        assert box.name.split()[0] == str(len(box.items)), box.name
    assert any(lay.rows[b.row].lane == "gpu" for b in merged) and any(b.name.endswith(" ops") for b in merged)
    # Nothing lost, nothing twice: every op, runtime call and GPU item of the step is in exactly one box
    held = [id(item) for box in lay.boxes for item in box.items if item is not step]
    assert sorted(held) == sorted(id(item) for item in [*step.ops, *step.runtime, *step.gpu])
    for box in lay.boxes:
        if box.text:
            assert len(box.text) * CHAR_PX + TEXT_PAD_PX <= (box.end - box.start) * px_per_us + 1e-6, box
    assert any(b.text and b.text != b.name for b in lay.boxes)  # names cut to fit, with "…" or the op's own name
    # No arrow points into a merged box or out of nowhere
    assert all(not lay.boxes[a.target].merged for a in lay.arrows)


@pytest.mark.parametrize(
    "text, name",
    [("3", "ProfilerStep#3"), ("ProfilerStep#4", "ProfilerStep#4"), ("#2", "ProfilerStep#2"), ("0", "ProfilerStep#2"),
     ("1", "ProfilerStep#3"), ("-1", "ProfilerStep#4"), ("2", "ProfilerStep#2")],  # a step's number wins over an index
)
def test_choose_a_step_by_number_or_index(text, name):
    trace = read_trace(EAGER)
    assert choose_step(trace, step_flag(text)).name == name
    assert choose_step(trace, None).name == "ProfilerStep#2"


@pytest.mark.parametrize("text", ["7", "-4", "#1"])
def test_a_step_the_trace_lacks_is_one_line(text):
    with pytest.raises(UsageError, match=r"its steps are ProfilerStep#2 … ProfilerStep#4"):
        choose_step(read_trace(EAGER), step_flag(text))


def test_default_picture_path_sits_beside_the_trace(tmp_path):
    assert picture_path(tmp_path / "a_eager.json") == tmp_path / "a_eager.png"
    assert picture_path(tmp_path / "a_eager.json.gz") == tmp_path / "a_eager.png"
    assert picture_path(tmp_path / "host.pt.trace.json") == tmp_path / "host.pt.trace.png"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert zlib.crc32(data[12:29]) == struct.unpack(">I", data[29:33])[0]  # the header chunk is whole
    assert data[-12:] == b"\x00\x00\x00\x00IEND\xaeB`\x82"  # and so is the file
    return width, height


def test_the_training_step_renders_to_a_png_of_sensible_size():
    _, _, lay = drawn(TRAINING)
    data = render(lay)
    width, height = png_size(data)
    assert width == 1600 and 300 <= height <= 1000
    assert 20_000 < len(data) < 300_000


def trace_report(*args, cwd=None, env=None):
    return run_report(*map(str, args), timeout=120, env=env,
                      **({"cwd": cwd} if cwd else {}))


def test_trace_report_png_writes_the_picture_beside_the_trace(tmp_path):
    trace = tmp_path / EAGER.name
    trace.write_bytes(EAGER.read_bytes())
    run = trace_report(trace, "--png")
    assert run.returncode == 0 and run.stderr == "", run.stderr
    png = tmp_path / "64_128_768_3072_eager.png"
    assert run.stdout.strip() == f"picture: {png} (ProfilerStep#2: 5 kernels (3 GEMMs) + 2 memsets, 7 launch arrows)"
    png_size(png.read_bytes())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([trace.name, png.name])  # no temporary file left

    run = trace_report(trace, "--png", tmp_path / "last.png", "--step", "-1")
    assert run.returncode == 0 and "picture:" in run.stdout and "(ProfilerStep#4:" in run.stdout, run.stderr
    png_size((tmp_path / "last.png").read_bytes())


def test_matplotlibs_own_warnings_stay_off_stderr(tmp_path):
    """A config folder matplotlib cannot use (here a file; on a fresh GPU machine, a font cache it builds) makes it
    log warnings through `logging`, which would print them: a lesson's successful run keeps stderr empty."""
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    run = trace_report(EAGER, "--png", tmp_path / "x.png", env={"MPLCONFIGDIR": str(blocker / "mpl")})
    assert run.returncode == 0 and run.stderr == "", run.stderr
    png_size((tmp_path / "x.png").read_bytes())


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--png", "x.txt"], "ending in .png"),
        (["--png", "--step", "9"], "no ProfilerStep#9 and no step at index 9"),
        (["--png", "--step", "last"], "expected a ProfilerStep number"),
        (["--step", "3"], "add --png"),
        (["--port", "0"], "add --open"),
        (["--png", "--json"], "drop --json"),
        (["--png", "missing/x.png"], "cannot write the picture"),
    ],
)
def test_bad_picture_flags_are_one_line_and_exit_2(args, needle, tmp_path):
    run = trace_report(EAGER, *args, cwd=tmp_path)
    assert run.returncode == 2, run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], run.stderr
    assert list(tmp_path.iterdir()) == []
