"""`kvplan check` pairs the prefill and decode halves of a disaggregated deployment that are
given as separate commands (two shell lines, two compose services, two Kubernetes Deployments,
in one file or several checked together): every command whose P/D settings name a role
(deploy/pd_check.py: vLLM `--kv-transfer-config` kv_producer / kv_consumer, SGLang
`--disaggregation-mode prefill|decode`) is a half; the halves of one model are checked as one
deployment. What they must agree on:

* the engine, and the KV transfer backend (the connector / transfer engine both ends run);
* the model's dtype and the KV cache dtype: the KV moves as bytes in the sender's layout (vLLM's
  NixlConnector hashes both into the handshake it refuses on a mismatch,
  compute_nixl_compatibility_hash at vllm-project/vllm 002a1057; its 0.11-0.12 connector asserts
  the remote KV layer shape "and same dtype");
* what the engine's own rules add (engines/pd.py `pair_rules`): for vLLM, the block size and a
  decode TP that is a multiple of the prefill TP, warnings because later releases relax both.

A half whose partner is not among the checked commands is a warning (check both files together).
Rows whose files pair the pools themselves (a Dynamo graph or llm-d values with both pools) are
paired the same way when their commands name roles; `kv_both` commands name none and are left
alone. Pure: works on the rows check_files built.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engines import pd, registry
from ..specs import Plan, Problem
from . import pd_check
from .commands import Found

if TYPE_CHECKING:
    from .check import CheckedDeployment


@dataclass
class _Half:
    found: Found
    row: CheckedDeployment
    plan: Plan
    settings: pd_check.PdSettings

    @property
    def where(self) -> str:
        return f"{self.row.file}:{self.row.line}"

    def value(self, name: str) -> object:
        item = self.plan.inputs.get(name)
        return item.value if item is not None else None


def _halves(pairs: list[tuple[Found, CheckedDeployment]]) -> list[_Half]:
    out = []
    for f, row in pairs:
        if row.plan is None or f.error is not None:
            continue
        settings, _ = pd_check.read(f, None)
        if settings is not None and settings.role in ("prefill", "decode"):
            out.append(_Half(f, row, row.plan, settings))
    return out


def _mismatches(p: _Half, d: _Half) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a prefill half `p` feeding a decode half `d`."""
    errors: list[str] = []
    warnings: list[str] = []
    if p.row.engine != d.row.engine:
        label = registry.get(p.row.engine).label, registry.get(d.row.engine).label
        return [f"its prefill runs {label[0]} and its decode {label[1]}: they cannot exchange "
                "KV"], []
    if p.settings.connector != d.settings.connector:
        errors.append(f"KV transfer backend {p.settings.connector} on the prefill, "
                      f"{d.settings.connector} on the decode ({p.settings.read_from})")
    for name, what in (("dtype", "model dtype"), ("kv_cache_dtype", "KV cache dtype")):
        if p.value(name) != d.value(name):
            errors.append(f"{what} {p.value(name)} on the prefill, {d.value(name)} on the decode: "
                          "the KV moves as the prefill's bytes")
    sup = pd.support(p.row.engine)
    rules = sup.pair_rules if sup is not None else ()
    source = "; ".join(sup.pair_sources) if sup is not None else ""
    if "block_size" in rules and p.value("block_size") != d.value("block_size"):
        warnings.append(f"block size {p.value('block_size')} on the prefill, "
                        f"{d.value('block_size')} on the decode ({source})")
    tp_p, tp_d = p.value("tensor_parallel_size") or 1, d.value("tensor_parallel_size") or 1
    if "decode_tp_multiple" in rules and (not isinstance(tp_p, int) or not isinstance(tp_d, int)
                                          or tp_d % tp_p):
        warnings.append(f"tensor parallel {tp_p} on the prefill, {tp_d} on the decode: the decode "
                        f"TP is not a multiple of the prefill's ({source})")
    return errors, warnings


def _fail(row: CheckedDeployment, problem: Problem) -> None:
    row.problems.append(problem)
    if problem.severity == "error" and row.status in ("fits", "policy-violation"):
        row.status, row.exit_code = "does-not-fit", 1


def pair(pairs: list[tuple[Found, CheckedDeployment]]) -> None:
    """Check the P/D halves among the checked commands as deployments (module docstring): the
    rows get their partners' findings as problems, in place."""
    groups: dict[str, list[_Half]] = defaultdict(list)
    for h in _halves(pairs):
        groups[h.plan.model.id].append(h)
    for model, halves in groups.items():
        prefills = [h for h in halves if h.settings.role == "prefill"]
        decodes = [h for h in halves if h.settings.role == "decode"]
        for h in halves:
            others = decodes if h.settings.role == "prefill" else prefills
            if not others:
                missing = "decode" if h.settings.role == "prefill" else "prefill"
                _fail(h.row, Problem(
                    code="pd-partner-missing", severity="warning",
                    message=f"a {h.settings.role} server of {model} ({h.settings.read_from}) "
                    f"with no {missing} server among the checked files: check both halves "
                    "together (kvplan check PREFILL DECODE) so their KV transfer settings are "
                    "compared"))
                continue
            h.row.problems.append(Problem(
                code="pd-paired", severity="info",
                message=f"{h.settings.role} half of a disaggregated {model} deployment, checked "
                "with its " + ("decode" if h.settings.role == "prefill" else "prefill")
                + " half(s) at " + ", ".join(o.where for o in others)))
        for d in decodes:
            for p in prefills:
                errors, warnings = _mismatches(p, d)
                for text in errors:
                    for h, other in ((d, p), (p, d)):
                        _fail(h.row, Problem(code="pd-mismatch", severity="error",
                                             message=f"with {other.where}: {text}"))
                for text in warnings:
                    _fail(d.row, Problem(code="pd-mismatch", severity="warning",
                                         message=f"with {p.where}: {text}"))
