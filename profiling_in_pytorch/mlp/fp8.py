"""The post's MLP in FP8 (e4m3), inference only, as a reader would build it, weights quantized once at load:

    ScaledMMGeGLUMLP("tensorwise")  torch._scaled_mm, one scale per tensor: x's and m's amax found each forward
    ScaledMMGeGLUMLP("rowwise")     torch._scaled_mm, one scale per token (activations) and per output channel
                                    (weights): cuBLAS applies both in its epilogue
    torchao_fp8_mlp(mlp)            torchao's Float8DynamicActivationFloat8WeightConfig (rowwise), the library
                                    recipe: quantize_() swaps each nn.Linear's weight for a float8 tensor subclass
    FusedFP8GeGLUMLP                ours (triton_ops/fp8_geglu.py): x to e4m3 in one small kernel, the gate/up
                                    GEMM in e4m3 with the GeGLU and m's quantization (1 x 128 blocks) in its
                                    epilogue, then the down GEMM on those blocks (cuBLAS's
                                    1 x 128 block scaling on Hopper, else a Triton kernel): three kernels, m never
                                    in bf16

Each computes down(gelu_tanh(gate(x)) * up(x)) from the weights of a `SimpleGeGLUMLP` (`from_module`), takes and
returns bf16, and needs a GPU with e4m3 tensor cores (sm_89+; the fused module sm_90+, or Triton's interpreter
on a CPU at tiny sizes). `profiling_in_pytorch/mlp/fp8_scaling.py` holds the scaling maths in plain torch.
"""

from __future__ import annotations

import copy
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from trace_report.errors import UsageError
from profiling_in_pytorch.mlp.fp8_scaling import (
    BLOCK,
    E4M3,
    dequantize_blockwise,
    dequantized_rowwise,
    emulated_forward,
    quantize_rowwise,
    quantize_tensorwise,
    quantize_tiles,
    scaled_matmul,
)
from profiling_in_pytorch.mlp.triton_ops.fp8_geglu import (
    fp8_blockscaled_gemm,
    fp8_geglu_gemm,
    fp8_supported,
    group_size,
    kept_launches,
    quantize_rows,
)
from profiling_in_pytorch.mlp.triton_ops.geglu import INTERPRETING, interleave_gate_up

GRANULARITIES = ("tensorwise", "rowwise")
TORCHAO_MISSING = "torchao is not installed (uv sync --extra fp8, or pip install 'torchao>=0.18')"


def fp8_unavailable(device: torch.device, *, fused: bool = False) -> str | None:
    """Why FP8 GEMMs cannot run on `device`, or None: e4m3 tensor cores from sm_89 (Ada, Hopper, Blackwell);
    the fused module's kernels also read through TMA (sm_90+). Its kernels also run under Triton's interpreter."""
    if device.type != "cuda":
        if fused and INTERPRETING:
            return None
        return "needs a CUDA GPU with FP8 tensor cores (sm_89 or newer)" + (
            "; or TRITON_INTERPRET=1 for the fused module at tiny sizes" if fused else "")
    capability = torch.cuda.get_device_capability(device)
    if capability < (8, 9):
        return f"sm_{capability[0]}{capability[1]} has no FP8 tensor cores (sm_89 or newer)"
    if fused and not fp8_supported(device.index or 0):
        return "the fused FP8 kernels read through TMA: Hopper (sm_90) or newer"
    return None


def require_fp8(device: torch.device, *, fused: bool = False) -> None:
    why = fp8_unavailable(device, fused=fused)
    if why:
        raise UsageError(f"FP8: {why}")


