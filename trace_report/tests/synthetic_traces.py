"""GPU-shaped training traces the tests write themselves: a Llama-like stack of layers, with module ranges as
profile_model.py records them, the backward on autograd's own thread and AdamW's foreach ops launching one kernel per
chunk of tensors. The real H200 traces have no module ranges; these do, at any size (the report's speed is measured
on one of 200 MB: docs/your-model.md)."""

from __future__ import annotations

import json
from pathlib import Path

MAIN, AUTOGRAD, GPU_PID, STREAM = 100, 101, 0, 7

# (module chain below the decoder layer, launching op, kernel name, GPU µs) for one layer's forward
LAYER_FORWARD = [
    (("LlamaRMSNorm",), "aten::mean", "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4>)", 4.0),
    (("LlamaAttention", "Linear"), "aten::mm", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", 30.0),
    (("LlamaAttention",), "aten::_scaled_dot_product_flash_attention", "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(FLASH_NAMESPACE::Flash_fwd_params)", 40.0),
    (("LlamaAttention", "Linear"), "aten::mm", "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT", 20.0),
    (("LlamaMLP", "Linear"), "aten::mm", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", 60.0),
    (("LlamaMLP", "SiLUActivation"), "aten::silu", "void at::native::vectorized_elementwise_kernel<8, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)", 10.0),
    (("LlamaMLP",), "aten::mul", "void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)", 10.0),
    (("LlamaMLP", "Linear"), "aten::mm", "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT", 60.0),
    ((), "aten::add", "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", 5.0),
]
FOREACH = [
    ("aten::_foreach_lerp_", "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::TernaryOpScalarFunctor<c10::BFloat16, 2, 2, 0>, at::native::LerpFunctor<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::TernaryOpScalarFunctor<c10::BFloat16, 2, 2, 0>, at::native::LerpFunctor<float>, float)"),
    ("aten::_foreach_addcdiv_", "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListScalarListMetadata<float, 3>, at::native::(anonymous namespace)::PointwiseOpScalarListFunctor<c10::BFloat16, 3, 3, 0>, std::divides<float> >(at::native::(anonymous namespace)::TensorListScalarListMetadata<float, 3>, at::native::(anonymous namespace)::PointwiseOpScalarListFunctor<c10::BFloat16, 3, 3, 0>, std::divides<float>)"),
]
ROOT = ("LlamaForCausalLM", "LlamaModel", "LlamaDecoderLayer")


class _Writer:
    def __init__(self):
        self.events: list[dict] = []
        self.correlation = 0
        self.gpu_free = 0.0

    def box(self, cat: str, name: str, tid: int, ts: float, dur: float) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": MAIN, "tid": tid, "ts": round(ts, 3), "dur": round(dur, 3), "args": {}})

    def launch(self, tid: int, ts: float, kernel: str, gpu_us: float) -> None:
        """A cudaLaunchKernel at `ts` (2 µs) and its kernel, queued behind the GPU's work."""
        self.correlation += 1
        c = self.correlation
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": MAIN, "tid": tid, "ts": round(ts, 3), "dur": 2.0, "args": {"correlation": c}})
        start = max(self.gpu_free, ts + 4.0)
        self.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": GPU_PID, "tid": STREAM, "ts": round(start, 3), "dur": gpu_us, "args": {"correlation": c, "stream": STREAM}})
        self.gpu_free = start + gpu_us


def _close(w: _Writer, opened: list, keep: int, t: float, write: bool, instances: dict | None = None) -> None:
    """Close the open module ranges past the first `keep`, innermost first, just before `t`; with `instances` (type ->
    calls so far), as the Python frames of with_stack=True instead: `nn.Module: Linear_3`, numbered per instance."""
    while len(opened) > keep:
        module, start = opened.pop()
        dur = t - 2.0 + 0.01 * len(opened) - start
        if instances is not None:
            n = instances[module] = instances.get(module, -1) + 1  # each call a new instance: the layers' are
            w.events.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: {module}_{n}", "pid": MAIN,
                             "tid": MAIN, "ts": round(start, 3), "dur": round(dur, 3), "args": {}})
        elif write:
            w.box("cpu_op", f"nn.Module: {module}", MAIN, start, dur)


