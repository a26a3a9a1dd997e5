"""The typed objects that flow through kvplan: ModelSpec, GpuSpec, Deployment, Plan.

ModelSpec and GpuSpec are frozen and normalised; the math sees nothing else. Plan is the one
result object that the table, the JSON and the tests all read.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

if TYPE_CHECKING:
    from typing_extensions import Self

from .engines import DEFAULT_ENGINE

SCHEMA_VERSION = "1.16"  # 1.1: "info" problems, model.weights_from; 1.2: engine.knobs, SGLang/TGI;
# 1.3: memory.weights_tensor_bytes (weights_bytes now includes the caching allocator's rounding);
# 1.4: engine.label, engine trtllm, memory.notes, performance, workload SLOs,
# recommendations.max_num_batched_tokens;
# 1.5: speculative, lora and offload sections (null when unused), memory.draft_weights_bytes,
#      memory.lora_bytes, workload.shared_prefix_tokens,
#      kv_cache.effective_max_concurrency_with_prefix (docs/features.md); gpu.local
# 1.6: multimodal section (null for text-only models), workload.images_per_request,
#      workload.prefix_hit_rate, performance.cached_tokens, offload backend "sglang-hicache"
# 1.7: performance.not_calibrated_because
# 1.8: performance.routed_experts (MoE models)
# 1.9: performance.routed_experts.public_check (the band of MoE models: docs/performance-moe.md)
# 1.10: performance.routed_experts.layer_floors (MoE / MLA kernel floors: perf/layer_floors.py)
# 1.11: performance.ttft_borrowed_from (an engine without TTFT measurements of its own)
# 1.12: performance.routed_experts.padding (rows a grouped GEMM computes beyond the routed ones)
# 1.13: performance.measured_check (never-fitted measured runs like the deployment: dense_checks)
# 1.14: traffic.unmet_intervals; an interval no replica count serves has replicas/gpus null, and
#       then the fleet figures (peak/mean/p95 GPUs, GPU-hours, cost per day) are null
# 1.15: served: the memory and KV cache the serve line starts with when it sets other
#       values; `kvplan calibrate --json`: notes (a run's failed requests and the like)
# 1.16: traffic.autoscaler.min_replicas_why (an idle interval keeps one copy); a disaggregated
#       sweep option's replicas_for_rate / cost_per_day_for_rate (replicas_simulated false);
#       `kvplan gpus --json`: k8s_node_labels

Source = Literal["cli", "file", "model-config", "engine-default", "gpu-spec", "kvplan-default"]

# The benchmark the closed-form performance figures describe (perf/step.py evaluate)
CLOSED_LOOP_HARNESS = ("closed loop of N clients, steady state (TTFT: the mean-value queue or, "
                       "if longer, a fitted share of the start-up burst's)")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Deferred(BaseModel):
    """A model whose field DEFERRED can be worked out when first needed (Deferred.deferred):
    read, serialized, compared, copied with it updated, pickled or printed. A sweep plans
    hundreds of deployments and reads few of their serve lines, fix-it listings, reasons or
    concurrency tables. The field keeps its place in the JSON."""

    DEFERRED: ClassVar[str]  # the field's name
    PLACEHOLDER: ClassVar[Any]  # a valid value to construct with before the field is dropped
    # The work of a pending instance, in a slot rather than a pydantic private attribute: the
    # slot is set only by `deferred` (and carried by copies), while a private attribute would be
    # initialised on every instance, twice per subclass (pydantic wraps model_post_init at each
    # level), about as long as validating a Problem's three fields.
    __slots__ = ("_work",)
    if TYPE_CHECKING:  # (not an annotation pydantic sees: it would make a private attribute)
        _work: Callable[[], Any] | None

    @classmethod
    def deferred(cls, work: Callable[[], Any], /, **values: Any) -> Self:
        """An instance whose DEFERRED field is `work()`, called when first needed."""
        obj = cls(**{cls.DEFERRED: cls.PLACEHOLDER}, **values)
        del obj.__dict__[cls.DEFERRED]
        object.__setattr__(obj, "_work", work)
        return obj

    @property
    def pending(self) -> bool:
        """Whether the deferred field is not worked out yet."""
        return self.DEFERRED not in self.__dict__

    def _filled(self) -> None:
        """Work the deferred field out in place, keeping the fields' order (the JSON's)."""
        d = self.__dict__
        work = getattr(self, "_work", None) if self.DEFERRED not in d else None
        if work is not None:
            d[self.DEFERRED] = work()
            ordered = {k: d[k] for k in type(self).model_fields if k in d}
            d.clear()
            d.update(ordered)
            object.__setattr__(self, "_work", None)

    if not TYPE_CHECKING:  # mypy: the field is declared on the subclass
        def __getattr__(self, name: str) -> Any:
            if name == type(self).DEFERRED:
                self._filled()
                return self.__dict__[name]
            return super().__getattr__(name)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        self._filled()
        return handler(self)

    def __copy__(self) -> Self:  # a pending copy keeps the work (model_copy copies so too)
        new = super().__copy__()
        object.__setattr__(new, "_work", getattr(self, "_work", None))
        return new

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        new = super().__deepcopy__(memo)
        object.__setattr__(new, "_work", getattr(self, "_work", None))
        return new

    def __getstate__(self) -> dict[Any, Any]:  # pickle the value, not the closure
        self._filled()
        return super().__getstate__()

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Self:
        """As BaseModel.model_copy; a copy that sets the deferred field gets it in its place."""
        if update and self.DEFERRED in update:
            self._filled()
        return super().model_copy(update=update, deep=deep)

    def __eq__(self, other: object) -> bool:  # pydantic compares __dict__: the value in both
        self._filled()
        if isinstance(other, Deferred):
            other._filled()
        return super().__eq__(other)

    def __repr_args__(self) -> Any:
        self._filled()
        return super().__repr_args__()

    def __iter__(self) -> Any:
        self._filled()
        return super().__iter__()


# --------------------------------------------------------------------------- GPU


class GpuTflops(_Frozen):
    """Dense vendor-peak TFLOP/s (no 2:4 sparsity); None where unsupported or unknown."""

    fp32: float | None = None
    tf32: float | None = None
    bf16: float | None = None
    fp16: float | None = None
    fp8: float | None = None
    int8: float | None = None
    fp4: float | None = None


class LocalUsage(_Frozen):
    """The GPU as NVML reported it on this machine when the plan was made (`--gpu local`)."""

    index: int
    nvml_name: str
    nvml_total_bytes: int
    used_bytes: int = Field(description="in use by other processes before the engine starts")
    free_bytes: int
    processes: int


class SystemShape(_Frozen):
    """One system a GPU ships in (a server, a rack-scale NVLink domain, a desktop box): how many
    GPUs one node holds, how many one scale-up fabric joins, and the network between nodes."""

    name: str = Field(description="the vendor's name for the system, e.g. 'HGX H100 8-GPU'")
    gpus_per_node: int = Field(ge=1, le=1024, description="GPUs one node (one OS image) holds")
    scale_up_domain: int = Field(
        ge=1, le=1024, description="GPUs one scale-up fabric joins (NVLink/NVSwitch, xGMI, or "
        "a node's PCIe for cards without one): tensor parallelism stays inside it")
    scale_up_link: str = Field(description="the fabric, e.g. 'NVLink 4 (NVSwitch)', 'PCIe 4'")
    scale_out_gbps_per_gpu: float | None = Field(
        None, gt=0, description="network between nodes per GPU, Gb/s (bits; e.g. one 400 Gb/s "
        "ConnectX-7 per GPU = 400); None = not sourced")
    max_nodes: int | None = Field(
        None, ge=1, description="most nodes the vendor supports joining (DGX Spark: 2); None = "
        "clusterable over the scale-out network")
    source: str = Field(description="datasheet or reference architecture (URL) for these figures")

    @property
    def max_gpus(self) -> int | None:
        """GPUs one deployment can span on this system; None = as many nodes as the network
        joins."""
        return None if self.max_nodes is None else self.max_nodes * self.gpus_per_node


class NodeLabel(_Frozen):
    """A Kubernetes node label a vendor's node labeller sets on the nodes of one GPU model."""

    key: str = Field(description="the label's key, e.g. amd.com/gpu.device-id")
    value: str = Field(description="its value on this GPU's nodes, e.g. 75a3")
    source: str = Field(description="where the labeller's value for this GPU is documented")


