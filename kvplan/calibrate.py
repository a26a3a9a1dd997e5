"""`kvplan calibrate`: fit the latency model to a user's own benchmark runs, or check it
against them (the "measure → calibrate → re-measure" loop; docs/calibration.md).

1. Each run a result file states (kvplan.sources.benchfiles) is matched to its deployment:
   model, GPU, engine, version, TP, DP and replicas from the file where it says so (and kvplan
   can resolve it), else from the command line; a run whose model or GPU cannot be determined is
   refused, naming it.
2. The deployment is planned (kvplan.api.plan: KV capacity, max_num_seqs, the token budget
   as the engine sets them) and becomes a kvplan.perf.fit.Row: the closed-loop concurrency of
   the run (an open-loop run: the requests in flight by Little's law, N = completed/s × mean
   e2e), mean input / output tokens, measured mean (else median) TTFT and TPOT (else ITL),
   output tokens/s per replica. An open loop's TTFT is not the closed loop's: its requests
   arrive spread out, mostly to no queue, where the closed form's clients send together (its
   burst share, SGLang's prefill waves). It is replayed by simulating the run's own arrivals
   (kvplan.perf.simulate: its rate, request count and burstiness, Poisson when the file does
   not say; mean TTFT), in the scores and the check. The fit replays every row thousands of
   times, too often to simulate: it fits the closed form of one lone request to the measured
   TTFT × (lone request / simulated) at the coefficients it starts from, then once more from
   the coefficients of that fit (the simulation's queueing held as a ratio).
3. `identifiable()` picks the coefficients these runs can tell apart (finite differences of
   the log predictions, in a priority order: overheads first); the others keep their values.
4. The fit (kvplan.perf.fit) starts from the coefficients in force (the bundled fit of the
   engine, or a user file) and is scored before, after and leave-one-run-out.

Pure apart from resolving names and planning through kvplan.api (the api layer).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .engines import registry
from .engines.base import Coefficients
from .errors import InvalidInputError, KvplanError, UnavailableError
from .knobs import MAX_PARALLEL
from .perf import fit
from .perf import simulate as sim
from .perf import step as perf
from .sources.benchfiles import Measurement
from .specs import GpuSpec, ModelSpec

# The order in which coefficients are fitted when the runs cannot tell them all apart: the
# overheads that shift TTFT and TPOT first, then the efficiencies, then the finer terms.
PRIORITY = ("request_overhead_ms", "step_overhead_ms", "bandwidth_efficiency",
            "gemm_efficiency", "seq_overhead_us", "layer_overhead_us", "allreduce_latency_us")
MIN_EFFECT = 0.003  # a coefficient must move some prediction by ≥ 0.3 % when changed by 10 %
# (or by 1 % of its range, for one near 0)
MIN_SIN = 0.2  # …in a direction at least 11.5° away from the coefficients already chosen
FIT_TOL = 1e-10  # Nelder–Mead: stop when the losses span less (a user's runs are few: cheap)
MAX_IN_FLIGHT = 1 << 16  # requests in flight per engine a run may replay (the model's
# closed-loop wait is a loop over them)
MAX_LENGTH = 1 << 24  # tokens per request (the workload's bound, knobs.OPTIONS)
MAX_REPLICAS = 1 << 14  # behind one benchmarked endpoint
MAX_RUNS = 1000  # measured runs in one calibration (a fit replays each thousands of times)
FOLDS = 10  # above this many runs the held-out error is 10-fold, not leave-one-run-out
MAX_SIMULATED = 4000  # requests of an open-loop run simulated for its TTFT (the run's own
# count up to this: below saturation the mean settles long before; 0.1–0.2 s a run)


# ---------------------------------------------------------------------- matching


@dataclass(frozen=True)
class Given:
    """What the command line says about the deployment (None: take it from the files)."""

    model: str | None = None
    gpu: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    tensor_parallel_size: int | None = None
    data_parallel_size: int | None = None
    replicas: int | None = None
    knobs: Mapping[str, Any] = field(default_factory=dict)  # further plan knobs as given
    revision: str | None = None
    token: str | None = None
    offline: bool | None = None


@dataclass(frozen=True)
class OpenLoop:
    """An open-loop run's arrivals at one engine, to simulate its TTFT: `requests` requests at
    `rate` req/s, gamma gaps of shape `burstiness` (1: Poisson; inf: evenly spaced), KV blocks
    of `block_size` tokens as the plan lays them out."""

    rate: float
    requests: int
    burstiness: float
    block_size: int


@dataclass(frozen=True)
class Run:
    """One measured run matched to its deployment; `row` is None when it cannot be used
    (`skipped` says why)."""

    measurement: Measurement
    model: str
    gpu: GpuSpec
    engine: str
    engine_version: str
    tp: int
    replicas: int
    harness: str  # how the run's load became a closed-loop concurrency
    row: fit.Row | None
    skipped: str = ""
    # the deployment kvplan plans as not starting as stated: on which launch line it is replayed
    replayed_as: str = ""
    dp: int = 1  # data-parallel ranks of each replica (-dp), each an engine of its own
    open_loop: OpenLoop | None = None  # an open loop's arrivals: its TTFT is simulated
    needs_context: int = 0  # skipped as longer than the planned context: the tokens it needs

    @property
    def label(self) -> str:
        return self.measurement.label

    @property
    def named(self) -> str:
        """The run and where in its file, for messages ('f.json#2 (line 2)')."""
        return self.measurement.named


_GPU_COUNT = re.compile(r"^\s*(\d+)\s*[x×]\s*(.+)$", re.IGNORECASE)


def _gpu_of(m: Measurement, given: Given) -> GpuSpec:
    """The file's GPU (`4xNVIDIA_L40S` counts as L40S), else --gpu; refused when neither is
    known to kvplan's catalogue."""
    from .sources.catalog import resolve_gpu

    stated = m.deployment.get("gpu")
    if stated:
        count = _GPU_COUNT.match(stated)
        try:
            return resolve_gpu(count.group(2) if count else stated)
        except KvplanError:
            if not given.gpu:
                raise InvalidInputError(f"{m.named}: the file names the GPU {stated[:60]!r}, "
                                        "which is not in kvplan's catalogue",
                                        hint="pass --gpu with its id (`kvplan gpus` lists "
                                        "them)") from None
    if not given.gpu:
        raise InvalidInputError(f"{m.named}: the GPU cannot be determined (the file does not "
                                "name it)", hint="pass --gpu with the GPU the runs used")
    return resolve_gpu(given.gpu)


