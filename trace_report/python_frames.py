"""Which Python frame of a trace recorded with stacks (`with_stack=True`) is the reader's own code, and which a
library's: `user_line` names the former as `step() in train.py:42`, for the advice's `where` and the ops' `source`."""

from __future__ import annotations

import re
import sys

# Where a Python frame's file belongs to a library, not to the script that profiles: the first folder of its path
# (Kineto writes paths from site-packages on: `torch/nn/modules/module.py(1751): _call_impl`), or a standard-library
# module (`dataclasses.py(1248): <genexpr>`).
LIBRARIES = frozenset({
    "torch", "torchvision", "torchaudio", "torchao", "triton", "transformers", "accelerate", "diffusers", "timm",
    "peft", "datasets", "tokenizers", "safetensors", "huggingface_hub", "kernels", "liger_kernel", "flash_attn",
    "xformers", "apex", "deepspeed", "lightning", "pytorch_lightning", "vllm", "sglang", "numpy", "einops",
    "megatron", "fairscale", "functorch", "profiling_in_pytorch", "trace_report", "importlib", "concurrent",
    "multiprocessing", "asyncio", "json", "encodings", "collections", "logging", "unittest", "typing_extensions",
})
_FRAME = re.compile(r"^(.*?\.py)\((\d+)\): (\S+)")


def user_line(name: str) -> str | None:
    """`step() in train.py:42` for a Python frame of the reader's own code (`train.py(42): step`: the line is where the
    function starts, as the profiler records it), None for a library's."""
    found = _FRAME.match(name)
    if found is None:
        return None
    path = found.group(1).replace("\\", "/")
    if "site-packages/" in path or "dist-packages/" in path or "/lib/python" in path or path.startswith("<"):
        return None
    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    first = parts[0] if len(parts) > 1 else parts[0][: -len(".py")]
    if first in LIBRARIES or (len(parts) == 1 and first in _STDLIB):
        return None
    return f"{found.group(3)}() in {parts[-1]}:{found.group(2)}"


_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
