"""Per-GPU memory that tensor parallelism adds, as a function of the interconnect. Pure.

What a TP > 1 engine process holds beyond the TP1 context is mostly NCCL's per-connection
staging buffers, plus the custom all-reduce IPC buffers where the engine enables them:

* **NCCL buffers** = communicators × channels × connections per channel × bytes per connection.
  - bytes per connection: the three protocols' buffers, SIMPLE 4 MiB (NCCL_BUFFSIZE default) +
    LL128 4.6875 MiB + LL 0.5 MiB = 9.19 MiB (the size a public bpftrace of NCCL's proxy
    connections measured: tonyd2wild/DeepSeek-V4.1-Flash-vLLM-DGX-Spark issue 8). NCCL enables
    LL128 only over NVLink; over PCIe a connection holds SIMPLE + LL = 4.5 MiB.
  - channels: NCCL executes 2 × its search channels (NVIDIA/nccl issue 1041, maintainer);
    PCIe topologies search 1 channel (NVIDIA/nccl issue 1358 log "nChannels 1 … SYS/PIX"), an
    8 × H800 NVLink box (400 GB/s) runs 16 (NVIDIA/nccl issue 892 "16 coll channels"). kvplan
    scales NVLink channels with the link rate, 2 per 50 GB/s, capped at NCCL's 32
    (H100/H200 SXM → 32, A100 SXM → 24; UNVERIFIED beyond the two logged points).
  - connections per channel: 3 (the ring's receive side and an intra-node tree chain's parent
    and child; UNVERIFIED, NCCL connects lazily per algorithm).
  - communicators per TP group: vLLM and SGLang keep two NCCL communicators per group — the
    torch.distributed device group and their own PyNccl communicator
    (vllm/distributed/parallel_state.py `GroupCoordinator`, vllm/distributed/device_communicators/
    pynccl.py; SGLang's copies under sglang/srt/distributed/); TGI one, torch's ProcessGroupNCCL
    (server/text_generation_server/utils/dist.py `initialize_torch_distributed`, v2.2.0: one
    WORLD group, and no NCCL at all for a single shard).
  - NVLink SHARP (NVLS) buffers are not counted: NVLS needs NCCL's cuMem allocator, which vLLM
    turns off (vllm/env_override.py sets NCCL_CUMEM_ENABLE=0 unless multi-node NVLink IMEX
    channels exist, "it will cost 1~2 GiB GPU memory with cudagraph+allreduce", NVIDIA/nccl
    issue 1234; read in 2025 versions, UNVERIFIED at 0.33) and SGLang too (NCCL_CUMEM_ENABLE=0,
    NCCL_NVLS_ENABLE=0 unless --enable-nccl-nvls: sglang/srt/entrypoints/engine.py
    `_set_envs_and_config`, PR 631). TGI leaves NCCL's defaults (so NVLS may add memory at
    TP > 2 on NVSwitch systems; not modelled, no log to check it).
* **Custom all-reduce** (vLLM, SGLang; vllm/distributed/device_communicators/custom_all_reduce.py,
  SGLang's copy adapted from vLLM 0.6.4.post1): only for world sizes 2, 4, 6, 8, and beyond 2
  GPUs only when they are fully NVLink-connected ("not supported on more than two PCIe-only
  GPUs"); then it allocates a meta + 8 MiB buffer, an 8 MiB IPC buffer and 8 MiB of rank data
  on each GPU (peers' buffers are mapped, not allocated). TGI has none.

Check against the logs that state memory around loading: H100/H200 SXM, two communicators:
2 × 32 × 3 × 9.19 MiB + 24 MiB = 1.75 GiB, against ≈1.82 GiB in vLLM's TP2/TP4 H100 rows and
1.92 GiB in SGLang's TP8 H200 log; PCIe, two communicators: 2 × 2 × 3 × 4.5 MiB = 0.05 GiB,
against 0.05 GiB in vLLM's TP2 L40S row and the ≈0.2 GiB total in use before loading in
SGLang's TP4 L4 log.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..specs import GpuSpec
from ..units import MiB

NCCL_SIMPLE_BYTES = 4 * MiB  # NCCL_BUFFSIZE default
NCCL_LL128_BYTES = 4_915_200  # 4.6875 MiB
NCCL_LL_BYTES = 512 * 1024
NCCL_CONNECTIONS_PER_CHANNEL = 3
NCCL_MAX_CHANNELS = 32
NCCL_PCIE_CHANNELS = 2
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_AR_BYTES = 3 * 8 * MiB  # meta + buffer, IPC buffer, rank data (meta_size is < 1 KiB)

COMMUNICATORS = {"vllm": 2, "sglang": 2, "tgi": 1}
CUSTOM_ALL_REDUCE = {"vllm": True, "sglang": True, "tgi": False}


def nvlink(gpu: GpuSpec | None) -> float:
    """GB/s of GPU-to-GPU link per GPU; 0 for PCIe-only parts (and unknown GPUs)."""
    return float(gpu.nvlink_gbps_per_gpu or 0) if gpu is not None else 0.0


def nccl_channels(gpu: GpuSpec | None) -> int:
    """NCCL execution channels: 2 over PCIe; over NVLink 2 per 50 GB/s, at most 32."""
    link = nvlink(gpu)
    if link <= 0:
        return NCCL_PCIE_CHANNELS
    return max(NCCL_PCIE_CHANNELS, min(NCCL_MAX_CHANNELS, 2 * round(link / 50)))


def nccl_connection_bytes(gpu: GpuSpec | None) -> int:
    """SIMPLE + LL (+ LL128 over NVLink) buffers of one connection."""
    base = NCCL_SIMPLE_BYTES + NCCL_LL_BYTES
    return base + (NCCL_LL128_BYTES if nvlink(gpu) > 0 else 0)


def custom_all_reduce_enabled(gpu: GpuSpec | None, tp: int) -> bool:
    """vLLM/SGLang custom all-reduce: world size 2, 4, 6 or 8, and 2 GPUs or full NVLink. A
    bridged pair (A6000, 3090) counts as linked at TP2 only, as PCIe pairs do."""
    if tp not in CUSTOM_AR_WORLD_SIZES:
        return False
    return tp == 2 or nvlink(gpu) >= 300  # NVSwitch-class parts connect every pair


def tp_bytes(gpu: GpuSpec | None, tp: int, engine: str) -> int:
    """Memory per GPU that TP adds for `engine` ("vllm", "sglang", "tgi"); 0 at TP1."""
    if tp <= 1:
        return 0
    nccl = (COMMUNICATORS[engine] * nccl_channels(gpu) * NCCL_CONNECTIONS_PER_CHANNEL
            * nccl_connection_bytes(gpu))
    ar = CUSTOM_AR_BYTES if CUSTOM_ALL_REDUCE[engine] and custom_all_reduce_enabled(gpu, tp) else 0
    return nccl + ar


# --------------------------------------------------- measured all-reduce time per link
#
# Public microbenchmarks of one TP all-reduce, per link and implementation, to check what
# kvplan's step model charges for one (perf/step.py: the fitted `allreduce_latency_us`, 2.03 µs
# on Hopper, plus 2(n−1)/n × bytes over the link's one-way rate). Not used by the planner: the
# benchmark benchmarks/perf_latency.py compares them with that charge on the MI300X rows
# (docs/performance-latency.md, "All-reduce per link"). What each engine runs for a decode-sized
# message: vLLM 0.10 (upstream and AMD's ROCm/vllm fork, commit 040de12, the release of the
# MI300X latency table) tries quick reduce (ROCm, off by default:
# VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=NONE in vllm/envs.py), then its custom all-reduce
# (world size 2/4/6/8, fully connected: NVSwitch or the xGMI mesh, message under max_size =
# 16 MiB in the fork's vllm/distributed/device_communicators/custom_all_reduce.py), then
# PyNccl (NCCL / RCCL): vllm/distributed/device_communicators/cuda_communicator.py
# `all_reduce`. So RCCL's and NCCL's small-message latencies apply only when the custom
# all-reduce is off or the message exceeds its buffer (prefill chunks).


@dataclass(frozen=True)
class AllReduceCurve:
    """Measured time of one all-reduce by message size: (bytes, µs) points, ascending."""

    link: str
    implementation: str
    tp: int
    points: tuple[tuple[int, float], ...]
    source: str


def busbw_us(nbytes: int, busbw_gb_s: float, ranks: int) -> float:
    """µs of one all-reduce from the bus bandwidth nccl-tests / rccl-tests print: busbw =
    algbw × 2(n−1)/n with algbw = bytes / time (nccl-tests doc/PERFORMANCE.md)."""
    return nbytes * 2 * (ranks - 1) / ranks / (busbw_gb_s * 1e9) * 1e6


def _busbw_curve(points: tuple[tuple[int, float], ...], ranks: int) -> tuple[
        tuple[int, float], ...]:
    return tuple((b, round(busbw_us(b, bw, ranks), 2)) for b, bw in points)


def curve_us(curve: AllReduceCurve, nbytes: float) -> float:
    """µs of one all-reduce of `nbytes`: linear between the measured points, the first point's
    time below them (the latency floor), the last segment's slope above them (bandwidth)."""
    pts = curve.points
    if nbytes <= pts[0][0]:
        return pts[0][1]
    for (b0, t0), (b1, t1) in zip(pts[:-1], pts[1:], strict=True):
        if nbytes <= b1:
            return t0 + (t1 - t0) * (nbytes - b0) / (b1 - b0)
    (b0, t0), (b1, t1) = pts[-2], pts[-1]
    return t1 + (t1 - t0) * (nbytes - b1) / (b1 - b0)


