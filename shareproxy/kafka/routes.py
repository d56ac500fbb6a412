"""Where each Kafka API the proxy relays goes upstream, and what a principal needs to send it.

One table, by API class (as Kafka's clients route): the group coordinator of the request's group
id, the transaction coordinator of its transactional id, or the controller (any broker of a KRaft
cluster forwards there). Partition-leader APIs are split by leader in ``handlers/forward.py``.
The upstream sees the proxy's own identity, so the ACLs Kafka's broker would check for each API
(``KafkaApis``) are checked here, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from shareproxy.core.acl import CLUSTER_NAME, Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.forward_rules import create_topics_problems


class Via(Enum):
    GROUP = 0  # FindCoordinator key type 0
    TRANSACTION = 1  # key type 1
    CONTROLLER = 2


# What a refusal answers, by the resource refused.
DENIED = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


@dataclass(frozen=True, slots=True)
class Need:
    """One permission a request needs: ``operation`` on every resource ``names`` lists. With
    ``unless``, holding that permission on the Cluster is enough instead (CreateTopics)."""

    operation: Operation
    resource_type: ResourceType
    names: Callable[[Any], Iterable[str | None]]
    unless_cluster: Operation | None = None


@dataclass(frozen=True, slots=True)
class Split:
    """A request naming several groups or transactional ids, whose coordinators may differ:
    ``items`` is the request's list, ``key`` reads an item's id, ``results`` the response's
    list and ``result_key`` the id field of its entries."""

    items: str
    key: Callable[[Any], str]
    results: str
    result_key: str


@dataclass(frozen=True, slots=True)
class Route:
    via: Via
    key: Callable[[Any], str | None]  # the coordinator key; None: any broker will do
    needs: tuple[Need, ...]
    max_version: int | None = None  # above it the API is not for clients
    mirror: dict[str, str] | None = None  # response list -> request list, for refusals
    split: Split | None = None  # when the request has ``split.items``
    # entries of the request refused before it is sent (request list, response list, which)
    checked: tuple[str, str, Callable[[Any], dict[int, tuple[int, str]]]] | None = None


def _group_id(body: Any) -> str | None:
    return body.group_id


def _transactional_id(body: Any) -> str | None:
    if hasattr(body, "v3_and_below_transactional_id"):  # AddPartitionsToTxn as clients send it
        return body.v3_and_below_transactional_id
    return body.transactional_id


def _none(body: Any) -> None:
    return None


def _topic_names(body: Any) -> list[str | None]:
    return [t.name for t in body.topics]


def _group(body: Any) -> list[str | None]:
    return [body.group_id]


def _txn(body: Any) -> list[str | None]:
    return [_transactional_id(body)]


def _txn_topics(body: Any) -> list[str | None]:
    return [t.name for t in body.v3_and_below_topics]


def _cluster(body: Any) -> list[str]:
    return [CLUSTER_NAME]


def _deleted_topics(body: Any) -> list[str | None]:
    if hasattr(body, "topic_names"):  # v0-v5
        return list(body.topic_names)
    return [t.name for t in body.topics]


def _offset_fetch_groups(body: Any) -> list[str | None]:
    if hasattr(body, "groups"):  # v8+: several groups
        return [g.group_id for g in body.groups]
    return [body.group_id]


def _offset_fetch_topics(body: Any) -> list[str | None]:
    if hasattr(body, "groups"):
        return [t.name for g in body.groups for t in (g.topics or ())]
    return [t.name for t in (body.topics or ())]


def _first_group(body: Any) -> str | None:
    return None  # split: each group's own coordinator


def _itself(item: Any) -> str:
    return str(item)


def _its_group_id(item: Any) -> str:
    return str(item.group_id)


def _described_groups(body: Any) -> list[str | None]:
    return list(body.groups)


def _group_ids(body: Any) -> list[str | None]:
    return list(body.group_ids)


def _transactional_ids(body: Any) -> list[str | None]:
    return list(body.transactional_ids)


def _subscribed(body: Any) -> list[str | None]:
    return list(body.subscribed_topic_names or ())


READ_GROUP = Need(Operation.READ, ResourceType.GROUP, _group)
WRITE_TXN = Need(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, _txn)

ROUTES: dict[ApiKey, Route] = {
    # the group coordinator
    ApiKey.JOIN_GROUP: Route(Via.GROUP, _group_id, (READ_GROUP,)),
    ApiKey.SYNC_GROUP: Route(Via.GROUP, _group_id, (READ_GROUP,)),
    ApiKey.HEARTBEAT: Route(Via.GROUP, _group_id, (READ_GROUP,)),
    ApiKey.LEAVE_GROUP: Route(Via.GROUP, _group_id, (READ_GROUP,)),
    ApiKey.OFFSET_COMMIT: Route(
        Via.GROUP,
        _group_id,
        (READ_GROUP, Need(Operation.READ, ResourceType.TOPIC, _topic_names)),
        max_version=9,  # v10 names topics by id
    ),
    ApiKey.OFFSET_FETCH: Route(
        Via.GROUP,
        _group_id,
        (
            Need(Operation.DESCRIBE, ResourceType.GROUP, _offset_fetch_groups),
            Need(Operation.DESCRIBE, ResourceType.TOPIC, _offset_fetch_topics),
        ),
        max_version=9,  # v10 names topics by id
        split=Split("groups", _its_group_id, "groups", "group_id"),  # v8+
    ),
    ApiKey.DESCRIBE_GROUPS: Route(
        Via.GROUP,
        _first_group,
        (Need(Operation.DESCRIBE, ResourceType.GROUP, _described_groups),),
        split=Split("groups", _itself, "groups", "group_id"),
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: Route(
        Via.GROUP,
        _first_group,
        (Need(Operation.DESCRIBE, ResourceType.GROUP, _group_ids),),
        split=Split("group_ids", _itself, "groups", "group_id"),
    ),
    ApiKey.OFFSET_DELETE: Route(
        Via.GROUP,
        _group_id,
        (
            Need(Operation.DELETE, ResourceType.GROUP, _group),
            Need(Operation.READ, ResourceType.TOPIC, _topic_names),
        ),
    ),
    ApiKey.TXN_OFFSET_COMMIT: Route(
        Via.GROUP,
        _group_id,
        (WRITE_TXN, READ_GROUP, Need(Operation.READ, ResourceType.TOPIC, _topic_names)),
    ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Route(
        Via.GROUP,
        _group_id,
        (READ_GROUP, Need(Operation.DESCRIBE, ResourceType.TOPIC, _subscribed)),
    ),
    # the transaction coordinator (InitProducerId without a transactional id: any broker)
    ApiKey.INIT_PRODUCER_ID: Route(Via.TRANSACTION, _transactional_id, (WRITE_TXN,)),
    ApiKey.ADD_PARTITIONS_TO_TXN: Route(
        Via.TRANSACTION,
        _transactional_id,
        (WRITE_TXN, Need(Operation.WRITE, ResourceType.TOPIC, _txn_topics)),
        max_version=3,  # v4+ batches transactions: sent by brokers only
        mirror={
            "results_by_topic_v3_and_below": "v3_and_below_topics",
            "results_by_partition": "partitions",
        },
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: Route(Via.TRANSACTION, _transactional_id, (WRITE_TXN, READ_GROUP)),
    ApiKey.END_TXN: Route(Via.TRANSACTION, _transactional_id, (WRITE_TXN,)),
    ApiKey.DESCRIBE_TRANSACTIONS: Route(
        Via.TRANSACTION,
        _none,
        (Need(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, _transactional_ids),),
        split=Split("transactional_ids", _itself, "transaction_states", "transactional_id"),
    ),
    # the controller (a KRaft broker forwards to it)
    ApiKey.CREATE_TOPICS: Route(
        Via.CONTROLLER,
        _none,
        (
            Need(
                Operation.CREATE,
                ResourceType.TOPIC,
                _topic_names,
                unless_cluster=Operation.CREATE,
            ),
        ),
        checked=("topics", "topics", create_topics_problems),
    ),
    ApiKey.DELETE_TOPICS: Route(
        Via.CONTROLLER,
        _none,
        (Need(Operation.DELETE, ResourceType.TOPIC, _deleted_topics),),
        mirror={"responses": "topics"},
    ),
    ApiKey.CREATE_PARTITIONS: Route(
        Via.CONTROLLER,
        _none,
        (Need(Operation.ALTER, ResourceType.TOPIC, _topic_names),),
        mirror={"results": "topics"},
    ),
    ApiKey.ELECT_LEADERS: Route(
        Via.CONTROLLER, _none, (Need(Operation.ALTER, ResourceType.CLUSTER, _cluster),)
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Route(
        Via.CONTROLLER, _none, (Need(Operation.DESCRIBE, ResourceType.CLUSTER, _cluster),)
    ),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Route(
        Via.CONTROLLER, _none, (Need(Operation.ALTER, ResourceType.CLUSTER, _cluster),)
    ),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: Route(
        Via.CONTROLLER, _none, (Need(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, _cluster),)
    ),
    ApiKey.ALTER_CLIENT_QUOTAS: Route(
        Via.CONTROLLER, _none, (Need(Operation.ALTER_CONFIGS, ResourceType.CLUSTER, _cluster),)
    ),
}


Allowed = Callable[..., bool]  # (operation, resource type, name, *, audit) -> bool


def refusal(allowed: Allowed, route: Route, body: Any) -> tuple[int, str] | None:
    """The error code and message a request gets when a permission it needs is missing."""
    for need in route.needs:
        if need.unless_cluster is not None and allowed(
            need.unless_cluster, ResourceType.CLUSTER, CLUSTER_NAME, audit=False
        ):
            continue
        for name in need.names(body):
            if name is not None and not allowed(need.operation, need.resource_type, name):
                what = need.resource_type.name.lower().replace("_", " ")
                message = f"not authorized to {need.operation.name} {what} {name!r}"
                return DENIED[need.resource_type], message
    return None


# DeleteGroups: share groups are the proxy's own; the others go to their upstream coordinators
UPSTREAM_DELETE_GROUPS = Route(
    Via.GROUP,
    _first_group,
    (Need(Operation.DELETE, ResourceType.GROUP, lambda body: list(body.groups_names)),),
    split=Split("groups_names", _itself, "results", "group_id"),
)
