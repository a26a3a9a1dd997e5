"""`plan --disagg`: two pools, the KV transfer, the xPyD ratio and the service's figures
(docs/disagg.md). Hand-worked values cite the model configs and engine sources."""

from __future__ import annotations

import pytest

from kvplan.api import plan, plan_disagg
from kvplan.errors import InvalidInputError
from kvplan.specs import Workload

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
R1 = "deepseek-ai/DeepSeek-R1"
CHAT = Workload(avg_input_tokens=3000, avg_output_tokens=300, target_concurrency=64)


@pytest.fixture(scope="module")
def llama_vllm():
    return plan_disagg(LLAMA, "h100", engine="vllm", workload=CHAT)


def test_llama_two_pools_fit_with_launch_lines(llama_vllm):
    r = llama_vllm
    d = r.disaggregated
    assert r.fits and d.prefill.fits and d.decode.fits
    assert d.ratio == f"{d.prefill_replicas}P{d.decode_replicas}D"
    assert d.gpus == (d.prefill_replicas * d.prefill.gpu.count
                      + d.decode_replicas * d.decode.gpu.count)
    assert "--kv-transfer-config" in d.launch.prefill and '"kv_connector":"NixlConnector"' in \
        d.launch.decode
    assert "toy_proxy_server.py" in d.launch.router
    assert d.prefill.performance is None and d.decode.performance is None  # the service's only
    assert r.performance is not None and r.performance.concurrency == 64


def test_llama_kv_transfer_bytes(llama_vllm):
    kv = llama_vllm.disaggregated.kv_transfer
    tp = llama_vllm.disaggregated.decode.gpu.count
    # 80 layers × 2 (K, V) × 8 KV heads × 128 dims × 2 bytes = 327,680 bytes per token, the model
    # over all its GPUs (config.json); 3000 prompt tokens
    assert kv.bytes_per_request == 3000 * 327_680
    assert kv.recv_bytes_per_gpu == 3000 * 327_680 // tp
    assert kv.prefill_buffer_bytes_per_gpu == 0  # NIXL registers the KV cache itself
    assert kv.overlap == "after_prefill" and kv.exposed_ms == kv.time_ms


def test_decode_pool_budget_is_one_token_per_sequence(llama_vllm):
    d = llama_vllm.disaggregated
    seqs = d.decode.inputs["max_num_seqs"].value
    assert d.decode.inputs["max_num_batched_tokens"].value < \
        d.prefill.inputs["max_num_batched_tokens"].value
    assert "--max-num-batched-tokens" in d.launch.decode
    # a smaller profile batch: a smaller activation peak and a larger KV cache on the same layout
    if d.decode.gpu.count == d.prefill.gpu.count:
        assert d.decode.memory.activation_bytes < d.prefill.memory.activation_bytes
        assert d.decode.memory.kv_cache_bytes > d.prefill.memory.kv_cache_bytes
    assert seqs


def test_ttft_is_the_sum_of_its_parts(llama_vllm):
    t = llama_vllm.disaggregated.ttft
    total = (t.queue_ms + t.prefill_ms + t.transfer_ms + t.first_decode_ms + t.overhead_ms
             + t.decode_wait_ms)
    assert llama_vllm.performance.ttft_ms == pytest.approx(total, abs=0.05)
    assert t.transfer_ms == pytest.approx(llama_vllm.disaggregated.kv_transfer.exposed_ms,
                                          abs=0.01)


def test_decode_free_of_prefill_interference_beats_the_aggregated_tpot(llama_vllm):
    """The aggregated replica interleaves 3000-token prefills into its decode steps; the decode
    pool does not, so its TPOT is lower at the same running batch per replica."""
    d = llama_vllm.disaggregated
    agg = plan(LLAMA, "h100", engine="vllm", tensor_parallel_size=d.decode.gpu.count,
               workload=Workload(avg_input_tokens=3000, avg_output_tokens=300,
                                 target_concurrency=round(d.decode_running_per_replica)))
    assert llama_vllm.performance.tpot_ms < agg.performance.tpot_ms


