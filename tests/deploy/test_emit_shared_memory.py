"""A `--emit k8s` pod that runs the engine on several GPUs mounts an in-memory /dev/shm: NCCL
between the GPUs needs more than a container's 64 MiB default, and the engines' own Kubernetes
examples mount one (the compose file shares the host's with `ipc: host`). Expected, from those
examples: vLLM docs/deployment/k8s.md, emptyDir {medium: Memory, sizeLimit: 2Gi}; SGLang
docker/k8s-sglang-distributed-sts.yaml, 10Gi; TGI README.md "A note on Shared Memory (shm)", 1Gi;
TensorRT-LLM has no Kubernetes example and runs its image with `docker run --ipc host`
(docs/source/quick-start-guide.md): no size limit."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kvplan.api import plan
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
