"""How fast `kvplan sweep` plans: in-process plans per second, and the whole command, cold.

    python benchmarks/sweep_speed.py [runs]

In-process: kvplan.sweep() over the whole GPU catalogue (vLLM, up to 8 GPUs, the checkpoint's
own format) for every dense model size of the catalogue and MoE and MLA models, after one
warm-up sweep of another model; then the same sweep on every engine (`--engine all`, thousands
of candidates), cold, in seconds.
"cold": each run loads the model afresh and clears the allocator-replay memo, so nothing
memoised before helps (weights and KV layouts are worked out anew), and collects the garbage of
the runs before it first (a new `kvplan sweep` process starts with none); "warm": the same sweep
again on that object.
"plans/s" counts the candidates planned in full (pruned ones are not counted), per second of
this process's CPU time (the machine may be shared; wall time is shown for the command); each
figure is the median of `runs` runs. A plan's
concurrency table (performance.by_concurrency), its serve line (command) and, with a target, the
fix-it alternatives a missed target lists (the problem's message, the option's reasons) are
worked out when first read or serialized, so the in-process sweep works out none; nor the
result's list of the candidates pruned as too large (read after the clock stops here); the
command's --json output works out every option's and the whole pruned list.
Command: `python -m kvplan sweep MODEL … --json` wall time, a new interpreter each run.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's kvplan, not an installed one

# every dense size of the catalogue (1B … 405B), then MoE and MLA models
MODELS = [("dense", "meta-llama/Llama-3.2-1B-Instruct"),
          ("dense", "meta-llama/Llama-3.1-8B-Instruct"), ("dense", "Qwen/Qwen2.5-32B-Instruct"),
          ("dense", "meta-llama/Llama-3.1-70B-Instruct"), ("dense", "meta-llama/Llama-3.1-405B"),
          ("MoE", "Qwen/Qwen3-235B-A22B"), ("MoE", "Qwen/Qwen3-30B-A3B"),
          ("MLA", "deepseek-ai/DeepSeek-V2-Lite")]
# sweeps of thousands of candidates: every registry engine (--engine all)
LARGE = ["meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"]
MAX_MODEL_LEN = 32768
# the checkpoint's own format only (a sweep told no format tries fp8 too on fp8-native GPUs)
OWN: dict[str, Any] = {"max_model_len": MAX_MODEL_LEN, "kv_cache_dtype": "auto"}
CMD = ["sweep", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "32768",
       "--target-concurrency", "40", "--avg-input-tokens", "3000", "--avg-output-tokens", "400"]


def in_process(runs: int) -> None:
    import kvplan
    from kvplan.model import weights
    from kvplan.sources.catalog import find_model_entry, load_catalog_model
    from kvplan.specs import ModelSpec, Workload

    workload = Workload(target_concurrency=40, avg_input_tokens=3000, avg_output_tokens=400)
    # warm the interpreter on every code path (imports, engines, misses) with another model
    def load(ref: str) -> ModelSpec:
        entry = find_model_entry(ref)
        if entry is None:
            raise LookupError(f"{ref} is not in the catalogue")
        return load_catalog_model(entry)

    kvplan.sweep(load("qwen2.5-7b"), workload=workload, **OWN)
    for kind, ref in MODELS:
        cold: list[float] = []
        warm: list[float] = []
        for _ in range(runs):
            m = load(ref)  # a new object: cold per-model caches
            weights._replayed.cache_clear()  # and no allocator replay or fused name from before
            weights.fused_name.cache_clear()
            for rates in (cold, warm):  # the second sweep reuses that model's caches
                # the previous sweep's garbage is collected before the clock starts, as a new
                # `kvplan sweep` process would never see it (else its collection lands in this one)
                gc.collect()
                start = time.process_time()  # CPU time: the machine may be shared
                r = kvplan.sweep(m, workload=workload, **OWN)
                rates.append(len(r.options) / (time.process_time() - start))
        print(f"{kind:5} {ref:38} {len(r.options):4} planned + {len(r.pruned):3} pruned: "
              f"median {statistics.median(cold):,.0f} plans/s cold, "
              f"{statistics.median(warm):,.0f} warm")
    for ref in LARGE:
        seconds: list[float] = []
        for _ in range(runs):
            m = load(ref)
            weights._replayed.cache_clear()
            weights.fused_name.cache_clear()
            gc.collect()
            start = time.process_time()
            r = kvplan.sweep(m, workload=workload, **OWN, engine="all")
            seconds.append(time.process_time() - start)
        s = statistics.median(seconds)
        print(f"all   {ref:38} {len(r.options):4} planned + {len(r.pruned):3} pruned: "
              f"median {s:.2f} s cold ({len(r.options) / s:,.0f} plans/s), --engine all")


def command(runs: int) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cli_speed import BARE, measure

    walls, cpus = measure([sys.executable, "-m", "kvplan", *CMD, "--json"], runs)
    bare_walls, bare_cpus = measure(BARE, runs)
    print(f"`kvplan {' '.join(CMD[:2])} …` (whole catalogue, --json): median "
          f"{statistics.median(walls) * 1000:,.0f} ms wall (worst {max(walls) * 1000:,.0f}), "
          f"{statistics.median(cpus) * 1000:,.0f} ms CPU over {runs} runs; bare `python -c pass` "
          f"{statistics.median(bare_walls) * 1000:,.0f} ms wall, "
          f"{statistics.median(bare_cpus) * 1000:,.0f} ms CPU")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    in_process(n)
    command(n)
