"""The world's traces: torch.profiler (Kineto) traces that other people's programs wrote, on GPUs this suite never ran
on (MI300X, MI210/MI250, B200, B300, H100, H800, A100, V100), read by `trace-report` as a user would read them.

The files are in trace_report/tests/fixtures/world/; its README.md says where each comes from, which GPU wrote it, what it shows and
how it was cut down. For each one: the GPU is named the way its vendor names it (AMD by gfx, NVIDIA by sm), the kernels
of each family are the kind of work they do, at most a twentieth of the GPU time is left as kind "other", every short name
fits a table cell, and the report runs to the end. Expectations come from the trace itself where they can (its device
properties, its own kernels and launches); what is typed here is what a reader of that trace would say.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from trace_report.kernels import (ATTENTION, COMMUNICATION, CONVOLUTION, COPY, ELEMENTWISE, GEMM,
                                                 NORMALIZATION, OPTIMIZER, OTHER, REDUCTION, ROUTING, decode,
                                                 in_optimizer, kind_of_kernel)
from trace_report.kernels.name import SHORT_LIMIT
from trace_report.model import Trace
from trace_report.reader import read_trace
from trace_report.report import main as trace_report
from trace_report.summary import Summary, summarize

WORLD = Path(__file__).resolve().parent / "fixtures" / "world"
OTHER_LIMIT = 0.05  # the share of GPU time a reader may be left with as "other": past it, the kinds table says little
SIZE_LIMIT = 4 * 1024 * 1024  # what the fixtures may weigh together in the repository


@dataclass(frozen=True)
class World:
    """One fixture and what a reader of it knows."""

    file: str
    arch: str  # "gfx942", "sm90", ...: in the device label; "nvidia" where nothing names one; "" for no GPU
    rules: tuple[tuple[str, str], ...] = ()  # (regex on a kernel's name, the kind every such kernel does)
    top: str | None = None  # the kind of the kernel (name and launching op) with the most GPU time
    properties: bool = True  # the trace carries deviceProperties

    def __str__(self) -> str:
        return self.file.removesuffix(".json.gz")


TENSILE_GEMM = r"^Cijk_(?!.*PostGSU)"  # Tensile's GEMMs; `Cijk_..._PostGSU<n>` adds a split-K GEMM's partial sums

WORLDS = [
    World("mi300x_resnet_ddp8_rank0_step16.json.gz", "gfx942", (
        (TENSILE_GEMM, GEMM),
        (r"^ncclDevKernel_", COMMUNICATION),  # RCCL keeps NCCL's names
        (r"^igemm_(fwd|bwd|wrw)_", CONVOLUTION),  # MIOpen
        (r"^batched_transpose_|^transpose_[A-Z]{4}2[A-Z]{4}", COPY),
        (r"^_ZN2ck16tensor_operation6device12_GLOBAL__N_1\d+kernel_grouped_conv_fwd", CONVOLUTION),  # CK, mangled
        (r"batch_norm_(backward|collect_statistics|transform_input)_kernel", NORMALIZATION),
    ), top=COMMUNICATION),  # DDP's all-reduce waits for the other seven ranks
    World("mi300x_vllm_tp4_rank0_185to210ms.json.gz", "gfx942", (
        (TENSILE_GEMM, GEMM),
        (r"^Cijk_.*PostGSU", REDUCTION),
        (r"^ncclDevKernel_Generic", COMMUNICATION),
        (r"fused_add_rms_norm_kernel", NORMALIZATION),
        (r"paged_attention_ll4mi", ATTENTION),
    ), top=GEMM),
    World("mi300x_sglang_qwen3_8b_decode.json.gz", "gfx942", (
        (TENSILE_GEMM, GEMM),
        (r"^_ZN5aiter24add_rmsnorm_quant_kernel", NORMALIZATION),  # AITER, mangled
        (r"paged_attention_ll4mi", ATTENTION),
        (r"^_ZN7sgl_hip10activation18act_and_mul_kernel", ELEMENTWISE),
    ), top=GEMM),
    World("gfx942_vllm_decode_graph_replay_emptyname.json.gz", "gfx942", (
        (TENSILE_GEMM, GEMM),
        (r"^_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwd", NORMALIZATION),  # ck_tile, mangled
        (r"^kernel_unified_attention_[23]d$", ATTENTION),
        (r"^_matmul_ogs_", GEMM),
        (r"^_topk_forward$", ROUTING),
    ), top=GEMM),
    World("mi210_gpu_only.json.gz", "gfx90a", (
        (TENSILE_GEMM, GEMM),
        (r"^igemm_(fwd|bwd|wrw)_", CONVOLUTION),
        (r"^batched_transpose_", COPY),
    ), top=NORMALIZATION),
    World("mi250_minitoy_train_hta.json.gz", "gfx90a", ((TENSILE_GEMM, GEMM),)),
    World("amd_nodeviceprops_hipblaslt_gemm.json.gz", "gfx942", (
        (TENSILE_GEMM, GEMM),
        (r"^Cijk_.*PostGSU", REDUCTION),
    ), top=GEMM, properties=False),
    World("b200_vllm_eager_tp8_rank0_60to90ms.json.gz", "sm100", (
        (r"^bmm_", GEMM),  # TensorRT-LLM's MoE GEMMs, MXFP4 x MXFP8
        (r"^nvjet_", GEMM),
        (r"^fmhaSm100", ATTENTION),
        (r"multimem_all_reduce_kernel", COMMUNICATION),  # symmetric memory, no NCCL
        (r"^ncclDevKernel_", COMMUNICATION),
        (r"routingIndices", ROUTING),
        (r"rms_norm_kernel", NORMALIZATION),
    ), top=GEMM),
    World("b300_sm103_moe_microbench.json.gz", "sm103", (
        (r"^nvjet_sm103_", GEMM),
        (r"gatherTopK", ROUTING),
    )),
    World("h100_vllm_tp4_rank0_cudagraph_58to96ms.json.gz", "sm90", (
        (r"^sm90_xmma_gemm_", GEMM),
        (r"cutlass_80_tensorop_", GEMM),
        (r"^ncclDevKernel_", COMMUNICATION),
        (r"flash::FlashAttn", ATTENTION),  # FlashAttention-3
        (r"^triton_red_fused_.*rsqrt", NORMALIZATION),  # RMSNorm, compiled
    ), top=GEMM),
    World("h800_deepseekv3_train_ep_rank0.json.gz", "sm90", (
        (r"dpsk::ep::internode::(dispatch|combine)<", COMMUNICATION),  # DeepEP's all-to-all
        (r"device_kernel<dpsk::grouped_gemm::", GEMM),
        (r"^sm90_xmma_gemm_", GEMM),
        (r"flash::(compute_attn_ws|FlashAttnBwd)<", ATTENTION),
        (r"layer_norm::ln_(fwd|bwd)", NORMALIZATION),
    ), top=COMMUNICATION),
    World("a100_alexnet_cudnn_hta.json.gz", "sm80", (
        (r"^cudnn_ampere_scudnn_|^sm80_xmma_fprop_", CONVOLUTION),
        (r"^ampere_sgemm_", GEMM),
        (r"nchwToNhwcKernel", COPY),
    ), top=COPY),  # the input's copy to the GPU, pageable
    World("a100_nccl_hta_step5.json.gz", "sm80", (
        (r"^ncclKernel_", COMMUNICATION),
        (r"cudnn::bn_(fw|bw)", NORMALIZATION),
        (r"cutlass_cudnn|^sm80_xmma_(fprop|dgrad|wgrad)_", CONVOLUTION),
        (r"cutlass_80_tensorop_", GEMM),
        (r"multi_tensor_apply_kernel", OPTIMIZER),
    ), top=COMMUNICATION),
    World("v100_resnet50_2021_step6.json.gz", "sm70", (
        (r"^volta_sgemm_", GEMM),
        (r"wgrad_alg|dgrad_engine|implicit_convolve|cudnn::winograd", CONVOLUTION),
        (r"cudnn::bn_(fw|bw)", NORMALIZATION),
    ), top=CONVOLUTION),
    World("v100_resnet50_2021_nodeviceprops_step6.json.gz", "sm70", (
        (r"^volta_sgemm_", GEMM),
        (r"wgrad_alg|dgrad_engine|implicit_convolve", CONVOLUTION),
        (r"cudnn::bn_(fw|bw)", NORMALIZATION),
    ), top=CONVOLUTION, properties=False),
    World("cpu_only_hta.json.gz", "", properties=False),
    World("a100_event_sync_two_streams_hta.json.gz", "sm80", ((r"^ampere_sgemm", GEMM),), top=GEMM),
    World("a100_cupti_range_profiler_hta.json.gz", ""),  # its kernels are CUPTI ranges, no kernel events
    World("hta_trace_compare_cpu_heavy.json.gz", "nvidia", ((r"vectorized_elementwise_kernel", ELEMENTWISE),),
          properties=False),  # its one kernel names no architecture
    World("h100_resnet50_train_suite.json.gz", "sm90", (
        (r"^sm90_xmma_(fprop|dgrad|wgrad)_|cutlass_tensorop_\w*fprop", CONVOLUTION),
        (r"batch_norm_\w*channels_last", NORMALIZATION),
        (r"multi_tensor_apply_kernel", OPTIMIZER),
    ), top=NORMALIZATION),  # batch norm's statistics outweigh the convolutions at this size
    World("h100_bert_suite.json.gz", "sm90", (
        (r"^nvjet_sm90_.*_bias_", GEMM),
        (r"^cudnn_generated_fort_native_sdpa_", ATTENTION),
        (r"layer_norm", NORMALIZATION),
    ), top=GEMM),
    World("h100_unet_train_suite.json.gz", "sm90", (
        (r"^sm\d+_xmma_(fprop|dgrad|wgrad)_", CONVOLUTION),
        (r"nchwToNhwcKernel|nhwcToNchwKernel|tensorTransformGeneric", COPY),  # cuDNN's layout transforms
        (r"ComputeFusedParams|ComputeBackwardFusedParams", NORMALIZATION),  # group norm's
    ), top=COPY),
    World("h100_mlp_max_autotune_suite.json.gz", "sm90", (
        (r"^nvjet_", GEMM),
        (r"^triton_poi_fused_", ELEMENTWISE),
        (r"multi_tensor_apply_kernel<.*UnaryOpFunctor.*at::native::Copy<", COPY),  # CUDA graph trees copy the
        # inputs into their buffers (`_foreach_copy_`): a copy, not an optimizer
    ), top=GEMM),
    World("h200_flex_attention_train_shapes_suite.json.gz", "sm90", (
        (r"^triton_tem_fused_flex_attention", ATTENTION),  # Inductor's templates, forward and backward
        (r"^nvjet_", GEMM),
    ), top=ATTENTION),  # the backward's template, 68 µs a step
    World("h200_mamba_shapes_suite.json.gz", "sm90", (
        (r"^nvjet_", GEMM),
    ), top=GEMM),  # one small GEMM called per scan position; the scan's pointwise kernels are many names
    World("h200_moe_shapes_suite.json.gz", "sm90", (
        (r"radixSortKVInPlace|gatherTopK", ROUTING),
        (r"^_ZN7cutlass13device_kernel.*Gemm", GEMM),  # torch's grouped GEMM (CUTLASS 3, mangled)
    ), top=ROUTING),  # the router's sort
    World("h200_whisper_shapes_suite.json.gz", "sm90", (
        (r"^cudnn_generated_fort_native_sdpa", ATTENTION),
        (r"vectorized_layer_norm_kernel", NORMALIZATION),
        (r"^nvjet_", GEMM),
    ), top=COPY),
]
GPU_WORLDS = [world for world in WORLDS if world.arch]


@lru_cache(maxsize=None)
def _read(file: str) -> tuple[Trace, Summary]:
    trace = read_trace(WORLD / file)
    return trace, summarize(trace)


def _kernels(trace: Trace):
    return [work for work in trace.gpu_work() if work.kind == "kernel"]


def _kind(work) -> str:
    """A kernel's kind as the summary decides it: its name, whether it ran in the optimizer, the op that launched it."""
    return kind_of_kernel(work.name, in_optimizer(work.launch_path), work.launched_by)


