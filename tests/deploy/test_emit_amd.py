"""`--emit` for an AMD GPU writes what ROCm deploys with (kvplan/deploy/emit.py, GPU vendors):
the amd.com/gpu resource and a label AMD's node labeller sets instead of NVIDIA's, the engine's
ROCm image (a placeholder the header explains where no rule derives the tag), ROCm's devices in
compose; Dynamo and the GPUs of other vendors are refused. Before, every format wrote
nvidia.com/gpu, nvidia.com/gpu.product: MI300X-192GB and the CUDA image, with exit 0."""

from __future__ import annotations

import re

import pytest
from clirun import run

from kvplan.api import plan
from kvplan.deploy.check import Policy, check_files
from kvplan.deploy.commands import _yaml_module, load_yaml
from kvplan.deploy.emit import FORMATS, emit
from kvplan.errors import KvplanError
from kvplan.sources.catalog import gpu_specs

MI300X = {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}
AMD_FORMATS = [f for f in FORMATS if f != "dynamo"]


@pytest.fixture(scope="module")
def mi300x_tp2():
    p = plan("Qwen/Qwen3-8B", "mi300x", tensor_parallel_size=2)
    assert p.fits and p.engine.name == "vllm"
    return p


@pytest.mark.parametrize("fmt", AMD_FORMATS)
def test_no_format_asks_an_amd_gpu_for_nvidia_things(fmt, mi300x_tp2):
    text = emit(mi300x_tp2, fmt)
    assert "nvidia" not in text.lower() and "vllm/vllm-openai:" not in text
    assert "# kvplan: gpu=MI300X-192GB\n" in text  # what `kvplan check` reads the GPU from


def test_k8s_asks_for_amd_gpus_on_labelled_nodes_with_the_rocm_image(mi300x_tp2):
    p = mi300x_tp2
    deployment, _ = list(_yaml_module().safe_load_all(emit(p, "k8s")))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == MI300X
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"amd.com/gpu": "2"}
    assert container["image"] == f"vllm/vllm-openai-rocm:v{p.engine.version}"


def test_a_multinode_leader_worker_set_asks_for_amd_gpus():
    p = plan("meta-llama/Llama-3.1-70B-Instruct", "mi300x", tensor_parallel_size=4, nodes=2,
             gpus_per_node=2)
    lws, _ = list(_yaml_module().safe_load_all(emit(p, "k8s")))
    for role in ("leaderTemplate", "workerTemplate"):
        spec = lws["spec"]["leaderWorkerTemplate"][role]["spec"]
        assert spec["nodeSelector"] == MI300X
        assert spec["containers"][0]["resources"]["limits"] == {"amd.com/gpu": "2"}
        assert spec["containers"][0]["image"].startswith("vllm/vllm-openai-rocm:v")


def test_compose_passes_the_rocm_devices_and_no_nvidia_reservation(mi300x_tp2):
    text = emit(mi300x_tp2, "compose")
    (service,) = load_yaml(text)["services"].values()
    assert "deploy" not in service
    assert service["devices"] == ["/dev/kfd", "/dev/dri"]
    assert service["group_add"] == ["video"] and service["ipc"] == "host"
    assert service["security_opt"] == ["seccomp=unconfined"]
    assert "# kvplan: gpu-count=2\n" in text  # no reservation says how many


def test_compose_for_amd_is_valid_against_the_compose_specification(mi300x_tp2):
    import json
    from pathlib import Path

    import jsonschema

    schema = json.loads((Path(__file__).parent / "schemas" / "compose-spec.json").read_text())
    jsonschema.validate(load_yaml(emit(mi300x_tp2, "compose")), schema)


def test_kserve_runs_the_rocm_image_on_amd_gpus(mi300x_tp2):
    spec = load_yaml(emit(mi300x_tp2, "kserve"))["spec"]
    assert spec["template"]["nodeSelector"] == MI300X
    (main,) = spec["template"]["containers"]
    assert main["image"].startswith("vllm/vllm-openai-rocm:v")  # KServe's own is a CUDA build
    assert main["resources"]["limits"] == {"amd.com/gpu": "2"}


