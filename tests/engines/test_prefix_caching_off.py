"""--no-enable-prefix-caching on every engine: each that has a switch writes its own (vLLM the
flag, SGLang --disable-radix-cache, TensorRT-LLM kv_cache_config.enable_block_reuse false) and
plans no prefix-cache hits; TGI, whose launcher has none, refuses it (until 2026-12-03 SGLang
and TGI dropped it silently and SGLang still planned cache hits)."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.deploy.commands import Templates, parse_args
from kvplan.errors import InvalidInputError
from kvplan.specs import Workload

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
SHARED = Workload(avg_input_tokens=4000, avg_output_tokens=200, prefix_hit_rate=0.8)


def test_sglang_writes_disable_radix_cache_and_plans_no_hits():
    off = kvplan.plan(LLAMA, "h100", engine="sglang", max_model_len=8192, workload=SHARED,
                      enable_prefix_caching=False)
    on = kvplan.plan(LLAMA, "h100", engine="sglang", max_model_len=8192, workload=SHARED)
    assert off.command.endswith(" --disable-radix-cache")
    assert "--disable-radix-cache" not in on.command
    assert (off.inputs["enable_prefix_caching"].value, off.inputs["enable_prefix_caching"].source
            ) == (False, "cli")
    assert off.performance.cached_tokens == 0
    assert on.performance.cached_tokens == int(0.8 * 4000)  # whole prefix, hit rate × input


def test_sglang_launch_line_reads_back():
    """kvplan check reads the flag (and its negation) as the knob it writes."""
    for flag, value in (("--disable-radix-cache", False), ("--no-disable-radix-cache", True)):
        f = parse_args(["--model-path", LLAMA, flag], "sglang", file="x.sh", line=1,
                       templates=Templates(values={}), text="")
        assert f.knobs["enable_prefix_caching"] is value and not f.unknown_flags


def test_tgi_refuses_it_and_names_the_engines_that_have_it():
    with pytest.raises(InvalidInputError) as e:
        kvplan.plan(LLAMA, "h100", engine="tgi", max_model_len=8192, enable_prefix_caching=False)
    assert e.value.message == "--no-enable-prefix-caching is not a setting TGI has"
    assert "--engine vllm / sglang / trtllm" in (e.value.hint or "")


def test_a_false_that_is_every_engines_default_is_still_taken():
    """--enforce-eager off is what TGI does anyway: accepted, as before."""
    p = kvplan.plan(LLAMA, "h100", engine="tgi", max_model_len=8192, enforce_eager=False)
    assert p.fits


@pytest.mark.parametrize("engine, written", [("vllm", "--no-enable-prefix-caching"),
                                             ("trtllm", "enable_block_reuse: false")])
def test_the_other_engines_write_their_own_switch(engine, written):
    p = kvplan.plan(LLAMA, "h100", engine=engine, max_model_len=8192, workload=SHARED,
                    enable_prefix_caching=False)
    assert written in p.command and p.performance.cached_tokens == 0
