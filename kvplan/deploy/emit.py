"""`kvplan plan … --emit FORMAT`: the deployment file for a plan, in the format a stack deploys.

Each writer turns the plan's launch line (Plan.command: the engine's own flags, exactly what the
plan assumed) into the fields its format has, the ones kvplan/deploy/manifests.py and
commands.py read back: `kvplan check` on the file plans the same deployment (the round trip is
tested over the catalogue). The GPU model is a node selector (nvidia.com/gpu.product, the label
NVIDIA GPU feature discovery sets) or the format's accelerator field; the engine release a
`# kvplan: engine-version=…` line, for the formats that do not name it.

An AMD GPU (GpuSpec.vendor) gets what ROCm deploys with: the `amd.com/gpu` resource and a label
AMD's node labeller sets, the engine's ROCm image (DeploySyntax.rocm_image; a placeholder the
header explains where its tag cannot be derived), ROCm's devices in compose, and a
`# kvplan: gpu=…` line (check reads the node label too: GpuSpec.k8s_node_labels, one table for
both). Dynamo and the GPUs of other vendors are refused: kvplan knows no deployment of theirs.

Formats and the schema version written (see manifests.py for the sources read):
k8s (apps/v1 Deployment + v1 Service), compose (Compose Specification), dynamo
(nvidia.com/v1alpha1 DynamoGraphDeployment, one aggregated worker), kserve
(serving.kserve.io/v1alpha1 LLMInferenceService), helm-llmd (llm-d-modelservice values),
helm-production-stack (vllm-stack values), ray (Ray Serve LLM config: build_openai_app), skypilot
(SkyPilot task with a `service:` section).

A plan over several nodes (Plan.nodes) is written as a LeaderWorkerSet (k8s), a Dynamo worker with
multinode.nodeCount, a SkyPilot task with num_nodes, a Ray PACK placement group, or (data-parallel
layouts only) KServe worker pods and llm-d modelservice values with `multinode: true`, from the
per-node launch lines engines/multinode.py derives; the other formats refuse it, naming these.

A pod that runs the engine on several GPUs gets an in-memory /dev/shm (NCCL between them outgrows
a container's 64 MiB), sized as the engine's own Kubernetes examples size it
(DeploySyntax.shm_size), wherever the file declares that pod's volumes: k8s (each Deployment or
LeaderWorkerSet pod), kserve (the template and worker pods), helm-llmd (decode.volumes) and
helm-production-stack (extraVolumes, when its chart mounts none itself). Where the stack builds
that part of the pod (Dynamo's operator, the vllm-stack chart with tensorParallelSize, KubeRay,
SkyPilot) the file's header says who mounts it; compose shares the host's (`ipc: host`).

Pure: returns text; the CLI writes it.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from typing import Any

from ..engines import registry
from ..errors import InvalidInputError
from ..specs import Plan, WhatIfPlan
from ..units import GiB
from .commands import ASSIGNMENT, _entrypoint
from .manifests import RAY_GPUS, SKY_GPUS, dynamo_modules, stack_engine

FORMATS = ("k8s", "helm-llmd", "helm-production-stack", "dynamo", "kserve", "ray", "skypilot",
           "compose")
# The stack (engines/base.STACKS) each single-engine format deploys: the engine is the one that
# declares the stack (DeploySyntax.stacks); the container images are each engine's
# DeploySyntax.image / dynamo_image.
FORMAT_STACKS = {"kserve": "kserve", "helm-llmd": "llm-d",
                 "helm-production-stack": "production-stack", "ray": "ray-serve-llm"}


def _yaml(data: Any) -> str:
    from .commands import _yaml_module

    return str(_yaml_module().safe_dump(data, sort_keys=False, width=1000))


def _words(p: Plan) -> tuple[str, list[str], list[str]]:
    """(engine, the entrypoint's words, the flags after it, the model among them when the
    engine takes it positionally)."""
    tokens = shlex.split(p.command)
    hit = _entrypoint(tokens)
    if hit is None:  # every engine's launch line starts with its entrypoint
        raise InvalidInputError(f"cannot emit: the plan's command {p.command[:60]!r} names no "
                                "serving entrypoint")
    engine, argv = hit
    return engine, tokens[:len(tokens) - len(argv)], argv


def _flags(p: Plan) -> list[str]:
    """The launch line's flags without the model (positional or under the model flag). A line
    that sets a variable before the server (vLLM before 0.11.1 takes its all2all backend only
    from VLLM_ALL2ALL_BACKEND) is refused: these formats carry flags only."""
    engine, before, argv = _words(p)
    assigned = [w for w in before if ASSIGNMENT.match(w)]
    if assigned:
        raise InvalidInputError(
            f"cannot emit: {p.engine.label} {p.engine.version} takes {assigned[0]} from its "
            "environment, and this format carries the server's flags only",
            hint="emit k8s, compose or skypilot (they keep the variable), or plan a later "
            "release, in which the setting is a flag")
    syntax = registry.get(engine).syntax
    model_flags = {f for f, (knob, _) in syntax.cli_flags.items() if knob == "model"}
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == p.model.id and (i == 0 or argv[i - 1] in model_flags):
            i += 1
            continue
        if tok in model_flags:
            i += 1
            continue
        out.append(tok)
        i += 1
    return out


def _pairs(flags: list[str]) -> list[tuple[str, str | None]]:
    """--flag value / --flag=value / --bool → (name without dashes, value or None)."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(flags):
        name, eq, value = flags[i].partition("=")
        if eq:
            out.append((name, value))
            i += 1
        elif i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            out.append((name, flags[i + 1]))
            i += 2
        else:
            out.append((name, None))
            i += 1
    return out


def _typed(value: str) -> Any:
    if re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    if re.fullmatch(r"-?[0-9]*\.[0-9]+", value):
        return float(value)
    return value


def _gpu_label(p: Plan, names: tuple[str, ...] = (), short: bool = False) -> str:
    """A GPU name that kvplan resolves back to this plan's GPU: one of `names` (a format's own
    spelling), the GPU feature-discovery label (nvidia-smi's name, spaces as dashes) or a short
    alias (first when `short`: SkyPilot and Ray name GPUs H100, L4, A10G), else kvplan's id."""
    from ..errors import KvplanError
    from ..sources.catalog import resolve_gpu

    g = resolve_gpu(p.gpu.id)
    smi = [n.replace(" ", "-") for n in g.smi_names]
    alias = [a.upper() for a in (g.aliases[:1] or [g.id])]
    candidates = [*names, *(alias + smi if short else smi + alias)]
    for name in candidates:
        try:
            if resolve_gpu(name).id == g.id:
                return name
        except KvplanError:
            continue
    return g.id


