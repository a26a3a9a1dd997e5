"""SGLang's expert parallelism and DP attention (docs/expert-parallel.md). Pure functions.

SGLang spells a layout by its GPUs: `--tp-size N` is every GPU of the group, `--dp-size D` with
`--enable-dp-attention` runs attention in D groups of N / D GPUs, and `--ep-size N` splits the
routed experts over all N (python/sglang/srt/server_args.py `_handle_data_parallelism`, 0.4.6 –
0.5.x: `assert tp_size % dp_size == 0`). kvplan's layout is vLLM's: -tp T is one attention
group, -dp D the groups, so SGLang's --tp-size is T × D under DP attention. Without
--enable-dp-attention, --dp-size D runs D whole replicas of --tp-size GPUs each (its data-parallel
controller), and --ep-size splits experts within one replica.
"""

from __future__ import annotations

from typing import Any

from ..model import expert
from ..model.weights import rank_tensors
from ..specs import Deployment, ModelSpec, QuantSpec

# sglang/srt/server_args.py flag → (knob, kind). expert_parallel_size, enable_ep_moe and
# enable_deepep_moe are not knobs: combine_parallel_flags folds them into enable_expert_parallel
# and moe_a2a_backend (--enable-ep-moe / --enable-deepep-moe: 0.4.x spellings of --ep-size =
# --tp-size and --moe-a2a-backend deepep).
PARALLEL_CLI_FLAGS: dict[str, tuple[str, str]] = {
    "--data-parallel-size": ("data_parallel_size", "int"),
    # argparse takes unique prefixes: --dp is --dp-size's (the DeepSeek docs write --dp 8)
    "--dp": ("data_parallel_size", "int"),
    "--enable-dp-attention": ("enable_dp_attention", "bool"),
    "--expert-parallel-size": ("expert_parallel_size", "int"),
    "--ep-size": ("expert_parallel_size", "int"), "--ep": ("expert_parallel_size", "int"),
    "--enable-ep-moe": ("enable_ep_moe", "bool"),
    "--enable-deepep-moe": ("enable_deepep_moe", "bool"),
    "--moe-a2a-backend": ("moe_a2a_backend", "str"),
    "--ep-num-redundant-experts": ("num_redundant_experts", "int"),
}


