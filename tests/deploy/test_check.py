"""`kvplan check` on realistic deployment files: exit codes, JSON, GitHub annotations, policies."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest
from clirun import run

from kvplan.deploy.commands import (
    DeployParseError,
    Templates,
    UnknownArg,
    find_commands,
    human_int,
    parse_args,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deploy"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def check_json(capsys, *args):
    code, out, err = run(capsys, "check", *args, "--json")
    return code, json.loads(out), err


# ------------------------------------------------------------- the bundled examples


def test_every_example_file_is_found_and_fits(capsys):
    files = sorted(str(p) for p in EXAMPLES.iterdir() if p.is_file())  # formats: own tests
    code, report, _ = check_json(capsys, *files)
    assert code == 0, report
    rows = report["deployments"]
    assert {Path(r["file"]).name for r in rows} == {Path(f).name for f in files}
    assert report["summary"] == {
        "deployments": 6,
        "fits": 6,
        "failed": 0,
        "unchecked": 0,
        "errors": 0,
        "file_errors": 0,
    }
    by_file = {Path(r["file"]).name: r for r in rows}
    k8s = by_file["k8s-deployment.yaml"]
    assert k8s["gpu"] == "NVIDIA-H100-80GB-HBM3" and k8s["plan"]["gpu"]["count"] == 4
    assert k8s["plan"]["inputs"]["tensor_parallel_size"]["value"] == 4
    assert k8s["plan"]["engine"]["version"] == "0.19.0"  # from the image tag
    kserve = by_file["kserve.yaml"]
    assert kserve["gpu_source"] == "node affinity nvidia.com/gpu.product"
    assert kserve["plan"]["inputs"]["max_model_len"]["value"] == 32000  # "32k" = 32 × 1000
    assert kserve["plan"]["inputs"]["kv_cache_dtype"]["value"] == "fp8"
    assert "--port 8080" in " ".join(p["message"] for p in kserve["problems"])
    assert by_file["Dockerfile"]["line"] == 4 and by_file["Dockerfile"]["gpu"] == "l40s"
    assert by_file["vllm-config.yaml"]["plan"]["inputs"]["tensor_parallel_size"]["value"] == 2
    assert (
        by_file["docker-compose.yaml"]["plan"]["inputs"]["gpu_memory_utilization"]["value"] == 0.9
    )
    tgi_row = by_file["tgi-gke.yaml"]
    assert tgi_row["engine"] == "tgi" and tgi_row["plan"]["engine"]["version"] == "3.3.6"
    assert tgi_row["plan"]["inputs"]["max_model_len"]["value"] == 8192  # MAX_TOTAL_TOKENS


# ---------------------------------------------------------------------- no fit


def test_compose_that_does_not_fit_exits_1_with_annotation(capsys, tmp_path):
    f = write(tmp_path, "compose.yml", """
        services:
          big:
            image: vllm/vllm-openai:v0.19.0
            command: ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "8192"]
    """)
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--format", "github")
    assert code == 1
    errors = [line for line in out.splitlines() if line.startswith("::error ")]
    assert errors and all(f"file={f}".replace(":", "%3A") in e or f"file={f}" in e for e in errors)
    assert any(",line=4," in e for e in errors)
    assert out.splitlines()[-1].startswith("kvplan check: 1 deployment(s): 0 fit, 1 failed")


def test_k8s_gpu_limit_below_tp_does_not_fit(capsys, tmp_path):
    f = write(tmp_path, "deploy.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        spec:
          template:
            spec:
              nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
              containers:
                - name: vllm
                  image: vllm/vllm-openai:v0.19.0
                  args: [meta-llama/Llama-3.1-8B-Instruct, --tensor-parallel-size, "2"]
                  resources: {limits: {nvidia.com/gpu: 1}}
    """)
    code, report, _ = check_json(capsys, str(f))
    row = report["deployments"][0]
    assert code == 1 and row["status"] == "does-not-fit"
    assert any(
        p["code"] == "gpu-count-mismatch" and p["severity"] == "error" for p in row["problems"]
    )
    [mismatch] = [p for p in row["problems"] if p["code"] == "gpu-count-mismatch"]
    assert mismatch["message"].endswith("; vLLM will not start")


