"""Part 3's claims (P3-01 … P3-17) on real H200 traces, and what reads them: the attention kernels' names, the
kernels' footprint, the checks failing on the wrong trace.

The traces are the lessons' own, recorded on an H200 by the post's commands (`python3 04_a_naive_attention.py`, …,
`04_c_sdpa_attention.py --backend math|flash|efficient|cudnn|auto`, `04_d_kernels_attention.py`; torch 2.11, CUDA 13,
bf16, 8 × 16 heads × 1024 × 64). One is a probe of the same recipe (04_c auto under --compile, whose lesson run was
not recorded), labelled `attn_fwd` when recorded and relabelled `sdpa_fwd`, nothing else changed.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
from pathlib import Path

import pytest
from conftest import FIXTURES, load_trace

from profiling_in_pytorch.checks import (
    attention as ac,
    attention_naive as na,
    attention_sdpa as sx,
    attention_occupancy as oc,
)
from trace_report import read_trace
from trace_report.kernels import decode, math_unit

PART3 = FIXTURES / "h200" / "traces"
SIZES = "8_16_1024_64"
NAIVE = PART3 / "04_a_naive_attention" / f"{SIZES}_eager.json.gz"
INPLACE = PART3 / "04_b_inplace_ops_attention" / f"{SIZES}_eager.json.gz"
SDPA = {b: PART3 / "04_c_sdpa_attention" / f"{SIZES}_{b}_eager.json.gz" for b in ("math", "flash", "efficient", "cudnn", "auto")}
LESSON_A, LESSON_B, LESSON_C, LESSON_D = (
    importlib.import_module(name)
    for name in ("04_a_naive_attention", "04_b_inplace_ops_attention", "04_c_sdpa_attention", "04_d_kernels_attention")
)
ALL_CLAIMS = {f"P3-{i:02d}" for i in range(1, 18)}


def flags(**given) -> argparse.Namespace:
    return argparse.Namespace(**{"batch": 8, "heads": 16, "seq": 1024, "head_dim": 64, "compile": False, "backend": "auto", **given})


def sdpa_paths(compiled: bool = False) -> dict[str, Path]:
    mode = "compile" if compiled else "eager"
    paths = {b: PART3 / "04_c_sdpa_attention" / f"{SIZES}_{b}_{mode}.json.gz" for b in ("math", "flash", "efficient", "cudnn", "auto")}
    return {**paths, "in-place": INPLACE}


def lesson_c(backend: str, runs: str | None = None, compiled: bool = False):
    return LESSON_C.expectations(flags(backend=backend, compile=compiled), runs or backend, "why", sdpa_paths(compiled))


# fixture, the lesson's expectations for that run, the ✗ the H200 shows (claim, known reason)
H200_RUNS = [
    (NAIVE, LESSON_A.expectations(flags()), set()),
    (PART3 / "04_a_naive_attention" / f"{SIZES}_compile.json.gz", LESSON_A.expectations(flags(compile=True)), set()),
    (INPLACE, LESSON_B.expectations(flags(), NAIVE), set()),
    (SDPA["math"], lesson_c("math"), set()),
    (SDPA["efficient"], lesson_c("efficient"), {("P3-16", sx.HOPPER_CUDNN)}),
    (SDPA["flash"], lesson_c("flash"), {("P3-16", sx.HOPPER_CUDNN)}),
    (SDPA["cudnn"], lesson_c("cudnn"), {("P3-16", sx.HOPPER_CUDNN)}),
    (SDPA["auto"], lesson_c("auto", runs="cudnn"), {("P3-16", sx.HOPPER_CUDNN)}),
    # No lesson run of `04_c --compile` was recorded on the H200: the probe of the same recipe, relabelled sdpa_fwd.
    (FIXTURES / "h200" / "part3_probe" / f"{SIZES}_auto_compile.json.gz", lesson_c("auto", runs="cudnn", compiled=True), set()),
]
IDS = ["04_a", "04_a compile", "04_b", "04_c math", "04_c efficient", "04_c flash", "04_c cudnn", "04_c auto",
       "04_c auto compile"]


@pytest.mark.parametrize("fixture,expectations,known", H200_RUNS, ids=IDS)
def test_the_h200_trace_shows_each_claim_or_the_hardware_says_why(fixture, expectations, known):
    trace = read_trace(fixture)
    seen = [(e, e.check(trace)) for e in expectations]
    failed = {(e.claim, o.reason) for e, o in seen if o.ok is False}
    assert failed == known, {e.title: (o.evidence, o.reason) for e, o in seen if o.ok is False}
    assert [e.title for e, o in seen if o.ok is None] == []


def test_04d_guesses_hold_for_torchs_flashattention_2(tmp_path):
    """No H200 trace of 04_d yet: its torch source runs the kernel of 04_c's flash trace, which stands in here,
    relabelled `flash_kernel_fwd` and written beside it under 04_d's name, so the comparison reads two files."""
    trace = load_trace(SDPA["flash"])
    for event in trace["traceEvents"]:
        if event.get("name") == "sdpa_fwd":
            event["name"] = LESSON_D.LABEL
    path = tmp_path / f"{SIZES}_torch_flashattn_eager.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(trace, f)
    outcomes = [(e, e.check(read_trace(path))) for e in LESSON_D.expectations("torch", "cuda", SDPA["flash"])]
    assert all(o.ok for _, o in outcomes), {e.title: o.evidence for e, o in outcomes if not o.ok}
    same = next(o for e, o in outcomes if "same algorithm" in e.text)
    assert same.evidence.startswith("byte-identical names")