def _model_of(m: Measurement, given: Given, cache: dict[str, ModelSpec]) -> tuple[str, ModelSpec]:
    """The file's model id, else --model (also when kvplan cannot find the file's: a served
    name such as "ensemble"); refused when neither can be resolved."""
    from .sources.catalog import resolve_model

    refs = [r for r in (m.model, given.model) if r]
    if not refs:
        raise InvalidInputError(f"{m.named}: the model cannot be determined (the file does not "
                                "name it)", hint="pass --model with the catalogue id or Hub "
                                "repo the server ran")
    why: list[KvplanError] = []
    for ref in dict.fromkeys(refs):
        if ref not in cache:
            try:
                cache[ref] = resolve_model(ref, revision=given.revision, token=given.token,
                                           offline=given.offline)
            except KvplanError as e:
                if ref == given.model:
                    raise
                why.append(e)
                continue
        return ref, cache[ref]
    message = (f"{m.named}: kvplan cannot find the model the file names ("
               + "; ".join(f"{r[:80]!r}: {e.message}" for r, e in zip(refs, why, strict=False))
               + ")")
    hint = ("pass --model with the catalogue id or Hub repo the server ran (a served name is "
            "not enough)")
    last = why[-1]
    if isinstance(last, UnavailableError):  # the source is unavailable (exit 3), not the input
        raise UnavailableError(message, reason=last.reason,  # type: ignore[arg-type]
                               hint=last.hint or hint)  # (an UnavailableError's own reason)
    raise InvalidInputError(message, hint=hint)


def _int_stated(m: Measurement, key: str) -> int | None:
    """The file's whole number for `key` (None: not stated); anything else an error naming it."""
    v = m.deployment.get(key)
    if v is None:
        return None
    try:
        f = float(v)
    except (ValueError, TypeError, OverflowError):
        f = math.nan
    if not math.isfinite(f) or f != int(f):
        raise InvalidInputError(f"{m.named}: the file's {key}={str(v)[:20]!r} is not a whole "
                                "number", hint="pass the value on the command line")
    return int(f)


