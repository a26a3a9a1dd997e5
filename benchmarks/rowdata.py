"""The calibration rows, with the few assumptions needed to replay V0-era logs, stated.

Logs from V0-era issues do not print the vLLM version; where the issue text pins the era, the
assumption and its reason are recorded here (never in the data file, which stays a verbatim
copy of the reference).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "vllm_calibration.csv"
# More vLLM 0.19.0 H100 logs from the same public sweep, extracted by extract_llmd_logs.py.
EXTRA = Path(__file__).resolve().parent / "data" / "vllm_llmd_extra.csv"

# source URL → (assumed version, catalogue model or None, reason)
V0_ASSUMPTIONS = {
    "https://github.com/vllm-project/vllm/issues/10517": (
        "0.6.4", None, "issue opened 2024-11 (vLLM 0.6.4 current); V0 profile line format"),
    "https://github.com/vllm-project/vllm/issues/15815": (
        "0.7.3", "Qwen/Qwen2.5-32B-Instruct",
        "V0 worker.py log lines (~0.7.x per the row notes); model from the issue title"),
}


def load_rows() -> list[dict[str, str]]:
    """Rows of the calibration CSV; V0 rows with an assumption get its version and model, an
    `assumed` note, and their activation peak from the notes' peak_torch_memory − weights."""
    with open(DATA, newline="") as f:
        rows = list(csv.DictReader(f))
    if EXTRA.exists():
        with open(EXTRA, newline="") as f:
            rows += list(csv.DictReader(f))
    for r in rows:
        r["assumed"] = ""
        if r["vllm_version"] or r["source"] not in V0_ASSUMPTIONS:
            continue
        version, model, reason = V0_ASSUMPTIONS[r["source"]]
        r["vllm_version"], r["assumed"] = version, f"version {version} assumed: {reason}"
        if model:
            r["model"] = model
        peak = re.search(r"peak_torch_memory=([\d.]+)GiB", r["notes"])
        if peak and not r["activation_peak_gib"] and r["weights_gib"]:
            r["activation_peak_gib"] = f"{float(peak.group(1)) - float(r['weights_gib']):.2f}"
    return rows


def _ct(num_bits: int, kind: str) -> dict:
    return {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {
            "num_bits": num_bits, "type": kind, "strategy": "channel", "symmetric": True}}}}


# Quantized checkpoints whose config.json is not bundled: the base model's config plus the
# quantization_config their repo name stands for (assumed, not read; the log only says
# "quantization=compressed-tensors" / "gptq_marlin").
QUANT_ASSUMPTIONS = {
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8": (
        "meta-llama/Llama-3.1-8B-Instruct", _ct(8, "int"),
        "w8a8 = int8 per-channel weights, lm_head kept"),
    "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8": (
        "Qwen/Qwen2.5-7B-Instruct", _ct(8, "int"), "w8a8 = int8 per-channel weights, lm_head kept"),
    "redhatai/Llama-3.3-70B-Instruct-quantized.w8a8": (
        "meta-llama/Llama-3.3-70B-Instruct", _ct(8, "int"),
        "w8a8 = int8 per-channel weights, lm_head kept"),
    "RedHatAI/Mistral-Small-3.1-24B-Instruct-2503-quantized.w8a8": (
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503", _ct(8, "int"),
        "w8a8 = int8 per-channel weights of the language model, lm_head kept"),
    "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic": (
        "Qwen/Qwen2.5-7B-Instruct", _ct(8, "float"),
        "fp8-dynamic = fp8 per-channel weights, lm_head kept"),
    "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic": (
        "meta-llama/Llama-3.3-70B-Instruct", _ct(8, "float"),
        "fp8-dynamic = fp8 per-channel weights, lm_head kept"),
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": (
        "meta-llama/Llama-3.1-8B-Instruct",
        {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False},
        "w4a16 = GPTQ 4-bit, group 128, symmetric (the log loads it with gptq_marlin)"),
}
