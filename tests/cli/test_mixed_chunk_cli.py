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
    # (plan's "Versus concurrency" rounding: TTFT whole ms, TPOT one decimal)
    assert (f"| 32 | {row['running']:,} | {row['ttft_ms']:,.0f} | {row['tpot_ms']:,.1f} |"
            in out)


def test_sweep_takes_it_and_its_option_is_the_plan() -> None:
    """`sweep --enable-mixed-chunk`: the SGLang option at a layout is `plan` of that layout
    with the flag; engines without the setting are pruned saying why, and a sweep of vLLM only
    is refused naming the flag and the engine."""
    common = ("--max-model-len", "8192", "--kv-cache-dtype", "auto", "--enable-mixed-chunk")
    code, swept = _json("sweep", LLAMA, "--gpus", "h100", "--max-gpus", "1", "--engine", "all",
                        *common)
    assert code in (0, 1)
    (opt,) = [o for o in swept["options"] if o["plan"]["engine"]["name"] == "sglang"]
    assert {o["plan"]["engine"]["name"] for o in swept["options"]} == {"sglang"}
    assert {p["engine"] for p in swept["pruned"]} == {"vllm", "tgi", "trtllm"}
    assert all("--enable-mixed-chunk is not a setting" in p["reason"] for p in swept["pruned"])
    code, planned = _json("plan", LLAMA, "--gpu", "h100", "--engine", "sglang", *common)
    assert opt["plan"]["command"] == planned["command"]
    assert opt["plan"]["performance"] == planned["performance"]
    code, out, err = call("sweep", LLAMA, "--gpus", "h100", "--max-gpus", "1",
                          "--enable-mixed-chunk", "--offline")
    assert code == 2 and "Traceback" not in err
    assert "--enable-mixed-chunk is not a setting vLLM has" in err