def _stated_or(m: Measurement, key: str, given: int | None) -> int:
    """The file's value for `key` (0 and negatives included: the range checks name them),
    else the command line's, else 1."""
    stated = _int_stated(m, key)
    return stated if stated is not None else given or 1


def _version_of(m: Measurement, given: Given) -> str | None:
    """The file's engine release (checked here, so that a bad one is named with the run and
    its field, not as --engine-version), else --engine-version."""
    from .versions import normalize_version

    stated = m.deployment.get("engine_version")
    if stated is None:
        return given.engine_version
    return normalize_version(stated, where=f"{m.named}: the file's "
                             f"{m.fields.get('deployment.engine_version', 'version')}")


# the plan knobs a file's deployment facts set → their key in Measurement.deployment
_STATED_KNOBS = {"tensor_parallel_size": "tp", "data_parallel_size": "dp"}


def _stated_fault(m: Measurement, e: InvalidInputError) -> InvalidInputError:
    """A plan's refusal of a value the file stated (its tp or dp), said of the file's field
    and the run (the plan words it as the flag that usually sets it); others as they are."""
    key = _STATED_KNOBS.get(e.knob or "")
    if key is None or key not in m.deployment:
        return e
    flag = "--" + (e.knob or "").replace("_", "-")
    said = m.fields.get(f"deployment.{key}", key)
    detail = e.message.replace(flag + " ", f"{e.knob} ", 1)
    return InvalidInputError(f"{m.named}: the file's {said}={m.deployment[key][:20]!r}: "
                             f"{detail}", hint=(e.hint + "; " if e.hint else "")
                             + "correct the file, or drop its field and pass the flag",
                             code=e.code, knob=e.knob)


def _harness(m: Measurement, replicas: int, dp: int = 1) -> tuple[int | None, str]:
    """(closed-loop concurrency per engine: per DP rank of a replica, how it was found). The
    load is divided evenly among the replicas and their DP ranks (vLLM's -dp front end and
    SGLang's DP controller send each request to one rank)."""
    n, how = m.in_flight()
    if n is None:
        return None, how
    if m.concurrency is not None:
        where = f"closed loop of {n:g} clients"
    elif m.request_rate is not None:
        where = f"open loop at {m.request_rate:g} req/s, {n:.1f} in flight ({how})"
    else:
        where = f"all requests at once, {n:.1f} in flight on average ({how})"
    per = n / (replicas * dp)
    return max(1, round(per)), (where + (f", ÷ {replicas} replicas" if replicas > 1 else "")
                                + (f", ÷ {dp} DP ranks" if dp > 1 else ""))


class Planned(NamedTuple):
    """A deployment as kvplan plans it for a run (`_context`)."""

    context: perf.PerfContext
    version: str
    replayed_as: str  # "" or the launch line it is replayed on (see _context)
    block_size: int  # KV block, tokens
    max_model_len: int | None  # the context length the serve line sets


def _context(model: ModelSpec, gpu: GpuSpec, engine: str, version: str | None, tp: int,
             knobs: Mapping[str, Any], cache: dict[tuple, Planned]) -> Planned:
    """The latency model's context of a deployment as kvplan plans it (kvplan.api
    .plan_with_context: the context `kvplan plan` computes its figures with), its engine
    version, its KV block size (tokens), its context length (max_model_len) and — when
    kvplan plans the stated deployment as not starting but has figures for the launch line
    it recommends (a budget fraction the run evidently had) — that it is replayed on that
    line. The runs did start, so they are kept, and the note says so."""
    from .api import plan_with_context

    key = (id(model), gpu.id, engine, version, tp, tuple(sorted(knobs.items())))
    if key not in cache:
        p, ctx = plan_with_context(model, gpu, engine=engine, engine_version=version,
                                   **{**knobs, "tensor_parallel_size": tp})
        if p.fits and ctx is None:  # a GPU without the latency model's fields
            raise InvalidInputError(
                f"kvplan has no latency figures for {model.id} on {gpu.id}: " + "; ".join(
                    pr.message for pr in p.problems if pr.code == "no-performance-figures"),
                hint="calibrate on a GPU whose gpu_specs entry has its compute and bandwidth")
        if ctx is None:
            raise InvalidInputError(
                f"the runs' deployment ({model.id}, {engine}, TP{tp} on {gpu.id}) does not fit "
                "as kvplan plans it, so it cannot be replayed",
                hint="pass the settings the server ran with (--max-model-len, "
                "--gpu-memory-utilization, --kv-cache-dtype, …)")
        note = "" if p.fits else (
            f"kvplan plans {model.id} on {gpu.id} TP{tp} as not starting as stated ("
            + ", ".join(pr.code for pr in p.problems if pr.severity == "error")
            + "); replayed on the launch line it recommends: " + "; ".join(
                f"{name} {r.value:g}" for name, r in (
                    ("max_model_len", p.recommendations.max_model_len),
                    ("gpu_memory_utilization", p.recommendations.gpu_memory_utilization))
                if r.value is not None))
        length = p.recommendations.max_model_len.value
        cache[key] = Planned(ctx, p.engine.version, note, p.kv_cache.block_size,
                             int(length) if length is not None else None)
    return cache[key]


