"""The upstream cluster in memory, for the middle tier: topics whose logs the test writes, read
through the same ``Upstream`` face the runtime reads a real cluster through.

It answers as a Kafka broker does where the runtime relies on it: a fetch returns whole v2
record batches from the one holding the fetch offset (at least one, even past the byte limit),
an offset below the log start or past the end is OFFSET_OUT_OF_RANGE, an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION, a fetch that may wait (MaxWaitMs > 1) returns as soon as any of
its partitions has records, or empty once the wait is over (on the virtual clock), and
ListOffsets answers EARLIEST, LATEST and timestamps. A deleted topic recreated under its name
gets a new topic id. ``outage`` makes every request fail as an unreachable cluster does.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import uuid
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from shareproxy.core.errors import ErrorCode
from shareproxy.upstream.client import (
    EARLIEST,
    FETCH_MAX_BYTES,
    LATEST,
    TopicInfo,
    Upstream,
    UpstreamError,
    UpstreamSettings,
)
from shareproxy.upstream.fetched import PartitionData

NODE = 1  # the one broker; it leads every partition

# (key, value), or (key, value, headers as (name, value) pairs)
Record = (
    tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes]]]
)


@dataclass(slots=True)
class _Batch:
    base_offset: int
    last_offset: int
    timestamps: list[int]  # per record, epoch ms
    data: bytes


@dataclass(slots=True)
class _Log:
    log_start: int = 0
    end: int = 0  # the high watermark: the next offset to be written
    batches: list[_Batch] = field(default_factory=list)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``: at least one, then as many as fit."""
        i = bisect_right([b.last_offset for b in self.batches], offset - 1)
        out: list[bytes] = []
        size = 0
        for batch in self.batches[i:]:
            if out and size + len(batch.data) > max_bytes:
                break
            out.append(batch.data)
            size += len(batch.data)
        return b"".join(out)


def record_batch(base_offset: int, records: Sequence[Record], timestamp_ms: int) -> bytes:
    """One uncompressed v2 record batch at ``base_offset``, as a broker stores it."""
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
    for i, (key, value, *headers) in enumerate(records):
        named = list(headers[0]) if headers else []
        builder.append(i, timestamp=timestamp_ms, key=key, value=value, headers=named)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)  # the broker's offset; outside the CRC
    return bytes(data)


