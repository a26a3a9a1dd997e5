"""Render a Plan (and the catalogues) for people: rich tables. JSON is Plan.model_dump_json."""

from __future__ import annotations

import re
from typing import IO, TYPE_CHECKING

from ..specs import CLOSED_LOOP_HARNESS, price_provider
from ..units import GiB, gib, plain_number

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from ..deploy.check import CheckReport
    from ..planner.sweep import Option, SweepResult
    from ..sources.catalog import CatalogEntry
    from ..specs import GpuSpec, ModelSpec, Performance, Plan, TrafficPlan


_TRAILING_BLANKS = re.compile(r"[ \t]+\n")


class RightStripped:
    """A pipe or file the tables are written to, its lines without the blanks rich pads every
    cell (and a table's title) to the table's width with: diffs, `grep 'x$'` and editors see
    the text as it reads. Whole lines pass through as they complete; a terminal is given the
    stream itself (cli/common.console)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._partial = ""  # the text after the last newline written

    def write(self, text: str) -> int:
        done, newline, self._partial = (self._partial + text).rpartition("\n")
        if newline:
            self._stream.write(_TRAILING_BLANKS.sub("\n", done + newline))
        return len(text)

    def flush(self) -> None:
        if self._partial:  # an unfinished line (print(end="")) goes out as it is
            self._stream.write(self._partial)
            self._partial = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str | None:  # rich reads it to choose box characters
        return getattr(self._stream, "encoding", None)


def _seqs_head(plan: Plan) -> str:
    """max_num_seqs: the recommended value (the one the performance figures run at) with the
    planned input beside it when that differs, so the header never shows a number unexplained."""
    given, rec = plan.inputs["max_num_seqs"], plan.recommendations.max_num_seqs.value
    shown = "none (no KV cache)" if given.value is None else f"{given.value}"
    if rec is None or rec == given.value:
        return shown
    return f"{plain_number(rec)} (recommended; {given.source} {shown})"


def plan_table(plan: Plan, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    d = plan.inputs
    notes = plan.memory.notes
    head = (f"[bold]{escape(plan.model.id)}[/] on {plan.gpu.count} × {plan.gpu.name} — "
            f"{plan.engine.label} {plan.engine.version} ({plan.engine.era})")
    console.print(head)
    verdict = "[bold green]FITS[/]" if plan.fits else "[bold red]DOES NOT FIT[/]"
    console.print(
        f"{verdict}  TP={d['tensor_parallel_size'].value} PP={d['pipeline_parallel_size'].value} "
        f"DP={d['data_parallel_size'].value}  dtype={plan.model.dtype}  "
        f"kv={d['kv_cache_dtype'].value}  "
        f"{plan.engine.knob('max_model_len')}={d['max_model_len'].value} "
        f"({d['max_model_len'].source})  {plan.engine.knob('max_num_seqs')}={_seqs_head(plan)}  "
        f"{plan.engine.knob('max_num_batched_tokens')}={d['max_num_batched_tokens'].value}"
    )

    mem = plan.memory
    t = Table(title="Memory per GPU", title_justify="left", show_edge=False)
    t.add_column("component")
    t.add_column("size", justify="right")
    t.add_column("note")
    est = set(mem.estimated)
    t.add_row("device total (CUDA)", gib(mem.total_bytes),
              "estimated" if "total_bytes" in est else d["gpu_total_bytes"].source)
    t.add_row("budget", gib(mem.budget_bytes), escape(notes.get("budget", "")))
    origin = "safetensors headers" if plan.model.weights_from == "headers" else "config"
    rounding_mib = (mem.weights_bytes - mem.weights_tensor_bytes) / 2**20
    rounding = f", {rounding_mib:,.0f} MiB rounding" if rounding_mib >= 0.5 else ""
    t.add_row("  weights", gib(mem.weights_bytes), f"exact: {origin}, RoPE{rounding}")
    if plan.speculative is not None and plan.speculative.draft_layers:
        t.add_row("    of which draft", gib(mem.draft_weights_bytes),
                  f"{plan.speculative.method}, {plan.speculative.draft_layers} layer(s)")
    if plan.lora is not None:
        t.add_row("    of which LoRA slots", gib(mem.lora_bytes),
                  f"{plan.lora.max_loras} × rank {plan.lora.max_lora_rank}")
    t.add_row("  activation peak", gib(mem.activation_bytes), escape(notes.get("activation", "")))
    if plan.multimodal is not None and plan.multimodal.profile_items:
        mm = plan.multimodal
        t.add_row("    of which image encoder", gib(mm.profile_bytes),
                  f"{mm.profile_items} dummy {mm.modality}(s), "
                  f"budget {mm.encoder_budget_tokens:,} tokens")
    t.add_row("  non-torch", gib(mem.non_torch_bytes), escape(notes.get("non_torch", "")))
    if "cudagraph" in notes:
        t.add_row("  CUDA graphs", gib(mem.cudagraph_bytes), escape(notes["cudagraph"]))
    if mem.kv_shortfall_bytes:
        t.add_row("  [bold]KV cache[/]", "[bold red]none[/]",
                  f"{gib(mem.kv_shortfall_bytes)} short: {plan.engine.label} does not start")
    else:
        t.add_row("  [bold]KV cache[/]", f"[bold]{gib(mem.kv_cache_bytes)}[/]",
                  escape(notes.get("kv", "")))
    console.print(t)

    kv = plan.kv_cache
    k = Table(title="KV cache", title_justify="left", show_edge=False)
    k.add_column("quantity")
    k.add_column("value", justify="right")
    k.add_row("bytes per token (per GPU)", f"{kv.bytes_per_token:,}")
    k.add_row("block size (tokens)", f"{kv.block_size}")
    k.add_row("blocks", f"{kv.num_blocks:,}")
    k.add_row(notes.get("kv_tokens_label", "KV cache size"), f"[bold]{kv.tokens:,} tokens[/]")
    if plan.served is not None:  # the engine's profile at the line's own settings
        k.add_row(f"  {plan.served.label(plan.engine.knobs)}",
                  f"[bold]{plan.served.kv_cache.tokens:,} tokens[/]")
    k.add_row(f"max concurrency at {d['max_model_len'].value} tokens",
              f"[bold]{kv.max_concurrency:,.2f}x[/]")
    k.add_row("KV per max-length request", gib(kv.bytes_per_request))
    k.add_row(f"largest {plan.engine.knob('max_model_len')} that fits", f"{kv.max_model_len_fit:,}")
    if kv.effective_max_concurrency_with_prefix is not None:
        k.add_row(f"max concurrency sharing a {plan.workload.prefix_tokens():,}-token prefix",
                  f"{kv.effective_max_concurrency_with_prefix:,.2f}x")
    if plan.multimodal is not None:
        mm = plan.multimodal
        k.add_row(f"{mm.modality}s per prompt (--limit-mm-per-prompt, {mm.limit_source})",
                  f"{mm.limit_per_prompt} × {mm.max_tokens_per_item:,} tokens")
        if mm.max_concurrency_with_images is not None:
            k.add_row(f"max concurrency, {mm.images_per_request} {mm.modality}(s) + "
                      f"{(mm.request_tokens or 0) - mm.image_tokens_per_request:,} text tokens "
                      "per request", f"[bold]{mm.max_concurrency_with_images:,.2f}x[/]")
    if plan.offload is not None:
        o = plan.offload
        k.add_row(f"host tier ({o.backend} offload, {gib(o.host_bytes_per_worker)} per GPU)",
                  f"{o.cpu_tokens:,} tokens")
    if plan.lora is not None:
        k.add_row(f"LoRA host cache ({plan.lora.max_cpu_loras} adapters, per GPU worker)",
                  gib(plan.lora.host_bytes_per_worker))
    console.print(k)

    r = Table(title="Recommendations", title_justify="left", show_edge=False)
    r.add_column("setting")
    r.add_column("value", justify="right")
    r.add_column("why")
    for name, rec in plan.recommendations:
        if rec is None:
            continue
        r.add_row(plan.engine.knob(name), plain_number(rec.value),
                  escape(rec.reason))
    console.print(r)
    if plan.performance is not None:
        performance_table(plan, console)
    if plan.traffic is not None:
        traffic_table(plan.traffic, console)
    for p in plan.problems:
        style = {"error": "red", "warning": "yellow"}.get(p.severity, "dim")
        console.print(f"[{style}]{p.severity}[/] {escape(f'[{p.code}]')} {escape(p.message)}")
    console.print("\n[bold]Serve command[/]")
    console.print(plan.command, markup=False, soft_wrap=True)
    _node_lines(plan, console)


def price_label(source: str) -> str:
    """A price's source as the tables print it: the provider and tier a bundled row names in
    parentheses after its URL ("Crusoe Cloud on-demand"; --json keeps the URL); any other URL by its
    host; a file:line as it is. A bundled default says "(default)"."""
    default = source.endswith("(kvplan default)")
    s = source.removesuffix("(kvplan default)").strip()
    provider = price_provider(s)
    if provider:
        s = provider
    elif s.startswith(("http://", "https://")):
        s = s.split("/")[2]
    return s + (" (default)" if default else "")


def performance_title(plan: Plan) -> str:
    """The performance table's title: the workload, the concurrency and whether the figures
    are calibrated (every view of a plan that shows them says it the same way)."""
    pf = plan.performance
    assert pf is not None
    how = ("workload" if pf.workload_source == "cli" else
           "kvplan's default workload (pass --avg-input-tokens/--avg-output-tokens)")
    user = pf.calibration if (pf.calibration or "").startswith("user file") else None
    cal = (f"calibrated: {user}" if user else "calibrated" if pf.calibrated else
           f"not calibrated: {pf.not_calibrated_because or 'this GPU family × engine'}")
    if pf.ttft_borrowed_from and not user:
        cal += f"; TTFT terms {pf.ttft_borrowed_from}'s"
    cached = f" ({pf.cached_tokens:,} cached)" if pf.cached_tokens else ""
    # a replica of the step model is one DP rank (docs/expert-parallel.md): TP × PP GPUs, those
    # its per-GPU figure divides by (perf/step.py evaluate); say when that is not all of them
    tp, pp = (plan.inputs[k].value for k in ("tensor_parallel_size", "pipeline_parallel_size"))
    gpus = tp * pp if isinstance(tp, int) and isinstance(pp, int) else plan.gpu.count
    part = (f" ({gpus} of the deployment's {plan.gpu.count} GPUs)"
            if 0 < gpus < plan.gpu.count else "")
    return (f"Performance per replica{part}: {pf.input_tokens:,} in{cached} / "
            f"{pf.output_tokens:,} out tokens, {pf.concurrency} concurrent ({how}; {cal})")


def performance_table(plan: Plan, console: Console) -> None:
    """Latency and throughput at the workload's concurrency, then versus concurrency."""
    from rich.markup import escape
    from rich.table import Table

    pf = plan.performance
    assert pf is not None
    t = Table(title=performance_title(plan),
              title_justify="left", caption=f"harness: {escape(CLOSED_LOOP_HARNESS)}"
              + (f"\ncoefficients: {escape(pf.calibration)}" if pf.calibration else ""),
              caption_justify="left", show_edge=False)
    t.add_column("figure")
    t.add_column("predicted", justify="right")
    t.add_column("range", justify="right")
    for row in figure_rows(pf):
        t.add_row(*row)
    console.print(t)
    if pf.measured_check:  # the band's widening by never-fitted runs like this deployment
        console.print(f"Measured: {escape(pf.measured_check)}")
    if pf.routed_experts and pf.routed_experts.public_check:  # the band's MoE widening
        console.print(f"MoE model: {escape(pf.routed_experts.public_check)}")
    if pf.routed_experts and pf.routed_experts.layer_floors:
        console.print(escape(pf.routed_experts.layer_floors))
    if pf.routed_experts and pf.routed_experts.padding:
        console.print(escape(pf.routed_experts.padding))
    if pf.percentiles:
        _percentile_table(pf, console)
    _concurrency_table(pf, console)


