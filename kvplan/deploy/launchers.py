"""The nodes a launcher spreads a serving command over, read from the tokens before the
engine's own entry point: `mpirun` (Open MPI: `-H/--host host:slots,…` names the hosts,
`-np N` with `-N/--npernode/-npernode K` gives N ÷ K) and Slurm's `srun -N/--nodes N`. This is
how TensorRT-LLM multi-node lines are written (`mpirun … trtllm-llmapi-launch trtllm-serve …`,
NVIDIA/TensorRT-LLM examples/llm-api/llm_mgmn_trtllm_serve.sh); vLLM and SGLang say it in
their own `--nnodes` flag instead."""

from __future__ import annotations

_NP = ("-np", "-n", "--np")
_PER_NODE = ("-N", "--npernode", "-npernode")
_HOSTS = ("-H", "--host", "-host")


def _value(tokens: list[str], k: int) -> tuple[str, str | None]:
    """(flag, value) of tokens[k]: `--flag=value`, `-N2`-style short forms are not read."""
    tok = tokens[k]
    if tok.startswith("--") and "=" in tok:
        flag, value = tok.split("=", 1)
        return flag, value
    return tok, tokens[k + 1] if k + 1 < len(tokens) else None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() and int(text) > 0 else None


def _mpirun(tokens: list[str]) -> int | None:
    hosts: int | None = None
    np = per = None
    for k in range(len(tokens)):
        flag, value = _value(tokens, k)
        if flag in _HOSTS and value:
            hosts = len({h.split(":", 1)[0] for h in value.split(",") if h})
        elif flag in _NP:
            np = _int(value)
        elif flag in _PER_NODE:
            per = _int(value)
    if hosts:
        return hosts
    return np // per if np and per and np % per == 0 else None


def _srun(tokens: list[str]) -> int | None:
    for k in range(len(tokens)):
        flag, value = _value(tokens, k)
        if flag in ("-N", "--nodes") and value:
            return _int(value.split("-", 1)[0])  # `-N 2` or a `2-4` range: its minimum
    return None


def launcher_nodes(before: list[str]) -> int | None:
    """Nodes the launcher tokens before a serving command name; None: none named (or no
    launcher)."""
    for k, tok in enumerate(before):
        base = tok.rsplit("/", 1)[-1]
        if base in ("mpirun", "mpiexec"):
            return _mpirun(before[k + 1:])
        if base == "srun":
            return _srun(before[k + 1:])
    return None
