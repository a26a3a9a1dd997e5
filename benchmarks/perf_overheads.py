"""Experiment: the engines' fixed overheads fitted jointly on the Hopper calibration rows and the
public latency rows outside Hopper, evaluated held out. Prints; writes nothing.

    python benchmarks/perf_overheads.py              # baseline and joint fit, every protocol
    python benchmarks/perf_overheads.py --quick      # the all-rows fits only (no held-out refits)

Question (issue #24): are step_overhead_ms, layer_overhead_us, seq_overhead_us and
allreduce_latency_us architecture-independent engine constants that the small-model rows of
other GPUs pin down better than the 32B-70B Hopper rows alone? Model: the step model of
kvplan/perf/step.py unchanged; GEMM and bandwidth efficiencies shared by vLLM and SGLang and
scaled per GPU class by kvplan/engines/arch_fits.py; the four overheads shared by every engine
(TensorRT-LLM keeps its own GEMM/bandwidth/per-sequence coefficients fitted on throughput, and
takes the shared step, layer and all-reduce overheads); request_overhead_ms per engine (server
rows only: benchmarks/data/*.csv column front_end). Two stages as benchmarks/perf_fit.py: the
step-time coefficients with the steady-state wait, then burst_share and request_overhead_ms.

Protocols, each compared with the shipped two-stage Hopper-only fit (baseline):
* Hopper leave-one-group-out: each of the five (model × GPU × engine) groups predicted by a fit
  on the other four plus every public row (the public rows are never held out here).
* Leave one architecture out on the public rows: each GPU class's rows predicted by a fit on
  the Hopper rows plus the other classes' public rows, with the factors of its nearest other
  measured class (benchmarks/perf_latency.py's LOAO).
* Throughput: benchmarks/perf_arch.py's stage rerun on the all-rows fit (LOAO pooled, order).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import perf_arch  # noqa: E402
import perf_fit  # noqa: E402
import perf_latency  # noqa: E402

from kvplan.engines import arch_fits as fits_  # noqa: E402
from kvplan.engines.base import Coefficients  # noqa: E402
from kvplan.engines.registry import fitted_coefficients  # noqa: E402
from kvplan.perf import fit as fit_  # noqa: E402
from kvplan.perf import step as perf  # noqa: E402

fmt = perf_latency.stat  # median / p90 APE (median signed) in %

KEYS = ("vllm", "sglang")
STEP_SHARED = ("gemm_efficiency", "bandwidth_efficiency", "allreduce_latency_us",
               "layer_overhead_us", "step_overhead_ms", "seq_overhead_us")
STEP = fit_.Parameters(shared=STEP_SHARED, per_key=("request_overhead_ms",), keys=KEYS)
HARNESS = fit_.Parameters(shared=("burst_share",), per_key=("request_overhead_ms",), keys=KEYS)
BORROWED = ("step_overhead_ms", "layer_overhead_us", "allreduce_latency_us",
            "request_overhead_ms", "burst_share")  # TensorRT-LLM takes these from vLLM's fit


@dataclasses.dataclass(frozen=True)
class Pub:
    """A public latency row as a fit row, with its class and LOAO context."""

    row: fit_.Row
    raw: Mapping[str, Any]
    loao_context: perf.PerfContext


def public_rows() -> list[Pub]:
    out = []
    for r in perf_latency.load_raw():
        ctx = perf_latency.context(r)
        near = perf_latency.loao_class(r["klass"]) if r["klass"] != "Hopper" else "Hopper"
        lo = perf_latency.with_class(ctx, fits_.ARCH_FITS[near].scales)
        tpot = r["tpot_ms"] if r["harness"] != "offline-static-batch" else None
        # static batches publish e2e / OSL: compared as such (perf_latency.predict); the fit
        # uses their TPOT-equivalent through a throughput of B · OSL / e2e
        thr = (r["concurrency"] / (r["tpot_ms"] * r["osl"] / 1e3) * r["osl"]
               if r["harness"] == "offline-static-batch" else None)
        row = fit_.Row(ctx, r["engine"], f"{r['klass']}", r["concurrency"], r["isl"], r["osl"],
                       r["ttft_ms"], tpot, thr)
        out.append(Pub(row, r, lo))
    return out


def with_trtllm(c: Mapping[str, Coefficients]) -> dict[str, Coefficients]:
    base = fitted_coefficients()["trtllm"]
    return {**c, "trtllm": dataclasses.replace(
        base, **{k: getattr(c["vllm"], k) for k in BORROWED})}


def _loss(rows: Sequence[fit_.Row], coeffs: Mapping[str, Coefficients]) -> float:
    return sum(fit_.row_loss(r, fit_.predict(r, coeffs)) for r in rows) / len(rows)


def _clamp(v: Sequence[float]) -> list[float]:
    """Transformed values kept where the logistic of Parameters.value is finite."""
    return [max(-30.0, min(30.0, z)) for z in v]


def joint_fit(rows: Sequence[fit_.Row]) -> dict[str, Coefficients]:
    """Two stages (perf_fit.fit), every row; TensorRT-LLM rows use with_trtllm(). Names left
    out of STEP (--fixed) keep the shipped Hopper fit's value."""
    base = dict(fitted_coefficients())
    steady = [dataclasses.replace(r, wait_model="mva") for r in rows]
    start = {k: fit_.as_dict(base[k]) for k in KEYS}

    def stage(params: fit_.Parameters, rs: Sequence[fit_.Row], x0: list[float],
              b: Mapping[str, Coefficients]) -> dict[str, Coefficients]:
        x = x0
        for _ in range(2):
            x = _clamp(fit_.nelder_mead(
                lambda v: _loss(rs, with_trtllm(params.unpack(_clamp(v), b))), x))
        return params.unpack(x, b)

    step = stage(STEP, steady, STEP.pack(start), base)
    h_start = {k: fit_.as_dict(step[k]) for k in KEYS}
    return with_trtllm(stage(HARNESS, rows, HARNESS.pack(h_start), {**base, **step}))


