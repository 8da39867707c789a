"""What a kernel's name says, as one value (`KernelName`), and the text helpers every family's decoder shares.

A decoder (one module per library: cublas, cutlass, cudnn, attention, trtllm, triton, aten, collectives, amd) reads a
name of its family and returns a `KernelName`; `decode.decode` tries them in turn. The names arrive as the trace has
them: C++ signatures (`void at::native::f<...>(...)`), Itanium-mangled symbols (`_ZN...`, demangled first by
`demangle`), or plain generated names (`nvjet_sm90_...`, `Cijk_Alik_Bljk_...`, `triton_poi_fused_...`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trace_report.kernels.ops import VIEW_OPS


# A cell of a kernel table holds at most two lines of a 36-column name at 100 terminal columns: a decoded short name
# longer than this is cut (`decode` does it), the whole name stays in `KernelName.name` for --full_names.
SHORT_LIMIT = 72

ARCHS = {
    "50": "Maxwell",
    "60": "Pascal",
    "70": "Volta",
    "75": "Turing",
    "80": "Ampere",
    "86": "Ampere",
    "87": "Ampere",
    "89": "Ada",
    "90": "Hopper",
    "100": "Blackwell",
    "103": "Blackwell",
    "110": "Blackwell",
    "120": "Blackwell",
    "121": "Blackwell",
}
ARCH_BY_FAMILY = {"maxwell": "50", "pascal": "60", "volta": "70", "turing": "75", "ampere": "80", "ada": "89", "hopper": "90"}

DTYPES = {
    "h": "16-bit (fp16/bf16)",
    "bf16": "bf16",
    "f16": "fp16",
    "fp16": "fp16",
    "f32": "fp32",
    "fp32": "fp32",
    "tf32": "tf32",
    "s": "fp32",
    "i8": "int8",
    "e4m3": "fp8 e4m3",
    "e5m2": "fp8 e5m2",
}


GEMM_WORDS = re.compile(r"nvjet|(?<!fb)gemm|gemv|cutlass|xmma|matmul", re.IGNORECASE)  # FBGEMM is no GEMM
NOT_GEMM_WORDS = re.compile(r"flash|fmha|attention|splitKreduce|reduce_kernel|elementwise", re.IGNORECASE)


@dataclass(frozen=True)
class KernelName:
    """What a kernel's name says.

    name:    the name as the trace has it (byte for byte: the diff compares these).
    short:   a name that fits a table row (the name itself when it is short or unknown).
    family:  who generated it: "cuBLAS (nvjet)", "cuBLAS", "CUTLASS", "cuDNN", "Inductor (Triton)",
             "Tensile (rocBLAS/hipBLASLt)", "NCCL", "ATen", ..., or "" when unknown.
    is_gemm: a matrix multiply (a GEMM or GEMV).
    ops:     the ops it computes, as far as the name tells (`("gelu", "mul")`, `("mm",)`, ...).
    details: (field, value) pairs for the decode column: arch, tile, dtype, layout, epilogue, ...
    work:    the kind of work the name commits to (kinds.KINDS: "convolution", "normalization", ...), or "" when
             the name alone leaves it to the ops it lists or to the op that launched it (`kinds.kind_of_kernel`).
    helper_work: for a library's helper kernel, whose name says little (cuDNN's `compute_dot_do_o_specialized`
             runs in its attention backward, `convert_dq_to_16bits` too): the kind its library mostly does, taken
             only when the op that launched it does not say (`aten::_cudnn_attention_backward` says attention).
    """

    name: str
    short: str
    family: str = ""
    is_gemm: bool = False
    ops: tuple[str, ...] = ()
    details: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    work: str = ""
    helper_work: str = ""

    @property
    def has_bias_epilogue(self) -> bool:
        return any(k == "epilogue" and "bias" in v for k, v in self.details)

    @property
    def inductor_kind(self) -> str:
        return next((v for k, v in self.details if k == "kind"), "") if self.family.startswith("Inductor") else ""

    @property
    def compute_ops(self) -> tuple[str, ...]:
        """The ops that do arithmetic: a kernel fusing `_unsafe_view, gelu, mul` computes gelu and mul."""
        return tuple(op for op in self.ops if op not in VIEW_OPS)

    def describe(self) -> str:
        """One line: family, then the decoded fields; empty for an unknown name."""
        if not self.family:
            return ""
        parts = [self.family + (" GEMM" if self.is_gemm and "GEMM" not in self.family else "")]
        parts += [f"{k} {v}" if k not in ("arch", "epilogue") else v for k, v in self.details]
        return " · ".join(parts)


def is_gemm(name: str) -> bool:
    """A matrix multiply, by name: cuBLAS/CUTLASS/nvjet/xmma kernels and Inductor's mm templates."""
    if name.startswith("triton_tem_fused_"):
        return bool(re.search(r"(^|_)(mm|addmm|bmm|baddbmm)(_|$)", name[len("triton_tem_fused_") :]))
    if name.startswith("triton_"):
        return False
    return bool(GEMM_WORDS.search(name)) and not NOT_GEMM_WORDS.search(name)


