"""Bounds on everything kvplan reads, so hostile input ends in exit 2, never a hang.

`kvplan check` runs in CI on files from pull requests: every size, count and number read
from a file, a flag or the environment is bounded here, and every file kvplan opens on behalf
of an input goes through one containment rule (`open_regular` / `read_limited`: real path
inside the boundary the user named — `within`, or a reader's `root` — regular file, size-capped,
read once). Credential-looking values are taken out of what is printed (`redact`).
docs/reliability.md lists the limits and why they were chosen.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from ..errors import InvalidConfigError, InvalidInputError

# ------------------------------------------------------------------ file sizes
MAX_CONFIG_BYTES = 4 * 2**20  # config.json / hf_quant_config.json (real ones: < 100 KiB)
MAX_INDEX_BYTES = 64 * 2**20  # model.safetensors.index.json (DeepSeek-V3's: ~9 MiB)
MAX_DEPLOY_BYTES = 1 * 2**20  # a deployment file (rendered charts: ~100 KiB; YAML reads ~1 MB/s)
MAX_POLICY_BYTES = 1 * 2**20  # kvplan.toml / pyproject.toml
MAX_CACHE_BYTES = 256 * 2**20  # one kvplan Hub cache entry (tensor tables of large repos)
MAX_JSON_DEPTH = 64  # nesting of a config.json / index (real ones: < 6)
# JSON values (counted by their separators and openers) in one document: the byte caps alone let
# a 100 MiB safetensors header or a 64 MiB index of `[],` hold 35 M values, 3 GiB in the depth
# check's regex passes alone.
# A tensor costs ~8-14 (dtype, shape, offsets): 5 M covers MAX_TENSORS and bounds a parse to
# ~0.4 GiB.
MAX_JSON_VALUES = 5_000_000

# ------------------------------------------------------- deployment file shapes
MAX_COMMAND_CHARS = 128 * 2**10  # one logical shell line: Linux MAX_ARG_STRLEN
MAX_COMMANDS_PER_FILE = 256  # serving commands found in one file
MAX_YAML_NODES = 200_000  # distinct YAML nodes walked per file (aliases expanded once)
MAX_YAML_DEPTH = 100  # YAML nesting (Kubernetes manifests: < 20 levels)

# ---------------------------------------------------------------- model shapes
MAX_LAYERS = 1024  # num_hidden_layers (largest published: 126 layers)
# safetensors tensors per checkpoint. The largest published: Kimi-K2's int4 checkpoints, ~210 k
# (61 layers × 384 experts × 3 projections × weight_packed/weight_scale/weight_shape);
# DeepSeek-V3 ~92 k. Each tensor costs ~30 µs and ~1 KiB from header to plan (allocator
# replay), so 300 k is ~10 s and ~0.3 GiB: the documented 1,000,000 was 30 s and 0.8 GiB.
MAX_TENSORS = 300_000
MAX_TENSOR_DIMS = 8

# ---------------------------------------------------------------------- inputs
MAX_HUB_TIMEOUT_S = 3600.0


# ----------------------------------------------------------------- the boundary
# One containment rule for every file kvplan opens on behalf of an input (deployment files,
# policies, model and draft-model directories, option files, price files): its resolved real
# path lies inside the boundary the user named, it is a regular file, it is size-capped and read
# once. `kvplan check` names the boundary (the checked paths, `within`) for everything it reads;
# a reader that knows a narrower folder (a model directory, a Hub cache repo) passes `root`.
_BOUNDARY: ContextVar[tuple[tuple[Path, ...], tuple[Path, ...]] | None] = ContextVar(
    "kvplan_boundary", default=None)  # (the roots an input named, kvplan's own data folders)


@contextmanager
def within(roots: Iterable[Path], *, own: Iterable[Path] = ()) -> Iterator[None]:
    """Every read_limited / open_regular inside this block must resolve into one of `roots`
    (real paths) or `own` (kvplan's bundled data: model_specs/, gpu_specs/); the innermost
    boundary applies."""
    token = _BOUNDARY.set((tuple(r.resolve() for r in roots),
                           tuple(r.resolve() for r in own)))
    try:
        yield
    finally:
        _BOUNDARY.reset(token)


def inside(path: Path, root: Path) -> bool:
    """Whether `path`, symlinks resolved, lies inside `root` (resolved too)."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False


def inside_boundary(path: Path) -> bool:
    """Whether `path` (symlinks resolved) lies inside the active boundary (True when none)."""
    bounds = _BOUNDARY.get()
    if bounds is None:
        return True
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return False
    return any(real.is_relative_to(r) for r in (*bounds[0], *bounds[1]))


def _outside(path: Path, roots: tuple[Path, ...], what: str) -> InvalidConfigError:
    shown = ", ".join(str(r) for r in roots[:3]) + (" …" if len(roots) > 3 else "")
    return InvalidConfigError(f"the {what} resolves outside {shown}; kvplan reads only files "
                              "inside the paths it was given", path=short(str(path), 200),
                              hint="copy the file inside instead of naming or linking a path "
                              "outside")


def open_regular(path: Path, *, what: str = "file", root: Path | None = None,
                 own: bool = False) -> int:
    """A read-only descriptor of `path` under the containment rule: its real path inside `root`
    when given, and inside the active boundary (`within`) when one is set — unless `own`: a
    file kvplan located itself in its or huggingface_hub's cache, never one an input named (it
    still has to lie inside `root`, the cache entry or repo folder); a regular file
    (opened without blocking and without following a last symlink, so a FIFO, a device or a
    link swapped in after the check is refused). Errors name the path, never its contents."""
    where = short(str(path), 200)
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as e:
        raise InvalidConfigError(f"cannot resolve: {getattr(e, 'strerror', None) or e}",
                                 path=where) from None
    if root is not None and not real.is_relative_to(root.resolve()):
        raise _outside(path, (root.resolve(),), what)
    bounds = None if own else _BOUNDARY.get()
    if bounds is not None and not any(real.is_relative_to(r) for r in (*bounds[0], *bounds[1])):
        raise _outside(path, bounds[0], what)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(real, flags)
    except OSError as e:
        raise InvalidConfigError(f"cannot read the {what}: {e.strerror or e}", path=where,
                                 hint="check the path") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidConfigError(f"not a regular file (a device, FIFO or directory); kvplan "
                                     f"reads only regular files as a {what}", path=where)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_upto(fd: int, limit: int) -> bytes:
    """At most limit + 1 bytes from the open descriptor `fd` (one more than `limit` says the
    source is over it), in reads of at most 1 MiB, whatever its size claims."""
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_limited(path: Path, limit: int, *, what: str = "file",
                 root: Path | None = None, own: bool = False) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, under the containment rule
    (open_regular: `root`, the active boundary).

    Opens without blocking (a FIFO named config.json does not hang), refuses anything that
    is not a regular file (/dev/zero, sockets, directories) and never reads more than
    limit + 1 bytes, whatever the file claims. Errors name the file and the limit."""
    where = short(str(path), 200)
    fd = open_regular(path, what=what, root=root, own=own)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise InvalidConfigError(f"{size:,} bytes is over the {limit:,}-byte limit "
                                     f"for a {what}", path=where,
                                     hint="is this the right file? kvplan reads only small "
                                     "text files")
        data = read_upto(fd, limit)
        if len(data) > limit:
            raise InvalidConfigError(f"over the {limit:,}-byte limit for a {what}", path=where)
        return data
    except OSError as e:
        raise InvalidConfigError(f"cannot read: {e.strerror or e}", path=where) from None
    finally:
        os.close(fd)


BOM = "\ufeff"  # U+FEFF: the byte-order mark Excel's "CSV UTF-8" and PowerShell write first


def read_text_limited(path: Path, limit: int, *, what: str = "file",
                      root: Path | None = None) -> str:
    """The text of a regular file of at most `limit` bytes (read_limited), UTF-8, one leading
    byte-order mark dropped: Excel's "CSV UTF-8" and Windows PowerShell's Out-File start their
    files with one, and it is no part of the first field, key or line. Line numbers are
    unchanged; an undecodable byte's offset is the file's own (counted before the mark goes)."""
    data = read_limited(path, limit, what=what, root=root)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidConfigError(f"not UTF-8 text (undecodable byte at offset {e.start})",
                                 path=str(path), hint=f"is this really a {what}?") from None
    return text.removeprefix(BOM)


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


def json_depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the brackets of a JSON text nest at most `limit` deep (strings skipped), so
    json.loads never recurses past the limit. In C-speed regex passes, not a Python loop over
    every character (a 100 MiB safetensors header took 8 s that way): strings and everything
    but brackets are dropped, then each pass removes the innermost pairs — `limit` passes leave
    no pair exactly when the nesting is at most `limit`. Mismatched brackets are left for
    json.loads to report; a run of more than `limit` unclosed openers is too deep."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    for _ in range(limit):
        brackets, n = _INNERMOST.subn("", brackets)
        if not n:
            break
    deep_open = re.search(rf"[\[{{]{{{limit + 1}}}", brackets)  # unclosed ones count too
    return _INNERMOST.search(brackets) is None and deep_open is None


def loads_json(text: str | bytes, *, where: str, field: str | None = None) -> object:
    """json.loads with bounded nesting and errors that never quote the input."""
    import json

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidConfigError(f"not UTF-8 (undecodable byte at offset {e.start})",
                                     path=where, field=field) from None
    if text.count(",") + text.count("[") + text.count("{") > MAX_JSON_VALUES:  # before any pass
        raise InvalidConfigError(f"JSON holding over {MAX_JSON_VALUES:,} values", path=where,
                                 field=field, hint="check the file is what it claims to be")
    if not json_depth_ok(text):
        raise InvalidConfigError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", path=where,
                                 field=field, hint="check the file is what it claims to be")
    def finite(token: str) -> float:
        value = float(token)
        if not math.isfinite(value):
            raise ValueError(f"the number {token[:20]} is out of range")
        return value

    def constant(token: str) -> float:
        raise ValueError(f"{token} is not a JSON number")

    try:
        return json.loads(text, parse_float=finite, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise InvalidConfigError(f"not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})",
                                 path=where, field=field,
                                 hint="check the file is the model's config.json") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of more than 4300 digits
        reason = ("an integer with too many digits" if "digits" in str(e) else
                  str(e) if isinstance(e, ValueError) else "nested too deeply")
        raise InvalidConfigError(f"not valid JSON ({reason})", path=where, field=field) from None


def check_int(value: int | None, name: str, *, lo: int = 1, hi: int) -> int | None:
    """A CLI/file integer knob within [lo, hi], or InvalidInputError naming the flag."""
    if value is None:
        return None
    if not lo <= value <= hi:
        raise InvalidInputError(f"{name} {_short(value)} is out of range",
                                hint=f"use a value from {lo:,} to {hi:,}")
    return value


def _short(value: object, n: int = 40) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"(a number of about {int(value.bit_length() * 0.30103) + 1} digits)"
    text = repr(value)
    return text if len(text) <= n else text[:n] + "…"


short = _short


# ------------------------------------------------------------------ containment


def model_root(directory: Path) -> Path:
    """The folder every file of a model directory must resolve into: the directory itself,
    or, for a snapshot in huggingface_hub's cache (…/models--org--name/snapshots/<commit>,
    whose files are symlinks to ../../blobs/…), that repo's cache folder."""
    d = directory.resolve()
    return d.parent.parent if d.parent.name == "snapshots" else d


