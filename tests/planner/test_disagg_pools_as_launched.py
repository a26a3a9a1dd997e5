"""plan --disagg: each pool is planned as its launch line starts it. A pool plan whose serve line
sets a recommended max_num_seqs (Plan.served) used to keep the memory of the engine default
(1,024 sequences: a larger sampler warm-up and more CUDA graphs), so the pool table, the decode
capacity and the xPyD ratio were sized on a KV cache the launch lines do not get (Llama-3.3-70B,
4 × H100 decode: 454,864 tokens and 137 requests where its line ran 144). Now `check` of each
pool's launch line reads the pool's own KV cache, and the decode capacity is the line's
max_num_seqs, which that KV cache holds."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from clirun import call

ARGS = ["llama-3.3-70b-instruct", "--gpu", "h100", "--disagg", "--avg-input-tokens", "3000",
        "--avg-output-tokens", "300", "--target-concurrency", "64", "--max-model-len", "8192"]


def test_each_pool_is_planned_as_its_launch_line_starts_it(tmp_path: Path):
    code, out, err = call("plan", *ARGS, "--offline", "--json")
    assert code == 0, err
    d = json.loads(out)["disaggregated"]
    for role in ("prefill", "decode"):
        pool = d[role]
        assert pool["served"] is None, role  # nothing in its line differs from the plan
        script = tmp_path / f"{role}.sh"
        script.write_text(f"# kvplan: gpu=h100\n{d['launch'][role]}\n")
        code, out, err = call("check", str(script), "--gpu", "h100", "--offline", "--json")
        (row,) = json.loads(out)["deployments"]
        assert row["plan"] is not None, (role, row)
        assert row["plan"]["kv_cache"]["tokens"] == pool["kv_cache"]["tokens"], role
    seqs = int(re.search(r"--max-num-seqs (\d+)", d["launch"]["decode"]).group(1))
    assert d["decode_capacity_per_replica"] == seqs
    kv = d["decode"]["kv_cache"]
    per_request = math.ceil(3300 / kv["block_size"]) * kv["block_size"]
    assert kv["tokens"] // per_request >= seqs  # the line's own KV cache holds what it runs
    # the decode pool's token budget is one token per running sequence (at least 256)
    assert f"--max-num-batched-tokens {max(seqs, 256)} " in d["launch"]["decode"]
