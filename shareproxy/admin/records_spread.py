"""The HTTP records API across the nodes of a cluster: each node holds the acquisition locks of
the share-partitions it leads, so a fetch reaching any node is made on every live node leading
some of the requested partitions, and an acknowledgement is applied where its partition is led.
A call passed on is answered where it lands, from what that node leads."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from uuid import UUID

from shareproxy.admin.forwarding import CONNECT_TIMEOUT_S, CoordinatorUnreachable, OtherNodes
from shareproxy.runtime.cluster import NodeAddress
from shareproxy.telemetry.logs import first_line

T = TypeVar("T")

log = logging.getLogger(__name__)

# a peer answers a fetch within its max_wait; this much more for the call itself
FETCH_ANSWER_MARGIN_S = 10.0


def by_leader(
    partitions: Iterable[tuple[UUID, int]],
    leader_at: Callable[[UUID, int], NodeAddress | None],
    passed_on: bool,
) -> tuple[list[tuple[UUID, int]], dict[int, tuple[NodeAddress, list[tuple[UUID, int]]]]]:
    """The partitions this node answers for, and those of each other node by node id. A call
    passed on is answered here for all of them (it is never passed on twice)."""
    here: list[tuple[UUID, int]] = []
    elsewhere: dict[int, tuple[NodeAddress, list[tuple[UUID, int]]]] = {}
    for tp in partitions:
        node = None if passed_on else leader_at(*tp)
        if node is None:
            here.append(tp)
        else:
            elsewhere.setdefault(node.node_id, (node, []))[1].append(tp)
    return here, elsewhere


def shares(max_records: int, counts: list[int]) -> list[int]:
    """``max_records`` split in proportion to the partitions each node leads, at least 1 each."""
    total = sum(counts) or 1
    return [max(1, max_records * count // total) for count in counts]


async def answer_of(
    others: OtherNodes,
    node: NodeAddress,
    body: dict[str, Any],
    parse: Callable[[Any], T],
    wait_ms: int = 0,
) -> T | str:
    """The node's answer to the call made there with ``body``, read by ``parse``; or why there
    is none (not reachable, no admin API address, an error status, a body not understood)."""
    if not node.admin_url:
        return f"{node.described}: no admin API address"
    try:
        answer = await others.call_on(
            node,
            content=json.dumps(body).encode(),
            answer_timeout_s=wait_ms / 1000 + FETCH_ANSWER_MARGIN_S + CONNECT_TIMEOUT_S,
        )
    except CoordinatorUnreachable:  # why is in the warning it logged
        return f"{node.described}: not reachable"
    text = bytes(answer.body)
    if answer.status_code != 200:
        return f"{node.described}: HTTP {answer.status_code} {text[:300].decode(errors='replace')}"
    try:
        return parse(json.loads(text))
    except ValueError as exc:  # pydantic's ValidationError is one too
        why = f"{node.described}: answer not understood ({first_line(exc)})"
        log.warning(
            "%s %s: %s; what it did (records it acquired, acknowledgements it applied) is "
            "not in this answer: records acquired there are redelivered once their locks "
            "time out",
            others.request.method,
            others.request.url.path,
            why,
            extra={"node": node.node_id},
        )
        return why
