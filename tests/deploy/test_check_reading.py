"""`kvplan check` reading what deployments are written as: TGI's environment from a
ConfigMap."""

from __future__ import annotations

import json
import textwrap

import pytest
from clirun import run


def check_text(capsys, tmp_path, text, *args, name="deploy.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    code, out, err = run(capsys, "check", str(path), "--offline", "--json", *args)
    report = json.loads(out)
    assert report["exit_code"] == code
    return code, report


def codes(row):
    return {p["code"] for p in row["problems"]}


# ------------------------------------------------------------- TGI envFrom

TGI = """\
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: tgi-env}
    data: {%s MAX_TOTAL_TOKENS: "16384", MAX_INPUT_TOKENS: "16000"}
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: tgi}
    spec:
      template:
        spec:
          nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}
          containers:
          - name: tgi
            image: ghcr.io/huggingface/text-generation-inference:3.3.4
            %s
            envFrom: [{configMapRef: {name: tgi-env}}]
            resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.mark.parametrize("in_map, env", [
    ("MODEL_ID: meta-llama/Llama-3.1-8B-Instruct,", ""),  # the model from the ConfigMap
    ("", "env: [{name: MODEL_ID, value: meta-llama/Llama-3.1-8B-Instruct}]"),  # from env
])
def test_tgi_reads_its_flags_from_a_configmap(capsys, tmp_path, in_map, env):
    code, report = check_text(capsys, tmp_path, TGI % (in_map, env))
    (row,) = report["deployments"]
    assert (row["model"], row["status"], code) == ("meta-llama/Llama-3.1-8B-Instruct", "fits", 0)
    assert row["plan"]["inputs"]["max_model_len"]["value"] == 16384  # MAX_TOTAL_TOKENS


def test_tgi_args_win_over_the_configmap(capsys, tmp_path):
    text = TGI % ("MODEL_ID: meta-llama/Llama-3.1-8B-Instruct,",
                  'args: ["--max-total-tokens", "8192", "--max-input-tokens", "8000"]')
    _, report = check_text(capsys, tmp_path, text)
    assert report["deployments"][0]["plan"]["inputs"]["max_model_len"]["value"] == 8192
