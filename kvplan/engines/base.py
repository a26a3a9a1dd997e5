"""The engine interface. Every engine module implements `Engine` completely; the planner, the
renderers and `kvplan check` know engines only through it (and the registry lists them).

An engine answers five questions for one model × GPU × settings:
  resolve  — its defaults for every knob the user left out (its own refusals raise);
  memory   — its start-up accounting → a `MemoryResult` (the plan's memory and kv_cache
             sections, fit, problems);
  fraction_needed / fraction_ceiling — the budget knob that holds N blocks, and the most
             that still starts (the planner's searches are written once over these);
  command  — its launch line.
"""

from __future__ import annotations

import re
import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, TypeVar

from ..knobs import FP8_LEAST, compute_capability
from ..model.whatif import FORMATS, MODELOPT
from ..specs import KvCache, MemoryBreakdown, Problem
from ..units import fast_init
from ..versions import parse_version, release_key

if TYPE_CHECKING:
    from ..knobs import Knobs, Layout
    from ..model.whatif import WhatIfFormat
    from ..specs import (
        Deployment,
        EngineOptions,
        GpuSpec,
        ModelSpec,
        NodeLaunch,
        PlanLora,
        PlanMultimodal,
        PlanOffload,
        PlanSpeculative,
        Recommendations,
        StageBreakdown,
        Workload,
    )


OptionsT = TypeVar("OptionsT", bound="EngineOptions")


class Kernel(NamedTuple):
    """A kernel family an engine serves a checkpoint format with (Engine.checkpoint_kernels)."""

    method: str  # the quantization method it detects, as the engine's --quantization spells it
    least: tuple[int, int]  # the least compute capability it runs at
    # the releases this fact holds in: from `since` (None: every earlier one) up to, not
    # including, `until` (None: every later one); a format whose rule changed lists each era
    since: str | None = None
    until: str | None = None

    def holds_in(self, version: str) -> bool:
        v = parse_version(version)
        return ((self.since is None or parse_version(self.since) <= v)
                and (self.until is None or v < parse_version(self.until)))


def engine_options(dep: Deployment, kind: type[OptionsT]) -> OptionsT:
    """The engine's own options (`kind`, its EngineOptions subclass) of a deployment it
    resolved."""
    opts = dep.options
    if not isinstance(opts, kind):
        raise TypeError(f"a {dep.engine} deployment carries {type(opts).__name__}, "
                        f"not {kind.__name__}")
    return opts


def memory_notes(*, budget: str, activation: str, non_torch: str, kv: str, kv_tokens_label: str,
                 cudagraph: str | None = None) -> dict[str, str]:
    """What each memory line means for this engine (the plan's memory.notes, shown beside the
    numbers): budget, e.g. "total × gpu_memory_utilization 0.92"; kv_tokens_label, the engine's
    own name for its KV capacity line; cudagraph None: the engine has no separate CUDA-graph
    line."""
    out = {"budget": budget, "activation": activation, "non_torch": non_torch, "kv": kv,
           "kv_tokens_label": kv_tokens_label}
    if cudagraph is not None:
        out["cudagraph"] = cudagraph
    return out


def worst_stage(stages: Sequence[StageBreakdown]) -> StageBreakdown:
    """The most constrained pipeline stage: fewest KV blocks, then the largest blocks."""
    return min(stages, key=lambda st: (st.num_blocks, -st.bytes_per_block))


# How an engine meets a MoE layer under DP attention (perf/expert.py, Engine.moe_token_split,
# dense_mlp_mode, dp_gather_all_reduce): "" is the plain form in each
TokenSplit = Literal["", "scatter", "chunk", "gathered"]
DenseMlpMode = Literal["", "full", "local"]
GatherAllReduce = Literal["", "prefill", "always"]


@fast_init
@dataclass(frozen=True)
class MemoryResult:
    """An engine's start-up accounting for one deployment: the plan's `memory` and `kv_cache`
    sections as the engine fills them (the most constrained worker), and what the planner's
    searches read beyond them. Built by `memory_result`."""

    era: str
    memory: MemoryBreakdown
    # effective_max_concurrency_with_prefix stays None: it depends on the workload (planner)
    kv_cache: KvCache
    reserved_blocks: int  # blocks requests can never use (vLLM's null block)
    max_model_len: int  # the length in force (TGI 3.x: decided by the warm-up)
    fits: bool
    problems: list[Problem]
    request_blocks: Callable[[int], int] = field(compare=False, repr=False)
    # Knobs the engine only decides at start-up (SGLang's max_running_requests, TGI 3.x's
    # max_total_tokens): shown as the engine's defaults.
    engine_defaults: dict[str, int | None] = field(default_factory=dict)
    # Optional features (docs/features.md): None when unused or not modelled by the engine.
    speculative: PlanSpeculative | None = None
    lora: PlanLora | None = None
    offload: PlanOffload | None = None
    multimodal: PlanMultimodal | None = None

    @property
    def stages(self) -> list[StageBreakdown]:
        return self.memory.stages

    @cached_property
    def worst(self) -> StageBreakdown:
        """The most constrained stage (worked out once: the planner reads it often)."""
        return worst_stage(self.memory.stages)

    @property
    def num_blocks(self) -> int:
        return self.kv_cache.num_blocks

    @property
    def block_size(self) -> int:
        return self.kv_cache.block_size

    @property
    def max_concurrency(self) -> float:
        return self.kv_cache.max_concurrency

    @property
    def max_model_len_fit(self) -> int:
        return self.kv_cache.max_model_len_fit

    @property
    def usable_blocks(self) -> int:
        return max(0, self.kv_cache.num_blocks - self.reserved_blocks)

    def shared_blocks(self, length: int, shared_tokens: int) -> int:
        """The full blocks of a prefix every request of `length` tokens shares: stored once
        when prefix caching is on (vLLM hashes and shares full blocks only; the caller passes
        0 where sharing is off or not modelled)."""
        return min(shared_tokens, length) // self.block_size

    def blocks_for(self, n: int, length: int, shared_tokens: int = 0) -> int:
        """Blocks `n` requests of `length` tokens hold at once:
        s + n × (request_blocks(length) − s), s = shared_blocks (0 requests: 0)."""
        s = self.shared_blocks(length, shared_tokens)
        return s + n * (self.request_blocks(length) - s) if n else 0

    def requests_held(self, length: int, shared_tokens: int = 0) -> int:
        """Requests of `length` tokens the usable blocks hold at once, sharing the full blocks
        of their first `shared_tokens`: (usable − s) // (request_blocks(length) − s)."""
        s = self.shared_blocks(length, shared_tokens)
        per_request = self.request_blocks(length) - s
        return max(0, self.usable_blocks - s) // per_request if per_request > 0 else 0


