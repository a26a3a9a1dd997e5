"""Measured fused-MoE GEMM rates (kvplan/perf/moe_gemm.py): the curve arithmetic worked by hand,
which deployments get a curve (and which keep the dense rate), and the step-model hook."""

from __future__ import annotations

import dataclasses
import math

import pytest

from kvplan.api import plan_with_context
from kvplan.perf import moe_gemm
from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model
from kvplan.specs import QuantSpec

H100 = resolve_gpu("h100-sxm-80gb")
UNIT = perf.Coefficients(gemm_efficiency=1.0, bandwidth_efficiency=1.0, step_overhead_ms=0.0,
                         layer_overhead_us=0.0, seq_overhead_us=0.0, allreduce_latency_us=0.0,
                         request_overhead_ms=0.0)
FAMILY = "vllm-triton-fused-moe"


def test_ratio_interpolates_in_log_tokens_and_holds_its_ends() -> None:
    curve = ((128.0, 0.3), (512.0, 0.5))
    # 256 is the geometric midpoint of 128 and 512: halfway, 0.4
    assert moe_gemm.ratio(curve, 256) == pytest.approx(0.4)
    assert moe_gemm.ratio(curve, 64) == 0.3 and moe_gemm.ratio(curve, 4096) == 0.5
    # a floor lifts a small t to it: t = 4 read at 256
    assert moe_gemm.ratio(curve, 4, floor_tokens=256) == pytest.approx(0.4)
    assert moe_gemm.ratio((), 256) == 1.0


def test_ridge_tokens_hand_worked() -> None:
    # A100 SXM bf16: 312 TFLOP/s × 2 B / (2 × 2.039 TB/s) = 153.0 tokens per expert
    assert moe_gemm.ridge_tokens(312e12, 2.039e12, 2.0) == pytest.approx(153.016, abs=1e-3)
    # H100 SXM fp8: 1979 TFLOP/s × 1 B / (2 × 3.35 TB/s) = 295.4
    assert moe_gemm.ridge_tokens(1979e12, 3.35e12, 1.0) == pytest.approx(295.37, abs=0.01)
    assert moe_gemm.ridge_tokens(312e12, 0.0, 2.0) == 0.0


def test_kernel_dtype_follows_the_experts_path() -> None:
    assert moe_gemm.moe_kernel_dtype("bfloat16", None, False) == "bfloat16"
    assert moe_gemm.moe_kernel_dtype("fp8", "fp8", True) == "fp8_block"
    assert moe_gemm.moe_kernel_dtype("fp8", "fp8", False) == "fp8"
    # FP8 on a GPU without FP8 (weight-only Marlin), AWQ: no table
    assert moe_gemm.moe_kernel_dtype("bfloat16", "fp8", True) == ""
    # gpt-oss's MXFP4 experts with bf16 activations (vLLM's Triton / Marlin MXFP4 MoE) have
    # their own tables; a what-if MXFP4 (Quark, emulated) and MXFP4 run in FP4 do not
    assert moe_gemm.moe_kernel_dtype("bfloat16", "mxfp4", False) == "mxfp4"
    assert moe_gemm.moe_kernel_dtype("bfloat16", "mxfp4", False, what_if=True) == ""
    assert moe_gemm.moe_kernel_dtype("fp4", "mxfp4", False) == ""
    assert moe_gemm.moe_kernel_dtype("float16", "awq", False) == ""
    # NVFP4 experts in FP4 (Blackwell), and dequantized where the GPU has no FP4
    assert moe_gemm.moe_kernel_dtype("fp4", "nvfp4", False) == "nvfp4"
    assert moe_gemm.moe_kernel_dtype("bfloat16", "nvfp4", False) == ""


def test_curve_by_shard_width_and_expert_count() -> None:
    bands = moe_gemm.CURVES[(FAMILY, "a100-sxm-80gb", "bfloat16")]
    # Qwen3-235B-A22B (128 experts of width 1536): TP8 → 192 columns, TP4 → 384, TP1 → 1536
    assert moe_gemm.curve_for(FAMILY, "a100-sxm-80gb", "bfloat16", 128, 192) == bands[0]
    assert moe_gemm.curve_for(FAMILY, "a100-sxm-80gb", "bfloat16", 128, 256) == bands[0]
    assert moe_gemm.curve_for(FAMILY, "a100-sxm-80gb", "bfloat16", 128, 384) == bands[1]
    assert moe_gemm.curve_for(FAMILY, "a100-sxm-80gb", "bfloat16", 128, 1536) == bands[2]
    # outside the tables: Mixtral's 8 experts, an unmeasured GPU, kernel family or dtype
    assert moe_gemm.curve_for(FAMILY, "a100-sxm-80gb", "bfloat16", 8, 14336) == ()
    assert moe_gemm.curve_for(FAMILY, "l40s", "bfloat16", 128, 768) == ()
    assert moe_gemm.curve_for("", "a100-sxm-80gb", "bfloat16", 128, 768) == ()
    assert moe_gemm.curve_for(FAMILY, "a100-sxm-80gb", "fp8", 128, 768) == ()


def test_every_curve_is_a_slowdown_rising_with_tokens() -> None:
    for key, bands in moe_gemm.CURVES.items():
        # a band no table times is empty: the dense rate (B200 DeepGEMM above 768 columns)
        for curve in (c for c in bands if c):
            ts = [t for t, _ in curve]
            assert ts == sorted(ts) and len(set(ts)) == len(ts), key
            assert all(0.0 < r < 1.0 for _, r in curve), key
            assert curve[0][1] <= curve[-1][1], key


def _qwen30b(engine: str = "vllm", quant: QuantSpec | None = None) -> perf.PerfContext:
    return perf.context_for(resolve_model("Qwen/Qwen3-30B-A3B"), H100, engine, "0.12.0", tp=1,
                            quant=quant)


def test_context_carries_the_curve_for_measured_deployments_only() -> None:
    ctx = _qwen30b()
    # 128 experts of width 768 at TP1: the (256, 768] band; bf16 ridge 989.4e12 / 3.35e12
    assert ctx.expert_gemm_curve == moe_gemm.CURVES[(FAMILY, "h100-sxm-80gb", "bfloat16")][1]
    assert ctx.expert_gemm_floor_tokens == pytest.approx(989.4 / 3.35)
    # SGLang's own Triton fused_moe has its own tables; TGI declares no kernel family
    assert _qwen30b("sglang").expert_gemm_curve == moe_gemm.CURVES[
        ("sglang-triton-fused-moe", "h100-sxm-80gb", "bfloat16")][1]
    assert _qwen30b("tgi").expert_gemm_curve == ()
    # a dense model has no experts
    llama = perf.context_for(resolve_model("meta-llama/Llama-3.1-8B-Instruct"), H100, "vllm",
                             "0.12.0", tp=1)
    assert llama.expert_gemm_curve == () and llama.expert_gemm_floor_tokens == 0.0
    # block-scaled FP8 experts on H100 (FP8 native): the fp8_block curve, fp8 ridge
    # (vLLM 0.19.0: Triton; 0.12.0 runs DeepGEMM at MoE TP 1, which no table times at EP 1:
    # the dense rate, test_layout_family_by_vllm_release_and_layout)
    block = QuantSpec(method="fp8", block_size=(128, 128), source="cli")
    fp8 = perf.context_for(resolve_model("Qwen/Qwen3-30B-A3B"), H100, "vllm", "0.19.0", tp=1,
                           quant=block)
    assert _qwen30b(quant=block).expert_gemm_curve == ()
    assert fp8.compute_dtype == "fp8"
    assert fp8.expert_gemm_curve == moe_gemm.CURVES[(FAMILY, "h100-sxm-80gb", "fp8_block")][1]


def test_prefill_step_charges_experts_at_the_measured_ratio() -> None:
    """Qwen3-30B-A3B bf16 on H100 (see test_step_time.test_moe_step_terms_by_hand for the
    FLOPs: dense 1,837,105,152 and top-8 experts 3,623,878,656 per token; attention
    4·32·128·48 per context token). 8192 prompt tokens route 8192 · 8 / 128 = 512 tokens to
    each expert: the (256, 768] band's ratio at 512, 0.249. With unit efficiencies the experts'
    FLOPs take 1 / 0.249 of their time at the dense rate."""
    ctx = dataclasses.replace(_qwen30b(), coefficients=UNIT)
    p = perf.step_terms(ctx, decode_seqs=0, context_tokens=0, prefill_tokens=8192,
                        prefill_context_tokens=4096, prefill_seqs=1)
    gemm = 8192 * (1_837_105_152 + 3_623_878_656) + 2 * 151936 * 2048
    attn = 4 * 32 * 128 * 48 * 8192 * 4096
    extra = 8192 * 3_623_878_656 * (1 / 0.249 - 1)
    assert p.gemm_flops == gemm  # FLOPs are FLOPs: only their time changes
    assert p.compute_s == pytest.approx((gemm + extra + attn) / 989.4e12, rel=1e-9)
    dense_rate = dataclasses.replace(ctx, expert_gemm_curve=())
    q = perf.step_terms(dense_rate, decode_seqs=0, context_tokens=0, prefill_tokens=8192,
                        prefill_context_tokens=4096, prefill_seqs=1)
    assert q.compute_s == pytest.approx((gemm + attn) / 989.4e12, rel=1e-9)


