"""kvplan compare's text table: every latency figure says whether it was calibrated."""

from __future__ import annotations

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
