"""From model + GPU + knobs + workload + engine to one Plan: fit, capacity, recommendations,
launch line. Pure: no catalogue, files or network (api.py resolves names). Written once for
every engine, over the `Engine` interface (engines/base.py).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, ParamSpec, TypeVar

from pydantic import ValidationError

from ..engines import registry
from ..engines.base import Engine, MemoryResult, batched_tokens_flag_value, release_line
from ..errors import InvalidInputError
from ..knobs import KNOB_NAMES, OPTIONS, Knobs, flag, resolve_layout, valid_tp_sizes
from ..model.weights import parameter_count
from ..model.whatif import checkpoint_dir, checkpoint_format
from ..perf import step as perf
from ..specs import (
    Deployment,
    GpuSpec,
    ModelSpec,
    NodeLaunch,
    Performance,
    Plan,
    PlanEngine,
    PlanGpu,
    PlanModel,
    PlanNodes,
    PlanServed,
    Price,
    Problem,
    Recommendation,
    Recommendations,
    Source,
    SourcedValue,
    TrafficPlan,
    WhatIfPlan,
    Workload,
    per_object,
)
from ..units import GiB, fast_init, largest_true
from ..versions import normalize_version, parse_version, release_key
from . import nodes as node_rules
from . import performance

if TYPE_CHECKING:
    from . import traffic
    from .traffic import Demand
from .features import image_concurrency, image_tokens, prefix_concurrency, prefix_shared
from .whatif import apply as what_if_apply
from .whatif import command as what_if_command
from .whatif import engine_view as what_if_engine_view
from .whatif import inputs as what_if_inputs
from .whatif import note as what_if_note
from .whatif import record as what_if_record
from .whatif import refusal as what_if_refusal
from .whatif import running as what_if_running
from .whatif import what_if_of

__all__ = ["KNOB_NAMES", "plan", "evaluate", "model_gpu_problems", "serve_ref"]

# The highest budget fraction a fix-it suggestion uses without a warning. The engines' own
# defaults are 0.9–0.92 (vLLM CacheConfig, TensorRT-LLM KvCacheConfig) and their docs name no
# higher safe value; above 0.95 under 5 % of the device is left for memory the start-up budget
# does not see, so a suggestion above it says so.
SAFE_UTILIZATION = 0.95

# Plan.inputs, in display order: (input name, the knob that sets it)
INPUTS = (
    ("engine_version", None), ("tensor_parallel_size", None), ("pipeline_parallel_size", None),
    ("data_parallel_size", None), ("dtype", "dtype"), ("kv_cache_dtype", "kv_cache_dtype"),
    ("quantization", "quantization"), ("max_model_len", "max_model_len"),
    ("max_input_tokens", "max_input_tokens"), ("max_total_tokens", "max_total_tokens"),
    ("max_num_seqs", "max_num_seqs"), ("max_num_batched_tokens", "max_num_batched_tokens"),
    ("gpu_memory_utilization", "gpu_memory_utilization"), ("block_size", "block_size"),
    ("enforce_eager", "enforce_eager"), ("enable_prefix_caching", "enable_prefix_caching"),
    ("hybrid_kv_cache_manager", "disable_hybrid_kv_cache_manager"),
    ("enable_expert_parallel", "enable_expert_parallel"),
    ("kv_cache_memory_bytes", "kv_cache_memory_bytes"), ("gpu_total_bytes", None),
)


_Tried = tuple[Deployment, MemoryResult] | None
_P = ParamSpec("_P")
_R = TypeVar("_R")
# Deployments evaluated while planning: within one plan (its searches re-ask a deployment) or a
# whole sweep (one candidate's search tries another candidate's deployment); see shared_tries
_TRIES: ContextVar[dict[tuple, tuple[ModelSpec, GpuSpec, _Tried]] | None] = ContextVar(
    "kvplan_tries", default=None)


# the last Knobs object whose given() was asked, with it: a plan's searches ask it of the same
# (frozen) knobs again and again
_last_given: tuple[Knobs, dict[str, Any]] | None = None


def _given(knobs: Knobs) -> dict[str, Any]:
    """knobs.given(), remembered for the last Knobs object asked; not to be changed."""
    global _last_given
    last = _last_given
    if last is not None and last[0] is knobs:
        return last[1]
    given = knobs.given()
    _last_given = (knobs, given)
    return given


def _in_shared_tries(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """`fn` inside shared_tries(): a new block when none is open, else straight in (a sweep's
    plans run in its block; a context manager per call would cost them ~1 %)."""
    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if _TRIES.get() is not None:
            return fn(*args, **kwargs)
        with shared_tries():
            return fn(*args, **kwargs)
    return run


@contextmanager
def shared_tries() -> Iterator[None]:
    """Within this block, each (engine, model, GPU, knobs, version) is evaluated once (by
    _evaluate_once): a deployment and its memory result are pure functions of those (ModelSpec
    and GpuSpec are frozen; knobs are compared by value), and nothing changes them afterwards.
    Nested blocks share the outermost one's answers."""
    token = _TRIES.set({}) if _TRIES.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _TRIES.reset(token)


def evaluate(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, version: str,
             version_source: Source = "cli") -> tuple[Deployment, MemoryResult]:
    """Resolve every knob for `eng` and run its memory accounting."""
    m, knobs = what_if_apply(eng, m, gpu, knobs, version)  # a format what-if (planner/whatif.py)
    m, knobs = eng.build_quantization(m, gpu, knobs, version)
    layout = resolve_layout(m, gpu, knobs, engine_label=eng.label,
                            checkpoint_kv=eng.checkpoint_kv_dtype(m, version),
                            kv_override=eng.checkpoint_kv_override,
                            fp8_refusal=eng.fp8_refusal, fp8_least=eng.fp8_least(version),
                            refusal=what_if_refusal(eng, m, gpu, version))  # its kernels
    dep = eng.resolve(m, gpu, layout, knobs, version)
    dep.sources["engine_version"] = version_source
    res = eng.memory(m, gpu, dep)
    if layout.problems:  # what the GPU's compute capability refuses (error) or changes
        refused = any(p.severity == "error" for p in layout.problems)
        res = replace(res, fits=res.fits and not refused,
                      problems=[*layout.problems, *res.problems])
    return dep, _device_guard(eng, dep, res)


def _device_guard(eng: Engine, dep: Deployment, res: MemoryResult) -> MemoryResult:
    """Engine-independent refusals: weights larger than the device, and a budget fraction the
    engine derives outside (0, 1] (its fixed reserve exceeds a small device). Either way the
    deployment does not fit, and the problem says how much memory the weights need."""
    problems = []
    weights = res.worst.weights_bytes
    total = dep.gpu_total_bytes
    # the weights are split over TP × PP; with expert parallelism the experts also over DP
    gpus = dep.tensor_parallel_size * dep.pipeline_parallel_size * (
        dep.data_parallel_size if dep.enable_expert_parallel else 1)
    if weights > total:
        problems.append(Problem(
            code="weights-exceed-device", severity="error",
            message=f"the weights need {weights / GiB:.2f} GiB per GPU (split over {gpus} GPU"
            f"{'s' if gpus != 1 else ''}) but the device has {total / GiB:.2f} GiB"))
    frac = dep.gpu_memory_utilization
    flag_name = eng.flags.get("gpu_memory_utilization", "--gpu-memory-utilization")
    if not 0 < frac <= 1:
        problems.append(Problem(
            code="no-valid-fraction", severity="error",
            message=f"{eng.label}'s default {flag_name} has no valid value on a "
            f"{total / GiB:.2f} GiB device (" + (f"{frac:g} is above 1" if frac > 1 else
                                                "its formula leaves nothing")
            + f"): the device is smaller than what {eng.label} keeps outside the KV cache, "
            "so it does not start"
            + ("" if problems else f" (the weights alone need {weights / GiB:.2f} GiB per GPU)")))
    if not problems:
        return res
    return replace(res, fits=False, problems=[*problems, *res.problems])


def plan(m: ModelSpec, gpu: GpuSpec, knobs: Knobs | None = None, *, engine: str = registry.DEFAULT,
         engine_version: str | None = None, workload: Workload | None = None,
         price: Price | None = None, minimize_utilization: bool = False,
         larger_gpus: Sequence[GpuSpec] = (), demand: Demand | None = None) -> Plan:
    """Plan one deployment. Raises KvplanError subclasses for bad input; a deployment that
    does not fit (or misses the workload's target) is a Plan with fits=False, not an exception.
    `minimize_utilization`: recommend the smallest budget fraction that meets the target instead
    of keeping the engine's default. `larger_gpus`: candidates named as an alternative when the
    plan does not fit (api.py passes the catalogue's)."""
    return plan_and_context(m, gpu, knobs, engine=engine, engine_version=engine_version,
                            workload=workload, price=price,
                            minimize_utilization=minimize_utilization, larger_gpus=larger_gpus,
                            demand=demand)[0]