def test_decode_step_holds_the_ratio_at_the_ridge() -> None:
    """64 decode sequences route 64 · 8 / 128 = 4 tokens per expert, far below the ridge
    (295.3 for bf16 on H100): the ratio is read at 295.3, between the points (256, 0.228) and
    (512, 0.249): 0.228 + 0.021 · ln(295.3 / 256) / ln 2 = 0.2323. The step stays byte-bound:
    its expert compute is small next to reading every touched expert."""
    ctx = dataclasses.replace(_qwen30b(), coefficients=UNIT)
    t = perf.step_terms(ctx, decode_seqs=64, context_tokens=1024)
    r = 0.228 + 0.021 * math.log((989.4 / 3.35) / 256) / math.log(2)
    assert r == pytest.approx(0.2323, abs=1e-4)
    assert moe_gemm.ratio(ctx.expert_gemm_curve, 4, ctx.expert_gemm_floor_tokens) == \
        pytest.approx(r)
    assert t.bound == "bandwidth"


def test_layout_picks_the_ep_curve_or_the_group_wide_tp_slice() -> None:
    eps = dict(moe_gemm.EP_CURVES[(FAMILY, "h100-sxm-80gb", "bfloat16")])
    # benchmarks/moe_gemm_tables.py at aiconfigurator 095f58a5, vLLM 0.14.0 H100 bf16, EP 8:
    # (128, 0.149), (256, 0.171), (512, 0.176)
    assert eps[8] == ((128, 0.149), (256, 0.171), (512, 0.176))

    def at(**kw: int) -> moe_gemm.Curve:
        return moe_gemm.curve_for_layout(FAMILY, "h100-sxm-80gb", "bfloat16", 128, 1536, **kw)

    assert at(tp=1, group=8, ep=8) == eps[8]
    assert at(tp=1, group=12, ep=12) == eps[8]  # the largest measured EP size below
    assert at(tp=1, group=256, ep=256) == eps[64]  # held at the tables' largest, 64
    # DP attention without EP: a TP slice of every expert over the 8 GPUs, 1536 / 8 = 192
    # columns: the ≤ 256 band of the EP 1 tables; the replica's own TP 2: 768, the middle band
    bands = moe_gemm.CURVES[(FAMILY, "h100-sxm-80gb", "bfloat16")]
    assert at(tp=1, group=8, ep=1) == bands[0]
    assert at(tp=2, group=1, ep=1) == bands[1]
    # no EP table for Mixtral's 8 experts nor for an unmeasured GPU
    assert moe_gemm.curve_for_layout(FAMILY, "h100-sxm-80gb", "bfloat16", 8, 14336,
                                     tp=1, group=8, ep=8) == ()
    assert moe_gemm.curve_for_layout(FAMILY, "mi300x", "bfloat16", 128, 1536,
                                     tp=1, group=8, ep=8) == ()


def test_every_ep_curve_is_a_slowdown_in_ep_order() -> None:
    for key, by_ep in moe_gemm.EP_CURVES.items():
        sizes = [e for e, _ in by_ep]
        assert sizes == sorted(sizes) and sizes[0] >= 2, key
        for _, curve in by_ep:
            assert [t for t, _ in curve] == sorted(t for t, _ in curve), key
            assert all(0.0 < r < 1.2 for _, r in curve), key


def test_expert_parallel_layers_run_at_the_ep_curve() -> None:
    """Qwen3-30B-A3B bf16 on H100 at DP 8 + EP 8 (vLLM --enable-expert-parallel -dp 8): each
    rank holds 16 whole experts. 1024 own prompt tokens meet 7 other ranks' in the MoE layer:
    1024 · 8 · 8 / 128 = 512 tokens per expert, read on the EP 8 curve: 0.176. The expert
    FLOPs per own token are unchanged (perf/expert.py), so with unit efficiencies they take
    1 / 0.176 of their dense-rate time."""
    from kvplan.perf import expert

    m = resolve_model("Qwen/Qwen3-30B-A3B")
    base = dataclasses.replace(_qwen30b(), coefficients=UNIT)
    ep = expert.apply(base, m, dtype="bfloat16", quant=None, dp=8, ep=8, moe_dp=True,
                      all_to_all=True)
    assert ep.moe_group == 8 and ep.moe_dp == 8
    assert ep.expert_gemm_curve == ((128, 0.149), (256, 0.171), (512, 0.176))
    assert ep.expert_gemm_table == "vLLM 0.14.0, EP 8"
    kw = {"decode_seqs": 0, "context_tokens": 0, "prefill_tokens": 1024,
          "prefill_context_tokens": 512, "prefill_seqs": 1}
    gemm = 1024 * (1_837_105_152 + 3_623_878_656) + 2 * 151936 * 2048
    attn = 4 * 32 * 128 * 48 * 1024 * 512
    extra = 1024 * 3_623_878_656 * (1 / 0.176 - 1)
    assert perf.step_terms(ep, **kw).compute_s == pytest.approx(
        (gemm + extra + attn) / 989.4e12, rel=1e-9)
    # DeepEP's all-to-all feeds DeepGEMM, which no table times: the dense rate, said so
    deepep = expert.apply(base, m, dtype="bfloat16", quant=None, dp=8, ep=8, moe_dp=True,
                          all_to_all=True, node_dedup=True)
    assert deepep.expert_gemm_curve == () and "DeepGEMM" in deepep.expert_gemm_source
    # (at the dense rate these 1024 tokens' GEMMs are weight-bound: no compute term)
    assert perf.step_terms(deepep, **kw).compute_s < perf.step_terms(ep, **kw).compute_s


# --- moe3 --- TensorRT-LLM's FP8 block-scaled experts on Blackwell run DeepGEMM


def test_trtllm_fp8_block_on_b200_routes_to_deepgemm_only() -> None:
    assert moe_gemm.kernel_family("trtllm-cutlass-moe", "b200", "fp8_block") \
        == "trtllm-deepgemm-moe"
    # Hopper keeps CUTLASS's own block-scale kernel; other dtypes and engines are unrouted
    assert moe_gemm.kernel_family("trtllm-cutlass-moe", "h200-sxm-141gb", "fp8_block") \
        == "trtllm-cutlass-moe"
    assert moe_gemm.kernel_family("trtllm-cutlass-moe", "b200", "nvfp4") == "trtllm-cutlass-moe"
    assert moe_gemm.kernel_family(FAMILY, "b200", "fp8_block") == FAMILY
    # GB200: no TensorRT-LLM 1.2 table (aiconfigurator's GB200 tables start at 1.3.0rc10)
    assert moe_gemm.kernel_family("trtllm-cutlass-moe", "gb200", "fp8_block") \
        == "trtllm-cutlass-moe"


def test_deepgemm_narrow_band_hand_worked() -> None:
    # aiconfigurator 095f58a5, b200_sxm/moe/trtllm/1.2.0rc5, kernel_source deepgemm: DeepSeek-V3's
    # shape (hidden 7168, moe_intermediate 2048, 256 experts, top-8) at moe_tp 8, EP 2,
    # balanced, 8192 tokens (t = 8192 × 8 / 256 = 256): one GPU does
    # 6 × 7168 × 256 × 8192 × 8 / 2 = 360.78 GFLOP in 1.2598 ms = 286.4 TFLOP/s; the dense
    # fp8 8192 × 7168 × 7168 GEMM (gemm table, torch_flow): 841.81 GFLOP in 0.42567 ms =
    # 1977.6 TFLOP/s: a ratio of 0.145 for this one shape (the curve: the median of four
    # shapes over the median dense rate)
    one_shape = (360.777e9 / 1.25985e-3) / (841.814e9 / 0.425675e-3)
    assert one_shape == pytest.approx(0.1448, abs=5e-4)
    narrow = moe_gemm.curve_for("trtllm-deepgemm-moe", "b200", "fp8_block", 256, 256)
    assert narrow and abs(moe_gemm.ratio(narrow, 256) - one_shape) / one_shape < 0.15
    # no fine-grained shape wider than 768 columns at EP 1: dense rate (DeepSeek at TP 2)
    assert moe_gemm.curve_for("trtllm-deepgemm-moe", "b200", "fp8_block", 256, 1024) == ()


def _deepseek_r1_b200(engine: str, tp: int, gpu: str = "b200",
                      version: str = "") -> perf.PerfContext:
    quant = QuantSpec(method="fp8", block_size=(128, 128), source="checkpoint")
    return perf.context_for(resolve_model("deepseek-ai/DeepSeek-R1"), resolve_gpu(gpu),
                            engine, version or ("1.0.0" if engine == "trtllm" else "0.12.0"),
                            tp=tp, quant=quant)


