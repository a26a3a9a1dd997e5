"""`kvplan plan --disagg` on the command line: exit codes, JSON shape, clear errors."""

from __future__ import annotations

import json

from clirun import run

LLAMA = "llama-3.3-70b-instruct"
LOAD = ("--avg-input-tokens", "3000", "--avg-output-tokens", "300", "--target-concurrency", "64")


def test_json_has_both_pools_the_transfer_and_the_service(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--disagg", *LOAD, "--json")
    assert code == 0, err
    doc = json.loads(out)
    d = doc["disaggregated"]
    assert {"prefill", "decode", "prefill_replicas", "decode_replicas", "kv_transfer"} <= set(d)
    assert d["prefill"]["fits"] and d["decode"]["fits"]
    assert {"bytes_per_request", "link_gbps", "time_ms", "prefill_buffer_bytes_per_gpu"} <= \
        set(d["kv_transfer"])
    assert doc["performance"]["concurrency"] == 64


def test_text_view_shows_both_pools_and_launch_lines(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--disagg", "--engine",
                         "sglang", *LOAD)
    assert code == 0, err
    assert "prefill" in out and "decode" in out and "KV transfer" in out
    assert "--disaggregation-mode prefill" in out and "sglang_router" in out


def test_engine_without_pd_exits_2(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--disagg", "--engine", "tgi")
    assert code == 2
    assert "no disaggregated prefill/decode" in err and "--engine vllm" in err
    assert "Traceback" not in err


def test_pool_flags_without_disagg_exit_2(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--decode-tp", "2")
    assert code == 2 and "--decode-tp" in err and "--disagg" in err


def test_pool_that_does_not_fit_exits_1_naming_the_pool(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--disagg", "--decode-tp", "1",
                         *LOAD, "--json")
    assert code == 1
    doc = json.loads(out)
    assert any(p["code"] == "disagg-decode-does-not-fit" for p in doc["problems"])
    assert "decode pool" in err


def test_bad_pool_gpu_names_the_flag(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--disagg", "--decode-gpu",
                         "h9000")
    assert code == 2 and "h9000" in err


def test_json_validates_against_its_schema(capsys):
    import jsonschema

    code, out, err = run(capsys, "schema", "disagg")
    assert code == 0
    schema = json.loads(out)
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--disagg", *LOAD, "--json")
    assert code == 0, err
    jsonschema.validate(json.loads(out), schema)


def test_sweep_disagg_offers_ep_dp_attention_pools_for_moe(capsys):
    """DeepSeek-R1 on H200: the disaggregated options carry the pools' DP and EP sizes
    (EP = TP × DP), TP never beyond the 8-GPU HGX scale-up domain."""
    code, out, err = run(capsys, "sweep", "deepseek-ai/DeepSeek-R1", "--gpus", "h200",
                         "--engine", "sglang", "--target-concurrency", "2048",
                         "--avg-input-tokens", "2000", "--avg-output-tokens", "500", "--disagg",
                         "--json")
    assert code == 0, err
    doc = json.loads(out)
    dis = [o for o in doc["options"] if o["disaggregated"]]
    assert dis and all(o["knobs"]["prefill_tp"] <= 8 and o["knobs"]["decode_tp"] <= 8
                       for o in doc["options"] if o["disaggregated"])
    ep = [o for o in dis if "decode_ep" in o["knobs"]]
    assert ep, "no EP/DP-attention decode pool offered"
    for o in ep:
        k = o["knobs"]
        assert k["decode_ep"] == k["decode_tp"] * k["decode_dp"]
