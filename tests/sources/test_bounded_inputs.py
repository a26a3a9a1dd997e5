"""Every file kvplan reads on behalf of an input is contained, regular and bounded; every price
is validated once (issue 22: items 5, 8, 9, 13 and 18)."""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path

import pytest
from clirun import run
from drafts import EAGLE3_CONFIG
from hypothesis import given
from hypothesis import strategies as st

import kvplan
from kvplan.errors import InvalidConfigError, InvalidInputError
from kvplan.sources.catalog import resolve_gpu
from kvplan.sources.checkpoint import parse_header
from kvplan.sources.limits import json_depth_ok
from kvplan.sources.prices import load_price_file

LLAMA = {k: v for k, v in EAGLE3_CONFIG.items() if k != "draft_vocab_size"} | {
    "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32}
COMMIT = "0123456789abcdef0123456789abcdef01234567"


# ------------------------------------------------- item 5: huggingface_hub's offline cache

def _hf_snapshot(tmp_path: Path, link_to: str) -> Path:
    """models--acme--m in the HF cache the tests use (conftest: HF_HOME=tmp/hf), its
    snapshot's config.json a symlink to `link_to`."""
    repo = tmp_path / "hf" / "hub" / "models--acme--m"
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "blobs" / "cfg").write_text(json.dumps(LLAMA))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    (snap / "config.json").symlink_to(link_to)
    return snap


def test_an_offline_snapshot_config_in_its_blobs_is_read(capsys, tmp_path):
    _hf_snapshot(tmp_path, "../../blobs/cfg")
    code, out, err = run(capsys, "plan", "acme/m", "--gpu", "h100", "--offline", "--json")
    assert code == 0, err
    assert json.loads(out)["model"]["source"].startswith("Hugging Face Hub acme/m@01234567")


def test_an_offline_snapshot_config_linked_out_of_its_repo_folder_is_not_read(capsys, tmp_path):
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps({**LLAMA, "model_type": "SECRET"}))
    _hf_snapshot(tmp_path, str(secret))
    code, out, err = run(capsys, "plan", "acme/m", "--gpu", "h100", "--offline")
    assert code == 2 and "SECRET" not in out + err and "outside" in err


# ------------------------------------------------------------ item 8: --prices is bounded

def _sweep(capsys, prices: Path):
    return run(capsys, "sweep", "llama-3.1-8b", "--gpus", "h100", "--prices", str(prices))


def test_prices_from_a_device_is_refused(capsys):
    code, out, err = _sweep(capsys, Path("/dev/zero"))
    assert code == 2 and "regular file" in err


def test_prices_from_a_fifo_is_refused_without_waiting(capsys, tmp_path):
    fifo = tmp_path / "prices.yaml"
    os.mkfifo(fifo)
    done = threading.Event()
    result: list = []

    def go() -> None:
        result.append(_sweep(capsys, fifo))
        done.set()

    threading.Thread(target=go, daemon=True).start()
    if not done.wait(20):  # unblock a reader that waits for a writer, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        done.wait(5)
        pytest.fail("--prices FIFO blocked")
    code, _, err = result[0]
    assert code == 2 and "regular file" in err


def test_a_huge_price_file_is_refused_before_it_is_read(capsys, tmp_path):
    big = tmp_path / "prices.csv"
    with open(big, "wb") as f:
        f.write(b"id,usd_per_hour\n")
        f.truncate(300 * 2**20)  # sparse: 300 MB claimed, nothing on disk
    code, _, err = _sweep(capsys, big)
    assert code == 2 and "-byte limit for a --prices file" in err


# --------------------------------------------- item 13: one validation for every price

@pytest.mark.parametrize("amount", ["1e308", "1e-300", "0.001", "10001", "inf", "nan"])
@pytest.mark.parametrize("suffix", [".csv", ".yaml"])
def test_a_price_out_of_range_in_a_file_is_refused(tmp_path, amount, suffix):
    f = tmp_path / f"p{suffix}"
    f.write_text(f"id,usd_per_hour\nh100,{amount}\n" if suffix == ".csv" else f"h100: {amount}\n")
    with pytest.raises(InvalidConfigError) as e:
        load_price_file(f, resolve_gpu)
    assert "usd_per_hour" in str(e.value)


