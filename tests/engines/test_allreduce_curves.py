"""Measured all-reduce times per link (kvplan/engines/interconnect.py ALLREDUCE_CURVES) and what
kvplan's step model charges for one all-reduce (benchmarks/perf_latency.py): hand-worked values."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvplan.engines import interconnect as ic

MiB = 1024 * 1024


def test_busbw_to_time_hand_worked() -> None:
    # nccl-tests: busbw = algbw · 2(n−1)/n. Azure ND MI300X v5 RCCL 1 KiB at 0.04 GB/s, 8 ranks:
    # 1024 B · 14/8 = 1792 B / 0.04e9 B/s = 44.8 µs
    assert ic.busbw_us(1024, 0.04, 8) == pytest.approx(44.8)
    # 8 MiB at 131.57 GB/s: 8388608 · 1.75 = 14680064 B / 131.57e9 = 111.58 µs
    assert ic.busbw_us(8 * MiB, 131.57, 8) == pytest.approx(111.576, abs=1e-3)
    # 2 ranks: 2(n−1)/n = 1, so busbw = algbw: 1 MB at 10 GB/s = 100 µs
    assert ic.busbw_us(1_000_000, 10.0, 2) == pytest.approx(100.0)


def _mi300x_tp4() -> ic.AllReduceCurve:
    return next(c for c in ic.ALLREDUCE_CURVES if c.link.startswith("xGMI") and c.tp == 4)


def test_curve_interpolates_floors_and_extrapolates() -> None:
    c = _mi300x_tp4()  # vllm PR #19744 TP=4: 2 MiB 36.64, 4 MiB 63.86, 8 MiB 118.31 µs
    assert ic.curve_us(c, 3 * MiB) == pytest.approx((36.64 + 63.86) / 2)  # 50.25
    assert ic.curve_us(c, 1024) == pytest.approx(7.18)  # below 2 KiB: the latency floor
    # 16 MiB: 118.31 + (118.31 − 63.86) · (16 − 8) / (8 − 4) = 118.31 + 108.9 = 227.21
    assert ic.curve_us(c, 16 * MiB) == pytest.approx(227.21)


def test_busbw_curves_are_converted_from_the_published_bandwidth() -> None:
    rccl = next(c for c in ic.ALLREDUCE_CURVES if c.implementation.startswith("RCCL"))
    # Azure's 4 MiB row: 82.53 GB/s → 4194304 · 1.75 / 82.53e9 = 88.94 µs
    assert dict(rccl.points)[4 * MiB] == pytest.approx(88.94, abs=0.01)


def test_kvplan_charge_per_allreduce_hand_worked() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import perf_latency as pl

    class _C:
        allreduce_latency_us = 2.0

    class _Ctx:
        coefficients = _C()
        link_latency_us = None
        tp = 8
        link_bytes_per_s = 448e9

    # 4 MiB at TP8 over 448 GB/s: 4194304 · 2 · 7/8 = 7340032 B / 448e9 = 16.384 µs, + 2 µs
    assert pl.kvplan_allreduce_us(_Ctx(), 4 * MiB) == pytest.approx(18.384)  # type: ignore[arg-type]
    _Ctx.link_latency_us = 250.0  # a PCIe link's latency replaces the engine's
    assert pl.kvplan_allreduce_us(_Ctx(), 0) == pytest.approx(250.0)  # type: ignore[arg-type]