def contained(path: Path, root: Path, *, what: str, where: str | None = None) -> Path:
    """`path` resolved (symlinks followed), refused unless it lies inside `root`: a shard
    index naming /etc/… or ../…, or a symlinked shard pointing at ~/.cache/huggingface/token,
    is never read. The error names the entry as given, never the target's contents."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        resolved = None
    if resolved is None or not resolved.is_relative_to(root):
        raise InvalidConfigError(f"{what} {short(str(path), 120)} points outside the model "
                                 f"directory {root}; kvplan reads only files inside it",
                                 path=where or str(path),
                                 hint="copy the file into the model directory instead of "
                                 "linking it")
    return resolved


# ------------------------------------------------------------------- knob bounds

# Sanity bounds on deployment knobs, wherever they come from (flags, files), as declared once in
# knobs.OPTIONS. Engine-specific ranges stay with the engines; these only keep hostile values
# (nan, 1e300, a 400-digit length) out of the math.
def _bounds(knob: str) -> tuple[float | None, bool, float | None] | None:
    """(lower bound, lower bound open?, upper bound) of a knob or workload setting (knobs.OPTIONS);
    None when it has no numeric bound."""
    from ..knobs import OPTIONS

    option = OPTIONS.get(knob)
    return option.bounds() if option is not None else None


def knob_error(knob: str, value: object) -> str | None:
    """Why `value` is out of bounds for `knob` (its bounds in knobs.OPTIONS), or None when it
    is fine or not bounded. Bounded before anything else sees it: nan, inf, 1e300, 400 digits."""
    bounds = _bounds(knob)
    if (value is None or bounds is None or isinstance(value, bool)
            or not isinstance(value, (int, float))):
        return None
    lo, lo_open, hi = bounds
    ok = (not isinstance(value, float) or math.isfinite(value)) and (
        lo is None or (value > lo if lo_open else value >= lo)) and (hi is None or value <= hi)
    if ok:
        return None
    if lo is not None and lo == hi and not lo_open:  # one value allowed (or leave it unset)
        return (f"{_short(value)} is out of range (the only value is {_exact(lo)}; or leave it "
                "unset)")
    span = (f"{'(' if lo_open else '['}{_exact(lo)}, {_exact(hi)}]"
            if lo is not None and hi is not None else "")
    return f"{_short(value)} is out of range (use a value in {span})"


def _exact(bound: float) -> str:
    """A bound as a reader types it: 2,147,483,648 (not 2.14748e+09), 0.5."""
    return f"{int(bound):,}" if float(bound).is_integer() and abs(bound) < 1e15 else f"{bound:,g}"


def check_flags(values: dict[str, object]) -> None:
    """CLI flags (by parameter name) within their bounds, or InvalidInputError naming the flag."""
    for knob, value in values.items():
        why = knob_error(knob, value)
        if why:
            raise InvalidInputError(f"--{knob.replace('_', '-')} {why}")


def checked_roots(paths: Iterable[Path]) -> list[Path]:
    """The boundary `kvplan check` reads inside: each checked directory (a checked file: its
    folder), real path. A checked path that is itself a symlink out of the folder holding it
    (`deploy -> /home/runner/.ssh`), or, named relative, resolves outside the working
    directory, is refused: a pull request must not widen the boundary it is checked in."""
    cwd = Path.cwd().resolve()
    out = []
    for path in paths:
        try:
            real = path.resolve()
            holder = Path(os.path.normpath(path.absolute())).parent.resolve()
        except (OSError, RuntimeError):
            raise InvalidInputError(f"cannot resolve {short(str(path), 200)}") from None
        relative_inside = not path.is_absolute() and ".." not in path.parts
        if not real.is_relative_to(holder) or (relative_inside and not real.is_relative_to(cwd)):
            raise InvalidInputError(f"{short(str(path), 200)} is a symlink out of the "
                                    "directory it is in; kvplan check does not follow it",
                                    hint="check the files themselves, not a link to them")
        out.append(real if real.is_dir() else real.parent)
    return out


# ------------------------------------------------------------------ credentials
# Credential-looking values in anything kvplan prints (a deployment file's command, its
# unmodelled flags, messages): a flag or variable named like a secret keeps its name, loses
# its value; Hugging Face (hf_…) and OpenAI-style (sk-…) tokens are replaced wherever they are.
REDACTED = "***"
_VALUE = r"""(?:"[^"\n]*"|'[^'\n]*'|[^\s"',;}\]]+)"""
_SECRET_NAME = r"(?:token|api[-_]?key|secret|password|passwd|credentials?)"
_REDACT = (
    # --hf-token X, --api-key=X, "--api-key", "X" (JSON argv), hf_token: X (YAML); the dash
    # starts a word (a flag), so prose such as "one 32,768-token request" is left alone
    re.compile(rf"""(?i)((?<![\w.-])--?[\w.-]*{_SECRET_NAME}["']?"""
               rf"""(?:[ \t]*[=:][ \t]*|[ \t]+|["']?,[ \t]*))(?!--)({_VALUE})"""),
    # HF_TOKEN=X, OPENAI_API_KEY: X, "HUGGING_FACE_HUB_TOKEN": "X"
    re.compile(rf"""(?i)(\b[\w.]*{_SECRET_NAME}["']?[ \t]*[=:][ \t]*)({_VALUE})"""),
    # Authorization: Bearer X / Basic X
    re.compile(rf"(?i)(\bauthorization[\"']?[ \t]*[=:][ \t]*[\"']?(?:bearer|basic|token)?[ \t]*)"
               rf"({_VALUE})"),
    re.compile(r"()(\bhf_[A-Za-z0-9]{16,}|\bsk-[A-Za-z0-9_-]{16,})"),
)


def redact(text: str) -> str:
    """`text` with credential-looking values replaced by ***: linear regexes, no input echoed
    around them is changed."""
    for pattern in _REDACT:
        text = pattern.sub(lambda m: m.group(1) + REDACTED if m.group(2) != REDACTED
                           else m.group(0), text)
    return text


def yaml_too_deep(text: str) -> int | None:
    """The line where a YAML text first nests deeper than MAX_YAML_DEPTH, or None: measured
    on the flat event stream, before a composer (libyaml's recurses in C) builds anything."""
    import yaml  # type: ignore[import-untyped]  # no stubs: types-PyYAML is not a dependency

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    return int(event.start_mark.line) + 1
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError as e:
        # The libyaml bundled with newer PyYAML wheels (6.0.4) refuses deep flow nesting itself
        # while scanning ahead of the events ("exceeded maximum nesting depth"): the same
        # verdict, reached before our count. Any other error is the caller's to report.
        mark = getattr(e, "problem_mark", None)
        if "nesting depth" in str(getattr(e, "problem", "")) and mark is not None:
            return int(mark.line) + 1
        raise
    return None
