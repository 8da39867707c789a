"""Models that need no network: transformers configs written here, small for a first run and the tests, and one of
Llama 3.2 1B's size for a GPU.

Random weights: `AutoModelForCausalLM.from_config` builds the architecture, and for a dense model the kernels depend on
the shapes and dtypes, not on the values, so the trace is the one the trained weights would give.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Preset:
    config_class: str  # a transformers config class, by name (transformers is imported only when a model is built)
    options: dict[str, Any] = field(default_factory=dict)
    batch: int = 2
    seq: int = 64
    what: str = ""


_TINY = {"vocab_size": 1024, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
_TINY_DECODER = {**_TINY, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024}

PRESETS = {
    "tiny-llama": Preset("LlamaConfig", _TINY_DECODER, what="a Llama: 2 layers, hidden 256, grouped-query attention"),
    "tiny-qwen": Preset("Qwen3Config", {**_TINY_DECODER, "head_dim": 64},
                        what="a Qwen3: 2 layers, hidden 256, RMSNorm on queries and keys"),
    "tiny-gpt2": Preset("GPT2Config", {**_TINY, "n_embd": 256, "n_layer": 2, "n_head": 4, "n_positions": 1024},
                        what="a GPT-2: 2 layers, hidden 256, LayerNorm, GELU, learned positions"),
    # Llama 3.2 1B's shape: 16 layers, hidden 2048, 32 query and 8 key/value heads, MLP 8192, vocabulary 128,256,
    # tied embeddings; 1.24 B parameters.
    "llama-1b": Preset(
        "LlamaConfig",
        {"vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
         "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
         "rope_theta": 500000.0, "tie_word_embeddings": True, "bos_token_id": 128000, "eos_token_id": 128001},
        batch=8,
        seq=512,
        what="Llama 3.2 1B's shape: 16 layers, hidden 2048, 1.24 B parameters",
    ),
}
