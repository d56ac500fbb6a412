"""One namespace of groups, as in Kafka's group coordinator: the consumer-group APIs naming a
share group are answered as ``GroupMetadataManager`` answers a group of another type, and
nothing reaches the upstream cluster for them (it would take the id for a new classic group);
a share group cannot take an id the upstream cluster holds for a consumer group."""

from __future__ import annotations

import uuid
from datetime import timedelta

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.consumer_group_describe.v0 import request as cgd
from kio.schema.heartbeat.v4 import request as heartbeat
from kio.schema.join_group.v5 import request as join
from kio.schema.leave_group.v1 import request as leave_v1
from kio.schema.leave_group.v3 import request as leave_v3
from kio.schema.list_groups.v3.request import ListGroupsRequest
from kio.schema.offset_commit.v8 import request as commit
from kio.schema.offset_fetch.v7 import request as fetch_v7
from kio.schema.offset_fetch.v8 import request as fetch_v8
from kio.schema.share_group_heartbeat.v1 import request as shb
from kio.schema.sync_group.v5 import request as sync
from kio.schema.txn_offset_commit.v3 import request as txn_commit
from kio.static.primitive import i32, i64

from tests.support.kafka_client import call

GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL = 69, 25, 23


def _share_group(port: int, topic: str) -> str:
    group = f"ns-share-{uuid.uuid4().hex[:8]}"
    joined = call(
        port,
        shb.ShareGroupHeartbeatRequest(
            group_id=group,
            member_id=uuid.uuid4().hex,
            member_epoch=i32(0),
            subscribed_topic_names=(topic,),
        ),
    )
    assert joined.error_code == 0, joined
    return group


def _upstream_groups(port: int) -> set[str]:
    return {g.group_id for g in call(port, ListGroupsRequest()).groups}