def _weights(mlp: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach(), mlp.down_proj.weight.detach()


def _e4m3_interleave(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """interleave_gate_up on e4m3 tensors (through their bytes: stacking float8 is not implemented everywhere)."""
    return interleave_gate_up(a.view(torch.uint8), b.view(torch.uint8)).view(E4M3)


class ScaledMMGeGLUMLP(nn.Module):
    """The MLP on torch._scaled_mm, gate and up in one GEMM of their stacked weights ([2N, K]), as a reader writes
    it: x and m quantized in torch ops (amax, divide, clamp, cast: the kernels the trace shows and --compile fuses).

    tensorwise: one scale per tensor (0-d); rowwise: scale_a [M, 1] per token, scale_b [1, N] per output channel.
    On a CPU the GEMMs run in fp32 on the dequantized operands (`scaled_matmul`): the scaling ops are the same.
    """

    def __init__(self, mlp: nn.Module, granularity: str = "rowwise"):
        super().__init__()
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity is one of {GRANULARITIES}, got {granularity!r}")
        self.granularity = granularity
        w_gate, w_up, w_down = _weights(mlp)
        self.intermediate_size = w_gate.shape[0]
        quantize = quantize_tensorwise if granularity == "tensorwise" else quantize_rowwise
        wgu, sgu = quantize(torch.cat([w_gate, w_up]))
        wd, sd = quantize(w_down)
        # _scaled_mm wants its second operand column-major ([K, N] as the transpose of a row-major [N, K]) and,
        # rowwise, its scale as a [1, N] row.
        self.register_buffer("w_gate_up_t", wgu.t(), persistent=False)
        self.register_buffer("w_down_t", wd.t(), persistent=False)
        self.register_buffer("s_gate_up", sgu if granularity == "tensorwise" else sgu.t().contiguous(), persistent=False)
        self.register_buffer("s_down", sd if granularity == "tensorwise" else sd.t().contiguous(), persistent=False)

    def _quantize(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return quantize_tensorwise(t) if self.granularity == "tensorwise" else quantize_rowwise(t)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2d = x.reshape(-1, x.shape[-1])
        xq, sx = self._quantize(x2d)  # amax over x (or each token), then x / s cast to e4m3
        gu = scaled_matmul(xq, self.w_gate_up_t, sx, self.s_gate_up, x.dtype)  # on a CPU: in fp32
        gate, up = gu.split(self.intermediate_size, dim=-1)
        m = F.gelu(gate, approximate="tanh") * up
        mq, sm = self._quantize(m)  # the down projection's input: its amax, then its cast
        y = scaled_matmul(mq, self.w_down_t, sm, self.s_down, x.dtype)
        return y.view(*x.shape[:-1], y.shape[-1])


def torchao_fp8_mlp(mlp: nn.Module) -> nn.Module:
    """A copy of `mlp` through torchao's inference recipe: dynamic rowwise e4m3 activations, e4m3 weights
    quantized once (Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())). UsageError without torchao."""
    try:
        with warnings.catch_warnings():  # torchao 0.18's sources compiled on Python 3.12 without bytecode warn of
            warnings.filterwarnings("ignore", "invalid escape sequence", SyntaxWarning)  # a docstring's escape
            from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, quantize_
            from torchao.quantization.granularity import PerRow
    except ImportError as err:
        raise UsageError(TORCHAO_MISSING) from err
    model = copy.deepcopy(mlp).eval()
    quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))
    return model


# The down GEMM on m's 1 x 128 blocks: cuBLAS with W_down per channel (its scale repeated as 1 x 128 blocks), cuBLAS
# with W_down in 128 x 128 tiles (DeepSeek-V3's weights), or our Triton kernel. Measured on an H100 (torch 2.11,
# CUDA 13.0) at the post's shape, 8192 x 3072 -> 768, kernel time in a trace: cuBLAS with 128 x 128 weight tiles
# 33.5 us (the one tuning picks), with per-channel weights as 1 x 128 blocks 42.6 us, Triton 55.4 us; cuBLAS's
# rowwise kernel, which m's blockwise scales cannot feed, 30.9 us.
DOWN_GEMMS = ("cublas", "cublas-tiles", "triton")
DOWN_AGREES = 0.01  # a down GEMM further than this from its own maths (down_error) is not a candidate


def cublas_blockwise_unavailable(device: torch.device) -> str | None:
    """Why cuBLAS cannot run the down GEMM on 1 x 128-block scaled input here, or None. torch._scaled_mm takes
    block scales (BlockWise1x128 on A; 1 x 128 or 128 x 128 on B) on Hopper with cuBLASLt 12.9 or newer."""
    if device.type != "cuda":
        return "cuBLAS runs on CUDA GPUs only"
    if torch.cuda.get_device_capability(device)[0] != 9:
        return "cuBLASLt's 1 x 128 block scaling is a Hopper (sm_90) path"
    cuda = tuple(int(p) for p in (torch.version.cuda or "0.0").split(".")[:2])
    if cuda < (12, 9):
        return f"cuBLASLt's block scaling needs CUDA 12.9 or newer, this torch has {torch.version.cuda}"
    return None


# cuBLASLt reads W_down's 128 x 128 tile scales ([D / 128, K / 128] row-major) with rows a multiple of 4 apart, while
# torch._scaled_mm checks for strides equal to the shape: where K / 128 is not a multiple of 4 the scales must be
# stored padded and passed with the strides torch expects. Measured on an H200 (torch 2.11, CUDA 13.0): K = 11008
# (86 blocks) gave an error of 0.15 against the Triton down GEMM unpadded and 0.0000 padded; K = 5504 (43), 108 and
# 0.0000. With the padding the 7B layer's down GEMM takes 621 µs, against 784 with W_down's 1 x 128 blocks.
def padded_tile_scales(scale: torch.Tensor) -> torch.Tensor:
    """128 x 128 tile scales [R, C], stored with rows padded to a multiple of 4 columns (zeros), as cuBLASLt reads."""
    return F.pad(scale, (0, -scale.shape[1] % 4)).contiguous()


def cublas_tile_scales(padded: torch.Tensor, k: int) -> torch.Tensor:
    """`padded_tile_scales`'s buffer for a K of `k`, viewed [R, cdiv(k, 128)] with the strides torch checks: only
    cuBLAS reads it (at the padded pitch); any torch op on the view would read the wrong elements."""
    cols = -(-k // BLOCK)
    return padded.as_strided((padded.shape[0], cols), (cols, 1))


def fp8_mlp_forward(x2d: torch.Tensor, w_gate_up: torch.Tensor, s_gate_up: torch.Tensor, down: str,
                    w_down: torch.Tensor, s_down: torch.Tensor, s_down_blocks: torch.Tensor | None,
                    w_down_tiles: torch.Tensor | None, s_down_tiles: torch.Tensor | None) -> torch.Tensor:
    """The three kernels: x to e4m3, the gate/up GEMM emitting mq and its 1 x G scales, the down GEMM (`down`,
    one of DOWN_GEMMS)."""
    xq, sx = quantize_rows(x2d)
    mq, sm = fp8_geglu_gemm(xq, sx, w_gate_up, s_gate_up)
    return down_gemm(down, mq, sm, w_down, s_down, s_down_blocks, w_down_tiles, s_down_tiles, x2d.dtype)


def down_gemm(down, mq, sm, w_down, s_down, s_down_blocks, w_down_tiles, s_down_tiles, out_dtype) -> torch.Tensor:
    # sm is [K / 128, M] row-major: its transpose is the [M, K / 128] "outer-dim-major" layout cuBLASLt reads.
    if down == "cublas":
        return torch._scaled_mm(mq, w_down.t(), scale_a=sm.t(), scale_b=s_down_blocks, out_dtype=out_dtype)
    if down == "cublas-tiles":
        scale_b = cublas_tile_scales(s_down_tiles, w_down_tiles.shape[1]).t()
        return torch._scaled_mm(mq, w_down_tiles.t(), scale_a=sm.t(), scale_b=scale_b, out_dtype=out_dtype)
    return fp8_blockscaled_gemm(mq, sm, w_down, s_down, out_dtype=out_dtype)


@torch.library.custom_op("profiling_in_pytorch::fp8_geglu_mlp", mutates_args=())
def fp8_geglu_mlp_op(x2d: torch.Tensor, w_gate_up: torch.Tensor, s_gate_up: torch.Tensor, down: str,
                     w_down: torch.Tensor, s_down: torch.Tensor, s_down_blocks: torch.Tensor | None,
                     w_down_tiles: torch.Tensor | None, s_down_tiles: torch.Tensor | None) -> torch.Tensor:
    """The three kernels, opaque to torch.compile (the launchers build TMA descriptors on the host)."""
    return fp8_mlp_forward(x2d, w_gate_up, s_gate_up, down, w_down, s_down, s_down_blocks, w_down_tiles,
                           s_down_tiles)


@fp8_geglu_mlp_op.register_fake
def _(x2d, w_gate_up, s_gate_up, down, w_down, s_down, s_down_blocks, w_down_tiles, s_down_tiles):
    return x2d.new_empty((x2d.shape[0], w_down.shape[0]))


def _fastest_down(module: "FusedFP8GeGLUMLP", x2d: torch.Tensor) -> str:
    """Time each down GEMM that runs here on this call's m (triton's do_bench, median) and keep the fastest whose
    result agrees with its own maths; a cuBLAS that refuses the scales' layout drops out."""
    import triton

    xq, sx = quantize_rows(x2d)
    mq, sm = fp8_geglu_gemm(xq, sx, module.w_gate_up, module.s_gate_up)
    args = (mq, sm, module.w_down, module.s_down, module.s_down_blocks, module.w_down_tiles, module.s_down_tiles,
            x2d.dtype)
    times = {}
    for name in DOWN_GEMMS:
        try:
            if down_error(name, *args) > DOWN_AGREES:  # a layout read wrongly
                continue
            times[name] = triton.testing.do_bench(lambda name=name: down_gemm(name, *args), warmup=5, rep=20,
                                                  return_mode="median")
        except Exception:  # noqa: BLE001 - this cuBLAS does not take these scales (RuntimeError, or its own)
            continue
    return min(times, key=times.get)


def down_error(down, mq, sm, w_down, s_down, s_down_blocks, w_down_tiles, s_down_tiles, out_dtype,
               rows: int = 256) -> float:
    """How far the down GEMM `down` is from its own maths in fp32 (m and W_down dequantized as that GEMM reads
    them) on `rows` rows spread over m: the rounding of its bf16 output, about 0.002, where the scales are read
    right. A scale read from the wrong place reads 0.02 to 108 on an H200 (cublas_tile_scales), which comparing
    against another down GEMM could not tell apart from the 0.001-0.01 by which W_down's two roundings differ."""
    m, k = mq.shape
    picked = torch.linspace(0, m - 1, min(m, rows), device=mq.device).long()
    a = dequantize_blockwise(mq[picked], sm[:, picked].t())
    if down == "cublas-tiles":
        tiles = s_down_tiles[:, : -(-k // BLOCK)]  # the scales themselves: the padded buffer's first K / 128 columns
        w = dequantize_blockwise(w_down_tiles, tiles.repeat_interleave(BLOCK, 0)[: w_down_tiles.shape[0]])
    else:
        w = w_down.float() * s_down[:, None]
    want = a @ w.t()
    got = down_gemm(down, mq, sm, w_down, s_down, s_down_blocks, w_down_tiles, s_down_tiles, out_dtype)[picked].float()
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def _bucket(tokens: int) -> int:
    """Token counts tuned alike: the next power of two, up to 8192."""
    return min(1 << max(tokens - 1, 0).bit_length(), 8192)


class FusedFP8GeGLUMLP(nn.Module):
    """Our FP8 forward (module docstring): weights quantized when the module is built (gate and up per output
    channel, their rows interleaved as `FusedGeGLUMLP`'s are; down per channel and in 128 x 128 tiles), inference
    only, bf16 or fp16 in and out.

    down: one of DOWN_GEMMS, or None: on Hopper with cuBLASLt's block scaling, the fastest of them, timed at the
    first call per token-count bucket; elsewhere Triton's.
    """

    def __init__(self, mlp: nn.Module, down: str | None = None):
        super().__init__()
        w_gate, w_up, w_down = _weights(mlp)
        if down not in (None, *DOWN_GEMMS):
            raise ValueError(f"down is one of {DOWN_GEMMS} or None, got {down!r}")
        cublas = cublas_blockwise_unavailable(w_down.device) is None
        if down is None and not cublas:
            down = "triton"
        gq, sg = quantize_rowwise(w_gate)
        uq, su = quantize_rowwise(w_up)
        dq, sd = quantize_rowwise(w_down)
        self.down = down  # None: tuned per token count (self._down_by_bucket)
        self._down_by_bucket: dict[int, str] = {}
        self._kept_forwards: dict[tuple, _KeptFP8Forward] = {}  # by x's layout, after its first call
        self.hidden_size = w_down.shape[0]
        self.register_buffer("w_gate_up", _e4m3_interleave(gq, uq), persistent=False)
        self.register_buffer("s_gate_up", interleave_gate_up(sg, su).reshape(-1).contiguous(), persistent=False)
        self.register_buffer("w_down", dq.contiguous(), persistent=False)
        self.register_buffer("s_down", sd.reshape(-1).contiguous(), persistent=False)
        # cuBLAS reads W_down's scale as 1 x 128 blocks along K too: the channel's scale repeated, [K / 128, D];
        # or W_down quantized in 128 x 128 tiles, with their scales [D / 128, K / 128].
        blocks = -(-w_down.shape[1] // 128)
        s_blocks = sd.reshape(1, -1).expand(blocks, -1).contiguous() if cublas else None
        tiles, s_tiles = quantize_tiles(w_down) if cublas else (None, None)
        self.register_buffer("s_down_blocks", s_blocks, persistent=False)
        self.register_buffer("w_down_tiles", tiles.contiguous() if cublas else None, persistent=False)
        self.register_buffer("s_down_tiles", padded_tile_scales(s_tiles) if cublas else None, persistent=False)

    def _down_for(self, x2d: torch.Tensor) -> str:
        if self.down is not None:
            return self.down
        bucket = _bucket(x2d.shape[0])
        if torch.compiler.is_compiling():  # no timing on a traced graph's fake tensors: an eager call tunes it
            return self._down_by_bucket.get(bucket, "cublas")
        if bucket not in self._down_by_bucket:
            self._down_by_bucket[bucket] = _fastest_down(self, x2d)
        return self._down_by_bucket[bucket]

    def down_for(self, tokens: int) -> str | None:
        """The down GEMM (one of DOWN_GEMMS) a forward of `tokens` tokens runs, or None before its first call."""
        return self.down or self._down_by_bucket.get(_bucket(tokens))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return self._forward(x)
        kept = self._kept_forwards.get((x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16 == 0))
        return self._forward(x) if kept is None else kept(x)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"FusedFP8GeGLUMLP takes bfloat16 or float16, got {x.dtype}")
        x2d = x.reshape(-1, x.shape[-1])
        down = self._down_for(x2d)
        if torch.compiler.is_compiling():
            y = fp8_geglu_mlp_op(x2d, self.w_gate_up, self.s_gate_up, down, self.w_down, self.s_down,
                                 self.s_down_blocks, self.w_down_tiles, self.s_down_tiles)
            return y.view(*x.shape[:-1], self.hidden_size)
        xq, sx = quantize_rows(x2d)
        mq, sm = fp8_geglu_gemm(xq, sx, self.w_gate_up, self.s_gate_up)
        y = down_gemm(down, mq, sm, self.w_down, self.s_down, self.s_down_blocks, self.w_down_tiles,
                      self.s_down_tiles, x2d.dtype)
        if not INTERPRETING and x2d.data_ptr() == x.data_ptr() and x2d.numel():  # x2d a view: x feeds the kernel
            triton_down = (self.w_down, self.s_down, x2d.dtype) if down == "triton" else ()
            launches = kept_launches(x2d, xq, sx, self.w_gate_up, self.s_gate_up, mq, sm, *triton_down)
            if launches is not None:
                key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16 == 0)
                self._kept_forwards[key] = _KeptFP8Forward(self, x, down, *launches)
        return y.view(*x.shape[:-1], self.hidden_size)

    def _apply(self, fn, recurse=True):
        self._kept_forwards.clear()  # .to(), .half(), .cuda(): new buffers, maybe another dtype or device
        return super()._apply(fn, recurse)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_kept_forwards"] = {}  # compiled kernels' launchers: a copy keeps its own after its first call
        return state


class _KeptFP8Forward:
    """FusedFP8GeGLUMLP's forward for one layout of x, after its first call: the three kept launches fed directly.

    x's e4m3 copy and its scales share one allocation, fed to the kernels as addresses (only Triton reads them),
    and m's scales are allocated already as the [M, K / 128] transpose cuBLAS reads: one allocation, three keys
    and their checks fewer than the step-by-step path. On the H200's host at 256 tokens: 51.2 µs of CPU per
    forward, against 83.7 step by step through the ready launches and 167.1 through kernel[grid]
    (docs/launch-cost.md).
    """

    def __init__(self, module: FusedFP8GeGLUMLP, x: torch.Tensor, down: str, quantize, geglu, triton_down):
        self.module, self.down = module, down
        self.quantize, self.geglu, self.triton_down = quantize, geglu, triton_down
        k = x.shape[-1]
        self.m, self.n = x.numel() // k, module.w_gate_up.shape[0] // 2
        self.groups = -(-self.n // group_size())
        self.xq_bytes = -(-self.m * k // 16) * 16  # sx starts 16-byte aligned, as the kernels were compiled
        self.out_shape = (*x.shape[:-1], module.hidden_size)
        if down == "cublas-tiles":
            self.tile_scales = cublas_tile_scales(module.s_down_tiles, module.w_down_tiles.shape[1]).t()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        module, m = self.module, self.m
        x_fp8 = x.new_empty((self.xq_bytes + 4 * m,), dtype=torch.uint8)  # xq [M, K] e4m3, then sx [M] fp32
        sx = x_fp8.data_ptr() + self.xq_bytes
        self.quantize(x, x_fp8, sx)
        mq = x_fp8.new_empty((m, self.n), dtype=torch.float8_e4m3fn)
        sm_t = torch.empty_strided((m, self.groups), (1, m), dtype=torch.float32, device=x.device)
        self.geglu(x_fp8, module.w_gate_up, mq, sx, module.s_gate_up, sm_t)
        if self.down == "cublas-tiles":
            y = torch._scaled_mm(mq, module.w_down_tiles.t(), scale_a=sm_t, scale_b=self.tile_scales, out_dtype=x.dtype)
        elif self.down == "cublas":
            y = torch._scaled_mm(mq, module.w_down.t(), scale_a=sm_t, scale_b=module.s_down_blocks, out_dtype=x.dtype)
        else:
            y = x.new_empty((m, module.hidden_size))
            self.triton_down(mq, module.w_down, y, sm_t, module.s_down)
        return y.view(self.out_shape)


class EmulatedFP8GeGLUMLP(nn.Module):
    """FusedFP8GeGLUMLP's maths in fp32 on any device (fp8_scaling.emulated_forward), for where its kernels cannot
    run: weights rounded to e4m3 once, here; x and m rounded at every forward, as the kernels round them."""

    def __init__(self, mlp: nn.Module):
        super().__init__()
        for name, w in zip(("w_gate", "w_up", "w_down"), _weights(mlp)):
            self.register_buffer(name, dequantized_rowwise(w), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return emulated_forward(x, self.w_gate, self.w_up, self.w_down)
