"""`kvplan check`: plan every serving command found in deployment files and apply policies.

One CheckReport comes out, rendered as a table, JSON or GitHub annotations by the CLI.
Exit code: 2 if any file or command could not be read (or nothing was found), else 3 if a
model source was unavailable, else 1 if any deployment does not fit or violates a policy,
else 0.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..api import plan
from ..engines import registry
from ..errors import InvalidConfigError, InvalidInputError, KvplanError
from ..knobs import KNOB_NAMES, MAX_DEVICE_GIB
from ..planner.whatif import real_checkpoints_only
from ..sources.catalog import data_dir, find_model_entry, resolve_gpu, resolve_model
from ..sources.limits import (
    MAX_DEPLOY_BYTES,
    MAX_POLICY_BYTES,
    checked_roots,
    inside_boundary,
    read_text_limited,
    read_upto,
    redact,
    within,
)
from ..specs import SCHEMA_VERSION, GpuSpec, ModelSpec, Plan, Problem
from ..units import GiB
from ..versions import normalize_version, parse_version
from . import env_flags, pd_check, pd_pair
from .commands import (
    DeployParseError,
    Found,
    Templates,
    find_commands,
    model_hint,
    read_options_file,
    recognised_commands,
)
from .dockerfile import dockerfile_commands
from .manifests import ManifestFound, manifest_commands

Status = Literal["fits", "does-not-fit", "policy-violation", "unchecked", "error"]
_DEFAULT_LABEL = registry.get(registry.DEFAULT).label  # the engine a policy's version is for


class Policy(BaseModel):
    """Team rules every deployment must meet (flags, `[tool.kvplan]` in pyproject.toml, or
    kvplan.toml). Unset rules are not checked."""

    model_config = ConfigDict(extra="forbid")

    gpu: str | None = Field(None, description="GPU for commands whose file does not say")
    gpu_memory_gib: float | None = Field(
        None, gt=0, le=MAX_DEVICE_GIB, allow_inf_nan=False,
        description="device total (GiB, as the engine's log prints it) for commands whose file "
        "does not say (# kvplan: gpu-memory-gib=…)")
    engine_version: str | None = Field(
        None, description=f"{_DEFAULT_LABEL} version when the file does not say")
    min_concurrency: float | None = Field(None, gt=0, allow_inf_nan=False,
                                          description="requests at max_model_len")
    min_kv_tokens: int | None = Field(None, gt=0)
    min_headroom_gib: float | None = Field(
        None, ge=0, allow_inf_nan=False,
        description=f"GPU memory left outside {_DEFAULT_LABEL}'s budget")
    max_gpu_memory_utilization: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    min_max_model_len: int | None = Field(None, gt=0)
    require_fp8_kv_cache: bool = False


class CheckedDeployment(BaseModel):
    file: str
    line: int
    engine: str
    command: str
    model: str | None
    gpu: str | None
    gpu_source: str | None
    status: Status
    exit_code: int
    problems: list[Problem]
    policy_violations: list[Problem]
    plan: Plan | None


class CheckSummary(BaseModel):
    """deployments = fits + failed + unchecked + errors; a file that could not be read (or held
    no serving command) is a file error, not a deployment."""

    deployments: int
    fits: int
    failed: int = Field(description="does not fit or violates a policy")
    unchecked: int = Field(description="found but not planned")
    errors: int = Field(description="deployments that could not be planned")
    file_errors: int = Field(0, description="files that could not be read or held no command")

    def sentence(self) -> str:
        """The one-line summary every format prints."""
        files = f"; {self.file_errors} file error(s)" if self.file_errors else ""
        return (f"{self.deployments} deployment(s): {self.fits} fit, {self.failed} failed, "
                f"{self.unchecked} unchecked, {self.errors} error(s){files}")


class CheckReport(BaseModel):
    schema_version: str = SCHEMA_VERSION
    exit_code: int
    summary: CheckSummary
    policy: Policy
    deployments: list[CheckedDeployment]


# ------------------------------------------------------------------------ policy


def load_policy(config: Path | None, cwd: Path) -> tuple[Policy, str | None]:
    """The policy file: `config` if given, else ./kvplan.toml, else [tool.kvplan] in
    ./pyproject.toml. Returns (policy, where it came from). The implicit files must resolve
    inside `cwd` (a kvplan.toml linked out of the repository is refused, not read)."""
    candidates = [config] if config else [cwd / "kvplan.toml", cwd / "pyproject.toml"]
    for path in candidates:
        if path is None or not path.exists():
            if config:
                raise InvalidConfigError("no such file", path=str(config))
            continue
        data = _read_toml(path, None if config else cwd)
        tool = data.get("tool")
        if path.name == "pyproject.toml":
            section = tool.get("kvplan") if isinstance(tool, dict) else None
        elif isinstance(tool, dict) and "kvplan" in tool:
            # kvplan.toml holding the README's [tool.kvplan] snippet: the same settings
            rest = {k: v for k, v in data.items() if k != "tool"}
            extra = sorted(set(tool) - {"kvplan"})
            if extra:
                raise InvalidConfigError(f"unknown table [tool.{extra[0]}]", path=str(path),
                                         hint="kvplan.toml holds kvplan settings only")
            section = {**rest, **tool["kvplan"]}
        else:
            section = data
        if section is None:
            continue
        return _validate_policy(section, str(path)), str(path)
    return Policy(), None


def _read_toml(path: Path, root: Path | None) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        # absent where Python has tomllib: mypy (python_version 3.10) looks here only
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    try:
        return tomllib.loads(read_text_limited(path, MAX_POLICY_BYTES, what="policy file",
                                               root=root))
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        raise InvalidConfigError(f"not valid TOML ({e})", path=str(path)) from None


def _validate_policy(section: dict[str, Any], where: str) -> Policy:
    fields = set(Policy.model_fields)
    for key in section:
        norm = key.replace("-", "_")
        if norm not in fields:
            close = difflib.get_close_matches(norm, sorted(fields), n=1)
            raise InvalidConfigError(f"unknown setting {key!r}", path=where, field=key,
                                     hint=(f"did you mean {close[0]!r}?" if close else
                                           "settings: " + ", ".join(sorted(fields))))
    try:
        policy = Policy.model_validate({k.replace("-", "_"): v for k, v in section.items()})
    except ValidationError as e:
        err = e.errors()[0]
        raise InvalidConfigError(err["msg"], path=where, field=str(err["loc"][0])) from None
    if policy.engine_version is not None:
        policy.engine_version = normalize_version(policy.engine_version,
                                                  f"{where}: engine_version")
    return policy


def policy_violations(p: Plan, policy: Policy) -> list[Problem]:
    """Each violated rule as a Problem whose code is the rule's name."""
    out = []

    def add(code: str, message: str) -> None:
        out.append(Problem(code=code, severity="error", message=message))

    kv, inputs = p.kv_cache, p.inputs
    length = inputs["max_model_len"].value
    if policy.min_concurrency is not None and kv.max_concurrency < policy.min_concurrency:
        add("min_concurrency", f"the KV cache holds {kv.max_concurrency:.2f} requests at "
            f"max_model_len {length}; the policy needs {policy.min_concurrency:g}")
    if policy.min_kv_tokens is not None and kv.tokens < policy.min_kv_tokens:
        add("min_kv_tokens", f"{kv.tokens:,} KV tokens; the policy needs {policy.min_kv_tokens:,}")
    headroom = (p.memory.total_bytes - p.memory.budget_bytes) / GiB
    if policy.min_headroom_gib is not None and headroom < policy.min_headroom_gib:
        add("min_headroom_gib", f"{headroom:.2f} GiB per GPU left outside {p.engine.label}'s "
            f"budget; the policy needs {policy.min_headroom_gib:g} GiB")
    util = inputs["gpu_memory_utilization"].value
    if policy.max_gpu_memory_utilization is not None and isinstance(util, float) \
            and util > policy.max_gpu_memory_utilization:
        add("max_gpu_memory_utilization", f"gpu_memory_utilization {util:g} is above the policy's "
            f"{policy.max_gpu_memory_utilization:g}")
    if policy.min_max_model_len is not None and isinstance(length, int) \
            and length < policy.min_max_model_len:
        add("min_max_model_len",
            f"max_model_len {length} is below the policy's {policy.min_max_model_len}")
    if policy.require_fp8_kv_cache and not str(inputs["kv_cache_dtype"].value).startswith("fp8"):
        add("require_fp8_kv_cache", "the policy requires --kv-cache-dtype fp8")
    return out


