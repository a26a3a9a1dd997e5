"""Hub and local-checkpoint sources, end to end through the real huggingface_hub client.

A FakeHub on 127.0.0.1 stands in for huggingface.co (HF_ENDPOINT points at it); local
checkpoints are header-only safetensors files written here. No test touches the network.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
from clirun import run
from fakehub import FakeHub, FakeRepo, safetensors_header_only

from kvplan.sources.catalog import data_dir

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _llama_cfg() -> dict:
    index = json.loads((data_dir("model_specs") / "index.json").read_text())
    entry = next(e for e in index["models"] if e["id"] == LLAMA)
    return json.loads((data_dir("model_specs") / entry["config"]).read_text())


def _linears(cfg: dict):
    """(name, out_features, in_features) of every linear layer, in HF Llama naming."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    hd = h // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield from ((p + "self_attn.q_proj", h, h), (p + "self_attn.k_proj", kv, h),
                    (p + "self_attn.v_proj", kv, h), (p + "self_attn.o_proj", h, h),
                    (p + "mlp.gate_proj", inter, h), (p + "mlp.up_proj", inter, h),
                    (p + "mlp.down_proj", h, inter))


def _others(cfg: dict, dtype: str) -> dict:
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    t = {"model.embed_tokens.weight": (dtype, [v, h]), "lm_head.weight": (dtype, [v, h]),
         "model.norm.weight": (dtype, [h])}
    for i in range(cfg["num_hidden_layers"]):
        t[f"model.layers.{i}.input_layernorm.weight"] = (dtype, [h])
        t[f"model.layers.{i}.post_attention_layernorm.weight"] = (dtype, [h])
    return t


def dense_tensors(cfg: dict) -> dict:
    t = _others(cfg, "BF16")
    t.update({name + ".weight": ("BF16", [out, inp]) for name, out, inp in _linears(cfg)})
    return t


def ungated_tensors(cfg: dict) -> dict:
    """The dense Llama checkpoint with a non-gated MLP (fc1 → act → fc2, no gate_proj), as
    GPT-style families store it: 32 × 14,336 × 4,096 fewer weights than the gated layout."""
    return {name.replace("up_proj", "fc1").replace("down_proj", "fc2"): v
            for name, v in dense_tensors(cfg).items() if "gate_proj" not in name}


