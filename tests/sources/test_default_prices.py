"""The bundled default prices (gpu_specs/prices.csv): rows pinned against their sources, the
header's labelling and policy, and the sweep naming the providers it priced with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kvplan
from kvplan.planner.sweep import SweepResult, default_providers
from kvplan.sources.catalog import resolve_gpu
from kvplan.sources.prices import default_prices
from kvplan.specs import Price, Workload

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "gpu_specs" / "prices.csv"
CRUSOE = "https://www.crusoe.ai/cloud/pricing (Crusoe Cloud on-demand)"
RUNPOD = "https://www.runpod.io/pricing (RunPod Secure Cloud on-demand)"


# Hand-typed from the sources, not from the CSV:
# Crusoe: github.com/api-evangelist/crusoe plans/crusoe-plans-pricing.yml (read 2026-09-20,
# transcribing https://www.crusoe.ai/cloud/pricing): "NVIDIA H200 141GB HGX (on-demand)
# $4.29/GPU-hr", "NVIDIA H100 80GB HGX (on-demand) $3.90/GPU-hr", "NVIDIA A100 80GB SXM
# (on-demand) $2.30/GPU-hr", "AMD MI300X 192GB (on-demand) $3.45/GPU-hr", "NVIDIA L40S 48GB
# (on-demand) $1.50/GPU-hr".
# RunPod: github.com/tgarg01/silybench-data derived/csv/gpu_prices.csv (checked 2026-09-25,
# source https://www.runpod.io/pricing): "B200, Secure Cloud" 6.79, "H100 PCIe, Secure Cloud"
# 2.89 (github.com/datareceipts/data-receipts 109-gpu-pricing/vendors.json, read 2026-11-09,
# RunPod (Secure): H100 PCIe 2.89 as well).
@pytest.mark.parametrize(("gpu", "usd", "source", "date"), [
    ("mi300x", 3.45, CRUSOE, "2026-09-20"),
    ("h100-sxm-80gb", 3.90, CRUSOE, "2026-09-20"),
    ("h200-sxm-141gb", 4.29, CRUSOE, "2026-09-20"),
    ("a100-sxm-80gb", 2.30, CRUSOE, "2026-09-20"),
    ("l40s", 1.50, CRUSOE, "2026-09-20"),
    ("b200", 6.79, RUNPOD, "2026-09-25"),
    ("h100-pcie-80gb", 2.89, RUNPOD, "2026-09-25"),
])
def test_rows_pinned_to_their_source(gpu: str, usd: float, source: str, date: str) -> None:
    p = default_prices(resolve_gpu)[gpu]
    assert (p.usd_per_hour, p.source, p.date, p.default) == (usd, source, date, True)


def test_no_default_where_neither_provider_lists_an_on_demand_price() -> None:
    """Policy step 3: MI325X/MI355X are on neither provider's on-demand list: no default rather
    than a third provider's figure (the table the old defaults mixed)."""
    table = default_prices(resolve_gpu)
    assert not {"mi325x", "mi355x", "b300", "rtx-3090", "l4"} & set(table)


def test_header_states_unit_tier_policy_and_dates() -> None:
    header = " ".join(line.lstrip("# ").strip() for line in CSV.read_text().splitlines()
                      if line.startswith("#"))
    for words in ("US$ per GPU-hour", "on-demand list prices", "--prices FILE",
                  "Crusoe Cloud", "read 2026-09-20", "RunPod Secure Cloud", "read 2026-09-25",
                  "not Community Cloud", "no default", "MI325X"):
        assert words in header, words
    # every row: the provider's page, then provider and tier in parentheses, then its date
    for p in default_prices(resolve_gpu).values():
        assert p.source in (CRUSOE, RUNPOD), p
        assert p.date in ("2026-09-20", "2026-09-25"), p


def test_default_providers_names_each_once_sorted() -> None:
    prices = {"b200": Price(gpu_id="b200", usd_per_hour=6.79, source=RUNPOD, default=True),
              "mi300x": Price(gpu_id="mi300x", usd_per_hour=3.45, source=CRUSOE, default=True),
              "h100-sxm-80gb": Price(gpu_id="h100-sxm-80gb", usd_per_hour=3.9, source=CRUSOE,
                                     default=True),
              "l40s": Price(gpu_id="l40s", usd_per_hour=1.0, source="mine.csv:2", default=False)}
    assert default_providers(prices, {"b200", "mi300x", "h100-sxm-80gb", "l40s"}) == [
        "Crusoe Cloud on-demand", "RunPod Secure Cloud on-demand"]
    assert default_providers(prices, {"l40s", "t4"}) == []


def test_sweep_note_names_the_providers_it_priced_with() -> None:
    def note(r: SweepResult) -> list[str]:
        return [n for n in r.notes if "bundled defaults" in n]

    r = kvplan.sweep("meta-llama/Llama-3.1-8B-Instruct", gpus=["h100", "b200", "mi300x"],
                     max_gpus=1, max_model_len=4096, workload=Workload(target_concurrency=8),
                     offline=True)
    (text,) = note(r)
    assert "Crusoe Cloud on-demand" in text and "RunPod Secure Cloud on-demand" in text
    assert "gpu_specs/prices.csv" in text
    mine = kvplan.sweep("meta-llama/Llama-3.1-8B-Instruct", gpus=["h100", "mi300x"], max_gpus=1,
                        max_model_len=4096, workload=Workload(target_concurrency=8),
                        prices={"h100": 2.0, "mi300x": 2.0}, offline=True)
    assert note(mine) == []  # the user's own prices: no defaults to name


def test_price_effect_block_in_docs_is_current() -> None:
    """docs/sweep.md's before/after table is benchmarks/price_effect.py's output."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "price_effect.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr


def test_price_provider_is_read_once_for_the_sweep_note_and_the_tables():
    """One parser of a price's source (specs.price_provider): the provider and tier in the
    parentheses gpu_specs/prices.csv writes after each URL; nothing for a user's file:line."""
    from kvplan.specs import Price, price_provider

    src = "https://www.crusoe.ai/cloud/pricing (Crusoe Cloud on-demand)"
    assert price_provider(src) == "Crusoe Cloud on-demand"
    assert price_provider("https://example.com/prices") is None
    assert price_provider("my-prices.csv:3") is None
    p = Price(gpu_id="h100-sxm-80gb", usd_per_hour=3.9, source="my-prices.csv:3", default=False)
    assert p.provider == "my-prices.csv:3"
