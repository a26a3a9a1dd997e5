"""Render a disaggregated plan (`kvplan plan --disagg`) for people: both pools' memory, the KV
transfer, the service's latency and the launch lines of each pool and of the router."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..units import gib

if TYPE_CHECKING:
    from rich.console import Console

    from ..specs import DisaggPlan, Plan


def _pool_column(p: Plan, replicas: int) -> list[str]:
    mem, d = p.memory, p.inputs
    return [
        f"{replicas} × {p.gpu.count} × {p.gpu.id}",
        f"TP={d['tensor_parallel_size'].value} PP={d['pipeline_parallel_size'].value} "
        f"DP={d['data_parallel_size'].value}",
        "yes" if p.fits else "NO",
        gib(mem.weights_bytes), gib(mem.activation_bytes), gib(mem.kv_cache_bytes),
        f"{p.kv_cache.tokens:,}", f"{d['max_num_batched_tokens'].value}",
    ]


def disagg_text(result: DisaggPlan, console: Console) -> None:
    """The two pools side by side, the transfer, the service's figures and launch lines."""
    from rich.markup import escape
    from rich.table import Table

    d = result.disaggregated
    p, q = d.prefill, d.decode
    verdict = "[bold green]FITS[/]" if result.fits else "[bold red]DOES NOT FIT[/]"
    console.print(f"[bold]{escape(p.model.id)}[/] disaggregated on {p.engine.label} "
                  f"{p.engine.version}: {d.ratio} ({d.gpus} GPUs)  {verdict}")
    t = Table(title="Pools (memory per GPU)", title_justify="left", show_edge=False)
    t.add_column("")
    t.add_column("prefill", justify="right")
    t.add_column("decode", justify="right")
    rows = ("GPUs", "layout", "fits", "weights", "activation peak", "KV cache", "KV tokens",
            "token budget")
    for label, a, b in zip(rows, _pool_column(p, d.prefill_replicas),
                           _pool_column(q, d.decode_replicas), strict=True):
        t.add_row(label, a, b)
    console.print(t)
    kv = d.kv_transfer
    console.print(
        f"KV transfer ({escape(kv.connector)}, {kv.overlap.replace('_', ' ')}): "
        f"{kv.bytes_per_request / 2**20:,.1f} MiB per request of {kv.tokens:,} tokens, "
        f"{kv.time_ms:,.1f} ms at {kv.link_gbps:g} Gb/s per GPU, {kv.exposed_ms:,.1f} ms in TTFT; "
        f"connector buffers {gib(kv.prefill_buffer_bytes_per_gpu)} (prefill) / "
        f"{gib(kv.decode_buffer_bytes_per_gpu)} (decode) per GPU")
    why = {k: escape(v) for k, v in d.replicas_source.items()}
    console.print(f"replicas: prefill {d.prefill_replicas} ({why.get('prefill_replicas', '')}); "
                  f"decode {d.decode_replicas} ({why.get('decode_replicas', '')})")
    console.print(f"prefill pool: {d.prefill_tokens_per_s_per_replica:,.0f} prompt tokens/s per "
                  f"replica, {d.prefill_utilization:.0%} busy; decode pool: "
                  f"{d.decode_running_per_replica:,.1f} of {d.decode_capacity_per_replica} "
                  "requests running per replica")
    perf = result.performance
    if perf is not None:
        tt = d.ttft
        console.print(
            f"[bold]service[/]: TTFT {perf.ttft_ms:,.0f} ms (queue {tt.queue_ms:,.0f} + prefill "
            f"{tt.prefill_ms:,.0f} + transfer {tt.transfer_ms:,.1f} + first decode "
            f"{tt.first_decode_ms:,.1f} + overhead {tt.overhead_ms:,.0f}"
            + (f" + decode wait {tt.decode_wait_ms:,.0f}" if tt.decode_wait_ms else "")
            + f"), TPOT {perf.tpot_ms:.1f} ms, {perf.output_tokens_per_s:,.0f} output tokens/s "
            f"({perf.output_tokens_per_s_per_gpu:,.0f} per GPU) at {perf.concurrency} in flight"
            + (f", ${perf.cost_per_million_output_tokens:,.2f} per M tokens"
               if perf.cost_per_million_output_tokens else ""))
        if perf.not_calibrated_because:
            console.print(f"[dim]not calibrated: {escape(perf.not_calibrated_because)}[/]")
    console.print(f"[dim]harness: {escape(d.harness)}[/]")
    for note in d.notes:
        console.print(f"[dim]note: {escape(note)}[/]")
    for prob in result.problems:
        console.print(f"{prob.severity}: [{prob.code}] {prob.message}", markup=False)
    for pool, plan in (("prefill", p), ("decode", q)):
        for prob in plan.problems:
            if prob.severity != "info":
                console.print(f"{pool} pool {prob.severity}: [{prob.code}] {prob.message}",
                              markup=False)
    launch = d.launch
    pools: tuple[tuple[str, str, Plan | None], ...] = (
        ("prefill pool (each replica)", launch.prefill, p),
        ("decode pool (each replica)", launch.decode, q), ("router", launch.router, None))
    for title, line, pool_plan in pools:
        n = pool_plan.nodes if pool_plan is not None else None
        if n is not None and n.launch and (n.nodes or 1) > 1:  # one line per node role
            console.print(f"\n[bold]{title}: {n.nodes} nodes × {n.gpus_per_node} GPUs"
                          + (f" ({escape(n.system)})" if n.system else "") + "[/]")
            for node in n.launch:
                console.print(f"# {node.role}", markup=False, soft_wrap=True)
                console.print(node.command, markup=False, soft_wrap=True)
            continue
        console.print(f"\n[bold]{title}[/]")
        console.print(line, markup=False, soft_wrap=True)
    console.print(f"[dim]launch syntax: {escape('; '.join(launch.sources))}[/]")
