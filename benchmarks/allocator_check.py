"""Check kvplan's caching-allocator replay against PyTorch's real allocator on a GPU.

    python benchmarks/allocator_check.py export seqs.json           # here: what to allocate
    python benchmarks/allocator_check.py replay seqs.json out.json  # on a CUDA machine, torch only
    python benchmarks/allocator_check.py compare [out.json]         # here: kvplan vs measured

`export` writes, for every bundled model at TP 1/2/4/8 (and Llama-3.1-8B in fp16 and fp32)
that fits in 120 GiB, the bytes one TP rank allocates while vLLM builds the model
(kvplan.weights.stage_allocations). `replay` performs those allocations with torch.empty in
that order on a fresh process, builds the RoPE cache with the device ops of vLLM's
RotaryEmbedding (arange, einsum, cos, sin, cat, then .to(dtype)), and records
torch.cuda.memory_allocated() and, after empty_cache(), memory_reserved(). `compare` replays
the same lists through kvplan.weights.replay_allocations and prints the differences.

The measured file of a real run is benchmarks/data/allocator_h200.json (one configuration per
line); tests/model/test_allocator.py checks kvplan's replay against it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "allocator_h200.json"
ROPE_BUILD = -1  # kvplan.weights.ROPE_BUILD, repeated so that `replay` needs torch alone
LIMIT_BYTES = 120 * 2**30


def encode(sizes: list[int]) -> dict:
    """A sequence as head + body × repeat + tail, the longest repeated run found (decoder
    layers repeat), so the data file stays readable."""
    best = (0, 0, 0, 0)  # covered, start, period, repeat
    for s in range(min(len(sizes), 60)):
        for p in range(1, min(80, len(sizes) - s) + 1):
            n = 1
            while sizes[s + n * p:s + (n + 1) * p] == sizes[s:s + p]:
                n += 1
            if n > 1 and p * n > best[0]:
                best = (p * n, s, p, n)
    _, s, p, n = best
    if not n:
        return {"head": sizes}
    return {"head": sizes[:s], "body": sizes[s:s + p], "repeat": n, "tail": sizes[s + p * n:]}


def decode(d: dict) -> list[int]:
    return d["head"] + d.get("body", []) * d.get("repeat", 0) + d.get("tail", [])


def export(path: str) -> None:
    sys.path.insert(0, str(HERE.parent))
    from kvplan.model.weights import stage_allocations
    from kvplan.sources.catalog import load_catalog_model, model_entries

    configs = []
    for entry in model_entries():
        m = load_catalog_model(entry)
        if m.unsupported:
            continue
        variants = [(tp, "bfloat16") for tp in (1, 2, 4, 8)]
        if entry.id == "meta-llama/Llama-3.1-8B-Instruct":
            variants += [(1, "float16"), (1, "float32")]
        for tp, dtype in variants:
            if m.num_attention_heads % tp:
                continue
            (sizes,) = stage_allocations(m, tp=tp, pp=1, dtype=dtype, quant=m.quantization)
            if sum(n for n in sizes if n > 0) <= LIMIT_BYTES:
                configs.append({"label": f"{entry.id} tp{tp} {dtype}", "dtype": dtype,
                                "rope_positions": m.rope_cache_positions,
                                "rotary_dim": m.rotary_dim,
                                "sizes": encode(sizes)})
    Path(path).write_text(json.dumps(configs))
    print(f"{len(configs)} configurations written to {path}")


def replay(seqs_path: str, out_path: str) -> None:
    import os
    import subprocess

    # torch is on the GPU machine only (and typed there)
    import torch  # type: ignore[import-not-found, unused-ignore]

    dev = torch.device("cuda")
    dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}

    def cos_sin_cache(positions: int, rotary_dim: int) -> torch.Tensor:
        # The op sequence of vLLM's RotaryEmbedding._compute_cos_sin_cache on the device; the
        # locals are released when this frame ends, as there.
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rotary_dim, 2, dtype=torch.float, device=dev)
                                      / rotary_dim))
        t = torch.arange(positions, dtype=torch.float, device=dev)
        freqs = torch.einsum("i,j -> ij", t, inv_freq)
        cos = freqs.cos()
        sin = freqs.sin()
        cache = torch.cat((cos, sin), dim=-1)
        return cache

    def build(cfg: dict) -> tuple[int, int]:
        live = []
        for n in decode(cfg["sizes"]):
            if n != ROPE_BUILD:
                live.append(torch.empty(n, dtype=torch.uint8, device=dev))
            elif cfg["rope_positions"] and cfg["rotary_dim"]:
                # .to() allocates while the fp32 cache is alive, then the fp32 one is freed
                live.append(cos_sin_cache(cfg["rope_positions"], cfg["rotary_dim"])
                            .to(dtypes[cfg["dtype"]]))
        torch.cuda.synchronize()
        allocated = torch.cuda.memory_allocated()
        torch.cuda.empty_cache()
        reserved = torch.cuda.memory_reserved()
        live.clear()
        torch.cuda.empty_cache()
        assert torch.cuda.memory_reserved() == 0, "a tensor outlived its configuration"
        return allocated, reserved

    configs = json.loads(Path(seqs_path).read_text())
    rows = []
    for cfg in configs:
        allocated, reserved = build(cfg)
        rows.append({**cfg, "allocated": allocated, "reserved": reserved})
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip()
    header = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cuda": torch.version.cuda, "driver": driver,
              "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
              "method": "benchmarks/allocator_check.py replay: one process, configurations in "
                        "order, each starting from an empty allocator (reserved 0)"}
    lines = [json.dumps(r, separators=(",", ":")) for r in rows]
    Path(out_path).write_text('{"run": ' + json.dumps(header) + ',\n"configs": [\n'
                              + ",\n".join(lines) + "\n]}\n")
    print(f"{header['gpu']}, torch {header['torch']}: {len(rows)} configurations measured")


def kvplan_counts(row: dict) -> tuple[int, int]:
    """kvplan's (allocated, reserved after empty_cache) bytes for one measured configuration."""
    sys.path.insert(0, str(HERE.parent))
    from kvplan.model.weights import replay_allocations

    a = replay_allocations(decode(row["sizes"]), row["dtype"], row["rope_positions"],
                           row["rotary_dim"])
    allocated = a.allocated_bytes
    a.empty_cache()
    return allocated, a.reserved_bytes


def compare(out_path: str = str(DATA)) -> None:
    data = json.loads(Path(out_path).read_text())
    run = data["run"]
    print(f"{run['gpu']}, torch {run['torch']}, CUDA {run['cuda']}, driver {run['driver']}")
    print(f"{'configuration':56} {'kvplan − measured, MiB':>24}")
    exact = 0
    for r in data["configs"]:
        allocated, reserved = kvplan_counts(r)
        da, dr = allocated - r["allocated"], reserved - r["reserved"]
        exact += da == dr == 0
        print(f"{r['label']:56} allocated {da / 2**20:+8.3f} reserved {dr / 2**20:+8.3f}")
    print(f"byte-exact (allocated and reserved): {exact} of {len(data['configs'])} configurations")


if __name__ == "__main__":
    cmd, *args = sys.argv[1:] or ["help"]
    commands: dict[str, Callable[..., None]] = {"export": export, "replay": replay,
                                                "compare": compare}
    commands.get(cmd, lambda *_: print(__doc__))(*args)