# ------------------------------------------------------------------ GPU vendors

# The Kubernetes resource each vendor's device plugin advertises: NVIDIA's k8s-device-plugin
# nvidia.com/gpu, AMD's ROCm/k8s-device-plugin amd.com/gpu (its README and
# example/vllm-serve/deployment.yaml; kubernetes.io "Schedule GPUs").
GPU_RESOURCES = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu"}
NVIDIA_PRODUCT_LABEL = "nvidia.com/gpu.product"  # NVIDIA GPU feature discovery
# An AMD GPU's nodes are selected by the first node label AMD's node labeller sets on them
# (GpuSpec.k8s_node_labels in gpu_specs/, each with its source; `kvplan check` reads the same):
# gpu.product-name where AMD documents its value, else gpu.device-id. A virtual function (a cloud
# VM's GPU) has its own device id (74B5 MI300X VF): the header says to check.
# Ray's accelerator_type of an AMD GPU, detected from its PCI device id (ray
# python/ray/_private/accelerators/amd_gpu.py amd_product_dict: 0x74a1 "AMD-Instinct-MI300X-OAM";
# MI325X and MI355X have none there, and 0x740c is "AMD-Instinct-MI250X-MI250")
RAY_AMD = {"mi300x": "AMD-Instinct-MI300X-OAM", "mi250x-gcd": "AMD-Instinct-MI250X-MI250"}
# Docker reaches AMD GPUs through the ROCm devices (rocm.docs.amd.com install-on-linux "Running
# ROCm Docker containers": --device /dev/kfd, the compute interface, and --device /dev/dri, each
# GPU's render node; --security-opt seccomp=unconfined "optional", recommended), run with the
# video group (vLLM's docs/getting_started/installation/gpu.rocm.inc.md, TGI's
# docs/source/installation_amd.md and SGLang's docs all `--group-add video`); no reservation
# names a count, so every GPU of the host is visible and the engine takes the first it needs.
ROCM_COMPOSE = {"devices": ["/dev/kfd", "/dev/dri"], "group_add": ["video"],
                "security_opt": ["seccomp=unconfined"]}


def _vendor(p: Plan) -> str:
    """The plan's GPU vendor (GpuSpec.vendor); a GPU kvplan cannot look up again (a local one,
    read through NVML) is NVIDIA's."""
    from ..errors import KvplanError
    from ..sources.catalog import resolve_gpu

    try:
        return resolve_gpu(p.gpu.id).vendor
    except KvplanError:
        return "NVIDIA"


def _amd(p: Plan) -> bool:
    return _vendor(p) == "AMD"


def _resource(p: Plan) -> str:
    """The Kubernetes resource a pod asks for the plan's GPUs with."""
    return GPU_RESOURCES[_vendor(p)]


def _node_selector(p: Plan) -> dict[str, str]:
    """The nodeSelector that puts a pod on the plan's GPU model."""
    if _amd(p):
        key, value = _amd_label(p)
        return {key: value}
    return {NVIDIA_PRODUCT_LABEL: _gpu_label(p)}


def _amd_label(p: Plan) -> tuple[str, str]:
    from ..errors import KvplanError
    from ..sources.catalog import resolve_gpu

    try:
        labels = resolve_gpu(p.gpu.id).k8s_node_labels
    except KvplanError:
        labels = []
    if not labels:
        raise InvalidInputError(f"--emit: kvplan knows no node label AMD's node labeller sets "
                                f"for the {p.gpu.id}", code="emit-unsupported",
                                hint="run the plan's launch line, or add k8s_node_labels to the "
                                "GPU's gpu_specs file")
    return labels[0].key, labels[0].value


def _rocm_image(p: Plan, fmt: str) -> tuple[str, str | None]:
    """The engine's ROCm image for the plan's AMD GPU and the header's note on a placeholder in
    it; an engine or release without one is an error."""
    from ..sources.catalog import resolve_gpu

    engine, _, _ = _words(p)
    eng = registry.get(engine)
    gfx = resolve_gpu(p.gpu.id).compute_capability or ""
    found = eng.syntax.rocm_image(p.engine.version, gfx) if eng.syntax.rocm_image else None
    if found is None:
        raise InvalidInputError(
            f"--emit {fmt}: kvplan knows no {eng.label} {p.engine.version} container image for "
            f"the {p.gpu.id} ({gfx or 'its ROCm target'})", code="emit-unsupported",
            hint="build the engine's ROCm image for it and use the plan's launch line, or plan "
            "another engine or release")
    return found


def _engine_image(p: Plan, fmt: str) -> tuple[str, str | None]:
    """The image that runs the plan's engine on its GPU, and the header's note on it (None)."""
    if _amd(p):
        return _rocm_image(p, fmt)
    return _image(p), None


def _amd_header(p: Plan, *notes: str | None, label: bool = True, gpu_line: bool = True) -> str:
    """The header lines of an AMD GPU's file (none for another's): the GPU as a directive
    `kvplan check` reads (as it reads the node label, for formats that carry none), the node
    label the file selects (`label`), and `notes` (the image's placeholder)."""
    if not _amd(p):
        return ""
    text = [n for n in notes if n]
    if label:
        key, value = _amd_label(p)
        text.insert(0, f"AMD GPU nodes as AMD's node labeller labels them: {key}={value} (a "
                    f"virtual-function GPU has another; `kubectl get nodes -L {key}` shows "
                    "yours).")
    lines = "".join(textwrap.fill(t, width=99, initial_indent="# ", subsequent_indent="# ",
                                  break_on_hyphens=False, break_long_words=False) + "\n"
                    for t in text)
    return (f"# kvplan: gpu={_gpu_label(p)}\n" if gpu_line else "") + lines


def _need_stack_engine(p: Plan, fmt: str) -> str:
    """The plan's engine, when it is the one the format's stack runs; else a clear error."""
    engine, _, _ = _words(p)
    wanted = stack_engine(FORMAT_STACKS[fmt])
    if engine != wanted:
        label = registry.get(wanted).label
        others = multinode_formats(p) if _multinode(p) else [
            f for f in WRITERS if f not in FORMAT_STACKS
            and (f != "dynamo" or _runs_engine(p, f))]
        raise InvalidInputError(f"--emit {fmt} deploys {label}; this plan is for "
                                f"{registry.get(engine).label}",
                                hint=f"plan with --engine {wanted}, or emit "
                                + ", ".join(others))
    return engine


