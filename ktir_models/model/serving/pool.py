"""The KV block pool: which of the ``num_blocks`` cache blocks each sequence holds.

Blocks are handed out lowest id first, so a block freed by a finished sequence is the next one a
new sequence receives: after sequences come and go, a sequence's blocks are not contiguous. One
extra physical block (id ``num_blocks``) is the scratch block padding rows write to; it is never
handed out.
"""

from __future__ import annotations

import heapq


class PoolExhausted(Exception):
    """Not enough free blocks now (the scheduler waits; never raised to the user)."""


class BlockPool:
    """``num_blocks`` usable blocks of ``block_size`` slots; invariant: a block is either free or
    held by exactly one owner."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free = list(range(num_blocks))
        heapq.heapify(self._free)
        self._owner: dict[int, str] = {}

    @property
    def scratch_block(self) -> int:
        return self.num_blocks

    @property
    def free_count(self) -> int:
        return len(self._free)

    @property
    def in_use(self) -> int:
        return len(self._owner)

    def allocate(self, owner: str, count: int) -> list[int]:
        """``count`` free blocks for ``owner`` (lowest ids first); PoolExhausted when too few."""
        if count > len(self._free):
            raise PoolExhausted(f"{owner}: {count} blocks wanted, {len(self._free)} free")
        blocks = [heapq.heappop(self._free) for _ in range(count)]
        for b in blocks:
            self._owner[b] = owner
        return blocks

    def free(self, owner: str, blocks: list[int]) -> None:
        for b in blocks:
            if self._owner.get(b) != owner:
                raise AssertionError(f"block {b} is not held by {owner}")
            del self._owner[b]
            heapq.heappush(self._free, b)


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks that hold ``tokens`` cache slots."""
    return -(-tokens // block_size)
