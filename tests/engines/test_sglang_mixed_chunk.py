"""SGLang's --enable-mixed-chunk in the latency model (Engine.launch_batching) and the
calibration rows that record it (benchmarks/data/perf_calibration.csv, column engine_flags)."""

from __future__ import annotations

import csv
from pathlib import Path

from kvplan.engines import registry

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "perf_calibration.csv"


def test_mixed_chunk_turns_sglang_mixed_with_whole_prompts() -> None:
    """The prefill budget is min(--chunked-prefill-size, --max-prefill-tokens); the latter
    defaults to 16384 (SGLang 0.5.6.post2 server_args.py)."""
    sglang = registry.get("sglang")
    flags = ["--enable-mixed-chunk", "--max-prefill-tokens", "2500"]
    assert sglang.launch_batching(flags, 8192) == {
        "style": "mixed", "whole_prompts": True, "max_num_batched_tokens": 2500}
    budget = "max_num_batched_tokens"
    assert sglang.launch_batching(["--enable-mixed-chunk"], 8192)[budget] == 8192
    assert sglang.launch_batching(["--enable-mixed-chunk"], 32768)[budget] == 16384
    assert sglang.launch_batching(["--max-prefill-tokens", "2500"], 8192) == {}


def test_other_engines_ignore_launch_flags() -> None:
    assert registry.get("vllm").launch_batching(["--enable-mixed-chunk"], 8192) == {}


def test_inferred_flags_say_so() -> None:
    """Every row with engine_flags is an SGLang row whose notes say the flags are inferred and
    name where from; its --max-prefill-tokens is the row's ISL + 1500 (the generator's rule)."""
    with DATA.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["engine_flags"]]
    assert rows
    for r in rows:
        assert r["engine"] == "sglang"
        assert "engine_flags inferred" in r["notes"] and "sglang.rule" in r["notes"]
        flags = r["engine_flags"].split()
        assert flags[flags.index("--max-prefill-tokens") + 1] == str(int(r["isl"]) + 1500)
