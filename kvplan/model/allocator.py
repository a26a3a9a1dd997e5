"""PyTorch's CUDA caching allocator, replayed: what a sequence of tensor allocations costs.

Engines measure weights through this allocator, not as parameter bytes. vLLM's "Model loading
took X GiB" is the growth of `torch.cuda.max_memory_allocated`, which counts whole *blocks*;
SGLang's "mem usage" is the drop in free device memory, i.e. whole *segments* (cudaMalloc
calls) that still hold a live block. Both exceed the parameter bytes when a tensor's size is
not a multiple of 2 MiB. Example (hand-worked, Qwen2.5-7B, TP 1, bf16): gate_up_proj is
2 × 18944 × 3584 × 2 B = 259 MiB; its segment is rounded up to 260 MiB, and the 1 MiB left
is too small to split off, so the block (and the count) is 260 MiB. qkv (31.5 MiB) and
down_proj (129.5 MiB) add 0.5 MiB each: 2 MiB per layer × 28 layers + 0.5 MiB for each of the
embedding and the LM head = 57 MiB, the gap between 7.616e9 × 2 B and the logged 14.25 GiB.

The rules, from pytorch c10/cuda/CUDACachingAllocator.cpp (2.x; unchanged since 1.x):
- sizes are rounded up to 512 B (`round_size`);
- requests ≤ 1 MiB use the small pool (2 MiB segments), larger ones the large pool;
- a new large segment is 20 MiB for requests < 10 MiB, else the request rounded up to 2 MiB
  (`get_allocation_size`);
- a free block is chosen best-fit: the smallest cached block that is large enough, lowest
  address first (`get_free_block`, BlockComparatorSize);
- a block is split when the remainder is ≥ 512 B (small pool) or > 1 MiB (large pool);
  otherwise the whole block is handed out and counted (`should_split`);
- a freed block merges with free neighbours of its segment (`free_block`);
- `empty_cache` returns segments with no live block to the driver.
Defaults assumed: no `max_split_size_mb`, no `expandable_segments`, one stream.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

MIN_BLOCK_BYTES = 512  # kMinBlockSize
SMALL_REQUEST_BYTES = 1 << 20  # kSmallSize: largest small-pool request
SMALL_SEGMENT_BYTES = 2 << 20  # kSmallBuffer
LARGE_SEGMENT_BYTES = 20 << 20  # kLargeBuffer: segment for 1–10 MiB requests
MIN_LARGE_ALLOC_BYTES = 10 << 20  # kMinLargeAlloc
ROUND_LARGE_BYTES = 2 << 20  # kRoundLarge


def round_size(nbytes: int) -> int:
    """Block size of a request: a multiple of 512 B, at least 512 B."""
    return max(MIN_BLOCK_BYTES, -(-nbytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES)


def segment_size(nbytes: int) -> int:
    """Bytes cudaMalloc'd when no cached block fits a request of `nbytes` (already rounded)."""
    if nbytes <= SMALL_REQUEST_BYTES:
        return SMALL_SEGMENT_BYTES
    if nbytes < MIN_LARGE_ALLOC_BYTES:
        return LARGE_SEGMENT_BYTES
    return -(-nbytes // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


@dataclass(eq=False, slots=True)  # blocks are compared by identity
class _Block:
    segment: int
    offset: int
    size: int
    live: bool = False
    prev: _Block | None = None  # neighbours in the segment, by offset
    next: _Block | None = None


@dataclass(slots=True)
class _Segment:
    size: int
    small: bool  # small pool (requests <= 1 MiB) or large pool
    blocks: dict[int, _Block]  # by offset, covering the segment
    live: int = 0  # live blocks
    released: bool = False


@dataclass
class CachingAllocator:
    """One device's allocator state, from empty. `malloc` returns a handle for `free`.

    Every step is O(log n) plus list insertion: blocks are found by offset and linked to
    their neighbours, so 100 k tensors replay in well under a second."""

    allocated_bytes: int = 0  # torch.cuda.memory_allocated()
    # segments that hold a live block: what reserved_bytes falls to after empty_cache
    held_bytes: int = 0
    _segments: list[_Segment] = field(default_factory=list)
    # free blocks of each pool (True = small), sorted by (size, segment, offset): best fit first
    _free: dict[bool, list[tuple[int, int, int]]] = field(
        default_factory=lambda: {True: [], False: []})
    _live: dict[int, _Block] = field(default_factory=dict)
    _handles: int = 0

    @property
    def reserved_bytes(self) -> int:
        """Bytes held from the driver, torch.cuda.memory_reserved()."""
        return sum(s.size for s in self._segments if not s.released)

    def malloc(self, nbytes: int) -> int:
        size = round_size(nbytes)
        small = size <= SMALL_REQUEST_BYTES
        pool = self._free[small]
        i = bisect.bisect_left(pool, (size, -1, -1))
        if i < len(pool):
            _, seg, off = pool.pop(i)
            block = self._segments[seg].blocks[off]
        else:
            seg = len(self._segments)
            block = _Block(seg, 0, segment_size(size))
            self._segments.append(_Segment(block.size, small, {0: block}))
        segment = self._segments[seg]
        remaining = block.size - size
        if (remaining >= MIN_BLOCK_BYTES) if small else (remaining > SMALL_REQUEST_BYTES):
            rest = _Block(seg, block.offset + size, remaining, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            segment.blocks[rest.offset] = rest
            bisect.insort(pool, (rest.size, seg, rest.offset))
            block.size = size
        block.live = True
        if not segment.live:
            self.held_bytes += segment.size
        segment.live += 1
        self.allocated_bytes += block.size
        self._handles += 1
        self._live[self._handles] = block
        return self._handles

    def free(self, handle: int) -> None:
        block = self._live.pop(handle)
        block.live = False
        self.allocated_bytes -= block.size
        segment = self._segments[block.segment]
        segment.live -= 1
        if not segment.live:
            self.held_bytes -= segment.size
        pool = self._free[segment.small]
        for n in (block.next, block.prev):  # merge the next, then the previous free neighbour
            if n is not None and not n.live:
                pool.pop(bisect.bisect_left(pool, (n.size, n.segment, n.offset)))
                del segment.blocks[n.offset]
                if n is block.next:
                    block.next = n.next
                    if n.next is not None:
                        n.next.prev = block
                else:
                    del segment.blocks[block.offset]
                    block.offset = n.offset
                    segment.blocks[block.offset] = block
                    block.prev = n.prev
                    if n.prev is not None:
                        n.prev.next = block
                block.size += n.size
        bisect.insort(pool, (block.size, block.segment, block.offset))

    def empty_cache(self) -> None:
        """Return every segment that holds no live block to the driver."""
        for seg, segment in enumerate(self._segments):
            if not segment.released and segment.live == 0:
                for b in segment.blocks.values():
                    self._free[segment.small].remove((b.size, seg, b.offset))
                segment.released = True


def replay(sizes: list[int]) -> tuple[int, int]:
    """(allocated, reserved) bytes after allocating `sizes` in order on an empty allocator."""
    a = CachingAllocator()
    for n in sizes:
        a.malloc(n)
    return a.allocated_bytes, a.reserved_bytes
