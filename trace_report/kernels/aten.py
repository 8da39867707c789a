"""ATen's own CUDA/HIP kernels, the ones eager PyTorch launches: `void at::native::vectorized_elementwise_kernel<4,
at::native::GeluCUDAKernelImpl(...)...>(...)` is a GELU. Also PyTorch's bundled CUB (`at_cuda_detail::cub::...`):
the sorts, scans and selections behind `sort`, `topk`, `cumsum`, `unique` and `nonzero`.
"""

from __future__ import annotations

import re

from trace_report.kernels.name import KernelName, base_function, plain_base, template_arguments


# The functor or kernel inside an ATen kernel's C++ name tells which op it runs. First match wins, so
# the more specific patterns come first.
ATEN_OPS = [
    (r"GeluBackward|gelu_backward", "gelu_backward"),
    (r"Gelu", "gelu"),
    (r"silu_backward|SiluBackward", "silu_backward"),
    (r"sigmoid_backward", "sigmoid_backward"),
    (r"tanh_backward", "tanh_backward"),
    (r"softmax_warp_backward|SoftMaxBackward", "softmax_backward"),
    (r"silu", "silu"),
    (r"sigmoid", "sigmoid"),
    (r"tanh", "tanh"),
    (r"MulFunctor|mul_kernel", "mul"),
    (r"DivFunctor|div_true|div_trunc|div_floor", "div"),
    (r"CUDAFunctor(?:OnSelf|OnOther)?_add|AddFunctor|add_kernel", "add"),
    (r"sub_kernel|SubFunctor", "sub"),
    (r"threshold_kernel|clamp_min", "relu"),
    (r"masked_fill", "masked_fill"),
    (r"triu_tril_kernel<\w+, \w+, true", "triu"),
    (r"triu_tril_kernel", "tril"),
    (r"isneginf", "isneginf"),
    (r"logical_and", "logical_and"),
    (r"(?<!logical_)and_kernel_cuda", "all"),
    (r"FillFunctor|fill_kernel", "fill"),
    (r"CatArrayBatchedCopy", "cat"),
    (r"direct_copy_kernel|copy_kernel|copy_device_to_device", "copy"),
    (r"(?<!Log)SoftMaxForward<(?!.*LogSoftMax)|softmax_warp_forward|(?<!log_)softmax", "softmax"),
    (r"layer_norm|LayerNorm", "layer_norm"),
    (r"RMSNorm|rms_norm", "rms_norm"),
    (r"sum_functor|ReduceAdd", "sum"),
    (r"MeanOps", "mean"),
    (r"MaxOps|max_values|max_kernel", "max"),
    (r"MinOps|min_values|min_kernel", "min"),
    (r"exp_kernel|ExpFunctor", "exp"),
    (r"rsqrt", "rsqrt"),
    (r"sqrt", "sqrt"),
    (r"pow_tensor|pow_kernel", "pow"),
    (r"neg_kernel", "neg"),
    (r"AbsFunctor|abs_kernel", "abs"),
    (r"where_kernel", "where"),
    (r"index_select|indexSelect", "index_select"),
    (r"embedding(?!_backward)", "embedding"),
    (r"CompareEqFunctor|CompareFunctor", "compare"),
]


ATEN_ANONYMOUS = {"softmax_warp_forward", "softmax_warp_backward", "cunn_SoftMaxForward", "cunn_SoftMaxForwardSmem"}


def decode_aten(name: str, core: str) -> KernelName | None:
    if "at::native::" not in name and not core.startswith("at::") and base_function(core) not in ATEN_ANONYMOUS:
        return None
    base = base_function(core)
    op = next((op for pattern, op in ATEN_OPS if re.search(pattern, name)), None)
    templated = _aten_template(name, core, op)  # foreach, fused optimizers, functors: see the end of this file
    if templated is not None:
        return templated
    short = f"{base}<{op}>" if op else (base + ("<…>" if "<" in core else ""))
    details = (("kernel", base),) + ((("op", op),) if op else ())
    return KernelName(name, short, "ATen", False, (op,) if op else (), details)


