"""Serving deployments described as resources rather than command lines (issue #23).

`kvplan check` reads these kinds as what they are — pools of model servers with replicas, GPU
limits and parallelism — and turns each pool into the serving command its operator or chart
would run, so the ordinary check plans it. What each reader follows (the schema or example read):

- Dynamo DynamoGraphDeployment, `nvidia.com/v1alpha1` (`spec.services.<name>`: componentType,
  subComponentType, replicas, resources.limits.gpu, multinode.nodeCount, extraPodSpec.mainContainer)
  and `nvidia.com/v1beta1` (`spec.components[]`: name, type, replicas, podTemplate.spec.containers):
  ai-dynamo/dynamo examples/backends/vllm/deploy/{agg,disagg,disagg-multinode}.yaml and
  v1beta1/agg.yaml (commits 0044eb90, 04521f47). Workers run
  `python3 -m dynamo.{vllm,sglang,trtllm}` with the engine's own flags plus Dynamo's (DYNAMO_FLAGS,
  dropped before planning).
- KServe LLMInferenceService `serving.kserve.io/v1alpha1` (spec.model.uri/name, replicas,
  parallelism{tensor,pipeline,data,dataLocal}, template / prefill.template containers `main`, env
  VLLM_ADDITIONAL_ARGS): kserve/kserve docs/samples/llmisvc/single-node-gpu/
  llm-inference-service-pd-qwen2-7b-gpu.yaml (0ed19cdb); the server runs `vllm serve` on the model.
  InferenceService `serving.kserve.io/v1beta1` with predictor.model.modelFormat huggingface (the
  Hugging Face server passes vLLM's flags through; --model_id / storageUri name the model).
- llm-d modelservice Helm values (modelArtifacts.uri/name, decode / prefill: create, replicas,
  parallelism{tensor,data,dataLocal}, containers[].modelCommand vllmServe|imageDefault|custom,
  nodeSelector, acceleratorTypes): llm-d/llm-d guides/pd-disaggregation/ms-pd/values.yaml
  (0b8cde64). GPUs per pod = tensor × dataLocal ("GPU resources get controlled by parallelism").
  `multinode: true`: a LeaderWorkerSet of parallelism.workers (else data / dataLocal) pods from
  one template (llm-d-incubation/llm-d-modelservice charts/llm-d-modelservice/templates/
  decode-lws.yaml and _helpers.tpl numWorkers, chart v0.4.12).
- LeaderWorkerSet `leaderworkerset.x-k8s.io/v1` (llm-d wide-EP): leaderWorkerTemplate.size pods
  per group, LWS_GROUP_SIZE / env / `$(( … ))` arithmetic resolved in the worker's script:
  llm-d/llm-d guides/wide-ep-lws/manifests/modelserver/base/decode.yaml (03da3b00).
- vLLM production-stack Helm values (servingEngineSpec.modelSpec[]: modelURL, replicaCount,
  requestGPU, repository/tag, vllmConfig{maxModelLen, dtype, tensorParallelSize, maxNumSeqs,
  gpuMemoryUtilization, enablePrefixCaching, enableChunkedPrefill, maxLoras, extraArgs},
  nodeSelectorTerms): the chart's helm/templates/deployment-vllm-multi.yaml (f1f98227) and
  tutorials/assets/values-04-multiple-models.yaml (52523f5c).
- Ray Serve LLM config (applications[].args.llm_configs[] / prefill_config / decode_config, or a
  standalone LLMConfig file: model_loading_config, engine_kwargs, accelerator_type,
  placement_group_config.bundles, deployment_config): ray-project/ray doc/source/serve/llm
  docs and doc_code/pd_dissagregation/nixl_example.yaml (a56d416b).
- SkyPilot task YAML (resources.accelerators as "L4:1", a set/dict of candidates or a list,
  num_nodes, envs, run): skypilot-org/skypilot llm/vllm/{vllm.sky.yaml,serve-openai-api.yaml}
  (246e12cc, 00168734); SKYPILOT_NUM_GPUS_PER_NODE / SKYPILOT_NUM_NODES are filled in.
- NVIDIA NIM: NIMService `apps.nvidia.com/v1alpha1` (spec.image.repository, env, resources,
  replicas) with NIM_MAX_MODEL_LEN, NIM_TENSOR_PARALLEL_SIZE, NIM_PIPELINE_PARALLEL_SIZE,
  NIM_MAX_NUM_SEQS (NIM LLM docs, "Environment variables"): planned as its vLLM backend.

Every pool of a disaggregated file is one row (deploy/pd_check.py reads its P/D settings,
deploy/pd_pair.py checks the halves against each other). A pool over several nodes (Dynamo
multinode.nodeCount, a LeaderWorkerSet's size, SkyPilot num_nodes) is planned on that many nodes.
Unknown fields are ignored; a value left as an unrendered Helm template makes its row
`unchecked`, with the reason.

Pure parsing: nothing here plans, prints or touches the network.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engines import registry
from ..errors import InvalidConfigError
from ..sources.limits import MAX_DEPLOY_BYTES, MAX_YAML_NODES, read_text_limited
from ..versions import is_release, normalize_version
from .commands import (
    DeployParseError,
    Found,
    Templates,
    _apply_directive,
    _directives,
    _env_argv,
    _failed,
    _get,
    _line,
    _scalar,
    _strings,
    _version_from_image,
    _walk,
    _yaml_nodes,
    heredocs,
    k8s_expand,
    keep_env,
    parse_args,
    shell_commands,
)
from .shell_vars import expand


@dataclass
class ManifestFound(Found):
    """A serving command a manifest describes: the pool it belongs to, and why it could not be
    checked (an unrendered template) when it could not."""

    pool: str | None = None
    replicas: int | None = None
    unchecked: str | None = None
    dynamo_worker: bool = False  # run by Dynamo's backend module (its defaults apply)
    image: str | None = None  # the container's (compose service's) image: check names it when
    # its tag gives no release it can read


# Dynamo's worker flags that are not the engine's (dynamo components/backends/*/args.py, 0.6+):
# name → takes a value.
DYNAMO_FLAGS = {
    "--is-prefill-worker": False, "--is-decode-worker": False, "--enable-local-indexer": False,
    "--disaggregation-mode": True, "--disaggregation-strategy": True, "--endpoint": True,
    "--migration-limit": True, "--connector": True, "--dyn-tool-call-parser": True,
    "--dyn-reasoning-parser": True, "--custom-jinja-template": True, "--store-kv": True,
    "--request-plane": True, "--event-plane": True, "--extra-engine-args": True,
}
# NIM LLM environment variables → the vLLM flags they set (NIM LLM docs, configuration).
NIM_ENV = {"NIM_MAX_MODEL_LEN": "--max-model-len", "NIM_TENSOR_PARALLEL_SIZE":
           "--tensor-parallel-size", "NIM_PIPELINE_PARALLEL_SIZE": "--pipeline-parallel-size",
           "NIM_MAX_NUM_SEQS": "--max-num-seqs", "NIM_MODEL_NAME": "--model"}
# production-stack vllmConfig key → vLLM flag (deployment-vllm-multi.yaml, f1f98227)
PSTACK_FLAGS = {"maxModelLen": "--max-model-len", "dtype": "--dtype",
                "tensorParallelSize": "--tensor-parallel-size", "maxNumSeqs": "--max-num-seqs",
                "gpuMemoryUtilization": "--gpu-memory-utilization", "maxLoras": "--max-loras"}
# GPU model node labels: NVIDIA GPU feature discovery, GKE, llm-d guides' own label, and AMD's
# node labeller (ROCm/k8s-device-plugin cmd/k8s-node-labeller/main.go, commit ed764684:
# `createLabelPrefix` writes amd.com/gpu.<name> and the legacy beta.amd.com/gpu.<name>;
# "product-name" is the card's sysfs product_name with spaces as "_" and "(", ")" dropped, e.g.
# amd.com/gpu.product-name=AMD_Instinct_MI300X_OAM in docs/user-guide/installation.md)
AMD_PRODUCT_LABELS = ("amd.com/gpu.product-name", "beta.amd.com/gpu.product-name")
# ... and "device-id", the PCI device id in lower-case hex without 0x (main.go, the same labels);
# the values that name catalogued GPUs are GpuSpec.k8s_node_labels (gpu_specs/, with sources),
# the table --emit selects AMD nodes by
AMD_DEVICE_LABELS = ("amd.com/gpu.device-id", "beta.amd.com/gpu.device-id")
AMD_LABELS = (*AMD_PRODUCT_LABELS, *AMD_DEVICE_LABELS)
GPU_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator",
              "gpu.nvidia.com/model", *AMD_LABELS)
# Extended resources a container's GPUs are limited by: NVIDIA's device plugin and AMD's
# (ROCm/k8s-device-plugin internal/pkg/plugin/plugin.go GetResourceNamespace "amd.com" with the
# resource "gpu", cmd/k8s-device-plugin/main.go; ed764684)
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
# Ray accelerator_type names that are not catalogue aliases (ray/util/accelerators/accelerators.py)
RAY_GPUS = {"A100-40G": "a100-sxm-40gb", "A100-80G": "a100-sxm-80gb", "H100": "h100-sxm-80gb",
            "H200": "h200-sxm-141gb"}
# SkyPilot accelerator names that are not catalogue aliases (SkyPilot's GPU catalogue: "A100" is
# the 40 GB part, "A100-80GB" the 80 GB one; `sky show-gpus`)
SKY_GPUS = {"A100": "a100-sxm-40gb", "A100-80GB": "a100-sxm-80gb"}


def stack_engine(stack: str) -> str:
    """The engine a deployment stack runs as its model server (engines/base.STACKS): the first
    registered engine that names the stack in its DeploySyntax.stacks."""
    for name, engine in registry.ENGINES.items():
        if stack in engine.syntax.stacks:
            return name
    raise ValueError(f"no registered engine runs the {stack!r} stack")


def dynamo_modules() -> dict[str, str]:
    """`python -m MODULE` → engine name, for Dynamo's backends (each runs its engine in-process:
    DeploySyntax.dynamo_module); the first registered engine declaring a module has it."""
    out: dict[str, str] = {}
    for name, engine in registry.ENGINES.items():
        if engine.syntax.dynamo_module:
            out.setdefault(engine.syntax.dynamo_module, name)
    return out


def launch_text(engine: str) -> str:
    """How the engine's own launch line starts (its first declared executable): `vllm serve`."""
    exe, sub = registry.get(engine).syntax.executables[0]
    return f"{exe} {sub}" if sub else exe