class GpuSpec(_Frozen):
    """One GPU model as the serving engine sees it. Bundled files live in gpu_specs/."""

    id: str = Field(description="kvplan id, e.g. h100-sxm-80gb")
    vendor: str
    segment: Literal["data-centre", "data-centre-export", "workstation", "desktop"] = Field(
        "data-centre", description="the vendor's product line, as its product page files the "
        "part (data-centre, workstation, GeForce or desktop AI system); data-centre-export: a "
        "part made for the China market under US export rules (H20, H800, A800; see each file's "
        "notes and sources). Fix-it suggestions name data-centre parts first")
    name: str = Field(description="marketing name")
    arch: str
    compute_capability: str | None = None
    memory_gb_marketing: float | None = Field(None, description="the datasheet's 'GB' number")
    memory_type: str | None = None
    smi_total_mib: int | None = Field(None, description="nvidia-smi memory.total, MiB")
    smi_total_source: str | None = None
    cuda_total_bytes: int | None = Field(
        None, gt=0, description="cudaMemGetInfo total = what vLLM reads as total_memory, bytes"
    )
    cuda_total_source: str = Field(description="where cuda_total_bytes comes from")
    cuda_total_estimated: bool = Field(
        description="True when cuda_total_bytes is smi total minus a typical driver reservation"
    )
    smi_names: list[str] = Field(default_factory=list, description="names nvidia-smi prints")
    aliases: list[str] = Field(default_factory=list)
    bandwidth_tbps: float | None = None
    tflops: GpuTflops = GpuTflops()
    nvlink_gbps_per_gpu: float | None = Field(None, description="GB/s; 0 = PCIe only")
    pcie_gen: int | None = None
    tdp_w: float | None = None
    fp8_native: bool = False
    fp4_native: bool = False
    bf16_native: bool = True
    release_year: int | None = None
    uncertain_fields: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    notes: str = ""
    local: LocalUsage | None = Field(None, description="set for --gpu local: this machine's GPU")
    k8s_node_labels: list[NodeLabel] = Field(
        default_factory=list, description="node labels that mark this GPU's Kubernetes nodes "
        "where they are not nvidia-smi's name (AMD's node labeller): --emit selects nodes by the "
        "first, `kvplan check` reads each")
    # --- nodes ---
    systems: list[SystemShape] = Field(
        default_factory=list, description="the systems the GPU ships in, each from a vendor "
        "datasheet or reference architecture; empty = unknown system shape (kvplan then "
        "constrains no layout by it and says so)")

    @property
    def device_name(self) -> str:
        """The name torch/vLLM report for the device (nvidia-smi's), else the marketing name."""
        return self.smi_names[0] if self.smi_names else self.name


# ------------------------------------------------------------------------- model


class Problem(Deferred):
    """Something the user should know. "error" and "warning" need action; "info" explains."""

    code: str
    severity: Literal["error", "warning", "info"]
    message: str
    # Problem.deferred(message, code=…, severity=…): a message worked out when first read or
    # serialized (a sweep plans hundreds of deployments and reads none of their fix-it listings)
    DEFERRED: ClassVar[str] = "message"
    PLACEHOLDER: ClassVar[Any] = ""


class CheckpointTensors(_Frozen):
    """The tensor table of a checkpoint's safetensors headers (no weight data)."""

    source: str = Field(
        description="where the headers were read, e.g. '4 local safetensors file(s)'")
    files: int = Field(ge=0)
    tensors: dict[str, tuple[str, tuple[int, ...]]] = Field(
        description="tensor name → (safetensors dtype, shape)")


class MoeSpec(_Frozen):
    num_experts: int = Field(gt=0)
    top_k: int = Field(gt=0)
    expert_intermediate_size: int = Field(gt=0)
    shared_expert_intermediate_size: int = Field(0, ge=0, description="0 = no shared expert")
    shared_expert_gate: bool = False
    moe_layers: list[int] = Field(description="indices of layers whose MLP is a MoE block")
    router_bias: bool = False
    expert_bias: bool = False
    score_correction_bias: bool = Field(False, description="DeepSeek-V3 e_score_correction_bias")
    router_dtype: str | None = Field(
        None, description="fixed dtype of the router weight (GLM-4.5, MiniMax-M2: float32); "
        "None = the model dtype")


class VisionSpec(_Frozen):
    """The vision tower of a multimodal model, enough to count its weights as vLLM builds them
    (kvplan/weights.py _vision_tensors names each kind's source file)."""

    kind: Literal["siglip", "llama4", "clip", "pixtral", "qwen2_vl", "qwen2_5_vl", "qwen3_vl",
                  "idefics3", "phi3v"]
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_layers: int = Field(gt=0, description="encoder layers vLLM builds (llava-style towers "
                            "stop at vision_feature_layer)")
    patch_size: int = Field(gt=0)
    image_size: int = Field(gt=0, description="side of the largest image vLLM profiles with")
    num_channels: int = 3
    text_hidden_size: int = Field(gt=0)
    projector_input_dim: int | None = None
    projector_output_dim: int | None = None
    output_dim: int | None = None
    pixel_shuffle_ratio: float | None = None
    config_num_layers: int | None = Field(None, description="encoder layers in vision_config "
                                          "when vLLM builds fewer")
    spatial_merge_size: int = Field(1, gt=0, description="patches merged per side before the "
                                    "LM (Qwen-VL, Pixtral, Idefics3 scale_factor)")
    temporal_patch_size: int = Field(1, gt=0, description="Qwen-VL Conv3d frames per patch")
    num_position_embeddings: int = Field(0, ge=0, description="Qwen3-VL learned position table")
    deepstack_mergers: int = Field(0, ge=0, description="Qwen3-VL deepstack_visual_indexes count")
    projector_bias: bool = True
    image_newline: bool = Field(False, description="LLaVA-NeXT's learned newline embedding")
    max_tokens_per_image: int | None = Field(
        None, gt=0, description="tokens one image of the largest default size occupies in the LM "
        "sequence (placeholder incl. separator tokens), as vLLM's processor counts it")
    num_crops: int = Field(0, ge=0, description="Phi-3-vision HD transform: the most 336-pixel "
                           "crops of one image (the processor adds one global crop); 0 = no crops")


class AudioEncoderSpec(_Frozen):
    """Whisper's audio encoder (vllm/model_executor/models/whisper.py WhisperEncoder): two
    Conv1d front-end layers, a position table of max_source_positions rows, encoder layers of
    hidden_size width and intermediate_size MLP, a final LayerNorm."""

    kind: Literal["whisper"] = "whisper"
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    num_mel_bins: int = Field(gt=0)
    max_source_positions: int = Field(gt=0, description="encoder output frames (1500 for 30 s)")


