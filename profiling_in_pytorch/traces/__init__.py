"""Reading torch.profiler traces: what ran on the CPU and the GPU, per step, and what the kernels' names say.

`reader` streams a Chrome trace into a `Trace` (steps, ops, runtime calls, GPU work, the verdict), `kernel_names`
decodes kernel names, `expect` turns the posts' claims into checks of a trace, `communication` reads collectives
(NCCL kernels, gloo's record functions) and several ranks' traces, `communication_checks` holds lesson 08's checks,
and `report` is the `trace-report` command. This package imports no torch (only the standard library and rich), so it reads a
trace from anywhere, fast, on a machine without PyTorch.
"""

from profiling_in_pytorch.traces.reader import Trace, diff, read_trace

__all__ = ["Trace", "diff", "read_trace"]
