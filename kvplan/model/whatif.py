"""Format what-ifs (issue #24 item 6): `--quantization nvfp4|mxfp4|w8a8|awq` on an unquantized
model plans the checkpoint a standard quantizer would write from it, before it exists.

Each format is what its quantizer's default recipe produces, sized by weights.py exactly as a
real checkpoint of that format:
* Layer exceptions. Only decoder Linear layers (and MoE experts) are quantized: embeddings, the
  LM head, norms, MoE routers and vision towers keep the model dtype (weights.py never
  quantizes those kinds; the LM head is also in every quantizer's default ignore list).
* Scales, per weight element: NVFP4 ½ B + one fp8 (e4m3) scale per 16 + two fp32 per tensor;
  MXFP4 ½ B + one e8m0 scale per 32; W8A8 1 B + one fp32 scale per output channel; AWQ ½ B +
  one 16-bit scale and one 4-bit zero per group of 128 inputs.
* KV cache: what the recipe declares (ModelOpt's default also calibrates an FP8 KV cache).
The engine side (which engines serve a format, under which name) is declared by each engine
(Engine.what_if_formats)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..specs import QuantSpec


@dataclass(frozen=True)
class WhatIfFormat:
    """One --quantization what-if: the quantizer, the checkpoint it writes, how to make it."""

    name: str  # kvplan's --quantization value
    quantizer: str
    spec: QuantSpec
    suffix: str  # the hypothetical checkpoint directory: <model name>-<suffix>
    recipe: str  # how to produce it ({model} and {out} filled in)
    assumptions: tuple[str, ...]
    # GPU vendors whose engine builds serve it: NVFP4's kernels (CUTLASS FP4, FP4 Marlin) are
    # CUDA-only; the others also run on ROCm (vLLM's Quark MXFP4 natively on CDNA4, Triton
    # AWQ, int8 scaled_mm). Other vendors' plugins: not modelled.
    vendors: frozenset[str] = frozenset({"NVIDIA", "AMD"})
    # A recipe that quantizes the KV cache by default: the same recipe without it (the
    # argument that turns it off, the assumption that then holds), for a plan whose user asks
    # for a 16-bit KV cache (without_kv)
    kv_off: tuple[str, str, str] | None = None

    def without_kv(self) -> WhatIfFormat:
        """The checkpoint the recipe writes with its KV cache quantization off: no KV scheme
        declared, so every engine's `--kv-cache-dtype auto` keeps the model dtype (the plan
        the user asked for with a 16-bit --kv-cache-dtype). Itself when nothing is off."""
        if self.kv_off is None:
            return self
        on, off, says = self.kv_off
        return replace(self, spec=self.spec.model_copy(update={"kv_cache_quant_algo": None}),
                       recipe=self.recipe.replace(on, off),
                       assumptions=(*self.assumptions[:-1], says), kv_off=None)


_LM_HEAD = ["lm_head"]

FORMATS: dict[str, WhatIfFormat] = {
    # NVIDIA Model-Optimizer examples/llm_ptq/hf_ptq.py: --qformat nvfp4, --kv_cache_qformat
    # (default fp8), --export_path; modelopt/torch/quantization/config.py NVFP4_DEFAULT_CFG
    # (e2m1 weights, an fp8 e4m3 scale per 16 and an fp32 global scale, input likewise) and
    # _default_disabled_quantizer_cfg ("*lm_head*", "*router*", "*mlp.gate.*", ...).
    "nvfp4": WhatIfFormat(
        "nvfp4", "NVIDIA ModelOpt (hf_ptq.py --qformat nvfp4)",
        QuantSpec(method="nvfp4", weight_bits=4, group_size=16, ignore=_LM_HEAD,
                  kv_cache_quant_algo="FP8", source="what-if", what_if="nvfp4"),
        "NVFP4",
        "python examples/llm_ptq/hf_ptq.py --pyt_ckpt_path {model} --qformat nvfp4 "
        "--kv_cache_qformat fp8 --export_path {out}",
        ("ModelOpt's default NVFP4 recipe: every decoder Linear and MoE expert in e2m1 with an "
         "fp8 scale per 16 weights and fp32 global scales; LM head, embeddings, norms and "
         "routers kept 16-bit",
         "ModelOpt's default --kv_cache_qformat fp8: the checkpoint declares an FP8 KV cache"),
        frozenset({"NVIDIA"}),
        # hf_ptq.py --kv_cache_qformat none: no KV cache quantizer, no kv_cache_quant_algo
        ("--kv_cache_qformat fp8", "--kv_cache_qformat none",
         "--kv_cache_qformat none (the 16-bit --kv-cache-dtype asked for): the checkpoint "
         "declares no KV cache quantization; the KV cache stays 16-bit")),
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
         "no KV cache quantization in the recipe: the KV cache stays 16-bit")),
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


# The engines' own names for these checkpoints, accepted too (vLLM's and SGLang's
# --quantization modelopt_fp4 and awq_marlin; SGLang's w8a8_int8).
ALIASES = {"modelopt_fp4": "nvfp4", "awq_marlin": "awq", "w8a8_int8": "w8a8"}


def what_if_format(name: str | None) -> WhatIfFormat | None:
    """The what-if a --quantization value names (None: not one; fp8 stays online fp8)."""
    key = (name or "").lower()
    return FORMATS.get(ALIASES.get(key, key))


def checkpoint_dir(model_ref: str, fmt: WhatIfFormat) -> str:
    """The hypothetical checkpoint the launch line serves: ./<model name>-<SUFFIX>."""
    return "./" + model_ref.rstrip("/").rsplit("/", 1)[-1] + f"-{fmt.suffix}"

