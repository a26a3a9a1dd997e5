"""Fix-its under SGLang's DP attention name --tp-size as SGLang counts it: every GPU of the
group, attention TP × --dp-size (attn_tp_size = tp_size // attn_dp_size:
sglang/srt/runtime_context.py derive_attn_tp_size; --dp-size N --enable-dp-attention becomes
attn_dp_size N: sglang/srt/arg_groups/parallel_hook.py _handle_deprecated_dp_attention; sglang
0.5.23 wheel). kvplan's -tp is one attention group, so a fix-it of attention TP 4 at --dp-size 2
must read --tp-size 8, and that line read back must be attention TP 4 again."""

from __future__ import annotations

import json
import re

from clirun import run

from kvplan import Workload, plan

MOE = "Qwen/Qwen3-30B-A3B"
LAYOUT = dict(tensor_parallel_size=1, data_parallel_size=2, enable_dp_attention=True,
              enable_expert_parallel=True, max_model_len=40960)


def _tp_alternative(p) -> tuple[int, int, int]:
    """(--tp-size, --ep-size, attention TP) of the larger-TP alternative in the target-not-met
    problem."""
    miss = next(x for x in p.problems if x.code == "target-not-met")
    found = re.search(r"--tp-size (\d+) --ep-size (\d+) \(attention TP (\d+) × --dp-size 2\)",
                      miss.message)
    assert found, miss.message
    return int(found[1]), int(found[2]), int(found[3])


def test_a_larger_tp_fix_it_counts_every_gpu_of_the_dp_attention_group(capsys, tmp_path):
    """16 requests of 40,960 tokens do not fit at -tp 1 -dp 2 on L40S; the larger-TP
    alternative, pasted into the serve line, is read back (kvplan check) as that attention TP
    over 2 DP ranks and meets the target there."""
    p = plan(MOE, "l40s", engine="sglang", workload=Workload(target_concurrency=16), **LAYOUT)
    assert "--tp-size 2 --dp-size 2 --enable-dp-attention" in p.command
    tp_size, ep_size, attn_tp = _tp_alternative(p)
    assert tp_size == ep_size == 2 * attn_tp  # --dp-size 2; experts over the whole group
    line = p.command.replace("--tp-size 2 ", f"--tp-size {tp_size} ").replace(
        "--ep-size 2 ", f"--ep-size {ep_size} ")
    line = re.sub(r" --max-running-requests \d+", "", line)
    f = tmp_path / "serve.sh"
    f.write_text(line + "\n")
    code, out, err = run(capsys, "check", str(f), "--gpu", "l40s", "--offline", "--json")
    assert code == 0, err
    inputs = json.loads(out)["deployments"][0]["plan"]["inputs"]
    assert inputs["tensor_parallel_size"]["value"] == attn_tp
    assert inputs["data_parallel_size"]["value"] == 2
    at = plan(MOE, "l40s", engine="sglang", workload=Workload(target_concurrency=16),
              **{**LAYOUT, "tensor_parallel_size": attn_tp})
    assert at.fits


def test_without_dp_attention_the_fix_it_is_the_plain_tp():
    """No DP attention: --tp-size is one replica's GPUs, the value kvplan plans (no product)."""
    p = plan("meta-llama/Llama-3.1-8B-Instruct", "l40s", engine="sglang", tensor_parallel_size=1,
             max_model_len=32768, workload=Workload(target_concurrency=8))
    miss = next(x for x in p.problems if x.code == "target-not-met")
    found = re.search(r"\d\) --tp-size (\d+);", miss.message)
    assert found and "attention TP" not in miss.message, miss.message
    at = plan("meta-llama/Llama-3.1-8B-Instruct", "l40s", engine="sglang",
              tensor_parallel_size=int(found[1]), max_model_len=32768,
              workload=Workload(target_concurrency=8))
    assert at.fits and f"--tp-size {found[1]} " in at.command


def test_the_tp_recommendation_counts_the_gpus_the_launch_line_uses():
    """Qwen3-30B-A3B does not fit one L4 per DP rank: the smallest attention TP that does is
    planned over both DP ranks, so a replica is that TP × 2 GPUs — the launch line's --tp-size."""
    p = plan(MOE, "l4", engine="sglang", **{**LAYOUT, "max_model_len": 8192})
    rec = p.recommendations.tensor_parallel_size
    gpus = int(re.search(r"\((\d+) GPUs per replica\)", rec.reason)[1])
    assert gpus == 2 * rec.value
    assert f"--tp-size {gpus} --dp-size 2 --enable-dp-attention" in p.command
