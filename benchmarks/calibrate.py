"""Derive the few empirical constants of kvplan/engines/vllm.py from the calibration logs.

    python benchmarks/calibrate.py

Uses only rows kvplan models (bundled config, stated version) and the quantities their DEBUG
profile lines state. Prints each fitted value next to the one in the code; update the code by
hand (with this output in the commit message) when rows are added.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rowdata import load_rows  # noqa: E402

from kvplan.catalog import find_model_entry, load_catalog_model  # noqa: E402
from kvplan.engines import vllm  # noqa: E402
from kvplan.units import DTYPE_BYTES, GiB, MiB  # noqa: E402


def main() -> None:
    rows = [r for r in load_rows() if r["vllm_version"]]
    sampler, forward, forward_v0, nt_tp1, nt_pp, nt_tp, graphs = [], [], [], [], [], [], []
    for r in rows:
        entry = find_model_entry(r["model"])
        if entry is None:
            continue
        m = load_catalog_model(entry)
        if m.unsupported:
            continue
        if not r["max_num_batched_tokens"]:
            # V0-era rows: the profile prefills max(max_model_len, 2048) tokens as one batch;
            # they fit their own forward constant and nothing else.
            # Rows whose peak is V0's sampler (derived from the code, not fitted) are skipped.
            if r["activation_peak_gib"] and vllm.select_era(r["vllm_version"])[0].v0:
                tp = int(r["tensor_parallel_size"] or 1)
                tokens = max(int(r["max_model_len"]), 2048)
                act = float(r["activation_peak_gib"]) * GiB
                sampler_v0 = (tokens * m.hidden_size * 2 + min(256, tokens) * m.vocab_size
                              * (2 + vllm.SAMPLER_V0_BYTES_PER_LOGIT_BEYOND_DTYPE))
                if sampler_v0 >= 0.95 * act:
                    continue
                width = m.intermediate_size // tp
                forward_v0.append((act / (tokens * 2) - 3 * width) / m.hidden_size)
            continue
        tp, pp = int(r["tensor_parallel_size"]), int(r["pipeline_parallel_size"])
        tokens, seqs = int(r["max_num_batched_tokens"]), int(r["max_num_seqs"])
        dt = DTYPE_BYTES[r["dtype"]]
        act = float(r["activation_peak_gib"]) * GiB
        width = m.intermediate_size // tp
        if m.moe:
            width = m.moe.top_k * m.moe.expert_intermediate_size // tp
        if pp > 1:  # the PP0 profile has no sampler: pure forward peak
            forward.append((act / (tokens * dt) - 3 * width) / m.hidden_size)
        elif dt == 2 and m.moe is None:  # sampler-dominated rows
            sampler.append((act - tokens * m.hidden_size * dt) / (min(seqs, tokens) * m.vocab_size))
        nt = float(r["non_torch_gib"])
        (nt_pp if pp > 1 else nt_tp if tp > 1 else nt_tp1).append(nt)
        est = re.search(r"estimated CUDA graph memory ([\d.]+) GiB", r["notes"])
        if est:
            layers = m.num_layers // pp
            d = vllm.Deployment(engine_version="0", dtype="bfloat16", kv_cache_dtype="bfloat16",
                                max_model_len=int(r["max_model_len"]), max_num_seqs=seqs,
                                max_num_batched_tokens=tokens, gpu_memory_utilization=0.9,
                                block_size=16, gpu_total_bytes=1, sources={})
            graphs.append((layers * vllm.cudagraph_capture_sizes(d), float(est.group(1)) * GiB))

    def show(name: str, fitted: float, current: float) -> None:
        print(f"{name:34s} fitted {fitted:12.4f}   in code {current:12.4f}")

    show("SAMPLER_BYTES_PER_LOGIT", statistics.median(sampler), vllm.SAMPLER_BYTES_PER_LOGIT)
    show("FORWARD_HIDDEN_BUFFERS", statistics.median(forward), vllm.FORWARD_HIDDEN_BUFFERS)
    show("FORWARD_HIDDEN_BUFFERS_V0", statistics.median(forward_v0), vllm.FORWARD_HIDDEN_BUFFERS_V0)
    show("NON_TORCH_BYTES_TP1 (GiB)", statistics.median(nt_tp1), vllm.NON_TORCH_BYTES_TP1 / GiB)
    show("NON_TORCH_BYTES_PP_ONLY (GiB)", statistics.median(nt_pp), vllm.NON_TORCH_BYTES_PP_ONLY / GiB)
    show("NON_TORCH_BYTES_TP_NVSWITCH (GiB)", statistics.median(nt_tp) - statistics.median(nt_tp1),
         vllm.NON_TORCH_BYTES_TP_NVSWITCH_MEASURED / GiB)
    # Least squares: graph bytes = pool + per × (layers × capture sizes).
    xs, ys = [g[0] for g in graphs], [g[1] for g in graphs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    per = sum((x - mx) * (y - my) for x, y in graphs) / sum((x - mx) ** 2 for x in xs)
    show("CUDAGRAPH_POOL_BYTES (GiB)", (my - per * mx) / GiB, vllm.CUDAGRAPH_POOL_BYTES / GiB)
    show("CUDAGRAPH_BYTES_PER_LAYER_GRAPH (MiB)", per / MiB, vllm.CUDAGRAPH_BYTES_PER_LAYER_GRAPH / MiB)
    print(f"\nrows: sampler {len(sampler)}, forward {len(forward)} (V0: {len(forward_v0)}), non-torch "
          f"{len(nt_tp1)}/{len(nt_pp)}/{len(nt_tp)}, graph estimates {len(graphs)}")


if __name__ == "__main__":
    main()
