"""What ShareFetch and ShareAcknowledge share in translation: acknowledgements read from the
request, the connection's Read permissions in the form the use cases ask for, and the response
envelope with each partition's leader."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import ShareConsumersContext
from shareproxy.kafka.responses import schema_module
from shareproxy.protocol.codec import EncodedResponse, Request, response_type
from shareproxy.protocol.share_responses import Encoder, Endpoint, Head
from shareproxy.runtime.consuming import SessionRequest, TopicPartition

E = TypeVar("E")


def acks_of(topics: Iterable[Any]) -> dict[TopicPartition, list[AckBatch]]:
    """The request's acknowledgement batches by share-partition (those that carry some)."""
    return {
        (topic.topic_id, p.partition_index): [
            AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
            for b in p.acknowledgement_batches
        ]
        for topic in topics
        for p in topic.partitions
        if p.acknowledgement_batches
    }


def session_of(conn: Connection, epoch: int) -> SessionRequest:
    """The request's share-session epoch, charged to the connection's principal and host; a
    session it opens ends with the connection."""
    return SessionRequest(epoch, (conn.state.principal, conn.client_host), conn.number)


@dataclass(frozen=True, slots=True)
class ConnectionAccess:
    """What the connection's principal may Read, asked of the ACLs when the use case needs it."""

    ctx: ShareConsumersContext
    conn: Connection

    def may_read_group(self, group_id: str) -> bool:
        return self.ctx.allowed(self.conn, Operation.READ, ResourceType.GROUP, group_id)

    def may_read_topic(self, topic_id: UUID) -> bool:
        if not self.ctx.acls_enforced:
            return True
        info = self.ctx.topic_by_id(topic_id)
        return info is None or self.ctx.allowed(
            self.conn, Operation.READ, ResourceType.TOPIC, info.name
        )


def share_answer(
    ctx: ShareConsumersContext,
    conn: Connection,
    request: Request,
    group_id: str,
    partitions: Iterable[TopicPartition],
    entry: Callable[[TopicPartition, int, int], E],
    encode: Encoder[E],
    codes: Iterable[tuple[TopicPartition, int]] = (),
    refusal: ShareError | None = None,
) -> EncodedResponse:
    """The response of either request, encoded: its partitions by topic, each entry made by
    ``entry`` from the partition, its current leader and the leader epoch, and the endpoints
    of the leaders a client must turn to (NOT_LEADER_OR_FOLLOWER) so it need not wait for a
    metadata refresh."""
    version = request.api_version
    lock_ms = ctx.settings_for(group_id).record_lock_duration_ms
    if refusal is not None:
        return encode(Head(version, lock_ms, refusal.code, refusal.message), ())
    leader_of, epoch = ctx.leader_of, ctx.leader_epoch
    topics: dict[UUID, list[E]] = {}
    for tp in sorted(set(partitions)):  # a UUID orders as its text does
        entries = topics.get(tp[0])
        if entries is None:
            entries = topics[tp[0]] = []
        entries.append(entry(tp, leader_of(*tp), epoch))
    moved = [leader_of(*tp) for tp, code in codes if code == ErrorCode.NOT_LEADER_OR_FOLLOWER]
    endpoints: tuple[Endpoint, ...] = ()
    if moved:
        cls = schema_module(response_type(request.api_key, version)).NodeEndpoint
        endpoints = tuple(
            (e.node_id, e.host, e.port, e.rack) for e in ctx.node_endpoints(cls, conn, moved)
        )
    return encode(Head(version, lock_ms), topics.items(), endpoints)