# --- the files --------------------------------------------------------------------------------------------------


def test_every_fixture_is_listed_and_documented():
    on_disk = sorted(path.name for path in WORLD.glob("*.json.gz"))
    assert on_disk == sorted(world.file for world in WORLDS)
    readme = (WORLD / "README.md").read_text()
    for name in on_disk:
        assert f"`{name}`" in readme, f"{name}: no README entry (source, GPU, what it shows, how it was cut)"


def test_the_fixtures_stay_small():
    assert sum(path.stat().st_size for path in WORLD.iterdir()) < SIZE_LIMIT


# --- per trace --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("world", GPU_WORLDS, ids=str)
def test_the_gpu_is_named(world):
    trace, _ = _read(world.file)
    properties = trace.device_properties
    assert bool(properties) is world.properties
    if world.arch == "nvidia":  # CUDA's runtime calls, no properties, no architecture in any kernel's name
        assert trace.device == "an NVIDIA GPU (no device properties; its kernels do not name an architecture)"
    elif world.arch.startswith("sm") and properties:
        # NVIDIA: the compute capability the properties give, as an sm
        assert trace.device == f"{properties['name']} (sm{properties['computeMajor']}{properties['computeMinor']})"
    elif world.arch.startswith("sm"):
        assert trace.device.startswith(f"an NVIDIA GPU ({world.arch} ")
        assert trace.device.endswith(", inferred from kernel names)")
    else:
        # AMD: by gfx, never an "sm"; a name the properties give comes first
        assert f"({world.arch}, " in trace.device
        assert "sm" not in trace.device.replace("MI", "")
        name = properties.get("name") if properties else ""
        assert trace.device.startswith(name or "an AMD GPU")
        if not properties:
            assert trace.device.endswith(", inferred from kernel names)")


