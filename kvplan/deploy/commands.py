"""Find serving commands in deployment files and read their engine flags.

Recognised: shell lines (scripts, Dockerfile RUN/CMD/ENTRYPOINT in shell or JSON form,
backslash continuations) running a registered engine's executable or `python -m MODULE`;
YAML (multi-document): Kubernetes / KServe / Helm-rendered manifests (every `containers:`
entry's command + args, or the bare arguments of an image whose entrypoint is the server; GPU
count from resources.limits["nvidia.com/gpu"], GPU model from the nvidia.com/gpu.product node
selector or affinity), docker-compose services, and an engine's own config YAML (its flags as
keys). A `# kvplan: gpu=… model=… engine-version=…` comment sets what a file cannot say.
Templates (`{{ }}`, `${VAR}`) are filled from `--set KEY=VALUE`.

What each engine's commands look like (executables, modules, images, flag tables, environment)
comes from its `syntax` (engines/base.py DeploySyntax), read through the engine registry: no
engine is named here.

Pure parsing: nothing here plans, prints or touches the network.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from ..engines import registry
from ..engines.base import DeploySyntax, Engine
from ..errors import InvalidConfigError, InvalidInputError
from ..knobs import MAX_DEVICE_GIB, loads_flag_json
from ..sources.limits import (
    MAX_COMMAND_CHARS,
    MAX_COMMANDS_PER_FILE,
    MAX_DEPLOY_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    inside,
    knob_error,
    read_text_limited,
    yaml_too_deep,
)
from .launchers import launcher_nodes
from .shell_vars import ASSIGNMENT, PARAMETER, assignments, expand, template_defaults


class DeployParseError(InvalidInputError):
    """A deployment file (or one command in it) cannot be read. Names the file and line."""

    def __init__(self, file: str, line: int, message: str, hint: str | None = None) -> None:
        self.file, self.line, self.detail = file, line, message
        super().__init__(f"{file}:{line}: {message}", hint=hint)


@dataclass(frozen=True)
class UnknownArg:
    """A word of a serving command that kvplan does not model: a flag, with the value it
    appears to take, or a stray positional word (`flag` is then the word itself)."""

    flag: str
    value: str | None = None
    joined: bool = False  # written `--flag=value`

    @property
    def name(self) -> str:
        """The flag as named in messages and tables: a token holding a space (`"--x 1"` quoted
        as one argument) is named by its first word."""
        words = self.flag.split(maxsplit=1)
        return words[0] if words else ""

    @property
    def is_flag(self) -> bool:
        return self.flag.startswith("-")

    def __str__(self) -> str:
        """The argument as written."""
        if self.value is None:
            return self.flag
        return f"{self.flag}{'=' if self.joined else ' '}{self.value}"


@dataclass
class Found:
    """One serving command found in a file, with everything the file says about it."""

    file: str
    line: int
    engine: str  # a name in the engine registry
    text: str  # the command as written (joined)
    model: str | None = None
    knobs: dict[str, Any] = field(default_factory=dict)
    revision: str | None = None
    unknown_flags: list[UnknownArg] = field(default_factory=list)
    gpu: str | None = None
    gpu_source: str | None = None
    gpu_count: int | None = None
    gpu_memory_gib: float | None = None  # a `# kvplan: gpu-memory-gib=` directive's
    engine_version: str | None = None
    version_source: str | None = None
    notes: list[str] = field(default_factory=list)
    error: DeployParseError | None = None  # this command could not be read; the others still are
    # --- schemas (#23) --- files the script writes before the command (`cat > NAME <<'EOF'`):
    # name as written → text; an engine's options file named so is read from here
    files: dict[str, str] = field(default_factory=dict)
    # --- checkenv --- the environment variables the command runs with that its engine reads
    # in place of a flag in some releases (DeploySyntax.versioned_env; applied by
    # deploy/env_flags.py once the release is known): name → value
    env: dict[str, str] = field(default_factory=dict)
    # --- flagrel --- the engine flags read into knobs, as written (a dotted key whole:
    # `--eplb-config.num_redundant_experts`) → the value read; check refuses those the
    # command's release does not have (DeploySyntax.flag_releases, dotted_from)
    read_flags: dict[str, object] = field(default_factory=dict)


def keep_env(found: Found | None, env: dict[str, str] | None) -> None:
    """Record on `found` the variables of `env` its engine reads in some releases instead of a
    flag (DeploySyntax.versioned_env); those already recorded (an assignment on the command's
    own line) win, as the shell's do."""
    if found is None or found.error is not None or not env or found.engine not in registry.ENGINES:
        return
    wanted = _syntax(found.engine).versioned_env
    found.env = {**{k: v for k, v in env.items() if k in wanted}, **found.env}




def _assignments(tokens: list[str]) -> dict[str, str]:
    """`NAME=VALUE` words before a command (`VLLM_ALL2ALL_BACKEND=x vllm serve …`, also after
    `env` or `exec`): the environment the shell gives that command."""
    out: dict[str, str] = {}
    for tok in tokens:
        if ASSIGNMENT.match(tok):
            name, _, value = tok.partition("=")
            out[name] = value
    return out


def _failed(e: DeployParseError, file: str, engine: str = "", text: str = "") -> Found:
    """One unreadable command (service, container, line), reported in place of its plan."""
    if not e.file:
        e = DeployParseError(file, e.line, e.detail, hint=e.hint)
    return Found(file=e.file, line=e.line, engine=engine, text=text, error=e)


# ------------------------------------------------------------------ flag tables
# Every engine's flags, entry points, images and environment come from the engine registry
# (each engine's `syntax`); this module only knows how deployment files are written.


def _syntax(engine: str) -> DeploySyntax:
    return registry.get(engine).syntax


def _boolean_flags() -> frozenset[str]:
    """Every registered engine's flags that take no value."""
    return frozenset().union(*(e.syntax.boolean_flags for e in registry.ENGINES.values()))


def _entry_hint() -> re.Pattern[str]:
    """Matches a line that may run a registered engine (an executable or a module name)."""
    return _alternatives(tuple(
        [r"\b" + re.escape(exe) + r"\b" for e in registry.ENGINES.values()
         for exe, _ in e.syntax.executables]
        + [re.escape(mod) for e in registry.ENGINES.values() for mod in e.syntax.modules]))


@lru_cache(maxsize=8)
def _alternatives(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(patterns))


def recognised_commands() -> str:
    """What a serving command looks like to kvplan, for a message about a file that has none:
    every registered engine's executables and modules, images and config YAML."""
    engines = list(registry.ENGINES.values())
    commands = [" ".join(filter(None, exe)) for e in engines for exe in e.syntax.executables]
    commands += [f"python -m {module}" for e in engines for module in e.syntax.modules]
    configs = [e.label for e in engines if e.syntax.config_yaml]
    shown = ", ".join(dict.fromkeys(commands)) + ", the arguments of an engine's server image"
    if configs:
        shown += f", or a {' / '.join(configs)} --config YAML"
    return shown


