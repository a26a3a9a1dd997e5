"""kvplan sweep: candidates, pruning, ranking, consistency with `plan`, prices, errors, CLI."""

import json

import pytest
from clirun import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvplan
from kvplan import api
from kvplan.errors import InvalidConfigError, InvalidInputError
from kvplan.knobs import Knobs, valid_tp_sizes
from kvplan.planner.sweep import (
    NO_LATENCY_MODEL,
    SWEEP_SCHEMA_VERSION,
    MissKind,
    PrunedKind,
    layouts,
    native_formats,
    pareto,
    rank,
)
from kvplan.planner.sweep import sweep as pure_sweep
from kvplan.sources.catalog import gpu_specs, resolve_gpu, resolve_model
from kvplan.sources.prices import default_prices, load_price_file
from kvplan.specs import Workload

W = Workload(target_concurrency=40, avg_input_tokens=3000, avg_output_tokens=400)
GPUS = ["h100", "h200", "a100-sxm-80gb", "l40s", "mi300x", "rtx-4090"]


@pytest.fixture(scope="module")
def llama70():
    return resolve_model("llama-3.1-70b-instruct")


@pytest.fixture(scope="module")
def result70(llama70):
    return kvplan.sweep(llama70, gpus=GPUS, max_model_len=32768, workload=W,
                        kv_cache_dtype="auto,fp8", quantization="auto,fp8")


# ---------------------------------------------------------------- candidates


def test_layouts_are_valid_and_within_max_gpus(llama70):
    lay = layouts(llama70, 8, "vllm")
    assert (1, 1) in lay and (8, 1) in lay and (1, 8) in lay and (2, 4) in lay
    assert all(tp * pp <= 8 and tp in valid_tp_sizes(llama70) for tp, pp in lay)
    assert layouts(llama70, 8, "tgi") == [(1, 1), (2, 1), (4, 1), (8, 1)]  # TGI: no PP


def test_online_fp8_only_on_fp8_native_gpus(result70):
    fp8 = [o for o in result70.options if o.quantization == "fp8"]
    assert fp8 and all(resolve_gpu(o.gpu).fp8_native for o in fp8)
    dropped = [p for p in result70.pruned if p.quantization == "fp8"
               and not resolve_gpu(p.gpu).fp8_native]
    assert {p.gpu for p in dropped} == {"a100-sxm-80gb"}
    assert all("fp8-native" in p.reason for p in dropped)


def _formats(payload: dict) -> dict[str, set[tuple[str | None, str | None]]]:
    """{gpu: {(quantization, kv_cache_dtype)}} over a sweep JSON's options."""
    out: dict[str, set[tuple[str | None, str | None]]] = {}
    for o in payload["options"]:
        out.setdefault(o["gpu"], set()).add((o["quantization"], o["kv_cache_dtype"]))
    return out


def test_without_format_flags_fp8_is_tried_on_fp8_native_gpus_only(capsys):
    """Issue #21 item 14: no --quantization/--kv-cache-dtype tries the checkpoint's own format
    everywhere and fp8 weights + fp8 KV too where the GPU runs fp8 (H100, not A100); the notes
    say so. A user who names a format gets exactly it."""
    args = ["sweep", "llama-3.1-8b-instruct", "--gpus", "h100,a100-sxm-80gb", "--max-gpus", "1",
            "--json"]
    code, out, _ = run(capsys, *args)
    payload = json.loads(out)
    assert code == 0
    assert _formats(payload) == {"h100-sxm-80gb": {(None, None), ("fp8", "fp8")},
                                 "a100-sxm-80gb": {(None, None)}}
    assert not payload["pruned"]  # formats nobody asked for are not reported as pruned
    fp8 = next(o for o in payload["options"] if o["quantization"] == "fp8")
    assert fp8["weights_format"] == "fp8" and "--quantization fp8" in fp8["plan"]["command"]
    assert any("fp8" in n and "h100-sxm-80gb" in n and "accuracy" in n
               for n in payload["notes"])
    code, out, _ = run(capsys, *args, "--kv-cache-dtype", "auto")
    payload = json.loads(out)
    assert _formats(payload) == {"h100-sxm-80gb": {(None, None)},
                                 "a100-sxm-80gb": {(None, None)}}
    assert not any("fp8" in n for n in payload["notes"])
    code, out, _ = run(capsys, *args, "--quantization", "fp8")  # fp8 weights, auto KV only
    assert _formats(json.loads(out)) == {"h100-sxm-80gb": {("fp8", None)}}


