"""kvplan's command line: parse → call the planner → render. main() maps errors to exit codes.

Exit codes: 0 fits, 1 does not fit, 2 bad usage or input, 3 a model source is unavailable.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Plan GPU memory and KV-cache capacity for LLM serving, as vLLM will allocate it.",
)

JsonOpt = Annotated[bool, typer.Option("--json",
                                       help="Print JSON to stdout (warnings go to stderr).")]


def _human_int(text: str | int) -> int:
    """vLLM's human-readable integers for lengths and byte counts: 32768, 32k (×1000),
    32K (×1024), 1M, 1.5k (vllm/engine/arg_utils.py human_readable_int) — as `kvplan check`
    reads them in deployment files."""
    from .deploy.commands import human_int

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
        "--version", callback=_version, is_eager=True,
        help="Print kvplan's version and exit.")] = False,
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


def _option(name: str, *, bare: bool = False, **override: Any) -> inspect.Parameter:
    """The typer parameter of one option declared in knobs.OPTIONS (flags, type, help), with a
    command's own `override`s of the declaration; `bare`: the flag alone (no help text, plain
    integers), as `report` and `compare` take most knobs."""
    from .knobs import OPTIONS

    plain: dict[str, Any] = {"help": None, "human": False} if bare else {}
    o = dataclasses.replace(OPTIONS[name], **plain, **override)
    extra: dict[str, Any] = {"parser": _human_int, "metavar": "INT"} if o.human else {}
    base: Any = Path if o.path else o.type
    kind = base if o.required or o.default is not None else base | None
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY,
        default=inspect.Parameter.empty if o.required else o.default,
        annotation=Annotated[kind, typer.Option(*o.decls, help=o.help, **extra)])


def _own(name: str, kind: Any, *decls: str, help: str | None = None,  # noqa: A002 - typer's
         default: Any = None, human: bool = False) -> inspect.Parameter:
    """A command's own option, not a setting in the knob table (--output, --format, …)."""
    extra: dict[str, Any] = {"parser": _human_int, "metavar": "INT"} if human else {}
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, typer.Option(*decls, help=help, **extra)])


def _argument(name: str, help: str, kind: Any = str) -> inspect.Parameter:  # noqa: A002
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             annotation=Annotated[kind, typer.Argument(help=help)])


class _TableCommand:
    """A command function `fn(argument, **values)` whose signature, as typer reads it, is
    `params()`: its argument, then options mostly from knobs.OPTIONS, in --help order. Built on
    first use, so importing the CLI does not import the knob table (or pydantic)."""

    def __init__(self, fn: Callable[..., None],
                 params: Callable[[], list[inspect.Parameter]]) -> None:
        functools.update_wrapper(self, fn)
        self._fn, self._params = fn, params

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:
        return inspect.Signature(self._params(), return_annotation=None)

    def __call__(self, *args: Any, **values: Any) -> None:
        self._fn(*args, **values)


def _table_options(params: Callable[[], list[inspect.Parameter]]
                   ) -> Callable[[Callable[..., None]], _TableCommand]:
    def wrap(fn: Callable[..., None]) -> _TableCommand:
        return _TableCommand(fn, params)
    return wrap


def _plan_params() -> list[inspect.Parameter]:
    from .knobs import OPTIONS

    return [_argument("model", "Catalogue id or alias (see `kvplan models`), a local model "
                      "directory / config.json, or a Hub repo id."),
            *(_option(name) for name in OPTIONS)]  # the table is in plan's --help order


