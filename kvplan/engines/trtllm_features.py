"""TensorRT-LLM's speculative decoding, LoRA (PEFT) cache and host KV cache, PyTorch runtime, as
pure functions (docs/features.md, "TensorRT-LLM"). engines/trtllm.py folds them into its plan.

Sources (NVIDIA/TensorRT-LLM, read in the public code index; snapshots of the 1.0/1.1 line with
`create_py_executor(llm_args, …)`, `max_total_draft_tokens`, and the 2026 main):

* `_torch/pyexecutor/py_executor_creator.py` `create_py_executor`: the draft engine of a
  two-model mode (`spec_dec_mode.has_draft_model()`: EAGLE-3 two-model, DraftTarget) is built
  and loaded before the KV estimate, so its weights are in the profiled peak; the KV manager's
  max_seq_len grows by `get_num_extra_kv_tokens + max_draft_len` (+ 1 + max_draft_len with
  the overlap scheduler); the PEFT cache (`create_py_executor_instance`) is built before
  `configure_kv_cache_capacity`, so its device pages are in the peak too.
* `_torch/pyexecutor/_util.py` `KvCacheCreator._get_kv_size_per_token`: the estimate's bytes
  per token = target + the draft model's (two-model; PR #3497); `get_cache_size_per_token`
  counts the target config's attention layers only.
* `_torch/pyexecutor/resource_manager.py` `get_pp_layers` / `KVCacheManager`: a one-model
  mode appends `get_num_spec_layers` layers to the target's manager on the last PP rank, each
  with the target's KV heads and head_dim (`num_kv_heads` is one int for every layer);
  `prepare_resources` adds `num_extra_kv_tokens` + the draft tokens to every sequence;
  `calculate_max_num_blocks`: `min(max_tokens, fraction × free / bytes_per_token)`, and
  secondary (host) blocks = int(host_cache_size / bytes_per_token / tokens_per_block).
* `_torch/speculative/utils.py`: `get_num_spec_layers` = num_nextn_predict_layers (MTP
  one-model), num_eagle_layers or 1 (EAGLE-3 one-model), else 0; `get_num_extra_kv_tokens` =
  max_draft_len − 1 for EAGLE-3 one-model, else 0.
* `_torch/models/modeling_deepseekv3.py` `DeepseekV3MTPHead`: a norm only; the LM head is the
  target's (passed in), so the MTP layer brings no LM head of its own.
* `cpp/tensorrt_llm/batch_manager/peftCacheManager.cpp` `getMaxNumSlots`,
  `getPageManagerConfig`; `cpp/tensorrt_llm/runtime/loraModule.cpp` `createLoraModules`;
  `cpp/include/tensorrt_llm/runtime/loraModule.h` `localInDim`/`localOutDim`;
  `cpp/include/tensorrt_llm/batch_manager/peftCacheManagerConfig.h` (optimalAdapterSize 8,
  maxAdapterSize 64); `_torch/pyexecutor/_util.py` `create_py_executor_instance`
  (num_device_module_layer = max_lora_rank × num_hidden_layers × |modules| × max_loras, host
  the same with max_cpu_loras); `lora_manager.py` `get_missing_qkv_modules_from_lora_modules`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidInputError
from ..specs import ModelSpec, SpeculativeConfig
from ..units import DTYPE_BYTES, cdiv

# ----------------------------------------------------------------------------- speculative

# TensorRT-LLM YAML decoding_type → kvplan's generic method (llmapi/llm_args.py: Eagle / Eagle3
# → EagleDecodingConfig, whose PyTorch modes are EAGLE-3 one- or two-model; MTP →
# MTPDecodingConfig; DraftTarget → DraftTargetDecodingConfig; NGram → NGramDecodingConfig).
DECODING_TYPES = {"eagle": "eagle3", "eagle3": "eagle3", "mtp": "mtp", "drafttarget": "draft_model",
                  "ngram": "ngram"}
# kvplan method → the YAML decoding_type a launch file uses
DECODING_TYPE_NAMES = {"eagle3": "Eagle", "mtp": "MTP", "draft_model": "DraftTarget",
                       "ngram": "NGram"}
MTP_DEFAULT_LAYERS = 1  # MTPDecodingConfig.num_nextn_predict_layers default (llm_args.py)


@dataclass(frozen=True)
class TrtSpec:
    """Speculative decoding as the PyTorch runtime allocates it, on one GPU."""

    method: str
    one_model: bool  # draft layers in the target's KV manager (MTP, EAGLE-3 one-model)
    max_draft_len: int
    spec_layers: int  # layers appended to the target's manager (last PP stage)
    draft_layers: int  # decoder layers the draft runs
    extra_kv_tokens: int  # get_num_extra_kv_tokens, per sequence


def resolve_speculative(m: ModelSpec, sc: SpeculativeConfig | None) -> SpeculativeConfig | None:
    """The generic knob checked as TensorRT-LLM's decoding configs take it: EAGLE-3 and
    DraftTarget need a draft (speculative_model_dir) and max_draft_len; MTP needs the target's
    MTP layers (max_draft_len := num_nextn_predict_layers, default 1, speculative/utils.py
    update_spec_config_from_model_config); NGram needs max_draft_len."""
    if sc is None:
        return None
    k = sc.num_speculative_tokens
    if sc.method == "draft_model" and sc.model == m.id and m.mtp_layers:
        sc = sc.model_copy(update={"method": "mtp", "draft": None})
    if sc.method == "eagle":
        raise InvalidInputError("TensorRT-LLM's PyTorch backend runs EAGLE-3 heads only "
                                "(EagleDecodingConfig → EAGLE3 one- or two-model)",
                                hint="use method eagle3 with an EAGLE-3 head",
                                code="speculative-invalid", knob="speculative_config")
    if sc.method == "mtp":
        if not m.mtp_layers:
            raise InvalidInputError(f"{m.id} has no multi-token-prediction layers "
                                    "(num_nextn_predict_layers) for decoding_type MTP",
                                    hint="use Eagle (EAGLE-3), DraftTarget or NGram",
                                    code="speculative-invalid", knob="speculative_config")
        k = k or MTP_DEFAULT_LAYERS
    else:
        if sc.method != "ngram" and sc.model is None:
            raise InvalidInputError(f"speculative decoding {sc.method} needs the draft model "
                                    "(speculative_model_dir)", code="speculative-invalid",
                                    knob="speculative_config")
        if sc.method != "ngram" and sc.draft is None:
            raise InvalidInputError(f"the draft model {sc.model!r} was not loaded",
                                    hint="plan through kvplan.api.plan or the CLI, which resolve "
                                    "it by name, or set SpeculativeConfig.draft",
                                    code="speculative-invalid", knob="speculative_config")
        if k is None:
            raise InvalidInputError("speculative decoding needs max_draft_len "
                                    "(num_speculative_tokens)", hint="e.g. max_draft_len: 3",
                                    code="speculative-invalid", knob="speculative_config")
    return sc.model_copy(update={"num_speculative_tokens": k})


def spec_shape(sc: SpeculativeConfig) -> TrtSpec:
    """One-model or two-model, the layers the target's manager gains and the extra tokens per
    sequence (speculative/utils.py get_num_spec_layers, get_num_extra_kv_tokens;
    EagleDecodingConfig.eagle3_one_model default True)."""
    k = sc.num_speculative_tokens or 0
    if sc.method == "mtp":
        return TrtSpec("mtp", True, k, k, k, 0)
    if sc.method == "eagle3":
        one = sc.eagle3_one_model is not False
        layers = sc.draft.num_layers if sc.draft is not None else 1
        # one-model: num_eagle_layers is None in the PyTorch flow → 1 layer in the manager
        return TrtSpec("eagle3", one, k, 1 if one else 0, layers, k - 1 if one else 0)
    if sc.method == "draft_model":
        return TrtSpec("draft_model", False, k, 0, sc.draft.num_layers if sc.draft else 0, 0)
    return TrtSpec("ngram", False, k, 0, 0, 0)


def request_kv_tokens(seq_len: int, spec: TrtSpec | None) -> int:
    """KV tokens one request of `seq_len` tokens holds at its peak: its tokens + the extra KV
    tokens + the max_draft_len draft tokens written before verification (resource_manager.py
    prepare_resources; py_executor_creator.py adds the same to the manager's max_seq_len). The
    overlap scheduler's one-step look-ahead (+1 + max_draft_len) is not counted, as for plans
    without speculation."""
    if spec is None:
        return seq_len
    return seq_len + spec.extra_kv_tokens + spec.max_draft_len


# ----------------------------------------------------------------------------- LoRA (PEFT cache)

# PeftCacheManagerConfig defaults (peftCacheManagerConfig.h): optimalAdapterSize 8,
# maxAdapterSize 64; PeftCacheManager clamps both to the model's max LoRA rank.
OPTIMAL_ADAPTER_SIZE = 8
MAX_ADAPTER_SIZE = 64
# LoRA defaults of the LLM API: LoraConfig.max_lora_rank 64 (lora_manager.py), max_loras 4 and
# max_cpu_loras 4 (llmapi/llm_args.py BaseLlmArgs).
DEFAULT_MAX_LORA_RANK = 64
DEFAULT_MAX_LORAS = 4
DEFAULT_MAX_CPU_LORAS = 4
# Modules kvplan sizes (loraModule.cpp createLoraModules, dense layers): name → (in, out, split)
# where split "col" divides the output by TP (outTpSplitDim 0) and "row" the input (inTpSplitDim 1).
DENSE_MODULES = ("attn_qkv", "attn_q", "attn_k", "attn_v", "attn_dense", "mlp_h_to_4h", "mlp_gate",
                 "mlp_4h_to_h", "mlp_gate_up")


def lora_modules(target: tuple[str, ...] | list[str]) -> list[str]:
    """lora_target_modules + missing_qkv_modules: when any of attn_q/k/v is targeted the other
    two are added (lora_manager.py get_missing_qkv_modules_from_lora_modules)."""
    out = list(target)
    if any(x in out for x in ("attn_q", "attn_k", "attn_v")):
        out += [x for x in ("attn_q", "attn_k", "attn_v") if x not in target]
    return out


def _module_dims(m: ModelSpec, name: str, tp: int) -> tuple[int, int, int, int]:
    """(in, out, local in, local out) of one LoRA module (loraModule.cpp createLoraModules;
    loraModule.h localInDim / localOutDim). attn_dense is hidden → hidden, as the C++ sizes it."""
    h, mlp = m.hidden_size, m.intermediate_size
    q = m.num_attention_heads * m.head_dim
    kv = max(1, m.num_kv_heads // tp) * tp * m.head_dim
    dims = {"attn_qkv": (h, q + 2 * kv, "col"), "attn_q": (h, q, "col"), "attn_k": (h, kv, "col"),
            "attn_v": (h, kv, "col"), "attn_dense": (h, h, "row"), "mlp_h_to_4h": (h, mlp, "col"),
            "mlp_gate": (h, mlp, "col"), "mlp_4h_to_h": (mlp, h, "row"),
            "mlp_gate_up": (h, 2 * mlp, "col")}
    if name not in dims:
        raise InvalidInputError(f"LoRA module {name!r} is not one kvplan sizes for TensorRT-LLM",
                                hint="use " + ", ".join(DENSE_MODULES), code="lora-invalid",
                                knob="lora_target_modules")
    i, o, split = dims[name]
    return i, o, (i // tp if split == "row" else i), (o // tp if split == "col" else o)


@dataclass(frozen=True)
class PeftCache:
    """The PEFT (LoRA) cache of one GPU: device pages, host pages, one adapter's size."""

    device_bytes: int
    host_bytes: int
    adapter_bytes: int  # one adapter at max_lora_rank, unsharded
    page_width: int  # elements
    slots_per_page: int
    device_pages: int
    host_pages: int
    modules: tuple[str, ...]


def peft_cache(m: ModelSpec, *, tp: int, local_layers: int, dtype: str, max_lora_rank: int,
               max_loras: int, max_cpu_loras: int,
               target_modules: tuple[str, ...] | list[str]) -> PeftCache:
    """Device and host LoRA caches (peftCacheManager.cpp):

        d_m        = local in + local out of module m;  P = min d_m (page width);  D = max d_m
        module-layers = max_lora_rank × num_hidden_layers × |modules| × max_loras
                        (host: max_cpu_loras)
        slots      = module-layers × ceil(D / P)
        per page   = max(Σ_m min(8, r) × ceil(d_m / P) × local layers, ceil(min(64, r) × D / P))
        pages      = ceil(slots / per page);   bytes = pages × per page × P × dtype bytes"""
    mods = lora_modules(target_modules)
    if not mods:
        raise InvalidInputError("lora_target_modules is empty", code="lora-invalid",
                                knob="lora_target_modules")
    dims = [_module_dims(m, name, tp) for name in mods]
    local = [li + lo for _, _, li, lo in dims]
    width, widest = min(local), max(local)
    opt, max_a = min(OPTIMAL_ADAPTER_SIZE, max_lora_rank), min(MAX_ADAPTER_SIZE, max_lora_rank)
    per_page = max(sum(opt * cdiv(d, width) for d in local) * local_layers,
                   cdiv(max_a * widest, width))
    module_layers = max_lora_rank * m.num_layers * len(mods)
    dt = DTYPE_BYTES[dtype]

    def pages(adapters: int) -> int:
        return cdiv(module_layers * adapters * cdiv(widest, width), per_page)

    dev, host = pages(max_loras), pages(max_cpu_loras)
    adapter = sum(max_lora_rank * (i + o) for i, o, _, _ in dims) * m.num_layers * dt
    return PeftCache(dev * per_page * width * dt, host * per_page * width * dt, adapter, width,
                     per_page, dev, host, tuple(mods))


# ----------------------------------------------------------------------------- host KV cache


def secondary_blocks(host_cache_size: int, bytes_per_token: int, tokens_per_block: int) -> int:
    """Blocks of the host (secondary) pool: int(host_cache_size / bytes_per_token /
    tokens_per_block) (resource_manager.py calculate_max_num_blocks)."""
    if host_cache_size <= 0 or bytes_per_token <= 0:
        return 0
    return int(host_cache_size / bytes_per_token / tokens_per_block)
