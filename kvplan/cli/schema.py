"""`kvplan schema`: the JSON Schema of each command's --json output."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer


def _compare() -> dict[str, Any]:
    from pydantic import BaseModel

    from ..specs import Plan

    class Refused(BaseModel):
        """An engine that refuses the deployment, and why (its error)."""

        engine: str
        label: str
        code: str
        message: str
        hint: str | None

    class CompareOutput(BaseModel):
        """`kvplan compare --json`: one plan per engine that plans it, in registry order, and
        the engines that refuse it."""

        schema_version: str
        plans: list[Plan]
        refused: list[Refused]

    return CompareOutput.model_json_schema()


def _error() -> dict[str, Any]:
    from typing import Literal

    from pydantic import BaseModel

    from ..errors import Reason
    from .exits import INTERNAL

    codes = tuple(r.value for r in Reason) + (INTERNAL,)

    class ErrorDetail(BaseModel):
        code: Literal[codes]  # type: ignore[valid-type]
        exit_code: int
        message: str
        hint: str | None

    class ErrorOutput(BaseModel):
        """What any command prints with --json when it fails (exit 2 or 3)."""

        schema_version: str
        error: ErrorDetail

    return ErrorOutput.model_json_schema()


def _models() -> dict[str, Any]:
    from pydantic import BaseModel, ConfigDict, TypeAdapter

    from ..sources.catalog import CatalogEntry
    from ..specs import ModelSpec

    class ModelRow(BaseModel):
        """One bundled model in `kvplan models [FILTER] --json` (a list of these)."""

        model_config = ConfigDict(extra="forbid")
        id: str
        model_type: str
        attention: str
        parameters: int
        kv_bytes_per_token: int
        aliases: list[str]

    class ModelShow(BaseModel):
        """`kvplan models show ID --json`: the catalogue entry, the spec kvplan plans with and
        its parameter count."""

        model_config = ConfigDict(extra="forbid")
        entry: CatalogEntry
        spec: ModelSpec
        parameters: int

    return TypeAdapter(list[ModelRow] | ModelShow).json_schema()


def _gpus() -> dict[str, Any]:
    from pydantic import BaseModel, ConfigDict, TypeAdapter

    from ..specs import GpuSpec

    class LocalGpu(BaseModel):
        """One GPU of `kvplan gpus --local --json` (NVML's view; a list of these)."""

        model_config = ConfigDict(extra="forbid")
        index: int
        name: str
        catalogue_id: str | None
        nvml_total_bytes: int
        cuda_total_bytes: int | None
        used_bytes: int
        free_bytes: int
        processes: int

    # `kvplan gpus [FILTER] --json`: a list; `gpus show ID --json`: one GpuSpec
    return TypeAdapter(list[GpuSpec] | GpuSpec | list[LocalGpu]).json_schema()


def _calibrate() -> dict[str, Any]:
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")

    class Errors(Strict):
        """% of measured: mean, median, p90 of |predicted / measured − 1|; bias: the median
        signed error (kvplan.perf.fit.summary). A metric no run measured is left out."""

        mean: float
        median: float
        p90: float
        bias: float

    class Measured(Strict):
        ttft_ms: float | None
        tpot_ms: float | None
        output_tokens_per_s: float | None

    class Predicted(Strict):
        ttft_ms: float
        tpot_ms: float
        output_tokens_per_s: float

    class Run(Strict):
        """One measured run, matched to the deployment kvplan plans for it."""

        run: str
        model: str
        gpu: str
        engine: str
        engine_version: str
        tensor_parallel_size: int
        data_parallel_size: int
        harness: str
        replayed_as: str | None
        concurrency: int
        input_tokens: int
        output_tokens: int
        measured: Measured
        predicted: Predicted

    class CheckOutput(Strict):
        """`kvplan calibrate FILE... --check --json`: predictions against the runs, no fit;
        exit 1 when `passed` is false (the worst median error above --max-error)."""

        schema_version: str
        mode: Literal["check"]
        coefficients: list[str] = Field(description="where the coefficients came from")
        runs: list[Run]
        skipped: dict[str, str] = Field(description="run → why it was not used")
        notes: dict[str, list[str]] = Field(
            description="run → what its file said otherwise than kvplan read it (an invalid "
            "value ignored, the median used for an invalid mean)")
        errors: dict[str, Errors] = Field(description="metric (ttft, tpot, throughput) →")
        max_error: float | None
        worst_median: tuple[str, float]
        passed: bool

    class Base(Strict):
        source: str
        coefficients: dict[str, float]

    class ErrorsBeforeAfter(Strict):
        before: dict[str, Errors]
        after: dict[str, Errors]
        leave_one_out: dict[str, Errors] | None
        unit: str

    class Row(Strict):
        run: str
        model: str
        gpu: str
        engine_version: str
        tensor_parallel_size: int
        data_parallel_size: int
        replicas: int | None
        harness: str
        concurrency: int
        input_tokens: int
        output_tokens: int
        measured: Measured
        before: Predicted
        after: Predicted
        fields: dict[str, str] = Field(description="kvplan's quantity → the file's field")

    class Calibration(Strict):
        """The calibration file (`-o CAL`), read back by --calibration."""

        format: Literal["kvplan-calibration"]
        version: int
        created: str
        kvplan_version: str
        engine: str
        gpu_arch: str
        engine_versions: list[str]
        gpus: list[str]
        models: list[str]
        coefficients: dict[str, float]
        fitted: list[str]
        kept: dict[str, str] = Field(description="coefficient → why it was kept")
        base: Base
        sources: list[str]
        skipped: dict[str, str]
        notes: dict[str, list[str]]
        errors: ErrorsBeforeAfter
        rows: list[Row]

    class CalibrateOutput(Strict):
        """`kvplan calibrate FILE... --json`: the fitted calibration, and where it was
        written (-o), if anywhere."""

        schema_version: str
        mode: Literal["calibrate"]
        written: str | None
        calibration: Calibration

    return TypeAdapter(CheckOutput | CalibrateOutput).json_schema()


def _of(name: str) -> dict[str, Any]:
    if name == "plan":
        from ..specs import Plan

        return Plan.model_json_schema()
    if name == "sweep":
        from ..planner.sweep import SweepResult

        return SweepResult.model_json_schema()
    if name == "disagg":  # plan --disagg --json
        from ..specs import DisaggPlan

        return DisaggPlan.model_json_schema()
    if name == "check":
        from ..deploy.check import CheckReport

        return CheckReport.model_json_schema()
    more = {"compare": _compare, "models": _models, "gpus": _gpus, "calibrate": _calibrate}
    return more.get(name, _error)()


OUTPUTS = ("plan", "compare", "sweep", "check", "error", "disagg", "models", "gpus",
           "calibrate")


def schema(output: Annotated[str, typer.Argument(
        help=f"whose output: {', '.join(OUTPUTS)}")] = "plan") -> None:
    """Print the JSON Schema of `kvplan plan --json` (or of another command's --json output,
    or of the error object every command prints with --json when it fails)."""
    from ..errors import InvalidInputError

    if output not in OUTPUTS:
        raise InvalidInputError(f"no schema for {output[:60]!r}", hint=f"use {', '.join(OUTPUTS)}")
    sys.stdout.write(json.dumps(_of(output), indent=2) + "\n")
