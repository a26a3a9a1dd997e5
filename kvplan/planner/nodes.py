"""Node-aware layouts: which (TP, PP, DP) layouts the systems a GPU ships in can hold, how many
nodes a layout spans, and which link each kind of traffic crosses. Pure.

The facts are the GPU's `systems` (gpu_specs/*.json, each with its datasheet): GPUs per node,
the scale-up domain (NVLink/NVSwitch, xGMI, or a node's PCIe for cards without a fabric) and
the scale-out network per GPU. The rules:

* tensor parallelism stays inside one scale-up domain: its all-reduces run twice per layer
  and a scale-out network is one to two orders of magnitude slower than NVLink (400 Gb/s =
  50 GB/s per GPU on HGX H100 against 900 GB/s of NVLink 4);
* pipeline stages and data-parallel replicas may span nodes (one activation hand-off per
  stage boundary per step, or none);
* a layout that spans nodes takes whole nodes, and one inside a node takes a share that divides
  it (1, 2, 4 or 8 of 8 GPUs), so the node's other GPUs hold further replicas: a seven-GPU
  pipeline leaves one GPU of an 8-GPU server idle, a layout no cluster is bought for;
* a system the vendor joins only in small numbers (DGX Spark: two) bounds the GPU count;
* on NVLink/xGMI systems pipeline stages are not proposed inside one scale-up domain, nor
  two to a node: there TP uses the GPUs better, and PP is for crossing nodes (vLLM's
  docs/serving/parallelism_scaling.md: TP = GPUs per node, PP = nodes); PCIe-only servers
  keep PP inside the node (the same doc: PP instead of TP on GPUs without NVLink, e.g. L40S).

A layout the user asked for is planned as asked, with a warning naming the cost; what kvplan
proposes itself (recommendations, alternatives, the sweep's candidates) obeys the rules. A GPU
without bundled shapes is an "unknown system shape": nothing is constrained and plans say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidInputError
from ..perf import step as perf
from ..specs import GpuSpec, PlanNodes, Problem, SystemShape, per_object
from ..units import fast_init

UNKNOWN = "unknown system shape"


def shapes(gpu: GpuSpec, gpus_per_node: int | None = None,
           via: str = "--gpus-per-node") -> list[SystemShape]:
    """The systems a layout may use: the GPU's bundled ones, or the user's node
    (`--gpus-per-node N`: N GPUs per node, its scale-up domain the node unless a bundled
    rack-scale domain spans nodes, its network the bundled systems' where they state one).
    `via` names the flag the node size came from (--nodes: the GPUs split over them)."""
    if gpus_per_node is None:
        return list(gpu.systems)
    rack = max((s.scale_up_domain for s in gpu.systems if s.scale_up_domain > s.gpus_per_node),
               default=gpus_per_node)
    link = next((s.scale_up_link for s in gpu.systems), "unknown")
    out = max((s.scale_out_gbps_per_gpu for s in gpu.systems
               if s.scale_out_gbps_per_gpu is not None), default=None)
    return [SystemShape(name=f"{gpus_per_node}-GPU node ({via})",
                        gpus_per_node=gpus_per_node, scale_up_domain=max(rack, gpus_per_node),
                        scale_up_link=link, scale_out_gbps_per_gpu=out,
                        source=via)]


def tp_limit(gpu: GpuSpec) -> int | None:
    """The largest tensor-parallel size any bundled system keeps inside its scale-up domain;
    None for an unknown system shape."""
    return max((s.scale_up_domain for s in gpu.systems), default=None)


def _nodes(s: SystemShape, count: int) -> int:
    return -(-count // s.gpus_per_node)


def fabric(s: SystemShape) -> bool:
    """Whether the scale-up domain is a GPU fabric (NVLink/NVSwitch, xGMI, Gaudi's RoCE
    mesh) rather than a node's PCIe (bridged pairs included) or a single GPU."""
    return s.scale_up_domain > 1 and not s.scale_up_link.startswith(("PCIe", "none"))


def _holds(s: SystemShape, tp: int, pp: int, dp: int) -> bool:
    """`s` holds `count` GPUs in TP groups of `tp` inside its scale-up domain: whole nodes
    beyond one node, a share dividing the node inside one, at most its joinable GPUs; and no
    pipeline stages inside one fabric (there TP uses the GPUs better)."""
    count = tp * pp * dp
    if tp > s.scale_up_domain or (s.max_gpus is not None and count > s.max_gpus):
        return False
    if pp > 1 and fabric(s) and (tp * pp <= s.scale_up_domain
                                 or tp < min(s.gpus_per_node, tp * pp)):
        return False  # stages sharing one fabric, or one node: TP would use it better
    per = s.gpus_per_node
    return per % count == 0 if count <= per else count % per == 0


def proposable(gpu: GpuSpec, tp: int, pp: int = 1, dp: int = 1,
               gpus_per_node: int | None = None) -> bool:
    """Whether kvplan may propose this layout on `gpu`: some system holds it (the bundled ones,
    or the user's `--gpus-per-node` node; see the module's rules). Always True for an unknown
    system shape."""
    options = gpu.systems if gpus_per_node is None else shapes(gpu, gpus_per_node)
    if not options:
        return True
    for s in options:  # (a sweep asks every layout on every GPU)
        if _holds(s, tp, pp, dp):
            return True
    return False


def proposable_tp(gpu: GpuSpec, sizes: Sequence[int], pp: int = 1, dp: int = 1,
                  gpus_per_node: int | None = None) -> list[int]:
    """The TP sizes of `sizes` kvplan may propose with `pp` stages and `dp` replicas."""
    return [t for t in sizes if proposable(gpu, t, pp, dp, gpus_per_node)]


def joins_as_many(candidate: GpuSpec, current: GpuSpec) -> bool:
    """Whether `candidate` ships in systems that span as many GPUs as `current`'s: a GPU named
    as "a larger GPU" for a deployment must not be a part its systems cannot scale to (a
    desktop box that joins two, for a GPU sold in clusters). A candidate of unknown shape never
    replaces a known one. A current GPU of unknown shape constrains nothing, unless its vendor
    files it as a data-centre part: that is sold for clusters, so no candidate whose systems
    join only a few GPUs replaces it."""
    if not current.systems:
        return not current.segment.startswith("data-centre") or deployable(candidate) is None
    if not candidate.systems:
        return False
    theirs, mine = deployable(candidate), deployable(current)
    return theirs is None or (mine is not None and theirs >= mine)


def deployable(gpu: GpuSpec) -> int | None:
    """Most GPUs one deployment of `gpu` can span by its systems; None = no bound (a
    clusterable system, or an unknown system shape)."""
    if not gpu.systems or any(s.max_gpus is None for s in gpu.systems):
        return None
    return max(s.max_gpus or 0 for s in gpu.systems)


@fast_init
@dataclass(frozen=True)
class Placement:
    """A layout placed on one system shape."""

    shape: SystemShape | None  # None: unknown system shape
    nodes: int | None
    gpus_per_node: int | None


def place(gpu: GpuSpec, tp: int, count: int, *, nodes: int | None = None,
          gpus_per_node: int | None = None) -> Placement:
    """The system a layout of `count` GPUs in TP groups of `tp` runs on: of the GPU's shapes
    (or the user's `--gpus-per-node`), the first that keeps TP in its scale-up domain in the
    fewest nodes. `nodes` (`--nodes`) fixes the node count: the GPUs must split evenly over
    them, no more per node than the shape holds. Raises InvalidInputError for a count the
    given nodes cannot hold."""
    per_given = gpus_per_node
    if nodes is not None:
        if count % nodes:
            per = gpus_per_node or max((s.gpus_per_node for s in gpu.systems), default=None)
            raise InvalidInputError(
                f"--nodes {nodes} does not divide the deployment's {count} GPUs "
                "(tensor × pipeline × data parallel)", knob="nodes",
                hint=(f"give the layout that fills them, e.g. -tp {per} -pp {nodes} (tensor "
                      "parallel inside a node, pipeline parallel across nodes), or a node "
                      "count that divides the GPU count") if per else
                "pass a node count that divides the GPU count, or change the layout")
        if per_given is not None and per_given * nodes != count:
            raise InvalidInputError(
                f"--nodes {nodes} × --gpus-per-node {per_given} = {nodes * per_given} GPUs, but "
                f"the layout uses {count}", knob="gpus_per_node",
                hint="make nodes × GPUs per node equal tensor × pipeline × data parallel")
        per_given = count // nodes
    elif per_given is not None and count > per_given and count % per_given:
        # across nodes every node runs the same number of ranks (the engines' multi-node
        # launchers start one worker group per node): a part node is no layout
        fits = [d for d in range(1, per_given + 1) if count % d == 0 and d <= per_given]
        raise InvalidInputError(
            f"--gpus-per-node {per_given} does not divide the deployment's {count} GPUs "
            "(tensor × pipeline × data parallel): a layout across nodes puts as many on each",
            knob="gpus_per_node",
            hint=f"use --gpus-per-node {max(fits)} (or a divisor of {count}), or a layout whose "
            f"GPU count is a multiple of {per_given}")
    # --nodes alone that fills whole nodes of a bundled system is that system (what the sweep
    # and a plan without --nodes place the same layout on); part nodes are a node of their own
    full = [s for s in gpu.systems if s.gpus_per_node == per_given] if (
        nodes is not None and gpus_per_node is None) else []
    options = full or shapes(gpu, per_given, "--gpus-per-node" if gpus_per_node is not None
                             else f"--nodes {nodes}")
    if not options:
        return Placement(None, nodes, per_given)
    best = min(options, key=lambda s: (tp > s.scale_up_domain, _nodes(s, count),
                                       options.index(s)))
    used = nodes if nodes is not None else _nodes(best, count)
    if per_given is None and used * best.gpus_per_node < count:
        raise InvalidInputError(f"the layout's {count} GPUs do not fit {used} node(s) of "
                                f"{best.gpus_per_node}", knob="nodes")
    if nodes is not None and gpus_per_node is None and count // nodes > max(
            s.gpus_per_node for s in gpu.systems or [best]):
        raise InvalidInputError(
            f"--nodes {nodes} puts {count // nodes} GPUs on each node, but {gpu.name} ships in "
            f"nodes of at most {max(s.gpus_per_node for s in gpu.systems)}", knob="nodes",
            hint="pass more nodes, or --gpus-per-node for your own servers")
    return Placement(best, used, min(count, per_given or best.gpus_per_node))


