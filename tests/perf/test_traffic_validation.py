"""benchmarks/traffic_validation.py: every published run is replayed with the deployment it
states (dtype as the engine serves it), and the script prints its tables."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tv() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "traffic_validation", ROOT / "benchmarks" / "traffic_validation.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_every_run_states_its_source_and_points(tv: ModuleType) -> None:
    assert len(tv.RUNS) >= 2
    for run in tv.RUNS:
        assert run.source.startswith("https://")
        assert run.points and all(p for p in run.points.values())


def test_float32_checkpoint_is_replayed_in_bf16(tv: ModuleType) -> None:
    """Qwen2.5-0.5B-Instruct's config says float32; vLLM's --dtype auto serves it in bf16
    (the run says BF16): 494 M parameters ≈ 0.99 GB of weights read per step, not 1.98 GB."""
    run = next(r for r in tv.RUNS if r.model == "Qwen/Qwen2.5-0.5B-Instruct")
    ctx, head = tv._context(run)
    assert "0.23.0" in head
    assert ctx.dense_read_bytes + ctx.expert_bytes < 1.1e9


def test_script_prints_a_table_per_run(tv: ModuleType,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    tv.main()
    out = capsys.readouterr().out
    assert out.count("| clients |") == len(tv.RUNS)
    assert "ttft_p99: median |error|" in out
