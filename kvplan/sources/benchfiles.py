"""Readers for serving-benchmark result files: one `Measurement` per measured run.

Detected formats (the field names each reader uses come from the tool's own source, cited):

* ``vllm`` — `vllm bench serve --save-result` (JSON; `--append-result` makes JSON lines) and
  the older `benchmarks/benchmark_serving.py`. vllm-project/vllm `vllm/benchmarks/serve.py`
  (main branch, commit 009e6d4a1cd6): top-level `model_id`, `num_prompts`, `request_rate`
  (a number or "inf"), `max_concurrency`, `completed`, `failed`, `errors` (one per request,
  with --save-detailed), `duration`, `total_input_tokens`,
  `total_output_tokens`, `request_throughput`, `output_throughput`, and per metric
  `mean_/median_/p99_{ttft,tpot,itl,e2el}_ms`; `--metadata KEY=VALUE` pairs land at the top
  level too (e.g. `gpu=`, `tp=`, `version=`).
* ``sglang`` — `python -m sglang.bench_serving --output-file` (JSON lines, one object per
  run). sgl-project/sglang `python/sglang/bench_serving.py` (commit 0033168f0f58): `backend`,
  `request_rate`, `max_concurrency`, `random_input_len`, `random_output_len`, `completed`,
  `duration`, `total_input_tokens`, `total_output_tokens`, `output_throughput`,
  `mean_/median_/p99_{ttft,tpot,itl}_ms`, `mean_/median_e2e_latency_ms`, `concurrency`
  (summed request time / wall time); older releases write only the medians.
* ``guidellm`` — GuideLLM's `benchmarks.json` report. vllm-project/guidellm
  `src/guidellm/benchmark/schemas/generative/metrics.py` and `src/guidellm/schemas/statistics.py`
  (commit 03820eba155d): `args.model`, `benchmarks[].config.strategy` (`type_` with `streams`
  or `rate`), `benchmarks[].metrics.{time_to_first_token_ms, time_per_output_token_ms,
  inter_token_latency_ms, request_latency (s), prompt_token_count, output_token_count,
  output_tokens_per_second, requests_per_second, request_concurrency}.successful.{mean,
  median, percentiles.p99}`.
* ``aiperf`` / ``genai-perf`` — `profile_export_aiperf.json` (ai-dynamo/aiperf, schema_version
  1.3, aiperf 0.10.0) and genai-perf's `profile_export_genai_perf.json`, which share the metric
  layout `{time_to_first_token, inter_token_latency, request_latency}.{unit, avg, p50, p99}`,
  `output_token_throughput.avg`, `request_throughput.avg`, `{input,output}_sequence_length.avg`
  (times in their `unit`: TIME_UNITS; any other is refused);
  model and load from `input_config` (aiperf: `models.items[].name`, `phases[]` of type
  "concurrency"/"request_rate" not excluded from results; genai-perf: `model`, `concurrency`,
  `request_rate`). AIPerf's `inter_token_latency` is (request latency − TTFT) / (output
  tokens − 1) per request, i.e. TPOT.
* ``inference-perf`` — kubernetes-sigs/inference-perf `*_lifecycle_metrics.json` (per stage or
  summary; `inference_perf/reportgen/base.py`): `load_summary.{requested_rate, achieved_rate}`,
  `successes.latency.{time_to_first_token, time_per_output_token, inter_token_latency,
  request_latency}.{mean, median, p99}` in SECONDS, `successes.throughput.{output_tokens_per_sec,
  requests_per_sec}`, `successes.{prompt_len|prompt_tokens, output_len|output_tokens}.mean`.
  The file names no model: the command line must.

Every measurement records, in `fields`, which field each quantity came from, in `absent` the
field it looked for and did not find, in `invalid` a value that is there but is no measurement
(a negative or non-finite latency, text where a number belongs), and in `where` the line
(JSON lines) or `benchmarks[i]` (GuideLLM) it was read from. An invalid mean falls back to the
median (`Stat.central`) and `Measurement.notes` says so. Units: ms for latencies, tokens for
lengths, tokens/s and requests/s for rates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engines import registry
from ..errors import InvalidConfigError
from . import limits

MAX_BENCH_BYTES = 64 * 2**20  # GuideLLM keeps every request in its report: tens of MiB
# the benchmark tools whose result files are read (named for the tool, not the engine it ran)
FORMATS = ("vllm-bench-serve", "sglang-bench-serving", "guidellm", "aiperf", "genai-perf",
           "inference-perf")
VLLM_BENCH, SGLANG_BENCH = FORMATS[:2]
EXPECTED = ("a vllm bench serve --save-result JSON, an sglang.bench_serving --output-file "
            "JSONL, a GuideLLM benchmarks.json, an AIPerf / genai-perf profile export JSON or "
            "an inference-perf *_lifecycle_metrics.json")


@dataclass(frozen=True)
class Stat:
    """One latency metric of a run, ms: mean, median and 99th percentile (None: not stated)."""

    mean: float | None = None
    median: float | None = None
    p99: float | None = None

    @property
    def central(self) -> float | None:
        """The mean, else the median (what the fit compares the model's mean with): the first
        that is a positive number (vLLM writes 0 for a metric with no samples; the readers
        leave an invalid value out, `Measurement.invalid` says which)."""
        for v in (self.mean, self.median):
            if v is not None and v > 0:
                return v
        return None


@dataclass(frozen=True)
class Measurement:
    """One measured benchmark run as a result file states it.

    concurrency: closed-loop clients (max concurrency / streams), None for an open loop;
    request_rate: offered requests/s (None: a closed loop, or all requests at once ("inf"));
    achieved_rate: completed requests/s; input_tokens / output_tokens: mean per request;
    output_throughput: output tokens/s of the whole benchmarked endpoint; deployment: what the
    file says about the deployment (keys: model, gpu, tp, engine, engine_version, replicas),
    as text; fields: quantity → the file's field it was read from."""

    source: str
    index: int  # 1-based run number within the file
    format: str
    model: str | None
    concurrency: float | None
    request_rate: float | None
    achieved_rate: float | None
    num_requests: int | None
    input_tokens: float | None
    output_tokens: float | None
    ttft_ms: Stat
    tpot_ms: Stat
    itl_ms: Stat
    e2e_ms: Stat
    output_throughput: float | None
    deployment: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, str] = field(default_factory=dict)
    # an open loop's arrivals: gamma gaps of this shape (1: Poisson; vllm bench serve
    # --burstiness), inf: evenly spaced (GuideLLM's constant rate), None: not stated
    burstiness: float | None = None
    completed: float | None = None  # requests the file says completed (None: not stated)
    where: str = ""  # where in the file: "line 3" (JSON lines), "benchmarks[1]" (GuideLLM)
    # quantity → the field looked for and not found ("mean_ttft_ms absent", "… null")
    absent: Mapping[str, str] = field(default_factory=dict)
    # quantity → a value that is there but is no measurement, and why
    invalid: Mapping[str, str] = field(default_factory=dict)
    # mean requests in flight as the tool measured it on the wall clock (SGLang's
    # `concurrency`, GuideLLM's `request_concurrency`), None: not stated
    stated_in_flight: float | None = None
    failed: float | None = None  # requests the file says failed (None: not stated)
    # the field whose 0 means no limit on the requests in flight (vLLM's and SGLang's
    # max_concurrency 0): read as no max concurrency, and noted
    unbounded: str = ""

    @property
    def label(self) -> str:
        """'file.json#2': the run, for tables and the calibration file's keys."""
        return f"{self.source}#{self.index}"

    @property
    def named(self) -> str:
        """'file.json#2 (line 2)': the run and where in the file it is, for messages."""
        return self.label + (f" ({self.where})" if self.where else "")

    def describe(self, *metrics: str) -> str:
        """What the file says of latency metrics' means and medians, for messages:
        'mean_ttft_ms -5 is not a latency (negative); median_ttft_ms absent', or
        'mean_tpot_ms, median_tpot_ms absent' when none is there."""
        parts, gone = [], []
        for metric in metrics:
            stat: Stat = getattr(self, f"{metric}_ms")
            for which in ("mean", "median"):
                q = f"{metric}.{which}"
                v = getattr(stat, which)
                if q in self.invalid:
                    parts.append(self.invalid[q])
                elif q in self.fields and v is not None:
                    parts.append(f"{self.fields[q]} {v:g}")
                elif q in self.absent:
                    gone.append(self.absent[q])
        if gone and all(g.endswith(" absent") for g in gone):
            gone = [", ".join(g.removesuffix(" absent") for g in gone) + " absent"]
        return "; ".join(parts + gone) or "not in this format"

    def quantity(self, q: str, value: float | None) -> str:
        """One quantity as the file states it, for messages: 'total_output_tokens / completed
        0', 'request_throughput absent'."""
        if q in self.invalid:
            return self.invalid[q]
        if q in self.fields and value is not None:
            return f"{self.fields[q]} {value:g}"
        return self.absent.get(q, f"no {q.replace('_', ' ')}")

    @property
    def notes(self) -> list[str]:
        """What was read otherwise than written, one sentence each: a value that is no
        measurement (ignored, the median used for an invalid mean)."""
        out = []
        for q, why in self.invalid.items():
            metric, _, which = q.partition(".")
            stat = getattr(self, f"{metric}_ms", None)
            if which == "mean" and isinstance(stat, Stat) and stat.central is not None \
                    and stat.central == stat.median and f"{metric}.median" in self.fields:
                out.append(f"{why}: the median ({self.fields[metric + '.median']}) is used "
                           "instead")
            else:
                out.append(f"{why}: ignored")
        if self.unbounded:
            out.append(f"{self.unbounded} 0 is no limit (the benchmark caps the requests in "
                       "flight only for a positive --max-concurrency): read as no max "
                       "concurrency, " + (f"an open loop at its request rate "
                                          f"{self.request_rate:g} req/s" if self.request_rate
                                          else "all requests at once"))
        failed = self.failures()
        if failed and not failed[2]:
            out.append(failed[0])
        return out

    def failures(self) -> tuple[str, float, bool] | None:
        """(what the file says of its failed requests, how many, whether most failed), None
        when it states none failed or does not say. Most (more than the requests that
        completed): the latencies then are those of the few a struggling server answered."""
        if not self.failed or self.completed is None:
            return None
        total = self.failed + self.completed
        most = self.failed > self.completed
        said = (f"{self.failed:,.0f} of {total:,.0f} requests failed ({self.fields['failed']} "
                f"{self.failed:,.0f}, completed {self.completed:,.0f})")
        return (said + (": the latencies of the few that completed describe an overloaded or "
                        "failing server, not the steady state kvplan's latency model describes;"
                        " re-run it at a load the server sustains" if most else
                        ": its latencies are those of the requests that completed"),
                self.failed, most)

    def in_flight(self) -> tuple[float | None, str]:
        """(mean requests in flight, how it was found). A closed loop: its clients (at most
        the requests sent). Otherwise Little's law, N = completed/s × mean e2e (s), with e2e
        measured or TTFT + (O − 1) · TPOT (else ITL); None and what the file lacks when
        neither gives it."""
        if self.concurrency is not None:
            n = self.concurrency
            if self.num_requests:
                n = min(n, self.num_requests)
            return n, "closed loop (max concurrency)"
        e2e, how = self.mean_e2e_ms()
        rate = self.completed_rate()
        if e2e is not None and rate:
            return rate * e2e / 1e3, f"Little's law: completed/s × {how}"
        lacks = []
        if e2e is None:
            lacks.append(f"no end-to-end latency ({self.describe('e2e')})")
            if self.ttft_ms.central is None and self.tpot_ms.central is None \
                    and self.itl_ms.central is None:
                lacks.append("no TTFT and TPOT to add one up from "
                             f"({self.describe('ttft', 'tpot', 'itl')})")
            elif self.ttft_ms.central is None:
                lacks.append(f"no TTFT to add one up from ({self.describe('ttft')})")
            elif self.output_tokens:
                lacks.append("no TPOT or ITL to add one up from "
                             f"({self.describe('tpot', 'itl')})")
            else:
                lacks.append("no output tokens to add one up from ("
                             + self.quantity("output_tokens", self.output_tokens) + ")")
        if not rate:
            lacks.append("no completed requests/s (" + self.quantity(
                "achieved_rate", self.achieved_rate) + "; " + self.quantity(
                "output_throughput", self.output_throughput) + ")")
        load = "an open loop" if self.request_rate is not None else "a run without a max " \
            "concurrency"
        return None, (f"{load}: its requests in flight come from Little's law (completed/s × "
                      "mean end-to-end latency), but it has " + ", and ".join(lacks))

    def mean_e2e_ms(self) -> tuple[float | None, str]:
        """(mean end-to-end latency in ms, how): measured, else TTFT + (O − 1) · TPOT (else
        ITL: steady decoding's TPOT); None when the file gives neither."""
        e2e = self.e2e_ms.central
        if e2e is not None:
            return e2e, "measured e2e"
        ttft, tpot = self.ttft_ms.central, self.tpot_ms.central or self.itl_ms.central
        if ttft is not None and tpot is not None and self.output_tokens:
            return ttft + (self.output_tokens - 1) * tpot, "TTFT + (O − 1)·TPOT"
        return None, ""

    def completed_rate(self) -> float | None:
        """Completed requests/s: the file's, else its output tokens/s ÷ output tokens per
        request."""
        if self.achieved_rate:
            return self.achieved_rate
        if self.output_throughput and self.output_tokens:
            return self.output_throughput / self.output_tokens
        return None


