"""vLLM's --all2all-backend where nothing reads it: vLLM dispatches a MoE layer through the
all-to-all backend only when FusedMoEParallelConfig.use_all2all_kernels, `dp_size > 1 and
use_ep` (vllm/model_executor/layers/fused_moe/config.py, read in the PyPI wheels 0.10.0 -
0.12.0). The flag the user gave stays in the launch line, with a warning."""

from __future__ import annotations

import pytest

from kvplan import plan

MOE = "Qwen/Qwen3-30B-A3B"
CODE = "a2a-backend-unused"


@pytest.mark.parametrize(("layout", "why"), [
    ({"tensor_parallel_size": 2, "enable_expert_parallel": True}, "-dp is 1"),
    ({"tensor_parallel_size": 1, "data_parallel_size": 2}, "expert parallelism is off"),
])
def test_backend_without_dp_and_ep_is_kept_with_a_warning(layout, why):
    p = plan(MOE, "h100", moe_a2a_backend="deepep_low_latency", **layout)
    assert "--all2all-backend deepep_low_latency" in p.command
    warn = [x for x in p.problems if x.code == CODE]
    assert len(warn) == 1 and warn[0].severity == "warning"
    assert why in warn[0].message and "--enable-expert-parallel" in warn[0].message


def test_backend_with_dp_and_ep_is_used_without_a_warning():
    p = plan(MOE, "h100", tensor_parallel_size=1, data_parallel_size=2,
             enable_expert_parallel=True, moe_a2a_backend="deepep_low_latency")
    assert "--all2all-backend deepep_low_latency" in p.command
    assert not any(x.code == CODE for x in p.problems)
