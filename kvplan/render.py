"""Render a Plan (and the catalogues) for people: rich tables. JSON is Plan.model_dump_json."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .units import GiB

if TYPE_CHECKING:
    from rich.console import Console

    from .catalog import CatalogEntry
    from .check import CheckReport
    from .specs import GpuSpec, ModelSpec, Plan


def _gib(n: int) -> str:
    return f"{n / GiB:,.2f} GiB"


def _knob(plan: Plan, name: str) -> str:
    flag = plan.engine.knobs.get(name)
    return flag.removeprefix("--").replace("-", "_") if flag else name


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
        f"kv={d['kv_cache_dtype'].value}  {_knob(plan, 'max_model_len')}={d['max_model_len'].value} "
        f"({d['max_model_len'].source})  {_knob(plan, 'max_num_seqs')}={d['max_num_seqs'].value}  "
        f"{_knob(plan, 'max_num_batched_tokens')}={d['max_num_batched_tokens'].value}"
    )

    mem = plan.memory
    t = Table(title="Memory per GPU", title_justify="left", show_edge=False)
    t.add_column("component")
    t.add_column("size", justify="right")
    t.add_column("note")
    est = set(mem.estimated)
    t.add_row("device total (CUDA)", _gib(mem.total_bytes),
              "estimated" if "total_bytes" in est else d["gpu_total_bytes"].source)
    t.add_row("budget", _gib(mem.budget_bytes), notes.get("budget", ""))
    origin = "safetensors headers" if plan.model.weights_from == "headers" else "config"
    rounding_mib = (mem.weights_bytes - mem.weights_tensor_bytes) / 2**20
    rounding = f", {rounding_mib:,.0f} MiB rounding" if rounding_mib >= 0.5 else ""
    t.add_row("  weights", _gib(mem.weights_bytes), f"exact: {origin}, RoPE{rounding}")
    t.add_row("  activation peak", _gib(mem.activation_bytes), notes.get("activation", ""))
    t.add_row("  non-torch", _gib(mem.non_torch_bytes), notes.get("non_torch", ""))
    if "cudagraph" in notes:
        t.add_row("  CUDA graphs", _gib(mem.cudagraph_bytes), notes["cudagraph"])
    t.add_row("  [bold]KV cache[/]", f"[bold]{_gib(mem.kv_cache_bytes)}[/]", notes.get("kv", ""))
    console.print(t)

    kv = plan.kv_cache
    k = Table(title="KV cache", title_justify="left", show_edge=False)
    k.add_column("quantity")
    k.add_column("value", justify="right")
    k.add_row("bytes per token (per GPU)", f"{kv.bytes_per_token:,}")
    k.add_row("block size (tokens)", f"{kv.block_size}")
    k.add_row("blocks", f"{kv.num_blocks:,}")
    k.add_row(notes.get("kv_tokens_label", "KV cache size"), f"[bold]{kv.tokens:,} tokens[/]")
    k.add_row(f"max concurrency at {d['max_model_len'].value} tokens", f"[bold]{kv.max_concurrency:,.2f}x[/]")
    k.add_row("KV per max-length request", _gib(kv.bytes_per_request))
    k.add_row(f"largest {_knob(plan, 'max_model_len')} that fits", f"{kv.max_model_len_fit:,}")
    console.print(k)

    r = Table(title="Recommendations", title_justify="left", show_edge=False)
    r.add_column("setting")
    r.add_column("value", justify="right")
    r.add_column("why")
    for name, rec in plan.recommendations:
        r.add_row(_knob(plan, name), "—" if rec.value is None else f"{rec.value:g}", escape(rec.reason))
    console.print(r)
    for p in plan.problems:
        style = {"error": "red", "warning": "yellow"}.get(p.severity, "dim")
        console.print(f"[{style}]{p.severity}[/] {escape(f'[{p.code}]')} {escape(p.message)}")
    console.print("\n[bold]Serve command[/]")
    console.print(plan.command, markup=False, soft_wrap=True)


def compare_table(plans: list[Plan], console: Console) -> None:
    """One column per engine: capacity and the recommended knobs in each engine's own names."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"{escape(plans[0].model.id)} on {plans[0].gpu.name}",
              title_justify="left", show_edge=False)
    t.add_column("")
    for p in plans:
        t.add_column(f"{p.engine.label} {p.engine.version}", justify="right")

    def row(label: str, cells: list[str]) -> None:
        t.add_row(label, *cells)

    row("fits", ["[green]yes[/]" if p.fits else "[red]no[/]" for p in plans])
    row("GPUs (TP × PP × DP)", [
        f"{p.gpu.count} ({p.inputs['tensor_parallel_size'].value} × "
        f"{p.inputs['pipeline_parallel_size'].value} × {p.inputs['data_parallel_size'].value})"
        for p in plans])
    row("weights / GPU", [_gib(p.memory.weights_bytes) for p in plans])
    row("KV cache / GPU", [_gib(p.memory.kv_cache_bytes) for p in plans])
    row("KV bytes / token", [f"{p.kv_cache.bytes_per_token:,}" for p in plans])
    row("KV tokens", [f"{p.kv_cache.tokens:,}" for p in plans])
    row("context length", [f"{p.inputs['max_model_len'].value:,}" for p in plans])
    row("concurrency at that length", [f"{p.kv_cache.max_concurrency:,.2f}x" for p in plans])
    for name in ("max_model_len", "max_num_seqs", "gpu_memory_utilization"):
        row(f"recommended {name}", [
            escape(f"{p.engine.knobs.get(name, name)} "
                   + ("—" if getattr(p.recommendations, name).value is None
                      else f"{getattr(p.recommendations, name).value:g}")) for p in plans])
    console.print(t)
    sizes = {p.inputs["tensor_parallel_size"].value for p in plans}
    if len(sizes) > 1:
        each = ", ".join(f"{p.engine.label} {p.inputs['tensor_parallel_size'].value}" for p in plans)
        console.print(f"[yellow]note[/] the engines are planned at different tensor_parallel_size "
                      f"({each}): the smallest at which each fits; per-GPU rows are not "
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
        parts.append(f"{counts['linear']} " + {"gated_deltanet": "GDN"}.get(kind, kind.capitalize()))
    if counts["sliding"]:
        parts.append(f"{counts['sliding']} sliding({m.sliding_window})")
    if counts["chunked"]:
        parts.append(f"{counts['chunked']} chunked({m.attention_chunk_size})")
    if counts["full"]:
        parts.append(f"{counts['full']} full")
    if counts["none"]:
        parts.append(f"{counts['none']} MLP-only")
    return f"{base}: " + " + ".join(parts)


def models_table(rows: list[tuple[CatalogEntry, ModelSpec, int, int]], console: Console) -> None:
    from rich.table import Table

    t = Table(show_edge=False)
    t.add_column("id", overflow="fold")
    for col in ("family", "attention", "params", "KV B/token", "max len", "weights"):
        t.add_column(col, justify="right" if col in {"params", "KV B/token", "max len"} else "left")
    for entry, m, params, kv in rows:
        attn = attention_layout(m)
        if m.moe:
            attn += f", MoE {m.moe.num_experts}×top{m.moe.top_k}"
        if m.vision:
            attn += ", vision"
        t.add_row(entry.id, m.model_type, attn, f"{params / 1e9:,.2f}B", f"{kv:,}",
                  f"{max(m.max_len_keys.values(), default=0):,}",
                  m.quantization.method if m.quantization else m.dtype)
    console.print(t)


def gpus_table(gpus: list[GpuSpec], console: Console) -> None:
    from rich.table import Table

    t = Table(show_edge=False)
    for col in ("id", "name", "CUDA total", "nvidia-smi", "BW TB/s", "bf16 TFLOPS", "fp8"):
        t.add_column(col)
    for g in gpus:
        total = "?" if g.cuda_total_bytes is None else f"{g.cuda_total_bytes / GiB:.2f} GiB" + (
            " (est.)" if g.cuda_total_estimated else "")
        t.add_row(g.id, g.device_name, total,
                  f"{g.smi_total_mib} MiB" if g.smi_total_mib else "?",
                  f"{g.bandwidth_tbps:g}" if g.bandwidth_tbps else "?",
                  f"{g.tflops.bf16:g}" if g.tflops.bf16 else "—", "yes" if g.fp8_native else "no")
    console.print(t)


def check_table(report: CheckReport, console: Console) -> None:
    """One row per deployment found, then each deployment's problems and policy violations."""
    from rich.markup import escape
    from rich.table import Table

    colour = {"fits": "green", "does-not-fit": "red", "policy-violation": "red", "error": "red",
              "unchecked": "yellow"}
    t = Table(show_edge=False)
    for col in ("where", "model", "GPU", "status", "KV tokens", "max concurrency", "problems"):
        t.add_column(col, justify="right" if col in ("KV tokens", "max concurrency") else "left")
    for d in report.deployments:
        p = d.plan
        gpu = f"{p.gpu.count} × {p.gpu.id}" if p else (d.gpu or "?")
        shown = [x for x in [*d.problems, *d.policy_violations]  # the lines printed below
                 if not (x.severity == "info" and d.status == "fits")]
        t.add_row(escape(f"{d.file}:{d.line}"), escape(d.model or "?"), escape(gpu),
                  f"[{colour[d.status]}]{d.status}[/]",
                  f"{p.kv_cache.tokens:,}" if p else "—",
                  f"{p.kv_cache.max_concurrency:g}x" if p else "—", str(len(shown)))
    console.print(t)
    for d in report.deployments:
        for x in [*d.policy_violations, *d.problems]:
            if x.severity == "info" and d.status == "fits":
                continue
            style = {"error": "red", "warning": "yellow"}.get(x.severity, "dim")
            console.print(f"{escape(f'{d.file}:{d.line}')} [{style}]{x.severity}[/] "
                          f"{escape(f'[{x.code}]')} {escape(x.message)}")
    s = report.summary
    console.print(f"{s.deployments} deployment(s): {s.fits} fit, {s.failed} failed, "
                  f"{s.unchecked} unchecked, {s.errors} error(s)")


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
                         f"{p.kv_cache.max_concurrency:g}x concurrency at max_model_len "
                         f"{p.inputs['max_model_len'].value}")
    s = report.summary
    lines.append(f"kvplan check: {s.deployments} deployment(s), {s.fits} fit, {s.failed} failed, "
                 f"{s.unchecked} unchecked, {s.errors} error(s)")
    return "\n".join(lines) + "\n"
