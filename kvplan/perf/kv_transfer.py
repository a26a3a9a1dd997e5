"""KV transfer between a prefill and a decode pool: bytes per request and the time they take on
the link, overlapped with the prefill where the engine's connector sends chunk by chunk
(kvplan/engines/pd.py). Pure.

Every GPU of the decode pool receives its own share of the prompt's KV (its KV heads under
tensor parallelism; MLA's latent in full on every rank, as the engines replicate it) and every
prefill GPU sends its own, each on its own NIC: the slower side sets the time,
max(prefill bytes per GPU, decode bytes per GPU) ÷ link bandwidth per GPU. No protocol
efficiency is applied: the time is a lower bound for a link that is not shared.
"""

from __future__ import annotations

from dataclasses import dataclass

# Scale-out bandwidth per GPU when none is given: one 400 Gb/s ConnectX-7 NIC per GPU, as the
# HGX/DGX H100 and H200 systems ship (NVIDIA DGX H100/H200 datasheet: 8 × ConnectX-7, 400 Gb/s
# InfiniBand/Ethernet each, for 8 GPUs). The same NIC is standard on GB200 NVL72 compute trays.
DEFAULT_LINK_GBPS = 400.0
LINK_SOURCE = "400 Gb/s per GPU: one ConnectX-7 NIC per GPU (NVIDIA DGX H100/H200 datasheet)"


@dataclass(frozen=True)
class Transfer:
    """One request's KV transfer."""

    tokens: int  # prompt tokens whose KV moves (prefix-cached ones included: decode needs all)
    bytes_per_request: int  # what the decode pool stores, all its GPUs together
    send_bytes_per_gpu: int  # what one prefill GPU sends
    recv_bytes_per_gpu: int  # what one decode GPU receives
    link_gbps: float
    time_ms: float  # the whole transfer on one link
    exposed_ms: float  # what is left after the prefill ends (the part in the TTFT)


def transfer(*, tokens: int, prefill_bytes_per_token_per_gpu: int,
             decode_bytes_per_token_per_gpu: int, decode_gpus: int, link_gbps: float,
             per_chunk: bool, chunk_tokens: int, prefill_s: float) -> Transfer:
    """The KV of a `tokens`-token prompt from a prefill GPU to a decode GPU (bytes per token per
    GPU as each pool's plan stores them). `per_chunk`: the connector sends each prefill chunk of
    `chunk_tokens` as soon as it is computed, so only what the link has not caught up with by
    the end of the prefill (`prefill_s`), and at least the last chunk, is exposed; else the
    whole transfer follows the prefill."""
    if tokens < 1 or link_gbps <= 0:
        raise ValueError("tokens and link_gbps must be positive")
    send = prefill_bytes_per_token_per_gpu * tokens
    recv = decode_bytes_per_token_per_gpu * tokens
    rate = link_gbps * 1e9 / 8  # bytes/s
    whole = max(send, recv) / rate
    exposed = whole
    if per_chunk and tokens > chunk_tokens:
        last = chunk_tokens / tokens
        before = prefill_s * (1 - last)  # the prefill time of the earlier chunks
        exposed = max(whole * last, whole - before)
    return Transfer(tokens=tokens, bytes_per_request=decode_bytes_per_token_per_gpu * tokens
                    * decode_gpus, send_bytes_per_gpu=send, recv_bytes_per_gpu=recv,
                    link_gbps=link_gbps, time_ms=whole * 1e3, exposed_ms=exposed * 1e3)
