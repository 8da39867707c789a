"""Chrome traces of CUDA graph replays, written event by event in the shapes a real H200 trace has.

No real trace of a replay is committed yet, so the tests build one: the fields are those of the fixtures under
trace_report/tests/fixtures/h200/ (torch 2.11): `cpu_op`, `user_annotation` and `cuda_runtime` boxes on the CPU thread, `kernel`
and `gpu_memcpy` boxes on the GPU lane (pid 0, tid 7) with args `correlation` and `External id`, and `ac2g` flows
from a runtime call (`s`) to its GPU work (`f`). A replay is one `cudaGraphLaunch` (cbid 311) whose kernels all
carry its correlation id, each with its own `f` flow of that id: what CUPTI reports for the work of a graph launch.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

CPU = (4242, 4242)
GPU = (0, 7)
START = 1_000_000.0

# The fused module at 8 tokens, as 05_fused_mlp.py's H200 trace names its kernels: (name, µs)
FUSED_KERNELS = (
    ("_geglu_gemm_kernel", 4.3),
    ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT", 4.1),
    (("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, false, "
     "false>(cublasLt::cublasSplitKParams<float>, __nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, "
     "float const*, float const*, __nv_bfloat16 const*, float const*, __nv_bfloat16*, void*, long, float*, int*)"), 1.5),
)


@dataclass
class TraceWriter:
    events: list = field(default_factory=list)
    correlation: int = 100
    external: int = 1

    def box(self, cat: str, name: str, ts: float, dur: float, lane=CPU, **args) -> dict:
        event = {"ph": "X", "cat": cat, "name": name, "pid": lane[0], "tid": lane[1], "ts": ts, "dur": dur}
        if cat in ("cpu_op", "user_annotation"):
            args = {"External id": self.external, **args}
            self.external += 1
        if args:
            event["args"] = args
        self.events.append(event)
        return event

    def runtime(self, name: str, ts: float, dur: float, cbid: int, cat: str = "cuda_runtime") -> int:
        self.correlation += 1
        self.box(cat, name, ts, dur, cbid=cbid, correlation=self.correlation)
        self.events.append({"ph": "s", "id": self.correlation, "pid": CPU[0], "tid": CPU[1], "ts": ts, "cat": "ac2g", "name": "ac2g"})
        return self.correlation

    def gpu(self, name: str, ts: float, dur: float, correlation: int, cat: str = "kernel") -> None:
        args = {"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": correlation}
        if cat == "kernel":
            args.update({"registers per thread": 64, "shared memory": 36864, "grid": [192, 1, 1], "block": [64, 1, 1]})
        self.box(cat, name, ts, dur, lane=GPU, **args)
        self.events.append({"ph": "f", "id": correlation, "pid": GPU[0], "tid": GPU[1], "ts": ts, "cat": "ac2g",
                            "name": "ac2g", "bp": "e"})

    def write(self, path: Path) -> Path:
        trace = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0}],
            "traceEvents": self.events,
            "traceName": path.name,
        }
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "wt", encoding="utf-8") as f:
            json.dump(trace, f)
        return path


def replay_trace(
    path: Path,
    *,
    forwards: int = 2,
    steps: int = 3,
    kernels=FUSED_KERNELS,
    inside_gap: float = 0.8,
    label: str = "decode_mlp",
    with_capture: bool = False,
    compiled: bool = False,
) -> Path:
    """Profiled steps of `forwards` forwards under `label`, each forward an input copy (aten::copy_ ->
    cudaMemcpyAsync -> a Memcpy DtoD) then a graph replay (cudaGraphLaunch -> `kernels`, `inside_gap` µs apart);
    then the profiler's closing cudaDeviceSynchronize. with_capture: the graph's capture comes first, recorded:
    cudaStreamBeginCapture, a cuLaunchKernelEx per kernel (no GPU work; the first under no op, as Triton's launcher
    makes it, the others inside aten::mm), cudaStreamEndCapture. compiled: each forward as torch.compile's
    reduce-overhead runs it (TorchDynamo Cache Lookup, then Torch-Compiled Region > Pregraph bytecode, AOTDispatcher
    Runtime Wrapper Prologue, ## Call CompiledFxGraph ## > aten::_foreach_copy_ (a copy kernel) and the graph launch)."""
    w = TraceWriter()
    t = START
    if with_capture:  # Triton's launcher calls the driver from Python, under no op; cuBLAS's GEMMs from aten::mm
        w.box("user_annotation", "capture", t, 20.0 + 12.0 * len(kernels))
        w.runtime("cudaStreamBeginCapture", t + 1.0, 2.0, cbid=317)
        t += 5.0
        for i in range(len(kernels)):
            if i:
                w.box("cpu_op", "aten::mm", t, 10.0)
            w.runtime("cuLaunchKernelEx", t + 2.0, 5.0, cbid=652, cat="cuda_driver")
            t += 12.0
        w.runtime("cudaStreamEndCapture", t, 3.0, cbid=318)
        t += 100.0
    for step in range(2, 2 + steps):
        step_start = t
        forward_us = 100.0 if compiled else 40.0
        w.box("user_annotation", f"ProfilerStep#{step}", step_start, 10.0 + forwards * forward_us)
        w.box("user_annotation", label, step_start + 5.0, forwards * forward_us)
        t = step_start + 5.0
        for _ in range(forwards):
            if compiled:
                w.box("cpu_op", "TorchDynamo Cache Lookup", t + 2.0, 15.0)
                w.box("cpu_op", "Torch-Compiled Region: 0/0", t + 20.0, 75.0)
                w.box("cpu_op", "Pregraph bytecode", t + 22.0, 3.0)
                w.box("cpu_op", "AOTDispatcher Runtime Wrapper Prologue", t + 27.0, 5.0)
                w.box("cpu_op", "## Call CompiledFxGraph fq7hash ##", t + 35.0, 55.0)
                w.box("cpu_op", "aten::_foreach_copy_", t + 45.0, 8.0)
                copy = w.runtime("cudaLaunchKernel", t + 48.0, 4.0, cbid=211)
                w.gpu("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<CopyFunctor>", t + 53.0, 1.5, copy)
                launch = w.runtime("cudaGraphLaunch", t + 75.0, 8.0, cbid=311)
                gpu_t = t + 80.0
            else:
                w.box("cpu_op", "aten::copy_", t + 2.0, 12.0)
                copy = w.runtime("cudaMemcpyAsync", t + 6.0, 6.0, cbid=41)
                w.gpu("Memcpy DtoD (Device -> Device)", t + 14.0, 1.2, copy, cat="gpu_memcpy")
                launch = w.runtime("cudaGraphLaunch", t + 18.0, 9.0, cbid=311)
                gpu_t = t + 22.0
            for name, dur in kernels:
                w.gpu(name, gpu_t, dur, launch)
                gpu_t += dur + inside_gap
            t += forward_us
        t = step_start + 10.0 + forwards * forward_us + 20.0
    w.runtime("cudaDeviceSynchronize", t, 30.0, cbid=165)
    return w.write(path)