# --- ATen's templated kernels: what each computes -----------------------------------------------------------
#
# ATen names its CUDA kernels after the machinery, not the math: `multi_tensor_apply_kernel<...>` runs a foreach op
# over lists of tensors (the optimizers' `_foreach_*`), `vectorized_elementwise_kernel<...>` any elementwise op. The
# math is a template argument: a functor (`BinaryOpScalarFunctor<c10::BFloat16, 1, 1, 0>, std::multiplies<float>`)
# or the function a lambda comes from (`mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}...`). Many of these
# kernels live in `(anonymous namespace)`, where `base_function` stops reading: without what follows they all read
# `at::native::<…>`.


# Foreach functors: the op family, and which math functor makes which op of it.
FOREACH_FAMILIES = {
    "UnaryOpFunctor": "unary",
    "BinaryOpScalarFunctor": "binary",
    "BinaryOpScalarListFunctor": "binary",
    "BinaryOpListFunctor": "binary",
    "BinaryOpListAlphaFunctor": "binary",
    "BinaryOpScalarTensorFunctor": "binary",
    "PointwiseOpScalarFunctor": "pointwise",
    "PointwiseOpScalarListFunctor": "pointwise",
    "PointwiseOpListFunctor": "pointwise",
    "TernaryOpScalarFunctor": "ternary",
    "TernaryOpListFunctor": "ternary",
    "TernaryOpScalarListFunctor": "ternary",
}
FOREACH_MATH = {
    "binary": {"multiplies": "mul", "plus": "add", "minus": "sub", "divides": "div"},
    "pointwise": {"multiplies": "addcmul", "divides": "addcdiv"},
    "ternary": {"LerpFunctor": "lerp"},
}
FOREACH_WHOLE = {"ZeroFunctor": "zero", "CopyFunctor": "copy", "LpNormFunctor": "norm", "LpMaxFunctor": "max"}
# What torch.optim's foreach Adam and AdamW (the default on a GPU) do with each op, in the order they run it.
ADAM_FOREACH_ROLES = {
    "_foreach_mul_": "AdamW's weight decay (param × (1 - lr·λ)) or the second moment's decay (exp_avg_sq × β2)",
    "_foreach_lerp_": "the first moment: exp_avg.lerp_(grad, 1 - β1)",
    "_foreach_addcmul_": "the second moment: exp_avg_sq += (1 - β2)·grad²",
    "_foreach_sqrt": "the denominator: √exp_avg_sq",
    "_foreach_div_": "the denominator over √(1 - β2^step), the bias correction",
    "_foreach_add_": "the denominator plus eps",
    "_foreach_addcdiv_": "the update: param -= step_size · exp_avg / denominator",
}
FUSED_OPTIMIZERS = {"FusedAdamMathFunctor": "adam", "FusedSgdMathFunctor": "sgd", "FusedAdagradMathFunctor": "adagrad"}
# Kernels and functors ATEN_OPS does not name, by what they compute.
ATEN_TEMPLATE_OPS = [
    # A scan's operator is a std:: functor in its template: std::plus is a cumulative sum (a Llama's position ids)
    (r"scan_(?:innermost|outer)_dim.*std::multiplies", "cumprod"),
    (r"scan_(?:innermost|outer)_dim", "cumsum"),
    (r"gather_kernel", "gather"),
    (r"LogSoftMaxForward|log_softmax_forward", "log_softmax"),
    (r"LogSoftMaxBackward|log_softmax_backward", "log_softmax_backward"),
    (r"SoftMaxBackward|softmax_backward", "softmax_backward"),
    (r"lpnorm_cleanup", "_foreach_norm"),
    (r"RowwiseMoments|LayerNorm|layer_norm|GammaBetaBackward|ComputeInternalGradients|ComputeGradientFusedParams", "layer_norm"),
    (r"RmsNorm|rms_norm", "rms_norm"),
    (r"GroupNorm|group_norm|ComputeFusedParams|ComputeBackwardFusedParams", "group_norm"),
    (r"cuComputeGradGammaBeta|cuComputePartGradGammaBeta|cuApplyLayerNorm|cuWelford", "layer_norm"),
    (r"BatchNorm|batch_norm", "batch_norm"),
    (r"ClassNLLCriterion", "nll_loss"),
    (r"SoftMax|softmax", "softmax"),
    (r"nll_loss_forward", "nll_loss_forward"),
    (r"nll_loss_backward", "nll_loss_backward"),
    (r"embedding_backward|EmbeddingBackward|krn_partials_per_segment|krn_partial_segment_offset|compute_grad_weight"
     r"|sum_and_scatter|compute_num_of_partial_segments|segment_offsets", "embedding_backward"),
    (r"indexing_backward|index_put", "index_put"),
    (r"triu_tril", "triu/tril"),
    (r"NormTwoOps|NormOps|NormZeroOps|NormOneOps|norm_kernel", "norm"),
    (r"WelfordOps", "var_mean"),
    (r"ArgMaxOps|argmax", "argmax"),
    (r"Cos\b|cos_kernel", "cos"),
    (r"Sin\b|sin_kernel", "sin"),
    (r"arange|range_kernel", "arange"),
    (r"spin_kernel", "sleep"),  # torch.cuda._sleep: a kernel that spins for a number of cycles, doing nothing
]
_WRAPPER_FUNCTORS = {"Binary", "AUnary", "BUnary", "Unary", "CUDA", "Trivial", "Opmath"}
_NOT_THE_MATH = {"gpu_kernel_impl", "gpu_kernel_impl_nocast", "launch_vectorized_kernel", "launch_legacy_kernel",
                 "operator", "opmath_gpu_kernel_with_scalars", "gpu_kernel_with_scalars", "opmath_symmetric_gpu_kernel_with_scalars"}


