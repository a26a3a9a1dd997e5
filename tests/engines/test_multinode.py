"""Multi-node launch lines (engines/multinode.py): one line per node role, in each engine's own
spelling (vllm/engine/arg_utils.py --nnodes/--node-rank/--master-addr from 0.11.1, Ray before;
sglang/srt/server_args.py --nnodes/--node-rank/--dist-init-addr; TensorRT-LLM mpirun +
trtllm-llmapi-launch)."""

from __future__ import annotations

import shlex

from kvplan.api import plan

MODEL = "meta-llama/Llama-3.1-405B"


def _plan(engine: str, **knobs):
    return plan(MODEL, "h100-sxm-80gb", engine=engine, offline=True, max_model_len=8192,
                **knobs)


def test_vllm_head_and_headless_worker():
    p = _plan("vllm", tensor_parallel_size=8, pipeline_parallel_size=2)
    assert p.nodes is not None
    head, worker = p.nodes.launch
    assert head.command.startswith(p.command + " --nnodes 2 --node-rank 0 --master-addr")
    args = shlex.split(worker.command)
    assert args[args.index("--node-rank") + 1] == "1" and args[-1] == "--headless"
    assert "arg_utils.py" in head.source


def test_vllm_before_multiprocessing_multinode_uses_ray():
    p = _plan("vllm", engine_version="0.10.1", tensor_parallel_size=8, pipeline_parallel_size=2)
    assert p.nodes is not None
    head, worker = p.nodes.launch
    assert "ray start --head" in head.command
    assert head.command.endswith("--distributed-executor-backend ray")
    assert worker.command.startswith("ray start --address $HEAD_IP:6379")


def test_sglang_every_node_runs_the_server_with_its_rank():
    p = _plan("sglang", tensor_parallel_size=16)
    assert p.nodes is not None
    ranks = []
    for line in p.nodes.launch:
        args = shlex.split(line.command.replace("$HEAD_IP", "10.0.0.1"))
        assert args[args.index("--nnodes") + 1] == "2"
        assert args[args.index("--tp-size") + 1] == "16"  # the total over both nodes
        assert args[args.index("--dist-init-addr") + 1] == "10.0.0.1:5000"
        ranks.append(args[args.index("--node-rank") + 1])
    assert ranks == ["0", "1"]


def test_trtllm_one_mpirun_line_a_rank_per_gpu():
    p = _plan("trtllm", tensor_parallel_size=8, pipeline_parallel_size=2)
    assert p.nodes is not None
    (line,) = p.nodes.launch
    serve = line.command.splitlines()[-1]
    assert serve.startswith("mpirun -np 16 -H $HEAD_IP:8,$NODE1_IP:8 trtllm-llmapi-launch "
                            "trtllm-serve ")


def test_one_node_has_no_launch_lines():
    p = _plan("vllm", tensor_parallel_size=8)
    assert p.nodes is not None and p.nodes.nodes == 1 and p.nodes.launch == []


def test_tgi_spanning_nodes_says_it_once():
    """TGI's own error (its launcher starts every shard on one host) already refuses the layout
    over nodes: the planner's generic no-multi-node-launch warning is not added to repeat it
    (Engine.host_errors)."""
    p = _plan("tgi", tensor_parallel_size=16)
    codes = [x.code for x in p.problems]
    assert "tgi-shards-exceed-node" in codes and "no-multi-node-launch" not in codes


def test_an_engine_without_its_own_host_error_gets_the_generic_warning(monkeypatch):
    from kvplan.engines.tgi import TgiEngine

    monkeypatch.setattr(TgiEngine, "host_errors", frozenset())
    p = _plan("tgi", tensor_parallel_size=16)
    assert any(x.code == "no-multi-node-launch" for x in p.problems)


def test_vllm_data_parallel_ranks_over_nodes_use_the_dp_flags():
    """-dp 32 over 4 nodes of 8 (docs/serving/data_parallel_deployment.md): 8 local ranks a
    node, the head serves the API, the others run headless from rank R × 8."""
    from kvplan.engines import multinode

    head, rest = multinode.vllm("vllm serve m --data-parallel-size 32 --enable-expert-parallel",
                                4, "0.11.1")
    assert "--data-parallel-size-local 8 --data-parallel-address $HEAD_IP" in head.command
    assert "--headless" not in head.command and "--nnodes" not in head.command
    assert rest.command.endswith("--headless --data-parallel-start-rank $(( NODE_RANK * 8 ))")
    two = multinode.vllm("vllm serve m --data-parallel-size 16", 2, "0.11.1")[1]
    assert two.command.endswith("--data-parallel-start-rank 8")
    # TP across nodes keeps --nnodes (no data parallelism on the line)
    assert "--nnodes 2" in multinode.vllm("vllm serve m -tp 16", 2, "0.11.1")[0].command