def figure_rows(pf: Performance) -> list[tuple[str, str, str]]:
    """(figure, predicted, range) rows of the performance table."""
    rows: list[tuple[str, str, str]] = []

    def add(figure: str, predicted: str, band: str) -> None:
        rows.append((figure, predicted, band))

    slo_t = f" (target {pf.slo_ttft_ms:g})" if pf.slo_ttft_ms else ""
    slo_p = f" (target {pf.slo_tpot_ms:g})" if pf.slo_tpot_ms else ""
    add(f"TTFT, ms{slo_t}", f"{pf.ttft_ms:,.0f}",
        f"{pf.ttft_ms_low:,.0f}–{pf.ttft_ms_high:,.0f}")
    add(f"TPOT, ms{slo_p}", f"{pf.tpot_ms:,.1f}",
        f"{pf.tpot_ms_low:,.1f}–{pf.tpot_ms_high:,.1f}")
    add("end-to-end, s", f"{pf.e2e_ms / 1000:,.1f}", "")
    add("output tokens/s", f"{pf.output_tokens_per_s:,.0f}",
        f"{pf.output_tokens_per_s_low:,.0f}–{pf.output_tokens_per_s_high:,.0f}")
    add("output tokens/s per GPU", f"{pf.output_tokens_per_s_per_gpu:,.0f}", "")
    add("requests/s", f"{pf.requests_per_s:,.2f}", "")
    if pf.routed_experts:  # a MoE model: measured kernel rate (which table) or dense rate
        x = pf.routed_experts
        add("routed experts", "measured" if x.rate == "measured" else "dense rate",
        x.table or "extrapolated")
    if pf.tokens_per_step is not None:
        src = "given" if pf.acceptance_rate_source == "cli" else "assumed"
        add("speculative: tokens per step", f"{pf.tokens_per_step:,.2f}",
        f"acceptance {pf.acceptance_rate:g} ({src})")
        even = pf.break_even_acceptance_rate
        add("speculative: pays above acceptance",
        "never" if even is None else f"{even:g}", "at this concurrency")
    if pf.cost_per_hour is not None:
        add("$ per hour", f"{pf.cost_per_hour:,.2f}", price_label(pf.price_source or ""))
    else:  # no bundled price for this GPU: say so rather than drop the line
        add("$ per hour", "—", "no default price: pass --gpu-hour-price")
    if pf.cost_per_million_output_tokens is not None:
        add("$ per million output tokens", f"{pf.cost_per_million_output_tokens:,.3f}", "")
    return rows