@pytest.mark.parametrize("amount", [1e308, 1e-300, 10**400])
def test_a_price_out_of_range_given_to_sweep_is_refused(amount):
    with pytest.raises(InvalidInputError):
        kvplan.sweep("llama-3.1-8b", gpus=["h100"], prices={"h100": amount})


@pytest.mark.parametrize("amount", ["1e308", "1e-300"])
def test_the_flag_and_the_file_refuse_the_same_prices(capsys, tmp_path, amount):
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "h100", "--gpu-hour-price",
                       amount)
    f = tmp_path / "p.csv"
    f.write_text(f"id,usd_per_hour\nh100,{amount}\n")
    code2, _, err2 = _sweep(capsys, f)
    assert code == code2 == 2 and "gpu-hour-price" in err and "usd_per_hour" in err2


def test_prices_in_range_still_rank(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("h100: 0.01\nh200: 10000\n")
    table = load_price_file(f, resolve_gpu)
    assert table["h100-sxm-80gb"].usd_per_hour == 0.01
    assert table["h200-sxm-141gb"].usd_per_hour == 10000


# ------------------------------------------------------------ item 18: no inf thresholds

@pytest.mark.parametrize("args", [
    ("check", "examples/deploy", "--gpu", "h100", "--min-concurrency", "inf"),
    ("check", "examples/deploy", "--gpu", "h100", "--min-headroom-gib", "inf"),
    ("sweep", "llama-3.1-8b", "--gpus", "h100", "--slo-tpot-ms", "inf"),
    ("sweep", "llama-3.1-8b", "--gpus", "h100", "--slo-ttft-ms", "inf"),
])
def test_inf_thresholds_are_refused(capsys, monkeypatch, args):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and args[-2] in err


# --------------------------------------------- item 9: tensor count limit matches its cost

def _header(n: int) -> bytes:
    blob = json.dumps({f"t.{i}": {"dtype": "F16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]}
                       for i in range(n)}, separators=(",", ":")).encode()
    return struct.pack("<Q", len(blob)) + blob


def test_a_header_over_the_affordable_tensor_count_is_refused():
    """300,000 tensors costs ~10 s and ~0.3 GiB to plan (limits.MAX_TENSORS); the old limit,
    1,000,000, cost 30 s and 0.8 GiB."""
    with pytest.raises(InvalidConfigError) as e:
        parse_header(_header(300_001), where="x.safetensors")
    assert "300,000" in str(e.value)
    assert len(parse_header(_header(1000), where="x.safetensors")) == 1000


def test_a_header_of_millions_of_tiny_values_is_refused_before_it_is_parsed():
    """Within the 100 MiB header limit, 35 M `[]` took 3 GiB and 24 s (the depth check's regex
    passes, then json.loads): found by the campaign's peak-memory runs. The values are counted
    first (limits.MAX_JSON_VALUES), so 4 M of them cost no more than the text."""
    import tracemalloc

    blob = b'{"a": [' + b"[]," * 4_000_000 + b"[]]}"
    tracemalloc.start()
    try:
        with pytest.raises(InvalidConfigError) as e:
            parse_header(struct.pack("<Q", len(blob)) + blob, where="x.safetensors")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "5,000,000 values" in str(e.value)
    assert peak < 4 * len(blob), peak  # the decoded text, not an object per value


@pytest.mark.parametrize("text,ok", [
    ("[]", True), ("[" * 64 + "]" * 64, True), ("[" * 65 + "]" * 65, False),
    ('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', True),
    ('["\\"", ' + "[" * 65 + "]" * 65 + "]", False), ("[" * 100_000, False),
    ("[}" * 1000, True), ('{"a": [1, {"b": [2]}]}', True),
])
def test_json_depth_is_measured_without_a_loop_per_character(text, ok):
    assert json_depth_ok(text) is ok


def _depth(node: object) -> int:
    if isinstance(node, list):
        return 1 + max((_depth(x) for x in node), default=0)
    if isinstance(node, dict):
        return 1 + max((_depth(x) for x in node.values()), default=0)
    return 0


_JSON = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab,:', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(alphabet='[]{}"\\ab', max_size=4), inner, max_size=3),
    max_leaves=40)


@given(_JSON, st.integers(min_value=1, max_value=8))
def test_json_depth_matches_the_nesting_of_any_document(doc, limit):
    """Against the depth of the structure itself (strings full of brackets and escapes)."""
    assert json_depth_ok(json.dumps(doc), limit) is (_depth(doc) <= limit)