def _gbps(x: float | None) -> str:
    return "an unsourced scale-out network" if x is None else f"{x:g} Gb/s per GPU"


def plan_nodes(gpu: GpuSpec, tp: int, pp: int, dp: int, *, nodes: int | None,
               gpus_per_node: int | None) -> tuple[PlanNodes, list[Problem]]:
    """_plan_nodes with a problems list of the caller's own to extend (the memoised section
    and its frozen Problems are shared: nothing changes a plan's section, _nodes adds a launch
    by model_copy)."""
    section, problems = _plan_nodes(gpu, tp, pp, dp, nodes=nodes, gpus_per_node=gpus_per_node)
    return section, list(problems)


@per_object(4096)
def _plan_nodes(gpu: GpuSpec, tp: int, pp: int, dp: int, *, nodes: int | None,
                gpus_per_node: int | None) -> tuple[PlanNodes, list[Problem]]:
    """The plan's `nodes` section and the problems of its layout: TP beyond the scale-up
    domain (kvplan proposes none, so the user asked for it: planned, with a warning naming the
    cost), more GPUs than the system joins, an unknown
    system shape on a multi-GPU layout."""
    count = tp * pp * dp
    p = place(gpu, tp, count, nodes=nodes, gpus_per_node=gpus_per_node)
    problems: list[Problem] = []
    s = p.shape
    if s is None:
        if count > 1 or nodes is not None:
            problems.append(Problem(
                code="unknown-system-shape", severity="info",
                message=f"{UNKNOWN}: kvplan has no sourced system for {gpu.name} (GPUs per node, "
                "NVLink domain, network), so it checks no node limits and assumes every link is "
                "the GPU's own; pass --gpus-per-node for your servers"))
        return PlanNodes(nodes=p.nodes, gpus_per_node=p.gpus_per_node, system=None,
                         scale_up_domain=None, scale_up_link=None, scale_out_gbps_per_gpu=None,
                         tensor_parallel_link="unknown",
                         pipeline_link="unknown" if pp > 1 else "none",
                         source=UNKNOWN), problems
    multi = (p.nodes or 1) > 1
    tp_out = tp > s.scale_up_domain
    if tp_out:
        problems.append(Problem(
            code="tp-crosses-nodes", severity="warning",
            message=f"tensor_parallel_size {tp} exceeds the {s.scale_up_domain}-GPU scale-up "
            f"domain of {s.name} ({s.scale_up_link}): its all-reduces, two per layer each step, "
            f"cross nodes over {_gbps(s.scale_out_gbps_per_gpu)} instead; keep TP within "
            f"{s.scale_up_domain} and span nodes with pipeline or data parallelism"))
    if s.max_gpus is not None and count > s.max_gpus:
        problems.append(Problem(
            code="exceeds-system", severity="warning",
            message=f"{count} GPUs exceed what {s.name} joins ({s.max_nodes} nodes of "
            f"{s.gpus_per_node} = {s.max_gpus} GPUs; {s.source.split(' ')[0]})"))
    # stages of one TP group per node: a stage boundary crosses nodes whenever the pipeline
    # spans more GPUs than a node (or a rack-scale domain) holds
    pp_link = "none" if pp == 1 else ("scale-out" if multi and tp * pp > s.scale_up_domain
                                      else "scale-up")
    return PlanNodes(nodes=p.nodes, gpus_per_node=p.gpus_per_node, system=s.name,
                     scale_up_domain=s.scale_up_domain, scale_up_link=s.scale_up_link,
                     scale_out_gbps_per_gpu=s.scale_out_gbps_per_gpu,
                     tensor_parallel_link="scale-out" if tp_out else "scale-up",
                     pipeline_link=pp_link, source=s.source), problems


