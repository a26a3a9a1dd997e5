"""SGLang's --enable-mixed-chunk in the latency model (Engine.launch_batching) and the
calibration rows that record it (benchmarks/data/perf_calibration.csv, column engine_flags);
the knob that plans it (kvplan/engines/sglang_mixed_chunk.py, docs/sglang-mixed-chunk.md)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kvplan import Workload, plan
from kvplan.engines import registry
from kvplan.engines import sglang as sglang_engine
from kvplan.errors import InvalidInputError
from kvplan.knobs import Knobs
from kvplan.planner.plan import evaluate
from kvplan.sources.catalog import resolve_gpu, resolve_model
from kvplan.specs import Plan

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "perf_calibration.csv"


def test_mixed_chunk_turns_sglang_mixed_with_whole_prompts() -> None:
    """The prefill budget is min(--chunked-prefill-size, --max-prefill-tokens); the latter
    defaults to 16384 (SGLang 0.5.6.post2 server_args.py). The prompt that overruns a step
    is chunked only when --chunked-prefill-size is the smaller (PrefillAdder.add_one_req
    stops at input_tokens >= rem_input_tokens first otherwise)."""
    sglang = registry.get("sglang")
    flags = ["--enable-mixed-chunk", "--max-prefill-tokens", "2500"]
    assert sglang.launch_batching(flags, 8192) == {
        "style": "mixed", "whole_prompts": True, "max_num_batched_tokens": 2500,
        "split_last_prompt": False}
    budget, split = "max_num_batched_tokens", "split_last_prompt"
    assert sglang.launch_batching(["--enable-mixed-chunk"], 8192)[budget] == 8192
    assert sglang.launch_batching(["--enable-mixed-chunk"], 8192)[split] is True
    assert sglang.launch_batching(["--enable-mixed-chunk"], 32768)[budget] == 16384
    assert sglang.launch_batching(["--enable-mixed-chunk"], 16384)[split] is False
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


# ------------------------------------------------------------- the knob (--enable-mixed-chunk)

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _plan(**knobs: object) -> Plan:
    return plan(LLAMA, "h100", engine="sglang", offline=True, **knobs)


def test_the_knob_is_sglangs_and_kept_in_the_launch_line() -> None:
    """One flag spec (kvplan/engines/sglang.py CLI_FLAGS) makes it SGLang's own option; the
    launch line keeps what the user asked for, and only then."""
    assert sglang_engine.CLI_FLAGS["--enable-mixed-chunk"] == ("enable_mixed_chunk", "bool")
    assert _plan(enable_mixed_chunk=True).command.split()[-1] == "--enable-mixed-chunk"
    assert "--enable-mixed-chunk" not in _plan().command


@pytest.mark.parametrize(("engine", "label"), [("vllm", "vLLM"), ("tgi", "TGI"),
                                               ("trtllm", "TensorRT-LLM")])
def test_other_engines_refuse_the_knob_naming_flag_and_engine(engine: str, label: str) -> None:
    assert "enable_mixed_chunk" in registry.get(engine).unsupported
    with pytest.raises(InvalidInputError) as e:
        plan(LLAMA, "h100", engine=engine, offline=True, enable_mixed_chunk=True)
    assert e.value.message == f"--enable-mixed-chunk is not a setting {label} has"
    assert e.value.hint == "drop it, or plan with --engine sglang"
    assert e.value.knob == "enable_mixed_chunk"


def test_releases_without_the_flag_refuse_it() -> None:
    """--enable-mixed-chunk is declared in python/sglang/srt/server_args.py of the PyPI wheel
    of SGLang 0.2.14 and not in 0.2.13's (argparse exits on an unknown flag)."""
    with pytest.raises(InvalidInputError, match=r"SGLang 0\.2\.13 has no such flag") as e:
        _plan(enable_mixed_chunk=True, engine_version="0.2.13")
    assert e.value.knob == "enable_mixed_chunk" and "0.2.14" in (e.value.hint or "")
    assert "--enable-mixed-chunk" in _plan(enable_mixed_chunk=True,
                                           engine_version="0.2.14").command
    _plan(engine_version="0.2.13")  # without the flag the old release still plans


def test_pipeline_parallel_refused_up_to_0_5_10() -> None:
    """0.5.10's check_server_args asserts `not self.enable_mixed_chunk` when pp_size > 1; the
    assertion is gone in 0.5.11 (sgl-project/sglang PR #22920)."""
    with pytest.raises(InvalidInputError, match="pipeline parallelism") as e:
        _plan(enable_mixed_chunk=True, pipeline_parallel_size=2, engine_version="0.5.10")
    assert e.value.knob == "enable_mixed_chunk"
    p = _plan(enable_mixed_chunk=True, pipeline_parallel_size=2, engine_version="0.5.11")
    assert "--enable-mixed-chunk" in p.command
    _plan(enable_mixed_chunk=True, engine_version="0.5.10")  # -pp 1: fine


def test_batching_follows_the_flag() -> None:
    """Engine.batching gives a planned deployment the fields launch_batching gives a
    measured one with the same flag (at the default --max-prefill-tokens 16384)."""
    eng = registry.get("sglang")
    m, gpu = resolve_model(LLAMA), resolve_gpu("h100")
    dep, _ = evaluate(eng, m, gpu, Knobs.parse({"enable_mixed_chunk": True}), "0.5.23")
    assert eng.batching(dep, 8192) == eng.launch_batching(["--enable-mixed-chunk"], 8192)
    assert eng.batching(dep, 32768)["max_num_batched_tokens"] == 16384
    plain, _ = evaluate(eng, m, gpu, Knobs.parse({}), "0.5.23")
    assert eng.batching(plain, 8192) == {}
    vllm = registry.get("vllm")
    vdep, _ = evaluate(vllm, m, gpu, Knobs.parse({}), "0.12.0")
    assert vllm.batching(vdep, 8192) == {}


def test_speculative_decoding_plans_prefill_first_and_says_so() -> None:
    """SGLang 0.5.6.post2 server_args.py sets enable_mixed_chunk = False for NGRAM (and the
    EAGLE family): the figures are the prefill-first ones, the flag stays in the line (the user
    asked for it) and a warning says why."""
    spec = '{"method": "ngram", "num_speculative_tokens": 4}'
    kw = {"speculative_config": spec, "workload": Workload(
        avg_input_tokens=1024, avg_output_tokens=256, target_concurrency=32)}
    on, off = _plan(enable_mixed_chunk=True, **kw), _plan(**kw)
    assert [p.code for p in on.problems if p.code.startswith("mixed-chunk")] == [
        "mixed-chunk-not-planned"]
    assert "--enable-mixed-chunk" in on.command
    assert on.performance is not None and off.performance is not None
    assert on.performance.ttft_ms == off.performance.ttft_ms
