"""plan --request-rate with latency targets searches max_num_seqs (traffic.running_for_rate):
each value's replica search and the one-copy-fewer check before it share their simulations,
so no (latency model, rate) is simulated twice. Llama-3.1-70B FP8 on two B200s at 20 req/s,
p99 TTFT 200 ms: the check of 82 at two copies fewer than 41's three is the first count
replicas_for tries at 82 (its capacity's lower bound), simulated twice before."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from clirun import call

from kvplan.perf import simulate as sim


def test_each_simulation_of_the_search_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: Counter[tuple[int, float]] = Counter()
    for name in ("open_loop", "open_loop_unless_missed"):
        real = getattr(sim, name)

        def counted(ctx: object, ins: object, outs: object, rate: float, *a: object,
                    _real: object = real, **k: object) -> object:
            runs[(id(ctx), rate)] += 1
            return _real(ctx, ins, outs, rate, *a, **k)  # type: ignore[operator]

        monkeypatch.setattr(sim, name, counted)
    code, out, err = call("plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "b200", "-tp",
                          "2", "-q", "fp8", "--kv-cache-dtype", "fp8", "--request-rate", "20",
                          "--slo-ttft-ms", "200", "--offline", "--json")
    assert code == 0, err
    rec = json.loads(out)["recommendations"]["max_num_seqs"]
    assert rec["value"] == 82 and "41: 3; 82: 2; 164: no fewer" in rec["reason"]
    assert runs and max(runs.values()) == 1, [k for k, v in runs.items() if v > 1]
