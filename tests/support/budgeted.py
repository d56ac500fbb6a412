"""A share-partition leader whose log cache draws on a byte budget."""

from __future__ import annotations

from uuid import UUID, uuid4

from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.store import SharePartitionKey
from shareproxy.runtime.consuming.cache_budget import CacheBudget
from shareproxy.runtime.consuming.leader import SharePartitionLeader


def budgeted_leader(
    budget: CacheBudget, topic_id: UUID | None = None, partition: int = 0, topic: str = "t"
) -> SharePartitionLeader:
    """A leader of a new share-partition whose log cache counts against ``budget``."""
    settings = GroupSettings()
    return SharePartitionLeader(
        SharePartitionKey("g", topic_id or uuid4(), partition),
        topic,
        SharePartition(0, settings.limits),
        1,
        settings,
        None,  # type: ignore[arg-type]
        lambda: 0,
        lambda _: None,
        still_led=lambda: True,
        members_assigned=lambda: 0,
        cache_budget=budget,
    )
