"""Safetensors header parsing: round trip and robustness (hypothesis)."""

from __future__ import annotations

import pytest
from fakehub import safetensors_header_only
from hypothesis import given
from hypothesis import strategies as st

from kvplan.errors import InvalidConfigError
from kvplan.model.tensor_names import is_scale, layer_of
from kvplan.sources.checkpoint import parse_header

names = st.from_regex(r"model\.layers\.[0-9]{1,2}\.[a-z_]{1,12}\.weight", fullmatch=True)
tables = st.dictionaries(
    names,
    st.tuples(
        st.sampled_from(["BF16", "F32", "I32", "U8", "F8_E4M3"]),
        st.lists(st.integers(0, 70_000), max_size=3),
    ),
    max_size=20,
)


@given(tables)
def test_header_round_trip(table):
    blob = safetensors_header_only({k: (d, list(s)) for k, (d, s) in table.items()})
    assert parse_header(blob, where="x") == {k: (d, tuple(s)) for k, (d, s) in table.items()}


@given(st.binary(max_size=64))
def test_garbage_never_escapes_as_anything_but_a_config_error(blob):
    try:
        parse_header(blob, where="shard.safetensors")
    except InvalidConfigError as e:
        assert "shard.safetensors" in str(e)


def test_truncated_header_is_named():
    blob = safetensors_header_only({"a.weight": ("BF16", [4, 4])})
    with pytest.raises(InvalidConfigError, match="truncated"):
        parse_header(blob[:-3], where="f")


@pytest.mark.parametrize(
    "name,expected",
    [
        ("model.layers.7.self_attn.q_proj.qweight", 7),
        ("model.norm.weight", None),
        ("model.vision_tower.encoder.layers.3.mlp.fc1.weight", None),
        ("transformer.h.11.attn.c_attn.weight", 11),
    ],
)
def test_layer_of(name, expected):
    assert layer_of(name) == expected


@pytest.mark.parametrize("name,expected", [
    ("x.weight_scale", True), ("x.weight_scale_inv", True), ("x.scales", True), ("x.qzeros", True),
    ("x.g_idx", True), ("x.qweight", False), ("x.weight", False),
])
def test_is_scale(name, expected):
    assert is_scale(name) is expected