# ---------------------------------------------------------------------- helpers


def _finite(v: object) -> float | None:
    """A number (not a bool) as a finite float, else None: an integer past float's range
    (10**400) overflows, and is no number here either."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _num(d: Mapping[str, Any], key: str) -> float | None:
    """A finite number at d[key] (numbers written as text count), else None."""
    v = d.get(key) if isinstance(d, Mapping) else None
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    return _finite(v)


def _dig(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, Mapping):
            return None
        d = d.get(p)
    return d


def _shown(v: object) -> str:
    """A value as a message quotes it (short)."""
    text = repr(v) if isinstance(v, str) else f"{v:g}" if isinstance(v, float) else str(v)
    return text if len(text) <= 24 else text[:21] + "…"


class _Fields:
    """Collects, while reading one run: quantity → the field it came from (`used`), → the
    field looked for and not found (`absent`), → a value that is no measurement and why
    (`invalid`)."""

    def __init__(self) -> None:
        self.used: dict[str, str] = {}
        self.absent: dict[str, str] = {}
        self.invalid: dict[str, str] = {}
        self.unbounded = ""  # the field whose 0 says "no limit" on the clients

    def take(self, quantity: str, d: Mapping[str, Any], key: str, scale: float = 1.0,
             prefix: str = "", latency: bool = False, rate: bool = False) -> float | None:
        """d[key] × scale, a finite number, else None, noting why: absent, null, not a finite
        number, text where a number belongs (no tool writes its figures as text: left out,
        docs/calibration.md "Noted"), (`latency`) negative, or (`rate`) not positive."""
        name = prefix + key
        raw = d.get(key) if isinstance(d, Mapping) else None
        v = _num(d, key)
        if v is None:
            if raw is None:
                there = isinstance(d, Mapping) and key in d
                self.absent.setdefault(quantity, f"{name} {'null' if there else 'absent'}")
            else:
                self.invalid.setdefault(quantity, f"{name} {_shown(raw)} is not a finite number")
            return None
        if isinstance(raw, str):
            self.invalid.setdefault(quantity, f"{name} {_shown(raw)} is text, not a number")
            return None
        if latency and v < 0:
            self.invalid.setdefault(quantity, f"{name} {v:g} is not a latency (negative)")
            return None
        if rate and v <= 0:
            self.invalid.setdefault(quantity, f"{name} {v:g} is not a measured rate ("
                                    + ("negative" if v < 0 else "zero") + ")")
            return None
        self.used[quantity] = name + (f" × {scale:g}" if scale != 1.0 else "")
        self.absent.pop(quantity, None)
        return v * scale

    def first(self, quantity: str, d: Mapping[str, Any], keys: tuple[str, ...],
              scale: float = 1.0, prefix: str = "") -> float | None:
        for k in keys:
            v = self.take(quantity, d, k, scale, prefix)
            if v is not None:
                return v
        return None

    def kept(self) -> dict[str, Any]:
        """The Measurement fields this collector fills."""
        return {"fields": dict(self.used), "absent": dict(self.absent),
                "invalid": dict(self.invalid), "unbounded": self.unbounded}


def _text(v: object) -> str | None:
    return str(v) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else None


# Deployment facts a file may state (vLLM's --metadata pairs, or our own documented keys):
# the key kvplan uses → the spellings read, first found wins.
DEPLOYMENT_KEYS = {
    "gpu": ("gpu", "gpu_type", "accelerator"),
    "tp": ("tp", "tensor_parallel_size", "tp_size"),
    "dp": ("dp", "data_parallel_size", "dp_size"),
    "engine": ("engine",),
    "engine_version": ("engine_version", "version", "vllm_version", "sglang_version"),
    "replicas": ("replicas", "decode_replicas"),
}


def _deployment(d: Mapping[str, Any], fields: _Fields) -> dict[str, str]:
    out = {}
    for key, spellings in DEPLOYMENT_KEYS.items():
        for s in spellings:
            t = _text(d.get(s))
            if t:
                out[key] = t
                fields.used[f"deployment.{key}"] = s
                break
    return out


# ------------------------------------------------------------------- the formats


def _clients(f: _Fields, d: Mapping[str, Any], key: str, prefix: str, source: str,
             where: str, *, zero_unbounded: bool) -> float | None:
    """A closed loop's clients at d[key] (None: not stated, or no limit). A negative count is
    refused naming the run's place in the file and the field (no tool runs -8 clients: the
    file is not as the tool wrote it). A 0 is no limit where the tool reads it so
    (`zero_unbounded`: vLLM's and SGLang's falsy --max-concurrency; `Measurement.unbounded`
    names it), else no value the tool writes: noted invalid, the run's load unknown."""
    v = f.take("concurrency", d, key, prefix=prefix)
    if v is None or v >= 1:
        return v
    name = prefix + key
    f.used.pop("concurrency", None)
    if v < 0:
        raise InvalidConfigError(
            f"{where or 'its run'}: {name} {v:g} is not a number of clients (negative)",
            path=source, hint="a result file as the benchmark tool wrote it states a positive "
            "concurrency (or none)")
    if v == 0 and zero_unbounded:
        f.unbounded = name
        return None
    f.invalid["concurrency"] = f"{name} {v:g} is not a number of clients"
    return None