class MlaSpec(_Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): the cache holds one latent
    vector of kv_lora_rank + qk_rope_head_dim values per token per layer."""

    kv_lora_rank: int = Field(gt=0)
    qk_rope_head_dim: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)
    q_lora_rank: int | None = Field(None, description="None: q projected directly (V2-Lite)")


class LinearAttentionSpec(_Frozen):
    """Recurrent-state layers: Gated DeltaNet (Qwen3-Next), Mamba1 (Jamba), Mamba2 (Bamba).
    Fields a kind does not use stay 0."""

    kind: Literal["gated_deltanet", "mamba1", "mamba2"] = "gated_deltanet"
    conv_kernel: int = Field(gt=1)
    num_key_heads: int = Field(0, ge=0, description="GDN")
    num_value_heads: int = Field(0, ge=0, description="GDN")
    key_head_dim: int = Field(0, ge=0, description="GDN")
    value_head_dim: int = Field(0, ge=0, description="GDN")
    intermediate_size: int = Field(0, ge=0, description="Mamba: expand × hidden")
    state_size: int = Field(0, ge=0, description="Mamba: d_state")
    dt_rank: int = Field(0, ge=0, description="Mamba1")
    num_heads: int = Field(0, ge=0, description="Mamba2")
    head_dim: int = Field(0, ge=0, description="Mamba2")
    n_groups: int = Field(0, ge=0, description="Mamba2")
    conv_bias: bool = True
    in_proj_bias: bool = False
    ssm_dtype: str | None = Field(None, description="SSM state dtype; None = the conv state's")


MX_NATIVE_ARCHS = frozenset({"CDNA4"})  # QuantSpec.runs_fp4_on: vLLM's Quark MXFP4 natively


class QuantSpec(_Frozen):
    """Weight quantization of a checkpoint, as vLLM loads it."""

    method: Literal["fp8", "int8", "awq", "gptq", "w4a16", "nvfp4", "mxfp4"]
    weight_bits: int = 8
    block_size: tuple[int, int] | None = Field(None, description="block-wise scales, e.g. 128×128")
    per_channel: bool = False
    static_input_scale: bool = False
    group_size: int | None = Field(None, description="input elements per scale; None = per channel")
    zero_points: bool = Field(False, description="asymmetric: packed zero points stored")
    act_order: bool = Field(False, description="GPTQ desc_act: an int32 g_idx per input element")
    experts_only: bool = Field(False, description="MXFP4 (gpt-oss): only MoE experts quantized")
    ignore: list[str] = Field(default_factory=list,
                              description="module name patterns left unquantized")
    source: str = Field(description="'checkpoint' (quantization_config) or 'cli' (--quantization)")
    producer: str | None = Field(
        None, description="the tool that wrote the checkpoint, where engines load its format "
        "apart: 'modelopt' (NVIDIA ModelOpt: hf_quant_config.json or quant_method modelopt)")
    # --- whatif ---
    kv_cache_quant_algo: str | None = Field(
        None, description="the KV cache format the checkpoint declares (ModelOpt "
        "kv_cache_quant_algo / kv_cache_scheme, upper case, e.g. FP8); None = not declared")
    what_if: str | None = Field(
        None, description="the --quantization format a what-if plan sizes (the checkpoint a "
        "quantizer would write from an unquantized model, model/whatif.py); None = a real "
        "checkpoint or online fp8")

    def runs_fp4_on(self, gpu: GpuSpec) -> bool:
        """Whether the GPU runs this FP4 format's GEMMs in FP4 (else 16-bit after
        dequantization): NVFP4 and real MXFP4 checkpoints wherever the GPU has FP4 tensor
        cores; a what-if MXFP4 (AMD Quark) checkpoint only where vLLM's Quark path has MX
        support (vllm/platforms/rocm.py supports_mx: gfx950, CDNA4). Elsewhere its
        QuarkOCP_MX / QuarkW4A4MXFP4 schemes emulate (`self.emulate = not
        current_platform.supports_mx()`: weights dequantized, the linear in 16-bit)."""
        if self.method not in ("nvfp4", "mxfp4") or not gpu.fp4_native:
            return False
        return not (self.what_if == "mxfp4" and gpu.arch not in MX_NATIVE_ARCHS)

    def __hash__(self) -> int:  # frozen, but `ignore` is a list: hashed as a tuple
        return hash(tuple(tuple(v) if isinstance(v, list) else v for v in self.__dict__.values()))

    @classmethod
    def from_modelopt(cls, algo: object, ignore: list[str], *, source: str,
                      kv_algo: str | None = None) -> QuantSpec | None:
        """NVIDIA ModelOpt's quant_algo, as its hf_quant_config.json names it (model/quant.py)
        or TensorRT-LLM's build applies it (engines/trtllm.py): FP8 (per-tensor weight scales,
        static input scales) or NVFP4 (e2m1 + an fp8 scale per 16); None for any other."""
        name = str(algo or "").upper()
        if name == "FP8":
            return cls(method="fp8", static_input_scale=True, ignore=ignore, source=source,
                       kv_cache_quant_algo=kv_algo, producer="modelopt")
        if name == "NVFP4":
            return cls(method="nvfp4", weight_bits=4, group_size=16, ignore=ignore,
                       source=source, kv_cache_quant_algo=kv_algo, producer="modelopt")
        return None


class ModelSpec(_Frozen):
    """A model, normalised from its HF config. Every family quirk is resolved in hf_config.py."""

    id: str
    model_type: str
    architectures: list[str] = Field(default_factory=list)
    num_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    intermediate_size: int = Field(ge=0, description="dense MLP width (0 if every layer is MoE)")
    tie_word_embeddings: bool
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    norm_bias: bool = Field(False, description="LayerNorm with a bias (Phi) instead of RMSNorm")
    lm_head_bias: bool = Field(False, description="the LM head has a bias (Phi)")
    attention_sinks: bool = Field(False, description="gpt-oss: one learned sink per head")
    gated_attention: bool = Field(False, description="Qwen3-Next: q_proj also emits a gate")
    moe: MoeSpec | None = None
    layer_types: list[Literal["full", "sliding", "chunked", "linear", "none"]] = Field(
        default_factory=list,
        description="token mixer per layer ('none' = an MLP-only block); empty = full everywhere")
    mlp_layers: list[int] | None = Field(
        None, description="layers that have an MLP block; None = every layer (Nemotron-H: '-')")
    mlp_gated: bool = Field(True, description="gate_up (SwiGLU) MLP; False = up/down (relu²)")
    sliding_window: int | None = Field(None, gt=0, description="tokens, for 'sliding' layers")
    attention_chunk_size: int | None = Field(None, gt=0, description="tokens, for 'chunked' layers")
    mla: MlaSpec | None = None
    audio_encoder: AudioEncoderSpec | None = Field(
        None, description="encoder-decoder speech models (Whisper): the audio encoder")
    cross_attention_tokens: int = Field(
        0, ge=0, description="encoder-decoder models: encoder positions every decoder layer's "
        "cross-attention caches per request (Whisper: max_source_positions); 0 = none")
    embedding_replicated: bool = Field(
        False, description="the token embedding is a plain nn.Embedding, whole on every TP rank "
        "(Whisper's decoder), not a vocab-parallel one")
    mla_projections: MlaSpec | None = Field(
        None, description="MiniCPM3: MLA-shaped projections whose cache is ordinary per-head K "
        "and V of head_dim each (mla stays None: the KV, the backends and the block size are "
        "those of plain attention)")
    linear_attention: LinearAttentionSpec | None = None
    vision: VisionSpec | None = None
    dtype: str = Field(description="checkpoint dtype from the config (torch_dtype / dtype)")
    max_position_embeddings: int | None = None
    max_len_keys: dict[str, int] = Field(
        default_factory=dict, description="length keys present in the config (vLLM reads these)"
    )
    rope_type: str | None = Field(None, description="rope_scaling type, None = unscaled")
    rope_factor: float | None = None
    rope_original_max_position: int | None = None
    rotary_dim: int = Field(ge=0, description="RoPE dims per head; 0 = no RoPE")
    rope_cache_positions: int = Field(ge=0, description="rows of vLLM's cos/sin cache buffer")
    quantization: QuantSpec | None = None
    unsupported: list[str] = Field(
        default_factory=list,
        description="layout features seen in the config that kvplan does not model yet",
    )
    unmodelled_quantization: str | None = Field(
        None, description="a quantization_config kvplan cannot size from the config alone")
    layout_assumed: str | None = Field(
        None, description="a model_type kvplan does not model layer by layer: its weights come "
        "from the safetensors headers when present, else from an assumed Llama-style layout")
    checkpoint: CheckpointTensors | None = None
    weights_from: Literal["config", "headers"] = "config"
    header_parameters: int | None = Field(
        None, description="parameters the safetensors headers hold (packed payloads unpacked)")
    problems: list[Problem] = Field(default_factory=list,
                                    description="notes from loading the model")
    source: str = Field(description="catalogue, local path, …")
    local_dir: str | None = Field(
        None, description="the local model directory a launcher needs (None: serve by id)")
    unmodelled_quantization_method: str | None = Field(
        None, description="the method name of an unmodelled quantization_config, e.g. awq")
    revision: str | None = Field(None, description="Hub revision asked for (None = default branch)")
    mtp_layers: int = Field(
        0, ge=0, description="multi-token-prediction layers shipped with the model "
        "(num_nextn_predict_layers, e.g. 1 for DeepSeek-V3); used only by MTP speculative decoding")
    draft_vocab_size: int | None = Field(
        None, gt=0, description="EAGLE-3 heads: the draft LM head's reduced vocabulary")
    # decoder families (fam-a)
    position_embedding_rows: int = Field(
        0, ge=0, description="learned absolute position embeddings (GPT-2: n_positions; OPT: "
        "max_position_embeddings + 2), replicated on every TP rank; 0 = none")
    embedding_norm: bool = Field(False, description="Bloom: a LayerNorm right after the embedding")
    word_embed_proj_dim: int | None = Field(
        None, gt=0, description="OPT: embedding width when it differs from hidden_size "
        "(replicated project_in / project_out linears)")
    final_norm: bool = Field(True, description="False: no final norm (OPT-350m, post-LN)")
    alibi: bool = Field(False, description="ALiBi attention biases instead of RoPE (no cos/sin "
                        "cache)")
    # llama-variant families (fam-b)
    norm_weights: bool = Field(
        True, description="False: non-parametric LayerNorms (OLMo-1), no norm tensors at all")
    qk_norm_layout: Literal["shared", "per_head", "full_width", "full_width_tp"] = Field(
        "shared", description="q/k norm weights: 'shared' one head_dim vector (Qwen3); 'per_head' "
        "[heads, head_dim] split by heads over TP (Command-R+); 'full_width' over heads·head_dim, "
        "replicated on every TP rank (OLMo-2); 'full_width_tp' over heads·head_dim, split over "
        "TP ranks (MiniMax-M2)")


_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def per_object(maxsize: int) -> Callable[[_Fn], _Fn]:
    """Memoise a pure function of a frozen object (its first argument: a ModelSpec, a GpuSpec,
    a registry engine) and other arguments, per object: a ModelSpec is frozen but not hashable
    (it holds lists), so entries are keyed on the object's id and keep the object, which a hit
    must be (an id reused by a new object never hits; an equal new object starts cold).
    Keyword arguments are keyed on their names and order; an unhashable argument (a QuantSpec
    holds a list) on its JSON. The table is cleared when it holds `maxsize` entries;
    `fn.cache_clear()` clears it."""
    def decorate(fn: _Fn) -> _Fn:
        table: dict[tuple, tuple[Any, Any]] = {}

        @functools.wraps(fn)
        def memoised(m: Any, *args: Any, **kwargs: Any) -> Any:
            # the keyword names, then their values, flat: n names and n values, so the key's
            # length fixes n and no two calls share a key (cheaper than a tuple per keyword)
            key = (id(m), args, *kwargs, *kwargs.values())
            try:
                hit = table.get(key)
            except TypeError:
                key = (id(m), tuple(map(_hashable, args)), *kwargs,
                       *map(_hashable, kwargs.values()))
                hit = table.get(key)
            if hit is not None and hit[0] is m:
                return hit[1]
            if len(table) >= maxsize:
                table.clear()
            out = fn(m, *args, **kwargs)
            table[key] = (m, out)
            return out

        memoised.cache_clear = table.clear  # type: ignore[attr-defined]
        return memoised  # type: ignore[return-value]
    return decorate


def _hashable(v: Any) -> Any:
    return v.model_dump_json() if isinstance(v, BaseModel) else v


# -------------------------------------------------------------------- deployment

SpecMethod = Literal["eagle", "eagle3", "mtp", "ngram", "draft_model"]


class SpeculativeConfig(BaseModel):
    """vLLM's --speculative-config JSON, the fields that move memory (vllm/config/speculative.py).
    Other keys vLLM takes (prompt_lookup_max, draft_tensor_parallel_size, …) are accepted and
    ignored. `draft` is the resolved draft model (set by kvplan.api, never serialised)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    method: SpecMethod
    model: str | None = Field(None, description="the draft model / EAGLE head (not for mtp, ngram)")
    num_speculative_tokens: int | None = Field(None, ge=1, le=64)
    # SGLang's tree shape (--speculative-eagle-topk, --speculative-num-draft-tokens); vLLM has
    # no such keys. num_speculative_tokens is SGLang's --speculative-num-steps.
    eagle_topk: int | None = Field(None, ge=1, le=64, description="SGLang: branches per draft step")
    num_draft_tokens: int | None = Field(None, ge=1, le=1024,
                                         description="SGLang: tokens verified per step")
    # TensorRT-LLM's EagleDecodingConfig.eagle3_one_model (llmapi/llm_args.py, default True): the
    # EAGLE-3 head runs inside the target's engine and its layer joins the target's KV manager;
    # False = a second (draft) engine with its own KV manager. vLLM and SGLang ignore it.
    eagle3_one_model: bool | None = Field(None, description="TensorRT-LLM: EAGLE-3 in the target's "
                                          "engine (default true)")
    draft: ModelSpec | None = Field(None, exclude=True)
    given: dict[str, Any] = Field(default_factory=dict, exclude=True,
                                  description="the JSON as the user wrote it (for the serve line)")

    @model_validator(mode="before")
    @classmethod
    def _method(cls, data: Any) -> Any:
        """vLLM's method inference (vllm/config/speculative.py SpeculativeConfig.__post_init__,
        main-branch snapshots in the code index): no method and no model → the target's own MTP
        layers; the model "[ngram]" → ngram; a draft named "…eagle-…" → eagle, "…eagle3…" →
        eagle3; otherwise draft_model (vLLM also detects MTP, Medusa and MLP speculators from
        the draft's model_type — a draft that is the target itself is treated as MTP by the
        engine); "<family>_mtp" methods (deepseek_mtp, qwen3_next_mtp, …) are MTP."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        data.setdefault("given", {k: v for k, v in data.items() if k not in ("draft", "given")})
        method = data.get("method")
        model = data.get("model")
        if method is None and model is None:
            method = "mtp"
        elif method is None and isinstance(model, str):
            low = model.lower()
            method = ("ngram" if low in {"[ngram]", "ngram"} else "eagle" if "eagle-" in low
                      else "eagle3" if "eagle3" in low else "draft_model")
        if isinstance(method, str) and (method == "mtp" or method.endswith("_mtp")):
            method = "mtp"
        if method is not None:
            data["method"] = method
        return data




class EngineOptions(_Frozen):
    """The resolved settings only one engine has: each engine module subclasses it with its own
    (vLLM's KV offloading, SGLang's HiCache, …); the base, with none, serves engines without."""


class Deployment(_Frozen):
    """Resolved engine settings: the ones engines share, under their generic (vLLM) names (each
    engine maps them to its own flags), plus the engine's own options type. `sources` says
    where each value came from."""

    engine: str = DEFAULT_ENGINE
    engine_version: str
    era: str = Field("", description="the engine's modelled accounting era for this version")
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    data_parallel_size: int = Field(1, ge=1)
    dtype: str
    kv_cache_dtype: str
    quantization: str | None = None
    quant: QuantSpec | None = Field(None, exclude=True, description="the weight format sized")
    max_model_len: int | None = Field(
        None, gt=0, description="None: the engine decides it at start-up (TGI 3.x)")
    max_num_seqs: int = Field(gt=0)
    max_num_batched_tokens: int = Field(gt=0)
    max_input_tokens: int | None = Field(None, gt=0)
    max_total_tokens: int | None = Field(None, gt=0)
    gpu_memory_utilization: float = Field(gt=0, le=1)
    block_size: int = Field(gt=0)
    enforce_eager: bool = False
    kv_cache_memory_bytes: int | None = Field(None, gt=0)
    gpu_total_bytes: int = Field(gt=0)
    enable_prefix_caching: bool = True
    hybrid_kv_cache_manager: bool = True
    enable_expert_parallel: bool = False
    other_processes_bytes: int = Field(
        0, ge=0, description="memory other processes hold on the GPU (--gpu local), bytes")
    speculative_config: SpeculativeConfig | None = None
    enable_lora: bool = False
    max_loras: int = Field(1, ge=1)
    max_lora_rank: int = Field(16, ge=1)
    max_cpu_loras: int | None = Field(None, ge=1)
    lora_target_modules: list[str] | None = Field(
        None, description="LoRA target modules: SGLang's normalized (qkv_proj, o_proj, "
        "gate_up_proj, down_proj, embed_tokens, lm_head), TensorRT-LLM's as given (attn_q, …); "
        "None = not given")
    # --- expert ---
    enable_dp_attention: bool = Field(
        False, description="attention data-parallel over data_parallel_size ranks; MoE layers "
        "span tensor × data parallel GPUs (docs/expert-parallel.md)")
    num_redundant_experts: int = Field(0, ge=0, description="EPLB redundant expert slots")
    moe_a2a_backend: str | None = Field(None, description="SGLang --moe-a2a-backend")
    options: SerializeAsAny[EngineOptions] = Field(
        default_factory=EngineOptions,
        description="the settings only this engine has, resolved (its own options type)")
    sources: dict[str, Source]

    def user_set(self, knob: str) -> bool:
        """Whether the user gave `knob` (flag, file or API argument: source "cli") rather than
        leaving it to the engine's or kvplan's default."""
        return self.sources.get(knob) == "cli"


class Workload(_Frozen):
    """What the deployment must serve: closed-loop concurrency, request lengths, latency SLOs."""

    target_concurrency: int | None = Field(None, gt=0, le=1 << 20)
    avg_input_tokens: int | None = Field(None, gt=0, le=1 << 24)
    avg_output_tokens: int | None = Field(None, gt=0, le=1 << 24)
    slo_ttft_ms: float | None = Field(None, gt=0, le=3_600_000, description="time to first token")
    slo_tpot_ms: float | None = Field(None, gt=0, le=60_000, description="time per output token")
    shared_prefix_tokens: int | None = Field(
        None, gt=0, le=1 << 24, description="tokens every request shares at its start (system "
        "prompt): with prefix caching their full blocks are stored once")
    prefix_hit_rate: float | None = Field(
        None, gt=0, le=1, description="fraction of each prompt found in the prefix cache, "
        "read as a shared prefix of hit rate × avg_input_tokens (needs avg_input_tokens)")
    images_per_request: int | None = Field(
        None, ge=0, le=1 << 10, description="images each request carries (a VLM): each adds the "
        "model's max_tokens_per_image to the request's KV length")
    acceptance_rate: float | None = Field(
        None, ge=0, le=1, description="speculative decoding: probability each draft token is "
        "accepted (vLLM logs 'Draft acceptance rate'); latency only")
    # --- traffic ---
    request_rate: float | None = Field(
        None, gt=0, le=1_000_000, description="requests per second (open loop): replicas and "
        "percentiles from the scheduler simulation")
    burstiness: float | None = Field(
        None, gt=0, le=1000, description="gamma shape of the inter-arrival gaps (vllm bench "
        "serve --burstiness); 1 = Poisson")
    slo_percentile: int | None = Field(
        None, ge=50, le=99, description="percentile the SLOs apply to (50, 90 or 99)")
    random_range_ratio: float | None = Field(
        None, ge=0, le=0.99, description="request lengths uniform in [L(1 − r), L(1 + r)] "
        "(the benchmarks' random dataset)")

    @model_validator(mode="after")
    def _traffic(self) -> Workload:
        if self.slo_percentile is not None and self.slo_percentile not in (50, 90, 99):
            raise ValueError(f"--slo-percentile {self.slo_percentile}: use 50, 90 or 99")
        if self.burstiness is not None and self.request_rate is None:
            raise ValueError("--burstiness shapes the arrivals of a rate: pass --request-rate")
        return self

    def simulated(self) -> bool:
        """A rate, a percentile or a length spread was asked: run the scheduler simulation."""
        return any(v is not None for v in (self.request_rate, self.slo_percentile,
                                           self.random_range_ratio))

    @model_validator(mode="after")
    def _one_prefix(self) -> Workload:
        if self.prefix_hit_rate is not None and self.shared_prefix_tokens is not None:
            raise ValueError("give --shared-prefix-tokens or --prefix-hit-rate, not both")
        if self.prefix_hit_rate is not None and self.avg_input_tokens is None:
            raise ValueError("--prefix-hit-rate is a fraction of the prompt: pass "
                             "--avg-input-tokens too")
        if self.prefix_hit_rate is not None and self.prefix_tokens() is None:
            raise ValueError(f"--prefix-hit-rate {self.prefix_hit_rate:g} of "
                             f"{self.avg_input_tokens} input tokens is less than one token")
        return self

    def prefix_tokens(self) -> int | None:
        """Tokens every request shares at its start: given, or hit rate × input (floor)."""
        if self.prefix_hit_rate is not None and self.avg_input_tokens is not None:
            return int(self.prefix_hit_rate * self.avg_input_tokens) or None
        return self.shared_prefix_tokens

    def sizes_batch(self) -> bool:
        """A target, request lengths or latency targets were given (they size --max-num-seqs
        in launch lines); a shared prefix alone does not."""
        return any(v is not None for v in (self.target_concurrency, self.avg_input_tokens,
                                           self.avg_output_tokens, self.slo_ttft_ms,
                                           self.slo_tpot_ms))


# -------------------------------------------------------------------------- plan


class SourcedValue(BaseModel):
    # frozen: the planner hands one object to every plan with the same value and source
    model_config = ConfigDict(frozen=True)

    value: int | float | str | bool | None
    source: Source


class PlanModel(BaseModel):
    id: str
    source: str
    parameters: int = Field(description="total parameters (unpadded): from the config, or from "
                            "the safetensors headers when model.weights_from is 'headers'")
    weights_from: Literal["config", "headers"] = Field(
        description="'headers': weight bytes from the checkpoint's safetensors headers")
    dtype: str
    quantization: str | None


class PlanGpu(BaseModel):
    id: str
    name: str
    count: int = Field(description="GPUs in the deployment = TP × PP × DP")
    total_bytes_estimated: bool


class PlanEngine(BaseModel):
    name: str = Field(description="registry name: vllm, sglang, tgi or trtllm")
    label: str = Field("", description="display name, e.g. vLLM")
    version: str
    era: str = Field(description="the modelled accounting era used for this version")
    knobs: dict[str, str] = Field(
        default_factory=dict,
        description="the engine's flag for each generic input/recommendation name, e.g. "
        "gpu_memory_utilization → --mem-fraction-static on SGLang")

    def knob(self, name: str) -> str:
        """The engine's own name for a generic knob: mem_fraction_static on SGLang."""
        flag = self.knobs.get(name)
        return flag.removeprefix("--").replace("-", "_") if flag else name


