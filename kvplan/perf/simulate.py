"""Discrete-event simulation of one replica's continuous-batching scheduler, driven by the
step-time model (perf.step._step_s: one call per engine step, or per run of identical decode
steps). Pure: standard library and kvplan.perf.step only.

What it adds to perf.step.evaluate() (a closed-loop mean-value analysis at constant lengths):
arrival processes (how the serving benchmarks send requests), length distributions, admission
and preemption as the engines do them, and per-request TTFT / TPOT / ITL / e2e, hence
percentiles.

Harnesses (how `vllm bench serve` and SGLang's `bench_serving` send requests):
* closed: N clients started together, each sending its next request when the previous one
  ends (`--max-concurrency N --request-rate inf`: a semaphore of N over requests that are all
  ready at t = 0; vllm/benchmarks/serve.py, sglang/bench_serving.py);
* steady: the same closed loop in its steady state: the clients' first requests spread over
  one cycle (stagger_s), and the statistics taken over the requests sent after the first N
  and before the last N (no start-up burst, no drain). With constant lengths it stays
  deterministic: every request lives the same number of steps, so the initial spacing never
  changes (prompts never meet at light load) and requests that once share a step stay in
  lock step; a small spread of lengths (±10 %) desynchronises it into the random-phase
  steady state perf.step.evaluate() models (tests/perf/test_simulate.py);
* open: requests sent at a rate, the gaps drawn from Gamma(shape=B, scale=1/(rate·B)), the
  first at t = 0 (B = `--burstiness`, 1 = Poisson; vllm/benchmarks/serve.py get_request);
* trace: the arrival times of a trace.

Metrics as the benchmarks define them (vllm/benchmarks/serve.py calculate_metrics): TTFT =
send → first token; TPOT = (e2e − TTFT)/(output − 1) per request with output > 1; ITL = every
gap between consecutive tokens, pooled over all requests; e2e = send → last token;
percentiles by linear interpolation (numpy.percentile's default).

Schedulers (the engine's declared batching style, PerfContext.style):
* "mixed" — vLLM V1 (vllm/v1/core/sched/scheduler.py, Scheduler.schedule, v0.9–0.11; TRT-LLM's
  in-flight batching is modelled alike): each step first gives every running request its
  next tokens (one per decoding request, the next prompt chunk of a request still
  prefilling) within max_num_batched_tokens, allocating the KV blocks those tokens need; when
  no block is free it preempts the newest running request (`self.running.pop()`: FCFS),
  frees its blocks and puts it at the front of the queue with num_computed_tokens = 0
  (recompute). Waiting requests are admitted only in a step that preempted none, while
  running < max_num_seqs, the token budget lasts and the blocks of their first chunk are
  free (KVCacheManager.allocate_slots: the blocks a request actually holds, not a reserve
  for its output). TensorRT-LLM (ctx.admission "reserve": its default GUARANTEED_NO_EVICT
  capacity scheduler, tensorrt_llm/llmapi/llm_args.py SchedulerConfig) admits a request only
  when the blocks of its whole sequence (prompt + output) fit beside those of every running
  request's whole sequence, so no request is ever preempted.
* "separate" — SGLang (python/sglang/srt/managers/scheduler.py get_next_batch_to_run,
  schedule_policy.py PrefillAdder, v0.4–0.5; TGI alike): when waiting requests can be
  admitted a prefill batch of up to the chunk size (chunked_prefill_size) runs and decoding
  pauses; a request is admitted while running < max_running_requests and the free KV tokens
  cover its prompt plus min(output, 4096) × new_token_ratio, after reserving that much for
  every running request's remaining output (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION = 4096).
  new_token_ratio starts at 0.7 (SGLANG_INIT_NEW_TOKEN_RATIO), falls by (0.7 − 0.7·0.14)/600
  per decode step to 0.7·0.14 (SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, _DECAY_STEPS;
  sglang/srt/environ.py) and goes back to 0.7 when a decode step runs out of KV and a
  request is retracted (modelled: the newest, recomputed later).
* "mixed" with ctx.whole_prompts — SGLang with --enable-mixed-chunk (0.5.6.post2,
  scheduler.py get_new_batch_prefill; schedule_policy.py PrefillAdder): the same prefill batch
  and admission as "separate", its token room (and KV budget) less one token per running
  request (mixed_with_decode_tokens = running_bs), run in one step with those requests'
  decodes (ScheduleBatch.mix_with_running); a step with nothing to prefill is a decode-only
  step, the only kind that retracts and decays new_token_ratio (update_running_batch). The
  prompt that overruns the room is chunked when --chunked-prefill-size is below
  --max-prefill-tokens (ctx.split_last_prompt, the default on GPUs under 160 GiB); otherwise
  the batch stops before it unless the batch is empty (add_one_req: input_tokens >=
  rem_input_tokens). With KV to spare this is vLLM's schedule for the same requests; under KV
  pressure it admits by the reserve and retracts far less often.

Front end (ctx.frontend_service_s, ctx.frontend_servers; the engine's Calibration): before the
scheduler sees a request it passes the serving front end (vLLM's API-server process, SGLang's
tokenizer manager), modelled as `frontend_servers` FIFO servers busy frontend_service_s per
request, in send order: a request starts its service when sent or when a server frees, and
reaches the engine request_overhead_s after that start (the overhead, fitted on unloaded
runs, already holds the service of an idle server). So a front end adds nothing to a lone
request, caps the replica at servers / service requests/s, and spaces a burst: the k-th of N
requests sent at once to one server waits (k − 1) × service. Per streamed output token work
(detokenising, one SSE chunk per token) is not in it (no public per-token figure).

Simplifications (stated, not hidden): with --enable-mixed-chunk a step whose decodes' next
KV pages do not fit runs as a decode-only step that retracts (SGLang finds the shortage in
its next decode-only step); a recomputed request re-hits only its own kept blocks
(ctx.prefix_caching, vLLM: its full blocks less those reallocated since, the free blocks older
than its own going first); a shared prefix saves prefill compute only (`cached_tokens` per
prompt), not KV blocks; with
speculative decoding the KV grows one token per step (the accepted tokens are
tokens_per_step); a preemption's token gap is in TPOT and e2e but not in the pooled ITL.

Speed: between two events (an arrival the scheduler could admit, a request finishing, KV
running out) decode steps differ only in context length, and the step time is linear in it,
so a run of k such steps costs one step-model call at the run's mean context.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .step import PerfContext, _step_s, tokens_per_step

HarnessKind = Literal["closed", "steady", "open", "trace"]

# SGLang's admission constants (sglang/srt/environ.py, v0.5; see the module docstring).
SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS = 600
SGLANG_CLIP_MAX_NEW_TOKENS = 4096
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Harness:
    """How requests are sent: a closed loop of `concurrency` clients, an open loop at
    `request_rate` req/s (gamma gaps of shape `burstiness`), or a trace's arrival times."""

    kind: HarnessKind
    concurrency: int = 0
    request_rate: float = 0.0
    burstiness: float = 1.0
    stagger_s: float = 0.0  # steady: gap between the clients' first requests

    def describe(self) -> str:
        if self.kind == "steady":
            return (f"closed loop in steady state: {self.concurrency} clients, requests "
                    "spread out (start-up burst and drain excluded)")
        if self.kind == "closed":
            return (f"closed loop: {self.concurrency} clients started together "
                    f"(--max-concurrency {self.concurrency} --request-rate inf)")
        if self.kind == "open":
            how = ("Poisson arrivals" if self.burstiness == 1.0
                   else f"gamma arrivals, burstiness {self.burstiness:g}")
            return f"open loop: {self.request_rate:.4g} req/s, {how}"
        return "trace replay: the trace's arrival times"