def _engine_of(m: Measurement, given: Given) -> str:
    engine = (m.deployment.get("engine") or given.engine or registry.DEFAULT).lower()
    if engine not in registry.ENGINES:
        raise InvalidInputError(f"{m.named}: engine {engine[:40]!r} is not one kvplan models",
                                hint=f"pass --engine ({', '.join(registry.NAMES)})")
    return engine


def match(measurements: Sequence[Measurement], given: Given) -> list[Run]:
    """Every measurement matched to its deployment (see the module docstring)."""
    if len(measurements) > MAX_RUNS:
        raise InvalidInputError(f"{len(measurements):,} runs: kvplan calibrates on at most "
                                f"{MAX_RUNS:,}", hint="pass fewer result files")
    models: dict[str, ModelSpec] = {}
    contexts: dict[tuple, Planned] = {}
    runs = []
    for m in measurements:
        ref, model = _model_of(m, given, models)
        gpu = _gpu_of(m, given)
        engine = _engine_of(m, given)
        tp = _stated_or(m, "tp", given.tensor_parallel_size)
        if not 1 <= tp <= MAX_PARALLEL:
            raise InvalidInputError(f"{m.named}: tensor_parallel_size {tp} is not in [1, "
                                    f"{MAX_PARALLEL}]", hint="pass -tp")
        replicas = _stated_or(m, "replicas", given.replicas)
        if not 1 <= replicas <= MAX_REPLICAS:
            raise InvalidInputError(f"{m.named}: {replicas} replicas is not in [1, "
                                    f"{MAX_REPLICAS}]", hint="pass --replicas")
        dp = _stated_or(m, "dp", given.data_parallel_size)
        if not 1 <= dp <= MAX_PARALLEL:
            raise InvalidInputError(f"{m.named}: data_parallel_size {dp} is not in [1, "
                                    f"{MAX_PARALLEL}]", hint="pass -dp")
        version = _version_of(m, given)
        knobs = {**given.knobs, "data_parallel_size": dp} if dp > 1 else given.knobs
        try:
            ctx, ver, replayed, block, length = _context(model, gpu, engine, version, tp,
                                                         knobs, contexts)
        except InvalidInputError as e:
            raise _stated_fault(m, e) from None
        conc, harness = _harness(m, replicas, dp)
        row, why = _row(m, ctx, engine, conc, replicas * dp, harness)
        needs = 0
        if row is not None and length is not None:
            why = _longer_than_context(row, length, "max_model_len" in knobs)
            needs, row = (row.input_tokens + row.output_tokens, None) if why else (0, row)
        loop = _open_loop(m, replicas * dp, block) if row is not None else None
        if loop is not None:
            harness += (f"; TTFT simulated: {loop.requests:,} arrivals at "
                        f"{loop.rate:.4g} req/s, " + (
                            "evenly spaced" if math.isinf(loop.burstiness) else
                            "Poisson" if m.burstiness == 1.0 else
                            "Poisson (burstiness not stated)" if m.burstiness is None else
                            f"burstiness {loop.burstiness:g}"))
        runs.append(Run(m, ref, gpu, engine, ver, tp, replicas, harness, row, why, replayed,
                        dp, loop, needs))
    return runs


