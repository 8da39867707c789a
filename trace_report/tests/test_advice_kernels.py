"""The kernel and communication rules of trace_report.advice: each fires on a real trace with its pattern and stays
silent on the same step fixed; where no real pair exists (a convolution's bias before batch norm, a GEMM dimension
off the tensor cores' tiles) on traces written here, with and without the pattern."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import trace_report
from trace_report.advice import advise
from trace_report.tests.support import FIXTURES

H100 = FIXTURES / "h100" / "traces"
H200 = FIXTURES / "h200" / "traces"
WORLD = FIXTURES / "world"
MINE = {"out-of-place-copy", "attention-math", "conv-bias-bn", "gemm-alignment", "compile-fusion",
        "exposed-communication"}


def _advice(path: Path):
    return advise(trace_report.read_trace(path))


# --- real pairs ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [H100 / "04_a_naive_attention" / "8_16_1024_64_shapes_eager.json.gz",
                                  H200 / "04_a_naive_attention" / "8_16_1024_64_eager.json.gz"])
def test_out_of_place_copy_fires_on_masked_fill(path):
    found = _advice(path).finding("out-of-place-copy")
    assert found is not None
    assert "aten::masked_fill" in found.evidence and "Memcpy DtoD" in found.evidence
    assert "masked_fill_" in found.change
    # the copy's GPU time: 177.5 µs on the H100, 126.9 µs on the H200, once a step; the step is GPU-bound
    copy = 177.5 if "h100" in str(path) else 126.9
    low, high = found.saving_us
    assert 0.8 * copy <= low <= high <= 1.2 * copy


@pytest.mark.parametrize("path", [H100 / "04_b_inplace_ops_attention" / "8_16_1024_64_shapes_eager.json.gz",
                                  H200 / "04_b_inplace_ops_attention" / "8_16_1024_64_eager.json.gz"])
def test_out_of_place_copy_silent_in_place(path):
    assert _advice(path).finding("out-of-place-copy") is None


def test_attention_math_says_the_mask_the_trace_shows():
    """Part 3's naive attention masks its scores before the softmax: is_causal=True (a padding mask would go in
    attn_mask); SDPA's math path recorded without shapes does not say is_causal, and the change does not guess it."""
    naive = _advice(H100 / "04_a_naive_attention" / "8_16_1024_64_shapes_eager.json.gz").finding("attention-math")
    assert "scaled_dot_product_attention(q, k, v, is_causal=True)" in naive.change, naive.change
    math = _advice(H200 / "04_c_sdpa_attention" / "8_16_1024_64_math_eager.json.gz").finding("attention-math")
    assert "scaled_dot_product_attention(q, k, v, is_causal=...)" in math.change, math.change


def test_attention_math_fires_on_sdpa_math_and_saving_matches_the_fused_traces():
    found = _advice(H200 / "04_c_sdpa_attention" / "8_16_1024_64_math_eager.json.gz").finding("attention-math")
    assert found is not None and "SDPA's math path" in found.evidence
    assert "scaled_dot_product_attention" in found.change
    # the fused backends' own traces of the same step: what switching gives back, measured
    math = _advice(H200 / "04_c_sdpa_attention" / "8_16_1024_64_math_eager.json.gz").step_us
    for backend in ("flash", "efficient", "cudnn"):
        fused = _advice(H200 / "04_c_sdpa_attention" / f"8_16_1024_64_{backend}_eager.json.gz").step_us
        low, high = found.saving_us
        assert low <= math - fused <= high * 1.05, backend


@pytest.mark.parametrize("backend", ["flash", "efficient", "cudnn", "auto"])
def test_attention_math_silent_on_fused_backends(backend):
    assert _advice(H200 / "04_c_sdpa_attention" / f"8_16_1024_64_{backend}_eager.json.gz").finding(
        "attention-math") is None


def test_attention_math_finds_the_naive_chain_by_shapes():
    found = _advice(H100 / "04_a_naive_attention" / "8_16_1024_64_shapes_eager.json.gz").finding("attention-math")
    assert found is not None and "matmul-softmax-matmul" in found.evidence
    assert "bf16" not in found.change or "fp32" not in found.evidence


def test_compile_fusion_fires_eager_and_is_silent_compiled():
    eager = _advice(H100 / "04_a_naive_attention" / "8_16_1024_64_shapes_eager.json.gz")
    compiled = _advice(H100 / "04_a_naive_attention" / "8_16_1024_64_shapes_compile.json.gz")
    found = eager.finding("compile-fusion")
    assert found is not None and "torch.compile" in found.change
    assert compiled.finding("compile-fusion") is None
    # torch.compile of that step, measured: 1,253 -> 490 µs; the prediction holds it
    low, high = found.saving_us
    assert low * 0.95 <= eager.step_us - compiled.step_us <= high * 1.05