def test_deepseek_r1_on_b200_trtllm_reads_the_deepgemm_table() -> None:
    ctx = _deepseek_r1_b200("trtllm", 8)
    assert ctx.expert_gemm_key == ("trtllm-deepgemm-moe", "b200", "fp8_block")
    assert ctx.expert_gemm_table == "TensorRT-LLM 1.2.0rc5 DeepGEMM, TP-split"
    assert ctx.expert_gemm_source == "aiconfigurator 095f58a5 table: b200, fp8_block"
    assert ctx.expert_gemm_curve == moe_gemm.CURVES[ctx.expert_gemm_key][0]
    # TP 2 (1024 columns): no measured band, the dense rate, said so
    wide = _deepseek_r1_b200("trtllm", 2)
    assert wide.expert_gemm_curve == () and wide.expert_gemm_source == moe_gemm.DENSE_RATE
    # GB200 with TensorRT-LLM and B200 with vLLM keep the dense rate
    for ctx in (_deepseek_r1_b200("trtllm", 8, "gb200"), _deepseek_r1_b200("vllm", 8)):
        assert ctx.expert_gemm_curve == () and ctx.expert_gemm_source == moe_gemm.DENSE_RATE


# --- moe4 --- which kernel vLLM and SGLang run for FP8 block-scaled experts (docs/moe-gemm.md)


def test_vllm_fp8_block_tp_split_on_hopper_keeps_the_triton_table() -> None:
    """DeepSeek-R1 at vLLM -tp 8 on H200: the MoE's TP size is 8, where vLLM 0.14.0 turns
    DeepGEMM off by default (oracle/fp8.py select_fp8_moe_backend) and 0.19.0 puts Triton
    first for block FP8 without EP: the Triton table it was. Shard 2048 / 8 = 256 columns:
    the ≤ 256 band, whose H200 value at t = 256 is 0.478 (aiconfigurator 095f58a5,
    h200_sxm/moe/vllm/0.14.0, kernel_source vllm_fused_moe, fp8_block, over the dense fp8
    615 TFLOP/s)."""
    ctx = _deepseek_r1_b200("vllm", 8, "h200-sxm-141gb")
    assert ctx.expert_gemm_key == (FAMILY, "h200-sxm-141gb", "fp8_block")
    assert ctx.expert_gemm_table == "vLLM 0.14.0, TP-split"
    assert moe_gemm.ratio(ctx.expert_gemm_curve, 256) == pytest.approx(0.478)


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "h200-sxm-141gb"])
def test_vllm_fp8_block_expert_parallel_on_hopper_keeps_the_dense_rate(gpu: str) -> None:
    """With expert parallelism the MoE's TP size is 1: vLLM 0.14.0 runs DeepGEMM, 0.19.0
    FlashInfer's CUTLASS MoE (layout_family routes both); the Triton family's own EP layouts
    (releases routed nowhere else: 0.10.x) keep the dense rate, and the plan says why.
    bf16 and per-tensor FP8 experts keep their EP curves."""
    assert moe_gemm.curve_for_layout(FAMILY, gpu, "fp8_block", 256, 2048,
                                     tp=1, group=8, ep=8) == ()
    assert moe_gemm.dense_reason((FAMILY, gpu, "fp8_block"), 8) == moe_gemm.VLLM_EP_FP8_BLOCK
    assert moe_gemm.dense_reason((FAMILY, gpu, "fp8_block"), 1) == moe_gemm.DENSE_RATE
    # the same tables' Triton rows stay: H100 bf16 at EP 8, t = 512: 0.176 (as above)
    assert moe_gemm.curve_for_layout(FAMILY, "h100-sxm-80gb", "bfloat16", 128, 768,
                                     tp=1, group=8, ep=8)[-1] == (512, 0.176)
    # SGLang's Triton runs EP without DeepEP (moe_runner_backend auto → triton): its curve
    sgl = moe_gemm.curve_for_layout("sglang-triton-fused-moe", gpu, "fp8_block", 256, 2048,
                                    tp=1, group=8, ep=8)
    assert sgl


def _r1_layout(engine: str, version: str, *, tp: int, dp: int, ep: int, a2a: bool,
               deepep: bool = False) -> perf.PerfContext:
    from kvplan.perf import expert

    base = _deepseek_r1_b200(engine, tp, "h200-sxm-141gb", version)
    return expert.apply(base, resolve_model("deepseek-ai/DeepSeek-R1"), dtype="fp8",
                        quant=QuantSpec(method="fp8", block_size=(128, 128), source="checkpoint"),
                        dp=dp, ep=ep, moe_dp=dp > 1, all_to_all=a2a, node_dedup=deepep)


def test_vllm_expert_parallel_deepseek_r1_reads_flashinfer_cutlass() -> None:
    """vLLM 0.15-0.33 (kvplan's default 0.33.0 read) run FlashInfer CUTLASS with EP on
    Hopper: vLLM 0.24.0's FlashInfer CUTLASS table at EP 8; 0.10.x keeps the dense rate, said
    so; 0.12.0-0.14.0 run DeepGEMM there (MoE TP 1): SGLang's DeepEP MoE table as a proxy, at
    EP 8."""
    for version in ("0.15.0", "0.16.0", "0.33.0"):
        ep = _r1_layout("vllm", version, tp=8, dp=1, ep=8, a2a=False)
        assert ep.expert_gemm_curve == ((128, 0.406), (256, 0.466), (512, 0.437))
        assert ep.expert_gemm_table == "vLLM 0.24.0 FlashInfer CUTLASS MoE, EP 8"
        assert "proxy" not in ep.expert_gemm_source
    ep = _r1_layout("vllm", "0.10.1", tp=8, dp=1, ep=8, a2a=False)
    assert ep.expert_gemm_curve == () and ep.expert_gemm_table == ""
    assert ep.expert_gemm_source == moe_gemm.VLLM_EP_FP8_BLOCK
    ep = _r1_layout("vllm", "0.12.0", tp=8, dp=1, ep=8, a2a=False)
    assert ep.expert_gemm_curve == dict(moe_gemm.EP_CURVES[
        ("vllm-deepgemm-moe", "h200-sxm-141gb", "fp8_block")])[8]
    assert ep.expert_gemm_table.endswith("EP 8") and "proxy" in ep.expert_gemm_source


# --- deepgemm --- DeepGEMM's grouped GEMMs on Hopper (SGLang 0.5.10's wideep tables)

def test_deepgemm_hopper_hand_worked() -> None:
    """aiconfigurator 095f58a5 h200_sxm/moe/sglang/0.5.10/wideep_context_moe_perf.parquet,
    kernel_source deepepmoe, fp8_block, DeepSeek-V3 shape (7168 / 2048, 256 experts, top-8),
    moe_ep_size 8, uniform, num_tokens 8192 (the EP group's): 0.901111 ms. t = 8192 × 8 / 256
    = 256; one GPU's FLOPs 6 × 7168 × 2048 × 8192 × 8 / 8 = 721.55 GFLOP → 800.7 TFLOP/s;
    over SGLang 0.5.10's dense fp8 median 1059 TFLOP/s (h200_sxm/gemm/sglang/0.5.10, e.g.
    8192 × 4096 × 4096 in 0.222507 ms: 1235 TFLOP/s) = 0.756."""
    rate = 6 * 7168 * 2048 * 8192 * 8 / 8 / 0.901111e-3
    assert rate / 1059e12 == pytest.approx(0.756, abs=0.001)
    ep8 = dict(moe_gemm.EP_CURVES[("sglang-deepgemm-moe", "h200-sxm-141gb", "fp8_block")])[8]
    assert dict(ep8)[256] == pytest.approx(rate / 1059e12, abs=0.001)
    # no EP-2 row reaches t = 128: EP 2-3 read EP 4's curve (moe_gemm.ep_read); EP 72 holds 64
    for fam in ("sglang-deepgemm-moe", "vllm-deepgemm-moe"):
        ep4 = dict(moe_gemm.EP_CURVES[(fam, "h100-sxm-80gb", "fp8_block")])[4]
        for ep in (2, 3):
            assert moe_gemm.curve_for_layout(fam, "h100-sxm-80gb", "fp8_block", 256, 2048,
                                             tp=1, group=ep, ep=ep) == ep4
        assert moe_gemm.curve_for_layout(fam, "h100-sxm-80gb", "fp8_block", 256, 2048,
                                         tp=1, group=72, ep=72)[0] == (128, 0.12)


