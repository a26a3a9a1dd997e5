"""A fifth engine is one module: an Engine subclass declared here, one `registry.register`
call, and `kvplan plan / compare / sweep / check` know it through the real CLI entry point, with
no edit anywhere else in kvplan.

The plugin inherits vLLM's memory accounting (so its KV figures must equal vLLM's for the same
deployment) and declares its own latency calibration: vLLM's coefficients with one second more
per request, so its TTFT at one request must be exactly 1000 ms above vLLM's and its TPOT equal,
which only holds if the latency model reads the engine's declaration."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from clirun import run

from kvplan.engines import registry
from kvplan.engines.base import Calibration, DeploySyntax
from kvplan.engines.vllm import VllmEngine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
EXTRA_REQUEST_MS = 1000.0  # the plugin's declared per-request overhead, above vLLM's

_VLLM_COEFFS = VllmEngine.calibration.coefficients
assert _VLLM_COEFFS is not None


class PluginEngine(VllmEngine):
    """vLLM's accounting under another name, launched as `plugin-serve run MODEL`."""

    name = "plugin"
    label = "PluginServe"
    syntax: DeploySyntax = dataclasses.replace(
        VllmEngine.syntax, executables=(("plugin-serve", "run"),), modules=(),
        image_versions=(), pip_version=None, image_entrypoints=(), config_yaml=False)
    calibration = Calibration(
        style="mixed",
        coefficients=dataclasses.replace(
            _VLLM_COEFFS, request_overhead_ms=_VLLM_COEFFS.request_overhead_ms + EXTRA_REQUEST_MS),
        versions=())  # no calibration rows of its own: never "calibrated"


@pytest.fixture
def plugin() -> Iterator[PluginEngine]:
    engine = registry.register(PluginEngine())
    try:
        yield engine
    finally:
        registry.unregister(engine.name)


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code, out, err = run(capsys, *args, "--json")
    return code, json.loads(out)


def _plan(capsys: pytest.CaptureFixture[str], engine: str) -> dict:
    code, p = _json(capsys, "plan", MODEL, "--gpu", "h100", "--engine", engine,
                    "--max-model-len", "8192", "--engine-version", "0.12.0")
    assert code == 0, p
    return p


def test_register_keeps_the_registry_consistent(plugin: PluginEngine) -> None:
    assert registry.get("plugin") is plugin
    assert registry.names()[-1] == "plugin"
    from kvplan.engines.registry import NAMES  # computed on access

    assert "plugin" in NAMES
    with pytest.raises(ValueError, match="already registered"):
        registry.register(PluginEngine())


def test_unregistered_after_the_fixture() -> None:
    assert "plugin" not in registry.names()


def test_plan_uses_vllm_accounting_and_its_own_calibration(
        capsys: pytest.CaptureFixture[str], plugin: PluginEngine) -> None:
    mine, vllm = _plan(capsys, "plugin"), _plan(capsys, "vllm")
    assert mine["engine"]["name"] == "plugin"
    assert mine["engine"]["label"] == "PluginServe"
    assert mine["fits"] is True
    assert mine["kv_cache"] == vllm["kv_cache"]
    assert mine["memory"] == vllm["memory"]
    one, ref = mine["performance"]["by_concurrency"][0], vllm["performance"]["by_concurrency"][0]
    assert one["concurrency"] == ref["concurrency"] == 1
    assert one["ttft_ms"] - ref["ttft_ms"] == pytest.approx(EXTRA_REQUEST_MS, abs=0.02)
    assert one["tpot_ms"] == ref["tpot_ms"]
    assert mine["performance"]["calibrated"] is False  # no calibrated releases declared
    assert vllm["performance"]["calibrated"] is True  # 0.12.0 on Hopper: vLLM's fit
    assert mine["performance"]["model_version"].startswith("plugin fit")


def test_compare_has_a_plugin_column(capsys: pytest.CaptureFixture[str],
                                     plugin: PluginEngine) -> None:
    code, out = _json(capsys, "compare", MODEL, "--gpu", "h100", "--max-model-len", "8192")
    assert code == 0
    by_name = {p["engine"]["name"]: p for p in out["plans"]}
    assert list(by_name) == [*registry.names()]
    assert by_name["plugin"]["kv_cache"] == by_name["vllm"]["kv_cache"]
    code, text, _ = run(capsys, "compare", MODEL, "--gpu", "h100", "--max-model-len", "8192")
    assert code == 0 and "PluginServe" in text


def test_sweep_with_the_plugin(capsys: pytest.CaptureFixture[str], plugin: PluginEngine) -> None:
    code, out = _json(capsys, "sweep", MODEL, "--gpus", "h100", "--engine", "plugin",
                      "--max-gpus", "2")
    assert code == 0, out
    options = out["options"]
    assert options and {o["engine"] for o in options} == {"plugin"}
    code, ref = _json(capsys, "sweep", MODEL, "--gpus", "h100", "--engine", "vllm",
                      "--max-gpus", "2")
    assert code == 0
    assert ([o["kv_tokens"] for o in options]
            == [o["kv_tokens"] for o in ref["options"]])


def test_check_recognises_the_plugin_launch_line(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path, plugin: PluginEngine) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        # kvplan: gpu=h100
        plugin-serve run {MODEL} --max-model-len 8192 --gpu-memory-utilization 0.9
        """))
    code, report = _json(capsys, "check", str(script))
    assert code == 0, report
    (row,) = report["deployments"]
    assert row["engine"] == "plugin"
    assert row["status"] == "fits"
    code, ref = _json(capsys, "plan", MODEL, "--gpu", "h100", "--engine", "vllm",
                      "--max-model-len", "8192", "--gpu-memory-utilization", "0.9")
    assert code == 0
    assert row["plan"]["kv_cache"] == ref["kv_cache"]


def test_the_launch_line_is_unknown_without_the_plugin(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(f"# kvplan: gpu=h100\nplugin-serve run {MODEL}\n")
    code, _, _ = run(capsys, "check", str(script), "--json")
    assert code == 2  # no serving command found


class BorrowingEngine(PluginEngine):
    """The same engine declaring no fit of its own: it borrows SGLang's (prefill-first)."""

    name = "plugin-borrowing"
    syntax: DeploySyntax = dataclasses.replace(PluginEngine.syntax,
                                               executables=(("plugin-borrowing", "run"),))
    calibration = Calibration(style="separate", borrows="sglang")


def test_a_borrowed_fit_is_named_and_never_calibrated(capsys: pytest.CaptureFixture[str]) -> None:
    engine = registry.register(BorrowingEngine())
    try:
        p = _plan(capsys, engine.name)
    finally:
        registry.unregister(engine.name)
    assert p["performance"]["model_version"] == (
        "sglang fit (benchmarks/perf_fit.py), borrowed for plugin-borrowing")
    assert p["performance"]["calibrated"] is False


def test_register_refuses_what_it_cannot_plan() -> None:
    class NoLender(PluginEngine):
        name = "plugin-no-lender"
        calibration = Calibration(style="mixed", borrows="not-an-engine")

    class Shouting(PluginEngine):
        name = "Plugin"

    with pytest.raises(ValueError, match="borrows"):
        registry.register(NoLender())
    with pytest.raises(ValueError, match="lower case"):
        registry.register(Shouting())
    with pytest.raises(ValueError, match="own coefficients or borrows"):
        Calibration(style="mixed")
    assert "plugin-no-lender" not in registry.names() and "Plugin" not in registry.names()
