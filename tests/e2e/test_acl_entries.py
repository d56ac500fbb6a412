"""Authorization entry by entry, as Kafka's ``KafkaApis`` decides it: a request naming several
topics carries out the ones the principal may touch and refuses only the others, each with its
own error; a whole-request permission (the group, the transactional id) still refuses all."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.add_partitions_to_txn.v3 import request as add_txn
from kio.schema.create_topics.v7 import request as create
from kio.schema.delete_topics.v4 import request as delete_v4
from kio.schema.delete_topics.v6 import request as delete_v6
from kio.schema.list_groups.v4 import request as list_groups
from kio.schema.offset_commit.v8 import request as commit
from kio.schema.offset_fetch.v7 import request as fetch_v7
from kio.schema.offset_fetch.v8 import request as fetch_v8
from kio.schema.txn_offset_commit.v3 import request as txn_commit

from shareproxy.protocol.api_keys import ApiKey
from tests.support.kafka_client import KafkaConnection
from tests.support.secure import PASSWORDS, Secure
from tests.support.topic_ids import topic_id
from tests.support.typical_requests import Names, typical
from tests.support.users import new_user

TOPIC_DENIED, INVALID_REQUEST, OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_ID = 29, 42, 55, 100


def _admin(secure: Secure) -> KafkaConnection:
    k = KafkaConnection(secure.sasl)
    assert k.plain("admin", PASSWORDS["admin"]).error_code == 0
    return k


def _commit(group: str, *topics: str, offset: int = 7) -> commit.OffsetCommitRequest:
    return commit.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=tuple(
            commit.OffsetCommitRequestTopic(
                name=t,
                partitions=(
                    commit.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            )
            for t in topics
        ),
    )


def _by_topic(topics) -> dict[str, list[tuple[int, int]]]:
    """Each topic's (error code, committed offset or -) per partition."""
    return {
        t.name: [(int(p.error_code), getattr(p, "committed_offset", None)) for p in t.partitions]
        for t in topics
    }


@pytest.mark.long
def test_offsets_are_committed_and_fetched_for_the_topics_allowed(secure, topic):
    principal, k = new_user(secure)
    t1, t2, group = topic(1), topic(1), f"eg-{uuid.uuid4().hex[:6]}"
    secure.acl(principal, "GROUP", group, "READ")
    secure.acl(principal, "TOPIC", t1, "READ")
    with _admin(secure) as admin:  # an offset on t2 that the principal must not see
        assert {
            int(p.error_code)
            for t in admin.call(_commit(group, t2, offset=3)).topics
            for p in t.partitions
        } == {0}

    answered = _by_topic(k.call(_commit(group, t1, t2)).topics)
    assert answered == {t1: [(0, None)], t2: [(TOPIC_DENIED, None)]}  # t1 committed

    asked = fetch_v7.OffsetFetchRequest(
        group_id=group,
        topics=tuple(
            fetch_v7.OffsetFetchRequestTopic(name=t, partition_indexes=(0,)) for t in (t1, t2)
        ),
        require_stable=False,
    )
    got = k.call(asked)
    assert got.error_code == 0
    assert _by_topic(got.topics) == {t1: [(0, 7)], t2: [(TOPIC_DENIED, -1)]}

    def v8(topics):
        return fetch_v8.OffsetFetchRequest(
            groups=(fetch_v8.OffsetFetchRequestGroup(group_id=group, topics=topics),),
            require_stable=False,
        )

    (mine,) = k.call(
        v8(
            tuple(
                fetch_v8.OffsetFetchRequestTopics(name=t, partition_indexes=(0,)) for t in (t1, t2)
            )
        )
    ).groups
    assert mine.error_code == 0
    assert _by_topic(mine.topics) == {t1: [(0, 7)], t2: [(TOPIC_DENIED, -1)]}
    k.close()


