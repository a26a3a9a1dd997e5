"""`kvplan plan`: one deployment (`kvplan compare`, the same on every engine: cli/compare.py)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer

from .common import (
    argument,
    console,
    demand_of,
    options_file,
    own,
    planning_options,
    resolve_model,
    table_options,
    workload_of,
    write,
)


def _plan_params() -> list[inspect.Parameter]:
    return [argument("model", "Catalogue id or alias (see `kvplan models`), a local model "
                     "directory / config.json, or a Hub repo id."),
            *planning_options(skip=("rank_on",)),  # plan's --help order; a sweep ranks
            own("output", Path | None, "--output", "-o", help="with --emit: the file to write "
                "(default: stdout)")]


@table_options(_plan_params)
def plan(model: str, **values: Any) -> None:
    """Plan one deployment (vLLM unless --engine): memory per GPU, KV capacity, fit, flags.

    Example: kvplan plan meta-llama/Llama-3.1-8B-Instruct --gpu h100-sxm-80gb --max-model-len 32768
    """
    from ..api import plan as make_plan
    from ..errors import InvalidInputError, result_exit_code
    from ..knobs import KNOB_NAMES
    from ..sources.limits import check_flags

    check_flags(values)  # nan, inf, 1e300, 400-digit values: exit 2 naming the flag
    from ..sources.catalog import resolve_gpu

    if values["disagg"] or _pool_flags_without_disagg(values):  # it refuses the traffic files
        if values["emit"] or values["output"]:  # was ignored: the pools' table, exit 0
            raise InvalidInputError(
                "--emit writes one deployment's file; --disagg plans two pools (prefill and "
                "decode), which no single --emit format describes", code="disagg-flag",
                knob="emit", hint="drop --emit, or emit each pool: `kvplan plan … -tp N --emit "
                "FORMAT` with the pool's layout from the --disagg table")
        _plan_disagg(model, values, workload_of(values))
    demand = demand_of(values)  # its files read once: the workload's means come from them
    workload = workload_of(values, demand)
    engine: str = values["engine"]
    options = options_file(engine, values["extra_llm_api_options"])
    g = resolve_gpu(values["gpu"])  # a bad --gpu fails before any network work
    m = resolve_model(model, revision=values["revision"], token=values["token"],
                      offline=values["offline"], refresh=values["refresh"])
    flags = {k: values[k] for k in KNOB_NAMES}
    result = make_plan(m, g, engine=engine.lower(), engine_version=values["engine_version"],
                       workload=workload, gpu_hour_price=values["gpu_hour_price"],
                       offline=values["offline"],
                       minimize_utilization=values["minimize_utilization"],
                       demand=demand, **{**flags, **options})
    if values["emit"] or values["output"]:
        emit_file(result, values["emit"], values["output"])
        if values["output"] is None:  # the manifest is stdout
            raise typer.Exit(result_exit_code(result.fits, (p.severity for p in result.problems)))
    if values["as_json"]:
        write(result.model_dump_json(indent=2) + "\n")
        if result.problems:
            err = console(stderr=True)
            for p in result.problems:
                err.print(f"{p.severity}: [{p.code}] {p.message}", markup=False)
    else:
        from ..render.text import plan_table

        plan_table(result, console())
    raise typer.Exit(result_exit_code(result.fits, (p.severity for p in result.problems)))


def disagg_options() -> tuple[str, ...]:
    """The options only `plan --disagg` reads (report and compare leave them out)."""
    from ..knobs import OPTIONS

    return tuple(n for n in OPTIONS if n in ("disagg", "kv_link_gbps")
                 or n.startswith(("prefill_", "decode_")))


def _pool_flags_without_disagg(values: dict[str, Any]) -> bool:
    """A per-pool flag given without --disagg is an error naming it."""
    from ..errors import InvalidInputError

    given = [n for n in disagg_options() if n != "disagg" and values.get(n) is not None]
    if given:
        flags = ", ".join("--" + n.replace("_", "-") for n in given)
        raise InvalidInputError(f"{flags} {'applies' if len(given) == 1 else 'apply'} only to a "
                                "disaggregated plan (--disagg)",
                                hint="add --disagg, or drop them", code="disagg-flag",
                                knob=given[0])
    return False


def _plan_disagg(model: str, values: dict[str, Any], workload: Any) -> None:
    """`kvplan plan --disagg`: both pools, the transfer, the service (exit 0 fits, 1 not)."""
    from ..api import plan_disagg
    from ..errors import InvalidInputError, result_exit_code
    from ..knobs import KNOB_NAMES
    from ..sources.catalog import resolve_gpu

    # the request-rate simulation and the budget search are the aggregated plan's: refused here
    # rather than dropped (--dataset's mean lengths do apply: workload_of sets them)
    unused = [n for n in ("request_rate", "slo_percentile", "burstiness", "random_range_ratio",
                          "traffic", "trace", "lengths_file") if values.get(n) is not None]
    unused += ["minimize_utilization"] if values.get("minimize_utilization") else []
    if unused:
        named = ", ".join("--" + n.replace("_", "-") for n in unused)
        raise InvalidInputError(f"{named}: not modelled for a disaggregated plan, which plans "
                                "the closed loop of --target-concurrency", code="disagg-flag",
                                hint="drop them, or plan the aggregated deployment (no --disagg)",
                                knob=unused[0])
    engine: str = values["engine"].lower()
    options = options_file(engine, values["extra_llm_api_options"])
    for key in ("gpu", "prefill_gpu", "decode_gpu"):  # bad GPUs fail before any network work
        if values.get(key) is not None:
            resolve_gpu(values[key])
    m = resolve_model(model, revision=values["revision"], token=values["token"],
                      offline=values["offline"], refresh=values["refresh"])
    flags = {k: values[k] for k in KNOB_NAMES}
    pools = {k: values[k] for k in disagg_options() if k != "disagg"}
    result = plan_disagg(m, values["gpu"], engine=engine, engine_version=values["engine_version"],
                         workload=workload, gpu_hour_price=values["gpu_hour_price"],
                         offline=values["offline"], **pools, **{**flags, **options})
    if values["as_json"]:
        write(result.model_dump_json(indent=2) + "\n")
        err = console(stderr=True)
        for p in result.problems:
            err.print(f"{p.severity}: [{p.code}] {p.message}", markup=False)
    else:
        from ..render.disagg import disagg_text

        disagg_text(result, console())
    raise typer.Exit(result_exit_code(result.fits, (p.severity for p in result.problems)))
def emit_file(result: Any, fmt: str | None, output: Path | None) -> None:
    """`--emit FORMAT [-o FILE]`: the plan's deployment file, to FILE or stdout."""
    from ..deploy.emit import emit
    from ..errors import InvalidInputError

    if not fmt:
        raise InvalidInputError("-o/--output needs --emit FORMAT",
                                hint="e.g. --emit k8s -o deploy.yaml")
    text = emit(result, fmt)
    if output is None:
        write(text)
        return
    from ..render.report import write_atomic

    write_atomic(output, text, f"the {fmt} deployment", "deploy.yaml")
    console(stderr=True).print(f"wrote {output} ({fmt})", markup=False)
