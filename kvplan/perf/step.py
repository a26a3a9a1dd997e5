"""Step-time model: TTFT, TPOT and throughput of one replica under continuous batching.

Pure: imports only the standard library and kvplan's specs, weights, kv, units and the engine
registry (each engine declares its coefficients and batching style: Engine.calibration).

One engine step that carries `d` decoding sequences (mean context L) and `p` prefill tokens
costs, on the busiest GPU (one TP rank of the heaviest PP stage):

    GEMMs      max(2·active_params·(d+p) / (peak_dtype · gemm_efficiency),
                   weight_bytes_read(d+p) / (bandwidth · bandwidth_efficiency))
    attention  max(attention_flops / (peak_bf16 · gemm_efficiency),
                   kv_bytes_read / (bandwidth · bandwidth_efficiency))
    all-reduce 2 per layer (tp > 1): latency + (d+p)·hidden·2 B · 2(tp−1)/tp / link bandwidth
    overheads  step_overhead + layers · layer_overhead + sequences · seq_overhead
               (releases that overlap the step's CPU work with the GPU, vLLM's async
               scheduling: step_overhead only where it exceeds the GPU's time)

GEMMs and attention are separate kernels, so their roofline times add. Weight bytes are the
exact per-GPU tensor bytes of kvplan.weights (embedding table not read, MoE experts by the
expected share that d+p tokens touch); KV bytes come from kvplan.kv (GQA, MLA, sliding windows,
KV dtype). Peak FLOP/s are the dense figures of gpu_specs/ (reference/GPUS.md).

Continuous batching at closed-loop concurrency B (input I, output O tokens per request):
* running sequences B_run = min(B, max_num_seqs, KV capacity / footprint): the footprint is a
  running request's mean KV, I + O/2, where the engine allocates blocks as a sequence grows
  (admission "on_demand"), and its whole sequence, I + O, where it admits only what it can
  finish without eviction (admission "reserve": TensorRT-LLM's GUARANTEED_NO_EVICT); requests
  beyond B_run wait for a slot, so e2e grows by B / B_run (Little's law) and the wait goes to
  TTFT;
* "mixed" engines (vLLM V1: decode-first chunked prefill; TensorRT-LLM in-flight batching)
  put new requests' prefill into decode steps, up to max_num_batched_tokens tokens per step.
  Steady state: a request's life is O − 1 decode steps plus its prefill steps, and some steps
  per life carry prefill chunks; TPOT = mean step time over the life; TTFT = the request's
  own mixed steps + its wait behind other requests' prefill: burst_share (fitted) × the
  queue of a lock-step burst of B prompts (burst_wait_s), at least the steady-state queue of
  the closed loop's mean-value analysis (_prefill_wait_s; the gated batch server of
  gated_wait_s is closer to a desynchronised scheduler but fits the calibration rows worse,
  docs/traffic.md). When the prefill tokens no longer fit the budget the
  replica is saturated: every step is full and requests queue;
* "separate" engines (SGLang, TGI: prefill-first) run prefill batches that pause decoding,
  which keeps a fixed-length closed loop in waves: the B_run requests are prefilled in
  batches of max_num_batched_tokens, decode in lock-step and finish together; mean TTFT =
  (first batch + whole wave) / 2, and TPOT carries the rest of the wave's prefill.
  SGLang launched with --enable-mixed-chunk runs mixed steps instead, admitting whole
  prompts (PerfContext.whole_prompts, burst_wait_s; Engine.launch_batching);
* TTFT adds a per-request overhead (the serving front end: HTTP, tokenizer; none when the
  context says the figures are an in-process engine benchmark, PerfContext.front_end);
  e2e = TTFT + (O − 1)·TPOT (TPOT is defined as (e2e − TTFT)/(O − 1)); requests/s = B / e2e;
  output tokens/s = B·O / e2e.
* Pipeline parallelism: a step crosses the pp stages in series (stage time × pp); the
  heaviest stage is modelled. Not calibrated (no PP rows). Stages on different nodes add one
  hand-off of the step's hidden states per crossing over the scale-out network
  (pipeline_handoff_s); a TP group wider than the GPU's scale-up domain all-reduces over that
  network instead of NVLink (Links, built by planner/nodes.py from gpu_specs' systems).

Coefficients are fitted by benchmarks/perf_fit.py on benchmarks/data/perf_calibration.csv and
recorded, with leave-one-group-out errors, in benchmarks/data/perf_fit.json and
docs/performance.md. The model is engine-agnostic apart from those named coefficients and the
batching style, which each engine declares (`calibration` in kvplan/engines/<engine>.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from ..engines import dense_checks as _dense_checks
from ..engines import moe_fits as _moe_fits
from ..engines import registry
from ..engines.arch_fits import PCIE, envelope
from ..engines.base import Coefficients
from ..model import weights as _weights
from ..model.kv import kv_bytes_per_token_per_layer, mamba_state_bytes
from ..specs import GpuSpec, ModelSpec, QuantSpec, per_object
from ..units import DTYPE_ALIASES, cdiv, fast_init
from . import arch as _arch
from . import decode_gemm as _decode_gemm
from . import layer_floors as _layer_floors
from . import moe_gemm as _moe_gemm
from .user_calibration import user_calibration

Bound = Literal["compute", "bandwidth", "overhead"]

ACTIVATION_BYTES = 2  # bf16/fp16 activations in the TP all-reduce (every engine modelled)
# Per-direction x16 link bandwidth, bytes/s (PCI-SIG: 8/16/32 GT/s per lane with 128b/130b).
PCIE_X16_BYTES_PER_S = {3: 15.75e9, 4: 31.5e9, 5: 63.0e9, 6: 126.0e9}
# NVIDIA quotes NVLink per GPU as the bidirectional total (H100: 18 links × 50 GB/s = 900 GB/s);
# one direction is half (https://www.nvidia.com/en-us/data-center/nvlink/).
NVLINK_DIRECTIONS = 2


# ------------------------------------------------------------------- coefficients


# Every engine declares its own coefficients (or which engine's it borrows), calibrated
# releases and batching style: `calibration` in kvplan/engines/<engine>.py, with their sources
# (registry.fitted_coefficients() lists the fitted ones).


# Spread of measured / predicted in the leave-one-group-out evaluation (p10, p90), per metric:
# the _low/_high range of a Hopper PerfPoint. From benchmarks/data/perf_fit.json ("ranges").
# Other GPU classes and extrapolated figures use their own bands (kvplan/perf/arch.py).
RANGES: dict[str, tuple[float, float]] = {
    "ttft": (0.798, 1.679),
    "tpot": (0.875, 1.119),
    "throughput": (0.894, 1.093),
}
METRICS = ("ttft", "tpot", "throughput")


@lru_cache(maxsize=256)
def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:4]) or (0,)


def overlaps_cpu(engine: str, version: str) -> bool:
    """Whether `version` of `engine` overlaps its per-step CPU work with the GPU's step by
    default (Calibration.cpu_overlap_from; vLLM's async scheduling)."""
    first = registry.get(engine).calibration.cpu_overlap_from
    return bool(first and version) and _version_key(version) >= _version_key(first)


def coefficients_for(engine: str, version: str) -> tuple[Coefficients, bool]:
    """(coefficients, engine-calibrated?) for an engine: its own fit whatever the release (the
    distance to the fitted releases is stated apart: version_distance), or the fit it borrows
    from another engine with False."""
    eng = registry.get(engine)
    coeffs = registry.calibrated_by(eng).calibration.coefficients
    assert coeffs is not None  # registry.register refuses a borrow without a fit
    return coeffs, eng.calibration.coefficients is not None and bool(eng.calibration.versions)


def version_distance(engine: str, version: str) -> str:
    """How far `version` is from the releases the engine's coefficients were fitted on ("" when
    inside them or when the engine borrows another's fit)."""
    cal = registry.get(engine).calibration
    if cal.coefficients is None or not cal.versions or not version:
        return ""
    keys = sorted(_version_key(v)[:2] for v in cal.versions)
    k = _version_key(version)[:2]
    if keys[0] <= k <= keys[-1]:
        return ""
    fitted = ", ".join(sorted({".".join(v.split(".")[:2]) for v in cal.versions},
                              key=_version_key))
    near = keys[0] if k < keys[0] else keys[-1]
    if k[0] == near[0] and len(k) > 1 and len(near) > 1:
        gap = f"{abs(k[1] - near[1])} minor release{'s' if abs(k[1] - near[1]) != 1 else ''} "
        gap += "newer" if k > near else "older"
    else:
        gap = "another major release"
    return f"{registry.get(engine).label} {version}: fitted on {fitted} ({gap})"


def arch_calibration(engine: str, gpu: GpuSpec) -> _arch.ArchCalibration:
    """The GPU class factors and band for this engine (kvplan/perf/arch.py)."""
    eng = registry.get(engine)
    return _arch.resolve(gpu.arch, engine, registry.calibrated_by(eng).name)


def bundled_source(engine: str, version: str, gpu: GpuSpec) -> str:
    """Where the bundled coefficients of a prediction come from: "bundled: <class> × <engine>"
    when the GPU's class has measurements for the engine (kvplan/perf/arch.py), else what is
    extrapolated from where; then the distance to the fitted engine releases, if any."""
    eng = registry.get(engine)
    own = registry.calibrated_by(eng)
    arch = arch_calibration(engine, gpu)
    if own is eng and arch.calibrated:
        text = f"bundled: {arch.klass} × {eng.label}"
    else:
        text = (f"extrapolated: {own.label} coefficients (fitted on Hopper) with "
                f"{arch.source_class} GPU factors")
        if arch.source_class != arch.klass:
            text += f" (nearest measured class to {arch.klass})"
        if own is not eng:
            text += f", borrowed for {eng.label}"
    dist = version_distance(engine, version)
    text = f"{text}; {dist}" if dist else text
    first = eng.calibration.cpu_overlap_from
    if overlaps_cpu(engine, version) and not any(overlaps_cpu(engine, v)
                                                 for v in own.calibration.versions):
        text += (f"; async scheduling (default from {first}) overlaps the step overhead with "
                 "the GPU: modelled, not in the fitted rows")
    return text


def coefficients_on(engine: str, version: str, gpu: GpuSpec
                    ) -> tuple[Coefficients, bool, str, str]:
    """(coefficients, calibrated?, why not (calibration_gaps), where they come from) for an
    engine version on a GPU: a user calibration of its engine × architecture (kvplan
    calibrate, user_calibrations) wins over the bundled fit; the bundled fit is calibrated
    when the engine has its own coefficients and the GPU's class has measurements for it
    (kvplan/perf/arch.py), whatever the engine's minor version."""
    user = user_calibration(engine, gpu.arch)
    if user is not None:
        return user.coefficients, True, "", user.source
    eng = registry.get(engine)
    key = (engine, version, gpu.arch)
    hit = _BUNDLED.get(key)
    if hit is not None and hit[0] is eng:  # the same engine object: the same answer
        return hit[1]
    coeffs, own = coefficients_for(engine, version)
    out = (coeffs, own and arch_calibration(engine, gpu).calibrated,
           calibration_gaps(engine, version, gpu), bundled_source(engine, version, gpu))
    if len(_BUNDLED) >= 256:
        _BUNDLED.clear()
    _BUNDLED[key] = (eng, out)
    return out


# coefficients_on's bundled answers by (engine, version, GPU architecture), with the engine
# object they were read from: every candidate of a sweep asks the same few again
_BUNDLED: dict[tuple[str, str, str], tuple[Any, tuple[Coefficients, bool, str, str]]] = {}


def calibration_gaps(engine: str, version: str, gpu: GpuSpec) -> str:
    """Why a prediction for this engine on this GPU is not calibrated ("" when it is), each
    reason apart: the engine borrows another's fit, the GPU class has no measurements for this
    engine. The engine's minor version is not a gap (version_distance states it)."""
    eng = registry.get(engine)
    gaps = []
    if eng.calibration.coefficients is None or not eng.calibration.versions:
        gaps.append(f"{eng.label} has no calibration rows (it borrows "
                    f"{registry.calibrated_by(eng).label}'s fit)")
    arch = arch_calibration(engine, gpu)
    if arch.note:
        gaps.append(arch.note)
    return "; ".join(gaps)


# ------------------------------------------------------------------------ context


@fast_init
@dataclass(frozen=True)
class PerfContext:
    """Everything the step-time model needs about one deployment, per GPU (one TP rank of the
    heaviest PP stage). Integer bytes and FLOPs; build it with context_for()."""

    engine: str
    engine_version: str
    tp: int
    pp: int
    compute_dtype: str  # GEMM dtype: 'bfloat16', 'float16', 'fp8', 'int8', 'fp4'
    layers: int  # decoder layers on the heaviest stage
    hidden_size: int
    weight_bytes_per_gpu: int  # from the memory plan (weights.weight_memory_per_stage)
    dense_read_bytes: int  # bytes read every step: weights minus unread embedding and experts
    expert_bytes: int  # all routed-expert bytes on this GPU (0 for dense models)
    num_experts: int  # routed experts per MoE layer (0 = dense)
    top_k: int
    dense_flops_per_token: int  # 2 × dense matmul elements on this GPU (LM head excluded)
    expert_flops_per_token: int  # 2 × top_k experts' matmul elements on this GPU
    lm_head_flops_per_token: int  # 2 × vocab shard × hidden, per sampled token
    attention_flops_per_context_token: int  # per query token per context token, all layers
    sliding_attention_flops_per_context_token: int
    kv_bytes_per_token: int  # full-attention / MLA layers of this GPU, per context token
    sliding_kv_bytes_per_token: int  # sliding-window layers, per context token (≤ window)
    sliding_window: int  # 0 = none
    state_bytes_per_seq: int  # recurrent (Mamba / DeltaNet) state read per step per sequence
    peak_flops_per_s: float  # dense, compute dtype
    attention_peak_flops_per_s: float  # dense bf16/fp16
    bandwidth_bytes_per_s: float
    link_bytes_per_s: float  # one direction, per GPU (NVLink, else PCIe x16)
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_capacity_tokens: int | None  # per replica; None = not limiting
    coefficients: Coefficients
    style: Literal["mixed", "separate"]
    calibrated: bool
    not_calibrated_because: str = ""  # calibration_gaps(): each reason, "" when calibrated
    calibration: str = ""  # where the coefficients come from (user file, bundled, extrapolated)
    moe_check: str = ""  # a MoE model: what public MoE rows say of the model (_moe_band)
    measured_check: str = ""  # a dense model: a never-fitted group like it (_measured_band)
    # Speculative decoding (docs/features.md): every decode step verifies `spec_tokens` draft
    # tokens per sequence after `draft_steps` draft forward passes; each draft token is accepted
    # with probability `acceptance_rate`.
    spec_tokens: int = 0  # tokens verified per sequence per step beyond the first
    draft_steps: int = 0  # sequential draft forward passes per step (0: n-gram)
    acceptance_rate: float = 0.0
    draft_read_bytes: int = 0  # draft weights one draft pass reads on this GPU (incl. shared head)
    draft_flops_per_token: int = 0
    draft_kv_bytes_per_token: int = 0  # the draft's own KV, per context token
    draft_layers: int = 0
    # longest draft chain one step can accept (SGLang's EAGLE tree: its depth, num_steps, while
    # it verifies num_draft_tokens − 1 tokens); 0: spec_tokens (a chain)
    accept_tokens: int = 0
    # --- nodes --- the links the figures assume (planner/nodes.py: node_links)
    link: str = ""  # what the TP all-reduce (and the pipeline hand-offs) cross, in words
    pp_crossings: int = 0  # pipeline stage boundaries between nodes, one hand-off each per step
    pp_link_bytes_per_s: float = 0.0  # the scale-out network per GPU, one direction
    # --- expert --- MoE layers shared by data-parallel ranks / expert parallelism
    # (perf/expert.py sets them; the defaults are one replica's own MoE layers)
    moe_dp: int = 1  # DP ranks whose tokens meet in each MoE layer
    moe_group: int = 1  # GPUs one MoE layer spans (1: the replica's TP all-reduce only)
    moe_layers: int = 0  # MoE layers on the heaviest stage
    all_to_all: bool = False  # tokens dispatched/combined all-to-all (else gather/scatter)
    # a step's communication when set (moe_comm_per_token_s > 0): fixed + per own token
    moe_comm_fixed_s: float = 0.0
    moe_comm_per_token_s: float = 0.0
    # per own token of a decode-only step when its exchange differs (DeepEP low-latency
    # kernels across nodes; SGLang's all-gather DP gather where prefill steps all-reduce:
    # perf/expert.py); 0: moe_comm_per_token_s
    moe_comm_decode_per_token_s: float = 0.0
    # the MoE group's link when it spans nodes (planner/nodes.py); 0: link_bytes_per_s
    moe_link_bytes_per_s: float = 0.0
    # GPU architecture class factors relative to Hopper (kvplan/perf/arch.py) and the band
    gemm_scale: float = 1.0  # on gemm_efficiency for the compute dtype's GEMMs
    attention_scale: float = 1.0  # on gemm_efficiency for attention (bf16)
    bandwidth_scale: float = 1.0  # on bandwidth_efficiency
    ranges: tuple[tuple[float, float], ...] = tuple(RANGES[k] for k in METRICS)
    link_latency_us: float | None = None  # TP all-reduce over PCIe (arch_fits.PCIE); None: engine's
    # GPUs per node of an MoE group that spans nodes (0: one node), for DeepEP's node-deduplicated
    # internode dispatch (perf/expert.py)
    moe_node_gpus: int = 0
    # --- pctl --- how the scheduler admits requests (Calibration.admission; perf/simulate.py)
    admission: Literal["on_demand", "reserve"] = "on_demand"
    # prefix caching on: a preempted request's computed blocks stay cached until evicted, so its
    # recompute re-hits them (perf/simulate.py); set by planner/performance.context
    prefix_caching: bool = False
    # --- overheads --- what the figures' harness includes: True (kvplan's plans: a served
    # deployment, HTTP server and tokenizer in front of the engine) adds request_overhead_ms to
    # every TTFT; False: an in-process engine benchmark (trtllm-bench, gptSessionBenchmark,
    # `vllm bench latency` / `throughput`, MLPerf's offline harness) that has no request path
    front_end: bool = True
    # the served requests pass NVIDIA Dynamo's front end (dynamo.frontend and the worker
    # wrapper), which adds Coefficients.dynamo_front_end_ms: only the calibration rows collected
    # that way (benchmarks/data/perf_calibration.csv, column front_end "dynamo"); never a plan
    via_dynamo: bool = False
    # the engine release overlaps step_overhead_ms with the GPU's step (vLLM async scheduling:
    # Calibration.cpu_overlap_from; pp = 1, and no draft but Calibration.overlap_drafts: the
    # planner turns it off for the others; step_terms); the per-layer and
    # per-sequence costs stay serial
    cpu_overlap: bool = False
    # --- links --- the GPU's measured decode-GEMM streaming rate for the compute dtype
    # (perf/decode_gemm.py): the dense weights a step reads stream at this rate × the
    # engine's bandwidth_efficiency (1.0 in every bundled fit; a user calibration's own value
    # still scales it) instead of the class-scaled HBM rate; 0: none measured
    weight_stream_bytes_per_s: float = 0.0
    # the same for the routed experts' GEMM dtype: a fused MoE streams its experts no faster
    # than the GPU's dense GEMMs stream theirs (aiconfigurator's H200 tables: 2.2-3.5 TB/s
    # against 3.6 for large dense GEMMs; perf/layer_floors.py); 0: none measured
    expert_stream_bytes_per_s: float = 0.0
    # --- frontend --- the serving front end as a queue (perf/simulate.py): per-request service
    # time of one API-server process (Calibration.frontend_service_ms) and how many serve
    frontend_service_s: float = 0.0
    frontend_servers: int = 1
    # --- sglttft --- a mixed step admits whole prompts, at least one (SGLang with
    # --enable-mixed-chunk: Engine.launch_batching; burst_wait_s)
    whole_prompts: bool = False
    # --- moe --- the routed experts' fused grouped GEMM runs at a measured fraction of the
    # dense rate (perf/moe_gemm.py): (tokens per expert, ratio) points, () = the dense rate;
    # below floor tokens per expert (the GPU's ridge point) the ratio is held
    expert_gemm_curve: tuple[tuple[float, float], ...] = ()
    expert_gemm_floor_tokens: float = 0.0
    # --- simchunk --- with whole_prompts: the prompt that overruns a step's prefill room is
    # chunked (--chunked-prefill-size below --max-prefill-tokens: PrefillAdder truncates it to
    # rem_chunk_tokens); False: the batch stops before it (perf/simulate.py)
    split_last_prompt: bool = True
    # --- moe2 --- what the routed experts' rate comes from (perf/moe_gemm.py): the tables' key
    # (kernel family, GPU id, MoE kernel dtype) when one times this deployment's experts,
    # moe_intermediate_size (perf/expert.py picks the layout's curve), and for
    # Performance.routed_experts the measured table's label ("" at the dense rate) and where
    # it is or why there is none ("" for a dense model)
    expert_gemm_key: tuple[str, ...] = ()
    expert_intermediate: int = 0
    expert_gemm_table: str = ""
    expert_gemm_source: str = ""
    # --- deepgemm --- the engine release (version key; () = the newest) whose kernel choice
    # perf/expert.py re-reads for its layout (moe_gemm.layout_family: vLLM's DeepGEMM releases)
    expert_gemm_release: tuple[int, ...] = ()
    # decode steps' curve where they run another kernel than prefill steps (DeepEP's
    # low-latency dispatch feeds DeepGEMM's masked grouped GEMM under a CUDA graph;
    # moe_gemm.DECODE_EP_CURVES); () = expert_gemm_curve for every step
    expert_gemm_decode_curve: tuple[tuple[float, float], ...] = ()
    # --- dgpad --- how the routed experts' grouped GEMM pads its rows (moe_gemm.deepgemm_rows:
    # vLLM's DeepGEMM experts without DeepEP or DP): (mode "all" | "routed", the fewest step
    # tokens that run it, the experts this GPU holds); () = the routed tokens' own rows
    expert_padding: _moe_gemm.Padding = ()
    # --- bwmxfp4 --- the routed experts' GEMM dtype where expert_dtype_for sets it apart from
    # compute_dtype (gpt-oss's MXFP4 experts on FP4-capable GPUs run in the engine kernel's
    # activation dtype; "" = compute_dtype), that dtype's datasheet peak (FLOP/s), the GPU
    # class's factor for it (perf/arch.py), and what it assumes (Performance.routed_experts);
    # step_terms charges the expert FLOPs at that rate
    expert_compute_dtype: str = ""
    expert_peak_flops_per_s: float = 0.0
    expert_gemm_scale: float = 1.0
    expert_dtype_note: str = ""
    # --- a2a --- the GPUs an attention group's tokens are split among before an all-to-all
    # dispatch (its T when the engine splits them: Engine.moe_token_split; 1: every GPU
    # dispatches its own copy), and whether the split leaves the attention all-reduce whole and
    # adds an all-gather after the MoE (vLLM 0.11 - 0.24); perf/expert.py
    moe_dispatch_split: int = 1
    moe_split_gather: bool = False
    # --- sgdense --- the gather/scatter runs within each TP rank's DP group (D GPUs, each with
    # its rank's whole tokens) and a TP all-reduce sums the MoE output: vLLM EP through
    # allgather_reducescatter / naive without sequence-parallel MoE; perf/expert.py
    moe_gather_dp_group: bool = False
    # --- floors --- MoE and MLA layers' kernel floors beyond a dense layer's (perf/
    # layer_floors.py): the engine's kernel family ("" none), MLA and MoE layers on the stage
    floor_family: str = ""
    floor_mla_layers: int = 0
    floor_moe_layers: int = 0
    floor_kernel: str = ""  # the routed experts' MoE kernel dtype (moe_gemm.moe_kernel_dtype)
    floor_shared: bool = False  # each MoE layer has a shared expert
    floor_held_tokens: int = 0  # layer_floors.held_tokens of the GPU's class
    floor_note: str = ""  # layer_floors.note: what the figures assume of them

    @property
    def request_overhead_s(self) -> float:
        """Per-request front-end cost in TTFT (s): request_overhead_ms (+ dynamo_front_end_ms
        through Dynamo's front end); 0 for an in-process benchmark."""
        if not self.front_end:
            return 0.0
        c = self.coefficients
        return (c.request_overhead_ms + (c.dynamo_front_end_ms if self.via_dynamo else 0.0)) * 1e-3


@fast_init
@dataclass(frozen=True)
class Links:
    """The links one deployment's traffic crosses (planner/nodes.py builds it from the GPU's
    system shape): TP all-reduces over the scale-up fabric (None: the GPU's own NVLink/PCIe
    rate) or, when TP spans nodes, the scale-out network; pipeline hand-offs between nodes over
    the scale-out network. Bytes/s are one direction per GPU."""

    tp_bytes_per_s: float | None = None
    pp_crossings: int = 0
    pp_bytes_per_s: float = 0.0
    text: str = ""
    moe_bytes_per_s: float | None = None  # MoE dispatch/combine beyond one scale-up domain
    moe_node_gpus: int = 0  # GPUs per node when the MoE group spans nodes


def tokens_per_step(ctx: PerfContext) -> float:
    """Expected tokens a sequence gains per verification step with k draft tokens, each accepted
    with probability α until the first rejection, plus the target's own token:
    (1 − α^(k+1)) / (1 − α) (Leviathan et al. 2023, "Fast Inference from Transformers via
    Speculative Decoding", eq. 1), k the longest chain a step can accept (accept_tokens, else
    spec_tokens); 1 without speculation."""
    if not ctx.spec_tokens:
        return 1.0
    k, a = ctx.accept_tokens or ctx.spec_tokens, ctx.acceptance_rate
    return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def active_weight_bytes(ctx: PerfContext, tokens: float = 1.0) -> int:
    """Weight bytes one step over `tokens` tokens reads on this GPU: every non-expert weight
    (embedding table excluded) plus the expected share of routed experts they touch
    (one token: top_k of E)."""
    return round(ctx.dense_read_bytes + ctx.expert_bytes * expert_fraction(ctx, tokens))


@fast_init
@dataclass(frozen=True)
class PerfPoint:
    """One operating point of a replica at closed-loop `concurrency` (ms, tokens/s, req/s).
    *_low/*_high: the p10–p90 spread of measured/predicted in the leave-one-group-out
    evaluation (benchmarks/data/perf_fit.json)."""

    concurrency: int
    running: int  # sequences the engine actually runs (KV capacity, max_num_seqs)
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    output_tokens_per_s: float  # per replica
    output_tokens_per_s_per_gpu: float
    requests_per_s: float
    ttft_ms_low: float
    ttft_ms_high: float
    tpot_ms_low: float
    tpot_ms_high: float
    output_tokens_per_s_low: float
    output_tokens_per_s_high: float
    decode_bound: Bound  # the largest term of a pure decode step
    saturated: bool  # prefill-bound: the token budget, not concurrency, sets throughput
    calibrated: bool


def missing_gpu_fields(gpu: GpuSpec) -> list[str]:
    """GpuSpec fields the model needs and this GPU lacks (then the planner omits performance)."""
    out = []
    if not gpu.bandwidth_tbps:
        out.append("bandwidth_tbps")
    if not (gpu.tflops.bf16 or gpu.tflops.fp16):
        out.append("tflops.bf16")
    return out


def _peak_tflops(gpu: GpuSpec, dtype: str) -> float:
    """Dense TFLOP/s for a GEMM dtype, falling back to bf16/fp16 where the dtype is absent."""
    t = gpu.tflops
    table = {"fp8": t.fp8, "int8": t.int8, "fp4": t.fp4, "bfloat16": t.bf16, "float16": t.fp16,
             "float32": t.tf32}
    value = table.get(dtype)
    return value or t.bf16 or t.fp16 or 0.0


def compute_dtype_for(model_dtype: str, quant: QuantSpec | None, gpu: GpuSpec) -> str:
    """GEMM dtype of the dense (non-expert) layers: fp8 / int8 (w8a8) / fp4 where the GPU runs
    it natively, else the model dtype (weight-only 4-bit formats dequantize into fp16/bf16
    GEMMs). A checkpoint that quantizes only its MoE experts (gpt-oss's MXFP4:
    QuantSpec.experts_only) keeps its other layers in the model dtype; expert_dtype_for says
    what its experts run in."""
    if quant is not None:
        if quant.method == "fp8" and gpu.fp8_native:
            return "fp8"
        if quant.method == "int8":
            return "int8"
        if quant.runs_fp4_on(gpu) and not quant.experts_only:
            return "fp4"
    return DTYPE_ALIASES.get(model_dtype, model_dtype)


def expert_dtype_for(compute: str, quant: QuantSpec | None, gpu: GpuSpec,
                     engine: str) -> tuple[str, str]:
    """GEMM dtype of the routed experts and, where it is not simply `compute`
    (compute_dtype_for), what it assumes (else ""): a real MXFP4 checkpoint's experts
    (gpt-oss) on a GPU with FP4 tensor cores run in the dtype the engine's default MXFP4 MoE
    kernel computes in on that architecture (Calibration.mxfp4_expert_dtype: "bfloat16" with
    bf16 activations, "fp8" with MXFP8 activations), "fp4" where the engine names none."""
    if (quant is None or quant.method != "mxfp4" or quant.what_if is not None
            or not quant.runs_fp4_on(gpu)):
        return compute, ""
    named = dict(registry.get(engine).calibration.mxfp4_expert_dtype).get(gpu.arch)
    if named is None:
        return "fp4", (f"expert GEMMs in fp4 (assumed: the engine's MXFP4 MoE kernel on "
                       f"{gpu.arch} not verified), other layers in {compute}")
    return named, (f"expert GEMMs in {named} (the engine's default MXFP4 MoE kernel on "
                   f"{gpu.arch}), other layers in {compute}")


def expert_rate_scale(ctx: PerfContext) -> float:
    """The routed experts' GEMM rate over the dense GEMM rate from their dtypes alone (peak ×
    GPU class factor of each; 1.0 when the experts run in compute_dtype)."""
    if not ctx.expert_compute_dtype or not ctx.peak_flops_per_s or not ctx.gemm_scale:
        return 1.0
    return (ctx.expert_peak_flops_per_s * ctx.expert_gemm_scale
            / (ctx.peak_flops_per_s * ctx.gemm_scale))


def link_bytes_per_s(gpu: GpuSpec) -> float:
    """One-direction TP link bandwidth per GPU: NVLink total / 2, else PCIe x16 of its gen."""
    if gpu.nvlink_gbps_per_gpu:
        return gpu.nvlink_gbps_per_gpu * 1e9 / NVLINK_DIRECTIONS
    return PCIE_X16_BYTES_PER_S.get(gpu.pcie_gen or 4, PCIE_X16_BYTES_PER_S[4])


@dataclass(frozen=True)
class _Enumerated:
    layers: int
    dense_read_bytes: int
    expert_bytes: int
    unread_bytes: int
    dense_elements: int
    expert_elements_active: int
    lm_head_elements: int


@per_object(512)
def _enumerate_stage(m: ModelSpec, tp: int, pp: int, dtype: str,
                     quant: QuantSpec | None) -> _Enumerated:
    """Bytes and matmul elements of one TP rank of the heaviest PP stage, from the same tensor
    enumeration and sharding rules as weights.weight_memory_per_stage: each decoder layer's
    sums (_layer_sums, once per TP layout) added over the stage's layers, and the tensors
    outside the layers. Memoised per (model object, tp, pp, dtype, format): a sweep asks the
    same model × layout on every GPU."""
    ranges = _weights.pp_layer_ranges(m.num_layers, pp)
    per_layer, outside = _layer_sums(m, tp, dtype, quant)
    # per stage: read bytes, expert bytes, unread bytes, dense / active-expert / LM-head elements
    per_stage = [[sum(col) for col in zip(*per_layer[r.start:r.stop], strict=True)]
                 if len(r) else [0] * 6 for r in ranges]
    for t, nbytes, elements in outside:
        acc = per_stage[0 if t.kind == "embedding" else pp - 1]
        if t.kind == "embedding":
            if m.tie_word_embeddings:  # the LM head reads the tied table on the last stage
                per_stage[pp - 1][0] += nbytes
                per_stage[pp - 1][5] += elements
                if pp > 1:
                    acc[2] += nbytes
            else:
                acc[2] += nbytes  # a lookup reads a few rows only
        elif t.kind == "lm_head":
            acc[0] += nbytes
            acc[5] += elements
        else:
            _add(acc, t, nbytes, elements, m)
    best = max(range(pp), key=lambda s: per_stage[s][0] + per_stage[s][1])
    r, e, u, de, ee, le = per_stage[best]
    return _Enumerated(len(ranges[best]), r, e, u, de, ee, le)


@per_object(256)
def _layer_sums(m: ModelSpec, tp: int, dtype: str, quant: QuantSpec | None
                ) -> tuple[list[list[int]], list[tuple[_weights.Tensor, int, int]]]:
    """Per decoder layer, the six sums of _enumerate_stage over its tensors on one TP rank
    (summed once per layer class); and the tensors outside the layers with their bytes and
    matmul elements on that rank. Encoder tensors are left out (the decoder's step does not
    run them)."""
    ranked = _weights.rank_layers(m, tp=tp, dtype=dtype, quant=quant, ep=1)
    sums: dict[int, list[int]] = {}
    per_layer = []
    for items in ranked.layers:
        acc = sums.get(id(items))
        if acc is None:
            acc = sums[id(items)] = [0] * 6
            for t, (_, parts) in items:
                if not _encoder(t):
                    rows, cols = _weights._shard_rows(t, m, tp)
                    _add(acc, t, sum(parts), rows * cols, m)
        per_layer.append(acc)
    outside = []
    for t, (_, parts) in ranked.outside:
        if _encoder(t):
            continue
        rows, cols = _weights._shard_rows(t, m, tp)
        outside.append((t, sum(parts), rows * cols))
    return per_layer, outside


def _encoder(t: _weights.Tensor) -> bool:
    return t.kind == "vision" or t.name.startswith(("vision.", "multi_modal_projector"))


def _add(acc: list[int], t: _weights.Tensor, nbytes: int, elements: int, m: ModelSpec) -> None:
    """Add a decoder tensor to a stage's sums: routed experts apart (top_k of E active), the
    rest read every step, linears and routers counted as dense matmuls."""
    if t.kind == "expert":
        acc[1] += nbytes
        acc[4] += round(elements * (m.moe.top_k / m.moe.num_experts if m.moe else 0.0))
    else:
        acc[0] += nbytes
        if t.kind in ("linear", "router"):
            acc[3] += elements


@per_object(256)
def _stage_layer_kinds(m: ModelSpec, pp: int) -> tuple[int, int, int, int]:
    """Decoder layers of the PP stage with the most of them, and how many of those are
    full-attention (or MLA), sliding-window and linear-attention layers."""
    stage = max(_weights.pp_layer_ranges(m.num_layers, pp), key=len)
    full = sliding = linear = 0
    for i in stage:
        kind = m.layer_types[i] if m.layer_types else "full"
        if kind == "linear":
            linear += 1
        elif kind == "sliding" and m.sliding_window:
            sliding += 1
        elif kind != "none":
            full += 1
    return len(stage), full, sliding, linear


@per_object(256)
def _stage_moe_layers(m: ModelSpec, pp: int) -> int:
    """MoE layers of the PP stage with the most of them (the slowest MoE stage)."""
    assert m.moe is not None
    moe = set(m.moe.moe_layers)
    return max(sum(1 for i in r if i in moe) for r in _weights.pp_layer_ranges(m.num_layers, pp))


def context_for(m: ModelSpec, gpu: GpuSpec, engine: str, version: str, *, tp: int = 1, pp: int = 1,
                dtype: str | None = None, kv_cache_dtype: str | None = None,
                quant: QuantSpec | None = None, max_num_batched_tokens: int = 8192,
                max_num_seqs: int = 1024, weight_bytes_per_gpu: int | None = None,
                kv_bytes_per_token: int | None = None,
                kv_capacity_tokens: int | None = None, links: Links | None = None,
                prefix_caching: bool = False) -> PerfContext:
    """Build a PerfContext from the model, GPU and engine settings. Figures the memory plan
    already has (weight bytes per GPU, KV bytes per token per GPU, KV capacity in tokens per
    replica) may be passed in; missing ones are computed from kvplan.weights / kvplan.kv.
    Raises ValueError when the GPU lacks bandwidth or FLOP figures (missing_gpu_fields)."""
    missing = missing_gpu_fields(gpu)
    if missing:
        raise ValueError(f"{gpu.id}: no {', '.join(missing)} in gpu_specs")
    quant = quant if quant is not None else m.quantization
    dtype = DTYPE_ALIASES.get(dtype or m.dtype, dtype or m.dtype)
    if dtype not in ("bfloat16", "float16", "float32"):
        dtype = "bfloat16"  # a quantized checkpoint's dtype names its payload; runs in bf16
    kv_dtype = kv_cache_dtype if kv_cache_dtype and kv_cache_dtype != "auto" else dtype
    kv_dtype = DTYPE_ALIASES.get(kv_dtype, kv_dtype)
    en = _enumerate_stage(m, tp, pp, dtype, quant)
    if weight_bytes_per_gpu is None:
        stages = _weights.weight_memory_per_stage(m, tp=tp, pp=pp, dtype=dtype, quant=quant)
        weight_bytes_per_gpu = max(s.tensor_bytes for s in stages)
    dense_read = max(0, weight_bytes_per_gpu - en.expert_bytes - en.unread_bytes)

    per_layer = kv_bytes_per_token_per_layer(m, tp=tp, kv_dtype=kv_dtype)
    heads = cdiv(m.num_attention_heads, tp)
    if m.mla is not None:  # absorbed MLA: scores over latent + rope, values over the latent
        attn_per_ctx = 2 * heads * (2 * m.mla.kv_lora_rank + m.mla.qk_rope_head_dim)
    else:
        attn_per_ctx = 4 * heads * m.head_dim
    layers, full, sliding, linear = _stage_layer_kinds(m, pp)
    state = linear * mamba_state_bytes(m, tp=tp, state_dtype=dtype) if linear else 0
    # A passed-in figure is the plan's bytes per token over all attention layers of this GPU.
    full_kv = (full * per_layer if kv_bytes_per_token is None
               else max(0, kv_bytes_per_token - sliding * per_layer))
    coeffs, calibrated, gaps, source = coefficients_on(engine, version, gpu)
    cal = registry.get(engine).calibration
    style, admission = cal.style, cal.admission
    compute = compute_dtype_for(dtype, quant, gpu)
    expert, expert_note = expert_dtype_for(compute, quant, gpu, engine)
    # MoE kernel floors: fine-grained MoE layers only (the tables' shapes, as perf/moe_gemm.py)
    moe_layers = (_stage_moe_layers(m, pp) if m.moe is not None
                  and m.moe.num_experts >= _moe_gemm.MIN_EXPERTS else 0)
    arch = arch_calibration(engine, gpu)
    ranges, moe_check, measured = tuple(arch.ranges[k] for k in METRICS), "", ""
    if m.moe is not None:
        ranges, moe_check = _moe_band(arch.klass, ranges)
    else:
        ranges, measured = _measured_band(engine, arch.klass, compute, m, ranges)
    attn_peak = (gpu.tflops.bf16 or gpu.tflops.fp16 or 0.0) * 1e12
    return PerfContext(
        engine=engine, engine_version=version, tp=tp, pp=pp, compute_dtype=compute,
        layers=layers, hidden_size=m.hidden_size,
        weight_bytes_per_gpu=weight_bytes_per_gpu, dense_read_bytes=dense_read,
        expert_bytes=en.expert_bytes, num_experts=m.moe.num_experts if m.moe else 0,
        top_k=m.moe.top_k if m.moe else 0,
        dense_flops_per_token=2 * en.dense_elements,
        expert_flops_per_token=2 * en.expert_elements_active,
        lm_head_flops_per_token=2 * en.lm_head_elements,
        attention_flops_per_context_token=full * attn_per_ctx,
        sliding_attention_flops_per_context_token=sliding * attn_per_ctx,
        kv_bytes_per_token=full_kv, sliding_kv_bytes_per_token=sliding * per_layer,
        sliding_window=(m.sliding_window or 0) if sliding else 0, state_bytes_per_seq=state,
        peak_flops_per_s=_peak_tflops(gpu, compute) * 1e12, attention_peak_flops_per_s=attn_peak,
        bandwidth_bytes_per_s=(gpu.bandwidth_tbps or 0.0) * 1e12,
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        kv_capacity_tokens=kv_capacity_tokens, coefficients=coeffs, style=style,
        admission=admission, cpu_overlap=overlaps_cpu(engine, version),
        frontend_service_s=cal.frontend_service_ms * 1e-3, frontend_servers=cal.frontend_servers,
        calibrated=calibrated, not_calibrated_because=gaps, calibration=source,
        moe_check=moe_check, measured_check=measured,
        **_floor_fields(m, cal.moe_kernels, arch.klass, full, moe_layers, en.expert_bytes,
                        _expert_kernel_dtype(expert, quant)),
        gemm_scale=arch.scales.gemm(compute), attention_scale=arch.scales.bf16_gemm,
        bandwidth_scale=arch.scales.bandwidth, ranges=ranges,
        weight_stream_bytes_per_s=_decode_gemm.weight_stream_bytes_per_s(gpu.id, compute),
        expert_stream_bytes_per_s=(_decode_gemm.weight_stream_bytes_per_s(gpu.id, expert)
                                   if m.moe is not None else 0.0),
        prefix_caching=prefix_caching, **_link_fields(gpu, tp, links),
        **_expert_gemm_fields(m, gpu, engine, tp, expert, quant, version),
        **_expert_dtype_fields(gpu, arch.scales.gemm(expert), expert, expert_note))


def _expert_kernel_dtype(expert: str, quant: QuantSpec | None) -> str:
    """The routed experts' MoE kernel dtype (perf/moe_gemm.py moe_kernel_dtype)."""
    return _moe_gemm.moe_kernel_dtype(expert, quant.method if quant else None,
                                      quant is not None and quant.block_size is not None,
                                      what_if=quant is not None and quant.what_if is not None)


def _floor_fields(m: ModelSpec, family: str, klass: str, full: int, moe_layers: int,
                  expert_bytes: int, kernel: str) -> dict[str, Any]:
    """The PerfContext fields of the MoE / MLA layers' kernel floors (perf/layer_floors.py);
    none for a dense model or an engine without tables."""
    mla = full if m.mla is not None else 0
    shared = m.moe is not None and m.moe.shared_expert_intermediate_size > 0
    text = _layer_floors.note(family, klass, kernel, mla_layers=mla, moe_layers=moe_layers,
                              expert_bytes=expert_bytes / max(1, moe_layers), shared=shared)
    if not text:
        return {}
    return {"floor_family": family, "floor_mla_layers": mla, "floor_moe_layers": moe_layers,
            "floor_kernel": kernel, "floor_shared": shared,
            "floor_held_tokens": _layer_floors.held_tokens(klass),
            "floor_note": text}


def _moe_band(klass: str, ranges: tuple[tuple[float, float], ...]
              ) -> tuple[tuple[tuple[float, float], ...], str]:
    """A MoE model's band and what public MoE rows say of it: the envelope of its GPU class's
    band and the measured / predicted spread of the public MoE rows on that class (all classes
    when it has too few; engines/moe_fits.py: no MoE model is in the fit)."""
    check, own = _moe_fits.check_for(klass)
    if not check.rows:
        return ranges, ""
    wide = tuple(envelope(dict(zip(METRICS, ranges, strict=True)), check.ranges).values())
    lo, hi = check.ranges["throughput"]
    on = (f"{klass} GPUs" if own == check.rows else
          f"GPUs of every class ({own} on {klass})" if own else "GPUs of every class")
    ttft = ""
    if "ttft" in check.ranges:
        t_lo, t_hi = check.ranges["ttft"]
        mine = _moe_fits.MOE_CHECKS.get(klass)
        every = " of every class" if not mine or mine.ttft_rows < _moe_fits.MIN_ROWS else ""
        ttft = f"; TTFT on {check.ttft_rows} rows{every}: band {t_lo:.2f}-{t_hi:.2f}"
    return wide, (f"no MoE model in the fit; measured / kvplan throughput on {check.rows} "
                  f"public MoE rows on {on}: median {check.median_ratio:.2f}, band "
                  f"{lo:.2f}-{hi:.2f} × the figure{ttft} (docs/performance-moe.md)")


def _measured_band(engine: str, klass: str, compute: str, m: ModelSpec,
                   ranges: tuple[tuple[float, float], ...]
                   ) -> tuple[tuple[tuple[float, float], ...], str]:
    """A dense model's band and what a never-fitted measured group of the same engine, GPU
    class, GEMM dtype and architecture says of it (engines/dense_checks.py): the envelope of
    the class's band and the group's measured / predicted spread; ("", unchanged) when none."""
    check = _dense_checks.check_for(engine, klass, compute, _dense_checks.shape_of(m))
    if check is None:
        return ranges, ""
    wide = tuple(envelope(dict(zip(METRICS, ranges, strict=True)), check.ranges).values())
    names = {"ttft": "TTFT", "tpot": "TPOT", "throughput": "throughput"}
    said = ", ".join(f"{names[k]} {check.median_ratio[k]:.2f} ({check.ranges[k][0]:.2f}-"
                     f"{check.ranges[k][1]:.2f})" for k in METRICS if k in check.ranges)
    return wide, (f"{check.rows} runs like this deployment ({check.label}), kept out of the "
                  f"fit, disagree with it: measured / kvplan median (p10-p90) {said}; the band "
                  "spans them (docs/performance.md)")


def _expert_dtype_fields(gpu: GpuSpec, scale: float, expert: str, note: str) -> dict[str, Any]:
    """The PerfContext fields of the routed experts' own GEMM dtype (expert_dtype_for): none
    where they run in compute_dtype without a note."""
    if not note:
        return {}
    return {"expert_compute_dtype": expert, "expert_dtype_note": note,
            "expert_peak_flops_per_s": _peak_tflops(gpu, expert) * 1e12,
            "expert_gemm_scale": scale}


def _expert_gemm_fields(m: ModelSpec, gpu: GpuSpec, engine: str, tp: int, compute: str,
                        quant: QuantSpec | None, version: str = "") -> dict[str, Any]:
    """The PerfContext fields of the routed experts' measured fused-GEMM rate
    (perf/moe_gemm.py) for the replica's own TP-split experts (perf/expert.py re-picks the
    curve for DP-shared / expert-parallel layouts); none for a dense model. `compute`: the
    experts' GEMM dtype (expert_dtype_for)."""
    if m.moe is None:
        return {}
    kernel = _expert_kernel_dtype(compute, quant)
    release = _version_key(version) if version else None
    family = _moe_gemm.kernel_family(registry.get(engine).calibration.moe_kernels, gpu.id,
                                     kernel, release)
    key = (family, gpu.id, kernel)
    if key not in _moe_gemm.CURVES and key not in _moe_gemm.EP_CURVES:
        return {"expert_gemm_source": _moe_gemm.DENSE_RATE}
    inter = m.moe.expert_intermediate_size
    # --- deepgemm --- the family this release runs at MoE TP `tp` (vLLM 0.11-0.14: DeepGEMM)
    run = (_moe_gemm.layout_family(*key, release, moe_tp=tp, ep=1, deepep=False),
           gpu.id, kernel)
    curve = _moe_gemm.curve_for_layout(*run, m.moe.num_experts, inter, tp=tp, group=1, ep=1)
    floor = _moe_gemm.ridge_tokens(_peak_tflops(gpu, compute) * 1e12,
                                   (gpu.bandwidth_tbps or 0.0) * 1e12,
                                   _moe_gemm.expert_weight_bytes(kernel, compute))
    table, source = moe_gemm_provenance(run, curve, ep=1, tp=tp)
    return {"expert_gemm_curve": curve, "expert_gemm_floor_tokens": floor,
            "expert_gemm_key": key, "expert_intermediate": inter,
            "expert_gemm_table": table, "expert_gemm_source": source,
            "expert_gemm_release": release or (),
            "expert_padding": expert_padding_for(run[0], release, m.moe.num_experts)}


def expert_padding_for(family: str, release: tuple[int, ...] | None,
                       local: int) -> _moe_gemm.Padding:
    """PerfContext.expert_padding of `family` at `release` for `local` experts on a GPU."""
    mode, least = _moe_gemm.deepgemm_rows(family, release)
    return (mode, least, local) if mode else ()


def moe_gemm_provenance(key: tuple[str, ...], curve: tuple[tuple[float, float], ...], *,
                        ep: int, tp: int = 1, group: int = 1) -> tuple[str, str]:
    """(expert_gemm_table, expert_gemm_source) of the curve read for `key` (kernel family,
    GPU id, kernel dtype) by a layout of `ep` EP ranks (≤ 1: MoE TP over max(tp, group)):
    the table's label and location, and the timed EP size read where it is another
    (moe_gemm.ep_read); or "" and the dense rate's reason."""
    if not curve:
        return "", _moe_gemm.dense_reason(key, ep)
    eff = _moe_gemm.layout_ep(key[0], tp=tp, group=group, ep=ep)
    note = _moe_gemm.ep_note(eff, _moe_gemm.ep_read(key[0], key[1], key[2], eff))
    return (_moe_gemm.table_label(key[0], ep),
            _moe_gemm.table_source(key[1], key[2], key[0]) + note)


def _link_fields(gpu: GpuSpec, tp: int, links: Links | None) -> dict[str, Any]:
    """The PerfContext fields of the links a layout crosses: TP all-reduce over the scale-out
    network when TP spans nodes (planner/nodes.py), else over PCIe at the fitted PCIe
    efficiency and latency beyond an NVLink bridge (perf/arch.py), else the GPU's own link;
    pipeline hand-offs and MoE traffic between nodes."""
    pcie = _arch.over_pcie(gpu.id, gpu.nvlink_gbps_per_gpu, tp)
    if links is not None and links.tp_bytes_per_s:
        tp_link, latency = links.tp_bytes_per_s, None
    elif pcie:
        tp_link = (PCIE_X16_BYTES_PER_S.get(gpu.pcie_gen or 4, PCIE_X16_BYTES_PER_S[4])
                   * PCIE.bandwidth_efficiency)
        latency = PCIE.allreduce_latency_us
    else:
        tp_link, latency = link_bytes_per_s(gpu), None
    out: dict[str, Any] = {"link_bytes_per_s": tp_link, "link_latency_us": latency}
    if links is not None:
        out.update(link=links.text, pp_crossings=links.pp_crossings,
                   pp_link_bytes_per_s=links.pp_bytes_per_s,
                   moe_link_bytes_per_s=links.moe_bytes_per_s or 0.0,
                   moe_node_gpus=links.moe_node_gpus)
    return out


# --------------------------------------------------------------------- step time


@fast_init
@dataclass(frozen=True)
class StepTerms:
    """The terms of one engine step on one GPU, seconds (FLOPs and bytes for the record)."""

    gemm_flops: float
    weight_bytes: float
    attention_flops: float
    kv_bytes: float
    compute_s: float  # the FLOP-bound part of the rooflines
    bandwidth_s: float  # the byte-bound part
    comm_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        return self.compute_s + self.bandwidth_s + self.comm_s + self.overhead_s

    @property
    def bound(self) -> Bound:
        terms: dict[Bound, float] = {"compute": self.compute_s, "bandwidth": self.bandwidth_s,
                                     "overhead": self.comm_s + self.overhead_s}
        return max(terms, key=terms.__getitem__)


def expert_fraction(ctx: PerfContext, tokens: float) -> float:
    """Expected share of routed experts that `tokens` tokens touch, each choosing top_k of E
    uniformly: 1 − (1 − k/E)^tokens."""
    if not ctx.num_experts:
        return 0.0
    return 1.0 - (1.0 - ctx.top_k / ctx.num_experts) ** max(tokens, 0.0)


def step_terms(ctx: PerfContext, *, decode_seqs: float, context_tokens: float,
               prefill_tokens: float = 0.0, prefill_context_tokens: float = 0.0,
               prefill_seqs: float = 0.0) -> StepTerms:
    """One step: `decode_seqs` sequences at mean context `context_tokens`, plus
    `prefill_tokens` prompt tokens whose mean causal context is `prefill_context_tokens`,
    belonging to `prefill_seqs` requests (each of which samples one token)."""
    c = ctx.coefficients
    queries = decode_seqs * (1 + ctx.spec_tokens)  # a verify step scores every draft token
    tokens = queries + prefill_tokens
    gemm_flops = (tokens * (ctx.dense_flops_per_token + ctx.expert_flops_per_token)
                  + (queries + prefill_seqs) * ctx.lm_head_flops_per_token)
    weight_bytes = (ctx.dense_read_bytes
                    + ctx.expert_bytes * expert_fraction(ctx, tokens * ctx.moe_dp))
    win = ctx.sliding_window or 0
    attn_flops = (ctx.attention_flops_per_context_token
                  * (queries * context_tokens + prefill_tokens * prefill_context_tokens)
                  + ctx.sliding_attention_flops_per_context_token
                  * (queries * min(context_tokens, win)
                     + prefill_tokens * min(prefill_context_tokens, win)))
    kv_bytes = (decode_seqs * (ctx.kv_bytes_per_token * context_tokens
                               + ctx.sliding_kv_bytes_per_token * min(context_tokens, win)
                               + ctx.state_bytes_per_seq)
                + prefill_seqs * (ctx.kv_bytes_per_token * 2 * prefill_context_tokens
                                  + ctx.sliding_kv_bytes_per_token
                                  * min(2 * prefill_context_tokens, win)))
    flop_rate = ctx.peak_flops_per_s * c.gemm_efficiency * ctx.gemm_scale
    attn_rate = ctx.attention_peak_flops_per_s * c.gemm_efficiency * ctx.attention_scale
    byte_rate = ctx.bandwidth_bytes_per_s * c.bandwidth_efficiency * ctx.bandwidth_scale
    g_c = gemm_flops / flop_rate
    if (ctx.expert_gemm_curve or ctx.expert_compute_dtype or ctx.expert_padding) \
            and ctx.expert_flops_per_token and tokens:
        # routed experts at their measured share of the dense rate (perf/moe_gemm.py: the
        # layout's curve, perf/expert.py; t counts the tokens of every DP rank meeting there)
        # of their own GEMM dtype (expert_rate_scale: gpt-oss's MXFP4 experts on Blackwell)
        # vLLM's DeepGEMM experts compute whole 128-row blocks, sized for the worst case
        # (moe_gemm.padded_rows): `rows` / the routed rows more FLOPs at the blocks' rate
        routed = tokens * ctx.moe_dp * ctx.top_k
        per_expert = routed / ctx.num_experts
        scale = 1.0  # computed rows / routed rows of this GPU's experts
        if ctx.expert_padding and tokens >= ctx.expert_padding[1]:
            mode, _, local = ctx.expert_padding
            share = local / ctx.num_experts  # this GPU's experts (EP ranks: 1 / EP)
            touched = local * expert_fraction(ctx, tokens * ctx.moe_dp)
            rows = _moe_gemm.padded_rows(mode, routed, local, routed * share, touched)
            scale = rows / (routed * share)
            per_expert = rows / max(1.0, local if mode == "all" else touched)
        curve = (ctx.expert_gemm_decode_curve if not prefill_tokens
                 and ctx.expert_gemm_decode_curve else ctx.expert_gemm_curve)
        # padded rows are computed, not weight-bound: their blocks' own measured rate, not
        # held at the ridge (the floor stands for steps the bytes term already charges)
        floor = 0.0 if scale > 1.0 else ctx.expert_gemm_floor_tokens
        r = _moe_gemm.ratio(curve, per_expert, floor) * expert_rate_scale(ctx)
        g_c += tokens * ctx.expert_flops_per_token / flop_rate * (scale / r - 1.0)
    dense_rate = (ctx.weight_stream_bytes_per_s * c.bandwidth_efficiency
                  if ctx.weight_stream_bytes_per_s else byte_rate)
    expert_rate = (ctx.expert_stream_bytes_per_s * c.bandwidth_efficiency
                   if ctx.expert_stream_bytes_per_s else byte_rate)
    g_b = (ctx.dense_read_bytes / dense_rate
           + (weight_bytes - ctx.dense_read_bytes) / expert_rate)
    a_c, a_b = attn_flops / attn_rate, kv_bytes / byte_rate
    compute_s = (g_c if g_c > g_b else 0.0) + (a_c if a_c > a_b else 0.0)
    bandwidth_s = (g_b if g_b >= g_c else 0.0) + (a_b if a_b >= a_c else 0.0)
    comm_s = 0.0
    if ctx.moe_comm_per_token_s:  # MoE layers across DP / EP ranks (perf/expert.py)
        per = (ctx.moe_comm_decode_per_token_s if not prefill_tokens
               and ctx.moe_comm_decode_per_token_s else ctx.moe_comm_per_token_s)
        comm_s = ctx.moe_comm_fixed_s + per * tokens
    elif ctx.tp > 1:
        ar_bytes = tokens * ctx.hidden_size * ACTIVATION_BYTES * 2 * (ctx.tp - 1) / ctx.tp
        lat = c.allreduce_latency_us if ctx.link_latency_us is None else ctx.link_latency_us
        comm_s = 2 * ctx.layers * (lat * 1e-6 + ar_bytes / ctx.link_bytes_per_s)
    layer_s = ctx.layers * c.layer_overhead_us * 1e-6
    if ctx.floor_family:
        layer_s += _layer_floors.extra_s(
            ctx.floor_family, ctx.floor_kernel, mla_layers=ctx.floor_mla_layers,
            moe_layers=ctx.floor_moe_layers,
            expert_bytes=ctx.expert_bytes / max(1, ctx.floor_moe_layers), tokens=tokens,
            moe_tokens=tokens * ctx.moe_dp, shared=ctx.floor_shared, held=ctx.floor_held_tokens)
    overhead_s = (c.step_overhead_ms * 1e-3 + layer_s
                  + (decode_seqs + prefill_seqs) * c.seq_overhead_us * 1e-6)
    if ctx.cpu_overlap and ctx.pp == 1:
        # the step's CPU work runs while the GPU computes: only its excess shows. Not with
        # pipeline parallelism (vllm PR #31998: PP > 1 disables async scheduling), nor with a
        # draft the engine does not keep it for (Calibration.overlap_drafts: the planner sets
        # cpu_overlap False for those; vLLM v0.14.0 keeps it for EAGLE/MTP)
        overhead_s -= min(c.step_overhead_ms * 1e-3, compute_s + bandwidth_s + comm_s + layer_s)
    if ctx.draft_steps and decode_seqs:  # the draft's sequential passes, each a small decode
        d_c = decode_seqs * ctx.draft_flops_per_token / flop_rate
        d_b = (ctx.draft_read_bytes + decode_seqs * ctx.draft_kv_bytes_per_token
               * context_tokens) / byte_rate
        compute_s += ctx.draft_steps * (d_c if d_c > d_b else 0.0)
        bandwidth_s += ctx.draft_steps * (d_b if d_b >= d_c else 0.0)
        overhead_s += ctx.draft_steps * ctx.draft_layers * c.layer_overhead_us * 1e-6
    return StepTerms(gemm_flops, weight_bytes, attn_flops, kv_bytes, compute_s, bandwidth_s,
                     comm_s, overhead_s)


def _step_s(ctx: PerfContext, d: float, ctx_len: float, p: float = 0.0, p_ctx: float = 0.0,
            p_seqs: float = 0.0) -> float:
    """Wall time of one step of the whole pipeline: the stage time × pp stages in series, plus
    the hand-offs between stages on different nodes (pipeline_handoff_s)."""
    return (step_terms(ctx, decode_seqs=d, context_tokens=ctx_len, prefill_tokens=p,
                       prefill_context_tokens=p_ctx, prefill_seqs=p_seqs).total_s * ctx.pp
            + pipeline_handoff_s(ctx, d * (1 + ctx.spec_tokens) + p))


def pipeline_handoff_s(ctx: PerfContext, tokens: float) -> float:
    """Hand-offs of one step's hidden states between pipeline stages on different nodes: each
    crossing sends tokens × hidden × 2 B (bf16 activations) over the scale-out network per GPU.
    Hand-offs inside a node (NVLink, PCIe) stay unmodelled, as before: a few µs per step."""
    if not ctx.pp_crossings or ctx.pp_link_bytes_per_s <= 0:
        return 0.0
    return (ctx.pp_crossings * tokens * ctx.hidden_size * ACTIVATION_BYTES
            / ctx.pp_link_bytes_per_s)


# ------------------------------------------------------------------ batching model


def kv_footprint_tokens(ctx: PerfContext, input_tokens: int, output_tokens: int) -> int:
    """KV tokens one running request takes from the capacity in the steady state: its mean
    footprint, input + output/2, where blocks are allocated as the sequence grows (admission
    "on_demand": vLLM, SGLang); its whole sequence, input + output, where the scheduler admits
    a request only when the blocks of its prompt and max new tokens fit beside every running
    request's (admission "reserve": TensorRT-LLM's default GUARANTEED_NO_EVICT capacity
    scheduler, which the simulation, perf/simulate.py, also follows)."""
    if ctx.admission == "reserve":
        return input_tokens + output_tokens
    return input_tokens + output_tokens // 2


def _running(ctx: PerfContext, concurrency: int, input_tokens: int, output_tokens: int) -> int:
    """Sequences the engine runs at once: concurrency, capped by max_num_seqs and by the KV
    capacity at a running request's footprint (kv_footprint_tokens)."""
    run = min(concurrency, ctx.max_num_seqs)
    if ctx.kv_capacity_tokens:
        run = min(run, max(1, ctx.kv_capacity_tokens
                           // kv_footprint_tokens(ctx, input_tokens, output_tokens)))
    return max(1, run)


def _prefill_wait_s(n: int, *, own_s: float, demand_s: float, delay_s: float) -> float:
    """Mean wait of a request behind the other requests' prefill in a closed loop of n
    requests: exact mean-value analysis (MVA; Reiser & Lavenberg 1980, "Mean-Value Analysis of
    Closed Multichain Queuing Networks", J. ACM 27(2)) of the single queue + delay network.

    Stations: one FCFS prefill server holding each request for demand_s seconds (its share of
    the mixed steps), then a delay without queue of own_s − demand_s (the rest of its own
    prefill steps, shared with other prefills) + delay_s (decode steps + per-request overhead).
    With k requests in the loop, an arriving request sees the loop as it is with k − 1 (arrival
    theorem), Q(k−1) requests at the prefill server:

        W(k) = demand_s · Q(k−1)                     wait before its own prefill
        X(k) = k / (W(k) + own_s + delay_s)          requests/s (Little's law on the loop)
        Q(k) = X(k) · (W(k) + demand_s),  Q(0) = 0   (Little's law at the server)

    and returns W(n). W stays finite (< demand_s · n) where the open M/D/1 formula diverges,
    and X(n) never falls as n grows (throughput of a closed product-form network is
    non-decreasing in its population), so more requests in flight never lose throughput."""
    q = w = 0.0
    for k in range(1, n + 1):
        w = demand_s * q
        q = k * (w + demand_s) / (w + own_s + delay_s)
    return w


def gated_wait_open_s(arrivals_per_s: float, *, step_s: float, prompt_s: float) -> float:
    """Mean wait of a prompt before its own step in a decode-first scheduler (vLLM V1), prompts
    arriving at random times at `arrivals_per_s` while other requests keep the engine busy: a
    gated batch server. Steps run back to back; a step in progress is never cut short; the
    next step takes every prompt that arrived during it (within the token budget: not
    modelled here). A step lasts C' = step_s + prompt_s · N, N the prompts that arrived during
    the step before (Poisson, mean λ·C). With ρ = λ · prompt_s < 1, from E[C'] = E[C] and
    E[C'²] = E[C²] in the stationary state:

        E[C]  = step_s / (1 − ρ)
        E[C²] = (step_s² + (2 · step_s + prompt_s) · ρ · E[C]) / (1 − ρ²)

    An arrival lands in a step with probability ∝ its length (mean length E[C²]/E[C]), waits
    its residual (half of it), then shares its own step with the λ·E[C²]/E[C] prompts that
    landed in the same step: wait = E[C²]/(2·E[C]) + prompt_s · λ · E[C²]/E[C]. Its own
    prompt and the step's decodes are not in the wait (evaluate() counts them in its own
    mixed step). Infinite at ρ ≥ 1. Hand-worked: step_s = 20 ms, prompt_s = 100 ms,
    λ = 5/s: ρ = 0.5, E[C] = 40 ms, E[C²] = 3,200 / 0.75 ms², wait = 53.3 + 53.3 ms."""
    if prompt_s < 0 or step_s <= 0 or arrivals_per_s < 0:
        raise ValueError("step_s must be > 0, prompt_s and arrivals_per_s ≥ 0")
    rho = arrivals_per_s * prompt_s
    if rho >= 1.0:
        return math.inf
    ec = step_s / (1.0 - rho)
    ec2 = (step_s * step_s + (2.0 * step_s + prompt_s) * rho * ec) / (1.0 - rho * rho)
    biased = ec2 / ec
    return biased / 2.0 + prompt_s * arrivals_per_s * biased


def gated_wait_s(n: int, *, step_s: float, prompt_s: float, cycle_s: float) -> float:
    """gated_wait_open_s in a closed loop of n requests: the n − 1 others send prompts at
    λ(W) = (n − 1) / (cycle_s + W) per second (cycle_s: one request's life without the wait),
    so the wait solves W = gated_wait_open_s(λ(W)); the left side grows and the right side
    falls with W, so bisection on [0, (n − 1) · prompt_s + step_s] (every other prompt ahead
    and the step in progress) finds it. A lone request finds the engine idle: W = 0."""
    if n <= 1:
        return 0.0
    lo, hi = 0.0, (n - 1) * prompt_s + step_s
    for _ in range(50):
        w = (lo + hi) / 2.0
        if gated_wait_open_s((n - 1) / (cycle_s + w), step_s=step_s, prompt_s=prompt_s) > w:
            lo = w
        else:
            hi = w
    return (lo + hi) / 2.0


def burst_wait_s(ctx: PerfContext, n: int, prompt_tokens: float, prompt_context: float,
                 decoding: float = 0.0, decode_context: float = 0.0) -> float:
    """Mean wait of a prompt behind the others when n prompts of `prompt_tokens` tokens arrive
    together and are prefilled first come, first served, `max_num_batched_tokens` at a time
    (the lock-step burst of a closed loop whose n clients start together): (n − 1) / 2 prompts
    ahead on average, each costing its share of a full prefill step. Hand-worked: n = 5,
    a prompt a quarter of the budget, a full step 200 ms: 2 prompts × 50 ms = 100 ms.

    evaluate() ("burst", the fitted form) waits burst_share × this (at least the steady-state
    queue of _prefill_wait_s): the calibration rows' TTFT grows with the clients × one
    prompt's prefill whatever the output length, as in a burst, but below the lock-step floor
    (docs/performance.md, Known gaps; benchmarks/ttft_harness.py prints the evidence).

    Whole-prompt admission (ctx.whole_prompts: SGLang with --enable-mixed-chunk) drains the
    burst in steps that also decode the `decoding` running sequences (mean context
    `decode_context`): a step's prefill room is the budget less one token per decoding
    sequence, and it takes k = max(1, ⌊room / prompt⌋) whole prompts (SGLang 0.5.6.post2,
    python/sglang/srt/managers/schedule_policy.py PrefillAdder: rem_input_tokens =
    max_prefill_tokens − running_bs with mixed chunks; add_one_req stops at the first prompt
    that does not fit unless the batch is still empty; scheduler.py get_new_batch_prefill
    then mixes the batch with the running decodes, mix_with_running). The wait is (n − 1) / 2
    prompts ahead, 1 / k of such a step each. Hand-worked in tests/perf/test_step_time.py."""
    if n <= 1:
        return 0.0
    budget = ctx.max_num_batched_tokens
    if ctx.whole_prompts:
        room = max(budget - decoding * (1 + ctx.spec_tokens), 1.0)
        k = max(1.0, float(math.floor(room / prompt_tokens)))
        t_step = _step_s(ctx, decoding, decode_context, k * prompt_tokens, prompt_context, k)
        return (n - 1) / 2 * t_step / k
    t_full = _step_s(ctx, 0.0, 0.0, budget, prompt_context, budget / prompt_tokens)
    return (n - 1) / 2 * t_full * prompt_tokens / budget


WaitModel = Literal["burst", "mva", "gated"]


def evaluate(ctx: PerfContext, *, concurrency: int, input_tokens: int,
             output_tokens: int, cached_tokens: int = 0,
             wait_model: WaitModel = "burst") -> PerfPoint:
    """TTFT, TPOT (= (e2e − TTFT)/(output − 1)), e2e and throughput of one replica at
    closed-loop `concurrency`, fixed input/output lengths (tokens). See the module docstring.
    `cached_tokens` of each prompt are found in the prefix cache: prefill computes only the
    other i − cached tokens, which attend over the cached ones (p_ctx = cached + new / 2).
    `wait_model` ("mixed" engines only): the wait behind other prompts as the fitted share of
    the lock-step burst queue, at least the steady-state mean-value analysis ("burst",
    burst_wait_s and _prefill_wait_s: what the shipped coefficients were fitted with; held
    out, TTFT median 26.2 → 17.1 % against the MVA alone), the MVA alone ("mva", the previous
    fitted form, and the step-time stage of benchmarks/perf_fit.py) or the gated batch server
    the simulation runs ("gated", gated_wait_s: agrees with the desynchronised simulation, but
    refitted on it the held-out TTFT error grows; docs/traffic.md, "Checks")."""
    if concurrency < 1 or input_tokens < 1 or output_tokens < 1:
        raise ValueError("concurrency, input_tokens and output_tokens must be ≥ 1")
    if not 0 <= cached_tokens < input_tokens:
        raise ValueError("cached_tokens must be in [0, input_tokens)")
    c = ctx.coefficients
    b = _running(ctx, concurrency, input_tokens, output_tokens)
    o = output_tokens
    i = input_tokens - cached_tokens  # prefill work per request
    p_ctx = cached_tokens + i / 2  # mean context a prefill token attends over
    decode_steps = max(o - 1, 1)  # output tokens after the first
    # Speculative decoding: each decode step gains per_step tokens and scores q per sequence.
    per_step, q = tokens_per_step(ctx), 1 + ctx.spec_tokens
    steps_dec = decode_steps / per_step  # decode steps per request
    mean_ctx = input_tokens + o / 2
    budget = ctx.max_num_batched_tokens
    if ctx.style == "mixed":
        # Decode-first chunked prefill: requests that arrive together are prefilled together
        # up to the token budget; the sub-waves this cuts a burst into then stay apart, each
        # prefilled in its own mixed steps while the others decode (steady state).
        # Steps of a request's own prefill, fractional: the last chunk of a prompt just over
        # the budget is a small piece of a step, not a whole one (no calibration row has
        # i > budget, so the fit is unchanged; benchmarks/perf_fit.py).
        own_steps = max(1.0, i / budget)
        life = steps_dec + own_steps  # steps in one request's life when prefill is not short
        # Requests completed per step: b / life, unless every step is full (prefill-bound):
        # then each step carries `budget` tokens, i prefill + (O − 1) decode per request.
        rate = min(b / life, budget / (i + steps_dec * q))
        saturated = b / life > budget / (i + steps_dec * q)
        steps = b / rate  # steps per request life (Little's law)
        decoding = rate * steps_dec  # mean sequences decoding per step
        chunk = max(budget - decoding * q, 1.0)  # prefill room in a mixed step
        piece = min(chunk, i * max(1.0, rate))  # prefill tokens a mixed step carries: the
        # requests that arrive per step (at least one), up to the room left by decodes
        mixed = min(steps, b * i / piece)  # steps per life that carry prefill
        t_mix = _step_s(ctx, decoding, mean_ctx, piece, p_ctx, piece / i)
        t_dec = _step_s(ctx, decoding, mean_ctx)
        step_s = (mixed * t_mix + (steps - mixed) * t_dec) / steps  # mean step time
        # Closed-loop wait behind the other requests' prefill (_prefill_wait_s): each request
        # holds the prefill station for its share of the mixed steps, then decodes.
        own_s = (steps - steps_dec) * t_mix
        # Its decode phase (TPOT): the mixed steps of the others' prompts, not its own
        # (those are in TTFT): at one request, every mixed step is its own, TPOT = t_dec
        shared = min(steps_dec, max(0.0, mixed - (steps - steps_dec)))
        decode_s = (shared * t_mix + (steps_dec - shared) * t_dec) / steps_dec
        if wait_model == "gated":  # the others' prompts as a gated batch server
            ttft = own_s + gated_wait_s(
                b, step_s=t_dec, prompt_s=max(_step_s(ctx, decoding, mean_ctx, i, p_ctx, 1)
                                              - t_dec, 0.0),
                cycle_s=steps * step_s + ctx.request_overhead_s)
        else:
            mva = _prefill_wait_s(
                b, own_s=own_s, demand_s=mixed / b * t_mix,
                delay_s=steps_dec * step_s + ctx.request_overhead_s)
            if wait_model == "mva":
                ttft = own_s + mva
            else:  # "burst": a share of the lock-step queue, at least the steady-state one
                burst = burst_wait_s(ctx, b, i, p_ctx, decoding, mean_ctx)
                ttft = own_s + max(c.burst_share * burst, mva)
    else:
        # Prefill-first: a prefill batch of up to `budget` tokens runs before decoding resumes,
        # so a closed loop with fixed lengths runs in waves: the b requests arrive together,
        # are prefilled in batches, decode in lock-step and finish together. A request's first
        # token comes at the end of its batch: mean TTFT = (first batch + all batches) / 2
        # (exact for equal batches); after it, a request waits the rest of the wave's prefill
        # (all − TTFT on average) before decoding resumes, which TPOT carries over O − 1.
        wave = b * i
        full, rest = divmod(wave, budget)
        t_full = _step_s(ctx, 0.0, 0.0, budget, p_ctx, budget / i) if full else 0.0
        t_rest = _step_s(ctx, 0.0, 0.0, rest, p_ctx, rest / i) if rest else 0.0
        t_all = full * t_full + t_rest
        ttft = ((t_full if full else t_rest) + t_all) / 2
        t_dec = _step_s(ctx, b, mean_ctx)
        step_s = decode_s = t_dec + (t_all - ttft) / steps_dec
        saturated = False
    tpot = decode_s / per_step  # per output token
    ttft += ctx.request_overhead_s
    e2e = ttft + decode_steps * tpot if o > 1 else ttft
    if concurrency > b:  # closed loop: the others wait for a slot (Little's law)
        e2e_all = e2e * concurrency / b
        ttft += e2e_all - e2e
        e2e = e2e_all
    rps = concurrency / e2e
    tok_s = rps * o
    dec = step_terms(ctx, decode_seqs=b, context_tokens=mean_ctx)
    (lo_f, hi_f), (lo_p, hi_p), (lo_t, hi_t) = ctx.ranges  # METRICS order
    ttft_ms, tpot_ms = ttft * 1e3, tpot * 1e3
    return PerfPoint(
        concurrency=concurrency, running=b, ttft_ms=ttft_ms, tpot_ms=tpot_ms, e2e_ms=e2e * 1e3,
        output_tokens_per_s=tok_s, output_tokens_per_s_per_gpu=tok_s / (ctx.tp * ctx.pp),
        requests_per_s=rps,
        ttft_ms_low=ttft_ms * lo_f, ttft_ms_high=ttft_ms * hi_f,
        tpot_ms_low=tpot_ms * lo_p, tpot_ms_high=tpot_ms * hi_p,
        output_tokens_per_s_low=tok_s * lo_t, output_tokens_per_s_high=tok_s * hi_t,
        decode_bound=dec.bound, saturated=saturated, calibrated=ctx.calibrated)


def concurrency_levels(max_concurrency: int) -> list[int]:
    """1, 2, 4, … below max_concurrency, then max_concurrency itself."""
    out, c = [], 1
    while c < max_concurrency:
        out.append(c)
        c *= 2
    return out + [max_concurrency]


def concurrency_table(ctx: PerfContext, input_tokens: int, output_tokens: int,
                      max_concurrency: int, cached_tokens: int = 0) -> list[PerfPoint]:
    """evaluate() at concurrency 1, 2, 4, … and max_concurrency."""
    return [evaluate(ctx, concurrency=b, input_tokens=input_tokens, output_tokens=output_tokens,
                     cached_tokens=cached_tokens) for b in concurrency_levels(max_concurrency)]