# ------------------------------------------------------------------------- check


DEPLOY_SUFFIXES = (".yaml", ".yml", ".sh", ".bash", ".dockerfile")


def expand_paths(paths: list[Path]) -> list[Path]:
    """Files as given; a directory becomes its deployment files (YAML, shell scripts,
    Dockerfiles/Containerfiles), recursively, sorted, hidden ones skipped."""
    out: list[Path] = []
    for path in paths:
        if not path.is_dir():
            out.append(path)
            continue
        out += sorted(f for f in path.rglob("*") if f.is_file()
                      and not any(part.startswith(".") for part in f.relative_to(path).parts)
                      and (f.suffix in DEPLOY_SUFFIXES
                           or f.name.startswith(("Dockerfile", "Containerfile"))))
    return out


STDIN = "-"  # `kvplan check -`: the deployment piped in (helm template … | kvplan check -)
STDIN_NAME = "<stdin>"  # what the rows call it
# A stream the caller's shell opened and named: /dev/stdin, bash's process substitution
# `<(helm template …)` (/dev/fd/63), Linux's /proc/self/fd/N. Written so on the command line,
# never a name a checked folder can hold.
_STREAM = re.compile(r"/dev/stdin|/dev/fd/[0-9]{1,6}|/proc/self/fd/[0-9]{1,6}")


