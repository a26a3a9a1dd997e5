"""Which expert kernel vLLM runs behind its DeepEP all2all backends for FP8 block-scaled
experts on Hopper (issues #24 / #27, docs/moe-gemm.md "vLLM behind DeepEP"), pinned per
release from the released wheels' sources (vllm/model_executor/layers/fused_moe/):

* deepep_high_throughput: DeepEPHTPrepareAndFinalize gives the standard activation format
  (config.py use_batched_activation_format: deepep_low_latency / pplx / nixl_ep only), and
  oracle/fp8.py select_fp8_moe_backend's first supporting backend is FLASHINFER_CUTLASS
  (0.15.0, 0.16.0: first in AVAILABLE_BACKENDS that takes block FP8 on SM90; 0.17.0, 0.20.0,
  0.24.0, 0.33.0: _get_priority_backends "On Hopper for Block Fp8, prefer ... FI CUTLASS for
  EP"), FlashInferExperts.activation_format Standard → FlashInfer's CUTLASS MoE.
* deepep_low_latency: batched format; every standard-format experts class is turned down
  (modular_kernel.py is_supported_config), so BATCHED_DEEPGEMM (BatchedDeepGemmExperts,
  DeepGEMM's fp8_m_grouped_gemm_nt_masked) runs; 0.33.0's BatchedHummingGroupedExperts, listed
  before it, is turned down under EP (fused_humming_moe.py get_humming_moe_gemm_type:
  grouped_contiguous when use_ep, the batched class is grouped_masked).
* 0.14.0 (docs/moe-gemm.md's earlier reading): DeepGEMM behind both.

The tables kvplan has: vLLM 0.24.0's FlashInfer CUTLASS EP rows (a proxy behind DeepEP: timed
without an all2all) and SGLang 0.5.10's DeepEP MoE rows (DeepGEMM; a proxy for vLLM's).
"""

from __future__ import annotations

import pytest

from kvplan.perf import expert
from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model
from kvplan.specs import QuantSpec

FI_DEEPEP = "vLLM 0.24.0 FlashInfer CUTLASS MoE (proxy behind DeepEP high-throughput), EP 8"
DEEPGEMM = "SGLang 0.5.10 DeepEP MoE (DeepGEMM; proxy for vLLM's DeepGEMM experts), EP 8"

# release → (high-throughput kernel's table, low-latency kernel's table), from the reading above
ROUTES = {
    "0.14.0": (DEEPGEMM, DEEPGEMM),
    "0.15.0": (FI_DEEPEP, DEEPGEMM),
    "0.16.0": (FI_DEEPEP, DEEPGEMM),
    "0.17.0": (FI_DEEPEP, DEEPGEMM),
    "0.20.0": (FI_DEEPEP, DEEPGEMM),
    "0.24.0": (FI_DEEPEP, DEEPGEMM),
    "0.33.0": (FI_DEEPEP, DEEPGEMM),
}
# the rows each table has at EP 8, t = 128 / 256 / 512 (docs/moe-gemm.md: FlashInfer CUTLASS
# "EP" lines, balanced routing, over vLLM 0.24.0's dense fp8 rate; DeepGEMM context rows,
# uniform routing, over SGLang 0.5.10's)
EP8_ROWS = {
    ("h100-sxm-80gb", FI_DEEPEP): ((128, 0.381), (256, 0.452), (512, 0.43)),
    ("h200-sxm-141gb", FI_DEEPEP): ((128, 0.406), (256, 0.466), (512, 0.437)),
    ("h100-sxm-80gb", DEEPGEMM): ((128, 0.433), (256, 0.715), (512, 0.948)),
    ("h200-sxm-141gb", DEEPGEMM): ((128, 0.475), (256, 0.756), (512, 0.953)),
}


def _r1_deepep(gpu: str, version: str, *, low_latency: bool) -> perf.PerfContext:
    """DeepSeek-R1 (block FP8) -tp 1 -dp 8 --enable-expert-parallel behind DeepEP."""
    quant = QuantSpec(method="fp8", block_size=(128, 128), source="checkpoint")
    m = resolve_model("deepseek-ai/DeepSeek-R1")
    base = perf.context_for(m, resolve_gpu(gpu), "vllm", version, tp=1, quant=quant)
    return expert.apply(base, m, dtype="fp8", quant=quant, dp=8, ep=8, moe_dp=True,
                        all_to_all=True, node_dedup=True, decode_low_latency=low_latency)


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "h200-sxm-141gb"])
@pytest.mark.parametrize("version", sorted(ROUTES))
def test_vllm_deepep_reads_the_table_of_the_kernel_it_runs(gpu: str, version: str) -> None:
    ht_table, ll_table = ROUTES[version]
    ht = _r1_deepep(gpu, version, low_latency=False)
    assert ht.expert_gemm_table == ht_table
    assert ht.expert_gemm_curve == EP8_ROWS[(gpu, ht_table)]
    assert "proxy" in ht.expert_gemm_source
    ll = _r1_deepep(gpu, version, low_latency=True)
    assert ll.expert_gemm_table == ll_table
    assert ll.expert_gemm_curve == EP8_ROWS[(gpu, ll_table)]
    # below EP 32 no masked (generation) row reaches t = 128: decode reads the context curve
    assert ll.expert_gemm_decode_curve == ()


def test_vllm_deepep_high_throughput_on_b200_keeps_the_dense_rate() -> None:
    """B200 was not read (DeepEP v2 moves FlashInfer TRT-LLM-gen first on SM100 in 0.33.0) and
    no B200 table times vLLM's block-FP8 experts: the dense rate, said so."""
    for low_latency in (False, True):
        ctx = _r1_deepep("b200", "0.33.0", low_latency=low_latency)
        assert ctx.expert_gemm_curve == () and ctx.expert_gemm_table == ""
        assert "extrapolated" in ctx.expert_gemm_source
