"""SGLang --enable-mixed-chunk on the command line: plan takes it, the launch line keeps it,
`kvplan check` reads it back from a launch line and plans the same figures, other engines
refuse it with an error naming the flag and the engine (docs/sglang-mixed-chunk.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import call

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
LOAD = ("--avg-input-tokens", "1024", "--avg-output-tokens", "256")


def _json(*args: str) -> tuple[object, dict]:
    code, out, err = call(*args, "--offline", "--json")
    assert "Traceback" not in err, err
    return code, json.loads(out)


def test_launch_line_check_plan_round_trip(tmp_path: Path) -> None:
    code, planned = _json("plan", LLAMA, "--gpu", "h100", "--engine", "sglang",
                          "--enable-mixed-chunk")
    assert code == 0 and planned["command"].endswith(" --enable-mixed-chunk")
    _, plain = _json("plan", LLAMA, "--gpu", "h100", "--engine", "sglang")
    assert plain["performance"]["ttft_ms"] != planned["performance"]["ttft_ms"]
    script = tmp_path / "serve.sh"
    script.write_text(planned["command"] + "\n")
    code, checked = _json("check", str(script), "--gpu", "h100")
    assert code == 0
    (row,) = checked["deployments"]
    assert row["status"] == "fits" and row["engine"] == "sglang"
    # read as a setting kvplan models, not kept aside as an unmodelled flag
    assert not [p for p in row["problems"] if "--enable-mixed-chunk" in p["message"]]
    assert row["plan"]["command"] == planned["command"]
    assert row["plan"]["performance"] == planned["performance"]


def test_a_users_launch_line_is_planned_mixed(tmp_path: Path) -> None:
    """A hand-written line (flag in the middle, sglang serve spelling) plans as the flag says."""
    script = tmp_path / "serve.sh"
    script.write_text(f"sglang serve {LLAMA} --enable-mixed-chunk --mem-fraction-static 0.83\n")
    code, checked = _json("check", str(script), "--gpu", "h100")
    assert code == 0
    got = checked["deployments"][0]["plan"]
    code, want = _json("plan", LLAMA, "--gpu", "h100", "--engine", "sglang",
                       "--gpu-memory-utilization", "0.83", "--enable-mixed-chunk")
    assert code == 0 and "--enable-mixed-chunk" in got["command"]
    assert got["performance"]["ttft_ms"] == want["performance"]["ttft_ms"]


@pytest.mark.parametrize(("engine", "label"), [("vllm", "vLLM"), ("trtllm", "TensorRT-LLM")])
def test_other_engines_refuse_it(engine: str, label: str) -> None:
    code, out, err = call("plan", LLAMA, "--gpu", "h100", "--engine", engine,
                          "--enable-mixed-chunk", "--offline")
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"--enable-mixed-chunk is not a setting {label} has" in err
    assert "--engine sglang" in err


def test_report_shows_the_plans_figures() -> None:
    """report's serve line and latency table are plan's (the same deployment)."""
    args = (LLAMA, "--gpu", "h100", "--engine", "sglang", "--enable-mixed-chunk", *LOAD,
            "--target-concurrency", "32")
    code, want = _json("plan", *args)
    assert code == 0
    code, out, err = call("report", *args, "--offline")
    assert code == 0 and "Traceback" not in err, err
    assert want["command"] in out
    row = next(r for r in want["performance"]["by_concurrency"] if r["concurrency"] == 32)
    assert f"| 32 | {row['ttft_ms']} | {row['tpot_ms']} |" in out
