"""A Produce partition the upstream answered UNKNOWN_SERVER_ERROR gets Kafka's retriable code
when its topic turns out deleted or created again — also when the deletion reaches the
metadata only a moment after the write failed — and keeps the code when the topic is the one
the request was routed to."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from types import SimpleNamespace
from uuid import UUID, uuid4

from kio.schema.produce.v9.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.handlers.produce_errors import retriable_if_deleted
from shareproxy.kafka.responses import error
from shareproxy.upstream.client import Upstream, UpstreamSettings


class Metadata:
    """What each metadata read shows of the topic ``t``: one id (None: missing) per read, the
    last one repeated."""

    def __init__(self, *reads: UUID | None, replaced_at: float | None = None) -> None:
        self.reads = list(reads)
        self.shown: UUID | None = None
        self.count = 0
        self.replaced_at = replaced_at

    async def refresh_metadata(self, topics: list[str] | None = None) -> None:
        self.shown = self.reads[min(self.count, len(self.reads) - 1)]
        self.count += 1

    def topic(self, name: str) -> object | None:
        if self.shown is None:
            return None
        return SimpleNamespace(topic_id=self.shown, replaced_at=self.replaced_at)


def _answer(code: int) -> ProduceResponse:
    part = PartitionProduceResponse(
        index=i32(0),
        error_code=error(code),
        base_offset=i64(-1),
        log_append_time=None,
        log_start_offset=i64(-1),
        record_errors=(),
        error_message=None,
    )
    topic = TopicProduceResponse(name=TopicName("t"), partition_responses=(part,))
    return ProduceResponse(responses=(topic,), throttle_time=timedelta(0))


def _code(ctx: Metadata, routed: UUID | None) -> int:
    answer = asyncio.run(
        retriable_if_deleted(ctx, _answer(ErrorCode.UNKNOWN_SERVER_ERROR), {"t": routed})  # type: ignore[arg-type]
    )
    return int(answer.responses[0].partition_responses[0].error_code)  # type: ignore[union-attr]


def test_a_deleted_topic_is_unknown_topic_or_partition():
    routed = uuid4()
    assert _code(Metadata(None), routed) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_topic_created_again_is_not_leader_or_follower():
    assert _code(Metadata(uuid4()), uuid4()) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_topic_unknown_when_routed_and_there_now_is_not_leader_or_follower():
    assert _code(Metadata(uuid4()), None) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_deletion_the_metadata_shows_a_moment_later_is_still_found():
    routed = uuid4()
    ctx = Metadata(routed, None)
    assert _code(ctx, routed) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ctx.count == 2


def test_the_same_topic_keeps_unknown_server_error():
    routed = uuid4()
    ctx = Metadata(routed)
    assert _code(ctx, routed) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert ctx.count == 4


def test_a_write_to_the_topic_created_again_a_moment_ago_is_not_leader_or_follower():
    """Routed to the new topic, but the broker does not serve it yet (Tansu answers
    UNKNOWN_SERVER_ERROR): Kafka's broker answers NOT_LEADER_OR_FOLLOWER until it hosts the
    new partition, so the producer retries instead of dropping the records."""
    routed = uuid4()
    ctx = Metadata(routed, replaced_at=time.monotonic() - 1)
    assert _code(ctx, routed) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    ctx = Metadata(routed, replaced_at=time.monotonic() - 60)  # long since created
    assert _code(ctx, routed) == ErrorCode.UNKNOWN_SERVER_ERROR


def _shows(*topics: tuple[str, UUID]) -> SimpleNamespace:
    return SimpleNamespace(
        cluster_id="c",
        controller_id=1,
        brokers=[],
        topics=[
            SimpleNamespace(
                error_code=0,
                name=name,
                topic_id=topic_id,
                is_internal=False,
                partitions=[SimpleNamespace(partition_index=0, leader_id=1, leader_epoch=0)],
            )
            for name, topic_id in topics
        ],
    )


def test_the_metadata_notes_when_a_name_gets_another_topic():
    upstream = Upstream(UpstreamSettings("127.0.0.1:9"))
    answers: list[SimpleNamespace] = []

    async def send(node: int, request: object) -> SimpleNamespace:
        return answers.pop(0)

    async def any_node() -> int:
        return 1

    upstream.send = send  # type: ignore[method-assign]
    upstream.any_node = any_node  # type: ignore[method-assign]

    def read(shown: SimpleNamespace, topics: list[str] | None = None) -> float | None:
        answers.append(shown)
        asyncio.run(upstream.refresh_metadata(topics))
        info = upstream.topics.get("t")
        return None if info is None else info.replaced_at

    first, second, third = uuid4(), uuid4(), uuid4()
    assert read(_shows(("t", first))) is None  # first seen as it is
    assert read(_shows(("t", first), ("u", uuid4()))) is None
    assert read(_shows(), ["t"]) is None  # deleted: gone from the metadata
    replaced = read(_shows(("t", second)), ["t"])  # created again
    assert replaced is not None
    assert read(_shows(("t", second))) == replaced  # the same topic since
    again = read(_shows(("t", third)))  # deleted and created again between two reads
    assert again is not None and again >= replaced
