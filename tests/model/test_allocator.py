"""PyTorch's CUDA caching allocator, replayed (kvplan/model/allocator.py). Expected values are
worked by hand from the rules in pytorch c10/cuda/CUDACachingAllocator.cpp."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.model.allocator import (
    CachingAllocator,
    malloc_chunks,
    replay,
    round_size,
    segment_size,
)

MiB = 2**20


def test_sizes_round_to_512_bytes():
    assert [round_size(n) for n in (1, 512, 513, 7168)] == [512, 512, 1024, 7168]


def test_segment_sizes_by_request():
    """≤ 1 MiB: a 2 MiB small segment; 1–10 MiB: a 20 MiB segment; ≥ 10 MiB: rounded to 2 MiB."""
    assert segment_size(MiB) == 2 * MiB
    assert segment_size(MiB + 512) == 20 * MiB
    assert segment_size(10 * MiB) == 10 * MiB
    assert segment_size(259 * MiB) == 260 * MiB


def test_a_remainder_of_one_mib_is_not_split_off():
    """Qwen2.5-7B's gate_up_proj, 259 MiB: segment 260 MiB, remainder 1 MiB is not > 1 MiB,
    so the whole block is handed out and counted."""
    assert replay([259 * MiB]) == (260 * MiB, 260 * MiB)


def test_a_larger_remainder_is_split_and_not_counted():
    """o_proj, 24.5 MiB: segment 26 MiB, the 1.5 MiB remainder is split off and stays cached."""
    assert replay([int(24.5 * MiB)]) == (int(24.5 * MiB), 26 * MiB)


def test_mid_size_requests_share_a_20_mib_segment():
    assert replay([3 * MiB, 3 * MiB]) == (6 * MiB, 20 * MiB)


def test_small_requests_share_a_2_mib_segment():
    assert replay([7168] * 3) == (3 * 7168, 2 * MiB)


def test_freed_neighbours_merge_and_serve_a_larger_request():
    """Two 8 MiB blocks in one 20 MiB segment, both freed: they merge with the 4 MiB tail into
    20 MiB, which serves a 19 MiB request (1 MiB left, not split: counted as 20 MiB)."""
    a = CachingAllocator()
    x, y = a.malloc(8 * MiB), a.malloc(8 * MiB)
    a.free(x)
    a.free(y)
    assert a.allocated_bytes == 0
    a.malloc(19 * MiB)
    assert (a.allocated_bytes, a.reserved_bytes) == (20 * MiB, 20 * MiB)


def test_best_fit_takes_the_smallest_block_that_fits():
    a = CachingAllocator()
    big, small = a.malloc(40 * MiB), a.malloc(16 * MiB)
    a.free(big)
    a.free(small)
    a.malloc(12 * MiB)  # from the 16 MiB block (4 MiB split off), not the 40 MiB one
    a.malloc(40 * MiB)
    assert a.reserved_bytes == 56 * MiB


def test_empty_cache_releases_only_segments_without_live_blocks():
    a = CachingAllocator()
    keep, drop = a.malloc(3 * MiB), a.malloc(30 * MiB)
    a.free(drop)
    a.empty_cache()
    assert a.reserved_bytes == 20 * MiB
    a.free(keep)
    a.empty_cache()
    assert a.reserved_bytes == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 300 * MiB), max_size=40))
def test_counts_bound_the_request_bytes(sizes):
    """Each request costs at least its size and at most 1 MiB more (an unsplit remainder);
    reserved covers allocated."""
    allocated, reserved = replay(sizes)
    assert sum(sizes) <= allocated <= sum(round_size(n) for n in sizes) + len(sizes) * MiB
    assert reserved >= allocated


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 64 * MiB), min_size=1, max_size=30), st.data())
def test_freeing_everything_returns_to_zero(sizes, data):
    a = CachingAllocator()
    handles = [a.malloc(n) for n in sizes]
    for h in data.draw(st.permutations(handles)):
        a.free(h)
    assert a.allocated_bytes == 0
    a.empty_cache()
    assert a.reserved_bytes == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 64 * MiB), st.booleans()), min_size=1, max_size=30))
def test_held_bytes_are_what_empty_cache_leaves_reserved(steps):
    """After any mallocs and frees, held_bytes (segments holding a live block) is what
    reserved_bytes falls to after empty_cache, and never exceeds reserved_bytes before it."""
    a = CachingAllocator()
    live = []
    for n, free_one in steps:
        live.append(a.malloc(n))
        if free_one:
            a.free(live.pop(len(live) // 2))
        assert a.held_bytes <= a.reserved_bytes
    held = a.held_bytes
    a.empty_cache()
    assert a.reserved_bytes == held


def test_replay_matches_pytorch_on_an_h200_byte_for_byte():
    """benchmarks/data/allocator_h200.json: every bundled model at TP 1/2/4/8 that fits in
    120 GiB (154 configurations), allocated with torch.empty in vLLM's build order on an H200
    (PyTorch 2.11, benchmarks/allocator_check.py replay). memory_allocated() and, after
    empty_cache(), memory_reserved() as measured there."""
    import json
    from pathlib import Path

    from kvplan.model.weights import replay_allocations

    data = json.loads(
        (Path(__file__).resolve().parents[2] / "benchmarks/data/allocator_h200.json").read_text()
    )
    assert data["run"]["gpu"] == "NVIDIA H200" and len(data["configs"]) == 154
    for r in data["configs"]:
        s = r["sizes"]
        sizes = s["head"] + s.get("body", []) * s.get("repeat", 0) + s.get("tail", [])
        a = replay_allocations(sizes, r["dtype"], r["rope_positions"], r["rotary_dim"])
        assert a.allocated_bytes == r["allocated"], r["label"]
        a.empty_cache()
        assert a.reserved_bytes == r["reserved"], r["label"]


def test_malloc_chunks_counts_what_plain_mallocs_count():
    """malloc_chunks' shortcuts (a run carved off one free block, repeated periods added up)
    give, chunk by chunk, the counters of allocating every size one by one: repeated layers
    of mixed small and large sizes, after a start that leaves free segments behind."""
    rng = random.Random(26)
    sizes = [300, 512, 8192, 32768, 1 << 20, (1 << 20) + 1, 3 << 20, 9 << 20, 25 << 20,
             100_000_003]
    for _ in range(60):
        layer = tuple(rng.choice(sizes) for _ in range(rng.randint(1, 6)))
        other = tuple(rng.choice(sizes) for _ in range(rng.randint(0, 3)))
        chunks = ([layer] * rng.randint(1, 70) + [other] + [layer] * rng.randint(0, 40)
                  + [other] * rng.randint(0, 3))
        fast, plain = CachingAllocator(), CachingAllocator()
        start, freed = (rng.choice(sizes), 32 << 20, 500_000), rng.randint(0, 2)
        for a in (fast, plain):  # segments without a live block, as the RoPE cache leaves
            handles = [a.malloc(n) for n in start]
            a.free(handles[freed])
        assert malloc_chunks(fast, chunks) == _one_by_one(plain, chunks)


def _one_by_one(plain: CachingAllocator, chunks: list) -> tuple[list[int], list[int]]:
    """The allocated and held bytes after each chunk, allocating every size one by one."""
    allocated, held = [], []
    for chunk in chunks:
        for n in chunk:
            plain.malloc(n)
        allocated.append(plain.allocated_bytes)
        held.append(plain.held_bytes)
    return allocated, held


def test_malloc_chunks_read_from_its_memo_count_what_plain_mallocs_count():
    """A small pool whose state and chunks begin a replay in the memo is read from it: one memo
    shared by replays of every length (each a prefix of a longer list, or the longer after its
    prefix) from three start states, with norm- and router-gate-sized (1 MiB) requests, gives the
    counters of allocating every size one by one."""
    rng = random.Random(2026)
    memo: dict = {}
    layer = (8192, 512, 1 << 20, 8192, 64 << 20, 3 << 20)
    for _ in range(40):
        big = rng.choice([25 << 20, 100_000_003, 7 << 20])
        chunks = [layer] * rng.randint(1, 50) + [(8192, big)] * rng.randint(0, 2)
        fast, plain = CachingAllocator(), CachingAllocator()
        # a free large or small segment, or a small one a live block holds
        start, freed = rng.choice([(32 << 20, True), (500_000, True), (500_000, False)])
        for a in (fast, plain):
            handle = a.malloc(start)
            if freed:
                a.free(handle)
        assert malloc_chunks(fast, chunks, memo) == _one_by_one(plain, chunks)
    replays = {id(grown) for _, grown in memo.values()}
    assert len(replays) < 40  # some were read from it (12 of the 40 with this seed)


def test_fill_counts_as_malloc_does():
    """fill (a replay's allocations, no handles) moves both counters as one malloc per size:
    2 × 256 B round to 512 B each in one 2 MiB small segment; 3 MiB opens a 20 MiB segment."""
    a = CachingAllocator()
    a.fill((256, 256, 3 * MiB))
    assert (a.allocated_bytes, a.held_bytes) == (2 * 512 + 3 * MiB, 2 * MiB + 20 * MiB)


def test_signature_of_two_free_blocks():
    """Two free blocks ≥ the floor (the shortcut for two): sizes in best-fit order, each with its
    segment's rank and its place by (segment, offset). 1 MiB opens a 2 MiB small segment; the
    next request takes all but 512 B of its 1 MiB remainder; another 1 MiB opens a second
    segment, leaving 1 MiB: free (512 B, segment 0) and (1 MiB, segment 1), both segments
    holding a live block (last entry 0). A floor above 512 B sees the second alone."""
    a = CachingAllocator()
    a.fill((MiB, MiB - 512))  # the second fits the first's remainder: one segment, 512 B left
    a.fill((MiB,))  # a new segment, 1 MiB left
    assert a.signature(True, 512) == ((512, 0, 0, 0), (MiB, 1, 1, 0))
    assert a.signature(True, 1024) == ((MiB, 0, 0, 0),)


def test_malloc_chunks_adds_up_periods_of_several_chunks():
    """Layers that alternate kinds (a dense layer, then an MoE one; or three kinds in turn)
    repeat with a period of two or three chunks: the periods malloc_chunks adds up give,
    chunk by chunk, the counters of allocating every size one by one — up to a period cut
    short at the end and a different chunk after it."""
    rng = random.Random(2626)
    sizes = [300, 512, 8192, 1 << 20, (1 << 20) + 1, 3 << 20, 25 << 20, 100_000_003]
    for _ in range(60):
        kinds = [tuple(rng.choice(sizes) for _ in range(rng.randint(1, 5)))
                 for _ in range(rng.choice((2, 3)))]
        chunks = kinds * rng.randint(1, 40) + kinds[:rng.randint(0, len(kinds) - 1)]
        chunks += [(rng.choice(sizes),)] + kinds * rng.randint(0, 10)
        fast, plain = CachingAllocator(), CachingAllocator()
        assert malloc_chunks(fast, chunks) == _one_by_one(plain, chunks)
