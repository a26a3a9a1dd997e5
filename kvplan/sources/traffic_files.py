"""Readers of the traffic files `plan` takes (docs/traffic.md): a request trace (--trace) and a
rate curve (--traffic), and the request lengths of --lengths-file. Bounded reads
(sources.limits); a bad row is an error naming the flag the file came from (`flag`, given by the
CLI), the file, the line and the field: `--traffic day.csv line 4: …`.

* Trace: the Azure LLM inference trace CSV (AzurePublicDataset, AzureLLMInferenceTrace_*.csv:
  header `TIMESTAMP,ContextTokens,GeneratedTokens`, TIMESTAMP a wall-clock time such as
  `2023-11-16 18:15:46.6805900`), or JSON Lines with the same fields (TIMESTAMP may also be a
  number of seconds). Times become seconds from the first request.
* Rate curve: CSV `time,requests_per_s`, one day: time in hours (a number from 0 to below 24)
  or `HH:MM` (00:00 to 23:59), when in the day each interval starts.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from ..errors import InvalidConfigError
from .limits import read_text_limited

MAX_TRACE_BYTES = 256 << 20  # the 2023 Azure traces are ~0.5 MB; a day of a busy service more
MAX_TRACE_REQUESTS = 200_000  # the simulation's time stays in seconds
MAX_TRACE_SPAN_S = 31 * 86_400  # a month (the 2024 Azure traces span a week)
MAX_CURVE_BYTES = 1 << 20
FIELDS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _label(path: Path, flag: str | None) -> str:
    """How messages name a file: the flag it came from and the path as given
    (`--traffic data/day.csv`), so two files of one name in different folders are told apart."""
    return f"{flag} {path}" if flag else str(path)


def _read(path: Path, limit: int, what: str, flag: str | None) -> str:
    """read_text_limited, its errors (no such file, too large, not UTF-8) naming the flag."""
    try:
        return read_text_limited(path, limit, what=what)
    except InvalidConfigError as e:
        if not flag:
            raise
        raise InvalidConfigError(e.detail, path=f"{flag} {e.path}" if e.path else flag,
                                 field=e.field, hint=e.hint) from None


def _records(name: str, text: str) -> tuple[csv.DictReader[str], Iterator[tuple[int, dict]]]:
    """A CSV's reader (its header read) and its (line, row) pairs; a line csv cannot read (a
    field over its 128 KiB limit) is an error naming it. The line is the file's own, blank
    lines counted."""
    reader = csv.DictReader(io.StringIO(text))

    def refused(e: csv.Error) -> InvalidConfigError:
        line = reader.reader.line_num  # the csv reader's: DictReader's lags a row behind
        return InvalidConfigError(f"{name} line {line}: not readable as CSV ({e})",
                                  hint="check the file is the CSV it should be")

    try:
        reader.fieldnames  # noqa: B018  (reads the header)
    except csv.Error as e:
        raise refused(e) from None

    def rows() -> Iterator[tuple[int, dict]]:
        it = iter(reader)
        while True:
            try:
                rec = next(it)
            except StopIteration:
                return
            except csv.Error as e:
                raise refused(e) from None
            if rec.get(None):  # DictReader's restkey: fields past the header's (`0,5,extra`)
                fields = len(reader.fieldnames or ()) + len(rec[None])
                raise InvalidConfigError(
                    f"{name} line {reader.line_num}: {fields} fields, the header names "
                    f"{len(reader.fieldnames or ())} ({','.join(reader.fieldnames or ())})",
                    hint="one value per header column; a column the reader does not use "
                    "needs a name in the header")
            yield reader.line_num, rec

    return reader, rows()


def _seconds(value: object) -> float:
    """A timestamp as seconds: a number, or a wall-clock time with up to 7 fractional digits
    (the Azure traces carry 100 ns ticks; datetime takes 6)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    whole, _, frac = text.partition(".")
    t = datetime.fromisoformat(whole.replace("T", " ")).timestamp()
    return t + (float("0." + frac) if frac.isdigit() else 0.0)


