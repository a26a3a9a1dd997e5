"""The serve line's own start-up (Plan.served): an engine sizes its profile run and CUDA graphs by
max_num_seqs (vLLM: the sampler warm-up runs max_num_seqs requests, graphs are captured up to
it; model/forward.py), so a line that sets a recommended max_num_seqs starts with another KV
cache than the planned deployment at the engine default. The plan states that KV cache, `check`
of the line reads the same, and the recommended max_num_seqs is the largest the line's own KV
cache holds without preemption."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from clirun import call

from kvplan.engines.registry import NAMES

MODEL = "meta-llama/Llama-3.3-70B-Instruct"
WORK = ["--avg-input-tokens", "3000", "--avg-output-tokens", "400", "--max-model-len", "32768"]
REQUEST_TOKENS = 3400  # input + output


def cli_json(*args: str) -> dict[str, Any]:
    code, out, err = call(*args, "--offline", "--json")
    assert code in (0, 1), (args, code, err)
    return json.loads(out)


def held(plan_kv: dict[str, Any]) -> int:
    """Requests of REQUEST_TOKENS the KV cache holds, from the figures a plan prints: whole
    blocks per request (16-token blocks: 213 blocks, 3,408 tokens)."""
    per_request = math.ceil(REQUEST_TOKENS / plan_kv["block_size"]) * plan_kv["block_size"]
    return plan_kv["tokens"] // per_request


def test_vllm_serve_line_starts_with_its_own_kv_cache():
    p = cli_json("plan", MODEL, "--gpu", "h100", "-tp", "4", *WORK)
    seqs = p["recommendations"]["max_num_seqs"]["value"]
    assert p["inputs"]["max_num_seqs"]["value"] == 1024  # the engine default, planned
    served = p["served"]
    assert served["settings"] == {"max_num_seqs": seqs}
    assert f"--max-num-seqs {seqs} " in p["command"]
    # the mechanism: a smaller sampler warm-up and fewer CUDA graphs leave more KV cache
    assert served["memory"]["activation_bytes"] < p["memory"]["activation_bytes"]
    assert served["memory"]["cudagraph_bytes"] < p["memory"]["cudagraph_bytes"]
    assert served["kv_cache"]["tokens"] > p["kv_cache"]["tokens"]
    # the recommendation is the largest value whose own KV cache holds it
    assert held(served["kv_cache"]) >= seqs
    # planned at the engine default the KV cache holds fewer (the value the plan used to
    # recommend), at one more the line's own KV cache no longer holds it
    at_default = cli_json("plan", MODEL, "--gpu", "h100", "-tp", "4", *WORK,
                          "--max-num-seqs", "1024")
    assert at_default["kv_cache"]["tokens"] == p["kv_cache"]["tokens"]
    assert held(at_default["kv_cache"]) < seqs
    above = cli_json("plan", MODEL, "--gpu", "h100", "-tp", "4", *WORK,
                     "--max-num-seqs", str(seqs + 1))
    assert held(above["kv_cache"]) < seqs + 1
    # as given, the plan is that deployment: nothing differs, no served section
    given = cli_json("plan", MODEL, "--gpu", "h100", "-tp", "4", *WORK,
                     "--max-num-seqs", str(seqs))
    assert given["served"] is None
    assert given["kv_cache"] == served["kv_cache"]
    assert given["memory"] == served["memory"]


def test_no_served_section_when_the_line_starts_the_plan():
    p = cli_json("plan", MODEL, "--gpu", "h100", "-tp", "4", "--max-model-len", "32768")
    assert "--max-num-seqs" not in p["command"]
    assert p["served"] is None


@pytest.mark.parametrize("engine", NAMES)
def test_check_of_the_serve_line_reads_the_served_figures(engine: str, tmp_path: Path):
    """Every engine: `check` of the plan's serve line states the KV cache and memory the plan
    says that line starts with (served when it sets other values, else the plan's own)."""
    p = cli_json("plan", "Qwen/Qwen3-8B", "--gpu", "h100", "-tp", "2", "--engine", engine,
                 "--avg-input-tokens", "3000", "--avg-output-tokens", "400",
                 "--max-model-len", "16384")
    assert p["fits"], p["problems"]
    want = p["served"] or {"kv_cache": p["kv_cache"], "memory": p["memory"]}
    script = tmp_path / "serve.sh"
    script.write_text(f"# kvplan: gpu=h100\n{p['command']}\n")
    (row,) = cli_json("check", str(script), "--gpu", "h100")["deployments"]
    assert row["plan"] is not None, row
    assert row["plan"]["kv_cache"] == want["kv_cache"]
    assert row["plan"]["memory"] == want["memory"]


def test_text_and_report_state_the_served_kv_cache():
    args = ("plan", MODEL, "--gpu", "h100", "-tp", "4", *WORK)
    served = cli_json(*args)["served"]["kv_cache"]["tokens"]
    seqs_row = f"{served:,} tokens"
    code, out, _ = call(*args, "--offline")
    assert code == 0
    line = next(x for x in out.splitlines() if "at the serve line's max_num_seqs" in x)
    assert seqs_row in line
    code, md, err = call("report", MODEL, "--gpu", "h100", "-tp", "4", *WORK, "--offline")
    assert code == 0, err
    assert "at the serve line's max_num_seqs" in md and seqs_row in md


def test_a_missed_target_states_the_kv_cache_the_serve_line_starts_with():
    """Qwen3-32B on one H100 at 32 × 2,300 tokens: the serve line (--max-num-seqs 20
    --gpu-memory-utilization 0.95) starts with 47,040 KV tokens, 20 such requests; the error,
    its lower-target alternative and the sweep's reason say 20, not the 18 of the profile at
    the engine-default max_num_seqs."""
    work = ["--target-concurrency", "32", "--avg-input-tokens", "2000", "--avg-output-tokens",
            "300", "--max-model-len", "8192", "--kv-cache-dtype", "auto"]
    p = cli_json("plan", "qwen3-32b", "--gpu", "h100", *work)
    seqs = p["recommendations"]["max_num_seqs"]["value"]
    served = p["served"]["kv_cache"]
    per_request = math.ceil(2300 / served["block_size"]) * served["block_size"]
    assert served["tokens"] // per_request == seqs  # what the line runs and its cache holds
    err = next(x["message"] for x in p["problems"] if x["code"] == "target-not-met")
    assert (f"the KV cache the serve line starts with ({served['tokens']:,} tokens) holds "
            f"{seqs} of 32 requests") in err
    assert f"a lower target: {seqs} requests of 2300 tokens fit" in err
    s = cli_json("sweep", "qwen3-32b", "--gpus", "h100", "--engine", "vllm", "--max-gpus", "1",
                 *work)
    o = next(x for x in s["options"] if x["tensor_parallel_size"] == 1)
    assert any(f"holds {seqs} of 32" in r and f"a lower target: {seqs} requests" in r
               for r in o["reasons"])