@_in_shared_tries  # its searches re-ask some deployments (the recommended budget, …)
def plan_and_context(m: ModelSpec, gpu: GpuSpec, knobs: Knobs | None = None, *,
                     engine: str = registry.DEFAULT, engine_version: str | None = None,
                     workload: Workload | None = None, price: Price | None = None,
                     minimize_utilization: bool = False, larger_gpus: Sequence[GpuSpec] = (),
                     demand: Demand | None = None) -> tuple[Plan, perf.PerfContext | None]:
    """plan(), and the latency model's context its performance figures were computed with
    (planner/performance.context on the deployment the launch line starts, at its max_num_seqs
    and token budget); None when the plan has no figures."""
    eng = registry.get(engine)
    knobs = knobs or Knobs()
    workload = workload or Workload()
    _check_supported(eng, knobs)
    _check_gpu(eng, gpu)
    # the one door a release enters by (CLI, API, check, calibrate): "v0.10.1" plans as 0.10.1
    engine_version = normalize_version(engine_version) if engine_version else None
    version = engine_version or eng.newest_version
    era_name, problems = eng.era(version)
    problems = newer_than_modelled(eng, version, era_name) + problems
    knobs, release_problems = release_gate(eng, knobs, version)
    problems += release_problems
    source: Source = "cli" if engine_version else "kvplan-default"
    got = _evaluate_once(eng, m, gpu, _given(knobs), version, source, knobs)
    # refused: evaluate again, to raise the reason
    dep, res = got if got is not None else evaluate(eng, m, gpu, knobs, version, source)
    problems += (eng.layout_problems(m) + res.problems
                 + model_gpu_problems(m, gpu, dep, engine=eng.label))
    problems += _lora_knobs_without_lora(eng, knobs, dep)
    with_prefix, prefix_problems = prefix_concurrency(m, dep, res, workload.prefix_tokens())
    problems += prefix_problems
    multimodal, mm_problems = image_concurrency(m, res, workload, eng)
    problems += mm_problems
    if workload.acceptance_rate is not None and dep.speculative_config is None:
        problems.append(Problem(
            code="acceptance-rate-unused", severity="warning",
            message=f"--acceptance-rate {workload.acceptance_rate:g} has no effect without "
            "--speculative-config (no speculative decoding is planned)"))
    rec, planned, planned_res, rec_problems, served_cell = _recommend(
        eng, m, gpu, knobs, dep, res, workload, minimize_utilization=minimize_utilization,
        larger_gpus=larger_gpus)
    # the file's own requests when it has them (its mean is one of them), else the mean's
    problems += rec_problems + (_requests_longer_than_served(demand, rec, eng)
                                or _longer_than_served(workload, rec, eng))
    # nothing fits at the given TP: the serve line moves to another (_replan_at_tp), whose
    # figures would describe another deployment than this plan's (its GPUs, KV cache and cost)
    moved = planned.tensor_parallel_size != dep.tensor_parallel_size
    performance, perf_problems, traffic_plan, ctx = _performance(
        eng, m, gpu, knobs, planned, planned_res, rec, workload, price, demand,
        figures=not moved)
    problems += perf_problems
    fmt = what_if_of(eng, dep)

    serve: list[str] = []

    def command() -> str:  # written once: a multi-node plan's node launch lines quote it too
        if not serve:
            serve.append(_command(eng, m, gpu, planned, rec, workload, knobs.quantization))
        return serve[0]

    node_plan, node_problems = _nodes(eng, gpu, knobs, dep, command, problems)
    problems += node_problems
    if moved:
        performance, ctx = None, None
    served, served_res = (None, None) if moved or not planned_res.fits else _served(
        eng, m, gpu, knobs, planned, planned_res, rec, workload)
    if served_res is not None:  # a missed target's error states the serve line's KV cache
        served_cell.append(served_res)
    if fmt is not None:
        problems.insert(0, what_if_note(fmt, m.id))
    extra = {"what_if": what_if_record(eng, fmt, m.id, gpu, dep.engine_version)} if fmt else {}
    quantization = dep.quantization or m.unmodelled_quantization_method
    count = dep.tensor_parallel_size * dep.pipeline_parallel_size * dep.data_parallel_size
    estimated = "total_bytes" in res.memory.estimated
    era = res.era or dep.era
    # the serve line is written when first read (a sweep reads none); a what-if's and a
    # multi-node plan's (its nodes' launch lines quote it) now
    values: dict[str, Any] = dict(
        fits=res.fits and not any(p.code == "target-not-met" for p in problems),
        problems=problems,
        model=_model_section(m, dep.dtype, quantization),
        gpu=_gpu_section(gpu, count, estimated),
        engine=_engine_section(eng, version, era),
        inputs=what_if_inputs(_inputs(eng, dep, res), fmt),
        workload=workload,
        memory=res.memory,
        # the engine's own section when that leaves it as it is (no shared prefix: None)
        kv_cache=res.kv_cache
        if with_prefix == res.kv_cache.effective_max_concurrency_with_prefix
        else res.kv_cache.model_copy(
            update={"effective_max_concurrency_with_prefix": with_prefix}),
        recommendations=rec,
        performance=performance,
        speculative=res.speculative, lora=res.lora, offload=res.offload, multimodal=multimodal,
        nodes=node_plan, traffic=traffic_plan if performance is not None else None,
        served=served, **extra,
    )
    if fmt is None and not node_plan.launch:
        return Plan.deferred(command, **values), ctx
    return (WhatIfPlan if fmt else Plan)(command=command(), **values), ctx


# A plan's model, gpu and engine sections, one object per owner (a frozen ModelSpec or
# GpuSpec, a registry engine) and values: a sweep's plans repeat them hundreds of times, and
# nothing changes a plan's section once built.
@per_object(4096)
def _model_section(m: ModelSpec, dtype: str, quantization: str | None) -> PlanModel:
    return PlanModel(id=m.id, source=m.source, parameters=_parameters(m),
                     weights_from=m.weights_from, dtype=dtype, quantization=quantization)


@per_object(4096)
def _gpu_section(gpu: GpuSpec, count: int, estimated: bool) -> PlanGpu:
    return PlanGpu(id=gpu.id, name=gpu.name, count=count, total_bytes_estimated=estimated)


@per_object(4096)
def _engine_section(eng: Engine, version: str, era: str) -> PlanEngine:
    return PlanEngine(name=eng.name, label=eng.label, version=version, era=era,
                      knobs=dict(eng.flags))


def _nodes(eng: Engine, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
           command: Callable[[], str], said: Sequence[Problem] = ()
           ) -> tuple[PlanNodes, list[Problem]]:
    """The plan's nodes section, with a launch line per node role (from `command()`, the
    plan's serve line) when it spans nodes. `said`: the plan's problems so far; an engine error
    that already refuses the layout over nodes (Engine.host_errors) is not repeated."""
    node_plan, problems = node_rules.plan_nodes(
        gpu, dep.tensor_parallel_size, dep.pipeline_parallel_size, dep.data_parallel_size,
        nodes=knobs.nodes, gpus_per_node=knobs.gpus_per_node)
    if (node_plan.nodes or 1) <= 1 or node_plan.gpus_per_node is None:
        return node_plan, problems
    launch = eng.node_launch(command(), node_plan.nodes or 1, node_plan.gpus_per_node,
                             dep.engine_version)
    if launch is None:
        if any(p.code in eng.host_errors and p.severity == "error" for p in said):
            return node_plan, problems
        problems.append(Problem(
            code="no-multi-node-launch", severity="warning",
            message=f"the layout spans {node_plan.nodes} nodes, but kvplan knows no multi-node "
            f"launch for {eng.label}: its serve line runs one node's GPUs"))
        return node_plan, problems
    problems += _node_flags_refused(eng, launch, dep.engine_version or eng.newest_version)
    return node_plan.model_copy(update={"launch": launch}), problems


def _node_flags_refused(eng: Engine, launch: Sequence[NodeLaunch], version: str
                        ) -> list[Problem]:
    """One error naming the flags of the node launch lines that `version` lacks (the engine's
    FlagReleases: vLLM's multi-node data-parallel flags are first in 0.9.0), with the releases
    that have them; the serve line's own flags were gated before (release_gate,
    release_line)."""
    rules = eng.syntax.flag_releases
    seen: dict[str, None] = {}
    for node in launch:
        for word in node.command.split():
            name = word.partition("=")[0]
            rule = rules.get(name)
            if rule is not None and not rule.instead(version) and not rule.in_release(version):
                seen[name] = None
    if not seen:
        return []
    names = list(seen)
    sources = "; ".join(dict.fromkeys(rules[n].source for n in names))
    removed = [n for n in names if rules[n].when(version).startswith("removed")]
    first = max((rules[n].first or version for n in names), key=release_key)
    other = (f"a release that has them ({', '.join(rules[n].when(version) for n in names)})"
             if removed else f"--engine-version {first} or later")
    return [Problem(
        code="flag-not-in-release", severity="error",
        message=f"{eng.label} {version} has no {', '.join(names)} ({sources}): the node "
        f"launch lines need {'them' if len(names) > 1 else 'it'}, and the release's argument "
        f"parser refuses {'them' if len(names) > 1 else 'it'} (hint: plan with {other})")]


def _command(eng: Engine, m: ModelSpec, gpu: GpuSpec, dep: Deployment, rec: Recommendations,
             workload: Workload, given: str | None) -> str:
    """The launch line; a format what-if serves the hypothetical checkpoint after the step
    that writes it (planner/whatif.py). A --quantization the engine accepted is passed on as
    the user spelled it (modelopt_fp4, not the format's name nvfp4, which vLLM does not know)."""
    fmt = what_if_of(eng, dep)
    version = dep.engine_version or eng.newest_version
    if fmt is None:
        if given and dep.quantization and dep.user_set("quantization"):
            dep = dep.model_copy(update={"quantization": given.lower()})
        return release_line(eng.syntax, eng.command(serve_ref(m), dep, rec, workload,
                                                    m.revision), version)
    serve = eng.command(checkpoint_dir(serve_ref(m), fmt), what_if_engine_view(eng, fmt, dep, gpu),
                        rec, workload, None)
    return what_if_command(fmt, serve_ref(m), release_line(eng.syntax, serve, version))


def _writes_flag(knob: str, value: Any) -> bool:
    """Whether a knob the user gave puts its flag on the launch line: not a default-like value
    (off, auto, one GPU of a parallel size, a KV cache in the model's own dtype)."""
    if value is None or value is False or value == "auto":
        return False
    if knob.endswith("_parallel_size"):
        return value != 1
    return knob != "kv_cache_dtype" or str(value).startswith("fp8")


def release_gate(eng: Engine, knobs: Knobs, version: str) -> tuple[Knobs, list[Problem]]:
    """The knobs the user gave whose every flag `version` lacks (DeploySyntax.flag_releases: no
    older spelling, no other spelling the engine writes instead), dropped, each with an error:
    the engine's argument parser refuses the flag, so the launch line leaves it out and the plan
    is of that line; the problem names the releases that have it. A value of the flag that the
    release does not take (FlagReleases.values: SGLang's fp8_e4m3 before 0.4.1.post6) is
    dropped the same way."""
    rules = eng.syntax.flag_releases
    if not rules:
        return knobs, []
    given = _given(knobs)
    flags_of: dict[str, list[str]] = {}
    for name, (knob, _) in eng.syntax.cli_flags.items():
        flags_of.setdefault(knob, []).append(name)
    drop: dict[str, None] = {}
    problems: list[Problem] = []
    for knob, names in flags_of.items():
        if knob in drop or not _writes_flag(knob, given.get(knob)):
            continue
        if any(n not in rules or rules[n].instead(version)
               or rules[n].spelled(n, version) is not None
               for n in names):
            refused = _value_refused(eng, knob, names, given[knob], version)
            if refused is not None:  # the flag is there, but not this value of it
                drop[knob] = None
                problems.append(refused)
            continue  # some spelling of it is in this release
        name = eng.flags.get(knob, names[0])
        rule = rules.get(name, rules[names[0]])
        other = (f"a release before {rule.removed}" if rule.removed is not None
                 and parse_version(version) >= parse_version(rule.removed)
                 else f"--engine-version {rule.first} or later")
        drop[knob] = None
        problems.append(Problem(
            code="flag-not-in-release", severity="error",
            message=f"{eng.label} {version} has no {name} ({rule.when(version)}; "
            f"{rule.source}): its argument parser refuses the flag and the server does not "
            f"start, so the launch line leaves it out and the plan is made without it (hint: "
            f"plan with {other}, or drop {flag(knob)})"))
    if not drop:
        return knobs, []
    return knobs.model_copy(update=dict.fromkeys(drop)), problems


def _value_refused(eng: Engine, knob: str, names: list[str], value: Any, version: str
                   ) -> Problem | None:
    """The error for a value of the knob's flag that `version`'s argument parser refuses
    (FlagReleases.values), None when it takes it."""
    name = eng.flags.get(knob, names[0])
    rule = eng.syntax.flag_releases.get(name)
    got = rule.value_refused(value, version) if rule is not None else None
    if rule is None or got is None:
        return None
    other = f"{flag(knob)} {got.before} or " if got.before else ""
    return Problem(
        code="value-not-in-release", severity="error",
        message=f"{eng.label} {version}'s {name} does not take {value} (first in {got.first}; "
        f"{got.source}): its argument parser refuses the value and the server does not start, "
        f"so the launch line leaves it out and the plan is made without it (hint: give "
        f"{other}plan with --engine-version {got.first} or later)")