@pytest.mark.parametrize("world", GPU_WORLDS, ids=str)
def test_kernel_families_do_their_kind_of_work(world):
    trace, _ = _read(world.file)
    kernels = _kernels(trace)
    for pattern, kind in world.rules:
        matching = [work for work in kernels if re.search(pattern, work.name)]
        assert matching, f"no kernel matches {pattern!r}"  # a rule that matches nothing checks nothing
        wrong = {(work.short_name, _kind(work)) for work in matching if _kind(work) != kind}
        assert not wrong, f"{pattern!r} should be {kind}: {sorted(wrong)[:5]}"


@pytest.mark.parametrize("world", [w for w in GPU_WORLDS if w.top], ids=str)
def test_the_top_kernel(world):
    _, summary = _read(world.file)
    top = max(summary.top, key=lambda row: row.total_us)
    assert top.kind == world.top, (top.short, top.kind)


@pytest.mark.parametrize("world", GPU_WORLDS, ids=str)
def test_little_gpu_time_is_left_as_other(world):
    trace, summary = _read(world.file)
    assert summary.on_gpu
    # the kinds add up to the steps' GPU time: every kernel, memcpy and memset is in one of them
    by_kind = {row.kind: row.us for row in summary.kinds}
    gpu_us = sum(work.dur for work in trace.gpu_work())
    assert sum(by_kind.values()) == pytest.approx(summary.total_us) == pytest.approx(gpu_us)
    assert summary.items == sum(1 for _ in trace.gpu_work())
    assert by_kind.get(OTHER, 0.0) <= OTHER_LIMIT * summary.total_us


