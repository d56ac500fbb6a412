"""What the proxy checks in a forwarded or relayed request before sending it upstream: the values
Kafka's broker refuses, and those a Kafka-compatible upstream may answer by dropping the
connection or by trying (two billion partitions, which stops Tansu answering anyone). A refused
request, partition or topic is answered by the proxy and never sent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from shareproxy.core.errors import ErrorCode
from shareproxy.core.names import topic_name_problem
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.record_batch import produce_problem

Problem = tuple[ErrorCode, str]
_ISOLATION_LEVELS = (0, 1)  # read_uncommitted, read_committed
_LATEST, _EARLIEST, _MAX_TIMESTAMP = -1, -2, -3
_ACKS = (-1, 0, 1)  # all, none, the leader
_HIGH_WATERMARK = -1  # DeleteRecords: up to the high watermark
# the group coordinator answers INVALID_GROUP_ID to these without a group id
_NAMED_GROUP = (
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.OFFSET_COMMIT,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.OFFSET_DELETE,
)
# Kafka's controller writes at most this many records for one request (a topic record, one per
# partition, one per config) and refuses a larger one as a policy violation
MAX_RECORDS_PER_USER_OP = 10_000


def request_problem(api_key: int, version: int, body: Any) -> Problem | None:
    """A fault of the whole request: every partition of it is refused."""
    level = getattr(body, "isolation_level", 0)
    if api_key in (ApiKey.FETCH, ApiKey.LIST_OFFSETS) and level not in _ISOLATION_LEVELS:
        return ErrorCode.INVALID_REQUEST, f"IsolationLevel {level} is neither 0 nor 1"
    if api_key == ApiKey.FETCH and min(body.max_bytes, body.min_bytes) < 0:
        return ErrorCode.INVALID_REQUEST, "MinBytes and MaxBytes cannot be negative"
    if api_key == ApiKey.PRODUCE and body.acks not in _ACKS:
        return ErrorCode.INVALID_REQUIRED_ACKS, f"Acks {body.acks} is not -1, 0 or 1"
    return None


def partition_problem(api_key: int, version: int, partition: Any, index: int) -> Problem | None:
    """A fault of one partition's entry (``index`` its partition): that partition is refused,
    the others go on."""
    if index < 0:  # no such partition: not asked of the cluster
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {index} cannot exist"
    if api_key == ApiKey.PRODUCE:
        return produce_problem(partition.records, version)
    if api_key == ApiKey.DELETE_RECORDS and partition.offset < _HIGH_WATERMARK:
        return ErrorCode.OFFSET_OUT_OF_RANGE, (
            f"Offset {partition.offset} is neither an offset nor -1 (the high watermark)"
        )
    if api_key == ApiKey.FETCH and partition.partition_max_bytes < 0:
        return ErrorCode.INVALID_REQUEST, "PartitionMaxBytes cannot be negative"
    if api_key == ApiKey.LIST_OFFSETS:
        lowest = _MAX_TIMESTAMP if version >= 7 else _EARLIEST
        if partition.timestamp < lowest:
            return ErrorCode.INVALID_REQUEST, (
                f"Timestamp {partition.timestamp} is not a time, -1 (latest) or -2 (earliest)"
                + (" or -3 (max timestamp)" if version >= 7 else "")
            )
    return None


def create_topics_problems(body: Any) -> dict[int, Problem]:
    """The topics (by position) a CreateTopics must refuse, as Kafka's controller does."""
    out: dict[int, Problem] = {}
    named: dict[int, Problem] = {}
    records = 0
    for i, t in enumerate(body.topics):
        partitions = len(t.assignments) if t.assignments else t.num_partitions
        name_problem = topic_name_problem(t.name)
        if name_problem is not None:  # the controller checks names first: nothing to create
            named[i] = ErrorCode.INVALID_TOPIC_EXCEPTION, name_problem
            continue
        if not t.assignments and (t.num_partitions < -1 or t.num_partitions == 0):
            out[i] = (
                ErrorCode.INVALID_PARTITIONS,
                ("Number of partitions was set to an invalid non-positive value."),
            )
        elif not t.assignments and (t.replication_factor < -1 or t.replication_factor == 0):
            out[i] = (
                ErrorCode.INVALID_REPLICATION_FACTOR,
                ("Replication factor must be larger than 0, or -1 to use the default value."),
            )
        records += 1 + max(partitions, 1) + len(t.configs)
    if records > MAX_RECORDS_PER_USER_OP:
        too_large = (
            ErrorCode.POLICY_VIOLATION,
            "Unable to perform excessively large batch operation.",
        )
        return {**dict.fromkeys(range(len(body.topics)), too_large), **named}
    return {**out, **named}


def relay_problem(api_key: int, body: Any) -> Problem | None:
    """A fault of a relayed request that its coordinator refuses whole before acting on it."""
    if api_key in _NAMED_GROUP and not body.group_id:
        return ErrorCode.INVALID_GROUP_ID, "the group id is empty"
    if api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT and not body.group_id:
        return ErrorCode.INVALID_REQUEST, "GroupId can't be empty."
    if (
        api_key == ApiKey.INIT_PRODUCER_ID
        and body.transactional_id
        and body.transaction_timeout <= timedelta(0)
    ):
        return ErrorCode.INVALID_TRANSACTION_TIMEOUT, "the transaction timeout must be positive"
    return None
