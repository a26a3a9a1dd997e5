"""Flags only some engine releases have (DeploySyntax.flag_releases), in both directions: `plan`
writes the release's own spelling or leaves the flag out with an error naming the release that
has it, and `kvplan check` refuses a file that uses it on a release without it.

Each boundary was read in the engine's own source at the releases on either side of it:
- vLLM (PyPI wheels, vllm/engine/arg_utils.py): --kv-cache-memory-bytes not in 0.10.1.1, in
  0.10.2; --kv-offloading-size / --kv-offloading-backend not in 0.11.0, in 0.11.1;
  --enable-expert-parallel not in 0.7.3, in 0.8.0; --data-parallel-size / -dp not in 0.8.2, in
  0.8.3; --limit-mm-per-prompt not in 0.5.4, in 0.5.5; --enable-eplb / --num-redundant-experts
  not in 0.9.0 or 0.9.1, in 0.9.2 (and --num-redundant-experts gone again in 0.12.0);
  --enable-prefix-caching store_true up to 0.6.4.post1 (default False), BooleanOptionalAction
  (so --no-enable-prefix-caching) from 0.6.5, default bool(envs.VLLM_USE_V1) with VLLM_USE_V1
  "0" through 0.7.3; V1 (0.8.0+) turns it on by default.
- TGI (launcher/src/main.rs at the tags): --max-input-tokens first in v2.0.0 (v1.x spells it
  --max-input-length); --kv-cache-dtype first in v2.4.0 (not in v2.3.1).
- SGLang (PyPI wheels, sglang/srt/server_args.py): --pp-size not in 0.4.5, 0.4.6 or 0.4.6.post1,
  in 0.4.6.post2, 0.4.6.post3 and 0.4.7 (FlagReleases compares the .postN).
"""

from __future__ import annotations

import json

import pytest
from clirun import run

from kvplan import plan
from kvplan.engines.base import FlagReleases
from kvplan.engines.sglang import ENGINE as SGLANG
from kvplan.versions import release_key

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"
MOE = "Qwen/Qwen3-30B-A3B"


def _errors(p) -> list[str]:
    return [q.message for q in p.problems if q.code == "flag-not-in-release"]


def _check(capsys, tmp_path, version: str, line: str) -> dict:
    f = tmp_path / "serve.sh"
    f.write_text(f"# kvplan: engine-version={version}\n{line}\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json", "--offline")
    return json.loads(out)["deployments"][0]


def _refusals(row: dict) -> list[str]:
    return [p["message"] for p in row["problems"] if p["code"] == "unknown-flag"]


# ------------------------------------------------------------------------------------- vLLM


@pytest.mark.parametrize(("knob", "value", "flag", "before", "first"), [
    ("kv_offloading_size", 100, "--kv-offloading-size", "0.11.0", "0.11.1"),
    ("kv_cache_memory_bytes", 20 * 2**30, "--kv-cache-memory-bytes", "0.10.1", "0.10.2"),
    ("data_parallel_size", 2, "--data-parallel-size", "0.8.2", "0.8.3"),
])
def test_vllm_plan_leaves_out_a_flag_before_its_first_release(knob, value, flag, before, first):
    old = plan(LLAMA, "h100", engine_version=before, **{knob: value})
    assert flag not in old.command
    [message] = _errors(old)
    assert f"vLLM {before} has no {flag} (first in {first}" in message
    assert f"plan with --engine-version {first} or later" in message
    new = plan(LLAMA, "h100", engine_version=first, **{knob: value})
    assert f"{flag} {value}" in new.command and not _errors(new)


def test_vllm_plan_leaves_out_expert_parallel_before_0_8_0():
    old = plan(MOE, "h100", engine_version="0.7.3", tensor_parallel_size=2,
               enable_expert_parallel=True)
    assert "--enable-expert-parallel" not in old.command
    assert old.inputs["enable_expert_parallel"].value is False
    [message] = _errors(old)
    assert "vLLM 0.7.3 has no --enable-expert-parallel (first in 0.8.0" in message
    new = plan(MOE, "h100", engine_version="0.8.0", tensor_parallel_size=2,
               enable_expert_parallel=True)
    assert "--enable-expert-parallel" in new.command.split() and not _errors(new)


