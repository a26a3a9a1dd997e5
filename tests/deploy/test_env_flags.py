"""`kvplan check` applies the environment variables an engine's release reads in place of a
flag: vLLM's VLLM_ALL2ALL_BACKEND (engines/vllm.py ENV_FLAGS).

Expectations worked by hand from vLLM's source, read per release:
- vllm/envs.py declares VLLM_ALL2ALL_BACKEND in 0.9.0 (not in 0.8.5.post1) up to 0.15.1 and
  no longer in 0.16.0 (nor 0.17.0, 0.18.0, 0.19.0, 0.33.0);
- --all2all-backend (vllm/engine/arg_utils.py) exists from 0.11.1 (not in 0.11.0);
- vllm/config/parallel.py ParallelConfig.__post_init__ reads the variable only when the flag is
  unset in 0.11.1-0.13.0 (the flag wins), and whenever it is set in 0.14.0-0.15.1 (the
  variable wins: `if envs.is_set("VLLM_ALL2ALL_BACKEND"): self.all2all_backend = …`).
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from clirun import run

from kvplan.api import plan
from kvplan.deploy.emit import emit
from kvplan.engines import registry
from kvplan.errors import InvalidInputError

DSR1 = "deepseek-ai/DeepSeek-R1"
# the DeepEP low-latency buffer on one GPU for DeepSeek-R1 with EP over DP 8, worked by hand in
# tests/engines/test_expert_parallel.py (all2all.py @00143004): 4,890,560,640 B
DEEPEP_LL_BYTES = 4_890_560_640


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def check_rows(capsys, path: Path, *args: str) -> tuple[int, list[dict]]:
    code, out, _ = run(capsys, "check", str(path), "--gpu", "h200", "--json", *args)
    return code, json.loads(out)["deployments"]


def k8s(tag: str, args: str, env_value: str | None = "deepep_low_latency") -> str:
    env = "" if env_value is None else f"""
            env:
            - {{name: VLLM_ALL2ALL_BACKEND, value: {env_value}}}"""
    return f"""
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: r1}}
        spec:
          template:
            spec:
              containers:
              - name: vllm
                image: vllm/vllm-openai:{tag}
                args: [{args}]
                resources: {{limits: {{nvidia.com/gpu: "8"}}}}{textwrap.indent(env, "    ")}
    """


ARGS = f'"--model", "{DSR1}", "--data-parallel-size", "8", "--enable-expert-parallel"'


def codes(row: dict) -> dict[str, str]:
    return {p["code"]: p["message"] for p in row["problems"]}


def backend(row: dict) -> str | None:
    """The all2all backend the plan was made with, as its launch line sets it (the flag, or the
    variable before the server for releases without the flag)."""
    m = re.search(r"(?:--all2all-backend |^VLLM_ALL2ALL_BACKEND=)(\S+)", row["plan"]["command"])
    return m.group(1) if m else None


def test_old_release_reads_the_variable(capsys, tmp_path):
    """vLLM 0.13.0 with the variable and no flag: the backend is DeepEP low-latency, so its
    buffer is in the plan and the launch line carries the flag."""
    f = write(tmp_path, "k8s.yaml", k8s("v0.13.0", ARGS))
    code, rows = check_rows(capsys, f)
    row = rows[0]
    assert code in (0, 1) and row["plan"]["engine"]["version"] == "0.13.0", row
    assert backend(row) == "deepep_low_latency"
    assert "--all2all-backend deepep_low_latency" in row["plan"]["command"]
    note = codes(row)["env-read"]
    assert "VLLM_ALL2ALL_BACKEND=deepep_low_latency" in note and "vLLM 0.13.0" in note
    f2 = write(tmp_path, "plain.yaml", k8s("v0.13.0", ARGS, env_value=None))
    plain = check_rows(capsys, f2)[1][0]
    assert backend(plain) is None and "env-read" not in codes(plain)
    grown = row["plan"]["memory"]["non_torch_bytes"] - plain["plan"]["memory"]["non_torch_bytes"]
    assert grown == DEEPEP_LL_BYTES


def test_compose_environment_at_the_last_release_that_reads_it(capsys, tmp_path):
    f = write(tmp_path, "compose.yaml", f"""
        services:
          vllm:
            image: vllm/vllm-openai:v0.15.1
            command: --model {DSR1} -dp 8 --enable-expert-parallel
            environment:
              - VLLM_ALL2ALL_BACKEND=deepep_high_throughput
    """)
    row = check_rows(capsys, f)[1][0]
    assert row["plan"]["engine"]["version"] == "0.15.1"
    assert backend(row) == "deepep_high_throughput"
    assert "--all2all-backend deepep_high_throughput" in row["plan"]["command"]


def test_new_release_ignores_the_variable_and_says_so(capsys, tmp_path):
    """0.16.0 is the first release without it: nothing set, an info naming the flag to use."""
    f = write(tmp_path, "k8s.yaml", k8s("v0.16.0", ARGS))
    code, rows = check_rows(capsys, f)
    row = rows[0]
    assert code in (0, 1) and backend(row) is None
    assert "--all2all-backend" not in row["plan"]["command"]
    message = codes(row)["env-not-read"]
    assert message.startswith("VLLM_ALL2ALL_BACKEND is ignored by vLLM 0.16.0: use "
                              "--all2all-backend deepep_low_latency")
    assert "0.9.0–0.15.1" in message
    assert next(p for p in row["problems"] if p["code"] == "env-not-read")["severity"] == "info"


def test_unknown_release_is_the_newest_modelled(capsys, tmp_path):
    f = write(tmp_path, "k8s.yaml", k8s("latest", ARGS))
    row = check_rows(capsys, f)[1][0]
    newest = registry.get("vllm").newest_version
    assert backend(row) is None
    assert f"ignored by vLLM {newest} (the newest modelled; the file names no release)" in \
        codes(row)["env-not-read"]


@pytest.mark.parametrize(("tag", "wins"), [
    ("v0.11.1", "naive"), ("v0.13.0", "naive"),  # the flag wins
    ("v0.14.0", "deepep_low_latency"), ("v0.15.1", "deepep_low_latency"),  # the variable wins
])
def test_flag_and_variable_together(capsys, tmp_path, tag, wins):
    f = write(tmp_path, "k8s.yaml", k8s(tag, ARGS + ', "--all2all-backend", "naive"'))
    row = check_rows(capsys, f)[1][0]
    assert backend(row) == wins
    assert f"--all2all-backend {wins}" in row["plan"]["command"]
    problems = codes(row)
    if wins == "naive":
        assert "is overridden by --all2all-backend naive" in problems["env-overridden"]
    else:
        assert "overrides --all2all-backend naive" in problems["env-read"]


def test_before_the_flag_only_the_variable_sets_the_backend(capsys, tmp_path):
    """0.10.2: the variable is the only way; the flag is one vLLM refuses (from 0.11.1)."""
    f = write(tmp_path, "k8s.yaml", k8s("v0.10.2", ARGS))
    row = check_rows(capsys, f)[1][0]
    assert backend(row) == "deepep_low_latency" and "env-read" in codes(row)
    assert row["plan"]["command"].startswith("VLLM_ALL2ALL_BACKEND=deepep_low_latency vllm serve")
    assert "--all2all-backend" not in row["plan"]["command"]
    f2 = write(tmp_path, "flag.yaml", k8s("v0.11.0", ARGS + ', "--all2all-backend", "naive"',
                                          env_value=None))
    code, rows = check_rows(capsys, f2)
    assert code == 2 and rows[0]["status"] == "error"
    message = codes(rows[0])["unknown-flag"]
    assert "--all2all-backend is not a vLLM 0.11.0 flag (it exists from 0.11.1)" in message
    assert "VLLM_ALL2ALL_BACKEND" in message


def test_shell_assignments_export_and_dockerfile_env(capsys, tmp_path):
    """`NAME=VALUE vllm serve …` (as vLLM's own docs wrote it), `export`, Dockerfile ENV; the
    release from a `# kvplan:` comment or the base image."""
    script = write(tmp_path, "serve.sh", f"""
        # kvplan: engine-version=0.12.0
        VLLM_ALL2ALL_BACKEND=deepep_low_latency vllm serve {DSR1} -dp 8 --enable-expert-parallel
        export VLLM_ALL2ALL_BACKEND=deepep_high_throughput
        vllm serve {DSR1} -dp 8 --enable-expert-parallel
    """)
    rows = check_rows(capsys, script)[1]
    assert [backend(r) for r in rows] == ["deepep_low_latency", "deepep_high_throughput"]
    docker = write(tmp_path, "Dockerfile", f"""
        FROM vllm/vllm-openai:v0.11.2
        ENV VLLM_ALL2ALL_BACKEND deepep_low_latency
        CMD ["vllm", "serve", "{DSR1}", "-dp", "8", "--enable-expert-parallel"]
    """)
    row = check_rows(capsys, docker)[1][0]
    assert row["plan"]["engine"]["version"] == "0.11.2"
    assert backend(row) == "deepep_low_latency"


def test_a_value_vllm_has_but_kvplan_does_not_model_is_a_clear_error(capsys, tmp_path):
    f = write(tmp_path, "k8s.yaml", k8s("v0.13.0", ARGS, env_value="pplx"))
    code, rows = check_rows(capsys, f)
    assert code == 2 and rows[0]["status"] == "error"
    assert "pplx" in json.dumps(rows[0]["problems"]) and "Traceback" not in json.dumps(rows)


def test_llm_d_wide_ep_example_says_the_variable_is_ignored(capsys):
    """The llm-d wide-EP LWS (ghcr.io/llm-d image: no vLLM release in its tag) sets
    VLLM_ALL2ALL_BACKEND=deepep_low_latency; planned as the newest modelled release, which does
    not read it."""
    example = Path(__file__).resolve().parents[2] / "examples/deploy/llm-d/wide-ep-decode-lws.yaml"
    code, out, _ = run(capsys, "check", str(example), "--json")
    row = json.loads(out)["deployments"][0]
    assert code == 0 and backend(row) is None
    assert "use --all2all-backend deepep_low_latency" in codes(row)["env-not-read"]


@pytest.mark.parametrize(("release", "read", "env_wins", "has_flag"), [
    ("0.8.5", False, False, False),  # not yet in vllm/envs.py
    ("0.9.0", True, False, False),
    ("0.11.0", True, False, False),  # no --all2all-backend in arg_utils.py yet
    ("0.11.1", True, False, True),
    ("0.13.0", True, False, True),  # parallel.py reads it only when the flag is unset
    ("0.14.0", True, True, True),  # parallel.py overrides the flag when it is set
    ("0.15.1", True, True, True),
    ("0.16.0", False, False, True),  # gone from envs.py
    ("0.33.0", False, False, True),
])
def test_vllm_all2all_variable_by_release(release, read, env_wins, has_flag):
    rule = registry.get("vllm").syntax.versioned_env["VLLM_ALL2ALL_BACKEND"]
    assert rule.flag == "--all2all-backend"
    assert rule.read_by(release) is read
    assert rule.wins_over_flag(release) is env_wins
    assert rule.has_flag(release) is has_flag


@pytest.mark.parametrize(("version", "line"), [
    ("0.11.0", "VLLM_ALL2ALL_BACKEND=deepep_high_throughput vllm serve "),  # no flag yet
    ("0.11.1", "--all2all-backend deepep_high_throughput"),
])
def test_plan_launch_line_sets_the_backend_as_the_release_takes_it(version, line):
    p = plan(DSR1, "h200", engine_version=version, data_parallel_size=8,
             enable_expert_parallel=True, moe_a2a_backend="deepep_high_throughput")
    assert line in p.command
    assert ("--all2all-backend" in p.command) is (version == "0.11.1")


def test_emit_keeps_the_variable_where_the_format_can(capsys, tmp_path):
    """k8s runs the line through a shell (an exec argv cannot set a variable) and check reads
    the backend back; a format that carries flags only refuses rather than drop it."""
    p = plan(DSR1, "h200", engine_version="0.10.2", data_parallel_size=8,
             enable_expert_parallel=True, moe_a2a_backend="deepep_low_latency")
    text = emit(p, "k8s")
    assert "- /bin/sh" in text and "VLLM_ALL2ALL_BACKEND=deepep_low_latency vllm serve" in text
    f = write(tmp_path, "k8s.yaml", text)
    row = check_rows(capsys, f)[1][0]
    assert row["plan"]["engine"]["version"] == "0.10.2"
    assert backend(row) == "deepep_low_latency" and "env-read" in codes(row)
    with pytest.raises(InvalidInputError, match="VLLM_ALL2ALL_BACKEND=deepep_low_latency from "
                       "its environment"):
        emit(p, "kserve")
