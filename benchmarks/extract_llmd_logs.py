"""Turn raw vLLM start-up logs into rows of the calibration CSV schema.

    python benchmarks/extract_llmd_logs.py DIR_OF_LOGS > benchmarks/data/vllm_llmd_extra.csv

Written for the llm-d-planner accuracy sweep (github.com/llm-d-incubation/llm-d-planner,
accuracy/results/v0.19.0/logs at commit d3121e059da88662db39a926a3ead964be97359b): vLLM 0.19.0
on H100 80GB with DEBUG profiling lines. Every value is read from a log line; nothing is
filled in. Logs already in vllm_calibration.csv are skipped.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

BASE = ("https://github.com/llm-d-incubation/llm-d-planner/blob/"
        "d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/")
FIELDS = ["source", "vllm_version", "model", "quantization", "dtype", "kv_cache_dtype", "gpu",
          "num_gpus", "tensor_parallel_size", "pipeline_parallel_size", "gpu_total_gib",
          "gpu_memory_utilization", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
          "enforce_eager", "block_size", "weights_gib", "non_torch_gib", "activation_peak_gib",
          "kv_cache_gib", "kv_cache_tokens", "gpu_blocks", "max_concurrency", "cuda_graph_gib",
          "error_text", "notes"]


def first(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    return m.group(1) if m else ""


def row(path: Path) -> dict[str, str]:
    t = path.read_text(errors="replace")
    cfg = first(r"Initializing a V1 LLM engine \(v[\d.]+\) with config: (.*)", t)
    tp = first(r"tensor_parallel_size=(\d+)", cfg)
    pp = first(r"pipeline_parallel_size=(\d+)", cfg)
    quant = first(r"quantization=([\w-]+)", cfg)
    prefix = first(r"'enable_prefix_caching': (\w+)", t)
    return {
        "source": BASE + path.name,
        "vllm_version": first(r"Initializing a V1 LLM engine \(v([\d.]+)\)", t),
        "model": first(r"model='([^']+)'", cfg),
        "quantization": "none" if quant in ("", "None") else quant,
        "dtype": first(r"dtype=torch\.(\w+)", cfg),
        "kv_cache_dtype": first(r"kv_cache_dtype=(\w+)", cfg),
        "gpu": "NVIDIA H100 80GB HBM3",
        "num_gpus": str(int(tp or 1) * int(pp or 1)),
        "tensor_parallel_size": tp, "pipeline_parallel_size": pp,
        "gpu_total_gib": first(r"Free memory on device \([\d.]+/([\d.]+) GiB\)", t),
        "gpu_memory_utilization": first(r"Desired GPU memory utilization is \(([\d.]+),", t),
        "max_model_len": first(r"max_seq_len=(\d+)", cfg),
        "max_num_seqs": first(r"max_num_seqs to (\d+)", t) or first(r"'max_num_seqs': (\d+)", t),
        "max_num_batched_tokens": first(r"max_num_batched_tokens=(\d+)", t),
        "enforce_eager": first(r"enforce_eager=(\w+)", cfg),
        "block_size": "",
        "weights_gib": first(r"Model loading took ([\d.]+) GiB", t),
        "non_torch_gib": first(r"non-torch forward increase memory: ([\d.]+)GiB", t),
        "activation_peak_gib": first(r"torch peak memory increase: ([\d.]+)GiB", t),
        "kv_cache_gib": first(r"Available KV cache memory: ([\d.]+) GiB", t),
        "kv_cache_tokens": first(r"GPU KV cache size: ([\d,]+) tokens", t).replace(",", ""),
        "gpu_blocks": "",
        "max_concurrency": first(
            r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", t),
        "cuda_graph_gib": first(r"Estimated CUDA graph memory: ([\d.]+) GiB total", t),
        "error_text": "",
        "notes": (f"llm-d-planner accuracy sweep raw vLLM log; enable_prefix_caching={prefix}; "
                  "values read from the DEBUG profile lines (Worker 0 / EngineCore)"),
    }


def main() -> None:
    calibration = Path(__file__).parent / "data" / "vllm_calibration.csv"
    known = {r["source"] for r in csv.DictReader(open(calibration))}
    out = csv.DictWriter(sys.stdout, fieldnames=FIELDS, lineterminator="\n")
    out.writeheader()
    for path in sorted(Path(sys.argv[1]).glob("*.log")):
        r = row(path)
        if r["source"] in known or not r["kv_cache_tokens"]:
            continue
        out.writerow(r)


if __name__ == "__main__":
    main()
