"""Which knobs an engine has is declared once, by the engine (its flag table and `settings`);
the knobs it refuses are derived from that, never listed."""

from __future__ import annotations

import pytest

from kvplan.engines import registry
from kvplan.engines.base import DeploySyntax, unsupported_knobs
from kvplan.errors import InvalidInputError
from kvplan.knobs import KNOB_NAMES, KVPLAN_KNOBS, Knobs
from kvplan.planner.plan import _check_supported, evaluate
from kvplan.sources.catalog import resolve_gpu, resolve_model
from kvplan.specs import Deployment


@pytest.mark.parametrize("name", sorted(registry.ENGINES))
def test_every_knob_is_declared_or_refused(name):
    eng = registry.get(name)
    declared = {k for k, _ in eng.syntax.cli_flags.values() if k in KNOB_NAMES} | set(eng.settings)
    assert declared.isdisjoint(eng.unsupported)
    assert declared | eng.unsupported | KVPLAN_KNOBS == set(KNOB_NAMES)


def test_a_knob_without_a_flag_spec_is_refused():
    table = {"--tp": ("tensor_parallel_size", "int"), "--model": ("model", "str")}
    refused = unsupported_knobs(table, {})
    assert "tensor_parallel_size" not in refused and "model" not in refused
    assert "max_model_len" in refused and "gpu_memory_gib" not in refused  # kvplan's own
    assert "max_model_len" not in unsupported_knobs(table, {"max_model_len": "a YAML field"})


def test_a_subclass_with_a_smaller_flag_table_refuses_what_it_dropped():
    base = registry.get("vllm")
    table = {f: v for f, v in base.syntax.cli_flags.items() if v[0] != "block_size"}

    class NoBlocks(type(base)):  # type: ignore[misc]
        name = "noblocks"
        label = "NoBlocks"
        syntax = DeploySyntax(cli_flags=table)

    eng = NoBlocks()
    assert eng.unsupported == base.unsupported | {"block_size"}
    with pytest.raises(InvalidInputError) as e:
        _check_supported(eng, Knobs.parse({"block_size": 32}))
    # the message is the standard one; the engines named are those of the registry that have it
    assert e.value.message == "--block-size is not a setting NoBlocks has"
    assert e.value.hint == "drop it, or plan with --engine vllm / trtllm"


@pytest.mark.parametrize(("name", "options", "fields"), [
    ("vllm", "VllmOptions", {"usage_context", "kv_offloading_size", "kv_offloading_backend",
                             "limit_mm_per_prompt"}),
    ("sglang", "SglangOptions", {"enable_hierarchical_cache", "hicache_ratio", "hicache_size",
                                 "lora_paths"}),
    ("tgi", "TgiOptions", {"host_gpus", "host", "prefill_chunking", "rocm"}),
    ("trtllm", "TrtllmOptions", {"backend", "host_cache_size", "max_beam_width"}),
])
def test_a_deployment_is_common_fields_plus_the_engines_own_options(name, options, fields):
    eng = registry.get(name)
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    dep, _ = evaluate(eng, m, resolve_gpu("h100"), Knobs(), eng.newest_version)
    assert type(dep.options).__name__ == options
    own = set(type(dep.options).model_fields)
    assert fields <= own
    assert not own & set(Deployment.model_fields)  # declared once: by the engine


# --- instead --- an engine's own way of doing what a knob it lacks does (Engine.instead)
@pytest.mark.parametrize(("engine", "given", "own"), [
    ("sglang", {"enforce_eager": True}, "SGLang's own is --disable-cuda-graph"),
    ("sglang", {"block_size": 32}, "SGLang's own is --page-size"),
    ("sglang", {"kv_offloading_size": 10},
     "SGLang's own is --enable-hierarchical-cache with --hicache-size"),
    ("trtllm", {"kv_offloading_size": 10},
     "TensorRT-LLM's own is kv_cache_config.host_cache_size"),
    ("tgi", {"enable_prefix_caching": False},
     "TGI's own is the launcher's PREFIX_CACHING environment variable"),
    ("tgi", {"enforce_eager": True}, "TGI's own is --cuda-graphs 0"),
    ("vllm", {"hicache_size": 10}, "vLLM's own is --kv-offloading-size"),
])
def test_a_refusal_names_the_engines_own_equivalent(engine, given, own):
    with pytest.raises(InvalidInputError) as e:
        _check_supported(registry.get(engine), Knobs.parse(given))
    assert e.value.hint.startswith(own)
    assert "; else drop it, or plan with --engine " in e.value.hint


def test_the_hint_reads_whole_for_sglang_enforce_eager():
    with pytest.raises(InvalidInputError) as e:
        _check_supported(registry.get("sglang"), Knobs.parse({"enforce_eager": True}))
    assert e.value.message == "--enforce-eager is not a setting SGLang has"
    assert e.value.hint == ("SGLang's own is --disable-cuda-graph (kvplan does not model it: the "
                            "plan keeps SGLang's CUDA graphs); else drop it, or plan with "
                            "--engine vllm")


def test_several_refused_knobs_each_name_their_own():
    with pytest.raises(InvalidInputError) as e:
        _check_supported(registry.get("tgi"), Knobs.parse({"enforce_eager": True,
                                                           "block_size": 16}))
    assert e.value.hint == ("for --enforce-eager TGI's own is --cuda-graphs 0 (kvplan does not "
                            "model TGI's CUDA graphs); else drop them, or plan with --engine vllm")


@pytest.mark.parametrize("name", sorted(registry.ENGINES))
def test_instead_names_only_knobs_the_engine_lacks(name):
    eng = registry.get(name)
    assert set(eng.instead) <= eng.unsupported


def test_an_instead_for_a_knob_the_engine_has_is_refused_at_declaration():
    base = registry.get("vllm")
    with pytest.raises(TypeError, match="names knobs the engine has"):
        class Odd(type(base)):  # type: ignore[misc]  # noqa: F841
            name = "odd"
            instead = {"block_size": "--its-own"}