def _row(where: str, rec: dict[str, object]) -> tuple[float, int, int]:
    missing = [f for f in FIELDS if f not in rec]
    if missing:
        raise InvalidConfigError(f"{where}: no {', '.join(missing)} field",
                                 hint="a trace row has TIMESTAMP, ContextTokens and "
                                 "GeneratedTokens (the Azure LLM inference trace's columns)")
    try:
        t = _seconds(rec["TIMESTAMP"])
        i, o = int(str(rec["ContextTokens"])), int(str(rec["GeneratedTokens"]))
    except (TypeError, ValueError, OverflowError):
        raise InvalidConfigError(f"{where}: TIMESTAMP must be a time or seconds and "
                                 "ContextTokens/GeneratedTokens whole numbers",
                                 hint="check the row's values") from None
    if not math.isfinite(t):  # nan or inf: the replay's clock would never advance
        raise InvalidConfigError(f"{where}: TIMESTAMP {rec['TIMESTAMP']} is not a finite time",
                                 hint="a wall-clock time or a number of seconds")
    if i < 1 or o < 1 or i > 1 << 24 or o > 1 << 24:
        raise InvalidConfigError(f"{where}: token counts must be 1 to {1 << 24:,}",
                                 hint="drop rows with 0 tokens (failed requests)")
    return t, i, o


def read_trace(path: Path, *, flag: str | None = None) -> tuple[tuple[float, int, int], ...]:
    """(seconds from the first request, input tokens, output tokens) per request, sorted.
    Errors name the file, after `flag` (the option it came from) when given."""
    name = _label(path, flag)
    text = _read(path, MAX_TRACE_BYTES, "trace", flag)
    rows: list[tuple[float, int, int]] = []
    stripped = text.lstrip()
    if stripped.startswith("{"):
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                raise InvalidConfigError(f"{name} line {n}: not JSON",
                                         hint="one JSON object per line") from None
            if not isinstance(rec, dict):
                raise InvalidConfigError(f"{name} line {n}: not a JSON object")
            rows.append(_row(f"{name} line {n}", rec))
            if len(rows) > MAX_TRACE_REQUESTS:
                break
    else:
        for n, rec in _records(name, text)[1]:
            rows.append(_row(f"{name} line {n}", dict(rec)))
            if len(rows) > MAX_TRACE_REQUESTS:
                break
    if not rows:
        raise InvalidConfigError(f"{name}: no requests", hint="the header "
                                 "TIMESTAMP,ContextTokens,GeneratedTokens and one row per request")
    if len(rows) > MAX_TRACE_REQUESTS:
        raise InvalidConfigError(f"{name}: more than {MAX_TRACE_REQUESTS:,} requests",
                                 hint="replay a window of the trace (an hour of it)")
    rows.sort()
    t0 = rows[0][0]
    if rows[-1][0] == t0:  # no time between the first and the last: no average rate
        what = "one request" if len(rows) == 1 else f"all {len(rows):,} requests at one time"
        raise InvalidConfigError(f"{name}: {what}; a replay's average request rate needs "
                                 "requests at two or more different times",
                                 hint="replay a longer window of the trace, or simulate its "
                                 "lengths at a rate with --request-rate R --lengths-file FILE "
                                 "(a CSV trace as it is; docs/traffic.md)")
    if rows[-1][0] - t0 > MAX_TRACE_SPAN_S:
        raise InvalidConfigError(
            f"{name}: the requests span {(rows[-1][0] - t0) / 86_400:,.3g} days, more than "
            f"{MAX_TRACE_SPAN_S // 86_400}", hint="check the TIMESTAMP column's unit (seconds), "
            "or replay a window of the trace")
    return tuple((t - t0, i, o) for t, i, o in rows)


