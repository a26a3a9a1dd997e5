"""`kvplan check` on disaggregated prefill/decode launch lines (deploy/pd_check.py): the P/D
settings are read and the pool is checked as `kvplan plan --disagg` plans one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import run

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"


def _check(capsys, tmp_path: Path, text: str, files: dict[str, str] | None = None
           ) -> tuple[int, dict]:
    for name, body in (files or {}).items():
        (tmp_path / name).write_text(body)
    path = tmp_path / "serve.sh"
    path.write_text(text + "\n")
    code, out, _err = run(capsys, "check", str(path), "--gpu", "h100-sxm-80gb", "--json")
    doc = json.loads(out)
    return code, doc["deployments"][0]


def _codes(row: dict) -> dict[str, str]:
    return {p["code"]: p["message"] for p in row["problems"]}


TRT = f"trtllm-serve {LLAMA} --tp_size 4 --max_seq_len 8192 --extra_llm_api_options opts.yaml"


def test_trtllm_cache_transceiver_buffers_come_out_of_the_kv_cache(capsys, tmp_path):
    """Llama-3.3-70B at TP 4: 80 layers × 2 (K, V) × 2 KV heads × 128 × 2 B = 81,920 B per token
    per GPU; max_tokens_in_buffer 8192 + 32 tokens a block = 8,224 tokens per buffer, × 3
    buffers (1 receive + 2 send; cacheTransBuffer.cpp) = 2,021,130,240 B = 1.88 GiB, taken
    before the KV fraction (0.9, TensorRT-LLM's free_gpu_memory_fraction default) applies."""
    code, plain = _check(capsys, tmp_path, TRT, {"opts.yaml": "max_batch_size: 64\n"})
    assert code == 0 and "pd-pool" not in _codes(plain)
    code, pdrow = _check(capsys, tmp_path, TRT, {"opts.yaml": (
        "max_batch_size: 64\ncache_transceiver_config:\n  backend: DEFAULT\n"
        "  max_tokens_in_buffer: 8192\n")})
    assert code == 0
    codes = _codes(pdrow)
    assert "pd-pool" in codes and "1.88 GiB" in codes["pd-buffers"]
    lost = plain["plan"]["memory"]["kv_cache_bytes"] - pdrow["plan"]["memory"]["kv_cache_bytes"]
    assert lost == pytest.approx(0.9 * 2_021_130_240, rel=0.01)


def test_sglang_decode_server_admission_reserve(capsys, tmp_path):
    """--disaggregation-mode decode: each request keeps 512 tokens in reserve
    (disaggregation/decode.py), so at --context-length 8192 a rank holds KV ÷ 8,704 requests."""
    code, row = _check(capsys, tmp_path, (
        "python -m sglang.launch_server --model-path " + LLAMA + " --tp-size 4 "
        "--context-length 8192 --disaggregation-mode decode --num-reserved-decode-tokens 1024"))
    assert code == 0
    msg = _codes(row)["pd-decode-admission"]
    tokens = row["plan"]["kv_cache"]["tokens"]
    assert f"{tokens // (8192 + 1024):,} requests of 8,192 tokens" in msg
    assert "1024 tokens" in msg and "decode pool" in _codes(row)["pd-pool"]


@pytest.mark.parametrize("config, role, warns", [
    ('{"kv_connector":"NixlConnector","kv_role":"kv_producer"}', "prefill pool", False),
    ('{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}', "decode pool", False),
    ('{"kv_connector":"P2pNcclConnector","kv_role":"kv_both"}', "prefill or decode", True),
])
def test_vllm_kv_transfer_config_role_and_connector(capsys, tmp_path, config, role, warns):
    code, row = _check(capsys, tmp_path, f"vllm serve {LLAMA} -tp 4 --max-model-len 8192 "
                       f"--kv-transfer-config '{config}'")
    assert code == 0
    codes = _codes(row)
    assert role in codes["pd-pool"]
    assert ("feature-not-modelled" in codes) is warns


def test_unreadable_kv_transfer_config_is_a_warning_not_a_traceback(capsys, tmp_path):
    code, row = _check(capsys, tmp_path, f"vllm serve {LLAMA} -tp 4 --max-model-len 8192 "
                       "--kv-transfer-config not-json")
    assert code == 0 and "pd-config-unread" in _codes(row)


def test_read_pd_flags_are_not_listed_as_unmodelled(capsys, tmp_path):
    code, row = _check(capsys, tmp_path, (
        "python -m sglang.launch_server --model-path " + LLAMA + " --tp-size 4 "
        "--context-length 8192 --disaggregation-mode prefill --port 8100"))
    assert code == 0
    kept = _codes(row).get("flags-not-modelled", "")
    assert "--disaggregation-mode" not in kept and "--port" in kept
    assert "pd-prefill-server" in _codes(row)


def test_an_empty_argument_beside_pd_flags_is_no_crash(capsys, tmp_path):
    """A stray empty word (`args: ["model", ""]` in a manifest) is kept as written."""
    code, row = _check(capsys, tmp_path, f"vllm serve {LLAMA} -tp 4 --max-model-len 8192 ''")
    assert code == 0 and row["plan"] is not None
