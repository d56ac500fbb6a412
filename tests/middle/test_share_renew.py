"""Renewing acquisition locks (KIP-1222) through ShareFetch v2: a request that says it carries
Renew acknowledgements (IsRenewAck) must ask for no records, as Kafka's KafkaApis checks, so a
renewal never waits on or acquires anything."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from kio.schema.share_fetch.v2 import request as sf

from shareproxy.core.errors import ErrorCode
from shareproxy.core.share_session import OPEN_EPOCH
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.share_calls import GROUP
from tests.support.share_wire import answer, connection


def _renewing(topic_id: UUID, max_records: int, max_wait_ms: int) -> sf.ShareFetchRequest:
    return sf.ShareFetchRequest(
        group_id=GROUP,
        member_id="m-renewing",
        share_session_epoch=OPEN_EPOCH,
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=0,
        max_bytes=0,
        max_records=max_records,
        batch_size=0,
        share_acquire_mode=0,
        is_renew_ack=True,
        topics=(
            sf.FetchTopic(
                topic_id=topic_id,
                partitions=(sf.FetchPartition(partition_index=0, acknowledgement_batches=()),),
            ),
        ),
        forgotten_topics_data=(),
    )


@on_middle_runtime
async def test_a_renewing_share_fetch_that_asks_for_records_is_an_invalid_request(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.produce(t, 5)
    topic_id, _ = await runtime.partition(t)
    for records, wait in ((500, 0), (0, 100)):
        refused = await answer(runtime, _renewing(topic_id, records, wait), connection(21))
        assert refused.error_code == ErrorCode.INVALID_REQUEST, (records, wait)
    quiet = await answer(runtime, _renewing(topic_id, 0, 0), connection(22))
    assert quiet.error_code == ErrorCode.NONE
    assert all(not p.acquired_records for r in quiet.responses for p in r.partitions)
