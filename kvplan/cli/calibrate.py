"""`kvplan calibrate`: fit the latency model to your own benchmark results, or check it
against them (--check). docs/calibration.md."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import typer

from .common import argument, console, option, own, table_options, write

# The plan flags that describe the measured deployment (the rest of plan's are not needed).
_DEPLOYMENT_FLAGS = ("engine_version", "tensor_parallel_size", "pipeline_parallel_size",
                     "data_parallel_size", "max_model_len", "max_num_seqs",
                     "max_num_batched_tokens",
                     "gpu_memory_utilization", "dtype", "kv_cache_dtype", "quantization",
                     "block_size", "gpu_memory_gib", "enable_expert_parallel")


def _calibrate_params() -> list[inspect.Parameter]:
    return [
        argument("files", "Benchmark result files: vllm bench serve --save-result JSON, "
                 "sglang.bench_serving JSONL, GuideLLM benchmarks.json, AIPerf / genai-perf "
                 "profile exports, inference-perf lifecycle reports.", kind=list[Path]),
        own("model", str | None, "--model", help="the model the runs served, for runs whose "
            "file names none (or one kvplan cannot find: a served name): catalogue id, Hub "
            "repo or local path"),
        option("gpu", required=False, default=None, help="GPU the runs used, for files that do "
               "not say (vLLM: --metadata gpu=…)"),
        option("engine", default=None, help="{engines}, for files that do not say (default: "
               "vllm)"),
        *(_deployment_option(name) for name in _DEPLOYMENT_FLAGS),
        own("replicas", int | None, "--replicas", help="replicas behind the benchmarked endpoint "
            "(throughput and load are divided among them), for files that do not say (1)"),
        own("output", Path | None, "--output", "-o", help="write the calibration file here"),
        own("check", bool, "--check", help="compare the predictions with the runs without "
            "fitting (the re-measure step; with --calibration, that file's coefficients)",
            default=False),
        own("max_error", float | None, "--max-error", help="with --check: exit 1 when the "
            "median error of TTFT, TPOT or throughput exceeds this many %"),
        own("no_loo", bool, "--no-leave-one-out", help="skip the leave-one-run-out refits "
            "(faster with many runs)", default=False),
        option("calibration"),
        option("revision"), option("token"), option("offline"),
        option("as_json")]


def _deployment_option(name: str) -> inspect.Parameter:
    """A flag of the measured deployment: the knob table's, with a help line where the table
    has none (-tp, -pp, --max-num-seqs, --max-num-batched-tokens)."""
    from ..knobs import OPTIONS

    if OPTIONS[name].help:
        return option(name)
    return option(name, help="as the benchmarked server ran, for files that do not say")


@table_options(_calibrate_params)
def calibrate(files: list[Path], **values: Any) -> None:
    """Fit kvplan's latency model to your own benchmark runs and write a calibration file that
    plan, compare, sweep and report take with --calibration (or KVPLAN_CALIBRATION). Each run
    is matched to its deployment from its file where it says so, else from the flags; only the
    coefficients the runs can tell apart are fitted. With --check nothing is fitted: the runs
    are compared with the predictions, for CI. Exit 0 fitted (--check: within --max-error),
    1 --check over --max-error, 2 a file kvplan cannot read or bad usage, 3 a model source is
    unavailable.

    \b
    Example: kvplan calibrate results/*.json --gpu h100 -o h100-vllm.cal.json \\
               --model meta-llama/Llama-3.1-8B-Instruct
    """
    from .. import calibrate as cal
    from ..errors import InvalidInputError
    from ..sources import benchfiles
    from ..sources.limits import check_flags

    check_flags(values)
    if values["max_error"] is not None and not 0 < values["max_error"] <= 10_000:
        raise InvalidInputError("--max-error must be a percentage in (0, 10000]",
                                hint="e.g. --max-error 25")
    if values["max_error"] is not None and not values["check"]:
        raise InvalidInputError("--max-error sets the --check bar: without --check it has no "
                                "effect", hint="add --check, or drop --max-error")
    if values["check"] and values["output"] is not None:
        raise InvalidInputError("--check compares without fitting: it writes no file",
                                hint="drop -o, or drop --check to calibrate")
    measurements = [m for f in files for m in benchfiles.read(f)]
    knobs = {k: values[k] for k in _DEPLOYMENT_FLAGS
             if k not in ("engine_version", "tensor_parallel_size", "data_parallel_size")
             and values[k] is not None}
    given = cal.Given(model=values["model"], gpu=values["gpu"], engine=values["engine"],
                      engine_version=values["engine_version"],
                      tensor_parallel_size=values["tensor_parallel_size"],
                      data_parallel_size=values["data_parallel_size"],
                      replicas=values["replicas"], knobs=knobs, revision=values["revision"],
                      token=values["token"], offline=values["offline"])
    runs = cal.match(measurements, given)
    if values["check"]:
        _check(runs, values)
    _fit(runs, values)


def _check(runs: list[Any], values: dict[str, Any]) -> None:
    from .. import calibrate as cal
    from ..specs import SCHEMA_VERSION

    scored = cal.check(runs)
    metric, worst = cal.worst_median(scored.summary)
    limit = values["max_error"]
    passed = limit is None or worst <= limit
    used = [r for r in runs if r.row is not None]
    if values["as_json"]:
        write(json.dumps({
            "schema_version": SCHEMA_VERSION, "mode": "check",
            "coefficients": sorted({r.row.context.calibration for r in used}),
            "runs": [_run_json(r, p) for r, p in zip(used, scored.preds, strict=True)],
            "skipped": {r.label: r.skipped for r in runs if r.row is None},
            "notes": cal.notes(runs), "errors": scored.summary, "max_error": limit,
            "worst_median": [metric, worst], "passed": passed}, indent=2) + "\n")
    else:
        out = console()
        sources = ", ".join(sorted({r.row.context.calibration for r in used}))
        out.print(f"kvplan's predictions ({sources}) against {len(used)} measured "
                  f"run{'s' * (len(used) != 1)}", markup=False)
        _runs_table(out, used, scored.preds)
        _skipped(out, runs)
        _errors_table(out, [("error", scored.summary)])
        if limit is not None:
            out.print(f"{'PASS' if passed else 'FAIL'}: worst median error {worst:g} % "
                      f"({metric}) against --max-error {limit:g} %", markup=False)
    raise typer.Exit(0 if passed else 1)


def _fit(runs: list[Any], values: dict[str, Any]) -> None:
    from datetime import datetime, timezone

    from .. import __version__
    from .. import calibrate as cal
    from ..specs import SCHEMA_VERSION

    result = cal.calibrate(runs, loo=not values["no_loo"])
    created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = cal.document(result, created=created, kvplan_version=__version__)
    text = json.dumps(doc, indent=2) + "\n"
    output: Path | None = values["output"]
    if output is not None:
        from ..render.report import write_atomic

        write_atomic(output, text, "the calibration", "h100-vllm.cal.json")
    if values["as_json"]:
        write(json.dumps({"schema_version": SCHEMA_VERSION, "mode": "calibrate",
                          "written": str(output) if output else None,
                          "calibration": doc}, indent=2) + "\n")
        raise typer.Exit(0)
    out = console()
    used = [r for r in runs if r.row is not None]
    out.print(f"{result.engine} on {result.arch}: {len(used)} run{'s' * (len(used) != 1)} from "
              f"{', '.join(doc['sources'])}; starting point: {result.base_source}", markup=False)
    _runs_table(out, used, result.after.preds)
    _skipped(out, runs)
    out.print("\ncoefficients:", markup=False)
    for name, value in doc["coefficients"].items():
        was = doc["base"]["coefficients"][name]
        why = ("fitted" if name in result.fitted else f"kept ({result.kept.get(name, '')})")
        out.print(f"  {name:22s} {was:>10g} -> {value:<10g} {why}", markup=False)
    _errors_table(out, [("before", result.before.summary), ("after", result.after.summary),
                        *([("leave-one-out", result.leave_one_out)]
                          if result.leave_one_out else [])])
    if result.leave_one_out is None:
        out.print("(leave-one-out needs 3 runs and a fitted coefficient)", markup=False)
    if output is not None:
        out.print(f"wrote {output}: use it with `kvplan plan … --calibration {output}` or "
                  f"KVPLAN_CALIBRATION={output}", markup=False)
    else:
        out.print("not written: pass -o FILE to keep it", markup=False)
    raise typer.Exit(0)


def _run_json(run: Any, p: Any) -> dict[str, Any]:
    r = run.row
    return {"run": run.label, "model": run.model, "gpu": run.gpu.id, "engine": run.engine,
            "engine_version": run.engine_version, "tensor_parallel_size": run.tp,
            "data_parallel_size": run.dp, "harness": run.harness,
            "replayed_as": run.replayed_as or None,
            "concurrency": r.concurrency,
            "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
            "measured": {"ttft_ms": r.ttft_ms, "tpot_ms": r.tpot_ms,
                         "output_tokens_per_s": r.throughput},
            "predicted": {"ttft_ms": round(p.ttft_ms, 3), "tpot_ms": round(p.tpot_ms, 4),
                          "output_tokens_per_s": round(p.output_tokens_per_s, 2)}}


def _pct(pred: float, meas: float | None) -> str:
    return f"{100 * (pred / meas - 1):+.0f}%" if meas else "-"


def _runs_table(out: Any, runs: list[Any], preds: list[Any]) -> None:
    from rich.table import Table

    one_file = len({r.measurement.source for r in runs}) == 1
    t = Table(box=None, pad_edge=False)
    for col in ("run", "conc", "in/out", "TTFT ms", "pred", "err", "TPOT ms", "pred", "err"):
        t.add_column(col, justify="left" if col == "run" else "right")
    for run, p in zip(runs, preds, strict=True):
        r = run.row
        t.add_row(f"#{run.measurement.index}" if one_file else run.label, str(r.concurrency),
                  f"{r.input_tokens}/{r.output_tokens}",
                  f"{r.ttft_ms:.1f}" if r.ttft_ms else "-", f"{p.ttft_ms:.1f}",
                  _pct(p.ttft_ms, r.ttft_ms), f"{r.tpot_ms:.2f}" if r.tpot_ms else "-",
                  f"{p.tpot_ms:.2f}", _pct(p.tpot_ms, r.tpot_ms))
    out.print(t)


def _skipped(out: Any, runs: list[Any]) -> None:
    for r in runs:
        if r.row is None:
            out.print(f"skipped {r.named}: {r.skipped}", markup=False)
    for r in runs:
        for note in r.measurement.notes:
            out.print(f"note: {r.named}: {note}", markup=False)
    for note in dict.fromkeys(r.replayed_as for r in runs if r.replayed_as):
        out.print(f"note: {note}", markup=False)


def _errors_table(out: Any, blocks: list[tuple[str, Any]]) -> None:
    out.print("\nmedian / p90 absolute error, % (median signed error):", markup=False)
    for name, summary in blocks:
        cells = [f"{m.upper() if m != 'throughput' else 'throughput'} "
                 f"{v['median']:g} / {v['p90']:g} ({v['bias']:+g})"
                 for m, v in summary.items()]
        out.print(f"  {name:14s} " + "   ".join(cells), markup=False)