def _bench_lengths(name: str, text: str) -> tuple[tuple[int, int], ...]:
    """(input, output) per request from a serving benchmark's result: the `input_lens` and
    `output_lens` lists `vllm bench serve --save-result --save-detailed` writes
    (vllm/benchmarks/serve.py) and SGLang `bench_serving --output-details` appends as a JSON
    line (the last line that has them is read). Failed requests (0 output tokens) are
    dropped."""
    rec: object = None
    for chunk in (text, *reversed(text.splitlines())):  # one JSON object, else JSON lines
        try:
            rec = json.loads(chunk)
        except (ValueError, RecursionError):
            continue
        if isinstance(rec, dict) and "input_lens" in rec:
            break
    if not (isinstance(rec, dict) and isinstance(rec.get("input_lens"), list)
            and isinstance(rec.get("output_lens"), list)):
        raise InvalidConfigError(f"{name}: a benchmark result needs the input_lens and "
                                 "output_lens lists", hint="save them with vllm bench serve "
                                 "--save-result --save-detailed (SGLang: --output-details)")
    ins, outs = rec["input_lens"], rec["output_lens"]
    if len(ins) != len(outs):
        raise InvalidConfigError(f"{name}: input_lens and output_lens differ in length")
    if not ins:
        raise InvalidConfigError(f"{name}: input_lens and output_lens are empty (no requests)",
                                 hint="save a run that completed requests")
    out = []
    for n, (i, o) in enumerate(zip(ins, outs, strict=True), 1):  # the n-th request, from 1
        if not (isinstance(i, int) and isinstance(o, int)) or isinstance(i, bool) \
                or isinstance(o, bool):
            raise InvalidConfigError(f"{name}: request {n} of {len(ins):,}: token counts must "
                                     "be whole numbers", hint="check the file")
        if o >= 1 and 1 <= i <= 1 << 24 and o <= 1 << 24:
            out.append((i, o))
    if not out:
        which = ("its one request has" if len(ins) == 1
                 else f"each of its {len(ins):,} requests has")
        raise InvalidConfigError(f"{name}: no completed request ({which} output_lens 0, "
                                 f"failed, or a length outside 1 to {1 << 24:,})")
    if len(out) > MAX_TRACE_REQUESTS:
        raise InvalidConfigError(f"{name}: more than {MAX_TRACE_REQUESTS:,} requests",
                                 hint="a sample of the lengths is enough")
    return tuple(out)


def read_lengths(path: Path, *, flag: str | None = None) -> tuple[tuple[int, int], ...]:
    """(input, output) tokens per request from a CSV with columns input_tokens,output_tokens
    (or a trace's ContextTokens,GeneratedTokens), or a serving benchmark's detailed result
    JSON (input_lens / output_lens): the empirical length mix to sample. Errors name the
    file, after `flag` (the option it came from) when given."""
    name = _label(path, flag)
    text = _read(path, MAX_TRACE_BYTES, "lengths file", flag)
    if text.lstrip().startswith("{"):
        return _bench_lengths(name, text)
    reader, records = _records(name, text)
    names = set(reader.fieldnames or ())
    cols = next((c for c in (("input_tokens", "output_tokens"),
                             ("ContextTokens", "GeneratedTokens")) if set(c) <= names), None)
    if cols is None:
        raise InvalidConfigError(f"{name}: the header must name input_tokens,"
                                 "output_tokens", hint="one row per request, e.g. 812,240 (or "
                                 "a vllm bench serve --save-detailed result JSON)")
    out: list[tuple[int, int]] = []
    for n, rec in records:
        try:
            i, o = int(str(rec[cols[0]])), int(str(rec[cols[1]]))
        except (TypeError, ValueError):
            raise InvalidConfigError(f"{name} line {n}: token counts must be whole "
                                     "numbers", hint="check the row") from None
        if not (1 <= i <= 1 << 24 and 1 <= o <= 1 << 24):
            raise InvalidConfigError(f"{name} line {n}: token counts must be 1 to "
                                     f"{1 << 24:,}", hint="drop rows with 0 tokens")
        out.append((i, o))
        if len(out) > MAX_TRACE_REQUESTS:
            raise InvalidConfigError(f"{name}: more than {MAX_TRACE_REQUESTS:,} rows",
                                     hint="a sample of the lengths is enough")
    if not out:
        raise InvalidConfigError(f"{name}: no rows", hint="one row per request")
    return tuple(out)


