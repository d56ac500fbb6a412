"""Which APIs and versions the proxy serves, and who handles each."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from shareproxy.kafka.context import BrokerContext, Connection, Pending, Relayed
from shareproxy.kafka.handlers import (
    acl_rpcs,
    api_versions,
    consumer_group_rpcs,
    describe_cluster,
    describe_topic_partitions,
    find_coordinator,
    forward,
    group_admin_rpcs,
    group_configs_rpcs,
    metadata,
    relay,
    sasl,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
)
from shareproxy.kafka.responses import KioEntity
from shareproxy.kafka.routes import ROUTES
from shareproxy.protocol.api_keys import ApiKey, api_name
from shareproxy.protocol.codec import EncodedResponse, RawResponse, Request, kio_versions

# what a handler answers: a kio response, an upstream's answer relayed as bytes, one still on
# its way, or nothing (Produce with acks=0)
Answer = KioEntity | RawResponse | EncodedResponse | Pending | Relayed | None
Handler = Callable[[BrokerContext, Connection, Request], Awaitable[Answer]]

# Before a SASL listener's connection has authenticated, only these are answered.
BEFORE_AUTHENTICATION = frozenset(
    {ApiKey.SASL_HANDSHAKE, ApiKey.API_VERSIONS, ApiKey.SASL_AUTHENTICATE}
)

# api key: (min version, max version, handler)
_TABLE: dict[int, tuple[int, int, Handler]] = {  # ApiKey members, looked up by a request's int
    ApiKey.PRODUCE: (3, 11, forward.handle),  # the share client requires >= 3 advertised
    ApiKey.FETCH: (4, 12, forward.handle),  # >= 4 advertised; v13+ would route by topic id
    ApiKey.LIST_OFFSETS: (1, 7, forward.handle),
    ApiKey.DELETE_RECORDS: (0, 2, forward.handle),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4, forward.handle),  # v2+: with leader epochs
    ApiKey.METADATA: (4, 13, metadata.handle),
    ApiKey.FIND_COORDINATOR: (0, 6, find_coordinator.handle),
    ApiKey.LIST_GROUPS: (0, 5, group_admin_rpcs.list_groups),  # v4 states, v5 types filter
    ApiKey.SASL_HANDSHAKE: (1, 1, sasl.handshake),  # v1: tokens ride in SaslAuthenticate
    ApiKey.API_VERSIONS: (0, 4, api_versions.handle),
    ApiKey.DESCRIBE_ACLS: (1, 3, acl_rpcs.describe_acls),
    ApiKey.CREATE_ACLS: (1, 3, acl_rpcs.create_acls),
    ApiKey.DELETE_ACLS: (1, 3, acl_rpcs.delete_acls),
    ApiKey.SASL_AUTHENTICATE: (0, 2, sasl.authenticate),
    ApiKey.DESCRIBE_CONFIGS: (1, 4, group_configs_rpcs.describe_configs),
    ApiKey.ALTER_CONFIGS: (0, 2, group_configs_rpcs.alter_configs),
    ApiKey.DELETE_GROUPS: (0, 2, group_admin_rpcs.delete_groups),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1, group_configs_rpcs.incremental_alter_configs),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1, share_group_heartbeat.handle),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1, share_group_describe.handle),
    ApiKey.SHARE_FETCH: (1, 2, share_fetch.handle),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2, share_acknowledge.handle),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1, group_admin_rpcs.describe_share_group_offsets),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0, group_admin_rpcs.alter_share_group_offsets),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0, group_admin_rpcs.delete_share_group_offsets),
    ApiKey.DESCRIBE_CLUSTER: (0, 2, describe_cluster.handle),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0, describe_topic_partitions.handle),
}

# Relayed whole to an upstream coordinator or the controller (kafka/routes.py): every version
# kio reads, up to the route's limit; what the upstream cluster speaks narrows it at start.
for _key, _route in ROUTES.items():
    _low, _high = kio_versions(_key)
    _TABLE[_key] = (_low, min(_high, _route.max_version or _high), relay.handle)

# ...except the consumer-group APIs naming one of the proxy's share groups, answered here
# (consumer_group_rpcs.py) in the versions the upstream speaks too
_RELAYED_UNLESS_SHARE_GROUP = frozenset({ApiKey.DESCRIBE_GROUPS, *consumer_group_rpcs.HANDLED})
for _key in consumer_group_rpcs.HANDLED:
    _TABLE[_key] = (*_TABLE[_key][:2], consumer_group_rpcs.handle)
_TABLE[ApiKey.DESCRIBE_GROUPS] = (
    *_TABLE[ApiKey.DESCRIBE_GROUPS][:2],
    consumer_group_rpcs.describe_groups,
)
# OffsetDelete is answered for a share group whatever the upstream speaks; another group's goes
# upstream where the upstream has the API
_TABLE[ApiKey.OFFSET_DELETE] = (
    *_TABLE[ApiKey.OFFSET_DELETE][:2],
    consumer_group_rpcs.offset_delete,
)

# the proxy's own answers: ApiVersions advertises them whatever the upstream speaks
OWN = frozenset(
    k
    for k, (_, _, h) in _TABLE.items()
    if h not in (forward.handle, relay.handle, group_configs_rpcs.alter_configs)
    and k not in _RELAYED_UNLESS_SHARE_GROUP
)

SERVED: dict[int, tuple[int, int]] = {k: (lo, hi) for k, (lo, hi, _) in _TABLE.items()}


def advertised(upstream: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """What ApiVersions advertises: the proxy's own APIs, and each forwarded or relayed API in
    the versions both the proxy and every upstream broker handle."""
    out = {}
    for key, (low, high) in SERVED.items():
        if key not in OWN:
            if key not in upstream:
                continue
            low, high = max(low, upstream[key][0]), min(high, upstream[key][1])
            if low > high:
                continue
        out[key] = (low, high)
    return out


def handler_for(api_key: int) -> Handler:
    return _TABLE[api_key][2]


__all__ = ["BEFORE_AUTHENTICATION", "SERVED", "advertised", "api_name", "handler_for"]