def test_vllm_offloading_is_the_same_refusal_in_v0_and_v1_before_0_11_1():
    """0.6.3 (V0) and 0.8.0 (V1) say the same thing: no release before 0.11.1 has the flag."""
    for version in ("0.6.3", "0.8.0", "0.10.0"):
        p = plan(LLAMA, "h100", engine_version=version, kv_offloading_size=100)
        assert "--kv-offloading-size" not in p.command and p.offload is None
        assert "first in 0.11.1" in _errors(p)[0]


@pytest.mark.parametrize(("version", "default"), [
    ("0.6.3", False), ("0.7.3", False), ("0.8.0", True), ("0.11.0", True)])
def test_vllm_prefix_caching_default_by_era(version, default):
    p = plan(LLAMA, "h100", engine_version=version)
    assert p.inputs["enable_prefix_caching"].value is default
    assert p.inputs["enable_prefix_caching"].source == "engine-default"


@pytest.mark.parametrize(("version", "on", "written"), [
    ("0.6.4", False, None),  # off by default; no --no- form to write
    ("0.6.5", False, "--no-enable-prefix-caching"),  # the form exists: the user's flag stays
    ("0.6.3", True, "--enable-prefix-caching"),  # V0: off unless asked
    ("0.11.0", False, "--no-enable-prefix-caching"),
    ("0.11.0", True, None),  # V1: on by default
])
def test_vllm_prefix_caching_flag_by_release(version, on, written):
    p = plan(LLAMA, "h100", engine_version=version, enable_prefix_caching=on)
    words = p.command.split()
    assert "--no-enable-prefix-caching" in words if written == "--no-enable-prefix-caching" \
        else "--no-enable-prefix-caching" not in words
    assert ("--enable-prefix-caching" in words) is (written == "--enable-prefix-caching")
    assert not _errors(p) and p.inputs["enable_prefix_caching"].value is on


@pytest.mark.parametrize(("flags", "before", "first", "hint"), [
    ("--kv-offloading-size 100", "0.11.0", "0.11.1", None),
    ("--kv-cache-memory-bytes 21474836480", "0.10.1", "0.10.2", None),
    ("--no-enable-prefix-caching", "0.6.4", "0.6.5", "write no flag"),
    ("--data-parallel-size 2", "0.8.2", "0.8.3", None),
    ("-dp 2", "0.8.2", "0.8.3", None),
    ("--enable-expert-parallel", "0.7.3", "0.8.0", None),
    ("--limit-mm-per-prompt image=1", "0.5.4", "0.5.5", None),
])
def test_vllm_check_refuses_the_flag_before_its_first_release(capsys, tmp_path, flags, before,
                                                              first, hint):
    line = f"vllm serve {MOE} --max-model-len 8192 {flags}"
    flag = flags.split()[0]
    [message] = _refusals(_check(capsys, tmp_path, before, line))
    assert f"vLLM {before} has no {flag} flag (first in {first}" in message
    if hint:
        assert hint in message
    assert not _refusals(_check(capsys, tmp_path, first, line))


EPLB = dict(tensor_parallel_size=2, enable_expert_parallel=True, num_redundant_experts=16)


@pytest.mark.parametrize("before", ["0.9.0", "0.9.1"])
def test_vllm_plan_leaves_out_eplb_before_0_9_2(before):
    old = plan(MOE, "h100", engine_version=before, **EPLB)
    words = old.command.split()
    assert "--enable-eplb" not in words and "--num-redundant-experts" not in words
    assert "--enable-expert-parallel" in words  # in 0.8.0 already
    [message] = _errors(old)
    assert f"vLLM {before} has no --num-redundant-experts (first in 0.9.2" in message
    assert "plan with --engine-version 0.9.2 or later" in message
    assert not any("needs --enable-expert-parallel" in q.message for q in old.problems)
    new = plan(MOE, "h100", engine_version="0.9.2", **EPLB)
    assert "--enable-eplb --num-redundant-experts 16" in new.command and not _errors(new)


