"""Knobs: the one list of engine settings kvplan takes, their types and ranges, and the
engine-independent resolution (parallel layout, dtypes, device total, weight format).

Names are vLLM's flags with underscores (the CLI contract: `--max-model-len` → max_model_len).
A knob is declared once, as an OPTIONS entry (knob="engine"): it makes the `Knobs` field (type,
parser, bounds), the CLI option, the range error and the docs row. Which engines read it, and
under which flag, each engine declares in its flag table (`DeploySyntax.cli_flags`, or
`Engine.settings` when it is not a flag); every other engine refuses it (engines/base.py
`unsupported_knobs`). Validation here is the same for every engine, so no engine can plan (or
print in a launch line) a value the range refuses.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
)

from .engines import DEFAULT_ENGINE
from .errors import InvalidInputError
from .specs import GpuSpec, ModelSpec, Problem, QuantSpec, Source, SpeculativeConfig, per_object
from .units import DTYPE_ALIASES, GiB, fast_init

if TYPE_CHECKING:
    from typing_extensions import Self

MAX_PARALLEL = 1024  # no deployment kvplan can plan spans more GPUs in one dimension
MAX_DEVICE_GIB = 4096.0  # 4 TiB per device: above any GPU made; bounds integer bytes in JSON
MAX_TOKENS = 1 << 31  # lengths and token budgets: engines keep them in int32
MAX_LORAS = 1024  # adapter slots per batch: far above any deployment (each slot is preallocated)
MAX_CPU_LORAS = 1 << 20
MAX_OFFLOAD_GIB = 1 << 20  # 1 PiB of host memory: bounds integer bytes in JSON
MAX_KV_BYTES = int(MAX_DEVICE_GIB * GiB)
MAX_HOST_CACHE_BYTES = MAX_OFFLOAD_GIB * (1 << 30)


@dataclass(frozen=True)
class Option:
    """One setting as the command line takes it: the Python type, flag(s), help, unit and, where
    it has them, bounds (`gt`/`ge` below, `le` above). The bounds of a knob are its Knobs
    field's; the CLI's range errors, `kvplan check`'s and docs/knobs.md read them from here."""

    name: str
    type: type
    decls: tuple[str, ...]
    help: str | None = None
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    unit: str = ""
    human: bool = False  # vLLM's human-readable integers: 32k = 32000, 32K = 32768
    default: Any = None
    required: bool = False
    doc: str | None = None  # docs/knobs.md's line where --help shows none
    path: bool = False  # a file the CLI opens (given to the command as a pathlib.Path)
    # A field of Knobs: "engine" — an engine setting, read by the engines whose flag table
    # (engines/*.py) names it and refused by the others; "kvplan" — read by kvplan itself for
    # every engine (the device total). "" — not a knob (workload, kvplan's own options).
    knob: Literal["", "engine", "kvplan"] = ""
    model: Any = None  # the Knobs field's type when it is not `type` (Literal, list, JSON types)
    parse: Callable[[Any], Any] | None = None  # the Knobs field's parser of the flag's text
    own_message: bool = False  # the parser's ValueError says all the range error needs
    extra: tuple[tuple[str, Any], ...] = ()  # further pydantic Field arguments (list lengths)
    hint: str | None = None  # the range error's hint
    # a bool engine knob: False is what an engine without the knob does anyway, so such an
    # engine takes False silently (--no-enforce-eager); when False changes behaviour
    # (--no-enable-prefix-caching), an engine without the knob refuses it like any other value
    false_is_default: bool = True

    def bounds(self) -> tuple[float | None, bool, float | None] | None:
        """(lower bound, lower bound open?, upper bound); None when it has no numeric bound."""
        lo = self.gt if self.gt is not None else self.ge
        if lo is None and self.le is None:
            return None
        return lo, self.gt is not None, self.le

    def span(self) -> str | None:
        """The range in interval notation: '(0, 1]', '[1, 1024]'."""
        b = self.bounds()
        if b is None:
            return None
        lo, lo_open, hi = b
        left = "(-inf" if lo is None else f"{'(' if lo_open else '['}{lo}"
        return f"{left}, {'inf)' if hi is None else f'{hi}]'}"


MAX_FLAG_JSON_DEPTH = 32  # a structured flag's JSON nesting (real ones: 1-3 levels)


def loads_flag_json(text: str, example: str) -> Any:
    """The JSON text of a structured flag (--speculative-config, --limit-mm-per-prompt), from
    the CLI or a deployment file: nesting bounded before json.loads recurses, and every failure
    a ValueError (pydantic names the flag) showing the expected form, never the input."""
    depth = deepest = 0
    in_str = esc = False
    for ch in text:  # one linear pass over the brackets outside strings
        if in_str:
            esc, in_str = (False, True) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    if deepest > MAX_FLAG_JSON_DEPTH:
        raise ValueError(f"{example}; this JSON nests {deepest} levels deep (at most "
                         f"{MAX_FLAG_JSON_DEPTH})")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError(example) from None


MM_LIMIT_EXAMPLE = "JSON like '{\"image\": 4, \"video\": 0}' (or the legacy image=4,video=0)"
MAX_MM_ITEMS = 1 << 20
_MODALITY = re.compile(r"[a-z][a-z0-9_]{0,31}")


def _mm_count(modality: str, value: Any) -> int:
    if isinstance(value, dict):  # main's configurable form: {"count": 4, "width": …, "height": …}
        value = value.get("count", 999)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MM_ITEMS:
        raise ValueError(f"{MM_LIMIT_EXAMPLE}; the count for {modality!r} is not an integer in "
                         f"[0, {MAX_MM_ITEMS}]")
    return value


def parse_mm_limits(v: Any) -> Any:
    """--limit-mm-per-prompt in any form vLLM has taken → {modality: count} (None stays None)."""
    if v is None:
        return None
    if isinstance(v, str):
        text = v.strip()
        if text.startswith("{"):
            v = loads_flag_json(text, MM_LIMIT_EXAMPLE)
        else:  # legacy key=value list (vllm/engine/arg_utils.py nullable_kvs, ≤ 0.9)
            pairs = [p.strip() for p in text.split(",") if p.strip()]
            if not pairs or any(p.count("=") != 1 for p in pairs):
                raise ValueError(MM_LIMIT_EXAMPLE)
            v = dict(p.split("=") for p in pairs)
    if not isinstance(v, dict):
        raise ValueError(MM_LIMIT_EXAMPLE)
    out: dict[str, int] = {}
    for key, value in v.items():
        name = str(key).strip()
        if not _MODALITY.fullmatch(name):
            raise ValueError(f"{MM_LIMIT_EXAMPLE}; {name!r} is not a modality name (image, "
                             "video, audio)")
        out[name] = _mm_count(name, value)
    return out