# The closed loop's figures versus concurrency as every view shows them (`plan`'s table, the
# report's data table): the head, and concurrency_rows' cells; the legend of their ✗ marks.
CONCURRENCY_HEAD = ("concurrent", "running", "TTFT ms", "TPOT ms", "tokens/s", "bound")
CONCURRENCY_MISS = "✗ = misses a latency target"


def concurrency_rows(pf: Performance) -> list[tuple[str, ...]]:
    """One row per closed-loop concurrency (lowest first), rounded as `kvplan plan` prints
    them, a ✗ on each figure that misses its target."""
    rows: list[tuple[str, ...]] = []
    for p in sorted(pf.by_concurrency, key=lambda x: x.concurrency):
        # each figure carries its own mark: the one that misses its target
        ttft_mark = " ✗" if pf.slo_ttft_ms is not None and p.ttft_ms > pf.slo_ttft_ms else ""
        tpot_mark = " ✗" if pf.slo_tpot_ms is not None and p.tpot_ms > pf.slo_tpot_ms else ""
        rows.append((f"{p.concurrency:,}", f"{p.running:,}", f"{p.ttft_ms:,.0f}{ttft_mark}",
                     f"{p.tpot_ms:,.1f}{tpot_mark}", f"{p.output_tokens_per_s:,.0f}",
                     "prefill" if p.saturated else p.decode_bound))
    return rows


def _concurrency_table(pf: Performance, console: Console) -> None:
    """The closed loop's figures versus concurrency, a ✗ on each that misses its target."""
    from rich.table import Table

    c = Table(title="Versus concurrency (closed loop)", title_justify="left", show_edge=False)
    for col in CONCURRENCY_HEAD:
        c.add_column(col, justify="right")
    for row in concurrency_rows(pf):
        c.add_row(*row)
    console.print(c)
    if pf.slo_ttft_ms or pf.slo_tpot_ms:
        console.print(CONCURRENCY_MISS)


def traffic_table(tp: TrafficPlan, console: Console) -> None:
    """Replicas per interval of a rate curve, GPUs and cost per day, autoscaler values."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"Traffic curve ({escape(tp.harness)})", title_justify="left",
              show_edge=False)
    for col in ("time, h", "req/s", "replicas", "GPUs"):
        t.add_column(col, justify="right")
    for i in tp.intervals:
        t.add_row(f"{i.time:g}", f"{i.requests_per_s:,.2f}",
                  *(("✗", "✗") if i.replicas is None else (f"{i.replicas}", f"{i.gpus}")))
    console.print(t)
    if any(i.replicas is None for i in tp.intervals):
        console.print("✗ = no replica count meets the SLOs at this rate", markup=False)
    console.print(traffic_summary(tp, "$"), markup=False)
    a = tp.autoscaler
    if not a:
        return
    metrics = a.get("metrics") or []
    targets = "; ".join(f"{m['name']} target {m['target']:g} per replica" for m in metrics)
    console.print(f"autoscaler: {a.get('min_replicas')}–{a.get('max_replicas')} replicas"
                  + (f"; {targets}" if targets else "")
                  + (" (the intervals a fleet serves)" if tp.unmet_intervals else "")
                  + (f"; min {a['min_replicas_why']}" if a.get("min_replicas_why") else ""),
                  markup=False)


def traffic_summary(tp: TrafficPlan, currency: str) -> str:
    """The fleet over a rate curve: peak / mean / p95 GPUs, GPU-hours and cost per day; none
    when an interval cannot be served within the SLOs (plan and report say it alike)."""
    if tp.unmet_intervals:
        return (f"GPUs: no replica count meets the SLOs at {tp.unmet_intervals} of "
                f"{len(tp.intervals)} intervals, so the curve has no fleet size or cost")
    cost = f", {currency}{tp.cost_per_day:,.2f} per day" if tp.cost_per_day is not None else ""
    return (f"GPUs: peak {tp.peak_gpus}, mean {tp.mean_gpus:g}, p95 {tp.p95_gpus:g}; "
            f"{tp.gpu_hours_per_day:,.1f} GPU-hours per day{cost}")


def _percentile_table(pf: Performance, console: Console) -> None:
    """The simulated percentiles, the harness they assume, and the replicas for a rate."""
    from rich.markup import escape
    from rich.table import Table

    q = pf.slo_percentile
    t = Table(title=f"Simulated ({escape(pf.harness)}; {escape(pf.lengths or '')})",
              title_justify="left", show_edge=False)
    for col in ("ms", "p50", "p90", "p99", "mean"):
        t.add_column(col, justify="right" if col != "ms" else "left")
    targets = {"ttft_ms": pf.slo_ttft_ms, "tpot_ms": pf.slo_tpot_ms}
    for key, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"),
                       ("e2e_ms", "end-to-end")):
        row = (pf.percentiles or {}).get(key, {})
        target = targets.get(key)
        cells = []
        for p in ("p50", "p90", "p99", "mean"):
            v = row.get(p, 0.0)
            miss = target is not None and p == f"p{q}" and v > target
            cells.append(f"{v:,.1f}" + (" ✗" if miss else ""))
        t.add_row(label + (f" (target {target:g} at p{q})" if target else ""), *cells)
    console.print(t)
    if pf.replicas is not None and pf.request_rate is not None:
        gpus = f", {pf.gpus_for_rate} GPUs" if pf.gpus_for_rate else ""
        cost = f", ${pf.cost_per_day:,.2f} per day" if pf.cost_per_day is not None else ""
        head = f", headroom {pf.headroom:.0%}" if pf.headroom is not None else ""
        ok = "" if pf.meets_slo_at_percentile in (None, True) else " (SLOs not met)"
        console.print(f"replicas for {pf.request_rate:g} req/s: {pf.replicas}{ok}{gpus}{cost}"
                      f" — {pf.load_per_replica_rps:.4g} req/s per replica of "
                      f"{pf.capacity_rps_per_replica:.4g} at most{head}")


def compare_table(plans: list[Plan], console: Console,
                  refused: Sequence[tuple[str, str, str | None]] = ()) -> None:
    """One column per engine: capacity and the recommended knobs in each engine's own names;
    then the engines that refuse the deployment (label, message, hint)."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"{escape(plans[0].model.id)} on {plans[0].gpu.name}",
              title_justify="left", show_edge=False)
    t.add_column("")
    for p in plans:
        t.add_column(f"{p.engine.label} {p.engine.version}", justify="right")
    for label, cells in _compare_rows(plans):
        t.add_row(label, *cells)
    console.print(t)
    _compare_notes(plans, console)
    for label, message, hint in refused:
        console.print(f"[red]not planned[/] {escape(label)}: {escape(message)}"
                      + (f" ({escape(hint)})" if hint else ""))