def is_stream(path: Path | str) -> bool:
    """Whether `path` as given names standard input or one of the caller's open descriptors
    rather than a file (STDIN, _STREAM)."""
    return str(path) == STDIN or _STREAM.fullmatch(str(path)) is not None


def _read_stream(given: str) -> bytes:
    """The bytes of standard input (`-`) or a descriptor path, read once, at most
    MAX_DEPLOY_BYTES. Not a file under the boundary rule: the caller's shell opened it (a pipe
    from `helm template`), so it is read as it comes, never resolved as a path; a terminal is
    refused rather than waited on."""
    where = STDIN_NAME if given == STDIN else given
    hint = "pipe the deployment in: helm template … | kvplan check -"
    if given == STDIN:
        try:
            fd = sys.stdin.fileno()
        except (OSError, ValueError, AttributeError):  # a stream without a descriptor
            return _read_stdin_object(hint)
    else:
        try:
            fd = os.open(given, os.O_RDONLY)
        except OSError as e:
            raise InvalidInputError(f"cannot read {where}: {e.strerror or e}",
                                    hint="a descriptor path names one the shell opened for "
                                    "kvplan: kvplan check <(helm template …)") from None
    try:
        if os.isatty(fd):
            raise InvalidInputError(f"{where} is a terminal, not a deployment", hint=hint)
        data = read_upto(fd, MAX_DEPLOY_BYTES)
    except OSError as e:
        raise InvalidInputError(f"cannot read {where}: {e.strerror or e}") from None
    finally:
        if given != STDIN:
            os.close(fd)
    if len(data) > MAX_DEPLOY_BYTES:
        raise InvalidInputError(f"{where} is over the {MAX_DEPLOY_BYTES:,}-byte limit for a "
                                "deployment file", hint="split it, or check the files it is "
                                "made of")
    return data


def _read_stdin_object(hint: str) -> bytes:
    """Standard input without a descriptor (a test's or an embedding program's stream)."""
    isatty = getattr(sys.stdin, "isatty", None)
    if isatty is not None and isatty():
        raise InvalidInputError(f"{STDIN_NAME} is a terminal, not a deployment", hint=hint)
    stream = getattr(sys.stdin, "buffer", sys.stdin)
    try:
        data = stream.read(MAX_DEPLOY_BYTES + 1)
    except (OSError, ValueError) as e:
        raise InvalidInputError(f"cannot read {STDIN_NAME}: {e}", hint=hint) from None
    data = data.encode("utf-8") if isinstance(data, str) else data
    if len(data) > MAX_DEPLOY_BYTES:
        raise InvalidInputError(f"{STDIN_NAME} is over the {MAX_DEPLOY_BYTES:,}-byte limit for "
                                "a deployment file", hint="split it, or check the files it is "
                                "made of")
    return bytes(data)


# the first line (past blank lines and comments) of each kind of deployment text
_DOCKERFILE = re.compile(r"(?:FROM|ARG)\s+\S", re.I)
_YAML_START = re.compile(r"---|(?:apiVersion|kind|services|items)\s*:")


def stream_name(text: str) -> str:
    """The file name a piped deployment is read as, from its content: a Dockerfile (its first
    instruction FROM or ARG, and a FROM) → Dockerfile; YAML whose documents are mappings (a
    Kubernetes manifest, a compose file, Helm values, an engine's config), or a text starting
    as a manifest or compose file does (`apiVersion:`, `kind:`, `services:`, `---`: malformed
    YAML is then reported as such) → stream.yaml; else a shell script, stream.sh."""
    first = next((ln.strip() for ln in text.splitlines()
                  if ln.strip() and not ln.lstrip().startswith("#")), "")
    if _DOCKERFILE.match(first) and re.search(r"^[ \t]*FROM[ \t]", text, re.M | re.I):
        return "Dockerfile"
    try:
        from .commands import _yaml_nodes

        docs = _yaml_nodes(text, STDIN_NAME)
    except KvplanError:
        docs = []
    if docs and all(getattr(d, "id", None) == "mapping" for d in docs):
        return "stream.yaml"
    return "stream.yaml" if _YAML_START.match(first) else "stream.sh"


