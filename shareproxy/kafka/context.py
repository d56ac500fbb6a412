"""What every request handler may use, and the per-connection facts it is given."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar
from uuid import UUID

from kio.schema.errors import ErrorCode as KioErrorCode

from shareproxy.broker.consumers import ShareConsumers
from shareproxy.broker.coordinator import Coordinator
from shareproxy.broker.group_admin import GroupAdmin
from shareproxy.broker.nodes import ClusterNodes
from shareproxy.config import LIBRDKAFKA_FETCH_WAIT_MS
from shareproxy.core.acl import CLUSTER_NAME, Operation, ResourceType
from shareproxy.core.group_settings import GroupSettings
from shareproxy.security.guard import Security
from shareproxy.security.sasl import SaslExchange
from shareproxy.upstream.client import Upstream
from shareproxy.upstream.coordinators import Coordinators
from shareproxy.upstream.link import UpstreamLink

T = TypeVar("T")


@dataclass
class BrokerContext:
    node_id: int
    advertised: dict[str, tuple[str, int]]  # listener (security protocol) → host, port
    cluster: ClusterNodes  # the live proxy nodes and who owns what
    upstream: Upstream
    consumers: ShareConsumers  # fetch and acknowledge: the use cases the REST API calls too
    coordinator: Coordinator
    settings_for: Callable[[str], GroupSettings]
    clock_ms: Callable[[], int]
    security: Security
    admin: GroupAdmin | None = None  # the admin RPCs' implementation (shared with REST)
    served: Mapping[int, tuple[int, int]] = field(default_factory=dict)  # api key → versions
    coordinators: Coordinators | None = None  # the upstream's, for relayed group/txn requests
    sasl_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    librdkafka_fetch_wait_ms: int = LIBRDKAFKA_FETCH_WAIT_MS  # kafka.client_software

    @property
    def cluster_id(self) -> str:
        """The upstream cluster's id: the proxy's nodes stand for that cluster."""
        return self.upstream.cluster_id or "shareproxy"

    def address(self, conn: Connection) -> tuple[str, int]:
        """Where clients of the connection's listener reach this broker."""
        return self.advertised[conn.listener]

    def nodes(self, conn: Connection) -> list[tuple[int, str, int]]:
        """Every node of the placement with its address on the connection's listener: this
        one, then the live others (a node without that listener is left out)."""
        found = []
        for node_id in self.cluster.serving().nodes:
            endpoint = self.node_address(node_id, conn)
            if endpoint is not None:
                found.append((node_id, *endpoint))
        return found

    def node_address(self, node_id: int, conn: Connection) -> tuple[str, int] | None:
        if node_id == self.node_id:
            return self.address(conn)
        return self.cluster.endpoint(node_id, conn.listener)

    @property
    def leader_epoch(self) -> int:
        """The partitions' leader epoch: the cluster's generation, raised by every change of
        the live nodes, so clients take the newest leader over what they cached."""
        return self.cluster.serving().generation

    @property
    def controller_id(self) -> int:
        """The lowest live node id: every node names the same one."""
        return self.cluster.serving().nodes[0]

    def leader_of(self, topic_id: UUID, partition: int) -> int:
        return self.cluster.serving().partition_leader(topic_id, partition)

    def node_endpoints(self, cls: type[T], conn: Connection, node_ids: Iterable[int]) -> tuple:
        """KIP-951's NodeEndpoints: where the leaders named in an answer are reached, so a
        client sent elsewhere need not wait for a metadata refresh."""
        out = []
        for node_id in sorted(set(node_ids)):
            endpoint = self.node_address(node_id, conn)
            if endpoint is not None:
                host, port = endpoint
                out.append(build(cls, node_id=node_id, host=host, port=port, rack=None))
        return tuple(out)

    def allowed(
        self,
        conn: Connection,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        *,
        audit: bool = True,
    ) -> bool:
        return self.security.allowed(
            conn.principal, conn.client_host, operation, resource_type, name, audit=audit
        )

    def allowed_any(
        self, conn: Connection, operation: Operation, resource_type: ResourceType
    ) -> bool:
        return self.security.allowed_any(conn.principal, conn.client_host, operation, resource_type)

    def cluster_operations(self, conn: Connection) -> int:
        """The cluster's authorized-operations bitfield, as Kafka: 0 unless the principal may
        Describe the cluster."""
        if not self.allowed(
            conn, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False
        ):
            return 0
        return self.authorized_operations(conn, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_operations(
        self, conn: Connection, resource_type: ResourceType, name: str
    ) -> int:
        return self.security.authorized_operations(
            conn.principal, conn.client_host, resource_type, name
        )


@dataclass(frozen=True, slots=True)
class Pending:
    """A handler's answer still on its way: the request has gone upstream, and ``answer``
    yields the response body. The listener reads the connection's next request meanwhile
    and writes the answers in the order of the requests."""

    answer: Awaitable[Any]


ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class Connection:
    client_host: str
    client_port: int
    listener: str = "PLAINTEXT"
    principal: str = ANONYMOUS
    authenticated: bool = True  # False on a SASL listener until SaslAuthenticate succeeds
    sasl: SaslExchange | None = None
    close_after_response: bool = False  # a failed authentication ends the connection
    link: UpstreamLink | None = None  # its own upstream connections for forwarded requests
    one_leader_at_a_time: bool = False  # a librdkafka client (kafka.client_software)


def build(cls: type[T], **fields: Any) -> T:
    """Construct a kio entity of any version from the fields that version has."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in fields.items() if k in names})


def schema_module(cls: type) -> Any:
    """The kio module holding ``cls`` and its nested entity types (same API version)."""
    return sys.modules[cls.__module__]


def by_topic(
    partitions: Iterable[tuple[UUID, int]], make: Callable[[tuple[UUID, int]], T]
) -> dict[UUID, list[T]]:
    """Per-partition response entries grouped by topic id, in a stable order."""
    grouped: dict[UUID, list[T]] = {}
    for tp in sorted(set(partitions), key=lambda x: (str(x[0]), x[1])):
        grouped.setdefault(tp[0], []).append(make(tp))
    return grouped


def share_response(
    cls: type[T],
    topic_cls: type,
    topics: dict[UUID, list[Any]],
    lock_timeout: timedelta,
    code: int = 0,
    message: str | None = None,
    node_endpoints: tuple = (),
) -> T:
    """The envelope ShareFetch and ShareAcknowledge responses share."""
    return build(
        cls,
        throttle_time=timedelta(0),
        error_code=error(code),
        error_message=message,
        acquisition_lock_timeout=lock_timeout,
        responses=tuple(topic_cls(topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()),
        node_endpoints=node_endpoints,
    )


def error(code: int) -> KioErrorCode:
    return KioErrorCode(int(code))