@pytest.mark.parametrize("world", GPU_WORLDS, ids=str)
def test_short_names_fit_a_cell(world):
    trace, summary = _read(world.file)
    names = {work.name for work in trace.gpu_work()} | {work.name for work in trace.gpu_outside_steps}
    too_long = [name for name in names if len(decode(name).short) > SHORT_LIMIT]
    assert not too_long
    assert all(0 < len(row.short) <= SHORT_LIMIT for row in summary.top)


@pytest.mark.parametrize("world", WORLDS, ids=str)
def test_trace_report_runs(world, capsys):
    trace, _ = _read(world.file)
    assert trace_report([str(WORLD / world.file)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    flat = " ".join(out.split())  # rich folds long lines
    assert flat.startswith(f"{world.file} · {trace.device or 'no GPU in the trace'} · ")
    assert "verdict:" in flat


@pytest.mark.parametrize("world", WORLDS, ids=str)
def test_trace_report_json(world, capsys):
    _, summary = _read(world.file)
    assert trace_report([str(WORLD / world.file), "--json"]) == 0
    out, _ = capsys.readouterr()
    found = json.loads(out)["summary"]
    assert found["measure"] == ("gpu_time" if world.arch else "cpu_self_time")
    assert found["total_us"] == pytest.approx(summary.total_us, abs=1e-3)
    if world.arch:
        assert sum(row["share"] for row in found["by_kind"] if row["share"] is not None) == pytest.approx(1, abs=1e-3)


# --- what a few of them show ------------------------------------------------------------------------------------


@pytest.mark.parametrize("file, launch", [
    ("h100_vllm_tp4_rank0_cudagraph_58to96ms.json.gz", "cudaGraphLaunch"),
    ("mi300x_vllm_tp4_rank0_185to210ms.json.gz", "hipGraphLaunch"),
    ("mi300x_sglang_qwen3_8b_decode.json.gz", "hipGraphLaunch"),
    ("gfx942_vllm_decode_graph_replay_emptyname.json.gz", "hipGraphLaunch"),
])
def test_graph_replays_link_their_kernels(file, launch):
    # A CUDA/HIP graph's kernels share their replay's correlation id: each is linked to the one launch call
    trace, _ = _read(file)
    replayed = [work for work in _kernels(trace) if work.launch is not None and work.launch.name == launch]
    launches = {id(work.launch) for work in replayed}
    assert replayed and len(replayed) > len(launches)  # several kernels per replay
    # every replay of the trace's that ran kernels is one of these launches, none left unlinked
    calls = [call for step in trace.steps for call in step.runtime if call.name == launch]
    assert len(launches) <= len(calls)
    assert all(work.launch_ts <= work.ts for work in replayed)  # launched before they ran


def test_rccl_generic_kernels_in_a_ddp_step():
    # RCCL builds one generic kernel for every collective: it says no collective; DDP's all-reduce launched it
    trace, _ = _read("mi300x_resnet_ddp8_rank0_step16.json.gz")
    rccl = [work for work in _kernels(trace) if work.name.startswith("ncclDevKernel_Generic")]
    assert rccl and {decode(work.name).family for work in rccl} == {"NCCL/RCCL"}
    assert all(any(box.startswith(("c10d::", "nccl:")) for box in work.launch_path) for work in rccl)


def test_cpu_only_trace():
    trace, summary = _read("cpu_only_hta.json.gz")
    assert trace.device is None and not trace.has_gpu
    assert not summary.on_gpu
    assert any("CPU-only" in note for note in trace.notes)


@pytest.mark.parametrize("world", WORLDS, ids=str)
def test_the_default_report_fits_a_screen(world, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert trace_report([str(WORLD / world.file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 120, len(lines)  # the rest behind --rows, --steps and --kernels
    assert max(len(line) for line in lines) <= 100


def test_what_does_not_fit_is_named_and_shown_whole_on_request(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    path = str(WORLD / "h100_vllm_tp4_rank0_cudagraph_58to96ms.json.gz")
    assert trace_report([path]) == 0
    brief = capsys.readouterr().out
    left = re.search(r"left out to fit a screen: (.*) \(--rows 0 prints every section whole\)", re.sub(r"\s+", " ", brief))
    assert left, brief[-400:]
    assert trace_report([path, "--rows", "0"]) == 0
    whole = capsys.readouterr().out
    assert "left out to fit a screen" not in whole and len(whole.splitlines()) > 120
    assert "CUDA graph replays" in whole and "Who sets the pace" in whole
