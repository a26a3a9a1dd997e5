"""GPU prices for `kvplan sweep`: the bundled defaults (gpu_specs/prices.csv, each row with its
source and date) and the user's own file (--prices: CSV or YAML of GPU id → US$ per GPU-hour).
File I/O lives here, not in the pure sweep. A bad row is an error naming file, line and field."""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Callable
from pathlib import Path

from ..errors import InvalidConfigError, KvplanError
from ..specs import GpuSpec, Price
from .limits import MAX_YAML_DEPTH, knob_error, read_text_limited, short, yaml_too_deep

MAX_PRICES_BYTES = 1 << 20  # a price file: one short row per GPU (the catalogue has < 100)

PRICE_COLUMNS = ("id", "usd_per_hour")


def _bad(path: str, line: int, field: str, message: str) -> InvalidConfigError:
    return InvalidConfigError(message, path=f"{path}:{line}", field=field,
                              hint="each row: a GPU id (see `kvplan gpus`) and its US$ per "
                              "GPU-hour, e.g. `h100-sxm-80gb,2.49`")


def price_error(value: object) -> str | None:
    """Why `value` is not a US$ per GPU-hour kvplan can compute with, or None: the one check
    for every price (--gpu-hour-price, --prices files, sweep(prices=…)), within the bounds of
    knobs.OPTIONS["gpu_hour_price"] — no nan/inf, nothing that overflows or rounds to $0.00."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number of US$ per GPU-hour, got {short(value)}"
    return knob_error("gpu_hour_price", value)


def _amount(raw: object, path: str, line: int) -> float:
    try:
        value = float(str(raw).strip().lstrip("$")) if not isinstance(raw, bool) else math.nan
    except ValueError:
        value = math.nan
    why = price_error(value) if math.isfinite(value) else "must be a finite number"
    if why:
        raise _bad(path, line, "usd_per_hour", f"US$ per GPU-hour {short(raw)}: {why}")
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
    if not out:  # a header alone: planning on with the defaults would ignore the user's file
        raise InvalidConfigError("no price rows after the header", path=path,
                                 hint="one row per GPU: `h100-sxm-80gb,3.90`")
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
        node = val
        if isinstance(val, yaml.MappingNode):
            fields = {k.value: v for k, v in val.value if isinstance(k, yaml.ScalarNode)}
            node = fields.get("usd_per_hour")
            n = (node or val).start_mark.line + 1
            if node is None:
                raise _bad(path, n, "usd_per_hour", f"{gpu}: no usd_per_hour in its mapping")
        if not isinstance(node, yaml.ScalarNode):  # `h100: [1, 2]`: not one price
            raise _bad(path, n, "usd_per_hour", f"US$ per GPU-hour of {gpu}: one number, not "
                       f"a {'list' if isinstance(node, yaml.SequenceNode) else 'mapping'}")
        raw: object = node.value
        if node.tag == "tag:yaml.org,2002:null" or not str(raw).strip():  # `h100:` alone
            raise _bad(path, n, "usd_per_hour", f"no US$ per GPU-hour for {gpu}")
        out[gpu] = Price(gpu_id=gpu, usd_per_hour=_amount(raw, path, n), source=f"{path}:{n}",
                         default=False)
    return out


def load_price_file(path: str | Path, resolve: Callable[[str], GpuSpec]) -> dict[str, Price]:
    """--prices FILE: .csv, else YAML (.yaml/.yml/anything else)."""
    p = Path(path).expanduser()
    text = read_text_limited(p, MAX_PRICES_BYTES, what="--prices file")
    if p.suffix.lower() == ".csv":
        return parse_csv(text, str(path), resolve)
    return parse_yaml(text, str(path), resolve)


def default_prices(resolve: Callable[[str], GpuSpec]) -> dict[str, Price]:
    """The bundled gpu_specs/prices.csv (labelled as defaults): a new table of new Price
    objects each call (callers add their own prices to it), the file read and checked once per
    process and resolver, as the GPU catalogue is (catalog.gpu_specs)."""
    return {gpu: p.model_copy() for gpu, p in _bundled_prices(resolve).items()}


@functools.lru_cache(maxsize=4)
def _bundled_prices(resolve: Callable[[str], GpuSpec]) -> dict[str, Price]:
    from .catalog import data_dir

    path = data_dir("gpu_specs") / "prices.csv"
    return parse_csv(path.read_text(encoding="utf-8"), "gpu_specs/prices.csv", resolve,
                     default=True)
