"""`kvplan check` reads multi-node launch lines (engines/multinode.py, deploy/launchers.py):
the node count from each engine's spelling, the GPUs per node from the layout ÷ nodes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from clirun import run

from kvplan.deploy.launchers import launcher_nodes


def _check(capsys, tmp_path: Path, text: str) -> tuple[int, dict]:
    path = tmp_path / "serve.sh"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    code, out, _err = run(capsys, "check", str(path), "--gpu", "h100-sxm-80gb", "--json")
    return code, json.loads(out)


@pytest.mark.parametrize("line, links", [
    # SGLang: --tp is the total over the nodes (sglang/srt/server_args.py): 16 ÷ 2 = 8 per node
    ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-405B --tp 16 "
     "--nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000 --context-length 8192",
     ("scale-out", "none")),
    # vLLM multiprocessing across nodes (vllm/engine/arg_utils.py --nnodes, 0.11.1+)
    ("vllm serve meta-llama/Llama-3.1-405B -tp 8 -pp 2 --nnodes 2 --node-rank 1 "
     "--master-addr 10.0.0.1 --headless --max-model-len 8192", ("scale-up", "scale-out")),
    # TensorRT-LLM through mpirun: two hosts in -H
    ("mpirun -np 16 -H 10.0.0.1:8,10.0.0.2:8 trtllm-llmapi-launch trtllm-serve "
     "meta-llama/Llama-3.1-405B --tp_size 16 --max_seq_len 8192", ("scale-out", "none")),
])
def test_multi_node_lines_are_two_nodes_of_eight(capsys, tmp_path, line, links):
    code, doc = _check(capsys, tmp_path, line)
    assert code in (0, 1)
    (dep,) = doc["deployments"]
    nodes = dep["plan"]["nodes"]
    assert (nodes["nodes"], nodes["gpus_per_node"]) == (2, 8)
    assert (nodes["tensor_parallel_link"], nodes["pipeline_link"]) == links
    codes = [p["code"] for p in dep["plan"]["problems"]]
    assert ("tp-crosses-nodes" in codes) == (links[0] == "scale-out")


def test_nodes_that_do_not_divide_the_layout_exit_2(capsys, tmp_path):
    code, out, err = run(capsys, "check", str(_write(tmp_path, "vllm serve meta-llama/Llama-3.1-"
                                                     "70B -tp 8 --nnodes 3")),
                         "--gpu", "h100-sxm-80gb", "--json")
    assert code == 2
    assert "--nodes 3" in out + err


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.sh"
    path.write_text(text + "\n")
    return path


@pytest.mark.parametrize("tokens, nodes", [
    (["mpirun", "-np", "16", "-H", "a:8,b:8", "trtllm-serve"], 2),
    (["mpirun", "-np", "32", "-N", "8", "trtllm-serve"], 4),
    (["mpirun", "-np", "16", "--hostfile", "hosts", "trtllm-serve"], None),
    (["srun", "-N", "2", "--ntasks-per-node", "8", "trtllm-llmapi-launch", "trtllm-serve"], 2),
    (["srun", "--nodes=3", "trtllm-serve"], 3),
    (["trtllm-serve"], None),
])
def test_launcher_nodes(tokens, nodes):
    assert launcher_nodes(tokens) == nodes
