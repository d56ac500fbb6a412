"""The consumer-group APIs naming a share group, answered in the proxy as Kafka's coordinator
answers a group of another type, after the permissions ``KafkaApis`` checks first; the answers
encode in the versions served. (Against the real broker: tests/e2e/test_one_namespace.py.)"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.consumer_group_describe.v0 import request as cgd
from kio.schema.consumer_group_heartbeat.v0 import request as cgh
from kio.static.primitive import i32

from shareproxy.core.acl import Operation
from shareproxy.kafka.handlers import consumer_group_rpcs
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import Request, decode_response, encode_response_chunks

SHARE_GROUP = "g-share"


class _Admin:
    async def is_share_group(self, group_id: str) -> bool:
        return group_id == SHARE_GROUP


class _Context:
    """Only what a request naming a share group needs: it never goes upstream."""

    def __init__(self, denied: Operation | None = None) -> None:
        self.admin = _Admin()
        self.denied = denied

    def allowed(self, conn: Any, op: Operation, *args: Any, **kw: Any) -> bool:
        return op is not self.denied

    def link(self, conn: Any) -> None:
        """The upstream link, never used: nothing goes upstream."""


def _answer(body: Any, ctx: _Context | None = None) -> Any:
    request = Request(body.__api_key__, body.__version__, 7, "c", body)
    answer = asyncio.run(consumer_group_rpcs.handle(ctx or _Context(), None, request))  # type: ignore[arg-type]
    frame = b"".join(bytes(c) for c in encode_response_chunks(7, answer))[4:]
    return decode_response(frame, type(answer))[1]  # it encodes, and reads back the same


def _beat(group: str) -> Any:
    return cgh.ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=uuid.uuid4().hex,
        member_epoch=i32(0),
        instance_id=None,
        rack_id=None,
        rebalance_timeout=i32(10_000),
        subscribed_topic_names=("t",),
        server_assignor=None,
        topic_partitions=(),
    )


def test_a_consumer_group_heartbeat_for_a_share_group_is_not_a_consumer_group():
    answer = _answer(_beat(SHARE_GROUP))
    assert (answer.error_code, answer.error_message) == (
        69,
        f"Group {SHARE_GROUP} is not a consumer group.",
    )


def test_permissions_answer_before_the_group_type():
    answer = _answer(_beat(SHARE_GROUP), _Context(denied=Operation.READ))
    assert answer.error_code == 30  # GROUP_AUTHORIZATION_FAILED, as KafkaApis checks first


def test_consumer_group_describe_names_the_share_group_alone():
    ask = cgd.ConsumerGroupDescribeRequest(
        group_ids=(SHARE_GROUP,), include_authorized_operations=False
    )
    (entry,) = _answer(ask).groups
    assert (entry.group_id, entry.error_code) == (SHARE_GROUP, 69)
    assert entry.error_message == f"Group {SHARE_GROUP} is not a consumer group."


def test_every_consumer_group_api_is_answered_for_share_groups():
    assert {
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.TXN_OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
    } == consumer_group_rpcs.HANDLED
