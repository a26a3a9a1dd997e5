"""A device total given to the plan (--gpu-memory-gib: the total the engine's own log prints)
reaches `kvplan check`: an emitted file carries it as a `# kvplan: gpu-memory-gib=` directive,
`check --gpu-memory-gib` (or the policy file) sets it for files that do not say, and the hint of
an estimated total names a way check takes. The file used to lose it: planned at 75 GiB, checked
at the catalogue's 79.11."""

from __future__ import annotations

import json

import pytest
from clirun import run

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _kv(out: str) -> int:
    return json.loads(out)["kv_cache"]["tokens"]


def test_an_emitted_file_keeps_the_device_total_the_plan_used(capsys, tmp_path):
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--gpu-memory-gib", "75",
                       "--json")
    planned = _kv(out)
    code, default, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--json")
    assert _kv(default) > planned  # the catalogue's H100 total is larger than 75 GiB
    path = tmp_path / "k8s.yaml"
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--gpu-memory-gib", "75",
                       "--emit", "k8s", "-o", str(path))
    assert "# kvplan: engine-version=" in path.read_text() and \
        "gpu-memory-gib=75\n" in path.read_text()
    code, out, err = run(capsys, "check", str(path), "--gpu", "h100", "--json")
    assert code == 0, err
    (dep,) = json.loads(out)["deployments"]
    assert dep["plan"]["kv_cache"]["tokens"] == planned


def test_check_takes_the_device_total_for_files_that_do_not_say(capsys, tmp_path):
    path = tmp_path / "serve.sh"
    path.write_text(f"vllm serve {LLAMA}\n")
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--gpu-memory-gib", "75",
                       "--json")
    planned = _kv(out)
    code, out, err = run(capsys, "check", str(path), "--gpu", "h100", "--gpu-memory-gib", "75",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["deployments"][0]["plan"]["kv_cache"]["tokens"] == planned


@pytest.mark.parametrize("value", ["abc", "0", "-3", "nan", "1e9"])
def test_a_bad_device_total_directive_names_the_line(capsys, tmp_path, value):
    path = tmp_path / "serve.sh"
    path.write_text(f"# kvplan: gpu-memory-gib={value}\nvllm serve {LLAMA}\n")
    code, out, err = run(capsys, "check", str(path), "--gpu", "h100")
    assert code == 2 and "is not a device total in GiB" in " ".join((out + err).split())