def _json_object(v: Any) -> Any:
    """--speculative-config's text is JSON (as `vllm serve --speculative-config '{…}'` takes it)."""
    if isinstance(v, str):
        v = loads_flag_json(v, "JSON, e.g. '{\"method\": \"eagle3\", \"model\": \"…\", "
                               "\"num_speculative_tokens\": 3}'")
        if not isinstance(v, dict):
            raise ValueError("a JSON object")  # noqa: TRY004 - pydantic reports ValueErrors
    return v


def _words(v: Any) -> Any:
    """A list, or one string of names separated by spaces or commas (SGLang takes several
    values after the flag: `--lora-target-modules q_proj v_proj`)."""
    if isinstance(v, str):
        v = [w for w in re.split(r"[\s,]+", v) if w]
    return v


_O = Option
# Every option `kvplan plan` takes, in its --help order: the engine knobs (Knobs' fields), the
# workload (specs.Workload's fields) and kvplan's own. Other commands take a subset (cli.py).
OPTIONS: dict[str, Option] = {o.name: o for o in (
    _O("gpu", str, ("--gpu",), "GPU id, alias or nvidia-smi name, e.g. h100-sxm-80gb or "
       "'NVIDIA H100 80GB HBM3'.", required=True),
    _O("tensor_parallel_size", int, ("--tensor-parallel-size", "-tp"), ge=1, le=MAX_PARALLEL,
       unit="GPUs", doc="GPUs each layer is split over (default: 1, or the plan recommends one)",
       knob="engine"),
    _O("pipeline_parallel_size", int, ("--pipeline-parallel-size", "-pp"), ge=1,
       le=MAX_PARALLEL, unit="GPUs", doc="pipeline stages, each a slice of the layers (1)",
       knob="engine"),
    _O("data_parallel_size", int, ("--data-parallel-size", "-dp"), ge=1, le=MAX_PARALLEL,
       unit="replicas", doc="engine replicas; with --enable-expert-parallel they share experts",
       knob="engine"),
    _O("max_model_len", int, ("--max-model-len",), "tokens; 32k = 32000, 32K = 32768 (as vLLM "
       "reads it)", ge=1, le=MAX_TOKENS, unit="tokens", human=True, knob="engine"),
    _O("max_num_seqs", int, ("--max-num-seqs",), ge=1, le=MAX_TOKENS, unit="sequences",
       doc="requests the engine runs at once (the engine's default by version and GPU)",
       knob="engine"),
    _O("max_num_batched_tokens", int, ("--max-num-batched-tokens",), ge=1, le=MAX_TOKENS,
       unit="tokens", human=True, doc="tokens per scheduler step (the prefill chunk)",
       knob="engine"),
    _O("max_input_tokens", int, ("--max-input-tokens",), "TGI only: longest prompt (default: "
       "--max-model-len − 1)", ge=1, le=MAX_TOKENS, unit="tokens", knob="engine"),
    _O("gpu_memory_utilization", float, ("--gpu-memory-utilization",), "fraction of the device "
       "total, (0, 1]", gt=0, le=1, unit="fraction",
       hint="it is a fraction of the device, e.g. 0.9", knob="engine"),
    _O("dtype", str, ("--dtype",), "auto, bfloat16, float16, float32", knob="engine"),
    _O("kv_cache_dtype", str, ("--kv-cache-dtype",), "auto, fp8, fp8_e4m3, fp8_e5m2, or the "
       "model's own dtype (bfloat16, float16: the same as auto unless the checkpoint declares "
       "an FP8 KV cache)", knob="engine"),
    _O("quantization", str, ("--quantization", "-q"), "online quantization: fp8 "
       "(TensorRT-LLM: fp8 or nvfp4, a ModelOpt checkpoint quantized first); on an unquantized "
       "model nvfp4, mxfp4, w8a8 or awq plans the checkpoint a standard quantizer would write "
       "(a what-if, docs/what-if.md)", knob="engine"),
    _O("block_size", int, ("--block-size",), "tokens per KV block", ge=1, le=4096,
       unit="tokens", knob="engine"),
    _O("enforce_eager", bool, ("--enforce-eager",), "no CUDA graphs", knob="engine"),
    _O("enable_prefix_caching", bool, ("--enable-prefix-caching/--no-enable-prefix-caching",),
       "on by default in every engine but vLLM V0 (before 0.8); off keeps Mamba/GDN states at "
       "one page per request (vLLM), SGLang's --disable-radix-cache", knob="engine",
       false_is_default=False),
    _O("disable_hybrid_kv_cache_manager", bool, ("--disable-hybrid-kv-cache-manager",),
       "allocate sliding/chunked layers as full attention", knob="engine"),
    _O("enable_expert_parallel", bool, ("--enable-expert-parallel",),
       "MoE experts split over TP × DP ranks", knob="engine"),
    _O("usage_context", str, ("--usage-context",), "serve (vllm serve, default) or llm (offline "
       "LLM class): batch defaults",
       hint="use serve (vllm serve, the default) or llm (the offline LLM class)",
       knob="engine", model=Literal["serve", "llm"]),
    _O("kv_cache_memory_bytes", int, ("--kv-cache-memory-bytes",), "fixed KV budget per GPU, "
       "bytes (ignores utilization)", ge=1, le=MAX_KV_BYTES, unit="bytes", human=True,
       knob="engine"),
    _O("gpu_memory_gib", float, ("--gpu-memory-gib",), "override the device total (GiB), e.g. "
       "the total_gpu_memory your vLLM log prints", ge=0.001, le=MAX_DEVICE_GIB, unit="GiB",
       hint="the device total in GiB, as your engine log prints it (e.g. 79.18)", knob="kvplan"),
    _O("max_total_tokens", int, ("--max-total-tokens",), "SGLang / TensorRT-LLM: cap on KV pool "
       "tokens", ge=1, le=MAX_TOKENS, unit="tokens",
       doc="SGLang --max-total-tokens, TensorRT-LLM kv_cache_config.max_tokens", knob="engine"),
    _O("backend", str, ("--backend",), "TensorRT-LLM: pytorch (HF checkpoint; default from 1.0) "
       "or tensorrt (a built engine)",
       doc="TensorRT-LLM's runtime: --backend of trtllm-serve",
       hint="use pytorch or tensorrt (TensorRT-LLM's --backend)",
       knob="engine", model=Literal["pytorch", "tensorrt"]),
    _O("speculative_config", str, ("--speculative-config",), "vLLM, SGLang: speculative "
       "decoding JSON, e.g. '{\"method\": \"eagle3\", \"model\": \"ORG/HEAD\", "
       "\"num_speculative_tokens\": 3}'; SGLang also takes eagle_topk and num_draft_tokens "
       "(docs/features.md)", unit="JSON",
       doc="vLLM --speculative-config: method, model, num_speculative_tokens; SGLang: "
       "--speculative-algorithm and its flags",
       knob="engine", model=SpeculativeConfig, parse=_json_object, own_message=True),
    _O("enable_lora", bool, ("--enable-lora",), "vLLM: preallocate LoRA adapter slots",
       knob="engine"),
    _O("max_loras", int, ("--max-loras",), "vLLM: adapters per batch (1)", ge=1, le=MAX_LORAS,
       unit="adapters", knob="engine"),
    _O("max_lora_rank", int, ("--max-lora-rank",), "vLLM: (16)", ge=1, le=512,
       doc="vLLM takes only 1, 8, 16, 32, 64, 128, 256, 320, 512 (vllm/config/lora.py)",
       knob="engine"),
    _O("max_cpu_loras", int, ("--max-cpu-loras",), "vLLM: adapters cached in host memory "
       "(max_loras)", ge=1, le=MAX_CPU_LORAS, unit="adapters", knob="engine"),
    _O("lora_target_modules", str, ("--lora-target-modules",), "SGLang: LoRA modules, "
       "comma-separated (q_proj,v_proj or all; --max-loras is its --max-loras-per-batch, "
       "--max-cpu-loras its --max-loaded-loras); TensorRT-LLM: attn_q,attn_k,attn_v,"
       "attn_dense, …",
       doc="SGLang --lora-target-modules (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
       "down_proj, qkv_proj, gate_up_proj, embed_tokens, lm_head, or all); TensorRT-LLM "
       "lora_config.lora_target_modules (attn_q, attn_k, attn_v, attn_dense, mlp_h_to_4h, "
       "mlp_gate, mlp_4h_to_h, …)", knob="engine", model=list[str], parse=_words,
       extra=(("min_length", 1), ("max_length", 64))),
    _O("lora_paths", str, ("--lora-paths",), "SGLang: adapters loaded at start, comma-separated "
       "NAME=PATH (counted, not read; turns LoRA on)",
       doc="SGLang --lora-paths: NAME=PATH or PATH; kvplan counts them, it does not read "
       "them", knob="engine", model=list[str], parse=_words, extra=(("max_length", MAX_LORAS),)),
    _O("kv_offloading_size", float, ("--kv-offloading-size",), "vLLM: GiB of host memory for "
       "offloaded KV blocks", gt=0, le=MAX_OFFLOAD_GIB, unit="GiB",
       doc="GiB of host memory for offloaded KV", knob="engine"),
    _O("kv_offloading_backend", str, ("--kv-offloading-backend",), "vLLM: native (default) or "
       "lmcache", knob="engine", model=Literal["native", "lmcache"]),
    _O("enable_hierarchical_cache", bool, ("--enable-hierarchical-cache",), "SGLang: "
       "host-memory KV tier (HiCache)", knob="engine"),
    _O("hicache_ratio", float, ("--hicache-ratio",), "SGLang: host pool tokens per device pool "
       "token (2.0)", gt=0, le=1000, unit="ratio",
       doc="host pool tokens per device pool token (SGLang default 2.0)", knob="engine"),
    _O("hicache_size", int, ("--hicache-size",), "SGLang: GB of host KV per GPU (0: use "
       "--hicache-ratio)", ge=0, le=MAX_OFFLOAD_GIB, unit="GB",
       doc="GB (10^9 B) of host KV per GPU; 0 = use --hicache-ratio", knob="engine"),
    _O("cuda_graph_max_bs", int, ("--cuda-graph-max-bs",), "SGLang: largest decode batch "
       "captured in a CUDA graph (default by GPU memory and TP)", ge=1, le=MAX_TOKENS,
       unit="sequences", knob="engine"),
    _O("acceptance_rate", float, ("--acceptance-rate",), "speculative decoding: probability "
       "each draft token is accepted, [0, 1] (your engine's logged 'Draft acceptance rate'): "
       "TPOT and tokens/s", ge=0, le=1, unit="fraction"),
    _O("host_cache_size", int, ("--host-cache-size",), "TensorRT-LLM: "
       "kv_cache_config.host_cache_size, bytes of host KV blocks per GPU", ge=0,
       le=MAX_HOST_CACHE_BYTES, unit="bytes",
       doc="TensorRT-LLM: bytes of host memory per GPU for secondary KV blocks "
       "(llmapi/llm_args.py KvCacheConfig.host_cache_size)", knob="engine"),
    _O("prefix_hit_rate", float, ("--prefix-hit-rate",), "fraction (0, 1] of each prompt found "
       "in the prefix cache (with --avg-input-tokens): concurrency and TTFT with prefix caching",
       gt=0, le=1, unit="fraction"),
    _O("shared_prefix_tokens", int, ("--shared-prefix-tokens",), "tokens every request shares "
       "(system prompt): concurrency with prefix caching", gt=0, le=1 << 24, unit="tokens"),
    _O("limit_mm_per_prompt", str, ("--limit-mm-per-prompt",), "vLLM: items per prompt by "
       "modality, JSON '{\"image\": 4, \"video\": 0}' or the legacy image=4,video=0; image 0 "
       "skips the encoder profile (docs/features.md)", unit="JSON",
       doc="vLLM --limit-mm-per-prompt",
       knob="engine", model=dict[str, int], parse=parse_mm_limits, own_message=True),
    _O("images_per_request", int, ("--images-per-request",), "images each request carries (a "
       "VLM): their tokens are added to each request's KV length", ge=0, le=1 << 10,
       unit="images"),
    _O("extra_llm_api_options", str, ("--extra-llm-api-options",), "TensorRT-LLM: the YAML "
       "given to trtllm-serve (kv_cache_config, max_batch_size, …); its values win over flags, "
       "as in trtllm-serve", unit="file", path=True),
    # {engines}: the registry's engine names, filled in where the help is shown
    _O("engine", str, ("--engine",), "{engines} (generic flags map to the engine's own knobs; "
       "see docs/engines.md)", default=DEFAULT_ENGINE),
    _O("engine_version", str, ("--engine-version",), "engine release to model (default: newest "
       "modelled)"),
    _O("target_concurrency", int, ("--target-concurrency",), "requests that must fit in the KV "
       "cache at once", gt=0, le=1 << 20, unit="requests"),
    _O("avg_input_tokens", int, ("--avg-input-tokens",), gt=0, le=1 << 24, unit="tokens",
       doc="prompt length of a typical request: concurrency, TTFT, throughput"),
    _O("avg_output_tokens", int, ("--avg-output-tokens",), gt=0, le=1 << 24, unit="tokens",
       doc="generated tokens of a typical request: concurrency, TPOT, throughput"),
    _O("slo_ttft_ms", float, ("--slo-ttft-ms",), "latency target: time to first token, ms", gt=0,
       le=3_600_000, unit="ms"),
    _O("slo_tpot_ms", float, ("--slo-tpot-ms",), "latency target: time per output token, ms",
       gt=0, le=60_000, unit="ms"),
    # every price, wherever it comes from (this flag, --prices files, sweep(prices=…)): a cent
    # (the smallest amount the tables show) to US$ 10,000 per GPU-hour (no GPU rents for more;
    # × 1,024 GPUs × 8,760 hours stays finite)
    _O("gpu_hour_price", float, ("--gpu-hour-price",), "USD per GPU-hour for cost figures "
       "(default: the catalogue's)", ge=0.01, le=10_000, unit="USD/GPU-hour"),
    _O("minimize_utilization", bool, ("--minimize-utilization",), "recommend the smallest "
       "--gpu-memory-utilization that holds --target-concurrency (default: keep the engine's "
       "default when it is enough)", default=False),
    _O("revision", str, ("--revision",), "Hub branch, tag or commit (fetches from the Hub even "
       "for catalogue ids)"),
    _O("token", str, ("--token",), "Hub token for gated/private repos (default: HF_TOKEN or "
       "your saved login)"),
    _O("offline", bool, ("--offline",), "no network: kvplan's and huggingface_hub's caches only "
       "(default: HF_HUB_OFFLINE)"),
    _O("refresh", bool, ("--refresh",), "fetch the Hub repo again instead of using kvplan's "
       "cache", default=False),
    _O("as_json", bool, ("--json",), "Print JSON to stdout (warnings go to stderr).",
       default=False),
    # --- disagg ---
    _O("disagg", bool, ("--disagg",), "plan disaggregated prefill/decode: a prefill pool and a "
       "decode pool, the KV transfer between them and the xPyD ratio (docs/disagg.md)",
       default=False),
    _O("prefill_gpu", str, ("--prefill-gpu",), "--disagg: the prefill pool's GPU (default: "
       "--gpu)"),
    _O("decode_gpu", str, ("--decode-gpu",), "--disagg: the decode pool's GPU (default: --gpu)"),
    *(_O(f"{role}_{what}", int, (f"--{role}-{what}",), f"--disagg: the {role} pool's {words} "
         "(default: kvplan chooses)", ge=1, le=MAX_PARALLEL, unit=unit)
      for role in ("prefill", "decode")
      for what, words, unit in (("tp", "tensor parallel size", "GPUs"),
                                ("dp", "data parallel size", "GPUs"),
                                ("ep", "expert parallel size (= its TP × DP)", "GPUs"),
                                ("replicas", "replicas", "replicas"))),
    _O("kv_link_gbps", float, ("--kv-link-gbps",), "--disagg: KV-transfer link bandwidth per GPU "
       "(default 400: one ConnectX-7 NIC per GPU)", gt=0, le=100_000, unit="Gb/s"),
    # --- calibrate ---
    _O("calibration", str, ("--calibration",), "a calibration file written by `kvplan "
       "calibrate`: its latency coefficients replace the bundled ones for the engine × GPU "
       "architecture it covers (default: the KVPLAN_CALIBRATION environment variable)",
       unit="file", path=True),
    # --- nodes ---
    _O("nodes", int, ("--nodes",), "nodes the deployment spans (default: the fewest the GPU's "
       "system shape needs; docs/nodes.md)", ge=1, le=MAX_PARALLEL, unit="nodes",
       knob="kvplan"),
    _O("gpus_per_node", int, ("--gpus-per-node",), "GPUs per node of your servers (default: "
       "the GPU's bundled system shapes; docs/nodes.md)", ge=1, le=MAX_PARALLEL, unit="GPUs",
       knob="kvplan"),
    # --- expert ---
    _O("enable_dp_attention", bool, ("--enable-dp-attention",), "SGLang, TensorRT-LLM: "
       "attention data-parallel over the -dp ranks, MoE layers over all -tp × -dp GPUs (vLLM "
       "does this for every MoE model with -dp > 1; docs/expert-parallel.md)",
       doc="SGLang --enable-dp-attention, TensorRT-LLM enable_attention_dp (vLLM: implied by "
       "-dp on a MoE model)", knob="engine"),
    _O("num_redundant_experts", int, ("--num-redundant-experts",), "EPLB: extra expert slots "
       "spread over the expert-parallel ranks (needs --enable-expert-parallel)", ge=0, le=4096,
       unit="experts", doc="vLLM --eplb-config '{\"num_redundant_experts\": N}' (0.10.2+; "
       "--num-redundant-experts 0.9.2-0.11; none before 0.9.2), SGLang "
       "--ep-num-redundant-experts", knob="engine"),
    _O("moe_a2a_backend", str, ("--moe-a2a-backend",), "MoE all-to-all backend: SGLang none or "
       "deepep; vLLM (its --all2all-backend) allgather_reducescatter, naive, "
       "deepep_high_throughput or deepep_low_latency (DeepEP's buffers are sized)",
       doc="SGLang --moe-a2a-backend, vLLM --all2all-backend",
       hint="SGLang: none or deepep; vLLM: allgather_reducescatter, naive, "
       "deepep_high_throughput or deepep_low_latency",
       knob="engine", model=Literal["none", "deepep", "allgather_reducescatter", "naive",
                                    "deepep_high_throughput", "deepep_low_latency"]),
    # --- manifests ---
    _O("emit", str, ("--emit",), "write the deployment file for the plan: k8s, helm-llmd, "
       "helm-production-stack, dynamo, kserve, ray, skypilot or compose (to stdout, or -o FILE; "
       "docs/deploy-check.md)"),
    # --- traffic ---
    _O("request_rate", float, ("--request-rate",), "requests per second to serve: simulates "
       "the scheduler (open loop) and plans the replicas that hold the rate within the SLOs "
       "(docs/traffic.md)", gt=0, le=1_000_000, unit="req/s"),
    _O("burstiness", float, ("--burstiness",), "arrival burstiness as vllm bench serve "
       "--burstiness: 1 = Poisson, < 1 burstier, > 1 more regular (needs --request-rate)",
       gt=0, le=1000),
    _O("slo_percentile", int, ("--slo-percentile",), "the percentile --slo-ttft-ms / "
       "--slo-tpot-ms apply to: 50, 90 or 99 (simulated; default: the mean model, 99 with "
       "--request-rate)", ge=50,
       le=99, unit="percentile"),
    _O("random_range_ratio", float, ("--random-range-ratio",), "lengths uniform in "
       "[L(1 − r), L(1 + r)] around --avg-input/output-tokens, as the benchmarks' random "
       "dataset (simulated figures only)", ge=0, le=0.99),
    _O("trace", str, ("--trace",), "replay a request trace through the scheduler simulation: "
       "Azure LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens) or JSONL of "
       "the same fields", unit="file", path=True),
    _O("traffic", str, ("--traffic",), "a rate curve over one day, CSV time,requests_per_s "
       "(time of day: hours from 0 to below 24, or HH:MM from 00:00 to 23:59): replicas per "
       "interval, GPUs, GPU-hours and $ per day, autoscaler values",
       unit="file", path=True),
    _O("lengths_file", str, ("--lengths-file",), "request lengths to simulate, CSV "
       "input_tokens,output_tokens (one row per request, sampled) or a benchmark's detailed "
       "result JSON (input_lens/output_lens): percentiles of a real mix",
       unit="file", path=True),
    # --- finish26 ---
    _O("rank_on", str, ("--rank-on",), "sweep: rank latency, throughput and $/M tokens by the "
       "pessimistic end of each figure's band (pessimistic) or by the point estimate (point)",
       default="pessimistic"),
    # --- pctl ---
    _O("dataset", str, ("--dataset",), "request lengths to simulate from a named dataset's "
       "bundled histogram: sharegpt-8k, arxiv-summarization, azure-conv-2023 or "
       "azure-code-2023 (sets --avg-input/output-tokens to its means unless given; not with "
       "--lengths-file, --random-range-ratio or --trace; docs/traffic.md)"),
    # --- polish ---
    _O("max_beam_width", int, ("--max-beam-width",), "TensorRT-LLM: most beams one request may "
       "search (trtllm-serve --max_beam_width). Not modelled: kvplan plans one beam per "
       "request, and a request of B beams caches its generated tokens B times", ge=1, le=1024,
       unit="beams", doc="TensorRT-LLM --max_beam_width (BuildConfig.max_beam_width, default 1)",
       knob="engine"),
    # --- mixedchunk ---
    _O("enable_mixed_chunk", bool, ("--enable-mixed-chunk",), "SGLang: mix new prompts' "
       "prefill into the running decodes' steps instead of pausing them (TTFT at concurrency; "
       "docs/sglang-mixed-chunk.md)",
       doc="SGLang --enable-mixed-chunk (0.2.14+; python/sglang/srt/server_args.py, "
       "managers/scheduler.py mix_with_running): mixed prefill+decode steps that admit whole "
       "prompts", knob="engine"),
    # --- sgdense ---
    _O("moe_dense_tp_size", int, ("--moe-dense-tp-size",), "SGLang DP attention: 1 runs the "
       "dense (non-MoE) layers' MLP whole on every GPU on its own tokens instead of over all "
       "TP x DP GPUs on gathered tokens (docs/expert-parallel.md)", ge=1, le=1, unit="GPUs",
       doc="SGLang --moe-dense-tp-size (server_args.py: only 1 or unset; "
       "layers/communicator.py enable_moe_dense_fully_dp, 0.4.9 - 0.5.x)", knob="engine"),
)}


