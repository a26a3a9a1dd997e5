"""Bounds on everything kvplan reads, so hostile input ends in exit 2, never a hang.

`kvplan check` runs in CI on files from pull requests: every size, count and number read
from a file, a flag or the environment is bounded here, and every file is read through
`read_limited` (regular files only, never more than a limit). docs/reliability.md lists
the limits and why they were chosen.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

from ..errors import InvalidConfigError, InvalidInputError

# ------------------------------------------------------------------ file sizes
MAX_CONFIG_BYTES = 4 * 2**20  # config.json / hf_quant_config.json (real ones: < 100 KiB)
MAX_INDEX_BYTES = 64 * 2**20  # model.safetensors.index.json (DeepSeek-V3's: ~9 MiB)
MAX_DEPLOY_BYTES = 1 * 2**20  # a deployment file (rendered charts: ~100 KiB; YAML reads ~1 MB/s)
MAX_POLICY_BYTES = 1 * 2**20  # kvplan.toml / pyproject.toml
MAX_CACHE_BYTES = 256 * 2**20  # one kvplan Hub cache entry (tensor tables of large repos)
MAX_JSON_DEPTH = 64  # nesting of a config.json / index (real ones: < 6)

# ------------------------------------------------------- deployment file shapes
MAX_COMMAND_CHARS = 128 * 2**10  # one logical shell line: Linux MAX_ARG_STRLEN
MAX_COMMANDS_PER_FILE = 256  # serving commands found in one file
MAX_YAML_NODES = 200_000  # distinct YAML nodes walked per file (aliases expanded once)
MAX_YAML_DEPTH = 100  # YAML nesting (Kubernetes manifests: < 20 levels)

# ---------------------------------------------------------------- model shapes
MAX_LAYERS = 1024  # num_hidden_layers (largest published: 126 layers)
MAX_TENSORS = 1_000_000  # safetensors tensors per checkpoint (DeepSeek-V3: ~92 k)
MAX_TENSOR_DIMS = 8

# ---------------------------------------------------------------------- inputs
MAX_VERSION_CHARS = 64
MAX_HUB_TIMEOUT_S = 3600.0


def read_limited(path: Path, limit: int, *, what: str = "file",
                 error: type[InvalidConfigError] | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes.

    Opens without blocking (a FIFO named config.json does not hang), refuses anything that
    is not a regular file (/dev/zero, sockets, directories) and never reads more than
    limit + 1 bytes, whatever the file claims. Errors name the file and the limit."""
    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise InvalidConfigError(f"cannot read: {e.strerror or e}", path=where) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidConfigError(f"not a regular file (a device, FIFO or directory); kvplan "
                                     f"reads only regular files as a {what}", path=where)
        if st.st_size > limit:
            raise InvalidConfigError(f"{st.st_size:,} bytes is over the {limit:,}-byte limit "
                                     f"for a {what}", path=where,
                                     hint="is this the right file? kvplan reads only small "
                                     "text files")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise InvalidConfigError(f"over the {limit:,}-byte limit for a {what}", path=where)
        return b"".join(chunks)
    except OSError as e:
        raise InvalidConfigError(f"cannot read: {e.strerror or e}", path=where) from None
    finally:
        os.close(fd)


def read_text_limited(path: Path, limit: int, *, what: str = "file") -> str:
    data = read_limited(path, limit, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidConfigError(f"not UTF-8 text (undecodable byte at offset {e.start})",
                                 path=str(path), hint=f"is this really a {what}?") from None


def json_depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the brackets of a JSON text nest at most `limit` deep (strings skipped); one
    linear pass, so json.loads never recurses past the limit."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def loads_json(text: str | bytes, *, where: str, field: str | None = None) -> object:
    """json.loads with bounded nesting and errors that never quote the input."""
    import json

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidConfigError(f"not UTF-8 (undecodable byte at offset {e.start})",
                                     path=where, field=field) from None
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


def check_float(value: float | None, name: str, *, lo: float = 0.0, hi: float,
                lo_open: bool = True) -> float | None:
    """A finite float knob in (lo, hi] (or [lo, hi]); nan/inf never pass."""
    if value is None:
        return None
    if not math.isfinite(value) or value > hi or value < lo or (lo_open and value == lo):
        left = "(" if lo_open else "["
        raise InvalidInputError(f"{name} {value!r} is out of range",
                                hint=f"use a finite number in {left}{lo:g}, {hi:g}]")
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


def yaml_too_deep(text: str) -> int | None:
    """The line where a YAML text first nests deeper than MAX_YAML_DEPTH, or None: measured
    on the flat event stream, before a composer (libyaml's recurses in C) builds anything."""
    import yaml  # type: ignore[import-untyped]  # no stubs: types-PyYAML is not a dependency

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                return int(event.start_mark.line) + 1
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return None
