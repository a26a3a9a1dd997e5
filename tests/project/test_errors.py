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


@pytest.mark.parametrize(("ref", "typo"), [
    ("meta-llama/Llama-3.1-8B-Instruc", True),  # a letter short
    ("meta-llama/Llama-3.1-8B-Instrcut", True),  # two letters swapped
    ("META-LLAMA/llama-3.1-8b-instuct", True),  # case is no difference
    ("Qwen/Qwen2.5-Coder-7B-Instruct", False),  # a word added: a real repo
    ("Qwen/Qwen2.5-14B-Instruct", False),  # another size
    ("google/gemma-3-4b-pt", False),  # the base model of gemma-3-4b-it (a short word)
    ("unsloth/Llama-3.1-8B-Instruct", False),  # another owner
    ("meta-llama/Llama-3.1-8B", False),  # a word dropped
])
def test_only_a_misspelt_word_of_a_catalogue_id_is_a_typo(ref, typo):
    known = {"meta": "meta-llama/Llama-3.1-8B-Instruct", "Qwen": "Qwen/Qwen2.5-7B-Instruct",
             "goog": "google/gemma-3-4b-it", "unsl": "meta-llama/Llama-3.1-8B-Instruct"}
    assert catalog.misspelt(ref, known[ref[:4]] if ref[:4] in known
                            else "meta-llama/Llama-3.1-8B-Instruct") is typo


def test_offline_miss_of_a_real_repo_near_a_catalogue_id_stays_unavailable(monkeypatch):
    _hub_fails(monkeypatch, "not in the cache", Reason.OFFLINE_MISS)
    with pytest.raises(UnavailableError) as got:
        catalog.resolve_model("Qwen/Qwen2.5-Coder-7B-Instruct")
    assert got.value.reason is Reason.OFFLINE_MISS and got.value.exit_code == 3
    assert (got.value.hint or "").startswith("retry\ndid you mean 'Qwen/Qwen2.5-7B-Instruct'")
    assert str(got.value).endswith("\n  hint: retry\n  did you mean 'Qwen/Qwen2.5-7B-Instruct', "
                                   "'Qwen/Qwen2.5-72B-Instruct', 'Qwen/Qwen2.5-VL-7B-Instruct'?")
