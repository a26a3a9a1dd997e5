"""One converter per model family: what each family's config.json means for the ModelSpec.

`CONVERTERS` maps a family (the config's model_type, or the language model's inside a
vision-language wrapper) to a function that reads the family's geometry into a `Shape`: layer,
head and MLP sizes, biases, RoPE width, tying, and the ModelSpec fields and hooks in which the
family differs from a Llama-style decoder (its layer pattern, experts, linear-attention state,
adjustments after the generic reads). Adding a family is one entry. A family not in the table
is read as a Llama-style decoder and the ModelSpec says so (`layout_assumed`).

Each converter names the vLLM file it follows (vllm/model_executor/models/<file>.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidConfigError
from ..sources.limits import short
from ..specs import AudioEncoderSpec, LinearAttentionSpec, MlaSpec, ModelSpec, MoeSpec, Problem
from ..units import DTYPE_ALIASES
from .fields import Reader

# Gemma3TextConfig defaults (transformers models/gemma3/configuration_gemma3.py): a sparse
# published config (google/gemma-3-4b-it) leaves these out.
GEMMA3_TEXT_DEFAULTS = {
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 262208,
    "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 6,
    "tie_word_embeddings": True,
}
# Vision-language wrappers whose tower kvplan counts (gemma3 / llama4 above, these below),
# with the language-model family each runs: Qwen-VL's LM is Qwen2 (top-level keys, or
# text_config in re-serialised configs); the llava-style wrappers name it in
# text_config.model_type, defaulting as transformers' config classes do (LlavaConfig /
# LlavaNextConfig / Idefics3Config: llama; Mistral3Config: mistral).
VLM_TEXT_FAMILY = {"qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2", "qwen3_vl": "qwen3",
                   "qwen3_vl_moe": "qwen3_moe", "llava": "llama",
                   "llava_next": "llama", "mistral3": "mistral", "idefics3": "llama",
                   "phi3_v": "phi3"}
VISION_MODEL_TYPES = {"gemma3", "llama4", *VLM_TEXT_FAMILY}
# Defaults transformers fills into a sparse text_config (llava-hf configs list only what
# differs): LlamaConfig and MistralConfig (models/llama|mistral/configuration_*.py).
TEXT_CONFIG_DEFAULTS = {
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048,
              "tie_word_embeddings": False},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "max_position_embeddings": 4096 * 32, "sliding_window": 4096,
                "tie_word_embeddings": False},
}
FALCON_TYPES = {"falcon", "RefinedWeb", "RefinedWebModel"}  # RW*: the pre-transformers configs
MLA_FAMILIES = {"deepseek_v2", "deepseek_v3", "kimi_k2"}
MAMBA_FAMILIES = {"jamba", "bamba", "nemotron_h"}
MAMBA_KEYS = ("attn_layer_period", "hybrid_override_pattern", "layers_block_type", "ssm_cfg",
              "mamba_d_state", "mamba_expand")


@dataclass
class Context:
    """What a converter reads: the language model's config (`cfg`, a wrapper's text_config
    merged with its defaults), the file as written (`raw`), the family and the file's
    model_type, and a Reader over `cfg`."""

    cfg: dict[str, Any]
    raw: dict[str, Any]
    family: str
    model_type: str
    r: Reader


LayerPattern = Callable[[Reader, int, "int | None"], "list[str] | None"]
MoeReader = Callable[[Context, int, int], "MoeSpec | None"]
LinearReader = Callable[[Context], LinearAttentionSpec]
Finish = Callable[[dict[str, Any]], None]
Adjust = Callable[[ModelSpec, Reader], dict[str, Any]]


@dataclass
class Shape:
    """A family's reading of its config: the geometry every family has, plus what differs.

    `fields` are ModelSpec fields that replace the generic values; `layer_pattern` gives the
    per-layer kinds when the config has no `layer_types` (None: the generic sliding-window
    rule); `moe` and `linear` read experts and linear-attention state; `finish` edits the
    ModelSpec fields after the generic reads; `adjust` returns updates to the built spec."""

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    rotary_dim: int
    tie: bool
    qk_norm: bool = False
    mla: MlaSpec | None = None
    mla_projections: MlaSpec | None = None
    experts_only: bool = False  # every MLP is an MoE block: no dense intermediate size
    fields: dict[str, Any] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    layer_pattern: LayerPattern | None = None
    moe: MoeReader | None = None
    linear: LinearReader | None = None
    finish: Finish | None = None
    adjust: Adjust | None = None


Converter = Callable[[Context], Shape]


# ------------------------------------------------------------------ wrappers and family names

def language_model(cfg: dict[str, Any], model_type: str) -> tuple[dict[str, Any], str]:
    """(the language model's config, its family). Multimodal wrappers keep the language model
    under text_config (Llama 4, Gemma 3, …); the wrapper's language model decides the layout."""
    text_cfg = cfg
    if "text_config" in cfg and isinstance(cfg["text_config"], dict):
        text = cfg["text_config"]
        if model_type == "gemma3":
            text = {**GEMMA3_TEXT_DEFAULTS, **text}
        elif model_type in VLM_TEXT_FAMILY:
            text_type = text.get("model_type") or VLM_TEXT_FAMILY[model_type]
            text = {**TEXT_CONFIG_DEFAULTS.get(str(text_type), {}), **text}
        dtype = cfg.get("torch_dtype") or cfg.get("dtype") or text.get("torch_dtype")
        text_cfg = {**text, "torch_dtype": dtype,
                    "quantization_config": cfg.get("quantization_config")}
    family = {"gemma3_text": "gemma3", "llama4_text": "llama4"}.get(model_type, model_type)
    if model_type in VLM_TEXT_FAMILY:
        text_type = text_cfg.get("model_type") if text_cfg is not cfg else None
        family = VLM_TEXT_FAMILY[model_type] if model_type.startswith("qwen") else str(
            text_type or VLM_TEXT_FAMILY[model_type])
    elif model_type in FALCON_TYPES:
        family = "falcon"
    return text_cfg, family


def converter(family: str) -> Converter:
    """The family's converter; a family kvplan does not know is read as a Llama decoder."""
    return CONVERTERS.get(family, _llama)


# ----------------------------------------------------------------- Llama-style decoders

def _decoder(c: Context, *, attention_bias: bool = False, o_bias: bool = True,
             mlp_bias: bool = False, partial_rotary: float = 1.0, tied: bool = False,
             qk_norm: bool = False) -> Shape:
    """The Llama reading (vllm llama.py) every decoder below starts from. The keyword
    arguments are the family's defaults for the optional keys: attention_bias (q/k/v, and
    o_proj unless `o_bias` is False: then o_proj never has one), mlp_bias,
    partial_rotary_factor, tie_word_embeddings; `qk_norm`: per-head q/k RMSNorms."""
    r = c.r
    layers = r.int("num_hidden_layers", "n_layer", "num_layers")
    heads = r.int("num_attention_heads", "n_head")
    # vLLM's order of KV-head keys (vllm/transformers_utils/config.py).
    kv_heads = r.int("n_head_kv", "num_kv_heads", "num_key_value_heads",
                     "multi_query_group_num", "num_attention_groups", default=heads)
    hidden = r.int("hidden_size", "n_embd")
    head_dim = r.opt_int("head_dim") or r.opt_int("attention_head_dim") or hidden // heads
    if head_dim < 1:
        raise InvalidConfigError(f"hidden_size {hidden} over {heads} heads leaves no head "
                                 "dimension", path=r.path, field="head_dim")
    vocab = r.int("vocab_size")
    intermediate = r.int("intermediate_size", default=0)
    qkv = r.bool("attention_bias", attention_bias)
    o = r.bool("attention_bias", attention_bias) if o_bias else False
    mlp = r.bool("mlp_bias", mlp_bias)
    partial = r.float("partial_rotary_factor", lo=0.0, hi=1.0) or partial_rotary
    return Shape(layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, vocab=vocab,
                 intermediate=intermediate, qkv_bias=qkv, o_bias=o, mlp_bias=mlp,
                 rotary_dim=int(head_dim * partial), tie=r.bool("tie_word_embeddings", tied),
                 qk_norm=qk_norm, moe=_qwen_moe_if_experts)


def _llama(c: Context) -> Shape:
    """llama.py: llama, mistral, yi; also any family kvplan does not know."""
    return _decoder(c)


def _qwen2(c: Context) -> Shape:
    """qwen2.py / qwen2_moe.py: q/k/v always biased (QKVParallelLinear(bias=True)), o_proj
    not."""
    s = _decoder(c, attention_bias=True, o_bias=False)
    if c.family == "qwen2_moe":
        s.moe = _qwen_moe
    return s


def _qwen3(c: Context) -> Shape:
    """qwen3.py / qwen3_moe.py: per-head q/k RMSNorms."""
    s = _decoder(c, qk_norm=True)
    if c.family == "qwen3_moe":
        s.moe = _qwen_moe
    return s


def _qwen3_next(c: Context) -> Shape:
    """qwen3_next.py: every `full_attention_interval`-th layer (default 4) is gated full
    attention with q/k norms, the rest Gated DeltaNet; experts as Qwen3-MoE."""
    s = _decoder(c, qk_norm=True)
    s.fields["gated_attention"] = True
    s.moe = _qwen_moe

    def pattern(r: Reader, layers: int, chunk: int | None) -> list[str]:
        interval = r.opt_int("full_attention_interval") or 4
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(layers)]

    s.layer_pattern = pattern
    return s