def _fabric(gpu: GpuSpec) -> str:
    """The name of a GPU's own link (nvlink_gbps_per_gpu holds any vendor's): NVLink on NVIDIA
    parts, else the fabric its systems name (xGMI on AMD Instinct, RoCE on Gaudi: gpu_specs/)."""
    if gpu.vendor == "NVIDIA":
        return "NVLink"
    named = {s.scale_up_link.split(" (", 1)[0] for s in gpu.systems}
    return named.pop() if len(named) == 1 else f"{gpu.vendor}'s GPU link"


def _own_link(gpu: GpuSpec) -> str:
    rate = perf.link_bytes_per_s(gpu) / 1e9
    kind = _fabric(gpu) if gpu.nvlink_gbps_per_gpu else f"PCIe {gpu.pcie_gen or 4} x16"
    return f"{kind} at {rate:g} GB/s per direction"


@per_object(4096)  # every plan's latency context asks it, a sweep for hundreds of plans
def node_links(gpu: GpuSpec, tp: int, pp: int, dp: int = 1, *, nodes: int | None = None,
               gpus_per_node: int | None = None) -> perf.Links:
    """The links the latency model uses for this layout: TP over the GPU's own link (NVLink,
    else PCIe) inside the scale-up domain, over the scale-out network (Gb/s ÷ 8 per GPU, one
    direction: NICs are full duplex) beyond it; one pipeline hand-off per node boundary the
    stages cross (stages fill nodes in order: nodes − 1 crossings when the pipeline spans
    nodes outside one scale-up domain). Raises InvalidInputError as place() does."""
    count = tp * pp * dp
    p = place(gpu, tp, count, nodes=nodes, gpus_per_node=gpus_per_node)
    s = p.shape
    own = _own_link(gpu)
    if s is None:
        return perf.Links(text=f"{UNKNOWN}: TP over {own}" if tp > 1 else "")
    out = (None if s.scale_out_gbps_per_gpu is None else s.scale_out_gbps_per_gpu * 1e9 / 8)
    net = (f"the scale-out network at {s.scale_out_gbps_per_gpu:g} Gb/s per GPU"
           if s.scale_out_gbps_per_gpu is not None else "an unsourced scale-out network "
           "(not timed)")
    parts = []
    tp_bytes = None
    if tp > s.scale_up_domain:
        tp_bytes = out
        parts.append(f"TP all-reduce over {net}")
    elif tp > 1:
        # "xGMI (Infinity Fabric, …)" after "over xGMI at …": the parenthesis alone
        fabric = s.scale_up_link
        lead = own.split(" at ", 1)[0] + " ("
        if fabric.startswith(lead) and fabric.endswith(")"):
            fabric = fabric[len(lead):-1]
        parts.append(f"TP all-reduce over {own} ({fabric})")
    # the pipeline's stages span (tp × pp) / per-node GPUs nodes per replica
    stage_nodes = -(-tp * pp // (p.gpus_per_node or tp * pp))
    crossings = (stage_nodes - 1) if pp > 1 and tp * pp > s.scale_up_domain else 0
    # an MoE layer's expert group spans TP × DP GPUs (perf/expert.py): beyond the scale-up
    # domain its dispatch/combine crosses the scale-out network
    ep_bytes = out if dp > 1 and tp * dp > s.scale_up_domain else None
    if ep_bytes is not None:
        parts.append(f"MoE traffic of TP × DP = {tp * dp} GPUs over {net}")
    if crossings:
        parts.append(f"{crossings} pipeline hand-off(s) per step over {net}")
    elif pp > 1:
        parts.append("pipeline hand-offs inside the scale-up domain (not timed)")
    return perf.Links(tp_bytes_per_s=tp_bytes, pp_crossings=crossings,
                      pp_bytes_per_s=out or 0.0, text="; ".join(parts),
                      moe_bytes_per_s=ep_bytes,
                      moe_node_gpus=(p.gpus_per_node or 0) if ep_bytes is not None else 0)