@dataclass
class _Streams:
    """Standard input and descriptor paths, each read once into a file of its own in a
    private temporary folder (the only boundary it widens), checked as that file; the rows
    name the stream as given (STDIN_NAME for `-`)."""

    folder: Path | None = None  # made for the first stream: no stream, nothing written
    shown: dict[str, str] = field(default_factory=dict)  # the file's path → the rows' name

    def rename(self, row: CheckedDeployment) -> CheckedDeployment:
        def name(text: str) -> str:
            for path, shown in self.shown.items():
                text = text.replace(path, shown)
            return text
        return _rewritten(row, name) if self.shown else row


def _stream_file(given: str, streams: _Streams) -> Path:
    """The file `given` (STDIN or a descriptor path) is checked as."""
    try:
        text = _read_stream(given).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInputError(f"{STDIN_NAME if given == STDIN else given} is not UTF-8 text "
                                f"(undecodable byte at offset {e.start})") from None
    if streams.folder is None:
        import tempfile

        streams.folder = Path(tempfile.mkdtemp(prefix="kvplan-check-"))
    sub = streams.folder / str(len(streams.shown))
    sub.mkdir()
    path = sub / stream_name(text)
    path.write_text(text, encoding="utf-8")
    streams.shown[str(path)] = STDIN_NAME if given == STDIN else given
    return path


def check_files(paths: list[Path], *, policy: Policy, sets: dict[str, str],
                offline: bool | None = None) -> CheckReport:
    """Check every command in `paths`. The paths are the boundary (limits.within): nothing
    outside them is read on behalf of a file — no model or draft-model directory, options
    file or linked file — and credential-looking values never reach the report (redact).
    `-` is standard input, and /dev/stdin, /dev/fd/N a descriptor the caller opened (is_stream):
    each is read once and checked as the file its content is (stream_name)."""
    streams = _Streams()
    try:
        return _check_files(paths, policy=policy, sets=sets, offline=offline, streams=streams)
    finally:
        if streams.folder is not None:
            import shutil

            shutil.rmtree(streams.folder, ignore_errors=True)


def _check_files(paths: list[Path], *, policy: Policy, sets: dict[str, str],
                 offline: bool | None, streams: _Streams) -> CheckReport:
    rows: list[CheckedDeployment] = []
    roots: list[Path] = []
    named: list[Path] = []
    for given in paths:
        try:
            if is_stream(given):
                named.append(_stream_file(str(given), streams))
                roots.append(named[-1].parent)
                continue
            roots += checked_roots([given])
            named.append(given)
        except InvalidInputError as e:
            shown = STDIN_NAME if str(given) == STDIN else str(given)
            rows.append(_error_row(shown, 1, DeployParseError(shown, 1, e.message,
                                                              hint=e.hint), command=""))
    halves: list[tuple[Found, CheckedDeployment]] = []  # for pairing P/D halves (pd_pair)
    with within(roots, own=(data_dir("model_specs"), data_dir("gpu_specs"))):
        for path in expand_paths(named):
            templates = Templates(values=dict(sets))
            try:
                _refuse_outside_link(path)
                found = find_commands(path, templates)
                found = dockerfile_commands(path, manifest_commands(path, found, templates),
                                            templates)
            except DeployParseError as e:
                rows.append(_error_row(e.file, e.line, e, command=""))
                continue
            checked = [_error_row(f.file, f.line, f.error, f.text) if f.error
                       else _check_one(f, policy, offline) for f in found]
            rows += checked
            halves += zip(found, checked, strict=True)
    pd_pair.pair(halves)
    rows = [_redacted(streams.rename(r)) for r in rows]
    if not rows:
        names = [STDIN_NAME if str(p) == STDIN else str(p) for p in paths]
        rows.append(_error_row(", ".join(names), 1, KvplanError(
            f"found no serving command ({recognised_commands()})",
            hint="check the file list; a command built at run time needs a # kvplan: comment"), ""))
    errors = [r for r in rows if r.status == "error"]
    codes = {r.exit_code for r in rows}
    exit_code = 2 if 2 in codes else 3 if 3 in codes else 1 if 1 in codes else 0
    return CheckReport(
        exit_code=exit_code, policy=policy, deployments=rows,
        summary=CheckSummary(
            deployments=len(rows) - len([r for r in errors if r.engine == ""]),
            fits=sum(r.status == "fits" for r in rows),
            failed=sum(r.status in ("does-not-fit", "policy-violation") for r in rows),
            unchecked=sum(r.status == "unchecked" for r in rows),
            errors=len([r for r in errors if r.engine != ""]),
            file_errors=len([r for r in errors if r.engine == ""])))


