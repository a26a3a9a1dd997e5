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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, count, groupby, islice, repeat
from operator import add, ne

MIN_BLOCK_BYTES = 512  # kMinBlockSize
SMALL_REQUEST_BYTES = 1 << 20  # kSmallSize: largest small-pool request
SMALL_SEGMENT_BYTES = 2 << 20  # kSmallBuffer
LARGE_SEGMENT_BYTES = 20 << 20  # kLargeBuffer: segment for 1–10 MiB requests
MIN_LARGE_ALLOC_BYTES = 10 << 20  # kMinLargeAlloc
ROUND_LARGE_BYTES = 2 << 20  # kRoundLarge
# malloc_chunks compares states of at most this many free blocks, each with the last few
# chunks after which it was seen
SIGNATURE_BLOCKS, PERIOD_TRIES = 32, 8


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

    def free_blocks(self) -> tuple[int, int]:
        """How many free blocks the small and the large pool hold."""
        return len(self._free[True]), len(self._free[False])

    def malloc(self, nbytes: int) -> int:
        block = self.fill((nbytes,))
        assert block is not None
        self._handles += 1
        self._live[self._handles] = block
        return self._handles

    def fill(self, sizes: Iterable[int]) -> _Block | None:
        """Allocate each of `sizes` in order, as malloc does, without handles (these blocks are
        never freed: a replay that frees nothing); the last block, None for no sizes."""
        free, segments = self._free, self._segments
        block = None
        for nbytes in sizes:
            # round_size, inlined (a replay allocates thousands of tensors)
            size = (MIN_BLOCK_BYTES if nbytes <= MIN_BLOCK_BYTES
                    else -(-nbytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES)
            small = size <= SMALL_REQUEST_BYTES
            pool = free[small]
            i = bisect.bisect_left(pool, (size, -1, -1))
            if i < len(pool):
                _, seg, off = pool.pop(i)
                segment = segments[seg]
                block = segment.blocks[off]
            else:
                seg = len(segments)
                block = _Block(seg, 0, segment_size(size))
                segment = _Segment(block.size, small, {0: block})
                segments.append(segment)
            remaining = block.size - size
            if (remaining >= MIN_BLOCK_BYTES) if small else (remaining > SMALL_REQUEST_BYTES):
                after = block.next
                offset = block.offset + size
                rest = _Block(seg, offset, remaining, False, block, after)
                if after is not None:
                    after.prev = rest
                block.next = rest
                segment.blocks[offset] = rest
                bisect.insort(pool, (remaining, seg, offset))
                block.size = size
            block.live = True
            if not segment.live:
                self.held_bytes += segment.size
            segment.live += 1
            self.allocated_bytes += block.size
        return block

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

    def signature(self, small: bool, floor: int) -> tuple[tuple[int, ...], ...] | None:
        """What decides how one pool serves requests of `floor` bytes (rounded) or more while
        nothing is freed: its free blocks of at least that size in best-fit order, each with
        its segment's rank among theirs, its rank among them by (segment, offset), and the
        segment's size when no live block holds it (its first use adds to held_bytes). A
        smaller block is never handed out and never merges, and a new segment or a split's
        remainder takes a place these ranks fix: two states with one signature serve the same
        requests with the same counter changes. None above SIGNATURE_BLOCKS free blocks."""
        pool = self._free[small]
        first = bisect.bisect_left(pool, (floor, -1, -1))
        if len(pool) - first > SIGNATURE_BLOCKS:
            return None
        segments = self._segments
        if len(pool) - first < 2:  # (most often: one segment's remainder, or none)
            return tuple((size, 0, 0, 0 if segments[seg].live else segments[seg].size)
                         for size, seg, _ in pool[first:])
        if len(pool) - first == 2:  # (next most often: the layers alternate two states)
            (s0, g0, o0), (s1, g1, o1) = pool[first:]
            p0 = 0 if (g0, o0) < (g1, o1) else 1
            return ((s0, 0 if g0 <= g1 else 1, p0, 0 if segments[g0].live else segments[g0].size),
                    (s1, 0 if g1 <= g0 else 1, 1 - p0,
                     0 if segments[g1].live else segments[g1].size))
        free = pool[first:]
        places = {b: k for k, b in enumerate(sorted((seg, off) for _, seg, off in free))}
        ranks = {seg: k for k, seg in enumerate(sorted({seg for _, seg, _ in free}))}
        return tuple((size, ranks[seg], places[seg, off],
                      0 if segments[seg].live else segments[seg].size)
                     for size, seg, off in free)

    def carve(self, small: bool, floor: int, nbytes: int, most: int) -> int:
        """Serve up to `most` runs of requests of `nbytes` in all (each rounded) from the pool's
        one free block of `floor` bytes or more, when it is the only one and its segment holds
        a live block: best fit picks it for each request and splits it (a run leaves at least
        a minimum remainder), so each run is carved off its start and nothing else changes.
        Returns how many runs; their blocks are counted, not kept (they cannot be freed)."""
        pool = self._free[small]
        first = bisect.bisect_left(pool, (floor, -1, -1))
        if len(pool) - first != 1:
            return 0
        size, seg, off = pool[first]
        segment = self._segments[seg]
        left = MIN_BLOCK_BYTES if small else SMALL_REQUEST_BYTES + 1  # should_split's minimum
        runs = min(most, (size - left) // nbytes) if segment.live else 0
        if runs > 0:
            block = segment.blocks.pop(off)
            del pool[first]
            block.offset += runs * nbytes
            block.size -= runs * nbytes
            segment.blocks[block.offset] = block
            bisect.insort(pool, (block.size, seg, block.offset))
            self.allocated_bytes += runs * nbytes
        return max(runs, 0)

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


# malloc_chunks' memo of the small pool's replays: (the pool's signature from 0 bytes before
# the chunks, the runs of equal chunks (chunk, how many) before the last run, that run's chunk)
# → (how many of that chunk a replay went on to, allocated and held growth after each chunk of
# that replay). A replay is filed under each of its runs, so chunks that begin it find it in
# one look-up. A pure function of its key: two pool states with one signature serve the same
# requests with the same counter changes (CachingAllocator.signature), and nothing is freed
# meanwhile.
PoolMemo = dict[tuple, tuple[int, tuple[list[int], list[int]]]]
POOL_MEMO_KEPT = 256


def malloc_chunks(a: CachingAllocator, chunks: Sequence[tuple[int, ...]],
                  memo: PoolMemo | None = None) -> tuple[list[int], list[int]]:
    """Allocate each chunk's sizes in order on `a`, nothing freed meanwhile; allocated_bytes and
    held_bytes after each chunk. The two pools never share a block, so each serves its own
    requests alone (_pool_chunks), and a pool whose chunks repeat (a model's identical layers)
    is not replayed in full. `a` is left in a state equivalent to the true one, not equal.
    `memo`: the small pool, when its state and chunks begin a replay the memo holds, is read
    from it (a model's norms and router gates are its requests at every TP size and in every
    PP stage), and then left as it was in `a`."""
    ids = list(map(id, chunks))
    smalls: dict[int, tuple[int, ...]] = {}
    larges: dict[int, tuple[int, ...]] = {}
    # identical chunks (one layer class) are split once
    for k, c in dict(zip(ids, chunks, strict=True)).items():
        smalls[k] = tuple(n for n in c if n <= SMALL_REQUEST_BYTES)
        larges[k] = tuple(n for n in c if n > SMALL_REQUEST_BYTES)
    # how many chunks from each on are that very chunk: the same in each pool's list (a chunk's
    # part is one object per chunk object; only an empty part, never carved, may be shared)
    same: list[int] = []
    for _, run in groupby(ids):
        same.extend(range(len(list(run)), 0, -1))
    # the counters before, then each pool's growth over them; summed element-wise in C (a
    # 126-layer stage has as many chunks)
    before = (repeat(a.allocated_bytes), repeat(a.held_bytes))
    small = _small_pool(a, list(map(smalls.__getitem__, ids)), same,
                        {id(c): c for c in smalls.values()}, memo)
    large = _pool_chunks(a, list(map(larges.__getitem__, ids)), False, same,
                         {id(c): c for c in larges.values()})
    return (list(map(add, map(add, small[0], large[0]), before[0])),
            list(map(add, map(add, small[1], large[1]), before[1])))


def _small_pool(a: CachingAllocator, chunks: list[tuple[int, ...]], same: list[int],
                distinct: dict[int, tuple[int, ...]],
                memo: PoolMemo | None) -> tuple[list[int], list[int]]:
    """_pool_chunks of the small pool, read from `memo` when a replay there began in this
    pool's state (its signature from 0 bytes: every free block) and its chunks begin with
    these; else replayed and filed there. Without a memo, or above SIGNATURE_BLOCKS free
    blocks, replayed."""
    sig = a.signature(True, 0) if memo is not None and chunks else None
    if memo is None or sig is None:
        return _pool_chunks(a, chunks, True, same, distinct)
    runs = [(c, len(list(g))) for c, g in groupby(chunks)]
    n = len(chunks)
    hit = memo.get((sig, tuple(runs[:-1]), runs[-1][0]))
    if hit is not None and hit[0] >= runs[-1][1]:
        return hit[1][0][:n], hit[1][1][:n]
    grown = _pool_chunks(a, chunks, True, same, distinct)
    if len(memo) >= POOL_MEMO_KEPT:
        memo.clear()
    for k, (chunk, times) in enumerate(runs):
        key = (sig, tuple(runs[:k]), chunk)
        if memo.get(key, (0,))[0] <= times:
            memo[key] = (times, grown)
    return grown


def _pool_chunks(a: CachingAllocator, chunks: list[tuple[int, ...]], small: bool,
                 same: list[int], distinct: dict[int, tuple[int, ...]]
                 ) -> tuple[list[int], list[int]]:
    """malloc_chunks for one pool's requests: how much allocated and held bytes grew after each
    chunk. Two shortcuts, both exact: a run of one chunk carved off the pool's only usable free
    block (CachingAllocator.carve: the norms of dense layers); and once the pool's signature
    after a chunk equals the one after an earlier chunk and the chunks since go on repeating,
    every further period changes the counters as that one did, so it is added, not replayed.
    `same[i]`: how many chunks from the i-th on are that very chunk (read for non-empty
    chunks); `distinct`: the chunks by id."""
    alloc0, held0 = a.allocated_bytes, a.held_bytes
    if not any(distinct.values()):
        return ([a.allocated_bytes - alloc0] * len(chunks),
                [a.held_bytes - held0] * len(chunks))
    floor = round_size(min(min(c) for c in distinct.values() if c))  # no smaller block is used
    nbytes = {k: sum(round_size(n) for n in c) for k, c in distinct.items()}
    grown: tuple[list[int], list[int]] = ([], [])
    at: dict[tuple[tuple[int, ...], ...], list[int]] = {}  # signature → chunks it followed
    skipped = [0, 0]  # what the periods not replayed added
    i = 0
    while i < len(chunks):
        size = nbytes[id(chunks[i])]
        runs = a.carve(small, floor, size, same[i]) if size else 0
        if runs:  # the counters after each run: allocated up by `size` each, held unchanged
            now = a.allocated_bytes - alloc0 + skipped[0]
            grown[0].extend(range(now - (runs - 1) * size, now + 1, size))
            grown[1].extend([a.held_bytes - held0 + skipped[1]] * runs)
            i += runs
            continue
        a.fill(chunks[i])
        grown[0].append(a.allocated_bytes - alloc0 + skipped[0])
        grown[1].append(a.held_bytes - held0 + skipped[1])
        sig = a.signature(small, floor)
        if sig is not None:
            seen = at.setdefault(sig, [])
            for prev in reversed(seen):
                period = i - prev
                repeats = _repeats(chunks, i + 1, period)
                if repeats:
                    for k, counts in enumerate(grown):
                        step = counts[i] - counts[prev]
                        last = counts[i + 1 - period:i + 1]  # the period, repeated with steps
                        counts.extend(_stepped(last, step, repeats))
                        skipped[k] += repeats * step
                    i += repeats * period
                    break
            seen.append(i)
            del seen[:-PERIOD_TRIES]
        i += 1
    return grown


def _stepped(last: list[int], step: int, repeats: int) -> Iterable[int]:
    """`last` repeated `repeats` times, the r-th time each value up by r × step: [n + r × step
    for r in 1…repeats for n in last], built in C (one range per value of the period)."""
    if not step:
        return last * repeats
    cols = [range(n + step, n + step * (repeats + 1), step) for n in last]
    return cols[0] if len(cols) == 1 else chain.from_iterable(zip(*cols, strict=True))


def _repeats(chunks: Sequence[tuple[int, ...]], start: int, period: int) -> int:
    """How many whole times the `period` chunks before `start` repeat from `start` on: the
    length of the run from `start` where each chunk equals the one `period` before, in
    periods (compared in C: a sweep replays hundreds of identical layers)."""
    differs = map(ne, islice(chunks, start, None), islice(chunks, start - period, None))
    return next(compress(count(), differs), max(0, len(chunks) - start)) // period
