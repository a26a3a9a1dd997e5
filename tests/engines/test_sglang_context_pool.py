"""SGLang starts when its KV pool is shorter than the context length: the worker caps each
request at max_req_len = min(context_len − 1, pool − 1) and its prompt below max_req_input_len
= max_req_len − 5 (python/sglang/srt/managers/tp_worker.py, sglang 0.5.23 wheel:
get_worker_info logs "KV pool holds %d tokens, fewer than --context-length %d" and says "Not an
error"), for a default and a given --context-length alike. A warning, not a refusal; only a pool
that admits no prompt at all (fewer than 7 tokens: max_req_input_len ≤ 0) stops it."""

from __future__ import annotations

import json

from clirun import run

from kvplan import plan

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # context length 131,072 (config.json, llama3 RoPE)
# --max-total-tokens caps the pool below the ≈411K tokens an H100 holds (test_sglang_tgi.py):
# 100,000 tokens, so max_req_len = min(131,072 − 1, 100,000 − 1) = 99,999 and
# max_req_input_len = 99,999 − 5 = 99,994 (tp_worker.py, above)
POOL = 100_000


def _codes(p, severity):
    return {x.code for x in p.problems if x.severity == severity}


def test_default_context_longer_than_the_pool_is_a_warning_and_fits():
    p = plan(LLAMA, "h100", engine="sglang", max_total_tokens=POOL)
    assert p.fits
    assert p.kv_cache.tokens == POOL
    assert not _codes(p, "error")
    w = next(x for x in p.problems if x.code == "context-length-above-kv-pool")
    assert w.severity == "warning"
    assert "131,072-token context length" in w.message
    assert "99,999 tokens" in w.message and "below 99,994" in w.message
    assert "--context-length 100000 to make that limit explicit" in w.message
    # the recommendation keeps the deployment that starts and says what to pass; the serve
    # line is that deployment (what `kvplan check` of it plans again)
    rec = p.recommendations
    assert rec.max_model_len.value == 131072
    assert "pass --context-length 100000 to make that limit explicit" in rec.max_model_len.reason
    assert rec.gpu_memory_utilization.value == p.inputs["gpu_memory_utilization"].value
    assert "--context-length 131072" in p.command and "--max-total-tokens 100000" in p.command


def test_given_context_longer_than_the_pool_still_starts():
    """--context-length is model_config.context_len too: the same min(), the same warning (no
    assertion in tp_worker.py refuses it), worded for the value the user gave."""
    p = plan(LLAMA, "h100", engine="sglang", max_total_tokens=POOL, max_model_len=131072)
    assert p.fits and not _codes(p, "error")
    w = next(x for x in p.problems if x.code == "context-length-above-kv-pool")
    assert w.severity == "warning"
    assert w.message.startswith("--context-length 131,072 is longer than the KV pool's "
                                "100,000 tokens")
    assert "--context-length 100000 (or less)" in w.message
    # nothing holds a full request under the --max-total-tokens cap: the next steps are a
    # warning (the engine starts), the given length is kept and the reason says so
    steps = next(x for x in p.problems if x.code == "next-steps")
    assert steps.severity == "warning"
    assert p.recommendations.max_model_len.value == 131072
    assert "the engine starts" in p.recommendations.max_model_len.reason
    assert "--context-length 131072" in p.command


def test_a_pool_that_admits_no_prompt_does_not_start():
    """6 tokens: max_req_input_len = min(131,071, 5) − 5 = 0 ("Memory pool size is too small")."""
    p = plan(LLAMA, "h100", engine="sglang", max_total_tokens=6)
    assert not p.fits
    assert "kv-pool-too-small" in _codes(p, "error")
    assert plan(LLAMA, "h100", engine="sglang", max_total_tokens=7).fits


def test_check_reads_the_line_as_fitting(capsys, tmp_path):
    """`kvplan check` of the same line: status fits, exit 0, the warning in its problems."""
    f = tmp_path / "serve.sh"
    f.write_text(f"python -m sglang.launch_server --model-path {LLAMA} "
                 f"--max-total-tokens {POOL}\n")
    code, out, err = run(capsys, "check", str(f), "--gpu", "h100", "--offline", "--json")
    assert code == 0, err
    row = json.loads(out)["deployments"][0]
    assert row["status"] == "fits"
    assert row["plan"]["kv_cache"]["tokens"] == POOL
    assert [p["severity"] for p in row["problems"]
            if p["code"] == "context-length-above-kv-pool"] == ["warning"]


def test_compare_and_check_agree_when_the_pool_is_shorter_than_the_context(capsys, tmp_path):
    """Qwen2.5-7B (32,768 tokens) on one L4: SGLang's default pool is shorter than that; the
    compare column and the check of its default line both say it fits."""
    code, out, err = run(capsys, "compare", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "l4", "-tp",
                         "1", "--offline", "--json")
    assert code == 0, err
    col = next(p for p in json.loads(out)["plans"] if p["engine"]["name"] == "sglang")
    assert col["kv_cache"]["tokens"] < 32768
    f = tmp_path / "serve.sh"
    f.write_text("python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct\n")
    code, out, err = run(capsys, "check", str(f), "--gpu", "l4", "--offline", "--json")
    assert code == 0, err
    row = json.loads(out)["deployments"][0]
    assert col["fits"] is True and row["status"] == "fits"
    assert row["plan"]["kv_cache"]["tokens"] == col["kv_cache"]["tokens"]
