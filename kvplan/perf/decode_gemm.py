"""Measured decode-GEMM streaming rates: the weight bytes per second a GPU's GEMM library reads
at decode batch sizes, per GPU and GEMM dtype. Pure: standard library only.

The step model (perf/step.py step_terms) streams a step's dense weights at the datasheet
bandwidth × the engine's fitted `bandwidth_efficiency` × the GPU class's bandwidth factor
(perf/arch.py). Where a public microbenchmark times the GEMMs a decode step runs, on the GPU
itself, that measured rate replaces it for the dense weights, and for routed experts in the
dtype it measures (a fused MoE streams its experts no faster than the dense GEMMs stream
theirs: aiconfigurator's H200 tables, perf/layer_floors.py; the KV cache keeps the
class-scaled rate), times the engine's `bandwidth_efficiency` (1.0 in every bundled fit:
Hopper's rows stream at the datasheet; a user calibration's value still scales it). A
measurement of the GPU, not a factor fitted on serving rows: it stays when a class's factors
are left out (benchmarks/perf_latency.py, LOAO).

MI300X, FP8 (per-tensor W8A8): Hugging Face's "Creating custom kernels for the AMD MI300"
(huggingface/blog mi300kernels.md, 2025-07-09, section "Skinny GEMM kernel / Results") times
torch's FP8 GEMM ("Torch time": torch._scaled_mm, which binds hipBLASLt) on one MI300X for the
three projections of Llama-3.1-405B at TP 8, M = 1, 8, 16, 32 rows, "after 500 warmups
iterations, over 2000 profiling iterations, using CUDA graph and multiple weights to avoid
cache hits" (container rocm/vllm rocm6.3.1 vllm 0.6.6). That is the path vLLM takes on ROCm for
a per-tensor FP8 linear from 2 rows up (ROCm/vllm 040de12 = vLLM 0.10,
vllm/model_executor/layers/quantization/utils/w8a8_utils.py `rocm_per_tensor_w8a8_scaled_mm`:
torch._scaled_mm unless the input has one row, which runs the skinny kernel `wvSplitKQ`; no
public timing of that kernel at these shapes, so one row is assumed to stream at the same
rate). Bytes = N × K at 1 byte per FP8 weight; rate = all bytes / all times over the table:
1,459,617,792 B / 509.71 µs = 2.86 TB/s, 0.54 of the 5.3 TB/s datasheet (the STREAM triad on
the same GPU model reaches 4.10: Azure's ND MI300X v5 results). The LM head (bf16) and the
output projection (not in the table) are charged at the same rate (UNVERIFIED). Timed with
ROCm 6.3.1's hipBLASLt; the checked rows (docs/performance-latency.md) ran ROCm 6.4.1 and
agree with it; later libraries, AMD's opt-in aiter GEMMs (VLLM_ROCM_USE_AITER) and other
engines' ROCm FP8 paths may stream faster or slower (UNVERIFIED: the rate is applied to every
engine and release on MI300X FP8).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GemmTiming:
    """One measured GEMM: M rows of activations × an N × K weight, in µs."""

    m: int
    n: int
    k: int
    us: float


@dataclass(frozen=True)
class DecodeGemm:
    """The timed decode GEMMs of one GPU and dtype, bytes per weight element, and the source."""

    timings: tuple[GemmTiming, ...]
    weight_bytes: float
    source: str

    @property
    def bytes_per_s(self) -> float:
        """Weight bytes the timed GEMMs read per second, over all of them together."""
        return (sum(t.n * t.k * self.weight_bytes for t in self.timings)
                / (sum(t.us for t in self.timings) * 1e-6))


# Llama-3.1-405B at TP 8: QKV (N 2304, K 16384), gate/up (13312, 16384), down (16384, 6656).
_QKV, _GATE_UP, _DOWN = (2304, 16384), (13312, 16384), (16384, 6656)
_MI300X_FP8_TORCH_US = {
    1: (14.938, 77.636, 31.066), 8: (16.300, 80.031, 31.559),
    16: (16.693, 75.236, 31.671), 32: (16.817, 82.198, 35.561),
}

DECODE_GEMMS: dict[tuple[str, str], DecodeGemm] = {
    ("mi300x", "fp8"): DecodeGemm(
        timings=tuple(GemmTiming(m, n, k, us)
                      for m, times in _MI300X_FP8_TORCH_US.items()
                      for (n, k), us in zip((_QKV, _GATE_UP, _DOWN), times, strict=True)),
        weight_bytes=1.0,
        source="huggingface/blog mi300kernels.md (2025-07-09), 'Skinny GEMM kernel' results, "
               "column 'Torch time (μs)': torch._scaled_mm FP8 on MI300X, Llama-3.1-405B TP8 "
               "projections, M = 1/8/16/32, CUDA graph, weights rotated"),
}


def weight_stream_bytes_per_s(gpu_id: str, compute_dtype: str) -> float:
    """The measured decode-GEMM streaming rate of `gpu_id` for `compute_dtype` GEMMs (bytes/s);
    0.0 when none is measured (the class-scaled HBM rate applies)."""
    d = DECODE_GEMMS.get((gpu_id, compute_dtype))
    return d.bytes_per_s if d is not None else 0.0
