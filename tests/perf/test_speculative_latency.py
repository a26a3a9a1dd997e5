"""Speculative decoding in the latency model (issue 14: "latency effect goes to the latency
model, with acceptance rate as an input").

A verify step scores k draft tokens plus one per sequence (k + 1 query tokens through the GEMMs,
attention and LM head, one read of the weights and KV) after k sequential draft passes; with
each draft token accepted with probability α until the first rejection, a sequence gains
(1 − α^(k+1)) / (1 − α) tokens per step (Leviathan et al. 2023, eq. 1)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from clirun import run
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import plan
from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model
from kvplan.specs import Workload

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 3})


def _ctx(k: int, a: float, **kw) -> perf.PerfContext:
    m, g = resolve_model(LLAMA), resolve_gpu("h100")
    return replace(perf.context_for(m, g, "vllm", "0.12.0", **kw), spec_tokens=k, acceptance_rate=a)


def test_tokens_per_step_hand_worked():
    """k = 3: α = 0.6 → (1 − 0.6⁴) / 0.4 = 0.8704 / 0.4 = 2.176; α = 1 → 4; α = 0 → 1;
    no speculation → 1."""
    assert perf.tokens_per_step(_ctx(3, 0.6)) == pytest.approx(2.176)
    assert perf.tokens_per_step(_ctx(3, 1.0)) == 4.0
    assert perf.tokens_per_step(_ctx(3, 0.0)) == 1.0
    assert perf.tokens_per_step(_ctx(0, 0.9)) == 1.0


def test_no_speculation_leaves_every_figure_unchanged():
    base = perf.evaluate(_ctx(0, 0.0), concurrency=16, input_tokens=1000, output_tokens=200)
    again = perf.evaluate(_ctx(0, 0.9), concurrency=16, input_tokens=1000, output_tokens=200)
    assert base == again


@settings(max_examples=25, deadline=None, derandomize=True)
@given(a=st.floats(0.0, 0.95), b=st.integers(1, 256), k=st.integers(1, 6))
def test_higher_acceptance_never_slows_decoding(a, b, k):
    lo = perf.evaluate(_ctx(k, a), concurrency=b, input_tokens=1000, output_tokens=200)
    hi = perf.evaluate(_ctx(k, a + 0.05), concurrency=b, input_tokens=1000, output_tokens=200)
    assert hi.tpot_ms <= lo.tpot_ms + 1e-9


def test_rejecting_every_draft_token_costs_more_than_not_speculating():
    """α = 0: each step still verifies k + 1 tokens per sequence and yields one."""
    plain = perf.evaluate(_ctx(0, 0.0), concurrency=64, input_tokens=1000, output_tokens=200)
    spec = perf.evaluate(_ctx(3, 0.0), concurrency=64, input_tokens=1000, output_tokens=200)
    assert spec.tpot_ms > plain.tpot_ms


def test_plan_reports_acceptance_and_break_even():
    """n-gram has no draft passes: at 4 requests the verify step costs almost nothing more, so
    it pays at nearly any acceptance; at 256 requests the GEMMs are compute-bound and the
    k + 1 queries cost real time, so the break-even acceptance is higher."""
    w4 = Workload(target_concurrency=4, avg_input_tokens=1000, avg_output_tokens=200,
                  acceptance_rate=0.6)
    p4 = plan(LLAMA, "h100", speculative_config=NGRAM, workload=w4)
    base = plan(LLAMA, "h100", workload=w4)
    perf4 = p4.performance
    assert perf4.acceptance_rate == 0.6 and perf4.acceptance_rate_source == "cli"
    assert perf4.tokens_per_step == pytest.approx(2.176)
    assert perf4.tpot_ms < base.performance.tpot_ms
    w256 = Workload(target_concurrency=256, avg_input_tokens=1000, avg_output_tokens=200,
                    acceptance_rate=0.6)
    p256 = plan(LLAMA, "h100", speculative_config=NGRAM, workload=w256)
    assert perf4.break_even_acceptance_rate < p256.performance.break_even_acceptance_rate
    assert not any(pr.code == "acceptance-rate-assumed" for pr in p4.problems)


def test_unknown_acceptance_is_the_worst_case_and_said():
    p = plan(LLAMA, "h100", speculative_config=NGRAM,
             workload=Workload(target_concurrency=8, avg_input_tokens=1000, avg_output_tokens=200))
    assert p.performance.acceptance_rate == 0.0 and p.performance.tokens_per_step == 1.0
    warn = next(pr for pr in p.problems if pr.code == "acceptance-rate-assumed")
    assert warn.severity == "warning" and "--acceptance-rate" in warn.message


def test_mtp_uses_deepseeks_published_acceptance():
    """DeepSeek-V3 technical report §5.4.3: 85–90 % of MTP second-token predictions accepted."""
    p = plan("deepseek-ai/DeepSeek-V3", "h200", tensor_parallel_size=8, max_model_len=8192,
             speculative_config=json.dumps({"method": "mtp", "num_speculative_tokens": 1}))
    assert p.performance.acceptance_rate == 0.85
    assert "DeepSeek-V3" in p.performance.acceptance_rate_source
    assert p.performance.tokens_per_step == pytest.approx(1.85)


def test_cli_acceptance_rate(capsys):
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--speculative-config", NGRAM,
                       "--acceptance-rate", "1.5")
    assert code == 2 and "--acceptance-rate" in err and "Traceback" not in err
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--speculative-config", NGRAM,
                       "--acceptance-rate", "0.7", "--json")
    assert code == 0
    assert json.loads(out)["performance"]["acceptance_rate"] == 0.7


def test_draft_passes_cost_time_and_the_target_reads_only_its_own_weights(eagle3_dir):
    """An EAGLE-3 head (one Llama layer + a 32,000-token head, tests/drafts.py) runs k
    draft passes per step: with nothing accepted it is slower than n-gram, which at one request is
    no faster than not speculating (bandwidth-bound: four queries read the weights once); the
    target's weight read excludes the head's bytes."""
    from kvplan.planner import performance

    eagle = json.dumps({"method": "eagle3", "model": str(eagle3_dir), "num_speculative_tokens": 3})
    w = Workload(target_concurrency=1, avg_input_tokens=1000, avg_output_tokens=200,
                 acceptance_rate=0.0)
    # on 0.12.0 no plan overlaps the step overhead (async scheduling was opt-in), so only the
    # drafts' GPU passes differ (from 0.14.0 n-gram turns the overlap off and EAGLE keeps it:
    # test_async_scheduling_kept_only_for_eagle_and_mtp_drafts)
    tpot = {name: plan(LLAMA, "h100", workload=w, engine_version="0.12.0", **kw
                       ).performance.tpot_ms
            for name, kw in (("plain", {}), ("ngram", {"speculative_config": NGRAM}),
                             ("eagle3", {"speculative_config": eagle}))}
    assert tpot["eagle3"] > tpot["ngram"] >= tpot["plain"]  # one request: verifying is ~free
    from kvplan.api import with_draft
    from kvplan.engines import registry
    from kvplan.knobs import Knobs
    from kvplan.planner.plan import evaluate

    m, g, eng = resolve_model(LLAMA), resolve_gpu("h100"), registry.get("vllm")
    ctxs = []
    for knobs in (Knobs(), with_draft(Knobs.parse({"speculative_config": eagle}))):
        dep, res = evaluate(eng, m, g, knobs, eng.newest_version, "kvplan-default")
        ctxs.append(performance.context(m, g, dep, res, max_num_seqs=1, acceptance_rate=0.5))
    plain, spec = ctxs
    assert spec.dense_read_bytes == plain.dense_read_bytes
    assert spec.draft_read_bytes > 0 and spec.draft_steps == 3 and spec.draft_layers == 1


def test_sglang_tree_accepts_at_most_num_steps_draft_tokens(eagle3_dir):
    """SGLang's EAGLE tree (--speculative-num-steps 4, --speculative-eagle-topk 2,
    --speculative-num-draft-tokens 8): each draft step adds one depth level, so the verify pass
    scores 8 − 1 = 7 draft tokens but accepts one root-to-leaf path of at most num_steps = 4 of
    them, plus the target's bonus token (sglang speculative/eagle_worker.py draft loop of
    num_steps; eagle_utils build_tree). Expected tokens per step, k = 4 (Leviathan et al. eq. 1):
      α = 1:   k + 1 = 5 (not 8, which a chain of 7 would give)
      α = 0.6: (1 − 0.6⁵) / 0.4 = (1 − 0.07776) / 0.4 = 2.3056."""
    tree = json.dumps({"method": "eagle3", "model": str(eagle3_dir), "num_speculative_tokens": 4,
                       "eagle_topk": 2, "num_draft_tokens": 8})
    for a, want in ((1.0, 5.0), (0.6, 2.306)):
        w = Workload(target_concurrency=4, avg_input_tokens=1000, avg_output_tokens=200,
                     acceptance_rate=a)
        p = plan(LLAMA, "h100", engine="sglang", speculative_config=tree, workload=w)
        assert p.performance.tokens_per_step == pytest.approx(want)


def test_acceptance_rate_without_speculative_decoding_is_not_silently_dropped():
    """--acceptance-rate only feeds the speculative-decoding latency (Workload.acceptance_rate:
    "latency only"); without --speculative-config it changes nothing, which the plan says."""
    p = plan(LLAMA, "h100", workload=Workload(acceptance_rate=0.5))
    warn = next(pr for pr in p.problems if pr.code == "acceptance-rate-unused")
    assert "--speculative-config" in warn.message
    assert p.performance.acceptance_rate is None


def test_async_scheduling_kept_only_for_eagle_and_mtp_drafts(eagle3_dir):
    """vLLM v0.14.0 vllm/config/vllm.py keeps async scheduling on for EAGLE-family and MTP
    drafts and turns it off for any other method (n-gram, a draft model): on 0.14.0 an EAGLE-3
    plan overlaps the step overhead (cpu_overlap), an n-gram plan does not; on 0.12.0 (opt-in
    then) neither does."""
    from kvplan.api import with_draft
    from kvplan.engines import registry
    from kvplan.knobs import Knobs
    from kvplan.planner import performance
    from kvplan.planner.plan import evaluate

    eagle = json.dumps({"method": "eagle3", "model": str(eagle3_dir), "num_speculative_tokens": 3})
    m, g, eng = resolve_model(LLAMA), resolve_gpu("h100"), registry.get("vllm")
    for cfg, version, overlap in ((eagle, "0.14.0", True), (NGRAM, "0.14.0", False),
                                  (None, "0.14.0", True), (eagle, "0.12.0", False)):
        knobs = with_draft(Knobs.parse({"speculative_config": cfg})) if cfg else Knobs()
        dep, res = evaluate(eng, m, g, knobs, version, "kvplan-default")
        ctx = performance.context(m, g, dep, res, max_num_seqs=1, acceptance_rate=0.5)
        assert ctx.cpu_overlap is overlap, (cfg, version)
