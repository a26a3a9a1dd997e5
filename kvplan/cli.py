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
from typing import Annotated, Any, Optional, TextIO

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Plan GPU memory and KV-cache capacity for LLM serving, as vLLM will allocate it.",
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout (warnings go to stderr).")]


def _console(stderr: bool = False):  # noqa: ANN202 - rich imported lazily
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


@contextmanager
def _progress_line() -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while the Hub is read (a plain line when stderr is not a terminal)."""
    console = _console(stderr=True)
    status = None

    def show(message: str) -> None:
        nonlocal status
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
    tensor_parallel_size: Annotated[Optional[int], typer.Option("--tensor-parallel-size", "-tp")] = None,
    pipeline_parallel_size: Annotated[Optional[int], typer.Option("--pipeline-parallel-size", "-pp")] = None,
    data_parallel_size: Annotated[Optional[int], typer.Option("--data-parallel-size", "-dp")] = None,
    max_model_len: Annotated[Optional[int], typer.Option("--max-model-len", help="tokens")] = None,
    max_num_seqs: Annotated[Optional[int], typer.Option("--max-num-seqs")] = None,
    max_num_batched_tokens: Annotated[Optional[int], typer.Option("--max-num-batched-tokens")] = None,
    max_input_tokens: Annotated[Optional[int], typer.Option(
        "--max-input-tokens", help="TGI only: longest prompt (default: --max-model-len − 1)")] = None,
    gpu_memory_utilization: Annotated[Optional[float], typer.Option(
        "--gpu-memory-utilization", help="fraction of the device total, (0, 1]")] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help="auto, bfloat16, float16, float32")] = None,
    kv_cache_dtype: Annotated[Optional[str], typer.Option(
        "--kv-cache-dtype", help="auto, fp8, fp8_e4m3, fp8_e5m2")] = None,
    quantization: Annotated[Optional[str], typer.Option("--quantization", "-q",
                                                        help="online quantization: fp8")] = None,
    block_size: Annotated[Optional[int], typer.Option("--block-size", help="tokens per KV block")] = None,
    enforce_eager: Annotated[Optional[bool], typer.Option("--enforce-eager", help="no CUDA graphs")] = None,
    enable_prefix_caching: Annotated[Optional[bool], typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching",
        help="vLLM default on; off keeps Mamba/GDN states at one page per request")] = None,
    disable_hybrid_kv_cache_manager: Annotated[Optional[bool], typer.Option(
        "--disable-hybrid-kv-cache-manager", help="allocate sliding/chunked layers as full attention")] = None,
    enable_expert_parallel: Annotated[Optional[bool], typer.Option(
        "--enable-expert-parallel", help="MoE experts split over TP × DP ranks")] = None,
    usage_context: Annotated[Optional[str], typer.Option(
        "--usage-context", help="serve (vllm serve, default) or llm (offline LLM class): batch defaults")] = None,
    kv_cache_memory_bytes: Annotated[Optional[int], typer.Option(
        "--kv-cache-memory-bytes", help="fixed KV budget per GPU, bytes (ignores utilization)")] = None,
    gpu_memory_gib: Annotated[Optional[float], typer.Option(
        "--gpu-memory-gib", help="override the device total (GiB), e.g. the total_gpu_memory "
        "your vLLM log prints")] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="vllm, sglang or tgi (generic flags map to the engine's own knobs)")] = "vllm",
    engine_version: Annotated[Optional[str], typer.Option(
        "--engine-version", help="engine release to model (default: newest modelled)")] = None,
    target_concurrency: Annotated[Optional[int], typer.Option(
        "--target-concurrency", help="requests that must fit in the KV cache at once")] = None,
    avg_input_tokens: Annotated[Optional[int], typer.Option("--avg-input-tokens")] = None,
    avg_output_tokens: Annotated[Optional[int], typer.Option("--avg-output-tokens")] = None,
    revision: Annotated[Optional[str], typer.Option(
        "--revision", help="Hub branch, tag or commit (fetches from the Hub even for catalogue ids)")] = None,
    token: Annotated[Optional[str], typer.Option(
        "--token", help="Hub token for gated/private repos (default: HF_TOKEN or your saved login)")] = None,
    offline: Annotated[Optional[bool], typer.Option(
        "--offline", help="no network: kvplan's and huggingface_hub's caches only "
        "(default: HF_HUB_OFFLINE)")] = None,
    refresh: Annotated[bool, typer.Option(
        "--refresh", help="fetch the Hub repo again instead of using kvplan's cache")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Plan one vLLM deployment: memory per GPU, KV capacity, fit, recommended flags.

    Example: kvplan plan meta-llama/Llama-3.1-8B-Instruct --gpu h100-sxm-80gb --max-model-len 32768
    """
    from pydantic import ValidationError

    from .errors import InvalidInputError
    from .limits import check_flags
    from .planner import plan as make_plan
    from .specs import Workload

    check_flags(dict(locals()))  # nan, inf, 1e300, 400-digit values: exit 2 naming the flag
    try:
        workload = Workload(target_concurrency=target_concurrency, avg_input_tokens=avg_input_tokens,
                            avg_output_tokens=avg_output_tokens)
    except ValidationError as e:
        fields = ", ".join("--" + str(err["loc"][0]).replace("_", "-") for err in e.errors())
        raise InvalidInputError(f"{fields} must be a positive integer") from None
    from .catalog import resolve_gpu, resolve_model

    g = resolve_gpu(gpu)  # a bad --gpu fails before any network work
    with _progress_line() as progress:
        m = resolve_model(model, revision=revision, token=token, offline=offline, refresh=refresh,
                          progress=progress)
    result = make_plan(
        m, g, engine=engine.lower(), engine_version=engine_version, workload=workload,
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size, max_model_len=max_model_len,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        max_input_tokens=max_input_tokens,
        gpu_memory_utilization=gpu_memory_utilization, dtype=dtype, kv_cache_dtype=kv_cache_dtype,
        quantization=quantization, block_size=block_size, enforce_eager=enforce_eager,
        enable_prefix_caching=enable_prefix_caching,
        disable_hybrid_kv_cache_manager=disable_hybrid_kv_cache_manager,
        enable_expert_parallel=enable_expert_parallel, usage_context=usage_context,
        kv_cache_memory_bytes=kv_cache_memory_bytes, gpu_memory_gib=gpu_memory_gib,
    )
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        err = _console(stderr=True)
        for p in result.problems:
            err.print(f"{p.severity}: [{p.code}] {p.message}", markup=False)
    else:
        from .render import plan_table

        plan_table(result, _console())
    raise typer.Exit(0 if result.fits else 1)