@dataclass
class _Ctx:
    file: str
    templates: Templates
    budget: list[int] = field(default_factory=lambda: [MAX_YAML_NODES])
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)  # in the same file
    all_docs: list[Any] = field(default_factory=list)


# ---------------------------------------------------------------- node helpers


def _map(node: Any) -> list[tuple[str, Any]]:
    if getattr(node, "id", None) != "mapping":
        return []
    return [(str(k.value), v) for k, v in node.value if _scalar(k) is not None]


def _seq(node: Any) -> list[Any]:
    return list(node.value) if getattr(node, "id", None) == "sequence" else []


def _path(node: Any, *keys: str) -> Any:
    for key in keys:
        node = _get(node, key)
    return node


def _int(node: Any) -> int | None:
    text = _scalar(node)
    return int(text) if text is not None and re.fullmatch(r"[0-9]{1,6}", text.strip()) else None


def _env(container: Any, ctx: _Ctx | None = None) -> dict[str, str]:
    """A container's environment: literal `env` values, and those a ConfigMap in the same file
    provides (`valueFrom.configMapKeyRef`, `envFrom[].configMapRef`); secrets and field
    references are skipped."""
    maps = ctx.configmaps if ctx is not None else {}
    out: dict[str, str] = {}
    for item in _seq(_get(container, "envFrom")):
        data = maps.get(_scalar(_path(item, "configMapRef", "name")) or "", {})
        prefix = _scalar(_get(item, "prefix")) or ""
        out.update({prefix + k: v for k, v in data.items()})
    for item in _seq(_get(container, "env")):
        name, value = _scalar(_get(item, "name")), _scalar(_get(item, "value"))
        ref = _path(item, "valueFrom", "configMapKeyRef")
        if name and value is None and ref is not None:
            value = maps.get(_scalar(_get(ref, "name")) or "", {}).get(
                _scalar(_get(ref, "key")) or "")
        if name and value is not None:
            out[name] = k8s_expand(value, out)  # references to the ones before, as Kubernetes
    return out


def _gpu_count(container: Any) -> int | None:
    """The GPUs a container's limits give it: `nvidia.com/gpu`, else `amd.com/gpu`."""
    limits = _path(container, "resources", "limits")
    for key in GPU_RESOURCES:
        count = _int(_get(limits, key))
        if count is not None:
            return count
    return None


def _gpu_label(spec: Any, ctx: _Ctx) -> tuple[str | None, str | None]:
    """The GPU a pod spec selects: a GPU-model label in nodeSelector or a required node
    affinity (GPU_LABELS; AMD's labeller also writes the value as a key suffix,
    `beta.amd.com/gpu.product-name.AMD_Instinct_MI300X: "1"`)."""
    selector = _get(spec, "nodeSelector")
    for key in GPU_LABELS:
        value = _scalar(_get(selector, key))
        if value:
            return _gpu_name(value, key), f"nodeSelector {key}"
    for key, _ in _map(selector):
        suffix = _amd_suffix(key)
        if suffix:
            return _gpu_name(suffix[1], suffix[0]), f"nodeSelector {key}"
    for n in _walk(_get(spec, "affinity"), ctx.budget):
        label = _scalar(_get(n, "key"))
        if label in GPU_LABELS:
            values = _strings(_get(n, "values"))
            if values:
                return _gpu_name(values[0][0], label), f"node affinity {label}"
        suffix = _amd_suffix(label or "")
        if suffix:
            return _gpu_name(suffix[1], suffix[0]), f"node affinity {label}"
    return None, None


def _amd_suffix(key: str) -> tuple[str, str] | None:
    """The label and value an AMD count label names (`amd.com/gpu.product-name.AMD_Instinct_
    MI300X`, `amd.com/gpu.device-id.75a3`: the labeller's form for a node of several products,
    and beta.amd.com's always)."""
    for label in AMD_LABELS:
        if key.startswith(label + ".") and len(key) > len(label) + 1:
            return label, key[len(label) + 1:]
    return None


def _labelled_gpu(key: str, value: str) -> str | None:
    """The catalogue GPU whose nodes carry the label (GpuSpec.k8s_node_labels; beta.amd.com's
    copy as amd.com's, a device id in any case and with or without 0x), else None."""
    from ..sources.catalog import gpu_specs

    def norm(k: str, v: str) -> tuple[str, str]:
        v = v.strip().lower()
        return k.removeprefix("beta."), v.removeprefix("0x") if k.endswith(".device-id") else v

    want = norm(key, value)
    for g in gpu_specs():
        if any(norm(lbl.key, lbl.value) == want for lbl in g.k8s_node_labels):
            return g.id
    return None