@pytest.mark.parametrize(("command", "args", "label"), [
    ("[python3, -m, sglang.launch_server]", "[--model-path, meta-llama/Llama-3.1-8B-Instruct, "
     '--tp, "2"]', "SGLang"),
    ("[text-generation-launcher]", '[--model-id, meta-llama/Llama-3.1-8B-Instruct, --num-shard, '
     '"2"]', "TGI"),
])
def test_too_few_gpus_names_the_engine_that_will_not_start(capsys, tmp_path, command, args,
                                                           label):
    """Regression: the gpu-count error said "vLLM will not start" for every engine."""
    f = write(tmp_path, "deploy.yaml", f"""
        apiVersion: apps/v1
        kind: Deployment
        spec:
          template:
            spec:
              nodeSelector: {{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
              containers:
                - name: server
                  image: server:latest
                  command: {command}
                  args: {args}
                  resources: {{limits: {{nvidia.com/gpu: 1}}}}
    """)
    code, report, _ = check_json(capsys, str(f), "--offline")
    row = report["deployments"][0]
    assert code == 1 and row["status"] == "does-not-fit", row
    [mismatch] = [p for p in row["problems"] if p["code"] == "gpu-count-mismatch"]
    assert mismatch["severity"] == "error"
    assert mismatch["message"] == ("the file gives the container 1 GPU(s) but TP × PP × DP = 2; "
                                   f"{label} will not start")


def test_policy_headroom_names_the_checked_engine(capsys, tmp_path):
    """Regression: the min_headroom_gib violation said "vLLM's budget" for every engine."""
    f = write(tmp_path, "run.sh", """
        text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct
    """)
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100", "--offline",
                                 "--min-headroom-gib", "70")
    [row] = report["deployments"]
    assert code == 1 and row["status"] == "policy-violation", row
    [violation] = row["policy_violations"]
    assert violation["code"] == "min_headroom_gib"
    assert "left outside TGI's budget" in violation["message"]


@pytest.mark.parametrize(("line", "hint"), [
    ("vllm serve --max-model-len 4096", "add the model after `vllm serve`, or --model"),
    ("python -m sglang.launch_server --tp 2",
     "add the model after `sglang serve`, or --model-path"),
    ("text-generation-launcher --num-shard 2", "add --model-id MODEL"),
])
def test_no_model_hint_uses_the_engines_own_syntax(capsys, tmp_path, line, hint):
    f = write(tmp_path, "run.sh", line + "\n")
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100", "--offline")
    [row] = report["deployments"]
    assert code == 2
    assert row["problems"][0]["message"] == f"the command names no model (hint: {hint})"


def test_no_command_message_lists_every_engine(capsys, tmp_path):
    f = write(tmp_path, "run.sh", "echo hello\n")
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100")
    message = report["deployments"][0]["problems"][0]["message"]
    assert code == 2 and message.startswith("found no serving command (")
    for command in ("vllm serve", "python -m sglang.launch_server", "text-generation-launcher",
                    "trtllm-serve"):
        assert command in message


# ----------------------------------------------------------------- parse errors


def test_malformed_yaml_exits_2_naming_the_line(capsys, tmp_path):
    f = write(tmp_path, "bad.yaml", """
        services:
          llm:
            command: [vllm, serve
            image: x
    """)
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--format", "github")
    assert code == 2
    assert re.search(
        r"::error file=.*bad\.yaml,line=\d+,title=kvplan unreadable::malformed YAML", out
    )


def test_flag_missing_its_value(capsys, tmp_path):
    f = write(tmp_path, "serve.sh", """
        #!/bin/sh
        exec vllm serve meta-llama/Llama-3.1-8B-Instruct \\
            --max-model-len --gpu-memory-utilization 0.9
    """)
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100")
    row = report["deployments"][0]
    assert (
        code == 2
        and row["line"] == 2
        and "--max-model-len is missing its value" in row["problems"][0]["message"]
    )


