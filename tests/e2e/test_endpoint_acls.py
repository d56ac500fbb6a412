"""What the proxy relays upstream is authorized first: the upstream sees the proxy's own
identity, so each family of forwarded APIs is refused with Kafka's error code until the
principal holds the permission Kafka's broker would ask for, and answered after."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.create_topics.v7 import request as create
from kio.schema.delete_topics.v6 import request as delete
from kio.schema.describe_configs.v4 import request as configs
from kio.schema.find_coordinator.v4 import request as find
from kio.schema.init_producer_id.v4 import request as init
from kio.schema.join_group.v9 import request as join
from kio.schema.list_groups.v5 import request as list_groups
from kio.schema.offset_commit.v9 import request as commit
from kio.schema.offset_fetch.v8 import request as fetch_offsets

from tests.support.users import new_user

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53


def _codes(entity: object) -> set[int]:
    """Every error code in a response, wherever it sits."""
    import dataclasses

    found: set[int] = set()
    for f in dataclasses.fields(entity):  # type: ignore[arg-type]
        value = getattr(entity, f.name)
        if f.name == "error_code":
            found.add(int(value))
        elif dataclasses.is_dataclass(value):
            found |= _codes(value)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    found |= _codes(item)
    return found


def test_topic_admin_needs_create_and_delete(secure, broker):
    principal, k = new_user(secure)
    name = f"acl-{uuid.uuid4().hex[:8]}"
    creatable = create.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()
    )
    ask = create.CreateTopicsRequest(
        topics=(creatable,), timeout=timedelta(seconds=10), validate_only=False
    )
    (refused,) = k.call(ask).topics
    assert (refused.name, refused.error_code) == (name, TOPIC_DENIED)
    assert (
        name
        not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    )  # nothing reached the cluster
    secure.acl(principal, "CLUSTER", "kafka-cluster", "CREATE")
    (created,) = k.call(ask).topics
    assert (created.name, created.error_code) == (name, 0)

    gone = delete.DeleteTopicsRequest(
        topics=(delete.DeleteTopicState(name=name, topic_id=uuid.UUID(int=0)),),
        timeout=timedelta(seconds=10),
    )
    (refused,) = k.call(gone).responses
    assert (refused.name, refused.error_code) == (name, TOPIC_DENIED)
    secure.acl(principal, "TOPIC", name, "DELETE")
    assert k.call(gone).responses[0].error_code == 0

    described = configs.DescribeConfigsRequest(
        resources=(
            configs.DescribeConfigsResource(
                resource_type=2, resource_name="__consumer_offsets", configuration_keys=None
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    (refused,) = k.call(described).results
    assert refused.error_code == TOPIC_DENIED
    k.close()


def test_consumer_groups_need_read_and_describe_on_the_group_and_its_topics(secure, topic):
    principal, k = new_user(secure)
    t, joined, group = topic(1), f"cj-{uuid.uuid4().hex[:6]}", f"cg-{uuid.uuid4().hex[:6]}"
    joining = join.JoinGroupRequest(
        group_id=joined,
        session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=10),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(join.JoinGroupRequestProtocol(name="range", metadata=b""),),
        reason=None,
    )
    assert k.call(joining).error_code == GROUP_DENIED
    offsets = commit.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            commit.OffsetCommitRequestTopic(
                name=t,
                partitions=(
                    commit.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=0,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )
    assert _codes(k.call(offsets)) == {GROUP_DENIED}
    secure.acl(principal, "GROUP", joined, "READ")
    assert k.call(joining).error_code != GROUP_DENIED  # the upstream coordinator answers
    assert _codes(k.call(offsets)) == {GROUP_DENIED}  # another group
    secure.acl(principal, "GROUP", group, "READ")
    assert _codes(k.call(offsets)) == {TOPIC_DENIED}  # the group alone is not enough
    secure.acl(principal, "TOPIC", t, "READ")
    assert _codes(k.call(offsets)) == {0}

    fetched = fetch_offsets.OffsetFetchRequest(
        groups=(
            fetch_offsets.OffsetFetchRequestGroup(
                group_id=group,
                topics=(fetch_offsets.OffsetFetchRequestTopics(name=t, partition_indexes=(0,)),),
            ),
            fetch_offsets.OffsetFetchRequestGroup(group_id="not-theirs", topics=None),
        ),
        require_stable=False,
    )
    mine, other = k.call(fetched).groups
    assert (mine.group_id, mine.error_code, mine.topics[0].partitions[0].committed_offset) == (
        group,
        0,
        0,
    )
    assert (other.group_id, other.error_code) == ("not-theirs", GROUP_DENIED)

    listed = k.call(list_groups.ListGroupsRequest(states_filter=(), types_filter=())).groups
    assert group in {g.group_id for g in listed}  # READ implies DESCRIBE
    assert "not-theirs" not in {g.group_id for g in listed}
    k.close()


def test_producers_need_write_or_idempotent_write_and_their_transactional_id(secure, topic):
    principal, k = new_user(secure)
    t, txn = topic(1), f"tx-{uuid.uuid4().hex[:6]}"

    def init_producer(transactional_id: str | None) -> int:
        return k.call(
            init.InitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout=timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            )
        ).error_code

    assert init_producer(None) == CLUSTER_DENIED
    secure.acl(principal, "TOPIC", t, "WRITE")  # Write on any topic makes a producer idempotent
    assert init_producer(None) == 0

    located = k.call(find.FindCoordinatorRequest(key_type=1, coordinator_keys=(txn,)))
    assert located.coordinators[0].error_code == TXN_DENIED
    assert init_producer(txn) == TXN_DENIED
    secure.acl(principal, "TRANSACTIONAL_ID", txn, "WRITE")
    assert (
        k.call(find.FindCoordinatorRequest(key_type=1, coordinator_keys=(txn,)))
        .coordinators[0]
        .error_code
        == 0
    )
    assert init_producer(txn) == 0  # the upstream transaction coordinator answered
    k.close()


def test_the_rules_hold_for_a_real_admin_client(secure):
    """librdkafka's AdminClient sees Kafka's exception for a refused CreateTopics."""
    from confluent_kafka import KafkaException

    _, k = new_user(secure)
    k.close()
    admin = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{secure.sasl}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "bob-Secret-3",
        }
    )
    (future,) = admin.create_topics([NewTopic(f"bob-{uuid.uuid4().hex[:6]}", 1, 1)]).values()
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        future.result(30)


def test_the_proxys_own_cluster_views_say_what_the_principal_may_do(secure, topic):
    """DescribeTopicPartitions refuses a named topic the principal may not Describe (without
    saying whether it exists) and lists only describable ones; the authorized-operations
    bitfields follow the principal's ACLs."""
    from kio.schema.describe_cluster.v1 import request as cluster
    from kio.schema.describe_topic_partitions.v0 import request as dtp

    principal, k = new_user(secure)
    name = topic(2)

    def described(*names: str):
        return k.call(
            dtp.DescribeTopicPartitionsRequest(
                topics=tuple(dtp.TopicRequest(name=n) for n in names),
                response_partition_limit=100,
                cursor=None,
            )
        ).topics

    (refused,) = described(name)
    assert (refused.error_code, refused.partitions) == (TOPIC_DENIED, ())
    assert refused.topic_id is None  # the zero id (kio reads it as None): nothing disclosed
    assert name not in {t.name for t in described()}
    secure.acl(principal, "TOPIC", name, "READ")
    (allowed,) = described(name)
    assert (allowed.error_code, len(allowed.partitions)) == (0, 2)
    assert allowed.topic_authorized_operations == (1 << 3) | (1 << 8)  # READ, and DESCRIBE
    assert name in {t.name for t in described()}

    ask = cluster.DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1
    )
    assert k.call(ask).cluster_authorized_operations == 0
    secure.acl(principal, "CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE")
    assert k.call(ask).cluster_authorized_operations == 0  # as Kafka: not without Describe
    secure.acl(principal, "CLUSTER", "kafka-cluster", "DESCRIBE")
    assert k.call(ask).cluster_authorized_operations == (1 << 12) | (1 << 8)
    k.close()


def test_naming_a_dead_letter_topic_needs_write_on_it(secure):
    """The proxy writes dead letters on the group's behalf (KIP-1191): whoever configures the
    topic must be allowed to Write it, over Kafka's admin API and over REST alike."""
    from kio.schema.incremental_alter_configs.v1 import request as alter

    principal, k = new_user(secure)
    group, dlq = f"dg-{uuid.uuid4().hex[:6]}", f"dlq.{uuid.uuid4().hex[:6]}"

    def name_it() -> int:
        (answer,) = k.call(
            alter.IncrementalAlterConfigsRequest(
                resources=(
                    alter.AlterConfigsResource(
                        resource_type=32,  # GROUP
                        resource_name=group,
                        configs=(
                            alter.AlterableConfig(
                                name="errors.deadletterqueue.topic.name",
                                config_operation=0,
                                value=dlq,
                            ),
                        ),
                    ),
                ),
                validate_only=False,
            )
        ).responses
        return int(answer.error_code)

    assert name_it() == GROUP_DENIED
    secure.acl(principal, "GROUP", group, "ALTER_CONFIGS")
    assert name_it() == TOPIC_DENIED
    secure.acl(principal, "TOPIC", dlq, "WRITE")
    assert name_it() == 0
    k.close()
