"""Shell parameter expansion, as a POSIX shell does it to a deployment's script.

A serving command often takes its values from variables: a container's `env` (and its
ConfigMaps), a Dockerfile's `ENV`, or the script's own `NAME=VALUE` / `export NAME=VALUE` lines
above it. `expand` fills in `$NAME`, `${NAME}`, `${NAME:-word}`, `${NAME-word}` and integer
`$(( … ))` arithmetic from those variables, outside single quotes, the way `sh` would before it
runs the line. A variable nobody sets and no default covers stays as written, so the check can
name it.

Not modelled: nested expansions (`${A:-${B}}`), `${NAME:=word}` / `:?` / `:+`, command
substitution and field splitting on IFS other than blanks.

Pure functions: nothing here reads files, prints or plans.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Callable, Mapping
from functools import partial

from ..sources.limits import MAX_COMMAND_CHARS

# `${NAME}`, `${NAME:-word}`, `${NAME-word}`, `$NAME`; the word holds no brace (a line of
# `${a:-${a:-…` is scanned once, not once per `${`)
PARAMETER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)-([^{}]*))?\}"
                       r"|\$([A-Za-z_][A-Za-z0-9_]*)")
ARITH = re.compile(r"\$\(\(([^()]*)\)\)")
# inside `$(( … ))` a variable may be written bare (`LWS_GROUP_SIZE * 8`)
ARITH_NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
# a shell word that sets a variable (NAME=VALUE)
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}=")


def integer_arithmetic(expr: str) -> int | None:
    """`8 * 2`, `(1+1)*8`: integers with + - * / (shell division truncates); None otherwise."""
    if len(expr) > 200:
        return None
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return None

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Add):
                return a + b
            if isinstance(n.op, ast.Sub):
                return a - b
            if isinstance(n.op, ast.Mult):
                return a * b
            return int(a / b)
        raise ValueError(expr)

    try:
        return ev(tree)
    except (ValueError, ZeroDivisionError, RecursionError):
        return None


def parameter(m: re.Match[str], variables: Mapping[str, str]) -> str | None:
    """The value of one `$NAME` / `${NAME…}` match, or None when the shell's value is unknown
    (unset with no default). `${NAME:-word}`: word when NAME is unset or empty;
    `${NAME-word}`: word only when it is unset (POSIX, Shell Command Language 2.6.2)."""
    name = m.group(1) or m.group(4)
    value = variables.get(name)
    if m.group(3) is None:  # $NAME, ${NAME}
        return value
    if value is None or (m.group(2) == ":" and value == ""):
        return m.group(3)
    return value


def _arithmetic(m: re.Match[str], variables: Mapping[str, str]) -> str | None:
    """`$(( … ))` worked out over integer variables; None when a name has no integer value."""
    expr = PARAMETER.sub(lambda v: parameter(v, variables) or v.group(0), m.group(1))
    expr = ARITH_NAME.sub(lambda v: variables.get(v.group(0), v.group(0)), expr)
    value = integer_arithmetic(expr)
    return None if value is None else str(value)


def _quoted(value: str, inside_double: bool) -> str:
    """`value` escaped so that splitting the line afterwards (shlex, POSIX) reads it as the
    shell reads an expansion: its quotes and backslashes literal, and, outside double quotes,
    split into words at blanks."""
    specials = '\\"' if inside_double else "\\\"'"
    return "".join("\\" + c if c in specials else c for c in value)


def _segments(text: str) -> list[tuple[str, str]]:
    """`text` cut into (kind, part): kind "'" for a single-quoted part (never expanded, quotes
    included), '"' for a double-quoted one, "" for the rest. A backslash-escaped `$` or quote
    stays with its part unexpanded."""
    out: list[tuple[str, str]] = []
    kind, start, i = "", 0, 0
    while i < len(text):
        c = text[i]
        if c == "\\" and kind != "'":
            i += 2
            continue
        if kind == "" and c in "'\"":
            out.append(("", text[start:i]))
            kind, start = c, i
        elif c == kind:
            out.append((kind, text[start:i + 1]))
            kind, start = "", i + 1
        i += 1
    out.append((kind, text[start:]))
    return [(k, part) for k, part in out if part]


def expand(text: str, variables: Mapping[str, str]) -> str:
    """`text` with the shell's parameter and arithmetic expansions filled in from `variables`
    (outside single quotes; `\\$` kept); an unknown one stays as written. The text never grows
    past MAX_COMMAND_CHARS: expansion stops there."""
    grown = [len(text)]

    def filled(value: str | None, original: str, inside_double: bool) -> str:
        if value is None:
            return original
        value = _quoted(value, inside_double)
        if grown[0] + len(value) - len(original) > MAX_COMMAND_CHARS:
            return original
        grown[0] += len(value) - len(original)
        return value

    def arith(m: re.Match[str], double: bool) -> str:
        return filled(_arithmetic(m, variables), m.group(0), double)

    def param(m: re.Match[str], double: bool) -> str:
        return filled(parameter(m, variables), m.group(0), double)

    out = []
    for kind, part in _segments(text):
        if kind != "'" and "$" in part:
            double = kind == '"'
            part = ARITH.sub(partial(arith, double=double), part)
            part = _unescaped_sub(part, partial(param, double=double))
        out.append(part)
    return "".join(out)


def _unescaped_sub(part: str, replace: Callable[[re.Match[str]], str]) -> str:
    """PARAMETER.sub over `part`, skipping a `$` escaped with a backslash."""
    def one(m: re.Match[str]) -> str:
        escaped = m.start() > 0 and part[m.start() - 1] == "\\"
        return m.group(0) if escaped else replace(m)
    return PARAMETER.sub(one, part)


def template_defaults(text: str) -> str:
    """`text` with each `${NAME:-word}` / `${NAME-word}` as its word: how a template no one
    fills renders (a compose file's interpolation, an exec-form argument no shell expands)."""
    return PARAMETER.sub(lambda m: m.group(0) if m.group(3) is None else m.group(3), text)


def assignments(line_text: str, variables: Mapping[str, str]) -> tuple[dict[str, str], bool]:
    """The variables a line sets for the lines after it, expanded as the shell does at that
    point, and whether it exports them: `NAME=VALUE …` alone on a line (shell variables),
    `export NAME[=VALUE] …`, a Dockerfile `ENV NAME=VALUE …` / `ENV NAME VALUE` (environment).
    Any other line sets nothing."""
    words = _split(expand(line_text, variables))
    if not words:
        return {}, False
    head = words[0]
    if head == "ENV" and len(words) == 3 and "=" not in words[1]:
        return ({words[1]: words[2]} if ASSIGNMENT.match(words[1] + "=") else {}), True
    if head in ("export", "ENV"):
        named = {w: variables[w] for w in words[1:] if "=" not in w and w in variables}
        return {**named, **_pairs(words[1:])}, True
    if all(ASSIGNMENT.match(w) for w in words):
        return _pairs(words), False
    return {}, False


def _pairs(words: list[str]) -> dict[str, str]:
    out = {}
    for w in words:
        if ASSIGNMENT.match(w):
            name, _, value = w.partition("=")
            out[name] = value
    return out


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return []