def _knob_field(o: Option) -> tuple[Any, Any]:
    """The Knobs field an OPTIONS entry declares: its type (optional; None = the engine's
    default), parser, bounds, description and further Field arguments."""
    kind: Any = (o.type if o.model is None else o.model) | None
    if o.parse is not None:
        kind = Annotated[kind, BeforeValidator(o.parse)]
    extra: dict[str, Any] = {k: v for k, v in (("gt", o.gt), ("ge", o.ge), ("le", o.le))
                             if v is not None}
    if o.doc is not None:
        extra["description"] = o.doc
    return kind, Field(None, **extra, **dict(o.extra))


# values model_dump returns as they are (Knobs.given)
_PLAIN = (int, float, str, bool)


class KnobsBase(BaseModel):
    """Every setting a plan can take; None = the engine's default. Ranges are the engines'
    own (each engine adds what only it refuses, e.g. vLLM's max_model_len above the model's)."""

    # The fields are OPTIONS' knobs: `Knobs` below is this class with them, built from the table.
    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        """No float knob takes inf or nan."""
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @classmethod
    def parse(cls, values: dict[str, Any]) -> Self:
        """Knobs from keyword values; a bad value is an InvalidInputError naming the flag."""
        unknown = sorted(set(values) - set(cls.model_fields))
        if unknown:
            raise InvalidInputError(f"unknown setting(s): {', '.join(unknown)}",
                                    hint="settings use vLLM's flag names with underscores, "
                                    "e.g. max_model_len")
        try:
            return cls.model_validate({k: v for k, v in values.items() if v is not None})
        except ValidationError as e:
            err = e.errors()[0]
            name = str(err["loc"][0]) if err["loc"] else "?"
            o = OPTIONS.get(name)
            span = o.span() if o else None
            own = o is not None and o.own_message
            what = (f"in {span}" if span and err["type"] in _RANGE_ERRORS and not own
                    else err["msg"].removeprefix("Value error, ") if own
                    and err["type"] == "value_error"
                    else err["msg"].lower().removeprefix("input should be "))
            if name == "speculative_config" and len(err["loc"]) > 1:
                what += f" (field {err['loc'][1]!r})"
            raise InvalidInputError(f"{flag(name)} must be {what}, got {err.get('input')!r}",
                                    hint=o.hint if o else None, code="out-of-range",
                                    knob=name) from None

    def given(self) -> dict[str, Any]:
        """The knobs the user set (not None), as model_dump() gives them: plain values are read
        directly (model_dump returns them unchanged; a plan asks this several times), anything
        else (a speculative config, a dict) is dumped."""
        values = self.__dict__
        out = {}
        for name in type(self).model_fields:
            v = values[name]
            if v is not None:
                if type(v) not in _PLAIN:
                    return {k: v for k, v in self.model_dump().items() if v is not None}
                out[name] = v
        return out


