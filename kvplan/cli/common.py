"""What the command modules share: typer parameters built from knobs.OPTIONS, the consoles,
the Hub progress line, Workload validation and JSON output that survives any locale."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from ..specs import Workload

JsonOpt = Annotated[bool, typer.Option("--json",
                                       help="Print JSON to stdout (warnings go to stderr).")]
FormatOpt = Annotated[str, typer.Option(
    "--format", help="table (fits 80 columns; ids never cut), tsv (every column, for scripts) "
    "or json")]


def human_int(text: str | int) -> int:
    """vLLM's human-readable integers for lengths and byte counts: 32768, 32k (×1000),
    32K (×1024), 1M, 1.5k (vllm/engine/arg_utils.py human_readable_int) — as `kvplan check`
    reads them in deployment files. Plain digits are read exactly, however many there are, so
    a range error echoes the number the user typed."""
    from ..deploy.commands import human_int as parse

    if isinstance(text, int):
        return text
    digits = text.strip()
    if digits.isascii() and digits.isdigit() and len(digits) <= 4000:
        return int(digits)
    try:
        return parse(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not an integer such as 32768, 32k or 32K") from None


def console(stderr: bool = False) -> Console:
    """A rich console on stdout (stderr); in a pipe or a file, its lines without the trailing
    blanks rich pads table cells with (render/text.RightStripped)."""
    from rich.console import Console

    from ..render.text import RightStripped

    stream = sys.stderr if stderr else sys.stdout
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream: as rich would see it
        terminal = False
    if terminal:
        return Console(stderr=stderr, highlight=False)
    return Console(file=RightStripped(stream), highlight=False)  # type: ignore[arg-type]


@contextmanager
def progress_line() -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while the Hub is read (a plain line when stderr is not a terminal).
    rich is imported only when there is something to show (catalogue models never do)."""
    status = None

    def show(message: str) -> None:
        nonlocal status
        err = console(stderr=True)
        if err.is_terminal:
            status = err.status(message)
            status.start()
        else:
            err.print(message + " …", markup=False)

    try:
        yield show
    finally:
        if status is not None:
            status.stop()


def option(name: str, *, bare: bool = False, hidden: bool = False,
           **override: Any) -> inspect.Parameter:
    """The typer parameter of one option declared in knobs.OPTIONS (flags, type, help), with a
    command's own `override`s of the declaration; `bare`: the flag alone (no help text);
    `hidden`: parsed but not in --help (a flag the command takes only to refuse it by name)."""
    from ..knobs import OPTIONS

    plain: dict[str, Any] = {"help": None} if bare else {}
    o = dataclasses.replace(OPTIONS[name], **plain, **override)
    if o.help and "{engines}" in o.help:
        from ..engines.registry import spelled

        o = dataclasses.replace(o, help=o.help.format(engines=spelled()))
    extra: dict[str, Any] = {"parser": human_int, "metavar": "INT"} if o.human else {}
    base: Any = Path if o.path else o.type
    kind = base if o.required or o.default is not None else base | None
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY,
        default=inspect.Parameter.empty if o.required else o.default,
        annotation=Annotated[kind, typer.Option(*o.decls, help=o.help, hidden=hidden,
                                                **extra)])


def own(name: str, kind: Any, *decls: str, help: str | None = None,  # noqa: A002 - typer's
        default: Any = None, human: bool = False) -> inspect.Parameter:
    """A command's own option, not a setting in the knob table (--output, --format, …)."""
    extra: dict[str, Any] = {"parser": human_int, "metavar": "INT"} if human else {}
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, typer.Option(*decls, help=help, **extra)])


def argument(name: str, help: str, kind: Any = str) -> inspect.Parameter:  # noqa: A002
    """A command's positional argument, shown in its usage line as NAME (an explicit metavar:
    without one, the typer/click pair in use prints `{name}`)."""
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             annotation=Annotated[kind, typer.Argument(help=help,
                                                                       metavar=name.upper())])


def planning_options(*, skip: tuple[str, ...] = (), **overrides: dict[str, Any]
                     ) -> list[inspect.Parameter]:
    """Every option of knobs.OPTIONS in plan's --help order (the flags every command that plans
    one deployment takes), less `skip`, with per-option `overrides` of the declaration."""
    from ..knobs import OPTIONS

    return [option(name, **overrides.get(name, {})) for name in OPTIONS if name not in skip]


