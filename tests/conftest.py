"""Shared fixtures. No test reaches the network: Hub access is forced offline."""

import pytest


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("KVPLAN_DEBUG", raising=False)
