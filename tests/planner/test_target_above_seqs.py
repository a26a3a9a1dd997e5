"""--target-concurrency above a --max-num-seqs the user gave: the engine runs max_num_seqs at once
and the rest wait for a slot, so the target's requests are not in flight together; the plan
says so as an error (exit 1) with the alternatives, and keeps the user's flag in the line."""

from __future__ import annotations

import json

from clirun import call

ARGS = ["qwen3-32b", "--gpu", "h100", "-tp", "2", "--avg-input-tokens", "2000",
        "--avg-output-tokens", "500", "--target-concurrency", "64"]


def plan(*extra: str) -> tuple[int, dict]:
    code, out, err = call("plan", *ARGS, *extra, "--offline", "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_a_target_above_the_given_max_num_seqs_is_an_error():
    code, p = plan("--max-num-seqs", "32")
    assert code == 1
    (miss,) = [x for x in p["problems"] if x["code"] == "target-above-max-num-seqs"]
    assert miss["severity"] == "error"
    assert "--max-num-seqs 32 as given runs 32 at once" in miss["message"]
    assert "--max-num-seqs 64" in miss["message"]
    assert "--max-num-seqs 32 " in p["command"] + " "


def test_a_given_max_num_seqs_that_runs_the_target_is_fine():
    code, p = plan("--max-num-seqs", "64")
    assert code == 0
    assert not [x for x in p["problems"] if x["code"] == "target-above-max-num-seqs"]
