"""vLLM's scheduler config refuses max_num_seqs above max_num_batched_tokens (SchedulerConfig.
_verify_args, vllm/config/scheduler.py: "max_num_batched_tokens (…) must be greater than or equal
to max_num_seqs (…)"), so such a launch line does not start; a max_num_seqs left to its default
is lowered to the token budget instead (EngineArgs: max_num_seqs = min(default,
max_num_batched_tokens) when not given), which starts."""

from __future__ import annotations

import json

from clirun import call

MODEL = ["llama-3.1-8b-instruct", "--gpu", "h100", "--max-model-len", "8192"]


def test_a_given_max_num_seqs_above_the_default_token_budget_is_refused():
    # H100 (≥ 70 GiB, vllm serve): 8,192 tokens per step by default
    code, _, err = call("plan", *MODEL, "--max-num-seqs", "16384", "--offline")
    assert code == 2 and "Traceback" not in err
    assert "--max-num-seqs 16384 above max_num_batched_tokens 8192" in err
    assert "--max-num-batched-tokens 16384 or more" in err


def test_both_given_and_consistent_start():
    code, out, err = call("plan", *MODEL, "--max-num-seqs", "16384", "--max-num-batched-tokens",
                          "16384", "--offline", "--json")
    assert code == 0, err
    assert "--max-num-seqs 16384" in json.loads(out)["command"]


def test_a_small_token_budget_lowers_the_default_max_num_seqs():
    code, out, err = call("plan", *MODEL, "--max-num-batched-tokens", "100", "--offline",
                          "--json")
    assert code == 0, err
    p = json.loads(out)
    assert p["inputs"]["max_num_seqs"]["value"] == 100
    assert p["inputs"]["max_num_seqs"]["source"] == "engine-default"
