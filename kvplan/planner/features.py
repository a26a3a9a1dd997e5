"""Workload-side effects of the optional features that every engine shares (docs/features.md).

Prefix caching: requests that start with the same `shared_prefix_tokens` (a system prompt)
share the KV blocks that prefix fills completely; a partly filled block is private to each
request (vLLM hashes and shares full blocks only: vllm/v1/core/kv_cache_utils.py
hash_block_tokens / vllm/v1/core/block_pool.py). With a block size of 1 (SGLang's radix
cache) every prefix token is shared. Pure arithmetic over the engine's MemoryResult.
"""

from __future__ import annotations

from ..engines.base import Engine, MemoryResult
from ..specs import Deployment, ModelSpec, PlanMultimodal, Problem, Workload


def prefix_shared(m: ModelSpec, dep: Deployment) -> bool:
    """Prefix caching is on and kvplan models its sharing (not for sliding-window, chunked or
    linear-attention layers, which keep only recent pages)."""
    return dep.enable_prefix_caching and not any(
        kind in ("sliding", "chunked", "linear") for kind in m.layer_types)


def prefix_concurrency(m: ModelSpec, dep: Deployment, res: MemoryResult,
                       shared_tokens: int | None) -> tuple[float | None, list[Problem]]:
    """max_concurrency when every request shares its first `shared_tokens` tokens:

        s = min(shared_tokens, L) // block_size          shared blocks, stored once
        C = (num_blocks − s) / (blocks_per_request(L) − s)

    (the engine's own concurrency is num_blocks / blocks_per_request(L)). None when no prefix
    is given, when prefix caching is off, or for hybrid layouts (sliding-window / Mamba layers
    keep only recent pages, so their sharing is not modelled)."""
    if not shared_tokens or not res.max_model_len:
        return None, []
    if not dep.enable_prefix_caching:
        return None, [Problem(code="prefix-caching-off", severity="info",
                              message="the shared prefix (--shared-prefix-tokens, "
                              "--prefix-hit-rate) has no effect: prefix caching is off "
                              "(--no-enable-prefix-caching)")]
    if any(kind in ("sliding", "chunked", "linear") for kind in m.layer_types):
        return None, [Problem(code="prefix-sharing-not-modelled", severity="info",
                              message="prefix sharing is not modelled for sliding-window or "
                              "linear-attention layers; effective concurrency with the shared "
                              "prefix is not given")]
    length = res.max_model_len
    shared = min(shared_tokens, length) // res.block_size
    per_request = res.request_blocks(length)
    if shared >= per_request or res.num_blocks <= shared:
        return None, []
    return round((res.num_blocks - shared) / (per_request - shared), 2), []


def image_tokens(m: ModelSpec, workload: Workload) -> int:
    """images_per_request × the model's max_tokens_per_image (0 for text-only models or when
    the tower's token count is unknown)."""
    n = workload.images_per_request or 0
    tokens = m.vision.max_tokens_per_image if m.vision is not None else None
    return n * tokens if n and tokens else 0


def image_concurrency(m: ModelSpec, res: MemoryResult, workload: Workload,
                      engine: Engine) -> tuple[PlanMultimodal | None, list[Problem]]:
    """The engine's multimodal section completed with the workload's images:

        image tokens  = images_per_request × max_tokens_per_image
        request       = avg_input + avg_output (when given) + image tokens
        concurrency   = usable blocks / blocks_per_request(request)

    Images sit inside the prompt, so a request of max_model_len tokens holds no more KV with
    images than without; images matter when request lengths are given (or alone, when only
    images_per_request is). The prompts the engine refuses (too many images, too long) are the
    engine's to say (Engine.image_problems)."""
    mm = res.multimodal
    n = workload.images_per_request or 0
    problems: list[Problem] = []
    if mm is None:
        if n and m.vision is None:
            problems.append(Problem(code="images-text-only-model", severity="warning",
                                    message=f"--images-per-request {n}: {m.id} takes no images"))
        elif n and image_tokens(m, workload):  # the planner adds them to the request length
            problems.append(Problem(code="images-not-modelled", severity="info",
                                    message=f"--images-per-request {n}: this engine's image "
                                    "encoder memory is not modelled; each image counts as "
                                    f"{image_tokens(m, workload) // n:,} tokens of the request "
                                    "length that sizes the batch"))
        elif n:
            problems.append(Problem(code="images-not-modelled", severity="info",
                                    message=f"--images-per-request {n}: the tokens per image of "
                                    "this vision tower are not modelled; the request lengths "
                                    "exclude the images"))
        return None, problems
    tokens = n * mm.max_tokens_per_item
    text = (workload.avg_input_tokens or 0) + (workload.avg_output_tokens or 0)
    request = text + tokens if n or text else None
    concurrency = None
    if request and res.max_model_len:
        blocks = res.request_blocks(min(request, res.max_model_len))
        concurrency = round(res.usable_blocks / blocks, 2) if blocks else None
    problems += engine.image_problems(mm, images=n, text_tokens=text, request_tokens=request,
                                      max_model_len=res.max_model_len)
    return mm.model_copy(update={"images_per_request": n, "image_tokens_per_request": tokens,
                                 "request_tokens": request,
                                 "max_concurrency_with_images": concurrency}), problems
