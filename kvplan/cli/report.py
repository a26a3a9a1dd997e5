"""`kvplan report`: a Markdown or HTML sizing report."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import typer

from .common import (
    argument,
    console,
    demand_of,
    option,
    options_file,
    own,
    planning_options,
    resolve_model,
    table_options,
    workload_of,
    write,
)


def _report_params() -> list[inspect.Parameter]:
    from .plan import disagg_options

    return [argument("target", "A model (as for `kvplan plan`), or a deployment file or "
                      "directory (as for `kvplan check`)."),
            own("output", Path | None, "--output", "-o", help="report file: .html "
                 "(self-contained) or .md; default: stdout"),
            own("fmt", str | None, "--format", help="md or html (default: from the -o suffix, "
                 "else md)"),
            *planning_options(skip=("as_json", "emit", *disagg_options()),
                              gpu={"required": False}),
            own("generated_at", str | None, "--generated-at", help="a date or note to print in "
                 "the report (none by default, so the same inputs give byte-identical reports)"),
            # plan --disagg's flags, not in --help: given, they are refused by name (_no_disagg)
            *(option(name, bare=True, hidden=True) for name in disagg_options())]


def _no_disagg(values: dict[str, Any]) -> None:
    """A report reviews one aggregated deployment: --disagg and its pool flags are refused,
    naming `kvplan plan --disagg` (typer's "No such option" said only that)."""
    from ..errors import InvalidInputError
    from .plan import disagg_options

    given = [n for n in disagg_options() if values.get(n) not in (None, False)]
    if given:
        flags = ", ".join("--" + n.replace("_", "-") for n in given)
        raise InvalidInputError(f"kvplan report does not plan disaggregated serving ({flags})",
                                hint="use kvplan plan --disagg (with the same flags)",
                                code="disagg-flag", knob=given[0])


@table_options(_report_params)
def report(target: str, **values: Any) -> None:
    """Write a sizing report (Markdown, or one self-contained HTML file with charts) for one
    deployment, or for every serving command `kvplan check` finds. Exit codes as for plan/check.

    Example: kvplan report llama-3.1-70b-instruct --gpu h100 -tp 4 -o sizing.html
    """
    import shlex

    from ..render import report as rep

    _no_disagg(values)
    output = values["output"]
    name = rep.output_format(output, values["fmt"])
    line = shlex.join(["kvplan", "report", *sys.argv[sys.argv.index("report") + 1:]]
                      if "report" in sys.argv else ["kvplan", "report", target])
    path = Path(target)
    try:
        on_files = path.exists() and not (path / "config.json").exists() and path.suffix != ".json"
    except (OSError, ValueError):  # a name no file can have (too long, a NUL): a model name
        on_files = False
    if on_files:
        result = _report_on_files(target, values, line)
    else:
        result = _report_on_model(target, values, line)
    text = rep.render(result, name)
    if output is None:
        write(text)
    else:
        rep.write_atomic(output, text)
        console(stderr=True).print(f"wrote {output}", markup=False)
    raise typer.Exit(result.exit_code)


def _report_on_files(target: str, values: dict[str, Any], line: str) -> Any:
    """The report of every serving command `kvplan check` finds in `target`."""
    from .. import __version__
    from ..deploy.check import Policy, check_files, load_policy
    from ..errors import EXIT_CODES, InvalidInputError, Reason, UnavailableError
    from ..render import report as rep

    policy, _ = load_policy(None, Path.cwd())
    policy = Policy.model_validate({**policy.model_dump(), **{
        k: values[k] for k in ("gpu", "engine_version") if values[k] is not None}})
    checked = check_files([Path(target)], policy=policy, sets={}, offline=values["offline"])
    if not any(d.plan for d in checked.deployments):
        why = "; ".join(p.message for d in checked.deployments for p in d.problems)
        codes = {p.code for d in checked.deployments for p in d.problems if p.severity == "error"}
        if checked.deployments and all(d.exit_code == 3 for d in checked.deployments):
            # every model was unavailable (offline cache miss, gated, Hub down): exit 3
            reason = next((r for r in Reason if r.value in codes and EXIT_CODES[r] == 3),
                          Reason.NETWORK)
            raise UnavailableError(f"{target}: nothing to plan ({why})",
                                   reason=reason)  # type: ignore[arg-type]
        raise InvalidInputError(f"{target}: nothing to plan ({why})")
    return rep.from_check(checked, command_line=line, version=__version__,
                          generated_at=values["generated_at"])


def _report_on_model(target: str, values: dict[str, Any], line: str) -> Any:
    """The report of one model's deployment, with the sweep's cheapest alternatives."""
    from .. import __version__
    from ..api import report as plan_report
    from ..errors import InvalidInputError
    from ..knobs import KNOB_NAMES
    from ..render import report as rep
    from ..sources.catalog import resolve_gpu
    from ..sources.limits import check_flags

    check_flags(values)  # the bounds `kvplan plan` applies, named by flag
    demand = demand_of(values)
    workload = workload_of(values, demand)
    if values["gpu"] is None:
        raise InvalidInputError("--gpu is required to report on a model",
                                hint="e.g. --gpu h100; deployment files may name their own GPU")
    engine: str = values["engine"]
    options = options_file(engine, values["extra_llm_api_options"])
    g = resolve_gpu(values["gpu"])
    m = resolve_model(target, revision=values["revision"], token=values["token"],
                      offline=values["offline"], refresh=values["refresh"])
    knobs = {**{k: values[k] for k in KNOB_NAMES}, **options}
    data = plan_report(m, g, engine=engine.lower(), engine_version=values["engine_version"],
                       workload=workload, token=values["token"], offline=values["offline"],
                       gpu_hour_price=values["gpu_hour_price"],
                       minimize_utilization=values["minimize_utilization"],
                       demand=demand, rank_on=values["rank_on"], **knobs)
    return rep.for_model(data, command_line=line, version=__version__,
                         generated_at=values["generated_at"])