def newer_than_modelled(eng: Engine, version: str, era: str) -> list[Problem]:
    """A release newer than the newest one read is planned with the newest era's accounting,
    and the plan says so (every engine: `Engine.newest_version`)."""
    if parse_version(version) <= parse_version(eng.newest_version):
        return []
    # SGLang's era() names no era (its Deployment does): the newest of eras(); TGI's and
    # SGLang's names end in "accounting" already, vLLM's do not
    eras = eng.eras()
    name = (era or (eras[-1][0] if eras else "")).removesuffix(" accounting")
    accounting = f"the {name} accounting" if name else "its accounting"
    return [Problem(code="engine-version-newer", severity="warning",
                    message=f"{eng.label} {version} is newer than {eng.newest_version}, the "
                    f"newest release kvplan read; modelled with {accounting}")]


def _percentile_unmet(section: Performance, w: Workload) -> Problem:
    """The simulation misses the SLOs at their percentile at the request rate with any number
    of replicas: each replica's own tail is too long."""
    q = section.slo_percentile or 99
    got = []
    for name, slo in (("ttft_ms", w.slo_ttft_ms), ("tpot_ms", w.slo_tpot_ms)):
        seen = (section.percentiles or {}).get(name, {}).get(f"p{q}")
        if slo is not None and seen is not None and seen > slo:
            got.append(f"p{q} {name.removesuffix('_ms').upper()} {seen:,.1f} > {slo:g} ms")
    return Problem(code="slo-unmet-at-percentile", severity="error",
                   message="the simulated latency misses the target at its percentile at "
                   f"{section.request_rate:g} req/s with any number of replicas: one replica's "
                   "own tail is too long"
                   + (f" ({', '.join(got)})" if got else "") + "; a faster GPU, more "
                   "tensor parallelism or shorter prompts are the levers")


def _trace_unmet(section: Performance) -> Problem:
    """A trace replayed on one replica misses the SLOs at their percentile."""
    q = section.slo_percentile or 99
    return Problem(code="slo-unmet-at-percentile", severity="error",
                   message=f"the trace replayed on one replica misses the latency target at "
                   f"p{q} ({section.request_rate:.4g} req/s on average, "
                   f"{section.capacity_rps_per_replica or 0:.4g} at most per replica): spread "
                   f"it over more replicas (--request-rate {section.request_rate:.4g} at the "
                   "trace's mean lengths sizes them) or use a faster deployment")


def _requests_longer_than_served(demand: Demand | None, rec: Recommendations,
                                 eng: Engine) -> list[Problem]:
    """Requests of a --trace or --lengths-file longer than the serve line's context length:
    the engine rejects each of them, so the replay or the sizing counts requests it never
    serves."""
    length = rec.max_model_len.value
    if demand is None or not isinstance(length, int):
        return []
    totals = [i + o for i, o in demand.requests()]
    over = [t for t in totals if t > length]
    if not over:
        return []
    flag_name = eng.flags.get("max_model_len", "--max-model-len")
    what = demand.requests_from or ("--trace" if demand.trace else "--lengths-file")
    return [Problem(code="workload-longer-than-context", severity="error",
                    message=f"{len(over):,} of the {len(totals):,} requests of {what} need more "
                    f"than the serve line's {flag_name} {length:,} tokens (prompt + output; the "
                    f"longest {max(over):,}): {eng.label} rejects them; raise {flag_name} to "
                    f"{max(over):,} or more, or leave them out of the file")]


def _curve_unmet(curve: TrafficPlan, w: Workload) -> Problem:
    """Intervals of a rate curve that no replica count serves within the SLOs at the
    percentile: the fleet has no size there, so the curve has no GPU-hours or cost."""
    rates = [i.requests_per_s for i in curve.intervals if i.replicas is None]
    return Problem(code="slo-unmet-at-percentile", severity="error",
                   message=f"the simulated latency misses the target at p{w.slo_percentile or 99}"
                   f" with any number of replicas at {curve.unmet_intervals} of the traffic "
                   f"curve's {len(curve.intervals)} intervals (rates from {min(rates):g} req/s):"
                   " one replica's own tail is too long, so the curve has no fleet size or cost;"
                   " a faster GPU, more tensor parallelism or shorter prompts are the levers")


def _longer_than_served(workload: Workload, rec: Recommendations, eng: Engine) -> list[Problem]:
    """The workload's mean request (prompt + output) is longer than the serve line's context
    length: the engine rejects such requests (vLLM: "This model's maximum context length is …"),
    so the deployment does not serve the workload it was planned for."""
    length = rec.max_model_len.value
    if not workload.avg_input_tokens or not isinstance(length, int):
        return []
    need = workload.avg_input_tokens + (workload.avg_output_tokens or 0)
    if need <= length:
        return []
    flag_name = eng.flags.get("max_model_len", "--max-model-len")
    return [Problem(code="workload-longer-than-context", severity="error",
                    message=f"a mean request of {workload.avg_input_tokens:,} prompt + "
                    f"{workload.avg_output_tokens or 0:,} output tokens needs {need:,} tokens of "
                    f"context, above the serve line's {flag_name} {length:,}: {eng.label} "
                    f"rejects such requests; raise {flag_name} to {need:,} or more, or shorten "
                    "them")]


def _check_gpu(eng: Engine, gpu: GpuSpec) -> None:
    """An engine that does not run on the GPU's vendor at all is an error naming those that do."""
    refusal = eng.gpu_refusal(gpu)
    if refusal is None:
        return
    runs = [e.name for e in registry.ENGINES.values() if e.gpu_refusal(gpu) is None]
    raise InvalidInputError(refusal, hint=(f"plan with --engine {' / '.join(runs)}, or " if runs
                                           else "plan ") + "a GPU it runs on",
                            code="engine-gpu-vendor")


def _check_supported(eng: Engine, knobs: Knobs) -> None:
    """A knob the engine does not have is an error naming the engines that do."""
    given = _given(knobs)
    bad = sorted(k for k, v in given.items() if k in eng.unsupported
                 and (v is not False or not OPTIONS[k].false_is_default))
    if not bad:
        return
    shown = {k: flag(k) if given[k] is not False else "--no-" + flag(k)[2:] for k in bad}
    names = ", ".join(shown.values())
    have = [e.name for e in registry.ENGINES.values() if not set(bad) & e.unsupported]
    # the engine's own way of doing it, where it has one (Engine.instead)
    own = {eng.instead[k]: shown[k] for k in bad if k in eng.instead}
    ways = [f"{eng.label}'s own is {text}" if len(bad) == 1 else
            f"for {name} {eng.label}'s own is {text}" for text, name in own.items()]
    raise InvalidInputError(
        f"{names} {'is' if len(bad) == 1 else 'are'} not a setting {eng.label} has",
        hint="; ".join(ways) + ("; else " if ways else "")
        + f"drop {'it' if len(bad) == 1 else 'them'}"
        + (f", or plan with --engine {' / '.join(have)}" if have else ""),
        code="setting-not-supported", knob=bad[0])


def _inputs(eng: Engine, dep: Deployment, res: MemoryResult) -> dict[str, SourcedValue]:
    out = {}
    for key, knob in INPUTS:
        if knob is not None and knob in eng.unsupported:
            continue
        value = getattr(dep, key)
        source = dep.sources.get(key, "engine-default")
        if key in res.engine_defaults and source != "cli":
            value = res.engine_defaults[key]
        if value is None and key in ("max_input_tokens", "max_total_tokens"):
            continue
        out[key] = _sourced(value, source)
    return out


_SOURCED: dict[tuple[type, object, Source], SourcedValue] = {}


def _sourced(value: object, source: Source) -> SourcedValue:
    """SourcedValue(value, source), one (frozen) object per distinct pair: a sweep's plans
    repeat the same few thousand times."""
    key = (type(value), value, source)
    got = _SOURCED.get(key)
    if got is None:
        if len(_SOURCED) >= 4096:
            _SOURCED.clear()
        got = _SOURCED[key] = SourcedValue(value=value, source=source)
    return got


# ---------------------------------------------------------------- recommendations
# Rule: a knob the user gave (source "cli") is kept in the serve line unless it cannot work;
# when it cannot, a problem says so. Changes are tried in order of cost (ALTERNATIVES).


def _try(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, version: str,
         **changes: object) -> _Tried:
    """The deployment with some knobs changed; None when the engine (or a range) refuses it.
    Changes are validated like user input, so a search can never leak an out-of-range value."""
    return _evaluate_once(eng, m, gpu, {**_given(knobs), **changes}, version, "cli")


def _in_tries(fn: Callable[[], str]) -> Callable[[], str]:
    """`fn`, run later in the deployments evaluated now (shared_tries): a deferred message's
    searches reuse this plan's (and its sweep's) answers, as they would have when planned;
    and, as in a sweep, without the cyclic collector (the searches free nothing in cycles,
    and a sweep's result, serialized, is a large heap to pass over)."""
    tries = _TRIES.get()

    def run() -> str:
        token = _TRIES.set(tries)
        try:
            with gc_paused():
                return fn()
        finally:
            _TRIES.reset(token)
    return run


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off meanwhile (as it was after): planning allocates many
    small objects and frees none of them in cycles, so its passes over a sweep's growing heap
    are pure cost (20–40 % of a sweep). On the way out the objects made meanwhile join the
    oldest generation unscanned (gc.freeze then gc.unfreeze: two list splices): re-enabled as
    it was, the collector's next pass would walk every one of them at once (all still young),
    1.5–2 ms after a 405B sweep and about 20 ms after an 8B one on the project's machine, to
    find them alive; an unreachable cycle among them is still freed by the next full pass.
    Objects the caller froze stay frozen (gc.get_freeze_count, a walk of them): then the
    collector is only re-enabled."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _evaluate_once(eng: Engine, m: ModelSpec, gpu: GpuSpec, values: dict[str, object],
                   version: str, version_source: Source, knobs: Knobs | None = None) -> _Tried:
    """evaluate() with the knobs `values` (validated, unless `knobs` holds them already); None
    when the engine (or a range) refuses them. Inside shared_tries() remembered by value; an
    answer found under another version source is returned with this one."""
    tries = _TRIES.get()
    key: tuple | None = None
    if tries is not None:
        key = (eng.name, id(m), id(gpu), version, *sorted(values.items()))
        try:
            hit = tries.get(key)
        except TypeError:  # a dict or list value (speculative_config, …): not remembered
            key = hit = None
        if hit is not None and hit[0] is m and hit[1] is gpu:
            if hit[2] is None or hit[2][0].sources.get("engine_version") == version_source:
                return hit[2]
            dep, res = hit[2]
            return dep.model_copy(update={"sources": {**dep.sources,
                                                      "engine_version": version_source}}), res
    got: _Tried
    try:
        got = evaluate(eng, m, gpu, knobs or Knobs.model_validate(values), version,
                       version_source)
    except (InvalidInputError, ValidationError):
        got = None
    if tries is not None and key is not None:
        tries[key] = (m, gpu, got)
    return got


