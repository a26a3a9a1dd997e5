"""plan --disagg plans each pool deployment once: the decode layout search plans the decode
pool at each TP and _plan_pools asked for the one chosen again (and for the prefill pool again
when a TPOT target re-plans the decode pool at fewer sequences); equal requests now get the
plan already made, and the service is the same."""

from __future__ import annotations

import pytest

from kvplan import api
from kvplan.planner import disagg
from kvplan.specs import Workload


@pytest.mark.parametrize(("model", "workload"), [
    ("meta-llama/Llama-3.1-70B-Instruct", Workload(target_concurrency=64, slo_tpot_ms=40)),
    ("meta-llama/Llama-3.1-8B-Instruct", Workload()),
    ("Qwen/Qwen3-30B-A3B", Workload(target_concurrency=64)),
])
def test_each_pool_deployment_is_planned_once(monkeypatch: pytest.MonkeyPatch, model: str,
                                              workload: Workload) -> None:
    asked: list[tuple[object, ...]] = []
    real = disagg.plan_disagg

    def counting(*a: object, **k: object) -> object:
        inner = k["plan_fn"]

        def plan_fn(m: object, gpu: object, knobs: object, w: object, price: object) -> object:
            asked.append((gpu, knobs, w, price))
            return inner(m, gpu, knobs, w, price)  # type: ignore[operator]

        return real(*a, **{**k, "plan_fn": plan_fn})  # type: ignore[arg-type]

    monkeypatch.setattr(disagg, "plan_disagg", counting)  # (api imports it when called)
    got = api.plan_disagg(model, "h100-sxm-80gb", workload=workload, offline=True)
    assert got.disaggregated is not None
    assert asked
    assert all(asked[i] != asked[j] for i in range(len(asked)) for j in range(i)), \
        "a pool deployment planned twice"
