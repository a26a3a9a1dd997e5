"""Sweep: every (GPU, GPU count, TP × PP layout, weight format, KV dtype, engine) kvplan can plan
for one model, each planned in full by the planner, then ranked: the options that meet the
target first (cheapest first), then the nearest misses with why they miss.

Pure: no catalogue or file I/O. api.sweep() resolves names and reads price files; this module
takes a ModelSpec, a list of GpuSpecs and a price table.

Latency: the ranking and the SLO filter read `plan.performance` (tpot_ms, ttft_ms,
output_tokens_per_s) when the planner provides it; until it does, options are ranked by memory
and price only, and every SLO given is reported as not evaluated.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from enum import Enum
from functools import cache
from operator import itemgetter
from typing import Any, ClassVar, Literal, NamedTuple, cast, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)
from pydantic.json_schema import SkipJsonSchema

from ..engines import registry
from ..errors import InvalidInputError, KvplanError, Reason
from ..knobs import Knobs, Layout, resolve_layout, valid_tp_sizes
from ..model.weights import stage_tensor_bytes
from ..model.whatif import FORMATS, checkpoint_format, what_if_format
from ..specs import (
    Deferred,
    DisaggPlan,
    GpuSpec,
    ModelSpec,
    Plan,
    Price,
    WhatIfPlan,
    Workload,
)
from ..units import usd_per_million_tokens
from ..versions import normalize_version
from . import nodes as node_rules
from .plan import _given as plan_given  # k.given(), as the plan of these knobs just asked it
from .plan import gc_paused, shared_tries
from .plan import plan as make_plan
from .whatif import apply as what_if_apply
from .whatif import unsupported as what_if_unsupported

SWEEP_SCHEMA_VERSION = "1.0"
RankOn = Literal["pessimistic", "point"]  # --rank-on: which end of the latency bands ranks
NO_LATENCY_MODEL = "SLO not evaluated (no bandwidth/FLOPs figures"  # the reason's prefix
MAX_SWEEP_GPUS = 64


class _Model(BaseModel):
    # schemas are built on first use, so `import kvplan` (and `kvplan plan`) does not pay for them
    model_config = ConfigDict(defer_build=True)


# ------------------------------------------------------------------------- inputs


class Target(_Model):
    """What the deployment must do."""

    max_model_len: int | None
    target_concurrency: int | None
    avg_input_tokens: int | None
    avg_output_tokens: int | None
    slo_tpot_ms: float | None = None
    slo_ttft_ms: float | None = None


class Candidate(NamedTuple):  # a NamedTuple: a sweep makes hundreds, most of them pruned
    gpu: GpuSpec
    tensor_parallel_size: int
    pipeline_parallel_size: int
    quantization: str | None  # None: the checkpoint's own format
    kv_cache_dtype: str | None  # None: auto (the model dtype)
    engine: str

    @property
    def count(self) -> int:  # type: ignore[override]  # (not tuple.count: GPUs, not items)
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def knobs(self, base: Knobs) -> Knobs:
        """The knobs `kvplan plan` takes for this option (the same object planned here)."""
        return base.model_copy(update={
            "tensor_parallel_size": self.tensor_parallel_size,
            # PP 1 stays unset: an engine without pipeline parallelism (TGI) refuses the flag
            "pipeline_parallel_size": self.pipeline_parallel_size if self.pipeline_parallel_size > 1
            else None,
            "quantization": self.quantization, "kv_cache_dtype": self.kv_cache_dtype})


# ------------------------------------------------------------------------ results


class MissKind(Enum):
    """What one of an option's reasons says: a memory or latency miss (the option does not meet
    the target), or a note (no latency model to evaluate an SLO, no price)."""

    MEMORY = "memory"
    SLO = "SLO"
    NO_LATENCY = "no-latency"
    NO_PRICE = "no-price"


class Miss(NamedTuple):
    """One reason on an option: its kind and the sentence `reasons` prints."""

    kind: MissKind
    text: str


class PrunedKind(Enum):
    """Why a candidate was not planned; the value is the label its reason starts with."""

    UNSUPPORTED_FORMAT = "unsupported format"
    UNSUPPORTED = "unsupported"
    MEMORY = "memory"


class Option(Deferred, _Model):
    """One planned candidate. `plan` is the very object `kvplan plan --json` prints for it."""

    rank: int = Field(description="1 = best; options that meet the target come first")
    meets_target: bool
    reasons: list[str] = Field(description="why it misses; notes (e.g. SLO not evaluated)")
    reason_kinds: list[MissKind] = Field(default_factory=list, exclude=True,
                                         description="the kind of each reason, in order")
    pareto: bool = Field(description="not dominated by a cheaper option with as much headroom "
                         "(and throughput, when a latency model exists); only among options that "
                         "meet the target and have a price")
    # gpu, count, tensor_parallel_size, pipeline_parallel_size, engine, quantization,
    # kv_cache_dtype, weights_format and kv_tokens are read from `plan` and `knobs` (properties
    # below); the JSON prints them here, between pareto and headroom (_with_plan_fields)
    headroom: float = Field(description="KV tokens at the engine's default budget ÷ tokens the "
                            "target needs (target_concurrency × (input + output), else one "
                            "max_model_len request)")
    price_per_hour: float | None = Field(description="US$ for all `count` GPUs per hour")
    price_source: str | None
    price_date: str | None = None
    price_default: bool | None = Field(None, description="True: kvplan's bundled default price, "
                                       "not the user's")
    cost_per_million_output_tokens: float | None = Field(
        description="US$; None until a latency model provides throughput")
    tpot_ms: float | None = None
    ttft_ms: float | None = None
    output_tokens_per_s: float | None = None
    # --- traffic ---
    replicas_for_rate: int | None = Field(None, description="sweep --request-rate: replicas "
                                          "of this option the rate needs")
    replicas_simulated: bool | None = Field(None, description="True: from the scheduler "
                                            "simulation at the SLO percentile; False: estimated "
                                            "from throughput (rate ÷ 95 % of capacity)")
    cost_per_day_for_rate: float | None = Field(None, description="US$ per day for those "
                                                "replicas")
    knobs: dict[str, Any] = Field(description="the knobs this option was planned with (kvplan "
                                  "plan's, with underscores)")
    plan: SerializeAsAny[Plan]  # a WhatIfPlan keeps its what_if in JSON
    # --- finish26: how sure the latency figures are (plan.performance), and their bands ---
    calibrated: bool | None = Field(None, description="the plan's latency figures are "
                                    "calibrated for this GPU architecture × engine "
                                    "(performance.calibrated); false: extrapolated; null: none")
    ttft_ms_low: float | None = None
    ttft_ms_high: float | None = None
    tpot_ms_low: float | None = None
    tpot_ms_high: float | None = None
    output_tokens_per_s_low: float | None = None
    output_tokens_per_s_high: float | None = None
    cost_per_million_output_tokens_high: float | None = Field(
        None, description="US$ at the band's low throughput (what --rank-on pessimistic ranks)")
    # --- disagg ---
    disaggregated: bool = Field(False, description="a disaggregated prefill/decode service "
                                "(sweep --disagg): `plan` is its decode pool, `service` the whole")
    service: DisaggPlan | None = Field(None, description="`kvplan plan --disagg --json` for it")

    # Option.deferred(reasons, …): reasons worked out when first read or serialized: the
    # ranking reads only their kinds, and a sweep's caller reads few options' reasons
    DEFERRED: ClassVar[str] = "reasons"
    PLACEHOLDER: ClassVar[Any] = []

    def missing(self, *kinds: MissKind) -> bool:
        """Whether any reason is of one of `kinds` (read from reason_kinds alone)."""
        return any(k in kinds for k in self.reason_kinds)

    def ranked(self, rank_on: RankOn) -> tuple[float | None, float | None, float | None,
                                               float | None]:
        """(TTFT, TPOT, output tokens/s, $/M output tokens) the ranking reads: each band's
        pessimistic end (higher latency, lower throughput) or the point estimates."""
        if rank_on == "point":
            return (self.ttft_ms, self.tpot_ms, self.output_tokens_per_s,
                    self.cost_per_million_output_tokens)
        return (self.ttft_ms_high, self.tpot_ms_high, self.output_tokens_per_s_low,
                self.cost_per_million_output_tokens_high)

    @property
    def misses(self) -> list[Miss]:
        """The reasons with their kinds."""
        return [Miss(k, t) for k, t in zip(self.reason_kinds, self.reasons, strict=True)]

    def misses_of(self, *kinds: MissKind) -> list[Miss]:
        return [r for r in self.misses if r.kind in kinds]

    @property
    def shown_reasons(self) -> list[str]:
        """The reasons a table shows: all but "SLO not evaluated" (the notes say that once)."""
        return [r.text for r in self.misses if r.kind is not MissKind.NO_LATENCY]

    @property
    def gpu(self) -> str:
        return self.plan.gpu.id

    @property
    def count(self) -> int:
        """GPUs in the deployment (TP × PP; the sweep plans one replica; a disaggregated
        service: every GPU of both pools)."""
        return self.service.disaggregated.gpus if self.service else self.plan.gpu.count

    @property
    def tensor_parallel_size(self) -> int:
        return self._size("tensor_parallel_size")

    @property
    def pipeline_parallel_size(self) -> int:
        return self._size("pipeline_parallel_size")

    def _size(self, name: str) -> int:
        value = self.plan.inputs[name].value
        if not isinstance(value, int):
            raise TypeError(f"plan.inputs[{name!r}] is {value!r}, not a size")
        return value

    @property
    def engine(self) -> str:
        return self.plan.engine.name

    @property
    def quantization(self) -> str | None:
        """--quantization given (None: the checkpoint's own format)."""
        return self.knobs.get("quantization")

    @property
    def kv_cache_dtype(self) -> str | None:
        """--kv-cache-dtype given (None: auto)."""
        return self.knobs.get("kv_cache_dtype")

    @property
    def weights_format(self) -> str:
        """What the weights are sized as."""
        return self.plan.model.quantization or self.plan.model.dtype

    @property
    def kv_tokens(self) -> int:
        return self.plan.kv_cache.tokens

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The stored fields, with the ones read from the plan printed after `pareto` (the
        sweep JSON's order since schema 1.0)."""
        self._filled()
        stored = handler(self)
        if stored.get("service") is None:  # an aggregated option: `disaggregated` says so
            stored.pop("service", None)
        out = {k: stored.pop(k) for k in ("rank", "meets_target", "reasons", "pareto")}
        out.update((k, getattr(self, k)) for k in _PLAN_FIELDS)
        return out | stored


_PLAN_FIELDS = ("gpu", "count", "tensor_parallel_size", "pipeline_parallel_size", "engine",
                "quantization", "kv_cache_dtype", "weights_format", "kv_tokens")


class Pruned(_Model):
    """A candidate not planned, and why (weights alone exceed the device, unsupported format)."""

    gpu: str
    count: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    engine: str
    quantization: str | None
    kv_cache_dtype: str | None
    reason: str = Field(description="the kind's label, then what about it")
    # not in the JSON (reason carries both), nor in its schema
    kind: SkipJsonSchema[PrunedKind] = Field(exclude=True)
    detail: SkipJsonSchema[str] = Field(exclude=True, description="the reason after its kind's "
                                        "label")


# A sweep's answer. Its `pruned` list ends with the candidates too large to plan, each with its
# weights' excess in words: worked out when first read or serialized (Deferred), as a large
# model's sweep prunes hundreds that an in-process caller may never read. (A comment, not a
# docstring: the class's JSON schema would print it.)
class SweepResult(Deferred, _Model):
    schema_version: str = SWEEP_SCHEMA_VERSION
    model: str
    target: Target
    latency_model: bool = Field(description="False: ranked by memory and price only")
    ranking: str = Field(description="how options are ordered, in words")
    notes: list[str]
    candidates: int = Field(description="candidates considered (planned + pruned)")
    options: list[Option] = Field(description="planned candidates, best first")
    pruned: list[Pruned]
    # --- finish26 ---
    rank_on: RankOn = Field("pessimistic", description="latency figures ranked by their band's "
                            "pessimistic end, or by the point estimate")
    DEFERRED: ClassVar[str] = "pruned"
    PLACEHOLDER: ClassVar[Any] = []

    @property
    def meeting(self) -> list[Option]:
        return [o for o in self.options if o.meets_target]

    @property
    def exit_code(self) -> int:
        """0: some option meets the target; 1: none does."""
        return 0 if self.meeting else 1

    def model_dump_json(self, **kwargs: Any) -> str:
        """As BaseModel.model_dump_json, without the cyclic collector meanwhile (as while
        sweeping): it works out every option's deferred parts (concurrency tables, serve lines,
        a missed target's alternatives), thousands of objects none of them freed in cycles,
        and each pass of the collector would walk the result's large heap."""
        with gc_paused():
            return super().model_dump_json(**kwargs)


# ---------------------------------------------------------------------- candidates


def layouts(m: ModelSpec, max_gpus: int, engine: str) -> list[tuple[int, int]]:
    """(tp, pp) with tp valid for the model and tp × pp ≤ max_gpus, fewest GPUs first.
    Engines without pipeline parallelism (TGI) get pp = 1 only."""
    pp_max = 1 if "pipeline_parallel_size" in registry.get(engine).unsupported else m.num_layers
    out = [(tp, pp) for tp in valid_tp_sizes(m, limit=max_gpus)
           for pp in range(1, min(max_gpus // tp, pp_max) + 1)]
    return sorted(out, key=lambda x: (x[0] * x[1], x[1]))


def candidates(m: ModelSpec, gpus: Sequence[GpuSpec], *, engines: Sequence[str], max_gpus: int,
               quantizations: Sequence[str | None] | None,
               kv_cache_dtypes: Sequence[str | None] | None, gpus_per_node: int | None = None,
               engine_version: str | None = None) -> tuple[list[Candidate], list[Pruned]]:
    """Every candidate, and those dropped before planning because the format is unsupported
    (online fp8 weights only on fp8-native GPUs, only for an unquantized checkpoint, only on
    engines that take --quantization). Both format lists None: the formats each GPU runs
    natively (native_formats), nothing pruned for them. Layouts no system of the GPU holds
    (TP beyond its scale-up domain, part nodes, more GPUs than it joins: planner/nodes) are
    not candidates at all. `engine_version`: the release planned (None: each engine's newest),
    whose kernels decide which formats run (Engine.checkpoint_kernel)."""
    out: list[Candidate] = []
    dropped: list[Pruned] = []
    native = quantizations is None and kv_cache_dtypes is None
    qs = list(quantizations or [None])
    kvs = list(kv_cache_dtypes or [None])
    for engine in engines:
        eng = registry.get(engine)
        lay = layouts(m, max_gpus, engine)
        for g in gpus:
            pairs = (native_formats(m, g, eng.name, eng.unsupported) if native
                     else [(q, kv) for q in qs for kv in kvs])
            held = _proposable(g, lay, gpus_per_node)
            refused = eng.gpu_refusal(g)  # not the GPU's vendor's engine: none of its layouts
            for q, kv in pairs:
                why = _format_unsupported(m, g, eng.name, eng.unsupported, q, engine_version)
                for tp, pp in held:
                    c = Candidate(g, tp, pp, q, kv, eng.name)
                    if refused:
                        dropped.append(_pruned(c, PrunedKind.UNSUPPORTED, refused))
                    elif why:
                        dropped.append(_pruned(c, PrunedKind.UNSUPPORTED_FORMAT, why))
                    else:
                        out.append(c)
    return out, dropped


# _proposable's memo: the layouts a system of the GPU holds, by (GPU object, layouts, node size)
_HELD: dict[tuple[int, tuple[tuple[int, int], ...], int | None],
            tuple[GpuSpec, list[tuple[int, int]]]] = {}


def _proposable(g: GpuSpec, lay: list[tuple[int, int]], gpus_per_node: int | None
                ) -> list[tuple[int, int]]:
    """The (tp, pp) of `lay` that node_rules.proposable allows on `g`, in order: a pure function
    of the frozen GpuSpec, so worked out once per GPU object (kept, so its id is not reused)
    and layout list; every sweep asks it for every GPU of the catalogue."""
    key = (id(g), tuple(lay), gpus_per_node)
    hit = _HELD.get(key)
    if hit is None or hit[0] is not g:
        if len(_HELD) >= 4096:
            _HELD.clear()
        hit = _HELD[key] = (g, [(tp, pp) for tp, pp in lay
                                if node_rules.proposable(g, tp, pp, gpus_per_node=gpus_per_node)])
    return hit[1]


def native_formats(m: ModelSpec, g: GpuSpec, engine: str, unsupported: frozenset[str]
                   ) -> list[tuple[str | None, str | None]]:
    """(weights, KV) formats a sweep tries when told none: the checkpoint's own, and on a GPU
    that runs fp8 natively fp8 too: online fp8 weights (where the checkpoint and engine allow
    them, else its own) with an fp8 KV cache."""
    if not g.fp8_native or "kv_cache_dtype" in unsupported:
        return [(None, None)]
    q = "fp8" if _format_unsupported(m, g, engine, unsupported, "fp8") is None else None
    return [(None, None), (q, "fp8")]


def _format_unsupported(m: ModelSpec, g: GpuSpec, engine: str, unsupported: frozenset[str],
                        q: str | None, version: str | None = None) -> str | None:
    """Why weight format `q` cannot be planned for this model, GPU and engine (None: it can).
    None is the checkpoint's own format: refused where none of the engine's kernels for it run
    on the GPU, the rule its what-if meets (Engine.checkpoint_kernel)."""
    if q is None:
        own = checkpoint_format(m.quantization)
        return None if own is None else registry.get(engine).checkpoint_refusal(own, g, version)
    if "quantization" in unsupported:
        return f"{engine} has no --quantization"
    if what_if_format(q) is not None:  # a format what-if (planner/whatif.py)
        return what_if_unsupported(m, g, registry.get(engine), q, version)
    if q.lower() != "fp8":
        return f"kvplan models online --quantization fp8 and the what-if formats "\
            f"({', '.join(FORMATS)}), not {q!r}"
    if m.quantization is not None:
        return f"the checkpoint is already {m.quantization.method}"
    if not g.fp8_native:
        return f"online fp8 weights need an fp8-native GPU ({g.id} is not)"
    return None


def _pruned(c: Candidate, kind: PrunedKind, detail: str) -> Pruned:
    return Pruned(**_pruned_fields(c, kind, f"{kind.value}: ", detail))


def _pruned_fields(c: Candidate, kind: PrunedKind, label: str, detail: str) -> dict[str, Any]:
    """Pruned's fields; `label`: the kind's, as the reason starts ("memory: ")."""
    return dict(
        gpu=c.gpu.id, count=c.count, tensor_parallel_size=c.tensor_parallel_size,
        pipeline_parallel_size=c.pipeline_parallel_size, engine=c.engine,
        quantization=c.quantization, kv_cache_dtype=c.kv_cache_dtype,
        reason=label + detail, kind=kind, detail=detail)


def _pruned_all(kind: PrunedKind, why: Iterable[tuple[Candidate, str]]) -> list[Pruned]:
    """_pruned of each (candidate, detail), all of one kind, validated as one list: a large
    model's sweep prunes hundreds of candidates, and one call into the validator for them all
    costs about half as much as a Pruned(...) each (the Python side of BaseModel.__init__ per
    object)."""
    label = f"{kind.value}: "
    return _pruned_list().validate_python([_pruned_fields(c, kind, label, detail)
                                           for c, detail in why])


@cache
def _pruned_list() -> TypeAdapter[list[Pruned]]:
    """The validator of a list of Pruned, built on first use (as the models' own schemas are)."""
    return TypeAdapter(list[Pruned])


# weights_excess's memo within one sweep of one model: the layouts resolved before, by GPU
# object, formats and engine; the heaviest stage's tensor bytes, by (tp, pp, dtype, ep) of a
# checkpoint format (quantization) None; the knobs a layout was resolved with, by formats
_Seen = dict[tuple[int, str | None, str | None, str], Layout]
_Heaviest = dict[tuple[int, int, str, int], int]
_Formats = dict[tuple[str | None, str | None], Knobs]


def weights_excess(m: ModelSpec, c: Candidate, base: Knobs, seen: _Seen | None = None,
                   heaviest: _Heaviest | None = None, formats: _Formats | None = None,
                   engine_version: str | None = None) -> float:
    """Weights of the heaviest stage (their own tensor bytes, before any allocator rounding or
    engine overhead) ÷ the device total: above 1 nothing can fit, on any engine. `seen`: the
    layouts resolved for candidates before, by GPU, formats and engine (what else
    resolve_layout decides does not depend on the parallel sizes, which `candidates` makes
    valid); a format what-if resolves its own. The candidate's knobs are built only when a
    layout is resolved (c.knobs changes only the parallel sizes and formats, read from `c`).
    `heaviest`: the heaviest stages found before for this model `m` (only one model's).
    `formats`: the knobs of a candidate before with the same formats, which resolve the same
    layout on any GPU but for the parallel sizes (a sweep's GPUs each resolve one).
    `engine_version`: the release planned (None: the engine's newest)."""
    if c.quantization is not None and what_if_format(c.quantization) is not None:
        # the checkpoint the format what-if plans
        eng = registry.get(c.engine)
        m, k = what_if_apply(eng, m, c.gpu, c.knobs(base), engine_version)
        m, k = eng.build_quantization(m, c.gpu, k)
        lay = resolve_layout(m, c.gpu, k, engine_label=c.engine)
        heaviest = None  # another model's (the what-if's checkpoint)
    else:
        key = (id(c.gpu), c.quantization, c.kv_cache_dtype, c.engine)
        hit = seen.get(key) if seen is not None else None
        if hit is None:
            fkey = (c.quantization, c.kv_cache_dtype)
            ck = formats.get(fkey) if formats is not None else None
            if ck is None:
                ck = c.knobs(base)
                if formats is not None:
                    formats[fkey] = ck
            hit = resolve_layout(m, c.gpu, ck, engine_label=c.engine)
        lay = hit
        if seen is not None:
            seen[key] = lay
        k = base  # enable_expert_parallel: the candidate's knobs keep the base's
    tp, pp = c.tensor_parallel_size, c.pipeline_parallel_size
    ep = tp * lay.data_parallel_size if k.enable_expert_parallel else 1
    if heaviest is None or lay.quant is not None:
        return max(stage_tensor_bytes(m, tp=tp, pp=pp, dtype=lay.dtype, quant=lay.quant,
                                      ep=ep)) / lay.gpu_total_bytes
    hkey = (tp, pp, lay.dtype, ep)
    most = heaviest.get(hkey)
    if most is None:
        most = heaviest[hkey] = max(stage_tensor_bytes(m, tp=tp, pp=pp, dtype=lay.dtype,
                                                      quant=None, ep=ep))
    return most / lay.gpu_total_bytes


# ------------------------------------------------------------------------- sweep


def sweep(m: ModelSpec, gpus: Sequence[GpuSpec], prices: Mapping[str, Price], *,
          knobs: Knobs | None = None, workload: Workload | None = None,
          engines: Sequence[str] = (registry.DEFAULT,), max_gpus: int = 8,
          quantizations: Sequence[str | None] | None = (None,),
          kv_cache_dtypes: Sequence[str | None] | None = (None,),
          engine_version: str | None = None,
          slo_tpot_ms: float | None = None, slo_ttft_ms: float | None = None,
          closest_pruned: int = 3,
          larger_gpus: Callable[[GpuSpec], Sequence[GpuSpec]] | None = None,
          rank_on: str = "pessimistic") -> SweepResult:
    """Plan every candidate that can fit and rank them. Raises InvalidInputError for an empty
    search space; a sweep where nothing meets the target is a result (exit_code 1), whose
    options start with the closest misses. `quantizations` and `kv_cache_dtypes` both None: the
    formats each GPU runs natively (native_formats: its own and, on fp8-native GPUs, fp8).
    `rank_on`: "pessimistic" ranks each latency figure by its band's pessimistic end, "point"
    by the estimate."""
    knobs = knobs or Knobs()
    workload = workload or Workload()
    _check_inputs(knobs, gpus, engines, max_gpus, engine_version)
    check_rank_on(rank_on)
    engines = [registry.get(e).name for e in dict.fromkeys(engines)]
    cands, pruned = candidates(m, gpus, engines=engines, max_gpus=max_gpus,
                               quantizations=_unique(quantizations),
                               kv_cache_dtypes=_unique(kv_cache_dtypes),
                               gpus_per_node=knobs.gpus_per_node,
                               engine_version=engine_version)
    total = len(cands) + len(pruned)
    if not cands:
        why = sorted({p.reason for p in pruned})
        raise InvalidInputError("the search space is empty: no candidate can be planned"
                                + (" (" + "; ".join(why) + ")" if why else ""),
                                hint="widen --gpus, --quantization or --engine")

    # the SLOs travel in the workload, so every plan sizes max_num_seqs by them
    workload = workload.model_copy(update={k: v for k, v in (("slo_tpot_ms", slo_tpot_ms),
                                                               ("slo_ttft_ms", slo_ttft_ms))
                                           if v is not None})
    target = Target(max_model_len=knobs.max_model_len,
                    target_concurrency=workload.target_concurrency,
                    avg_input_tokens=workload.avg_input_tokens,
                    avg_output_tokens=workload.avg_output_tokens,
                    slo_tpot_ms=workload.slo_tpot_ms, slo_ttft_ms=workload.slo_ttft_ms)
    # Hundreds of plans allocate many small objects and free none of them in cycles: the cyclic
    # collector's passes over the growing heap cost 20–40 % of a sweep, so pause it meanwhile.
    # One candidate's searches re-plan other candidates' deployments: shared_tries answers each
    # once for the whole sweep.
    with gc_paused():
        with shared_tries():
            result = _sweep(m, cands, pruned, total, knobs, workload, engine_version, prices,
                            target, closest_pruned,
                            _once_per_gpu(larger_gpus) if larger_gpus else None,
                            cast(RankOn, rank_on))
        note = _fp8_note(result.options,
                         native=quantizations is None and kv_cache_dtypes is None)
        notes = [n for n in (note, _what_if_note(result.options)) if n]
        if notes:
            result = result.model_copy(update={"notes": [*result.notes, *notes]})
    return result


def _fp8_note(options: Sequence[Option], native: bool) -> str | None:
    """Which options use fp8 (weights or KV), and that it changes accuracy; for a sweep told no
    formats, also why they are there."""
    gpus = sorted({o.gpu for o in options if "fp8" in (o.quantization, o.kv_cache_dtype)})
    if not gpus:
        return None
    if not native:
        return ("the options with fp8 weights or KV (the weights/KV column) change accuracy "
                "slightly")
    return ("no --quantization or --kv-cache-dtype: fp8 weights (online, where the engine "
            "allows) and fp8 KV are tried too on the GPUs that run fp8 natively ("
            + ", ".join(gpus) + "; the weights/KV column), which changes accuracy slightly; "
            "--kv-cache-dtype auto tries the checkpoint's own format only")


def _what_if_note(options: Sequence[Option]) -> str | None:
    """Options in a what-if format plan checkpoints that do not exist yet (a WhatIfPlan: a
    format what-if, or TensorRT-LLM's quantize-first --quantization): say so once."""
    named = sorted({str(o.quantization) for o in options if isinstance(o.plan, WhatIfPlan)})
    if not named:
        return None
    return ("what-if formats (" + ", ".join(named) + "): those options plan the checkpoint a "
            "standard quantizer would write from this model; it does not exist yet — their "
            "serve commands start with the step that produces it (docs/what-if.md)")


def _unique(items: Sequence[str | None] | None) -> list[str | None] | None:
    return None if items is None else list(dict.fromkeys(items))


def _once_per_gpu(fn: Callable[[GpuSpec], Sequence[GpuSpec]]
                  ) -> Callable[[GpuSpec], Sequence[GpuSpec]]:
    """`fn` asked once per GPU object (every candidate on a GPU names the same larger ones),
    and only when a plan first reads the list (the "a larger GPU" alternative: most plans
    fit, and a missed target's alternatives are listed when read)."""
    seen: dict[int, tuple[GpuSpec, Sequence[GpuSpec]]] = {}

    def once(g: GpuSpec) -> Sequence[GpuSpec]:
        hit = seen.get(id(g))
        if hit is None or hit[0] is not g:
            hit = seen[id(g)] = (g, _Later(lambda: fn(g)))
        return hit[1]
    return once


class _Later(Sequence[GpuSpec]):
    """A list of GPUs worked out on first use."""

    def __init__(self, make: Callable[[], Sequence[GpuSpec]]) -> None:
        self._make: Callable[[], Sequence[GpuSpec]] | None = make
        self._items: Sequence[GpuSpec] = ()

    def _got(self) -> Sequence[GpuSpec]:
        if self._make is not None:
            self._items, self._make = self._make(), None
        return self._items

    def __getitem__(self, i: Any) -> Any:
        return self._got()[i]

    def __len__(self) -> int:
        return len(self._got())

    def __iter__(self) -> Iterator[GpuSpec]:
        return iter(self._got())


_EXCESS_COUNT = itemgetter(0, 1)  # the order of the candidates too big to plan


def _sweep(m: ModelSpec, cands: list[Candidate], pruned: list[Pruned], total: int, knobs: Knobs,
           workload: Workload, engine_version: str | None, prices: Mapping[str, Price],
           target: Target, closest_pruned: int,
           larger_gpus: Callable[[GpuSpec], Sequence[GpuSpec]] | None = None,
           rank_on: RankOn = "pessimistic") -> SweepResult:
    planned: list[Option] = []
    too_big: list[tuple[float, int, Candidate]] = []  # (excess, GPUs, candidate)
    seen: _Seen = {}
    heaviest: _Heaviest = {}
    formats: _Formats = {}
    # one (frozen) Knobs per layout and format: the GPUs' candidates share them
    made: dict[tuple[int, int, str | None, str | None], Knobs] = {}
    refusals: dict[str, KvplanError] = {}  # each refusal's message → the first error saying it

    def knobs_of(c: Candidate) -> Knobs:
        key = (c.tensor_parallel_size, c.pipeline_parallel_size, c.quantization,
               c.kv_cache_dtype)
        got = made.get(key)
        if got is None:
            got = made[key] = c.knobs(knobs)
        return got

    for c in cands:
        try:
            excess = weights_excess(m, c, knobs, seen, heaviest, formats, engine_version)
        except KvplanError as e:
            pruned.append(_pruned(c, PrunedKind.UNSUPPORTED, e.message))
            refusals.setdefault(e.message, e)
            continue
        if excess > 1:
            too_big.append((excess, c.count, c))
            continue
        _plan_one(m, c, knobs_of(c), workload, engine_version, prices, target, planned,
                  pruned, larger_gpus, refusals)
    too_big.sort(key=_EXCESS_COUNT)
    # Nothing could even hold its weights: plan the closest few, so the answer names them.
    n_closest = closest_pruned if not planned else 0
    for _, _, c in too_big[:n_closest]:
        _plan_one(m, c, knobs_of(c), workload, engine_version, prices, target, planned,
                  pruned, larger_gpus, refusals)
    too_large = too_big[n_closest:]

    def all_pruned() -> list[Pruned]:  # the result's `pruned`, when first read
        return pruned + _pruned_all(PrunedKind.MEMORY, [
            (c, f"the weights alone are {excess:.2f}× the device ({c.gpu.id})")
            for excess, _, c in too_large])

    if not planned:
        # every candidate was refused (e.g. a --max-model-len beyond the model's): bad input
        every = all_pruned()
        reasons = Counter(p.detail if p.kind is PrunedKind.UNSUPPORTED else p.reason
                          for p in every)
        reason, n = reasons.most_common(1)[0]
        first = refusals.get(reason)  # the refusal itself: its hint and code
        hint = first.hint if first else None
        if isinstance(first, InvalidInputError) and first.knob == "gpu_memory_gib":
            # a sweep sizes every GPU from the catalogue: one without a total is planned alone
            hint = ("plan that GPU alone with `kvplan plan … --gpu-memory-gib N` (the total its "
                    "engine log prints), or leave it out of --gpus")
        raise InvalidInputError(f"no candidate can be planned: {reason}"
                                + (f" ({n} of {len(every)} candidates)" if n < len(every)
                                   else ""), hint=hint,
                                code=getattr(first, "code", "invalid-input"),
                                reason=first.reason if first else Reason.BAD_INPUT)
    latency = any(getattr(o.plan, "performance", None) is not None for o in planned)
    options = rank(planned, latency, rank_on, own=True)  # (planned here: numbered in place)
    notes = []
    if knobs.max_model_len is None:
        notes.append("no --max-model-len: each engine's default length (usually the model's "
                     "maximum) is planned")
    if not latency:
        why = ("no option fits, and the latency model describes deployments that start"
               if not any(o.plan.fits for o in planned)
               else "no bandwidth/FLOPs in gpu_specs for these GPUs")
        notes.append(f"no latency figures ({why}): ranked "
                     "by memory and price only; $/M tokens are not computed"
                     + ("; the SLOs given are not evaluated" if target.slo_tpot_ms
                        or target.slo_ttft_ms else ""))
    if any(o.price_per_hour is None for o in options):
        notes.append("options without a price (no default for that GPU) rank after priced ones; "
                     "pass --prices FILE")
    priced = {o.gpu for o in options if o.price_per_hour is not None and o.price_source}
    providers = default_providers(prices, priced)
    # the user priced some GPUs (--prices): name the ones left on the defaults
    fallback = sorted(g for g in priced if (p := prices.get(g)) is not None and p.default)
    if providers and any(not p.default for p in prices.values()):
        notes.append(f"your prices do not cover {', '.join(fallback)}: "
                     f"{'its price is' if len(fallback) == 1 else 'their prices are'} kvplan's "
                     f"bundled defaults ({', '.join(providers)} list prices; source and date per "
                     "GPU: gpu_specs/prices.csv)")
    elif providers:
        notes.append(f"prices are kvplan's bundled defaults: {', '.join(providers)} list "
                     "prices (source and date per GPU: gpu_specs/prices.csv); pass --prices FILE "
                     "for your own")
    ranking = ("meets the target first; then $/M output tokens, $/hour, fewer GPUs, more "
               "headroom; misses by how far they miss (latency ÷ SLO, requests short); latency "
               "and throughput " + ("at their bands' pessimistic end" if rank_on == "pessimistic"
                                    else "as point estimates")
               if latency else
               "meets the target first; then $/hour, fewer GPUs, more headroom; misses by "
               "how far they miss, headroom, then the KV shortfall")
    return SweepResult.deferred(all_pruned, model=m.id, target=target, latency_model=latency,
                                ranking=ranking, notes=notes, candidates=total, options=options,
                                rank_on=rank_on)


def check_rank_on(rank_on: str) -> None:
    """--rank-on is one of RankOn, else an error naming it."""
    if rank_on not in get_args(RankOn):
        raise InvalidInputError(f"--rank-on must be pessimistic or point, got {rank_on!r}",
                                hint="pessimistic: each band's worse end (the default); point: "
                                "the estimate")


def _check_inputs(knobs: Knobs, gpus: Sequence[GpuSpec], engines: Sequence[str],
                  max_gpus: int, engine_version: str | None) -> None:
    fixed = [k for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                         "quantization", "kv_cache_dtype", "nodes")
             if getattr(knobs, k) is not None]
    if fixed:
        raise InvalidInputError(f"sweep explores {', '.join(fixed)} itself",
                                hint="use --max-gpus, --quantization and --kv-cache-dtype lists")
    if not gpus:
        raise InvalidInputError("the search space is empty: no GPUs to sweep")
    if not engines:
        raise InvalidInputError("the search space is empty: no engines to sweep")
    if not 1 <= max_gpus <= MAX_SWEEP_GPUS:
        raise InvalidInputError(f"--max-gpus must be in [1, {MAX_SWEEP_GPUS}], got {max_gpus}")
    if engine_version is not None:
        normalize_version(engine_version)  # refused before any candidate is planned
    if engine_version is not None and len(set(engines)) > 1:
        raise InvalidInputError("--engine-version names one engine's release",
                                hint="sweep one --engine with it")


def default_providers(prices: Mapping[str, Price], gpus: set[str]) -> list[str]:
    """The providers (and tiers) of the bundled default prices these GPUs use, sorted, as each
    row names them in parentheses after its URL ("Crusoe Cloud on-demand"); a default row
    without one by its source."""
    return sorted({p.provider for gpu in gpus if (p := prices.get(gpu)) is not None and p.default})


def _plan_one(m: ModelSpec, c: Candidate, k: Knobs, workload: Workload,
              engine_version: str | None, prices: Mapping[str, Price], target: Target,
              planned: list[Option], pruned: list[Pruned],
              larger_gpus: Callable[[GpuSpec], Sequence[GpuSpec]] | None = None,
              refusals: dict[str, KvplanError] | None = None) -> None:
    """Plan candidate `c` with its knobs `k` (Candidate.knobs); a refusal is pruned, and the
    first error of each message kept in `refusals`."""
    try:  # the same call as `kvplan plan` for this option (api.plan)
        p = make_plan(m, c.gpu, k, engine=c.engine, engine_version=engine_version,
                      workload=workload, price=prices.get(c.gpu.id),
                      larger_gpus=larger_gpus(c.gpu) if larger_gpus else ())
    except KvplanError as e:
        pruned.append(_pruned(c, PrunedKind.UNSUPPORTED, e.message))
        if refusals is not None:
            refusals.setdefault(e.message, e)
        return
    planned.append(evaluate_option(c, k, p, prices.get(c.gpu.id), target))


def evaluate_option(c: Candidate, k: Knobs, p: Plan, price: Price | None,
                    target: Target) -> Option:
    """Does this plan meet the target, and why not; its price and headroom."""
    n = target.target_concurrency
    work_len = (target.avg_input_tokens or 0) + (target.avg_output_tokens or 0)
    length = p.inputs["max_model_len"].value if "max_model_len" in p.inputs else None
    per_request = work_len or (length if isinstance(length, int) else 0)
    needed = (n or 1) * per_request
    headroom = p.kv_cache.tokens / needed if needed else 0.0
    perf = getattr(p, "performance", None)
    tpot = _num(perf, "tpot_ms")
    ttft = _num(perf, "ttft_ms")
    tput = _num(perf, "output_tokens_per_s")
    pending, misses, meets = _option_misses(c, p, target, perf is not None, n, per_request,
                                            tpot, ttft)
    per_hour = price.usd_per_hour * c.count if price else None
    cost = usd_per_million_tokens(per_hour, tput)
    bands = {name: _num(perf, name) for name in BAND_FIELDS}
    cost_high = usd_per_million_tokens(per_hour, bands["output_tokens_per_s_low"])
    if price is None:
        misses.append(Miss(MissKind.NO_PRICE, f"no price for {c.gpu.id}"))
    kinds = [MissKind.MEMORY] * bool(pending) + [r.kind for r in misses]
    values: dict[str, Any] = dict(
        rank=0, meets_target=meets, reason_kinds=kinds, pareto=False, headroom=round(headroom, 4),
        price_per_hour=None if per_hour is None else round(per_hour, 4),
        price_source=None if price is None else price.source,
        price_date=None if price is None else price.date,
        price_default=None if price is None else price.default,
        cost_per_million_output_tokens=None if cost is None else round(cost, 4),
        tpot_ms=tpot, ttft_ms=ttft, output_tokens_per_s=tput,
        knobs=plan_given(k), plan=p, calibrated=getattr(perf, "calibrated", None), **bands,
        cost_per_million_output_tokens_high=None if cost_high is None else round(cost_high, 4))
    if pending:
        return Option.deferred(lambda: [r.text for r in _memory_misses(p, n, per_request)
                                        + misses], **values)
    return Option(reasons=[r.text for r in misses], **values)


def _option_misses(c: Candidate, p: Plan, target: Target, has_perf: bool, n: int | None,
                   per_request: int, tpot: float | None, ttft: float | None
                   ) -> tuple[bool, list[Miss], bool]:
    """(pending, the misses, meets the target). Pending: the plan does not fit for a reason
    whose words are not worked out yet (a missed target's alternatives), so its memory miss is
    left out of the misses and named when the option's reasons are read."""
    pending = _pending_error(p)
    memory = [] if pending else _memory_misses(p, n, per_request)
    misses = memory + _latency_misses(c, p, target, has_perf, tpot, ttft)
    meets = (p.fits and not pending
             and not any(r.kind in (MissKind.MEMORY, MissKind.SLO) for r in misses))
    return pending, misses, meets


BAND_FIELDS = tuple(f"{name}_{end}" for name in ("ttft_ms", "tpot_ms", "output_tokens_per_s")
               for end in ("low", "high"))  # the Option's band fields, read from performance


def _pending_error(p: Plan) -> bool:
    """Whether the plan does not fit and its memory miss would quote an error message that is
    not worked out yet (Problem.deferred): no KV shortfall to name instead."""
    if p.fits or p.memory.kv_shortfall_bytes:
        return False
    first = next((pr for pr in p.problems if pr.severity == "error"), None)
    return first is not None and first.pending


def _slo_errors(p: Plan) -> list[str]:
    """The plan's latency-target errors (at the target's concurrency, or at one request)."""
    return [pr.message for pr in p.problems
            if pr.code.startswith("slo-") and pr.severity == "error"]


def _memory_misses(p: Plan, n: int | None, per_request: int) -> list[Miss]:
    """A plan that does not fit misses on memory (by how much KV cache, else its first error);
    one that fits but whose KV cache holds fewer than the target's `n` requests misses too,
    unless the latency targets already cut max_num_seqs (that miss is named as an SLO one)."""
    if not p.fits:
        first = next((pr for pr in p.problems if pr.severity == "error"), None)
        short = p.memory.kv_shortfall_bytes / 2**30 or None
        return [Miss(MissKind.MEMORY, "memory: does not fit"
                     + (f" (KV cache short by {short:.2f} GiB)" if short else "")
                     + (f": {first.message}" if first is not None and not short else ""))]
    if _slo_errors(p) or not n:
        return []
    seqs = p.recommendations.max_num_seqs.value or 0
    if seqs >= n:
        return []
    return [Miss(MissKind.MEMORY, f"memory: the KV cache holds {seqs:g} of {n} concurrent "
                 f"requests of {per_request} tokens")]


def _latency_misses(c: Candidate, p: Plan, target: Target, has_perf: bool, tpot: float | None,
                    ttft: float | None) -> list[Miss]:
    """Each SLO given: missed when predicted above its limit, a note when there is no latency
    model (only for a plan that fits: one that does not has no performance, and memory is its
    reason); then the planner's own latency-target errors."""
    out = []
    for name, limit, got in (("TPOT", target.slo_tpot_ms, tpot),
                             ("TTFT", target.slo_ttft_ms, ttft)):
        if limit is None:
            continue
        if not has_perf or got is None:
            if p.fits:
                out.append(Miss(MissKind.NO_LATENCY, f"{name} {NO_LATENCY_MODEL} for {c.gpu.id})"))
        elif got > limit:
            out.append(Miss(MissKind.SLO, f"SLO: predicted {name} {got:.1f} ms > {limit:g} ms"))
    return out + [Miss(MissKind.SLO, f"SLO: {message}") for message in _slo_errors(p)]


def _num(obj: object, name: str) -> float | None:
    v = getattr(obj, name, None) if obj is not None else None
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


# ------------------------------------------------------------------------ ranking


def rank(options: Iterable[Option], latency: bool = False,
         rank_on: RankOn = "point", *, own: bool = False) -> list[Option]:
    """Options that meet the target first, cheapest first ($/M output tokens when a latency
    model gives throughput, else $/hour; unpriced last), then fewer GPUs and more headroom.
    Misses follow, closest first: those that fit before those that do not, then by how far they
    miss (miss_factor), then most headroom. Pareto flags among the priced meeting ones. The
    latency figures read are the point estimates or their bands' pessimistic ends (`rank_on`).
    Returns copies with rank and pareto set; `own`: the options are the caller's own, just made,
    and are numbered in place instead (a sweep's hundreds)."""
    inf = math.inf

    def key(o: Option) -> tuple:
        if o.meets_target:
            cost = o.ranked(rank_on)[3] if latency else None
            return (0, inf if cost is None else cost,
                    inf if o.price_per_hour is None else o.price_per_hour,
                    o.count, -o.headroom, o.pipeline_parallel_size, o.gpu, o.engine)
        memory_miss = o.missing(MissKind.MEMORY)
        return (1, not o.plan.fits, miss_factor(o, rank_on), memory_miss, -o.headroom,
                o.plan.memory.kv_shortfall_bytes - o.plan.memory.kv_cache_bytes,
                inf if o.price_per_hour is None else o.price_per_hour, o.count, o.gpu, o.engine)

    ordered = sorted(options, key=key)
    pareto_set = set(map(id, pareto(ordered, latency, rank_on)))
    if own:  # the caller's new objects, numbered in place
        for i, o in enumerate(ordered, 1):
            o.rank, o.pareto = i, id(o) in pareto_set
        return ordered
    return [o.model_copy(update={"rank": i, "pareto": id(o) in pareto_set})
            for i, o in enumerate(ordered, 1)]


def miss_factor(o: Option, rank_on: RankOn = "point") -> float:
    """How far an option that fits misses its target, as one factor ≥ 1 (the worst of): each
    latency figure (point or pessimistic, `rank_on`) ÷ its SLO, and the requests the target
    needs ÷ those the KV cache holds. 1 when it misses on nothing measurable (e.g. only a
    planner note)."""
    t = o.plan.workload
    ttft, tpot = o.ranked(rank_on)[:2]
    factors = [got / limit for got, limit in ((ttft, t.slo_ttft_ms), (tpot, t.slo_tpot_ms))
               if got is not None and limit]
    if o.missing(MissKind.MEMORY) and 0 < o.headroom < 1:
        factors.append(1 / o.headroom)
    seqs = o.plan.recommendations.max_num_seqs.value
    n = t.target_concurrency
    if n and seqs and o.missing(MissKind.SLO) and seqs < n:  # the SLOs cap the batch below n
        factors.append(n / seqs)
    return max([1.0, *factors])


def pareto(options: Sequence[Option], latency: bool = False,
           rank_on: RankOn = "point") -> list[Option]:
    """The meeting, priced options no other beats: another dominates when it costs no more
    and has at least the headroom (and throughput, point or pessimistic: `rank_on`, with a
    latency model), better in one."""
    pool = [o for o in options if o.meets_target and o.price_per_hour is not None]
    if latency:
        axes = [(-(o.price_per_hour or 0.0), o.headroom, o.ranked(rank_on)[2] or 0.0)
                for o in pool]
        return [o for o, a in zip(pool, axes, strict=True)
                if not any(b != a and all(x >= y for x, y in zip(b, a, strict=True))
                           for b in axes)]
    # two axes: by price (then headroom, best first), an option is dominated when an earlier
    # one with different numbers has at least its headroom
    order = sorted(pool, key=lambda o: (o.price_per_hour, -o.headroom))
    front, best, group, group_best = [], -math.inf, None, -math.inf
    for o in order:
        axes2 = (o.price_per_hour, o.headroom)
        if axes2 != group:
            best, group = max(best, group_best), axes2
            group_best = o.headroom
        if best < o.headroom:
            front.append(o)
    return front