def unknown_flag_problems(f: Found) -> tuple[list[str], list[Problem]]:
    """Split the flags kvplan does not model into valid ones (kept, listed in the engine's
    `known_flags`) and ones the engine does not have — an error with "did you mean", since the
    engine refuses to start on an unknown argument."""
    syntax = registry.get(f.engine).syntax
    valid = set(syntax.cli_flags) | set(syntax.boolean_flags) | set(syntax.known_flags)
    kept: list[str] = []
    refused: list[Problem] = []
    label = registry.get(f.engine).label
    for arg in f.unknown_flags:
        if not arg.is_flag or _is_valid_flag(arg.name, valid):
            kept.append(str(arg))  # a stray positional word or a valid flag: kept as written
            continue
        close = difflib.get_close_matches(arg.name, sorted(valid), n=1, cutoff=0.75)
        refused.append(Problem(
            code="unknown-flag", severity="error",
            message=f"{arg.name} is not a {label} flag; {label} refuses to start"
            + (f" — did you mean {close[0]}?" if close else "")))
    return kept, refused


def _is_valid_flag(flag: str, valid: set[str]) -> bool:
    """`flag` or the flag it is a form of: `--X.key=value` (a dict flag's dotted form),
    `-O3` / `-O.level` (an optimisation level), `--no-X` (a negated boolean)."""
    base = flag.split(".", 1)[0]
    if base.startswith("-O") and not base.startswith("--"):
        base = "-O"
    return base in valid or (base.startswith("--no-") and f"--{base[5:]}" in valid)


def release_flag_problems(f: Found, version: str | None) -> list[Problem]:
    """The flags `f` writes that its release (`version`; None: the newest modelled) does not
    have (DeploySyntax.flag_releases: added or removed in some release; dotted_from: a JSON
    flag's `--FLAG.KEY` form) or a value of a flag that it does not take (FlagReleases.values),
    each an error: the engine's argument parser refuses an unknown flag or value, so the server
    does not start."""
    engine = registry.get(f.engine)
    syntax = engine.syntax
    if not syntax.flag_releases and syntax.dotted_from is None:
        return []
    release = version or engine.newest_version
    named = f"{engine.label} {release}" + ("" if version else
                                           " (the newest modelled; the file names no release)")
    written = [*f.read_flags.items(),
               *((a.name, a.value) for a in f.unknown_flags if a.is_flag)]
    out: list[Problem] = []
    for flag, value in written:
        base = flag.split(".", 1)[0]
        if (base != flag and flag.startswith("--") and syntax.dotted_from is not None
                and parse_version(release) < parse_version(syntax.dotted_from)):
            out.append(Problem(
                code="unknown-flag", severity="error",
                message=f"{named} has no {flag}: its argument parser reads a JSON flag's dotted "
                f"keys (--FLAG.KEY VALUE) from {syntax.dotted_from}; it refuses the argument and "
                f"the server does not start (hint: write {base} as one JSON object)"))
            continue
        releases = syntax.flag_releases.get(base)
        if releases is None:
            continue
        if releases.in_release(release):
            refused = releases.value_refused(value, release)
            if refused is not None:
                out.append(Problem(
                    code="value-not-in-release", severity="error",
                    message=f"{named}'s {base} does not take {value} (first in {refused.first}; "
                    f"{refused.source}), so its argument parser refuses {flag} {value} and the "
                    "server does not start (hint: "
                    + (f"write {base} {refused.before}, or " if refused.before else "")
                    + f"run {refused.first} or later)"))
            continue
        when = releases.when(release)
        other = releases.instead(release)
        named_flag = syntax.flag_releases.get(other.split(" ", 1)[0])
        if named_flag is not None and not named_flag.in_release(release):
            other = ""  # the spelling it names is not in this release either
        instead = (other.format(value=value) if other
                   else f"{releases.older} {value}" if releases.older else "")
        out.append(Problem(
            code="unknown-flag", severity="error",
            message=f"{named} has no {base} flag ({when}; {releases.source}), so its "
            f"argument parser refuses {flag} and the server does not start"
            + (f" (hint: write {instead})" if instead else "")))
    return out


def _plan_all_refusals(m: ModelSpec, g: GpuSpec, engine: str, version: str | None,
                       knobs: dict[str, Any]) -> tuple[Plan | None, list[Problem]]:
    """Plan; when the engine refuses a setting, drop that setting and plan again, so the report
    names every refusal (a length above the model's and a quantization the checkpoint lacks),
    each under its own code. (None, refusals) when any was refused."""
    refusals: list[Problem] = []
    knobs = dict(knobs)
    while True:
        try:
            with real_checkpoints_only():  # a deployment serves what it names: no what-ifs
                p = plan(m, g, engine=engine, engine_version=version, **knobs)
        except InvalidInputError as e:
            if not refusals and e.knob is None:
                raise
            message = e.message + (f" (hint: {_one_line(e.hint)})" if e.hint else "")
            refusals.append(Problem(code=e.code, severity="error", message=message))
            if e.knob is None or e.knob not in knobs:
                return None, refusals
            knobs.pop(e.knob)
            continue
        return (None, refusals) if refusals else (p, [])


