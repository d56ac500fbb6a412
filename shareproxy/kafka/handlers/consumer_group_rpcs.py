"""The consumer-group APIs (classic and KIP-848) when they name one of the proxy's share groups.

Kafka's group coordinator holds every type of group under one namespace, and answers these APIs
itself for a group of another type (``GroupMetadataManager``: ``classicGroupJoin``,
``classicGroupSync``, ``classicGroupHeartbeat``, ``classicGroupLeave``, ``consumerGroup``,
``describeGroups`` through ``classicGroup``; ``ShareGroup.validateOffsetCommit``,
``validateOffsetFetch`` and ``validateOffsetDelete``). The upstream cluster has never seen the
proxy's share groups and would take one for a new classic group, so the proxy answers for them
once the request's permissions are checked, as ``KafkaApis`` checks them first; every other group
id goes upstream as before (``relay.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import AdminRpcContext
from shareproxy.kafka.handlers import relay
from shareproxy.kafka.responses import KioEntity, schema_module
from shareproxy.kafka.routes import ROUTES, Allowed, Route, entry_refusals, refusal
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import RawResponse, Request, reader_for, response_type
from shareproxy.protocol.error_response import error_entity, list_entry_type

# Kafka's state for a group DescribeGroups cannot describe (ClassicGroupState.DEAD)
DEAD = "Dead"
# from DescribeGroups v6 (KIP-1043) the entry carries the error; before, only the state tells
SAYS_NOT_FOUND_FROM = 6
# LeaveGroup v3+ answers each member it names (KIP-345); before, the request's one member
MEMBERS_FROM = 3
# what OffsetFetch reads for a partition of a group with no offsets: no offset, no epoch
NO_OFFSET = {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""}

_UPSTREAM_LACKS = "the upstream cluster does not delete committed offsets (OffsetDelete)"


def _not_classic(group_id: str) -> str:
    return f"Group {group_id} is not a classic group."


def _not_consumer(group_id: str) -> str:
    return f"Group {group_id} is not a consumer group."


async def _is_share_group(ctx: AdminRpcContext, group_id: str | None) -> bool:
    """Whether ``group_id`` is one of the proxy's share groups; an id no group can have is the
    upstream's to answer, as before."""
    return bool(group_id) and await ctx.admin.is_share_group(group_id or "")


async def handle(
    ctx: AdminRpcContext, conn: Connection, request: Request
) -> RawResponse | KioEntity:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit, OffsetFetch,
    ConsumerGroupHeartbeat and ConsumerGroupDescribe: relayed, unless they name a share group."""
    api = ApiKey(request.api_key)
    route = ROUTES[api]
    body = request.body
    if route.split is not None and hasattr(body, route.split.items):  # several groups
        ids = {route.split.key(item) for item in getattr(body, route.split.items)}
        ours = {g for g in ids if await _is_share_group(ctx, g)}
        if not ours:
            return await relay.handle(ctx, conn, request)
        entry_cls = list_entry_type(
            response_type(request.api_key, request.api_version), route.split.results
        )
        answer = _GROUP_ENTRIES[api]
        key = route.split.key

        def own(item: Any) -> KioEntity | None:
            return answer(entry_cls, item) if key(item) in ours else None

        return await relay.split(ctx, conn, request, route, route.split, own)
    if not await _is_share_group(ctx, route.key(body)):
        return await relay.handle(ctx, conn, request)
    allowed = relay.allowed_for(ctx, conn)
    refused = refusal(allowed, route, body)
    if refused is not None:
        return relay.answer_error(request, route, *refused)
    return await _ANSWERS[api](ctx, conn, request, route, allowed)


# how a request naming a share group is answered, once its permissions are checked
Answer = Callable[[AdminRpcContext, Connection, Request, Route, Allowed], Awaitable[KioEntity]]


async def _join(
    ctx: AdminRpcContext, conn: Connection, request: Request, route: Route, allowed: Allowed
) -> KioEntity:
    """A classic member cannot join a group of another type: no member id is given."""
    cls = response_type(request.api_key, request.api_version)
    return error_entity(cls, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, None)


async def _unknown_member(
    ctx: AdminRpcContext, conn: Connection, request: Request, route: Route, allowed: Allowed
) -> KioEntity:
    """SyncGroup and Heartbeat: the group is not found, so neither is the member."""
    cls = response_type(request.api_key, request.api_version)
    return error_entity(cls, ErrorCode.UNKNOWN_MEMBER_ID, None)


async def _leave(
    ctx: AdminRpcContext, conn: Connection, request: Request, route: Route, allowed: Allowed
) -> KioEntity:
    """Each member named is unknown (``GroupCoordinatorService.leaveGroup``); the request as
    a whole succeeds from v3, where the answer lists its members."""
    cls = response_type(request.api_key, request.api_version)
    if request.api_version < MEMBERS_FROM:
        return error_entity(cls, ErrorCode.UNKNOWN_MEMBER_ID, None)
    answer = error_entity(cls, ErrorCode.UNKNOWN_MEMBER_ID, None, request.body)
    return dataclasses.replace(answer, error_code=ErrorCode.NONE)


async def _per_topic(
    code: int,
    message: str,
    ctx: AdminRpcContext,
    conn: Connection,
    request: Request,
    route: Route,
    allowed: Allowed,
) -> KioEntity:
    """Each topic the principal may not use is refused as usual, each other one answers
    ``code``; nothing is sent upstream."""
    body = request.body
    assert route.entries is not None
    items = route.entries.of(body)
    asked = getattr(body, items) if items is not None else None
    if asked is None:  # OffsetFetch of every topic: a share group has committed none
        cls = response_type(request.api_key, request.api_version)
        return error_entity(cls, ErrorCode.NONE, None)
    problems = dict.fromkeys(range(len(asked)), (code, message))
    problems.update(entry_refusals(allowed, route, body))
    return await relay.partly_refused(ctx, conn, request, route, problems)


async def _commit(
    ctx: AdminRpcContext, conn: Connection, request: Request, route: Route, allowed: Allowed
) -> KioEntity:
    """OffsetCommit and TxnOffsetCommit: a share group keeps no committed offsets."""
    group_id = request.body.group_id
    return await _per_topic(
        ErrorCode.GROUP_ID_NOT_FOUND, _not_consumer(group_id), ctx, conn, request, route, allowed
    )


async def _fetch_offsets(
    ctx: AdminRpcContext, conn: Connection, request: Request, route: Route, allowed: Allowed
) -> KioEntity:
    """OffsetFetch before v8: no offset for any partition, as for a group with none."""
    return await _per_topic(ErrorCode.NONE, "", ctx, conn, request, route, allowed)


async def _consumer_heartbeat(
    ctx: AdminRpcContext, conn: Connection, request: Request, route: Route, allowed: Allowed
) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    return error_entity(cls, ErrorCode.GROUP_ID_NOT_FOUND, _not_consumer(request.body.group_id))


_ANSWERS: dict[ApiKey, Answer] = {
    ApiKey.JOIN_GROUP: _join,
    ApiKey.SYNC_GROUP: _unknown_member,
    ApiKey.HEARTBEAT: _unknown_member,
    ApiKey.LEAVE_GROUP: _leave,
    ApiKey.OFFSET_COMMIT: _commit,
    ApiKey.TXN_OFFSET_COMMIT: _commit,
    ApiKey.OFFSET_FETCH: _fetch_offsets,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_heartbeat,
}


def _offsets_group(entry_cls: type, item: Any) -> KioEntity:
    """OffsetFetch v8+: the group's entry with no offset for any partition it names."""
    topics = getattr(item, "topics", None)
    source = item if topics is not None else dataclasses.replace(item, topics=())
    return error_entity(
        entry_cls, ErrorCode.NONE, None, source, {"partitions": "partition_indexes"}, NO_OFFSET
    )


