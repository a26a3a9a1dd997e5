"""Per-GPU-architecture calibration of the step-time model (kvplan/perf/step.py).

Pure: standard library only. The engines' coefficients (kvplan/engines/<engine>.py) are fitted
on Hopper rows; a GPU of another architecture class runs the same step model with its GEMM and
bandwidth efficiencies scaled by that class's measured factors, relative to Hopper:

    achieved GEMM rate      = datasheet peak[dtype] · engine gemm_efficiency · scale[class][dtype]
    achieved attention rate = datasheet peak[bf16]  · engine gemm_efficiency · scale[class][bf16]
    achieved HBM rate       = datasheet bandwidth   · engine bandwidth_efficiency · scale[class][bw]

The factors (kvplan/engines/arch_fits.py ARCH_FITS, per class and, for the bands, per engine
measured on it) are fitted by benchmarks/perf_fit.py on the public rows of
benchmarks/data/perf_throughput.csv (MLPerf Inference, TensorRT-LLM's perf-overview pages;
sources per row) and recorded in benchmarks/data/perf_fit.json ("arch"); `--check` keeps them
equal. A class with no rows borrows the factors of its nearest measured class (NEAREST) and says
so. A figure is *calibrated* when its architecture class has measurements for its engine,
whatever the engine's minor version (the distance is stated apart); its band is the held-out
residual spread of that class, and the wider pooled leave-one-architecture-out spread when the
figure is extrapolated (another class's factors, or an engine without rows on this class).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..engines.arch_fits import ARCH_FITS, EXTRAPOLATED_RANGES, ArchScales, Ranges, envelope

# GpuSpec.arch → architecture class (gpu_specs/*.json "arch").
CLASS_OF = {
    "Hopper": "Hopper", "Blackwell": "Blackwell", "Blackwell Ultra": "Blackwell",
    "Blackwell (GB202)": "Blackwell", "Blackwell (GB10)": "Blackwell",
    "Ampere": "Ampere", "Ada Lovelace": "Ada", "Turing": "Turing", "Volta": "Volta",
    "CDNA2": "CDNA2", "CDNA3": "CDNA3", "CDNA4": "CDNA4", "Gaudi2": "Gaudi", "Gaudi3": "Gaudi",
}

# A class without rows borrows the factors of the nearest measured class: same vendor, the
# closest generation (Ada ↔ Ampere share the SM design lineage; CDNA4 and CDNA2 ↔ CDNA3;
# Volta/Turing → Ampere; Gaudi has no relative among the measured classes → Hopper).
NEAREST = {
    "Hopper": "Blackwell", "Blackwell": "Hopper", "Ampere": "Ada", "Ada": "Ampere",
    "Turing": "Ampere", "Volta": "Ampere", "CDNA2": "CDNA3", "CDNA3": "CDNA4",
    "CDNA4": "CDNA3", "Gaudi": "Hopper",
}

# GPUs whose NVLink is a bridge joining this many cards (gpu_specs/*.json notes): a TP group
# larger than that reduces over PCIe.
BRIDGED = {"a100-pcie-80gb": 2, "a40": 2, "h100-pcie-80gb": 2, "h100-nvl-94gb": 2,
           "h200-nvl-141gb": 4, "rtx-3090": 2}


def over_pcie(gpu_id: str, nvlink_gbps: float | None, tp: int) -> bool:
    """Whether a TP group of `tp` GPUs of this model reduces over PCIe."""
    return tp > 1 and (not nvlink_gbps or tp > BRIDGED.get(gpu_id, tp))




def arch_class(gpu_arch: str) -> str:
    """The calibration class of a GpuSpec.arch ('Blackwell Ultra' → 'Blackwell')."""
    return CLASS_OF.get(gpu_arch, gpu_arch)


@dataclass(frozen=True)
class ArchCalibration:
    """What the model uses for one GPU class × engine: factors, band, and where they come from."""

    klass: str  # the GPU's class
    source_class: str  # the class whose factors are used ('' when none is measured)
    scales: ArchScales
    calibrated: bool  # this class has rows for this engine
    ranges: Ranges
    note: str  # '' when calibrated; else what is extrapolated from where


@lru_cache(maxsize=256)  # a plan asks four times, every candidate of a sweep again
def resolve(gpu_arch: str, engine: str, fit_engine: str) -> ArchCalibration:
    """The factors and band for `engine` on a GPU of `gpu_arch`; `fit_engine` is the engine
    whose coefficients it runs with (itself, or the one it borrows from). Remembered: the
    tables it reads are constants, and the answer (frozen) is shared."""
    klass = arch_class(gpu_arch)
    own = ARCH_FITS.get(klass)
    source, seen = klass, {klass}
    while source not in ARCH_FITS and NEAREST.get(source) not in (None, *seen):
        source = NEAREST[source]
        seen.add(source)
    fit = ARCH_FITS.get(source) or ARCH_FITS["Hopper"]
    source = source if source in ARCH_FITS else "Hopper"
    measured = own is not None and engine in own.ranges and fit_engine == engine
    notes = []
    if own is None:
        notes.append(f"no measurements on {klass} GPUs: efficiencies of the nearest measured "
                     f"class, {source}")
    elif engine not in own.ranges and fit_engine == engine:
        notes.append(f"no {engine} measurements on {klass} GPUs ({klass} factors from "
                     f"{', '.join(sorted(own.ranges))} rows)")
    near = fit.ranges.get(fit_engine) or next(iter(fit.ranges.values()))
    ranges = fit.ranges[engine] if measured else envelope(near, EXTRAPOLATED_RANGES)
    return ArchCalibration(klass=klass, source_class=source, scales=fit.scales,
                           calibrated=measured, ranges=ranges, note="; ".join(notes))