def _compare_rows(plans: list[Plan]) -> list[tuple[str, list[str]]]:
    """compare_table's rows: capacity, the latency model's figures, the recommended knobs."""
    rows = [
        ("fits", ["[green]yes[/]" if p.fits else "[red]no[/]" for p in plans]),
        ("GPUs (TP × PP × DP)", [
            f"{p.gpu.count} ({p.inputs['tensor_parallel_size'].value} × "
            f"{p.inputs['pipeline_parallel_size'].value} × {p.inputs['data_parallel_size'].value})"
            for p in plans]),
        ("weights / GPU", [gib(p.memory.weights_bytes) for p in plans]),
        ("KV cache / GPU", [f"none ({gib(p.memory.kv_shortfall_bytes)} short)"
                            if p.memory.kv_shortfall_bytes else gib(p.memory.kv_cache_bytes)
                            for p in plans]),
        ("KV bytes / token", [f"{p.kv_cache.bytes_per_token:,}" for p in plans]),
        ("KV tokens", [f"{p.kv_cache.tokens:,}" for p in plans]),
        ("context length", [f"{p.inputs['max_model_len'].value:,}" for p in plans]),
        ("concurrency", [f"{p.kv_cache.max_concurrency:,.2f}x" for p in plans]),
    ]
    if any(p.performance for p in plans):  # the latency model at each plan's own concurrency
        perf = [p.performance for p in plans]
        rows += [
            ("TPOT ms", [f"{x.tpot_ms:,.1f} at {x.concurrency}" if x else "—" for x in perf]),
            ("TTFT ms", [f"{x.ttft_ms:,.0f}" if x else "—" for x in perf]),
            ("tokens/s", [f"{x.output_tokens_per_s:,.0f}" if x else "—" for x in perf]),
            ("$/M tokens", [f"{x.cost_per_million_output_tokens:,.3f}"
                            if x and x.cost_per_million_output_tokens is not None else "—"
                            for x in perf]),
            # every latency figure says whether it was fitted here (the reason: --json's
            # performance.not_calibrated_because, and kvplan plan's header)
            ("latency model", [("calibrated" if x.calibrated else "extrapolated") if x else "—"
                               for x in perf]),
        ]
        rows += _compare_rate_rows(perf)
    for name, label in (("max_model_len", "rec. length"), ("max_num_seqs", "rec. max requests"),
                        ("gpu_memory_utilization", "rec. memory fraction")):
        rows.append((label, ["—" if getattr(p.recommendations, name).value is None
                             else f"{getattr(p.recommendations, name).value:,g}"
                             for p in plans]))
    return rows + _rec_tp_row(plans)


def _compare_rate_rows(perf: list[Performance | None]) -> list[tuple[str, list[str]]]:
    """With --request-rate: the replicas each engine needs for the rate, its GPUs and $/day,
    and the simulated TTFT / TPOT at the SLO percentile (p99 without one)."""
    if not any(x and x.replicas is not None for x in perf):
        return []
    q = next((x.slo_percentile for x in perf if x and x.slo_percentile), None) or 99

    def pct(x: Performance | None, metric: str) -> str:
        stats = (x.percentiles or {}).get(metric) if x else None
        return f"{stats[f'p{q}']:,.1f}" if stats and f"p{q}" in stats else "—"

    rate = next(x.request_rate for x in perf if x and x.request_rate)
    return [
        (f"replicas for {rate:g} req/s", [f"{x.replicas} ({x.gpus_for_rate} GPUs)"
                                          if x and x.replicas is not None else "—"
                                          for x in perf]),
        (f"p{q} TTFT ms (simulated)", [pct(x, "ttft_ms") for x in perf]),
        (f"p{q} TPOT ms (simulated)", [pct(x, "tpot_ms") for x in perf]),
        ("$/day", [f"{x.cost_per_day:,.0f}" if x and x.cost_per_day is not None else "—"
                   for x in perf]),
    ]


def _rec_tp_row(plans: list[Plan]) -> list[tuple[str, list[str]]]:
    """A "rec. TP" row when some column's TP leaves no KV cache: its rec. rows (and serve
    line) are at the TP recommended there, and the row says which."""
    moved = [p.recommendations.tensor_parallel_size.value for p in plans]
    if not any(v and v != p.inputs["tensor_parallel_size"].value
               for v, p in zip(moved, plans, strict=True)):
        return []
    return [("rec. TP", [plain_number(v) for v in moved])]


def _compare_notes(plans: list[Plan], console: Console) -> None:
    """Below compare_table: each engine's flag names, a TP caveat, the commands and problems."""
    from rich.markup import escape

    names = ("max_model_len", "max_num_seqs", "gpu_memory_utilization")
    for p in plans:  # an engine without TTFT rows of its own: whose TTFT terms it uses
        lender = p.performance.ttft_borrowed_from if p.performance else None
        if lender:
            console.print(f"TTFT of {p.engine.label}: {lender}'s request and queueing terms "
                          f"(no {p.engine.label} TTFT measurements)", markup=False, style="dim")
    for p in plans:  # the rec. rows in each engine's own flags
        flags = " / ".join(p.engine.knobs.get(n, n) for n in names)
        console.print(f"rec. rows for {p.engine.label}: {flags}", markup=False, style="dim")
    sizes = {p.inputs["tensor_parallel_size"].value for p in plans}
    if len(sizes) > 1:
        each = ", ".join(f"{p.engine.label} {p.inputs['tensor_parallel_size'].value}"
                         for p in plans)
        console.print(f"[yellow]note[/] the engines are planned at different tensor_parallel_size "
                      f"({each}): the smallest at which each fits (and holds the target, "
                      "if one does); per-GPU rows are not "
                      "comparable across them (pass --tensor-parallel-size to fix one)")
    for p in plans:
        console.print(f"\n[bold]{p.engine.label}[/]")
        console.print(p.command, markup=False, soft_wrap=True)
        for x in p.problems:
            if x.severity != "info":
                console.print(f"  {x.severity}: {escape(x.message)}")


