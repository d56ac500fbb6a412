"""Each REST route declares, as one dependency, what its caller must be allowed and where the
call is answered:

- ``group_call(op)``: ``op`` on the path's group; by the node coordinating the group;
- ``partition_call(op)``: ``op`` on the path's group and topic; by the node leading the
  share-partition (it holds the live records);
- ``every_node(op)``: ``op`` on the path's group; here, the other live nodes asked for what
  each holds of its own;
- ``this_node(op)``: ``op`` on the path's group; here (the store is shared);
- ``cluster_call(op)``: ``op`` on the cluster; here;
- ``anyone_this_node``: any authenticated caller; here;
- ``anyone_every_node``: any authenticated caller; here, the other live nodes asked too.

The dependency authorizes the caller before anything else, so a refused caller is answered
where it arrived, and then passes the call on where another node answers it: a handler runs
only on the node that answers, for a caller allowed to call it. A check that needs the
request's body (a topic it names) is the handler's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import FastAPI, Path, Request, Response

from shareproxy.admin.auth import Caller, CallerDep
from shareproxy.admin.forwarding import OtherNodes, PeerClient
from shareproxy.admin.params import GroupId, TopicName
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.runtime.directory import NodeDirectory
from shareproxy.runtime.groups import GroupAdmin

PartitionId = Annotated[int, Path(ge=0)]


@dataclass(frozen=True, slots=True)
class Routing:
    """What the dependencies route by: where groups are coordinated and partitions led, which
    nodes are live, and the client that calls them."""

    admin: GroupAdmin
    directory: NodeDirectory
    peers: PeerClient

    def others(self, request: Request) -> OtherNodes:
        return OtherNodes(request, self.peers, self.directory.peers)


@dataclass(frozen=True, slots=True)
class GroupCall:
    """A call about one group, its caller allowed, answered on this node."""

    caller: Caller
    group_id: str


@dataclass(frozen=True, slots=True)
class PartitionCall(GroupCall):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupGathering(GroupCall):
    """A call about one group answered here, with what the other nodes hold of it."""

    others: OtherNodes


@dataclass(frozen=True, slots=True)
class Gathering:
    """A call answered here, with what the other nodes hold."""

    caller: Caller
    others: OtherNodes


class _AnsweredThere(Exception):
    """Another node's answer to the call, returned as it is. FastAPI runs a route's handler
    once its dependencies return: only an exception ends the request from within one."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def install(app: FastAPI, routing: Routing) -> None:
    app.state.routing = routing

    @app.exception_handler(_AnsweredThere)
    async def answered_there(_: Request, exc: _AnsweredThere) -> Response:
        return exc.response


async def close(app: FastAPI) -> None:
    """Release what the routing holds, its client of the other nodes (an app without routing,
    such as a stand-in for another node, holds none)."""
    routing: Routing | None = getattr(app.state, "routing", None)
    if routing is not None:
        await routing.peers.close()


def _routing(request: Request) -> Routing:
    routing: Routing = request.app.state.routing  # set by install
    return routing


def group_call(op: Operation) -> Callable[..., Awaitable[GroupCall]]:
    """``op`` on the group; answered by the node that coordinates it."""

    async def at_coordinator(group_id: GroupId, caller: CallerDep, request: Request) -> GroupCall:
        caller.require(op, ResourceType.GROUP, group_id)
        routing = _routing(request)
        there = routing.admin.coordinated_elsewhere(group_id)
        if there is not None:
            held = f"share group {group_id!r} is coordinated by {there.described}"
            others = routing.others(request)
            refusal = ErrorCode.NOT_COORDINATOR
            raise _AnsweredThere(await others.answer_there(there, refusal, held, "coordinator"))
        return GroupCall(caller, group_id)

    return at_coordinator


def partition_call(op: Operation) -> Callable[..., Awaitable[PartitionCall]]:
    """``op`` on the group and on the topic; answered by the node leading the partition, which
    may not coordinate the group."""

    async def at_leader(
        group_id: GroupId,
        topic: TopicName,
        partition: PartitionId,
        caller: CallerDep,
        request: Request,
    ) -> PartitionCall:
        caller.require(op, ResourceType.GROUP, group_id)
        caller.require(op, ResourceType.TOPIC, topic)
        routing = _routing(request)
        there = await routing.admin.records.led_elsewhere(topic, partition)
        if there is not None:
            held = f"{topic}:{partition} is led by {there.described}"
            others = routing.others(request)
            refusal = ErrorCode.NOT_LEADER_OR_FOLLOWER
            raise _AnsweredThere(await others.answer_there(there, refusal, held, "leader"))
        return PartitionCall(caller, group_id, topic, partition)

    return at_leader


def every_node(op: Operation) -> Callable[..., Awaitable[GroupGathering]]:
    """``op`` on the group; answered here, with the other nodes asked for their part."""

    async def everywhere(group_id: GroupId, caller: CallerDep, request: Request) -> GroupGathering:
        caller.require(op, ResourceType.GROUP, group_id)
        return GroupGathering(caller, group_id, _routing(request).others(request))

    return everywhere


def this_node(op: Operation) -> Callable[..., Awaitable[GroupCall]]:
    """``op`` on the group; answered here: what it reads and changes is in the shared store."""

    async def here(group_id: GroupId, caller: CallerDep) -> GroupCall:
        caller.require(op, ResourceType.GROUP, group_id)
        return GroupCall(caller, group_id)

    return here


def cluster_call(op: Operation) -> Callable[..., Awaitable[Caller]]:
    """``op`` on the cluster; answered here (users, ACLs and tokens are in the shared store)."""

    async def here(caller: CallerDep) -> Caller:
        caller.require(op, ResourceType.CLUSTER)
        return caller

    return here


async def anyone_this_node(caller: CallerDep) -> Caller:
    """Any authenticated caller, for what it asks for itself (a token); answered here."""
    return caller


async def anyone_every_node(caller: CallerDep, request: Request) -> Gathering:
    """Any authenticated caller, as any client may list Kafka's brokers; answered here, with
    the other nodes asked for their part (what the caller may not see is the handler's to
    leave out)."""
    return Gathering(caller, _routing(request).others(request))
