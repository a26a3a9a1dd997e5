"""A format what-if in a plan (model/whatif.py, docs/what-if.md): the record in JSON, the note
in the text output, and a launch line that serves the hypothetical checkpoint after the step
that writes it."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..engines import registry
from ..engines.base import Engine
from ..errors import InvalidInputError
from ..knobs import Knobs, compute_capability
from ..model.whatif import WhatIfFormat, checkpoint_dir, checkpoint_format, what_if_format
from ..specs import Deployment, GpuSpec, ModelSpec, PlanWhatIf, Problem, SourcedValue
from ..versions import parse_version

_OFF: ContextVar[bool] = ContextVar("what_if_off", default=False)


@contextmanager
def real_checkpoints_only() -> Iterator[None]:
    """Within this block --quantization never plans a what-if (kvplan check: a deployment
    file serves the checkpoint it names, so a format it lacks is refused as before)."""
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


def apply(eng: Engine, m: ModelSpec, gpu: GpuSpec, knobs: Knobs,
          version: str | None = None) -> tuple[ModelSpec, Knobs]:
    """--quantization naming a what-if format on an unquantized model → the model as the
    checkpoint its quantizer would write (the flag consumed: the checkpoint carries its
    format), refused where the engine's kernels for it (release `version`, None: the newest)
    do not run on the GPU. Anything else passes unchanged: online fp8, a checkpoint's own
    format (resolve_layout; its kernels: refusal), an engine that quantizes before serving
    (Engine.build_quantization)."""
    fmt = what_if_format(knobs.quantization)
    if fmt is None or m.quantization is not None or m.unmodelled_quantization or _OFF.get():
        return m, knobs
    if type(eng).build_quantization is not Engine.build_quantization:
        return m, knobs  # an engine that quantizes before serving (TensorRT-LLM) decides
    if fmt.name not in eng.what_if_formats:
        others = [e.label for e in registry.ENGINES.values() if fmt.name in e.what_if_formats]
        raise InvalidInputError(
            f"--quantization {fmt.name}: {eng.label} does not serve {fmt.name} checkpoints "
            f"(kvplan's what-if plans the checkpoint {fmt.quantizer} would write)",
            hint=(f"plan it on {' or '.join(others)} (--engine), " if others else "")
            + "or choose another --quantization, or drop the flag",
            code="quantization-unsupported", knob="quantization")
    if gpu.vendor not in fmt.vendors:
        raise InvalidInputError(
            f"--quantization {fmt.name}: {eng.label} serves {fmt.name} checkpoints on "
            f"{' and '.join(sorted(fmt.vendors))} GPUs only, not the {gpu.name}",
            hint="plan another GPU, or another --quantization (awq, w8a8)",
            code="gpu-capability", knob="quantization")
    why = eng.checkpoint_refusal(fmt.checkpoint_format, gpu, version)  # the checkpoint's kernels
    if why is not None:
        can = [e.label for e in running(fmt.checkpoint_format, gpu) if e is not eng
               and fmt.name in e.what_if_formats]
        newer = _newer_release(eng, fmt.checkpoint_format, gpu, version)
        raise InvalidInputError(
            f"--quantization {fmt.name}: {why}",
            hint=(f"plan it on {' or '.join(can)} (--engine), " if can else "")
            + (f"plan --engine-version {newer}, " if newer else "")
            + "plan a newer GPU, or another --quantization (w8a8 and awq run from compute "
            "capability 7.5)", code="gpu-capability", knob="quantization")
    fmt = fmt.for_kv_request(knobs.kv_cache_dtype)  # the KV cache rule (model/whatif.py)
    return (m.model_copy(update={"quantization": fmt.spec}),
            knobs.model_copy(update={"quantization": None}))


def running(fmt: str, gpu: GpuSpec) -> list[Engine]:
    """The engines whose kernels serve checkpoint format `fmt` on `gpu`
    (Engine.checkpoint_kernel) and that run on its vendor's GPUs, in the registry's order. An
    FP8 checkpoint on an engine that declares no kernels for it meets the FP8 rule all engines
    are planned with at its newest release (Engine.fp8_least: vLLM 7.5 from 0.14.0, else 8.0)."""
    out = []
    cc = compute_capability(gpu)
    for e in registry.ENGINES.values():
        got = e.checkpoint_kernel(fmt, gpu)
        runs = (not got[1] if got is not None
                else fmt == "fp8" and (cc is None or cc >= e.fp8_least(e.newest_version)))
        if runs and e.gpu_refusal(gpu) is None:
            out.append(e)
    return out


def _newer_release(eng: Engine, fmt: str, gpu: GpuSpec, version: str | None) -> str | None:
    """The first release after `version` from which the engine's kernels run format `fmt` on
    `gpu` (a rule that changed: Kernel.since), as "X or later"; None where there is none."""
    if version is None:
        return None
    v = parse_version(version)
    later = sorted({k.since for k in eng.checkpoint_kernels.get(fmt, ())
                    if k.since is not None and parse_version(k.since) > v}, key=parse_version)
    first = next((r for r in later if eng.checkpoint_refusal(fmt, gpu, r) is None), None)
    return None if first is None else f"{first} or later"


def refusal(eng: Engine, m: ModelSpec, gpu: GpuSpec, version: str | None = None) -> str | None:
    """Why the engine cannot start checkpoint `m` on `gpu`: its format is below every kernel
    the engine serves it with — the rule apply applies to a what-if (Engine.checkpoint_kernel),
    here for a real checkpoint, in release `version` (None: the newest) — with what can run
    it (a GPU of the least capability those kernels need, the engine's newest release where
    its rule changed and it runs it, the engines whose kernels run it on this GPU). None where
    it starts (a what-if reaches here only once apply, or the engine's build_quantization,
    let it through)."""
    fmt = checkpoint_format(m.quantization)
    why = None if fmt is None else eng.checkpoint_refusal(fmt, gpu, version)
    if fmt is None or why is None:
        return None
    got = eng.checkpoint_kernel(fmt, gpu, version)
    assert got is not None
    least = got[0].least
    newer = _newer_release(eng, fmt, gpu, version)
    can = [e.name for e in running(fmt, gpu) if e is not eng]
    return (f"the {fmt} checkpoint {m.id} does not start: {why}; alternatives that run it: "
            f"a GPU of compute capability ≥ {least[0]}.{least[1]}"
            + (f", or --engine-version {newer}" if newer else "")
            + "".join(f", or --engine {n}" for n in can))


def what_if_of(eng: Engine, dep: Deployment) -> WhatIfFormat | None:
    """The what-if this deployment plans (None: a real checkpoint or online fp8): the recipe
    the engine plans it with (Engine.what_if_recipe), its KV cache quantization as the
    planned checkpoint declares it (apply, Engine.build_quantization)."""
    q = dep.quant
    if q is None or q.source != "what-if" or q.what_if is None:
        return None
    fmt = eng.what_if_recipe(q.what_if, dep)
    return None if fmt is None else fmt.with_kv(q.kv_cache_quant_algo is not None)


def record(eng: Engine, fmt: WhatIfFormat, ref: str, gpu: GpuSpec,
           version: str | None = None) -> PlanWhatIf:
    return PlanWhatIf(quantization=fmt.name, quantizer=fmt.quantizer,
                      checkpoint=checkpoint_dir(ref, fmt),
                      engine_quantization=engine_method(eng, fmt, gpu, version),
                      assumptions=list(fmt.assumptions_planned()))


def engine_method(eng: Engine, fmt: WhatIfFormat, gpu: GpuSpec,
                  version: str | None = None) -> str:
    """The quantization method the engine (release `version`, None: the newest) detects in the
    what-if's checkpoint on this GPU, as its --quantization spells it (the kernel
    Engine.checkpoint_kernel picks)."""
    got = eng.checkpoint_kernel(fmt.checkpoint_format, gpu, version)
    assert got is not None, f"{eng.name} serves no {fmt.checkpoint_format} checkpoint"
    return got[0].method


def note(fmt: WhatIfFormat, ref: str) -> Problem:
    return Problem(
        code="what-if", severity="info",
        message=f"WHAT-IF: planned as the {fmt.name} checkpoint {fmt.quantizer} would write "
        f"from {ref}; it does not exist yet. The launch line serves "
        f"{checkpoint_dir(ref, fmt)}: produce it first (the line above it). "
        + "; ".join(fmt.assumptions_planned()))


def engine_view(eng: Engine, fmt: WhatIfFormat, dep: Deployment, gpu: GpuSpec) -> Deployment:
    """The deployment as the launch line names it: the engine's own --quantization name."""
    return dep.model_copy(update={"quantization": engine_method(eng, fmt, gpu,
                                                                dep.engine_version)})


