"""kvplan.sources.traffic_files: the Azure LLM inference trace CSV (and JSONL of its fields)
and the rate-curve CSV; bad rows name the file and the line."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from kvplan.errors import InvalidConfigError
from kvplan.sources.traffic_files import read_curve, read_lengths, read_trace

# Rows in the AzurePublicDataset format (AzureLLMInferenceTrace_conv.csv's header and its
# 100 ns timestamps); values made up for the test.
AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:47.0000000,879,7
"""


def test_azure_csv_becomes_seconds_from_the_first_request(tmp_path: Path) -> None:
    p = tmp_path / "azure.csv"
    p.write_text(AZURE)
    rows = read_trace(p)
    assert [(i, o) for _, i, o in rows] == [(374, 44), (879, 7), (396, 109)]  # sorted by time
    assert rows[0][0] == 0.0
    assert rows[1][0] == pytest.approx(0.31941, abs=1e-6)  # 47.0 − 46.68059
    assert rows[2][0] == pytest.approx(4.314579, abs=1e-6)  # 50.995169 − 46.68059


def test_jsonl_of_the_same_fields_with_seconds(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"TIMESTAMP": 10.5, "ContextTokens": 100, "GeneratedTokens": 20}\n\n'
                 '{"TIMESTAMP": 12, "ContextTokens": 200, "GeneratedTokens": 30}\n')
    assert read_trace(p) == ((0.0, 100, 20), (1.5, 200, 30))