def test_ep_below_the_smallest_timed_size_reads_it_as_a_lower_bound() -> None:
    """aiconfigurator 095f58a5 h200_sxm/moe/sglang/0.5.10/wideep_context_moe_perf.parquet,
    deepepmoe, fp8_block, DeepSeek-V3 shape, uniform, over SGLang 0.5.10's dense fp8 median
    (1059 TFLOP/s): at 32 tokens per expert (num_tokens 1024 × 8 / 256) one GPU's FLOPs are
    6 × 7168 × 2048 × 1024 × 8 / EP: EP 2 360.78 GFLOP in 0.712722 ms → 0.478, EP 4 180.39
    in 0.468393 ms → 0.364, EP 8 90.19 in 0.383950 ms → 0.222 (hand-worked below); at t = 128
    EP 4 0.569, EP 8 0.475 (EP_CURVES). The ratio at a fixed t never rises with EP, so EP 2-3
    (no row at t ≥ 128) read EP 4's curve, a lower bound on their rate; the plan says so.
    Families timed at EP 2 read their own; EP 6 reads EP 4's, EP 72 EP 64's, and the source
    says so."""
    for ep, ms, ratio in ((2, 0.712722, 0.478), (4, 0.468393, 0.364), (8, 0.383950, 0.222)):
        flops = 6 * 7168 * 2048 * 1024 * 8 / ep
        assert flops / (ms * 1e-3) / 1059e12 == pytest.approx(ratio, abs=0.0005)
    key = ("vllm-deepgemm-moe", "h200-sxm-141gb", "fp8_block")
    assert [moe_gemm.ep_read(*key, ep) for ep in (1, 2, 3, 4, 6, 8, 72)] == [0, 4, 4, 4, 4, 8, 64]
    assert moe_gemm.ep_read("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8", 2) == 2
    assert moe_gemm.ep_read("vllm-triton-fused-moe", "mi300x", "fp8", 2) == 0
    assert dict(dict(moe_gemm.EP_CURVES[key])[4])[128] == 0.569
    assert dict(dict(moe_gemm.EP_CURVES[key])[8])[128] == 0.475
    assert moe_gemm.ep_note(2, 4).endswith("EP 2 reads EP 4's curve (the smallest timed size: "
                                           "a lower bound on its rate, an upper bound on its "
                                           "time)")
    assert "largest timed size below it" in moe_gemm.ep_note(6, 4)
    assert moe_gemm.ep_note(8, 8) == moe_gemm.ep_note(2, 0) == ""
    # vLLM 0.12 at TP 2 runs DeepGEMM over MoE TP 2: EP 4's curve, and the source says so
    ctx = _qwen235b_fp8("0.12.0", 2)
    assert ctx.expert_gemm_curve == dict(moe_gemm.EP_CURVES[key])[4]
    assert ctx.expert_gemm_source.endswith("EP 2 reads EP 4's curve (the smallest timed size: "
                                           "a lower bound on its rate, an upper bound on its "
                                           "time)")
    assert "reads EP" not in _qwen235b_fp8("0.12.0", 4).expert_gemm_source


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "h200-sxm-141gb"])
def test_layout_family_by_vllm_release_and_layout(gpu: str) -> None:
    """docs/moe-gemm.md, which kernel runs: vLLM 0.11.0 DeepGEMM at every layout; 0.12-0.14
    below MoE TP 8 and with EP; 0.10.x, 0.15 (not read), 0.16+ and the default keep theirs;
    DeepEP → DeepGEMM (SGLang's own, vLLM's by proxy); other dtypes and GPUs unrouted."""
    def fam(release: tuple[int, ...] | None, moe_tp: int = 8, ep: int = 1,
            deepep: bool = False, kernels: str = FAMILY, gpu_id: str = gpu,
            dtype: str = "fp8_block") -> str:
        return moe_gemm.layout_family(kernels, gpu_id, dtype, release, moe_tp=moe_tp, ep=ep,
                                      deepep=deepep)
    dg = "vllm-deepgemm-moe"
    assert fam((0, 11, 0)) == dg and fam((0, 11, 0), moe_tp=16) == dg
    assert fam((0, 12, 0)) == FAMILY and fam((0, 14, 1), moe_tp=4) == dg
    assert fam((0, 14, 0), moe_tp=1, ep=8) == dg
    assert fam((0, 10, 1, 1), moe_tp=4) == FAMILY and fam((0, 10, 1, 1), moe_tp=1, ep=8) == FAMILY
    # --- fimoe --- 0.15.0-0.16.0: FlashInfer CUTLASS in every layout (TP-split by proxy);
    # 0.17-0.33 and the newest: Triton for TP, FlashInfer CUTLASS for EP (oracle/fp8.py)
    fi = "vllm-flashinfer-cutlass-moe"
    for first in ((0, 15, 0), (0, 16, 0)):
        assert fam(first, moe_tp=8) == fi + "-tp" and fam(first, moe_tp=1, ep=8) == fi
    for newer in ((0, 17, 0), (0, 19, 0), (0, 24, 0), (0, 33, 0), None):
        assert fam(newer, moe_tp=8) == FAMILY and fam(newer, moe_tp=4) == FAMILY
        assert fam(newer, moe_tp=1, ep=8) == fi
    # --- deepep --- behind DeepEP: 0.33.0 high-throughput FlashInfer CUTLASS (a proxy table),
    # low-latency DeepGEMM's masked GEMM (tests/perf/test_vllm_deepep_kernels.py)
    assert fam((0, 33, 0), moe_tp=1, ep=8, deepep=True) == fi + "-deepep"
    assert moe_gemm.layout_family(FAMILY, gpu, "fp8_block", (0, 33, 0), moe_tp=1, ep=8,
                                  deepep=True, low_latency=True) == dg
    sgl = "sglang-triton-fused-moe"
    assert fam(None, ep=8, deepep=True, kernels=sgl) == "sglang-deepgemm-moe"
    assert fam(None, ep=8, deepep=True, kernels=sgl, dtype="bfloat16") == sgl
    assert fam((0, 11, 0), dtype="fp8") == FAMILY
    assert fam((0, 11, 0), gpu_id="b200") == FAMILY


def test_vllm_0_11_tp8_reads_deepgemm_at_the_ep8_curve_by_proxy() -> None:
    """DeepSeek-R1 -tp 8 on H200 under vLLM 0.11.0 (the traffic validation's GPUStack run):
    DeepGEMM at every MoE TP; the TP-split layout reads the EP-8 curve (the same FLOPs and
    weight bytes per GPU at the same t), a stated proxy; 0.12.0 keeps Triton at TP 8."""
    ctx = _deepseek_r1_b200("vllm", 8, "h200-sxm-141gb", "0.11.0")
    assert ctx.expert_gemm_key == (FAMILY, "h200-sxm-141gb", "fp8_block")
    assert ctx.expert_gemm_curve == ((128, 0.475), (256, 0.756), (512, 0.953))
    assert "proxy" in ctx.expert_gemm_source and ctx.expert_gemm_table.endswith("TP-split")
    assert _deepseek_r1_b200("vllm", 8, "h200-sxm-141gb", "0.12.0").expert_gemm_table \
        == "vLLM 0.14.0, TP-split"


def test_deepep_layouts_read_the_deepgemm_table() -> None:
    """SGLang --moe-a2a-backend deepep and vLLM's deepep backends, EP 16 with DP attention:
    SGLang's DeepEP MoE table at EP 16 (vLLM's by proxy), where both kept the dense rate."""
    sgl = _r1_layout("sglang", "0.5.10", tp=1, dp=16, ep=16, a2a=True, deepep=True)
    assert sgl.expert_gemm_table == "SGLang 0.5.10 DeepEP MoE (DeepGEMM), EP 16"
    assert sgl.expert_gemm_curve == ((128, 0.358), (256, 0.585), (512, 0.788))
    # --- deepep --- vLLM 0.14.0 (DeepGEMM behind either DeepEP backend): by proxy; 0.33.0
    # high-throughput runs FlashInfer CUTLASS (tests/perf/test_vllm_deepep_kernels.py)
    vll = _r1_layout("vllm", "0.14.0", tp=1, dp=16, ep=16, a2a=True, deepep=True)
    assert vll.expert_gemm_curve == sgl.expert_gemm_curve and "proxy" in vll.expert_gemm_source


# --- mxfp4 --- gpt-oss's MXFP4 routed experts at their measured kernel rate (docs/moe-gemm.md)

OAI = "vllm-oai-triton-mxfp4"