class StageBreakdown(BaseModel):
    """One pipeline stage's worker (every TP rank of a stage is identical), integer bytes.
    Frozen: alike stages share one instance."""

    model_config = ConfigDict(frozen=True)

    layers: int
    weights_bytes: int
    weights_tensor_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_cache_bytes: int
    num_blocks: int
    # the stage's own block size in bytes: picks the worst stage; not in the plan's JSON
    bytes_per_block: SkipJsonSchema[int] = Field(0, exclude=True)


class MemoryBreakdown(BaseModel):
    """Per-GPU memory, integer bytes, for the most constrained worker (PP stage)."""

    total_bytes: int = Field(description="device total as cudaMemGetInfo reports it")
    budget_bytes: int = Field(description="ceil(total × gpu_memory_utilization)")
    weights_bytes: int = Field(
        description="weights and RoPE cache as the engine measures them through PyTorch's caching "
        "allocator: allocated blocks (vLLM) or reserved segments (SGLang, TGI)")
    weights_tensor_bytes: int = Field(
        description="the same tensors' own bytes; weights_bytes minus this is allocator rounding")
    activation_bytes: int = Field(description="profile-run activation peak (estimate)")
    non_torch_bytes: int = Field(description="non-torch growth during start-up (estimate)")
    cudagraph_bytes: int = Field(
        description="CUDA-graph memory (estimate); subtracted from the budget only when "
        "cudagraph_in_budget is true"
    )
    cudagraph_in_budget: bool
    kv_cache_bytes: int = Field(
        ge=0, description="memory the engine gives to the KV cache (0 when nothing is left)")
    kv_shortfall_bytes: int = Field(
        0, ge=0, description="by how much the budget falls short of any KV cache, per GPU (0 when "
        "there is one): the engine does not start")
    estimated: list[str] = Field(description="which fields are estimates rather than exact")
    draft_weights_bytes: int = Field(
        0, description="speculative decoding: the draft's weights, part of weights_bytes")
    lora_bytes: int = Field(
        0, description="LoRA: the preallocated adapter slots, part of weights_bytes")
    notes: dict[str, str] = Field(
        default_factory=dict, description="what each line means for this engine: budget, "
        "activation, non_torch, cudagraph (absent: no separate line), kv, kv_tokens_label")
    stages: list[StageBreakdown] = Field(description="per pipeline stage (one entry when PP = 1)")


