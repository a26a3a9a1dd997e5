"""GPU prices for `kvplan sweep`: the bundled defaults (gpu_specs/prices.csv, each row with its
source and date) and the user's own file (--prices: CSV or YAML of GPU id → US$ per GPU-hour).
File I/O lives here, not in the pure sweep. A bad row is an error naming file, line and field."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from pathlib import Path

from ..errors import InvalidConfigError, KvplanError
from ..specs import GpuSpec, Price
from .limits import MAX_YAML_DEPTH, yaml_too_deep

PRICE_COLUMNS = ("id", "usd_per_hour")


def _bad(path: str, line: int, field: str, message: str) -> InvalidConfigError:
    return InvalidConfigError(message, path=f"{path}:{line}", field=field,
                              hint="each row: a GPU id (see `kvplan gpus`) and its US$ per "
                              "GPU-hour, e.g. `h100-sxm-80gb,2.49`")


def _amount(raw: object, path: str, line: int) -> float:
    try:
        value = float(str(raw).strip().lstrip("$")) if not isinstance(raw, bool) else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise _bad(path, line, "usd_per_hour", f"must be a positive number of US$ per GPU-hour, "
                   f"got {raw!r}")
    return value


def _gpu(raw: object, path: str, line: int, resolve: Callable[[str], GpuSpec]) -> str:
    name = str(raw or "").strip()
    if not name:
        raise _bad(path, line, "id", "missing GPU id")
    try:
        return resolve(name).id
    except KvplanError as e:
        raise _bad(path, line, "id", e.message + (f" ({e.hint})" if e.hint else "")) from None


def parse_csv(text: str, path: str, resolve: Callable[[str], GpuSpec], *,
              default: bool = False) -> dict[str, Price]:
    """Rows `id,usd_per_hour[,source,date]` after a header line; `#` lines are comments."""
    lines = [(n, raw) for n, raw in enumerate(text.splitlines(), 1)
             if raw.strip() and not raw.lstrip().startswith("#")]
    if not lines:
        raise InvalidConfigError("no price rows", path=path,
                                 hint="a header `id,usd_per_hour` then one row per GPU")
    header_line, header = lines[0]
    cols = [c.strip().lower() for c in _csv_row(header, path, header_line)]
    missing = [c for c in PRICE_COLUMNS if c not in cols]
    if missing:
        raise _bad(path, header_line, missing[0], f"the header must name the columns "
                   f"{', '.join(PRICE_COLUMNS)} (got {', '.join(cols) or 'none'})")
    out: dict[str, Price] = {}
    for n, raw in lines[1:]:
        row = _csv_row(raw, path, n)
        if len(row) > len(cols):
            raise _bad(path, n, cols[-1], f"{len(row)} fields, the header names {len(cols)}")
        rec = dict(zip(cols, (v.strip() for v in row), strict=False))  # short rows: blanks
        gpu = _gpu(rec.get("id"), path, n, resolve)
        if gpu in out:
            raise _bad(path, n, "id", f"{gpu} is priced twice")
        out[gpu] = Price(gpu_id=gpu, usd_per_hour=_amount(rec.get("usd_per_hour", ""), path, n),
                         source=rec.get("source") or f"{path}:{n}", date=rec.get("date") or None,
                         default=default)
    return out


def _csv_row(raw: str, path: str, line: int) -> list[str]:
    """One CSV line's fields; a malformed line (a field over csv's 128 KiB limit) names it."""
    try:
        return next(csv.reader(io.StringIO(raw)), [])
    except csv.Error as e:
        raise _bad(path, line, "row", f"not a CSV row ({e})") from None


def parse_yaml(text: str, path: str, resolve: Callable[[str], GpuSpec]) -> dict[str, Price]:
    """A mapping `gpu id: price` (or `gpu id: {usd_per_hour: price}`), line numbers kept."""
    import yaml  # type: ignore[import-untyped]  # no stubs: types-PyYAML is not a dependency

    try:
        deepest = yaml_too_deep(text)
        if deepest is not None:
            raise _bad(path, deepest, "id", f"YAML nested more than {MAX_YAML_DEPTH} levels deep")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InvalidConfigError(f"not valid YAML: {getattr(e, 'problem', e)}",
                                 path=f"{path}:{mark.line + 1}" if mark else path) from None
    if isinstance(root, yaml.MappingNode) and len(root.value) == 1 \
            and root.value[0][0].value == "prices" \
            and isinstance(root.value[0][1], yaml.MappingNode):
        root = root.value[0][1]  # an optional top-level `prices:` key
    if not isinstance(root, yaml.MappingNode) or not root.value:
        line = root.start_mark.line + 1 if root is not None else 1
        raise _bad(path, line, "id", "expected a mapping of GPU id to US$ per GPU-hour")
    out: dict[str, Price] = {}
    for key, val in root.value:
        n = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode):
            raise _bad(path, n, "id", "a GPU id must be a name, not a sequence or mapping")
        gpu = _gpu(key.value, path, n, resolve)
        if gpu in out:
            raise _bad(path, n, "id", f"{gpu} is priced twice")
        raw: object = val.value if isinstance(val, yaml.ScalarNode) else None
        if isinstance(val, yaml.MappingNode):
            fields = {k.value: v for k, v in val.value if isinstance(k, yaml.ScalarNode)}
            node = fields.get("usd_per_hour")
            raw = node.value if isinstance(node, yaml.ScalarNode) else None
            n = (node or val).start_mark.line + 1
        out[gpu] = Price(gpu_id=gpu, usd_per_hour=_amount(raw, path, n), source=f"{path}:{n}",
                         default=False)
    return out


def load_price_file(path: str | Path, resolve: Callable[[str], GpuSpec]) -> dict[str, Price]:
    """--prices FILE: .csv, else YAML (.yaml/.yml/anything else)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidConfigError(f"cannot read the price file: {e.strerror or e}",
                                 path=str(path)) from None
    if p.suffix.lower() == ".csv":
        return parse_csv(text, str(path), resolve)
    return parse_yaml(text, str(path), resolve)


def default_prices(resolve: Callable[[str], GpuSpec]) -> dict[str, Price]:
    """The bundled gpu_specs/prices.csv (labelled as defaults)."""
    from .catalog import data_dir

    path = data_dir("gpu_specs") / "prices.csv"
    return parse_csv(path.read_text(encoding="utf-8"), "gpu_specs/prices.csv", resolve,
                     default=True)