def _smallest_tp(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                 res: MemoryResult, target: _Goal | None = None) -> Recommendation:
    """The TP a deployment that does not fit moves to: the smallest valid one that fits and,
    with a target (`target`), holds its requests at the engine's highest safe budget fraction;
    the smallest that fits when none holds them (the target's problem then lists what would).
    A TP given by the user is checked by _replan_at_tp, not moved silently."""
    tp = dep.tensor_parallel_size
    if res.fits:
        return Recommendation(value=tp, reason=f"fits at tensor_parallel_size {tp}")
    first: Recommendation | None = None
    for cand in _tp_candidates(m, gpu, knobs, dep):
        if cand <= tp:
            continue
        got = _try(eng, m, gpu, knobs, dep.engine_version, tensor_parallel_size=cand)
        if got and got[1].fits:
            # MoE layers shared by the DP ranks (DP attention): one replica spans them all
            shared = m.moe is not None and eng.moe_layout(got[0])[0]
            gpus = cand * (got[0].data_parallel_size if shared else 1)
            if target is None or _holds(eng, m, gpu, got[0], got[1], target):
                what = "fits" if target is None else f"holds {target.text()}"
                return Recommendation(value=cand, reason=f"smallest valid tensor_parallel_size "
                                      f"that {what} ({gpus} GPUs per replica)")
            first = first or Recommendation(value=cand, reason=(
                f"smallest valid tensor_parallel_size that fits ({gpus} GPUs per replica); none "
                f"up to {max(_tp_candidates(m, gpu, knobs, dep))} holds {target.text()}"))
    if first is not None:
        return first
    limit = node_rules.tp_limit(gpu) if knobs.gpus_per_node is None else None
    within = (f"within the {limit}-GPU scale-up domain of {gpu.name}'s systems" if limit
              else "up to 64")
    return Recommendation(value=None, reason=f"no valid tensor_parallel_size {within} fits")


def _holds(eng: Engine, m: ModelSpec, gpu: GpuSpec, dep: Deployment, res: MemoryResult,
           goal: _Goal) -> bool:
    """Whether the goal's requests fit at the engine's highest safe budget fraction."""
    needed = eng.fraction_needed(m, gpu, dep, res, goal.blocks(res))
    return needed is not None and needed <= eng.fraction_ceiling(dep, res)


def _tp_candidates(m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment) -> list[int]:
    """The TP sizes kvplan may propose: valid for the model, inside a scale-up domain of the
    GPU's systems, with the deployment's stages and replicas on whole nodes (planner/nodes)."""
    return node_rules.proposable_tp(gpu, valid_tp_sizes(m), dep.pipeline_parallel_size,
                                    dep.data_parallel_size, knobs.gpus_per_node)




def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class _Goal:
    """What the serve line must hold: `n` requests of `length` tokens (the workload's, else
    max_model_len) and one request of max_model_len; with prefix caching the full blocks of
    the `shared` tokens every request starts with are held once (MemoryResult.blocks_for)."""

    def __init__(self, n: int | None, length: int, max_len: int, shared: int = 0) -> None:
        self.n, self.length, self.max_len, self.shared = n, length, max_len, shared

    def blocks(self, res: MemoryResult) -> int:
        one = res.request_blocks(self.max_len)
        return max(res.blocks_for(self.n or 0, self.length, self.shared), one) \
            + res.reserved_blocks

    def held(self, res: MemoryResult) -> int:
        """Requests of the goal's length the KV cache holds at once."""
        return res.requests_held(self.length, self.shared)

    def met(self, res: MemoryResult) -> bool:
        return res.fits and res.num_blocks >= self.blocks(res)

    def text(self) -> str:
        if self.n:
            shared = min(self.shared, self.length)
            return f"{_plural(self.n, 'request')} of {self.length} tokens" + (
                f" sharing a {shared}-token prefix" if shared else "")
        return f"one {self.max_len}-token request"

    def need(self) -> str:
        return "needs" if not self.n or self.n == 1 else "need"


@fast_init
@dataclass(frozen=True)
class _Setup:
    """One planning problem: the engine, model and GPU, the knobs as given, and the deployment
    they resolve to with its memory result. `_try` re-plans it with some knobs changed."""

    eng: Engine
    m: ModelSpec
    gpu: GpuSpec
    knobs: Knobs
    dep: Deployment
    res: MemoryResult

    def attempt(self, **changes: object) -> tuple[Deployment, MemoryResult] | None:
        return _try(self.eng, self.m, self.gpu, self.knobs, self.dep.engine_version, **changes)


class AlternativeKind(Enum):
    """What an alternative in a next-steps / target-not-met problem changes."""

    UTILIZATION = "utilization"
    FP8_KV_CACHE = "fp8-kv-cache"
    TENSOR_PARALLEL = "tensor-parallel"
    PIPELINE_NODES = "pipeline-nodes"  # TP kept in the scale-up domain, stages across nodes
    LARGER_GPU = "larger-gpu"
    SHORTER_LENGTH = "shorter-length"
    LOWER_TARGET = "lower-target"


class Alternative(NamedTuple):
    """One change that would meet the goal: its kind, the words the problem prints, and the
    value it sets where the planner can use it (the length, the TP size)."""

    kind: AlternativeKind
    text: str
    value: int | None = None


@fast_init
@dataclass(frozen=True)
class _Fraction:
    """The budget-fraction recommendation: the value (None: no fraction works), its reason,
    and the warning when a given fraction is raised."""

    value: float | None
    reason: str
    problems: list[Problem]


def _recommend(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
               res: MemoryResult, workload: Workload, *, minimize_utilization: bool = False,
               larger_gpus: Sequence[GpuSpec] = ()
               ) -> tuple[Recommendations, Deployment, MemoryResult, list[Problem],
                          list[MemoryResult]]:
    """The four recommendations, the deployment they were planned on (the serve line's) with
    its memory result, the problems planning found (a length or target that cannot be met,
    with alternatives), and an empty list for the caller to put the serve line's own start-up
    in (plan: _served) before a missed target's deferred message is read: the message states
    the requests that start-up's KV cache holds."""
    served: list[MemoryResult] = []
    given = {k for k, v in dep.sources.items() if v == "cli"}
    n = workload.target_concurrency
    work_len = (workload.avg_input_tokens or 0) + (workload.avg_output_tokens or 0)
    if work_len:  # each image adds its tokens to the request (features.image_tokens)
        work_len += image_tokens(m, workload)
    # the prefix every request shares, held once (prefix caching; not for sliding/linear layers)
    shared = (workload.prefix_tokens() or 0) if prefix_shared(m, dep) else 0
    if any(p.code == "gpu-capability" for p in res.problems):
        goal = _Goal(n, work_len or res.max_model_len, res.max_model_len, shared)
        return _refused(gpu, dep, res), dep, res, _runs_elsewhere(
            _Setup(eng, m, gpu, knobs, dep, res), goal, larger_gpus), served
    target = _Goal(n, work_len or res.max_model_len, res.max_model_len, shared) if n else None
    rec_tp = _smallest_tp(eng, m, gpu, knobs, dep, res, target)
    s, prefix, problems = _replan_at_tp(_Setup(eng, m, gpu, knobs, dep, res), rec_tp, given)
    dep, res = s.dep, s.res
    util_name = _util_flag(eng).removeprefix("--").replace("-", "_")
    given_len = "max_model_len" in given
    current = dep.gpu_memory_utilization
    ceiling = eng.fraction_ceiling(dep, res)
    max_len = _planned_length(res, n, work_len, given_len, shared)
    goal = _Goal(n, work_len or max_len, max_len, shared)
    # the engine starts as configured though one request of the planned length does not fit
    # (SGLang caps each request at its KV pool): the serve line keeps the configured deployment
    # (what the plan describes), the problems name what to pass and the alternatives
    capped = res.fits and not n and not goal.met(res)
    frac = _kept_fraction(current, "gpu_memory_utilization" in given) if capped else \
        _fraction(s, goal, ceiling, util_name, given_util="gpu_memory_utilization" in given,
                  minimize_utilization=minimize_utilization)
    problems += frac.problems
    util = frac.value
    got = (dep, res) if util is None or util == current else s.attempt(
        gpu_memory_utilization=util)
    pdep, pres = got if got else (dep, res)
    met = goal.met(pres)
    rec_len_value: int | None = max_len
    if not goal.met(res):
        rec_len_value, miss = _next_steps(s, goal, pres, given, work_len, ceiling, larger_gpus,
                                          util, util_name, served)
        problems.append(miss)
    rec_tp = _tp_at_fraction(rec_tp, met, pdep, res, util, current, util_name)
    rec_len = _length_rec(rec_len_value, max_len, pres, met, n, work_len, given_len,
                          f"{util_name} {util if util else current:g}",
                          eng.flags.get("max_model_len", "--max-model-len"))
    rec_seqs = _seqs_rec(s, pdep, pres, workload, work_len, int(rec_len.value or max_len),
                         shared, given, f" at {util_name} {util:g}" if util else "",
                         {} if util is None or util == current
                         else {"gpu_memory_utilization": util})
    rec_util = Recommendation(value=util, reason=frac.reason)
    if n and "max_num_seqs" in given and rec_seqs.value and int(rec_seqs.value) < n:
        problems.append(_target_above_seqs(eng, n, int(rec_seqs.value), goal.held(pres)))
    for r in (rec_len, rec_seqs, rec_util):
        r.reason = prefix + r.reason
    return (Recommendations(max_model_len=rec_len, max_num_seqs=rec_seqs,
                            gpu_memory_utilization=rec_util, tensor_parallel_size=rec_tp),
            dep, res, problems, served)


def _target_above_seqs(eng: Engine, n: int, seqs: int, held: int) -> Problem:
    """--target-concurrency above a given max_num_seqs: the engine runs `seqs` at once and the
    rest wait for a slot, so the target's requests are not in flight together."""
    flag = eng.flags.get("max_num_seqs", "--max-num-seqs")
    more = f"{flag} {n}" + (f" (the KV cache holds {held})" if held >= n else
                            f" and a KV cache for them (it holds {held})")
    return Problem(code="target-above-max-num-seqs", severity="error", message=(
        f"--target-concurrency {n}: {flag} {seqs} as given runs {seqs} at once, and the other "
        f"{n - seqs} wait for a slot (their wait is in TTFT); alternatives: 1) {more}; "
        f"2) a lower target: {seqs}"))


def _kept_fraction(current: float, given_util: bool) -> _Fraction:
    """The budget fraction of a deployment that starts capped (one request of its length does
    not fit, the engine starts anyway): kept, so the serve line is the deployment planned."""
    return _Fraction(current, ("as given" if given_util else "the engine default")
                     + "; the engine starts with it (a value that holds a full-length request: "
                     "see next-steps)", [])


def _util_flag(eng: Engine) -> str:
    return eng.flags.get("gpu_memory_utilization", "--gpu-memory-utilization")


def _refused(gpu: GpuSpec, dep: Deployment, res: MemoryResult) -> Recommendations:
    """The GPU refuses this dtype / format: no other setting makes it start, so every
    recommendation points at the gpu-capability problem and keeps what was planned."""
    why = f"the {gpu.name} refuses this configuration (see the gpu-capability problem)"
    return Recommendations(
        max_model_len=Recommendation(value=res.max_model_len or None, reason=why),
        max_num_seqs=Recommendation(value=None, reason=why),
        gpu_memory_utilization=Recommendation(
            value=dep.gpu_memory_utilization if 0 < dep.gpu_memory_utilization <= 1 else None,
            reason=why),
        tensor_parallel_size=Recommendation(value=dep.tensor_parallel_size, reason=why))