_KB, _MB = 1024, 1024 * 1024
ALLREDUCE_CURVES: tuple[AllReduceCurve, ...] = (
    AllReduceCurve(
        "xGMI (MI300X)", "vLLM custom all-reduce", 4,
        ((2 * _KB, 7.18), (16 * _KB, 7.26), (32 * _KB, 7.58), (256 * _KB, 14.39),
         (512 * _KB, 14.65), (1 * _MB, 22.91), (2 * _MB, 36.64), (4 * _MB, 63.86),
         (8 * _MB, 118.31)),
        "vllm-project/vllm PR #19744 (ROCm quick reduce, 2025-06), kernel test 'TP=4', column "
        "'baseline' fp16: the custom all-reduce the PR keeps for small inputs (ROCm/aiter PR "
        "#801 labels the same kernel 'vllm cr': 7.07 µs at 4 KB, TP2)"),
    AllReduceCurve(
        "xGMI (MI300X)", "vLLM custom all-reduce", 2,
        ((4 * _KB, 7.07), (32 * _KB, 7.30), (256 * _KB, 11.45), (1 * _MB, 28.15),
         (4 * _MB, 93.79)),
        "ROCm/aiter PR #801 (quick allreduce, 2025-08), table 'tp2(us)', column 'vllm cr', "
        "float16"),
    AllReduceCurve(
        "NVLink 4 (H100 SXM)", "vLLM custom all-reduce, no CUDA graph", 4,
        ((512, 9.1), (4 * _KB, 8.5), (32 * _KB, 9.2), (256 * _KB, 20.6), (512 * _KB, 26.9),
         (1 * _MB, 40.2)),
        "sgl-project/sglang PR #2904 (2025-01), 'unit test performance in H100 (without cuda "
        "graph)', table 'vllm', tp 4 (its 'data size' taken as bytes; the PR does not say)"),
    AllReduceCurve(
        "NVLink 4 (H100 SXM)", "vLLM custom all-reduce, no CUDA graph", 8,
        ((512, 10.1), (4 * _KB, 9.3), (32 * _KB, 11.8), (256 * _KB, 24.1), (512 * _KB, 30.4),
         (1 * _MB, 45.0)),
        "sgl-project/sglang PR #2904 (2025-01), same table, tp 8"),
    AllReduceCurve(
        "xGMI (MI300X)", "RCCL 2.22.3 (rccl-tests)", 8,
        _busbw_curve(((1 * _KB, 0.04), (32 * _KB, 1.13), (1 * _MB, 22.41), (4 * _MB, 82.53),
                      (8 * _MB, 131.57)), 8),
        "Azure/AI-benchmarking-guide Azure_Results/ND_MI300X_v5_results.md 'RCCL Bandwidth' "
        "(in-place bus bandwidth, GB/s; converted by busbw_us)"),
    AllReduceCurve(
        "NVLink 4 (H100 SXM)", "NCCL 2.18.5 (nccl-tests, NVLS)", 8,
        _busbw_curve(((1 * _KB, 0.07), (32 * _KB, 1.71), (1 * _MB, 43.70), (4 * _MB, 128.73),
                      (8 * _MB, 172.13)), 8),
        "Azure/AI-benchmarking-guide Azure_Results/ND_H100_v5_results.md 'NCCL Bandwidth' "
        "(in-place bus bandwidth, GB/s; converted by busbw_us)"),
)
