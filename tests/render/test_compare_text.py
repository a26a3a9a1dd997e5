"""kvplan compare's text table: every latency figure says whether it was calibrated."""

from __future__ import annotations

import json
import re

from clirun import run

import kvplan
from kvplan.engines import registry


def test_compare_says_per_engine_whether_its_latency_is_calibrated(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    code, out, _ = run(capsys, "compare", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100")
    assert code == 0
    row = next(line for line in out.splitlines() if line.lstrip().startswith("latency model"))
    words = re.findall(r"calibrated|extrapolated|—", row)
    want = []
    for name in registry.names():
        perf = kvplan.plan("meta-llama/Llama-3.1-8B-Instruct", "h100", engine=name).performance
        want.append("—" if perf is None else "calibrated" if perf.calibrated else "extrapolated")
    assert words == want and "extrapolated" in want  # vLLM 0.33 is outside the fitted 0.12


def test_compare_with_a_rate_shows_replicas_and_simulated_percentiles(capsys, monkeypatch):
    """`compare --request-rate` (issue #27): per engine the replicas the rate needs, its GPUs,
    the simulated TTFT/TPOT at the SLO percentile and $/day — the figures of `plan --json`."""
    monkeypatch.setenv("COLUMNS", "200")
    args = ("meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--request-rate", "20",
            "--avg-input-tokens", "2000", "--avg-output-tokens", "300", "--slo-ttft-ms", "1000",
            "--slo-percentile", "90")
    code, out, _ = run(capsys, "compare", *args)
    assert code == 0
    rows = {line.split("│")[0].strip(): [c.strip() for c in line.split("│")[1:]]
            for line in out.splitlines() if "│" in line}
    code, js, _ = run(capsys, "compare", *args, "--json")
    assert code == 0
    plans = json.loads(js)["plans"]
    want = [f"{p['performance']['replicas']} ({p['performance']['gpus_for_rate']} GPUs)"
            for p in plans]
    assert rows["replicas for 20 req/s"] == want
    assert rows["p90 TTFT ms (simulated)"] == [
        f"{p['performance']['percentiles']['ttft_ms']['p90']:,.1f}" for p in plans]
    assert "$/day" in rows


def test_compare_without_a_rate_has_no_rate_rows(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    code, out, _ = run(capsys, "compare", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100")
    assert code == 0 and "req/s" not in out and "simulated" not in out
