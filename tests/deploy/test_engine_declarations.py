"""What deployment files know of an engine (its container image, Dynamo's backend module and
image, the stacks that run it) is the engine's own declaration (DeploySyntax), read from the
registry: kvplan/deploy/ names no engine, and a plugin engine's declaration is what `--emit` and
`kvplan check` use."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvplan.api import plan
from kvplan.deploy.commands import _yaml_module, load_yaml
from kvplan.deploy.emit import emit
from kvplan.deploy.manifests import dynamo_modules, stack_engine
from kvplan.engines import registry
from kvplan.engines.base import STACKS, DeploySyntax
from kvplan.engines.vllm import VllmEngine
from kvplan.errors import KvplanError

DEPLOY = Path(__file__).resolve().parents[2] / "kvplan" / "deploy"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _strings_outside_docstrings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            docs.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


@pytest.mark.parametrize("name", ["emit.py", "manifests.py"])
def test_deploy_code_names_no_engine(name):
    # an engine's name as a word in a string the code uses (format field names such as KServe's
    # VLLM_ADDITIONAL_ARGS or production-stack's vllmConfig are the format's, not a word)
    words = re.compile(r"\b(" + "|".join(map(re.escape, registry.names())) + r")\b", re.I)
    hits = [(line, s) for line, s in _strings_outside_docstrings(DEPLOY / name) if words.search(s)]
    assert not hits, hits


def test_every_stack_has_one_engine_and_dynamo_backends_are_declared():
    for stack in STACKS:
        assert stack_engine(stack) in registry.names()
    # each built-in engine's Dynamo module is `dynamo.<something>` and maps back to it
    for module, engine in dynamo_modules().items():
        assert module.startswith("dynamo.")
        assert registry.get(engine).syntax.dynamo_module == module


class StackEngine(VllmEngine):
    """vLLM's accounting as `plugin-serve run MODEL`, with its own image and Dynamo backend and
    no stack of its own."""

    name = "plugin"
    label = "PluginServe"
    syntax: DeploySyntax = dataclasses.replace(
        VllmEngine.syntax, executables=(("plugin-serve", "run"),), modules=(),
        image_versions=(), pip_version=None, image_entrypoints=(), config_yaml=False,
        image="example.org/plugin-serve:{v}", dynamo_module="dynamo.plugin",
        dynamo_image="example.org/dynamo-plugin-runtime:{v}", stacks=frozenset())


@pytest.fixture
def plugin() -> Iterator[StackEngine]:
    engine = registry.register(StackEngine())
    try:
        yield engine
    finally:
        registry.unregister(engine.name)


def test_emit_reads_a_plugin_engines_declaration(plugin, tmp_path):
    p = plan(MODEL, "h100", engine="plugin", max_model_len=8192, engine_version="0.12.0")
    deployment, _ = list(_yaml_module().safe_load_all(emit(p, "k8s")))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "example.org/plugin-serve:0.12.0"
    assert container["command"][:2] == ["plugin-serve", "run"]
    doc = load_yaml(emit(p, "dynamo"))
    main = doc["spec"]["services"]["Worker"]["extraPodSpec"]["mainContainer"]
    assert main["command"] == ["python3", "-m", "dynamo.plugin"]
    assert main["image"] == "example.org/dynamo-plugin-runtime:VERSION"
    with pytest.raises(KvplanError) as e:  # KServe runs the engine that declares the stack
        emit(p, "kserve")
    assert "--engine vllm" in (e.value.hint or "")
    # `kvplan check` reads the plugin's Dynamo worker back as the plugin
    from kvplan.deploy.check import Policy, check_files

    path = tmp_path / "dgd.yaml"
    path.write_text(emit(p, "dynamo"))
    (row,) = check_files([path], policy=Policy(), sets={}, offline=True).deployments
    assert row.plan is not None and row.plan.engine.name == "plugin", row.problems


def test_dynamo_tensorrt_llm_worker_uses_dynamos_tensorrtllm_runtime_image():
    # the image Dynamo publishes for its TensorRT-LLM backend is tensorrtllm-runtime (dynamo
    # deploy/cloud/operator: defaultTRTLLMRuntimeImage), not the engine's registry name
    p = plan("Qwen/Qwen3-8B", "h100", engine="trtllm")
    main = load_yaml(emit(p, "dynamo"))["spec"]["services"]["Worker"]["extraPodSpec"][
        "mainContainer"]
    assert main["image"] == "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:VERSION"
    assert main["command"] == ["python3", "-m", "dynamo.trtllm"]