def hopper_fit(rows: Sequence[fit_.Row]) -> dict[str, Coefficients]:
    return with_trtllm(perf_fit.fit(list(rows)))


def _pub_pred(p: Pub, c: Mapping[str, Coefficients], loao: bool) -> perf.PerfPoint:
    ctx = p.loao_context if loao else p.row.context
    pt = perf.evaluate(dataclasses.replace(ctx, coefficients=c[p.row.key]),
                       concurrency=p.row.concurrency, input_tokens=p.row.input_tokens,
                       output_tokens=p.row.output_tokens)
    if p.raw["harness"] == "offline-static-batch":
        pt = dataclasses.replace(pt, tpot_ms=pt.e2e_ms / p.row.output_tokens)
    return pt


def pub_errors(pubs: Sequence[Pub], preds: Sequence[perf.PerfPoint]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"ttft": [], "tpot": []}
    for p, pt in zip(pubs, preds, strict=True):
        for m in out:
            v = p.raw[f"{m}_ms"]
            if v is not None:
                out[m].append(getattr(pt, f"{m}_ms") / v - 1)
    return out


def coeff_line(c: Mapping[str, Coefficients]) -> str:
    v = c["vllm"]
    return (f"gemm {v.gemm_efficiency:.4f} bw {v.bandwidth_efficiency:.4f} step "
            f"{v.step_overhead_ms:.3f} ms layer {v.layer_overhead_us:.2f} us seq "
            f"{v.seq_overhead_us:.2f} us allreduce {v.allreduce_latency_us:.2f} us request "
            f"vllm {v.request_overhead_ms:.1f} sglang {c['sglang'].request_overhead_ms:.1f} ms "
            f"burst {v.burst_share:.3f}")


def logo(hopper: Sequence[fit_.Row], extra: Sequence[fit_.Row], joint: bool) -> dict:
    held = fit_.leave_one_group_out(
        list(hopper), lambda tr: joint_fit([*tr, *extra]) if joint else hopper_fit(tr),
        report=lambda g, v: print(f"    held out {g}: ttft {v['ttft']['median']:.1f}",
                                  file=sys.stderr))
    return fit_.summary(fit_.errors(held.rows, held.preds))