def awq_tensors(cfg: dict) -> dict:
    """AutoAWQ GEMM layout as vLLM's AWQLinearMethod.create_weights declares it
    (vllm/model_executor/layers/quantization/awq.py): qweight int32 [in, out/8],
    qzeros int32 [in/128, out/8], scales fp16 [in/128, out]."""
    t = _others(cfg, "F16")
    for name, out, inp in _linears(cfg):
        t[name + ".qweight"] = ("I32", [inp, out // 8])
        t[name + ".qzeros"] = ("I32", [inp // 128, out // 8])
        t[name + ".scales"] = ("F16", [inp // 128, out])
    return t


AWQ_QC = {
    "bits": 4,
    "group_size": 128,
    "quant_method": "awq",
    "version": "gemm",
    "zero_point": True,
}


FBGEMM_QC = {
    "quant_method": "fbgemm_fp8",
    "activation_scale_ub": 1200.0,
    "modules_to_not_convert": ["lm_head"],
}
# A format kvplan does not size from the config (AMD Quark); its per-channel FP8 export stores
# the same tensors as fbgemm_fp8: an fp8 weight and an fp32 scale per output row.
QUARK_QC = {"quant_method": "quark"}


def fbgemm_tensors(cfg: dict) -> dict:
    """fbgemm_fp8 checkpoints: fp8 weight and an fp32 scale per output row for each linear."""
    t = _others(cfg, "BF16")
    for name, out, inp in _linears(cfg):
        t[name + ".weight"] = ("F8_E4M3", [out, inp])
        t[name + ".weight_scale"] = ("F32", [out, 1])
    return t


def sharded(tensors: dict, shards: int) -> dict[str, bytes]:
    """model-0000k-of-0000n.safetensors files plus their index, as the Hub stores them."""
    names = list(tensors)
    files, weight_map = {}, {}
    for k in range(shards):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k::shards]}
        files[fname] = safetensors_header_only(part)
        weight_map.update(dict.fromkeys(part, fname))
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {}, "weight_map": weight_map}
    ).encode()
    return files


@pytest.fixture
def hub(monkeypatch):
    import huggingface_hub.constants

    cfg = _llama_cfg()
    awq_cfg = {**cfg, "torch_dtype": "float16", "quantization_config": AWQ_QC}
    fake = FakeHub(
        repos={
            "acme/llama-dense": FakeRepo(
                {
                    "main": {
                        "config.json": json.dumps(cfg).encode(),
                        **sharded(dense_tensors(cfg), 4),
                    }
                }
            ),
            "acme/llama-awq": FakeRepo(
                {
                    "main": {
                        "config.json": json.dumps(awq_cfg).encode(),
                        **sharded(awq_tensors(cfg), 2),
                    }
                }
            ),
            "acme/llama-fbgemm": FakeRepo(
                {
                    "main": {
                        "config.json": json.dumps(
                            {**cfg, "quantization_config": FBGEMM_QC}
                        ).encode(),
                        **sharded(fbgemm_tensors(cfg), 2),
                    }
                }
            ),
            "acme/llama-quark": FakeRepo(
                {
                    "main": {
                        "config.json": json.dumps(
                            {**cfg, "quantization_config": QUARK_QC}
                        ).encode(),
                        **sharded(fbgemm_tensors(cfg), 2),
                    }
                }
            ),
            "acme/gated-llama": FakeRepo(
                {"main": {"config.json": json.dumps(cfg).encode()}}, gated=True
            ),
            "acme/no-weights": FakeRepo(
                {
                    "main": {"config.json": json.dumps(cfg).encode()},
                    "v1.0": {"config.json": json.dumps(cfg).encode()},
                }
            ),
            "acme/corrupt": FakeRepo(
                {
                    "main": {
                        "config.json": json.dumps(cfg).encode(),
                        "model.safetensors": b"\xff" * 8 + b"{not json",
                    }
                }
            ),
            "acme/remote-code": FakeRepo(
                {
                    "main": {
                        "config.json": json.dumps(
                            {
                                **cfg,
                                "model_type": "acme_lm",
                                "auto_map": {"AutoConfig": "cfg.AcmeConfig"},
                            }
                        ).encode()
                    }
                }
            ),
            "acme/no-config": FakeRepo({"main": {"README.md": b"# GGUF only"}}),
            "acme/mystery-lm": FakeRepo(
                {
                    "main": {
                        "config.json": json.dumps({**cfg, "model_type": "mystery_lm"}).encode(),
                        **sharded(ungated_tensors(cfg), 2),
                    }
                }
            ),
        }
    )
    endpoint = fake.start()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    # huggingface_hub reads HF_HUB_OFFLINE once at import; this process imported it offline.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    yield fake
    fake.stop()


def plan_json(capsys, *args):
    code, out, err = run(capsys, "plan", *args, "--json")
    assert code in (0, 1), err
    return json.loads(out), err


# ------------------------------------------------------------------------- Hub


def test_dense_repo_plans_exactly_like_the_catalogue_copy(hub, capsys):
    from_hub, err = plan_json(capsys, "acme/llama-dense", "--gpu", "h100")
    from_catalogue, _ = plan_json(capsys, LLAMA, "--gpu", "h100")
    assert from_hub["memory"] == from_catalogue["memory"]
    assert from_hub["kv_cache"] == from_catalogue["kv_cache"]
    assert from_hub["model"]["weights_from"] == "config"
    assert any(p["code"] == "headers-agree" for p in from_hub["problems"])
    assert from_hub["model"]["source"].startswith("Hugging Face Hub acme/llama-dense@")
    assert from_hub["command"].startswith("vllm serve acme/llama-dense ")
    assert "reading config and safetensors headers" in err


def test_second_plan_of_a_repo_does_no_network_work(hub, capsys):
    plan_json(capsys, "acme/llama-dense", "--gpu", "h100")
    assert hub.requests
    before = len(hub.requests)
    again, err = plan_json(capsys, "acme/llama-dense", "--gpu", "h100")
    assert len(hub.requests) == before
    assert again["model"]["source"].endswith("(kvplan cache)") and "reading" not in err
    plan_json(capsys, "acme/llama-dense", "--gpu", "h100", "--refresh")
    assert len(hub.requests) > before


def test_awq_bytes_from_config_agree_with_the_headers(hub, capsys):
    """Hand-worked from the AWQ layout (awq.py shapes): per linear of N = in×out weights,
    N/2 B packed int4 + N/256 B int32 zeros + N/64 B fp16 scales; fp16 embeddings, head and
    norms; plus the RoPE cache 131072 × 128 × 2 B (rope_cache_bytes, ENGINE_MEMORY §1.8)."""
    cfg = _llama_cfg()
    n = sum(out * inp for _, out, inp in _linears(cfg))
    h, v, layers = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    expected = (n // 2 + n // 256 + n // 64 + 2 * (2 * v * h) + 2 * h * (2 * layers + 1)
                + 131072 * 128 * 2)
    assert expected == 5_761_409_024  # 5.37 GiB, vs 14.99 GiB for the bf16 checkpoint
    data, _ = plan_json(capsys, "acme/llama-awq", "--gpu", "l4")
    assert data["memory"]["weights_tensor_bytes"] == expected
    assert data["model"]["weights_from"] == "config"
    assert data["model"]["quantization"] == "awq"
    assert any(p["code"] == "headers-agree" for p in data["problems"])


def test_unmodelled_quantization_takes_its_bytes_from_the_headers(hub, capsys):
    """Quark (a vLLM format kvplan does not size from config), per-channel FP8: fp8 weights
    [out, in] and fp32 per-row scales [out, 1] per linear, bf16 embeddings/head/norms, plus the
    RoPE cache."""
    cfg = _llama_cfg()
    rows = sum(out for _, out, _ in _linears(cfg))
    n = sum(out * inp for _, out, inp in _linears(cfg))
    h, v, layers = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    expected = n + 4 * rows + 2 * (2 * v * h) + 2 * h * (2 * layers + 1) + 131072 * 128 * 2
    data, _ = plan_json(capsys, "acme/llama-quark", "--gpu", "l4")
    assert data["memory"]["weights_tensor_bytes"] == expected
    assert data["model"]["weights_from"] == "headers"
    assert any(p["code"] == "weights-from-headers" for p in data["problems"])
    assert not any(p["code"] == "unmodelled-quantization" for p in data["problems"])


def test_fbgemm_fp8_bytes_from_config_agree_with_the_headers(hub, capsys):
    """fbgemm_fp8 is sized from the config (quantization/fbgemm_fp8.py): the same fp8 weights
    and fp32 per-row scales as its headers, plus the fp32 input_scale_ub scalar vLLM creates
    for each of the 4 fused linears (qkv, o, gate_up, down) of the 32 layers, which the
    checkpoint does not store: 4 B × 4 × 32 = 512 B more than the headers."""
    cfg = _llama_cfg()
    rows = sum(out for _, out, _ in _linears(cfg))
    n = sum(out * inp for _, out, inp in _linears(cfg))
    h, v, layers = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    headers = n + 4 * rows + 2 * (2 * v * h) + 2 * h * (2 * layers + 1) + 131072 * 128 * 2
    data, _ = plan_json(capsys, "acme/llama-fbgemm", "--gpu", "l4")
    assert data["memory"]["weights_tensor_bytes"] == headers + 4 * 4 * layers
    assert data["model"]["weights_from"] == "config"
    assert any(p["code"] == "headers-agree" for p in data["problems"])


def test_awq_at_tp2_splits_every_linear(hub, capsys):
    one, _ = plan_json(capsys, "acme/llama-awq", "--gpu", "l4")
    two, _ = plan_json(capsys, "acme/llama-awq", "--gpu", "l4", "-tp", "2")
    rope = 131072 * 128 * 2
    # Everything but the replicated norms (2 B × 4096 × 65) and the RoPE cache halves.
    norms = 2 * 4096 * 65
    assert (two["memory"]["weights_tensor_bytes"] - rope - norms
            == (one["memory"]["weights_tensor_bytes"] - rope - norms) // 2)


def test_gated_repo_without_token_says_how_to_get_access(hub, capsys):
    code, out, err = run(capsys, "plan", "acme/gated-llama", "--gpu", "h100")
    assert code == 3 and out == ""
    assert "gated" in err and "HF_TOKEN" in err and "--token" in err
    code, _, err = run(capsys, "plan", "acme/gated-llama", "--gpu", "h100", "--token", "hf_wrong")
    assert code == 3 and "not been granted access" in err
    code, out, _ = run(
        capsys, "plan", "acme/gated-llama", "--gpu", "h100", "--token", hub.token, "--json"
    )
    assert code == 0 and json.loads(out)["model"]["id"] == "acme/gated-llama"


def test_gated_repo_token_from_environment(hub, capsys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", hub.token)
    code, _, err = run(capsys, "plan", "acme/gated-llama", "--gpu", "h100")
    assert code == 0, err


def test_missing_revision_is_bad_input(hub, capsys):
    code, _, err = run(capsys, "plan", "acme/no-weights", "--gpu", "h100", "--revision", "v9")
    assert code == 2 and "revision 'v9' not found in acme/no-weights" in err and "--revision" in err


def test_existing_revision_goes_into_the_serve_command(hub, capsys):
    data, _ = plan_json(capsys, "acme/no-weights", "--gpu", "h100", "--revision", "v1.0")
    assert "--revision v1.0" in data["command"]
    assert data["model"]["weights_from"] == "config"
    assert not any(p["code"] == "headers-agree" for p in data["problems"])


def test_missing_repo_suggests_catalogue_models(hub, capsys):
    code, _, err = run(capsys, "plan", "meta-llama/Llama-3.1-8B-Instruc", "--gpu", "h100")
    assert (
        code == 2
        and "not found" in err
        and "did you mean 'meta-llama/Llama-3.1-8B-Instruct'" in err
    )
    code, _, err = run(capsys, "plan", "nobody/nothing-like-it", "--gpu", "h100")
    assert code == 2 and "HF_TOKEN" in err


def test_repo_without_config_json(hub, capsys):
    code, _, err = run(capsys, "plan", "acme/no-config", "--gpu", "h100")
    assert code == 2 and "no config.json" in err


def test_corrupt_safetensors_header_names_the_repo(hub, capsys):
    code, _, err = run(capsys, "plan", "acme/corrupt", "--gpu", "h100")
    assert code == 2 and "corrupt safetensors header" in err and "acme/corrupt" in err
    assert "Traceback" not in err


def test_remote_code_model_is_read_not_run(hub, capsys):
    data, _ = plan_json(capsys, "acme/remote-code", "--gpu", "h100")
    codes = {p["code"] for p in data["problems"]}
    assert "remote-code-not-run" in codes and "layout-assumed" in codes
    assumed = next(p for p in data["problems"] if p["code"] == "layout-assumed")
    assert "gated MLP" in assumed["message"] and "safetensors" in assumed["message"]


def test_unknown_family_takes_its_weights_from_the_headers_not_a_gated_guess(hub, capsys):
    """Issue 14: never silently assume a gated MLP. acme/mystery-lm is Llama-3.1-8B's geometry
    under a model_type kvplan does not know, stored with a non-gated MLP: its headers hold
    32 layers × 14,336 × 4,096 = 1,879,048,192 fewer weights (3,758,096,384 bf16 bytes) than the
    gated layout the config alone would suggest."""
    dense, _ = plan_json(capsys, "acme/llama-dense", "--gpu", "h100")
    mystery, _ = plan_json(capsys, "acme/mystery-lm", "--gpu", "h100")
    assert mystery["model"]["weights_from"] == "headers"
    assert mystery["model"]["parameters"] == dense["model"]["parameters"] - 1_879_048_192
    gap = dense["memory"]["weights_tensor_bytes"] - mystery["memory"]["weights_tensor_bytes"]
    assert gap == 3_758_096_384
    codes = {p["code"]: p["message"] for p in mystery["problems"]}
    assert "weights come from the safetensors headers" in codes["layout-assumed"]
    assert (
        "KV cache assumes full attention on all 32 layers with 8 KV heads × 128"
        in codes["layout-assumed"]
    )


def test_offline_uses_the_cache_and_never_the_network(hub, capsys, monkeypatch):
    online, _ = plan_json(capsys, "acme/llama-awq", "--gpu", "l4")
    hub.stop()  # nothing answers any more
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline, _ = plan_json(capsys, "acme/llama-awq", "--gpu", "l4")
    assert offline["memory"] == online["memory"]
    hub.start()  # so the fixture can stop it


def test_offline_falls_back_to_huggingface_hub_cache(hub, capsys, monkeypatch, tmp_path):
    plan_json(capsys, "acme/no-weights", "--gpu", "h100")  # puts config.json in the HF cache
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "fresh-kvplan-cache"))
    before = len(hub.requests)
    data, _ = plan_json(capsys, "acme/no-weights", "--gpu", "h100", "--offline")
    assert len(hub.requests) == before and data["model"]["parameters"] == 8_030_261_248


def test_offline_without_cache_exits_3(hub, capsys):
    code, _, err = run(capsys, "plan", "acme/llama-dense", "--gpu", "h100", "--offline")
    assert code == 3 and "not cached" in err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_network_down_exits_3_with_a_next_step(hub, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    code, _, err = run(capsys, "plan", "acme/llama-dense", "--gpu", "h100")
    assert code == 3 and "could not reach" in err and "--offline" in err


def test_slow_hub_times_out_within_the_bound(hub, capsys, monkeypatch):
    import time

    hub.delay_s = 3.0
    monkeypatch.setenv("KVPLAN_HUB_TIMEOUT", "0.5")
    t0 = time.monotonic()
    code, _, err = run(capsys, "plan", "acme/llama-dense", "--gpu", "h100")
    assert code == 3 and "within 0.5 s" in err
    assert time.monotonic() - t0 < 3.0
    hub.delay_s = 0.0


def test_bad_timeout_setting(hub, capsys, monkeypatch):
    monkeypatch.setenv("KVPLAN_HUB_TIMEOUT", "soon")
    code, _, err = run(capsys, "plan", "acme/llama-dense", "--gpu", "h100")
    assert code == 2 and "KVPLAN_HUB_TIMEOUT" in err


def test_catalogue_model_never_touches_the_hub(hub, capsys):
    plan_json(capsys, LLAMA, "--gpu", "h100")
    assert hub.requests == []


# --------------------------------------------------------------- local checkpoints


def _write_dir(tmp_path, cfg, tensors, shards=1):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    if shards == 1:
        (d / "model.safetensors").write_bytes(safetensors_header_only(tensors))
    else:
        for name, blob in sharded(tensors, shards).items():
            (d / name).write_bytes(blob)
    return d


def test_local_awq_directory_reads_the_headers(capsys, tmp_path):
    cfg = {**_llama_cfg(), "torch_dtype": "float16", "quantization_config": AWQ_QC}
    d = _write_dir(tmp_path, cfg, awq_tensors(cfg), shards=3)
    data, _ = plan_json(capsys, str(d), "--gpu", "l4")
    assert (
        data["memory"]["weights_tensor_bytes"] == 5_761_409_024
    )  # same hand-worked value as above
    assert any(p["code"] == "headers-agree" for p in data["problems"])
    assert data["command"].startswith(f"vllm serve {d} ")


def test_local_config_alone_warns_that_quantized_bytes_are_unknown(capsys, tmp_path):
    cfg = {**_llama_cfg(), "quantization_config": QUARK_QC}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    data, _ = plan_json(capsys, str(tmp_path / "config.json"), "--gpu", "l4")
    warning = next(p for p in data["problems"] if p["code"] == "unmodelled-quantization")
    assert "safetensors headers" in warning["message"]


def test_local_headers_that_disagree_with_the_config_win(capsys, tmp_path):
    cfg = _llama_cfg()
    tensors = dense_tensors(cfg)
    tensors["vision_tower.proj.weight"] = ("BF16", [4096, 50_000])  # 0.2 B params the config lacks
    d = _write_dir(tmp_path, cfg, tensors)
    data, _ = plan_json(capsys, str(d), "--gpu", "h100")
    warn = next(p for p in data["problems"] if p["code"] == "config-disagrees-with-headers")
    assert "2.6%" in warn["message"] and data["model"]["weights_from"] == "headers"
    baseline, _ = plan_json(capsys, LLAMA, "--gpu", "h100")
    extra = data["memory"]["weights_tensor_bytes"] - baseline["memory"]["weights_tensor_bytes"]
    assert extra == 4096 * 50_000 * 2


def test_local_corrupt_header_is_named(capsys, tmp_path):
    d = _write_dir(tmp_path, _llama_cfg(), {"a": ("BF16", [2, 2])})
    (d / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": [1, 2]}   ")
    code, _, err = run(capsys, "plan", str(d), "--gpu", "h100")
    assert code == 2 and "model.safetensors" in err and "unreadable dtype/shape" in err


def test_local_index_with_missing_shard(capsys, tmp_path):
    d = _write_dir(tmp_path, _llama_cfg(), dense_tensors(_llama_cfg()), shards=2)
    (d / "model-00002-of-00002.safetensors").unlink()
    code, _, err = run(capsys, "plan", str(d), "--gpu", "h100")
    assert code == 2 and "model-00002-of-00002.safetensors" in err and "config.json alone" in err


def test_endpoint_credentials_are_never_echoed_or_cached(hub, capsys, monkeypatch, tmp_path):
    endpoint = os.environ["HF_ENDPOINT"]
    monkeypatch.setenv("HF_ENDPOINT", endpoint.replace("://", "://kvuser:s3cretpass@"))
    code, out, err = run(capsys, "plan", "acme/llama-dense", "--gpu", "h100", "--json")
    assert code in (0, 1) and "reading config" in err
    assert "s3cretpass" not in out + err and "***@127.0.0.1" in err
    cached = "".join(p.read_text() for p in (tmp_path / "kvplan-cache").rglob("*.json"))
    assert cached and "s3cretpass" not in cached


@pytest.mark.parametrize("entry", ['"BF16"', "7", "null", "[0, 0]",
                                   '{"dtype": "BF16", "shape": 4}'])
def test_a_hub_header_entry_that_is_not_a_tensor_is_a_corrupt_header(capsys, monkeypatch, entry):
    """huggingface_hub's parser indexes every header entry as {dtype, shape}: a string, number,
    list or an unlistable shape raised TypeError inside it, an internal error (found by the fuzz
    campaign's hostile Hub, tests/cli/test_fuzz.py)."""
    import struct

    import huggingface_hub.constants

    blob = ('{"model.norm.weight": ' + entry + "}").encode()
    fake = FakeHub(repos={"acme/odd": FakeRepo({"main": {
        "config.json": json.dumps(_llama_cfg()).encode(),
        "model.safetensors": struct.pack("<Q", len(blob)) + blob}})})
    monkeypatch.setenv("HF_ENDPOINT", fake.start())
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    try:
        code, out, err = run(capsys, "plan", "acme/odd", "--gpu", "h100")
    finally:
        fake.stop()
    assert code == 2 and "internal error" not in err, err
    assert "acme/odd" in err and "corrupt safetensors header" in err, err


def test_a_catalogue_id_with_a_revision_offline_is_not_cached_not_unknown(capsys):
    """Offline, `--revision` on a catalogue id said "unknown model 'X' … did you mean 'X'?"
    (exit 2): the repo is known, that revision is just not cached (found by the fuzz campaign)."""
    code, _, err = run(capsys, "plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                       "--revision", "8")
    assert code == 3 and "not cached" in err and "did you mean" not in err, err