def test_vllm_plan_before_expert_parallel_names_each_flag_the_release_lacks(capsys):
    """0.7.3 has neither --enable-expert-parallel nor EPLB: the gate drops both, each with its
    own error; before, it dropped the first only and the plan stopped on '--num-redundant-experts
    needs --enable-expert-parallel … hint: add --enable-expert-parallel', which the user gave."""
    code, out, err = run(capsys, "plan", MOE, "--gpu", "h100", "-tp", "2", "--engine-version",
                         "0.7.3", "--enable-expert-parallel", "--num-redundant-experts", "16",
                         "--json")
    assert "needs --enable-expert-parallel" not in out + err
    problems = json.loads(out)["problems"]
    refused = [q["message"] for q in problems if q["code"] == "flag-not-in-release"]
    assert len(refused) == 2
    assert "no --enable-expert-parallel (first in 0.8.0" in refused[0]
    assert "no --num-redundant-experts (first in 0.9.2" in refused[1]


@pytest.mark.parametrize("before", ["0.9.0", "0.9.1"])
def test_vllm_check_refuses_eplb_before_0_9_2(capsys, tmp_path, before):
    line = (f"vllm serve {MOE} --max-model-len 8192 -tp 2 --enable-expert-parallel "
            "--enable-eplb --num-redundant-experts 16")
    refused = _refusals(_check(capsys, tmp_path, before, line))
    assert len(refused) == 2
    for flag in ("--enable-eplb", "--num-redundant-experts"):
        assert any(f"vLLM {before} has no {flag} flag (first in 0.9.2" in m for m in refused)
    assert not any("hint: write" in m for m in refused)  # no spelling of EPLB there
    assert not _refusals(_check(capsys, tmp_path, "0.9.2", line))


def test_vllm_check_names_no_eplb_spelling_a_release_lacks(capsys, tmp_path):
    """--eplb-config before 0.10.2 hints --num-redundant-experts, which 0.9.2–0.10.1 have and
    0.9.0 does not."""
    line = (f"vllm serve {MOE} -tp 2 --enable-expert-parallel "
            "--eplb-config '{\"num_redundant_experts\":8}'")
    [newer] = [m for m in _refusals(_check(capsys, tmp_path, "0.10.1", line)) if "eplb-config" in m]
    assert "hint: write --num-redundant-experts N" in newer
    [older] = [m for m in _refusals(_check(capsys, tmp_path, "0.9.0", line)) if "eplb-config" in m]
    assert "hint" not in older


def test_a_flag_can_have_a_first_release_and_a_removal_each_with_its_own_spelling():
    rule = FlagReleases(first="1.0", removed="2.0", instead_before="--old", instead_after="--new")
    assert [rule.instead(v) for v in ("0.9", "1.0", "1.9", "2.0", "3.0")] == \
        ["--old", "", "", "--new", "--new"]
    assert [rule.when(v) for v in ("0.9", "2.0")] == ["first in 1.0", "removed in 2.0"]


# -------------------------------------------------------------------------------------- TGI


@pytest.mark.parametrize(("version", "flag"), [
    ("1.0.0", "--max-input-length"), ("1.4.5", "--max-input-length"),
    ("2.0.0", "--max-input-tokens")])
def test_tgi_plan_spells_the_input_limit_as_the_release_does(version, flag):
    p = plan(LLAMA, "h100", engine="tgi", engine_version=version, max_model_len=4096)
    assert f"{flag} 4095 --max-total-tokens 4096" in p.command
    assert not _errors(p)


def test_tgi_plan_leaves_out_the_kv_cache_dtype_before_2_4_0():
    old = plan(LLAMA, "h100", engine="tgi", engine_version="2.3.1", kv_cache_dtype="fp8")
    assert "--kv-cache-dtype" not in old.command and old.inputs["kv_cache_dtype"].value != "fp8"
    [message] = _errors(old)
    assert "TGI 2.3.1 has no --kv-cache-dtype (first in 2.4.0" in message
    new = plan(LLAMA, "h100", engine="tgi", engine_version="2.4.0", kv_cache_dtype="fp8")
    assert "--kv-cache-dtype fp8_e4m3fn" in new.command and not _errors(new)


