"""--target-concurrency with a shared prefix: with prefix caching the engine holds the full blocks
of the prefix every request starts with once (vLLM shares cached full blocks between running
requests: vllm/v1/core/block_pool.py, ref-counted blocks), so N requests of L tokens need
s + N × (blocks(L) − s) blocks, not N × blocks(L). The budget fraction, max_num_seqs and the
target check size on that."""

from __future__ import annotations

import json
import math

from clirun import call

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = ["--gpu", "h100", "--max-model-len", "32768", "--target-concurrency", "400",
        "--avg-input-tokens", "9000", "--avg-output-tokens", "200"]
BLOCK = 16
PER_REQUEST = math.ceil(9200 / BLOCK)  # 575 blocks
SHARED = 8000 // BLOCK  # 500 full blocks of the prefix


def plan(*extra: str) -> tuple[int, dict]:
    code, out, err = call("plan", MODEL, *ARGS, *extra, "--offline", "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


def held(num_blocks: int, shared: int) -> int:
    """Requests the blocks hold, vLLM's null block (block 0) set aside."""
    return (num_blocks - 1 - shared) // (PER_REQUEST - shared)


def test_a_shared_prefix_is_held_once_for_the_target():
    code, p = plan("--shared-prefix-tokens", "8000")
    assert code == 0 and p["fits"], p["problems"]
    seqs = p["recommendations"]["max_num_seqs"]["value"]
    served = p["served"]["kv_cache"]["num_blocks"]
    assert seqs >= 400
    assert held(served, SHARED) >= seqs  # no preemption at the line's own KV cache
    assert "sharing a 8000-token prefix" in p["recommendations"]["max_num_seqs"]["reason"]
    assert f"--max-num-seqs {seqs} " in p["command"]
    # the performance figures run the target, which the KV cache now holds
    assert p["performance"]["concurrency"] == 400


def test_without_the_prefix_the_same_target_does_not_fit():
    code, p = plan()
    assert code == 1 and not p["fits"]
    seqs = p["recommendations"]["max_num_seqs"]["value"]
    blocks = (p["served"] or p)["kv_cache"]["num_blocks"]
    assert seqs == held(blocks, 0) < 400
    (miss,) = [x for x in p["problems"] if x["code"] == "target-not-met"]
    assert "sharing" not in miss["message"]


def test_prefix_caching_off_shares_nothing():
    code, p = plan("--shared-prefix-tokens", "8000", "--no-enable-prefix-caching")
    assert code == 1 and not p["fits"]
    assert p["recommendations"]["max_num_seqs"]["value"] < 400
