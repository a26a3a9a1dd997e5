"""Credential redaction (sources/limits.py redact) leaves kvplan's own prose alone: a flag-like
secret name needs its dash to start a word. `kvplan check` printed "less than one
32,768-token ***" (the word after "-token" taken for a --token value)."""

from __future__ import annotations

import pytest

from kvplan.sources.limits import redact


@pytest.mark.parametrize("text", [
    "the KV pool holds 4,597 tokens, less than one 32,768-token request",
    "fewer than the model's 32,768-token context length",
    "a 16-token block", "the 8-token-prefix cache",
])
def test_prose_with_token_counts_is_kept(text):
    assert redact(text) == text


@pytest.mark.parametrize(("text", "secret"), [
    ("vllm serve m --hf-token hf_abcdefghijklmnopqrs --tp 2", "hf_abcdefghijklmnopqrs"),
    ("ARGS=--api-key=abcdefghijkl", "abcdefghijkl"),
    ('["--api-key", "abcdefghijkl"]', "abcdefghijkl"),
    ("-token abcdefghijkl", "abcdefghijkl"),
])
def test_flags_that_carry_a_secret_are_still_redacted(text, secret):
    assert secret not in redact(text)
