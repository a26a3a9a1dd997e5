"""kvplan's command line: parse → call the planner → render. main() maps errors to exit codes.

Exit codes: 0 fits, 1 does not fit, 2 bad usage or input, 3 a model source is unavailable.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from .engines import DEFAULT_ENGINE

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Plan GPU memory and KV-cache capacity for LLM serving, as vLLM will allocate it.",
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout (warnings go to stderr).")]


def _human_int(text: str | int) -> int:
    """vLLM's human-readable integers for lengths and byte counts: 32768, 32k (×1000),
    32K (×1024), 1M, 1.5k (vllm/engine/arg_utils.py human_readable_int) — as `kvplan check`
    reads them in deployment files."""
    from .deploy import human_int

    if isinstance(text, int):
        return text
    try:
        return human_int(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not an integer such as 32768, 32k or 32K") from None




def _version(value: bool) -> None:
    if value:
        from . import __version__

        sys.stdout.write(f"kvplan {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _main(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print kvplan's version and exit.")] = False,
          ) -> None:
    """Plan GPU memory and KV-cache capacity for LLM serving, as vLLM will allocate it."""


def _console(stderr: bool = False):  # noqa: ANN202 - rich imported lazily
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


@contextmanager
def _progress_line() -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while the Hub is read (a plain line when stderr is not a terminal).
    rich is imported only when there is something to show (catalogue models never do)."""
    status = None

    def show(message: str) -> None:
        nonlocal status
        console = _console(stderr=True)
        if console.is_terminal:
            status = console.status(message)
            status.start()
        else:
            console.print(message + " …", markup=False)

    try:
        yield show
    finally:
        if status is not None:
            status.stop()


