"""A share session's last request, on the wire as clients send it. Kafka 4.x answers a ShareFetch
at the final epoch (-1) with no top-level error whatever partitions it lists: it acknowledges
what the request carries, acquires nothing (its FinalContext has no partitions to fetch) and
releases the session (KafkaApis.handleShareFetchRequest, SharePartitionManager.newContext). Only
the 2024 code refused listed partitions (INVALID_REQUEST), which would refuse a consumer's last
acknowledgements. Kafka's Java client and librdkafka close with a ShareAcknowledge at -1."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from kio.schema.share_acknowledge.v1 import request as sa
from kio.schema.share_fetch.v1 import request as sf

from shareproxy.core.errors import ErrorCode
from shareproxy.core.share_session import CLOSE_EPOCH, OPEN_EPOCH
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.share_calls import GROUP, fetch
from tests.support.share_wire import answer, connection

MEMBER = "m-closing"


def _fetch(
    epoch: int, topic_id: UUID, partitions: dict[int, tuple[Any, ...]]
) -> sf.ShareFetchRequest:
    """A ShareFetch listing ``partitions`` (index: its acknowledgement batches)."""
    return sf.ShareFetchRequest(
        group_id=GROUP,
        member_id=MEMBER,
        share_session_epoch=epoch,
        max_wait=timedelta(milliseconds=0),
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=500,
        batch_size=500,
        topics=(
            sf.FetchTopic(
                topic_id=topic_id,
                partitions=tuple(
                    sf.FetchPartition(partition_index=i, acknowledgement_batches=acks)
                    for i, acks in partitions.items()
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def _partitions(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


@on_middle_runtime
async def test_a_share_fetch_at_the_final_epoch_acknowledges_acquires_nothing_and_closes(
    runtime: MiddleRuntime,
):
    t = runtime.topic(partitions=2)
    runtime.produce(t, 10, partition=0)
    runtime.produce(t, 10, partition=1)
    topic_id, _ = await runtime.partition(t)
    await runtime.partition(t, 1)
    conn = connection(11)
    opened = await answer(runtime, _fetch(OPEN_EPOCH, topic_id, {0: ()}), conn)
    assert opened.error_code == ErrorCode.NONE
    assert [(r.first_offset, r.last_offset) for r in _partitions(opened)[0].acquired_records] == [
        (0, 9)
    ]
    accept = sf.AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=(1,))
    # the last acknowledgements, and partition 1 listed with none: Kafka refuses neither
    closing = await answer(runtime, _fetch(CLOSE_EPOCH, topic_id, {0: (accept,), 1: ()}), conn)
    assert closing.error_code == ErrorCode.NONE
    got = _partitions(closing)
    assert set(got) == {0}  # only the acknowledged partition: nothing was fetched
    assert (got[0].error_code, got[0].acknowledge_error_code) == (0, 0)
    assert got[0].acquired_records == ()
    # the session closed: 5-9 released at once (delivery counts kept), 0-4 accepted
    assert await fetch(runtime, "other", (topic_id, 0), wait_ms=0) == [(5, 9, 2)]
    assert await fetch(runtime, "other", (topic_id, 1), wait_ms=0, epoch=1) == [(0, 9, 1)]
    after = await answer(runtime, _fetch(1, topic_id, {0: ()}), conn)
    assert after.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


@on_middle_runtime
async def test_a_share_acknowledge_at_the_final_epoch_acknowledges_and_closes(
    runtime: MiddleRuntime,
):
    """How Kafka's Java client and librdkafka close their sessions."""
    t = runtime.topic()
    runtime.produce(t, 10)
    topic_id, _ = await runtime.partition(t)
    conn = connection(12)
    await answer(runtime, _fetch(OPEN_EPOCH, topic_id, {0: ()}), conn)
    reject = sa.AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=(3,))
    closing = await answer(
        runtime,
        sa.ShareAcknowledgeRequest(
            group_id=GROUP,
            member_id=MEMBER,
            share_session_epoch=CLOSE_EPOCH,
            topics=(
                sa.AcknowledgeTopic(
                    topic_id=topic_id,
                    partitions=(
                        sa.AcknowledgePartition(
                            partition_index=0, acknowledgement_batches=(reject,)
                        ),
                    ),
                ),
            ),
        ),
        conn,
    )
    assert closing.error_code == ErrorCode.NONE
    assert _partitions(closing)[0].error_code == ErrorCode.NONE
    assert await fetch(runtime, "other", (topic_id, 0), wait_ms=0) == [(3, 9, 2)]