@pytest.mark.parametrize(("flags", "before", "first", "hint"), [
    ("--max-input-tokens 4095", "1.4.5", "2.0.0", "write --max-input-length 4095"),
    ("--kv-cache-dtype fp8_e4m3fn", "2.3.1", "2.4.0", None),
])
def test_tgi_check_refuses_the_flag_before_its_first_release(capsys, tmp_path, flags, before,
                                                             first, hint):
    line = f"text-generation-launcher --model-id qwen2.5-7b --max-total-tokens 4096 {flags}"
    flag = flags.split()[0]
    [message] = _refusals(_check(capsys, tmp_path, before, line))
    assert f"TGI {before} has no {flag} flag (first in {first}" in message
    if hint:
        assert hint in message
    assert not _refusals(_check(capsys, tmp_path, first, line))


def test_tgi_check_takes_max_input_length_in_1_x(capsys, tmp_path):
    line = "text-generation-launcher --model-id qwen2.5-7b --max-total-tokens 4096 " \
        "--max-input-length 4095"
    assert not _refusals(_check(capsys, tmp_path, "1.4.5", line))


# ----------------------------------------------------------------------------------- SGLang


@pytest.mark.parametrize("before", ["0.4.5", "0.4.6", "0.4.6.post1"])
def test_sglang_plan_leaves_out_pp_size_before_0_4_6_post2(before):
    old = plan(LLAMA70, "h100", engine="sglang", engine_version=before,
               tensor_parallel_size=2, pipeline_parallel_size=2)
    assert "--pp-size" not in old.command
    [message] = _errors(old)
    assert f"SGLang {before} has no --pp-size (first in 0.4.6.post2" in message
    assert "drop --pipeline-parallel-size" in message
    new = plan(LLAMA70, "h100", engine="sglang", engine_version="0.4.6.post2",
               tensor_parallel_size=2, pipeline_parallel_size=2)
    assert "--pp-size 2" in new.command and not _errors(new)


def test_sglang_check_refuses_pp_size_before_0_4_6_post2(capsys, tmp_path):
    line = "python -m sglang.launch_server --model-path qwen2.5-7b --tp-size 1 --pp-size 2"
    [message] = _refusals(_check(capsys, tmp_path, "0.4.6.post1", line))
    assert "SGLang 0.4.6.post1 has no --pp-size flag (first in 0.4.6.post2" in message
    assert not _refusals(_check(capsys, tmp_path, "0.4.6.post2", line))


def test_release_numbers_compare_their_post_release():
    assert release_key("0.4.1.post6") == (0, 4, 1, 6)
    assert release_key("v0.4.1") == release_key("0.4.1.post0") == (0, 4, 1, 0)
    rule = FlagReleases(first="0.4.1.post6")
    assert not rule.in_release("0.4.1") and not rule.in_release("0.4.1.post5")
    assert rule.in_release("0.4.1.post6") and rule.in_release("0.4.2")
    assert FlagReleases(first="0.4.6").in_release("0.4.6.post1")  # a bound without .postN


@pytest.mark.parametrize(("image", "version"), [
    ("lmsysorg/sglang:v0.4.6.post1-cu124", "0.4.6.post1"),
    ("lmsysorg/sglang:v0.4.6-cu124", "0.4.6"),
])
def test_sglang_check_keeps_the_post_release_of_an_image_tag(capsys, tmp_path, image, version):
    """The image tag's .postN reaches the release check: v0.4.6.post1 has no --pp-size."""
    f = tmp_path / "compose.yaml"
    f.write_text(f"services:\n  s:\n    image: {image}\n    command: python3 -m "
                 "sglang.launch_server --model-path qwen2.5-7b --tp-size 1 --pp-size 2\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json", "--offline")
    [message] = _refusals(json.loads(out)["deployments"][0])
    assert f"SGLang {version} has no --pp-size flag" in message


