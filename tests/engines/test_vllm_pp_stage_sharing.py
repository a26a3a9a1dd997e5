"""vLLM's memory plan works a pipeline stage out once when later ones are alike (engines/vllm.py
plan_memory: a stage before the last, no LoRA, every layer alike): the stages it shares equal
the ones worked out one by one. The same model with its layers spelled out as full attention
(ModelSpec.layer_types, which the KV specs read the same way) takes the unshared path."""

from __future__ import annotations

import pytest

from kvplan.api import plan
from kvplan.sources.catalog import resolve_model


@pytest.mark.parametrize(("model", "pp", "tp"), [
    ("meta-llama/Llama-3.1-70B-Instruct", 4, 2),   # 80 layers: 20 per stage
    ("meta-llama/Llama-3.1-405B", 8, 2),            # 126 layers: uneven stages
    ("Qwen/Qwen2.5-32B-Instruct", 3, 2),            # 64 layers over 3 stages
    ("deepseek-ai/DeepSeek-V2-Lite", 4, 1),         # a dense first layer, then MoE layers
])
def test_shared_stages_equal_the_stages_worked_out_one_by_one(model: str, pp: int,
                                                               tp: int) -> None:
    m = resolve_model(model)
    spelled = m.model_copy(update={"layer_types": ["full"] * m.num_layers})
    shared = plan(m, "h100", pipeline_parallel_size=pp, tensor_parallel_size=tp)
    one_by_one = plan(spelled, "h100", pipeline_parallel_size=pp, tensor_parallel_size=tp)
    assert shared.fits and len(shared.memory.stages) == pp
    assert shared.memory.model_dump() == one_by_one.memory.model_dump()
    assert shared.kv_cache.model_dump() == one_by_one.kv_cache.model_dump()
