"""Fitting the step-time model's coefficients to measured runs: pure, no file or catalogue.

A measured run is a `Row`: the PerfContext of its deployment (built by the caller from
kvplan's own memory plan), the load it ran at (closed-loop concurrency, input and output
tokens per request) and what it measured (TTFT and TPOT in ms, output tokens/s per replica).
`predict` replays it through kvplan.perf.step.evaluate with a given set of coefficients.

Error of one prediction: e = predicted / measured − 1 (signed; > 0 means the model predicts
more than was measured). The fit minimises the mean over rows of

    soft_l1(log(TPOT_pred / TPOT_meas)) + soft_l1(log(TTFT_pred / TTFT_meas))

(a metric a row did not measure is left out), soft_l1(e) = 2·s²·(√(1 + (e/s)²) − 1) with
s = ROBUST_SCALE: ≈ e² near 0, ≈ 2·s·|e| beyond s (pseudo-Huber), so a few rows the model
cannot explain do not dominate. The fitted coefficients are a chosen subset of
kvplan.engines.base.Coefficients (`Parameters`): some shared by every key (engine), some
per key; the others keep the values of a base set. Each fitted coefficient is mapped into its
bounds by a logistic, and the loss is minimised by Nelder–Mead (pure Python, no scipy).

Used by benchmarks/perf_fit.py (the bundled fit) and kvplan calibrate (a user's runs).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..engines.base import Coefficients
from . import step as perf

METRICS = ("ttft", "tpot", "throughput")

# Where each coefficient may go in a fit, in its own unit (Coefficients' docstring).
BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_efficiency": (0.05, 1.0),  # fraction of dense peak FLOP/s
    "bandwidth_efficiency": (0.2, 1.0),  # fraction of peak HBM bytes/s
    "allreduce_latency_us": (0.0, 200.0),  # µs per TP all-reduce
    "step_overhead_ms": (0.0, 50.0),  # ms per engine step
    "layer_overhead_us": (0.0, 500.0),  # µs per decoder layer per step
    "seq_overhead_us": (0.0, 200.0),  # µs per sequence per step
    "request_overhead_ms": (0.0, 500.0),  # ms per request, in TTFT
    "burst_share": (0.0, 1.0),  # share of the lock-step burst queue (step.burst_wait_s)
    "dynamo_front_end_ms": (0.0, 500.0),  # ms per request through Dynamo's front end, in TTFT
}
# A neutral starting point for a fit from scratch (benchmarks/perf_fit.py).
START: dict[str, float] = {
    "gemm_efficiency": 0.6, "bandwidth_efficiency": 0.8, "allreduce_latency_us": 10.0,
    "step_overhead_ms": 2.0, "layer_overhead_us": 20.0, "seq_overhead_us": 10.0,
    "request_overhead_ms": 20.0, "burst_share": 0.2, "dynamo_front_end_ms": 20.0}

ROBUST_SCALE = 0.25  # log-error scale where the soft-L1 loss turns from quadratic to linear


# ----------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Row:
    """One measured run of one replica.

    context: the deployment (its own coefficients are replaced by the ones under test);
    key: which coefficient set predicts it (the engine name); group: the leave-one-group-out
    unit (e.g. "model | GPU | engine"); concurrency: closed-loop requests in flight;
    input_tokens / output_tokens per request; ttft_ms, tpot_ms: measured means (ms), None when
    the run did not measure it; throughput: measured output tokens/s of the replica (None:
    not measured); wait_model: the form of the wait behind other prompts the prediction uses
    (perf.step.evaluate; "mva" in benchmarks/perf_fit.py's step-time stage)."""

    context: perf.PerfContext
    key: str
    group: str
    concurrency: int
    input_tokens: int
    output_tokens: int
    ttft_ms: float | None
    tpot_ms: float | None
    throughput: float | None = None
    wait_model: perf.WaitModel = "burst"  # evaluate()'s wait behind other prompts


def predict(row: Row, coeffs: Mapping[str, Coefficients]) -> perf.PerfPoint:
    """The model's operating point for `row` with coefficients `coeffs[row.key]`."""
    ctx = dataclasses.replace(row.context, coefficients=coeffs[row.key])
    return perf.evaluate(ctx, concurrency=row.concurrency, input_tokens=row.input_tokens,
                         output_tokens=row.output_tokens, wait_model=row.wait_model)


# ----------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Parameters:
    """Which coefficients a fit moves: `shared` (one value for every key), `per_key` (one
    value per key in `keys`); every other Coefficients field keeps its base value. `bounds`:
    coefficient → (low, high) in its own unit (default BOUNDS)."""

    shared: tuple[str, ...]
    per_key: tuple[str, ...]
    keys: tuple[str, ...]
    bounds: Mapping[str, tuple[float, float]] = dataclasses.field(
        default_factory=lambda: dict(BOUNDS))
    # coefficients held at a value rather than fitted (a term the rows do not identify)
    fixed: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        """Every fitted coefficient name (shared first)."""
        return (*self.shared, *self.per_key)

    def __post_init__(self) -> None:
        fields = {f.name for f in dataclasses.fields(Coefficients)}
        unknown = [n for n in self.names if n not in fields]
        if unknown:
            raise ValueError(f"not a latency coefficient: {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(fields))})")
        if len(set(self.names)) != len(self.names):
            raise ValueError("a coefficient is both shared and per key")
        if set(self.fixed) - fields or set(self.fixed) & set(self.names):
            raise ValueError("a fixed coefficient must be a latency coefficient not fitted")
        if self.per_key and not self.keys:
            raise ValueError("per-key coefficients need at least one key")

    def value(self, name: str, z: float) -> float:
        """Transformed z (any real) → the coefficient, by a logistic into its bounds."""
        lo, hi = self.bounds[name]
        return lo + (hi - lo) / (1 + math.exp(-z))

    def transformed(self, name: str, v: float) -> float:
        """The inverse of value(): a coefficient (clamped just inside its bounds) → z."""
        lo, hi = self.bounds[name]
        t = min(max((v - lo) / (hi - lo), 1e-6), 1 - 1e-6)
        return math.log(t / (1 - t))

    def unpack(self, x: Sequence[float],
               base: Mapping[str, Coefficients] | None = None) -> dict[str, Coefficients]:
        """Vector x (transformed: shared values, then per_key values key by key) → coefficients
        per key. Fields outside `names` come from base[key]; without a base every field must
        be fitted."""
        shared = {n: self.value(n, z) for n, z in zip(self.shared, x[:len(self.shared)],
                                                        strict=True)}
        out, k = {}, len(self.shared)
        for key in self.keys:
            own = {n: self.value(n, z)
                   for n, z in zip(self.per_key, x[k:k + len(self.per_key)], strict=True)}
            k += len(self.per_key)
            if base is None:
                out[key] = Coefficients(**shared, **own, **self.fixed)
            else:
                out[key] = dataclasses.replace(base[key], **shared, **own, **self.fixed)
        return out

    def pack(self, start: Mapping[str, Mapping[str, float]]) -> list[float]:
        """Coefficients per key (name → value) → the transformed vector unpack() reads; the
        shared values are read from the first key."""
        x = [self.transformed(n, start[self.keys[0]][n]) for n in self.shared]
        for key in self.keys:
            x += [self.transformed(n, start[key][n]) for n in self.per_key]
        return x


# ----------------------------------------------------------------------------- loss


def soft_l1(e: float, scale: float = ROBUST_SCALE) -> float:
    """Soft-L1 (pseudo-Huber) of a log error e: 2·s²·(√(1 + (e/s)²) − 1), ≈ e² near 0 and
    ≈ 2·s·|e| beyond the scale s (dimensionless)."""
    s = scale
    return 2 * s * s * (math.sqrt(1 + (e / s) ** 2) - 1)


def row_loss(row: Row, p: perf.PerfPoint) -> float:
    """soft_l1 of the log errors of TPOT and TTFT of one row (the metrics it measured)."""
    if row.tpot_ms is not None and row.ttft_ms is not None:
        return (soft_l1(math.log(p.tpot_ms / row.tpot_ms))
                + soft_l1(math.log(p.ttft_ms / row.ttft_ms)))
    if row.tpot_ms is not None:
        return soft_l1(math.log(p.tpot_ms / row.tpot_ms))
    if row.ttft_ms is not None:
        return soft_l1(math.log(p.ttft_ms / row.ttft_ms))
    if row.throughput is not None:
        return soft_l1(math.log(p.output_tokens_per_s / row.throughput))
    return 0.0


def loss(x: Sequence[float], rows: Sequence[Row], params: Parameters,
         base: Mapping[str, Coefficients] | None = None) -> float:
    """Mean row_loss over `rows` with the coefficients params.unpack(x, base)."""
    coeffs = params.unpack(x, base)
    total = 0.0
    for r in rows:
        total += row_loss(r, predict(r, coeffs))
    return total / len(rows)


def nelder_mead(f: Callable[[list[float]], float], x0: Sequence[float], *, step: float = 0.7,
                iters: int = 1200, tol: float = 1e-7) -> list[float]:
    """Minimise f from x0 (Nelder & Mead 1965, standard reflection 1 / expansion 2 /
    contraction ½ / shrink ½ coefficients); `step`: the initial simplex edge in transformed
    units; stops after `iters` iterations or when the simplex's values span < tol."""
    n = len(x0)
    simplex = [list(x0)] + [[x0[j] + (step if j == i else 0.0) for j in range(n)] for i in range(n)]
    values = [f(p) for p in simplex]
    for _ in range(iters):
        order = sorted(range(n + 1), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] < tol:
            break
        centroid = [sum(p[j] for p in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]
        refl = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        fr = f(refl)
        if fr < values[0]:
            exp = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            fe = f(exp)
            simplex[-1], values[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = refl, fr
        else:
            con = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            fc = f(con)
            if fc < values[-1]:
                simplex[-1], values[-1] = con, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (p - b) for b, p in zip(best, q, strict=True)]
                                    for q in simplex[1:]]
                values = [values[0]] + [f(p) for p in simplex[1:]]
    return simplex[min(range(n + 1), key=values.__getitem__)]


def fit(rows: Sequence[Row], params: Parameters, start: Mapping[str, Mapping[str, float]],
        base: Mapping[str, Coefficients] | None = None, *,
        restarts: int = 2, tol: float = 1e-7) -> dict[str, Coefficients]:
    """Coefficients per key that minimise loss() on `rows`, from `start` (key → name →
    value; read for the fitted names only). Nelder–Mead runs `restarts` times, each from the
    previous optimum (a restart escapes a collapsed simplex), until the simplex's losses span
    less than `tol`. A key without rows has nothing
    to constrain its per-key coefficients: it gets the coefficients of the first key (in
    sorted order) that has rows."""
    if not rows:
        raise ValueError("no rows to fit")
    x = params.pack(start)
    if x:
        for _ in range(restarts):
            x = nelder_mead(lambda v: loss(v, rows, params, base), x, tol=tol)
    coeffs = params.unpack(x, base)
    have = sorted({r.key for r in rows})
    for key in params.keys:
        if key not in have:
            coeffs[key] = coeffs[have[0]]
    return coeffs


# ----------------------------------------------------------------------- statistics


def percentile(xs: Sequence[float], q: float) -> float:
    """The q-quantile (0 ≤ q ≤ 1) of xs, linear between the closest ranks."""
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def errors(rows: Sequence[Row], preds: Sequence[perf.PerfPoint]) -> dict[str, list[float]]:
    """Signed errors predicted / measured − 1 per metric (METRICS), over the rows that
    measured it (throughput: output tokens/s of the replica)."""
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for r, p in zip(rows, preds, strict=True):
        if r.ttft_ms is not None:
            out["ttft"].append(p.ttft_ms / r.ttft_ms - 1)
        if r.tpot_ms is not None:
            out["tpot"].append(p.tpot_ms / r.tpot_ms - 1)
        if r.throughput is not None:
            out["throughput"].append(p.output_tokens_per_s / r.throughput - 1)
    return out


def summary(errs: Mapping[str, Sequence[float]]) -> dict[str, dict[str, float]]:
    """Per metric, in % rounded to 0.1: mean, median and p90 of the absolute errors, and the
    median signed error ("bias"). Metrics without errors are left out."""
    return {k: {"mean": round(100 * statistics.fmean(abs(e) for e in v), 1),
                "median": round(100 * statistics.median(abs(e) for e in v), 1),
                "p90": round(100 * percentile([abs(e) for e in v], 0.9), 1),
                "bias": round(100 * statistics.median(v), 1)}
            for k, v in errs.items() if v}


def ranges(errs: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    """Per metric, the 10th and 90th percentiles of measured / predicted = 1 / (1 + e),
    rounded to 0.001: the band a prediction × these factors covers (PerfPoint _low/_high)."""
    out = {}
    for k, v in errs.items():
        ratios = [1 / (1 + e) for e in v]
        out[k] = [round(percentile(ratios, 0.1), 3), round(percentile(ratios, 0.9), 3)]
    return out


def as_dict(c: Coefficients) -> dict[str, float]:
    """Coefficients → name → value rounded to 4 decimals (the JSON form)."""
    return {k: round(v, 4) for k, v in dataclasses.asdict(c).items()}


@dataclass(frozen=True)
class HeldOut:
    """Leave-one-group-out result: every held-out row with its prediction (in group order)
    and, per group, its summary() plus its row count under "rows"."""

    rows: list[Row]
    preds: list[perf.PerfPoint]
    per_group: dict[str, dict]


def leave_one_group_out(rows: Sequence[Row],
                        fitter: Callable[[list[Row]], Mapping[str, Coefficients]],
                        *, report: Callable[[str, dict], None] | None = None) -> HeldOut:
    """For each group (sorted by name): fit on the other groups' rows with `fitter`, predict
    the group's rows. `report(group, its summary)` is called after each group (progress)."""
    held_rows: list[Row] = []
    held_preds: list[perf.PerfPoint] = []
    per_group: dict[str, dict] = {}
    for gname in sorted({r.group for r in rows}):
        train = [r for r in rows if r.group != gname]
        test = [r for r in rows if r.group == gname]
        coeffs = fitter(train)
        preds = [predict(r, coeffs) for r in test]
        held_rows += test
        held_preds += preds
        per_group[gname] = {"rows": len(test), **summary(errors(test, preds))}
        if report is not None:
            report(gname, per_group[gname])
    return HeldOut(held_rows, held_preds, per_group)
