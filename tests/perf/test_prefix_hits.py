"""Prefix-cache hits in the plan: --prefix-hit-rate (issue 14: "a user-given shared-prefix length
or hit rate") and the prefill work cached prompt tokens save (TTFT).

vLLM serves a cached prefix in full blocks only (vllm/v1/core/kv_cache_utils.py
hash_block_tokens; block_pool.py) and always recomputes the last prompt token to sample from it
(vllm/v1/core/kv_cache_manager.py get_computed_blocks: max_cache_hit_length = prompt − 1)."""

from __future__ import annotations

from clirun import run
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import plan
from kvplan.planner.performance import lengths
from kvplan.specs import Workload

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_cached_tokens_are_whole_blocks_and_never_the_whole_prompt():
    """1,000 shared tokens at block 16 → 62 blocks = 992 cached; a hit rate of 0.75 on 4,000
    tokens → a 3,000-token prefix → 187 blocks = 2,992; a prompt cached entirely → 4,000 − 1."""
    assert lengths(Workload(avg_input_tokens=2000, shared_prefix_tokens=1000), block_size=16
                   ).cached_tokens == 992
    assert lengths(Workload(avg_input_tokens=4000, prefix_hit_rate=0.75), block_size=16
                   ).cached_tokens == 2992
    assert lengths(Workload(avg_input_tokens=4000, prefix_hit_rate=1.0), block_size=1
                   ).cached_tokens == 3999
    assert lengths(Workload(avg_input_tokens=4000, prefix_hit_rate=0.75), block_size=16,
                   prefix_caching=False).cached_tokens == 0


def test_hit_rate_plans_like_the_equivalent_shared_prefix():
    """0.75 × 4,000 = a 3,000-token shared prefix: the same concurrency and latency."""
    a = plan(LLAMA, "h100", workload=Workload(avg_input_tokens=4000, avg_output_tokens=200,
                                              prefix_hit_rate=0.75))
    b = plan(LLAMA, "h100", workload=Workload(avg_input_tokens=4000, avg_output_tokens=200,
                                              shared_prefix_tokens=3000))
    assert a.kv_cache.effective_max_concurrency_with_prefix == \
        b.kv_cache.effective_max_concurrency_with_prefix is not None
    assert a.performance.cached_tokens == b.performance.cached_tokens == 2992
    assert a.performance.ttft_ms == b.performance.ttft_ms


def test_prefix_caching_off_computes_every_prompt_token():
    p = plan(LLAMA, "h100", enable_prefix_caching=False,
             workload=Workload(avg_input_tokens=4000, avg_output_tokens=200, prefix_hit_rate=0.5))
    assert p.performance.cached_tokens == 0
    assert any(pr.code == "prefix-caching-off" for pr in p.problems)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(rate=st.floats(0.05, 1.0), inp=st.integers(256, 16384))
def test_cache_hits_never_slow_the_first_token_of_a_lone_request(rate, inp):
    w = dict(avg_input_tokens=inp, avg_output_tokens=128, target_concurrency=1)
    cold = plan(LLAMA, "h100", workload=Workload(**w))
    warm = plan(LLAMA, "h100", workload=Workload(prefix_hit_rate=rate, **w))
    assert warm.performance.ttft_ms <= cold.performance.ttft_ms
    assert warm.performance.cached_tokens < inp


def test_cli_prefix_flag_errors_exit_2(capsys):
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--prefix-hit-rate", "0.5")
    assert code == 2 and "--avg-input-tokens" in err and "Traceback" not in err
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--avg-input-tokens", "1000",
                       "--prefix-hit-rate", "0.5", "--shared-prefix-tokens", "100")
    assert code == 2 and "not both" in err
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--avg-input-tokens", "1000",
                       "--prefix-hit-rate", "1.5")
    assert code == 2 and "--prefix-hit-rate" in err


def test_a_hit_rate_under_one_token_is_refused(capsys):
    """0.001 × 100 tokens = 0.1 token: no prefix at all, so the flag could only be ignored."""
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--avg-input-tokens", "100",
                       "--prefix-hit-rate", "0.001")
    assert code == 2 and "less than one token" in err and "Traceback" not in err
