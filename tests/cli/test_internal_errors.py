"""Issue #22 items 12 and 14-17: inputs that ended as internal errors, or as plausible but
wrong answers. Each must end as exit 2 (or 3) naming the input and field; in `check` a bad
line is a finding of its own and the other files are still checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import run

DEEP_JSON = "[" * 3000 + "]" * 3000
DEEP_YAML = "a: " + "[" * 3000 + "]" * 3000 + "\n"
GOOD_LINE = "vllm serve meta-llama/Llama-3.1-8B --max-model-len 4096\n"


def clean(code: int, err: str) -> None:
    assert "internal error" not in err and "Traceback" not in err, err[:2000]
    assert code in (1, 2, 3), code


def check_json(capsys, *files: Path) -> tuple[int, dict, str]:
    code, out, err = run(capsys, "check", *map(str, files), "--gpu", "h100", "--json")
    clean(code, err)
    return code, json.loads(out), err


def by_file(report: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in report["deployments"]:
        name = Path(d["file"]).name
        out.setdefault(name, []).extend(p["message"] for p in d["problems"])
    return out


# ------------------------------------------- item 12: deep JSON in structured flags


@pytest.mark.parametrize("flag", ["--speculative-config", "--limit-mm-per-prompt"])
def test_deep_json_flag_on_the_command_line(capsys, flag):
    value = DEEP_JSON if flag == "--speculative-config" else '{"image": ' + DEEP_JSON + "}"
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "h100", flag, value)
    clean(code, err)
    assert code == 2 and flag in err and "levels deep" in err


@pytest.mark.parametrize("flag", ["--speculative-config", "--limit-mm-per-prompt"])
def test_deep_json_line_is_one_finding_in_check(capsys, tmp_path, flag):
    value = DEEP_JSON if flag == "--speculative-config" else '{"image": ' + DEEP_JSON + "}"
    bad = tmp_path / "bad.sh"
    bad.write_text(f"vllm serve meta-llama/Llama-3.1-8B {flag} '{value}'\n")
    good = tmp_path / "good.sh"
    good.write_text(GOOD_LINE)
    _, report, _ = check_json(capsys, bad, good)
    found = by_file(report)
    assert any(flag in m for m in found["bad.sh"]), found["bad.sh"]
    assert found["good.sh"] == []  # the other file was still checked
    assert [d["status"] for d in report["deployments"]
            if d["file"].endswith("good.sh")] == ["fits"]


# ---------------------------------- item 12: Dockerfile exec form with non-strings


@pytest.mark.parametrize("cmd", ['["sh", "-c", 5, "vllm"]', '["sh", "-c", ["vllm"], "vllm"]',
                                 '["vllm", "serve", {"a": 1}]',
                                 "[" * 3000 + '"vllm"' + "]" * 3000])
def test_dockerfile_exec_form_shapes(capsys, tmp_path, cmd):
    d = tmp_path / "img"
    d.mkdir()
    (d / "Dockerfile").write_text(f"FROM x\nCMD {cmd}\n")
    good = tmp_path / "good.sh"
    good.write_text(GOOD_LINE)
    _, report, _ = check_json(capsys, d / "Dockerfile", good)
    found = by_file(report)
    assert any("CMD" in m for m in found["Dockerfile"]), found
    assert found["good.sh"] == []


# ------------------------------------------------------ item 12: odd YAML keys / depth


def test_sequence_mapping_keys_in_deployment_yaml(capsys, tmp_path):
    (tmp_path / "seq.yaml").write_text("? [x]\n: 1\n")
    (tmp_path / "cfg.yaml").write_text("model: meta-llama/Llama-3.1-8B\nmax_model_len: 4096\n"
                                       "? [x]\n: 1\n")
    (tmp_path / "spec.yaml").write_text("model: meta-llama/Llama-3.1-8B\n"
                                        "speculative_config: {? [a] : 1}\n")
    (tmp_path / "good.sh").write_text(GOOD_LINE)
    _, report, _ = check_json(capsys, *(tmp_path / n for n in
                                        ("seq.yaml", "cfg.yaml", "spec.yaml", "good.sh")))
    found = by_file(report)
    assert any("not a flag name" in m for m in found["cfg.yaml"]), found
    assert any("JSON flag value" in m for m in found["spec.yaml"]), found
    assert found["good.sh"] == []


@pytest.mark.parametrize("text, needle", [(DEEP_YAML, "nested more than"),
                                          ("? [x]\n: 1\n", "unhashable key")])
def test_trtllm_options_file_depth_and_keys(capsys, tmp_path, text, needle):
    f = tmp_path / "opts.yaml"
    f.write_text(text)
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "trtllm",
                       "--extra-llm-api-options", str(f))
    clean(code, err)
    assert code == 2 and "opts.yaml:1" in err and needle in err, err


# ----------------------------------------------------------------- item 12: --prices


@pytest.mark.parametrize("name, text, needle", [
    ("p.yaml", "? [h100]\n: 2.0\n", "field 'id'"),
    ("p.yaml", "? {a: 1}\n: 2.0\n", "field 'id'"),
    ("p.yaml", "h100: " + "[" * 3000 + "]" * 3000 + "\n", "nested more than"),
    ("p.yaml", "h100: {? [a] : 1}\n", "usd_per_hour"),
    ("p.csv", 'id,usd_per_hour\n"' + "x" * 140_000 + '",1\n', "p.csv:2"),
])
def test_price_file_shapes(capsys, tmp_path, name, text, needle):
    f = tmp_path / name
    f.write_text(text)
    code, _, err = run(capsys, "sweep", "llama-3.1-8b", "--gpus", "h100", "--prices", str(f))
    clean(code, err)
    assert code == 2 and name in err and needle in err, err


# ------------------------------------------------ item 12: device totals under 1 MiB


@pytest.mark.parametrize("args", [("plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang",
                                   "--gpu-memory-gib", "0.0001"),
                                  ("compare", "llama-3.1-8b", "--gpu", "h100",
                                   "--gpu-memory-gib", "1e-9")])
def test_device_total_below_one_mib_is_refused(capsys, args):
    code, _, err = run(capsys, *args)
    clean(code, err)
    assert code == 2 and "--gpu-memory-gib" in err


# ----------------------------------------------------- item 12: the cache environment


@pytest.mark.parametrize("value, needle", [("/tmp/" + "a" * 300 + "/x", "255 bytes"),
                                           ("~nosuchuser-kvplan/x", "cannot expand")])
def test_cache_dir_variable_is_validated(capsys, monkeypatch, value, needle):
    monkeypatch.setenv("KVPLAN_CACHE_DIR", value)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run(capsys, "plan", "someorg/somemodel", "--gpu", "h100")
    clean(code, err)
    assert code == 2 and "KVPLAN_CACHE_DIR" in err and needle in err, err


# ----------------------------------- items 12 and 16: more experts per token than experts

MIXTRAL = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
           "vocab_size": 32000, "intermediate_size": 14336, "max_position_embeddings": 32768,
           "torch_dtype": "bfloat16", "num_local_experts": 2, "num_experts_per_tok": 8}


def model_dir(tmp_path: Path, cfg: dict) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi", "trtllm"])
def test_more_experts_per_token_than_experts(capsys, tmp_path, engine):
    d = model_dir(tmp_path, MIXTRAL)
    code, _, err = run(capsys, "plan", str(d), "--gpu", "l4", "--engine", engine)
    clean(code, err)
    assert code == 2 and "config.json" in err and "num_experts_per_tok" in err, err


# ------------------------------------------------- item 17: a RoPE factor names itself


def test_tiny_rope_factor_names_the_config_field(capsys, tmp_path):
    cfg = {k: v for k, v in MIXTRAL.items() if "expert" not in k}
    cfg.update(model_type="llama", architectures=["LlamaForCausalLM"],
               rope_scaling={"rope_type": "linear", "factor": 1e-9})
    d = model_dir(tmp_path, cfg)
    code, _, err = run(capsys, "plan", str(d), "--gpu", "h100")
    clean(code, err)
    assert code == 2 and "rope_scaling.factor" in err, err
    assert "--max-model-len" not in err and "--max-num-seqs" not in err


# ------------------------------- item 15: headers holding a small part of the config


def test_headers_with_a_fraction_of_the_parameters_are_an_error(capsys, tmp_path):
    import struct

    cfg = {k: v for k, v in MIXTRAL.items() if "expert" not in k}
    cfg.update(model_type="llama", architectures=["LlamaForCausalLM"])  # an 8B-class config
    d = model_dir(tmp_path, cfg)
    header = json.dumps({"model.layers.0.mlp.up_proj.weight": {
        "dtype": "BF16", "shape": [4096, 4096], "data_offsets": [0, 4096 * 4096 * 2]}}).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    code, out, err = run(capsys, "plan", str(d), "--gpu", "h100", "--json")
    clean(code, err)
    assert code == 2 and "incomplete" in err and "safetensors" in err, err
    assert json.loads(out)["error"]["code"] != "internal-error"


# ------------------------ item 14: plans that do not fit show no impossible values


def _negatives(x, path=""):
    if isinstance(x, dict):
        return [n for k, v in x.items() for n in _negatives(v, f"{path}.{k}")]
    if isinstance(x, list):
        return [n for i, v in enumerate(x) for n in _negatives(v, f"{path}[{i}]")]
    return [(path, x)] if isinstance(x, (int, float)) and not isinstance(x, bool) and x < 0 else []


NOT_FITTING = [("sglang", "l4", None), ("sglang", "h100", "0.5"), ("tgi", "l4", "12"),
               ("tgi", "h100", "0.5"), ("vllm", "h100", "12"), ("trtllm", "h100", "12")]


@pytest.mark.parametrize("engine, gpu, gib", NOT_FITTING)
def test_no_negative_or_zero_values_when_a_plan_does_not_fit(capsys, engine, gpu, gib):
    import re

    args = ["plan", "llama-3.1-8b", "--gpu", gpu, "--engine", engine]
    args += ["--gpu-memory-gib", gib] if gib else []
    code, out, err = run(capsys, *args, "--json")
    clean(code, err)
    data = json.loads(out)
    assert code == 1 and not data["fits"]
    assert _negatives({k: data[k] for k in ("inputs", "memory", "kv_cache")}) == []
    mem = data["memory"]
    assert mem["kv_cache_bytes"] == 0 and isinstance(mem["kv_shortfall_bytes"], int)
    assert mem["kv_shortfall_bytes"] > 0
    assert data["inputs"]["max_model_len"]["value"] != 0
    assert not any(re.search(r"(?<![\w-])-\d", p["message"]) for p in data["problems"]), \
        [p["message"] for p in data["problems"]]
    code, out, err = run(capsys, *args)
    clean(code, err)
    text = out + err
    assert not re.search(r"(?<![\w-])-\d", text), text  # no negative GiB, fraction or count
    assert "None" not in text and "=0 (" not in text
    assert "does not start" in text


# ------------- found by the structured fuzz campaign: a bare --limit-mm-per-prompt value


@pytest.mark.parametrize("value", ["0", "image", "4,video"])
def test_mm_limit_that_is_neither_json_nor_key_value_in_check(capsys, tmp_path, value):
    bad = tmp_path / "bad.sh"
    bad.write_text(f"vllm serve qwen2.5-0.5b --limit-mm-per-prompt {value}\n")
    good = tmp_path / "good.sh"
    good.write_text(GOOD_LINE)
    _, report, _ = check_json(capsys, bad, good)
    found = by_file(report)
    assert any("--limit-mm-per-prompt" in m for m in found["bad.sh"]), found
    assert found["good.sh"] == []