def _refuse_outside_link(path: Path) -> None:
    """A deployment file that is a symlink out of the checked paths (a pull request can
    add `deploy.yaml -> ~/.cache/huggingface/token`) is not read."""
    if path.is_symlink() and not inside_boundary(path):
        raise DeployParseError(str(path), 1, "is a symlink to a file outside the checked "
                               "paths; kvplan check does not follow it",
                               hint="check the file itself, not a link to it")


def _redacted(row: CheckedDeployment) -> CheckedDeployment:
    """The row with credential-looking values (limits.redact) taken out of every string a
    renderer shows: the command, the model, each problem and the plan's own problems."""
    return _rewritten(row, redact)


def _rewritten(row: CheckedDeployment, fn: Callable[[str], str]) -> CheckedDeployment:
    """The row with `fn` applied to every string a renderer shows (the file, the command, the
    model, each problem and the plan's own problems and command)."""
    def problems(items: list[Problem]) -> list[Problem]:
        return [x.model_copy(update={"message": fn(x.message)}) for x in items]

    plan = row.plan
    if plan is not None:
        plan = plan.model_copy(update={"problems": problems(list(plan.problems)),
                                       "command": fn(plan.command)})
    return row.model_copy(update={
        "command": fn(row.command), "file": fn(row.file),
        "model": fn(row.model) if row.model else row.model,
        "problems": problems(row.problems),
        "policy_violations": problems(row.policy_violations), "plan": plan})


def _one_line(hint: str) -> str:
    """A hint inside a row's one-line message: its lines (an offline miss's next step, then
    the did-you-mean) joined by '; '."""
    return hint.replace("\n", "; ")


def _error_row(file: str, line: int, e: KvplanError, command: str,
               f: Found | None = None) -> CheckedDeployment:
    message = e.detail if isinstance(e, DeployParseError) else e.message
    if e.hint:
        message += f" (hint: {_one_line(e.hint)})"
    return CheckedDeployment(
        file=file, line=line, engine=f.engine if f else "", command=command,
        model=f.model if f else None, gpu=f.gpu if f else None,
        gpu_source=f.gpu_source if f else None, status="error", exit_code=e.exit_code,
        problems=[Problem(code=_problem_code(e), severity="error", message=message)],
        policy_violations=[], plan=None)


def _problem_code(e: KvplanError) -> str:
    """The code a row's error is reported under: a file that cannot be read is `unreadable`;
    an input the engine refuses keeps its own code."""
    if isinstance(e, DeployParseError):
        return "unreadable"
    if isinstance(e, InvalidInputError):
        return e.code or "error"
    return "error"


def _model_ref(f: Found) -> tuple[str, list[Problem]]:
    """The model to plan. A container path that does not exist here (/models/Llama-3.1-8B) is
    matched to the catalogue by its folder name, and the plan says so."""
    assert f.model is not None
    path = Path(f.model)
    # The file comes from a pull request: a local model path is read only when it lies inside
    # the checked directory. /models/x, ~/x or ../../x name a path in the container, never a
    # file on the CI machine (which could hold tokens and keys).
    home = f.model.startswith("~")
    exists = not home and os.path.lexists(path)
    if exists and inside_boundary(path):
        return f.model, []
    if path.is_absolute() or home or exists or ".." in path.parts:
        entry = find_model_entry(path.name)
        where = ("does not exist here" if not exists
                 else "is outside the checked paths")
        if entry is None:
            raise KvplanError(f"model path {f.model} {where} and its folder name is not "
                              "a catalogue model",
                              hint="add `# kvplan: model=ORG/NAME` above the command")
        return entry.id, [Problem(code="model-from-path-name", severity="info",
                                  message=f"{f.model} planned as catalogue model {entry.id} "
                                  "(by its folder name)")]
    return f.model, []


def _features_not_modelled(f: Found) -> list[Problem]:
    """Memory features an engine has under flags kvplan does not model for it (each engine's
    `syntax.unmodelled_features`; docs/features.md): a warning, because the plan leaves their
    memory out."""
    table = registry.get(f.engine).syntax.unmodelled_features
    seen = sorted({table[arg.name] for arg in f.unknown_flags
                   if arg.is_flag and arg.name in table})
    return [Problem(code="feature-not-modelled", severity="warning",
                    message=f"{registry.get(f.engine).label} {what}: not modelled by kvplan for "
                    "this engine, so the memory it takes is not subtracted and KV capacity is "
                    "overstated (docs/features.md)") for what in seen]


