"""Topics and offsets looked up on the upstream cluster, asking it when this node does not know
them yet: what loading a share-partition, a reset, a redrive or an operator's view needs."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.names import require_topic_name
from shareproxy.protocol.record_batch import BatchInfo, first_record_at, scan_batches
from shareproxy.upstream.client import EARLIEST, TopicInfo, Upstream, UpstreamError


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
        """The first offset stamped at or after ``timestamp_ms``, as Kafka's ListOffsets
        answers it, on any upstream: the broker's answer is read as a lower bound and checked
        against the log, since Tansu answers offset 0 (with the current time) for any time,
        which taken as it came would rewind a group to the start of its partition. Timestamps
        are taken to grow along the log, as the time index Kafka answers from assumes."""
        found = await self.upstream.list_offset(self.topic, self.partition, timestamp_ms)
        if found is None:
            return None
        end = await self.latest_offset()
        if end <= found:
            return None
        last = await self._batch_at(end - 1)
        if last.max_timestamp < timestamp_ms:
            return None  # no record that late: none, as Kafka answers
        low = await self._batch_at(found)
        while low.max_timestamp < timestamp_ms and low.last_offset + 1 < last.base_offset:
            mid = await self._batch_at((low.last_offset + 1 + last.base_offset - 1) // 2)
            if mid.base_offset >= last.base_offset:
                break
            if mid.max_timestamp >= timestamp_ms:
                last = mid
            else:
                low = mid
        first = low if low.max_timestamp >= timestamp_ms else last
        return first_record_at(first.data, first.info, timestamp_ms)

    async def _batch_at(self, offset: int) -> _Batch:
        """The batch holding ``offset`` (or the next one, past a gap), read upstream."""
        key = (self.topic, self.partition)
        data = (await self.upstream.fetch({key: offset}, partition_max_bytes=1)).get(key)
        if data is None or data.error_code != ErrorCode.NONE:
            code = None if data is None else data.error_code
            raise UpstreamError(f"reading {self.topic}-{self.partition} at {offset}: error {code}")
        held = [b for b in scan_batches(data.records) if b.last_offset >= offset]
        if not held:
            raise UpstreamError(f"{self.topic}-{self.partition} holds no record at {offset}")
        return _Batch(data.records, held[0])


@dataclass(frozen=True, slots=True)
class _Batch:
    data: bytes | memoryview
    info: BatchInfo

    @property
    def base_offset(self) -> int:
        return self.info.base_offset

    @property
    def last_offset(self) -> int:
        return self.info.last_offset

    @property
    def max_timestamp(self) -> int:
        return self.info.max_timestamp
