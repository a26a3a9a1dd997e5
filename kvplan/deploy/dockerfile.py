"""A Dockerfile read as Docker runs the image it builds.

The container's command is the final stage's last ENTRYPOINT and last CMD together (Dockerfile
reference, "Understand how CMD and ENTRYPOINT interact"): an exec-form ENTRYPOINT takes CMD as
its arguments, a shell-form ENTRYPOINT (`/bin/sh -c`) ignores CMD, a CMD alone runs as it is or,
when the base image has an entrypoint, as that entrypoint's arguments (an engine's server image:
`syntax.image_entrypoints`). A stage built `FROM` an earlier one inherits its ENV, ENTRYPOINT and
CMD; an ENTRYPOINT resets a CMD the stage inherited. The resulting argv is read as a compose
service's entrypoint + command is (commands._argv_command), with the stage's ENV as the
container's environment. `ARG` defaults declared before the first FROM fill in the FROM image
(its tag is the engine's release). RUN lines that run a server are read as before.

Pure parsing: nothing here plans, prints or touches the network.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidConfigError
from ..sources.limits import MAX_COMMAND_CHARS, MAX_DEPLOY_BYTES, read_text_limited
from .commands import (
    DeployParseError,
    Found,
    Templates,
    _argv_command,
    _failed,
    _shell_line,
    _version_from_image,
    exec_form,
    with_file_facts,
)
from .shell_vars import PARAMETER, assignments, expand

# a Dockerfile's first instruction: FROM, or ARG before it (a parser directive is a comment)
_FIRST = re.compile(r"(?i)(FROM|ARG)\s+\S")


@dataclass
class _Form:
    """An ENTRYPOINT or CMD: its argv (`/bin/sh -c TEXT` for the shell form) and line."""

    argv: list[str]
    shell: bool
    line: int


@dataclass
class _Stage:
    """One build stage, as far as the command it leaves the image with is concerned."""

    image: str  # the base image, ARGs filled in (a stage's name followed to its image)
    line: int
    env: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)  # ARGs declared in the stage (RUN sees them)
    entrypoint: _Form | None = None
    cmd: _Form | None = None
    cmd_here: bool = False  # CMD set in this stage (an ENTRYPOINT then keeps it)
    notes: list[str] = field(default_factory=list)


def is_dockerfile(name: str, text: str) -> bool:
    """A Dockerfile by its name (Dockerfile*, Containerfile*, *.dockerfile) or by its first
    instruction (FROM, or ARG before it)."""
    if name.startswith(("Dockerfile", "Containerfile")) or name.endswith(".dockerfile"):
        return True
    first = next((s for s in (ln.strip() for ln in text.splitlines()) if s and s[0] != "#"), "")
    return bool(_FIRST.match(first))


def _instructions(text: str, file: str) -> list[tuple[int, str, str]]:
    """(line, KEYWORD, rest) per instruction: continuations joined, comment lines dropped."""
    out: list[tuple[int, str, str]] = []
    parts: list[str] = []
    start = 1
    for lineno, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not parts):
            continue
        if not parts:
            start = lineno
        cont = stripped.endswith("\\")
        parts.append(stripped[:-1] + " " if cont else stripped)
        if sum(map(len, parts)) > MAX_COMMAND_CHARS:
            raise DeployParseError(file, start, f"an instruction of over {MAX_COMMAND_CHARS:,} "
                                   "characters", hint="split the file, or check it was "
                                   "generated correctly")
        if cont:
            continue
        keyword, _, rest = "".join(parts).strip().partition(" ")
        out.append((start, keyword.upper(), rest.strip()))
        parts = []
    return out


def _form(keyword: str, rest: str, file: str, line: int) -> _Form:
    argv = exec_form(keyword, rest, file, line)
    if argv is None:
        return _Form(["/bin/sh", "-c", rest], True, line)
    return _Form(argv, False, line)


def _declared(rest: str) -> dict[str, str | None]:
    """`ARG NAME[=default] …` → name → its default (None: declared without one)."""
    try:
        words = shlex.split(rest)
    except ValueError:
        return {}
    return {name: (value if eq else None)
            for name, eq, value in (w.partition("=") for w in words)}


def _from(rest: str, line: int, stages: dict[str, _Stage],
          global_args: dict[str, str | None]) -> tuple[_Stage, str | None]:
    """A FROM instruction's stage (an earlier stage's ENV, ENTRYPOINT and CMD when it builds on
    one) and the name it gives the stage."""
    words = [w for w in rest.split() if not w.startswith("--")]  # --platform=…
    written = words[0] if words else ""
    name = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else None
    known = {k: v for k, v in global_args.items() if v is not None}
    image = expand(written, known)
    base = stages.get(image.lower())
    if base is not None:
        return _Stage(base.image, line, dict(base.env), {}, base.entrypoint, base.cmd,
                      notes=list(base.notes)), name
    stage = _Stage(image, line)
    for m in PARAMETER.finditer(image):
        var = m.group(1) or m.group(4)
        declared = var in global_args
        stage.notes.append(f"FROM {written} (line {line}): ARG {var} "
                           + ("has no default" if declared else "is not declared before FROM")
                           + f", so the image's release is not known (docker build --build-arg "
                           f"{var}=… sets it; pass --set {var}=VALUE to check that release)")
    if image != written and not stage.notes:
        names = dict.fromkeys(m.group(1) or m.group(4) for m in PARAMETER.finditer(written))
        used = ", ".join(f"{k}={known[k]}" for k in names if k in known)
        stage.notes.append(f"FROM {written} (line {line}) is {image} (ARG {used}, its default)")
    return stage, name


def _read_stages(text: str, file: str) -> tuple[_Stage | None, list[tuple[int, str, dict]]]:
    """The final stage, and every RUN (line, text, variables it sees) of the file."""
    global_args: dict[str, str | None] = {}
    stages: dict[str, _Stage] = {}
    stage: _Stage | None = None
    runs: list[tuple[int, str, dict]] = []
    for line, keyword, rest in _instructions(text, file):
        if keyword == "FROM":
            stage, name = _from(rest, line, stages, global_args)
            if name:
                stages[name] = stage
        elif stage is None:
            if keyword == "ARG":
                global_args.update(_declared(rest))
        elif keyword == "ARG":
            stage.args.update({k: v for k, v in _declared(rest).items() if v is not None})
        elif keyword == "ENV":
            stage.env.update(assignments(f"ENV {rest}", {**stage.args, **stage.env})[0])
        elif keyword == "ENTRYPOINT":
            stage.entrypoint = _form(keyword, rest, file, line)
            if not stage.cmd_here:
                stage.cmd = None  # Docker resets an inherited CMD
        elif keyword == "CMD":
            stage.cmd, stage.cmd_here = _form(keyword, rest, file, line), True
        elif keyword == "RUN":
            runs.append((line, f"RUN {rest}", {**stage.args, **stage.env}))
    return stage, runs


def _command(stage: _Stage, file: str, templates: Templates) -> Found | None:
    """The serving command the final stage's image runs, if any."""
    entry, cmd = stage.entrypoint, stage.cmd
    forms = [f for f in (entry, cmd) if f is not None]
    if entry is not None and entry.shell:
        forms = [entry]  # a shell-form ENTRYPOINT ignores CMD
    parts = [(word, f.line) for f in forms for word in f.argv]
    found = _argv_command(parts, stage.image, entry is not None, stage.line, file=file,
                          templates=templates, env=stage.env)
    if found is not None and found.error is None:
        _version_from_image(found, stage.image)
        found.notes += stage.notes
    return found