def _file_notes(f: Found, kept: list[str]) -> list[Problem]:
    """What the file itself says that the plan does not model: its notes, the valid flags kvplan
    keeps but does not model, and memory features under such flags."""
    notes = [Problem(code="file-note", severity="info", message=n) for n in f.notes]
    if kept:
        notes.append(Problem(code="flags-not-modelled", severity="info",
                             message="kept but not modelled: " + " ".join(kept)))
    return notes + _features_not_modelled(f)


def _options_file_knobs(f: Found) -> Path | str | None:
    """Merge the engine's options file (the YAML its `options_file_flag` names: one the file
    itself writes — a script's heredoc, a manifest's ConfigMap — else read beside the deployment
    file) into the command's knobs: its settings win over the flags. Its path on disk, or its
    text when the deployment file holds it."""
    engine = registry.get(f.engine)
    spec = engine.syntax.cli_flags.get(engine.options_file_flag or "")
    if spec is None or spec[0] not in f.knobs:
        return None
    here = Path(f.file).parent
    name = str(f.knobs.pop(spec[0]))
    written = f.files.get(name)
    if written is not None:
        from .commands import load_yaml

        f.knobs.update(engine.options_from_document(load_yaml(written, path=name), name))
        return written
    path = here / name
    f.knobs.update(read_options_file(engine, path, within=here))
    return path


@dataclass
class _Planned:
    """A command planned: the plan (None when the engine refuses it) and every refusal."""

    plan: Plan | None
    refusals: list[Problem]
    read_notes: list[Problem]  # knobs read from the file that kvplan does not model
    model_notes: list[Problem]  # how the model was found (a container path's folder name)


def _plan_found(f: Found, gpu: str | None, policy: Policy, offline: bool | None) -> _Planned:
    """Plan one command as its file describes it. A KvplanError when it cannot be planned."""
    if f.model is None:
        raise DeployParseError(f.file, f.line, "the command names no model",
                               hint=model_hint(f.engine))
    if gpu is None:
        raise DeployParseError(f.file, f.line, "no GPU for this deployment",
                               hint="pass --gpu, set gpu in [tool.kvplan], add a "
                               "nvidia.com/gpu.product (AMD: amd.com/gpu.product-name or "
                               "amd.com/gpu.device-id) node selector, or a `# kvplan: gpu=…` "
                               "comment")
    g = resolve_gpu(gpu)
    ref, model_notes = _model_ref(f)
    m = resolve_model(ref, revision=f.revision, offline=offline)
    if f.engine_version is not None:  # a `# kvplan:` comment's is as written: v0.10.0 → 0.10.0
        f.engine_version = normalize_version(f.engine_version, f"engine-version from "
                                             f"{f.version_source or 'the file'}")
    # the policy's engine_version is the default engine's release
    version = f.engine_version or (policy.engine_version if f.engine == registry.DEFAULT
                                   else None)
    defaults = registry.get(f.engine).syntax.dynamo_defaults
    if isinstance(f, ManifestFound) and f.dynamo_worker and defaults is not None:
        for knob, value in defaults(version).items():  # what Dynamo's backend passes
            f.knobs.setdefault(knob, value)
    options_file = _options_file_knobs(f)
    env_notes, env_refusals = env_flags.apply(f, version)  # what the release reads from env
    settings, pd_notes = pd_check.read(f, options_file)
    try:
        f.knobs = registry.get(f.engine).after_options(f.knobs)
    except ValueError as e:
        raise DeployParseError(f.file, f.line, str(e)) from None
    knobs = {k: v for k, v in f.knobs.items() if k in KNOB_NAMES}
    gib = f.gpu_memory_gib or policy.gpu_memory_gib  # the file's directive, else --gpu-memory-gib
    if gib is not None:
        knobs.setdefault("gpu_memory_gib", gib)
    notes: list[Problem] = []
    extra = sorted(set(f.knobs) - set(knobs))
    if extra:
        notes.append(Problem(code="flags-not-modelled", severity="info",
                             message="read but not modelled: " + ", ".join(extra)))
    p, refusals = _plan_all_refusals(m, g, f.engine, version, knobs)
    if settings is not None and p is not None:  # a P/D pool, planned as plan --disagg does
        buffers = pd_check.buffer_bytes(f.engine, settings, p)
        if buffers:
            p, refusals = _plan_all_refusals(
                m, g, f.engine, version,
                {**knobs, "gpu_memory_gib": pd_check.device_total_gib(p, buffers)})
        if p is not None:
            pd_notes += pd_check.problems(f.engine, settings, p, buffers)
    refusals += (env_refusals + release_flag_problems(f, version)
                 + registry.get(f.engine).deploy_problems(f.knobs, version))
    return _Planned(p, refusals, [*env_notes, *notes, *pd_notes], model_notes)