def test_every_claim_of_part_3_is_checked_by_a_lesson():
    checked = {e.claim for _, expectations, _ in H200_RUNS for e in expectations if e.claim}
    assert checked == ALL_CLAIMS, sorted(ALL_CLAIMS ^ checked)


def test_the_backends_side_by_side_are_the_posts_table():
    """P3-16 and P3-17 from the traces: GPU operations per forward, and where the time went on this H200."""
    rows = {name: ac.summarize(read_trace(path), "attn_fwd" if name in ("naive", "in-place") else "sdpa_fwd")
            for name, path in {"naive": NAIVE, "in-place": INPLACE, **SDPA}.items()}
    assert {name: row.operations for name, row in rows.items()} == {
        "naive": 6, "in-place": 5, "math": 20, "flash": 1, "efficient": 1, "cudnn": 1, "auto": 1}
    assert {name: row.backend for name, row in rows.items() if name in SDPA} == {
        "math": "math", "flash": "flash", "efficient": "efficient", "cudnn": "cudnn", "auto": "cudnn"}
    gpu = {name: row.gpu_us for name, row in rows.items()}
    assert gpu["math"] > 2 * gpu["in-place"] and gpu["in-place"] < gpu["naive"]  # the copy costs GPU time
    assert gpu["cudnn"] < gpu["flash"] < gpu["efficient"] < gpu["in-place"]  # H200: cuDNN first, efficient last
    assert {name: row.transposes for name, row in rows.items() if name in ("flash", "efficient", "cudnn")} == {
        "flash": 4, "efficient": 4, "cudnn": 0}


# --- the checks can fail: on the wrong trace -------------------------------------------------------------------


def test_the_naive_claims_fail_on_the_in_place_trace_and_back():
    inplace, naive = read_trace(INPLACE), read_trace(NAIVE)
    assert na.copy_inside_masked_fill("attn_fwd").check(inplace).ok is False
    assert ac.operations_per_forward("attn_fwd", 6).check(inplace).ok is False
    assert na.operations_in_order("attn_fwd", ("GEMM", "mul", "copy", "masked_fill", "softmax", "GEMM")).check(inplace).ok is False
    assert na.operations_in_order("attn_fwd", ("GEMM", "mul", "masked_fill", "softmax", "GEMM")).check(naive).ok is False
    # compared with itself, the naive trace keeps its copy: the comparison fails
    assert na.masking_step_against(INPLACE, "attn_fwd", "").check(naive).ok is False