def memory_result(gpu: GpuSpec, dep: Deployment, *, era: str, budget_bytes: int,
                  stages: list[StageBreakdown], cudagraph_in_budget: bool, estimated: list[str],
                  notes: dict[str, str], bytes_per_token: int, block_size: int, num_blocks: int,
                  tokens: int, max_model_len: int, max_concurrency: float, max_model_len_fit: int,
                  fits: bool, problems: list[Problem], request_blocks: Callable[[int], int],
                  reserved_blocks: int = 0, engine_defaults: dict[str, int | None] | None = None,
                  speculative: PlanSpeculative | None = None, lora: PlanLora | None = None,
                  offload: PlanOffload | None = None,
                  multimodal: PlanMultimodal | None = None) -> MemoryResult:
    """The one way an engine reports its accounting. The memory section shows the most
    constrained stage; `estimated` names the MemoryBreakdown fields that are estimates
    ("total_bytes" is added when the device total is the catalogue's estimate); num_blocks is
    per GPU, the minimum over workers (including any null block); tokens is the capacity line
    as the engine prints it; request_blocks(length) is the blocks one request holds."""
    worst = worst_stage(stages)
    shortfall = max(-worst.kv_cache_bytes, 0)  # negative KV: the budget falls short by that much
    stages = [s if s.kv_cache_bytes >= 0 else s.model_copy(update={"kv_cache_bytes": 0})
              for s in stages]
    if gpu.cuda_total_estimated and not dep.user_set("gpu_total_bytes"):
        estimated = [*estimated, "total_bytes"]
    memory = MemoryBreakdown(
        total_bytes=dep.gpu_total_bytes, budget_bytes=max(budget_bytes, 0),
        weights_bytes=worst.weights_bytes, weights_tensor_bytes=worst.weights_tensor_bytes,
        activation_bytes=worst.activation_bytes, non_torch_bytes=worst.non_torch_bytes,
        cudagraph_bytes=worst.cudagraph_bytes, cudagraph_in_budget=cudagraph_in_budget,
        kv_cache_bytes=max(worst.kv_cache_bytes, 0), kv_shortfall_bytes=shortfall,
        estimated=estimated,
        draft_weights_bytes=speculative.draft_weights_bytes if speculative else 0,
        lora_bytes=lora.gpu_bytes if lora else 0, notes=notes, stages=stages)
    kv_cache = KvCache(
        bytes_per_token=bytes_per_token, bytes_per_block=worst.bytes_per_block,
        bytes_per_request=request_blocks(max_model_len) * worst.bytes_per_block
        if max_model_len else 0,
        block_size=block_size, num_blocks=num_blocks, tokens=tokens,
        max_concurrency=round(max_concurrency, 2), max_model_len_fit=max_model_len_fit)
    return MemoryResult(era=era, memory=memory, kv_cache=kv_cache,
                        reserved_blocks=reserved_blocks, max_model_len=max_model_len, fits=fits,
                        problems=problems, request_blocks=request_blocks,
                        engine_defaults=engine_defaults or {}, speculative=speculative, lora=lora,
                        offload=offload, multimodal=multimodal)


@dataclass(frozen=True)
class Coefficients:
    """Named efficiency and overhead coefficients of one engine era (kvplan/perf/step.py).

    gemm_efficiency: achieved / dense peak FLOP/s in large GEMMs and prefill attention;
    bandwidth_efficiency: achieved / peak HBM bytes/s when streaming weights and KV;
    step_overhead_ms: scheduler, sampling and launch cost per engine step;
    layer_overhead_us: per decoder layer per step (kernel launches, norms, rotary, small ops);
    seq_overhead_us: per sequence in a step (scheduling, sampling, detokenising: CPU work);
    allreduce_latency_us: fixed cost of one TP all-reduce;
    request_overhead_ms: per request in TTFT (HTTP, tokenizer, detokenizer, first scheduling);
    burst_share: share of the lock-step burst queue a prompt waits in ("mixed" engines:
    kvplan/perf/step.py burst_wait_s; a property of the closed-loop harness, fitted; 0: the
    steady-state queue only);
    dynamo_front_end_ms: per request in TTFT on top of request_overhead_ms when requests pass
    NVIDIA Dynamo's front end and worker wrapper instead of the engine's own server (fitted on
    the calibration rows collected that way, docs/front-end-overhead.md; kvplan's plans launch
    the engines' own servers and never add it)."""

    gemm_efficiency: float
    bandwidth_efficiency: float
    step_overhead_ms: float
    layer_overhead_us: float
    seq_overhead_us: float
    allreduce_latency_us: float
    request_overhead_ms: float
    burst_share: float = 0.0
    dynamo_front_end_ms: float = 0.0