def _stat_flat(f: _Fields, d: Mapping[str, Any], name: str, metric: str) -> Stat:
    """vLLM / SGLang: mean_<metric>_ms, median_<metric>_ms, p99_<metric>_ms."""
    return Stat(f.take(f"{name}.mean", d, f"mean_{metric}_ms", latency=True),
                f.take(f"{name}.median", d, f"median_{metric}_ms", latency=True),
                f.take(f"{name}.p99", d, f"p99_{metric}_ms", latency=True))


def _rate(f: _Fields, d: Mapping[str, Any], key: str = "request_rate") -> float | None:
    """A request rate as the files write it: a positive number, or "inf" / Infinity / absent →
    None (all at once); anything else is noted invalid (and None)."""
    v = d.get(key)
    past_float = isinstance(v, int) and not isinstance(v, bool) and v > 0 and _finite(v) is None
    if v is None or past_float or (isinstance(v, str) and v.strip().lower() in (
            "inf", "infinity")) or (isinstance(v, float) and v == math.inf):
        if key in d:
            f.used["request_rate"] = key
        return None
    rate = _num(d, key)
    if rate is None or rate <= 0:
        f.invalid["request_rate"] = f"{key} {_shown(v)} is not a request rate"
        return None
    f.used["request_rate"] = key
    return rate


