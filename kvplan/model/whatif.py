"""Format what-ifs (issue #24 item 6): `--quantization nvfp4|mxfp4|w8a8|awq` on an unquantized
model plans the checkpoint a standard quantizer would write from it, before it exists; so does
TensorRT-LLM's quantize-first `--quantization fp8|nvfp4` (engines/trtllm.py, the MODELOPT
records below).

Each format is what its quantizer's default recipe produces, sized by weights.py exactly as a
real checkpoint of that format:
* Layer exceptions. Only decoder Linear layers (and MoE experts) are quantized: embeddings, the
  LM head, norms, MoE routers and vision towers keep the model dtype (weights.py never
  quantizes those kinds; the LM head is also in every quantizer's default ignore list).
* Scales, per weight element: NVFP4 ½ B + one fp8 (e4m3) scale per 16 + two fp32 per tensor;
  MXFP4 ½ B + one e8m0 scale per 32; W8A8 1 B + one fp32 scale per output channel; AWQ ½ B +
  one 16-bit scale and one 4-bit zero per group of 128 inputs; ModelOpt FP8 1 B + fp32
  per-tensor weight and input scales.
* KV cache: what the recipe writes. The one rule, for every engine (WhatIfFormat.for_kv_request):
  a --kv-cache-dtype the user gave switches the recipe's KV cache quantization (fp8: on; a
  16-bit dtype: off) where the recipe has such a switch; otherwise the recipe's own default
  holds (ModelOpt hf_ptq.py: an FP8 KV cache; TensorRT-LLM's quantize.py: none). The plan says
  which (the last assumption, and inputs.kv_cache_dtype with its source).
The engine side is declared by each engine: the kernels it serves each checkpoint format with,
under which name and from which compute capability (Engine.checkpoint_kernels, keyed by
checkpoint_format below: one rule for a what-if's checkpoint and a real one), and
Engine.what_if_recipe for an engine with its own recipe."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..specs import QuantSpec
from ..units import DTYPE_ALIASES


@dataclass(frozen=True)
class KvSwitch:
    """How a recipe turns its KV cache quantization on and off: the argument written into the
    recipe ({kv}) and what the plan then assumes, each way."""

    on: str
    off: str
    says_on: str
    says_off: str


@dataclass(frozen=True)
class WhatIfFormat:
    """One --quantization what-if: the quantizer, the checkpoint it writes, how to make it."""

    name: str  # kvplan's --quantization value
    quantizer: str
    spec: QuantSpec  # the checkpoint; spec.kv_cache_quant_algo: the KV cache it declares
    suffix: str  # the hypothetical checkpoint directory: <model name>-<suffix>
    recipe: str  # how to produce it ({model}, {out} and {kv}, the KV switch's argument)
    # what the plan assumes of the recipe; the KV cache's assumption comes from `kv` when the
    # recipe has a switch (assumptions_planned), else it is the last one here
    assumptions: tuple[str, ...]
    # GPU vendors whose engine builds serve it: NVFP4's kernels (CUTLASS FP4, FP4 Marlin) are
    # CUDA-only; the others also run on ROCm (vLLM's Quark MXFP4 natively on CDNA4, Triton
    # AWQ, int8 scaled_mm). Other vendors' plugins: not modelled.
    vendors: frozenset[str] = frozenset({"NVIDIA", "AMD"})
    # a recipe that can quantize the KV cache: its switch (None: the KV cache stays 16-bit)
    kv: KvSwitch | None = None
    # the checkpoint format it writes, as engines declare their kernels for it
    # (Engine.checkpoint_kernels; checkpoint_format below); "" = its name
    writes: str = ""

    @property
    def checkpoint_format(self) -> str:
        return self.writes or self.name

    @property
    def kv_on(self) -> bool:
        """Whether the checkpoint declares an FP8 KV cache (kv_cache_quant_algo)."""
        return self.spec.kv_cache_quant_algo is not None

    def with_kv(self, on: bool) -> WhatIfFormat:
        """The checkpoint the recipe writes with its KV cache quantization on (FP8 declared:
        every engine's `--kv-cache-dtype auto` takes it) or off (none declared: `auto` keeps
        the model dtype). Itself when the recipe has no switch or is already so."""
        if self.kv is None or on == self.kv_on:
            return self
        return replace(self, spec=self.spec.model_copy(
            update={"kv_cache_quant_algo": "FP8" if on else None}))

    def for_kv_request(self, kv_cache_dtype: str | None) -> WhatIfFormat:
        """THE rule (every engine, docs/what-if.md): the user's --kv-cache-dtype switches the
        recipe's KV cache quantization — an fp8 one on, a 16-bit one off (a checkpoint that
        declared FP8 would override `auto`, and an explicit 16-bit request does not reliably
        win against it: Engine.checkpoint_kv_override) — and without one (or `auto`) the
        recipe's own default holds."""
        kv = (kv_cache_dtype or "auto").lower()
        kv = DTYPE_ALIASES.get(kv, kv)
        if kv in ("bfloat16", "float16"):
            return self.with_kv(False)
        if kv.startswith("fp8"):
            return self.with_kv(True)
        return self

    def assumptions_planned(self) -> tuple[str, ...]:
        """What the plan assumes, the KV cache's last (the JSON record, the text note)."""
        if self.kv is None:
            return self.assumptions
        return (*self.assumptions, self.kv.says_on if self.kv_on else self.kv.says_off)

    def step(self, model: str, out: str) -> str:
        """The recipe's command line (or `#` line naming a Python call)."""
        kv = "" if self.kv is None else (self.kv.on if self.kv_on else self.kv.off)
        return self.recipe.format(model=model, out=out, kv=kv)


