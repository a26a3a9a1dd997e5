"""Dynamo's TensorRT-LLM workers take their engine settings from a YAML file (`--extra-engine-args
PATH`, the LLM API options TensorRT-LLM's own --extra_llm_api_options reads); deployments ship it
in a ConfigMap mounted into the worker. `kvplan check` reads that file when the ConfigMap is in
the same manifest, exactly as it reads `trtllm-serve --extra_llm_api_options FILE`. dynamo.trtllm
spells its flags its own way (--model-path, --max-seq-len, --free-gpu-memory-fraction: ai-dynamo/
dynamo components/backends/trtllm/src/dynamo/trtllm/utils/trtllm_utils.py), read and written as
such; `--emit dynamo` ships a plan's options file as a ConfigMap."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema

from kvplan.api import plan
from kvplan.deploy.check import Policy, check_files
from kvplan.deploy.commands import _yaml_module
from kvplan.deploy.emit import emit

SCHEMAS = Path(__file__).parent / "schemas"

SETTINGS = """\
tensor_parallel_size: 2
max_batch_size: 64
max_num_tokens: 4096
max_seq_len: 8192
kv_cache_config:
  free_gpu_memory_fraction: 0.7
  dtype: fp8
"""


def _dgd(mount: str, items: bool = False, settings: str = SETTINGS) -> str:
    body = textwrap.indent(settings, "    ")
    return textwrap.dedent("""\
        # kvplan: gpu=h100
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: engine-config
        data:
          agg.yaml: |
        """) + body + textwrap.dedent(f"""\
        ---
        apiVersion: nvidia.com/v1alpha1
        kind: DynamoGraphDeployment
        metadata:
          name: trt
        spec:
          services:
            Worker:
              componentType: worker
              replicas: 1
              resources:
                limits:
                  gpu: "2"
              extraPodSpec:
                mainContainer:
                  command: [python3, -m, dynamo.trtllm]
                  args: [--model-path, Qwen/Qwen3-8B, --served-model-name, qwen,
                         --extra-engine-args, {mount}]
                  volumeMounts:
                    - name: cfg
                      mountPath: /engine_configs
                volumes:
                  - name: cfg
                    configMap:
                      name: engine-config
        """) + ("""\
              items:
                - key: agg.yaml
                  path: engine.yaml