class TableCommand:
    """A command function `fn(argument, **values)` whose signature, as typer reads it, is
    `params()`: its argument, then options mostly from knobs.OPTIONS, in --help order. Built on
    first use, so importing the CLI does not import the knob table (or pydantic)."""

    def __init__(self, fn: Callable[..., None],
                 params: Callable[[], list[inspect.Parameter]]) -> None:
        functools.update_wrapper(self, fn)
        self._fn, self._params = fn, params

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:
        return inspect.Signature(self._params(), return_annotation=None)

    def __call__(self, *args: Any, **values: Any) -> None:
        if "calibration" in values:  # --calibration / KVPLAN_CALIBRATION (docs/calibration.md)
            with calibration_in_force(values["calibration"]):
                self._fn(*args, **values)
        else:
            self._fn(*args, **values)


@contextmanager
def calibration_in_force(path: Path | None) -> Iterator[None]:
    """Plan inside this block with the user calibration of --calibration PATH, else of the
    file KVPLAN_CALIBRATION names, else the bundled coefficients."""
    import os

    if path is None and not os.environ.get("KVPLAN_CALIBRATION"):
        yield
        return
    from ..perf.user_calibration import user_calibrations
    from ..sources.calibration import given

    cal = given(path)
    with user_calibrations(*([cal] if cal else [])):
        yield


def table_options(params: Callable[[], list[inspect.Parameter]]
                  ) -> Callable[[Callable[..., None]], TableCommand]:
    def wrap(fn: Callable[..., None]) -> TableCommand:
        return TableCommand(fn, params)
    return wrap


def workload(**values: object) -> Workload:
    """The Workload from CLI values; a bad one names its flag and range (exit 2)."""
    import math

    from pydantic import ValidationError

    from ..errors import InvalidInputError
    from ..specs import Workload

    for key, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInputError(f"--{key.replace('_', '-')} must be a finite number, "
                                    f"got {value}")
    try:
        return Workload(**values)
    except ValidationError as e:
        err = e.errors()[0]
        if not err["loc"]:  # a rule across flags: its message names them
            raise InvalidInputError(err["msg"].removeprefix("Value error, ")) from None
        name = "--" + str(err["loc"][0]).replace("_", "-")
        raise InvalidInputError(f"{name} must be positive and realistic ({err['msg'].lower()}), "
                                f"got {err.get('input')!r}") from None


LENGTH_FLAGS = ("dataset", "lengths_file", "random_range_ratio", "trace")
# What --lengths-file takes of a --trace (sources.traffic_files.read_lengths): a CSV trace's
# ContextTokens,GeneratedTokens columns as they are; not the JSON Lines form of a trace.
LENGTHS_OF_A_TRACE = ("a CSV trace as it is (its ContextTokens,GeneratedTokens, sampled); a "
                      "JSON Lines trace's lengths as a CSV input_tokens,output_tokens")


def one_length_source(values: dict[str, Any]) -> None:
    """--dataset, --lengths-file, --random-range-ratio and --trace each say what lengths to
    simulate: more than one is an error naming them."""
    from ..errors import InvalidInputError

    given = [k for k in LENGTH_FLAGS if values.get(k) is not None]
    if len(given) > 1:
        names = " and ".join("--" + k.replace("_", "-") for k in given)
        raise InvalidInputError(f"{names} each set the request lengths to simulate: give one",
                                hint="--dataset NAME (a bundled histogram), --lengths-file "
                                "FILE (your own), --random-range-ratio R (uniform around the "
                                "--avg-* lengths) or --trace FILE (the trace's own)")


def workload_of(values: dict[str, Any], demand: Any = None) -> Workload:
    """The Workload from the Workload fields a command takes (the others stay unset). With
    --dataset, a --trace or a --lengths-file (`demand`, read by demand_of),
    --avg-input-tokens / --avg-output-tokens default to its means, so the plan's figures and
    its simulation describe the same requests."""
    from ..specs import Workload

    one_length_source(values)
    fields = {k: values[k] for k in Workload.model_fields if k in values}
    means: tuple[float, float] | None = None
    if values.get("dataset") is not None:
        from ..sources.length_datasets import load

        hist = load(values["dataset"])
        means = hist.input_mean, hist.output_mean
    elif demand is not None and (pairs := demand.requests()):
        means = (sum(i for i, _ in pairs) / len(pairs), sum(o for _, o in pairs) / len(pairs))
    for key, mean in zip(("avg_input_tokens", "avg_output_tokens"), means or (), strict=False):
        if fields.get(key) is None:
            fields[key] = max(1, round(mean))
    return workload(**fields)