@app.command()
def plan(
    model: Annotated[str, typer.Argument(help="Catalogue id or alias (see `kvplan models`), a local "
                                         "model directory / config.json, or a Hub repo id.")],
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id, alias or nvidia-smi name, e.g. "
                                     "h100-sxm-80gb or 'NVIDIA H100 80GB HBM3'.")],
    tensor_parallel_size: Annotated[int | None, typer.Option("--tensor-parallel-size", "-tp")] = None,
    pipeline_parallel_size: Annotated[int | None, typer.Option("--pipeline-parallel-size", "-pp")] = None,
    data_parallel_size: Annotated[int | None, typer.Option("--data-parallel-size", "-dp")] = None,
    max_model_len: Annotated[int | None, typer.Option(
        "--max-model-len", help="tokens; 32k = 32000, 32K = 32768 (as vLLM reads it)",
        parser=_human_int, metavar="INT")] = None,
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(
        "--max-num-batched-tokens", parser=_human_int, metavar="INT")] = None,
    max_input_tokens: Annotated[int | None, typer.Option(
        "--max-input-tokens", help="TGI only: longest prompt (default: --max-model-len − 1)")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(
        "--gpu-memory-utilization", help="fraction of the device total, (0, 1]")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="auto, bfloat16, float16, float32")] = None,
    kv_cache_dtype: Annotated[str | None, typer.Option(
        "--kv-cache-dtype", help="auto, fp8, fp8_e4m3, fp8_e5m2")] = None,
    quantization: Annotated[str | None, typer.Option("--quantization", "-q",
                                                        help="online quantization: fp8")] = None,
    block_size: Annotated[int | None, typer.Option("--block-size", help="tokens per KV block")] = None,
    enforce_eager: Annotated[bool | None, typer.Option("--enforce-eager", help="no CUDA graphs")] = None,
    enable_prefix_caching: Annotated[bool | None, typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching",
        help="vLLM default on; off keeps Mamba/GDN states at one page per request")] = None,
    disable_hybrid_kv_cache_manager: Annotated[bool | None, typer.Option(
        "--disable-hybrid-kv-cache-manager", help="allocate sliding/chunked layers as full attention")] = None,
    enable_expert_parallel: Annotated[bool | None, typer.Option(
        "--enable-expert-parallel", help="MoE experts split over TP × DP ranks")] = None,
    usage_context: Annotated[str | None, typer.Option(
        "--usage-context", help="serve (vllm serve, default) or llm (offline LLM class): batch defaults")] = None,
    kv_cache_memory_bytes: Annotated[int | None, typer.Option(
        "--kv-cache-memory-bytes", help="fixed KV budget per GPU, bytes (ignores utilization)",
        parser=_human_int, metavar="INT")] = None,
    gpu_memory_gib: Annotated[float | None, typer.Option(
        "--gpu-memory-gib", help="override the device total (GiB), e.g. the total_gpu_memory "
        "your vLLM log prints")] = None,
    max_total_tokens: Annotated[int | None, typer.Option(
        "--max-total-tokens", help="SGLang / TensorRT-LLM: cap on KV pool tokens")] = None,
    backend: Annotated[str | None, typer.Option(
        "--backend", help="TensorRT-LLM: pytorch (HF checkpoint; default from 1.0) or tensorrt "
        "(a built engine)")] = None,
    speculative_config: Annotated[str | None, typer.Option(
        "--speculative-config", help="vLLM, SGLang: speculative decoding JSON, e.g. '{\"method\": "
        "\"eagle3\", \"model\": \"ORG/HEAD\", \"num_speculative_tokens\": 3}'; SGLang also "
        "takes eagle_topk and num_draft_tokens (docs/features.md)")] = None,
    enable_lora: Annotated[bool | None, typer.Option(
        "--enable-lora", help="vLLM: preallocate LoRA adapter slots")] = None,
    max_loras: Annotated[int | None, typer.Option("--max-loras", help="vLLM: adapters per batch (1)")] = None,
    max_lora_rank: Annotated[int | None, typer.Option("--max-lora-rank", help="vLLM: (16)")] = None,
    max_cpu_loras: Annotated[int | None, typer.Option(
        "--max-cpu-loras", help="vLLM: adapters cached in host memory (max_loras)")] = None,
    lora_target_modules: Annotated[str | None, typer.Option(
        "--lora-target-modules", help="SGLang: LoRA modules, comma-separated (q_proj,v_proj or "
        "all; --max-loras is its --max-loras-per-batch, --max-cpu-loras its --max-loaded-loras); "
        "TensorRT-LLM: attn_q,attn_k,attn_v,attn_dense, …")] = None,
    lora_paths: Annotated[str | None, typer.Option(
        "--lora-paths", help="SGLang: adapters loaded at start, comma-separated NAME=PATH "
        "(counted, not read; turns LoRA on)")] = None,
    kv_offloading_size: Annotated[float | None, typer.Option(
        "--kv-offloading-size", help="vLLM: GiB of host memory for offloaded KV blocks")] = None,
    kv_offloading_backend: Annotated[str | None, typer.Option(
        "--kv-offloading-backend", help="vLLM: native (default) or lmcache")] = None,
    enable_hierarchical_cache: Annotated[bool | None, typer.Option(
        "--enable-hierarchical-cache", help="SGLang: host-memory KV tier (HiCache)")] = None,
    hicache_ratio: Annotated[float | None, typer.Option(
        "--hicache-ratio", help="SGLang: host pool tokens per device pool token (2.0)")] = None,
    hicache_size: Annotated[int | None, typer.Option(
        "--hicache-size", help="SGLang: GB of host KV per GPU (0: use --hicache-ratio)")] = None,
    acceptance_rate: Annotated[float | None, typer.Option(
        "--acceptance-rate", help="speculative decoding: probability each draft token is "
        "accepted, [0, 1] (your engine's logged 'Draft acceptance rate'): TPOT and tokens/s")] = None,
    host_cache_size: Annotated[int | None, typer.Option(
        "--host-cache-size", help="TensorRT-LLM: kv_cache_config.host_cache_size, bytes of host "
        "KV blocks per GPU")] = None,
    prefix_hit_rate: Annotated[float | None, typer.Option(
        "--prefix-hit-rate", help="fraction (0, 1] of each prompt found in the prefix cache "
        "(with --avg-input-tokens): concurrency and TTFT with prefix caching")] = None,
    shared_prefix_tokens: Annotated[int | None, typer.Option(
        "--shared-prefix-tokens", help="tokens every request shares (system prompt): "
        "concurrency with prefix caching")] = None,
    limit_mm_per_prompt: Annotated[str | None, typer.Option(
        "--limit-mm-per-prompt", help="vLLM: items per prompt by modality, JSON '{\"image\": 4, "
        "\"video\": 0}' or the legacy image=4,video=0; image 0 skips the encoder profile "
        "(docs/features.md)")] = None,
    images_per_request: Annotated[int | None, typer.Option(
        "--images-per-request", help="images each request carries (a VLM): their tokens are "
        "added to each request's KV length")] = None,
    extra_llm_api_options: Annotated[Path | None, typer.Option(
        "--extra-llm-api-options", help="TensorRT-LLM: the YAML given to trtllm-serve "
        "(kv_cache_config, max_batch_size, …); its values win over flags, as in trtllm-serve")] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="vllm, sglang, tgi or trtllm (generic flags map to the engine's own "
        "knobs; see docs/engines.md)")] = DEFAULT_ENGINE,
    engine_version: Annotated[str | None, typer.Option(
        "--engine-version", help="engine release to model (default: newest modelled)")] = None,
    target_concurrency: Annotated[int | None, typer.Option(
        "--target-concurrency", help="requests that must fit in the KV cache at once")] = None,
    avg_input_tokens: Annotated[int | None, typer.Option("--avg-input-tokens")] = None,
    avg_output_tokens: Annotated[int | None, typer.Option("--avg-output-tokens")] = None,
    slo_ttft_ms: Annotated[float | None, typer.Option(
        "--slo-ttft-ms", help="latency target: time to first token, ms")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option(
        "--slo-tpot-ms", help="latency target: time per output token, ms")] = None,
    gpu_hour_price: Annotated[float | None, typer.Option(
        "--gpu-hour-price", help="USD per GPU-hour for cost figures (default: the catalogue's)")] = None,
    minimize_utilization: Annotated[bool, typer.Option(
        "--minimize-utilization", help="recommend the smallest --gpu-memory-utilization that "
        "holds --target-concurrency (default: keep the engine's default when it is enough)")] = False,
    revision: Annotated[str | None, typer.Option(
        "--revision", help="Hub branch, tag or commit (fetches from the Hub even for catalogue ids)")] = None,
    token: Annotated[str | None, typer.Option(
        "--token", help="Hub token for gated/private repos (default: HF_TOKEN or your saved login)")] = None,
    offline: Annotated[bool | None, typer.Option(
        "--offline", help="no network: kvplan's and huggingface_hub's caches only "
        "(default: HF_HUB_OFFLINE)")] = None,
    refresh: Annotated[bool, typer.Option(
        "--refresh", help="fetch the Hub repo again instead of using kvplan's cache")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Plan one vLLM deployment: memory per GPU, KV capacity, fit, recommended flags.

    Example: kvplan plan meta-llama/Llama-3.1-8B-Instruct --gpu h100-sxm-80gb --max-model-len 32768
    """
    from .api import plan as make_plan
    from .limits import check_flags

    check_flags(dict(locals()))  # nan, inf, 1e300, 400-digit values: exit 2 naming the flag
    workload = _workload(target_concurrency=target_concurrency, avg_input_tokens=avg_input_tokens,
                         avg_output_tokens=avg_output_tokens, slo_ttft_ms=slo_ttft_ms,
                         slo_tpot_ms=slo_tpot_ms, shared_prefix_tokens=shared_prefix_tokens,
                         prefix_hit_rate=prefix_hit_rate, acceptance_rate=acceptance_rate,
                         images_per_request=images_per_request)
    from .catalog import resolve_gpu, resolve_model

    options = {}
    if extra_llm_api_options is not None:
        from .deploy import read_options_file
        from .engines.registry import ENGINES
        from .errors import InvalidInputError

        owner = ENGINES.get(engine.lower())
        if owner is None or owner.options_file_flag is None:
            raise InvalidInputError("--extra-llm-api-options is TensorRT-LLM's",
                                    hint="plan with --engine trtllm")
        options = read_options_file(owner, extra_llm_api_options)
    g = resolve_gpu(gpu)  # a bad --gpu fails before any network work
    with _progress_line() as progress:
        m = resolve_model(model, revision=revision, token=token, offline=offline, refresh=refresh,
                          progress=progress)
    flags = dict(
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size, max_model_len=max_model_len,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        max_input_tokens=max_input_tokens, max_total_tokens=max_total_tokens,
        gpu_memory_utilization=gpu_memory_utilization, dtype=dtype, kv_cache_dtype=kv_cache_dtype,
        quantization=quantization, block_size=block_size, enforce_eager=enforce_eager,
        enable_prefix_caching=enable_prefix_caching,
        disable_hybrid_kv_cache_manager=disable_hybrid_kv_cache_manager,
        enable_expert_parallel=enable_expert_parallel, usage_context=usage_context,
        kv_cache_memory_bytes=kv_cache_memory_bytes, gpu_memory_gib=gpu_memory_gib, backend=backend,
        speculative_config=speculative_config, enable_lora=enable_lora, max_loras=max_loras,
        max_lora_rank=max_lora_rank, max_cpu_loras=max_cpu_loras,
        lora_target_modules=lora_target_modules, lora_paths=lora_paths,
        kv_offloading_size=kv_offloading_size, kv_offloading_backend=kv_offloading_backend,
        enable_hierarchical_cache=enable_hierarchical_cache, hicache_ratio=hicache_ratio,
        hicache_size=hicache_size, limit_mm_per_prompt=limit_mm_per_prompt,
        host_cache_size=host_cache_size)
    result = make_plan(m, g, engine=engine.lower(), engine_version=engine_version,
                       workload=workload, gpu_hour_price=gpu_hour_price, offline=offline,
                       minimize_utilization=minimize_utilization,
                       **{**flags, **options})
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        if result.problems:
            err = _console(stderr=True)
            for p in result.problems:
                err.print(f"{p.severity}: [{p.code}] {p.message}", markup=False)
    else:
        from .render.text import plan_table

        plan_table(result, _console())
    raise typer.Exit(0 if result.fits and not _errors(result) else 1)


@app.command()
def compare(
    model: Annotated[str, typer.Argument(help="Catalogue id, local path or Hub repo id.")],
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id, alias or nvidia-smi name.")],
    tensor_parallel_size: Annotated[int | None, typer.Option("--tensor-parallel-size", "-tp")] = None,
    max_model_len: Annotated[int | None, typer.Option(
        "--max-model-len", help="context length for every engine (default: each engine's own)",
        parser=_human_int, metavar="INT")] = None,
    kv_cache_dtype: Annotated[str | None, typer.Option("--kv-cache-dtype")] = None,
    gpu_memory_gib: Annotated[float | None, typer.Option("--gpu-memory-gib")] = None,
    target_concurrency: Annotated[int | None, typer.Option("--target-concurrency")] = None,
    avg_input_tokens: Annotated[int | None, typer.Option("--avg-input-tokens")] = None,
    avg_output_tokens: Annotated[int | None, typer.Option("--avg-output-tokens")] = None,
    offline: Annotated[bool | None, typer.Option("--offline")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The same model and GPU on vLLM, SGLang and TGI side by side: KV tokens, concurrency and
    each engine's recommended knobs. Without --tensor-parallel-size each engine is planned at the
    smallest TP at which it fits (the table says so when they differ). Exit 0 if any engine
    fits, 1 if none does.

    Example: kvplan compare meta-llama/Llama-3.1-8B-Instruct --gpu h100
    """
    from .api import plan as make_plan
    from .catalog import resolve_gpu, resolve_model
    from .engines.registry import NAMES
    from .limits import check_flags
    from .specs import Plan

    check_flags(dict(locals()))
    workload = _workload(target_concurrency=target_concurrency, avg_input_tokens=avg_input_tokens,
                         avg_output_tokens=avg_output_tokens)
    g = resolve_gpu(gpu)
    with _progress_line() as progress:
        m = resolve_model(model, offline=offline, progress=progress)

    def one(engine: str, tp: int | None) -> Plan:
        return make_plan(m, g, engine=engine, workload=workload, tensor_parallel_size=tp,
                         max_model_len=max_model_len, kv_cache_dtype=kv_cache_dtype,
                         gpu_memory_gib=gpu_memory_gib)

    plans = []
    for e in NAMES:
        p = one(e, tensor_parallel_size)
        rec_tp = p.recommendations.tensor_parallel_size.value
        if tensor_parallel_size is None and not p.fits and rec_tp and rec_tp != p.gpu.count:
            p = one(e, int(rec_tp))  # each column describes the deployment its serve line runs
        plans.append(p)
    if as_json:
        sys.stdout.write(json.dumps({"plans": [p.model_dump(mode="json") for p in plans]}, indent=2) + "\n")
    else:
        from .render.text import compare_table

        compare_table(plans, _console())
    raise typer.Exit(0 if any(p.fits for p in plans) else 1)


FormatOpt = Annotated[str, typer.Option(
    "--format", help="table (fits 80 columns; ids never cut), tsv (every column, for scripts) "
    "or json")]


def _list_format(fmt: str, as_json: bool) -> str:
    from .errors import InvalidInputError

    fmt = "json" if as_json else fmt.lower()
    if fmt not in {"table", "tsv", "json"}:
        raise InvalidInputError(f"unknown --format {fmt!r}", hint="use table, tsv or json")
    return fmt


def _nothing_matched(noun: str, needle: str, suggestions: list[str]) -> None:
    """A filter that matches nothing is bad input (exit 2), as an unknown id is for `plan`."""
    from .errors import KvplanError

    raise KvplanError(f"no catalogue {noun} matches {needle!r}",
                      hint=(f"did you mean {', '.join(repr(x) for x in suggestions)}? "
                            if suggestions else "") + f"`kvplan {noun}s` lists them all")


@app.command()
def sweep(
    model: Annotated[str, typer.Argument(help="Catalogue id, local path or Hub repo id.")],
    gpus: Annotated[str | None, typer.Option(
        "--gpus", help="comma-separated GPU ids/aliases (default: the whole catalogue)")] = None,
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="most GPUs per deployment (TP × PP)")] = 8,
    engine: Annotated[str, typer.Option(
        "--engine", help="vllm, sglang, tgi, a comma list, or all")] = DEFAULT_ENGINE,
    engine_version: Annotated[str | None, typer.Option(
        "--engine-version", help="one engine's release (default: newest modelled)")] = None,
    quantization: Annotated[str | None, typer.Option(
        "--quantization", "-q", help="weight formats to try: auto (the checkpoint's own), fp8 "
        "(online, fp8-native GPUs only); comma-separated")] = None,
    kv_cache_dtype: Annotated[str | None, typer.Option(
        "--kv-cache-dtype", help="KV dtypes to try, e.g. auto,fp8")] = None,
    max_model_len: Annotated[int | None, typer.Option("--max-model-len", help="tokens")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option("--gpu-memory-utilization")] = None,
    target_concurrency: Annotated[int | None, typer.Option(
        "--target-concurrency", help="requests that must fit in the KV cache at once")] = None,
    avg_input_tokens: Annotated[int | None, typer.Option("--avg-input-tokens")] = None,
    avg_output_tokens: Annotated[int | None, typer.Option("--avg-output-tokens")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option(
        "--slo-tpot-ms", help="time per output token limit (needs a latency model)")] = None,
    slo_ttft_ms: Annotated[float | None, typer.Option(
        "--slo-ttft-ms", help="time to first token limit (needs a latency model)")] = None,
    prices: Annotated[Path | None, typer.Option(
        "--prices", help="CSV (id,usd_per_hour) or YAML (id: usd) of your own US$ per GPU-hour")] = None,
    top: Annotated[int, typer.Option("--top", help="options shown in the table")] = 10,
    offline: Annotated[bool | None, typer.Option("--offline")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The cheapest deployments that meet a target, over every GPU, GPU count, TP/PP layout,
    weight format, KV dtype and engine kvplan knows. Exit 0 if any option meets the target, 1 if
    none does (the closest are shown), 2 on bad input.

    Example: kvplan sweep llama-3.1-70b-instruct --max-model-len 32768 --target-concurrency 40
    --avg-input-tokens 3000 --avg-output-tokens 400
    """
    from pydantic import ValidationError

    from .api import sweep as make_sweep
    from .errors import InvalidInputError
    from .specs import Workload

    try:
        workload = Workload(target_concurrency=target_concurrency, avg_input_tokens=avg_input_tokens,
                            avg_output_tokens=avg_output_tokens)
    except ValidationError as e:
        fields = ", ".join("--" + str(err["loc"][0]).replace("_", "-") for err in e.errors())
        raise InvalidInputError(f"{fields} must be a positive integer") from None
    for name, v in (("--slo-tpot-ms", slo_tpot_ms), ("--slo-ttft-ms", slo_ttft_ms)):
        if v is not None and not v > 0:
            raise InvalidInputError(f"{name} must be a positive number of milliseconds, got {v:g}")
    if top < 1:
        raise InvalidInputError(f"--top must be at least 1, got {top}")
    gpu_list = None
    if gpus is not None:
        gpu_list = [g.strip() for g in gpus.split(",") if g.strip()]
        if not gpu_list:
            raise InvalidInputError("--gpus lists no GPU", hint="e.g. --gpus h100,h200,mi300x")
    if gpu_list is not None:
        from .api import resolve_gpus

        resolve_gpus(gpu_list)  # bad --gpus fail before any network work
    from .catalog import resolve_model

    with _progress_line() as progress:
        m = resolve_model(model, offline=offline, progress=progress)
    result = make_sweep(
        m, gpus=gpu_list, engine=engine, max_gpus=max_gpus, quantization=quantization,
        kv_cache_dtype=kv_cache_dtype, workload=workload, slo_tpot_ms=slo_tpot_ms,
        slo_ttft_ms=slo_ttft_ms, prices=prices, engine_version=engine_version,
        max_model_len=max_model_len, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization)
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=1) + "\n")
    else:
        import shutil

        from .render.text import sweep_text

        sys.stdout.write(sweep_text(result, width=shutil.get_terminal_size((80, 24)).columns,
                                    top=top))
    raise typer.Exit(result.exit_code)


@app.command()
def models(
    args: Annotated[list[str] | None, typer.Argument(
        help="A substring to filter by, or `show ID` for one entry.")] = None,
    fmt: FormatOpt = "table",
    as_json: JsonOpt = False,
) -> None:
    """List the bundled models (`kvplan models qwen`), or show one (`kvplan models show ID`).

    A model answers to its repo id, its repo name without the owner, and its aliases (case,
    '-' and '_' ignored); an alias without instruct/it/chat names the base model where the
    catalogue has one."""
    from .catalog import find_model_entry, load_catalog_model, model_entries, suggest_models
    from .errors import UnknownModelError
    from .model.kv import layer_specs
    from .model.weights import parameter_count

    fmt = _list_format(fmt, as_json)
    show, needle = _show_or_filter(args, "models")
    if show is not None:
        entry = find_model_entry(show)
        if entry is None:
            raise UnknownModelError(show, suggest_models(show))
        m = load_catalog_model(entry)
        data = {"entry": entry.model_dump(), "spec": m.model_dump(), "parameters": parameter_count(m)}
        if fmt == "json":
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            from .render.text import model_detail

            model_detail(entry, m, parameter_count(m), _console(), tsv=fmt == "tsv")
        return
    rows = []
    key = needle.replace("-", "").replace("_", "")
    for entry in model_entries():
        names = [entry.id, *entry.aliases]
        if key and not any(key in n.lower().replace("-", "").replace("_", "") for n in names):
            continue
        m = load_catalog_model(entry)
        dt = m.dtype if m.dtype != "float32" else "bfloat16"
        specs = layer_specs(m, range(m.num_layers), tp=1, kv_dtype=dt, state_dtype=dt,
                            hybrid_manager=True)
        rows.append((entry, m, parameter_count(m), sum(x.bytes_per_token for x in specs)))
    if not rows:
        _nothing_matched("model", needle, suggest_models(needle))
    if fmt == "json":
        from .render.text import attention_layout

        sys.stdout.write(json.dumps([{"id": e.id, "model_type": m.model_type,
                                      "attention": attention_layout(m), "parameters": p,
                                      "kv_bytes_per_token": kv, "aliases": e.aliases}
                                     for e, m, p, kv in rows], indent=2) + "\n")
    else:
        from .render.text import models_table

        models_table(rows, _console(), tsv=fmt == "tsv")


@app.command()
def gpus(
    args: Annotated[list[str] | None, typer.Argument(
        help="A substring to filter by, or `show ID` for one entry.")] = None,
    local: Annotated[bool, typer.Option(
        "--local", help="this machine's GPUs through NVML (pip install 'kvplan[nvml]')")] = False,
    fmt: FormatOpt = "table",
    as_json: JsonOpt = False,
) -> None:
    """List the bundled GPUs (`kvplan gpus h100`), or show one (`kvplan gpus show h200`);
    `--local` lists this machine's GPUs (NVML) and what other processes hold on them."""
    from .catalog import gpu_specs, resolve_gpu

    fmt = _list_format(fmt, as_json)
    if local:
        return _local_gpus(as_json)

    show, needle = _show_or_filter(args, "gpus")
    if show is not None:
        g = resolve_gpu(show)
        if fmt == "json":
            sys.stdout.write(g.model_dump_json(indent=2) + "\n")
        else:
            from .render.text import gpu_detail

            gpu_detail(g, _console(), tsv=fmt == "tsv")
        return
    rows = [g for g in gpu_specs() if not needle or needle in g.id
            or any(needle in n.lower() for n in (g.name, *g.smi_names, *g.aliases))]
    if not rows:
        from .errors import UnknownGpuError

        try:
            resolve_gpu(needle)
        except UnknownGpuError as e:
            _nothing_matched("gpu", needle, e.suggestions)
    if fmt == "json":
        sys.stdout.write(json.dumps([g.model_dump() for g in rows], indent=2) + "\n")
    else:
        from .render.text import gpus_table

        gpus_table(rows, _console(), tsv=fmt == "tsv")


@app.command()
def check(
    files: Annotated[list[Path], typer.Argument(help="Deployment files: Dockerfile, shell scripts, "
                                                "docker-compose, Kubernetes/KServe manifests, vLLM --config YAML.")],
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="GPU for commands whose file does not say (node selector or # kvplan: gpu=…)")] = None,
    engine_version: Annotated[str | None, typer.Option(
        "--engine-version", help="vLLM version when the file does not say (image tag, vllm==…)")] = None,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="KEY=VALUE for a {{ KEY }}, {{ .Values.KEY }} or ${KEY} template (repeatable)")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="policy file (default: ./kvplan.toml, else [tool.kvplan] in ./pyproject.toml)")] = None,
    min_concurrency: Annotated[float | None, typer.Option(
        "--min-concurrency", help="policy: requests the KV cache must hold at max_model_len")] = None,
    min_kv_tokens: Annotated[int | None, typer.Option(
        "--min-kv-tokens", help="policy (32k = 32000, 32K = 32768)", parser=_human_int,
        metavar="INT")] = None,
    min_headroom_gib: Annotated[float | None, typer.Option(
        "--min-headroom-gib", help="policy: GiB per GPU left outside vLLM's budget")] = None,
    max_gpu_memory_utilization: Annotated[float | None, typer.Option(
        "--max-gpu-memory-utilization", help="policy")] = None,
    min_max_model_len: Annotated[int | None, typer.Option(
        "--min-max-model-len", help="policy (32k = 32000, 32K = 32768)", parser=_human_int,
        metavar="INT")] = None,
    require_fp8_kv_cache: Annotated[bool | None, typer.Option(
        "--require-fp8-kv-cache", help="policy: every deployment uses --kv-cache-dtype fp8")] = None,
    offline: Annotated[bool | None, typer.Option(
        "--offline", help="resolve Hub models from caches only (default: HF_HUB_OFFLINE)")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="table, json, github (Actions annotations) or markdown (PR comment, "
        "$GITHUB_STEP_SUMMARY)")] = "table",
    as_json: JsonOpt = False,
) -> None:
    """Check every serving command in deployment files: will it start, what KV capacity, does it
    meet the team's policies. Exit 0 all fit, 1 any does not fit or breaks a policy, 2 a file
    cannot be parsed, 3 a model source is unavailable.

    Example: kvplan check deploy/k8s.yaml Dockerfile --gpu h100 --min-concurrency 8
    """
    from pydantic import ValidationError

    from .check import Policy, check_files, load_policy
    from .errors import InvalidInputError

    fmt = "json" if as_json else fmt
    if fmt not in {"table", "json", "github", "markdown"}:
        raise InvalidInputError(f"unknown --format {fmt!r}", hint="use table, json, github or markdown")
    values = {}
    for item in sets or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InvalidInputError(f"--set {item!r} is not KEY=VALUE")
        values[key.strip()] = value
    policy, _ = load_policy(config, Path.cwd())
    overrides = {k: v for k, v in dict(
        gpu=gpu, engine_version=engine_version, min_concurrency=min_concurrency,
        min_kv_tokens=min_kv_tokens, min_headroom_gib=min_headroom_gib,
        max_gpu_memory_utilization=max_gpu_memory_utilization, min_max_model_len=min_max_model_len,
        require_fp8_kv_cache=require_fp8_kv_cache).items() if v is not None}
    try:
        policy = Policy.model_validate({**policy.model_dump(), **overrides})
    except ValidationError as e:
        err = e.errors()[0]
        raise InvalidInputError(f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg']}") from None
    report = check_files(files, policy=policy, sets=values, offline=offline)
    if fmt == "json":
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    elif fmt == "github":
        from .render.text import github_annotations

        sys.stdout.write(github_annotations(report))
    elif fmt == "markdown":
        from .report import check_markdown

        sys.stdout.write(check_markdown(report))
    else:
        from .render.text import check_table

        check_table(report, _console())
    raise typer.Exit(report.exit_code)


@app.command()
def schema() -> None:
    """Print the JSON Schema of `kvplan plan --json`."""
    from .specs import Plan

    sys.stdout.write(json.dumps(Plan.model_json_schema(), indent=2) + "\n")


def _local_gpus(as_json: bool) -> None:
    """`kvplan gpus --local`: NVML's view, each GPU matched to its catalogue entry."""
    from .catalog import local_gpu
    from .nvml import local_gpus
    from .units import GiB

    rows = [(g, local_gpu(g.index)) for g in local_gpus()]
    if as_json:
        sys.stdout.write(json.dumps([{
            "index": g.index, "name": g.name, "catalogue_id": s.id if not s.id.startswith("local-") else None,
            "nvml_total_bytes": g.total_bytes, "cuda_total_bytes": s.cuda_total_bytes,
            "used_bytes": g.used_bytes, "free_bytes": g.free_bytes, "processes": g.processes}
            for g, s in rows], indent=2) + "\n")
        return
    out = _console()
    for g, s in rows:
        match = s.id if not s.id.startswith("local-") else "not in the catalogue"
        out.print(f"local:{g.index}  {g.name}  ({match})  CUDA total {s.cuda_total_bytes / GiB:.2f} GiB, "
                  f"in use {g.used_bytes / GiB:.2f} GiB by {g.processes} process(es), "
                  f"free {g.free_bytes / GiB:.2f} GiB", markup=False, highlight=False)


def _errors(plan) -> list:  # noqa: ANN001 - a Plan; specs imported lazily
    """Error problems: a plan that fits in memory but misses a target still exits 1."""
    return [p for p in plan.problems if p.severity == "error"]


def _workload(**values: object):  # noqa: ANN202 - specs imported lazily
    """The Workload from CLI values; a bad one names its flag and range (exit 2)."""
    import math

    from pydantic import ValidationError

    from .errors import InvalidInputError
    from .specs import Workload

    for key, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInputError(f"--{key.replace('_', '-')} must be a finite number, got {value}")
    try:
        return Workload(**values)
    except ValidationError as e:
        err = e.errors()[0]
        if not err["loc"]:  # a rule across flags: its message names them
            raise InvalidInputError(err["msg"].removeprefix("Value error, ")) from None
        name = "--" + str(err["loc"][0]).replace("_", "-")
        raise InvalidInputError(f"{name} must be positive and realistic ({err['msg'].lower()}), "
                                f"got {err.get('input')!r}") from None


def _show_or_filter(args: list[str] | None, noun: str) -> tuple[str | None, str]:
    """`kvplan NOUN show ID` → (ID, ""); `kvplan NOUN [FILTER]` → (None, filter)."""
    from .errors import InvalidInputError

    args = args or []
    if args and args[0] == "show":
        if len(args) != 2:
            raise InvalidInputError(f"usage: kvplan {noun} show ID")
        return args[1], ""
    if len(args) > 1:
        raise InvalidInputError(f"usage: kvplan {noun} [FILTER] or kvplan {noun} show ID")
    return None, args[0].lower() if args else ""


@app.command()
def report(
    target: Annotated[str, typer.Argument(help="A model (as for `kvplan plan`), or a deployment "
                                          "file or directory (as for `kvplan check`).")],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="report file: .html (self-contained) or .md; default: stdout")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", help="md or html (default: from the -o suffix, else md)")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU id, alias or nvidia-smi name")] = None,
    tensor_parallel_size: Annotated[int | None, typer.Option("--tensor-parallel-size", "-tp")] = None,
    pipeline_parallel_size: Annotated[int | None, typer.Option("--pipeline-parallel-size", "-pp")] = None,
    data_parallel_size: Annotated[int | None, typer.Option("--data-parallel-size", "-dp")] = None,
    max_model_len: Annotated[int | None, typer.Option("--max-model-len")] = None,
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option("--max-num-batched-tokens")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option("--gpu-memory-utilization")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype")] = None,
    kv_cache_dtype: Annotated[str | None, typer.Option("--kv-cache-dtype")] = None,
    quantization: Annotated[str | None, typer.Option("--quantization", "-q")] = None,
    block_size: Annotated[int | None, typer.Option("--block-size")] = None,
    enforce_eager: Annotated[bool | None, typer.Option("--enforce-eager")] = None,
    kv_cache_memory_bytes: Annotated[int | None, typer.Option("--kv-cache-memory-bytes")] = None,
    gpu_memory_gib: Annotated[float | None, typer.Option("--gpu-memory-gib")] = None,
    engine: Annotated[str, typer.Option("--engine")] = DEFAULT_ENGINE,
    engine_version: Annotated[str | None, typer.Option("--engine-version")] = None,
    target_concurrency: Annotated[int | None, typer.Option("--target-concurrency")] = None,
    avg_input_tokens: Annotated[int | None, typer.Option("--avg-input-tokens")] = None,
    avg_output_tokens: Annotated[int | None, typer.Option("--avg-output-tokens")] = None,
    revision: Annotated[str | None, typer.Option("--revision")] = None,
    offline: Annotated[bool | None, typer.Option("--offline")] = None,
    generated_at: Annotated[str | None, typer.Option(
        "--generated-at", help="a date or note to print in the report (none by default, so the "
        "same inputs give byte-identical reports)")] = None,
) -> None:
    """Write a sizing report (Markdown, or one self-contained HTML file with charts) for one
    deployment, or for every serving command `kvplan check` finds. Exit codes as for plan/check.

    Example: kvplan report llama-3.1-70b-instruct --gpu h100 -tp 4 -o sizing.html
    """
    import shlex

    from . import __version__
    from . import report as rep
    from .errors import InvalidInputError

    name = rep.output_format(output, fmt)
    line = shlex.join(["kvplan", "report", *sys.argv[sys.argv.index("report") + 1:]]
                      if "report" in sys.argv else ["kvplan", "report", target])
    path = Path(target)
    if path.exists() and not (path / "config.json").exists() and path.suffix != ".json":
        from .check import Policy, check_files, load_policy

        policy, _ = load_policy(None, Path.cwd())
        policy = Policy.model_validate({**policy.model_dump(), **{k: v for k, v in dict(
            gpu=gpu, engine_version=engine_version).items() if v is not None}})
        checked = check_files([path], policy=policy, sets={}, offline=offline)
        if not any(d.plan for d in checked.deployments):
            why = "; ".join(p.message for d in checked.deployments for p in d.problems)
            raise InvalidInputError(f"{target}: nothing to plan ({why})")
        result = rep.from_check(checked, command_line=line, version=__version__,
                                generated_at=generated_at)
    else:
        from pydantic import ValidationError

        from .catalog import resolve_gpu, resolve_model
        from .specs import Workload

        try:
            workload = Workload(target_concurrency=target_concurrency,
                                avg_input_tokens=avg_input_tokens, avg_output_tokens=avg_output_tokens)
        except ValidationError as e:
            fields = ", ".join("--" + str(err["loc"][0]).replace("_", "-") for err in e.errors())
            raise InvalidInputError(f"{fields} must be a positive integer") from None
        if gpu is None:
            raise InvalidInputError("--gpu is required to report on a model",
                                    hint="e.g. --gpu h100; deployment files may name their own GPU")
        g = resolve_gpu(gpu)
        with _progress_line() as progress:
            m = resolve_model(target, revision=revision, offline=offline, progress=progress)
        knobs: dict[str, Any] = dict(
            tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
            data_parallel_size=data_parallel_size, max_model_len=max_model_len,
            max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
            gpu_memory_utilization=gpu_memory_utilization, dtype=dtype,
            kv_cache_dtype=kv_cache_dtype, quantization=quantization, block_size=block_size,
            enforce_eager=enforce_eager, kv_cache_memory_bytes=kv_cache_memory_bytes,
            gpu_memory_gib=gpu_memory_gib)
        from .api import report as plan_report

        data = plan_report(m, g, engine=engine.lower(), engine_version=engine_version,
                           workload=workload, **knobs)
        result = rep.for_model(data, command_line=line, version=__version__,
                               generated_at=generated_at)
    text = rep.render(result, name)
    if output is None:
        sys.stdout.write(text)
    else:
        rep.write_atomic(output, text)
        _console(stderr=True).print(f"wrote {output}", markup=False)
    raise typer.Exit(result.exit_code)


