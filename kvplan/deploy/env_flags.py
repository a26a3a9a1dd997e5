"""Environment variables that some releases of an engine read in place of a flag (`kvplan check`).

A command's file records the variables it runs with (commands.Found.env: a container's `env`, a
compose service's `environment`, `NAME=VALUE` before the command, `export` / Dockerfile `ENV`
lines); each engine declares which ones some of its releases read, and how they meet the flag
(engines/base.py EnvFlag, DeploySyntax.versioned_env). Once the command's release is known (its
image tag, pip pin or `# kvplan:` comment; else the newest modelled release) each variable is
applied as that release does: read, overridden by the flag, overriding the flag, or ignored, and
the deployment says which.

Pure: nothing here reads files or plans.
"""

from __future__ import annotations

from ..engines import registry
from ..specs import Problem
from .commands import DeployParseError, Found, convert_value


def apply(f: Found, version: str | None) -> tuple[list[Problem], list[Problem]]:
    """Apply the variables in `f.env` to `f.knobs` as release `version` (None: the newest
    modelled) does. Returns (notes, refusals): what each variable did, as info problems, and
    the flags this release does not have (the engine refuses to start)."""
    engine = registry.get(f.engine)
    rules = engine.syntax.versioned_env
    release = version or engine.newest_version
    named = f"{engine.label} {release}" + ("" if version else
                                           " (the newest modelled; the file names no release)")
    notes: list[Problem] = []
    refusals: list[Problem] = []
    for var, rule in rules.items():
        knob, kind = engine.syntax.cli_flags[rule.flag]
        given = f.knobs.get(knob)
        if given is not None and not rule.has_flag(release):
            refusals.append(Problem(
                code="unknown-flag", severity="error",
                message=f"{rule.flag} is not a {named} flag (it exists from {rule.flag_from}); "
                f"{engine.label} refuses to start (hint: set {var} in its environment instead)"))
        if var not in f.env:
            continue
        value = f.env[var]
        setting = f"{var}={value}"
        if not rule.has_flag(release):
            given = None  # refused above: only the variable sets the value
        if not rule.read_by(release):
            notes.append(Problem(
                code="env-not-read", severity="info",
                message=f"{var} is ignored by {named}: use {rule.flag} {value} "
                f"(only {engine.label} {rule.releases()} read it: {rule.source})"))
            continue
        if given is not None and not rule.wins_over_flag(release):
            notes.append(Problem(
                code="env-overridden", severity="info",
                message=f"{setting} is overridden by {rule.flag} {given}: in {named} the flag "
                f"wins ({rule.source})"))
            continue
        try:
            f.knobs[knob] = convert_value(value, kind, var, f.file, f.line)
        except DeployParseError as e:
            refusals.append(Problem(code="unreadable", severity="error", message=e.detail))
            continue
        if given is not None:
            message = (f"{setting} overrides {rule.flag} {given}: in {named} a set {var} wins "
                       f"over the flag ({rule.source})")
        else:
            message = f"{rule.flag} {value} from {setting}, which {named} reads ({rule.source})"
        notes.append(Problem(code="env-read", severity="info", message=message))
    return notes, refusals
