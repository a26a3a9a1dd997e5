"""SGLang's hierarchical (host) KV cache, --enable-hierarchical-cache (docs/features.md).

Source: sglang/srt/mem_cache/pool_host/base.py HostKVCache.__init__ (sgl-project/sglang@049f8e64):
host tokens = int(hicache_size × 10^9 // size_per_token) when --hicache-size > 0, else
int(device tokens × hicache_ratio) (default 2.0); then (size // page_size + 1) × page_size with
page_size 1. size_per_token of an MHA pool = kv heads per GPU × head_dim × 2 × layers × dtype B,
the same cell the device pool holds. Each TP rank pins its own pool."""

from __future__ import annotations

import json

import pytest
from clirun import run

from kvplan import plan
from kvplan.engines.sglang import hicache_tokens
from kvplan.errors import InvalidInputError

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"


def test_host_pool_tokens_by_ratio_and_by_size():
    """ratio 2.0 over 1,000 device tokens → 2,000 → page-aligned 2,001; 100 GB at 131,072 B per
    token → 100e9 // 131,072 = 762,939 → 762,940."""
    assert hicache_tokens(1_000, 131_072, 2.0, 0) == 2_001
    assert hicache_tokens(1_000, 131_072, 2.0, 100) == 762_940
    assert hicache_tokens(1_000, 131_072, 2.0, 100, page_size=64) == (762_939 // 64 + 1) * 64


def test_llama8b_default_ratio_hand_worked():
    """Llama-3.1-8B TP1: cell = 8 kv heads × 128 × 2 × 32 layers × 2 B = 131,072 B per token.
    The host pool mirrors the device pool twice over: 2 × tokens + 1 tokens of 131,072 B."""
    base = plan(LLAMA8, "h100", engine="sglang")
    p = plan(LLAMA8, "h100", engine="sglang", enable_hierarchical_cache=True)
    t = p.kv_cache.tokens
    assert p.kv_cache.bytes_per_token == 131_072
    o = p.offload
    assert o is not None and o.backend == "sglang-hicache"
    assert o.cpu_tokens == 2 * t + 1
    assert o.host_bytes_per_worker == o.host_bytes == (2 * t + 1) * 131_072
    assert o.effective_cached_tokens == t + 2 * t + 1
    assert p.kv_cache.max_concurrency == base.kv_cache.max_concurrency  # device pool unchanged
    assert p.command.endswith("--enable-hierarchical-cache")
    assert "--hicache-ratio" not in p.command  # not given: the engine default stays implicit
    assert any(pr.code == "hicache-host-memory" for pr in p.problems)


def test_llama70b_tp2_fixed_size_hand_worked():
    """Llama-3.1-70B TP2, --hicache-size 50: cell per rank = 4 kv heads × 128 × 2 × 80 layers
    × 2 B = 163,840 B; 50e9 // 163,840 = 305,175 → 305,176 tokens = 50,000,035,840 B per GPU,
    100,000,071,680 B for both ranks."""
    p = plan(LLAMA70, "h100", engine="sglang", tensor_parallel_size=2,
             enable_hierarchical_cache=True, hicache_size=50)
    o = p.offload
    assert p.kv_cache.bytes_per_token == 163_840
    assert o.cpu_tokens == 305_176
    assert o.host_bytes_per_worker == 50_000_035_840
    assert o.host_bytes == 100_000_071_680
    assert "--enable-hierarchical-cache --hicache-size 50" in p.command


def test_small_host_pool_and_forgotten_switch_are_warned():
    p = plan(LLAMA8, "h100", engine="sglang", enable_hierarchical_cache=True, hicache_ratio=0.5)
    assert any(pr.code == "hicache-smaller-than-device" for pr in p.problems)
    assert "--hicache-ratio 0.5" in p.command
    off = plan(LLAMA8, "h100", engine="sglang", hicache_ratio=3)
    assert off.offload is None
    assert any(pr.code == "hicache-off" and "--hicache-ratio" in pr.message for pr in off.problems)
    assert "--hicache-ratio 3" in off.command  # the user's flag stays in the launch line


def test_sliding_window_model_is_not_modelled_but_said():
    p = plan("openai/gpt-oss-20b", "h100", engine="sglang", enable_hierarchical_cache=True)
    assert p.offload is None
    assert any(pr.code == "hicache-hybrid-not-modelled" for pr in p.problems)


def test_other_engines_refuse_hicache_settings():
    for engine in ("vllm", "tgi", "trtllm"):
        with pytest.raises(InvalidInputError, match="sglang"):
            plan(LLAMA8, "h100", engine=engine, enable_hierarchical_cache=True)
    with pytest.raises(InvalidInputError, match="--hicache-ratio"):
        plan(LLAMA8, "h100", engine="sglang", hicache_ratio=-1)


def test_cli_bad_ratio_exits_2_and_json_plan_has_the_host_tier(capsys):
    code, _, err = run(capsys, "plan", LLAMA8, "--gpu", "h100", "--engine", "sglang",
                       "--hicache-ratio", "0")
    assert code == 2 and "--hicache-ratio" in err and "Traceback" not in err
    code, out, _ = run(capsys, "plan", LLAMA8, "--gpu", "h100", "--engine", "sglang",
                       "--enable-hierarchical-cache", "--json")
    assert code == 0
    assert json.loads(out)["offload"]["backend"] == "sglang-hicache"


def test_check_reads_the_hicache_flags(capsys, tmp_path):
    f = tmp_path / "sglang.sh"
    f.write_text(f"python -m sglang.launch_server --model-path {LLAMA8} --context-length 32768 "
                 "--enable-hierarchical-cache --hicache-ratio 3\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert row["status"] == "fits", row["problems"]
    o = row["plan"]["offload"]
    assert o["cpu_tokens"] == 3 * row["plan"]["kv_cache"]["tokens"] + 1
    assert not any(
        p["code"] in ("feature-not-modelled", "flags-not-modelled") for p in row["problems"]
    )
