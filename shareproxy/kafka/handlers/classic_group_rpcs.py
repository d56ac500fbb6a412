"""DescribeGroups and OffsetDelete, the classic-group APIs, when they name a share group.

Kafka's group coordinator holds every group type and answers these itself for a group of
another type (``GroupMetadataManager.describeGroups`` through ``classicGroup``, and
``ShareGroup.validateOffsetDelete``): the group is not a classic group, and a share group
keeps no committed offsets. The upstream cluster has never seen the proxy's share groups and
would describe one as an empty classic group, so the proxy answers for them; every other group
id goes upstream as before (``relay.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import AdminRpcContext
from shareproxy.kafka.handlers import relay
from shareproxy.kafka.responses import KioEntity, schema_module
from shareproxy.kafka.routes import ROUTES
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import RawResponse, Request, reader_for, response_type
from shareproxy.protocol.error_response import error_entity

# Kafka's state for a group DescribeGroups cannot describe (ClassicGroupState.DEAD)
DEAD = "Dead"
# from DescribeGroups v6 (KIP-1043) the entry carries the error; before, only the state tells
SAYS_NOT_FOUND_FROM = 6


_UPSTREAM_LACKS = "the upstream cluster does not delete committed offsets (OffsetDelete)"


def _not_classic(group_id: str) -> str:
    return f"Group {group_id} is not a classic group."


def _not_consumer(group_id: str) -> str:
    return f"Group {group_id} is not a consumer group."


async def _is_share_group(ctx: AdminRpcContext, group_id: str) -> bool:
    """Whether ``group_id`` is one of the proxy's share groups; an id no group can have is
    the upstream's to answer, as before."""
    try:
        return await ctx.admin.exists(group_id)
    except ShareError:
        return False


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
