"""Problem and report texts as a reader sees them: no empty or doubled era name, whole
sentences, the AMD platform and fabric by their names, engines by their labels."""

import json

import pytest
from clirun import run

LLAMA = "llama-3.1-8b-instruct"


def plan_json(capsys, *args):
    code, out, err = run(capsys, "plan", *args, "--json")
    assert code in (0, 1), err
    data = json.loads(out)
    return data, {p["code"]: p["message"] for p in data["problems"]}


@pytest.mark.parametrize(("engine", "version", "era"), [
    ("sglang", "0.5.99", "the sglang 0.5.23 accounting"),  # era() names none: was "the  accounting"
    ("tgi", "9.0.0", "the tgi 3.0+ accounting"),  # was "tgi 3.0+ accounting accounting"
    ("vllm", "0.99.0", "the v1 0.30+ accounting"),
])
def test_a_newer_release_names_the_era_it_is_modelled_with_once(capsys, engine, version, era):
    _, problems = plan_json(capsys, LLAMA, "--gpu", "h100", "--engine", engine,
                            "--engine-version", version)
    message = problems["engine-version-newer"]
    assert message.endswith(f"; modelled with {era}"), message
    assert "  " not in message and "accounting accounting" not in message


def test_trtllm_engine_buffers_warning_is_one_sentence(capsys):
    _, problems = plan_json(capsys, LLAMA, "--gpu", "h100", "--engine", "trtllm",
                            "--engine-version", "0.9.0")
    message = problems["engine-buffers-not-estimated"]
    assert "decoder buffers (growing with max_batch_size × max_seq_len) that kvplan does not " \
        "estimate: the KV pool is over-stated" in message


def test_amd_plan_names_rocm_and_xgmi(capsys):
    data, problems = plan_json(capsys, "llama-3.1-70b-instruct", "--gpu", "mi300x", "-tp", "2")
    assert problems["non-cuda-platform"].startswith("AMD GPUs use vLLM's ROCm platform, whose")
    assert "HPU" not in problems["non-cuda-platform"]
    links = data["performance"]["links"]
    assert links.startswith("TP all-reduce over xGMI at 448 GB/s per direction (Infinity Fabric")
    assert "NVLink" not in links


def test_gaudi_plan_names_its_hpu_platform_and_roce(capsys):
    data, problems = plan_json(capsys, LLAMA, "--gpu", "gaudi3", "--gpu-memory-gib", "120",
                               "-tp", "2")
    assert "vLLM's HPU (Gaudi) platform" in problems["non-cuda-platform"]
    assert data["performance"]["links"].startswith("TP all-reduce over RoCE at ")


def test_nvidia_links_are_unchanged(capsys):
    data, _ = plan_json(capsys, LLAMA, "--gpu", "h100", "-tp", "2")
    assert data["performance"]["links"].startswith("TP all-reduce over NVLink at 450 GB/s per "
                                                   "direction (NVLink 4")


def test_report_names_an_engine_it_could_not_plan_by_its_label(capsys):
    code, out, err = run(capsys, "report", LLAMA, "--gpu", "mi300x")
    assert code == 0, err
    assert "- TensorRT-LLM: not planned (TensorRT-LLM runs on NVIDIA GPUs only" in out
    assert "trtllm:" not in out
