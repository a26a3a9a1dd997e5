"""vLLM 0.33.0 (kvplan's default) behind DeepEP on 8 × H200: high-throughput runs FlashInfer's
CUTLASS MoE (oracle/fp8.py _get_priority_backends: FI CUTLASS first for block FP8 with EP on
SM90; DeepEP HT's standard activation format, which FlashInferExperts takes), low-latency
DeepGEMM's masked grouped GEMM (BatchedDeepGemmExperts: the batched format turns down every
standard-format backend). docs/moe-gemm.md, "vLLM behind DeepEP"."""

from __future__ import annotations

from kvplan import plan

R1 = "deepseek-ai/DeepSeek-R1"
LAYOUT = dict(engine="vllm", tensor_parallel_size=1, data_parallel_size=8,
              enable_expert_parallel=True, offline=True)


def test_deepseek_r1_deepep_high_throughput_reads_flashinfer_cutlass() -> None:
    p = plan(R1, "h200", moe_a2a_backend="deepep_high_throughput", **LAYOUT)
    assert p.performance is not None and p.performance.routed_experts is not None
    re = p.performance.routed_experts
    assert re.rate == "measured"
    assert re.table == ("vLLM 0.24.0 FlashInfer CUTLASS MoE (proxy behind DeepEP "
                        "high-throughput), EP 8")
    assert "DeepEP high-throughput" in re.source and "h200-sxm-141gb" in re.source


def test_deepseek_r1_deepep_low_latency_reads_deepgemm() -> None:
    p = plan(R1, "h200", moe_a2a_backend="deepep_low_latency", **LAYOUT)
    assert p.performance is not None and p.performance.routed_experts is not None
    re = p.performance.routed_experts
    assert re.table == ("SGLang 0.5.10 DeepEP MoE (DeepGEMM; proxy for vLLM's DeepGEMM "
                        "experts), EP 8")