def test_the_fused_backends_are_told_apart_by_their_kernels():
    traces = {b: read_trace(SDPA[b]) for b in ("flash", "efficient", "cudnn")}
    for backend, trace in traces.items():
        assert ac.backend_of(trace, trace.steps[0].phase("sdpa_fwd")) == backend
        for other in traces:
            outcome = sx.one_attention_kernel("sdpa_fwd", other, "").check(trace)
            assert outcome.ok is (other == backend), (backend, other, outcome.evidence)
    cudnn, flash = traces["cudnn"], traces["flash"]
    assert sx.launched_through("sdpa_fwd", "cuLaunchKernelEx").check(flash).ok is False  # flash: cudaLaunchKernel
    assert oc.occupancy_gap("sdpa_fwd").check(flash).ok is False  # 13%: CUPTI estimated it
    assert sx.transposes("sdpa_fwd", 0).check(flash).ok is False
    assert sx.own_op_allocates_and_launches("sdpa_fwd", "aten::_cudnn_attention_forward").check(flash).ok is False
    assert oc.heavy_blocks("sdpa_fwd", at_most=10).check(flash).ok is False
    assert oc.heavy_blocks("sdpa_fwd").check(cudnn).ok is True  # the post: cuDNN's blocks are as heavy as flash's
    assert oc.heavy_blocks("sdpa_fwd").check(read_trace(SDPA["math"])).ok is False  # no attention kernel there


def test_the_math_claims_fail_on_a_fused_backend():
    flash = read_trace(SDPA["flash"])
    assert sx.mask_rebuilt("sdpa_fwd").check(flash).ok is False
    assert sx.safe_softmax("sdpa_fwd").check(flash).ok is False
    assert ac.operations_per_forward("sdpa_fwd", 20).check(flash).ok is False
    assert sx.gemms_on("sdpa_fwd", "CUDA cores", "").check(flash).ok is False  # no GEMM at all
    math = read_trace(SDPA["math"])
    assert sx.gemms_on("sdpa_fwd", "tensor cores", "").check(math).ok is False


def test_a_missing_comparison_is_skipped_and_says_what_to_run(tmp_path):
    math = read_trace(SDPA["math"])
    outcome = sx.gpu_time_against(tmp_path / "none.json", "sdpa_fwd", "attn_fwd", 2.0, "run 04_b first").check(math)
    assert outcome.ok is None and "run 04_b first" in outcome.evidence
    missing = {**{b: SDPA[b] for b in ac.FUSED}, "efficient": tmp_path / "none.json"}
    outcome = sx.fastest_on_gpu("sdpa_fwd", missing, "flash", lambda b: f"run --backend {b}").check(read_trace(SDPA["flash"]))
    assert outcome.ok is None and "run --backend efficient" in outcome.evidence


def test_pinning_costs_cpu_reads_both_runs():
    pinned = sx.pinning_costs_cpu("sdpa_fwd", SDPA["cudnn"], SDPA["auto"], lambda name: "").check(read_trace(SDPA["cudnn"]))
    assert pinned.ok is True and "pinned cudnn, unpinned cudnn" in pinned.evidence
    swapped = sx.pinning_costs_cpu("sdpa_fwd", SDPA["auto"], SDPA["cudnn"], lambda name: "").check(read_trace(SDPA["auto"]))
    assert swapped.ok is False


# --- what the trace says about a kernel ----------------------------------------------------------------------


