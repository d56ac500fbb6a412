"""The upstream cluster's own groups (classic and consumer groups), for ListGroups: each
upstream broker lists the groups it coordinates, so every broker is asked."""

from __future__ import annotations

import asyncio
import logging

from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import RelayContext
from shareproxy.kafka.responses import KioEntity
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import Request
from shareproxy.telemetry.logs import RateLimit
from shareproxy.upstream.client import UpstreamError

log = logging.getLogger(__name__)
log.addFilter(RateLimit())


async def listed(ctx: RelayContext, conn: Connection, request: Request) -> list[KioEntity]:
    """Every upstream broker's ListGroups entries; a broker that cannot answer is left out
    (and logged), as an admin client listing groups skips a broker that fails."""
    low, high = ctx.upstream_versions.get(ApiKey.LIST_GROUPS, (0, -1))
    if not low <= request.api_version <= high:
        return []  # the upstream cannot be asked in this version
    link = ctx.link(conn)
    nodes = ctx.upstream_brokers()
    answers = await asyncio.gather(
        *(link.send(node, request.body) for node in nodes), return_exceptions=True
    )
    found: list[KioEntity] = []
    for node, answer in zip(nodes, answers, strict=True):
        if isinstance(answer, UpstreamError) or getattr(answer, "error_code", None):
            log.warning("ListGroups: upstream node %d did not answer: %s", node, answer)
            continue
        if isinstance(answer, BaseException):
            raise answer
        found.extend(answer.groups)
    return found
