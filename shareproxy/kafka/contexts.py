"""What each family of handlers may use: one small protocol per family, so a handler's
signature says what it depends on. The dispatcher holds one ``BrokerContext``, which has
everything and so satisfies each of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, TypeVar
from uuid import UUID

from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.group_settings import GroupSettings
from shareproxy.kafka.context import Connection
from shareproxy.runtime.consuming import ShareConsumers
from shareproxy.runtime.groups import Coordinator, GroupAdmin
from shareproxy.security.credentials import ScramCredential
from shareproxy.security.guard import Security
from shareproxy.upstream.client import TopicInfo
from shareproxy.upstream.link import UpstreamLink

T = TypeVar("T")


class Authorizer(Protocol):
    """The ACL checks every family makes, for the connection's principal and host."""

    def allowed(
        self,
        conn: Connection,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        *,
        audit: bool = True,
    ) -> bool: ...

    def allowed_any(
        self, conn: Connection, operation: Operation, resource_type: ResourceType
    ) -> bool: ...

    def authorized_operations(
        self, conn: Connection, resource_type: ResourceType, name: str
    ) -> int: ...

    def cluster_operations(self, conn: Connection) -> int: ...


class ClusterView(Authorizer, Protocol):
    """Metadata, DescribeCluster, DescribeTopicPartitions and FindCoordinator: the live proxy
    nodes and the placement, over the upstream cluster's topics."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def controller_id(self) -> int: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def live_nodes(self) -> list[int]: ...

    def nodes(self, conn: Connection) -> list[tuple[int, str, int]]: ...

    def node_address(self, node_id: int, conn: Connection) -> tuple[str, int] | None: ...

    def leader_of(self, topic_id: UUID, partition: int) -> int: ...

    def group_coordinator(self, key: str) -> int: ...

    def topic(self, name: str) -> TopicInfo | None: ...

    def topic_by_id(self, topic_id: UUID | None) -> TopicInfo | None: ...

    def known_topics(self) -> list[TopicInfo]: ...

    async def refresh_metadata(self, topics: list[str] | None = None) -> None: ...


class RelayContext(Authorizer, Protocol):
    """Forwarded and relayed requests: the connection's upstream link and where each request
    goes upstream (partition leader, coordinator, controller, any broker)."""

    @property
    def node_id(self) -> int: ...

    @property
    def upstream_controller(self) -> int: ...

    @property
    def upstream_versions(self) -> Mapping[int, tuple[int, int]]: ...

    def link(self, conn: Connection) -> UpstreamLink: ...

    def topic_name(self, topic_id: UUID | None) -> str | None: ...

    def topic(self, name: str) -> TopicInfo | None: ...

    async def refresh_metadata(self, topics: list[str] | None = None) -> None: ...

    async def upstream_leader(self, topic: str, partition: int) -> int: ...

    async def any_upstream_node(self) -> int: ...

    def upstream_brokers(self) -> list[int]: ...

    async def coordinator_node(self, key_type: int, key: str) -> int: ...

    def coordinator_moved(self, key_type: int, key: str) -> None: ...


class GroupAdminContext(Authorizer, Protocol):
    """ShareGroupDescribe: the group views GroupAdmin builds."""

    @property
    def admin(self) -> GroupAdmin: ...


class AdminRpcContext(GroupAdminContext, RelayContext, Protocol):
    """The share-group admin RPCs and group configs: GroupAdmin for the proxy's groups, the
    upstream for every other group or resource."""

    def settings_for(self, group_id: str) -> GroupSettings: ...

    def group_coordinator(self, key: str) -> int: ...


class ShareGroupContext(Authorizer, Protocol):
    """ShareGroupHeartbeat: the group coordinator and the group's settings."""

    def settings_for(self, group_id: str) -> GroupSettings: ...

    @property
    def coordinator(self) -> Coordinator: ...


class ShareConsumersContext(Authorizer, Protocol):
    """ShareFetch and ShareAcknowledge: the consumers' use cases, and what the answer names (each
    partition's leader, where the leaders are reached, the group's acquisition lock)."""

    @property
    def consumers(self) -> ShareConsumers: ...

    @property
    def node_id(self) -> int: ...

    @property
    def live_nodes(self) -> list[int]: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def acls_enforced(self) -> bool: ...

    @property
    def librdkafka_fetch_wait_ms(self) -> int: ...

    def leader_of(self, topic_id: UUID, partition: int) -> int: ...

    def topic_by_id(self, topic_id: UUID | None) -> TopicInfo | None: ...

    def settings_for(self, group_id: str) -> GroupSettings: ...

    def node_endpoints(
        self, cls: type[T], conn: Connection, node_ids: Iterable[int]
    ) -> tuple[T, ...]: ...


class AclContext(Authorizer, Protocol):
    """CreateAcls, DescribeAcls, DeleteAcls: the ACL guard, which also decides who may."""

    @property
    def security(self) -> Security: ...


class SaslContext(Protocol):
    """SaslHandshake and SaslAuthenticate: the mechanisms offered and the stored credentials."""

    @property
    def sasl_mechanisms(self) -> tuple[str, ...]: ...

    def credential(self, username: str, mechanism: str) -> ScramCredential | None: ...


class VersionsContext(Protocol):
    """ApiVersions: what the proxy serves."""

    @property
    def served(self) -> Mapping[int, tuple[int, int]]: ...