def test_native_formats_for_a_quantized_checkpoint_keep_its_weights():
    """An already-quantized checkpoint cannot take online fp8: its fp8 option is fp8 KV with
    its own weights."""
    m = resolve_model("Qwen/Qwen3-8B-FP8")
    assert m.quantization is not None
    h100, a100 = resolve_gpu("h100"), resolve_gpu("a100-sxm-80gb")
    assert native_formats(m, h100, "vllm", frozenset()) == [(None, None), (None, "fp8")]
    assert native_formats(m, a100, "vllm", frozenset()) == [(None, None)]


def test_candidates_whose_weights_cannot_fit_are_pruned_not_planned(result70):
    """70B in bf16 (141 GB) cannot sit on one 80 GB or 24 GB GPU, on any engine."""
    planned = {(o.gpu, o.count, o.quantization) for o in result70.options}
    assert ("h100-sxm-80gb", 1, None) not in planned
    assert ("rtx-4090", 1, None) not in planned
    memory = [p for p in result70.pruned if p.kind is PrunedKind.MEMORY]
    assert any(p.gpu == "h100-sxm-80gb" and p.count == 1 for p in memory)
    # the printed reason keeps its label; the kind stays out of the JSON
    assert all(p.reason.startswith("memory: the weights alone are") for p in memory)
    assert not {"kind", "detail"} & set(memory[0].model_dump())
    assert result70.candidates == len(result70.options) + len(result70.pruned)


# ------------------------------------------------------------------- ranking


def test_meeting_options_first_cheapest_first(result70):
    opts = result70.options
    flags = [o.meets_target for o in opts]
    assert flags == sorted(flags, reverse=True)  # all meets before all misses
    # with the latency model, cheapest = lowest $ per million output tokens, by default at the
    # throughput band's low end
    assert result70.rank_on == "pessimistic"
    costs = [o.cost_per_million_output_tokens_high for o in result70.meeting
             if o.cost_per_million_output_tokens_high is not None]
    assert costs and costs == sorted(costs)
    assert [o.rank for o in opts] == list(range(1, len(opts) + 1))
    assert result70.exit_code == 0


def test_meets_target_means_the_kv_cache_holds_the_target(result70):
    for o in result70.options:
        seqs = o.plan.recommendations.max_num_seqs.value or 0
        assert o.meets_target == (o.plan.fits and seqs >= 40), o.gpu
        if not o.meets_target:
            assert o.misses_of(MissKind.MEMORY), o.reasons


def test_price_is_per_gpu_times_count(result70):
    table = default_prices(resolve_gpu)
    for o in result70.options:
        if o.gpu in table:
            assert o.price_per_hour == pytest.approx(table[o.gpu].usd_per_hour * o.count)


def test_pareto_flags_dominated_options(result70):
    front = [o for o in result70.meeting if o.pareto]
    assert front
    for o in result70.meeting:
        if o.price_per_hour is None:
            assert not o.pareto
            continue
        def axes(x):  # cost (lower is better), headroom and throughput (higher is better; the
            # band's low end, as the sweep ranks by default)
            return (-x.price_per_hour, x.headroom, x.output_tokens_per_s_low or 0.0)

        dominated = any(axes(b) != axes(o)
                        and all(p >= q for p, q in zip(axes(b), axes(o), strict=True))
                        for b in result70.meeting if b.price_per_hour is not None)
        assert o.pareto == (not dominated)


