"""Errors carry a typed reason; callers decide on it, never on the message text."""

from __future__ import annotations

import pytest

from kvplan.errors import (
    EXIT_CODES,
    InvalidConfigError,
    InvalidInputError,
    KvplanError,
    Reason,
    UnavailableError,
    UnknownGpuError,
    UnknownModelError,
)
from kvplan.sources import catalog, hub

TYPO = "meta-llama/Llama-3.1-8B-Instruc"  # one letter short of a catalogue id


def test_every_reason_has_the_documented_exit_code():
    # README / errors.py: 2 bad usage or bad input, 3 a model or GPU source is unavailable
    unavailable = {Reason.GATED, Reason.OFFLINE_MISS, Reason.NETWORK, Reason.HUB_ERROR,
                   Reason.NO_LOCAL_GPU}
    assert set(EXIT_CODES) == set(Reason)
    for r in Reason:
        assert EXIT_CODES[r] == (3 if r in unavailable else 2), r


def test_each_class_sets_its_reason():
    assert UnknownModelError("x", []).reason is Reason.NOT_FOUND
    assert UnknownGpuError("x", []).reason is Reason.NOT_FOUND
    assert InvalidConfigError("bad", path="p").reason is Reason.INVALID_CONFIG
    assert InvalidInputError("bad").reason is Reason.BAD_INPUT
    assert KvplanError("bad").exit_code == 2
    assert UnavailableError("gone", reason=Reason.GATED).exit_code == 3


def test_invalid_config_keeps_its_detail_apart_from_the_path():
    e = InvalidConfigError("not valid JSON", path="a/config.json", field="x")
    assert e.message == "a/config.json: field 'x': not valid JSON" and e.detail == "not valid JSON"


def _hub_fails(monkeypatch: pytest.MonkeyPatch, message: str, reason: Reason) -> None:
    def load(*args: object, **kwargs: object) -> None:
        raise UnavailableError(message, reason=reason, hint="retry")

    monkeypatch.setattr(hub, "load", load)


def test_network_failure_of_a_typo_names_the_catalogue_id_whatever_its_words(monkeypatch):
    # the message mentions "offline" and "gated", but the reason is a network failure
    _hub_fails(monkeypatch, "offline proxy refused a gated path", Reason.NETWORK)
    with pytest.raises(UnavailableError) as got:
        catalog.resolve_model(TYPO)
    assert got.value.reason is Reason.NETWORK and got.value.exit_code == 3
    hint = got.value.hint or ""
    assert hint.startswith("did you mean 'meta-llama/Llama-3.1-8B-Instruct'")
    assert hint.endswith("? retry")


def test_offline_miss_of_a_typo_is_an_unknown_model(monkeypatch):
    _hub_fails(monkeypatch, "not in the cache", Reason.OFFLINE_MISS)
    with pytest.raises(UnknownModelError) as got:
        catalog.resolve_model(TYPO)
    assert got.value.exit_code == 2
    assert got.value.suggestions[0] == "meta-llama/Llama-3.1-8B-Instruct"


def test_gated_typo_is_passed_on_without_a_suggestion(monkeypatch):
    _hub_fails(monkeypatch, "no access", Reason.GATED)
    with pytest.raises(UnavailableError) as got:
        catalog.resolve_model(TYPO)
    assert got.value.reason is Reason.GATED and got.value.hint == "retry"
