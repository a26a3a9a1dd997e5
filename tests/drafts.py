"""Draft models the speculative-decoding tests plan with (configs only, no weights)."""

from __future__ import annotations

import json
from pathlib import Path

# An EAGLE-3 head for Llama-3.1-8B (the layout of yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's
# config.json): one Llama decoder layer, a 32,000-token draft vocabulary.
EAGLE3_CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_hidden_layers": 1, "vocab_size": 128256, "draft_vocab_size": 32000,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "rope_theta": 500000.0,
}


def write_config(parent: Path, name: str, config: dict) -> Path:
    """A model directory holding just `config.json`."""
    d = parent / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    return d
