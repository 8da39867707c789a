"""A shape: tokens = batch × seq rows through a dim → hidden → dim MLP, and how `--shapes` spells one."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from profiling_in_pytorch.checks.roofline import gemm_flops


@dataclass(frozen=True)
class Shape:
    name: str
    batch: int
    seq: int
    dim: int
    hidden: int

    @property
    def tokens(self) -> int:
        return self.batch * self.seq

    @property
    def flops(self) -> int:
        """Three GEMMs of tokens x dim x hidden, counted by trace-report's formula (the lessons' and the op table's
        count: 2 FLOPs per multiply-add); the GELU and product are noise."""
        t, d, h = self.tokens, self.dim, self.hidden
        return sum(gemm_flops(m, k, n, "bf16") for m, k, n in ((t, d, h), (t, d, h), (t, h, d)))

    @property
    def train_flops(self) -> int:
        """A forward and a backward: the backward's six GEMMs (the gradients of the input and of each weight) do
        twice the forward's work, so three times the forward's FLOPs."""
        return 3 * self.flops

    @property
    def train_elements(self) -> int:
        """Elements a training call holds at its peak: the three weights and their gradients, x, y, dy and x's
        gradient, and eight [tokens, hidden] tensors (g, u, h, m kept for the backward, and as many gradients)."""
        return 2 * 3 * self.dim * self.hidden + self.tokens * (4 * self.dim + 8 * self.hidden)

    def min_bytes(self, element_size: int, weight_size: int | None = None) -> int:
        """The least traffic any implementation needs: the three weights and x read once, the output written once
        (weights of `weight_size` bytes each when they are stored narrower, as FP8's are)."""
        weights = 3 * self.dim * self.hidden * (element_size if weight_size is None else weight_size)
        return weights + 2 * self.tokens * self.dim * element_size

    @property
    def spec(self) -> str:
        return f"{self.batch}x{self.seq}:{self.dim}:{self.hidden}"

    @property
    def title(self) -> str:
        return f"{self.name} · {self.batch}×{self.seq} tokens · {self.dim}→{self.hidden}"


SHAPE_PATTERN = re.compile(r"^(\d+)x(\d+):(\d+):(\d+)$")


def parse_shapes(text: str, presets: dict[str, Shape]) -> list[Shape]:
    """`decode,64x128:768:3072`: preset names or BATCHxSEQ:DIM:HIDDEN, comma-separated (for an argparse type)."""
    shapes = []
    for item in (part.strip() for part in text.split(",")):
        if item.lower() in presets:
            shapes.append(presets[item.lower()])
            continue
        match = SHAPE_PATTERN.match(item)
        if not match:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not BATCHxSEQ:DIM:HIDDEN (e.g. 8x1:768:3072) or one of {', '.join(presets)}"
            )
        sizes = [int(g) for g in match.groups()]
        if min(sizes) <= 0:
            raise argparse.ArgumentTypeError(f"{item!r}: every size must be a positive whole number")
        preset = next((p for p in presets.values() if (p.batch, p.seq, p.dim, p.hidden) == tuple(sizes)), None)
        shapes.append(preset or Shape(item, *sizes))
    if len({s.name for s in shapes}) != len(shapes):
        raise argparse.ArgumentTypeError(f"{text!r} names a shape twice")
    return shapes
