"""Every exception that reaches the command line maps to an exit code and a message naming the
input; output survives an ASCII locale (issue #22 item 11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import run

import kvplan

LLAMA = "llama-3.1-8b-instruct"
ROOT = Path(kvplan.__file__).resolve().parent.parent


def kvplan_cli(*args: str, env: dict[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """`python -m kvplan ARGS` in a fresh interpreter (locale, Hub settings read at start)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIO"))}
    full = {**base, "PYTHONPATH": str(ROOT), "PYTHONUTF8": "0", **(env or {})}
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True,
                          env=full, cwd=cwd, timeout=120)


@pytest.mark.parametrize("content", [
    "h100,2.0\n".encode("utf-16"),  # a BOM and NUL bytes
    b"h\xff100,2.0\n",  # Latin-1, not UTF-8
])
def test_a_price_file_that_is_not_utf8_names_the_file(capsys, tmp_path, content):
    prices = tmp_path / "prices.csv"
    prices.write_bytes(content)
    code, out, err = run(capsys, "sweep", LLAMA, "--gpus", "h100", "--max-gpus", "1",
                         "--prices", str(prices), "--json")
    assert code == 2 and "Traceback" not in err
    assert "--prices" in err and "prices.csv" in err and "UTF-8" in err
    assert json.loads(out)["error"]["code"] == "invalid-config"  # a malformed input file


def test_a_malformed_hf_endpoint_is_named():
    r = kvplan_cli("plan", "some-org/some-model", "--gpu", "h100",
                   env={"HF_ENDPOINT": "http://[bad", "HF_HUB_OFFLINE": "0"})
    err = r.stderr.decode()
    assert r.returncode == 2 and "Traceback" not in err and "HF_ENDPOINT" in err


def test_a_non_ascii_hf_token_is_named(tmp_path):
    env = {"HF_TOKEN": "h\u00e9t", "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path),
           "HF_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens: no request leaves the host
    r = kvplan_cli("plan", "some-org/some-model", "--gpu", "h100", env=env)
    err = r.stderr.decode()
    assert r.returncode == 2 and "Traceback" not in err and "HF_TOKEN" in err


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C"}])
def test_plan_json_under_an_ascii_locale_is_valid_json(env):
    r = kvplan_cli("plan", LLAMA, "--gpu", "h100", "--json", env=env)
    assert r.returncode == 0, r.stderr.decode()
    r.stdout.decode("ascii")  # nothing the stream cannot carry
    data = json.loads(r.stdout)
    want = kvplan_cli("plan", LLAMA, "--gpu", "h100", "--json", env={"PYTHONIOENCODING": "utf-8"})
    assert data == json.loads(want.stdout)  # escaped, not altered


@pytest.mark.parametrize("args", [
    ("sweep", LLAMA, "--gpus", "h100", "--max-gpus", "2"),
    ("check", "examples/deploy", "--format", "github"),
    ("plan", LLAMA, "--gpu", "h100"),
])
def test_text_output_under_an_ascii_locale_does_not_crash(args):
    r = kvplan_cli(*args, env={"PYTHONIOENCODING": "ascii"}, cwd=ROOT)
    err = r.stderr.decode()
    # examples/deploy holds deliberately broken copies (broken-*.yaml) the engine refuses: exit 2
    codes = (0, 1, 2) if args[0] == "check" else (0, 1)
    assert r.returncode in codes and "Traceback" not in err and "internal error" not in err
    assert r.stdout


def test_json_errors_under_an_ascii_locale_are_valid_json():
    r = kvplan_cli("plan", LLAMA, "--gpu", "h100", "--gpu-memory-utilization", "2", "--json",
                   env={"PYTHONIOENCODING": "ascii"})
    assert r.returncode == 2 and json.loads(r.stdout)["error"]["exit_code"] == 2


@pytest.mark.parametrize("name", ["a" * 300, "x\x00y"])
def test_report_on_a_name_no_file_can_have_is_an_unknown_model(capsys, tmp_path, name):
    """`report` asked whether its target exists: a 300-character name raised ENAMETOOLONG
    ("Error: aaa…: File name too long", naming nothing), where plan says "unknown model" (found by
    the fuzz campaign)."""
    code, _, err = run(capsys, "report", name, "--gpu", "h100", "-o", str(tmp_path / "r.md"))
    assert code == 2 and "unknown model" in err, err


def test_a_usage_error_under_an_ascii_locale_stays_ascii(tmp_path):
    """click printed a usage error's value as UTF-8 bytes into an ASCII stream (it deems ASCII a
    misconfigured locale) where kvplan's own messages are backslash-escaped (found by the fuzz
    campaign's ASCII output streams)."""
    (tmp_path / "run.sh").write_text(f"vllm serve {LLAMA}\n")
    r = kvplan_cli("check", "run.sh", "--gpu", "h100", "--min-kv-tokens", "\u00a1",
                   env={"PYTHONIOENCODING": "ascii"}, cwd=tmp_path)
    assert r.returncode == 2
    assert "'\\xa1'" in r.stderr.decode("ascii")  # nothing the stream cannot carry
