"""kvplan's command line: parse → call the planner → render. main() maps errors to exit codes.

Exit codes: 0 fits, 1 does not fit, 2 bad usage or input, 3 a model source is unavailable.
One module per command group (COMMANDS); a run imports only the module of the command it runs.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator, Mapping
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

# command → the module of kvplan.cli that defines it (a function of the same name), in the order
# `kvplan --help` lists them.
COMMANDS: dict[str, str] = {
    "plan": "plan", "compare": "compare", "sweep": "sweep", "models": "catalogue",
    "gpus": "catalogue", "check": "check", "schema": "schema", "report": "report",
    "calibrate": "calibrate"}


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        sys.stdout.write(f"kvplan {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _main(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print kvplan's version and exit.")] = False,
          ) -> None:
    """Plan GPU memory and KV-cache capacity for LLM serving, as vLLM will allocate it."""


def usage_name(param: Any) -> str:
    """An argument as a usage line shows it: MODEL, [OUTPUT] when optional, FILES... when it
    takes several (click's convention; typer 0.2x writes a required one as `{model}`)."""
    name = param.metavar or param.name.upper()
    if not param.required:
        name = f"[{name}]"
    return name + ("..." if param.nargs != 1 else "")


class _Command(typer.core.TyperCommand):
    """A kvplan command: its usage line names the arguments by usage_name."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(usage_name(param))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


class _LazyCommands(Mapping[str, Any]):
    """The commands of the click group, each imported and built from its function's signature
    when first looked up: a call imports and builds only the command it runs (`kvplan --help`
    builds them all)."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self._table = table
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            from typer.main import get_command_from_info
            from typer.models import CommandInfo

            module = importlib.import_module(f"{__name__}.{self._table[name]}")
            self._built[name] = get_command_from_info(
                CommandInfo(name=name, cls=_Command, callback=getattr(module, name)),
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode)
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


def click_app() -> Any:
    """The click group `kvplan` runs: `app`'s callback and help, its commands (COMMANDS) imported
    and built lazily (typer.main.get_command would build the parameters of every command)."""
    from typer.main import get_group

    group = get_group(app)
    group.commands = _LazyCommands(COMMANDS)  # type: ignore[assignment]
    return group


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


def _tolerant(stream: TextIO) -> TextIO:
    """`stream`, set to write what its encoding cannot (any character under
    PYTHONIOENCODING=ascii or a C locale, a lone surrogate from a non-UTF-8 argument) as
    backslash escapes instead of failing (JSON is escaped as JSON before: common.write)."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a stream that cannot change: leave it
            pass
    return stream


def main() -> None:
    """Entry point: run the app, turn kvplan errors into messages and exit codes.

    Usage errors are click's (exit 2); KvplanError subclasses carry their exit code; with --json
    every failure is also one JSON object on stdout (kvplan.cli.exits)."""
    debug = os.environ.get("KVPLAN_DEBUG") == "1"
    guard = sys.stdout = _PipeGuard(_tolerant(sys.stdout))
    err_guard = sys.stderr = _PipeGuard(_tolerant(sys.stderr))  # `2>&1 | head -1` closes both
    try:
        _run(debug)
    finally:
        guard.flush()
        err_guard.flush()
        sys.stdout, sys.stderr = guard._stream, err_guard._stream


def _run(debug: bool) -> None:
    try:
        code = click_app().main(standalone_mode=False)
    except typer.Abort:
        sys.stderr.write("Aborted!\n")
        code = 1
    except Exception as e:  # noqa: BLE001 - the contract: no traceback without KVPLAN_DEBUG
        from .exits import fail, usage_error

        if debug and not usage_error(e):
            raise
        code = fail(e)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