@pytest.mark.parametrize(
    "text,gpu,message",
    [
        (
            "vllm serve qwen2.5-7b -tp 1 --tensor-parallel-size=2\n",
            ["--gpu", "h100"],
            "contradictory flags",
        ),
        ("echo hello\n", ["--gpu", "h100"], "found no serving command"),
        ("vllm serve qwen2.5-7b\n", [], "# kvplan: gpu="),
        (
            "vllm serve qwen2.5-7b --max-num-seqs lots\n",
            ["--gpu", "h100"],
            "'lots' is not an integer",
        ),
        ("vllm serve qwen2.5-7b 'unclosed\n", ["--gpu", "h100"], "check the quotes"),
    ],
)
def test_single_command_errors_exit_2(capsys, tmp_path, text, gpu, message):
    f = write(tmp_path, "serve.sh", text)
    code, report, _ = check_json(capsys, str(f), *gpu)
    assert code == 2 and message in report["deployments"][0]["problems"][0]["message"]


def test_one_bad_file_does_not_hide_the_others(capsys, tmp_path):
    good = write(tmp_path, "good.sh", "vllm serve qwen2.5-7b --max-model-len 8192\n")
    bad = write(tmp_path, "bad.yaml", "a: [\n")
    code, report, _ = check_json(capsys, str(good), str(bad), "--gpu", "h100")
    assert code == 2 and [r["status"] for r in report["deployments"]] == ["fits", "error"]


# -------------------------------------------------------------------- templates


HELM = """
    apiVersion: apps/v1
    kind: Deployment
    spec:
      template:
        spec:
          containers:
            - name: vllm
              image: vllm/vllm-openai:v0.19.0
              args:
                - {{ .Values.model | quote }}
                - --max-model-len={{ .Values.maxLen }}
                {{- if .Values.eager }}
                - --enforce-eager
                {{- end }}
"""


def test_unexpanded_template_names_the_value(capsys, tmp_path):
    f = write(tmp_path, "helm.yaml", HELM)
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100")
    message = report["deployments"][0]["problems"][0]["message"]
    assert code == 2 and "{{ .Values.model | quote }}" in message and "--set model=VALUE" in message


def test_set_fills_templates(capsys, tmp_path):
    f = write(tmp_path, "helm.yaml", HELM)
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100", "--set", "model=qwen2.5-7b",
                                 "--set", ".Values.maxLen=16k")
    assert code == 0, report
    assert report["deployments"][0]["plan"]["inputs"]["max_model_len"]["value"] == 16000


def test_shell_variables_need_set_or_default(capsys, tmp_path):
    f = write(
        tmp_path, "run.sh", 'vllm serve qwen2.5-7b --max-model-len "$MAX_LEN" --api-key "$KEY"\n'
    )
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100")
    assert code == 2 and "$MAX_LEN" in report["deployments"][0]["problems"][0]["message"]
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100", "--set", "MAX_LEN=4096")
    assert (
        code == 0 and report["deployments"][0]["plan"]["inputs"]["max_model_len"]["value"] == 4096
    )
    g = write(tmp_path, "run2.sh", "vllm serve qwen2.5-7b --max-model-len ${MAX_LEN:-2048}\n")
    code, report, _ = check_json(capsys, str(g), "--gpu", "h100")
    assert report["deployments"][0]["plan"]["inputs"]["max_model_len"]["value"] == 2048


# ----------------------------------------------------------------------- policies


def test_policy_failure_names_the_policy(capsys, tmp_path):
    code, out, _ = run(capsys, "check", str(EXAMPLES / "Dockerfile"), "--min-concurrency", "10",
                       "--format", "github")
    assert code == 1
    assert re.search(r"::error file=.*Dockerfile,line=4,title=kvplan min_concurrency::the KV cache "
                     r"holds 6\.\d+ requests at max_model_len 32768; the policy needs 10", out)


def test_policies_from_pyproject(capsys, tmp_path, monkeypatch):
    write(tmp_path, "pyproject.toml", """
        [project]
        name = "serving"

        [tool.kvplan]
        gpu = "h100"
        max-gpu-memory-utilization = 0.85
        require_fp8_kv_cache = true
    """)
    f = write(tmp_path, "serve.sh", "vllm serve qwen2.5-7b --max-model-len 8192\n")
    monkeypatch.chdir(tmp_path)
    code, report, _ = check_json(capsys, str(f))
    row = report["deployments"][0]
    assert code == 1 and row["status"] == "policy-violation"
    assert {v["code"] for v in row["policy_violations"]} == {"max_gpu_memory_utilization",
                                                             "require_fp8_kv_cache"}