@dataclass(frozen=True)
class Calibration:
    """What the step-time model (kvplan/perf/step.py) knows about an engine.

    style: "mixed" (prefill chunks ride in decode steps) or "separate" (a prefill batch pauses
    decoding); coefficients: the engine's own fit, or None to borrow those of the engine named
    by `borrows` (same batching style, no calibration rows: never a calibrated prediction);
    versions: the releases with calibration rows (benchmarks/data/perf_calibration.csv); a
    version between the first and last (major.minor) is a calibrated era.
    admission: how the scheduler admits a waiting request (perf/simulate.py): "on_demand" —
    when the KV blocks of its first chunk are free, preempting the newest request when a later
    step runs short (vLLM); "reserve" — only when the blocks of its whole sequence (prompt +
    max new tokens) fit beside every running request's whole sequence, so none is ever evicted
    (TensorRT-LLM's default GUARANTEED_NO_EVICT capacity scheduler). Prefill-first engines
    ("separate") admit by SGLang's reserve ratio whatever this says.
    cpu_overlap_from: the first release whose default scheduling overlaps the per-step CPU work
    (step_overhead_ms) with the GPU's step (vLLM's async scheduling: the scheduler prepares step
    N+1 while the GPU runs step N); "" when no release does (as modelled).
    overlap_drafts: the speculative methods that keep that overlap (vLLM ≥ 0.14.0: EAGLE-family
    and MTP drafts); with any other draft the step's CPU work is serial again.
    frontend_service_ms / frontend_servers: the serving front end (vLLM's API-server process,
    SGLang's tokenizer manager) as `frontend_servers` FIFO servers each busy that long per
    request: it caps a replica at frontend_servers / frontend_service_ms requests per ms and
    queues a burst (the k-th of a burst starts (k − 1) × service / servers late); its latency
    on an idle server is inside request_overhead_ms."""

    style: Literal["mixed", "separate"]
    coefficients: Coefficients | None = None
    versions: tuple[str, ...] = ()
    borrows: str | None = None
    # the engine whose TTFT terms (request_overhead_ms, burst_share, dynamo_front_end_ms) the
    # own coefficients copy, when the engine has no TTFT measurements (plans say so)
    ttft_from: str | None = None
    admission: Literal["on_demand", "reserve"] = "on_demand"
    # --- overheads ---
    cpu_overlap_from: str = ""
    overlap_drafts: frozenset[str] = frozenset()
    # --- frontend --- the serving front end as a queue (perf/simulate.py, planner/traffic.py):
    # CPU time one front-end process spends per request (HTTP, chat template, tokenisation,
    # request bookkeeping; ms; 0: not modelled) and how many such processes serve a replica
    frontend_service_ms: float = 0.0
    frontend_servers: int = 1
    # --- moe --- the fused-MoE kernel family whose measured tables time this engine's routed
    # experts (perf/moe_gemm.py CURVES); "": none measured (experts at the dense GEMM rate)
    moe_kernels: str = ""
    # --- bwmxfp4 --- the GEMM dtype this engine's default MXFP4 MoE kernel computes a real
    # MXFP4 checkpoint's routed experts in (gpt-oss), per architecture with FP4 tensor cores
    # ((GpuSpec.arch, dtype) pairs; "bfloat16": FP4 weights × bf16 activations; "fp8": ×
    # MXFP8 activations; "fp4": FP4 × FP4); an architecture not named keeps "fp4" (not
    # verified from the engine's source: perf/step.py expert_dtype_for; docs/moe-gemm.md)
    mxfp4_expert_dtype: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if (self.coefficients is None) == (self.borrows is None):
            raise ValueError("a Calibration has its own coefficients or borrows another "
                             "engine's, not both or neither")


@dataclass(frozen=True)
class EnvFlag:
    """An environment variable that a range of an engine's releases reads for one of its flags'
    settings (`kvplan check`, deploy/env_flags.py). Releases are strings such as "0.15.1";
    `reads` is the first and last release that read the variable (last None: every later one),
    `env_wins` the releases in which a set variable overrides the flag when both are given
    (elsewhere the flag wins), `flag_from` the first release that has the flag at all (before
    it only the variable sets the value), `source` where each fact was read."""

    flag: str
    reads: tuple[str, str | None]
    env_wins: tuple[str, str] | None = None
    flag_from: str | None = None
    source: str = ""

    def read_by(self, version: str) -> bool:
        v, last = parse_version(version), self.reads[1]
        return parse_version(self.reads[0]) <= v and (last is None or v <= parse_version(last))

    def wins_over_flag(self, version: str) -> bool:
        return self.env_wins is not None and parse_version(self.env_wins[0]) <= \
            parse_version(version) <= parse_version(self.env_wins[1])

    def has_flag(self, version: str) -> bool:
        return self.flag_from is None or parse_version(version) >= parse_version(self.flag_from)

    def releases(self) -> str:
        """The releases that read the variable, as text: "0.9.0–0.15.1", "0.9.0 and later"."""
        first, last = self.reads
        return f"{first}–{last}" if last else f"{first} and later"


class ValueFrom(NamedTuple):
    """A value of a flag that only later releases take (FlagReleases.values): the first release
    that takes it, the value that takes its place before ("" if none), where it was read."""

    first: str
    before: str = ""
    source: str = ""


