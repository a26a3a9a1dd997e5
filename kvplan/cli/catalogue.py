"""`kvplan models` and `kvplan gpus`: the bundled catalogue (and this machine's GPUs)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from .common import FormatOpt, JsonOpt, console, write


def _list_format(fmt: str, as_json: bool) -> str:
    from ..errors import InvalidInputError

    fmt = "json" if as_json else fmt.lower()
    if fmt not in {"table", "tsv", "json"}:
        raise InvalidInputError(f"unknown --format {fmt!r}", hint="use table, tsv or json")
    return fmt


def _nothing_matched(noun: str, needle: str, suggestions: list[str]) -> None:
    """A filter that matches nothing is bad input (exit 2), as an unknown id is for `plan`."""
    from ..errors import KvplanError

    raise KvplanError(f"no catalogue {noun} matches {needle!r}",
                      hint=(f"did you mean {', '.join(repr(x) for x in suggestions)}? "
                            if suggestions else "") + f"`kvplan {noun}s` lists them all")


def _local_gpus(as_json: bool) -> None:
    """`kvplan gpus --local`: NVML's view, each GPU matched to its catalogue entry."""
    from ..sources.catalog import local_gpu
    from ..sources.nvml import local_gpus
    from ..units import GiB

    rows = [(g, local_gpu(g.index)) for g in local_gpus()]
    if as_json:
        write(json.dumps([{
            "index": g.index, "name": g.name,
            "catalogue_id": s.id if not s.id.startswith("local-") else None,
            "nvml_total_bytes": g.total_bytes, "cuda_total_bytes": s.cuda_total_bytes,
            "used_bytes": g.used_bytes, "free_bytes": g.free_bytes, "processes": g.processes}
            for g, s in rows], indent=2) + "\n")
        return
    out = console()
    for g, s in rows:
        match = s.id if not s.id.startswith("local-") else "not in the catalogue"
        cuda_total = s.cuda_total_bytes or 0  # a local GPU's entry always has it (NVML)
        out.print(f"local:{g.index}  {g.name}  ({match})  CUDA total {cuda_total / GiB:.2f} GiB, "
                  f"in use {g.used_bytes / GiB:.2f} GiB by {g.processes} process(es), "
                  f"free {g.free_bytes / GiB:.2f} GiB", markup=False, highlight=False)


def _show_or_filter(args: list[str] | None, noun: str) -> tuple[str | None, str]:
    """`kvplan NOUN show ID` → (ID, ""); `kvplan NOUN [FILTER]` → (None, filter)."""
    from ..errors import InvalidInputError

    args = args or []
    if args and args[0] == "show":
        if len(args) != 2:
            raise InvalidInputError(f"usage: kvplan {noun} show ID")
        return args[1], ""
    if len(args) > 1:
        raise InvalidInputError(f"usage: kvplan {noun} [FILTER] or kvplan {noun} show ID")
    return None, args[0].lower() if args else ""


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
    from ..errors import UnknownModelError
    from ..model.kv import layer_specs
    from ..model.weights import parameter_count
    from ..sources.catalog import (
        find_model_entry,
        load_catalog_model,
        model_entries,
        suggest_models,
    )

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
            write(json.dumps(data, indent=2) + "\n")
        else:
            from ..render.text import model_detail

            model_detail(entry, m, parameter_count(m), console(), tsv=fmt == "tsv")
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
        from ..render.text import attention_layout

        write(json.dumps([{"id": e.id, "model_type": m.model_type,
                                      "attention": attention_layout(m), "parameters": p,
                                      "kv_bytes_per_token": kv, "aliases": e.aliases}
                                     for e, m, p, kv in rows], indent=2) + "\n")
    else:
        from ..render.text import models_table

        models_table(rows, console(), tsv=fmt == "tsv")


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
    from ..sources.catalog import gpu_specs, resolve_gpu

    fmt = _list_format(fmt, as_json)
    if local:
        return _local_gpus(as_json)

    show, needle = _show_or_filter(args, "gpus")
    if show is not None:
        g = resolve_gpu(show)
        if fmt == "json":
            write(g.model_dump_json(indent=2) + "\n")
        else:
            from ..render.text import gpu_detail

            gpu_detail(g, console(), tsv=fmt == "tsv")
        return
    rows = [g for g in gpu_specs() if not needle or needle in g.id
            or any(needle in n.lower() for n in (g.name, *g.smi_names, *g.aliases))]
    if not rows:
        from ..errors import UnknownGpuError

        try:
            resolve_gpu(needle)
        except UnknownGpuError as e:
            _nothing_matched("gpu", needle, e.suggestions)
    if fmt == "json":
        write(json.dumps([g.model_dump() for g in rows], indent=2) + "\n")
    else:
        from ..render.text import gpus_table

        gpus_table(rows, console(), tsv=fmt == "tsv")