def attention_layout(m: ModelSpec) -> str:
    """'GQA 32/8', 'MLA 512+64', 'GQA 64/8: 12 sliding(128) + 12 full', 'GDN 36 + GQA 16/2 12'."""
    if m.mla is not None:
        base = f"MLA {m.mla.kv_lora_rank}+{m.mla.qk_rope_head_dim}"
    elif m.num_kv_heads == 1:
        base = "MQA"
    elif m.num_kv_heads == m.num_attention_heads:
        base = "MHA"
    else:
        base = f"GQA {m.num_attention_heads}/{m.num_kv_heads}"
    if not m.layer_types:
        return base
    counts = {k: m.layer_types.count(k) for k in ("linear", "sliding", "chunked", "full", "none")}
    parts = []
    if counts["linear"]:
        kind = m.linear_attention.kind if m.linear_attention else "gated_deltanet"
        parts.append(f"{counts['linear']} "
                     + {"gated_deltanet": "GDN"}.get(kind, kind.capitalize()))
    if counts["sliding"]:
        parts.append(f"{counts['sliding']} sliding({m.sliding_window})")
    if counts["chunked"]:
        parts.append(f"{counts['chunked']} chunked({m.attention_chunk_size})")
    if counts["full"]:
        parts.append(f"{counts['full']} full")
    if counts["none"]:
        parts.append(f"{counts['none']} MLP-only")
    return f"{base}: " + " + ".join(parts)


def _fit_columns(console: Console, columns: list[tuple[str, list[str], str]],
                 required: int = 1) -> list[int]:
    """Indices of the columns to show, in priority order (the first — the id — always): each
    column is (header, cells, justify); optional ones are added while the table still fits the
    console's width (80 in a pipe), so no cell is ever wrapped or cut."""
    def width(k: int) -> int:
        header, cells, _ = columns[k]
        return max([len(header), *map(len, cells)]) + 2  # one space each side

    keep = list(range(required))
    used = sum(width(k) for k in keep) - 2  # no padding at the table's edges
    for k in range(required, len(columns)):
        if used + width(k) <= console.width:
            keep.append(k)
            used += width(k)
    return sorted(keep)


def _print_table(console: Console, columns: list[tuple[str, list[str], str]], *,
                 tsv: bool, priority: list[int] | None = None, required: int = 1,
                 every_column: str = "--format tsv") -> None:
    """A table that stays usable at 80 columns and in pipes (ids never wrapped or cut; less
    important columns dropped), or TSV with every column for scripts. `every_column`: the
    command's option that shows every column (named when some are dropped)."""
    if tsv:
        import sys

        rows = zip(*(cells for _, cells, _ in columns), strict=True)
        sys.stdout.write("\t".join(h for h, _, _ in columns) + "\n")
        sys.stdout.write("".join("\t".join(r) + "\n" for r in rows))
        return
    from rich.console import Console
    from rich.table import Table

    order = priority or list(range(len(columns)))
    chosen = _fit_columns(console, [columns[k] for k in order], required)
    shown = sorted(order[k] for k in chosen)
    t = Table(show_edge=False, box=None, pad_edge=False, header_style="bold")
    for k in shown:
        header, _, justify = columns[k]
        t.add_column(header, justify=justify, no_wrap=True,  # type: ignore[arg-type]
                     min_width=max([len(header), *map(len, columns[k][1])]))
    for r in zip(*(columns[k][1] for k in shown), strict=True):
        t.add_row(*r)
    needed = sum(max([len(columns[k][0]), *map(len, columns[k][1])]) + 2 for k in shown) - 2
    # Required columns wider than the console (a long file path) overflow rather than cut an id
    # or drop a required column: rendered at their width (Console.print caps `width` at the
    # console's, so a console of that width renders it).
    out = console if needed <= console.width else Console(
        width=needed, file=console.file, force_terminal=console.is_terminal,
        color_system=console.color_system,  # type: ignore[arg-type]  # str of those names
        no_color=console.no_color)
    out.print(t, markup=False, crop=False)
    hidden = [columns[k][0] for k in range(len(columns)) if k not in shown]
    if hidden:  # said on a terminal; in a pipe or a CI log on stderr, so stdout keeps the table
        note = (f"(not shown at {console.width} columns: {', '.join(hidden)}; "
                f"{every_column} has every column)")
        if console.is_terminal:
            console.print(note, style="dim", markup=False)
        else:  # wrapped at the console's width, as the terminal's line is
            import sys
            import textwrap

            sys.stderr.write(textwrap.fill(note, console.width, break_long_words=False,
                                           break_on_hyphens=False) + "\n")


def models_table(rows: list[tuple[CatalogEntry, ModelSpec, int, int]], console: Console, *,
                 tsv: bool = False) -> None:
    attn, weights = [], []
    for _, m, _, _ in rows:
        a = attention_layout(m)
        if m.moe:
            a += f", MoE {m.moe.num_experts}×top{m.moe.top_k}"
        if m.vision:
            a += ", vision"
        attn.append(a)
        weights.append(m.quantization.method if m.quantization else m.dtype)
    columns = [
        ("id", [e.id for e, _, _, _ in rows], "left"),
        ("params", [f"{p / 1e9:,.2f}B" for _, _, p, _ in rows], "right"),
        ("max len", [f"{max(m.max_len_keys.values(), default=0):,}" for _, m, _, _ in rows],
         "right"),
        ("KV B/token", [f"{kv:,}" for _, _, _, kv in rows], "right"),
        ("weights", weights, "left"),
        ("family", [m.model_type for _, m, _, _ in rows], "left"),
        ("aliases", [", ".join(e.aliases) for e, _, _, _ in rows], "left"),
        ("attention", attn, "left"),
    ]
    _print_table(console, columns, tsv=tsv, priority=[0, 1, 3, 2, 4, 5, 6, 7])


def gpus_table(gpus: list[GpuSpec], console: Console, *, tsv: bool = False) -> None:
    columns = [
        ("id", [g.id for g in gpus], "left"),
        ("CUDA total", ["?" if g.cuda_total_bytes is None else f"{g.cuda_total_bytes / GiB:.2f} GiB"
                        + ("*" if g.cuda_total_estimated else "") for g in gpus], "right"),
        ("cc", [g.compute_capability or "?" for g in gpus], "left"),
        ("bf16 TFLOPS", [f"{g.tflops.bf16:g}" if g.tflops.bf16 else "—" for g in gpus], "right"),
        ("fp8", ["yes" if g.fp8_native else "no" for g in gpus], "left"),
        ("BW TB/s", [f"{g.bandwidth_tbps:g}" if g.bandwidth_tbps else "?" for g in gpus], "right"),
        ("name", [g.device_name for g in gpus], "left"),
        ("nvidia-smi", [f"{g.smi_total_mib} MiB" if g.smi_total_mib else "?" for g in gpus],
         "right"),
        ("aliases", [", ".join(g.aliases) for g in gpus], "left"),
    ]
    _print_table(console, columns, tsv=tsv)
    if not tsv and any(g.cuda_total_estimated for g in gpus):
        console.print("* estimated: pass --gpu-memory-gib with the total your engine log prints",
                      markup=False)