def test_compile_fusion_needs_shapes():
    assert _advice(H200 / "03_simple_mlp" / "64_128_768_3072_eager.json.gz").finding("compile-fusion") is None


def test_exposed_communication_says_skew_on_the_waiting_rank():
    rank0 = _advice(FIXTURES / "h100x2" / "64_128_768_3072_tp2_overlap4_eager_rank0.json.gz")
    found = rank0.finding("exposed-communication")
    assert found is not None and "skew" in found.title and "waiting for another rank" in found.evidence
    assert found.saving_us[0] == 0.0  # this rank's own change gives nothing back
    # rank 1, launch-bound, is the late one: its all-reduces take 33 µs, and it says nothing of skew
    rank1 = _advice(FIXTURES / "h100x2" / "64_128_768_3072_tp2_overlap4_eager_rank1.json.gz")
    assert rank1.finding("exposed-communication") is None


def test_exposed_communication_ddp_skew_and_silent_where_hidden():
    found = _advice(WORLD / "mi300x_resnet_ddp8_rank0_step16.json.gz").finding("exposed-communication")
    assert found is not None and "AllReduce" in found.evidence
    for name in ("16_512_4096_11008_tp2_overlapce4_graph_eager_rank0.json.gz",
                 "64_128_768_3072_tp2_overlap4_graph_eager_rank0.json.gz"):
        assert _advice(FIXTURES / "h100x2" / name).finding("exposed-communication") is None


# --- traces written here -----------------------------------------------------------------------------------------


class _Trace:
    """A one-thread trace: ops (nested by time), their launches and kernels, in ProfilerSteps."""

    def __init__(self, gpu: str = "NVIDIA H100 80GB HBM3"):
        self.events: list[dict] = []
        self.gpu_name = gpu
        self.correlation = 0
        self.gpu_free = 0.0

    def op(self, name, ts, dur, dims=(), types=(), concrete=None):
        args = {"Input Dims": [list(d) for d in dims], "Input type": list(types)} if dims else {}
        if concrete is not None:
            args["Concrete Inputs"] = list(concrete)
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                            "args": args})

    def launch(self, ts, kernel, gpu_us):
        self.correlation += 1
        c = self.correlation
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                            "ts": ts, "dur": 3.0, "args": {"correlation": c}})
        start = max(self.gpu_free, ts + 5.0)
        self.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": start,
                            "dur": gpu_us, "args": {"correlation": c, "stream": 7}})
        self.gpu_free = start + gpu_us

    def step(self, n, ts, dur):
        self.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": {}})

    def write(self, path: Path) -> Path:
        with gzip.open(path, "wt") as f:
            json.dump({"deviceProperties": [{"name": self.gpu_name}], "traceEvents": self.events}, f)
        return path


CONV = "sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x32x64_stage5_warpsize2x2x1_g1"
ADD = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add"
       "<c10::BFloat16> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1}>"
       "(int, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<c10::BFloat16> >(at::TensorIteratorBase&, "
       "at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1})")
BN = "void cudnn::bn_fw_tr_1C11_singleread_spec<__nv_bfloat16, float, 512, 1, 2, 0>(cudnnTensorStruct, float)"
BF16 = "c10::BFloat16"


def _conv_trace(path: Path, bias: bool) -> Path:
    """Three steps of conv2d (64 -> 64 channels, 3×3, on 32×64×56×56 bf16) then batch norm; with `bias`, the
    convolution's bias tensor and its add_ kernel (40 µs, beside the convolution's 200 µs)."""
    t = _Trace()
    ts = 1000.0
    x, w = (32, 64, 56, 56), (64, 64, 3, 3)
    for n in range(3):
        start = ts
        for _ in range(4):
            dims = (x, w, (64,) if bias else (), (), (), (), (), (), ())
            types = (BF16, BF16, BF16 if bias else "", "ScalarList", "ScalarList", "ScalarList", "Scalar",
                     "ScalarList", "Scalar")
            t.op("aten::conv2d", ts, 60, dims[:3], types[:3])
            t.op("aten::convolution", ts + 1, 58, dims, types)
            t.op("aten::_convolution", ts + 2, 56, dims, types)
            t.op("aten::cudnn_convolution", ts + 3, 25, (x, w), (BF16, BF16))
            t.launch(ts + 10, CONV, 200.0)
            if bias:
                t.op("aten::add_", ts + 35, 15, (x, (1, 64, 1, 1), ()), (BF16, BF16, "Scalar"))
                t.launch(ts + 40, ADD, 40.0)
            t.op("aten::batch_norm", ts + 70, 40, (x, (64,), (64,), (64,), (64,)), (BF16,) + ("float",) * 4)
            t.op("aten::cudnn_batch_norm", ts + 72, 35, (x, (64,), (64,), (64,), (64,)), (BF16,) + ("float",) * 4)
            t.launch(ts + 80, BN, 60.0)
            ts += 120
        t.step(n, start - 5, ts - start + 10)
        ts = max(ts, t.gpu_free) + 20
    return t.write(path)


