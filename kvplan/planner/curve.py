"""The KV capacity curve: how many requests the KV cache of a planned deployment holds at each
max_model_len. Arithmetic on a Plan's KV blocks where the KV is linear in length; elsewhere the
caller passes `replan`, a planner at another length (the API does; a renderer never plans).
Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..specs import Plan


@dataclass(frozen=True)
class CurvePoint:
    max_model_len: int
    concurrency: float  # requests of that length the KV cache holds at once
    chosen: bool = False


def _request_blocks(plan: Plan, length: int) -> int:
    return -(-length // plan.kv_cache.block_size)


def linear_kv(plan: Plan) -> bool:
    """True when every token of a request takes KV in every layer (no sliding window, no state):
    a request of L tokens then needs ceil(L / block_size) blocks, and the plan's own numbers
    give the whole curve. Checked against the plan's bytes_per_request."""
    kv, length = plan.kv_cache, plan.inputs["max_model_len"].value
    if not isinstance(length, int) or not kv.bytes_per_block or not kv.bytes_per_request:
        return False
    return kv.bytes_per_request == _request_blocks(plan, length) * kv.bytes_per_block


def curve_lengths(plan: Plan, count: int = 10) -> list[int]:
    """Powers of two from 1k to the longest length that fits, plus that length and the chosen
    one, thinned to about `count` points."""
    chosen = plan.inputs["max_model_len"].value
    top = max(plan.kv_cache.max_model_len_fit, chosen if isinstance(chosen, int) else 0)
    lengths = [2 ** k for k in range(10, 24) if 2 ** k < top]
    while len(lengths) > count - 2:
        lengths = lengths[1::2] if len(lengths) % 2 == 0 else lengths[::2]
    extra = {top} | ({chosen} if isinstance(chosen, int) else set())
    return sorted(set(lengths) | {x for x in extra if x > 0})


def kv_curve(plan: Plan, replan: Callable[[int], Plan] | None = None
             ) -> tuple[tuple[CurvePoint, ...], str]:
    """Concurrency against max_model_len at the plan's memory budget, and how it was computed.

    Linear KV: num_blocks / ceil(L / block_size) — the engine's own "maximum concurrency"
    formula, exact at the chosen point. Otherwise (sliding windows, recurrent state) each point
    comes from `replan(L)`, the pure planner at that length; without it, only the chosen point."""
    chosen = plan.inputs["max_model_len"].value
    if plan.kv_cache.num_blocks <= 0:
        return (), "no KV cache: the deployment does not fit"
    if linear_kv(plan):
        pts = tuple(CurvePoint(n, round(plan.kv_cache.num_blocks / _request_blocks(plan, n), 2),
                               n == chosen) for n in curve_lengths(plan))
        bs = plan.kv_cache.block_size
        return pts, (f"{plan.kv_cache.num_blocks:,} KV blocks of {bs} token{'s' * (bs != 1)} "
                     f"÷ blocks per request (the plan's numbers)")
    if replan is not None:
        planned: list[CurvePoint] = []
        for n in curve_lengths(plan):
            conc = (plan if n == chosen else replan(n)).kv_cache.max_concurrency
            planned.append(CurvePoint(n, round(conc, 2), n == chosen))
        return tuple(planned), ("the planner re-run at each length (this model's KV is not linear "
                            "in length)")
    if isinstance(chosen, int):
        return ((CurvePoint(chosen, plan.kv_cache.max_concurrency, True),),
                "the chosen length only (this model's KV is not linear in length)")
    return (), "no max_model_len"
