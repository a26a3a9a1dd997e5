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
