"""The registry imports a built-in engine's module when the engine is first asked for: a plan
imports only its own engine, and every reader of the whole registry still sees every engine in
the declared order (kvplan/engines/registry.py BUILT_IN)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvplan.engines import registry

OTHERS = ("kvplan.engines.sglang", "kvplan.engines.tgi", "kvplan.engines.trtllm")


def _fresh(code: str) -> str:
    """stdout of `code` in a new interpreter (this checkout's kvplan, as the other layer tests)."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_a_cli_plan_imports_only_its_own_engine() -> None:
    """`kvplan plan MODEL --gpu … --json` (vLLM, the default) exits 0 and never imports the
    other engines' modules; `--engine trtllm` imports TensorRT-LLM and vLLM (whose fit it
    borrows), not SGLang or TGI; `compare` imports all four."""
    run = ("import runpy, sys, contextlib, io\n"
           "sys.argv = ['kvplan', 'plan', 'meta-llama/Llama-3.1-8B-Instruct', "
           "'--gpu', 'h100-sxm-80gb', '--json'{extra}]\n"
           "code = 0\n"
           "try:\n"
           "    with contextlib.redirect_stdout(io.StringIO()):\n"
           "        runpy.run_module('kvplan', run_name='__main__')\n"
           "except SystemExit as e:\n"
           "    code = e.code or 0\n"
           "names = ('vllm', 'sglang', 'tgi', 'trtllm')\n"
           "print(code, ','.join(n for n in names if 'kvplan.engines.' + n in sys.modules))")
    assert _fresh(run.format(extra="")) == "0 vllm"
    assert _fresh(run.format(extra=", '--engine', 'trtllm'")) == "0 vllm,trtllm"
    compare = run.format(extra="").replace("'plan', ", "'compare', ").replace(", '--json'", "")
    assert _fresh(compare) == "0 vllm,sglang,tgi,trtllm"


def test_names_import_nothing_and_every_reader_sees_every_engine_in_order() -> None:
    """names() and the engine list in help texts need no engine module; engines(), ENGINES and
    fitted_coefficients() import the rest, in BUILT_IN order whatever was asked for first."""
    code = ("import sys\n"
            "from kvplan.engines import registry\n"
            "n = registry.names()\n"
            "before = [m for m in sys.modules if m.startswith('kvplan.engines.') and "
            "m.split('.')[-1] in n]\n"
            "registry.get('trtllm')\n"
            "print(','.join(n), '|', ','.join(before), '|', ','.join(registry.ENGINES), '|', "
            "','.join(registry.fitted_coefficients()))")
    assert _fresh(code) == ("vllm,sglang,tgi,trtllm |  | vllm,sglang,tgi,trtllm | "
                            "vllm,sglang,trtllm")
    assert registry.names() == registry.BUILT_IN
    assert list(registry.engines()) == list(registry.BUILT_IN)
    assert [e.name for e in registry.ENGINES.values()] == list(registry.BUILT_IN)


def test_unregistering_an_unknown_engine_names_it() -> None:
    with pytest.raises(ValueError, match="no engine named 'nosuch' is registered"):
        registry.unregister("nosuch")
