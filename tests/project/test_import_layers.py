"""The import layers (DESIGN "Rooms"), as one table.

Every kvplan module sits in one layer. A module may import kvplan modules of its own layer and
of the layers before it in LAYERS, and none of the libraries its layer forbids: the pure core
imports no catalogue, file reader, network client, rich or typer. Imports are read from the
source (ast), so an import inside a function counts; one under `if TYPE_CHECKING:` does not (it
never runs). Moving or adding a module is one line in LAYER, by dotted name.
"""

from __future__ import annotations

import ast
import functools
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan

# Lowest first: a layer may import its own modules and those of the layers before it.
LAYERS = ("core", "sources", "api", "deploy", "render", "cli")

LAYER = {
    # core: specs, knobs, the sizing math, engines, perf, planner, sweep (pure: no I/O, no UI)
    "kvplan.errors": "core",
    "kvplan.knobs": "core",
    "kvplan.specs": "core",
    "kvplan.units": "core",
    "kvplan.versions": "core",
    "kvplan.engines": "core",
    "kvplan.engines.arch_fits": "core",
    "kvplan.engines.moe_fits": "core",
    "kvplan.engines.dense_checks": "core",
    "kvplan.engines.base": "core",
    "kvplan.engines.flags": "core",
    "kvplan.engines.pd": "core",
    "kvplan.engines.interconnect": "core",
    "kvplan.engines.multinode": "core",
    "kvplan.engines.registry": "core",
    "kvplan.engines.sglang": "core",
    "kvplan.engines.sglang_parallel": "core",
    "kvplan.engines.sglang_mixed_chunk": "core",  # --- mixedchunk ---
    "kvplan.engines.trtllm_parallel": "core",
    "kvplan.engines.tgi": "core",
    "kvplan.engines.trtllm": "core",
    "kvplan.engines.trtllm_features": "core",
    "kvplan.engines.trtllm_options": "core",
    "kvplan.engines.vllm": "core",
    "kvplan.model": "core",
    "kvplan.model.allocator": "core",
    "kvplan.model.forward": "core",
    "kvplan.model.kv": "core",
    "kvplan.model.expert": "core",
    "kvplan.perf.expert": "core",
    "kvplan.model.multimodal": "core",
    "kvplan.model.tensor_names": "core",
    "kvplan.model.weights": "core",
    "kvplan.model.whatif": "core",
    "kvplan.perf": "core",
    "kvplan.perf.arch": "core",
    "kvplan.perf.decode_gemm": "core",
    "kvplan.perf.moe_gemm": "core",
    "kvplan.perf.layer_floors": "core",
    "kvplan.perf.fit": "core",
    "kvplan.perf.step": "core",
    "kvplan.perf.kv_transfer": "core",
    "kvplan.perf.user_calibration": "core",
    "kvplan.perf.simulate": "core",
    "kvplan.planner": "core",
    "kvplan.planner.curve": "core",
    "kvplan.planner.disagg": "core",
    "kvplan.planner.features": "core",
    "kvplan.planner.nodes": "core",
    "kvplan.planner.performance": "core",
    "kvplan.planner.plan": "core",
    "kvplan.planner.sweep": "core",
    "kvplan.planner.sweep_disagg": "core",
    "kvplan.planner.whatif": "core",
    "kvplan.planner.traffic": "core",
    # sources: catalogue, Hub, config and checkpoint readers, prices, bounded readers, local GPUs
    "kvplan.sources": "sources",
    "kvplan.sources.benchfiles": "sources",
    "kvplan.sources.calibration": "sources",
    "kvplan.sources.catalog": "sources",
    "kvplan.sources.checkpoint": "sources",
    "kvplan.sources.hub": "sources",
    "kvplan.sources.limits": "sources",
    "kvplan.sources.nvml": "sources",
    "kvplan.sources.prices": "sources",
    "kvplan.sources.traffic_files": "sources",
    "kvplan.sources.length_datasets": "sources",
    # model.config and its family converters read untrusted config.json values (bounded readers)
    "kvplan.model.config": "sources",
    "kvplan.model.families": "sources",
    "kvplan.model.fields": "sources",
    "kvplan.model.quant": "sources",
    "kvplan.model.vision": "sources",
    # api: resolves names through the sources and builds Plans (the package re-exports it)
    "kvplan": "api",
    "kvplan.api": "api",
    "kvplan.calibrate": "api",
    # deploy: serving commands and manifests, check
    "kvplan.deploy": "deploy",
    "kvplan.deploy.check": "deploy",
    "kvplan.deploy.commands": "deploy",
    "kvplan.deploy.dockerfile": "deploy",
    "kvplan.deploy.launchers": "deploy",
    "kvplan.deploy.manifests": "deploy",
    "kvplan.deploy.emit": "deploy",
    "kvplan.deploy.env_flags": "deploy",
    "kvplan.deploy.pd_check": "deploy",
    "kvplan.deploy.pd_pair": "deploy",
    "kvplan.deploy.shell_vars": "deploy",
    # render: text tables, Markdown, HTML, SVG
    "kvplan.render": "render",
    "kvplan.render.disagg": "render",
    "kvplan.render.report": "render",
    "kvplan.render.svg": "render",
    "kvplan.render.text": "render",
    # cli
    "kvplan.__main__": "cli",
    "kvplan.cli": "cli",
    "kvplan.cli.calibrate": "cli",
    "kvplan.cli.catalogue": "cli",
    "kvplan.cli.check": "cli",
    "kvplan.cli.common": "cli",
    "kvplan.cli.exits": "cli",
    "kvplan.cli.plan": "cli",
    "kvplan.cli.compare": "cli",
    "kvplan.cli.report": "cli",
    "kvplan.cli.schema": "cli",
    "kvplan.cli.sweep": "cli",
}

