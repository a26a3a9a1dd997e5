"""`kvplan report`: a sizing report as GitHub-flavoured Markdown or one self-contained HTML file.

The report renders Plans (and a CheckReport's Plans) and adds no facts of its own: every number
is a Plan field or arithmetic on Plan fields (sums, GiB, the concurrency curve from the plan's
KV blocks). Renderers never plan: `for_model` takes the finished plans `kvplan.api.report` built
(the main Plan, its curve, every engine's Plan, the sweep), `from_check` the CheckReport's.
Output is deterministic: no clock, no random ids.

Charts: inline SVG from kvplan/svg.py in HTML; Mermaid plus tables in Markdown (docs/report.md
says why). Pure: no file or network I/O except `write_atomic`, which the CLI calls.
"""

from __future__ import annotations

import math
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import result_exit_code
from ..planner.curve import CurvePoint, kv_curve
from ..units import GiB, gib, plain_number, usd_per_million_tokens

if TYPE_CHECKING:
    from ..api import ReportData
    from ..deploy.check import CheckReport
    from ..planner.sweep import Option, SweepResult
    from ..specs import Performance, PerfPoint, Plan, Problem

__all__ = ["FORMATS", "Report", "Section", "SweepOption", "Unplanned", "check_markdown",
           "for_model", "from_check", "memory_stack", "output_format", "render", "render_html",
           "render_markdown", "section_for", "sweep_options", "write_atomic"]

FORMATS = {"md": "md", "markdown": "md", "html": "html", "htm": "html"}


# ------------------------------------------------------------------------- model


@dataclass(frozen=True)
class SweepOption:
    """One candidate deployment from `kvplan sweep` (`sweep_options` converts its results); the
    "Options from a sweep" section renders only when `Report.sweep` is not None."""

    label: str
    fits: bool  # meets the sweep's target (the option's meets_target)
    cost_per_hour: float | None
    headroom_bytes: int
    kv_tokens: int
    command: str = ""
    chosen: bool = False
    # $ per million output tokens as the sweep ranked it (rank_on: the band's pessimistic end or
    # the estimate); None for a row the sweep did not plan
    cost_per_million: float | None = None
    extrapolated: bool = False  # its latency figures are not calibrated
    rank_on: str = "pessimistic"
    # with a request rate the sweep ranks by the cost per day of the replicas the rate needs
    # (`kvplan sweep --request-rate`): the rate, those replicas and that cost, simulated or
    # estimated from throughput; None without a rate, or for an option the sweep did not size
    request_rate: float | None = None
    replicas: int | None = None
    cost_per_day: float | None = None
    replicas_simulated: bool = False


def sweep_options(result: SweepResult, chosen: Plan, top: int = 8) -> list[SweepOption]:
    """The best `top` options of a finished sweep as report rows, in its order; headroom_bytes
    (shown as "KV spare") is the KV memory per GPU beyond what the target needs. The row of the
    reviewed deployment (same GPU, engine, layout and formats) is marked; when the sweep's best
    rows do not hold it, it is added from the reviewed plan itself, so the section never shows
    another deployment as the chosen one. With a request rate (the reviewed plan's, which
    `kvplan.api.report` sweeps with) each row carries the cost per day the sweep ranked it by."""
    rate = chosen.workload.request_rate

    def same(o: Option) -> bool:
        return _deployment(o.plan) == _deployment(chosen)

    def row(o: Option, chosen: bool) -> SweepOption:
        return replace(_sweep_row(o.plan, o.meets_target, o.price_per_hour, chosen=chosen),
                       cost_per_million=o.ranked(result.rank_on)[3],
                       extrapolated=o.calibrated is False, rank_on=result.rank_on,
                       request_rate=rate, replicas=o.replicas_for_rate,
                       cost_per_day=o.cost_per_day_for_rate,
                       replicas_simulated=bool(o.replicas_simulated))

    picked = list(result.options[:top])
    out = [row(o, same(o)) for o in picked]
    if not any(same(o) for o in picked):  # the reviewed deployment, for comparison
        mine = next((o for o in result.options if same(o)), None)
        out.append(_reviewed_row(chosen, result.rank_on) if mine is None else row(mine, True))
    return out


def _reviewed_row(p: Plan, rank_on: str) -> SweepOption:
    """The reviewed deployment, which the sweep did not plan (another GPU, format or setting),
    ranked as the sweep ranks: $ per million output tokens at the throughput band's low end
    (pessimistic) or the estimate (point); with a rate, its own replicas for it and their cost
    per day (simulated, as `kvplan plan` gives them)."""
    perf, per_hour = p.performance, _cost_per_hour(p)
    tput = None if perf is None else (
        perf.output_tokens_per_s if rank_on == "point" else perf.output_tokens_per_s_low)
    cost = usd_per_million_tokens(per_hour, tput)
    sized = perf is not None and perf.replicas is not None and perf.cost_per_day is not None
    return replace(_sweep_row(p, p.fits, per_hour, chosen=True),
                   cost_per_million=None if cost is None else round(cost, 4),
                   extrapolated=perf is not None and perf.calibrated is False, rank_on=rank_on,
                   request_rate=p.workload.request_rate,
                   replicas=perf.replicas if sized and perf else None,
                   cost_per_day=perf.cost_per_day if sized and perf else None,
                   replicas_simulated=sized)


def _deployment(p: Plan) -> tuple[object, ...]:
    """What names one deployment in a sweep: GPU, engine, layout and the formats planned."""
    return (p.gpu.id, p.engine.name, p.gpu.count,
            *(p.inputs[k].value if k in p.inputs else None
              for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                        "kv_cache_dtype")), p.model.quantization, p.model.dtype)


def _cost_per_hour(p: Plan) -> float | None:
    return None if p.performance is None else p.performance.cost_per_hour


def _sweep_row(p: Plan, fits: bool, cost_per_hour: float | None, *, chosen: bool) -> SweepOption:
    per_request = (p.workload.avg_input_tokens or 0) + (p.workload.avg_output_tokens or 0)
    need_tokens = (p.workload.target_concurrency or 1) * (
        per_request or int(p.inputs["max_model_len"].value or 0))
    spare = max(0, p.kv_cache.tokens - need_tokens) * p.kv_cache.bytes_per_token
    tp, pp = (p.inputs[k].value for k in ("tensor_parallel_size", "pipeline_parallel_size"))
    return SweepOption(label=f"{p.gpu.count} × {p.gpu.id} TP{tp}×PP{pp} {p.engine.name}",
                       fits=fits, cost_per_hour=cost_per_hour, headroom_bytes=spare,
                       kv_tokens=p.kv_cache.tokens, command=p.command, chosen=chosen)


@dataclass(frozen=True)
class Section:
    """One planned deployment: its plan, capacity curve, and where it came from."""

    title: str
    plan: Plan
    curve: tuple[CurvePoint, ...]
    curve_source: str
    where: str | None = None  # file:line when the deployment came from `kvplan check`
    status: str | None = None
    extra_problems: tuple[Problem, ...] = ()  # check's file notes and policy violations


@dataclass(frozen=True)
class Unplanned:
    where: str
    status: str
    message: str  # why it could not be planned (its errors)
    model: str | None = None  # what the file names, when it names one
    engine: str = ""


@dataclass(frozen=True)
class Report:
    title: str
    command_line: str
    version: str
    sections: tuple[Section, ...]
    compare: tuple[Plan, ...] = ()
    sweep: tuple[SweepOption, ...] | None = None
    unplanned: tuple[Unplanned, ...] = ()
    generated_at: str | None = None
    exit_code: int = 0
    notes: tuple[str, ...] = field(default=())


