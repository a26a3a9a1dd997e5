"""`kvplan check` reading what deployments are written as: AMD GPU limits and node labels,
TGI's environment from a ConfigMap, `kind: List` (kubectl get -o yaml), release tags it cannot
read, and a deployment piped in on standard input or a descriptor path."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clirun import run

from kvplan.deploy.check import is_stream, stream_name
from kvplan.deploy.manifests import _gpu_name

AMD = """\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: vllm-mi300x}
    spec:
      template:
        spec:
          nodeSelector: {amd.com/gpu.product-name: AMD_Instinct_MI300X}
          containers:
          - name: vllm
            image: rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715
            command: [vllm, serve, meta-llama/Llama-3.1-70B-Instruct,
                      --tensor-parallel-size, "8", --max-model-len, "32768"]
            resources: {limits: {amd.com/gpu: "%s"}}
"""


def check_text(capsys, tmp_path, text, *args, name="deploy.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    code, out, err = run(capsys, "check", str(path), "--offline", "--json", *args)
    report = json.loads(out)
    assert report["exit_code"] == code
    return code, report


def codes(row):
    return {p["code"] for p in row["problems"]}


# ------------------------------------------------------------------ AMD


def test_an_amd_gpu_limit_below_tp_is_a_mismatch(capsys, tmp_path):
    code, report = check_text(capsys, tmp_path, AMD % 4, "--gpu", "mi300x")
    (row,) = report["deployments"]
    assert (row["status"], code) == ("does-not-fit", 1)
    assert "gpu-count-mismatch" in codes(row)
    code, report = check_text(capsys, tmp_path, AMD % 8, "--gpu", "mi300x")
    assert report["deployments"][0]["status"] == "fits" and code == 0


def test_the_amd_node_label_names_the_gpu(capsys, tmp_path):
    code, report = check_text(capsys, tmp_path, AMD % 8)  # no --gpu
    (row,) = report["deployments"]
    assert (row["gpu"], row["gpu_source"]) == ("mi300x", "nodeSelector amd.com/gpu.product-name")
    assert row["plan"]["gpu"]["id"] == "mi300x" and code == 0


@pytest.mark.parametrize("value", ["AMD_Instinct_MI300X", "AMD_Instinct_MI300X_OAM",
                                   "Instinct_MI300X"])
def test_amd_product_names_map_to_the_catalogue(value):
    # the labeller's values: installation.md's example and its test fixture (main_test.go)
    assert _gpu_name(value, "amd.com/gpu.product-name") == "mi300x"
    assert _gpu_name(value, "beta.amd.com/gpu.product-name") == "mi300x"


def test_an_unknown_amd_product_keeps_the_label_value(capsys, tmp_path):
    text = (AMD % 1).replace("AMD_Instinct_MI300X", "AMD_Radeon_PRO_W7900")
    code, report = check_text(capsys, tmp_path, text)
    (row,) = report["deployments"]
    assert row["gpu"] == "AMD_Radeon_PRO_W7900" and code == 2


def test_amd_label_as_key_suffix_and_in_node_affinity(capsys, tmp_path):
    suffix = (AMD % 8).replace("{amd.com/gpu.product-name: AMD_Instinct_MI300X}",
                               '{beta.amd.com/gpu.product-name.AMD_Instinct_MI300X: "1"}')
    _, report = check_text(capsys, tmp_path, suffix)
    assert report["deployments"][0]["gpu"] == "mi300x"
    affinity = (AMD % 8).replace(
        "nodeSelector: {amd.com/gpu.product-name: AMD_Instinct_MI300X}",
        "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
        "{nodeSelectorTerms: [{matchExpressions: [{key: amd.com/gpu.product-name, "
        "operator: In, values: [AMD_Instinct_MI300X_OAM]}]}]}}}")
    _, report = check_text(capsys, tmp_path, affinity)
    row = report["deployments"][0]
    assert (row["gpu"], row["gpu_source"]) == ("mi300x", "node affinity amd.com/gpu.product-name")


@pytest.mark.parametrize(("key", "value", "gpu"), [
    ("amd.com/gpu.device-id", "75a3", "mi355x"), ("amd.com/gpu.device-id", "74A5", "mi325x"),
    ("beta.amd.com/gpu.device-id", "0x740c", "mi250x-gcd"),
    ("amd.com/gpu.device-id", "74a1", "mi300x")])
def test_amd_device_ids_map_to_the_catalogue(key, value, gpu):
    # the labeller's device-id label (gpu_specs' k8s_node_labels, each with its source)
    assert _gpu_name(value, key) == gpu


def test_amd_device_id_in_a_selector_suffix_and_node_affinity(capsys, tmp_path):
    label = "nodeSelector: {amd.com/gpu.product-name: AMD_Instinct_MI300X}"
    text = (AMD % 8).replace(label, "nodeSelector: {amd.com/gpu.device-id: 75a3}")
    _, report = check_text(capsys, tmp_path, text)
    row = report["deployments"][0]
    assert (row["gpu"], row["gpu_source"]) == ("mi355x", "nodeSelector amd.com/gpu.device-id")
    text = (AMD % 8).replace(label, 'nodeSelector: {beta.amd.com/gpu.device-id.74a5: "1"}')
    _, report = check_text(capsys, tmp_path, text)
    assert report["deployments"][0]["gpu"] == "mi325x"
    text = (AMD % 8).replace(
        label, "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
        "{nodeSelectorTerms: [{matchExpressions: [{key: amd.com/gpu.device-id, "
        "operator: In, values: ['75a3']}]}]}}}")
    _, report = check_text(capsys, tmp_path, text)
    row = report["deployments"][0]
    assert (row["gpu"], row["gpu_source"]) == ("mi355x", "node affinity amd.com/gpu.device-id")


def test_an_unknown_amd_device_id_is_named_as_one(capsys, tmp_path):
    text = (AMD % 8).replace("{amd.com/gpu.product-name: AMD_Instinct_MI300X}",
                             "{amd.com/gpu.device-id: 74b5}")  # MI300X's virtual function
    code, report = check_text(capsys, tmp_path, text)
    (row,) = report["deployments"]
    assert row["gpu"] == "AMD device id 74b5" and code == 2


def test_amd_limit_on_a_workload_read_with_its_configmap(capsys, tmp_path):
    # a ConfigMap in the file routes the Deployment through manifests.py's workload reader
    code, report = check_text(capsys, tmp_path, """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: cfg}
        data: {TP: "8"}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: v}
        spec:
          template:
            spec:
              nodeSelector: {amd.com/gpu.product-name: AMD_Instinct_MI300X}
              containers:
              - name: v
                image: rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715
                command: [vllm, serve, meta-llama/Llama-3.1-70B-Instruct,
                          --tensor-parallel-size, "$(TP)", --max-model-len, "32768"]
                envFrom: [{configMapRef: {name: cfg}}]
                resources: {limits: {amd.com/gpu: "4"}}
    """)
    (row,) = report["deployments"]
    assert row["gpu"] == "mi300x" and "gpu-count-mismatch" in codes(row) and code == 1


def test_the_no_gpu_hint_names_amds_label(capsys, tmp_path):
    text = (AMD % 8).replace("nodeSelector: {amd.com/gpu.product-name: AMD_Instinct_MI300X}",
                             "nodeSelector: {}")
    code, report = check_text(capsys, tmp_path, text)
    (row,) = report["deployments"]
    assert code == 2 and "amd.com/gpu.product-name" in row["problems"][0]["message"]


# ------------------------------------------------------------- TGI envFrom

TGI = """\
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: tgi-env}
    data: {%s MAX_TOTAL_TOKENS: "16384", MAX_INPUT_TOKENS: "16000"}
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: tgi}
    spec:
      template:
        spec:
          nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}
          containers:
          - name: tgi
            image: ghcr.io/huggingface/text-generation-inference:3.3.4
            %s
            envFrom: [{configMapRef: {name: tgi-env}}]
            resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.mark.parametrize("in_map, env", [
    ("MODEL_ID: meta-llama/Llama-3.1-8B-Instruct,", ""),  # the model from the ConfigMap
    ("", "env: [{name: MODEL_ID, value: meta-llama/Llama-3.1-8B-Instruct}]"),  # from env
])
def test_tgi_reads_its_flags_from_a_configmap(capsys, tmp_path, in_map, env):
    code, report = check_text(capsys, tmp_path, TGI % (in_map, env))
    (row,) = report["deployments"]
    assert (row["model"], row["status"], code) == ("meta-llama/Llama-3.1-8B-Instruct", "fits", 0)
    assert row["plan"]["inputs"]["max_model_len"]["value"] == 16384  # MAX_TOTAL_TOKENS


