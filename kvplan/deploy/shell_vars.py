"""Shell parameter expansion, as a POSIX shell does it to a deployment's script.

A serving command often takes its values from variables: a container's `env` (and its
ConfigMaps), a Dockerfile's `ENV`, or the script's own `NAME=VALUE` / `export NAME=VALUE` lines
above it. `expand` fills in `$NAME`, `${NAME}`, `${NAME:-word}`, `${NAME-word}` and integer
`$(( … ))` arithmetic from those variables, outside single quotes, the way `sh` would before it
runs the line. The word of a default is itself expanded, and only when the default is taken
(POSIX Shell Command Language 2.6.2: `${A:-${B:-1}}`, `${A-${B}}`, `${A:-$B}`, `${A:-x${B}y}`);
a `}` closes the innermost `${` still open. A variable nobody sets and no default covers stays as
written, so the check can name it: `${A:-${B}}` with neither set is `${B}`.

Not modelled: `${NAME:=word}` / `:?` / `:+` (left as written, the expansions inside them still
filled in), quotes inside a default's word, command substitution and field splitting on IFS
other than blanks. A default nested deeper than MAX_NESTING stays as written.

Pure functions: nothing here reads files, prints or plans.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Callable, Mapping
from functools import partial

from ..sources.limits import MAX_COMMAND_CHARS

# `${NAME}`, `${NAME:-word}`, `${NAME-word}`, `$NAME` whose word holds no brace: the innermost
# expansions, for naming a variable left unexpanded (expansion itself pairs the braces: _scan)
PARAMETER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)-([^{}]*))?\}"
                       r"|\$([A-Za-z_][A-Za-z0-9_]*)")
# what follows `$` in `$NAME`, and the start of `${NAME}` / `${NAME-…` / `${NAME:-…`
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BRACED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?-)?")
# defaults within defaults expanded this deep; a deeper one stays as written (each level scans
# its word once more, so a line of `${a:-${a:-…}}` costs at most this many passes)
MAX_NESTING = 8
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


class _TooLong(Exception):
    """A default's expanded word would pass MAX_COMMAND_CHARS."""


def _closing_braces(text: str, escapes: bool) -> dict[int, int]:
    """Where each `${` of `text` closes, as the shell pairs them: `${` opens an expansion inside
    the one open, `}` closes the innermost open one (a `}` with none open is a literal), and,
    with `escapes`, a backslash takes the character after it out of the pairing. One pass; a
    `${` never closed is absent."""
    closes: dict[int, int] = {}
    open_at: list[int] = []
    i = 0
    while i < len(text):
        c = text[i]
        if escapes and c == "\\":
            i += 2
            continue
        if c == "$" and text.startswith("{", i + 1):
            open_at.append(i)
            i += 2
            continue
        if c == "}" and open_at:
            closes[open_at.pop()] = i
        i += 1
    return closes


_UNMODELLED = object()  # `${#A}`, `${A:+w}`, `${A%w}`…: left as written


def _braced(text: str, start: int, end: int, variables: Mapping[str, str], escapes: bool,
            depth: int) -> object:
    """The value of the expansion text[start:end + 1] (`${NAME}`, `${NAME:-word}`,
    `${NAME-word}`), None when the shell's value is unknown, _UNMODELLED for another form.
    `${NAME:-word}` takes word when NAME is unset or empty, `${NAME-word}` only when it is unset
    (POSIX, Shell Command Language 2.6.2); the word is expanded only then."""
    m = BRACED.match(text, start)
    if m is None or (m.group(2) is None and m.end() != end):
        return _UNMODELLED
    value = variables.get(m.group(1))
    if m.group(2) is None or not (value is None or (m.group(2) == ":-" and value == "")):
        return value
    if depth >= MAX_NESTING:
        return None
    try:
        return _scan(text[m.end():end], variables, escapes, depth + 1, _raw)
    except _TooLong:
        return None


def _raw(value: str | None, original: str) -> str:
    return original if value is None else value


def _scan(text: str, variables: Mapping[str, str], escapes: bool, depth: int,
          fill: Callable[[str | None, str], str]) -> str:
    """`text` with each parameter expansion replaced by `fill(value, as written)` (value None:
    unknown). With `escapes`, a backslash-escaped `$` is not expanded. Inside a default's word
    (depth > 0) the text may not grow past MAX_COMMAND_CHARS (_TooLong)."""
    closes = _closing_braces(text, escapes)
    out: list[str] = []
    size = last = i = 0
    while i < len(text):
        c = text[i]
        if escapes and c == "\\":
            i += 2
            continue
        if c != "$":
            i += 1
            continue
        if text.startswith("{", i + 1):
            end = closes.get(i)
            value = (_UNMODELLED if end is None
                     else _braced(text, i, end, variables, escapes, depth))
            if value is _UNMODELLED:  # as written; the expansions inside it are still filled
                i += 1
                continue
            assert end is not None and (value is None or isinstance(value, str))
            stop = end + 1
        else:
            m = NAME.match(text, i + 1)
            if m is None:
                i += 1
                continue
            value, stop = variables.get(m.group(0)), m.end()
        piece = fill(value, text[i:stop])
        out += [text[last:i], piece]
        size += i - last + len(piece)
        if depth and size > MAX_COMMAND_CHARS:
            raise _TooLong
        i = last = stop
    out.append(text[last:])
    return "".join(out)


def substitute_parameters(text: str, variables: Mapping[str, str]) -> str:
    """`text` with its parameter expansions filled in from `variables` (unknown ones as
    written), with no quoting: the text a default's word or an arithmetic expression becomes."""
    try:
        return _scan(text, variables, True, 1, _raw)
    except _TooLong:
        return text


def _arithmetic(m: re.Match[str], variables: Mapping[str, str]) -> str | None:
    """`$(( … ))` worked out over integer variables; None when a name has no integer value."""
    expr = substitute_parameters(m.group(1), variables)
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
        if value is None or grown[0] + len(value) - len(original) > MAX_COMMAND_CHARS:
            return original  # (quoting only lengthens: a value too long is not quoted first)
        value = _quoted(value, inside_double)
        if grown[0] + len(value) - len(original) > MAX_COMMAND_CHARS:
            return original
        grown[0] += len(value) - len(original)
        return value

    def arith(m: re.Match[str], double: bool) -> str:
        return filled(_arithmetic(m, variables), m.group(0), double)

    out = []
    for kind, part in _segments(text):
        if kind != "'" and "$" in part:
            double = kind == '"'
            part = ARITH.sub(partial(arith, double=double), part)
            part = _scan(part, variables, True, 0, partial(filled, inside_double=double))
        out.append(part)
    return "".join(out)


def template_defaults(text: str) -> str:
    """`text` with each `${NAME:-word}` / `${NAME-word}` as its word (a nested default's word in
    turn: `${A:-${B:-1}}` is 1, `${A:-${B}}` is `${B}`): how a template no one fills renders (a
    compose file's interpolation, an exec-form argument no shell expands)."""
    return _scan(text, {}, False, 0, _raw)


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
