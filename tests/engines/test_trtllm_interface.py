"""TensorRT-LLM through the engine interface: plan, compare, launch line, the LLM API options
file, and `kvplan check` on trtllm-serve lines."""

from __future__ import annotations

import json
import math

import pytest
from clirun import run

from kvplan import plan
from kvplan.engines import registry, trtllm
from kvplan.errors import InvalidInputError

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_trtllm_is_a_registry_engine_with_its_flags():
    e = registry.get("trtllm")
    assert e.label == "TensorRT-LLM"
    assert e.flags["gpu_memory_utilization"] == "--kv_cache_free_gpu_memory_fraction"
    assert e.flags["max_num_seqs"] == "--max_batch_size"


def test_pytorch_budget_is_fraction_of_total_minus_profiled_peak():
    """TRTLLM_MEMORY.md §2 (_torch/pyexecutor/_util.py KvCacheCreator): budget = 0.9 × (total −
    weights − activation peak − non-torch); tokens = budget // 131,072 B (Llama-3.1-8B bf16,
    TP1), in whole 32-token blocks, rounded down from 1.2 (resource_manager.py)."""
    p = plan(LLAMA, "h100", engine="trtllm")
    m = p.memory
    budget = math.floor(
        0.9 * (m.total_bytes - m.weights_bytes - m.activation_bytes - m.non_torch_bytes)
    )
    assert p.kv_cache.bytes_per_token == 131_072 and p.kv_cache.block_size == 32
    assert p.kv_cache.tokens == budget // 131_072 // 32 * 32
    assert p.inputs["gpu_memory_utilization"].value == 0.9
    assert p.command.startswith(f"trtllm-serve {LLAMA} --max_seq_len 131072")


def test_fraction_of_one_is_refused_as_trtllm_does():
    """Both runtimes assert free_gpu_memory_fraction < 1 (TRTLLM_MEMORY.md)."""
    with pytest.raises(InvalidInputError, match="below 1"):
        plan(LLAMA, "h100", engine="trtllm", gpu_memory_utilization=1.0)


def test_max_tokens_cap_and_fp8_kv_go_into_the_options_file():
    p = plan(LLAMA, "h100", engine="trtllm", kv_cache_dtype="fp8", max_total_tokens=200_000,
             max_model_len=32768)
    assert p.kv_cache.tokens == 200_000 // 32 * 32
    assert p.kv_cache.bytes_per_token == 65_536
    assert p.command.startswith("cat > extra_llm_api_options.yaml <<'EOF'\nkv_cache_config:\n")
    assert "  dtype: fp8\n" in p.command and "  max_tokens: 200000\n" in p.command
    assert p.command.endswith("--extra_llm_api_options extra_llm_api_options.yaml")


def test_compare_shows_four_engines(capsys):
    code, out, err = run(capsys, "compare", LLAMA, "--gpu", "h200", "--json")
    assert code == 0, err
    assert [p["engine"]["label"] for p in json.loads(out)["plans"]] == [
        "vLLM", "SGLang", "TGI", "TensorRT-LLM"]


def test_cli_reads_the_llm_api_options_file(capsys, tmp_path):
    f = tmp_path / "extra.yaml"
    f.write_text(
        "kv_cache_config:\n  free_gpu_memory_fraction: 0.5\n  dtype: fp8\nmax_batch_size: 64\n"
    )
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine", "trtllm",
                         "--extra-llm-api-options", str(f), "--json")
    assert code == 0, err
    p = json.loads(out)
    assert p["inputs"]["gpu_memory_utilization"] == {"value": 0.5, "source": "cli"}
    assert p["inputs"]["kv_cache_dtype"]["value"] == "fp8"
    assert p["inputs"]["max_num_seqs"]["value"] == 64
    f.write_text("kv_cache_config:\n  max_tokens: -3\n")
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine", "trtllm",
                         "--extra-llm-api-options", str(f))
    assert code == 2 and "kv_cache_config.max_tokens" in err and str(f) in err
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--extra-llm-api-options", str(f))
    assert code == 2 and "--engine trtllm" in err


def test_check_finds_trtllm_serve_and_its_options_file(capsys, tmp_path):
    (tmp_path / "opts.yaml").write_text("kv_cache_config:\n  free_gpu_memory_fraction: 0.6\n")
    script = tmp_path / "serve.sh"
    script.write_text(f"trtllm-serve {LLAMA} --tp_size 1 --max_seq_len 32768 "
                      "--extra_llm_api_options opts.yaml\n")
    code, out, err = run(capsys, "check", str(script), "--gpu", "h100", "--json")
    assert code == 0, out + err
    [row] = json.loads(out)["deployments"]
    assert row["engine"] == "trtllm"
    assert row["plan"]["inputs"]["gpu_memory_utilization"]["value"] == 0.6
    assert row["plan"]["inputs"]["max_model_len"]["value"] == 32768


def test_check_refuses_an_options_file_outside_the_deployment_directory(capsys, tmp_path):
    outside = tmp_path / "secret.yaml"
    outside.write_text("max_batch_size: 1\n")
    sub = tmp_path / "deploy"
    sub.mkdir()
    (sub / "serve.sh").write_text(f"trtllm-serve {LLAMA} --config ../secret.yaml\n")
    code, out, err = run(capsys, "check", str(sub / "serve.sh"), "--gpu", "h100", "--json")
    assert code == 2
    [row] = json.loads(out)["deployments"]
    assert "outside the deployment's directory" in json.dumps(row)


def test_image_tag_gives_the_version():
    [pattern] = trtllm.ENGINE.syntax.image_versions
    assert pattern.search("nvcr.io/nvidia/tensorrt-llm/release:1.0.0rc4").group(1) == "1.0.0"