@app.command()
@_table_options(_plan_params)
def plan(model: str, **values: Any) -> None:
    """Plan one vLLM deployment: memory per GPU, KV capacity, fit, recommended flags.

    Example: kvplan plan meta-llama/Llama-3.1-8B-Instruct --gpu h100-sxm-80gb --max-model-len 32768
    """
    from .api import plan as make_plan
    from .knobs import KNOB_NAMES
    from .sources.limits import check_flags
    from .specs import Workload

    check_flags(values)  # nan, inf, 1e300, 400-digit values: exit 2 naming the flag
    workload = _workload(**{k: values[k] for k in Workload.model_fields})
    from .sources.catalog import resolve_gpu, resolve_model

    engine: str = values["engine"]
    options = {}
    if values["extra_llm_api_options"] is not None:
        from .deploy.commands import read_options_file
        from .engines.registry import ENGINES
        from .errors import InvalidInputError

        owner = ENGINES.get(engine.lower())
        if owner is None or owner.options_file_flag is None:
            raise InvalidInputError("--extra-llm-api-options is TensorRT-LLM's",
                                    hint="plan with --engine trtllm")
        options = read_options_file(owner, values["extra_llm_api_options"])
    g = resolve_gpu(values["gpu"])  # a bad --gpu fails before any network work
    with _progress_line() as progress:
        m = resolve_model(model, revision=values["revision"], token=values["token"],
                          offline=values["offline"], refresh=values["refresh"],
                          progress=progress)
    flags = {k: values[k] for k in KNOB_NAMES}
    result = make_plan(m, g, engine=engine.lower(), engine_version=values["engine_version"],
                       workload=workload, gpu_hour_price=values["gpu_hour_price"],
                       offline=values["offline"],
                       minimize_utilization=values["minimize_utilization"],
                       **{**flags, **options})
    if values["as_json"]:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        if result.problems:
            err = _console(stderr=True)
            for p in result.problems:
                err.print(f"{p.severity}: [{p.code}] {p.message}", markup=False)
    else:
        from .render.text import plan_table

        plan_table(result, _console())
    raise typer.Exit(0 if result.fits and not _errors(result) else 1)


def _compare_params() -> list[inspect.Parameter]:
    return [_argument("model", "Catalogue id, local path or Hub repo id."),
            _option("gpu", help="GPU id, alias or nvidia-smi name."),
            _option("tensor_parallel_size"),
            _option("max_model_len", help="context length for every engine (default: each "
                    "engine's own)"),
            *(_option(name, bare=True) for name in (
                "kv_cache_dtype", "gpu_memory_gib", "target_concurrency", "avg_input_tokens",
                "avg_output_tokens", "offline")),
            _option("as_json")]


@app.command()
@_table_options(_compare_params)
def compare(model: str, **values: Any) -> None:
    """The same model and GPU on vLLM, SGLang and TGI side by side: KV tokens, concurrency and
    each engine's recommended knobs. Without --tensor-parallel-size each engine is planned at the
    smallest TP at which it fits (the table says so when they differ). Exit 0 if any engine
    fits, 1 if none does.

    Example: kvplan compare meta-llama/Llama-3.1-8B-Instruct --gpu h100
    """
    from .api import plan as make_plan
    from .engines.registry import NAMES
    from .sources.catalog import resolve_gpu, resolve_model
    from .sources.limits import check_flags
    from .specs import Plan

    check_flags(values)
    workload = _workload(**{k: values[k] for k in (
        "target_concurrency", "avg_input_tokens", "avg_output_tokens")})
    g = resolve_gpu(values["gpu"])
    with _progress_line() as progress:
        m = resolve_model(model, offline=values["offline"], progress=progress)
    tensor_parallel_size = values["tensor_parallel_size"]

    def one(engine: str, tp: int | None) -> Plan:
        return make_plan(m, g, engine=engine, workload=workload, tensor_parallel_size=tp,
                         max_model_len=values["max_model_len"],
                         kv_cache_dtype=values["kv_cache_dtype"],
                         gpu_memory_gib=values["gpu_memory_gib"])

    plans = []
    for e in NAMES:
        p = one(e, tensor_parallel_size)
        rec_tp = p.recommendations.tensor_parallel_size.value
        if tensor_parallel_size is None and not p.fits and rec_tp and rec_tp != p.gpu.count:
            p = one(e, int(rec_tp))  # each column describes the deployment its serve line runs
        plans.append(p)
    if values["as_json"]:
        sys.stdout.write(json.dumps({"plans": [p.model_dump(mode="json") for p in plans]},
                                    indent=2) + "\n")
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


def _sweep_params() -> list[inspect.Parameter]:
    return [
        _argument("model", "Catalogue id, local path or Hub repo id."),
        _own("gpus", str | None, "--gpus", help="comma-separated GPU ids/aliases (default: the "
             "whole catalogue)"),
        _own("max_gpus", int, "--max-gpus", help="most GPUs per deployment (TP × PP)", default=8),
        _option("engine", help="vllm, sglang, tgi, a comma list, or all"),
        _option("engine_version", help="one engine's release (default: newest modelled)"),
        _option("quantization", help="weight formats to try: auto (the checkpoint's own), fp8 "
                "(online, fp8-native GPUs only); comma-separated"),
        _option("kv_cache_dtype", help="KV dtypes to try, e.g. auto,fp8"),
        _option("max_model_len", help="tokens", human=False),
        _option("dtype", bare=True),
        _option("gpu_memory_utilization", bare=True),
        _option("target_concurrency"),
        _option("avg_input_tokens"),
        _option("avg_output_tokens"),
        _option("slo_tpot_ms", help="time per output token limit (needs a latency model)"),
        _option("slo_ttft_ms", help="time to first token limit (needs a latency model)"),
        _own("prices", Path | None, "--prices", help="CSV (id,usd_per_hour) or YAML (id: usd) of "
             "your own US$ per GPU-hour"),
        _own("top", int, "--top", help="options shown in the table", default=10),
        _option("offline", bare=True),
        _option("as_json")]


