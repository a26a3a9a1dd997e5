"""Derive the few empirical constants of kvplan/forward.py and kvplan/engines/vllm.py from the
calibration logs.

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
sys.path[:0] = [str(HERE.parent), str(HERE)]  # also under PYTHONSAFEPATH=1

from rowdata import load_rows  # noqa: E402

from kvplan.engines import vllm  # noqa: E402
from kvplan.model import forward as fwd  # noqa: E402
from kvplan.sources.catalog import find_model_entry, load_catalog_model  # noqa: E402
from kvplan.units import DTYPE_BYTES, GiB, MiB  # noqa: E402


def fit(rows: list[dict[str, str]]) -> tuple[dict[str, float], dict[str, int]]:
    """The constants fitted on `rows` (vllm.py attribute name → value in the code's units: bytes
    for *_BYTES*, plain numbers otherwise), and how many rows fed each group."""
    rows = [r for r in rows if r["vllm_version"]]
    sampler: list[float] = []
    forward: list[float] = []
    forward_v0: list[float] = []
    nt_tp1: list[float] = []
    nt_pp: list[float] = []
    nt_tp: list[float] = []
    graphs: list[tuple[int, float]] = []
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
            graphs.append((layers * fwd.cudagraph_capture_sizes(d), float(est.group(1)) * GiB))

    xs, ys = [g[0] for g in graphs], [g[1] for g in graphs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    per = sum((x - mx) * (y - my) for x, y in graphs) / sum((x - mx) ** 2 for x in xs)
    fitted = {
        "SAMPLER_BYTES_PER_LOGIT": statistics.median(sampler),
        "FORWARD_HIDDEN_BUFFERS": statistics.median(forward),
        "FORWARD_HIDDEN_BUFFERS_V0": statistics.median(forward_v0),
        "NON_TORCH_BYTES_TP1": int(statistics.median(nt_tp1) * GiB),
        "NON_TORCH_BYTES_PP_ONLY": int(statistics.median(nt_pp) * GiB),
        # Least squares: graph bytes = pool + per × (layers × capture sizes).
        "CUDAGRAPH_POOL_BYTES": int(my - per * mx),
        "CUDAGRAPH_BYTES_PER_LAYER_GRAPH": int(per),
    }
    nt_nvswitch = statistics.median(nt_tp) - statistics.median(nt_tp1)
    return fitted | {"_nt_tp_above_tp1_gib": nt_nvswitch}, {
        "sampler": len(sampler), "forward": len(forward), "forward_v0": len(forward_v0),
        "non-torch tp1": len(nt_tp1), "non-torch pp": len(nt_pp), "non-torch tp": len(nt_tp),
        "graph estimates": len(graphs)}


def main() -> None:
    fitted, counts = fit(load_rows())
    for name, value in fitted.items():
        if name.startswith("_"):
            continue
        current = getattr(vllm, name)
        unit, scale = {"NON_TORCH_BYTES_TP1": (" (GiB)", GiB),
                       "NON_TORCH_BYTES_PP_ONLY": (" (GiB)", GiB),
                       "CUDAGRAPH_POOL_BYTES": (" (GiB)", GiB),
                       "CUDAGRAPH_BYTES_PER_LAYER_GRAPH": (" (MiB)", MiB)}.get(name, ("", 1))
        print(f"{name + unit:40s} fitted {value / scale:12.4f}   in code {current / scale:12.4f}")
    print(f"{'TP>1 non-torch above TP1, median (GiB)':40s} "
          f"measured {fitted['_nt_tp_above_tp1_gib']:10.4f}   "
          "(not fitted: engines/interconnect.py derives it from the GPU's link)")
    print("\nrows: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
