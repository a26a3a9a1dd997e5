"""Typed, bounded access to config.json fields: every integer the math reads is a JSON integer
within a published-model bound, and every error names the file and the field."""

from __future__ import annotations

import math
from typing import Any

from ..errors import InvalidConfigError
from ..sources.limits import MAX_LAYERS, short

# Keys vLLM reads for the default max_model_len (vllm/config/model.py
# `_get_and_verify_max_len`, 0.33.0): the minimum over those present.
MAX_LEN_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
)

# Upper bounds of config integers (a bound, not a guess: each is far above every published
# model, and keeps every derived byte count well inside int64). Fields not named: INT_MAX.
FIELD_MAX = {
    "num_hidden_layers": MAX_LAYERS, "n_layer": MAX_LAYERS, "num_layers": MAX_LAYERS,
    "num_attention_heads": 2**14, "n_head": 2**14, "hidden_size": 2**18, "n_embd": 2**18,
    "vocab_size": 2**24, "padded_vocab_size": 2**24, "head_dim": 2**14, "attention_head_dim": 2**14,
    "kv_channels": 2**14, "intermediate_size": 2**20, "ffn_hidden_size": 2**20,
    "intermediate_size_mlp": 2**20, "moe_intermediate_size": 2**20,
    "num_local_experts": 2**12, "num_experts": 2**12, "n_routed_experts": 2**12,
    **{k: 2**34 for k in MAX_LEN_KEYS}, "sliding_window": 2**34, "attention_chunk_size": 2**34,
    "original_max_position_embeddings": 2**34,
    "n_layers": MAX_LAYERS, "n_heads": 2**14, "d_model": 2**18, "n_inner": 2**20, "ffn_dim": 2**20,
    "word_embed_proj_dim": 2**18, "rotary_dim": 2**14, "kv_n_heads": 2**14,  # fam-a
    "num_crops": 64, "image_dim_out": 2**16, "num_img_tokens": 2**16,  # fam-c: phi3_v
    "encoder_layers": MAX_LAYERS, "decoder_layers": MAX_LAYERS,  # fam-c: whisper
    "encoder_attention_heads": 2**14, "decoder_attention_heads": 2**14,
    "encoder_ffn_dim": 2**20, "decoder_ffn_dim": 2**20, "num_mel_bins": 2**12,
    "max_source_positions": 2**20,
}
INT_MAX = 2**24
# Fields that are divisors, counts or periods: 0 is as impossible as a negative.
POSITIVE = {
    "num_hidden_layers", "n_layer", "num_layers", "num_attention_heads", "n_head", "hidden_size",
    "n_embd", "vocab_size", "padded_vocab_size", "head_dim", "attention_head_dim", "kv_channels",
    "n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
    "num_attention_groups", "num_local_experts", "num_experts", "n_routed_experts",
    "num_experts_per_tok", "experts_per_token", "decoder_sparse_step", "moe_layer_freq",
    "interleave_moe_layer_step", "expert_layer_period", "sliding_window_pattern",
    "_sliding_window_pattern", "full_attention_interval", "attn_layer_period", "mamba_n_heads",
    "mamba_num_heads", "mamba_head_dim", "mamba_d_head", "linear_num_key_heads",
    "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "moe_intermediate_size",
    "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "mamba_expand", "mamba_d_state",
    "ssm_state_size", "sliding_window", "attention_chunk_size", *MAX_LEN_KEYS,
    "n_layers", "n_heads", "d_model", "ffn_dim", "word_embed_proj_dim", "kv_n_heads",  # fam-a
    "num_crops", "image_dim_out", "num_img_tokens",  # fam-c: phi3_v
    "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads",
    "encoder_ffn_dim", "decoder_ffn_dim", "num_mel_bins", "max_source_positions",  # whisper
}


class Reader:
    """Typed access to config fields, raising errors that name the file and the field.

    Integers must be JSON integers (a numeric string such as "131072" is refused: vLLM
    compares these fields with numbers and fails on a string), within [0 or 1, FIELD_MAX]."""

    def __init__(self, cfg: dict[str, Any], path: str) -> None:
        self.cfg = cfg
        self.path = path

    def check_int(self, key: str, value: Any, where: str | None = None) -> int:
        name = where or key
        lo = 1 if key in POSITIVE else 0
        hi = FIELD_MAX.get(key, INT_MAX)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidConfigError(f"expected an integer, got {short(value)}", path=self.path,
                                     field=name, hint="write the number without quotes")
        if not lo <= value <= hi:
            raise InvalidConfigError(f"expected an integer from {lo} to {hi:,}, got {short(value)}",
                                     path=self.path, field=name)
        return value

    def opt_int(self, key: str, default: int | None = None) -> int | None:
        """The field when present (validated), else `default` (not validated)."""
        value = self.cfg.get(key)
        return default if value is None else self.check_int(key, value)

    def float(self, key: str, *, lo: float, hi: float) -> float | None:
        value = self.cfg.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and lo < value <= hi):
            raise InvalidConfigError(f"expected a number in ({lo:g}, {hi:g}], got {short(value)}",
                                     path=self.path, field=key)
        return float(value)

    def int_list(self, key: str) -> list[int]:
        value = self.cfg.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > 4 * MAX_LAYERS or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT_MAX
                for v in value):
            raise InvalidConfigError(
                f"expected a list of non-negative integers, got {short(value)}",
                path=self.path, field=key)
        return value

    def int(self, *keys: str, default: int | None = None) -> int:
        """The first of `keys` present (validated), else `default`; missing and no default:
        an error naming the keys."""
        for key in keys:
            if key in self.cfg and self.cfg[key] is not None:
                return self.check_int(key, self.cfg[key])
        if default is not None:
            return default
        raise InvalidConfigError(
            "missing (needed to size the model)", path=self.path, field=" or ".join(keys),
            hint="kvplan needs the model's own config.json with its architecture fields",
        )

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        return bool(value) if value is not None else default

