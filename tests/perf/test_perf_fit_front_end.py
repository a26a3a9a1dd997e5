"""benchmarks/perf_fit.py: Dynamo's front-end constant is fitted only on rows that identify it
(Dynamo runs at FRONT_END_CLIENTS clients or fewer); a fit without any holds it at 0."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import benchmod
import pytest

from kvplan.perf import fit as fit_
from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model


@pytest.fixture(scope="module")
def pf() -> ModuleType:
    return benchmod.load("perf_fit")


def _row(concurrency: int, engine: str = "vllm", via_dynamo: bool = True) -> fit_.Row:
    ctx = perf.context_for(resolve_model("Qwen/Qwen3-32B"), resolve_gpu("h100-sxm-80gb"),
                           engine, "0.12.0", tp=2)
    ctx = dataclasses.replace(ctx, via_dynamo=via_dynamo)
    return fit_.Row(ctx, engine, f"g {engine}", concurrency, 1024, 128, 150.0, 20.0)


def test_rows_identify_it_only_through_dynamo_at_few_clients(pf: ModuleType) -> None:
    n = pf.FRONT_END_CLIENTS
    assert pf.front_end_identified([_row(64), _row(n)])
    assert not pf.front_end_identified([_row(n + 1), _row(512, "sglang")])
    assert not pf.front_end_identified([_row(1, via_dynamo=False)])  # a plain server's row


def test_an_unidentified_fit_holds_it_at_zero(pf: ModuleType,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness stage frees dynamo_front_end_ms with a row at 8 clients, and holds it at 0
    (the plain server's cost alone) with rows at 16 and more, as the SGLang groups are."""
    harness: list[fit_.Parameters] = []

    def fake_fit(rows: list[fit_.Row], params: fit_.Parameters, start: dict,
                 base: dict | None = None) -> dict[str, perf.Coefficients]:
        harness.append(params)
        return {e: perf.Coefficients(**{**fit_.START, **params.fixed}) for e in pf.ENGINES}

    monkeypatch.setattr(pf.fit_, "fit", fake_fit)
    pf.fit([_row(8), _row(64, "sglang")])
    pf.fit([_row(16), _row(64, "sglang")])
    identified, unidentified = harness[1], harness[3]  # (each fit: step stage, then harness)
    assert "dynamo_front_end_ms" in identified.shared
    assert "dynamo_front_end_ms" not in identified.fixed
    assert "dynamo_front_end_ms" not in unidentified.shared
    assert unidentified.fixed["dynamo_front_end_ms"] == 0.0
    assert "burst_share" in unidentified.shared
