"""The forward pass as PyTorch runs it at start-up: activation peak of a profile/warm-up batch,
fused-MoE workspaces and CUDA-graph memory. Engine-neutral estimates shared by the engines that
run the same PyTorch model code (vLLM's profile run, SGLang's and TGI's warm-ups).

Constants fitted by benchmarks/calibrate.py on the vLLM 0.19.0 H100 rows of
benchmarks/data/vllm_calibration.csv (DEBUG profile lines: "torch peak increase",
"estimated CUDA graph memory"); `eager_v0` selects the eager (no torch.compile) V0 figures,
which TGI's eager warm-up shares. Rerun the script when rows are added.
"""

from __future__ import annotations

from ..specs import Deployment, ModelSpec
from ..units import DTYPE_BYTES, GiB, MiB, cdiv

# Activation peak, forward part: the profile run pushes max_num_batched_tokens tokens through
# one layer at a time; live tensors per token ≈ the gated MLP (gate_up 2I + act I per rank)
# plus a few hidden-sized buffers (residual, normed input, qkv, attention output, …).
FORWARD_HIDDEN_BUFFERS = 7.1  # hidden-sized tensors live at the MLP peak, per token
# V0's profile prefills max(max_model_len, 2048) tokens without torch.compile; fitted on the
# two forward-bound V0 rows (issue 10517, L = 20000 and 29000; the issue-15815 row's peak is
# the V0 sampler below).
FORWARD_HIDDEN_BUFFERS_V0 = 3.04
# Activation peak, sampler part: logits for min(max_num_seqs, tokens) requests × vocab, then
# the sampler's fp32 copy, sort values and int64 sort indices (top-k/top-p path).
SAMPLER_BYTES_PER_LOGIT = 14.94
# V0's profile run samples with top_p=0.99, top_k=vocab − 1 (vllm/worker/model_runner.py
# `profile_run`, v0.6.6), so its sampler takes the sort path (model_executor/layers/sampler.py
# `_apply_top_k_top_p`, v0.6–0.7). At the final scatter these are alive per logit: the
# model-dtype logits, their fp32 copy (4 B), sorted values (4) and int64 indices (8), the top-k
# mask (1), softmax (4), cumsum (4), top-p mask (1) and the re-scattered logits (4): dtype + 30 B.
# Derived from the code, not fitted.
SAMPLER_V0_BYTES_PER_LOGIT_BEYOND_DTYPE = 30
# CUDA graphs: one piecewise graph per layer per capture size plus a shared pool. Refitted on
# all 22 replayable rows once the gemma-2, gpt-oss and DeepSeek-V2-Lite rows became plannable
# (was 0.23 GiB + 0.38 MiB on the 18 dense/Mixtral rows).
CUDAGRAPH_POOL_BYTES = int(0.5585 * GiB)
CUDAGRAPH_BYTES_PER_LAYER_GRAPH = int(0.1983 * MiB)

def activation_bytes(m: ModelSpec, d: Deployment, *, last_stage: bool,
                     eager_v0: bool = False) -> int:
    """Profile-run torch peak (estimate): max of the forward peak and, on the last PP stage,
    the sampler peak (vllm/v1/worker/gpu_model_runner.py profile_run / _dummy_sampler_run).

    forward = tokens × dtype × (7.1 × hidden + 3 × widest MLP per rank; 2 × for a non-gated MLP)
    sampler = tokens × hidden × dtype + min(seqs, tokens) × vocab × 14.94 B (V0: dtype + 30 B)
              (+ 2 × tokens × hidden × dtype of received hidden/residual tensors when PP > 1:
              the TP1 PP2/PP4 logs show 2.01 GiB on the last stage vs 1.89 GiB at PP1)."""
    tp, tokens = d.tensor_parallel_size, d.max_num_batched_tokens
    dt = DTYPE_BYTES[d.dtype]
    widths = []
    if m.intermediate_size and (m.moe is None or len(m.moe.moe_layers) < m.num_layers):
        widths.append(cdiv(m.intermediate_size, tp))
    if m.moe is not None:
        widths.append(m.moe.top_k * cdiv(m.moe.expert_intermediate_size, tp)
                      + cdiv(m.moe.shared_expert_intermediate_size, tp))
    buffers = FORWARD_HIDDEN_BUFFERS_V0 if eager_v0 else FORWARD_HIDDEN_BUFFERS
    mlp_buffers = 3 if m.mlp_gated else 2  # gate_up (2I) + act (I); up (I) + relu² (I)
    forward = int(tokens * dt * (buffers * m.hidden_size + mlp_buffers * max(widths or [0])))
    if not last_stage:
        return forward
    num_reqs = min(d.max_num_seqs, tokens)
    received = 2 * tokens * m.hidden_size * dt if d.pipeline_parallel_size > 1 else 0
    per_logit = (dt + SAMPLER_V0_BYTES_PER_LOGIT_BEYOND_DTYPE if eager_v0
                 else SAMPLER_BYTES_PER_LOGIT)
    rows = sampler_rows_factor(d) * num_reqs
    sampler = int(tokens * m.hidden_size * dt + received + rows * m.vocab_size * per_logit)
    return max(forward, sampler + moe_workspace_bytes(m, d))