def _runs_elsewhere(s: _Setup, goal: _Goal, larger_gpus: Sequence[GpuSpec]) -> list[Problem]:
    """A checkpoint whose format no kernel of the engine runs on this GPU (planner/whatif.py
    refusal): where it does run, cheapest first — the first larger GPU that holds `goal` as
    configured, then each other engine whose kernels run it on this GPU and that holds it.
    Every alternative is planned, so a GPU or engine that cannot run the format (refused like
    this one) is never proposed, and no layout on this GPU is: none starts. Worked out when the
    message is read. [] for another refusal (bfloat16, FP8 weights: knobs.capability_problems)."""
    eng, m, gpu, dep = s.eng, s.m, s.gpu, s.dep
    fmt = checkpoint_format(m.quantization)
    if fmt is None or eng.checkpoint_refusal(fmt, gpu, dep.engine_version) is None:
        return []

    def options() -> list[str]:
        larger = _larger_gpu(eng, m, gpu, s.knobs, dep, goal, larger_gpus)
        out = [] if larger is None else [f"a GPU that runs it: --gpu {larger.id}"]
        for other in what_if_running(fmt, gpu):
            if other is eng or set(_given(s.knobs)) & other.unsupported:
                continue
            got = _try(other, m, gpu, s.knobs, other.newest_version)
            if got and goal.met(got[1]):
                out.append(f"an engine that runs it here: --engine {other.name}")
        return out

    def message() -> str:
        found = options()
        return (f"{goal.text()}: {eng.label} cannot run this {fmt} checkpoint on the "
                f"{gpu.name} (its kernels need a newer GPU); alternatives that hold it, "
                "cheapest first: "
                + ("; ".join(f"{i}) {o}" for i, o in enumerate(found, 1)) or
                   "none found (no larger GPU that runs it, nor another engine, holds it as "
                   "configured)"))
    return [Problem.deferred(_in_tries(message), code="next-steps", severity="error")]


def _replan_at_tp(s: _Setup, rec_tp: Recommendation, given: set[str]
                  ) -> tuple[_Setup, str, list[Problem]]:
    """When nothing fits at this TP (no KV memory at all), the other settings only make sense
    on the deployment that does: re-plan at the recommended TP, and prefix the reasons with it
    (an error when the user gave the TP). Otherwise a shorter length and a larger TP are
    alternatives, and the command keeps the user's TP."""
    if not (rec_tp.value and rec_tp.value != s.dep.tensor_parallel_size
            and s.res.max_model_len_fit == 0):
        return s, "", []
    problems = []
    if "tensor_parallel_size" in given:
        problems.append(Problem(
            code="tensor-parallel-size-too-small", severity="error",
            message=f"tensor_parallel_size {s.dep.tensor_parallel_size} leaves no memory for "
            f"the KV cache; the serve line uses {rec_tp.value}, the smallest that fits"))
    knobs = s.knobs.model_copy(update={"tensor_parallel_size": rec_tp.value})
    # _smallest_tp evaluated this very deployment (with the same "cli" source): ask it again
    got = _evaluate_once(s.eng, s.m, s.gpu, knobs.given(), s.dep.engine_version, "cli", knobs)
    dep, res = got if got is not None else evaluate(s.eng, s.m, s.gpu, knobs,
                                                    s.dep.engine_version)
    return (_Setup(s.eng, s.m, s.gpu, knobs, dep, res),
            f"at tensor_parallel_size {rec_tp.value}: ", problems)


def _planned_length(res: MemoryResult, n: int | None, work_len: int, given_len: bool,
                    shared: int = 0) -> int:
    """The length to plan: the user's (kept unless it cannot work); with a target but neither a
    length nor a workload, the largest at which N requests fit at the highest safe budget;
    otherwise the configured length."""
    length_now = res.max_model_len
    if not n or work_len or given_len:
        return length_now
    model_max = max(res.max_model_len_fit, length_now)  # N requests fit no longer than one
    best = largest_true(lambda k: res.blocks_for(n, k, shared) <= res.usable_blocks, model_max)
    return best or length_now


def _fraction(s: _Setup, goal: _Goal, ceiling: float, util_name: str, *, given_util: bool,
              minimize_utilization: bool) -> _Fraction:
    """The budget fraction: the user's when it works; else the engine default unless the goal
    needs more (or the user asked for the minimum); never above the ceiling; None when no
    fraction starts the engine on this device."""
    eng, dep = s.eng, s.dep
    current = dep.gpu_memory_utilization
    needed = eng.fraction_needed(s.m, s.gpu, dep, s.res, goal.blocks(s.res))
    if dep.kv_cache_memory_bytes is not None:
        got = _Fraction(current, "--kv-cache-memory-bytes replaces the utilization budget", [])
    elif needed is None or not 0 < needed <= ceiling:
        got = _unworkable_fraction(eng, goal, needed, ceiling, current, given_util)
    elif given_util and needed <= current:
        got = _Fraction(current, f"as given; {goal.text()} {goal.need()} {needed}", [])
    else:  # a given fraction that is too low is raised, like the default
        got = _workable_fraction(eng, goal, needed, ceiling, current, util_name,
                                 given_util=given_util, minimize_utilization=minimize_utilization)
    if got.value is not None and not 0 < got.value <= 1 or ceiling <= 0:
        return _Fraction(None, f"no {util_name} works: the device is smaller than what "
                         f"{eng.label} holds outside the KV cache", got.problems)
    return got


def _unworkable_fraction(eng: Engine, goal: _Goal, needed: float | None, ceiling: float,
                         current: float, given_util: bool) -> _Fraction:
    """No fraction up to the ceiling holds the goal: keep the user's, else the highest safe one
    (the ceiling, or SAFE_UTILIZATION when that is lower: the fix-it lengths use it too)."""
    if given_util:
        return _Fraction(current, f"as given; {goal.text()} cannot be held at any safe value",
                         [])
    what = "more than the whole GPU" if needed is None else f"{needed}"
    safe = min(ceiling, max(SAFE_UTILIZATION, current))
    return _Fraction(None if ceiling <= 0 else safe,
                     f"{goal.text()} {goal.need()} {what}, above the {ceiling:g} at which "
                     f"{eng.label} still starts" + (
                         f"; {safe:g} keeps headroom for what the budget does not see"
                         if safe < ceiling else ""), [])


def _workable_fraction(eng: Engine, goal: _Goal, needed: float, ceiling: float, current: float,
                       util_name: str, *, given_util: bool,
                       minimize_utilization: bool) -> _Fraction:
    """Some fraction up to the ceiling holds the goal: the smallest one when the default (or
    the user's) is too low or the minimum was asked for; else the default, or the ceiling when
    the default would not start here (a shared GPU)."""
    if minimize_utilization or needed > current:
        reason = (f"{goal.text()} {goal.need()} {needed}: the smallest value that holds them"
                  + (f" (the default is {current:g})" if not given_util else
                     f" (the given {current:g} is too low)") + f"; up to {ceiling:g} starts safely")
        problems = [Problem(code="gpu-memory-utilization-too-low", severity="warning",
                            message=f"{util_name} {current:g} cannot hold {goal.text()}; "
                            f"the serve line uses {needed:g}")] if given_util else []
        return _Fraction(needed, reason, problems)
    if needed == current:
        return _Fraction(current, f"the engine default: exactly what {goal.text()} "
                         f"{goal.need()}", [])
    if current > ceiling:
        return _Fraction(ceiling, f"the engine default {current:g} is above the {ceiling:g} "
                         f"that starts here; {goal.text()} {goal.need()} {needed}", [])
    return _Fraction(current, f"the engine default; {goal.text()} {goal.need()} {needed}, and "
                     f"the rest of the budget adds KV capacity (--minimize-utilization picks "
                     f"{needed})", [])


def _next_steps(s: _Setup, goal: _Goal, pres: MemoryResult, given: set[str], work_len: int,
                ceiling: float, larger_gpus: Sequence[GpuSpec], util: float | None,
                util_name: str, served: Sequence[MemoryResult] = ()
                ) -> tuple[int | None, Problem]:
    """The goal does not fit as configured: the problem listing the alternatives (an error for
    a missed target or a given length), and the length the serve line uses — the shorter
    alternative when neither a target nor a length was given, None when nothing fits.
    `served`: the serve line's own start-up when it differs from `pres` (filled by plan
    before the message is read): a missed target's message and its lower-target alternative
    state the requests its KV cache holds, what the recommendation's max_num_seqs says and the
    line runs, not those of the profile at the configured max_num_seqs."""
    n = goal.n
    len_flag = s.eng.flags.get("max_model_len", "--max-model-len")
    met = goal.met(pres)

    def alternatives(held_by: MemoryResult | None = None) -> list[Alternative]:
        return _alternatives(s.eng, s.m, s.gpu, s.knobs, s.dep, goal, given, work_len, ceiling,
                             larger_gpus, held_by)

    def listing(options: list[Alternative]) -> str:
        return "; ".join(f"{i}) {o.text}" for i, o in enumerate(options, 1)) or \
            "none found (no safe utilization, fp8 KV cache, larger TP or larger GPU holds it)"

    given_len = "max_model_len" in given
    current = s.dep.gpu_memory_utilization
    if n:
        # with a target the serve line keeps the length, so the alternatives only fill the
        # message: worked out when it is read (a sweep reads few), among this plan's searches
        if not met:  # (and the message names no change to the serve line)
            def missed() -> str:
                line = served[0] if served else None
                kv = "the KV cache" if line is None else (
                    f"the KV cache the serve line starts with ({line.kv_cache.tokens:,} tokens)")
                return (f"--target-concurrency {n}: {kv} holds {goal.held(line or pres)} of "
                        f"{goal.text()}; alternatives, cheapest first: "
                        f"{listing(alternatives(line))}")
            return goal.max_len, Problem.deferred(_in_tries(missed), code="target-not-met",
                                                  severity="error")
        uses = f"; the serve line uses {util_name} {util:g}" if util != current else ""
        return goal.max_len, Problem.deferred(
            _in_tries(lambda: (
                f"{goal.text()} do not fit as configured; alternatives, cheapest first: "
                f"{listing(alternatives())}{uses}")), code="next-steps", severity="info")
    options = alternatives()
    shorter = next((o.value for o in options if o.kind is AlternativeKind.SHORTER_LENGTH), None)
    rec_len_value: int | None = goal.max_len
    if s.res.fits:
        pass  # the engine starts as configured (capped): the serve line keeps the length
    elif not met and shorter and not given_len:
        rec_len_value = shorter  # vLLM's own estimate, as before; the problem says so
    elif not met and not shorter and not pres.max_model_len_fit:
        rec_len_value = None
    uses = (f"; the serve line uses {util_name} {util:g}" if met and util != current else
            f"; the serve line uses {len_flag} {rec_len_value}" if rec_len_value and
            rec_len_value != goal.max_len else "")
    # a given length the engine still starts with (it caps the requests instead): a warning
    severity = "info" if met or not given_len else "warning" if s.res.fits else "error"
    return rec_len_value, Problem(
        code="next-steps", severity=severity,
        message=f"{goal.text()} does not fit as configured; "
        f"alternatives, cheapest first: {listing(options)}{uses}")


def _tp_at_fraction(rec_tp: Recommendation, met: bool, pdep: Deployment, res: MemoryResult,
                    util: float | None, current: float, util_name: str) -> Recommendation:
    """The TP recommendation when the configured deployment does not fit but the recommended
    fraction makes it fit: say that it fits with that fraction."""
    if met and pdep.tensor_parallel_size == rec_tp.value is not None and not res.fits:
        return Recommendation(value=rec_tp.value, reason=f"fits at tensor_parallel_size "
                              f"{rec_tp.value} with {util_name} {util:g}")
    if met and not res.fits and util != current:
        return Recommendation(value=pdep.tensor_parallel_size, reason=f"fits at "
                              f"tensor_parallel_size {pdep.tensor_parallel_size} with "
                              f"{util_name} {util:g}")
    return rec_tp