def test_conv_bias_bn_fires_with_a_bias_and_not_without(tmp_path):
    found = _advice(_conv_trace(tmp_path / "bias.json.gz", True)).finding("conv-bias-bn")
    assert found is not None and "aten::convolution" in found.evidence and "bias=False" in found.change
    # four adds of 40 µs a step, on a GPU-bound step: about 160 µs
    assert 120 <= found.saving_us[0] <= found.saving_us[1] <= 200
    assert _advice(_conv_trace(tmp_path / "nobias.json.gz", False)).finding("conv-bias-bn") is None


def test_conv_bias_bn_silent_on_real_convolutions():
    # ResNet's convolutions have bias=False; Whisper's and Mamba's have a bias but no batch norm after
    for name in ("mi300x_resnet_ddp8_rank0_step16.json.gz", "v100_resnet50_2021_step6.json.gz",
                 "h100_resnet50_train_suite.json.gz", "h200_whisper_shapes_suite.json.gz",
                 "h200_mamba_shapes_suite.json.gz"):
        assert _advice(WORLD / name).finding("conv-bias-bn") is None, name


GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"


def _gemm_trace(path: Path, n: int, gemm_us: float) -> Path:
    """Three steps of an LM head: mm [8192, 768] · [768, n] bf16 taking `gemm_us` each."""
    t = _Trace()
    ts = 1000.0
    for step in range(3):
        t.op("aten::mm", ts, 20, ((8192, 768), (768, n)), (BF16, BF16))
        t.launch(ts + 5, GEMM, gemm_us)
        t.step(step, ts - 5, 30)
        ts = max(ts + 40, t.gpu_free + 20)
    return t.write(path)


def test_gemm_alignment_fires_on_a_slow_unaligned_gemm_only(tmp_path):
    # 2·8192·768·50257 = 632 GFLOP: 639 µs at the H100's 989 TFLOP/s; 2,000 µs is 32% of it
    found = _advice(_gemm_trace(tmp_path / "slow.json.gz", 50257, 2000.0)).finding("gemm-alignment")
    assert found is not None and "aten::mm" in found.evidence and "50257" in found.change.replace(",", "")
    assert "50304" in found.change.replace(",", "")
    # at most what 50% of the peak gives: 2,000 - 639/0.5 · (50304/50257) µs a step
    low, high = found.saving_us
    assert 0 <= low <= high <= 2000 - 639.0 / 0.5 * 50304 / 50257 + 5
    assert _advice(_gemm_trace(tmp_path / "aligned.json.gz", 50304, 2000.0)).finding("gemm-alignment") is None
    assert _advice(_gemm_trace(tmp_path / "fast.json.gz", 50257, 1000.0)).finding("gemm-alignment") is None


# --- every fixture: nothing false, and cheap ------------------------------------------------------------------


ALL = sorted(p for p in FIXTURES.rglob("*.json*") if p.is_file())
# What the rules say on the world's traces, read and judged one by one (see each finding's evidence): the DDP rank
# waits for a late rank; ResNet's and the MoE benchmark's memory-bound chains are Inductor's to fuse.
EXPECTED_WORLD = {
    "mi300x_resnet_ddp8_rank0_step16.json.gz": {"exposed-communication", "compile-fusion"},
    "v100_resnet50_2021_step6.json.gz": {"compile-fusion"},
    "b300_sm103_moe_microbench.json.gz": {"compile-fusion"},
    "h200_moe_shapes_suite.json.gz": {"out-of-place-copy"},
}


@pytest.mark.parametrize("path", [p for p in ALL if p.parent.name == "world"], ids=lambda p: p.name)
def test_world_traces_say_only_what_was_judged(path):
    advice = _advice(path)
    mine = {f.rule for f in advice.findings if f.rule in MINE}
    assert mine == EXPECTED_WORLD.get(path.name, set())
    for f in (f for f in advice.findings if f.rule in MINE):
        low, high = f.saving_us
        assert 0 <= low <= high <= advice.step_us


def _reading(trace):
    from trace_report.advice.common import Reading
    from trace_report.observer import recording_options
    from trace_report.pace import verdict
    reading = Reading(trace, verdict(trace), frozenset(recording_options(trace, trace.meta)))
    reading.replay, reading.step_us  # built once, as advise builds it for every rule
    return reading
