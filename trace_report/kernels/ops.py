"""The vocabulary of op names a kernel's name may list: ops with underscores in their names, and the ops that only
rewrite a tensor's shape (no arithmetic, no kernel of their own)."""

from __future__ import annotations


# Op names that contain underscores, so that `fused__unsafe_view_gelu_mul` splits into
# `_unsafe_view, gelu, mul` and not `_unsafe, view, gelu, mul`. Longest match wins.
MULTI_WORD_OPS = {
    "_unsafe_view",
    "_unsafe_index",
    "_to_copy",
    "flex_attention",  # Inductor's FlexAttention templates: `triton_tem_fused_flex_attention_backward_1`
    "flex_attention_backward",
    "flex_decoding",
    "_grouped_mm",
    "_scaled_grouped_mm",
    "_int_mm",
    "_scaled_mm",  # Inductor names the FP8 GEMM whose inputs a fused cast kernel prepares
    "_softmax",
    "prepare_softmax_online",
    "_safe_softmax",
    "_log_softmax",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "native_layer_norm",
    "native_layer_norm_backward",
    "native_batch_norm",
    "native_group_norm",
    "native_dropout",
    "gelu_backward",
    "silu_backward",
    "threshold_backward",
    "sigmoid_backward",
    "tanh_backward",
    "embedding_dense_backward",
    "convolution_backward",
    "index_put",
    "index_select",
    "masked_fill",
    "constant_pad_nd",
    "scalar_tensor",
    "lift_fresh",
    "var_mean",
    "clamp_min",
    "clamp_max",
    "full_like",
    "zeros_like",
    "ones_like",
    "empty_like",
    "new_zeros",
    "rms_norm",
    "layer_norm",
    "group_norm",
    "batch_norm",
    "scatter_add",
    "slice_scatter",
    "select_scatter",
    "as_strided",
    "_log_softmax_backward_data",
    "_softmax_backward_data",
    "nll_loss_forward",
    "nll_loss_backward",
}

# Ops that only rewrite a tensor's shape and strides: as ATen ops they launch nothing.
METADATA_OPS = {
    "view",
    "_unsafe_view",
    "reshape",
    "permute",
    "transpose",
    "t",
    "expand",
    "squeeze",
    "unsqueeze",
    "slice",
    "select",
    "as_strided",
    "alias",
}
# Ops that a fused kernel's name may list without them adding arithmetic: the views, and the copies and casts
# that fuse into the loads and stores.
VIEW_OPS = METADATA_OPS | {"clone", "_to_copy", "convert_element_type"}


def split_fused_ops(text: str) -> tuple[str, ...]:
    """`_unsafe_view_gelu_mul` -> ("_unsafe_view", "gelu", "mul"): underscores join words and separate ops."""
    words: list[str] = []
    leading = False
    for token in text.split("_"):
        if token == "":
            leading = True  # a double underscore: the next op's name starts with "_"
            continue
        words.append(("_" if leading else "") + token)
        leading = False
    ops: list[str] = []
    i = 0
    while i < len(words):
        for j in range(len(words), i, -1):
            candidate = "_".join(words[i:j])
            if j - i == 1 or candidate in MULTI_WORD_OPS:
                ops.append(candidate)
                i = j
                break
    return tuple(ops)

