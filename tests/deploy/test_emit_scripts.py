"""A plan whose serve line is a script — TensorRT-LLM writes its --extra_llm_api_options YAML with
a heredoc first when a setting has no flag (an fp8 KV cache) — is emitted as a script the
container runs (`/bin/sh -c`), and `kvplan check` reads the heredoc's file as the engine's options
file: the files round-trip to the same plan."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kvplan.api import plan
from kvplan.deploy.check import Policy, check_files
from kvplan.deploy.commands import _heredocs, _yaml_module
from kvplan.deploy.emit import emit

SCHEMAS = Path(__file__).parent / "schemas"


@pytest.fixture(scope="module")
def scripted():
    p = plan("Qwen/Qwen3-8B", "h100", engine="trtllm", kv_cache_dtype="fp8")
    assert p.fits and "<<'EOF'" in p.command  # the fp8 KV dtype is a YAML setting only
    return p


def _checked(text: str, tmp_path: Path, name: str):
    path = tmp_path / name
    path.write_text(text)
    (row,) = check_files([path], policy=Policy(), sets={}, offline=True).deployments
    assert row.plan is not None, row.problems
    return row.plan


@pytest.mark.parametrize("fmt", ["k8s", "compose", "skypilot", "dynamo"])
def test_scripted_plans_round_trip(scripted, fmt, tmp_path):
    q = _checked(emit(scripted, fmt), tmp_path, f"{fmt}.yaml")
    assert q.inputs["kv_cache_dtype"].value == "fp8"
    assert {k: q.inputs[k].value for k in scripted.inputs} == {
        k: v.value for k, v in scripted.inputs.items()}
    assert q.kv_cache.tokens == scripted.kv_cache.tokens


def test_the_k8s_container_runs_the_script_and_stays_valid(scripted):
    deployment, _ = list(_yaml_module().safe_load_all(emit(scripted, "k8s")))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # trtllm-serve binds localhost unless told: the container's line listens on every interface
    assert container["command"] == ["/bin/sh", "-c", scripted.command + " --host 0.0.0.0"]
    schema = json.loads((SCHEMAS / "k8s-apps-v1-deployment.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(deployment)


def test_the_serve_script_itself_checks(scripted, tmp_path):
    q = _checked(f"# kvplan: gpu=h100\n{scripted.command}\n", tmp_path, "serve.sh")
    assert q.kv_cache.tokens == scripted.kv_cache.tokens


def test_heredocs_are_read_as_files_not_commands():
    lines = ["cat > a.yaml <<'EOF'", "x: 1", "EOF", "cat > b.yaml <<-END", "\ty: 2", "\tEND",
             "cat > c.yaml <<EOF", "never closed"]
    files, data = _heredocs(lines)
    assert files == {"a.yaml": "x: 1\n", "b.yaml": "y: 2\n"}
    assert data == {0, 1, 2, 3, 4, 5}  # the unterminated one is left as it is
