"""Multi-node launch lines: one line per node role for a deployment that spans nodes, as each
engine starts one (docs/nodes.md). `$HEAD_IP` is the head node's address, `$NODE_RANK` the
node's rank, `$NODE<i>_IP` the other nodes' addresses: the user sets them. Pure.

* vLLM, from 0.11.1: every node runs `vllm serve` with `--nnodes N --node-rank R
  --master-addr HEAD`, the non-head nodes with `--headless` (multiprocessing executor across
  nodes: vllm/engine/arg_utils.py `--nnodes/-n`, `--node-rank/-r`, `--master-addr`,
  `--master-port`, vllm-project/vllm PR 23691 "Support MP Executor for multi node distributed
  inference"; docs/serving/parallelism_scaling.md "Running vLLM with MultiProcessing"; first
  release read as 0.11.1, UNVERIFIED to the patch: checked 2026-12-01, the PR is listed in
  vllm-project/vllm's weekly summary of 2025-11-21, i.e. merged 2025-11-14..21, and
  NVIDIA-NeMo/Skills issue 1059 reports the 0.11.1 and 0.11.2 containers changing multi-node
  behaviour ("Tensor parallel size (16) cannot be larger than the number of available GPUs
  (8)"), which fits 0.11.1 but no release note naming the PR was found). Before it: a Ray
  cluster (`ray start --head` on the head, `ray start --address HEAD:6379 --block` on the
  others) and `vllm serve … --distributed-executor-backend ray` on the head (same doc,
  "Running vLLM on a Ray cluster"; `--distributed-executor-backend` in vllm/engine/arg_utils.py).
* vLLM data parallelism across nodes (each DP rank's TP group inside a node): every node runs
  `vllm serve … --data-parallel-size D --data-parallel-size-local D/N --data-parallel-address
  HEAD --data-parallel-rpc-port 13345`, the others with `--headless --data-parallel-start-rank
  R × D/N` (docs/serving/data_parallel_deployment.md, multi-node example; the example's port).
* SGLang: every node runs the same `sglang.launch_server` line with `--nnodes N --node-rank R
  --dist-init-addr HEAD:PORT`; `--tp` is the total over the nodes (sglang/srt/server_args.py
  `nnodes`, `node_rank`, `dist_init_addr`, read in 0.5.x; docs/references/multi_node.md).
* TensorRT-LLM: one `mpirun -np WORLD -H host:per,… trtllm-llmapi-launch trtllm-serve …` line;
  MPI starts every rank, one per GPU (NVIDIA/TensorRT-LLM examples/llm-api/
  llm_mgmn_trtllm_serve.sh, 1.x: "the number of MPI processes should be the same as the model
  world size"; tensorrt_llm/llmapi/trtllm-llmapi-launch).
"""

from __future__ import annotations

from ..specs import NodeLaunch
from ..versions import parse_version

VLLM_MP_MULTINODE_FROM = "0.11.1"
VLLM_SOURCE = ("vllm/engine/arg_utils.py --nnodes/--node-rank/--master-addr (PR 23691, from "
               f"{VLLM_MP_MULTINODE_FROM}, UNVERIFIED to the patch); docs/serving/"
               "parallelism_scaling.md")
VLLM_RAY_SOURCE = ("docs/serving/parallelism_scaling.md 'Running vLLM on a Ray cluster'; "
                   "vllm/engine/arg_utils.py --distributed-executor-backend")
RAY_PORT = 6379  # `ray start --head` default GCS port (Ray docs)
SGLANG_SOURCE = "sglang/srt/server_args.py --nnodes/--node-rank/--dist-init-addr (0.5.x)"
SGLANG_DIST_PORT = 5000  # the port SGLang's multi-node examples give --dist-init-addr
TRTLLM_SOURCE = ("NVIDIA/TensorRT-LLM examples/llm-api/llm_mgmn_trtllm_serve.sh (1.x): one MPI "
                 "rank per GPU through trtllm-llmapi-launch")


def _workers(nodes: int) -> str:
    return "node rank 1" if nodes == 2 else f"node ranks 1 … {nodes - 1} (each its own $NODE_RANK)"