def model_hint(engine: str) -> str:
    """How to name the model on this engine's command line."""
    syntax = _syntax(engine)
    flag = next((f for f, (knob, _) in syntax.cli_flags.items() if knob == "model"), None)
    if syntax.positional_model and syntax.executables:
        exe = " ".join(filter(None, syntax.executables[0]))
        return f"add the model after `{exe}`" + (f", or {flag}" if flag else "")
    return f"add {flag} MODEL" if flag else "add the model"


DIRECTIVE = re.compile(r"#\s*kvplan:\s*(.+)$")
DIRECTIVE_KEYS = {"gpu", "model", "engine-version", "gpu-count", "gpu-memory-gib", "nodes"}
# `{{ … }}` holds no brace: each match attempt stops at the next brace, so a line of
# `{{ {{ {{ …` is scanned once (linear), not once per `{{` (quadratic). Stripped in _one.
TEMPLATE = re.compile(r"\{\{([^{}]*)\}\}|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^{}]*))?\}"
                      r"|\$([A-Za-z_][A-Za-z0-9_]*)")
UNSET = "__kvplan_unset_{}__"
HELM_CONTROL = re.compile(
    r"\{\{-?\s*(if|else|end|range|with|define|include|template|/\*)[^{}]*\}\}")


def human_int(text: str) -> int:
    """'32768', '32k' (×1000), '32K' (×1024), '1M', '1.5k' (the human-readable integers
    engine flags take)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG]?)", text.strip()) if len(text) <= 32 else None
    if not m:
        raise ValueError(text)
    number, suffix = m.groups()
    mult = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}[suffix]
    value = float(number) * mult
    if value != int(value) or (not suffix and "." in number):
        raise ValueError(text)
    return int(value)


# ------------------------------------------------------------------- templates


@dataclass
class Templates:
    """`--set` values and the placeholders left unfilled (sentinel → (placeholder, line))."""

    values: dict[str, str]
    unset: dict[str, tuple[str, int]] = field(default_factory=dict)

    @staticmethod
    def key(expr: str) -> str:
        expr = expr.split("|")[0].strip()
        return expr.removeprefix(".Values.").removeprefix("Values.").strip()

    def fill(self, text: str, file: str) -> str:
        out = []
        for lineno, line in enumerate(text.splitlines(keepends=True), 1):
            stripped = line.strip()
            if HELM_CONTROL.fullmatch(stripped):
                out.append("\n")  # Helm control line: no value of its own
                continue
            out.append(TEMPLATE.sub(partial(self._one, line=lineno), line))
        return "".join(out)

    def _one(self, m: re.Match[str], line: int) -> str:
        expr, var, bare = m.group(1), m.group(2), m.group(4)
        if expr is not None:
            expr = expr.strip().removeprefix("-").removesuffix("-").strip()
        if bare is not None:  # $VAR: filled when --set names it, else left for check() to report
            return self.values.get(bare, m.group(0))
        key = self.key(expr) if expr is not None else var
        for k in (key, expr, var):
            if k and k in self.values:
                return self.values[k]
        if var:  # ${VAR…}: left for the script's shell (its env, its assignments) or check()
            return m.group(0)
        sentinel = UNSET.format(len(self.unset))
        self.unset[sentinel] = (m.group(0), line)
        return sentinel

    def as_written(self, text: str) -> str:
        """`text` with each unfilled Helm placeholder's sentinel put back as the file wrote it
        (for messages and the arguments kvplan keeps without modelling them)."""
        for sentinel, (placeholder, _) in self.unset.items():
            text = text.replace(sentinel, placeholder)
        return text

    def check(self, value: str, flag: str, file: str, line: int,
              shell: Mapping[str, str] | None = None) -> str:
        """`value` with nothing left to fill: an unfilled Helm placeholder or variable is a
        DeployParseError naming it. A `${VAR:-word}` / `${VAR-word}` no shell expanded (an
        exec-form argument) is a template left unset: its word, as it renders. `shell`: the
        variables the shell that read the line knew; a `$NAME` of theirs left in the value is
        text the engine receives as written (a variable's value holding `$NAME`, or a quoted
        `'$NAME'`: sh expands a parameter once and does not scan its value again, POSIX Shell
        Command Language 2.6.2 and 2.6), also a DeployParseError, saying so."""
        for sentinel, (placeholder, at) in self.unset.items():
            if sentinel in value:
                key = self.key(placeholder.strip("{}$ -"))
                raise DeployParseError(file, at, f"{flag} is the unexpanded template {placeholder}",
                                       hint=f"pass --set {key}=VALUE, "
                                       "or check the rendered file (helm template …)")
        value = template_defaults(value)
        literal = None
        for variable in PARAMETER.finditer(value):
            var = variable.group(1) or variable.group(4)
            if shell is not None and var in shell:  # the shell knew it: text, not a reference
                literal = literal or variable.group(0)
                continue
            raise DeployParseError(file, line, f"{flag} is the unexpanded variable "
                                   f"{variable.group(0)}",
                                   hint=f"set {var} above the command or in the container's env "
                                   "(only a shell expands it: a `sh -c` script, a shell-form "
                                   f"CMD), or pass --set {var}=VALUE")
        if literal is not None:
            raise DeployParseError(file, line, f"{flag} is the text {value!r}: the shell expands "
                                   f"a variable once, so the {literal} in a variable's value (or "
                                   "in single quotes) reaches the engine as written",
                                   hint="set the variable to the value itself (in a Kubernetes "
                                   "env, $(NAME) is filled in by Kubernetes)")
        return value


# ------------------------------------------------------------------ options files

MAX_OPTIONS_BYTES = 1 << 20  # an engine's options file is a few lines; refuse anything huge


def _yaml_module() -> Any:
    """PyYAML, imported when first needed (a plan never reads YAML)."""
    import yaml  # type: ignore[import-untyped]  # no stubs: types-PyYAML is not a dependency

    return yaml


def load_yaml(text: str, *, path: str | None = None) -> Any:
    """A YAML document (an empty text: an empty mapping); malformed YAML is an
    InvalidConfigError naming `path`."""
    yaml = _yaml_module()

    if not text.strip():
        return {}
    try:
        deepest = yaml_too_deep(text)
        if deepest is not None:
            raise InvalidConfigError(f"YAML nested more than {MAX_YAML_DEPTH} levels deep",
                                     path=f"{path}:{deepest}" if path else None,
                                     hint=NESTING_HINT)
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        where = f"{path}:{mark.line + 1}" if path and mark is not None else path
        raise InvalidConfigError(f"not valid YAML: {problem}", path=where) from None


def read_options_file(engine: Engine, path: Path, *, within: Path | None = None) -> dict[str, Any]:
    """kvplan knobs from the YAML file an engine's `options_file_flag` names (a YAML of
    further settings). `within`: the file must resolve inside this directory
    (deployment files name paths relative to themselves; none may escape)."""
    shown = str(path)
    if within is not None and not inside(path, within):
        raise InvalidConfigError("the options file lies outside the deployment's directory",
                                 path=shown, hint="keep it beside the deployment file")
    text = read_text_limited(path, MAX_OPTIONS_BYTES, what=f"{engine.options_file_flag} file",
                             root=within)
    return engine.options_from_document(load_yaml(text, path=shown), shown)


# ---------------------------------------------------------------- flag parsing


def parse_args(argv: list[str], engine: str, *, file: str, line: int, templates: Templates,
               text: str, shell: Mapping[str, str] | None = None) -> Found:
    """Engine arguments (after the entrypoint) → Found. Both `--flag value` and `--flag=value`;
    unknown flags are kept; a known flag without its value, a bad value or two different values
    for one setting is a DeployParseError."""
    parser = _ArgParser(argv, _syntax(engine), templates, shell,
                        Found(file=file, line=line, engine=engine,
                              text=templates.as_written(text)))
    while parser.more():
        parser.step()
    return parser.finish()


class _ArgParser:
    """One pass over an engine's argument list; `i` is the next argument to read."""

    def __init__(self, argv: list[str], syntax: DeploySyntax, templates: Templates,
                 shell: Mapping[str, str] | None, found: Found) -> None:
        self.argv, self.syntax, self.templates, self.found = argv, syntax, templates, found
        self.shell = shell  # the variables of the shell that read the line (Templates.check)
        self.file, self.line = found.file, found.line
        self.seen: dict[str, tuple[str, object]] = {}  # knob → (the flag that set it, value)
        self.dotted: dict[str, dict[str, Any]] = {}  # a JSON flag → the keys given dotted
        self.dotted_mm: dict[str, int] = {}  # `--limit-mm-per-prompt.MODALITY N`, merged
        self.i = 0

    def more(self) -> bool:
        return self.i < len(self.argv)

    def _next_is_value(self) -> bool:
        """The next argument exists and is not a flag (a value for the flag just read)."""
        return self.more() and not self.argv[self.i].startswith("-")

    def _take(self) -> str:
        word = self.argv[self.i]
        self.i += 1
        return word

    def step(self) -> None:
        tok = self._take()
        if not tok.startswith("-") or tok == "-":
            self._positional(tok)
            return
        flag, eq, inline = tok.partition("=")
        value = inline if eq else None
        table = self.syntax.cli_flags
        negated = f"--{flag[5:]}" if flag.startswith("--no-") else None
        if negated is not None and negated in table and table[negated][1] in ("bool", "off"):
            self._set(table[negated][0], table[negated][1] == "off", flag)  # --no-disable-…
            return
        dotted = _dotted_prefix(self.syntax)
        if dotted and flag.startswith(dotted) and len(flag) > len(dotted):
            self.i = _dotted_mm_limit(self.dotted_mm, flag, value, self.argv, self.i, dotted,
                                      self.file, self.line)
            self.found.read_flags[flag] = self.dotted_mm[flag[len(dotted):]]
            return
        base, dot, key = flag.partition(".")
        if dot and key and base in self.syntax.dotted_json:
            self._dotted_json(base, flag, key, value)
            return
        spec = table.get(flag)
        if spec is None:
            self._unknown(flag, value)
            return
        knob, kind = spec
        if kind == "bool":
            self._set(knob, True if value is None else value.lower() in _TRUE_WORDS, flag)
        elif kind == "off":  # a flag that turns its knob off (SGLang's --disable-radix-cache)
            self._set(knob, False if value is None else value.lower() not in _TRUE_WORDS, flag)
        elif kind == "list":
            self._set(knob, self._list_value(flag, value), flag)
        else:
            self._set(knob, self._scalar_value(knob, kind, flag, value), flag)

    def _positional(self, tok: str) -> None:
        found = self.found
        if found.model is None and self.syntax.positional_model and "model" not in self.seen:
            found.model = self.templates.check(tok, "the model", self.file, self.line,
                                              self.shell)
            self.seen["model"] = ("model", found.model)
        else:
            found.unknown_flags.append(UnknownArg(self.templates.as_written(tok)))

    def _dotted_json(self, base: str, flag: str, key: str, value: str | None) -> None:
        """`--FLAG.KEY VALUE` / `--FLAG.KEY=VALUE`: KEY (dotted: nested) of the JSON object
        FLAG takes, as vLLM's FlexibleArgumentParser reads it (engines/vllm.py DOTTED_FROM): the
        next argument is the value whatever it looks like, decoded as JSON when it is JSON."""
        if value is None:
            if not self.more():
                raise DeployParseError(self.file, self.line, f"{flag} is missing its value",
                                       hint=f"write {flag} VALUE or {flag}=VALUE")
            value = self._take()
        raw = self.templates.check(value, flag, self.file, self.line, self.shell)
        try:
            item: Any = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON (or nested past Python's stack): text
            item = raw
        *parents, last = key.split(".")
        node = self.dotted.setdefault(base, {})
        for part in parents:  # `--FLAG.a.b 1` → {"a": {"b": 1}}, merged with the keys before
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[last] = item
        self.found.read_flags[flag] = raw

    def _unknown(self, flag: str, value: str | None) -> None:
        """A flag kvplan does not model: kept with the value it appears to take, as written."""
        if value is None and not (flag in _boolean_flags() or flag.startswith("--no-")
                                  or not self.more() or self.argv[self.i].startswith("-")):
            value = self._take()
            joined = False
        else:
            joined = value is not None
        shown = None if value is None else self.templates.as_written(value)
        self.found.unknown_flags.append(UnknownArg(self.templates.as_written(flag), shown, joined))

    def _list_value(self, flag: str, value: str | None) -> list[str]:
        """argparse nargs="*": every value up to the next flag (a LoRA adapter list)."""
        words = [value] if value is not None else []
        while value is None and self._next_is_value():
            words.append(self.templates.check(self._take(), flag, self.file, self.line,
                                              self.shell))
        if not words:
            raise DeployParseError(self.file, self.line, f"{flag} is missing its value",
                                   hint=f"write {flag} VALUE [VALUE …]")
        return words

    def _scalar_value(self, knob: str, kind: str, flag: str, value: str | None) -> object:
        if value is None:
            if not self.more() or self.argv[self.i].startswith("--") \
                    or re.fullmatch(r"-[a-z]+", self.argv[self.i]):
                raise DeployParseError(self.file, self.line, f"{flag} is missing its value",
                                       hint=f"write {flag} VALUE or {flag}=VALUE")
            value = self._take()
        raw = self.templates.check(value, flag, self.file, self.line, self.shell)
        converted = convert_value(raw, kind, flag, self.file, self.line)
        why = knob_error(knob, converted)  # nan, inf, a 400-digit length: bounded like the CLI's
        if why:
            raise DeployParseError(self.file, self.line, f"{flag} {why}")
        return converted

    def _set(self, knob: str, value: object, flag: str) -> None:
        if knob in self.seen and self.seen[knob][1] != value:
            first_flag, first = self.seen[knob]
            raise DeployParseError(self.file, self.line, f"contradictory flags: {first_flag} "
                                   f"{first} and {flag} {value}", hint="keep one of them")
        self.seen[knob] = (flag, value)
        self.found.knobs[knob] = value
        self.found.read_flags[flag] = value

    def finish(self) -> Found:
        found = self.found
        for base, keys in self.dotted.items():
            # the parser passes the dotted keys as one `--FLAG JSON` after every other argument:
            # that object replaces a `--FLAG '{…}'` the command also wrote
            knob = self.syntax.cli_flags[base][0]
            written = found.knobs.get(knob)
            merged = json.dumps(keys)
            if written is not None and written != merged:
                found.notes.append(
                    f"{base} {written} is replaced by the {base}.KEY settings "
                    f"({merged}): the engine's argument parser passes those as one {base} after "
                    "the other arguments, and the last one wins")
            found.knobs[knob] = merged
        self._finish_dotted_mm()
        if "model" in found.knobs:  # --model / --model-path
            found.model = found.knobs.pop("model")
        found.revision = found.knobs.pop("revision", None)
        if self.syntax.combine is not None:
            try:
                found.knobs = self.syntax.combine(found.knobs, found.model)
            except ValueError as e:
                raise DeployParseError(self.file, self.line, str(e)) from None
        return found

    def _finish_dotted_mm(self) -> None:
        """The `--limit-mm-per-prompt.MODALITY N` keys as the whole limit: vLLM's
        FlexibleArgumentParser.parse_args merges every dotted key of a flag into one object and
        appends it as `--limit-mm-per-prompt JSON` after all the other arguments, and argparse
        keeps the last value (a plain store of the JSON-decoded text), so the dotted keys replace
        a `--limit-mm-per-prompt '{…}'` written before or after them; the JSON's other
        modalities are dropped, not merged (vllm/utils/argparse_utils.py parse_args `dict_args`
        and vllm/engine/arg_utils.py `--limit-mm-per-prompt`, vLLM 0.12.0 wheel)."""
        if not self.dotted_mm:
            return
        found = self.found
        written = found.knobs.get(MM_LIMIT_KNOB)
        if written is not None:
            from ..knobs import parse_mm_limits

            flag = next(f for f, (knob, _) in self.syntax.cli_flags.items()
                        if knob == MM_LIMIT_KNOB)
            try:  # the parser still decodes the replaced JSON: a bad one stops it
                differs = parse_mm_limits(written) != self.dotted_mm
            except ValueError as e:
                raise DeployParseError(self.file, self.line, f"{flag} {written!r}: {e}") from None
            if differs:
                found.notes.append(
                    f"{flag} {written} is replaced by the {flag}.MODALITY settings "
                    f"({json.dumps(self.dotted_mm)}): the engine's argument parser passes those "
                    f"as one {flag} after the other arguments, and the last one wins (the "
                    "modalities only the JSON names are not kept)")
        found.knobs[MM_LIMIT_KNOB] = dict(self.dotted_mm)


_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
MM_LIMIT_KNOB = "limit_mm_per_prompt"


def _dotted_prefix(syntax: DeploySyntax) -> str | None:
    """`--FLAG.` when the engine takes the per-modality form of its multimodal-limit flag
    (`--FLAG.image 4` sets {"image": 4}, its argument parser's dotted form of a dict flag)."""
    if not syntax.dotted_mm_limit:
        return None
    flag = next((f for f, (knob, _) in syntax.cli_flags.items() if knob == MM_LIMIT_KNOB), None)
    return f"{flag}." if flag else None


def _dotted_mm_limit(limits: dict[str, int], flag: str, inline: str | None, argv: list[str],
                     i: int, prefix: str, file: str, line: int) -> int:
    """Merge `--FLAG.MODALITY N` into `limits`, the dotted keys so far (a later one for the same
    modality wins, as vLLM's parser merges them); returns the next index."""
    from ..knobs import parse_mm_limits

    modality = flag[len(prefix):]
    if inline is None:
        if i >= len(argv) or argv[i].startswith("-"):
            raise DeployParseError(file, line, f"{flag} is missing its value",
                                   hint=f"write {flag} 4 or {flag}=4")
        inline, i = argv[i], i + 1
    try:
        limits.update(parse_mm_limits({modality: inline}))
    except ValueError as e:
        raise DeployParseError(file, line, f"{flag} {inline!r}: {e}") from None
    return i


def convert_value(raw: str, kind: str, flag: str, file: str, line: int) -> Any:
    """A flag's (or environment variable's) text as its knob's type: "int", "hint" (an integer
    such as 32k) or "float" converted, any other kind kept as text; a DeployParseError names
    `flag` at file:line when it is not one."""
    try:
        if kind == "int":
            if len(raw) > 32:
                raise ValueError(raw)
            return int(raw)
        if kind == "hint":
            return human_int(raw)
        if kind == "float":
            if len(raw) > 32:
                raise ValueError(raw)
            return float(raw)
    except ValueError:
        if len(raw) > 32 and raw.strip().isdigit():
            raise DeployParseError(file, line, f"{flag} (a {len(raw.strip())}-digit number) is out "
                                   "of range", hint="check the value") from None
        what = {"int": "an integer", "hint": "an integer such as 32768 or 32k",
                "float": "a number"}[kind]
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise DeployParseError(file, line, f"{flag} {shown!r} is not {what}") from None
    return raw


# ----------------------------------------------------------------- shell lines


def _entrypoint(tokens: list[str]) -> tuple[str, list[str]] | None:
    """(engine, arguments after the entrypoint) if these tokens run a serving command:
    an engine's executable (with its subcommand, if it has one) or `python -m MODULE`."""
    for k, tok in enumerate(tokens):
        base = tok.rsplit("/", 1)[-1]
        nxt = tokens[k + 1] if k + 1 < len(tokens) else None
        for e in registry.ENGINES.values():
            for exe, sub in e.syntax.executables:
                if base == exe and (sub is None or nxt == sub):
                    return e.name, tokens[k + (2 if sub else 1):]
            if tok == "-m" and nxt in e.syntax.modules:
                return e.name, tokens[k + 2:]
    return None


def _cut_at_shell_operator(tokens: list[str]) -> list[str]:
    for k, tok in enumerate(tokens):
        if tok in {"&&", "||", ";", "|", "&", ">", ">>", "2>&1"} or tok.startswith(("2>", ">")):
            return tokens[:k]
    return tokens


# `cat > NAME <<'EOF'` (or <<EOF, <<"EOF", <<-EOF): the here-document kvplan's own TensorRT-LLM
# launch lines write their --extra_llm_api_options file with
_HEREDOC = re.compile(r"^\s*cat\s*>\s*(?P<name>[\w./-]{1,200})\s*<<-?\s*"
                      r"""(?P<q>['"]?)(?P<end>\w{1,40})(?P=q)\s*$""")


def heredocs(text: str) -> tuple[str, dict[str, str]]:
    """`text` with every here-document that writes a file (`cat > NAME <<'EOF'` … `EOF`) blanked
    out (line numbers kept), and those files: name → text."""
    out: list[str] = []
    inline: dict[str, str] = {}
    doc: tuple[str, str, list[str]] | None = None  # (name, end word, lines so far)
    for raw in text.splitlines():
        if doc is not None:
            if raw.strip() == doc[1]:
                inline[doc[0]], doc = "".join(line + "\n" for line in doc[2]), None
            else:
                doc[2].append(raw)
            out.append("")
        elif m := _HEREDOC.match(raw):
            doc = (m.group("name"), m.group("end"), [])
            out.append("")
        else:
            out.append(raw)
    return "\n".join(out), inline


def shell_commands(text: str, *, file: str, first_line: int, templates: Templates,
                   env: Mapping[str, str] | None = None) -> list[Found]:
    """Serving commands in shell text (continuations joined, comments dropped); files the text
    writes with a here-document are kept on each command (Found.files). Each line's variables
    are expanded as the shell would: from `env` (the environment the script runs in) and the
    script's own assignments and exports above the line."""
    out: list[Found] = []
    parts: list[str] = []
    size, start = 0, first_line
    lines = text.splitlines()
    files, data_lines = _heredocs(lines)
    exported: dict[str, str] = {}  # `export NAME=VALUE` / Dockerfile `ENV` lines so far
    variables = dict(env or {})  # what the shell expands: env, then the script's assignments
    for offset, raw in enumerate(lines):
        if offset in data_lines:  # a heredoc's body is data, not commands
            continue
        if not parts:
            start = first_line + offset
        stripped = raw.rstrip()
        cont = stripped.endswith("\\")
        parts.append(stripped[:-1] + " " if cont else stripped)  # joined once: linear
        size += len(parts[-1])
        if size > MAX_COMMAND_CHARS:
            raise DeployParseError(file, start, f"a command line of over {MAX_COMMAND_CHARS:,} "
                                   "characters (Linux refuses one argument longer than 128 KiB)",
                                   hint="split the file, or check it was generated correctly")
        if cont:
            continue
        sets, exports = assignments("".join(parts), variables)
        variables.update(sets)
        if exports:
            exported.update(sets)
        try:
            found = _shell_line("".join(parts), file=file, line=start, templates=templates,
                                variables=variables)
        except DeployParseError as e:  # one bad command does not hide the others
            found = _failed(e, file)
        parts, size = [], 0
        if found:
            found.files = dict(files)
            keep_env(found, exported)
            out.append(found)
            if len(out) > MAX_COMMANDS_PER_FILE:
                raise DeployParseError(file, start, f"more than {MAX_COMMANDS_PER_FILE} serving "
                                       "commands in one file", hint="split the file")
    return out


_HEREDOC = re.compile(r"""^\s*cat\s*>\s*(\S+)\s*<<(-?)\s*(['"]?)(\w+)\3\s*$""")


def _heredocs(lines: list[str]) -> tuple[dict[str, str], set[int]]:
    """The files a script writes with `cat > NAME <<'EOF'` … `EOF` (NAME → text), and the
    indices of those bodies' lines (and their terminators). An unterminated one is ignored."""
    files: dict[str, str] = {}
    data: set[int] = set()
    i = 0
    while i < len(lines):
        m = _HEREDOC.match(lines[i])
        end = None
        if m:
            strip = m.group(2) == "-"  # <<- removes leading tabs
            end = next((j for j in range(i + 1, len(lines))
                        if (lines[j].lstrip("\t") if strip else lines[j]) == m.group(4)), None)
        if m is None or end is None:
            i += 1
            continue
        body = lines[i + 1:end]
        files[m.group(1)] = "".join((b.lstrip("\t") if m.group(2) else b) + "\n" for b in body)
        data.update(range(i, end + 1))
        i = end + 1
    return files, data


def exec_form(instruction: str, body: str, file: str, line: int) -> list[str] | None:
    """A Dockerfile instruction's exec (JSON) form as its argv; None for the shell form."""
    if not body.startswith("["):
        return None
    try:
        tokens = loads_flag_json(body, "a JSON array of strings")
    except ValueError as e:
        raise DeployParseError(file, line, f"{instruction} (exec form) must be {e}") from None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise DeployParseError(file, line, f"{instruction} is not a JSON array of strings",
                               hint='write the exec form as ["EXECUTABLE", "ARG", …], every '
                               "item a string")
    return [str(t) for t in tokens]


SHELL_C = (["/bin/sh", "-c"], ["sh", "-c"], ["bash", "-c"], ["/bin/bash", "-c"])


def _shell_line(line_text: str, *, file: str, line: int, templates: Templates,
                variables: Mapping[str, str]) -> Found | None:
    """The serving command one logical line runs: a shell line (its variables expanded from
    `variables`) or a Dockerfile CMD/ENTRYPOINT/RUN (an exec form is not expanded: no shell
    runs it, unless it is `sh -c SCRIPT`)."""
    body = line_text.strip()
    if not _entry_hint().search(body) or body.startswith("#"):
        return None
    m = re.match(r"(?i)(CMD|ENTRYPOINT|RUN)\s+(.*)$", body)
    if m:
        body = m.group(2).strip()
        tokens = exec_form(m.group(1), body, file, line)
        if tokens is not None:
            if len(tokens) >= 3 and tokens[:2] in SHELL_C:
                return _shell_line(tokens[2], file=file, line=line, templates=templates,
                                   variables=variables)
            return _from_tokens(tokens, file, line, templates, body)
    try:
        tokens = shlex.split(expand(body, variables), comments=True)
    except ValueError as e:
        raise DeployParseError(file, line, f"cannot split the command ({e})",
                               hint="check the quotes on this line") from None
    return _from_tokens(tokens, file, line, templates, body, shell=variables)


def _from_tokens(tokens: list[str], file: str, line: int, templates: Templates, text: str,
                 env: dict[str, str] | None = None,
                 shell: Mapping[str, str] | None = None) -> Found | None:
    """The serving command these tokens run, with the flags its engine reads from `env`."""
    hit = _entrypoint(tokens)
    if hit is None:
        return None
    engine, argv = hit
    before = tokens[:len(tokens) - len(argv)]  # mpirun/srun, `NAME=VALUE` before it
    launcher = launcher_nodes(before)
    argv = _cut_at_shell_operator(argv)
    extra = _env_argv(engine, argv, env) if env else []
    shown = " ".join(shlex.quote(t) for t in tokens)
    if extra:
        shown += " (+ env " + " ".join(extra) + ")"
    found = parse_args(argv + extra, engine, file=file, line=line, templates=templates,
                       text=shown, shell=shell)
    if launcher is not None and launcher > 1:
        found.knobs.setdefault("nodes", launcher)
    keep_env(found, {**(env or {}), **_assignments(before)})
    return found


# -------------------------------------------------------------------------- YAML


NESTING_HINT = "a deployment manifest nests a few dozen levels at most"


def _yaml_nodes(text: str, file: str) -> list[Any]:
    yaml = _yaml_module()

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~4x faster
    try:
        deepest = yaml_too_deep(text)
        if deepest is not None:
            raise DeployParseError(file, deepest, f"YAML nested more than {MAX_YAML_DEPTH} "
                                   "levels deep", hint=NESTING_HINT)
        docs = [doc for doc in yaml.compose_all(text, Loader=loader) if doc is not None]
        if "<<" in text:
            budget = [MAX_YAML_NODES]
            for doc in docs:
                _merge_keys(doc, yaml, budget)
        return docs
    except DeployParseError as e:  # the walk's node budget: the file is known here
        raise DeployParseError(file, e.line, e.detail, hint=e.hint) from None
    except RecursionError:
        raise DeployParseError(file, 1, "YAML nested too deeply to read",
                               hint=NESTING_HINT) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise DeployParseError(file, line, f"malformed YAML: {problem}", hint="fix the YAML "
                               "(yamllint helps), or render templates first") from None


def _merge_keys(doc: Any, yaml: Any, budget: list[int]) -> None:
    """YAML 1.1 merge keys (`<<: *anchor`, `<<: [*a, *b]`; Docker Compose files use them)
    resolved in place, as a YAML loader resolves them when it builds a mapping
    (SafeConstructor.flatten_mapping: the merged pairs first, the mapping's own after them, so
    the last of a key wins: _get)."""
    flatten = yaml.constructor.SafeConstructor().flatten_mapping
    for n in list(_walk(doc, budget)):
        if getattr(n, "id", None) == "mapping" and any(
                k.tag == "tag:yaml.org,2002:merge" for k, _ in n.value):
            flatten(n)


def _get(node: Any, key: str) -> Any:
    """A mapping's value for `key`; the last when the key repeats (as a YAML loader reads it:
    a merge key's pairs come before the mapping's own)."""
    if getattr(node, "id", None) != "mapping":
        return None
    for k, v in reversed(node.value):
        if getattr(k, "value", None) == key:
            return v
    return None


def _scalar(node: Any) -> str | None:
    return node.value if getattr(node, "id", None) == "scalar" else None


def _line(node: Any) -> int:
    return node.start_mark.line + 1


def _strings(node: Any) -> list[tuple[str, int]]:
    """A YAML string or list of strings → [(text, line)]."""
    if node is None:
        return []
    if getattr(node, "id", None) == "scalar":
        return [(node.value, _line(node))]
    if getattr(node, "id", None) == "sequence":
        return [(n.value, _line(n)) for n in node.value if getattr(n, "id", None) == "scalar"]
    return []


def _walk(node: Any, budget: list[int] | None = None) -> Any:
    """Every node under `node`, each once: YAML aliases share nodes, so a walk that revisits
    them is exponential in an alias bomb, and a recursive alias never ends. Iterative (deep
    nesting cannot overflow the stack); all walks of one file share `budget`, so the file's
    work is bounded by MAX_YAML_NODES whatever its aliases."""
    budget = budget if budget is not None else [MAX_YAML_NODES]
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        budget[0] -= 1
        if budget[0] < 0:
            raise DeployParseError("", _line(n), f"more than {MAX_YAML_NODES:,} YAML nodes to "
                                   "visit (an alias bomb?)",
                                   hint="expand the aliases, or split the file")
        yield n
        kind = getattr(n, "id", None)
        if kind == "mapping":
            stack.extend(v for _, v in reversed(n.value))
        elif kind == "sequence":
            stack.extend(reversed(n.value))


def _gpu_product(pod_spec: Any, budget: list[int] | None = None) -> tuple[str | None, str | None]:
    """nvidia.com/gpu.product from a pod spec's nodeSelector or required node affinity."""
    sel = _scalar(_get(_get(pod_spec, "nodeSelector"), "nvidia.com/gpu.product"))
    if sel:
        return sel, "nodeSelector nvidia.com/gpu.product"
    for n in _walk(_get(pod_spec, "affinity"), budget):
        if _scalar(_get(n, "key")) == "nvidia.com/gpu.product":
            values = _strings(_get(n, "values"))
            if values:
                return values[0][0], "node affinity nvidia.com/gpu.product"
    return None, None


def _argv_command(parts: list[tuple[str, int]], image: str, has_entrypoint: bool,
                  fallback_line: int, *, file: str, templates: Templates,
                  env: dict[str, str] | None = None) -> Found | None:
    """A container's entrypoint + arguments → the serving command they run, if any: an explicit
    `sh -c "…"` script, an argv naming an entrypoint, or bare arguments to an image whose
    entrypoint is an engine's server (`syntax.image_entrypoints`). An engine may also take its
    flags from the container's environment (MODEL_ID, NUM_SHARD, …)."""
    tokens = [t for t, _ in parts]
    line = parts[0][1] if parts else fallback_line
    if (len(tokens) >= 3 and tokens[0].rsplit("/", 1)[-1] in {"sh", "bash"}
            and tokens[1] in {"-c", "-lc", "-ec"}):
        shells = shell_commands(tokens[2], file=file, first_line=parts[2][1], templates=templates,
                                env=env)
        if shells:
            keep_env(shells[0], env)
        return shells[0] if shells else None
    if _entrypoint(tokens):
        return _from_tokens(tokens, file, line, templates, " ".join(tokens), env)
    if has_entrypoint:
        return None
    for e in registry.ENGINES.values():
        if not any(p.search(image) for p in e.syntax.image_entrypoints):
            continue
        argv = tokens + _env_argv(e.name, tokens, env or {})
        if argv:
            found = parse_args(argv, e.name, file=file, line=line, templates=templates,
                               text=f"{image} " + " ".join(argv))
            keep_env(found, env)
            return found
    return None


def _env_argv(engine: str, tokens: list[str], env: dict[str, str]) -> list[str]:
    """Flags an engine reads from environment variables (`syntax.env_flags`), for those not given
    on the command line."""
    given = {t.partition("=")[0] for t in tokens if t.startswith("--")}
    argv = []
    for var, flag in _syntax(engine).env_flags.items():
        if var in env and flag not in given:
            argv += [flag, env[var]]
    return argv


def _k8s_env(container: Any) -> dict[str, str]:
    """A container's literal `env` values, each with its `$(NAME)` references to the ones
    defined before it filled in, as Kubernetes does (valueFrom references are skipped)."""
    out: dict[str, str] = {}
    env = _get(container, "env")
    for item in getattr(env, "value", None) or []:
        name, value = _scalar(_get(item, "name")), _scalar(_get(item, "value"))
        if name and value is not None:
            out[name] = k8s_expand(value, out)
    return out


def _compose_env(svc: Any) -> dict[str, str]:
    """A compose service's `environment`: a mapping or a list of KEY=VALUE strings."""
    env = _get(svc, "environment")
    out: dict[str, str] = {}
    if getattr(env, "id", None) == "mapping":
        for k, v in env.value:
            value = _scalar(v)
            if value is not None and _scalar(k) is not None:
                out[str(k.value)] = value
    else:
        for text, _ in _strings(env):
            key, eq, value = text.partition("=")
            if eq:
                out[key] = value
    return out


# Kubernetes' expansion of a container's command, args and env values, made once before the
# container starts (no shell involved): `$(NAME)` is NAME's value (a name it does not define
# stays as written), `$$` is one literal `$` (so `$$(NAME)` is the text `$(NAME)`), and any other
# `$` is kept. The Kubernetes API reference, Container.command/args and EnvVar.value ("Variable
# references $(VAR_NAME) are expanded using the container's environment … Double $$ are reduced
# to a single $"), kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/; the
# scan is kubernetes/kubernetes third_party/forked/golang/expansion/expand.go (Expand).
K8S_VAR = re.compile(r"\$(?:\$|\(([^)]*)\))")


def k8s_expand(text: str, env: Mapping[str, str]) -> str:
    """`text` as Kubernetes passes it to the container: each `$(NAME)` reference to the
    container's variables replaced by its value (an undefined one stays as written), each `$$`
    one `$`, scanned once from the left (a value is never scanned again); growing to at most
    MAX_COMMAND_CHARS (past that, references stay)."""
    grown = [len(text)]

    def one(m: re.Match[str]) -> str:
        if m.group(1) is None:  # `$$`
            grown[0] -= 1
            return "$"
        value = env.get(m.group(1))
        if value is None or grown[0] + len(value) - len(m.group(0)) > MAX_COMMAND_CHARS:
            return m.group(0)
        grown[0] += len(value) - len(m.group(0))
        return value
    return K8S_VAR.sub(one, text)


def _container_commands(container: Any, *, file: str, templates: Templates) -> Found | None:
    """A Kubernetes container: command + args (its `$(NAME)` variables filled in), GPU count
    from resources.limits."""
    image = _scalar(_get(container, "image")) or ""
    command = _get(container, "command")
    env = _k8s_env(container)
    parts = [(k8s_expand(t, env), n) for t, n in
             _strings(command) + _strings(_get(container, "args"))]
    found = _argv_command(parts, image, command is not None, _line(container), file=file,
                          templates=templates, env=env)
    if found is None:
        return None
    count = _scalar(_get(_get(_get(container, "resources"), "limits"), "nvidia.com/gpu"))
    if count is not None:
        value = templates.check(count, 'resources.limits["nvidia.com/gpu"]', file, found.line)
        if not re.fullmatch(r"[0-9]{1,6}", value.strip()):
            shown = value if len(value) <= 20 else value[:20] + "…"
            raise DeployParseError(file, found.line, 'resources.limits["nvidia.com/gpu"] '
                                   f"{shown!r} is not an integer")
        found.gpu_count = int(value)
    _version_from_image(found, image)
    return found


def _version_from_image(found: Found, image: str) -> None:
    if found.error is not None:  # a `sh -c` script whose command could not be read: no engine
        return
    image = template_defaults(image)  # compose's `image: vllm/vllm-openai:${TAG:-v0.10.0}`
    for pattern in _syntax(found.engine).image_versions:
        m = pattern.search(image)
        if m:
            found.engine_version = ".".join(g for g in m.groups() if g)
            found.version_source = f"image {image}"
            return


def yaml_commands(text: str, *, file: str, templates: Templates) -> list[Found]:
    try:
        return _yaml_commands(text, file=file, templates=templates)
    except DeployParseError as e:
        if e.file:
            raise
        raise DeployParseError(file, e.line, e.detail, hint=e.hint) from None


def _yaml_commands(text: str, *, file: str, templates: Templates) -> list[Found]:
    out: list[Found] = []
    budget = [MAX_YAML_NODES]  # node visits for the whole file
    for doc in _yaml_nodes(text, file):
        services = _get(doc, "services")
        if services is not None and getattr(services, "id", None) == "mapping":
            out += _compose(services, file=file, templates=templates, budget=budget)
            continue
        config_of = _config_engine(doc)
        if config_of is not None:
            out.append(_from_config(doc, config_of, file=file, templates=templates))
            continue
        _pod_commands(doc, out, file=file, templates=templates, budget=budget)
    return out


def _pod_commands(doc: Any, out: list[Found], *, file: str, templates: Templates,
                  budget: list[int]) -> None:
    """Every `containers:` list under a manifest: each container's serving command, with the
    GPU model its pod spec selects, appended to `out` (the file's commands so far)."""
    for node in _walk(doc, budget):
        containers = _get(node, "containers")
        if getattr(containers, "id", None) != "sequence":
            continue
        gpu, gpu_source = _gpu_product(node, budget)
        for c in containers.value:
            budget[0] -= 1
            if budget[0] < 0:
                raise DeployParseError(file, _line(c), f"more than {MAX_YAML_NODES:,} YAML "
                                       "nodes to visit (an alias bomb?)",
                                       hint="expand the aliases")
            try:
                found = _container_commands(c, file=file, templates=templates)
            except DeployParseError as e:  # one bad container does not hide the others
                found = _failed(e, file, text=_scalar(_get(c, "name")) or "")
            if found:
                if gpu:
                    found.gpu, found.gpu_source = gpu, gpu_source
                out.append(found)
                _check_count(out, file, found.line)


def _check_count(out: list[Found], file: str, line: int) -> None:
    if len(out) > MAX_COMMANDS_PER_FILE:
        raise DeployParseError(file, line, f"more than {MAX_COMMANDS_PER_FILE} serving commands "
                               "in one file", hint="split the file")


def _compose_argv(node: Any) -> list[tuple[str, int]]:
    """Compose `command`/`entrypoint`: a list, or a string compose splits like a shell."""
    if getattr(node, "id", None) == "scalar":
        try:
            return [(t, _line(node)) for t in shlex.split(node.value)]
        except ValueError as e:
            raise DeployParseError("", _line(node), f"cannot split the command ({e})") from None
    return _strings(node)


def _compose(services: Any, *, file: str, templates: Templates,
             budget: list[int] | None = None) -> list[Found]:
    """docker-compose services: entrypoint + command, GPU count from device reservations."""
    out = []
    for name, svc in services.value:
        try:
            found = _compose_service(svc, file=file, templates=templates, budget=budget)
        except DeployParseError as e:  # each service is reported; one bad one hides no other
            found = _failed(e, file, text=f"service {_scalar(name) or '?'}")
        if found is None:
            continue
        out.append(found)
        _check_count(out, file, found.line)
    return out


def _compose_service(svc: Any, *, file: str, templates: Templates,
                     budget: list[int] | None) -> Found | None:
    image = _scalar(_get(svc, "image")) or ""
    entry = _get(svc, "entrypoint")
    try:
        parts = _compose_argv(entry) + _compose_argv(_get(svc, "command"))
    except DeployParseError as e:
        raise DeployParseError(file, e.line, e.detail, hint="check the quotes") from None
    found = _argv_command(parts, image, entry is not None, _line(svc), file=file,
                          templates=templates, env=_compose_env(svc))
    if found is not None:
        for dev in _walk(_get(svc, "deploy"), budget):
            count = _scalar(_get(dev, "count"))
            ids = _strings(_get(dev, "device_ids"))
            # str.isdigit() also takes '²'; `all` is skipped
            if count and re.fullmatch(r"[0-9]{1,6}", count):
                found.gpu_count = int(count)
            elif ids:
                found.gpu_count = len(ids)
        _version_from_image(found, image)
    return found


def _config_engine(doc: Any) -> Engine | None:
    """The engine whose config YAML this is (`syntax.config_yaml`): a flat mapping of flag
    names (model + at least one of the engine's flags); None when it is none of them."""
    if getattr(doc, "id", None) != "mapping":
        return None
    keys = {k.value for k, _ in doc.value if _scalar(k) is not None}
    if "model" not in keys or keys & {"apiVersion", "kind"}:
        return None
    flags = {f"--{k.replace('_', '-')}" for k in keys}
    return next((e for e in registry.ENGINES.values()
                 if e.syntax.config_yaml and flags & set(e.syntax.cli_flags)), None)


def _from_config(doc: Any, engine: Engine, *, file: str, templates: Templates) -> Found:
    """A config YAML as the command line it stands for (its keys are the engine's flags)."""
    table = engine.syntax.cli_flags
    argv = []
    for k, v in doc.value:
        if _scalar(k) is None:
            raise DeployParseError(file, _line(k), "a key of this config is not a flag name "
                                   "(a sequence or mapping used as a key)",
                                   hint="write each setting as `flag_name: value`")
        flag = "--" + str(k.value).replace("_", "-")
        value = _scalar(v)
        if value is None and getattr(v, "id", None) == "mapping" and flag in table:
            argv.append(f"{flag}={_mapping_json(v, file)}")  # speculative_config: {method: …}
            continue
        if value is None:
            argv.append(flag)  # lists / mappings: kept as unknown
            continue
        kind = table.get(flag, ("", ""))[1]
        if kind in ("bool", "off") or (kind == "" and value.lower() in {"true", "false"}):
            argv.append(flag if value.lower() == "true" else f"--no-{flag[2:]}")
        else:
            argv.append(f"{flag}={value}")
    exe = " ".join(filter(None, engine.syntax.executables[0]))
    return parse_args(argv, engine.name, file=file, line=_line(doc), templates=templates,
                      text=f"{exe} --config {file}")


def _mapping_json(node: Any, file: str) -> str:
    """A YAML mapping node as the JSON text its flag takes on the command line."""
    yaml = _yaml_module()
    try:
        return json.dumps(yaml.safe_load(yaml.serialize(node)))
    except (yaml.YAMLError, TypeError, ValueError) as e:  # a sequence key; a date; NaN
        problem = getattr(e, "problem", None) or type(e).__name__
        raise DeployParseError(file, _line(node), f"this mapping cannot be a JSON flag value "
                               f"({problem})", hint="use plain keys and values") from None


# ------------------------------------------------------------------------ files


def _directives(text: str, file: str) -> list[tuple[int, dict[str, str]]]:
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        m = DIRECTIVE.search(line)
        if not m:
            continue
        pairs = {}
        for item in m.group(1).split():
            key, eq, value = item.partition("=")
            if not eq or key not in DIRECTIVE_KEYS:
                raise DeployParseError(file, lineno, f"unknown kvplan directive {item!r}",
                                       hint="use # kvplan: gpu=h100 model=ORG/NAME "
                                       "engine-version=0.19.0 gpu-count=4 nodes=2")
            pairs[key] = value
        out.append((lineno, pairs))
    return out


def find_commands(path: Path, templates: Templates) -> list[Found]:
    """Every serving command in one file, with directives and file-wide facts applied."""
    file = str(path)
    try:
        raw = read_text_limited(path, MAX_DEPLOY_BYTES, what="deployment file")
    except InvalidConfigError as e:
        raise DeployParseError(file, 1, e.detail, hint=e.hint) from None
    text = templates.fill(raw, file)
    if path.suffix in {".yaml", ".yml"}:
        found = yaml_commands(text, file=file, templates=templates)
    else:
        found = shell_commands(text, file=file, first_line=1, templates=templates)
    return with_file_facts(found, raw, path)


def with_file_facts(found: list[Found], raw: str, path: Path) -> list[Found]:
    """`found` (commands read from `path`, whose text is `raw`) with what the file says around
    them: `# kvplan:` directives above each, and for a script or Dockerfile the release its
    text names (a FROM image tag, a pip pin) where the command has none."""
    file = str(path)
    directives = _directives(raw, file)
    for f in found:
        if f.error is not None:
            continue
        if path.suffix not in {".yaml", ".yml"}:  # Dockerfiles, scripts: FROM image / pip pins
            _version_from_text(f, raw, path.name)
        for lineno, pairs in directives:
            if lineno <= f.line:  # a directive applies to the commands below it; the nearest wins
                _apply_directive(f, pairs, lineno, file)
    return found


def _version_from_text(f: Found, raw: str, name: str) -> None:
    """The engine's release from the file's text (a base image tag, a pip pin), unless the
    command already has one."""
    syntax = _syntax(f.engine)
    version = None
    for pattern in (*syntax.image_versions, *filter(None, [syntax.pip_version])):
        version = version or pattern.search(raw)
    if f.engine_version is None and version:
        f.engine_version = ".".join(g for g in version.groups() if g)
        f.version_source = f"{name}: {version.group(0)}"


def _apply_directive(f: Found, pairs: dict[str, str], lineno: int, file: str) -> None:
    """A `# kvplan:` comment at `lineno` sets what the file cannot say about `f`."""
    where = f"# kvplan: comment at line {lineno}"
    if "gpu" in pairs:
        f.gpu, f.gpu_source = pairs["gpu"], where
    if "model" in pairs:
        f.notes.append(f"model {pairs['model']} from the {where}")
        f.model = pairs["model"]
    if "engine-version" in pairs:
        f.engine_version, f.version_source = pairs["engine-version"], where
    if "gpu-count" in pairs:
        if not re.fullmatch(r"[0-9]{1,6}", pairs["gpu-count"]):
            raise DeployParseError(file, lineno, f"gpu-count={pairs['gpu-count'][:20]!r} is not "
                                   "a number of GPUs", hint="write # kvplan: gpu-count=8")
        f.gpu_count = int(pairs["gpu-count"])
    if "nodes" in pairs:  # the nodes a file that cannot say it spreads over (a Ray Serve app)
        if not re.fullmatch(r"[1-9][0-9]{0,3}", pairs["nodes"]):
            raise DeployParseError(file, lineno, f"nodes={pairs['nodes'][:20]!r} is not a "
                                   "number of nodes", hint="write # kvplan: nodes=2")
        f.knobs["nodes"] = int(pairs["nodes"])
    if "gpu-memory-gib" in pairs:  # the device total the file's plan was made with (--emit)
        try:
            gib = float(pairs["gpu-memory-gib"])
        except ValueError:
            gib = math.nan
        if not 0 < gib <= MAX_DEVICE_GIB:
            raise DeployParseError(file, lineno, f"gpu-memory-gib={pairs['gpu-memory-gib'][:20]!r}"
                                   " is not a device total in GiB",
                                   hint="write # kvplan: gpu-memory-gib=79.18 (your engine log's)")
        f.gpu_memory_gib = gib