def test_mxfp4_oai_triton_hand_worked() -> None:
    """aiconfigurator 095f58a5, h100_sxm/moe/vllm/0.24.0/moe_perf.parquet, kernel_source
    vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic, moe_dtype w4a16_mxfp4,
    power_law_1.01, moe_tp 1, EP 1, hidden = inter = 2880, top-4:
    128 experts (gpt-oss-120b), 8192 tokens (t = 256): 3.96816 ms;
    32 experts (gpt-oss-20b), 2048 tokens (t = 256): 1.00685 ms.
    h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet, torch.nn.functional.linear, bfloat16,
    m 8192, n 4096, k 4096: 0.346985 ms."""
    flops_120b = 6 * 2880 * 2880 * 8192 * 4  # 1.6307e12
    flops_20b = 6 * 2880 * 2880 * 2048 * 4
    dense = 2 * 8192 * 4096 * 4096 / 0.346985e-3  # 792.2 TFLOP/s
    r120 = flops_120b / 3.96816e-3 / dense  # 411.0 TFLOP/s: 0.519
    r20 = flops_20b / 1.00685e-3 / dense  # 404.9 TFLOP/s: 0.511
    assert r120 == pytest.approx(0.519, abs=1e-3) and r20 == pytest.approx(0.511, abs=1e-3)
    # the > 768 band (TP 1: 2880 columns) at t = 256: the median of four shapes (both expert
    # counts, moe_tp 1 and 2) over the median dense rate (774 TFLOP/s)
    for experts, one_shape in ((128, r120), (32, r20)):
        curve = moe_gemm.curve_for(OAI, "h100-sxm-80gb", "mxfp4", experts, 2880)
        assert abs(moe_gemm.ratio(curve, 256) - one_shape) / one_shape < 0.05
    # slower than dense, faster than vLLM 0.14.0's bf16 Triton fused_moe at 768 columns
    wide = moe_gemm.curve_for(OAI, "h100-sxm-80gb", "mxfp4", 128, 2880)
    assert moe_gemm.ratio(wide, 256) == pytest.approx(0.504)


def test_mxfp4_marlin_proxy_hand_worked() -> None:
    """A100: vLLM runs MXFP4 experts in Marlin; the proxy is SGLang 0.5.10's Marlin MoE with
    int4 weights. aiconfigurator 095f58a5, a100_sxm/moe/sglang/0.5.10/moe_perf.parquet,
    kernel_source sglang_marlin_moe, int4_wo, power_law_1.01, moe_tp 1, EP 1: hidden 4096,
    inter 1536, 128 experts, top-8 (Qwen3-235B's shape), 4096 tokens (t = 256): 10.01356 ms;
    a100_sxm/gemm/sglang/0.5.10/gemm_perf.parquet, kernel_source sglang, bfloat16, m 8192,
    n 4096, k 4096: 1.139178 ms."""
    moe = 6 * 4096 * 1536 * 4096 * 8 / 10.01356e-3  # 123.5 TFLOP/s
    dense = 2 * 8192 * 4096 * 4096 / 1.139178e-3  # 241.3 TFLOP/s
    assert moe / dense == pytest.approx(0.512, abs=1e-3)
    curve = moe_gemm.curve_for("marlin-moe-int4-proxy", "a100-sxm-80gb", "mxfp4", 128, 2880)
    assert abs(moe_gemm.ratio(curve, 256) - moe / dense) / (moe / dense) < 0.05


def test_mxfp4_routes_by_gpu_and_expert_count() -> None:
    assert moe_gemm.kernel_family(FAMILY, "h100-sxm-80gb", "mxfp4") == OAI
    assert moe_gemm.kernel_family(FAMILY, "h200-sxm-141gb", "mxfp4") == OAI
    assert moe_gemm.kernel_family(FAMILY, "a100-sxm-80gb", "mxfp4") == "marlin-moe-int4-proxy"
    # the OAI Triton tables time gpt-oss-20b's 32 experts; the int4 Marlin table does not
    assert moe_gemm.curve_for(OAI, "h100-sxm-80gb", "mxfp4", 32, 2880)
    assert moe_gemm.curve_for(OAI, "h100-sxm-80gb", "mxfp4", 16, 2880) == ()
    assert moe_gemm.curve_for("marlin-moe-int4-proxy", "a100-sxm-80gb", "mxfp4", 32,
                              2880) == ()
    # bf16 tables keep 128: Mixtral's 8 and Qwen1.5-MoE's 60 experts stay dense
    assert moe_gemm.curve_for(FAMILY, "h100-sxm-80gb", "bfloat16", 60, 1408) == ()
    # no gpt-oss shape at ≤ 256 columns (TP 16): dense rate
    assert moe_gemm.curve_for(OAI, "h100-sxm-80gb", "mxfp4", 128, 180) == ()
    # no EP table: expert-parallel layouts keep the dense rate
    assert moe_gemm.curve_for_layout(OAI, "h100-sxm-80gb", "mxfp4", 128, 2880,
                                     tp=1, group=8, ep=8) == ()
    # MXFP4 weights: 4.25 bits read per weight (ridge_tokens)
    assert moe_gemm.expert_weight_bytes("mxfp4", "bfloat16") == pytest.approx(0.53125)


def _gpt_oss(model: str, gpu: str, engine: str = "vllm",
             version: str = "0.12.0") -> perf.PerfContext:
    m = resolve_model(model)
    return perf.context_for(m, resolve_gpu(gpu), engine, version, tp=1, dtype="bfloat16",
                            quant=m.quantization)


def test_vllm_before_0_12_runs_marlin_on_hopper() -> None:
    """vLLM 0.10.x / 0.11.x wheels ship no triton_kernels: get_mxfp4_backend falls to Marlin
    on Hopper; from 0.12.0 the wheel bundles it (Triton). The Marlin proxy: vLLM 0.14.0's
    fused_marlin_moe with int4 weights, aiconfigurator 095f58a5
    h100_sxm/moe/vllm/0.14.0/moe_perf.parquet, kernel_source vllm_marlin_moe, int4_wo."""
    for version, family in (("0.10.2", "vllm-marlin-int4-proxy"),
                            ("0.11.0", "vllm-marlin-int4-proxy"), ("0.12.0", OAI),
                            ("0.33.0", OAI)):
        ctx = _gpt_oss("openai/gpt-oss-120b", "h100-sxm-80gb", version=version)
        assert ctx.expert_gemm_key == (family, "h100-sxm-80gb", "mxfp4"), version
    old = _gpt_oss("openai/gpt-oss-120b", "h100-sxm-80gb", version="0.10.2")
    assert old.expert_gemm_table == "vLLM 0.14.0 Marlin int4 (proxy for MXFP4 Marlin), TP-split"
    assert "proxy for its MXFP4 Marlin MoE" in old.expert_gemm_source
    # a hand-worked row of that table: hidden 4096, inter 1536, 128 experts, top-8, moe_tp 1,
    # EP 1, power_law_1.01, 4096 tokens (t = 256): 5.21447 ms; the dense bf16 8192 × 4096 ×
    # 4096 GEMM (h100_sxm/gemm/vllm/0.14.0, vllm_default): 0.335714 ms
    one_shape = (6 * 4096 * 1536 * 4096 * 8 / 5.21447e-3) / (2 * 8192 * 4096 * 4096
                                                             / 0.335714e-3)
    assert one_shape == pytest.approx(0.2897, abs=5e-4)
    # gpt-oss-120b's 2880 columns read the > 768 band: at t = 256 within 5 % of that row,
    # and slower than the OAI Triton kernel (0.504)
    marlin = moe_gemm.ratio(old.expert_gemm_curve, 256)
    assert abs(marlin - one_shape) / one_shape < 0.05 and marlin < 0.504
    # no 32-expert shape in the int4 Marlin table: gpt-oss-20b keeps the dense rate there
    small = _gpt_oss("openai/gpt-oss-20b", "h100-sxm-80gb", version="0.11.0")
    assert small.expert_gemm_curve == () and small.expert_gemm_source == moe_gemm.DENSE_RATE
    # the release route is MXFP4-only: bf16 experts keep the Triton fused_moe table
    assert moe_gemm.kernel_family(FAMILY, "h100-sxm-80gb", "bfloat16", (0, 10, 2)) == FAMILY
    assert moe_gemm.kernel_family(FAMILY, "a100-sxm-80gb", "mxfp4",
                                  (0, 10, 2)) == "marlin-moe-int4-proxy"


def test_gpt_oss_contexts_read_the_mxfp4_tables() -> None:
    ctx = _gpt_oss("openai/gpt-oss-120b", "h100-sxm-80gb")
    assert ctx.expert_gemm_key == (OAI, "h100-sxm-80gb", "mxfp4")
    assert ctx.expert_gemm_table == "vLLM 0.24.0 OAI Triton MXFP4, TP-split"
    assert ctx.expert_gemm_curve == moe_gemm.CURVES[ctx.expert_gemm_key][2]
    # ridge: 989.4 TFLOP/s × 0.53125 B / (2 × 3.35 TB/s) = 78.4 tokens per expert
    assert ctx.expert_gemm_floor_tokens == pytest.approx(989.4 * 0.53125 / 6.7, rel=1e-3)
    small = _gpt_oss("openai/gpt-oss-20b", "h100-sxm-80gb")
    assert small.expert_gemm_curve == ctx.expert_gemm_curve
    a100 = _gpt_oss("openai/gpt-oss-120b", "a100-sxm-80gb")
    assert "proxy" in a100.expert_gemm_source and a100.expert_gemm_curve
    # gpt-oss-20b on A100 (32 experts: no Marlin table times them), SGLang on Hopper, GB200
    # (no table in the set): the dense rate
    for c in (_gpt_oss("openai/gpt-oss-20b", "a100-sxm-80gb"),
              _gpt_oss("openai/gpt-oss-120b", "gb200", "sglang"),
              _gpt_oss("openai/gpt-oss-120b", "h100-sxm-80gb", "sglang")):
        assert c.expert_gemm_curve == () and c.expert_gemm_source == moe_gemm.DENSE_RATE
    # --- bwmxfp4 --- B200: vLLM's FlashInfer TRT-LLM-gen MXFP4 × BF16 table; SGLang's and
    # TensorRT-LLM's MXFP4 × MXFP8 tables
    for engine, version, key in (
            ("vllm", "0.12.0", (FI_BF16, "b200", "mxfp4")),
            ("sglang", "0.5.8.post1", (SGL_MXFP8, "b200", "mxfp4_mxfp8")),
            ("trtllm", "1.2.0", (TRT_MXFP8, "b200", "mxfp4_mxfp8"))):
        c = _gpt_oss("openai/gpt-oss-120b", "b200", engine, version)
        assert c.expert_gemm_key == key and c.expert_gemm_curve == moe_gemm.CURVES[key][2]


