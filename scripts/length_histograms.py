"""Write kvplan/sources/length_datasets.json: the (input, output) token-length histograms of the
named serving datasets `--dataset` takes (docs/traffic.md), from public per-request counts.

    python scripts/length_histograms.py SOURCES_DIR   # rewrite the JSON

SOURCES_DIR holds the source files under their own names (each is one CSV row per request:
num_prefill_tokens,num_decode_tokens, as microsoft/sarathi-serve and microsoft/vidur publish
them; DATASETS below says where each comes from). The histogram is joint (the pairs keep their
correlation) on quarter-octave bins: edges round(2^(k/4)), a bin [lo, hi). The exact means and
quantiles of the source are stored beside it.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "kvplan" / "sources" / "length_datasets.json"
EDGES = sorted({round(2 ** (k / 4)) for k in range(0, 73)})  # 1 … 262,144 tokens

SARATHI = ("https://github.com/microsoft/sarathi-serve/blob/72339db5b120614033b317880ad3a05a5e4c9415"
           "/data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv")
VIDUR = "https://github.com/microsoft/vidur/blob/7d47513363ec447a741ac5e47241580b47724fbf/"

DATASETS: dict[str, dict[str, object]] = {
    "sharegpt-8k": {
        "file": "sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
        "aliases": ["sharegpt8k", "openchat-sharegpt4", "sarathi-sharegpt"],
        "description": "ShareGPT conversations as Sarathi-Serve and Vidur replay them: every "
        "turn of a conversation is a request whose prompt carries the conversation so far",
        "source": SARATHI,
        "tokenizer": "Llama-2 (the file's name)",
        "filter": "conversations of at most 8,192 tokens (the file's name); outputs of at most "
        "1,024 tokens (the largest in the file)",
        "published": "Sarathi-Serve (Agrawal et al., OSDI 2024), openchat_sharegpt4: prompt "
        "median 1,730, p90 5,696; output median 415, p90 834 tokens",
    },
    "arxiv-summarization": {
        "file": "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        "aliases": ["arxiv", "arxiv-summarisation"],
        "description": "arXiv papers to summarise (long prompts, short answers), as Vidur "
        "replays them",
        "source": VIDUR + "data/processed_traces/"
        "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        "tokenizer": "Llama-2 (the file's name)",
        "filter": "Vidur's filtered_v2 (the file has prompts of up to 4,054 tokens and outputs of "
        "up to 4,056)",
        "published": "",
    },
    "azure-conv-2023": {
        "file": "splitwise_conv.csv",
        "aliases": ["azure-conv", "splitwise-conv", "azure-conversation"],
        "description": "Azure LLM inference trace 2023, conversation service (Splitwise's "
        "trace; AzurePublicDataset AzureLLMInferenceTrace_conv): production requests, one row each",
        "source": VIDUR + "data/processed_traces/splitwise_conv.csv",
        "tokenizer": "GPT family (the production service's, as the trace logs it)",
        "filter": "none",
        "published": "Splitwise (Patel et al., ISCA 2024), conversation: prompt median 1,020, "
        "output median 129 tokens",
    },
    "azure-code-2023": {
        "file": "splitwise_code.csv",
        "aliases": ["azure-code", "splitwise-code"],
        "description": "Azure LLM inference trace 2023, coding service (Splitwise's trace; "
        "AzurePublicDataset AzureLLMInferenceTrace_code): long prompts, outputs of a few tokens",
        "source": VIDUR + "data/processed_traces/splitwise_code.csv",
        "tokenizer": "GPT family (the production service's, as the trace logs it)",
        "filter": "none",
        "published": "",
    },
}


def _bin(x: int) -> int:
    lo, hi = 0, len(EDGES) - 1
    while hi - lo > 1:  # EDGES[lo] <= x < EDGES[hi]
        mid = (lo + hi) // 2
        if EDGES[mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo


def _quantiles(xs: list[int]) -> dict[str, float]:
    s = sorted(xs)

    def q(p: float) -> float:  # numpy's default (linear between closest ranks)
        pos = (len(s) - 1) * p
        i = int(pos)
        j = min(i + 1, len(s) - 1)
        return round(s[i] + (s[j] - s[i]) * (pos - i), 1)

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99)}


def build(src: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, meta in DATASETS.items():
        with (src / str(meta["file"])).open(encoding="utf-8") as f:
            rows = [(int(float(r["num_prefill_tokens"])), int(float(r["num_decode_tokens"])))
                    for r in csv.DictReader(f)]
        cells: dict[tuple[int, int], int] = {}
        for i, o in rows:
            key = (_bin(i), _bin(o))
            cells[key] = cells.get(key, 0) + 1
        ins, outs = [i for i, _ in rows], [o for _, o in rows]
        out[name] = {**{k: v for k, v in meta.items() if k != "file"},
                     "requests": len(rows),
                     "input_mean": round(statistics.fmean(ins), 1),
                     "output_mean": round(statistics.fmean(outs), 1),
                     "input_quantiles": _quantiles(ins), "output_quantiles": _quantiles(outs),
                     "cells": [[i, j, n] for (i, j), n in sorted(cells.items())]}
    return out


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    doc = {"about": "Joint (input tokens, output tokens) histograms of named serving datasets "
           "for --dataset (docs/traffic.md). Written by scripts/length_histograms.py; never "
           "typed. A cell [i, j, n]: n requests with input in [edges[i], edges[i+1]) and output "
           "in [edges[j], edges[j+1]) tokens.",
           "edges": EDGES, "datasets": build(Path(sys.argv[1]))}
    text = json.dumps(doc, indent=1, ensure_ascii=False)
    # a number per line is long: a cell [i, j, n] per line, the edges on one line
    text = re.sub(r"\[\s*(\d+),\s*(\d+),\s*(\d+)\s*\]", r"[\1, \2, \3]", text)
    text = re.sub(r'"edges": \[[\s\d,]*\]',
                  lambda m: '"edges": ' + json.dumps(EDGES), text)
    OUT.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