_LM_HEAD = ["lm_head"]

# NVIDIA Model-Optimizer examples/llm_ptq/hf_ptq.py --kv_cache_qformat: default "fp8" from 0.27.0
# to 0.42.0, "fp8_cast" (the same FP8_KV_CFG, e4m3, amax fixed instead of calibrated) from
# 0.43.0; 0.23-0.25 quantized the KV cache in FP8 unless --disable_kv_cache_quant. The export
# writes kv_cache_quant_algo "FP8" (modelopt/torch/export/quant_utils.py get_kv_cache_dtype);
# "none" writes none. TensorRT-LLM's docs (docs/source/features/quantization.md, 1.x: "Offline
# Quantization with ModelOpt") run scripts/huggingface_example.sh --quant fp8 --export_fmt hf,
# which passes --kv_cache_qformat only when --kv_cache_quant is given (0.33.0+): the default.
HF_PTQ_KV = KvSwitch(
    " --kv_cache_qformat fp8", " --kv_cache_qformat none",
    "ModelOpt's default --kv_cache_qformat fp8: the checkpoint declares an FP8 KV cache",
    "--kv_cache_qformat none (the 16-bit --kv-cache-dtype asked for): the checkpoint "
    "declares no KV cache quantization; the KV cache stays 16-bit")


def _modelopt(algo: str, name: str) -> QuantSpec:
    """The checkpoint hf_ptq.py writes for a ModelOpt quant_algo (QuantSpec.from_modelopt, as
    model/quant.py reads its hf_quant_config.json), with the default FP8 KV cache."""
    spec = QuantSpec.from_modelopt(algo, _LM_HEAD, source="what-if", kv_algo="FP8")
    assert spec is not None  # FP8 and NVFP4 are ModelOpt algos it knows
    return spec.model_copy(update={"what_if": name})


