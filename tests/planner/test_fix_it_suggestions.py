"""Fix-it suggestions a cluster can act on (issue #21 item 10): a larger GPU is a data-centre
part of the same vendor first (not a desktop GB10 or an export-market H20), and a budget
fraction above SAFE_UTILIZATION is never suggested without its risk."""

from __future__ import annotations

import re

import kvplan
from kvplan.api import larger_gpus
from kvplan.planner.plan import SAFE_UTILIZATION
from kvplan.sources.catalog import gpu_specs, resolve_gpu


def _next_steps(p: kvplan.Plan) -> str:
    return next(x.message for x in p.problems if x.code in ("next-steps", "target-not-met"))


def test_70b_on_two_a100s_names_a_data_centre_gpu_not_a_desktop_gb10():
    p = kvplan.plan("llama-3.1-70b-instruct", "a100-sxm-80gb", tensor_parallel_size=2)
    larger = re.search(r"a larger GPU: --gpu (\S+?);", _next_steps(p))
    assert larger is not None
    assert resolve_gpu(larger.group(1)).segment == "data-centre", larger.group(1)


def test_data_centre_parts_come_first_and_export_parts_only_for_their_users():
    for g in gpu_specs():
        order = [x.segment for x in larger_gpus(g)]
        own = {"data-centre", "data-centre-export"} if g.segment == "data-centre-export" else {
            "data-centre"}
        first_other = next((i for i, s in enumerate(order) if s not in own), len(order))
        assert all(s not in own for s in order[first_other:]), (g.id, order)
    h100 = [x.id for x in larger_gpus(resolve_gpu("h100-sxm-80gb"))]
    assert h100.index("h200-sxm-141gb") < h100.index("h20-141gb")


def test_no_utilization_above_the_safe_value_without_its_risk():
    p = kvplan.plan("llama-3.1-70b-instruct", "a100-sxm-80gb", tensor_parallel_size=2)
    assert p.recommendations.gpu_memory_utilization.value is not None
    assert p.recommendations.gpu_memory_utilization.value <= SAFE_UTILIZATION
    assert f"--gpu-memory-utilization {SAFE_UTILIZATION:g}" in p.command
    for n in (13, 14, 16):
        p = kvplan.plan("llama-3.1-8b-instruct", "l40s", max_model_len=16384,
                        workload=kvplan.Workload(target_concurrency=n))
        for f, rest in re.findall(r"--gpu-memory-utilization ([\d.]+)(.{0,40})", _next_steps(p)):
            assert float(f) <= SAFE_UTILIZATION or "out-of-memory error is the risk" in (
                _next_steps(p)), (n, f, rest)


def test_a_workload_without_a_target_still_gets_a_length_that_starts():
    """Llama-3.1-8B on an L4 holds 28,848 tokens of KV cache, not one 131,072-token request, so
    vLLM refuses to start at the model's length. With only the request lengths given the plan
    used to keep 131,072 in the serve line, saying "one 131072-token request fits; the KV cache
    holds 0.26 of them". The serve line now takes the longest length that fits (vLLM's own
    estimate at the recommended budget), as without a workload, never shorter than the
    workload's 1,300-token requests."""
    from kvplan.specs import Workload

    bare = kvplan.plan("llama-3.1-8b-instruct", "l4")
    p = kvplan.plan("llama-3.1-8b-instruct", "l4",
                    workload=Workload(avg_input_tokens=1000, avg_output_tokens=300))
    rec = p.recommendations.max_model_len
    assert rec.value == bare.recommendations.max_model_len.value
    assert 1300 <= rec.value < 131072 and "does not fit" in rec.reason
    assert f"--max-model-len {rec.value} " in p.command + " "
    assert f"--max-model-len {rec.value} (at" in _next_steps(p)
    # a length the workload's own requests do not fit in is never proposed
    long = kvplan.plan("llama-3.1-8b-instruct", "l4",
                       workload=Workload(avg_input_tokens=60000, avg_output_tokens=300))
    assert "--max-model-len" not in _next_steps(long)  # 34,224 would not hold one of them
    assert long.recommendations.max_model_len.value == 131072
    assert long.recommendations.max_model_len.reason.startswith(
        "the configured length; one request this long does not fit")


def test_a_length_above_a_million_prints_whole_in_the_tables():
    """Llama-4-Scout's 10,485,760-token context: %g printed 1.04858e+07."""
    import io

    from rich.console import Console

    from kvplan.render.text import plan_table
    from kvplan.units import plain_number

    assert (plain_number(10485760), plain_number(0.92), plain_number(None)) == \
        ("10485760", "0.92", "—")
    p = kvplan.plan("meta-llama/Llama-4-Scout-17B-16E-Instruct", "h200", tensor_parallel_size=8)
    buf = io.StringIO()
    plan_table(p, Console(file=buf, width=100))
    assert "e+0" not in buf.getvalue()
