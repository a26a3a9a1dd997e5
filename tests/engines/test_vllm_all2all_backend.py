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


DENSE_COMPOSE = """# kvplan: gpu=h100
services:
  llama:
    image: vllm/vllm-openai:v{tag}
    environment:
      - VLLM_ALL2ALL_BACKEND=naive
    command: --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768
"""


@pytest.mark.parametrize(("tag", "spelled", "prefix"), [
    ("0.10.0", "VLLM_ALL2ALL_BACKEND=naive", True),  # no --all2all-backend before 0.11.1
    ("0.14.0", "--all2all-backend naive", False),
])
def test_an_unused_backend_from_a_file_is_kept_and_the_warning_names_it_as_the_line_does(
        tag, spelled, prefix, tmp_path):
    """A compose file sets VLLM_ALL2ALL_BACKEND for a dense model: the plan's line keeps it as
    the file gave it (kvplan keeps every setting the user gave, warning where it does nothing),
    and the warning names it as that line spells it, not as kvplan's --moe-a2a-backend."""
    from kvplan.deploy.check import Policy, check_files

    f = tmp_path / "docker-compose.yaml"
    f.write_text(DENSE_COMPOSE.format(tag=tag))
    (row,) = check_files([f], policy=Policy(), sets={}, offline=True).deployments
    assert row.plan is not None
    assert row.plan.command.startswith(spelled) is prefix and spelled in row.plan.command
    (warn,) = [x for x in row.plan.problems if x.code == CODE]
    assert warn.message.startswith(f"{spelled} (kvplan's --moe-a2a-backend) has no effect here")
    assert "the model has no experts" in warn.message and "keeps it" in warn.message