def _print_fields(console: Console, fields: list[tuple[str, str]], *, tsv: bool) -> None:
    """`kvplan models show` / `gpus show`: one `field  value` line each (TSV: field<TAB>value)."""
    if tsv:
        import sys

        sys.stdout.write("".join(f"{k}\t{v}\n" for k, v in fields))
        return
    from rich.table import Table

    t = Table(show_header=False, show_edge=False, box=None, pad_edge=False)
    t.add_column("field", style="bold", no_wrap=True)
    t.add_column("value", overflow="fold")
    for k, v in fields:
        t.add_row(k, v)
    console.print(t, markup=False)


def model_detail(entry: CatalogEntry, m: ModelSpec, params: int, console: Console, *,
                 tsv: bool = False) -> None:
    q = m.quantization
    fields = [
        ("id", entry.id), ("aliases", ", ".join(entry.aliases) or "—"),
        ("family", f"{m.model_type} ({', '.join(m.architectures)})"),
        ("parameters", f"{params:,} ({params / 1e9:,.2f}B); published: {entry.params_published}"),
        ("layers", str(m.num_layers)), ("hidden size", str(m.hidden_size)),
        ("attention", attention_layout(m)),
        ("heads/KV/head dim", f"{m.num_attention_heads} / {m.num_kv_heads} / {m.head_dim}"),
        ("vocabulary", f"{m.vocab_size:,}"),
        ("max length", ", ".join(f"{k} {v:,}" for k, v in m.max_len_keys.items()) or "—"),
        ("weights", f"{q.method} ({m.dtype} elsewhere)" if q else m.dtype),
    ]
    if m.moe:
        fields.append(("experts", f"{m.moe.num_experts}, top-{m.moe.top_k}"))
    if m.vision:
        fields.append(("vision", "yes (encoder counted)"))
    fields += [("config", entry.config_source), ("config status", entry.config_status)]
    if entry.notes:
        fields.append(("notes", entry.notes))
    fields.append(("plan it", f"kvplan plan {entry.id} --gpu h100"))
    _print_fields(console, fields, tsv=tsv)


def gpu_detail(g: GpuSpec, console: Console, *, tsv: bool = False) -> None:
    t = g.tflops
    tf = ", ".join(f"{k} {v:g}" for k, v in t.model_dump().items() if v) or "?"
    fields = [
        ("id", g.id), ("name", f"{g.name} ({g.vendor} {g.arch})"),
        ("aliases", ", ".join(g.aliases) or "—"),
        ("nvidia-smi names", ", ".join(g.smi_names) or "—"),
        ("compute capability", g.compute_capability or "?"),
        ("CUDA total", "?" if g.cuda_total_bytes is None else
         f"{g.cuda_total_bytes:,} B = {g.cuda_total_bytes / GiB:.2f} GiB"
         + (" (estimated)" if g.cuda_total_estimated else "")),
        ("CUDA total source", g.cuda_total_source),
        ("nvidia-smi total", f"{g.smi_total_mib} MiB" if g.smi_total_mib else "?"),
        ("bandwidth", f"{g.bandwidth_tbps:g} TB/s" if g.bandwidth_tbps else "?"),
        ("dense TFLOPS", tf),
        ("native bf16 / fp8",
         f"{'yes' if g.bf16_native else 'no'} / {'yes' if g.fp8_native else 'no'}"),
        ("interconnect", (f"NVLink {g.nvlink_gbps_per_gpu:g} GB/s" if g.nvlink_gbps_per_gpu
                          else "PCIe")
         + (f", PCIe gen {g.pcie_gen}" if g.pcie_gen else "")),
    ]
    if g.sources:
        fields.append(("sources", "; ".join(g.sources)))
    if g.notes:
        fields.append(("notes", g.notes))
    _print_fields(console, fields, tsv=tsv)


def check_table(report: CheckReport, console: Console) -> None:
    """One row per deployment found, then each deployment's problems and policy violations."""
    from rich.markup import escape

    cells: dict[str, list[str]] = {k: [] for k in ("where", "model", "status", "problems",
                                                   "KV tokens", "concurrency", "GPU")}
    for d in report.deployments:
        p = d.plan
        shown = [x for x in [*d.problems, *d.policy_violations]  # the lines printed below
                 if not (x.severity == "info" and d.status == "fits")]
        cells["where"].append(f"{d.file}:{d.line}")
        cells["model"].append(d.model or "?")
        cells["status"].append(d.status)
        cells["problems"].append(str(len(shown)))
        cells["KV tokens"].append(f"{p.kv_cache.tokens:,}" if p else "—")
        cells["concurrency"].append(f"{p.kv_cache.max_concurrency:.2f}x" if p else "—")
        cells["GPU"].append(f"{p.gpu.count} × {p.gpu.id}" if p else (d.gpu or "?"))
    right = {"problems", "KV tokens", "concurrency"}
    # `where` (the id) and its verdict are always shown; then the model when it fits 80 columns
    # beside them (a long path and a long model id often do not), and so on; the rest are named
    _print_table(console, [(k, v, "right" if k in right else "left") for k, v in cells.items()],
                 tsv=False, priority=[0, 2, 1, 3, 4, 5, 6], required=2, every_column="--json")
    for d in report.deployments:
        for x in [*d.policy_violations, *d.problems]:
            if x.severity == "info" and d.status == "fits":
                continue
            style = {"error": "red", "warning": "yellow"}.get(x.severity, "dim")
            console.print(f"{escape(f'{d.file}:{d.line}')} [{style}]{x.severity}[/] "
                          f"{escape(f'[{x.code}]')} {escape(x.message)}")
    s = report.summary
    console.print(s.sentence())