_CLOCK = re.compile(r"(\d{1,2}):(\d{2})", re.ASCII)
CURVE_DAY_H = 24  # a curve is one day: its times are when in the day each interval starts
_DAY_HINT = ("a curve is one day: each row's time is when in the day its interval starts, "
             "HH:MM from 00:00 to 23:59 or hours from 0 to below 24 (e.g. 13:30 or 13.5); "
             "24:00 is the next day's 00:00")


def _hours(where: str, value: str) -> float:
    """A curve time as hours into the day: a number of hours from 0 to below 24, or a clock
    time HH:MM from 00:00 to 23:59; anything else is an error naming the line (where)."""
    if ":" in value:
        m = _CLOCK.fullmatch(value)
        if m is None:
            raise InvalidConfigError(f"{where}: time {value[:40]!r} is not HH:MM (00:00 to "
                                     "23:59)", hint=_DAY_HINT)
        h, mins = int(m[1]), int(m[2])
        if h >= CURVE_DAY_H:
            raise InvalidConfigError(f"{where}: time {value} is not a time of day: the hour "
                                     "must be 00 to 23 (HH:MM from 00:00 to 23:59)",
                                     hint=_DAY_HINT)
        if mins >= 60:
            raise InvalidConfigError(f"{where}: time {value} is not a time of day: the "
                                     "minutes must be 00 to 59 (HH:MM from 00:00 to 23:59)",
                                     hint=_DAY_HINT)
        return h + mins / 60
    try:
        t = float(value)
    except ValueError:
        raise InvalidConfigError(f"{where}: time {value[:40]!r} is neither hours nor HH:MM",
                                 hint=_DAY_HINT) from None
    if not math.isfinite(t):
        raise InvalidConfigError(f"{where}: time {value[:40]} is not a finite number of hours",
                                 hint=_DAY_HINT)
    if not 0 <= t < CURVE_DAY_H:
        raise InvalidConfigError(f"{where}: time {value[:40]} is outside a day: hours must be "
                                 "from 0 to below 24", hint=_DAY_HINT)
    return t


def read_curve(path: Path, *, flag: str | None = None) -> tuple[tuple[float, float], ...]:
    """(hours, requests/s) per interval, sorted by time. Errors name the file, after `flag`
    (the option it came from) when given, and the line."""
    name = _label(path, flag)
    text = _read(path, MAX_CURVE_BYTES, "traffic curve", flag)
    out: list[tuple[float, float]] = []
    seen: dict[float, int] = {}  # time → its line
    reader, records = _records(name, text)
    if reader.fieldnames is None or not {"time", "requests_per_s"} <= set(reader.fieldnames):
        raise InvalidConfigError(f"{name}: the header must be time,requests_per_s",
                                 hint="e.g. 0,4.5 then 1,3.2 … (hours, requests per second)")
    for n, rec in records:
        where = f"{name} line {n}"
        t = _hours(where, str(rec["time"] or "").strip())
        if t in seen:
            raise InvalidConfigError(f"{where}: time {str(rec['time']).strip()} appears twice "
                                     f"(line {seen[t]} too)", hint="one row per interval")
        seen[t] = n
        try:
            r = float(str(rec["requests_per_s"]))
        except (TypeError, ValueError):
            raise InvalidConfigError(f"{where}: requests_per_s must be a number",
                                     hint="check the row") from None
        if not (0 <= r <= 1_000_000):
            raise InvalidConfigError(f"{where}: requests_per_s must be 0 to 1,000,000",
                                     hint="check the row")
        out.append((t, r))
        if len(out) > 10_000:
            raise InvalidConfigError(f"{name}: more than 10,000 intervals",
                                     hint="use hourly or 15-minute intervals")
    if not out:
        raise InvalidConfigError(f"{name}: no intervals", hint="one row per interval")
    return tuple(sorted(out))