UI = ("rich", "typer", "click")
NETWORK = ("huggingface_hub", "requests", "httpx", "urllib3", "aiohttp", "http", "socket", "ssl",
           "urllib.request")
FILES = ("os", "io", "pathlib", "shutil", "tempfile", "glob", "fileinput", "mmap", "stat", "csv",
         "pickle", "shelve", "sqlite3", "yaml", "tomllib", "tomli", "pynvml", "subprocess",
         "open()")  # open(): a call of the builtin, the one file reader that needs no import
FORBIDDEN = {
    "core": UI + NETWORK + FILES,
    "sources": UI,
    "api": UI + NETWORK,
    "deploy": UI + NETWORK,
    "render": ("typer", "click") + NETWORK,
    "cli": NETWORK,
}
# Renderers never plan (DESIGN: reports and sweeps take finished plans; the API layer builds
# them). A render module may name these modules' types under TYPE_CHECKING, but runs none of the
# modules that plan, model performance or resolve names, though they sit in lower layers.
# "kvplan" is the package itself, which re-exports plan() and sweep().
# kvplan.planner.curve is allowed: arithmetic on finished plans (any re-planning is a callback
# the API passes in).
PLANNING = ("kvplan", "kvplan.api", "kvplan.planner.plan", "kvplan.planner.sweep",
            "kvplan.planner.performance", "kvplan.planner.features", "kvplan.perf",
            "kvplan.engines", "kvplan.model", "kvplan.sources.catalog", "kvplan.sources.hub",
            "kvplan.deploy.check")
NEVER = {"render": PLANNING}
# Libraries that one module alone may import (and only inside functions, so that a plan which
# does not need them never pays for loading them).
OWNER = {"huggingface_hub": "kvplan.sources.hub", "pynvml": "kvplan.sources.nvml"}

SRC = Path(kvplan.__file__).resolve().parent


def discovered() -> dict[str, Path]:
    """Every module of the package, by dotted name: pkgutil's walk and every .py file."""
    out = {"kvplan": SRC / "__init__.py"}
    for info in pkgutil.walk_packages([str(SRC)], "kvplan."):
        folder = Path(info.module_finder.path)  # type: ignore[union-attr]
        leaf = info.name.rsplit(".", 1)[1]
        out[info.name] = folder / leaf / "__init__.py" if info.ispkg else folder / f"{leaf}.py"
    for p in SRC.rglob("*.py"):
        parts = ("kvplan", *p.relative_to(SRC).with_suffix("").parts)
        out.setdefault(".".join(parts[:-1] if parts[-1] == "__init__" else parts), p)
    return out


