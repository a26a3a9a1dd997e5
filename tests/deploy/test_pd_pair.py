"""`kvplan check` pairs the prefill and decode halves of a disaggregated deployment given as
separate commands (deploy/pd_pair.py): two shell files, two compose services, two Kubernetes
Deployments; a half without its partner is a warning."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from clirun import run

QWEN = "Qwen/Qwen3-8B"


def _nixl(role: str) -> str:
    return f"'{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{role}\"}}'"


def _vllm(role: str, extra: str = "", model: str = QWEN) -> str:
    return (f"vllm serve {model} --max-model-len 16384 {extra} "
            f"--kv-transfer-config {_nixl(role)}")


def _check(capsys, tmp_path: Path, files: dict[str, str]) -> tuple[int, list[dict]]:
    paths = []
    for name, body in files.items():
        (tmp_path / name).write_text(textwrap.dedent(body).lstrip("\n"))
        paths.append(str(tmp_path / name))
    code, out, err = run(capsys, "check", *paths, "--gpu", "h100-sxm-80gb", "--json",
                         "--offline")
    doc = json.loads(out)
    assert doc["exit_code"] == code and "Traceback" not in err
    return code, doc["deployments"]


def _problems(row: dict, code: str) -> list[dict]:
    return [p for p in row["problems"] if p["code"] == code]


def test_two_shell_files_are_checked_as_one_deployment(capsys, tmp_path):
    code, rows = _check(capsys, tmp_path, {"prefill.sh": _vllm("kv_producer", "-tp 2"),
                                           "decode.sh": _vllm("kv_consumer", "-tp 2")})
    assert code == 0 and [r["status"] for r in rows] == ["fits", "fits"]
    for row in rows:
        assert not _problems(row, "pd-mismatch") and not _problems(row, "pd-partner-missing")
    assert "decode.sh:1" in _problems(rows[0], "pd-paired")[0]["message"]
    assert "prefill.sh:1" in _problems(rows[1], "pd-paired")[0]["message"]


def test_a_kv_dtype_mismatch_fails_both_halves(capsys, tmp_path):
    # the decode's fp8 KV cannot take the prefill's bf16 KV bytes
    code, rows = _check(capsys, tmp_path, {
        "prefill.sh": _vllm("kv_producer"),
        "decode.sh": _vllm("kv_consumer", "--kv-cache-dtype fp8")})
    assert code == 1
    for row in rows:
        assert row["status"] == "does-not-fit"
        (err,) = _problems(row, "pd-mismatch")
        assert err["severity"] == "error" and "KV cache dtype bfloat16 on the prefill, fp8 " \
            "on the decode" in err["message"]


def test_a_connector_mismatch_is_an_error(capsys, tmp_path):
    lmcache = "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_consumer\"}'"
    code, rows = _check(capsys, tmp_path, {
        "prefill.sh": _vllm("kv_producer"),
        "decode.sh": f"vllm serve {QWEN} --max-model-len 16384 --kv-transfer-config {lmcache}"})
    assert code == 1
    assert any("NixlConnector on the prefill, LMCacheConnectorV1 on the decode" in p["message"]
               for p in _problems(rows[1], "pd-mismatch"))


def test_a_half_alone_is_a_warning_and_still_fits(capsys, tmp_path):
    code, (row,) = _check(capsys, tmp_path, {"prefill.sh": _vllm("kv_producer")})
    assert code == 0 and row["status"] == "fits"
    (warn,) = _problems(row, "pd-partner-missing")
    assert warn["severity"] == "warning" and "no decode server" in warn["message"]


def test_halves_of_different_models_are_not_paired(capsys, tmp_path):
    code, rows = _check(capsys, tmp_path, {
        "prefill.sh": _vllm("kv_producer"),
        "decode.sh": _vllm("kv_consumer", model="meta-llama/Llama-3.1-8B-Instruct")})
    assert code == 0
    assert all(_problems(r, "pd-partner-missing") for r in rows)


def test_kv_both_is_no_half(capsys, tmp_path):
    # llm-d's and vLLM's own NIXL examples start both instances with kv_both: no role to pair
    _, (row,) = _check(capsys, tmp_path, {"serve.sh": _vllm("kv_both")})
    assert not _problems(row, "pd-partner-missing") and not _problems(row, "pd-paired")


def test_vllm_decode_tp_not_a_multiple_of_the_prefill_tp_warns(capsys, tmp_path):
    # nixl_connector.py (0.11-0.12): "Decode TP cannot be smaller than prefill TP", divide()
    code, rows = _check(capsys, tmp_path, {"prefill.sh": _vllm("kv_producer", "-tp 2"),
                                           "decode.sh": _vllm("kv_consumer", "-tp 1")})
    assert code == 0
    (warn,) = _problems(rows[1], "pd-mismatch")
    assert warn["severity"] == "warning" and "tensor parallel 2 on the prefill, 1 on the " \
        "decode" in warn["message"]
    code, rows = _check(capsys, tmp_path, {"prefill.sh": _vllm("kv_producer", "-tp 1"),
                                           "decode.sh": _vllm("kv_consumer", "-tp 2")})
    assert not _problems(rows[1], "pd-mismatch")


def test_vllm_block_size_mismatch_warns(capsys, tmp_path):
    _, rows = _check(capsys, tmp_path, {"prefill.sh": _vllm("kv_producer", "--block-size 32"),
                                        "decode.sh": _vllm("kv_consumer", "--block-size 16")})
    (warn,) = _problems(rows[1], "pd-mismatch")
    assert "block size 32 on the prefill, 16 on the decode" in warn["message"]


SGLANG = f"python -m sglang.launch_server --model-path {QWEN} --context-length 16384"


def test_compose_services_of_sglang_with_different_transfer_backends(capsys, tmp_path):
    code, rows = _check(capsys, tmp_path, {"docker-compose.yaml": f"""
        services:
          prefill:
            image: lmsysorg/sglang:v0.5.23
            command: {SGLANG} --disaggregation-mode prefill --disaggregation-transfer-backend nixl
          decode:
            image: lmsysorg/sglang:v0.5.23
            command: {SGLANG} --disaggregation-mode decode
        """})
    assert code == 1 and len(rows) == 2
    for row in rows:  # SGLang's default backend is mooncake (server_args.py)
        assert any("nixl on the prefill, mooncake on the decode" in p["message"]
                   for p in _problems(row, "pd-mismatch"))


def test_two_kubernetes_deployments_in_one_file_pair(capsys, tmp_path):
    def deployment(name: str, mode: str) -> str:
        return f"""
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {name}
        spec:
          template:
            spec:
              containers:
              - name: server
                image: lmsysorg/sglang:v0.5.23
                command: [python, -m, sglang.launch_server, --model-path, {QWEN},
                          --disaggregation-mode, {mode}]
                resources:
                  limits:
                    nvidia.com/gpu: "1"
        """
    text = textwrap.dedent(deployment("prefill", "prefill")) + "---" + textwrap.dedent(
        deployment("decode", "decode"))
    code, rows = _check(capsys, tmp_path, {"pd.yaml": text})
    assert code == 0 and len(rows) == 2
    assert all(_problems(r, "pd-paired") and not _problems(r, "pd-mismatch") for r in rows)
