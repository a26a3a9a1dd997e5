"""TGI on one host, TGI on ROCm, and the JSON lengths of its launch line.

* One host: the launcher starts every shard on the local machine (launcher/src/main.rs
  `spawn_shards`, `for rank in 0..num_shard`, v2.4.0 and v3.3.7) and each shard asserts
  WORLD_SIZE <= torch.cuda.device_count() (server/text_generation_server/utils/dist.py, v2.4.0
  and v3.3.7): more shards than a node's GPUs do not start.
* ROCm: Dockerfile_amd (v3.0.0 – v3.3.7) sets ATTENTION=paged (16-token blocks: models/globals.py),
  PREFIX_CACHING=0 and PREFILL_CHUNKING=0; without chunking the router refuses max_input_tokens
  above max_batch_prefill_tokens (backends/v3/src/main.rs, v3.3.7) and the warm-up sets
  max_total_tokens to the tokens it prefilled (models/flash_causal_lm.py `warmup`, v3.3.7).
"""

from __future__ import annotations

import shlex

import pytest
from clirun import run

from kvplan import Workload, plan
from kvplan.errors import InvalidInputError

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"
LLAMA_405B = "meta-llama/Llama-3.1-405B"


def _flag(command: str, flag: str) -> int | None:
    args = shlex.split(command)
    return int(args[args.index(flag) + 1]) if flag in args else None


def _codes(p) -> dict[str, str]:
    return {q.code: q.severity for q in p.problems}


# ------------------------------------------------------------------ one host


def test_shards_beyond_one_node_do_not_fit_and_name_the_alternatives():
    """GB200 NVL72 has 4 GPUs per node: TGI's 8 shards cannot start there."""
    p = plan(LLAMA_405B, "gb200", engine="tgi", tensor_parallel_size=8)
    assert not p.fits
    err = next(q for q in p.problems if q.code == "tgi-shards-exceed-node")
    assert err.severity == "error"
    assert "8 shards exceed the 4 GPUs per node of GB200 NVL72" in err.message
    assert "-tp 4 (--num-shard 4), the largest valid on one node" in err.message
    assert "--engine vllm, sglang or trtllm" in err.message
    assert "hold 8 or more GPUs per node" in err.message


def test_shards_beyond_one_node_exit_1(capsys):
    code, out, _ = run(capsys, "plan", "deepseek-v3", "--gpu", "gb200", "-tp", "8",
                       "--engine", "tgi")
    assert code == 1
    assert "DOES NOT FIT" in out


def test_shards_beyond_one_node_are_said_once(capsys):
    """TGI's error names the one host; the planner's generic 'kvplan knows no multi-node launch
    for TGI' warning repeated it (Engine.host_errors)."""
    code, out, _ = run(capsys, "plan", "llama-3.1-405b", "--gpu", "gb200", "-tp", "8",
                       "--engine", "tgi")
    assert code == 1 and "tgi-shards-exceed-node" in out
    assert "no-multi-node-launch" not in out and "knows no multi-node launch" not in out


def test_the_automatic_tp_never_picks_more_shards_than_a_node_holds():
    """Llama-3.1-405B in bf16 fits 8 GB200s but not 4: TGI has no TP that starts there."""
    p = plan(LLAMA_405B, "gb200", engine="tgi")
    assert p.recommendations.tensor_parallel_size.value is None
    assert "--num-shard 8" not in p.command
    # a node that holds them: an 8-GPU H200 server
    assert plan(LLAMA_405B, "h200", engine="tgi", tensor_parallel_size=8).fits


def test_the_users_own_node_size_and_node_count_decide():
    big = plan(LLAMA_405B, "gb200", engine="tgi", tensor_parallel_size=8, gpus_per_node=8)
    assert big.fits and "tgi-shards-exceed-node" not in _codes(big)
    spread = plan(LLAMA_70B, "h100", engine="tgi", tensor_parallel_size=8, nodes=2)
    assert not spread.fits and _codes(spread)["tgi-shards-exceed-node"] == "error"


# ------------------------------------------------------------------ ROCm


def test_rocm_runs_paged_attention_without_chunking_by_default():
    p = plan(LLAMA_70B, "mi300x", engine="tgi")
    assert p.fits
    assert p.kv_cache.block_size == 16
    assert _codes(p)["tgi-no-prefill-chunking"] == "info"
    prefill = p.inputs["max_num_batched_tokens"].value
    assert prefill == 4096  # no nvidia-smi on ROCm: the launcher's fallback
    # the warm-up's batch decides max_total_tokens: the tokens it prefilled
    assert p.inputs["max_model_len"].value == prefill
    assert _flag(p.command, "--max-input-tokens") == prefill - 1
    assert _flag(p.command, "--max-total-tokens") == prefill


def test_rocm_caps_the_input_of_a_given_total_at_the_prefill_batch():
    p = plan(LLAMA_70B, "mi300x", engine="tgi", max_model_len=32768)
    assert _flag(p.command, "--max-total-tokens") == 32768
    assert _flag(p.command, "--max-input-tokens") == 4096
    assert "--max-batch-prefill-tokens" not in p.command
    assert p.inputs["max_input_tokens"].value == 4096
    assert p.inputs["max_input_tokens"].source == "kvplan-default"
    assert _codes(p)["tgi-no-prefill-chunking"] == "warning"


