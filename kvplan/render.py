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
    t.add_row("budget", _gib(mem.budget_bytes), escape(notes.get("budget", "")))
    origin = "safetensors headers" if plan.model.weights_from == "headers" else "config"
    rounding_mib = (mem.weights_bytes - mem.weights_tensor_bytes) / 2**20
    rounding = f", {rounding_mib:,.0f} MiB rounding" if rounding_mib >= 0.5 else ""
    t.add_row("  weights", _gib(mem.weights_bytes), f"exact: {origin}, RoPE{rounding}")
    t.add_row("  activation peak", _gib(mem.activation_bytes), escape(notes.get("activation", "")))
    t.add_row("  non-torch", _gib(mem.non_torch_bytes), escape(notes.get("non_torch", "")))
    if "cudagraph" in notes:
        t.add_row("  CUDA graphs", _gib(mem.cudagraph_bytes), escape(notes["cudagraph"]))
    t.add_row("  [bold]KV cache[/]", f"[bold]{_gib(mem.kv_cache_bytes)}[/]", escape(notes.get("kv", "")))
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
    row("concurrency", [f"{p.kv_cache.max_concurrency:,.2f}x" for p in plans])
    for name, label in (("max_model_len", "rec. length"), ("max_num_seqs", "rec. max requests"),
                        ("gpu_memory_utilization", "rec. memory fraction")):
        row(label, ["—" if getattr(p.recommendations, name).value is None
                    else f"{getattr(p.recommendations, name).value:,g}" for p in plans])
    console.print(t)
    names = ("max_model_len", "max_num_seqs", "gpu_memory_utilization")
    for p in plans:  # the rec. rows in each engine's own flags
        flags = " / ".join(p.engine.knobs.get(n, n) for n in names)
        console.print(f"rec. rows for {p.engine.label}: {flags}", markup=False, style="dim")
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
                 tsv: bool, priority: list[int] | None = None, required: int = 1) -> None:
    """A table that stays usable at 80 columns and in pipes (ids never wrapped or cut; less
    important columns dropped), or TSV with every column for scripts."""
    if tsv:
        import sys

        rows = zip(*(cells for _, cells, _ in columns))
        sys.stdout.write("\t".join(h for h, _, _ in columns) + "\n")
        sys.stdout.write("".join("\t".join(r) + "\n" for r in rows))
        return
    from rich.table import Table

    order = priority or list(range(len(columns)))
    chosen = _fit_columns(console, [columns[k] for k in order], required)
    shown = sorted(order[k] for k in chosen)
    t = Table(show_edge=False, box=None, pad_edge=False, header_style="bold")
    for k in shown:
        header, _, justify = columns[k]
        t.add_column(header, justify=justify, no_wrap=True,  # type: ignore[arg-type]
                     min_width=max([len(header), *map(len, columns[k][1])]))
    for r in zip(*(columns[k][1] for k in shown)):
        t.add_row(*r)
    needed = sum(max([len(columns[k][0]), *map(len, columns[k][1])]) + 2 for k in shown) - 2
    # Required columns wider than the console (a long file path) overflow rather than cut an id.
    console.print(t, markup=False, crop=False, width=max(console.width, needed))
    hidden = [columns[k][0] for k in range(len(columns)) if k not in shown]
    if hidden and console.is_terminal:
        console.print(f"(not shown at {console.width} columns: {', '.join(hidden)}; "
                      "--format tsv has every column)", style="dim", markup=False)


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
        ("max len", [f"{max(m.max_len_keys.values(), default=0):,}" for _, m, _, _ in rows], "right"),
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
        ("nvidia-smi", [f"{g.smi_total_mib} MiB" if g.smi_total_mib else "?" for g in gpus], "right"),
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
        ("aliases", ", ".join(g.aliases) or "—"), ("nvidia-smi names", ", ".join(g.smi_names) or "—"),
        ("compute capability", g.compute_capability or "?"),
        ("CUDA total", "?" if g.cuda_total_bytes is None else
         f"{g.cuda_total_bytes:,} B = {g.cuda_total_bytes / GiB:.2f} GiB"
         + (" (estimated)" if g.cuda_total_estimated else "")),
        ("CUDA total source", g.cuda_total_source),
        ("nvidia-smi total", f"{g.smi_total_mib} MiB" if g.smi_total_mib else "?"),
        ("bandwidth", f"{g.bandwidth_tbps:g} TB/s" if g.bandwidth_tbps else "?"),
        ("dense TFLOPS", tf),
        ("native bf16 / fp8", f"{'yes' if g.bf16_native else 'no'} / {'yes' if g.fp8_native else 'no'}"),
        ("interconnect", (f"NVLink {g.nvlink_gbps_per_gpu:g} GB/s" if g.nvlink_gbps_per_gpu else "PCIe")
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
    _print_table(console, [(k, v, "right" if k in right else "left") for k, v in cells.items()],
                 tsv=False, required=3)
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
                         f"{p.kv_cache.max_concurrency:.2f}x concurrency at max_model_len "
                         f"{p.inputs['max_model_len'].value}")
    s = report.summary
    lines.append(f"kvplan check: {s.deployments} deployment(s), {s.fits} fit, {s.failed} failed, "
                 f"{s.unchecked} unchecked, {s.errors} error(s)")
    return "\n".join(lines) + "\n"
