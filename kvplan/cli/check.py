"""`kvplan check`: every serving command in deployment files, against policies."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer

from .common import argument, console, option, own, table_options, write

_POLICY = ("gpu", "gpu_memory_gib", "engine_version", "min_concurrency", "min_kv_tokens",
           "min_headroom_gib", "max_gpu_memory_utilization", "min_max_model_len",
           "require_fp8_kv_cache")


def _check_params() -> list[inspect.Parameter]:
    from ..engines import registry

    default = registry.get(registry.DEFAULT)
    config = [e.label for e in map(registry.get, registry.names()) if e.syntax.config_yaml]
    policy = "policy (32k = 32000, 32K = 32768)"
    return [
        argument("files", "Deployment files, or folders of them: Dockerfile, shell scripts, "
                 "docker-compose, Kubernetes/KServe manifests"
                 + "".join(f", {label} --config YAML" for label in config)
                 + "; - reads standard input (helm template … | kvplan check -), as do "
                 "/dev/stdin and /dev/fd/N.", list[Path]),
        option("gpu", help="GPU for commands whose file does not say (node selector or # "
                "kvplan: gpu=…)", required=False),
        option("gpu_memory_gib", help="device total (GiB, as your engine log prints it) for "
               "commands whose file does not say (# kvplan: gpu-memory-gib=…)"),
        option("engine_version", help=f"{default.label} release for its commands whose file "
               "does not say (by image tag or pip pin); other engines' commands: their file's, "
               "else the newest modelled"),
        own("sets", list[str] | None, "--set", help="KEY=VALUE for a {{ KEY }}, "
             "{{ .Values.KEY }} or ${KEY} template (repeatable)"),
        own("config", Path | None, "--config", help="policy file (default: ./kvplan.toml, else "
             "[tool.kvplan] in ./pyproject.toml)"),
        own("min_concurrency", float | None, "--min-concurrency", help="policy: requests the KV "
             "cache must hold at max_model_len"),
        own("min_kv_tokens", int | None, "--min-kv-tokens", help=policy, human=True),
        own("min_headroom_gib", float | None, "--min-headroom-gib", help="policy: GiB per GPU "
             "left outside the engine's memory budget"),
        own("max_gpu_memory_utilization", float | None, "--max-gpu-memory-utilization",
             help="policy: the highest budget fraction a command may set"),
        own("min_max_model_len", int | None, "--min-max-model-len", help=policy, human=True),
        own("require_fp8_kv_cache", bool | None, "--require-fp8-kv-cache", help="policy: every "
             "deployment uses --kv-cache-dtype fp8"),
        option("offline", help="resolve Hub models from caches only (default: "
                "HF_HUB_OFFLINE)"),
        own("fmt", str, "--format", help="table, json, github (Actions annotations) or markdown "
             "(PR comment, $GITHUB_STEP_SUMMARY)", default="table"),
        option("as_json"),
        # the latency figures of each command's plan, as plan/compare/sweep/report make them
        option("calibration")]


@table_options(_check_params)
def check(files: list[Path], **values: Any) -> None:
    """Check every serving command in deployment files: will it start, what KV capacity, does it
    meet the team's policies. Exit 0 all fit, 1 any does not fit or breaks a policy, 2 a file
    cannot be parsed or holds a value kvplan refuses (or bad usage), 3 a model source is
    unavailable.

    \b
    Example: kvplan check deploy/k8s.yaml Dockerfile --gpu h100 --min-concurrency 8
    Example: helm template my-chart | kvplan check - --gpu h100
    """
    from pydantic import ValidationError

    from ..deploy.check import Policy, check_files, load_policy
    from ..errors import InvalidInputError
    from ..versions import normalize_version

    fmt = "json" if values["as_json"] else values["fmt"]
    if fmt not in {"table", "json", "github", "markdown"}:
        raise InvalidInputError(f"unknown --format {fmt!r}",
                                hint="use table, json, github or markdown")
    if sum(str(f) == "-" for f in files) > 1:
        raise InvalidInputError("'-' (standard input) is named more than once; it can be read "
                                "once", hint="name it once: helm template … | kvplan check -")
    sets = {}
    for item in values["sets"] or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InvalidInputError(f"--set {item!r} is not KEY=VALUE")
        sets[key.strip()] = value
    policy, _ = load_policy(values["config"], Path.cwd())
    overrides = {k: values[k] for k in _POLICY if values[k] is not None}
    if "engine_version" in overrides:
        overrides["engine_version"] = normalize_version(overrides["engine_version"])
    try:
        policy = Policy.model_validate({**policy.model_dump(), **overrides})
    except ValidationError as e:
        err = e.errors()[0]
        raise InvalidInputError(f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg']}") from None
    report = check_files(files, policy=policy, sets=sets, offline=values["offline"])
    if fmt == "json":
        write(report.model_dump_json(indent=2) + "\n")
    elif fmt == "github":
        from ..render.text import github_annotations

        write(github_annotations(report))
    elif fmt == "markdown":
        from ..render.report import check_markdown

        write(check_markdown(report))
    else:
        from ..render.text import check_table

        check_table(report, console())
    raise typer.Exit(report.exit_code)
