"""Speed of kvplan.perf.step: µs per evaluate() and ms per concurrency table (1, 2, 4, … 1024).

    python benchmarks/perf_speed.py

Targets (issue): one evaluation ≤ 1 ms; a concurrency table ≤ 20 ms. Context construction
(once per deployment, from the tensor enumeration) is timed separately.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvplan.perf import step as perf  # noqa: E402
from kvplan.sources.catalog import resolve_gpu, resolve_model  # noqa: E402

CASES = [("meta-llama/Llama-3.1-8B-Instruct", "vllm", 1), ("Qwen/Qwen3-30B-A3B", "sglang", 2),
         ("meta-llama/Llama-3.1-70B", "vllm", 4)]


def best_of(fn, repeat: int = 5, number: int = 200) -> float:
    """Best mean seconds per call over `repeat` runs of `number` calls."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return min(times)


def main() -> None:
    gpu = resolve_gpu("h100-sxm-80gb")
    print(f"{'model':36s} {'engine':7s} tp  context_for ms  evaluate µs  table(1..1024) ms")
    for model, engine, tp in CASES:
        m = resolve_model(model)
        version = "0.12.0" if engine == "vllm" else "0.5.6"
        args = (m, gpu, engine, version)
        t_ctx = best_of(lambda a=args, t=tp: perf.context_for(*a, tp=t), 3, 5)
        ctx = perf.context_for(*args, tp=tp)
        t_eval = best_of(lambda c=ctx: perf.evaluate(c, concurrency=64, input_tokens=2048,
                                                     output_tokens=512))
        t_table = best_of(lambda c=ctx: perf.concurrency_table(c, 2048, 512, 1024), 5, 50)
        print(f"{model:36s} {engine:7s} {tp:2d}  {t_ctx * 1e3:13.2f}  {t_eval * 1e6:11.1f}  "
              f"{t_table * 1e3:17.3f}")


if __name__ == "__main__":
    main()