def _per_request(f: _Fields, d: Mapping[str, Any], done: float | None, quantity: str,
                 total_key: str, fallback: tuple[str, ...]) -> float | None:
    """Mean tokens per request: the measured total / completed requests, else the length the
    run asked for (random dataset settings, or --metadata)."""
    total = f.take(quantity, d, total_key) if total_key in d else None
    if total is not None and done:
        f.used[quantity] = f"{total_key} / completed"
        return total / done
    return f.first(quantity, d, fallback)


def _failed_serving(f: _Fields, d: Mapping[str, Any], sent: float | None,
                    done: float | None) -> float | None:
    """Failed requests of a vLLM / SGLang result: vLLM's `failed`; else the non-empty entries
    of `errors` (one per request, "" for a success: vLLM with --save-detailed, SGLang with
    --output-details); else `num_prompts` − `completed` (vLLM counts a request completed when
    it succeeded, and sends num_prompts)."""
    failed = f.take("failed", d, "failed")
    if failed is not None:
        return failed
    errors = d.get("errors")
    if isinstance(errors, list) and errors:
        f.used["failed"] = "errors (non-empty entries)"
        return float(sum(1 for e in errors if e))
    if sent is not None and done is not None and sent > done:
        f.used["failed"] = "num_prompts − completed"
        return sent - done
    return None


def _read_serving(d: Mapping[str, Any], source: str, index: int, fmt: str,
                  where: str = "") -> Measurement:
    """vLLM's and SGLang's result objects (SGLang's is an adaptation of vLLM's)."""
    f = _Fields()
    done = f.take("completed", d, "completed")
    inp = _per_request(f, d, done, "input_tokens", "total_input_tokens",
                       ("random_input_len", "input_len"))
    out = _per_request(f, d, done, "output_tokens", "total_output_tokens",
                       ("random_output_len", "output_len"))
    e2e_key = "e2el" if fmt == VLLM_BENCH else "e2e_latency"
    rate = _rate(f, d)
    # vllm bench serve caps the requests in flight only for a truthy --max-concurrency
    # (vllm/benchmarks/serve.py, v0.12.0: `asyncio.Semaphore(max_concurrency) if
    # max_concurrency else contextlib.nullcontext()`, and its aiohttp connector's
    # `limit=max_concurrency or 0`, 0 = no limit): a 0 is no limit, as an absent one.
    # SGLang's bench_serving is adapted from vLLM's benchmark_serving.py (its header) and is
    # read alike.
    conc = _clients(f, d, "max_concurrency", "", source, where, zero_unbounded=True)
    timed = done != 0  # with requests completed, a zero rate is no measurement
    achieved = f.take("achieved_rate", d, "request_throughput", rate=timed)
    model = _text(d.get("model_id")) or _text(d.get("model"))
    if model:
        f.used["model"] = "model_id" if d.get("model_id") else "model"
    dep = _deployment(d, f)
    backend = _text(d.get("backend"))  # the server the tool ran against (--backend)
    if "engine" not in dep and backend in registry.names():
        dep["engine"] = backend
        f.used["deployment.engine"] = "backend"
    num = f.take("num_requests", d, "num_prompts")
    failed = _failed_serving(f, d, num, done)
    burst = f.take("burstiness", d, "burstiness")
    return Measurement(
        source=source, index=index, format=fmt, model=model, concurrency=conc,
        request_rate=rate, achieved_rate=achieved,
        num_requests=int(num) if num is not None else (int(done) if done else None),
        input_tokens=inp, output_tokens=out,
        ttft_ms=_stat_flat(f, d, "ttft", "ttft"), tpot_ms=_stat_flat(f, d, "tpot", "tpot"),
        itl_ms=_stat_flat(f, d, "itl", "itl"), e2e_ms=_stat_flat(f, d, "e2e", e2e_key),
        output_throughput=f.take("output_throughput", d, "output_throughput", rate=timed),
        deployment=dep, burstiness=burst if burst is not None and burst > 0 else None,
        completed=done, where=where,
        # SGLang's summed request time / wall time (vLLM writes no such field: a `concurrency`
        # there would be a --metadata pair)
        stated_in_flight=f.take("stated_in_flight", d, "concurrency")
        if fmt == SGLANG_BENCH else None, failed=failed, **f.kept())