def test_rocm_raises_the_prefill_for_a_given_input_and_sizes_the_warmup_from_it():
    base = plan(LLAMA_70B, "mi300x", engine="tgi", max_model_len=40000)
    p = plan(LLAMA_70B, "mi300x", engine="tgi", max_input_tokens=32000, max_model_len=40000)
    assert _flag(p.command, "--max-input-tokens") == 32000
    assert _flag(p.command, "--max-batch-prefill-tokens") == 32000
    assert p.inputs["max_num_batched_tokens"].value == 32000
    assert p.memory.stages[0].activation_bytes > base.memory.stages[0].activation_bytes
    assert p.kv_cache.num_blocks < base.kv_cache.num_blocks
    # without a total the warm-up's batch sets it, which must exceed the input
    only = plan(LLAMA_70B, "mi300x", engine="tgi", max_input_tokens=32000)
    assert _flag(only.command, "--max-batch-prefill-tokens") == 32001
    assert _flag(only.command, "--max-total-tokens") == 32001
    # `kvplan check` of a line without it: the note names the launcher's default it would get
    note = next(q for q in p.problems if q.code == "tgi-no-prefill-chunking")
    assert note.severity == "warning" and "the launcher's 4,096" in note.message


@pytest.mark.parametrize("knobs", [
    {}, {"max_model_len": 32768}, {"max_input_tokens": 8000},
    {"max_input_tokens": 8000, "max_model_len": 16000}, {"max_num_batched_tokens": 2048},
    {"workload": Workload(target_concurrency=8)},
])
def test_every_rocm_line_keeps_the_input_within_the_prefill_batch(knobs):
    p = plan(LLAMA_8B, "mi300x", engine="tgi", **knobs)
    prefill = (_flag(p.command, "--max-batch-prefill-tokens")
               or p.inputs["max_num_batched_tokens"].value)
    assert _flag(p.command, "--max-input-tokens") <= prefill


def test_rocm_refuses_a_given_prefill_below_a_given_input():
    with pytest.raises(InvalidInputError, match="without prefill chunking"):
        plan(LLAMA_8B, "mi300x", engine="tgi", max_input_tokens=5000, max_model_len=8000,
             max_num_batched_tokens=4096)


def test_nvidia_keeps_chunking_and_long_inputs():
    p = plan(LLAMA_8B, "h100", engine="tgi")
    assert "tgi-no-prefill-chunking" not in _codes(p)
    assert p.kv_cache.block_size == 1
    assert _flag(p.command, "--max-input-tokens") == 131071


def test_speculation_turns_chunking_off():
    """model.py `Model.__init__` (v3.3.7): speculate != 0 turns prefill chunking off."""
    p = plan(LLAMA_8B, "h100", engine="tgi",
             speculative_config={"method": "ngram", "num_speculative_tokens": 2})
    assert "tgi-no-prefill-chunking" in _codes(p)
    assert _flag(p.command, "--max-input-tokens") <= p.inputs["max_num_batched_tokens"].value


# ------------------------------------------------------------------ JSON lengths


@pytest.mark.parametrize(("gpu", "knobs"), [
    ("h100", {}), ("l4", {}), ("mi300x", {}), ("h100", {"max_model_len": 8192})])
def test_json_inputs_state_the_input_length_the_line_sets(gpu, knobs):
    """inputs are the deployment in force with their sources (an engine default included, as
    max_model_len is): the warm-up's max_input_tokens is the line's."""
    p = plan(LLAMA_8B, gpu, engine="tgi", **knobs)
    assert p.inputs["max_input_tokens"].value == _flag(p.command, "--max-input-tokens")
    assert p.inputs["max_model_len"].value == _flag(p.command, "--max-total-tokens")


def test_rocm_has_no_prefix_caching():
    """Dockerfile_amd sets PREFIX_CACHING=0: a shared prefix is not held once on ROCm."""
    w = Workload(shared_prefix_tokens=2048)
    assert plan(LLAMA_8B, "h100", engine="tgi", workload=w
                ).kv_cache.effective_max_concurrency_with_prefix is not None
    assert plan(LLAMA_8B, "mi300x", engine="tgi", workload=w
                ).kv_cache.effective_max_concurrency_with_prefix is None


def test_emit_refuses_tgi_shards_beyond_a_node_with_the_plans_own_reason():
    """--emit of a plan that does not start says why the plan says so: TGI's shards beyond one
    host, not 'the weights and KV cache do not fit' (405B fits 8 GB200s' memory)."""
    from kvplan.deploy.emit import emit
    from kvplan.errors import KvplanError

    p = plan("meta-llama/Llama-3.1-405B", "gb200", engine="tgi", tensor_parallel_size=8)
    with pytest.raises(KvplanError) as e:
        emit(p, "k8s")
    assert e.value.code == "emit-does-not-fit"
    assert "TGI runs every shard on one host" in e.value.message
    assert "weights and KV cache" not in e.value.message


def test_gemma3_without_lengths_on_rocm_plans_the_warm_up_its_line_runs(tmp_path):
    """Without lengths or chunking TGI settles on prefill − 1 input tokens and the plan's line
    writes them; the warm-up of that line is two requests (7,999 + 1), whose Gemma 3 masks
    (gemma3_mask_bytes) the plan sized as one 8,000-token request, so `check` of the plan's own
    line read 394,912 KV tokens against the plan's 396,544 (found by the emit round-trip
    campaign)."""
    from kvplan.deploy.check import Policy, check_files

    p = plan("google/gemma-3-12b-it", "mi300x", engine="tgi")
    assert "--max-input-tokens 7999 --max-total-tokens 8000" in p.command
    f = tmp_path / "serve.sh"
    f.write_text(f"# kvplan: gpu=mi300x engine-version={p.engine.version}\n{p.command}\n")
    (row,) = check_files([f], policy=Policy(), sets={}, offline=True).deployments
    assert row.plan is not None and row.plan.kv_cache.tokens == p.kv_cache.tokens
