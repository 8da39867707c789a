"""CUDA graphs for a decode-sized forward: capture a module's forward once, then replay it with one launch.

At a handful of tokens the MLP's kernels run for a few µs each, and issuing them (Python, the dispatcher, one
launch call per kernel) costs the CPU more than running them costs the GPU: in a loop of forwards the GPU waits.
A CUDA graph records the kernels of one forward, with their arguments, the first time; each replay hands the GPU
all of them with one call (`cudaGraphLaunch`), and the GPU runs them back to back.

The recipe is the one in PyTorch's CUDA graphs notes (torch.cuda.CUDAGraph):

    static_x = x.clone()                              # the graph reads its input from this buffer, always
    side = torch.cuda.Stream()                        # warm up on a side stream: lazy initialisation, cuBLAS
    side.wait_stream(torch.cuda.current_stream())     # handles and workspaces, Triton's JIT and tuning happen
    with torch.cuda.stream(side):                     # here, not during the capture
        for _ in range(3):
            module(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):                     # record, do not run: kernels, their arguments, addresses
        static_y = module(static_x)
    ...
    static_x.copy_(new_x); graph.replay()             # static_y now holds module(new_x)

What a graph keeps is addresses: the input buffer, the weights, every intermediate (allocated during the capture
from a memory pool the graph keeps for itself) and the output. So a replay reads whatever the input buffer holds
now, writes the same output buffer every time (the previous result is overwritten: clone it to keep it), and
cannot change shape. `CapturedForward` wraps that: it copies each new input into the buffer, refuses another
shape, dtype or device with a ValueError naming both, and refuses to replay once the weights were edited in place.

Everything a forward decides on the host (which kernel, its launch configuration, a shape check) is decided once,
at capture. A forward is safe to capture when, once warmed up for a shape, it does no host synchronization
(`.item()`, `torch.cuda.synchronize`, a tuning run) and launches the same kernels every call. Allocations are fine:
during a capture the caching allocator serves them from the graph's private pool, so their addresses stay valid
for every replay. `FusedGeGLUMLP` is such a forward after its first call per shape (profiling_in_pytorch/mlp/fused.py).
"""

from __future__ import annotations

from typing import Callable

import torch

from trace_report.errors import UsageError

NEEDS_GPU = "CUDA graphs need a GPU"
WARMUP_CALLS = 3  # the CUDA graphs notes warm up with a few iterations; the first call per shape tunes Triton's kernels


def require_cuda_graphs(device: torch.device) -> None:
    """Raise UsageError (one line) unless `device` is a CUDA GPU: there is no graph to capture on a CPU."""
    if device.type != "cuda":
        raise UsageError(
            f"{NEEDS_GPU}: a CPU runs each op as it is called, there is nothing to capture and replay "
            "(--variant eager or compile run here)"
        )


class CapturedForward:
    """`module`'s inference forward for inputs shaped like `example`, captured in one CUDA graph.

    Calling it with an input of that shape, dtype and device copies the input into the graph's input buffer (no copy
    when it is that buffer) and replays the graph: one `cudaGraphLaunch`. It returns the graph's output buffer, which
    the next replay overwrites. Another shape, dtype or device raises ValueError; weights edited in place since the
    capture (an optimizer step, a weight copied in) raise RuntimeError, as a graph would replay with what it recorded.
    Replacing a parameter by another tensor is not detected: the graph keeps reading the old one.
    """

    def __init__(self, module: torch.nn.Module, example: torch.Tensor, *, warmup_calls: int = WARMUP_CALLS):
        require_cuda_graphs(example.device)
        self.module = module
        self.shape = tuple(example.shape)
        self.dtype = example.dtype
        self.device = example.device
        self.static_input = example.detach().clone()
        self._parameters = list(module.parameters())
        with torch.no_grad():
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(warmup_calls):
                    module(self.static_input)
            torch.cuda.current_stream(self.device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_output = module(self.static_input)
        self._versions = self._weight_versions()

    def _weight_versions(self) -> tuple[int, ...]:
        return tuple(p._version for p in self._parameters)

    def describe(self) -> str:
        return f"{type(self.module).__name__} captured for input {list(self.shape)} {self.dtype} on {self.device}"

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape != self.shape or x.dtype != self.dtype or x.device != self.device:
            raise ValueError(
                f"this CUDA graph was captured for input {list(self.shape)} {self.dtype} on {self.device}, and was "
                f"given {list(x.shape)} {x.dtype} on {x.device}: a graph replays fixed shapes, capture another for it"
            )
        if self._weight_versions() != self._versions:
            raise RuntimeError(
                f"the weights of the captured {type(self.module).__name__} changed in place since the capture (an "
                "optimizer step, load_state_dict): capture it again, a replay would run what was recorded"
            )
        if x.data_ptr() != self.static_input.data_ptr():
            self.static_input.copy_(x)
        self.graph.replay()
        return self.static_output


def captured_on_first_call(module: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """A forward that captures `module` for the shape of its first input (warm-up and capture happen in that call),
    then replays: another shape afterwards raises CapturedForward's ValueError."""
    captured: CapturedForward | None = None

    def forward(x: torch.Tensor) -> torch.Tensor:
        nonlocal captured
        if captured is None:
            captured = CapturedForward(module, x)
        return captured(x)

    return forward


def compiled_with_cuda_graphs(module: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """torch.compile(mode="reduce-overhead"): Inductor's kernels, recorded and replayed by CUDA graph trees.

    Each call starts a new step (`cudagraph_mark_step_begin`): the graph may then overwrite the previous call's
    output, whose memory it reuses. Without it, CUDA graph trees cannot tell a new decode step from a second call in
    the same one. dynamic=False: one static graph per shape, as a server's fixed decode shapes get.
    """
    compiled = torch.compile(module, mode="reduce-overhead", dynamic=False)

    def forward(x: torch.Tensor) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(x)

    return forward
