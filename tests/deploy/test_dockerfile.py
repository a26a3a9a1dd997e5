"""A Dockerfile is read as Docker runs its image (kvplan/deploy/dockerfile.py): the final
stage's last ENTRYPOINT and CMD together, ARG defaults in FROM. The expected commands are worked
out by hand from the Dockerfile reference ("Understand how CMD and ENTRYPOINT interact")."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from clirun import run

from kvplan.deploy.commands import Templates, find_commands
from kvplan.deploy.dockerfile import dockerfile_commands


def read(tmp_path: Path, text: str, name: str = "Dockerfile") -> list:
    """Every command kvplan reads from the file, as `kvplan check` reads it."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    templates = Templates({})
    return dockerfile_commands(path, find_commands(path, templates), templates)


@pytest.mark.parametrize("text", [
    # exec-form ENTRYPOINT + CMD: CMD is the entrypoint's arguments
    """
    FROM vllm/vllm-openai:v0.8.5
    ENTRYPOINT ["vllm", "serve", "qwen2.5-7b"]
    CMD ["--max-model-len", "20000", "--max-num-seqs", "48"]
    """,
    """
    FROM vllm/vllm-openai:v0.8.5
    ENTRYPOINT ["vllm", "serve"]
    CMD ["qwen2.5-7b", "--max-model-len", "20000", "--max-num-seqs", "48"]
    """,
    # CMD alone on the server image: the image's own entrypoint takes it
    """
    FROM vllm/vllm-openai:v0.8.5
    CMD ["--model", "qwen2.5-7b", "--max-model-len", "20000", "--max-num-seqs", "48"]
    """,
    # only the last CMD counts
    """
    FROM vllm/vllm-openai:v0.8.5
    CMD ["--model", "qwen2.5-7b", "--max-model-len", "1000"]
    CMD ["--model", "qwen2.5-7b", "--max-model-len", "20000", "--max-num-seqs", "48"]
    """,
], ids=["entrypoint-model-cmd-flags", "entrypoint-cmd-model", "image-entrypoint", "last-cmd"])
def test_entrypoint_and_cmd_make_one_command(tmp_path, text):
    [found] = read(tmp_path, text)
    assert found.error is None, found.error
    assert (found.model, found.knobs) == ("qwen2.5-7b",
                                          {"max_model_len": 20000, "max_num_seqs": 48})
    assert found.engine_version == "0.8.5"


def test_shell_form_entrypoint_ignores_cmd(tmp_path):
    [found] = read(tmp_path, """
        FROM vllm/vllm-openai:v0.8.5
        ENTRYPOINT vllm serve qwen2.5-7b --max-num-seqs 8
        CMD ["--max-model-len", "20000"]
    """)
    assert (found.model, found.knobs) == ("qwen2.5-7b", {"max_num_seqs": 8})


def test_final_stage_counts_and_inherits_from_the_stage_it_builds_on(tmp_path):
    """The final stage `FROM base` keeps base's image (its release) and ENV; its own CMD wins."""
    [found] = read(tmp_path, """
        FROM vllm/vllm-openai:v0.8.5 AS base
        ENV LEN=1000
        CMD ["--model", "qwen2.5-7b", "--max-model-len", "1000"]
        FROM base
        CMD vllm serve qwen2.5-7b --max-model-len $((LEN * 2))
    """)
    assert (found.line, found.knobs, found.engine_version) == (5, {"max_model_len": 2000}, "0.8.5")


def test_entrypoint_resets_the_inherited_cmd(tmp_path):
    [found] = read(tmp_path, """
        FROM vllm/vllm-openai:v0.8.5 AS base
        CMD ["--model", "qwen2.5-7b", "--max-model-len", "1000"]
        FROM base
        ENTRYPOINT ["vllm", "serve", "qwen2.5-7b"]
    """)
    assert (found.model, found.knobs) == ("qwen2.5-7b", {})


def test_an_earlier_stage_command_is_not_the_images(tmp_path):
    found = read(tmp_path, """
        FROM vllm/vllm-openai:v0.8.5 AS builder
        CMD ["--model", "qwen2.5-7b"]
        FROM python:3.12
        CMD ["python", "app.py"]
    """)
    assert found == []


def test_env_fills_a_shell_form_cmd(tmp_path):
    [found] = read(tmp_path, """
        FROM vllm/vllm-openai:v0.11.0
        ENV MODEL=qwen2.5-7b
        CMD ["sh", "-c", "vllm serve $MODEL --max-model-len 20000"]
    """)
    assert (found.model, found.knobs) == ("qwen2.5-7b", {"max_model_len": 20000})


def test_arg_default_fills_the_from_image(tmp_path):
    [found] = read(tmp_path, """
        ARG VLLM_VERSION=v0.8.5
        FROM vllm/vllm-openai:${VLLM_VERSION}
        CMD ["vllm", "serve", "qwen2.5-7b"]
    """)
    assert found.engine_version == "0.8.5"
    assert any("ARG VLLM_VERSION=v0.8.5" in n for n in found.notes), found.notes


@pytest.mark.parametrize("args", ["ARG VLLM_VERSION\n", ""], ids=["no-default", "undeclared"])
def test_arg_without_default_in_from_is_said(tmp_path, args):
    [found] = read(tmp_path, args + textwrap.dedent("""\
        FROM vllm/vllm-openai:${VLLM_VERSION}
        CMD ["vllm", "serve", "qwen2.5-7b"]
    """))
    assert found.engine_version is None
    [note] = [n for n in found.notes if "VLLM_VERSION" in n]
    assert "--set VLLM_VERSION=VALUE" in note


def test_arg_release_is_planned_end_to_end(capsys, tmp_path):
    """The auditor's Dockerfile.e: planned at vLLM 0.8.5, the ARG's default."""
    path = tmp_path / "Dockerfile"
    path.write_text('ARG VLLM_VERSION=v0.8.5\nFROM vllm/vllm-openai:${VLLM_VERSION}\n'
                    "# kvplan: gpu=h100\n"
                    'CMD ["vllm", "serve", "qwen2.5-7b", "--max-model-len", "20000"]\n')
    code, out, _ = run(capsys, "check", str(path), "--json", "--offline")
    [d] = json.loads(out)["deployments"]
    assert code == 0, d
    assert d["plan"]["engine"]["version"] == "0.8.5"


def test_bad_exec_form_names_the_instruction_and_line(capsys, tmp_path):
    path = tmp_path / "Dockerfile"
    path.write_text('FROM vllm/vllm-openai:v0.8.5\nENTRYPOINT ["vllm", "serve", 3]\n')
    code, out, _ = run(capsys, "check", str(path), "--json", "--offline", "--gpu", "h100")
    [d] = json.loads(out)["deployments"]
    assert code == 2
    message = d["problems"][0]["message"]
    assert "ENTRYPOINT is not a JSON array of strings" in message and d["line"] == 2


def test_a_fragment_without_from_is_read_line_by_line(tmp_path):
    """A Dockerfile fragment (no FROM) keeps being read as lines, as before."""
    [found] = read(tmp_path, 'CMD ["vllm", "serve", "qwen2.5-7b", "--max-num-seqs", "8"]\n')
    assert (found.model, found.knobs) == ("qwen2.5-7b", {"max_num_seqs": 8})