# --- bwmxfp4 --- gpt-oss's MXFP4 experts on Blackwell: the engine kernel's GEMM dtype and
# vLLM's FlashInfer TRT-LLM MXFP4 × BF16 table (docs/moe-gemm.md, "On FP4-capable GPUs")

FI_BF16 = "vllm-flashinfer-trtllm-mxfp4-bf16"
SGL_MXFP8 = "sglang-flashinfer-mxfp4-mxfp8"
TRT_MXFP8 = "trtllm-gen-mxfp4-mxfp8"


def test_mxfp4_mxfp8_b200_hand_worked() -> None:
    """MXFP4 × MXFP8 experts over the same table set's dense fp8 GEMM, aiconfigurator
    095f58a5, b200_sxm, w4a8_mxfp4_mxfp8, power_law_1.01, moe_tp 1, EP 1, hidden = inter =
    2880, top-4, 128 experts, 8192 tokens (t = 256):
    SGLang 0.5.14 moe/sglang/0.5.14/moe_perf.parquet, sglang_flashinfer_trtllm_moe: 0.944988
    ms; gemm/sglang/0.5.14/gemm_perf.parquet, sglang_sgl_kernel_fp8_scaled_mm, fp8, m 8192,
    n 4096, k 4096: 0.13158 ms.
    TensorRT-LLM 1.3.0rc10 moe/trtllm/1.3.0rc10/moe_perf.parquet, moe_torch_flow: 1.227232 ms;
    gemm/trtllm/1.3.0rc10/gemm_perf.parquet, torch_flow, fp8, 8192 × 4096 × 4096: 0.143687 ms."""
    flops = 6 * 2880 * 2880 * 8192 * 4  # 1.6307e12
    dense_sgl = 2 * 8192 * 4096 * 4096 / 0.13158e-3  # 2089 TFLOP/s
    dense_trt = 2 * 8192 * 4096 * 4096 / 0.143687e-3  # 1913 TFLOP/s
    sgl = flops / 0.944988e-3 / dense_sgl  # 1726 TFLOP/s: 0.826
    trt = flops / 1.227232e-3 / dense_trt  # 1329 TFLOP/s: 0.695
    assert sgl == pytest.approx(0.826, abs=1e-3) and trt == pytest.approx(0.695, abs=1e-3)
    # the > 768 band at t = 256 (medians over shapes and over the dense rows: 0.877, 0.736)
    for family, one_shape in ((SGL_MXFP8, sgl), (TRT_MXFP8, trt)):
        curve = moe_gemm.curve_for(family, "b200", "mxfp4_mxfp8", 128, 2880)
        assert abs(moe_gemm.ratio(curve, 256) - one_shape) / one_shape < 0.1
    # TensorRT-LLM's table times moe_tp 1 only: TP 4 / 8 shards keep the dense rate
    assert moe_gemm.curve_for(TRT_MXFP8, "b200", "mxfp4_mxfp8", 128, 720) == ()
    assert moe_gemm.kernel_family("sglang-triton-fused-moe", "b200", "mxfp4_mxfp8") == SGL_MXFP8
    assert moe_gemm.kernel_family("trtllm-cutlass-moe", "b200", "mxfp4_mxfp8") == TRT_MXFP8
    # the kernel dtype: a real MXFP4 checkpoint's experts in FP8 → mxfp4_mxfp8; a what-if not
    assert moe_gemm.moe_kernel_dtype("fp8", "mxfp4", False) == "mxfp4_mxfp8"
    assert moe_gemm.moe_kernel_dtype("fp8", "mxfp4", False, what_if=True) == ""
    assert moe_gemm.expert_weight_bytes("mxfp4_mxfp8", "fp8") == pytest.approx(0.53125)


def test_mxfp4_flashinfer_bf16_b200_hand_worked() -> None:
    """aiconfigurator 095f58a5, b200_sxm/moe/vllm/0.24.0/moe_perf.parquet, kernel_source
    vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16_trtllmmxfp4expertsmonolithic,
    w4a16_mxfp4, power_law_1.01, moe_tp 1, EP 1, hidden = inter = 2880, top-4:
    128 experts, 8192 tokens (t = 256): 3.241824 ms; 32 experts, 2048 tokens (t = 256):
    0.823667 ms. b200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet, torch.nn.functional.linear,
    bfloat16, m 8192, n 4096, k 4096: 0.163401 ms."""
    moe_120b = 6 * 2880 * 2880 * 8192 * 4 / 3.241824e-3  # 503.0 TFLOP/s
    moe_20b = 6 * 2880 * 2880 * 2048 * 4 / 0.823667e-3  # 495.0 TFLOP/s
    dense = 2 * 8192 * 4096 * 4096 / 0.163401e-3  # 1682 TFLOP/s
    assert moe_120b / dense == pytest.approx(0.299, abs=1e-3)
    assert moe_20b / dense == pytest.approx(0.294, abs=1e-3)
    # the > 768 band at t = 256: the median of four shapes over the median dense bf16 rate
    # (1524 TFLOP/s); this shape over that median: 503.0 / 1524 = 0.330
    for experts, one_shape in ((128, moe_120b / dense), (32, moe_20b / dense)):
        curve = moe_gemm.curve_for(FI_BF16, "b200", "mxfp4", experts, 2880)
        assert abs(moe_gemm.ratio(curve, 256) - one_shape) / one_shape < 0.1
    assert moe_gemm.ratio(moe_gemm.curve_for(FI_BF16, "b200", "mxfp4", 128, 2880),
                          256) == pytest.approx(0.319)
    assert moe_gemm.kernel_family(FAMILY, "b200", "mxfp4") == FI_BF16
    # GB200 has no such table in the set: the dense rate
    assert moe_gemm.kernel_family(FAMILY, "gb200", "mxfp4") == FAMILY
    assert (FAMILY, "gb200", "mxfp4") not in moe_gemm.CURVES


def test_mxfp4_expert_dtype_per_engine_on_blackwell() -> None:
    """What each engine's default MXFP4 MoE kernel computes gpt-oss's experts in on SM100:
    vLLM FlashInfer TRT-LLM-gen MXFP4 × BF16 (vllm/model_executor/layers/fused_moe/oracle/
    mxfp4.py _get_priority_backends: "Only includes BF16 backends. MXFP8 backends are
    selected via env vars"); SGLang MXFP8 activations (python/sglang/srt/layers/quantization/
    mxfp4.py Mxfp4MoEMethod.apply: flashinfer_mxfp4_moe_precision "default" →
    mxfp8_quantize); TensorRT-LLM W4A8_MXFP4_MXFP8 (tensorrt_llm/_torch/model_config.py
    get_mxfp4_quant_algo: get_sm_version() >= 100). The other layers of the checkpoint are
    bf16 (modules_to_not_convert: everything but the experts)."""
    m = resolve_model("openai/gpt-oss-120b")
    b200, mi355x = resolve_gpu("b200"), resolve_gpu("mi355x")
    assert perf.compute_dtype_for("bfloat16", m.quantization, b200) == "bfloat16"
    for engine, dtype in (("vllm", "bfloat16"), ("sglang", "fp8"), ("trtllm", "fp8")):
        got, note = perf.expert_dtype_for("bfloat16", m.quantization, b200, engine)
        assert got == dtype and f"expert GEMMs in {dtype}" in note
    # CDNA4: vLLM's ROCm backends (CK, Triton) are BF16-activation ones in the same priority
    # list; SGLang's AITER path is not verified there: FP4, said to be assumed
    assert perf.expert_dtype_for("bfloat16", m.quantization, mi355x, "vllm")[0] == "bfloat16"
    got, note = perf.expert_dtype_for("bfloat16", m.quantization, mi355x, "sglang")
    assert got == "fp4" and "assumed" in note
    # off FP4 GPUs the experts run in the compute dtype, with nothing to say
    assert perf.expert_dtype_for("bfloat16", m.quantization, H100, "sglang") == ("bfloat16", "")
    # an NVFP4 checkpoint still runs every quantized layer in FP4
    nvfp4 = QuantSpec(method="nvfp4", weight_bits=4, group_size=16, source="checkpoint")
    assert perf.compute_dtype_for("bfloat16", nvfp4, b200) == "fp4"
    assert perf.expert_dtype_for("fp4", nvfp4, b200, "vllm") == ("fp4", "")