def _length_rec(value: int | None, max_len: int, pres: MemoryResult, met: bool, n: int | None,
                work_len: int, given_len: bool, at_util: str,
                len_flag: str = "--max-model-len") -> Recommendation:
    """max_model_len: none when no length fits; the user's as given; with a target and no
    workload, the largest at which N requests fit; a shorter one when the configured length
    does not fit; else the configured length (also when the engine starts with it capped:
    the reason says what to pass to make the cap explicit)."""
    if value is None:  # a length the user gave stays in the serve line, said not to fit
        return Recommendation(value=max_len if given_len else None, reason=(
            "as given; " if given_len else "") + "no length fits: there is no memory for the "
            "KV cache")
    if not met and pres.fits and not n:
        tokens = pres.kv_cache.tokens
        return Recommendation(value=max_len, reason=(
            "as given" if given_len else "the configured length") + f"; the engine starts, but "
            f"its KV cache holds {tokens:,} tokens, fewer than one request this long: pass "
            f"{len_flag} {tokens} to make that limit explicit (see the problems)")
    if given_len:
        return Recommendation(value=max_len, reason="as given" + (
            f"; the KV cache holds {pres.max_concurrency:.2f} requests of {max_len} tokens"
            if met else "; it does not fit as configured (see the problems)"))
    if n and not work_len:
        return Recommendation(value=max_len, reason=f"largest length at which "
                              f"{_plural(n, 'concurrent request')} fit at {at_util}")
    if value != max_len:
        return Recommendation(value=value, reason="the configured length does not fit; "
                              "this is the largest that does (the engine's estimated maximum "
                              "model length)")
    if not met:
        return Recommendation(value=max_len, reason="the configured length; one request this "
                              "long does not fit (see the problems)")
    return Recommendation(value=max_len, reason=f"one {max_len}-token request fits; the "
                          f"KV cache holds {pres.max_concurrency:.2f} of them")


def _seqs_rec(s: _Setup, pdep: Deployment, pres: MemoryResult, workload: Workload,
              work_len: int, length: int, shared: int, given: set[str], at: str,
              util: dict[str, object]) -> Recommendation:
    """max_num_seqs, sized at the recommended budget the command will use (`util`: the change
    that sets it, if any): the requests of the workload's length (else of `length`, the
    no-preemption bound) the KV cache holds, sharing the full blocks of a `shared`-token prefix,
    capped at the engine's limit; the user's batch size always starts, so it is kept and
    explained."""
    eng, m = s.eng, s.m
    if work_len:
        basis, what = work_len, f"the workload's {work_len} tokens per request (input + output" + (
            " + images)" if image_tokens(m, workload) else ")")
    else:
        basis = length
        what = (f"{basis} tokens each — the no-preemption bound; pass "
                "--avg-input-tokens/--avg-output-tokens for a realistic figure")
    if shared and basis:
        what += f", sharing a {min(shared, basis)}-token prefix"
    fit_seqs = pres.requests_held(basis, shared) if basis else 0
    cap = eng.max_seqs_cap(s.gpu, pdep)
    capped = cap is not None and fit_seqs > cap
    if "max_num_seqs" in given:
        seqs = int(pdep.max_num_seqs)
        over = f"more than {fit_seqs} running at once are preempted: " if seqs > fit_seqs else ""
        return Recommendation(value=seqs, reason=f"as given; {over}the KV cache{at} holds "
                              f"{_plural(fit_seqs, 'request')} of {what}")
    if not workload.sizes_batch():
        # Nothing sizes the batch: the launch lines leave the flag out (a cap at the
        # no-preemption bound would throttle shorter requests), so the engine runs its
        # default, and the plan says so rather than recommend a number it does not launch.
        default = int(pres.engine_defaults.get("max_num_seqs") or pdep.max_num_seqs)
        return Recommendation(value=default, reason=(
            f"the engine default: the KV cache{at} holds {_plural(fit_seqs, 'request')} of "
            f"{basis} tokens without preemption, but capping there throttles shorter ones; "
            "pass --avg-input-tokens/--avg-output-tokens"))
    seqs = min(fit_seqs, cap) if cap is not None and capped else fit_seqs
    tokens = pres.kv_cache.tokens
    if seqs and basis:
        seqs, fit_seqs, tokens = _settled_seqs(s, util, seqs, fit_seqs, basis, shared, cap,
                                               tokens)
        capped = cap is not None and fit_seqs > cap
    kv = "the KV cache" if tokens == pres.kv_cache.tokens else (
        f"the KV cache the serve line starts with ({tokens:,} tokens: its profile at "
        f"max_num_seqs {seqs})")
    held = f"{kv}{at} holds {_plural(fit_seqs, 'request')} of {what}"
    if seqs and seqs < fit_seqs and not capped:
        held += f" at max_num_seqs {seqs} (one more running request's profile leaves fewer)"
    return Recommendation(
        value=seqs or None,
        reason=held + (f", capped at the engine's limit of {cap} for this GPU" if capped else ""))


def _settled_seqs(s: _Setup, util: dict[str, object], seqs: int, fit_seqs: int, basis: int,
                  shared: int, cap: int | None, tokens: int) -> tuple[int, int, int]:
    """(max_num_seqs, the requests the KV cache holds at it, its KV tokens; `fit_seqs` and
    `tokens`, the configured profile's, when no value settles): the engine's start-up profile
    scales with max_num_seqs (vLLM's sampler warm-up runs max_num_seqs requests and its CUDA
    graphs capture batches up to it: model/forward.py), so the KV cache the serve line starts
    with differs from the one sized at the configured value. Re-sized at the value the line sets
    until it holds what it runs (at most three evaluations); the largest such value is kept
    (`seqs` was sized on the configured profile, which is the larger whenever it runs more)."""
    best: tuple[int, int, int] | None = None
    tried: set[int] = set()
    first = seqs
    while seqs not in tried and len(tried) < 3:
        tried.add(seqs)
        got = s.attempt(**util, max_num_seqs=seqs)
        if got is None or not got[1].fits:
            break
        fit = got[1].requests_held(basis, shared)
        if fit >= seqs and (best is None or seqs > best[0]):
            best = (seqs, fit, got[1].kv_cache.tokens)
        seqs = min(fit, cap) if cap is not None else fit
        if not seqs:
            break
    return best if best is not None else (first, fit_seqs, tokens)


def _alternatives(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                  goal: _Goal, given: set[str], work_len: int, ceiling: float,
                  larger_gpus: Sequence[GpuSpec], held_by: MemoryResult | None = None
                  ) -> list[Alternative]:
    """Changes that would meet `goal`, cheapest first: a higher utilization, fp8 KV cache, a
    larger TP, a larger GPU, then (only when the goal's length is max_model_len) a shorter
    length — never shorter than the workload's requests — or else a lower target: the requests
    `held_by` holds (the serve line's start-up) when given, else those at the safe budget."""
    version = dep.engine_version
    out: list[Alternative] = []
    flag_of = eng.flags.get
    top = {} if "gpu_memory_utilization" in given or ceiling <= 0 else \
        {"gpu_memory_utilization": max(min(ceiling, SAFE_UTILIZATION),
                                       dep.gpu_memory_utilization)}
    if top and dep.kv_cache_memory_bytes is None:
        out += _more_budget(eng, m, gpu, knobs, dep, goal, top["gpu_memory_utilization"],
                            ceiling)
    if not dep.kv_cache_dtype.startswith("fp8"):
        got = _try(eng, m, gpu, knobs, version, kv_cache_dtype="fp8", **top)
        if got and goal.met(got[1]):
            # the engine's flag and value, as its launch line writes them (TGI: fp8_e4m3fn)
            out.append(Alternative(AlternativeKind.FP8_KV_CACHE,
                                   f"{flag_of('kv_cache_dtype', '--kv-cache-dtype')} "
                                   f"{eng.kv_cache_dtype_arg('fp8', version)}"))
    for cand in _tp_candidates(m, gpu, knobs, dep):
        if cand <= dep.tensor_parallel_size:
            continue
        got = _try(eng, m, gpu, knobs, version, tensor_parallel_size=cand)
        if got and goal.met(got[1]):
            out.append(Alternative(AlternativeKind.TENSOR_PARALLEL, eng.tp_flag(dep, cand), cand))
            break
    else:
        out += _pipeline_alternative(eng, m, gpu, knobs, dep, goal)
    larger = _larger_gpu(eng, m, gpu, knobs, dep, goal, larger_gpus)
    if larger is not None:
        out.append(Alternative(AlternativeKind.LARGER_GPU, f"a larger GPU: --gpu {larger.id}"))
    got = _try(eng, m, gpu, knobs, version, **top)
    last = _shorter_or_fewer(eng, got[1], goal, top, work_len, held_by) if got else None
    return out + ([last] if last else [])


def _larger_gpu(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                goal: _Goal, larger_gpus: Sequence[GpuSpec]) -> GpuSpec | None:
    """The first of `larger_gpus` that holds `goal` with these settings, on as many GPUs of a
    system its node rules allow (planner/nodes.py); a GPU whose compute capability the
    engine refuses the settings on (Engine.checkpoint_kernel, bfloat16, FP8) never holds it."""
    for g in (x for x in larger_gpus if node_rules.joins_as_many(x, gpu) and node_rules.proposable(
            x, dep.tensor_parallel_size, dep.pipeline_parallel_size, dep.data_parallel_size)):
        got = _try(eng, m, g, knobs, dep.engine_version)
        if got and goal.met(got[1]):
            return g
    return None


MAX_PROPOSED_STAGES = 8  # pipeline stages a fix-it names at most (8 nodes of one TP group)


def _pipeline_alternative(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs,
                          dep: Deployment, goal: _Goal) -> list[Alternative]:
    """No TP inside the scale-up domain holds the goal: the fewest pipeline stages at the
    largest such TP that do, on whole nodes of the GPU's systems (planner/nodes.py); none for
    an engine without pipeline parallelism, a given PP, or an unknown system shape."""
    if ("pipeline_parallel_size" in eng.unsupported or dep.pipeline_parallel_size > 1
            or not gpu.systems and knobs.gpus_per_node is None):
        return []
    sizes = _tp_candidates(m, gpu, knobs, dep)
    if not sizes:
        return []
    tp = sizes[-1]
    for pp in range(2, min(MAX_PROPOSED_STAGES, m.num_layers) + 1):
        if not node_rules.proposable(gpu, tp, pp, dep.data_parallel_size, knobs.gpus_per_node):
            continue
        got = _try(eng, m, gpu, knobs, dep.engine_version, tensor_parallel_size=tp,
                   pipeline_parallel_size=pp)
        if got and goal.met(got[1]):
            place = node_rules.place(gpu, tp, tp * pp * dep.data_parallel_size,
                                     gpus_per_node=knobs.gpus_per_node)
            flag = eng.flags.get
            where = f" ({place.nodes} nodes of {place.gpus_per_node})" if place.nodes else ""
            return [Alternative(AlternativeKind.PIPELINE_NODES,
                                f"{eng.tp_flag(dep, tp)} "
                                f"{flag('pipeline_parallel_size', '--pipeline-parallel-size')} "
                                f"{pp}{where}", pp)]
    return []