@pytest.mark.parametrize(("text", "want"), [
    ("TIMESTAMP,ContextTokens\n1,2\n", "no GeneratedTokens"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n1,x,3\n", "line 2"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n1,0,3\n", "token counts"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests"),
    # a time that never advances the replay's clock (it ran forever) or spans centuries
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,100,10\nnan,100,10\n", "line 3.*not a finite"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,100,10\ninf,100,10\n", "not a finite"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n-inf,100,10\n0,100,10\n", "not a finite"),
    ('{"TIMESTAMP": NaN, "ContextTokens": 1, "GeneratedTokens": 1}\n', "not a finite"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,100,10\n1e300,100,10\n", "more than 31"),
])
def test_bad_trace_rows_name_the_line(tmp_path: Path, text: str, want: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(InvalidConfigError, match=want):
        read_trace(p)


def test_curve_hours_and_hh_mm(tmp_path: Path) -> None:
    p = tmp_path / "day.csv"
    p.write_text("time,requests_per_s\n1,4\n0:30,2.5\n")
    assert read_curve(p) == ((0.5, 2.5), (1.0, 4.0))


def test_curve_times_span_one_day(tmp_path: Path) -> None:
    """The first and last minute of a day in both forms: 00:00 = 0 h, 23:59 = 23 + 59/60 =
    23.98333… h, and hours just below 24."""
    p = tmp_path / "day.csv"
    p.write_text("time,requests_per_s\n00:00,1\n23:59,2\n23.5,3\n")
    assert read_curve(p) == ((0.0, 1.0), (23.5, 3.0), (23 + 59 / 60, 2.0))


@pytest.mark.parametrize(("time", "want"), [
    # HH:MM: a time of day, 00:00 to 23:59 (24:00 is the next day's 00:00)
    ("25:00", "line 3: time 25:00 is not a time of day: the hour must be 00 to 23"),
    ("24:00", "line 3: time 24:00 is not a time of day: the hour must be 00 to 23"),
    ("12:75", "line 3: time 12:75 is not a time of day: the minutes must be 00 to 59"),
    ("12:60", "line 3: time 12:60 is not a time of day: the minutes must be 00 to 59"),
    ("12:5", r"line 3: time '12:5' is not HH:MM \(00:00 to 23:59\)"),
    ("-1:30", "line 3: time '-1:30' is not HH:MM"),
    ("1:30:00", "line 3: time '1:30:00' is not HH:MM"),
    # hours: the same day, 0 to below 24 (before, anything up to a million, negative too)
    ("24", "line 3: time 24 is outside a day: hours must be from 0 to below 24"),
    ("30.5", "line 3: time 30.5 is outside a day"),
    ("-1", "line 3: time -1 is outside a day"),
    ("nan", "line 3: time nan is not a finite number"),
    ("noon", "line 3: time 'noon' is neither hours nor HH:MM"),
])
def test_curve_times_outside_a_day_are_refused_naming_the_line(tmp_path: Path, time: str,
                                                               want: str) -> None:
    p = tmp_path / "day.csv"
    p.write_text(f"time,requests_per_s\n0,1\n{time},2\n")
    with pytest.raises(InvalidConfigError, match=want) as e:
        read_curve(p)
    assert e.value.hint is not None and "00:00 to 23:59" in e.value.hint
    assert "below 24" in e.value.hint


@pytest.mark.parametrize(("text", "want"), [
    ("t,r\n1,2\n", "header"),
    ("time,requests_per_s\n1,-2\n", "line 2"),
    ("time,requests_per_s\n1,2\n1,3\n", "twice"),
])
def test_bad_curves(tmp_path: Path, text: str, want: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(InvalidConfigError, match=want):
        read_curve(p)


def test_lengths_file(tmp_path: Path) -> None:
    p = tmp_path / "lens.csv"
    p.write_text("input_tokens,output_tokens\n812,240\n95,1000\n")
    assert read_lengths(p) == ((812, 240), (95, 1000))
    p.write_text("a,b\n1,2\n")
    with pytest.raises(InvalidConfigError, match="header"):
        read_lengths(p)


def test_lengths_from_a_benchmark_result(tmp_path: Path) -> None:
    """vllm bench serve --save-result --save-detailed writes input_lens / output_lens
    (vllm/benchmarks/serve.py); a failed request (0 output tokens) is dropped. SGLang's
    --output-details appends a JSON line per run: the last one with the lists is read."""
    p = tmp_path / "vllm.json"
    p.write_text(json.dumps({"completed": 2, "input_lens": [812, 95, 40],
                             "output_lens": [240, 0, 17], "ttfts": [0.1, 0.2, 0.3]}))
    assert read_lengths(p) == ((812, 240), (40, 17))
    q = tmp_path / "sglang.jsonl"
    q.write_text(json.dumps({"input_lens": [5], "output_lens": [6]}) + "\n"
                 + json.dumps({"input_lens": [7, 8], "output_lens": [9, 10]}) + "\n")
    assert read_lengths(q) == ((7, 9), (8, 10))


@pytest.mark.parametrize(("rec", "want"), [
    ({"completed": 3, "mean_ttft_ms": 12.0}, "--save-detailed"),
    ({"input_lens": [1, 2], "output_lens": [3]}, "differ"),
    ({"input_lens": [1], "output_lens": [0]}, "no completed"),
    ({"input_lens": ["a"], "output_lens": [3]}, "whole numbers")])
def test_bad_benchmark_results(tmp_path: Path, rec: dict, want: str) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rec))
    with pytest.raises(InvalidConfigError, match=want):
        read_lengths(p)


# ------------------------------------------------------- errors name the flag and the file


@pytest.mark.parametrize(("read", "flag", "name", "text", "want"), [
    (read_curve, "--traffic", "day.csv", "time,requests_per_s\n0,4\n1,5\n2,6\n3,x\n",
     "--traffic day.csv line 5: requests_per_s must be a number"),
    (read_curve, "--traffic", "day.csv", "time,requests_per_s\n0,4\n1,5\n01:00,6\n",
     "--traffic day.csv line 4: time 01:00 appears twice (line 3 too)"),
    (read_curve, "--traffic", "day.csv", "when,rate\n0,4\n",
     "--traffic day.csv: the header must be time,requests_per_s"),
    (read_trace, "--trace", "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,1\n"
     "1,x,3\n", "--trace azure.csv line 3: TIMESTAMP must be a time"),
    (read_trace, "--trace", "t.jsonl", '{"TIMESTAMP": 0, "ContextTokens": 1, '
     '"GeneratedTokens": 1}\nnot json\n', "--trace t.jsonl line 2: not JSON"),
    (read_lengths, "--lengths-file", "lens.csv", "input_tokens,output_tokens\n5,2\n0,3\n",
     "--lengths-file lens.csv line 3: token counts must be 1 to"),
    (read_lengths, "--lengths-file", "r.json", '{"input_lens": [1], "output_lens": [1, 2]}',
     "--lengths-file r.json: input_lens and output_lens differ"),
])
def test_errors_name_the_flag_the_file_and_the_line(tmp_path: Path, read: Callable[..., object],
                                                   flag: str, name: str, text: str,
                                                   want: str, monkeypatch) -> None:
    """Given several files (--traffic, --trace, --lengths-file), a user reads which one and
    where: `--traffic day.csv line 5: …`, the file as named (docs/traffic.md): its folder too
    when one was given (the basename alone could not tell two day.csv apart)."""
    monkeypatch.chdir(tmp_path)
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(InvalidConfigError) as e:
        read(Path(name), flag=flag)
    assert e.value.message.startswith(want), e.value.message
    (tmp_path / "week").mkdir()
    (tmp_path / "week" / name).write_text(text)
    with pytest.raises(InvalidConfigError) as e:
        read(Path("week") / name, flag=flag)
    assert e.value.message.startswith(want.replace(f"{flag} ", f"{flag} week/", 1))


def test_lines_are_the_files_own_blank_lines_counted(tmp_path: Path) -> None:
    """Line 1 the header, line 3 blank (csv skips it), so the bad row is line 4, not the third
    row's "line 3"."""
    p = tmp_path / "day.csv"
    p.write_text("time,requests_per_s\n0,4\n\n1,x\n")
    with pytest.raises(InvalidConfigError, match=r"^--traffic .*/day\.csv line 4: "):
        read_curve(p, flag="--traffic")


@pytest.mark.parametrize("read", [read_curve, read_trace, read_lengths])
def test_a_missing_or_unreadable_file_names_its_flag(tmp_path: Path,
                                                    read: Callable[..., object]) -> None:
    flag = {read_curve: "--traffic", read_trace: "--trace", read_lengths: "--lengths-file"}[read]
    missing = tmp_path / "nope.csv"
    with pytest.raises(InvalidConfigError, match=rf"^{flag} .*nope\.csv.*: cannot read"):
        read(missing, flag=flag)
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InvalidConfigError, match=rf"^{flag} .*b\.csv: not UTF-8"):
        read(binary, flag=flag)


@pytest.mark.parametrize(("read", "header"), [
    (read_curve, "time,requests_per_s"), (read_trace, "TIMESTAMP,ContextTokens,GeneratedTokens"),
    (read_lengths, "input_tokens,output_tokens")])
def test_a_row_csv_cannot_read_is_an_error_naming_its_line(
        tmp_path: Path, read: Callable[..., object], header: str) -> None:
    """A field over csv's 131,072-character limit on line 3 raised csv.Error, which reached the
    user as an internal error with no file or line."""
    p = tmp_path / "huge.csv"
    first = {read_curve: "0,1", read_trace: "0,10,1", read_lengths: "10,1"}[read]
    p.write_text(f"{header}\n{first}\n1,{'9' * 200_000}\n")
    with pytest.raises(InvalidConfigError,
                       match=re.escape(f"--x {p} line 3: not readable as CSV")):
        read(p, flag="--x")


def test_a_json_line_nested_too_deeply_names_its_line(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"TIMESTAMP": 0, "ContextTokens": 1, "GeneratedTokens": 1}\n'
                 + "[" * 100_000 + "\n")
    with pytest.raises(InvalidConfigError, match=r"^--trace .*/t\.jsonl line 2: not JSON"):
        read_trace(p, flag="--trace")