@dataclass(frozen=True)
class FlagReleases:
    """The releases of an engine that have one of its flags (`kvplan check`): from `first`
    (None: every release modelled) up to, not including, `removed` (None: still there). An
    engine whose argument parser refuses an unknown flag does not start on it in any other
    release. `instead_before` / `instead_after`: what to write in the releases before `first` /
    from `removed` ("{value}": the value the file gives the flag; "": nothing, and the engine
    writes no other spelling there: `kvplan plan` drops the knob); `source`: where each fact was
    read. Releases compare with their .postN (release_key)."""

    first: str | None = None
    removed: str | None = None
    instead_before: str = ""
    instead_after: str = ""
    source: str = ""
    # the flag that the releases before `first` take in its place, with the same value (TGI
    # 1.x's --max-input-length for --max-input-tokens): `kvplan plan` writes it there
    older: str = ""
    # values of the flag that only later releases take (the parser's `choices`), lower case; a
    # release before refuses the value and does not start (`plan` drops it with an error,
    # `check` refuses it: planner/plan.py release_gate, deploy/check.py)
    values: Mapping[str, ValueFrom] = field(default_factory=dict)

    def in_release(self, version: str) -> bool:
        v = release_key(version)
        return ((self.first is None or v >= release_key(self.first))
                and (self.removed is None or v < release_key(self.removed)))

    def spelled(self, flag: str, version: str) -> str | None:
        """`flag` as `version` spells it: itself, the older spelling, or None (not there)."""
        if self.in_release(version):
            return flag
        before = self.first is not None and release_key(version) < release_key(self.first)
        return self.older if before and self.older else None

    def instead(self, version: str) -> str:
        """What to write in place of the flag in `version` (instead_before or instead_after, by
        the side of the releases that have it `version` falls on); "" where it has the flag."""
        if self.in_release(version):
            return ""
        if self.removed is not None and release_key(version) >= release_key(self.removed):
            return self.instead_after
        return self.instead_before

    def when(self, version: str) -> str:
        """Why `version` lacks the flag: "first in X" or "removed in X"."""
        if self.removed is not None and release_key(version) >= release_key(self.removed):
            return f"removed in {self.removed}"
        return f"first in {self.first}"

    def value_refused(self, value: object, version: str) -> ValueFrom | None:
        """The rule of `value` when `version` refuses it; None: the release takes it."""
        rule = self.values.get(str(value).strip().lower())
        return rule if rule is not None and release_key(version) < release_key(rule.first) else None


def release_line(syntax: DeploySyntax, line: str, version: str) -> str:
    """A launch line with each flag of `syntax.flag_releases` in `version`'s spelling: renamed to
    its older form (FlagReleases.older) or, where the release has none and the engine writes no
    other spelling (FlagReleases.instead), left out with its value. `kvplan plan` drops the
    knobs the user gave for such a flag first (planner/plan.py, with an error); this keeps what
    the engine chose itself (a checkpoint's FP8 KV cache) off a line the release would refuse."""
    if not syntax.flag_releases:
        return line
    words, out, i = shlex.split(line), [], 0
    while i < len(words):
        word = words[i]
        i += 1
        flag, eq, _ = word.partition("=")
        rule = syntax.flag_releases.get(flag)
        if rule is None or rule.instead(version):
            out.append(word)
            continue
        spelled = rule.spelled(flag, version)
        takes_value = not eq and syntax.cli_flags.get(flag, ("", "bool"))[1] not in ("bool", "off")
        if spelled is None:
            i += 1 if takes_value and i < len(words) and not words[i].startswith("-") else 0
            continue
        out.append(spelled + word[len(flag):])
    return shlex.join(out)