VLLM_DP_SOURCE = ("docs/serving/data_parallel_deployment.md (multi-node: --data-parallel-size-"
                  "local, --data-parallel-address, --data-parallel-rpc-port, --data-parallel-"
                  "start-rank, --headless)")
VLLM_DP_RPC_PORT = 13345  # the port the data-parallel deployment guide's example uses


def vllm_data_parallel(command: str, nodes: int, dp: int) -> list[NodeLaunch]:
    """vLLM's lines for `dp` data-parallel ranks over `nodes` nodes, dp / nodes a node."""
    local = dp // nodes
    base = (f"{command} --data-parallel-size-local {local} --data-parallel-address $HEAD_IP "
            f"--data-parallel-rpc-port {VLLM_DP_RPC_PORT}")
    start = str(local) if nodes == 2 else f"$(( NODE_RANK * {local} ))"
    return [NodeLaunch(role="head (node rank 0: API server, DP ranks 0 … "
                       f"{local - 1})", command=base, source=VLLM_DP_SOURCE),
            NodeLaunch(role=_workers(nodes),
                       command=f"{base} --headless --data-parallel-start-rank {start}",
                       source=VLLM_DP_SOURCE)]


def vllm(command: str, nodes: int, version: str) -> list[NodeLaunch]:
    """vLLM's lines: data-parallel ranks spread over the nodes when the line has
    --data-parallel-size D (D a multiple of the nodes); else multiprocessing across nodes from
    0.11.1, a Ray cluster before."""
    dp = _flag_int(command, "--data-parallel-size")
    if dp > 1 and dp % nodes == 0:
        return vllm_data_parallel(command, nodes, dp)
    rank = "1" if nodes == 2 else "$NODE_RANK"
    if parse_version(version) >= parse_version(VLLM_MP_MULTINODE_FROM):
        base = f"{command} --nnodes {nodes}"
        return [NodeLaunch(role="head (node rank 0)",
                           command=f"{base} --node-rank 0 --master-addr $HEAD_IP",
                           source=VLLM_SOURCE),
                NodeLaunch(role=_workers(nodes),
                           command=f"{base} --node-rank {rank} --master-addr $HEAD_IP --headless",
                           source=VLLM_SOURCE)]
    return [NodeLaunch(role="head (Ray head, then the server)",
                       command=f"ray start --head --port {RAY_PORT} && "
                       f"{command} --distributed-executor-backend ray",
                       source=VLLM_RAY_SOURCE),
            NodeLaunch(role=_workers(nodes).split(" (")[0] + " (Ray workers)",
                       command=f"ray start --address $HEAD_IP:{RAY_PORT} --block",
                       source=VLLM_RAY_SOURCE)]


def sglang(command: str, nodes: int) -> list[NodeLaunch]:
    """SGLang's lines: the same server line on every node, each with its rank."""
    base = f"{command} --nnodes {nodes} --dist-init-addr $HEAD_IP:{SGLANG_DIST_PORT}"
    rank = "1" if nodes == 2 else "$NODE_RANK"
    return [NodeLaunch(role="head (node rank 0)", command=f"{base} --node-rank 0",
                       source=SGLANG_SOURCE),
            NodeLaunch(role=_workers(nodes), command=f"{base} --node-rank {rank}",
                       source=SGLANG_SOURCE)]


def trtllm(command: str, nodes: int, gpus_per_node: int) -> list[NodeLaunch]:
    """TensorRT-LLM's line: mpirun from one node starts a rank per GPU on every node. Lines
    before the server line (an options file, a quantize step) run first, on every node."""
    *before, serve = command.split("\n")
    hosts = ",".join(f"{'$HEAD_IP' if i == 0 else f'$NODE{i}_IP'}:{gpus_per_node}"
                     for i in range(nodes))
    line = (f"mpirun -np {nodes * gpus_per_node} -H {hosts} trtllm-llmapi-launch {serve}")
    return [NodeLaunch(role="any one node (MPI starts every rank; the files it reads must be on "
                       "every node)", command="\n".join([*before, line]), source=TRTLLM_SOURCE)]


def _flag_int(command: str, flag: str) -> int:
    """The integer after `flag` in a generated serve line (1 when absent)."""
    words = command.split()
    for i, w in enumerate(words[:-1]):
        if w == flag and words[i + 1].isdigit():
            return int(words[i + 1])
    return 1
