"""The named length datasets `--dataset` takes (docs/traffic.md): joint histograms of
(input, output) tokens per request from public per-request counts, bundled in
length_datasets.json (written by scripts/length_histograms.py, with each dataset's source,
tokenizer and filter).

`sharegpt` alone is refused with the reason: the serving benchmarks' ShareGPT sampler
(`vllm bench serve --dataset-name sharegpt`, SGLang `bench_serving`) keeps the first turn of
each conversation, drops prompts or outputs under 4 tokens and pairs over 1,024 prompt or
2,048 total tokens (vllm/benchmarks/datasets.py ShareGPTDataset.sample and is_valid_sequence,
v0.10+), counted with the served model's tokenizer; no public per-request counts of that
sample were found, and the bundled ShareGPT histogram (every turn with its history) is not it.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import InvalidConfigError, InvalidInputError
from ..perf.simulate import LengthHistogram

DATA = Path(__file__).resolve().parent / "length_datasets.json"

SHAREGPT_SAMPLER = (
    "the benchmarks' ShareGPT sampler (vllm bench serve --dataset-name sharegpt, SGLang "
    "bench_serving) sends the first turn of each conversation, prompts of 4-1,024 tokens and "
    "at most 2,048 in all, counted with the served model's tokenizer: its per-request lengths "
    "are not bundled (no public counts of that sample were found)")


@cache
def _table() -> dict[str, Any]:
    try:
        doc = json.loads(DATA.read_text(encoding="utf-8"))
        if not (isinstance(doc.get("edges"), list) and isinstance(doc.get("datasets"), dict)):
            raise ValueError("no edges or datasets")
        return dict(doc)
    except (OSError, ValueError, AttributeError) as e:
        raise InvalidConfigError(f"bundled length datasets ({DATA.name}) unreadable: {e}",
                                 hint="reinstall kvplan") from None


def names() -> tuple[str, ...]:
    """The bundled datasets' names."""
    return tuple(_table()["datasets"])


def _aliases() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, d in _table()["datasets"].items():
        out[name] = name
        for a in d.get("aliases", ()):
            out[a] = name
    return out


def describe(name: str, d: dict[str, Any]) -> str:
    """The dataset as a figure states it: its name, size, mean lengths and tokenizer (the
    source and filter: docs/traffic.md and length_datasets.json)."""
    return (f"the {name} dataset's lengths ({d['requests']:,} requests, mean "
            f"{d['input_mean']:,.0f} in / {d['output_mean']:,.0f} out, tokenizer "
            f"{d['tokenizer'].split(' (')[0]}), sampled from its histogram")


def resolve(name: str) -> str:
    """The canonical name of a bundled dataset; an unknown one is an error with the names."""
    key = name.strip().lower().replace("_", "-")
    table = _aliases()
    if key in table:
        return table[key]
    known = ", ".join(names())
    if key in ("sharegpt", "sharegpt-v3", "sharegpt-vicuna"):
        raise InvalidInputError(f"--dataset {name}: {SHAREGPT_SAMPLER}",
                                hint=f"pass the lengths your run sent with --lengths-file, or use "
                                f"a bundled dataset: {known} (sharegpt-8k is ShareGPT as "
                                "Sarathi-Serve and Vidur replay it, every turn with its history)")
    close = dict.fromkeys(table[k] for k in difflib.get_close_matches(key, sorted(table), n=3,
                                                                        cutoff=0.5))
    hint = "did you mean " + " or ".join(map(repr, close)) + "? " if close else ""
    raise InvalidInputError(f"--dataset {name}: no such length dataset",
                            hint=f"{hint}bundled: {known} (docs/traffic.md); or give your own "
                            "lengths with --lengths-file")


def load(name: str) -> LengthHistogram:
    """The bundled dataset `name` (or an alias) as a LengthHistogram."""
    canonical = resolve(name)
    table = _table()
    edges: list[int] = table["edges"]
    d = table["datasets"][canonical]
    cells = tuple((edges[i], edges[i + 1], edges[j], edges[j + 1], n) for i, j, n in d["cells"])
    return LengthHistogram(canonical, describe(canonical, d), cells, float(d["input_mean"]),
                           float(d["output_mean"]))