if TYPE_CHECKING:
    class Knobs(KnobsBase):
        """The fields create_model adds below, spelled out for mypy (OPTIONS' knobs, in order;
        tests/project/test_knobs_typed.py checks them against the generated model)."""

        tensor_parallel_size: int | None = None
        pipeline_parallel_size: int | None = None
        data_parallel_size: int | None = None
        max_model_len: int | None = None
        max_num_seqs: int | None = None
        max_num_batched_tokens: int | None = None
        max_input_tokens: int | None = None
        gpu_memory_utilization: float | None = None
        dtype: str | None = None
        kv_cache_dtype: str | None = None
        quantization: str | None = None
        block_size: int | None = None
        enforce_eager: bool | None = None
        enable_prefix_caching: bool | None = None
        disable_hybrid_kv_cache_manager: bool | None = None
        enable_expert_parallel: bool | None = None
        usage_context: Literal['serve', 'llm'] | None = None
        kv_cache_memory_bytes: int | None = None
        gpu_memory_gib: float | None = None
        max_total_tokens: int | None = None
        backend: Literal['pytorch', 'tensorrt'] | None = None
        speculative_config: SpeculativeConfig | None = None
        enable_lora: bool | None = None
        max_loras: int | None = None
        max_lora_rank: int | None = None
        max_cpu_loras: int | None = None
        lora_target_modules: list[str] | None = None
        lora_paths: list[str] | None = None
        kv_offloading_size: float | None = None
        kv_offloading_backend: Literal['native', 'lmcache'] | None = None
        enable_hierarchical_cache: bool | None = None
        hicache_ratio: float | None = None
        hicache_size: int | None = None
        cuda_graph_max_bs: int | None = None
        host_cache_size: int | None = None
        limit_mm_per_prompt: dict[str, int] | None = None
        nodes: int | None = None
        gpus_per_node: int | None = None
        enable_dp_attention: bool | None = None
        num_redundant_experts: int | None = None
        moe_a2a_backend: Literal['none', 'deepep', 'allgather_reducescatter', 'naive',
                                 'deepep_high_throughput', 'deepep_low_latency'] | None = None
        max_beam_width: int | None = None
        enable_mixed_chunk: bool | None = None
        # --- sgdense ---
        moe_dense_tp_size: int | None = None