def _header(p: Plan, fmt: str, image_of: str | None = None) -> str:
    """Who wrote the file, and the engine release as a directive `kvplan check` reads. A plan
    that does not fit as asked carries kvplan's recommended command (Plan.command): said here.
    `image_of`: the project whose release the image tag VERSION stands for (its images bundle
    an engine release kvplan cannot look up)."""
    note = ("" if p.fits else "# The plan did not fit as asked: this is kvplan's recommended "
            "command (kvplan plan shows why).\n")
    if image_of:
        note += (f"# Set the image tag VERSION to the {image_of} release whose image ships "
                 f"{p.engine.label} {p.engine.version}\n# (its release notes list it): the plan "
                 "is for that engine release.\n")
    total = p.inputs.get("gpu_total_bytes")  # a --gpu-memory-gib the plan was made with
    gib = (f" gpu-memory-gib={total.value / GiB:g}"
           if total is not None and total.source == "cli" and isinstance(total.value, int)
           else "")
    return (f"# Written by `kvplan --emit {fmt}` for {p.model.id} on {p.gpu.count} × "
            f"{p.gpu.id} ({p.engine.label} {p.engine.version}).\n{note}"
            f"# kvplan: engine-version={p.engine.version}{gib}\n")


def _name(p: Plan) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", p.model.id.lower().rsplit("/", 1)[-1]).strip("-")[:50]


def _reachable(p: Plan, line: str) -> str:
    """The launch line with `--host 0.0.0.0` when the engine's server binds only the loopback
    interface unless told (DeploySyntax.loopback_host: SGLang, trtllm-serve), so the Service,
    the published port or the probe of the file reaches it; the server is the script's last
    line."""
    engine, _, _ = _words(p)
    if not registry.get(engine).syntax.loopback_host or " --host" in f" {line}":
        return line
    return line + " --host 0.0.0.0"


def _argv(p: Plan) -> list[str]:
    """The container's command: the launch line's words, or `/bin/sh -c SCRIPT` when the line is
    a script (it writes the engine's options file first, a heredoc) or sets an environment
    variable first (vLLM before 0.11.1: VLLM_ALL2ALL_BACKEND=… vllm serve …)."""
    line = _reachable(p, p.command)
    words = shlex.split(line) if "\n" not in line else []
    if not words or ASSIGNMENT.match(words[0]):  # a variable set before the server
        return ["/bin/sh", "-c", line]
    return words


def _image(p: Plan) -> str:
    engine, _, _ = _words(p)
    return (registry.get(engine).syntax.image or "IMAGE:{v}").format(v=p.engine.version)


def _shared_memory(p: Plan, spec: dict[str, Any], container: dict[str, Any], gpus: int, *,
                   name: str = "shm", volumes: str = "volumes",
                   mounts: str = "volumeMounts") -> None:
    """Mount an in-memory /dev/shm in a pod of several GPUs: NCCL between them needs more than
    the container's 64 MiB default (`compose` shares the host's with `ipc: host`). The size limit
    is the engine's own Kubernetes examples' (DeploySyntax.shm_size; none when not declared).
    `spec` / `container`: where the format declares the pod's volumes and the engine container's
    mounts, under the keys `volumes` / `mounts` (a chart's values name them its own way); `name`:
    the volume's (a stack whose base pod already has one merges ours into it by name)."""
    if gpus <= 1:
        return
    engine, _, _ = _words(p)
    size = registry.get(engine).syntax.shm_size
    empty_dir: dict[str, str] = {"medium": "Memory"}
    if size:
        empty_dir["sizeLimit"] = size
    spec.setdefault(volumes, []).append({"name": name, "emptyDir": empty_dir})
    container.setdefault(mounts, []).append({"name": name, "mountPath": "/dev/shm"})


def _shm_note(gpus: int, provider: str) -> str:
    """The header line of a file that cannot declare the pod's /dev/shm (the stack builds the
    pod), for a pod of several GPUs: who mounts it instead (`provider`)."""
    if gpus <= 1:
        return ""
    text = f"/dev/shm (NCCL between the {gpus} GPUs needs more than a container's 64 MiB): "
    return textwrap.fill(text + provider, width=99, initial_indent="# ",
                         subsequent_indent="# ", break_on_hyphens=False) + "\n"


def _port(p: Plan, fmt: str, *, in_image: bool = True) -> int:
    """The port the plan's server listens on: its launch line names none, so the engine's own
    default (DeploySyntax.port), or the one its published image sets (`image_port`) when the
    format runs that image (k8s, compose; SkyPilot runs the line on the node itself)."""
    engine, _, _ = _words(p)
    syntax = registry.get(engine).syntax
    port = (syntax.image_port if in_image else None) or syntax.port
    if port is None:
        raise InvalidInputError(f"--emit {fmt}: {registry.get(engine).label} declares no port "
                                "for its server (DeploySyntax.port)", code="emit-unsupported",
                                hint="emit a format that does not expose the server's port "
                                "(dynamo, or a stack that runs the engine), or declare it")
    return port


# ------------------------------------------------------------------ multi-node

# Where each per-node launch line (engines/multinode.py: `$HEAD_IP`, `$NODE_RANK`) finds the head
# node's address and its own rank in each format that runs one pod / process per node:
# LeaderWorkerSet injects LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX (0 on the
# leader) into every container (kubernetes-sigs/lws api/leaderworkerset/v1/
# leaderworkerset_types.go, v0.10.0); SkyPilot sets SKYPILOT_NODE_RANK and SKYPILOT_NODE_IPS (one
# address a line, the head's first) on every node of a task
# (https://docs.skypilot.co/en/stable/running-jobs/distributed-jobs.html).
LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_PLACEHOLDERS = {"HEAD_IP": "LWS_LEADER_ADDRESS", "NODE_RANK": "LWS_WORKER_INDEX"}
# formats that write a deployment over several nodes, and as what
MULTINODE_FORMATS = {
    "k8s": "a LeaderWorkerSet (leader + workers, one pod per node)",
    "dynamo": "a worker with multinode.nodeCount (Dynamo's operator adds the engine's "
              "multi-node flags)",
    "skypilot": "a task with num_nodes, each node running its rank's launch line",
    "ray": "a PACK placement group Ray spreads over the cluster's nodes",
    "kserve": "an LLMInferenceService with a worker pod per node (data-parallel layouts)",
    "helm-llmd": "modelservice values with multinode: true, a pod per node (data-parallel "
                 "layouts)",
}
PER_NODE_FORMATS = ("k8s", "skypilot", "helm-llmd")  # run each node's own launch line
# the stacks that spread a deployment over nodes by data-parallel ranks only (whole DP ranks on
# each pod): KServe (see _kserve_parallelism) and llm-d modelservice (its LeaderWorkerSet's size
# is parallelism.data / dataLocal: templates/_helpers.tpl numWorkers, chart v0.4.12)
DATA_PARALLEL_FORMATS = ("kserve", "helm-llmd")


