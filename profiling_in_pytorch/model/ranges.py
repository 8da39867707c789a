"""Which `nn.Module` ran each op: a `record_function` range per module call, forward and backward.

torch.profiler's `with_modules=True` records module hierarchy for TorchScript models only: in eager mode it records
nothing (torch 2.15 says so in a FutureWarning and points to `with_stack=True`, whose `nn.Module: Linear_0` Python
events come with a Python frame for every function called, a far larger cost and trace). So we open the ranges
ourselves, with hooks, under one prefix the report reads (trace_report.summary):

    nn.Module: LlamaMLP                         around each forward call of a LlamaMLP (forward pre/post hooks)
    nn.Module: LlamaForCausalLM > LlamaModel > LlamaDecoderLayer > LlamaMLP > Linear.backward
                                                around each backward node a Linear's forward created, named by the
                                                modules around it then, outermost first

The backward has no module calls to hook: autograd runs nodes (`MmBackward0`, ...), on its own thread on a GPU.
A module's full backward hooks (`register_full_backward_hook`) see only its positional inputs, and transformers calls
its attention with keyword arguments, so they would close the range before the attention's backward ran. Instead we
use the numbers autograd gives its nodes as it makes them: the nodes a module call made are numbered from the call's
start to its end. When the outermost module returns, one walk over its graph gives each node the range of the
innermost call that made it, as a pre-hook that opens the range and a hook that closes it (as AOTAutograd's own
stack-trace hooks do). Each node's range sits inside autograd's `autograd::engine::evaluate_function: MmBackward0`
box, on whichever thread runs it. Nodes made outside every module (a loss computed after the model) get none.

What they cost, measured on a CPU (a 2-layer Llama, hidden 64, 1 × 8 tokens, one thread, a training step under the
profiler, the fastest of 15 runs of 20 steps): the step's CPU time grows by 52%, about 18 µs per range (32 module
calls and 155 backward nodes per step; the hooks on the nodes are registered anew each step), the forward's ranges
alone by 8% (17 µs per module call, mostly PyTorch's slower call path for a module with hooks). CPU time per module
call and per backward node, not per op, and no GPU work. Under torch.compile there are none: Inductor's kernels span
modules, and hooks would break the graph.
"""

from __future__ import annotations

import bisect
from typing import Any, Iterator

import torch
from torch import nn
from torch.autograd.profiler import record_function

from trace_report.summary import BACKWARD_SUFFIX, CHAIN_SEPARATOR, MODULE_PREFIX  # what the report reads

# torch's C++ range (what Inductor wraps its CPU kernels in): 1.6 µs to open and close under the profiler on a CPU,
# against 14 µs for `record_function`, which dispatches two ops. Its boxes are `cpu_op` events, not `user_annotation`.
_Range = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", record_function)

_CLAIMED = "nn.Module range"  # key in an autograd node's metadata: the range its backward runs under


class ModuleRanges:
    """Hooks that wrap every module call of `model` in a range, and each backward node its forward made in one too
    (`backward=True`). A context manager: the hooks go when it closes."""

    def __init__(self, model: nn.Module, backward: bool = True):
        self.model = model
        self.backward = backward and hasattr(torch.autograd, "_get_sequence_nr")
        self.handles: list[Any] = []
        self.open: list[tuple[Any, int, str]] = []  # forward ranges open now: (range, sequence nr at the start, type)
        self.calls: list[tuple[int, int, str]] = []  # this forward's module calls: (first, last + 1 sequence nr, range)

    def __enter__(self) -> ModuleRanges:
        for module in self.model.modules():
            if type(module).forward is nn.Module.forward:  # a container never called (ModuleList, ModuleDict)
                continue
            self.handles.append(module.register_forward_pre_hook(self._enter))
            self.handles.append(module.register_forward_hook(self._exit, always_call=True))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        while self.open:
            self.open.pop()[0].__exit__(None, None, None)

    def _enter(self, module: nn.Module, args) -> None:
        name = type(module).__name__
        span = _Range(MODULE_PREFIX + name)
        span.__enter__()
        self.open.append((span, torch.autograd._get_sequence_nr() if self.backward else 0, name))

    def _exit(self, module: nn.Module, args, output) -> None:
        if not self.open:
            return
        span, start, name = self.open.pop()
        span.__exit__(None, None, None)
        if not (self.backward and torch.is_grad_enabled()):
            return
        chain = CHAIN_SEPARATOR.join([n for _, _, n in self.open] + [name])  # the modules around it, then it
        self.calls.append((start, torch.autograd._get_sequence_nr(), MODULE_PREFIX + chain + BACKWARD_SUFFIX))
        if not self.open:  # the outermost module returned: its graph is whole
            self._claim_nodes(output)
            self.calls.clear()

    def _claim_nodes(self, output: Any) -> None:
        """Give each autograd node the forward made the range of the innermost module call it was made in.

        Autograd numbers nodes as it makes them (on the forward's thread), so the nodes a call made are those numbered
        from its start to its end; calls nest, and the innermost call holding a node's number is the one that made it.
        One walk over the graph from the outermost module's output, once per forward."""
        # By start, and among calls that start together the outer first (it ends later, or as late and is shallower):
        # the last call starting at or before a number is then the innermost one that could hold it.
        calls = sorted(self.calls, key=lambda call: (call[0], -call[1], call[2].count(CHAIN_SEPARATOR)))
        starts = [start for start, _, _ in calls]
        first, last = calls[0][0], max(end for _, end, _ in calls)
        seen: dict[int, Any] = {}  # id -> node, held: a wrapper let go could lend its id to another node
        todo = [t.grad_fn for t in _tensors(output) if t.grad_fn is not None]
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            seen[id(node)] = node
            number = node._sequence_nr()
            if not first <= number < last:  # made before this forward (or an AccumulateGrad: the largest number)
                continue
            i = bisect.bisect_right(starts, number) - 1
            while i >= 0 and calls[i][1] <= number:  # that call ended before the node: an earlier sibling
                i -= 1
            if i >= 0 and _CLAIMED not in node.metadata:
                name = calls[i][2]
                node.metadata[_CLAIMED] = name
                opened: list = []
                node.register_prehook(_open_backward(name, opened))
                node.register_hook(_close_backward(opened))
            todo.extend(next_node for next_node, _ in node.next_functions)


def _open_backward(name: str, opened: list):
    def prehook(grad_outputs):
        span = _Range(name)
        span.__enter__()
        opened.append(span)

    return prehook


def _close_backward(opened: list):
    def hook(grad_inputs, grad_outputs):
        if opened:
            opened.pop().__exit__(None, None, None)

    return hook


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in a module's output: a tensor, or inside tuples, lists, dicts and transformers' ModelOutputs."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):  # transformers' ModelOutput is an OrderedDict
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