def demand_of(values: dict[str, Any]) -> Any:
    """--trace / --traffic / --lengths-file files and the --dataset histogram as a
    planner.traffic.Demand (None without any)."""
    if all(values.get(k) is None for k in ("trace", "traffic", "lengths_file", "dataset")):
        return None
    from ..errors import InvalidInputError
    from ..planner.traffic import Demand
    from ..sources.length_datasets import load
    from ..sources.traffic_files import read_curve, read_lengths, read_trace

    one_length_source(values)
    rates = [k for k in ("request_rate", "traffic") if values.get(k) is not None]
    if values.get("trace") is not None and rates:
        names = " and ".join("--" + k.replace("_", "-") for k in rates)
        raise InvalidInputError(f"--trace replays its own arrival times: {names} would be "
                                "ignored", hint="drop them, or size replicas for a rate with "
                                f"--request-rate R --lengths-file FILE: {LENGTHS_OF_A_TRACE}")
    # each file's errors name the flag it came from: `--traffic day.csv line 4: …`
    trace, traffic, lengths = (values.get(k) for k in ("trace", "traffic", "lengths_file"))
    return Demand(trace=read_trace(trace, flag="--trace") if trace else (),
                  curve=read_curve(traffic, flag="--traffic") if traffic else (),
                  lengths=read_lengths(lengths, flag="--lengths-file") if lengths else (),
                  dataset=load(values["dataset"]) if values.get("dataset") else None,
                  requests_from=(f"--trace {trace}" if trace else
                                 f"--lengths-file {lengths}" if lengths else ""))


def options_file(engine: str, path: Path | None) -> dict[str, Any]:
    """The knobs of --extra-llm-api-options (an engine's options file), or {} without one."""
    if path is None:
        return {}
    from ..deploy.commands import read_options_file
    from ..engines.registry import ENGINES
    from ..errors import InvalidInputError

    owner = ENGINES.get(engine.lower())
    if owner is None or owner.options_file_flag is None:
        names = [e.name for e in ENGINES.values() if e.options_file_flag is not None]
        raise InvalidInputError(f"--extra-llm-api-options is read by --engine "
                                f"{', '.join(names)} only",
                                hint=f"plan with --engine {names[0]}" if names else None)
    return read_options_file(owner, path)


def resolve_model(model: str, **kwargs: Any) -> Any:
    """sources.catalog.resolve_model with the progress line. A Hub client that fails on the
    environment (a malformed HF_ENDPOINT, a token that is not ASCII) is an error naming it."""
    from ..sources.catalog import resolve_model as resolve

    with progress_line() as progress:
        try:
            return resolve(model, progress=progress, **kwargs)
        except ValueError as e:
            _blame_environment(model, kwargs.get("token"), e)
            raise


def _blame_environment(model: str, token: str | None, e: ValueError) -> None:
    """Raise an InvalidInputError naming the setting when a Hub setting explains `e`."""
    import os
    from urllib.parse import urlsplit

    from pydantic import ValidationError

    from ..errors import KvplanError

    if isinstance(e, (KvplanError, ValidationError)):
        return
    from ..errors import InvalidInputError

    endpoint = os.environ.get("HF_ENDPOINT")
    if endpoint is not None:
        try:
            urlsplit(endpoint).port  # noqa: B018 - parsing is the check
        except ValueError as bad:
            raise InvalidInputError(f"HF_ENDPOINT is not a URL ({bad}), so {model[:120]!r} "
                                    "cannot be read from the Hub",
                                    hint="unset it, or use a URL such as "
                                    "https://huggingface.co") from None
    for name, value in (("--token", token), ("HF_TOKEN", os.environ.get("HF_TOKEN"))):
        if value is not None and not value.isascii():
            raise InvalidInputError(f"{name} is not ASCII text, so {model[:120]!r} cannot be "
                                    "read from the Hub (a token goes in an HTTP header)",
                                    hint="Hub tokens are ASCII (hf_…); check how it was set") \
                from None


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape(match: re.Match[str]) -> str:
    import json

    return json.dumps(match.group())[1:-1]  # \u00b7, or a surrogate pair


def write(text: str, stream: Any = None) -> None:
    """`text` on stdout (or `stream`); JSON stays valid JSON on a stream that cannot encode
    every character (PYTHONIOENCODING=ascii, a C locale): non-ASCII becomes \\u escapes."""
    out = sys.stdout if stream is None else stream
    if text.lstrip().startswith(("{", "[")) and not _encodes(out, text):
        text = _NON_ASCII.sub(_escape, text)
    out.write(text)


def _encodes(stream: Any, text: str) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True
