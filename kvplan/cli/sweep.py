"""`kvplan sweep`: the cheapest deployments that meet a target."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import typer

from .common import argument, option, own, resolve_model, table_options, workload, write


def _sweep_params() -> list[inspect.Parameter]:
    from ..engines.registry import NAMES

    return [
        argument("model", "Catalogue id, local path or Hub repo id."),
        own("gpus", str | None, "--gpus", help="comma-separated GPU ids/aliases (default: the "
            "whole catalogue)"),
        own("max_gpus", int, "--max-gpus", help="most GPUs per deployment (TP × PP)", default=8),
        option("engine", help=f"{', '.join(NAMES)}, a comma list, or all"),
        option("engine_version", help="one engine's release (default: newest modelled)"),
        option("quantization", help="weight formats to try: auto (the checkpoint's own), fp8 "
               "(online, fp8-native GPUs only), the what-ifs nvfp4 and mxfp4 (FP4-native GPUs "
               "only), w8a8 and awq (docs/what-if.md); comma-separated (default: see below)"),
        option("kv_cache_dtype", help="KV dtypes to try, e.g. auto,fp8 (default: see below)"),
        option("max_model_len", help="tokens"),
        option("dtype", bare=True),
        option("gpu_memory_utilization", bare=True),
        option("target_concurrency"),
        option("avg_input_tokens"),
        option("avg_output_tokens"),
        option("slo_tpot_ms", help="time per output token limit (needs a latency model)"),
        option("slo_ttft_ms", help="time to first token limit (needs a latency model)"),
        option("request_rate", help="requests/s to serve: ranks the options by the cost per day "
               "of the replicas the rate needs (docs/traffic.md)"),
        option("burstiness"),
        option("slo_percentile"),
        own("prices", Path | None, "--prices", help="CSV (id,usd_per_hour) or YAML (id: usd) of "
            "your own US$ per GPU-hour"),
        own("top", int, "--top", help="options shown in the table", default=10),
        option("rank_on", help="pessimistic (default: each latency band's worse end) or point "
               "(the estimate)"),
        option("offline", bare=True),
        option("disagg", help="also plan disaggregated prefill/decode services on each priced "
               "data-centre GPU, ranked with the rest; a note says which wins (docs/disagg.md)"),
        option("as_json"),
        option("calibration"),
        option("enable_mixed_chunk", help="SGLang: plan its mixed prefill+decode steps "
               "(engines without the setting are left out; docs/sglang-mixed-chunk.md)"),
        option("emit", help="write the deployment file of option N (--option): k8s, helm-llmd, "
               "helm-production-stack, dynamo, kserve, ray, skypilot or compose"),
        own("option", int, "--option", help="with --emit: the option's rank (default: 1)",
            default=1),
        own("output", Path | None, "--output", "-o", help="with --emit: the file to write "
            "(default: stdout)")]


@table_options(_sweep_params)
def sweep(model: str, **values: Any) -> None:
    """The cheapest deployments that meet a target, over every GPU, GPU count, TP/PP layout,
    weight format, KV dtype and engine kvplan knows. Exit 0 if any option meets the target, 1 if
    none does (the closest are shown), 2 on bad input.

    Formats: with neither --quantization nor --kv-cache-dtype, each option is tried in the
    checkpoint's own format and, on GPUs that run fp8 natively, with fp8 weights (online) and
    fp8 KV too, which changes accuracy slightly; name either flag (e.g. --kv-cache-dtype auto)
    to try exactly the formats named.

    Example: kvplan sweep llama-3.1-70b-instruct --max-model-len 32768 --target-concurrency 40
    --avg-input-tokens 3000 --avg-output-tokens 400
    """
    from ..api import sweep as make_sweep
    from ..errors import InvalidInputError
    from ..sources.limits import check_flags

    check_flags(values)  # nan, inf, 1e300 and 400-digit values: exit 2 naming the flag
    load = workload(**{k: values[k] for k in (
        "target_concurrency", "avg_input_tokens", "avg_output_tokens", "request_rate",
        "burstiness", "slo_percentile")})
    top = values["top"]
    if top < 1:
        raise InvalidInputError(f"--top must be at least 1, got {top}")
    gpu_list = None
    if values["gpus"] is not None:
        gpu_list = [g.strip() for g in values["gpus"].split(",") if g.strip()]
        if not gpu_list:
            raise InvalidInputError("--gpus lists no GPU", hint="e.g. --gpus h100,h200,mi300x")
    if gpu_list is not None:
        from ..api import resolve_gpus

        resolve_gpus(gpu_list)  # bad --gpus fail before any network work
    m = resolve_model(model, offline=values["offline"])
    # SGLang's own setting: only when given (an engine without it refuses even False)
    engine_knobs: dict[str, Any] = (
        {"enable_mixed_chunk": True} if values["enable_mixed_chunk"] else {})
    try:
        result = make_sweep(m, gpus=gpu_list, workload=load, **{k: values[k] for k in (
            "engine", "max_gpus", "quantization", "kv_cache_dtype", "slo_tpot_ms", "slo_ttft_ms",
            "prices", "engine_version", "max_model_len", "dtype", "gpu_memory_utilization",
            "disagg", "rank_on")}, **engine_knobs)
    except UnicodeDecodeError as e:  # the one text file sweep reads itself
        raise InvalidInputError(f"--prices {str(values['prices'])[:200]}: not UTF-8 text "
                                f"(undecodable byte at offset {e.start})",
                                hint="save it as UTF-8 CSV or YAML") from None
    if values["emit"] or values["output"]:
        from .plan import emit_file

        rank = values["option"]
        if not 1 <= rank <= len(result.options):
            raise InvalidInputError(f"--option {rank}: the sweep has {len(result.options)} "
                                    "option(s)", hint="pick a rank from the table (1 = best)")
        chosen = result.options[rank - 1]
        if chosen.disaggregated:  # its plan is the decode pool of a two-pool service
            raise InvalidInputError(
                f"--option {rank} is a disaggregated prefill/decode service: --emit writes one "
                "deployment's file, and no --emit format describes its two pools",
                hint="pick an aggregated option's rank, or emit each pool with `kvplan plan … "
                "--emit FORMAT` at the pool's layout (`kvplan plan --disagg` shows them)")
        emit_file(chosen.plan, values["emit"], values["output"])
        if values["output"] is None:
            raise typer.Exit(result.exit_code)
    if values["as_json"]:
        write(result.model_dump_json(indent=1) + "\n")
    else:
        import shutil

        from ..render.text import sweep_text

        sys.stdout.write(sweep_text(result, width=shutil.get_terminal_size((80, 24)).columns,
                                    top=top))
    raise typer.Exit(result.exit_code)