def _guidellm_stat(f: _Fields, metrics: Mapping[str, Any], name: str, key: str,
                   scale: float = 1.0) -> Stat:
    s = _dig(metrics, key, "successful")
    pre = f"metrics.{key}.successful."
    if not isinstance(s, Mapping):
        f.absent[f"{name}.mean"] = f"{pre}mean absent"
        f.absent[f"{name}.median"] = f"{pre}median absent"
        return Stat()
    return Stat(f.take(f"{name}.mean", s, "mean", scale, pre, latency=True),
                f.take(f"{name}.median", s, "median", scale, pre, latency=True),
                f.take(f"{name}.p99", s.get("percentiles") or {}, "p99", scale,
                       pre + "percentiles.", latency=True))


def _read_guidellm_one(b: Mapping[str, Any], model: str | None, source: str,
                       index: int, where: str) -> Measurement:
    f = _Fields()
    m = b.get("metrics") or {}
    strategy = _dig(b, "config", "strategy") or {}
    kind = _text(strategy.get("type_")) or ""
    conc = rate = None
    if kind in ("concurrent", "synchronous"):
        # GuideLLM's concurrent strategy has `streams: PositiveInt` (vllm-project/guidellm
        # src/guidellm/scheduler/strategies.py, v0.7.3): a 0 is no value it writes
        conc = 1.0 if kind == "synchronous" else _clients(
            f, strategy, "streams", "config.strategy.", source, where, zero_unbounded=False)
    elif kind in ("constant", "poisson"):
        rate = f.take("request_rate", strategy, "rate", prefix="config.strategy.")

    total = _dig(m, "request_totals", "successful")

    def mean_of(key: str, quantity: str, rate: bool = False) -> float | None:
        s = _dig(m, key, "successful")
        return f.take(quantity, s, "mean", prefix=f"metrics.{key}.successful.",
                      rate=rate and total != 0) if isinstance(s, Mapping) else None

    totals = _dig(m, "request_totals")
    errored = f.take("failed", totals, "errored", prefix="metrics.request_totals.") \
        if isinstance(totals, Mapping) else None
    return Measurement(
        source=source, index=index, format="guidellm", model=model, concurrency=conc,
        request_rate=rate, achieved_rate=mean_of("requests_per_second", "achieved_rate", rate=True),
        num_requests=int(total) if isinstance(total, int) else None,
        completed=float(total) if isinstance(total, int) else None, failed=errored,
        input_tokens=mean_of("prompt_token_count", "input_tokens"),
        output_tokens=mean_of("output_token_count", "output_tokens"),
        ttft_ms=_guidellm_stat(f, m, "ttft", "time_to_first_token_ms"),
        tpot_ms=_guidellm_stat(f, m, "tpot", "time_per_output_token_ms"),
        itl_ms=_guidellm_stat(f, m, "itl", "inter_token_latency_ms"),
        e2e_ms=_guidellm_stat(f, m, "e2e", "request_latency", 1e3),
        output_throughput=mean_of("output_tokens_per_second", "output_throughput", rate=True),
        deployment={}, burstiness={"constant": math.inf, "poisson": 1.0}.get(kind),
        where=where, stated_in_flight=mean_of("request_concurrency", "stated_in_flight"),
        **{**f.kept(), "fields": {**f.used, **({"model": "args.model"} if model else {})}})


def _read_guidellm(doc: Mapping[str, Any], source: str, where: str) -> list[Measurement]:
    model = _text(_dig(doc, "args", "model"))
    return [_read_guidellm_one(b, model, source, i + 1,
                               ", ".join(w for w in (where, f"benchmarks[{i}]") if w))
            for i, b in enumerate(doc.get("benchmarks") or []) if isinstance(b, Mapping)]


# The time units of AIPerf's and genai-perf's exports → ms per unit. AIPerf writes a metric's
# `unit` as the tag of its MetricTimeUnit: "ns", "us", "ms", "sec" (ai-dynamo/aiperf
# aiperf/common/enums/metric_enums.py, commit 02402e8f77b4); genai-perf writes "ms" for every
# time metric after scaling its nanoseconds (triton-inference-server/perf_analyzer
# genai-perf/genai_perf/metrics/statistics.py _add_units, commit 0518df11a864). The SI symbols
# of the same units ("s", "µs") are read too: they cannot mean anything else.
TIME_UNITS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "μs": 1e-3, "ms": 1.0, "sec": 1e3, "s": 1e3}


def _perf_stat(f: _Fields, doc: Mapping[str, Any], name: str, key: str, fmt: str,
               source: str, where: str) -> Stat:
    """One time metric of an AIPerf / genai-perf export, in ms by its `unit`: a unit that is
    not one of TIME_UNITS (or none) is refused naming the file, the field and the unit — read
    as ms, a µs file's TTFT was 1,000 times too long."""
    s = doc.get(key)
    if not isinstance(s, Mapping):
        f.absent[f"{name}.mean"] = f"{key}.avg absent"
        f.absent[f"{name}.median"] = f"{key}.p50 absent"
        return Stat()
    unit = s.get("unit")
    if not isinstance(unit, str) or unit.strip() not in TIME_UNITS:
        said = f"{key}.unit {_shown(unit)} is not a time unit" if "unit" in s else \
            f"{key} has no unit"
        raise InvalidConfigError(
            f"{where + ': ' if where else ''}{said} {fmt} writes "
            "(ns, us, ms, sec; or s, µs), so its values cannot be read as times", path=source,
            hint="a profile export as the tool wrote it states each time metric's unit")
    scale = TIME_UNITS[unit.strip()]
    return Stat(f.take(f"{name}.mean", s, "avg", scale, key + ".", latency=True),
                f.take(f"{name}.median", s, "p50", scale, key + ".", latency=True),
                f.take(f"{name}.p99", s, "p99", scale, key + ".", latency=True))