# ------------------------------------------- what spreadsheets and Windows tools write

BOM = "\ufeff"  # Excel's "CSV UTF-8" and Windows PowerShell's Out-File start with it


@pytest.mark.parametrize(("read", "text", "want"), [
    (read_curve, "time,requests_per_s\r\n0,5\r\n12,20\r\n", ((0.0, 5.0), (12.0, 20.0))),
    (read_trace, "TIMESTAMP,ContextTokens,GeneratedTokens\r\n0,100,10\r\n2,200,20\r\n",
     ((0.0, 100, 10), (2.0, 200, 20))),
    (read_trace, '{"TIMESTAMP": 0, "ContextTokens": 100, "GeneratedTokens": 10}\r\n'
     '{"TIMESTAMP": 2, "ContextTokens": 200, "GeneratedTokens": 20}\r\n',
     ((0.0, 100, 10), (2.0, 200, 20))),
    (read_lengths, "input_tokens,output_tokens\r\n100,50\r\n200,20\r\n", ((100, 50), (200, 20))),
    (read_lengths, '{"input_lens": [100, 200], "output_lens": [50, 20]}',
     ((100, 50), (200, 20))),
])
def test_a_byte_order_mark_is_not_part_of_the_first_field(
        tmp_path: Path, read: Callable[..., object], text: str, want: object) -> None:
    """A leading UTF-8 byte-order mark made the header `\\ufefftime,…` ("the header must be
    time,requests_per_s") and a JSON trace's first line not JSON: it is dropped, and a later
    error's line number is still the file's own."""
    p = tmp_path / "f.csv"
    p.write_bytes((BOM + text).encode())
    assert read(p) == want
    if read is read_curve:
        p.write_bytes((BOM + text + "13,x\r\n").encode())
        with pytest.raises(InvalidConfigError, match="line 4: requests_per_s"):
            read(p)