def test_the_reader_keeps_each_kernels_footprint_and_the_devices_limits():
    flash = read_trace(SDPA["flash"])
    kernel = flash.steps[0].kernels[0]
    assert (kernel.registers, kernel.shared_memory, kernel.block, kernel.occupancy) == (255, 49152, (128, 1, 1), 13.0)
    assert flash.device_properties["numSms"] == 132 and flash.device_properties["regsPerMultiprocessor"] == 65536
    # 255 registers × 128 threads: two blocks per SM by registers, 8 of 64 warps (the post's A100 arithmetic)
    assert oc.footprint(kernel, flash.device_properties) == (2, "registers", 0.125)
    cudnn = read_trace(SDPA["cudnn"]).steps[0].kernels[0]
    assert cudnn.occupancy == 0.0
    assert oc.footprint(cudnn, flash.device_properties) == (1, "registers and shared memory", 0.1875)


def test_attention_kernel_names_are_decoded():
    efficient = decode("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
                       "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)")
    assert efficient.short == "fmha_cutlassF_bf16_aligned_64x64_rf_sm80" and efficient.ops == ("attention",)
    details = dict(efficient.details)
    assert (details["pass"], details["dtype"], details["tile"], details["arch"]) == ("forward", "bf16", "64x64", "built for sm80 (Ampere)")
    assert "registers" in details["accumulator"] and not efficient.is_gemm

    flash = decode("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
                   "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, "
                   "false, true, true, false, false>(pytorch_flash::Flash_fwd_params)")
    assert flash.family == "FlashAttention-2 (vendored in PyTorch)" and not flash.is_gemm
    assert flash.short == "pytorch_flash::flash_fwd_kernel<64, 128x128, 4 warps>"
    assert dict(flash.details)["dtype"] == "bf16"
    hub = decode("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::half_t, "
                 "Flash_kernel_traits<128, 64, 128, 4, cutlass::half_t> >, true>(flash::Flash_fwd_params)")
    assert hub.family == "FlashAttention-2" and "split-KV" in dict(hub.details)["split"]

    cudnn = decode("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0")
    details = dict(cudnn.details)
    assert cudnn.family == "cuDNN (generated)" and cudnn.ops == ("attention",) and not cudnn.is_gemm
    assert (details["arch"], details["pass"], details["tile"], details["cluster"]) == ("sm90 (Hopper)", "forward", "64x128x64", "1x1x1")
    assert "wgmma" in details["math"] and details["knob"].startswith("7")
    assert "wmma" in dict(decode("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1_kernel0_0").details)["math"]


@pytest.mark.parametrize("name,unit", [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", "CUDA cores"),
    ("ampere_sgemm_128x64_tn", "CUDA cores"),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "tensor cores"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "tensor cores"),
    ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8", "tensor cores"),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel", "tensor cores"),
])
def test_a_gemms_name_says_which_units_it_runs_on(name, unit):
    assert math_unit(name) == unit


@pytest.mark.parametrize("name,op", [
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, false, false>"
     "(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)", "softmax"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)", "softmax"),
    ("void at::native::triu_tril_kernel<bool, int, false, 8, false>(at::cuda::detail::TensorInfo<bool, int>, "
     "at::cuda::detail::TensorInfo<bool const, int>, long, long, int)", "tril"),
    ("void at::native::triu_tril_kernel<bool, int, true, 8, false>(at::cuda::detail::TensorInfo<bool, int>)", "triu"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::"
     "masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}>(int)", "masked_fill"),
])
def test_the_attention_forwards_aten_kernels_are_named_by_their_op(name, op):
    decoded = decode(name)
    assert decoded.family == "ATen" and decoded.ops == (op,) and decoded.short.endswith(f"<{op}>"), decoded


def test_inductors_online_softmax_kernel_lists_what_it_fused():
    name = decode("triton_per_fused__softmax_exp_masked_fill_mul_prepare_softmax_online_sub_view_0")
    assert name.ops == ("_softmax", "exp", "masked_fill", "mul", "prepare_softmax_online", "sub", "view")
