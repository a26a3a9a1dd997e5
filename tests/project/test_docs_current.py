"""Generated documents match what their scripts generate now (no drift)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _check(*script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT.joinpath(*script)), "--check"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_engine_docs_are_current():
    """docs/engines.md is generated from the registry (scripts/engine_docs.py)."""
    r = _check("scripts", "engine_docs.py")
    assert r.returncode == 0, r.stdout + r.stderr


def test_catalogue_docs_are_current():
    """docs/models.md is generated from model_specs/index.json (scripts/catalogue_docs.py)."""
    r = _check("scripts", "catalogue_docs.py")
    assert r.returncode == 0, r.stdout + r.stderr


def test_accuracy_docs_are_current():
    """docs/accuracy.md and the README summary are the benchmark's output (accuracy.py)."""
    r = _check("benchmarks", "accuracy.py")
    assert r.returncode == 0, r.stderr[-2000:]


def test_knob_docs_are_current():
    """docs/knobs.md is generated from the knob table (scripts/knob_docs.py)."""
    r = _check("scripts", "knob_docs.py")
    assert r.returncode == 0, r.stdout + r.stderr


def test_node_docs_are_current():
    """docs/nodes.md's system shapes table is generated from gpu_specs (scripts/node_docs.py)."""
    r = _check("scripts", "node_docs.py")
    assert r.returncode == 0, r.stdout + r.stderr


def test_latency_docs_are_current():
    """docs/performance-latency.md is generated from the public latency rows
    (benchmarks/perf_latency.py)."""
    r = _check("benchmarks", "perf_latency.py")
    assert r.returncode == 0, r.stdout + r.stderr


def test_traffic_validation_docs_are_current():
    """docs/traffic-validation.md is generated from the published percentile runs
    (benchmarks/traffic_validation.py)."""
    r = _check("benchmarks", "traffic_validation.py")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.pages
def test_front_end_overhead_doc_is_current():
    """docs/front-end-overhead.md is benchmarks/front_end_overhead.py's output."""
    r = _check("benchmarks", "front_end_overhead.py")
    assert r.returncode == 0, r.stderr[-2000:]