class KvCache(BaseModel):
    bytes_per_token: int = Field(description="KV bytes per token on one GPU (worst stage)")
    bytes_per_block: int
    bytes_per_request: int = Field(description="KV memory one max_model_len request needs")
    block_size: int
    num_blocks: int = Field(description="blocks per GPU, minimum over workers (incl. null block)")
    tokens: int = Field(description="'GPU KV cache size: N tokens' as the engine version prints it")
    max_concurrency: float = Field(description="'Maximum concurrency for L tokens per request'")
    max_model_len_fit: int = Field(
        description="largest max_model_len (≤ the model's own limit) at which one request fits; "
        "vLLM's 'estimated maximum model length' when the configured one does not fit"
    )
    effective_max_concurrency_with_prefix: float | None = Field(
        None, description="max_concurrency when every request shares workload.shared_prefix_tokens "
        "and prefix caching stores their full blocks once: (num_blocks − s) / (blocks per request "
        "− s), s = shared_prefix_tokens // block_size; null without a shared prefix")

    # --- memgap ---
    @property
    def pool_tokens(self) -> int:
        """Token positions the block pool holds: num_blocks × block_size (not serialised).
        Equals `tokens` for a model with one KV group. For a hybrid (sliding-window) model
        vLLM ≤0.20 prints one group's share, (num_blocks // groups) × block size
        (vllm/v1/core/kv_cache_utils.py _report_kv_cache_config, 0.11.0), but every group
        draws its blocks from this one pool and a sliding-window layer keeps only the window's
        blocks, so one long request's full-attention layers can hold nearly all of it
        (gpt-oss-120b, one H100, vLLM 0.10.2 at --max-model-len 32768: 3,806 blocks of 16 →
        60,896 here, 30,448 printed). The latency model's KV capacity (planner/performance.py
        context: usable blocks × block size) counts this pool."""
        return self.num_blocks * self.block_size


