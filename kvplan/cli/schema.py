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
    return _compare() if name == "compare" else _error()


OUTPUTS = ("plan", "compare", "sweep", "check", "error", "disagg")


def schema(output: Annotated[str, typer.Argument(
        help=f"whose output: {', '.join(OUTPUTS)}")] = "plan") -> None:
    """Print the JSON Schema of `kvplan plan --json` (or of another command's --json output,
    or of the error object every command prints with --json when it fails)."""
    from ..errors import InvalidInputError

    if output not in OUTPUTS:
        raise InvalidInputError(f"no schema for {output[:60]!r}", hint=f"use {', '.join(OUTPUTS)}")
    sys.stdout.write(json.dumps(_of(output), indent=2) + "\n")