def test_kvplan_toml_with_unknown_key(capsys, tmp_path, monkeypatch):
    write(tmp_path, "kvplan.toml", "min_concurency = 4\n")
    f = write(tmp_path, "serve.sh", "vllm serve qwen2.5-7b\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "check", str(f), "--gpu", "h100")
    assert code == 2 and "kvplan.toml" in err and "did you mean 'min_concurrency'" in err


def test_headroom_and_kv_tokens_policies(capsys):
    code, report, _ = check_json(capsys, str(EXAMPLES / "docker-compose.yaml"),
                                 "--min-headroom-gib", "10", "--min-kv-tokens", "10000000")
    row = report["deployments"][0]
    assert code == 1 and {v["code"] for v in row["policy_violations"]} == {
        "min_headroom_gib",
        "min_kv_tokens",
    }


# ------------------------------------------------------------ other engines, sources


def test_sglang_and_tgi_launch_lines_are_planned_with_their_engines(capsys, tmp_path):
    f = write(tmp_path, "serve.sh", """
        python3 -m sglang.launch_server --model-path qwen2.5-7b --tp 2 --mem-fraction-static 0.85
        text-generation-launcher --model-id qwen2.5-7b --num-shard 1 --max-total-tokens 16384 \\
            --max-input-tokens 16000
    """)
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100")
    sg, tg = report["deployments"]
    assert code == 0, report
    assert sg["engine"] == "sglang" and sg["plan"]["engine"]["name"] == "sglang"
    assert sg["plan"]["inputs"]["gpu_memory_utilization"]["value"] == 0.85
    assert "--tp-size 2" in sg["plan"]["command"]
    assert tg["engine"] == "tgi" and tg["plan"]["inputs"]["max_model_len"]["value"] == 16384
    assert not any(
        p["code"] == "flags-not-modelled" for p in tg["problems"]
    )  # max_input_tokens is modelled


def test_tgi_image_with_bare_arguments_and_its_tag(capsys, tmp_path):
    """The TGI image's entrypoint is text-generation-launcher: compose `command` holds only its
    arguments; the image tag gives the release; Meta-Llama-3.1-* is the repo's first name."""
    f = write(tmp_path, "compose.yaml", """
        services:
          tgi:
            image: ghcr.io/huggingface/text-generation-inference:2.2.0
            command: --model-id meta-llama/Meta-Llama-3.1-8B-Instruct --num-shard 1
            deploy:
              resources:
                reservations:
                  devices: [{driver: nvidia, count: 1, capabilities: [gpu]}]
    """)
    code, report, _ = check_json(capsys, str(f), "--gpu", "a10g")
    row = report["deployments"][0]
    assert code == 0, row
    assert row["engine"] == "tgi" and row["plan"]["engine"]["version"] == "2.2.0"
    assert row["plan"]["engine"]["era"] == "tgi 1.4.1–2.2 accounting"
    assert (
        row["plan"]["model"]["id"] == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    )  # as the file names it
    assert any(p["code"] == "engine-version-from-file" and p["message"].startswith("TGI 2.2.0")
               for p in row["problems"])


def test_tgi_flags_from_the_container_environment(capsys, tmp_path):
    """TGI's launcher reads MODEL_ID, NUM_SHARD, MAX_INPUT_TOKENS … from the environment (the
    GKE tutorials configure it that way); a valueFrom secret is skipped; the Google Cloud image
    name …-cu124.2-3.ubuntu2204 is release 2.3; a flag on the command line wins."""
    image = ("us-docker.pkg.dev/deeplearning-platform-release/gcr.io/"
             "huggingface-text-generation-inference-cu124.2-3.ubuntu2204.py311")
    f = write(tmp_path, "k8s.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: llm}
        spec:
          template:
            spec:
              nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}
              containers:
              - name: llm
                image: IMAGE
                args: ["--max-total-tokens", "4096"]
                resources: {limits: {nvidia.com/gpu: "2"}}
                env:
                - {name: MODEL_ID, value: mistralai/Mistral-7B-Instruct-v0.3}
                - {name: NUM_SHARD, value: "2"}
                - {name: MAX_INPUT_TOKENS, value: "2048"}
                - {name: MAX_TOTAL_TOKENS, value: "8192"}
                - name: HF_TOKEN
                  valueFrom: {secretKeyRef: {name: hf, key: token}}
    """.replace("IMAGE", image))
    code, report, _ = check_json(capsys, str(f))
    row = report["deployments"][0]
    assert code == 0, row
    plan = row["plan"]
    assert row["model"] == "mistralai/Mistral-7B-Instruct-v0.3" and row["gpu"] == "NVIDIA-L4"
    assert (
        plan["engine"]["version"] == "2.3" and plan["inputs"]["tensor_parallel_size"]["value"] == 2
    )
    assert plan["inputs"]["max_model_len"]["value"] == 4096  # args beat MAX_TOTAL_TOKENS
    assert plan["inputs"]["max_num_batched_tokens"]["value"] == 2048 + 50  # v2.x: input + 50


def test_tgi_input_longer_than_total_is_a_clear_error(capsys, tmp_path):
    f = write(tmp_path, "serve.sh", "text-generation-launcher --model-id qwen2.5-7b "
                                    "--max-input-tokens 8192 --max-total-tokens 4096\n")
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100")
    row = report["deployments"][0]
    assert code == 2 and "must be below --max-total-tokens" in json.dumps(row)


def test_sglang_version_from_its_image_tag(capsys, tmp_path):
    f = write(tmp_path, "compose.yaml", """
        services:
          sglang:
            image: lmsysorg/sglang:v0.4.6.post1-cu124
            command: python3 -m sglang.launch_server --model-path qwen2.5-7b --tp 1
    """)
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100")
    row = report["deployments"][0]
    assert code == 0 and row["plan"]["engine"]["version"] == "0.4.6.post1"


def test_container_path_matched_by_folder_name(capsys, tmp_path):
    f = write(
        tmp_path, "serve.sh", "vllm serve /models/Llama-3.1-8B-Instruct --max-model-len 8192\n"
    )
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100")
    row = report["deployments"][0]
    assert code == 0 and row["plan"]["model"]["id"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert any(p["code"] == "model-from-path-name" for p in row["problems"])


def test_directive_sets_the_model_for_an_opaque_path(capsys, tmp_path):
    f = write(tmp_path, "serve.sh", """
        # kvplan: model=Qwen/Qwen2.5-7B-Instruct gpu=l4
        vllm serve /mnt/weights/prod-v3 --max-model-len 8192
    """)
    code, report, _ = check_json(capsys, str(f))
    assert (
        code == 0 and report["deployments"][0]["plan"]["model"]["id"] == "Qwen/Qwen2.5-7B-Instruct"
    )


def test_unresolvable_hub_model_offline_exits_3(capsys, tmp_path):
    f = write(tmp_path, "serve.sh", "vllm serve some-org/private-model\n")
    code, report, _ = check_json(capsys, str(f), "--gpu", "h100")
    message = report["deployments"][0]["problems"][0]["message"]
    assert code == 3 and "not cached" in message and "--offline" in message


# ------------------------------------------------------------------ flag parsing


@pytest.mark.parametrize("text,value", [("32768", 32768), ("32k", 32000), ("32K", 32768),
                                        ("1M", 2**20), ("1.5k", 1500), ("25.6k", 25600)])
def test_human_readable_ints(text, value):
    """vLLM's human_readable_int (vllm/engine/arg_utils.py): k = 10³, K = 2¹⁰."""
    assert human_int(text) == value


@pytest.mark.parametrize("text", ["", "1.5", "k", "12x", "-3"])
def test_human_readable_ints_reject(text):
    with pytest.raises(ValueError):
        human_int(text)


def test_parse_args_forms():
    found = parse_args(
        [
            "m/x",
            "--max-model-len=4096",
            "-tp",
            "2",
            "--enforce-eager",
            "--port",
            "80",
            "--trust-remote-code",
            "--no-enable-prefix-caching",
        ],
        "vllm",
        file="f",
        line=1,
        templates=Templates({}),
        text="",
    )
    assert found.model == "m/x"
    assert found.knobs == {"max_model_len": 4096, "tensor_parallel_size": 2, "enforce_eager": True,
                           "enable_prefix_caching": False}
    assert found.unknown_flags == [UnknownArg("--port", "80"), UnknownArg("--trust-remote-code")]
    assert [str(a) for a in found.unknown_flags] == ["--port 80", "--trust-remote-code"]


def test_unknown_arguments_keep_their_form():
    """`--flag=value`, a positional word and a quoted `"--flag value"` token are kept as typed
    fields: the name `kvplan check` looks flags up by, and the text as written."""
    found = parse_args(["m/x", "--port=80", "extra", "--max-seqs 4", "-"], "vllm", file="f",
                       line=1, templates=Templates({}), text="")
    port, extra, spaced, dash = found.unknown_flags
    assert (port.name, port.value, str(port), port.is_flag) == ("--port", "80", "--port=80", True)
    assert (str(extra), extra.is_flag) == ("extra", False)
    assert (spaced.name, str(spaced)) == ("--max-seqs", "--max-seqs 4")
    assert (dash.name, dash.is_flag) == ("-", True)


def test_bad_value_is_named():
    with pytest.raises(DeployParseError, match="--gpu-memory-utilization 'lots' is not a number"):
        parse_args(["m", "--gpu-memory-utilization", "lots"], "vllm", file="f", line=3,
                   templates=Templates({}), text="")


def test_dockerfile_cmd_shell_form_and_pip_version(tmp_path):
    f = write(tmp_path, "Dockerfile", """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN pip install vllm==0.11.0
        CMD vllm serve qwen2.5-7b --max-num-seqs 32 && echo done
    """)
    [found] = find_commands(f, Templates({}))
    assert found.line == 3 and found.knobs == {"max_num_seqs": 32}
    assert found.engine_version == "0.11.0" and found.unknown_flags == []


def test_readme_github_actions_job_runs_as_written(capsys, tmp_path, monkeypatch):
    """The workflow in docs/guide.md: its `kvplan check` line, run in a repo laid out as it says."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "guide.md").read_text()
    job = re.search(r"```yaml\n(name: kvplan\n.*?)```", readme, re.S).group(1)
    import yaml

    steps = yaml.safe_load(job)["jobs"]["check"]["steps"]
    [command] = [s["run"] for s in steps if "run" in s and s["run"].startswith("kvplan check")]
    (tmp_path / "deploy").mkdir()
    for name in ("k8s-deployment.yaml", "kserve.yaml"):
        shutil.copy(EXAMPLES / name, tmp_path / "deploy" / name)
    shutil.copy(EXAMPLES / "Dockerfile", tmp_path / "Dockerfile")
    monkeypatch.chdir(tmp_path)
    args = command.split()[2:]
    expanded = [str(p.relative_to(tmp_path)) for p in sorted((tmp_path / "deploy").glob("*.yaml"))]
    args = [a for a in args if a != "deploy/*.yaml"]
    code, out, _ = run(capsys, "check", *expanded, *args)
    assert code == 0, out
    assert out.count("::notice ") == 3


def test_compose_entrypoint_plus_command_and_device_ids(tmp_path):
    f = write(tmp_path, "compose.yaml", """
        services:
          a:
            image: my/vllm:latest
            entrypoint: ["vllm", "serve"]
            command: ["qwen2.5-7b", "--tensor-parallel-size", "2"]
            deploy:
              resources:
                reservations:
                  devices: [{driver: nvidia, device_ids: ["0", "1"], capabilities: [gpu]}]
          b:
            image: python:3.12
            command: vllm serve llama-3.1-8b --max-model-len=8192
          web:
            image: nginx
    """)
    a, b = find_commands(f, Templates({}))
    assert (a.model, a.knobs, a.gpu_count, a.line) == (
        "qwen2.5-7b",
        {"tensor_parallel_size": 2},
        2,
        4,
    )
    assert (b.model, b.knobs, b.line) == ("llama-3.1-8b", {"max_model_len": 8192}, 12)


def test_the_summary_adds_up_when_a_file_cannot_be_read(capsys, tmp_path, monkeypatch):
    """Issue #21 item 16: "9 deployment(s): 4 fit, 2 failed, 4 error(s)" added up to 10: a file
    that cannot be read is a file error, not a deployment error."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.sh").write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct "
                                     "--max-model-len 8192\n")
    (tmp_path / "broken.yaml").write_text("a: [unclosed\n")
    code, report, _ = check_json(capsys, ".", "--gpu", "h100")
    s = report["summary"]
    assert s["file_errors"] == 1 and s["deployments"] == 1 and s["fits"] == 1
    assert s["deployments"] == s["fits"] + s["failed"] + s["unchecked"] + s["errors"]
    code, out, _ = run(capsys, "check", ".", "--gpu", "h100")
    assert "1 deployment(s): 1 fit, 0 failed, 0 unchecked, 0 error(s); 1 file error(s)" in out