class Recommendation(BaseModel):
    value: int | float | None
    reason: str


class Recommendations(BaseModel):
    max_model_len: Recommendation
    max_num_seqs: Recommendation
    gpu_memory_utilization: Recommendation
    tensor_parallel_size: Recommendation
    max_num_batched_tokens: Recommendation | None = Field(
        None, description="with latency SLOs: the prefill chunk that trades TTFT against TPOT")


def price_provider(source: str) -> str | None:
    """The provider and tier a price's source names in parentheses after its URL
    ("https://www.crusoe.ai/cloud/pricing (Crusoe Cloud on-demand)" → "Crusoe Cloud on-demand",
    as gpu_specs/prices.csv writes them); None when it names none."""
    m = re.match(r"https?://\S+\s*\((.+)\)$", source.strip())
    return m.group(1) if m else None


class Price(BaseModel):
    """What one GPU costs per hour, and where that number comes from."""

    gpu_id: str
    usd_per_hour: float = Field(gt=0)
    source: str = Field(description="URL or file:line the price was read from")
    date: str | None = None
    default: bool = Field(description="True: kvplan's bundled default, not the user's price")

    @property
    def provider(self) -> str:
        """Who sells at this price (price_provider), else the source itself."""
        return price_provider(self.source) or self.source


class PerfPoint(BaseModel):
    """Predicted serving figures of one replica at one closed-loop concurrency."""

    concurrency: int
    running: int = Field(description="sequences the engine runs at once (KV cache, max_num_seqs)")
    ttft_ms: float
    ttft_ms_low: float
    ttft_ms_high: float
    tpot_ms: float = Field(description="(e2e − TTFT) / (output tokens − 1)")
    tpot_ms_low: float
    tpot_ms_high: float
    e2e_ms: float
    output_tokens_per_s: float = Field(description="per replica")
    output_tokens_per_s_low: float
    output_tokens_per_s_high: float
    output_tokens_per_s_per_gpu: float
    requests_per_s: float
    decode_bound: str = Field(description="the largest term of a decode step: compute, "
                              "bandwidth or overhead")
    saturated: bool = Field(description="prefill-bound: the token budget, not concurrency, "
                            "sets throughput")


class RoutedExperts(BaseModel):
    """The rate a MoE model's routed experts run at in the latency model (perf/moe_gemm.py)."""

    rate: Literal["measured", "dense"] = Field(description="measured: the fused-MoE kernel's "
                                               "measured share of the dense rate; dense: the "
                                               "dense GEMM rate (extrapolated)")
    table: str | None = Field(description="the measured table's engine release and layout, "
                              "e.g. 'vLLM 0.14.0, EP 8'; null at the dense rate")
    source: str = Field(description="where the table is, or why there is none")
    public_check: str | None = Field(
        None, description="what public MoE measurements say of kvplan's figures on this GPU "
        "class (docs/performance-moe.md): no MoE model is in the fit, so the band is widened "
        "to their measured / predicted spread; null when there are none")
    layer_floors: str | None = Field(
        None, description="the MoE and MLA layers' measured kernel floors beyond a dense "
        "layer's that the step time adds (kvplan/perf/layer_floors.py) and where they were "
        "measured; null for an engine without kernel tables")
    padding: str | None = Field(
        None, description="rows the experts' grouped GEMM computes beyond the routed tokens' "
        "(vLLM's DeepGEMM experts: blocks of a buffer sized for every expert, "
        "docs/moe-gemm.md); null when it computes the routed rows only")


