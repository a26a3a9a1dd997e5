"""Public Mixture-of-Experts serving measurements against kvplan's latency model: a validation,
never fitted.

    python benchmarks/moe_validation.py           # print the tables, write docs/performance-moe.md
    python benchmarks/moe_validation.py --check   # exit 1 if the page is stale

kvplan's latency coefficients are fitted on dense models (docs/performance.md); MoE and MLA
models run the same step model with their routed experts' GEMMs (perf/moe_gemm.py), expert and
data-parallel layouts (perf/expert.py) and latent KV. No calibration row is a MoE model, so this
page measures how far that extrapolation goes, on public results that fit nothing.

Data: benchmarks/data/perf_moe_public.csv, one row per (source table, model, GPU, format,
layout, lengths, load) with source URL, date and a verbatim quote locating the figure. Rows of
SemiAnalysis InferenceX / InferenceMAX (the issue's held-out judge set) are excluded; a test
enforces it. Column front_end "dynamo": the requests passed NVIDIA Dynamo's front end (the
silicon-sample rows, collected as the dense calibration rows are), so the prediction's TTFT
carries dynamo_front_end_ms; column engine_flags: launch flags that change the batching
(SGLang --enable-mixed-chunk), applied as the engine does (harnessed()).

Each row is planned by kvplan (api.plan_with_context: the row's engine and release, TP, PP, data
parallel ranks and DP attention, expert parallelism, weight format and KV dtype,
max_model_len = ISL + OSL) and replayed as its harness sent the requests:
* a run that states its number of requests (offline: all queued at once; closed loop: at most N
  in flight): kvplan's scheduler simulation (perf/simulate.py) of that many requests per
  replica (a replica: TP × PP GPUs, one DP rank; N / replicas each) at the row's lengths;
* one that does not: the closed-loop steady state (perf.step.evaluate) at its concurrency, or,
  offline, at the most requests the plan admits (max_num_seqs and KV);
* single-request: one request at a time.

Errors: predicted / measured − 1 of output tokens/s per GPU, TPOT and TTFT where published.
Rows with speculative decoding (MTP) on are listed, not scored: their acceptance rate is not
published with them. The band MoE plans carry (kvplan/engines/moe_fits.py, written here) takes
the scored rows of engine releases the coefficients were fitted on or newer (in_band): the
p10-p90 of measured / predicted throughput (TPOT: its reciprocal), and TTFT's own p10-p90 over
the rows that publish one (a class with fewer than moe_fits.MIN_ROWS of them takes every
class's, widened by its own).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import generated  # noqa: E402  (benchmarks/generated.py)
import perf_arch  # noqa: E402  (benchmarks/perf_arch.py: the GPU-order rule)

from kvplan.api import plan_with_context  # noqa: E402
from kvplan.engines import registry  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.perf import arch as arch_  # noqa: E402
from kvplan.perf import fit as fit_  # noqa: E402
from kvplan.perf import simulate  # noqa: E402
from kvplan.perf import step as perf  # noqa: E402
from kvplan.sources.catalog import resolve_gpu, resolve_model  # noqa: E402
from kvplan.versions import parse_version  # noqa: E402

DATA = HERE / "data" / "perf_moe_public.csv"
DOC = ROOT / "docs" / "performance-moe.md"
INT = ("gpu_count", "tp", "pp", "isl", "osl")
SCORED = ("offline-max-load", "closed-loop", "single-request")
UNBOUNDED = 100_000  # "every request queued": the plan's admission limits bound the batch


def load_raw() -> list[dict[str, Any]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        rows = [dict(r) for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    for r in rows:
        for k in INT:
            r[k] = int(r[k]) if r[k] else None
        for k in ("output_tok_s_per_gpu", "ttft_ms", "tpot_ms"):
            r[k] = float(r[k]) if r.get(k) else None
        r["ep"] = int(r["ep"]) if r.get("ep") else None
        if r.get("front_end") not in ("", "dynamo"):
            raise ValueError(f"{DATA.name}: row {r['source']} {r['model']}: front_end must be "
                             f"blank or 'dynamo', got {r.get('front_end')!r}")
        r["klass"] = arch_.arch_class(resolve_gpu(r["gpu"]).arch)
    return rows


def in_band(r: Mapping[str, Any]) -> bool:
    """Whether a scored row counts toward the band MoE plans carry: its release is not older
    than the oldest one its engine's coefficients were fitted on (kvplan plans those releases
    and newer ones; the distance to older ones is stated in every plan), or it names none
    (the vendors' own current pages). Older rows are scored and listed, not banded."""
    if not r["engine_version"]:
        return True
    fitted = registry.calibrated_by(registry.get(r["engine"])).calibration.versions
    oldest = min(parse_version(v)[:2] for v in fitted)
    return parse_version(r["engine_version"])[:2] >= oldest


def era(r: Mapping[str, Any]) -> str:
    """The row's release relative to the fitted ones (the page's grouping)."""
    if not r["engine_version"]:
        return "release not named"
    return "fitted or newer" if in_band(r) else "older than fitted"


def layout(r: Mapping[str, Any]) -> dict[str, Any]:
    """The row's launch as kvplan knobs. DP attention: the launch's TP ranks run attention data
    parallel (SGLang --tp N --dp N --enable-dp-attention, TensorRT-LLM enable_attention_dp),
    which kvplan writes as -tp 1 -dp N --enable-dp-attention; other launches with more GPUs than
    TP × PP are data-parallel replicas (vLLM -dp)."""
    tp, pp, n = r["tp"], r["pp"], r["gpu_count"]
    knobs: dict[str, Any] = {"max_model_len": r["isl"] + r["osl"], "pipeline_parallel_size": pp}
    if r.get("dp_attention") == "1":
        knobs.update(tensor_parallel_size=1, data_parallel_size=tp, enable_expert_parallel=True)
        if r["engine"] != "vllm":  # vLLM runs attention data parallel on every MoE -dp
            knobs["enable_dp_attention"] = True
    else:
        knobs["tensor_parallel_size"] = tp
        if r["ep"] and r["ep"] > 1:
            knobs["enable_expert_parallel"] = True
        if n > tp * pp and r["engine"] == "vllm" and r["ep"] and r["ep"] > tp:
            knobs["data_parallel_size"] = n // (tp * pp)  # EP over the DP ranks
    if r.get("kv_cache_dtype") == "fp8":
        knobs["kv_cache_dtype"] = "fp8"
    return knobs


def model_for(r: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The catalogue model and the format knobs of the row's precision: the checkpoint's own
    format needs none; another format is planned as kvplan's what-if of it (from the 16-bit
    weights when the catalogue checkpoint is itself quantized)."""
    m = resolve_model(r["model"])
    want = r["precision"]
    have = m.quantization.method if m.quantization else None
    if want == have:
        return m, {}
    if want in ("bf16", "fp16"):  # a 16-bit copy of the checkpoint (upcast)
        return m.model_copy(update={"quantization": None}), {}
    if have is not None:
        m = m.model_copy(update={"quantization": None})
    return m, {"quantization": want}


@dataclasses.dataclass(frozen=True)
class Scored:
    """A row and kvplan's figures for it (output tokens/s per GPU, TPOT and TTFT, ms), or why
    it is not scored."""

    row: Mapping[str, Any]
    figures: dict[str, float] | None
    reason: str  # why not scored ("" when scored)

    def error(self, metric: str) -> float | None:
        measured = self.row.get({"throughput": "output_tok_s_per_gpu"}.get(metric,
                                                                          f"{metric}_ms"))
        if self.figures is None or not measured:
            return None
        return self.figures[metric] / measured - 1


def harnessed(ctx: perf.PerfContext, r: Mapping[str, Any]) -> perf.PerfContext:
    """The plan's context as the row's run was served: through NVIDIA Dynamo's front end
    (column front_end "dynamo": its TTFT carries dynamo_front_end_ms, as the calibration rows
    collected the same way) and with the batching its launch flags choose (column
    engine_flags, e.g. SGLang --enable-mixed-chunk: Engine.launch_batching)."""
    if r.get("front_end") == "dynamo":
        ctx = dataclasses.replace(ctx, via_dynamo=True)
    flags = (r.get("engine_flags") or "").split()
    if flags:
        ctx = dataclasses.replace(ctx, **registry.get(r["engine"]).launch_batching(
            flags, ctx.max_num_batched_tokens))
    return ctx


def score(r: Mapping[str, Any]) -> Scored:
    if r["harness"] not in SCORED:
        return Scored(r, None, f"harness {r['harness']} (not a closed loop)")
    if not r["isl"] or not r["osl"]:
        return Scored(r, None, "lengths not stated (a dataset's mix)")
    if r.get("speculative"):  # its method, e.g. "mtp"; empty when the source states none
        return Scored(r, None, "speculative decoding on (acceptance rate not published)")
    try:
        m, fmt = model_for(r)
        p, ctx = plan_with_context(m, resolve_gpu(r["gpu"]), engine=r["engine"],
                                   engine_version=r["engine_version"] or None,
                                   **layout(r), **fmt)
    except (KvplanError, ValueError) as e:
        return Scored(r, None, f"kvplan cannot plan it: {e}")
    if not p.fits or ctx is None:
        reason = next((x.message for x in p.problems if x.severity == "error"), "does not fit")
        return Scored(r, None, f"kvplan: {reason}")
    ctx = harnessed(ctx, r)
    gpus = ctx.tp * ctx.pp
    replicas = max(1, r["gpu_count"] // gpus)
    given = int(r["concurrency"]) if r.get("concurrency") else None
    prompts = int(r["num_prompts"]) if r.get("num_prompts") else None
    if r["harness"] == "single-request":
        given = 1
    if prompts and r["harness"] != "single-request":
        # the run as its harness sent it: `prompts` requests per replica's share, at most
        # `given` at a time (all at once when offline), fixed lengths (the rows' means)
        n = max(1, round(prompts / replicas))
        c = max(1, round(given / replicas)) if given else n
        res = simulate.simulate(ctx, simulate.Requests((r["isl"],) * n, (r["osl"],) * n),
                                simulate.Harness("closed", concurrency=c))
        return Scored(r, {"throughput": res.output_tokens_per_s / gpus, "tpot": res.tpot.mean,
                          "ttft": res.ttft.mean}, "")
    if given:
        conc = max(1, round(given / replicas))
    elif r["harness"] == "offline-max-load":
        conc = UNBOUNDED
    else:
        return Scored(r, None, "closed loop without a stated concurrency")
    pt = perf.evaluate(ctx, concurrency=conc, input_tokens=r["isl"], output_tokens=r["osl"])
    return Scored(r, {"throughput": pt.output_tokens_per_s_per_gpu, "tpot": pt.tpot_ms,
                      "ttft": pt.ttft_ms}, "")


# ------------------------------------------------------------------------ tables


def stat(errs: Sequence[float]) -> str:
    if not errs:
        return "—"
    ape = sorted(abs(e) for e in errs)
    p90 = ape[min(len(ape) - 1, round(0.9 * (len(ape) - 1)))]
    return (f"{100 * statistics.median(ape):.1f} / {100 * p90:.1f} % "
            f"({100 * statistics.median(errs):+.1f} %)")


def by(scored: Sequence[Scored], key: str) -> dict[str, list[Scored]]:
    out: dict[str, list[Scored]] = {}
    for s in scored:
        out.setdefault(str(s.row[key]), []).append(s)
    return dict(sorted(out.items()))


def summary(scored: Sequence[Scored], key: str, title: str) -> list[str]:
    lines = [f"| {title} | rows scored | throughput per GPU | TPOT | TTFT |",
             "|---|---:|---:|---:|---:|"]
    for name, ss in by(scored, key).items():
        ok = [s for s in ss if s.figures is not None]
        cells = [stat([e for s in ok if (e := s.error(m)) is not None])
                 for m in ("throughput", "tpot", "ttft")]
        lines.append(f"| {name} | {len(ok)} of {len(ss)} | " + " | ".join(cells) + " |")
    return lines


def row_table(scored: Sequence[Scored]) -> list[str]:
    lines = ["| source | model | GPU × n | engine | format | layout | ISL/OSL | load | "
             "tok/s/GPU measured | kvplan | TPOT ms measured | kvplan |",
             "|---|---|---|---|---|---|---|---|---:|---:|---:|---:|"]
    for s in scored:
        r, p = s.row, s.figures
        lay = (f"TP{r['tp'] or '?'}" + (f" PP{r['pp']}" if (r["pp"] or 1) > 1 else "")
               + (f" EP{r['ep']}" if r["ep"] else "")
               + (" DPA" if r["dp_attention"] == "1" else ""))
        load = r["concurrency"] and f"c={r['concurrency']}" or r["harness"]
        meas = r["output_tok_s_per_gpu"]
        cells = [f"{meas:,.0f}" if meas else "—",
                 f"{p['throughput']:,.0f}" if p and meas else "—",
                 f"{r['tpot_ms']:.1f}" if r["tpot_ms"] else "—",
                 f"{p['tpot']:.1f}" if p and r["tpot_ms"] else "—"]
        if p is None:
            cells[1] = s.reason.replace("|", "/")
        lens = f"{r['isl']}/{r['osl']}" if r["isl"] and r["osl"] else "mixed"
        lines.append(f"| {r['source']} | {r['model'].split('/')[-1]} | {r['gpu']} × "
                     f"{r['gpu_count']} | {r['engine']} {r['engine_version']} | "
                     f"{r['precision']} | {lay} | {lens} | {load} | "
                     + " | ".join(cells) + " |")
    return lines


def gpu_pairs(scored: Sequence[Scored]) -> list[tuple[Scored, Scored]]:
    """Pairs of scored rows of one workload (source, model, engine, lengths, load) on
    different GPUs whose measured throughput per GPU differs by ≥ 5 % (perf_arch.order_pairs,
    the GPU-order rule of the cross-architecture stage)."""
    ok = [s for s in scored if s.figures is not None and s.row["output_tok_s_per_gpu"]]
    raws = [{**s.row, "workload": "|".join(str(s.row[k]) for k in (
        "source", "model", "engine", "isl", "osl", "concurrency", "num_prompts", "harness"))}
        for s in ok]
    return [(ok[i], ok[j]) for i, j in perf_arch.order_pairs(raws)]


def in_order(a: Scored, b: Scored) -> bool:
    """Whether kvplan orders two scored rows' throughput per GPU as measured."""
    assert a.figures is not None and b.figures is not None
    return ((a.figures["throughput"] > b.figures["throughput"])
            == (a.row["output_tok_s_per_gpu"] > b.row["output_tok_s_per_gpu"]))


def order_table(scored: Sequence[Scored]) -> list[str]:
    """Per pair of GPU classes: pairs, share in the measured order, and the median
    |predicted ratio / measured ratio − 1| of throughput per GPU."""
    groups: dict[str, list[tuple[bool, float]]] = {}
    for a, b in gpu_pairs(scored):
        ka, kb = sorted((a.row["klass"], b.row["klass"]))
        ma, mb = a.row["output_tok_s_per_gpu"], b.row["output_tok_s_per_gpu"]
        assert a.figures is not None and b.figures is not None
        pa, pb = a.figures["throughput"], b.figures["throughput"]
        right = in_order(a, b)
        ratio_err = abs((pa / pb) / (ma / mb) - 1)
        for name in (f"{ka} vs {kb}", "all"):
            groups.setdefault(name, []).append((right, ratio_err))
    lines = ["| GPU classes | pairs | in the measured order | median ratio error |",
             "|---|---:|---:|---:|"]
    for name, got in sorted(groups.items(), key=lambda kv: kv[0] == "all"):
        right = sum(g for g, _ in got)
        med = statistics.median(e for _, e in got)
        lines.append(f"| {name} | {len(got)} | {right} ({100 * right / len(got):.0f} %) | "
                     f"{100 * med:.0f} % |")
    return lines


LOW_CONCURRENCY = 16  # "few requests in flight": where a step's fixed costs dominate TPOT

SILICON = "aiconfigurator-silicon-sample"  # one model, three engines, one collection pipeline


def silicon_table(scored: Sequence[Scored]) -> list[str]:
    """The silicon-sample rows (one model, TTFT and TPOT, through Dynamo) per engine, GPU and
    layout: error statistics, the median measured / predicted TPOT, and how many rows'
    measured / predicted TPOT lies inside the TPOT band a plan of that class carries
    (moe_fits.check_for: the envelope the plan's band takes from the public rows)."""
    from kvplan.engines import moe_fits

    rows = [s for s in scored if s.row["source"] == SILICON and s.figures is not None]
    groups: dict[tuple[str, str, str, str], list[Scored]] = {}
    for s in rows:
        r = s.row
        lay = f"TP{r['tp']}" + (f" EP{r['ep']}" if r["ep"] else "")
        groups.setdefault((r["engine"], r["engine_version"], r["gpu"], lay), []).append(s)
    lines = ["| engine | GPU | layout | rows | concurrency | TPOT | TTFT | "
             "measured / kvplan TPOT, median | inside the class's MoE TPOT band |",
             "|---|---|---|---:|---|---:|---:|---:|---:|"]
    for (engine, version, gpu, lay), ss in sorted(groups.items()):
        lo, hi = moe_fits.check_for(ss[0].row["klass"])[0].ranges["tpot"]
        ratios = [s.row["tpot_ms"] / s.figures["tpot"] for s in ss]
        inside = sum(lo <= x <= hi for x in ratios)
        conc = sorted(int(s.row["concurrency"]) for s in ss)
        lines.append(
            f"| {engine} {version} | {gpu} | {lay} | {len(ss)} | "
            f"{'–'.join(dict.fromkeys((str(conc[0]), str(conc[-1]))))} | "
            f"{stat([e for s in ss if (e := s.error('tpot')) is not None])} | "
            f"{stat([e for s in ss if (e := s.error('ttft')) is not None])} | "
            f"{statistics.median(ratios):.2f} | {inside} of {len(ss)} ({lo:.2f}–{hi:.2f}) |")
    return lines


def low_concurrency_table(scored: Sequence[Scored]) -> list[str]:
    """Scored rows of at most LOW_CONCURRENCY requests in flight that publish TPOT: measured
    and kvplan's TPOT, grouped by (source, model, GPU, engine, release)."""
    groups: dict[tuple, list[Scored]] = {}
    for s in scored:
        r = s.row
        c = int(r["concurrency"]) if r["concurrency"] else 0
        if s.figures is not None and r["tpot_ms"] and 0 < c <= LOW_CONCURRENCY:
            key = (r["source"], r["model"].split("/")[-1], r["gpu"], r["engine"],
                   r["engine_version"], r["tp"])
            groups.setdefault(key, []).append(s)
    lines = ["| source | model | GPU | engine | TP | concurrency | TPOT ms measured | kvplan |",
             "|---|---|---|---|---:|---|---|---|"]
    for (src, model, gpu, eng, ver, tp), ss in sorted(groups.items()):
        ss.sort(key=lambda s: int(s.row["concurrency"]))
        conc = ", ".join(s.row["concurrency"] for s in ss)
        meas = ", ".join(f"{s.row['tpot_ms']:.1f}" for s in ss)
        pred = ", ".join(f"{(s.figures or {})['tpot']:.1f}" for s in ss)
        lines.append(f"| {src} | {model} | {gpu} | {eng} {ver} | {tp} | {conc} | {meas} | "
                     f"{pred} |")
    return lines


def _paragraph(n: int) -> str:
    """Paragraph `n` of this module's docstring, on one line (the page's prose)."""
    return " ".join((__doc__ or "").split("\n\n")[n].split())


def render(scored: Sequence[Scored]) -> str:
    sources: dict[str, list[Mapping[str, Any]]] = {}
    for s in scored:
        sources.setdefault(s.row["source"], []).append(s.row)
    listed = []
    for name, rows in sorted(sources.items()):
        urls = sorted({r["source_url"] for r in rows})
        dates = sorted({r["source_date"] for r in rows})
        more = f" and {len(urls) - 1} more files (column source_url)" if len(urls) > 1 else ""
        when = " to ".join(dict.fromkeys((dates[0], dates[-1])))
        listed.append(f"* `{name}` ({len(rows)} rows, {when}): "
                      f"{urls[0]}{more}")
    n_ok = sum(s.figures is not None for s in scored)
    method = _paragraph(4).replace(" * ", "\n* ")
    out = [
        "# Mixture-of-Experts models: kvplan against public measurements", "",
        "<!-- generated by benchmarks/moe_validation.py from "
        "benchmarks/data/perf_moe_public.csv; do not edit by hand -->", "",
        _paragraph(2), "",
        "## Data", "",
        f"`benchmarks/data/perf_moe_public.csv`: {len(scored)} rows, {n_ok} scored. "
        + _paragraph(3).split(". ", 1)[1], "",
        *listed, "",
        "## Method", "",
        method, "",
        _paragraph(5), "",
        "Cells: median / p90 of |predicted / measured − 1| (median signed error; > 0: kvplan "
        "predicts more).", "",
        "## Results", "",
        *summary(scored, "klass", "architecture"), "",
        "By engine release: the band (kvplan/engines/moe_fits.py) takes the rows of releases "
        "the engine's coefficients were fitted on or newer (and rows that name no release); "
        "older releases are scored here, not banded.", "",
        *summary([dataclasses.replace(s, row={**s.row, "era": era(s.row)}) for s in scored],
                 "era", "releases"), "",
        *summary(scored, "engine", "engine"), "",
        *summary(scored, "model", "model"), "",
        *summary(scored, "source", "source"), "",
        "## TPOT with few requests in flight", "",
        f"Rows of at most {LOW_CONCURRENCY} concurrent requests that publish TPOT. "
        "kvplan's step's fitted overheads come from dense models; a MoE layer runs more kernels "
        "than a dense one (router, top-k, permute, grouped GEMM, combine) and an MLA block more "
        "than an attention block, each with a fixed cost. kvplan adds those it has measurements "
        "for (kvplan/perf/layer_floors.py: aiconfigurator's H200 kernel tables, each engine's "
        "fused-MoE and MLA blocks against a dense layer's, timed by the same collector; their "
        "fixed costs assumed on other GPUs); the measured TPOT of these runs still sits "
        "above kvplan's, most of all for the early-2025 releases. MoE plans' TPOT band covers "
        "the rest "
        "(kvplan/engines/moe_fits.py).", "",
        *low_concurrency_table(scored), "",
        "## One model on three engines, recent releases (aiconfigurator's silicon sample)", "",
        "Qwen3-235B-A22B-FP8 (94 layers, 128 experts, top 8) run by aiconfigurator's own "
        "collection pipeline, the one the dense calibration rows come from (served through "
        "NVIDIA Dynamo, so each TTFT carries `dynamo_front_end_ms` as theirs do; SGLang with "
        "the `--enable-mixed-chunk` its generator sets, inferred as for the calibration rows): "
        "TTFT and TPOT, no throughput, so these rows do not enter the bands (which are set on "
        "throughput). Closed loops at the stated concurrency, evaluated at the steady state.",
        "",
        *silicon_table(scored), "",
        "vLLM 0.12's measured TPOT barely moves with the concurrency (4–48) or the prompt "
        "length (1k–8k): its DeepGEMM experts compute a buffer sized for every expert at every "
        "step, whatever the batch (docs/moe-gemm.md, vLLM's DeepGEMM experts compute whole "
        "blocks), which kvplan models from the engine's source since 2026-12-02; before, it read "
        "those decode steps as weight-bound, and its TPOT rose with the batch. At MoE TP 2 "
        "the padded blocks read DeepGEMM's EP-4 curve, a lower bound on their rate (no EP-2 "
        "row is timed at 128 tokens per expert; docs/moe-gemm.md), so kvplan's TPOT there is an "
        "upper bound; until 2026-12-02 they ran at the dense rate, which no timed row reaches "
        "at that size, and kvplan's TPOT came out under every TP 2 row. What is left of the "
        "SGLang rows' under-prediction is not diagnosed, nor is "
        "TTFT, "
        "under-predicted on every engine and layout (dense rows of the same pipeline are not: "
        "docs/performance.md). The last column says whether the band a MoE plan of the class "
        "carries covers the measured TPOT. Nothing is fitted to these rows.", "",
        "## GPU order",  "",
        "Within each workload (one source, model, engine, lengths and load), every pair of rows "
        "on different GPUs whose measured throughput per GPU differs by ≥ 5 %: whether kvplan "
        "puts them in the measured order, and how far its ratio is from the measured one.", "",
        *order_table(scored), "",
        "## Rows", "",
        *row_table(scored), ""]
    return "\n".join(out)


FITS = ROOT / "kvplan" / "engines" / "moe_fits.py"
BEGIN = "# --- generated by benchmarks/moe_validation.py: do not edit ---"
END = "# --- end generated ---"


def check_of(scored: Sequence[Scored]) -> str:
    """A MoeCheck(...) literal for the scored rows: the p10-p90 of measured / predicted
    throughput per GPU, and for TPOT its reciprocal (at a fixed batch TPOT scales as
    1 / throughput; the published TPOTs are means over differently sent runs, a draining
    burst's among them, and fewer rows publish one: shown on the page, not banded); TTFT's
    own p10-p90 over the rows that publish it (no throughput stands in for it: a TTFT is
    queueing and prefill), with their count."""
    ok = [s for s in scored if s.figures is not None and s.error("throughput") is not None]
    thr = [1 / (1 + e) for s in ok if (e := s.error("throughput")) is not None]
    lo, hi = fit_.percentile(thr, 0.1), fit_.percentile(thr, 0.9)
    t_lo, t_hi = 1 / hi, 1 / lo
    ttft = [1 / (1 + e) for s in scored if (e := s.error("ttft")) is not None]
    band = (f', "ttft": ({fit_.percentile(ttft, 0.1):.3f}, {fit_.percentile(ttft, 0.9):.3f})'
            if ttft else "")
    sources = [f'        "{x}",' for x in sorted({s.row["source"] for s in ok}
                                                 | {s.row["source"] for s in scored
                                                    if s.error("ttft") is not None})]
    return "\n".join([
        "MoeCheck(",
        f"    rows={len(ok)}, median_ratio={statistics.median(thr):.3f}, ttft_rows={len(ttft)},",
        f'    ranges={{"tpot": ({t_lo:.3f}, {t_hi:.3f}), "throughput": ({lo:.3f}, {hi:.3f})'
        f"{band}}},",
        "    sources=(", *sources, "    ))"])


def fits_text(scored: Sequence[Scored]) -> str:
    """kvplan/engines/moe_fits.py with its generated block for `scored`."""
    banded = [s for s in scored if s.figures is not None and in_band(s.row)]
    classes = by(banded, "klass")
    lines = [BEGIN, "MOE_CHECKS: dict[str, MoeCheck] = {"]
    for k, v in classes.items():
        lines.append(f'    "{k}": ' + check_of(v).replace("\n", "\n    ") + ",")
    lines += ["}", "POOLED = " + check_of(banded), END]
    text = FITS.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    return head + "\n".join(lines) + rest.split(END, 1)[1]


README = ROOT / "README.md"


def readme_with(scored: Sequence[Scored]) -> str:
    """README.md with its MoE sentence (between the moe markers) for `scored`."""
    ok = [s for s in scored if s.figures is not None]
    errs = {k: [e for s in ok if s.row["klass"] == k and (e := s.error("throughput")) is not None]
            for k in sorted({s.row["klass"] for s in ok})}
    pooled = [e for v in errs.values() for e in v]
    per = ", ".join(f"{k} {100 * statistics.median(abs(e) for e in v):.0f} %"
                    for k, v in errs.items() if v)
    pairs = gpu_pairs(scored)
    right = sum(in_order(a, b) for a, b in pairs)
    text = (f"throughput per GPU median APE {100 * statistics.median(abs(e) for e in pooled):.1f} "
            f"% over {len(pooled)} rows ({per}; median signed "
            f"{100 * statistics.median(pooled):+.1f} %), GPU order {right}/{len(pairs)}; MoE "
            "plans' bands widen to the spread of the rows of the fitted engine releases or newer")
    start, end = "<!-- moe:start -->", "<!-- moe:end -->"
    head, rest = README.read_text(encoding="utf-8").split(start, 1)
    return head + start + text + end + rest.split(end, 1)[1]


def run() -> list[Scored]:
    return [score(r) for r in load_raw()]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="fail if docs/performance-moe.md differs from a fresh run")
    a = ap.parse_args(argv)
    scored = run()
    text = render(scored)
    fits, readme = fits_text(scored), readme_with(scored)
    if a.check:
        return 1 if any([generated.stale(DOC, text, "moe_validation.py"),
                         generated.stale(FITS, fits, "moe_validation.py"),
                         generated.stale(README, readme, "moe_validation.py")]) else 0
    for key, title in (("klass", "architecture"), ("engine", "engine"), ("model", "model"),
                       ("source", "source")):
        print("\n".join(summary(scored, key, title)), end="\n\n")
    DOC.write_text(text, encoding="utf-8")
    FITS.write_text(fits, encoding="utf-8")
    README.write_text(readme, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