def _multinode(p: Plan) -> bool:
    return p.nodes is not None and (p.nodes.nodes or 1) > 1


def _per_node_lines(p: Plan, fmt: str) -> tuple[str, str]:
    """(the head node's launch line, the other nodes' line) of a plan over nodes, as
    engines/multinode.py writes them; an engine that starts every rank from one node (one line:
    MPI) has no per-node pods to write, and that is an error naming the format that does."""
    assert p.nodes is not None
    launch = p.nodes.launch
    if len(launch) != 2:
        can = multinode_formats(p)
        raise InvalidInputError(
            f"--emit {fmt}: {p.engine.label} starts every rank of a multi-node deployment from "
            "one node (" + (launch[0].command.split()[0] if launch else "no per-node line")
            + f"), so there is no per-node launch line for {fmt} to run on each node",
            code="emit-multinode", knob="nodes",
            hint=("emit " + ", ".join(can) + " (Dynamo's operator sets MPI up across the "
                  "nodes)") if can else "run the launch line the plan prints")
    return _reachable(p, launch[0].command), launch[1].command


def multinode_formats(p: Plan) -> list[str]:
    """The formats that write this plan over its nodes: those that run its engine, and of the
    pod/process-per-node ones only when the engine has a launch line per node."""
    per_node = p.nodes is not None and len(p.nodes.launch) == 2
    return [f for f in MULTINODE_FORMATS if _runs_engine(p, f)
            and (per_node or f not in PER_NODE_FORMATS)
            and (f not in DATA_PARALLEL_FORMATS or _data_parallel_over_nodes(p))]


def _data_parallel_over_nodes(p: Plan) -> bool:
    """Whether only data-parallel ranks cross nodes: each node holds whole DP ranks."""
    nodes = (p.nodes.nodes or 1) if p.nodes is not None else 1
    dp = int(p.inputs["data_parallel_size"].value or 1)
    pp = int(p.inputs["pipeline_parallel_size"].value or 1)
    return pp == 1 and dp % nodes == 0


def _runs_engine(p: Plan, fmt: str) -> bool:
    """Whether format `fmt` deploys the plan's engine."""
    engine, _, _ = _words(p)
    if fmt in FORMAT_STACKS:
        return stack_engine(FORMAT_STACKS[fmt]) == engine
    if fmt == "dynamo":
        module = registry.get(engine).syntax.dynamo_module
        return (module is not None and dynamo_modules().get(module) == engine
                and not _amd(p))
    return True


def _placeholders(line: str, names: dict[str, str]) -> str:
    """A launch line with multinode.py's placeholders renamed (HEAD_IP → LWS_LEADER_ADDRESS)."""
    for old, new in names.items():
        line = re.sub(rf"\b{old}\b", new, line)
    return line


def _leader_worker_set(p: Plan) -> str:
    """A LeaderWorkerSet of `nodes` pods (leader = node rank 0), each with the node's GPUs and
    its launch line, and a Service in front of the leader (LWS's own examples select the leader
    by its template label: docs/examples/sglang/lws.yaml)."""
    assert p.nodes is not None
    head, worker = _per_node_lines(p, "k8s")
    name = _name(p)
    per_node = p.nodes.gpus_per_node or p.gpu.count // (p.nodes.nodes or 1)
    selector = _node_selector(p)
    port = _port(p, "k8s")
    image, note = _engine_image(p, "k8s")

    def pod(line: str, leader: bool) -> dict[str, Any]:
        container: dict[str, Any] = {
            "name": "leader" if leader else "worker", "image": image,
            "command": ["/bin/sh", "-c", _placeholders(line, LWS_PLACEHOLDERS)],
            "resources": {"limits": {_resource(p): str(per_node)}}}
        if leader:
            container["ports"] = [{"containerPort": port}]
        spec = {"nodeSelector": dict(selector), "containers": [container]}
        _shared_memory(p, spec, container, int(per_node))
        return ({"metadata": {"labels": {"role": "leader"}}, "spec": spec} if leader
                else {"spec": spec})

    lws = {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": {"name": name},
           "spec": {"replicas": 1, "leaderWorkerTemplate": {
               "size": p.nodes.nodes, "restartPolicy": "RecreateGroupOnPodRestart",
               "leaderTemplate": pod(head, True), "workerTemplate": pod(worker, False)}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"selector": {"leaderworkerset.sigs.k8s.io/name": name, "role": "leader"},
                        "ports": [{"port": port, "targetPort": port}]}}
    return _header(p, "k8s") + _amd_header(p, note) + _yaml(lws) + "---\n" + _yaml(service)


def _skypilot_run(p: Plan) -> str:
    """The run script of a task over nodes: the head's line on rank 0, the others' elsewhere."""
    head, worker = _per_node_lines(p, "skypilot")
    names = {"HEAD_IP": "HEAD_IP", "NODE_RANK": "SKYPILOT_NODE_RANK"}
    return ('HEAD_IP=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n'
            'if [ "$SKYPILOT_NODE_RANK" = "0" ]; then\n'
            f"  {_placeholders(head, names)}\nelse\n  {_placeholders(worker, names)}\nfi\n")


# --------------------------------------------------------------------- writers


def k8s(p: Plan) -> str:
    if _multinode(p):
        return _leader_worker_set(p)
    name = _name(p)
    labels = {"app": name}
    port = _port(p, "k8s")
    image, note = _engine_image(p, "k8s")
    container = {
        "name": "server", "image": image, "command": _argv(p),
        "ports": [{"containerPort": port}],
        "resources": {"limits": {_resource(p): str(p.gpu.count)}}}
    pod: dict[str, Any] = {"nodeSelector": _node_selector(p), "containers": [container]}
    _shared_memory(p, pod, container, p.gpu.count)
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": pod}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"selector": labels, "ports": [{"port": port, "targetPort": port}]}}
    return (_header(p, "k8s") + _amd_header(p, note) + _yaml(deployment) + "---\n"
            + _yaml(service))


def compose(p: Plan) -> str:
    port = _port(p, "compose")
    image, note = _engine_image(p, "compose")
    service: dict[str, Any] = {"image": image, "entrypoint": _argv(p),
                               "ports": [f"{port}:{port}"], "ipc": "host"}
    head = _header(p, "compose") + f"# kvplan: gpu={_gpu_label(p)}\n"
    if _amd(p):  # ROCm's devices: no count to reserve, so the file says how many it plans
        service.update({k: list(v) for k, v in ROCM_COMPOSE.items()})
        head += f"# kvplan: gpu-count={p.gpu.count}\n" + _amd_header(
            p, note, label=False, gpu_line=False)
    else:
        service["deploy"] = {"resources": {"reservations": {"devices": [
            {"driver": "nvidia", "count": p.gpu.count, "capabilities": ["gpu"]}]}}}
    return head + _yaml({"services": {_name(p): service}})