def _more_budget(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                 goal: _Goal, safe: float, ceiling: float) -> list[Alternative]:
    """A higher budget fraction that meets the goal: up to `safe`; else up to the ceiling at
    which the engine still starts, saying the risk."""
    for top in (safe, ceiling):
        if top <= dep.gpu_memory_utilization:
            continue
        got = _try(eng, m, gpu, knobs, dep.engine_version, gpu_memory_utilization=top)
        if got and goal.met(got[1]):
            f = eng.fraction_needed(m, gpu, got[0], got[1], goal.blocks(got[1]))
            f = f if f is not None and 0 < f <= top else top
            risk = "" if f <= SAFE_UTILIZATION else (
                f" (above {SAFE_UTILIZATION:g}, under {1 - SAFE_UTILIZATION:.0%} of the device is "
                "left for what the budget does not see — other processes, allocator "
                "fragmentation, buffers that grow under load: an out-of-memory error is the risk)")
            return [Alternative(AlternativeKind.UTILIZATION, f"{_util_flag(eng)} {f:g}{risk}")]
    return []


def _shorter_or_fewer(eng: Engine, r: MemoryResult, goal: _Goal, top: dict[str, float],
                      work_len: int, held_by: MemoryResult | None = None) -> Alternative | None:
    """At the highest safe budget `top`: without a workload or without a target, the longest
    max_model_len at which the goal's requests fit (when shorter than planned); with both, how
    many of the workload's requests fit (when fewer than the target). Never a length shorter
    than the workload's requests."""
    if not work_len or not goal.n:
        n = goal.n or 1
        fit_len = largest_true(
            lambda k: r.blocks_for(n, k, goal.shared) + r.reserved_blocks <= r.num_blocks,
            max(r.max_model_len, r.max_model_len_fit))
        if not max(1, work_len) <= fit_len < goal.max_len:
            return None
        at = f" (at {_util_flag(eng)} {top['gpu_memory_utilization']:g})" if top else ""
        len_flag = eng.flags.get("max_model_len", "--max-model-len")
        return Alternative(AlternativeKind.SHORTER_LENGTH, f"{len_flag} {fit_len}{at}", fit_len)
    if not goal.n:
        return None
    fewer = goal.held(held_by or r)
    if not 0 < fewer < goal.n:
        return None
    return Alternative(AlternativeKind.LOWER_TARGET,
                       f"a lower target: {_plural(fewer, 'request')} of {goal.length} tokens fit")


# ------------------------------------------------------------------ performance


def _performance(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                 res: MemoryResult, rec: Recommendations, w: Workload,
                 price: Price | None, demand: Demand | None = None, *, figures: bool = True
                 ) -> tuple[Performance | None, list[Problem], TrafficPlan | None,
                            perf.PerfContext | None]:
    """The latency model on the recommended deployment, and its context; with SLOs,
    max_num_seqs and max_num_batched_tokens are chosen by it (and rec is updated in place).
    `figures` False: the caller drops the section (and the traffic curve), so only what changes
    `rec` or adds a problem is worked out."""
    missing = perf.missing_gpu_fields(gpu)
    if missing:
        return None, [Problem(code="no-performance-figures", severity="warning",
                              message=f"{gpu.id} has no {', '.join(missing)} in gpu_specs: "
                              "latency and throughput are omitted (the memory plan stands)")
                      ], None, None
    planned, util = dep, rec.gpu_memory_utilization.value
    if util and util != dep.gpu_memory_utilization and dep.kv_cache_memory_bytes is None:
        got = _try(eng, m, gpu, knobs, dep.engine_version, gpu_memory_utilization=util)
        if got:  # predict the deployment the launch line starts
            dep, res = got
    n = performance.lengths(w, block_size=res.block_size, prefix_caching=prefix_shared(m, dep),
                            image_tokens=image_tokens(m, w))
    acc, acc_source = performance.acceptance(dep, w)
    bound = performance.kv_bound(res, n)
    if not res.fits or bound == 0:
        return None, [], None, None
    s = _Setup(eng, m, gpu, knobs, dep, res)
    engine_seqs = _launch_seqs(dep, res, rec, w)
    problems: list[Problem] = []
    tokens = None
    if w.slo_ttft_ms is not None or w.slo_tpot_ms is not None:
        engine_seqs, tokens, problems = _size_for_slos(s, rec, _sizing(w, demand), n, bound,
                                                       engine_seqs, acc)
    if not figures and acc_source is None:  # (an assumed acceptance rate's problem quotes them)
        return None, problems, None, None
    picked: tuple[perf.PerfContext, traffic.RateResult] | None = None
    if tokens is not None and w.request_rate is not None and not dep.user_set("max_num_seqs") \
            and not (demand is not None and (demand.trace or demand.curve)):
        engine_seqs, picked = _seqs_for_rate(s, planned, rec, w, demand, n, min(
            bound, eng.max_seqs_cap(gpu, dep) or bound), engine_seqs, acc)
    changes = _served_changes(planned, rec, w)
    if changes:  # the deployment the launch line starts (its own profile and CUDA graphs)
        got = _try(eng, m, gpu, knobs, dep.engine_version, **changes)
        if got and got[1].fits and performance.kv_bound(got[1], n):
            dep, res = got
            bound = performance.kv_bound(res, n)
    # the user's target, else the max_num_seqs the plan recommends (not a saturating default)
    concurrency = w.target_concurrency or min(bound, int(rec.max_num_seqs.value or engine_seqs))
    ctx = performance.context(m, gpu, dep, res, max_num_seqs=engine_seqs, acceptance_rate=acc,
                              nodes=knobs.nodes, gpus_per_node=knobs.gpus_per_node)
    extra, curve = None, None
    if w.simulated() or (demand is not None and demand.asked()):  # only when asked
        from . import traffic

        extra, rates = traffic.simulated(
            ctx, w, demand, n.input_tokens, n.output_tokens, n.cached_tokens,
            block_size=res.block_size, running=engine_seqs, concurrency=concurrency,
            gpus=dep.tensor_parallel_size * dep.pipeline_parallel_size,
            unit=dep.data_parallel_size,  # one launch starts every DP rank
            price_per_gpu_hour=price.usd_per_hour if price else None,
            metrics=dict(eng.autoscale_metrics),
            known=picked[1] if picked is not None and picked[0] == ctx else None)
        curve = TrafficPlan.model_validate(rates) if rates else None
    section = performance.section(ctx, dep, w, n, concurrency, max(bound, concurrency), price,
                                  acceptance_source=acc_source, extra=extra)
    if section.meets_slo_at_percentile is False and section.request_rate is not None \
            and section.replicas is None:  # no replica count holds the rate's SLOs
        problems.append(_percentile_unmet(section, w))
    elif section.meets_slo_at_percentile is False and demand is not None and demand.trace:
        problems.append(_trace_unmet(section))
    if curve is not None and curve.unmet_intervals:
        problems.append(_curve_unmet(curve, w))
    if acc_source is not None and acc_source != "cli":
        problems.append(_acceptance_assumed(section, acc, acc_source))
    return section, problems, curve, ctx


def _seqs_for_rate(s: _Setup, planned: Deployment, rec: Recommendations, w: Workload,
                   demand: Demand | None, n: performance.Lengths, top: int, seqs: int, acc: float
                   ) -> tuple[int, tuple[perf.PerfContext, traffic.RateResult] | None]:
    """With a request rate, the max_num_seqs that holds it at the percentile with the fewest
    replicas (traffic.running_for_rate), from the latency targets' closed-loop value up to the
    KV cache's bound `top`, each on the deployment the serve line would start (its memory at
    that max_num_seqs); rec.max_num_seqs is updated in place when it moves. Returns it with
    the latency model and replica search of the value chosen (None: none holds the rate)."""
    from . import traffic

    contexts: dict[int, perf.PerfContext] = {}

    def context(k: int) -> perf.PerfContext:
        changes = {**_served_changes(planned, rec, w), "max_num_seqs": k}
        got = _try(s.eng, s.m, s.gpu, s.knobs, planned.engine_version, **changes)
        dep, res = got if got and got[1].fits else (s.dep, s.res)
        contexts[k] = performance.context(s.m, s.gpu, dep, res, max_num_seqs=k,
                                          acceptance_rate=acc, nodes=s.knobs.nodes,
                                          gpus_per_node=s.knobs.gpus_per_node)
        return contexts[k]

    mix = traffic.mix_of(w, demand, n.input_tokens, n.output_tokens, n.cached_tokens)
    best, result, tried = traffic.running_for_rate(context, w, mix, float(w.request_rate or 0),
                                                   s.res.block_size, seqs, top,
                                                   unit=s.dep.data_parallel_size)
    if best != seqs:
        counts = "; ".join(f"{k}: {r}" for k, r in tried)
        rec.max_num_seqs = Recommendation(value=best, reason=(
            f"the fewest replicas for {w.request_rate:g} req/s at the p{w.slo_percentile or 99:g}"
            f" targets (replicas by max_num_seqs: {counts}); {seqs}, the targets' closed-loop "
            "value, makes a burst of arrivals wait for a slot"))
    return best, (contexts[best], result) if result is not None else None


def _served_changes(dep: Deployment, rec: Recommendations, w: Workload) -> dict[str, int | float]:
    """The knobs the serve line sets to other values than `dep`'s (engines' `command`): the
    recommended budget fraction (unless a KV size is given), max_num_seqs where the workload
    sizes the batch or the user set it, and the latency targets' max_num_batched_tokens."""
    want = {"gpu_memory_utilization": None if dep.kv_cache_memory_bytes is not None
            else rec.gpu_memory_utilization.value,
            "max_num_seqs": rec.max_num_seqs.value
            if w.sizes_batch() or dep.user_set("max_num_seqs") else None,
            "max_num_batched_tokens": batched_tokens_flag_value(rec, dep)}
    return {k: v for k, v in want.items() if v is not None and v != getattr(dep, k)}


def _served(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
            res: MemoryResult, rec: Recommendations, w: Workload
            ) -> tuple[PlanServed | None, MemoryResult | None]:
    """The serve line's own memory and KV cache when it sets other values than `dep` and they
    change them (the performance figures were worked out on it: the evaluation is remembered),
    with its memory result; None when it starts with `res`'s, or the engine refuses the
    changes."""
    changes = _served_changes(dep, rec, w)
    got = _try(eng, m, gpu, knobs, dep.engine_version, **changes) if changes else None
    if got is None or not got[1].fits or (got[1].memory == res.memory
                                          and got[1].kv_cache == res.kv_cache):
        return None, None
    return PlanServed(settings=changes, memory=got[1].memory, kv_cache=got[1].kv_cache), got[1]


def _sizing(w: Workload, demand: Demand | None) -> Workload:
    """The workload max_num_seqs is sized for: a trace or a rate curve sizes replicas at the
    percentile, as a rate does, and the batch on the mean model (the percentiles of a closed
    loop do not apply to them)."""
    if demand is not None and (demand.trace or demand.curve):
        return w.model_copy(update={"slo_percentile": None})
    return w


