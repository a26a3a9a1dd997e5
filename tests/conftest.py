"""Shared fixtures. No test reaches the network: Hub access is forced offline."""

import pytest


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "kvplan-cache"))
    monkeypatch.delenv("KVPLAN_DEBUG", raising=False)
