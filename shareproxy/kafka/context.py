"""What every request handler may use, and the per-connection facts it is given."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from shareproxy.core.acl import CLUSTER_NAME, Operation, ResourceType
from shareproxy.core.group_settings import GroupSettings
from shareproxy.kafka.connection_state import ConnectionState
from shareproxy.kafka.responses import node_endpoints
from shareproxy.protocol.codec import RawResponse
from shareproxy.runtime.cluster import ClusterNodes
from shareproxy.runtime.consuming import ShareConsumers
from shareproxy.runtime.groups import Coordinator, GroupAdmin
from shareproxy.security.credentials import ScramCredential
from shareproxy.security.guard import Security
from shareproxy.settings.model import LIBRDKAFKA_FETCH_WAIT_MS
from shareproxy.upstream.client import TopicInfo, Upstream, UpstreamError
from shareproxy.upstream.coordinators import Coordinators
from shareproxy.upstream.link import InFlight, UpstreamLink

T = TypeVar("T")

# How long a client's Metadata (or DescribeTopicPartitions) waits on the upstream's read when
# every topic it asks about is known already; then it is answered from what is known, as a
# broker answers from its cache, rather than after the upstream's whole request timeout (30 s,
# longer than clients wait) when the cluster hangs. A slower read goes on for later requests.
KNOWN_TOPICS_WAIT_S = 2.0


@dataclass
class BrokerContext:
    """Everything the handlers use, held once by the dispatcher. Handlers do not take it
    whole: each family names the narrow protocol it needs (``contexts.py``), which this
    satisfies through one-level methods."""

    node_id: int
    advertised: dict[str, tuple[str, int]]  # listener (security protocol) → host, port
    cluster: ClusterNodes  # the live proxy nodes and who owns what
    upstream: Upstream
    consumers: ShareConsumers  # fetch and acknowledge: the use cases the REST API calls too
    coordinator: Coordinator
    settings_for: Callable[[str], GroupSettings]
    clock_ms: Callable[[], int]
    security: Security
    admin: GroupAdmin  # the admin RPCs' implementation (shared with REST)
    coordinators: Coordinators  # the upstream's, for relayed group/txn requests
    served: Mapping[int, tuple[int, int]] = field(default_factory=dict)  # api key → versions
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
    def live_nodes(self) -> list[int]:
        """The ids of the proxy nodes serving now, lowest first."""
        return list(self.cluster.serving().nodes)

    @property
    def acls_enforced(self) -> bool:
        """Whether ACLs decide anything: without them every check allows."""
        return self.security.enabled

    @property
    def controller_id(self) -> int:
        """The lowest live node id: every node names the same one."""
        return self.cluster.serving().nodes[0]

    def leader_of(self, topic_id: UUID, partition: int) -> int:
        return self.cluster.serving().partition_leader(topic_id, partition)

    def group_coordinator(self, key: str) -> int:
        """The node the placement gives a group (or transactional id) to coordinate."""
        return self.cluster.serving().group_coordinator(key)

    # ------------------------------------------------------------------ the upstream cluster
    def topic(self, name: str) -> TopicInfo | None:
        return self.upstream.topics.get(name)

    def topic_by_id(self, topic_id: UUID | None) -> TopicInfo | None:
        return self.upstream.topics_by_id.get(topic_id) if topic_id is not None else None

    def topic_name(self, topic_id: UUID | None) -> str | None:
        info = self.topic_by_id(topic_id)
        return info.name if info is not None else None

    def known_topics(self) -> list[TopicInfo]:
        """The upstream topics the last metadata refresh found."""
        return list(self.upstream.topics.values())

    async def refresh_metadata(self, topics: list[str] | None = None) -> None:
        """Topic ids and partition leaders read again (all topics when ``topics`` is None); when
        every topic asked about is known, for ``KNOWN_TOPICS_WAIT_S`` at most."""
        known = self.upstream.topics
        if not known or (topics is not None and any(t not in known for t in topics)):
            await self.upstream.refresh_metadata(topics)
            return
        read = asyncio.ensure_future(self.upstream.refresh_metadata(topics))
        read.add_done_callback(_failure_retrieved)  # also of a read left to go on
        with contextlib.suppress(TimeoutError):  # answered from what is known
            await asyncio.wait_for(asyncio.shield(read), KNOWN_TOPICS_WAIT_S)

    def link(self, conn: Connection) -> UpstreamLink:
        """The connection's own upstream connections, opened on first use."""
        if conn.link is None:
            conn.link = UpstreamLink(self.upstream)
        return conn.link

    async def upstream_leader(self, topic: str, partition: int) -> int:
        return await self.upstream.leader_for(topic, partition)

    async def any_upstream_node(self) -> int:
        return await self.upstream.any_node()

    @property
    def upstream_controller(self) -> int:
        """The upstream controller's node id; -1 when unknown."""
        return self.upstream.controller_id

    def upstream_brokers(self) -> list[int]:
        """The node ids of every upstream broker known, in order."""
        return sorted({b.nodeId for b in self.upstream.client.cluster.brokers()})

    @property
    def upstream_versions(self) -> Mapping[int, tuple[int, int]]:
        """The API versions every upstream broker speaks."""
        return self.coordinators.versions

    async def coordinator_node(self, key_type: int, key: str) -> int:
        """The upstream node coordinating a group or transactional id."""
        return await self.coordinators.node_for(key_type, key)

    def coordinator_moved(self, key_type: int, key: str) -> None:
        self.coordinators.moved(key_type, key)

    # ------------------------------------------------------------------ security
    def credential(self, username: str, mechanism: str) -> ScramCredential | None:
        return self.security.credential(username, mechanism)

    def node_endpoints(
        self, cls: type[T], conn: Connection, node_ids: Iterable[int]
    ) -> tuple[T, ...]:
        """KIP-951's NodeEndpoints: where the leaders named in an answer are reached, so a
        client sent elsewhere need not wait for a metadata refresh."""
        found = []
        for node_id in sorted(set(node_ids)):
            endpoint = self.node_address(node_id, conn)
            if endpoint is not None:
                found.append((node_id, *endpoint))
        return node_endpoints(cls, found)

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
            conn.state.principal, conn.client_host, operation, resource_type, name, audit=audit
        )

    def allowed_any(
        self, conn: Connection, operation: Operation, resource_type: ResourceType
    ) -> bool:
        return self.security.allowed_any(
            conn.state.principal, conn.client_host, operation, resource_type
        )

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
            conn.state.principal, conn.client_host, resource_type, name
        )