def dynamo(p: Plan) -> str:
    engine, _, _ = _words(p)
    if _amd(p):  # the operator turns resources.limits.gpu into nvidia.com/gpu (deploy/operator
        # graph.go: commonconsts.KubeResourceGPUNvidia) and its runtime images are CUDA builds
        raise InvalidInputError(
            f"--emit dynamo: Dynamo's operator asks for NVIDIA GPUs (nvidia.com/gpu) and runs "
            f"CUDA images; the {p.gpu.id} is AMD's", code="emit-unsupported",
            hint="emit " + ", ".join(f for f in WRITERS if f != "dynamo" and _runs_engine(p, f)))
    syntax = registry.get(engine).syntax
    module = syntax.dynamo_module
    if module is None or dynamo_modules().get(module) != engine:
        backends = sorted(set(dynamo_modules().values()))
        raise InvalidInputError(f"Dynamo has no {registry.get(engine).label} backend",
                                hint=f"plan with --engine {' or '.join(backends)}")
    model_flag = next(f for f, (knob, _) in syntax.cli_flags.items()
                      if knob == "model" and f.startswith("--"))
    args = [model_flag, p.model.id, *_flags(p)]
    files = _heredocs(p.command)
    container: dict[str, Any] = {
        "image": (syntax.dynamo_image or "IMAGE:{v}").format(v="VERSION"),
        "command": ["python3", "-m", module], "args": args}
    pod: dict[str, Any] = {"nodeSelector": {"nvidia.com/gpu.product": _gpu_label(p)},
                           "mainContainer": container}
    config_map = None
    if syntax.dynamo_flags:  # the backend's own spelling; the options file as a ConfigMap
        container["args"], options = _dynamo_args(args, syntax, engine)
        if options is not None:
            text = files.get(options)
            if text is None:
                raise InvalidInputError(f"cannot emit dynamo: the plan's options file {options} "
                                        "is not written in its command", hint="emit k8s")
            base = options.rsplit("/", 1)[-1]
            container["args"] += ["--extra-engine-args", f"/engine_configs/{base}"]
            container["volumeMounts"] = [{"name": "engine-config", "mountPath": "/engine_configs"}]
            config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": f"{_name(p)}-engine-config"},
                          "data": {base: text}}
            pod["volumes"] = [{"name": "engine-config",
                               "configMap": {"name": f"{_name(p)}-engine-config"}}]
    worker: dict[str, Any] = {"componentType": "worker", "replicas": 1,
                              "resources": {"limits": {"gpu": str(p.gpu.count)}},
                              "extraPodSpec": pod}
    if _multinode(p):
        # GPUs per node × multinode.nodeCount; the args keep the whole layout (Dynamo's operator
        # adds each node's flags: docs/kubernetes/deployment/multinode-deployment.md)
        assert p.nodes is not None
        worker["multinode"] = {"nodeCount": p.nodes.nodes}
        worker["resources"]["limits"]["gpu"] = str(p.gpu.count // (p.nodes.nodes or 1))
    doc = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
           "metadata": {"name": _name(p)},
           "spec": {"services": {"Frontend": {"componentType": "frontend", "replicas": 1},
                                 "Worker": worker}}}
    head = _header(p, "dynamo", "Dynamo" if ":VERSION" in container["image"] else None)
    head += _shm_note(int(worker["resources"]["limits"]["gpu"]), DYNAMO_SHM)
    return head + (_yaml(config_map) + "---\n" if config_map else "") + _yaml(doc)


# Dynamo's operator mounts an in-memory /dev/shm in every component's pod itself, 8Gi unless the
# component's `sharedMemory` (size, disabled) says otherwise (its docs, "Operator Default Values
# Injection": "All components receive an 8Gi shared memory volume mounted at /dev/shm by
# default"; the operator's consts.go: KubeValueNameSharedMemory "shared-memory",
# DefaultSharedMemoryMountPath "/dev/shm", DefaultSharedMemorySize "8Gi"; the v1alpha1 CRD of
# Dynamo 0.5.0 has the `sharedMemory` field). Its ApplySharedMemoryVolumeAndMount (deploy/
# operator/internal/dynamo) drops any other mount at /dev/shm the pod spec brings, so a volume
# in extraPodSpec would be dead weight: the file leaves /dev/shm to the operator.
DYNAMO_SHM = ("Dynamo's operator mounts an in-memory one in each worker pod (8Gi; the "
              "service's sharedMemory.size sets it), so this file declares none.")


def _heredocs(command: str) -> dict[str, str]:
    """The files a launch line writes before it runs (`cat > NAME <<'EOF' … EOF`): name → text."""
    return {m.group(1): m.group(2)
            for m in re.finditer(r"cat > (\S+) <<'EOF'\n(.*?)^EOF$", command, re.S | re.M)}


def _dynamo_args(args: list[str], syntax: Any, engine: str) -> tuple[list[str], str | None]:
    """The engine's flags in the Dynamo backend's spelling (DeploySyntax.dynamo_flags, any alias
    of the same setting), and the options file the line names (None when none). A flag the
    backend has no spelling for is an error, except the backend it always runs (its default)."""
    by_knob = {syntax.cli_flags[engine_flag][0]: dynamo_flag
               for dynamo_flag, engine_flag in syntax.dynamo_flags.items()}
    options_flag = registry.get(engine).options_file_flag
    options_knob = syntax.cli_flags[options_flag][0] if options_flag else None
    out: list[str] = []
    options = None
    for name, value in _pairs(args):
        knob = syntax.cli_flags.get(name, (None, ""))[0]
        if knob == options_knob and value is not None:
            options = value
        elif knob in by_knob:
            out += [by_knob[knob]] if value is None else [by_knob[knob], value]
        elif knob == "backend" and value == "pytorch":
            continue  # dynamo.trtllm runs the PyTorch backend (main.py arg_map)
        else:
            raise InvalidInputError(f"cannot emit dynamo: Dynamo's {registry.get(engine).label} "
                                    f"worker has no flag for {name}", hint="emit k8s")
    return out, options


def _parallelism(p: Plan) -> dict[str, int]:
    tp = p.inputs["tensor_parallel_size"].value
    pp = p.inputs["pipeline_parallel_size"].value
    dp = p.inputs["data_parallel_size"].value
    out = {"tensor": int(tp or 1)}
    if pp and pp != 1:
        out["pipeline"] = int(pp)
    if dp and dp != 1:
        out["data"] = int(dp)
    return out