def sampler_rows_factor(d: Deployment) -> int:
    """Logit rows per dummy request in the profile run's sampler peak: 1; 2 with speculative
    decoding, whose dummy rejection-sampler run (after the plain sampler has returned) takes one
    draft token per request, i.e. target + bonus rows = 2 × num_reqs, whatever
    num_speculative_tokens is (vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run, V1
    main-branch sources)."""
    return 2 if d.speculative_config is not None else 1


def decode_query_len(d: Deployment) -> int:
    """Tokens a decode step verifies per request: 1 + num_speculative_tokens."""
    sc = d.speculative_config
    return 1 + (sc.num_speculative_tokens or 0) if sc is not None else 1


def moe_workspace_bytes(m: ModelSpec, d: Deployment) -> int:
    """Fused-MoE workspaces, allocated during the profile run and still held at the sampler
    peak: M × top_k × (max(2N, H) + N) elements, M = min(max_num_batched_tokens, 32768)
    (VLLM_FUSED_MOE_CHUNK_SIZE), N = expert intermediate / tp
    (vllm/model_executor/layers/fused_moe, modular kernel workspace13 + workspace2). MXFP4
    experts (gpt-oss) run other kernels without them. Checked against the DeepSeek-V2-Lite,
    Qwen3-30B-A3B and Mixtral logs (calibration CSVs), none of which fitted a constant."""
    q = m.quantization
    if m.moe is None or (q is not None and q.method == "mxfp4"):
        return 0
    rows = min(d.max_num_batched_tokens, 32768) * m.moe.top_k
    n = cdiv(m.moe.expert_intermediate_size, d.tensor_parallel_size)
    return rows * (max(2 * n, m.hidden_size) + n) * DTYPE_BYTES[d.dtype]


def cudagraph_capture_sizes(d: Deployment) -> int:
    """Number of decode batch sizes captured: [1, 2, 4] + every 8 to 248 + every 16 from 256, up to
    min(2 × max_num_seqs × decode_query_len, 512), capped at max_num_batched_tokens
    (vllm/config/vllm.py, 0.33; decode_query_len = 1 + num_speculative_tokens)."""
    top = min(2 * d.max_num_seqs * decode_query_len(d), 512, d.max_num_batched_tokens)
    # len([1, 2, 4 ≤ top] + range(8, min(top, 248) + 1, 8) + range(256, top + 1, 16))
    return (sum(s <= top for s in (1, 2, 4)) + max(0, min(top, 248) // 8)
            + (max(0, (top - 256) // 16 + 1) if top >= 256 else 0))


def cudagraph_bytes(d: Deployment, layers: int, capture_sizes: int | None = None) -> int:
    """CUDA-graph memory (estimate): pool + per-layer piecewise graphs × capture sizes.
    0 with --enforce-eager. `capture_sizes`: cudagraph_capture_sizes(d), when the caller has
    it (one per deployment, for each of its PP stages)."""
    if d.enforce_eager:
        return 0
    graphs = cudagraph_capture_sizes(d) if capture_sizes is None else capture_sizes
    return CUDAGRAPH_POOL_BYTES + CUDAGRAPH_BYTES_PER_LAYER_GRAPH * layers * graphs