def test_sglang_check_keeps_the_post_release_of_a_pip_pin(capsys, tmp_path):
    f = tmp_path / "Dockerfile"
    f.write_text("RUN pip install 'sglang[all]==0.4.6.post2'\nCMD python3 -m "
                 "sglang.launch_server --model-path qwen2.5-7b --tp-size 1 --pp-size 2\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json", "--offline")
    row = json.loads(out)["deployments"][0]
    assert not _refusals(row) and row["plan"]["engine"]["version"] == "0.4.6.post2"


@pytest.mark.parametrize("before", ["0.4.1", "0.4.1.post5"])
def test_sglang_plan_leaves_out_fp8_e4m3_before_0_4_1_post6(before):
    """--kv-cache-dtype choices are ["auto", "fp8_e5m2"] through 0.4.1.post5; 0.4.1.post6 adds
    fp8_e4m3: an older release refuses the value, so the line leaves it out."""
    old = plan(LLAMA, "h100", engine="sglang", engine_version=before, kv_cache_dtype="fp8_e4m3")
    assert "--kv-cache-dtype" not in old.command
    assert not old.inputs["kv_cache_dtype"].value.startswith("fp8")
    [message] = [q.message for q in old.problems if q.code == "value-not-in-release"]
    assert f"SGLang {before}'s --kv-cache-dtype does not take fp8_e4m3 (first in " \
        "0.4.1.post6" in message
    assert "give --kv-cache-dtype fp8_e5m2 or plan with --engine-version 0.4.1.post6" in message
    new = plan(LLAMA, "h100", engine="sglang", engine_version="0.4.1.post6",
               kv_cache_dtype="fp8_e4m3")
    assert "--kv-cache-dtype fp8_e4m3" in new.command
    assert not [q for q in new.problems if q.code == "value-not-in-release"]


@pytest.mark.parametrize(("version", "written"), [
    ("0.4.1", "fp8_e5m2"), ("0.4.1.post5", "fp8_e5m2"), ("0.4.1.post6", "fp8_e4m3"),
    ("0.5.23", "fp8_e4m3")])
def test_sglang_plan_writes_a_generic_fp8_as_the_release_takes_it(version, written):
    """A generic FP8 KV cache is the release's FP8 choice: E5M2, its only one, before
    0.4.1.post6 (no release takes a bare fp8); the same byte a value, so the same pool."""
    p = plan(LLAMA, "h100", engine="sglang", engine_version=version, kv_cache_dtype="fp8")
    assert f"--kv-cache-dtype {written}" in p.command
    assert p.inputs["kv_cache_dtype"].value == written
    assert not [q for q in p.problems if q.severity == "error"]
    assert SGLANG.kv_cache_dtype_arg("fp8", version) == written
    e4m3 = plan(LLAMA, "h100", engine="sglang", engine_version="0.4.1.post6",
                kv_cache_dtype="fp8")
    assert p.kv_cache.bytes_per_token == e4m3.kv_cache.bytes_per_token


@pytest.mark.parametrize(("where", "refused"), [
    ("image: lmsysorg/sglang:v0.4.1.post5-cu124", True),
    ("image: lmsysorg/sglang:v0.4.1-cu121", True),
    ("image: lmsysorg/sglang:v0.4.1.post6-cu124", False),
])
def test_sglang_check_refuses_fp8_e4m3_before_0_4_1_post6(capsys, tmp_path, where, refused):
    f = tmp_path / "compose.yaml"
    f.write_text(f"services:\n  s:\n    {where}\n    command: python3 -m sglang.launch_server "
                 "--model-path qwen2.5-7b --kv-cache-dtype fp8_e4m3\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json", "--offline")
    row = json.loads(out)["deployments"][0]
    messages = [p["message"] for p in row["problems"] if p["code"] == "value-not-in-release"]
    assert bool(messages) is refused
    if refused:
        assert "--kv-cache-dtype does not take fp8_e4m3 (first in 0.4.1.post6" in messages[0]
        assert "write --kv-cache-dtype fp8_e5m2" in messages[0] and row["status"] == "error"


def test_sglang_check_takes_fp8_e5m2_in_an_old_release(capsys, tmp_path):
    line = "python -m sglang.launch_server --model-path qwen2.5-7b --kv-cache-dtype fp8_e5m2"
    row = _check(capsys, tmp_path, "0.4.1", line)
    assert row["status"] != "error" and not _refusals(row)
    assert not [p for p in row["problems"] if p["code"] == "value-not-in-release"]