def test_tgi_args_win_over_the_configmap(capsys, tmp_path):
    text = TGI % ("MODEL_ID: meta-llama/Llama-3.1-8B-Instruct,",
                  'args: ["--max-total-tokens", "8192", "--max-input-tokens", "8000"]')
    _, report = check_text(capsys, tmp_path, text)
    assert report["deployments"][0]["plan"]["inputs"]["max_model_len"]["value"] == 8192


# ------------------------------------------------------------- kind: List

LIST = """\
    apiVersion: v1
    kind: List
    items:
    - apiVersion: apps/v1
      kind: %s
      metadata: {name: sgl}
      spec:
        template:
          spec:
            containers:
            - name: sglang
              image: lmsysorg/sglang:v0.4.9.post2-cu126
              command: [python3, -m, sglang.launch_server]
              args: [--model-path, Qwen/Qwen3-32B, --tp, "2", --context-length, "32768"]
              resources: {limits: {nvidia.com/gpu: 2}}
            nodeSelector: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}
"""


@pytest.mark.parametrize("kind", ["StatefulSet", "Deployment"])
def test_gke_label_inside_a_kind_list(capsys, tmp_path, kind):
    code, report = check_text(capsys, tmp_path, LIST % kind)
    (row,) = report["deployments"]
    assert (row["gpu"], row["gpu_source"]) == (
        "h100-80gb", "nodeSelector cloud.google.com/gke-accelerator")
    assert row["status"] == "fits" and code == 0