def _aten_template(name: str, core: str, op: str | None) -> KernelName | None:
    """Decode an ATen kernel that `_aten` cannot read whole: a foreach or fused-optimizer `multi_tensor_apply_kernel`,
    or a kernel whose op is in a template argument or whose name sits in an anonymous namespace. None when `_aten`'s
    own reading stands (it found the op in a plain function's name)."""
    base = plain_base(core)
    if "multi_tensor_apply" in base:
        return _foreach_kernel(name, base, template_arguments(core))
    if op is not None and base_function(core) == base:
        return None
    op = _template_op(core, base) or op
    short = f"{base}<{op}>" if op and op != base else base
    details = (("kernel", base),) + ((("op", op),) if op and op != base else ())
    # A kernel named for its op (`batch_norm_backward_kernel`) lists that op, for the kind it does.
    return KernelName(name, short, "ATen", False, (op,) if op and op != base else (_clean_function_name(base),), details)


def _foreach_kernel(name: str, base: str, arguments: list[str]) -> KernelName:
    """`multi_tensor_apply_kernel<Metadata, Functor<T, depth, r_args_depth, res_arg_index>, Math, ...>`: the foreach op
    (in place when the result goes to the first list, res_arg_index 0) or the fused optimizer it runs."""
    functor_text = next((a for a in arguments if "Functor" in a), "")
    functor = plain_base(functor_text)
    numbers = re.findall(r"(?<![\w.])(\d+)(?![\w.])", functor_text)
    if functor in FUSED_OPTIMIZERS:
        kind = FUSED_OPTIMIZERS[functor]
        adamw = kind == "adam" and re.search(r"ADAM_MODE\)1|ADAM_MODE::ADAMW", functor_text)
        op = f"_fused_{'adamw' if adamw else kind}_"
        details = (("kernel", base), ("op", op), ("optimizer", f"torch.optim's fused {'AdamW' if adamw else kind.capitalize()}: every step of the update in one kernel"))
        return KernelName(name, f"{base}<{op}>", "ATen", False, (op,), details)
    family = FOREACH_FAMILIES.get(functor)
    if functor in FOREACH_WHOLE:
        math = FOREACH_WHOLE[functor]
    elif family == "unary":
        math = plain_base(arguments[2] if len(arguments) > 2 else "").lower().replace("negate", "neg") or None
    elif family:
        math_arg = plain_base(arguments[2] if len(arguments) > 2 else "")
        math = FOREACH_MATH[family].get(math_arg, math_arg.lower() or None)
    else:
        math = None
    if math is None:  # a functor this table does not know: named, so that the row says which one runs
        short = f"{base}<{functor}>" if functor else base
        return KernelName(name, short, "ATen", False, (), (("kernel", base), ("op", f"a foreach op ({functor or '?'})")))
    in_place = family is not None and bool(numbers) and numbers[-1] == "0"
    op = f"_foreach_{math}" + ("_" if in_place and not math.endswith("_") else "")
    details: tuple[tuple[str, str], ...] = (("kernel", base), ("op", op))
    if op in ADAM_FOREACH_ROLES:
        details += (("role", f"Adam/AdamW (foreach): {ADAM_FOREACH_ROLES[op]}"),)
    return KernelName(name, f"{base}<{op}>", "ATen", False, (op,), details)


