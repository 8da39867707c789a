"""The plumbing every lesson calls, as plain functions, in the order the lesson reads:

    parser(...)       the flags: the lesson's sizes with the post's defaults, --compile, --dtype, --device, --trace_dir
    setup(...)        device and dtype, the trace's file name, a folder proved writable; one line of what runs
    time_unprofiled(...)  the step timed without the profiler (wall, CPU issue and GPU time per step, medians), so
                      that the profiled figures can be read against it: what the profiler itself changed
    check_training(...), check_saved(...)   a training step's output, gradients and saved tensors, before profiling
    announce(...)     the guesses, before anything is profiled
    save(...)         the Chrome trace (whole or not at all, no local path in it, the unprofiled timing in it), the op
                      table and a picture of a step beside it; then the profiled step against the unprofiled one
    check(...)        each guess against the trace: ✓, or ✗ with the reason when the hardware explains it
    next_steps(...)   the commands to read, diff, see, open and share this trace, with its real file names

The recipe itself (the module, `step()` under `record_function`, `torch.profiler.profile(...)` with the posts'
schedule, the five `prof.step()`s) stays in the lesson, where the reader sees it. This package imports torch,
rich, `trace_report` (the checks), `profiling_in_pytorch.mlp.accuracy` (the output and gradient checks),
`profiling_in_pytorch.device`, `timers` (the timers `time_unprofiled` shares with the benchmark) and `ceilings`
(the GPU's measured peaks, written into the trace), and the standard
modules (`trace_report.cli`, `errors`, `files`); it never imports a lesson.

Each part lives in its own module (runs, unprofiled, guesses, output, op_table, correctness, commands); this file
only hands their names on, so that a lesson reads `lesson.setup`, `lesson.save`, ... Lesson 11's memory plumbing
(torch's memory timeline by category, the allocator's snapshot) is `lesson.memory`, imported by name.
"""

from __future__ import annotations

from profiling_in_pytorch.lesson.commands import (TRACE_UTIL, _command, bucket_name, next_steps,  # noqa: F401
                                                  share_command, shown_path)
from profiling_in_pytorch.lesson.correctness import check_output, check_saved, check_training  # noqa: F401
from profiling_in_pytorch.device import describe_device, dtype_name, pick_device, pick_dtype  # noqa: F401
from profiling_in_pytorch.lesson.guesses import announce, check  # noqa: F401
from profiling_in_pytorch.lesson.op_table import TABLE_ROWS, op_table_text, print_op_table, sort_key  # noqa: F401
from profiling_in_pytorch.lesson.output import fusion_candidates, save  # noqa: F401
from profiling_in_pytorch.lesson.profiling import ACTIVE, STEPS, WAIT, WARMUP, export_trace, synchronize  # noqa: F401
from profiling_in_pytorch.lesson.runs import (CPU_NOTE, SIZE_HELP, Run, memory_allocated, parser,  # noqa: F401
                                              require_cpp_compiler, require_memory, setup, trace_of, trace_tag)
from profiling_in_pytorch.lesson.terminal import console  # noqa: F401
from profiling_in_pytorch.lesson.unprofiled import measure_step, time_unprofiled  # noqa: F401
