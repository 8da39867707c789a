"""What a forward keeps for its backward: the tensors autograd saves, counted with saved-tensor hooks.

Every `save_for_backward` passes its tensors through `torch.autograd.graph.saved_tensors_hooks`: ATen's
derivative formulas, a custom `autograd.Function` (Liger's, ours) and the function AOTAutograd builds for a
compiled graph alike. Counting what the pack hook sees, one entry per storage (eager's gate and up projections
both save the same x), gives the activation memory a training step holds between its forward and its backward,
without an allocator: the same count on a CPU and on a GPU. Weights (the module's parameters and buffers, also
saved by the GEMMs' backward) live on anyway and are listed apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

INPUT, WEIGHT, ACTIVATION = "input", "weight", "activation"


@dataclass(frozen=True)
class SavedTensor:
    shape: tuple[int, ...]
    dtype: torch.dtype
    nbytes: int  # of its whole storage: a saved view keeps all of it alive
    kind: str  # INPUT (the forward's x), WEIGHT (a parameter or buffer of the module) or ACTIVATION


@dataclass(frozen=True)
class SavedForBackward:
    tensors: tuple[SavedTensor, ...]  # one per storage, in the order the forward saved them

    def of_kind(self, *kinds: str) -> list[SavedTensor]:
        return [t for t in self.tensors if t.kind in kinds]

    @property
    def activation_bytes(self) -> int:
        """What the step holds for its backward beyond the weights: the input and the activations."""
        return sum(t.nbytes for t in self.of_kind(INPUT, ACTIVATION))

    def describe(self) -> str:
        """'x [8192, 768] + 2 × [8192, 3072]' in saving order, rows as tokens, shapes grouped; weights left out."""
        parts: list[str] = []
        counts: dict[str, int] = {}
        for t in self.of_kind(INPUT, ACTIVATION):
            rows = 1
            for d in t.shape[:-1]:
                rows *= d
            shape = f"[{rows}, {t.shape[-1]}]" if len(t.shape) > 1 else f"[{t.shape[0] if t.shape else 1}]"
            text = f"x {shape}" if t.kind == INPUT else shape
            if text not in counts:
                parts.append(text)
            counts[text] = counts.get(text, 0) + 1
        return " + ".join(p if counts[p] == 1 else f"{counts[p]} × {p}" for p in parts) or "nothing"


def saved_for_backward(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, module: torch.nn.Module
                       ) -> tuple[torch.Tensor, SavedForBackward]:
    """Run `forward(x)` with gradients on and return its output and what autograd saved for the backward.

    `module` names the weights (its parameters and buffers); `x` the input. Call backward on the output (or drop
    it) afterwards: the saved tensors are autograd's, not copies.
    """
    weights = {t.untyped_storage().data_ptr() for t in (*module.parameters(), *module.buffers()) if t.numel()}
    input_storage = x.untyped_storage().data_ptr()
    seen: dict[int, SavedTensor] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in seen and storage.nbytes():
            kind = WEIGHT if ptr in weights else INPUT if ptr == input_storage else ACTIVATION
            seen[ptr] = SavedTensor(tuple(t.shape), t.dtype, storage.nbytes(), kind)
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward(x)
    return out, SavedForBackward(tuple(seen.values()))