FORMATS: dict[str, WhatIfFormat] = {
    # NVIDIA Model-Optimizer examples/llm_ptq/hf_ptq.py: --qformat nvfp4, --kv_cache_qformat
    # (default fp8), --export_path; modelopt/torch/quantization/config.py NVFP4_DEFAULT_CFG
    # (e2m1 weights, an fp8 e4m3 scale per 16 and an fp32 global scale, input likewise) and
    # _default_disabled_quantizer_cfg ("*lm_head*", "*router*", "*mlp.gate.*", ...).
    "nvfp4": WhatIfFormat(
        "nvfp4", "NVIDIA ModelOpt (hf_ptq.py --qformat nvfp4)",
        _modelopt("NVFP4", "nvfp4"),
        "NVFP4",
        "python examples/llm_ptq/hf_ptq.py --pyt_ckpt_path {model} --qformat nvfp4{kv} "
        "--export_path {out}",
        ("ModelOpt's default NVFP4 recipe: every decoder Linear and MoE expert in e2m1 with an "
         "fp8 scale per 16 weights and fp32 global scales; LM head, embeddings, norms and "
         "routers kept 16-bit",),
        frozenset({"NVIDIA"}), HF_PTQ_KV),
    # The OCP Microscaling (MX) v1.0 MXFP4 layout: e2m1 elements, one e8m0 shared scale per
    # 32; AMD Quark quantize_quark.py --quant_scheme w_mxfp4_a_mxfp4 --exclude_layers lm_head
    # (examples/torch/language_modeling/llm_ptq) writes it for every Linear.
    "mxfp4": WhatIfFormat(
        "mxfp4", "AMD Quark (quantize_quark.py --quant_scheme w_mxfp4_a_mxfp4)",
        QuantSpec(method="mxfp4", weight_bits=4, group_size=32, ignore=_LM_HEAD,
                  source="what-if", what_if="mxfp4"),
        "MXFP4",
        "python quantize_quark.py --model_dir {model} --quant_scheme w_mxfp4_a_mxfp4 "
        "--exclude_layers lm_head --model_export hf_format --output_dir {out}",
        ("OCP MXFP4 on every decoder Linear and MoE expert: e2m1 with one e8m0 scale per 32 "
         "weights; LM head, embeddings, norms and routers kept 16-bit",
         "no KV cache quantization in the recipe: the KV cache stays 16-bit"),
        # a Quark checkpoint (quant_method "quark"), not gpt-oss's own MXFP4 layout
        # (quant_method "mxfp4"), which the engines serve through other kernels
        writes="quark-mxfp4"),
    # llm-compressor examples/quantization_w8a8_int8: QuantizationModifier/GPTQModifier
    # scheme "W8A8" (int8 weights per output channel, dynamic per-token int8 activations),
    # ignore=["lm_head"]; saved as compressed-tensors.
    "w8a8": WhatIfFormat(
        "w8a8", "llm-compressor (scheme W8A8, int8)",
        QuantSpec(method="int8", per_channel=True, ignore=_LM_HEAD, source="what-if",
                  what_if="w8a8"),
        "W8A8",
        "# llm-compressor: oneshot(model={model}, recipe=GPTQModifier(targets='Linear', "
        "scheme='W8A8', ignore=['lm_head'])), then save_pretrained('{out}', "
        "save_compressed=True)",
        ("llm-compressor's W8A8 scheme: int8 weights with an fp32 scale per output channel, "
         "dynamic per-token int8 activations; LM head, embeddings, norms and routers kept "
         "16-bit", "no KV cache scheme in the recipe: the KV cache stays 16-bit")),
    # AutoAWQ quant_config default {"zero_point": True, "q_group_size": 128, "w_bit": 4,
    # "version": "GEMM"} (awq/models/base.py quantize): decoder-layer Linears only.
    "awq": WhatIfFormat(
        "awq", "AutoAWQ (w_bit 4, q_group_size 128, zero_point)",
        QuantSpec(method="awq", weight_bits=4, group_size=128, zero_points=True,
                  ignore=_LM_HEAD, source="what-if", what_if="awq"),
        "AWQ",
        "# AutoAWQ: AutoAWQForCausalLM.from_pretrained('{model}').quantize(tokenizer, "
        "quant_config={{'w_bit': 4, 'q_group_size': 128, 'zero_point': True, "
        "'version': 'GEMM'}}), then save_quantized('{out}')",
        ("AutoAWQ's default: 4-bit weights, a 16-bit scale and a 4-bit zero per group of 128 "
         "inputs (weight-only: GEMMs run in 16-bit); LM head, embeddings, norms and routers "
         "kept 16-bit", "no KV cache quantization: the KV cache stays 16-bit")),
}