def test_pareto_and_rank_with_a_latency_model(result70):
    """When plans carry `performance`, $/M tokens ranks and throughput joins the front."""
    opts = [o.model_copy(update={"output_tokens_per_s": 1000.0 * (i + 1),
                                 "cost_per_million_output_tokens": 10.0 / (i + 1)})
            for i, o in enumerate(result70.meeting[:5])]
    ranked = rank(opts, latency=True)
    costs = [o.cost_per_million_output_tokens for o in ranked]
    assert costs == sorted(costs)
    assert len(pareto(ranked, latency=True)) >= 1


def test_every_option_carries_its_calibration_and_bands(result70):
    """Sweep JSON: each option says whether its latency figures are calibrated and carries
    their bands around the point estimates; the pessimistic $/M tokens is the price over the
    band's low throughput (price × GPUs / (tokens/s × 3600) × 10⁶)."""
    for o in result70.options:
        out = o.model_dump(mode="json")
        if o.plan.performance is None:  # (no plan that does not fit has latency figures)
            assert out["calibrated"] is None and out["tpot_ms_high"] is None
            continue
        assert out["calibrated"] is o.plan.performance.calibrated
        for name in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
            assert out[f"{name}_low"] <= out[name] <= out[f"{name}_high"], name
        if o.price_per_hour is not None:
            assert o.cost_per_million_output_tokens_high == pytest.approx(
                o.price_per_hour / (o.output_tokens_per_s_low * 3600) * 1e6, abs=1e-4)
            assert o.cost_per_million_output_tokens_high >= o.cost_per_million_output_tokens


def test_rank_on_point_ranks_the_estimates(llama70):
    """--rank-on point orders the options that meet the target by the point $/M tokens;
    anything but pessimistic or point is refused, naming the flag."""
    r = kvplan.sweep(llama70, gpus=["h200", "h100", "mi300x"], max_model_len=32768, workload=W,
                     rank_on="point")
    assert r.rank_on == "point" and "point estimates" in r.ranking
    costs = [o.cost_per_million_output_tokens for o in r.meeting
             if o.cost_per_million_output_tokens is not None]
    assert costs and costs == sorted(costs)
    with pytest.raises(InvalidInputError, match="--rank-on"):
        kvplan.sweep(llama70, gpus=["h200"], max_model_len=32768, workload=W, rank_on="best")


def test_slo_is_evaluated_by_the_latency_model(llama70):
    """Every plan carries `performance`: an option meets a TPOT/TTFT target only when the
    prediction at the target's concurrency does, and misses name the predicted figure."""
    r = kvplan.sweep(llama70, gpus=["h200", "l40s"], max_model_len=32768, workload=W,
                     slo_tpot_ms=50, slo_ttft_ms=2000)
    assert r.latency_model
    for o in r.options:
        assert not any(NO_LATENCY_MODEL in x for x in o.reasons)
        perf = o.plan.performance
        if o.meets_target:
            assert perf.tpot_ms <= 50 and perf.ttft_ms <= 2000
        elif perf is not None and o.plan.fits and (perf.tpot_ms > 50 or perf.ttft_ms > 2000):
            assert o.misses_of(MissKind.SLO), o.reasons