def _longer_than_context(row: fit.Row, length: int, given: bool) -> str:
    """Why a run cannot have run on a context of `length` tokens ("" when it can): its mean
    request (prompt + output) is longer. The file's means are over the requests that
    completed, and each of those fit the server's context (vLLM and SGLang refuse a longer
    one), so their mean does too; a longer mean says the server ran a longer context than
    kvplan planned. Replayed anyway, the run would be fitted as if it had (`kvplan plan`
    says workload-longer-than-context for the same workload)."""
    need = row.input_tokens + row.output_tokens
    if need <= length:
        return ""
    on = (f"--max-model-len {length:,}" if given else f"max_model_len {length:,} (kvplan's "
          "plan without --max-model-len)")
    return (f"its mean request of {row.input_tokens:,} prompt + {row.output_tokens:,} output "
            f"tokens needs {need:,} tokens of context, above {on}: the server would have "
            "refused it; pass the --max-model-len the benchmark server ran with")


def _open_loop(m: Measurement, engines: int, block_size: int) -> OpenLoop | None:
    """An open-loop run's arrivals at one of the `engines` it was spread over (None: not an
    open loop, or no request count to replay)."""
    if m.request_rate is None or m.concurrency is not None or m.request_rate <= 0:
        return None
    n = m.num_requests
    if not n:
        return None
    per = max(1, min(MAX_SIMULATED, round(n / engines)))
    return OpenLoop(m.request_rate / engines, per,
                    m.burstiness if m.burstiness is not None else 1.0, block_size)


def simulated_ttft_ms(row: fit.Row, loop: OpenLoop, c: Coefficients) -> float | None:
    """Mean TTFT (ms) of the open loop `loop` replayed through kvplan's scheduler simulation
    (fixed lengths: the run's means) with coefficients `c`; None when no request completes."""
    ctx = dataclasses.replace(row.context, coefficients=c)
    n = loop.requests
    res = sim.open_loop(ctx, (row.input_tokens,) * n, (row.output_tokens,) * n, loop.rate,
                        loop.burstiness, block_size=loop.block_size)
    return res.ttft.mean if res.completed else None


def _positive(v: float | None) -> float | None:
    return v if v is not None and v > 0 else None


def _row(m: Measurement, ctx: perf.PerfContext, engine: str, conc: int | None,
         engines: int, harness: str = "") -> tuple[fit.Row | None, str]:
    """The fit's row of a run (its throughput per engine: ÷ `engines`, the replicas × their DP
    ranks), or (None, why it cannot be replayed, naming the fields: `harness` is what the
    load lacks when `conc` is None)."""
    ttft = _positive(m.ttft_ms.central)
    tpot = _positive(m.tpot_ms.central) or _positive(m.itl_ms.central)  # ITL is TPOT for
    # steady decoding (older SGLang releases write only the median ITL)
    inp, out = _positive(m.input_tokens), _positive(m.output_tokens)
    if m.completed == 0 or m.num_requests == 0:
        return None, "no request completed (completed 0)"
    failures = m.failures()
    if failures and failures[2]:
        return None, failures[0]
    if out is None and m.output_tokens is not None:
        return None, (f"no output tokens ({m.fields.get('output_tokens', 'output tokens')} "
                      f"{m.output_tokens:g}): a run must generate to be timed")
    if "concurrency" in m.invalid and m.concurrency is None:
        return None, f"{m.invalid['concurrency']}: its load is unknown"
    if "request_rate" in m.invalid and m.concurrency is None:
        return None, f"{m.invalid['request_rate']}: its load is unknown"
    if m.concurrency is None and m.request_rate is None:
        cap = f"{m.unbounded} 0: no limit" if m.unbounded else "no max concurrency"
        return None, (f"all requests sent at once (request rate inf, {cap}): a "
                      "burst, not the steady state kvplan's latency model describes; to "
                      "calibrate on this load, re-run with --max-concurrency N (a closed "
                      "loop) or --request-rate R")
    if conc is None:
        return None, harness or "no concurrency, request rate or latency to tell its load"
    if conc > MAX_IN_FLIGHT:
        return None, f"{conc:,} requests in flight per engine: over {MAX_IN_FLIGHT:,}"
    if not inp or not out or max(inp, out) > MAX_LENGTH:
        return None, ("no usable input / output lengths (input: "
                      + m.quantity("input_tokens", m.input_tokens) + "; output: "
                      + m.quantity("output_tokens", m.output_tokens) + f"; at most {MAX_LENGTH:,})")
    if ttft is None and tpot is None:
        return None, (f"neither TTFT ({m.describe('ttft')}) nor TPOT ({m.describe('tpot')}; "
                      f"ITL: {m.describe('itl')}) measured")
    thr = _positive(m.output_throughput)
    return fit.Row(ctx, engine, m.label, conc, max(1, round(inp)), max(1, round(out)), ttft,
                   tpot, thr / engines if thr else None), ""