def _perf_mean(f: _Fields, doc: Mapping[str, Any], quantity: str,
               keys: tuple[str, ...]) -> float | None:
    """The `avg` of the first of `keys` present (genai-perf before 24.x: num_*_token)."""
    for k in keys:
        if isinstance(doc.get(k), Mapping):
            return f.take(quantity, doc[k], "avg", prefix=k + ".")
    return None


def _aiperf_load(cfg: Mapping[str, Any], f: _Fields, source: str,
                 where: str) -> tuple[float | None, float | None]:
    """(concurrency, request rate) of the measured phase of an aiperf / genai-perf config.
    AIPerf's --concurrency is at least 1 (ai-dynamo/aiperf aiperf/common/config/loadgen_config.py,
    v0.1.1: `Field(ge=1)`): a 0 is no value it writes."""
    for ph in cfg.get("phases") or []:
        if isinstance(ph, Mapping) and not ph.get("exclude_from_results"):
            return (_clients(f, ph, "concurrency", "input_config.phases[].", source, where,
                             zero_unbounded=False),
                    f.take("request_rate", ph, "request_rate", prefix="input_config.phases[]."))
    for cfg_at in (cfg.get("loadgen"), cfg):
        if isinstance(cfg_at, Mapping):
            c = _clients(f, cfg_at, "concurrency", "input_config.", source, where,
                         zero_unbounded=False) if "concurrency" in cfg_at else None
            r = f.take("request_rate", cfg_at, "request_rate", prefix="input_config.")
            if c is not None or r is not None or "concurrency" in f.invalid:
                return c, r
    return None, None


def _aiperf_model(cfg: Mapping[str, Any]) -> str | None:
    items = _dig(cfg, "models", "items")
    if isinstance(items, list) and items and isinstance(items[0], Mapping):
        return _text(items[0].get("name"))
    model = cfg.get("model")
    if isinstance(model, list) and model:
        return _text(model[0])
    return _text(model)


def _read_aiperf(doc: Mapping[str, Any], source: str, where: str) -> list[Measurement]:
    f = _Fields()
    fmt = "aiperf" if "aiperf_version" in doc else "genai-perf"
    raw = doc.get("input_config")
    cfg: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    conc, rate = _aiperf_load(cfg, f, source, where)
    model = _aiperf_model(cfg)
    if model:
        f.used["model"] = "input_config.models.items[0].name" if fmt == "aiperf" \
            else "input_config.model"
    count = _num(doc.get("request_count") or {}, "avg")
    errors = doc.get("error_request_count")
    failed = f.take("failed", errors, "avg", prefix="error_request_count.") \
        if isinstance(errors, Mapping) else None
    ttft = _perf_stat(f, doc, "ttft", "time_to_first_token", fmt, source, where)
    tpot = _perf_stat(f, doc, "tpot", "inter_token_latency", fmt, source, where)
    return [Measurement(
        source=source, index=1, format=fmt, model=model, concurrency=conc, request_rate=rate,
        achieved_rate=f.take("achieved_rate", doc.get("request_throughput") or {}, "avg",
                             prefix="request_throughput.", rate=count != 0),
        num_requests=int(count) if count else None,
        completed=count, failed=failed,
        input_tokens=_perf_mean(f, doc, "input_tokens",
                                ("input_sequence_length", "num_input_token")),
        output_tokens=_perf_mean(f, doc, "output_tokens",
                                 ("output_sequence_length", "num_output_token")),
        ttft_ms=ttft, tpot_ms=tpot, itl_ms=tpot,
        e2e_ms=_perf_stat(f, doc, "e2e", "request_latency", fmt, source, where),
        output_throughput=f.take("output_throughput", doc.get("output_token_throughput") or {},
                                 "avg", prefix="output_token_throughput.", rate=count != 0),
        deployment={}, where=where, **f.kept())]


def _ip_stat(f: _Fields, lat: Mapping[str, Any], name: str, key: str) -> Stat:
    s = lat.get(key)
    pre = f"successes.latency.{key}."
    if not isinstance(s, Mapping):
        f.absent[f"{name}.mean"] = f"{pre}mean absent"
        f.absent[f"{name}.median"] = f"{pre}median absent"
        return Stat()
    return Stat(f.take(f"{name}.mean", s, "mean", 1e3, pre, latency=True),
                f.take(f"{name}.median", s, "median", 1e3, pre, latency=True),
                f.take(f"{name}.p99", s, "p99", 1e3, pre, latency=True))


def _read_inference_perf(doc: Mapping[str, Any], source: str,
                         where: str) -> list[Measurement]:
    f = _Fields()
    ok = doc.get("successes") or {}
    lat = ok.get("latency") or {}
    thr = ok.get("throughput") or {}
    load = doc.get("load_summary") or {}

    def length(keys: tuple[str, ...], quantity: str) -> float | None:
        for k in keys:
            if isinstance(ok.get(k), Mapping):
                return f.take(quantity, ok[k], "mean", prefix=f"successes.{k}.")
        return None

    count = _num(ok, "count")
    failures = doc.get("failures")
    failed = f.take("failed", failures, "count", prefix="failures.") \
        if isinstance(failures, Mapping) else None
    return [Measurement(
        source=source, index=1, format="inference-perf", model=None, concurrency=None,
        request_rate=f.take("request_rate", load, "requested_rate", prefix="load_summary."),
        achieved_rate=f.take("achieved_rate", thr, "requests_per_sec",
                             prefix="successes.throughput.", rate=count != 0),
        num_requests=int(count) if count else None, completed=count, failed=failed,
        input_tokens=length(("prompt_tokens", "prompt_len"), "input_tokens"),
        output_tokens=length(("output_tokens", "output_len"), "output_tokens"),
        ttft_ms=_ip_stat(f, lat, "ttft", "time_to_first_token"),
        tpot_ms=_ip_stat(f, lat, "tpot", "time_per_output_token"),
        itl_ms=_ip_stat(f, lat, "itl", "inter_token_latency"),
        e2e_ms=_ip_stat(f, lat, "e2e", "request_latency"),
        output_throughput=f.take("output_throughput", thr, "output_tokens_per_sec",
                                 prefix="successes.throughput.", rate=count != 0),
        deployment={}, where=where, **f.kept())]