@app.command()
def compare(
    model: Annotated[str, typer.Argument(help="Catalogue id, local path or Hub repo id.")],
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id, alias or nvidia-smi name.")],
    tensor_parallel_size: Annotated[Optional[int], typer.Option("--tensor-parallel-size", "-tp")] = None,
    max_model_len: Annotated[Optional[int], typer.Option(
        "--max-model-len", help="context length for every engine (default: each engine's own)")] = None,
    kv_cache_dtype: Annotated[Optional[str], typer.Option("--kv-cache-dtype")] = None,
    gpu_memory_gib: Annotated[Optional[float], typer.Option("--gpu-memory-gib")] = None,
    target_concurrency: Annotated[Optional[int], typer.Option("--target-concurrency")] = None,
    avg_input_tokens: Annotated[Optional[int], typer.Option("--avg-input-tokens")] = None,
    avg_output_tokens: Annotated[Optional[int], typer.Option("--avg-output-tokens")] = None,
    offline: Annotated[Optional[bool], typer.Option("--offline")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The same model and GPU on vLLM, SGLang and TGI side by side: KV tokens, concurrency and
    each engine's recommended knobs. Exit 0 if any engine fits, 1 if none does.

    Example: kvplan compare meta-llama/Llama-3.1-8B-Instruct --gpu h100
    """
    from pydantic import ValidationError

    from .catalog import resolve_gpu, resolve_model
    from .errors import InvalidInputError
    from .limits import check_flags
    from .planner import ENGINES
    from .planner import plan as make_plan
    from .specs import Workload

    check_flags(dict(locals()))
    try:
        workload = Workload(target_concurrency=target_concurrency, avg_input_tokens=avg_input_tokens,
                            avg_output_tokens=avg_output_tokens)
    except ValidationError as e:
        fields = ", ".join("--" + str(err["loc"][0]).replace("_", "-") for err in e.errors())
        raise InvalidInputError(f"{fields} must be a positive integer") from None
    g = resolve_gpu(gpu)
    with _progress_line() as progress:
        m = resolve_model(model, offline=offline, progress=progress)
    plans = [make_plan(m, g, engine=e, workload=workload, tensor_parallel_size=tensor_parallel_size,
                       max_model_len=max_model_len, kv_cache_dtype=kv_cache_dtype,
                       gpu_memory_gib=gpu_memory_gib) for e in ENGINES]
    if as_json:
        sys.stdout.write(json.dumps({"plans": [p.model_dump(mode="json") for p in plans]}, indent=2) + "\n")
    else:
        from .render import compare_table

        compare_table(plans, _console())
    raise typer.Exit(0 if any(p.fits for p in plans) else 1)


@app.command()
def models(
    args: Annotated[Optional[list[str]], typer.Argument(
        help="A substring to filter by, or `show ID` for one entry.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the bundled models (`kvplan models qwen`), or show one (`kvplan models show ID`)."""
    from .catalog import find_model_entry, load_catalog_model, model_entries, suggest_models
    from .errors import UnknownModelError
    from .kv import layer_specs
    from .weights import parameter_count

    show, needle = _show_or_filter(args, "models")
    if show is not None:
        entry = find_model_entry(show)
        if entry is None:
            raise UnknownModelError(show, suggest_models(show))
        m = load_catalog_model(entry)
        data = {"entry": entry.model_dump(), "spec": m.model_dump(), "parameters": parameter_count(m)}
        if as_json:
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            from rich.pretty import Pretty

            _console().print(Pretty(data))
        return
    rows = []
    for entry in model_entries():
        if needle and needle not in entry.id.lower() and not any(needle in a for a in entry.aliases):
            continue
        m = load_catalog_model(entry)
        dt = m.dtype if m.dtype != "float32" else "bfloat16"
        specs = layer_specs(m, range(m.num_layers), tp=1, kv_dtype=dt, state_dtype=dt,
                            hybrid_manager=True)
        rows.append((entry, m, parameter_count(m), sum(x.bytes_per_token for x in specs)))
    if as_json:
        from .render import attention_layout

        sys.stdout.write(json.dumps([{"id": e.id, "model_type": m.model_type,
                                      "attention": attention_layout(m), "parameters": p,
                                      "kv_bytes_per_token": kv, "aliases": e.aliases}
                                     for e, m, p, kv in rows], indent=2) + "\n")
    else:
        from .render import models_table

        models_table(rows, _console())


@app.command()
def gpus(
    args: Annotated[Optional[list[str]], typer.Argument(
        help="A substring to filter by, or `show ID` for one entry.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the bundled GPUs (`kvplan gpus h100`), or show one (`kvplan gpus show h200`)."""
    from .catalog import gpu_specs, resolve_gpu

    show, needle = _show_or_filter(args, "gpus")
    if show is not None:
        g = resolve_gpu(show)
        if as_json:
            sys.stdout.write(g.model_dump_json(indent=2) + "\n")
        else:
            from rich.pretty import Pretty

            _console().print(Pretty(g.model_dump()))
        return
    rows = [g for g in gpu_specs() if not needle or needle in g.id
            or any(needle in n.lower() for n in (g.name, *g.smi_names, *g.aliases))]
    if as_json:
        sys.stdout.write(json.dumps([g.model_dump() for g in rows], indent=2) + "\n")
    else:
        from .render import gpus_table

        gpus_table(rows, _console())


@app.command()
def check(
    files: Annotated[list[Path], typer.Argument(help="Deployment files: Dockerfile, shell scripts, "
                                                "docker-compose, Kubernetes/KServe manifests, vLLM --config YAML.")],
    gpu: Annotated[Optional[str], typer.Option(
        "--gpu", help="GPU for commands whose file does not say (node selector or # kvplan: gpu=…)")] = None,
    engine_version: Annotated[Optional[str], typer.Option(
        "--engine-version", help="vLLM version when the file does not say (image tag, vllm==…)")] = None,
    sets: Annotated[Optional[list[str]], typer.Option(
        "--set", help="KEY=VALUE for a {{ KEY }}, {{ .Values.KEY }} or ${KEY} template (repeatable)")] = None,
    config: Annotated[Optional[Path], typer.Option(
        "--config", help="policy file (default: ./kvplan.toml, else [tool.kvplan] in ./pyproject.toml)")] = None,
    min_concurrency: Annotated[Optional[float], typer.Option(
        "--min-concurrency", help="policy: requests the KV cache must hold at max_model_len")] = None,
    min_kv_tokens: Annotated[Optional[int], typer.Option("--min-kv-tokens", help="policy")] = None,
    min_headroom_gib: Annotated[Optional[float], typer.Option(
        "--min-headroom-gib", help="policy: GiB per GPU left outside vLLM's budget")] = None,
    max_gpu_memory_utilization: Annotated[Optional[float], typer.Option(
        "--max-gpu-memory-utilization", help="policy")] = None,
    min_max_model_len: Annotated[Optional[int], typer.Option("--min-max-model-len", help="policy")] = None,
    require_fp8_kv_cache: Annotated[Optional[bool], typer.Option(
        "--require-fp8-kv-cache", help="policy: every deployment uses --kv-cache-dtype fp8")] = None,
    offline: Annotated[Optional[bool], typer.Option(
        "--offline", help="resolve Hub models from caches only (default: HF_HUB_OFFLINE)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json or github (Actions annotations)")] = "table",
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
    if fmt not in {"table", "json", "github"}:
        raise InvalidInputError(f"unknown --format {fmt!r}", hint="use table, json or github")
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
        from .render import github_annotations

        sys.stdout.write(github_annotations(report))
    else:
        from .render import check_table

        check_table(report, _console())
    raise typer.Exit(report.exit_code)


@app.command()
def schema() -> None:
    """Print the JSON Schema of `kvplan plan --json`."""
    from .specs import Plan

    sys.stdout.write(json.dumps(Plan.model_json_schema(), indent=2) + "\n")


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
    except Exception as e:  # noqa: BLE001 - the contract: no traceback without KVPLAN_DEBUG
        if debug:
            raise
        sys.stderr.write(f"kvplan: internal error: {type(e).__name__}: {e}\n"
                         "  hint: rerun with KVPLAN_DEBUG=1 for the traceback and report it\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
