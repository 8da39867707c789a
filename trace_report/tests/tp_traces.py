"""GPU traces of a tensor-parallel forward, one per rank, with the times we choose (no GPU needed to make them).

Shaped like lesson 08's traces on an H200 (torch 2.11, NCCL 2.28): per step, under `tp_mlp_fwd`, the five compute
kernels on the compute stream (each launched by cuLaunchKernelEx from its ATen op) and an NCCL all-reduce kernel
on NCCL's own stream, launched from `record_param_comms` inside `c10d::allreduce_`. Rank r's GPU runs `r * lag_us`
behind rank 0's, so an all-reduce ends when the last rank has started it: on the earlier ranks its kernel lasts
longer by the wait, as a real one does.
"""

from __future__ import annotations

import json
from pathlib import Path

NCCL_LL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
NCCL_GENERIC = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
        "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::"
        "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, T2, T3)")
MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::binary_internal::MulFunctor<c10::BFloat16>, "
       "std::array<char*, 3ul> >(int, T2, T3)")
# gate, up, gelu, mul, down: their shares of a forward's compute (the post's shape on an H200: 57, 57, 40, 40, 52 µs)
COMPUTE = (("aten::mm", GEMM, 0.23), ("aten::mm", GEMM, 0.23), ("aten::gelu", GELU, 0.16), ("aten::mul", MUL, 0.16),
           ("aten::mm", GEMM, 0.22))
CPU, COMPUTE_STREAM, NCCL_STREAM = {"pid": 1, "tid": 1}, {"pid": 0, "tid": 7}, {"pid": 0, "tid": 20}


def simulated_tp_run(folder: Path, run: str = "64_128_768_3072_tp2_plain_eager", *, world: int = 2, chunks: int = 1,
                     overlap: bool = False, compute_us: float = 120.0, allreduce_us: float = 70.0, lag_us: float = 10.0,
                     cpu_step_us: float = 300.0, nccl: str = NCCL_LL, nelems: int | None = None,
                     message_on_kernel: bool = True) -> list[Path]:
    """Each rank's trace of three profiled steps, `folder/<run>_rank<r>.json`.

    chunks, overlap: the forward in `chunks` pieces, each with its own all-reduce; with `overlap` the compute
    stream does not wait for a chunk's all-reduce (only for all of them at the step's end), as OverlappedGeGLUMLP.
    nelems: each all-reduce's bf16 elements, in record_param_comms's args as c10d records them and, with
    `message_on_kernel`, copied onto the NCCL kernel as Kineto does since torch 2.1; None: no message recorded.
    """
    paths = []
    for rank in range(world):
        events: list[dict] = []
        offset = rank * lag_us
        corr, cpu_t, gpu_free, nccl_free = 0, 0.0, 0.0, 0.0

        def box(cat, name, ts, dur, lane=CPU, events=events, **args):
            events.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **lane, "args": args})

        launch_gap = (cpu_step_us - 10) / (chunks * 6)
        for number in (2, 3, 4):
            box("user_annotation", f"ProfilerStep#{number}", cpu_t, cpu_step_us)
            box("user_annotation", "tp_mlp_fwd", cpu_t + 1, cpu_step_us - 2)
            cursor = cpu_t + 2
            for _ in range(chunks):
                for op, kernel, share in COMPUTE:
                    corr += 1
                    box("cpu_op", op, cursor, launch_gap - 1)
                    launch = cursor + launch_gap - 4
                    box("cuda_driver", "cuLaunchKernelEx", launch, 2.0, correlation=corr)
                    start = max(launch + 4 + offset, gpu_free)
                    box("kernel", kernel, start, compute_us * share / chunks, COMPUTE_STREAM, correlation=corr)
                    gpu_free = start + compute_us * share / chunks
                    cursor += launch_gap
                corr += 1
                box("cpu_op", "c10d::allreduce_", cursor, launch_gap - 1)
                message = {} if nelems is None else {
                    "Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
                    "Group size": world, "dtype": "BFloat16", "Process Group Name": "0"}
                box("cpu_op", "record_param_comms", cursor + 0.25, launch_gap - 1.5, **message)
                launch = cursor + launch_gap - 4
                box("cuda_driver", "cuLaunchKernelEx", launch, 2.0, correlation=corr)
                start = max(launch + 4 + offset, gpu_free, nccl_free)
                end = start - offset + (world - 1) * lag_us + allreduce_us / chunks  # once the last rank joined
                box("kernel", nccl, start, end - start, NCCL_STREAM, correlation=corr,
                    **(message if message_on_kernel else {}))
                nccl_free = end
                if not overlap:
                    gpu_free = max(gpu_free, end)  # the compute stream waits for the all-reduce
                cursor += launch_gap
            gpu_free = max(gpu_free, nccl_free)  # the forward waits for every all-reduce before it returns
            cpu_t += cpu_step_us + 5
        box("cuda_runtime", "cudaDeviceSynchronize", cpu_t, max(0.0, gpu_free - cpu_t) + 10, correlation=corr + 1)
        trace = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": rank, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0}],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world, "nccl_version": "2.28.9"},
            "host_name": "h200-host",
            "traceEvents": events,
            "traceName": f"{run}_rank{rank}.json",
        }
        path = folder / f"{run}_rank{rank}.json"
        path.write_text(json.dumps(trace))
        paths.append(path)
    return paths