# ------------------------------------------------------------------- consistency

# The factor by which a run's latencies may disagree with its own wall-clock figures before
# they are refused: √1000, the geometric middle between agreeing and a unit mix-up (ms is 1000×
# from the s and the µs either side of it). See inconsistency().
UNIT_MIXUP = math.sqrt(1000)


def inconsistency(m: Measurement) -> str | None:
    """Why a run's latencies cannot be those of the run its own wall-clock figures describe,
    naming the figures (None: they agree, or the file lacks the figures to tell).

    Little's law ties them: the mean number of requests in flight is N = completed/s × mean
    end-to-end latency, where completed/s is counted on the wall clock (`request_throughput`,
    completed / duration; else output tokens/s ÷ output tokens per request) and the latency is
    the file's ms fields (the mean e2e, else TTFT + (O − 1)·TPOT). The run itself bounds N:

    * stated: SGLang's `concurrency` and GuideLLM's `request_concurrency` are N as the tool
      measured it (summed request time / wall time, in seconds): N is that;
    * at most the clients (max concurrency) or, without one, the requests sent are ever
      outstanding: N ≤ C;
    * a closed loop (max concurrency, no request rate) or a burst (neither: all requests at
      once) never idles: it keeps C (at most the requests) outstanding until its last request
      is sent, so N is near C (in the test fixtures 0.88–1.0 of it closed, 0.57–0.72 in
      bursts, where requests finish one after another);
    * and e2e = TTFT + (O − 1)·TPOT per request (how vLLM, SGLang and AIPerf define TPOT), so
      a stated mean e2e and the one the means add up to agree but for how O and TPOT co-vary
      (within 2× in the fixtures).

    A unit mix-up moves latencies 1000× (seconds written to `_ms` fields; µs read as ms),
    far beyond any of these; a figure off by more than UNIT_MIXUP (√1000 ≈ 32×) is nearer a
    mix-up than agreement, and is refused. An open loop that states no concurrency cannot be
    told this way: a faster server would write the same file."""
    e2e, how = m.mean_e2e_ms()
    rate = m.completed_rate()
    measured = m.e2e_ms.central
    ttft, tpot = m.ttft_ms.central, m.tpot_ms.central or m.itl_ms.central
    if measured is not None and ttft is not None and tpot is not None and m.output_tokens:
        summed = ttft + (m.output_tokens - 1) * tpot
        off = max(measured / summed, summed / measured)
        if off > UNIT_MIXUP:
            field_ = m.fields["e2e.mean" if measured == m.e2e_ms.mean else "e2e.median"]
            return (f"its mean end-to-end latency ({field_} {measured:.4g} ms) and TTFT + "
                    f"(O − 1)·TPOT ({ttft:.4g} + ({m.output_tokens:.4g} − 1) × {tpot:.4g} = "
                    f"{summed:.4g} ms) differ "
                    f"{off:.0f}×: its latency fields are not in one unit")
    if e2e is None or not rate:
        return None
    n = rate * e2e / 1e3
    by = ("completed/s (" + (m.fields.get("achieved_rate") or "output_throughput / output "
          "tokens") + f") {rate:.4g} × mean end-to-end latency ({how}) {e2e:.4g} ms = {n:.3g} "
          "requests in flight")
    if m.stated_in_flight:
        off = max(n / m.stated_in_flight, m.stated_in_flight / n)
        if off > UNIT_MIXUP:
            return (f"{by}, where the file's own {m.fields['stated_in_flight']} (measured on "
                    f"the wall clock) is {m.stated_in_flight:.3g}: its latencies are {off:.0f}× "
                    f"{'too long' if n > m.stated_in_flight else 'too short'}")
    sent = m.num_requests or (int(m.completed) if m.completed else None)
    cap = m.concurrency if m.concurrency is not None else sent
    if cap is not None and sent:
        cap = min(cap, sent)
    if not cap:
        return None
    what = (f"{m.concurrency:g} clients (max concurrency)" if m.concurrency is not None
            else f"{sent:,} requests sent")
    if n > cap * UNIT_MIXUP:
        return f"{by}, {n / cap:.0f}× more than its {what} could keep outstanding"
    never_idle = m.request_rate is None and "request_rate" not in m.invalid \
        and "concurrency" not in m.invalid
    if never_idle and n * UNIT_MIXUP < cap:
        loop = "closed loop" if m.concurrency is not None else "burst (all requests at once)"
        return (f"{by}, {cap / n:.0f}× fewer than the {cap:g} its {loop} kept outstanding: its "
                "latencies are that much too short for its own throughput")
    return None


# ------------------------------------------------------------------- detection


# a latency statistic of vLLM's and SGLang's result objects
_SERVING_LATENCY = re.compile(
    r"^(mean|median|std|p\d+(\.\d+)?)_(ttft|tpot|itl|e2el|e2e_latency)_ms$")