# ------------------------------------------------------------------- facts (derived)


def _num(v: object) -> str:
    if v is None:
        return "—"
    return f"{v:,}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def tokens_k(n: float) -> str:
    """A token count as the CLI takes it (vLLM's human-readable integers: 32K = 32768, 32k =
    32000): 4096 → '4K', 131072 → '128K', 32000 → '32k', 1000 → '1k', 1500 → '1,500'."""
    n = int(n)
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}K"
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else f"{n:,}"


def _weights_note(p: Plan) -> str:
    origin = "safetensors headers" if p.model.weights_from == "headers" else "config"
    mib = (p.memory.weights_bytes - p.memory.weights_tensor_bytes) / 2**20
    return f"exact: {origin}, RoPE" + (f", {mib:,.0f} MiB rounding" if mib >= 0.5 else "")


def memory_stack(plan: Plan) -> list[tuple[str, str, int]]:
    """(key, label, bytes) per GPU, summing to the device total: what the engine takes, the KV
    cache, and the headroom left outside the engine's budget. A KV shortfall shows as 0 KV;
    `shortfall(plan)` says by how much."""
    m = plan.memory
    parts = [("weights", "weights", m.weights_bytes),
             ("activation", "activation peak", m.activation_bytes),
             ("non_torch", "non-torch", m.non_torch_bytes)]
    if "cudagraph" in m.notes or m.cudagraph_bytes:
        parts.append(("cudagraph", "CUDA graphs", m.cudagraph_bytes))
    parts.append(("kv", "KV cache", max(m.kv_cache_bytes, 0)))
    used = sum(b for _, _, b in parts)
    parts.append(("headroom", "headroom", max(m.total_bytes - used, 0)))
    return parts


def shortfall(plan: Plan) -> int:
    """Bytes per GPU by which the budget falls short of the KV cache (0 when it fits)."""
    return plan.memory.kv_shortfall_bytes


def section_for(plan: Plan, *, curve: tuple[tuple[CurvePoint, ...], str] | None = None,
                where: str | None = None, status: str | None = None,
                extra_problems: Sequence[Problem] = (), title: str | None = None) -> Section:
    points, how = kv_curve(plan) if curve is None else curve
    title = title or f"{plan.model.id} on {plan.gpu.count} × {plan.gpu.name} — " \
        f"{plan.engine.label} {plan.engine.version}"
    return Section(title=title, plan=plan, curve=points, curve_source=how, where=where,
                   status=status or ("fits" if plan.fits else "does-not-fit"),
                   extra_problems=tuple(extra_problems))


def from_check(report: CheckReport, *, command_line: str, version: str,
               generated_at: str | None = None) -> Report:
    """A report of every deployment `kvplan check` planned; rows it could not plan are listed."""
    sections, unplanned = [], []
    for d in report.deployments:
        where = f"{d.file}:{d.line}"
        if d.plan is None:
            msg = "; ".join(p.message for p in d.problems if p.severity == "error") or d.status
            unplanned.append(Unplanned(where, d.status, msg, d.model, d.engine))
            continue
        own = {(p.code, p.message) for p in d.plan.problems}
        extra = [p for p in [*d.policy_violations, *d.problems] if (p.code, p.message) not in own]
        sections.append(section_for(d.plan, where=where, status=d.status, extra_problems=extra))
    s = report.summary
    return Report(title="Deployment sizing review", command_line=command_line, version=version,
                  sections=tuple(sections), unplanned=tuple(unplanned), generated_at=generated_at,
                  exit_code=report.exit_code,
                  notes=(s.sentence(),))


def for_model(data: ReportData, *, command_line: str, version: str,
              generated_at: str | None = None) -> Report:
    """The report of one deployment from what `kvplan.api.report` planned: its plan and curve,
    the same model on every registry engine (as `kvplan compare` plans them) and, when a sweep
    ran, its cheapest options."""
    main = data.plan
    title = f"{main.engine.label} {main.engine.version} ({main.engine.era})"
    sec = section_for(main, curve=(data.curve, data.curve_source), title=title)
    sweep = None if data.sweep is None else tuple(sweep_options(data.sweep, main))
    return Report(title=f"Sizing report: {main.model.id} on {main.gpu.count} × {main.gpu.name}",
                  command_line=command_line, version=version, sections=(sec,),
                  compare=data.compare, sweep=sweep, generated_at=generated_at,
                  exit_code=result_exit_code(main.fits, (p.severity for p in main.problems)),
                  notes=tuple(f"{name}: not planned ({why})" for name, why in data.not_planned))


# The latency model's figures as the charts name them: (series name, chart (and SLO) prefix, the
# unit the chart's axis shows, the PerfPoint field). The data table is `plan`'s (_perf_table).
_PERF_METRICS = (("ttft_ms", "ttft", "ms", "ttft_ms"), ("tpot_ms", "tpot", "ms", "tpot_ms"),
                 ("throughput_tokens_per_s", "throughput", "tokens/s", "output_tokens_per_s"))


def _perf_rows(perf: Performance) -> tuple[list[str], list[tuple[float, ...]]]:
    """The charts' figures by concurrency (one row per point, lowest concurrency first) and
    their head."""
    points: list[PerfPoint] = sorted(perf.by_concurrency, key=lambda x: x.concurrency)
    head = ["concurrency", *(name for name, _, _, _ in _PERF_METRICS)]
    return head, [(x.concurrency, *(float(getattr(x, f)) for _, _, _, f in _PERF_METRICS))
                  for x in points]


def _slos(perf: Performance) -> list[tuple[str, float]]:
    """The workload's SLOs under the figures' names, sorted by name."""
    return sorted((k, float(v)) for k, v in (("ttft_ms", perf.slo_ttft_ms),
                                             ("tpot_ms", perf.slo_tpot_ms)) if v is not None)


def _curve_note(sec: Section) -> str:
    how = sec.curve_source
    return f"Computed from {how}." if sec.curve else how[:1].upper() + how[1:] + "."


def _problems(sec: Section) -> list[Problem]:
    return [*sec.extra_problems, *sec.plan.problems]


def _verdict(sec: Section) -> str:
    words = {"fits": "FITS", "does-not-fit": "DOES NOT FIT",
             "policy-violation": "FITS, BREAKS A POLICY"}
    return words.get(sec.status or "", str(sec.status).upper())


def _section_detail(sec: Section) -> str:
    """The verdict's detail: an error `kvplan check` found in the file (a GPU count that cannot
    run the command, a policy) before the plan's own reading."""
    found = [x.message for x in sec.extra_problems if x.severity == "error"]
    if found and sec.status != "fits":
        return found[0]
    return _verdict_detail(sec.plan)


def _verdict_detail(p: Plan) -> str:
    """What the verdict means in numbers: the shortfall, or the target met or not."""
    kv, n = p.kv_cache, p.workload.target_concurrency
    if not p.fits:
        tp, rec = p.inputs["tensor_parallel_size"].value, p.recommendations.tensor_parallel_size
        other = (f"; the recommended command uses tensor_parallel_size {rec.value}"
                 if rec.value and rec.value != tp else "")
        if shortfall(p):
            return f"the budget falls {gib(shortfall(p))} per GPU short of the KV cache{other}"
        errors = [pr.message for pr in p.problems if pr.severity == "error"]
        length = p.inputs["max_model_len"].value
        if errors and isinstance(length, int) and kv.max_model_len_fit >= length:
            return errors[0] + other  # one request fits: the plan's own error says what does not
        return (f"one {_num(p.inputs['max_model_len'].value)}-token request does not fit in the "
                f"KV cache ({kv.tokens:,} tokens); the largest "
                f"{p.engine.knob('max_model_len')} that fits is {kv.max_model_len_fit:,}{other}")
    length = _num(p.inputs["max_model_len"].value)
    per_request = (p.workload.avg_input_tokens or 0) + (p.workload.avg_output_tokens or 0)
    if n and per_request:  # the workload's own request length, as the planner sizes the target
        held = kv.tokens / per_request
        if held < n:
            return (f"one request fits, but the KV cache holds {held:,.2f} of the {n} target "
                    f"requests of {per_request:,} tokens (see the recommendations)")
        return f"the KV cache holds all {n} target requests of {per_request:,} tokens"
    if n and kv.max_concurrency < n:
        return (f"one request fits, but the KV cache holds {kv.max_concurrency:,.2f} of the "
                f"{n} target requests at {length} tokens (see the recommendations)")
    if n:
        return f"the KV cache holds all {n} target requests at {length} tokens"
    return f"the KV cache holds {kv.max_concurrency:,.2f} requests of {length} tokens"


