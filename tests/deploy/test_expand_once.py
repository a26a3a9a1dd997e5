"""A variable's value is expanded once, by whoever expands it.

- sh: the result of a parameter expansion is not scanned for `$` again (POSIX Shell Command
  Language 2.6: the expansions are made once, in order, and 2.6.2 "Parameter Expansion"), so with
  A='$B' and B=4096, `--max-model-len $A` passes the text `$B` to the engine, which vLLM refuses
  (not an integer). kvplan says so, rather than calling it an unexpanded variable to set.
- Kubernetes: `$(NAME)` in a container's command, args and env values is NAME's value and `$$` is
  a literal `$`, expanded once before the container starts (Kubernetes API reference,
  Container.args / EnvVar.value: "Variable references $(VAR_NAME) are expanded using the
  container's environment … Double $$ are reduced to a single $", kubernetes.io/docs/reference/
  kubernetes-api/workload-resources/pod-v1/; kubernetes/kubernetes
  third_party/forked/golang/expansion/expand.go). In a `sh -c` script that runs first and the
  shell then expands what it left: `$(A)` with A='$B' becomes `$B`, which the shell fills in.
  With no shell (an exec-form argv) nothing else is expanded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.deploy.commands import Templates, find_commands, k8s_expand
from kvplan.deploy.manifests import manifest_commands

A_IS_DOLLAR_B = 'env: [{name: A, value: "$B"}, {name: B, value: "4096"}]'


def deployment(env: str, args: str, command: str = '["/bin/sh", "-c"]') -> str:
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: c}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          {env}
          command: {command}
          args: {args}
          resources: {{limits: {{nvidia.com/gpu: "1"}}}}
"""


def read(tmp_path: Path, text: str, name: str = "d.yaml") -> list:
    path = tmp_path / name
    path.write_text(text)
    templates = Templates({})
    return manifest_commands(path, find_commands(path, templates), templates)


@pytest.mark.parametrize("reference", ["$A", "${A}", '"$A"', "${C:-$A}"])
def test_a_value_holding_a_dollar_is_not_expanded_again_by_the_shell(tmp_path, reference):
    """A='$B', B=4096: sh gives vLLM the text `$B` (not 4096); the error says why, and does not
    ask to set B (it is set)."""
    text = deployment(A_IS_DOLLAR_B,
                      f"['vllm serve qwen2.5-7b --max-model-len {reference}']")
    [found] = read(tmp_path, text)
    assert found.knobs.get("max_model_len") != 4096
    assert found.error is not None
    assert "the text '$B'" in str(found.error) and "once" in str(found.error)
    assert "unexpanded variable" not in str(found.error)


def test_a_single_quoted_dollar_of_a_known_variable_is_text(tmp_path):
    text = deployment(A_IS_DOLLAR_B, "[\"vllm serve qwen2.5-7b --max-model-len '$B'\"]")
    [found] = read(tmp_path, text)
    assert found.error is not None and "the text '$B'" in str(found.error)


def test_skypilot_envs_are_expanded_once(tmp_path):
    """SkyPilot runs `run` in bash with `envs` set: A='$B' stays `$B` even though the script
    sets B (kvplan used to fill the envs into the text and then expand the script again: 4096)."""
    text = """\
resources:
  accelerators: H100:1
envs:
  A: "$B"
run: |
  B=4096
  vllm serve qwen2.5-7b --max-model-len $A
"""
    [found] = read(tmp_path, text, "sky.yaml")
    assert found.knobs.get("max_model_len") != 4096
    assert found.error is not None and "the text '$B'" in str(found.error)


def test_skypilot_rank_test_still_reads_the_envs(tmp_path):
    """The `if [ "$SKYPILOT_NODE_RANK" = "0" ]` branch is still taken from the variables."""
    text = """\
resources:
  accelerators: H100:1
envs:
  LEN: "8000"
run: |
  if [ "$SKYPILOT_NODE_RANK" = "0" ]; then
    vllm serve qwen2.5-7b --max-model-len $LEN
  else
    vllm serve qwen2.5-7b --max-model-len 1000
  fi
"""
    [found] = read(tmp_path, text, "sky.yaml")
    assert found.error is None, found.error
    assert found.knobs["max_model_len"] == 8000


def test_k8s_reference_then_the_shell(tmp_path):
    """`$(A)` in a `sh -c` script: Kubernetes puts A's value `$B` into the script, and the shell
    then expands `$B` (4096): two expanders, each once."""
    text = deployment(A_IS_DOLLAR_B, "['vllm serve qwen2.5-7b --max-model-len $(A)']")
    [found] = read(tmp_path, text)
    assert found.error is None, found.error
    assert found.knobs["max_model_len"] == 4096


def test_k8s_double_dollar_is_one_dollar_for_the_shell(tmp_path):
    """`$$B` is `$B` once Kubernetes has read it; the shell then expands it (4096)."""
    text = deployment(A_IS_DOLLAR_B, "['vllm serve qwen2.5-7b --max-model-len $$B']")
    [found] = read(tmp_path, text)
    assert found.error is None, found.error
    assert found.knobs["max_model_len"] == 4096


LWS = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: c}
spec:
  leaderWorkerTemplate:
    size: 1
    workerTemplate:
      spec:
        containers:
          - name: vllm
            image: vllm/vllm-openai:v0.11.0
            env: [{name: A, value: "$B"}, {name: B, value: "4096"}]
            command: ["vllm", "serve"]
            args: ["qwen2.5-7b", "--max-model-len", "%s"]
            resources: {limits: {nvidia.com/gpu: "1"}}
"""


def test_exec_form_args_get_kubernetes_expansion_only(tmp_path):
    """An exec-form command (no shell): `$(B)` is 4096 (Kubernetes), a bare `$B` reaches vLLM as
    written (kvplan used to expand it as a shell would: 4096)."""
    [found] = read(tmp_path, LWS % "$(B)")
    assert found.error is None, found.error
    assert found.knobs["max_model_len"] == 4096
    [found] = read(tmp_path, LWS % "$B", "e.yaml")
    assert found.knobs.get("max_model_len") != 4096 and found.error is not None


@pytest.mark.parametrize("text, expanded", [
    ("$(A)", "$B"),             # a value is not scanned again
    ("$$(A)", "$(A)"),          # escaped reference
    ("$$$(A)", "$$B"),          # `$$` then `$(A)`: `$` and then `$B`
    ("$$B", "$B"),              # `$$` is `$` anywhere, not only before `(`
    ("$B $(X) $( a$", "$B $(X) $( a$"),  # other `$`, undefined and unclosed references stay
])
def test_k8s_expand_scans_once(text, expanded):
    env = {"A": "$B", "B": "4096"}
    assert k8s_expand(text, env) == expanded
