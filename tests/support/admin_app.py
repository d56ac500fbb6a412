"""The admin app on fakes, for tests of where its routes are answered: the collaborators
``create_app`` takes, each doing only what routing asks of it, and another node's admin API
that answers whatever is passed on to it as told and keeps what it was sent."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI, Request, Response

from shareproxy.admin.app import AdminServer, create_app
from shareproxy.admin.auth import token_hash
from shareproxy.admin.health import ReadinessProbes
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.runtime.cluster import NodeAddress
from shareproxy.runtime.groups.inflight_records import InFlightRecords

USERS = ("alice", "bob")


class Grants:
    """Security with a bearer token per user (the token is the user's name) and only the
    operations granted here allowed."""

    enabled = True

    def __init__(self) -> None:
        self.store = self
        self.granted: set[tuple[str, Operation, ResourceType, str]] = set()

    def grant(self, user: str, op: Operation, rtype: ResourceType, name: str) -> None:
        self.granted.add((f"User:{user}", op, rtype, name))

    async def token_user(self, hashed: str, now: object) -> str | None:
        return next((u for u in USERS if token_hash(u) == hashed), None)

    def credential(self, user: str, mechanism: str) -> object | None:
        return object() if user in USERS else None

    def allowed(self, principal, host, op, rtype, name, *, audit=True) -> bool:
        return (principal, op, rtype, name) in self.granted


class Places:
    """Where groups are coordinated and share-partitions led (absent: here), and the deletes
    made here (a route's body ran)."""

    # the runtime's rule for a release that ended no lock
    require_released_or_member = staticmethod(InFlightRecords.require_released_or_member)

    def __init__(self) -> None:
        self.coordinators: dict[str, NodeAddress] = {}
        self.leaders: dict[tuple[str, int], NodeAddress] = {}
        self.deleted: list[str] = []
        self.members: dict[str, set[str]] = {}  # of the groups coordinated here
        self.records = self  # GroupAdmin.records: where live records are

    def coordinated_elsewhere(self, group_id: str) -> NodeAddress | None:
        return self.coordinators.get(group_id)

    async def led_elsewhere(self, topic: str, partition: int) -> NodeAddress | None:
        return self.leaders.get((topic, partition))

    def leader_at(self, topic_id: object, partition: int) -> NodeAddress | None:
        return None

    async def delete_group(self, group_id: str) -> None:
        self.deleted.append(group_id)

    def member_known(self, group_id: str, member_id: str) -> bool | None:
        return member_id in self.members.get(group_id, set())

    async def release_member(self, group_id: str, member_id: str, authorize: Any) -> list[Any]:
        return []  # no locks held here


class Directory:
    """The live nodes: this one and ``peers``."""

    node_id = 1

    def __init__(self, peers: list[NodeAddress] | None = None) -> None:
        self._peers = peers or []

    def peers(self) -> list[NodeAddress]:
        return list(self._peers)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    port: int  # the calling side's: one connection kept, one port


class OtherNode:
    """Another node's admin API: each call reaching it is kept and answered with ``answer``."""

    def __init__(self, node_id: int = 2) -> None:
        self.node_id = node_id
        self.received: list[Received] = []
        self.answer = Response(status_code=204)
        self.app = FastAPI()
        self.app.add_api_route("/{path:path}", self._any, methods=["GET", "POST", "PUT", "DELETE"])

    async def _any(self, request: Request) -> Response:
        port = request.client.port if request.client else 0
        path = request.scope["raw_path"].decode()  # as it was sent
        self.received.append(Received(request.method, path, dict(request.headers), port))
        return self.answer

    def address(self, port: int) -> NodeAddress:
        url = f"http://127.0.0.1:{port}"
        return NodeAddress(self.node_id, f"proxy node {self.node_id} (admin API {url})", url)


def _bound() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[int]:
    """``app`` served on a port of its own, as the proxy serves its admin API."""
    server = AdminServer(app, _bound())
    await server.start()
    try:
        yield server.port
    finally:
        await server.stop()


@dataclass
class AdminNodes:
    """This node's admin app on fakes, and another node it passes calls on to."""

    grants: Grants
    places: Places
    other: OtherNode
    there: NodeAddress
    http: httpx.AsyncClient

    async def call(self, method: str, path: str, user: str | None = "alice", **kw: Any):
        headers = {"Authorization": f"Bearer {user}"} if user else {}
        return await self.http.request(method, path, headers=headers | kw.pop("headers", {}), **kw)


def admin_app(places: Places, grants: Grants, directory: Directory) -> FastAPI:
    probes = ReadinessProbes(store=_nothing, upstream=_nothing, listener=lambda: True, owned=dict)
    return create_app(probes, places, grants, object(), object(), directory)


async def _nothing() -> None:
    return None


@contextlib.asynccontextmanager
async def admin_nodes() -> AsyncIterator[AdminNodes]:
    """This node (served, so its client of the other nodes lives and ends with it) and one
    other node, live."""
    other = OtherNode()
    async with serving(other.app) as other_port:
        there = other.address(other_port)
        places, grants = Places(), Grants()
        app = admin_app(places, grants, Directory([there]))
        async with (
            serving(app) as port,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
        ):
            yield AdminNodes(grants, places, other, there, http)
