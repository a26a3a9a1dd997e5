"""Regenerate gpu_specs/ and model_specs/ from the workplace reference folder.

    python scripts/import_reference.py PATH/TO/shared/reference

Facts only: GPU rows from gpus.csv (with their sources), verbatim HF config.json files and the
parameter counts/sources from hf_configs/INDEX.md. The output is committed; kvplan never reads
the reference folder at run time.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20

# Driver-reserved memory to subtract from the nvidia-smi total when no cudaMemGetInfo total
# was found (reference/GPUS.md, "Recommendation for the planner": ≈550–700 MiB on Hopper/
# Blackwell datacenter parts, ≈450–850 MiB on A100/Ada datacenter parts, ≈350 MiB GeForce).
RESERVED_MIB_BY_CLASS = {"hopper-blackwell-dc": 625, "ampere-ada-dc": 650,
                         "geforce-workstation": 350}

# Exact cudaMemGetInfo totals measured in this workplace (GPUS.md: H200 150109880320 B).
EXACT_CUDA_TOTAL_BYTES = {"h200-sxm-141gb": 150_109_880_320}

# Short aliases people type. An alias may stand for the first of several variants only when no
# variant has less memory (so its capacity answer holds for all of them): `a100` is no alias,
# as the 40 GB part would halve the answer (kvplan lists the variants instead).
SHORT_ALIASES = {
    "h100-sxm-80gb": ["h100", "h100-sxm", "h100-80gb"],
    "h200-sxm-141gb": ["h200", "h200-sxm"],
    "a100-sxm-80gb": ["a100-80gb"],
    "a100-sxm-40gb": ["a100-40gb"],
    "b200": ["b200-180gb"],
    "h100-nvl-94gb": ["h100-nvl"],
    "mi300x": ["mi300x-192gb"],
}

# Product line of each part that is not a worldwide data-centre part (GpuSpec.segment): the
# vendor's workstation and GeForce/desktop pages, and the China-market export SKUs (notes).
SEGMENTS = {
    **dict.fromkeys(("h20-96gb", "h20-141gb", "h800-sxm-80gb", "a800-sxm-80gb"),
                    "data-centre-export"),
    **dict.fromkeys(("rtx-a6000", "rtx-6000-ada", "rtx-pro-6000-blackwell"), "workstation"),
    **dict.fromkeys(("rtx-3090", "rtx-4070-ti", "rtx-4080", "rtx-4090", "rtx-5090",
                     "dgx-spark-gb10"), "desktop"),
}


def _num(cell: str) -> tuple[float | None, bool]:
    cell = cell.strip()
    if not cell or cell in {"?", "N/A"}:
        return None, cell == "?"
    uncertain = cell.endswith("?")
    return float(cell.rstrip("?")), uncertain


def _reserved_class(row: dict[str, str]) -> str:
    name = row["name"].lower()
    if "geforce" in name or "rtx" in name:
        return "geforce-workstation"
    if row["arch"] in {"Hopper", "Blackwell", "Blackwell Ultra"}:
        return "hopper-blackwell-dc"
    return "ampere-ada-dc"


def import_gpus(ref: Path) -> None:
    out = ROOT / "gpu_specs"
    for old in out.glob("*.json"):
        old.unlink()
    with open(ref / "gpus.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        uncertain: list[str] = []

        def num(col: str, row: dict[str, str] = row, uncertain: list[str] = uncertain
                ) -> float | None:
            v, unc = _num(row[col])
            if unc:
                uncertain.append(col)
            return v

        smi = num("cuda_total_mib")
        torch_total = num("torch_total_mib")
        if row["id"] in EXACT_CUDA_TOTAL_BYTES:
            cuda_bytes: int | None = EXACT_CUDA_TOTAL_BYTES[row["id"]]
            cuda_source, estimated = row["torch_total_mib_source"], False
        elif torch_total:
            cuda_bytes = int(torch_total * MiB)
            cuda_source = row["torch_total_mib_source"]
            estimated = "torch_total_mib" in uncertain
        elif smi:
            cls = _reserved_class(row)
            reserved = RESERVED_MIB_BY_CLASS[cls]
            cuda_bytes = int((smi - reserved) * MiB)
            cuda_source = (
                f"estimated: nvidia-smi total {int(smi)} MiB minus a typical {reserved} MiB driver "
                f"reservation for {cls} GPUs (reference GPUS.md); pass --gpu-memory-gib with the "
                "total your vLLM log prints to be exact"
            )
            estimated = True
        else:
            cuda_bytes, cuda_source, estimated = None, "unknown: pass --gpu-memory-gib", True
        notes = row["notes"]
        smi_names: list[str] = []
        m = re.match(r"smi_name=(.*?)(?:\. |\.$| \(|$)", notes)
        if m:
            smi_names = re.findall(r"'([^']+)'", m.group(1))
        smi_names = [n for n in smi_names if not n.startswith("...")]
        tflops = {}
        for key, col in [("fp32", "fp32_tflops"), ("tf32", "tf32_tflops"),
                         ("bf16", "bf16_tflops_dense"), ("fp16", "fp16_tflops_dense"),
                         ("fp8", "fp8_tflops_dense"), ("int8", "int8_tops_dense"),
                         ("fp4", "fp4_tflops_dense")]:
            tflops[key] = num(col)
        pcie = num("pcie_gen")
        tdp = num("tdp_w")
        year = num("release_year")
        spec = {
            "id": row["id"],
            "vendor": row["vendor"],
            "segment": SEGMENTS.get(row["id"], "data-centre"),
            "name": row["name"],
            "arch": row["arch"],
            "compute_capability": row["compute_capability"] or None,
            "memory_gb_marketing": num("memory_gb_marketing"),
            "memory_type": row["memory_type"] or None,
            "smi_total_mib": int(smi) if smi else None,
            "smi_total_source": row["cuda_total_mib_source"] or None,
            "cuda_total_bytes": cuda_bytes,
            "cuda_total_source": cuda_source,
            "cuda_total_estimated": estimated,
            "smi_names": smi_names,
            "aliases": SHORT_ALIASES.get(row["id"], []),
            "bandwidth_tbps": num("bandwidth_tbps"),
            "tflops": tflops,
            "nvlink_gbps_per_gpu": num("nvlink_gbps_per_gpu"),
            "pcie_gen": int(pcie) if pcie else None,
            "tdp_w": tdp,
            "fp8_native": row["fp8_native"].startswith("yes"),
            "fp4_native": row["fp4_native"].startswith("yes"),
            "bf16_native": row["bf16_native"].startswith("yes"),
            "release_year": int(year) if year else None,
            "uncertain_fields": sorted(set(uncertain)),
            "sources": [s.strip() for s in row["source_urls"].split(";") if s.strip()],
            "notes": notes,
        }
        (out / f"{row['id']}.json").write_text(json.dumps(spec, indent=2, ensure_ascii=False)
                                               + "\n")
    print(f"wrote {len(rows)} GPU specs to {out}")


# Catalogue entries: reference file → (kvplan id, extra aliases). The Llama 3.1 repos were
# first published as meta-llama/Meta-Llama-3.1-* (the Hub redirects the old names). Only
# families whose attention layout and weights kvplan models completely are listed (dense or
# MoE GQA/MHA with full attention on every layer); sliding-window, MLA, hybrid and multimodal
# models join with the architecture work.
MODELS: dict[str, list[str]] = {
    "meta-llama--Llama-3.1-8B-Instruct.json": ["llama-3.1-8b-instruct", "llama3.1-8b",
                                               "meta-llama/Meta-Llama-3.1-8B-Instruct"],
    "meta-llama--Llama-3.1-8B.json": ["meta-llama/Meta-Llama-3.1-8B"],
    "meta-llama--Llama-3.1-70B-Instruct.json": ["llama-3.1-70b-instruct", "llama3.1-70b",
                                                "meta-llama/Meta-Llama-3.1-70B-Instruct"],
    "meta-llama--Llama-3.1-70B.json": ["meta-llama/Meta-Llama-3.1-70B"],
    "meta-llama--Llama-3.1-405B.json": ["llama-3.1-405b", "meta-llama/Meta-Llama-3.1-405B"],
    "meta-llama--Llama-3.2-1B-Instruct.json": ["llama-3.2-1b"],
    "meta-llama--Llama-3.2-3B-Instruct.json": ["llama-3.2-3b"],
    "meta-llama--Llama-3.3-70B-Instruct.json": ["llama-3.3-70b"],
    "meta-llama--Llama-2-7b-hf.json": ["llama-2-7b"],
    "meta-llama--Llama-2-70b-hf.json": ["llama-2-70b"],
    "nvidia--Llama-3.1-70B-Instruct-FP8.json": [],
    "Qwen--Qwen2.5-0.5B-Instruct.json": ["qwen2.5-0.5b"],
    "Qwen--Qwen2.5-7B-Instruct.json": ["qwen2.5-7b"],
    "Qwen--Qwen2.5-32B-Instruct.json": ["qwen2.5-32b"],
    "Qwen--Qwen3-0.6B.json": [],
    "Qwen--Qwen3-8B.json": [],
    "Qwen--Qwen3-32B.json": [],
    "Qwen--Qwen3-32B-FP8.json": [],
    "Qwen--Qwen3-30B-A3B.json": [],
    "Qwen--Qwen3-30B-A3B-FP8.json": [],
    "Qwen--Qwen3-235B-A22B.json": [],
    "mistralai--Mistral-7B-Instruct-v0.3.json": ["mistral-7b-instruct", "mistral-7b-v0.3"],
    "mistralai--Mixtral-8x7B-Instruct-v0.1.json": ["mixtral-8x7b-instruct", "mixtral-8x7b"],
    "mistralai--Mixtral-8x7B-v0.1.json": [],
    "mistralai--Mixtral-8x22B-Instruct-v0.1.json": ["mixtral-8x22b-instruct", "mixtral-8x22b"],
    "mistralai--Mixtral-8x22B-v0.1.json": [],
    "microsoft--phi-4.json": [],
    "01-ai--Yi-34B.json": [],
    "THUDM--glm-4-9b-chat.json": ["glm-4-9b"],
    # Sliding-window / hybrid attention
    "mistralai--Mistral-7B-v0.1.json": ["mistral-7b-v0.1"],
    "microsoft--Phi-3-mini-4k-instruct.json": ["phi-3-mini"],
    "google--gemma-2-9b-it.json": ["gemma-2-9b"],
    "google--gemma-2-27b-it.json": ["gemma-2-27b"],
    "google--gemma-3-4b-it.json": ["gemma-3-4b"],
    "google--gemma-3-27b-it.json": ["gemma-3-27b"],
    "openai--gpt-oss-20b.json": ["gpt-oss-20b"],
    "openai--gpt-oss-120b.json": ["gpt-oss-120b"],
    # MLA
    # INDEX.md: the Chat model's architecture fields match this base config (substitute).
    "deepseek-ai--DeepSeek-V2-Lite.json": ["deepseek-v2-lite", "deepseek-ai/DeepSeek-V2-Lite-Chat"],
    "deepseek-ai--DeepSeek-V3.json": ["deepseek-v3"],
    "deepseek-ai--DeepSeek-R1.json": ["deepseek-r1"],
    # Linear-attention hybrid
    # INDEX.md: the Instruct sibling equals this Thinking config in every field (substitute).
    "Qwen--Qwen3-Next-80B-A3B-Thinking.json": ["qwen3-next-80b",
                                               "Qwen/Qwen3-Next-80B-A3B-Instruct"],
    # Llama 4 (chunked local attention, MoE, vision tower)
    "meta-llama--Llama-4-Scout-17B-16E-Instruct.json": ["llama-4-scout"],
    "meta-llama--Llama-4-Maverick-17B-128E-Instruct.json": ["llama-4-maverick"],
    "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic.json": [],
}

# Published ("stated") sizes precise enough to test against, in parameters (INDEX.md column
# "Params: stated (source)"); coarse ones like "8B" or "70B" are kept as text only.
STATED_EXACT = {
    "meta-llama--Llama-3.2-1B-Instruct.json": 1.23e9,
    "meta-llama--Llama-3.2-3B-Instruct.json": 3.21e9,
    "Qwen--Qwen2.5-0.5B-Instruct.json": 0.49e9,
    "Qwen--Qwen2.5-7B-Instruct.json": 7.61e9,
    "Qwen--Qwen3-8B.json": 8.2e9,
    "Qwen--Qwen3-32B.json": 32.8e9,
    "Qwen--Qwen3-30B-A3B.json": 30.5e9,
    "microsoft--phi-4.json": 14.7e9,
    "01-ai--Yi-34B.json": 34.4e9,
    "THUDM--glm-4-9b-chat.json": 9.4e9,
    "google--gemma-2-9b-it.json": 9.24e9,
    "google--gemma-2-27b-it.json": 27.2e9,
    "google--gemma-3-27b-it.json": 27.4e9,  # incl. the vision tower
    "google--gemma-3-4b-it.json": 4e9,  # the name only
    "microsoft--Phi-3-mini-4k-instruct.json": 3.8e9,
    "openai--gpt-oss-20b.json": 20.9e9,
    "openai--gpt-oss-120b.json": 116.8e9,
    "deepseek-ai--DeepSeek-V2-Lite.json": 15.7e9,
    "Qwen--Qwen3-Next-80B-A3B-Thinking.json": 80e9,  # the name only
    "meta-llama--Llama-4-Scout-17B-16E-Instruct.json": 109e9,  # incl. the vision tower
    "meta-llama--Llama-4-Maverick-17B-128E-Instruct.json": 400e9,
}

# Reference counts that cover the language model only (INDEX.md "text …"): the catalogue
# test compares them with the count without the vision tower.
TEXT_ONLY_REFERENCE = {
    "google--gemma-3-27b-it.json", "meta-llama--Llama-4-Scout-17B-16E-Instruct.json",
    "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic.json",
}


# INDEX.md rows that say "as <other model>" for the parameter count.
SAME_PARAMS_AS_REFERENCE_OF = {
    "Qwen--Qwen3-32B-FP8.json": 32_762_123_264,  # "as Qwen3-32B"
    "Qwen--Qwen3-30B-A3B-FP8.json": 30_532_122_624,  # "as Qwen3-30B-A3B"
    "mistralai--Mixtral-8x7B-v0.1.json": 46_702_792_704,  # "as above" (8x7B-Instruct)
    "deepseek-ai--DeepSeek-R1.json": 671_026_419_200,  # "as V3"
    "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic.json": 107_769_861_120,  # "as Scout"
}


def _index_rows(ref: Path) -> dict[str, dict[str, str]]:
    rows: dict[str, dict[str, str]] = {}
    for line in (ref / "hf_configs" / "INDEX.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[1].endswith(".json"):
            for fname in re.findall(r"[\w.\-]+\.json", cells[1]):
                rows.setdefault(fname, {
                    "source": cells[2], "status": cells[3], "verified": cells[4],
                    "params": cells[5], "notes": cells[6],
                })
    return rows


# Configs the reference folder lacks, copied verbatim from a public source into
# scripts/extra_hf_configs/: file → (aliases, where the copy comes from, exact parameter count
# and where that count comes from).
EXTRA_MODELS: dict[str, tuple[list[str], str, int, str]] = {
    "Qwen--Qwen2.5-72B-Instruct.json": (
        ["qwen2.5-72b"],
        "GitHub copy: a public model report quoting the repo's config.json (search-index file id "
        "62544871882)",
        72_706_203_648,
        "72.7B (model card) / 72,706,203,648 summed over the checkpoint's 963 safetensors tensors "
        "in the same report"),
}
EXTRA_DIR = Path(__file__).resolve().parent / "extra_hf_configs"


def import_models(ref: Path) -> None:
    out = ROOT / "model_specs"
    cfg_dir = out / "configs"
    shutil.rmtree(cfg_dir, ignore_errors=True)
    cfg_dir.mkdir(parents=True)
    index = _index_rows(ref)
    entries = []
    for fname, aliases in MODELS.items():
        src = ref / "hf_configs" / fname
        shutil.copyfile(src, cfg_dir / fname)
        extra = fname.replace(".json", ".hf_quant_config.json")
        if (ref / "hf_configs" / extra).exists():
            shutil.copyfile(ref / "hf_configs" / extra, cfg_dir / extra)
        row = index[fname]
        computed = re.findall(r"/\s*([\d,]{9,})", row["params"])
        entries.append({
            "id": fname[: -len(".json")].replace("--", "/", 1),
            "config": f"configs/{fname}",
            "aliases": aliases,
            "config_source": "GitHub copy: " + row["source"]
            + " (see reference hf_configs/INDEX.md)",
            "config_status": re.sub(r"\*\*", "", row["status"]),
            "params_published": row["params"],
            "params_reference": int(computed[0].replace(",", "")) if computed
            else SAME_PARAMS_AS_REFERENCE_OF.get(fname),
            "params_stated": STATED_EXACT.get(fname),
            "params_reference_text_only": fname in TEXT_ONLY_REFERENCE,
            "notes": row["notes"],
        })
    for fname, (aliases, source, params, published) in EXTRA_MODELS.items():
        shutil.copyfile(EXTRA_DIR / fname, cfg_dir / fname)
        entries.append({
            "id": fname[: -len(".json")].replace("--", "/", 1),
            "config": f"configs/{fname}",
            "aliases": aliases,
            "config_source": source,
            "config_status": "verbatim",
            "params_published": published,
            "params_reference": params,
            "params_stated": None,
            "params_reference_text_only": False,
            "notes": "",
        })
    (out / "index.json").write_text(json.dumps({"models": entries}, indent=2, ensure_ascii=False)
                                    + "\n")
    print(f"wrote {len(entries)} model entries to {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    reference = Path(sys.argv[1])
    import_gpus(reference)
    import_models(reference)
