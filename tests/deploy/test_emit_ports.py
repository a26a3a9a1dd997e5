"""The files `--emit` writes expose the port the engine's server listens on. The launch line
names no port, so that is the engine's own default; every file used to say 8000, while SGLang
listens on 30000 and TGI's image on 80. Expected ports, from the engines' sources:
  vLLM 8000: vllm/entrypoints/openai/cli_args.py FrontendArgs.port;
  SGLang 30000: python/sglang/srt/server_args.py ServerArgs.port;
  TGI 80 in its image (Dockerfile ENV PORT=80, which text-generation-launcher reads: `#[clap(
  default_value = "3000", long, short, env)] port`, launcher/src/main.rs v3.3.7), 3000 where the
  launcher runs on the node itself (SkyPilot's `run`);
  TensorRT-LLM 8000: tensorrt_llm/commands/serve.py `--port` default."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.api import plan
from kvplan.deploy.commands import _yaml_module, load_yaml
from kvplan.deploy.emit import emit
from kvplan.engines import registry
from kvplan.engines.base import DeploySyntax
from kvplan.engines.vllm import VllmEngine
from kvplan.errors import KvplanError

IN_IMAGE = {"vllm": 8000, "sglang": 30000, "tgi": 80, "trtllm": 8000}
ON_NODE = {"vllm": 8000, "sglang": 30000, "tgi": 3000, "trtllm": 8000}


def _plan(engine: str):
    p = plan("meta-llama/Llama-3.1-70B-Instruct", "h100", engine=engine, tensor_parallel_size=4,
             max_model_len=8192)
    assert p.fits and "--port" not in p.command
    return p


@pytest.mark.parametrize("engine", sorted(IN_IMAGE))
def test_k8s_container_and_service_use_the_engines_port(engine):
    deployment, service = list(_yaml_module().safe_load_all(emit(_plan(engine), "k8s")))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"containerPort": IN_IMAGE[engine]}]
    assert service["spec"]["ports"] == [{"port": IN_IMAGE[engine],
                                         "targetPort": IN_IMAGE[engine]}]


@pytest.mark.parametrize("engine", sorted(IN_IMAGE))
def test_compose_publishes_the_engines_port(engine):
    (service,) = load_yaml(emit(_plan(engine), "compose"))["services"].values()
    assert service["ports"] == [f"{IN_IMAGE[engine]}:{IN_IMAGE[engine]}"]


@pytest.mark.parametrize("engine", sorted(ON_NODE))
def test_skypilot_opens_the_port_the_server_listens_on_on_the_node(engine):
    # SkyServe's readiness probe and load balancer go to resources.ports
    assert load_yaml(emit(_plan(engine), "skypilot"))["resources"]["ports"] == ON_NODE[engine]


def test_a_multinode_leaderworkerset_exposes_sglangs_port_on_the_leader():
    p = plan("meta-llama/Llama-3.1-405B", "h100", engine="sglang", tensor_parallel_size=8,
             pipeline_parallel_size=2, nodes=2)
    lws, service = list(_yaml_module().safe_load_all(emit(p, "k8s")))
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert leader["ports"] == [{"containerPort": 30000}]
    assert service["spec"]["ports"] == [{"port": 30000, "targetPort": 30000}]
    task = load_yaml(emit(p, "skypilot"))
    assert task["resources"]["ports"] == 30000


class NoPortEngine(VllmEngine):
    """vLLM's accounting as `noport-serve run MODEL`, declaring no port."""

    name = "noport"
    label = "NoPort"
    syntax: DeploySyntax = dataclasses.replace(
        VllmEngine.syntax, executables=(("noport-serve", "run"),), modules=(),
        image_versions=(), pip_version=None, image_entrypoints=(), config_yaml=False,
        image="example.org/noport:{v}", dynamo_module=None, dynamo_image=None,
        stacks=frozenset(), port=None)


def test_an_engine_that_declares_no_port_is_not_given_a_guessed_one():
    engine = registry.register(NoPortEngine())
    try:
        p = plan("meta-llama/Llama-3.1-8B-Instruct", "h100", engine="noport",
                 max_model_len=8192, engine_version="0.12.0")
        for fmt in ("k8s", "compose", "skypilot"):
            with pytest.raises(KvplanError) as e:
                emit(p, fmt)
            assert "declares no port" in str(e.value), fmt
    finally:
        registry.unregister(engine.name)


# The interface the server binds when its line names no --host: SGLang ServerArgs.host
# "127.0.0.1" (server_args.py 0.4.3-0.5.9, arg_groups/arg_utils.py 0.5.23); trtllm-serve
# `--host` default "localhost" (tensorrt_llm/commands/serve.py); vLLM FrontendArgs.host None
# (all interfaces); TGI's launcher 0.0.0.0 (launcher/src/main.rs v3.3.7).
LOOPBACK = {"vllm": False, "sglang": True, "tgi": False, "trtllm": True}


@pytest.mark.parametrize("engine", sorted(LOOPBACK))
def test_a_server_that_binds_loopback_is_told_to_listen_on_every_interface(engine):
    """A port is only reachable from the Service, the published port or the probe when the
    server listens beyond the loopback interface: SGLang's and trtllm-serve's do not unless
    told, so their container (and node) lines carry --host 0.0.0.0; the others' are as
    planned."""
    p = _plan(engine)
    deployment, _ = list(_yaml_module().safe_load_all(emit(p, "k8s")))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    line = " ".join(container.get("command", []) + container.get("args", []))
    compose = load_yaml(emit(p, "compose"))
    (service,) = compose["services"].values()
    sky = load_yaml(emit(p, "skypilot"))
    for text in (line, " ".join(service["entrypoint"]), sky["run"]):
        assert ("--host 0.0.0.0" in text) is LOOPBACK[engine], (engine, text)
