"""A deployment that does not fit at the TP it was given no value for (the engine default, 1)
moves to the smallest valid TP that fits and holds the target's requests, not merely the
smallest that fits the weights: Llama-3.3-70B on H100 at 64 requests of 3,300 tokens fits its
weights at TP 2, where the KV cache holds 8 of them (the plan at -tp 2 says so), and holds them
at TP 4. compare plans every engine on its serve line's TP."""

from __future__ import annotations

import json

from clirun import call

ARGS = ["llama-3.3-70b-instruct", "--gpu", "h100", "--avg-input-tokens", "3000",
        "--avg-output-tokens", "300", "--target-concurrency", "64", "--max-model-len", "8192"]


def run(*args: str) -> tuple[int, dict]:
    code, out, err = call(*args, "--offline", "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_tp_two_fits_the_weights_but_not_the_target():
    code, p = run("plan", *ARGS, "-tp", "2")
    assert code == 1 and not p["fits"]
    assert any(x["code"] == "target-not-met" for x in p["problems"])


def test_without_tp_the_plan_moves_to_the_tp_that_holds_the_target():
    _, p = run("plan", *ARGS)
    tp = p["recommendations"]["tensor_parallel_size"]
    assert tp["value"] == 4 and "holds 64 requests of 3300 tokens" in tp["reason"]
    assert "--tensor-parallel-size 4 " in p["command"]
    assert not any(x["code"] == "target-not-met" for x in p["problems"])
    code, at4 = run("plan", *ARGS, "-tp", "4")
    assert code == 0 and at4["fits"]
    assert at4["command"] == p["command"]


def test_compare_plans_every_engine_where_the_target_is_held():
    code, c = run("compare", *ARGS)
    assert code == 0
    assert {p["gpu"]["count"] for p in c["plans"]} == {4}
    assert all(p["fits"] for p in c["plans"])
