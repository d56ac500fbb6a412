"""Which APIs and versions the proxy serves, and who handles each."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from shareproxy.broker.context import BrokerContext, Connection
from shareproxy.broker.handlers import (
    acl_rpcs,
    api_versions,
    find_coordinator,
    forward,
    group_admin_rpcs,
    group_configs_rpcs,
    metadata,
    sasl,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
)
from shareproxy.protocol.codec import Request

Handler = Callable[[BrokerContext, Connection, Request], Awaitable[Any]]

# Before a SASL listener's connection has authenticated, only these are answered.
BEFORE_AUTHENTICATION = frozenset({17, 18, 36})

# api key: (min version, max version, handler)
_TABLE: dict[int, tuple[int, int, Handler]] = {
    0: (3, 11, forward.handle),  # Produce (the share client requires >= 3 advertised)
    1: (4, 12, forward.handle),  # Fetch (>= 4 advertised; v13+ would need topic-id routing)
    2: (1, 7, forward.handle),  # ListOffsets
    3: (4, 13, metadata.handle),
    10: (0, 6, find_coordinator.handle),
    16: (0, 5, group_admin_rpcs.list_groups),  # v4 states filter, v5 types filter
    17: (1, 1, sasl.handshake),  # v1: tokens ride in SaslAuthenticate requests
    18: (0, 4, api_versions.handle),
    29: (0, 3, acl_rpcs.describe_acls),
    30: (0, 3, acl_rpcs.create_acls),
    31: (0, 3, acl_rpcs.delete_acls),
    36: (0, 2, sasl.authenticate),
    32: (1, 4, group_configs_rpcs.describe_configs),
    42: (0, 2, group_admin_rpcs.delete_groups),
    44: (0, 1, group_configs_rpcs.incremental_alter_configs),
    76: (1, 1, share_group_heartbeat.handle),
    77: (1, 1, share_group_describe.handle),
    78: (1, 2, share_fetch.handle),
    79: (1, 2, share_acknowledge.handle),
    90: (0, 1, group_admin_rpcs.describe_share_group_offsets),
    91: (0, 0, group_admin_rpcs.alter_share_group_offsets),
    92: (0, 0, group_admin_rpcs.delete_share_group_offsets),
}

SERVED: dict[int, tuple[int, int]] = {k: (lo, hi) for k, (lo, hi, _) in _TABLE.items()}


def handler_for(api_key: int) -> Handler:
    return _TABLE[api_key][2]


def api_name(api_key: int) -> str:
    """The API's name as Kafka spells it (ShareFetch, Metadata, ...), for metric labels."""
    return _NAMES.get(api_key, str(api_key))


_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    10: "FindCoordinator",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    36: "SaslAuthenticate",
    32: "DescribeConfigs",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe",
    78: "ShareFetch",
    79: "ShareAcknowledge",
    90: "DescribeShareGroupOffsets",
    91: "AlterShareGroupOffsets",
    92: "DeleteShareGroupOffsets",
}
