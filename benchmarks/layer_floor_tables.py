"""Derive kvplan/perf/layer_floors.py's tables from aiconfigurator's measured kernel tables.

    python benchmarks/layer_floor_tables.py AICONFIGURATOR_CHECKOUT

AICONFIGURATOR_CHECKOUT: a checkout of ai-dynamo/aiconfigurator (commit 095f58a5 was used).
Needs pyarrow (not a kvplan dependency: run by hand when the tables change; its output is
pasted into kvplan/perf/layer_floors.py).

kvplan's step model charges a decode step's weight and KV bytes at the HBM rate and puts every
fixed cost of a layer's kernels into the fitted step overhead, fitted on dense models
(Llama, Qwen). A MoE or MLA layer runs more, and slower, kernels than the dense layer the fit
stands for. For each engine's table set on H200 (the GPU all three engines' tables time), at
t = 1 ... 64 tokens per step, this prints in µs per layer:

    excess(block) = measured time of the block's kernels − its bytes / 4.8 TB/s (the H200
                    datasheet rate kvplan charges them at: bandwidth_efficiency 1.0)
    MoE extra     = excess(fused MoE, DeepSeek-V3's routed experts at TP 8: 256 experts,
                    top-8, hidden 7168, moe_intermediate 2048, FP8 block-scaled,
                    power_law_1.01 routing; bytes = the experts t tokens touch)
                    − excess(a dense MLP: Llama-3.1-70B's gate_up + down GEMMs at TP 8, FP8)
    MLA extra     = excess(DeepSeek-V3's MLA block at TP 8: 16 heads, FP8 block-scaled
                    projections, bf16 latent KV over 1,024 tokens)
                    − excess(a dense attention block: Llama-3.1-70B's QKV and output GEMMs
                    at TP 8, FP8, + decode attention, 8 query heads, 1 KV head, bf16 KV over
                    1,023 tokens)

The dense reference is FP8 per-tensor (the GEMM dtype whose per-call cost is closest to the
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
GRID = (1, 2, 4, 8, 16, 32, 64)
# GPU directory → (kvplan GPU id, the datasheet HBM bytes/s kvplan charges bytes at)
GPUS = {"h200_sxm": ("h200-sxm-141gb", 4.8e12)}
# (kernel family: engines/base.py Calibration.moe_kernels, GPU dir) → tables: gemm (path,
# kernel_source per dtype), decode attention, fused MoE (path, kernel_source), MLA (module
# table, or None: composed from the decode kernel and BMM tables)
_VLLM14 = {"gemm": ("gemm/vllm/0.14.0/gemm_perf", {"fp8": "vllm_default",
                                                   "fp8_block": "vllm_default"}),
           "attn": "attention/vllm/0.14.0/generation_attention_perf",
           "moe": ("moe/vllm/0.14.0/moe_perf", "vllm_fused_moe"),
           "mla": "mla/vllm/0.19.0/mla_generation_module_perf"}
_SGL = {"gemm": ("gemm/sglang/0.5.9/gemm_perf", {"fp8": "sglang", "fp8_block": "sglang"}),
        "attn": "attention/sglang/0.5.9/generation_attention_perf",
        "moe": ("moe/sglang/0.5.9/moe_perf", "sglang_fused_moe_triton"),
        "mla": None, "mla_kernel": "mla/sglang/0.5.9/generation_mla_perf",
        "mla_bmm": "mla_bmm/sglang/0.5.9/mla_bmm_perf"}
_TRT_H = {"gemm": ("gemm/trtllm/1.2.0rc5/gemm_perf", {"fp8": "torch_flow",
                                                      "fp8_block": "torch_flow"}),
          "attn": "attention/trtllm/1.2.0rc5/generation_attention_perf",
          "moe": ("moe/trtllm/1.2.0rc5/moe_perf", "moe_torch_flow"),
          "mla": "mla/trtllm/1.3.0rc10/mla_generation_module_perf"}
TABLES: dict[tuple[str, str], dict[str, Any]] = {
    ("vllm-triton-fused-moe", "h200_sxm"): _VLLM14,
    ("sglang-triton-fused-moe", "h200_sxm"): _SGL,
    ("trtllm-cutlass-moe", "h200_sxm"): _TRT_H,
}
# shapes at TP 8 (per-GPU N × K of each GEMM)
DENSE_ATTN = ((1280, 8192), (8192, 1024))  # Llama-3.1-70B QKV, output
DENSE_MLP = ((7168, 8192), (8192, 3584))  # gate_up, down
MLA_GEMMS = ((2112, 7168), (3072, 1536), (7168, 2048))  # fused q_a+kv_a, q_b, output
MLA_WEIGHT_BYTES = (7168 * 1536 + 7168 * 576 + 1536 * 24576 // 8 + 512 * 32768 // 8
                    + 16384 // 8 * 7168)  # FP8: q_a, kv_a, q_b, kv_b, output at TP 8
EXPERTS, TOP_K, HIDDEN, INTER = 256, 8, 7168, 2048
EXPERT_BYTES = 3 * HIDDEN * INTER // 8  # one expert's FP8 shard at TP 8


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


def family_rows(root: Path, gpu: str, tabs: dict[str, Any]) -> list[tuple[int, float, float]]:
    """(t, MLA extra µs, MoE extra µs) per grid point for one engine's table set on one GPU."""
    rate = GPUS[gpu][1]

    def _bytes_us(nbytes: float) -> float:
        return nbytes / rate * 1e6

    gemm = Gemm(read(root, gpu, tabs["gemm"][0]), tabs["gemm"][1])
    attn = read(root, gpu, tabs["attn"])
    moe = [r for r in read(root, gpu, tabs["moe"][0]) if r["kernel_source"] == tabs["moe"][1]]
    mla = read(root, gpu, tabs["mla"]) if tabs["mla"] else None
    kernel = read(root, gpu, tabs["mla_kernel"]) if not mla else []
    bmm = read(root, gpu, tabs["mla_bmm"]) if not mla else []
    out = []
    for t in GRID:
        dense_attn = (sum(gemm.us("fp8", t, n, k) for n, k in DENSE_ATTN)
                      + _min(attn, batch_size=t, num_heads=8, num_key_value_heads=1,
                             step=1023, kv_cache_dtype="bfloat16")
                      - _bytes_us(sum(n * k for n, k in DENSE_ATTN) + t * 1023 * 2 * 128 * 2))
        dense_mlp = (sum(gemm.us("fp8", t, n, k) for n, k in DENSE_MLP)
                     - _bytes_us(sum(n * k for n, k in DENSE_MLP)))
        if mla:
            block = _min(mla, batch_size=t, num_heads=16, step=1024, gemm_type="fp8_block",
                         kv_cache_dtype="bfloat16")
        else:
            block = (sum(gemm.us("fp8_block", t, n, k) for n, k in MLA_GEMMS)
                     + sum(_us(r["latency"]) for r in bmm if r["num_tokens"] == t
                           and r["num_heads"] == 16 and r["bmm_dtype"] == "bfloat16")
                     + _min(kernel, batch_size=t, num_heads=16, step=1023,
                            kv_cache_dtype="bfloat16"))
        mla_extra = block - _bytes_us(MLA_WEIGHT_BYTES + t * 1024 * 576 * 2) - dense_attn
        touched = EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** t)
        fused = _min(moe, num_tokens=t, moe_dtype="fp8_block", hidden_size=HIDDEN,
                     inter_size=INTER, topk=TOP_K, num_experts=EXPERTS, moe_tp_size=8,
                     moe_ep_size=1, distribution="power_law_1.01")
        moe_extra = fused - _bytes_us(touched * EXPERT_BYTES) - dense_mlp
        out.append((t, round(mla_extra, 1), round(moe_extra, 1)))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    root = Path(argv[0])
    for (family, gpu), tabs in TABLES.items():
        rows = family_rows(root, gpu, tabs)
        print(f"{family} on {GPUS[gpu][0]}: t {tuple(r[0] for r in rows)}")
        print(f"  mla_extra_us {tuple(r[1] for r in rows)}")
        print(f"  moe_extra_us {tuple(r[2] for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
