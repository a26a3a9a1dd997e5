"""Every `--emit` file whose resource publishes a schema is valid against it (tests/deploy/schemas/,
sources and versions in its README.md): Kubernetes apps/v1 Deployment + v1 Service (k8s), KServe's
LLMInferenceService CRD (kserve), Dynamo's DynamoGraphDeployment CRD (dynamo), SkyPilot's task
schemas (skypilot), the llm-d-modelservice and production-stack charts' values.schema.json
(helm-llmd, helm-production-stack), the Compose Specification (compose), over a sample of the
catalogue × engines. Each schema is also shown to refuse a wrong file, so a pass means something."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kvplan.api import plan
from kvplan.deploy.commands import _yaml_module
from kvplan.deploy.emit import emit
from kvplan.engines.registry import NAMES
from kvplan.errors import KvplanError

SCHEMAS = Path(__file__).parent / "schemas"
SAMPLE = (  # (model, GPU): dense small/large, MoE, a model that needs tensor parallelism
    ("Qwen/Qwen3-8B", "h100-sxm-80gb"), ("meta-llama/Llama-3.1-70B-Instruct", "h200-sxm-141gb"),
    ("Qwen/Qwen3-30B-A3B", "a100-sxm-80gb"), ("mistralai/Mistral-7B-Instruct-v0.3", "l40s"))


def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / name).read_text())


def fitting_plan(model: str, gpu: str, engine: str) -> Any:
    """A plan that fits: as asked, else at the tensor parallelism kvplan recommends; None when
    neither fits or the engine does not run the model."""
    try:
        p = plan(model, gpu, engine=engine)
        tp = p.recommendations.tensor_parallel_size.value
        if not p.fits and tp and tp != p.gpu.count:
            p = plan(model, gpu, engine=engine, tensor_parallel_size=int(tp))
    except KvplanError:
        return None
    return p if p.fits and p.gpu.count <= 8 else None


def _docs(fmt: str, engine: str, model: str, gpu: str) -> list[Any] | None:
    p = fitting_plan(model, gpu, engine)
    if p is None:
        return None
    try:
        text = emit(p, fmt)
    except KvplanError:  # the format does not run this engine (tested in test_emit.py)
        return None
    return [d for d in _yaml_module().safe_load_all(text) if d is not None]


def _valid(doc: Any, schema: dict[str, Any]) -> None:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    errors = sorted(cls(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, [(list(e.absolute_path), e.message) for e in errors[:5]]


@pytest.mark.parametrize("engine", NAMES)
@pytest.mark.parametrize(("model", "gpu"), SAMPLE)
def test_k8s_files_are_valid_deployment_and_service(engine, model, gpu):
    docs = _docs("k8s", engine, model, gpu)
    if docs is None:
        pytest.skip(f"{model} does not fit {gpu} on {engine}")
    deployment, service = docs
    assert (deployment["apiVersion"], deployment["kind"]) == ("apps/v1", "Deployment")
    assert (service["apiVersion"], service["kind"]) == ("v1", "Service")
    _valid(deployment, _schema("k8s-apps-v1-deployment.json"))
    _valid(service, _schema("k8s-v1-service.json"))


@pytest.mark.parametrize(("model", "gpu"), SAMPLE)
def test_kserve_files_are_valid_llminferenceservices(model, gpu):
    engines = [e for e in NAMES if _docs("kserve", e, model, gpu) is not None]
    assert engines, f"no engine emits kserve for {model} on {gpu}"
    for engine in engines:
        (doc,) = _docs("kserve", engine, model, gpu) or []
        assert (doc["apiVersion"], doc["kind"]) == ("serving.kserve.io/v1alpha1",
                                                    "LLMInferenceService")
        _valid(doc, _schema("kserve-llminferenceservice-v1alpha1.json"))


@pytest.mark.parametrize(("model", "gpu"), SAMPLE)
def test_dynamo_files_are_valid_dynamographdeployments(model, gpu):
    engines = [e for e in NAMES if _docs("dynamo", e, model, gpu) is not None]
    assert len(engines) >= 2, f"{model} on {gpu}: {engines}"
    for engine in engines:
        for doc in _docs("dynamo", engine, model, gpu) or []:
            # a ConfigMap holds the engine settings file, when the plan writes one
            name = {"DynamoGraphDeployment": "dynamo-dynamographdeployment-v1alpha1.json",
                    "ConfigMap": "k8s-v1-configmap.json"}[doc["kind"]]
            _valid(doc, _schema(name))


@pytest.mark.parametrize("engine", NAMES)
@pytest.mark.parametrize(("model", "gpu"), SAMPLE[:2])
def test_skypilot_files_are_valid_tasks(engine, model, gpu):
    docs = _docs("skypilot", engine, model, gpu)
    if docs is None:
        pytest.skip(f"{model} does not fit {gpu} on {engine}")
    _valid(docs[0], _schema("skypilot-task.json"))


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deploy"


@pytest.mark.parametrize(("path", "kind", "name"), [
    ("k8s-deployment.yaml", "Deployment", "k8s-apps-v1-deployment.json"),
    ("tgi-gke.yaml", "Deployment", "k8s-apps-v1-deployment.json"),
    ("kserve/llmisvc-pd-qwen2-7b-gpu.yaml", "LLMInferenceService",
     "kserve-llminferenceservice-v1alpha1.json"),
    ("dynamo/disagg-multinode.yaml", "DynamoGraphDeployment",
     "dynamo-dynamographdeployment-v1alpha1.json"),
    ("skypilot/serve-openai-api.yaml", None, "skypilot-task.json"),
])
def test_published_examples_are_valid_too(path, kind, name):
    # the trimmed, closed schemas accept the projects' own examples (not too strict)
    docs = [d for d in _yaml_module().safe_load_all((EXAMPLES / path).read_text())
            if isinstance(d, dict) and d.get("kind") == kind]
    assert docs
    for doc in docs:
        _valid(doc, _schema(name))


HELM = {"helm-llmd": "helm-llm-d-modelservice-values.json",
        "helm-production-stack": "helm-production-stack-values.json"}


@pytest.mark.parametrize("fmt", sorted(HELM))
@pytest.mark.parametrize(("model", "gpu"), SAMPLE)
def test_helm_values_files_are_valid_against_the_charts_schemas(fmt, model, gpu):
    engines = [e for e in NAMES if _docs(fmt, e, model, gpu) is not None]
    assert engines, f"no engine emits {fmt} for {model} on {gpu}"
    for engine in engines:
        (doc,) = _docs(fmt, engine, model, gpu) or []
        _valid(doc, _schema(HELM[fmt]))


@pytest.mark.parametrize("engine", NAMES)
def test_compose_files_are_valid_over_the_engines(engine):
    docs = _docs("compose", engine, *SAMPLE[0])
    assert docs is not None
    _valid(docs[0], _schema("compose-spec.json"))


@pytest.mark.parametrize(("name", "wrong"), [
    # a misspelt container field, a GPU count as a number where a quantity string is asked,
    # a replicas count as text
    ("k8s-apps-v1-deployment.json", {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
        "selector": {}, "template": {"spec": {"containers": [{"name": "s", "imagee": "x"}]}}}}),
    ("k8s-apps-v1-deployment.json", {"spec": {"selector": {}, "replicas": "one",
                                              "template": {}}}),
    ("k8s-v1-service.json", {"spec": {"ports": [{"port": "eighty"}]}}),
    ("kserve-llminferenceservice-v1alpha1.json", {"spec": {"parallelism": {"tensor": 0}}}),
    ("kserve-llminferenceservice-v1alpha1.json", {"spec": {"modle": {"uri": "hf://x"}}}),
    ("kserve-llminferenceservice-v1alpha1.json", {"spec": {"template": {"containers": [
        {"name": "main", "resources": {"limitz": {}}}]}}}),
    ("helm-llm-d-modelservice-values.json", {"decode": {"parallelism": {"tensor": "2"}}}),
    ("dynamo-dynamographdeployment-v1alpha1.json", {"spec": {"services": {"Worker": {
        "resources": {"limits": {"gpu": 2}}}}}}),
    ("dynamo-dynamographdeployment-v1alpha1.json", {"spec": {"services": {"Worker": {
        "extraPodSpec": {"mainContainer": {"name": "main", "comand": ["python3"]}}}}}}),
    ("skypilot-task.json", {"resources": {"acelerators": "H100:1"}}),
    ("skypilot-task.json", {"service": {"replicas": "two"}}),
    ("helm-production-stack-values.json", {"servingEngineSpec": {"modelSpec": [
        {"vllmConfig": {"maxModelLen": "long"}}]}}),
])
def test_each_schema_refuses_a_wrong_file(name, wrong):
    schema = _schema(name)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    assert list(cls(schema).iter_errors(wrong))


def test_bundled_schemas_stay_small():
    sizes = {p.name: p.stat().st_size for p in SCHEMAS.glob("*.json")}
    assert sum(sizes.values()) < 1_000_000, sizes


# ------------------------------------------------------------------ plans over several nodes

MULTINODE = (  # (model, GPU, engine, knobs): two or four whole 8-GPU nodes
    ("meta-llama/Llama-3.1-405B", "h100-sxm-80gb", "vllm",
     {"tensor_parallel_size": 8, "pipeline_parallel_size": 2, "nodes": 2}),
    ("meta-llama/Llama-3.1-405B", "h100-sxm-80gb", "sglang",
     {"tensor_parallel_size": 8, "pipeline_parallel_size": 4, "nodes": 4,
      "max_model_len": 8192}),
    ("deepseek-ai/DeepSeek-V3", "h100-sxm-80gb", "vllm",
     {"tensor_parallel_size": 8, "data_parallel_size": 2, "enable_expert_parallel": True}),
    ("meta-llama/Llama-3.1-405B", "h100-sxm-80gb", "trtllm",
     {"tensor_parallel_size": 8, "pipeline_parallel_size": 2, "nodes": 2}),
)


def _pod_spec_schema() -> dict[str, Any]:
    """Kubernetes v1 PodSpec, from the bundled Deployment schema's own definitions (the
    LeaderWorkerSet CRD's pod templates are cut to `object` in its bundled copy: they are the
    core PodTemplateSpec, checked here against the core schema instead)."""
    deployment = _schema("k8s-apps-v1-deployment.json")
    return {"$schema": deployment["$schema"], "$defs": deployment["$defs"],
            "$ref": "#/$defs/V1PodSpec"}


def _emitted(fmt: str, model: str, gpu: str, engine: str, knobs: dict[str, Any]) -> list[Any]:
    p = plan(model, gpu, engine=engine, **knobs)
    assert p.fits and p.nodes is not None and p.nodes.nodes > 1
    return [d for d in _yaml_module().safe_load_all(emit(p, fmt)) if d is not None]


@pytest.mark.parametrize(("model", "gpu", "engine", "knobs"), MULTINODE[:3])
def test_multinode_k8s_files_are_valid_leaderworkersets(model, gpu, engine, knobs):
    lws, service = _emitted("k8s", model, gpu, engine, knobs)
    assert (lws["apiVersion"], lws["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    _valid(lws, _schema("leaderworkerset-v1.json"))
    for which in ("leaderTemplate", "workerTemplate"):
        _valid(lws["spec"]["leaderWorkerTemplate"][which]["spec"], _pod_spec_schema())
    _valid(service, _schema("k8s-v1-service.json"))


@pytest.mark.parametrize(("model", "gpu", "engine", "knobs"), MULTINODE)
def test_multinode_dynamo_files_are_valid(model, gpu, engine, knobs):
    docs = _emitted("dynamo", model, gpu, engine, knobs)
    (dgd,) = [d for d in docs if d["kind"] == "DynamoGraphDeployment"]
    _valid(dgd, _schema("dynamo-dynamographdeployment-v1alpha1.json"))
    assert dgd["spec"]["services"]["Worker"]["multinode"]["nodeCount"] == knobs.get("nodes", 2)


@pytest.mark.parametrize(("model", "gpu", "engine", "knobs"), MULTINODE[:3])
def test_multinode_skypilot_files_are_valid_tasks(model, gpu, engine, knobs):
    (task,) = _emitted("skypilot", model, gpu, engine, knobs)
    _valid(task, _schema("skypilot-task.json"))
    assert task["num_nodes"] == knobs.get("nodes", 2)


@pytest.mark.parametrize("wrong", [
    {"spec": {"leaderWorkerTemplate": {"size": "two", "workerTemplate": {}}}},
    {"spec": {"leaderWorkerTemplate": {"sise": 2, "workerTemplate": {}}}},
    {"spec": {"leaderWorkerTemplate": {"restartPolicy": "Always", "workerTemplate": {}}}},
])
def test_the_leaderworkerset_schema_refuses_a_wrong_file(wrong):
    schema = _schema("leaderworkerset-v1.json")
    assert list(jsonschema.Draft7Validator(schema).iter_errors(wrong))


@pytest.mark.parametrize("path", ["llm-d/wide-ep-decode-lws.yaml", "lws/sglang-lws.yaml"])
def test_lws_published_examples_are_valid(path):
    # llm-d's wide-EP LeaderWorkerSet and LWS's own SGLang example: the closed schema is not too
    # strict. Their pod templates against V1PodSpec for LWS's example only: the Python client's
    # models take resource quantities as strings, where the API also takes integers (llm-d's
    # file writes `cpu: 32`), so that schema is stricter than the API there
    docs = [d for d in _yaml_module().safe_load_all((EXAMPLES / path).read_text())
            if isinstance(d, dict) and d.get("kind") == "LeaderWorkerSet"]
    assert docs
    for doc in docs:
        _valid(doc, _schema("leaderworkerset-v1.json"))
        for which in ("leaderTemplate", "workerTemplate"):
            if path.startswith("lws/"):
                _valid(doc["spec"]["leaderWorkerTemplate"][which]["spec"], _pod_spec_schema())


def test_the_pod_spec_schema_refuses_a_wrong_pod():
    schema = _pod_spec_schema()
    cls = jsonschema.validators.validator_for(schema)
    assert list(cls(schema).iter_errors({"containers": [{"name": "s", "comand": ["x"]}]}))
    assert not list(cls(schema).iter_errors({"containers": [{"name": "s", "command": ["x"]}]}))


def test_multinode_kserve_file_is_a_valid_data_parallel_llminferenceservice():
    # DeepSeek-V3 DP 2 × TP 8 over two nodes: one data-parallel rank a pod, a worker pod for the
    # second (KServe: LeaderWorkerSet size = data / dataLocal)
    (doc,) = _emitted("kserve", *MULTINODE[2])
    _valid(doc, _schema("kserve-llminferenceservice-v1alpha1.json"))
    spec = doc["spec"]
    assert spec["parallelism"] == {"tensor": 8, "data": 2, "dataLocal": 1}
    for pod in (spec["template"], spec["worker"]):
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    _valid(spec["worker"], _pod_spec_schema())


def test_single_node_data_parallel_kserve_file_sets_data_local():
    # KServe refuses `data` without `dataLocal` (llm_inference_service_validation.go)
    p = plan("Qwen/Qwen3-8B", "h100-sxm-80gb", data_parallel_size=2)
    (doc,) = [d for d in _yaml_module().safe_load_all(emit(p, "kserve")) if d]
    assert doc["spec"]["parallelism"] == {"tensor": 1, "data": 2, "dataLocal": 2}
    assert "worker" not in doc["spec"]


def test_multinode_llmd_values_are_valid_against_the_charts_schema():
    # the same DP 2 × TP 8 layout as llm-d modelservice values: `multinode: true`, workers 2
    (doc,) = _emitted("helm-llmd", *MULTINODE[2])
    _valid(doc, _schema("helm-llm-d-modelservice-values.json"))
    assert doc["multinode"] is True
    assert doc["decode"]["parallelism"] == {"tensor": 8, "data": 2, "dataLocal": 1, "workers": 2}


@pytest.mark.parametrize("fmt", ["dynamo", "helm-llmd", "k8s"])
def test_an_image_tag_placeholder_is_explained_in_the_header(fmt):
    """Dynamo's and llm-d's images are tagged by their own releases, which bundle an engine
    release kvplan cannot look up: the file says what VERSION stands for. The k8s file names the
    engine's own image at the planned release, so it has no placeholder to explain."""
    p = fitting_plan(*SAMPLE[0], "vllm")
    text = emit(p, fmt)
    header = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    body = text[len(header):] if text.startswith(header) else text
    if ":VERSION" in body:
        project = {"dynamo": "Dynamo", "helm-llmd": "llm-d"}[fmt]
        assert f"the {project} release whose image ships vLLM {p.engine.version}" in header
    else:
        assert "VERSION" not in header