# NVIDIA ModelOpt hf_ptq.py's checkpoints by --qformat, for an engine that quantizes before it
# serves (TensorRT-LLM's quantize-first --quantization fp8|nvfp4, engines/trtllm.py). Not
# what-ifs elsewhere: on vLLM, SGLang and TGI --quantization fp8 quantizes online at load.
# modelopt/torch/quantization/config.py FP8_DEFAULT_CFG: e4m3 weights and inputs, one fp32
# scale per tensor each (static input scales from calibration).
MODELOPT: dict[str, WhatIfFormat] = {
    "fp8": WhatIfFormat(
        "fp8", "NVIDIA ModelOpt (hf_ptq.py --qformat fp8)", _modelopt("FP8", "fp8"), "FP8",
        "python examples/llm_ptq/hf_ptq.py --pyt_ckpt_path {model} --qformat fp8{kv} "
        "--export_path {out}",
        ("ModelOpt's FP8 recipe: every decoder Linear and MoE expert in e4m3 with fp32 "
         "per-tensor weight and input scales (a calibration pass on a GPU); LM head, "
         "embeddings, norms and routers kept 16-bit",),
        frozenset({"NVIDIA"}), HF_PTQ_KV),
    "nvfp4": FORMATS["nvfp4"],
}


# The engines' own names for these checkpoints, accepted too (vLLM's and SGLang's
# --quantization modelopt_fp4 and awq_marlin; SGLang's w8a8_int8).
ALIASES = {"modelopt_fp4": "nvfp4", "awq_marlin": "awq", "w8a8_int8": "w8a8"}


def what_if_format(name: str | None) -> WhatIfFormat | None:
    """The what-if a --quantization value names (None: not one; fp8 stays online fp8)."""
    key = (name or "").lower()
    return FORMATS.get(ALIASES.get(key, key))


# A real checkpoint's format by its QuantSpec.method (model/quant.py), as engines declare their
# kernels for it (Engine.checkpoint_kernels): NVFP4 (ModelOpt, or compressed-tensors e2m1 weights);
# MXFP4 (quant_method "mxfp4": gpt-oss's experts); AWQ; int8 weights and activations (the
# W8A8 what-if's format); FP8 (TensorRT-LLM's ModelOpt kernels; vLLM's, SGLang's and TGI's FP8
# rule is knobs.capability_problems), but for a ModelOpt FP8 checkpoint, which vLLM loads with
# its own config (MODELOPT_FP8). GPTQ and other weight-only int formats: no rule declared.
REAL_FORMATS = {"nvfp4": "nvfp4", "mxfp4": "mxfp4", "awq": "awq", "int8": "w8a8", "fp8": "fp8"}
MODELOPT_FP8 = "modelopt-fp8"


def checkpoint_format(q: QuantSpec | None) -> str | None:
    """The checkpoint format whose kernels serve weights `q` (Engine.checkpoint_kernel): a
    what-if's, the one its quantizer writes (WhatIfFormat.checkpoint_format); a real
    checkpoint's, by its method (REAL_FORMATS; ModelOpt FP8: MODELOPT_FP8). None: unquantized,
    online --quantization fp8 (quantized by the engine while loading), or a format no engine
    declares kernels for."""
    if q is None:
        return None
    if q.what_if is not None:
        fmt = FORMATS.get(q.what_if) or MODELOPT.get(q.what_if)
        return None if fmt is None else fmt.checkpoint_format
    if q.source != "checkpoint":
        return None
    if q.method == "fp8" and q.producer == "modelopt":
        return MODELOPT_FP8
    return REAL_FORMATS.get(q.method)


def checkpoint_dir(model_ref: str, fmt: WhatIfFormat) -> str:
    """The hypothetical checkpoint the launch line serves: ./<model name>-<SUFFIX>."""
    return "./" + model_ref.rstrip("/").rsplit("/", 1)[-1] + f"-{fmt.suffix}"