def _template_op(core: str, base: str) -> str | None:
    """The op an ATen kernel computes, read from its template arguments: the function its lambda comes from, else its
    innermost functor, else its reduction; named as ATEN_OPS names it where it can; else the kernel's own name."""
    arguments = " ".join(template_arguments(core))
    for candidate in (_lambda_function(arguments), _functor(arguments), _reduction(arguments)):
        if candidate:
            return _named_op(candidate) or _clean_function_name(candidate)
    return _named_op(f"{base} {arguments}")


def _named_op(text: str) -> str | None:
    return next((op for pattern, op in ATEN_TEMPLATE_OPS + ATEN_OPS if re.search(pattern, text)), None)


def _lambda_function(text: str) -> str | None:
    """`at::native::mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}...` -> `mse_kernel_cuda`."""
    for m in re.finditer(r"(\w+)\((?:[^()]|\([^()]*\))*\)(?: const)?::\{lambda", text):
        if m.group(1) not in _NOT_THE_MATH:
            return m.group(1)
    return None


def _functor(text: str) -> str | None:
    """The innermost functor that is not a wrapper: `BinaryFunctor<..., MulFunctor<float>>` -> `MulFunctor`,
    `CUDAFunctorOnSelf_add<float>` -> `add`."""
    found = None
    for m in re.finditer(r"\b(\w*?)Functor(?:OnSelf|OnOther)?(?:_(\w+))?\b", text):
        stem, suffix = m.group(1), m.group(2)
        if suffix:
            found = suffix
        elif stem and stem not in _WRAPPER_FUNCTORS:
            found = f"{stem}Functor"
    return found


def _reduction(text: str) -> str | None:
    """`ReduceOp<float, at::native::NormTwoOps<...>>` -> `NormTwoOps`."""
    m = re.search(r"ReduceOp<[^,]+,\s*(?:[\w:]+::)?(\w+)", text)
    return m.group(1) if m else None


def _clean_function_name(function: str) -> str:
    """`mse_backward_cuda_kernel` -> `mse_backward`, `GeluCUDAKernelImpl` -> `Gelu`, `FillFunctor` -> `Fill`."""
    cleaned = re.sub(r"(?:_cuda)?_kernel(?:_cuda)?(?:_impl)?(?:_\dd)?$|CUDAKernelImpl$|Kernel(?:Impl)?$|Functor$|_impl$|_cuda$", "", function)
    return cleaned or function


