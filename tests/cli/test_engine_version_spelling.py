"""--engine-version as the engines tag their releases: one leading v dropped everywhere it shows
(image tag, title, JSON), PEP 440 pre/post releases read, anything else refused with exit 2."""

import json

import pytest
from clirun import run

from kvplan.errors import InvalidInputError
from kvplan.versions import normalize_version, parse_version

LLAMA = "llama-3.1-8b-instruct"


@pytest.mark.parametrize(("text", "release", "parsed"), [
    ("v0.10.1.1", "0.10.1.1", (0, 10, 1)),  # vLLM's tag v0.10.1.1
    ("V0.4.9", "0.4.9", (0, 4, 9)),
    (" 0.8.5.post1 ", "0.8.5.post1", (0, 8, 5)),  # vLLM v0.8.5.post1
    ("v0.4.1.post7", "0.4.1.post7", (0, 4, 1)),  # SGLang
    ("0.5.0rc0", "0.5.0rc0", (0, 5, 0)),  # SGLang
    ("v3.3.4", "3.3.4", (3, 3, 4)),  # TGI
    ("v1.2.0rc4", "1.2.0rc4", (1, 2, 0)),  # TensorRT-LLM
    ("1.3.0rc15.post1", "1.3.0rc15.post1", (1, 3, 0)),  # TensorRT-LLM
    ("0.10.2.dev5", "0.10.2.dev5", (0, 10, 2)),
    ("0.12.0.dev2024073000", "0.12.0.dev2024073000", (0, 12, 0)),  # a TensorRT-LLM nightly
    ("0.33", "0.33", (0, 33, 0)),
])
def test_real_release_spellings_are_read(text, release, parsed):
    assert normalize_version(text) == release
    assert parse_version(text) == parsed


@pytest.mark.parametrize("text", ["0.1O.0", "0.8.5x", "0.8.5-rc1", "latest", "10", "vv0.10.0",
                                  "0.4.9-cu126", "", "0.8.5rc", "0.8.5.post", "1.2.3.4.5"])
def test_malformed_releases_are_refused(text):
    with pytest.raises(InvalidInputError, match="--engine-version must be an engine release"):
        normalize_version(text)
    with pytest.raises(InvalidInputError):
        parse_version(text)


@pytest.mark.parametrize(("args", "image"), [
    (("--engine-version", "v0.10.1.1", "--emit", "k8s"), "image: vllm/vllm-openai:v0.10.1.1"),
    (("--engine", "sglang", "--engine-version", "v0.4.9", "--emit", "compose"),
     "image: lmsysorg/sglang:v0.4.9"),
])
def test_a_leading_v_is_not_doubled_in_the_image_tag(capsys, args, image):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", *args)
    assert code == 0, err
    assert image in out and ":vv" not in out
    assert "vv0." not in err


def test_a_leading_v_is_dropped_from_the_json_and_the_title(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine-version", "v0.10.1.1",
                         "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["engine"]["version"] == "0.10.1.1"
    assert "v0.10.1.1" not in out
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine-version", "v0.10.1.1")
    assert code == 0 and "vLLM 0.10.1.1" in out.splitlines()[0]


@pytest.mark.parametrize("text", ["0.1O.0", "0.8.5x", "0.8.5-rc1", "latest", "10"])
def test_plan_refuses_a_malformed_release_exit_2_json(capsys, text):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine-version", text,
                         "--json")
    assert code == 2
    error = json.loads(out)["error"]
    assert error["exit_code"] == 2 and "--engine-version" in error["message"]
    assert repr(text) in error["message"] and "0.10.1" in error["message"]
    assert "Traceback" not in out + err


def test_sweep_refuses_a_malformed_release_before_planning(capsys):
    code, out, err = run(capsys, "sweep", LLAMA, "--gpus", "h100", "--engine-version", "latest",
                         "--json")
    assert code == 2
    assert "--engine-version" in json.loads(out)["error"]["message"]


def test_check_reads_a_release_comment_with_a_v_and_refuses_a_bad_one(capsys, tmp_path):
    good = tmp_path / "good.sh"
    good.write_text("# kvplan: gpu=h100 engine-version=v0.10.0\n"
                    "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n")
    code, out, err = run(capsys, "check", str(good), "--json")
    assert code == 0, out + err
    [row] = json.loads(out)["deployments"]
    assert row["plan"]["engine"]["version"] == "0.10.0"
    assert any(p["message"] == "vLLM 0.10.0 from # kvplan: comment at line 1"
               for p in row["problems"])
    bad = tmp_path / "bad.sh"
    bad.write_text("# kvplan: gpu=h100 engine-version=latest\n"
                   "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n")
    code, out, err = run(capsys, "check", str(bad), "--json")
    assert code == 2
    [row] = json.loads(out)["deployments"]
    [problem] = row["problems"]
    assert problem["code"] == "invalid-engine-version"
    assert problem["message"].startswith("engine-version from # kvplan: comment at line 1 must be")
    assert "'latest'" in problem["message"]


def test_check_refuses_a_bad_policy_release_even_when_files_name_theirs(capsys, tmp_path):
    f = tmp_path / "compose.yaml"
    f.write_text("services:\n  vllm:\n    image: vllm/vllm-openai:v0.8.5.post1\n"
                 "    command: --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    assert code == 0
    [row] = json.loads(out)["deployments"]
    assert row["plan"]["engine"]["version"] == "0.8.5"  # the image tag's release
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--engine-version", "latest",
                       "--json")
    assert code == 2 and "--engine-version" in json.loads(out)["error"]["message"]
    toml = tmp_path / "kvplan.toml"
    toml.write_text('engine_version = "V0.9.0"\n')
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--config", str(toml), "--json")
    assert code == 0
    toml.write_text('engine_version = "0.9.x"\n')
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--config", str(toml), "--json")
    assert code == 2 and "engine_version must be" in json.loads(out)["error"]["message"]