MODULES = discovered()


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes in the body of an `if TYPE_CHECKING:` (never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _kvplan_module(dotted: str) -> str:
    """The longest prefix of `dotted` that is a kvplan module (`kvplan.x.Name` → `kvplan.x`)."""
    while dotted not in MODULES and "." in dotted:
        dotted = dotted.rsplit(".", 1)[0]
    return dotted


def imports(name: str, source: str) -> list[tuple[int, str, bool]]:
    """(line, imported name, at module level) for each import the module runs; kvplan modules
    resolved to their dotted names, relative imports made absolute, `open(` calls as `open()`."""
    tree = ast.parse(source)
    skip = _type_checking_only(tree)
    top = {id(n) for n in tree.body}
    is_package = MODULES.get(name, Path()).name == "__init__.py"
    package = name.split(".") if is_package else name.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((node.lineno, sub if sub in MODULES else target, id(node) in top))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open":
            out.append((node.lineno, "open()", id(node) in top))
    return [(line, _kvplan_module(i) if i.split(".")[0] == "kvplan" else i, at_top)
            for line, i, at_top in out]


@functools.cache
def module_imports(name: str) -> list[tuple[int, str, bool]]:
    """imports() of the module's source as it is on disk (parsed once per run)."""
    return imports(name, MODULES[name].read_text())


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _is_module(name: str, module: str) -> bool:
    """`name` is `module` or inside it; the package "kvplan" matches only itself."""
    return name == module if module == "kvplan" else _matches(name, module)


def violations(name: str, source: str | None = None) -> list[tuple[int, str]]:
    """(line, what is wrong) for every import that `name`'s layer forbids, in `source` (default:
    the module's file)."""
    layer = LAYER.get(name)
    if layer is None:
        return [(0, "the module is not in the layer table")]
    rank = LAYERS.index(layer)
    out = []
    found = module_imports(name) if source is None else imports(name, source)
    for line, i, at_top in found:
        if i.split(".")[0] == "kvplan":
            other = LAYER.get(i)
            if other is None:
                out.append((line, f"{i} (not a module in the layer table)"))
            elif LAYERS.index(other) > rank:
                out.append((line, f"{i} ({other}, above {layer})"))
            elif any(_is_module(i, m) for m in NEVER.get(layer, ())):
                out.append((line, f"{i} (plans; {layer} takes finished plans)"))
            continue
        bad = [f for f in FORBIDDEN[layer] if _matches(i, f)]
        if bad:
            out.append((line, f"{i} (forbidden in {layer})"))
        for lib, owner in OWNER.items():
            if _matches(i, lib) and name != owner:
                out.append((line, f"{i} (only {owner} imports it)"))
            elif _matches(i, lib) and at_top:
                out.append((line, f"{i} (imported at module level; import it where it is used)"))
    return out


def test_every_module_is_in_the_layer_table():
    assert sorted(set(MODULES) - set(LAYER)) == []  # a new module: give it a line in LAYER
    assert sorted(set(LAYER) - set(MODULES)) == []  # a moved or deleted module: update its line
    assert set(LAYER.values()) == set(LAYERS) == set(FORBIDDEN)


def test_no_module_imports_what_its_layer_forbids():
    bad = {n: violations(n) for n in sorted(MODULES)}
    assert {n: v for n, v in bad.items() if v} == {}


def _import_lines(name: str, target: str) -> list[str]:
    """Three spellings of `import target` from inside module `name` (absolute, from-package,
    relative) — the checker must resolve each."""
    parent, leaf = target.rsplit(".", 1)
    package = name if MODULES[name].name == "__init__.py" else name.rsplit(".", 1)[0]
    dots = "." * (package.count(".") + 1)  # relative to the package root
    rest = parent.removeprefix("kvplan").lstrip(".")
    return [f"import {target}", f"from {parent} import {leaf}", f"from {dots}{rest} import {leaf}"]


def _inject(source: str, lines: list[str], in_function: bool) -> tuple[str, list[int]]:
    """source + the lines (at module level or inside a function); their line numbers."""
    first = source.count("\n") + (1 if source.endswith("\n") else 2)
    if in_function:
        body = "\n\ndef _injected():\n" + "".join(f"    {x}\n" for x in lines)
        first += 3
    else:
        body = "\n" + "".join(f"{x}\n" for x in lines)
        first += 1
    text = source + ("" if source.endswith("\n") else "\n") + body
    return text, list(range(first, first + len(lines)))


@pytest.mark.parametrize("name", sorted(LAYER))
def test_the_check_bites_on_an_injected_forbidden_import(name):
    """Every forbidden library and one module of every higher layer, injected into the module's
    real source at module level and inside a function, is reported on its own line."""
    layer = LAYER[name]
    libraries = [x for x in FORBIDDEN[layer] if x != "open()"]
    libraries += [lib for lib, owner in OWNER.items() if owner != name and lib not in libraries]
    higher = LAYERS[LAYERS.index(layer) + 1:]
    targets = [min(m for m, lay in LAYER.items() if lay == h and m != "kvplan") for h in higher]
    lines = [f"import {lib}" for lib in libraries] + [
        x for t in targets for x in _import_lines(name, t)]
    if "open()" in FORBIDDEN[layer]:
        lines.append("open('config.json')")
    if layer == "core":  # the issue's own example, in every core module
        lines += ["import rich", "from kvplan.sources import catalog"]
    source = MODULES[name].read_text()
    for in_function in (False, True):
        text, numbers = _inject(source, lines, in_function)
        reported = {line for line, _ in violations(name, text)}
        missed = [x for x, n in zip(lines, numbers, strict=True) if n not in reported]
        assert missed == [], (name, "in a function" if in_function else "at module level")


@pytest.mark.parametrize("name", sorted(n for n, lay in LAYER.items() if lay in NEVER))
def test_renderers_never_plan(name):
    """Every planning module, injected into a render module's real source (three spellings, at
    module level and in a function), is reported; under TYPE_CHECKING it is a type only."""
    lines = ["import kvplan", "from kvplan import plan"]
    lines += [x for m in NEVER[LAYER[name]] if m != "kvplan"
              for x in _import_lines(name, min(k for k in LAYER if _is_module(k, m)))]
    source = MODULES[name].read_text()
    for in_function in (False, True):
        text, numbers = _inject(source, lines, in_function)
        reported = {line for line, _ in violations(name, text)}
        missed = [x for x, n in zip(lines, numbers, strict=True) if n not in reported]
        assert missed == [], (name, "in a function" if in_function else "at module level")
    typed = (source + "\nfrom typing import TYPE_CHECKING\n"
             "if TYPE_CHECKING:\n    from kvplan.api import plan\n")
    assert violations(name, typed) == violations(name)


def test_a_type_checking_import_is_not_a_dependency_but_its_else_branch_is():
    source = ("from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    import rich\nelse:\n    import typer\n")
    assert violations("kvplan.units", source) == [(5, "typer (forbidden in core)")]


def test_owned_libraries_are_imported_where_they_are_used():
    """hub.py is the one place that talks to the Hub, and it imports huggingface_hub lazily."""
    source = MODULES["kvplan.sources.hub"].read_text()
    assert violations("kvplan.sources.hub", source + "\nimport huggingface_hub\n") != []
    assert any(i == "huggingface_hub" for _, i, _ in module_imports("kvplan.sources.hub"))


def _kvplan_graph() -> dict[str, set[str]]:
    graph = {}
    for n in MODULES:
        deps = {i for _, i, _ in module_imports(n) if i in MODULES and i != n}
        graph[n] = {d for d in deps if not n.startswith(d + ".") and d != "kvplan"}
    return graph


def test_no_import_circles():
    graph = _kvplan_graph()
    seen: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycle: list[str] = []

    def visit(n: str, stack: list[str]) -> None:
        seen[n] = 1
        for d in graph[n]:
            if seen.get(d) == 1 and not cycle:
                cycle.extend([*stack[stack.index(d):], d])
            elif d not in seen:
                visit(d, [*stack, d])
        seen[n] = 2

    for n in graph:
        if n not in seen:
            visit(n, [n])
    assert cycle == []


def test_engines_do_not_import_their_callers():
    """No upward imports inside the core: engines know the specs and the math, not who calls
    them."""
    graph = _kvplan_graph()
    callers = {"kvplan.planner.plan", "kvplan.planner.sweep", "kvplan.planner.performance",
               "kvplan.api"}
    assert {n: sorted(d & callers) for n, d in graph.items()
            if n.startswith("kvplan.engines") and d & callers} == {}


def test_the_step_time_model_is_a_leaf():
    """perf imports the standard library, four kvplan modules, the engine registry (each
    engine declares its own calibration), the user calibrations in force (a leaf: a table of
    coefficients, kvplan calibrate's), the GPU-class factors (kvplan.perf.arch over the
    measured table kvplan.engines.arch_fits: both standard library only), the public MoE
    rows' spread (kvplan.engines.moe_fits, over arch_fits only), the never-fitted dense
    groups (kvplan.engines.dense_checks, over arch_fits only) and the measured
    decode-GEMM rates (kvplan.perf.decode_gemm, standard library only), the measured
    fused-MoE GEMM rates (kvplan.perf.moe_gemm) and the MoE / MLA layers' measured kernel
    floors (kvplan.perf.layer_floors; both standard library only) only."""
    allowed = {"kvplan.specs", "kvplan.model.weights", "kvplan.model.kv", "kvplan.units",
               "kvplan.engines.registry", "kvplan.engines.base", "kvplan.perf.user_calibration",
               "kvplan.perf.arch", "kvplan.engines.arch_fits", "kvplan.engines.moe_fits",
               "kvplan.engines.dense_checks", "kvplan.perf.decode_gemm", "kvplan.perf.moe_gemm",
               "kvplan.perf.layer_floors"}
    for leaf in ("kvplan.perf.decode_gemm", "kvplan.perf.moe_gemm", "kvplan.perf.layer_floors"):
        assert not {i for _, i, _ in module_imports(leaf) if i.startswith("kvplan")}
    assert {i for _, i, _ in module_imports("kvplan.perf.user_calibration")
            if i.startswith("kvplan")} <= {"kvplan.engines.base"}
    assert {i for _, i, _ in module_imports("kvplan.perf.arch")
            if i.startswith("kvplan")} <= {"kvplan.engines.arch_fits"}
    assert not {i for _, i, _ in module_imports("kvplan.engines.arch_fits")
                if i.startswith("kvplan")}
    for fits in ("kvplan.engines.moe_fits", "kvplan.engines.dense_checks"):
        assert {i for _, i, _ in module_imports(fits)
                if i.startswith("kvplan")} <= {"kvplan.engines.arch_fits"}
    got = {i for _, i, _ in module_imports("kvplan.perf.step")}
    assert {i for i in got if i.split(".")[0] == "kvplan"} <= allowed
    assert sorted(i for i in got if i.split(".")[0] not in sys.stdlib_module_names | {"kvplan"}
                  ) == []


def test_a_library_plan_and_sweep_load_no_cli_or_hub_library():
    """What a fresh interpreter loads, as a cross-check of the table: a dynamic import
    (importlib) escapes the ast walk, and a catalogue model must not need the Hub client."""
    code = ("import sys, kvplan, kvplan.planner.plan, kvplan.engines.vllm, kvplan.model.kv, "
            "kvplan.model.weights, kvplan.model.config, kvplan.sources.catalog, kvplan.specs, "
            "kvplan.sources.checkpoint\n"
            "kvplan.plan('llama-3.1-8b', 'h100')\n"
            "kvplan.sweep('llama-3.1-8b', gpus=['h100'], max_gpus=1)\n"
            "bad = [m for m in ('typer', 'rich', 'click', 'huggingface_hub') if m in sys.modules]\n"
            "print(','.join(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""
