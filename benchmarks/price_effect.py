"""What the default prices do to the sweep's AMD-vs-NVIDIA ranking: the cheapest option of each
vendor that meets the target (H100 SXM, H200 SXM, MI300X; $/M output tokens as the sweep ranks
them, the pessimistic end of the band), under the bundled prices (gpu_specs/prices.csv) and
under the table they replaced, and what the MEASURED throughput ratios (docs/performance.md)
make of each price table. Writes the block between the price-effect markers in docs/sweep.md.

    python benchmarks/price_effect.py            # rewrite the block
    python benchmarks/price_effect.py --check    # exit 1 if the block is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "sweep.md"
START, END = "<!-- price-effect:start -->", "<!-- price-effect:end -->"

MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-32B-Instruct",
          "meta-llama/Llama-3.1-70B-Instruct")
CONCURRENCY = (32, 64, 128)
GPUS = ("h100-sxm-80gb", "h200-sxm-141gb", "mi300x")
TOP_MODEL, TOP = "meta-llama/Llama-3.1-70B-Instruct", 6

# The default table this one replaced (gpu_specs/prices.csv before the prices change): NVIDIA from
# deploybase.ai's RunPod article of 2026-03-10 (its "on-demand" column is not RunPod's list
# price), MI300X from a research note's TensorWave figure of 2026-05-18.
OLD = {"h100-sxm-80gb": 4.76, "h200-sxm-141gb": 6.35, "mi300x": 1.50}
OLD_LABEL = "old (RunPod via deploybase.ai / TensorWave)"

# Measured throughput per GPU, MI300X ÷ H100 SXM (docs/performance.md, cross-vendor table): MLPerf
# Inference v4.1 Llama-2-70B Offline, TP1 (0.959, 0.983); Azure's AI-benchmarking-guide
# Llama-3.1-70B FP8 TP8, six ISL/OSL (0.900-0.945).
MEASURED = (("MLPerf v4.1 Llama-2-70B, TP1", 0.959), ("Azure Llama-3.1-70B FP8, TP8", 0.905))


def _best(result: object, vendor: str) -> tuple[str, float] | None:
    from kvplan.sources.catalog import resolve_gpu

    for o in result.options:  # type: ignore[attr-defined]  # ranked best first
        if not o.meets_target or o.cost_per_million_output_tokens_high is None:
            continue
        if resolve_gpu(o.gpu).vendor == vendor:
            short = o.gpu.split("-")[0]
            return f"{short} ×{o.count} {o.weights_format}", o.cost_per_million_output_tokens_high
    return None


def _cell(best: tuple[str, float] | None) -> str:
    return "—" if best is None else f"{best[0]} {best[1]:.2f}"


def _ratio(n: tuple[str, float] | None, a: tuple[str, float] | None) -> str:
    return "—" if n is None or a is None else f"{n[1] / a[1]:.2f}"


def block() -> str:
    import kvplan
    from kvplan.sources.catalog import resolve_gpu
    from kvplan.sources.prices import default_prices
    from kvplan.specs import Workload

    new = default_prices(resolve_gpu)
    rows = ["| model | concurrent | NVIDIA best, old $/M | AMD best, old $/M | NVIDIA ÷ AMD, old "
            "| NVIDIA best, new $/M | AMD best, new $/M | NVIDIA ÷ AMD, new |",
            "|---|---:|---|---|---:|---|---|---:|"]
    for model in MODELS:
        for c in CONCURRENCY:
            cells = []
            for prices in (OLD, None):
                r = kvplan.sweep(model, gpus=list(GPUS), workload=Workload(target_concurrency=c),
                                 prices=prices, offline=True)
                n, a = _best(r, "NVIDIA"), _best(r, "AMD")
                cells += [_cell(n), _cell(a), _ratio(n, a)]
            rows.append(f"| {model.split('/')[1]} | {c} | " + " | ".join(cells) + " |")
    top: list[list[str]] = []
    for prices in (OLD, None):
        r = kvplan.sweep(TOP_MODEL, gpus=list(GPUS), workload=Workload(target_concurrency=64),
                         prices=prices, offline=True)
        top.append([f"{o.gpu.split('-')[0]} ×{o.count} {o.weights_format} "
                    f"{o.cost_per_million_output_tokens_high:.2f}"
                    for o in r.options if o.meets_target
                    and o.cost_per_million_output_tokens_high is not None][:TOP])
    rows += ["", f"{TOP_MODEL}, 64 concurrent: the sweep's top {TOP} ($/M output tokens):", "",
             "| rank | old prices | new prices |", "|---:|---|---|",
             *(f"| {i + 1} | {o} | {n} |" for i, (o, n) in enumerate(zip(*top, strict=True)))]
    h100, mi300x = new["h100-sxm-80gb"].usd_per_hour, new["mi300x"].usd_per_hour
    old_ratio, new_ratio = OLD["h100-sxm-80gb"] / OLD["mi300x"], h100 / mi300x
    lines = [
        f"Per-GPU price, H100 SXM ÷ MI300X: {OLD_LABEL} {old_ratio:.2f}×, new "
        f"(Crusoe Cloud, both vendors) {new_ratio:.2f}×. What the measured throughput ratios "
        "make of each table (H100 $/M output tokens ÷ MI300X $/M = price ratio × measured "
        "MI300X/H100 throughput):",
        "",
        "| measured MI300X ÷ H100 throughput | H100 ÷ MI300X cost, old prices | "
        "H100 ÷ MI300X cost, new prices |",
        "|---|---:|---:|",
        *(f"| {name}: {t:.3f} | {old_ratio * t:.2f} | {new_ratio * t:.2f} |"
          for name, t in MEASURED),
        "",
        "The sweep (kvplan's own throughput figures, `--gpus " + ",".join(GPUS) + "`, "
        "`--target-concurrency` as shown, default lengths, best option of each vendor that "
        "meets the target; $/M output tokens at the pessimistic end of the band, as ranked):",
        "",
        *rows,
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/sweep.md is stale")
    args = ap.parse_args()
    text = DOC.read_text(encoding="utf-8")
    if START not in text or END not in text:
        print(f"{DOC.name}: the markers {START} / {END} are missing", file=sys.stderr)
        return 2
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{block()}\n{END}{tail}"
    if args.check:
        if new != text:
            print(f"{DOC.name}: the price-effect block is stale; run python "
                  "benchmarks/price_effect.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