def training_trace(path: Path, *, layers: int = 2, steps: int = 3, chunks: int = 3, module_ranges: bool = True,
                   python_stacks: bool = False) -> Path:
    """Write a trace of `steps` training steps of a `layers`-layer Llama-like model (see the module's docstring): per
    layer 9 forward kernels and 9 backward ones, then 2 foreach ops of `chunks` kernels each in AdamW's step.
    `python_stacks`: the forward's modules as with_stack=True's Python frames instead of ranges, and no backward
    ranges (autograd's thread has no Python frames)."""
    if python_stacks:
        module_ranges = False
    w = _Writer()
    t = 1000.0
    for step in range(2, 2 + steps):
        step_start = t
        t += 5
        # forward, on the main thread, inside model_fwd and the module ranges
        fwd_start = t
        opened: list[tuple[str, float]] = []  # the module ranges open now: (module, start)
        instances: dict | None = {} if python_stacks else None
        for layer in range(layers):
            for chain, op, kernel, gpu_us in LAYER_FORWARD:
                full = ROOT + chain  # every op runs inside the layer
                keep = 0
                while keep < min(len(opened), len(full)) and opened[keep][0] == full[keep] and not (
                        keep == 2 and chain == LAYER_FORWARD[0][0] and op == LAYER_FORWARD[0][1]):
                    keep += 1  # a new layer starts at its first op: its LlamaDecoderLayer range too
                _close(w, opened, keep, t, module_ranges, instances)
                for module in full[len(opened):]:
                    opened.append((module, t - 1.0 + 0.01 * len(opened)))
                w.box("cpu_op", op, MAIN, t, 10.0)
                w.launch(MAIN, t + 3, kernel, gpu_us)
                t += 13
        _close(w, opened, 0, t, module_ranges, instances)
        w.box("user_annotation", "model_fwd", MAIN, fwd_start - 2, t - fwd_start + 4)
        t += 5
        # backward: model_bwd on the main thread, the work on autograd's thread
        bwd_start = t
        for _ in range(layers):
            for chain, op, kernel, gpu_us in reversed(LAYER_FORWARD):
                node = f"{op.removeprefix('aten::').title()}Backward0"
                w.box("cpu_op", f"autograd::engine::evaluate_function: {node}", AUTOGRAD, t - 1, 14.0)
                if module_ranges:
                    w.box("cpu_op", "nn.Module: " + " > ".join(ROOT + chain) + ".backward", AUTOGRAD, t - 0.5, 13.0)
                w.box("cpu_op", node, AUTOGRAD, t - 0.2, 12.0)
                w.box("cpu_op", op, AUTOGRAD, t, 10.0)
                w.launch(AUTOGRAD, t + 3, kernel, 2 * gpu_us)
                t += 15
        w.box("user_annotation", "model_bwd", MAIN, bwd_start - 1, t - bwd_start + 2)
        t += 5
        # AdamW's foreach ops on the main thread, each launching one kernel per chunk of tensors
        opt_start = t
        for op, kernel in FOREACH:
            w.box("cpu_op", op, MAIN, t, 4.0 * chunks + 4)
            for i in range(chunks):
                w.launch(MAIN, t + 2 + 4 * i, kernel, 15.0)
            t += 4.0 * chunks + 6
        w.box("user_annotation", "Optimizer.step#AdamW.step", MAIN, opt_start - 0.5, t - opt_start)
        w.box("user_annotation", "optimizer_step", MAIN, opt_start - 1, t - opt_start + 1)
        t += 5
        w.box("user_annotation", f"ProfilerStep#{step}", MAIN, step_start, t - step_start)
        t += 2
    w.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": MAIN, "tid": MAIN, "ts": t, "dur": max(1.0, w.gpu_free - t), "args": {}})
    trace = {"deviceProperties": [{"name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0}], "traceEvents": w.events}
    path.write_text(json.dumps(trace))
    return path