# ----------------------------------------------------------------------- fitting


def _log_predictions(rows: Sequence[fit.Row], c: Coefficients) -> list[float]:
    out = []
    for r in rows:
        p = fit.predict(r, {r.key: c})
        if r.ttft_ms is not None:
            out.append(math.log(p.ttft_ms))
        if r.tpot_ms is not None:
            out.append(math.log(p.tpot_ms))
        if r.ttft_ms is None and r.tpot_ms is None and r.throughput is not None:
            out.append(math.log(p.output_tokens_per_s))
    return out


def identifiable(rows: Sequence[fit.Row], base: Coefficients) -> tuple[list[str], dict[str, str]]:
    """(coefficients to fit, kept ones → why). Each coefficient is changed by 10 % (at least
    1 % of its range, so one near 0 moves too) and the change of every log prediction is its
    column; in PRIORITY order a coefficient is chosen when its column moves a prediction by
    ≥ MIN_EFFECT and is not (almost) a combination of the columns chosen before (Gram–Schmidt
    residual ≥ MIN_SIN of its length), up to half the observations (at least two)."""
    ref = _log_predictions(rows, base)
    n_obs = len(ref)
    cap = max(min(2, n_obs), n_obs // 2)
    chosen: list[str] = []
    basis: list[list[float]] = []
    kept: dict[str, str] = {}
    for name in PRIORITY:
        if len(chosen) >= cap:
            kept[name] = f"{n_obs} measured values identify at most {cap} coefficients"
            continue
        lo, hi = fit.BOUNDS[name]
        v = getattr(base, name)
        step = max(0.1 * v, 0.01 * (hi - lo))  # 10 %, or 1 % of its range from (near) 0
        v2 = v + step if v + step <= hi else v - step
        col = [b - a for a, b in zip(ref, _log_predictions(
            rows, dataclasses.replace(base, **{name: v2})), strict=True)]
        if max((abs(x) for x in col), default=0.0) < MIN_EFFECT:
            kept[name] = "no measurable effect on these runs"
            continue
        res = list(col)
        for q in basis:
            dot = sum(a * b for a, b in zip(res, q, strict=True))
            res = [a - dot * b for a, b in zip(res, q, strict=True)]
        norm, rn = math.sqrt(sum(x * x for x in col)), math.sqrt(sum(x * x for x in res))
        if rn < MIN_SIN * norm:
            kept[name] = "these runs cannot tell it apart from " + ", ".join(chosen)
            continue
        chosen.append(name)
        basis.append([x / rn for x in res])
    for f in dataclasses.fields(base):
        # burst_share: how the bundled rows' clients sent requests; dynamo_front_end_ms: the
        # front end they went through
        if f.name not in PRIORITY:
            kept[f.name] = "a term of the bundled runs' harness, not fitted here"
    return chosen, kept


@dataclass(frozen=True)
class Scored:
    """Predictions of every row with one set of coefficients, and their error summary."""

    preds: list[perf.PerfPoint]
    summary: dict[str, dict[str, float]]


def predict(run: Run, coeffs: Mapping[str, Coefficients]) -> perf.PerfPoint:
    """A usable run's prediction: the closed form at its concurrency, an open loop's TTFT
    simulated (module docstring)."""
    assert run.row is not None
    p = fit.predict(run.row, coeffs)
    if run.open_loop is None:
        return p
    ttft = simulated_ttft_ms(run.row, run.open_loop, coeffs[run.row.key])
    return p if ttft is None else dataclasses.replace(p, ttft_ms=ttft)


def _fit_rows(run: Run, coeffs: Mapping[str, Coefficients]) -> list[fit.Row]:
    """The rows the fit sees for a usable run: itself; an open loop's TPOT and throughput at
    its concurrency, and its TTFT as a lone request's (concurrency 1) scaled by the measured /
    simulated TTFT with `coeffs` (module docstring)."""
    row = run.row
    assert row is not None
    if run.open_loop is None:
        return [row]
    rows = [dataclasses.replace(row, ttft_ms=None)]
    simulated = simulated_ttft_ms(row, run.open_loop, coeffs[row.key])
    if row.ttft_ms is not None and simulated:
        lone = dataclasses.replace(row, concurrency=1, tpot_ms=None, throughput=None)
        alone_ms = fit.predict(lone, coeffs).ttft_ms
        rows.append(dataclasses.replace(lone, ttft_ms=row.ttft_ms * alone_ms / simulated))
    return rows


def _rows(runs: Sequence[Run], coeffs: Mapping[str, Coefficients]) -> list[fit.Row]:
    return [f for r in runs for f in _fit_rows(r, coeffs)]


def score(runs: Sequence[Run], coeffs: Mapping[str, Coefficients]) -> Scored:
    """Every usable run predicted with `coeffs`, and the errors against its measurements."""
    used = [r for r in runs if r.row is not None]
    preds = [predict(r, coeffs) for r in used]
    return Scored(preds, fit.summary(fit.errors([r.row for r in used if r.row], preds)))


@dataclass(frozen=True)
class Result:
    """A calibration: coefficients before and after, which were fitted, and the scores."""

    engine: str
    arch: str
    base: Coefficients
    base_source: str
    coefficients: Coefficients
    fitted: list[str]
    kept: dict[str, str]
    runs: list[Run]
    before: Scored
    after: Scored
    leave_one_out: dict[str, dict[str, float]] | None


def _listed(names: Sequence[str], most: int = 10) -> str:
    """'a, b, c' — the first `most`, then how many more."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _unusable(runs: Sequence[Run]) -> InvalidInputError:
    """The error when no run can be replayed: every run, named with where it is in its file,
    grouped by the reason it cannot be used."""
    by_reason: dict[str, list[str]] = {}
    for r in runs:
        by_reason.setdefault(r.skipped, []).append(r.named)
    need = max((r.needs_context for r in runs), default=0)
    return InvalidInputError("none of the runs can be used: " + "; ".join(
        f"{_listed(names)}: {why}" for why, names in by_reason.items()),
        hint=f"pass the --max-model-len the benchmark server ran with (these runs need "
        f"{need:,} tokens or more)" if need else "docs/calibration.md lists the fields each "
        "format needs and the flags that describe a deployment the file does not")


def _one_class(runs: Sequence[Run]) -> tuple[str, str]:
    classes: dict[tuple[str, str], list[str]] = {}
    for r in runs:
        if r.row is not None:
            classes.setdefault((r.engine, r.gpu.arch), []).append(r.named)
    if not classes:
        raise _unusable(runs)
    if len(classes) > 1:
        raise InvalidInputError(
            "a calibration covers one engine × GPU architecture; these runs span "
            + ", ".join(f"{e} on {a} ({_listed(classes[e, a])})" for e, a in sorted(classes)),
            hint="calibrate each engine × architecture separately (one -o file each)")
    return min(classes)


def _inside(name: str, v: float) -> float:
    """A start value moved 2 % of the range inside its bounds: from a bound itself (the bundled
    bandwidth_efficiency is 1.0) the logistic transform would have to travel far to move."""
    lo, hi = fit.BOUNDS[name]
    margin = 0.02 * (hi - lo)
    return min(max(v, lo + margin), hi - margin)


def calibrate(runs: Sequence[Run], *, loo: bool = True) -> Result:
    """Fit the identifiable coefficients of the runs' engine × GPU architecture."""
    engine, arch = _one_class(runs)
    used = [r for r in runs if r.row is not None]
    assert used[0].row is not None
    base = used[0].row.context.coefficients
    base_source = used[0].row.context.calibration
    bases = {engine: base}
    rows = _rows(used, bases)
    chosen, kept = identifiable(rows, base)
    params = fit.Parameters(shared=tuple(chosen), per_key=(), keys=(engine,))
    start = {engine: {k: _inside(k, v) for k, v in dataclasses.asdict(base).items()}}

    def fitter(train: list[fit.Row]) -> dict[str, Coefficients]:
        return fit.fit(train, params, start, bases, tol=FIT_TOL) if chosen else dict(bases)

    after = fitter(rows)
    if any(r.open_loop for r in used):  # the simulated queueing at the fitted coefficients
        after = fitter(_rows(used, after))
    held = None
    if loo and len(used) >= 3 and chosen:
        held = _held_out(used, bases, fitter)
    return Result(engine, arch, base, base_source, after[engine], chosen, kept, list(runs),
                  score(used, bases), score(used, after), held)


def _held_out(used: Sequence[Run], bases: Mapping[str, Coefficients],
              fitter: Callable[[list[fit.Row]], dict[str, Coefficients]]
              ) -> dict[str, dict[str, float]]:
    """Leave one run out (10 folds of many runs): fit on the others (open loops' queueing
    held at the starting coefficients: one pass), predict it."""
    folds = min(len(used), FOLDS)
    at_base = [_fit_rows(r, bases) for r in used]
    held_rows: list[fit.Row] = []
    held_preds: list[perf.PerfPoint] = []
    for k in range(folds):
        test = [r for i, r in enumerate(used) if i % folds == k]
        coeffs = fitter([f for i, rows in enumerate(at_base) if i % folds != k for f in rows])
        held_rows += [r.row for r in test if r.row is not None]
        held_preds += [predict(r, coeffs) for r in test]
    return fit.summary(fit.errors(held_rows, held_preds))


def check(runs: Sequence[Run]) -> Scored:
    """The runs' predictions with the coefficients in force, without fitting."""
    rows = [r.row for r in runs if r.row is not None]
    if not rows:
        raise _unusable(runs)
    return score(runs, {r.key: r.context.coefficients for r in rows})


def notes(runs: Sequence[Run]) -> dict[str, list[str]]:
    """Run label → what its file said otherwise than kvplan read it (an invalid value ignored,
    the median used for an invalid mean), for the runs that have any."""
    return {r.label: r.measurement.notes for r in runs if r.measurement.notes}


def worst_median(summary: Mapping[str, Mapping[str, float]]) -> tuple[str, float]:
    """(metric, its median absolute % error) of the metric with the largest one."""
    metric = max(summary, key=lambda k: summary[k]["median"])
    return metric, summary[metric]["median"]


# ------------------------------------------------------------------ the file


def _measured(r: fit.Row) -> dict[str, float | None]:
    return {"ttft_ms": r.ttft_ms, "tpot_ms": r.tpot_ms, "output_tokens_per_s": r.throughput}


def _predicted(p: perf.PerfPoint) -> dict[str, float]:
    return {"ttft_ms": round(p.ttft_ms, 3), "tpot_ms": round(p.tpot_ms, 4),
            "output_tokens_per_s": round(p.output_tokens_per_s, 2)}


def document(result: Result, *, created: str, kvplan_version: str) -> dict[str, Any]:
    """The calibration file's JSON object (kvplan.sources.calibration reads it back)."""
    from .sources.calibration import FORMAT, VERSION

    used = [r for r in result.runs if r.row is not None]
    rows = []
    for run, b, a in zip(used, result.before.preds, result.after.preds, strict=True):
        assert run.row is not None
        rows.append({
            "run": run.label, "model": run.model, "gpu": run.gpu.id, "engine_version":
            run.engine_version, "tensor_parallel_size": run.tp, "data_parallel_size": run.dp,
            "replicas": run.replicas,
            "harness": run.harness, "concurrency": run.row.concurrency,
            "input_tokens": run.row.input_tokens, "output_tokens": run.row.output_tokens,
            "measured": _measured(run.row), "before": _predicted(b), "after": _predicted(a),
            "fields": dict(run.measurement.fields)})
    return {
        "format": FORMAT, "version": VERSION, "created": created,
        "kvplan_version": kvplan_version, "engine": result.engine, "gpu_arch": result.arch,
        "engine_versions": sorted({r.engine_version for r in used}),
        "gpus": sorted({r.gpu.id for r in used}), "models": sorted({r.model for r in used}),
        "coefficients": fit.as_dict(result.coefficients), "fitted": result.fitted,
        "kept": result.kept, "base": {"source": result.base_source,
                                      "coefficients": fit.as_dict(result.base)},
        "sources": sorted({r.measurement.source for r in result.runs}),
        "skipped": {r.label: r.skipped for r in result.runs if r.row is None},
        "notes": notes(result.runs),
        "errors": {"before": result.before.summary, "after": result.after.summary,
                   "leave_one_out": result.leave_one_out,
                   "unit": "% of measured: mean, median, p90 of |predicted / measured − 1|; "
                           "bias: median signed error"},
        "rows": rows,
    }
