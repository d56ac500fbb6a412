"""The real cluster, read with an ordinary client: aiokafka for connections (bootstrap, SASL,
TLS), kio messages for Metadata v12 (topic ids), Fetch (raw record bytes), ListOffsets and
ListGroups."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import UUID

from aiokafka.client import AIOKafkaClient
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.list_groups.v3.request import ListGroupsRequest
from kio.schema.list_offsets.v7 import request as lo_req
from kio.schema.metadata.v12 import request as md_req
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32, i64

from shareproxy.core.errors import ErrorCode
from shareproxy.protocol.kio_types import as_i32_timedelta, as_topic_name
from shareproxy.telemetry import metrics
from shareproxy.upstream.connections import Connections
from shareproxy.upstream.fetched import FetchViews, PartitionData
from shareproxy.upstream.kio_over_aiokafka import KioRequest
from shareproxy.upstream.shared_reads import SharedReads

log = logging.getLogger(__name__)
_FETCH_VIEWS = FetchViews()

EARLIEST = -2
LATEST = -1
# a Fetch's MaxBytes unless told less: what one answer may bring (the first batch always comes)
FETCH_MAX_BYTES = 50 * 1024 * 1024
# what a Fetch asks of each partition unless told otherwise
PARTITION_MAX_BYTES = 1024 * 1024
# deleted topics' names remembered, so one created again under its name is seen as replaced
MAX_GONE_TOPICS = 1000
NOT_LEADER_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
}


@contextlib.contextmanager
def _quiet_aiokafka(said: list[str]) -> Iterator[None]:
    """Collect aiokafka's log lines instead of printing them (the caller reports once)."""

    def collect(record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            said.append(record.getMessage())
        return False

    loggers = [logging.getLogger(n) for n in ("aiokafka", "aiokafka.client", "aiokafka.conn")]
    for logger in loggers:
        logger.addFilter(collect)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(collect)


class UpstreamError(Exception):
    """The upstream cluster could not answer; callers answer clients with a retriable error.
    Its ``code`` and ``message`` are read as a ``ShareError``'s are."""

    def __init__(self, message: str, code: int = ErrorCode.REQUEST_TIMED_OUT) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: UUID
    leaders: dict[int, int]  # partition -> leader node id
    # when (time.monotonic) the metadata first showed this id where the name had another, or
    # none (deleted) before; None for a topic first seen as it is
    replaced_at: float | None = None
    leader_epochs: dict[int, int] = field(default_factory=dict)  # partition -> leader epoch

    @property
    def partition_count(self) -> int:
        return len(self.leaders)


@dataclass(frozen=True, slots=True)
class UpstreamSettings:
    bootstrap_servers: str
    client_id: str = "shareproxy"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None
    ssl_context: Any = None
    request_timeout_ms: int = 30_000


class Upstream:
    def __init__(self, settings: UpstreamSettings) -> None:
        self.settings = settings
        self._client: AIOKafkaClient | None = None
        self._conns: Connections | None = None
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[UUID, TopicInfo] = {}
        self._gone: dict[str, UUID] = {}  # the last id of names the metadata no longer has
        # ids the cluster no longer has (deleted, or replaced under their name), newest last:
        # placement's catalogue drops them (ids are never reused)
        self.retired: dict[UUID, None] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1  # -1: unknown (a KRaft broker forwards controller requests)
        # whether the latest request to the cluster was answered (a gauge reads it)
        self.answering = True
        self._metadata_reads = SharedReads(self._read_metadata)
        # what a metadata read is followed by before its caller goes on: placement's catalogue
        # takes in the topics it found, so no one is told a new topic's leader before that
        self.after_metadata: Callable[[], Awaitable[None]] | None = None

    def connection_options(self) -> dict[str, Any]:
        """How to reach and authenticate to an upstream broker, for aiokafka."""
        s = self.settings
        kwargs: dict[str, Any] = {
            "client_id": s.client_id,
            "security_protocol": s.security_protocol,
            "request_timeout_ms": s.request_timeout_ms,
        }
        if s.sasl_mechanism:
            kwargs.update(
                sasl_mechanism=s.sasl_mechanism,
                sasl_plain_username=s.sasl_plain_username,
                sasl_plain_password=s.sasl_plain_password,
            )
        if s.ssl_context is not None:
            kwargs["ssl_context"] = s.ssl_context
        return kwargs

    async def start(self) -> None:
        s = self.settings
        self._client = AIOKafkaClient(
            bootstrap_servers=s.bootstrap_servers, **self.connection_options()
        )
        said: list[str] = []
        try:
            with _quiet_aiokafka(said):
                await self._client.bootstrap()
        except BaseException as exc:
            await self._client.close()
            self._client = None
            if not isinstance(exc, Exception):
                raise  # cancelled: the caller is stopping
            # aiokafka logs each broker's reason and raises a summary: keep the reasons
            reason = "; ".join(dict.fromkeys(said)) or f"{type(exc).__name__}: {exc}"
            raise UpstreamError(f"cannot reach {s.bootstrap_servers}: {reason}") from exc
        self._conns = Connections(self._client, self.connection_options())

    async def close(self) -> None:
        if self._conns is not None:
            await self._conns.close()
            self._conns = None
        if self._client is not None:
            await self._client.close()
            self._client = None

    @property
    def client(self) -> AIOKafkaClient:
        if self._client is None:
            raise UpstreamError("upstream client is not started")
        return self._client

    async def send(
        self, node_id: int, body: Any, *, long_poll: bool = False, decoder: Any = None
    ) -> Any:
        """Send on the node's default connection, or for a long poll on a second one: a broker
        answers one connection's requests in order, so a held fetch there would hold up every
        request behind it."""
        if self._conns is None:
            raise UpstreamError("upstream client is not started")
        try:
            answer = await self._conns.send(node_id, KioRequest(body, decoder), lane=int(long_poll))
        except Exception as exc:
            self.answering = False
            raise UpstreamError(f"request to upstream node {node_id} failed: {exc!r}") from exc
        self.answering = True
        return answer

    async def group_ids(self) -> set[str]:
        """The ids of every group the cluster holds (classic, consumer or other): each broker
        lists the groups it coordinates, so all are asked, with ListGroups v3 (Kafka 2.4+ and
        Tansu). UpstreamError when one cannot answer."""
        nodes = sorted(self._known_nodes()) or [await self.any_node()]
        answers = await asyncio.gather(*(self.send(n, ListGroupsRequest()) for n in nodes))
        for node, answer in zip(nodes, answers, strict=True):
            if int(answer.error_code) != ErrorCode.NONE:
                raise UpstreamError(
                    f"upstream node {node} could not list its groups (error "
                    f"{int(answer.error_code)})"
                )
        return {g.group_id for answer in answers for g in answer.groups}

    async def any_node(self) -> int:
        node = self.client.get_random_node()
        if node is None:
            try:
                await self.client.force_metadata_update()
            except Exception as exc:
                self.answering = False
                raise UpstreamError(f"no upstream broker reachable: {exc}") from exc
            node = self.client.get_random_node()
        if node is None:
            raise UpstreamError("no upstream broker is known")
        return node

    # ------------------------------------------------------------------ metadata
    async def refresh_metadata(self, topics: list[str] | None = None) -> dict[str, TopicInfo]:
        """Topic ids and partition leaders (all topics when ``topics`` is None), as a Metadata
        request sent after this call began read them; concurrent calls share requests."""
        await self._metadata_reads.read(topics)
        if self.after_metadata is not None:
            await self.after_metadata()
        if topics is None:
            return dict(self.topics)
        return {name: self.topics[name] for name in topics if name in self.topics}

    async def _read_metadata(self, topics: list[str] | None) -> None:
        request = md_req.MetadataRequest(
            topics=None
            if topics is None
            else tuple(
                md_req.MetadataRequestTopic(topic_id=None, name=as_topic_name(t)) for t in topics
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        response = await self.send(await self.any_node(), request)
        self.cluster_id = response.cluster_id
        self.controller_id = int(response.controller_id)
        found: dict[str, TopicInfo] = {}
        for t in response.topics:
            if (
                t.error_code != ErrorCode.NONE
                or t.name is None
                or t.topic_id is None
                or t.is_internal
            ):
                continue
            info = TopicInfo(
                t.name,
                t.topic_id,
                {p.partition_index: p.leader_id for p in t.partitions},
                self._replaced_at(t.name, t.topic_id),
                {p.partition_index: int(p.leader_epoch) for p in t.partitions},
            )
            found[t.name] = info
        for name, info in found.items():
            if name in self.topics and self.topics[name].topic_id != info.topic_id:
                self._retire(self.topics[name].topic_id)
        for name in self.topics.keys() - found.keys() if topics is None else set(topics):
            if name not in found and name in self.topics:
                self._gone[name] = self.topics[name].topic_id
                self._retire(self.topics[name].topic_id)
                if len(self._gone) > MAX_GONE_TOPICS:  # deleted for good: forget the oldest
                    del self._gone[next(iter(self._gone))]
        if topics is None:
            self.topics = dict(found)
        else:
            for name in topics:
                if name in found:
                    self.topics[name] = found[name]
                else:
                    self.topics.pop(name, None)
        self.topics_by_id = {t.topic_id: t for t in self.topics.values()}
        known = {b.node_id for b in response.brokers}
        if any(node not in self._known_nodes() for node in known):
            await self.client.force_metadata_update()

    def _retire(self, topic_id: UUID) -> None:
        self.retired[topic_id] = None
        if len(self.retired) > MAX_GONE_TOPICS:
            del self.retired[next(iter(self.retired))]

    def _replaced_at(self, name: str, topic_id: UUID) -> float | None:
        """When this id replaced another under ``name`` (now, if this read shows it first)."""
        known = self.topics.get(name)
        if known is not None and known.topic_id == topic_id:
            return known.replaced_at
        before = known.topic_id if known is not None else self._gone.pop(name, None)
        return time.monotonic() if before is not None and before != topic_id else None

    def _known_nodes(self) -> set[int]:
        return {b.nodeId for b in self.client.cluster.brokers()}

    async def leader_for(self, topic: str, partition: int) -> int:
        """The upstream node leading ``topic``-``partition`` (metadata refreshed if unknown)."""
        info = self.topics.get(topic)
        if info is None or partition not in info.leaders:
            await self.refresh_metadata([topic])
            info = self.topics.get(topic)
        if info is None or partition not in info.leaders:
            raise UpstreamError(
                f"{topic}-{partition} does not exist upstream",
                code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            )
        return info.leaders[partition]

    # ------------------------------------------------------------------ fetch
    async def fetch(
        self,
        wanted: dict[tuple[str, int], int],
        *,
        max_wait_ms: int = 0,
        max_bytes: int = FETCH_MAX_BYTES,
        partition_max_bytes: int = PARTITION_MAX_BYTES,
        isolation_level: int = 0,
    ) -> dict[tuple[str, int], PartitionData]:
        """Raw record batches from each (topic, partition) at the given offset; a fetch that may
        wait (max_wait_ms > 1) goes over the long-poll connection."""
        by_leader: dict[int, dict[str, list[fetch_req.FetchPartition]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for (topic, partition), offset in wanted.items():
            leader = await self.leader_for(topic, partition)
            by_leader[leader][topic].append(
                fetch_req.FetchPartition(
                    partition=i32(partition),
                    fetch_offset=i64(offset),
                    partition_max_bytes=i32(partition_max_bytes),
                )
            )
        requests = [
            self.send(
                node,
                fetch_req.FetchRequest(
                    # some brokers (Tansu) answer max_wait 0 with no partitions at all
                    max_wait=as_i32_timedelta(timedelta(milliseconds=max(1, max_wait_ms))),
                    min_bytes=i32(1),
                    max_bytes=i32(max_bytes),
                    isolation_level=i8(isolation_level),
                    topics=tuple(
                        fetch_req.FetchTopic(topic=as_topic_name(t), partitions=tuple(ps))
                        for t, ps in topics.items()
                    ),
                    forgotten_topics_data=(),
                ),
                long_poll=max_wait_ms > 1,
                decoder=_FETCH_VIEWS,
            )
            for node, topics in by_leader.items()
        ]
        out: dict[tuple[str, int], PartitionData] = {}
        stale = False
        with metrics.UPSTREAM_FETCH_SECONDS.time():
            responses = await asyncio.gather(*requests)
        for fetched in responses:
            for topic, partition, data in fetched:
                if data.error_code in NOT_LEADER_ERRORS:
                    stale = True
                out[(topic, partition)] = data
        metrics.UPSTREAM_FETCH_BYTES.inc(sum(len(d.records) for d in out.values()))
        if stale:
            await self.refresh_metadata(sorted({t for t, _ in wanted}))
        return out

    # ------------------------------------------------------------------ offsets
    async def list_offset(
        self, topic: str, partition: int, timestamp: int, isolation_level: int = 0
    ) -> int | None:
        """ListOffsets: EARLIEST (-2), LATEST (-1) or the first offset at/after a timestamp
        (None when there is none)."""
        found = await self.offset_and_time(topic, partition, timestamp, isolation_level)
        return None if found is None else found[0]

    async def offset_and_time(
        self, topic: str, partition: int, timestamp: int, isolation_level: int = 0
    ) -> tuple[int, int] | None:
        """ListOffsets' offset with the timestamp the broker gives for it (-1: none given);
        None when there is no such offset."""
        leader = await self.leader_for(topic, partition)
        response = await self.send(
            leader,
            lo_req.ListOffsetsRequest(
                replica_id=BrokerId(-1),
                isolation_level=i8(isolation_level),
                topics=(
                    lo_req.ListOffsetsTopic(
                        name=as_topic_name(topic),
                        partitions=(
                            lo_req.ListOffsetsPartition(
                                partition_index=i32(partition), timestamp=i64(timestamp)
                            ),
                        ),
                    ),
                ),
            ),
        )
        p = response.topics[0].partitions[0]
        if p.error_code != ErrorCode.NONE:
            raise UpstreamError(
                f"ListOffsets {topic}-{partition} failed with error {p.error_code}",
                int(p.error_code),
            )
        return None if p.offset < 0 else (int(p.offset), int(p.timestamp))

    async def log_end_offset(self, topic: str, partition: int, log_start: int) -> int:
        """The high watermark. Asked through a Fetch as well as ListOffsets, because not every
        Kafka-compatible broker answers ListOffsets(LATEST) with the log end."""
        listed = await self.list_offset(topic, partition, LATEST) or 0
        data = (await self.fetch({(topic, partition): log_start}, partition_max_bytes=1)).get(
            (topic, partition)
        )
        fetched = (
            data.high_watermark if data is not None and data.error_code == ErrorCode.NONE else 0
        )
        return max(listed, fetched, log_start)

    async def partition_offsets(self, topic: str) -> list[tuple[int, int, int, int]]:
        """(partition, log start, high watermark, last stable offset) for every partition of
        the topic: the log start from ListOffsets, the others from one Fetch (see
        ``log_end_offset``); a broker without transactions reports no LSO: the HWM is."""
        info = self.topics.get(topic)
        if info is None:
            raise UpstreamError(
                f"{topic} does not exist upstream", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        starts = {p: await self.list_offset(topic, p, EARLIEST) or 0 for p in info.leaders}
        data = await self.fetch(
            {(topic, p): start for p, start in starts.items()}, partition_max_bytes=1
        )
        out = []
        for p, start in sorted(starts.items()):
            d = data.get((topic, p))
            if d is not None and d.error_code == ErrorCode.NONE:
                hwm = max(d.high_watermark, start)
                lso = d.last_stable_offset if d.last_stable_offset >= 0 else hwm
            else:
                hwm = lso = start
            out.append((p, start, hwm, lso))
        return out
