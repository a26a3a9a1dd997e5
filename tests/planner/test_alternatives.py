"""The planner's alternatives are typed: the serve line's shorter length is the
shorter-length alternative, found by its kind rather than by matching a flag's text."""

import re

import pytest

import kvplan
from kvplan.planner.plan import Alternative, AlternativeKind
from kvplan.specs import Workload

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_the_serve_line_uses_the_listed_shorter_length(engine):
    """8B at its full 131072 tokens does not fit an A10: the last alternative listed is a shorter
    length under the engine's own flag, and max_model_len recommends that very number."""
    p = kvplan.plan(LLAMA8, "a10", engine=engine, offline=True)
    steps = [x.message for x in p.problems if x.code == "next-steps"]
    assert len(steps) == 1
    flag = p.engine.knobs["max_model_len"]
    listed = re.findall(rf"\d\) {re.escape(flag)} (\d+)", steps[0])
    assert len(listed) == 1
    assert p.recommendations.max_model_len.value == int(listed[0]) < 131072
    assert steps[0].endswith(f"the serve line uses {flag} {listed[0]}")


def test_an_alternative_carries_its_kind_text_and_value():
    a = Alternative(AlternativeKind.TENSOR_PARALLEL, "--tensor-parallel-size 2", 2)
    assert a.kind is AlternativeKind.TENSOR_PARALLEL and a.value == 2
    assert Alternative(AlternativeKind.LARGER_GPU, "a larger GPU: --gpu h100").value is None


def test_with_a_workload_no_shorter_length_is_offered():
    """With a workload the goal's length is the workload's, so a shorter max_model_len is never an
    alternative; a lower target is."""
    w = Workload(target_concurrency=64, avg_input_tokens=2000, avg_output_tokens=500)
    p = kvplan.plan(LLAMA8, "a10", offline=True, workload=w, max_model_len=4096)
    miss = [x.message for x in p.problems if x.code == "target-not-met"]
    assert miss and "--max-model-len" not in miss[0].split("alternatives")[1]
    assert "a lower target:" in miss[0]


# --- spelling --- every alternative in the engine's own flag and value, as its serve line
# writes them: TGI's launcher takes fp8_e4m3fn (launcher/src/main.rs KVCacheDtype), SGLang's
# --kv-cache-dtype fp8_e4m3 (server_args.py choices), vLLM fp8, TensorRT-LLM's options file
# kv_cache_config.dtype fp8
@pytest.mark.parametrize(("model", "gpu", "engine", "knobs", "listed", "written"), [
    ("google/gemma-3-27b-it", "h100", "tgi", {"max_model_len": 32768},
     "1) --kv-cache-dtype fp8_e4m3fn; 2) --num-shard 2; ", "--kv-cache-dtype fp8_e4m3fn"),
    ("Qwen/Qwen2.5-7B-Instruct", "l4", "sglang", {},
     "2) --kv-cache-dtype fp8_e4m3; 3) --tp-size 2; ", "--kv-cache-dtype fp8_e4m3"),
    ("google/gemma-3-27b-it", "h100", "vllm", {},
     "2) --kv-cache-dtype fp8; 3) --tensor-parallel-size 2; ", "--kv-cache-dtype fp8"),
    ("google/gemma-3-27b-it", "h100", "trtllm", {"max_model_len": 65536},
     "1) kv_cache_config.dtype fp8; 2) --tp_size 2; ", "  dtype: fp8\n"),
])
def test_the_fp8_alternative_is_spelled_as_the_serve_line_writes_it(model, gpu, engine, knobs,
                                                                      listed, written):
    p = kvplan.plan(model, gpu, engine=engine, offline=True, **knobs)
    (steps,) = [x.message for x in p.problems if x.code == "next-steps"]
    assert listed in steps
    # taking the alternative: the serve line writes that same value
    taken = kvplan.plan(model, gpu, engine=engine, offline=True, **knobs, kv_cache_dtype="fp8")
    assert written in taken.command