else:
    Knobs = create_model("Knobs", __base__=KnobsBase, __module__=__name__,
                         __doc__=KnobsBase.__doc__,
                         **{o.name: _knob_field(o) for o in OPTIONS.values() if o.knob})


KNOB_NAMES: tuple[str, ...] = tuple(Knobs.model_fields)
# Knobs kvplan reads itself for every engine (no engine declares them).
KVPLAN_KNOBS: frozenset[str] = frozenset(o.name for o in OPTIONS.values() if o.knob == "kvplan")
_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than_equal", "less_than",
                 "finite_number", "value_error"}




def flag(name: str) -> str:
    """kvplan's (vLLM's) flag for a knob: max_model_len → --max-model-len."""
    return "--" + name.replace("_", "-")


# ----------------------------------------------------------- engine-independent resolution


def valid_tp_sizes(m: ModelSpec, limit: int = 64) -> list[int]:
    """TP sizes the engines accept: divide the attention heads, and divide or be a multiple of
    the KV heads (vllm/model_executor/layers/linear.py QKVParallelLinear). Only divisors of the
    head count qualify, so this enumerates divisors, not every integer up to `limit`."""
    return [tp for tp in _tp_sizes(m) if tp <= limit]


@per_object(64)
def _tp_sizes(m: ModelSpec) -> tuple[int, ...]:
    """valid_tp_sizes without a limit, listed once per model object."""
    heads = m.num_attention_heads
    divisors = {d for i in range(1, math.isqrt(heads) + 1) if heads % i == 0
                for d in (i, heads // i)}
    return tuple(sorted(tp for tp in divisors
                        if m.num_kv_heads % tp == 0 or tp % m.num_kv_heads == 0))


def compute_capability(gpu: GpuSpec) -> tuple[int, int] | None:
    """An NVIDIA GPU's compute capability ('8.9' → (8, 9)); None for other vendors / unknown."""
    return _capability(gpu.vendor, gpu.compute_capability or "")


@functools.lru_cache(maxsize=64)
def _capability(vendor: str, cc: str) -> tuple[int, int] | None:
    if vendor != "NVIDIA" or not re.fullmatch(r"\d+\.\d+", cc):
        return None
    major, minor = cc.split(".")
    return int(major), int(minor)


def _has_bf16(gpu: GpuSpec) -> bool:
    cc = compute_capability(gpu)
    return gpu.bf16_native and (cc is None or cc >= (8, 0))


# vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS ("Numerical instability"): --dtype auto
# skips float16 for these model types.
FLOAT16_UNSUPPORTED_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})