def _amd_gpu(product: str) -> str:
    """AMD's product-name label as a catalogue id: AMD_Instinct_MI300X, AMD_Instinct_MI300X_OAM
    and Instinct_MI300X (the labeller's test fixture) are mi300x. The words the catalogue's ids
    leave out (the vendor, the Instinct brand, the OAM form factor) are dropped; a product the
    catalogue does not know keeps the label's value, so the error names what the file says."""
    from ..errors import KvplanError
    from ..sources.catalog import resolve_gpu

    words = [w for w in re.split(r"[_\s]+", product.strip()) if w]
    while words and words[0].lower() in {"amd", "instinct"}:
        words.pop(0)
    if words and words[-1].lower() == "oam":
        words.pop()
    try:
        return resolve_gpu("-".join(words)).id if words else product
    except KvplanError:
        return product


def _gpu_name(label: str, key: str | None = None) -> str:
    """A node label value as a GPU name kvplan resolves: GKE writes nvidia-h100-80gb,
    nvidia-tesla-t4; NVIDIA's discovery writes NVIDIA-H100-80GB-HBM3 (resolved as is); AMD's
    labeller writes AMD_Instinct_MI300X (_amd_gpu) or a device id, 75a3 (_labelled_gpu)."""
    if key in AMD_LABELS:
        known = _labelled_gpu(key, label)
        if known is not None:
            return known
        if key in AMD_DEVICE_LABELS:  # no catalogue GPU has it: the error names the label
            return f"AMD device id {label}"
    if key in AMD_PRODUCT_LABELS:
        return _amd_gpu(label)
    low = label.lower()
    if low.startswith("nvidia-") and not label.startswith("NVIDIA-"):
        low = low.removeprefix("nvidia-").removeprefix("tesla-")
        return low
    return label


def _underscored(argv: list[str]) -> list[str]:
    """vLLM takes `--max_model_len` as `--max-model-len` (its argument parser normalises
    underscores): flag names normalised, values kept."""
    out = []
    for tok in argv:
        if tok.startswith("--"):
            name, eq, value = tok.partition("=")
            tok = name.replace("_", "-") + eq + value
        out.append(tok)
    return out


def _flexible_flags(script: str) -> str:
    """A script running an engine whose parser takes `--flag_name` for `--flag-name`
    (DeploySyntax.underscore_flags) with its flags spelled `--flag-name`."""
    names = {exe for e in registry.ENGINES.values() if e.syntax.underscore_flags
             for exe, _ in e.syntax.executables}
    if not any(re.search(rf"\b{re.escape(n)}\b", script) for n in names):
        return script
    return re.sub(r"(?<![\w-])--[A-Za-z0-9][A-Za-z0-9_-]*",
                  lambda m: m.group(0).replace("_", "-"), script)


def _drop_flags(argv: list[str], flags: dict[str, bool]) -> tuple[list[str], list[str]]:
    """argv without `flags` (name → takes values), and what was dropped."""
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(argv):
        name = argv[i].partition("=")[0]
        if name in flags:
            dropped.append(argv[i])
            i += 1
            if flags[name] and "=" not in argv[i - 1]:
                while i < len(argv) and not argv[i].startswith("-"):
                    dropped.append(argv[i])
                    i += 1
            continue
        kept.append(argv[i])
        i += 1
    return kept, dropped


def _split(text: str, ctx: _Ctx, line: int) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:
        raise DeployParseError(ctx.file, line, f"cannot split {text[:40]!r} ({e})",
                               hint="check the quotes") from None


# `if [ "A" = "B" ]; then … else … fi` (or ==, !=) on two words with nothing left to expand
LITERAL_IF = re.compile(
    r'^[ \t]*if \[ "?([^"\s$`]*)"? (==|=|!=) "?([^"\s$`]*)"? \];? *(?:then)?[ \t]*\n'
    r'(.*?)(?:^[ \t]*else[ \t]*\n(.*?))?^[ \t]*fi\b', re.M | re.S)


IF_TEST = re.compile(r"[ \t]*if \[ ")


def literal_branches(script: str, variables: Mapping[str, str] | None = None) -> str:
    """A script with each `if [ "A" = "B" ]` test on literal words (once the test line's
    variables are filled in from `variables`: a multi-node task's
    `[ "$SKYPILOT_NODE_RANK" = "0" ]` on rank 0) replaced by the branch it takes; the other
    branch's lines are kept as blank lines (line numbers stay). Only the test lines are expanded
    here: the kept lines stay as written, for the shell reader to expand once."""
    lines = script.split("\n")
    tests = {}
    for k, text in enumerate(lines):
        if variables and "$" in text and IF_TEST.match(text):
            filled = expand(text, variables)
            if "\n" not in filled:
                tests[k], lines[k] = text, filled
    if not tests:
        return _literal_branches("\n".join(lines))
    out = _literal_branches("\n".join(lines)).split("\n")
    # a test line no branch replaced goes back as written
    return "\n".join(tests[k] if k in tests and text == lines[k] else text
                     for k, text in enumerate(out))


def _literal_branches(script: str) -> str:
    def taken(m: re.Match[str]) -> str:
        branch = 4 if (m.group(1) == m.group(3)) == (m.group(2) != "!=") else 5
        lines = m.group(0).split("\n")
        if m.group(branch) is None:
            return "\n" * (len(lines) - 1)
        # the kept branch's lines, in place; every other line of the block blank
        before = m.string[m.start():m.start(branch)].count("\n")
        kept = m.group(branch).split("\n")[:-1]  # the branch ends with its newline
        return "\n".join(kept[i - before] if before <= i < before + len(kept) else ""
                         for i in range(len(lines)))
    return LITERAL_IF.sub(taken, script)


# ------------------------------------------------------------------ building rows


def _row(engine: str, argv: list[str], *, ctx: _Ctx, line: int, text: str, pool: str | None,
         replicas: int | None = None, gpu: tuple[str | None, str | None] = (None, None),
         gpu_count: int | None = None, notes: list[str] | None = None) -> Found:
    """One pool's serving command, parsed by its engine's flag table."""
    try:
        f = parse_args(argv, engine, file=ctx.file, line=line, templates=ctx.templates, text=text)
    except DeployParseError as e:
        if "unexpanded template" in e.detail:
            return ManifestFound(file=ctx.file, line=e.line, engine=engine, text=text, pool=pool,
                                 unchecked=e.detail + (f" ({e.hint})" if e.hint else ""))
        return _failed(e, ctx.file, engine, text)
    return _with_pool(f, pool, replicas, gpu, gpu_count, notes)


def _with_pool(f: Found, pool: str | None, replicas: int | None,
               gpu: tuple[str | None, str | None], gpu_count: int | None,
               notes: list[str] | None) -> ManifestFound:
    """A parsed command as a manifest row: its pool, replicas, the GPU the manifest names and
    its GPU limit, and a note saying each replica is checked as one server."""
    out = ManifestFound(**{k: getattr(f, k) for k in Found.__dataclass_fields__},
                        pool=pool, replicas=replicas)
    if gpu[0]:
        out.gpu, out.gpu_source = gpu
    if gpu_count is not None:
        out.gpu_count = gpu_count
    if pool:
        out.notes.append(pool + (f", {replicas} replica(s)" if replicas is not None else "")
                         + " — each replica checked as one server")
    out.notes += notes or []
    return out


def _container_row(container: Any, ctx: _Ctx, **kw: Any) -> Found | None:
    """A container's command + args (a `sh -c` script with its variables filled in, a
    `python -m dynamo.X` worker, or an engine entrypoint); `default_argv` for `default_engine`
    (the image's own server) when it names none. The row carries the container's image."""
    f = _container_command(container, ctx, **kw)
    if isinstance(f, ManifestFound):
        f.image = _scalar(_get(container, "image")) or None
    return f


