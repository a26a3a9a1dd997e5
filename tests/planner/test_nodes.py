"""Node-aware layouts (planner/nodes.py, docs/nodes.md): what kvplan proposes stays inside the
systems each GPU ships in; what the user asks for is planned as asked, with a warning.

The shape checks here are written out from the system fields themselves (not through
planner/nodes.py), so a wrong rule in the module cannot agree with its own test."""

from __future__ import annotations

import re

import pytest

from kvplan.api import larger_gpus, plan
from kvplan.errors import InvalidInputError
from kvplan.knobs import Knobs
from kvplan.planner import nodes as node_rules
from kvplan.planner.sweep import candidates
from kvplan.sources.catalog import gpu_specs, resolve_gpu, resolve_model
from kvplan.specs import GpuSpec, Workload

# one model of each size class: 8B dense, 70B dense, 405B dense, a 235B MoE, a 671B MoE (MLA)
SIZES = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct",
         "meta-llama/Llama-3.1-405B", "Qwen/Qwen3-235B-A22B", "deepseek-ai/DeepSeek-R1")


def _fits_a_shape(g: GpuSpec, tp: int, gpus: int) -> bool:
    """Some bundled system keeps `tp` in its scale-up domain and holds `gpus` GPUs (TP × PP) on
    whole nodes (or a share dividing one node), within the nodes the vendor joins, with no
    pipeline stages inside one NVLink/xGMI fabric."""
    for s in g.systems:
        per = s.gpus_per_node
        whole = per % gpus == 0 if gpus <= per else gpus % per == 0
        joined = s.max_nodes is None or gpus <= s.max_nodes * per
        pcie = s.scale_up_link.startswith(("PCIe", "none"))
        stages_in_fabric = gpus > tp and not pcie and (
            gpus <= s.scale_up_domain or tp < min(per, gpus))
        if tp <= s.scale_up_domain and whole and joined and not stages_in_fabric:
            return True
    return not g.systems


def test_every_bundled_gpu_names_its_sources():
    for g in gpu_specs():
        for s in g.systems:
            assert s.source.startswith("https://"), (g.id, s.name)
            assert s.scale_up_domain >= 1 and s.gpus_per_node >= 1


def test_hand_read_shapes():
    """Figures as the cited datasheets give them (docs/nodes.md's table)."""
    h100 = resolve_gpu("h100-sxm-80gb").systems[0]  # DGX H100 user guide: 8 GPUs, 8 × CX-7 400G
    assert (h100.gpus_per_node, h100.scale_up_domain, h100.scale_out_gbps_per_gpu) == (8, 8, 400)
    nvl72 = resolve_gpu("gb200").systems[0]  # NVIDIA MNNVL tuning guide: 4 GPUs per tray, 72
    assert (nvl72.gpus_per_node, nvl72.scale_up_domain) == (4, 72)
    spark = resolve_gpu("dgx-spark-gb10").systems[0]  # two DGX Spark systems at most
    assert spark.max_gpus == 2
    assert resolve_gpu("rtx-4090").systems == []  # unknown system shape: nothing invented


@pytest.mark.parametrize("model", SIZES)
def test_no_sweep_candidate_exceeds_a_shape(model):
    m = resolve_model(model, offline=True)
    gpus = list(gpu_specs())
    cands, _ = candidates(m, gpus, engines=["vllm"], max_gpus=64, quantizations=None,
                          kv_cache_dtypes=None)
    assert cands
    for c in cands:
        assert _fits_a_shape(c.gpu, c.tensor_parallel_size, c.count), (
            c.gpu.id, c.tensor_parallel_size, c.pipeline_parallel_size)


def test_the_issues_examples_are_gone():
    """No TP 16 on L4, no 7-stage pipeline on an 8-GPU server, no 8-stage GH200 pipeline at
    TP 2; a DGX Spark candidate never spans more than two systems."""
    m = resolve_model("meta-llama/Llama-3.1-405B", offline=True)
    cands, _ = candidates(m, [resolve_gpu(x) for x in ("l4", "h100-sxm-80gb", "dgx-spark-gb10")],
                          engines=["vllm"], max_gpus=64, quantizations=None,
                          kv_cache_dtypes=None)
    lay = {(c.gpu.id, c.tensor_parallel_size, c.pipeline_parallel_size) for c in cands}
    assert ("l4", 16, 1) not in lay and ("l4", 8, 2) in lay
    assert ("h100-sxm-80gb", 1, 7) not in lay and ("h100-sxm-80gb", 8, 2) in lay
    # eight stages inside one NVSwitch node: TP 8 is the layout (TP 4 × PP 2 is two 4-GPU
    # HGX nodes, one stage each); on PCIe L4s PP stays inside the node
    assert ("h100-sxm-80gb", 1, 8) not in lay and ("h100-sxm-80gb", 2, 4) not in lay
    assert ("h100-sxm-80gb", 4, 2) in lay
    assert ("l4", 4, 2) in lay
    assert max(c.count for c in cands if c.gpu.id == "dgx-spark-gb10") == 2