class Performance(PerfPoint, Deferred):
    """The latency model at the workload's concurrency (kvplan/perf/step.py), with cost."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int = Field(0, description="prompt tokens per request served by the prefix "
                               "cache (the shared prefix's full blocks): prefill skips them")
    workload_source: Literal["cli", "kvplan-default"] = Field(
        description="kvplan-default: no --avg-input-tokens/--avg-output-tokens were given")
    calibrated: bool = Field(description="this GPU family × engine has calibration data")
    not_calibrated_because: str | None = Field(
        None, description="why the figures are not calibrated, each reason apart (the engine "
        "version outside the fitted releases, a GPU family without calibration rows, a fit "
        "borrowed from another engine); null when calibrated")
    model_version: str = Field(description="which fit the coefficients come from")
    ttft_borrowed_from: str | None = Field(
        None, description="the engine whose TTFT terms (per-request front-end cost, start-up "
        "burst share) the figures use, this engine having no TTFT measurements; null: its own")
    measured_check: str | None = Field(
        None, description="measured runs of this engine, GPU class, GEMM dtype and model "
        "architecture that were kept out of the fit because they contradict it, and how far "
        "(the band spans them: docs/performance.md); null: none")
    gpu_hour_price: float | None = Field(None, description="USD per GPU-hour")
    price_source: str | None = None
    cost_per_hour: float | None = Field(None, description="USD per hour for the replica's GPUs")
    cost_per_million_output_tokens: float | None = None
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    meets_slo: bool | None = Field(None, description="None: no SLO given")
    acceptance_rate: float | None = Field(
        None, description="speculative decoding: per-draft-token acceptance the figures assume")
    acceptance_rate_source: str | None = None
    tokens_per_step: float | None = Field(
        None, description="speculative decoding: expected tokens per sequence per decode step, "
        "(1 − α^(k+1)) / (1 − α)")
    break_even_acceptance_rate: float | None = Field(
        None, description="speculative decoding: the acceptance rate above which it lowers TPOT "
        "at this concurrency (null: it never does, or always does)")
    # --- calibrate --- (before by_concurrency: the table stays the last field)
    calibration: str | None = Field(
        None, description="where the latency coefficients come from: a user calibration file "
        "(kvplan calibrate, --calibration), the bundled fit, or the bundled fit extrapolated to "
        "another engine, version or GPU architecture")
    routed_experts: RoutedExperts | None = Field(
        None, description="a MoE model's routed experts: at a measured fused-MoE kernel rate "
        "(docs/moe-gemm.md) or at the dense GEMM rate, extrapolated; null for a dense model")
    # --- nodes ---
    links: str | None = Field(None, description="the links the figures assume: TP all-reduce "
                              "over NVLink/PCIe or the scale-out network, pipeline hand-offs "
                              "between nodes (docs/nodes.md); null for one GPU")
    # --- traffic ---
    harness: str = Field(CLOSED_LOOP_HARNESS, description=(
        "the arrival process the figures assume: the closed-loop figures above come from the "
        "mean-value model; percentiles and replicas from the scheduler simulation"))
    lengths: str | None = Field(None, description="the length distribution simulated")
    slo_percentile: int | None = None
    percentiles: dict[str, dict[str, float]] | None = Field(
        None, description="{ttft_ms|tpot_ms|itl_ms|e2e_ms: {p50, p90, p99, mean}} from the "
        "scheduler simulation under `harness`")
    meets_slo_at_percentile: bool | None = None
    preemptions: int | None = Field(None, description="preemptions (vLLM) / retractions "
                                    "(SGLang) in the simulated run")
    request_rate: float | None = None
    replicas: int | None = Field(None, description="replicas of this layout that hold "
                                 "request_rate within the SLOs at slo_percentile")
    load_per_replica_rps: float | None = None
    capacity_rps_per_replica: float | None = Field(
        None, description="requests/s one replica serves at the largest batch it runs")
    headroom: float | None = Field(None, description="1 − load / capacity, per replica")
    gpus_for_rate: int | None = None
    cost_per_day: float | None = Field(None, description="USD per day for the replicas' GPUs")
    by_concurrency: list[PerfPoint] = Field(
        default_factory=list, description="the same figures at 1, 2, 4, … up to the KV bound")
    # Performance.deferred(table, …): by_concurrency computed on first read or serialization,
    # not per plan (a sweep plans hundreds of deployments and reads none of their tables)
    DEFERRED: ClassVar[str] = "by_concurrency"
    PLACEHOLDER: ClassVar[Any] = []


class PlanSpeculative(BaseModel):
    """Speculative decoding as the engine allocates it (docs/features.md)."""

    method: str
    draft_model: str | None = Field(description="draft / head id; null for mtp and ngram")
    num_speculative_tokens: int
    draft_layers: int = Field(description="decoder layers the draft runs (each holds a KV cache)")
    draft_weights_bytes: int = Field(description="per GPU (last PP stage), in memory.weights_bytes")
    draft_kv_bytes_per_token: int = Field(description="per GPU, part of kv_cache.bytes_per_token")
    sampler_rows_factor: int = Field(description="profile-run sampler rows per request (rejection "
                                     "sampler: target + bonus rows); 1 where the engine has no "
                                     "profile run (SGLang)")
    eagle_topk: int | None = Field(None, description="SGLang: branches per draft step")
    num_draft_tokens: int | None = Field(None, description="SGLang: tokens verified per step")
    draft_pool_tokens: int | None = Field(
        None, description="SGLang: tokens in the draft's own KV pool (the target's count from "
        "0.5.3; before, the target's plus a headroom, outside mem_fraction_static)")


class PlanLora(BaseModel):
    """LoRA slots preallocated on every GPU (docs/features.md)."""

    max_loras: int
    max_lora_rank: int
    max_cpu_loras: int
    gpu_bytes: int = Field(
        description="per GPU (worst stage): stacked A/B buffers, in weights_bytes")
    adapter_bytes: int = Field(description="one adapter at max_lora_rank, unsharded (host copy)")
    host_bytes_per_worker: int = Field(description="max_cpu_loras × adapter_bytes (upper bound)")
    modules: list[str] = Field(description="modules given LoRA slots")


class PlanOffload(BaseModel):
    """KV-cache offloading to host memory (docs/features.md): vLLM's native/LMCache offloading
    or SGLang's hierarchical cache (backend "sglang-hicache")."""

    backend: str
    host_bytes: int = Field(description="pinned host memory for the whole deployment (all GPUs "
                            "of all DP replicas)")
    host_bytes_per_worker: int = Field(description="pinned host memory per GPU worker")
    cpu_blocks: int = Field(description="offloaded blocks per worker (GPU block layout)")
    cpu_tokens: int = Field(description="tokens the host tier stores (cpu_blocks × block_size)")
    effective_cached_tokens: int = Field(
        description="GPU KV tokens + cpu_tokens: prefix-cache capacity; running requests still "
        "need GPU blocks, so max_concurrency is unchanged")


class PlanMultimodal(BaseModel):
    """A vision-language model's image budget as vLLM profiles it (docs/features.md)."""

    modality: str = Field(description="the modality profiled (the one with the most tokens)")
    limit_per_prompt: int = Field(description="items per prompt vLLM accepts (0: encoder off)")
    limit_source: Source
    max_tokens_per_item: int = Field(description="LM-sequence tokens of one largest item")
    embeds_per_item: int = Field(description="encoder output rows of one largest item")
    encoder_budget_tokens: int = Field(
        description="min(encoder compute budget, encoder cache size) = max(max_num_batched_tokens, "
        "max_tokens_per_item); 0 when the modality is disabled")
    profile_items: int = Field(description="dummy items the profile run encodes")
    profile_bytes: int = Field(description="per GPU: encoder outputs and pixel inputs held "
                               "through the profile's forward pass, in memory.activation_bytes")
    images_per_request: int = Field(description="the workload's images per request (assumed)")
    image_tokens_per_request: int = Field(description="images_per_request × max_tokens_per_item")
    request_tokens: int | None = Field(
        None, description="text (avg input + output, when given) + image tokens of one request")
    max_concurrency_with_images: float | None = Field(
        None, description="KV blocks / blocks of one request of request_tokens")


class NodeLaunch(BaseModel):
    """One node role's launch line of a multi-node deployment."""

    role: str = Field(description="which nodes run it, e.g. 'head (node rank 0)'")
    command: str = Field(description="the line to run there; $HEAD_IP (the head node's "
                         "address) and $NODE_RANK are yours to set")
    source: str = Field(description="the engine file and release these flags were read in")


class PlanNodes(BaseModel):
    """The nodes a deployment spans and the link each kind of traffic crosses (docs/nodes.md):
    the GPU's system shape that holds the layout, or an unknown system shape."""

    nodes: int | None = Field(description="nodes the deployment spans (None: unknown shape)")
    gpus_per_node: int | None = Field(description="GPUs the deployment uses on each node")
    system: str | None = Field(description="the system shape (gpu_specs' systems), e.g. 'DGX "
                               "H100 / HGX H100 8-GPU'; None = unknown system shape")
    scale_up_domain: int | None = Field(description="GPUs its NVLink/xGMI/PCIe fabric joins")
    scale_up_link: str | None
    scale_out_gbps_per_gpu: float | None = Field(
        description="network between nodes per GPU, Gb/s (None: not sourced)")
    tensor_parallel_link: Literal["scale-up", "scale-out", "unknown"] = Field(
        description="the link TP all-reduces cross: scale-up unless TP exceeds the domain")
    pipeline_link: Literal["none", "scale-up", "scale-out", "unknown"] = Field(
        description="the link pipeline-stage hand-offs cross (none: one stage)")
    source: str = Field(description="the system's datasheet, or 'unknown system shape'")
    launch: list[NodeLaunch] = Field(
        default_factory=list, description="one launch line per node role when the deployment "
        "spans nodes (empty on one node: `command` is the whole launch)")


class PlanWhatIf(BaseModel):
    """A format what-if (--quantization on an unquantized model, docs/what-if.md): the plan is
    of a checkpoint that does not exist yet."""

    quantization: str = Field(description="kvplan's --quantization value, e.g. nvfp4")
    quantizer: str = Field(description="the tool and recipe whose output is planned")
    checkpoint: str = Field(description="the hypothetical path the launch line serves: produce "
                            "it with the quantizer first")
    engine_quantization: str = Field(description="the method the engine detects in it, as its "
                                     "--quantization spells it")
    assumptions: list[str] = Field(default_factory=list)