@app.command()
@_table_options(_sweep_params)
def sweep(model: str, **values: Any) -> None:
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
        workload = Workload(**{k: values[k] for k in (
            "target_concurrency", "avg_input_tokens", "avg_output_tokens")})
    except ValidationError as e:
        fields = ", ".join("--" + str(err["loc"][0]).replace("_", "-") for err in e.errors())
        raise InvalidInputError(f"{fields} must be a positive integer") from None
    slo_tpot_ms, slo_ttft_ms, top = values["slo_tpot_ms"], values["slo_ttft_ms"], values["top"]
    from .sources.limits import check_flags

    check_flags({"slo_tpot_ms": slo_tpot_ms, "slo_ttft_ms": slo_ttft_ms})  # knob bounds: no inf
    if top < 1:
        raise InvalidInputError(f"--top must be at least 1, got {top}")
    gpu_list = None
    if values["gpus"] is not None:
        gpu_list = [g.strip() for g in values["gpus"].split(",") if g.strip()]
        if not gpu_list:
            raise InvalidInputError("--gpus lists no GPU", hint="e.g. --gpus h100,h200,mi300x")
    if gpu_list is not None:
        from .api import resolve_gpus

        resolve_gpus(gpu_list)  # bad --gpus fail before any network work
    from .sources.catalog import resolve_model

    with _progress_line() as progress:
        m = resolve_model(model, offline=values["offline"], progress=progress)
    result = make_sweep(m, gpus=gpu_list, workload=workload, **{k: values[k] for k in (
        "engine", "max_gpus", "quantization", "kv_cache_dtype", "slo_tpot_ms", "slo_ttft_ms",
        "prices", "engine_version", "max_model_len", "dtype", "gpu_memory_utilization")})
    if values["as_json"]:
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
    from .errors import UnknownModelError
    from .model.kv import layer_specs
    from .model.weights import parameter_count
    from .sources.catalog import find_model_entry, load_catalog_model, model_entries, suggest_models

    fmt = _list_format(fmt, as_json)
    show, needle = _show_or_filter(args, "models")
    if show is not None:
        entry = find_model_entry(show)
        if entry is None:
            raise UnknownModelError(show, suggest_models(show))
        m = load_catalog_model(entry)
        data = {"entry": entry.model_dump(), "spec": m.model_dump(),
                "parameters": parameter_count(m)}
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
    from .sources.catalog import gpu_specs, resolve_gpu

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


_POLICY = ("gpu", "engine_version", "min_concurrency", "min_kv_tokens", "min_headroom_gib",
           "max_gpu_memory_utilization", "min_max_model_len", "require_fp8_kv_cache")


def _check_params() -> list[inspect.Parameter]:
    policy = "policy (32k = 32000, 32K = 32768)"
    return [
        _argument("files", "Deployment files: Dockerfile, shell scripts, docker-compose, "
                  "Kubernetes/KServe manifests, vLLM --config YAML.", list[Path]),
        _option("gpu", help="GPU for commands whose file does not say (node selector or # "
                "kvplan: gpu=…)", required=False),
        _option("engine_version", help="vLLM version when the file does not say (image tag, "
                "vllm==…)"),
        _own("sets", list[str] | None, "--set", help="KEY=VALUE for a {{ KEY }}, "
             "{{ .Values.KEY }} or ${KEY} template (repeatable)"),
        _own("config", Path | None, "--config", help="policy file (default: ./kvplan.toml, else "
             "[tool.kvplan] in ./pyproject.toml)"),
        _own("min_concurrency", float | None, "--min-concurrency", help="policy: requests the KV "
             "cache must hold at max_model_len"),
        _own("min_kv_tokens", int | None, "--min-kv-tokens", help=policy, human=True),
        _own("min_headroom_gib", float | None, "--min-headroom-gib", help="policy: GiB per GPU "
             "left outside vLLM's budget"),
        _own("max_gpu_memory_utilization", float | None, "--max-gpu-memory-utilization",
             help="policy"),
        _own("min_max_model_len", int | None, "--min-max-model-len", help=policy, human=True),
        _own("require_fp8_kv_cache", bool | None, "--require-fp8-kv-cache", help="policy: every "
             "deployment uses --kv-cache-dtype fp8"),
        _option("offline", help="resolve Hub models from caches only (default: "
                "HF_HUB_OFFLINE)"),
        _own("fmt", str, "--format", help="table, json, github (Actions annotations) or markdown "
             "(PR comment, $GITHUB_STEP_SUMMARY)", default="table"),
        _option("as_json")]