@pytest.mark.parametrize("model", SIZES[:3])
def test_no_plan_suggestion_exceeds_a_shape(model):
    """Every bundled GPU: the recommended TP and each alternative's TP stay in the GPU's
    scale-up domain; "a larger GPU" spans as many GPUs as the GPU's own systems."""
    m = resolve_model(model, offline=True)
    for g in gpu_specs():
        if g.cuda_total_bytes is None:
            continue
        p = plan(m, g, max_model_len=8192, workload=Workload(target_concurrency=64))
        rec = p.recommendations.tensor_parallel_size.value
        if rec is not None:
            assert _fits_a_shape(g, int(rec), int(rec)), (g.id, rec)
        for problem in p.problems:  # the alternatives, as the plan prints them
            for tp, pp in re.findall(r"--tensor-parallel-size (\d+)(?: --pipeline-parallel-size "
                                     r"(\d+))?", problem.message):
                gpus = int(tp) * int(pp or 1)
                assert _fits_a_shape(g, int(tp), gpus), (g.id, problem.message)
            for other in re.findall(r"--gpu ([\w.-]+)", problem.message):
                x = resolve_gpu(other)
                assert not g.systems or x.systems, (g.id, other)
                assert x.id != "dgx-spark-gb10" or not g.segment.startswith("data-centre"), g.id


def test_larger_gpu_is_not_a_desktop_box_for_a_datacentre_gpu():
    """A GPU sold in clusters is not told to move to a box NVIDIA joins two of, nor to a part
    of unknown shape; a desktop part of unknown shape may still be told about any."""
    for g in gpu_specs():
        if g.systems and node_rules.deployable(g) is None:
            for x in larger_gpus(g):
                if x.id == "dgx-spark-gb10" or not x.systems:
                    assert not node_rules.joins_as_many(x, g), (g.id, x.id)
    assert node_rules.joins_as_many(resolve_gpu("dgx-spark-gb10"), resolve_gpu("rtx-4090"))
    # a data-centre part kvplan has no shape for (A40) is still sold for clusters
    assert not node_rules.joins_as_many(resolve_gpu("dgx-spark-gb10"), resolve_gpu("a40"))


def test_l4_70b_suggests_no_tp16():
    p = plan("meta-llama/Llama-3.3-70B-Instruct", "l4", offline=True, max_model_len=8192)
    assert p.recommendations.tensor_parallel_size.value in (None, 2, 4, 8)
    assert "16" not in (p.recommendations.tensor_parallel_size.reason or "")
    assert p.nodes is not None and p.nodes.system is not None


def test_tp16_on_hgx_is_planned_with_a_warning():
    p = plan("meta-llama/Llama-3.1-405B", "h100-sxm-80gb", offline=True,
             tensor_parallel_size=16, max_model_len=8192)
    assert p.gpu.count == 16
    assert p.nodes is not None
    assert (p.nodes.nodes, p.nodes.gpus_per_node, p.nodes.tensor_parallel_link) == (
        2, 8, "scale-out")
    warn = [x for x in p.problems if x.code == "tp-crosses-nodes"]
    assert len(warn) == 1 and warn[0].severity == "warning"
    assert "400 Gb/s" in warn[0].message


def test_pp_across_two_hgx_nodes():
    p = plan("meta-llama/Llama-3.1-405B", "h100-sxm-80gb", offline=True,
             tensor_parallel_size=8, pipeline_parallel_size=2, max_model_len=8192)
    assert p.nodes is not None
    assert (p.nodes.nodes, p.nodes.gpus_per_node, p.nodes.tensor_parallel_link,
            p.nodes.pipeline_link) == (2, 8, "scale-up", "scale-out")
    assert not any(x.code == "tp-crosses-nodes" for x in p.problems)


def test_nvl72_tp_spans_trays_over_nvlink():
    p = plan("meta-llama/Llama-3.1-405B", "gb200", offline=True, tensor_parallel_size=8,
             max_model_len=8192)
    assert p.nodes is not None
    assert (p.nodes.nodes, p.nodes.gpus_per_node, p.nodes.tensor_parallel_link) == (
        2, 4, "scale-up")