def test_a_list_holding_a_configmap_and_its_workload(capsys, tmp_path):
    code, report = check_text(capsys, tmp_path, """\
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: cfg}
          data: {MODEL: Qwen/Qwen3-8B}
        - apiVersion: apps/v1
          kind: Deployment
          metadata: {name: v}
          spec:
            template:
              spec:
                nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}
                containers:
                - name: v
                  image: vllm/vllm-openai:v0.19.0
                  command: [vllm, serve, "$(MODEL)", --max-model-len, "8192"]
                  envFrom: [{configMapRef: {name: cfg}}]
                  resources: {limits: {nvidia.com/gpu: 1}}
    """)
    (row,) = report["deployments"]
    assert (row["model"], row["gpu"], code) == ("Qwen/Qwen3-8B", "l4", 0)


# ------------------------------------------------------------- releases


def test_a_rocm_vllm_tag_names_the_release(capsys, tmp_path):
    _, report = check_text(capsys, tmp_path, AMD % 8)
    version = report["deployments"][0]["plan"]["inputs"]["engine_version"]
    assert version == {"value": "0.9.1", "source": "file"}


def test_a_compose_release_is_from_the_file(capsys, tmp_path):
    _, report = check_text(capsys, tmp_path, """\
        services:
          v:
            image: vllm/vllm-openai:v0.10.2
            command: [--model, Qwen/Qwen3-8B, --max-model-len, "8192"]
    """, "--gpu", "l4", name="compose.yaml")
    version = report["deployments"][0]["plan"]["inputs"]["engine_version"]
    assert version == {"value": "0.10.2", "source": "file"}


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "my.registry/team/vllm:prod-2025",
                                   "rocm/vllm-dev:nightly"])
