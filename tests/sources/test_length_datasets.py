"""kvplan/sources/length_datasets.py and its bundled length_datasets.json (--dataset): the
histograms reproduce what their sources publish, names resolve with aliases and "did you
mean", and `sharegpt` alone is refused with the reason (docs/traffic.md)."""

from __future__ import annotations

import json

import pytest

from kvplan.errors import InvalidInputError
from kvplan.sources import length_datasets as ld

TABLE = json.loads(ld.DATA.read_text(encoding="utf-8"))


def _quantile_bin(cells: list[list[int]], axis: int, q: float) -> int:
    """The bin index where the cumulative count of `axis` (0 input, 1 output) reaches q."""
    counts: dict[int, int] = {}
    for c in cells:
        counts[c[axis]] = counts.get(c[axis], 0) + c[2]
    total, acc = sum(counts.values()), 0
    for b in sorted(counts):
        acc += counts[b]
        if acc >= q * total:
            return b
    raise AssertionError("empty histogram")


def _bin_of(x: int) -> int:
    edges = TABLE["edges"]
    return max(k for k in range(len(edges) - 1) if edges[k] <= x)


@pytest.mark.parametrize(("name", "axis", "q", "published"), [
    # Sarathi-Serve (Agrawal et al., OSDI 2024), openchat_sharegpt4: prompt median 1,730,
    # p90 5,696; output median 415, p90 834 tokens
    ("sharegpt-8k", 0, 0.5, 1730), ("sharegpt-8k", 0, 0.9, 5696),
    ("sharegpt-8k", 1, 0.5, 415), ("sharegpt-8k", 1, 0.9, 834),
    # Splitwise (Patel et al., ISCA 2024), conversation: prompt median 1,020, output 129
    ("azure-conv-2023", 0, 0.5, 1020), ("azure-conv-2023", 1, 0.5, 129)])
def test_histograms_reproduce_the_published_quantiles(name: str, axis: int, q: float,
                                                      published: int) -> None:
    """The quantile falls in the quarter-octave bin that holds the published value."""
    cells = TABLE["datasets"][name]["cells"]
    assert _quantile_bin(cells, axis, q) == _bin_of(published)


@pytest.mark.parametrize("name", ld.names())
def test_each_dataset_states_its_provenance_and_its_cells_add_up(name: str) -> None:
    d = TABLE["datasets"][name]
    for key in ("description", "source", "tokenizer", "filter"):
        assert d[key], key
    assert d["source"].startswith("https://github.com/")
    assert sum(n for _, _, n in d["cells"]) == d["requests"]
    h = ld.load(name)
    # the histogram's mean (each cell at its midpoint) within 3 % of the source's exact mean:
    # a quarter-octave bin is 19 % wide, so the midpoint is off by at most ±9.5 % per request
    total = sum(c[4] for c in h.cells)
    mid_in = sum((c[0] + c[1] - 1) / 2 * c[4] for c in h.cells) / total
    mid_out = sum((c[2] + c[3] - 1) / 2 * c[4] for c in h.cells) / total
    assert abs(mid_in / h.input_mean - 1) < 0.03
    assert abs(mid_out / h.output_mean - 1) < 0.03


def test_sharegpt_8k_counts_match_the_source_file() -> None:
    """30,731 rows in sarathi-serve's sharegpt_8k_filtered_stats_llama2_tokenizer.csv."""
    h = ld.load("sharegpt-8k")
    assert sum(c[4] for c in h.cells) == 30_731
    assert "30,731 requests" in h.about and "Llama-2" in h.about


@pytest.mark.parametrize(("given", "canonical"), [
    ("sharegpt-8k", "sharegpt-8k"), ("ShareGPT_8k", "sharegpt-8k"),
    ("openchat-sharegpt4", "sharegpt-8k"), ("arxiv", "arxiv-summarization"),
    ("azure-conv", "azure-conv-2023"), ("splitwise-code", "azure-code-2023")])
def test_names_and_aliases_resolve(given: str, canonical: str) -> None:
    assert ld.resolve(given) == canonical


def test_unknown_name_suggests_the_close_ones() -> None:
    with pytest.raises(InvalidInputError) as e:
        ld.resolve("sharegtp-8k")
    assert "no such length dataset" in str(e.value)
    assert "did you mean 'sharegpt-8k'?" in (e.value.hint or "")


def test_plain_sharegpt_is_refused_with_the_reason() -> None:
    """The benchmarks' ShareGPT sampler (first turns, ≤ 1,024 prompt tokens) is not the
    bundled every-turn histogram: the error says so and names the way out."""
    with pytest.raises(InvalidInputError) as e:
        ld.resolve("sharegpt")
    assert "first turn" in str(e.value) and "1,024" in str(e.value)
    assert "--lengths-file" in (e.value.hint or "") and "sharegpt-8k" in (e.value.hint or "")


def test_the_flag_help_lists_every_bundled_dataset() -> None:
    from kvplan.knobs import OPTIONS

    assert all(n in (OPTIONS["dataset"].help or "") for n in ld.names())