def loao(hopper: Sequence[fit_.Row], pubs: Sequence[Pub], joint: bool,
         final: Mapping[str, Coefficients]) -> dict[str, dict[str, list[float]]]:
    """Per class outside Hopper: errors of its public rows predicted with its nearest class's
    factors and (joint) overheads fitted without its rows."""
    out: dict[str, dict[str, list[float]]] = {}
    for klass in sorted({p.raw["klass"] for p in pubs} - {"Hopper"}):
        test = [p for p in pubs if p.raw["klass"] == klass and p.raw["role"] == "measured"]
        if joint:
            c = joint_fit([*hopper, *(p.row for p in pubs if p.raw["klass"] != klass)])
        else:
            c = final
        out[klass] = pub_errors(test, [_pub_pred(p, c, True) for p in test])
        print(f"    LOAO {klass}: ttft {fmt(out[klass]['ttft'])} tpot {fmt(out[klass]['tpot'])}",
              file=sys.stderr)
    return out


def throughput(c: Mapping[str, Coefficients]) -> dict:
    cross = perf_arch.run({k: c[k] for k in KEYS}, perf.RANGES, lambda m: None)
    return {"loao": cross["loao"], "order": cross["order"]}


def report(name: str, c: Mapping[str, Coefficients], hopper: Sequence[fit_.Row],
           pubs: Sequence[Pub], lg: dict | None, la: dict | None, thr: dict | None) -> None:
    print(f"\n## {name}\n{coeff_line(c)}")
    ins = fit_.summary(fit_.errors(list(hopper), [fit_.predict(r, c) for r in hopper]))
    print("Hopper in sample (median/p90): " + ", ".join(
        f"{m} {v['median']:.1f}/{v['p90']:.1f}" for m, v in ins.items()))
    meas = [p for p in pubs if p.raw["role"] == "measured" and p.raw["klass"] != "Hopper"]
    e = pub_errors(meas, [_pub_pred(p, c, False) for p in meas])
    print(f"public outside Hopper, in sample: TTFT {fmt(e['ttft'])}, TPOT {fmt(e['tpot'])}")
    if lg is not None:
        print("Hopper LOGO (median/p90): " + ", ".join(
            f"{m} {v['median']:.1f}/{v['p90']:.1f}" for m, v in lg.items()))
    if la is not None:
        pooled: dict[str, list[float]] = {"ttft": [], "tpot": []}
        for klass, v in la.items():
            print(f"  LOAO {klass}: TTFT {fmt(v['ttft'])}, TPOT {fmt(v['tpot'])}")
            for m in pooled:
                pooled[m] += v[m]
        print(f"LOAO pooled outside Hopper: TTFT {fmt(pooled['ttft'])} ({len(pooled['ttft'])} "
              f"rows), TPOT {fmt(pooled['tpot'])} ({len(pooled['tpot'])} rows)")
    if thr is not None:
        t, o = thr["loao"]["throughput"], thr["order"]["loao"]
        print(f"throughput LOAO pooled {t['median']:.1f} % (p90 {t['p90']:.1f} %), GPU order "
              f"{o[0]}/{o[1]}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="all-rows fits only")
    ap.add_argument("--fixed", nargs="*", default=[], choices=STEP_SHARED,
                    help="coefficients kept at the shipped Hopper fit instead of refitted")
    a = ap.parse_args(argv)
    global STEP
    STEP = fit_.Parameters(shared=tuple(n for n in STEP_SHARED if n not in a.fixed),
                           per_key=("request_overhead_ms",), keys=KEYS)
    hopper = perf_fit.load_rows()
    pubs = public_rows()
    shipped = dict(fitted_coefficients())
    full = not a.quick
    if not a.fixed:
        report("shipped (Hopper-only fit)", shipped, hopper, pubs, None,
               loao(hopper, pubs, False, shipped) if full else None, None)
    joint = joint_fit([*hopper, *(p.row for p in pubs)])
    report("joint (Hopper + public rows)", joint, hopper, pubs,
           logo(hopper, [p.row for p in pubs], True) if full else None,
           loao(hopper, pubs, True, joint) if full else None,
           throughput(joint) if full else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