@pytest.mark.parametrize(("read", "text", "fields"), [
    (read_curve, "time,requests_per_s\n0,5\n1,5,extra\n", "3 fields, the header names 2"),
    (read_trace, "TIMESTAMP,ContextTokens,GeneratedTokens\n0,1,1\n1,2,2,3\n",
     "4 fields, the header names 3"),
    (read_lengths, "input_tokens,output_tokens\n5,5\n5,5,\n", "3 fields, the header names 2"),
])
def test_a_row_longer_than_the_header_names_its_line(tmp_path: Path,
                                                    read: Callable[..., object], text: str,
                                                    fields: str) -> None:
    """`1,5,extra` under `time,requests_per_s` was read as 1,5, the third field dropped
    silently: which column is it? An error naming the line."""
    p = tmp_path / "x.csv"
    p.write_text(text)
    with pytest.raises(InvalidConfigError, match=rf"^--x \S*x\.csv line 3: {fields}"):
        read(p, flag="--x")


@pytest.mark.parametrize(("text", "want"), [
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,100,10\n", "one request;"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n5,100,10\n5,100,10\n5,200,20\n",
     "all 3 requests at one time;"),
])
def test_a_trace_without_a_duration_has_no_rate(tmp_path: Path, text: str, want: str) -> None:
    """One request, or all at one time, replayed as "1 requests, 0 req/s on average" (the
    replay's request_rate and headroom follow from that rate): refused with the reason."""
    p = tmp_path / "t.csv"
    p.write_text(text)
    with pytest.raises(InvalidConfigError) as e:
        read_trace(p, flag="--trace")
    assert want in e.value.message and "two or more different times" in e.value.message
    assert "--lengths-file" in (e.value.hint or "")


@pytest.mark.parametrize(("rec", "want"), [
    ({"input_lens": [], "output_lens": []}, "input_lens and output_lens are empty"),
    ({"input_lens": ["100", 2000], "output_lens": [50, 60]},
     "request 1 of 2: token counts must be whole numbers"),
    ({"input_lens": [100, 200], "output_lens": [50, True]},
     "request 2 of 2: token counts must be whole numbers"),
    ({"input_lens": [0], "output_lens": [5]}, "its one request has output_lens 0, failed, or a "
     "length outside"),
])
def test_benchmark_result_errors_say_what_is_wrong(tmp_path: Path, rec: dict,
                                                   want: str) -> None:
    """Empty lists said "every output_lens is 0"; the first request was "request 0"."""
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rec))
    with pytest.raises(InvalidConfigError, match=re.escape(want)):
        read_lengths(p)
