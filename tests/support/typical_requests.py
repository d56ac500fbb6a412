"""A plausible request of every API the proxy serves, at any of its versions: what a client
would send about one topic and one group. ``build`` keeps only the fields a version has, so
one builder per API covers all its versions."""

from __future__ import annotations

import dataclasses
import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_batch
from kio.static.primitive import i8, i16, i32, i64

from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import request_type


@dataclass(frozen=True)
class Names:
    topic: str
    topic_id: UUID
    group: str
    member: str = "typical-member"


def build(cls: type, **values: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def record_batch(*values: bytes) -> bytes:
    """One v2 record batch holding ``values`` (uncompressed, not transactional)."""
    now = datetime.now(UTC)
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        base_sequence=i32(-1),
        attributes=i16(0),
        records=tuple(
            Record(
                attributes=i8(0),
                timestamp=now,
                offset=i64(i),
                key=None,
                value=v,
                headers=(),
            )
            for i, v in enumerate(values)
        ),
    )
    buf = io.BytesIO()
    write_batch(buf, batch)
    return buf.getvalue()


def _produce(m: Any, n: Names) -> dict[str, Any]:
    part = build(m.PartitionProduceData, index=0, records=record_batch(b"typical"))
    topic = build(m.TopicProduceData, name=n.topic, topic_id=n.topic_id, partition_data=(part,))
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout": timedelta(seconds=5),
        "topic_data": (topic,),
    }


def _fetch(m: Any, n: Names) -> dict[str, Any]:
    part = build(
        m.FetchPartition,
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    return {
        "replica_id": -1,
        "max_wait": timedelta(milliseconds=100),
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": (build(m.FetchTopic, topic=n.topic, topic_id=n.topic_id, partitions=(part,)),),
        "forgotten_topics_data": (),
        "rack_id": "",
    }


def _list_offsets(m: Any, n: Names) -> dict[str, Any]:
    part = build(m.ListOffsetsPartition, partition_index=0, current_leader_epoch=-1, timestamp=-1)
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": (build(m.ListOffsetsTopic, name=n.topic, partitions=(part,)),),
    }