def _described(entry_cls: type, item: Any) -> KioEntity:
    """ConsumerGroupDescribe: not a consumer group."""
    entry = error_entity(entry_cls, ErrorCode.GROUP_ID_NOT_FOUND, _not_consumer(item))
    return dataclasses.replace(entry, group_id=item)


_GROUP_ENTRIES: dict[ApiKey, Callable[[type, Any], KioEntity]] = {
    ApiKey.OFFSET_FETCH: _offsets_group,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _described,
}

# the APIs ``handle`` serves
HANDLED = frozenset(_ANSWERS) | frozenset(_GROUP_ENTRIES)


async def describe_groups(
    ctx: AdminRpcContext, conn: Connection, request: Request
) -> RawResponse | KioEntity:
    """A share group is described as Kafka describes a group that is not classic: Dead, no
    protocol, no members, with GROUP_ID_NOT_FOUND from v6; the rest are relayed."""
    body = request.body
    ours = [g for g in dict.fromkeys(body.groups) if await _is_share_group(ctx, g)]
    if not ours:
        return await relay.handle(ctx, conn, request)
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    answered: dict[str, Any] = {}
    for group_id in ours:
        if not ctx.allowed(conn, Operation.DESCRIBE, ResourceType.GROUP, group_id):
            code, message = ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized"
        elif request.api_version >= SAYS_NOT_FOUND_FROM:
            code, message = ErrorCode.GROUP_ID_NOT_FOUND, _not_classic(group_id)
        else:
            code, message = ErrorCode.NONE, None
        entry = error_entity(m.DescribedGroup, code, message)
        answered[group_id] = dataclasses.replace(
            entry,
            group_id=group_id,
            group_state=DEAD if code != ErrorCode.GROUP_AUTHORIZATION_FAILED else "",
        )
    theirs = tuple(g for g in body.groups if g not in answered)
    base = error_entity(cls, ErrorCode.NONE, None)
    if theirs:
        route = ROUTES[ApiKey.DESCRIBE_GROUPS]
        assert route.split is not None
        asked = dataclasses.replace(
            request, body=dataclasses.replace(body, groups=theirs), raw_body=b""
        )
        base = await relay.split(ctx, conn, asked, route, route.split)
        if isinstance(base, RawResponse):
            base, _ = reader_for(cls)(bytes(base.body), 0)
        for entry in base.groups:
            answered.setdefault(entry.group_id, entry)
    return dataclasses.replace(base, groups=tuple(answered[g] for g in body.groups))


async def offset_delete(
    ctx: AdminRpcContext, conn: Connection, request: Request
) -> RawResponse | KioEntity:
    """A share group has no committed offsets to delete: after the group's Delete permission
    (``KafkaApis.handleOffsetDeleteRequest``), GROUP_ID_NOT_FOUND for the whole request, as the
    coordinator's failure answers it. Other groups are relayed where the upstream has the API;
    where it lacks it they answer UNSUPPORTED_VERSION, the proxy being unable to do it."""
    group_id = request.body.group_id
    cls = response_type(request.api_key, request.api_version)
    if not await _is_share_group(ctx, group_id):
        low, high = ctx.upstream_versions.get(ApiKey.OFFSET_DELETE, (0, -1))
        if low <= request.api_version <= high:
            return await relay.handle(ctx, conn, request)
        return error_entity(cls, ErrorCode.UNSUPPORTED_VERSION, _UPSTREAM_LACKS)
    if not ctx.allowed(conn, Operation.DELETE, ResourceType.GROUP, group_id):
        return error_entity(cls, ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized")
    return error_entity(cls, ErrorCode.GROUP_ID_NOT_FOUND, _not_consumer(group_id))
