"""TensorRT-LLM's expert parallelism and attention DP (docs/expert-parallel.md). Pure functions.

TensorRT-LLM spells a layout by its GPUs, like SGLang: `--tp_size N` is every GPU, `--ep_size`
(`moe_expert_parallel_size`) splits the routed experts, and `enable_attention_dp: true` in the
--extra_llm_api_options YAML runs attention data-parallel on every one of the N GPUs with
attention TP 1 (tensorrt_llm/mapping.py Mapping: attn_tp_size = 1 when enable_attention_dp;
_torch/models/modeling_deepseekv3.py, 1.0: the dense MLP, shared experts and LM head follow
the attention's TP under attention DP). kvplan's layout is vLLM's: -tp 1 -dp N
--enable-dp-attention, with --enable-expert-parallel for --ep_size N.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError
from ..specs import Deployment, ModelSpec

# trtllm-serve's flags (tensorrt_llm/commands/serve.py: --moe_expert_parallel_size/--ep_size);
# expert_parallel_size is not a knob: after_options folds it into enable_expert_parallel
PARALLEL_CLI_FLAGS: dict[str, tuple[str, str]] = {
    "--ep_size": ("expert_parallel_size", "int"),
    "--moe_expert_parallel_size": ("expert_parallel_size", "int"),
}


def after_options(knobs: dict[str, Any]) -> dict[str, Any]:
    """A deployment file's layout (flags and the options YAML merged) → kvplan's: under
    enable_attention_dp the --tp_size N GPUs are N attention ranks (kvplan -tp 1 -dp N);
    --ep_size N → --enable-expert-parallel. A ValueError names what kvplan cannot read."""
    ep = knobs.pop("expert_parallel_size", None)
    tp = int(knobs.get("tensor_parallel_size") or 1)
    if knobs.get("enable_dp_attention") and tp > 1 and "data_parallel_size" not in knobs:
        knobs["tensor_parallel_size"], knobs["data_parallel_size"] = 1, tp
    if knobs.get("enable_dp_attention") and "data_parallel_size" not in knobs and tp <= 1:
        knobs["enable_dp_attention"] = False  # attention DP over one GPU: none
    if ep is not None and int(ep) > 1:
        if int(ep) != tp:
            raise ValueError(f"--ep_size {ep} with --tp_size {tp}: kvplan models expert "
                             f"parallelism over every GPU (--ep_size {tp}); a "
                             "moe_tensor_parallel_size split is not modelled")
        knobs["enable_expert_parallel"] = True
    return knobs


def attention_dp(dep: Deployment) -> bool:
    return dep.data_parallel_size > 1 and (dep.enable_dp_attention or dep.enable_expert_parallel)


def group_size(dep: Deployment) -> int:
    """TensorRT-LLM's tp_size: every GPU of the deployment."""
    return dep.tensor_parallel_size * dep.data_parallel_size


def weight_layout(m: ModelSpec, dep: Deployment) -> tuple[int, int]:
    """(TP of the non-expert weights, EP of the experts) on one GPU. Under attention DP the
    non-expert weights are whole (TP 1) and the experts split over all N GPUs (as EP; with
    moe_tensor_parallel_size instead, the same bytes up to rounding)."""
    n = group_size(dep)
    moe = m.moe is not None
    if attention_dp(dep):
        return 1, n if moe else 1
    return dep.tensor_parallel_size, n if dep.enable_expert_parallel and moe else 1


def resolve_parallel(m: ModelSpec, knobs: Any, sources: dict[str, Any]) -> dict[str, Any]:
    """The Deployment fields of expert parallelism and attention DP, as TensorRT-LLM takes them:
    attention DP runs attention at TP 1 on every GPU, and -dp > 1 is only attention DP."""
    ep, adp = bool(knobs.enable_expert_parallel), bool(knobs.enable_dp_attention)
    tp, dp = knobs.tensor_parallel_size or 1, knobs.data_parallel_size or 1
    if (ep or adp) and m.moe is None:
        raise InvalidInputError(f"{'--enable-expert-parallel' if ep else '--enable-dp-attention'}"
                                " needs a mixture-of-experts model",
                                hint=f"{m.id} has no experts; drop the flag",
                                code="expert-parallel-needs-moe",
                                knob="enable_expert_parallel" if ep else "enable_dp_attention")
    if adp and dp <= 1:
        raise InvalidInputError(
            "--enable-dp-attention needs -dp (--data-parallel-size) above 1: TensorRT-LLM's "
            "attention DP runs attention at TP 1 on each of the -dp GPUs",
            hint=f"use -tp 1 -dp {max(2, tp)} (trtllm-serve --tp_size {max(2, tp)} with "
            "enable_attention_dp), or drop it", code="out-of-range", knob="enable_dp_attention")
    if dp > 1 and not (adp or ep):
        raise InvalidInputError(
            f"--data-parallel-size {dp}: trtllm-serve runs data parallelism only as attention DP",
            hint="add --enable-dp-attention (a MoE model), or plan one replica and run "
            f"{dp} of them", code="out-of-range", knob="data_parallel_size")
    if dp > 1 and tp > 1:
        raise InvalidInputError(
            f"-tp {tp} -dp {dp}: TensorRT-LLM's attention DP runs attention at TP 1 on every GPU",
            hint=f"use -tp 1 -dp {tp * dp} (trtllm-serve --tp_size {tp * dp} with "
            "enable_attention_dp)", code="out-of-range", knob="tensor_parallel_size")
    if knobs.num_redundant_experts:
        raise InvalidInputError("--num-redundant-experts: TensorRT-LLM's EPLB slots "
                                "(moe_config.load_balancer) are not modelled",
                                hint="drop --num-redundant-experts", code="out-of-range",
                                knob="num_redundant_experts")
    sources["enable_dp_attention"] = "cli" if knobs.enable_dp_attention is not None \
        else "engine-default"
    sources["enable_expert_parallel"] = "cli" if knobs.enable_expert_parallel is not None \
        else "engine-default"
    # experts over one GPU are no expert parallelism: --ep_size 1 reads back as EP off
    return {"enable_expert_parallel": ep and tp * dp > 1, "enable_dp_attention": adp and dp > 1,
            "data_parallel_size": dp}
