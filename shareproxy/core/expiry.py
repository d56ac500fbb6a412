"""Share-group state that has outlived the retention, as the running proxy expires it.

Kafka keeps a share group until it is deleted (since 4.1, KAFKA-19016), and so does the proxy by
default. An operator who sets a retention gets ``offsets.retention.minutes`` semantics instead: a
group empty for longer than the retention is deleted with all its state, and a live group's state
for a topic none of its members has subscribed to for that long is deleted. The rules are
``drift.py``'s, which the reconcile job applies offline; here they judge one group at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from shareproxy.core.drift import GroupFacts, expired, unsubscribed
from shareproxy.core.store import GroupMembership, SharePartitionKey


@dataclass(frozen=True, slots=True)
class Expiry:
    group: bool  # the whole group goes, with every share-partition it has
    partitions: tuple[SharePartitionKey, ...]  # the share-partitions whose state goes
    topics: tuple[str, ...]  # the unsubscribed topics they belong to (empty for a group)


def facts_of(m: GroupMembership) -> GroupFacts:
    """A stored membership as the rules read it: times as epoch milliseconds."""

    def ms(moment: datetime | None) -> int | None:
        return None if moment is None else int(moment.timestamp() * 1000)

    return GroupFacts(
        m.group_id, m.subscribed_topics, ms(m.subscription_changed_at), ms(m.empty_since)
    )


def expiring(
    group: GroupFacts,
    stored: Mapping[SharePartitionKey, str | None],
    has_members: bool,
    now_ms: int,
    retention_ms: int | None,
) -> Expiry:
    """What of one group has expired. ``stored`` maps its share-partitions to their topic's
    current name (None: the cluster no longer has that topic id, which reconcile repairs);
    ``has_members``: members the coordinator holds now, whatever the store last recorded."""
    if not has_members and expired(group, now_ms, retention_ms):
        return Expiry(True, tuple(stored), ())
    keys = tuple(k for k, name in stored.items() if unsubscribed(group, name, now_ms, retention_ms))
    return Expiry(False, keys, tuple(sorted({n for k in keys if (n := stored[k]) is not None})))