def _mixtral(c: Context) -> Shape:
    """mixtral.py: every layer num_local_experts experts of intermediate_size."""
    s = _decoder(c)

    def moe(c: Context, layers: int, intermediate: int) -> MoeSpec:
        r = c.r
        return MoeSpec(num_experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=intermediate, moe_layers=list(range(layers)))

    s.moe = moe
    return s


def _gemma2(c: Context) -> Shape:
    """gemma2.py: four RMSNorms per layer, even layers slide, tied embeddings by default."""
    s = _decoder(c, tied=True)
    s.fields["norms_per_layer"] = 4

    def pattern(r: Reader, layers: int, chunk: int | None) -> list[str]:
        return ["sliding" if i % 2 == 0 else "full" for i in range(layers)]

    s.layer_pattern = pattern
    return s


def _gemma3(c: Context) -> Shape:
    """gemma3.py: as Gemma 2 with q/k norms; layers slide except every
    `sliding_window_pattern`-th (default 6); with RoPE scaling a second, unscaled cos/sin cache
    serves the local layers. A wrapper without vision_config: the tower is not counted."""
    s = _decoder(c, tied=True, qk_norm=True)
    s.fields["norms_per_layer"] = 4
    s.problems = _vision_not_counted(c)

    def pattern(r: Reader, layers: int, chunk: int | None) -> list[str]:
        every = r.opt_int("sliding_window_pattern") or r.opt_int("_sliding_window_pattern") or 6
        return ["sliding" if (i + 1) % every else "full" for i in range(layers)]

    def finish(spec: dict[str, Any]) -> None:
        if spec["rope_type"]:
            spec["rope_cache_positions"] += int(spec["max_position_embeddings"] or 0)

    s.layer_pattern, s.finish = pattern, finish
    return s


def _vision_not_counted(c: Context) -> list[Problem]:
    if "text_config" in c.raw and "vision_config" not in c.raw:
        return [Problem(
            code="vision-not-counted", severity="warning",
            message="this multimodal config has no vision_config, so the vision tower's weights "
            "are not counted (plan the full config.json, or its checkpoint, to include them)")]
    return []


def _llama4(c: Context) -> Shape:
    """llama4.py: dense layers of intermediate_size_mlp, MoE layers every
    `interleave_moe_layer_step`-th with one shared expert; RoPE layers use chunked local
    attention, the NoPE layers (every 4th, or `no_rope_layers`) global."""
    s = _decoder(c)
    s.intermediate = c.r.int("intermediate_size_mlp", default=s.intermediate)
    s.problems = _vision_not_counted(c)

    def moe(c: Context, layers: int, intermediate: int) -> MoeSpec:
        r = c.r
        step = r.int("interleave_moe_layer_step", default=1)
        expert = r.int("intermediate_size")  # intermediate_size_mlp is the dense layers' width
        return MoeSpec(num_experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=expert, shared_expert_intermediate_size=expert,
                       moe_layers=[i for i in range(layers) if (i + 1) % step == 0])

    def pattern(r: Reader, layers: int, chunk: int | None) -> list[str] | None:
        if not chunk:
            return None
        nope = r.int_list("no_rope_layers")
        return [("full" if nope[i] == 0 else "chunked") if len(nope) == layers
                else ("full" if (i + 1) % 4 == 0 else "chunked") for i in range(layers)]

    s.moe, s.layer_pattern = moe, pattern
    return s


def _phi(c: Context) -> Shape:
    """Phi-1 / 1.5 / 2 (transformers PhiModel; phi.py): one LayerNorm (weight + bias) feeds
    attention and MLP in parallel; q/k/v and dense carry biases; the MLP is fc1 → gelu → fc2
    with biases (not gated); the final LayerNorm and the LM head carry biases."""
    s = _decoder(c, attention_bias=True, mlp_bias=True)
    s.fields.update(norms_per_layer=1, norm_bias=True, lm_head_bias=True, mlp_gated=False)
    return s


def _gpt_oss(c: Context) -> Shape:
    """gpt_oss.py: attention sinks; every MLP is an MoE block with biased router and
    experts."""
    s = _decoder(c)
    s.fields["attention_sinks"] = True
    s.experts_only = True

    def moe(c: Context, layers: int, intermediate: int) -> MoeSpec:
        r = c.r
        return MoeSpec(num_experts=r.int("num_local_experts"),
                       top_k=r.int("num_experts_per_tok", "experts_per_token"),
                       expert_intermediate_size=intermediate, moe_layers=list(range(layers)),
                       router_bias=True, expert_bias=True)

    s.moe = moe
    return s


