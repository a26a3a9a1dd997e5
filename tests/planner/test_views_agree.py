"""Every view agrees (issue #21): a sweep option, a compare column and a report section of one
deployment show the figures `kvplan plan` gives for it. Regression tests for the wrong numbers
and consistency items, then one property test over random catalogue models, GPUs and knobs."""

from __future__ import annotations

import io
import itertools
import json

import pytest
from clirun import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

import kvplan
from kvplan import api
from kvplan.render import report as rep
from kvplan.render.text import performance_table, plan_table
from kvplan.specs import Plan, Workload

QWEN_WORK = Workload(target_concurrency=32, avg_input_tokens=2000, avg_output_tokens=300)


def _text(render, plan: Plan) -> str:
    out = io.StringIO()
    render(plan, Console(file=out, width=200, color_system=None))
    return out.getvalue()


# ------------------------------------------------------------- 1. report sweep


@pytest.fixture(scope="module")
def fp8_report() -> api.ReportData:
    """Issue #21 item 1: `kvplan report llama-3.1-70b-instruct --gpu h100 -tp 2
    --max-model-len 8192 --kv-cache-dtype fp8`."""
    return api.report("llama-3.1-70b-instruct", "h100", tensor_parallel_size=2,
                      max_model_len=8192, kv_cache_dtype="fp8")


def test_the_reports_sweep_plans_the_reports_kv_cache_dtype(fp8_report):
    """Each sweep row is `kvplan plan` of that row with the report's --kv-cache-dtype fp8: one
    MI300X holds about twice the bf16 figure, not the bf16 figure."""
    r = rep.for_model(fp8_report, command_line="x", version="0")
    assert r.sweep is not None
    row = next(o for o in r.sweep if o.label == "1 × mi300x TP1×PP1 vllm")
    fp8 = kvplan.plan("llama-3.1-70b-instruct", "mi300x", max_model_len=8192,
                      kv_cache_dtype="fp8")
    bf16 = kvplan.plan("llama-3.1-70b-instruct", "mi300x", max_model_len=8192)
    assert row.kv_tokens == fp8.kv_cache.tokens
    assert row.kv_tokens > 1.9 * bf16.kv_cache.tokens  # fp8 KV: half the bytes per token


def test_the_reports_chosen_sweep_row_is_the_reviewed_deployment(fp8_report):
    """The row marked chosen is the plan under review (TP2×PP1, its KV tokens), not another
    layout on the same number of GPUs."""
    r = rep.for_model(fp8_report, command_line="x", version="0")
    chosen = [o for o in r.sweep or () if o.chosen]
    main = fp8_report.plan
    assert len(chosen) == 1
    assert chosen[0].label == f"2 × {main.gpu.id} TP2×PP1 vllm"
    assert chosen[0].kv_tokens == main.kv_cache.tokens
    assert chosen[0].command == main.command


# ------------------------------------------------------- 1b. report sweep at a rate

RATE_WORK = ("--avg-input-tokens", "2000", "--avg-output-tokens", "300", "--slo-ttft-ms",
             "1000", "--request-rate", "20")


def _md_table(text: str, heading: str) -> list[dict[str, str]]:
    """The rows of the first Markdown table after `heading`, as {column: cell}."""
    lines = text.split(heading, 1)[1].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    table = list(itertools.takewhile(lambda ln: ln.startswith("|"), lines[start:]))
    cells = [[c.strip() for c in ln.strip("|").split(" | ")] for ln in table]
    return [dict(zip(cells[0], row, strict=True)) for row in cells[2:]]