@dataclass(frozen=True)
class DeploySyntax:
    """How deployment files spell this engine: for `kvplan check`."""

    # engine flag → (knob, kind: int|hint|float|str|bool|list)
    cli_flags: Mapping[str, tuple[str, str]]
    boolean_flags: frozenset[str] = frozenset()
    # (executable basename, first argument or None) and `python -m MODULE` entry points
    executables: tuple[tuple[str, str | None], ...] = ()
    modules: tuple[str, ...] = ()
    image_versions: tuple[re.Pattern[str], ...] = ()
    pip_version: re.Pattern[str] | None = None
    env_flags: Mapping[str, str] = field(default_factory=dict)  # env var → flag (TGI's launcher)
    image_entrypoints: tuple[re.Pattern[str], ...] = ()  # images whose entrypoint is the server
    positional_model: bool = False  # `vllm serve MODEL`, `trtllm-serve MODEL`
    # Valid flags kvplan does not model (engines/flags.py): kept; any flag in none of
    # cli_flags, boolean_flags and known_flags is one the engine would refuse.
    known_flags: frozenset[str] = frozenset()
    # (knobs, model) → knobs: flags that together form one knob (SGLang's --speculative-*);
    # a ValueError names what is wrong
    combine: Callable[[dict[str, Any], str | None], dict[str, Any]] | None = None
    # memory features under flags kvplan does not model for this engine: flag → what it is
    # (`kvplan check` warns that the plan leaves their memory out)
    unmodelled_features: Mapping[str, str] = field(default_factory=dict)
    # the per-modality form `--limit-mm-per-prompt.image 4` (vLLM's argument parser)
    dotted_mm_limit: bool = False
    # --- flagrel --- flags only some releases have (FlagReleases): flag → its releases; a
    # release without it refuses to start on it (a dotted key `--FLAG.KEY` counts as FLAG)
    flag_releases: Mapping[str, FlagReleases] = field(default_factory=dict)
    # JSON-object flags whose keys the argument parser also takes one at a time,
    # `--FLAG.KEY VALUE` (vLLM's dotted form: `--eplb-config.num_redundant_experts 8`), read as
    # that object; and the first release whose parser takes any `--FLAG.KEY` (None: every one)
    dotted_json: frozenset[str] = frozenset()
    dotted_from: str | None = None
    # a YAML file whose keys are this engine's flag names (vLLM's `serve --config FILE`)
    config_yaml: bool = False
    # --- schemas (#23) --- what deployment stacks know of the engine (kvplan/deploy/emit.py
    # writes them, manifests.py reads them): the published container image ("{v}" = the engine
    # release), Dynamo's backend module that runs the engine in-process and that backend's
    # runtime image ("{v}" = the Dynamo release), the stacks (STACKS) whose model server is this
    # engine, and whether its argument parser takes `--flag_name` for `--flag-name`
    image: str | None = None
    dynamo_module: str | None = None
    dynamo_image: str | None = None
    stacks: frozenset[str] = frozenset()
    underscore_flags: bool = False
    # Dynamo's backend spells the engine's settings its own way (dynamo.trtllm's argparse, not
    # trtllm-serve's): its flag → the engine's flag; and its flags the engine does not take
    # (name → takes a value), dropped before planning. Empty: it passes the engine's own flags.
    dynamo_flags: Mapping[str, str] = field(default_factory=dict)
    dynamo_own_flags: Mapping[str, bool] = field(default_factory=dict)
    # --- emitmn --- settings Dynamo's backend passes the engine where its own flags say nothing
    # and the engine's release (None: the newest modelled) would default otherwise: knob →
    # value; a Dynamo worker is planned with them
    dynamo_defaults: Callable[[str | None], Mapping[str, Any]] | None = None
    # --- checkenv --- environment variables that some releases read in place of a flag (the
    # release decides: EnvFlag), applied once the command's release is known; `env_flags` above
    # are read by every release
    versioned_env: Mapping[str, EnvFlag] = field(default_factory=dict)
    # --- emitport --- the port the engine's server listens on when its launch line names none,
    # for the files emit.py writes around that line: its own --port default (None: undeclared,
    # and files that expose a port are not written), and `image_port` when the environment of
    # its published image (`image`) changes that default
    port: int | None = None
    image_port: int | None = None
    # the server binds only the loopback interface unless its launch line says --host: emit.py
    # adds `--host 0.0.0.0` where a Service, a published port or a probe reaches it from outside
    loopback_host: bool = False
    # --- emitshm --- the size limit of the in-memory /dev/shm the engine's own Kubernetes
    # examples mount in a pod of several GPUs (NCCL between them outgrows the container's 64 MiB
    # default); emit.py mounts one in every such pod, without a limit when None (the node's
    # memory, as `docker run --ipc host` shares the host's)
    shm_size: str | None = None
    # --- amdemit --- the engine's published ROCm image for AMD GPUs, given the engine release
    # and the GPU's gfx target (GpuSpec.compute_capability, e.g. gfx942): (image, note). An
    # upper-case word in the image is a placeholder the user fills, which `note` says how to
    # (emit.py writes it in the file's header); None: no ROCm image of that release for that
    # target (emit.py refuses the AMD GPU); the field None: the engine has no ROCm build
    rocm_image: Callable[[str, str], tuple[str, str | None] | None] | None = None


# --- schemas (#23) --- deployment stacks that run one engine as their model server, by their
# own design (an engine names those it backs in DeploySyntax.stacks): KServe's
# LLMInferenceService and Hugging Face InferenceService runtime, the llm-d modelservice chart, the
# vLLM production-stack chart, Ray Serve LLM (build_openai_app) and NVIDIA NIM's LLM backend.
STACKS = ("kserve", "llm-d", "production-stack", "ray-serve-llm", "nim")


def unsupported_knobs(cli_flags: Mapping[str, tuple[str, str]],
                      settings: Mapping[str, str]) -> frozenset[str]:
    """The knobs an engine refuses: every knob neither its flag table nor its `settings` name,
    less those kvplan reads for every engine (the device total); names in the table that are
    not knobs (model, revision, flags `combine` folds into one knob) do not matter."""
    from ..knobs import KNOB_NAMES, KVPLAN_KNOBS

    declared = {knob for knob, _kind in cli_flags.values()} | set(settings)
    return frozenset(KNOB_NAMES) - KVPLAN_KNOBS - declared


def knob_flags(cli_flags: Mapping[str, tuple[str, str]], knobs: Iterable[str],
               settings: Mapping[str, str] | None = None) -> dict[str, str]:
    """Engine.flags derived from the engine's flag table (DeploySyntax.cli_flags): knob → the
    first flag that sets it (aliases follow their flag in the table), in `knobs` order; a knob
    no flag sets takes its name from `settings` (TensorRT-LLM's YAML fields)."""
    first: dict[str, str] = {}
    for flag, (knob, _kind) in cli_flags.items():
        first.setdefault(knob, flag)
    out = {}
    for knob in knobs:
        name = first.get(knob) or (settings or {}).get(knob)
        if name is None:
            raise ValueError(f"no flag or setting of the engine sets {knob!r}")
        out[knob] = name
    return out


def option_flags(dep: Deployment, cli_flags: Mapping[str, tuple[str, str]]) -> list[str]:
    """The launch-line flags of the engine's own options the user gave, in its options type's
    order, each under the first flag the engine's table names for it: a true boolean as the bare
    flag, a float as %g; lists, mappings and options without a flag are the engine's to write."""
    given = [name for name in type(dep.options).model_fields if dep.user_set(name)]
    if not given:  # (most plans: the flag table is not read)
        return []
    first: dict[str, str] = {}
    for flag, (knob, _kind) in cli_flags.items():
        first.setdefault(knob, flag)
    args: list[str] = []
    for name in given:
        value = getattr(dep.options, name)
        spelled = first.get(name)
        if spelled is None or isinstance(value, (list, dict)):
            continue
        if isinstance(value, bool):
            args += [spelled] if value else []
        else:
            args += [spelled, f"{value:g}" if isinstance(value, float) else str(value)]
    return args


