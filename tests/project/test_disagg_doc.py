"""docs/disagg.md's validation table is what benchmarks/disagg_validation.py computes now."""

from __future__ import annotations

from pathlib import Path

import benchmod

ROOT = Path(__file__).resolve().parents[2]


def test_validation_table_is_current():
    lines, median = benchmod.load("disagg_validation").table()
    doc = (ROOT / "docs" / "disagg.md").read_text(encoding="utf-8")
    missing = [line for line in lines if line not in doc]
    assert not missing, "rerun python benchmarks/disagg_validation.py and paste its table: " \
        + "\n".join(missing)
    assert f"Median error {median:.0%}".replace("%", " %") in doc
