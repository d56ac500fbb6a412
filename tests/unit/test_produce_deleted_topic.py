"""A Produce partition the upstream answered UNKNOWN_SERVER_ERROR gets Kafka's retriable code
when its topic turns out deleted or created again — also when the deletion reaches the
metadata only a moment after the write failed — and keeps the code when the topic is the one
the request was routed to."""

from __future__ import annotations

import asyncio
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


class Metadata:
    """What each metadata read shows of the topic ``t``: one id (None: missing) per read, the
    last one repeated."""

    def __init__(self, *reads: UUID | None) -> None:
        self.reads = list(reads)
        self.shown: UUID | None = None
        self.count = 0

    async def refresh_metadata(self, topics: list[str] | None = None) -> None:
        self.shown = self.reads[min(self.count, len(self.reads) - 1)]
        self.count += 1

    def topic(self, name: str) -> object | None:
        return None if self.shown is None else SimpleNamespace(topic_id=self.shown)


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
    assert ctx.count == 3