class _PipeGuard:
    """stdout that a closed reader (`kvplan plan … | head -1`) cannot break: the rest of the
    output goes to /dev/null, quietly, and the command still exits with the plan's code
    (rich would otherwise exit 1 on a broken pipe)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._broke()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._broke()

    def _broke(self) -> None:
        self.broken = True
        try:  # later flushes of the real stream (at exit) then write to /dev/null
            fd = self._stream.fileno()
        except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation: in-memory
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        except OSError:
            self.broken = True  # nothing more is written either way
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno, …
        return getattr(self._stream, name)


def main() -> None:
    """Entry point: run the app, turn kvplan errors into messages and exit codes.

    Usage errors are typer's own (exit 2); KvplanError subclasses carry their exit code."""
    debug = os.environ.get("KVPLAN_DEBUG") == "1"
    guard = sys.stdout = _PipeGuard(sys.stdout)
    err_guard = sys.stderr = _PipeGuard(sys.stderr)  # `2>&1 | head -1` closes both
    try:
        _run(debug)
    finally:
        guard.flush()
        err_guard.flush()
        sys.stdout, sys.stderr = guard._stream, err_guard._stream


def _run(debug: bool) -> None:
    from .errors import KvplanError

    try:
        app()
    except KvplanError as e:
        if debug:
            raise
        sys.stderr.write(f"Error: {e}\n")
        sys.exit(e.exit_code)
    except ValueError as e:  # pydantic ValidationError: a value no layer validated (a bug)
        if debug or type(e).__name__ != "ValidationError":
            raise
        errs = e.errors()  # type: ignore[attr-defined]
        fields = ", ".join("--" + str(x["loc"][0]).replace("_", "-") for x in errs if x["loc"])
        sys.stderr.write(f"Error: invalid value for {fields or 'an input'}: {errs[0]['msg']}\n")
        sys.exit(2)
    except Exception as e:  # noqa: BLE001 - the contract: no traceback without KVPLAN_DEBUG
        if debug:
            raise
        sys.stderr.write(f"kvplan: internal error: {type(e).__name__}: {e}\n"
                         "  hint: rerun with KVPLAN_DEBUG=1 for the traceback and report it\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