def test_the_stack_charts_are_told_the_gpus_are_amd(mi300x_tp2):
    llmd = load_yaml(emit(mi300x_tp2, "helm-llmd"))
    assert llmd["accelerator"] == {"type": "amd"} and llmd["decode"]["nodeSelector"] == MI300X
    (container,) = llmd["decode"]["containers"]
    assert container["image"] == "ghcr.io/llm-d/llm-d-rocm:VERSION"
    assert container["resources"]["limits"] == {"amd.com/gpu": "2"}
    stack = load_yaml(emit(mi300x_tp2, "helm-production-stack"))["servingEngineSpec"]
    assert stack["runtimeClassName"] == ""  # the chart's default is "nvidia"
    (model,) = stack["modelSpec"]
    assert model["requestGPUType"] == "amd.com/gpu" and model["repository"] == \
        "vllm/vllm-openai-rocm"
    (term,) = model["nodeSelectorTerms"][0]["matchExpressions"]
    assert (term["key"], term["values"]) == ("amd.com/gpu.product-name",
                                             ["AMD_Instinct_MI300X_OAM"])


def test_ray_and_skypilot_name_amd_gpus_as_they_do(mi300x_tp2):
    ray = load_yaml(emit(mi300x_tp2, "ray"))["applications"][0]["args"]["llm_configs"][0]
    assert ray["accelerator_type"] == "AMD-Instinct-MI300X-OAM"
    sky = load_yaml(emit(mi300x_tp2, "skypilot"))["resources"]
    assert sky["accelerators"] == "MI300:2"
    assert sky["image_id"].startswith("docker:vllm/vllm-openai-rocm:v")
    p = plan("Qwen/Qwen3-8B", "mi355x")  # Ray detects no type for it: the file names none
    text = emit(p, "ray")
    assert "accelerator_type" not in text and "Ray detects no accelerator type" in text


@pytest.mark.parametrize("fmt", AMD_FORMATS)
def test_kvplan_check_reads_an_amd_file_back_as_the_same_plan(fmt, mi300x_tp2, tmp_path):
    p = mi300x_tp2
    f = tmp_path / f"{fmt}.yaml"
    f.write_text(emit(p, fmt))
    (row,) = check_files([f], policy=Policy(), sets={}, offline=True).deployments
    q = row.plan
    assert q is not None, row.problems
    assert (q.model.id, q.gpu.id, q.gpu.count) == (p.model.id, p.gpu.id, p.gpu.count)
    assert (q.engine.name, q.engine.version) == (p.engine.name, p.engine.version)
    assert {k: q.inputs[k].value for k in p.inputs} == {k: v.value for k, v in p.inputs.items()}
    assert q.kv_cache.tokens == p.kv_cache.tokens


def test_check_reads_the_amd_label_and_resource_without_the_directive(tmp_path):
    """The file itself, without its `# kvplan: gpu=` line: check finds the MI300X from its node
    label and counts its amd.com/gpu limit (4 against a layout of 2 is a mismatch)."""
    p = plan("Qwen/Qwen3-8B", "mi300x", tensor_parallel_size=2)
    text = re.sub(r"# kvplan: gpu=.*\n", "", emit(p, "k8s")).replace("amd.com/gpu: '2'",
                                                                       "amd.com/gpu: '4'")
    f = tmp_path / "k8s.yaml"
    f.write_text(text)
    (row,) = check_files([f], policy=Policy(), sets={}, offline=True).deployments
    assert row.plan is not None and row.plan.gpu.id == "mi300x"
    assert any(x.code == "gpu-count-mismatch" for x in row.problems)


def test_every_catalogued_amd_gpu_has_a_node_label():
    amd = [g for g in gpu_specs() if g.vendor == "AMD"]
    assert amd and all(g.k8s_node_labels and all(x.source for x in g.k8s_node_labels)
                       for g in amd)


@pytest.mark.parametrize(("gpu", "label"), [("mi355x", ("amd.com/gpu.device-id", "75a3")),
                                            ("mi325x", ("amd.com/gpu.device-id", "74a5")),
                                            ("mi300x", ("amd.com/gpu.product-name",
                                                        "AMD_Instinct_MI300X_OAM"))])