def resolve_dtype(requested: str | None, m: ModelSpec, gpu: GpuSpec) -> tuple[str, Source]:
    """--dtype auto → the config dtype if the platform supports it, else the first dtype the
    platform supports (bfloat16, float16, float32 on CUDA cc ≥ 8.0; float16, float32 below —
    vllm/platforms/cuda.py supported_dtypes; vllm/config/model.py _resolve_auto_dtype, which
    also skips float16 for FLOAT16_UNSUPPORTED_MODEL_TYPES and downcasts float32 checkpoints).
    An explicit dtype is returned as given (capability_problems says if the GPU refuses it)."""
    if requested and requested != "auto":
        dtype = DTYPE_ALIASES.get(requested.lower())
        if dtype is None:
            raise InvalidInputError(f"unknown --dtype {requested!r}",
                                    hint="use auto, bfloat16, float16 or float32",
                                    code="dtype-unknown", knob="dtype")
        return dtype, "cli"
    supported = [d for d in ("bfloat16", "float16", "float32")
                 if (d != "bfloat16" or _has_bf16(gpu))
                 and (d != "float16" or m.model_type not in FLOAT16_UNSUPPORTED_MODEL_TYPES)]
    if m.dtype == "float32":
        return supported[0], "engine-default"
    if m.dtype in supported:
        return m.dtype, "model-config"
    return supported[0], "engine-default"


# vLLM's refusal of FP8 weights below compute capability 8.0 (Fp8Config get_min_capability 80,
# vllm/model_executor/layers/quantization/fp8.py): applied to an engine that declares none of
# its own (Engine.fp8_refusal)
VLLM_FP8_REFUSAL = "vLLM refuses them ('Minimum capability: 80')"
# the least compute capability of FP8 weights under the rule every engine is planned with
# (capability_problems: Fp8Config.get_min_capability 80, vllm/model_executor/layers/
# quantization/fp8.py)
FP8_LEAST = (8, 0)