class ScriptedUpstream(Upstream):
    """An ``Upstream`` over logs held in memory; ``create_topic`` and ``produce`` write them."""

    def __init__(self, clock_ms: Callable[[], int]) -> None:
        super().__init__(UpstreamSettings("scripted-upstream:9092"))
        self.clock_ms = clock_ms
        self.outage = False  # every request fails while set
        # the next this many Fetches that do not wait (MaxWaitMs at most 1) get no records, as
        # from a broker whose read of its log took longer than the wait (Tansu under load)
        self.slow_reads = 0
        self.cluster_id = "scripted"
        self.controller_id = NODE
        self.fetches: list[dict[tuple[str, int], int]] = []  # every fetch's offsets, in order
        self.consumer_groups: set[str] = set()  # the cluster's own groups, by id
        self.leader_epochs: dict[tuple[str, int], int] = {}  # a partition's, when not 0
        self._ids: dict[str, uuid.UUID] = {}
        self._logs: dict[tuple[str, int], _Log] = {}
        self._grew = asyncio.Event()  # set (and replaced) when any log grows

    # the script
    def create_topic(self, name: str | None = None, partitions: int = 1) -> str:
        name = name or f"t-{uuid.uuid4().hex[:8]}"
        if name in self._ids:
            raise ValueError(f"topic {name} exists")
        self._ids[name] = uuid.uuid4()
        for p in range(partitions):
            self._logs[(name, p)] = _Log()
        return name

    def delete_topic(self, name: str) -> None:
        del self._ids[name]
        for key in [k for k in self._logs if k[0] == name]:
            del self._logs[key]

    def produce(
        self,
        topic: str,
        records: int | Sequence[Record],
        partition: int = 0,
        *,
        timestamp_ms: int | None = None,
    ) -> tuple[int, int]:
        """One batch of ``records`` (or of that many keyless values); its first and last
        offsets."""
        if isinstance(records, int):
            records = [(None, b"v%d" % i) for i in range(records)]
        log = self._logs[(topic, partition)]
        ts = self.clock_ms() if timestamp_ms is None else timestamp_ms
        base = log.end
        log.batches.append(
            _Batch(
                base, base + len(records) - 1, [ts] * len(records), record_batch(base, records, ts)
            )
        )
        log.end += len(records)
        self._grew.set()
        self._grew = asyncio.Event()
        return base, log.end - 1

    def delete_records(self, topic: str, partition: int, before: int) -> None:
        """Move the log start to ``before``, as retention or DeleteRecords does."""
        log = self._logs[(topic, partition)]
        log.log_start = min(before, log.end)
        log.batches = [b for b in log.batches if b.last_offset >= log.log_start]

    def offsets(self, topic: str, partition: int = 0) -> tuple[int, int]:
        """(log start, high watermark)."""
        log = self._logs[(topic, partition)]
        return log.log_start, log.end

    # the Upstream face
    def _answering(self) -> None:
        self.answering = not self.outage
        if self.outage:
            raise UpstreamError("upstream node 1 cannot be reached (a scripted outage)")

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def any_node(self) -> int:
        self._answering()
        return NODE

    async def _read_metadata(self, topics: list[str] | None) -> None:
        await asyncio.sleep(0)  # a round trip
        self._answering()
        names = list(self._ids) if topics is None else [t for t in topics if t in self._ids]
        found = {}
        for name in names:
            partitions = {p: NODE for (t, p) in self._logs if t == name}
            found[name] = TopicInfo(
                name,
                self._ids[name],
                partitions,
                self._replaced_at(name, self._ids[name]),
                {p: self.leader_epochs.get((name, p), 0) for p in partitions},
            )
        for name in (self.topics.keys() - found.keys()) if topics is None else topics:
            if name not in found and name in self.topics:
                self._gone[name] = self.topics.pop(name).topic_id
        self.topics.update(found)
        self.topics_by_id = {t.topic_id: t for t in self.topics.values()}

    async def group_ids(self) -> set[str]:
        await asyncio.sleep(0)  # a round trip
        self._answering()
        return set(self.consumer_groups)

    async def leader_for(self, topic: str, partition: int) -> int:
        if (topic, partition) not in self._logs:
            raise UpstreamError(
                f"{topic}-{partition} does not exist upstream",
                code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            )
        return NODE

    async def fetch(
        self,
        wanted: dict[tuple[str, int], int],
        *,
        max_wait_ms: int = 0,
        max_bytes: int = FETCH_MAX_BYTES,
        partition_max_bytes: int = 1024 * 1024,
        isolation_level: int = 0,
    ) -> dict[tuple[str, int], PartitionData]:
        self.fetches.append(dict(wanted))
        deadline = asyncio.get_running_loop().time() + max_wait_ms / 1000
        while True:
            await asyncio.sleep(0)  # a round trip
            self._answering()
            out = {
                where: self._read(where, offset, partition_max_bytes)
                for where, offset in wanted.items()
            }
            if max_wait_ms <= 1 and self.slow_reads > 0:
                self.slow_reads -= 1
                for data in out.values():
                    data.records = b""
            remaining = deadline - asyncio.get_running_loop().time()
            if max_wait_ms <= 1 or remaining <= 0 or any(d.records for d in out.values()):
                return out
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._grew.wait(), remaining)

    def _read(self, where: tuple[str, int], offset: int, max_bytes: int) -> PartitionData:
        log = self._logs.get(where)
        if log is None:
            return PartitionData(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1, b"")
        if not log.log_start <= offset <= log.end:
            return PartitionData(
                ErrorCode.OFFSET_OUT_OF_RANGE, log.end, log.end, log.log_start, b""
            )
        return PartitionData(
            ErrorCode.NONE, log.end, log.end, log.log_start, log.read(offset, max_bytes)
        )

    async def list_offset(
        self, topic: str, partition: int, timestamp: int, isolation_level: int = 0
    ) -> int | None:
        await asyncio.sleep(0)  # a round trip
        self._answering()
        log = self._logs.get((topic, partition))
        if log is None:
            raise UpstreamError(
                f"ListOffsets {topic}-{partition} failed with error 3",
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            )
        if timestamp == EARLIEST:
            return log.log_start
        if timestamp == LATEST:
            return log.end
        for batch in log.batches:
            for i, ts in enumerate(batch.timestamps):
                if ts >= timestamp and batch.base_offset + i >= log.log_start:
                    return batch.base_offset + i
        return None

    async def offset_and_time(
        self, topic: str, partition: int, timestamp: int, isolation_level: int = 0
    ) -> tuple[int, int] | None:
        offset = await self.list_offset(topic, partition, timestamp, isolation_level)
        if offset is None:
            return None
        if timestamp < 0:
            return offset, -1
        log = self._logs[(topic, partition)]
        batch = next(b for b in log.batches if b.base_offset <= offset <= b.last_offset)
        return offset, batch.timestamps[offset - batch.base_offset]

    @property
    def client(self) -> Any:
        raise UpstreamError("the scripted upstream has no aiokafka client")
