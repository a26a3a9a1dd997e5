"""`kvplan compare`: the same deployment on every engine (a module of its own, so that a
`kvplan plan` run imports only the engine it plans)."""

from __future__ import annotations

import inspect
import json
from typing import Any

import typer

from .common import (
    argument,
    console,
    option,
    resolve_model,
    table_options,
    workload_of,
    write,
)

_COMPARE_HELP: dict[str, dict[str, Any]] = {
    "max_model_len": {"help": "context length for every engine (default: each engine's own)"}}


def _compare_params() -> list[inspect.Parameter]:
    from ..api import COMPARE_KNOBS  # the engine-generic settings every engine is planned with
    from ..knobs import OPTIONS
    from ..specs import Workload

    # every workload field but the speculative acceptance rate: compare plans no draft model
    # (it takes no --speculative-config), so the rate could never apply
    workload = [f for f in Workload.model_fields if f != "acceptance_rate"]
    shared = ("gpu", *COMPARE_KNOBS, *workload, "gpu_hour_price", "revision", "token",
              "offline", "refresh", "as_json", "calibration")
    return [argument("model", "Catalogue id, local path or Hub repo id."),
            *(option(name, **_COMPARE_HELP.get(name, {})) for name in OPTIONS if name in shared)]


@table_options(_compare_params)
def compare(model: str, **values: Any) -> None:
    """The same model and GPU on every engine kvplan models ({engines}) side by side: KV tokens,
    concurrency and each engine's recommended knobs. Without --tensor-parallel-size each engine
    is planned at the smallest TP at which it fits and holds --target-concurrency (the table
    says so when they differ); an engine that refuses the deployment (a value it rejects, a GPU
    it does not run on) is listed with its reason. Exit 0 if any engine fits and meets the
    targets, 1 if none does, 2 if every engine refuses it.

    Example: kvplan compare meta-llama/Llama-3.1-8B-Instruct --gpu h100
    """
    from ..api import COMPARE_KNOBS
    from ..api import plan as make_plan
    from ..engines.registry import NAMES, get
    from ..errors import InvalidInputError, result_exit_code
    from ..sources.catalog import resolve_gpu
    from ..sources.limits import check_flags
    from ..specs import SCHEMA_VERSION, Plan

    check_flags(values)
    workload = workload_of(values)
    g = resolve_gpu(values["gpu"])
    m = resolve_model(model, revision=values["revision"], token=values["token"],
                      offline=values["offline"], refresh=values["refresh"])
    tensor_parallel_size = values["tensor_parallel_size"]

    def one(engine: str, tp: int | None) -> Plan:
        return make_plan(m, g, engine=engine, workload=workload,
                         **{**{k: values[k] for k in COMPARE_KNOBS}, "tensor_parallel_size": tp},
                         gpu_hour_price=values["gpu_hour_price"])

    plans, refused = [], []
    for e in NAMES:
        try:
            p = one(e, tensor_parallel_size)
            rec_tp = p.recommendations.tensor_parallel_size.value
            if tensor_parallel_size is None and not p.fits and rec_tp and rec_tp != p.gpu.count:
                p = one(e, int(rec_tp))  # each column describes the deployment its serve line runs
        except InvalidInputError as err:  # this engine refuses it; the others are still compared
            refused.append((e, err))
            continue
        plans.append(p)
    if not plans:
        raise refused[0][1]
    gone = [{"engine": e, "label": get(e).label, "code": err.code, "message": err.message,
             "hint": err.hint} for e, err in refused]
    if values["as_json"]:
        write(json.dumps({"schema_version": SCHEMA_VERSION,
                          "plans": [p.model_dump(mode="json") for p in plans],
                          "refused": gone}, indent=2) + "\n")
    else:
        from ..render.text import compare_table

        compare_table(plans, console(), refused=[(get(e).label, err.message, err.hint)
                                                 for e, err in refused])
    raise typer.Exit(min((result_exit_code(p.fits, (x.severity for x in p.problems))
                          for p in plans), default=1))


def _engine_labels() -> str:
    """'A, B and C': every registered engine's label, in registration order."""
    from ..engines.registry import ENGINES

    labels = [e.label for e in ENGINES.values()]
    return ", ".join(labels[:-1]) + f" and {labels[-1]}" if len(labels) > 1 else "".join(labels)


compare.__doc__ = (compare.__doc__ or "").replace("{engines}", _engine_labels())