@dataclass(frozen=True, slots=True)
class Pending:
    """A handler's answer still on its way: the request has gone upstream, and ``answer``
    yields the response body. The listener reads the connection's next request meanwhile
    and writes the answers in the order of the requests."""

    answer: Awaitable[Any]


@dataclass(frozen=True, slots=True)
class Relayed:
    """A request relayed whole, its answer on its way: once ``answer.future`` is done,
    ``finish`` makes the response body of its outcome (the broker's answer, or the
    UpstreamError there is instead), or a ``Pending`` one where more must be asked first. The
    listener calls it as the answer arrives and writes the response in that same round of the
    loop, with no task: what a relayed Produce or Fetch waits for beyond the broker."""

    answer: InFlight
    finish: Callable[[RawResponse | UpstreamError], Any]


@dataclass(slots=True)
class Connection:
    """One client connection as its handlers see it. Who it is and how far it has come with
    authentication is ``state``'s alone to change; the rest is what its requests share."""

    client_host: str
    client_port: int
    listener: str  # the listener's security protocol, which names it
    state: ConnectionState
    number: int = 0  # unique in the process (from 1): the share sessions it opens end with it
    link: UpstreamLink | None = None  # its own upstream connections for forwarded requests
    one_leader_at_a_time: bool = False  # a librdkafka client (kafka.client_software)


def _failure_retrieved(read: asyncio.Future[Any]) -> None:
    """A metadata read nobody awaits any more fails quietly: its caller answered already, and
    the upstream's failure is the upstream client's to report."""
    if not read.cancelled():
        read.exception()