def _gpu_count_problems(f: Found, gpus: int) -> list[Problem]:
    """The GPUs the file gives the container against the plan's TP × PP × DP: too few is an
    error (the engine will not start), too many a warning."""
    if f.gpu_count is None or f.gpu_count == gpus:
        return []
    if f.gpu_count < gpus:
        return [Problem(code="gpu-count-mismatch", severity="error",
                        message=f"the file gives the container {f.gpu_count} GPU(s) but "
                        f"TP × PP × DP = {gpus}; {registry.get(f.engine).label} will not start")]
    return [Problem(code="gpu-count-mismatch", severity="warning",
                    message=f"the file gives the container {f.gpu_count} GPUs but "
                    f"TP × PP × DP = {gpus}; {f.gpu_count - gpus} would sit idle")]


def _version_from_file(p: Plan) -> Plan:
    """The plan with its engine release's source "file": the deployment file names it (the
    planner calls every release it is given "cli")."""
    given = p.inputs.get("engine_version")
    if given is None:
        return p
    return p.model_copy(update={"inputs": {
        **p.inputs, "engine_version": given.model_copy(update={"source": "file"})}})


def _version_unknown(f: Found, policy: Policy) -> list[Problem]:
    """A warning that the release of a command run in an image was not read from the image's
    tag (`:latest`, `rocm/vllm-dev:nightly`, a private build: the image fixes a release kvplan
    cannot see) and which release it was planned as. Nothing when the file names one elsewhere
    (a pip pin, a `# kvplan: engine-version=` comment) or --engine-version (the policy) gives
    the default engine's; a script run in no image says its release in the plan's inputs
    (engine_version source kvplan-default)."""
    engine = registry.get(f.engine)
    image = f.image if isinstance(f, ManifestFound) else None
    if not image or f.engine_version or (policy.engine_version and f.engine == registry.DEFAULT):
        return []
    how = "`# kvplan: engine-version=X.Y.Z` above the command" + (
        " or --engine-version" if f.engine == registry.DEFAULT else "")
    return [Problem(code="engine-version-unknown", severity="warning",
                    message=f"image {image} names no {engine.label} release kvplan can read: "
                    f"planned as {engine.newest_version}, the newest modelled (write {how})")]


def _check_one(f: Found, policy: Policy, offline: bool | None) -> CheckedDeployment:
    if isinstance(f, ManifestFound) and f.unchecked:  # a manifest value left as a template
        return CheckedDeployment(
            file=f.file, line=f.line, engine=f.engine, command=f.text, model=None, gpu=None,
            gpu_source=None, status="unchecked", exit_code=0, policy_violations=[], plan=None,
            problems=[Problem(code="unchecked", severity="warning", message=f.unchecked)])
    gpu = f.gpu or policy.gpu
    gpu_source = f.gpu_source or ("--gpu / policy" if policy.gpu else None)

    def row(status: Status, exit_code: int, problems: list[Problem], plan: Plan | None = None,
            violations: list[Problem] | None = None) -> CheckedDeployment:
        return CheckedDeployment(
            file=f.file, line=f.line, engine=f.engine, command=f.text, model=f.model, gpu=gpu,
            gpu_source=gpu_source, status=status, exit_code=exit_code, problems=problems,
            policy_violations=violations or [], plan=plan)

    kept, refused = unknown_flag_problems(f)
    kept = [k for k in kept if (k.split(maxsplit=1) or [""])[0] not in pd_check.READ_FLAGS]
    notes = _file_notes(f, kept)
    try:
        planned = _plan_found(f, gpu, policy, offline)
    except KvplanError as e:
        if e.exit_code == 3:
            e.hint = (e.hint or "") + " (kvplan check --offline uses only cached models)"
        failed = _error_row(f.file, f.line, e, f.text, f)
        failed.problems += refused
        return failed
    p = planned.plan
    if p is None or planned.refusals or refused:
        # The engine would refuse the command: every reason, not only the first.
        return row("error", 2, [*refused, *planned.refusals, *notes, *planned.read_notes])
    problems = [*notes, *planned.read_notes, *planned.model_notes, *p.problems]
    if f.version_source and f.engine_version:
        problems.append(Problem(code="engine-version-from-file", severity="info",
                                message=f"{registry.get(f.engine).label} {f.engine_version} "
                                f"from {f.version_source}"))
        p = _version_from_file(p)
    problems += _version_unknown(f, policy)
    problems += _gpu_count_problems(f, p.gpu.count)
    fits = p.fits and not (f.gpu_count is not None and f.gpu_count < p.gpu.count)
    violations = policy_violations(p, policy) if fits else []
    status: Status = "does-not-fit" if not fits else "policy-violation" if violations else "fits"
    return row(status, 0 if status == "fits" else 1, problems, p, violations)
