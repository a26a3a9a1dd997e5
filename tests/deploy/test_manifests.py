"""`kvplan check` on Dynamo, KServe, llm-d, production-stack, Ray Serve and SkyPilot manifests
(kvplan/deploy/manifests.py): the real examples in examples/deploy/<format>/ are recognised pool by
pool and fit; each deliberately broken copy fails at the line of the pool that is broken."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from clirun import run

from kvplan.deploy.commands import Templates, find_commands
from kvplan.deploy.manifests import manifest_commands
from kvplan.deploy.shell_vars import expand, integer_arithmetic

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deploy"
FORMATS = ("dynamo", "kserve", "llm-d", "lws", "production-stack", "ray", "skypilot")

# Serving pools in each real example, counted by hand from the source files: a Dynamo frontend is
# no server; service.yaml lists 5 accelerator candidates, each checked.
POOLS = {
    "dynamo/disagg.yaml": 2, "dynamo/disagg-multinode.yaml": 2, "dynamo/v1beta1-agg.yaml": 1,
    "kserve/llmisvc-pd-qwen2-7b-gpu.yaml": 2, "llm-d/ms-pd-values.yaml": 2,
    "llm-d/wide-ep-decode-lws.yaml": 1, "lws/sglang-lws.yaml": 1,
    "production-stack/values-04-multiple-models.yaml": 2,
    "ray/llm-config.yaml": 2, "ray/pd-nixl-config.yaml": 2, "skypilot/serve-openai-api.yaml": 1,
    "skypilot/service.yaml": 5,
}
# broken copy → (line of the broken pool's command, the error code that fails it); the lines are
# those of the command in each file (its header says what was broken).
BROKEN = {
    "dynamo/broken-disagg.yaml": (53, "max-model-len-above-model-maximum"),
    "kserve/broken-llmisvc-pd-qwen2-7b-gpu.yaml": (69, "gpu-count-mismatch"),
    "llm-d/broken-ms-pd-values.yaml": (80, "max-model-len-above-model-maximum"),
    "llm-d/broken-wide-ep-decode-lws.yaml": (37, "gpu-count-mismatch"),
    "lws/broken-sglang-lws.yaml": (26, "gpu-count-mismatch"),
    "production-stack/broken-values-04-multiple-models.yaml": (25, "gpu-count-mismatch"),
    "ray/broken-llm-config.yaml": (15, "max-model-len-above-model-maximum"),
    "skypilot/broken-serve-openai-api.yaml": (33, "max-model-len-above-model-maximum"),
}


def check_json(capsys, *args):
    code, out, err = run(capsys, "check", *args, "--offline", "--json")
    return code, json.loads(out), err


@pytest.fixture(scope="module")
def report():
    """One check over every format folder (the run the README and the workflow make)."""
    from kvplan.deploy.check import Policy, check_files

    return check_files([EXAMPLES / f for f in FORMATS], policy=Policy(), sets={},
                       offline=True).model_dump()


def rows_of(report, name):
    return [r for r in report["deployments"] if r["file"].endswith("/" + name)]


def test_every_format_folder_has_a_real_example_and_a_broken_copy():
    for fmt in FORMATS:
        names = [p.name for p in (EXAMPLES / fmt).glob("*.yaml")]
        assert any(n.startswith("broken-") for n in names), fmt
        assert any(not n.startswith("broken-") for n in names), fmt
    assert set(POOLS) | set(BROKEN) == {f"{p.parent.name}/{p.name}"
                                        for fmt in FORMATS for p in (EXAMPLES / fmt).glob("*.yaml")}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_real_example_pools_are_all_recognised_and_fit(report, name):
    rows = rows_of(report, name)
    assert len(rows) == POOLS[name], [r["command"] for r in rows]
    for r in rows:
        assert r["status"] == "fits", (r["line"], r["problems"])


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_copy_fails_at_the_broken_pool(report, name):
    line, code = BROKEN[name]
    failing = [r for r in rows_of(report, name) if r["status"] != "fits"]
    assert [r["line"] for r in failing] == [line]
    assert failing[0]["status"] in ("error", "does-not-fit")
    assert code in {p["code"] for p in failing[0]["problems"]}


def test_disaggregated_dynamo_file_checks_both_pools(report):
    rows = rows_of(report, "dynamo/disagg.yaml")
    notes = " ".join(p["message"] for r in rows for p in r["problems"])
    assert "VllmDecodeWorker (decode pool)" in notes and "VllmPrefillWorker (prefill pool)" in notes
    assert "--is-prefill-worker" in notes  # Dynamo's own flag, named and not planned


def test_multinode_gpus_are_node_count_times_limit(report):
    # decode: multinode.nodeCount 2 × resources.limits.gpu 1 = 2 GPUs for TP 2: fits, no mismatch
    for r in rows_of(report, "dynamo/disagg-multinode.yaml"):
        assert r["plan"]["gpu"]["count"] == 2
        assert "gpu-count-mismatch" not in {p["code"] for p in r["problems"]}


def test_wide_ep_data_parallel_size_comes_from_shell_arithmetic(report):
    (row,) = rows_of(report, "llm-d/wide-ep-decode-lws.yaml")
    # $((LWS_GROUP_SIZE * DP_SIZE_LOCAL)) = size 1 × DP_SIZE_LOCAL 8
    assert row["plan"]["inputs"]["data_parallel_size"]["value"] == 8
    (broken,) = [r for r in rows_of(report, "llm-d/broken-wide-ep-decode-lws.yaml")]
    assert "16" in next(p["message"] for p in broken["problems"]
                        if p["code"] == "gpu-count-mismatch")


def test_llmd_values_take_parallelism_and_gpu_label(report):
    decode, prefill = rows_of(report, "llm-d/ms-pd-values.yaml")
    assert decode["plan"]["inputs"]["tensor_parallel_size"]["value"] == 4  # parallelism.tensor
    assert prefill["plan"]["inputs"]["gpu_memory_utilization"]["value"] == 0.95
    assert decode["gpu"] == "H200" and decode["gpu_source"] == "nodeSelector gpu.nvidia.com/model"


def test_production_stack_reads_each_model_spec(report):
    llama, mistral = rows_of(report, "production-stack/values-04-multiple-models.yaml")
    assert llama["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert llama["plan"]["inputs"]["max_model_len"]["value"] == 4096  # vllmConfig.maxModelLen
    assert mistral["model"] == "mistralai/Mistral-7B-Instruct-v0.3"  # the file's directive


def test_ray_and_skypilot_gpu_fields(report):
    assert {r["gpu"] for r in rows_of(report, "ray/llm-config.yaml")} == {"A10G"}
    assert [r["gpu"] for r in rows_of(report, "skypilot/service.yaml")] == [
        "l4", "a10g", "a10", "a100-sxm-40gb", "a100-sxm-80gb"]


def test_kserve_additional_args_from_env(report):
    rows = rows_of(report, "kserve/llmisvc-pd-qwen2-7b-gpu.yaml")
    assert all("--kv-transfer-config" in r["command"] for r in rows)  # VLLM_ADDITIONAL_ARGS


def test_cli_exit_code_and_annotations_on_a_broken_copy(capsys):
    code, out, _ = run(capsys, "check", str(EXAMPLES / "llm-d" / "broken-wide-ep-decode-lws.yaml"),
                       "--offline", "--format", "github")
    assert code == 1
    assert "::error file=" in out and "broken-wide-ep-decode-lws.yaml,line=37" in out


def test_unrendered_helm_value_is_unchecked_with_the_reason(capsys, tmp_path):
    path = tmp_path / "values.yaml"
    path.write_text(textwrap.dedent("""\
        servingEngineSpec:
          modelSpec:
          - name: m
            modelURL: "{{ .Values.model }}"
            requestGPU: 1
    """))
    code, report, _ = check_json(capsys, str(path), "--gpu", "h100")
    (row,) = report["deployments"]
    assert row["status"] == "unchecked" and "--set model=VALUE" in row["problems"][0]["message"]
    assert code == 0


def test_documents_not_recognised_keep_the_generic_reader(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("services:\n  a:\n    image: vllm/vllm-openai:v0.19.0\n"
                    "    command: [--model, Qwen/Qwen3-0.6B]\n")
    t = Templates(values={})
    found = find_commands(path, t)
    assert manifest_commands(path, found, t) == found


@pytest.mark.parametrize(("expr", "value"), [("1 * 8", 8), ("(2+2)*4", 16), ("7/2", 3),
                                            ("8 * X", None), ("__import__('os')", None)])
def test_integer_arithmetic(expr, value):
    assert integer_arithmetic(expr) == value


def test_expand_fills_variables_then_arithmetic():
    env = {"LWS_GROUP_SIZE": "2", "DP_SIZE_LOCAL": "8"}
    assert expand("--dp $((LWS_GROUP_SIZE * DP_SIZE_LOCAL)) --l ${DP_SIZE_LOCAL} "
                      "--r ${LWS_WORKER_INDEX:-0} --a $UNKNOWN", env) == \
        "--dp 16 --l 8 --r 0 --a $UNKNOWN"


def check_text(capsys, tmp_path, text, *args):
    path = tmp_path / "deploy.yaml"
    path.write_text(textwrap.dedent(text))
    return check_json(capsys, str(path), *args)


def test_flags_from_a_configmap_in_the_same_file(capsys, tmp_path):
    # $(VAR) in args is Kubernetes' own expansion from the container's env
    code, report, _ = check_text(capsys, tmp_path, """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: serving}
        data: {MODEL: Qwen/Qwen3-8B, MAX_LEN: "16384"}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: qwen}
        spec:
          replicas: 2
          template:
            spec:
              nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}
              containers:
              - name: vllm
                image: vllm/vllm-openai:v0.19.0
                args: ["--model", "$(MODEL)", "--max-model-len", "$(MAX_LEN)"]
                envFrom: [{configMapRef: {name: serving}}]
                resources: {limits: {nvidia.com/gpu: 1}}
    """)
    (row,) = report["deployments"]
    assert row["model"] == "Qwen/Qwen3-8B" and row["gpu"] == "l4"
    assert row["gpu_source"] == "nodeSelector cloud.google.com/gke-accelerator"
    assert row["plan"]["inputs"]["max_model_len"]["value"] == 16384


def test_nim_service_environment(capsys, tmp_path):
    code, report, _ = check_text(capsys, tmp_path, """\
        apiVersion: apps.nvidia.com/v1alpha1
        kind: NIMService
        metadata: {name: llama}
        spec:
          image: {repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: "1.3.3"}
          env:
          - {name: NIM_MAX_MODEL_LEN, value: "8192"}
          - {name: NIM_TENSOR_PARALLEL_SIZE, value: "2"}
          resources: {limits: {nvidia.com/gpu: 1}}
          nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
    """)
    (row,) = report["deployments"]
    # the image's name is the catalogue alias; TP 2 on a pod with 1 GPU will not start
    assert row["model"] == "llama-3.1-8b-instruct" and row["status"] == "does-not-fit"
    assert row["plan"]["inputs"]["max_model_len"]["value"] == 8192
    assert "gpu-count-mismatch" in {p["code"] for p in row["problems"]}
    assert code == 1


def test_inference_service_huggingface_runtime(capsys, tmp_path):
    code, report, _ = check_text(capsys, tmp_path, """\
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata: {name: qwen}
        spec:
          predictor:
            model:
              modelFormat: {name: huggingface}
              args: [--model_name=qwen, --model_id=Qwen/Qwen2.5-7B-Instruct, --max_model_len=8192]
              resources: {limits: {nvidia.com/gpu: "1"}}
    """, "--gpu", "l40s")
    (row,) = report["deployments"]
    assert row["model"] == "Qwen/Qwen2.5-7B-Instruct" and row["status"] == "fits"
    assert row["plan"]["inputs"]["max_model_len"]["value"] == 8192  # --max_model_len


def test_gke_accelerator_label_on_a_plain_deployment(capsys, tmp_path):
    code, report, _ = check_text(capsys, tmp_path, """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: qwen}
        spec:
          template:
            spec:
              nodeSelector: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}
              containers:
              - name: vllm
                image: vllm/vllm-openai:v0.19.0
                command: [vllm, serve, Qwen/Qwen3-8B]
                resources: {limits: {nvidia.com/gpu: 1}}
    """)
    (row,) = report["deployments"]
    assert (row["gpu"], row["status"]) == ("h100-80gb", "fits")
    assert row["plan"]["gpu"]["id"] == "h100-sxm-80gb"


def test_expand_cannot_multiply_a_script_past_the_command_limit():
    from kvplan.sources.limits import MAX_COMMAND_CHARS

    env = {"A": "$A" * 1000}  # each round would multiply the text a thousandfold
    assert len(expand("vllm serve $A", env)) <= MAX_COMMAND_CHARS


def test_a_leaderworkerset_group_is_planned_over_its_pods_nodes(report):
    # LWS's own SGLang example: size 2, one GPU a pod, --tp 2 with --nnodes $(LWS_GROUP_SIZE):
    # two nodes of one GPU, TP across them (the plan warns that its all-reduces cross nodes)
    (row,) = rows_of(report, "lws/sglang-lws.yaml")
    nodes = row["plan"]["nodes"]
    assert row["status"] == "fits" and (nodes["nodes"], nodes["gpus_per_node"]) == (2, 1)
    assert nodes["tensor_parallel_link"] == "scale-out"
