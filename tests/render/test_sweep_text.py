"""The sweep table at 80 columns (issue #21 item 14): a TTFT column when a TTFT target is
given, and a legend that explains only what the table shows (the "!" mark never dropped)."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.render.text import sweep_text
from kvplan.specs import Workload


@pytest.fixture(scope="module")
def result():
    w = Workload(avg_input_tokens=2000, avg_output_tokens=300, target_concurrency=16,
                 slo_ttft_ms=500, slo_tpot_ms=50)
    return kvplan.sweep("llama-3.1-8b-instruct", gpus=["h100", "l40s", "mi300x"], max_gpus=1,
                        workload=w, slo_ttft_ms=500, slo_tpot_ms=50)


def _table(text: str) -> tuple[str, list[str]]:
    """The legend paragraph and the table lines of the options that meet the target."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("Options that meet"))
    head = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("#"))
    end = lines.index("", head)
    return " ".join(lines[start:head]), lines[head:end]


def test_ttft_column_with_a_ttft_target_at_80_columns(result):
    text = sweep_text(result, width=80)
    legend, table = _table(text)
    assert "TTFT ms" in table[0] and "TPOT ms" in table[0]  # both latencies the target bounds
    assert all(len(x) <= 80 for x in text.splitlines() if not x.startswith("  vllm serve"))
    mi = next(o for o in result.meeting if o.gpu == "mi300x")  # its first row
    row = next(r for r in table[1:] if " mi300x " in r)
    assert f"{mi.ttft_ms_high:,.0f}" in row.split()  # the band's pessimistic end, as ranked


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_legend_explains_only_the_columns_shown(result, width):
    legend, table = _table(sweep_text(result, width=width))
    marked = any(r.split()[0].endswith("!") for r in table[1:])
    assert marked == ("! after the rank" in legend)
    assert marked  # mi300x (ROCm) carries a warning: its mark survives 80 columns
    headers = table[0].split()
    assert ("P" in headers) == ("P: *" in legend)
    assert ("headroom" in headers) == ("headroom:" in legend)


def test_fit_column_says_calibrated_or_extrapolated():
    """Issue #21 item 14: each option's latency is marked calibrated (Hopper has vLLM
    calibration rows) or extrapolated (Ada's rows are TensorRT-LLM's), from the option's own
    plan.performance; the legend explains it only while the column is shown. Issue #24: another
    vLLM release on a calibrated class stays calibrated (the distance is stated apart)."""
    def fit_cells(version: str, width: int) -> tuple[str, dict[str, str]]:
        r = kvplan.sweep("llama-3.1-8b-instruct", gpus=["h100", "l40s"], max_gpus=1,
                         engine_version=version, kv_cache_dtype="auto")
        legend, table = _table(sweep_text(r, width=width))
        headers = table[0].split()
        if "fit" not in headers:
            return legend, {}
        return legend, {row.split()[1]: next(c for c in row.split() if c in ("cal", "ext"))
                        for row in table[1:]}

    legend, cells = fit_cells("0.12.0", 100)
    assert cells == {"h100-sxm-80gb": "cal", "l40s": "ext"}
    assert "fit: cal = latency calibrated" in legend
    _, cells = fit_cells("0.33.0", 80)  # another release of a calibrated class × engine
    assert cells == {"h100-sxm-80gb": "cal", "l40s": "ext"}
    legend, cells = fit_cells("0.12.0", 50)  # too narrow: dropped, and not in the legend
    assert cells == {} and "fit:" not in legend


def test_fit_cell_gives_the_throughput_band_and_marks_extrapolated_ranks(result):
    """The band column gives the throughput band's half-width (± % of the estimate, from the
    option's own band); an extrapolated option is marked ~ after its rank at any width."""
    o = next(o for o in result.meeting if o.gpu == "l40s")
    half = (o.output_tokens_per_s_high - o.output_tokens_per_s_low) / 2
    _, table = _table(sweep_text(result, width=200))
    row = next(r for r in table[1:] if " l40s " in r)
    assert f"±{half / o.output_tokens_per_s:.0%}" in row.split()
    for width in (80, 200):
        _, table = _table(sweep_text(result, width=width))
        for r in table[1:]:
            rank = r.split()[0]
            mine = next(x for x in result.meeting if str(x.rank) == rank.rstrip("~!"))
            assert ("~" in rank) == (mine.calibrated is False), r


def test_a_multi_line_serve_script_is_printed_as_it_pastes():
    """TensorRT-LLM's quantize-first option is a script (recipe, a YAML heredoc, the serve
    line): printed verbatim, its heredoc's closing EOF at the start of a line, so the block
    pastes into a shell; a one-line command stays indented under its label."""
    r = kvplan.sweep("meta-llama/Llama-3.1-8B-Instruct", gpus=["h100"], engine="trtllm",
                     workload=Workload(
                         target_concurrency=40, avg_input_tokens=3000, avg_output_tokens=400))
    out = sweep_text(r, commands=5)
    shown = r.meeting[:5]
    scripts = [o.plan.command for o in shown if "\n" in o.plan.command]
    lines = [o.plan.command for o in shown if "\n" not in o.plan.command]
    assert scripts and lines
    for script in scripts:
        assert "\nEOF\n" in script and f":\n{script}\n" in out
    for line in lines:
        assert f":\n  {line}\n" in out


def test_a_sweep_of_several_engines_keeps_the_engine_column_at_80_columns():
    """Rows that differ only by engine (b200 ×2 2×1 fp8/fp8, vLLM and TensorRT-LLM) must be told
    apart: the engine column goes after the others, as the rank does."""
    w = Workload(avg_input_tokens=3000, avg_output_tokens=300, target_concurrency=64,
                 request_rate=10)
    r = kvplan.sweep("llama-3.3-70b-instruct", gpus=["b200", "h200"], engine="all",
                     max_model_len=8192, workload=w, slo_tpot_ms=40)
    assert len({o.engine for o in r.options}) > 1
    _, table = _table(sweep_text(r, width=80))
    assert "engine" in table[0].split()
    assert all(len(x) <= 80 for x in table)
    rows = [x.split(maxsplit=1)[1] for x in table[1:]]  # without the rank
    assert len(set(rows)) == len(rows)
