"""Bundled data validates; lookups work; the core stays free of CLI/Hub imports."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from kvplan import plan
from kvplan.catalog import data_dir, gpu_specs, model_entries, resolve_gpu, resolve_model
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


def test_h100_total_is_the_cuda_number_not_nvidia_smi():
    """GPUS.md: nvidia-smi 81559 MiB − 551 MiB reserved = 81008 MiB = 79.11 GiB."""
    assert resolve_gpu("h100").cuda_total_bytes == 81008 * 2**20


@pytest.mark.parametrize("ref", ["meta-llama/Llama-3.1-8B-Instruct", "META-LLAMA/LLAMA-3.1-8B-INSTRUCT",
                                 "Llama-3.1-8B-Instruct", "llama-3.1-8b", "qwen2.5-7b", "glm-4-9b"])
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


def test_core_modules_import_no_cli_or_hub_libraries():
    code = ("import sys, kvplan, kvplan.planner, kvplan.engines.vllm, kvplan.model.kv, "
            "kvplan.model.weights, kvplan.model.config, kvplan.catalog, kvplan.specs, "
            "kvplan.checkpoint\n"
            "kvplan.plan('llama-3.1-8b', 'h100')\n"
            "kvplan.sweep('llama-3.1-8b', gpus=['h100'], max_gpus=1)\n"
            "bad = [m for m in ('typer', 'rich', 'click', 'huggingface_hub') if m in sys.modules]\n"
            "print(','.join(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


def test_only_hub_module_imports_huggingface_hub():
    """DESIGN: hub.py is the one place that talks to the Hub, and it imports lazily."""
    import kvplan

    pkg = Path(kvplan.__file__).parent
    users = sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*.py")
                   if re.search(r"^\s*(from|import) huggingface_hub", p.read_text(), re.M))
    assert users == ["hub.py"]
    top_level = [line for line in (pkg / "hub.py").read_text().splitlines()
                 if line.startswith(("import huggingface_hub", "from huggingface_hub"))]
    assert top_level == []