def test_the_classic_apis_answer_for_a_share_group_as_kafkas_coordinator(
    proxy, broker, topic, produce
):
    p = proxy()
    name = topic(1)
    produce(name, 2, partitions=1)
    group = _share_group(p.port, name)
    member = "m-1"

    joined = call(
        p.port,
        join.JoinGroupRequest(
            group_id=group,
            session_timeout=timedelta(seconds=10),
            rebalance_timeout=timedelta(seconds=10),
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(join.JoinGroupRequestProtocol(name="range", metadata=b""),),
        ),
    )
    assert (joined.error_code, joined.member_id) == (INCONSISTENT_GROUP_PROTOCOL, "")
    synced = call(
        p.port,
        sync.SyncGroupRequest(
            group_id=group,
            generation_id=i32(1),
            member_id=member,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(),
        ),
    )
    assert synced.error_code == UNKNOWN_MEMBER_ID
    beat = call(
        p.port,
        heartbeat.HeartbeatRequest(
            group_id=group, generation_id=i32(1), member_id=member, group_instance_id=None
        ),
    )
    assert beat.error_code == UNKNOWN_MEMBER_ID
    left = call(
        p.port,
        leave_v3.LeaveGroupRequest(
            group_id=group,
            members=(leave_v3.MemberIdentity(member_id=member, group_instance_id=None),),
        ),
    )
    assert left.error_code == 0
    assert [(m.member_id, m.error_code) for m in left.members] == [(member, UNKNOWN_MEMBER_ID)]
    left_v1 = call(p.port, leave_v1.LeaveGroupRequest(group_id=group, member_id=member))
    assert left_v1.error_code == UNKNOWN_MEMBER_ID

    committed = call(
        p.port,
        commit.OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=(
                commit.OffsetCommitRequestTopic(
                    name=name,
                    partitions=(
                        commit.OffsetCommitRequestPartition(
                            partition_index=i32(0),
                            committed_offset=i64(1),
                            committed_leader_epoch=i32(-1),
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        ),
    )
    assert [
        (t.name, [(q.partition_index, q.error_code) for q in t.partitions])
        for t in committed.topics
    ] == [(name, [(0, GROUP_ID_NOT_FOUND)])]
    in_txn = call(
        p.port,
        txn_commit.TxnOffsetCommitRequest(
            transactional_id="ns-txn",
            group_id=group,
            producer_id=i64(1),
            producer_epoch=0,
            generation_id=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=(
                txn_commit.TxnOffsetCommitRequestTopic(
                    name=name,
                    partitions=(
                        txn_commit.TxnOffsetCommitRequestPartition(
                            partition_index=i32(0),
                            committed_offset=i64(1),
                            committed_leader_epoch=i32(-1),
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        ),
    )
    assert [q.error_code for t in in_txn.topics for q in t.partitions] == [GROUP_ID_NOT_FOUND]

    # OffsetFetch: a group of another type has no offsets (no error), by name or all topics
    asked = fetch_v7.OffsetFetchRequestTopic(name=name, partition_indexes=(i32(0),))
    fetched = call(
        p.port, fetch_v7.OffsetFetchRequest(group_id=group, topics=(asked,), require_stable=False)
    )
    assert fetched.error_code == 0
    assert [
        (q.partition_index, q.committed_offset, q.error_code)
        for t in fetched.topics
        for q in t.partitions
    ] == [(0, -1, 0)]
    every = call(
        p.port, fetch_v7.OffsetFetchRequest(group_id=group, topics=None, require_stable=False)
    )
    assert (every.error_code, every.topics) == (0, ())
    # with a group of the upstream's in the same request, each is answered by its own
    other = f"ns-classic-{uuid.uuid4().hex[:8]}"
    both = call(
        p.port,
        fetch_v8.OffsetFetchRequest(
            groups=tuple(
                fetch_v8.OffsetFetchRequestGroup(
                    group_id=g,
                    topics=(
                        fetch_v8.OffsetFetchRequestTopics(name=name, partition_indexes=(i32(0),)),
                    ),
                )
                for g in (other, group)
            ),
            require_stable=False,
        ),
    )
    assert [
        (g.group_id, g.error_code, [q.committed_offset for t in g.topics for q in t.partitions])
        for g in both.groups
    ] == [(other, 0, [-1]), (group, 0, [-1])]

    # the consumer group protocol (KIP-848): not a consumer group (Tansu has no
    # ConsumerGroupHeartbeat, so the unit tier checks that one)
    described = call(
        p.port,
        cgd.ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False),
    )
    assert [(g.group_id, g.error_code) for g in described.groups] == [(group, GROUP_ID_NOT_FOUND)]

    # none of it reached the upstream cluster, which would have made a classic group of it
    assert group not in _upstream_groups(broker.port)


def test_stock_clients_see_a_share_group_as_no_consumer_group(proxy, topic, produce):
    """librdkafka's classic consumer is refused the join, its admin client finds no committed
    offsets and cannot commit any."""
    p = proxy()
    name = topic(1)
    produce(name, 2, partitions=1)
    group = _share_group(p.port, name)
    c = Consumer(
        {"bootstrap.servers": p.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    try:
        c.subscribe([name])
        error = None
        for _ in range(40):
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                error = m.error()
                break
            assert m is None, "a classic consumer got records of a share group"
        assert error is not None and error.code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL, error
    finally:
        c.close()
    admin = AdminClient({"bootstrap.servers": p.bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(name, 0)])]
    )[group].result(30)
    assert [tp.offset for tp in listed.topic_partitions] == [-1001]  # OFFSET_INVALID: none
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(name, 0, 1)])]
    )[group]
    try:
        result = altered.result(30)
        codes = [tp.error.code() for tp in result.topic_partitions if tp.error is not None]
    except Exception as e:  # the client raises the partition's error
        codes = [e.args[0].code()]
    assert codes == [KafkaError.GROUP_ID_NOT_FOUND]


def test_a_share_group_cannot_take_the_id_of_an_upstream_consumer_group(
    proxy, broker, topic, produce
):
    """Kafka refuses a share join for an id a group of another type holds: GROUP_ID_NOT_FOUND,
    "Group ... is not a share group.", and the proxy stores no group."""
    p = proxy()
    name = topic(1)
    produce(name, 2, partitions=1)
    group = f"ns-taken-{uuid.uuid4().hex[:8]}"
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    try:
        c.assign([TopicPartition(name, 0, 1)])
        c.commit(offsets=[TopicPartition(name, 0, 1)], asynchronous=False)
    finally:
        c.close()
    assert group in _upstream_groups(broker.port)
    refused = call(
        p.port,
        shb.ShareGroupHeartbeatRequest(
            group_id=group,
            member_id=uuid.uuid4().hex,
            member_epoch=i32(0),
            subscribed_topic_names=(name,),
        ),
    )
    assert (refused.error_code, refused.error_message) == (
        GROUP_ID_NOT_FOUND,
        f"Group {group} is not a share group.",
    )
    assert group not in {g.group_id for g in call(p.port, ListGroupsRequest()).groups} - (
        _upstream_groups(broker.port)
    )