def test_mxfp4_experts_at_the_engine_dtype_rate_by_hand() -> None:
    """TensorRT-LLM, gpt-oss-120b on GB200 (no table in the set: dense rate): a prefill-only
    step of 8192 tokens charges the dense layers at the bf16 peak (2500 TFLOP/s) and the
    routed experts at the fp8 peak (5000), each × the same efficiency (1.0 here, class
    factor 1)."""
    m = resolve_model("openai/gpt-oss-120b")
    ctx = perf.context_for(m, resolve_gpu("gb200"), "trtllm", "1.2.0", tp=1, dtype="bfloat16",
                           quant=m.quantization)
    ctx = dataclasses.replace(ctx, coefficients=UNIT, gemm_scale=1.0, expert_gemm_scale=1.0,
                              cpu_overlap=False)
    assert ctx.expert_gemm_curve == ()
    assert ctx.compute_dtype == "bfloat16" and ctx.expert_compute_dtype == "fp8"
    assert perf.expert_rate_scale(ctx) == pytest.approx(2.0)
    t = perf.step_terms(ctx, decode_seqs=0, context_tokens=0, prefill_tokens=8192)
    hand = 8192 * (ctx.dense_flops_per_token / 2500e12 + ctx.expert_flops_per_token / 5000e12)
    assert t.compute_s == pytest.approx(hand, rel=1e-9)


def test_deepep_low_latency_decode_reads_the_generation_rows() -> None:
    """h100_sxm/moe/sglang/0.5.10/wideep_generation_moe_perf.parquet (aiconfigurator 095f58a5),
    moe_ep_size 32, uniform, num_tokens 4096 (128 per rank): 0.161843 ms. t = 4096 × 8 / 256 =
    128; one GPU 6 × 7168 × 2048 × 4096 × 8 / 32 = 90.2 GFLOP → 557.3 TFLOP/s over SGLang
    0.5.10's dense fp8 939 TFLOP/s = 0.594. Decode steps behind DeepEP's low-latency kernels
    read it at EP 32-63; prefill steps (and EP 16, where no generation row reaches t = 128)
    read the context curve; without low-latency decode there is no decode curve."""
    rate = 6 * 7168 * 2048 * 4096 * 8 / 32 / 0.161843e-3
    assert rate / 939e12 == pytest.approx(0.594, abs=0.001)
    key = ("sglang-deepgemm-moe", "h100-sxm-80gb", "fp8_block")
    assert moe_gemm.decode_curve_for_layout(*key, 256, 32) == ((128, 0.594),)
    assert moe_gemm.decode_curve_for_layout(*key, 256, 72)[-1] == (256, 0.874)
    assert moe_gemm.decode_curve_for_layout(*key, 256, 16) == ()
    from kvplan.perf import expert

    base = _deepseek_r1_b200("sglang", 1, "h200-sxm-141gb", "0.5.10")
    m = resolve_model("deepseek-ai/DeepSeek-R1")
    quant = QuantSpec(method="fp8", block_size=(128, 128), source="checkpoint")
    ll = expert.apply(base, m, dtype="fp8", quant=quant, dp=32, ep=32, moe_dp=True,
                      all_to_all=True, node_dedup=True, decode_low_latency=True)
    assert ll.expert_gemm_decode_curve == ((128, 0.686),)
    assert ll.expert_gemm_curve == ((128, 0.224), (256, 0.414), (512, 0.592))
    normal = expert.apply(base, m, dtype="fp8", quant=quant, dp=32, ep=32, moe_dp=True,
                          all_to_all=True, node_dedup=True, decode_low_latency=False)
    assert normal.expert_gemm_decode_curve == ()
    # the step model: a decode step's expert time at 0.686, a prefill step's at its curve
    unit = dataclasses.replace(ll, coefficients=UNIT, moe_comm_per_token_s=0.0,
                               moe_comm_fixed_s=0.0, moe_comm_decode_per_token_s=0.0)
    flat = dataclasses.replace(unit, expert_gemm_curve=((128, 0.686),))
    assert perf.step_terms(unit, decode_seqs=256, context_tokens=1000) \
        == perf.step_terms(flat, decode_seqs=256, context_tokens=1000)
    assert perf.step_terms(unit, decode_seqs=0, context_tokens=0, prefill_tokens=4096,
                           prefill_context_tokens=2048) \
        != perf.step_terms(flat, decode_seqs=0, context_tokens=0, prefill_tokens=4096,
                           prefill_context_tokens=2048)


# --- fimoe --- FlashInfer's CUTLASS MoE (vLLM's FP8 block-scaled experts with EP on Hopper)

def test_flashinfer_cutlass_ep8_hand_worked() -> None:
    """aiconfigurator 095f58a5 h200_sxm/moe/vllm/0.24.0/moe_perf.parquet, kernel_source
    vllm_fp8moe_flashinfer_cutlass_flashinferexperts, fp8_block, moe_tp 1, moe_ep_size 8,
    balanced, t = num_tokens × topk / num_experts = 256 (13 fine-grained shapes reach it; the median
    over them is the curve). The shapes next to the median: hidden 3072 / inter 1536 / 256
    experts / top-8 at 8192 tokens in 0.596693 ms, and hidden 4096 / inter 1536 / 128 experts
    / top-8 at 4096 tokens in 0.356971 ms; one GPU does 1/8 of 6 × hidden × inter × tokens ×
    topk. Over the same release's dense per-tensor fp8 median 917 TFLOP/s (h200_sxm/gemm/vllm/
    0.24.0, CutlassFP8ScaledMMLinearKernel, e.g. 8192 × 4096 × 4096 in 0.25233 ms: 1089
    TFLOP/s): 0.424 and 0.472, which bracket the curve's 0.466."""
    lo = 6 * 3072 * 1536 * 8192 * 8 / 8 / 0.596693e-3 / 917e12
    hi = 6 * 4096 * 1536 * 4096 * 8 / 8 / 0.356971e-3 / 917e12
    assert lo == pytest.approx(0.424, abs=0.001) and hi == pytest.approx(0.472, abs=0.001)
    curve = moe_gemm.curve_for_layout("vllm-flashinfer-cutlass-moe", "h200-sxm-141gb",
                                      "fp8_block", 256, 2048, tp=1, group=8, ep=8)
    assert lo < moe_gemm.ratio(curve, 256) < hi
    assert moe_gemm.ratio(curve, 256) == pytest.approx(0.466)


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "h200-sxm-141gb"])
def test_vllm_0_16_tp_split_reads_flashinfer_cutlass_by_proxy(gpu: str) -> None:
    """vLLM 0.15.0 and 0.16.0 run FlashInfer CUTLASS at every layout (select_fp8_moe_backend's
    first supported backend): -tp 8 reads its EP-8 curve, a stated proxy; 0.17.0 and the
    default keep the Triton table at -tp 8 ("prefer Triton for TP")."""
    ep8 = dict(moe_gemm.EP_CURVES[("vllm-flashinfer-cutlass-moe", gpu, "fp8_block")])[8]
    for version in ("0.15.0", "0.16.0"):
        ctx = _deepseek_r1_b200("vllm", 8, gpu, version)
        assert ctx.expert_gemm_curve == ep8
        assert ctx.expert_gemm_table.endswith("TP-split") and "proxy" in ctx.expert_gemm_source
    for version in ("0.17.0", "0.33.0"):
        assert _deepseek_r1_b200("vllm", 8, gpu, version).expert_gemm_table \
            == "vLLM 0.14.0, TP-split"


# --- dgpad --- vLLM's DeepGEMM experts compute whole blocks sized for the worst case


def test_deepgemm_padded_rows_hand_worked() -> None:
    """vLLM deep_gemm_utils.py: M_sum = round_up(M × top_k + local experts × 127, 128). 16
    decode tokens × top-8 over 128 experts: 128 + 16,256 = 16,384 rows, 128 blocks, every one
    computed in 0.12 ("all"). From 0.13 ("routed") only the halves of blocks that hold routed
    rows: 16 tokens reach 128 · (1 − (120/128)^16) = 82.4 experts, one 64-row half each.
    With EP 2 (no DP) the sizing runs over the rank's 64 experts: 128 + 64 · 127 → 8,320."""
    assert moe_gemm.padded_rows("all", 128, 128, 128, 82.4) == 16384
    assert moe_gemm.padded_rows("all", 129, 128, 129, 82.4) == 16384 + 128  # a block more
    assert moe_gemm.padded_rows("all", 128, 64, 64, 41.2) == 8320
    touched = 128 * (1 - (120 / 128) ** 16)
    assert touched == pytest.approx(82.4, abs=0.05)
    assert moe_gemm.padded_rows("routed", 128, 128, 128, touched) == pytest.approx(touched * 64)
    # a prefill step of 8,192 tokens: 65,536 routed rows, the last half of each expert's rows
    # half full on average: 65,536 + 128 × 32
    assert moe_gemm.padded_rows("routed", 65536, 128, 65536, 128) == 65536 + 128 * 32
    assert moe_gemm.padded_rows("", 128, 128, 128, touched) == 128