def _gh_escape(text: str, prop: bool = False) -> str:
    """GitHub workflow-command escaping (%, CR, LF; plus : and , in properties)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github_annotations(report: CheckReport) -> str:
    """`::error file=…,line=…,title=…::message` lines for GitHub Actions, one per problem that
    needs attention, and a `::notice` per deployment that fits."""
    lines = []
    for d in report.deployments:
        where = f"file={_gh_escape(d.file, True)},line={d.line}"
        p = d.plan
        for x in [*d.policy_violations, *d.problems]:
            if x.severity == "info":
                continue
            level = "error" if x.severity == "error" else "warning"
            title = _gh_escape(f"kvplan {x.code}", True)
            lines.append(f"::{level} {where},title={title}::{_gh_escape(x.message)}")
        if d.status == "does-not-fit" and not any(x.severity == "error" for x in d.problems):
            lines.append(f"::error {where},title=kvplan does-not-fit::{_gh_escape(d.model or '?')} "
                         f"does not fit on {p.gpu.count if p else '?'} × {d.gpu}")
        if d.status == "fits" and p:
            lines.append(f"::notice {where},title=kvplan::{_gh_escape(d.model or '?')} fits on "
                         f"{p.gpu.count} × {p.gpu.id}: {p.kv_cache.tokens:,} KV tokens, "
                         f"{p.kv_cache.max_concurrency:.2f}x concurrency at max_model_len "
                         f"{p.inputs['max_model_len'].value}")
    s = report.summary
    lines.append(f"kvplan check: {s.sentence()}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------- sweep


def _fit_sweep_columns(cols: list[tuple[str, list[str], int, str]],
                       width: int) -> tuple[list[str], set[str]]:
    """Plain-text table lines: (header, cells, priority, justify '<' or '>'); the lowest
    priority columns are dropped until the table fits `width` (cells are never cut). Also the
    headers kept, so a legend explains only the columns shown."""
    cols = list(cols)

    def line_width(cs: list[tuple[str, list[str], int, str]]) -> int:
        return (sum(max(len(h), *(len(c) for c in cells)) for h, cells, _, _ in cs)
                + 2 * (len(cs) - 1))

    while len(cols) > 1 and line_width(cols) > width:
        drop = min(range(len(cols)), key=lambda i: (cols[i][2], -i))
        cols.pop(drop)
    widths = [max(len(h), *(len(c) for c in cells)) for h, cells, _, _ in cols]
    rows = len(cols[0][1])

    def fmt(values: list[str]) -> str:
        return "  ".join(f"{v:{j}{w}}"
                         for v, w, (_, _, _, j) in zip(values, widths, cols, strict=True)).rstrip()

    out = [fmt([h for h, _, _, _ in cols])]
    out += [fmt([c[1][r] for c in cols]) for r in range(rows)]
    return out, {h for h, _, _, _ in cols}


_SHORT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "fp8_e4m3": "e4m3",
          "fp8_e5m2": "e5m2"}


def _short(dtype: str) -> str:
    return _SHORT.get(dtype, dtype)


def _money(x: float | None) -> str:
    return "—" if x is None else f"{x:,.2f}"


def _fit(o: Option) -> str:
    """The sweep table's confidence cell: calibrated or extrapolated latency figures; "part"
    when the engine's own fit covers TPOT and throughput but its TTFT terms are borrowed."""
    if o.service is not None:  # a disaggregated service: the whole service's figures
        perf = o.service.performance
        return "—" if perf is None else "cal" if perf.calibrated else "ext"
    perf = getattr(o.plan, "performance", None)
    if o.calibrated and perf is not None and perf.ttft_borrowed_from:
        return "part"
    return "—" if o.calibrated is None else "cal" if o.calibrated else "ext"


def _band(o: Option) -> str:
    """The throughput band's half-width, ± % of the estimate."""
    low, high, point = o.output_tokens_per_s_low, o.output_tokens_per_s_high, \
        o.output_tokens_per_s
    return "—" if low is None or high is None or not point else f"±{(high - low) / 2 / point:.0%}"


def _option_label(o: Option) -> str:
    if o.service is not None:  # sweep --disagg: the service's xPyD
        return f"{o.gpu} ×{o.count} {o.service.disaggregated.ratio}"
    return f"{o.gpu} ×{o.count}"


def _option_command(o: Option) -> str:
    """The serve line(s) of an option: a disaggregated service's pools and router."""
    if o.service is None:
        return o.plan.command
    launch = o.service.disaggregated.launch
    text = f"prefill: {launch.prefill}\ndecode: {launch.decode}\nrouter: {launch.router}"
    return "\n  ".join(text.split("\n"))


# What the sweep table's columns mean, said only for the columns that fit the width.
_SWEEP_LEGEND = (
    ("headroom", "headroom: KV tokens at the engine's default memory fraction ÷ tokens the "
     "target needs (below 1×, the serve command lowers max_model_len if you did not set it, "
     "else raises the fraction)"),
    ("fit", "fit: cal = latency calibrated for this GPU architecture × engine, part = its "
     "TTFT terms borrowed from another engine, ext = extrapolated (also ~ after the rank; "
     "--json plan.performance.calibration says from what)"),
    ("band", "band: the throughput band's half-width, ± % of the estimate"),
    ("$/day", "$/day: the replicas --request-rate needs, what the order reads (simulated; e: "
     "estimated from throughput)"),
    ("P", "P: * = Pareto, no cheaper option has as much headroom"),
)
_SWEEP_WARNED = ("! after the rank: the plan carries warnings (e.g. a non-CUDA platform or an "
                 "estimated device total: see --json plan.problems)")