def _launch_seqs(dep: Deployment, res: MemoryResult, rec: Recommendations, w: Workload) -> int:
    """The max_num_seqs the launch line runs with: the user's, else the recommendation when the
    workload sizes the batch, else the engine's default."""
    engine_seqs = (dep.max_num_seqs if dep.user_set("max_num_seqs")
                   else res.engine_defaults.get("max_num_seqs") or dep.max_num_seqs)
    if rec.max_num_seqs.value and (w.sizes_batch() or dep.user_set("max_num_seqs")):
        engine_seqs = int(rec.max_num_seqs.value)  # what the launch line sets
    return int(engine_seqs)


def _size_for_slos(s: _Setup, rec: Recommendations, w: Workload, n: performance.Lengths,
                   bound: int, engine_seqs: int, acc: float
                   ) -> tuple[int, int | None, list[Problem]]:
    """With latency targets: the largest max_num_seqs that meets them (kept as the user's when
    given, with a warning when theirs lets more run), then max_num_batched_tokens for the
    TTFT/TPOT trade-off and a re-search at that budget. Returns the concurrency the engine
    runs, the batched-token budget chosen (None: unchanged) and the problems (a target missed
    even at one request, or at the target's concurrency); rec is updated in place."""
    eng, m, gpu, dep = s.eng, s.m, s.gpu, s.dep
    problems: list[Problem] = []
    cap = eng.max_seqs_cap(gpu, dep)
    search = performance.context(m, gpu, dep, s.res, max_num_seqs=min(bound, cap or bound),
                                 acceptance_rate=acc, nodes=s.knobs.nodes,
                                 gpus_per_node=s.knobs.gpus_per_node)
    seqs_rec, best = performance.slo_seqs(search, w, n, bound, cap, s.res.block_size)
    given_seqs = dep.user_set("max_num_seqs")
    if given_seqs:  # the user's batch size stays; say so
        if best and engine_seqs > best:
            problems.append(Problem(
                code="slo-max-num-seqs", severity="warning",
                message=f"max_num_seqs {engine_seqs} as given lets more requests run than "
                f"the latency targets allow: up to {best} meet them ({seqs_rec.reason})"))
        best = min(best, engine_seqs) if best else 0
    else:
        rec.max_num_seqs = seqs_rec
    if best == 0:
        one = performance.at_lengths(search, n, 1)
        problems.append(performance.unmet_slo_problem(
            w, n, one, _slo_alternatives(eng, m, gpu, s.knobs, dep, w, n)))
        return engine_seqs, None, problems
    engine_seqs = engine_seqs if given_seqs else best
    tokens = None
    if not dep.user_set("max_num_batched_tokens"):
        rec.max_num_batched_tokens, tokens = _batched_tokens(eng, m, gpu, s.knobs, dep, w, n,
                                                             best)
        got = s.attempt(max_num_batched_tokens=tokens)
        if got and tokens != dep.max_num_batched_tokens:  # re-search at that budget
            again = performance.context(m, gpu, got[0], got[1],
                                        max_num_seqs=min(bound, cap or bound),
                                        acceptance_rate=acc, nodes=s.knobs.nodes,
                                        gpus_per_node=s.knobs.gpus_per_node)
            seqs_rec, again_best = performance.slo_seqs(again, w, n,
                                                        performance.kv_bound(got[1], n), cap,
                                                        got[1].block_size)
            if again_best >= best and not given_seqs:
                rec.max_num_seqs, best = seqs_rec, again_best
                engine_seqs = best
    if w.target_concurrency and w.target_concurrency > best:
        problems.append(Problem(
            code="slo-target-concurrency", severity="error",
            message=f"{w.target_concurrency} concurrent requests miss the latency target; "
            f"up to {best} meet it here ({rec.max_num_seqs.reason})"))
    return engine_seqs, tokens, problems


def _acceptance_assumed(section: Performance, acc: float, acc_source: str) -> Problem:
    """Speculative decoding predicted with an acceptance rate the user did not give: say which,
    and above what rate it pays off at this concurrency."""
    even = section.break_even_acceptance_rate
    return Problem(
        code="acceptance-rate-assumed", severity="warning" if acc == 0 else "info",
        message=f"speculative decoding latency assumes a draft-token acceptance rate of {acc:g} "
        f"({acc_source}); pass --acceptance-rate from your engine's metrics (vLLM logs "
        "'Draft acceptance rate'). At this concurrency it lowers TPOT only above "
        + ("— never: the verify and draft passes cost more than they save here"
           if even is None else f"{even:g}"))


def _batched_tokens(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                    w: Workload, n: performance.Lengths, seqs: int) -> tuple[Recommendation, int]:
    """max_num_batched_tokens for the TTFT/TPOT trade-off, each candidate re-planned (its
    activation peak moves the KV cache) and evaluated at `seqs` requests."""
    options = []
    for cand in performance.BATCHED_TOKENS_CHOICES:
        got = _try(eng, m, gpu, knobs, dep.engine_version, max_num_batched_tokens=cand)
        if not got or not got[1].fits or performance.kv_bound(got[1], n) < seqs:
            continue
        ctx = performance.context(m, gpu, got[0], got[1], max_num_seqs=seqs,
                                  acceptance_rate=performance.acceptance(dep, w)[0])
        options.append((cand, performance.at_lengths(ctx, n, seqs)))
    chosen = performance.batched_tokens_choice(options, dep.max_num_batched_tokens, w)
    return chosen, int(chosen.value or dep.max_num_batched_tokens)


def _slo_alternatives(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs, dep: Deployment,
                      w: Workload, n: performance.Lengths) -> list[str]:
    """Single changes that meet the SLOs at one request: more TP, fp8 weights, fp8 KV."""
    out = []
    tries: list[tuple[str, dict[str, object]]] = []
    bigger = [t for t in _tp_candidates(m, gpu, knobs, dep) if t > dep.tensor_parallel_size]
    if bigger:
        tries.append((eng.tp_flag(dep, bigger[0]), {"tensor_parallel_size": bigger[0]}))
    if dep.quant is None and gpu.fp8_native and "quantization" not in eng.unsupported:
        tries.append(("--quantization fp8", {"quantization": "fp8"}))
    for label, change in tries:
        got = _try(eng, m, gpu, knobs, dep.engine_version, **change)
        if not got or not got[1].fits:
            continue
        ctx = performance.context(m, gpu, got[0], got[1], max_num_seqs=1,
                                  acceptance_rate=performance.acceptance(dep, w)[0])
        p = performance.at_lengths(ctx, n, 1)
        if performance._meets(p, w):
            out.append(label)
    return out


# ------------------------------------------------------------------ shared notes


def model_gpu_problems(m: ModelSpec, g: GpuSpec, dep: Deployment, *, engine: str) -> list[Problem]:
    """Notes that do not depend on the engine's arithmetic: the model's own, unsupported
    layouts, quantization that needs the checkpoint, estimated GPU totals, non-CUDA GPUs."""
    problems = list(m.problems)
    if m.vision is not None and not registry.get(dep.engine).models_vision_encoder:
        problems.append(Problem(
            code="encoder-profiling", severity="info",
            message=f"{engine} also profiles the vision encoder with a maximum-size image batch "
            "at start-up; for large images or many images per prompt that peak can exceed the "
            "text forward pass estimated here (vLLM: --limit-mm-per-prompt '{\"image\": 0}' "
            "serves text only)"))
    if m.unmodelled_quantization and m.weights_from == "config":
        problems.append(Problem(
            code="unmodelled-quantization", severity="warning",
            message=f"{m.unmodelled_quantization} cannot be sized from config.json: weights are "
            f"counted in {m.dtype}; plan the checkpoint itself (a local directory or its Hub repo) "
            "so the safetensors headers give the exact bytes"))
    if m.layout_assumed:
        problems.append(_layout_assumed(m))
    problems += [Problem(code="unsupported-layout", severity="warning",
                         message=f"{feature}: the numbers assume full attention on every layer "
                         "and may be wrong for this model") for feature in m.unsupported]
    if g.cuda_total_estimated and not dep.user_set("gpu_total_bytes"):
        problems.append(Problem(code="gpu-total-estimated", severity="warning",
                                message=f"the CUDA-visible total of {g.id} is an estimate "
                                f"({dep.gpu_total_bytes / GiB:.2f} GiB); pass --gpu-memory-gib "
                                "with the total your engine log prints"))
    if g.local is not None and dep.other_processes_bytes:
        problems.append(Problem(
            code="gpu-shared", severity="warning",
            message=f"GPU {g.local.index} ({g.local.nvml_name}) is shared: "
            f"{dep.other_processes_bytes / GiB:.2f} GiB is already in use "
            f"({g.local.processes} compute process(es)); planned against what is free"))
    if g.vendor != "NVIDIA":
        # AMD Instinct runs on the engines' ROCm platform (vLLM vllm/platforms/rocm.py), Intel
        # Gaudi on HPU (vllm/platforms/hpu.py, later the vllm-project/vllm-gaudi plugin)
        platform = {"AMD": "ROCm", "Intel": "HPU (Gaudi)"}.get(g.vendor, g.vendor)
        problems.append(Problem(code="non-cuda-platform", severity="warning",
                                message=f"{g.vendor} GPUs use {engine}'s {platform} platform, "
                                "whose defaults and buffers kvplan has not calibrated"))
    return problems


def _lora_knobs_without_lora(eng: Engine, knobs: Knobs, dep: Deployment) -> list[Problem]:
    """LoRA sizes given while LoRA stays off (no --enable-lora; SGLang's --lora-paths and
    TensorRT-LLM's target modules also turn it on): the engine ignores them, so say so."""
    given = [k for k in ("max_loras", "max_lora_rank", "max_cpu_loras", "lora_target_modules")
             if getattr(knobs, k, None) is not None]
    if not given or dep.enable_lora or knobs.enable_lora:
        return []
    flags = ", ".join("--" + k.replace("_", "-") for k in given)
    return [Problem(code="lora-off", severity="warning",
                    message=f"{flags} has no effect without --enable-lora: {eng.label} builds no "
                    "LoRA slots, so none are planned")]


def _parameters(m: ModelSpec) -> int:
    """The count the weights were sized from: the headers' when they won, else the config's."""
    if m.weights_from == "headers" and m.header_parameters:
        return m.header_parameters
    return parameter_count(m)


def _layout_assumed(m: ModelSpec) -> Problem:
    """What is assumed for a model_type kvplan does not model layer by layer (never silent):
    the KV cache always, the weights only when no safetensors headers were read."""
    kv = (f"the KV cache assumes full attention on all {m.num_layers} layers with "
          f"{m.num_kv_heads} KV heads × {m.head_dim} dims (from config.json)")
    if m.weights_from == "headers":
        return Problem(code="layout-assumed", severity="warning",
                       message=f"model_type {m.layout_assumed!r} is not modelled layer by layer: "
                       f"weights come from the safetensors headers, and {kv}; the activation "
                       "peak is estimated Llama-style")
    return Problem(code="layout-assumed", severity="warning",
                   message=f"model_type {m.layout_assumed!r} is not modelled layer by layer: "
                   f"weights assume a Llama-style layout (gated MLP of 3 × {m.intermediate_size} "
                   "matrices, RMSNorm, no biases), which is off by up to a third of the MLP for "
                   f"a non-gated family, and {kv}. Plan the checkpoint (a local directory with its "
                   "safetensors files, or its Hub repo id) so the weights come from its headers")


def serve_ref(m: ModelSpec) -> str:
    """What a launcher needs: the local directory, else the repo id."""
    return m.local_dir or m.id
