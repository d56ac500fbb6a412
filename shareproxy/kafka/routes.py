"""Where each Kafka API the proxy relays goes upstream, and what a principal needs to send it.

One table, by API class (as Kafka's clients route): the group coordinator of the request's group
id, the transaction coordinator of its transactional id, or the controller (any broker of a KRaft
cluster forwards there). Partition-leader APIs are split by leader in ``handlers/forward.py``.
The upstream sees the proxy's own identity, so the ACLs Kafka's broker would check for each API
(``KafkaApis``) are checked here, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
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
    ``unless``, holding that permission on the Cluster is enough instead (CreateTopics). With
    ``each``, ``names`` reads one entry of the route's ``entries`` list, and an entry lacking
    the permission is refused alone while the others are carried out, as ``KafkaApis`` splits
    authorized from unauthorized topics."""

    operation: Operation
    resource_type: ResourceType
    names: Callable[[Any], Iterable[str | None]]
    unless_cluster: Operation | None = None
    each: bool = False


@dataclass(frozen=True, slots=True)
class Entries:
    """The request list a route answers entry by entry: ``items`` names it in the request (the
    first field a version has), ``results`` in the response, ``result_name`` the field naming
    a result entry when the request lists bare names. ``refused`` gives fields of a refused
    entry their Kafka values (an offset of -1, not 0); ``aliases`` maps a response list to the
    request list it answers. ``all_or_nothing``: one refused entry
    stops the request, the others answer OPERATION_NOT_ATTEMPTED (AddPartitionsToTxn).
    ``hide``: a request that leaves the list null asks for everything, and the answer keeps
    only the entries the principal may see (OffsetFetch of all topics). ``by_id``: an entry
    naming its topic by id alone is authorized by the name the id has now, as Kafka does."""

    items: tuple[str, ...]
    results: str
    result_name: str = "name"
    refused: dict[str, Any] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    all_or_nothing: bool = False
    hide: bool = False
    by_id: bool = False  # an entry may name its topic by id alone (``topic_id``, no name)

    def of(self, entity: Any) -> str | None:
        """The request list field ``entity`` has, if any."""
        return next((f for f in self.items if hasattr(entity, f)), None)


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
    entries: Entries | None = None  # the list whose entries are authorized one by one
    # entries refused before the request is sent, by position in ``entries``, with the reason
    checked: Callable[[Any], Mapping[int, tuple[int, str]]] | None = None


def _group_id(body: Any) -> str | None:
    return body.group_id


def _transactional_id(body: Any) -> str | None:
    if hasattr(body, "v3_and_below_transactional_id"):  # AddPartitionsToTxn as clients send it
        return body.v3_and_below_transactional_id
    return body.transactional_id


def _none(body: Any) -> None:
    return None


def _group(body: Any) -> list[str | None]:
    return [body.group_id]


def _txn(body: Any) -> list[str | None]:
    return [_transactional_id(body)]


def _cluster(body: Any) -> list[str]:
    return [CLUSTER_NAME]


def _entry_name(entry: Any) -> list[str | None]:
    """A topic entry's name; an entry listed as a bare name is its name."""
    return [entry if isinstance(entry, str) else entry.name]


def _offset_fetch_groups(body: Any) -> list[str | None]:
    if hasattr(body, "groups"):  # v8+: several groups
        return [g.group_id for g in body.groups]
    return [body.group_id]


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
TOPICS = Entries(("topics",), "topics")


def _each_topic(operation: Operation) -> Need:
    return Need(operation, ResourceType.TOPIC, _entry_name, each=True)