def _container_command(container: Any, ctx: _Ctx, *, pool: str, replicas: int | None,
                       gpu: tuple[str | None, str | None], gpu_count: int | None,
                       env: dict[str, str] | None = None, default_argv: list[str] | None = None,
                       default_engine: str | None = None,
                       notes: list[str] | None = None,
                       files: dict[str, str] | None = None) -> Found | None:
    """_container_row's command."""
    parts = _strings(_get(container, "command")) + _strings(_get(container, "args"))
    tokens = [t for t, _ in parts]
    line = _line(container)
    first = _strings(_get(container, "command")) or _strings(_get(container, "args"))
    if first:
        line = first[0][1]
    env = {**_env(container, ctx), **(env or {})}
    if len(tokens) >= 3 and tokens[0].rsplit("/", 1)[-1] in {"sh", "bash"} and tokens[1] in {
            "-c", "-lc", "-ec"}:
        script = _flexible_flags(k8s_expand(tokens[2], env))  # Kubernetes', before the shell
        dynamo = expand(script, env)  # the shell's, once (Kubernetes' is done above)
        for mod, engine in dynamo_modules().items():
            dynamo = dynamo.replace(f"-m {mod}", f"-m kvplan-dynamo-{engine}")
        rest, inline = heredocs(dynamo)  # an options file the worker's flags name
        words = _split(rest, ctx, line) if "kvplan-dynamo-" in rest else []
        if words:
            return _with_env(_dynamo_row(words, ctx, line=line, pool=pool, replicas=replicas,
                                         gpu=gpu, gpu_count=gpu_count, notes=notes,
                                         files={**(files or {}), **inline}), env)
        found = shell_commands(script, file=ctx.file, first_line=line, templates=ctx.templates,
                               env=env)
        return _with_env(_adopt(found[0], pool, replicas, gpu, gpu_count, notes), env) \
            if found else None
    modules = dynamo_modules()
    for k, tok in enumerate(tokens):
        if tok == "-m" and k + 1 < len(tokens) and tokens[k + 1] in modules:
            words = tokens[:k + 1] + [f"kvplan-dynamo-{modules[tokens[k + 1]]}"] \
                + [k8s_expand(t, env) for t in tokens[k + 2:]]  # no shell: Kubernetes' only
            return _with_env(_dynamo_row(words, ctx, line=line, pool=pool, replicas=replicas,
                                         gpu=gpu, gpu_count=gpu_count, notes=notes,
                                         files=files), env)
    if tokens:
        script = _flexible_flags(" ".join(shlex.quote(k8s_expand(t, env)) for t in tokens))
        found = shell_commands(script, file=ctx.file, first_line=line, templates=ctx.templates)
        if found:
            return _with_env(_adopt(found[0], pool, replicas, gpu, gpu_count, notes), env)
    if default_argv is None or default_engine is None:
        return None
    argv = default_argv + _underscored([k8s_expand(t, env) for t in tokens])
    # the variable's value (its `$(NAME)` references already filled in by _env): whoever reads
    # it, a shell's `$VLLM_ADDITIONAL_ARGS` or the server, does not expand the `$` in it again
    extra = env.get("VLLM_ADDITIONAL_ARGS")
    if extra:
        argv += _underscored(_split(extra, ctx, line))
    # the flags the image's server reads from its environment (TGI's launcher: MODEL_ID,
    # MAX_TOTAL_TOKENS, …; syntax.env_flags), for those the arguments do not give, as the
    # generic reader takes them for a container without ConfigMaps
    argv += _env_argv(default_engine, argv, env)
    shown = f"{launch_text(default_engine)} " + " ".join(shlex.quote(a) for a in argv)
    return _with_env(_row(default_engine, argv, ctx=ctx, line=line, text=shown, pool=pool,
                          replicas=replicas, gpu=gpu, gpu_count=gpu_count, notes=notes), env)


def _with_env(f: Found | None, env: dict[str, str]) -> Found | None:
    """`f` with the container's variables its engine reads in some releases (commands.keep_env:
    deploy/env_flags.py applies them once the release is known)."""
    keep_env(f, env)
    return f


def _adopt(f: Found, pool: str, replicas: int | None, gpu: tuple[str | None, str | None],
           gpu_count: int | None, notes: list[str] | None) -> Found:
    """A command the shell reader found, with what the manifest says about its pool."""
    return f if f.error is not None else _with_pool(f, pool, replicas, gpu, gpu_count, notes)


def _dynamo_row(words: list[str], ctx: _Ctx, *, line: int, pool: str, replicas: int | None,
                gpu: tuple[str | None, str | None], gpu_count: int | None,
                notes: list[str] | None, files: dict[str, str] | None = None) -> Found | None:
    """`python3 -m dynamo.vllm ARGS` (after `-m`, the module was swapped for a marker): the
    engine's flags without Dynamo's own; the engine settings file `--extra-engine-args` names,
    when `files` (path → text: ConfigMap files the container mounts) holds it."""
    k = next(i for i, w in enumerate(words) if w.startswith("kvplan-dynamo-"))
    engine = words[k].removeprefix("kvplan-dynamo-")
    argv = words[k + 1:]
    for stop in ("&&", "||", ";", "|", "2>&1"):
        if stop in argv:
            argv = argv[:argv.index(stop)]
    if engine not in registry.ENGINES:
        return None
    syntax = registry.get(engine).syntax
    argv, dropped = _drop_flags(argv, {**DYNAMO_FLAGS, **syntax.dynamo_own_flags})
    argv = [_renamed(tok, syntax.dynamo_flags) for tok in argv]
    module = next(m for m, e in dynamo_modules().items() if e == engine)
    text = f"python3 -m {module} " + " ".join(shlex.quote(a) for a in argv)
    extra = [f"Dynamo's own flags (not the engine's): {' '.join(dropped)}"] if dropped else []
    f = _row(engine, argv, ctx=ctx, line=line, text=text, pool=pool, replicas=replicas,
             gpu=gpu, gpu_count=gpu_count, notes=extra + (notes or []))
    if f.error is None:
        _engine_args_file(f, dropped, files or {}, line)
        if isinstance(f, ManifestFound):
            f.dynamo_worker = True  # check plans it with DeploySyntax.dynamo_defaults
    return f


def _renamed(tok: str, names: Mapping[str, str]) -> str:
    """`--flag` / `--flag=value` under its name in `names` (Dynamo's spelling → the engine's)."""
    name, eq, value = tok.partition("=")
    return names[name] + eq + value if name in names else tok


def _engine_args_file(f: Found, dropped: list[str], files: dict[str, str], line: int) -> None:
    """Merge the engine settings file a Dynamo worker's `--extra-engine-args PATH` names, when a
    ConfigMap in the same file provides it, read as the engine's own options file (TensorRT-LLM's
    --extra_llm_api_options YAML: dynamo components/src/dynamo/trtllm passes it to the LLM API).
    Its settings win over the flags, as the engine's own options file does."""
    path = None
    for k, tok in enumerate(dropped):
        name, eq, value = tok.partition("=")
        if name == "--extra-engine-args":
            path = value if eq else (dropped[k + 1] if k + 1 < len(dropped) else None)
    engine = registry.get(f.engine)
    if path is None or engine.options_file_flag is None:
        return
    text = files.get(path)
    if text is None:
        f.notes.append(f"engine settings file {path} not in a ConfigMap of this file: not read")
        return
    # the engine's own options file, held by this file: `kvplan check` merges it (and reads its
    # P/D settings) as it does `--extra_llm_api_options FILE`
    f.knobs[engine.syntax.cli_flags[engine.options_file_flag][0]] = path
    f.files[path] = text
    f.notes.append(f"engine settings read from {path} (a ConfigMap of this file)")