def test_an_image_whose_tag_names_no_release_is_said(capsys, tmp_path, image):
    code, report = check_text(capsys, tmp_path, f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: v}}
        spec:
          template:
            spec:
              containers:
              - name: v
                image: {image}
                command: [vllm, serve, Qwen/Qwen3-8B, --max-model-len, "8192"]
    """, "--gpu", "l4")
    (row,) = report["deployments"]
    (said,) = [p for p in row["problems"] if p["code"] == "engine-version-unknown"]
    assert said["severity"] == "warning" and image in said["message"]
    assert row["plan"]["inputs"]["engine_version"]["source"] == "kvplan-default"
    assert code == 0  # stated, not failed
    # a release given on the command line is the one meant: nothing to say
    _, report = check_text(capsys, tmp_path, f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: v}}
        spec:
          containers:
          - {{name: v, image: "{image}", command: [vllm, serve, Qwen/Qwen3-8B]}}
    """, "--gpu", "l4", "--engine-version", "0.19.0")
    assert "engine-version-unknown" not in codes(report["deployments"][0])


def test_a_script_run_in_no_image_keeps_its_plans_default_source(capsys, tmp_path):
    _, report = check_text(capsys, tmp_path, "vllm serve Qwen/Qwen3-8B --max-model-len 8192\n",
                           "--gpu", "l4", name="serve.sh")
    (row,) = report["deployments"]
    assert "engine-version-unknown" not in codes(row)
    assert row["plan"]["inputs"]["engine_version"]["source"] == "kvplan-default"


# ------------------------------------------------------------- streams

MANIFEST = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: v}
    spec:
      template:
        spec:
          containers:
          - name: v
            image: vllm/vllm-openai:v0.19.0
            command: [vllm, serve, Qwen/Qwen3-8B, --max-model-len, "8192"]
            resources: {limits: {nvidia.com/gpu: 1}}
""")


def test_dash_reads_standard_input(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MANIFEST.encode())))
    code, out, _ = run(capsys, "check", "-", "--gpu", "l4", "--offline", "--json")
    report = json.loads(out)
    (row,) = report["deployments"]
    assert (row["file"], row["line"], row["status"], code) == ("<stdin>", 10, "fits", 0)
    assert report["exit_code"] == 0


def test_dash_twice_is_refused(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MANIFEST.encode())))
    code, out, err = run(capsys, "check", "-", "-", "--offline")
    assert code == 2 and "more than once" in err and out == ""


def test_a_terminal_on_standard_input_is_refused(capsys, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Tty())
    code, out, _ = run(capsys, "check", "-", "--offline", "--json")
    (row,) = json.loads(out)["deployments"]
    assert code == 2 and "terminal" in row["problems"][0]["message"]


def test_a_descriptor_path_is_read_as_the_stream_it_is(capsys):
    # what bash's <(helm template …) passes: /dev/fd/N, a pipe
    read, write = os.pipe()
    os.write(write, MANIFEST.encode())
    os.close(write)
    try:
        code, out, _ = run(capsys, "check", f"/dev/fd/{read}", "--gpu", "l4", "--offline",
                           "--json")
    finally:
        os.close(read)
    (row,) = json.loads(out)["deployments"]
    assert (row["file"], row["status"], code) == (f"/dev/fd/{read}", "fits", 0)


def test_a_closed_descriptor_is_an_error_row(capsys):
    read, write = os.pipe()
    os.close(read)
    os.close(write)
    code, out, _ = run(capsys, "check", f"/dev/fd/{read}", "--offline", "--json")
    report = json.loads(out)
    assert code == 2 and report["summary"]["file_errors"] == 1


@pytest.mark.parametrize("path", ["-", "/dev/stdin"])
def test_standard_input_of_a_real_process(tmp_path, path):
    """The descriptor path, not a test's stream object: a pipe into `python -m kvplan`."""
    done = subprocess.run(
        [sys.executable, "-m", "kvplan", "check", path, "--gpu", "l4", "--offline", "--json"],
        input=MANIFEST, capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    report = json.loads(done.stdout)
    shown = "<stdin>" if path == "-" else path
    assert [r["file"] for r in report["deployments"]] == [shown]
    assert done.returncode == report["exit_code"] == 0, done.stderr


def test_a_symlinked_file_out_of_its_folder_is_still_refused(capsys, tmp_path):
    outside = tmp_path / "secret.yaml"
    outside.write_text(MANIFEST)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "deploy.yaml").symlink_to(outside)
    code, out, _ = run(capsys, "check", str(repo), "--gpu", "l4", "--offline", "--json")
    (row,) = json.loads(out)["deployments"]
    assert code == 2 and "symlink" in row["problems"][0]["message"]