ROUTES: dict[ApiKey, Route] = {
    # the group coordinator
    ApiKey.JOIN_GROUP: Route(Via.GROUP, _group_id, (READ_GROUP,)),
    ApiKey.SYNC_GROUP: Route(Via.GROUP, _group_id, (READ_GROUP,)),
    ApiKey.HEARTBEAT: Route(Via.GROUP, _group_id, (READ_GROUP,)),
    ApiKey.LEAVE_GROUP: Route(Via.GROUP, _group_id, (READ_GROUP,)),
    ApiKey.OFFSET_COMMIT: Route(
        Via.GROUP,
        _group_id,
        (READ_GROUP, _each_topic(Operation.READ)),
        max_version=9,  # v10 names topics by id
        entries=TOPICS,
    ),
    ApiKey.OFFSET_FETCH: Route(
        Via.GROUP,
        _group_id,
        (
            Need(Operation.DESCRIBE, ResourceType.GROUP, _offset_fetch_groups),
            _each_topic(Operation.DESCRIBE),
        ),
        max_version=9,  # v10 names topics by id
        split=Split("groups", _its_group_id, "groups", "group_id"),  # v8+
        # a refused partition reads as Kafka's: no offset, no metadata
        entries=Entries(
            ("topics",),
            "topics",
            refused={"committed_offset": -1, "metadata": ""},
            aliases={"partitions": "partition_indexes"},
            hide=True,
        ),
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
        (Need(Operation.DELETE, ResourceType.GROUP, _group), _each_topic(Operation.READ)),
        entries=TOPICS,
    ),
    ApiKey.TXN_OFFSET_COMMIT: Route(
        Via.GROUP,
        _group_id,
        (WRITE_TXN, READ_GROUP, _each_topic(Operation.READ)),
        entries=TOPICS,
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
        (WRITE_TXN, _each_topic(Operation.WRITE)),
        max_version=3,  # v4+ batches transactions: sent by brokers only
        mirror={
            "results_by_topic_v3_and_below": "v3_and_below_topics",
            "results_by_partition": "partitions",
        },
        # a transaction takes all its partitions or none: Kafka adds none when one is refused
        entries=Entries(
            ("v3_and_below_topics",), "results_by_topic_v3_and_below", all_or_nothing=True
        ),
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
                _entry_name,
                unless_cluster=Operation.CREATE,
                each=True,
            ),
        ),
        entries=TOPICS,
        checked=create_topics_problems,
    ),
    ApiKey.DELETE_TOPICS: Route(
        Via.CONTROLLER,
        _none,
        (_each_topic(Operation.DELETE),),
        mirror={"responses": "topics"},
        entries=Entries(("topics", "topic_names"), "responses", by_id=True),  # v0-v5: names
    ),
    ApiKey.CREATE_PARTITIONS: Route(
        Via.CONTROLLER,
        _none,
        (_each_topic(Operation.ALTER),),
        mirror={"results": "topics"},
        entries=Entries(("topics",), "results"),
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


def _refused(allowed: Allowed, need: Need, names: Iterable[str | None]) -> tuple[int, str] | None:
    if need.unless_cluster is not None and allowed(
        need.unless_cluster, ResourceType.CLUSTER, CLUSTER_NAME, audit=False
    ):
        return None
    for name in names:
        if name is not None and not allowed(need.operation, need.resource_type, name):
            what = need.resource_type.name.lower().replace("_", " ")
            return DENIED[
                need.resource_type
            ], f"not authorized to {need.operation.name} {what} {name!r}"
    return None


def refusal(allowed: Allowed, route: Route, body: Any) -> tuple[int, str] | None:
    """The error code and message a request gets when a permission it needs as a whole is
    missing."""
    for need in route.needs:
        if not need.each:
            refused = _refused(allowed, need, need.names(body))
            if refused is not None:
                return refused
    return None


def entry_refusals(allowed: Allowed, route: Route, entity: Any) -> dict[int, tuple[int, str]]:
    """The entries of ``entity``'s ``route.entries`` list (the request, or one group of it)
    that a permission they need each is missing for, by position, with their answer."""
    items = route.entries.of(entity) if route.entries is not None else None
    out: dict[int, tuple[int, str]] = {}
    for i, entry in enumerate(getattr(entity, items) or () if items else ()):
        for need in route.needs:
            refused = _refused(allowed, need, need.names(entry)) if need.each else None
            if refused is not None:
                out[i] = refused
                break
    return out


def visible(allowed: Allowed, route: Route, entry: Any) -> bool:
    """Whether the principal may see a result entry (``Entries.hide``), silently."""
    return all(
        not need.each
        or all(
            name is None or allowed(need.operation, need.resource_type, name, audit=False)
            for name in need.names(entry)
        )
        for need in route.needs
    )


# DeleteGroups: share groups are the proxy's own; the others go to their upstream coordinators
UPSTREAM_DELETE_GROUPS_SPLIT = Split("groups_names", _itself, "results", "group_id")
UPSTREAM_DELETE_GROUPS = Route(
    Via.GROUP,
    _first_group,
    (Need(Operation.DELETE, ResourceType.GROUP, lambda body: list(body.groups_names)),),
    split=UPSTREAM_DELETE_GROUPS_SPLIT,
)