def command(fmt: WhatIfFormat, ref: str, serve: str) -> str:
    """The quantizer step, then the serve line (already pointing at the checkpoint)."""
    step = fmt.step(shlex.quote(ref) if not fmt.recipe.startswith("#") else ref,
                    checkpoint_dir(ref, fmt))
    return f"{step}\n{serve}"


def inputs(given: dict[str, SourcedValue], fmt: WhatIfFormat | None) -> dict[str, SourcedValue]:
    """The plan's inputs, with --quantization as the user gave it (w8a8, not its int8 method),
    so that they are valid input again."""
    if fmt is None or "quantization" not in given:
        return given
    return {**given, "quantization": given["quantization"].model_copy(update={"value": fmt.name})}


def unsupported(m: ModelSpec, gpu: GpuSpec, eng: Engine, q: str,
                version: str | None = None) -> str | None:
    """Why a sweep does not try what-if format `q` on this model, GPU and engine (release
    `version`, None: the newest) (None: it does). FP4 formats are tried only on GPUs that run
    FP4 natively."""
    fmt = what_if_format(q)
    if fmt is None:
        return f"{q!r} is not a what-if format"
    if m.quantization is not None or m.unmodelled_quantization:
        return "the checkpoint is already quantized"
    if fmt.name not in eng.what_if_formats:
        return f"{eng.label} does not serve {fmt.name} checkpoints"
    if gpu.vendor not in fmt.vendors:
        return f"{fmt.name} is served on {' and '.join(sorted(fmt.vendors))} GPUs only"
    why = eng.checkpoint_refusal(fmt.checkpoint_format, gpu, version)  # apply's rule
    if why is not None:
        return why
    if fmt.spec.weight_bits == 4 and fmt.name in ("nvfp4", "mxfp4") and not gpu.fp4_native:
        return f"{fmt.name} is tried only on FP4-native GPUs ({gpu.id} is not)"
    return None