def test_slo_filter_and_cost_use_plan_performance(llama70):
    """An SLO the prediction misses is a miss naming the figure; $/M output tokens =
    price × GPUs / (predicted tokens/s × 3600) × 10⁶."""
    from kvplan.planner.sweep import Candidate, Target, evaluate_option

    g = resolve_gpu("h200")
    k = Knobs(tensor_parallel_size=2, max_model_len=32768)
    tight = W.model_copy(update={"slo_tpot_ms": 1.0})
    p = kvplan.plan(llama70, g, workload=tight, **k.given())
    c = Candidate(g, 2, 1, None, None, "vllm")
    t = Target(max_model_len=32768, target_concurrency=W.target_concurrency,
               avg_input_tokens=W.avg_input_tokens, avg_output_tokens=W.avg_output_tokens,
               slo_tpot_ms=1.0)
    price = default_prices(resolve_gpu)["h200-sxm-141gb"]
    o = evaluate_option(c, k, p, price, t)
    assert not o.meets_target
    assert [m.text for m in o.misses_of(MissKind.SLO)][0].startswith("SLO: predicted TPOT")
    assert "reason_kinds" not in o.model_dump()
    tok_s = p.performance.output_tokens_per_s
    assert o.cost_per_million_output_tokens == pytest.approx(
        price.usd_per_hour * 2 / (tok_s * 3600) * 1e6, rel=1e-3)


# --------------------------------------------------------------- consistency


@pytest.fixture(scope="module")
def mixed():
    """A dense, an MoE and an MLA model over a few GPUs, engines and formats."""
    out = []
    for ref, kw in (("llama-3.1-8b-instruct", {"engine": "all"}),
                    ("qwen3-30b-a3b", {"quantization": "auto,fp8"}),
                    ("deepseek-ai/DeepSeek-V2-Lite", {"kv_cache_dtype": "auto,fp8"})):
        m = resolve_model(ref)
        out.append((m, kvplan.sweep(m, gpus=["h100", "l4", "mi300x", "a100-sxm-40gb"],
                                    max_model_len=16384, max_gpus=4,
                                    workload=Workload(target_concurrency=8), **kw)))
    return out


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_every_option_is_the_plan_kvplan_plan_gives(mixed, data):
    """Random candidates: the option's plan is exactly api.plan() for its knobs."""
    m, r = data.draw(st.sampled_from(mixed))
    o = data.draw(st.sampled_from(r.options))
    again = kvplan.plan(m, o.gpu, engine=o.engine, workload=Workload(target_concurrency=8),
                        **o.knobs)
    assert again.model_dump() == o.plan.model_dump()


def test_option_plan_json_is_what_kvplan_plan_json_prints(capsys):
    code, out, _ = run(capsys, "sweep", "llama-3.1-8b-instruct", "--gpus", "l4,h100",
                       "--max-gpus", "2", "--max-model-len", "8192", "--json")
    assert code == 0
    o = json.loads(out)["options"][0]
    args = ["plan", "llama-3.1-8b-instruct", "--gpu", o["gpu"], "--engine", o["engine"], "--json"]
    for k, v in o["knobs"].items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    code, out2, _ = run(capsys, *args)
    assert json.loads(out2) == o["plan"]


# -------------------------------------------------------------------- prices