def _key_numbers(p: Plan) -> list[tuple[str, str]]:
    kv, length = p.kv_cache, p.inputs["max_model_len"].value
    out = [("GPUs", f"{p.gpu.count} × {p.gpu.name}"),
           ("KV cache per GPU", f"none ({gib(shortfall(p))} short)" if shortfall(p)
            else gib(p.memory.kv_cache_bytes)),
           (p.memory.notes.get("kv_tokens_label", "KV cache size"), f"{kv.tokens:,} tokens"),
           *([(p.served.label(p.engine.knobs), f"{p.served.kv_cache.tokens:,} tokens")]
             if p.served is not None else []),
           (f"concurrency at {p.engine.knob('max_model_len')} {length}",
            f"{kv.max_concurrency:,.2f} requests"),
           (f"largest {p.engine.knob('max_model_len')} that fits",
            f"{kv.max_model_len_fit:,} tokens"),
           ("weights per GPU", gib(p.memory.weights_bytes))]
    if p.workload.target_concurrency:
        out.append(("target concurrency", f"{p.workload.target_concurrency} requests"))
    return out


def _input_rows(p: Plan) -> list[tuple[object, ...]]:
    return [(k, "—" if v.value is None else v.value, v.source) for k, v in p.inputs.items()]


def _rec_rows(p: Plan) -> list[tuple[str, str, str]]:
    return [(p.engine.knob(name), plain_number(r.value), r.reason)
            for name, r in p.recommendations if r is not None]


def _assumptions(p: Plan) -> list[str]:
    m = p.memory
    origin = "the safetensors headers" if p.model.weights_from == "headers" else "config.json"
    out = [f"Memory is per GPU for the most constrained worker; the device total is "
           f"{gib(m.total_bytes)} as CUDA reports it"
           + (" (estimated)" if "total_bytes" in m.estimated else "") + ".",
           f"Budget: {m.notes.get('budget', 'engine budget')} = {gib(m.budget_bytes)}; headroom "
           f"is the device total minus everything the engine takes.",
           f"Weights from {origin} ({p.model.parameters / 1e9:,.2f} B parameters, {p.model.dtype}"
           + (f", {p.model.quantization}" if p.model.quantization else "") + ").",
           f"Engine modelled: {p.engine.label} {p.engine.version}, accounting era {p.engine.era}."]
    if m.estimated:
        out.append("Estimated, not exact: " + ", ".join(m.estimated) + ".")
    if not m.cudagraph_in_budget and m.cudagraph_bytes:
        out.append("CUDA graphs are allocated outside the engine's budget, so they use headroom.")
    if p.performance and p.performance.measured_check:  # never-fitted runs like this plan
        out.append(f"Speed: {p.performance.measured_check}.")
    experts = p.performance.routed_experts if p.performance else None
    if experts and experts.public_check:  # the MoE band's widening (docs/performance-moe.md)
        out.append(f"Speed of a MoE model: {experts.public_check}.")
    if experts and experts.layer_floors:
        out.append(f"{experts.layer_floors}.")
    if experts and experts.padding:
        out.append(f"{experts.padding}.")
    return out


def _memory_rows(p: Plan) -> list[tuple[str, str, str, str]]:
    total = p.memory.total_bytes
    notes = {"weights": _weights_note(p), "headroom": "device total − the rest"}
    return [(label, f"{b / GiB:,.2f}", f"{100 * b / total:.1f}%",
             p.memory.notes.get(key, notes.get(key, ""))) for key, label, b in memory_stack(p)]


_MEMORY_HEAD = ("component", "GiB", "of device total", "note")


def _compare_rows(plans: Sequence[Plan]) -> tuple[list[str], list[tuple[str, ...]]]:
    """`kvplan compare`'s table: one column per engine, knobs under each engine's flag."""
    head = ["", *[f"{p.engine.label} {p.engine.version}" for p in plans]]
    rows = [("fits", *["yes" if p.fits else "no" for p in plans]),
            ("KV cache / GPU", *[gib(p.memory.kv_cache_bytes) for p in plans]),
            ("KV tokens", *[f"{p.kv_cache.tokens:,}" for p in plans]),
            ("context length", *[_num(p.inputs["max_model_len"].value) for p in plans]),
            ("concurrency at that length", *[f"{p.kv_cache.max_concurrency:,.2f}" for p in plans])]
    for name in ("max_model_len", "max_num_seqs", "gpu_memory_utilization"):
        cells = []
        for p in plans:
            value = getattr(p.recommendations, name).value
            cells.append(f"{p.engine.knobs.get(name, name)} {plain_number(value)}")
        rows.append((f"recommended {name}", *cells))
    return head, rows


# "KV spare": KV memory beyond what the target needs (the memory table's "headroom" is the
# device memory outside the engine's budget: another quantity, so another name)
_SWEEP_HEAD = ("option", "meets target", "cost per hour", "$ per M tokens", "KV spare per GPU",
               "KV tokens")


def _sweep_rate(options: Sequence[SweepOption]) -> float | None:
    """The request rate the sweep's order reads the cost per day of; None: $ per M tokens."""
    return options[0].request_rate if options else None


def _sweep_head(options: Sequence[SweepOption]) -> tuple[str, ...]:
    """The sweep table's columns; with a rate, the replicas and $ per day its order reads."""
    rate = _sweep_rate(options)
    if rate is None:
        return _SWEEP_HEAD
    return (*_SWEEP_HEAD[:3], f"replicas for {rate:g} req/s", "$ per day",
            *_SWEEP_HEAD[3:])


def _sweep_rows(options: Sequence[SweepOption]) -> list[tuple[str, ...]]:
    rated = _sweep_rate(options) is not None

    def by_rate(o: SweepOption) -> tuple[str, ...]:
        if not rated:
            return ()
        if o.cost_per_day is None or o.replicas is None:
            return ("—", "—")
        e = "" if o.replicas_simulated else " e"  # estimated from throughput, not simulated
        return (f"{o.replicas:,}{e}", f"${o.cost_per_day:,.2f}{e}")

    return [(o.label + " ~" * o.extrapolated, "yes" if o.fits else "no",
             "—" if o.cost_per_hour is None else f"${o.cost_per_hour:,.2f}", *by_rate(o),
             "—" if o.cost_per_million is None else f"${o.cost_per_million:,.3f}",
             gib(o.headroom_bytes), f"{o.kv_tokens:,}") for o in options]


