"""Share-group assignment: every subscribed partition to at least one member, every member
some work, balanced, and sticky.

Share groups need no exclusive ownership, so when members outnumber a topic's partitions,
partitions are shared by several members. Stickiness matters because a member only learns its
new target at its next heartbeat (seconds later): a target that keeps what members already
have leaves the group balanced in the meantime, where a reshuffle would leave one member with
most partitions and others sharing one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from uuid import UUID

from shareproxy.core import simple_assignor

Assignment = dict[UUID, tuple[int, ...]]

# what ShareGroupDescribe names for this balanced, sticky assignor; Kafka's own ``simple``
# assignor is ``core.simple_assignor``, and ``ASSIGNORS`` (end of module) offers both by name
NAME = "sticky-balanced"


def assign(
    subscriptions: Mapping[str, Sequence[str]],
    topics: Mapping[str, tuple[UUID, int]],
    previous: Mapping[str, Assignment] | None = None,
) -> dict[str, Assignment]:
    """Map member id → {topic id: partitions}.

    ``subscriptions``: member id → subscribed topic names; ``topics``: topic name → (topic id,
    partition count) for topics that exist upstream; ``previous``: the last target of each
    member, kept where balance allows. Deterministic for the same inputs.
    """
    previous = previous or {}
    result: dict[str, dict[UUID, tuple[int, ...]]] = {m: {} for m in subscriptions}
    for name in sorted(topics):
        topic_id, count = topics[name]
        members = sorted(m for m, subs in subscriptions.items() if name in subs)
        if not members or count <= 0:
            continue
        # rotate the tie-break order per topic so the spare partitions of many topics spread
        shift = sum(name.encode()) % len(members)
        members = members[shift:] + members[:shift]
        held = {m: previous.get(m, {}).get(topic_id, ()) for m in members}
        if len(members) <= count:
            owned = _spread_partitions(members, count, held)
        else:
            owned = _share_partitions(members, count, held)
        for m, parts in owned.items():
            if parts:
                result[m][topic_id] = tuple(sorted(parts))
    return result


def _spread_partitions(
    members: list[str], count: int, held: Mapping[str, Sequence[int]]
) -> dict[str, list[int]]:
    """At most as many members as partitions: each partition to one member, loads within one."""
    most = -(-count // len(members))
    owned: dict[str, list[int]] = {m: [] for m in members}
    taken: set[int] = set()
    for m in members:
        for p in sorted(held[m]):
            if p < count and p not in taken and len(owned[m]) < most:
                owned[m].append(p)
                taken.add(p)
    for p in range(count):
        if p not in taken:
            least = min(members, key=lambda m: len(owned[m]))
            owned[least].append(p)
    while True:
        big = max(reversed(members), key=lambda m: len(owned[m]))
        small = min(members, key=lambda m: len(owned[m]))
        if len(owned[big]) - len(owned[small]) <= 1:
            return owned
        owned[small].append(owned[big].pop())


def _share_partitions(
    members: list[str], count: int, held: Mapping[str, Sequence[int]]
) -> dict[str, list[int]]:
    """More members than partitions: one partition each, every partition covered, the numbers
    of members per partition within one."""
    most = -(-len(members) // count)
    sharers: dict[int, list[str]] = {p: [] for p in range(count)}
    free: list[str] = []
    for m in members:
        kept = next((p for p in sorted(held[m]) if p < count and len(sharers[p]) < most), None)
        if kept is None:
            free.append(m)
        else:
            sharers[kept].append(m)
    for m in free:
        least = min(range(count), key=lambda p: (len(sharers[p]), p))
        sharers[least].append(m)
    while True:
        big = max(range(count), key=lambda p: (len(sharers[p]), -p))
        small = min(range(count), key=lambda p: (len(sharers[p]), p))
        if len(sharers[big]) - len(sharers[small]) <= 1:
            break
        sharers[small].append(sharers[big].pop())
    return {m: [p] for p, ms in sharers.items() for m in ms}


AssignFn = Callable[
    [Mapping[str, Sequence[str]], Mapping[str, tuple[UUID, int]], Mapping[str, Assignment] | None],
    dict[str, Assignment],
]
# group.share.assignors: the assignors a node may use, by name; the proxy's own by default
ASSIGNORS: dict[str, AssignFn] = {NAME: assign, simple_assignor.NAME: simple_assignor.assign}
DEFAULT = NAME