@dataclass(frozen=True)
class Requests:
    """The requests of a run, in send order: prompt and output lengths (tokens) and, for an
    open loop or a trace, the send times (s; None for a closed loop)."""

    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    arrival_s: tuple[float, ...] | None = None
    lengths: str = "constant"  # which length distribution, for the record

    def __post_init__(self) -> None:
        if len(self.input_tokens) != len(self.output_tokens) or not self.input_tokens:
            raise ValueError("input_tokens and output_tokens must be non-empty and equally long")
        if self.arrival_s is not None and len(self.arrival_s) != len(self.input_tokens):
            raise ValueError("arrival_s must have one time per request")
        if min(self.input_tokens) < 1 or min(self.output_tokens) < 1:
            raise ValueError("every request needs ≥ 1 input and ≥ 1 output token")


# ------------------------------------------------------------------ workload makers


def gamma_arrivals(n: int, rate: float, burstiness: float = 1.0,
                   seed: int = 0) -> tuple[float, ...]:
    """Send times of n requests as `vllm bench serve --request-rate R --burstiness B` draws
    them: the first at 0, then gaps from Gamma(shape=B, scale=1/(R·B)) (mean 1/R; B = 1 is a
    Poisson process, B < 1 burstier, B > 1 more regular; B = inf, the limit, evenly spaced:
    GuideLLM's constant rate)."""
    if rate <= 0 or burstiness <= 0:
        raise ValueError("request rate and burstiness must be > 0")
    if math.isinf(burstiness):
        return tuple(i / rate for i in range(n))
    rng = random.Random(seed)
    theta = 1.0 / (rate * burstiness)
    t, out = 0.0, [0.0]
    for _ in range(n - 1):
        t += rng.gammavariate(burstiness, theta)
        out.append(t)
    return tuple(out)


def uniform_lengths(n: int, mean: int, range_ratio: float, seed: int = 0) -> tuple[int, ...]:
    """n lengths as the serving benchmarks' `random` dataset draws them: integers uniform in
    [floor(L·(1 − r)), ceil(L·(1 + r))], at least 1 (vllm/benchmarks/datasets.py,
    RandomDataset.get_sampling_params; r in [0, 1))."""
    if not 0.0 <= range_ratio < 1.0:
        raise ValueError("range ratio must be in [0, 1)")
    lo = max(1, math.floor(mean * (1 - range_ratio)))
    hi = max(lo, math.ceil(mean * (1 + range_ratio)))
    if lo == hi:
        return (lo,) * n
    rng = random.Random(seed)
    return tuple(rng.randint(lo, hi) for _ in range(n))