def _sweep_caption(options: Sequence[SweepOption]) -> str:
    """How the sweep section's rows are ordered, and what its marks mean."""
    pessimistic = options[0].rank_on == "pessimistic"
    end = ("at the pessimistic end of the latency and throughput bands (--rank-on point: the "
           "estimates)" if pessimistic else "at the point estimates")
    rate = _sweep_rate(options)
    if rate is None:
        order = f"options that meet the target first, then the cheapest $ per million output " \
            f"tokens, {end}"
    else:
        order = (f"as kvplan sweep --request-rate {rate:g} ranks: options that meet the target "
                 f"first, by the cost per day of the replicas {rate:g} req/s needs (simulated at "
                 "the SLO percentile for the cheapest by estimate, which come first; the others "
                 "estimated from throughput, marked e"
                 + ("; never fewer than the low end of the throughput band needs"
                    if pessimistic else "") + f"); $ per M tokens {end}")
    return (f"In the sweep's order: {order}. ~ after an option: its latency figures are "
            "extrapolated (not calibrated).")


# --------------------------------------------------------------------- Markdown


def _md(text: object) -> str:
    """kvplan's own text safe in a GFM paragraph or table cell: no raw HTML, no table breaks,
    no link or image syntax, one line. Strings from input files go through code_span."""
    s = str(text).replace("\\", "\\\\").replace("|", "\\|")
    s = s.replace("<", "&lt;").replace(">", "&gt;")
    s = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", s)  # snake_case stays readable
    s = s.replace("[", "\\[").replace("]", "\\]").replace("!", "\\!")
    return s.replace("*", "\\*").replace("`", "\\`").replace("\n", " ")


class Code(str):
    """A table cell that holds a string from an input file: rendered as a code span."""


def code_span(text: object, *, table: bool = False) -> str:
    """An untrusted string (a model name, file or message from a deployment file) as one GFM
    code span: nothing inside is a link, an image, HTML or emphasis. The fence is one backtick
    longer than the longest run inside; a space pads content that starts or ends with a
    backtick; line breaks become spaces; in a table, `|` is escaped (GFM reads `\\|` in a cell
    as `|`, inside code spans too)."""
    s = re.sub(r"[\x00-\x1f\x7f]+", " ", str(text))
    if not s.strip():
        return ""
    if table:
        s = s.replace("|", "\\|")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s[0] in "` " or s[-1] in "` " else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _cell(c: object) -> str:
    return code_span(c, table=True) if isinstance(c, Code) else _md(c)