def test_bundled_prices_have_a_source_and_date_and_are_defaults():
    table = default_prices(resolve_gpu)
    assert {"h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "mi300x"} <= set(table)
    for p in table.values():
        assert p.default and p.source.startswith("https://") and p.date
    ids = {g.id for g in gpu_specs()}
    assert set(table) <= ids


def test_a_price_file_overrides_the_defaults(tmp_path, llama70):
    f = tmp_path / "mine.csv"
    f.write_text("id,usd_per_hour\nH100,1.00\nnvidia h200,2\n")
    r = kvplan.sweep(llama70, gpus=["h100", "h200"], prices=f, max_model_len=8192)
    h100 = next(o for o in r.options if o.gpu == "h100-sxm-80gb")
    assert h100.price_per_hour == pytest.approx(h100.count * 1.0)
    assert h100.price_source == f"{f}:2"
    y = tmp_path / "mine.yaml"
    y.write_text("prices:\n  h100-sxm-80gb: 1.5\n  h200:\n    usd_per_hour: 2.5\n")
    table = load_price_file(y, resolve_gpu)
    assert (
        table["h100-sxm-80gb"].usd_per_hour == 1.5 and table["h200-sxm-141gb"].usd_per_hour == 2.5
    )
    assert table["h200-sxm-141gb"].source == f"{y}:4"
    r = kvplan.sweep(llama70, gpus=["h100"], prices={"h100": 3.0}, max_model_len=8192)
    assert r.options[0].price_per_hour == pytest.approx(3.0 * r.options[0].count)


@pytest.mark.parametrize("text,suffix,line,field", [
    ("id,usd_per_hour\nh100,2\nh200,abc\n", ".csv", 3, "usd_per_hour"),
    ("id,usd_per_hour\nh100,-1\n", ".csv", 2, "usd_per_hour"),
    ("id,usd_per_hour\nh1000,2\n", ".csv", 2, "id"),
    ("# mine\nid,usd_per_hour\nh100,2\nh100,3\n", ".csv", 4, "id"),
    ("gpu,price\nh100,2\n", ".csv", 1, "id"),
    ("h100: 2\nh200: nope\n", ".yaml", 2, "usd_per_hour"),
    ("h100: 2\nbogus-gpu: 1\n", ".yml", 2, "id"),
    ("- h100\n", ".yaml", 1, "id"),
])
def test_bad_price_rows_name_file_line_and_field(tmp_path, text, suffix, line, field):
    f = tmp_path / f"p{suffix}"
    f.write_text(text)
    with pytest.raises(InvalidConfigError) as e:
        load_price_file(f, resolve_gpu)
    assert str(e.value).startswith(f"{f}:{line}: field {field!r}")


def test_cli_bad_price_file_exits_2(capsys, tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("id,usd_per_hour\nh100,free\n")
    code, out, err = run(capsys, "sweep", "llama-3.1-8b", "--gpus", "h100", "--prices", str(f))
    assert code == 2 and out == ""
    assert f"{f}:2: field 'usd_per_hour'" in err


# -------------------------------------------------------------------- errors


def test_unknown_gpus_are_all_named_with_suggestions(capsys):
    code, out, err = run(capsys, "sweep", "llama-3.1-8b", "--gpus", "h100,h2000,rtx-40900")
    assert code == 2 and out == ""
    assert "'h2000'" in err and "'rtx-40900'" in err and "did you mean" in err


def test_empty_search_space_is_bad_input(llama70):
    with pytest.raises(InvalidInputError, match="search space is empty"):
        kvplan.sweep(llama70, gpus=["a100-sxm-80gb"], quantization="fp8")  # not fp8-native
    with pytest.raises(InvalidInputError, match="search space is empty"):
        pure_sweep(llama70, [], {})


def test_a_length_no_candidate_accepts_is_bad_input(capsys):
    code, out, err = run(capsys, "sweep", "llama-3.1-8b", "--gpus", "h100", "--max-model-len",
                         "999999")
    assert code == 2 and out == ""
    assert "no candidate can be planned: --max-model-len 999999 exceeds" in err


def test_sweep_refuses_the_knobs_it_explores(llama70):
    with pytest.raises(InvalidInputError, match="explores tensor_parallel_size"):
        kvplan.sweep(llama70, gpus=["h100"], tensor_parallel_size=2)


def test_impossible_target_names_the_closest(capsys):
    code, out, _ = run(capsys, "sweep", "llama-3.1-405b", "--gpus", "l4,rtx-4090",
                       "--max-model-len", "8192")
    assert code == 1
    assert "Nothing meets this target; closest is rtx-4090 ×8" in out
    code, out, _ = run(capsys, "sweep", "llama-3.1-405b", "--gpus", "l4,rtx-4090",
                       "--max-model-len", "8192", "--json")
    data = json.loads(out)
    assert code == 1 and data["options"] and not any(o["meets_target"] for o in data["options"])


# ----------------------------------------------------------------------- CLI


def test_cli_json_is_valid_and_complete(capsys):
    code, out, _ = run(capsys, "sweep", "llama-3.1-70b-instruct", "--gpus", "h100,h200,mi300x",
                         "--max-model-len", "32768", "--target-concurrency", "40",
                         "--avg-input-tokens", "3000", "--avg-output-tokens", "400",
                         "--slo-tpot-ms", "50", "--engine", "all", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["schema_version"] == SWEEP_SCHEMA_VERSION
    assert data["options"][0]["meets_target"] and data["options"][0]["rank"] == 1
    for o in data["options"]:
        assert {"meets_target", "reasons", "price_per_hour", "plan"} <= set(o)
        assert o["plan"]["schema_version"] and "kv_cache" in o["plan"]
    assert {o["engine"] for o in data["options"]} == {"vllm", "sglang", "tgi", "trtllm"}


def test_cli_table_fits_80_columns_and_never_cuts_ids(capsys):
    code, out, _ = run(capsys, "sweep", "llama-3.1-70b-instruct", "--max-model-len", "32768",
                       "--target-concurrency", "40", "--avg-input-tokens", "3000",
                       "--avg-output-tokens", "400", "--engine", "vllm,sglang")
    assert code == 0
    lines = out.splitlines()
    table = lines[lines.index(next(x for x in lines if x.lstrip().startswith("#  GPU"))):]
    table = table[:table.index("")]
    assert all(len(x) <= 80 for x in table), max(table, key=len)
    ids = {g.id for g in gpu_specs()}
    for row in table[1:]:
        assert row.split()[1] in ids  # the whole id, never wrapped or cut
    assert "Serve commands" in out and "vllm serve" in out or "sglang" in out
    # the latency model prices; at 80 columns TPOT gives way to the engine column once a long
    # GPU id (h200-sxm-141gb) ranks in the top ten, as it does at like-for-like default prices
    assert "$/M tok" in out
    assert "Prices, US$ per GPU-hour:" in out and "(default: " in out  # labelled as defaults


def test_cli_bad_numbers_exit_2(capsys):
    for args in (["--target-concurrency", "0"], ["--slo-tpot-ms", "-1"], ["--max-gpus", "0"],
                 ["--top", "0"], ["--engine", "vlm"]):
        code, out, _ = run(capsys, "sweep", "llama-3.1-8b", "--gpus", "h100", *args)
        assert code == 2 and out == "", args


def test_library_sweep_is_the_function():
    """`kvplan.sweep` is api.sweep (the pure module's imports are checked in
    tests/project/test_import_layers.py)."""
    assert callable(kvplan.sweep) and kvplan.sweep is api.sweep


def test_table_shows_latency_columns_when_a_latency_model_exists(result70):
    from kvplan.render.text import sweep_text

    opts = [o.model_copy(update={"tpot_ms": 31.5, "output_tokens_per_s": 1234.0,
                                 "cost_per_million_output_tokens": 1.07, "tpot_ms_high": 36.25,
                                 "cost_per_million_output_tokens_high": 1.23,
                                 "calibrated": False})
            for o in result70.options]
    shown = result70.model_copy(update={"latency_model": True, "options": opts})
    text = sweep_text(shown.model_copy(update={"rank_on": "point"}), width=120)
    assert "TPOT ms" in text and "$/M tok" in text and "31.5" in text and "1.07" in text
    # by default the table shows what it ranks: each band's pessimistic end
    text = sweep_text(shown, width=120)
    assert "36.2" in text and "1.23" in text and "31.5" not in text
    assert "pessimistic end of their bands" in text
    # extrapolated options are marked after the rank, whether the fit column fits or not
    for width in (80, 200):
        rows = [x for x in sweep_text(shown, width=width).splitlines()
                if x.lstrip().startswith("1~")]
        assert rows, width
    narrow = sweep_text(result70, width=80)
    assert all(len(x) <= 80 for x in narrow.splitlines() if not x.startswith("  vllm serve"))


def test_pruned_candidates_would_not_have_fit(result70, llama70):
    """Pruning never drops an option: planned anyway, each memory-pruned candidate fails."""
    memory = [p for p in result70.pruned if p.kind is PrunedKind.MEMORY]
    for p in memory[:: max(1, len(memory) // 12)]:
        got = kvplan.plan(llama70, p.gpu, engine=p.engine, workload=W, max_model_len=32768,
                          tensor_parallel_size=p.tensor_parallel_size,
                          pipeline_parallel_size=p.pipeline_parallel_size,
                          quantization=p.quantization, kv_cache_dtype=p.kv_cache_dtype)
        assert not got.fits, p


def test_option_json_keeps_its_order_and_reads_the_plan(result70):
    """The layout fields are read from the plan and the knobs, and the JSON still prints them
    in schema 1.0's order, with no field of the typed reasons."""
    order = ["rank", "meets_target", "reasons", "pareto", "gpu", "count",
             "tensor_parallel_size", "pipeline_parallel_size", "engine", "quantization",
             "kv_cache_dtype", "weights_format", "kv_tokens", "headroom", "price_per_hour",
             "price_source", "price_date", "price_default", "cost_per_million_output_tokens",
             "tpot_ms", "ttft_ms", "output_tokens_per_s", "replicas_for_rate",
             "replicas_simulated", "cost_per_day_for_rate", "knobs", "plan", "calibrated",
             "ttft_ms_low", "ttft_ms_high", "tpot_ms_low", "tpot_ms_high",
             "output_tokens_per_s_low", "output_tokens_per_s_high",
             "cost_per_million_output_tokens_high",
             "disaggregated"]  # sweep --disagg (issue #25): every option says whether it is
    for o in result70.options:
        d = json.loads(o.model_dump_json())
        assert list(d) == order
        assert d["gpu"] == d["plan"]["gpu"]["id"]
        assert d["count"] == d["tensor_parallel_size"] * d["pipeline_parallel_size"]
        assert d["tensor_parallel_size"] == d["knobs"]["tensor_parallel_size"]
        assert d["pipeline_parallel_size"] == d["knobs"].get("pipeline_parallel_size", 1)
        assert d["kv_tokens"] == d["plan"]["kv_cache"]["tokens"]
        assert d["quantization"] == d["knobs"].get("quantization")


def test_weights_excess_memo_keeps_each_dtype_apart(llama70):
    """weights_excess's per-sweep memo of the heaviest stage is keyed by (tp, pp, dtype, ep): a
    V100 plans fp16 and an H100 bf16 (both 2 B, so equal bytes), an fp8 KV cache leaves the
    weights alone; each answer equals the one worked out without any memo, whichever order
    the candidates come in, and a layout of another TP or PP is its own entry."""
    from kvplan.planner.sweep import Candidate, weights_excess

    v100, h100 = resolve_gpu("v100-sxm2-32gb"), resolve_gpu("h100")
    cands = [Candidate(g, tp, pp, None, kv, "vllm") for g in (v100, h100) for tp, pp in
             ((1, 1), (2, 1), (1, 2), (4, 2)) for kv in (None, "fp8")]
    alone = [weights_excess(llama70, c, Knobs()) for c in cands]
    for order in (cands, cands[::-1]):
        seen: dict = {}
        heaviest: dict = {}
        got = [weights_excess(llama70, c, Knobs(), seen, heaviest) for c in order]
        assert got == (alone if order is cands else alone[::-1])
        assert {k[2] for k in heaviest} == {"float16", "bfloat16"}
        assert len(heaviest) == 8  # 4 layouts × 2 dtypes
    # 70B at TP 1 in 2-byte weights is about 141 GB: above an 80 GB H100, above a 32 GB V100
    assert alone[0] > 1 and alone[8] > 1