_PARALLEL_FLAGS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size")


def _without_parallel(flags: list[str]) -> list[str]:
    out: list[str] = []
    for name, value in _pairs(flags):
        if name not in _PARALLEL_FLAGS:
            out += [name] if value is None else [name, value]
    return out


def _kserve_parallelism(p: Plan, nodes: int) -> dict[str, int]:
    """`spec.parallelism` as KServe validates it (pkg/apis/serving/v1alpha1/
    llm_inference_service_validation.go, kserve@aaac4e29): `data` always with `dataLocal` (the
    ranks on one pod), never with `pipeline`; over nodes only data-parallel ranks spread (the
    LeaderWorkerSet's size is data / dataLocal: llm_inference_service_types_func.go GetSize,
    each worker pod a headless vLLM with its start rank: config-llm-worker-data-parallel.yaml)."""
    par = _parallelism(p)
    if "data" in par and "pipeline" in par:
        raise InvalidInputError("--emit kserve: KServe refuses pipeline and data parallelism "
                                "together (llm_inference_service_validation.go)",
                                code="emit-unsupported", hint="emit k8s or dynamo")
    if nodes > 1 and ("pipeline" in par or par.get("data", 1) % nodes):
        raise InvalidInputError(
            f"--emit kserve: KServe spreads a deployment over nodes by data-parallel ranks "
            f"(data / dataLocal pods); this plan's layout puts tensor or pipeline parallelism "
            f"across its {nodes} nodes", code="emit-multinode", knob="nodes",
            hint="emit " + ", ".join(f for f in multinode_formats(p) if f != "kserve"))
    if "data" in par:
        par["dataLocal"] = par["data"] // nodes
    return par


def kserve(p: Plan) -> str:
    _need_stack_engine(p, "kserve")
    nodes = (p.nodes.nodes or 1) if p.nodes is not None and _multinode(p) else 1
    par = _kserve_parallelism(p, nodes)
    extra = " ".join(shlex.quote(a) for a in _without_parallel(_flags(p)))

    gpus = p.gpu.count // nodes
    image, note = _engine_image(p, "kserve")

    def pod() -> dict[str, Any]:
        main: dict[str, Any] = {"name": "main"}
        if _amd(p):  # KServe's base pod runs llm-d's CUDA build, ghcr.io/llm-d/llm-d:0.0.8
            main["image"] = image  # (config/llmisvc/config-llm-template.yaml, kserve@bc3894bf)
        main |= {"resources": {"limits": {_resource(p): str(gpus)}},
                 "env": [{"name": "VLLM_ADDITIONAL_ARGS", "value": extra}]}
        out = {"nodeSelector": _node_selector(p), "containers": [main]}
        # KServe merges this pod over its LLMInferenceServiceConfig's (a strategic merge:
        # volumes by name, mounts by path); that base pod mounts a 1Gi `dshm` at /dev/shm
        # (config/llmisvc/config-llm-template.yaml and config-llm-worker-data-parallel.yaml), so
        # ours takes its name and sets the size the engine's own examples use
        _shared_memory(p, out, main, gpus, name="dshm")
        return out

    spec: dict[str, Any] = {
        "replicas": 1, "model": {"uri": f"hf://{p.model.id}", "name": p.model.id},
        "parallelism": par, "router": {"route": {}}, "template": pod()}
    if nodes > 1:  # the worker pods of the LeaderWorkerSet; KServe writes their vLLM command
        spec["worker"] = pod()
    doc = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
           "metadata": {"name": _name(p)}, "spec": spec}
    return _header(p, "kserve") + _amd_header(p, note) + _yaml(doc)


def helm_llmd(p: Plan) -> str:
    engine = _need_stack_engine(p, "helm-llmd")
    if _multinode(p):
        return _helm_llmd_nodes(p, engine)
    container = {"name": engine, "image": _llmd_image(p),
                 "modelCommand": "vllmServe", "args": _without_parallel(_flags(p)),
                 "resources": {"limits": {_resource(p): str(p.gpu.count)}}}
    decode = {"create": True, "replicas": 1, "parallelism": _parallelism(p),
              "nodeSelector": _node_selector(p), "containers": [container]}
    _shared_memory(p, decode, container, p.gpu.count)  # the chart's decode.volumes, mounts
    doc = {"modelArtifacts": {"uri": f"hf://{p.model.id}", "name": p.model.id},
           **_llmd_accelerator(p), "decode": decode, "prefill": {"create": False}}
    return _header(p, "helm-llmd", "llm-d") + _amd_header(p) + _yaml(doc)


LLMD_IMAGE = "ghcr.io/llm-d/llm-d-cuda:VERSION"
# llm-d's ROCm build, and the chart's accelerator type for AMD GPUs, which makes it ask for
# amd.com/gpu (llm-d-modelservice values.yaml accelerator.type / accelerator.resources.amd, chart
# v0.4.12; llm-d guides/inference-scheduling/ms-inference-scheduling/values_amd.yaml: `type: amd`,
# ghcr.io/llm-d/llm-d-rocm, validated on MI300X and MI355X)
LLMD_ROCM_IMAGE = "ghcr.io/llm-d/llm-d-rocm:VERSION"


def _llmd_image(p: Plan) -> str:
    return LLMD_ROCM_IMAGE if _amd(p) else LLMD_IMAGE


def _llmd_accelerator(p: Plan) -> dict[str, Any]:
    return {"accelerator": {"type": "amd"}} if _amd(p) else {}


# The port vLLM listens on in a decode pod: the routing sidecar (routing.proxy, enabled by
# default) takes routing.servicePort 8000 and forwards to routing.proxy.targetPort, 8200 by
# default (llm-d-modelservice values.yaml; the chart's vllmServe command adds the same --port).
LLMD_VLLM_PORT = 8200