def batched_tokens_flag_value(rec: Recommendations, dep: Deployment) -> int | None:
    """The prefill token budget a launch line sets: the latency-driven recommendation, else the
    user's own value; None = leave the engine's default."""
    if rec.max_num_batched_tokens is not None and rec.max_num_batched_tokens.value:
        return int(rec.max_num_batched_tokens.value)
    return dep.max_num_batched_tokens if dep.user_set("max_num_batched_tokens") else None


class Engine(ABC):
    """One serving engine, implemented completely by each engine module."""

    name: ClassVar[str]
    label: ClassVar[str]
    newest_version: ClassVar[str]
    flags: ClassVar[Mapping[str, str]]  # generic knob → the engine's flag (the launch line's)
    syntax: ClassVar[DeploySyntax]
    # Knobs the engine reads without a flag of its own in syntax.cli_flags: knob → how the
    # engine takes it (an options-file field, flags `combine` folds into it, or what kvplan
    # models). With the flag table, the one declaration of which knobs an engine has.
    settings: ClassVar[Mapping[str, str]] = {}
    # Knobs this engine does not have: derived from the flag table and `settings` (every knob
    # neither names), never listed.
    unsupported: ClassVar[frozenset[str]] = frozenset()
    # Knobs the engine lacks whose job one of its own flags or settings does: knob → that
    # spelling as the engine takes it, and whether kvplan plans it (the refusal's hint names it,
    # docs/engines.md lists it). Only knobs in `unsupported`; each with its source beside it.
    instead: ClassVar[Mapping[str, str]] = {}
    calibration: ClassVar[Calibration]  # the latency model's coefficients and batching style
    # the vision encoder's start-up profiling is in the memory accounting (else a note says so)
    models_vision_encoder: ClassVar[bool] = False
    # the engine's flag naming a YAML of further settings that win over its flags (read by
    # options_from_document); None: it has none
    options_file_flag: ClassVar[str | None] = None
    # --- whatif ---
    # The kernels the engine serves each checkpoint format with (model/whatif.py
    # checkpoint_format: a real checkpoint's, or the one a what-if's quantizer writes): format →
    # its kernels in the engine's order of preference, each the quantization method it detects
    # in such a checkpoint (as its --quantization spells it) and the least compute capability
    # that kernel runs at (in the releases Kernel.since/until bound, where the rule changed).
    # checkpoint_kernel applies them, the one rule for a what-if and a real checkpoint alike.
    # A format not listed: not served as a what-if, and no rule here.
    checkpoint_kernels: ClassVar[Mapping[str, tuple[Kernel, ...]]] = {}
    # --quantization what-ifs the engine serves (model/whatif.py FORMATS, and MODELOPT for an
    # engine that quantizes first): those whose checkpoint format it has kernels for. Derived
    # from checkpoint_kernels, never listed.
    what_if_formats: ClassVar[frozenset[str]] = frozenset()
    # Prometheus gauges an autoscaler reads (kvplan/planner/traffic.py): "queue" = requests
    # waiting, "kv_usage" = KV-cache use as a fraction; {} when the engine exports none
    autoscale_metrics: ClassVar[Mapping[str, str]] = {}
    # GPU vendors (GpuSpec.vendor) the engine runs on; None: every vendor kvplan catalogues
    # (those without CUDA through the engine's ROCm / HPU platform: a non-cuda-platform warning)
    gpu_vendors: ClassVar[frozenset[str] | None] = None
    # Codes of the engine's own errors that already say a layout does not start across nodes
    # (TGI's shards beyond one host): where the plan has one, the planner adds no generic
    # no-multi-node-launch warning, which would repeat it
    host_errors: ClassVar[frozenset[str]] = frozenset()

    def gpu_refusal(self, gpu: GpuSpec) -> str | None:
        """Why the engine does not run on `gpu` at all (its vendor's), or None."""
        if self.gpu_vendors is None or gpu.vendor in self.gpu_vendors:
            return None
        return (f"{self.label} runs on {' and '.join(sorted(self.gpu_vendors))} GPUs only; the "
                f"{gpu.name} is {gpu.vendor}'s")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if hasattr(cls, "syntax"):
            cls.unsupported = unsupported_knobs(cls.syntax.cli_flags, cls.settings)
        if stray := sorted(set(cls.instead) - cls.unsupported):
            raise TypeError(f"{cls.__name__}.instead names knobs the engine has: {stray}")
        cls.what_if_formats = frozenset(
            name for name, fmt in {**MODELOPT, **FORMATS}.items()
            if fmt.checkpoint_format in cls.checkpoint_kernels)

    def checkpoint_kernel(self, fmt: str, gpu: GpuSpec,
                          version: str | None = None) -> tuple[Kernel, bool] | None:
        """THE compute-capability rule of a checkpoint format, a real checkpoint's and a
        what-if's alike (planner/whatif.py apply and refusal): the kernel that serves format
        `fmt` on `gpu` in release `version` (None: the newest modelled) — the first of
        checkpoint_kernels[fmt] that holds in that release (Kernel.holds_in) and whose least
        compute capability the GPU has (a GPU of unknown or non-NVIDIA capability: the first)
        — with False; or, when the GPU is below them all, the least demanding with True: the
        engine refuses the checkpoint there. None: the engine declares no kernels for the
        format (in that release)."""
        release = version or self.newest_version
        kernels = [k for k in self.checkpoint_kernels.get(fmt, ()) if k.holds_in(release)]
        if not kernels:
            return None
        cc = compute_capability(gpu)
        runs = next((k for k in kernels if cc is None or cc >= k.least), None)
        if runs is not None:
            return runs, False
        return min(kernels, key=lambda k: k.least), True

    def checkpoint_refusal(self, fmt: str, gpu: GpuSpec,
                           version: str | None = None) -> str | None:
        """Why the engine (release `version`, None: the newest) refuses checkpoint format `fmt`
        on `gpu` (checkpoint_kernel), in words; None where one of its kernels runs it, or it
        declares none."""
        got = self.checkpoint_kernel(fmt, gpu, version)
        cc = compute_capability(gpu)
        if got is None or not got[1] or cc is None:
            return None
        least = got[0].least
        # a rule of some releases only names the release planned
        who = (f"{self.label} {version}" if version and (got[0].since or got[0].until)
               else self.label)
        return (f"{who}'s {got[0].method} kernels need compute capability ≥ "
                f"{least[0]}.{least[1]} and the {gpu.name} has {cc[0]}.{cc[1]}")

    def moe_layout(self, dep: Deployment) -> tuple[bool, int, bool]:
        """How a MoE model's expert layers are laid out: (shared by the data-parallel ranks
        (DP attention), expert-parallel size (1: TP slices), tokens exchanged all-to-all).
        Default (SGLang, TensorRT-LLM): DP attention when asked for or implied by EP over
        -dp > 1; EP over every GPU of the group; all-to-all with EP across DP ranks."""
        tp, dp = dep.tensor_parallel_size, dep.data_parallel_size
        shared = dp > 1 and (dep.enable_dp_attention or dep.enable_expert_parallel)
        ep = tp * (dp if shared else 1) if dep.enable_expert_parallel else 1
        return shared, ep, shared and dep.enable_expert_parallel

    def moe_token_split(self, dep: Deployment, m: ModelSpec | None = None) -> TokenSplit:
        """What the T GPUs of an attention group (which hold the same tokens after its
        attention all-reduce) do before the MoE layers' dispatch, all-to-all or all-gather
        (perf/expert.py): "" each dispatches its own copy; "scatter" a reduce-scatter in place
        of the all-reduce leaves each GPU 1/T of the tokens and an all-gather after the MoE
        restores them (the all-reduce's bytes); "chunk" the all-reduce stays, each GPU takes
        its 1/T slice, and an all-gather follows the MoE; "gathered" the gather/scatter over
        the MoE group itself takes each token once (no copy, no extra collective). `m`: the
        model, where the engine splits per model file (None: not known). Default "": an
        engine whose layout was not read."""
        return ""

    def dense_mlp_mode(self, dep: Deployment) -> DenseMlpMode:
        """Under DP attention, how the dense (non-MoE) layers' MLP runs (perf/expert.py): ""
        over the T GPUs of an attention group on its tokens, all-reduced as without DP
        attention; "full" over all G = T × D GPUs on every DP rank's tokens, gathered and
        scattered back as a MoE layer without all-to-all; "local" whole on every GPU on its
        own 1/T of the rows (no collective of its own). Default "": an engine whose layout was
        not read."""
        return ""

    def dp_gather_all_reduce(self, dep: Deployment) -> GatherAllReduce:
        """Which steps gather the DP ranks' tokens (for the layers that run on gathered tokens)
        by an all-reduce of the whole token buffer over the G GPUs, and reduce the layer's
        output by another, instead of an all-gather and a reduce-scatter (perf/expert.py):
        "" none, "prefill" steps that carry prefill tokens, "always" every step. Default ""."""
        return ""

    def tp_flag(self, dep: Deployment, tp: int) -> str:
        """The launch flag and value that run `tp` GPUs per attention group (kvplan's -tp) on
        `dep`'s layout, as a fix-it names it. Default: the engine's tensor-parallel flag with
        `tp`; an engine whose flag counts every GPU of a DP-attention group overrides it."""
        return f"{self.flags.get('tensor_parallel_size', '--tensor-parallel-size')} {tp}"

    def kv_cache_dtype_arg(self, kv_dtype: str, version: str | None = None) -> str:
        """The value the launch line gives the engine's KV-cache dtype flag or setting for
        kvplan's `kv_dtype` (fp8, fp8_e4m3, fp8_e5m2) in the engine's release `version` (None:
        the newest modelled): what command() writes, and what a fix-it that proposes an FP8 KV
        cache names. Default: kvplan's name (vLLM's values)."""
        return kv_dtype

    def rank_batched_tokens(self, dep: Deployment, tokens: int) -> int:
        """The prefill tokens one data-parallel rank runs a step when the launch line says
        `tokens` (SGLang divides its chunk among DP-attention ranks)."""
        return tokens

    def after_options(self, knobs: dict[str, Any]) -> dict[str, Any]:
        """A deployment file's knobs once its options file is merged → kvplan's layout, for an
        engine whose layout spans a flag and an options-file field (TensorRT-LLM's --tp_size
        with enable_attention_dp); a ValueError names what cannot be read."""
        return knobs

    def build_quantization(self, m: ModelSpec, gpu: GpuSpec, knobs: Knobs,
                           version: str | None = None) -> tuple[ModelSpec, Knobs]:
        """A --quantization the engine applies before it serves (TensorRT-LLM: an NVIDIA
        ModelOpt qformat) → the model as the checkpoint it produces (a what-if record of
        model/whatif.py, planned like the others: what_if_recipe), and the knobs left; the
        other engines quantize online while loading, so nothing changes here (a format
        what-if is applied before this, planner/whatif.py apply). `version`: the release
        planned (None: the newest modelled)."""
        return m, knobs

    def what_if_recipe(self, name: str, dep: Deployment) -> WhatIfFormat | None:
        """The recipe that writes the what-if checkpoint `name` this deployment serves (its
        quantizer step, assumptions, KV cache switch; model/whatif.py): FORMATS', unless the
        engine quantizes with its own (build_quantization)."""
        from ..model.whatif import what_if_format
        return what_if_format(name)

    # --- fp8cap --- what the engine does with FP8 weights (an FP8 checkpoint or --quantization
    # fp8) on a GPU below compute capability 8.0, with its source (knobs.capability_problems
    # writes it after "FP8 weights need compute capability ≥ 8.0 and the GPU has …; "); "": not
    # read for this engine, and the error says vLLM's rule is applied in its place
    fp8_refusal: ClassVar[str] = ""

    def fp8_least(self, version: str) -> tuple[int, int]:
        """The least compute capability at which `version` runs FP8 weights (weight-only below
        8.9): vLLM's rule, which every engine is planned with unless it declares its own."""
        return FP8_LEAST

    # What an explicit 16-bit --kv-cache-dtype does against a checkpoint's declared FP8 KV cache
    # that `auto` takes (checkpoint_kv_dtype), with its source; "" where not read
    checkpoint_kv_override: ClassVar[str] = ""

    def checkpoint_kv_dtype(self, m: ModelSpec, version: str) -> str | None:
        """The KV cache dtype `--kv-cache-dtype auto` (or no flag) takes from a checkpoint that
        declares one (QuantSpec.kv_cache_quant_algo, e.g. ModelOpt's FP8), None where the
        engine keeps the model dtype whatever the checkpoint says. Default: keeps it (TGI:
        its KV dtype comes only from --kv-cache-dtype, launcher/src/main.rs KVCacheDtype and
        server/text_generation_server/models/__init__.py get_model, v2.1–3.x)."""
        return None

    @abstractmethod
    def era(self, version: str) -> tuple[str, list[Problem]]:
        """The modelled accounting era for a release, and warnings when it was not read."""

    @abstractmethod
    def eras(self) -> list[tuple[str, str]]:
        """Every modelled era, oldest first: (name, first release it applies to)."""

    @abstractmethod
    def resolve(self, m: ModelSpec, gpu: GpuSpec, layout: Layout, knobs: Knobs,
                version: str) -> Deployment:
        """Every knob filled (the user's, else the engine's default), with its source."""

    @abstractmethod
    def memory(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment) -> MemoryResult:
        """The start-up accounting."""

    @abstractmethod
    def fraction_needed(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment, res: MemoryResult,
                        blocks: int) -> float | None:
        """Smallest budget fraction (the engine's own knob, rounded up to its precision) whose KV
        cache holds `blocks` blocks on every worker; None when even 1.0 does not."""

    @abstractmethod
    def fraction_ceiling(self, dep: Deployment, res: MemoryResult) -> float:
        """Largest budget fraction that still starts and leaves room for what the engine does
        not budget (CUDA context, graphs, activations outside the fraction)."""

    def max_seqs_cap(self, gpu: GpuSpec, dep: Deployment) -> int | None:
        """The engine's own ceiling on concurrent requests (None: none beyond the KV cache)."""
        return None

    def launch_batching(self, flags: Sequence[str], budget: int) -> dict[str, Any]:
        """PerfContext fields a measured deployment's launch flags change from the engine's
        declared batching (calibration.style; `budget`: its prefill tokens per step). Default:
        none. Used for calibration rows that state their flags (benchmarks/perf_fit.py)."""
        return {}

    def batching(self, dep: Deployment, budget: int) -> dict[str, Any]:
        """PerfContext fields a planned deployment's own settings change from the engine's
        declared batching, as launch_batching does for a measured one (`budget`: its prefill
        tokens per step; planner/performance.context). Default: none."""
        return {}

    @abstractmethod
    def command(self, ref: str, dep: Deployment, rec: Recommendations, workload: Workload,
                revision: str | None) -> str:
        """The launch line with the user's explicit flags and the recommended values."""

    def options_from_document(self, doc: Any, path: str | None) -> dict[str, Any]:
        """kvplan knobs from the parsed YAML given to `options_file_flag` (`path` names it in
        errors). Only engines with an options_file_flag implement it."""
        raise NotImplementedError(f"{self.label} reads no options file")

    def image_problems(self, mm: PlanMultimodal, *, images: int, text_tokens: int,
                       request_tokens: int | None, max_model_len: int) -> list[Problem]:
        """What the engine refuses about `images` images per request (plus `text_tokens`;
        `request_tokens` None: no request length given) against its multimodal section."""
        return []

    def draft_shares_lm_head(self, method: str) -> bool:
        """Whether a speculative draft of `method` reads the target's LM head on every pass
        (vLLM EAGLE-1: vllm/model_executor/models/llama_eagle.py)."""
        return method == "eagle"

    def deploy_problems(self, knobs: Mapping[str, Any], version: str | None) -> list[Problem]:
        """Refusals of a deployment file's flags as written that the plan cannot see
        (`kvplan check`); `version` None: the newest modelled release."""
        return []

    def node_launch(self, command: str, nodes: int, gpus_per_node: int, version: str
                    ) -> list[NodeLaunch] | None:
        """One launch line per node role for a deployment over `nodes` nodes of `gpus_per_node`
        GPUs (`command`: the one-node launch line); None = the engine has no multi-node launch
        (engines/multinode.py)."""
        return None

    def layout_problems(self, m: ModelSpec) -> list[Problem]:
        """Notes about model layouts this engine allocates differently. Default: the recurrent
        (Mamba / linear-attention) state pool is modelled for vLLM only."""
        if m.cross_attention_tokens:
            return [Problem(code="unsupported-layout", severity="warning",
                            message=f"{self.label}'s encoder-decoder (Whisper) serving is not "
                            "modelled: the KV numbers count the decoder's self-attention only, "
                            "not the per-request cross-attention cache (modelled for vLLM)")]
        if m.linear_attention is None:
            return []
        return [Problem(code="unsupported-layout", severity="warning",
                        message=f"{self.label}'s Mamba/linear-attention state pool is not "
                        "modelled: the KV numbers count the attention layers only")]