def _serving_kind(d: Mapping[str, Any]) -> str | None:
    """The serving benchmark (SGLang's bench_serving or vLLM's bench serve) that wrote a result
    object, None for anything else: one with a latency statistic (`mean_tpot_ms`, …), or with
    `completed` and `duration` (both write them) when its latencies were left out — read, so
    that the run is named for what it lacks rather than the file refused."""
    keys = {k for k in d if isinstance(k, str)}
    if not any(_SERVING_LATENCY.match(k) for k in keys) and not {"completed",
                                                                   "duration"} <= keys:
        return None
    if "total_output_tokens_retokenized" in keys or any(
            k.endswith("_e2e_latency_ms") for k in keys):
        return SGLANG_BENCH
    return VLLM_BENCH


# the metrics of AIPerf's and genai-perf's exports, each an object of statistics (`avg`, …)
_PERF_METRICS = ("time_to_first_token", "inter_token_latency", "request_latency",
                 "request_throughput", "output_token_throughput", "output_sequence_length")


def detect(doc: object) -> str | None:
    """The format of one parsed JSON document (FORMATS), or None. By the layout, not by any
    one metric: a run that lacks a metric is read, and named for what it lacks (a missing
    TTFT skips that run; a missing unit refuses the file naming the field)."""
    if not isinstance(doc, Mapping):
        return None
    benches = doc.get("benchmarks")
    if isinstance(benches, list) and (not benches or any(
            isinstance(_dig(b, "metrics"), Mapping) for b in benches)):
        return "guidellm"
    if "aiperf_version" in doc:
        return "aiperf"
    if any(isinstance(doc.get(k), Mapping) and ("unit" in doc[k] or "avg" in doc[k])
           for k in _PERF_METRICS):
        return "genai-perf"
    if isinstance(_dig(doc, "successes", "latency"), Mapping):
        return "inference-perf"
    return _serving_kind(doc)


READERS: dict[str, Callable[[Mapping[str, Any], str, str], list[Measurement]]] = {
    "guidellm": _read_guidellm, "aiperf": _read_aiperf, "genai-perf": _read_aiperf,
    "inference-perf": _read_inference_perf,
}


def _loads(text: str, where: str) -> object:
    """One JSON value, within limits.loads_json's bounds (values, nesting), with NaN, Infinity
    and -Infinity read as the floats they name: Python's json.dump writes them by default (a
    benchmark's std of one sample, an unbounded request rate), and one in a field kvplan never
    reads says nothing of the run. Where kvplan reads one, `_Fields.take` notes it as a value
    that is no measurement."""
    import json

    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark is no JSON value
    if text.count(",") + text.count("[") + text.count("{") > limits.MAX_JSON_VALUES:
        raise InvalidConfigError(f"JSON holding over {limits.MAX_JSON_VALUES:,} values",
                                 path=where, hint="check the file is what it claims to be")
    if not limits.json_depth_ok(text):
        raise InvalidConfigError(f"JSON nested deeper than {limits.MAX_JSON_DEPTH} levels",
                                 path=where, hint="check the file is what it claims to be")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidConfigError(f"not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})",
                                 path=where) from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of more than 4300 digits
        reason = ("an integer with too many digits" if "digits" in str(e) else
                  str(e) if isinstance(e, ValueError) else "nested too deeply")
        raise InvalidConfigError(f"not valid JSON ({reason})", path=where) from None


def _documents(text: str, where: str) -> list[tuple[int | None, object]]:
    """The JSON documents of a file with their line numbers: one JSON value (line None), or
    JSON lines (one object per line; blank lines skipped, counted in the numbering)."""
    if not text.strip():  # said as such, not as JSON that fails at line 1, column 1
        raise InvalidConfigError("the file is empty: no benchmark runs to read", path=where,
                                 hint=f"run the benchmark with its result saved first; expected "
                                 f"{EXPECTED}")
    try:
        return [(None, _loads(text, where))]
    except InvalidConfigError as whole:
        lines = [(k, ln) for k, ln in enumerate(text.splitlines(), 1) if ln.strip()]
        if len(lines) < 2:
            raise InvalidConfigError(
                f"not a benchmark result: {whole.detail}", path=where,
                hint=f"expected {EXPECTED}") from None
        out: list[tuple[int | None, object]] = []
        for k, ln in lines:
            try:
                out.append((k, _loads(ln, where)))
            except InvalidConfigError as e:
                raise InvalidConfigError(f"line {k} of the JSON lines is {e.detail}",
                                         path=where, hint=f"expected {EXPECTED}") from None
        return out


def parse(text: str, source: str) -> list[Measurement]:
    """Measurements of a benchmark result file's text; `source` names it in messages.
    Raises InvalidConfigError naming the file and what was expected."""
    docs = _documents(text, source)
    out: list[Measurement] = []
    for line, doc in docs:
        where = f"line {line}" if line is not None else ""
        fmt = detect(doc)
        if fmt is None:
            raise InvalidConfigError(
                f"{where or 'its content'} is in no benchmark format kvplan reads", path=source,
                hint=f"expected {EXPECTED}")
        assert isinstance(doc, Mapping)
        if fmt in READERS:
            runs = READERS[fmt](doc, source, where)
            out += [_renumber(m, len(out) + i) for i, m in enumerate(runs, 1)]
        else:
            out.append(_read_serving(doc, source, len(out) + 1, fmt, where))
    if not out:
        raise InvalidConfigError("no benchmark runs in the file", path=source,
                                 hint=f"expected {EXPECTED}")
    for m in out:
        why = inconsistency(m)
        if why:
            raise InvalidConfigError(
                f"run #{m.index}" + (f" ({m.where})" if m.where else "") + f": {why}",
                path=source, hint="check the unit of the file's latency fields: read as ms "
                "they disagree with its own wall-clock figures by more than a unit mix-up's "
                "√1000 (seconds written to _ms fields are 1000× off); the whole file is "
                "refused, as one tool wrote all its runs in one unit")
    return out


def _renumber(m: Measurement, index: int) -> Measurement:
    from dataclasses import replace

    return replace(m, index=index)


def read(path: Path) -> list[Measurement]:
    """Measurements of the benchmark result file at `path` (bounded read, any format above)."""
    text = limits.read_text_limited(path, MAX_BENCH_BYTES, what="benchmark result file")
    return parse(text, path.name)
