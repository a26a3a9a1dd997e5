"""gpt-oss's MXFP4 routed experts at their measured kernel rate (issues #27 / #24,
docs/moe-gemm.md): the plan names the table it read, or says why the dense rate."""

from __future__ import annotations

from kvplan import plan


def test_gpt_oss_120b_on_h100_vllm_reads_the_mxfp4_table() -> None:
    p = plan("openai/gpt-oss-120b", "h100", engine="vllm", offline=True)
    assert p.performance is not None
    re = p.performance.routed_experts
    assert re is not None and re.rate == "measured"
    assert re.table == "vLLM 0.24.0 OAI Triton MXFP4, TP-split"
    assert re.source == "aiconfigurator 095f58a5 table: h100-sxm-80gb, mxfp4"


def test_gpt_oss_on_a100_names_the_proxy_or_the_dense_rate() -> None:
    big = plan("openai/gpt-oss-120b", "a100-sxm-80gb", engine="vllm", offline=True)
    assert big.performance is not None and big.performance.routed_experts is not None
    assert big.performance.routed_experts.rate == "measured"
    assert "proxy for vLLM's MXFP4 Marlin" in big.performance.routed_experts.source
    # 32 experts: no A100 Marlin table times them
    small = plan("openai/gpt-oss-20b", "a100-sxm-80gb", engine="vllm", offline=True)
    assert small.performance is not None and small.performance.routed_experts is not None
    assert small.performance.routed_experts.rate == "dense"
