"""Derive kvplan/perf/layer_floors.py's tables from aiconfigurator's measured kernel tables.

    python benchmarks/layer_floor_tables.py AICONFIGURATOR_CHECKOUT

AICONFIGURATOR_CHECKOUT: a checkout of ai-dynamo/aiconfigurator (commit 095f58a5 was used).
Needs pyarrow (not a kvplan dependency: run by hand when the tables change; its output is
pasted into kvplan/perf/layer_floors.py).

kvplan's step model charges a step's weights, KV and FLOPs at the GPU's rates and puts every
fixed cost of a layer's kernels into the fitted step overhead, fitted on dense models
(Llama, Qwen). A MoE or MLA layer runs more, and slower, kernels than the dense layer the fit
stands for. For each engine's table set on H200 (the GPU all three engines' tables time), at
t = 1 ... 1024 tokens per step, this prints in µs per layer:

    excess(block) = measured time of the block's kernels − what kvplan charges for it: its
                    bytes at the H200 datasheet rate (bandwidth_efficiency 1.0) or, where
                    more, its FLOPs at the datasheet peak × the engine's fitted
                    gemm_efficiency (read from kvplan: engines/<engine>.py)
    MoE extra     = excess(fused MoE, DeepSeek-V3's routed experts at TP 8: 256 experts,
                    top-8, hidden 7168, moe_intermediate 2048, FP8 block-scaled,
                    power_law_1.01 routing; bytes = the experts t tokens touch)
                    − excess(a dense MLP: Llama-3.1-70B's gate_up + down GEMMs at TP 8, FP8)
    shared extra  = excess(DeepSeek-V3's shared expert: its gate_up and down GEMMs at TP 8,
                    in the experts' dtype)
    MLA extra     = excess(DeepSeek-V3's MLA block at TP 8: 16 heads, FP8 block-scaled
                    projections, bf16 latent KV over 1,024 tokens)
                    − excess(a dense attention block: Llama-3.1-70B's QKV and output GEMMs
                    at TP 8, FP8, + decode attention, 8 query heads, 1 KV head, bf16 KV over
                    1,023 tokens)

The dense excesses are taken at min(t, 64): the fit's step overhead does not grow with the
step, and past 64 tokens kvplan charges the dense GEMMs by their FLOPs. The MoE block stays
bytes-bound in kvplan up to 1,024 tokens (its expert FLOPs at perf/moe_gemm.py's rate are
below its bytes there; checked below), where the grid stops. The dense reference is FP8
per-tensor (the GEMM dtype whose per-call cost is closest to the
block-scaled one: both quantize the activations in a kernel of their own). MLA block: the
engine's module table where one exists (vLLM 0.19.0 and TensorRT-LLM 1.3.0rc10
mla_generation_module: every kernel of the attention module); SGLang 0.5.9 from its parts
(the fused q_a/kv_a, q_b and output GEMMs, the absorbed BMMs before and after, the MLA decode
kernel), which leaves out its norms and RoPE, so its figure is a lower bound.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Any

DATA = "aic-core/src/aiconfigurator_core/systems/data"
GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
DENSE_HELD = 64  # dense excesses at min(t, DENSE_HELD)
# GPU directory → kvplan GPU id (its gpu_specs entry gives the rates kvplan charges at)
GPUS = {"h200_sxm": "h200-sxm-141gb"}
# (kernel family: engines/base.py Calibration.moe_kernels, GPU dir) → tables: gemm (path,
# kernel_source per dtype), decode attention, fused MoE (path, kernel_source), MLA (module
# table, or None: composed from the decode kernel and BMM tables)
_VLLM14 = {"gemm": ("gemm/vllm/0.14.0/gemm_perf", {"fp8": "vllm_default",
                                                   "fp8_block": "vllm_default",
                                                   "bfloat16": "vllm_default"}),
           "attn": "attention/vllm/0.14.0/generation_attention_perf",
           "moe": ("moe/vllm/0.14.0/moe_perf", "vllm_fused_moe"),
           "mla": "mla/vllm/0.19.0/mla_generation_module_perf"}
_SGL = {"gemm": ("gemm/sglang/0.5.9/gemm_perf", {"fp8": "sglang", "fp8_block": "sglang",
                                                 "bfloat16": "sglang"}),
        "attn": "attention/sglang/0.5.9/generation_attention_perf",
        "moe": ("moe/sglang/0.5.9/moe_perf", "sglang_fused_moe_triton"),
        "mla": None, "mla_kernel": "mla/sglang/0.5.9/generation_mla_perf",
        "mla_bmm": "mla_bmm/sglang/0.5.9/mla_bmm_perf"}
_TRT_H = {"gemm": ("gemm/trtllm/1.2.0rc5/gemm_perf", {"fp8": "torch_flow",
                                                      "fp8_block": "torch_flow",
                                                      "bfloat16": "torch_flow"}),
          "attn": "attention/trtllm/1.2.0rc5/generation_attention_perf",
          "moe": ("moe/trtllm/1.2.0rc5/moe_perf", "moe_torch_flow"),
          "mla": "mla/trtllm/1.3.0rc10/mla_generation_module_perf"}
ENGINE = {"vllm-triton-fused-moe": "vllm", "sglang-triton-fused-moe": "sglang",
          "trtllm-cutlass-moe": "trtllm"}  # whose fitted gemm_efficiency kvplan applies
TABLES: dict[tuple[str, str], dict[str, Any]] = {
    ("vllm-triton-fused-moe", "h200_sxm"): _VLLM14,
    ("sglang-triton-fused-moe", "h200_sxm"): _SGL,
    ("trtllm-cutlass-moe", "h200_sxm"): _TRT_H,
}
# shapes at TP 8 (per-GPU N × K of each GEMM)
DENSE_ATTN = ((1280, 8192), (8192, 1024))  # Llama-3.1-70B QKV, output
DENSE_MLP = ((7168, 8192), (8192, 3584))  # gate_up, down
MLA_GEMMS = ((2112, 7168), (3072, 1536), (7168, 2048))  # fused q_a+kv_a, q_b, output
SHARED_GEMMS = ((512, 7168), (7168, 256))  # DeepSeek-V3's shared expert: gate_up, down
MLA_WEIGHT_BYTES = (7168 * 1536 + 7168 * 576 + 1536 * 24576 // 8 + 512 * 32768 // 8
                    + 16384 // 8 * 7168)  # FP8: q_a, kv_a, q_b, kv_b, output at TP 8
EXPERTS, TOP_K, HIDDEN, INTER = 256, 8, 7168, 2048
EXPERT_ELEMENTS = 3 * HIDDEN * INTER // 8  # one expert's shard at TP 8
# MoE kernel dtype (perf/moe_gemm.py moe_kernel_dtype) → (bytes per weight element, the dense
# GEMM dtype of its reference MLP); a dtype a table set does not time is left out
MOE_DTYPES = {"fp8_block": (1, "fp8"), "fp8": (1, "fp8"), "bfloat16": (2, "bfloat16")}


def _us(seconds_ms: float) -> float:
    return seconds_ms * 1e3  # the tables store ms


def read(root: Path, gpu: str, rel: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq  # a hand-run script's own dependency

    return list(pq.read_table(root / DATA / gpu / f"{rel}.parquet").to_pylist())


class Gemm:
    """GEMM latencies (µs) by dtype, n, k, m, interpolated linearly in n and k."""

    def __init__(self, rows: list[dict[str, Any]], sources: dict[str, str]) -> None:
        self.t: dict[tuple[str, int, int], dict[int, float]] = collections.defaultdict(dict)
        for r in rows:
            if sources.get(r["gemm_dtype"]) == r["kernel_source"]:
                self.t[(r["gemm_dtype"], r["n"], r["k"])][r["m"]] = _us(r["latency"])

    def _at_k(self, dt: str, m: int, n: int, k: int) -> float:
        ns = sorted({key[1] for key in self.t if key[0] == dt and key[2] == k})
        if n in ns:
            return self.t[(dt, n, k)][m]
        lo, hi = max(x for x in ns if x < n), min(x for x in ns if x > n)
        a, b = self.t[(dt, lo, k)][m], self.t[(dt, hi, k)][m]
        return a + (b - a) * (n - lo) / (hi - lo)

    def us(self, dt: str, m: int, n: int, k: int) -> float:
        ks = sorted({key[2] for key in self.t if key[0] == dt})
        if k in ks:
            return self._at_k(dt, m, n, k)
        lo, hi = max(x for x in ks if x < k), min(x for x in ks if x > k)
        a, b = self._at_k(dt, m, n, lo), self._at_k(dt, m, n, hi)
        return a + (b - a) * (k - lo) / (hi - lo)


def _min(rows: list[dict[str, Any]], **match: Any) -> float:
    got = [_us(r["latency"]) for r in rows if all(r.get(k) == v for k, v in match.items())]
    if not got:
        raise SystemExit(f"no table row matches {match}")
    return min(got)


def family_rows(root: Path, gpu: str, family: str, tabs: dict[str, Any]
                ) -> tuple[list[float], dict[str, list[float]], dict[str, list[float]]]:
    """MLA extra µs per grid point, and the routed experts' and the shared expert's extra µs
    per grid point by MoE kernel dtype, for one engine's table set on one GPU."""
    from kvplan.engines import registry
    from kvplan.sources.catalog import resolve_gpu

    spec = resolve_gpu(GPUS[gpu])
    coeffs = registry.get(ENGINE[family]).calibration.coefficients
    assert coeffs is not None and spec.tflops.fp8 and spec.tflops.bf16 and spec.bandwidth_tbps
    rate = spec.bandwidth_tbps * 1e12  # the datasheet rate kvplan charges bytes at
    peak = {"fp8": spec.tflops.fp8 * 1e12 * coeffs.gemm_efficiency,
            "bfloat16": spec.tflops.bf16 * 1e12 * coeffs.gemm_efficiency}

    def charge_us(nbytes: float, flops: float = 0.0, flop_rate: float = 1.0) -> float:
        return max(nbytes / rate, flops / flop_rate) * 1e6

    gemm = Gemm(read(root, gpu, tabs["gemm"][0]), tabs["gemm"][1])
    attn = read(root, gpu, tabs["attn"])
    moe = [r for r in read(root, gpu, tabs["moe"][0]) if r["kernel_source"] == tabs["moe"][1]]
    mla = read(root, gpu, tabs["mla"]) if tabs["mla"] else None
    kernel = read(root, gpu, tabs["mla_kernel"]) if not mla else []
    bmm = read(root, gpu, tabs["mla_bmm"]) if not mla else []
    dtypes = [dt for dt in MOE_DTYPES if any(r["moe_dtype"] == dt and r["hidden_size"] == HIDDEN
                                             and r["num_experts"] == EXPERTS for r in moe)]
    mla_out: list[float] = []
    moe_out: dict[str, list[float]] = {dt: [] for dt in dtypes}
    shared_out: dict[str, list[float]] = {dt: [] for dt in dtypes}
    for t in GRID:
        d = min(t, DENSE_HELD)
        dense_attn = (sum(gemm.us("fp8", d, n, k) for n, k in DENSE_ATTN)
                      + _min(attn, batch_size=d, num_heads=8, num_key_value_heads=1,
                             step=1023, kv_cache_dtype="bfloat16")
                      - sum(charge_us(n * k, 2 * d * n * k, peak["fp8"]) for n, k in DENSE_ATTN)
                      - charge_us(d * 1023 * 2 * 128 * 2, d * 4 * 8 * 128 * 1023,
                                  peak["bfloat16"]))
        if mla:
            block = _min(mla, batch_size=t, num_heads=16, step=1024, gemm_type="fp8_block",
                         kv_cache_dtype="bfloat16")
        else:
            block = (sum(gemm.us("fp8_block", t, n, k) for n, k in MLA_GEMMS)
                     + sum(_us(r["latency"]) for r in bmm if r["num_tokens"] == t
                           and r["num_heads"] == 16 and r["bmm_dtype"] == "bfloat16")
                     + _min(kernel, batch_size=t, num_heads=16, step=1023,
                            kv_cache_dtype="bfloat16"))
        # absorbed MLA: scores over latent + rope, values over the latent (perf/step.py)
        mla_charge = (charge_us(MLA_WEIGHT_BYTES, 2 * t * MLA_WEIGHT_BYTES, peak["fp8"])
                      + charge_us(t * 1024 * 576 * 2, t * 2 * 16 * (2 * 512 + 64) * 1024,
                                  peak["bfloat16"]))
        mla_out.append(round(block - mla_charge - dense_attn, 1))
        touched = EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** t)
        for dt in dtypes:
            width, dense = MOE_DTYPES[dt]
            dense_mlp = sum(gemm.us(dense, d, n, k)
                            - charge_us(n * k * width, 2 * d * n * k, peak[dense])
                            for n, k in DENSE_MLP)
            expert_bytes = touched * EXPERT_ELEMENTS * width
            # kvplan charges the experts' FLOPs at perf/moe_gemm.py's ratio (≤ 1) of the
            # dense rate: below their bytes at every grid point even at ratio 0.4
            flops = 2 * t * TOP_K * EXPERT_ELEMENTS
            assert flops / (peak[dense] * 0.4) < expert_bytes / rate, (family, dt, t)
            fused = _min(moe, num_tokens=t, moe_dtype=dt, hidden_size=HIDDEN,
                         inter_size=INTER, topk=TOP_K, num_experts=EXPERTS, moe_tp_size=8,
                         moe_ep_size=1, distribution="power_law_1.01")
            # below 0 (TensorRT-LLM bf16 at 32 tokens: the collector's noise between
            # neighbouring points) is taken as 0
            moe_out[dt].append(max(0.0, round(fused - charge_us(expert_bytes) - dense_mlp, 1)))
            # the shared expert: two more GEMMs in the layer, beyond what kvplan charges
            shared_out[dt].append(max(0.0, round(sum(
                gemm.us(dt, t, n, k) - charge_us(n * k * width, 2 * t * n * k, peak[dense])
                for n, k in SHARED_GEMMS), 1)))
    return mla_out, moe_out, shared_out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    root = Path(argv[0])
    for (family, gpu), tabs in TABLES.items():
        mla, moe, shared = family_rows(root, gpu, family, tabs)
        print(f"{family} on {GPUS[gpu]}: t {GRID}")
        print(f"  mla_extra_us {tuple(mla)}")
        for dt, values in moe.items():
            print(f"  moe_extra_us[{dt}] {tuple(values)}")
        for dt, values in shared.items():
            print(f"  shared_extra_us[{dt}] {tuple(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
