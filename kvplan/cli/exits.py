"""Every exception that reaches the command line, as an exit code and a message (stderr) and,
with --json (or --format json), as one JSON error object on stdout (`kvplan schema error`).
A traceback is a bug: KVPLAN_DEBUG=1 shows one."""

from __future__ import annotations

import json
import sys
from typing import Any

INTERNAL = "internal-error"  # the code of an error no layer expected (a bug: please report it)


def json_requested(args: list[str]) -> bool:
    """Whether the command line asks for JSON: --json, --format json or --format=json."""
    lowered = [a.lower() for a in args]
    return "--json" in lowered or "--format=json" in lowered or any(
        a == "--format" and b == "json" for a, b in zip(lowered, lowered[1:], strict=False))


def usage_error(e: BaseException) -> bool:
    """A click usage error (click's own, or typer's vendored copy): it shows itself."""
    return all(hasattr(e, a) for a in ("show", "format_message")) and isinstance(
        getattr(e, "exit_code", None), int)


def describe(e: BaseException) -> tuple[str, int, str, str | None]:
    """(code, exit code, message, hint) of an exception: code is the typed errors.Reason of a
    kvplan error, bad-input for refused input, internal-error for a bug."""
    from ..errors import EXIT_CODES, KvplanError, Reason

    bad = Reason.BAD_INPUT.value
    if isinstance(e, KvplanError):
        return e.reason.value, e.exit_code, e.message, e.hint
    if usage_error(e):
        return bad, e.exit_code, e.format_message(), None  # type: ignore[attr-defined]
    from pydantic import ValidationError

    if isinstance(e, ValidationError):  # a value no layer validated
        errs = e.errors()
        fields = ", ".join("--" + str(x["loc"][0]).replace("_", "-") for x in errs if x["loc"])
        return bad, 2, f"invalid value for {fields or 'an input'}: {errs[0]['msg']}", None
    code = EXIT_CODES[Reason.BAD_INPUT]
    if isinstance(e, UnicodeDecodeError):
        return bad, code, (f"an input is not UTF-8 text ({e.encoding} cannot decode byte "
                           f"{e.object[e.start:e.start + 1]!r} at offset {e.start})"), (
            "save the file as UTF-8")
    if isinstance(e, UnicodeEncodeError):
        return bad, code, (f"the output cannot be written in {e.encoding} ({e.reason})"), (
            "set PYTHONIOENCODING=utf-8 or a UTF-8 locale")
    if isinstance(e, RecursionError):
        return bad, code, "an input is nested too deeply to read", None
    if isinstance(e, MemoryError):
        return bad, code, "an input is too large to read", None
    if isinstance(e, OSError):
        where = f"{e.filename}: " if e.filename else ""
        return bad, code, f"{where}{e.strerror or e}", None
    return INTERNAL, code, f"{type(e).__name__}: {e}", (
        "rerun with KVPLAN_DEBUG=1 for the traceback and report it")


def error_object(code: str, exit_code: int, message: str, hint: str | None) -> dict[str, Any]:
    """The JSON object a failing command prints with --json (its schema: ErrorOutput)."""
    from ..specs import SCHEMA_VERSION

    return {"schema_version": SCHEMA_VERSION,
            "error": {"code": code, "exit_code": exit_code, "message": message, "hint": hint}}


def fail(e: BaseException) -> int:
    """Report `e` (stderr, and stdout as JSON when asked) and return its exit code."""
    from .common import write

    code, exit_code, message, hint = describe(e)
    if usage_error(e):
        # to our stderr: click's own would write UTF-8 into an ASCII stream (it deems ASCII a
        # misconfigured locale), where everything else kvplan writes is backslash-escaped
        e.show(sys.stderr)  # type: ignore[attr-defined]
    elif code == INTERNAL:
        sys.stderr.write(f"kvplan: internal error: {message}\n  hint: {hint}\n")
    else:
        shown = hint.replace("\n", "\n  ") if hint else None  # a second line under the first
        sys.stderr.write(f"Error: {message}" + (f"\n  hint: {shown}" if shown else "") + "\n")
    if json_requested(sys.argv[1:]):
        write(json.dumps(error_object(code, exit_code, message, hint), indent=2) + "\n")
    return exit_code