class TrafficInterval(BaseModel):
    """One interval of a rate curve (--traffic)."""

    time: float = Field(description="the curve's time value, as given")
    requests_per_s: float
    replicas: int | None = Field(description="None: no replica count meets the SLOs at the "
                                 "percentile at this rate (each replica's own tail is too long)")
    gpus: int | None


class TrafficPlan(BaseModel):
    """Replicas and cost over a rate curve (--traffic FILE), from the scheduler simulation.
    The fleet figures are None when an interval's rate cannot be served within the SLOs."""

    harness: str = Field(description="the arrival process each interval assumes")
    intervals: list[TrafficInterval]
    unmet_intervals: int = Field(0, description="intervals no replica count serves within the "
                                 "SLOs at the percentile")
    peak_gpus: int | None
    mean_gpus: float | None
    p95_gpus: float | None
    gpu_hours_per_day: float | None = Field(
        description="GPU-hours over the curve, scaled to 24 h")
    cost_per_day: float | None = Field(None, description="USD per day at the plan's GPU price")
    autoscaler: dict[str, Any] = Field(
        default_factory=dict, description="min/max replicas and the engine's queue and KV-use "
        "gauges with target values per replica, as a KEDA ScaledObject / HPA would take them")


class PlanServed(BaseModel):
    """The start-up of the serve line itself, when it sets knobs to other values than `inputs`
    (a recommended max_num_seqs, budget fraction or token budget): the engine sizes its profile
    run and CUDA graphs by them, so its memory and KV cache differ from the planned ones. What
    the engine logs when started with `command`, and what `kvplan check` reads back."""

    settings: dict[str, int | float] = Field(
        description="the knobs the serve line sets to other values than inputs (knob → value)")
    memory: MemoryBreakdown
    kv_cache: KvCache

    def label(self, flags: Mapping[str, str]) -> str:
        """'at the serve line's max_num_seqs 136': its settings under the engine's own names
        (`flags`: knob → flag, as Plan.engine.knobs holds them)."""
        names = ", ".join(f"{flags.get(k, k).removeprefix('--').replace('-', '_')} {v:g}"
                          for k, v in self.settings.items())
        return f"at the serve line's {names}"


class Plan(Deferred):
    schema_version: str = SCHEMA_VERSION
    fits: bool
    problems: list[Problem]
    model: PlanModel
    gpu: PlanGpu
    engine: PlanEngine
    inputs: dict[str, SourcedValue]
    workload: Workload
    memory: MemoryBreakdown
    kv_cache: KvCache
    recommendations: Recommendations
    performance: Performance | None = Field(
        None, description="latency and throughput (absent when the GPU lacks bandwidth/FLOPs)")
    command: str = Field(description="ready-to-paste serve command with the recommended values")
    speculative: PlanSpeculative | None = None
    lora: PlanLora | None = None
    offload: PlanOffload | None = None
    multimodal: PlanMultimodal | None = None
    # --- nodes ---
    nodes: PlanNodes | None = Field(None, description="the nodes the layout spans and the "
                                    "links it crosses (docs/nodes.md)")
    # --- traffic ---
    traffic: TrafficPlan | None = Field(None, description="replicas and cost over a rate curve "
                                        "(--traffic FILE)")
    served: PlanServed | None = Field(
        None, description="memory and KV cache at the serve line's own settings, when those "
        "differ from inputs and change them (memory and kv_cache are the planned deployment's)")
    # Plan.deferred(command, …): the launch line written when first read or serialized (a sweep
    # plans hundreds of deployments and prints none of their serve lines)
    DEFERRED: ClassVar[str] = "command"
    PLACEHOLDER: ClassVar[Any] = ""


# --- disagg ---
class KvTransfer(BaseModel):
    """The KV of one request moved from the prefill pool to the decode pool (docs/disagg.md)."""

    connector: str = Field(description="what moves the KV (vLLM NixlConnector, SGLang mooncake, "
                           "TensorRT-LLM cache transceiver)")
    overlap: str = Field(description="after_prefill: the whole prompt's KV after its prefill; "
                         "per_chunk: each prefill chunk's KV as soon as it is computed")
    tokens: int = Field(description="prompt tokens whose KV moves, per request")
    bytes_per_request: int = Field(description="KV bytes one request lands in the decode pool "
                                   "(all its GPUs of one replica together)")
    send_bytes_per_gpu: int = Field(description="what one prefill GPU sends per request")
    recv_bytes_per_gpu: int = Field(description="what one decode GPU receives per request")
    link_gbps: float = Field(description="scale-out link bandwidth per GPU, Gb/s")
    link_source: str
    time_ms: float = Field(description="the whole transfer on one link (no protocol efficiency: "
                           "a lower bound)")
    exposed_ms: float = Field(description="the part of it after the prefill ends, in TTFT")
    prefill_buffer_bytes_per_gpu: int = Field(
        description="device memory the connector preallocates outside the KV cache, per prefill "
        "GPU (0: the connector registers the KV cache itself)")
    decode_buffer_bytes_per_gpu: int
    max_tokens_in_buffer: int | None = Field(
        None, description="TensorRT-LLM cache_transceiver_config.max_tokens_in_buffer the launch "
        "sets (one prompt of the workload, whole blocks)")
    buffer: str = Field(description="how the engine sizes the buffer, in words")
    sources: list[str] = Field(description="engine files read, with versions")


class DisaggLaunch(BaseModel):
    """Launch lines of both pools and the router in front of them (one host per replica)."""

    prefill: str
    decode: str
    router: str
    sources: list[str]


class TtftParts(BaseModel):
    """Where the time to first token goes in the disaggregated service, ms."""

    queue_ms: float = Field(description="wait for a prefill slot (M/D/1 at the prefill pool's "
                            "utilization)")
    prefill_ms: float = Field(description="the prompt's prefill on the prefill pool (no decode "
                              "in its steps)")
    transfer_ms: float = Field(description="the KV transfer left after the prefill ends")
    first_decode_ms: float = Field(description="the decode pool's first step for the request")
    overhead_ms: float = Field(description="per-request overhead of the engine fit")
    decode_wait_ms: float = Field(0.0, description="wait for a decode slot when more requests are "
                                  "in flight than the decode pool runs at once")


class Disaggregated(BaseModel):
    """Two pools, each planned as `kvplan plan` plans one deployment, and their balance."""

    prefill: Plan
    decode: Plan
    prefill_replicas: int
    decode_replicas: int
    ratio: str = Field(description="xPyD: prefill replicas P, decode replicas D")
    replicas_source: dict[str, str] = Field(description="cli, or how kvplan chose each")
    gpus: int = Field(description="GPUs of the whole service")
    prefill_tokens_per_s_per_replica: float = Field(
        description="prompt tokens one prefill replica computes per second in full batches")
    prefill_utilization: float = Field(description="the prefill pool's busy fraction at the "
                                       "service's request rate")
    decode_running_per_replica: float = Field(description="requests decoding at once per replica")
    decode_capacity_per_replica: int = Field(
        description="requests one decode replica runs at once: min(max_num_seqs, KV cache)")
    prefill_kv_tokens_needed: int = Field(
        description="KV tokens a prefill replica holds at once: its batch in flight plus the "
        "prompts waiting for their transfer")
    kv_transfer: KvTransfer
    ttft: TtftParts
    launch: DisaggLaunch
    harness: str = Field(description="the benchmark the figures describe")
    notes: list[str] = Field(default_factory=list)


class DisaggPlan(BaseModel):
    """`kvplan plan --disagg`: the service's two pools and its performance as a whole."""

    schema_version: str = SCHEMA_VERSION
    fits: bool
    problems: list[Problem]
    disaggregated: Disaggregated
    performance: Performance | None = Field(
        None, description="the whole service: TTFT = queue + prefill + exposed KV transfer + "
        "first decode step; TPOT from the decode pool; tokens/s per GPU over both pools")


# --- whatif ---
class WhatIfPlan(Plan):
    """The plan of a format what-if (docs/what-if.md): a Plan plus `what_if`. A subclass, so
    that plans of real checkpoints have no such key and serialize exactly as before."""

    what_if: PlanWhatIf