def test_what_counts_as_a_stream():
    assert all(map(is_stream, ["-", "/dev/stdin", "/dev/fd/63", "/proc/self/fd/3"]))
    assert not any(map(is_stream, ["deploy/dev/stdin", "/dev/fd/x", "./-x", "/dev/fd/63/.."]))


@pytest.mark.parametrize("text, name", [
    (MANIFEST, "stream.yaml"),
    ("services:\n  v:\n    image: vllm/vllm-openai:v0.19.0\n", "stream.yaml"),
    ("modelArtifacts: {uri: hf://Qwen/Qwen3-8B}\ndecode: {replicas: 1}\n", "stream.yaml"),
    ("apiVersion: v1\nkind: Pod\nspec: [\n", "stream.yaml"),  # malformed: reported as YAML
    ("# syntax=docker/dockerfile:1\nFROM vllm/vllm-openai:v0.19.0\nCMD [\"--model\", \"x\"]\n",
     "Dockerfile"),
    ("#!/bin/sh\nexport LEN=8192\nvllm serve Qwen/Qwen3-8B --max-model-len $LEN\n", "stream.sh"),
    ("vllm serve Qwen/Qwen3-8B\n", "stream.sh"),
    ("", "stream.sh"),
])
def test_stream_format_from_its_content(text, name):
    assert stream_name(text) == name


@pytest.mark.parametrize(("tag", "version"), [("v0.10.1.1", "0.10.1.1"),
                                              ("v0.8.5.post1", "0.8.5.post1"),
                                              ("0.9.2", "0.9.2"), ("latest", None)])
def test_production_stack_tag_is_read_with_its_fourth_number_and_post_release(tmp_path, tag,
                                                                              version):
    """vLLM tags its images v0.10.1.1 and v0.8.5.post1 (vllm-project/vllm releases): the
    production-stack chart's modelSpec tag is read as the release it names (it was matched
    against X.Y[.Z] only, so those planned the newest release instead)."""
    from kvplan.deploy.check import Policy, check_files

    f = tmp_path / "values.yaml"
    f.write_text("# kvplan: gpu=l40s\nservingEngineSpec:\n  modelSpec:\n  - name: a\n"
                 "    repository: vllm/vllm-openai\n    tag: \"" + tag + "\"\n"
                 "    modelURL: meta-llama/Llama-3.1-8B-Instruct\n    requestGPU: 1\n"
                 "    vllmConfig:\n      maxModelLen: 4096\n")
    (row,) = check_files([f], policy=Policy(), sets={}, offline=True).deployments
    assert row.plan is not None
    got = row.plan.inputs["engine_version"]
    if version is None:
        assert got.source == "kvplan-default"
    else:
        assert (got.value, got.source) == (version, "file")