@pytest.mark.parametrize("rank_on", ["pessimistic", "point"])
def test_the_reports_sweep_at_a_rate_is_kvplan_sweep_at_that_rate(capsys, tmp_path, rank_on):
    """`kvplan report … --request-rate 20` ranked its sweep section by $ per million tokens
    (1 × h100-sxm-80gb third, 1 × h100-pcie-80gb sixth), while `kvplan sweep … --request-rate
    20` ranks by the cost per day of the replicas 20 req/s needs (h100-pcie third, at 4 × $2.89
    × 24 h = $277.44). The report's rows are now the sweep's: the same options in the same
    order, with its replicas and $ per day (e where the sweep estimated them)."""
    md = tmp_path / "r.md"
    common = (*RATE_WORK, "--rank-on", rank_on)
    code, _, err = run(capsys, "report", "llama-3.1-8b-instruct", "--gpu", "h100", *common,
                       "-o", str(md))
    assert code == 0, err
    # the report's sweep: its engine, and the deployment's own weight and KV formats
    code, out, err = run(capsys, "sweep", "llama-3.1-8b-instruct", "--engine", "vllm",
                         "--quantization", "auto", "--kv-cache-dtype", "auto", *common, "--json")
    assert code == 0, err
    options = json.loads(out)["options"]
    rows = _md_table(md.read_text(), "## Options from a sweep")
    assert "replicas for 20 req/s" in rows[0] and "$ per day" in rows[0]
    assert len(rows) >= 8
    for row, o in zip(rows[:8], options[:8], strict=True):
        label = row["option"].removesuffix(" (chosen)").removesuffix(" ~")
        assert label == (f"{o['count']} × {o['gpu']} TP{o['tensor_parallel_size']}×"
                         f"PP{o['pipeline_parallel_size']} {o['engine']}")
        e = "" if o["replicas_simulated"] else " e"
        assert row["replicas for 20 req/s"] == f"{o['replicas_for_rate']}{e}"
        assert row["$ per day"] == f"${o['cost_per_day_for_rate']:,.2f}{e}"
        # each figure is its replicas × the option's $/hour × 24 h (3 × $3.19 × 24 = $229.68)
        per_hour = float(row["cost per hour"].lstrip("$"))
        assert o["cost_per_day_for_rate"] == pytest.approx(
            o["replicas_for_rate"] * per_hour * 24, abs=0.01)
    # simulated first, each group cheapest first: the order the $ per day column reads
    day = [(o["replicas_simulated"] is not True, o["cost_per_day_for_rate"])
           for o in options[:8]]
    assert day == sorted(day)
    text = md.read_text()
    assert "as kvplan sweep --request-rate 20 ranks" in text
    assert ("never fewer than the low end" in text) is (rank_on == "pessimistic")


# ---------------------------------------------------------- 2. compare column


def test_a_compare_column_describes_one_deployment(capsys):
    """Issue #21 item 2: SGLang at TP 2 leaves no KV cache: its column is that 2-GPU deployment
    (no performance or cost of the 4-GPU one the serve line moves to); every column's cost is
    its own GPUs' price."""
    code, out, _ = run(capsys, "compare", "llama-3.1-70b-instruct", "--gpu", "h100", "-tp", "2",
                       "--max-model-len", "8192", "--kv-cache-dtype", "fp8", "--json")
    assert code == 0
    plans = {p["engine"]["name"]: p for p in json.loads(out)["plans"]}
    sg = plans["sglang"]
    assert not sg["fits"] and sg["kv_cache"]["tokens"] == 0 and sg["gpu"]["count"] == 2
    assert sg["performance"] is None
    for p in plans.values():
        perf = p["performance"]
        if perf is not None and perf["cost_per_hour"] is not None:
            assert perf["cost_per_hour"] == pytest.approx(
                perf["gpu_hour_price"] * p["gpu"]["count"])


def test_the_compare_table_names_the_tp_its_rec_rows_are_at(capsys):
    code, out, _ = run(capsys, "compare", "llama-3.1-70b-instruct", "--gpu", "h100", "-tp", "2",
                       "--max-model-len", "8192", "--kv-cache-dtype", "fp8")
    row = next(line for line in out.splitlines() if line.strip().startswith("rec. TP"))
    cells = [c.strip() for c in row.split("│")]
    assert cells[1:] == ["2", "4", "2", "2"]  # vLLM, SGLang, TGI, TensorRT-LLM


# --------------------------------------------------------------- 3. sweep TTFT