def _md_table(head: Sequence[str], rows: Sequence[Sequence[object]],
              right: Iterable[int] = ()) -> list[str]:
    right = set(right)
    out = ["| " + " | ".join(_md(h) for h in head) + " |",
           "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out + [""]


def _code(text: str, lang: str = "") -> list[str]:
    fence = "```" if "```" not in text else "~~~~"
    return [f"{fence}{lang}", text, fence, ""]


def _mermaid_label(s: str) -> str:
    return s.replace('"', "'")


def _md_section(sec: Section, level: int) -> list[str]:
    p, h = sec.plan, "#" * level
    model = p.model.id
    title = (code_span(model) + _md(sec.title[len(model):]) if sec.title.startswith(model)
             else _md(sec.title))
    out = [f"{h} {title}", ""]
    if sec.where:
        out += [f"Found at {code_span(sec.where)}.", ""]
    out += [f"**Verdict: {_verdict(sec)}** — {_md(_section_detail(sec))}", ""]
    launch = _launch_lines(p)
    if launch:  # across nodes: one launch line per node role, as `kvplan plan` prints them
        out += [f"Recommended launch, {_md(_nodes_where(p))}:", "",
                *_code("\n".join(f"# {role}\n{cmd}" for role, cmd in launch), "sh")]
    else:
        out += ["Recommended serve command:", "", *_code(p.command, "sh")]
    out += _md_table(["", "value"], _key_numbers(p), right=[1])
    out += [f"{h}# Recommendations", ""]
    out += _md_table(["setting", "value", "why"], _rec_rows(p), right=[1])

    stack = memory_stack(p)
    out += [f"{h}# Memory per GPU", ""]
    used, total = sum(b for _, _, b in stack) / GiB, p.memory.total_bytes / GiB
    pie_title = (f"Memory per GPU, GiB (device total {total:.2f})" if used <= total else
                 f"Memory per GPU, GiB: {used:.2f} needed, {total:.2f} there")
    out += ["```mermaid", f"pie showData title {pie_title}"]
    out += [f'    "{_mermaid_label(label)}" : {b / GiB:.2f}' for _, label, b in stack if b > 0]
    out += ["```", ""]
    out += _md_table(_MEMORY_HEAD, _memory_rows(p), right=[1, 2])
    if shortfall(p):
        out += [f"The budget falls {gib(shortfall(p))} short of any KV cache.", ""]

    out += [f"{h}# KV capacity versus {p.engine.knob('max_model_len')}", ""]
    if len(sec.curve) > 1:
        xs = ", ".join(f'"{tokens_k(c.max_model_len)}"' for c in sec.curve)
        ys = ", ".join(f"{c.concurrency:g}" for c in sec.curve)
        n = p.workload.target_concurrency
        top = max([c.concurrency for c in sec.curve] + [n or 0])
        target = f"; flat line: target {n}" if n else ""
        out += ["```mermaid", "xychart-beta",
                f'    title "Concurrent requests the KV cache holds (chosen '
                f'{tokens_k(int(p.inputs["max_model_len"].value or 0))}{target})"',
                f'    x-axis "max_model_len (tokens)" [{xs}]',
                f'    y-axis "requests" 0 --> {math.ceil(top * 1.05) or 1}',
                f"    line [{ys}]"]
        out += [f"    line [{', '.join([str(n)] * len(sec.curve))}]"] if n else []
        out += ["```", ""]
    if sec.curve:
        out += _md_table([f"{p.engine.knob('max_model_len')} (tokens)", "concurrent requests", ""],
                         [(f"{c.max_model_len:,}", f"{c.concurrency:,.2f}",
                           "chosen" if c.chosen else "") for c in sec.curve], right=[0, 1])
    out += [_md(_curve_note(sec)), ""]

    if p.performance is not None:
        out += _md_headline(p, level + 1)
        out += _md_perf(p.performance, level + 1)
    out += _md_traffic(p, level + 1)

    out += [f"{h}# Problems, assumptions and inputs", ""]
    probs = _problems(sec)
    out += [f"- **{x.severity}** `{x.code}`: {code_span(x.message)}"
            for x in probs] or ["- no problems"]
    out += [""] + [f"- {_md(a)}" for a in _assumptions(p)] + [""]
    out += _md_table(["input", "value", "source"], _input_rows(p))
    return out


def _nodes_where(p: Plan) -> str:
    from .text import nodes_where  # (the report module does not import the text renderer)

    return nodes_where(p)


def _launch_lines(p: Plan) -> list[tuple[str, str]]:
    """(role, command) of each node role of a plan across nodes; [] on one node."""
    n = p.nodes
    if n is None or (n.nodes or 1) <= 1:
        return []
    return [(x.role, x.command) for x in n.launch]


_HEADLINE_HEAD = ("figure", "predicted", "range")


def _headline(p: Plan) -> tuple[str, list[tuple[str, str, str]], str]:
    """(title, rows, note) of the figures at the workload's concurrency, as `kvplan plan`
    prints them: bands, whether calibrated, cost, and where the coefficients come from."""
    from .text import figure_rows, performance_title  # (imported when a plan has figures)

    pf = p.performance
    assert pf is not None
    note = f"Coefficients: {pf.calibration}." if pf.calibration else ""
    return performance_title(p), figure_rows(pf), note


def _md_headline(p: Plan, level: int) -> list[str]:
    title, rows, note = _headline(p)
    out = ["#" * level + " Latency, throughput and cost", "", _md(title), ""]
    out += _md_table(_HEADLINE_HEAD, rows, right=[1, 2])
    return out + ([_md(note), ""] if note else [])


def _html_headline(p: Plan) -> str:
    title, rows, note = _headline(p)
    return ("<h3>Latency, throughput and cost</h3>"
            f"<p>{_h(title)}</p>{_html_table(_HEADLINE_HEAD, rows, numeric=[1, 2])}"
            + (f'<p class="sub">{_h(note)}</p>' if note else ""))


def _perf_table(perf: Performance) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The data table versus concurrency: `kvplan plan`'s "Versus concurrency" table, its
    headers and rounding (render/text.py)."""
    from .text import CONCURRENCY_HEAD, concurrency_rows  # (imported when a plan has figures)

    return CONCURRENCY_HEAD, concurrency_rows(perf)


def _slo_line(perf: Performance) -> str:
    """The SLOs under the data table, named as its headers name the figures, and its ✗."""
    from .text import CONCURRENCY_MISS

    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT"}
    return ("SLOs: " + ", ".join(f"{names[k]} {v:g} ms" for k, v in _slos(perf))
            + f" ({CONCURRENCY_MISS})")


def _md_perf(perf: Performance, level: int) -> list[str]:
    out = ["#" * level + " Latency and throughput versus concurrency", ""]
    head, table = _perf_table(perf)
    if table:
        out += _md_table(head, table, right=range(len(head)))
    if _slos(perf):
        out += [_md(_slo_line(perf)), ""]
    return out


_PCT_METRICS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"),
                ("e2e_ms", "end-to-end"))


def _pct_rows(perf: Performance) -> list[tuple[object, ...]]:
    pct = perf.percentiles or {}
    return [(label, *(f"{pct.get(k, {}).get(q, 0.0):,.1f}" for q in ("p50", "p90", "p99", "mean")))
            for k, label in _PCT_METRICS]


def _replica_line(perf: Performance) -> str:
    if perf.replicas is None or perf.request_rate is None:
        return ""
    cost = f", US$ {perf.cost_per_day:,.2f} per day" if perf.cost_per_day is not None else ""
    head = f", headroom {perf.headroom:.0%}" if perf.headroom is not None else ""
    gpus = f"{perf.gpus_for_rate} GPUs" if perf.gpus_for_rate is not None else ""
    where = f" ({gpus}{cost})".replace("(, ", "(") if gpus or cost else ""
    missed = "" if perf.meets_slo_at_percentile is not False else " (the SLOs are not met)"
    verb = "need" if perf.gpus_for_rate is not None else "replayed on"  # a trace: one replica
    return (f"{perf.request_rate:g} req/s {verb} {perf.replicas} replica"
            f"{'s' if perf.replicas != 1 else ''}{where}{missed}: "
            f"{perf.load_per_replica_rps:g} req/s each of at most "
            f"{perf.capacity_rps_per_replica:g}{head}.")


def _traffic_summary(p: Plan) -> str:
    t = p.traffic
    if t is None:
        return ""
    from .text import traffic_summary

    return traffic_summary(t, "US$ ") + "."


def _autoscaler_rows(p: Plan) -> list[tuple[object, ...]]:
    a = p.traffic.autoscaler if p.traffic else {}
    if not a:
        return []
    rows: list[tuple[object, ...]] = [("replicas", f"{a.get('min_replicas')}–"
                                                   f"{a.get('max_replicas')}", "the curve's "
                                                   "fewest and most")]
    rows += [(m["name"], f"{m['target']:g}", m["why"]) for m in a.get("metrics", [])]
    return rows


def _md_traffic(p: Plan, level: int) -> list[str]:
    """Simulated percentiles, the replicas for a rate, and a rate curve's replicas and cost."""
    perf, out = p.performance, []
    h = "#" * level
    if perf is not None and perf.percentiles:
        out += [f"{h} Traffic: simulated percentiles", "",
                f"Harness: {_md(perf.harness)}; {_md(perf.lengths or '')}.", ""]
        out += _md_table(["ms", "p50", "p90", "p99", "mean"], _pct_rows(perf), right=[1, 2, 3, 4])
        if line := _replica_line(perf):
            out += [_md(line), ""]
    t = p.traffic
    if t is not None:
        out += [f"{h} Traffic over the day", "", f"Harness: {_md(t.harness)}.", ""]
        if t.peak_gpus is not None:  # every interval has a fleet size
            xs = ", ".join(f'"{i.time:g}"' for i in t.intervals)
            ys = ", ".join(f"{i.gpus}" for i in t.intervals)
            out += ["```mermaid", "xychart-beta", '    title "GPUs per interval"',
                    f'    x-axis "time (h)" [{xs}]',
                    f'    y-axis "GPUs" 0 --> {max(1, t.peak_gpus)}', f"    bar [{ys}]", "```",
                    ""]
        out += [_md(_traffic_summary(p)), ""]
        if rows := _autoscaler_rows(p):
            out += _md_table(["autoscaler", "target", "why"], rows)
    return out


def _html_traffic(p: Plan, cid: str) -> str:
    from . import svg

    perf, out = p.performance, []
    if perf is not None and perf.percentiles:
        out.append("<h3>Traffic: simulated percentiles</h3>"
                   f"<p class=\"sub\">Harness: {_h(perf.harness)}; {_h(perf.lengths or '')}.</p>")
        out.append(_html_table(["ms", "p50", "p90", "p99", "mean"], _pct_rows(perf),
                               numeric=[1, 2, 3, 4]))
        if line := _replica_line(perf):
            out.append(f"<p>{_h(line)}</p>")
    t = p.traffic
    if t is not None:
        out.append(f"<h3>Traffic over the day</h3><p class=\"sub\">Harness: {_h(t.harness)}.</p>")
        pts = [(i.time, float(i.gpus)) for i in t.intervals if i.gpus is not None]
        series = [svg.Series("GPUs", pts, svg.OKABE_ITO[0])]
        desc = "GPUs: " + ", ".join(f"{x:g} h → {y:g}" for x, y in pts)
        if len(pts) >= 2:
            out.append(_wrap(svg.line_chart(
                f"{cid}-t", series, title="GPUs per interval", desc=desc, x_label="time (h)",
                y_label="GPUs", x_fmt=lambda v: f"{v:g}", y_fmt=lambda v: f"{v:g}")))
        out.append(f"<p>{_h(_traffic_summary(p))}</p>")
        if rows := _autoscaler_rows(p):
            out.append(_html_table(["autoscaler", "target", "why"], rows))
    return "".join(out)


def _md_compare(plans: Sequence[Plan], level: int) -> list[str]:
    out = ["#" * level + " Engines compared", ""]
    head, rows = _compare_rows(plans)
    out += _md_table(head, rows, right=range(1, len(head)))
    for p in plans:
        out += [f"{p.engine.label}:", "", *_code(p.command, "sh")]
    return out


def _md_sweep(options: Sequence[SweepOption], level: int) -> list[str]:
    out = ["#" * level + " Options from a sweep", ""]
    rows = [(r[0] + " (chosen)" * o.chosen, *r[1:])
            for o, r in zip(options, _sweep_rows(options), strict=True)]
    head = _sweep_head(options)
    out += _md_table(head, rows, right=range(2, len(head)))
    out += [_md(_sweep_caption(options)), ""]
    return out


_SUMMARY_HEAD = ("where", "model", "GPUs", "engine", "status", "KV tokens", "concurrency")


def _summary_cells(s: Section) -> tuple[str, ...]:
    p = s.plan
    return (Code(p.model.id), f"{p.gpu.count} × {p.gpu.name}",
            f"{p.engine.label} {p.engine.version}",
            s.status or "", f"{p.kv_cache.tokens:,}", f"{p.kv_cache.max_concurrency:,.2f}")


def _unplanned_cells(u: Unplanned) -> tuple[str, ...]:
    return (Code(u.where), Code(u.model) if u.model else "—", "—", u.engine or "—", u.status,
            "—", "—")


def _unplanned_lines(report: Report) -> list[tuple[str, str]]:
    """(where, why) of each deployment the report could not plan."""
    return [(u.where, u.message) for u in report.unplanned]


def render_markdown(report: Report) -> str:
    out = [f"# {_md(report.title)}", ""]
    out += [f"- {_md(n)}" for n in report.notes] + ([""] if report.notes else [])
    single = len(report.sections) == 1 and not report.unplanned
    if not single:
        out += _md_table(_SUMMARY_HEAD,
                         [(Code(s.where or ""), *_summary_cells(s)) for s in report.sections]
                         + [_unplanned_cells(u) for u in report.unplanned], right=[5, 6])
    if report.unplanned:
        # the errors quote the file's own strings: a code span keeps them inert
        out += ["Not planned:", ""] + [f"- {code_span(w)}: {code_span(why)}"
                                       for w, why in _unplanned_lines(report)] + [""]
    for sec in report.sections:
        out += _md_section(sec, 2)
    if report.compare:
        out += _md_compare(report.compare, 2)
    if report.sweep is not None:
        out += _md_sweep(report.sweep, 2)
    out += ["## Regenerate this report", "", *_code(report.command_line, "sh")]
    out += [f"kvplan {_md(report.version)}, Plan schema {_md(_schema(report))}"
            + (f", generated {_md(report.generated_at)}" if report.generated_at else "") + ".", ""]
    return "\n".join(out)


def _schema(report: Report) -> str:
    from ..specs import SCHEMA_VERSION

    return report.sections[0].plan.schema_version if report.sections else SCHEMA_VERSION


# ------------------------------------------------------------------------- HTML

_CSS = """
:root{--ink:#1b1b1b;--muted:#555;--line:#d8d8d8;--bg:#fff;--ok:#00785A;
--bad:#B34700;--accent:#0072B2}
*{box-sizing:border-box}
body{margin:0;background:#f4f5f7;color:var(--ink);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:960px;margin:0 auto;padding:24px 16px 48px}
header.top{border-bottom:3px solid var(--accent);margin-bottom:16px}
h1{font-size:1.55rem;margin:0 0 4px}h2{font-size:1.3rem;margin:0 0 8px}
h3{font-size:1.08rem;margin:24px 0 8px;padding-top:8px;border-top:1px solid var(--line)}
.sub{color:var(--muted);margin:0 0 12px}
section.plan,section.block{background:var(--bg);border:1px solid var(--line);
border-radius:8px;padding:20px;margin:0 0 20px}
.verdict{display:inline-block;font-weight:700;padding:4px 12px;
border-radius:4px;color:#fff;letter-spacing:.02em}
.verdict.ok{background:var(--ok)}.verdict.bad{background:var(--bad)}
.where{font-family:ui-monospace,Menlo,Consolas,monospace;color:var(--muted);font-size:.9em}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;
padding:10px 12px;white-space:pre-wrap;overflow-wrap:anywhere;
font:13px/1.45 ui-monospace,Menlo,Consolas,monospace;margin:8px 0 12px}
dl.kpi{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:8px;margin:12px 0}
dl.kpi div{border:1px solid var(--line);border-radius:6px;padding:8px 10px}
dl.kpi dt{color:var(--muted);font-size:.82em}dl.kpi dd{margin:0;font-weight:600;font-size:1.05em}
.tablewrap{overflow-x:auto}
table{border-collapse:collapse;width:100%;margin:8px 0 12px;font-size:.92em}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}td.n,th.n{text-align:right;
font-variant-numeric:tabular-nums;white-space:nowrap}
table.wrap td.n,table.wrap th.n{white-space:normal;overflow-wrap:anywhere}
tr.chosen td,td.chosen,th.chosen{font-weight:700;background:#fff4d6}
svg.chart{width:100%;height:auto;display:block;margin:8px 0}.chartwrap{overflow-x:auto}
p.tcap{margin:10px 0 0;font-weight:600;font-size:.92em;color:var(--muted)}
ul.problems{padding-left:0;list-style:none}
ul.problems li{border-left:4px solid var(--line);padding:4px 10px;margin:4px 0}
ul.problems li.error{border-color:var(--bad)}ul.problems li.warning{border-color:#E69F00}
.sev{font-weight:700;text-transform:uppercase;font-size:.78em;margin-right:6px}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.92em}
footer{color:var(--muted);font-size:.88em}
@media (max-width:600px){body{font-size:14px}main{padding:12px 8px}
section.plan,section.block{padding:12px}
th,td{padding:4px 5px}h1{font-size:1.3rem}svg.chart{min-width:540px}}
@media print{body{background:#fff;font-size:11pt}main{max-width:none;padding:0}
section.plan,section.block{border:none;padding:0;margin:0 0 12pt}h3{break-after:avoid}
svg.chart,table,pre,dl.kpi{break-inside:avoid}.chartwrap,.tablewrap{overflow:visible}
.verdict{-webkit-print-color-adjust:exact;print-color-adjust:exact;border:1px solid #000}
a{color:inherit}}
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _h(text: object) -> str:
    return escape(str(text))


def _html_table(head: Sequence[str], rows: Sequence[Sequence[object]], *,
                numeric: Iterable[int] = (), chosen: Sequence[bool] = (),
                wrap: bool = False) -> str:
    """`wrap`: cells may break between words (a table of flags with one column per engine
    fits the page instead of pushing its last column out of sight)."""
    numeric = set(numeric)

    def cell_class(i: int) -> str:
        return ' class="n"' if i in numeric else ""

    def cell(tag: str, i: int, v: object) -> str:
        return f"<{tag}{cell_class(i)}>{_h(v)}</{tag}>"

    head_html = "".join(f'<th scope="col"{cell_class(i)}>{_h(h)}</th>' for i, h in enumerate(head))
    body = []
    for j, r in enumerate(rows):
        cls = ' class="chosen"' if j < len(chosen) and chosen[j] else ""
        body.append(f"<tr{cls}>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>")
    table = '<table class="wrap">' if wrap else "<table>"
    return (f'<div class="tablewrap">{table}<thead><tr>{head_html}</tr></thead><tbody>'
            + "".join(body) + "</tbody></table></div>")


def _wrap(chart: str) -> str:
    """A chart keeps a legible minimum width on a phone and scrolls inside its box."""
    return f'<div class="chartwrap">{chart}</div>'


def _data_table(caption: str, table: str) -> str:
    """Always shown (not in a <details>), so a printed report carries every number."""
    return f'<p class="tcap">{_h(caption)}</p>{table}'


def _html_memory(sec: Section, cid: str) -> str:
    from . import svg

    p = sec.plan
    stack = memory_stack(p)
    colours = {"weights": svg.OKABE_ITO[0], "activation": svg.OKABE_ITO[1],
               "non_torch": svg.OKABE_ITO[3], "cudagraph": svg.OKABE_ITO[4],
               "kv": svg.OKABE_ITO[2], "headroom": svg.GREY}
    segs = [svg.Segment(label, b / GiB, colours[key], pattern=key == "headroom")
            for key, label, b in stack]
    desc = "; ".join(f"{label} {gib(b)}" for _, label, b in stack) + \
        f"; total {gib(p.memory.total_bytes)}"
    chart = svg.stacked_bar(cid, segs, title=f"Memory per GPU, {gib(p.memory.total_bytes)} total",
                            desc=desc, axis_label="GiB per GPU", fmt=lambda v: f"{v:,.2f} GiB",
                            limit=(p.memory.total_bytes / GiB,
                                   f"device total {gib(p.memory.total_bytes)}"))
    table = _html_table(_MEMORY_HEAD, _memory_rows(p), numeric=[1, 2])
    short = (f"<p><strong>The budget falls {_h(gib(shortfall(p)))} per GPU short of any KV "
             "cache.</strong></p>") if shortfall(p) else ""
    return f"<h3>Memory per GPU</h3>{_wrap(chart)}{short}{table}"


def _html_curve(sec: Section, cid: str) -> str:
    from . import svg

    p = sec.plan
    name = p.engine.knob("max_model_len")
    out = [f"<h3>KV capacity versus {_h(name)}</h3>"]
    pts = sec.curve
    if len(pts) > 1:
        chosen = next((c for c in pts if c.chosen), None)
        marker = None if chosen is None else (
            chosen.max_model_len, chosen.concurrency,
            f"chosen {tokens_k(chosen.max_model_len)}: {chosen.concurrency:g}")
        hlines = [svg.HLine(1, "1 request")]
        if p.workload.target_concurrency:
            hlines.append(svg.HLine(p.workload.target_concurrency,
                                    f"target {p.workload.target_concurrency}", svg.OKABE_ITO[3]))
        desc = (f"Concurrent requests the KV cache holds at each {name}: "
                + "; ".join(f"{c.max_model_len:,} tokens → {c.concurrency:g}" for c in pts)
                + (f". Chosen {chosen.max_model_len:,} → {chosen.concurrency:g}."
                   if chosen else ""))
        out.append(_wrap(svg.line_chart(
            cid, [svg.Series("requests held in the KV cache", [(c.max_model_len, c.concurrency)
                                                                 for c in pts])],
            title=f"KV capacity versus {name}", desc=desc,
            x_label=f"{name} (tokens per request, log scale)",
            y_label="concurrent requests (log scale)", x_fmt=tokens_k, y_fmt=lambda v: f"{v:g}",
            log2_x=True, log2_y=True, marker=marker, hlines=hlines)))
    # the chart's data, lengths across (compact; the chosen column is bold)
    cells = "".join(f'<th scope="col" class="n{" chosen" if c.chosen else ""}">'
                    f"{_h(f'{c.max_model_len:,}')}</th>" for c in pts)
    values = "".join(f'<td class="n{" chosen" if c.chosen else ""}">{_h(f"{c.concurrency:,.2f}")}'
                     "</td>" for c in pts)
    if pts:
        table = (f'<div class="tablewrap"><table><thead><tr><th scope="row">{_h(name)}</th>'
                 f'{cells}</tr></thead><tbody><tr><th scope="row">requests</th>{values}</tr>'
                 "</tbody></table></div>")
        out.append(_data_table(f"Data: requests held at each {name}", table))
    out.append(f"<p class=\"sub\">{_h(_curve_note(sec))}</p>")
    return "".join(out)


def _html_perf(perf: Performance, cid: str, max_num_seqs: int | None = None) -> str:
    """The charts stop at `max_num_seqs` (beyond it requests queue: TTFT is then the queue's,
    and it would dwarf every point the engine runs); the table lists every point."""
    from . import svg

    head, table = _perf_rows(perf)
    slos = _slos(perf)
    out = ["<h3>Latency and throughput versus concurrency</h3>"]
    shown = [r for r in table if max_num_seqs is None or r[0] <= max_num_seqs]
    if len(shown) < len(table) and len(shown) >= 2:
        worst = max(r[head.index("ttft_ms")] for r in table)
        out.append(f"<p class=\"sub\">The charts show concurrencies up to {max_num_seqs:,}, "
                   f"the max_num_seqs the serve command runs (their last point is at "
                   f"{shown[-1][0]:,.0f}): beyond it requests wait in the "
                   f"queue and TTFT grows with the queue (up to {worst:,.0f} ms at "
                   f"{table[-1][0]:,.0f}). The data table lists every point.</p>")
    else:
        shown = table
    for n, (name, prefix, unit, _) in enumerate(_PERF_METRICS if table else ()):
        col = head.index(name)
        series = [svg.Series(name, [(r[0], r[col]) for r in shown], svg.OKABE_ITO[0])]
        hl = [svg.HLine(v, f"SLO {k} {v:g}") for k, v in slos if k.startswith(prefix)]
        what = "Throughput" if prefix == "throughput" else prefix.upper()
        desc = "; ".join(f"{s.label}: " + ", ".join(f"{x:g} → {y:g}" for x, y in s.points)
                         for s in series)
        out.append(_wrap(svg.line_chart(
            f"{cid}-{n}", series, title=f"{what} versus concurrency", desc=desc,
            x_label="concurrent requests", y_label=f"{prefix} ({unit})",
            x_fmt=lambda v: f"{v:g}", y_fmt=lambda v: f"{v:g}", hlines=hl)))
    if table:
        data_head, data = _perf_table(perf)
        out.append(_data_table("Data", _html_table(data_head, data,
                                                   numeric=range(len(data_head)))))
    if slos:
        out.append(f"<p>{_h(_slo_line(perf))}</p>")
    return "".join(out)


def _html_section(sec: Section, idx: int) -> str:
    p = sec.plan
    ok = sec.status == "fits"
    out = [f'<section class="plan" aria-labelledby="s{idx}-h">',
           f'<h2 id="s{idx}-h">{_h(sec.title)}</h2>']
    if sec.where:
        out.append(f'<p class="where">{_h(sec.where)}</p>')
    out.append(f'<p><span class="verdict {"ok" if ok else "bad"}">{_h(_verdict(sec))}</span>'
               + f" {_h(_section_detail(sec))}</p>")
    launch = _launch_lines(p)
    if launch:  # across nodes: one launch line per node role
        text = "\n".join(f"# {role}\n{cmd}" for role, cmd in launch)
        out.append(f"<h3>Recommended launch, {_h(_nodes_where(p))}</h3>"
                   f"<pre><code>{_h(text)}</code></pre>")
    else:
        out.append(f"<h3>Recommended serve command</h3><pre><code>{_h(p.command)}</code></pre>")
    out.append('<dl class="kpi">' + "".join(f"<div><dt>{_h(k)}</dt><dd>{_h(v)}</dd></div>"
                                            for k, v in _key_numbers(p)) + "</dl>")
    out.append("<h3>Recommendations</h3>" + _html_table(["setting", "value", "why"], _rec_rows(p),
                                                       numeric=[1]))
    out.append(_html_memory(sec, f"m{idx}"))
    out.append(_html_curve(sec, f"c{idx}"))
    if p.performance is not None:
        seqs = p.recommendations.max_num_seqs.value or p.inputs["max_num_seqs"].value
        out.append(_html_headline(p))
        out.append(_html_perf(p.performance, f"p{idx}",
                              int(seqs) if isinstance(seqs, int | float) else None))
    out.append(_html_traffic(p, f"t{idx}"))
    items = "".join(f'<li class="{_h(x.severity)}"><span class="sev">{_h(x.severity)}</span>'
                    f"<code>{_h(x.code)}</code> {_h(x.message)}</li>" for x in _problems(sec))
    out.append("<h3>Problems</h3>" + (f'<ul class="problems">{items}</ul>' if items else
                                      "<p>No problems.</p>"))
    out.append("<h3>Assumptions and estimates</h3><ul>"
               + "".join(f"<li>{_h(a)}</li>" for a in _assumptions(p)) + "</ul>")
    out.append("<h3>Inputs</h3>" + _data_table("Each input and where it came from", _html_table(
        ["input", "value", "source"], _input_rows(p))))
    out.append("</section>")
    return "".join(out)


def _html_compare(plans: Sequence[Plan]) -> str:
    from . import svg

    bars = [(f"{p.engine.label} {p.engine.version}", float(p.kv_cache.tokens)) for p in plans]
    chart = svg.bar_chart("e", bars, title="KV cache tokens per GPU by engine",
                          desc="; ".join(f"{k}: {v:,.0f} tokens" for k, v in bars),
                          axis_label="KV cache tokens per GPU", fmt=lambda v: f"{v:,.0f}")
    head, rows = _compare_rows(plans)
    cmds = "".join(f"<p><strong>{_h(p.engine.label)}</strong></p>"
                   f"<pre><code>{_h(p.command)}</code></pre>" for p in plans)
    return ('<section class="block" aria-labelledby="cmp-h"><h2 id="cmp-h">Engines compared</h2>'
            f"{_wrap(chart)}{_html_table(head, rows, numeric=range(1, len(head)), wrap=True)}"
            f"{_data_table('Serve command for each engine', cmds)}</section>")


def _html_sweep(options: Sequence[SweepOption]) -> str:
    from . import svg

    priced = [o for o in options if o.cost_per_hour is not None]
    chart = ""
    if priced:
        desc = "; ".join(f"{o.label}: ${o.cost_per_hour:,.2f}/h, {gib(o.headroom_bytes)}"
                         for o in priced)
        chart = _wrap(svg.scatter(
            "sw", [(o.cost_per_hour or 0.0, o.headroom_bytes / GiB, o.label, o.chosen)
                   for o in priced],
            title="Sweep options: cost versus spare KV memory", desc=desc,
            x_label="cost (USD per hour)", y_label="KV spare per GPU (GiB)",
            x_fmt=lambda v: f"${v:g}", y_fmt=lambda v: f"{v:g}"))
    head = _sweep_head(options)
    table = _html_table(head, _sweep_rows(options), numeric=range(2, len(head)),
                        chosen=[o.chosen for o in options])
    return ('<section class="block" aria-labelledby="sw-h"><h2 id="sw-h">Options from a sweep</h2>'
            f"{chart}{table}<p>{_h(_sweep_caption(options))}</p></section>")


def render_html(report: Report) -> str:
    body = [f'<header class="top"><h1>{_h(report.title)}</h1>']
    body += [f'<p class="sub">{_h(n)}</p>' for n in report.notes]
    body.append("</header>")
    if len(report.sections) != 1 or report.unplanned:
        rows = [(s.where or "", *_summary_cells(s)) for s in report.sections]
        rows += [_unplanned_cells(u) for u in report.unplanned]
        table = _html_table(list(_SUMMARY_HEAD), rows, numeric=[5, 6])
        for i, s in enumerate(report.sections):  # each row's place links to its section
            cell = f"<td>{_h(s.where or '')}</td>"
            table = table.replace(cell, f'<td><a href="#s{i}-h">{_h(s.where or "")}</a></td>', 1)
        missing = "".join(f"<li><code>{_h(w)}</code>: {_h(why)}</li>"
                          for w, why in _unplanned_lines(report))
        body.append(f'<section class="block"><h2>Deployments</h2>{table}'
                    + (f"<p>Not planned:</p><ul>{missing}</ul>" if missing else "")
                    + "</section>")
    body += [_html_section(s, i) for i, s in enumerate(report.sections)]
    if report.compare:
        body.append(_html_compare(report.compare))
    if report.sweep is not None:
        body.append(_html_sweep(report.sweep))
    body.append(f'<footer><h2>Regenerate this report</h2><pre><code>{_h(report.command_line)}'
                f'</code></pre><p>kvplan {_h(report.version)}, Plan schema {_h(_schema(report))}'
                + (f", generated {_h(report.generated_at)}" if report.generated_at else "")
                + ".</p></footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<meta name="generator" content="kvplan">\n'
            f"<title>{_h(report.title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")


def render(report: Report, fmt: str) -> str:
    return render_html(report) if FORMATS[fmt] == "html" else render_markdown(report)


# ------------------------------------------------------------------ check markdown


def check_markdown(report: CheckReport) -> str:
    """`kvplan check --format markdown`: a compact GFM summary for a PR comment or
    $GITHUB_STEP_SUMMARY — one row per deployment, then what needs attention."""
    s = report.summary
    icon = {"fits": "✅ fits", "does-not-fit": "❌ does not fit",
            "policy-violation": "❌ policy", "error": "⚠️ error", "unchecked": "⚠️ unchecked"}
    out = ["## kvplan check", "",
           f"{s.sentence()}.", ""]
    rows = []
    for d in report.deployments:
        p = d.plan
        rows.append((Code(f"{d.file}:{d.line}"), Code(d.model or "?"),
                     f"{p.gpu.count} × {p.gpu.id}" if p else Code(d.gpu or "?"),
                     icon.get(d.status, d.status),
                     f"{p.kv_cache.tokens:,}" if p else "—",
                     f"{p.kv_cache.max_concurrency:g}" if p else "—",
                     f"{p.inputs['max_model_len'].value}" if p else "—"))
    head = ["where", "model", "GPUs", "status", "KV tokens", "concurrency", "max_model_len"]
    out += _md_table(head, rows, right=[4, 5, 6])
    attention = [(d, x) for d in report.deployments for x in [*d.policy_violations, *d.problems]
                 if x.severity != "info"]
    if attention:
        out += ["### Needs attention", ""]
        out += [f"- {code_span(f'{d.file}:{d.line}')} **{x.severity}** `{x.code}`: "
                f"{code_span(x.message)}"
                for d, x in attention] + [""]
    return "\n".join(out)


# -------------------------------------------------------------------------- I/O


def output_format(output: Path | None, fmt: str | None) -> str:
    """'md' or 'html' from --format, else the -o suffix, else md; bad values name the path."""
    from ..errors import InvalidInputError

    if output is not None and output.is_dir():
        raise InvalidInputError(f"cannot write the report to {output}: it is a directory",
                                hint="pass a file name, e.g. -o sizing.html")
    name = (fmt or (output.suffix.lstrip(".") if output else "md")).lower()
    if name not in FORMATS:
        where = f" for {output}" if output else ""
        raise InvalidInputError(f"unknown report format {name!r}{where}",
                                hint="use --format md or html, or -o FILE.md / FILE.html")
    return FORMATS[name]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, text: str, what: str = "the report",
                 example: str = "sizing.html") -> None:
    """Write `text` (`what`: the report, the calibration …) to `path` through a temporary file
    in the same directory and a rename, so a failure never leaves a half-written file; a target
    that exists and is not a regular file (a FIFO, a device, a link to /proc/self/fd/1) is
    written directly, never replaced by a file. Raises InvalidInputError naming the path and
    `example`, a file name for it."""
    from ..errors import InvalidInputError

    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InvalidInputError(f"cannot write {what} to {path}: it is a directory",
                                hint=f"pass a file name, e.g. -o {example}")
    if not folder.is_dir():
        raise InvalidInputError(f"cannot write {what} to {path}: no directory {folder}",
                                hint="create the directory first")
    try:
        special = path.exists() and not stat.S_ISREG(path.stat().st_mode)
    except OSError:
        special = False
    if special:  # a FIFO, /dev/stdout (a link to /proc/self/fd/1), a terminal: write into it
        try:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
        except OSError as e:
            raise InvalidInputError(f"cannot write {what} to {path}: {e.strerror or e}",
                                    hint="choose a writable location with -o") from None
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise InvalidInputError(f"cannot write {what} to {path}: {e.strerror or e}",
                                hint="choose a writable location with -o") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