def _metadata(m: Any, n: Names) -> dict[str, Any]:
    return {
        "topics": (build(m.MetadataRequestTopic, name=n.topic, topic_id=None),),
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def _acl_filter(n: Names) -> dict[str, Any]:
    return {
        "resource_type_filter": 3,  # Group
        "resource_name_filter": n.group,
        "pattern_type_filter": 3,  # LITERAL
        "principal_filter": "User:typical",
        "host_filter": "*",
        "operation": 3,  # Read
        "permission_type": 3,  # ALLOW
    }


def _create_acls(m: Any, n: Names) -> dict[str, Any]:
    creation = build(
        m.AclCreation,
        resource_type=3,
        resource_name=n.group,
        resource_pattern_type=3,
        principal="User:typical",
        host="*",
        operation=3,
        permission_type=3,
    )
    return {"creations": (creation,)}


def _config_resource(m: Any, n: Names, cls: str) -> Any:
    return build(
        getattr(m, cls),
        resource_type=32,
        resource_name=n.group,
        configuration_keys=None,
        configs=(),
    )


def _share_fetch(m: Any, n: Names) -> dict[str, Any]:
    part = build(m.FetchPartition, partition_index=0, acknowledgement_batches=())
    return {
        "group_id": n.group,
        "member_id": n.member,
        "share_session_epoch": 0,
        "max_wait": timedelta(milliseconds=10),
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 10,
        "batch_size": 10,
        "share_acquire_mode": 0,
        "is_renew_ack": False,
        "topics": (build(m.FetchTopic, topic_id=n.topic_id, partitions=(part,)),),
        "forgotten_topics_data": (),
    }


def _share_acknowledge(m: Any, n: Names) -> dict[str, Any]:
    part = build(m.AcknowledgePartition, partition_index=0, acknowledgement_batches=())
    return {
        "group_id": n.group,
        "member_id": n.member,
        "share_session_epoch": 1,
        "is_renew_ack": False,
        "topics": (build(m.AcknowledgeTopic, topic_id=n.topic_id, partitions=(part,)),),
    }


def _describe_share_group_offsets(m: Any, n: Names) -> dict[str, Any]:
    topic = build(m.DescribeShareGroupOffsetsRequestTopic, topic_name=n.topic, partitions=(0,))
    group = build(m.DescribeShareGroupOffsetsRequestGroup, group_id=n.group, topics=(topic,))
    return {"groups": (group,)}


def _alter_share_group_offsets(m: Any, n: Names) -> dict[str, Any]:
    part = build(m.AlterShareGroupOffsetsRequestPartition, partition_index=0, start_offset=0)
    topic = build(m.AlterShareGroupOffsetsRequestTopic, topic_name=n.topic, partitions=(part,))
    return {"group_id": n.group, "topics": (topic,)}


def _join_group(m: Any, n: Names) -> dict[str, Any]:
    protocol = build(m.JoinGroupRequestProtocol, name="range", metadata=b"")
    return {
        "group_id": n.group,
        "session_timeout": timedelta(seconds=10),
        "rebalance_timeout": timedelta(seconds=10),
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": (protocol,),
        "reason": None,
    }


def _member(n: Names) -> dict[str, Any]:
    """A member of a classic group the upstream does not know: answered with its error."""
    return {
        "group_id": n.group,
        "generation_id": 1,
        "generation_id_or_member_epoch": 1,
        "member_id": n.member,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
    }


def _offset_commit(m: Any, n: Names) -> dict[str, Any]:
    part = build(
        m.OffsetCommitRequestPartition,
        partition_index=0,
        committed_offset=0,
        committed_leader_epoch=-1,
        commit_timestamp=-1,
        committed_metadata=None,
    )
    topic = build(m.OffsetCommitRequestTopic, name=n.topic, partitions=(part,))
    return {**_member(n), "retention_time": timedelta(0), "topics": (topic,)}


def _offset_fetch(m: Any, n: Names) -> dict[str, Any]:
    if hasattr(m, "OffsetFetchRequestGroup"):  # v8+
        topic = build(m.OffsetFetchRequestTopics, name=n.topic, partition_indexes=(0,))
        group = build(
            m.OffsetFetchRequestGroup,
            group_id=n.group,
            member_id=None,
            member_epoch=-1,
            topics=(topic,),
        )
        return {"groups": (group,), "require_stable": False}
    topic = build(m.OffsetFetchRequestTopic, name=n.topic, partition_indexes=(0,))
    return {"group_id": n.group, "topics": (topic,), "require_stable": False}


def _txn_offset_commit(m: Any, n: Names) -> dict[str, Any]:
    part = build(
        m.TxnOffsetCommitRequestPartition,
        partition_index=0,
        committed_offset=0,
        committed_leader_epoch=-1,
        committed_metadata=None,
    )
    topic = build(m.TxnOffsetCommitRequestTopic, name=n.topic, partitions=(part,))
    return {
        **_member(n),
        "transactional_id": "typical-txn",
        "producer_id": 1,
        "producer_epoch": 0,
        "topics": (topic,),
    }


def _consumer_group_heartbeat(m: Any, n: Names) -> dict[str, Any]:
    return {
        "group_id": n.group,
        "member_id": n.member,
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": timedelta(seconds=10),
        "subscribed_topic_names": (n.topic,),
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None,
    }


def _txn(n: Names) -> dict[str, Any]:
    return {"transactional_id": "typical-txn", "producer_id": 1, "producer_epoch": 0}


def _add_partitions_to_txn(m: Any, n: Names) -> dict[str, Any]:
    topic = build(m.AddPartitionsToTxnTopic, name=n.topic, partitions=(0,))
    return {
        "v3_and_below_transactional_id": "typical-txn",
        "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": (topic,),
    }


def _create_topics(m: Any, n: Names) -> dict[str, Any]:
    topic = build(
        m.CreatableTopic,
        name=f"{n.topic}-created",
        num_partitions=1,
        replication_factor=1,
        assignments=(),
        configs=(),
    )
    return {"topics": (topic,), "timeout": timedelta(seconds=5), "validate_only": True}


def _delete_topics(m: Any, n: Names) -> dict[str, Any]:
    gone = f"{n.topic}-never-created"  # a typical request must not delete the test's topic
    state = (
        build(m.DeleteTopicState, name=gone, topic_id=UUID(int=0))
        if hasattr(m, "DeleteTopicState")
        else None
    )
    return {
        "topic_names": (gone,),
        "topics": (state,) if state is not None else (),
        "timeout": timedelta(seconds=5),
    }


def _create_partitions(m: Any, n: Names) -> dict[str, Any]:
    topic = build(m.CreatePartitionsTopic, name=n.topic, count=1, assignments=None)
    return {"topics": (topic,), "timeout": timedelta(seconds=5), "validate_only": True}


def _delete_records(m: Any, n: Names) -> dict[str, Any]:
    part = build(m.DeleteRecordsPartition, partition_index=0, offset=0)
    topic = build(m.DeleteRecordsTopic, name=n.topic, partitions=(part,))
    return {"topics": (topic,), "timeout": timedelta(seconds=5)}


def _offset_for_leader_epoch(m: Any, n: Names) -> dict[str, Any]:
    part = build(m.OffsetForLeaderPartition, partition=0, current_leader_epoch=-1, leader_epoch=0)
    topic = build(m.OffsetForLeaderTopic, topic=n.topic, partitions=(part,))
    return {"replica_id": -1, "topics": (topic,)}


def _alter_configs(m: Any, n: Names) -> dict[str, Any]:
    resource = build(m.AlterConfigsResource, resource_type=2, resource_name=n.topic, configs=())
    return {"resources": (resource,), "validate_only": True}


Builder = Callable[[Any, Names], dict[str, Any]]
BUILDERS: dict[int, Builder] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.FIND_COORDINATOR: lambda m, n: {
        "key": n.group,
        "key_type": 0,
        "coordinator_keys": (n.group,),
    },
    ApiKey.LIST_GROUPS: lambda m, n: {"states_filter": (), "types_filter": ()},
    ApiKey.SASL_HANDSHAKE: lambda m, n: {"mechanism": "PLAIN"},
    ApiKey.API_VERSIONS: lambda m, n: {
        "client_software_name": "typical",
        "client_software_version": "1",
    },
    ApiKey.DESCRIBE_ACLS: lambda m, n: _acl_filter(n),
    ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DELETE_ACLS: lambda m, n: {"filters": (build(m.DeleteAclsFilter, **_acl_filter(n)),)},
    ApiKey.SASL_AUTHENTICATE: lambda m, n: {"auth_bytes": b"\x00typical\x00secret"},
    ApiKey.DESCRIBE_CONFIGS: lambda m, n: {
        "resources": (_config_resource(m, n, "DescribeConfigsResource"),),
        "include_synonyms": False,
        "include_documentation": False,
    },
    ApiKey.DELETE_GROUPS: lambda m, n: {"groups_names": (n.group,)},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: lambda m, n: {
        "resources": (_config_resource(m, n, "AlterConfigsResource"),),
        "validate_only": True,
    },
    ApiKey.SHARE_GROUP_HEARTBEAT: lambda m, n: {
        "group_id": n.group,
        "member_id": n.member,
        "member_epoch": 0,
        "rack_id": None,
        "subscribed_topic_names": (n.topic,),
    },
    ApiKey.SHARE_GROUP_DESCRIBE: lambda m, n: {
        "group_ids": (n.group,),
        "include_authorized_operations": False,
    },
    ApiKey.SHARE_FETCH: _share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: _share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _alter_share_group_offsets,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.SYNC_GROUP: lambda m, n: {**_member(n), "assignments": ()},
    ApiKey.HEARTBEAT: lambda m, n: _member(n),
    ApiKey.LEAVE_GROUP: lambda m, n: {
        "group_id": n.group,
        "member_id": n.member,
        "members": (build(m.MemberIdentity, member_id=n.member, group_instance_id=None),)
        if hasattr(m, "MemberIdentity")
        else (),
    },
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.OFFSET_DELETE: lambda m, n: {
        "group_id": n.group,
        "topics": (
            build(
                m.OffsetDeleteRequestTopic,
                name=n.topic,
                partitions=(build(m.OffsetDeleteRequestPartition, partition_index=0),),
            ),
        ),
    },
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.DESCRIBE_GROUPS: lambda m, n: {
        "groups": (n.group,),
        "include_authorized_operations": False,
    },
    ApiKey.CONSUMER_GROUP_DESCRIBE: lambda m, n: {
        "group_ids": (n.group,),
        "include_authorized_operations": False,
    },
    ApiKey.INIT_PRODUCER_ID: lambda m, n: {
        "transactional_id": None,
        "transaction_timeout": timedelta(seconds=60),
        "producer_id": -1,
        "producer_epoch": -1,
    },
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: lambda m, n: {**_txn(n), "group_id": n.group},
    ApiKey.END_TXN: lambda m, n: {**_txn(n), "committed": False},
    ApiKey.DESCRIBE_TRANSACTIONS: lambda m, n: {"transactional_ids": ("typical-txn",)},
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.ALTER_CONFIGS: _alter_configs,
    ApiKey.ELECT_LEADERS: lambda m, n: {
        "election_type": 0,
        "topic_partitions": (),
        "timeout": timedelta(seconds=5),
    },
    ApiKey.LIST_PARTITION_REASSIGNMENTS: lambda m, n: {
        "timeout": timedelta(seconds=5),
        "topics": None,
    },
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: lambda m, n: {
        "timeout": timedelta(seconds=5),
        "allow_replication_factor_change": True,
        "topics": (),
    },
    ApiKey.DESCRIBE_CLIENT_QUOTAS: lambda m, n: {"components": (), "strict": False},
    ApiKey.ALTER_CLIENT_QUOTAS: lambda m, n: {"entries": (), "validate_only": True},
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: lambda m, n: {
        "group_id": n.group,
        "topics": (build(m.DeleteShareGroupOffsetsRequestTopic, topic_name=n.topic),),
    },
    ApiKey.DESCRIBE_CLUSTER: lambda m, n: {
        "include_cluster_authorized_operations": True,
        "endpoint_type": 1,
        "include_fenced_brokers": False,
    },
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: lambda m, n: {
        "topics": (m.TopicRequest(name=n.topic),),
        "response_partition_limit": 2000,
        "cursor": None,
    },
}


def typical(api_key: int, version: int, names: Names) -> Any:
    """A plausible request of that API version about ``names``."""
    cls = request_type(api_key, version)
    return build(cls, **BUILDERS[api_key](sys.modules[cls.__module__], names))