@pytest.mark.parametrize("slos", [{}, {"slo_ttft_ms": 1000.0}, {"slo_tpot_ms": 30.0}])
def test_a_sweep_option_has_the_latency_kvplan_plan_gives(slos):
    """Issue #21 item 3 (already right on this branch's base; kept as a regression test): the
    SGLang 2×H100 option of a Qwen2.5-32B sweep has `kvplan plan`'s TTFT and TPOT, with or
    without latency targets (they travel in the workload)."""
    r = kvplan.sweep("qwen2.5-32b-instruct", gpus=["h100"], engine="all", max_gpus=2,
                     max_model_len=4096, workload=QWEN_WORK, **slos)
    o = next(o for o in r.options if o.engine == "sglang" and o.tensor_parallel_size == 2
             and o.quantization is None and o.kv_cache_dtype is None)  # not the fp8 option
    p = kvplan.plan("qwen2.5-32b-instruct", "h100", engine="sglang", tensor_parallel_size=2,
                    max_model_len=4096, workload=QWEN_WORK.model_copy(update=slos))
    assert p.performance is not None
    assert (o.ttft_ms, o.tpot_ms) == (p.performance.ttft_ms, p.performance.tpot_ms)
    assert o.plan.model_dump() == p.model_dump()


# -------------------------------------------------------------- 4. report headline


def test_the_report_headline_says_what_the_plans_problems_say():
    """Issue #21 item 4: one 32,768-token request fits; the target of 32 does not. The verdict
    repeats the plan's error, never "one request does not fit"."""
    data = api.report("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm-80gb",
                      tensor_parallel_size=4, max_model_len=32768,
                      workload=Workload(target_concurrency=32), with_sweep=False)
    p = data.plan
    assert not p.fits and p.kv_cache.max_model_len_fit >= 32768
    error = next(pr.message for pr in p.problems if pr.severity == "error")
    r = rep.for_model(data, command_line="x", version="0")
    for text in (rep.render_markdown(r), rep.render_html(r)):
        assert "request does not fit" not in text
    assert error in rep.render_markdown(r)


# ----------------------------------------------------- 6. ✗ on the missed figure


def test_the_miss_mark_lands_on_the_figure_that_misses():
    """Issue #21 item 6: TTFT over 300 ms with TPOT under 100 ms marks the TTFT cell only."""
    p = kvplan.plan("llama-3.1-8b-instruct", "h100", workload=Workload(
        avg_input_tokens=2000, avg_output_tokens=300, slo_ttft_ms=300, slo_tpot_ms=100))
    assert p.performance is not None
    rows = [x for x in p.performance.by_concurrency if x.ttft_ms > 300 and x.tpot_ms <= 100]
    assert rows, "the case needs a point that misses TTFT only"
    text = _text(performance_table, p)
    for x in rows:
        line = next(s for s in text.splitlines() if s.split("│")[0].strip() == f"{x.concurrency:,}")
        cells = [c.strip() for c in line.split("│")]
        assert cells[2].endswith("✗") and not cells[3].endswith("✗"), line


# ------------------------------------------------------------ 12. nearest misses


def test_nearest_misses_are_ranked_by_how_far_they_miss():
    """Issue #21 item 12: among options that fit and miss only a latency target, one that misses
    by less (worst figure ÷ its SLO; by default the pessimistic end of its band) ranks first,
    whatever its headroom."""
    r = kvplan.sweep("qwen2.5-32b-instruct", gpus=["h100", "a100-sxm-80gb"], engine="vllm",
                     max_model_len=4096, workload=QWEN_WORK, slo_ttft_ms=200, slo_tpot_ms=30)
    missed = [o for o in r.options if not o.meets_target and o.plan.fits
              and o.ttft_ms_high is not None and o.tpot_ms_high is not None]
    assert len(missed) >= 3
    by = [max(o.ttft_ms_high / 200, o.tpot_ms_high / 30) for o in missed]
    assert [o.rank for o in missed] == sorted(o.rank for o in missed)
    assert by == sorted(by), [(o.rank, o.count, o.pipeline_parallel_size, f) for o, f in
                              zip(missed, by, strict=True)]


# ------------------------------------------------------------- 13. max_num_seqs


