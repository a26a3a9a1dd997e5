"""A `--emit k8s` pod that runs the engine on several GPUs mounts an in-memory /dev/shm: NCCL
between the GPUs needs more than a container's 64 MiB default, and the engines' own Kubernetes
examples mount one (the compose file shares the host's with `ipc: host`). Expected, from those
examples: vLLM docs/deployment/k8s.md, emptyDir {medium: Memory, sizeLimit: 2Gi}; SGLang
docker/k8s-sglang-distributed-sts.yaml, 10Gi; TGI README.md "A note on Shared Memory (shm)", 1Gi;
TensorRT-LLM has no Kubernetes example and runs its image with `docker run --ipc host`
(docs/source/quick-start-guide.md): no size limit.

The stacks' formats do the same where the file declares the engine pod's volumes: KServe's
LLMInferenceService template (its volume named `dshm`, the name of the 1Gi one in KServe's base
config/llmisvc/config-llm-template.yaml, which it replaces by a strategic merge), the llm-d
modelservice values (decode.volumes, the container's volumeMounts) and, when the vllm-stack chart
mounts none itself (no vllmConfig.tensorParallelSize), its extraVolumes / extraVolumeMounts. Where
the stack builds that part of the pod (Dynamo's operator: 8Gi; the vllm-stack chart with
tensorParallelSize: shmSize, 20Gi; KubeRay; SkyPilot's pods) the file's header says so instead."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kvplan.api import plan
from kvplan.deploy.check import Policy, check_files
from kvplan.deploy.commands import _yaml_module
from kvplan.deploy.emit import emit

SCHEMAS = Path(__file__).parent / "schemas"
SHM_MOUNT = [{"name": "shm", "mountPath": "/dev/shm"}]
EMPTY_DIR = {"vllm": {"medium": "Memory", "sizeLimit": "2Gi"},
             "sglang": {"medium": "Memory", "sizeLimit": "10Gi"},
             "tgi": {"medium": "Memory", "sizeLimit": "1Gi"},
             "trtllm": {"medium": "Memory"}}


def _deployment(engine: str, tp: int) -> dict:
    p = plan("Qwen/Qwen3-8B", "h100", engine=engine, tensor_parallel_size=tp,
             max_model_len=8192)
    assert p.fits and p.gpu.count == tp
    deployment, _service = list(_yaml_module().safe_load_all(emit(p, "k8s")))
    return deployment


@pytest.mark.parametrize("engine", sorted(EMPTY_DIR))
def test_a_tensor_parallel_pod_mounts_an_in_memory_dev_shm(engine):
    deployment = _deployment(engine, 2)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "shm", "emptyDir": EMPTY_DIR[engine]}]
    assert pod["containers"][0]["volumeMounts"] == SHM_MOUNT
    schema = json.loads((SCHEMAS / "k8s-apps-v1-deployment.json").read_text())
    jsonschema.validate(deployment, schema)


@pytest.mark.parametrize("engine", sorted(EMPTY_DIR))
def test_a_one_gpu_pod_has_no_shared_memory_volume(engine):
    pod = _deployment(engine, 1)["spec"]["template"]["spec"]
    assert "volumes" not in pod and "volumeMounts" not in pod["containers"][0]


def test_every_pod_of_a_multinode_leaderworkerset_mounts_dev_shm():
    # 8 GPUs a node: the leader's and the workers' pods both run tensor parallelism
    p = plan("meta-llama/Llama-3.1-405B", "h100", engine="sglang", tensor_parallel_size=8,
             pipeline_parallel_size=2, nodes=2)
    lws, _service = list(_yaml_module().safe_load_all(emit(p, "k8s")))
    for which in ("leaderTemplate", "workerTemplate"):
        pod = lws["spec"]["leaderWorkerTemplate"][which]["spec"]
        assert pod["volumes"] == [{"name": "shm", "emptyDir": EMPTY_DIR["sglang"]}], which
        assert pod["containers"][0]["volumeMounts"] == SHM_MOUNT, which


# ------------------------------------------------------------------ the stacks' formats

SHM_2GI = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}]  # vLLM's


def _vllm(**knobs):
    p = plan("Qwen/Qwen3-8B", "h100", engine="vllm", max_model_len=8192, **knobs)
    assert p.fits
    return p


def _docs(p, fmt: str) -> list:
    return [d for d in _yaml_module().safe_load_all(emit(p, fmt)) if d is not None]


def _valid(doc, schema_file: str) -> None:
    schema = json.loads((SCHEMAS / schema_file).read_text())
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    errors = list(cls(schema).iter_errors(doc))
    assert not errors, [e.message for e in errors[:3]]


def _header(text: str) -> str:
    """The file's comment lines as one line of text."""
    return " ".join(line[2:] for line in text.splitlines() if line.startswith("# "))