""" if items else "")


def _row(path: Path):
    (row,) = check_files([path], policy=Policy(), sets={}, offline=True).deployments
    return row


def _reference(tmp_path: Path, settings: str = SETTINGS):
    """The same settings given to trtllm-serve as its own options file."""
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "options.yaml").write_text(settings)
    script = tmp_path / "ref" / "serve.sh"
    script.write_text("# kvplan: gpu=h100\ntrtllm-serve Qwen/Qwen3-8B "
                      "--extra_llm_api_options options.yaml\n")
    row = _row(script)
    assert row.plan is not None, row.problems
    return row.plan


def test_configmap_engine_args_are_read_like_the_engines_options_file(tmp_path):
    path = tmp_path / "dgd.yaml"
    path.write_text(_dgd("/engine_configs/agg.yaml"))
    row = _row(path)
    assert row.plan is not None, row.problems
    ref = _reference(tmp_path)
    assert row.plan.gpu.count == ref.gpu.count == 2
    assert {k: v.value for k, v in row.plan.inputs.items()} == {
        k: v.value for k, v in ref.inputs.items()}
    assert row.plan.kv_cache.tokens == ref.kv_cache.tokens
    assert row.plan.inputs["kv_cache_dtype"].value == "fp8"  # from the ConfigMap, not a default


def test_configmap_items_rename_the_file(tmp_path):
    path = tmp_path / "dgd.yaml"
    path.write_text(_dgd("/engine_configs/engine.yaml", items=True))
    row = _row(path)
    assert row.plan is not None, row.problems
    assert row.plan.inputs["kv_cache_dtype"].value == "fp8"


def test_a_file_not_in_the_manifest_is_said_not_read(tmp_path):
    path = tmp_path / "dgd.yaml"
    path.write_text(_dgd("engine_configs/in-the-image.yaml"))
    row = _row(path)
    assert row.plan is not None, row.problems
    assert any("not read" in p.message for p in row.problems), row.problems
    assert row.plan.inputs["kv_cache_dtype"].value != "fp8"


def test_dynamo_trtllm_flags_are_read_in_dynamos_spelling(tmp_path):
    path = tmp_path / "dgd.yaml"
    path.write_text(_dgd("/engine_configs/agg.yaml").replace(
        "--served-model-name, qwen,", "--served-model-name, qwen, --max-seq-len, '4096',"
        " --free-gpu-memory-fraction, '0.8', --publish-events-and-metrics,"))
    row = _row(path)
    assert row.plan is not None, row.problems
    # the ConfigMap's settings win over the flags, as trtllm-serve's options file does
    # (update_llm_args_with_extra_options after the flags: dynamo trtllm main.py)
    assert row.plan.inputs["max_model_len"].value == 8192
    assert row.plan.inputs["gpu_memory_utilization"].value == 0.7


def test_emitted_dynamo_trtllm_worker_ships_its_options_file_as_a_configmap(tmp_path):
    p = plan("Qwen/Qwen3-8B", "h100", engine="trtllm", kv_cache_dtype="fp8",
             max_model_len=16384)
    assert p.fits and "extra_llm_api_options" in p.command  # the fp8 KV dtype has no flag
    text = emit(p, "dynamo")
    config_map, dgd = list(_yaml_module().safe_load_all(text))
    assert config_map["kind"] == "ConfigMap" and dgd["kind"] == "DynamoGraphDeployment"
    main = dgd["spec"]["services"]["Worker"]["extraPodSpec"]["mainContainer"]
    assert main["args"][:2] == ["--model-path", "Qwen/Qwen3-8B"]
    assert "--max-seq-len" in main["args"] and "--max_seq_len" not in main["args"]
    for doc, name in ((config_map, "k8s-v1-configmap.json"),
                      (dgd, "dynamo-dynamographdeployment-v1alpha1.json")):
        jsonschema.Draft7Validator(json.loads((SCHEMAS / name).read_text())).validate(doc)
    path = tmp_path / "dgd.yaml"
    path.write_text(text)
    q = _row(path).plan
    assert q is not None
    assert {k: q.inputs[k].value for k in p.inputs} == {k: v.value for k, v in p.inputs.items()}
    assert q.kv_cache.tokens == p.kv_cache.tokens


def test_a_subpath_mount_is_the_file_itself(tmp_path):
    path = tmp_path / "dgd.yaml"
    path.write_text(_dgd("/etc/trt/engine.yaml").replace(
        "mountPath: /engine_configs", "mountPath: /etc/trt/engine.yaml\n"
        "              subPath: agg.yaml"))
    row = _row(path)
    assert row.plan is not None, row.problems
    assert row.plan.inputs["kv_cache_dtype"].value == "fp8"


def test_dynamos_own_trtllm_disagg_example_is_read(tmp_path):
    # the worker lines of ai-dynamo/dynamo components/backends/trtllm/deploy/disagg.yaml
    # (e3619ce0): Dynamo's flags, the engine settings in a file inside the image
    line = ("python3 -m dynamo.trtllm --model-path Qwen/Qwen3-0.6B --served-model-name "
            "Qwen/Qwen3-0.6B --extra-engine-args engine_configs/{role}.yaml "
            "--disaggregation-mode {role} --disaggregation-strategy decode_first")
    workers = "".join(textwrap.dedent(f"""\
            TRTLLM{role.title()}Worker:
              componentType: worker
              replicas: 1
              resources:
                limits:
                  gpu: "1"
              extraPodSpec:
                mainContainer:
                  workingDir: /workspace/components/backends/trtllm
                  command: [/bin/sh, -c]
                  args: ["{line.format(role=role)}"]
        """) for role in ("prefill", "decode"))
    path = tmp_path / "disagg.yaml"
    path.write_text("# kvplan: gpu=h100\napiVersion: nvidia.com/v1alpha1\n"
                    "kind: DynamoGraphDeployment\nmetadata:\n  name: trtllm-disagg\nspec:\n"
                    "  services:\n" + textwrap.indent(workers, "    "))
    rows = check_files([path], policy=Policy(), sets={}, offline=True).deployments
    assert len(rows) == 2
    for row in rows:
        assert row.plan is not None, row.problems
        assert row.plan.model.id == "Qwen/Qwen3-0.6B" and row.plan.engine.name == "trtllm"
        assert not [p for p in row.problems if p.severity == "error"], row.problems
        assert any("not read" in p.message for p in row.problems)


def test_a_configmaps_cache_transceiver_config_is_taken_into_the_pd_check(tmp_path):
    # the transceiver's buffers come out of the KV budget (pd_check), for the ConfigMap's file
    # exactly as for an options file beside a trtllm-serve script
    pd = SETTINGS + "cache_transceiver_config:\n  backend: UCX\n  max_tokens_in_buffer: 8192\n"
    path = tmp_path / "dgd.yaml"
    path.write_text(_dgd("/engine_configs/agg.yaml", settings=pd))
    with_pd = _row(path).plan
    ref = _reference(tmp_path, settings=pd)
    (tmp_path / "plain").mkdir()
    path = tmp_path / "plain" / "dgd.yaml"
    path.write_text(_dgd("/engine_configs/agg.yaml"))
    without = _row(path).plan
    assert with_pd is not None and without is not None
    assert with_pd.kv_cache.tokens == ref.kv_cache.tokens < without.kv_cache.tokens


def test_a_dynamo_trtllm_worker_runs_the_pytorch_backend_whatever_the_release(tmp_path):
    """dynamo.trtllm's main.py passes backend "pytorch" to the LLM API always (arg_map,
    ai-dynamo/dynamo @0567a73a); TensorRT-LLM 0.20's trtllm-serve defaults to the TensorRT
    engine, so the worker is planned as `--backend pytorch`, the plain serve line is not."""
    worker = textwrap.dedent("""\
        # kvplan: gpu=h100 engine-version=0.20.0
        apiVersion: nvidia.com/v1alpha1
        kind: DynamoGraphDeployment
        metadata:
          name: trt
        spec:
          services:
            Worker:
              componentType: worker
              resources:
                limits:
                  gpu: "1"
              extraPodSpec:
                mainContainer:
                  command: [python3, -m, dynamo.trtllm]
                  args: [--model-path, Qwen/Qwen3-8B, --max-seq-len, "8192"]
        """)
    (tmp_path / "dgd.yaml").write_text(worker)
    (tmp_path / "serve.sh").write_text("# kvplan: gpu=h100 engine-version=0.20.0\n"
                                       "trtllm-serve Qwen/Qwen3-8B --max_seq_len 8192\n")
    report = check_files([tmp_path / "dgd.yaml", tmp_path / "serve.sh"], policy=Policy(),
                         sets={}, offline=True)
    dynamo_row, serve_row = report.deployments
    assert dynamo_row.plan is not None and serve_row.plan is not None
    assert "--backend pytorch" in dynamo_row.plan.command
    assert "--backend" not in serve_row.plan.command
    # the rest are trtllm-serve's defaults (BuildConfig, KvCacheConfig 0.9): the same plan
    assert dynamo_row.plan.kv_cache.tokens == serve_row.plan.kv_cache.tokens