def test_deepgemm_rows_by_vllm_release() -> None:
    """0.11.0: DeepGEMM from 128 tokens (its Hopper E8M0 switch off: smaller steps run
    Triton); 0.11.1-0.12.x every step, every block; 0.13-0.14 the routed halves; 0.15+
    FlashInfer's CUTLASS MoE or Triton: no padding."""
    dg = "vllm-deepgemm-moe"
    assert moe_gemm.deepgemm_rows(dg, (0, 11, 0)) == ("all", 128)
    assert moe_gemm.deepgemm_rows(dg, (0, 11, 2)) == ("all", 0)
    assert moe_gemm.deepgemm_rows(dg, (0, 12, 0)) == ("all", 0)
    assert moe_gemm.deepgemm_rows(dg, (0, 13, 0)) == ("routed", 0)
    assert moe_gemm.deepgemm_rows(dg, (0, 14, 1)) == ("routed", 0)
    assert moe_gemm.deepgemm_rows(dg, (0, 15, 0)) == ("", 0)
    assert moe_gemm.deepgemm_rows(dg, (0, 10, 2)) == ("", 0)
    assert moe_gemm.deepgemm_rows(dg, None) == ("", 0)
    assert moe_gemm.deepgemm_rows(FAMILY, (0, 12, 0)) == ("", 0)  # the Triton kernel


def _qwen235b_fp8(version: str, tp: int) -> perf.PerfContext:
    m = resolve_model("Qwen/Qwen3-235B-A22B-FP8")
    return perf.context_for(m, resolve_gpu("h200-sxm-141gb"), "vllm", version, tp=tp,
                            quant=m.quantization)


def test_vllm_deepgemm_contexts_pad_their_rows() -> None:
    """Qwen3-235B-A22B-FP8 (block-scaled FP8) on H200: vLLM 0.12 at TP 2 and 4 runs DeepGEMM
    (MoE TP < 8) and pads every block; 0.14 the routed halves; at TP 8 0.12 runs Triton and
    0.16 FlashInfer's CUTLASS MoE: no padding. With --enable-expert-parallel (EP = TP, no DP)
    the sizing runs over the rank's own experts; with DP (an all-to-all) it is not read."""
    assert _qwen235b_fp8("0.12.0", 2).expert_padding == ("all", 0, 128)
    assert _qwen235b_fp8("0.12.0", 4).expert_padding == ("all", 0, 128)
    assert _qwen235b_fp8("0.14.0", 4).expert_padding == ("routed", 0, 128)
    assert _qwen235b_fp8("0.11.0", 4).expert_padding == ("all", 128, 128)
    assert _qwen235b_fp8("0.12.0", 8).expert_padding == ()
    assert _qwen235b_fp8("0.16.0", 4).expert_padding == ()
    m = resolve_model("Qwen/Qwen3-235B-A22B-FP8")
    h200 = resolve_gpu("h200-sxm-141gb")
    _, ep = plan_with_context(m, h200, engine="vllm", engine_version="0.12.0",
                              tensor_parallel_size=2, enable_expert_parallel=True)
    assert ep is not None and ep.expert_padding == ("all", 0, 64)
    _, dp = plan_with_context(m, h200, engine="vllm", engine_version="0.12.0",
                              tensor_parallel_size=1, data_parallel_size=2,
                              enable_expert_parallel=True)
    assert dp is not None and dp.expert_padding == ()


def test_padded_decode_step_charges_every_block_at_the_kernel_rate() -> None:
    """vLLM 0.12 at TP 2, its curve left out (the dense rate, ratio 1): a 16-sequence decode
    step computes 16,384 expert rows where 128 are routed, so its compute grows by
    (16,384 / 128 − 1) × the routed experts' FLOPs at the dense rate, and the step turns
    compute-bound (at half the datasheet FLOP rate, about what the engines' fitted efficiency
    is); the same step with the routed rows only is byte-bound."""
    half = dataclasses.replace(UNIT, gemm_efficiency=0.5)
    ctx = dataclasses.replace(_qwen235b_fp8("0.12.0", 2), coefficients=half,
                              expert_gemm_curve=())
    plain = dataclasses.replace(ctx, expert_padding=())
    t = perf.step_terms(ctx, decode_seqs=16, context_tokens=1024)
    u = perf.step_terms(plain, decode_seqs=16, context_tokens=1024)
    rate = ctx.peak_flops_per_s * 0.5 * ctx.gemm_scale
    extra = 16 * ctx.expert_flops_per_token * (16384 / 128 - 1) / rate
    # decode attention stays on the bandwidth side
    assert t.attention_flops / (ctx.attention_peak_flops_per_s * 0.5 * ctx.attention_scale) \
        < t.kv_bytes / (ctx.bandwidth_bytes_per_s * ctx.bandwidth_scale)
    assert t.compute_s == pytest.approx(t.gemm_flops / rate + extra, rel=1e-9)
    assert t.gemm_flops == u.gemm_flops  # FLOPs counted are the routed ones: padding is time
    assert t.bound == "compute" and u.bound == "bandwidth"
    # 4 sequences: the same 16,384 rows (M_sum is sized for every expert), so the same time
    four = perf.step_terms(ctx, decode_seqs=4, context_tokens=1024)
    assert four.compute_s == pytest.approx(
        (four.gemm_flops + 4 * ctx.expert_flops_per_token * (16384 / 32 - 1)) / rate, rel=1e-9)
    # 0.11.0 runs Triton below 128 step tokens: no padding at decode
    old = dataclasses.replace(ctx, expert_padding=("all", 128, 128))
    assert perf.step_terms(old, decode_seqs=16, context_tokens=1024).compute_s == u.compute_s


def test_the_plan_says_when_the_experts_pad_their_rows(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """plan JSON performance.routed_experts.padding names the padding and its buffer (vLLM
    0.12, TP 2: all 128 experts); null on the default release (no DeepGEMM padding); the text
    and the report print it."""
    import json

    from clirun import run

    from kvplan.api import plan
    from kvplan.render import report as rep

    args = ["plan", "Qwen/Qwen3-235B-A22B-FP8", "--gpu", "h200", "-tp", "2",
            "--max-model-len", "4096"]
    code, out, _ = run(capsys, *args, "--engine-version", "0.12.0", "--json")
    padding = json.loads(out)["performance"]["routed_experts"]["padding"]
    assert code == 0 and "every 128-row block" in padding and "all 128 experts" in padding
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0 and json.loads(out)["performance"]["routed_experts"]["padding"] is None
    assert "a decode step costs about the same at any batch" in padding
    code, out, _ = run(capsys, *args, "--engine-version", "0.13.0")
    text = " ".join(out.split())
    assert code == 0 and "routed experts' rows in 64-row halves" in text
    assert "at least 64 rows for every expert a step reaches" in text
    assert "at any batch" not in text  # from 0.13 the cost follows the experts reached
    p = plan("Qwen/Qwen3-235B-A22B-FP8", "h200", tensor_parallel_size=2, max_model_len=4096,
             engine_version="0.12.0")
    assert p.performance is not None and p.performance.routed_experts is not None
    assert f"{p.performance.routed_experts.padding}." in rep._assumptions(p)


def test_padded_blocks_run_at_their_own_measured_rate() -> None:
    """vLLM 0.12 at TP 4 reads the DeepGEMM curve at EP 4 (TP_AS_EP: (128, 0.569), ...). Its
    padded blocks hold 128 rows each (16,384 rows over 128 experts), computed whatever the
    tokens: the curve at t = 128 (0.569, the kernel timed at 128 rows an expert), not held at
    the GPU's ridge point as a weight-bound decode step's routed rows are."""
    half = dataclasses.replace(UNIT, gemm_efficiency=0.5)
    ctx = dataclasses.replace(_qwen235b_fp8("0.12.0", 4), coefficients=half)
    assert ctx.expert_gemm_curve[0] == (128, 0.569)
    assert ctx.expert_gemm_floor_tokens > 128  # the H200's fp8 ridge: 1979 / (2 × 4.8)
    t = perf.step_terms(ctx, decode_seqs=16, context_tokens=1024)
    rate = ctx.peak_flops_per_s * 0.5 * ctx.gemm_scale
    expert = 16 * ctx.expert_flops_per_token
    assert t.compute_s == pytest.approx(
        (t.gemm_flops - expert) / rate + expert * (16384 / 128) / (rate * 0.569), rel=1e-9)
