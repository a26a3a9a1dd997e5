"""The command line: exit codes 0/1/2/3, valid JSON on stdout, clear errors, no tracebacks."""

import json
import subprocess
import sys

import pytest
from clirun import run

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_plan_fits_exit_0_and_table(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100-sxm-80gb")
    assert code == 0, err
    assert "FITS" in out and "vllm serve meta-llama/Llama-3.1-8B-Instruct" in out
    assert "Traceback" not in out + err


def test_plan_json_contract(capsys):
    code, out, _ = run(capsys, "plan", "llama-3.1-8b-instruct", "--gpu", "NVIDIA H100 80GB HBM3",
                       "--max-model-len", "32768", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["schema_version"] and data["fits"] is True
    assert data["model"]["id"] == LLAMA and data["gpu"]["id"] == "h100-sxm-80gb"
    for key in ("total_bytes", "budget_bytes", "weights_bytes", "activation_bytes",
                "non_torch_bytes", "cudagraph_bytes", "kv_cache_bytes"):
        assert isinstance(data["memory"][key], int)
    for key in ("bytes_per_token", "bytes_per_request", "block_size", "num_blocks", "tokens",
                "max_concurrency", "max_model_len_fit"):
        assert key in data["kv_cache"]
    assert data["kv_cache"]["bytes_per_token"] == 131072
    for key in ("max_model_len", "max_num_seqs", "gpu_memory_utilization", "tensor_parallel_size"):
        assert "reason" in data["recommendations"][key]
    assert data["inputs"]["max_model_len"] == {"value": 32768, "source": "cli"}
    assert data["engine"]["name"] == "vllm" and data["command"].startswith("vllm serve")


def test_plan_does_not_fit_exit_1_with_valid_json(capsys):
    code, out, err = run(
        capsys, "plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h100", "--json"
    )
    assert code == 1
    data = json.loads(out)
    assert data["fits"] is False and data["problems"]
    assert "error:" in err  # problems echoed to stderr, stdout stays pure JSON


@pytest.mark.parametrize("args,needle", [
    (["plan", "llama-3.1-8b-instruc", "--gpu", "h100"], "did you mean"),
    (["plan", LLAMA, "--gpu", "h1000"], "did you mean"),
    (["plan", LLAMA, "--gpu", "h100", "--gpu-memory-utilization", "1.5"], "(0, 1]"),
    (["plan", LLAMA, "--gpu", "h100", "-tp", "3"], "valid sizes: 1, 2, 4, 8"),
    (["plan", LLAMA, "--gpu", "h100", "--max-model-len", "200000"], "exceeds the model's maximum"),
    (["plan", LLAMA, "--gpu", "h100", "--kv-cache-dtype", "int3"], "--kv-cache-dtype"),
    (["plan", LLAMA, "--gpu", "h100", "--engine-version", "latest"], "--engine-version"),
    (["plan", LLAMA, "--gpu", "h100", "--target-concurrency", "0"], "--target-concurrency"),
    (["plan", LLAMA, "--gpu", "h100", "--max-input-tokens", "4096"], "--engine tgi"),
    (["plan", LLAMA, "--gpu", "h100", "--engine", "tgi", "--max-model-len", "4096",
      "--max-input-tokens", "4096"], "must be below --max-total-tokens"),
    (["plan", LLAMA], "--gpu"),
    (["models", "show", "nope-model"], "unknown model"),
    (["gpus", "show", "nope"], "unknown GPU"),
])
def test_bad_input_exit_2_without_traceback(capsys, args, needle):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert needle in err
    assert "Traceback" not in out + err


def test_tgi_max_input_tokens_reaches_the_plan_and_the_command(capsys):
    """TGI 2.x sizes its warm-up prefill from --max-input-tokens (+ 50); the launcher line keeps
    the value the user gave."""
    code, out, _ = run(
        capsys,
        "plan",
        LLAMA,
        "--gpu",
        "a10g",
        "--engine",
        "tgi",
        "--engine-version",
        "2.2.0",
        "--max-model-len",
        "8192",
        "--max-input-tokens",
        "2048",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["inputs"]["max_num_batched_tokens"]["value"] == 2048 + 50
    assert "--max-input-tokens 2048 --max-total-tokens 8192" in data["command"]


def test_malformed_config_names_file_and_line(capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama",\n "hidden_size": }')
    code, _, err = run(capsys, "plan", str(bad), "--gpu", "h100")
    assert code == 2 and str(bad) in err and "line 2" in err


def test_config_missing_field_is_named(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    code, _, err = run(capsys, "plan", str(tmp_path), "--gpu", "h100")
    assert code == 2 and "num_hidden_layers" in err and "config.json" in err


def test_local_directory_plans_and_command_uses_path(capsys, tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
           "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 1000,
           "intermediate_size": 512, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, out, _ = run(capsys, "plan", str(tmp_path), "--gpu", "l4", "--json")
    data = json.loads(out)
    assert code == 0 and data["model"]["parameters"] > 0
    assert str(tmp_path) in data["command"]
    assert any(p["code"] == "gpu-total-estimated" for p in data["problems"])


def test_uncached_hub_repo_while_offline_exits_3(capsys):
    """conftest sets HF_HUB_OFFLINE=1 and an empty HF_HOME: nothing is cached."""
    code, out, err = run(capsys, "plan", "some-org/some-model", "--gpu", "h100")
    assert code == 3 and out == ""
    assert "not cached and offline mode is on" in err and "run the same command once online" in err


def test_internal_error_has_no_traceback_unless_debug(capsys, monkeypatch):
    from kvplan.sources import catalog

    def boom(_ref, **_kw):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(catalog, "resolve_model", boom)
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100")
    assert code == 2 and "internal error" in err and "Traceback" not in err
    monkeypatch.setenv("KVPLAN_DEBUG", "1")
    with pytest.raises(RuntimeError):
        run(capsys, "plan", LLAMA, "--gpu", "h100")


def test_schema_is_valid_json_schema(capsys):
    code, out, _ = run(capsys, "schema")
    schema = json.loads(out)
    assert code == 0 and "schema_version" in schema["properties"]


def test_models_and_gpus_listing(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "models", "qwen3", "--json")
    rows = json.loads(out)
    # The filter ignores case, '-' and '_' (so DeepSeek-R1-Distill-Qwen-32B matches too).
    assert code == 0 and rows and all("qwen3" in r["id"].lower().replace("-", "").replace("_", "")
                                      for r in rows)
    code, out, _ = run(capsys, "models", "show", "llama-3.1-8b-instruct", "--json")
    assert code == 0 and json.loads(out)["entry"]["id"] == LLAMA
    code, out, _ = run(capsys, "gpus", "h200", "--json")
    assert code == 0 and {g["id"] for g in json.loads(out)} >= {"h200-sxm-141gb"}
    code, out, _ = run(capsys, "gpus", "show", "NVIDIA H200", "--json")
    assert code == 0 and json.loads(out)["cuda_total_bytes"] == 150_109_880_320
    code, out, _ = run(capsys, "models")
    assert code == 0 and "Mixtral-8x7B-Instruct-v0.1" in out


def test_python_dash_m_entry_point():
    r = subprocess.run([sys.executable, "-m", "kvplan", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "plan" in r.stdout


def test_the_knob_table_bounds_the_workload_as_the_workload_model_does():
    """specs.Workload still declares its own Field bounds; the CLI's range errors read
    knobs.OPTIONS. The two must agree on every workload field (0 rejected, the top accepted)."""
    import pytest
    from pydantic import ValidationError

    from kvplan.knobs import OPTIONS
    from kvplan.sources.limits import knob_error
    from kvplan.specs import Workload

    for name in Workload.model_fields:
        lo, lo_open, hi = OPTIONS[name].bounds()
        # a hit rate is a fraction of the prompt: it needs a prompt length
        base = {"avg_input_tokens": 1000} if name == "prefix_hit_rate" else {}
        if name == "burstiness":  # shapes the arrivals of a rate: it needs one
            base = {"request_rate": 1.0}
        Workload(**base, **{name: hi})  # the table's top is valid
        assert knob_error(name, hi) is None
        over = hi * 2
        with pytest.raises(ValidationError):
            Workload(**base, **{name: over})
        assert knob_error(name, over) is not None
        if lo_open:
            with pytest.raises(ValidationError):
                Workload(**base, **{name: lo})
            assert knob_error(name, lo) is not None
