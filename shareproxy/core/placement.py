"""Which proxy node leads a partition's share-partitions and which coordinates a share group,
decided from the set of live nodes alone.

Rendezvous (highest-random-weight) hashing: every node computes the same owner from the same
live set, with no messages between nodes, and when a node joins or leaves only the keys it wins
or held move. Leadership is by partition, not by share-partition, because clients send a
partition's ShareFetch to the leader that Metadata names for it, whatever the group. Who owns
what is only a routing decision: the state epoch still fences a node that believes it owns a
share-partition it no longer does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from uuid import UUID


def partition_key(topic_id: UUID, partition: int) -> bytes:
    return b"p" + topic_id.bytes + partition.to_bytes(4, "big", signed=True)


def group_key(group_id: str) -> bytes:
    return b"g" + group_id.encode()


def weight(node_id: int, key: bytes) -> int:
    """A node's draw for a key: uniform, stable across processes and versions of Python
    (``hash()`` is salted per process, so it cannot be used)."""
    digest = hashlib.blake2b(key, digest_size=8, key=node_id.to_bytes(8, "big", signed=True))
    return int.from_bytes(digest.digest(), "big")


def owner(key: bytes, nodes: Iterable[int]) -> int | None:
    """The live node with the highest draw for the key (ties, which need equal 64-bit draws,
    go to the lower id); None when no node is live."""
    best: tuple[int, int] | None = None
    for node in nodes:
        candidate = (weight(node, key), -node)
        if best is None or candidate > best:
            best = candidate
    return None if best is None else -best[1]


# a cap on the owners one placement remembers: FindCoordinator keys come from clients, so the
# cache must not grow with whatever they send (a miss only costs the hashing again)
_REMEMBERED = 100_000


class Placement:
    """Who owns what for one set of live nodes and one cluster generation (a number the store
    raises at every change of the set, given to clients as the partitions' leader epoch, so a
    client never takes an older answer for a newer one). Answers are remembered: the set
    changes rarely and every ShareFetch asks about each of its partitions."""

    def __init__(self, nodes: Iterable[int], generation: int = 0) -> None:
        self.nodes = tuple(sorted(set(nodes)))
        if not self.nodes:
            raise ValueError("a placement needs at least one node")
        self.generation = generation
        self._owners: dict[bytes, int] = {}

    def owner(self, key: bytes) -> int:
        if len(self.nodes) == 1:
            return self.nodes[0]
        found = self._owners.get(key)
        if found is None:
            found = owner(key, self.nodes)
            assert found is not None
            if len(self._owners) >= _REMEMBERED:
                self._owners.clear()
            self._owners[key] = found
        return found

    def partition_leader(self, topic_id: UUID, partition: int) -> int:
        if len(self.nodes) == 1:  # no key to build: asked for each partition of every fetch
            return self.nodes[0]
        return self.owner(partition_key(topic_id, partition))

    def group_coordinator(self, group_id: str) -> int:
        if len(self.nodes) == 1:
            return self.nodes[0]
        return self.owner(group_key(group_id))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and (self.nodes, self.generation) == (
            other.nodes,
            other.generation,
        )

    def __hash__(self) -> int:
        return hash((self.nodes, self.generation))