def capability_problems(m: ModelSpec, gpu: GpuSpec, dtype: str, requested_dtype: str | None,
                        kv_dtype: str, quant: QuantSpec | None,
                        refusal: str | None = None, *, engine_label: str = "vLLM",
                        fp8_refusal: str = "",
                        fp8_least: tuple[int, int] = FP8_LEAST) -> list[Problem]:
    """What the GPU's compute capability refuses or changes, as vLLM decides it (the other
    engines use the same CUDA kernels' limits) — but for FP8 weights below 8.0, which the
    engine planned (`engine_label`) refuses as its `fp8_refusal` says (Engine.fp8_refusal;
    "": vLLM's rule, and the error says so):
    * bfloat16 needs cc ≥ 8.0: --dtype auto falls back to float16 with a warning
      (vllm/config/model.py _resolve_auto_dtype); an explicit --dtype bfloat16 is refused
      ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0",
      vllm/platforms/interface.py check_if_supports_dtype / the V0 worker's
      _check_if_gpu_supports_dtype).
    * FP8 weights (--quantization fp8 or an FP8 checkpoint) need cc ≥ `fp8_least` (the
      engine's release's: Engine.fp8_least; vLLM's Fp8Config get_min_capability, 80, 75 from
      0.14.0); below 8.9 there is no FP8 compute and vLLM runs them weight-only through the
      Marlin kernel (same memory, 16-bit math).
    * `refusal`: why the engine's kernels for the checkpoint's format do not run on this GPU
      (planner/whatif.py refusal, the rule a what-if's --quantization meets:
      Engine.checkpoint_kernel), an error; None where one runs it.
    * FP4 weights (NVFP4, MXFP4: a real checkpoint's or a what-if's) on a GPU that runs no FP4
      GEMMs for them (QuantSpec.runs_fp4_on) are served weight-only: a warning.
    * An fp8 KV cache stores 1-byte elements on any GPU, but below cc 8.9 there is no FP8
      arithmetic: the attention backend converts on the fly (UNVERIFIED below cc 8.0, where
      vLLM's FlashAttention backends do not run)."""
    cc = compute_capability(gpu)
    if cc is None:
        return []
    out: list[Problem] = []
    cc_s = f"{cc[0]}.{cc[1]}"
    # another engine is planned with vLLM's rule here, and the message says whose it is
    rule = "" if engine_label == "vLLM" else f" ({engine_label} planned with vLLM's rule)"
    if dtype == "bfloat16" and not _has_bf16(gpu):
        out.append(Problem(
            code="gpu-capability", severity="error",
            message=f"--dtype {requested_dtype or 'bfloat16'}: bfloat16 needs compute capability "
            f"≥ 8.0 and the {gpu.name} has {cc_s}; vLLM refuses to start ('Bfloat16 is only "
            f"supported on GPUs with compute capability of at least 8.0'){rule} — use --dtype "
            "float16"))
    elif m.dtype == "bfloat16" and dtype != "bfloat16" and not requested_dtype:
        out.append(Problem(
            code="dtype-fallback", severity="warning",
            message=f"the {gpu.name} (compute capability {cc_s}) has no bfloat16: --dtype auto "
            f"runs this bfloat16 checkpoint in {dtype}, as vLLM does ('Falling back to {dtype} "
            f"for compatibility'){rule}; some models lose accuracy in float16"))
    if quant is not None and quant.method == "fp8" and refusal is None:
        # (a format with its own rule, refused here: that rule's error alone, never the
        # weight-only warning of a fallback the engine does not take)
        if cc < fp8_least:
            out.append(Problem(
                code="gpu-capability", severity="error",
                message=f"FP8 weights need compute capability ≥ {fp8_least[0]}.{fp8_least[1]} "
                f"and the {gpu.name} has "
                f"{cc_s}; " + (fp8_refusal or f"{engine_label} is planned with vLLM's rule, "
                               f"as kvplan has not read {engine_label}'s own: "
                               + VLLM_FP8_REFUSAL)))
        elif cc < (8, 9):
            out.append(Problem(
                code="fp8-weight-only", severity="warning",
                message=f"the {gpu.name} (compute capability {cc_s}) has no FP8 compute: vLLM "
                "runs FP8 weights weight-only through the Marlin kernel (same memory, 16-bit "
                f"math, slower than on cc ≥ 8.9){rule}"))
    if refusal is not None:
        out.append(Problem(code="gpu-capability", severity="error", message=refusal))
    elif (quant is not None and quant.method in ("nvfp4", "mxfp4")
            and not quant.runs_fp4_on(gpu)):
        out.append(Problem(
            code="fp4-weight-only", severity="warning",
            message=f"the {gpu.name} (compute capability {cc_s}) runs no {quant.method} GEMMs: "
            "its 4-bit weights are read as stored and dequantized into 16-bit GEMMs by "
            "weight-only kernels (vLLM's FP4 Marlin, utils/marlin_utils_fp4.py; MXFP4 MoE "
            "kernels on 16-bit activations; Quark MXFP4 emulation without MX support): the "
            "memory and bandwidth of FP4, the FLOPs of 16-bit"))
    if kv_dtype.startswith("fp8") and cc < (8, 9):
        out.append(Problem(
            code="fp8-kv-emulated", severity="warning",
            message=f"--kv-cache-dtype {kv_dtype} on the {gpu.name} (compute capability {cc_s}, "
            "no FP8 arithmetic): the cache is stored in 1-byte elements and converted on the "
            "fly" + (" — UNVERIFIED below cc 8.0, where vLLM's FlashAttention backends do not "
                     "run; check that your engine version starts" if cc < (8, 0) else "")))
    return out


def checkpoint_kv_ignored(m: ModelSpec, dtype: str, engine_label: str) -> list[Problem]:
    """A checkpoint that declares an FP8 KV cache (calibrated k/v scales) served by an engine
    (or release) whose `auto` keeps the model dtype: say so, and how to use it."""
    q = m.quantization
    if q is None or q.kv_cache_quant_algo != "FP8":
        return []
    return [Problem(
        code="checkpoint-kv-ignored", severity="info",
        message=f"the checkpoint declares an FP8 KV cache (kv_cache_quant_algo) but "
        f"{engine_label} (this release) keeps --kv-cache-dtype auto at {dtype}, as planned: "
        "pass --kv-cache-dtype fp8 for about twice the KV tokens")]


def checkpoint_kv_overridden(dtype: str, checkpoint_kv: str, engine_label: str,
                             kv_override: str) -> Problem:
    """A 16-bit --kv-cache-dtype against a checkpoint whose declared FP8 KV cache the engine's
    `auto` takes: kvplan plans the 16-bit cache asked for, but the launch line (which leaves
    the model's own dtype out, as `auto`) would start the checkpoint's."""
    return Problem(
        code="checkpoint-kv-overridden", severity="warning",
        message=f"--kv-cache-dtype {dtype}: planned as asked, but the checkpoint declares an FP8 "
        f"KV cache, which {engine_label}'s auto takes ({checkpoint_kv}, about twice the KV "
        "tokens), and the launch line leaves the flag out"
        + (f"; {kv_override}" if kv_override else "")
        + ". For a 16-bit cache, serve a checkpoint exported without KV quantization (ModelOpt "
        "hf_ptq.py --kv_cache_qformat none); else drop the flag")


# --quantization values (vllm/model_executor/layers/quantization/__init__.py; SGLang and TGI
# name the same formats) → the checkpoint format kvplan sizes them as.
QUANT_FLAG_METHODS = {
    "fp8": "fp8", "fbgemm_fp8": "fp8", "modelopt": "fp8", "mxfp4": "mxfp4", "awq": "awq",
    "awq_marlin": "awq", "gptq": "gptq", "gptq_marlin": "gptq", "modelopt_fp4": "nvfp4",
    "compressed-tensors": None,
}
KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2")


@fast_init
@dataclass(frozen=True)
class Layout:
    """What every engine resolves the same way: parallel sizes, dtypes, weight format, device."""

    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    dtype: str
    kv_cache_dtype: str
    quant: QuantSpec | None
    gpu_total_bytes: int
    sources: dict[str, Source]
    problems: tuple[Problem, ...] = ()  # capability notes; an "error" means it will not start
    other_processes_bytes: int = 0  # held by other processes on a local GPU (--gpu local)