def _mounted_configmaps(pod: Any, container: Any, ctx: _Ctx) -> dict[str, str]:
    """File path → text for the ConfigMaps of this file that `container` mounts (a volume's
    `configMap.name`, its `items` key → path, else one file per key under the mountPath)."""
    volumes = {}
    for v in _seq(_get(pod, "volumes")):
        cm = _get(v, "configMap")
        data = ctx.configmaps.get(_scalar(_get(cm, "name")) or "")
        if data is None:
            continue
        items = {_scalar(_get(i, "path")) or "": _scalar(_get(i, "key")) or ""
                 for i in _seq(_get(cm, "items"))}
        volumes[_scalar(_get(v, "name")) or ""] = (
            {p: data[k] for p, k in items.items() if k in data} if items else dict(data))
    out = {}
    for m in _seq(_get(container, "volumeMounts")):
        files = volumes.get(_scalar(_get(m, "name")) or "")
        where = (_scalar(_get(m, "mountPath")) or "").rstrip("/")
        sub = _scalar(_get(m, "subPath"))
        if files is None or not where:
            continue
        if sub:
            if sub in files:
                out[where] = files[sub]
            continue
        out.update({f"{where}/{name}": text for name, text in files.items()})
    return out


# ----------------------------------------------------------------------- readers


def _dynamo(doc: Any, ctx: _Ctx) -> list[Found]:
    """DynamoGraphDeployment v1alpha1 (spec.services) or v1beta1 (spec.components)."""
    name = _scalar(_path(doc, "metadata", "name")) or "?"
    out: list[Found] = []
    spec = _get(doc, "spec")
    services = [(n, s, "v1alpha1") for n, s in _map(_get(spec, "services"))]
    services += [(_scalar(_get(c, "name")) or "?", c, "v1beta1")
                 for c in _seq(_get(spec, "components"))]
    for svc_name, svc, version in services:
        kind = _scalar(_get(svc, "componentType")) or _scalar(_get(svc, "type")) or ""
        sub = _scalar(_get(svc, "subComponentType")) or ""
        nodes = _int(_path(svc, "multinode", "nodeCount")) or 1
        replicas = _int(_get(svc, "replicas"))
        if version == "v1alpha1":
            pod = _get(svc, "extraPodSpec")
            containers = [_get(pod, "mainContainer")] if _get(pod, "mainContainer") else []
            per_node = _int(_path(svc, "resources", "limits", "gpu"))
        else:
            pod = _path(svc, "podTemplate", "spec")
            containers = _seq(_get(pod, "containers"))
            per_node = None
        gpu = _gpu_label(pod, ctx)
        role = sub or ("prefill" if "prefill" in svc_name.lower() else
                       "decode" if "decode" in svc_name.lower() else kind or "worker")
        for c in containers:
            count = per_node if per_node is not None else _gpu_count(c)
            total = count * nodes if count is not None else None
            notes = [f"multinode: {nodes} nodes × {count} GPU(s)"] if nodes > 1 else []
            try:
                f = _container_row(c, ctx, pool=f"Dynamo {name} {svc_name} ({role} pool)",
                                   replicas=replicas, gpu=gpu, gpu_count=total, notes=notes,
                                   files=_mounted_configmaps(pod, c, ctx))
            except DeployParseError as e:
                f = _failed(e, ctx.file, text=svc_name)
            if f is not None:
                out.append(_on_nodes(f, nodes))
    return out


def _on_nodes(f: Found, nodes: int) -> Found:
    """A row whose file spreads it over `nodes` nodes (Dynamo's multinode.nodeCount, a
    LeaderWorkerSet's size, SkyPilot's num_nodes): planned on that many nodes, unless its own
    launch line says how many (--nnodes, mpirun's hosts)."""
    if nodes > 1 and f.error is None:
        f.knobs.setdefault("nodes", nodes)
    return f


def _hf_model(uri: str | None, name: str | None) -> str | None:
    if uri and uri.startswith("hf://"):
        return uri.removeprefix("hf://")
    return name or uri


def _parallel_argv(par: Any) -> tuple[list[str], int]:
    """Parallelism {tensor, pipeline, data, dataLocal} as flags, and GPUs per pod."""
    tp, pp = _int(_get(par, "tensor")) or 1, _int(_get(par, "pipeline")) or 1
    dp, local = _int(_get(par, "data")), _int(_get(par, "dataLocal"))
    argv = []
    if _get(par, "tensor") is not None:
        argv += ["--tensor-parallel-size", str(tp)]
    if _get(par, "pipeline") is not None:
        argv += ["--pipeline-parallel-size", str(pp)]
    if dp and dp > 1:
        argv += ["--data-parallel-size", str(dp)]
    return argv, tp * pp * (local or dp or 1)


def _llmisvc(doc: Any, ctx: _Ctx) -> list[Found]:
    """KServe LLMInferenceService: the main (decode) pool and, when present, the prefill pool."""
    spec = _get(doc, "spec")
    name = _scalar(_path(doc, "metadata", "name")) or "?"
    model = _hf_model(_scalar(_path(spec, "model", "uri")), _scalar(_path(spec, "model", "name")))
    out: list[Found] = []
    pools = [("main" if _get(spec, "prefill") is None else "decode", spec)]
    if _get(spec, "prefill") is not None:
        pools.append(("prefill", _get(spec, "prefill")))
    for role, section in pools:
        template = _get(section, "template") or _get(spec, "template")
        par = _get(section, "parallelism") or _get(spec, "parallelism")
        flags, per_pod = _parallel_argv(par)
        containers = [c for c in _seq(_get(template, "containers"))
                      if _scalar(_get(c, "name")) in (None, "main")]
        if not containers:
            continue
        # with a `worker`, a LeaderWorkerSet of data / dataLocal pods (else `pipeline`):
        # llm_inference_service_types_func.go GetSize, kserve@aaac4e29
        size = _lws_size(par) if _get(section, "worker") is not None else 1
        count = _gpu_count(containers[0])
        gpus = count * size if count is not None else None
        try:
            f = _container_row(containers[0], ctx, pool=f"KServe {name} ({role} pool)",
                               replicas=_int(_get(section, "replicas")),
                               gpu=_gpu_label(template, ctx), gpu_count=gpus,
                               default_argv=[model or "/mnt/models", *flags],
                               default_engine=stack_engine("kserve"))
        except DeployParseError as e:
            f = _failed(e, ctx.file, text=name)
        if f is not None:
            out.append(_on_nodes(f, size))
    return out


