"""Which proxy node leads a partition's share-partitions and which coordinates a share group,
decided from what every node reads from the store alone: the live nodes and the topic
catalogue (each topic's id and partition count, in the order topics entered it).

Partitions are placed as Kafka places leaders, evenly: a topic of P partitions on N nodes gives
each node P // N of them and P % N nodes one more (the extras). Which nodes take a topic's
extras is decided topic by topic in catalogue order, each time to the nodes that took fewest so
far, so every node's total is within one of every other's as well. Which partitions a node
takes within its quota is decided by rendezvous (highest-random-weight) hashing, taking the
highest draws first: when a node joins or leaves, the partitions that move are mostly those it
wins or held, not a reshuffle. Topics enter the catalogue at its end, so a new topic moves no
other topic's partitions.

A partition the catalogue does not know yet (a topic created since, or a partition added) is
placed by rendezvous hashing alone, which needs nothing but the live nodes; so is a group.
Leadership is by partition, not by share-partition, because clients send a partition's
ShareFetch to the leader that Metadata names for it, whatever the group. Who owns what is only
a routing decision: the state epoch still fences a node that believes it owns a share-partition
it no longer does.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from uuid import UUID


def partition_key(topic_id: UUID, partition: int) -> bytes:
    return b"p" + topic_id.bytes + partition.to_bytes(4, "big", signed=True)


def group_key(group_id: str) -> bytes:
    return b"g" + group_id.encode()


def topic_key(topic_id: UUID) -> bytes:
    return b"t" + topic_id.bytes


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


# the rules a node may place by, as it registers them: a fleet places by the oldest rule any
# live node knows, so nodes of two builds agree while a rolling upgrade is under way
RENDEZVOUS = 1  # every partition by rendezvous hashing alone
BALANCED = 2  # catalogued partitions spread evenly, per topic and per node
PLACEMENT_RULE = BALANCED  # this build's

Catalogue = Sequence[tuple[UUID, int]]  # (topic id, partition count), in the order they entered


def extras(catalogue: Catalogue, nodes: Sequence[int]) -> dict[UUID, frozenset[int]]:
    """For each topic whose partitions do not divide evenly, the nodes that lead one more:
    those that took fewest extras so far (ties to the higher draw for the topic), so that the
    extras, and with them every node's total, stay within one of each other. Worked out for
    the whole catalogue at each change of it or of the nodes, on the event loop; each topic's
    nodes ranked by draw are remembered across changes (``_ranked``), so a new topic costs the
    others a stable sort of a few nodes by how many they took."""
    members = tuple(nodes)
    taken = dict.fromkeys(members, 0)
    count_taken = taken.__getitem__
    found: dict[UUID, frozenset[int]] = {}
    for topic_id, count in catalogue:
        extra = count % len(members)
        if extra == 0:
            continue
        # stable: among nodes that took as many, the ranking by draw decides
        chosen = sorted(_ranked(topic_id, members), key=count_taken)[:extra]
        for n in chosen:
            taken[n] += 1
        found[topic_id] = frozenset(chosen)
    return found


# topics whose rankings are remembered, for the live nodes now and the set before (a few MiB
# at most); past it, rankings are worked out again, as for a new set of live nodes
_RANKINGS_REMEMBERED = 65_536


@functools.lru_cache(maxsize=_RANKINGS_REMEMBERED)
def _ranked(topic_id: UUID, nodes: tuple[int, ...]) -> tuple[int, ...]:
    """The nodes by their draw for the topic, highest first (equal draws: the lower id)."""
    seed = weight(0, topic_key(topic_id))
    salts = _salts(nodes)
    return tuple(sorted(nodes, key=lambda n: (-_mix(seed ^ salts[n]), n)))


@functools.lru_cache(maxsize=8)
def _salts(nodes: tuple[int, ...]) -> dict[int, int]:
    return {n: _mix(n) for n in nodes}


_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finaliser: a uniform 64-bit draw from a seed, in pure integer arithmetic."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def spread(topic_id: UUID, count: int, nodes: Sequence[int], extra: frozenset[int]) -> list[int]:
    """Each partition's leader: every node takes ``count // len(nodes)`` partitions (one more
    for those in ``extra``), the pairs of partition and node with the highest draws first."""
    room = {n: count // len(nodes) + (n in extra) for n in nodes}
    draws = sorted(
        ((weight(n, partition_key(topic_id, p)), -n, p) for p in range(count) for n in nodes),
        reverse=True,
    )
    leaders = [-1] * count
    for _, negated, p in draws:
        n = -negated
        if leaders[p] < 0 and room[n] > 0:
            leaders[p] = n
            room[n] -= 1
    return leaders


# a cap on the owners one placement remembers: FindCoordinator keys come from clients, so the
# cache must not grow with whatever they send (a miss only costs the hashing again)
_REMEMBERED = 100_000


class Placement:
    """Who owns what for one set of live nodes, one topic catalogue and one cluster generation
    (a number the store raises at every change of either, given to clients as the partitions'
    leader epoch, so a client never takes an older answer for a newer one). Answers are worked
    out when first asked and remembered: a placement is made at every read of the live nodes,
    changes rarely, and every ShareFetch asks about each of its partitions."""

    def __init__(
        self, nodes: Iterable[int], generation: int = 0, catalogue: Catalogue = ()
    ) -> None:
        self.nodes = tuple(sorted(set(nodes)))
        if not self.nodes:
            raise ValueError("a placement needs at least one node")
        self.generation = generation
        self.catalogue = tuple(catalogue)
        self._counts = dict(self.catalogue)
        self._extras: dict[UUID, frozenset[int]] | None = None
        self._spread: dict[UUID, list[int]] = {}
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
        leaders = self._spread.get(topic_id)
        if leaders is None:
            count = self._counts.get(topic_id)
            if count is None:  # not in the catalogue (yet)
                return self.owner(partition_key(topic_id, partition))
            if self._extras is None:
                self._extras = extras(self.catalogue, self.nodes)
            extra = self._extras.get(topic_id, frozenset())
            leaders = self._spread[topic_id] = spread(topic_id, count, self.nodes, extra)
        if 0 <= partition < len(leaders):
            return leaders[partition]
        return self.owner(partition_key(topic_id, partition))  # added since it was catalogued

    def group_coordinator(self, group_id: str) -> int:
        if len(self.nodes) == 1:
            return self.nodes[0]
        return self.owner(group_key(group_id))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and (self.nodes, self.generation, self.catalogue) == (
            other.nodes,
            other.generation,
            other.catalogue,
        )

    def __hash__(self) -> int:
        return hash((self.nodes, self.generation))