def test_check_reads_the_node_label_emit_writes_without_the_directive(gpu, label, tmp_path):
    """One table (GpuSpec.k8s_node_labels) for both ends: the device-id label --emit selects an
    MI355X's or MI325X's nodes by names the GPU to check without the `# kvplan: gpu=` line
    (before, check read AMD's product-name label only: 'no GPU for this deployment')."""
    p = plan("Qwen/Qwen3-8B", gpu)
    text = emit(p, "k8s")
    deployment, _ = list(_yaml_module().safe_load_all(text))
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == dict([label])
    f = tmp_path / "k8s.yaml"
    f.write_text(re.sub(r"# kvplan: gpu=.*\n", "", text))
    assert "kvplan: gpu=" not in f.read_text()
    (row,) = check_files([f], policy=Policy(), sets={}, offline=True).deployments
    assert row.plan is not None, row.problems
    assert (row.gpu, row.gpu_source) == (gpu, f"nodeSelector {label[0]}")
    assert row.plan.kv_cache.tokens == p.kv_cache.tokens


@pytest.mark.parametrize(("gpu", "family"), [("mi300x", "mi30x"), ("mi355x", "mi35x")])
def test_sglang_rocm_image_names_the_family_and_leaves_the_rocm_build_to_fill(gpu, family):
    p = plan("Qwen/Qwen3-8B", gpu, engine="sglang")
    text = emit(p, "k8s")
    assert f"image: lmsysorg/sglang:v{p.engine.version}-ROCM-{family}\n" in text
    assert "# Set ROCM in the image tag" in text


def test_an_engine_without_a_rocm_image_for_the_gpu_is_refused(capsys):
    p = plan("Qwen/Qwen3-8B", "mi250x-gcd", engine="sglang")  # SGLang builds gfx942/gfx950
    with pytest.raises(KvplanError) as e:
        emit(p, "k8s")
    assert "SGLang" in str(e.value) and "gfx90a" in str(e.value)
    p = plan("Qwen/Qwen3-8B", "mi300x", engine="tgi", engine_version="1.1.0")  # -rocm from 1.2.0
    with pytest.raises(KvplanError):
        emit(p, "compose")


def test_rocm_images_by_release():
    old = plan("Qwen/Qwen3-8B", "mi300x", engine_version="0.10.0")
    text = emit(old, "k8s")  # vLLM's own ROCm image from 0.14.1; before, AMD's rocm/vllm
    assert "image: rocm/vllm:TAG\n" in text and "# Set the image TAG to the rocm/vllm tag" in text
    tgi = plan("Qwen/Qwen3-8B", "mi300x", engine="tgi")
    assert (f"image: ghcr.io/huggingface/text-generation-inference:{tgi.engine.version}-rocm\n"
            in emit(tgi, "compose"))


def test_dynamo_refuses_amd_gpus_naming_the_formats_that_do(mi300x_tp2):
    with pytest.raises(KvplanError) as e:
        emit(mi300x_tp2, "dynamo")
    assert "AMD" in str(e.value) and "dynamo" not in (e.value.hint or "")
    assert "k8s" in (e.value.hint or "")


@pytest.mark.parametrize("fmt", FORMATS)
def test_another_vendors_gpu_is_refused(fmt):
    p = plan("Qwen/Qwen3-8B", "gaudi2", gpu_memory_gib=94)
    with pytest.raises(KvplanError) as e:
        emit(p, fmt)
    assert "Intel" in str(e.value)


def test_cli_emit_for_mi300x_and_a_refusal_without_a_traceback(capsys):
    code, out, _ = run(capsys, "plan", "llama-3.1-8b-instruct", "--gpu", "mi300x", "--emit",
                       "k8s", "--offline")
    assert code == 0 and "amd.com/gpu: '1'" in out and "nvidia" not in out
    code, _, err = run(capsys, "plan", "llama-3.1-8b-instruct", "--gpu", "mi300x", "--emit",
                       "dynamo", "--offline")
    assert code != 0 and "AMD" in err and "Traceback" not in err