def combine_parallel_flags(knobs: dict[str, Any]) -> dict[str, Any]:
    """SGLang's spelling of a layout → kvplan's: under --enable-dp-attention the --tp-size N
    GPUs are D attention groups of N / D (kvplan -tp N/D -dp D); --ep-size N (or the 0.4.x
    --enable-ep-moe / --enable-deepep-moe, or --moe-a2a-backend deepep, which sets ep_size =
    tp_size) → --enable-expert-parallel. A ValueError names what kvplan cannot read."""
    ep = knobs.pop("expert_parallel_size", None)
    old_ep, deepep = knobs.pop("enable_ep_moe", None), knobs.pop("enable_deepep_moe", None)
    tp = int(knobs.get("tensor_parallel_size") or 1)
    dp = int(knobs.get("data_parallel_size") or 1)
    if deepep:
        knobs.setdefault("moe_a2a_backend", "deepep")
    if old_ep or deepep or knobs.get("moe_a2a_backend") == "deepep":
        ep = tp if ep is None else ep
    if knobs.get("enable_dp_attention"):
        if dp <= 1:  # SGLang switches DP attention off when dp_size == 1
            knobs["enable_dp_attention"] = False
        elif tp % dp:
            raise ValueError(f"--enable-dp-attention with --tp-size {tp} and --dp-size {dp}: "
                             "SGLang needs --tp-size divisible by --dp-size")
        else:
            knobs["tensor_parallel_size"] = tp // dp
            if knobs.get("max_num_seqs"):  # a DP rank runs its share (rank_max_running)
                knobs["max_num_seqs"] = max(1, int(knobs["max_num_seqs"]) // dp)
    if ep is not None and int(ep) > 1:
        if int(ep) != tp:
            raise ValueError(f"--ep-size {ep} with --tp-size {tp}: kvplan models expert "
                             f"parallelism over every GPU of the group (--ep-size {tp})")
        knobs["enable_expert_parallel"] = True
    return knobs


def launch_max_running(dep: Deployment, per_rank: int) -> int:
    """--max-running-requests for `per_rank` requests on each DP rank: under DP attention
    SGLang gives every rank max_running_requests // dp_size
    (python/sglang/srt/model_executor/model_runner.py, `self.max_running_requests`, 0.5.x;
    tp_worker.py before), so the launch line carries the whole group's count."""
    return per_rank * dep.data_parallel_size if dp_attention(dep) else per_rank


def dp_attention(dep: Deployment) -> bool:
    """DP attention is on: asked for, or implied by expert parallelism over -dp > 1 (kvplan's
    EP spans T × D GPUs, which SGLang reaches only with --enable-dp-attention)."""
    return dep.data_parallel_size > 1 and (dep.enable_dp_attention
                                           or dep.enable_expert_parallel)


def group_size(dep: Deployment) -> int:
    """SGLang's --tp-size: the GPUs one MoE layer spans."""
    return expert.moe_group_size(dep.tensor_parallel_size, dep.data_parallel_size,
                                 dp_attention=dp_attention(dep))


def expert_parallel_size(m: ModelSpec, dep: Deployment) -> int:
    return group_size(dep) if dep.enable_expert_parallel and m.moe is not None else 1


def extra_weight_bytes(m: ModelSpec, dep: Deployment) -> int:
    """What a model sized at --tp-size (experts over --ep-size) lacks on one GPU: attention split
    over the attention group only and a whole input embedding under DP attention
    (expert.dp_attention_weight_delta); whole shared experts with DeepEP; EPLB's redundant
    experts (--ep-num-redundant-experts); whole dense-layer MLPs with --moe-dense-tp-size 1."""
    n, ep = group_size(dep), expert_parallel_size(m, dep)
    out = 0
    if dp_attention(dep):
        out += expert.dp_attention_weight_delta(
            m, attn_tp=dep.tensor_parallel_size, moe_tp=n, ep=ep, dtype=dep.dtype,
            quant=dep.quant, replicate_embedding=True)
    if dp_attention(dep) and getattr(dep.options, "moe_dense_tp_size", None) == 1:
        out += whole_dense_mlp_delta(m, moe_tp=n, ep=ep, dtype=dep.dtype, quant=dep.quant)
    if dep.moe_a2a_backend == "deepep":
        out += expert.replicated_shared_expert_delta(m, moe_tp=n, ep=ep, dtype=dep.dtype,
                                                     quant=dep.quant)
    if ep > 1 and dep.num_redundant_experts:
        out += expert.redundant_expert_bytes(m, ep=ep, redundant=dep.num_redundant_experts,
                                             dtype=dep.dtype, quant=dep.quant,
                                             pp=dep.pipeline_parallel_size)
    return out


def whole_dense_mlp_delta(m: ModelSpec, *, moe_tp: int, ep: int, dtype: str,
                          quant: QuantSpec | None) -> int:
    """Bytes to add when the dense (non-MoE) layers' MLP is whole on every GPU instead of
    split over `moe_tp` (--moe-dense-tp-size 1: DeepseekV2DecoderLayer builds DeepseekV2MLP
    with mlp_tp_rank, mlp_tp_size = 0, 1 when enable_moe_dense_fully_dp(),
    python/sglang/srt/models/deepseek_v2.py 0.4.9, 0.5.6.post2)."""
    moe = set(m.moe.moe_layers) if m.moe is not None else set()

    def dense_mlp(tp: int) -> int:
        total = 0
        for t, (_name, parts) in rank_tensors(m, tp=tp, dtype=dtype, quant=quant, ep=ep):
            head, _, rest = t.name.partition(".mlp.")
            layer = head.split(".")
            if rest and len(layer) == 2 and layer[0] == "layers" and int(layer[1]) not in moe:
                total += sum(parts)
        return total

    return dense_mlp(1) - dense_mlp(moe_tp)


def a2a_buffer_bytes(m: ModelSpec, dep: Deployment) -> int:
    """DeepEP's Buffer on one GPU (--moe-a2a-backend deepep), allocated at the first MoE
    forward, after the KV pool is sized: it lives in the (1 − mem_fraction_static) reserve, as
    SGLang's own reserve_for_deepep_a2a_mb counts it. param_bytes 1 when the experts are FP8
    (DeepEP dispatches FP8 to DeepGEMM), else 2 (deepep.py set_deepep_dispatcher_dtype)."""
    if dep.moe_a2a_backend != "deepep" or m.moe is None:
        return 0
    q = dep.quant
    fp8 = q is not None and q.method in ("fp8", "fbgemm_fp8", "modelopt")
    return expert.deepep_buffer_bytes(
        hidden=m.hidden_size, experts=m.moe.num_experts + dep.num_redundant_experts,
        ranks=group_size(dep), param_bytes=1 if fp8 else 2)


def graph_reserve_extra_mib(dep: Deployment, decode_bs: int) -> float:
    """mem_fraction_static's extra reserve (sglang/srt/arg_groups/memory_hook.py @031ed82d):
    DP attention max_bs × dp × 3 (+ × 1.5 more above 300), DeepEP +2048 MiB."""
    out = 0.0
    if dp_attention(dep):
        out += decode_bs * dep.data_parallel_size * 3
        if decode_bs > 300:
            out += decode_bs * dep.data_parallel_size * 1.5
    if dep.moe_a2a_backend == "deepep":
        out += 2048
    return out


def resolve_parallel(m: ModelSpec, knobs: Any, sources: dict[str, Any]) -> dict[str, Any]:
    """The Deployment fields of expert parallelism and DP attention, checked as SGLang checks
    them (server_args.py): DeepEP needs a MoE model and sets --ep-size = --tp-size; redundant
    experts need expert parallelism."""
    from ..errors import InvalidInputError

    a2a = knobs.moe_a2a_backend if knobs.moe_a2a_backend not in (None, "none") else None
    if a2a not in (None, "deepep"):
        raise InvalidInputError(f"--moe-a2a-backend {a2a} is vLLM's; SGLang's are none and "
                                "deepep", hint="use --moe-a2a-backend deepep (or none)",
                                code="out-of-range", knob="moe_a2a_backend")
    ep = bool(knobs.enable_expert_parallel) or a2a == "deepep"
    if (ep or knobs.enable_dp_attention) and m.moe is None:
        flag = "--moe-a2a-backend deepep" if a2a else (
            "--enable-expert-parallel" if ep else "--enable-dp-attention")
        raise InvalidInputError(f"{flag} needs a mixture-of-experts model",
                                hint=f"{m.id} has no experts; drop the flag",
                                code="expert-parallel-needs-moe",
                                knob="moe_a2a_backend" if a2a else "enable_expert_parallel")
    if knobs.enable_dp_attention and (knobs.data_parallel_size or 1) <= 1:
        tp = knobs.tensor_parallel_size or 1
        raise InvalidInputError(
            "--enable-dp-attention needs -dp (--data-parallel-size) above 1: attention runs "
            "data-parallel over the -dp ranks (SGLang switches it off at --dp-size 1)",
            hint=f"add -dp 2 or more (SGLang --tp-size is -tp × -dp: e.g. -tp {max(1, tp // 2)} "
            f"-dp 2 for --tp-size {max(1, tp // 2) * 2}), or drop it", code="out-of-range",
            knob="enable_dp_attention")
    redundant = knobs.num_redundant_experts or 0
    if redundant and not ep:
        raise InvalidInputError("--num-redundant-experts needs --enable-expert-parallel",
                                hint="add --enable-expert-parallel (SGLang: --ep-size), or drop "
                                "it", code="out-of-range", knob="num_redundant_experts")
    for key in ("enable_expert_parallel", "enable_dp_attention", "num_redundant_experts",
                "moe_a2a_backend"):
        sources[key] = "cli" if getattr(knobs, key) is not None else "engine-default"
    # experts over a group of one GPU are no expert parallelism: the launch line has no
    # --ep-size 1 to say it, and `kvplan check` of that line reads EP off
    tp, dp = knobs.tensor_parallel_size or 1, knobs.data_parallel_size or 1
    if ep and not redundant and a2a is None and (tp * dp if dp > 1 else tp) == 1:
        ep = False
    return {"enable_expert_parallel": ep, "enable_dp_attention": bool(knobs.enable_dp_attention),
            "num_redundant_experts": redundant, "moe_a2a_backend": a2a}


def tp_flag(dep: Deployment, tp: int) -> str:
    """A fix-it's --tp-size for `tp` GPUs per attention group: under DP attention SGLang's
    --tp-size is the whole group, attention TP × --dp-size (attn_tp_size = tp_size //
    attn_dp_size: sglang/srt/runtime_context.py derive_attn_tp_size, and --dp-size N
    --enable-dp-attention becomes attn_dp_size N: arg_groups/parallel_hook.py
    _handle_deprecated_dp_attention, 0.5.23 wheel; server_args.py `tp_size % dp_size` in 0.4.6 –
    0.5.x)."""
    group = tp * dep.data_parallel_size if dp_attention(dep) else tp
    # expert parallelism spans the group (--ep-size = --tp-size, as launch_flags writes it)
    ep = f" --ep-size {group}" if dep.enable_expert_parallel and group > 1 else ""
    if not dp_attention(dep):
        return f"--tp-size {tp}{ep}"
    return f"--tp-size {group}{ep} (attention TP {tp} × --dp-size {dep.data_parallel_size})"


def launch_flags(dep: Deployment) -> list[str]:
    """The launch line's layout flags in SGLang's spelling: --tp-size is the group's GPUs."""
    tp, dp = dep.tensor_parallel_size, dep.data_parallel_size
    args: list[str] = []
    if dp_attention(dep):
        args += ["--tp-size", str(tp * dp), "--dp-size", str(dp), "--enable-dp-attention"]
    else:
        args += (["--tp-size", str(tp)] if tp != 1 else []) + (
            ["--dp-size", str(dp)] if dp != 1 else [])
    if dep.enable_expert_parallel and group_size(dep) > 1:
        args += ["--ep-size", str(group_size(dep))]
    if dep.moe_a2a_backend:
        args += ["--moe-a2a-backend", dep.moe_a2a_backend]
    if dep.num_redundant_experts:
        args += ["--ep-num-redundant-experts", str(dep.num_redundant_experts)]
    return args