def resolve_layout(m: ModelSpec, gpu: GpuSpec, knobs: Knobs, *, engine_label: str,
                   checkpoint_kv: str | None = None, kv_override: str = "",
                   refusal: str | None = None, fp8_refusal: str = "",
                   fp8_least: tuple[int, int] = FP8_LEAST) -> Layout:
    """Parallel sizes (TP must divide the heads), device total (--gpu-memory-gib or the
    catalogue's CUDA total), dtype, KV dtype and weight format, with the source of each.
    `checkpoint_kv`: the KV dtype the engine's `auto` takes from a checkpoint that declares
    one (Engine.checkpoint_kv_dtype), None where it keeps the model dtype; `kv_override`:
    what the engine does with a 16-bit request against it (Engine.checkpoint_kv_override);
    `refusal`: why the engine's kernels for the checkpoint's format do not run on this GPU
    (planner/whatif.py refusal), a gpu-capability error among the layout's problems.
    `fp8_refusal`: how it refuses FP8 weights below `fp8_least`, the least compute capability
    of FP8 weights in the planned release (Engine.fp8_refusal, Engine.fp8_least)."""
    sources: dict[str, Source] = {}

    def pick(key: str, default: Any) -> Any:
        value = getattr(knobs, key)
        sources[key] = "cli" if value is not None else "engine-default"
        return default if value is None else value

    tp = pick("tensor_parallel_size", 1)
    pp = pick("pipeline_parallel_size", 1)
    dp = pick("data_parallel_size", 1)
    if tp not in _tp_sizes(m):
        valid = ", ".join(map(str, valid_tp_sizes(m)))
        raise InvalidInputError(
            f"--tensor-parallel-size {tp} does not divide the model's {m.num_attention_heads} "
            f"attention heads / {m.num_kv_heads} KV heads", hint=f"valid sizes: {valid}",
            code="tensor-parallel-size-invalid", knob="tensor_parallel_size")
    if pp > m.num_layers:
        raise InvalidInputError(f"--pipeline-parallel-size {pp} exceeds the {m.num_layers} layers",
                                code="pipeline-parallel-size-invalid",
                                knob="pipeline_parallel_size")

    if knobs.gpu_memory_gib is not None:
        total = int(knobs.gpu_memory_gib * GiB)
        sources["gpu_total_bytes"] = "cli"
    elif gpu.cuda_total_bytes is not None:
        total = gpu.cuda_total_bytes
        sources["gpu_total_bytes"] = "gpu-spec"
    else:
        raise InvalidInputError(f"the device total of {gpu.id} is unknown",
                                hint=f"pass --gpu-memory-gib with the total your {engine_label} "
                                "log prints", code="gpu-total-unknown", knob="gpu_memory_gib")

    dtype, sources["dtype"] = resolve_dtype(knobs.dtype, m, gpu)
    kv_req = (knobs.kv_cache_dtype or "auto").lower()
    kv_note: list[Problem] = []
    if kv_req == "auto" and checkpoint_kv is not None:
        kv_dtype = checkpoint_kv  # the engine's auto follows the checkpoint's declared KV
        sources["kv_cache_dtype"] = "model-config"
    elif kv_req == "auto":
        kv_dtype = dtype
        sources["kv_cache_dtype"] = "cli" if knobs.kv_cache_dtype else "engine-default"
        kv_note = checkpoint_kv_ignored(m, dtype, engine_label)
    elif kv_req in KV_DTYPES:
        kv_dtype = kv_req
        sources["kv_cache_dtype"] = "cli"
    elif DTYPE_ALIASES.get(kv_req) == dtype:
        # The model's own 16-bit dtype is what `auto` stores (and what a plan's inputs report, so
        # they are valid input again); every engine's launch line then leaves the flag out.
        kv_dtype = dtype
        sources["kv_cache_dtype"] = "cli"
        if checkpoint_kv is not None:  # … but here `auto` is the checkpoint's FP8 cache
            kv_note = [checkpoint_kv_overridden(dtype, checkpoint_kv, engine_label, kv_override)]
    else:
        other = DTYPE_ALIASES.get(kv_req)
        raise InvalidInputError(
            f"unsupported --kv-cache-dtype {kv_req!r}" + (
                f": the engines keep a 16-bit KV cache in the model's dtype, {dtype}" if other
                else ""),
            hint=f"use auto, {dtype}, " + ", ".join(KV_DTYPES)
            + (f", or --dtype {other} to run the model in {other}" if other else ""),
            code="kv-cache-dtype-unsupported", knob="kv_cache_dtype")

    quant = m.quantization
    qname = knobs.quantization
    if qname:
        sources["quantization"] = "cli"
        named = QUANT_FLAG_METHODS.get(qname.lower())
        if quant is not None and named == quant.method:
            pass  # the flag names the checkpoint's own format (the engines accept and use it)
        elif qname.lower() != "fp8" or quant is not None:
            # online fp8 only quantizes a 16-bit checkpoint: on a quantized one the engines
            # refuse a method other than the config's (vLLM ModelConfig._verify_quantization:
            # "Quantization method specified in the model config (…) does not match …")
            have = f"the checkpoint is {quant.method}" if quant else "the checkpoint is unquantized"
            raise InvalidInputError(
                f"--quantization {qname!r} does not match the model ({have})",
                hint=(f"drop the flag to serve the checkpoint's own {quant.method}, or plan the "
                      "unquantized model with --quantization fp8") if quant else
                "kvplan models online --quantization fp8, or the checkpoint's own format (drop "
                "the flag)", code="quantization-mismatch", knob="quantization")
        elif quant is None:  # online FP8: per-tensor weight scales after loading
            quant = QuantSpec(method="fp8", source="cli")
    elif quant is not None:  # a what-if is the user's --quantization (Engine.build_quantization)
        sources["quantization"] = "cli" if quant.source == "what-if" else "model-config"
    if knobs.enable_expert_parallel and m.moe is None:
        raise InvalidInputError("--enable-expert-parallel needs a mixture-of-experts model",
                                hint=f"{m.id} has no experts; drop the flag",
                                code="expert-parallel-needs-moe", knob="enable_expert_parallel")
    problems = kv_note + capability_problems(m, gpu, dtype,
                                             knobs.dtype if sources["dtype"] == "cli" else None,
                                             kv_dtype, quant, refusal,
                                             engine_label=engine_label, fp8_refusal=fp8_refusal,
                                             fp8_least=fp8_least)
    others = gpu.local.used_bytes if gpu.local is not None and knobs.gpu_memory_gib is None else 0
    return Layout(tp, pp, dp, dtype, kv_dtype, quant, total, sources, tuple(problems), others)