MEMCPY = "Memcpy DtoD (Device -> Device)"
PEER_MEMCPY = "Memcpy PtoP (Device -> Device)"
SYMM_MEM_OPS = ("fused_all_gather_matmul", "fused_matmul_reduce_scatter")
BARRIER = "void c10d::symmetric_memory::barrier_kernel<unsigned int>(unsigned int**, int, unsigned long, int, int)"
COPY_STREAM = {"pid": 0, "tid": 30}


def simulated_async_tp_trace(path: Path, *, mm_us: float = 100.0, copy_us: float = 60.0,
                             barrier_us: float = 5.0, labels: tuple[str, str] | None = SYMM_MEM_OPS,
                             memcpy: str = MEMCPY) -> Path:
    """One rank's trace of async-TP on 2 ranks, three profiled steps: inside each of torch.ops.symm_mem's record
    functions (`fused_all_gather_matmul`, then `fused_matmul_reduce_scatter`) a barrier kernel, the matmul of the
    shard at hand on the compute stream and, beside it on a second stream, the copy-engine memcpy of the peer's shard
    (launched by cudaMemcpyAsync from aten::copy_), then the second shard's matmul once the copy is done.
    `labels`: the two record functions' names instead (None: none, as a CUDA graph's replay shows no op around its
    copies); `memcpy`: the copies' name."""
    events: list[dict] = []
    corr = 0

    def box(cat, name, ts, dur, lane=CPU, **args):
        events.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **lane, "args": args})

    def launched(op, runtime, cat, name, cpu_ts, gpu_ts, dur, lane):
        nonlocal corr
        corr += 1
        box("cpu_op", op, cpu_ts, 8)
        box("cuda_runtime", runtime, cpu_ts + 2, 4, correlation=corr)
        box(cat, name, gpu_ts, dur, lane, correlation=corr)

    cpu_t, gpu_t = 0.0, 100.0
    for number in (2, 3, 4):
        box("user_annotation", f"ProfilerStep#{number}", cpu_t, 90)
        box("user_annotation", "tp_mlp_fwd", cpu_t + 1, 88)
        cursor = cpu_t + 2
        for fused in labels or (None, None):
            if fused is not None:
                box("user_annotation", fused, cursor, 40)
            launched("symm_mem::barrier", "cudaLaunchKernel", "kernel", BARRIER, cursor + 1, gpu_t, barrier_us,
                     COMPUTE_STREAM)
            gpu_t += barrier_us
            launched("aten::mm", "cuLaunchKernelEx", "kernel", GEMM, cursor + 10, gpu_t, mm_us, COMPUTE_STREAM)
            launched("aten::copy_", "cudaMemcpyAsync", "gpu_memcpy", memcpy, cursor + 20, gpu_t, copy_us, COPY_STREAM)
            gpu_t += max(mm_us, copy_us)
            launched("aten::mm", "cuLaunchKernelEx", "kernel", GEMM, cursor + 30, gpu_t, mm_us, COMPUTE_STREAM)
            gpu_t += mm_us
            cursor += 42
        cpu_t += 100
    box("cuda_runtime", "cudaDeviceSynchronize", cpu_t, max(0.0, gpu_t - cpu_t) + 10, correlation=corr + 1)
    trace = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2, "nccl_version": "2.28.9"},
        "traceEvents": events,
        "traceName": path.name,
    }
    path.write_text(json.dumps(trace))
    return path
