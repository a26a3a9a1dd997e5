"""Bundled data validates; lookups work."""

import json

import pytest
from pydantic import ValidationError

from kvplan import plan
from kvplan.sources.catalog import data_dir, gpu_specs, model_entries, resolve_gpu, resolve_model
from kvplan.specs import GpuSpec


def test_every_gpu_file_validates_with_sources():
    gpus = gpu_specs()
    assert len(gpus) >= 42  # every row of reference/gpus.csv
    for g in gpus:
        assert g.sources or g.smi_total_source, g.id
        assert g.cuda_total_source


def test_gpu_schema_forbids_unknown_keys():
    raw = json.loads((data_dir("gpu_specs") / "h100-sxm-80gb.json").read_text())
    with pytest.raises(ValidationError):
        GpuSpec.model_validate({**raw, "memory_gib": 80})


@pytest.mark.parametrize("name,gpu_id", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm-80gb"), ("h100", "h100-sxm-80gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("H200", "h200-sxm-141gb"), ("nvidia l40s", "l40s"),
])
def test_gpu_lookup_by_smi_name_and_alias(name, gpu_id):
    assert resolve_gpu(name).id == gpu_id


def test_a_family_name_with_variants_of_other_memory_is_asked_about_not_guessed(capsys):
    """Issue #21 item 11: `--gpu a100` silently meant the 80 GB SXM part while a 40 GB part (half
    the KV cache) exists. A family name several catalogue GPUs share exits 2 naming them."""
    from clirun import run

    from kvplan.errors import UnknownGpuError

    with pytest.raises(UnknownGpuError) as e:
        resolve_gpu("a100")
    assert sorted(e.value.suggestions) == ["a100-pcie-80gb", "a100-sxm-40gb", "a100-sxm-80gb"]
    code, out, _ = run(capsys, "plan", "llama-3.1-8b-instruct", "--gpu", "A100", "--json")
    error = json.loads(out)["error"]
    assert code == 2 and "ambiguous" in error["message"]
    assert "'a100-sxm-40gb' (A100 SXM4 40GB)" in error["hint"]
    assert resolve_gpu("a100-40gb").id == "a100-sxm-40gb"  # a name with the size is no question


def test_every_alias_is_safe_for_capacity_among_the_variants_it_could_mean():
    """An alias may stand for one of several variants (`h100` → SXM, not PCIe or NVL) only when
    no variant it could mean has less memory: its capacity answer then holds for all of them."""
    gpus = gpu_specs()
    for g in gpus:
        for alias in g.aliases:
            words = set(alias.lower().split("-"))
            for other in gpus:
                if words <= set(other.id.split("-")):
                    assert (other.memory_gb_marketing or 0) >= (g.memory_gb_marketing or 0), (
                        alias, g.id, other.id)


def test_h100_total_is_the_cuda_number_not_nvidia_smi():
    """GPUS.md: nvidia-smi 81559 MiB − 551 MiB reserved = 81008 MiB = 79.11 GiB."""
    assert resolve_gpu("h100").cuda_total_bytes == 81008 * 2**20


@pytest.mark.parametrize(
    "ref",
    [
        "meta-llama/Llama-3.1-8B-Instruct",
        "META-LLAMA/LLAMA-3.1-8B-INSTRUCT",
        "Llama-3.1-8B-Instruct",
        "llama-3.1-8b",
        "qwen2.5-7b",
        "glm-4-9b",
    ],
)
def test_model_lookup_case_insensitive_and_aliases(ref):
    assert resolve_model(ref).num_layers > 0


@pytest.mark.parametrize("ref,config_of", [
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "deepseek-ai/DeepSeek-V2-Lite"),
])
def test_a_sibling_repo_alias_plans_under_its_own_name(ref, config_of):
    """An alias that is another repo (same config) keeps its name: the serve line must point
    at the repo the user asked for, not at the one whose config is bundled."""
    p = plan(ref, "h200", tensor_parallel_size=2)
    assert p.model.id == ref and p.command.startswith(f"vllm serve {ref} ")
    assert config_of in p.model.source


def test_every_catalogue_model_is_fully_modelled():
    for e in model_entries():
        assert resolve_model(e.id).unsupported == [], e.id