def _lws_size(par: Any) -> int:
    """KServe's pods per group for `spec.parallelism` with a worker: data / dataLocal for a
    data-parallel layout, else the pipeline stages (at least 2: a leader and a worker)."""
    data, local = _int(_get(par, "data")), _int(_get(par, "dataLocal"))
    if data or local:
        return max((data or 1) // max(local or 1, 1), 1)
    return max(_int(_get(par, "pipeline")) or 2, 1)


KSERVE_OWN = {"--model-name": True, "--model-id": True, "--model-dir": True, "--backend": True,
              "--task": True, "--return-probabilities": False, "--disable-lower-case": False,
              "--disable-special-tokens": False, "--return-token-type-ids": False,
              "--tensor-input-names": True, "--max-length": True}


def _isvc(doc: Any, ctx: _Ctx) -> list[Found]:
    """InferenceService with a Hugging Face (vLLM backend) predictor.model."""
    model = _path(doc, "spec", "predictor", "model")
    fmt = _scalar(_path(model, "modelFormat", "name")) or ""
    if model is None or fmt.lower() != "huggingface":
        return []
    argv = _underscored([t for t, _ in _strings(_get(model, "args"))])
    ids = [a.partition("=")[2] for a in argv if a.startswith("--model-id=")]
    if "--model-id" in argv:
        ids.append(argv[argv.index("--model-id") + 1])
    argv, _ = _drop_flags(argv, KSERVE_OWN)
    name = ids[0] if ids else _hf_model(_scalar(_get(model, "storageUri")), None)
    pred = _path(doc, "spec", "predictor")
    line = _line(model)
    engine = stack_engine("kserve")
    text = f"huggingfaceserver ({registry.get(engine).label}) " + " ".join(argv)
    return [_row(engine, [name or "/mnt/models", *argv], ctx=ctx, line=line, text=text,
                 pool=f"KServe InferenceService {_scalar(_path(doc, 'metadata', 'name'))}",
                 replicas=_int(_get(pred, "minReplicas")), gpu=_gpu_label(pred, ctx),
                 gpu_count=_gpu_count(model))]


def _llmd(doc: Any, ctx: _Ctx) -> list[Found]:
    """llm-d modelservice values: decode and prefill sections. With `multinode: true` each
    section is a LeaderWorkerSet of `workers` pods (parallelism.workers, else data / dataLocal:
    templates/_helpers.tpl numWorkers), all from one container template: its script sees
    LWS_WORKER_INDEX (read as the leader's, 0) and the deployment spans the pods' GPUs."""
    art = _get(doc, "modelArtifacts")
    model = _hf_model(_scalar(_get(art, "uri")), _scalar(_get(art, "name")))
    multinode = (_scalar(_get(doc, "multinode")) or "false").lower() == "true"
    out: list[Found] = []
    for role in ("decode", "prefill"):
        section = _get(doc, role)
        if section is None or (_scalar(_get(section, "create")) or "true").lower() == "false":
            continue
        par = _get(section, "parallelism")
        flags, per_pod = _parallel_argv(par)
        workers = 1
        if multinode:
            data, local = _int(_get(par, "data")) or 1, _int(_get(par, "dataLocal"))
            workers = _int(_get(par, "workers")) or (data // local if local else 1) or 1
        env = {"LWS_GROUP_SIZE": str(workers), "LWS_WORKER_INDEX": "0"} if multinode else None
        gpu = _gpu_label(section, ctx)
        types = _get(section, "acceleratorTypes")
        if gpu[0] is None and _scalar(_get(types, "labelKey")) in GPU_LABELS:
            values = _strings(_get(types, "labelValues"))
            if values:
                key = _scalar(_get(types, "labelKey"))
                gpu = (_gpu_name(values[0][0], key), f"acceleratorTypes {key}")
        for c in _seq(_get(section, "containers")):
            command = _scalar(_get(c, "modelCommand")) or "imageDefault"
            count = (_gpu_count(c) or per_pod) * workers
            default = [model or "/model-cache", *flags] if command != "custom" else None
            try:
                f = _container_row(c, ctx, pool=f"llm-d {role} pool", replicas=_int(
                    _get(section, "replicas")), gpu=gpu, gpu_count=count, default_argv=default,
                    default_engine=stack_engine("llm-d"), env=env)
            except DeployParseError as e:
                f = _failed(e, ctx.file, text=role)
            if f is not None:
                out.append(_on_nodes(f, workers))
    return out


def _lws(doc: Any, ctx: _Ctx) -> list[Found]:
    """LeaderWorkerSet: each group is `size` pods; the worker's script sees LWS_GROUP_SIZE."""
    tmpl = _path(doc, "spec", "leaderWorkerTemplate")
    size = _int(_get(tmpl, "size")) or 1
    name = _scalar(_path(doc, "metadata", "name")) or "?"
    out: list[Found] = []
    env = {"LWS_GROUP_SIZE": str(size), "LWS_WORKER_INDEX": "0"}
    for which in ("leaderTemplate", "workerTemplate"):
        spec = _path(tmpl, which, "spec")
        for c in _seq(_get(spec, "containers")):
            count = _gpu_count(c)
            try:
                f = _container_row(c, ctx, pool=f"LeaderWorkerSet {name} ({size} pod(s) per group)",
                                   replicas=_int(_path(doc, "spec", "replicas")),
                                   gpu=_gpu_label(spec, ctx),
                                   gpu_count=count * size if count is not None else None, env=env)
            except DeployParseError as e:
                f = _failed(e, ctx.file, text=name)
            if f is not None:
                out.append(_on_nodes(f, size))
        if out:
            break  # the leader runs the server when it has one; else the workers do
    return out


def _pstack(doc: Any, ctx: _Ctx) -> list[Found]:
    """production-stack values: one server per servingEngineSpec.modelSpec[] entry."""
    out: list[Found] = []
    for spec in _seq(_path(doc, "servingEngineSpec", "modelSpec")):
        name = _scalar(_get(spec, "name")) or "?"
        model = _scalar(_get(spec, "modelURL"))
        cfg = _get(spec, "vllmConfig")
        argv = [model or ""]
        for key, flag in PSTACK_FLAGS.items():
            value = _scalar(_get(cfg, key))
            if value is not None:
                argv += [flag, value]
        for key, flag in (("enablePrefixCaching", "--enable-prefix-caching"),
                          ("enableChunkedPrefill", "--enable-chunked-prefill")):
            value = _scalar(_get(cfg, key))
            if value is not None:
                argv.append(flag if value.lower() == "true" else "--no-" + flag[2:])
        argv += [t for t, _ in _strings(_get(cfg, "extraArgs"))]
        if (_scalar(_get(spec, "enableLoRA")) or "").lower() == "true":
            argv.append("--enable-lora")
        gpu: tuple[str | None, str | None] = (None, None)
        for n in _walk(_get(spec, "nodeSelectorTerms"), ctx.budget):
            if _scalar(_get(n, "key")) in GPU_LABELS and _strings(_get(n, "values")):
                gpu = (_gpu_name(_strings(_get(n, "values"))[0][0], _scalar(_get(n, "key"))),
                       f"nodeSelectorTerms {_scalar(_get(n, 'key'))}")
        engine = stack_engine("production-stack")
        text = f"{launch_text(engine)} " + " ".join(shlex.quote(a) for a in argv)
        f = _row(engine, argv, ctx=ctx, line=_line(spec), text=text,
                 pool=f"production-stack modelSpec {name}",
                 replicas=_int(_get(spec, "replicaCount")), gpu=gpu,
                 gpu_count=_int(_get(spec, "requestGPU")))
        tag = _scalar(_get(spec, "tag")) or ""
        repository = _scalar(_get(spec, "repository"))
        if isinstance(f, ManifestFound) and repository:
            f.image = f"{repository}:{tag}" if tag else repository
        if tag and f.error is None and is_release(tag):  # v0.10.1.1, v0.8.5.post1 as well
            f.engine_version, f.version_source = normalize_version(tag), f"image tag {tag}"
        out.append(f)
    return out


def _ray_config(cfg: Any, ctx: _Ctx, pool: str) -> Found | None:
    """One Ray Serve LLMConfig."""
    loading = _get(cfg, "model_loading_config")
    model = _scalar(_get(loading, "model_source")) or _scalar(_get(loading, "model_id"))
    argv = [model or ""]
    notes = []
    for key, value in _map(_get(cfg, "engine_kwargs")):
        flag = "--" + key.replace("_", "-")
        text = _scalar(value)
        if text is None:
            if getattr(value, "id", None) == "mapping":
                from .commands import _mapping_json
                argv.append(f"{flag}={_mapping_json(value, ctx.file)}")
            continue
        if text.lower() in {"true", "false"}:
            argv.append(flag if text.lower() == "true" else f"--no-{flag[2:]}")
        else:
            argv.append(f"{flag}={text}")
    accel = _scalar(_get(cfg, "accelerator_type"))
    gpu = (RAY_GPUS.get(accel, accel), "accelerator_type") if accel else (None, None)
    bundles = _seq(_path(cfg, "placement_group_config", "bundles"))
    count = None
    if bundles:
        count = sum(_int(_get(b, "GPU")) or 0 for b in bundles)
    dep = _get(cfg, "deployment_config")
    replicas = _int(_get(dep, "num_replicas")) or _int(_path(dep, "autoscaling_config",
                                                              "min_replicas"))
    top = _int(_path(dep, "autoscaling_config", "max_replicas"))
    if top:
        notes.append(f"autoscaling up to {top} replica(s)")
    engine = stack_engine("ray-serve-llm")
    text = f"ray.serve.llm ({registry.get(engine).label}) " + " ".join(shlex.quote(a) for a in argv)
    return _row(engine, argv, ctx=ctx, line=_line(cfg), text=text, pool=pool, replicas=replicas,
                gpu=gpu, gpu_count=count, notes=notes)


def _ray(doc: Any, ctx: _Ctx) -> list[Found]:
    """Ray Serve config: applications[].args llm_configs / prefill_config / decode_config; or a
    standalone LLMConfig file (its model_loading_config at the top)."""
    if _get(doc, "model_loading_config") is not None:
        row = _ray_config(doc, ctx, "Ray Serve LLMConfig")
        return [row] if row else []
    out: list[Found] = []
    for app in _seq(_get(doc, "applications")):
        args = _get(app, "args")
        name = _scalar(_get(app, "name")) or "?"
        configs = [(c, f"Ray Serve {name}") for c in _seq(_get(args, "llm_configs"))
                   if getattr(c, "id", None) == "mapping"]  # a path: checked as its own file
        configs += [(_get(args, k), f"Ray Serve {name} ({k.split('_')[0]} pool)")
                    for k in ("prefill_config", "decode_config") if _get(args, k) is not None]
        for cfg, pool in configs:
            try:
                row = _ray_config(cfg, ctx, pool)
            except DeployParseError as e:
                row = _failed(e, ctx.file, text=pool)
            if row is not None:
                out.append(row)
    return out


def _sky_accelerators(node: Any) -> list[tuple[str, int]]:
    """resources.accelerators: "L4:1", "H100" (1), a set/dict {H100: 8, …} or a list."""
    out = []
    items: list[str] = []
    if _scalar(node) is not None:
        text = str(_scalar(node)).strip()
        if text.startswith("{"):  # a flow set written as a string
            items = [t.strip() for t in text.strip("{}").split(",")]
        else:
            items = [text]
    elif getattr(node, "id", None) == "mapping":
        # {H100: 8} or the flow set { H100:8, L4:1 } (keys "H100:8" with null values)
        items = [k if ":" in k else f"{k}:{_scalar(v) or 1}" for k, v in _map(node)]
    else:
        items = [t for t, _ in _strings(node)]
    for item in items:
        gpu, _, count = item.partition(":")
        count = count.strip()
        if gpu.strip() and (not count or re.fullmatch(r"[0-9]{1,4}(\.0)?", count)):
            out.append((gpu.strip(), int(float(count)) if count else 1))
    return out


def _skypilot(doc: Any, ctx: _Ctx) -> list[Found]:
    """SkyPilot task: the run script, once per accelerator candidate."""
    resources = _get(doc, "resources")
    accels = _sky_accelerators(_get(resources, "accelerators"))
    for alt in _seq(_get(resources, "any_of")) + _seq(_get(resources, "ordered")):
        accels += _sky_accelerators(_get(alt, "accelerators"))
    nodes = _int(_get(doc, "num_nodes")) or 1
    env = {k: _scalar(v) or "" for k, v in _map(_get(doc, "envs")) if _scalar(v) is not None}
    run = _get(doc, "run")
    text = _scalar(run) or ""
    first = _line(run) + (1 if getattr(run, "style", None) in ("|", ">") else 0)
    out: list[Found] = []
    known, unknown = _known_gpus(accels)
    for gpu, count in known or [(None, None)]:  # type: ignore[list-item]
        local = {**env, "SKYPILOT_NUM_NODES": str(nodes), "SKYPILOT_NODE_RANK": "0"}
        if count is not None:
            local["SKYPILOT_NUM_GPUS_PER_NODE"] = str(count)
        # SkyPilot runs `run` in bash with `envs` in its environment: the shell reader expands
        # each variable once (filling them in first and then reading the script's own
        # assignments expanded a value holding `$NAME` a second time)
        script = literal_branches(text, local)
        found = shell_commands(script, file=ctx.file, first_line=first, templates=ctx.templates,
                               env=local)
        for f in [_on_nodes(x, nodes) for x in found]:
            out.append(_adopt(f, f"SkyPilot task on {gpu}:{count}" if gpu else "SkyPilot task",
                              _int(_path(doc, "service", "replicas")),
                              (gpu, "SkyPilot resources.accelerators") if gpu else (None, None),
                              count * nodes if count is not None else None,
                              ([f"{nodes} node(s)"] if nodes > 1 else [])
                              + ([f"accelerator candidates not in kvplan's catalogue, not checked: "
                                  f"{', '.join(unknown)}"] if unknown and not out else [])))
    return out


def _known_gpus(accels: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], list[str]]:
    """SkyPilot candidates split into those kvplan's GPU catalogue resolves (as catalogue ids)
    and the names it does not."""
    from ..errors import KvplanError
    from ..sources.catalog import resolve_gpu

    known, unknown = [], []
    for gpu, count in accels:
        try:
            known.append((resolve_gpu(SKY_GPUS.get(gpu, gpu)).id, count))
        except KvplanError:
            unknown.append(f"{gpu}:{count}")
    return known, unknown


def _nim(doc: Any, ctx: _Ctx) -> list[Found]:
    """NIMService: NIM LLM's environment variables, planned as its vLLM backend."""
    spec = _get(doc, "spec")
    image = _scalar(_path(spec, "image", "repository")) or ""
    env = _env(spec, ctx)
    model = env.get("NIM_MODEL_NAME") or image.rstrip("/").rsplit("/", 1)[-1]
    argv = [model]
    for var, flag in NIM_ENV.items():
        if var in env and var != "NIM_MODEL_NAME":
            argv += [flag, env[var]]
    text = f"NIM {image} " + " ".join(argv[1:])
    engine = stack_engine("nim")
    return [_row(engine, argv, ctx=ctx, line=_line(spec), text=text,
                 pool=f"NIMService {_scalar(_path(doc, 'metadata', 'name'))}",
                 replicas=_int(_get(spec, "replicas")), gpu=_gpu_label(spec, ctx),
                 gpu_count=_gpu_count(spec),
                 notes=[f"NIM planned as its {registry.get(engine).label} backend (a TensorRT-LLM "
                        "profile differs)"])]


WORKLOADS = {"Deployment", "StatefulSet", "Pod", "Job", "DaemonSet", "ReplicaSet"}


def _pod_spec(doc: Any) -> Any:
    return _get(doc, "spec") if _kind(doc) == "Pod" else _path(doc, "spec", "template", "spec")


def _uses_configmap(doc: Any, ctx: _Ctx) -> bool:
    """A workload whose containers read env from a ConfigMap defined in the same file."""
    if _kind(doc) not in WORKLOADS or not ctx.configmaps:
        return False
    for c in _seq(_get(_pod_spec(doc), "containers")):
        names = [_scalar(_path(i, "configMapRef", "name")) for i in _seq(_get(c, "envFrom"))]
        names += [_scalar(_path(i, "valueFrom", "configMapKeyRef", "name"))
                  for i in _seq(_get(c, "env"))]
        if any(n in ctx.configmaps for n in names):
            return True
    return False


def _workload(doc: Any, ctx: _Ctx) -> list[Found]:
    """A Deployment (StatefulSet, Pod, …) whose server reads its flags from a ConfigMap."""
    spec = _pod_spec(doc)
    name = _scalar(_path(doc, "metadata", "name")) or "?"
    out: list[Found] = []
    for c in _seq(_get(spec, "containers")):
        image = _scalar(_get(c, "image")) or ""
        server = next((n for n, e in registry.ENGINES.items()
                       if any(p.search(image) for p in e.syntax.image_entrypoints)), None)
        try:
            f = _container_row(c, ctx, pool=f"{_kind(doc)} {name}",
                               replicas=_int(_path(doc, "spec", "replicas")),
                               gpu=_gpu_label(spec, ctx), gpu_count=_gpu_count(c),
                               default_argv=[] if server else None, default_engine=server)
        except DeployParseError as e:
            f = _failed(e, ctx.file, text=name)
        if f is not None:
            _version_from_image(f, image)  # as the generic reader does for any container
            out.append(f)
    return out


def _kind(doc: Any) -> str:
    return _scalar(_get(doc, "kind")) or ""


# (recognises a document, reads it) — the first that recognises a document reads it
READERS: list[tuple[Callable[[Any], bool], Callable[[Any, _Ctx], list[Found]]]] = [
    (lambda d: _kind(d) == "DynamoGraphDeployment", _dynamo),
    (lambda d: _kind(d) == "LLMInferenceService", _llmisvc),
    (lambda d: _kind(d) == "InferenceService" and _path(d, "spec", "predictor", "model")
     is not None, _isvc),
    (lambda d: _kind(d) == "LeaderWorkerSet", _lws),
    (lambda d: _kind(d) == "NIMService", _nim),
    (lambda d: not _kind(d) and _get(d, "modelArtifacts") is not None
     and (_get(d, "decode") is not None or _get(d, "prefill") is not None), _llmd),
    (lambda d: not _kind(d) and _path(d, "servingEngineSpec", "modelSpec") is not None, _pstack),
    (lambda d: not _kind(d) and (_get(d, "applications") is not None
                                 or _get(d, "model_loading_config") is not None), _ray),
    (lambda d: not _kind(d) and _get(d, "run") is not None and _get(d, "services") is None,
     _skypilot),
]


def _unlisted(docs: list[Any], ctx: _Ctx) -> list[Any]:
    """The documents, each `kind: List` (what `kubectl get -o yaml` prints for several
    resources: apiVersion v1, its resources under `items`) replaced by its items, as kubectl
    apply reads it; a List inside a List too (the walk's node budget bounds the work)."""
    out: list[Any] = []
    stack = list(reversed(docs))
    while stack:
        doc = stack.pop()
        ctx.budget[0] -= 1
        if ctx.budget[0] < 0:
            raise DeployParseError(ctx.file, _line(doc), f"more than {MAX_YAML_NODES:,} YAML "
                                   "nodes to visit (an alias bomb?)", hint="expand the aliases")
        if _kind(doc) == "List" and getattr(_get(doc, "items"), "id", None) == "sequence":
            stack.extend(reversed(_seq(_get(doc, "items"))))
        else:
            out.append(doc)
    return out


def _docs(text: str, ctx: _Ctx) -> Iterator[tuple[Any, Callable[[Any, _Ctx], list[Found]]]]:
    docs = ctx.all_docs = _unlisted(_yaml_nodes(text, ctx.file), ctx)
    for doc in docs:  # ConfigMaps first: a container may read its flags from one further down
        if _kind(doc) == "ConfigMap":
            name = _scalar(_path(doc, "metadata", "name")) or ""
            ctx.configmaps[name] = {k: v for k, node in _map(_get(doc, "data"))
                                    if (v := _scalar(node)) is not None}
    for doc in docs:
        if _uses_configmap(doc, ctx):
            yield doc, _workload
            continue
        reader = next((r for match, r in READERS if match(doc)), None)
        if reader is not None:
            yield doc, reader


def _label_generic(found: list[Found], all_docs: list[Any], claimed: list[Any],
                   ctx: _Ctx) -> list[Found]:
    """What the generic reader (commands.py: the nvidia.com/gpu limit and the
    nvidia.com/gpu.product label) does not read, for the containers (compose services) it read:
    the GPU model from the other labels (GPU_LABELS: GKE's, llm-d's, AMD's) and the count from
    an `amd.com/gpu` limit, each set where it found none (a `# kvplan:` directive has already
    set its own); and, for a row whose image tag gave no release, the image
    (ManifestFound.image)."""
    ids = {id(d) for d, _ in claimed}
    if not any(f.error is None for f in found):
        return found
    Span = tuple[int, int, tuple[str | None, str | None], int | None, str | None]
    spans: list[Span] = []
    budget = [MAX_YAML_NODES]  # its own: the readers' budget is left for the readers
    for doc in all_docs:
        if id(doc) in ids:
            continue
        for _, svc in _map(_get(doc, "services")):  # compose: the image only
            spans.append((_line(svc), svc.end_mark.line + 1, (None, None), None,
                          _scalar(_get(svc, "image"))))
        for node in _walk(doc, budget):
            containers = _get(node, "containers")
            if getattr(containers, "id", None) != "sequence":
                continue
            gpu = _gpu_label(node, ctx)
            spans += [(c.start_mark.line + 1, c.end_mark.line + 1, gpu, _gpu_count(c),
                       _scalar(_get(c, "image"))) for c in containers.value]
    out: list[Found] = []
    for f in found:
        # a span ends on the line the next one starts: the later start is f's
        inside = [s for s in spans if s[0] <= f.line <= s[1]]
        if f.error is not None or not inside:
            out.append(f)
            continue
        _, _, gpu, count, image = max(inside, key=lambda s: s[0])
        if gpu[0] and f.gpu is None:
            f.gpu, f.gpu_source = gpu
        if count is not None and f.gpu_count is None:
            f.gpu_count = count
        if image and f.engine_version is None:  # a tag it could not read: check says so
            f = ManifestFound(**{k: getattr(f, k) for k in Found.__dataclass_fields__},
                              image=image)
        out.append(f)
    return out


def manifest_commands(path: Path, found: list[Found], templates: Templates) -> list[Found]:
    """`found` (the commands the line/container reader took from `path`) with every document
    this module recognises read as its resource instead: the commands the generic reader found
    inside such a document are replaced by its pools."""
    if path.suffix not in {".yaml", ".yml"}:
        return found
    file = str(path)
    try:
        raw = read_text_limited(path, MAX_DEPLOY_BYTES, what="deployment file")
        ctx = _Ctx(file, Templates(values=dict(templates.values)))
        text = ctx.templates.fill(raw, file)
        docs = list(_docs(text, ctx))
        found = _label_generic(found, ctx.all_docs, docs, ctx)
    except (DeployParseError, InvalidConfigError, OSError):
        return found  # the generic reader already reported what is wrong with the file
    if not docs:
        return found
    spans = [(d.start_mark.line + 1, d.end_mark.line + 1) for d, _ in docs]
    kept = [f for f in found if not any(a <= f.line <= b for a, b in spans)]
    new: list[Found] = []
    for doc, reader in docs:
        try:
            new += reader(doc, ctx)
        except DeployParseError as e:
            new.append(_failed(e, file))
    directives = _directives(raw, file)
    for f in new:
        if f.error is not None:
            continue
        for lineno, pairs in directives:
            if lineno <= f.line:
                _apply_directive(f, pairs, lineno, file)
    return sorted(kept + new, key=lambda f: f.line)