def test_a_kserve_template_of_several_gpus_sets_the_dshm_volume():
    [doc] = _docs(_vllm(tensor_parallel_size=2), "kserve")
    pod = doc["spec"]["template"]
    assert pod["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory",
                                                            "sizeLimit": "2Gi"}}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    _valid(doc, "kserve-llminferenceservice-v1alpha1.json")
    [one] = _docs(_vllm(), "kserve")  # one GPU: KServe's own 1Gi is left as it is
    assert "volumes" not in one["spec"]["template"]


def test_kserve_worker_pods_over_nodes_set_it_too():
    # DeepSeek-V3, 16 data-parallel ranks over two H200 nodes: 8 GPUs in the leader's and the
    # worker's pod alike
    p = plan("deepseek-ai/DeepSeek-V3", "h200", data_parallel_size=16,
             enable_expert_parallel=True, nodes=2)
    [doc] = _docs(p, "kserve")
    for pod in (doc["spec"]["template"], doc["spec"]["worker"]):
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert pod["volumes"][0]["name"] == "dshm"
        assert pod["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]


def test_llmd_decode_pods_of_several_gpus_mount_dev_shm():
    [doc] = _docs(_vllm(tensor_parallel_size=2), "helm-llmd")
    assert doc["decode"]["volumes"] == SHM_2GI
    assert doc["decode"]["containers"][0]["volumeMounts"] == SHM_MOUNT
    _valid(doc, "helm-llm-d-modelservice-values.json")
    [one] = _docs(_vllm(), "helm-llmd")
    assert "volumes" not in one["decode"] and "volumeMounts" not in one["decode"]["containers"][0]
    p = plan("deepseek-ai/DeepSeek-V3", "h200", data_parallel_size=16,
             enable_expert_parallel=True, nodes=2)  # the chart's LWS: one template, 8 GPUs a pod
    [lws] = _docs(p, "helm-llmd")
    assert lws["decode"]["volumes"][0]["name"] == "shm"
    assert lws["decode"]["containers"][0]["volumeMounts"] == SHM_MOUNT


def test_production_stack_mounts_one_only_where_its_chart_does_not():
    # -pp 2: no tensorParallelSize, so the chart mounts nothing at /dev/shm; the file does
    [doc] = _docs(_vllm(pipeline_parallel_size=2), "helm-production-stack")
    [spec] = doc["servingEngineSpec"]["modelSpec"]
    assert "tensorParallelSize" not in spec["vllmConfig"] and spec["requestGPU"] == 2
    assert spec["extraVolumes"] == SHM_2GI and spec["extraVolumeMounts"] == SHM_MOUNT
    _valid(doc, "helm-production-stack-values.json")
    # -tp 2: the chart's own `shm` (shmSize, 20Gi) is there; a second one would clash
    text = emit(_vllm(tensor_parallel_size=2), "helm-production-stack")
    [spec] = _yaml_module().safe_load(text)["servingEngineSpec"]["modelSpec"]
    assert spec["vllmConfig"]["tensorParallelSize"] == 2 and "extraVolumes" not in spec
    assert "the production-stack chart mounts an in-memory one when " \
        "vllmConfig.tensorParallelSize is set" in _header(text)


@pytest.mark.parametrize(("fmt", "says"), [
    ("dynamo", "Dynamo's operator mounts an in-memory one in each worker pod (8Gi"),
    ("ray", "KubeRay mounts an in-memory one in every Ray container"),
    ("skypilot", "SkyPilot's Kubernetes pods mount an in-memory one"),
])
def test_a_format_whose_stack_builds_the_pod_says_who_mounts_dev_shm(fmt, says):
    header = _header(emit(_vllm(tensor_parallel_size=2), fmt))
    assert "/dev/shm (NCCL between the 2 GPUs needs more than a container's 64 MiB)" in header
    assert says in header
    assert "/dev/shm" not in emit(_vllm(), fmt)  # one GPU: nothing to say
    if fmt == "dynamo":  # and it writes no volume the operator would replace
        [doc] = _docs(_vllm(tensor_parallel_size=2), fmt)
        assert "volumes" not in doc["spec"]["services"]["Worker"]["extraPodSpec"]


@pytest.mark.parametrize(("fmt", "knobs"), [
    ("kserve", {"tensor_parallel_size": 2}), ("helm-llmd", {"tensor_parallel_size": 2}),
    ("helm-production-stack", {"pipeline_parallel_size": 2}),
    ("dynamo", {"tensor_parallel_size": 2}), ("ray", {"tensor_parallel_size": 2}),
])
def test_kvplan_check_reads_the_file_back_as_the_same_plan(fmt, knobs, tmp_path):
    p = _vllm(**knobs)
    path = tmp_path / f"{fmt}.yaml"
    path.write_text(emit(p, fmt))
    [row] = check_files([path], policy=Policy(), sets={}, offline=True).deployments
    assert row.status == "fits", row.problems
    assert row.plan is not None and row.plan.gpu.count == 2
    assert row.plan.kv_cache.tokens == p.kv_cache.tokens
