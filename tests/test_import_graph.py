"""DESIGN: the pure core imports no catalogue, file reader, network client, rich or typer, and
kvplan's modules form no import circle. Read from the source (ast), so a lazy import inside a
function counts too; imports under `if TYPE_CHECKING:` do not (they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "kvplan"
# The pure core: specs, the sizing math, the engines, the planner (DESIGN "Rooms").
CORE = {"specs", "units", "errors", "knobs", "model", "versions", "planner", "perf", "sweep",
        "engines"}
# I/O and presentation layers, and the third-party libraries only they may use.
FORBIDDEN = {"kvplan.catalog", "kvplan.hub", "kvplan.checkpoint", "kvplan.model.config", "kvplan.api",
             "kvplan.cli", "kvplan.render", "kvplan.check", "kvplan.deploy", "kvplan.report",
             "rich", "typer", "click", "huggingface_hub", "yaml"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """Absolute names imported by a module (kvplan modules resolved; others by top package)."""
    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
            for n in ast.walk(node)}
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in mods else target)
    return out


def test_pure_core_imports_no_io_or_ui_module():
    mods = _modules()
    bad = {}
    for name, path in mods.items():
        if name.split(".")[1] not in CORE if "." in name else True:
            continue
        hits = {i for i in _imports(name, path, mods)
                if any(i == f or i.startswith(f + ".") for f in FORBIDDEN)}
        if hits:
            bad[name] = sorted(hits)
    assert bad == {}


def test_no_import_circles():
    mods = _modules()
    graph = {n: {i for i in _imports(n, p, mods) if i in mods and i != n} for n, p in mods.items()}
    graph = {n: {d for d in deps if not n.startswith(d + ".") and d != "kvplan"} for n, deps in graph.items()}
    seen: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycle: list[str] = []

    def visit(n: str, stack: list[str]) -> None:
        seen[n] = 1
        for d in graph[n]:
            if seen.get(d) == 1 and not cycle:
                cycle.extend(stack[stack.index(d):] + [d])
            elif d not in seen:
                visit(d, stack + [d])
        seen[n] = 2

    for n in graph:
        if n not in seen:
            visit(n, [n])
    assert cycle == []


def test_engines_do_not_import_the_planner():
    """No upward imports: engines know the specs and the math, not who calls them."""
    mods = _modules()
    for name, path in mods.items():
        if name.startswith("kvplan.engines"):
            assert not _imports(name, path, mods) & {"kvplan.planner", "kvplan.api"}, name