def sampled_lengths(n: int, pairs: Sequence[tuple[int, int]], seed: int = 0
                    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """n (input, output) pairs drawn with replacement from an empirical list (a file of
    lengths, a named dataset's histogram)."""
    if not pairs:
        raise ValueError("no (input, output) lengths to sample from")
    rng = random.Random(seed)
    picks = [pairs[rng.randrange(len(pairs))] for _ in range(n)]
    return tuple(p[0] for p in picks), tuple(p[1] for p in picks)


@dataclass(frozen=True)
class LengthHistogram:
    """A named dataset's joint histogram of (input, output) tokens: cells
    (input_lo, input_hi, output_lo, output_hi, requests), each range [lo, hi); the source's
    exact mean lengths beside it (kvplan/sources/length_datasets.json)."""

    name: str
    about: str  # what the figures assume: the dataset, its source, tokenizer and filter
    cells: tuple[tuple[int, int, int, int, int], ...]
    input_mean: float
    output_mean: float

    def __post_init__(self) -> None:
        if not self.cells or any(c[4] < 0 or c[0] < 1 or c[2] < 1 or c[1] <= c[0]
                                 or c[3] <= c[2] for c in self.cells):
            raise ValueError("a length histogram needs cells [lo, hi) of tokens ≥ 1 with "
                             "counts ≥ 0")
        if sum(c[4] for c in self.cells) <= 0:
            raise ValueError("a length histogram needs at least one request")


def histogram_lengths(n: int, hist: LengthHistogram, seed: int = 0
                      ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """n (input, output) pairs from a joint histogram: a cell drawn with probability ∝ its
    count, then input and output uniform integers within the cell's ranges."""
    rng = random.Random(seed)
    cum, acc = [], 0
    for c in hist.cells:
        acc += c[4]
        cum.append(acc)
    ins, outs = [], []
    for _ in range(n):
        c = hist.cells[bisect.bisect_right(cum, rng.randrange(acc))]
        ins.append(rng.randrange(c[0], c[1]))
        outs.append(rng.randrange(c[2], c[3]))
    return tuple(ins), tuple(outs)


# ----------------------------------------------------------------------- results


@dataclass(frozen=True)
class Stat:
    """p50 / p90 / p99 and mean of one metric (ms)."""

    p50: float
    p90: float
    p99: float
    mean: float

    def at(self, percentile: int) -> float:
        return {50: self.p50, 90: self.p90, 99: self.p99}[percentile]


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile by linear interpolation between closest ranks (numpy.percentile's
    default, which the serving benchmarks use)."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _stat(values: list[float]) -> Stat:
    if not values:
        return Stat(0.0, 0.0, 0.0, 0.0)
    s = sorted(values)
    p50, p90, p99 = (percentile(s, q) * 1e3 for q in PERCENTILES)
    return Stat(p50, p90, p99, mean=sum(s) / len(s) * 1e3)


def _weighted_stat(pairs: list[tuple[float, float]]) -> Stat:
    """Percentiles of a pooled sample given as (value, count) pairs: the value at cumulative
    count q % of the total (counts are tokens: thousands per pair, so interpolation between
    ranks is immaterial)."""
    total = sum(w for _, w in pairs)
    if total <= 0:
        return Stat(0.0, 0.0, 0.0, 0.0)
    pairs = sorted(pairs)
    mean = sum(v * w for v, w in pairs) / total
    out, acc, i = [], 0.0, 0
    for q in PERCENTILES:
        target = total * q / 100.0
        while i < len(pairs) - 1 and acc + pairs[i][1] < target:
            acc += pairs[i][1]
            i += 1
        out.append(pairs[i][0] * 1e3)
    return Stat(out[0], out[1], out[2], mean=mean * 1e3)


@dataclass(frozen=True)
class SimResult:
    """One simulated run. Latency statistics in ms; throughput per replica."""

    harness: Harness
    lengths: str
    requests: int
    completed: int
    failed: int  # prompts that never fit the KV cache
    duration_s: float  # first send → last token
    requests_per_s: float
    output_tokens_per_s: float
    ttft: Stat
    tpot: Stat
    itl: Stat
    e2e: Stat
    preemptions: int
    max_running: int
    mean_running: float  # time-weighted sequences in the batch
    mean_waiting: float  # time-weighted requests in the queue (the engines' queue gauge)
    mean_kv_usage: float  # time-weighted share of the KV cache in use
    steps: int  # step-model calls (runs of identical decode steps count once)
    ttft_s: tuple[float, ...]  # per request (completed ones), send order
    e2e_s: tuple[float, ...]


@dataclass(frozen=True)
class Limits:
    """Targets a run is checked against (open_loop_unless_missed): the `percentile` TTFT and
    TPOT at most ttft_ms / tpot_ms (None: no target), and no failed request."""

    percentile: int
    ttft_ms: float | None = None
    tpot_ms: float | None = None


def _over_limit_count(n: int, q: int) -> int:
    """How many of n values above a limit put their q-th percentile (percentile(): linear
    interpolation from the value at rank int((n − 1)·q/100) up) above it for certain: those
    from that rank to the largest, n − int((n − 1)·q/100)."""
    return n - int((n - 1) * q / 100.0)


# ------------------------------------------------------------------------ engine


class _Sim:
    """State of one replica; see the module docstring for the rules of each style."""

    def __init__(self, ctx: PerfContext, reqs: Requests, harness: Harness, block_size: int,
                 kv_tokens: int | None, cached_tokens: int, limits: Limits | None = None
                 ) -> None:
        self.ctx = ctx
        self.n = n = len(reqs.input_tokens)
        self.inp = reqs.input_tokens
        self.out = reqs.output_tokens
        self.cached = cached_tokens
        self.bs = max(1, block_size)
        cap = kv_tokens if kv_tokens is not None else ctx.kv_capacity_tokens
        self.total = cap // self.bs if cap else 1 << 60  # KV blocks of the replica
        self.used = 0
        # a request longer than the whole cache is refused (vLLM and SGLang refuse requests
        # beyond max_model_len / the token pool, which start-up caps at the KV capacity)
        self.too_big = [self._blocks(i + o) > self.total
                        for i, o in zip(self.inp, self.out, strict=True)]
        self.budget = max(1, ctx.max_num_batched_tokens)
        self.max_seqs = max(1, ctx.max_num_seqs)
        self.q = 1 + ctx.spec_tokens  # tokens a decoding sequence scores per step
        self.per_step = tokens_per_step(ctx)
        self.overhead = ctx.request_overhead_s
        # the serving front end: `frontend_servers` FIFO servers of `frontend_service_s` per
        # request (see the module docstring); free times of its servers
        self.fe_s = ctx.frontend_service_s if ctx.front_end else 0.0
        self.fe_free = [0.0] * max(1, ctx.frontend_servers)
        self.sent = [0.0] * n
        self.first = [-1.0] * n
        self.end = [-1.0] * n
        self.need = [0] * n  # prefill tokens to compute (prompt − cached, or all on recompute)
        self.done = [0] * n  # of them computed
        self.held = [0] * n  # blocks held while prefilling
        self.gen = [0] * n  # output tokens produced (at decode start / preemption)
        self.g0 = [0] * n  # decode tick at decode start
        self.c0 = [0] * n  # tokens in KV at decode start
        self.fin = [0] * n  # tick of the last token
        self.epoch = [0] * n  # invalidates heap entries of a preempted request
        self.decoding = [False] * n
        self.now = 0.0
        self.tick = 0  # decode steps so far
        self.running: dict[int, None] = {}  # admission order (newest last)
        self.prefilling: dict[int, None] = {}
        self.waiting: deque[int] = deque()
        # (time, request, at the engine): arrivals at the engine, or sends to the front end
        self.future: list[tuple[float, int, bool]] = []
        self.heap: list[tuple[int, int, int]] = []  # (finish tick, request, epoch)
        self.phase = [0] * self.bs  # decoders by the tick phase at which they need a block
        self.n_dec = 0
        self.off_sum = 0  # Σ (c0 − g0) over decoders: Σ context = off_sum + n_dec · tick
        self.fin_sum = 0  # Σ fin over decoders (SGLang's reserve)
        self.itl: list[tuple[float, float]] = []
        self.pause = 0.0  # prefill time since the last decode step (prefill-first engines)
        self.preemptions = self.failed = self.steps = self.max_running = 0
        self.busy_weighted = 0.0
        self.wait_weighted = 0.0
        self.kv_weighted = 0.0
        # SGLang's admission (new_token_ratio, reserve, retraction): its default prefill-first
        # scheduler, and its mixed steps (--enable-mixed-chunk: PerfContext.whole_prompts)
        self.mixed_chunk = ctx.style == "mixed" and ctx.whole_prompts
        self.sglang = ctx.style == "separate" or self.mixed_chunk
        self.whole = not ctx.split_last_prompt
        self.ratio = SGLANG_INIT_NEW_TOKEN_RATIO
        self.ratio_min = SGLANG_INIT_NEW_TOKEN_RATIO * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
        self.ratio_decay = (self.ratio - self.ratio_min) / SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
        # TensorRT-LLM's GUARANTEED_NO_EVICT: blocks of every running request's whole sequence
        self.reserve_all = ctx.admission == "reserve"
        self.reserved = 0
        # vLLM with prefix caching: a preempted request's full blocks keep their hashes in the
        # free queue (freed tail first, allocations pop the oldest free block), so on its
        # return it re-hits those not yet reallocated (vllm/v1/core/kv_cache_manager.py free,
        # block_pool.py free_blocks / get_computed_blocks, v0.9-0.11)
        self.rehit = (ctx.prefix_caching and ctx.style == "mixed" and not self.reserve_all
                      and not self.mixed_chunk)
        self.freed = 0  # blocks freed so far: blocks allocated so far = used + freed
        self.kept = [0] * n  # full blocks a preempted request left in the cache
        self.mark = [0] * n  # blocks allocated so far when it was preempted
        self.older = [0] * n  # free blocks then, ahead of its own in the eviction order
        self.next_req = 0  # closed loop: next request to send
        if harness.kind in ("closed", "steady"):
            for k in range(min(max(1, harness.concurrency), n)):
                self._send(k * harness.stagger_s)
        else:
            assert reqs.arrival_s is not None
            t0 = min(reqs.arrival_s)
            for r, t in enumerate(reqs.arrival_s):
                self.sent[r] = t - t0
                self.need[r] = self.inp[r] - min(cached_tokens, self.inp[r] - 1)
                self.future.append(self._sent_event(t - t0, r))
            heapq.heapify(self.future)
        self.closed = harness.kind in ("closed", "steady")
        # limits: stop once the run misses them for certain (`missed`). Every request ends
        # completed or failed, and a failed one misses them, so with none failed the TTFT
        # sample has n values and the TPOT sample one per request of > 1 output token; a
        # value is counted over its limit as simulate() computes it (s, × 1e3 > ms)
        self.stops, self.missed = limits is not None, False
        self.ttft_ms = self.tpot_ms = None
        self.ttft_left = self.tpot_left = 0  # values over the limit still to see
        if limits is not None:
            self.ttft_ms, self.tpot_ms = limits.ttft_ms, limits.tpot_ms
            self.ttft_left = _over_limit_count(n, limits.percentile)
            self.tpot_left = _over_limit_count(sum(1 for o in self.out if o > 1),
                                               limits.percentile)

    # --------------------------------------------------------------- bookkeeping

    def _send(self, t: float) -> None:
        r = self.next_req
        if r >= self.n:
            return
        self.next_req += 1
        self.sent[r] = t
        self.need[r] = self.inp[r] - min(self.cached, self.inp[r] - 1)
        heapq.heappush(self.future, self._sent_event(t, r))

    def _sent_event(self, t: float, r: int) -> tuple[float, int, bool]:
        """The event of request r sent at t: its arrival at the engine after the request
        overhead, or (with a front end) its arrival at the front end, which _arrivals serves
        in send order."""
        if self.fe_s > 0.0:
            return (t, r, False)
        return (t + self.overhead, r, True)

    def _front_end(self, t: float) -> float:
        """When a request sent at t starts its front-end service: at t, or when the first of
        the `frontend_servers` servers frees (FIFO; called in send order). It reaches the
        engine the request overhead after that start, so an idle front end adds nothing."""
        start = max(t, heapq.heappop(self.fe_free))
        heapq.heappush(self.fe_free, start + self.fe_s)
        return start

    def _complete(self, r: int) -> None:
        self.end[r] = self.now
        if self.tpot_ms is not None and self.out[r] > 1 and \
                (self.now - self.first[r]) / (self.out[r] - 1) * 1e3 > self.tpot_ms:
            self.tpot_left -= 1
            if self.tpot_left <= 0:
                self.missed = True
        del self.running[r]
        if self.reserve_all:
            self.reserved -= self._blocks(self.inp[r] + self.out[r])
        if self.closed:
            self._send(self.now)

    def _arrivals(self) -> None:
        fut = self.future
        while fut and fut[0][0] <= self.now:
            t, r, at_engine = heapq.heappop(fut)
            if at_engine:
                self.waiting.append(r)
            else:  # through the front end (sends pop in time order: FIFO)
                heapq.heappush(fut, (self._front_end(t) + self.overhead, r, True))

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.bs)

    def _start_decode(self, r: int) -> None:
        """Prefill of r complete at self.now: its next token is out; decode from the next
        tick on, or finish."""
        if self.first[r] < 0:
            self.first[r] = self.now
            if self.ttft_ms is not None and (self.now - self.sent[r]) * 1e3 > self.ttft_ms:
                self.ttft_left -= 1
                if self.ttft_left <= 0:
                    self.missed = True
        self.gen[r] += 1
        del self.prefilling[r]
        left = self.out[r] - self.gen[r]
        if left <= 0:
            self.used -= self.held[r]
            self.freed += self.held[r]
            self.held[r] = 0
            self._complete(r)
            return
        ticks = left if self.per_step == 1.0 else math.ceil(left / self.per_step)
        g0, c0 = self.tick, self.done[r] + (self.inp[r] - self.need[r] if self.gen[r] == 1 else 0)
        self.g0[r], self.c0[r] = g0, c0
        self.fin[r] = g0 + ticks - 1
        # blocks now held are those of the c0 tokens (held[r] counted them); from here the
        # phase counter adds one block whenever a decoder's context crosses a block edge
        self.used += self._blocks(c0) - self.held[r]
        self.held[r] = 0
        self.decoding[r] = True
        self.phase[(g0 - c0) % self.bs] += 1
        self.n_dec += 1
        self.off_sum += c0 - g0
        self.fin_sum += self.fin[r]
        heapq.heappush(self.heap, (self.fin[r], r, self.epoch[r]))

    def _stop_decode(self, r: int) -> int:
        """Remove decoder r at the current tick; returns its context (tokens in KV)."""
        c = self.c0[r] + self.tick - self.g0[r]
        self.decoding[r] = False
        self.phase[(self.g0[r] - self.c0[r]) % self.bs] -= 1
        self.n_dec -= 1
        self.off_sum -= self.c0[r] - self.g0[r]
        self.fin_sum -= self.fin[r]
        self.used -= self._blocks(c)
        self.freed += self._blocks(c)
        return c

    def _preempt_newest(self) -> int:
        """Preempt (vLLM) / retract (SGLang) the newest running request: free its KV and
        queue it first for recompute. Returns it."""
        r = next(reversed(self.running))
        del self.running[r]
        if self.reserve_all:
            self.reserved -= self._blocks(self.inp[r] + self.out[r])
        free_before = self.total - self.used
        if self.decoding[r]:
            self.gen[r] += self.tick - self.g0[r]  # tokens produced since decode start
            computed = self._stop_decode(r)
            self.epoch[r] += 1
        else:
            computed = self.done[r] + (self.inp[r] - self.need[r] if self.gen[r] == 0 else 0)
            self.used -= self.held[r]
            self.freed += self.held[r]
            self.held[r] = 0
            del self.prefilling[r]
        if self.rehit:
            self.kept[r] = computed // self.bs
            self.mark[r] = self.used + self.freed
            self.older[r] = free_before
        # recompute the prompt and the output so far (vLLM: num_computed_tokens = 0); the
        # recompute samples the next token
        self.need[r] = self.inp[r] + self.gen[r]
        self.done[r] = 0
        self.waiting.appendleft(r)
        self.preemptions += 1
        return r

    def _finish_decoders(self, last_tick: int) -> None:
        heap = self.heap
        while heap and heap[0][0] <= last_tick:
            _, r, ep = heapq.heappop(heap)
            if ep != self.epoch[r] or not self.decoding[r]:
                continue
            self._stop_decode(r)  # self.tick = last_tick + 1: the context after its last token
            self.gen[r] = self.out[r]
            self._complete(r)

    def _fail_head(self) -> None:
        """A request larger than the whole KV cache: the engine rejects it."""
        r = self.waiting.popleft()
        self.failed += 1
        self.missed = True  # (read only with limits)
        self.end[r] = -2.0
        if self.closed:
            self._send(self.now)

    # ------------------------------------------------------------------- steps

    def _chunk(self, r: int, room: int) -> tuple[int, int]:
        """(tokens, new blocks) of r's next prefill chunk within `room` tokens."""
        tokens = min(self.need[r] - self.done[r], room)
        return tokens, self._blocks(self.done[r] + tokens) - self.held[r]

    def _run_step(self, chunks: list[tuple[int, int]], decode: bool) -> None:
        """Run one step: decoders (when `decode`) plus prefill chunks (request, tokens)."""
        d = self.n_dec if decode else 0
        p = p_ctx = 0.0
        for r, tok in chunks:
            p += tok
            p_ctx += tok * (self.done[r] + tok / 2 + (self.inp[r] - self.need[r]
                                                       if self.gen[r] == 0 else 0))
        mctx = (self.off_sum + d * self.tick) / d if d else 0.0
        dt = _step_s(self.ctx, d, mctx, p, p_ctx / p if p else 0.0, len(chunks))
        self.now += dt
        self.steps += 1
        self.busy_weighted += dt * len(self.running)
        self.wait_weighted += dt * len(self.waiting)
        self.kv_weighted += dt * self.used / self.total
        if d:
            self.used += self.phase[self.tick % self.bs]  # decoders crossing a block edge
            self.itl.append((dt + self.pause, d))
            self.pause = 0.0
            self.tick += 1
            if self.sglang and not chunks:  # a decode-only step (update_running_batch)
                self.ratio = max(self.ratio_min, self.ratio - self.ratio_decay)
            self._finish_decoders(self.tick - 1)
        elif self.n_dec:
            self.pause += dt
        for r, tok in chunks:
            self.done[r] += tok
            if self.done[r] >= self.need[r] and r in self.prefilling:
                self._start_decode(r)

    def _decode_run(self) -> bool:
        """Run k ≥ 2 identical pure-decode steps at once when nothing can change before the
        first of them ends: no finish, no admissible arrival, no KV shortage. False: not
        possible (take a single step)."""
        d = self.n_dec
        free = self.total - self.used
        k = self.heap[0][0] - self.tick + 1 if self.heap else 1
        k = min(k, (free // d) * self.bs)
        if self.waiting and self.sglang and self.ratio > self.ratio_min:
            k = min(k, 8)  # the reserve shrinks as new_token_ratio decays: admission may open
        if k < 2:
            return False
        if not self.waiting and self.future:
            t1 = _step_s(self.ctx, d, (self.off_sum + d * self.tick) / d)
            k = min(k, int((self.future[0][0] - self.now) / t1))
            if k < 2:
                return False
        dt = _step_s(self.ctx, d, (self.off_sum + d * (self.tick + (k - 1) / 2)) / d)
        full, part = divmod(k, self.bs)
        new = full * d + sum(self.phase[(self.tick + full * self.bs + j) % self.bs]
                             for j in range(part))
        self.used += new
        self.now += dt * k
        self.steps += 1
        self.busy_weighted += dt * k * len(self.running)
        self.wait_weighted += dt * k * len(self.waiting)
        self.kv_weighted += dt * k * (self.used - new / 2) / self.total
        self.itl.append((dt + self.pause, d))
        self.itl.append((dt, d * (k - 1)))
        self.pause = 0.0
        self.tick += k
        if self.sglang:
            self.ratio = max(self.ratio_min, self.ratio - k * self.ratio_decay)
        self._finish_decoders(self.tick - 1)
        return True

    def _decode_blocks_fit(self) -> bool:
        """Make room for the next decode step's new blocks, preempting the newest requests
        (vLLM) / retracting them (SGLang); True when one was preempted."""
        preempted = False
        while self.n_dec and self.used + self.phase[self.tick % self.bs] > self.total:
            self._preempt_newest()
            preempted = True
            if self.sglang:
                self.ratio = SGLANG_INIT_NEW_TOKEN_RATIO
        return preempted

    def step_mixed(self) -> None:
        """One vLLM V1 step: running requests first (decode tokens, next prefill chunks),
        then waiting ones if nothing was preempted."""
        preempted = self._decode_blocks_fit()
        room = self.budget - self.n_dec * self.q
        chunks: list[tuple[int, int]] = []
        for r in list(self.prefilling):
            if room <= 0:
                break
            tok, nb = self._chunk(r, room)
            while self.used + nb > self.total and r in self.running:
                preempted = True
                self._preempt_newest()
            if r not in self.running:
                break
            self.used += nb
            self.held[r] += nb
            chunks.append((r, tok))
            room -= tok
        while (not preempted and self.waiting and room > 0
               and len(self.running) < self.max_seqs):
            r = self.waiting[0]
            if self.too_big[r]:
                self._fail_head()
                continue
            hit = self._rehit(r)
            tok, nb = self._chunk(r, room)
            if self.used + nb > self.total:
                self.done[r] -= hit
                break
            self.kept[r] = 0
            if self.reserve_all:  # its whole sequence beside every running one's
                whole = self._blocks(self.inp[r] + self.out[r])
                if self.reserved + whole > self.total:
                    break
                self.reserved += whole
            self.waiting.popleft()
            self.running[r] = None
            self.prefilling[r] = None
            self.used += nb
            self.held[r] += nb
            chunks.append((r, tok))
            room -= tok
        if chunks or self.n_dec:
            if not chunks and not preempted and self._can_skip_ahead():
                return
            self._run_step(chunks, decode=True)

    def _rehit(self, r: int) -> int:
        """A returning preempted request's prefix-cache hit: its kept blocks less those
        reallocated since (the free blocks older than its own go first), at most all but one
        token of what it must compute (the engine computes at least one). Counted as done."""
        if not self.kept[r]:
            return 0
        since = self.used + self.freed - self.mark[r]
        survive = max(0, self.kept[r] - max(0, since - self.older[r]))
        hit = min(survive * self.bs, self.need[r] - 1)
        self.done[r] += hit
        return hit

    def _can_skip_ahead(self) -> bool:
        return self.n_dec > 0 and not self.prefilling and self._decode_run()

    def _reserve(self) -> float:
        """SGLang: KV tokens held back for the running requests' remaining output."""
        remaining = self.fin_sum - self.n_dec * self.tick + self.n_dec  # Σ ticks left
        held = min(remaining, SGLANG_CLIP_MAX_NEW_TOKENS * self.n_dec) * self.ratio
        for r in self.prefilling:  # a chunked prompt: the rest of it, and its output
            held += (self.need[r] - self.done[r]
                     + min(self.out[r] - self.gen[r], SGLANG_CLIP_MAX_NEW_TOKENS) * self.ratio)
        return held

    def _sglang_prefill(self, room: int, free: float, whole: bool = False
                        ) -> list[tuple[int, int]]:
        """SGLang's prefill batch (schedule_policy.py PrefillAdder): the chunked request's next
        chunk first (reserved), then waiting requests while `room` tokens last and their
        prompt plus reserved output fits in `free` KV tokens; the last one is chunked when
        it overruns the room, or (`whole`: the room is --max-prefill-tokens, not a smaller
        --chunked-prefill-size) the batch stops before a prompt of ≥ the room left unless the
        batch is empty (add_one_req: input_tokens >= rem_input_tokens). Allocates their
        blocks; returns (request, tokens)."""
        chunks: list[tuple[int, int]] = []
        for r in list(self.prefilling):  # the chunked request goes on first (reserved)
            tok, nb = self._chunk(r, room)
            self.used += nb
            self.held[r] += nb
            chunks.append((r, tok))
            room -= tok
        while self.waiting and room > 0 and len(self.running) < self.max_seqs:
            r = self.waiting[0]
            if self.too_big[r]:
                self._fail_head()
                continue
            left = self.out[r] - self.gen[r]
            cost = (self.need[r] + min(left, SGLANG_CLIP_MAX_NEW_TOKENS) * self.ratio)
            if cost > free and (self.running or chunks):  # an empty engine admits any
                break  # request that fits (a reserve cannot starve it)
            if whole and chunks and self.need[r] - self.done[r] >= room:
                break
            tok, nb = self._chunk(r, room)
            self.waiting.popleft()
            self.running[r] = None
            self.prefilling[r] = None
            self.used += nb
            self.held[r] += nb
            free -= cost
            chunks.append((r, tok))
            room -= tok
        return chunks

    def _sglang_decode(self) -> None:
        """SGLang's decode-only step (scheduler.py update_running_batch): retract when the
        next tokens' KV does not fit, else decode (a run of identical steps when it can)."""
        if self.n_dec:
            self._decode_blocks_fit()
            if self.n_dec and not self._decode_run():
                self._run_step([], decode=True)

    def step_separate(self) -> None:
        """One SGLang step: a prefill batch when requests can be admitted, else a decode."""
        chunks = self._sglang_prefill(self.budget,
                                      (self.total - self.used) * self.bs - self._reserve())
        if chunks:
            self._run_step(chunks, decode=False)
            return
        self._sglang_decode()

    def step_mixed_chunk(self) -> None:
        """One SGLang step with --enable-mixed-chunk (scheduler.py get_new_batch_prefill,
        0.5.6.post2): the same prefill batch, its token room and KV budget less one token per
        running (decoding) request (PrefillAdder mixed_with_decode_tokens = running_bs), run
        together with those requests' decodes (ScheduleBatch.mix_with_running); else a
        decode-only step. A mixed step neither retracts nor decays new_token_ratio (only
        update_running_batch does), so when the decodes' next blocks do not fit this runs
        the decode-only step that retracts."""
        d = self.n_dec
        room = self.budget - d
        if room <= 0 or (d and self.used + self.phase[self.tick % self.bs] > self.total):
            self._sglang_decode()
            return
        chunks = self._sglang_prefill(room, (self.total - self.used) * self.bs
                                      - self._reserve() - d, self.whole)
        if chunks:
            self._run_step(chunks, decode=True)
            return
        self._sglang_decode()

    def run(self) -> None:
        step = (self.step_mixed_chunk if self.mixed_chunk
                else self.step_mixed if self.ctx.style == "mixed" else self.step_separate)
        while True:
            if self.stops and self.missed:
                return
            self._arrivals()
            if not self.running and not self.waiting:
                if not self.future:
                    return
                self.now = max(self.now, self.future[0][0])
                continue
            before = (self.steps, len(self.waiting), self.failed)
            step()
            self.max_running = max(self.max_running, len(self.running))
            if (self.steps, len(self.waiting), self.failed) == before and self.waiting:
                # nothing runs and the head cannot be admitted: it never fits
                self._fail_head()


def open_loop(ctx: PerfContext, input_tokens: Sequence[int], output_tokens: Sequence[int],
              rate: float, burstiness: float = 1.0, *, lengths: str = "constant", seed: int = 0,
              block_size: int = 16, cached_tokens: int = 0) -> SimResult:
    """The requests (their prompt and output lengths, tokens, in send order) sent as an open
    loop at `rate` req/s with gamma gaps of shape `burstiness` (gamma_arrivals, `seed`),
    simulated on one replica: how `kvplan plan --request-rate` and `kvplan calibrate` replay
    a rate."""
    reqs, harness = _open(input_tokens, output_tokens, rate, burstiness, lengths, seed)
    return simulate(ctx, reqs, harness, block_size=block_size, cached_tokens=cached_tokens)


def open_loop_unless_missed(ctx: PerfContext, input_tokens: Sequence[int],
                            output_tokens: Sequence[int], rate: float, limits: Limits,
                            burstiness: float = 1.0, *, lengths: str = "constant",
                            seed: int = 0, block_size: int = 16, cached_tokens: int = 0
                            ) -> SimResult | None:
    """open_loop's run, stopped as soon as it misses `limits` for certain: None then (enough
    TTFTs or TPOTs over the limit that the percentile is, or a request failed), else
    open_loop's whole result, which can still miss them (a percentile interpolated over the
    limit from a value under it). For searches that need only a miss's verdict (a replica
    count that does not hold a rate)."""
    reqs, harness = _open(input_tokens, output_tokens, rate, burstiness, lengths, seed)
    sim = _Sim(ctx, reqs, harness, block_size, None, cached_tokens, limits)
    sim.run()
    return None if sim.missed else _result(sim, reqs, harness)


def _open(input_tokens: Sequence[int], output_tokens: Sequence[int], rate: float,
          burstiness: float, lengths: str, seed: int) -> tuple[Requests, Harness]:
    arrivals = gamma_arrivals(len(input_tokens), rate, burstiness, seed=seed)
    return (Requests(tuple(input_tokens), tuple(output_tokens), arrivals, lengths),
            Harness("open", request_rate=rate, burstiness=burstiness))


def simulate(ctx: PerfContext, reqs: Requests, harness: Harness, *, block_size: int = 16,
             kv_tokens: int | None = None, cached_tokens: int = 0) -> SimResult:
    """Simulate `reqs` sent by `harness` to one replica described by `ctx` (its batching
    style, max_num_seqs, max_num_batched_tokens and KV capacity; `kv_tokens` overrides
    ctx.kv_capacity_tokens; `block_size`: the engine's KV block / page, tokens)."""
    if harness.kind in ("open", "trace") and reqs.arrival_s is None:
        raise ValueError(f"a {harness.kind} harness needs arrival times")
    sim = _Sim(ctx, reqs, harness, block_size, kv_tokens, cached_tokens)
    sim.run()
    return _result(sim, reqs, harness)


def _result(sim: _Sim, reqs: Requests, harness: Harness) -> SimResult:
    ok = [r for r in range(sim.n) if sim.end[r] >= 0]
    c = harness.concurrency
    if harness.kind == "steady" and sim.n > 3 * c:  # sent after the first c, before the last c
        ok = [r for r in ok if c <= r < sim.n - c]
    ttft = [sim.first[r] - sim.sent[r] for r in ok]
    e2e = [sim.end[r] - sim.sent[r] for r in ok]
    tpot = [(sim.end[r] - sim.first[r]) / (sim.out[r] - 1) for r in ok if sim.out[r] > 1]
    start = min((sim.sent[r] for r in ok), default=0.0)
    duration = max((sim.end[r] for r in ok), default=0.0) - start
    out_tokens = float(sum(sim.out[r] for r in ok))
    rate_n, rate_s = len(ok), duration
    if harness.kind == "steady" and len(ok) > 1:  # completions per second inside the window
        ends = [sim.end[r] for r in ok]
        rate_n, rate_s = len(ok) - 1, max(ends) - min(ends)
        out_tokens = out_tokens * rate_n / len(ok)
    return SimResult(
        harness=harness, lengths=reqs.lengths, requests=sim.n, completed=len(ok),
        failed=sim.failed, duration_s=duration,
        requests_per_s=rate_n / rate_s if rate_s > 0 else 0.0,
        output_tokens_per_s=out_tokens / rate_s if rate_s > 0 else 0.0,
        ttft=_stat(ttft), tpot=_stat(tpot), itl=_weighted_stat(sim.itl), e2e=_stat(e2e),
        preemptions=sim.preemptions, max_running=sim.max_running,
        mean_running=sim.busy_weighted / duration if duration > 0 else 0.0,
        mean_waiting=sim.wait_weighted / duration if duration > 0 else 0.0,
        mean_kv_usage=sim.kv_weighted / duration if duration > 0 else 0.0,
        steps=sim.steps, ttft_s=tuple(ttft), e2e_s=tuple(e2e))
