"""Share-group assignment: every subscribed partition to at least one member, every member
some work. Share groups need no exclusive ownership, so when members outnumber a topic's
partitions, partitions are shared by several members."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

Assignment = dict[UUID, tuple[int, ...]]


def assign(
    subscriptions: Mapping[str, Sequence[str]],
    topics: Mapping[str, tuple[UUID, int]],
) -> dict[str, Assignment]:
    """Map member id → {topic id: partitions}.

    ``subscriptions``: member id → subscribed topic names; ``topics``: topic name → (topic id,
    partition count) for topics that exist upstream. Deterministic for the same inputs.
    """
    result: dict[str, dict[UUID, list[int]]] = {m: {} for m in subscriptions}
    for name in sorted(topics):
        topic_id, count = topics[name]
        members = sorted(m for m, subs in subscriptions.items() if name in subs)
        if not members or count <= 0:
            continue
        # rotate the starting member per topic so single-partition topics spread out
        shift = sum(name.encode()) % len(members)
        members = members[shift:] + members[:shift]
        if len(members) <= count:
            for p in range(count):
                result[members[p % len(members)]].setdefault(topic_id, []).append(p)
        else:
            for i, m in enumerate(members):
                result[m].setdefault(topic_id, []).append(i % count)
    return {m: {t: tuple(sorted(ps)) for t, ps in a.items()} for m, a in result.items()}