def test_without_a_workload_the_plan_recommends_what_the_launch_line_runs():
    """Issue #21 item 13: with nothing to size the batch the launch line leaves max_num_seqs out
    (a cap at the no-preemption bound would throttle shorter requests), so the header, the
    recommendation and the performance section all describe the engine default it runs: one
    number, and performance at as many of kvplan's default requests as that default and the KV
    cache run at once."""
    p = kvplan.plan("llama-3.1-70b-instruct", "a100-sxm-80gb", tensor_parallel_size=4,
                    max_model_len=32768)
    rec = p.recommendations.max_num_seqs.value
    assert p.performance is not None and rec is not None
    assert p.inputs["max_num_seqs"].source == "engine-default"
    assert rec == p.inputs["max_num_seqs"].value == 256  # vLLM's default on an A100
    assert "--max-num-seqs" not in p.command
    assert "the engine default" in p.recommendations.max_num_seqs.reason
    reason = p.recommendations.max_num_seqs.reason
    assert "requests of 32768 tokens without preemption" in reason
    assert p.performance.concurrency <= rec
    head = _text(plan_table, p).splitlines()[1]
    assert "max_num_seqs=256 " in head + " " and "recommended" not in head


def test_a_workload_puts_the_recommended_max_num_seqs_in_the_launch_line():
    p = kvplan.plan("llama-3.1-70b-instruct", "a100-sxm-80gb", tensor_parallel_size=4,
                    max_model_len=32768,
                    workload=Workload(avg_input_tokens=2000, avg_output_tokens=300))
    rec = p.recommendations.max_num_seqs.value
    assert rec is not None and f"--max-num-seqs {rec:g}" in p.command
    assert p.performance is not None and p.performance.concurrency == rec


def test_a_given_target_concurrency_is_where_performance_runs():
    p = kvplan.plan("llama-3.1-70b-instruct", "a100-sxm-80gb", tensor_parallel_size=4,
                    max_model_len=32768, workload=Workload(target_concurrency=5))
    assert p.performance is not None and p.performance.concurrency == 5


# ---------------------------------------------------------------- property


_MODELS = ("llama-3.1-8b-instruct", "qwen2.5-7b-instruct", "mistral-7b-instruct-v0.3",
           "qwen3-30b-a3b", "gemma-2-9b-it")
_GPUS = ("h100", "a100-sxm-40gb", "l40s", "mi300x", "h200")


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(model=st.sampled_from(_MODELS), gpu=st.sampled_from(_GPUS), tp=st.sampled_from([1, 2]),
       length=st.sampled_from([2048, 4096, 8192]), kv=st.sampled_from([None, "fp8"]),
       n=st.sampled_from([None, 4, 64]))
def test_sweep_compare_and_report_equal_kvplan_plan(capsys, model, gpu, tp, length, kv, n):
    """A sweep option, a compare column and the report's section and chosen sweep row of one
    deployment are `kvplan plan` of it."""
    w = Workload(target_concurrency=n)
    knobs = {"tensor_parallel_size": tp, "max_model_len": length, "kv_cache_dtype": kv}
    want = kvplan.plan(model, gpu, workload=w, **knobs)

    r = kvplan.sweep(model, gpus=[gpu], max_gpus=tp, max_model_len=length, workload=w,
                     kv_cache_dtype=[kv])
    o = next(o for o in r.options
             if o.tensor_parallel_size == tp and o.pipeline_parallel_size == 1)
    assert o.plan.model_dump() == want.model_dump()
    if want.performance is not None:
        assert (o.ttft_ms, o.tpot_ms) == (want.performance.ttft_ms, want.performance.tpot_ms)

    args = ["compare", model, "--gpu", gpu, "-tp", str(tp), "--max-model-len", str(length),
            "--json"] + (["--kv-cache-dtype", kv] if kv else []) + (
            ["--target-concurrency", str(n)] if n else [])
    code, out, _ = run(capsys, *args)
    assert code in (0, 1)
    column = next(p for p in json.loads(out)["plans"] if p["engine"]["name"] == "vllm")
    assert column == json.loads(want.model_dump_json())

    data = api.report(model, gpu, workload=w, **knobs)
    assert data.plan.model_dump() == want.model_dump()
    assert next(p for p in data.compare if p.engine.name == "vllm").model_dump() == \
        want.model_dump()
    if data.sweep is not None:
        rows = [x for x in rep.for_model(data, command_line="x", version="0").sweep or ()
                if x.chosen]
        assert len(rows) == 1
        assert (rows[0].kv_tokens, rows[0].command) == (want.kv_cache.tokens, want.command)