def sweep_text(result: SweepResult, *, width: int = 80, top: int = 10, commands: int = 3,
               misses: int = 5) -> str:
    """`kvplan sweep` for people: plain text, readable at `width` columns and in pipes."""
    import textwrap
    from collections import Counter

    t = result.target
    meeting = result.meeting
    missed = [o for o in result.options if not o.meets_target]
    want = []
    if t.target_concurrency:
        per = (t.avg_input_tokens or 0) + (t.avg_output_tokens or 0)
        want.append(f"{t.target_concurrency} concurrent" + (f" × {per:,} tokens" if per else ""))
    if t.max_model_len:
        want.append(f"max_model_len {t.max_model_len:,}")
    if t.slo_tpot_ms is not None:
        want.append(f"TPOT ≤ {t.slo_tpot_ms:g} ms")
    if t.slo_ttft_ms is not None:
        want.append(f"TTFT ≤ {t.slo_ttft_ms:g} ms")
    lines = textwrap.wrap(
        f"{result.model}: {result.candidates} candidates, {len(result.options)} planned, "
        f"{len(result.pruned)} pruned; {len(meeting)} meet the target"
        + (f" ({', '.join(want)})" if want else " (one request at max_model_len)"), width,
        subsequent_indent="  ", break_long_words=False)
    for note in result.notes:
        lines += textwrap.wrap("note: " + note, width, subsequent_indent="  ")
    lines.append("")

    def table(opts: list[Option], title: str) -> None:
        if not opts:
            return
        engines = len({o.engine for o in result.options}) > 1
        latency = result.latency_model
        # "!" after the rank (a column of its own was the first to go at 80 columns)
        warned = ["!" if any(p.severity == "warning" for p in o.plan.problems) else ""
                  for o in opts]
        ranked = [o.ranked(result.rank_on) for o in opts]  # what the order reads
        cols: list[tuple[str, list[str], int, str]] = [
            ("#", [f"{o.rank}{'~' if o.calibrated is False else ''}{w}"
                   for o, w in zip(opts, warned, strict=True)], 8, ">"),
            ("GPU × n", [_option_label(o) for o in opts], 10, "<"),
            ("TP×PP", [f"{o.tensor_parallel_size}×{o.pipeline_parallel_size}" for o in opts], 7,
             "<"),
        ]
        if engines:  # rows that differ only by engine are told apart by it: kept as the rank
            cols.append(("engine", [o.engine for o in opts], 8, "<"))
        cols += [
            ("weights/KV", [f"{_short(o.weights_format)}/"
                            f"{_short(str(o.plan.inputs['kv_cache_dtype'].value))}"
                            for o in opts], 7, "<"),
            ("KV tokens", [f"{o.kv_tokens:,}" for o in opts], 4, ">"),
            ("headroom", [f"{o.headroom:.2f}×" for o in opts], 9, ">"),
            ("$/hour", [_money(o.price_per_hour) for o in opts], 9, ">"),
        ]
        if any(o.cost_per_day_for_rate is not None for o in opts):  # --request-rate's order
            cols.append(("$/day", [_money(o.cost_per_day_for_rate)
                                   + ("" if o.replicas_simulated or o.cost_per_day_for_rate is None
                                      else "e") for o in opts], 10, ">"))
        # a latency the target bounds is kept before cost and headroom details
        if latency and t.slo_ttft_ms is not None:
            cols.append(("TTFT ms", ["—" if r[0] is None else f"{r[0]:,.0f}" for r in ranked],
                         7, ">"))
        if latency:
            cols += [("TPOT ms", ["—" if r[1] is None else f"{r[1]:.1f}" for r in ranked],
                      7 if t.slo_tpot_ms is not None else 5, ">"),
                     ("tok/s", ["—" if r[2] is None else f"{r[2]:,.0f}" for r in ranked], 4,
                      ">"),
                     ("$/M tok", [_money(r[3]) for r in ranked], 6, ">")]
            cols += [("fit", [_fit(o) for o in opts], 5, "<"),
                     ("band", [_band(o) for o in opts], 3, ">")]
        cols.append(("P", ["*" if o.pareto else "" for o in opts], 5, "<"))
        rows, shown = _fit_sweep_columns(cols, width)
        legend = [text for header, text in _SWEEP_LEGEND if header in shown]
        if latency and result.rank_on == "pessimistic" and shown & {"TPOT ms", "tok/s",
                                                                      "$/M tok"}:
            legend.insert(0, "latency, tok/s and $/M at the pessimistic end of their bands "
                          "(--rank-on point: the estimates)")
        if any(o.calibrated is False for o in opts) and "fit" not in shown:
            legend.append("~ after the rank: extrapolated latency (not calibrated)")
        if any(warned):
            legend.append(_SWEEP_WARNED)
        lines.extend(textwrap.wrap(title + (". " + "; ".join(legend) if legend else ""), width))
        lines.extend(rows)
        lines.append("")

    def price_line(opts: list[Option]) -> None:
        seen: dict[str, str] = {}
        for o in opts:
            if o.price_per_hour is None or o.gpu in seen:
                continue
            where = (price_label(o.price_source or "") if o.price_default else
                     (o.price_source or "").removeprefix("https://").removeprefix("http://"))
            seen[o.gpu] = (f"{o.gpu} {o.price_per_hour / o.count:,.2f}"
                           + (" (default: " if o.price_default else " (")
                           + ", ".join(x for x in (where, o.price_date) if x) + ")")
        if seen:
            lines.extend(textwrap.wrap("Prices, US$ per GPU-hour: " + "; ".join(seen.values()),
                                       width, subsequent_indent="  ", break_long_words=False))
            lines.append("")

    if meeting:
        shown = meeting[:top]
        price_line(shown)
        table(shown, f"Options that meet the target (best {len(shown)} of {len(meeting)})")
        lines.append("Serve commands")
        for o in meeting[:commands]:
            lines.append(f"#{o.rank} {_option_label(o)}:")
            cmd = _option_command(o)
            # a script of several lines (a quantizer recipe, a heredoc whose EOF must start its
            # line) is printed as it is, so that it pastes; one command line is indented
            lines.append(cmd if o.service is None and "\n" in cmd else f"  {cmd}")
        lines.append("")
    else:
        if missed:
            c = missed[0]
            lines += textwrap.wrap(
                f"Nothing meets this target; closest is {_option_label(c)} "
                f"TP{c.tensor_parallel_size}×PP{c.pipeline_parallel_size} ({c.engine}): "
                + "; ".join(c.shown_reasons), width,
                subsequent_indent="  ", break_long_words=False)
        else:
            lines.append("Nothing meets this target, and no candidate could be planned.")
        lines.append("")
    if missed:
        lines.append("Nearest misses")
        for o in missed[:misses]:
            head = (f"#{o.rank} {_option_label(o)} {o.tensor_parallel_size}×"
                    f"{o.pipeline_parallel_size} {o.engine}: ")
            why = o.shown_reasons or ["—"]
            lines += textwrap.wrap(head + "; ".join(why), width,
                                   subsequent_indent="    ", break_long_words=False)
        lines.append("")
    if result.pruned:
        kinds = Counter(p.kind.value for p in result.pruned)
        # each refusal once, with the GPUs it struck (a requested GPU planned on no engine is
        # named there); the memory prunes are one kind, said by their count
        refused: dict[str, set[str]] = {}
        for x in result.pruned:
            if x.kind.value != "memory":
                refused.setdefault(x.reason, set()).add(x.gpu)
        head = "Not planned: " + ", ".join(f"{n} ({k})" for k, n in kinds.most_common())
        if not refused:
            head += " — e.g. " + result.pruned[0].reason
        lines += textwrap.wrap(head, width, subsequent_indent="  ", break_long_words=False)
        for reason, gpus in list(refused.items())[:6]:
            lines += textwrap.wrap(f"{', '.join(sorted(gpus))}: {reason}", width,
                                   initial_indent="  ", subsequent_indent="    ",
                                   break_long_words=False)
        if len(refused) > 6:
            lines.append(f"  … {len(refused) - 6} more reasons (--json: pruned)")
    return "\n".join(lines).rstrip() + "\n"


def nodes_where(plan: Plan) -> str:
    """'2 nodes × 8 GPUs (system)': where a plan across nodes runs (plan and report say it
    alike)."""
    n = plan.nodes
    assert n is not None
    return f"{n.nodes} nodes × {n.gpus_per_node} GPUs" + (f" ({n.system})" if n.system else "")


def _node_lines(plan: Plan, console: Console) -> None:
    """A deployment over several nodes: its system shape and one launch line per node role."""
    n = plan.nodes
    if n is None or (n.nodes or 1) <= 1:
        return
    console.print(f"\n[bold]Across {nodes_where(plan)}[/]")
    if plan.performance is not None and plan.performance.links:
        console.print(f"links: {plan.performance.links}", markup=False, highlight=False)
    for line in n.launch:
        console.print(f"# {line.role}", markup=False, soft_wrap=True)
        console.print(line.command, markup=False, soft_wrap=True)
