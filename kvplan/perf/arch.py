"""Per-GPU-architecture calibration of the step-time model (kvplan/perf/step.py).

Pure: standard library only. The engines' coefficients (kvplan/engines/<engine>.py) are fitted
on Hopper rows; a GPU of another architecture class runs the same step model with its GEMM and
bandwidth efficiencies scaled by that class's measured factors, relative to Hopper:

    achieved GEMM rate      = datasheet peak[dtype] · engine gemm_efficiency · scale[class][dtype]
    achieved attention rate = datasheet peak[bf16]  · engine gemm_efficiency · scale[class][bf16]
    achieved HBM rate       = datasheet bandwidth   · engine bandwidth_efficiency · scale[class][bw]

The factors (ARCH_FITS) are fitted by benchmarks/perf_fit.py on the public rows of
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

Ranges = dict[str, tuple[float, float]]  # metric → (p10, p90) of measured / predicted


@dataclass(frozen=True)
class ArchScales:
    """Achieved / datasheet efficiency of a class relative to Hopper (1.0 = as on Hopper)."""

    bf16_gemm: float = 1.0  # bf16/fp16 GEMMs and attention
    fp8_gemm: float = 1.0  # fp8 / int8 GEMMs
    fp4_gemm: float = 1.0  # nvfp4 / mxfp4 GEMMs
    bandwidth: float = 1.0  # HBM streaming of weights and KV

    def gemm(self, compute_dtype: str) -> float:
        """The GEMM factor for a compute dtype (step.compute_dtype_for)."""
        if compute_dtype in ("fp8", "int8"):
            return self.fp8_gemm
        if compute_dtype == "fp4":
            return self.fp4_gemm
        return self.bf16_gemm


@dataclass(frozen=True)
class ArchFit:
    """One class's fitted factors, the engines it has rows for, its rows and held-out band."""

    scales: ArchScales
    engines: tuple[str, ...]  # engines with measurements on this class
    rows: int
    ranges: Ranges  # held-out measured / predicted (p10, p90) per metric
    sources: str  # where the rows come from (benchmarks/data/*.csv)
    identified: str  # which factors the rows identify; the others are copied (see docs)


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

# Fitted by benchmarks/perf_fit.py (benchmarks/data/perf_fit.json "arch"): do not edit by hand.
ARCH_FITS: dict[str, ArchFit] = {
    "Hopper": ArchFit(
        scales=ArchScales(), engines=("sglang", "trtllm", "vllm"), rows=0,
        ranges={"ttft": (0.471, 2.027), "tpot": (0.893, 1.19), "throughput": (0.878, 1.1)},
        sources="", identified="reference class (1.0)"),
}

# Pooled leave-one-architecture-out spread (perf_fit.json "loao_ranges"): the band of a figure
# extrapolated to a class or engine without rows.
EXTRAPOLATED_RANGES: Ranges = {
    "ttft": (0.471, 2.027), "tpot": (0.893, 1.19), "throughput": (0.878, 1.1)}


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


def _envelope(a: Ranges, b: Ranges) -> Ranges:
    return {k: (min(a[k][0], b[k][0]), max(a[k][1], b[k][1])) for k in a}


def resolve(gpu_arch: str, engine: str, fit_engine: str) -> ArchCalibration:
    """The factors and band for `engine` on a GPU of `gpu_arch`; `fit_engine` is the engine
    whose coefficients it runs with (itself, or the one it borrows from)."""
    klass = arch_class(gpu_arch)
    own = ARCH_FITS.get(klass)
    source, seen = klass, {klass}
    while source not in ARCH_FITS and NEAREST.get(source) not in (None, *seen):
        source = NEAREST[source]
        seen.add(source)
    fit = ARCH_FITS.get(source) or ARCH_FITS["Hopper"]
    source = source if source in ARCH_FITS else "Hopper"
    measured = own is not None and engine in own.engines and fit_engine == engine
    notes = []
    if own is None:
        notes.append(f"no measurements on {klass} GPUs: efficiencies of the nearest measured "
                     f"class, {source}")
    elif engine not in own.engines and fit_engine == engine:
        notes.append(f"no {engine} measurements on {klass} GPUs ({klass} factors from "
                     f"{', '.join(own.engines)} rows)")
    ranges = fit.ranges if measured else _envelope(fit.ranges, EXTRAPOLATED_RANGES)
    return ArchCalibration(klass=klass, source_class=source, scales=fit.scales,
                           calibrated=measured, ranges=ranges, note="; ".join(notes))