# ------------------------------------- Kubernetes $(NAME), ConfigMap images, compose merges

_DEPLOYMENT = """
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: a}
    spec:
      template:
        spec:
          containers:
          - name: vllm
            image: vllm/vllm-openai:v0.10.1
            command: ["vllm", "serve"]
            args: ["$(MODEL)", "--max-model-len=$(LEN)"]
            env:
            - {name: ORG, value: meta-llama}
            - {name: MODEL, value: "$(ORG)/Llama-3.1-8B-Instruct"}
            %s
            resources: {limits: {nvidia.com/gpu: 1}}
"""


def _one(report):
    (d,) = report["deployments"]
    return d


def test_k8s_args_read_the_containers_env_values(capsys, tmp_path):
    """Kubernetes expands $(NAME) in command and args from the container's env, and an env
    value's $(NAME) from the variables defined before it."""
    path = write(tmp_path, "d.yaml", _DEPLOYMENT % "- {name: LEN, value: '16384'}")
    code, report, _ = check_json(capsys, str(path), "--gpu", "h100")
    d = _one(report)
    assert code == 0 and d["model"] == "meta-llama/Llama-3.1-8B-Instruct", d
    assert d["plan"]["inputs"]["max_model_len"]["value"] == 16384
    assert d["plan"]["engine"]["version"] == "0.10.1"