def _glm4_moe(c: Context) -> Shape:
    """glm4_moe.py (main @ 002d6073): attention_bias biases q/k/v only (o_proj bias=False);
    partial_rotary_factor defaults to 0.5; optional per-head q/k RMSNorm (GLM-4.5 on,
    GLM-4.5-Air off). Layers ≥ first_k_dense_replace are MoE; the router is an fp32 nn.Linear
    with an fp32 e_score_correction_bias; the shared experts are one ungated MLP of
    n_shared_experts × moe_intermediate_size."""
    s = _decoder(c, o_bias=False, partial_rotary=0.5)
    s.qk_norm = c.r.bool("use_qk_norm", False)

    def moe(c: Context, layers: int, intermediate: int) -> MoeSpec:
        r = c.r
        first, inter = r.int("first_k_dense_replace", default=0), r.int("moe_intermediate_size")
        return MoeSpec(num_experts=r.int("n_routed_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=inter,
                       shared_expert_intermediate_size=r.int("n_shared_experts", default=0) * inter,
                       moe_layers=[i for i in range(layers) if i >= first],
                       score_correction_bias=True, router_dtype="float32")

    s.moe = moe
    return s


def _minimax_m2(c: Context) -> Shape:
    """minimax_m2.py (main @ 01d99586): q/k RMSNorms over the full width, split over TP;
    rotary_dim named in the config. Every layer is MoE over num_local_experts experts of
    intermediate_size, no shared expert; fp32 ReplicatedLinear router, fp32
    e_score_correction_bias when use_routing_bias."""
    s = _decoder(c, qk_norm=True)
    s.rotary_dim = min(c.r.int("rotary_dim", default=s.head_dim), s.head_dim)
    s.fields["qk_norm_layout"] = "full_width_tp"
    s.experts_only = True

    def moe(c: Context, layers: int, intermediate: int) -> MoeSpec:
        r = c.r
        return MoeSpec(num_experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=r.int("intermediate_size"),
                       moe_layers=list(range(layers)),
                       score_correction_bias=r.bool("use_routing_bias", False),
                       router_dtype="float32")

    s.moe = moe
    return s


def _mla(c: Context) -> Shape:
    """deepseek_v2.py (DeepSeek-V2/V3, Kimi K2): Multi-head Latent Attention — the cache is one
    latent head of kv_lora_rank + qk_rope_head_dim (kv.py); experts from
    first_k_dense_replace every moe_layer_freq-th layer, n_shared_experts shared, V3's fp32
    score-correction bias (topk_method noaux_tc). No sliding window."""
    s = _decoder(c)
    r = c.r
    mla = MlaSpec(kv_lora_rank=r.int("kv_lora_rank"), qk_rope_head_dim=r.int("qk_rope_head_dim"),
                  qk_nope_head_dim=r.int("qk_nope_head_dim"), v_head_dim=r.int("v_head_dim"),
                  q_lora_rank=r.opt_int("q_lora_rank"))
    s.mla = mla
    s.head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    s.rotary_dim = mla.qk_rope_head_dim
    s.kv_heads = s.heads  # nominal; the cache is one latent head (kv.py)

    def moe(c: Context, layers: int, intermediate: int) -> MoeSpec | None:
        r = c.r
        if not c.cfg.get("n_routed_experts"):
            return _qwen_moe_if_experts(c, layers, intermediate)
        first, freq = r.int("first_k_dense_replace", default=0), r.int("moe_layer_freq", default=1)
        inter = r.int("moe_intermediate_size")
        return MoeSpec(num_experts=r.int("n_routed_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=inter,
                       shared_expert_intermediate_size=r.int("n_shared_experts", default=0) * inter,
                       moe_layers=[i for i in range(layers) if i >= first and i % freq == 0],
                       score_correction_bias=c.cfg.get("topk_method") == "noaux_tc")

    s.moe, s.layer_pattern = moe, _no_pattern
    return s


def _no_pattern(r: Reader, layers: int, chunk: int | None) -> list[str]:
    return []


def _qwen_moe(c: Context, layers: int, intermediate: int) -> MoeSpec:
    """Qwen2/3-MoE and Qwen3-Next (qwen2_moe.py, qwen3_moe.py): experts every
    decoder_sparse_step-th layer except mlp_only_layers, a gated shared expert."""
    r = c.r
    step = r.int("decoder_sparse_step", default=1)
    dense = set(r.int_list("mlp_only_layers"))
    shared = r.int("shared_expert_intermediate_size", default=0)
    return MoeSpec(num_experts=r.int("num_experts"), top_k=r.int("num_experts_per_tok"),
                   expert_intermediate_size=r.int("moe_intermediate_size"),
                   shared_expert_intermediate_size=shared, shared_expert_gate=shared > 0,
                   moe_layers=[i for i in range(layers) if i not in dense and (i + 1) % step == 0])


def _qwen_moe_if_experts(c: Context, layers: int, intermediate: int) -> MoeSpec | None:
    """Any other family with num_experts is read as Qwen-MoE experts."""
    return _qwen_moe(c, layers, intermediate) if c.cfg.get("num_experts") else None


def _no_moe(c: Context, layers: int, intermediate: int) -> None:
    return None


def _chatglm(c: Context) -> Shape:
    """chatglm.py (GLM-4, THUDM): ChatGLM key names; GQA via multi_query_group_num, head dim
    kv_channels, fused dense_h_to_4h (gated, 2 × ffn_hidden_size), qkv bias, untied
    output_layer; RoPE over half of each head."""
    r = c.r
    layers = r.int("num_layers", "num_hidden_layers")
    heads = r.int("num_attention_heads")
    kv_heads = r.int("multi_query_group_num") if c.cfg.get("multi_query_attention") else heads
    head_dim = r.int("kv_channels")
    vocab = r.int("padded_vocab_size", "vocab_size")
    intermediate = r.int("ffn_hidden_size")
    qkv_bias = r.bool("add_qkv_bias", False)
    biased = r.bool("add_bias_linear", False)
    return Shape(layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, vocab=vocab,
                 intermediate=intermediate, qkv_bias=qkv_bias, o_bias=biased, mlp_bias=biased,
                 rotary_dim=head_dim // 2, tie=r.bool("tie_word_embeddings", False),
                 moe=_qwen_moe_if_experts)


# ---------------------------------------------------------------------- hybrid Mamba models

def _hybrid(c: Context, pattern: LayerPattern, linear: LinearReader, *,
            rope: bool = True) -> Shape:
    s = _decoder(c)
    if not rope:
        s.rotary_dim = 0  # their attention layers use no positional encoding
    s.layer_pattern, s.linear = pattern, linear
    return s


def _ssm_dtype(cfg: dict[str, Any], path: str) -> str:
    raw = cfg.get("mamba_ssm_cache_dtype") or "float32"
    dtype = DTYPE_ALIASES.get(str(raw).lower().replace("torch.", ""))
    if dtype is None:
        raise InvalidConfigError(f"unknown dtype {short(raw)}", path=path,
                                 field="mamba_ssm_cache_dtype")
    return dtype


def _jamba(c: Context) -> Shape:
    """jamba.py (Mamba1; JambaConfig mamba_d_state, mamba_d_conv, mamba_expand, mamba_dt_rank
    'auto' = ceil(hidden / 16)): attention every attn_layer_period-th layer from
    attn_layer_offset (JambaConfig.layers_block_type); experts every expert_layer_period-th
    layer from expert_layer_offset."""

    def pattern(r: Reader, layers: int, chunk: int | None) -> list[str]:
        period, offset = r.opt_int("attn_layer_period") or 8, r.opt_int("attn_layer_offset", 4)
        return ["full" if i % period == offset else "linear" for i in range(layers)]

    def linear(c: Context) -> LinearAttentionSpec:
        r, cfg = c.r, c.cfg
        hidden = r.int("hidden_size")
        expand = r.int("mamba_expand", default=2) or 2
        dt_rank = cfg.get("mamba_dt_rank", "auto")
        if dt_rank not in (None, "auto"):
            dt_rank = r.check_int("mamba_dt_rank", dt_rank)
        return LinearAttentionSpec(
            kind="mamba1", conv_kernel=r.int("mamba_d_conv", default=4) or 4,
            intermediate_size=expand * hidden,
            state_size=r.int("mamba_d_state", default=16) or 16,
            dt_rank=-(-hidden // 16) if dt_rank in (None, "auto") else int(dt_rank),
            conv_bias=bool(cfg.get("mamba_conv_bias", True)))

    def moe(c: Context, layers: int, intermediate: int) -> MoeSpec:
        r = c.r
        period = r.int("expert_layer_period", default=2)
        offset = r.int("expert_layer_offset", default=1)
        return MoeSpec(num_experts=r.int("num_experts"), top_k=r.int("num_experts_per_tok"),
                       expert_intermediate_size=intermediate,
                       moe_layers=[i for i in range(layers) if i % period == offset])

    s = _hybrid(c, pattern, linear, rope=False)
    s.moe = moe
    return s


def _bamba(c: Context) -> Shape:
    """bamba.py (Mamba2; BambaConfig mamba_n_heads, mamba_d_head 'auto' = expand × hidden /
    heads, mamba_n_groups): attention on attn_layer_indices."""

    def pattern(r: Reader, layers: int, chunk: int | None) -> list[str]:
        attn = set(r.int_list("attn_layer_indices"))
        return ["full" if i in attn else "linear" for i in range(layers)]

    def linear(c: Context) -> LinearAttentionSpec:
        r, cfg = c.r, c.cfg
        hidden = r.int("hidden_size")
        expand = r.int("mamba_expand", default=2) or 2
        heads = r.int("mamba_n_heads")
        head_dim = cfg.get("mamba_d_head", "auto")
        if head_dim not in (None, "auto"):
            head_dim = r.check_int("mamba_d_head", head_dim)
        inner = expand * hidden
        return LinearAttentionSpec(
            kind="mamba2", conv_kernel=r.int("mamba_d_conv", default=4) or 4,
            intermediate_size=inner, state_size=r.int("mamba_d_state"), num_heads=heads,
            head_dim=inner // heads if head_dim in (None, "auto") else int(head_dim),
            n_groups=r.int("mamba_n_groups", default=1) or 1,
            conv_bias=bool(cfg.get("mamba_conv_bias", True)))

    return _hybrid(c, pattern, linear)


def _nemotron_h(c: Context) -> Shape:
    """nemotron_h.py (Mamba2; mamba_num_heads × mamba_head_dim, n_groups, ssm_state_size,
    conv_kernel, use_bias): one block per hybrid_override_pattern character — M Mamba2,
    * attention, - / E MLP; one norm per block, ungated MLPs, no positional encoding. vLLM
    keeps the SSM state in the config's mamba_ssm_cache_dtype, else float32
    (vllm/model_executor/models/config.py NemotronHForCausalLMConfig)."""

    def pattern(r: Reader, layers: int, chunk: int | None) -> list[str]:
        blocks = str(r.cfg.get("hybrid_override_pattern") or "")
        if len(blocks) != layers or set(blocks) - set("M*-E"):
            raise InvalidConfigError(
                f"expected {layers} characters of M, *, - or E, got {short(blocks)}",
                path=r.path, field="hybrid_override_pattern")
        return [{"M": "linear", "*": "full"}.get(b, "none") for b in blocks]

    def linear(c: Context) -> LinearAttentionSpec:
        r, cfg = c.r, c.cfg
        r.int("hidden_size")
        heads, head_dim = r.int("mamba_num_heads"), r.int("mamba_head_dim")
        return LinearAttentionSpec(
            kind="mamba2", conv_kernel=r.int("conv_kernel", default=4) or 4,
            intermediate_size=heads * head_dim, state_size=r.int("ssm_state_size"),
            num_heads=heads, head_dim=head_dim, n_groups=r.int("n_groups", default=1) or 1,
            conv_bias=bool(cfg.get("use_conv_bias", True)),
            in_proj_bias=bool(cfg.get("use_bias", False)), ssm_dtype=_ssm_dtype(cfg, r.path))

    def finish(spec: dict[str, Any]) -> None:
        spec["mlp_layers"] = [i for i, k in enumerate(spec["layer_types"]) if k == "none"]

    s = _hybrid(c, pattern, linear, rope=False)
    s.fields.update(norms_per_layer=1, mlp_gated=False)
    s.finish = finish
    if not c.cfg.get("mamba_ssm_cache_dtype"):
        s.problems.append(Problem(
            code="mamba-ssm-dtype-assumed", severity="info",
            message="Nemotron-H's SSM state is counted in float32, the default vLLM's NemotronH "
            "config hook sets when the config names none; releases whose hook defaulted to "
            "float16 hold half the SSM bytes"))
    return s


def gated_deltanet(c: Context) -> LinearAttentionSpec:
    """Linear-attention layers outside the Mamba families (Qwen3-Next's Gated DeltaNet, or a
    config whose layer_types names linear_attention)."""
    r = c.r
    return LinearAttentionSpec(
        num_key_heads=r.int("linear_num_key_heads"),
        num_value_heads=r.int("linear_num_value_heads"),
        key_head_dim=r.int("linear_key_head_dim"), value_head_dim=r.int("linear_value_head_dim"),
        conv_kernel=r.int("linear_conv_kernel_dim"))


# ------------------------------------------------------- llama variants (fam-b), as built

def _longrope(spec: ModelSpec, r: Reader) -> dict[str, Any]:
    """phi3 / phimoe / any variant with longrope scaling (rotary_embedding
    Phi3LongRoPEScaledRotaryEmbedding): the cache holds the short and the long table, original
    + max_position_embeddings rows (rotary_embedding/phi3_long_rope_scaled_rope.py as of the
    releases that select the table with use_long_rope; earlier releases also kept the two
    tables registered as buffers, twice these bytes — not modelled per version)."""
    if spec.rope_type == "longrope" and spec.max_position_embeddings:
        original = spec.rope_original_max_position or r.opt_int("original_max_position_embeddings")
        return {"rope_cache_positions": spec.max_position_embeddings + (original or 0)}
    return {}


def _variant(c: Context, adjust: Adjust | None = None, *, tied: bool = False,
             experts: bool = False) -> Shape:
    """A Llama-shaped decoder (the generic reading is right for its q/k/v/o and gated MLP
    shapes) whose differences `adjust` applies to the built spec, after the longrope cache
    rows. `adjust` reads the config file as written (for a wrapper: its top level). Experts,
    if any, are the adjustment's: `experts` False reads none."""
    s = _decoder(c, tied=tied)
    if not experts:
        s.moe = _no_moe

    def full(spec: ModelSpec, r: Reader) -> dict[str, Any]:
        u = _longrope(spec, r)
        if adjust is not None:
            u.update(adjust(spec, r))
        return u

    s.adjust = full
    return s


def _gemma(c: Context) -> Shape:
    """gemma.py: gated GeLU MLP, two RMSNorms; no lm_head of its own (logits from
    embed_tokens), so the embedding is tied whatever the config says."""
    return _variant(c, lambda spec, r: {"tie_word_embeddings": True})


def _cohere_adjust(spec: ModelSpec, r: Reader) -> dict[str, Any]:
    u: dict[str, Any] = {"tie_word_embeddings": True, "norms_per_layer": 1, "norm_bias": False}
    if r.bool("use_qk_norm", False):
        u.update(qk_norm=True, qk_norm_layout="per_head")
    if not spec.rope_type:
        u["rope_cache_positions"] = (r.opt_int("model_max_length")
                                     or r.opt_int("max_position_embeddings") or 8192)
    return u


def _cohere(c: Context) -> Shape:
    """cohere (commandr.py): ONE LayerNorm (weight, no bias) feeding attention and MLP in
    parallel; logits from embed_tokens (tied); use_qk_norm adds LayerNorm weights of shape
    [heads, head_dim] / [kv_heads, head_dim] split by heads over TP; the RoPE cache has
    model_max_length (else max_position_embeddings, else 8192) rows."""
    return _variant(c, _cohere_adjust)


def _cohere2(c: Context) -> Shape:
    """cohere2 (commandr.py): as cohere; layers slide except every sliding_window_pattern-th
    (Cohere2Config default 4) unless layer_types says."""

    def adjust(spec: ModelSpec, r: Reader) -> dict[str, Any]:
        u = _cohere_adjust(spec, r)
        explicit = r.cfg.get("layer_types")
        if not (isinstance(explicit, list) and len(explicit) == spec.num_layers):
            pattern = r.opt_int("sliding_window_pattern") or 4
            window = spec.sliding_window or r.opt_int("sliding_window")
            kinds = ["sliding" if (i + 1) % pattern else "full" for i in range(spec.num_layers)]
            u.update(layer_types=kinds if window and "sliding" in kinds else [],
                     sliding_window=window if window and "sliding" in kinds else None)
        return u

    return _variant(c, adjust)


def _olmo(c: Context) -> Shape:
    """olmo.py: LayerNorm(elementwise_affine=False) — no norm tensors anywhere."""
    return _variant(c, lambda spec, r: {"norm_weights": False})


def _olmo2(c: Context) -> Shape:
    """olmo2.py: no input norm; post-attention and post-feedforward RMSNorms; q_norm over
    heads·head_dim and k_norm over kv_heads·head_dim, replicated (all-gather under TP)."""
    return _variant(c, lambda spec, r: {"qk_norm": True, "qk_norm_layout": "full_width"})


def _internlm_adjust(spec: ModelSpec, r: Reader) -> dict[str, Any]:
    bias = r.bool("bias", False) or r.bool("attention_bias", False)
    return {"qkv_bias": r.bool("qkv_bias", bias), "o_bias": bias}


def _internlm(c: Context) -> Shape:
    """internlm / internlm3 (llama.py), internlm2 (internlm2.py): q/k/v (wqkv) and o biases
    from `bias`; `qkv_bias` overrides the q/k/v part (InternLM3). InternLM2 reads experts as
    any other family."""
    return _variant(c, _internlm_adjust, experts=c.family == "internlm2")


def _baichuan(c: Context) -> Shape:
    """baichuan.py BaichuanForCausalLM: W_pack = fused q/k/v of an MHA; hidden_size 4096
    (Baichuan2-7B) uses RoPE, any other (13B) ALiBi — no rotary cache. NormHead only
    normalises the untied lm_head at load."""

    def adjust(spec: ModelSpec, r: Reader) -> dict[str, Any]:
        if spec.hidden_size != 4096:
            return {"rotary_dim": 0, "rope_cache_positions": 0}  # ALiBi (Baichuan 13B)
        if not spec.max_position_embeddings:
            # getattr(config, "max_position_embeddings", 8192)
            return {"rope_cache_positions": 8192}
        return {}

    return _variant(c, adjust)


def _variant_experts(experts_key: str, shared_key: str | None = None) -> Adjust:
    """Every layer a FusedMoE of `experts_key` experts of intermediate_size, bias-free router;
    `shared_key`: a gated shared MLP of that size."""

    def adjust(spec: ModelSpec, r: Reader) -> dict[str, Any]:
        shared = r.int(shared_key, default=0) if shared_key else 0
        return {"intermediate_size": 0, "moe": MoeSpec(
            num_experts=r.int(experts_key), top_k=r.int("num_experts_per_tok"),
            expert_intermediate_size=r.int("intermediate_size"),
            shared_expert_intermediate_size=shared, moe_layers=list(range(spec.num_layers)))}

    return adjust


def _granitemoe(c: Context) -> Shape:
    """granite (granite.py): Llama + scalar multipliers (no tensors). granitemoe /
    granitemoeshared (granitemoe.py, granitemoeshared.py): every layer a FusedMoE of
    num_local_experts experts of intermediate_size (checkpoint input_linear / output_linear), a
    bias-free router; shared: a gated shared_mlp of shared_intermediate_size."""
    shared = "shared_intermediate_size" if c.family == "granitemoeshared" else None
    return _variant(c, _variant_experts("num_local_experts", shared))


def _minicpm(c: Context) -> Shape:
    """minicpm.py: Llama + scale_emb / dim_model_base scalars; with num_experts, every MLP is
    num_experts experts of intermediate_size (MiniCPM-MoE)."""
    experts = _variant_experts("num_experts")
    return _variant(c, lambda spec, r: experts(spec, r) if r.cfg.get("num_experts") else {})


def _phimoe(c: Context) -> Shape:
    """phimoe.py: LayerNorms with weight and bias, biased q/k/v and o, 16 experts top-2 of
    intermediate_size with a bias-free router, an untied LM head with a bias."""
    experts = _variant_experts("num_local_experts")

    def adjust(spec: ModelSpec, r: Reader) -> dict[str, Any]:
        return {**experts(spec, r), "norm_bias": True, "qkv_bias": True, "o_bias": True,
                "lm_head_bias": True}

    return _variant(c, adjust)


def _phi3(c: Context) -> Shape:
    """phi3.py: Llama-shaped (fused qkv_proj / gate_up_proj); longrope's two caches."""
    return _variant(c, experts=True)


def _minicpm3(c: Context) -> Shape:
    """minicpm3.py (main @ 009ccee0): MiniCPM's scalars, DeepSeek-V2-shaped attention
    projections (q_a / q_b, kv_a_proj_with_mqa / kv_b, o; ModelSpec.mla_projections), but
    Attention(num_local_heads, qk_nope + qk_rope, num_kv_heads=num_local_heads) caches full
    per-head K and V, V zero-padded from v_head_dim to the same qk_nope + qk_rope head size;
    RoPE over qk_rope_head_dim. MiniCPM3Config (the model repo's configuration_minicpm.py)
    ties the embeddings by default, and openbmb/MiniCPM3-4B's config.json leaves the key out."""
    s = _variant(c, tied=True)
    r = c.r
    proj = MlaSpec(
        kv_lora_rank=r.int("kv_lora_rank"), qk_rope_head_dim=r.int("qk_rope_head_dim"),
        qk_nope_head_dim=r.int("qk_nope_head_dim"),
        # MiniCPM3Config: v_head_dim None → qk_nope_head_dim (MiniCPM3-4B leaves it out)
        v_head_dim=r.int("v_head_dim", "qk_nope_head_dim"),
        q_lora_rank=r.opt_int("q_lora_rank"))
    s.mla_projections = proj
    s.head_dim = proj.qk_nope_head_dim + proj.qk_rope_head_dim
    s.rotary_dim = proj.qk_rope_head_dim
    s.kv_heads = s.heads
    return s


# ------------------------------------- GPT-2-style and parallel-block decoders (fam-a)
# Each as vLLM v0.11 builds it: LayerNorms (weight, and a bias unless noted), a non-gated MLP
# and fused, head-split q/k/v.

def _fam_a_geometry(r: Reader) -> tuple[int, int, int, int]:
    """(layers, heads, hidden, head_dim) under the GPT-2 / transformers key names."""
    layers = r.int("num_hidden_layers", "n_layer", "num_layers")
    heads = r.int("num_attention_heads", "n_head")
    hidden = r.int("hidden_size", "n_embd", "n_embed")
    head_dim = hidden // heads
    if head_dim < 1:
        raise InvalidConfigError(f"hidden_size {hidden} over {heads} heads leaves no head "
                                 "dimension", path=r.path, field="num_attention_heads")
    return layers, heads, hidden, head_dim


def _fam_a_shape(r: Reader, layers: int, heads: int, head_dim: int, *, kv_heads: int,
                 intermediate: int, biased: bool, tie: bool, rotary_dim: int = 0,
                 rope_rows: int = 0, qkv_bias: bool | None = None,
                 unsupported: list[str] | None = None, **fields: Any) -> Shape:
    """A fam-a Shape: `biased` for every linear unless `qkv_bias` (q/k/v and o) says apart;
    `fields` replace the Llama defaults (two LayerNorms with biases, ungated MLP)."""
    attn_bias = biased if qkv_bias is None else qkv_bias
    return Shape(
        layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        vocab=r.int("vocab_size"), intermediate=intermediate, qkv_bias=attn_bias,
        o_bias=attn_bias, mlp_bias=biased, rotary_dim=rotary_dim, tie=tie,
        fields={"mlp_gated": False, "norm_bias": True, "norms_per_layer": 2, **fields,
                "rope_cache_positions": rope_rows},
        unsupported=unsupported or [], moe=_qwen_moe_if_experts)


def _gpt2(c: Context) -> Shape:
    """gpt2.py: learned wpe (n_positions rows, replicated), c_attn/c_proj/c_fc/c_proj all
    biased, MLP n_inner or 4·n_embd, two LayerNorms, tied head. gpt_bigcode.py: as GPT-2, q/k/v
    over 1 KV head when multi_query (GPTBigCodeConfig: true)."""
    r = c.r
    layers, heads, hidden, head_dim = _fam_a_geometry(r)
    tie = r.bool("tie_word_embeddings", True)
    kv_heads = 1 if c.family == "gpt_bigcode" and r.bool("multi_query", True) else heads
    inter = r.int("n_inner", default=0) or 4 * hidden
    # GPT2Config / GPTBigCodeConfig default n_positions: 1024
    rows = r.int("n_positions", "max_position_embeddings", default=1024)
    return _fam_a_shape(r, layers, heads, head_dim, kv_heads=kv_heads, intermediate=inter,
                        biased=True, tie=tie, position_embedding_rows=rows)


def _gptj(c: Context) -> Shape:
    """gpt_j.py: one LayerNorm (parallel block), q/k/v and out_proj without bias, fc_in/fc_out
    biased (n_inner or 4·n_embd), partial RoPE over rotary_dim, untied LM head with a bias."""
    r = c.r
    layers, heads, hidden, head_dim = _fam_a_geometry(r)
    inter = r.int("n_inner", default=0) or 4 * hidden
    rotary_dim = r.int("rotary_dim", default=64) or head_dim
    rope_rows = r.int("n_positions", "max_position_embeddings", default=2048)
    return _fam_a_shape(r, layers, heads, head_dim, kv_heads=heads, intermediate=inter,
                        biased=True, qkv_bias=False, tie=False, rotary_dim=rotary_dim,
                        rope_rows=rope_rows, norms_per_layer=1, lm_head_bias=True)


def _gpt_neox(c: Context) -> Shape:
    """gpt_neox.py: two LayerNorms (use_parallel_residual does not change the weights),
    query_key_value/dense biased (attention_bias, default true), MLP intermediate_size biased,
    RoPE over int(head_dim · rotary_pct), embed_out untied unless tie_word_embeddings."""
    r = c.r
    layers, heads, _hidden, head_dim = _fam_a_geometry(r)
    inter = r.int("intermediate_size")
    attn_bias = r.bool("attention_bias", True)
    rotary_dim = int(head_dim * (r.float("rotary_pct", lo=0.0, hi=1.0) or 1.0))
    rope_rows = r.int("max_position_embeddings", default=2048)
    return _fam_a_shape(r, layers, heads, head_dim, kv_heads=heads, intermediate=inter,
                        biased=True, qkv_bias=attn_bias, tie=r.bool("tie_word_embeddings", False),
                        rotary_dim=rotary_dim, rope_rows=rope_rows)


def _falcon_kv_heads(r: Reader, rw: bool, new_arch: bool, heads: int) -> int:
    if new_arch:
        return r.int("n_head_kv", default=1) if rw else r.int("num_kv_heads", default=heads)
    return 1 if r.bool("multi_query", True) else heads


def _falcon(c: Context) -> Shape:
    """falcon.py: KV heads num_kv_heads (RW: n_head_kv) with new_decoder_architecture (RWConfig
    forces it at hidden 8192), else 1 with multi_query, else all; one LayerNorm when
    parallel_attn, two (ln_attn/ln_mlp) with new_decoder_architecture unless
    num_ln_in_parallel_attn is 1, two when not parallel; linears biased per `bias`; MLP
    4·hidden (hard-coded); RoPE over the whole head unless alibi; head tied unless
    tie_word_embeddings is false. RoPE cache rows: max_position_embeddings (FalconConfig
    default 2048); RW configs have none, so vLLM's getattr default 8192."""
    r = c.r
    layers, heads, hidden, head_dim = _fam_a_geometry(r)
    tie = r.bool("tie_word_embeddings", True)
    rw = c.model_type != "falcon"
    new_arch = r.bool("new_decoder_architecture", False) or (rw and hidden == 8192)
    kv_heads = _falcon_kv_heads(r, rw, new_arch, heads)
    parallel = r.bool("parallel_attn", not rw)
    n_ln = c.cfg.get("num_ln_in_parallel_attn")
    if n_ln is None and new_arch:
        n_ln = 2
    alibi = r.bool("alibi", False)
    biased = r.bool("bias", False)
    rope_rows = 0 if alibi else (8192 if rw else r.int("max_position_embeddings", default=2048))
    return _fam_a_shape(r, layers, heads, head_dim, kv_heads=kv_heads, intermediate=4 * hidden,
                        biased=biased, tie=tie, rotary_dim=0 if alibi else head_dim,
                        rope_rows=rope_rows, alibi=alibi,
                        norms_per_layer=2 if not parallel or n_ln == 2 else 1)


def _starcoder2(c: Context) -> Shape:
    """starcoder2.py: nn.LayerNorm norms, q/k/v/o and c_fc/c_proj biased per use_bias (default
    true), GQA, full RoPE, sliding window from the config."""
    r = c.r
    layers, heads, _hidden, head_dim = _fam_a_geometry(r)
    tie = r.bool("tie_word_embeddings", True)
    kv_heads = r.int("num_key_value_heads", default=heads)
    inter = r.int("intermediate_size")
    return _fam_a_shape(r, layers, heads, head_dim, kv_heads=kv_heads, intermediate=inter,
                        biased=r.bool("use_bias", True), tie=tie, rotary_dim=head_dim,
                        rope_rows=r.int("max_position_embeddings", default=4096))


def _opt(c: Context) -> Shape:
    """opt.py: learned positions max_position_embeddings + 2 rows (replicated), embed_tokens
    vocab × word_embed_proj_dim with ReplicatedLinear project_in/project_out (no bias) when that
    differs from hidden_size, final LayerNorm only with do_layer_norm_before (and not
    _remove_final_layer_norm), linears biased per enable_bias, MLP ffn_dim, tied head."""
    r = c.r
    layers, heads, hidden, head_dim = _fam_a_geometry(r)
    tie = r.bool("tie_word_embeddings", True)
    inter = r.int("ffn_dim")
    biased = r.bool("enable_bias", True)
    proj = r.int("word_embed_proj_dim", default=hidden)
    rows = r.int("max_position_embeddings", default=2048) + 2
    final_norm = r.bool("do_layer_norm_before", True) and not r.bool(
        "_remove_final_layer_norm", False)
    unsupported = []
    if not r.bool("layer_norm_elementwise_affine", True):
        unsupported.append("OPT LayerNorms without weights (layer_norm_elementwise_affine "
                           "false): counted with weight and bias")
    return _fam_a_shape(r, layers, heads, head_dim, kv_heads=heads, intermediate=inter,
                        biased=biased, tie=tie, unsupported=unsupported,
                        position_embedding_rows=rows,
                        word_embed_proj_dim=proj if proj != hidden else None,
                        final_norm=final_norm)


def _bloom(c: Context) -> Shape:
    """bloom.py: ALiBi (no RoPE), word_embeddings_layernorm, biased fused qkv/dense and
    4·hidden MLP, two LayerNorms, tied head."""
    r = c.r
    layers, heads, hidden, head_dim = _fam_a_geometry(r)
    tie = r.bool("tie_word_embeddings", True)
    return _fam_a_shape(r, layers, heads, head_dim, kv_heads=heads, intermediate=4 * hidden,
                        biased=True, tie=tie, embedding_norm=True, alibi=True)


def _mpt(c: Context) -> Shape:
    """mpt.py: ALiBi, d_model/n_heads/n_layers, KV heads attn_config.kv_n_heads, MLP
    expansion_ratio · d_model, no_bias (MptConfig default true) drops every linear and
    LayerNorm bias, tied head."""
    r = c.r
    ac = c.cfg.get("attn_config") or {}
    if not isinstance(ac, dict):
        raise InvalidConfigError(f"expected an object, got {short(ac)}", path=r.path,
                                 field="attn_config")
    layers, heads, hidden = r.int("n_layers"), r.int("n_heads"), r.int("d_model")
    kv = ac.get("kv_n_heads")
    kv_heads = (heads if kv is None
                else r.check_int("kv_n_heads", kv, where="attn_config.kv_n_heads"))
    ratio = r.int("expansion_ratio", default=4)
    biased = not r.bool("no_bias", True)
    unsupported = []
    if ac.get("alibi") is False or ac.get("qk_ln") or ac.get("prefix_lm"):
        unsupported.append("MPT without ALiBi, or with qk_ln / prefix_lm (vLLM's mpt.py "
                           "asserts ALiBi and no prefix_lm; q/k LayerNorms not counted)")
    return _fam_a_shape(r, layers, heads, hidden // heads, kv_heads=kv_heads,
                        intermediate=ratio * hidden, biased=biased, tie=True,
                        unsupported=unsupported, norm_bias=biased, alibi=True)


def _whisper(c: Context) -> Shape:
    """Whisper (whisper.py, main @ 00a23257), encoder-decoder (fam-c). The decoder:
    decoder_layers layers of d_model width, MHA over decoder_attention_heads (head_dim d_model
    / heads), q/k/v fused with biases (k's bias is built and zero-filled by
    _create_fake_bias_for_k_proj), biased out_proj, a cross-attention (q_proj, fused kv_proj,
    out_proj, all biased), a non-gated fc1/fc2 MLP of decoder_ffn_dim with biases, three
    LayerNorms with biases, learned positions (max_target_positions rows), a final LayerNorm;
    embed_tokens is a plain nn.Embedding (whole on every TP rank) and proj_out is tied to it.
    The encoder (AudioEncoderSpec) runs once per request; each decoder layer's
    cross-attention caches max_source_positions encoder frames (CrossAttentionSpec)."""
    r = c.r
    layers, heads = r.int("decoder_layers"), r.int("decoder_attention_heads")
    d_model = r.int("d_model")
    if d_model % heads:
        raise InvalidConfigError(f"d_model {d_model} is not a multiple of the {heads} heads",
                                 path=r.path, field="decoder_attention_heads")
    enc_heads = r.int("encoder_attention_heads")
    if d_model % enc_heads:
        raise InvalidConfigError(f"d_model {d_model} is not a multiple of the {enc_heads} heads",
                                 path=r.path, field="encoder_attention_heads")
    frames = r.int("max_source_positions")
    encoder = AudioEncoderSpec(
        hidden_size=d_model, intermediate_size=r.int("encoder_ffn_dim"),
        num_layers=r.int("encoder_layers"), num_heads=enc_heads,
        num_mel_bins=r.int("num_mel_bins"), max_source_positions=frames)
    inter = r.int("decoder_ffn_dim")
    rows = r.int("max_target_positions")
    return _fam_a_shape(r, layers, heads, d_model // heads, kv_heads=heads, intermediate=inter,
                        biased=True, tie=True, norms_per_layer=3, position_embedding_rows=rows,
                        audio_encoder=encoder, cross_attention_tokens=frames,
                        embedding_replicated=True)


# ------------------------------------------------------------------------------ the table

CONVERTERS: dict[str, Converter] = {
    # Llama-style decoders and their mixture-of-experts, hybrid and MLA relatives
    "llama": _llama, "mistral": _llama, "yi": _llama, "phi3": _phi3,
    "qwen2": _qwen2, "qwen2_moe": _qwen2, "qwen3": _qwen3, "qwen3_moe": _qwen3,
    "qwen3_next": _qwen3_next, "mixtral": _mixtral, "gemma2": _gemma2, "gemma3": _gemma3,
    "llama4": _llama4, "phi": _phi, "gpt_oss": _gpt_oss, "glm4_moe": _glm4_moe,
    "minimax_m2": _minimax_m2, "deepseek_v2": _mla, "deepseek_v3": _mla, "kimi_k2": _mla,
    "chatglm": _chatglm, "glm": _chatglm,
    "jamba": _jamba, "bamba": _bamba, "nemotron_h": _nemotron_h,
    # llama variants (fam-b)
    "gemma": _gemma, "cohere": _cohere, "cohere2": _cohere2, "olmo": _olmo, "olmo2": _olmo2,
    "granite": _variant, "granitemoe": _granitemoe, "granitemoeshared": _granitemoe,
    "internlm": _internlm, "internlm2": _internlm, "internlm3": _internlm,
    "baichuan": _baichuan, "exaone": _variant, "minicpm": _minicpm, "phimoe": _phimoe,
    "minicpm3": _minicpm3,
    # GPT-2-style and parallel-block decoders (fam-a)
    "gpt2": _gpt2, "gpt_bigcode": _gpt2, "gptj": _gptj, "gpt_neox": _gpt_neox,
    "falcon": _falcon, "starcoder2": _starcoder2, "opt": _opt, "bloom": _bloom, "mpt": _mpt,
    # encoder-decoder speech models (fam-c)
    "whisper": _whisper,
}
KNOWN_FAMILIES = frozenset(CONVERTERS)
FAM_A_FAMILIES = frozenset({"gpt2", "gpt_bigcode", "gptj", "gpt_neox", "falcon", "starcoder2",
                            "opt", "bloom", "mpt"})


# ------------------------------------------------------------- per-layer kinds, unmodelled

LAYER_TYPE_NAMES = {"full_attention": "full", "sliding_attention": "sliding",
                    "linear_attention": "linear", "chunked_attention": "chunked"}


def layer_types(shape: Shape, cfg: dict[str, Any], layers: int,
                path: str = "config.json") -> tuple[list[str], int | None, int | None]:
    """(per-layer kind, sliding window, chunk size). Kinds: full, sliding, chunked, linear
    (none: a block without attention). The config's `layer_types` (transformers ≥ 4.5x) when
    it lists every layer; else the family's pattern; otherwise a model-level `sliding_window`
    applies to every layer (vllm/attention/layer.py cache_config.sliding_window) unless
    `use_sliding_window` is false."""
    r = Reader(cfg, path)
    # Some configs write `"sliding_window": false` (or null) for "none"; those mean no window.
    window = None if isinstance(cfg.get("sliding_window"), bool) else r.opt_int("sliding_window")
    chunk = r.opt_int("attention_chunk_size")
    kinds = _listed_layer_types(cfg, layers, path)
    if kinds is None and shape.layer_pattern is not None:
        kinds = shape.layer_pattern(r, layers, chunk)
    if kinds is None:
        sliding = window and cfg.get("use_sliding_window", True) is not False
        kinds = ["sliding"] * layers if sliding else []
    if "sliding" in kinds and not window:
        kinds = ["full" if k == "sliding" else k for k in kinds]
    if kinds and all(k == "full" for k in kinds):
        kinds = []
    return kinds, (window if "sliding" in kinds else None), (chunk if "chunked" in kinds else None)


def _listed_layer_types(cfg: dict[str, Any], layers: int, path: str) -> list[str] | None:
    """The config's own `layer_types` in kvplan's kinds, when it lists every layer."""
    explicit = cfg.get("layer_types")
    if explicit is not None and not (isinstance(explicit, list)
                                     and all(isinstance(t, str) for t in explicit)):
        raise InvalidConfigError(f"expected a list of layer type names, got {short(explicit)}",
                                 path=path, field="layer_types")
    if isinstance(explicit, list) and len(explicit) == layers:
        return [LAYER_TYPE_NAMES.get(str(t), "full") for t in explicit]
    return None


def detect_unsupported(raw: dict[str, Any], cfg: dict[str, Any], family: str) -> list[str]:
    """Layout features whose KV or weights kvplan does not model (never guess silently)."""
    found = []
    vc = raw.get("vision_config")
    if "audio_config" in raw or (vc is not None
                                 and raw.get("model_type") not in VISION_MODEL_TYPES):
        found.append("multimodal encoder (its weights are not counted)")
    elif (raw.get("model_type") in {"llava", "llava_next", "mistral3"} and isinstance(vc, dict)
          and vc.get("model_type", "clip_vision_model") not in {"clip_vision_model", "pixtral"}):
        found.append(f"vision tower {vc.get('model_type')!r} (its weights are not counted)")
    if cfg.get("kv_lora_rank") and family not in MLA_FAMILIES and family != "minicpm3":
        found.append("MLA attention in an unrecognised family")
    if any(k in cfg for k in MAMBA_KEYS) and family not in MAMBA_FAMILIES:
        found.append("hybrid Mamba layers of an unrecognised family (Jamba, Bamba, Nemotron-H and "
                     "Qwen3-Next are modelled; Falcon-H1 and MiniMax are not)")
    if family == "nemotron_h" and "E" in str(cfg.get("hybrid_override_pattern") or ""):
        found.append("Nemotron-H MoE ('E') blocks (their experts are not counted)")
    if family in {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"} and cfg.get("use_sliding_window"):
        found.append("Qwen sliding window on layers above max_window_layers")
    if cfg.get("num_kv_shared_layers") or cfg.get("kv_sharing"):
        found.append("KV-sharing layers")
    return found
