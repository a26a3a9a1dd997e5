"""Shared fixtures. No test reaches the network: Hub access is forced offline."""

from pathlib import Path

import pytest
from drafts import EAGLE3_CONFIG, write_config
from hypothesis import settings

# Hypothesis profiles: Hypothesis's own "default" is the README's `pytest` (a quick pass of about
# 100 inputs); "campaign" is the long fuzz run that .ci/run adds (`pytest -m fuzz
# --hypothesis-profile=campaign`): tests/clirun.py's SHARES split its max_examples among the fuzzed
# properties (tests/cli/test_fuzz.py, tests/deploy/test_untrusted.py), 5,198 inputs in all.
settings.register_profile("campaign", max_examples=5200)


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "kvplan-cache"))
    monkeypatch.delenv("KVPLAN_DEBUG", raising=False)


@pytest.fixture()
def eagle3_dir(tmp_path: Path) -> Path:
    """A local EAGLE-3 head for Llama-3.1-8B (tests/drafts.py)."""
    return write_config(tmp_path, "eagle3-head", EAGLE3_CONFIG)
