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


# ------------------------------------------------- the round-4 flags, combined badly

MOE = "Qwen/Qwen3-30B-A3B"


def _files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "garbage.json").write_text("garbage{{{")
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "other.json").write_text('{"format": "x"}')
    return {k: str(tmp_path / f"{k}.json") for k in ("garbage", "empty", "other", "missing")}


@pytest.mark.parametrize(("args", "needles"), [
    (("plan", LLAMA, "--gpu", "h100", "--disagg", "--emit", "k8s"), ("--emit", "--disagg")),
    (("plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h100", "-tp", "4", "--nodes", "3"),
     ("--nodes 3", "divide")),
    (("report", LLAMA, "--gpu", "h100", "--nodes", "3", "-o", "{tmp}/r.md"), ("--nodes 3",)),
    (("plan", LLAMA, "--gpu", "h100", "--calibration", "{missing}"),
     ("--calibration", "missing.json", "cannot read")),
    (("plan", LLAMA, "--gpu", "h100", "--calibration", "{garbage}"),
     ("--calibration", "garbage.json", "not valid JSON", "kvplan calibrate")),
    (("sweep", LLAMA, "--gpus", "h100", "--max-gpus", "1", "--calibration", "{other}"),
     ("--calibration", "other.json", "format")),
    (("compare", LLAMA, "--gpu", "h100", "--calibration", "{missing}"), ("--calibration",)),
    (("check", "{tmp}/serve.sh", "--calibration", "{missing}"), ("--calibration",)),
    (("plan", LLAMA, "--gpu", "h100", "--emit", "helm"), ("--emit", "k8s")),
    (("sweep", LLAMA, "--gpus", "h100", "--max-gpus", "1", "--emit", "k8s", "--option", "999"),
     ("--option 999",)),
    (("sweep", LLAMA, "--gpus", "h100", "--max-gpus", "2", "--max-model-len", "4096", "--disagg",
      "--emit", "k8s", "--option", "{disagg_rank}"), ("disaggregated", "--emit")),
    (("calibrate", "{empty}"), ("empty.json", "empty")),
    (("calibrate", "{garbage}"), ("garbage.json", "not a benchmark result")),
    (("plan", MOE, "--gpu", "h100", "-tp", "2", "--enable-dp-attention", "--engine", "sglang"),
     ("--enable-dp-attention", "-dp")),
    (("plan", MOE, "--gpu", "h100", "-tp", "2", "--enable-dp-attention", "--engine", "trtllm"),
     ("--enable-dp-attention", "-tp 1 -dp 2")),
    (("plan", MOE, "--gpu", "h100", "-tp", "2", "--enable-dp-attention"),
     ("--enable-dp-attention", "vLLM")),
    (("plan", MOE, "--gpu", "h100", "-tp", "2", "--num-redundant-experts", "8"),
     ("--num-redundant-experts", "--enable-expert-parallel")),
    (("plan", MOE, "--gpu", "h100", "-tp", "2", "--num-redundant-experts", "8", "--engine",
      "sglang"), ("--num-redundant-experts", "--enable-expert-parallel")),
    (("plan", LLAMA, "--gpu", "h100", "--enable-expert-parallel"),
     ("--enable-expert-parallel", "mixture-of-experts")),
    (("plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "a100-sxm-80gb", "-tp", "8", "-pp",
      "2", "--nodes", "2", "--max-model-len", "8192", "--emit", "compose"),
     ("--emit compose", "2 nodes", "launch", "k8s", "skypilot")),
])
def test_bad_combinations_of_the_new_flags_exit_2_naming_them(capsys, tmp_path, args, needles):
    """Each refused with exit 2, a message naming the flag(s) and a valid JSON error — never a
    traceback (--disagg --emit and sweep --emit of a disaggregated option were silently a
    table or one pool's file; a missing --calibration file did not name the flag; calibrate of
    an empty file said 'not valid JSON (line 1, column 1)'; --enable-dp-attention without -dp
    was dropped without a word; --emit of a layout over two nodes wrote all 16 GPUs into one
    node's file, which `kvplan check` planned on one 16-GPU HGX A100 node: compose, one host,
    still refuses it, naming the formats that write it over nodes)."""
    paths = _files(tmp_path)
    (tmp_path / "serve.sh").write_text(f"# kvplan: gpu=h100\nvllm serve {LLAMA}\n")
    rank = "2"
    if "{disagg_rank}" in args:
        code, out, _ = run(capsys, "sweep", LLAMA, "--gpus", "h100", "--max-gpus", "2",
                           "--max-model-len", "4096", "--disagg", "--offline", "--json")
        rank = str(next(o["rank"] for o in json.loads(out)["options"] if o["disaggregated"]))
    argv = [a.format(tmp=tmp_path, disagg_rank=rank, **paths) for a in args]
    code, out, err = run(capsys, *argv, "--offline")
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    if argv[0] != "calibrate" and "--emit" not in argv:  # --json: the error as JSON
        code, out, _ = run(capsys, *argv, "--offline", "--json")
        assert code == 2 and json.loads(out)["error"]["exit_code"] == 2