def test_nodes_and_gpus_per_node_options():
    p = plan("meta-llama/Llama-3.1-70B", "h100-sxm-80gb", offline=True, tensor_parallel_size=4,
             pipeline_parallel_size=2, nodes=2, max_model_len=8192)
    assert p.nodes is not None and (p.nodes.nodes, p.nodes.gpus_per_node) == (2, 4)
    with pytest.raises(InvalidInputError, match="--nodes 3"):
        plan("meta-llama/Llama-3.1-70B", "h100-sxm-80gb", offline=True,
             tensor_parallel_size=4, pipeline_parallel_size=2, nodes=3)
    with pytest.raises(InvalidInputError, match="--gpus-per-node"):
        plan("meta-llama/Llama-3.1-70B", "h100-sxm-80gb", offline=True,
             tensor_parallel_size=4, pipeline_parallel_size=2, nodes=2, gpus_per_node=8)
    # your own 4-GPU servers: TP 8 now crosses them
    q = plan("meta-llama/Llama-3.1-70B", "l40s", offline=True, tensor_parallel_size=8,
             gpus_per_node=4, max_model_len=8192)
    assert q.nodes is not None and q.nodes.tensor_parallel_link == "scale-out"


def test_nodes_without_a_layout_names_one_that_fills_them():
    """`--nodes 2` on H100 (8-GPU HGX nodes, gpu_specs) with the default TP 1: one GPU cannot be
    split over two nodes; the hint names 2 nodes × 8 GPUs as TP 8 inside a node, PP 2 across."""
    with pytest.raises(InvalidInputError) as e:
        plan("meta-llama/Llama-3.1-405B", "h100-sxm-80gb", offline=True, nodes=2)
    assert e.value.hint is not None and "-tp 8 -pp 2" in e.value.hint


def test_unknown_shape_says_so():
    p = plan("meta-llama/Llama-3.1-8B-Instruct", "rtx-4090", offline=True,
             tensor_parallel_size=2, max_model_len=4096)
    assert p.nodes is not None and p.nodes.system is None
    assert p.nodes.source == node_rules.UNKNOWN
    assert any(x.code == "unknown-system-shape" for x in p.problems)


def test_sweep_refuses_fixed_nodes():
    from kvplan.planner.sweep import sweep

    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct", offline=True)
    with pytest.raises(InvalidInputError, match="nodes"):
        sweep(m, [resolve_gpu("l4")], {}, knobs=Knobs(nodes=2))


def test_a_model_larger_than_a_node_is_offered_pipeline_stages_across_nodes():
    """Kimi-K2 (1T parameters, fp8) does not fit one 8 × H200 node at 131072 tokens: the fix-it
    keeps TP 8 inside the NVLink domain and adds a second node as a pipeline stage, not TP 16."""
    p = plan("moonshotai/Kimi-K2-Instruct", "h200-sxm-141gb", offline=True)
    steps = [x.message for x in p.problems if x.code == "next-steps"]
    assert steps
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2 (2 nodes of 8)" in steps[0]
    assert "--tensor-parallel-size 16" not in steps[0]


def test_plan_nodes_gives_each_caller_its_own_problems_list():
    """plan_nodes is remembered per GPU and layout: the section is shared, the problems list a
    caller extends is its own."""
    g = resolve_gpu("h100")
    section, problems = node_rules.plan_nodes(g, 16, 1, 1, nodes=None, gpus_per_node=None)
    assert [p.code for p in problems] == ["tp-crosses-nodes"]  # TP 16 > the 8-GPU NVLink domain
    problems.append(problems[0])
    again, fresh = node_rules.plan_nodes(g, 16, 1, 1, nodes=None, gpus_per_node=None)
    assert again is section and [p.code for p in fresh] == ["tp-crosses-nodes"]


def test_gpus_per_node_must_divide_a_layout_across_nodes():
    """8 GPUs on nodes of 3: a part node is no multi-node layout (before 2026-12-03 planned as
    3 nodes, and the emitted files gave 9 or 6 GPUs); within one node it stays a part node."""
    import kvplan
    from kvplan.errors import InvalidInputError

    with pytest.raises(InvalidInputError) as e:
        kvplan.plan("meta-llama/Llama-3.1-70B-Instruct", "h100", tensor_parallel_size=8,
                    gpus_per_node=3)
    assert e.value.message.startswith("--gpus-per-node 3 does not divide the deployment's 8 GPUs")
    assert "--gpus-per-node 2" in (e.value.hint or "")
    assert kvplan.plan("meta-llama/Llama-3.1-8B-Instruct", "h100", tensor_parallel_size=2,
                       gpus_per_node=3, max_model_len=8192).fits