def arch_label(sm: str) -> str:
    family = ARCHS.get(sm)
    return f"sm{sm} ({family})" if family else f"sm{sm}"


# --- reading C++ names ------------------------------------------------------------------------------------------


def drop_return_type(name: str) -> str:
    """`std::enable_if<(8>0), void>::type vllm::f<...>(...)` -> `vllm::f<...>(...)`: the function, without the return
    type a C++ signature may start with (`void ` is kept: every kernel's is, and readers expect it)."""
    if name.startswith("void ") or " " not in name:
        return name
    text = name.replace("(anonymous namespace)", "\0")  # its parenthesis is no parameter list
    angles = parens = 0
    last_space = -1
    for i, ch in enumerate(text):
        if ch == "(":
            if angles == 0 and parens == 0:
                break  # the parameter list
            parens += 1
        elif ch == ")":
            parens -= 1
        elif parens:
            continue  # `(8)>(0)` inside a template argument compares, it closes nothing
        elif ch == "<":
            angles += 1
        elif ch == ">":
            angles -= 1
        elif ch == " " and angles == 0:
            last_space = i
    if last_space < 0 or not re.match(r"[A-Za-z_\0]", text[last_space + 1 :]) or ("::" not in text[:last_space]
                                                                                   and "<" not in text[:last_space]):
        return name  # words, not a return type: `Memcpy HtoD (Pageable -> Device)`
    return text[last_space + 1 :].replace("\0", "(anonymous namespace)")


def strip_wrapper(name: str) -> str:
    """`void cutlass::Kernel2<cutlass_80_...>(Params)` -> `cutlass_80_...`; `void f<...>(...)` -> `f<...>(...)`."""
    core = name[5:] if name.startswith("void ") else name
    m = re.match(r"(?:\w+::)?(?:Kernel2?|device_kernel)<(\w+)(?=[>,(])", core)  # a plain name, not a type
    if m:
        return m.group(1)
    return core


def base_function(core: str) -> str:
    """The function's name without namespaces, template arguments or parameters."""
    core = re.sub(r"\(anonymous namespace\)::", "", core)  # its parenthesis is not the parameter list
    depth = 0
    end = len(core)
    for i, ch in enumerate(core):
        if ch in "<(" and depth == 0:
            end = i
            break
    head = core[:end]
    head = re.sub(r"\(anonymous namespace\)::", "", head)
    return head.split("::")[-1] or head


def shorten(name: str, limit: int = 48) -> str:
    """A C++ name without `void` and its parameters; its template arguments too when they make it longer than
    `limit`: `compute_cuda_kernel<long>`, `vectorized_gather_kernel<…>`. A function named for nothing
    (`kernel`, `device_kernel`) keeps the namespace that names it: `gemvx::kernel<…>`."""
    core = name[5:] if name.startswith("void ") else name
    if "(" not in core and "<" not in core:
        return core
    base = base_function(core)
    if base in GENERIC_FUNCTIONS:
        head = re.sub(r"\(anonymous namespace\)::", "", core.split("<", 1)[0].split("(", 1)[0])
        base = "::".join(head.split("::")[-2:])
    if "<" not in core.split("(", 1)[0]:
        return base
    arguments = ", ".join(template_arguments(core))
    whole = f"{base}<{arguments}>"
    return whole if len(whole) <= limit else base + "<…>"


GENERIC_FUNCTIONS = {"kernel", "Kernel", "Kernel2", "device_kernel", "kentry", "kernel_entry", "global_kernel"}


def plain_base(text: str) -> str:
    """A function or type's own name: namespaces, `(anonymous namespace)`, template arguments and parameters dropped."""
    text = text.strip()
    text = text[5:] if text.startswith("void ") else text
    text = text.replace("(anonymous namespace)::", "")
    return base_function(text)


def template_arguments(core: str) -> list[str]:
    """The kernel's top-level template arguments: `f<A<1>, B, C>(...)` -> ["A<1>", "B", "C"]."""
    core = core.replace("(anonymous namespace)::", "")
    start = core.find("<")
    if start < 0:
        return []
    arguments, depth, current = [], 0, []
    for ch in core[start + 1 :]:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            arguments.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    arguments.append("".join(current).strip())
    return arguments