def test_more_concurrency_needs_more_decode_replicas():
    small = plan_disagg(LLAMA, "h100", workload=CHAT)
    big = plan_disagg(LLAMA, "h100", workload=CHAT.model_copy(
        update={"target_concurrency": 1024}))
    assert big.disaggregated.decode_replicas > small.disaggregated.decode_replicas
    cap = big.disaggregated.decode_capacity_per_replica
    assert big.disaggregated.decode_replicas == -(-1024 // cap)


def test_given_replicas_are_kept_and_too_few_prefill_replicas_are_flagged():
    r = plan_disagg(LLAMA, "h100", workload=CHAT.model_copy(update={"target_concurrency": 1024}),
                    prefill_replicas=1, decode_replicas=8)
    d = r.disaggregated
    assert (d.prefill_replicas, d.decode_replicas) == (1, 8)
    assert d.replicas_source["prefill_replicas"] == "cli"
    assert any(p.code == "disagg-prefill-bound" and "--prefill-replicas" in p.message
               for p in r.problems)
    assert r.performance.saturated


def test_trtllm_transceiver_buffer_comes_out_of_the_kv_cache():
    r = plan_disagg(LLAMA, "h100", engine="trtllm", workload=CHAT, prefill_tp=4, decode_tp=4)
    d = r.disaggregated
    kv = d.kv_transfer
    # (3008 + 32 tokens) × 81,920 bytes per token per GPU × 3 buffers (cacheTransBuffer.cpp)
    assert kv.max_tokens_in_buffer == 3008
    assert kv.prefill_buffer_bytes_per_gpu == (3008 + 32) * 81_920 * 3
    whole = plan(LLAMA, "h100", engine="trtllm", tensor_parallel_size=4)
    assert d.prefill.memory.total_bytes == pytest.approx(
        whole.memory.total_bytes - kv.prefill_buffer_bytes_per_gpu, abs=1)
    assert d.prefill.memory.kv_cache_bytes < whole.memory.kv_cache_bytes
    assert "cache_transceiver_config:" in d.launch.prefill
    assert "max_tokens_in_buffer: 3008" in d.launch.decode
    assert "disable_overlap_scheduler: true" in d.launch.prefill
    assert "disable_overlap_scheduler" not in d.launch.decode
    assert "trtllm-serve disaggregated -c disagg_config.yaml" in d.launch.router


def test_trtllm_transceiver_note_says_each_pools_buffers():
    """Each pool's buffers hold its own GPUs' share of a prompt's KV: decode at TP 2 half the
    prefill's at TP 1. The note said the prefill pool's figure "per GPU", for every GPU."""
    w = Workload(avg_input_tokens=2000, avg_output_tokens=200)
    r = plan_disagg("meta-llama/Llama-3.1-8B-Instruct", "h100", engine="trtllm", workload=w,
                    prefill_tp=1, decode_tp=2)
    kv = r.disaggregated.kv_transfer
    p_gib, d_gib = (kv.prefill_buffer_bytes_per_gpu / 2**30, kv.decode_buffer_bytes_per_gpu / 2**30)
    assert kv.decode_buffer_bytes_per_gpu * 2 == kv.prefill_buffer_bytes_per_gpu
    notes = [n for n in r.disaggregated.notes if n.startswith("cache transceiver buffers")]
    assert notes == [f"cache transceiver buffers: {p_gib:.2f} GiB per prefill GPU, {d_gib:.2f} "
                     "GiB per decode GPU come out of the memory each pool's KV cache is sized "
                     "from (device total planned less them)"]
    same = plan_disagg("meta-llama/Llama-3.1-8B-Instruct", "h100", engine="trtllm", workload=w,
                       prefill_tp=1, decode_tp=1).disaggregated
    assert f"buffers: {p_gib:.2f} GiB per GPU in both pools come out" in " ".join(same.notes)


def test_sglang_sends_chunk_by_chunk():
    long = Workload(avg_input_tokens=20000, avg_output_tokens=200, target_concurrency=16)
    r = plan_disagg(LLAMA, "h100", engine="sglang", workload=long)
    kv = r.disaggregated.kv_transfer
    assert kv.overlap == "per_chunk" and kv.exposed_ms < kv.time_ms
    launch = r.disaggregated.launch
    assert "--disaggregation-mode prefill" in launch.prefill
    assert "--disaggregation-bootstrap-port 8998" in launch.prefill
    assert "--disaggregation-mode decode" in launch.decode
    assert "--pd-disaggregation" in launch.router and " 8998" in launch.router


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_deepseek_r1_on_h200(engine):
    w = Workload(avg_input_tokens=2000, avg_output_tokens=500, target_concurrency=512)
    r = plan_disagg(R1, "h200", engine=engine, workload=w)
    d = r.disaggregated
    assert r.fits, [p.message for p in r.problems]
    assert d.prefill.gpu.count == d.decode.gpu.count == 8  # 671B fp8 needs 8 × 141 GB
    # MLA: every rank holds the whole latent, 61 layers × (512 + 64) × 2 bytes (config.json)
    assert d.kv_transfer.recv_bytes_per_gpu == 2000 * 61 * 576 * 2
    assert r.performance.output_tokens_per_s_per_gpu > 0
    assert r.performance.tpot_ms > 0


def test_engine_without_pd_is_a_clear_error():
    with pytest.raises(InvalidInputError) as e:
        plan_disagg(LLAMA, "h100", engine="tgi", workload=CHAT)
    assert "no disaggregated" in e.value.message and "vllm" in (e.value.hint or "")


def test_ep_must_equal_tp_times_dp():
    with pytest.raises(InvalidInputError) as e:
        plan_disagg("Qwen/Qwen3-30B-A3B", "h100", workload=CHAT, prefill_ep=4, prefill_tp=2)
    assert "--prefill-ep 4" in e.value.message


def test_pool_ep_on_a_dense_model_names_the_pool_flag():
    """--prefill-ep on a dense model: the error names the flag given (it named
    --enable-expert-parallel, which the user never wrote, before 2026-12-03)."""
    with pytest.raises(InvalidInputError) as e:
        plan_disagg(LLAMA, "h100", workload=CHAT, prefill_ep=4)
    assert e.value.message == "--prefill-ep needs a mixture-of-experts model"
    assert "drop --prefill-ep" in (e.value.hint or "")


def test_a_pool_that_does_not_fit_names_the_pool_and_the_fix():
    r = plan_disagg(LLAMA, "h100", workload=CHAT, decode_tp=1)
    assert not r.fits
    bad = [p for p in r.problems if p.code == "disagg-decode-does-not-fit"]
    assert bad and "decode pool" in bad[0].message and "--decode-tp" in bad[0].message


def test_mixed_hardware():
    r = plan_disagg(LLAMA, "h100", workload=CHAT, prefill_gpu="h200", decode_gpu="h100",
                    prefill_tp=4, decode_tp=4)
    d = r.disaggregated
    assert d.prefill.gpu.id.startswith("h200") and d.decode.gpu.id.startswith("h100")
    assert r.performance.cost_per_hour is not None


def test_sweep_adds_disaggregated_options_and_says_which_wins():
    from kvplan.api import sweep

    r = sweep("llama-3.3-70b-instruct", gpus=["h100"], engine="vllm", max_model_len=8192,
              workload=Workload(avg_input_tokens=3000, avg_output_tokens=300,
                                target_concurrency=64), slo_ttft_ms=1500, disagg=True)
    dis = [o for o in r.options if o.disaggregated]
    agg = [o for o in r.options if not o.disaggregated]
    assert dis and agg
    o = dis[0]
    assert o.service is not None and o.count == o.service.disaggregated.gpus
    assert o.cost_per_million_output_tokens == o.service.performance.cost_per_million_output_tokens
    assert o.price_per_hour == pytest.approx(o.count * 3.90, rel=1e-3)  # Crusoe H100, prices.csv
    verdict = r.notes[-1]
    assert verdict.startswith("per $: ") and "per SLO" in verdict
    best = min((x for x in r.options if x.cost_per_million_output_tokens is not None),
               key=lambda x: x.cost_per_million_output_tokens)
    assert verdict.startswith(f"per $: {'disaggregated' if best.disaggregated else 'aggregated'}")
    assert [x.rank for x in r.options] == list(range(1, len(r.options) + 1))


def test_sweep_json_marks_every_option():
    from kvplan.api import sweep

    r = sweep("llama-3.1-8b-instruct", gpus=["h100"], engine="vllm", max_gpus=1)
    doc = r.model_dump(mode="json")
    assert all(o["disaggregated"] is False and "service" not in o for o in doc["options"])


def test_decode_data_parallel_ranks_each_hold_their_own_batch():
    """--decode-dp 2: each DP rank is an engine with its own max_num_seqs and KV cache, so a
    replica of TP 4 × DP 2 holds twice the requests of a TP 4 one and half the replicas do."""
    w = Workload(avg_input_tokens=3000, avg_output_tokens=300, target_concurrency=512)
    one = plan_disagg(LLAMA, "h100", workload=w, decode_tp=4, prefill_tp=4)
    two = plan_disagg(LLAMA, "h100", workload=w, decode_tp=4, decode_dp=2, prefill_tp=4)
    a, b = one.disaggregated, two.disaggregated
    assert b.decode.gpu.count == 2 * a.decode.gpu.count
    assert b.decode_capacity_per_replica == 2 * a.decode_capacity_per_replica
    assert b.decode_replicas == -(-a.decode_replicas // 2)
    assert "--data-parallel-size 2" in b.launch.decode


def test_latency_targets_size_the_pools():
    """A TPOT target caps the requests a decode rank runs (more decode replicas, and the launch
    line's max_num_seqs says so); a TTFT target adds prefill replicas to shorten the queue."""
    base = Workload(avg_input_tokens=3000, avg_output_tokens=300, target_concurrency=512)
    free = plan_disagg(LLAMA, "h100", workload=base, prefill_tp=4, decode_tp=4)
    tpot = plan_disagg(LLAMA, "h100", workload=base.model_copy(update={"slo_tpot_ms": 20}),
                       prefill_tp=4, decode_tp=4)
    both = plan_disagg(LLAMA, "h100", workload=base.model_copy(
        update={"slo_tpot_ms": 20, "slo_ttft_ms": 500}), prefill_tp=4, decode_tp=4)
    f, t, b = free.disaggregated, tpot.disaggregated, both.disaggregated
    assert free.performance.tpot_ms > 20 >= tpot.performance.tpot_ms
    assert t.decode_capacity_per_replica < f.decode_capacity_per_replica
    assert t.decode_replicas > f.decode_replicas
    assert f"--max-num-seqs {t.decode_capacity_per_replica}" in t.launch.decode
    assert "TPOT ≤ 20 ms caps" in t.replicas_source["decode_replicas"]
    assert both.performance.ttft_ms <= 500 < tpot.performance.ttft_ms
    assert b.prefill_replicas > t.prefill_replicas and both.performance.meets_slo


def test_a_tpot_no_batch_meets_is_an_error():
    w = Workload(avg_input_tokens=3000, avg_output_tokens=300, target_concurrency=64,
                 slo_tpot_ms=1)
    r = plan_disagg(LLAMA, "h100", workload=w)
    assert not r.fits and r.performance is None
    assert any(p.code == "disagg-slo-unmet" and p.severity == "error" for p in r.problems)


def test_platforms_kvplan_did_not_read_are_flagged_and_left_out_of_the_sweep():
    from kvplan.api import sweep

    # SGLang runs on AMD GPUs, but its P/D path kvplan read is the NVIDIA one (engines/pd.py)
    r = plan_disagg(LLAMA, "mi300x", engine="sglang", workload=CHAT)
    assert any(p.code == "disagg-platform" for p in r.problems)
    s = sweep(LLAMA, gpus=["mi300x", "h100"], engine="sglang", max_model_len=8192,
              workload=CHAT, disagg=True)
    assert {o.gpu for o in s.options if o.disaggregated} <= {"h100-sxm-80gb"}
    with pytest.raises(InvalidInputError, match="NVIDIA GPUs only"):  # not on AMD at all
        plan_disagg(LLAMA, "mi300x", engine="trtllm", workload=CHAT)


def test_sglang_decode_admission_reserves_512_tokens_per_request():
    """python/sglang/srt/disaggregation/decode.py _allocatable_tokens: every request running,
    in transfer or waiting keeps --num-reserved-decode-tokens (512) free beside its prompt and
    what it has generated (half the output on average)."""
    r = plan_disagg(LLAMA, "h100", engine="sglang", workload=CHAT, prefill_tp=4, decode_tp=4)
    d = r.disaggregated
    assert d.decode_capacity_per_replica == min(d.decode.kv_cache.tokens // (3000 + 150 + 512),
                                                d.decode.inputs["max_num_seqs"].value)


SIZED = Workload(avg_input_tokens=4000, avg_output_tokens=500, target_concurrency=256,
                 slo_ttft_ms=2000, slo_tpot_ms=50)


def test_a_dense_decode_pool_is_laid_out_for_tokens_per_gpu_not_the_smallest_tp():
    """SGLang fits Llama-3.3-70B on two H100s with a KV pool for one 4,500-token request (its
    decode admission keeps 512 more per request), so the smallest TP served the target with 256
    decode replicas on 540 GPUs. Each candidate TP is scored by output tokens/s per GPU, the
    best kept; the note names every candidate and the pick is the best of them."""
    import re

    r = plan_disagg(LLAMA, "h100", engine="sglang", workload=SIZED)
    d = r.disaggregated
    note = next(n for n in d.notes if n.startswith("decode layout TP "))
    figures = {int(tp): float(v.replace(",", ""))
               for tp, v in re.findall(r"TP (\d+) \(([\d,]+)\)", note.split(": ", 1)[1])}
    assert 2 in figures and figures[2] < 0.1 * max(figures.values())  # one request per pool
    tp = int(d.decode.inputs["tensor_parallel_size"].value)
    assert figures[tp] == max(figures.values()) and note.startswith(f"decode layout TP {tp}:")
    assert r.fits and d.decode_replicas == -(-256 // d.decode_capacity_per_replica)
    assert d.gpus < 64  # 540 before


def test_a_decode_pool_below_its_capacity_adds_no_decode_wait():
    """Requests decoding per replica solve r = rate × a request's decode time at r (Little's
    law). Iterated from below, r stalled at 166 of the 297 a TP-8 vLLM decode replica holds and
    the unconverged rest came out as a 4.4 s decode wait; the root is found by bisection."""
    r = plan_disagg(LLAMA, "h100", engine="vllm", workload=SIZED, decode_tp=8)
    d = r.disaggregated
    assert d.decode_running_per_replica < d.decode_capacity_per_replica
    assert d.ttft.decode_wait_ms == 0 and r.fits
    # Little's law holds at the service's rate: running = rate / replicas × decode time
    perf = r.performance
    rate = perf.requests_per_s
    decode_s = (SIZED.avg_output_tokens - 1) * perf.tpot_ms * 1e-3 + d.ttft.first_decode_ms * 1e-3
    assert d.decode_running_per_replica == pytest.approx(rate / d.decode_replicas * decode_s,
                                                         rel=0.02)