@app.command()
@_table_options(_check_params)
def check(files: list[Path], **values: Any) -> None:
    """Check every serving command in deployment files: will it start, what KV capacity, does it
    meet the team's policies. Exit 0 all fit, 1 any does not fit or breaks a policy, 2 a file
    cannot be parsed, 3 a model source is unavailable.

    Example: kvplan check deploy/k8s.yaml Dockerfile --gpu h100 --min-concurrency 8
    """
    from pydantic import ValidationError

    from .deploy.check import Policy, check_files, load_policy
    from .errors import InvalidInputError

    fmt = "json" if values["as_json"] else values["fmt"]
    if fmt not in {"table", "json", "github", "markdown"}:
        raise InvalidInputError(f"unknown --format {fmt!r}",
                                hint="use table, json, github or markdown")
    sets = {}
    for item in values["sets"] or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InvalidInputError(f"--set {item!r} is not KEY=VALUE")
        sets[key.strip()] = value
    policy, _ = load_policy(values["config"], Path.cwd())
    overrides = {k: values[k] for k in _POLICY if values[k] is not None}
    try:
        policy = Policy.model_validate({**policy.model_dump(), **overrides})
    except ValidationError as e:
        err = e.errors()[0]
        raise InvalidInputError(f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg']}") from None
    report = check_files(files, policy=policy, sets=sets, offline=values["offline"])
    if fmt == "json":
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    elif fmt == "github":
        from .render.text import github_annotations

        sys.stdout.write(github_annotations(report))
    elif fmt == "markdown":
        from .render.report import check_markdown

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
    from .sources.catalog import local_gpu
    from .sources.nvml import local_gpus
    from .units import GiB

    rows = [(g, local_gpu(g.index)) for g in local_gpus()]
    if as_json:
        sys.stdout.write(json.dumps([{
            "index": g.index, "name": g.name,
            "catalogue_id": s.id if not s.id.startswith("local-") else None,
            "nvml_total_bytes": g.total_bytes, "cuda_total_bytes": s.cuda_total_bytes,
            "used_bytes": g.used_bytes, "free_bytes": g.free_bytes, "processes": g.processes}
            for g, s in rows], indent=2) + "\n")
        return
    out = _console()
    for g, s in rows:
        match = s.id if not s.id.startswith("local-") else "not in the catalogue"
        cuda_total = s.cuda_total_bytes or 0  # a local GPU's entry always has it (NVML)
        out.print(f"local:{g.index}  {g.name}  ({match})  CUDA total {cuda_total / GiB:.2f} GiB, "
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
            raise InvalidInputError(f"--{key.replace('_', '-')} must be a finite number, "
                                    f"got {value}")
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


_REPORT_KNOBS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                 "max_model_len", "max_num_seqs", "max_num_batched_tokens",
                 "gpu_memory_utilization", "dtype", "kv_cache_dtype", "quantization", "block_size",
                 "enforce_eager", "kv_cache_memory_bytes", "gpu_memory_gib")


def _report_params() -> list[inspect.Parameter]:
    return [_argument("target", "A model (as for `kvplan plan`), or a deployment file or "
                      "directory (as for `kvplan check`)."),
            _own("output", Path | None, "--output", "-o", help="report file: .html "
                 "(self-contained) or .md; default: stdout"),
            _own("fmt", str | None, "--format", help="md or html (default: from the -o suffix, "
                 "else md)"),
            _option("gpu", help="GPU id, alias or nvidia-smi name", required=False),
            *(_option(name, bare=True) for name in (
                *_REPORT_KNOBS, "engine", "engine_version", "target_concurrency",
                "avg_input_tokens", "avg_output_tokens", "revision", "offline")),
            _own("generated_at", str | None, "--generated-at", help="a date or note to print in "
                 "the report (none by default, so the same inputs give byte-identical reports)")]


@app.command()
@_table_options(_report_params)
def report(target: str, **values: Any) -> None:
    """Write a sizing report (Markdown, or one self-contained HTML file with charts) for one
    deployment, or for every serving command `kvplan check` finds. Exit codes as for plan/check.

    Example: kvplan report llama-3.1-70b-instruct --gpu h100 -tp 4 -o sizing.html
    """
    import shlex

    from .render import report as rep

    output = values["output"]
    name = rep.output_format(output, values["fmt"])
    line = shlex.join(["kvplan", "report", *sys.argv[sys.argv.index("report") + 1:]]
                      if "report" in sys.argv else ["kvplan", "report", target])
    path = Path(target)
    if path.exists() and not (path / "config.json").exists() and path.suffix != ".json":
        result = _report_on_files(target, values, line)
    else:
        result = _report_on_model(target, values, line)
    text = rep.render(result, name)
    if output is None:
        sys.stdout.write(text)
    else:
        rep.write_atomic(output, text)
        _console(stderr=True).print(f"wrote {output}", markup=False)
    raise typer.Exit(result.exit_code)


def _report_on_files(target: str, values: dict[str, Any], line: str) -> Any:
    """The report of every serving command `kvplan check` finds in `target`."""
    from . import __version__
    from .deploy.check import Policy, check_files, load_policy
    from .errors import InvalidInputError
    from .render import report as rep

    policy, _ = load_policy(None, Path.cwd())
    policy = Policy.model_validate({**policy.model_dump(), **{
        k: values[k] for k in ("gpu", "engine_version") if values[k] is not None}})
    checked = check_files([Path(target)], policy=policy, sets={}, offline=values["offline"])
    if not any(d.plan for d in checked.deployments):
        why = "; ".join(p.message for d in checked.deployments for p in d.problems)
        raise InvalidInputError(f"{target}: nothing to plan ({why})")
    return rep.from_check(checked, command_line=line, version=__version__,
                          generated_at=values["generated_at"])


def _report_on_model(target: str, values: dict[str, Any], line: str) -> Any:
    """The report of one model's deployment, with the sweep's cheapest alternatives."""
    from pydantic import ValidationError

    from . import __version__
    from .errors import InvalidInputError
    from .render import report as rep
    from .sources.catalog import resolve_gpu, resolve_model
    from .specs import Workload

    try:
        workload = Workload(**{k: values[k] for k in (
            "target_concurrency", "avg_input_tokens", "avg_output_tokens")})
    except ValidationError as e:
        fields = ", ".join("--" + str(err["loc"][0]).replace("_", "-") for err in e.errors())
        raise InvalidInputError(f"{fields} must be a positive integer") from None
    if values["gpu"] is None:
        raise InvalidInputError("--gpu is required to report on a model",
                                hint="e.g. --gpu h100; deployment files may name their own GPU")
    g = resolve_gpu(values["gpu"])
    with _progress_line() as progress:
        m = resolve_model(target, revision=values["revision"], offline=values["offline"],
                          progress=progress)
    from .api import report as plan_report

    data = plan_report(m, g, engine=values["engine"].lower(),
                       engine_version=values["engine_version"], workload=workload,
                       **{k: values[k] for k in _REPORT_KNOBS})
    return rep.for_model(data, command_line=line, version=__version__,
                         generated_at=values["generated_at"])


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


class _LazyCommands(Mapping[str, Any]):
    """The commands of the click group, each built from its function's signature when first
    looked up: a call builds only the command it runs (`kvplan --help` builds them all)."""

    def __init__(self, infos: list[Any]) -> None:
        from typer.main import get_command_name

        self._infos = {info.name or get_command_name(info.callback.__name__): info
                       for info in infos}
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            from typer.main import get_command_from_info

            self._built[name] = get_command_from_info(
                self._infos[name], pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode)
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)


def click_app() -> Any:
    """The click group `kvplan` runs: `app`'s callback and help, its commands built lazily
    (typer.main.get_command(app) would build the parameters of every command)."""
    from typer.main import get_group

    registered, app.registered_commands = app.registered_commands, []
    try:
        group = get_group(app)
    finally:
        app.registered_commands = registered
    group.commands = _LazyCommands(registered)  # type: ignore[assignment]
    return group


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
        click_app()()
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