def _commands(text: str, file: str, templates: Templates) -> list[Found] | None:
    """The serving command a Dockerfile's image runs (its final stage's ENTRYPOINT + CMD),
    and any RUN line that runs a server; None for a file with no FROM (a fragment)."""
    stage, runs = _read_stages(text, file)
    if stage is None:
        return None
    out: list[Found] = []
    for line, run, variables in runs:
        try:
            found = _shell_line(run, file=file, line=line, templates=templates,
                                variables=variables)
        except DeployParseError as e:
            found = _failed(e, file)
        if found is not None:
            out.append(found)
    try:
        found = _command(stage, file, templates)
    except DeployParseError as e:
        found = _failed(e, file)
    if found is not None:
        out.append(found)
    return sorted(out, key=lambda f: f.line)


def dockerfile_commands(path: Path, found: list[Found], templates: Templates) -> list[Found]:
    """`found` (the commands the line reader took from `path`) replaced, when `path` is a
    Dockerfile, by the command its image runs: the line reader reads each CMD and ENTRYPOINT
    on its own. A fragment with no FROM keeps its lines."""
    if path.suffix in {".yaml", ".yml"}:
        return found
    file = str(path)
    try:
        raw = read_text_limited(path, MAX_DEPLOY_BYTES, what="deployment file")
    except (InvalidConfigError, OSError):
        return found  # the line reader already reported what is wrong with the file
    filled = Templates(values=dict(templates.values))
    text = filled.fill(raw, file)
    if not is_dockerfile(path.name, text):
        return found
    commands = _commands(text, file, filled)
    return found if commands is None else with_file_facts(commands, raw, path)