def test_k8s_configmap_workload_keeps_its_image_release(capsys, tmp_path):
    """A Deployment whose flags come from a ConfigMap in the same file is planned at its image's
    release, as the same container without the ConfigMap is (it was planned at kvplan's newest
    vLLM before 2026-12-03)."""
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {LEN: '16384'}\n---\n"
    ref = "- name: LEN\n              valueFrom: {configMapKeyRef: {name: cfg, key: LEN}}"
    path = write(tmp_path, "d.yaml", textwrap.dedent(cm) + textwrap.dedent(_DEPLOYMENT % ref))
    code, report, _ = check_json(capsys, str(path), "--gpu", "h100")
    d = _one(report)
    assert code == 0 and d["plan"]["engine"]["version"] == "0.10.1", d
    assert d["plan"]["inputs"]["max_model_len"]["value"] == 16384


def test_k8s_expand_escapes_and_undefined_names():
    """$$(NAME) is the literal $(NAME); an undefined reference stays as written (Kubernetes'
    rules); a value may not grow the text past MAX_COMMAND_CHARS."""
    from kvplan.deploy.commands import k8s_expand
    from kvplan.sources.limits import MAX_COMMAND_CHARS

    env = {"A": "x", "BIG": "y" * MAX_COMMAND_CHARS}
    assert k8s_expand("$(A)-$$(A)-$(B)-$A", env) == "x-$(A)-$(B)-$A"
    assert k8s_expand("$(BIG) $(A)", env) == "$(BIG) x"


def test_compose_merge_keys_are_resolved(capsys, tmp_path):
    """`<<: *anchor` (YAML 1.1 merge keys, common in compose files) gives a service the image
    and GPU reservation of the anchor; the service's own keys win over merged ones."""
    path = write(tmp_path, "compose.yaml", """
        x-common: &common
          image: vllm/vllm-openai:v0.19.0
          command: ["meta-llama/Llama-3.1-70B-Instruct"]
          deploy:
            resources:
              reservations:
                devices: [{driver: nvidia, count: 1, capabilities: [gpu]}]
        services:
          a:
            <<: *common
            command: ["meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2"]
    """)
    code, report, _ = check_json(capsys, str(path), "--gpu", "h100")
    d = _one(report)
    assert d["model"] == "meta-llama/Llama-3.1-8B-Instruct", d
    assert d["plan"]["engine"]["version"] == "0.19.0"
    assert "gpu-count-mismatch" in {p["code"] for p in d["problems"]}  # 1 GPU for TP 2
    assert code == 1 and d["status"] != "fits"  # a result: it does not start on 1 GPU