def test_topics_are_created_and_deleted_one_by_one(secure, broker):
    principal, k = new_user(secure)
    mine, theirs = f"ok-{uuid.uuid4().hex[:6]}", f"no-{uuid.uuid4().hex[:6]}"
    secure.acl(principal, "TOPIC", mine, "CREATE", "DELETE")

    def creatable(name: str) -> create.CreatableTopic:
        return create.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()
        )

    created = k.call(
        create.CreateTopicsRequest(
            topics=(creatable(mine), creatable(theirs)),
            timeout=timedelta(seconds=10),
            validate_only=False,
        )
    ).topics
    assert {t.name: int(t.error_code) for t in created} == {mine: 0, theirs: TOPIC_DENIED}
    upstream = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = upstream.list_topics(timeout=10).topics
    assert mine in listed and theirs not in listed
    upstream.create_topics([NewTopic(theirs, 1, 1)])
    deadline = time.monotonic() + 10
    while theirs not in upstream.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline
        time.sleep(0.2)

    deleted = k.call(
        delete_v6.DeleteTopicsRequest(
            topics=tuple(
                delete_v6.DeleteTopicState(name=n, topic_id=uuid.UUID(int=0))
                for n in (mine, theirs)
            ),
            timeout=timedelta(seconds=10),
        )
    ).responses
    assert {t.name: int(t.error_code) for t in deleted} == {mine: 0, theirs: TOPIC_DENIED}
    listed = upstream.list_topics(timeout=10).topics
    assert mine not in listed and theirs in listed

    # v0-v5 list bare names: the refused one is answered by name, at once
    (refused,) = k.call(
        delete_v4.DeleteTopicsRequest(topic_names=(theirs,), timeout=timedelta(seconds=10))
    ).responses
    assert (refused.name, int(refused.error_code)) == (theirs, TOPIC_DENIED)

    # by id alone: authorized by the name the id has, as Kafka does
    by_id = delete_v6.DeleteTopicsRequest(
        topics=(delete_v6.DeleteTopicState(name=None, topic_id=topic_id(broker.port, theirs)),),
        timeout=timedelta(seconds=10),
    )
    (refused,) = k.call(by_id).responses
    assert int(refused.error_code) == TOPIC_DENIED
    assert theirs in upstream.list_topics(timeout=10).topics
    (unknown,) = k.call(
        delete_v6.DeleteTopicsRequest(
            topics=(delete_v6.DeleteTopicState(name=None, topic_id=uuid.uuid4()),),
            timeout=timedelta(seconds=10),
        )
    ).responses
    assert int(unknown.error_code) == UNKNOWN_TOPIC_ID
    both = delete_v6.DeleteTopicState(name=mine, topic_id=topic_id(broker.port, theirs))
    (refused,) = k.call(
        delete_v6.DeleteTopicsRequest(topics=(both,), timeout=timedelta(seconds=10))
    ).responses  # a name one may delete cannot carry another topic's id along
    assert int(refused.error_code) == INVALID_REQUEST
    assert theirs in upstream.list_topics(timeout=10).topics
    k.close()

    client = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{secure.sasl}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": PASSWORDS["bob"],
        }
    )
    started = time.monotonic()
    (future,) = client.delete_topics([theirs], operation_timeout=30, request_timeout=30).values()
    exception = future.exception(60)
    assert (
        exception is not None and exception.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert time.monotonic() - started < 10  # answered, not waited out


def test_a_transaction_adds_no_partition_when_one_is_refused(secure, topic):
    principal, k = new_user(secure)
    t1, t2, txn, group = (
        topic(1),
        topic(1),
        f"tx-{uuid.uuid4().hex[:6]}",
        f"tg-{uuid.uuid4().hex[:6]}",
    )
    secure.acl(principal, "TRANSACTIONAL_ID", txn, "WRITE")
    secure.acl(principal, "TOPIC", t1, "WRITE", "READ")
    secure.acl(principal, "GROUP", group, "READ")
    (*results,) = k.call(
        add_txn.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn,
            v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=tuple(
                add_txn.AddPartitionsToTxnTopic(name=t, partitions=(0,)) for t in (t1, t2)
            ),
        )
    ).results_by_topic_v3_and_below
    assert {
        r.name: [int(p.partition_error_code) for p in r.results_by_partition] for r in results
    } == {t1: [OPERATION_NOT_ATTEMPTED], t2: [TOPIC_DENIED]}

    offsets = txn_commit.TxnOffsetCommitRequest(
        transactional_id=txn,
        group_id=group,
        producer_id=1,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=tuple(
            txn_commit.TxnOffsetCommitRequestTopic(
                name=t,
                partitions=(
                    txn_commit.TxnOffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            )
            for t in (t1, t2)
        ),
    )
    answered = {t.name: int(t.partitions[0].error_code) for t in k.call(offsets).topics}
    assert answered[t2] == TOPIC_DENIED
    assert answered[t1] != TOPIC_DENIED  # carried to the upstream coordinator, which answered
    k.close()


def test_a_denied_fetch_answers_an_empty_record_set(secure, topic, produce):
    t = topic(1)
    produce(t, 3, partitions=1)
    principal, k = new_user(secure)
    group = f"denied-{uuid.uuid4().hex[:6]}"
    secure.acl(principal, "GROUP", group, "READ")  # the group, and to see the topic, not read it
    secure.acl(principal, "TOPIC", t, "DESCRIBE")
    asked = typical(ApiKey.FETCH, 12, Names(topic=t, topic_id=uuid.UUID(int=0), group=group))
    (part,) = k.call(asked).responses[0].partitions
    assert (int(part.error_code), part.records) == (TOPIC_DENIED, b"")
    k.close()

    consumer = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{secure.sasl}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": principal.removeprefix("User:"),
            "sasl.password": "fwd-pw",
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(t, 0, 0)])
        deadline = time.monotonic() + 20
        while True:  # librdkafka reads the answer and tells the application
            assert time.monotonic() < deadline, "the consumer was never told it may not read"
            message = consumer.poll(0.5)
            if message is not None and message.error() is not None:
                assert message.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                break
    finally:
        consumer.close()


def test_describe_on_the_cluster_lists_every_group(secure, topic):
    principal, k = new_user(secure)
    group = f"lg-{uuid.uuid4().hex[:6]}"
    with _admin(secure) as admin:
        assert admin.call(_commit(group, topic(1))).topics[0].partitions[0].error_code == 0

    def listed() -> set[str]:
        answer = k.call(list_groups.ListGroupsRequest(states_filter=()))
        return {g.group_id for g in answer.groups}

    assert group not in listed()
    secure.acl(principal, "CLUSTER", "kafka-cluster", "DESCRIBE")
    assert group in listed()
    k.close()
