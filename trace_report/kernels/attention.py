"""Fused attention kernels: one kernel for softmax(q·kᵀ)·v, the scores never written to memory.

    fmha_cutlassF_bf16_aligned_64x64_rf_sm80(...)       SDPA's memory-efficient attention (xformers' CUTLASS)
    void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, ...>, ...>(...)
                                                        FlashAttention-2, as vendored in PyTorch or from flash-attn
    void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>(...)
                                                        FlashAttention-3 (Hopper and newer), a CUTLASS 3 kernel

Other libraries' attention kernels (FlashInfer's, vLLM's paged attention, TRT-LLM's fmha, AITER's, CK's) are read by
their own family's module; all of them are kind "attention".
"""

from __future__ import annotations

import re

from trace_report.kernels.name import DTYPES, KernelName, arch_label


def decode_fmha_cutlass(name: str, core: str) -> KernelName | None:
    # fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params): the fused
    # multi-head attention of xformers, upstreamed into PyTorch as SDPA's memory-efficient backend.
    m = re.match(r"fmha_cutlass([FB])_([a-z0-9]+)_(aligned|notaligned)_(\d+x\d+)(?:_(rf|gmem))?_sm(\d+)", core)
    if not m:
        return None
    direction, dtype, aligned, tile, storage, sm = m.groups()
    details: list[tuple[str, str]] = [
        ("pass", "forward" if direction == "F" else "backward"),
        ("dtype", DTYPES.get(dtype, dtype)),
        ("alignment", "aligned inputs" if aligned == "aligned" else "unaligned inputs"),
        ("tile", tile),
    ]
    if storage:
        where = "registers" if storage == "rf" else "global memory"
        details.append(("accumulator", f"the output's running sum in {where} ({storage})"))
    details.append(("arch", "built for " + arch_label(sm)))
    short = core.split("(", 1)[0]
    return KernelName(name, short, "CUTLASS fused attention (SDPA memory-efficient, from xformers)", False, ("attention",),
                      tuple(details), work="attention")


def decode_flash_attention(name: str, core: str) -> KernelName | None:
    # void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false,
    # cutlass::bfloat16_t, ...>, ...>(pytorch_flash::Flash_fwd_params): the traits are head dim, the block's
    # query rows and key/value columns, and its warps. The flash-attn package names the same kernels without
    # PyTorch's namespace (`flash::` or none).
    m = re.match(
        r"(?:(\w+)::)?(?:flash_(fwd|bwd)(_splitkv)?\w*?_kernel|compute_attn\w*)<(?:\w+::)?Flash_(fwd|bwd)_kernel_traits<"
        r"(\d+), (\d+), (\d+), (\d+)",
        core,
    )
    if not m:
        return None
    namespace, direction, split, traits, head_dim, rows, cols, warps = m.groups()
    direction = direction or traits
    details: list[tuple[str, str]] = [
        ("pass", "forward" if direction == "fwd" else "backward"),
        ("head dim", head_dim),
        ("tile", f"{rows} query rows x {cols} key/value columns"),
        ("warps", warps),
    ]
    dtype = re.search(r"cutlass::(bfloat16_t|half_t)", core)
    if dtype:
        details.append(("dtype", {"bfloat16_t": "bf16", "half_t": "fp16"}[dtype.group(1)]))
    if split:
        details.append(("split", "keys and values split across blocks (split-KV)"))
    family = "FlashAttention-2" + (" (vendored in PyTorch)" if namespace == "pytorch_flash" else "")
    prefix = f"{namespace}::" if namespace else ""
    short = f"{prefix}flash_{direction}{split or ''}_kernel<{head_dim}, {rows}x{cols}, {warps} warps>"
    return KernelName(name, short, family, False, ("attention",), tuple(details), work="attention")




def decode_flash_attention_3(name: str, core: str) -> KernelName | None:
    # void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<
    # 2, cute::tuple<cute::C<1>, ...>, cute::tuple<cute::C<128>, cute::C<128>, cute::C<128> >, 128, cutlass::bfloat16_t,
    # ...: the tile is (query rows, key/value columns, head dim), then the head dim again.
    m = re.search(r"flash::FlashAttn(Fwd|Bwd)(?:Sm(\d+)|(Combine)|(Preprocess|Postprocess)\w*|(?=<))", core)
    if not m:
        return None
    direction, sm, combine, around = m.groups()
    if combine or around:  # the split-KV pass's merge of partial outputs, the backward's pre- and post-processing
        what = "merges the split-KV partial outputs" if combine else f"the backward's {around.lower()}ing pass"
        return KernelName(name, f"FlashAttention-3 {(combine or around).lower()}", "FlashAttention-3", False,
                          ("attention",), (("role", what),), work="attention")
    sm = sm or next(iter(re.findall(r"arch::Sm(\d+)", core)), "90")  # FA3 is built for Hopper and newer
    details: list[tuple[str, str]] = [("pass", "forward" if direction == "Fwd" else "backward"), ("arch", arch_label(sm))]
    tiles = re.findall(r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)> ?>", core)
    tile = next((t for t in tiles if t != ("1", "1", "1")), None)
    if tile:
        details.append(("tile", f"{tile[0]} query rows x {tile[1]} key/value columns, head dim {tile[2]}"))
    dtype = re.search(r"cutlass::(bfloat16_t|half_t|float_e4m3_t|float_e5m2_t)", core)
    if dtype:
        details.append(("dtype", {"bfloat16_t": "bf16", "half_t": "fp16", "float_e4m3_t": "fp8 e4m3",
                                  "float_e5m2_t": "fp8 e5m2"}[dtype.group(1)]))
    short = f"FlashAttention-3 {direction.lower()} sm{sm}" + (f" {tile[0]}x{tile[1]} hdim {tile[2]}" if tile else "")
    return KernelName(name, short, "FlashAttention-3", False, ("attention",), tuple(details), work="attention")
