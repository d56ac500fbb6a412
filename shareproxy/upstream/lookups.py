"""Topics and offsets looked up on the upstream cluster, asking it when this node does not know
them yet: what loading a share-partition, a reset, a redrive or an operator's view needs."""

from __future__ import annotations

from uuid import UUID

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.names import require_topic_name
from shareproxy.upstream.client import EARLIEST, TopicInfo, Upstream


async def topic_named(upstream: Upstream, name: str) -> TopicInfo:
    """The upstream topic, asking the cluster if it is not known yet."""
    require_topic_name(name)
    info = upstream.topics.get(name)
    if info is None:
        await upstream.refresh_metadata([name])
        info = upstream.topics.get(name)
    if info is None:
        raise ShareError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return info


async def topic_holding(upstream: Upstream, topic_id: UUID, partition: int) -> TopicInfo:
    """The upstream topic with this id and partition, asking the cluster if it is not known."""
    info = upstream.topics_by_id.get(topic_id)
    if info is None:
        await upstream.refresh_metadata()
        info = upstream.topics_by_id.get(topic_id)
    if info is None:  # never was, or deleted (a topic recreated under its name has a new id)
        raise ShareError(ErrorCode.UNKNOWN_TOPIC_ID, f"topic id {topic_id} does not exist")
    if partition not in info.leaders:
        raise ShareError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"topic {info.name!r} has no partition {partition}",
        )
    return info


class UpstreamOffsets:
    """ListOffsets of one upstream partition, as the core's OffsetLookup, for one load, view
    or plan: the log start offset is asked once (a load asked it twice, a plan three times)."""

    def __init__(self, upstream: Upstream, topic: str, partition: int) -> None:
        self.upstream, self.topic, self.partition = upstream, topic, partition
        self._earliest: int | None = None

    async def earliest_offset(self) -> int:
        if self._earliest is None:
            found = await self.upstream.list_offset(self.topic, self.partition, EARLIEST)
            self._earliest = found or 0
        return self._earliest

    async def latest_offset(self) -> int:
        start = await self.earliest_offset()
        return await self.upstream.log_end_offset(self.topic, self.partition, start)

    async def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        found = await self.upstream.list_offset(self.topic, self.partition, timestamp_ms)
        if found is None:
            return None
        return found