def _helm_llmd_nodes(p: Plan, engine: str) -> str:
    """modelservice values for a data-parallel plan over nodes: `multinode: true` makes the
    decode pods a LeaderWorkerSet of parallelism.workers pods (templates/decode-lws.yaml), all
    from one template, so the container runs a script that starts the head's launch line on
    the leader (LWS_WORKER_INDEX 0) and a worker's elsewhere. The chart adds no engine flags to a
    `custom` command: the script's lines are the plan's own."""
    assert p.nodes is not None
    nodes = p.nodes.nodes or 1
    if not _data_parallel_over_nodes(p):
        raise InvalidInputError(
            f"--emit helm-llmd: llm-d modelservice spreads a deployment over nodes by "
            f"data-parallel ranks (parallelism.data / dataLocal pods); this plan's layout puts "
            f"tensor or pipeline parallelism across its {nodes} nodes", code="emit-multinode",
            knob="nodes", hint="emit " + ", ".join(
                f for f in multinode_formats(p) if f != "helm-llmd"))
    head, worker = _per_node_lines(p, "helm-llmd")
    script = ('if [ "$LWS_WORKER_INDEX" = "0" ]; then\n'
              f"  {_placeholders(head, LWS_PLACEHOLDERS)} --port {LLMD_VLLM_PORT}\nelse\n"
              f"  {_placeholders(worker, LWS_PLACEHOLDERS)}\nfi\n")
    par = _parallelism(p)
    par["dataLocal"] = par["data"] // nodes
    par["workers"] = nodes
    container = {"name": engine, "image": _llmd_image(p), "modelCommand": "custom",
                 "command": ["/bin/sh", "-c"], "args": [script],
                 "resources": {"limits": {_resource(p): str(p.gpu.count // nodes)}}}
    decode = {"create": True, "replicas": 1, "parallelism": par,
              "nodeSelector": _node_selector(p), "containers": [container]}
    _shared_memory(p, decode, container, p.gpu.count // nodes)  # every pod of the LWS
    doc = {"modelArtifacts": {"uri": f"hf://{p.model.id}", "name": p.model.id},
           "multinode": True, **_llmd_accelerator(p), "decode": decode,
           "prefill": {"create": False}}
    return _header(p, "helm-llmd", "llm-d") + _amd_header(p) + _yaml(doc)


# vLLM flag → production-stack vllmConfig key (the chart's deployment-vllm-multi.yaml)
_PSTACK_KEYS = {"--max-model-len": "maxModelLen", "--dtype": "dtype",
                "--tensor-parallel-size": "tensorParallelSize", "--max-num-seqs": "maxNumSeqs",
                "--gpu-memory-utilization": "gpuMemoryUtilization"}


def helm_production_stack(p: Plan) -> str:
    _need_stack_engine(p, "helm-production-stack")
    config: dict[str, Any] = {}
    extra: list[str] = []
    for name, value in _pairs(_flags(p)):
        key = _PSTACK_KEYS.get(name)
        if key and value is not None:
            config[key] = _typed(value)
        elif name in ("--enable-prefix-caching", "--no-enable-prefix-caching"):
            continue  # the chart writes one of them from enablePrefixCaching
        else:
            extra += [name] if value is None else [name, value]
    config["enablePrefixCaching"] = bool(p.inputs["enable_prefix_caching"].value)
    if extra:
        config["extraArgs"] = extra
    image, note = _engine_image(p, "helm-production-stack")
    repository, _, tag = image.rpartition(":")
    spec: dict[str, Any] = {
        "name": _name(p), "repository": repository, "tag": tag,
        "modelURL": p.model.id, "replicaCount": 1, "requestGPU": p.gpu.count}
    if _amd(p):  # the chart asks for nvidia.com/gpu unless told (templates/_helpers.tpl
        spec["requestGPUType"] = _resource(p)  # chart.resources; vllm-stack 0.1.1 on)
    (key, value), = _node_selector(p).items()
    spec |= {"vllmConfig": config, "nodeSelectorTerms": [{"matchExpressions": [{
        "key": key, "operator": "In", "values": [value]}]}]}
    head = _header(p, "helm-production-stack") + _amd_header(p, note)
    if "tensorParallelSize" in config:
        head += _shm_note(p.gpu.count, PSTACK_SHM)
    else:  # several GPUs by pipeline / data parallelism: the chart mounts nothing of its own
        _shared_memory(p, spec, spec, p.gpu.count, volumes="extraVolumes",
                       mounts="extraVolumeMounts")
    serving: dict[str, Any] = {"modelSpec": [spec]}
    if _amd(p):  # the chart's default runtimeClassName is "nvidia" (values.yaml
        serving["runtimeClassName"] = ""  # servingEngineSpec; its AMD tutorial clears it:
        # tutorials/assets/values-01-minimal-amd-example.yaml)
    return head + _yaml({"servingEngineSpec": serving})


# The vllm-stack chart mounts an in-memory `shm` emptyDir at /dev/shm (sizeLimit: the model's
# shmSize, "20Gi" by default) in a model's pod whenever its vllmConfig sets tensorParallelSize
# (helm/templates/deployment-vllm-multi.yaml); another volume at /dev/shm would clash with it.
# Without tensorParallelSize the file declares one in the model's extraVolumes /
# extraVolumeMounts, as the k8s format does.
PSTACK_SHM = ("the production-stack chart mounts an in-memory one when "
              "vllmConfig.tensorParallelSize is set (shmSize sizes it, 20Gi by default), so this "
              "file declares none.")


def ray(p: Plan) -> str:
    _need_stack_engine(p, "ray")
    kwargs: dict[str, Any] = {}
    for name, value in _pairs(_flags(p)):
        key = name.removeprefix("--").replace("-", "_")
        if value is None:
            if key.startswith("no_"):
                kwargs[key[3:]] = False
            else:
                kwargs[key] = True
        else:
            kwargs[key] = _typed(value)
    reverse = tuple(k for k, v in RAY_GPUS.items() if v == p.gpu.id)
    accelerator: dict[str, Any] = {"accelerator_type": _gpu_label(p, reverse, short=True)}
    notes: list[str | None] = []
    if _amd(p):  # Ray names an AMD GPU by its PCI device id, or not at all (RAY_AMD)
        accelerator = {"accelerator_type": RAY_AMD[p.gpu.id]} if p.gpu.id in RAY_AMD else {}
        image, note = _rocm_image(p, "ray")
        notes = [f"The Ray cluster's image runs the engine: a ROCm build ({image}).", note]
        if not accelerator:
            notes.append(f"Ray detects no accelerator type for the {p.gpu.id}: the file "
                         "names none.")
    group: dict[str, Any] = {"bundles": [{"GPU": 1}] * p.gpu.count}
    if _multinode(p):  # PACK fills a node, then spills to others (https://docs.ray.io/en/
        # latest/serve/llm/user-guides/cross-node-parallelism.html)
        group["strategy"] = "PACK"
    config = {"model_loading_config": {"model_id": p.model.id, "model_source": p.model.id},
              **accelerator, "engine_kwargs": kwargs,
              "placement_group_config": group, "deployment_config": {"num_replicas": 1}}
    doc = {"applications": [{"name": "llm_app", "route_prefix": "/",
                             "import_path": "ray.serve.llm:build_openai_app",
                             "args": {"llm_configs": [config]}}]}
    per_node = p.gpu.count // ((p.nodes.nodes or 1) if _multinode(p) and p.nodes else 1)
    # the Ray cluster's nodes are not the app's to say: the directive keeps the plan's count
    # for `kvplan check` (else a system with more GPUs a node reads the app as one node)
    spans = f"# kvplan: nodes={p.nodes.nodes}\n" if _multinode(p) and p.nodes else ""
    return (_header(p, "ray") + spans + _amd_header(p, *notes, label=False)
            + _shm_note(per_node, RAY_SHM) + _yaml(doc))


# A Ray Serve config describes no pod: the Ray cluster's do. KubeRay mounts an in-memory
# emptyDir `shared-mem` at /dev/shm in every Ray container it starts, sized to the container's
# memory limit when it has one (ray-project/kuberay ray-operator/controllers/ray/common/pod.go:
# SharedMemoryVolumeName, addEmptyDir with StorageMediumMemory); a Ray node on a VM uses the
# host's.
RAY_SHM = ("this file describes no pod: KubeRay mounts an in-memory one in every Ray container "
           "(sized to its memory limit), and a Ray node on a VM uses the host's.")


def skypilot(p: Plan) -> str:
    reverse = tuple(k for k, v in SKY_GPUS.items() if v == p.gpu.id)
    gpu = _gpu_label(p, reverse, short=True)
    port = _port(p, "skypilot", in_image=False)  # `run` starts the server on the node
    image: dict[str, str] = {}
    head = _header(p, "skypilot")
    if _amd(p):
        gpu = SKY_AMD.get(p.gpu.id, p.gpu.id.split("-")[0].upper())
        rocm, note = _rocm_image(p, "skypilot")
        image = {"image_id": f"docker:{rocm}"}  # `run` needs the engine's ROCm build
        head += _amd_header(p, SKY_AMD_NOTE, note, label=False)
    if _multinode(p):  # a task over nodes (`sky launch`); SkyServe replicas are one node each
        assert p.nodes is not None
        nodes = p.nodes.nodes or 1
        multi = {"num_nodes": nodes,
                 "resources": {"accelerators": f"{gpu}:{p.gpu.count // nodes}", **image,
                               "ports": port},
                 "run": _skypilot_run(p)}
        return head + _shm_note(p.gpu.count // nodes, SKY_SHM) + _yaml(multi)
    doc = {"resources": {"accelerators": f"{gpu}:{p.gpu.count}", **image, "ports": port},
           "service": {"readiness_probe": "/v1/models", "replicas": 1},
           "run": _reachable(p, p.command)}
    return head + _shm_note(p.gpu.count, SKY_SHM) + _yaml(doc)


# SkyPilot schedules AMD GPUs on Kubernetes by the amd.com/gpu resource and names them by a node
# label the cluster's admin sets, skypilot.co/accelerator: its AMD guide labels MI300X nodes
# `mi300` and asks for `MI300:1` with a ROCm image as image_id (docs/source/reference/kubernetes/
# amd-gpu.rst, examples/amd/amd_smoke_test.yaml)
SKY_AMD = {"mi300x": "MI300"}
SKY_AMD_NOTE = ("SkyPilot names AMD GPUs by their nodes' skypilot.co/accelerator label, which "
                "the cluster's admin sets (its AMD guide: mi300 for MI300X): set accelerators to "
                "your cluster's.")


# A SkyPilot task describes no pod: on Kubernetes SkyPilot's own pod mounts an in-memory
# emptyDir `dshm` at /dev/shm (sky/templates/kubernetes-ray.yml.j2), and on a cloud VM the run
# script uses the host's.
SKY_SHM = ("this file describes no pod: SkyPilot's Kubernetes pods mount an in-memory one, "
           "and a VM has the host's.")


WRITERS = {"k8s": k8s, "compose": compose, "dynamo": dynamo, "kserve": kserve,
           "helm-llmd": helm_llmd, "helm-production-stack": helm_production_stack, "ray": ray,
           "skypilot": skypilot}


def emit(p: Plan, fmt: str) -> str:
    """The deployment file for `p` in format `fmt` (FORMATS)."""
    writer = WRITERS.get(fmt)
    if writer is None:
        raise InvalidInputError(f"unknown --emit format {fmt!r}",
                                hint="use one of " + ", ".join(FORMATS))
    if isinstance(p, WhatIfPlan):  # its launch line serves a checkpoint nobody has written yet
        raise InvalidInputError(
            f"--emit writes a deployment that starts, and this plan is a what-if: the "
            f"{p.what_if.quantization} checkpoint {p.what_if.quantizer} would write from "
            f"{p.model.id}, which does not exist yet (the launch line serves "
            f"{p.what_if.checkpoint}, a local path no container or node of the deployment "
            "has)",
            code="emit-what-if", knob="quantization",
            hint=f"quantize first (the line above the plan's launch line), publish the "
            f"checkpoint as a Hub repo or a path the servers can read, then plan and emit that: "
            f"`kvplan plan REPO-OR-PATH … --emit {fmt}`")
    vendor = _vendor(p)
    if vendor not in GPU_RESOURCES:  # each format's GPU request, label and image are vendor's
        raise InvalidInputError(
            f"--emit writes deployments for NVIDIA and AMD GPUs; the {p.gpu.id} is {vendor}'s, "
            "whose device plugin, node labels and engine images kvplan does not know",
            code="emit-unsupported", knob="emit",
            hint="run the plan's launch line with the engine's build for that GPU")
    asked = p.inputs["tensor_parallel_size"].value
    served = p.recommendations.tensor_parallel_size.value
    if served is None or served != asked:  # the serve line runs another layout, or none fits
        # the plan's own reason where it has one (TGI's shards beyond a node: not the memory)
        why = next((x.message for x in p.problems if x.severity == "error"), None)
        raise InvalidInputError(
            "--emit writes the deployment the plan describes, and this one does not start: "
            + (why if why and not served else
               f"the weights and KV cache do not fit at tensor_parallel_size {asked}")
            + (f" (the serve line moves to {served})" if served else ""),
            code="emit-does-not-fit", knob="emit",
            hint=(f"plan it at -tp {served} and emit that" if served else
                  "emit a layout that fits (see the plan's next steps)"))
    if _multinode(p) and fmt not in MULTINODE_FORMATS:
        assert p.nodes is not None
        can = multinode_formats(p)
        raise InvalidInputError(
            f"--emit {fmt} describes one node, and the plan spans {p.nodes.nodes} nodes of "
            f"{p.nodes.gpus_per_node} GPUs", code="emit-multinode", knob="nodes",
            hint="emit " + ", ".join(f"{f} ({MULTINODE_FORMATS[f]})" for f in can)
            + ", run the per-node launch lines the plan prints (`nodes.launch` in --json), "
            "or plan a layout within one node")
    return writer(p)