# ---------------------------------------------------------------------------- TensorRT-LLM


@pytest.mark.parametrize(("version", "written"), [
    ("0.18.0", False), ("0.21.0", False), ("1.0.0", True), ("1.2.0", True)])
def test_trtllm_plan_writes_backend_tensorrt_only_where_pytorch_is_the_default(version, written):
    """Before 1.0 trtllm-serve runs the TensorRT engine path by default and its --backend takes
    only `pytorch` (the 0.18.2 trtllm-serve reference), so `--backend tensorrt` would be refused
    there and is needed nowhere; from 1.0 (PyTorch by default) it selects the engine path."""
    p = plan(LLAMA, "h100", engine="trtllm", engine_version=version, backend="tensorrt")
    assert ("--backend tensorrt" in p.command) is written
    assert not _errors(p)
    assert any(q.code == "engine-buffers-not-estimated" for q in p.problems)  # engine runtime


def test_trtllm_plan_keeps_backend_pytorch_before_1_0():
    p = plan(LLAMA, "h100", engine="trtllm", engine_version="0.18.0", backend="pytorch")
    assert "--backend pytorch" in p.command.split("trtllm-serve", 1)[1]


def test_trtllm_check_reads_the_pre_1_0_line_back_as_the_engine_runtime(capsys, tmp_path):
    p = plan(LLAMA, "h100", engine="trtllm", engine_version="0.18.0", backend="tensorrt")
    row = _check(capsys, tmp_path, "0.18.0", p.command.replace(LLAMA, "qwen2.5-7b"))
    assert not _refusals(row)
    assert any(q["code"] == "engine-buffers-not-estimated" for q in row["problems"])


@pytest.mark.parametrize(("version", "warned"), [("0.14.0", True), ("0.15.0", False),
                                                 ("1.2.0", False)])
def test_trtllm_plan_warns_before_the_first_release_with_trtllm_serve(version, warned):
    """TensorRT-LLM's release notes, Release 0.15.0: "Added a `trtllm-serve` command"; a plan
    for an older release still writes a trtllm-serve line, so it says that release has none."""
    p = plan(LLAMA, "h100", engine="trtllm", engine_version=version)
    codes = [x.code for x in p.problems]
    assert ("engine-version-no-serve-command" in codes) is warned
    assert p.command.startswith("trtllm-serve") or "trtllm-serve " in p.command


@pytest.mark.parametrize(("version", "refused"), [("0.8.5", True), ("0.9.0", False)])
def test_vllm_multi_node_data_parallel_lines_need_0_9_0(version, refused):
    """--data-parallel-size-local/-address/-rpc-port are not in 0.8.5's arg_utils.py parallel
    group and are in 0.9.0's (the PyPI wheels): a plan whose data-parallel ranks span nodes
    writes them on every node's line, so a release without them cannot start it."""
    p = plan(MOE, "h100", engine_version=version, data_parallel_size=16,
             enable_expert_parallel=True)
    assert p.nodes.nodes == 2 and "--data-parallel-size-local" in p.nodes.launch[0].command
    errors = [x.message for x in p.problems if x.code == "flag-not-in-release"]
    assert bool(errors) is refused
    if refused:
        assert "--data-parallel-size-local, --data-parallel-address, --data-parallel-rpc-port" \
            in errors[0] and "--engine-version 0.9.0 or later" in errors[0]


def test_vllm_check_refuses_multi_node_data_parallel_flags_before_0_9_0(capsys, tmp_path):
    line = ("vllm serve qwen2.5-7b --data-parallel-size 4 --data-parallel-size-local 2 "
            "--data-parallel-address 10.0.0.1 --data-parallel-rpc-port 13345")
    assert any("vLLM 0.8.5 has no --data-parallel-size-local flag (first in 0.9.0" in m
               for m in _refusals(_check(capsys, tmp_path, "0.8.5", line)))
    assert not _refusals(_check(capsys, tmp_path, "0.9.0", line))
